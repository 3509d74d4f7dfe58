"""proofs/finite_precision.md section 6: the twin's float32 noise against the exact value; the exhaustive scan (a
binade and the last class recomputed against the committed results, a planted defect caught)."""

from __future__ import annotations

import numpy as np
import pytest

from proofs import _generated as gen
from proofs import check_float32_noise as chk


@pytest.fixture(scope="module")
def committed():
    return chk.load_scan()


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


def test_committed_scan_covers_the_grid_within_6_1(committed):
    assert committed["grid_points"] == 2**64
    assert sum(p["grid_points"] for p in committed["parts"].values()) == 2**64
    assert committed["e_ulp_max"] <= chk.E_ULP_BOUND and committed["g_ratio_max"] <= 1.0


def test_scan_parts_recomputed_equal_the_committed_ones(committed):
    """The last class (x = 1/2) recomputed exactly; and a quarter of binade 2^-30 within the committed part's maxima
    (its classes counted exactly), which the whole binade attains."""
    res = chk.exhaustive_scan(["2^-1"])
    part, old = res["parts"]["2^-1"], committed["parts"]["2^-1"]
    for key in ("grid_points", "classes", "e_ulp_max", "e_ulp_k", "g_ratio_max", "g_ratio_k", "inversions"):
        assert gen.same(part[key], old[key]), (key, part[key], old[key])
    acc = chk.ScanAccumulator()
    lo, hi = next(iter(chk.binade_blocks(-30)))
    for top in (0, 1):
        acc.add(lo, hi, top, (chk.exponential_from_bits_np, chk.gumbel_from_bits_np))
    assert acc.classes == 2 * (1 << 21)
    old = committed["parts"]["2^-30"]
    assert acc.e_ulp[0] <= old["e_ulp_max"] and acc.g_ratio[0] <= old["g_ratio_max"]


def test_scan_of_the_first_integers_within_the_committed_maxima(committed):
    acc = chk.ScanAccumulator()
    for lo, hi in chk.brute_blocks(0, 1 << 20):
        for top in (0, 1):
            acc.add(lo, hi, top, (chk.exponential_from_bits_np, chk.gumbel_from_bits_np))
    assert acc.grid_points == 2 << 20
    assert acc.e_ulp[0] <= committed["parts"]["brute"]["e_ulp_max"]
    assert acc.g_ratio[0] <= committed["parts"]["brute"]["g_ratio_max"]


def test_scan_catches_a_missing_correction():
    """Planted: E = -log(fl(1 - x)) without d / y is 0 for x < 2**-25: the scan's (6.1) fails by far."""
    acc = chk.ScanAccumulator()
    for lo, hi in chk.brute_blocks(0, 1 << 16):
        for top in (0, 1):
            acc.add(lo, hi, top, (chk.planted_no_correction, chk.planted_no_correction_gumbel))
    assert acc.e_ulp[0] > 1e6


def test_class_boundaries_are_verified():
    c = chk.class_boundaries(-20, 0, 64)
    x = chk.side_x(c)
    assert np.all(np.diff(x.view(np.uint32)) == 1)  # consecutive float32 values
    assert np.all(chk.side_x(c - np.uint64(1)) < x)


def test_bin_sampling_hits_the_bin():
    rng = np.random.default_rng(0)
    for g0, g1 in ((-3.81, -3.7), (-3.0, -2.9), (0.3, 0.4), (5.0, 5.1), (40.0, 41.0), (44.0, 45.06)):
        w0, w1 = chk.split_words(chk.keys_in_gumbel_bin(g0, g1, 1000, rng))
        g = -np.log(chk.exponential_exact(w0, w1))
        assert np.all((g >= g0 - 1e-12) & (g < g1 + 1e-12)), (g0, g1, g.min(), g.max())
    assert chk.gumbel_bin_range(44.0, 45.06)[:2] == (0, 1)  # only the top grid point, G = 65 log 2


def test_x_rounding_bias_is_at_most_a_quarter_ulp():
    assert max(abs(v) for v in chk.x_rounding_bias(n=100_000, construction="truncating").values()) <= 0.26


def test_shipped_x_rounds_to_nearest_without_bias():
    """The shipped construction removed the truncation bias: |mean error| < 0.01 ulp in every binade."""
    assert max(abs(v) for v in chk.x_rounding_bias(n=100_000).values()) < 0.01


def test_first_order_tv_from_the_exhaustive_mean(committed):
    fo = chk.first_order_tv_exhaustive(committed)
    assert gen.same(fo, gen.load("float32_noise")["first_order"])
    assert fo["tv"] < 1.5e-8


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


def test_recorded_results_are_current(committed):
    assert gen.same(gen.roundtrip(chk.collect(scan=committed)), gen.load("float32_noise"), rel=1e-9)
