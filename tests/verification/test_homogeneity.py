"""Two-sample homogeneity: two exact samplers agree; a sampler off by the claimed TV is told apart."""

from __future__ import annotations

import numpy as np

from flashsampling.reference import sample_gumbel_max, sample_inverse_cdf, softmax
from verification import homogeneity_test
from verification.battery import planted
from verification.planning.budget import budget


def test_two_exact_samplers_agree():
    b = budget("verification.homogeneity.exact")
    z = np.random.default_rng(0).normal(size=300) * 2
    p = softmax(z)
    a = sample_inverse_cdf(p, b.n, np.random.default_rng(b.seed))
    c = sample_inverse_cdf(p, b.n, np.random.default_rng(b.seed + 1))
    r = homogeneity_test(a, c, p.size, alpha=b.alpha)
    assert r.passed, r
    assert r.n_a == r.n_b == b.n and r.table.shape[0] == 2 and r.table.sum() == 2 * b.n


def test_inverse_cdf_and_gumbel_max_agree():
    z = np.array([1.0, 0.5, 0.0, -1.0, -3.0])
    a = sample_inverse_cdf(softmax(z), 4000, np.random.default_rng(3))
    g = sample_gumbel_max(z, 4000, np.random.default_rng(4))
    assert homogeneity_test(a, g, 5).passed


def test_fails_at_claimed_tv():
    b = budget("verification.homogeneity.planted")
    p = softmax(np.random.default_rng(0).normal(size=300) * 2)
    a = sample_inverse_cdf(p, b.n, np.random.default_rng(b.seed))
    base = homogeneity_test(a, a[::-1].copy(), p.size, alpha=b.alpha)
    for q in (planted.proportional(p, base.min_detectable), planted.tilt(p, base.min_detectable)):
        c = sample_inverse_cdf(q, b.n, np.random.default_rng(b.seed + 2))
        r = homogeneity_test(a, c, p.size, alpha=b.alpha)
        assert not r.passed, r


def test_out_of_range_draw_fails():
    r = homogeneity_test(np.zeros(100, dtype=np.int64), np.r_[np.zeros(99, dtype=np.int64), 9], 3)
    assert not r.passed and r.impossible == 1
