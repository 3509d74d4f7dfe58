"""The planning twins, tested against themselves: n from a deviation, then the deviation from that n,
never above the target (and n - 1 not enough where the twin promises the smallest n)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verification import min_detectable_tv, required_samples
from verification.stats.categories import min_detectable_missing_category, required_category_samples
from verification.stats.cdf import min_detectable_cdf_distance, required_cdf_samples
from verification.stats.exact import min_detectable_exact_tv, required_exact_samples
from verification.stats.gumbel import gumbel_shift_distance, min_detectable_gumbel_distance, required_gumbel_samples
from verification.stats.homogeneity import min_detectable_homogeneity_tv, required_homogeneity_samples
from verification.stats.independence import min_detectable_independence_tv, required_independence_samples
from verification.stats.power import CHI2_MISS_SAFETY, chi2_noncentrality, chi2_power, dkw_min_detectable
from verification.stats.tails import min_detectable_tail_deficit, required_tail_samples
from verification.stats.ties import min_detectable_tie_shift, required_tie_samples

ALPHAS = [1e-2, 1e-6]


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("v", [2, 10, 1000, 262144])
@pytest.mark.parametrize("tv", [0.3, 0.05, 0.01, 0.002])
def test_chi2_pair_is_consistent_and_tight(tv, v, alpha):
    n = required_samples(tv, v, alpha=alpha, power=0.99)
    assert min_detectable_tv(n, v, alpha=alpha, power=0.99) <= tv
    if n > 1:
        assert min_detectable_tv(n - 1, v, alpha=alpha, power=0.99) > tv


def test_chi2_planning_scales_as_documented():
    # 1/sqrt(n) in n; increasing in V; increasing as alpha shrinks or power grows.
    a = min_detectable_tv(10_000, 100)
    assert min_detectable_tv(40_000, 100) == pytest.approx(a / 2, rel=1e-12)
    assert min_detectable_tv(10_000, 1000) > a > min_detectable_tv(10_000, 10)
    assert min_detectable_tv(10_000, 100, alpha=1e-9) > a > min_detectable_tv(10_000, 100, alpha=1e-3)
    assert min_detectable_tv(10_000, 100, power=0.999) > a
    assert round(min_detectable_tv(10**6, 1000), 4) == 0.0097


@pytest.mark.parametrize("dof", [1, 9, 999, 262143])
def test_noncentrality_reaches_the_target_with_the_safety_margin(dof):
    lam = chi2_noncentrality(dof, 1e-6, 0.99)
    assert chi2_power(lam, dof, 1e-6) == pytest.approx(1 - CHI2_MISS_SAFETY * 0.01, abs=1e-6)
    assert chi2_power(0.0, dof, 1e-6) == pytest.approx(1e-6, rel=1e-3)


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 30), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_cauchy_schwarz_bound_behind_the_planning(v, s1, s2):
    """chi2(q || p) >= 4 TV(p, q)**2 for any p, q (the derivation in verification.stats.power)."""
    p = np.random.default_rng(s1).dirichlet(np.ones(v))
    q = np.random.default_rng(s2).dirichlet(np.ones(v) * 0.5)
    chi2 = float(((q - p) ** 2 / p).sum())
    tv = 0.5 * float(np.abs(q - p).sum())
    assert chi2 >= 4 * tv * tv * (1 - 1e-12)


def _or_inf(planner) -> float:
    """The planner's detectable deviation, ``inf`` where it raises because nothing is detectable."""
    try:
        return planner()
    except ValueError as e:
        assert "too few" in str(e) or "must be >= 1" in str(e)
        return math.inf


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("delta", [0.2, 0.03, 0.004])
def test_cdf_pair(delta, alpha):
    n = required_cdf_samples(delta, alpha=alpha)
    fewer = _or_inf(lambda: min_detectable_cdf_distance(n - 1, alpha=alpha))
    assert min_detectable_cdf_distance(n, alpha=alpha) <= delta < fewer
    assert min_detectable_cdf_distance(n, alpha=alpha) == dkw_min_detectable(n, alpha, 0.99)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("delta", [0.2, 0.03, 0.01])
def test_gumbel_pair(delta, alpha):
    n = required_gumbel_samples(delta, alpha=alpha)
    assert min_detectable_gumbel_distance(n, alpha=alpha) <= delta
    # the exact KS critical value is below the DKWM one: never more maxima than the DKWM test
    assert n <= required_cdf_samples(delta, alpha=alpha)


def test_gumbel_shift_distance():
    assert gumbel_shift_distance(0.0) == 0.0
    x = np.linspace(-10, 30, 400001)
    for s in (0.01, 0.3, 2.0):
        brute = np.abs(np.exp(-np.exp(-x)) - np.exp(-np.exp(-(x - s)))).max()
        assert gumbel_shift_distance(s) == pytest.approx(brute, abs=1e-8)
        assert gumbel_shift_distance(-s) == gumbel_shift_distance(s)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize(("deficit", "mass"), [(1.0, 0.01), (1.0, 3e-4), (0.2, 0.02), (0.05, 0.1)])
def test_tail_pair(deficit, mass, alpha):
    n = required_tail_samples(deficit, mass, alpha=alpha)
    assert min_detectable_tail_deficit(n, mass, alpha=alpha) <= deficit
    if deficit == 1.0:  # full starvation: (1 - p_T)**n <= alpha, about log(1/alpha) / p_T draws
        assert n <= math.ceil(math.log(alpha) / math.log1p(-mass))


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize(("shift", "m"), [(0.1, 2), (0.01, 101), (0.003, 262144)])
def test_tie_pair(shift, m, alpha):
    n = required_tie_samples(shift, m, alpha=alpha)
    assert min_detectable_tie_shift(n, m, alpha=alpha) <= shift


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize(("missing", "v"), [(1e-3, 100), (1e-6, 262144)])
def test_category_missing_pair(missing, v, alpha):
    n = required_category_samples(missing, v, alpha=alpha)
    assert (
        min_detectable_missing_category(n, v, alpha=alpha)
        <= missing
        < min_detectable_missing_category(n - 1, v, alpha=alpha)
    )


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("tv", [0.2, 0.02])
def test_homogeneity_and_independence_pairs(tv, alpha):
    n = required_homogeneity_samples(tv, 50, alpha=alpha)
    assert min_detectable_homogeneity_tv(n, n, 50, alpha=alpha) <= tv
    # two samplers need twice the draws of one sampler against exact probabilities (each)
    assert n == pytest.approx(2 * required_samples(tv, 50, alpha=alpha), abs=2)
    m = required_independence_samples(tv, 8, 8, alpha=alpha)
    assert min_detectable_independence_tv(m, 8, 8, alpha=alpha) <= tv


def test_exact_pair():
    p = np.array([0.5, 0.3, 0.2])
    n = required_exact_samples(0.45, p, alpha=1e-2)
    assert min_detectable_exact_tv(n, p, alpha=1e-2) <= 0.45
    # too few draws: the test can never reject at this alpha, and the planner says so
    with pytest.raises(ValueError, match="n=3 draws are too few"):
        min_detectable_exact_tv(3, p, alpha=1e-6)


@pytest.mark.parametrize("v", [2, 10, 1000])
def test_min_detectable_tv_is_a_total_variation(v):
    """Below the n that detects TV 1 the planner raises instead of stating a TV above 1 (2.93 at n=1, V=2)."""
    n1 = required_samples(1.0, v, alpha=1e-3)
    assert 0 < min_detectable_tv(n1, v, alpha=1e-3) <= 1.0
    with pytest.raises(ValueError, match=f"n={n1 - 1} draws are too few"):
        min_detectable_tv(n1 - 1, v, alpha=1e-3)
