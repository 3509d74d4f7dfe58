"""proofs/tensor_parallel.md: pathwise replay over shardings, factorized rule, counterexamples."""

from __future__ import annotations

from proofs import check_tensor_parallel as chk


def test_pathwise_tp_replays_single_device():
    assert chk.pathwise_replay(v=300, rows=4, samples=3, worlds=(1, 2, 4), seed=31) == 0


def test_local_keying_is_wrong():
    p, p0 = chk.local_keying_counterexample()
    assert p == 1.0 and abs(p0 - 0.7311) < 1e-4
    assert chk.local_keying_twin(n=500) == 1.0


def test_factorized_tp_law_and_agreement():
    fz = chk.factorized_twin(n=12_000, seed=8)
    assert fz["chi2_p"] > 1e-3
    assert fz["ranks_agree"] == 1.0
    assert fz["unshared_seed_disagree"] > 0.1


def test_factorized_tp_exact():
    assert chk.factorized_exact(n_trials=60, seed=17) == 0
