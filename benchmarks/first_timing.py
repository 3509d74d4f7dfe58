"""First timing of the fused sampler against matmul + softmax + multinomial on the GPU (issue 2).

Run on the H200: ``python benchmarks/first_timing.py --out benchmarks/results/first_timing.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import flashsampling  # noqa: E402
from benchmarks.common import copy_bandwidth_gbs, median_ms, multinomial_sampler  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/first_timing.json")
    ap.add_argument("--V", type=int, default=151936)
    ap.add_argument("--D", type=int, default=4096)
    args = ap.parse_args()
    V, D = args.V, args.D
    torch.manual_seed(0)
    w = (torch.randn(V, D, device="cuda") * 0.02).to(torch.bfloat16)
    bw = copy_bandwidth_gbs()
    rows = []
    for B in (1, 64, 256):
        h = torch.randn(B, D, device="cuda").to(torch.bfloat16)
        r = {"B": B, "V": V, "D": D}
        r["matmul_ms"] = median_ms(lambda h=h: h @ w.T)
        r["multinomial_ms"] = median_ms(lambda h=h: multinomial_sampler(h, w, 1.0))
        r["fused_ms"] = median_ms(lambda h=h: flashsampling.sample(h, w, seed=1))
        r["fused_nochecks_ms"] = median_ms(lambda h=h: flashsampling.sample(h, w, seed=1, host_checks=False))
        r["floor_ms"] = (V * D * 2 + B * D * 2 + B * 8) / (bw * 1e9) * 1e3
        rows.append(r)
        print(json.dumps(r))
    out = {"device": torch.cuda.get_device_name(), "copy_bandwidth_GBs": bw, "rows": rows, "torch": torch.__version__}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(f"{'B':>4} {'floor':>8} {'matmul':>8} {'multinom':>9} {'fused':>8} {'fused-nc':>9}")
    for r in rows:
        print(
            f"{r['B']:>4} {r['floor_ms']:8.3f} {r['matmul_ms']:8.3f} {r['multinomial_ms']:9.3f} "
            f"{r['fused_ms']:8.3f} {r['fused_nochecks_ms']:9.3f}"
        )


if __name__ == "__main__":
    main()
