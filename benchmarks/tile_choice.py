"""The Gluon kernel's tile choice through ``flashsampling.sample``, in the harness's conditions.

For each harness shape and B in {128, 256} (``--set small``: B <= 64, the default against the Gluon kernel's
64 x 128 tiles): ``sample()`` with each candidate tile configuration (``benchmarks.probes.stage1.sample_probe``:
``sample()`` whose stage 1 also runs the probes' three consumer groups) and the cuBLAS
matmul, timed in one process with the harness's timer (``triton.testing.do_bench`` median, L2 flushed),
the candidates interleaved over ``--rounds`` rounds so that clock drift hits them alike.  Writes JSON.

    python3 benchmarks/tile_choice.py --out benchmarks/results/tile_choice_h200.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import flashsampling  # noqa: E402
from benchmarks.bench_h200 import SHAPES, TEMPERATURE  # noqa: E402
from benchmarks.common import bench_ms  # noqa: E402
from benchmarks.probes.stage1 import sample_probe  # noqa: E402
from benchmarks.probes.tiles import ProbeTiles  # noqa: E402

WS = {"num_warps": 4, "warp_specialized": True}
CANDIDATES = {
    "3 groups, 64x128, 6 stages, 16-col": ProbeTiles(64, 128, 64, num_stages=6, epilogue_v=16, warp_groups=3, **WS),
    "2 groups, 64x256, 4 stages, 32-col": ProbeTiles(64, 256, 64, num_stages=4, epilogue_v=32, warp_groups=2, **WS),
    "2 groups, 64x256, 4 stages, 16-col": ProbeTiles(64, 256, 64, num_stages=4, epilogue_v=16, warp_groups=2, **WS),
    # 128-row tiles: half the weight tiles' reads from L2; no faster (results/tiles128_probe_h200.json)
    "2 groups, 128x128, 4 stages, 16-col": ProbeTiles(128, 128, 64, num_stages=4, epilogue_v=16, warp_groups=2, **WS),
    "2 groups, 128x128, 5 stages, 16-col": ProbeTiles(128, 128, 64, num_stages=5, epilogue_v=16, warp_groups=2, **WS),
}
#: ``--set small``: the B <= 64 default (Triton, or Gluon where warp_specialized_tiles picks it) against the Gluon
#: kernel's 64 x 128 tiles with 2 or 3 groups and its 64 x 256 tiles.
SMALL_CANDIDATES = {
    "default": None,
    "3 groups, 64x128, 6 stages, 16-col": CANDIDATES["3 groups, 64x128, 6 stages, 16-col"],
    "2 groups, 64x128, 6 stages, 16-col": ProbeTiles(64, 128, 64, num_stages=6, epilogue_v=16, warp_groups=2, **WS),
    "2 groups, 64x256, 4 stages, 32-col": CANDIDATES["2 groups, 64x256, 4 stages, 32-col"],
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", default="128,256")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--shapes", default="", help="comma-separated V:D (default: the harness's shapes)")
    ap.add_argument("--set", choices=("large", "small"), default="large", help="the candidates: B >= 128 or B <= 64")
    args = ap.parse_args()
    candidates = CANDIDATES if args.set == "large" else SMALL_CANDIDATES
    gen = torch.Generator(device="cuda").manual_seed(0)
    out = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "rows": []}
    shapes = [tuple(int(x) for x in vd.split(":")) for vd in args.shapes.split(",")] if args.shapes else SHAPES
    for V, D in shapes:
        w = (torch.randn(V, D, device="cuda", generator=gen) * 0.02).to(torch.bfloat16)
        for B in [int(b) for b in args.batches.split(",")]:
            h = torch.randn(B, D, device="cuda", generator=gen).to(torch.bfloat16)
            times = {name: [] for name in ["matmul", *candidates]}
            ref = flashsampling.sample(h, w, temperature=TEMPERATURE, seed=1234, host_checks=False)
            agree = {}
            for name, tc in candidates.items():
                tok = sample_probe(h, w, temperature=TEMPERATURE, seed=1234, host_checks=False, tiles=tc)
                agree[name] = float((tok == ref).float().mean())
            for _ in range(args.rounds):
                times["matmul"].append(bench_ms(lambda h=h, w=w: h @ w.T))
                for name, tc in candidates.items():
                    times[name].append(
                        bench_ms(lambda h=h, w=w, tc=tc: sample_probe(h, w, temperature=TEMPERATURE, seed=1234,
                                                                      host_checks=False, tiles=tc))
                    )  # fmt: skip
            row = {"V": V, "D": D, "B": B, "ms": {k: min(v) for k, v in times.items()}, "all_ms": times,
                   "token_agreement_with_default": agree}  # fmt: skip
            out["rows"].append(row)
            print(json.dumps({k: row[k] for k in ("V", "D", "B", "ms")}), flush=True)
            Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
