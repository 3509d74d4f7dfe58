"""Cases of the fused top-k sampler: logits whose target is ``top_k(k, ties="low_index")``.

Each case holds float32-representable logits (float64 storage) and the law of
:func:`flashsampling.sample_from_logits` with ``top_k=k`` (:mod:`flashsampling.topk`): the ``k`` largest logits,
ties at the cut kept by lower index, then ``softmax(z / T)`` on them.  The cases are where a top-k sampler goes
wrong: a cut inside a group of tied logits (which tied tokens stay), a greedy row with more tied maxima than ``k``,
fewer finite tokens than ``k``, and a temperature.  :func:`verification.cases.battery` includes them: the main job
runs the control and the top-k variants of :mod:`verification.variants` on them (the plain variants refuse them);
``tests/test_topk_stats.py`` runs the same variants with :func:`verification.suite.run_suite`.
"""

from __future__ import annotations

import numpy as np

from .cases import Case
from .targets import top_k

__all__ = ["TIES_K", "topk_cases"]

#: ``k`` of the tie case: the cut falls after 5 of a group of 15 tied logits.
TIES_K = 20


def _f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).astype(np.float64)


def topk_cases() -> dict[str, Case]:
    """The top-k cases by name (float32 logits, ``target=top_k(k, ties="low_index")``)."""
    rng = np.random.default_rng(20261207)
    c: dict[str, Case] = {}

    def add(name: str, z, temperature: float, k: int, description: str) -> None:
        c[name] = Case(name, _f32(z), temperature, description, target=top_k(k, ties="low_index"))

    add("topk50-V1000", rng.normal(0, 2, 1000), 1.0, 50, "N(0, 2^2) logits, top 50 (74% of the softmax)")
    add("topk50-V1000-T0.7", rng.normal(0, 2, 1000), 0.7, 50,
        "N(0, 2^2) logits at temperature 0.7, top 50 (75% of the softmax)")  # fmt: skip
    # 15 head tokens at 1.25 .. 4.75, a group of 15 tied at 1.0, the rest on a 0.25 grid below 0.75: the 20th
    # logit is in the tied group, and ties="low_index" keeps its 5 members of lowest index.
    zq = np.minimum(np.round(rng.normal(-2, 1.5, 1000) * 4) / 4, 0.75)
    where = rng.choice(1000, 30, replace=False)
    zq[where[:15]] = 1.0 + 0.25 * rng.permutation(np.arange(1, 16))
    zq[where[15:]] = 1.0
    add("topk20-ties-V1000", zq, 1.0, TIES_K,
        "15 logits above a group of 15 tied at 1.0: top 20 keeps 5 of them (60% of the softmax)")  # fmt: skip
    z = np.full(256, -1.0)
    z[[3, 40, 41, 200]] = 2.0
    add("topk2-greedy-ties-V256", z, 0.0, 2, "greedy, 4 tied maxima, top 2: the 2 of lowest index, 1/2 each")
    z = rng.normal(0, 2, 1000)
    z[rng.random(1000) < 0.97] = -np.inf
    add("topk64-masked-V1000", z, 1.0, 64, "97% of tokens masked: 27 finite tokens, fewer than k = 64")
    return c
