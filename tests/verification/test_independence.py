"""Independence of rows, consecutive seeds, and samples s and s+1 (the kernel twin), and failures on
planted dependence of the claimed size."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize

from flashsampling.twin import sample_twin
from verification import independence_test, serial_independence_test
from verification.planning.budget import budget

V = 40
Z = np.random.default_rng(0).normal(size=V).astype(np.float32) * 1.5


def test_exact_pairs_are_independent():
    b = budget("verification.independence.exact")
    p = np.exp(Z - Z.max()) / np.exp(Z - Z.max()).sum()
    rng = np.random.default_rng(b.seed)
    x, y = rng.choice(V, b.n, p=p), rng.choice(V, b.n, p=p)
    assert independence_test(x, y, V, alpha=b.alpha).passed
    assert serial_independence_test(rng.choice(V, 2 * b.n, p=p), V, alpha=b.alpha).passed


@pytest.mark.parametrize("pairing", ["rows of a batch", "consecutive seeds", "samples s and s+1"])
def test_twin_draws_are_independent(pairing):
    b = budget("verification.independence.exact")
    n = b.n // 10
    if pairing == "rows of a batch":
        t = sample_twin(np.stack([Z, Z]), 1.0, seed=b.seed, num_samples=n)
        x, y = t[0], t[1]
    elif pairing == "consecutive seeds":
        x = sample_twin(Z[None], 1.0, seed=b.seed, num_samples=n)[0]
        y = sample_twin(Z[None], 1.0, seed=b.seed + 1, num_samples=n)[0]
    else:
        t = sample_twin(Z[None], 1.0, seed=b.seed, num_samples=2 * n)[0]
        r = serial_independence_test(t, V, alpha=b.alpha)
        assert r.passed, r
        return
    r = independence_test(x, y, V, alpha=b.alpha)
    assert r.passed, r


def _tv_from_independence(x_p: np.ndarray, eps: float) -> float:
    joint = (1 - eps) * np.outer(x_p, x_p) + eps * np.diag(x_p)
    return 0.5 * float(np.abs(joint - np.outer(joint.sum(1), joint.sum(0))).sum())


def test_fails_on_seed_collision_of_claimed_size():
    """A fraction eps of pairs share their draw (colliding streams); eps set so the TV is the claim."""
    b = budget("verification.independence.planted")
    p = np.full(8, 1 / 8)
    rng = np.random.default_rng(b.seed)
    x, y = rng.choice(8, b.n, p=p), rng.choice(8, b.n, p=p)
    claim = independence_test(x, y, 8, alpha=b.alpha).min_detectable
    eps = optimize.brentq(lambda e: _tv_from_independence(p, e) - claim, 0, 1)
    collide = rng.random(b.n) < eps
    y = np.where(collide, x, y)
    r = independence_test(x, y, 8, alpha=b.alpha)
    assert not r.passed, r


def test_serial_test_catches_a_repeated_stream():
    """Sample s + 1 reuses the noise of sample s for a few percent of draws."""
    b = budget("verification.independence.serial")
    rng = np.random.default_rng(b.seed)
    s = rng.integers(0, 8, b.n)
    repeat = rng.random(b.n) < 0.08
    for i in np.flatnonzero(repeat[1:]) + 1:
        s[i] = s[i - 1]
    assert not serial_independence_test(s, 8, alpha=b.alpha).passed


def test_pairs_must_match():
    with pytest.raises(ValueError, match="must pair up"):
        independence_test([0, 1, 2], [0, 1], 3)
    r = independence_test([0, 1, 5], [0, 1, 2], 3)
    assert not r.passed and r.impossible == 1
