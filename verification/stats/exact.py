"""Exact multinomial goodness-of-fit test for tiny V and n (no asymptotics).

The p-value of an observed count vector ``x`` is the total probability, under ``Multinomial(n, p)``,
of every outcome no more likely than ``x``::

    pvalue(x) = sum_{y : P(y) <= P(x)} P(y),    P(y) = n! prod_i p_i**y_i / y_i!

(the probability ordering of Tate & Hyer 1973).  All ``C(n + V - 1, V - 1)`` outcomes are enumerated,
so the test is limited to ``MAX_OUTCOMES``; beyond that the chi-square tests are accurate anyway.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np
from scipy import special, stats

from ._validate import check_alpha, check_int, check_law, check_probs
from .counts import as_counts
from .power import check_deviation, detectable, smallest_n
from .results import StatResult

__all__ = [
    "ExactResult",
    "min_detectable_exact_tv",
    "exact_multinomial",
    "exact_power",
    "required_exact_samples",
    "num_outcomes",
]

#: Largest number of enumerated outcomes (each costs V int32 entries and a log-pmf: 1e6 outcomes at
#: V = 8 is about 40 MB and a second of work).
MAX_OUTCOMES = 1_000_000

#: Relative tolerance for "no more likely than" (outcomes whose probabilities differ only by rounding
#: are treated as equally likely, as scipy.stats.binomtest does).
_REL_TIE = 1e-7


def num_outcomes(n: int, num_categories: int) -> int:
    """Number of count vectors of ``n`` draws over ``V`` categories: ``C(n + V - 1, V - 1)``."""
    return math.comb(n + num_categories - 1, num_categories - 1)


@lru_cache(maxsize=16)
def _compositions(n: int, v: int) -> np.ndarray:
    """All count vectors (C, v) summing to n (stars and bars)."""
    total = num_outcomes(n, v)
    out = np.empty((total, v), dtype=np.int32)
    flat = np.fromiter(
        itertools.chain.from_iterable(itertools.combinations(range(n + v - 1), v - 1)),
        dtype=np.int64,
        count=total * (v - 1),
    ).reshape(total, v - 1)
    bars = np.concatenate([np.full((total, 1), -1), flat, np.full((total, 1), n + v - 1)], axis=1)
    out[:] = np.diff(bars, axis=1) - 1
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class _NullLaw:
    outcomes: np.ndarray  # (C, V)
    logpmf: np.ndarray  # (C,)
    pvalues: np.ndarray  # (C,) p-value of each outcome
    sorted_logpmf: np.ndarray  # (C,) ascending
    cumulative: np.ndarray  # (C,) cumulative probability along sorted_logpmf

    def pvalue_of(self, logp: float) -> float:
        """Total probability of the outcomes with log-probability ``<= logp`` (up to ``_REL_TIE``)."""
        idx = int(np.searchsorted(self.sorted_logpmf, logp + math.log1p(_REL_TIE), side="right"))
        return float(min(1.0, self.cumulative[idx - 1])) if idx > 0 else 0.0


@lru_cache(maxsize=16)
def _null_law(n: int, probs_bytes: bytes) -> _NullLaw:
    p = np.frombuffer(probs_bytes, dtype=np.float64)
    v = p.size
    if num_outcomes(n, v) > MAX_OUTCOMES:
        raise ValueError(
            f"exact test would enumerate {num_outcomes(n, v)} outcomes (> {MAX_OUTCOMES}) for n={n}, V={v}; "
            "use pearson_chisquare"
        )
    x = _compositions(n, v)
    logpmf = stats.multinomial.logpmf(x, n, p)
    order = np.argsort(logpmf, kind="stable")
    sorted_lp = logpmf[order]
    cum = np.cumsum(np.exp(sorted_lp))
    last = np.searchsorted(sorted_lp, sorted_lp + math.log1p(_REL_TIE), side="right") - 1
    pv = np.empty_like(logpmf)
    pv[order] = np.minimum(1.0, cum[last])
    return _NullLaw(x, logpmf, pv, sorted_lp, cum)


@dataclass(frozen=True, eq=False, repr=False)
class ExactResult(StatResult):
    """Result of :func:`exact_multinomial` (``statistic`` is ``-log P(observed counts)``)."""

    num_outcomes: int
    impossible: int
    _show: ClassVar[tuple[str, ...]] = ("num_outcomes", "impossible")
    _detect_name: ClassVar[str] = "min_detectable_tv"


def exact_multinomial(samples, probs, *, alpha: float = 1e-6, power: float = 0.99) -> ExactResult:
    """Exact multinomial test that ``samples`` are draws from ``probs`` (tiny V and n).

    Fails if the total probability of outcomes no more likely than the observed counts is ``<= alpha``,
    or if any draw is impossible.

    Guarantee: (a) an exact sampler fails with probability at most ``alpha``, exactly (no asymptotics;
    the test is conservative because outcomes are discrete); (b) a sampler at total variation
    ``>= result.min_detectable`` passes with probability at most ``1 - power``.  The power is computed
    exactly at every alternative tried, but the worst case over the TV sphere is found by a numerical
    search (:func:`min_detectable_exact_tv`), not proven; ``docs/calibration.md`` measures it.  The detectable
    TV scales as ``1 / sqrt(n)`` once ``n`` is large enough that the test can reject at all.

    Parameters
    ----------
    samples : array_like of int, shape (n,), or Counts
    probs : array_like of float, shape (V,)
    alpha, power : float

    Returns
    -------
    ExactResult

    Raises
    ------
    ValueError
        More than ``MAX_OUTCOMES`` outcomes to enumerate; bad arguments.

    Notes
    -----
    The smallest attainable p-value is the probability of the least likely outcome; when it exceeds
    ``alpha`` the test can never fail and ``min_detectable`` is ``inf``.  Planning twins:
    :func:`min_detectable_exact_tv`, :func:`required_exact_samples`, and :func:`exact_power` for a
    given alternative.

    References
    ----------
    .. [1] Tate, M. W. and Hyer, L. A. (1973). Inaccuracy of the X2 test of goodness of fit when
       expected frequencies are small. *Journal of the American Statistical Association* 68(344),
       836-841 (the exact multinomial test with probability ordering).
    .. [2] Radlow, R. and Alf, E. F. (1975). An alternate multinomial assessment of the accuracy of the
       X2 test of goodness of fit. *JASA* 70(352), 811-813 (the same enumeration, ordered by X2).

    Examples
    --------
    >>> exact_multinomial([0, 1, 1, 2, 0, 0], [0.5, 0.3, 0.2], alpha=0.01).passed
    True
    """
    p, alpha, power = check_law(probs, alpha, power)
    counts = as_counts(samples, p.size)
    n = counts.n
    impossible = int(counts.out_of_range + counts.histogram[p == 0].sum())
    law = _null_law(n, p.tobytes())
    if impossible:
        statistic, pvalue = math.inf, 0.0
    else:
        lp = float(stats.multinomial.logpmf(counts.histogram, n, p))
        statistic, pvalue = -lp, law.pvalue_of(lp)
    return ExactResult(
        test="exact multinomial",
        statistic=statistic,
        pvalue=pvalue,
        n=n,
        alpha=alpha,
        power=power,
        min_detectable=_min_tv(n, p, alpha, power),
        deviation="total variation",
        num_outcomes=int(law.outcomes.shape[0]),
        impossible=impossible,
    )


def exact_power(n: int, probs, alternative, *, alpha: float = 1e-6) -> float:
    """Exact probability that :func:`exact_multinomial` fails ``n`` draws from ``alternative``.

    ``sum over rejected outcomes x of Multinomial(n, alternative).pmf(x)``; the rejected outcomes are
    those with p-value ``<= alpha`` under ``probs``.  Outcomes with draws on probability-0 categories
    of ``probs`` are rejected too (impossible draws).
    """
    n = check_int(n, "n")
    p = check_probs(probs)
    q = check_probs(alternative, "alternative")
    if q.size != p.size:
        raise ValueError(f"alternative has {q.size} categories, probs has {p.size}")
    alpha = check_alpha(alpha)
    return _power(n, p, q, alpha)


def _power(n: int, p: np.ndarray, q: np.ndarray, alpha: float) -> float:
    return float(_powers(n, p, q[None, :], alpha)[0])


def _powers(n: int, p: np.ndarray, qs: np.ndarray, alpha: float) -> np.ndarray:
    """Exact power at each row of ``qs`` (K, V): ``sum over rejected x of Multinomial(n, q).pmf(x)``."""
    law = _null_law(n, p.tobytes())
    reject = law.pvalues <= alpha
    if (p == 0).any():
        reject |= (law.outcomes[:, p == 0] > 0).any(axis=1)
    if not reject.any():
        return np.zeros(qs.shape[0])
    x = law.outcomes[reject].astype(np.float64)
    log_coef = special.gammaln(n + 1) - special.gammaln(x + 1).sum(axis=1)
    with np.errstate(divide="ignore"):
        logq = np.log(qs)
    # x_i log q_i with 0 log 0 = 0: replace -inf by a huge negative only where x_i > 0 matters.
    logq = np.where(np.isneginf(logq), -1e300, logq)
    out = np.empty(qs.shape[0])
    chunk = max(1, int(2e7 // max(1, x.shape[0])))
    for s in range(0, qs.shape[0], chunk):
        lp = log_coef[:, None] + x @ logq[s : s + chunk].T
        out[s : s + chunk] = np.exp(lp).sum(axis=0)
    return np.minimum(out, 1.0)


#: Directions sampled on the TV sphere when searching the worst-case alternative (numerical search:
#: for V = 3 the sphere is a closed curve and 4000 points cover it densely).
SPHERE_POINTS = 4000


@lru_cache(maxsize=16)
def _sphere_directions(v: int, k: int) -> np.ndarray:
    """Directions ``d`` with ``sum d = 0`` and ``1/2 |d|_1 = 1``: the faces of the TV sphere, plus its vertices.

    A face point is ``sum_{S+} a_j e_j - sum_{S-} b_i e_i`` with ``a``, ``b`` uniform on simplices and
    ``(S+, S-)`` a random split of a random subset; the vertices are ``e_j - e_i``.
    """
    rng = np.random.default_rng(0)
    verts = [np.eye(v)[j] - np.eye(v)[i] for j in range(v) for i in range(v) if i != j]
    out = np.zeros((k, v))
    for r in range(k):
        perm = rng.permutation(v)
        cut = rng.integers(1, v)  # |S+| in [1, V-1]
        stop = rng.integers(cut + 1, v + 1)  # S- = perm[cut:stop], nonempty
        plus, minus = perm[:cut], perm[cut:stop]
        out[r, plus] = rng.dirichlet(np.ones(plus.size))
        out[r, minus] = -rng.dirichlet(np.ones(minus.size))
    return np.vstack([np.array(verts), out])


def _feasible_extremes(p: np.ndarray, tv: float) -> np.ndarray:
    """Points of the TV sphere that always exist when ``tv <= 1 - p_j``: mass ``tv`` moved to ``j`` from
    the others in proportion, and taken greedily from the others in increasing and decreasing order."""
    out = []
    for j in range(p.size):
        rest = 1.0 - p[j]
        if tv > rest + 1e-15:
            continue
        q = p * (1 - tv / rest)
        q[j] = p[j] + tv
        out.append(q)
        for order in (np.argsort(p, kind="stable"), np.argsort(-p, kind="stable")):
            q = p.copy()
            need = tv
            for i in order:
                if i == j or need <= 0:
                    continue
                take = min(q[i], need)
                q[i] -= take
                need -= take
            q[j] += tv - need
            out.append(q)
    return np.array(out).reshape(-1, p.size)


def _worst_power(n: int, p: np.ndarray, tv: float, alpha: float) -> float:
    qs = p[None, :] + tv * _sphere_directions(p.size, SPHERE_POINTS)
    qs = np.vstack([qs[(qs >= -1e-15).all(axis=1)], _feasible_extremes(p, tv)])
    if qs.shape[0] == 0:
        return 0.0
    return float(_powers(n, p, np.clip(qs, 0.0, 1.0), alpha).min())


def _min_tv(n: int, p: np.ndarray, alpha: float, power: float, tol: float = 1e-4) -> float:
    return _min_tv_cached(n, p.tobytes(), alpha, power, tol)


@lru_cache(maxsize=256)
def _min_tv_cached(n: int, probs_bytes: bytes, alpha: float, power: float, tol: float) -> float:
    p = np.frombuffer(probs_bytes, dtype=np.float64)
    support = p[p > 0]
    max_tv = 1.0 - float(support.min()) if support.size > 1 else 0.0
    if max_tv <= 0 or _worst_power(n, p, max_tv, alpha) < power:
        return math.inf
    lo, hi = 0.0, max_tv
    while hi - lo > tol * hi:
        mid = 0.5 * (lo + hi)
        if _worst_power(n, p, mid, alpha) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def min_detectable_exact_tv(n: int, probs, *, alpha: float = 1e-6, power: float = 0.99) -> float:
    """Smallest TV at which every alternative found on the TV sphere fails :func:`exact_multinomial` with ``power``.

    Bisection (relative tolerance 1e-4, rounded up) on the minimum *exact* power over the vertices of
    the TV sphere around ``probs`` and ``SPHERE_POINTS`` points sampled on its faces (a numerical
    search, dense for V = 3 and V = 4, sparser beyond).  Raises ``ValueError`` when even the largest
    feasible TV is not detected.
    """
    n = check_int(n, "n")
    p, alpha, power = check_law(probs, alpha, power)
    return detectable(_min_tv(n, p, alpha, power), f"n={n}", "the exact multinomial test")


def required_exact_samples(tv: float, probs, *, alpha: float = 1e-6, power: float = 0.99) -> int:
    """An ``n`` with ``min_detectable_exact_tv(n, probs) <= tv`` (doubling then bisection).

    Raises ``ValueError`` when the search needs more than ``MAX_OUTCOMES`` outcomes (use the
    chi-square planning, :func:`verification.required_samples`, there).
    """
    p, alpha, power = check_law(probs, alpha, power)
    tv = check_deviation(tv, "tv", alpha=alpha, power=power)
    v = p.size
    limit = smallest_n(lambda n: num_outcomes(n + 1, v) > MAX_OUTCOMES)  # the most draws the test enumerates
    if (power - alpha) / tv > limit:  # the lower bound of check_deviation
        raise ValueError(f"tv={tv!r} needs more than n={limit} draws, the most the exact test enumerates "
                         f"({MAX_OUTCOMES} outcomes at V={v}); use verification.required_samples")  # fmt: skip
    return smallest_n(lambda n: _min_tv(n, p, alpha, power) <= tv, what=f"tv={tv!r}", limit=limit)
