"""KS test that the perturbed maximum is Gumbel(logsumexp, 1).

For logits ``z``, temperature ``T`` and iid standard Gumbel noise ``G_i``, the maximum
``M = max_i (z_i / T + G_i)`` is Gumbel with location ``logsumexp(z / T)`` and scale 1, and it is
independent of the argmax (Gumbel 1954; Maddison, Tarlow and Minka 2014, section 2).  A variant that
exposes ``M`` can therefore be checked on a continuous statistic, which sees noise defects (a capped
uniform, a wrong scale, a temperature applied after the noise) in every draw rather than only through
which token wins.  The check is the one-sample Kolmogorov-Smirnov test (``scipy.stats.kstest``) with
its exact null law (Simard and L'Ecuyer 2011).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np
from scipy import optimize, special, stats

from ._validate import check_alpha, check_int, check_positive_real, check_power, check_rates, to_numpy
from .power import (
    check_deviation,
    detectable,
    dkw_epsilon,
    ks_critical_value,
    ks_min_detectable,
    planned_draws,
    smallest_n,
)
from .results import StatResult

__all__ = [
    "GumbelResult",
    "gumbel_max_test",
    "min_detectable_gumbel_distance",
    "min_detectable_gumbel_shift",
    "required_gumbel_samples",
    "gumbel_shift_distance",
]

#: Euler-Mascheroni constant: the mean of a standard Gumbel variable.
EULER_GAMMA = 0.5772156649015329


@dataclass(frozen=True, eq=False, repr=False)
class GumbelResult(StatResult):
    """Result of :func:`gumbel_max_test`; ``statistic`` is the KS distance ``sup |F_n - F|``.

    Extra attributes: ``loc`` (the exact location ``logsumexp(z/T)``), ``mean_offset``
    (``mean(M) - loc - gamma``, about 0 for a correct sampler, standard error ``1.28 / sqrt(n)``),
    ``min_detectable_shift`` (smallest location shift, in nats, detected with ``power``).
    """

    loc: float
    mean_offset: float
    min_detectable_shift: float
    _show: ClassVar[tuple[str, ...]] = ("loc", "mean_offset", "min_detectable_shift")


def gumbel_shift_distance(shift: float) -> float:
    """Kolmogorov distance between Gumbel(0, 1) and Gumbel(shift, 1).

    With ``u = exp(-x)`` and ``a = exp(|shift|)`` the CDF gap ``exp(-u) - exp(-a u)`` is largest at
    ``u = log(a) / (a - 1)``.
    """
    d = abs(float(shift))
    if d == 0:
        return 0.0
    a = math.exp(d)
    u = d / math.expm1(d)
    return math.exp(-u) - math.exp(-a * u)


@lru_cache(maxsize=1024)
def _shift_for_distance(delta: float) -> float:
    if delta >= 1.0:
        return math.inf
    return float(optimize.brentq(lambda s: gumbel_shift_distance(s) - delta, 0.0, 60.0, xtol=1e-12))


def gumbel_max_test(
    maxima,
    logits=None,
    *,
    temperature: float = 1.0,
    loc: float | None = None,
    alpha: float = 1e-6,
    power: float = 0.99,
) -> GumbelResult:
    """Kolmogorov-Smirnov test that the perturbed maxima are Gumbel(logsumexp(z / T), 1).

    Fails if the exact KS p-value of ``maxima`` against ``gumbel_r(loc, 1)`` is ``<= alpha``.

    Guarantee: (a) a correct sampler fails with probability at most ``alpha`` (exact for a continuous
    law); (b) a sampler whose maximum has a CDF at Kolmogorov distance ``>= result.min_detectable``
    passes with probability at most ``1 - power`` (``c_alpha(n) + sqrt(log(2/(1-power))/(2n))``, by
    the triangle inequality and the DKWM bound).  Scales as ``1 / sqrt(n)``; a location shift of
    ``result.min_detectable_shift`` nats is detected.

    Parameters
    ----------
    maxima : array_like of float, shape (n,)
        One perturbed maximum per draw (independent draws).
    logits : array_like of float, shape (V,), optional
        The logits; ``loc = logsumexp(logits / temperature)`` (float64).  Give ``logits`` or ``loc``.
    temperature : float > 0
    loc : float, optional
        The exact location, if already known.
    alpha, power : float

    Returns
    -------
    GumbelResult

    Raises
    ------
    TypeError, ValueError
        Neither or both of ``logits`` and ``loc``; NaN maxima; logits with NaN or ``+inf`` or none finite; a
        ``loc`` that is not finite; bad arguments.

    Notes
    -----
    Planning twins: :func:`min_detectable_gumbel_distance`, :func:`required_gumbel_samples`,
    :func:`min_detectable_gumbel_shift`.  The kernel computes ``M`` in float32; its rounding (relative
    ``2**-24``) is far below the detectable distance for any feasible ``n``.

    References
    ----------
    .. [1] Gumbel, E. J. (1954). *Statistical Theory of Extreme Values and Some Practical
       Applications*. National Bureau of Standards Applied Mathematics Series 33.
    .. [2] Maddison, C. J., Tarlow, D. and Minka, T. (2014). A* sampling. *Advances in Neural
       Information Processing Systems* 27, section 2 (the max of ``z + G`` is Gumbel(logsumexp z)).
    .. [3] Simard, R. and L'Ecuyer, P. (2011). Computing the two-sided Kolmogorov-Smirnov
       distribution. *Journal of Statistical Software* 39(11), 1-18.
    .. [4] Massart, P. (1990), *Annals of Probability* 18(3), 1269-1283.

    Examples
    --------
    >>> import numpy as np
    >>> z = np.array([1.0, 0.0, -2.0])
    >>> g = np.random.default_rng(0).gumbel(size=(2000, 3))
    >>> gumbel_max_test((z + g).max(axis=1), z, alpha=0.01).passed
    True
    """
    alpha, power = check_rates(alpha, power)
    m = to_numpy(maxima, "maxima").astype(np.float64)
    if m.ndim != 1 or m.size == 0:
        raise ValueError(f"maxima must be a non-empty 1-D array, got shape={m.shape}")
    if np.isnan(m).any():
        raise ValueError("maxima must not contain NaN")
    if (logits is None) == (loc is None):
        raise TypeError("give exactly one of logits and loc")
    if loc is None:
        t = check_positive_real(temperature, "temperature")
        z = to_numpy(logits, "logits").astype(np.float64)
        if z.ndim != 1:
            raise ValueError(f"logits must be 1-D, got shape={z.shape}")
        if np.isnan(z).any() or np.isposinf(z).any() or not np.isfinite(z).any():
            raise ValueError("logits must hold no NaN or +inf and at least one finite value")
        loc = float(special.logsumexp(z / t))
    if isinstance(loc, bool) or not isinstance(loc, numbers.Real) or not math.isfinite(loc):
        raise ValueError(f"loc must be finite (the location logsumexp(z / T)), got loc={loc!r}")
    loc = float(loc)
    n = int(m.size)
    res = stats.kstest(m, "gumbel_r", args=(loc, 1.0))
    mdet = ks_min_detectable(n, alpha, power)
    return GumbelResult(
        test="Gumbel max (KS)",
        statistic=float(res.statistic),
        pvalue=float(res.pvalue),
        n=n,
        alpha=alpha,
        power=power,
        min_detectable=mdet,
        deviation="Kolmogorov distance",
        loc=loc,
        mean_offset=float(m.mean() - loc - EULER_GAMMA),
        min_detectable_shift=_shift_for_distance(mdet),
    )


def min_detectable_gumbel_distance(n: int, *, alpha: float = 1e-6, power: float = 0.99) -> float:
    """Smallest Kolmogorov distance :func:`gumbel_max_test` detects: ``kstwo.isf(alpha, n) + eps_(1-power)``."""
    n = check_int(n, "n")
    alpha = check_alpha(alpha)
    return detectable(ks_min_detectable(n, alpha, check_power(power, alpha)), f"n={n}", "the Gumbel-max KS test")


def min_detectable_gumbel_shift(n: int, *, alpha: float = 1e-6, power: float = 0.99) -> float:
    """Smallest location shift (nats) of the maximum that :func:`gumbel_max_test` detects with ``power``."""
    return _shift_for_distance(min_detectable_gumbel_distance(n, alpha=alpha, power=power))


def required_gumbel_samples(delta: float, *, alpha: float = 1e-6, power: float = 0.99) -> int:
    """Maxima for :func:`gumbel_max_test` to detect a Kolmogorov distance ``delta`` with ``power``."""
    alpha, power = check_rates(alpha, power)
    delta = check_deviation(delta, "delta", alpha=alpha, power=power)
    # A quarter of the DKWM closed form (critical value eps_alpha >= exact c_alpha) is below the answer.
    start = planned_draws((dkw_epsilon(1, alpha) + dkw_epsilon(1, 1 - power)) ** 2 / delta**2 / 4, "delta", delta)
    return smallest_n(lambda n: ks_critical_value(n, alpha) + dkw_epsilon(n, 1 - power) <= delta, start=start,
                      what=f"delta={delta!r}")  # fmt: skip
