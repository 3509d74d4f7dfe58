"""Exact laws of speculative decoding's accept/reject step, one draft token and a chain of K.

One step
--------
A draft token ``x ~ q`` is accepted with probability ``a(x) = min(1, p(x) / q(x))``; otherwise the
token is drawn from the residual ``r = max(p - q, 0) / sum(max(p - q, 0))``.  The emitted token has law

    L(y) = q(y) a(y) + (1 - beta) r(y),      beta = sum_x q(x) a(x) = sum_x min(p(x), q(x)),

and since ``q a = min(p, q)`` and ``1 - beta = sum max(p - q, 0)``, ``L = min(p, q) + max(p - q, 0) = p``
exactly: the step samples the target ``p`` whatever the draft ``q`` [1]_ [2]_.

A chain of K draft tokens
-------------------------
Given the tables the rejection sampler receives, ``q_i`` (draft) and ``p_i`` (target) for positions
``i = 1..K`` and ``p_{K+1}`` for the bonus position, with ``x_i ~ q_i`` drawn independently, the sampler
walks ``i = 1, 2, ...``: it emits ``x_i`` and moves on when ``x_i`` is accepted, and emits a residual draw
and stops when it is rejected; after K acceptances it emits a bonus token ``~ p_{K+1}`` and stops.  The
probability of emitting exactly ``y_1 .. y_n`` (``n`` tokens, ``n - 1`` accepted drafts) is

    P(y_1..y_n) = prod_{i<n} min(p_i, q_i)(y_i)  *  { max(p_n - q_n, 0)(y_n)   if n <= K
                                                    { p_{K+1}(y_n)            if n = K + 1.

At each position the sampler reaches, ``(token, accepted?)`` has the law ``outcome[i]``: ``min(p_i, q_i)``
for "accepted", ``max(p_i - q_i, 0)`` for "rejected" (2V categories summing to 1), independent of the
earlier positions; so the token emitted at a reached position has law ``p_i``, and position ``i`` is
reached with probability ``prod_{j<i} beta_j``.  In a model, ``p_i`` and ``q_i`` for ``i > 1`` are
conditional on the drafted prefix; the law above holds for whatever tables the sampler is given.

References
----------
.. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers via Speculative Decoding",
   ICML 2023 (arXiv:2211.17192), Sec. 2.3 and Appendix A.1.
.. [2] C. Chen, S. Borgeaud, G. Irving, J.-B. Lespiau, L. Sifre, J. Jumper, "Accelerating Large Language
   Model Decoding with Speculative Sampling", arXiv:2302.01318 (2023), Theorem 1.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..reference import sample_inverse_cdf
from ._inputs import as_common, probability_table, to_numpy

__all__ = [
    "ChainLaw",
    "draw_draft_tokens",
    "residual_law",
    "speculative_chain_law",
    "speculative_step_law",
]


def residual_law(p, q) -> np.ndarray:
    r"""The residual law ``r = max(p - q, 0) / sum(max(p - q, 0))`` a rejected draft is replaced from.

    Parameters
    ----------
    p, q : array or tensor, shape (..., V)
        Target and draft probabilities (float, summing to 1 within ``V * 2**-23``; or object arrays of
        ``fractions.Fraction`` summing to exactly 1, which makes the result exact).

    Returns
    -------
    numpy.ndarray, float64 or Fraction objects, shape (..., V)
        ``r`` per row; a row where ``p == q`` has no residual mass (a draft is never rejected), and
        there ``r = p``, a placeholder that carries weight 0 in every law.

    Raises
    ------
    TypeError, ValueError
        As :func:`speculative_step_law`.

    Examples
    --------
    >>> residual_law([0.5, 0.5, 0.0], [0.25, 0.25, 0.5]).tolist()
    [0.5, 0.5, 0.0]
    """
    p, q = _pair(p, q, "p", "q", same_shape=True)
    return _residual(p, q)


def speculative_step_law(p, q, *, residual=None, acceptance=None) -> np.ndarray:
    r"""Law of the token one accept/reject step emits: ``L = q a + (1 - sum q a) r`` (equals ``p``).

    Parameters
    ----------
    p, q : array or tensor, shape (..., V)
        Target and draft probabilities: float (finite, >= 0, summing to 1 within ``V * 2**-23``;
        renormalized in float64) or object arrays of ``fractions.Fraction`` summing to exactly 1 (the
        law is then computed exactly).
    residual : array, shape (..., V), optional
        The law the sampler draws a replacement from; default the exact residual
        :func:`residual_law`.  Pass a defective one (float16, unnormalized) to get the law of a
        sampler with that defect; it is used as given, so an unnormalized residual gives an ``L`` that
        does not sum to 1.
    acceptance : array, shape (..., V), optional
        The probability ``a(x)`` in ``[0, 1]`` of accepting draft ``x``; default ``min(1, p / q)``
        (and 1 where ``q = 0``, a draft that never occurs).

    Returns
    -------
    numpy.ndarray, float64 or Fraction objects, shape (..., V)
        ``L``; with the defaults ``L == p`` exactly for Fraction input and within ``4 V 2**-53`` in
        float64.

    Raises
    ------
    TypeError
        A table that is not floating-point or Fractions.
    ValueError
        A table with negative, NaN or infinite entries, not summing to 1, or whose shape differs
        from ``q``'s; an ``acceptance`` outside ``[0, 1]``.

    Examples
    --------
    >>> from fractions import Fraction as F
    >>> p = np.array([F(1, 2), F(1, 3), F(1, 6)], dtype=object)
    >>> q = np.array([F(1, 6), F(1, 6), F(2, 3)], dtype=object)
    >>> speculative_step_law(p, q).tolist() == p.tolist()
    True
    >>> speculative_step_law(p, q, residual=np.array([F(1, 3)] * 3, dtype=object)).tolist()  # wrong residual
    [Fraction(1, 3), Fraction(1, 3), Fraction(1, 3)]
    """
    p, q = _pair(p, q, "p", "q", same_shape=True)
    r, a = _overrides(p, q, residual, acceptance)
    return _step(p, q, r, a)[0]


@dataclass(frozen=True, eq=False)
class ChainLaw:
    """The exact law of one speculative step with ``K`` draft tokens and the bonus token.

    Every array has the batch shape ``(...)`` of the inputs in front; ``V`` is the vocabulary.

    Attributes
    ----------
    acceptance : array (..., K)
        ``beta_i = sum_x q_i(x) a_i(x)``, the probability of accepting the draft at position ``i``.
    reach : array (..., K + 1)
        ``prod_{j<i} beta_j``: the probability that position ``i`` emits a token.
    num_emitted : array (..., K + 1)
        Law of the number ``n = 1..K+1`` of emitted tokens (``n - 1`` accepted drafts).
    outcome : array (..., K, 2, V)
        At a reached draft position: ``outcome[..., i, 0, y]`` = P(draft accepted, token ``y``),
        ``outcome[..., i, 1, y]`` = P(rejected, replacement ``y``); sums to 1 over the last two axes.
    bonus : array (..., V)
        Law of the bonus token, ``p_{K+1}``.
    marginals : array (..., K + 1, V)
        Law of the token emitted at position ``i`` given that it is reached (``p_i`` for the exact
        step; something else for a defective ``residual`` or ``acceptance``).
    """

    acceptance: np.ndarray
    reach: np.ndarray
    num_emitted: np.ndarray
    outcome: np.ndarray
    bonus: np.ndarray
    marginals: np.ndarray

    @property
    def num_draft_tokens(self) -> int:
        """K."""
        return self.outcome.shape[-3]

    def position_probs(self) -> np.ndarray:
        """``reach[..., i] * marginals[..., i, :]``: P(position ``i`` emits token ``y``), shape (..., K + 1, V)."""
        return self.reach[..., :, None] * self.marginals

    def sequence_probability(self, tokens) -> np.ndarray:
        """Probability of emitting exactly ``tokens`` (``1 <= len <= K + 1``), per batch row.

        Parameters
        ----------
        tokens : sequence of int
            The emitted tokens in order, without padding.

        Returns
        -------
        numpy.ndarray, shape (...)
            ``prod_{i<n} outcome[i, 0, y_i] * (outcome[n, 1, y_n] if n <= K else bonus[y_n])``.

        Raises
        ------
        ValueError
            Empty or longer than ``K + 1``, or a token outside ``[0, V)``.
        """
        toks = [int(t) for t in tokens]
        k, v = self.num_draft_tokens, self.bonus.shape[-1]
        if not 1 <= len(toks) <= k + 1:
            raise ValueError(f"tokens must hold 1..{k + 1} tokens, got {len(toks)}")
        if any(not 0 <= t < v for t in toks):
            raise ValueError(f"tokens must lie in [0, {v}), got {toks}")
        prob = np.ones(self.bonus.shape[:-1], dtype=self.bonus.dtype)
        for i, y in enumerate(toks[:-1]):
            prob = prob * self.outcome[..., i, 0, y]
        n = len(toks)
        last = self.outcome[..., n - 1, 1, toks[-1]] if n <= k else self.bonus[..., toks[-1]]
        out = prob * last
        return out[()] if isinstance(out, np.ndarray) and out.ndim == 0 else out


def speculative_chain_law(p, q, *, residual=None, acceptance=None) -> ChainLaw:
    r"""The law of a chain of ``K`` draft tokens and the bonus token (module docstring).

    Parameters
    ----------
    p : array or tensor, shape (..., K + 1, V)
        Target probabilities at the ``K`` draft positions and the bonus position.
    q : array or tensor, shape (..., K, V)
        Draft probabilities at the ``K`` draft positions (``K >= 1``).
    residual, acceptance : array, shape (..., K, V), optional
        A defective replacement law / acceptance rule, as in :func:`speculative_step_law`.

    Returns
    -------
    ChainLaw
        Exact (Fraction objects) when ``p`` and ``q`` are Fraction tables, else float64.

    Raises
    ------
    TypeError, ValueError
        As :func:`speculative_step_law`; and ``ValueError`` when ``p`` does not have one more
        position than ``q`` or their batch shapes or ``V`` differ.

    Examples
    --------
    >>> from fractions import Fraction as F
    >>> p = np.array([[F(1, 2), F(1, 2)], [F(1, 4), F(3, 4)]], dtype=object)   # K = 1: a draft and a bonus
    >>> q = np.array([[F(1), F(0)]], dtype=object)                              # the draft always proposes 0
    >>> law = speculative_chain_law(p, q)
    >>> law.acceptance.tolist(), law.num_emitted.tolist(), law.marginals.tolist() == p.tolist()
    ([Fraction(1, 2)], [Fraction(1, 2), Fraction(1, 2)], True)
    >>> law.sequence_probability([0, 1])                  # accept 0 (1/2), then bonus 1 (3/4)
    Fraction(3, 8)
    """
    p, q = _pair(p, q, "p", "q", same_shape=False)
    if p.ndim < 2 or q.ndim < 2 or p.shape[:-2] != q.shape[:-2] or p.shape[-1] != q.shape[-1]:
        raise ValueError(f"p must have shape (..., K + 1, V) and q (..., K, V); got p {p.shape}, q {q.shape}")
    if p.shape[-2] != q.shape[-2] + 1:
        raise ValueError(f"p must have one more position than q (K + 1 vs K); got p {p.shape}, q {q.shape}")
    if q.shape[-2] < 1:
        raise ValueError(f"q must hold at least one draft position, got shape {q.shape}")
    pk = p[..., :-1, :]
    r, a = _overrides(pk, q, residual, acceptance)
    marg, accepted, rejected, beta = _step(pk, q, r, a)
    k = q.shape[-2]
    one = np.ones(beta.shape[:-1] + (1,), dtype=beta.dtype)
    reach = np.concatenate([one, np.cumprod(beta, axis=-1)], axis=-1)
    num = np.concatenate([reach[..., :k] * (1 - beta), reach[..., k:]], axis=-1)
    outcome = np.stack([accepted, rejected], axis=-2)
    marginals = np.concatenate([marg, p[..., -1:, :]], axis=-2)
    return ChainLaw(beta, reach, num, outcome, p[..., -1, :], marginals)


def draw_draft_tokens(q, num_samples: int, *, seed) -> np.ndarray:
    """Draft tokens ``x ~ q`` per row and position, by exact inverse CDF in float64 (seeded).

    Parameters
    ----------
    q : array or tensor, shape (..., V)
        Draft probabilities, e.g. ``(B, K, V)``.
    num_samples : int
        Independent draws per row (``>= 1``).
    seed : int or numpy.random.Generator
        A seed ``>= 0`` for ``numpy.random.default_rng``, or a generator (consumed).

    Returns
    -------
    numpy.ndarray, int64, shape (num_samples, ...)
        ``out[s]`` has the shape of ``q`` without ``V`` (e.g. ``(B, K)``, the draft-token layout of
        vLLM's and FlashInfer's rejection samplers); tokens of probability 0 never occur.

    Raises
    ------
    TypeError, ValueError
        A bad ``q`` (as :func:`speculative_step_law`), ``num_samples`` not an integer >= 1, or a seed
        that is neither an integer >= 0 nor a ``numpy.random.Generator``.

    Examples
    --------
    >>> draw_draft_tokens([[0.0, 1.0], [1.0, 0.0]], 3, seed=0).tolist()
    [[1, 0], [1, 0], [1, 0]]
    """
    table = probability_table(q, "q").astype(np.float64)
    if isinstance(num_samples, bool) or not isinstance(num_samples, numbers.Integral):
        raise TypeError(f"num_samples must be an integer, got {num_samples!r}")
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got num_samples={num_samples!r}")
    rng = _generator(seed)
    rows = table.reshape(-1, table.shape[-1])
    draws = sample_inverse_cdf(rows, int(num_samples), rng)  # (R, n)
    return np.ascontiguousarray(draws.T).reshape((int(num_samples),) + table.shape[:-1])


def _generator(seed) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be an integer >= 0 or a numpy.random.Generator, got seed={seed!r}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got seed={seed!r}")
    return np.random.default_rng(int(seed))


def _pair(p, q, p_name: str, q_name: str, *, same_shape: bool) -> tuple[np.ndarray, np.ndarray]:
    pt = probability_table(p, p_name)
    qt = probability_table(q, q_name)
    if same_shape and pt.shape != qt.shape:
        raise ValueError(f"{q_name} has shape {qt.shape} but {p_name} has shape {pt.shape}; they must match")
    return as_common(pt, qt)


def _residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    excess = np.maximum(p - q, 0)
    mass = excess.sum(axis=-1, keepdims=True)
    has = mass > 0
    return np.where(has, excess / np.where(has, mass, 1), p)


def _overrides(p, q, residual, acceptance) -> tuple[np.ndarray, np.ndarray]:
    """The residual and acceptance arrays: the exact ones, or checked user-given ones in ``p``'s arithmetic."""
    exact = p.dtype == object
    r = _residual(p, q) if residual is None else _table_like(residual, "residual", q.shape, exact)
    if acceptance is None:
        positive = q > 0
        ratio = p / np.where(positive, q, 1)
        a = np.where(positive, np.minimum(ratio, 1), 1)
    else:
        a = _table_like(acceptance, "acceptance", q.shape, exact)
        if ((a < 0) | (a > 1)).any():
            raise ValueError("acceptance must lie in [0, 1]")
    return r, a


def _table_like(x, name: str, shape: tuple[int, ...], exact: bool) -> np.ndarray:
    """A user-given residual or acceptance table, in the arithmetic of ``p`` (floats become exact Fractions)."""
    arr = to_numpy(x, name)
    if arr.dtype == object:
        if any(isinstance(e, bool) or not isinstance(e, numbers.Rational) for e in arr.reshape(-1)):
            raise TypeError(f"{name}: an object array must hold int or fractions.Fraction entries")
    elif arr.dtype.kind not in "fiu" or arr.dtype == np.bool_:
        raise TypeError(f"{name} must hold real numbers, got dtype={arr.dtype}")
    elif not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    if arr.shape != shape:
        raise ValueError(f"{name} has shape {arr.shape} but q has shape {shape}; they must match")
    if (arr < 0).any():
        raise ValueError(f"{name} must be >= 0")
    if exact:  # a float's value is a dyadic rational: the law of a float16 residual stays exact
        return np.array(
            [Fraction(e) if arr.dtype == object else Fraction(float(e)) for e in arr.reshape(-1)], dtype=object
        ).reshape(shape)
    return arr.astype(np.float64)


def _step(p, q, r, a) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(L, accepted, rejected, beta)`` of one step: ``accepted = q a``, ``rejected = (1 - beta) r``."""
    accepted = q * a
    beta = np.asarray(accepted.sum(axis=-1))  # object sums of 1-D rows come back as scalars
    rejected = np.asarray(1 - beta)[..., None] * r
    return accepted + rejected, accepted, rejected, beta
