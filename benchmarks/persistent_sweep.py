"""Persistent TMA stage 1 against the one-program-per-tile kernel, and the unfused large-B path.

``python benchmarks/persistent_sweep.py --out benchmarks/results/persistent_sweep.json``

For V=151936, D=4096 (bf16) and each batch size it times, in one process (``do_bench`` medians):

* ``cublas_bf16``     ``h @ W.T`` (bf16 logits), and ``cublas_fp32`` with fp32 logits (``out_dtype``);
* ``default``         stage 1 + 2 of the shipped default tiles (one program per tile);
* ``persistent/...``  the persistent TMA kernel over candidate tiles, with and without loop
                      flattening (compile failures recorded, not fatal; v6's ``.../interleave`` entries
                      timed a kernel since removed);
* ``split/...``       cuBLAS fp32 logits, then :func:`flashsampling.kernels.stage1.launch_logits_stage1`
                      and stage 2 (the logits are written to HBM once and read once);

and it checks that the persistent kernel returns the default kernel's tokens.  Results are written
after every batch size, so a cut-off run still leaves its data.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import bench_ms  # noqa: E402
from benchmarks.probes.stage1 import launch_persistent_probe  # noqa: E402
from flashsampling import TileConfig  # noqa: E402
from flashsampling.kernels.stage1 import allocate_partials, launch_fused_stage1, launch_logits_stage1  # noqa: E402
from flashsampling.kernels.stage2 import reduce_tiles  # noqa: E402
from flashsampling.kernels.tiles import default_tiles  # noqa: E402

# (block_b, block_v, block_d, num_warps, num_stages, epilogue_v), flatten, warp_specialize.  The
# warp_specialize switch (v1: no effect) and the v5 chunk-loop switch were removed from the kernel: such
# entries are kept as the record of what was run and are skipped on a rerun.
# v1 (results/persistent_sweep_h200.json) swept flatten/warp_specialize and tile shapes; v2 refines.
PERSISTENT_V1 = {
    1: [((16, 64, 256, 4, 3, 0), True, False), ((16, 128, 128, 4, 4, 0), True, False)],
    16: [((16, 64, 256, 4, 3, 0), True, False), ((16, 128, 128, 4, 4, 0), True, False)],
    64: [
        ((64, 64, 128, 4, 3, 0), True, False),
        ((64, 128, 64, 4, 4, 32), True, False),
        ((64, 256, 64, 8, 3, 32), True, False),
    ],
    128: [
        ((64, 64, 64, 4, 4, 0), True, False),
        ((128, 128, 64, 8, 4, 32), True, False),
        ((128, 256, 64, 8, 3, 32), True, False),
        ((64, 256, 64, 8, 3, 32), True, False),
    ],
    256: [
        ((128, 256, 64, 8, 3, 32), True, False),
        ((128, 256, 64, 8, 3, 32), False, False),
        ((128, 256, 64, 8, 3, 32), False, True),
        ((128, 256, 64, 8, 3, 32), True, True),
        ((128, 256, 64, 8, 4, 32), True, False),
        ((128, 128, 64, 8, 4, 32), True, False),
        ((128, 256, 64, 8, 3, 64), True, False),
    ],
}
PERSISTENT_V2 = {
    1: [((16, 128, 128, 4, 4, 0), True, False), ((16, 64, 128, 4, 4, 0), True, False)],
    16: [((16, 128, 128, 4, 4, 0), True, False), ((16, 64, 128, 4, 4, 0), True, False)],
    64: [((64, 128, 64, 8, 4, 32), True, False), ((128, 128, 64, 8, 4, 32), True, False)],
    128: [
        ((128, 128, 64, 8, 4, 32), True, False),
        ((128, 128, 64, 8, 3, 32), True, False),
        ((128, 128, 128, 8, 3, 32), True, False),
        ((128, 256, 64, 8, 4, 32), True, False),
    ],
    256: [
        ((128, 256, 64, 8, 4, 32), True, False),
        ((256, 128, 64, 8, 3, 32), True, False),
        ((128, 256, 128, 8, 2, 32), True, False),
    ],
}
# v3: more warps per SM for the epilogue -- 16-warp programs, or two 8-warp programs per SM with
# registers capped at 128 (the optional fourth entry: TileConfig.max_registers).
PERSISTENT_V3 = {
    128: [
        ((128, 128, 128, 8, 3, 32), True, False),
        ((128, 128, 64, 8, 3, 32), True, False, 128),
        ((128, 128, 64, 8, 2, 32), True, False, 128),
        ((128, 256, 64, 16, 4, 32), True, False),
    ],
    256: [
        ((128, 256, 64, 8, 4, 32), True, False),
        ((128, 256, 64, 16, 4, 32), True, False),
        ((128, 256, 64, 16, 3, 64), True, False),
        ((128, 128, 64, 8, 3, 32), True, False, 128),
        ((128, 128, 64, 8, 2, 32), True, False, 128),
        ((128, 256, 64, 8, 4, 32), True, False, 168),
    ],
}
# v4: 16-warp programs at B=128 (4 warps per scheduler for the epilogue, no register cap).
PERSISTENT_V4 = {
    128: [
        ((128, 128, 64, 16, 4, 32), True, False),
        ((128, 128, 128, 16, 3, 32), True, False),
        ((128, 128, 64, 16, 3, 32), True, False),
    ],
    256: [((128, 256, 64, 16, 4, 32), True, False), ((128, 256, 128, 16, 2, 32), True, False)],
}
# v5 (results/persistent_sweep_h200_v5.json): the staged epilogue's chunk loop compiled as a loop (0),
# unrolled (1) or software-pipelined (2) -- no gain; the switch was removed from the kernel.
PERSISTENT_V5 = {
    128: [((128, 128, 128, 16, 3, 32), True, False, {"epilogue_loop": e}) for e in (0, 1, 2)],
    256: [((128, 256, 64, 16, 4, 32), True, False, {"epilogue_loop": e}) for e in (0, 1, 2)],
}
# v6 (results/persistent_sweep_h200_v6.json): the interleaved kernel (the previous tile's epilogue in
# epilogue_v-wide pieces between this tile's MMAs; no gain, removed from the library: benchmarks/NOTES.md),
# against the persistent defaults of B = 128 and 256.
PERSISTENT_V6 = {
    64: [
        ((64, 128, 64, 8, 4, 8), True, False, {"interleave": True}),
        ((64, 256, 64, 8, 3, 8), True, False, {"interleave": True}),
        ((128, 128, 64, 16, 4, 8), True, False, {"interleave": True}),
    ],
    128: [((128, 128, 128, 16, 3, 32), True, False)]
    + [((128, 128, 128, 16, 3, ev), True, False, {"interleave": True}) for ev in (4, 8, 16, 32)]
    + [
        ((128, 128, 64, 16, 4, 8), True, False, {"interleave": True}),
        ((128, 128, 64, 8, 4, 8), True, False, {"interleave": True}),
    ],
    256: [((128, 256, 64, 16, 4, 32), True, False)]
    + [((128, 256, 64, 16, 4, ev), True, False, {"interleave": True}) for ev in (4, 8, 16, 32)]
    + [
        ((128, 256, 64, 8, 4, 8), True, False, {"interleave": True}),
        ((128, 128, 64, 8, 4, 8), True, False, {"interleave": True}),
    ],
}
# Now: the Triton defaults of B = 128 and 256 (flashsampling.kernels.tiles.default_tiles), to rerun them.
PERSISTENT = {
    128: [((128, 128, 128, 16, 3, 32), True, False)],
    256: [((128, 256, 64, 16, 4, 32), True, False)],
}
SPLIT = [(1, 2048), (4, 1024), (8, 512), (16, 256)]


def occupancy(kernel, tc: TileConfig) -> int:
    """Programs that fit on one SM: by registers (64K per SM) and shared memory (228 KB per SM)."""
    by_regs = 65536 // max(1, kernel.n_regs * 32 * tc.num_warps)
    by_smem = (228 * 1024) // max(1, kernel.metadata.shared + 1024)
    return min(by_regs, by_smem)


def sweep_batch(B: int, h, inv, w, out: dict, split: bool = True) -> dict:
    V, D, dev = w.shape[0], w.shape[1], w.device
    row = {"B": B}
    row["cublas_bf16"] = bench_ms(lambda h=h: h @ w.T)
    if out["mm_out_dtype"] is True:
        row["cublas_fp32"] = bench_ms(lambda h=h: torch.mm(h, w.T, out_dtype=torch.float32))
        z = torch.mm(h, w.T, out_dtype=torch.float32)
    else:
        z = (h @ w.T).float()
    for bb, bv in SPLIT if split else []:

        def split_path(h=h, bb=bb, bv=bv):
            zz = torch.mm(h, w.T, out_dtype=torch.float32) if out["mm_out_dtype"] is True else (h @ w.T).float()
            return reduce_tiles(*launch_logits_stage1(zz, inv, 5, 7, 1, bb, bv)[:4], V)

        row[f"split/{bb}x{bv}"] = bench_ms(split_path)
        row[f"logits_only/{bb}x{bv}"] = bench_ms(
            lambda bb=bb, bv=bv: reduce_tiles(*launch_logits_stage1(z, inv, 5, 7, 1, bb, bv)[:4], V)
        )
    t = default_tiles(B, V, D)
    row["default_tiles"] = list(vars(t).values())

    def run_default(h=h, t=t, **kw):
        return reduce_tiles(*launch_fused_stage1(h, w, inv, 5, 7, 1, t, **kw)[:4], V)[0]

    ref = run_default()
    row["default"] = bench_ms(run_default)
    row["default_no_noise"] = bench_ms(lambda: run_default(noise=False))
    for cfg, flatten, ws, *extra in PERSISTENT.get(B, []):
        opts = extra[0] if extra and isinstance(extra[0], dict) else {"max_registers": extra[0]} if extra else {}
        cap = opts.get("max_registers")
        inter = bool(opts.get("interleave"))
        name = f"persistent/{'x'.join(map(str, cfg))}/flat{int(flatten)}/ws{int(ws)}"
        name += f"/maxreg{cap}" if cap else ""
        name += "/interleave" if inter else ""
        if ws or "epilogue_loop" in opts or inter:
            row[name] = {"skipped": "the switch was removed from the kernel (see benchmarks/NOTES.md)"}
            continue
        tc = TileConfig(*cfg, persistent=True, max_registers=cap)
        try:
            t0 = time.time()

            def run_p(h=h, tc=tc, flatten=flatten, noise=True, n_rounds=10):
                parts = allocate_partials(B, 1, triton.cdiv(V, tc.candidate_v), dev)
                k = launch_persistent_probe(h, w, inv, parts, 5, 7, 1, tc, noise=noise, n_rounds=n_rounds,
                                            flatten=flatten)  # fmt: skip
                return reduce_tiles(*parts[:4], V)[0], k

            tok, k = run_p()
            torch.cuda.synchronize()
            rec = {"compile_s": round(time.time() - t0, 1), "n_regs": k.n_regs, "n_spills": k.n_spills,
                   "shared": k.metadata.shared, "agree": float((tok == ref).float().mean()),
                   "programs_per_sm": occupancy(k, tc)}  # fmt: skip
            rec["ms"] = bench_ms(lambda run_p=run_p: run_p())
            rec["ms_no_noise"] = bench_ms(lambda run_p=run_p: run_p(noise=False))
            rec["ms_rounds0"] = bench_ms(lambda run_p=run_p: run_p(n_rounds=0))
            row[name] = rec
        except Exception as e:  # noqa: BLE001
            row[name] = {"error": "".join(traceback.format_exception_only(e))[-600:]}
        print(B, name, row[name], flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", default="256,128,64,16,1")
    ap.add_argument("--V", type=int, default=151936)
    ap.add_argument("--D", type=int, default=4096)
    ap.add_argument("--no-split", action="store_true", help="skip the cuBLAS + logits-kernel path")
    args = ap.parse_args()
    V, D = args.V, args.D
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    w = (torch.randn(V, D, device=dev, generator=gen) * 0.02).to(torch.bfloat16)
    out = {"V": V, "D": D, "gpu": torch.cuda.get_device_name(), "triton": triton.__version__,
           "torch": torch.__version__, "rows": []}  # fmt: skip
    try:
        torch.mm(w[:2], w[:2].T, out_dtype=torch.float32)
        out["mm_out_dtype"] = True
    except Exception as e:  # noqa: BLE001
        out["mm_out_dtype"] = repr(e)[:300]
    for B in [int(b) for b in args.batches.split(",")]:
        h = torch.randn(B, D, device=dev, generator=gen).to(torch.bfloat16)
        inv = torch.full((B,), 1.0, device=dev)
        row = sweep_batch(B, h, inv, w, out, split=not args.no_split)
        print({k: v for k, v in row.items() if not isinstance(v, dict)}, flush=True)
        out["rows"].append(row)
        Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
