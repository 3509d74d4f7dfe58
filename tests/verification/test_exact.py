"""Exact multinomial test: exact p-values, passes on exact draws, fails at its claimed TV."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from flashsampling.reference import sample_inverse_cdf
from verification import exact_multinomial
from verification.battery import planted
from verification.planning.budget import budget
from verification.stats.exact import MAX_OUTCOMES, _compositions, exact_power, min_detectable_exact_tv, num_outcomes

P = np.array([0.5, 0.3, 0.2])


def test_enumeration_is_complete():
    x = _compositions(6, 4)
    assert x.shape == (num_outcomes(6, 4), 4) == (84, 4)
    assert (x.sum(axis=1) == 6).all() and len({tuple(r) for r in x}) == 84


def test_pvalue_matches_binomial_for_two_categories():
    # With V = 2 the probability ordering is scipy's two-sided binomial p-value.
    x = np.r_[np.zeros(14, dtype=np.int64), np.ones(6, dtype=np.int64)]
    r = exact_multinomial(x, [0.3, 0.7], alpha=0.05)
    assert r.pvalue == pytest.approx(stats.binomtest(14, 20, 0.3).pvalue, rel=1e-9)


def test_passes_on_exact_draws():
    b = budget("verification.exact.exact")
    for k in range(5):
        x = sample_inverse_cdf(P, b.n, np.random.default_rng(b.seed + k))
        r = exact_multinomial(x, P, alpha=b.alpha)
        assert r.passed, r


def test_fails_at_claimed_tv():
    b = budget("verification.exact.planted")
    tv = min_detectable_exact_tv(b.n, P, alpha=b.alpha)
    assert math.isfinite(tv) and tv < 0.5
    q = planted.transfer(P, tv, 2)
    assert exact_power(b.n, P, q, alpha=b.alpha) >= 0.99
    r = exact_multinomial(sample_inverse_cdf(q, b.n, np.random.default_rng(b.seed)), P, alpha=b.alpha)
    assert not r.passed and r.min_detectable == tv


def test_exact_power_agrees_with_simulation():
    q = planted.transfer(P, 0.3, 1)
    rng = np.random.default_rng(7)
    from verification import Counts

    hits = np.mean([not exact_multinomial(Counts(c), P, alpha=0.01).passed for c in rng.multinomial(30, q, 2000)])
    assert hits == pytest.approx(exact_power(30, P, q, alpha=0.01), abs=4 * 0.5 / math.sqrt(2000))


def test_impossible_draw_and_limits():
    r = exact_multinomial([0, 1, 2], [0.5, 0.5, 0.0], alpha=0.01)
    assert not r.passed and r.pvalue == 0.0 and r.impossible == 1
    with pytest.raises(ValueError, match="use pearson_chisquare"):
        exact_multinomial(np.zeros(2000, dtype=np.int64), np.full(8, 0.125))
    assert num_outcomes(2000, 8) > MAX_OUTCOMES
