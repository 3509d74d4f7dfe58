"""Sweep stage-1 tile configurations on the GPU: time, registers, spills; split the noise's cost.

``python benchmarks/tile_sweep.py --out benchmarks/results/tile_sweep.json``

For every batch size and candidate ``(block_b, block_v, block_d, num_warps, num_stages)`` it times
stage 1 + stage 2 (bare launches, no host checks; ``triton.testing.do_bench`` medians) and reads
the compiler's report of the kernel (registers per thread, spilled registers, shared memory).  At
the best configuration of each batch size it then times four variants of the same kernel, whose
differences place the cost of the noise:

* ``full``       the shipped kernel (one Philox block per token pair, lazy tie keys);
* ``per_token``  one Philox block per token (a shard at an odd offset takes this path);
* ``rounds0``    Philox with 0 rounds (the counters pass through: the logs and selection remain);
* ``no_noise``   no noise at all (the matmul, the argmax and the candidate store).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import bench_ms  # noqa: E402
from benchmarks.probes.stage1 import launch_stage1_probe  # noqa: E402
from flashsampling import TileConfig  # noqa: E402
from flashsampling._validate import inverse_temperature  # noqa: E402
from flashsampling.kernels.stage2 import reduce_tiles  # noqa: E402
from flashsampling.kernels.tiles import default_tiles  # noqa: E402

# (block_b, block_v, block_d, num_warps, num_stages, epilogue_v).  Earlier candidate lists are recorded
# in results/tile_sweep_h200_*.json (their seventh entry is the since removed swap_ab option).
SMALL = [(16, 64, 128, 4, 4, 0), (16, 64, 256, 4, 3, 0), (16, 128, 256, 4, 3, 32), (16, 128, 128, 4, 4, 0)]
CONFIGS = {
    1: SMALL,
    4: SMALL,
    16: SMALL,
    32: [(32, 64, 128, 4, 4, 0), (32, 128, 128, 4, 3, 32), (32, 256, 64, 4, 3, 32)],
    64: [(64, 64, 128, 4, 3, 0), (64, 128, 64, 4, 4, 32)],
    # v5: 4-warp tiles with 2 stages (two programs per SM: one's epilogue under the other's matmul).
    128: [
        (64, 64, 64, 4, 4, 0),
        (64, 256, 64, 4, 2, 32),
        (128, 128, 64, 4, 3, 32),
        (128, 256, 64, 8, 3, 32),
    ],
    256: [
        (128, 256, 64, 8, 3, 32),
        (64, 256, 64, 4, 2, 32),
        (128, 128, 64, 4, 3, 32),
        (256, 128, 64, 8, 2, 32),
        (128, 256, 64, 8, 2, 32),
    ],
}
#: Plain Triton matmuls (fp32 logits stored, no epilogue), to tell the epilogue's cost from the MMA's.
MATMUL_CONFIGS = [(64, 64, 64, 4, 4), (128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (64, 128, 64, 4, 4)]


@triton.jit
def plain_matmul_kernel(h_ptr, w_ptr, z_ptr, B, V, D, BB: tl.constexpr, BV: tl.constexpr, BD: tl.constexpr):
    pid = tl.program_id(0)
    nb = tl.cdiv(B, BB)
    rows = (pid % nb) * BB + tl.arange(0, BB)
    cols = (pid // nb) * BV + tl.arange(0, BV)
    acc = tl.zeros([BB, BV], dtype=tl.float32)
    for k in range(0, D, BD):
        ks = k + tl.arange(0, BD)
        h = tl.load(h_ptr + rows.to(tl.int64)[:, None] * D + ks[None, :], mask=(rows < B)[:, None], other=0.0)
        w = tl.load(w_ptr + cols.to(tl.int64)[None, :] * D + ks[:, None], mask=(cols < V)[None, :], other=0.0)
        acc = tl.dot(h, w, acc)
    tl.store(
        z_ptr + rows.to(tl.int64)[:, None] * V + cols[None, :], acc, mask=(rows < B)[:, None] & (cols < V)[None, :]
    )


def plain_matmul(h, w, z, cfg):
    bb, bv, bd, warps, stages = cfg
    B, D = h.shape
    V = w.shape[0]
    grid = (triton.cdiv(B, bb) * triton.cdiv(V, bv),)
    plain_matmul_kernel[grid](h, w, z, B, V, D, BB=bb, BV=bv, BD=bd, num_warps=warps, num_stages=stages)


def kernel_report(kernel) -> dict:
    """Registers per thread, spilled registers and shared memory of a compiled Triton kernel."""
    return {"n_regs": kernel.n_regs, "n_spills": kernel.n_spills, "shared_bytes": kernel.metadata.shared}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/tile_sweep.json")
    ap.add_argument("--V", type=int, default=151936)
    ap.add_argument("--D", type=int, default=4096)
    ap.add_argument("--batches", default=",".join(str(b) for b in CONFIGS))
    ap.add_argument("--plain-matmul", action="store_true", help="also time plain Triton matmuls (B >= 64)")
    ap.add_argument(
        "--configs",
        help='JSON {"B": [[block_b, block_v, block_d, num_warps, num_stages, epilogue_v], ...]} replacing CONFIGS[B]',
    )
    args = ap.parse_args()
    configs = {**CONFIGS, **{int(b): [tuple(c) for c in cs] for b, cs in json.loads(args.configs or "{}").items()}}
    V, D = args.V, args.D
    torch.manual_seed(0)
    w = (torch.randn(V, D, device="cuda") * 0.02).to(torch.bfloat16)
    sweep, split = [], []
    for B in (int(b) for b in args.batches.split(",")):
        h = torch.randn(B, D, device="cuda").to(torch.bfloat16)
        inv = inverse_temperature(1.0, B, h.device)[0]
        mm = bench_ms(lambda h=h: h @ w.T)

        def run(t, h=h, inv=inv, **kw):
            parts = launch_stage1_probe(h, w, inv, 5, 7, 1, t, **kw)
            return reduce_tiles(*parts[:4], V)

        if B >= 64 and args.plain_matmul:
            z = torch.empty(B, V, device="cuda", dtype=torch.float32)
            for cfg in MATMUL_CONFIGS:
                r = {"B": B, "plain_matmul": cfg, "ms": bench_ms(lambda cfg=cfg, h=h, z=z: plain_matmul(h, w, z, cfg))}
                sweep.append(r)
                print(json.dumps(r), flush=True)
            del z
        best = None
        for cfg in configs[B]:
            t = TileConfig(*cfg)
            compiled: list = []
            try:
                run(t, compiled=compiled)
                ms = bench_ms(lambda t=t: run(t))
            except Exception as e:  # noqa: BLE001 - a config may not compile (shared memory)
                print(B, cfg, "failed", type(e).__name__, str(e)[:120], flush=True)
                continue
            r = {"B": B, "config": cfg, "ms": ms, "matmul_ms": mm, **kernel_report(compiled[0])}
            sweep.append(r)
            print(json.dumps(r), flush=True)
            if best is None or ms < best["ms"]:
                best = r
        if best is None:
            continue
        t = TileConfig(*best["config"])
        row = {"B": B, "config": best["config"], "matmul_ms": mm}
        row["default"] = list(vars(default_tiles(B, V, D)).values())
        row["full_ms"] = bench_ms(lambda t=t: run(t))
        row["per_token_ms"] = bench_ms(lambda t=t: run(t, col_offset=1))
        row["rounds0_ms"] = bench_ms(lambda t=t: run(t, n_rounds=0))
        row["no_noise_ms"] = bench_ms(lambda t=t: run(t, noise=False))
        split.append(row)
        print(json.dumps(row), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"V": V, "D": D, "sweep": sweep, "noise_split": split}, indent=2))
    print(f"{'B':>4} {'best config':>29} {'matmul':>7} {'full':>7} {'per-tok':>7} {'rnds0':>7} {'nonoise':>7}")
    for r in split:
        print(
            f"{r['B']:>4} {str(tuple(r['config'])):>29} {r['matmul_ms']:7.3f} {r['full_ms']:7.3f} "
            f"{r['per_token_ms']:7.3f} {r['rounds0_ms']:7.3f} {r['no_noise_ms']:7.3f}"
        )


if __name__ == "__main__":
    main()
