"""The main job's battery: declared logit shapes and temperatures, each with its exact target.

Every case holds float32-representable logits (stored as float64) so that its target law -- by default
``softmax(z / T)``, or a :class:`verification.targets.Target` (top-k, top-p, min-p, their chains) -- computed in
float64 is exactly the distribution a sampler fed those fp32 logits must draw from.  Cases declare which extra
tests apply: a tail set (tokens far below the top) for the tail-mass test, and flat support for the tie-bias test.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flashsampling.reference import softmax

from .targets import Target


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
        The law the sampler promises (:mod:`verification.targets`); ``None`` is the plain softmax.
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
    # run them (verification.variants.softmax_case).
    from .topk_cases import topk_cases

    cases.extend(topk_cases().values())
    if large:
        cases.append(Case("normal-V151936", _f32(rng.normal(0, 2.5, 151936)), 1.0, "LM-sized, N(0, 2.5^2)"))
        z = np.full(151936, -18.0)
        z[:8] = rng.normal(0, 0.5, 8)
        cases.append(
            Case("many-tail-V151936", _f32(z), 1.0, "8-token head, 151928-token tail 18 nats below", tail_gap=17.0)
        )
    return cases
