"""The pieces check_sampler adds to the statistics: the lag scan, the law-aware chi-square planner, the range
test, the far tail, assert_samples_match's tail test and float32 probabilities.  Each check is shown failing
on a planted defect of the size it claims to detect.  Seeds: ``budget("verification.lag_scan.exact")`` and
``budget("verification.lag_scan.planted")``; the lag scan's false-alarm rate and power at its claim over
thousands of replicates are in ``docs/calibration.md`` (``calibration.lag_scan_spec``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flashsampling.reference import sample_inverse_cdf
from verification import (
    assert_samples_match,
    goodness_of_fit,
    independence_test,
    lag_scan_test,
    required_samples,
    support_test,
)
from verification.planning.budget import budget
from verification.stats.gof import min_detectable_gof_tv, required_gof_samples
from verification.stats.independence import (
    DEFAULT_MAX_LAG,
    min_detectable_lag_scan_tv,
    required_lag_scan_samples,
    table_shape,
)
from verification.stats.support import min_detectable_impossible_mass, required_support_samples
from verification.stats.tails import far_tail, tail_mass_test

EXACT = budget("verification.lag_scan.exact")
PLANTED = budget("verification.lag_scan.planted")
P = np.exp(-0.2 * np.arange(10))
P /= P.sum()


@pytest.mark.parametrize("shift", [-8, -3, 0, 1, 8])
def test_an_overlap_at_any_scanned_shift_is_found_there(shift):
    rng = np.random.default_rng(PLANTED.seed + shift)
    s = rng.choice(10, 3000, p=P)
    m = s.size - 16
    x, y = s[8 : 8 + m], s[8 + shift : 8 + shift + m]  # y[j] = x[j + shift]
    r = lag_scan_test(x, y, num_categories=10, alpha=PLANTED.alpha)
    assert not r.passed and r.worst_lag == shift and r.num_lags == 2 * DEFAULT_MAX_LAG + 1
    statistic, pvalue = r
    assert pvalue == pytest.approx(min(1.0, 17 * r.pvalues.min())) and statistic == r.statistic


def test_an_overlap_beyond_the_scan_is_not_claimed():
    rng = np.random.default_rng(PLANTED.seed)
    s = rng.choice(10, 3000, p=P)
    assert lag_scan_test(s[:-20], s[20:], num_categories=10, alpha=EXACT.alpha).passed  # shift 20 > K = 8
    assert not lag_scan_test(s[:-20], s[20:], num_categories=10, max_lag=20, alpha=EXACT.alpha).passed


def test_independent_streams_pass_and_the_serial_scan_finds_a_repeat_within_one_stream():
    rng = np.random.default_rng(EXACT.seed)
    x, y = rng.choice(10, 4000, p=P), rng.choice(10, 4000, p=P)
    assert lag_scan_test(x, y, num_categories=10, alpha=EXACT.alpha).passed
    assert lag_scan_test(x, num_categories=10, alpha=EXACT.alpha).passed
    repeat = np.repeat(rng.choice(10, 2000, p=P), 2)  # draw 2j + 1 repeats draw 2j
    r = lag_scan_test(repeat, num_categories=10, alpha=PLANTED.alpha)
    assert not r.passed and r.serial and r.worst_lag == 1


def test_draws_out_of_range_fail_the_scan_and_short_streams_are_refused():
    x = np.r_[np.zeros(50, np.int64), 10]
    assert lag_scan_test(x, x[::-1].copy(), num_categories=10).pvalue == 0.0
    with pytest.raises(ValueError, match="too short"):
        lag_scan_test(np.arange(10), np.arange(10), num_categories=10)
    with pytest.raises(TypeError, match="integer"):
        lag_scan_test(np.zeros(40), num_categories=10)


def test_lag_scan_planner_pair_is_consistent_and_its_claim_holds_on_a_planted_overlap():
    for tv in (0.3, 0.1):
        n = required_lag_scan_samples(tv, P, P, alpha=1e-3)
        assert min_detectable_lag_scan_tv(n, P, P, alpha=1e-3) <= tv
        assert min_detectable_lag_scan_tv(max(18, n // 2), P, P, alpha=1e-3) > tv
    n = 2016
    claim = min_detectable_lag_scan_tv(n, P, P, alpha=PLANTED.alpha)
    e = claim / (1 - float(np.sum(P * P)))  # an overlap with probability e has TV e (1 - sum p**2)
    rng = np.random.default_rng(PLANTED.seed + 100)
    caught = 0
    for _ in range(20):
        x, y = rng.choice(10, n, p=P), rng.choice(10, n, p=P)
        hit = np.flatnonzero(rng.random(n - 1) < e)
        y[hit] = x[hit + 1]
        caught += not lag_scan_test(x, y, num_categories=10, alpha=PLANTED.alpha).passed
    assert caught >= 19  # power >= 0.99 claimed: P(<= 18 of 20 | 0.99) = 0.017
    x = np.random.default_rng(EXACT.seed + 5).choice(10, (2, n), p=P)
    assert table_shape(P, P, n) == independence_test(x[0], x[1], 10).shape == (8, 8)  # light categories merge


def test_gof_planner_uses_the_bins_the_pooling_forms():
    p = np.r_[np.full(50, 0.02), np.zeros(131072 - 50)]  # a top-50 truncation
    n = required_gof_samples(0.05, p, alpha=1e-3)
    assert min_detectable_gof_tv(n, p, alpha=1e-3) <= 0.05 < min_detectable_gof_tv(n - 1, p, alpha=1e-3)
    assert required_samples(0.05, 131072, alpha=1e-3) / n > 30  # V - 1 degrees of freedom: 35x too many
    rng = np.random.default_rng(EXACT.seed + 1)
    z = np.r_[rng.normal(0, 1, 20), np.full(3000, -7.0)]
    q = np.exp(z) / np.exp(z).sum()
    for m in (500, 5000, 50000):  # the same number the test states, pooled mass included
        x = sample_inverse_cdf(q, m, rng)
        assert min_detectable_gof_tv(m, q, alpha=1e-4) == pytest.approx(
            goodness_of_fit(x, q, alpha=1e-4).min_detectable_tv_any, rel=1e-12
        )


def test_range_test_never_fails_an_exact_sampler_and_catches_its_claimed_impossible_mass():
    p = np.r_[np.full(8, 0.125), 0.0]
    assert support_test(sample_inverse_cdf(p, 10_000, np.random.default_rng(EXACT.seed)), p).passed
    n = required_support_samples(0.01, power=0.99)
    assert min_detectable_impossible_mass(n) <= 0.01 < min_detectable_impossible_mass(n - 1)
    # Exact: with impossible mass e per draw the test passes with probability (1 - e)**n <= 1 - power.
    assert (1 - min_detectable_impossible_mass(n)) ** n == pytest.approx(0.01, rel=1e-9)
    q = np.r_[np.full(8, 0.99 / 8), 0.01]
    misses = sum(support_test(sample_inverse_cdf(q, n, np.random.default_rng(PLANTED.seed + i)), p).passed
                 for i in range(40))  # fmt: skip
    assert misses <= 2  # P(> 2 of 40 | 0.01) = 0.008


def test_far_tail_is_the_deepest_testable_one():
    z = np.r_[0.0, np.full(500, -9.0), np.full(50_000, -17.0)]
    p = np.exp(z) / np.exp(z).sum()  # 8-nat tail: mass 0.058; 16-nat tail: mass 1.9e-3
    deep = far_tail(p, 100_000, alpha=1e-4)
    assert deep.gap == 16.0 and int(deep.mask.sum()) == 50_000
    shallow = far_tail(p, 5_000, alpha=1e-4)
    assert shallow.gap == 8.0 and int(shallow.mask.sum()) == 50_500
    assert far_tail(p, 100, alpha=1e-4) is None
    assert far_tail(np.full(10, 0.1), 10**9, alpha=1e-4) is None  # no far tail at all


def test_assert_samples_match_catches_a_starved_tail_the_chi_square_misses():
    """A sampler that never draws the far tail (1000 tokens 8.5 nats down, mass 2e-4): at n = 300000 the
    chi-square's pooled bin expects 61 draws and gets 0, diluted among 1000 bins; no single tail token is
    expected even once, so the per-category test sees nothing; the tail test sees 0 of 61."""
    rng = np.random.default_rng(PLANTED.seed + 200)
    z = np.r_[np.zeros(1000), np.full(1000, -8.5)]
    p = np.exp(z) / np.exp(z).sum()
    tail = z < -8
    q = np.where(tail, 0.0, p) / p[~tail].sum()
    n = 300_000
    x = sample_inverse_cdf(q, n, rng)
    assert goodness_of_fit(x, p, alpha=PLANTED.alpha / 3).passed
    with pytest.raises(AssertionError, match="tail failed") as info:
        assert_samples_match(x, p, alpha=PLANTED.alpha)
    assert "tail: 1000 tokens, observed 0 draws" in str(info.value)
    assert assert_samples_match(x, p, alpha=PLANTED.alpha, tail=None).passed  # without it: passes
    exact = sample_inverse_cdf(p, n, np.random.default_rng(EXACT.seed + 2))
    r = assert_samples_match(exact, p, alpha=EXACT.alpha)
    assert r.alpha == pytest.approx(EXACT.alpha / 3)  # three tests, Bonferroni
    assert tail_mass_test(exact, p, tail, alternative="two-sided", alpha=EXACT.alpha / 3).passed


def test_float32_probabilities_at_llm_vocabularies_are_accepted_and_renormalized():
    v = 262_144
    z = torch.from_numpy(np.random.default_rng(EXACT.seed + 3).normal(0, 3, v).astype(np.float32))
    p32 = torch.softmax(z, dim=0)
    assert abs(float(p32.double().sum()) - 1) > 1e-6  # the former tolerance refused it
    x = sample_inverse_cdf(p32.double().numpy() / float(p32.double().sum()), 200_000,
                           np.random.default_rng(EXACT.seed + 3))  # fmt: skip
    assert assert_samples_match(x, p32, alpha=EXACT.alpha).passed
    bad = p32.double().numpy() * (1 + 2 * v * 2.0**-23)
    with pytest.raises(ValueError, match=r"sum to 1 \(within V \* 2\*\*-23"):
        goodness_of_fit(x, bad)


def test_results_unpack_like_scipy():
    p = np.full(4, 0.25)
    x = np.random.default_rng(EXACT.seed + 4).integers(0, 4, 1000)
    for result in (goodness_of_fit(x, p), support_test(x, p), lag_scan_test(x[:500], x[500:], num_categories=4)):
        statistic, pvalue = result
        assert (statistic, pvalue) == (result.statistic, result.pvalue) and len(result) == 2
        assert math.isfinite(pvalue)
