"""proofs/tv_certificate.md: Lemma 1 on random laws, the coverage table's planted defects caught, and the recorded
numbers current (the table is the rendering of ``proofs/results/tv_certificate.json``, which a fresh run reproduces:
fixed seeds)."""

from __future__ import annotations

from proofs import _generated as gen
from proofs import check_tv_certificate as chk


def test_pooling_inequality():
    assert chk.pooling_inequality(500) <= 1e-12


def test_recorded_results_are_current_and_pass():
    rec = gen.load("tv_certificate")
    assert all(chk.verdicts(rec).values())
    assert gen.same(gen.roundtrip(chk.collect()), rec, rel=1e-9)
