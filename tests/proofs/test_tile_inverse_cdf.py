"""proofs/tile_inverse_cdf.md: the integer inverse CDF's exact law, the exp2 polynomial's error, and the two-level
design within its criteria while each planted defect is caught (reduced sizes)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from flashsampling.tile_cdf.weights import exp2_poly_np
from proofs import check_tile_inverse_cdf as chk


def test_index_law_is_exact_and_within_2_to_the_minus_b():
    r = chk.index_law_trials(n_trials=60, u_bits=10, seed=3)
    assert r["enumeration != closed form"] == 0 and r["|P - q/Q| >= 2^-b"] == 0


def test_index_law_closed_form():
    # Q = 3 does not divide 2**2: the four u values split 2 / 1 / 1 over weights 1 / 1 / 1.
    assert chk.exact_index_law([1, 1, 1], 2) == [Fraction(2, 4), Fraction(1, 4), Fraction(1, 4)]
    assert chk.exact_index_law([0, 5, 0], 4) == [0, 1, 0]


def test_exp2_poly():
    assert chk.exp2_error(n_points=1 << 16) < 2 * 2.0**-24
    assert exp2_poly_np(np.float32([0.0]))[0] == 1.0  # the tile's maximum gets exactly 2**55


def test_integer_weights_maximum_and_cutoff():
    s = np.float32([[0.0, -1.0, -38.0, -39.0] + [-np.inf] * (chk.TILE - 4)])
    m, q = chk.integer_weights(s)
    assert m[0] == 0 and q[0, 0] == 2.0**55 and q[0, 1] == pytest.approx(2.0**55 * np.exp(-1.0), rel=1e-6)
    assert q[0, 2] > 0 and q[0, 3] == 0 and not q[0, 4:].any()  # 2**x below 2**-55: weight 0


def test_design_passes_and_every_defect_is_caught():
    res = chk.run(V=32768, n_exp2=1 << 16)
    assert all(chk.verdicts(res).values()), chk.verdicts(res)
