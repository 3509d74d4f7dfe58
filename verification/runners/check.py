""":func:`check_sampler`: one calibrated verdict on a sampler written anywhere.

Flow: check the arguments once and compute the target law of every row in float64 from the float32 logits the
sampler receives (:func:`verification.planning.check.check_request`); call the sampler three times on 16 draws
(the protocol, the reproducibility properties, the cost: :func:`.draws.pilot`); fix the calls and the tests
(:func:`verification.planning.check.plan_check`) and declare one Holm family of that size; draw
(:func:`.draws.draw`: many calls of at most ``MAX_CALL_DRAWS`` columns, counted call by call on the tokens'
device, so memory is ``O(B V)`` at any ``n``); run every test into the family; report
(:class:`.sampler_report.SamplerReport`, with the measured draws/s and where the time went).  Nothing that is
tested depends on the pilot's draws, and the sizes depend on the draws of no call (only, with ``budget_s``, on
timing: the draws continue until the time reserved for them is spent, and each test reads the ``n`` drawn).  A
speculative aim takes the same request through :mod:`.speculative`.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from ..planning.check import Plan, RowPlan, plan_check, row_plans, test_title
from ..planning.request import DEFAULT_TV, check_request
from ..planning.streams import DEFAULT_SEED_BITS, MAX_SEED, halves, serial_lags, stream_row
from ..stats.counts import Counts
from ..stats.family import Family
from ..stats.independence import lag_scan_test, streams_scan_test
from ..stats.results import StatResult
from ..stats.support import support_test
from ..stats.ties import TieResult, tie_bias_test
from .certify import certify
from .diagnosis import diagnose
from .draws import Draws, draw, pilot
from .sampler_report import SamplerReport, sampler_report
from .speculative import check_speculative
from .suite import run_suite

__all__ = ["DEFAULT_TV", "MAX_SEED", "check_sampler"]

#: The clock every phase of a check is timed by (and the draws stop by): one place, so that a test can replace it.
_clock = time.perf_counter


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
    seed_bits: int = DEFAULT_SEED_BITS,
    progress: bool | None = None,
) -> SamplerReport:
    """Check that ``sampler`` draws exactly from ``target`` on ``logits``: one verdict under one Holm family.

    Fails (``not report.passed``) if any test's Holm-adjusted p-value is ``<= alpha``.  Guarantee: (a) an
    exact sampler (rows, calls and seeds giving independent draws from the target) fails with probability
    at most ``alpha``; (b) each test states the deviation it detects with probability ``>= power`` at its
    ``n`` and its level ``alpha / m``, and a sampler off by at least that much in that test's measure passes
    with probability at most ``1 - power``.  With ``tv`` the sizes are planned so that the chi-square tests
    detect a total variation ``tv`` from the target in every row (over all categories: pooled mass
    included) and the lag scans a total variation ``tv`` from independence; ``n`` grows as ``1 / tv**2``.
    With ``budget_s`` the draws continue until the time reserved for them is spent, so ``n`` grows in proportion
    to the budget (doubling it roughly doubles ``n``); ``n`` then depends on the calls' timing, never on the
    tokens drawn, so the guarantee holds at the ``n`` drawn (for a sampler whose running time does not depend on
    its tokens), and each test states its deviation at that ``n``.  Either way ``n`` is drawn in calls of at most
    ``MAX_CALL_DRAWS`` columns and counted call by call (torch tokens on their own device), so ``n`` is limited by
    ``tv`` or ``budget_s`` alone (up to 3.4e10 a row), not by memory.

    The sampler protocol (:mod:`verification.battery.protocol`)
    ------------------------------------------------------------
    ``sampler(logits, num_samples, seed) -> tokens``: ``logits`` a float32 ``torch.Tensor [B, V]`` (a fresh
    copy each call), ``num_samples`` an int, ``seed`` an int in ``[0, 2**seed_bits)``; ``tokens`` integers of shape
    ``[B, num_samples]`` (torch, NumPy, or anything ``numpy.asarray`` takes, e.g. JAX).  A sampler with no
    seed parameter is called as ``sampler(logits, num_samples)``; its seed tests and reproducibility
    properties are then skipped, and the report says so.  The temperature and filters are not passed:
    bind them (``functools.partial``).  NumPy and JAX callables: :mod:`verification.adapters`.  A
    speculative sampler has its own protocol (``target=speculative(...)``, :mod:`verification.runners.speculative`).

    The tests (:mod:`verification.planning.check`)
    ----------------------------------------------
    Per row: pooled Pearson chi-square and G-test, DKWM in index and descending order, per-category
    binomial (under- and over-drawn), the two-sided tail mass on the target's far tail (tokens 16, 12 or 8
    nats below the top, the deepest the draws can test; none when the target has none), tie bias on the
    largest group of tied logits, and range (every draw in ``[0, V)`` and, for a truncated target, in its
    support).  Independence: draws ``j, j + l`` of one call (lags 1..8, every power of two up to half the call,
    and half the call), the halves of a call (the second read backwards), adjacent rows of one call, the first row
    against each row 2 to 64 below it (noise keyed by a batch slot modulo ``d``), seeds
    ``s`` and ``s + 1``, seeds ``s`` and ``s xor 2**j`` for every bit ``j = 16 .. seed_bits - 1`` (a seed
    truncated or hashed to fewer bits gives two equal streams), and two calls, each a lag scan over shifts -8..8
    (or the lags) corrected by Bonferroni over what it scans, so a stream that overlaps another with a shift is
    found without being told the pairing.

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
        Seconds for the whole check: after the pilot (whose calls of growing width fix an affine cost model),
        80 % of what is left is reserved for drawing, the rest for the tests and the report.  The plan fixes the
        tests from the cost model; the draws then adapt: calls continue until the drawing time is spent, each
        predicted from the last call's time and shrunk where it would overrun, so a sampler slower than its
        pilot (a quadratic cost, a sleep) still stops on time.  The report gives the planned and the drawn ``n``,
        the measured draws/s and the seconds of each phase (``report.timing``).
    seed : int in [0, 2**seed_bits)
        Base seed ``s`` of the calls (:mod:`verification.planning.streams` lists every call's seed, each taken
        modulo ``2**seed_bits``).
    seed_bits : 31, 32, 63 or 64
        The seeds passed to the sampler lie in ``[0, 2**seed_bits)``; 31 (the default) suits every common
        generator (``numpy.random.seed``, ``jax.random.key``); 64 tests a sampler keyed by 64-bit seeds in
        all of them (truncation to 32 bits included).
    progress : bool, optional
        Show a progress bar with an ETA of the draws on stderr once the check has run 2 s (``None``, the default:
        when stderr is a terminal).

    Returns
    -------
    SamplerReport
        ``.passed``, ``.tests`` (each unpacks as ``statistic, pvalue``), ``.properties``, ``.skipped``,
        ``.to_markdown()``, ``.to_json()``; ``.tv_upper_bound`` (an upper confidence bound at ``1 - alpha`` on the
        total variation to the target, every row at once, ``proofs/tv_certificate.md``), ``.tail_bounds``,
        ``.shortfall`` (draws and seconds the asked-for ``tv`` needs, when short of it) and ``.diagnoses`` (each
        failing test's worst tokens and likely mechanism).

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
    (True, 7172)
    >>> statistic, pvalue = report.test("row 0: pearson")
    """
    clock = _clock
    t0 = clock()
    request = check_request(sampler, logits, target=target, temperature=temperature, alpha=alpha, power=power,
                            tv=tv, budget_s=budget_s, seed=seed, seed_bits=seed_bits,
                            progress=progress)  # fmt: skip
    if request.speculative:
        return check_speculative(request, started=t0)
    rows = row_plans(request)
    properties, cost, pilot_calls = pilot(request, clock=clock)
    t_pilot = clock()
    if cost is not None:
        cost = dataclasses.replace(cost, scan=_scan_seconds(rows, clock))
    elapsed = clock() - t0
    plan = plan_check(request, rows, cost or (0.0, 0.0), elapsed)
    deadline = None if plan.draw_s is None else t0 + elapsed + plan.draw_s
    family = Family(alpha=request.alpha, size=len(plan.tests), name=request.call.name)
    t_plan = clock()
    draws = draw(request, plan, deadline=deadline, progress=request.progress, pilot_calls=pilot_calls, clock=clock)
    t_draw = clock()
    _run_tests(plan, draws, family, request.power)
    t_test = clock()
    rate = draws.tokens / draws.sampler_s if draws.sampler_s > 0 else None
    how = plan.how
    if plan.draw_s is not None or draws.interrupted:
        how += f"; drawn: {draws.n:,} draws a row (planned {plan.n:,}) in {draws.draw_calls} draws calls" + (
            ", interrupted (KeyboardInterrupt): the tests read what was drawn" if draws.interrupted else ""
        )
    report = sampler_report(request, family, plan.tests, test_title, properties=properties, skipped=plan.skipped,
                            shape=tuple(int(s) for s in request.values.shape), n=draws.n, stream=plan.stream,
                            calls=draws.calls, seconds=t_test - t0, how=how, planned_n=plan.n, draws_per_s=rate,
                            interrupted=draws.interrupted)  # fmt: skip
    report.diagnoses = diagnose(report, request, plan, draws.counts)
    report = certify(report, request, plan, draws.counts)
    t_end = clock()
    report.timing = {
        "pilot": t_pilot - t0,
        "planning": t_plan - t_pilot,
        "drawing": draws.sampler_s,
        "counting": draws.counting_s,
        "other calls": max(0.0, (t_draw - t_plan) - draws.sampler_s - draws.counting_s),
        "testing": t_test - t_draw,
        "reporting": t_end - t_test,
    }
    report.seconds = t_end - t0
    return report


#: Draws of each synthetic stream the scan cost is timed on (with ``budget_s``).
_SCAN_PROBE = 1 << 16


def _scan_seconds(rows: list[RowPlan], clock) -> float:
    """Seconds per stream draw of a two-stream lag scan, timed on two streams of the stream row's law (drawn by
    NumPy, not by the sampler, and never tested): the cost that bounds the streams with ``budget_s``."""
    sr = stream_row([r.probs for r in rows])
    if sr is None:
        return 0.0
    p = rows[sr].probs
    rng = np.random.default_rng(0)
    x, y = (rng.choice(p.size, _SCAN_PROBE, p=p / p.sum()) for _ in range(2))
    t = clock()
    lag_scan_test(x, y, num_categories=p.size)
    return (clock() - t) / _SCAN_PROBE


def _tie_test(counts: Counts, r: RowPlan, alpha: float, power: float) -> StatResult:
    """The tie test on the draws that land in the tied group (conditional on their number)."""
    h = np.where(r.tie, counts.histogram, 0)
    if h.sum() == 0:
        return TieResult("tie bias (lower half)", 0.0, 1.0, 0, alpha, power, math.inf, "lower-half mass shift",
                         0.0, 0.5, int(r.tie.sum()), 0)  # fmt: skip
    return tie_bias_test(Counts(h), r.probs.size, support=r.tie, alpha=alpha, power=power)


def _run_tests(plan: Plan, d: Draws, family: Family, power: float) -> None:
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
    family.add("samples", lag_scan_test(x, lags=serial_lags(x.size), num_categories=v, alpha=a, power=power))
    family.add("halves", lag_scan_test(*halves(x), num_categories=v, alpha=a, power=power))
    for b0, b1 in plan.row_pairs:
        if (b0, b1) == (0, 0):
            family.add("rows 0-0'", lag_scan_test(*d.rows_pair, num_categories=v, alpha=a, power=power))
        else:
            family.add(f"rows {b0}-{b1}", lag_scan_test(d.first[b0], d.first[b1], num_categories=v, alpha=a,
                                                        power=power))  # fmt: skip
    if "row distances" in names:
        r0, *far = plan.distance_rows
        m = plan.distance_stream
        family.add("row distances", streams_scan_test(d.first[r0][:m], [d.first[k][:m] for k in far],
                                                      labels=[f"rows {r0}-{k}" for k in far], num_categories=v,
                                                      alpha=a, power=power))  # fmt: skip
    if "seeds" in names:
        family.add("seeds", lag_scan_test(x, d.second, num_categories=v, alpha=a, power=power))
    if "seed bits" in names:
        family.add("seed bits", streams_scan_test(x, d.bit_streams, labels=[f"bit {j}" for j in plan.bits],
                                                  num_categories=v, alpha=a, power=power))  # fmt: skip
    family.add("calls", lag_scan_test(x, d.calls_stream, num_categories=v, alpha=a, power=power))
