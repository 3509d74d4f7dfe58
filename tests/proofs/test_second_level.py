"""proofs/finite_precision.md, section 8: the online coin counted exactly over the 64-bit grid, the Kolmogorov bounds
from the committed exhaustive scan, the exact coin of the design; each check fails on its planted defect."""

from __future__ import annotations

from fractions import Fraction

import pytest

from proofs import check_second_level as chk


@pytest.fixture(scope="module")
def scan():
    return chk.load_scan()


def test_coin_counts_at_the_issues_thresholds():
    """t = 1: P - q = -1.62 u relative (u = 2**-24), about -3.6e-8 absolute; the count is exact."""
    d_abs, d_rel = chk.coin_error(1.0)
    assert d_rel / 2.0**-24 == pytest.approx(-1.62, abs=0.01)
    assert d_abs == pytest.approx(-3.56e-8, rel=0.01)
    p = chk.coin_probability(1.0)
    assert isinstance(p, Fraction) and (p * 2**64).denominator == 1


def test_coin_extremes():
    assert chk.coin_probability(-1.0) == 1
    assert chk.coin_probability(46.0) == 0  # above the largest E, 45.06
    assert chk.coin_probability(0.0) == 1  # E > 0 at every grid point


def test_coin_within_the_scan_bound_and_a_biased_exponential_is_not(scan):
    kb = chk.kolmogorov_bounds(scan)
    ts = (0.01, 0.5, 1.0, 3.0, 7.8, 15.0)
    assert chk.coin_within_bound(chk.coin_profile(ts), kb)
    assert not chk.coin_within_bound(chk.coin_profile(ts, exp_fn=chk.biased_exponential), kb)


def test_a_24_bit_coin_is_caught():
    """A coin from a float32-resolution uniform cannot take beyond t = 17.3: its count fails (the window check raises
    or the error is the whole of q)."""
    try:
        _, rel = chk.coin_error(20.0, chk.twenty_four_bit_exponential)
    except ArithmeticError:
        return
    assert abs(rel) > 0.5


def test_kolmogorov_bounds_match_the_committed_results(scan):
    from proofs import _generated as gen

    kb = chk.kolmogorov_bounds(scan)
    assert gen.same(kb, gen.load("second_level")["kolmogorov"])
    assert 0 < kb["D_E"] < 3e-7 and 0 < kb["D_G"] < 3e-7


def test_design_threshold_is_exact_and_the_float64_shortcut_is_not():
    assert chk.design_threshold_mismatches() == 0
    assert chk.design_threshold_mismatches(chk.planted_threshold) > 0
    assert chk.design_threshold(1.0) == 2**64 and chk.design_threshold(0.0) == 0
    assert chk.design_threshold(2.5 * 2.0**-64) == 2  # 2**64 q - 1/2 = 2 exactly: k < 2 takes


def test_recorded_results_are_current(scan):
    from proofs import _generated as gen

    fresh = gen.roundtrip(chk.collect(scan))
    assert gen.same(fresh, gen.load("second_level"), rel=1e-9)
    assert all(chk.verdicts(fresh).values())
