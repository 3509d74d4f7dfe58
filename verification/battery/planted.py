"""Planted deviations of an exactly known size: the alternatives at which power claims are checked.

Each function returns a probability vector ``q`` at a stated distance from ``p``.  They are not
models of real bugs (:mod:`verification.battery.mutants` has those); they are the shapes a power claim must
survive, including the worst case of the chi-square bound:

* :func:`proportional` - ``q_i = p_i (1 + a)`` on one half of the mass, ``p_i (1 - b)`` on the other:
  equality in Cauchy-Schwarz, so the chi-square noncentrality is as small as a TV allows;
* :func:`tilt` - ``q ~ p**beta`` (a temperature error), TV solved for;
* :func:`transfer` - mass moved to one category from all others in proportion;
* :func:`starve` - the lowest-probability categories emptied, their mass given to the top one;
* :func:`cdf_shift` - mass moved from the first categories of an order to a later one (Kolmogorov
  distance exactly ``delta``).
"""

from __future__ import annotations

import numpy as np
from scipy import optimize

__all__ = [
    "at_binned_tv",
    "binned",
    "cdf_shift",
    "proportional",
    "starve",
    "tilt",
    "total_variation",
    "transfer",
]


def total_variation(p: np.ndarray, q: np.ndarray) -> float:
    """``1/2 sum |p - q|``."""
    return 0.5 * float(np.abs(np.asarray(p, dtype=np.float64) - np.asarray(q, dtype=np.float64)).sum())


def binned(p: np.ndarray, labels: np.ndarray, num_bins: int) -> np.ndarray:
    """Bin masses of ``p`` under ``labels`` (``-1`` ignored)."""
    keep = labels >= 0
    return np.bincount(labels[keep], weights=np.asarray(p)[keep], minlength=num_bins)


def at_binned_tv(make, p: np.ndarray, labels: np.ndarray, num_bins: int, tv: float) -> np.ndarray:
    """``make(t)`` with ``t`` solved so that the TV between the *binned* ``p`` and ``make(t)`` is ``tv``.

    Chi-square claims are about binned distributions (a deviation inside the pooled bin is invisible);
    this plants a deviation of exactly the claimed binned size.  ``make(0)`` must be ``p``.
    """
    pb = binned(p, labels, num_bins)
    f = lambda t: total_variation(pb, binned(make(t), labels, num_bins)) - tv
    if abs(f(tv)) < 1e-12:
        return make(tv)
    hi = tv
    while f(hi) < 0:
        if hi >= 1.0:
            raise ValueError(f"cannot reach binned tv={tv}")
        hi = min(2 * hi, 1.0)
    return make(optimize.brentq(f, 0.0, hi, xtol=1e-14))


def proportional(p: np.ndarray, tv: float) -> np.ndarray:
    """Scale up the categories holding about half the mass and scale down the rest, TV exactly ``tv``.

    Categories are assigned greedily (largest first, to the lighter side) to two sets of masses
    ``m+`` and ``m-``; then ``q = p (1 + tv / m+)`` on the first and ``p (1 - tv / m-)`` on the second.
    Needs ``tv <= m-``.
    """
    p = np.asarray(p, dtype=np.float64)
    sign = np.zeros(p.size)
    m = [0.0, 0.0]
    for i in np.argsort(-p, kind="stable"):
        if p[i] == 0:
            continue
        side = 0 if m[0] <= m[1] else 1
        sign[i] = 1.0 if side == 0 else -1.0
        m[side] += p[i]
    if tv > m[1]:
        raise ValueError(f"tv={tv} exceeds the mass {m[1]} that can be scaled down")
    q = np.where(sign > 0, p * (1 + tv / m[0]), p * (1 - tv / m[1]))
    return q / q.sum()


def tilt(p: np.ndarray, tv: float, *, sharpen: bool = True) -> np.ndarray:
    """``q ~ p**beta`` (``beta > 1`` sharpens, ``< 1`` flattens) with ``TV(p, q) = tv`` (solved by Brent)."""
    p = np.asarray(p, dtype=np.float64)
    logp = np.log(np.where(p > 0, p, 1.0))

    def q_of(beta: float) -> np.ndarray:
        w = np.where(p > 0, np.exp(beta * logp - (beta * logp[p > 0]).max()), 0.0)
        return w / w.sum()

    f = lambda b: total_variation(p, q_of(b)) - tv
    if sharpen:
        hi = 2.0
        while f(hi) < 0:
            hi *= 2.0
            if hi > 1e6:
                raise ValueError(f"cannot sharpen p to tv={tv}")
        beta = optimize.brentq(f, 1.0, hi, xtol=1e-13)
    else:
        if f(0.0) < 0:
            raise ValueError(f"cannot flatten p to tv={tv}")
        beta = optimize.brentq(f, 0.0, 1.0, xtol=1e-13)
    return q_of(beta)


def transfer(p: np.ndarray, tv: float, to: int) -> np.ndarray:
    """Move mass ``tv`` to category ``to`` from all others in proportion to their probabilities."""
    p = np.asarray(p, dtype=np.float64)
    rest = 1.0 - p[to]
    if tv > rest:
        raise ValueError(f"tv={tv} exceeds the mass {rest} outside category {to}")
    q = p * (1 - tv / rest)
    q[to] = p[to] + tv
    return q


def starve(p: np.ndarray, tv: float) -> np.ndarray:
    """Empty the lowest-probability categories (partially the last one) by mass ``tv``; give it to the top one."""
    p = np.asarray(p, dtype=np.float64)
    q = p.copy()
    need = tv
    for i in np.argsort(p, kind="stable"):
        if need <= 0:
            break
        take = min(q[i], need)
        q[i] -= take
        need -= take
    q[int(np.argmax(p))] += tv - need
    return q


def cdf_shift(p: np.ndarray, delta: float, order: np.ndarray | None = None, to: int | None = None) -> np.ndarray:
    """Move mass ``delta`` from the first categories of ``order`` (greedily) to category ``to`` (default: the
    last of ``order``).  In that order ``sup |G - F| = delta`` exactly, provided ``to`` comes after the
    emptied categories."""
    p = np.asarray(p, dtype=np.float64)
    perm = np.arange(p.size) if order is None else np.asarray(order)
    to = int(perm[-1]) if to is None else int(to)
    q = p.copy()
    need = delta
    for i in perm:
        if need <= 0:
            break
        if i == to:
            raise ValueError(f"delta={delta} exceeds the mass before category {to}")
        take = min(q[i], need)
        q[i] -= take
        need -= take
    q[to] += delta
    return q
