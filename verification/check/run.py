""":func:`check_sampler`: one calibrated verdict on a sampler written anywhere.

Flow: check the arguments; compute the target law of every row in float64 from the float32 logits the
sampler receives; call the sampler three times on 16 draws (the protocol, the reproducibility properties,
the cost); fix the calls and the tests (:mod:`.plan`) and declare one Holm family of that size; draw; run
every test into the family; report (:class:`.report.SamplerReport`).  Nothing that is tested depends on
the pilot's draws, and the sizes depend on the draws of no call (only, with ``budget_s``, on timing).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from flashsampling.targets._inputs import check_temperature, per_row

from ..battery.aims import SpeculativeTarget, Target, softmax
from ..battery.protocol import SEED_LIMIT, SamplerCall, prepare_logits
from ..planning import check as planning
from ..planning.check import (
    CALLS_SEED_OFFSET,
    COST_DRAWS,
    COST_SEED_OFFSET,
    PILOT_DRAWS,
    PILOT_SEED_OFFSET,
    ROWS_SEED_OFFSET,
    Plan,
    RowPlan,
)
from ..runners.suite import run_suite
from ..stats._validate import check_alpha, check_fraction, check_int, check_positive_real, check_power
from ..stats.counts import Counts, count_samples
from ..stats.family import Family
from ..stats.independence import lag_scan_test
from ..stats.results import StatResult
from ..stats.support import support_test
from ..stats.ties import TieResult, tie_bias_test
from .report import CheckedTest, Property, SamplerReport

__all__ = ["DEFAULT_TV", "MAX_SEED", "check_sampler"]

#: Total variation the sizes are planned for when neither ``tv`` nor ``budget_s`` is given.  One percent
#: of the mass moved is the size of the defects that matter in practice and that a CPU can afford to
#: resolve: a 3 % temperature error on N(0, 2**2) logits moves about 2 % (measured in
#: ``docs/verify-your-sampler.md``), and at V = 1000 the chi-square needs about 10**6 draws a row for 1 %,
#: a second for a NumPy sampler.  Defects far below 1 % in total variation but deadly in practice (a
#: starved tail, shared noise, an overlapping stream) are the tail, range and independence tests' job,
#: and they catch them at this ``n``.
DEFAULT_TV = 0.01
#: Largest ``seed`` accepted: the check's seeds ``seed .. seed + 65539`` stay below ``SEED_LIMIT``.
MAX_SEED = SEED_LIMIT - CALLS_SEED_OFFSET - 8
#: Fraction of ``budget_s`` kept for the tests and the report after the draws.
TEST_RESERVE = 0.2


def _target(target):
    if isinstance(target, (Target, SpeculativeTarget)):
        return target
    if target == "softmax":
        return softmax()
    raise TypeError(
        "target must be 'softmax', a verification.battery.aims.Target (top_k(...), top_p(...), min_p(...), chain(...)) "
        f"or a SpeculativeTarget (speculative(...)), got {target!r}"
    )


def _temperatures(temperature, rows: int) -> np.ndarray:
    t = check_temperature(temperature)
    return per_row(t, "temperature", (rows,)).astype(np.float64)


def check_sampler(
    sampler,
    logits,
    *,
    target="softmax",
    temperature=1.0,
    alpha: float = 1e-3,
    power: float = 0.99,
    tv: float | None = None,
    budget_s: float | None = None,
    seed: int = 0,
) -> SamplerReport:
    """Check that ``sampler`` draws exactly from ``target`` on ``logits``: one verdict under one Holm family.

    Fails (``not report.passed``) if any test's Holm-adjusted p-value is ``<= alpha``.  Guarantee: (a) an
    exact sampler (rows, calls and seeds giving independent draws from the target) fails with probability
    at most ``alpha``; (b) each test states the deviation it detects with probability ``>= power`` at its
    ``n`` and its level ``alpha / m``, and a sampler off by at least that much in that test's measure passes
    with probability at most ``1 - power``.  With ``tv`` the sizes are planned so that the chi-square tests
    detect a total variation ``tv`` from the target in every row (over all categories: pooled mass
    included) and the lag scans a total variation ``tv`` from independence; ``n`` grows as ``1 / tv**2``.

    The sampler protocol (:mod:`verification.battery.protocol`)
    ----------------------------------------------------------
    ``sampler(logits, num_samples, seed) -> tokens``: ``logits`` a float32 ``torch.Tensor [B, V]`` (a fresh
    copy each call), ``num_samples`` an int, ``seed`` an int in ``[0, 2**31)``; ``tokens`` integers of shape
    ``[B, num_samples]`` (torch, NumPy, or anything ``numpy.asarray`` takes, e.g. JAX).  A sampler with no
    seed parameter is called as ``sampler(logits, num_samples)``; its seed tests and reproducibility
    properties are then skipped, and the report says so.  The temperature and filters are not passed:
    bind them (``functools.partial``).  NumPy and JAX callables: :mod:`verification.adapters`.  A
    speculative sampler has its own protocol (``target=speculative(...)``, :mod:`verification.check.speculative`).

    The tests (:mod:`verification.planning.check`)
    -------------------------------------------
    Per row: pooled Pearson chi-square and G-test, DKWM in index and descending order, per-category
    binomial (under- and over-drawn), the two-sided tail mass on the target's far tail (tokens 16, 12 or 8
    nats below the top, the deepest the draws can test; none when the target has none), tie bias on the
    largest group of tied logits, and range (every draw in ``[0, V)`` and, for a truncated target, in its
    support).  Independence: draws ``j, j + l`` of one call (lags 1..8), adjacent rows of one call, seeds
    ``s`` and ``s + 1``, and two calls, each a lag scan over shifts -8..8 corrected by Bonferroni over the
    shifts, so a stream that overlaps another with a shift is found without being told the pairing.

    Parameters
    ----------
    sampler : callable
        See the protocol above.
    logits : array_like or torch.Tensor, float, shape (V,) or (B, V)
        Rows may differ; ``-inf`` masks a token.  The sampler receives them as float32 (on the device of a
        torch input); the target is computed in float64 from those float32 values.  For a speculative
        target: the target model's logits ``(B, K + 1, V)``.
    target : "softmax", Target or SpeculativeTarget
        ``verification.battery.aims.softmax()`` (default), ``top_k(k)``, ``top_p(p)``, ``min_p(p)``,
        ``chain(...)`` or ``speculative(draft_probs)``.
    temperature : float >= 0 or sequence of floats (one per row)
        The temperature of the target (the sampler applies its own; 0 is greedy).
    alpha : float in (0, 1)
        Family-wise false-alarm rate.
    power : float in (alpha, 1)
        Power at which each test states its detectable deviation.
    tv : float in (0, 1], optional
        Total variation to plan for (default :data:`DEFAULT_TV` when ``budget_s`` is not given either).
    budget_s : float > 0, optional
        Seconds for the whole check: after the pilot, the draws are sized to fit 80 % of what is left
        (an affine cost model from two timed calls), the rest is kept for the tests.
    seed : int in [0, MAX_SEED]
        Base seed ``s`` of the calls (:mod:`verification.planning.check` lists every call's seed).

    Returns
    -------
    SamplerReport
        ``.passed``, ``.tests`` (each unpacks as ``statistic, pvalue``), ``.properties``, ``.skipped``,
        ``.to_markdown()``, ``.to_json()``.

    Raises
    ------
    TypeError, ValueError
        An argument out of range, before any call (``tv`` and ``budget_s`` together included); a sampler
        that breaks the protocol (wrong shape or dtype), at its first call.

    References
    ----------
    .. [1] Holm, S. (1979). A simple sequentially rejective multiple test procedure. *Scandinavian
       Journal of Statistics* 6(2), 65-70.
    .. [2] TensorFlow Probability, ``tfp.distributions.internal.statistical_testing``: one family-wise
       false-alarm rate split over the batch members and the tests, each with its planning twin.

    Examples
    --------
    >>> import numpy as np
    >>> def choice(logits, num_samples, seed):
    ...     z = logits.double().numpy()
    ...     p = np.exp(z - z.max(1, keepdims=True))
    ...     rng = np.random.default_rng(seed)
    ...     return np.stack([rng.choice(len(r), num_samples, p=r / r.sum()) for r in p])
    >>> report = check_sampler(choice, np.array([[0.0, 1.0, 2.0, 3.0]]), tv=0.1)
    >>> report.passed, report.n
    (True, 5896)
    >>> statistic, pvalue = report.test("row 0: pearson")
    """
    t0 = time.perf_counter()
    alpha = check_alpha(alpha)
    power = check_power(power, alpha)
    if tv is not None and budget_s is not None:
        raise ValueError("pass tv or budget_s, not both: tv plans the sizes for a deviation, budget_s for a time")
    if budget_s is not None:
        budget_s = check_positive_real(budget_s, "budget_s")
    elif tv is None:
        tv = DEFAULT_TV
    if tv is not None:
        tv = check_fraction(tv, "tv")
    seed = check_int(seed, "seed", minimum=0)
    if seed > MAX_SEED:
        raise ValueError(f"seed must be in [0, {MAX_SEED}] (the calls' seeds stay below 2**31), got seed={seed}")
    goal = _target(target)
    call = SamplerCall.wrap(sampler)
    if isinstance(goal, SpeculativeTarget):
        from .speculative import check_speculative

        return check_speculative(call, logits, goal, temperature=temperature, alpha=alpha, power=power, tv=tv,
                                 budget_s=budget_s, seed=seed, started=t0)  # fmt: skip
    L, z = prepare_logits(logits)
    temps = _temperatures(temperature, z.shape[0])
    probs = goal.probs(z, temps)
    rows = planning.row_plans(z, temps, goal, probs)
    per_row = len(set(temps.tolist())) > 1 or _per_row_parameters(goal)
    properties, cost = _pilot(call, L, seed, budget_s is not None, moved=not per_row)
    if budget_s is not None:
        left = (budget_s - (time.perf_counter() - t0)) * (1 - TEST_RESERVE)
        columns, calls = planning.columns_for_budget(left, cost, z.shape[0], call.seeded), 2
        how = (f"sizes fit budget_s = {budget_s:g} s after a pilot (cost per call {cost[0]:.3g} s + "
               f"{cost[1]:.3g} s per draw of a row)")  # fmt: skip
        stream = columns
    else:
        columns, calls, stream, notes = planning.columns_for_tv(rows, tv, alpha, power, call.seeded)
        how = (f"sizes planned for total variation tv = {tv:g} (each test's own law-aware planner at level "
               f"alpha/{planning.max_tests(len(rows), call.seeded)})")  # fmt: skip
        how += "".join(f"; {note}" for note in notes)
    plan = planning.build_plan(rows, columns, calls, alpha, power, call.seeded)
    family = Family(alpha=alpha, size=len(plan.tests), name=call.name)
    draws = _draw(call, L, plan, seed, stream)
    _run_tests(plan, draws, family, power)
    members = {m.name: m for m in family.members()}
    tests = []
    for name in plan.tests:
        m = members[name]
        r = m.result
        tests.append(CheckedTest(name, planning.test_title(name), float(r.statistic), float(r.pvalue),
                                 m.adjusted_pvalue, int(r.n), float(r.alpha), float(r.min_detectable), r.deviation,
                                 m.passed, r))  # fmt: skip
    t_out = [float(t) for t in temps]
    return SamplerReport(
        passed=family.passed,
        tests=tests,
        properties=properties,
        skipped=plan.skipped,
        sampler=call.name,
        target=repr(goal),
        shape=tuple(int(s) for s in z.shape),
        temperature=t_out[0] if len(set(t_out)) == 1 else t_out,
        alpha=alpha,
        power=power,
        tv=tv,
        budget_s=budget_s,
        n=plan.n,
        stream=stream,
        calls=draws.calls,
        seed=seed,
        seconds=time.perf_counter() - t0,
        plan=how,
    )


def _per_row_parameters(target: Target) -> bool:
    """The target has a parameter given per row (then a sampler binds it by batch position)."""
    return any(isinstance(v, tuple) for k, v in target.params if k != "order") or any(
        _per_row_parameters(s) for s in target.steps
    )


def _seed(call: SamplerCall, seed: int) -> int | None:
    return seed if call.seeded else None


def _moved(call: SamplerCall, L: torch.Tensor, first: np.ndarray, s: int) -> Property:
    """The batch-position property: the same seed on ``[L[B-1], L]``; row ``b + 1`` against row ``b``."""
    name = "tokens independent of batch position and size"
    b = int(L.shape[0])
    try:
        moved = call(torch.cat([L[-1:], L]), PILOT_DRAWS, s)
    except Exception as e:  # a property, not a test: a sampler may refuse another batch size
        return Property(name, None, f"the sampler raised {type(e).__name__} on a batch of {b + 1} rows: {e}")
    return Property(name, bool(np.array_equal(moved[1:], first)),
                    f"row b of a call on the logits vs row b + 1 of a call on [row {b - 1}, logits] ({b + 1} rows), "
                    "same seed")  # fmt: skip


def _pilot(call: SamplerCall, L: torch.Tensor, seed: int, budgeted: bool, *,
           moved: bool = True) -> tuple[list[Property], tuple[float, float]]:  # fmt: skip
    """The pilot calls: the protocol, the reproducibility properties and (``budgeted``) the cost model.
    ``moved=False`` (per-row temperatures or target parameters, which a sampler binds by batch position)
    skips the call on a moved batch."""
    s = _seed(call, seed + PILOT_SEED_OFFSET)
    b = int(L.shape[0])
    first = call(L, PILOT_DRAWS, s)  # checks the protocol; may compile (JIT), so it is not timed
    t = time.perf_counter()
    again = call(L, PILOT_DRAWS, s)
    t_small = time.perf_counter() - t
    if call.seeded:
        same = Property("same seed, same tokens", bool(np.array_equal(first, again)),
                        f"two calls with seed {s} on the logits, {PILOT_DRAWS} draws a row")  # fmt: skip
        if moved:
            props = [same, _moved(call, L, first, s)]
        else:
            props = [same, Property("tokens independent of batch position and size", None,
                                    "not checked: per-row temperatures or target parameters are bound to the batch "
                                    "positions")]  # fmt: skip
    else:
        props = [
            Property("same seed, same tokens", None, "the sampler takes no seed"),
            Property("tokens independent of batch position and size", None, "the sampler takes no seed"),
        ]
    cost = (0.0, 0.0)
    if budgeted:
        t = time.perf_counter()
        call(L, COST_DRAWS, _seed(call, seed + COST_SEED_OFFSET))
        t_big = time.perf_counter() - t
        per = max((t_big - t_small) / (b * (COST_DRAWS - PILOT_DRAWS)), t_big / (b * COST_DRAWS) / 4, 1e-12)
        cost = (max(0.0, t_small - per * b * PILOT_DRAWS), per)
    return props, cost


@dataclass
class _Draws:
    """What the draws calls returned: per-row counts, the first call whole, the other streams' row."""

    counts: list[Counts]
    first: np.ndarray
    second: np.ndarray | None
    calls_stream: np.ndarray | None
    rows_pair: tuple[np.ndarray, np.ndarray] | None
    calls: int


def _draw(call: SamplerCall, L: torch.Tensor, plan: Plan, seed: int, stream: int) -> _Draws:
    v = int(L.shape[1])
    counts: list[Counts] = []
    first = second = None
    sr = plan.stream_row
    for k in range(plan.calls):
        x = call(L, plan.columns, _seed(call, seed + k))
        per_row = [count_samples(x[b], v) for b in range(x.shape[0])]
        counts = per_row if not counts else [c + d for c, d in zip(counts, per_row)]
        if k == 0:
            first = x
        elif k == 1 and sr is not None:
            second = x[sr]
    made = 3 + plan.calls
    calls_stream = rows_pair = None
    if sr is not None and "calls" in plan.tests:
        if call.seeded:
            calls_stream = call(L, stream, seed + CALLS_SEED_OFFSET)[sr]
            made += 1
        else:
            calls_stream = second
    if plan.row_pairs == ((0, 0),):
        y = call(torch.cat([L, L]), stream, _seed(call, seed + ROWS_SEED_OFFSET))
        rows_pair = (y[0], y[1])
        made += 1
    return _Draws(counts, first, second, calls_stream, rows_pair, made)


def _tie_test(counts: Counts, r: RowPlan, alpha: float, power: float) -> StatResult:
    """The tie test on the draws that land in the tied group (conditional on their number)."""
    h = np.where(r.tie, counts.histogram, 0)
    if h.sum() == 0:
        return TieResult("tie bias (lower half)", 0.0, 1.0, 0, alpha, power, math.inf, "lower-half mass shift",
                         0.0, 0.5, int(r.tie.sum()), 0)  # fmt: skip
    return tie_bias_test(Counts(h), r.probs.size, support=r.tie, alpha=alpha, power=power)


def _run_tests(plan: Plan, d: _Draws, family: Family, power: float) -> None:
    a = family.test_alpha
    v = plan.rows[0].probs.size
    names = set(plan.tests)
    for r in plan.rows:
        prefix = f"row {r.index}: "
        counts = d.counts[r.index]
        if r.support >= 2:
            run_suite(counts, r.case, power=power, family=family, prefix=prefix)
            if prefix + "ties" in names:
                family.add(prefix + "ties", _tie_test(counts, r, a, power))
        family.add(prefix + "range", support_test(counts, r.probs, alpha=a, power=power))
    sr = plan.stream_row
    if "samples" not in names:
        return
    x = d.first[sr]
    family.add("samples", lag_scan_test(x, num_categories=v, alpha=a, power=power))
    for b0, b1 in plan.row_pairs:
        if (b0, b1) == (0, 0):
            family.add("rows 0-0'", lag_scan_test(*d.rows_pair, num_categories=v, alpha=a, power=power))
        else:
            family.add(f"rows {b0}-{b1}", lag_scan_test(d.first[b0], d.first[b1], num_categories=v, alpha=a,
                                                        power=power))  # fmt: skip
    if "seeds" in names:
        family.add("seeds", lag_scan_test(x, d.second, num_categories=v, alpha=a, power=power))
    family.add("calls", lag_scan_test(x, d.calls_stream, num_categories=v, alpha=a, power=power))
