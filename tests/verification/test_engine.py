"""The battery engine: one Holm family over every (variant, case), declared before the first draw.

Seeds: ``budget("verification.engine.exact")`` (batteries of exact toy variants, each a null check at
family-wise alpha 1e-3) and ``verification.engine.planted`` (maxima 1 nat high and an ignored temperature
are caught, at these n with a miss probability far below 1e-6).
"""

from __future__ import annotations

import numpy as np
import pytest

from flashsampling.reference import sample_inverse_cdf
from verification.battery.cases import Case
from verification.battery.variants import Variant
from verification.planning.budget import budget
from verification.planning.runs import fixed_draws, plan_runs
from verification.planning.suite import suite_names
from verification.runners.engine import FIRST_BATCH, run_battery

ALPHA = 1e-3
SEED = budget("verification.engine.exact").seed

RNG = np.random.default_rng(31)
NORMAL = Case("toy-normal-V50", RNG.normal(0, 1, 50).astype(np.float32).astype(np.float64), 0.7, "N(0, 1), T=0.7")
FLAT = Case("toy-flat-V64", np.zeros(64), 1.0, "flat", flat=True)
MASKED = Case("toy-masked-V40", np.where(np.arange(40) % 3 == 0, -np.inf, RNG.normal(0, 1, 40)), 1.0, "masked")


def _exact(case: Case, n: int, seed: int) -> np.ndarray:
    return sample_inverse_cdf(case.probs, n, np.random.default_rng(seed))


def _maxima(shift: float = 0.0):
    """Perturbed maxima ``max_v(z_v / T + G_v)`` (+ ``shift`` nats: a planted defect)."""

    def draw(case: Case, n: int, seed: int) -> np.ndarray:
        z = case.logits / case.temperature
        g = np.random.default_rng(seed).gumbel(size=(n, z.size))
        with np.errstate(invalid="ignore"):
            return np.where(np.isfinite(z), z + g, -np.inf).max(axis=1) + shift

    return draw


def _temperature_ignored(case: Case, n: int, seed: int) -> np.ndarray:
    return sample_inverse_cdf(Case("t1", case.logits, 1.0, "").probs, n, np.random.default_rng(seed))


EXACT = Variant("toy-exact", "control", _exact, 2_000_000, cpu_max_n=20_000)
EXACT_MAXIMA = Variant("toy-exact-maxima", "twin", _exact, 2_000_000, cpu_max_n=20_000, maxima=_maxima())
FINITE_ONLY = Variant("toy-finite-only", "twin", _exact, 2_000_000, cpu_max_n=20_000,
                      applies=lambda c: bool(np.isfinite(c.logits).all()))  # fmt: skip


def test_one_family_over_every_test_of_every_run():
    cases = [NORMAL, FLAT, MASKED]
    result = run_battery([EXACT, EXACT_MAXIMA, FINITE_ONLY], cases, alpha=ALPHA, seed=SEED)
    runs = [rr.run for rr in result.runs]
    assert [r.name for r in runs] == [r.name for r in plan_runs([EXACT, EXACT_MAXIMA, FINITE_ONLY], cases)]
    assert "toy-finite-only/toy-masked-V40" not in [r.name for r in runs]  # the variant does not apply
    m = sum(len(suite_names(r.case, maxima=r.variant.has_maxima(r.case))) for r in runs)
    assert result.family.size == m == len(result.family) == len(result.tests())
    # Every test ran at alpha / m, the level its detectable deviation is stated at.
    assert all(t["alpha"] == pytest.approx(ALPHA / m) for t in result.tests())
    assert result.passed, result.family.table()
    assert all(rr.n == fixed_draws(rr.run.variant, rr.run.case) for rr in result.runs)


def test_gumbel_max_joins_the_suite_where_maxima_are_exposed():
    result = run_battery([EXACT_MAXIMA], [NORMAL], alpha=ALPHA, seed=SEED)
    names = [t["test"] for t in result.tests()]
    assert names == suite_names(NORMAL) + ["gumbel-max"]
    assert result.runs[0].maxima == result.runs[0].n and result.passed


def test_planted_defects_fail_the_battery():
    """The checks above can fail: maxima 1 nat high fail the Gumbel-max member; an ignored temperature fails the
    chi-square members; the exact control in the same family still passes its own tests."""
    shifted = Variant("toy-maxima-shifted", "twin", _exact, 2_000_000, cpu_max_n=20_000, maxima=_maxima(1.0))
    cold = Variant("toy-temperature-ignored", "twin", _temperature_ignored, 2_000_000, cpu_max_n=20_000)
    result = run_battery([EXACT, shifted, cold], [NORMAL], alpha=ALPHA, seed=budget("verification.engine.planted").seed)
    failed = {(t["variant"], t["test"]) for t in result.tests() if not t["passed"]}
    assert not result.passed
    assert ("toy-maxima-shifted", "gumbel-max") in failed
    assert {("toy-temperature-ignored", "pearson"), ("toy-temperature-ignored", "g-test")} <= failed
    assert not any(v == "toy-exact" for v, _ in failed)


def test_a_variant_refusing_a_case_at_draw_time_is_reported_skipped():
    def refuse(case, n, seed):
        raise NotImplementedError("no such path")

    refusing = Variant("toy-refusing", "kernel", refuse, 2_000_000)
    result = run_battery([EXACT, refusing], [NORMAL], alpha=ALPHA, seed=SEED)
    skipped = [rr for rr in result.runs if rr.skipped]
    assert [rr.run.variant.name for rr in skipped] == ["toy-refusing"] and skipped[0].skipped == "no such path"
    # Its declared slots stay in the family as p = 1: Holm over the declared size is still valid.
    assert result.family.size == 2 * len(suite_names(NORMAL)) > len(result.family)
    assert result.passed and all(t["variant"] == "toy-exact" for t in result.tests())


def test_fixed_sizes_are_deterministic_in_the_seed():
    a = run_battery([EXACT], [NORMAL], alpha=ALPHA, seed=SEED)
    b = run_battery([EXACT], [NORMAL], alpha=ALPHA, seed=SEED)
    c = run_battery([EXACT], [NORMAL], alpha=ALPHA, seed=SEED + 1)
    assert np.array_equal(a.runs[0].counts.histogram, b.runs[0].counts.histogram)
    assert not np.array_equal(a.runs[0].counts.histogram, c.runs[0].counts.histogram)


def test_budgeted_runs_draw_in_batches_from_a_pilot():
    """With a budget each run draws at least its pilot batch, in independent batches (no timing asserted)."""
    result = run_battery([EXACT, EXACT_MAXIMA], [NORMAL, FLAT], alpha=ALPHA, budget_s=0.5, seed=SEED)
    for rr in result.runs:
        assert rr.n >= FIRST_BATCH and rr.batches >= 1 and rr.counts.n == rr.n
        assert rr.maxima == (rr.n if rr.run.variant.maxima else 0)
    assert result.passed, result.family.table()


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"budget_s": 0.0}, ValueError, "budget_s"),
        ({"budget_s": float("inf")}, ValueError, "budget_s"),
        ({"alpha": 1.5}, ValueError, "alpha"),
        ({"seed": -1}, ValueError, "seed"),
        ({"cases": [MASKED], "variants": [FINITE_ONLY]}, ValueError, "no .variant, case. pair"),
    ],
    ids=["budget_s=0", "budget_s=inf", "alpha=1.5", "seed=-1", "no-pair"],
)
def test_bad_arguments_raise_before_any_draw(kwargs, exc, match):
    def never(case, n, seed):
        raise AssertionError("drew before validating")

    args = {"variants": [Variant("toy-never", "control", never, 1000)], "cases": [NORMAL], **kwargs}
    with pytest.raises(exc, match=match):
        run_battery(args.pop("variants"), args.pop("cases"), **args)


def test_the_registry_declares_what_each_variant_cannot_run():
    """A pair the registry's ``applies`` leaves out is one its sampler refuses (checked before any kernel work),
    so the main job's family size is right before the first draw."""
    from verification.battery.cases import battery
    from verification.battery.variants import registry

    cases = battery()
    left_out = [(v, c) for v in registry() for c in cases if c.num_categories <= v.max_vocab and not v.applies(c)]
    assert ("kernel-fused-matmul", "masked-V1000") in [(v.name, c.name) for v, c in left_out]
    for v, c in left_out:
        with pytest.raises(NotImplementedError):
            v.sample(c, 64, 0)
