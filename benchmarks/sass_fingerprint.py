"""Fingerprints of the shipped kernels' machine code for sm_90a, compiled here without a GPU.

A refactor of the package must not change what the H200 runs: this script compiles every shipped kernel
specialization that ``sample()`` and its variants launch on an H200 (the Gluon stage 1 at the default tiles of
each batch-size band, with and without noise, and the tile inverse-CDF stream; the Triton stage 1 at the default
tiles; the logits, stage-2, temperature and combine kernels; the fused truncated sampler's, :func:`truncation_kernels`),
disassembles each with the ``nvdisasm`` that Triton ships, and prints the instruction count and the md5 of the
instruction text (addresses and encodings stripped).  Equal fingerprints before and after a change mean the same
SASS, instruction for instruction, so no GPU rerun is needed to know that the speed is unchanged.

Usage::

    FLASHSAMPLING_INTERPRET=0 python benchmarks/sass_fingerprint.py [--json OUT.json] [--only NAME,...]

The Triton kernels are compiled from their source with an explicit signature (pointers 16-byte aligned, as the
launches' buffers are); the Gluon kernel through :func:`flashsampling.kernels.pingpong.compile_offline`, with the
sampler's epilogue or the tile inverse-CDF stream's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("FLASHSAMPLING_INTERPRET", "0")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import triton  # noqa: E402

from flashsampling.kernels import (  # noqa: E402
    persistent,
    pingpong,
    stage1,
    stage2,
    temperature,
    truncation,
    truncation_stage2,
)
from flashsampling.kernels.tiles import default_tiles, warp_specialized_tiles  # noqa: E402
from flashsampling.tile_cdf.fused import tile_cdf_epilogue  # noqa: E402

NVDISASM = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")


def instruction_text(cubin: bytes) -> list[str]:
    """The cubin's instructions, one per line, without addresses, encodings or labels."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([str(NVDISASM), "-c", f.name], capture_output=True, text=True, check=True).stdout
    return [m.group(1) for m in map(_INSTRUCTION.search, out.splitlines()) if m]


def fingerprint(cubin: bytes) -> dict:
    ins = instruction_text(cubin)
    return {"instructions": len(ins), "md5": hashlib.md5("\n".join(ins).encode()).hexdigest()}


def compile_triton(fn, types: dict[str, str], constexprs: dict[str, object], options: dict) -> bytes:
    """Compile the Triton JIT function ``fn`` for sm_90a: ``types`` gives each non-constexpr argument's type
    (``*bf16``, ``i32``, ...), ``constexprs`` the compile-time constants; pointers are marked 16-byte aligned."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = fn.arg_names
    # Compile-time parameters with a default (e.g. stage 1's SEED_PTR) take it, as a launch would.
    constexprs = {**{p.name: p.default for p in fn.params if p.is_constexpr and p.has_default}, **constexprs}
    signature = {n: ("constexpr" if n in constexprs else types[n]) for n in names}
    aligned = [[(i,), [["tt.divisibility", 16]]] for i, n in enumerate(names) if signature[n].startswith("*")]
    attrs = {k: v for k, v in aligned}
    src = ASTSource(fn=fn, signature=signature, constexprs={(names.index(k),): v for k, v in constexprs.items()},
                    attrs=attrs)  # fmt: skip
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options).asm["cubin"]


def kernels() -> dict:
    """``name -> zero-argument function returning the cubin`` for every shipped specialization."""
    out = {}
    # 16 < B <= 32 (on a full last wave) and B > 64 share the 64 x 256 tiles; 32 < B <= 64 has its own.
    for band, B in (("b64", 64), ("b256", 256)):
        tiles = warp_specialized_tiles(B)
        out[f"gluon-{band}-exact"] = lambda t=tiles: pingpong.compile_offline(t).asm["cubin"]
    wide = warp_specialized_tiles(256)
    out["gluon-b256-no-noise"] = lambda: pingpong.compile_offline(wide, noise=False).asm["cubin"]
    out["gluon-b64-no-noise"] = lambda: pingpong.compile_offline(warp_specialized_tiles(64), noise=False).asm["cubin"]
    out["gluon-tile-cdf"] = lambda: pingpong.compile_offline(wide, epilogue=tile_cdf_epilogue).asm["cubin"]

    ptr = {"h_ptr": "*bf16", "w_ptr": "*bf16", "z_ptr": "*fp32", "inv_temp_ptr": "*fp32", "part_max_ptr": "*fp32",
           "part_key_ptr": "*i64", "part_idx_ptr": "*i64", "flag_ptr": "*i32", "lse_ptr": "*fp32",
           "scratch_ptr": "*fp32"}  # fmt: skip

    def ints(fn, **more):
        return {n: more.get(n, ptr.get(n, "i32")) for n in fn.arg_names}

    for B in (16, 32, 64):
        t = default_tiles(B, 151936, 4096, 2)
        for noise in (True, False):
            const = {"stride_hd": 1, "stride_wd": 1, "WIDE_K": False, "BLOCK_SIZE_B": t.block_b,
                     "BLOCK_SIZE_V": t.block_v, "BLOCK_SIZE_D": t.block_d, "UPCAST": False, "INPUT_PRECISION": "tf32",
                     "N_ROUNDS": 10, "RETURN_LSE": False, "PAIRED": True, "NOISE": noise,
                     "EPILOGUE_V": t.epilogue_v}  # fmt: skip
            name = f"triton-stage1-b{B}" + ("" if noise else "-no-noise")
            out[name] = lambda t=t, c=const: compile_triton(
                stage1.fused_stage1_kernel,
                ints(stage1.fused_stage1_kernel),
                c,
                {"num_warps": t.num_warps, "num_stages": t.num_stages},
            )
    for B in (128, 256):  # the persistent TMA kernel: several samples or log-masses at B > 64
        t = default_tiles(B, 151936, 4096, 2)
        for lse in (False, True):
            const = {"BLOCK_SIZE_B": t.block_b, "BLOCK_SIZE_V": t.block_v, "BLOCK_SIZE_D": t.block_d,
                     "NUM_PROGRAMS": 132, "UPCAST": False, "INPUT_PRECISION": "tf32", "N_ROUNDS": 10,
                     "RETURN_LSE": lse, "PAIRED": True, "NOISE": True, "EPILOGUE_V": t.epilogue_v,
                     "FLATTEN": True}  # fmt: skip
            descs = {"h_desc": f"tensordesc<bf16[{t.block_b}, {t.block_d}]>",
                     "w_desc": f"tensordesc<bf16[{t.block_v}, {t.block_d}]>"}  # fmt: skip
            out[f"triton-persistent-b{B}" + ("-lse" if lse else "")] = lambda t=t, c=const, d=descs: compile_triton(
                persistent.fused_persistent_kernel,
                ints(persistent.fused_persistent_kernel, **d),
                c,
                {"num_warps": t.num_warps, "num_stages": t.num_stages},
            )
    for lse in (False, True):
        const = {"stride_zv": 1, "BLOCK_SIZE_B": 4, "BLOCK_SIZE_V": 1024, "N_ROUNDS": 10, "RETURN_LSE": lse,
                 "PAIRED": True, "NOISE": True}  # fmt: skip
        out["triton-logits" + ("-lse" if lse else "")] = lambda c=const: compile_triton(
            stage1.logits_stage1_kernel, ints(stage1.logits_stage1_kernel), c, {"num_warps": 4}
        )
    out["triton-reduce"] = lambda: compile_triton(
        stage2.reduce_tiles_kernel,
        ints(stage2.reduce_tiles_kernel, token_ptr="*i64", row_flag_ptr="*i32"),
        {"BLOCK_SIZE_T": 1024},
        {"num_warps": 4},
    )
    out["triton-temperature"] = lambda: compile_triton(
        temperature.inverse_temperature_kernel, ints(temperature.inverse_temperature_kernel, t_ptr="*fp32",
                                                     inv_ptr="*fp32"),
        {"BLOCK": 256, "FLAG": 8}, {"num_warps": 4})  # fmt: skip

    out.update(combine_kernels())
    out.update(truncation_kernels())
    return out


def truncation_kernels() -> dict:
    """The fused truncated sampler's kernels (:mod:`flashsampling.kernels.truncation`, ``truncation_stage2``) at the
    tiles ``sample(..., top_k=, top_p=, min_p=)`` picks: stage 1 per batch band with 16-entry lists, with the tiles'
    masses, and (32 rows) with the plain epilogue of a batch mixing untruncated rows; the logits stage 1 at its
    4 x 1024 tiles; stage 2 for top-k alone and for the default order with all three filters, deciding and given."""
    out = {}
    types = {"h_ptr": "*bf16", "w_ptr": "*bf16", "z_ptr": "*fp32", "inv_temp_ptr": "*fp32", "mass_t_ptr": "*fp64",
             "cand_z_ptr": "*fp32", "cand_i_ptr": "*i32", "mass_ptr": "*fp64", "flag_ptr": "*i32",
             "part_max_ptr": "*fp32", "part_key_ptr": "*i64", "part_idx_ptr": "*i64", "lse_ptr": "*fp32",
             "logits_ptr": "*fp32", "row_id_ptr": "*i32", "k_ptr": "*i32", "p_ptr": "*fp64", "log_min_p_ptr": "*fp64",
             "temp_ptr": "*fp64", "given_v_ptr": "*i32", "given_b_ptr": "*i32", "kz_ptr": "*fp32", "ki_ptr": "*i32",
             "kw_ptr": "*fp64", "token_ptr": "*i64", "row_flag_ptr": "*i32", "status_ptr": "*i32",
             "rel_err_ptr": "*fp64", "stride_cb": "i64", "stride_cv": "i64"}  # fmt: skip

    def ints(fn):
        return {n: types.get(n, "i32") for n in fn.arg_names}

    def epilogue(mass: bool, full: bool) -> dict:
        return {"LIST": 16, "MASS": mass, "FULL": full, "N_ROUNDS": 10, "PAIRED": True, "NOISE": True}

    for B in (16, 32, 64, 256):
        for mass, full in ((False, False), (True, False), (False, True)):
            if full and B != 32:
                continue
            t = truncation.truncation_tiles(B, 2, full)
            const = {"stride_hd": 1, "stride_wd": 1, "WIDE_K": False, **t.matmul_constants(False),
                     **epilogue(mass, full), "WRITE": False}  # fmt: skip
            if B == 64 and not mass and not full:  # the fallback's recomputation of the logits, at the same tiles
                write = {**const, "WRITE": True}
                out["triton-truncation-stage1-b64-write"] = lambda t=t, c=write: compile_triton(
                    truncation.truncation_stage1_kernel,
                    ints(truncation.truncation_stage1_kernel),
                    c,
                    {"num_warps": t.num_warps, "num_stages": t.num_stages},
                )
            name = f"triton-truncation-stage1-b{B}" + ("-mass" if mass else "") + ("-full" if full else "")
            out[name] = lambda t=t, c=const: compile_triton(
                truncation.truncation_stage1_kernel,
                ints(truncation.truncation_stage1_kernel),
                c,
                {"num_warps": t.num_warps, "num_stages": t.num_stages},
            )
    const = {"stride_zv": 1, "BLOCK_SIZE_B": 4, "BLOCK_SIZE_V": 1024, **epilogue(True, False)}
    out["triton-truncation-logits"] = lambda c=const: compile_triton(
        truncation.truncation_logits_stage1_kernel, ints(truncation.truncation_logits_stage1_kernel), c,
        {"num_warps": 4},
    )  # fmt: skip
    chains = {"topk": (1, 2 | 16, 0, 0), "default": (1, 2 | 16, 3 | 16, 4 | 16)}
    for name, steps in chains.items():
        for mode in ("lists", "redo", "given"):
            if mode != "lists" and name == "topk":
                continue
            whole = mode != "lists"
            const = {"BLOCK_R": 1, "CH": 4096, "CAP": 1 if whole else 8192, "BLOCK_T": 1024, "LIST": 0 if whole else 16,
                     "MASS": name != "topk" and not whole, "WEIGHTS": name != "topk", "TOP_P_SCALED": True,
                     "STEP0": steps[0], "STEP1": steps[1], "STEP2": steps[2], "STEP3": steps[3], "COLUMNS": whole,
                     "REDO": mode == "redo", "FORCE": mode == "redo", "GIVEN": mode == "given",
                     "ROW_IDS": mode == "given", "N_ROUNDS": 10, "NOISE": True}  # fmt: skip
            out[f"triton-truncation-stage2-{name}-{mode}"] = lambda c=const: compile_triton(
                truncation_stage2.truncation_stage2_kernel, ints(truncation_stage2.truncation_stage2_kernel), c,
                {"num_warps": 8},
            )  # fmt: skip
    return out


def combine_kernels() -> dict:
    """The grouped/online/TP second-stage kernels, at the block sizes their launchers choose for a small case."""
    out = {}
    for name in ("reduce_candidates_kernel", "combine_groups_kernel", "online_merge_kernel"):
        fn = getattr(stage2, name, None)
        if fn is None:
            continue
        out[f"triton-{name.removesuffix('_kernel').replace('_', '-')}"] = lambda fn=fn: compile_combine(fn)
    # The factorized group draw (grouped, online-free TP, tile inverse-CDF): the Gumbel-max over log-masses.
    out["triton-combine-groups-factorized"] = lambda: compile_combine(stage2.combine_groups_kernel, PATHWISE=False)
    return out


def compile_combine(fn, **constants) -> bytes:
    """Compile a combine kernel with its pointers typed by name and its constants at representative values
    (``constants`` overrides :data:`COMBINE_CONSTEXPRS`)."""
    types, const = {}, {}
    for i, n in enumerate(fn.arg_names):
        if i in fn.constexprs:
            const[n] = {**COMBINE_CONSTEXPRS, **constants}[n]
        elif n.endswith("_ptr"):
            kind = next((t for part, t in POINTER_KINDS if part in n), "*fp32")
            types[n] = kind
        else:
            types[n] = "i32"
    return compile_triton(fn, types, const, {"num_warps": 4})


#: Pointer types by a part of the argument's name (the first match); others are float32.
POINTER_KINDS = (("flag", "*i32"), ("key", "*i64"), ("idx", "*i64"), ("ids", "*i64"), ("token", "*i64"),
                 ("choice", "*i64"), ("ck", "*i64"), ("ci", "*i64"))  # fmt: skip
#: Compile-time constants of the combine kernels (block sizes as their launchers pick them for a small case).
COMBINE_CONSTEXPRS = {"BLOCK_SIZE_P": 16, "BLOCK_SIZE_T": 64, "BLOCK_SIZE_K": 64, "RETURN_LSE": True,
                      "PATHWISE": True, "STREAM": 1, "N_ROUNDS": 10, "FROM_WEIGHTS": False}  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write {name: {instructions, md5}} here")
    ap.add_argument("--only", help="comma-separated names")
    ap.add_argument("--compare", help="a JSON file of an earlier run: exit 1 if any shared name differs")
    args = ap.parse_args(argv)
    table = kernels()
    names = args.only.split(",") if args.only else sorted(table)
    result = {}
    for name in names:
        try:
            result[name] = fingerprint(table[name]())
        except Exception as e:  # report, keep going: one signature drift must not hide the others
            result[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
        r = result[name]
        print(f"{name:36} {r.get('instructions', '-'):>7} {r.get('md5', r.get('error'))}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    if args.compare:
        before = json.loads(Path(args.compare).read_text())
        diff = [n for n in result if n in before and before[n] != result[n]]
        print("same SASS" if not diff else f"DIFFERENT: {', '.join(diff)}")
        return 1 if diff else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
