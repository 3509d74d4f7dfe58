"""proofs/tile_inverse_cdf.md: the integer inverse CDF's exact law, the exp2 polynomial's error (exhaustive, a binade
recomputed against the committed scan, Lemma 0's edge, a planted coefficient caught), and the two-level design
within its criteria while each planted defect is caught (reduced sizes)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from flashsampling.tile_cdf import weights as tile_weights
from flashsampling.tile_cdf.weights import exp2_poly_np
from proofs import _generated as gen
from proofs import check_tile_inverse_cdf as chk


def test_index_law_is_exact_and_within_2_to_the_minus_b():
    r = chk.index_law_trials(n_trials=60, u_bits=10, seed=3)
    assert r["enumeration != closed form"] == 0 and r["|P - q/Q| >= 2^-b"] == 0


def test_index_law_closed_form():
    # Q = 3 does not divide 2**2: the four u values split 2 / 1 / 1 over weights 1 / 1 / 1.
    assert chk.exact_index_law([1, 1, 1], 2) == [Fraction(2, 4), Fraction(1, 4), Fraction(1, 4)]
    assert chk.exact_index_law([0, 5, 0], 4) == [0, 1, 0]


def test_exp2_poly_spot_check():
    assert chk.exp2_error(n_points=1 << 16) < 2 * 2.0**-24
    assert exp2_poly_np(np.float32([0.0]))[0] == 1.0  # the tile's maximum gets exactly 2**55


def test_exp2_exhaustive_committed_and_a_binade_recomputed():
    ex = chk.load_exp2_exhaustive()
    assert ex["max_rel_units"] == pytest.approx(1.734, abs=5e-4) and ex["values"] == 2 * 38 * 2**23 + 2
    for key in ("+2^-2", "-2^-2", "-2^-1"):
        e, sign = int(key[3:]), (1 if key[0] == "+" else -1)
        assert gen.same(list(chk.exp2_error_binade(e, sign)), ex["per_binade"][key])
    assert chk.exp2_tiny_is_one()


def test_exp2_scan_catches_a_wrong_coefficient(monkeypatch):
    """Planted: c_1 = log 2 rounded to 16 bits; the binade 2^-2 alone exceeds 2 * 2**-24."""
    bad = tile_weights.EXP2_COEFFS.copy()
    bad[1] = np.float32(round(float(bad[1]) * 2**16) / 2**16)
    monkeypatch.setattr(tile_weights, "EXP2_COEFFS", bad)
    assert chk.exp2_error_binade(-2, -1)[0] > 2 * 2.0**-24


def test_integer_weights_maximum_and_cutoff():
    s = np.float32([[0.0, -1.0, -38.0, -39.0] + [-np.inf] * (chk.TILE - 4)])
    m, q = chk.integer_weights(s)
    assert m[0] == 0 and q[0, 0] == 2.0**55 and q[0, 1] == pytest.approx(2.0**55 * np.exp(-1.0), rel=1e-6)
    assert q[0, 2] > 0 and q[0, 3] == 0 and not q[0, 4:].any()  # 2**x below 2**-55: weight 0


def test_design_passes_and_every_defect_is_caught():
    res = chk.run(V=32768, n_exp2=1 << 16)
    assert all(chk.verdicts(res).values()), chk.verdicts(res)


def test_recorded_results_are_current():
    fresh = gen.roundtrip(chk.collect())
    assert gen.same(fresh, gen.load("tile_inverse_cdf"), rel=1e-9)


def test_the_weights_module_quotes_the_exhaustive_eta():
    """flashsampling/tile_cdf/weights.py states eta as the exhaustive scan recorded it (in units of 2**-24)."""
    eta = f"{gen.load('exp2_exhaustive')['max_rel_units']:.3f} * 2**-24"
    doc = open(tile_weights.__file__).read()
    assert doc.count(eta) == 2, eta
