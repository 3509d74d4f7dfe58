"""Assertions and logits shared by the statistical tests of the hierarchical variants
(``test_grouped.py``, ``test_online.py``, ``test_distributed.py``).

Each file states its own family (checks at ``alpha`` each, Bonferroni) and passes its ``alpha`` here.
"""

from __future__ import annotations

import numpy as np
import pytest

from flashsampling.reference import softmax
from verification import goodness_of_fit, tail_mass_test

#: The head of :func:`many_tail_logits`: tokens ``0 .. HEAD - 1``.
HEAD = 6


def assert_fits(samples, probs, *, alpha: float) -> None:
    """Pearson chi-square with pooled rare bins passes at ``alpha``, and the pooled and tested
    masses add up to one (no bin dropped)."""
    res = goodness_of_fit(samples, probs, alpha=alpha)
    assert res.passed, res.diagnosis()
    assert res.tested_mass + res.pooled_mass == pytest.approx(1.0)


def many_tail_logits(size: int, seed: int) -> np.ndarray:
    """``HEAD`` tokens ~ N(0, 0.5^2) and a flat tail of ``size - HEAD`` tokens 15 nats below, rounded
    to float32 (the kernel's input grid) and returned as float64."""
    z = np.full(size, -15.0)
    z[:HEAD] = np.random.default_rng(seed).normal(0, 0.5, HEAD)
    return z.astype(np.float32).astype(np.float64)


def assert_fits_with_tail(samples, z: np.ndarray, *, alpha: float) -> None:
    """:func:`assert_fits` against ``softmax(z)``, then the exact two-sided binomial test of the mass
    of the tail ``HEAD ..`` of :func:`many_tail_logits` at ``alpha``."""
    p = softmax(z)
    assert_fits(samples, p, alpha=alpha)
    res = tail_mass_test(samples, p, np.arange(HEAD, z.size), alternative="two-sided", alpha=alpha)
    assert res.passed, res
