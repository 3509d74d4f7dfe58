"""Per-category tests: is any single category missing or far off its expected count?

A chi-square statistic sums over all bins, so one bad category among thousands is diluted: moving
half of a ``p = 1e-3`` category's mass elsewhere changes ``X2`` by about ``n p / 4``, invisible next
to the ``sqrt(2 V)`` noise of the other bins until ``n`` is large.  Here every category ``i`` is tested
on its own, its count against ``Bin(n, p_i)`` (exact central two-sided p-value), and Holm's procedure
over all ``V`` categories keeps the chance that an exact sampler flags any category at ``alpha``.

The headline deviation is the *missing-category probability*: a category of probability at least
``1 - (alpha / (2V))**(1/n)`` (about ``log(2V / alpha) / n``) that is never drawn is flagged with
certainty.  :func:`min_detectable_category_shift` gives the detectable shift of any one category.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ._validate import check_alpha, check_fraction, check_int, check_law, check_rates
from .binomial import binomial_pvalues, detectable_shifts
from .counts import Counts, as_counts
from .family import holm
from .power import check_deviation, planned_draws
from .results import Deviation, StatResult

__all__ = [
    "CategoryResult",
    "min_detectable_missing_category",
    "min_detectable_category_shift",
    "required_category_samples",
    "category_test",
]


@dataclass(frozen=True, eq=False, repr=False)
class CategoryResult(StatResult):
    """Result of :func:`category_test`; ``statistic`` is the smallest per-category p-value and ``pvalue``
    the smallest Holm-adjusted one.

    Extra attributes: ``flagged`` (indices rejected by Holm, most significant first),
    ``num_categories``, ``pvalues`` and ``adjusted`` (per category), ``counts``, ``probs``.
    """

    num_categories: int
    flagged: np.ndarray
    pvalues: np.ndarray
    adjusted: np.ndarray
    counts: Counts
    probs: np.ndarray
    _show: ClassVar[tuple[str, ...]] = ("num_categories", "num_flagged")
    _detect_name: ClassVar[str] = "min_detectable_missing"

    @property
    def num_flagged(self) -> int:
        """Number of categories rejected by Holm."""
        return int(self.flagged.size)

    def most_significant(self, k: int = 5) -> list[Deviation]:
        """The ``k`` categories with the smallest p-values, with observed and expected counts."""
        idx = np.argsort(self.pvalues, kind="stable")[: int(k)]
        e = self.counts.n * self.probs
        h = self.counts.histogram
        with np.errstate(divide="ignore", invalid="ignore"):
            r = (h[idx] - e[idx]) / np.sqrt(e[idx])
        r = np.where((e[idx] == 0) & (h[idx] == 0), 0.0, r)
        return [Deviation(int(i), int(h[i]), float(e[i]), float(ri)) for i, ri in zip(idx, r)]

    def detectable_shift(self, p: float) -> tuple[float, float]:
        """Absolute shifts ``(down, up)`` of a category of probability ``p`` detected with ``power``."""
        return min_detectable_category_shift(self.n, p, self.num_categories, alpha=self.alpha, power=self.power)


def category_test(samples, probs, *, alpha: float = 1e-6, power: float = 0.99) -> CategoryResult:
    """Test every category's count against ``Bin(n, p_i)``, with Holm correction over the ``V`` categories.

    Fails if Holm rejects any category at family-wise level ``alpha`` (equivalently
    ``V * min_i p_i <= alpha``), or if any draw is impossible (a probability-0 category or outside
    ``[0, V)``: p-value 0).

    Guarantee, exact: (a) an exact sampler flags some category with probability at most ``alpha``
    (Holm, any dependence); (b) a category of probability ``>= result.min_detectable`` that is never
    drawn is flagged with certainty, and a category of probability ``p`` shifted by at least
    ``result.detectable_shift(p)`` is flagged with probability ``>= power``.  The missing probability
    scales as ``log(2V / alpha) / n``; shifts as ``sqrt(p log(V / alpha) / n)``.

    Parameters
    ----------
    samples : array_like of int, shape (n,), or Counts
    probs : array_like of float, shape (V,)
    alpha, power : float

    Returns
    -------
    CategoryResult

    Raises
    ------
    TypeError, ValueError
        Bad arguments.

    Notes
    -----
    Per-category p-values are central: ``min(1, 2 min(P(X <= k), P(X >= k)))``.  The planning uses
    Bonferroni's ``alpha / V`` per category, which Holm never rejects less than, so the stated power
    is a lower bound.  Planning twins: :func:`min_detectable_missing_category`,
    :func:`required_category_samples`, :func:`min_detectable_category_shift`.

    References
    ----------
    .. [1] Holm, S. (1979). A simple sequentially rejective multiple test procedure. *Scandinavian
       Journal of Statistics* 6(2), 65-70.
    .. [2] Clopper, C. J. and Pearson, E. S. (1934), *Biometrika* 26(4), 404-413.

    Examples
    --------
    >>> import numpy as np
    >>> p = np.full(100, 0.01)
    >>> x = np.random.default_rng(0).integers(0, 99, 20000)      # category 99 is never drawn
    >>> r = category_test(x, p)
    >>> r.passed, r.flagged.tolist()
    (False, [99])
    """
    p, alpha, power = check_law(probs, alpha, power)
    counts = as_counts(samples, p.size)
    n = counts.n
    h = counts.histogram
    pv = binomial_pvalues(h, n, p)
    pv = np.where(p == 0, np.where(h > 0, 0.0, 1.0), pv)
    if counts.out_of_range:
        pv_all = np.r_[pv, 0.0]  # the out-of-range draws count as one more (failed) category
    else:
        pv_all = pv
    rejected, adjusted = holm(pv_all, alpha)
    flagged = np.flatnonzero(rejected[: p.size])
    flagged = flagged[np.argsort(pv[flagged], kind="stable")]
    v = p.size
    return CategoryResult(
        test="per-category binomial (Holm)",
        statistic=float(pv_all.min()),
        pvalue=float(adjusted.min()),
        n=n,
        alpha=alpha,
        power=power,
        min_detectable=_missing(n, v, alpha),
        deviation="missing-category probability",
        num_categories=v,
        flagged=flagged,
        pvalues=pv,
        adjusted=adjusted[: p.size],
        counts=counts,
        probs=p,
    )


def _missing(n: int, v: int, alpha: float) -> float:
    # Smallest p with 2 (1 - p)**n <= alpha / v: then a never-drawn category is rejected by Bonferroni.
    return -math.expm1(math.log(alpha / (2.0 * v)) / n)


def min_detectable_missing_category(n: int, num_categories: int, *, alpha: float = 1e-6) -> float:
    """Smallest probability of a never-drawn category that :func:`category_test` flags (with certainty).

    ``1 - (alpha / (2V))**(1/n)``, about ``log(2V / alpha) / n``.
    """
    n = check_int(n, "n")
    v = check_int(num_categories, "num_categories")
    return _missing(n, v, check_alpha(alpha))


def required_category_samples(missing_probability: float, num_categories: int, *, alpha: float = 1e-6) -> int:
    """Draws for :func:`category_test` to flag a never-drawn category of probability ``missing_probability``.

    ``ceil(log(alpha / (2V)) / log(1 - p))``; satisfies ``min_detectable_missing_category(n) <= p``.
    """
    v = check_int(num_categories, "num_categories")
    alpha = check_alpha(alpha)
    # Flagged with certainty once never drawn: the bound of check_deviation at power 1.
    pm = check_deviation(missing_probability, "missing_probability", alpha=alpha, power=1.0, inclusive_upper=False)
    n = planned_draws(math.log(alpha / (2.0 * v)) / math.log1p(-pm), "missing_probability", missing_probability)
    while _missing(n, v, alpha) > pm:
        n += 1
    return n


def min_detectable_category_shift(
    n: int, p: float, num_categories: int, *, alpha: float = 1e-6, power: float = 0.99
) -> tuple[float, float]:
    """Absolute shifts ``(down, up)`` of one category of probability ``p`` that :func:`category_test` flags
    with probability ``>= power`` (exact binomial at Bonferroni level ``alpha / V``; ``inf`` if never)."""
    n = check_int(n, "n")
    p = check_fraction(p, "p", inclusive_upper=False)
    v = check_int(num_categories, "num_categories")
    alpha, power = check_rates(alpha, power)
    return detectable_shifts(n, p, alpha / v, power, "two-sided")


#: Former name of :func:`min_detectable_category_shift` (the calibration page names it).
category_min_detectable_shift = min_detectable_category_shift
