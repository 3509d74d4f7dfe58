"""What ``budget_s`` buys ``verification.check_sampler`` (issue 35 item 1): ``n`` a row and draws/s per budget.

The issue's example: a ``torch.multinomial`` sampler seeded through a ``torch.Generator`` on N(0, 2**2) logits,
V = 1000, B = 2, checked with ``budget_s`` = 15 and 60 s (``--budgets``); on the CPU, or on a GPU with
``--device cuda`` (the tokens are then counted on the GPU).  Records each run's drawn and planned ``n``, the
measured draws/s, the seconds of each phase and the verdict.

``python benchmarks/check_scale.py --budgets 15 60 --out benchmarks/results/check_scale_cpu.json``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from verification import check_sampler  # noqa: E402


def multinomial(logits: torch.Tensor, num_samples: int, seed: int) -> torch.Tensor:
    """``torch.multinomial`` on the float64 softmax, seeded through a ``torch.Generator`` on the logits' device."""
    g = torch.Generator(device=logits.device).manual_seed(seed)
    return torch.multinomial(torch.softmax(logits.double(), dim=-1), num_samples, replacement=True, generator=g)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", type=float, nargs="+", default=[15.0, 60.0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    z = torch.from_numpy(np.random.default_rng(0).normal(0, 2, size=(2, 1000)).astype(np.float32)).to(args.device)
    runs = []
    for budget in args.budgets:
        t = time.perf_counter()
        r = check_sampler(multinomial, z, budget_s=budget, seed=1)
        wall = time.perf_counter() - t
        runs.append({"budget_s": budget, "n": r.n, "planned_n": r.planned_n, "draws_per_s": r.draws_per_s,
                     "wall_s": wall, "timing": r.timing, "passed": r.passed, "calls": r.calls})  # fmt: skip
        print(f"budget_s = {budget:g}: n = {r.n:,} a row (planned {r.planned_n:,}), {r.draws_per_s:.3g} draws/s, "
              f"{wall:.1f} s, {'PASSED' if r.passed else 'FAILED'}")  # fmt: skip
    doc = {"device": args.device, "torch": torch.__version__, "machine": platform.machine(),
           "cpu_count": os.cpu_count(), "runs": runs}  # fmt: skip
    if args.device.startswith("cuda"):
        doc["gpu"] = torch.cuda.get_device_name()
    if args.out is not None:
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
