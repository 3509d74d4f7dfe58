"""proofs/finite_precision.md, section 8: the second-level draws as shipped (stream version 2) -- the float64 lemmas'
constants (a forward error analysis over the whole domain), the shipped twins within them, the shipped merge coin's
take set and error, each check failing on a planted defect; the version-1 coin counted exactly over the grid; the
float32 token noise's Kolmogorov bounds from the committed exhaustive scan."""

from __future__ import annotations

import types
from fractions import Fraction

import numpy as np
import pytest

import flashsampling
import flashsampling.noise as noise
from proofs import check_second_level as chk

#: Checks that run the kernels on CPU tensors through the interpreter (bit for bit with the twins); on a GPU host
#: the kernels run compiled and refuse CPU tensors: the compiled kernels' checks are ``proofs/gpu_checks.py``.
interpreted_only = pytest.mark.skipif(
    not flashsampling.INTERPRET, reason="CPU tensors through the interpreted kernels (GPU: proofs/gpu_checks.py)"
)


@pytest.fixture(scope="module")
def scan():
    return chk.load_scan()


@pytest.fixture(scope="module")
def lemmas():
    return chk.lemmas()


def test_lemma_constants(lemmas):
    """The analysis closes with small constants (units of u = 2**-53), Sterbenz holds in exp_neg64's reduction, and the
    group noise's Kolmogorov distance is of order 1e-15."""
    assert lemmas["log64"]["c0"] < 3 and lemmas["log64"]["c1"] < 2
    assert lemmas["exp64"]["c_exp"] < 4 and lemmas["exp64"]["sterbenz"]
    g = lemmas["gumbel64"]
    assert g["c_E"] < 10 and g["A"] < 12 and g["B"] < 3 and 0 < g["D_G64"] < 2e-15
    assert lemmas["group_bounds"]["2"] < 1e-14
    assert 4 < lemmas["theta"] / 2.0**-53 < 6


def test_the_analysis_sees_a_shortened_polynomial():
    """The proof is about the polynomial it is given: cut after 5 terms, Lemma 8.1's constant grows by orders of
    magnitude (the Taylor remainder enters the bound)."""
    assert chk.log64_lemma(split=1, coeffs=noise.LOG64_COEFFS[:5])["c0"] > 1e3
    assert chk.exp64_lemma(pieces=8, coeffs=noise.EXP64_COEFFS[:10])["c_exp"] > 1e3


def test_constants_are_the_designs_and_a_changed_one_is_caught():
    assert all(chk.constants_ok().values())
    planted = types.SimpleNamespace(**{k: getattr(noise, k) for k in ("LOG64_COEFFS", "EXP64_COEFFS", "LN2_HI",
                                                                      "LN2_LO", "INV_LN2", "EXP64_CLAMP")})  # fmt: skip
    planted.EXP64_COEFFS = noise.EXP64_COEFFS[:-1] + (float(np.nextafter(noise.EXP64_COEFFS[-1], 1.0)),)
    assert not chk.constants_ok(planted)["EXP64_COEFFS = fl(1 / j!), j = 0..13"]


def test_shipped_twins_within_the_lemmas_and_shortened_ones_not(lemmas):
    spot = chk.float64_spot_checks(lemmas, n=300)
    assert all(v <= 1.0 for k, v in spot.items() if k != "inputs"), spot
    assert chk.float64_spot_checks(lemmas, n=300, log_fn=chk.short_log64)["gumbel64"] > 1.0
    assert chk.float64_spot_checks(lemmas, n=300, exp_fn=chk.short_exp64)["exp_neg64"] > 1.0


def test_shipped_coin_counts_are_exact_and_within_theorem_8_4(lemmas):
    """The shipped merge coin's take set is [0, K(q')) with K in exact rationals, and |K/2**64 - q| is within the bound,
    at the issue's thresholds (t = 1: the version-1 coin was 3.6e-8 off), random and edge pairs."""
    res = chk.coin_counts(lemmas["theta"])
    assert res["wrong_counts"] == 0 and res["max_ratio"] <= 1.0, res
    assert res["max_abs"] < 1e-15  # (the float64 rounding of q: a few u times min(q, 1 - q))


def test_planted_coins_are_caught(lemmas):
    """A float64 ceil(2**64 q - 1/2) miscounts; the version-1 coin (float32 E against a float64 log-ratio), counted
    exactly over all 2**64 grid points, is far outside Theorem 8.4 at t = 1."""
    assert chk.coin_counts(lemmas["theta"], coin=chk.float64_ceil_coin)["wrong_counts"] > 0
    d_abs, d_rel = chk.coin_error(1.0)
    assert d_rel / 2.0**-24 == pytest.approx(-1.62, abs=0.01) and abs(d_abs) > 1e-9
    p = chk.coin_probability(1.0)
    assert isinstance(p, Fraction) and (p * 2**64).denominator == 1


def test_version_1_coin_extremes_and_a_24_bit_coin():
    assert chk.coin_probability(-1.0) == 1
    assert chk.coin_probability(46.0) == 0  # above the largest E, 45.06
    assert chk.coin_probability(0.0) == 1  # E > 0 at every grid point
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


@interpreted_only
def test_recorded_results_are_current(scan):
    from proofs import _generated as gen

    fresh = gen.roundtrip(chk.collect(scan))
    assert gen.same(fresh, gen.load("second_level"), rel=1e-9)
    assert all(chk.verdicts(fresh).values())
