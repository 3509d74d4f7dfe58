"""How fast the statistics are: count and test 10^8 draws over V = 262144 categories.

``python -m verification.runners.speed`` draws ``--samples`` category indices from a Zipf-like distribution
(``p_i ~ (i + 1)**-1.1``; drawing is not timed), then times

1. counting them into a histogram (:func:`verification.count_samples`, one ``np.bincount``), and
2. testing the histogram with the count-based tests of the suite (:mod:`verification.planning.suite`): Pearson
   chi-square, G-test, per-category binomial with Holm, DKWM CDF envelope, and the tail-mass test,

and prints the seconds and the draws per second.  The target is under a minute on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ..stats.categories import category_test
from ..stats.cdf import dkwm_cdf_test
from ..stats.counts import count_samples
from ..stats.gof import g_test, pearson_chisquare
from ..stats.tails import tail_mass_test

#: Draws generated per step (bounds the float64 uniforms of the generator to 80 MB).
_DRAW_CHUNK = 10_000_000


def zipf_probs(num_categories: int, exponent: float = 1.1) -> np.ndarray:
    """``p_i ~ (i + 1)**-exponent``: a heavy head and a long tail, like a language model's next token."""
    w = np.arange(1, num_categories + 1, dtype=np.float64) ** -exponent
    return w / w.sum()


def draw(probs: np.ndarray, num_samples: int, seed: int = 0) -> np.ndarray:
    """Exact inverse-CDF draws (int64), generated in chunks."""
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(probs)
    cdf /= cdf[-1]
    out = np.empty(num_samples, dtype=np.int64)
    for s in range(0, num_samples, _DRAW_CHUNK):
        e = min(num_samples, s + _DRAW_CHUNK)
        out[s:e] = np.searchsorted(cdf, rng.random(e - s), side="right")
    np.minimum(out, probs.size - 1, out=out)
    return out


def measure(num_samples: int = 10**8, num_categories: int = 262144, seed: int = 0) -> dict:
    """Time counting and testing; returns seconds per stage, the verdicts and draws per second."""
    p = zipf_probs(num_categories)
    t0 = time.perf_counter()
    samples = draw(p, num_samples, seed)
    t_draw = time.perf_counter() - t0

    t0 = time.perf_counter()
    counts = count_samples(samples, num_categories)
    t_count = time.perf_counter() - t0

    tail = np.arange(num_categories) >= num_categories // 2
    t0 = time.perf_counter()
    results = [
        pearson_chisquare(counts, p),
        g_test(counts, p),
        category_test(counts, p),
        dkwm_cdf_test(counts, p),
        tail_mass_test(counts, p, tail),
    ]
    t_test = time.perf_counter() - t0
    total = t_count + t_test
    return {
        "num_samples": num_samples,
        "num_categories": num_categories,
        "draw_seconds": t_draw,
        "count_seconds": t_count,
        "test_seconds": t_test,
        "count_and_test_seconds": total,
        "samples_per_second": num_samples / total,
        "results": results,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m verification.runners.speed", description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=10**8)
    ap.add_argument("--categories", type=int, default=262144)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    m = measure(args.samples, args.categories, args.seed)
    print(f"{m['num_samples']:.3g} draws over V={m['num_categories']}")
    print(f"  drawing (not timed)   {m['draw_seconds']:8.2f} s")
    print(f"  counting              {m['count_seconds']:8.2f} s")
    print(f"  testing (5 tests)     {m['test_seconds']:8.2f} s")
    print(f"  count + test          {m['count_and_test_seconds']:8.2f} s   ({m['samples_per_second']:.3g} draws/s)")
    for r in m["results"]:
        print("  " + r.summary())
    return 0 if all(r.passed for r in m["results"]) else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
