"""The audit of samplers written elsewhere: small, fast checks of its findings and its report rows.

Seeds: 4101 (torch.multinomial on the far-tail case, a planted failure: the bias is total, so the miss
probability at 20,000 draws is below 1e-10) and 4102 (numpy's choice on the same case, a null check at
family-wise alpha 1e-3).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import flashsampling
from verification.battery.libraries.cases import AUDIT_CASES, TARGET_CASES, audit_cases, spec_cases
from verification.battery.libraries.samplers import AuditSampler, _torch_device
from verification.runners import audit as A
from verification.runners.audit import _audit_one, _shares
from verification.runners.suite import run_suite

#: The transcription's Triton kernels run on CPU tensors through the interpreter; on a GPU host they would run
#: compiled and refuse CPU tensors (the audit itself draws through the torch twin, equal to them here).
interpreted_only = pytest.mark.skipif(not flashsampling.INTERPRET, reason="the interpreted transcription")


N = 20_000


def test_torch_multinomial_starves_the_far_tail():
    """The float32 running CDF of torch.multinomial (CPU) never draws tokens 20 nats below the top."""
    case = audit_cases()["tail20-V262144"]
    s = next(s for s in A.SAMPLERS if s.name == "torch.multinomial")
    x = s.draw(case, N, 4101)
    tail = case.tail_mask()
    fam = run_suite(x, case, alpha=1e-3)
    failed = [m.name for m in fam.failures()]
    if _torch_device().type == "cpu":
        assert int(tail[x].sum()) == 0
        assert "tail" in failed, fam.table()


def test_numpy_choice_passes_the_same_case():
    case = audit_cases()["tail20-V262144"]
    s = next(s for s in A.SAMPLERS if s.name == "numpy.choice")
    fam = run_suite(s.draw(case, N, 4102), case, alpha=1e-3)
    assert fam.passed, fam.table()


def test_run_audit_rows():
    rows = A.run_audit(alpha=1e-3, budget_s=1.0, seed=7, samplers=["numpy.choice", "flashinfer"])
    json.dumps(rows)
    by = {r["sampler"]: r for r in rows}
    r = by["numpy.choice"]
    assert r["available"] and r["passed"] and r["mechanism"] is None
    assert [c["case"] for c in r["cases"]] == list(AUDIT_CASES)
    assert all(c["n"] >= A.MIN_DRAWS for c in r["cases"])
    assert 0 < r["smallest_tv"] < 1
    for name in ("flashinfer",):
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

    slow = AuditSampler("slow-jit", "numpy, after a 1.5 s first call", slow_first_draw, lambda: None,
                          lambda: "test", per_draw_vector=False)  # fmt: skip
    cases = {k: v for k, v in audit_cases().items() if k == "normal-V1000"}
    row = _audit_one(slow, cases, alpha=1e-3, budget=1.0, seed=3)
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
    n = _shares(costs, budget)
    assert set(n) == set(costs)
    for k, v in expect.items():
        assert n[k] == v
    if budget:  # the expensive case receives the rest of the budget
        assert n["tail17-V32768"] == int((budget - A.MAX_DRAWS * 1e-9) / 1e-3)


def test_cases_are_float32_logits_with_their_tests():
    cases = audit_cases()
    assert list(cases) == list(AUDIT_CASES) + list(TARGET_CASES)
    for c in cases.values():
        finite = c.logits[np.isfinite(c.logits)]
        assert np.array_equal(finite.astype(np.float32).astype(np.float64), finite)
    assert cases["tail17-V32768"].tail_mask().sum() == 32767


# --------------------------------------------------------------------------------------------
# Truncation and speculative samplers: wired to the code they audit, on their targets
# --------------------------------------------------------------------------------------------


def test_torch_categorical_is_multinomial_with_replacement():
    """torch.distributions.Categorical.sample is torch.multinomial(probs, n, True): on the CPU it inherits the
    float32 running CDF and never draws the 20-nat tail (a planted failure: 0 of ~11 expected)."""
    case = audit_cases()["tail20-V262144"]
    s = next(s for s in A.SAMPLERS if s.name == "torch.Categorical")
    x = s.draw(case, N, 4103)
    assert x.shape == (N,) and x.dtype == np.int64
    if _torch_device().type == "cpu":
        assert int(case.tail_mask()[x].sum()) == 0
        assert "tail" in [m.name for m in run_suite(x, case, alpha=1e-3).failures()]


def test_transformers_warpers_keep_the_target_support():
    """The warpers, built from each case's target as generate builds them, keep exactly the target's tokens
    (deterministic: the kept set, not draws); a planted wrong parameter changes it."""
    pytest.importorskip("transformers", reason="transformers is the integrations/audit extra")
    import torch

    from verification.battery.libraries.truncation import hf_processors

    s = next(s for s in A.SAMPLERS if s.name == "transformers.warpers")
    cases = audit_cases()
    for name in s.cases:
        case = cases[name]
        scores = hf_processors(case)(torch.zeros((1, 1), dtype=torch.long), torch.tensor(case.logits[None]).float())
        kept = torch.isfinite(scores[0]).numpy()
        assert np.array_equal(kept, case.probs > 0), name
    x = s.draw(cases["topk20-ties-V1000"], 300, 1)
    assert x.shape == (300,) and (cases["topk20-ties-V1000"].probs[x] > 0).all()
    planted = hf_processors(cases["topk20-ties-V1000-low-index"])  # the same k: ties kept, 30 tokens, not 20
    z = torch.tensor(cases["topk20-ties-V1000"].logits[None]).float()
    kept = torch.isfinite(planted(torch.zeros((1, 1), dtype=torch.long), z))
    assert int(kept.sum()) == 30 != int((cases["topk20-ties-V1000-low-index"].probs > 0).sum())


@pytest.mark.parametrize("name", ["jax.top_k", "jax.top_p"])
def test_jax_truncation_draws_inside_the_target(name):
    pytest.importorskip("jax", reason="JAX on the CPU is the audit extra (pip install -e .[audit])")
    s = next(s for s in A.SAMPLERS if s.name == name)
    case = audit_cases()[next(iter(s.cases))]
    x = s.draw(case, 2000, 2)
    assert x.shape == (2000,) and x.dtype == np.int64
    assert (case.probs[x] > 0).all()
    assert len(np.unique(x)) >= min(20, int((case.probs > 0).sum()))  # not a constant or a few tokens


@interpreted_only
def test_vllm_transcription_equals_its_vectorized_twin():
    """The interpreted Triton kernels (the transcription) and the torch twin emit the same tokens from the
    same random numbers, request by request."""
    from verification.battery.libraries.speculative import _vllm_draw

    case = spec_cases()["spec-K2-V1000"]
    a = _vllm_draw(case, 24, 5, interpreted=True)
    b = _vllm_draw(case, 24, 5)
    assert a.shape == (24, 3) and np.array_equal(a, b)
    assert ((a == -1).sum(1) < 3).all() and len({tuple(r) for r in a}) > 12


def test_speculative_check_passes_vllm_and_fails_a_planted_defect():
    """vLLM's step passes (first token and count); the same step with the draft probabilities lost (zeros:
    every draft rejected, the first token still ~ p_1) fails the count test."""
    from verification.battery.libraries.speculative import rejection_sample_vectorized, speculative_inputs
    from verification.runners.audit import check_speculative, speculative_tests
    from verification.stats.family import Family

    case = spec_cases()["spec-K2-V1000"]
    s = next(s for s in A.SAMPLERS if s.name == "vllm.rejection_sample")
    x = s.draw(case, N, 4104)
    fam = Family(alpha=1e-3, size=speculative_tests(case), name="vllm")
    check_speculative(x, case, fam, "")
    assert fam.passed, fam.table()
    args = list(speculative_inputs(case, N, 4105))
    args[4] = args[4] * 0
    bad = rejection_sample_vectorized(*args).numpy().astype(np.int64)
    fam = Family(alpha=1e-3, size=speculative_tests(case), name="planted")
    check_speculative(bad, case, fam, "")
    assert [m.name for m in fam.failures()] == ["emitted"], fam.table()


def test_docs_tables_are_rendered_from_the_committed_rows():
    """docs/audit.md quotes the CPU run's rows (docs/audit-cpu.json) through the markdown writer."""
    from pathlib import Path

    from verification.outputs.markdown import audit_tables

    docs = Path(__file__).resolve().parents[1] / "docs"
    rows = json.loads((docs / "audit-cpu.json").read_text())
    assert "\n".join(audit_tables(rows)) in (docs / "audit.md").read_text()
    assert {r["sampler"] for r in rows} == {s.name for s in A.SAMPLERS}
