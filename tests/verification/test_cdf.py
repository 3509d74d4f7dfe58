"""DKWM CDF envelope: passes on exact draws, fails at its claimed Kolmogorov distance, in any order."""

from __future__ import annotations

import numpy as np
import pytest

from flashsampling.reference import sample_inverse_cdf
from verification import dkwm_cdf_test
from verification.battery import planted
from verification.planning.budget import budget
from verification.stats.cdf import category_order


def zipf(v: int) -> np.ndarray:
    w = 1.0 / np.arange(1, v + 1)
    return w / w.sum()


@pytest.mark.parametrize("order", ["index", "descending", "random"])
def test_passes_on_exact_draws(order):
    b = budget("verification.cdf.exact")
    p = np.random.default_rng(0).permutation(zipf(500))
    perm = np.random.default_rng(1).permutation(500) if order == "random" else order
    r = dkwm_cdf_test(sample_inverse_cdf(p, b.n, np.random.default_rng(b.seed)), p, order=perm, alpha=b.alpha)
    assert r.passed, r
    lo, hi = r.envelope()
    assert ((lo <= r.exact_cdf + 1e-12) & (r.exact_cdf <= hi + 1e-12)).all()


@pytest.mark.parametrize("to", ["last", "middle"])
def test_fails_at_claimed_distance(to):
    b = budget("verification.cdf.planted")
    p = zipf(500)
    d = dkwm_cdf_test(sample_inverse_cdf(p, b.n, np.random.default_rng(b.seed)), p, alpha=b.alpha).min_detectable
    q = planted.cdf_shift(p, d, to=None if to == "last" else 250)
    r = dkwm_cdf_test(sample_inverse_cdf(q, b.n, np.random.default_rng(b.seed)), p, alpha=b.alpha)
    assert not r.passed, r


def test_off_by_one_at_the_last_index_is_seen_in_index_order():
    """Index V-1 masked out (its mass going to V-2): a CDF gap of p[V-1] just before the end."""
    b = budget("verification.cdf.planted")
    v = 1000
    p = np.full(v, 1.0 / v)
    p[-1] = 0.04
    p /= p.sum()
    q = p.copy()
    q[-2] += q[-1]
    q[-1] = 0.0
    r = dkwm_cdf_test(sample_inverse_cdf(q, b.n, np.random.default_rng(b.seed)), p, alpha=b.alpha)
    assert p[-1] > r.min_detectable and not r.passed and r.worst_category == v - 2


def test_order_argument():
    p = np.array([0.1, 0.6, 0.3])
    assert category_order(p, "descending").tolist() == [1, 2, 0]
    with pytest.raises(ValueError, match="permutation"):
        category_order(p, [0, 0, 1])
    with pytest.raises(ValueError, match="order must be"):
        category_order(p, "ascending")
