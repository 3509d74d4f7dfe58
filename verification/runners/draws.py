"""The calls a check makes to a sampler: the pilot (protocol, reproducibility, cost) and the draws it tests.

:func:`pilot` calls the sampler three times on 16 draws a row before anything is sized: the first call checks the
protocol (and may compile), the second is timed and must repeat the first (same seed, same tokens), a call on the
batch moved by one row must give each row the same tokens.  With a budget, calls of 128, 1024, 8192, ... draws a
row (seed ``s + 2**15 + 3``, neither counted nor tested) fix the affine cost model, until a call takes
:data:`PILOT_SHARE` / 8 of ``budget_s`` or the next would exceed what is left of that share (its time predicted as
growing with the square of the width, so a quadratic sampler does not stall the pilot).

:func:`draw` makes the plan's calls (:mod:`verification.planning.streams` lists them and their seeds, modulo
``2**seed_bits``): draws 0 and 1 (their streams are kept: the rows the independence tests read), the calls, rows
and bit calls (streams only), then draws ``k = 2, 3, ...``.  Every draws call is counted where its tokens lie
(:class:`~verification.runners.tally.Tally`, on the sampler's device for torch tokens): memory ``O(B V)`` plus the
kept streams, whatever ``n``.  With ``tv`` the number of calls is the plan's.  With ``budget_s`` the draws adapt to
the time (:mod:`verification.planning.check`): before each call its time is predicted from the last call's (as
``a + (t - a) (w' / w)`` for a width ``w' <= w``, ``a + (t - a) (w' / w)**2`` above, ``a`` the pilot's time per
call); the width is the one predicted to take the plan's share of the drawing time (``CALL_SHARE``, at most four
times the last width), shrunk so that the call ends before the drawing deadline, and the draws stop when not
even a call of one column would.  The stream calls are always made (the tests of the family read them): where they
are predicted to take more than :data:`STREAM_LIMIT` of the drawing time left, their widths shrink together (to
:data:`MIN_STREAM` draws at least).  A ``KeyboardInterrupt`` during draws ``k >= 2`` stops the draws: what was drawn
is tested and the report says it was interrupted.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..battery.protocol import SamplerCall, host_tokens
from ..planning.check import CALL_SHARE, COST_DRAWS, MAX_CALL_DRAWS, PILOT_DRAWS, BudgetCost, Plan
from ..planning.request import CheckRequest
from ..planning.streams import (
    CALLS_SEED_OFFSET,
    COST_SEED_OFFSET,
    MAX_DRAW_CALLS,
    PILOT_SEED_OFFSET,
    ROWS_SEED_OFFSET,
    call_seed,
    flipped_seed,
)
from ..stats.counts import Counts
from ..stats.independence import DEFAULT_MAX_LAG
from .progress import DrawProgress, show_progress
from .sampler_report import Property
from .tally import Tally

__all__ = ["MIN_STREAM", "PILOT_SHARE", "STREAM_LIMIT", "Draws", "draw", "pilot"]

#: Share of ``budget_s`` the pilot's cost calls may take at most.
PILOT_SHARE = 0.05
#: Growth of the width from one cost call to the next.
_COST_GROWTH = 8
#: Growth of the width from one draws call to the next at most (with ``budget_s``): a sampler whose cost grows
#: faster than its pilot said is met by calls that grow step by step.
_WIDTH_GROWTH = 4
#: Share of the time left for drawing that the stream calls may take at most (with ``budget_s``): where the
#: sampler is slower than its pilot said, their widths shrink together to fit it.
STREAM_LIMIT = 0.5
#: Draws a stream call keeps at least, however short the time: a lag scan over shifts -8..8 needs ``2 K + 2``.
MIN_STREAM = 2 * DEFAULT_MAX_LAG + 2


def _seed(call: SamplerCall, request: CheckRequest, offset: int) -> int | None:
    """The seed of the call at ``offset`` (:func:`verification.planning.streams.call_seed`); ``None`` seedless."""
    return call_seed(request.seed, offset, request.seed_bits) if call.seeded else None


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


def pilot(request: CheckRequest, *, clock=time.perf_counter) -> tuple[list[Property], BudgetCost | None, int]:
    """The pilot calls: the protocol, the reproducibility properties, (with ``budget_s``) the cost model
    (:class:`~verification.planning.check.BudgetCost`, without its scan cost) and the number of calls made.
    Per-row temperatures or target parameters, which a sampler binds by batch position, skip the call on a moved
    batch."""
    call, L = request.call, request.logits
    budgeted, moved = request.budget_s is not None, not request.per_row
    s = _seed(call, request, PILOT_SEED_OFFSET)
    first = call(L, PILOT_DRAWS, s)  # checks the protocol; may compile (JIT), so it is not timed
    t = clock()
    again = call(L, PILOT_DRAWS, s)
    t_small = clock() - t
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
    made = 3 if call.seeded and moved else 2
    cost, ramp = _cost(request, t_small, clock) if budgeted else (None, 0)
    return props, cost, made + ramp


def _cost(request: CheckRequest, t_small: float, clock) -> tuple[BudgetCost, int]:
    """The affine cost from the widest two timed calls of the pilot's ramp (module docstring)."""
    call, L = request.call, request.logits
    b = int(L.shape[0])
    share = PILOT_SHARE * float(request.budget_s)
    points = [(PILOT_DRAWS, t_small)]
    width, spent = COST_DRAWS, 0.0
    while True:
        t = clock()
        call(L, width, _seed(call, request, COST_SEED_OFFSET))
        dt = clock() - t
        points.append((width, dt))
        spent += dt
        grown = width * _COST_GROWTH
        if grown > MAX_CALL_DRAWS or dt >= share / _COST_GROWTH or dt * _COST_GROWTH**2 > share - spent:
            break
        width = grown
    (w1, t1), (w2, t2) = points[-2], points[-1]
    per = max((t2 - t1) / (b * (w2 - w1)), t2 / (b * w2) / 4, 1e-12)
    return BudgetCost(max(0.0, t1 - per * b * w1), per, width=w2, seconds=t2), len(points) - 1


@dataclass
class Draws:
    """What the draws calls returned: per-row counts, the kept streams, and what the draws cost.

    Attributes
    ----------
    counts : list of Counts
        Per row, every draws call's tokens (``n`` a row).
    first : dict[int, numpy.ndarray]
        Draws 0 of the rows the independence tests read (the stream row and the rows of the row pairs).
    second : numpy.ndarray or None
        Draws 1 of the stream row.
    calls_stream, rows_pair, bit_streams
        The calls, rows and bit calls' streams (``None`` where their tests do not run).
    calls : int
        Calls made, the pilot's included.
    n : int
        Draws per row counted.
    draw_calls : int
        Draws calls made.
    sampler_s, counting_s : float
        Seconds in the sampler's calls (draws, stream and bit calls) and in counting and copying their tokens.
    tokens : int
        Tokens those calls returned (every row's): ``tokens / sampler_s`` is the sampler's measured draws/s.
    interrupted : bool
        A ``KeyboardInterrupt`` stopped the draws.
    widths : list of int
        Columns of each draws call, in order.
    """

    counts: list[Counts]
    first: dict[int, np.ndarray]
    second: np.ndarray | None
    calls_stream: np.ndarray | None
    rows_pair: tuple[np.ndarray, np.ndarray] | None
    calls: int
    bit_streams: list[np.ndarray] | None = None
    n: int = 0
    draw_calls: int = 0
    sampler_s: float = 0.0
    counting_s: float = 0.0
    tokens: int = 0
    interrupted: bool = False
    widths: list[int] = field(default_factory=list)


class _Clock:
    """The time of each call, and the width of the next that ends by ``deadline`` (module docstring)."""

    def __init__(self, cost: BudgetCost | None, deadline: float | None, clock) -> None:
        self.clock = clock
        self.deadline = deadline
        self.fixed = cost.call if cost is not None else 0.0
        self.last = (cost.width, cost.seconds) if cost is not None and cost.width else None
        self.sampler_s = self.counting_s = 0.0
        self.tokens = 0

    def predict(self, width: int) -> float:
        if self.last is None:
            return 0.0
        w, t = self.last
        var = max(t - self.fixed, 0.0)
        return self.fixed + var * (width / w) ** (1 if width <= w else 2)

    def fit(self, seconds: float) -> int:
        """The widest call predicted to take at most ``seconds`` (0 where none does)."""
        w, t = self.last
        var = max(t - self.fixed, 1e-12)
        room = (seconds - self.fixed) / var
        if room <= 0:
            return 0
        return int(w * room) if room <= 1 else int(min(w * math.sqrt(room), 2.0**62))

    def width(self, want: int, least: int) -> int | None:
        """The widest call of at most ``want`` columns that ends by the deadline; ``least`` where none does and
        ``least > 0`` (a call that must be made); ``None`` when ``least == 0`` and none does."""
        if self.deadline is None or self.last is None:
            return want
        left = self.deadline - self.clock()
        if self.predict(want) <= left:
            return want
        fit = min(want, self.fit(left))
        if fit >= max(least, 1):
            return fit
        return least if least > 0 else None

    def scale(self, widths: list[int], seconds: float) -> float:
        """The largest factor ``f <= 1`` at which calls of widths ``f w`` are predicted to take ``seconds`` in
        all (1 without a deadline): the stream calls, shrunk together where the sampler is slower than planned."""
        if self.deadline is None or self.last is None:
            return 1.0

        def total(f: float) -> float:
            return sum(self.predict(max(MIN_STREAM, int(f * w))) for w in widths)

        if total(1.0) <= seconds:
            return 1.0
        lo, hi = 0.0, 1.0
        for _ in range(40):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if total(mid) <= seconds else (lo, mid)
        return lo

    def target(self, seconds: float, planned: int) -> int:
        """The width of the next draws call ``k >= 2`` with a deadline: the widest predicted to take ``seconds``
        (the plan's share of the drawing time), at most :data:`_WIDTH_GROWTH` times the last call's and
        ``MAX_CALL_DRAWS``; the plan's ``planned`` width without a deadline."""
        if self.deadline is None or self.last is None:
            return planned
        return int(max(MIN_STREAM, min(self.fit(seconds), _WIDTH_GROWTH * self.last[0], MAX_CALL_DRAWS)))

    def call(self, call: SamplerCall, L: torch.Tensor, width: int, seed: int | None):
        """The sampler's tokens, where they lie, timed (a CUDA sampler is synchronized: its time is its work)."""
        t = self.clock()
        x = call.tokens(L, width, seed)
        if isinstance(x, torch.Tensor) and x.device.type == "cuda":
            torch.cuda.synchronize(x.device)
        dt = self.clock() - t
        self.sampler_s += dt
        self.tokens += int(L.shape[0]) * width
        self.last = (width, dt)
        return x

    def count(self, fn, *args):
        t = self.clock()
        out = fn(*args)
        dt = self.clock() - t
        self.counting_s += dt
        if self.last is not None:
            self.last = (self.last[0], self.last[1] + dt)
        return out


def _rows(x, rows) -> dict[int, np.ndarray]:
    """The given rows of a call's tokens, on the host."""
    return {r: host_tokens(x[r]) for r in rows}


def draw(request: CheckRequest, plan: Plan, *, deadline: float | None = None, progress: bool | None = None,
         pilot_calls: int = 0, clock=time.perf_counter) -> Draws:  # fmt: skip
    """Make the plan's calls (module docstring); ``deadline`` (a ``clock()`` time, with ``budget_s``): the draws
    stop so that the last call ends by it; ``progress``: show a bar on stderr (``None``: when it is a terminal);
    ``pilot_calls``: the calls the pilot made (counted in ``Draws.calls``)."""
    call, L, stream = request.call, request.logits, plan.stream
    b, v = int(L.shape[0]), int(L.shape[1])
    sr = plan.stream_row
    tally = Tally(b, v)
    timer = _Clock(plan.cost, deadline, clock)
    keep = sorted({sr, *(r for pair in plan.row_pairs for r in pair), *plan.distance_rows} - {None})
    bar = DrawProgress(show_progress(progress), plan.n, clock=clock)
    widths: list[int] = []

    def counted(k: int, width: int):
        x = timer.call(call, L, width, _seed(call, request, k))
        timer.count(tally.add, x)
        widths.append(width)
        return x

    def total() -> int:
        if deadline is None:
            return plan.n
        left = max(0.0, deadline - clock())
        rate = tally.n / max(timer.sampler_s + timer.counting_s, 1e-9)
        return int(tally.n + rate * left)

    def shrunk(width: int) -> int:
        return max(MIN_STREAM, int(f * width))

    stream_calls = [plan.columns] * 2 + [plan.stream] * int(call.seeded and "calls" in plan.tests)
    stream_calls += [2 * plan.stream] * int(plan.row_pairs == ((0, 0),)) + [plan.bit_stream] * len(plan.bits)
    f = timer.scale(stream_calls, STREAM_LIMIT * (deadline - clock())) if deadline is not None else 1.0
    try:
        columns = timer.width(shrunk(plan.columns), MIN_STREAM)
        x = counted(0, columns)
        first = timer.count(_rows, x, keep)
        bar.update(tally.n, total())
        x = counted(1, columns)
        second = timer.count(_rows, x, [sr])[sr] if sr is not None else None
        bar.update(tally.n, total())
        del x
        calls_stream = rows_pair = None
        made = pilot_calls + 2
        if sr is not None and "calls" in plan.tests:
            if call.seeded:
                y = timer.call(
                    call, L, timer.width(shrunk(stream), MIN_STREAM), _seed(call, request, CALLS_SEED_OFFSET)
                )
                calls_stream = timer.count(_rows, y, [sr])[sr]
                made += 1
            else:
                calls_stream = second
        if plan.row_pairs == ((0, 0),):
            y = timer.call(call, torch.cat([L, L]), timer.width(shrunk(stream), MIN_STREAM),
                           _seed(call, request, ROWS_SEED_OFFSET))  # fmt: skip
            pair = timer.count(_rows, y, [0, 1])
            rows_pair = (pair[0], pair[1])
            made += 1
        bit_streams = []
        for j in plan.bits:
            y = timer.call(call, L, timer.width(shrunk(plan.bit_stream), MIN_STREAM), flipped_seed(request.seed, j))
            bit_streams.append(timer.count(_rows, y, [sr])[sr])
            made += 1
        interrupted = False
        call_s = CALL_SHARE * (plan.draw_s or 0.0)
        k = 2
        try:
            while k < MAX_DRAW_CALLS and (deadline is not None or k < plan.calls):
                width = timer.width(timer.target(call_s, plan.call_width), 0)
                if width is None:
                    break
                counted(k, width)
                k += 1
                bar.update(tally.n, total())
        except KeyboardInterrupt:
            interrupted = True
    finally:
        bar.close()
    return Draws(tally.counts(), first, second, calls_stream, rows_pair, made + k - 2, bit_streams, n=tally.n,
                 draw_calls=k, sampler_s=timer.sampler_s, counting_s=timer.counting_s, tokens=timer.tokens,
                 interrupted=interrupted, widths=widths)  # fmt: skip
