"""proofs/factorization.md: exact laws of the grouped, merge and online rules; the dependence counterexample."""

from __future__ import annotations

from fractions import Fraction

import pytest

from proofs import check_factorization as chk


def test_exact_laws_over_random_cases():
    assert chk.random_exact_trials(n_trials=120, seed=6) == 0


def test_zero_mass_group_is_never_chosen():
    w = [Fraction(0), Fraction(0), Fraction(3), Fraction(1)]
    assert chk.exact_parallel_law(w, [[0, 1], [2], [3]]) == [0, 0, Fraction(3, 4), Fraction(1, 4)]
    laws = chk.exact_online_laws(w, [[0], [1, 2], [3]])
    assert laws[0] == {}
    assert [laws[-1].get(i, 0) for i in range(4)] == [0, 0, Fraction(3, 4), Fraction(1, 4)]


@pytest.mark.parametrize("n", [2, 3])
def test_symbolic_online(n):
    assert all(e == 0 for e in chk.symbolic_online(n))


def test_reused_noise_is_biased():
    p_out, p0 = chk.reused_noise_counterexample()
    assert p_out == pytest.approx(0.5) and p0 == pytest.approx(0.25)


def test_grouped_twin_stream_1_passes_and_stream_0_fails():
    pv = chk.grouped_twin_pvalues(n=12_000, seed=2024)
    assert pv["stream 1 (ours)"] > 1e-3 and pv["uneven groups, stream 1"] > 1e-3
    assert pv["stream 0 reused"] < 1e-12
