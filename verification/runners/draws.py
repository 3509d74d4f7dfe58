"""The calls a check makes to a sampler: the pilot (protocol, reproducibility, cost) and the draws it tests.

:func:`pilot` calls the sampler three times on 16 draws a row (four with a budget) before anything is sized: the
first call checks the protocol (and may compile), the second is timed and must repeat the first (same seed, same
tokens), a call on the batch moved by one row must give each row the same tokens; with a budget, a call of 128
draws fixes the affine cost model.  :func:`draw` makes the plan's calls (:mod:`verification.planning.streams` lists
them and their seeds, modulo ``2**seed_bits``) and counts every row's draws; it keeps the streams the independence
tests pair (the bit calls' too: seed ``s xor 2**j``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from ..battery.protocol import SamplerCall
from ..planning.check import COST_DRAWS, PILOT_DRAWS, Plan
from ..planning.request import CheckRequest
from ..planning.streams import (
    CALLS_SEED_OFFSET,
    COST_SEED_OFFSET,
    PILOT_SEED_OFFSET,
    ROWS_SEED_OFFSET,
    call_seed,
    flipped_seed,
)
from ..stats.counts import Counts, count_samples
from .sampler_report import Property

__all__ = ["Draws", "draw", "pilot"]


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


def pilot(request: CheckRequest) -> tuple[list[Property], tuple[float, float]]:
    """The pilot calls: the protocol, the reproducibility properties and (with ``budget_s``) the cost model
    ``(seconds per call, seconds per draw of a row)``.  Per-row temperatures or target parameters, which a
    sampler binds by batch position, skip the call on a moved batch."""
    call, L = request.call, request.logits
    budgeted, moved = request.budget_s is not None, not request.per_row
    s = _seed(call, request, PILOT_SEED_OFFSET)
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
        call(L, COST_DRAWS, _seed(call, request, COST_SEED_OFFSET))
        t_big = time.perf_counter() - t
        per = max((t_big - t_small) / (b * (COST_DRAWS - PILOT_DRAWS)), t_big / (b * COST_DRAWS) / 4, 1e-12)
        cost = (max(0.0, t_small - per * b * PILOT_DRAWS), per)
    return props, cost


@dataclass
class Draws:
    """What the draws calls returned: per-row counts, the first call whole, the other streams' row (the bit
    calls' streams, one per seed bit of the plan)."""

    counts: list[Counts]
    first: np.ndarray
    second: np.ndarray | None
    calls_stream: np.ndarray | None
    rows_pair: tuple[np.ndarray, np.ndarray] | None
    calls: int
    bit_streams: list[np.ndarray] | None = None


def draw(request: CheckRequest, plan: Plan) -> Draws:
    """Make the plan's calls: ``plan.calls`` draws calls of ``plan.columns`` counted per row, and the calls and
    rows calls' streams of ``plan.stream`` draws where their tests run."""
    call, L, stream = request.call, request.logits, plan.stream
    v = int(L.shape[1])
    counts: list[Counts] = []
    first = second = None
    sr = plan.stream_row
    for k in range(plan.calls):
        x = call(L, plan.columns, _seed(call, request, k))
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
            calls_stream = call(L, stream, _seed(call, request, CALLS_SEED_OFFSET))[sr]
            made += 1
        else:
            calls_stream = second
    if plan.row_pairs == ((0, 0),):
        y = call(torch.cat([L, L]), stream, _seed(call, request, ROWS_SEED_OFFSET))
        rows_pair = (y[0], y[1])
        made += 1
    bit_streams = [call(L, plan.bit_stream, flipped_seed(request.seed, j))[sr] for j in plan.bits]
    return Draws(counts, first, second, calls_stream, rows_pair, made + len(bit_streams), bit_streams)
