"""Sweep stage-1 tile configurations on the GPU; print the best per batch size.

``python benchmarks/tile_sweep.py --out benchmarks/results/tile_sweep.json``
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import median_ms  # noqa: E402
from flashsampling import TileConfig  # noqa: E402
from flashsampling._validate import check_temperature  # noqa: E402
from flashsampling.kernels.fused import launch_fused_stage1  # noqa: E402
from flashsampling.kernels.reduce import reduce_tiles  # noqa: E402

CONFIGS = {
    1: [
        (16, 128, 128, 4, 4),
        (16, 64, 128, 4, 4),
        (16, 64, 256, 4, 3),
        (16, 128, 256, 4, 3),
        (16, 256, 128, 8, 3),
        (16, 32, 256, 4, 4),
    ],
    64: [
        (64, 128, 64, 4, 4),
        (64, 64, 64, 4, 4),
        (64, 128, 64, 8, 3),
        (32, 128, 64, 4, 4),
        (64, 64, 128, 4, 3),
        (32, 64, 128, 4, 4),
        (64, 32, 128, 4, 4),
    ],
    256: [
        (128, 128, 64, 8, 3),
        (64, 128, 64, 8, 3),
        (128, 64, 64, 4, 3),
        (64, 64, 64, 4, 4),
        (128, 64, 64, 8, 3),
        (256, 64, 64, 8, 3),
        (64, 128, 64, 4, 4),
    ],
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/tile_sweep.json")
    ap.add_argument("--V", type=int, default=151936)
    ap.add_argument("--D", type=int, default=4096)
    args = ap.parse_args()
    V, D = args.V, args.D
    torch.manual_seed(0)
    w = (torch.randn(V, D, device="cuda") * 0.02).to(torch.bfloat16)
    results = []
    for B, cfgs in CONFIGS.items():
        h = torch.randn(B, D, device="cuda").to(torch.bfloat16)
        inv, _ = check_temperature(1.0, B, h.device, host_checks=False)
        mm = median_ms(lambda h=h: h @ w.T)
        for cfg in cfgs:
            t = TileConfig(*cfg)
            for rounds in (10, 0) if cfg == cfgs[0] else (10,):

                def run(h=h, t=t, inv=inv, rounds=rounds):
                    parts = launch_fused_stage1(h, w, inv, 5, 7, 1, t, n_rounds=rounds)
                    return reduce_tiles(*parts[:4], V)

                try:
                    ms = median_ms(run)
                except Exception as e:  # noqa: BLE001 - a config may not compile (shared memory)
                    print(B, cfg, "failed", type(e).__name__, str(e)[:100])
                    continue
                r = {"B": B, "config": cfg, "philox_rounds": rounds, "ms": ms, "matmul_ms": mm}
                results.append(r)
                print(json.dumps(r))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    for B in CONFIGS:
        best = min((r for r in results if r["B"] == B and r["philox_rounds"] == 10), key=lambda r: r["ms"])
        print(f"B={B}: best {best['config']} {best['ms']:.3f} ms (matmul {best['matmul_ms']:.3f})")


if __name__ == "__main__":
    main()
