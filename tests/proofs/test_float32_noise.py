"""proofs/finite_precision.md section 6: the twin's float32 noise against the exact value."""

from __future__ import annotations

import numpy as np
import pytest

from proofs import check_float32_noise as chk


@pytest.mark.parametrize(
    "keys",
    [
        pytest.param(lambda: chk.adversarial_keys(), id="adversarial"),
        pytest.param(lambda: chk.random_keys(300_000, 1), id="uniform"),
        pytest.param(lambda: chk.log_uniform_keys(300_000, 2), id="log-uniform"),
    ],
)
def test_twin_noise_within_documented_bounds(keys):
    acc = chk.noise_accuracy(keys())
    assert acc.within_bounds, acc


def test_extremes_are_the_cap():
    acc = chk.noise_accuracy(np.array([0, 2**64 - 1], dtype=np.uint64))
    assert acc.g_min == pytest.approx(-np.log(65 * np.log(2.0)), abs=1e-6)
    assert acc.g_max == pytest.approx(65 * np.log(2.0), abs=4e-6)


def test_bin_sampling_hits_the_bin():
    rng = np.random.default_rng(0)
    for g0, g1 in ((-3.81, -3.7), (-3.0, -2.9), (0.3, 0.4), (5.0, 5.1), (40.0, 41.0), (44.0, 45.06)):
        w0, w1 = chk.split_words(chk.keys_in_gumbel_bin(g0, g1, 1000, rng))
        g = -np.log(chk.exponential_exact(w0, w1))
        assert np.all((g >= g0 - 1e-12) & (g < g1 + 1e-12)), (g0, g1, g.min(), g.max())
    assert chk.gumbel_bin_range(44.0, 45.06)[:2] == (0, 1)  # only the top grid point, G = 65 log 2
    total = sum(
        hi - lo
        for lo, hi, _ in (chk.gumbel_bin_range(a, b) for a, b in zip(chk.DEFAULT_EDGES[:-1], chk.DEFAULT_EDGES[1:]))
    )
    assert abs(total - 2**64) < 2**64 * 1e-12  # the bins cover the grid


def test_x_rounding_bias_is_at_most_a_quarter_ulp():
    assert max(abs(v) for v in chk.x_rounding_bias(n=100_000, construction="truncating").values()) <= 0.26


def test_shipped_x_rounds_to_nearest_without_bias():
    """The shipped construction removed the truncation bias: |mean error| < 0.01 ulp in every binade."""
    assert max(abs(v) for v in chk.x_rounding_bias(n=100_000).values()) < 0.01


def test_first_order_tv_of_the_twin_noise():
    edges = np.concatenate([np.arange(-3.8, 15.0, 0.2), np.arange(15.0, 45.01, 2.0)])
    sample = chk.noise_sample(edges=edges, per_bin=3_000, seed=3)
    tv, se = chk.first_order_tv(sample, 12.5, 1 << 18)
    assert tv + 3 * se < 1.5e-8  # finite_precision.md quotes 9.3e-9
    prof = chk.bias_profile(edges=edges, per_bin=2_000, seed=4)
    assert prof.oscillation() < 2e-7


def test_kernel_noise_path_matches_twin():
    """The Triton device functions on the same words: bit-exact in the interpreter, within tolerance compiled."""
    from flashsampling import _device
    from flashsampling.noise import NOISE_ABS_TOL, NOISE_REL_TOL

    k = np.concatenate([chk.adversarial_keys(), chk.random_keys(20_000, 9)])
    w0, w1 = chk.split_words(k)
    g_kernel, g_twin = chk.kernel_gumbel(w0, w1), chk.twin_gumbel(w0, w1)
    if _device.INTERPRET:
        assert np.array_equal(g_kernel.view(np.uint32), g_twin.view(np.uint32))
    else:
        assert np.all(np.abs(g_kernel - g_twin) <= NOISE_ABS_TOL + NOISE_REL_TOL * np.abs(g_twin))
    assert chk.noise_accuracy(k, chk.kernel_gumbel).within_bounds
