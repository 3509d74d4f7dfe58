"""The main job's battery: declared logit shapes and temperatures, each with its exact target.

Every case holds float32-representable logits (stored as float64) so that its target law -- by default
``softmax(z / T)``, or a :class:`verification.battery.aims.Target` (top-k, top-p, min-p, their chains) -- computed
in float64 is exactly the distribution a sampler fed those fp32 logits must draw from.  Cases declare which extra
tests apply: a tail set (tokens far below the top) for the tail-mass test, and flat support for the tie-bias test.

The fused top-k sampler's cases (:func:`topk_cases`) hold logits whose target is ``top_k(k, ties="low_index")``, the
law of :func:`flashsampling.sample_from_logits` with ``top_k=k`` (:mod:`flashsampling.topk`): the ``k`` largest
logits, ties at the cut kept by lower index, then ``softmax(z / T)`` on them.  They are where a top-k sampler goes
wrong: a cut inside a group of tied logits (which tied tokens stay), a greedy row with more tied maxima than ``k``,
fewer finite tokens than ``k``, and a temperature.  :func:`battery` includes them: the main job runs the control and
the top-k variants of :mod:`verification.battery.variants` on them (the plain variants refuse them);
``tests/test_topk_stats.py`` runs the same variants with :func:`verification.runners.suite.run_suite`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flashsampling.reference import softmax

from .aims import Target, top_k


@dataclass(frozen=True)
class Case:
    """One logits vector and temperature of the battery.

    Attributes
    ----------
    name : str
    logits : numpy.ndarray, float64, shape (V,)
        Float32-representable values; ``-inf`` masks a token.
    temperature : float
    description : str
    tail_gap : float or None
        If set, the tail-mass test runs on the tokens whose ``z / T`` lies at least this many nats
        below the top.
    flat : bool
        If true, the tie-bias test runs (all finite logits equal).
    target : Target or None
        The law the sampler promises (:mod:`verification.battery.aims`); ``None`` is the plain softmax.
    """

    name: str
    logits: np.ndarray
    temperature: float
    description: str
    tail_gap: float | None = None
    flat: bool = False
    target: Target | None = None

    @property
    def num_categories(self) -> int:
        return int(self.logits.shape[0])

    @property
    def probs(self) -> np.ndarray:
        """The target law, float64 ``(V,)``: ``softmax(z / T)``, or ``target.probs`` of the logits."""
        if self.target is None:
            return softmax(self.logits, self.temperature)
        return self.target.probs(self.logits[None, :], self.temperature)[0]

    def tail_mask(self) -> np.ndarray:
        s = self.logits / self.temperature
        return s <= s.max() - (self.tail_gap or np.inf)


def _f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).astype(np.float64)


def battery(large: bool = False) -> list[Case]:
    """The declared battery; ``large`` adds LM-sized vocabularies (V = 151936) for GPU runs."""
    rng = np.random.default_rng(20261129)
    cases = [
        Case("normal-V1000", _f32(rng.normal(0, 2, 1000)), 1.0, "N(0, 2^2) logits"),
        Case("normal-V1000-T0.6", _f32(rng.normal(0, 2, 1000)), 0.6, "N(0, 2^2) logits, temperature 0.6"),
        Case("tiny-V3", _f32([0.0, -1.0, -2.5]), 1.0, "three tokens"),
        Case("flat-V1024", np.zeros(1024), 1.0, "all logits equal: tie handling", flat=True),
    ]
    z = rng.normal(0, 1, 4096)
    z[17] = 9.0
    cases.append(Case("peaked-V4096", _f32(z), 1.0, "one token holds ~2/3 of the mass"))
    z = rng.normal(0, 2, 1000)
    z[rng.random(1000) < 0.3] = -np.inf
    cases.append(Case("masked-V1000", _f32(z), 1.0, "30% of tokens masked with -inf"))
    z = np.full(4096, -12.0)
    z[:8] = rng.normal(0, 0.5, 8)
    cases.append(Case("many-tail-V4096", _f32(z), 1.0, "8-token head, flat tail 12 nats below", tail_gap=11.0))
    cases.append(Case("wide-range-V2000", _f32(rng.uniform(-60, 0, 2000)), 1.0, "logits spread over 60 nats"))
    cases.append(Case("hot-V1000-T2", _f32(rng.normal(0, 3, 1000)), 2.0, "temperature 2"))
    # The fused top-k sampler's cases (target top_k(k, ties="low_index")): only the control and the top-k variants
    # run them (verification.battery.variants.softmax_case).
    cases.extend(topk_cases().values())
    if large:
        cases.append(Case("normal-V151936", _f32(rng.normal(0, 2.5, 151936)), 1.0, "LM-sized, N(0, 2.5^2)"))
        z = np.full(151936, -18.0)
        z[:8] = rng.normal(0, 0.5, 8)
        cases.append(
            Case("many-tail-V151936", _f32(z), 1.0, "8-token head, 151928-token tail 18 nats below", tail_gap=17.0)
        )
    return cases


# ----------------------------------------------------------------------------------------------------
# The fused top-k sampler's cases
# ----------------------------------------------------------------------------------------------------

#: ``k`` of the tie case: the cut falls after 5 of a group of 15 tied logits.
TIES_K = 20


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
