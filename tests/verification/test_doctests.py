"""The examples in the docstrings of the verification library run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "verification",
    "verification.runners.assertions",
    "verification.runners.agreement",
    "verification.stats.two_sample_bound",
    "verification.stats.tv_certificate",
    "verification.stats.counts",
    "verification.stats.family",
    "verification.stats.power",
    "verification.stats.gof",
    "verification.stats.exact",
    "verification.stats.cdf",
    "verification.stats.homogeneity",
    "verification.stats.tails",
    "verification.stats.gumbel",
    "verification.stats.ties",
    "verification.stats.categories",
    "verification.stats.independence",
    "verification.stats.support",
    "verification.adapters",
    "verification.runners.check",
    "verification.battery.aims",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
