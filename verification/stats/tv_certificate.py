"""An upper confidence bound on the total variation between a sampler's law and a known target, from its draws.

The bound (``proofs/tv_certificate.md`` proves it)
---------------------------------------------------
Let ``p`` be the target on ``V`` categories, ``q`` the sampler's law on ``[V]`` and one more outcome ``O`` (a draw
outside ``[0, V)``; ``p(O) = 0``), ``q^`` the empirical law of ``n`` independent draws.  Fix, before the draws, a set
``S`` of *singletons* and pool the rest ``P = [V] \\ S``; ``Pi`` is the partition of ``[V] + {O}`` into the ``|S|``
singletons, ``P`` (a cell when it is not empty) and ``O``: ``k`` cells.  Within ``P``,
``sum_{i in P} |q_i - p_i| <= q(P) + p(P) = |q(P) - p(P)| + 2 min(q(P), p(P))``, so

    TV(q, p) <= TV_Pi(q, p) + min(q(P), p(P)),

``TV_Pi`` the total variation of the laws summed over the cells.  Two events, each of small probability:

* (Weissman et al. 2003, Theorem 2.1) ``P(||q_Pi - q^_Pi||_1 >= eps) <= (2**k - 2) exp(-n eps**2 / 2)``; at
  ``eps = sqrt(2 (ln(2**k - 2) + ln(1 / delta_W)) / n)`` this is at most ``delta_W``, and outside it
  ``TV_Pi(q, p) <= TV_Pi(q^, p) + eps / 2`` (triangle inequality);
* (Clopper and Pearson 1934) ``q(P)`` outside its two-sided exact interval ``[lo, hi]`` at ``delta_T`` from the
  ``n q^(P)`` draws in ``P``: probability at most ``delta_T``.

With ``delta_W + delta_T = alpha`` (``delta_T = TAIL_SHARE * alpha`` when ``P`` is not empty, else 0), by the union
bound, with probability at least ``1 - alpha`` whatever ``q`` is, both hold:

    TV(q, p) <= B = min(1, TV_Pi(q^, p) + eps / 2 + min(hi, p(P)))     and     lo <= q(P) <= hi.

The second statement is the tail mass the certificate rules out: the sampler's mass on the target's least probable
tokens (``p(P)`` of the target) lies in ``[lo, hi]``, so a starved or flooded tail is bounded even where ``B`` is
dominated by the head's noise.

The coverage needs ``S`` chosen without looking at the draws: :func:`certificate_singletons` takes the ``j`` most
probable tokens of ``p``, ``j`` minimizing the bound an exact sampler would give in expectation at ``n``
(:func:`expected_tv_certificate`: ``E|q^_i - p_i| ~ sqrt(2 p_i (1 - p_i) / (pi n))``), a function of ``p`` and ``n``
only.  This is a confidence statement at level ``1 - alpha``, not a test: it is separate from the Holm family of a
check's tests.  Rows are combined by Bonferroni (each at ``alpha / B``, so every row's bound holds together).

Scaling: for an exact sampler, ``B ~ eps / 2 ~ sqrt(k ln 2 / (2 n))`` at the best ``k``; the twin
:func:`required_certificate_samples` gives the ``n`` at which the expected bound reaches a given total variation.

References
----------
.. [1] Weissman, T., Ordentlich, E., Seroussi, G., Verdu, S. and Weinberger, M. J. (2003). Inequalities for the
   L1 deviation of the empirical distribution. Technical report HPL-2003-97, Hewlett-Packard Laboratories,
   Theorem 2.1.
.. [2] Clopper, C. J. and Pearson, E. S. (1934). The use of confidence or fiducial limits illustrated in the case
   of the binomial. *Biometrika* 26(4), 404-413.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ._validate import check_alpha, check_fraction, check_int, check_probs
from .counts import as_counts
from .power import smallest_n
from .two_sample_bound import l1_deviation

__all__ = [
    "TAIL_SHARE",
    "TvCertificate",
    "certificate_singletons",
    "expected_tv_certificate",
    "required_certificate_samples",
    "tv_certificate",
    "tv_certificates",
]

#: Share of ``alpha`` spent on the tail interval (the rest on the L1 deviation; ``ln(1 / 0.9)`` costs the L1 bound
#: under 1 % of its ``eps`` at any ``k``).
TAIL_SHARE = 0.1


@dataclass(frozen=True)
class TvCertificate:
    """An upper confidence bound on ``TV(q, p)``: with probability ``>= 1 - alpha``, ``TV <= bound`` and the
    sampler's mass on the pooled tokens lies in ``[tail_low, tail_high]``.

    Attributes
    ----------
    bound : float
        ``min(1, observed + eps / 2 + min(tail_high, pooled_target))``.
    observed : float
        ``TV_Pi(q^, p)``: half the L1 distance over the cells (singletons, pooled cell, out-of-range cell).
    eps : float
        The L1 deviation of the cells the draws stay within with probability ``1 - delta_W``.
    cells : int
        ``k``, the cells of the partition.
    singletons, pooled : int
        Tokens kept apart, tokens pooled.
    pooled_target : float
        ``p(P)``, the target's mass on the pooled tokens.
    pooled_observed : float
        ``q^(P)``.
    tail_low, tail_high : float
        The Clopper-Pearson interval on ``q(P)`` at ``TAIL_SHARE * alpha`` (``0, 0`` when nothing is pooled).
    n : int
    alpha : float
    """

    bound: float
    observed: float
    eps: float
    cells: int
    singletons: int
    pooled: int
    pooled_target: float
    pooled_observed: float
    tail_low: float
    tail_high: float
    n: int
    alpha: float

    def __float__(self) -> float:
        return self.bound

    def tail_statement(self) -> str:
        """The tail mass the certificate rules out, in words."""
        if not self.pooled:
            return "every token kept apart (no pooled tail)"
        return (f"sampler's mass on the {self.pooled} pooled least probable tokens (target {self.pooled_target:.3g}) "
                f"in [{self.tail_low:.3g}, {self.tail_high:.3g}]")  # fmt: skip


def _cells(j, v: int):
    """Cells of the partition with ``j`` singletons: the singletons, the pooled cell when ``j < V``, and the cell of
    the draws outside ``[0, V)`` (always one: fixed before the draws)."""
    j = np.asarray(j)
    return j + (j < v) + 1


def _split(alpha: float, pooled) -> tuple:
    """``(delta_W, delta_T)``: the L1 deviation's and the tail interval's shares of ``alpha``."""
    pooled = np.asarray(pooled, dtype=bool)
    return np.where(pooled, (1.0 - TAIL_SHARE) * alpha, alpha), np.where(pooled, TAIL_SHARE * alpha, 0.0)


def _expected_values(p: np.ndarray, n: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """For ``j = 0 .. V`` singletons (the ``j`` most probable), the bound an exact sampler gives in expectation
    (normal approximation of ``E|q^_i - p_i|``), and the order of ``p``."""
    v = p.size
    order = np.argsort(-p, kind="stable")
    ps = p[order]
    mad = np.sqrt(2.0 * ps * (1.0 - ps) / (math.pi * n))  # E|q^_i - p_i|, normal approximation
    head = np.concatenate([[0.0], np.cumsum(mad)])
    pooled = np.concatenate([np.cumsum(ps[::-1])[::-1], [0.0]])  # pooled[j]: the mass after the top j
    pooled = np.clip(pooled, 0.0, 1.0)
    j = np.arange(v + 1)
    delta_w, _ = _split(alpha, j < v)
    eps = np.array([l1_deviation(n, int(c), float(d)) for c, d in zip(_cells(j, v), delta_w)])
    value = 0.5 * head + 0.5 * np.sqrt(2.0 * pooled * (1.0 - pooled) / (math.pi * n)) + 0.5 * eps + pooled
    return value, order


def certificate_singletons(probs, n: int, *, alpha: float) -> np.ndarray:
    """The singletons ``S`` (a boolean mask over ``V``) of the certificate at ``n`` draws: the ``j`` most probable
    tokens of ``probs``, ``j`` minimizing :func:`expected_tv_certificate`'s value.  Depends on ``probs`` and ``n``
    only, never on draws (the coverage needs that)."""
    p = check_probs(probs)
    n = check_int(n, "n")
    alpha = check_alpha(alpha)
    value, order = _expected_values(p, n, alpha)
    mask = np.zeros(p.size, dtype=bool)
    mask[order[: int(np.argmin(value))]] = True
    return mask


def expected_tv_certificate(probs, n: int, *, alpha: float) -> float:
    """The certificate an exact sampler gives at ``n`` draws, in expectation (the normal approximation of each
    cell's mean absolute deviation; the bound itself varies around it by ``O(1 / sqrt(n))``)."""
    p = check_probs(probs)
    n = check_int(n, "n")
    alpha = check_alpha(alpha)
    return float(min(1.0, _expected_values(p, n, alpha)[0].min()))


def required_certificate_samples(probs, tv: float, *, alpha: float) -> int:
    """Draws for which an exact sampler's expected certificate is at most ``tv`` (the twin of
    :func:`expected_tv_certificate`; ``n`` grows as ``k / tv**2``)."""
    p = check_probs(probs)
    tv = check_fraction(tv, "tv")
    alpha = check_alpha(alpha)
    return smallest_n(lambda n: expected_tv_certificate(p, n, alpha=alpha) <= tv, what=f"a certificate tv={tv!r}")


def tv_certificates(histograms, out_of_range, probs, singletons, *, alpha: float):
    """The bounds of many samples at once: ``histograms (R, V)`` of ``n`` draws each (the same ``n``),
    ``out_of_range (R,)``; returns ``(bound, tail_low, tail_high)``, arrays ``(R,)``.  The vectorized core of
    :func:`tv_certificate` (the coverage meta-tests run it over thousands of samples)."""
    h = np.asarray(histograms, dtype=np.float64)
    o = np.asarray(out_of_range, dtype=np.float64)
    p = np.asarray(probs, dtype=np.float64)
    keep = np.asarray(singletons, dtype=bool)
    n = h.sum(axis=1) + o
    if h.ndim != 2 or np.any(n != n[0]) or n[0] < 1:
        raise ValueError("histograms must be (R, V) samples of one size n >= 1 each")
    n0 = int(n[0])
    v = p.size
    j = int(keep.sum())
    qh = h / n0
    pooled_obs = qh[:, ~keep].sum(axis=1)
    pooled_target = float(p[~keep].sum())
    observed = 0.5 * (np.abs(qh[:, keep] - p[keep]).sum(axis=1) + np.abs(pooled_obs - pooled_target) + o / n0)
    delta_w, delta_t = (float(x) for x in _split(alpha, j < v))
    eps = l1_deviation(n0, int(_cells(j, v)), delta_w)
    if j < v:
        k = np.rint(pooled_obs * n0)
        lo = np.where(k > 0, stats.beta.ppf(delta_t / 2, k, n0 - k + 1), 0.0)
        hi = np.where(k < n0, stats.beta.ppf(1 - delta_t / 2, k + 1, n0 - k), 1.0)
    else:
        lo = hi = np.zeros_like(observed)
    bound = np.minimum(1.0, observed + 0.5 * eps + np.minimum(hi, pooled_target))
    return bound, lo, hi


def tv_certificate(samples, probs, *, alpha: float = 1e-3, singletons=None) -> TvCertificate:
    """An upper bound on ``TV(q, p)``, the total variation between the law ``q`` of ``samples`` and the target
    ``probs``, that holds with probability at least ``1 - alpha`` whatever ``q`` is (the module docstring proves
    it), with an interval on the sampler's mass on the pooled tokens that holds on the same event.

    Parameters
    ----------
    samples : array_like of int, or Counts
        Independent draws.  Draws outside ``[0, V)`` fall in a cell of their own (never dropped).
    probs : array_like of float, shape (V,)
        The target.
    alpha : float in (0, 1)
        The statement fails with probability at most ``alpha``.
    singletons : bool mask (V,), optional
        The tokens kept apart, chosen without the draws; default :func:`certificate_singletons` at this ``n``.

    Returns
    -------
    TvCertificate
        ``float(result)`` is the bound.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> p = np.exp(rng.normal(0, 2, 100)); p /= p.sum()
    >>> c = tv_certificate(rng.choice(100, 1_000_000, p=p), p, alpha=1e-3)
    >>> 0.0 < c.bound < 0.02, c.tail_low <= c.pooled_target <= c.tail_high
    (True, True)
    >>> q = 0.9 * p + 0.1 / 100  # a sampler at total variation 0.5 * 0.1 * sum|1/V - p| from p
    >>> tv = 0.5 * np.abs(q - p).sum()
    >>> bool(tv <= tv_certificate(rng.choice(100, 1_000_000, p=q), p, alpha=1e-3).bound)
    True
    """
    p = check_probs(probs)
    alpha = check_alpha(alpha)
    v = p.size
    counts = as_counts(samples, v, "samples")
    if singletons is None:
        keep = certificate_singletons(p, counts.n, alpha=alpha)
    else:
        keep = np.asarray(singletons)
        if keep.dtype != np.bool_ or keep.shape != (v,):
            raise ValueError(f"singletons must be a boolean mask of shape ({v},), got {keep.dtype} {keep.shape}")
    bound, lo, hi = tv_certificates(counts.histogram[None, :], [counts.out_of_range], p, keep, alpha=alpha)
    j = int(keep.sum())
    qh = counts.histogram / counts.n
    pooled_obs = float(qh[~keep].sum())
    pooled_target = float(p[~keep].sum())
    observed = 0.5 * (float(np.abs(qh[keep] - p[keep]).sum()) + abs(pooled_obs - pooled_target)
                      + counts.out_of_range / counts.n)  # fmt: skip
    delta_w, _ = _split(alpha, j < v)
    eps = l1_deviation(counts.n, int(_cells(j, v)), float(delta_w))
    return TvCertificate(float(bound[0]), observed, eps, int(_cells(j, v)), j, v - j, pooled_target, pooled_obs,
                         float(lo[0]), float(hi[0]), counts.n, alpha)  # fmt: skip
