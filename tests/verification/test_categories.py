"""Per-category tests with Holm: a missing category or one far off its count is named."""

from __future__ import annotations

import numpy as np

from flashsampling.reference import sample_inverse_cdf
from verification import category_test
from verification.battery import planted
from verification.planning.budget import budget


def zipf(v: int) -> np.ndarray:
    w = 1.0 / np.arange(1, v + 1) ** 1.1
    return w / w.sum()


def test_passes_on_exact_draws():
    b = budget("verification.categories.exact")
    p = zipf(1000)
    r = category_test(sample_inverse_cdf(p, b.n, np.random.default_rng(b.seed)), p, alpha=b.alpha)
    assert r.passed and r.num_flagged == 0, r


def test_missing_category_at_the_claim_is_flagged():
    b = budget("verification.categories.planted")
    p = zipf(1000)
    claim = category_test(sample_inverse_cdf(p, b.n, np.random.default_rng(b.seed)), p, alpha=b.alpha).min_detectable
    j = int(np.flatnonzero(p >= claim)[-1])  # the rarest category the claim covers
    q = p.copy()
    q[j] = 0.0
    q /= q.sum()
    r = category_test(sample_inverse_cdf(q, b.n, np.random.default_rng(b.seed)), p, alpha=b.alpha)
    assert not r.passed and r.flagged.tolist() == [j], r


def test_category_off_by_its_claimed_shift_is_flagged():
    b = budget("verification.categories.planted")
    p = zipf(1000)
    k = 20
    r0 = category_test(sample_inverse_cdf(p, b.n, np.random.default_rng(b.seed)), p, alpha=b.alpha)
    down, up = r0.detectable_shift(float(p[k]))
    assert 0 < down < p[k] and up > 0
    q = planted.transfer(p, up, k)
    r = category_test(sample_inverse_cdf(q, b.n, np.random.default_rng(b.seed + 1)), p, alpha=b.alpha)
    assert not r.passed and k in r.flagged.tolist(), r
    assert r.most_significant(1)[0].category == k


def test_impossible_draws_fail():
    p = np.array([0.5, 0.5, 0.0])
    r = category_test(np.r_[np.zeros(50), np.ones(50), 2].astype(np.int64), p)
    assert not r.passed and r.flagged.tolist() == [2]
    r = category_test(np.r_[np.zeros(50), np.ones(50), 5].astype(np.int64), p)
    assert not r.passed and r.flagged.size == 0  # out of range: no category to name, the test still fails
