"""Calibration: the suite measures its own error rates.

For every test family this module simulates

* **null replicates** (an exact sampler): the p-values must be uniform (two-sided KS) for tests whose
  size is exact or asymptotically exact, and no smaller than uniform (one-sided KS) for tests that
  are conservative by construction (DKWM bound, Holm, exact discrete tests); the false-alarm rates at
  ``alpha = 0.05`` and ``0.01`` must be within binomial noise of (or, for conservative tests, below)
  ``alpha``;
* **planted biases** at exactly the claimed ``min_detectable`` deviation (:mod:`verification.battery.planted`),
  at least three shapes per test including the worst case of the chi-square bound: the measured power
  must be consistent with ``>= 0.99``.

Replicates are simulated at the level of counts (``rng.multinomial``), which has exactly the law of
``n`` iid categorical draws, and passed to the public test functions as :class:`Counts`.  Every check
is a hypothesis test of its own at level ``CHECK_LEVEL``; with fixed seeds the outcome is
deterministic.  ``python -m verification.runners.calibration --out docs/calibration.md`` writes the report
(rendered by :func:`verification.outputs.markdown.calibration_page`).

The page's last section calibrates :func:`verification.check_sampler` as a whole (:func:`check_sampler_null`):
``--check-runs`` null runs of the entire battery (every test of two rows, the lag scans, under one Holm
family at ``alpha = 0.05``) on an exact NumPy sampler, with seeds that keep the runs independent; the
family-wise false-alarm rate must be at most ``alpha`` within its binomial band.  The lag scan's own rows
(:func:`lag_scan_spec`: its null p-values and its power at the claimed deviation, shifted overlaps at
shifts +1, -8 and 0) run there too, not in the test suite's parametrized checks.

Why one module (~750 lines): it is the script that writes ``docs/calibration.md``; each test's null and planted
specifications sit beside the runner that reads them, and the page's tests check its numbers against this file.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import optimize, stats

from ..battery import examples, planted
from ..outputs.markdown import calibration_page
from ..stats._validate import check_int
from ..stats.binning import pool_small_bins
from ..stats.categories import category_test, min_detectable_category_shift
from ..stats.cdf import dkwm_cdf_test, min_detectable_cdf_distance
from ..stats.counts import Counts
from ..stats.exact import exact_multinomial, min_detectable_exact_tv
from ..stats.gof import g_test, min_detectable_tv, pearson_chisquare
from ..stats.gumbel import gumbel_max_test, gumbel_shift_distance
from ..stats.homogeneity import homogeneity_test, min_detectable_homogeneity_tv
from ..stats.independence import (
    independence_test,
    lag_scan_test,
    min_detectable_independence_tv,
    min_detectable_lag_scan_tv,
)
from ..stats.power import ks_min_detectable
from ..stats.tails import min_detectable_tail_deficit, tail_mass_test
from ..stats.ties import min_detectable_tie_shift, tie_bias_test
from .check import check_sampler

#: Level of each calibration check (KS uniformity, false-alarm rate, power): a correct test fails a
#: check with probability at most this (per check, before fixing the seed).
CHECK_LEVEL = 1e-3
#: Power every claim is checked against.
TARGET_POWER = 0.99

Draw = Callable[[np.random.Generator, int], np.ndarray]  # (rng, R) -> R p-values


@dataclass
class Bias:
    """A planted deviation: its name, its size in the test's metric, and a simulator of R p-values."""

    name: str
    deviation: float
    draw: Draw
    claimed: float | None = None  # the claim this bias checks, when it is not the spec's headline claim


@dataclass
class Spec:
    """How to calibrate one test: the null simulator, the claim, and the planted biases at the claim."""

    name: str
    setting: str
    conservative: bool
    null: Draw
    claim: Callable[[float], float]  # alpha -> claimed min detectable deviation at TARGET_POWER
    biases: Callable[[float], list[Bias]]  # alpha -> biases planted at the claim


@dataclass
class NullRow:
    test: str
    setting: str
    conservative: bool
    replicates: int
    ks_pvalue: float  # two-sided (exact-size tests) or one-sided "no excess" (conservative tests)
    rate_05: float
    rate_01: float
    rate_05_pvalue: float
    rate_01_pvalue: float

    @property
    def ok(self) -> bool:
        return min(self.ks_pvalue, self.rate_05_pvalue, self.rate_01_pvalue) > CHECK_LEVEL


@dataclass
class PowerRow:
    test: str
    bias: str
    alpha: float
    claimed: float
    planted: float
    replicates: int
    power: float
    pvalue: float  # of "power >= TARGET_POWER" (one-sided binomial on the misses)

    @property
    def ok(self) -> bool:
        return self.pvalue > CHECK_LEVEL


@dataclass
class Report:
    null: list[NullRow] = field(default_factory=list)
    power: list[PowerRow] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.null) and all(r.ok for r in self.power)


# ---------------------------------------------------------------------------------------------
# Simulation helpers
# ---------------------------------------------------------------------------------------------


def _pvalues_from_counts(test: Callable[[Counts], float], p: np.ndarray, n: int) -> Draw:
    def draw(rng: np.random.Generator, r: int) -> np.ndarray:
        c = rng.multinomial(n, p, size=r)
        return np.array([test(Counts(row)) for row in c])

    return draw


def _geometric(v: int, rate: float) -> np.ndarray:
    w = np.exp(-rate * np.arange(v))
    return w / w.sum()


# ---------------------------------------------------------------------------------------------
# The specs
# ---------------------------------------------------------------------------------------------


def _chi2_spec(name: str, fn, p: np.ndarray, n: int, setting: str) -> Spec:
    v = p.size
    binning = pool_small_bins(p, n)
    rarest = int(np.argmin(p))

    def pv(q: np.ndarray, a: float) -> Draw:
        return _pvalues_from_counts(lambda c: fn(c, p, alpha=a).pvalue, q, n)

    def at_binned_tv(make: Callable[[float], np.ndarray], tv: float) -> np.ndarray:
        # The claim is about the TV between the *binned* distributions.
        return planted.at_binned_tv(make, p, binning.labels, binning.num_bins, tv)

    def tilt(t: float) -> np.ndarray:
        try:
            return planted.tilt(p, t)
        except ValueError:
            return planted.tilt(p, t, sharpen=False)

    def biases(a: float) -> list[Bias]:
        tv = min_detectable_tv(n, v, alpha=a, power=TARGET_POWER)
        return [
            Bias("proportional (worst case)", tv, pv(at_binned_tv(lambda t: planted.proportional(p, t), tv), a)),
            Bias("temperature tilt", tv, pv(at_binned_tv(tilt, tv), a)),
            Bias("transfer to rarest", tv, pv(at_binned_tv(lambda t: planted.transfer(p, t, rarest), tv), a)),
            Bias("starve the tail", tv, pv(at_binned_tv(lambda t: planted.starve(p, t), tv), a)),
        ]

    return Spec(
        name,
        setting,
        False,
        pv(p, 0.5),
        lambda a: min_detectable_tv(n, v, alpha=a, power=TARGET_POWER),
        biases,
    )


def _exact_spec() -> Spec:
    p = np.array([0.5, 0.3, 0.2])
    n = 30

    def pv(q, a):
        return _pvalues_from_counts(lambda c: exact_multinomial(c, p, alpha=a).pvalue, q, n)

    def biases(a):
        tv = min_detectable_exact_tv(n, p, alpha=a, power=TARGET_POWER)
        out = [
            Bias("to category 2 from the others", tv, pv(planted.transfer(p, tv, 2), a)),
            Bias("to category 1 from the others", tv, pv(planted.transfer(p, tv, 1), a)),
            Bias("to category 2 from 0 first", tv, pv(planted.cdf_shift(p, tv, np.array([0, 1, 2])), a)),
            Bias("to category 1 from 0 first", tv, pv(planted.cdf_shift(p, tv, np.array([0, 2, 1])), a)),
            Bias("to category 0 from the others", tv, pv(planted.transfer(p, tv, 0), a)) if tv <= 0.5 else None,
            Bias("proportional", tv, pv(planted.proportional(p, tv), a)) if tv <= 0.5 else None,
        ]
        return [b for b in out if b is not None]

    return Spec(
        "exact multinomial",
        "V=3, p=(.5,.3,.2), n=30",
        True,
        pv(p, 0.5),
        lambda a: min_detectable_exact_tv(n, p, alpha=a, power=TARGET_POWER),
        biases,
    )


def _cdf_spec() -> Spec:
    p = _geometric(50, 0.05)
    n = 2000

    def pv(q, a):
        return _pvalues_from_counts(lambda c: dkwm_cdf_test(c, p, alpha=a).pvalue, q, n)

    def biases(a):
        d = min_detectable_cdf_distance(n, alpha=a, power=TARGET_POWER)
        return [
            Bias("first -> last", d, pv(planted.cdf_shift(p, d), a)),
            Bias("first -> middle", d, pv(planted.cdf_shift(p, d, to=25), a)),
            Bias("last -> first", d, pv(planted.cdf_shift(p, d, np.arange(p.size)[::-1]), a)),
        ]

    return Spec(
        "DKWM CDF envelope",
        "V=50 geometric, n=2000, index order",
        True,
        pv(p, 0.5),
        lambda a: min_detectable_cdf_distance(n, alpha=a, power=TARGET_POWER),
        biases,
    )


def _homogeneity_spec() -> Spec:
    p = _geometric(30, 0.15)
    n = 3000

    def pv(q, a):
        def draw(rng, r):
            ca = rng.multinomial(n, p, size=r)
            cb = rng.multinomial(n, q, size=r)
            return np.array([homogeneity_test(Counts(x), Counts(y), p.size, alpha=a).pvalue for x, y in zip(ca, cb)])

        return draw

    def biases(a):
        tv = min_detectable_homogeneity_tv(n, n, p.size, alpha=a, power=TARGET_POWER)
        return [
            Bias("proportional (worst case)", tv, pv(planted.proportional(p, tv), a)),
            Bias("temperature tilt", tv, pv(planted.tilt(p, tv), a)),
            Bias("starve the tail", tv, pv(planted.starve(p, tv), a)),
        ]

    return Spec(
        "two-sample homogeneity",
        "V=30 geometric, n=3000 + 3000",
        False,
        pv(p, 0.5),
        lambda a: min_detectable_homogeneity_tv(n, n, p.size, alpha=a, power=TARGET_POWER),
        biases,
    )


def _tail_spec() -> Spec:
    # A head of 5 tokens and 2000 tokens 8 nats below it: tail mass ~ 0.0195.
    z = np.r_[np.zeros(5), np.full(2000, -8.0)]
    p = np.exp(z) / np.exp(z).sum()
    tail = z < -1
    p_t = float(p[tail].sum())
    n = 5000

    def pv(q, a):
        return _pvalues_from_counts(lambda c: tail_mass_test(c, p, tail, alpha=a).pvalue, q, n)

    def with_tail(scale_far: float, scale_near: float, r: float) -> np.ndarray:
        # Remove relative mass r from the tail with the given split between its two halves.
        idx = np.flatnonzero(tail)
        far, near = idx[idx.size // 2 :], idx[: idx.size // 2]
        q = p.copy()
        total = r * p_t
        q[far] *= 1 - scale_far * total / p[far].sum()
        q[near] *= 1 - scale_near * total / p[near].sum()
        q[~tail] += total * p[~tail] / p[~tail].sum()
        return q

    def biases(a):
        r = min_detectable_tail_deficit(n, p_t, alpha=a, power=TARGET_POWER)
        return [
            Bias("uniform tail deficit", r, pv(with_tail(0.5, 0.5, r), a)),
            Bias("far half starved", r, pv(with_tail(1.0, 0.0, r), a)),
            Bias("near half starved", r, pv(with_tail(0.0, 1.0, r), a)),
        ]

    return Spec(
        "tail mass (less)",
        f"5 head + 2000 tail tokens 8 nats below (p_T={p_t:.4f}), n=5000",
        True,
        pv(p, 0.5),
        lambda a: min_detectable_tail_deficit(n, p_t, alpha=a, power=TARGET_POWER),
        biases,
    )


def _gumbel_scale_distance(scale: float) -> float:
    x = np.linspace(-6, 30, 200001)
    return float(np.abs(np.exp(-np.exp(-x)) - np.exp(-np.exp(-x / scale))).max())


def _gumbel_spec() -> Spec:
    z = np.array([2.0, 1.0, 0.5, 0.0, -1.0, -3.0, -7.0, -20.0])
    loc = float(np.log(np.exp(z).sum()))
    n = 1000

    def null(rng, r):
        m = (z + rng.gumbel(size=(r, n, z.size))).max(axis=2)
        return np.array([gumbel_max_test(row, z, alpha=0.5).pvalue for row in m])

    def pv(sampler, a):
        def draw(rng, r):
            m = sampler(rng, (r, n))
            return np.array([gumbel_max_test(row, loc=loc, alpha=a).pvalue for row in m])

        return draw

    def biases(a):
        d = ks_min_detectable(n, a, TARGET_POWER)
        shift = optimize.brentq(lambda s: gumbel_shift_distance(s) - d, 0, 20)
        scale = optimize.brentq(lambda s: _gumbel_scale_distance(s) - d, 1.0, 50)
        far = 3.0
        w = d / gumbel_shift_distance(far)
        return [
            Bias(f"location +{shift:.3f} nats", d, pv(lambda g, size: loc + shift + g.gumbel(size=size), a)),
            Bias(f"scale x{scale:.3f}", d, pv(lambda g, size: loc + scale * g.gumbel(size=size), a)),
            Bias(
                f"{w:.3f} contaminated by +3 nats",
                d,
                pv(lambda g, size: loc + g.gumbel(size=size) + far * (g.random(size) < w), a),
            ),
        ]

    return Spec(
        "Gumbel max (KS)",
        "V=8 logits spanning 22 nats, n=1000 maxima",
        False,
        null,
        lambda a: ks_min_detectable(n, a, TARGET_POWER),
        biases,
    )


def _tie_spec() -> Spec:
    v = 101
    n = 5000
    p = np.full(v, 1.0 / v)
    half = v // 2

    def pv(q, a):
        return _pvalues_from_counts(lambda c: tie_bias_test(c, v, alpha=a).pvalue, q, n)

    def halves(d):
        q = np.empty(v)
        q[:half] = (half / v + d) / half
        q[half:] = (1 - half / v - d) / (v - half)
        return q

    def first(d):
        q = p.copy()
        q[0] += d
        q[half:] -= d / (v - half)
        return q

    def biases(a):
        d = min_detectable_tie_shift(n, v, alpha=a, power=TARGET_POWER)
        return [
            Bias("lower half favoured", d, pv(halves(d), a)),
            Bias("upper half favoured", d, pv(halves(-d), a)),
            Bias("index 0 favoured", d, pv(first(d), a)),
        ]

    return Spec(
        "tie bias (lower half)",
        "flat logits, V=101, n=5000",
        True,
        pv(p, 0.5),
        lambda a: min_detectable_tie_shift(n, v, alpha=a, power=TARGET_POWER),
        biases,
    )


def _category_spec() -> Spec:
    v = 200
    p = _geometric(v, 0.02)
    n = 20000

    def pv(q, a):
        return _pvalues_from_counts(lambda c: category_test(c, p, alpha=a).pvalue, q, n)

    def claim(a):
        return category_test(Counts(np.round(n * p).astype(np.int64)), p, alpha=a).min_detectable

    def biases(a):
        miss = claim(a)
        j = int(np.flatnonzero(p >= miss)[-1])  # the rarest category above the claim
        q_miss = p.copy()
        q_miss[j] = 0.0
        q_miss /= q_miss.sum()
        k = 50
        down, up = min_detectable_category_shift(n, float(p[k]), v, alpha=a, power=TARGET_POWER)
        q_up = planted.transfer(p, up, k)
        q_down = p * (1 + down / (1 - p[k]))
        q_down[k] = p[k] - down
        return [
            Bias(f"category {j} (p={p[j]:.2e}) missing", float(p[j]), pv(q_miss, a)),
            Bias(f"category {k} (p={p[k]:.2e}) up by its detectable shift", up, pv(q_up, a), up),
            Bias(f"category {k} (p={p[k]:.2e}) down by its detectable shift", down, pv(q_down, a), down),
        ]

    return Spec(
        "per-category binomial (Holm)",
        "V=200 geometric, n=20000",
        True,
        pv(p, 0.5),
        claim,
        biases,
    )


def _independence_tv(joint: np.ndarray) -> float:
    px, py = joint.sum(1), joint.sum(0)
    return 0.5 * float(np.abs(joint - np.outer(px, py)).sum())


def _independence_spec() -> Spec:
    v = 10
    p = _geometric(v, 0.2)
    n = 5000
    base = np.outer(p, p)

    def pv(joint, a):
        flat = joint.ravel() / joint.sum()

        def draw(rng, r):
            c = rng.multinomial(n, flat, size=r)
            out = []
            for row in c:
                cells = np.repeat(np.arange(v * v), row)
                out.append(independence_test(cells // v, cells % v, v, alpha=a).pvalue)
            return np.array(out)

        return draw

    def coupled(coupling: np.ndarray, tv: float) -> np.ndarray:
        f = lambda e: _independence_tv((1 - e) * base + e * coupling) - tv
        e = optimize.brentq(f, 0.0, 1.0, xtol=1e-14)
        return (1 - e) * base + e * coupling

    def biases(a):
        tv = min_detectable_independence_tv(n, v, v, alpha=a, power=TARGET_POWER)
        copy = np.diag(p)
        shift = np.roll(np.diag(p), 1, axis=1)
        halves = np.zeros((v, v))
        lo = np.arange(v) < v // 2
        for i in range(v):
            same = lo == lo[i]
            halves[i] = p[i] * np.where(same, p, 0) / p[same].sum()
        return [
            Bias("copy y = x", tv, pv(coupled(copy, tv), a)),
            Bias("y = x + 1 mod V", tv, pv(coupled(shift, tv), a)),
            Bias("same half", tv, pv(coupled(halves, tv), a)),
        ]

    return Spec(
        "independence (contingency)",
        "V=10 geometric pairs, n=5000 pairs",
        False,
        pv(base, 0.5),
        lambda a: min_detectable_independence_tv(n, v, v, alpha=a, power=TARGET_POWER),
        biases,
    )


def lag_scan_spec() -> Spec:
    """The lag scan (:func:`verification.stats.independence.lag_scan_test`, 17 shifts) on two streams."""
    v = 10
    p = _geometric(v, 0.2)
    n = 2000
    k = 8

    def pv(lag: int | None, e: float, a: float) -> Draw:
        def draw(rng, r):
            out = []
            for _ in range(r):
                x = rng.choice(v, n + 2 * k, p=p)
                y = rng.choice(v, n + 2 * k, p=p)
                if lag is not None:  # y[j] = x[j + lag] with probability e: an overlap at shift ``lag``
                    j = np.arange(max(0, -lag), min(y.size, x.size - lag))
                    copy = j[rng.random(j.size) < e]
                    y[copy] = x[copy + lag]
                out.append(lag_scan_test(x, y, num_categories=v, max_lag=k, alpha=a).pvalue)
            return np.array(out)

        return draw

    def claim(a):
        return min_detectable_lag_scan_tv(n + 2 * k, p, p, max_lag=k, alpha=a, power=TARGET_POWER)

    def biases(a):
        tv = claim(a)
        e = tv / (1.0 - float(np.sum(p * p)))  # the overlap's TV from independence is e (1 - sum p_i**2)
        return [Bias(f"overlap at shift {lag:+d}", tv, pv(lag, e, a)) for lag in (1, -8, 0)]

    return Spec(
        "lag scan (17 shifts)",
        f"V={v} geometric, two streams of {n + 2 * k} draws, shifts -{k}..{k}",
        True,
        pv(None, 0.0, 0.5),
        claim,
        biases,
    )


def specs() -> list[Spec]:
    """Every calibrated test, in report order."""
    p30 = _geometric(30, 0.15)
    z = np.r_[np.zeros(10), np.full(190, -6.0)]
    many_tail = np.exp(z) / np.exp(z).sum()
    return [
        _chi2_spec("pearson chi-square", pearson_chisquare, p30, 3000, "V=30 geometric, n=3000"),
        _chi2_spec(
            "pearson chi-square (pooled)",
            pearson_chisquare,
            many_tail,
            2000,
            "10 head + 190 tail tokens 6 nats below, n=2000 (tail pooled)",
        ),
        _chi2_spec("G-test", g_test, p30, 3000, "V=30 geometric, n=3000"),
        _exact_spec(),
        _cdf_spec(),
        _homogeneity_spec(),
        _tail_spec(),
        _gumbel_spec(),
        _tie_spec(),
        _category_spec(),
        _independence_spec(),
    ]


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------


def check_null(spec: Spec, replicates: int, seed: int) -> NullRow:
    """Simulate ``replicates`` null p-values and test their uniformity and the false-alarm rates."""
    pv = spec.null(np.random.default_rng(seed), replicates)
    alt = "greater" if spec.conservative else "two-sided"
    ks = stats.kstest(pv, "uniform", alternative=alt).pvalue
    rates, rate_p = [], []
    for a in (0.05, 0.01):
        k = int((pv <= a).sum())
        rates.append(k / replicates)
        rate_p.append(stats.binomtest(k, replicates, a, alternative=alt).pvalue)
    return NullRow(spec.name, spec.setting, spec.conservative, replicates, float(ks), *rates, *rate_p)


def check_power(spec: Spec, replicates: int, seed: int, alpha: float) -> list[PowerRow]:
    """Simulate each planted bias at the claim and test ``power >= TARGET_POWER``."""
    claimed = spec.claim(alpha)
    rows = []
    if not math.isfinite(claimed):
        return rows
    for i, b in enumerate(spec.biases(alpha)):
        pv = b.draw(np.random.default_rng(seed + 7919 * (i + 1)), replicates)
        misses = int((pv > alpha).sum())
        p_ok = stats.binomtest(misses, replicates, 1 - TARGET_POWER, alternative="greater").pvalue
        c = claimed if b.claimed is None else b.claimed
        rows.append(PowerRow(spec.name, b.name, alpha, c, b.deviation, replicates, 1 - misses / replicates, p_ok))
    return rows


def run(
    null_replicates: int = 500,
    power_replicates: int = 500,
    alphas: tuple[float, ...] = (1e-3,),
    seed: int = 20240601,
    only: list[str] | None = None,
    extra: bool = False,
) -> Report:
    """Calibrate every test (or those named in ``only``); deterministic for a fixed ``seed``.  ``extra`` adds
    the specs that only this script runs (:func:`lag_scan_spec`)."""
    t0 = time.perf_counter()
    report = Report()
    for k, spec in enumerate(specs() + ([lag_scan_spec()] if extra else [])):
        if only and spec.name not in only:
            continue
        report.null.append(check_null(spec, null_replicates, seed + 101 * k))
        for j, a in enumerate(alphas):
            report.power += check_power(spec, power_replicates, seed + 101 * k + 13 * (j + 1), a)
    report.seconds = time.perf_counter() - t0
    return report


# ---------------------------------------------------------------------------------------------
# check_sampler: the whole battery on an exact sampler
# ---------------------------------------------------------------------------------------------

#: Family-wise alpha of the calibrated check_sampler runs (0.05: the binomial band is informative).
CHECK_ALPHA = 0.05
#: Total variation the calibrated runs are planned for (about 10**4 draws a row: 0.3 s a run).
CHECK_TV = 0.1
#: Seed stride between runs: a run uses seeds ``s + k`` (``k < 2**15 + 4``) and ``s xor 2**j`` (``j = 16..30``,
#: :mod:`verification.planning.streams`); with runs ``70000`` apart no two share a call (a test checks it).
CHECK_SEED_STRIDE = 70_000
#: Runs whose verdict and smallest Holm-adjusted p-value the page records (and a test re-runs).
CHECK_RECORDED = 3


def check_sampler_case() -> np.ndarray:
    """The calibrated logits ``[2, 256]``: row 0 has 4 tied maxima, 12 tokens N(0, 1) and 240 tokens 8.5 nats
    below the top (so the tie and tail tests run); row 1 is N(0, 1.5**2)."""
    rng = np.random.default_rng(20261202)
    z = np.empty((2, 256), np.float32)
    z[0, :4] = 1.0
    z[0, 4:16] = rng.normal(0, 1, 12)
    z[0, 16:] = -7.5
    z[1] = rng.normal(0, 1.5, 256)
    return z


def check_sampler_run(seed: int):
    """One null run: :func:`verification.battery.examples.inverse_cdf` (exact) through ``check_sampler``."""
    return check_sampler(examples.inverse_cdf, check_sampler_case(), alpha=CHECK_ALPHA, tv=CHECK_TV, seed=seed)


@dataclass
class CheckRow:
    """The measured family-wise false-alarm rate of ``check_sampler`` on an exact sampler."""

    runs: int
    failures: int
    pvalue: float  # P(Bin(runs, alpha) >= failures): "the rate is at most alpha"
    band: float  # the rate that P(Bin(runs, alpha) >= .) = CHECK_LEVEL reaches
    tests: int
    n: int
    stream: int
    seed: int
    seconds: float
    by_test: dict[str, int]
    recorded: list[tuple[int, bool, float]]

    @property
    def rate(self) -> float:
        return self.failures / self.runs

    @property
    def ok(self) -> bool:
        return self.pvalue > CHECK_LEVEL


def check_sampler_null(runs: int, seed: int = 20261202) -> CheckRow:
    """``runs`` independent null runs of :func:`check_sampler_run` (run ``r`` at seed ``seed + 70000 r``)."""
    runs = check_int(runs, "runs")
    t0 = time.perf_counter()
    failures = 0
    by_test: dict[str, int] = {}
    recorded = []
    report = None
    for r in range(runs):
        report = check_sampler_run(seed + CHECK_SEED_STRIDE * r)
        failures += not report.passed
        for t in report.failures():
            by_test[t.name] = by_test.get(t.name, 0) + 1
        if r < CHECK_RECORDED:
            recorded.append((seed + CHECK_SEED_STRIDE * r, report.passed, min(t.adjusted_pvalue for t in report.tests)))
    pvalue = float(stats.binom.sf(failures - 1, runs, CHECK_ALPHA))
    band = float(stats.binom.isf(CHECK_LEVEL, runs, CHECK_ALPHA)) / runs
    return CheckRow(runs, failures, pvalue, band, len(report.tests), report.n, report.stream, seed,
                    time.perf_counter() - t0, by_test, recorded)  # fmt: skip


def check_sampler_section(row: CheckRow, command: str) -> str:
    """The page's section on ``check_sampler`` as a whole (its numbers are checked by
    ``tests/verification/test_check_calibration.py``)."""
    seeds = ", ".join(f"{s}: {'pass' if ok else 'FAIL'}, smallest Holm p {p:.6g}" for s, ok, p in row.recorded)
    causes = ", ".join(f"`{k}` {v}" for k, v in sorted(row.by_test.items(), key=lambda kv: (-kv[1], kv[0])))
    return "\n".join(
        [
            "",
            "## check_sampler: the whole battery on an exact sampler",
            "",
            f"Measured by `{command}` in {row.seconds:.0f} s ({'ok' if row.ok else 'NOT OK'}): {row.runs} independent "
            f"runs of `verification.check_sampler` on `verification.battery.examples.inverse_cdf` (float64 inverse "
            f"CDF, exact) with the logits of `calibration.check_sampler_case()` (two rows of V = 256: four tied maxima "
            f"and 240 tokens 8.5 nats down in row 0, so the tie and tail tests run), `tv = {CHECK_TV}`, family-wise "
            f"alpha = {CHECK_ALPHA}. Each run is the whole battery: {row.tests} tests under one Holm family "
            f"(n = {row.n} draws a row, lag scans on streams of {row.stream}); run r uses seed "
            f"{row.seed} + {CHECK_SEED_STRIDE} r, so no two runs share a call.",
            "",
            "| runs | family-wise false alarms | rate | alpha | P(Bin(runs, alpha) >= false alarms) | "
            f"rate at level {CHECK_LEVEL:g} | ok |",
            "|---:|---:|---:|---:|---:|---:|---|",
            f"| {row.runs} | {row.failures} | {row.rate:.4f} | {CHECK_ALPHA} | {row.pvalue:.3g} | {row.band:.4f} | "
            f"{'yes' if row.ok else 'NO'} |",
            "",
            f"- false alarms by test: {causes or 'none'}",
            f"- first runs (seed: verdict, smallest Holm-adjusted p-value): {seeds}",
            "- The rate sits below alpha: Holm is exact only when one test carries the whole family, and several "
            "members are conservative (DKWM, the per-category Holm, the Bonferroni lag scans, the range test, "
            "which never fails an exact sampler).",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m verification.runners.calibration", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="write the markdown report here")
    ap.add_argument("--null", type=int, default=2000, help="null replicates per test (default 2000)")
    ap.add_argument("--power", type=int, default=1000, help="replicates per planted bias (default 1000)")
    ap.add_argument("--alphas", type=float, nargs="+", default=[1e-3, 1e-6], help="alphas of the power checks")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--only", nargs="*", default=None, help="test names to run (default: all)")
    ap.add_argument("--check-runs", type=int, default=1000,
                    help="null runs of the whole check_sampler battery (default 1000; 0: no such section)")  # fmt: skip
    args = ap.parse_args(argv)
    report = run(args.null, args.power, tuple(args.alphas), args.seed, args.only, extra=args.check_runs > 0)
    command = "python -m verification.runners.calibration" + (f" --out {args.out}" if args.out else "")
    text = calibration_page(report, command, check_level=CHECK_LEVEL, target_power=TARGET_POWER)
    check = None
    if args.check_runs > 0:
        check = check_sampler_null(args.check_runs)
        text = text.rstrip("\n") + "\n" + check_sampler_section(check, command)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(text)
    return 0 if report.ok and (check is None or check.ok) else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
