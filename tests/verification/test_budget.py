"""The budget registry: unique names and seeds, and the family-wise totals it reports."""

from __future__ import annotations

import pathlib

import pytest

from verification.planning.budget import BUDGETS, Budget, budget, family_wise_alpha, family_wise_miss, table


def test_names_unique_and_well_formed():
    assert len(BUDGETS) >= 20
    for name, b in BUDGETS.items():
        assert name == b.name and 0 < b.alpha < 1 and b.n >= 1 and b.kind in ("null", "planted")


def test_totals():
    null = [b for b in BUDGETS.values() if b.kind == "null"]
    assert family_wise_alpha() == pytest.approx(sum(b.alpha for b in null))
    assert family_wise_alpha("verification.gof") == pytest.approx(budget("verification.gof.exact").alpha)
    assert family_wise_miss() == pytest.approx(0.01 * sum(b.kind == "planted" for b in BUDGETS.values()))
    assert "family-wise false alarm" in table()


def test_every_verification_budget_is_used_by_a_test():
    here = pathlib.Path(__file__).parent
    text = "".join(p.read_text() for p in here.glob("test_*.py"))
    unused = [n for n in BUDGETS if n.startswith("verification.") and f'"{n}"' not in text]
    assert not unused


def test_lookup_errors():
    with pytest.raises(KeyError, match="no budget named"):
        budget("nope")
    with pytest.raises(ValueError, match="kind"):
        Budget("x", seed=1, n=1, alpha=0.1, kind="other")
