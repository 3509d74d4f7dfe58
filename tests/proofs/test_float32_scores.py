"""proofs/finite_precision.md sections 5 and 7: rounding of scores, logit perturbations, fp32 logits."""

from __future__ import annotations

import pytest

from proofs import check_float32_scores as chk


@pytest.mark.parametrize("mu", [(0.0, -1.0), (0.0, -0.3, -2.0), (0.0, 0.0, -1.5, -4.0)])
def test_rounding_is_second_order_and_within_theorem_4(mu):
    a = chk.rounding_tv(mu, 2.0**-4, offset=0.0371)
    b = chk.rounding_tv(mu, 2.0**-6, offset=0.0093)
    assert a.tv <= a.bound and b.tv <= b.bound
    assert b.ratio == pytest.approx(a.ratio, rel=0.05)  # TV / h^2 constant: second order
    assert a.ratio < 0.05


def test_rounding_law_sums_to_one():
    law = chk.rounding_law((0.0, -2.0, 1.0), chk.uniform_edges(0.25, -10.0, 45.0))
    assert law.sum() == pytest.approx(1.0, abs=1e-12)


def test_float_grid_within_theorem_4():
    r = chk.rounding_tv((0.0, -0.7, -3.0), 0.0, grid="float", p=10)
    assert r.tv <= r.bound


def test_float32_budget():
    assert chk.float32_rounding_budget(128.0) < 6.3e-11
    assert chk.float32_rounding_budget(256.0) < 1e-9 / 4


def test_lemma_5_bound_and_equality():
    worst, extremal = chk.perturbation_trials(n=300, seed=1)
    assert worst <= 1.0 + 1e-12
    assert extremal == pytest.approx(1.0, abs=1e-9)


def test_fp32_logits_within_bounds():
    r = chk.fp32_logits(d=1024, v=256, b=2, temperature=0.8)
    assert r.max_err_over_bound <= 1.0
    assert r.max_logp_err <= r.logp_bound
    assert r.tv <= r.tv_bound


def test_temperature_scaling_within_bounds():
    for r in chk.temperature_scaling(temperatures=(0.7, 1.3), v=2000, b=2):
        assert r.max_rel_err <= r.rel_bound
        assert r.tv <= r.tv_bound


def test_hybrid_lemma_with_rounding():
    """Theorem 2b with rounded scores and Theorem 7's sum, on exact laws (6-bit grid, every combination)."""
    for r in chk.hybrid_rounding_trials(cases=((0.0, -1.0), (0.0, 0.0, -1.1)), hs=(2.0**-3,)):
        assert r["tv_grid_cont"] <= r["bound_grid_cont"] and r["tv_grid_softmax"] <= r["bound_combined"]


def test_hybrid_laws_are_not_trivial():
    """The enumerated rounded-grid law differs from the continuous one, and less on a finer grid (a theorem check:
    the bound is not a check of the code, but its two sides are computed independently)."""
    coarse = chk.hybrid_rounding_trials(cases=((0.0, -1.0),), hs=(2.0**-3,), bits=3)[0]["tv_grid_cont"]
    fine = chk.hybrid_rounding_trials(cases=((0.0, -1.0),), hs=(2.0**-3,), bits=7)[0]["tv_grid_cont"]
    assert 0 < fine < coarse


def test_combined_bound_table():
    assert chk.combined_bound(7)["total"] < 6.3e-11
    assert chk.combined_bound(21)["total"] > 1e-2  # the float32 term once the top score reaches 2**20


def test_recorded_results_are_current():
    """Machine-independent numbers equal a fresh run; the fp32 accumulation numbers depend on the machine's matmul
    (BLAS, threads, CPU), so the fresh and the recorded ones are each checked against their bounds, never against
    each other."""
    from proofs import _generated as gen

    fresh = gen.roundtrip(chk.collect())
    rec = gen.load("float32_scores")
    machine_dependent = ("fp32_logits",)
    assert gen.same(
        {k: v for k, v in fresh.items() if k not in machine_dependent},
        {k: v for k, v in rec.items() if k not in machine_dependent},
        rel=1e-9,
    )
    assert all(chk.verdicts(fresh).values())
    assert all(chk.verdicts(rec).values())
    assert fresh["fp32_logits"].keys() == rec["fp32_logits"].keys()
