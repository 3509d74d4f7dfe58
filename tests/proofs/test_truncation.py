"""proofs/truncation.md: the lemmas' checks, each shown failing on its planted defect, and the recorded numbers
current (the table in truncation.md is the rendering of ``proofs/results/truncation.json``, whose deterministic parts
a fresh run reproduces).  About 15 s (the shipped sampler interpreted on four rows per setting)."""

from __future__ import annotations

import pytest

import flashsampling
from proofs import _generated as gen
from proofs import check_truncation as chk

#: Checks that run the kernels on CPU tensors through the interpreter (bit for bit with the twins); on a GPU host
#: the kernels run compiled and refuse CPU tensors: the compiled kernels' checks are ``proofs/gpu_checks.py``.
interpreted_only = pytest.mark.skipif(
    not flashsampling.INTERPRET, reason="CPU tensors through the interpreted kernels (GPU: proofs/gpu_checks.py)"
)


def test_every_filter_keeps_an_upper_set_and_high_index_ties_do_not():
    assert not any(chk.upper_sets(30).values())
    assert sum(chk.upper_sets(30, planted=True).values()) > 0


def test_lists_hold_every_token_before_r():
    assert chk.lists_cover(60)["unlisted_before_R"] == 0
    assert chk.lists_cover(60, planted=True)["unlisted_before_R"] > 0


def test_masses_within_their_bound_and_a_smaller_bound_fails():
    res = chk.mass_error(6)
    assert res["worst_over_bound"] <= 1.0 < res["worst_over_planted_bound"]


def test_min_p_margin():
    assert chk.min_p_margin(1000)["wrong"] == 0
    assert chk.min_p_margin(4000, margin=0.0)["wrong"] > 0


@interpreted_only
def test_shipped_sampler_equals_the_law_and_fails_without_its_fallback():
    assert chk.shipped(4)["mismatches"] == 0
    assert chk.shipped(4, planted=True)["mismatches"] > 0


@interpreted_only
def test_recorded_results_are_current():
    rec = gen.load("truncation")
    assert all(chk.verdicts(rec).values()) and rec["shipped_planted"]["mismatches"] > 0
    fresh = gen.roundtrip({k: v for k, v in chk.collect(full=True).items() if k != "shipped"})
    assert gen.same(fresh, {k: v for k, v in rec.items() if k in fresh}, rel=1e-9)
    assert chk.md_blocks() == {k: v.rstrip("\n") + "\n" for k, v in chk.render(rec).items()}
