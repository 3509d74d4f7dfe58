"""Range test: is every draw an index in ``[0, V)`` that the target law can produce?

A sampler that returns ``-1``, ``V``, an index of a masked (``-inf``) token, or a token that a truncation
(top-k, top-p, min-p) removed, has drawn an outcome of probability 0: one such draw is proof of a defect,
whatever the sample size.  The test counts them: ``k`` impossible draws among ``n``; it fails when ``k > 0``
(p-value 0), and passes with p-value 1 otherwise.  An exact sampler never fails it (level 0), and a
sampler that puts mass ``e`` on impossible outcomes passes ``n`` draws with probability ``(1 - e)**n``.
Every other test of the suite also fails on an impossible draw; this one says so by name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ._validate import check_fraction, check_int, check_law
from .counts import as_counts
from .power import check_deviation, detectable, planned_draws
from .results import StatResult

__all__ = ["SupportResult", "min_detectable_impossible_mass", "required_support_samples", "support_test"]


@dataclass(frozen=True, eq=False, repr=False)
class SupportResult(StatResult):
    """Result of :func:`support_test`; ``statistic`` is the number of impossible draws.

    Extra attributes: ``out_of_range`` (draws outside ``[0, V)``), ``outside_support`` (draws on
    categories of probability 0), ``categories`` (up to 8 such categories drawn, most drawn first).
    """

    out_of_range: int
    outside_support: int
    categories: tuple[int, ...]
    _show: ClassVar[tuple[str, ...]] = ("out_of_range", "outside_support")


def _impossible_mass(n: int, power: float) -> float:
    # Smallest e with (1 - e)**n <= 1 - power: a sampler with that much impossible mass draws one.
    return -math.expm1(math.log1p(-power) / n)


def support_test(samples, probs, *, alpha: float = 1e-6, power: float = 0.99) -> SupportResult:
    """Test that every draw lies in ``[0, V)`` on a category of positive probability.

    Fails if any draw is impossible (p-value 0); passes with p-value 1 otherwise.

    Guarantee, exact: (a) an exact sampler never fails (its level is 0 <= ``alpha``); (b) a sampler that
    draws an impossible outcome with probability ``>= result.min_detectable`` per draw passes with
    probability at most ``1 - power``.  ``min_detectable = 1 - (1 - power)**(1/n)``, about
    ``log(1 / (1 - power)) / n``.

    Parameters
    ----------
    samples : array_like of int, shape (n,), or Counts
    probs : array_like of float, shape (V,)
        The target law; its zeros are the impossible categories.
    alpha, power : float
        ``alpha`` is recorded (the test never rejects an exact sampler); ``power`` states the deviation.

    Returns
    -------
    SupportResult

    Raises
    ------
    TypeError, ValueError
        Bad arguments (named in the message).

    Examples
    --------
    >>> import numpy as np
    >>> p = np.array([0.5, 0.5, 0.0])
    >>> support_test(np.array([0, 1, 1, 0]), p).passed
    True
    >>> r = support_test(np.array([0, 2, 3, 1]), p)
    >>> r.passed, r.out_of_range, r.outside_support, r.categories
    (False, 1, 1, (2,))
    """
    p, alpha, power = check_law(probs, alpha, power)
    counts = as_counts(samples, p.size)
    zero = p == 0
    drawn = counts.histogram * zero
    outside = int(drawn.sum())
    bad = np.flatnonzero(drawn)
    bad = bad[np.argsort(-drawn[bad], kind="stable")][:8]
    k = outside + counts.out_of_range
    return SupportResult(
        test="range and support",
        statistic=float(k),
        pvalue=0.0 if k else 1.0,
        n=counts.n,
        alpha=alpha,
        power=power,
        min_detectable=_impossible_mass(counts.n, power),
        deviation="probability of an impossible draw",
        out_of_range=counts.out_of_range,
        outside_support=outside,
        categories=tuple(int(i) for i in bad),
    )


def min_detectable_impossible_mass(n: int, *, power: float = 0.99) -> float:
    """Smallest per-draw probability of an impossible outcome that :func:`support_test` catches on ``n``
    draws with ``power``: ``1 - (1 - power)**(1/n)``."""
    n = check_int(n, "n")
    power = check_fraction(power, "power", inclusive_upper=False)
    return detectable(_impossible_mass(n, power), f"n={n}", "the range test")


def required_support_samples(mass: float, *, power: float = 0.99) -> int:
    """Draws for :func:`support_test` to catch a sampler with impossible mass ``mass`` per draw with
    ``power``: ``ceil(log(1 - power) / log(1 - mass))``; satisfies
    ``min_detectable_impossible_mass(n) <= mass``."""
    power = check_fraction(power, "power", inclusive_upper=False)
    e = check_deviation(mass, "mass", alpha=0.0, power=power)
    if e >= 1.0:
        return 1
    n = planned_draws(math.log1p(-power) / math.log1p(-e), "mass", mass)
    while _impossible_mass(n, power) > e:
        n += 1
    return n
