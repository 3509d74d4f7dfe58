"""Pearson chi-square, G-test, goodness_of_fit and assert_samples_match: pass on exact draws, fail on
planted biases of the size they claim to detect, never drop the pooled tail."""

from __future__ import annotations

import numpy as np
import pytest

from flashsampling.reference import sample_inverse_cdf
from verification import Counts, assert_samples_match, g_test, goodness_of_fit, pearson_chisquare
from verification.battery import planted
from verification.planning.budget import budget
from verification.stats.binning import pool_small_bins

TESTS = [pearson_chisquare, g_test, goodness_of_fit]


def many_tail(head: int = 50, tail: int = 2000, gap: float = 7.0) -> np.ndarray:
    z = np.r_[np.linspace(0.0, -2.0, head), np.full(tail, -gap)]
    p = np.exp(z)
    return p / p.sum()


@pytest.mark.parametrize("test", TESTS, ids=lambda f: f.__name__)
def test_passes_on_exact_draws(test):
    b = budget("verification.gof.exact")
    p = many_tail()
    x = sample_inverse_cdf(p, b.n, np.random.default_rng(b.seed))
    r = test(x, p, alpha=b.alpha)
    assert r.passed, r
    assert r.n == b.n
    assert 0 < r.pooled_mass < 0.5 and r.tested_mass + r.pooled_mass == pytest.approx(1.0)
    assert r.dof == r.num_bins - 1 and r.num_bins < p.size


@pytest.mark.parametrize("test", TESTS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("shape", ["proportional", "tilt", "transfer"])
def test_fails_on_bias_of_claimed_size(test, shape):
    b = budget("verification.gof.planted")
    p = many_tail()
    n = b.n
    binning = pool_small_bins(p, n)
    tv = test(Counts(np.round(n * p).astype(np.int64)), p, alpha=b.alpha).min_detectable_tv
    make = {
        "proportional": lambda t: planted.proportional(p, t),
        "tilt": lambda t: planted.tilt(p, t),
        "transfer": lambda t: planted.transfer(p, t, 0),
    }[shape]
    # The claim is about the binned distributions: plant exactly that binned TV.
    q = planted.at_binned_tv(make, p, binning.labels, binning.num_bins, tv)
    x = sample_inverse_cdf(q, n, np.random.default_rng(b.seed))
    r = test(x, p, alpha=b.alpha)
    assert not r.passed, r


def test_pooled_tail_is_tested_not_dropped():
    """A sampler that never draws the pooled categories fails; dropping low bins would let it pass."""
    b = budget("verification.gof.starved_pool")
    p = many_tail(head=20, tail=5000, gap=5.0)
    r0 = goodness_of_fit(sample_inverse_cdf(p, b.n, np.random.default_rng(b.seed)), p, alpha=b.alpha)
    assert r0.passed and r0.pooled_mass > 0.05
    q = p.copy()
    q[20:] = 0.0
    q /= q.sum()
    r = goodness_of_fit(sample_inverse_cdf(q, b.n, np.random.default_rng(b.seed)), p, alpha=b.alpha)
    assert not r.passed
    observed, expected = r.pooled_bin()
    assert observed == 0 and expected == pytest.approx(b.n * p[20:].sum(), rel=1e-9)
    # The same data with the low bins dropped (the common mistake) sees nothing wrong:
    head = r.counts.histogram[:20]
    dropped = pearson_chisquare(Counts(head), p[:20] / p[:20].sum(), alpha=b.alpha)
    assert dropped.passed


def test_pooling_rule_merges_a_small_pool_into_the_smallest_bin():
    p = np.array([0.6, 0.39, 0.004, 0.003, 0.003])
    bins = pool_small_bins(p, n=1000)  # pooled expected 10 >= 5: a bin of its own
    assert bins.num_bins == 3 and bins.pooled_mass == pytest.approx(0.01)
    bins = pool_small_bins(p, n=300)  # pooled expected 3 < 5: merged into the 0.39 bin
    assert bins.num_bins == 2 and bins.labels.tolist() == [0, 1, 1, 1, 1]
    assert bins.pooled_mass == pytest.approx(0.4) and bins.tested_mass == pytest.approx(0.6)
    zero = pool_small_bins(np.array([0.5, 0.5, 0.0]), n=100)
    assert zero.labels.tolist() == [0, 1, -1]


@pytest.mark.parametrize("bad", [-1, 3, 7], ids=lambda v: f"draw={v}")
def test_impossible_draw_fails_with_pvalue_zero(bad):
    p = np.array([0.5, 0.5, 0.0])
    x = np.r_[np.zeros(500, dtype=np.int64), np.ones(500, dtype=np.int64), bad]
    r = goodness_of_fit(x, p)
    assert not r.passed and r.pvalue == 0.0 and r.impossible == 1


def test_result_repr_and_methods():
    p = np.array([0.4, 0.3, 0.2, 0.1])
    x = np.r_[np.zeros(400), np.ones(300), np.full(150, 2), np.full(150, 3)].astype(np.int64)
    r = goodness_of_fit(x, p)
    text = repr(r)
    for field in ("statistic=", "pvalue=", "n=1000", "dof=3", "tested_mass=", "pooled_mass=", "min_detectable_tv="):
        assert field in text
    assert r.most_deviant(1)[0].category == 3 and r.over_sampled(1)[0].category == 3
    assert r.under_sampled(1)[0].category == 2
    lo, hi = r.interval(3, confidence=0.99)
    assert lo < 0.15 < hi
    assert "most over-sampled" in r.diagnosis() and "pooled tail mass" in r.diagnosis()
    d = r.as_dict()
    assert d["n"] == 1000 and d["passed"] == r.passed and "min_detectable" in d


def test_assert_samples_match_passes_and_returns_result():
    b = budget("verification.gof.exact")
    p = many_tail()
    x = sample_inverse_cdf(p, b.n, np.random.default_rng(b.seed + 1))
    r = assert_samples_match(x, p, alpha=b.alpha)
    assert r.passed and r.alpha == b.alpha / 2


def test_assert_samples_match_catches_one_missing_category_among_thousands():
    """The chi-square dilutes one bad category among 2000; the per-category half of the assertion does not."""
    b = budget("verification.gof.diluted")
    v = 2000
    p = np.full(v, 1.0 / v)
    q = p.copy()
    q[7] = 0.0
    q /= q.sum()
    x = sample_inverse_cdf(q, b.n, np.random.default_rng(b.seed))
    assert goodness_of_fit(x, p, alpha=b.alpha / 2).passed  # diluted
    with pytest.raises(AssertionError) as info:
        assert_samples_match(x, p, alpha=b.alpha)
    msg = str(info.value)
    assert "per-category" in msg and "flagged categories (1): 7 (observed 0" in msg
    assert "most under-sampled" in msg and "std.resid" in msg and "pooled tail" in msg


def test_assert_samples_match_diagnosis_names_the_oversampled_category():
    p = np.full(10, 0.1)
    x = np.r_[np.random.default_rng(5).integers(0, 10, 9000), np.full(1000, 4)]
    with pytest.raises(AssertionError, match="samples do not match probs") as info:
        assert_samples_match(x, p)
    over = str(info.value).split("most over-sampled:")[1].splitlines()[2]
    assert over.split()[0] == "4"


def test_counts_input_equals_samples_input():
    p = many_tail(10, 100)
    x = sample_inverse_cdf(p, 5000, np.random.default_rng(3))
    from verification import count_samples

    a, c = goodness_of_fit(x, p), goodness_of_fit(count_samples(x, p.size), p)
    assert (a.statistic, a.pvalue, a.n) == (c.statistic, c.pvalue, c.n)
