"""The battery engine: every (variant, case) through the suite, into one Holm family.

Data flow
---------
::

    variants x cases --plan_runs--> runs: the pairs a variant applies to, each with its seed and the
                                    names of its suite's tests (suite_names; + gumbel-max where the
                                    variant exposes its perturbed maxima)
    runs --> Family(alpha, size = m = every test of every run)    declared before the first draw
    per run: draws (a fixed n, or batches that fill the run's share of a time budget)
             --count_samples--> Counts (+ the perturbed maxima)
             --run_suite(counts, case, maxima, family=family, prefix="variant/case:")-->
             m members, each run at level alpha / m and stating its detectable deviation there
    --> BatteryResult(family, runs) --> verification.runners.battery_report (report.md, report.json, plots)

One Holm over every test of the battery: an exact set of samplers fails any test with probability at
most ``alpha``, whatever the dependence between the tests (Holm 1979).  Because ``m`` is known before
the first test, each test runs at ``alpha / m``, the level Holm's first step holds it to and the one at
which its ``min_detectable`` holds inside the family (:class:`verification.Family`).  One variant on one
case is the same call with one-element lists.

Sample sizes
------------
Without a budget, run ``r`` draws ``max(MIN_DRAWS, min(cpu_max_n, cpu_elements // V))`` samples, the
variant's declared cost in ``n * V`` units (deterministic for a fixed seed).

With ``budget_s``, the runs share the time: each run, in turn, gets the time left divided by the runs
left, and fills it with batches: a first batch of ``FIRST_BATCH`` draws is the pilot; each later batch
is sized from the cost per draw of the one before to fill what is left of the share, at most
``GROWTH`` times the draws so far (a small pilot's cost per draw can be off); the run stops when what is
left would buy less than a quarter of its draws so far.  A run that ends early (capped at ``MAX_DRAWS``)
leaves its time to the runs after it, and one that overruns (a slow pilot) takes it from them, so the
runs go kernels first, then the control, then the twins (which can use any time left).  Testing
happens inside the run's share.  The budget cannot go below one pilot batch per
run: the 26 interpreted kernel runs of the CPU battery take 14 s for theirs on 2 cores at a load
average of 3, and 28 s at a load average of 8 (measured with ``--budget 30``).  Batch
``b`` of run ``r`` draws with seed ``seed + 1000 r + b`` (its maxima with ``+ 500``), so batches are
independent streams; ``n`` depends on timing, never on the draws, so the tests keep their level.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from ..battery.cases import Case
from ..battery.variants import Variant
from ..planning.runs import BatteryPlan, Run, fixed_draws, plan_battery
from ..stats._validate import check_positive_real
from ..stats.counts import Counts, count_samples
from ..stats.family import Family
from .battery_report import BatteryResult, RunResult
from .suite import run_suite

__all__ = ["run_battery", "run_plan"]

#: Draws of the first (pilot) batch of a budgeted run: the interpreted kernels run 64 rows per call,
#: and a call costs 0.03-0.9 s on 2 CPU cores whether it draws 16 or 64 (measured on the battery's
#: cases), so a smaller pilot saves no time.
FIRST_BATCH = 64
#: A budgeted batch draws at most this many times the draws so far.
GROWTH = 8
#: Draws per call at most (128 MB of int64 draws).
MAX_BATCH = 1 << 24
#: Draws per budgeted run at most: beyond this, more time buys the suite little (the Pearson test at
#: V = 1000 already detects a TV of about 4e-4 at alpha 1e-6) and the counts stay far from overflow.
MAX_DRAWS = 50_000_000
#: Seed offset of the maxima of batch ``b`` (the draws use ``seed + b``, ``b < MAXIMA_SEED_OFFSET``).
MAXIMA_SEED_OFFSET = 500

#: Order in which a budgeted battery runs the layers: the kernels first, whose first batch may take
#: longer than their share (0.1-2 s interpreted), so the runs after them absorb the overrun; the
#: control next, which reaches ``MAX_DRAWS`` first on a long budget; the twins last, which can use any
#: time left.
_LAYER_ORDER = {"kernel": 0, "control": 1, "twin": 2}


def _batch(run: Run, n: int, b: int) -> tuple[Counts, np.ndarray | None]:
    """Batch ``b`` of ``n`` draws (and maxima) of ``run``, counted."""
    x = run.variant.sample(run.case, n, run.seed + b)
    counts = count_samples(x, run.case.num_categories)
    if counts.n != n:
        raise ValueError(f"variant {run.variant.name!r} returned {counts.n} draws where {n} were asked")
    mx = None
    if run.maxima:
        mx = np.asarray(run.variant.maxima(run.case, n, run.seed + MAXIMA_SEED_OFFSET + b), dtype=np.float64)
    return counts, mx


def _draw_fixed(run: Run, result: RunResult) -> list[np.ndarray]:
    counts, mx = _batch(run, fixed_draws(run.variant, run.case), 0)
    result.counts, result.n, result.batches = counts, counts.n, 1
    return [] if mx is None else [mx]


def _draw_until(run: Run, result: RunResult, until: float) -> list[np.ndarray]:
    """Batches of ``run`` until the next would end after ``until`` (see the module docstring)."""
    maxima: list[np.ndarray] = []
    n = FIRST_BATCH
    while True:
        t = time.perf_counter()
        counts, mx = _batch(run, n, result.batches)
        cost = (time.perf_counter() - t) / n
        result.counts = counts if result.counts is None else result.counts + counts
        result.n += n
        result.batches += 1
        if mx is not None:
            maxima.append(mx)
        left = until - time.perf_counter()
        n = min(int(left / max(cost, 1e-12)), GROWTH * result.n, MAX_BATCH, MAX_DRAWS - result.n)
        if n < max(FIRST_BATCH, result.n // 4) or result.batches >= MAXIMA_SEED_OFFSET:
            return maxima


def run_battery(
    variants: Sequence[Variant],
    cases: Sequence[Case],
    *,
    alpha: float = 1e-3,
    power: float = 0.99,
    budget_s: float | None = None,
    seed: int = 20261129,
    progress: Callable[[RunResult], None] | None = None,
) -> BatteryResult:
    """Run every variant on every case it applies to through the suite, into one Holm family.

    Fails (``not result.passed``) if any test's Holm-adjusted p-value is ``<= alpha``.  Guarantee: (a) when
    every variant is exact, the battery fails with probability at most ``alpha`` in total; (b) each test
    runs at ``alpha / m`` (``m`` tests in all, known before the first draw) and states there the deviation
    it detects with probability ``>= power`` at its ``n``.

    Parameters
    ----------
    variants : sequence of Variant
    cases : sequence of Case
    alpha : float in (0, 1)
        Family-wise false-alarm rate of the whole battery.
    power : float in (alpha, 1)
        Power at which each test states its detectable deviation.
    budget_s : float > 0, optional
        Seconds for drawing and testing every run (see the module docstring); ``None``: fixed sizes.
    seed : int >= 0
        Base seed (run ``r``, batch ``b`` draws with ``seed + 1000 r + b``).
    progress : callable, optional
        Called with each run's :class:`RunResult` when it has drawn and been tested.

    Returns
    -------
    BatteryResult

    Raises
    ------
    ValueError
        No variant applies to any case, or an argument is out of range.
    """
    plan = plan_battery(variants, cases, alpha=alpha, power=power, seed=seed)
    return run_plan(plan, budget_s=budget_s, progress=progress)


def run_plan(plan: BatteryPlan, *, budget_s: float | None = None,
             progress: Callable[[RunResult], None] | None = None) -> BatteryResult:  # fmt: skip
    """Run a :class:`~verification.planning.runs.BatteryPlan` (:func:`run_battery` with the plan made): draw,
    count and test every run into one Holm family of ``plan.size`` tests.  ``budget_s``: seconds for the draws
    and tests of every run (the module docstring says how they are shared); ``None``: fixed sizes."""
    if budget_s is not None:
        budget_s = check_positive_real(budget_s, "budget_s")
    runs = plan.runs
    power = plan.power
    t0 = time.perf_counter()
    family = Family(alpha=plan.alpha, size=plan.size, name="battery")
    results = {r.index: RunResult(r) for r in runs}
    order = sorted(runs, key=lambda r: _LAYER_ORDER.get(r.variant.layer, len(_LAYER_ORDER)))
    for k, run in enumerate(order):
        res = results[run.index]
        t = time.perf_counter()
        try:
            if budget_s is None:
                maxima = _draw_fixed(run, res)
            else:
                until = t + (t0 + budget_s - t) / (len(order) - k)
                maxima = _draw_until(run, res, until)
        except NotImplementedError as e:
            res.skipped = str(e) or "not implemented for this case"
        else:
            res.maxima = int(sum(m.size for m in maxima))
            run_suite(res.counts, run.case, power=power, maxima=np.concatenate(maxima) if maxima else None,
                      family=family, prefix=run.name + ":")  # fmt: skip
        res.seconds = time.perf_counter() - t
        if progress is not None:
            progress(res)
    return BatteryResult(family, [results[r.index] for r in runs], power, budget_s, time.perf_counter() - t0)
