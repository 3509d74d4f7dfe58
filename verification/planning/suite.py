"""The suite: the tests one sampler faces on one case, named before the first draw.

For a case (logits, temperature, exact target ``p = softmax(z / T)``) the suite is the family of tests

=====================  ===========================================================================
name                   test
=====================  ===========================================================================
``pearson``            Pearson chi-square with pooling (:func:`verification.goodness_of_fit`)
``g-test``             likelihood-ratio G-test with the same pooling
``cdf-index``          DKWM envelope of the CDF in vocabulary order (dropped tiles, off-by-one)
``cdf-descending``     DKWM envelope in order of decreasing probability (head vs tail)
``categories``         per-category exact binomial tests with Holm over V (a missing token)
``tail``               two-sided exact binomial test of the tail mass (cases with a far tail)
``ties``               lower- vs upper-half test on tied logits (flat cases)
``pairs``              contingency chi-square of draws ``2j`` and ``2j + 1`` (paired layouts)
``gumbel-max``         KS test that the perturbed maxima are Gumbel(logsumexp(z / T), 1) (samplers
                       that expose them)
=====================  ===========================================================================

decided together by Holm's procedure at a family-wise ``alpha``: a correct sampler fails any of the
``m`` tests with probability at most ``alpha``.  The tail test is two-sided here (a capped noise
starves the tail, a uniform that rounds to 1 floods it).  *Paired* layouts interleave two streams
that must be independent (rows 0 and 1 of a batch, samples ``s`` and ``s + 1``): draw ``2j`` and
draw ``2j + 1`` are one pair.

:func:`suite_names` lists the tests a case takes (so a family's size is known before any test runs);
:func:`verification.runners.suite.run_suite` runs them on a sampler's draws.
"""

from __future__ import annotations

from ..battery.cases import Case

__all__ = ["TEST_TITLES", "suite_names"]

#: Human-readable title of each suite test.
TEST_TITLES = {
    "pearson": "Pearson chi-square",
    "g-test": "G-test",
    "cdf-index": "DKWM CDF (index order)",
    "cdf-descending": "DKWM CDF (descending p)",
    "categories": "per-category binomial",
    "tail": "tail mass (two-sided)",
    "ties": "tie bias",
    "pairs": "independence of pairs",
    "gumbel-max": "Gumbel max (KS)",
    "impossible": "impossible draw (every test)",
}


def suite_names(case: Case, *, paired: bool = False, maxima: bool = False) -> list[str]:
    """Names of the tests the suite runs on ``case`` (see the module docstring), in a fixed order.

    ``maxima``: the sampler exposes its perturbed maxima (the Gumbel-max test joins the suite).
    """
    names = ["pearson", "g-test", "cdf-index", "cdf-descending", "categories"]
    if case.tail_gap is not None:
        names.append("tail")
    if case.flat:
        names.append("ties")
    if paired:
        names.append("pairs")
    if maxima:
        names.append("gumbel-max")
    return names
