"""The audit of samplers written elsewhere: small, fast checks of its findings and its report rows.

Seeds: 4101 (torch.multinomial on the far-tail case, a planted failure: the bias is total, so the miss
probability at 20,000 draws is below 1e-10) and 4102 (numpy's choice on the same case, a null check at
family-wise alpha 1e-3).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from verification import audit as A
from verification.suite import run_suite

N = 20_000


def test_torch_multinomial_starves_the_far_tail():
    """The float32 running CDF of torch.multinomial (CPU) never draws tokens 20 nats below the top."""
    case = A.audit_cases()["tail20-V262144"]
    s = next(s for s in A.SAMPLERS if s.name == "torch.multinomial")
    x = s.draw(case, N, 4101)
    tail = case.tail_mask()
    fam = run_suite(x, case, alpha=1e-3)
    failed = [m.name for m in fam.failures()]
    if A._torch_device().type == "cpu":
        assert int(tail[x].sum()) == 0
        assert "tail" in failed, fam.table()


def test_numpy_choice_passes_the_same_case():
    case = A.audit_cases()["tail20-V262144"]
    s = next(s for s in A.SAMPLERS if s.name == "numpy.choice")
    fam = run_suite(s.draw(case, N, 4102), case, alpha=1e-3)
    assert fam.passed, fam.table()


def test_run_audit_rows():
    rows = A.run_audit(alpha=1e-3, budget_s=1.0, seed=7, samplers=["numpy.choice", "jax.categorical", "flashinfer"])
    json.dumps(rows)
    by = {r["sampler"]: r for r in rows}
    r = by["numpy.choice"]
    assert r["available"] and r["passed"] and r["mechanism"] is None
    assert [c["case"] for c in r["cases"]] == list(A.AUDIT_CASES)
    assert all(c["n"] >= A.MIN_DRAWS for c in r["cases"])
    assert 0 < r["smallest_tv"] < 1
    for name in ("jax.categorical", "flashinfer"):
        if not by[name]["available"]:
            assert by[name]["skipped"] and by[name]["passed"] is None
    assert "numpy.choice" in A.format_audit(rows)


def test_warmup_is_not_charged_to_the_budget():
    """A sampler whose first call takes longer than its whole share (a JIT compile) still gets the
    draws its share buys: the warm-up is timed apart and not charged."""
    import time

    numpy_choice = next(s for s in A.SAMPLERS if s.name == "numpy.choice")
    first = []

    def slow_first_draw(case, n, seed):
        if not first:
            first.append(1)
            time.sleep(1.5)
        return numpy_choice.draw(case, n, seed)

    slow = A.AuditSampler("slow-jit", "numpy, after a 1.5 s first call", slow_first_draw, lambda: None,
                          lambda: "test", per_draw_vector=False)  # fmt: skip
    cases = {k: v for k, v in A.audit_cases().items() if k == "normal-V1000"}
    row = A._audit_one(slow, cases, alpha=1e-3, budget=1.0, seed=3)
    assert row["warmup_seconds"] >= 1.5
    assert row["cases"][0]["n"] > A.MIN_DRAWS


@pytest.mark.parametrize(
    ("costs", "budget", "expect"),
    [
        ({"normal-V1000": 1e-9, "tail17-V32768": 1e-3}, 10.0, {"normal-V1000": A.MAX_DRAWS}),
        ({"normal-V1000": 1.0, "tail17-V32768": 1.0}, 0.0, {"normal-V1000": A.MIN_DRAWS}),
    ],
    ids=["cheap-case-capped", "no-budget-floor"],
)
def test_shares(costs, budget, expect):
    n = A._shares(costs, budget)
    assert set(n) == set(costs)
    for k, v in expect.items():
        assert n[k] == v
    if budget:  # the expensive case receives the rest of the budget
        assert n["tail17-V32768"] == int((budget - A.MAX_DRAWS * 1e-9) / 1e-3)


def test_cases_are_float32_logits_with_their_tests():
    cases = A.audit_cases()
    assert list(cases) == list(A.AUDIT_CASES)
    for c in cases.values():
        finite = c.logits[np.isfinite(c.logits)]
        assert np.array_equal(finite.astype(np.float32).astype(np.float64), finite)
    assert cases["tail17-V32768"].tail_mask().sum() == 32767
