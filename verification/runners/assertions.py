"""``assert_samples_match``: the one-line check for user tests, with a readable diagnosis on failure."""

from __future__ import annotations

from ..stats._validate import check_probs, check_rates
from ..stats.categories import category_test
from ..stats.counts import as_counts
from ..stats.gof import goodness_of_fit
from ..stats.results import GofResult, fmt
from ..stats.tails import TAIL_GAPS, far_tail, tail_mass_test
from ..stats.tv_certificate import tv_certificate

__all__ = ["assert_samples_match"]


def assert_samples_match(samples, probs, *, alpha: float = 1e-6, power: float = 0.99, tail="auto") -> GofResult:
    """Assert that ``samples`` are draws from ``probs``; raise ``AssertionError`` with a diagnosis if not.

    Runs up to three tests, each at level ``alpha / m`` (Bonferroni over the ``m`` that run, so together they
    fail an exact sampler with probability at most ``alpha``): the Pearson chi-square of
    :func:`verification.goodness_of_fit`, which sees spread-out deviations; the per-category tests of
    :func:`verification.stats.categories.category_test`, which see one category missing or far off (a
    chi-square statistic dilutes one bad category among thousands); and the two-sided tail-mass test of
    :func:`verification.stats.tails.tail_mass_test` on the far tail, which sees a tail starved or flooded
    (the chi-square pools exactly those tokens into one bin, where a deficit drowns).

    The far tail (``tail="auto"``): the tokens whose probability is ``16``, ``12`` or ``8`` nats below the
    largest (``0 < p_i <= p_max e**-g``), for the deepest ``g`` at which the ``n`` draws given detect the
    loss of 90 % of the tail's mass at level ``alpha / 3`` with ``power``
    (:func:`verification.stats.tails.far_tail`).  When the target has no token that far down, or too little
    mass there for ``n`` draws, the tail test does not run and the other two run at ``alpha / 2``; the
    choice depends on ``probs`` and ``n`` only, never on the draws.

    Fails if any test rejects, or any draw is impossible (a probability-0 category or outside ``[0, V)``).
    Guarantee: (a) an exact sampler fails with probability at most ``alpha``; (b) a sampler at total
    variation ``>= result.min_detectable_tv`` over the chi-square bins passes with probability at most
    ``1 - power``, and so does one that never draws a category of probability ``>= log(2mV / alpha) / n``
    or (with the tail test) draws the tail with a relative deficit or excess ``>=`` its detectable shift.

    Parameters
    ----------
    samples : array_like of int, shape (n,), or Counts
    probs : array_like of float, shape (V,)
        Summing to 1 within ``V * 2**-23`` (float32 softmax output is accepted and renormalized in float64).
    alpha : float
        Total false-alarm rate of the assertion.
    power : float
        Power at which the detectable deviations are stated.
    tail : "auto", None, or bool mask (V,) / int indices
        ``"auto"``: the far tail above; ``None``: no tail test; a mask or indices: that tail.

    Returns
    -------
    GofResult
        The chi-square result (at level ``alpha / m``), when the assertion holds.

    Raises
    ------
    AssertionError
        With the certified upper bound on the total variation to ``probs`` (at confidence ``1 - alpha``,
        :func:`verification.stats.tv_certificate.tv_certificate`), the most over- and under-sampled
        categories, their standardized residuals, the pooled tail mass, the flagged categories, the tail's
        observed and expected draws, and the detectable deviations.

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
    alpha, power = check_rates(alpha, power)
    p = check_probs(probs)
    counts = as_counts(samples, p.size)
    mask = None
    if isinstance(tail, str):
        if tail != "auto":
            raise ValueError(f"tail must be 'auto', None, a mask or indices, got tail={tail!r}")
        found = far_tail(p, counts.n, alpha=alpha / 3, power=power, gaps=TAIL_GAPS)
        mask = None if found is None else found.mask
    elif tail is not None:
        mask = tail
    m = 2 if mask is None else 3
    gof = goodness_of_fit(counts, p, alpha=alpha / m, power=power)
    cat = category_test(counts, p, alpha=alpha / m, power=power)
    tl = None
    if mask is not None:
        tl = tail_mass_test(counts, p, mask, alternative="two-sided", alpha=alpha / m, power=power)
    tests = (("chi-square", gof), ("per-category", cat), ("tail", tl))
    failed = [name for name, r in tests if r is not None and not r.passed]
    if not failed:
        return gof
    lines = [f"samples do not match probs (alpha={fmt(alpha)}): {' and '.join(failed)} failed"]
    cert = tv_certificate(counts, p, alpha=alpha)
    lines.append(f"  certified: total variation to probs <= {fmt(cert.bound)} at confidence 1 - {fmt(alpha)} "
                 f"(verification.stats.tv_certificate); {cert.tail_statement()}")  # fmt: skip
    lines.append(gof.diagnosis())
    lines.append(repr(cat))
    if cat.num_flagged:
        shown = ", ".join(
            f"{d.category} (observed {d.observed}, expected {d.expected:.6g})"
            for d in cat.most_significant(5)
            if d.category in set(cat.flagged[:5].tolist())
        )
        lines.append(f"  flagged categories ({cat.num_flagged}): {shown}")
    if tl is not None:
        lines.append(repr(tl))
        lines.append(f"  tail: {tl.tail_size} tokens, observed {int(tl.statistic)} draws, expected {tl.expected:.6g}")
    raise AssertionError("\n".join(lines))
