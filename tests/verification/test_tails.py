"""Tail-mass test: catches a noise floor that starves tokens 17-40 nats below the top."""

from __future__ import annotations

import math

import numpy as np
import pytest

from flashsampling.reference import sample_inverse_cdf, softmax
from verification import tail_mask, tail_mass_test
from verification.planning.budget import budget
from verification.stats.tails import min_detectable_tail_deficit, required_tail_samples

V = 262144


def many_tail_logits(seed: int = 0) -> np.ndarray:
    """4 head tokens in [0, 1] and 262140 tail tokens spread uniformly 15-40 nats below the top."""
    rng = np.random.default_rng(seed)
    z = -rng.uniform(15.0, 40.0, V)
    head = rng.choice(V, 4, replace=False)
    z[head] = rng.uniform(0.0, 1.0, 4)
    return z


@pytest.mark.parametrize("floor", [17.0, 20.0])
def test_catches_a_noise_floor(floor):
    """Tokens more than ``floor`` nats below the top are never drawn (a capped-noise sampler)."""
    z = many_tail_logits()
    p = softmax(z)
    tail = tail_mask(z, gap=floor)
    b_null, b_bad = budget("verification.tails.exact"), budget("verification.tails.starved")
    n = required_tail_samples(1.0, float(p[tail].sum()), alpha=b_bad.alpha)
    assert n <= b_bad.n
    exact = tail_mass_test(sample_inverse_cdf(p, n, np.random.default_rng(b_null.seed)), p, tail, alpha=b_null.alpha)
    assert exact.passed, exact
    q = np.where(tail, 0.0, p)
    q /= q.sum()
    starved = tail_mass_test(sample_inverse_cdf(q, n, np.random.default_rng(b_bad.seed)), p, tail, alpha=b_bad.alpha)
    assert not starved.passed and starved.statistic == 0, starved
    assert starved.relative_deficit == 1.0 and starved.min_detectable <= 1.0


def test_fails_at_claimed_partial_deficit():
    b = budget("verification.tails.planted")
    z = many_tail_logits(1)
    p = softmax(z)
    tail = tail_mask(z, gap=17.0)
    p_t = float(p[tail].sum())
    r_claim = min_detectable_tail_deficit(b.n, p_t, alpha=b.alpha)
    assert 0 < r_claim < 1
    q = p.copy()
    q[tail] *= 1 - r_claim
    q[~tail] *= (1 - p_t * (1 - r_claim)) / (1 - p_t)
    r = tail_mass_test(sample_inverse_cdf(q, b.n, np.random.default_rng(b.seed)), p, tail, alpha=b.alpha)
    assert not r.passed and r.min_detectable == pytest.approx(r_claim)


@pytest.mark.parametrize("gap", [17, 20, 25, 30, 40])
def test_planning_across_17_to_40_nats(gap):
    """Draws to catch a fully starved flat tail of V = 151936 tokens ``gap`` nats below one top token."""
    mass = 151935 * math.exp(-gap) / (1 + 151935 * math.exp(-gap))
    n = required_tail_samples(1.0, mass, alpha=1e-6)
    assert n == pytest.approx(math.log(1e6) / mass, rel=0.01)


def test_tail_mask_and_alternatives():
    z = np.array([0.0, -1.0, -20.0, -np.inf, -30.0])
    assert tail_mask(z, gap=17.0).tolist() == [False, False, True, False, True]
    assert tail_mask(z, gap=17.0, temperature=1.5).tolist() == [False, False, False, False, True]
    p = np.array([0.5, 0.3, 0.2])
    over = np.r_[np.zeros(500), np.full(500, 2)].astype(np.int64)
    assert not tail_mass_test(over, p, [2], alternative="greater").passed
    assert tail_mass_test(over, p, [2], alternative="less").passed
    assert not tail_mass_test(over, p, [2], alternative="two-sided").passed
    with pytest.raises(ValueError, match="tail must have probability"):
        tail_mass_test(over, np.array([0.5, 0.5, 0.0]), [2])
