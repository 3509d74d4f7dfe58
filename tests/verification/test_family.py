"""Holm's procedure and the Family runner."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from verification import Family, goodness_of_fit, holm


def holm_reference(p: list[float], alpha: float) -> list[bool]:
    """Holm by the textbook loop."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    rejected = [False] * m
    for rank, i in enumerate(order):
        if p[i] <= alpha / (m - rank):
            rejected[i] = True
        else:
            break
    return rejected


@pytest.mark.parametrize("seed", range(20))
def test_holm_matches_the_textbook_loop(seed):
    rng = np.random.default_rng(seed)
    p = np.where(rng.random(12) < 0.3, rng.random(12) * 1e-3, rng.random(12)).tolist()
    rejected, adjusted = holm(p, 0.05)
    assert rejected.tolist() == holm_reference(p, 0.05)
    assert ((adjusted <= 0.05) == rejected).all() and (adjusted >= np.asarray(p)).all()


def test_holm_controls_the_family_wise_rate_on_exact_nulls():
    rng = np.random.default_rng(0)
    p = rng.random((20000, 10))  # independent uniform p-values: FWER of Holm is at most alpha
    fwer = np.mean([holm(row, 0.05)[0].any() for row in p])
    assert fwer <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 20000)


def test_holm_edge_cases():
    assert holm([], 0.1)[0].size == 0
    assert holm([0.0, 1.0], 0.1)[0].tolist() == [True, False]
    with pytest.raises(ValueError, match=r"pvalues must be in \[0, 1\]"):
        holm([0.5, 1.5], 0.1)


def _result(pvalue_like_seed: int, bias: bool = False):
    p = np.full(4, 0.25)
    x = np.random.default_rng(pvalue_like_seed).integers(0, 4, 4000)
    if bias:
        x[:400] = 0
    return goodness_of_fit(x, p, alpha=1e-3)


def test_family_decides_together():
    fam = Family(alpha=1e-3, size=3, name="rows")
    assert fam.test_alpha == pytest.approx(1e-3 / 3)
    for k in range(3):
        fam.add(f"row {k}", _result(k))
    assert fam.passed and not fam.failures() and len(fam) == 3
    text = fam.table()
    assert "family 'rows': 3 tests" in text and "row 2" in text and "p_holm=" in text
    fam.assert_passed()
    with pytest.raises(ValueError, match="declared with size=3"):
        fam.add("row 3", _result(3))


def test_family_failure_names_the_member():
    fam = Family(alpha=1e-3, size=2)
    fam.add("good", _result(0))
    fam.add("bad", _result(1, bias=True))
    assert not fam.passed and [m.name for m in fam.failures()] == ["bad"]
    with pytest.raises(AssertionError, match="FAIL  bad"):
        fam.assert_passed()
    d = fam.as_dict()
    assert d["passed"] is False and {m["name"] for m in d["members"]} == {"good", "bad"}


def test_family_argument_checks():
    fam = Family(alpha=0.01)
    fam.add("a", _result(0))
    with pytest.raises(ValueError, match="already in the family"):
        fam.add("a", _result(1))
    with pytest.raises(TypeError, match="StatResult"):
        fam.add("b", 0.5)
    with pytest.raises(ValueError, match="alpha"):
        Family(alpha=2.0)


def test_undeclared_slots_count_in_holm():
    """A family declared with size 4 but holding 2 results uses m = 4 (never anti-conservative)."""
    r = _result(0)
    fam = Family(alpha=0.5, size=4)
    fam.add("x", r)
    assert fam.members()[0].adjusted_pvalue == pytest.approx(min(1.0, 4 * r.pvalue))
    assert list(itertools.islice(iter(fam.members()), 1))[0].name == "x"
