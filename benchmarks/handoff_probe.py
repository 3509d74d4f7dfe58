"""The handoff kernel (one MMA group, separate epilogue groups) against the ping-pong default (H200).

``python benchmarks/handoff_probe.py --out benchmarks/results/handoff_probe_h200.json``

For each shape and batch size, in one process: cuBLAS ``h @ W.T`` alone, the ping-pong default tiles
(:func:`~flashsampling.kernels.tiles.warp_specialized_tiles`) and each handoff configuration
(``64x128x64x6x32x2``: block_b x block_v x block_d x ring stages x epilogue chunk x epilogue groups), each
with and without noise, as ``do_bench`` medians over ``--rounds`` interleaved rounds (the minimum is
reported beside every round's value).  Correctness on the same inputs: the handoff candidates against the
unstaged Triton kernel with the same column tiles (bit for bit), and the sampled tokens against the
ping-pong default's.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import traceback
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import bench_ms, probe_inputs, record_row  # noqa: E402
from benchmarks.probes.stage1 import launch_stage1_probe  # noqa: E402
from benchmarks.probes.tiles import ProbeTiles, ws_tiles  # noqa: E402
from flashsampling.kernels.stage2 import reduce_tiles  # noqa: E402
from flashsampling.kernels.tiles import TileConfig, warp_specialized_tiles  # noqa: E402

DEFAULT_CONFIGS = "64x128x64x6x32x2,64x128x64x6x16x2,64x128x64x5x16x3"


def handoff_tiles(spec: str) -> ProbeTiles:
    bb, bv, bd, stages, ev, groups = (int(f) for f in spec.split("x"))
    return ws_tiles(bb, bv, bd, stages, ev, groups, handoff=True)


def run(h, w, inv, tiles, noise=True, compiled=None):
    return launch_stage1_probe(h, w, inv, 11, 12, 1, tiles, noise=noise, compiled=compiled)


def check(h, w, inv, tiles, default) -> dict:
    """Candidates against the unstaged Triton kernel with the same columns per tile; tokens against the default."""
    V = w.shape[0]
    ks = []
    got = run(h, w, inv, tiles, compiled=ks)
    ref = run(h, w, inv, TileConfig(64, tiles.block_v, 64, num_warps=8, num_stages=3))
    base = run(h, w, inv, default)
    tok = reduce_tiles(*got[:4], V)[0]
    torch.cuda.synchronize()
    return {
        "n_regs": getattr(ks[0], "n_regs", None),
        "n_spills": getattr(ks[0], "n_spills", None),
        "candidates_equal_triton": all(bool(torch.equal(x, y)) for x, y in zip(got[:4], ref[:4])),
        "tokens_equal_default": float((tok == reduce_tiles(*base[:4], V)[0]).float().mean()),
    }


def time_round(h, w, inv, named: dict) -> dict:
    """One round of medians (ms): cuBLAS alone, then each configuration with and without noise."""
    times = {"cublas": bench_ms(lambda: h @ w.T)}
    for name, tiles in named.items():
        for noise in (True, False):
            times[name + ("" if noise else "/no_noise")] = bench_ms(lambda t=tiles, n=noise: run(h, w, inv, t, n))
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default="151936:4096", help="comma-separated V:D")
    ap.add_argument("--batches", default="128,256")
    ap.add_argument("--configs", default=DEFAULT_CONFIGS)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    dev = torch.device("cuda")
    out = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "rows": {}}
    specs = args.configs.split(",")
    for V, D, B, h, w in probe_inputs(args.shapes, args.batches, dev):
        inv = torch.full((B,), 1.0 / 0.9, device=dev)
        default = warp_specialized_tiles(B)
        named = {"default": default, **{s: handoff_tiles(s) for s in specs}}
        rec = {"default_tiles": dataclasses.asdict(default), "rounds": []}
        for name, tiles in named.items():
            if name != "default":
                try:
                    rec[name] = check(h, w, inv, tiles, default)
                except Exception as e:  # noqa: BLE001
                    rec[name] = {"error": "".join(traceback.format_exception_only(e))[-1500:]}
        timed = {n: t for n, t in named.items() if "error" not in rec.get(n, {})}
        for _ in range(args.rounds):
            rec["rounds"].append(time_round(h, w, inv, timed))
        record_row(out, f"{V}x{D}/B{B}", rec, args.out)


if __name__ == "__main__":
    main()
