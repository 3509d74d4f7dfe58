"""The mutant catalogue: every mutant is caught at its planned n, exact samplers pass the same checks.

Seeds and sizes: mutant ``m`` is drawn with seed ``m.seed`` at ``planned_n(m.name)`` draws (power 0.99
each, so a fresh seed would let one through with probability at most 0.01); the exact sampler that
shadows it uses seed ``m.seed + EXACT_SEED_OFFSET`` at the same ``n`` (family-wise alpha 1e-3 each).
``verification.mutants.budgets()`` lists them as budget entries.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from flashsampling.reference import softmax
from verification import goodness_of_fit, tail_mass_test
from verification.battery.mutants import samplers as S
from verification.battery.mutants.catalogue import CONTROLS, MUTANTS, catalogue, mutant, mutant_cases
from verification.planning.detection import plan_detection
from verification.planning.suite import TEST_TITLES, suite_names
from verification.runners import mutants as M
from verification.runners.suite import run_suite

ALPHA = 1e-3
NAMES = [m.name for m in MUTANTS]


@pytest.mark.parametrize("name", NAMES)
def test_mutant_is_caught_at_its_planned_n(name):
    """The suite flags the mutant at the stated n, and the stated catching test is among the failures."""
    m = mutant(name)
    d = M.plan(name, ALPHA)
    n = M.planned_n(name, ALPHA)
    row = M.check_mutant(m, n, m.seed, alpha=ALPHA)
    assert row["flagged"], row
    catcher = d.best
    if catcher == "impossible":  # an impossible draw fails every test of the suite
        assert set(row["failed_tests"]) >= {"pearson", "categories"}, row
    else:
        assert catcher in row["failed_tests"], (catcher, row)


@pytest.mark.parametrize("name", NAMES)
def test_exact_sampler_passes_the_same_checks(name):
    m = mutant(name)
    case = m.the_case
    n = M.planned_n(name, ALPHA)
    x = M.exact_sampler(case)(case.logits, case.temperature, n, m.seed + M.EXACT_SEED_OFFSET)
    fam = run_suite(x, case, alpha=ALPHA, paired=m.paired)
    assert fam.passed, fam.table()


@pytest.mark.parametrize("name", NAMES)
def test_sampler_matches_its_law(name):
    """The law the planning uses is the sampler's: goodness of fit (and tail mass) against the law itself."""
    m = mutant(name)
    case = m.the_case
    q = M.law_of(m)
    assert q.shape == (case.num_categories,) and abs(q.sum() - 1) < 1e-9 and (q >= 0).all()
    x = m.sample(case.logits, case.temperature, 40_000, 7_000 + m.seed)
    if m.paired:  # serially dependent draws: test one coordinate of each pair
        x = x[0::2]
    live = q > 0
    assert np.bincount(x, minlength=q.size)[~live].sum() == 0, "draw outside the law's support"
    r = goodness_of_fit(x, q, alpha=1e-4)
    assert r.passed, r
    if case.tail_gap is not None:
        tail = case.tail_mask()
        if 0 < q[tail].sum() < 1:
            t = tail_mass_test(x, q, tail, alternative="two-sided", alpha=1e-4)
            assert t.passed, t


@pytest.mark.parametrize("control", CONTROLS, ids=lambda c: c.name)
def test_controls_pass_at_the_largest_n_of_their_case(control):
    n = max(M.planned_n(m.name, ALPHA) for m in MUTANTS if m.case == control.case)
    row = M.check_mutant(control, n, control.seed, alpha=ALPHA)
    assert not row["flagged"], row


def test_samplers_follow_the_signature():
    z = np.array([0.0, -1.0, -np.inf, 2.0, 2.0, 0.5], dtype=np.float64)
    for m in catalogue(controls=True):
        if m.paired:
            z_m = np.zeros(6)
        else:
            z_m = z
        x = m.sample(z_m, 0.8, 257, 3)
        assert isinstance(x, np.ndarray) and x.dtype == np.int64 and x.shape == (257,), m.name
        assert (x >= 0).all() and (x < 6).all(), m.name
        assert np.array_equal(x, m.sample(z_m, 0.8, 257, 3)), f"{m.name} is not deterministic in its seed"


def test_run_machinery_is_exact_on_structured_logits():
    """The max-of-M shortcuts (Gumbel + log M, Exp / M, max of uniform integers) reproduce exact draws."""
    z = np.r_[np.zeros(3), np.full(5000, -4.0), np.full(60, 1.5), np.full(10, -np.inf)]
    p = softmax(z)
    for sampler in (S.exact_gumbel_runs, S.exact_race_runs):
        r = goodness_of_fit(sampler(z, 1.0, 60_000, 11), p, alpha=1e-4)
        assert r.passed, (sampler.__name__, r)


def test_max_of_uniform_integers_has_the_law_of_a_maximum():
    rng = np.random.default_rng(5)
    k = S._max_uniform_int(np.array([1, 3]), 200_000, 3, rng)  # 8 levels
    for col, m in ((0, 1), (1, 3)):
        cdf = ((np.arange(8) + 1) / 8.0) ** m
        obs = np.bincount(k[:, col].astype(np.int64), minlength=8) / k.shape[0]
        assert np.abs(np.cumsum(obs) - cdf).max() < 0.005


def test_round_bf16_keeps_8_significant_bits():
    assert S.round_bf16([1.0, 1.0 + 2**-9, 1.0 + 3 * 2**-9, 30.05]).tolist() == [1.0, 1.0, 1.0 + 2**-7, 30.0]
    assert np.isinf(S.round_bf16(np.inf))


def test_plan_sees_nothing_in_an_exact_law():
    case = mutant_cases()["normal-V256"]
    d = plan_detection(case, case.probs, alpha=ALPHA)
    assert all(math.isinf(v) for v in d.n.values())
    assert d.m == len(suite_names(case))


def test_catalogue_table_rows_are_json_ready():
    rows = M.catalogue_table(ALPHA)
    assert [r["mutant"] for r in rows] == NAMES
    json.dumps(rows)
    for r in rows:
        assert r["n"] >= 1 and r["catching_test"] in TEST_TITLES.values()


def test_docs_table_matches_the_catalogue():
    doc = Path(__file__).resolve().parents[1] / "docs" / "mutants.md"
    text = doc.read_text()
    for r in M.catalogue_table(ALPHA):
        line = next(ln for ln in text.splitlines() if ln.startswith(f"| `{r['mutant']}` |"))
        assert re.search(rf"\| {re.escape(r['catching_test'])} \| {r['n']:,} \|", line), (r["mutant"], line)


def test_budgets_are_well_formed():
    b = M.budgets(ALPHA)
    assert len(b) == 2 * len(NAMES) and len({e.name for e in b}) == len(b)
    assert {e.kind for e in b} == {"null", "planted"}


def test_lookup_error():
    with pytest.raises(KeyError, match="no mutant named"):
        mutant("nope")


# --------------------------------------------------------------------------------------------
# The target mutants (truncation and speculative)
# --------------------------------------------------------------------------------------------


def test_target_cases_put_a_token_on_each_threshold():
    """The ties and min-p cases hold tokens exactly at the cut, without which the conventions agree."""
    from verification.battery.mutants.catalogue import MIN_P, TIES_K

    cases = mutant_cases()
    z = cases["topk20-ties-V1000"].logits
    kth = np.sort(z)[::-1][TIES_K - 1]
    assert (z > kth).sum() < TIES_K < (z >= kth).sum()
    zm = cases["minp-boundary-V1000"].logits
    assert (np.exp(zm - zm.max()) == MIN_P).sum() == 8
    for name in ("top-k-ties-by-index", "min-p-strict"):
        m = mutant(name)
        assert not np.allclose(m.law(m.the_case), m.the_case.probs)


def test_speculative_residuals():
    """The exact residual gives back p (the step is exact); each defective one sums to 1 and does not."""
    from verification.battery.mutants import speculative as SP

    case = mutant_cases()["spec-tail17-V32768"]
    p = softmax(case.logits)
    q = SP.draft_probs(case.logits)
    assert q.sum() == pytest.approx(1.0) and q[0] == 0.5 and (q[1:1025] > 0).all() and (q[1025:] == 0).all()
    assert np.allclose(SP.law("exact")(case), p, rtol=1e-9, atol=1e-15)
    for kind in ("unnormalized", "float16", "target"):
        r = SP.residual_of(p, q, kind)
        assert r.sum() == pytest.approx(1.0) and (r >= 0).all()
        assert not np.allclose(SP.law(kind)(case), p, rtol=1e-3, atol=0), kind
    assert SP.draft_probs(np.zeros(1)).tolist() == [1.0]
    with pytest.raises(ValueError, match="residual must be one of"):
        SP.sampler("float8")
