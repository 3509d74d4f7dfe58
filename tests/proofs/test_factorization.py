"""proofs/factorization.md: the shipped grouped and online samplers' exact laws on an enumerated noise grid, each
planted defect caught; the statistical check with the real noise; the algebra identities (labelled as such)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from proofs import check_factorization as chk

#: Small enumerations (2 grid bits) so that the tests stay fast; the full ones run in ``main``.
FAST = (
    ("grouped", (0.0, -0.37, 0.81, -1.23), 1.0, (1, 3)),
    ("grouped", (0.5, -math.inf, -0.9, 1.3, -math.inf), 0.8, (2, 0, 1, 2)),
    ("online", (0.2, -0.55, 1.07, -0.3), 1.3, (1, 2, 1)),
    ("online", (-math.inf, 0.4, -0.8, 0.15), 1.0, (1, 1, 2)),
    ("online", (0.2, -0.55, 1.07, -0.3), 1.3, (1, 1, 1, 1)),  # four chunks: the running-maximum prefix shows at 2 bits
)


def test_shipped_samplers_have_the_proofs_laws():
    res = chk.enumerated_laws(FAST, bits=2)
    assert all(r["equal"] for r in res), res
    assert chk.enumerated_ok(res)


@pytest.mark.parametrize("planted", sorted(chk.PLANTED))
def test_every_planted_defect_changes_a_law(planted):
    online = planted.startswith("online")
    cases = [c for c in FAST if (c[0] == "online") == online]
    res = chk.enumerated_laws(cases, bits=2 if online else 3, planted=planted)
    assert not all(r["equal"] for r in res), planted


def test_enumerated_noise_reads_one_digit_per_variable():
    noise = chk.EnumeratedNoise(2, [0, 1], group_ids=[0, 2], coin_ids=[5])
    assert noise.samples == 1 << 10
    g_tok, _ = noise.token_noise_np(0, 0, [[0, 1]], [[0b11_10]], 0)
    g_grp, _ = noise.group_noise_np(0, 0, [[0, 2]], [[0b11_10_00_00]], 1)
    w0, w1 = noise.coin_words_np(0, [[5]], 0, [[0b11 << 8]])
    u = [(d + 0.5) / 4 for d in range(4)]
    assert g_tok[0, 0] == pytest.approx(-math.log(-math.log(u[2])), rel=1e-6)
    assert g_tok[0, 1] == pytest.approx(-math.log(-math.log(u[3])), rel=1e-6)
    assert g_grp[0, 0] == pytest.approx(-math.log(-math.log(u[2])), rel=1e-15)
    k = int(w1[0, 0]) << 32 | int(w0[0, 0])
    assert k == (3 << 62) + (1 << 61) and (k + 0.5) / 2**64 == pytest.approx(u[3], rel=1e-15)


def test_grouped_twin_real_noise_passes_and_reused_stream_fails():
    pv = chk.grouped_twin_pvalues(n=12_000, seed=2024)
    assert pv["4 equal logits, groups (2, 2)"] > 1e-3 and pv["7 logits, groups (1, 3, 0, 3)"] > 1e-3
    assert pv["token stream reused (planted)"] < 1e-12


def test_identities():
    """The proof's formulas (identities, not checks of the code)."""
    assert chk.identity_trials(n_trials=120, seed=6) == 0
    w = [Fraction(0), Fraction(0), Fraction(3), Fraction(1)]
    assert chk.parallel_law_identity(w, [[0, 1], [2], [3]]) == [0, 0, Fraction(3, 4), Fraction(1, 4)]
    assert all(e == 0 for e in chk.symbolic_online(3))
    p_out, p0 = chk.reused_noise_counterexample()
    assert p_out == pytest.approx(0.5) and p0 == pytest.approx(0.25)


def test_recorded_results_are_current():
    """The full-size enumerations, p-values and identities of factorization.md equal a fresh run (the planted
    defects at full size are recorded; they are tested above on the small grids)."""
    from proofs import _generated as gen

    rec = gen.load("factorization")
    assert gen.same(gen.roundtrip(chk.enumerated_laws()), rec["enumerated"])
    assert gen.same(chk.grouped_twin_pvalues(), rec["pvalues"])
    assert chk.identity_trials() == rec["identity_trials_wrong"] == 0
    assert all(rec["planted_cases_differing"].values()) and rec["enumerated_ok"]
