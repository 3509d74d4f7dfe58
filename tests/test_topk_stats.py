"""The fused top-k sampler draws from ``top_k(k, ties="low_index")``: the suite
(:func:`verification.runners.suite.run_suite`) on the top-k cases (:mod:`verification.battery.cases`) for its twin
and its interpreted kernels, and two planted defects failing at the n the planner gives for them.

Guarantee.  Each run is one Holm family at ``ALPHA = 1e-3`` (pearson, G, two DKWM CDF tests, categories): an exact
sampler fails a run with probability <= 1e-3, so this file's nine null runs fail a correct build with probability
<= 9e-3 (budget ``topk.stats.exact``); each test states the total variation it detects with power 0.99 at its n
(``min_detectable``, checked below to be below 0.05 for the twin at 200 000 draws).  The planted defects, sampled at
:func:`verification.planning.detection.plan_detection`'s n, each pass with probability <= 1 - 0.99 (budget
``topk.stats.planted``):

* ties kept by higher index on ``topk20-ties-V1000`` (TV 0.026; 5 tokens outside the target: caught as impossible
  draws at n = 176);
* the k-th token dropped, ``top_k(49)`` for ``top_k(50)`` on ``topk50-V1000`` (TV 0.0036, planned n = 4480 for the
  category test).

The kernels' draws equal the twin's bit for bit (``tests/test_topk.py``), so the twin's large n speaks for them; their
own runs here are small (interpreted launches).

Time: about 25 s on two cores (the twin 5 x 1 s, the kernels 4 x 4 s).
"""

from __future__ import annotations

import numpy as np
import pytest

from flashsampling.twin import sample_topk_twin_many
from verification.battery.aims import top_k
from verification.battery.cases import TIES_K, topk_cases
from verification.battery.variants import topk_variants
from verification.planning.budget import budget
from verification.planning.detection import plan_detection
from verification.runners.suite import run_suite

ALPHA = 1e-3
EXACT = budget("topk.stats.exact")
PLANTED = budget("topk.stats.planted")
CASES = topk_cases()
VARIANTS = {v.name: v for v in topk_variants()}
#: Interpreted kernel runs: (variant, case, n).
KERNEL_RUNS = [
    ("kernel-topk-logits", "topk20-ties-V1000", 64 * 64),
    ("kernel-topk-logits", "topk64-masked-V1000", 64 * 64),
    ("kernel-topk-logits", "topk2-greedy-ties-V256", 64 * 32),
    ("kernel-topk-matmul", "topk50-V1000-T0.7", 64 * 40),
]


def _failures(family) -> str:
    return "; ".join(f"{m.name}: p={m.adjusted_pvalue:.3g}" for m in family.members() if not m.passed)


@pytest.mark.parametrize("name", list(CASES))
def test_twin_passes(name):
    case = CASES[name]
    x = VARIANTS["twin-topk"].sample(case, EXACT.n, EXACT.seed)
    family = run_suite(x, case, alpha=ALPHA)
    assert family.passed, _failures(family)
    pearson = family.members()[0].result
    assert pearson.deviation == "total variation" and pearson.min_detectable < 0.05, pearson


@pytest.mark.parametrize("variant, name, n", KERNEL_RUNS, ids=[f"{v}-{c}" for v, c, _ in KERNEL_RUNS])
def test_kernel_passes(variant, name, n):
    case = CASES[name]
    assert VARIANTS[variant].applies(case)
    family = run_suite(VARIANTS[variant].sample(case, n, EXACT.seed), case, alpha=ALPHA)
    assert family.passed, _failures(family)


def _high_index_ties(case, n: int, seed: int) -> np.ndarray:
    """Top-k with ties kept by higher index: the twin on the reversed row, indices mapped back."""
    v = case.num_categories
    return v - 1 - sample_topk_twin_many(case.logits[::-1].astype(np.float32), TIES_K, case.temperature, seed=seed,
                                         num_samples=n)  # fmt: skip


def _kth_dropped(case, n: int, seed: int) -> np.ndarray:
    """Top-(k - 1) for top-k: the k-th token never drawn."""
    return sample_topk_twin_many(case.logits.astype(np.float32), 49, case.temperature, seed=seed, num_samples=n)


PLANTED_DEFECTS = {
    "ties-high-index": ("topk20-ties-V1000", top_k(TIES_K, ties="high_index"), _high_index_ties),
    "kth-dropped": ("topk50-V1000", top_k(49, ties="low_index"), _kth_dropped),
}


@pytest.mark.parametrize("defect", list(PLANTED_DEFECTS))
def test_planted_defect_fails_at_its_planned_n(defect):
    name, law_target, sampler = PLANTED_DEFECTS[defect]
    case = CASES[name]
    law = law_target.probs(case.logits[None, :], case.temperature)[0]
    n = int(plan_detection(case, law, alpha=ALPHA, power=PLANTED.power).n_min)
    assert n <= PLANTED.n
    family = run_suite(sampler(case, n, PLANTED.seed), case, alpha=ALPHA)
    assert not family.passed, (defect, n)
