"""The plan of a speculative check (``check_sampler(..., target=speculative(q))``): its tests and its sizes.

The tests (:mod:`verification.runners.speculative` runs them): per row, ``emitted`` (Pearson on the number of tokens
emitted), for each draft position the draws reach often enough ``draft i pearson``, ``draft i g-test`` and
``draft i categories`` on the outcome there, the same three on the bonus token, and ``range``; independence on the
outcome at position 0 of row 0 (``samples``, ``rows``, ``seeds``, ``calls``).  With ``tv``, each test plans with its
own law-aware planner at the level ``alpha / m_max`` (every optional test counted); a position reached with
probability below :data:`REACH_FLOOR` does not set the draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..stats.gof import gof_detectable_tv, required_gof_samples
from ..stats.independence import DEFAULT_MAX_LAG, required_lag_scan_samples
from .check import MAX_CALL_DRAWS, TEST_RESERVE, columns_for_budget
from .request import CheckRequest

#: Draft positions reached with at least this probability set the planned draws (rarer ones are tested
#: at the draws the others need, where those suffice).
REACH_FLOOR = 0.05


def max_tests(b: int, k: int, seeded: bool) -> int:
    """Family size with every optional test included (the sizes are planned at alpha over it)."""
    return b * (2 + 3 * (k + 1)) + 3 + int(seeded)


def sizes_for_tv(law, outcome_law: np.ndarray, tv: float, alpha: float, power: float,
                  seeded: bool) -> tuple[int, int, int]:  # fmt: skip
    b, k, _ = outcome_law.shape
    a = alpha / max_tests(b, k, seeded)
    n = 1
    for r in range(b):
        if np.count_nonzero(law.num_emitted[r]) >= 2:  # one outcome (every draft accepted): nothing to fit
            n = max(n, required_gof_samples(tv, law.num_emitted[r], alpha=a, power=power))
        for i in range(k + 1):
            reach = float(law.reach[r, i])
            if reach < REACH_FLOOR:
                continue
            probs = outcome_law[r, i] if i < k else law.bonus[r]
            if np.count_nonzero(probs) >= 2:
                n = max(n, math.ceil(required_gof_samples(tv, probs, alpha=a, power=power) / reach))
    o = outcome_law[0, 0]
    stream = max(2 * DEFAULT_MAX_LAG + 2, required_lag_scan_samples(tv, o, o, alpha=a, power=power),
                 required_lag_scan_samples(tv, o, serial=True, alpha=a, power=power))  # fmt: skip
    cap = MAX_CALL_DRAWS // b
    stream = min(cap, stream)
    columns = min(cap, max(stream, math.ceil(n / 2)))
    return columns, max(2, math.ceil(n / columns)), stream


def test_names(law, outcome_law: np.ndarray, n: int, columns: int, a: float, power: float,
           seeded: bool) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    b, k, _ = outcome_law.shape
    names: list[str] = []
    skipped: dict[str, str] = {}
    for r in range(b):
        prefix = f"row {r}: "
        names.append(prefix + "emitted")
        for i in range(k + 1):
            where = f"draft {i}" if i < k else "bonus"
            probs = outcome_law[r, i] if i < k else law.bonus[r]
            expected = int(n * float(law.reach[r, i]))
            if np.count_nonzero(probs) < 2:
                skipped[prefix + where] = "the outcome there has a single possible value"
            elif expected < 1 or not math.isfinite(gof_detectable_tv(expected, probs, a, power)):
                skipped[prefix + where] = (f"reached with probability {float(law.reach[r, i]):.3g}: {n} draws "
                                           f"expect {expected} there, too few for the chi-square")  # fmt: skip
            else:
                names += [f"{prefix}{where} {t}" for t in ("pearson", "g-test", "categories")]
        names.append(prefix + "range")
    if np.count_nonzero(outcome_law[0, 0]) < 2:
        skipped["independence"] = "row 0's first outcome has a single possible value"
        return names, skipped
    names.append("samples")
    names.append("rows 0-1" if b > 1 else "rows 0-0'")
    if seeded:
        names.append("seeds")
    else:
        skipped["seeds"] = "the sampler takes no seed"
    names.append("calls")
    return names, skipped


@dataclass(frozen=True)
class SpeculativePlan:
    """The calls and the tests of a speculative check, fixed before the draws that are tested.

    ``calls`` draws calls of ``columns`` draft sequences a row (``n = calls * columns``); the calls and rows calls
    draw ``stream`` sequences; ``tests`` are the member names in family order, ``skipped`` the tests not run and
    why, ``how`` one line on how the sizes were chosen.
    """

    columns: int
    calls: int
    stream: int
    tests: tuple[str, ...]
    skipped: dict[str, str]
    how: str

    @property
    def n(self) -> int:
        """Draft sequences per row that the distribution tests read."""
        return self.calls * self.columns


def plan_speculative(request: CheckRequest, law, cost: tuple[float, float], elapsed: float) -> SpeculativePlan:
    """The plan of a speculative check of exact law ``law`` (:func:`flashsampling.targets.speculative_chain_law`):
    sizes for ``request.tv``, or for what is left of ``request.budget_s`` after ``elapsed`` seconds at the pilot's
    ``cost``; then the tests that run at those sizes."""
    call, alpha, power = request.call, request.alpha, request.power
    b, k, v = request.aim.draft_probs.shape
    outcome_law = law.outcome.reshape(b, k, 2 * v)
    if request.budget_s is not None:
        left = (request.budget_s - elapsed) * (1 - TEST_RESERVE)
        columns = min(MAX_CALL_DRAWS // b, columns_for_budget(left, cost, b, call.seeded))
        calls, stream = 2, columns
        how = f"sizes fit budget_s = {request.budget_s:g} s after a pilot"
    else:
        columns, calls, stream = sizes_for_tv(law, outcome_law, request.tv, alpha, power, call.seeded)
        how = f"sizes planned for total variation tv = {request.tv:g} (each test's own law-aware planner)"
    n = calls * columns
    a_max = alpha / max_tests(b, k, call.seeded)
    names, skipped = test_names(law, outcome_law, n, columns, a_max, power, call.seeded)
    return SpeculativePlan(columns, calls, stream, tuple(names), skipped, how)
