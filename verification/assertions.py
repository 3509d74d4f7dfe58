"""``assert_samples_match``: the one-line check for user tests, with a readable diagnosis on failure."""

from __future__ import annotations

from ._validate import check_alpha, check_power
from .results import GofResult, fmt
from .stats.categories import category_test
from .stats.gof import goodness_of_fit

__all__ = ["assert_samples_match"]


def assert_samples_match(samples, probs, *, alpha: float = 1e-6, power: float = 0.99) -> GofResult:
    """Assert that ``samples`` are draws from ``probs``; raise ``AssertionError`` with a diagnosis if not.

    Runs two tests, each at level ``alpha / 2`` (Bonferroni, so the pair fails an exact sampler with
    probability at most ``alpha``): the Pearson chi-square of :func:`verification.goodness_of_fit`,
    which sees spread-out deviations, and the per-category tests of
    :func:`verification.stats.categories.category_test`, which see one category missing or far off
    (a chi-square statistic dilutes one bad category among thousands).

    Fails if either test rejects, or any draw is impossible (a probability-0 category or outside
    ``[0, V)``).  Guarantee: (a) an exact sampler fails with probability at most ``alpha``; (b) a
    sampler at total variation ``>= result.min_detectable_tv`` over the chi-square bins passes with
    probability at most ``1 - power``, and so does one that never draws a category of probability
    ``>= log(4V / alpha) / n``.

    Parameters
    ----------
    samples : array_like of int, shape (n,), or Counts
    probs : array_like of float, shape (V,)
    alpha : float
        Total false-alarm rate of the assertion.
    power : float
        Power at which the detectable deviations are stated.

    Returns
    -------
    GofResult
        The chi-square result (at level ``alpha / 2``), when the assertion holds.

    Raises
    ------
    AssertionError
        With the most over- and under-sampled categories, their standardized residuals, the pooled
        tail mass, the flagged categories and the detectable deviation.

    Examples
    --------
    >>> import numpy as np
    >>> p = np.array([0.5, 0.25, 0.25])
    >>> _ = assert_samples_match(np.random.default_rng(0).choice(3, 10000, p=p), p)
    >>> assert_samples_match(np.zeros(10000, dtype=int), p)
    Traceback (most recent call last):
    ...
    AssertionError: samples do not match probs (alpha=1e-06): ...
    """
    alpha = check_alpha(alpha)
    power = check_power(power, alpha)
    gof = goodness_of_fit(samples, probs, alpha=alpha / 2, power=power)
    cat = category_test(gof.counts, gof.probs, alpha=alpha / 2, power=power)
    if gof.passed and cat.passed:
        return gof
    lines = [
        f"samples do not match probs (alpha={fmt(alpha)}): {'chi-square' if not gof.passed else ''}"
        f"{' and ' if not gof.passed and not cat.passed else ''}{'per-category' if not cat.passed else ''} failed"
    ]
    lines.append(gof.diagnosis())
    lines.append(repr(cat))
    if cat.num_flagged:
        shown = ", ".join(
            f"{d.category} (observed {d.observed}, expected {d.expected:.6g})"
            for d in cat.most_significant(5)
            if d.category in set(cat.flagged[:5].tolist())
        )
        lines.append(f"  flagged categories ({cat.num_flagged}): {shown}")
    raise AssertionError("\n".join(lines))
