"""Host time of ``flashsampling.sample`` as called, against its GPU time (H200).

``python benchmarks/host_overhead.py --out benchmarks/results/host_overhead_h200.json``

The harness times the fused sampler as called and replayed from a CUDA graph; where the two differ, the
difference is host work that the GPU waits for.  For each shape and batch size this records the median
``time.perf_counter`` of one call (launches queued, no synchronization inside the timed call), of its parts
(the stage-1 launch, the TMA descriptors), and ``do_bench`` medians as called and replayed, in interleaved rounds.
Host times and "as called" are recorded for both launch paths: Triton's ``fn[grid]`` (``_triton``) and
:mod:`flashsampling.kernels.launch`'s direct launch (``_direct``, the default), in one process.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import flashsampling  # noqa: E402
from benchmarks.bench_h200 import graphed  # noqa: E402
from benchmarks.common import bench_ms, probe_inputs, record_row  # noqa: E402
from flashsampling.kernels import launch  # noqa: E402
from flashsampling.kernels.pingpong import tma_descriptors  # noqa: E402
from flashsampling.kernels.stage1 import allocate_partials, launch_fused_stage1  # noqa: E402
from flashsampling.kernels.tiles import stage1_tiles  # noqa: E402


def host_us(fn, calls: int = 200) -> float:
    """Median host microseconds of ``fn()``, synchronizing between calls (so the launch queue never fills)."""
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default="151936:4096,128256:4096")
    ap.add_argument("--batches", default="16,64,128,256")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="also record cProfile's top functions of 200 calls")
    args = ap.parse_args()
    dev = torch.device("cuda")
    out = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__, "rows": {}}
    for V, D, B, h, w in probe_inputs(args.shapes, args.batches, dev):
        tiles = stage1_tiles(h, w, 1)
        inv = torch.full((B,), 1.0 / 0.8, device=dev)

        def fused(h=h, w=w):
            return flashsampling.sample(h, w, temperature=0.8, seed=1234, host_checks=False)

        def stage1(h=h, w=w, inv=inv, tiles=tiles):
            return launch_fused_stage1(h, w, inv, 1, 2, 1, tiles)

        replay = graphed(fused)
        rec = {"tiles": repr(tiles), "host_us": {}, "rounds": []}
        for path in ("triton", "direct"):  # Triton's launch path, then flashsampling.kernels.launch's
            launch.ENABLED = path == "direct"
            rec["host_us"][f"sample_{path}"] = host_us(fused)
            rec["host_us"][f"stage1_{path}"] = host_us(stage1)
        if tiles.warp_specialized:
            rec["host_us"]["tma_descriptors"] = host_us(lambda h=h, w=w, t=tiles: tma_descriptors(h, w, t))
            n_tiles = triton.cdiv(V, tiles.block_v)
            rec["host_us"]["allocate_partials"] = host_us(lambda b=B, n=n_tiles: allocate_partials(b, 1, n, dev))
        if args.profile:
            prof = cProfile.Profile()
            prof.runcall(lambda: [fused() for _ in range(200)])
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(15)
            rec["profile"] = text.getvalue().splitlines()[-25:]
        for _ in range(args.rounds):
            timings = {}
            for path in ("triton", "direct"):
                launch.ENABLED = path == "direct"
                timings[f"as_called_{path}"] = bench_ms(fused)
            timings["graph"] = bench_ms(replay)
            rec["rounds"].append(timings)
        record_row(out, f"{V}x{D}/B{B}", rec, args.out, show=("host_us", "rounds"))


if __name__ == "__main__":
    main()
