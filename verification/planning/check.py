"""What :func:`verification.check_sampler` draws and tests, decided before the first draw it tests.

Request: :mod:`verification.planning.request`.  Calls and their seeds: :mod:`verification.planning.streams`.

Tests (one Holm family)
-----------------------
Per row ``b`` (names ``row b: <test>``): the suite of :func:`verification.runners.suite.run_suite` (``pearson``,
``g-test``, ``cdf-index``, ``cdf-descending``, ``categories`` and, where the target has a far tail that
``n`` draws can test, the two-sided ``tail`` of :func:`verification.stats.tails.far_tail`), then ``ties``
(the lower-half test on the tied group of largest mass, conditional on the draws that land in it, where
tied logits hold enough mass) and ``range`` (:func:`verification.stats.support.support_test`).  A row whose
law is a single token has the range test only.  Independence, on the row of the most spread law (the
*stream row*, largest ``1 - sum p_i**2``, the chance that two independent draws differ), each a lag scan
corrected by Bonferroni over what it scans (:func:`verification.stats.independence.lag_scan_test`; the streams
and their seeds: :mod:`verification.planning.streams`): ``samples`` (draws ``j`` and ``j + l`` of one call, ``l``
in ``1..8``, every power of two up to half the call, and half the call), ``halves`` (the first half of a call
against its second half read backwards), ``rows b-b+1`` (rows ``b`` and ``b + 1`` of draws 0, shifts ``-8..8``; with
``B = 1`` the rows call), ``row distances`` (the first spread row ``r0`` against each row ``r0 + d``, ``d = 2 ..
64``, of draws 0, shifts ``-8..8``, Bonferroni over rows and shifts), ``seeds`` (draws 0 against draws 1: seeds
``s`` and ``s + 1``, shifts ``-8..8``), ``seed bits`` (draws 0 against each bit call, seed ``s xor 2**j`` for ``j =
16 .. seed_bits - 1``, shifts ``-8..8``, Bonferroni over bits and shifts:
:func:`verification.stats.independence.streams_scan_test`) and ``calls`` (draws 0 against the calls call; seedless:
draws 0 against draws 1).

Sizes
-----
With ``tv``, each test plans with its own law-aware planner at the level ``alpha / m_max`` (``m_max``: every
optional test included, so the final level ``alpha / m`` is never lower): ``n`` is the largest
:func:`verification.stats.gof.required_gof_samples` over the rows (the chi-square's total variation at the
bins its pooling forms at ``n``), and the streams' length the largest
:func:`verification.stats.independence.required_lag_scan_samples` of the independence tests (the ``samples``
scan at its own lags, the ``halves`` scan on half a call, so a call is twice its need) and the bit calls'
length :func:`verification.stats.independence.required_streams_scan_samples`.  A call draws
``c = max(stream length, ceil(n / 2))`` columns, at most ``MAX_CALL_DRAWS``, in ``K = max(2, ceil(n / c))``
calls: ``n`` is limited only by ``tv`` (up to :data:`MAX_PLANNED_DRAWS`, 3.4e10 a row), and the counts are
accumulated call by call (:mod:`verification.runners.tally`), so memory is ``O(B V)`` plus the streams kept for
the independence tests (at most ``MAX_CALL_DRAWS`` each), whatever ``n``.

With ``budget_s`` (:func:`sizes_for_budget`): what is left after the pilot is split into the time for drawing
(``1 - TEST_RESERVE`` of it) and the time kept for the tests and the report.  At the pilot's affine cost the
stream calls (draws 0 and 1, the calls, rows and bit calls, whose streams the independence tests read) get
:data:`STREAM_SHARE` of the drawing time, and no more stream than the lag scans can read in half the time kept for
the tests (at the scan cost the pilot measured); the other draws calls have the width that takes about
:data:`CALL_SHARE` of the drawing time, and their planned number ``K`` fills the rest.  That plan fixes the tests
(one Holm family, its size declared before the first draw that is tested) and the planned ``n``; the draws then
*adapt* (:func:`verification.runners.draws.draw`): calls continue until the time reserved for drawing is spent,
each call's width shrunk where the last call's time says it would overrun, so doubling ``budget_s`` roughly
doubles ``n``, and a sampler slower than its pilot stops on time with what it drew.  The final ``n`` depends on
the calls' timing only, never on the values drawn: for a sampler whose running time does not depend on its
tokens, the counts given ``n`` are multinomial with ``n`` draws, so every test keeps its level ``alpha / m``;
each test reads the ``n`` actually drawn and states its detectable deviation at it.  The bit calls are left out
(and the ``seed bits`` scan with them) when their fixed cost per call would take more than :data:`STREAM_SHARE`
of the drawing time.

A law whose mass is nearly all on few tokens (a peaked row, a head far above a light tail) leaves the
chi-square one or two bins until ``n`` is large enough for its light part to fill a bin of its own; where
that is beyond ``MAX_PLANNED_DRAWS`` for ``tv`` (or beyond any ``n``), the row's draws are planned for the DKWM
test at Kolmogorov distance ``tv`` instead, and the plan says so: the chi-square's stated deviation at the
``n`` used is then larger than ``tv`` (or none), as the report shows.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from ..battery.cases import Case
from ..stats.cdf import required_cdf_samples
from ..stats.gof import gof_detectable_tv
from ..stats.independence import (
    DEFAULT_MAX_LAG,
    required_lag_scan_samples,
    required_streams_scan_samples,
    scan_detectable_tv,
    table_shape,
)
from ..stats.power import smallest_n
from ..stats.tails import far_tail
from ..stats.ties import min_detectable_tie_shift
from .request import CheckRequest
from .streams import (
    MAX_DRAW_CALLS,
    MAX_ROW_PAIRS,
    flipped_bits,
    row_distances,
    row_pairs,
    serial_lags,
    stream_row,
)
from .suite import TEST_TITLES, suite_names

__all__ = [
    "LawCase",
    "BudgetCost",
    "MAX_CALL_DRAWS",
    "MAX_PLANNED_DRAWS",
    "PILOT_DRAWS",
    "Plan",
    "RowPlan",
    "build_plan",
    "columns_for_budget",
    "columns_for_tv",
    "plan_check",
    "row_plans",
    "sizes_for_budget",
    "test_title",
]

#: Fraction of ``budget_s`` kept for the tests and the report after the draws.
TEST_RESERVE = 0.2

#: Columns (draws per row) of one call at most: 2**20 int64 tokens a row; a sampler that materializes
#: ``[B, num_samples, V]`` must draw in chunks of its own.
MAX_CALL_DRAWS = 1 << 20
#: Columns of a draws call at least: each half of a call holds the ``2 K + 2`` draws of a lag scan over
#: shifts ``-K..K`` (the ``halves`` scan).
MIN_COLUMNS = 4 * DEFAULT_MAX_LAG + 4
#: Draws per row the chi-square planning may ask for before the DKWM test sets the row's draws instead: what the
#: draws calls' seeds ``s + k``, ``k < MAX_DRAW_CALLS``, hold at the widest call (2**35, 3.4e10 a row).
MAX_PLANNED_DRAWS = MAX_DRAW_CALLS * MAX_CALL_DRAWS
#: Share of the drawing time (with ``budget_s``) planned for the stream calls, whose streams the lag scans read.
STREAM_SHARE = 0.25
#: Share of the drawing time (with ``budget_s``) one draws call is planned to take at most: the adaptive draws
#: re-estimate the rate, and a bar moves, at least this often.
CALL_SHARE = 1 / 16
#: Stream-scan units of the independence tests besides the row pairs (with ``budget_s``, the stream length is
#: bounded by the lag scans' cost): the ``samples`` scan reads about twice as many lags as a two-stream scan, the
#: ``halves`` scan half a stream, then ``seeds``, ``seed bits`` (the bit streams share one stream's length) and
#: ``calls`` one each.
SCAN_UNITS = 2.5 + 3
#: Draws of the pilot, repeat and moved calls (16 draws a row decide the reproducibility properties: two
#: independent draws of the same 16 tokens have probability at most ``max_i p_i**16``).
PILOT_DRAWS = 16
#: Draws of the budgeted cost call (with the pilot, the two points of the affine cost model).
COST_DRAWS = 128
#: The tie test runs where the draws expected in the tied group detect a lower-half shift of this much.
TIE_MAX_SHIFT = 0.25
#: Row tests, in order; ``tail`` and ``ties`` where they apply.
ROW_TESTS = ("pearson", "g-test", "cdf-index", "cdf-descending", "categories", "tail", "ties", "range")

_TITLES = {
    "ties": "tie bias (tied group)",
    "range": "range and support",
    "samples": f"independent draws in a call (lags 1..{DEFAULT_MAX_LAG}, powers of two, half the call)",
    "halves": f"a call's halves, the second read backwards (shifts -{DEFAULT_MAX_LAG}..{DEFAULT_MAX_LAG})",
    "rows": f"independent rows (shifts -{DEFAULT_MAX_LAG}..{DEFAULT_MAX_LAG})",
    "row distances": f"independent rows r0, r0 + d, d >= 2 (shifts -{DEFAULT_MAX_LAG}..{DEFAULT_MAX_LAG})",
    "seeds": f"independent seeds s, s+1 (shifts -{DEFAULT_MAX_LAG}..{DEFAULT_MAX_LAG})",
    "seed bits": f"independent seeds s, s xor 2^j, j >= 16 (shifts -{DEFAULT_MAX_LAG}..{DEFAULT_MAX_LAG})",
    "calls": f"independent calls (shifts -{DEFAULT_MAX_LAG}..{DEFAULT_MAX_LAG})",
}


def test_title(name: str) -> str:
    """Human-readable title of a member name (``"row 0: pearson"``, ``"rows 0-1"``, ``"seeds"``)."""
    if name in _TITLES:
        return _TITLES[name]
    test = name.split(": ", 1)[-1].split(" ", 1)[0]
    return _TITLES.get(test) or TEST_TITLES.get(test, test)


@dataclass(frozen=True, repr=False)
class LawCase(Case):
    """A row's case whose law is given (computed once for the whole batch: per-row target parameters)."""

    law: np.ndarray | None = field(default=None, repr=False)

    @property
    def probs(self) -> np.ndarray:
        return self.law


@dataclass(frozen=True)
class RowPlan:
    """One row: its case (float32 logits as float64, temperature, target), its law and what applies.

    ``tie`` is the mask of the tied group of largest mass (``None`` when no two kept tokens tie);
    ``support`` counts the categories of positive probability.
    """

    index: int
    case: Case
    probs: np.ndarray = field(repr=False)
    tie: np.ndarray | None = field(repr=False)
    support: int


def _tie_group(p: np.ndarray) -> np.ndarray | None:
    """Mask of the largest-mass group of >= 2 kept categories with bit-equal probability (tied logits)."""
    pos = p[p > 0]
    values, counts = np.unique(pos, return_counts=True)
    tied = counts >= 2
    if not tied.any():
        return None
    mass = values[tied] * counts[tied]
    return p == values[tied][int(np.argmax(mass))]


def row_plans(request: CheckRequest) -> list[RowPlan]:
    """One :class:`RowPlan` per row of the float64 values ``z [B, V]`` of the float32 logits."""
    z, probs = request.values, request.probs
    out = []
    for b in range(z.shape[0]):
        t = float(request.temperatures[b])
        p = probs[b]
        case = LawCase(f"row {b}", z[b], t, f"row {b} of the logits", target=request.aim, law=p)
        out.append(RowPlan(b, case, p, _tie_group(p), int(np.count_nonzero(p))))
    return out


@dataclass(frozen=True)
class Plan:
    """The calls and the tests of one check, fixed before the draws that are tested.

    Attributes
    ----------
    rows : tuple of RowPlan
        With each case's ``tail_gap`` set where the tail test runs.
    columns : int
        Draws per row of draws calls 0 and 1 (the streams of the ``samples``, ``halves``, ``rows`` and ``seeds``
        scans).
    calls : int
        Number of draws calls (with ``budget_s``: planned; the draws continue while the time lasts).
    stream_row : int or None
        The row the independence tests read (``None``: every row's law is one token).
    row_pairs : tuple of (int, int)
        Adjacent rows tested for independence (``(0, 0)``: the rows call with ``B = 1``).
    seeded : bool
    tests : tuple of str
        Member names, in family order.
    skipped : dict[str, str]
        Tests not run, and why.
    notes : tuple of str
        How the sizes were set where the plan departs from the rule (rows planned by DKWM).
    stream : int
        Draws per stream of the calls and rows calls' lag scans.
    how : str
        One line on how the sizes were chosen (the report's).
    bits : tuple of int
        The seed bits ``j`` of the bit calls (seed ``s xor 2**j``; empty when the seed-bit scan does not run).
    bit_stream : int
        Draws per row of each bit call.
    width : int
        Draws per row of the draws calls ``k >= 2`` (``0``: ``columns``).
    draw_s : float or None
        With ``budget_s``: seconds reserved for drawing (the draws adapt to them); ``None`` with ``tv``.
    cost : BudgetCost or None
        With ``budget_s``: what the pilot measured (the draws predict each call's time from it, then from the
        calls made).
    distance_rows : tuple of int
        ``(r0, r0 + d, ...)`` of the ``row distances`` scan (:func:`verification.planning.streams.row_distances`;
        empty when it does not run).
    distance_stream : int
        Draws per row of draws call 0 that scan reads (the rows share one stream's worth).
    """

    rows: tuple[RowPlan, ...]
    columns: int
    calls: int
    stream_row: int | None
    row_pairs: tuple[tuple[int, int], ...]
    seeded: bool
    tests: tuple[str, ...]
    skipped: dict[str, str]
    notes: tuple[str, ...] = ()
    stream: int = 0
    how: str = ""
    bits: tuple[int, ...] = ()
    bit_stream: int = 0
    width: int = 0
    draw_s: float | None = None
    cost: BudgetCost | None = None
    distance_rows: tuple[int, ...] = ()
    distance_stream: int = 0

    @property
    def call_width(self) -> int:
        """Draws per row of the draws calls ``k >= 2``."""
        return self.width or self.columns

    @property
    def n(self) -> int:
        """Draws per row planned for the distribution tests (with ``budget_s`` the draws adapt to the time; the
        report gives the ``n`` drawn)."""
        return 2 * self.columns + max(0, self.calls - 2) * self.call_width

    @property
    def stream_draws(self) -> int:
        """Draws of a stream of the lag scans (the columns of a call)."""
        return self.columns


def max_tests(num_rows: int, seeded: bool) -> int:
    """Family size with every optional test included (the level the sizes are planned at is alpha over it):
    per row :data:`ROW_TESTS`; ``samples``, ``halves``, the row pairs, ``row distances`` (three rows or more),
    ``calls``, and ``seeds`` and ``seed bits`` when the sampler takes a seed."""
    pairs = max(1, min(num_rows - 1, MAX_ROW_PAIRS))
    return num_rows * len(ROW_TESTS) + 2 + pairs + int(num_rows >= 3) + (3 if seeded else 1)


def _serial_need(p: np.ndarray, tv: float, a: float, power: float) -> int:
    """Draws of a call for the ``samples`` scan at its own lags (:func:`serial_lags` of the call) to detect ``tv``."""
    return smallest_n(lambda n: scan_detectable_tv(n, p, None, serial_lags(n), True, a, power) <= tv,
                      start=2 * DEFAULT_MAX_LAG + 2, what=f"tv={tv!r}")  # fmt: skip


def _gof_draws(r: RowPlan, tv: float, a: float, power: float) -> tuple[int, str | None]:
    """Draws for the chi-square at ``tv`` on row ``r``, or the DKWM test's with a note (module docstring)."""
    try:
        n = smallest_n(lambda m: gof_detectable_tv(m, r.probs, a, power) <= tv, what=f"tv={tv!r}",
                       limit=MAX_PLANNED_DRAWS)  # fmt: skip
        return n, None
    except ValueError:
        n = required_cdf_samples(tv, alpha=a, power=power)
        return n, (f"row {r.index}: the pooled chi-square reaches tv = {tv:g} only beyond {MAX_PLANNED_DRAWS:,} "
                   f"draws (its light part shares a bin with the head), so the row's draws are planned for the DKWM "
                   f"test at Kolmogorov distance {tv:g}")  # fmt: skip


def columns_for_tv(rows: list[RowPlan], tv: float, alpha: float, power: float, seeded: bool,
                   num_bits: int = 0) -> tuple[int, int, int, tuple[str, ...], int, int]:  # fmt: skip
    """``(columns, calls, stream, notes, bit_stream, distance_stream)`` for a declared total variation ``tv`` (see
    the module docstring): the draws calls' columns and number, the length of the calls and rows calls' streams,
    the notes of rows planned by the DKWM test, the length of each of the ``num_bits`` bit calls, and the draws of
    draws call 0 each row of the ``row distances`` scan reads."""
    a = alpha / max_tests(len(rows), seeded)
    n = 1
    notes = []
    for r in rows:
        if r.support >= 2:
            m, note = _gof_draws(r, tv, a, power)
            n = max(n, m)
            if note:
                notes.append(note)
    stream = bit_stream = distance_stream = 2 * DEFAULT_MAX_LAG + 2
    call = MIN_COLUMNS
    s = stream_row([r.probs for r in rows])
    if s is not None:
        p = rows[s].probs
        needs = [(rows[b0].probs, rows[b1].probs) for b0, b1 in row_pairs([r.probs for r in rows])]
        for px, py in [(p, p), *needs]:
            try:
                stream = max(stream, required_lag_scan_samples(tv, px, py, alpha=a, power=power))
            except ValueError:  # no table of two classes forms at any n (a law of one heavy token)
                continue
        try:  # the samples scan reads a call; the halves scan half a call (two streams of p)
            call = max(_serial_need(p, tv, a, power), 2 * required_lag_scan_samples(tv, p, p, alpha=a, power=power))
            if num_bits:
                bit_stream = required_streams_scan_samples(tv, p, p, num_streams=num_bits, alpha=a, power=power)
        except ValueError:
            pass
        far = row_distances([r.probs for r in rows])
        if far:
            try:  # the row distances scan reads the first draws call: r0 against each row r0 + d
                need = required_streams_scan_samples(tv, rows[far[0]].probs, p, num_streams=len(far) - 1, alpha=a,
                                                     power=power)  # fmt: skip
                distance_stream = max(distance_stream, min(MAX_CALL_DRAWS, need))
                call = max(call, distance_stream)
            except ValueError:
                pass
    stream = min(MAX_CALL_DRAWS, stream)
    columns = min(MAX_CALL_DRAWS, max(stream, call, math.ceil(n / 2)))
    return (
        columns,
        max(2, math.ceil(n / columns)),
        stream,
        tuple(notes),
        min(MAX_CALL_DRAWS, bit_stream),
        min(columns, distance_stream),
    )


def columns_for_budget(seconds: float, cost: tuple[float, float], num_rows: int, seeded: bool,
                       num_bits: int = 0) -> int:  # fmt: skip
    """Columns ``c`` of the two draws calls that fit ``seconds``, at the affine cost ``a + b * rows * c`` per
    call (``cost = (a, b)``): two draws calls, the calls call (seeded) and the rows call (``B = 1``, two
    rows), each of ``c`` columns, and ``num_bits`` bit calls sharing ``c`` columns.  At least
    :data:`MIN_COLUMNS`, at most ``MAX_CALL_DRAWS``."""
    a, b = cost
    row_columns = num_rows * (2 + int(seeded) + int(num_bits > 0)) + (2 if num_rows == 1 else 0)
    fixed = a * (2 + int(seeded) + int(num_rows == 1) + num_bits)
    c = (seconds - fixed) / max(b * row_columns, 1e-12)
    return int(min(MAX_CALL_DRAWS, max(MIN_COLUMNS, c)))


@dataclass(frozen=True)
class BudgetCost:
    """What the pilot measured for a budgeted plan: ``call`` seconds per call, ``draw`` seconds per draw of a row
    (the affine cost ``call + draw * rows * c`` of a call of ``c`` columns), ``scan`` seconds per draw of a
    stream in a two-stream lag scan, and the widest timed call: ``width`` columns in ``seconds``."""

    call: float
    draw: float
    scan: float = 0.0
    width: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class BudgetSizes:
    """:func:`sizes_for_budget`'s answer: the stream calls' ``columns``, the other draws calls' ``width``, the
    planned number of draws ``calls``, the seconds for drawing ``draw_s`` and whether the bit calls fit."""

    columns: int
    width: int
    calls: int
    draw_s: float
    bits_fit: bool


def sizes_for_budget(seconds: float, cost: BudgetCost, num_rows: int, seeded: bool, num_bits: int = 0,
                     num_pairs: int = 1) -> BudgetSizes:  # fmt: skip
    """The sizes of a check given ``seconds`` after the pilot (module docstring): ``draw_s = (1 - TEST_RESERVE)
    seconds`` for drawing; the stream calls' columns from :func:`columns_for_budget` on :data:`STREAM_SHARE` of it,
    at most what the lag scans read in half of the time kept for the tests (``SCAN_UNITS + num_pairs`` scans at
    ``cost.scan`` a draw); calls of :data:`CALL_SHARE` of ``draw_s`` after them, as many as fill it."""
    draw_s = seconds * (1 - TEST_RESERVE)
    a, b = cost.call, max(cost.draw, 1e-15)
    bits_fit = num_bits == 0 or a * (3 + num_bits) <= STREAM_SHARE * draw_s
    bits = num_bits if bits_fit else 0
    columns = columns_for_budget(STREAM_SHARE * draw_s, (a, b), num_rows, seeded, bits)
    if cost.scan > 0:
        scan_bound = seconds * TEST_RESERVE / 2 / (cost.scan * (SCAN_UNITS + num_pairs))
        columns = int(max(MIN_COLUMNS, min(columns, scan_bound)))
    streams = 2 + int(seeded) + int(num_rows == 1) + bits
    row_columns = num_rows * (2 + int(seeded) + int(bits > 0)) + (2 if num_rows == 1 else 0)
    stream_s = a * streams + b * row_columns * columns
    width = int(min(MAX_CALL_DRAWS, max(MIN_COLUMNS, (CALL_SHARE * draw_s - a) / (b * num_rows))))
    more = max(0.0, draw_s - stream_s) / (a + b * num_rows * width)
    calls = int(min(MAX_DRAW_CALLS, 2 + math.floor(more)))
    return BudgetSizes(columns, width, calls, draw_s, bits_fit)


def build_plan(rows: list[RowPlan], columns: int, calls: int, alpha: float, power: float, seeded: bool,
               notes: tuple[str, ...] = (), bits: tuple[int, ...] = (), width: int = 0,
               distance_stream: int | None = None) -> Plan:  # fmt: skip
    """Decide, for ``calls`` calls of ``columns`` draws (those after the first two of ``width`` where given),
    which optional tests run, and name every member; ``bits`` are the seed bits of the seed-bit scan (a seeded
    sampler's); ``distance_stream`` the draws each row of the ``row distances`` scan reads (``None``: the rows
    share one call's worth, ``columns / (rows - 1)`` each)."""
    if calls > MAX_DRAW_CALLS:
        raise ValueError(f"{calls} draws calls exceed the {MAX_DRAW_CALLS} seeds s + k kept for them")
    a = alpha / max_tests(len(rows), seeded)
    n = 2 * columns + max(0, calls - 2) * (width or columns)
    planned: list[RowPlan] = []
    tests: list[str] = []
    skipped: dict[str, str] = {}
    for r in rows:
        prefix = f"row {r.index}: "
        if r.support < 2:
            planned.append(r)
            tests.append(prefix + "range")
            skipped[prefix + "distribution"] = "the row's law is a single token: only the range test applies"
            continue
        tail = far_tail(r.probs, n, alpha=a, power=power)
        case = r.case
        if tail is not None and case.temperature > 0:
            case = dataclasses.replace(case, tail_gap=tail.gap)
        else:
            skipped[prefix + "tail"] = _no_tail(r.probs, n)
        planned.append(RowPlan(r.index, case, r.probs, r.tie, r.support))
        tests += [prefix + t for t in suite_names(case)]
        if r.tie is not None and _tie_testable(r, n, a, power):
            tests.append(prefix + "ties")
        else:
            skipped[prefix + "ties"] = _no_ties(r, n)
        tests.append(prefix + "range")
    stream = stream_row([r.probs for r in rows])
    pairs = row_pairs([r.probs for r in rows])
    far = row_distances([r.probs for r in rows])
    streams = ("samples", "halves", "rows", "row distances", "seeds", "seed bits", "calls")
    if stream is None:
        for name in streams:
            skipped[name] = "every row's law is a single token: draws of one token are independent"
    else:
        p = rows[stream].probs
        if min(table_shape(p, p, columns // 2 - DEFAULT_MAX_LAG)) < 2:
            for name in streams:
                skipped[name] = f"{columns} draws a call form no 2 x 2 table (one class holds the mass)"
            pairs = far = ()
        else:
            tests += ["samples", "halves"]
            tests += [f"rows {b0}-{b1}" if len(rows) > 1 else "rows 0-0'" for b0, b1 in pairs]
            if far:
                tests.append("row distances")
            if seeded:
                tests.append("seeds")
                if bits:
                    tests.append("seed bits")
            else:
                skipped["seeds"] = skipped["seed bits"] = "the sampler takes no seed"
            tests.append("calls")
        if not pairs and "rows" not in skipped:
            skipped["rows"] = "no two adjacent rows have a law of two or more tokens"
        if not far and "row distances" not in skipped:
            skipped["row distances"] = "no two rows 2 or more apart have laws of two or more tokens"
    if distance_stream is None:
        distance_stream = max(2 * DEFAULT_MAX_LAG + 2, columns // max(1, len(far) - 1))
    return Plan(tuple(planned), columns, calls, stream, pairs, seeded, tuple(tests), skipped, notes,
                bits=bits if "seed bits" in tests else (), width=width, distance_rows=far,
                distance_stream=min(columns, distance_stream) if far else 0)  # fmt: skip


def _tie_testable(r: RowPlan, n: int, a: float, power: float) -> bool:
    expected = int(n * float(r.probs[r.tie].sum()))
    try:
        return min_detectable_tie_shift(max(expected, 1), int(r.tie.sum()), alpha=a, power=power) <= TIE_MAX_SHIFT
    except ValueError:
        return False


def _no_tail(p: np.ndarray, n: int) -> str:
    top = float(p.max())
    mass = float(p[(p > 0) & (p <= top * math.exp(-8.0))].sum())
    if mass == 0.0:
        return "no kept token is 8 or more nats below the top: the target has no far tail"
    return (f"the tokens 8 or more nats below the top hold {mass:.3g} of the mass: {n} draws expect "
            f"{n * mass:.3g} there, too few to see 90 % of it vanish")  # fmt: skip


def _no_ties(r: RowPlan, n: int) -> str:
    if r.tie is None:
        return "no two kept tokens have equal logits"
    mass = float(r.probs[r.tie].sum())
    return f"the largest tied group holds {mass:.3g} of the mass: {n} draws expect {n * mass:.3g} in it, too few"


def plan_check(request: CheckRequest, rows: list[RowPlan], cost: BudgetCost | tuple[float, float],
               elapsed: float) -> Plan:  # fmt: skip
    """The check's :class:`Plan`: sizes for ``request.tv`` (:func:`columns_for_tv`), or for what is left of
    ``request.budget_s`` after ``elapsed`` seconds at the pilot's ``cost`` (:func:`sizes_for_budget`); then the
    tests that run at those sizes (:func:`build_plan`)."""
    seeded = request.call.seeded
    bits = flipped_bits(request.seed_bits) if seeded else ()
    if request.budget_s is not None:
        if not isinstance(cost, BudgetCost):
            cost = BudgetCost(*cost)
        left = max(0.0, request.budget_s - elapsed)
        pairs = len(row_pairs([r.probs for r in rows])) + int(bool(row_distances([r.probs for r in rows])))
        sizes = sizes_for_budget(left, cost, len(rows), seeded, len(bits), pairs)
        dropped = bits and not sizes.bits_fit
        if dropped:
            bits = ()
        columns, calls, width = sizes.columns, sizes.calls, sizes.width
        plan = build_plan(rows, columns, calls, request.alpha, request.power, seeded, bits=bits, width=width)
        how = (f"sizes for budget_s = {request.budget_s:g} s: after a {elapsed:.2g} s pilot (cost per call "
               f"{cost.call:.3g} s + {cost.draw:.3g} s per draw of a row), {sizes.draw_s:.3g} s for drawing, "
               f"{plan.n:,} draws a row planned, the rest kept for the tests; the draws continue until the drawing "
               f"time is spent")  # fmt: skip
        skipped = dict(plan.skipped)
        if dropped and "seeds" in plan.tests:
            skipped["seed bits"] = (f"the budget leaves no time for {len(flipped_bits(request.seed_bits))} bit "
                                    f"calls at {cost.call:.3g} s a call")  # fmt: skip
        bit_stream = max(2 * DEFAULT_MAX_LAG + 2, columns // max(1, len(bits)))
        return dataclasses.replace(plan, stream=columns, how=how, bit_stream=bit_stream, draw_s=sizes.draw_s,
                                   skipped=skipped, cost=cost)  # fmt: skip
    columns, calls, stream, notes, bit_stream, distance_stream = columns_for_tv(
        rows, request.tv, request.alpha, request.power, seeded, len(bits))  # fmt: skip
    how = (f"sizes planned for total variation tv = {request.tv:g} (each test's own law-aware planner at level "
           f"alpha/{max_tests(len(rows), seeded)})")  # fmt: skip
    how += "".join(f"; {note}" for note in notes)
    plan = build_plan(rows, columns, calls, request.alpha, request.power, seeded, bits=bits,
                      distance_stream=distance_stream)  # fmt: skip
    return dataclasses.replace(plan, stream=stream, how=how, bit_stream=bit_stream)
