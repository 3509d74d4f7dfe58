"""proofs/finite_precision.md sections 2-4: exact laws over grids, Theorem 2, the cap, other generators."""

from __future__ import annotations

import math

import pytest

from proofs import check_grid_noise as chk


@pytest.mark.parametrize("theta", [0.5, 0.0])
def test_exact_law_sums_to_one_with_ties_and_masks(theta):
    law = chk.grid_token_law([0.0, 0.0, -1.3, -math.inf], 5, theta)
    assert sum(law) == 1 and law[3] == 0 and law[0] == law[1]


def test_theorem_2_bound_on_small_grids():
    for logits in ((0.0, -1.0, -3.0), (0.0, -0.5, -2.0, -6.0)):
        scan = chk.bits_scan(logits, bits_list=range(4, 10))
        assert all(t <= c for t, c in zip(scan.tv, scan.bound))
        assert scan.slope < -0.8  # decays at least about as fast as 2^-b


def test_tokens_beyond_the_cap_get_nothing():
    dev = chk.token_deviations((0.0, -0.5, -2.0, -6.0, -9.0), 4)
    p = chk.softmax([0.0, -0.5, -2.0, -6.0, -9.0])
    assert dev[3] == pytest.approx(-p[3], rel=1e-12) and dev[4] == pytest.approx(-p[4], rel=1e-12)


def test_two_level_formula_matches_enumeration():
    assert chk.cross_check_two_level(bits_list=(4, 6, 8)) < 1e-14


def test_64_bit_grid_worst_case_and_bound():
    scan = chk.grid_tv_scan(n_tails=(1, 1 << 18), gaps=(44.0, 46.0, 48.0))
    for nt, (tv, gap, bound, err) in scan.items():
        assert tv <= bound
        assert err < 1e-3 * tv
        assert tv == pytest.approx(0.118 * (nt + 1) / 2.0**64, rel=0.01) and gap == 46.0


def test_caps():
    caps = chk.generator_caps()
    assert [round(c.g_max, 2) for c in caps] == [16.64, 21.49, 45.05]
    assert caps[2].never_wins_gap == pytest.approx(48.862, abs=1e-3)


def test_24_bit_generator_starves_a_tail_20_nats_down():
    res = chk.starved_mass(1 << 17, 20.0)
    assert res["24-bit"].grid == pytest.approx(2.0**-24, rel=1e-6)  # only the U = 0 atom of the top token
    assert res["24-bit"].softmax == pytest.approx(2.7009e-4, rel=1e-4)
    assert res["ours"].tv <= res["ours"].error_bound


def test_recorded_results_are_current():
    from proofs import _generated as gen

    fresh = gen.roundtrip(chk.collect())
    assert gen.same(fresh, gen.load("grid_noise"), rel=1e-9)
    assert all(chk.verdicts(fresh).values())
