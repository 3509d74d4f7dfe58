"""The audit's cases: softmax cases that probe far tails and masks, truncation cases, a speculative case.

=========================  ====================================================================
cases                      for
=========================  ====================================================================
:data:`AUDIT_CASES`        the softmax samplers (a sampler's time is split by these weights)
:data:`TARGET_CASES`       the truncation samplers: each case's law is a ``verification.battery.aims``
                           target, in the convention of the library audited
:func:`spec_cases`         the speculative rejection step (:class:`SpecCase`)
=========================  ====================================================================

Logits are float32-representable; each target is computed in float64 from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from flashsampling.reference import softmax
from flashsampling.targets import ChainLaw, speculative_chain_law

from ..aims import chain, min_p, top_k, top_p
from ..cases import Case
from ..mutants.catalogue import TIES_K, mutant_cases

__all__ = ["AUDIT_CASES", "TARGET_CASES", "SpecCase", "audit_cases", "spec_cases"]

#: Softmax cases of the audit and their share of a sampler's time.
AUDIT_CASES = {
    "normal-V1000": 0.10,
    "tail17-V32768": 0.30,
    "tail20-V262144": 0.15,
    "grammar-V32768": 0.35,
    "flat-V1024": 0.10,
}

#: Truncation cases (equal shares); the first is the one whose detectable TV a row reports.
TARGET_CASES = (
    "chain-V1000-T0.7",
    "topp0.9-V1000-T0.7",
    "topk20-ties-V1000",
    "topk20-ties-V1000-low-index",
    "minp-boundary-V1000",
)


@lru_cache(maxsize=1)
def audit_cases() -> dict[str, Case]:
    """Every token-sampler case of the audit by name (softmax cases first, then the truncation cases)."""
    base = mutant_cases()
    out = {k: base[k] for k in ("normal-V1000", "tail20-V262144", "flat-V1024")}
    z = np.full(32768, -17.0)
    z[0] = 0.0
    out["tail17-V32768"] = Case("tail17-V32768", z, 1.0, "one token at 0, 32767 tokens 17 nats below (p_T=1.4e-3)",
                                tail_gap=16.0)  # fmt: skip
    z = np.full(32768, -np.inf)
    z[:64] = base["grammar-V262144"].logits[:64]
    out["grammar-V32768"] = Case("grammar-V32768", z, 1.0, "grammar mask: 64 allowed tokens, 32704 at -inf")
    cases = {k: out[k] for k in AUDIT_CASES}
    zn = base["topp0.9-V1000"].logits
    cases["chain-V1000-T0.7"] = Case("chain-V1000-T0.7", zn, 0.7, "N(0, 2^2) logits, T 0.7, top-k 50, top-p 0.9, "
                                     "min-p 0.05 (transformers order)",
                                     target=chain(top_k(50), top_p(0.9), min_p(0.05)))  # fmt: skip
    cases["topp0.9-V1000-T0.7"] = base["topp0.9-V1000-T0.7"]
    ties = base["topk20-ties-V1000"]
    cases["topk20-ties-V1000"] = ties
    cases["topk20-ties-V1000-low-index"] = Case("topk20-ties-V1000-low-index", ties.logits, 1.0,
                                                ties.description + "; exactly 20 kept, lower index first",
                                                target=top_k(TIES_K, ties="low_index"))  # fmt: skip
    cases["minp-boundary-V1000"] = base["minp-boundary-V1000"]
    return cases


@dataclass(frozen=True, eq=False)
class SpecCase:
    """A speculative step with ``K`` draft tokens: target logits ``(K + 1, V)``, draft probabilities ``(K, V)``.

    Attributes
    ----------
    name, description : str
    logits : numpy.ndarray, float64 (K + 1, V)
        Float32-representable target logits; ``p_i = softmax(logits[i] / T)``.
    temperature : float
    draft : numpy.ndarray, float64 (K, V)
        The draft probabilities ``q_i`` (float32-representable, summing to 1 in float64).
    """

    name: str
    description: str
    logits: np.ndarray
    temperature: float
    draft: np.ndarray

    @property
    def num_draft_tokens(self) -> int:
        return int(self.draft.shape[0])

    @property
    def num_categories(self) -> int:
        return int(self.logits.shape[1])

    @property
    def target_probs(self) -> np.ndarray:
        """``p``, float64 ``(K + 1, V)``."""
        return softmax(self.logits, self.temperature)

    @property
    def law(self) -> ChainLaw:
        """The exact law of the step's output (:func:`flashsampling.targets.speculative_chain_law`)."""
        return speculative_chain_law(self.target_probs, self.draft)

    @property
    def first(self) -> Case:
        """The first emitted token's case: its law is ``p_1`` (a reached position emits ``p_i``)."""
        return Case(f"{self.name}:first", self.logits[0], self.temperature, "first emitted token: p_1")


@lru_cache(maxsize=1)
def spec_cases() -> dict[str, SpecCase]:
    """The speculative cases: ``K = 2``, ``V = 1000``, target N(0, 2^2), draft = target logits + N(0, 1)."""
    rng = np.random.default_rng(20261207)
    z = np.asarray(rng.normal(0, 2, (3, 1000)), dtype=np.float32).astype(np.float64)
    zd = np.asarray(z[:2] + rng.normal(0, 1, (2, 1000)), dtype=np.float32)
    e = np.exp(zd.astype(np.float64) - zd.max(axis=1, keepdims=True))
    q = (e / e.sum(axis=1, keepdims=True)).astype(np.float32).astype(np.float64)
    q /= q.sum(axis=1, keepdims=True)
    c = SpecCase("spec-K2-V1000", "K = 2 drafts; target N(0, 2^2) logits per position, draft logits the "
                 "target's plus N(0, 1)", z, 1.0, q)  # fmt: skip
    return {c.name: c}
