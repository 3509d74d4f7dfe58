"""The truncated sampler's shipped kernel specializations compile for sm_90a (triton ships ptxas) without spills.

Stage 1 at the tiles :func:`flashsampling.kernels.truncation.truncation_tiles` picks for each batch band (lists of 16,
with the tiles' float64 masses, and with the plain epilogue at 32 rows), the logits stage 1, and stage 2 for top-k
alone and for the default order with all three filters (on lists, the fallback's pass on whole rows, and with the
host's thresholds given), and the fallback's recomputation of the logits -- the
specializations ``benchmarks/sass_fingerprint.py`` fingerprints.  Spills would be local-memory traffic in the
epilogue; ``benchmarks/NOTES.md`` records the wider tiles that do spill (64 x 256 and 128 x 128 at 8 warps).

Time: about 60 s on two cores (one compiled-mode process).
"""

from __future__ import annotations

import pytest

from tests.sm90 import PTXAS, SHARED_BYTES, assert_no_spills, compile_all

KERNELS = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from flashsampling.kernels import truncation, truncation_stage2

TYPES = {"h_ptr": "*bf16", "w_ptr": "*bf16", "z_ptr": "*fp32", "inv_temp_ptr": "*fp32", "mass_t_ptr": "*fp64",
         "cand_z_ptr": "*fp32", "cand_i_ptr": "*i32", "mass_ptr": "*fp64", "flag_ptr": "*i32", "part_max_ptr": "*fp32",
         "part_key_ptr": "*i64", "part_idx_ptr": "*i64", "lse_ptr": "*fp32", "logits_ptr": "*fp32",
         "row_id_ptr": "*i32", "k_ptr": "*i32", "p_ptr": "*fp64", "log_min_p_ptr": "*fp64", "temp_ptr": "*fp64",
         "given_v_ptr": "*i32", "given_b_ptr": "*i32", "kz_ptr": "*fp32", "ki_ptr": "*i32", "kw_ptr": "*fp64",
         "token_ptr": "*i64", "row_flag_ptr": "*i32", "status_ptr": "*i32", "rel_err_ptr": "*fp64",
         "stride_cb": "i64", "stride_cv": "i64"}

def compile_kernel(fn, constexprs, options):
    names = fn.arg_names
    sig = {n: ("constexpr" if n in constexprs else TYPES.get(n, "i32")) for n in names}
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if sig[n].startswith("*")}
    src = ASTSource(fn=fn, signature=sig, constexprs={(names.index(k),): v for k, v in constexprs.items()},
                    attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)

def stage1(B, mass, full, write=False):
    t = truncation.truncation_tiles(B, 2, full)
    c = {"stride_hd": 1, "stride_wd": 1, "WIDE_K": False, **t.matmul_constants(False), "LIST": 16, "MASS": mass,
         "FULL": full, "WRITE": write, "N_ROUNDS": 10, "PAIRED": True, "NOISE": True}
    options = {"num_warps": t.num_warps, "num_stages": t.num_stages}
    return compile_kernel(truncation.truncation_stage1_kernel, c, options)

def stage2(steps, mode):
    whole = mode != "lists"
    c = {"BLOCK_R": 1, "CH": 4096, "CAP": 1 if whole else 8192, "BLOCK_T": 1024, "LIST": 0 if whole else 16,
         "MASS": steps[2] != 0 and not whole, "WEIGHTS": steps[2] != 0, "TOP_P_SCALED": True, "STEP0": steps[0],
         "STEP1": steps[1], "STEP2": steps[2], "STEP3": steps[3], "COLUMNS": whole, "REDO": mode == "redo",
         "FORCE": mode == "redo", "GIVEN": mode == "given", "ROW_IDS": mode == "given", "N_ROUNDS": 10,
         "NOISE": True}
    return compile_kernel(truncation_stage2.truncation_stage2_kernel, c, {"num_warps": 8})

logits = {"stride_zv": 1, "BLOCK_SIZE_B": 4, "BLOCK_SIZE_V": 1024, "LIST": 32, "MASS": True, "FULL": False,
          "N_ROUNDS": 10, "PAIRED": True, "NOISE": True}
KERNELS = {
    "stage1-b16": lambda: stage1(16, False, False),
    "stage1-b16-mass": lambda: stage1(16, True, False),
    "stage1-b32-full": lambda: stage1(32, False, True),
    "stage1-b64": lambda: stage1(64, False, False),
    "stage1-b256-mass": lambda: stage1(256, True, False),
    "stage1-b64-write": lambda: stage1(64, False, False, True),
    "logits": lambda: compile_kernel(truncation.truncation_logits_stage1_kernel, logits, {"num_warps": 4}),
    "stage2-topk": lambda: stage2((1, 18, 0, 0), "lists"),
    "stage2-default": lambda: stage2((1, 18, 19, 20), "lists"),
    "stage2-redo": lambda: stage2((1, 18, 19, 20), "redo"),
    "stage2-given": lambda: stage2((1, 18, 19, 20), "given"),
}
"""
NAMES = ["stage1-b16", "stage1-b16-mass", "stage1-b32-full", "stage1-b64", "stage1-b256-mass", "stage1-b64-write",
         "logits", "stage2-topk", "stage2-default", "stage2-redo", "stage2-given"]  # fmt: skip


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return compile_all(KERNELS, tmp_path_factory.mktemp("truncation"))


@pytest.mark.skipif(not PTXAS.exists(), reason="triton without ptxas")
@pytest.mark.parametrize("name", NAMES)
def test_compiles_for_sm90_without_spills(name, built, tmp_path):
    rec = built[name]
    assert "error" not in rec, rec.get("error")
    assert rec["shared"] <= SHARED_BYTES
    assert_no_spills(tmp_path, rec["ptx"], 255, exact_registers=False)
