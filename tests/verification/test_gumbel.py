"""The perturbed maximum is Gumbel(logsumexp, 1): float64 reference and the kernel twin's noise pass; a shifted
location or a temperature applied after the noise fails."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from flashsampling.reference import perturbed_scores_twin
from verification import gumbel_max_test
from verification.planning.budget import budget

Z = np.random.default_rng(0).normal(size=64) * 3


@pytest.mark.parametrize("temperature", [1.0, 0.5, 3.0])
def test_passes_on_exact_maxima(temperature):
    b = budget("verification.gumbel.exact")
    g = np.random.default_rng(b.seed).gumbel(size=(b.n, Z.size))
    m = (Z / temperature + g).max(axis=1)
    r = gumbel_max_test(m, Z, temperature=temperature, alpha=b.alpha)
    assert r.passed, r
    assert r.loc == pytest.approx(special.logsumexp(Z / temperature))
    assert abs(r.mean_offset) < 5 * 1.2825 / np.sqrt(b.n)


def test_passes_on_the_twin_noise():
    """The kernel's float32 scores z * (1/T) + G (NumPy twin): independent rows give independent maxima."""
    b = budget("verification.gumbel.twin")
    z32 = np.tile(Z.astype(np.float32), (b.n, 1))
    inv_t = np.full(b.n, 1 / 1.5, dtype=np.float32)
    scores, _ = perturbed_scores_twin(z32, inv_t, b.seed, np.arange(b.n), 0)
    r = gumbel_max_test(scores.max(axis=1).astype(np.float64), Z.astype(np.float32), temperature=1.5, alpha=b.alpha)
    assert r.passed, r


def test_fails_at_claimed_shift_and_on_temperature_after_noise():
    b = budget("verification.gumbel.planted")
    rng = np.random.default_rng(b.seed)
    g = rng.gumbel(size=(b.n, Z.size))
    m = (Z + g).max(axis=1)
    claim = gumbel_max_test(m, Z, alpha=b.alpha)
    assert claim.passed
    shifted = gumbel_max_test(m + claim.min_detectable_shift, Z, alpha=b.alpha)
    assert not shifted.passed, shifted
    after = gumbel_max_test((Z + g).max(axis=1) / 2.0, Z, temperature=2.0, alpha=b.alpha)
    assert not after.passed, after


def test_arguments():
    with pytest.raises(TypeError, match="exactly one of logits and loc"):
        gumbel_max_test([0.1, 0.2], Z, loc=1.0)
    with pytest.raises(ValueError, match="NaN"):
        gumbel_max_test([0.1, np.nan], loc=0.0)
    assert gumbel_max_test(np.random.default_rng(1).gumbel(size=500) + 2.0, loc=2.0).passed
