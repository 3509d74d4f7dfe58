"""Binomial p-values and detectable shifts shared by the tail, tie and per-category tests.

Three alternatives, all exact:

* ``"less"``: ``P(Bin(n, p0) <= k)`` (``scipy.stats.binomtest(..., alternative="less")``);
* ``"greater"``: ``P(Bin(n, p0) >= k)``;
* ``"two-sided"``: the central (equal-tailed) p-value ``min(1, 2 min(less, greater))``, which keeps
  the rejection region two one-sided regions at ``alpha / 2`` each, so power is computable exactly.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from .power import binomial_detectable_high, binomial_detectable_low

ALTERNATIVES = ("less", "greater", "two-sided")


def check_alternative(alternative: str) -> str:
    """One of ``ALTERNATIVES``."""
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {ALTERNATIVES}, got alternative={alternative!r}")
    return alternative


def binomial_pvalue(k: int, n: int, p0: float, alternative: str) -> float:
    """Exact binomial p-value of ``k`` successes in ``n`` trials against ``p0``."""
    if alternative == "two-sided":
        lo = stats.binomtest(k, n, p0, alternative="less").pvalue
        hi = stats.binomtest(k, n, p0, alternative="greater").pvalue
        return float(min(1.0, 2.0 * min(lo, hi)))
    return float(stats.binomtest(k, n, p0, alternative=alternative).pvalue)


def binomial_pvalues(k: np.ndarray, n: int, p0: np.ndarray) -> np.ndarray:
    """Vectorized central two-sided p-values ``min(1, 2 min(P(X <= k), P(X >= k)))``, ``X ~ Bin(n, p0)``."""
    lo = stats.binom.cdf(k, n, p0)
    hi = stats.binom.sf(k - 1, n, p0)
    return np.minimum(1.0, 2.0 * np.minimum(lo, hi))


def detectable_shifts(n: int, p0: float, alpha: float, power: float, alternative: str) -> tuple[float, float]:
    """Smallest absolute shifts ``(down, up)`` of ``p0`` detected with ``power`` (``inf``: never; ``nan``: not tested).

    ``down`` is ``p0 - q`` for the largest detectable ``q < p0``; ``up`` is ``q - p0`` for the smallest
    detectable ``q > p0``.  The two-sided test spends ``alpha / 2`` on each side, and its power on one
    side is bounded below by that side's region alone.
    """
    a = alpha / 2.0 if alternative == "two-sided" else alpha
    down = up = math.nan
    if alternative in ("less", "two-sided"):
        down = p0 - binomial_detectable_low(n, p0, a, power)
    if alternative in ("greater", "two-sided"):
        up = binomial_detectable_high(n, p0, a, power) - p0
    return down, up
