"""Speculative-decoding mutants: one accept/reject step whose replacement law is wrong.

The sampler receives the target logits ``z`` (target ``p = softmax(z / T)``), builds the draft
probabilities ``q`` with :func:`draft_probs`, draws the draft token ``x ~ q``, accepts it when
``u q(x) < p(x)`` (``u ~ U[0, 1)`` in float64, so with probability ``min(1, p(x) / q(x))``) and
otherwise emits a replacement drawn from a residual law.  The first emitted token must follow ``p``
exactly (``docs/targets.md``, *Speculative decoding*); with the exact residual
``r = max(p - q, 0) / sum(max(p - q, 0))`` it does (the control).  The mutants:

==================  =====================================================================
``residual``        replacement
==================  =====================================================================
``"exact"``         inverse CDF of ``r`` (control)
``"unnormalized"``  inverse CDF over ``cumsum(max(p - q, 0))`` with ``u ~ U[0, 1)``, the sum
                    never divided out: ``u`` beyond the residual mass ``1 - beta`` falls past
                    the last entry and is clamped to token ``V - 1``
``"float16"``       ``max(p - q, 0)`` and its normalization in float16 (``p``, ``q`` rounded to
                    float16, the sum accumulated in float32 and rounded, as torch's CPU
                    ``half`` sum): tail residuals land on the subnormal grid ``2**-24``
``"target"``        the replacement drawn from ``p`` itself instead of the residual
==================  =====================================================================

The law of each is :func:`flashsampling.targets.speculative_step_law` with ``residual=`` the law the
replacement is actually drawn from (:func:`residual_of`): ``L = q a + (1 - beta) r'``.
"""

from __future__ import annotations

import numpy as np

from flashsampling.reference import sample_inverse_cdf, softmax
from flashsampling.targets import speculative_step_law

from ..cases import Case
from .samplers import Sampler

__all__ = ["RESIDUALS", "DRAFT_BLOCK", "draft_probs", "law", "residual_of", "sampler"]

#: The replacement laws a step may use (module docstring).
RESIDUALS = ("exact", "unnormalized", "float16", "target")
#: The draft spreads half its mass uniformly over tokens ``1 .. max(1, V // DRAFT_BLOCK)``.
DRAFT_BLOCK = 32


def draft_probs(logits) -> np.ndarray:
    """The draft ``q``: half on the target's top token (the first maximum of ``z``), half spread
    uniformly over tokens ``1 .. max(1, V // 32)``: an overconfident draft that also proposes tokens the
    target deems unlikely."""
    z = np.asarray(logits, dtype=np.float64)
    v = z.size
    q = np.zeros(v)
    q[int(np.argmax(z))] += 0.5
    block = max(1, v // DRAFT_BLOCK)
    q[1 : 1 + block] += 0.5 / min(block, v - 1) if v > 1 else 0.0
    if v == 1:
        q[0] = 1.0
    return q / q.sum()


def residual_of(p: np.ndarray, q: np.ndarray, kind: str) -> np.ndarray:
    """The law the replacement token is drawn from, float64 ``(V,)`` summing to 1 (module docstring)."""
    excess = np.maximum(p - q, 0.0)
    if kind == "exact":
        return excess / excess.sum()
    if kind == "unnormalized":
        r = excess.copy()
        r[-1] += 1.0 - excess.sum()  # u >= sum(excess) runs past the last entry: clamped to V - 1
        return r
    if kind == "float16":
        e16 = np.maximum(p.astype(np.float16) - q.astype(np.float16), np.float16(0))
        total = np.float16(e16.astype(np.float32).sum(dtype=np.float32))
        r16 = (e16 / total).astype(np.float64)
        return r16 / r16.sum()  # the draw (torch.multinomial) normalizes what it is given
    if kind == "target":
        return p.copy()
    raise ValueError(f"residual must be one of {RESIDUALS}, got residual={kind!r}")


def sampler(residual: str = "exact") -> Sampler:
    """The one-step speculative sampler with replacement law ``residual`` (catalogue signature): returns
    the first emitted token of each of ``n`` independent steps."""
    if residual not in RESIDUALS:
        raise ValueError(f"residual must be one of {RESIDUALS}, got residual={residual!r}")

    def sample(logits, temperature: float, n: int, seed: int) -> np.ndarray:
        z = np.asarray(logits, dtype=np.float64)
        p = softmax(z, temperature)
        q = draft_probs(z)
        rng = np.random.default_rng(seed)
        x = sample_inverse_cdf(q, n, rng)
        accept = rng.random(n) * q[x] < p[x]
        if residual == "unnormalized":
            cdf = np.cumsum(np.maximum(p - q, 0.0))
            y = np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), z.size - 1)
        else:
            y = sample_inverse_cdf(residual_of(p, q, residual), n, rng)
        return np.where(accept, x, y).astype(np.int64)

    sample.__name__ = f"speculative_step_{residual}"
    return sample


def law(residual: str):
    """``law(case) -> L``: the exact law of the first emitted token with replacement law ``residual``."""

    def of(case: Case) -> np.ndarray:
        p = softmax(case.logits, case.temperature)
        q = draft_probs(case.logits)
        return speculative_step_law(p, q, residual=residual_of(p, q, residual))

    return of
