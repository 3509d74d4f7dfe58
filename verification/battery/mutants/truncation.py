"""Truncation mutants: top-k, top-p and min-p written the way serving stacks write them, one convention wrong.

Each sampler filters one row of logits with the sort-based code serving stacks use (float64 here, so
only the convention differs from the target): scale by the temperature, sort in descending order, a
cumulative sum or a threshold, a keep-mask, then an exact draw (inverse CDF) from the softmax
renormalized over the kept tokens.  A keyword switches the one line that real implementations get
wrong; its default is the convention of ``docs/targets.md``'s transformers row (the exact control):

=========================  ==================================================  =====================================
sampler, switch            the line                                            law (``sampling_law``)
=========================  ==================================================  =====================================
:func:`top_p`, ``mass``    keep ``i`` iff ``M_i < p`` (mass ranked before      ``"inclusive"``: ``top_p_crossing="drop",
                           ``i``), or ``M_i + P(i) <= p`` (the inclusive       top_p_strict=False`` (the crossing token
                           cumulative sum compared without the shift)          is dropped)
:func:`top_p`,             top-p on ``softmax(z)`` (``T = 1``), the sample at  ``order=("top_p", "temperature")``
``before_temperature``     ``T``
:func:`top_k_top_p`,       top-p's cumulative sum over the full softmax, not   ``order="joint"``
``renormalize``            the top-k renormalized one (tokens past the
                           boundary kept)
:func:`top_k`, ``ties``    ``z >= z_(k)`` (all tied kept) or ``k`` indices by  ``top_k_ties="low_index"``
                           a stable sort (``torch.topk``, ``lax.top_k``)
:func:`min_p`, ``strict``  keep ``w_i >= p`` or ``w_i > p``, ``w_i = P(i) /    ``min_p_strict=True``
                           max P`` (``exp(z_i - max z)`` at ``T``)
=========================  ==================================================  =====================================

The laws are computed independently of the samplers, by :func:`flashsampling.targets.sampling_law`
with the wrong convention (:func:`law`); ``tests/test_mutants.py`` checks each sampler's draws
against it.
"""

from __future__ import annotations

import numpy as np

from flashsampling.reference import sample_inverse_cdf
from flashsampling.targets import sampling_law

from ..cases import Case
from .samplers import Sampler

__all__ = ["draw_kept", "law", "min_p", "top_k", "top_k_top_p", "top_p"]


def _probs(s: np.ndarray) -> np.ndarray:
    """Float64 softmax of the scaled logits ``s`` (``-inf``: probability 0)."""
    e = np.exp(s - s.max())
    return e / e.sum()


def draw_kept(logits, temperature: float, keep: np.ndarray, n: int, seed: int) -> np.ndarray:
    """Exact draws from ``softmax(z / T)`` renormalized over the tokens where ``keep`` is true."""
    s = np.asarray(logits, dtype=np.float64) / temperature
    p = np.where(keep, _probs(s), 0.0)
    return sample_inverse_cdf(p / p.sum(), n, np.random.default_rng(seed)).astype(np.int64)


def _nucleus(s: np.ndarray, p: float, mass: str, allowed: np.ndarray | None = None,
             renormalize: bool = True) -> np.ndarray:  # fmt: skip
    """Keep-mask of top-p on the scaled logits ``s`` restricted to ``allowed`` (a stable descending sort)."""
    allowed = np.isfinite(s) if allowed is None else allowed & np.isfinite(s)
    probs = _probs(np.where(allowed, s, -np.inf)) if renormalize else _probs(s)
    order = np.argsort(-np.where(allowed, s, -np.inf), kind="stable")[: int(allowed.sum())]
    inclusive = np.cumsum(probs[order])
    before = inclusive - probs[order]
    keep_sorted = before < p if mass == "exclusive" else inclusive <= p
    keep_sorted[0] = True  # min_tokens_to_keep = 1
    keep = np.zeros(s.size, dtype=bool)
    keep[order[keep_sorted]] = True
    return keep


def top_p(logits, temperature: float, n: int, seed: int, *, p: float, mass: str = "exclusive",
          before_temperature: bool = False) -> np.ndarray:  # fmt: skip
    """Top-p: descending sort, cumulative sum, keep ``i`` while the mass before it is ``< p``.

    ``mass="inclusive"`` compares the cumulative sum *including* ``i`` (``cumsum <= p``, the shift by one
    forgotten): the token that crosses ``p`` is dropped.  ``before_temperature=True`` runs the filter on
    ``softmax(z)`` and samples ``softmax(z / T)`` over what it kept.
    """
    z = np.asarray(logits, dtype=np.float64)
    keep = _nucleus(z if before_temperature else z / temperature, p, mass)
    return draw_kept(z, temperature, keep, n, seed)


def top_k_top_p(logits, temperature: float, n: int, seed: int, *, k: int, p: float,
                renormalize: bool = True) -> np.ndarray:  # fmt: skip
    """Top-k, then top-p on the top-k tokens; ``renormalize=False`` takes top-p's cumulative sum over the
    full softmax (SGLang's joint torch sampler), so fewer tokens reach ``p`` and more are kept."""
    s = np.asarray(logits, dtype=np.float64) / temperature
    kept_k = _top_k_keep(s, k, "all")
    return draw_kept(logits, temperature, _nucleus(s, p, "exclusive", kept_k, renormalize), n, seed)


def _top_k_keep(s: np.ndarray, k: int, ties: str) -> np.ndarray:
    if ties == "all":  # transformers: scores < topk(scores, k).values[..., -1] are removed
        return s >= np.sort(s)[::-1][min(k, s.size) - 1]
    keep = np.zeros(s.size, dtype=bool)  # torch.topk / lax.top_k: exactly k, lower index first on ties
    keep[np.argsort(-s, kind="stable")[:k]] = True
    return keep & np.isfinite(s)


def top_k(logits, temperature: float, n: int, seed: int, *, k: int, ties: str = "all") -> np.ndarray:
    """Top-k: keep the logits ``>=`` the k-th largest (``ties="all"``), or exactly ``k`` tokens chosen by a
    stable descending sort (``ties="index"``: tied logits by lower index first, as ``lax.top_k``)."""
    z = np.asarray(logits, dtype=np.float64)
    return draw_kept(z, temperature, _top_k_keep(z / temperature, k, ties), n, seed)


def min_p(logits, temperature: float, n: int, seed: int, *, p: float, strict: bool = False) -> np.ndarray:
    """Min-p: keep ``w_i >= p`` with ``w_i = exp((z_i - max z) / T) = P(i) / max P``; ``strict=True``
    keeps ``w_i > p``, dropping the tokens exactly at the threshold."""
    z = np.asarray(logits, dtype=np.float64)
    w = np.exp((z - z.max()) / temperature)
    return draw_kept(z, temperature, w > p if strict else w >= p, n, seed)


def law(**conventions):
    """``law(case) -> q``: :func:`flashsampling.targets.sampling_law` of the case's logits and temperature
    with the given parameters and conventions (the mutant's exact law)."""

    def of(case: Case) -> np.ndarray:
        return sampling_law(case.logits, case.temperature, **conventions)

    return of


def bind(sampler, **kwargs) -> Sampler:
    """``sampler`` with its parameters and convention switch fixed: the catalogue's signature."""

    def sample(logits, temperature: float, n: int, seed: int) -> np.ndarray:
        return sampler(logits, temperature, n, seed, **kwargs)

    sample.__name__ = sampler.__name__
    sample.__doc__ = f"{sampler.__name__}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
    return sample
