"""The one-sample total-variation certificate (verification.stats.tv_certificate, proofs/tv_certificate.md): its
coverage measured on planted samplers of known total variation (NumPy multinomial counts, 2000 seeds at alpha = 0.05,
a one-sided exact binomial test at level 1e-6), the coverage check failing on a halved bound and on the plug-in
estimate, its tightness on exact samplers, monotone in n; and on check_sampler's reports."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from proofs import check_tv_certificate as chk
from verification import check_sampler
from verification.battery import examples
from verification.stats.tv_certificate import (
    certificate_singletons,
    expected_tv_certificate,
    required_certificate_samples,
    tv_certificate,
    tv_certificates,
)

ALPHA, REPS = 0.05, 2000


@pytest.mark.parametrize("kind, e", chk.CASES, ids=[f"{k}-{e:g}" for k, e in chk.CASES])
@pytest.mark.parametrize("n", [2_000, 20_000])
def test_coverage_on_planted_samplers(kind, e, n):
    p = chk.target()
    cov, tail, _, tv = chk.coverage(p, chk.planted(p, kind, e), n, REPS, alpha=ALPHA, seed=7)
    assert chk.coverage_holds(cov, REPS, ALPHA), (kind, e, n, cov, tv)
    assert chk.coverage_holds(tail, REPS, ALPHA), (kind, e, n, tail)


@pytest.mark.parametrize("defect", [{"shrink": 0.5}, {"without_deviation": True}], ids=["halved", "plug-in"])
def test_the_coverage_check_fails_a_defective_bound(defect):
    p = chk.target()
    cov = chk.coverage(p, chk.planted(p, *chk.DEFECT_CASE), 20_000, REPS, alpha=ALPHA, seed=7, **defect)[0]
    assert not chk.coverage_holds(cov, REPS, ALPHA), cov


def test_coverage_holds_is_the_one_sided_binomial_test():
    assert chk.coverage_holds(0.95, 2000, 0.05) and chk.coverage_holds(1.0, 2000, 0.05)
    assert not chk.coverage_holds(0.90, 2000, 0.05)


@pytest.mark.parametrize("v, n", [(50, 20_000), (1000, 2_000_000)])
def test_tight_on_exact_samplers(v, n):
    """An exact sampler's bound is at most 1.5 sqrt(k / n) (k the cells) and within 20 % of its expectation."""
    p = chk.target(v)
    keep = certificate_singletons(p, n, alpha=1e-3)
    k = int(keep.sum()) + 2
    counts = np.random.default_rng(3).multinomial(n, p, size=20)
    bound = tv_certificates(counts, np.zeros(20), p, keep, alpha=1e-3)[0]
    assert bound.max() <= 1.5 * math.sqrt(k / n)
    assert np.all(np.abs(bound / expected_tv_certificate(p, n, alpha=1e-3) - 1) < 0.2)


def test_monotone_in_n():
    p = chk.target(200)
    ns = [1_000, 10_000, 100_000, 1_000_000]
    expected = [expected_tv_certificate(p, n, alpha=1e-3) for n in ns]
    assert all(a > b for a, b in zip(expected, expected[1:]))
    rng = np.random.default_rng(5)
    means = [tv_certificates(rng.multinomial(n, p, size=50), np.zeros(50), p,
                             certificate_singletons(p, n, alpha=1e-3), alpha=1e-3)[0].mean() for n in ns]  # fmt: skip
    assert all(a > b for a, b in zip(means, means[1:]))


def test_planning_twin_against_itself():
    p = chk.target(200)
    n = required_certificate_samples(p, 0.02, alpha=1e-3)
    assert expected_tv_certificate(p, n, alpha=1e-3) <= 0.02 < expected_tv_certificate(p, n - 1, alpha=1e-3)


def test_out_of_range_draws_count_in_full():
    p = np.full(10, 0.1)
    c = tv_certificate(np.concatenate([np.arange(10).repeat(900), np.full(1000, 10)]), p, alpha=1e-3)
    assert c.bound >= 0.1  # 10 % of the draws are outside [0, V): TV >= 0.1 is certain to hold
    assert c.observed == pytest.approx(0.1)


@pytest.mark.parametrize(
    "kwargs, match",
    [({"alpha": 0.0}, "alpha"), ({"singletons": np.ones(3, dtype=bool)}, "singletons")],
    ids=["tv_certificate(alpha=0)", "tv_certificate(singletons=wrong shape)"],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        tv_certificate(np.zeros(10, dtype=int), np.full(4, 0.25), **kwargs)


# --------------------------------------------------------------------------------------------
# On check_sampler's reports
# --------------------------------------------------------------------------------------------

LOGITS = np.random.default_rng(0).normal(0, 2, (2, 100))


def test_exact_report_states_the_certificate_everywhere():
    r = check_sampler(examples.inverse_cdf, LOGITS, tv=0.05)
    assert r.passed and isinstance(r.tv_upper_bound, float) and len(r.tv_upper_bounds) == 2
    assert r.tv_upper_bound == max(r.tv_upper_bounds) < 0.1
    assert r.diagnoses == []
    doc = json.loads(r.to_json())
    assert doc["tv_upper_bound"] == r.tv_upper_bound and doc["tail_bounds"] and doc["certificate"]
    for text in (r.to_markdown(), repr(r)):
        assert f"total variation <= {r.tv_upper_bound:.3g} from the target" in text
        assert "tail ruled out" in text and "Diagnosis" not in text and "diagnosis" not in text


def test_underpowered_run_states_draws_and_seconds():
    """At V = 1000 the draws planned for the tests at tv = 0.1 leave the certificate (a thousand cells) above it."""
    r = check_sampler(examples.inverse_cdf, np.random.default_rng(1).normal(0, 2, (1, 1000)), tv=0.1)
    s = r.shortfall
    assert s is not None and s["tv"] == 0.1 and r.tv_upper_bound > 0.1
    assert s["n_needed"] > r.n and s["more_draws"] == s["n_needed"] - r.n
    # at the sampler's measured rate in its draws calls (every row's tokens per second)
    assert s["seconds_per_draw"] == pytest.approx(r.shape[0] / r.draws_per_s)
    assert s["seconds_needed"] == pytest.approx(s["n_needed"] * s["seconds_per_draw"])
    assert "**underpowered** for tv = 0.1:" in r.to_markdown() and "underpowered for tv = 0.1:" in repr(r)


def test_docs_example_is_the_scripts_output():
    """docs/verify-your-sampler.md's certificate block is scripts/certificate_example.py's output (seconds aside)."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "certificate_example.py"
    spec = importlib.util.spec_from_file_location("certificate_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    have = mod.block(mod.PAGE.read_text())
    assert mod.SECONDS.sub("_ s", have) == mod.SECONDS.sub("_ s", mod.render())
