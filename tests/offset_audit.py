"""The offset audit: no kernel forms a pointer offset from a 32-bit product of two runtime values.

Run with compiled kernels (``FLASHSAMPLING_INTERPRET=0``; no GPU needed: Triton builds the IR without one)::

    FLASHSAMPLING_INTERPRET=0 python tests/offset_audit.py

It builds the Triton IR (``make_ir``, before any optimization) of every kernel the samplers launch -- the Triton
stage-1 kernels (the tiled one in its ``WIDE_K`` specialization, which the launcher picks whenever a K-loop offset can
reach ``2**31``), the logits, stage-2, temperature and tile inverse-CDF kernels, the fused truncated sampler's, and the
Gluon stage 1 -- with every stride and size a runtime ``i32``, and prints one JSON object: kernel -> the offending
``arith.muli`` lines.

The rule.  An ``arith.muli`` of ``i32`` whose two operands both depend on runtime values (an index times a stride,
a row times a size), and whose product reaches the ``i32`` offset of a ``tt.addptr``, can wrap at ``2**31``: such a
product must be formed in ``i64``.  A product with a compile-time constant (``pid * BLOCK``, ``arange * BLOCK``)
stays below ``2**31`` because every launch's rows and columns do (``flashsampling._validate.MAX_INDEX``).

Two planted kernels show the rule catching a wrap: :func:`planted_stride_product` (``ks * stride`` in ``i32``) and
the tiled stage 1 with ``WIDE_K=False`` (its K-loop ``ks * stride_wd``, used only where the launcher proved it fits).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

os.environ.setdefault("FLASHSAMPLING_INTERPRET", "0")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

#: Ops that carry a value unchanged in kind (shape or width only): a constant stays a constant through them.
_CARRY = {"tt.splat", "tt.broadcast", "tt.expand_dims", "arith.extsi", "arith.extui", "arith.trunci", "tt.reshape"}
_DEF = re.compile(r"^\s*((?:%[\w.$-]+(?::\d+)?)(?:\s*,\s*%[\w.$-]+(?::\d+)?)*)\s*=\s*([\w.]+)(.*)$")
_VALUE = re.compile(r"%[\w.$-]+")


@triton.jit
def planted_stride_product(x_ptr, out_ptr, stride, BLOCK: tl.constexpr):
    """The defect the audit exists for: ``ks * stride`` in ``i32``."""
    ks = tl.arange(0, BLOCK)
    tl.store(out_ptr + ks, tl.load(x_ptr + ks * stride))


def _functions(ir: str):
    """``(name, int arguments, body lines)`` of every ``tt.func`` in the IR text."""
    out, cur = [], None
    for line in ir.splitlines():
        m = re.match(r"\s*tt\.func\s+(?:public|private)?\s*@(\"[^\"]+\"|[\w.$]+)\((.*)\)", line)
        if m:
            args = {a for a, t in re.findall(r"(%[\w.$-]+): (i\d+) ", m.group(2))}
            cur = (m.group(1), args, [])
            out.append(cur)
        elif cur is not None:
            cur[2].append(line)
    return out


def violations(ir: str) -> list[str]:
    """The ``i32`` products of two runtime values that reach a ``tt.addptr`` offset (module docstring)."""
    found = []
    for _, _, body in _functions(ir):
        defs: dict[str, tuple[str, list[str], str]] = {}
        for line in body:
            m = _DEF.match(line)
            if not m:
                continue
            results = [r.split(":")[0] for r in re.findall(r"%[\w.$-]+(?::\d+)?", m.group(1))]
            operands = [v.split("#")[0] for v in _VALUE.findall(m.group(3).split(" loc(")[0])]
            for r in results:
                defs[r] = (m.group(2), operands, line.strip())

        def constant(v: str, seen=(), defs=defs) -> bool:
            op, operands, _ = defs.get(v, ("leaf", [], ""))
            if op == "arith.constant":
                return True
            return op in _CARRY and all(constant(o, seen + (v,)) for o in operands if o not in seen)

        def products(v: str, seen: set, defs=defs, constant=constant) -> list[str]:
            if v in seen or v not in defs:
                return []
            seen.add(v)
            op, operands, line = defs[v]
            if op == "tt.call":
                return []
            here = []
            if op == "arith.muli" and re.search(r":\s*(?:tensor<[\dx]*xi32>|i32)\s*$", line.split(" loc(")[0]):
                if len(operands) == 2 and not any(constant(o) for o in operands):
                    here.append(line.split(" loc(")[0])
            return here + [p for o in operands for p in products(o, seen)]

        for line in body:
            m = re.search(r"=\s*tt\.addptr\s+(%[\w.$-]+),\s*(%[\w.$-]+)\s*:.*,\s*(tensor<[^>]*xi32>|i32)(?:\s|$)", line)
            if m:
                found += products(m.group(2), set())
    return sorted(set(found))


def make_ir(fn, signature: dict, constexprs: dict, gluon: bool = False) -> str:
    """The Triton (or Gluon) IR of ``fn`` for sm_90a before any pass: ``signature`` types each runtime argument,
    ``constexprs`` gives the compile-time ones."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend

    target = GPUTarget("cuda", 90, 32)
    backend = make_backend(target)
    options = backend.parse_options({"num_warps": 4})
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    names = fn.arg_names
    # Compile-time parameters with a default (e.g. stage 1's SEED_PTR) take it, as a launch would.
    constexprs = {**{p.name: p.default for p in fn.params if p.is_constexpr and p.has_default}, **constexprs}
    if gluon:
        from triton.experimental.gluon._runtime import GluonASTSource

        src = GluonASTSource(fn=fn, signature=signature, constexprs=constexprs)
    else:
        full = {n: ("constexpr" if n in constexprs else signature[n]) for n in names}
        src = ASTSource(fn=fn, signature=full, constexprs={(names.index(k),): v for k, v in constexprs.items()})
    module = src.make_ir(target, options, backend.get_codegen_implementation(options), backend.get_module_map(),
                         context)  # fmt: skip
    return str(module)


#: Pointer types by a part of the argument's name (the first match); other pointers are float32.
_POINTERS = (("h_ptr", "*bf16"), ("w_ptr", "*bf16"), ("flag", "*i32"), ("key", "*i64"), ("idx", "*i64"),
             ("ids", "*i64"), ("token", "*i64"), ("choice", "*i64"), ("ck", "*i64"), ("ci", "*i64"), ("q_ptr", "*u64"),
             ("j_ptr", "*i64"))  # fmt: skip


def _signature(fn, **override) -> dict:
    out = {}
    for n in fn.arg_names:
        if n in override:
            out[n] = override[n]
        elif n.endswith("_ptr"):
            out[n] = next((t for part, t in _POINTERS if part in n), "*fp32")
        else:
            out[n] = "i32"
    return out


def kernels() -> dict:
    """``name -> zero-argument function returning the IR`` of every kernel the samplers launch, and the planted."""
    from flashsampling.kernels import persistent, pingpong, stage1, stage2, temperature, truncation, truncation_stage2
    from flashsampling.kernels.tiles import GLUON_RUNS, warp_specialized_tiles
    from flashsampling.tile_cdf import kernel as tile_cdf_kernel

    epi = {"N_ROUNDS": 10, "RETURN_LSE": True, "PAIRED": True, "NOISE": True}
    tiled = {"BLOCK_SIZE_B": 16, "BLOCK_SIZE_V": 64, "BLOCK_SIZE_D": 32, "UPCAST": False, "INPUT_PRECISION": "tf32",
             **epi}  # fmt: skip
    out = {}
    for wide in (True, False):
        for ev in (0, 32):
            name = f"stage1-tiled{'-staged' if ev else ''}{'' if wide else '-narrow (planted)'}"
            out[name] = lambda w=wide, e=ev: make_ir(stage1.fused_stage1_kernel, _signature(stage1.fused_stage1_kernel),
                                                     {**tiled, "WIDE_K": w, "EPILOGUE_V": e})  # fmt: skip
    descs = {"h_desc": "tensordesc<bf16[128, 64]>", "w_desc": "tensordesc<bf16[256, 64]>"}
    out["stage1-persistent"] = lambda: make_ir(
        persistent.fused_persistent_kernel, _signature(persistent.fused_persistent_kernel, **descs),
        {"BLOCK_SIZE_B": 128, "BLOCK_SIZE_V": 256, "BLOCK_SIZE_D": 64, "NUM_PROGRAMS": 132, "UPCAST": False,
         "INPUT_PRECISION": "tf32", "EPILOGUE_V": 32, "FLATTEN": True, **epi})  # fmt: skip
    out["stage1-logits"] = lambda: make_ir(stage1.logits_stage1_kernel, _signature(stage1.logits_stage1_kernel),
                                           {"BLOCK_SIZE_B": 4, "BLOCK_SIZE_V": 1024, **epi})  # fmt: skip
    out["stage1-logits-device-seed"] = lambda: make_ir(
        stage1.logits_stage1_kernel,
        _signature(stage1.logits_stage1_kernel, seed_lo="*i64"),
        {"BLOCK_SIZE_B": 4, "BLOCK_SIZE_V": 1024, **epi, "SEED_PTR": True},
    )
    out["reduce-tiles"] = lambda: make_ir(stage2.reduce_tiles_kernel, _signature(stage2.reduce_tiles_kernel),
                                          {"BLOCK_SIZE_T": 1024})  # fmt: skip
    out["reduce-candidates"] = lambda: make_ir(
        stage2.reduce_candidates_kernel,
        _signature(stage2.reduce_candidates_kernel),
        {"BLOCK_SIZE_P": 16, "BLOCK_SIZE_T": 64, "RETURN_LSE": True},
    )
    for pathwise in (True, False):
        out[f"combine-groups{'-pathwise' if pathwise else ''}"] = lambda p=pathwise: make_ir(
            stage2.combine_groups_kernel, _signature(stage2.combine_groups_kernel),
            {"BLOCK_SIZE_P": 16, "BLOCK_SIZE_K": 64, "PATHWISE": p, "STREAM": 1, "N_ROUNDS": 10,
             "FROM_WEIGHTS": not p})  # fmt: skip
    out["online-merge"] = lambda: make_ir(stage2.online_merge_kernel, _signature(stage2.online_merge_kernel),
                                          {"BLOCK_SIZE_P": 16, "STREAM": 2, "N_ROUNDS": 10})  # fmt: skip
    out["temperature"] = lambda: make_ir(temperature.inverse_temperature_kernel,
                                         _signature(temperature.inverse_temperature_kernel, t_ptr="*fp64"),
                                         {"BLOCK": 256, "FLAG": 8})  # fmt: skip
    out["tile-cdf-stage1"] = lambda: make_ir(
        tile_cdf_kernel.tile_cdf_stage1_kernel,
        _signature(tile_cdf_kernel.tile_cdf_stage1_kernel),
        {"BLOCK_B": 4, "BLOCK_V": 256, "N_ROUNDS": 10},
    )

    lists = {
        "cand_i_ptr": "*i32",
        "mass_ptr": "*fp64",
        "mass_t_ptr": "*fp64",
        "logits_ptr": "*fp32",
        "status_ptr": "*i32",
    }
    trunc_epi = {"LIST": 16, "MASS": True, "FULL": True, "N_ROUNDS": 10, "PAIRED": True, "NOISE": True}
    for write in (False, True):
        out[f"truncation-stage1{'-write' if write else ''}"] = lambda w=write: make_ir(
            truncation.truncation_stage1_kernel, _signature(truncation.truncation_stage1_kernel, **lists),
            {**{k: v for k, v in tiled.items() if k != "RETURN_LSE"}, **trunc_epi, "WIDE_K": True,
             "WRITE": w})  # fmt: skip
    out["truncation-logits"] = lambda: make_ir(
        truncation.truncation_logits_stage1_kernel, _signature(truncation.truncation_logits_stage1_kernel, **lists),
        {"BLOCK_SIZE_B": 4, "BLOCK_SIZE_V": 1024, **trunc_epi})  # fmt: skip
    s2 = {"cand_i_ptr": "*i32", "mass_ptr": "*fp64", "row_id_ptr": "*i32", "k_ptr": "*i32", "p_ptr": "*fp64",
          "log_min_p_ptr": "*fp64", "temp_ptr": "*fp64", "given_v_ptr": "*i32", "given_b_ptr": "*i32",
          "ki_ptr": "*i32", "kw_ptr": "*fp64", "token_ptr": "*i64", "status_ptr": "*i32",
          "rel_err_ptr": "*fp64"}  # fmt: skip
    for mode in ("lists", "redo", "given"):
        whole = mode != "lists"
        out[f"truncation-stage2-{mode}"] = lambda m=mode, w=whole: make_ir(
            truncation_stage2.truncation_stage2_kernel, _signature(truncation_stage2.truncation_stage2_kernel, **s2),
            {"BLOCK_R": 1, "CH": 4096, "CAP": 1 if w else 8192, "BLOCK_T": 1024, "LIST": 0 if w else 16,
             "MASS": not w, "WEIGHTS": True, "TOP_P_SCALED": True, "STEP0": 1, "STEP1": 2 | 16, "STEP2": 3 | 16,
             "STEP3": 4 | 16, "COLUMNS": w, "REDO": m == "redo", "FORCE": m == "redo", "GIVEN": m == "given",
             "ROW_IDS": m == "given", "N_ROUNDS": 10, "NOISE": True})  # fmt: skip

    def gluon() -> str:
        from triton.runtime.jit import mangle_type

        tiles = warp_specialized_tiles(256)
        h, w = pingpong.tma_descriptors(torch.empty(256, 4096, dtype=torch.bfloat16),
                                        torch.empty(1024, 4096, dtype=torch.bfloat16), tiles)  # fmt: skip
        sig = {**_signature(pingpong.fused_pingpong_kernel), "h_desc": mangle_type(h), "w_desc": mangle_type(w)}
        sig = {n: t for n, t in sig.items() if n in ("h_desc", "w_desc") or n.endswith("_ptr") or n in
               ("B", "V", "D", "col_offset", "seed_lo", "seed_hi")}  # fmt: skip
        consts = pingpong.kernel_constants(tiles, 132, noise=True, epilogue=pingpong.sample_epilogue)
        return make_ir(pingpong.fused_pingpong_kernel, sig, consts, gluon=True)

    if GLUON_RUNS:  # the Gluon kernel is written for one triton release (flashsampling.kernels.tiles.GLUON_TRITON)
        out["stage1-gluon"] = gluon
    out["planted ks * stride (planted)"] = lambda: make_ir(
        planted_stride_product, _signature(planted_stride_product), {"BLOCK": 64}
    )
    return out


def main() -> int:
    result = {name: violations(build()) for name, build in kernels().items()}
    print(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
