"""An upper confidence bound on the total variation between the laws of two samplers, from their draws.

The bound (Weissman et al. 2003 for each sample, and the triangle inequality)
------------------------------------------------------------------------------
Let ``p`` and ``q`` be the laws of samplers A and B on ``V`` categories, ``p^``, ``q^`` the empirical laws of
``n_a`` and ``n_b`` independent draws, and ``S`` a set of categories fixed before the draws (the *singletons*);
``P`` is the rest (the *pooled* categories), and ``Pi`` the partition of ``[V]`` into the ``|S|`` singletons and
``P`` (``P`` is a cell when it is not empty), and one more cell for the draws outside ``[0, V)`` (a category of
its own, impossible for a correct sampler): ``k <= |S| + 2`` cells.  Within ``P``, ``sum_{i in P} |p_i - q_i| <=
p(P) + q(P)``, so

    TV(p, q) <= 1/2 sum_{i in S} |p_i - q_i| + 1/2 (p(P) + q(P)),

and with ``|p_i - q_i| <= |p^_i - q^_i| + |p_i - p^_i| + |q_i - q^_i|`` and ``p(P) <= p^(P) + |p(P) - p^(P)|``,

    TV(p, q) <= T^ + 1/2 ||p_Pi - p^_Pi||_1 + 1/2 ||q_Pi - q^_Pi||_1,
    T^ = 1/2 sum_{i in S} |p^_i - q^_i| + 1/2 (p^(P) + q^(P)),

where ``p_Pi`` is ``p`` summed over the cells of ``Pi``.  Weissman, Ordentlich, Seroussi, Verdu and Weinberger
(2003, Theorem 2.1, with ``phi(pi) >= 2``) bound the L1 deviation of an empirical law over ``k`` cells:
``P(||p_Pi - p^_Pi||_1 >= eps) <= (2**k - 2) exp(-n eps**2 / 2)``.  At ``eps_a = sqrt(2 (ln(2**k - 2) +
ln(2 / alpha)) / n_a)`` (and ``eps_b`` alike) each event has probability at most ``alpha / 2``, so with
probability at least ``1 - alpha``, whatever ``p`` and ``q`` are,

    TV(p, q) <= min(1, T^ + (eps_a + eps_b) / 2).

The coverage needs ``S`` to be chosen without looking at the draws: :func:`singletons_for` picks it from a
*planning law* (for a check, the softmax of the logits both samplers receive), the set that minimizes the bound
the planning law would give; the bound holds whatever the samplers' laws are, and is tight when the planning law
is close to them.  ``partition=None`` takes every category as a singleton (no pooled mass, ``k = V``).

This is the simple, proven certificate of :func:`verification.check_samplers_agree`; a tighter bound with the same
coverage can replace it behind :func:`two_sample_tv_upper_bound`'s signature.

References
----------
.. [1] Weissman, T., Ordentlich, E., Seroussi, G., Verdu, S. and Weinberger, M. J. (2003). Inequalities for the
   L1 deviation of the empirical distribution. Technical report HPL-2003-97, Hewlett-Packard Laboratories,
   Theorem 2.1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._validate import check_alpha, check_int, check_probs
from .counts import as_counts

__all__ = ["TvBound", "l1_deviation", "singletons_for", "two_sample_tv_upper_bound"]


@dataclass(frozen=True)
class TvBound:
    """An upper confidence bound on ``TV(p, q)``: ``bound`` holds with probability at least ``1 - alpha``.

    Attributes
    ----------
    bound : float
        ``min(1, observed + (eps_a + eps_b) / 2)``.
    observed : float
        ``T^``: half the L1 distance of the empirical laws over the singletons, plus half their pooled mass.
    pooled_mass : float
        ``(p^(P) + q^(P)) / 2``, the empirical mass of the pooled categories (counted in ``observed``).
    eps_a, eps_b : float
        The L1 deviations each sample stays within with probability ``1 - alpha / 2``.
    cells : int
        ``k``, the cells of the partition (singletons, plus the pooled cell).
    n_a, n_b : int
    alpha : float
    """

    bound: float
    observed: float
    pooled_mass: float
    eps_a: float
    eps_b: float
    cells: int
    n_a: int
    n_b: int
    alpha: float

    def __float__(self) -> float:
        return self.bound


def _log_subsets(cells: np.ndarray) -> np.ndarray:
    """``ln(2**k - 2)`` for ``k >= 2`` cells, as ``k ln 2`` beyond 60 cells (larger, so the bound stays valid)."""
    k = np.asarray(cells, dtype=np.float64)
    small = np.log(np.maximum(2.0 ** np.minimum(k, 60.0) - 2.0, 1.0))
    return np.where(k <= 60, small, k * math.log(2.0))


def l1_deviation(n, cells, delta: float):
    """``eps`` with ``P(||p_Pi - p^_Pi||_1 >= eps) <= delta`` for ``n`` draws over ``cells`` cells (Weissman et al.
    2003): ``sqrt(2 (ln(2**k - 2) + ln(1 / delta)) / n)``; 0 for one cell (an empirical law over one cell is exact).
    Vectorized over ``cells``."""
    k = np.asarray(cells)
    eps = np.sqrt(2.0 * (_log_subsets(np.maximum(k, 2)) + math.log(1.0 / delta)) / n)
    eps = np.where(k <= 1, 0.0, eps)
    return float(eps) if eps.ndim == 0 else eps


def singletons_for(probs, n_a: int, n_b: int, *, alpha: float) -> np.ndarray:
    """The singletons ``S`` (a boolean mask over ``V``) that minimize the bound ``probs`` would give for both laws:
    the ``j`` most probable categories of ``probs``, ``j`` minimizing ``(eps_a + eps_b) / 2 + probs(P_j)`` at the
    ``k`` cells of that partition.  Depends on ``probs`` and the sizes only, never on draws (the coverage needs
    that)."""
    p = check_probs(probs)
    n_a, n_b = check_int(n_a, "n_a"), check_int(n_b, "n_b")
    alpha = check_alpha(alpha)
    order = np.argsort(-p, kind="stable")
    v = p.size
    pooled = np.concatenate([np.cumsum(p[order][::-1])[::-1], [0.0]])  # pooled[j]: the mass after the top j
    j = np.arange(v + 1)
    cells = _cells(j, v)
    value = 0.5 * (l1_deviation(n_a, cells, alpha / 2) + l1_deviation(n_b, cells, alpha / 2)) + pooled
    mask = np.zeros(v, dtype=bool)
    mask[order[: int(np.argmin(value))]] = True
    return mask


def _cells(singletons, v: int):
    """Cells of the partition: the singletons, the pooled cell when some category is pooled, and the cell of the
    draws outside ``[0, V)`` (always one: the partition is fixed before the draws)."""
    j = np.asarray(singletons)
    return j + (j < v) + 1


def two_sample_tv_upper_bound(samples_a, samples_b, num_categories: int, *, alpha: float = 1e-3,
                              singletons=None) -> TvBound:  # fmt: skip
    """An upper bound on ``TV(p, q)``, the total variation between the laws of two samplers, that holds with
    probability at least ``1 - alpha`` (the module docstring proves it).

    Parameters
    ----------
    samples_a, samples_b : array_like of int, or Counts
        Independent draws of the two samplers.  Draws outside ``[0, V)`` fall in a cell of their own (the laws
        are taken on ``[V]`` and "outside"): they are never dropped.
    num_categories : int
        V.
    alpha : float in (0, 1)
        The bound fails to hold with probability at most ``alpha``.
    singletons : bool mask (V,), optional
        The categories kept apart, chosen without the draws (:func:`singletons_for` from a planning law);
        default every category.

    Returns
    -------
    TvBound
        ``float(result)`` is the bound.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> p = np.array([0.5, 0.3, 0.2])
    >>> b = two_sample_tv_upper_bound(rng.choice(3, 100_000, p=p), rng.choice(3, 100_000, p=p), 3)
    >>> 0.0 < b.bound < 0.03
    True
    """
    v = check_int(num_categories, "num_categories")
    alpha = check_alpha(alpha)
    a = as_counts(samples_a, v, "samples_a")
    b = as_counts(samples_b, v, "samples_b")
    if singletons is None:
        keep = np.ones(v, dtype=bool)
    else:
        keep = np.asarray(singletons)
        if keep.dtype != np.bool_ or keep.shape != (v,):
            raise ValueError(f"singletons must be a boolean mask of shape ({v},), got {keep.dtype} {keep.shape}")
    pa, pb = a.histogram / a.n, b.histogram / b.n
    pooled = 0.5 * (float(pa[~keep].sum()) + float(pb[~keep].sum()))
    outside = 0.5 * abs(a.out_of_range / a.n - b.out_of_range / b.n)
    observed = 0.5 * float(np.abs(pa[keep] - pb[keep]).sum()) + pooled + outside
    cells = int(_cells(int(keep.sum()), v))
    eps_a = l1_deviation(a.n, cells, alpha / 2)
    eps_b = l1_deviation(b.n, cells, alpha / 2)
    return TvBound(min(1.0, observed + 0.5 * (eps_a + eps_b)), observed, pooled, eps_a, eps_b, cells, a.n, b.n, alpha)
