"""DKWM-envelope CDF test: the empirical CDF, in a declared category order, must stay within
``eps`` of the exact CDF.

Categories are put in a declared order (index order, descending probability, or any permutation);
``F(k)`` is the exact probability of the first ``k + 1`` categories and ``F_n(k)`` the fraction of
draws among them.  By the Dvoretzky-Kiefer-Wolfowitz inequality with Massart's constant,
``P(sup_k |F_n(k) - F(k)| > eps) <= 2 exp(-2 n eps**2)`` for every distribution, discrete included, so
the test bounds BOTH error rates without asymptotics (the approach of TensorFlow Probability's
``statistical_testing`` module):

* false alarm: fail when ``D = sup |F_n - F| > eps_alpha = sqrt(log(2/alpha) / (2n))``;
* false pass: a sampler whose CDF ``G`` has ``sup |G - F| >= eps_alpha + eps_beta`` passes only if
  ``sup |F_n - G| >= eps_beta``, probability ``<= 2 exp(-2 n eps_beta**2) = 1 - power``.

The deviation is the Kolmogorov distance in the declared order (at most the total variation).  The
order matters: descending probability concentrates head errors at the start, index order shows
errors tied to vocabulary position (a dropped last tile, an off-by-one at ``V - 1``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ._validate import check_alpha, check_int, check_law, check_power, check_rates, to_numpy
from .counts import as_counts
from .power import check_deviation, detectable, dkw_epsilon, dkw_min_detectable, dkw_required_samples
from .results import StatResult

__all__ = ["CdfResult", "min_detectable_cdf_distance", "required_cdf_samples", "category_order", "dkwm_cdf_test"]


@dataclass(frozen=True, eq=False, repr=False)
class CdfResult(StatResult):
    """Result of :func:`dkwm_cdf_test`; ``statistic`` is ``D = sup |F_n - F|``.

    Extra attributes: ``epsilon`` (the envelope half-width ``eps_alpha``), ``worst_category`` (the
    category at which ``D`` is attained), ``order`` (the declared order), ``empirical_cdf`` and
    ``exact_cdf`` (in that order).
    """

    epsilon: float
    worst_category: int
    order: np.ndarray
    empirical_cdf: np.ndarray
    exact_cdf: np.ndarray
    _show: ClassVar[tuple[str, ...]] = ("epsilon", "worst_category")

    def envelope(self) -> tuple[np.ndarray, np.ndarray]:
        """The DKWM band ``F_n -+ epsilon`` (clipped to [0, 1]), which contains ``F`` when the test passes."""
        return np.clip(self.empirical_cdf - self.epsilon, 0, 1), np.clip(self.empirical_cdf + self.epsilon, 0, 1)


def category_order(probs, order="index") -> np.ndarray:
    """A permutation of ``range(V)``: ``"index"``, ``"descending"`` (probability, ties by index) or explicit."""
    p = np.asarray(probs, dtype=np.float64)
    if isinstance(order, str):
        if order == "index":
            return np.arange(p.size)
        if order == "descending":
            return np.lexsort((np.arange(p.size), -p))
        raise ValueError(f"order must be 'index', 'descending' or a permutation, got order={order!r}")
    perm = to_numpy(order, "order")
    if perm.ndim != 1 or perm.size != p.size or not np.array_equal(np.sort(perm), np.arange(p.size)):
        raise ValueError(f"order must be a permutation of range({p.size})")
    return perm.astype(np.int64)


def dkwm_cdf_test(samples, probs, *, order="index", alpha: float = 1e-6, power: float = 0.99) -> CdfResult:
    """DKWM-envelope test of the empirical CDF of ``samples`` in a declared category order.

    Fails if ``D = max_k |F_n(k) - F(k)| > sqrt(log(2 / alpha) / (2 n))`` (p-value
    ``min(1, 2 exp(-2 n D**2)) <= alpha``), or if any draw is impossible.

    Guarantee, without asymptotics: (a) an exact sampler fails with probability at most ``alpha``;
    (b) a sampler whose CDF in this order is at Kolmogorov distance ``>= result.min_detectable`` passes
    with probability at most ``1 - power``.  ``min_detectable = eps_alpha + eps_(1-power)`` scales as
    ``1 / sqrt(n)`` and does not depend on V.

    Parameters
    ----------
    samples : array_like of int, shape (n,), or Counts
    probs : array_like of float, shape (V,)
    order : "index", "descending" or permutation of range(V)
        The declared category order of the CDF.
    alpha, power : float

    Returns
    -------
    CdfResult

    Raises
    ------
    TypeError, ValueError
        Bad arguments (named in the message).

    Notes
    -----
    The p-value ``2 exp(-2 n D**2)`` is a bound, so the test is conservative: its actual false-alarm
    rate is below ``alpha`` (measured in ``docs/calibration.md``).  DKW holds for discrete laws since
    the empirical CDF of a discrete law is that of uniforms pushed through ``F**-1``.

    References
    ----------
    .. [1] Dvoretzky, A., Kiefer, J. and Wolfowitz, J. (1956). Asymptotic minimax character of the
       sample distribution function and of the classical multinomial estimator. *Annals of
       Mathematical Statistics* 27(3), 642-669.
    .. [2] Massart, P. (1990). The tight constant in the Dvoretzky-Kiefer-Wolfowitz inequality.
       *Annals of Probability* 18(3), 1269-1283 (two-sided bound with constant 2, for every eps).
    .. [3] TensorFlow Probability, ``tfp.distributions.internal.statistical_testing``
       (``assert_true_cdf_equal_by_dkwm`` and its planning companions): the same two-part design.

    Examples
    --------
    >>> import numpy as np
    >>> p = np.full(4, 0.25)
    >>> dkwm_cdf_test(np.random.default_rng(0).integers(0, 4, 1000), p, alpha=0.01).passed
    True
    """
    p, alpha, power = check_law(probs, alpha, power)
    perm = category_order(p, order)
    counts = as_counts(samples, p.size)
    n = counts.n
    exact = np.cumsum(p[perm])
    emp = np.cumsum(counts.histogram[perm]) / n
    gap = np.abs(emp - exact)
    k = int(np.argmax(gap))
    d = float(gap[k])
    impossible = counts.out_of_range + int(counts.histogram[p == 0].sum())
    pvalue = 0.0 if impossible else min(1.0, 2.0 * math.exp(-2.0 * n * d * d))
    return CdfResult(
        test="DKWM CDF envelope",
        statistic=d,
        pvalue=pvalue,
        n=n,
        alpha=alpha,
        power=power,
        min_detectable=dkw_min_detectable(n, alpha, power),
        deviation="Kolmogorov distance",
        epsilon=dkw_epsilon(n, alpha),
        worst_category=int(perm[k]),
        order=perm,
        empirical_cdf=emp,
        exact_cdf=exact,
    )


def min_detectable_cdf_distance(n: int, *, alpha: float = 1e-6, power: float = 0.99) -> float:
    """Smallest Kolmogorov distance :func:`dkwm_cdf_test` detects with ``power`` on ``n`` draws.

    ``sqrt(log(2/alpha) / (2n)) + sqrt(log(2/(1-power)) / (2n))`` (see the module docstring).
    """
    n = check_int(n, "n")
    alpha = check_alpha(alpha)
    return detectable(dkw_min_detectable(n, alpha, check_power(power, alpha)), f"n={n}", "the DKWM CDF test")


def required_cdf_samples(delta: float, *, alpha: float = 1e-6, power: float = 0.99) -> int:
    """Draws :func:`dkwm_cdf_test` needs to detect a Kolmogorov distance ``delta`` with ``power``.

    ``ceil((sqrt(log(2/alpha)/2) + sqrt(log(2/(1-power))/2))**2 / delta**2)``; independent of V.
    """
    alpha, power = check_rates(alpha, power)
    return dkw_required_samples(check_deviation(delta, "delta", alpha=alpha, power=power), alpha, power)
