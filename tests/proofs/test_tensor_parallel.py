"""proofs/tensor_parallel.md: the shipped sampler over gloo (spawned processes, world sizes 2 and 3, uneven shards,
one empty, permuted ranks), every planted defect caught, and a hang turned into a failure by the timeout."""

from __future__ import annotations

import pytest

import flashsampling
from proofs import check_tensor_parallel as chk

#: The ranks and the single-device references run the kernels on CPU tensors through the interpreter; on a GPU host
#: the kernels run compiled and refuse CPU tensors (the TP tests on CUDA tensors: tests/test_distributed*.py).
pytestmark = pytest.mark.skipif(not flashsampling.INTERPRET, reason="CPU tensors through the interpreted kernels")


@pytest.fixture(scope="module")
def worlds():
    return chk.check_worlds(worlds=(2, 3), planted_world=3)


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_agree_and_equal_the_single_device_functions(worlds, world):
    checks = worlds[world]["checks"]
    assert checks and all(checks.values()), checks


def test_every_planted_defect_is_caught(worlds):
    caught = worlds[3]["planted_caught"]
    assert set(caught) == set(chk.PLANTED) and all(caught.values()), caught


def test_a_hang_fails_by_timeout():
    """Rank 1 of a world of 2 never joins: the check raises instead of waiting for gloo's own timeout."""
    with pytest.raises(TimeoutError):
        chk.run_world(2, planted=("rank 1 never joins",), timeout=10)


def test_local_keying_closed_form():
    p, p0 = chk.local_keying_counterexample()
    assert p == 1.0 and abs(p0 - 0.7311) < 1e-4


def test_recorded_results_are_current(worlds):
    from proofs import _generated as gen

    rec = gen.load("tensor_parallel")["worlds"]
    assert gen.same(gen.roundtrip({str(w): v for w, v in worlds.items()}), rec)
