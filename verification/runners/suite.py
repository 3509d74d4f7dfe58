"""``run_suite``: the suite of a case (:mod:`verification.planning.suite`) on one sampler's draws, decided by Holm.

The same function serves one sampler on one case (its own family of ``m`` tests), a sampler over several cases
(the audit: one family over all of them) and the main job (one family over every variant and case,
:mod:`verification.runners.engine`): pass ``family`` to add to a larger family declared up front, whose per-test
level ``family.test_alpha`` is then the level each test is run at and its detectable deviation stated at.
"""

from __future__ import annotations

import numpy as np

from ..battery.cases import Case
from ..planning.suite import suite_names
from ..stats._validate import check_alpha, check_power
from ..stats.categories import category_test
from ..stats.cdf import dkwm_cdf_test
from ..stats.counts import Counts
from ..stats.family import Family
from ..stats.gof import g_test, goodness_of_fit
from ..stats.gumbel import gumbel_max_test
from ..stats.independence import serial_independence_test
from ..stats.tails import tail_mass_test
from ..stats.ties import tie_bias_test

__all__ = ["run_suite"]


def run_suite(samples, case: Case, *, alpha: float = 1e-3, power: float = 0.99, paired: bool = False,
              maxima=None, family: Family | None = None, prefix: str = "") -> Family:  # fmt: skip
    """Run the suite on ``samples`` of ``case`` and decide it by Holm at family-wise ``alpha``.

    Fails (``not family.passed``) if any test's Holm-adjusted p-value is ``<= alpha``.  Guarantee:
    (a) an exact sampler (iid draws; pairs independent; maxima Gumbel) fails with probability at most
    ``alpha``; (b) each member's ``min_detectable`` is stated at the Bonferroni level ``alpha / m``
    (``family.test_alpha`` when a family is given), which Holm's rejections include.

    Parameters
    ----------
    samples : array_like of int, shape (n,), or Counts
        The draws (a :class:`~verification.Counts` histogram serves every test but ``pairs``).
    case : Case
    alpha, power : float
        Family-wise false-alarm rate; power at which each member states its detectable deviation.
        With ``family`` given, its ``alpha`` and ``test_alpha`` are used instead.
    paired : bool
        Add the independence test of draws ``2j`` and ``2j + 1`` (needs raw draws, not counts).
    maxima : array_like of float, shape (k,), optional
        The sampler's perturbed maxima ``max_v(z_v / T + G_v)``; adds the Gumbel-max KS test.
    family : Family, optional
        Add the results to this family (one family over several cases or samplers, declared with its
        full size) instead of a new one of size ``m``; its ``test_alpha`` is then the level of each test.
    prefix : str
        Prefix of the member names (``"<prefix><test>"``).

    Returns
    -------
    Family

    Raises
    ------
    TypeError
        ``samples`` are counts and ``paired`` is set (pairs need the draws in order).
    """
    alpha = family.alpha if family is not None else check_alpha(alpha)
    power = check_power(power, alpha)
    if paired and isinstance(samples, Counts):
        raise TypeError("samples must be the draws in order (not Counts) when paired=True")
    names = suite_names(case, paired=paired, maxima=maxima is not None)
    fam = family if family is not None else Family(alpha=alpha, size=len(names), name=case.name)
    a = fam.test_alpha
    x = samples if isinstance(samples, Counts) else np.asarray(samples)
    p = case.probs
    v = case.num_categories
    for name in names:
        if name == "pearson":
            r = goodness_of_fit(x, p, alpha=a, power=power)
        elif name == "g-test":
            r = g_test(x, p, alpha=a, power=power)
        elif name == "cdf-index":
            r = dkwm_cdf_test(x, p, order="index", alpha=a, power=power)
        elif name == "cdf-descending":
            r = dkwm_cdf_test(x, p, order="descending", alpha=a, power=power)
        elif name == "categories":
            r = category_test(x, p, alpha=a, power=power)
        elif name == "tail":
            r = tail_mass_test(x, p, case.tail_mask(), alternative="two-sided", alpha=a, power=power)
        elif name == "ties":
            r = tie_bias_test(x, v, support=np.isfinite(case.logits), alpha=a, power=power)
        elif name == "pairs":
            r = serial_independence_test(x, v, lag=1, alpha=a, power=power)
        else:
            r = gumbel_max_test(maxima, case.logits, temperature=case.temperature, alpha=a, power=power)
        fam.add(prefix + name, r)
    return fam
