"""The main job's plan: every (variant, case) it runs, each with its seed and its tests, fixed before the first draw.

:func:`plan_battery` checks the main job's arguments once and returns a :class:`BatteryPlan`: the runs (the pairs a
variant applies to, variants outer, each with its seed and the names of its suite's tests, the Gumbel-max test
where the variant exposes its perturbed maxima) and the family-wise ``alpha`` and ``power`` of the one Holm family
over all of them, whose size is known before the first test (:mod:`verification.runners.engine` runs the plan).
Without a budget a run draws :func:`fixed_draws`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..battery.cases import Case
from ..battery.variants import Variant
from ..stats._validate import check_int, check_rates
from .suite import suite_names

__all__ = ["MIN_DRAWS", "RUN_SEED_STRIDE", "BatteryPlan", "NoRuns", "Run", "fixed_draws", "plan_battery", "plan_runs"]

#: Fewest draws of a run without a budget (below it the chi-square pools most of a V = 1000 case).
MIN_DRAWS = 2_000
#: Seed stride between runs.
RUN_SEED_STRIDE = 1000


@dataclass(frozen=True)
class Run:
    """One variant on one case: its position, its seed and the names of its tests."""

    index: int
    variant: Variant
    case: Case
    seed: int
    tests: tuple[str, ...]

    @property
    def name(self) -> str:
        """``"variant/case"``, the prefix of its members in the family."""
        return f"{self.variant.name}/{self.case.name}"

    @property
    def maxima(self) -> bool:
        """The Gumbel-max test is one of its tests."""
        return "gumbel-max" in self.tests


def plan_runs(variants: Sequence[Variant], cases: Sequence[Case], *, seed: int = 20261129) -> list[Run]:
    """Every (variant, case) the variant runs on (:meth:`Variant.runs_on`), variants outer, with seeds and tests."""
    pairs = [(v, c) for v in variants for c in cases if v.runs_on(c)]
    return [
        Run(k, v, c, seed + RUN_SEED_STRIDE * k, tuple(suite_names(c, maxima=v.has_maxima(c))))
        for k, (v, c) in enumerate(pairs)
    ]


def fixed_draws(variant: Variant, case: Case) -> int:
    """Draws of a run without a budget: the variant's cost in ``n * V`` units, capped, at least ``MIN_DRAWS``."""
    return max(MIN_DRAWS, min(variant.cpu_max_n, variant.cpu_elements // case.num_categories))


class NoRuns(ValueError):
    """No variant applies to any of the cases: the main job would have nothing to run."""


@dataclass(frozen=True)
class BatteryPlan:
    """The main job before its first draw: its runs and the family-wise error rates of their one Holm family.

    Attributes
    ----------
    runs : tuple of Run
    alpha : float
        Family-wise false-alarm rate of the whole battery.
    power : float
        Power at which each test states its detectable deviation.
    seed : int
        Base seed (run ``r`` draws with ``seed + RUN_SEED_STRIDE * r`` and up).
    """

    runs: tuple[Run, ...]
    alpha: float
    power: float
    seed: int

    @property
    def size(self) -> int:
        """``m``, the number of tests of the family: every test of every run."""
        return sum(len(r.tests) for r in self.runs)


def plan_battery(variants: Sequence[Variant], cases: Sequence[Case], *, alpha: float = 1e-3, power: float = 0.99,
                 seed: int = 20261129) -> BatteryPlan:  # fmt: skip
    """Check the main job's arguments and fix its runs (:func:`plan_runs`).

    Raises
    ------
    ValueError, TypeError
        An argument out of range; :class:`NoRuns` (a ``ValueError``) when no variant applies to any of the cases.
    """
    alpha, power = check_rates(alpha, power)
    seed = check_int(seed, "seed", minimum=0)
    runs = plan_runs(variants, cases, seed=seed)
    if not runs:
        raise NoRuns("no (variant, case) pair to run: no variant applies to any of the cases")
    return BatteryPlan(tuple(runs), alpha, power, seed)
