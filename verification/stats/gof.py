"""Goodness of fit of categorical draws to exact probabilities: Pearson chi-square and the G-test.

Both statistics compare observed bin counts ``O_j`` with expected counts ``E_j = n p_j`` after the
pooling rule of :mod:`verification.binning` (small expected counts pooled into one bin, never
dropped):

* Pearson (1900):       ``X2 = sum_j (O_j - E_j)**2 / E_j``
* G (Wilks 1938):       ``G  = 2 sum_j O_j log(O_j / E_j)``

both of which are asymptotically ``chi2(k - 1)`` under the null for ``k`` bins; they are the
``lambda = 1`` and ``lambda = 0`` members of the Cressie-Read power-divergence family, computed by
``scipy.stats.power_divergence``.  Power planning is shared (:mod:`verification.planning`): against a
deviation of total variation ``tv`` both have noncentrality at least ``4 n tv**2``.
"""

from __future__ import annotations

import math

from scipy import stats

from .._validate import check_alpha, check_positive_real, check_power, check_probs
from ..binning import DEFAULT_MIN_EXPECTED, pool_small_bins
from ..counts import as_counts
from ..planning import (
    chi2_min_detectable_tv,
    min_detectable_gof_tv,
    min_detectable_tv,
    required_gof_samples,
    required_samples,
)
from ..results import GofResult

__all__ = [
    "g_test",
    "goodness_of_fit",
    "min_detectable_gof_tv",
    "min_detectable_tv",
    "pearson_chisquare",
    "required_gof_samples",
    "required_samples",
]


def _power_divergence_test(samples, probs, alpha, power, min_expected, lambda_: str, name: str) -> GofResult:
    p = check_probs(probs)
    alpha = check_alpha(alpha)
    power = check_power(power, alpha)
    min_expected = check_positive_real(min_expected, "min_expected")
    counts = as_counts(samples, p.size)
    n = counts.n
    binning = pool_small_bins(p, n, min_expected)
    impossible = int(counts.out_of_range + counts.histogram[p == 0].sum())
    dof = binning.num_bins - 1
    if impossible:
        statistic, pvalue = math.inf, 0.0
    elif dof < 1:
        statistic, pvalue = 0.0, 1.0
    else:
        f_obs = binning.bin_counts(counts.histogram)
        f_exp = n * binning.bin_probs / binning.bin_probs.sum()
        res = stats.power_divergence(f_obs, f_exp, lambda_=lambda_)
        statistic, pvalue = float(res.statistic), float(res.pvalue)
    mdtv = chi2_min_detectable_tv(n, dof, alpha, power) if dof >= 1 else math.inf
    return GofResult(
        test=name,
        statistic=statistic,
        pvalue=pvalue,
        n=n,
        alpha=alpha,
        power=power,
        min_detectable=mdtv,
        deviation="total variation",
        dof=max(dof, 0),
        tested_mass=binning.tested_mass,
        pooled_mass=binning.pooled_mass,
        num_bins=binning.num_bins,
        impossible=impossible,
        counts=counts,
        probs=p,
        binning=binning,
    )


def pearson_chisquare(
    samples,
    probs,
    *,
    alpha: float = 1e-6,
    power: float = 0.99,
    min_expected: float = DEFAULT_MIN_EXPECTED,
) -> GofResult:
    """Pearson chi-square test that ``samples`` are draws from ``probs``, with pooling of rare categories.

    Fails if ``X2 = sum_j (O_j - E_j)**2 / E_j`` over the bins exceeds ``chi2.isf(alpha, k - 1)``
    (p-value ``<= alpha``), or if any draw is impossible (probability-0 category or outside ``[0, V)``).

    Guarantee: (a) an exact sampler fails with probability at most ``alpha`` (asymptotically in the
    bin counts; measured in ``docs/calibration.md``); (b) a sampler whose distribution over the bins is
    at total variation ``>= result.min_detectable_tv`` passes with probability at most ``1 - power``.
    The detectable TV scales as ``1 / sqrt(n)``; see :func:`required_samples` and
    :func:`min_detectable_tv`.

    Parameters
    ----------
    samples : array_like of int, shape (n,), or Counts
        Category indices drawn by the sampler under test.
    probs : array_like of float, shape (V,)
        Exact probabilities (summing to 1 within ``V * 2**-23``; float32 input is renormalized in float64).
    alpha : float in (0, 1)
        False-alarm rate.
    power : float in (alpha, 1)
        Target power for the reported ``min_detectable_tv``.
    min_expected : float > 0
        Smallest expected count of a bin of its own (Cochran's 5 by default).

    Returns
    -------
    GofResult
        With ``statistic``, ``pvalue``, ``n``, ``dof``, ``tested_mass``, ``pooled_mass``,
        ``min_detectable_tv``, ``passed``, and methods ``most_deviant``, ``interval``, ``diagnosis``.

    Raises
    ------
    TypeError
        ``samples`` not integer, ``probs`` not real.
    ValueError
        Shapes, an empty sample, ``probs`` not summing to 1, or error rates out of range.

    Notes
    -----
    Validity: every bin has expected count ``>= min_expected`` (the pooling rule of
    :mod:`verification.binning` ensures it, except when all of ``n`` is below ``min_expected``, where
    the test has 0 degrees of freedom and only the impossible-draw check remains).  Degrees of freedom:
    ``k - 1`` for ``k`` bins (no parameter is estimated).  A deviation confined to the pooled bin is
    invisible to the statistic; ``result.min_detectable_tv_any = min_detectable_tv + pooled_mass``
    bounds what is caught over all categories.

    References
    ----------
    .. [1] Pearson, K. (1900). On the criterion that a given system of deviations from the probable in
       the case of a correlated system of variables is such that it can be reasonably supposed to have
       arisen from random sampling. *Philosophical Magazine*, Series 5, 50(302), 157-175.
    .. [2] Cochran, W. G. (1954). Some methods for strengthening the common chi-square tests.
       *Biometrics* 10(4), 417-451 (the expected-count rule, section 4).
    .. [3] Cressie, N. and Read, T. R. C. (1984). Multinomial goodness-of-fit tests. *Journal of the
       Royal Statistical Society B* 46(3), 440-464 (power divergence, eq. 2.1; lambda = 1 is Pearson).

    Examples
    --------
    >>> import numpy as np
    >>> p = np.array([0.5, 0.3, 0.2])
    >>> x = np.random.default_rng(0).choice(3, size=3000, p=p)
    >>> pearson_chisquare(x, p).passed
    True
    """
    return _power_divergence_test(samples, probs, alpha, power, min_expected, "pearson", "pearson chi-square")


def g_test(
    samples,
    probs,
    *,
    alpha: float = 1e-6,
    power: float = 0.99,
    min_expected: float = DEFAULT_MIN_EXPECTED,
) -> GofResult:
    """Likelihood-ratio G-test that ``samples`` are draws from ``probs``, with pooling of rare categories.

    Fails if ``G = 2 sum_j O_j log(O_j / E_j)`` over the bins exceeds ``chi2.isf(alpha, k - 1)``
    (p-value ``<= alpha``), or if any draw is impossible.

    Guarantee: (a) an exact sampler fails with probability at most ``alpha`` (asymptotically, Wilks
    1938; measured in ``docs/calibration.md``); (b) a sampler at total variation
    ``>= result.min_detectable_tv`` over the bins passes with probability at most ``1 - power``
    (``G`` and ``X2`` share the noncentral chi-square limit under local alternatives).  The detectable
    TV scales as ``1 / sqrt(n)``; planning twins :func:`required_samples`, :func:`min_detectable_tv`.

    Parameters
    ----------
    samples : array_like of int, shape (n,), or Counts
    probs : array_like of float, shape (V,)
    alpha, power : float
        False-alarm rate; target power for ``min_detectable_tv``.
    min_expected : float > 0
        Pooling threshold (see :func:`pearson_chisquare`).

    Returns
    -------
    GofResult

    Raises
    ------
    TypeError, ValueError
        As :func:`pearson_chisquare`.

    Notes
    -----
    Same pooling, degrees of freedom and validity conditions as :func:`pearson_chisquare`.  G weighs
    under-sampled bins more than X2 does and is the natural statistic for the log-likelihood view.

    References
    ----------
    .. [1] Wilks, S. S. (1938). The large-sample distribution of the likelihood ratio for testing
       composite hypotheses. *Annals of Mathematical Statistics* 9(1), 60-62.
    .. [2] Cressie, N. and Read, T. R. C. (1984), *JRSS B* 46(3), 440-464 (eq. 2.1 with lambda = 0).

    Examples
    --------
    >>> import numpy as np
    >>> p = np.array([0.5, 0.3, 0.2])
    >>> x = np.random.default_rng(0).choice(3, size=3000, p=p)
    >>> g_test(x, p).passed
    True
    """
    return _power_divergence_test(samples, probs, alpha, power, min_expected, "log-likelihood", "G-test")


def goodness_of_fit(samples, probs, *, alpha: float = 1e-6, power: float = 0.99) -> GofResult:
    """Test that ``samples`` are draws from ``probs``: Pearson chi-square with pooling (the public entry point).

    Fails if the Pearson statistic exceeds its ``1 - alpha`` chi-square quantile or any draw is
    impossible.  Guarantee: (a) an exact sampler fails with probability at most ``alpha``; (b) a sampler
    at total variation ``>= result.min_detectable_tv`` over the tested bins passes with probability at
    most ``1 - power``.  ``min_detectable_tv`` scales as ``1 / sqrt(n)``: quadrupling ``n`` halves it.

    Parameters
    ----------
    samples : array_like of int, shape (n,), or Counts
        Integer category indices.
    probs : array_like of float, shape (V,)
        The exact probabilities.
    alpha : float in (0, 1)
        False-alarm rate (default 1e-6).
    power : float in (alpha, 1)
        Power at which ``min_detectable_tv`` is stated (default 0.99).

    Returns
    -------
    GofResult
        ``statistic``, ``pvalue``, ``n``, ``dof``, ``tested_mass``, ``pooled_mass``,
        ``min_detectable_tv``, ``alpha``, ``power``, ``passed``; ``most_deviant(k)``,
        ``interval(i)``, ``diagnosis()``.

    Raises
    ------
    TypeError, ValueError
        See :func:`pearson_chisquare`.

    Notes
    -----
    Identical to :func:`pearson_chisquare` with ``min_expected = 5``.  Planning:
    ``required_samples(tv, V, alpha=, power=)`` and ``min_detectable_tv(n, V, alpha=, power=)``.

    References
    ----------
    See :func:`pearson_chisquare`.

    Examples
    --------
    >>> import numpy as np
    >>> p = np.full(10, 0.1)
    >>> r = goodness_of_fit(np.random.default_rng(1).integers(0, 10, 20000), p)
    >>> r.passed, r.dof, r.tested_mass
    (True, 9, 1.0)
    """
    return pearson_chisquare(samples, probs, alpha=alpha, power=power)
