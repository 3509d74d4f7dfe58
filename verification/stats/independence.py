"""Independence of paired draws: rows of a batch, consecutive seeds, samples s and s+1, TP ranks.

A sampler keyed by a counter must give independent draws for different rows, seeds, sample indices
and tensor-parallel ranks; a seed collision (``seed + tile * k``, the same stream for two rows)
makes them dependent even when each one alone has the right distribution.  Given pairs ``(x_j, y_j)``
of draws that should be independent, the test builds their contingency table and applies Pearson's
chi-square test of independence (``scipy.stats.chi2_contingency``).

Coarsening: a V x V table is far too sparse for large V, so categories of each coordinate are first
grouped into about ``buckets`` rank classes of equal observed mass (the heaviest categories first,
:func:`verification.stats.binning.equal_mass_buckets`), then rows and columns whose expected cells fall
below ``min_expected`` are pooled.  Both steps depend on the data only through the margins, so the
test stays valid conditionally on them.  Independence of the classes is implied by independence of
the draws, so a failure is always real; a dependence inside one class is not seen.

Power: against a joint law ``pi`` with margins ``pi_x, pi_y`` the noncentrality is
``n sum (pi_ij - pi_x,i pi_y,j)**2 / (pi_x,i pi_y,j) >= 4 n TV(pi, pi_x x pi_y)**2`` (Cauchy-Schwarz,
as in :mod:`verification.stats.power`), with ``(r - 1)(c - 1)`` degrees of freedom.

Lag scan: two streams that must be independent can still overlap with a shift ("seed ``s``'s draw
``j + 1`` equals seed ``s + 1``'s draw ``j``": a counter advanced by the seed).  Pairing draw ``j`` with
draw ``j`` sees nothing; :func:`lag_scan_test` pairs ``x[j + l]`` with ``y[j]`` for every shift ``l`` in
``-K..K`` (``1..K`` within one stream) and corrects for the scan by Bonferroni over the scanned lags.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy import stats

from ._validate import (
    check_alpha,
    check_int,
    check_positive_real,
    check_power,
    check_probs,
    check_rates,
    check_samples,
    to_numpy,
)
from .binning import DEFAULT_MIN_EXPECTED, equal_mass_buckets, pool_small_bins
from .power import check_deviation, chi2_min_detectable_tv, detectable, smallest_n
from .results import StatResult

__all__ = [
    "DEFAULT_MAX_LAG",
    "IndependenceResult",
    "LagScanResult",
    "independence_test",
    "lag_scan_test",
    "min_detectable_independence_tv",
    "min_detectable_lag_scan_tv",
    "required_independence_samples",
    "required_lag_scan_samples",
    "scan_detectable_tv",
    "serial_independence_test",
    "StreamsScanResult",
    "streams_scan_test",
    "min_detectable_streams_scan_tv",
    "required_streams_scan_samples",
    "table_shape",
]

#: Default cap on rank classes per coordinate: 32 x 32 cells keep the degrees of freedom (961) small
#: enough that a TV of a few percent is detectable at 10^5 pairs.
MAX_BUCKETS = 32
#: Shifts scanned each way by :func:`lag_scan_test` (17 lags across two streams, 8 within one): a counter
#: shared between streams shows at the shift between their starts; 8 covers one draw per seed, per row
#: or per sample slot of up to 8 slots, at a Bonferroni cost of log(17) in the level.
DEFAULT_MAX_LAG = 8


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


def _default_buckets(v: int, n: int, min_expected: float) -> int:
    """Rank classes per coordinate: ``min(V, 32, floor(sqrt(n / (4 min_expected))))``, at least 2."""
    return min(v, MAX_BUCKETS, max(2, math.isqrt(int(n / (4 * min_expected)))))


def _labels(values: np.ndarray, v: int, buckets: int) -> np.ndarray:
    margin = np.bincount(values, minlength=v)
    return equal_mass_buckets(margin, buckets)[values]


def _pool_rows(table: np.ndarray, other_min: float, n: int, min_expected: float) -> np.ndarray:
    """Merge the rows of ``table`` whose expected count against the smallest column is small (the pooling
    rule of :mod:`verification.stats.binning` on the row margin); empty rows are dropped."""
    margin = table.sum(axis=1).astype(np.float64)
    labels = pool_small_bins(margin / n, int(other_min), min_expected).labels
    keep = labels >= 0
    out = np.zeros((int(labels.max()) + 1, table.shape[1]), dtype=table.dtype)
    np.add.at(out, labels[keep], table[keep])
    return out


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
    alpha, power = check_rates(alpha, power)
    min_expected = check_positive_real(min_expected, "min_expected")
    xs = check_samples(x, "x").astype(np.int64, copy=False)
    ys = check_samples(y, "y").astype(np.int64, copy=False)
    if xs.shape != ys.shape:
        raise ValueError(f"x and y must pair up: got {xs.size} and {ys.size} draws")
    n = int(xs.size)
    b = buckets if buckets is not None else _default_buckets(v, n, min_expected)
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
        r, c = int(lx.max()) + 1, int(ly.max()) + 1
        table = np.bincount(lx * c + ly, minlength=r * c).reshape(r, c)
        for _ in range(2):  # pooling one side shrinks the other side's smallest class; twice settles it
            table = _pool_rows(table, table.sum(axis=0).min(), n, min_expected)
            table = _pool_rows(table.T, table.sum(axis=1).min(), n, min_expected).T
        r, c = table.shape
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
    alpha, power = check_rates(alpha, power)
    return detectable(chi2_min_detectable_tv(n, (r - 1) * (c - 1), alpha, power), f"n={n}", "the independence test")


def required_independence_samples(
    tv: float, rows: int, columns: int, *, alpha: float = 1e-6, power: float = 0.99
) -> int:
    """Pairs for :func:`independence_test` to detect a TV ``tv`` from independence with ``power``."""
    r = check_int(rows, "rows", minimum=2)
    c = check_int(columns, "columns", minimum=2)
    alpha, power = check_rates(alpha, power)
    tv = check_deviation(tv, "tv", alpha=alpha, power=power)
    dof = (r - 1) * (c - 1)
    return smallest_n(lambda n: chi2_min_detectable_tv(n, dof, alpha, power) <= tv, what=f"tv={tv!r}")


# ---------------------------------------------------------------------------------------------
# Lag scan
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, repr=False)
class LagScanResult(StatResult):
    """Result of :func:`lag_scan_test`; ``statistic`` is the chi-square statistic at ``worst_lag`` and
    ``pvalue`` the Bonferroni-corrected smallest per-lag p-value, ``min(1, L min_l p_l)``.

    Extra attributes: ``lags`` (the ``L`` shifts scanned), ``pvalues`` and ``pairs`` (per lag),
    ``worst_lag`` (the shift with the smallest p-value), ``serial`` (one stream or two), ``impossible``
    (pairs with a draw outside ``[0, V)``).  ``n`` is the number of pairs at the shift with the most.
    """

    lags: np.ndarray
    pvalues: np.ndarray
    pairs: np.ndarray
    worst_lag: int
    serial: bool
    impossible: int
    _show: ClassVar[tuple[str, ...]] = ("worst_lag", "num_lags", "impossible")
    _detect_name: ClassVar[str] = "min_detectable_tv"

    @property
    def num_lags(self) -> int:
        """``L``, the number of shifts scanned (the Bonferroni factor)."""
        return int(self.lags.size)


def _scan_lags(max_lag: int, serial: bool) -> np.ndarray:
    return np.arange(1, max_lag + 1) if serial else np.arange(-max_lag, max_lag + 1)


def _serial_index(size: int, lag: int) -> np.ndarray:
    """Indices ``i`` of the disjoint pairs ``(s[i], s[i + lag])`` of :func:`serial_independence_test`."""
    i = np.arange(max(0, size - lag))
    return i[(i // lag) % 2 == 0]


def _pairs_at(x: np.ndarray, y: np.ndarray | None, lag: int) -> tuple[np.ndarray, np.ndarray]:
    if y is None:
        i = _serial_index(x.size, lag)
        return x[i], x[i + lag]
    if lag >= 0:
        m = min(x.size - lag, y.size)
        return x[lag : lag + m], y[:m]
    m = min(x.size, y.size + lag)
    return x[:m], y[-lag : -lag + m]


def check_lags(lags, serial: bool) -> np.ndarray:
    """``lags`` as a sorted int64 array of distinct lags (``>= 1`` within one stream); ``ValueError`` otherwise."""
    arr = to_numpy(lags, "lags")
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer) or arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"lags must be a non-empty 1-D array of integers, got {lags!r}")
    out = np.unique(arr.astype(np.int64))
    if out.size != arr.size:
        raise ValueError("lags must be distinct")
    if serial and out[0] < 1:
        raise ValueError(f"lags within one stream must be >= 1, got {int(out[0])}")
    return out


def _pairs_in(nx: int, ny: int | None, lag: int) -> int:
    """Pairs :func:`_pairs_at` forms at ``lag`` from streams of ``nx`` and ``ny`` draws (``ny`` None: one)."""
    if ny is None:
        return _pair_count(nx, lag, True)
    return max(0, min(nx - lag, ny) if lag >= 0 else min(nx, ny + lag))


def _pair_count(n: int, lag: int, serial: bool) -> int:
    """Pairs at ``lag`` in streams of ``n`` draws (the size of :func:`_serial_index` for one stream)."""
    if not serial:
        return n - abs(lag)
    blocks, rest = divmod(max(0, n - lag), 2 * lag)
    return blocks * lag + min(rest, lag)


def lag_scan_test(
    x,
    y=None,
    *,
    num_categories: int,
    max_lag: int = DEFAULT_MAX_LAG,
    lags=None,
    alpha: float = 1e-6,
    power: float = 0.99,
) -> LagScanResult:
    """Independence of two streams of draws at every shift ``-K..K`` (or of one stream at lags ``1..K``).

    Two streams (``y`` given): for each shift ``l`` the pairs are ``(x[j + l], y[j])`` over every ``j`` with
    both indices in range, tested by :func:`independence_test` at level ``alpha / L`` (``L = 2K + 1``).
    One stream (``y`` None): the disjoint pairs ``(x[i], x[i + l])`` of :func:`serial_independence_test`
    for ``l = 1..K`` (``L = K``).  Fails if any lag's test rejects at ``alpha / L``: the p-value is
    ``min(1, L min_l p_l)`` (Bonferroni over the scan), or if any draw is outside ``[0, V)``.

    Guarantee: (a) independent streams of iid draws fail with probability at most ``alpha`` (Bonferroni
    holds for any dependence between the lags' statistics; each lag's pairs are iid under the null, its
    chi-square asymptotic as :func:`independence_test`'s); (b) streams whose pairs at some shift ``l`` have a
    joint law at total variation ``>= result.min_detectable`` from independence (over the rank classes
    of the test) pass with probability at most ``1 - power``.  An overlap ``y[j] = x[j + l]`` has total
    variation ``1 - sum_i p_i**2`` over the categories and is caught at a few dozen pairs for a spread law.
    ``min_detectable`` scales as ``1 / sqrt(n)`` and grows like ``sqrt(log L)`` with the scan.

    Parameters
    ----------
    x : array_like of int, shape (n,)
        The first stream (e.g. seed ``s``'s draws of one row, in order).
    y : array_like of int, shape (m,), optional
        The second stream (seed ``s + 1``'s draws of the same row); ``None`` scans ``x`` against itself.
    num_categories : int
        V.
    max_lag : int >= 1 (two streams: >= 0)
        ``K``.
    lags : array_like of int, optional
        The lags to scan instead of ``1..K`` (``-K..K``): distinct, ``>= 1`` within one stream (e.g. ``1..8``
        and the powers of two up to half the stream, :func:`verification.planning.streams.serial_lags`), each
        leaving at least two pairs; ``L`` is their number.
    alpha, power : float

    Returns
    -------
    LagScanResult

    Raises
    ------
    TypeError, ValueError
        Bad arguments; streams too short for the scan (fewer than ``2 K + 2`` draws).

    Notes
    -----
    Within one stream overlapping pairs are not independent of each other, hence the disjoint pairs
    (about ``(n - l) / 2`` at lag ``l``).  Planning twins: :func:`min_detectable_lag_scan_tv`,
    :func:`required_lag_scan_samples`.

    References
    ----------
    .. [1] Dunn, O. J. (1961). Multiple comparisons among means. *Journal of the American Statistical
       Association* 56(293), 52-64 (the Bonferroni bound behind the scan's correction).
    .. [2] Good, I. J. (1953), *Proc. Cambridge Philos. Soc.* 49(2), 276-284 (serial pairs).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> s = rng.integers(0, 20, 3001)
    >>> x, y = s[:-1], s[1:]                         # y[j] = x[j + 1]: seed s + 1 is seed s shifted by one
    >>> lag_scan_test(x, y, num_categories=20).worst_lag
    1
    >>> statistic, pvalue = lag_scan_test(x, rng.integers(0, 20, 3000), num_categories=20)
    >>> pvalue > 1e-6
    True
    """
    v = check_int(num_categories, "num_categories")
    alpha, power = check_rates(alpha, power)
    serial = y is None
    k = check_int(max_lag, "max_lag", minimum=1 if serial else 0)
    xs = check_samples(x, "x").astype(np.int64, copy=False)
    ys = None if serial else check_samples(y, "y").astype(np.int64, copy=False)
    shortest = xs.size if serial else min(xs.size, ys.size)
    if lags is None:
        if shortest < 2 * k + 2:
            raise ValueError(f"streams too short for max_lag={k}: need at least {2 * k + 2} draws, got {shortest}")
        lags = _scan_lags(k, serial)
    else:
        lags = check_lags(lags, serial)
        few = [int(lag) for lag in lags if _pairs_in(xs.size, None if serial else ys.size, int(lag)) < 2]
        if few:
            raise ValueError(f"streams too short for lags {few}: each lag needs two pairs or more")
    a = alpha / lags.size
    results = [independence_test(*_pairs_at(xs, ys, int(lag)), v, alpha=a, power=power) for lag in lags]
    pv = np.array([r.pvalue for r in results])
    worst = int(np.argmin(pv))
    return LagScanResult(
        test="lag scan (serial)" if serial else "lag scan (two streams)",
        statistic=float(results[worst].statistic),
        pvalue=float(min(1.0, lags.size * pv[worst])),
        n=int(max(r.n for r in results)),
        alpha=alpha,
        power=power,
        min_detectable=float(max(r.min_detectable for r in results)),
        deviation="total variation from independence (worst lag)",
        lags=lags,
        pvalues=pv,
        pairs=np.array([r.n for r in results]),
        worst_lag=int(lags[worst]),
        serial=serial,
        impossible=int(max(r.impossible for r in results)),
    )


# ---------------------------------------------------------------------------------------------
# Many streams against one: the seed-bit scan
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, repr=False)
class StreamsScanResult(StatResult):
    """Result of :func:`streams_scan_test`; ``statistic`` is the chi-square statistic of the worst stream at its
    worst shift and ``pvalue`` ``min(1, S min_s p_s)``, ``p_s`` stream ``s``'s lag-scan p-value (itself
    ``min(1, L min_l p_sl)``): Bonferroni over the ``S L`` pairings.

    Extra attributes: ``labels`` (the paired streams' names), ``pvalues`` (per stream, each its scan's
    p-value), ``worst_stream`` (the label of the smallest), ``worst_lag`` (its worst shift), ``num_lags``
    (``L``), ``impossible`` (pairs with a draw outside ``[0, V)``).  ``n`` is the pairs at the shift with the
    most, over the streams.
    """

    labels: tuple[str, ...]
    pvalues: np.ndarray
    worst_stream: str
    worst_lag: int
    num_lags: int
    impossible: int
    _show: ClassVar[tuple[str, ...]] = ("worst_stream", "worst_lag", "num_streams", "num_lags", "impossible")
    _detect_name: ClassVar[str] = "min_detectable_tv"

    @property
    def num_streams(self) -> int:
        """``S``, the streams paired with ``x``."""
        return len(self.labels)


def streams_scan_test(
    x,
    streams,
    *,
    num_categories: int,
    labels=None,
    max_lag: int = DEFAULT_MAX_LAG,
    alpha: float = 1e-6,
    power: float = 0.99,
) -> StreamsScanResult:
    """Independence of one stream from each of several others, at every shift ``-K..K``: the lag scan of
    :func:`lag_scan_test` between ``x`` and each ``streams[s]``, Bonferroni over the streams and the shifts.

    Fails if any stream's scan rejects at ``alpha / S`` (p-value ``min(1, S min_s p_s)``), or any draw is
    outside ``[0, V)``.  Made for the seed-bit scan of :func:`verification.check_sampler`: ``x`` the draws of
    seed ``s``, ``streams[j]`` those of ``s xor 2**j``; a seed truncated or hashed so that two seeds collide
    gives two equal streams, at total variation ``1 - sum p_i**2`` from independence.

    Guarantee: (a) streams of iid draws independent of ``x`` fail with probability at most ``alpha``
    (Bonferroni holds under any dependence between the ``S L`` statistics); (b) if the pairs of ``x`` and
    some stream at some shift have a joint law at total variation ``>= result.min_detectable`` from
    independence (over the test's rank classes), the test passes with probability at most ``1 - power``.
    ``min_detectable`` scales as ``1 / sqrt(n)`` and grows like ``sqrt(log(S L))``.

    Parameters
    ----------
    x : array_like of int, shape (n,)
    streams : sequence of array_like of int
        The ``S >= 1`` streams paired with ``x``.
    num_categories : int
    labels : sequence of str, optional
        A name per stream (default ``"0"``, ``"1"``, ...).
    max_lag : int >= 0
    alpha, power : float

    Returns
    -------
    StreamsScanResult

    Notes
    -----
    Planning twins: :func:`min_detectable_streams_scan_tv`, :func:`required_streams_scan_samples`.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.integers(0, 20, 2000)
    >>> others = [rng.integers(0, 20, 2000), x.copy(), rng.integers(0, 20, 2000)]
    >>> r = streams_scan_test(x, others, num_categories=20, labels=["bit 16", "bit 17", "bit 18"])
    >>> r.passed, r.worst_stream, r.worst_lag
    (False, 'bit 17', 0)
    """
    v = check_int(num_categories, "num_categories")
    alpha, power = check_rates(alpha, power)
    k = check_int(max_lag, "max_lag", minimum=0)
    ys = list(streams)
    if not ys:
        raise ValueError("streams must hold at least one stream")
    names = tuple(str(i) for i in range(len(ys))) if labels is None else tuple(str(s) for s in labels)
    if len(names) != len(ys):
        raise ValueError(f"labels must name each of the {len(ys)} streams, got {len(names)}")
    a = alpha / len(ys)
    scans = [lag_scan_test(x, y, num_categories=v, max_lag=k, alpha=a, power=power) for y in ys]
    pv = np.array([r.pvalue for r in scans])
    worst = int(np.argmin(pv))
    return StreamsScanResult(
        test="lag scan (many streams)",
        statistic=float(scans[worst].statistic),
        pvalue=float(min(1.0, len(ys) * pv[worst])),
        n=int(max(r.n for r in scans)),
        alpha=alpha,
        power=power,
        min_detectable=float(max(r.min_detectable for r in scans)),
        deviation="total variation from independence (worst stream and shift)",
        labels=names,
        pvalues=pv,
        worst_stream=names[worst],
        worst_lag=scans[worst].worst_lag,
        num_lags=scans[worst].num_lags,
        impossible=int(max(r.impossible for r in scans)),
    )


def min_detectable_streams_scan_tv(
    n: int,
    probs_x,
    probs_y=None,
    *,
    num_streams: int,
    max_lag: int = DEFAULT_MAX_LAG,
    alpha: float = 1e-6,
    power: float = 0.99,
) -> float:
    """Smallest total variation from independence, at the worst stream and shift, that
    :func:`streams_scan_test` detects on streams of ``n`` draws from ``probs_x`` and ``probs_y``: each
    stream's scan at level ``alpha / S`` (:func:`min_detectable_lag_scan_tv`)."""
    n = check_int(n, "n")
    s = check_int(num_streams, "num_streams")
    px, py, lags, alpha, power = _scan_arguments(probs_x, probs_y, False, max_lag, None, alpha, power)
    return detectable(scan_detectable_tv(n, px, py, lags, False, alpha / s, power), f"n={n}", "the streams scan")


def required_streams_scan_samples(
    tv: float,
    probs_x,
    probs_y=None,
    *,
    num_streams: int,
    max_lag: int = DEFAULT_MAX_LAG,
    alpha: float = 1e-6,
    power: float = 0.99,
) -> int:
    """Draws per stream for :func:`streams_scan_test` to detect a total variation ``tv`` from independence at
    any stream and shift with ``power``; satisfies ``min_detectable_streams_scan_tv(n, ...) <= tv``."""
    s = check_int(num_streams, "num_streams")
    return required_lag_scan_samples(tv, probs_x, probs_y, max_lag=max_lag, alpha=check_alpha(alpha) / s,
                                     power=power)  # fmt: skip


def _class_masses(probs: np.ndarray, buckets: int) -> np.ndarray:
    p = np.asarray(probs, dtype=np.float64)
    labels = equal_mass_buckets(p, buckets)
    masses = np.bincount(labels[p > 0], weights=p[p > 0], minlength=int(labels.max()) + 1)
    return masses[masses > 0]


def _pooled_classes(masses: np.ndarray, other_min: float, min_expected: float) -> int:
    return pool_small_bins(masses / masses.sum(), max(1, int(other_min)), min_expected).num_bins


def table_shape(probs_x, probs_y, n: int, *, min_expected: float = DEFAULT_MIN_EXPECTED) -> tuple[int, int]:
    """``(rows, columns)`` of the table :func:`independence_test` forms on ``n`` pairs whose margins are
    exactly ``probs_x`` and ``probs_y``: the default rank classes of each coordinate, then the pooling of
    classes whose expected cells fall below ``min_expected`` (the test forms them from the observed
    margins; this is its table at the expected ones).  ``probs_y=None`` uses ``probs_x`` for both."""
    px = np.asarray(probs_x, dtype=np.float64)
    py = px if probs_y is None else np.asarray(probs_y, dtype=np.float64)
    n = check_int(n, "n")
    mx = _class_masses(px, _default_buckets(px.size, n, min_expected))
    my = _class_masses(py, _default_buckets(py.size, n, min_expected))
    r, c = mx.size, my.size
    for _ in range(2):  # as independence_test: pooling one side shrinks the other's smallest class
        r = _pooled_classes(mx, n * my.min(), min_expected) if r > 1 else r
        c = _pooled_classes(my, n * mx.min(), min_expected) if c > 1 else c
    return r, c


def scan_detectable_tv(n: int, px: np.ndarray, py: np.ndarray | None, lags: np.ndarray, serial: bool, alpha: float,
                       power: float) -> float:  # fmt: skip
    """Unchecked core of :func:`min_detectable_lag_scan_tv` for the scan of ``lags`` (the planners' twin): the
    total variation from independence, at the worst lag, detected on streams of ``n`` draws; ``inf`` when none."""
    counts = [_pair_count(n, int(lag), serial) for lag in lags]
    fewest, most = min(counts), max(counts)
    if fewest < 1:
        return math.inf
    # The largest table (at the most pairs) with the fewest pairs bounds every lag's detectable TV: the
    # bound grows with the degrees of freedom and falls with the pairs.
    r, c = table_shape(px, py, most)
    worst = chi2_min_detectable_tv(fewest, (r - 1) * (c - 1), alpha / lags.size, power)
    return worst if worst <= 1.0 else math.inf


def _scan_arguments(probs_x, probs_y, serial: bool, max_lag, lags, alpha, power):
    """The lag-scan planners' checked arguments ``(px, py, lags, alpha, power)``."""
    px = check_probs(probs_x, "probs_x")
    py = None if probs_y is None else check_probs(probs_y, "probs_y")
    k = check_int(max_lag, "max_lag", minimum=1 if serial else 0)
    lags = _scan_lags(k, serial) if lags is None else check_lags(lags, serial)
    alpha = check_alpha(alpha)
    return px, py, lags, alpha, check_power(power, alpha)


def min_detectable_lag_scan_tv(
    n: int,
    probs_x,
    probs_y=None,
    *,
    serial: bool = False,
    max_lag: int = DEFAULT_MAX_LAG,
    lags=None,
    alpha: float = 1e-6,
    power: float = 0.99,
) -> float:
    """Smallest total variation from independence, at the worst shift, that :func:`lag_scan_test` detects
    on two streams of ``n`` draws from ``probs_x`` and ``probs_y`` (or one stream of ``n`` draws from
    ``probs_x`` with ``serial=True``), each lag at level ``alpha / L``, at the table
    :func:`table_shape` gives for that lag's pairs.  ``lags`` as :func:`lag_scan_test`'s.  ``ValueError``
    when ``n`` is too small for any."""
    n = check_int(n, "n")
    px, py, lags, alpha, power = _scan_arguments(probs_x, probs_y, serial, max_lag, lags, alpha, power)
    return detectable(scan_detectable_tv(n, px, py, lags, serial, alpha, power), f"n={n}", "the lag scan")


def required_lag_scan_samples(
    tv: float,
    probs_x,
    probs_y=None,
    *,
    serial: bool = False,
    max_lag: int = DEFAULT_MAX_LAG,
    lags=None,
    alpha: float = 1e-6,
    power: float = 0.99,
) -> int:
    """Draws per stream for :func:`lag_scan_test` to detect a total variation ``tv`` from independence at
    any scanned shift with ``power``; satisfies ``min_detectable_lag_scan_tv(n, ...) <= tv``."""
    px, py, lags, alpha, power = _scan_arguments(probs_x, probs_y, serial, max_lag, lags, alpha, power)
    tv = check_deviation(tv, "tv", alpha=alpha, power=power)
    start = 2 * int(np.abs(lags).max()) + 2
    return smallest_n(lambda n: scan_detectable_tv(n, px, py, lags, serial, alpha, power) <= tv, start=start,
                      what=f"tv={tv!r}")  # fmt: skip
