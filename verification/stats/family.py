"""Family-wise error control: Holm's step-down correction and a runner that applies it.

A verification run is many tests (several per variant, case and statistic).  Each test's ``alpha``
is a per-test false-alarm rate; what a user needs is the probability that *any* test of an exact
sampler fails, the family-wise error rate (FWER).  Holm (1979) controls it at a declared ``alpha``
for any dependence between the tests:

    sort the p-values p_(1) <= ... <= p_(m); reject H_(1..j) for the largest j with
    p_(i) <= alpha / (m - i + 1) for every i <= j.

Adjusted p-values ``max_{i <= j} min(1, (m - i + 1) p_(i))`` make "rejected" mean "adjusted <= alpha".
Holm rejects at least what Bonferroni (``alpha / m`` each) rejects, so a test planned at level
``alpha / m`` keeps its stated power inside the family: :attr:`Family.test_alpha` is that level.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ._validate import check_alpha, check_int
from .results import StatResult, fmt

__all__ = ["Family", "FamilyMember", "holm"]


def holm(pvalues, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Holm's step-down procedure.

    Parameters
    ----------
    pvalues : array_like of float, shape (m,)
    alpha : float in (0, 1)
        Family-wise error rate.

    Returns
    -------
    rejected : numpy.ndarray of bool, shape (m,)
    adjusted : numpy.ndarray of float, shape (m,)
        Holm-adjusted p-values (``rejected == adjusted <= alpha``).

    References
    ----------
    .. [1] Holm, S. (1979). A simple sequentially rejective multiple test procedure. *Scandinavian
       Journal of Statistics* 6(2), 65-70.

    Examples
    --------
    >>> holm([0.01, 0.04, 0.03], 0.05)[0].tolist()
    [True, False, False]
    """
    alpha = check_alpha(alpha)
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"pvalues must be 1-D, got shape={p.shape}")
    if np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError("pvalues must be in [0, 1]")
    m = p.size
    if m == 0:
        return np.zeros(0, dtype=bool), np.zeros(0)
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adj_sorted = np.maximum.accumulate(scaled)
    adjusted = np.empty(m)
    adjusted[order] = adj_sorted
    return adjusted <= alpha, adjusted


class FamilyMember(NamedTuple):
    """One named result with its Holm-adjusted p-value."""

    name: str
    result: StatResult
    adjusted_pvalue: float
    passed: bool


@dataclass
class Family:
    """Collects named test results and decides them together under a family-wise ``alpha`` (Holm).

    Parameters
    ----------
    alpha : float
        Family-wise false-alarm rate: an exact sampler fails *any* member with probability at most
        ``alpha``.
    size : int, optional
        Number of tests the family will hold, declared up front.  Then :attr:`test_alpha` is
        ``alpha / size``, the level at which each member should be run so its stated power holds
        inside the family, and adding more than ``size`` results raises.
    name : str

    Examples
    --------
    >>> import numpy as np
    >>> from verification import goodness_of_fit
    >>> fam = Family(alpha=1e-6, size=2, name="demo")
    >>> p = np.full(4, 0.25)
    >>> rng = np.random.default_rng(0)
    >>> _ = fam.add("row 0", goodness_of_fit(rng.integers(0, 4, 4000), p, alpha=fam.test_alpha))
    >>> _ = fam.add("row 1", goodness_of_fit(rng.integers(0, 4, 4000), p, alpha=fam.test_alpha))
    >>> fam.passed
    True
    """

    alpha: float = 1e-6
    size: int | None = None
    name: str = "family"
    _items: list[tuple[str, StatResult]] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self.alpha = check_alpha(self.alpha)
        if self.size is not None:
            self.size = check_int(self.size, "size")

    @property
    def test_alpha(self) -> float:
        """Per-test level that keeps each member's planned power within the family (Bonferroni bound)."""
        return self.alpha / (self.size if self.size is not None else max(1, len(self._items)))

    def add(self, name: str, result: StatResult) -> StatResult:
        """Record ``result`` under ``name`` (unique) and return it."""
        if not isinstance(result, StatResult):
            raise TypeError(f"result must be a StatResult, got {type(result).__name__}")
        if any(name == n for n, _ in self._items):
            raise ValueError(f"name={name!r} is already in the family")
        if self.size is not None and len(self._items) >= self.size:
            raise ValueError(f"family {self.name!r} was declared with size={self.size}; cannot add {name!r}")
        self._items.append((name, result))
        return result

    def __len__(self) -> int:
        return len(self._items)

    def members(self) -> list[FamilyMember]:
        """Every result with its Holm-adjusted p-value and family verdict, in insertion order."""
        if not self._items:
            return []
        # Unused declared slots count as tests with p = 1: Holm over the declared size stays valid.
        pv = [r.pvalue for _, r in self._items]
        m = max(len(pv), self.size or 0)
        rejected, adjusted = holm(np.r_[pv, np.ones(m - len(pv))], self.alpha)
        return [
            FamilyMember(name, r, float(adjusted[i]), not bool(rejected[i])) for i, (name, r) in enumerate(self._items)
        ]

    @property
    def passed(self) -> bool:
        """True when no member is rejected by Holm at the family-wise ``alpha``."""
        return all(m.passed for m in self.members())

    def failures(self) -> list[FamilyMember]:
        """Members rejected by Holm."""
        return [m for m in self.members() if not m.passed]

    def table(self) -> str:
        """One line per member: family verdict, name, test, n, statistic, raw and adjusted p-value."""
        lines = [f"family {self.name!r}: {len(self)} tests, family-wise alpha={fmt(self.alpha)} (Holm)"]
        for m in self.members():
            r = m.result
            lines.append(
                f"  {'pass' if m.passed else 'FAIL':4}  {m.name:32}  {r.test:26}  n={r.n:<11d} "
                f"stat={fmt(r.statistic):>9}  p={fmt(r.pvalue):>9}  p_holm={fmt(m.adjusted_pvalue):>9}  "
                f"detects {r.deviation} >= {fmt(r.min_detectable)}"
            )
        return "\n".join(lines)

    def assert_passed(self) -> None:
        """Raise ``AssertionError`` with :meth:`table` when any member fails."""
        if not self.passed:
            raise AssertionError(self.table())

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary of the family and its members."""
        return {
            "name": self.name,
            "alpha": self.alpha,
            "size": self.size,
            "passed": self.passed,
            "members": [
                {"name": m.name, "adjusted_pvalue": m.adjusted_pvalue, "family_passed": m.passed, **m.result.as_dict()}
                for m in self.members()
            ],
        }

    def __repr__(self) -> str:
        return self.table()
