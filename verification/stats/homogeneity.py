"""Two-sample homogeneity: do two samplers draw from the same distribution?

The draws of sampler A (``n_a``) and sampler B (``n_b``) form a 2 x V contingency table; Pearson's
chi-square for homogeneity (``scipy.stats.chi2_contingency``) compares each cell with
``row total * column total / N``.  No exact probabilities are needed: this is the test between a
kernel and its twin, or a new variant and a trusted one.

Pooling: columns whose smaller expected count ``min(n_a, n_b) * column total / N`` is below
``min_expected`` are pooled into one column (never dropped), by the rule of
:mod:`verification.stats.binning` applied to the observed column totals.  The binning depends on the data
only through the column margins, so the test stays valid conditionally on them.

Power: for distributions ``p`` (A) and ``q`` (B) the noncentrality is
``lambda = (n_a n_b / N) sum_j (p_j - q_j)**2 / m_j`` with ``m = (n_a p + n_b q) / N``; Cauchy-Schwarz
(as in :mod:`verification.stats.power`) gives ``lambda >= 4 tv**2 n_a n_b / N``: two samplers of ``n``
draws each behave like one sampler of ``n / 2`` draws against exact probabilities.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy import stats

from ._validate import check_int, check_positive_real, check_probs, check_rates
from .binning import DEFAULT_MIN_EXPECTED, pool_small_bins
from .binomial import binomial_pvalues
from .counts import as_counts
from .power import check_deviation, chi2_min_detectable_tv, detectable, smallest_n
from .results import StatResult

__all__ = [
    "CategoryHomogeneityResult",
    "HomogeneityResult",
    "category_homogeneity_test",
    "homogeneity_detectable_tv",
    "homogeneity_test",
    "min_detectable_category_homogeneity_probability",
    "min_detectable_homogeneity_tv",
    "required_homogeneity_samples",
]


@dataclass(frozen=True, eq=False, repr=False)
class HomogeneityResult(StatResult):
    """Result of :func:`homogeneity_test`; ``n`` is ``n_a + n_b``.

    Extra attributes: ``n_a``, ``n_b``, ``dof``, ``tested_mass`` (estimated mass of unpooled
    columns), ``pooled_mass`` (the rest: the share of the draws in the pooled column), ``impossible`` (draws
    outside ``[0, V)`` in either sample), ``table`` (the pooled 2 x k table); ``min_detectable_tv_any`` the
    detectable total variation over categories, pooled mass included.
    """

    n_a: int
    n_b: int
    dof: int
    tested_mass: float
    impossible: int
    table: np.ndarray
    pooled_mass: float = 0.0
    _show: ClassVar[tuple[str, ...]] = ("n_a", "n_b", "dof", "tested_mass", "pooled_mass", "impossible")
    _detect_name: ClassVar[str] = "min_detectable_tv"

    @property
    def min_detectable_tv_any(self) -> float:
        """The total variation over categories detected with ``power``: ``min_detectable`` over the pooled
        columns plus ``pooled_mass`` (a deviation inside the pooled column is invisible to the statistic, and
        ``TV_categories <= TV_columns + max(p(P), q(P))``, estimated by the pooled draws' share)."""
        return min(math.inf, self.min_detectable + self.pooled_mass)


def homogeneity_test(
    samples_a,
    samples_b,
    num_categories: int,
    *,
    alpha: float = 1e-6,
    power: float = 0.99,
    min_expected: float = DEFAULT_MIN_EXPECTED,
) -> HomogeneityResult:
    """Chi-square test that two samplers draw from the same distribution over ``num_categories``.

    Fails if the Pearson statistic of the pooled 2 x k table exceeds ``chi2.isf(alpha, k - 1)``
    (p-value ``<= alpha``), or if either sample has a draw outside ``[0, V)``.

    Guarantee: (a) two samplers with the same distribution fail with probability at most ``alpha``
    (asymptotically; measured in ``docs/calibration.md``); (b) two samplers at total variation
    ``>= result.min_detectable`` (over the pooled columns) pass with probability at most
    ``1 - power``.  The detectable TV is ``sqrt(lambda* N / (4 n_a n_b))``: for equal sizes it scales as
    ``sqrt(2 / n)``, i.e. twice the draws of a one-sample test for the same TV.

    Parameters
    ----------
    samples_a, samples_b : array_like of int, or Counts
        Draws of the two samplers.
    num_categories : int
        V.
    alpha, power : float
    min_expected : float
        Pooling threshold on the smaller row's expected count.

    Returns
    -------
    HomogeneityResult

    Raises
    ------
    TypeError, ValueError
        Bad arguments (named in the message).

    Notes
    -----
    Degrees of freedom ``(2 - 1)(k - 1)`` for ``k`` pooled columns; no continuity correction.
    Planning twins: :func:`min_detectable_homogeneity_tv`, :func:`required_homogeneity_samples`.

    References
    ----------
    .. [1] Pearson, K. (1900), *Philosophical Magazine* 50(302), 157-175.
    .. [2] Fisher, R. A. (1922). On the interpretation of chi-square from contingency tables, and the
       calculation of P. *Journal of the Royal Statistical Society* 85(1), 87-94 (degrees of freedom).
    .. [3] Cohen, J. (1988). *Statistical Power Analysis for the Behavioral Sciences*, 2nd ed.,
       chapter 7 (power of contingency chi-square tests through ``w**2``).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> homogeneity_test(rng.integers(0, 5, 2000), rng.integers(0, 5, 2000), 5).passed
    True
    """
    v = check_int(num_categories, "num_categories")
    alpha, power = check_rates(alpha, power)
    min_expected = check_positive_real(min_expected, "min_expected")
    a = as_counts(samples_a, v, "samples_a")
    b = as_counts(samples_b, v, "samples_b")
    n_a, n_b = a.n, b.n
    total = n_a + n_b
    impossible = a.out_of_range + b.out_of_range
    cols = (a.histogram + b.histogram).astype(np.float64)
    col_mass = cols / cols.sum() if cols.sum() > 0 else np.full(v, 1.0 / v)
    binning = pool_small_bins(col_mass, min(n_a, n_b), min_expected)
    keep = binning.labels >= 0
    table = np.stack(
        [
            np.bincount(binning.labels[keep], weights=a.histogram[keep], minlength=binning.num_bins),
            np.bincount(binning.labels[keep], weights=b.histogram[keep], minlength=binning.num_bins),
        ]
    )
    dof = binning.num_bins - 1
    if impossible:
        statistic, pvalue = math.inf, 0.0
    elif dof < 1:
        statistic, pvalue = 0.0, 1.0
    else:
        res = stats.chi2_contingency(table, correction=False)
        statistic, pvalue = float(res.statistic), float(res.pvalue)
    n_eff = n_a * n_b / total
    return HomogeneityResult(
        test="two-sample homogeneity",
        statistic=statistic,
        pvalue=pvalue,
        n=total,
        alpha=alpha,
        power=power,
        min_detectable=chi2_min_detectable_tv(n_eff, dof, alpha, power) if dof >= 1 else math.inf,
        deviation="total variation",
        n_a=n_a,
        n_b=n_b,
        dof=max(dof, 0),
        tested_mass=binning.tested_mass,
        impossible=impossible,
        table=table,
        pooled_mass=binning.pooled_mass,
    )


def homogeneity_detectable_tv(n_a: int, n_b: int, probs: np.ndarray, alpha: float, power: float,
                              min_expected: float = DEFAULT_MIN_EXPECTED) -> float:  # fmt: skip
    """Unchecked core of the planners with a planning law (``probs``, a checked float64 vector): the total
    variation over categories detected at the columns the pooling forms when both samplers draw about
    ``probs``: the columns' detectable TV plus the pooled mass; ``inf`` above 1."""
    b = pool_small_bins(probs, min(n_a, n_b), min_expected)
    if b.num_bins < 2:
        return math.inf
    tv = chi2_min_detectable_tv(n_a * n_b / (n_a + n_b), b.num_bins - 1, alpha, power) + b.pooled_mass
    return tv if tv <= 1.0 else math.inf


def min_detectable_homogeneity_tv(
    n_a: int, n_b: int, num_categories: int, *, probs=None, alpha: float = 1e-6, power: float = 0.99
) -> float:
    """Smallest TV between two samplers that :func:`homogeneity_test` detects with ``power``.

    ``sqrt(lambda* (n_a + n_b) / (4 n_a n_b))`` with ``lambda*`` for ``V - 1`` degrees of freedom.  With
    ``probs`` (a planning law both samplers draw about), at the columns the test's pooling forms on it, plus the
    pooled mass: the total variation over categories, as ``result.min_detectable_tv_any`` states it.
    """
    n_a = check_int(n_a, "n_a")
    n_b = check_int(n_b, "n_b")
    v = check_int(num_categories, "num_categories", minimum=2)
    alpha, power = check_rates(alpha, power)
    if probs is not None:
        p = _planning_law(probs, v)
        return detectable(homogeneity_detectable_tv(n_a, n_b, p, alpha, power), f"n_a={n_a}, n_b={n_b}",
                          "the homogeneity test")  # fmt: skip
    mdtv = chi2_min_detectable_tv(n_a * n_b / (n_a + n_b), v - 1, alpha, power)
    return detectable(mdtv, f"n_a={n_a}, n_b={n_b}", "the homogeneity test")


def required_homogeneity_samples(
    tv: float, num_categories: int, *, probs=None, alpha: float = 1e-6, power: float = 0.99
) -> int:
    """Draws *per sampler* (equal sizes) for :func:`homogeneity_test` to detect a TV of ``tv`` with ``power``
    (with ``probs``: over categories, at the columns pooled on that planning law, as
    :func:`min_detectable_homogeneity_tv`)."""
    v = check_int(num_categories, "num_categories", minimum=2)
    alpha, power = check_rates(alpha, power)
    tv = check_deviation(tv, "tv", alpha=alpha, power=power)
    if probs is not None:
        p = _planning_law(probs, v)
        return smallest_n(lambda n: homogeneity_detectable_tv(n, n, p, alpha, power) <= tv, what=f"tv={tv!r}")
    return smallest_n(lambda n: chi2_min_detectable_tv(n / 2.0, v - 1, alpha, power) <= tv, what=f"tv={tv!r}")


def _planning_law(probs, v: int) -> np.ndarray:
    p = check_probs(probs)
    if p.size != v:
        raise ValueError(f"probs has {p.size} categories but num_categories={v}")
    if np.count_nonzero(p) < 2:
        raise ValueError("probs puts all its mass on one category: no column of the test can differ")
    return p


# ---------------------------------------------------------------------------------------------
# One category at a time
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, repr=False)
class CategoryHomogeneityResult(StatResult):
    """Result of :func:`category_homogeneity_test`; ``statistic`` is the most significant category's draws by
    sampler A, ``pvalue`` ``min(1, K min_i p_i)`` over the ``K`` categories drawn at all.

    Extra attributes: ``worst`` (that category), ``observed_a``, ``observed_b`` (its draws by each sampler),
    ``categories`` (``K``), ``impossible`` (draws outside ``[0, V)``).
    """

    worst: int
    observed_a: int
    observed_b: int
    categories: int
    impossible: int
    _show: ClassVar[tuple[str, ...]] = ("worst", "observed_a", "observed_b", "categories", "impossible")
    _detect_name: ClassVar[str] = "min_detectable_probability"


def category_homogeneity_test(samples_a, samples_b, num_categories: int, *, alpha: float = 1e-6,
                              power: float = 0.99) -> CategoryHomogeneityResult:  # fmt: skip
    """Per-category test that two samplers draw each token equally often: a token one sampler starves or floods.

    Given the ``t_i`` draws of category ``i`` by both samplers, sampler A's share is ``Bin(t_i, n_a / N)`` when
    the laws agree (conditionally on ``t_i``: exact, whatever the common law).  Each category drawn at all gets
    the central two-sided binomial p-value; the test fails if ``min(1, K min_i p_i) <= alpha`` (Bonferroni over
    the ``K`` categories drawn, a number the null law does not change once the ``t_i`` are given), or any draw
    is outside ``[0, V)``.  A chi-square statistic dilutes one such category among thousands; this test does not.

    Guarantee: (a) two samplers with one law fail with probability at most ``alpha``; (b) a token of probability
    ``>= result.min_detectable`` in one law and 0 in the other (a token one sampler never draws) passes with
    probability at most ``1 - power``: its ``t`` draws, Poisson with mean ``n pi`` at least, all fall on one side,
    of probability ``2 (n_a / N)**t``, which is at most ``alpha / V`` from ``t* = log(2V / alpha) / log(N / n_a)``
    draws on (``n`` the smaller sample).  Scales as ``log(V / alpha) / n``.

    Parameters
    ----------
    samples_a, samples_b : array_like of int, or Counts
    num_categories : int
    alpha, power : float

    Returns
    -------
    CategoryHomogeneityResult
    """
    v = check_int(num_categories, "num_categories")
    alpha, power = check_rates(alpha, power)
    a = as_counts(samples_a, v, "samples_a")
    b = as_counts(samples_b, v, "samples_b")
    total = a.n + b.n
    t = a.histogram + b.histogram
    drawn = np.flatnonzero(t)
    impossible = a.out_of_range + b.out_of_range
    share = a.n / total
    if drawn.size == 0 or impossible:
        pv, worst, pvalue = np.ones(1), 0, 0.0 if impossible else 1.0
    else:
        pv = binomial_pvalues(a.histogram[drawn], t[drawn], share)
        worst = int(drawn[int(np.argmin(pv))])
        pvalue = float(min(1.0, drawn.size * pv.min()))
    return CategoryHomogeneityResult(
        test="two-sample per-category",
        statistic=float(a.histogram[worst]),
        pvalue=pvalue,
        n=total,
        alpha=alpha,
        power=power,
        min_detectable=_one_sided_probability(a.n, b.n, v, alpha, power),
        deviation="probability of a token only one sampler draws",
        worst=worst,
        observed_a=int(a.histogram[worst]),
        observed_b=int(b.histogram[worst]),
        categories=int(drawn.size),
        impossible=int(impossible),
    )


def _one_sided_probability(n_a: int, n_b: int, v: int, alpha: float, power: float) -> float:
    """The probability ``pi`` of a token drawn by one sampler only that the per-category test detects with
    ``power`` (see :func:`category_homogeneity_test`); ``inf`` when no ``pi <= 1`` is."""
    n, share = min(n_a, n_b), max(n_a, n_b) / (n_a + n_b)
    draws = math.ceil(math.log(2 * v / alpha) / -math.log(share))  # t* all on one side reach alpha / V
    pi = float(stats.gamma.ppf(power, draws)) / n  # P(Poisson(n pi) >= t*) = power
    return pi if pi <= 1.0 else math.inf


def min_detectable_category_homogeneity_probability(n_a: int, n_b: int, num_categories: int, *,
                                                    alpha: float = 1e-6, power: float = 0.99) -> float:  # fmt: skip
    """Probability of a token only one sampler draws that :func:`category_homogeneity_test` detects with
    ``power`` on ``n_a`` and ``n_b`` draws over ``V`` categories."""
    n_a, n_b = check_int(n_a, "n_a"), check_int(n_b, "n_b")
    v = check_int(num_categories, "num_categories")
    alpha, power = check_rates(alpha, power)
    return detectable(_one_sided_probability(n_a, n_b, v, alpha, power), f"n_a={n_a}, n_b={n_b}",
                      "the per-category homogeneity test")  # fmt: skip
