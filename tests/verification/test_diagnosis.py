"""A failing check names, in report.md, report.json, repr and the assertion message, each failing test's worst tokens
and the likely mechanism (verification.runners.diagnosis); the plots name the actual target and mark failing tokens
beyond the plotted head.  The planted defects: logits rounded to bfloat16, a seed truncated to 32 bits, a tie rule,
a temperature error."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import torch

from verification import check_sampler
from verification.battery import examples
from verification.battery.aims import top_p
from verification.battery.cases import Case
from verification.outputs import plots
from verification.pytest_plugin import SamplerChecker

#: 64 logits near 20, where bfloat16's spacing is 0.125: rounding them moves the law by a few percent.
HIGH = 20 + np.random.default_rng(0).normal(0, 2, (1, 64))


def bf16_logits(logits, num_samples, seed):
    """An exact inverse-CDF sampler of the logits rounded to bfloat16 (a low-precision LM head)."""
    return examples.inverse_cdf(logits.to(torch.bfloat16).float(), num_samples, seed)


def first_index_ties(logits, num_samples, seed):
    """Exact on distinct logits; among tied tokens the lowest index takes the group's whole mass."""
    z = logits.double().numpy()
    out = np.asarray(examples.inverse_cdf(logits, num_samples, seed))
    for b in range(z.shape[0]):
        first = np.unique(z[b], return_index=True)
        lowest = first[1][np.searchsorted(first[0], z[b])]
        out[b] = lowest[out[b]]
    return out


@pytest.fixture(scope="module")
def bf16_report():
    return check_sampler(bf16_logits, HIGH, tv=0.05)


def test_bf16_report_names_tokens_and_mechanism_everywhere(bf16_report):
    r = bf16_report
    assert not r.passed and r.diagnoses
    d = r.diagnoses[0]
    assert "bfloat16" in d["mechanism"] and len(d["tokens"]) == 5
    t = d["tokens"][0]
    assert set(t) == {"token", "observed", "expected", "logit", "probability", "residual"}
    assert t["logit"] == pytest.approx(float(np.float32(HIGH[0, t["token"]])))
    doc = json.loads(r.to_json())
    assert doc["diagnoses"][0]["tokens"][0]["token"] == t["token"] and "bfloat16" in doc["diagnoses"][0]["mechanism"]
    md = r.to_markdown()
    assert "## Diagnosis" in md and f"| {t['token']} | {t['observed']:,} |" in md and "bfloat16" in md
    assert f"token {t['token']}: observed {t['observed']}" in repr(r) and "bfloat16" in repr(r)


def test_assertion_message_carries_the_diagnosis():
    checker = SamplerChecker(1e-3, [])
    with pytest.raises(AssertionError) as e:
        checker.assert_sampler(bf16_logits, HIGH, tv=0.05, seed=0)
    msg = str(e.value)
    assert "## Diagnosis" in msg and "bfloat16" in msg and "certified" in msg


def test_seed_truncation_is_named():
    r = check_sampler(examples.seed_mod_2_32, np.random.default_rng(2).normal(0, 2, (1, 32)), tv=0.05, seed_bits=64)
    (d,) = [d for d in r.diagnoses if d["test"] == "seed bits"]
    assert "the seed truncated to 32 bits" in d["mechanism"] and d["tokens"] == []
    assert "truncated to 32 bits" in r.to_markdown() and "truncated to 32 bits" in repr(r)


def test_tie_rule_is_named():
    z = np.zeros((1, 16))
    z[0, 8:] = 1.0
    r = check_sampler(first_index_ties, z, tv=0.05)
    (d,) = [d for d in r.diagnoses if d["test"].endswith("ties")]
    assert "over-drawn lowest indices in tied groups" in d["mechanism"]
    assert d["tokens"][0]["token"] in (0, 8)


def test_temperature_error_is_named():
    r = check_sampler(examples.temperature_error, np.random.default_rng(3).normal(0, 2, (1, 100)), tv=0.03)
    assert any("temperature 1.0" in d["mechanism"] for d in r.diagnoses), [d["mechanism"] for d in r.diagnoses]


def test_exact_report_has_no_diagnosis():
    r = check_sampler(examples.inverse_cdf, HIGH, tv=0.05)
    assert r.passed and r.diagnoses == [] and "Diagnosis" not in r.to_markdown() and "diagnosis" not in repr(r)


def _figure(monkeypatch, case, marked):
    plt = plots.pyplot()
    figs = []
    monkeypatch.setattr(plt, "close", figs.append)
    h = np.bincount(np.arange(case.num_categories), minlength=case.num_categories)
    plots.case_figure(plt, case, [("s", h, int(h.sum()))], io.BytesIO(), marked=marked)
    fig = figs[0]
    legends = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    return legends, [t.get_text() for ax in fig.axes for t in ax.texts], [ax.get_title() for ax in fig.axes]


def test_plots_name_the_target_and_mark_tokens_beyond_the_head(monkeypatch):
    z = np.random.default_rng(4).normal(0, 2, 200).astype(np.float32).astype(np.float64)
    case = Case("p", z, 1.0, "top-p", target=top_p(0.9))
    least = int(np.argsort(z)[0])
    legends, texts, titles = _figure(monkeypatch, case, [least])
    assert "exact top_p(p=0.9" in " ".join(legends) and "exact softmax" not in " ".join(legends + titles)
    assert any(f"token {least} " in t for t in texts)
    legends, _, _ = _figure(monkeypatch, Case("s", z, 1.0, "softmax"), [])
    assert "exact softmax" in legends
