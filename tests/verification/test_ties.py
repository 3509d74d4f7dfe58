"""Tie-bias test: flat logits, lower vs upper index half."""

from __future__ import annotations

import numpy as np
import pytest

from verification import tie_bias_test
from verification.planning.budget import budget


@pytest.mark.parametrize("v", [2, 1001, 1024])
def test_passes_on_exact_draws(v):
    b = budget("verification.ties.exact")
    x = np.random.default_rng(b.seed).integers(0, v, b.n)
    r = tie_bias_test(x, v, alpha=b.alpha)
    assert r.passed, r
    assert r.expected_fraction == (v // 2) / v


@pytest.mark.parametrize("direction", [+1, -1])
def test_fails_at_claimed_shift(direction):
    b = budget("verification.ties.planted")
    v = 1001
    half = v // 2
    d = tie_bias_test(np.arange(b.n) % v, v, alpha=b.alpha).min_detectable
    q = np.empty(v)
    q[:half] = (half / v + direction * d) / half
    q[half:] = (1 - half / v - direction * d) / (v - half)
    x = np.random.default_rng(b.seed).choice(v, b.n, p=q)
    r = tie_bias_test(x, v, alpha=b.alpha)
    assert not r.passed, r


def test_catches_coarse_noise_with_first_index_ties():
    """Gumbel noise rounded to a 0.5-nat grid, argmax keeping the first maximum: low indices win ties."""
    b = budget("verification.ties.coarse_noise")
    v = 64
    g = np.round(np.random.default_rng(b.seed).gumbel(size=(b.n, v)) * 2) / 2
    x = np.argmax(g, axis=1)
    r = tie_bias_test(x, v, alpha=b.alpha)
    assert not r.passed and r.lower_fraction > 0.5, r
    exact = np.argmax(np.random.default_rng(b.seed).gumbel(size=(b.n, v)), axis=1)
    assert tie_bias_test(exact, v, alpha=b.alpha).passed


def test_support_and_outside_draws():
    support = np.array([3, 5, 8, 9])
    x = np.random.default_rng(2).choice(support, 4000)
    r = tie_bias_test(x, 12, support=support)
    assert r.passed and r.tied == 4 and r.expected_fraction == 0.5
    bad = tie_bias_test(np.r_[x, 0], 12, support=support)
    assert not bad.passed and bad.outside == 1
    with pytest.raises(ValueError, match="at least 2 tied"):
        tie_bias_test(x, 12, support=[3])
