"""Tie-bias test: with flat logits, do draws favour low (or high) vocabulary indices?

With all logits equal, every index is equally likely.  A sampler that breaks exact ties in its noisy
scores toward the lower index (``argmax`` returns the first maximum) is biased whenever the noise is
coarse enough to tie: 24-bit uniforms, noise rounded to bf16, or a per-tile reduction that keeps the
first of equal candidates.  Splitting the tied set into its lower half ``L`` (the first
``floor(m / 2)`` of its ``m`` indices) and the rest, the number of draws in ``L`` is
``Bin(n, floor(m/2) / m)`` for an exact sampler; the test is the exact central binomial test.
The deviation is the absolute shift ``|q_L - p_L|`` of the lower-half mass (at most the TV).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ._validate import check_int, check_rates, to_numpy
from .binomial import binomial_pvalue, detectable_shifts
from .counts import as_counts
from .power import BINOMIAL_MAX_SAMPLES, check_deviation, detectable, smallest_n
from .results import StatResult

__all__ = ["TieResult", "tie_bias_test", "min_detectable_tie_shift", "required_tie_samples"]


@dataclass(frozen=True, eq=False, repr=False)
class TieResult(StatResult):
    """Result of :func:`tie_bias_test`; ``statistic`` is the number of draws in the lower half.

    Extra attributes: ``lower_fraction`` (observed), ``expected_fraction`` (``floor(m/2) / m``),
    ``tied`` (``m``, the size of the tied set), ``outside`` (draws outside the tied set: impossible).
    """

    lower_fraction: float
    expected_fraction: float
    tied: int
    outside: int
    _show: ClassVar[tuple[str, ...]] = ("lower_fraction", "expected_fraction", "tied", "outside")


def _support(support, v: int) -> np.ndarray:
    if support is None:
        return np.arange(v)
    s = to_numpy(support, "support")
    if s.dtype == np.bool_:
        if s.shape != (v,):
            raise ValueError(f"support mask must have shape ({v},), got shape={s.shape}")
        s = np.flatnonzero(s)
    if not np.issubdtype(s.dtype, np.integer) or s.ndim != 1:
        raise TypeError("support must be a boolean mask of shape (V,) or a 1-D array of category indices")
    s = np.unique(s)
    if s.size and (s[0] < 0 or s[-1] >= v):
        raise ValueError(f"support indices must be in [0, {v})")
    return s


def tie_bias_test(
    samples,
    num_categories: int,
    *,
    support=None,
    alpha: float = 1e-6,
    power: float = 0.99,
) -> TieResult:
    """Exact test that draws from flat (tied) logits fall in the lower index half as often as they should.

    Fails if the central binomial p-value of the lower-half count is ``<= alpha``, or if any draw
    falls outside the tied set (an impossible outcome).

    Guarantee, exact: (a) an exact sampler fails with probability at most ``alpha``; (b) a sampler
    whose lower-half mass is off by ``>= result.min_detectable`` (either direction) passes with
    probability at most ``1 - power``.  The detectable shift scales as ``1 / sqrt(n)``
    (about ``(z_(alpha/2) + z_power) / (2 sqrt(n))`` for ``m >= 2`` even).

    Parameters
    ----------
    samples : array_like of int, shape (n,), or Counts
        Draws with all logits of ``support`` equal (and the others ``-inf``).
    num_categories : int
        V.
    support : None, bool mask (V,) or int indices
        The tied set (default: all V categories); it needs at least 2 members.
    alpha, power : float

    Returns
    -------
    TieResult

    Raises
    ------
    ValueError
        Fewer than 2 tied categories, bad arguments.

    Notes
    -----
    Planning twins: :func:`min_detectable_tie_shift`, :func:`required_tie_samples`.  For odd ``m`` the
    middle index belongs to the upper half, so ``p_L = floor(m/2) / m < 1/2``.

    References
    ----------
    .. [1] Clopper, C. J. and Pearson, E. S. (1934), *Biometrika* 26(4), 404-413 (exact binomial
       tails; the central two-sided region used here).

    Examples
    --------
    >>> import numpy as np
    >>> tie_bias_test(np.random.default_rng(0).integers(0, 7, 5000), 7, alpha=0.01).passed
    True
    """
    v = check_int(num_categories, "num_categories")
    alpha, power = check_rates(alpha, power)
    s = _support(support, v)
    m = int(s.size)
    if m < 2:
        raise ValueError(f"support must hold at least 2 tied categories, got {m}")
    counts = as_counts(samples, v)
    n = counts.n
    lower = s[: m // 2]
    p0 = (m // 2) / m
    k = int(counts.histogram[lower].sum())
    outside = counts.n - int(counts.histogram[s].sum())
    pvalue = 0.0 if outside else binomial_pvalue(k, n, p0, "two-sided")
    return TieResult(
        test="tie bias (lower half)",
        statistic=float(k),
        pvalue=pvalue,
        n=n,
        alpha=alpha,
        power=power,
        min_detectable=max(detectable_shifts(n, p0, alpha, power, "two-sided")),
        deviation="lower-half mass shift",
        lower_fraction=k / n,
        expected_fraction=p0,
        tied=m,
        outside=outside,
    )


def min_detectable_tie_shift(n: int, num_tied: int, *, alpha: float = 1e-6, power: float = 0.99) -> float:
    """Smallest shift of the lower-half mass that :func:`tie_bias_test` detects in both directions."""
    n = check_int(n, "n")
    m = check_int(num_tied, "num_tied", minimum=2)
    alpha, power = check_rates(alpha, power)
    return detectable(max(detectable_shifts(n, (m // 2) / m, alpha, power, "two-sided")), f"n={n}", "the tie test")


def required_tie_samples(shift: float, num_tied: int, *, alpha: float = 1e-6, power: float = 0.99) -> int:
    """Draws for :func:`tie_bias_test` to detect a lower-half mass shift ``shift`` with ``power``."""
    m = check_int(num_tied, "num_tied", minimum=2)
    alpha, power = check_rates(alpha, power)
    d = check_deviation(shift, "shift", alpha=alpha, power=power, upper=0.5)
    p0 = (m // 2) / m
    return smallest_n(lambda n: max(detectable_shifts(n, p0, alpha, power, "two-sided")) <= d, what=f"shift={shift!r}",
                      limit=BINOMIAL_MAX_SAMPLES)  # fmt: skip
