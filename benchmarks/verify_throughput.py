"""Samples per second the fused kernel feeds the verification battery, and the smallest total
variation the battery detects at V = 151936 in 60 s of GPU time (issue 3, issue 7).

Draws come from one logits row replicated over many rows (each row is an independent noise
stream), ``num_samples`` per row; counting is ``torch.bincount`` on the GPU; the test is
``verification.goodness_of_fit`` on the counts.

``python benchmarks/verify_throughput.py --seconds 60 --out benchmarks/results/verify_throughput.json``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import flashsampling  # noqa: E402
from flashsampling.reference import softmax  # noqa: E402
from verification import goodness_of_fit, min_detectable_tv  # noqa: E402
from verification.stats.counts import Counts  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--V", type=int, default=151936)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--rows", type=int, default=512)
    ap.add_argument("--per-row", type=int, default=64)
    ap.add_argument("--out", default="benchmarks/results/verify_throughput.json")
    args = ap.parse_args()
    V = args.V
    rng = np.random.default_rng(0)
    z = (rng.normal(0, 2.5, V)).astype(np.float32)  # a realistic spread: top tokens dominate, long tail
    p = softmax(z.astype(np.float64))
    zt = torch.tensor(z, device="cuda").expand(args.rows, -1)
    counts = torch.zeros(V, dtype=torch.int64, device="cuda")
    flashsampling.sample_from_logits(zt, seed=1, num_samples=args.per_row, host_checks=False)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    launches = 0
    while time.perf_counter() - t0 < args.seconds:
        tok = flashsampling.sample_from_logits(zt, seed=1000 + launches, num_samples=args.per_row, host_checks=False)
        counts += torch.bincount(tok.reshape(-1), minlength=V)
        launches += 1
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    n = int(counts.sum())
    t1 = time.perf_counter()
    c = counts.cpu().numpy()
    res = goodness_of_fit(Counts(c), p, alpha=1e-6)
    test_s = time.perf_counter() - t1
    out = {
        "V": V,
        "rows_per_launch": args.rows,
        "samples_per_row": args.per_row,
        "seconds": elapsed,
        "samples": n,
        "samples_per_second": n / elapsed,
        "test_seconds": test_s,
        "pvalue": res.pvalue,
        "passed": res.passed,
        "tested_mass": res.tested_mass,
        "min_detectable_tv_alpha1e-6_power0.99": res.min_detectable_tv,
        "planning_min_detectable_tv": min_detectable_tv(n, V, alpha=1e-6, power=0.99),
        "device": torch.cuda.get_device_name(),
    }
    print(json.dumps(out, indent=2))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
