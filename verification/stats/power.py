"""The power of each family of tests, and the sample size for a deviation: what every planning twin is built from.

Every test in :mod:`verification.stats` comes with two twins, built from the machinery here: given
``n`` (and the error rates), the smallest deviation it detects; given a deviation, the ``n`` that
detects it.  The pair is consistent by construction: ``min_detectable(required_samples(d)) <= d``.
The chi-square goodness of fit's own twins (``required_samples``, ``min_detectable_tv`` and their
law-aware forms) are in :mod:`verification.stats.gof`.

Chi-square tests (Pearson, G, homogeneity, independence)
--------------------------------------------------------
Under an alternative ``q`` the Pearson statistic on ``k`` bins is approximately noncentral
chi-square with ``dof`` degrees of freedom and noncentrality (Mitra 1958; Cohen 1988, ch. 7, where
``w**2`` is the chi-square distance)::

    lambda = n * chi2(q || p) = n * sum_i (q_i - p_i)**2 / p_i .

For a deviation of total variation ``tv = 1/2 sum_i |q_i - p_i|``, Cauchy-Schwarz gives::

    (2 tv)**2 = (sum_i |q_i - p_i| / sqrt(p_i) * sqrt(p_i))**2 <= sum_i (q_i - p_i)**2 / p_i * sum_i p_i ,

so ``chi2(q || p) >= 4 tv**2`` and ``lambda >= 4 n tv**2`` (Gibbs & Su 2002, the bound
``d_TV <= sqrt(chi2) / 2``).  Equality holds when ``q_i - p_i = +-2 tv p_i`` (half the mass scaled up,
half scaled down): the worst case.  The power of the test at level ``alpha`` is at least
``P(ncx2(dof, 4 n tv**2) > chi2.isf(alpha, dof))``, which increases in ``n tv**2`` and decreases in
``dof``, so ``dof = num_categories - 1`` is conservative whenever pooling merges bins.

The noncentral law is a first-order approximation.  Simulated at the worst case, the power at the
exact ``lambda`` came out 0.989-0.991 for a target of 0.99 (``docs/calibration.md``), so the
planning solves for a miss rate of ``CHI2_MISS_SAFETY * (1 - power)`` instead of ``1 - power``;
this costs about 5 % more samples and makes the stated power hold with margin.

CDF tests (DKWM envelope, KS for the Gumbel maximum)
----------------------------------------------------
With the Dvoretzky-Kiefer-Wolfowitz inequality in Massart's form,
``P(sup |F_n - F| > eps) <= 2 exp(-2 n eps**2)``: a test that fails when
``sup |F_n - F| > eps_alpha = sqrt(log(2 / alpha) / (2 n))`` has false-alarm rate at most ``alpha``;
a sampler whose true CDF ``G`` has ``sup |G - F| >= eps_alpha + eps_beta`` passes only if
``sup |F_n - G| >= eps_beta``, with probability at most ``2 exp(-2 n eps_beta**2) = 1 - power``.
Hence ``n = (sqrt(log(2/alpha)/2) + sqrt(log(2/(1-power))/2))**2 / delta**2``.

Binomial tests (tail mass, ties, single categories)
---------------------------------------------------
Exact: the critical count ``c`` of a one-sided test is the largest ``k`` with
``P(Bin(n, p0) <= k) <= alpha`` and the power at ``q`` is ``P(Bin(n, q) <= c)``, which decreases in
``q``; the detectable ``q`` solves ``P(Bin(n, q) <= c) = power`` (Clopper & Pearson 1934 use the same
monotonicity for their interval).

References
----------
.. [1] Mitra, S. K. (1958). On the limiting power function of the frequency chi-square test.
   *Annals of Mathematical Statistics* 29(4), 1221-1233.
.. [2] Cohen, J. (1988). *Statistical Power Analysis for the Behavioral Sciences*, 2nd ed.
   Lawrence Erlbaum, chapter 7 (effect size ``w``, noncentrality ``lambda = n w**2``).
.. [3] Gibbs, A. L. and Su, F. E. (2002). On choosing and bounding probability metrics.
   *International Statistical Review* 70(3), 419-435 (relation between TV and chi-square distance).
.. [4] Massart, P. (1990). The tight constant in the Dvoretzky-Kiefer-Wolfowitz inequality.
   *Annals of Probability* 18(3), 1269-1283 (the two-sided bound with constant 2, for every eps).
.. [5] Clopper, C. J. and Pearson, E. S. (1934). The use of confidence or fiducial limits
   illustrated in the case of the binomial. *Biometrika* 26(4), 404-413.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

from scipy import optimize, stats

from ._validate import check_alpha, check_fraction, check_int, check_rates

#: Fraction of the target miss rate ``1 - power`` the chi-square planning aims at (see the module
#: docstring: the noncentral chi-square law is first order; at the worst-case deviation the measured
#: power was up to 0.001 short of the target without this margin).
CHI2_MISS_SAFETY = 0.5

#: Largest sample size the planners return; beyond it ``smallest_n`` raises (no sampler test needs
#: 2**62 draws, and int64 counts would overflow).
MAX_SAMPLES = 1 << 62

#: Largest sample size the binomial planners search: scipy's binomial quantile returns NaN from
#: n = 1e16 on (measured with scipy 1.17), so their searches stop below it.
BINOMIAL_MAX_SAMPLES = 10**15


# ---------------------------------------------------------------------------------------------
# Generic search
# ---------------------------------------------------------------------------------------------


def smallest_n(predicate: Callable[[int], bool], start: int = 1, *, what: str = "the target",
               limit: int = MAX_SAMPLES) -> int:  # fmt: skip
    """An ``n >= start`` with ``predicate(n)`` true, found by doubling then bisection.

    The bisection assumes ``predicate`` is monotone; where it is not (discrete tests have saw-tooth
    power), the returned ``n`` still satisfies ``predicate`` (the invariant of the search), it is only
    possibly not the smallest such ``n``.

    Raises
    ------
    ValueError
        No ``n <= limit`` satisfies ``predicate`` (the message names ``what``, e.g. ``"tv=1e-15"``).
    """
    lo, hi = start - 1, max(start, 1)
    if hi > limit:
        raise ValueError(f"no sample size up to {limit:.3g} detects {what}")
    while not predicate(hi):
        lo, hi = hi, min(hi * 2, limit)
        if lo >= limit:
            raise ValueError(f"no sample size up to {limit:.3g} detects {what}")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if predicate(mid):
            hi = mid
        else:
            lo = mid
    return hi


def check_deviation(value, name: str, *, alpha: float, power: float, upper: float = 1.0, scale: float = 1.0,
                    inclusive_upper: bool = True) -> float:  # fmt: skip
    """A deviation in ``(0, upper]`` that some ``n <= MAX_SAMPLES`` can detect with ``power`` at level ``alpha``.

    Any test on ``n`` draws compares the laws ``P^n`` and ``Q^n``, and
    ``TV(P^n, Q^n) <= n TV(P, Q)`` (couple the draws one by one), while rejecting ``Q`` with probability
    ``power`` and ``P`` with at most ``alpha`` needs ``TV(P^n, Q^n) >= power - alpha``.  Every deviation
    measured here (total variation, Kolmogorov distance, a shift of one probability, a missing
    probability) is attained by some ``Q`` at that total variation, so ``n >= (power - alpha) / value``:
    a value below ``(power - alpha) / MAX_SAMPLES`` (about ``2e-19``) raises ``ValueError`` naming
    ``name`` instead of a division by zero or a search that cannot end.  ``scale`` converts a relative
    deviation (a fraction of a tail's mass) to the absolute one the bound is about.
    """
    v = check_fraction(value, name, upper=upper, inclusive_upper=inclusive_upper)
    if (power - alpha) / (v * scale) > MAX_SAMPLES:
        raise ValueError(f"{name}={value!r} is too small: detecting it needs more than 2**62 draws")
    return v


def planned_draws(n: float, name: str, value) -> int:
    """``ceil(n)`` (at least 1) as the planned sample size; ``ValueError`` naming ``name=value`` when ``n``
    exceeds ``MAX_SAMPLES``."""
    if not n <= MAX_SAMPLES:
        raise ValueError(f"{name}={value!r} is too small: detecting it needs more than 2**62 draws")
    return max(1, math.ceil(n))


def detectable(value: float, draws: str, test: str) -> float:
    """``value`` (a public planner's detectable deviation) when finite; else ``ValueError``: the ``draws``
    (``"n=3"``) are too few for ``test`` to detect any deviation of its kind with the requested power.
    The planners raise rather than state a deviation that cannot exist (a total variation above 1)."""
    if not math.isfinite(value):
        raise ValueError(f"{draws} draws are too few: {test} detects no deviation at this alpha and power")
    return value


# ---------------------------------------------------------------------------------------------
# Chi-square family
# ---------------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def chi2_noncentrality(dof: int, alpha: float, power: float) -> float:
    """Noncentrality ``lambda*`` at which a level-``alpha`` chi-square test on ``dof`` degrees of freedom
    reaches ``power`` (with the safety margin ``CHI2_MISS_SAFETY`` on the miss rate).

    Solves ``ncx2.sf(chi2.isf(alpha, dof), dof, lambda) = 1 - CHI2_MISS_SAFETY * (1 - power)``.
    """
    dof = check_int(dof, "dof")
    alpha, power = check_rates(alpha, power)
    target = 1.0 - CHI2_MISS_SAFETY * (1.0 - power)
    crit = stats.chi2.isf(alpha, dof)
    f = lambda lam: stats.ncx2.sf(crit, dof, lam) - target
    hi = max(1.0, crit - dof)
    while f(hi) < 0:
        hi *= 2.0
    return float(optimize.brentq(f, 0.0, hi, xtol=1e-10, rtol=1e-12))


def chi2_power(noncentrality: float, dof: int, alpha: float) -> float:
    """Approximate power ``P(ncx2(dof, noncentrality) > chi2.isf(alpha, dof))`` (no safety margin)."""
    dof = check_int(dof, "dof")
    alpha = check_alpha(alpha)
    return float(stats.ncx2.sf(stats.chi2.isf(alpha, dof), dof, float(noncentrality)))


def chi2_min_detectable_tv(effective_n: float, dof: int, alpha: float, power: float) -> float:
    """Smallest TV a chi-square test with ``lambda >= 4 * effective_n * tv**2`` detects: ``sqrt(lambda*/(4 n))``.

    ``inf`` when that exceeds 1 (no total variation is guaranteed to be detected) or ``dof < 1``.
    """
    if dof < 1:
        return math.inf
    tv = math.sqrt(chi2_noncentrality(dof, alpha, power) / (4.0 * effective_n))
    return tv if tv <= 1.0 else math.inf


# ---------------------------------------------------------------------------------------------
# CDF family (DKWM and exact Kolmogorov-Smirnov)
# ---------------------------------------------------------------------------------------------


def dkw_epsilon(n: int, rate: float) -> float:
    """``eps`` with ``2 exp(-2 n eps**2) = rate``: ``sqrt(log(2 / rate) / (2 n))`` (Massart 1990)."""
    return math.sqrt(math.log(2.0 / rate) / (2.0 * n))


def dkw_min_detectable(n: int, alpha: float, power: float) -> float:
    """Smallest Kolmogorov distance ``sup |G - F|`` the DKWM test detects: ``eps_alpha + eps_(1-power)``
    (``inf`` above 1: no distance is guaranteed to be detected)."""
    d = dkw_epsilon(n, alpha) + dkw_epsilon(n, 1.0 - power)
    return d if d <= 1.0 else math.inf


def dkw_required_samples(delta: float, alpha: float, power: float) -> int:
    """Smallest ``n`` with ``dkw_min_detectable(n, alpha, power) <= delta`` (closed form, then checked)."""
    root = math.sqrt(math.log(2.0 / alpha) / 2.0) + math.sqrt(math.log(2.0 / (1.0 - power)) / 2.0)
    n = planned_draws((root / delta) ** 2, "delta", delta)
    while dkw_min_detectable(n, alpha, power) > delta:
        n += 1
    return n


@lru_cache(maxsize=4096)
def ks_critical_value(n: int, alpha: float) -> float:
    """Exact critical value of the two-sided one-sample KS statistic: ``kstwo.isf(alpha, n)``.

    Never above ``dkw_epsilon(n, alpha)`` (the DKWM bound dominates the exact law).
    """
    c = float(stats.kstwo.isf(alpha, n))
    return min(c, dkw_epsilon(n, alpha)) if math.isfinite(c) else dkw_epsilon(n, alpha)


def ks_min_detectable(n: int, alpha: float, power: float) -> float:
    """Smallest Kolmogorov distance the exact KS test detects: ``c_alpha(n) + eps_(1-power)``.

    If ``sup |G - F| >= c + eps`` then passing needs ``sup |F_n - G| >= eps`` (triangle inequality),
    which has probability at most ``2 exp(-2 n eps**2) = 1 - power`` (Massart 1990).  ``inf`` above 1.
    """
    d = ks_critical_value(n, alpha) + dkw_epsilon(n, 1.0 - power)
    return d if d <= 1.0 else math.inf


# ---------------------------------------------------------------------------------------------
# Binomial family
# ---------------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def binomial_critical_low(n: int, p0: float, alpha: float) -> int:
    """Largest ``k`` with ``P(Bin(n, p0) <= k) <= alpha``; ``-1`` when even ``k = 0`` is too likely."""
    if p0 <= 0:
        return -1
    k = int(stats.binom.ppf(alpha, n, p0))
    while k >= 0 and stats.binom.cdf(k, n, p0) > alpha:
        k -= 1
    while k + 1 <= n and stats.binom.cdf(k + 1, n, p0) <= alpha:
        k += 1
    return k


@lru_cache(maxsize=4096)
def binomial_critical_high(n: int, p0: float, alpha: float) -> int:
    """Smallest ``k`` with ``P(Bin(n, p0) >= k) <= alpha``; ``n + 1`` when even ``k = n`` is too likely."""
    if p0 >= 1:
        return n + 1
    k = int(stats.binom.isf(alpha, n, p0)) + 1
    while k <= n and stats.binom.sf(k - 1, n, p0) > alpha:
        k += 1
    while k - 1 >= 0 and stats.binom.sf(k - 2, n, p0) <= alpha:
        k -= 1
    return min(k, n + 1)


@lru_cache(maxsize=4096)
def binomial_detectable_low(n: int, p0: float, alpha: float, power: float) -> float:
    """Largest ``q <= p0`` that a one-sided 'less' test at level ``alpha`` rejects with probability ``>= power``.

    Returns ``-inf`` when no ``q >= 0`` is detectable (the test can never reject).
    """
    c = binomial_critical_low(n, p0, alpha)
    if c < 0:
        return -math.inf
    f = lambda q: stats.binom.cdf(c, n, q) - power
    q = float(optimize.brentq(f, 0.0, p0, xtol=p0 * 1e-12 + 1e-300, rtol=1e-12))
    while q > 0 and f(q) < 0:  # brentq may land a hair above the root: step to the safe side
        q = max(0.0, q - max(q * 1e-9, 1e-300))
    return q


@lru_cache(maxsize=4096)
def binomial_detectable_high(n: int, p0: float, alpha: float, power: float) -> float:
    """Smallest ``q >= p0`` that a one-sided 'greater' test at level ``alpha`` rejects with probability ``>= power``.

    Returns ``+inf`` when no ``q <= 1`` is detectable.
    """
    c = binomial_critical_high(n, p0, alpha)
    if c > n:
        return math.inf
    f = lambda q: stats.binom.sf(c - 1, n, q) - power
    q = float(optimize.brentq(f, p0, 1.0, xtol=p0 * 1e-12 + 1e-300, rtol=1e-12))
    while q < 1 and f(q) < 0:
        q = min(1.0, q + max(q * 1e-9, 1e-300))
    return q
