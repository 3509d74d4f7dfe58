"""Independence of paired draws: rows of a batch, consecutive seeds, samples s and s+1, TP ranks.

A sampler keyed by a counter must give independent draws for different rows, seeds, sample indices
and tensor-parallel ranks; a seed collision (``seed + tile * k``, the same stream for two rows)
makes them dependent even when each one alone has the right distribution.  Given pairs ``(x_j, y_j)``
of draws that should be independent, the test builds their contingency table and applies Pearson's
chi-square test of independence (``scipy.stats.chi2_contingency``).

Coarsening: a V x V table is far too sparse for large V, so categories of each coordinate are first
grouped into about ``buckets`` rank classes of equal observed mass (the heaviest categories first,
:func:`verification.binning.equal_mass_buckets`), then rows and columns whose expected cells fall
below ``min_expected`` are pooled.  Both steps depend on the data only through the margins, so the
test stays valid conditionally on them.  Independence of the classes is implied by independence of
the draws, so a failure is always real; a dependence inside one class is not seen.

Power: against a joint law ``pi`` with margins ``pi_x, pi_y`` the noncentrality is
``n sum (pi_ij - pi_x,i pi_y,j)**2 / (pi_x,i pi_y,j) >= 4 n TV(pi, pi_x x pi_y)**2`` (Cauchy-Schwarz,
as in :mod:`verification.planning`), with ``(r - 1)(c - 1)`` degrees of freedom.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy import stats

from .._validate import check_alpha, check_int, check_positive_real, check_power, check_samples
from ..binning import DEFAULT_MIN_EXPECTED, equal_mass_buckets, pool_small_bins
from ..planning import check_deviation, chi2_min_detectable_tv, detectable, smallest_n
from ..results import StatResult

__all__ = [
    "IndependenceResult",
    "min_detectable_independence_tv",
    "required_independence_samples",
    "independence_test",
    "serial_independence_test",
]

#: Default cap on rank classes per coordinate: 32 x 32 cells keep the degrees of freedom (961) small
#: enough that a TV of a few percent is detectable at 10^5 pairs.
MAX_BUCKETS = 32


@dataclass(frozen=True, eq=False, repr=False)
class IndependenceResult(StatResult):
    """Result of :func:`independence_test`; ``n`` is the number of pairs.

    Extra attributes: ``dof``, ``shape`` (rows, columns of the pooled table), ``impossible`` (pairs
    with a draw outside ``[0, V)``), ``table``.
    """

    dof: int
    shape: tuple[int, int]
    impossible: int
    table: np.ndarray
    _show: ClassVar[tuple[str, ...]] = ("dof", "shape", "impossible")
    _detect_name: ClassVar[str] = "min_detectable_tv"


def _labels(values: np.ndarray, v: int, buckets: int) -> np.ndarray:
    margin = np.bincount(values, minlength=v)
    return equal_mass_buckets(margin, buckets)[values]


def _pool(labels: np.ndarray, other_min: float, n: int, min_expected: float) -> np.ndarray:
    """Pool classes whose expected count against the smallest class of the other coordinate is small."""
    k = int(labels.max()) + 1
    margin = np.bincount(labels, minlength=k).astype(np.float64)
    binning = pool_small_bins(margin / n, int(other_min), min_expected)
    return binning.labels[labels]


def independence_test(
    x,
    y,
    num_categories: int,
    *,
    buckets: int | None = None,
    alpha: float = 1e-6,
    power: float = 0.99,
    min_expected: float = DEFAULT_MIN_EXPECTED,
) -> IndependenceResult:
    """Chi-square test that paired draws ``x[j]`` and ``y[j]`` are independent.

    Fails if Pearson's statistic of the coarsened, pooled contingency table exceeds
    ``chi2.isf(alpha, (r - 1)(c - 1))`` (p-value ``<= alpha``), or if any draw is outside ``[0, V)``.

    Guarantee: (a) independent pairs fail with probability at most ``alpha`` (asymptotically;
    measured in ``docs/calibration.md``); (b) pairs whose joint law over the classes is at total
    variation ``>= result.min_detectable`` from the product of its margins pass with probability at
    most ``1 - power``.  Scales as ``1 / sqrt(n)`` and grows like ``(r c)**(1/4)`` with the table size.

    Parameters
    ----------
    x, y : array_like of int, shape (n,)
        Paired draws (e.g. row 0 and row 1 of the same sample index; seed k and seed k + 1).
    num_categories : int
        V (both coordinates).
    buckets : int, optional
        Rank classes per coordinate; default ``min(V, 32, floor(sqrt(n / (4 min_expected))))``.
    alpha, power : float
    min_expected : float
        Pooling threshold for expected cell counts.

    Returns
    -------
    IndependenceResult

    Raises
    ------
    TypeError, ValueError
        ``x`` and ``y`` of different lengths; bad arguments.

    Notes
    -----
    Draws of the pairs must be independent *across* pairs (distinct rows, samples or seeds per pair);
    for one stream use :func:`serial_independence_test`, which takes disjoint pairs.  Planning
    twins: :func:`min_detectable_independence_tv`, :func:`required_independence_samples`.

    References
    ----------
    .. [1] Pearson, K. (1900), *Philosophical Magazine* 50(302), 157-175.
    .. [2] Fisher, R. A. (1922). On the interpretation of chi-square from contingency tables, and the
       calculation of P. *Journal of the Royal Statistical Society* 85(1), 87-94.
    .. [3] Cohen, J. (1988). *Statistical Power Analysis for the Behavioral Sciences*, 2nd ed.,
       chapter 7.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x, y = rng.integers(0, 50, 5000), rng.integers(0, 50, 5000)
    >>> independence_test(x, y, 50).passed
    True
    >>> independence_test(x, x, 50).passed
    False
    """
    v = check_int(num_categories, "num_categories")
    alpha = check_alpha(alpha)
    power = check_power(power, alpha)
    min_expected = check_positive_real(min_expected, "min_expected")
    xs = check_samples(x, "x").astype(np.int64, copy=False)
    ys = check_samples(y, "y").astype(np.int64, copy=False)
    if xs.shape != ys.shape:
        raise ValueError(f"x and y must pair up: got {xs.size} and {ys.size} draws")
    n = int(xs.size)
    b = buckets if buckets is not None else min(v, MAX_BUCKETS, max(2, math.isqrt(int(n / (4 * min_expected)))))
    b = check_int(b, "buckets", minimum=2) if v >= 2 else 1
    inside = (xs >= 0) & (xs < v) & (ys >= 0) & (ys < v)
    impossible = int(n - np.count_nonzero(inside))
    if impossible:
        lx = np.zeros(1, dtype=np.int64)
        table = np.zeros((1, 1))
        dof, shape = 0, (1, 1)
        statistic, pvalue = math.inf, 0.0
    else:
        lx, ly = _labels(xs, v, b), _labels(ys, v, b)
        for _ in range(2):  # pooling one side shrinks the other side's smallest class; twice settles it
            lx = _pool(lx, np.bincount(ly).min(), n, min_expected)
            ly = _pool(ly, np.bincount(lx).min(), n, min_expected)
        r, c = int(lx.max()) + 1, int(ly.max()) + 1
        table = np.bincount(lx * c + ly, minlength=r * c).reshape(r, c)
        shape = (r, c)
        dof = (r - 1) * (c - 1)
        if dof < 1:
            statistic, pvalue = 0.0, 1.0
        else:
            res = stats.chi2_contingency(table, correction=False)
            statistic, pvalue = float(res.statistic), float(res.pvalue)
    return IndependenceResult(
        test="independence (contingency)",
        statistic=statistic,
        pvalue=pvalue,
        n=n,
        alpha=alpha,
        power=power,
        min_detectable=chi2_min_detectable_tv(n, dof, alpha, power) if dof >= 1 else math.inf,
        deviation="total variation from independence",
        dof=dof,
        shape=shape,
        impossible=impossible,
        table=table,
    )


def serial_independence_test(
    samples,
    num_categories: int,
    *,
    lag: int = 1,
    buckets: int | None = None,
    alpha: float = 1e-6,
    power: float = 0.99,
) -> IndependenceResult:
    """Independence of draws ``lag`` apart in one stream (samples s and s + lag), on disjoint pairs.

    The pairs are ``(s[i], s[i + lag])`` for ``i`` with ``(i // lag)`` even, so every draw is used at
    most once and the pairs are independent of each other under the null (overlapping pairs are not:
    their chi-square statistic does not have a chi-square law, Good 1953).  Otherwise as
    :func:`independence_test`; ``n`` is the number of pairs, about ``len(samples) / 2``.

    References
    ----------
    .. [1] Good, I. J. (1953). The serial test for sampling numbers and other tests for randomness.
       *Proceedings of the Cambridge Philosophical Society* 49(2), 276-284.
    .. [2] Knuth, D. E. (1997). *The Art of Computer Programming, Vol. 2: Seminumerical Algorithms*,
       3rd ed., section 3.3.2 (the serial test on non-overlapping pairs).
    """
    s = check_samples(samples)
    lag = check_int(lag, "lag")
    i = np.arange(s.size - lag)
    i = i[(i // lag) % 2 == 0]
    if i.size == 0:
        raise ValueError(f"samples too short for lag={lag}: need more than {lag} draws")
    return independence_test(s[i], s[i + lag], num_categories, buckets=buckets, alpha=alpha, power=power)


def min_detectable_independence_tv(
    n: int, rows: int, columns: int, *, alpha: float = 1e-6, power: float = 0.99
) -> float:
    """Smallest TV from independence that :func:`independence_test` detects on an ``rows x columns`` table."""
    n = check_int(n, "n")
    r = check_int(rows, "rows", minimum=2)
    c = check_int(columns, "columns", minimum=2)
    alpha = check_alpha(alpha)
    power = check_power(power, alpha)
    return detectable(chi2_min_detectable_tv(n, (r - 1) * (c - 1), alpha, power), f"n={n}", "the independence test")


def required_independence_samples(
    tv: float, rows: int, columns: int, *, alpha: float = 1e-6, power: float = 0.99
) -> int:
    """Pairs for :func:`independence_test` to detect a TV ``tv`` from independence with ``power``."""
    r = check_int(rows, "rows", minimum=2)
    c = check_int(columns, "columns", minimum=2)
    alpha = check_alpha(alpha)
    power = check_power(power, alpha)
    tv = check_deviation(tv, "tv", alpha=alpha, power=power)
    dof = (r - 1) * (c - 1)
    return smallest_n(lambda n: chi2_min_detectable_tv(n, dof, alpha, power) <= tv, what=f"tv={tv!r}")
