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

from ._validate import check_int, check_positive_real, check_rates
from .binning import DEFAULT_MIN_EXPECTED, pool_small_bins
from .counts import as_counts
from .power import check_deviation, chi2_min_detectable_tv, detectable, smallest_n
from .results import StatResult

__all__ = [
    "HomogeneityResult",
    "min_detectable_homogeneity_tv",
    "required_homogeneity_samples",
    "homogeneity_test",
]


@dataclass(frozen=True, eq=False, repr=False)
class HomogeneityResult(StatResult):
    """Result of :func:`homogeneity_test`; ``n`` is ``n_a + n_b``.

    Extra attributes: ``n_a``, ``n_b``, ``dof``, ``tested_mass`` (estimated mass of unpooled
    columns), ``impossible`` (draws outside ``[0, V)`` in either sample), ``table`` (the pooled 2 x k
    table).
    """

    n_a: int
    n_b: int
    dof: int
    tested_mass: float
    impossible: int
    table: np.ndarray
    _show: ClassVar[tuple[str, ...]] = ("n_a", "n_b", "dof", "tested_mass", "impossible")
    _detect_name: ClassVar[str] = "min_detectable_tv"


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
    )


def min_detectable_homogeneity_tv(
    n_a: int, n_b: int, num_categories: int, *, alpha: float = 1e-6, power: float = 0.99
) -> float:
    """Smallest TV between two samplers that :func:`homogeneity_test` detects with ``power``.

    ``sqrt(lambda* (n_a + n_b) / (4 n_a n_b))`` with ``lambda*`` for ``V - 1`` degrees of freedom.
    """
    n_a = check_int(n_a, "n_a")
    n_b = check_int(n_b, "n_b")
    v = check_int(num_categories, "num_categories", minimum=2)
    alpha, power = check_rates(alpha, power)
    mdtv = chi2_min_detectable_tv(n_a * n_b / (n_a + n_b), v - 1, alpha, power)
    return detectable(mdtv, f"n_a={n_a}, n_b={n_b}", "the homogeneity test")


def required_homogeneity_samples(tv: float, num_categories: int, *, alpha: float = 1e-6, power: float = 0.99) -> int:
    """Draws *per sampler* (equal sizes) for :func:`homogeneity_test` to detect a TV of ``tv`` with ``power``."""
    v = check_int(num_categories, "num_categories", minimum=2)
    alpha, power = check_rates(alpha, power)
    tv = check_deviation(tv, "tv", alpha=alpha, power=power)
    return smallest_n(lambda n: chi2_min_detectable_tv(n / 2.0, v - 1, alpha, power) <= tv, what=f"tv={tv!r}")
