"""proofs/end_to_end.md: the per-sampler bounds are current, Theorem 9 holds on an enumerated law, and the GPU's
recorded figures (when present) are checked as bounds, never against another machine's values."""

from __future__ import annotations

import numpy as np
import pytest

from proofs import _generated as gen
from proofs import check_end_to_end as chk
from proofs import noise_bound as nb


@pytest.fixture(scope="module")
def fresh():
    return gen.roundtrip(chk.collect())


def test_recorded_results_are_current(fresh):
    assert gen.same(fresh, gen.load("end_to_end"), rel=1e-9)
    assert all(chk.verdicts(fresh).values()), chk.verdicts(fresh)


def test_theorem_9_on_an_exact_law():
    r = chk.theorem9_on_exact_laws(bits=14)
    assert r["tv"] <= r["bound"]


def test_the_noise_bound_grows_with_the_errors_and_the_entropy():
    """psi is linear in the error bins, and its concave majorant is non-decreasing (more entropy never costs less)."""
    eps = np.where((chk.G_EDGES[:-1] > -3.8) & (chk.G_EDGES[:-1] < 45.0), 1e-7, 0.0)
    eps = np.r_[eps, 0.0, 0.0][: chk.G_EDGES.size + 1]
    ls, one = nb.psi_upper(eps, l_max=15.0)
    _, two = nb.psi_upper(2 * eps, l_max=15.0)
    assert np.allclose(two, 2 * one, rtol=1e-12) and one.max() > 0
    hx, hy = nb.upper_concave_hull(np.repeat(ls, 2), np.repeat(one, 2))
    assert np.all(np.diff(hy) >= 0)


def test_the_concave_majorant_is_above_and_concave():
    x = np.linspace(0, 10, 101)
    y = np.abs(np.sin(x)) * np.exp(-x / 5)
    hx, hy = nb.upper_concave_hull(x, y)
    assert np.all(np.interp(x, hx, hy, right=hy[-1]) >= y - 1e-15)
    slopes = np.diff(hy) / np.diff(hx)
    assert np.all(np.diff(slopes) <= 1e-12)


def test_gpu_figures_are_bounds():
    """gpu_h200.json, when present (written on an H200 by proofs/gpu_checks.py): every figure within its bound."""
    gpu = chk.load_gpu()
    if gpu is None:
        pytest.skip("no GPU results recorded yet (python proofs/gpu_checks.py --out DIR on an H200)")
    from proofs import gpu_checks

    assert all(gpu_checks.verdicts(gpu).values()), gpu_checks.verdicts(gpu)
