"""Checks of proofs/tv_certificate.md: the pooling inequality on random laws, and the certificate's coverage measured
on planted samplers of known total variation (and its tightness on exact ones).

* :func:`pooling_inequality` - Lemma 1, ``TV(q, p) <= TV_Pi(q, p) + min(q(P), p(P))``, on random laws and random
  pooled sets (an identity of the proof's algebra, checked in floating point);
* :func:`coverage` - the fraction of ``reps`` samples (NumPy multinomial counts, one seed) whose certificate is at
  least the planted sampler's exact total variation, and whose tail interval holds the sampler's pooled mass;
  ``shrink`` scales the bound down (a planted defect of the certificate: the coverage check must then fail);
* :func:`coverage_holds` - the one-sided exact binomial test the meta-tests assert: the misses are not significantly
  more than ``alpha`` of the samples (at level :data:`COVERAGE_LEVEL`).

``python proofs/check_tv_certificate.py [--write]`` prints (and records) the numbers of the coverage table.
"""

from __future__ import annotations

import math
import sys

import numpy as np
from scipy import stats

from verification.stats.tv_certificate import TAIL_SHARE, certificate_singletons, tv_certificates
from verification.stats.two_sample_bound import l1_deviation

#: Level of the one-sided binomial test of a measured coverage (a correct bound fails it with probability at most
#: this; the planted defects miss in a large fraction of samples and fail it with p-values far below).
COVERAGE_LEVEL = 1e-6
#: The check's law: V = 50 logits N(0, 2**2) (seed 0), the planted samplers' sizes and repetitions.
V, SIGMA, N, REPS, ALPHA = 50, 2.0, 20_000, 2000, 0.05


def target(v: int = V, sigma: float = SIGMA, seed: int = 0) -> np.ndarray:
    """softmax of ``v`` logits N(0, sigma**2)."""
    z = np.random.default_rng(seed).normal(0.0, sigma, v)
    p = np.exp(z - z.max())
    return p / p.sum()


def planted(p: np.ndarray, kind: str, e: float) -> np.ndarray:
    """A sampler's law on ``V + 1`` outcomes (the last: a draw outside ``[0, V)``): ``exact``; ``uniform``,
    ``(1 - e) p + e / V``; ``least``, ``(1 - e) p + e`` on the least probable token (a flooded tail); ``starved``,
    the tokens below the median probability lose the fraction ``e`` of their mass to the top token; ``outside``, ``e``
    of the mass outside ``[0, V)``."""
    v = p.size
    q = np.concatenate([p, [0.0]])
    if kind == "uniform":
        q[:v] = (1 - e) * p + e / v
    elif kind == "least":
        q[:v] = (1 - e) * p
        q[int(np.argmin(p))] += e
    elif kind == "starved":
        low = p < np.median(p)
        q[:v][low] *= 1 - e
        q[int(np.argmax(p))] += e * p[low].sum()
    elif kind == "outside":
        q[:v] = (1 - e) * p
        q[v] = e
    elif kind != "exact":
        raise ValueError(f"kind must be exact, uniform, least, starved or outside, got {kind!r}")
    return q


#: The planted samplers of the coverage table: (kind, e).
CASES = (("exact", 0.0), ("uniform", 0.05), ("uniform", 0.3), ("least", 0.01), ("starved", 0.5), ("outside", 0.02))
#: The planted sampler the defective bounds are measured on (its total variation is large against the noise).
DEFECT_CASE = ("uniform", 0.3)


def coverage(p: np.ndarray, q: np.ndarray, n: int, reps: int, *, alpha: float, seed: int, shrink: float = 1.0,
             without_deviation: bool = False):  # fmt: skip
    """``(coverage, tail coverage, mean bound, exact TV)`` over ``reps`` samples of ``n`` draws of ``q`` (on ``V + 1``
    outcomes), each certified against ``p`` at ``alpha``.  Planted defects of the bound: ``shrink`` multiplies it,
    ``without_deviation`` drops its L1 deviation term ``eps / 2`` (the plug-in estimate and the tail term only)."""
    v = p.size
    counts = np.random.default_rng(seed).multinomial(n, q, size=reps)
    keep = certificate_singletons(p, n, alpha=alpha)
    bound, lo, hi = tv_certificates(counts[:, :v], counts[:, v], p, keep, alpha=alpha)
    if without_deviation:
        k = int(keep.sum())
        bound = bound - 0.5 * l1_deviation(n, k + (k < v) + 1, (1 - TAIL_SHARE) * alpha if k < v else alpha)
    bound = bound * shrink
    tv = 0.5 * float(np.abs(q[:v] - p).sum() + q[v])
    pooled = float(q[:v][~keep].sum())
    covered = bound >= tv - 1e-15
    tail = (lo <= pooled + 1e-15) & (pooled <= hi + 1e-15) if (~keep).any() else np.ones(reps, dtype=bool)
    return float(covered.mean()), float(tail.mean()), float(bound.mean()), tv


def coverage_holds(coverage_measured: float, reps: int, alpha: float, level: float = COVERAGE_LEVEL) -> bool:
    """The one-sided exact binomial test of a measured coverage: ``False`` when the misses are significantly more
    than ``alpha`` of ``reps`` (p-value of ``Bin(reps, alpha) >= misses`` at most ``level``)."""
    misses = int(round((1.0 - coverage_measured) * reps))
    return bool(stats.binomtest(misses, reps, alpha, alternative="greater").pvalue > level)


def pooling_inequality(trials: int = 2000, seed: int = 1) -> float:
    """The largest ``TV(q, p) - TV_Pi(q, p) - min(q(P), p(P))`` over random laws on 2..30 categories and random
    pooled sets (Lemma 1 says ``<= 0``)."""
    rng = np.random.default_rng(seed)
    worst = -math.inf
    for _ in range(trials):
        v = int(rng.integers(2, 31))
        p, q = rng.dirichlet(np.full(v, 0.5)), rng.dirichlet(np.full(v, 0.5))
        pool = rng.random(v) < 0.5
        tv = 0.5 * np.abs(q - p).sum()
        tv_pi = 0.5 * (np.abs(q[~pool] - p[~pool]).sum() + abs(q[pool].sum() - p[pool].sum()))
        worst = max(worst, tv - tv_pi - min(q[pool].sum(), p[pool].sum()))
    return float(worst)


def collect(reps: int = REPS, n: int = N) -> dict:
    """The numbers tv_certificate.md quotes."""
    p = target()
    rows = []
    for k, (kind, e) in enumerate(CASES):
        cov, tail, mean, tv = coverage(p, planted(p, kind, e), n, reps, alpha=ALPHA, seed=100 + k)
        rows.append({"kind": kind, "e": e, "tv": tv, "coverage": cov, "tail_coverage": tail, "mean_bound": mean})
    bad = planted(p, *DEFECT_CASE)
    shrunk = coverage(p, bad, n, reps, alpha=ALPHA, seed=102, shrink=0.5)[0]
    plug_in = coverage(p, bad, n, reps, alpha=ALPHA, seed=102, without_deviation=True)[0]
    return {
        "V": V,
        "n": n,
        "reps": reps,
        "alpha": ALPHA,
        "cases": rows,
        "shrunk_coverage": shrunk,
        "plug_in_coverage": plug_in,
        "sqrt_k_over_n": math.sqrt(int(certificate_singletons(p, n, alpha=ALPHA).sum() + 2) / n),
        "pooling_worst": pooling_inequality(),
    }


def verdicts(res: dict) -> dict[str, bool]:
    reps, alpha = res["reps"], res["alpha"]
    return {
        "coverage >= 1 - alpha (binomial test)": all(coverage_holds(r["coverage"], reps, alpha) for r in res["cases"]),
        "tail interval covers": all(coverage_holds(r["tail_coverage"], reps, alpha) for r in res["cases"]),
        "the halved bound fails the coverage test": not coverage_holds(res["shrunk_coverage"], reps, alpha),
        "the bound without eps/2 fails the coverage test": not coverage_holds(res["plug_in_coverage"], reps, alpha),
        "Lemma 1 holds": res["pooling_worst"] <= 1e-12,
    }


def render(res: dict) -> dict[str, str]:
    from proofs._generated import md_table, sci

    rows = [
        (f"`{r['kind']}`", f"{r['e']:g}", f"{r['tv']:.4f}", f"{r['mean_bound']:.4f}", f"{r['coverage']:.4f}",
         f"{r['tail_coverage']:.4f}")
        for r in res["cases"]
    ]  # fmt: skip
    table = md_table(rows, header=("planted sampler", "e", "exact TV", "mean bound", "coverage", "tail coverage"))
    v = verdicts(res)
    text = "\n".join([
        f"V = {res['V']} logits N(0, 2^2), n = {res['n']:,} draws, {res['reps']:,} samples per sampler, alpha = "
        f"{res['alpha']:g}; $\\sqrt{{k/n}} = {res['sqrt_k_over_n']:.4f}$ at the chosen cells.",
        "",
        table,
        "",
        f"Planted defects of the bound, on the `{DEFECT_CASE[0]}` sampler at e = {DEFECT_CASE[1]:g}: halved, it covers "
        f"{res['shrunk_coverage']:.4f} of the samples; without its deviation term $\\varepsilon/2$ (the plug-in "
        f"estimate), {res['plug_in_coverage']:.4f}: "
        + ("the coverage test fails both, as it must." if v["the halved bound fails the coverage test"]
           and v["the bound without eps/2 fails the coverage test"] else "**the coverage test does not fail both.**"),
        f"Lemma 1 on 2000 random laws and pooled sets: largest $TV - TV_\\Pi - \\min(q(P), p(P)) = "
        f"{sci(res['pooling_worst'])}$ (an identity of the algebra, checked in floating point).",
    ])  # fmt: skip
    return {"coverage": text}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    res = collect()
    for r in res["cases"]:
        print(f"{r['kind']:8} e={r['e']:<5g} TV={r['tv']:.4f} mean bound={r['mean_bound']:.4f} "
              f"coverage={r['coverage']:.4f} tail={r['tail_coverage']:.4f}")  # fmt: skip
    print(f"halved bound coverage {res['shrunk_coverage']:.4f}; without eps/2 {res['plug_in_coverage']:.4f}; "
          f"Lemma 1 worst {res['pooling_worst']:.3g}")  # fmt: skip
    v = verdicts(res)
    print(v)
    if "--write" in argv:
        from proofs import _generated as gen

        gen.save("tv_certificate", res)
        gen.write_blocks(gen.HERE / "tv_certificate.md", "check_tv_certificate.py", render(gen.roundtrip(res)))
    return 0 if all(v.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
