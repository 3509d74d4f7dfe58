"""Which streams a check compares: the seeds of its calls, and the rows its independence tests pair.

Calls
-----
With ``s`` the caller's seed, ``L`` the logits ``[B, V]`` and ``c`` the columns of a call:

==============  =====================  ============================  ==========================================
call            logits                 seed                          used by
==============  =====================  ============================  ==========================================
pilot           ``L``, 16 draws        ``s + 65537``                 protocol check, cost, reproducibility
repeat          ``L``, 16 draws        ``s + 65537``                 property: same seed, same tokens
moved           ``[L[B-1], L]``        ``s + 65537``                 property: a row's tokens do not depend on
                                                                     its batch position or the batch size (not
                                                                     made with per-row parameters)
cost            ``L``, 128 draws       ``s + 65539``                 ``budget_s`` only: cost per draw
draws ``k``     ``L``, ``c``           ``s + k``, ``k = 0..K-1``     every distribution test (``n = K c``);
                                                                     ``k = 0, 1`` are the seed-s and seed-s+1
                                                                     streams of the lag scans
calls           ``L``, ``m``           ``s + 65536``                 independence across calls (with draws 0)
rows            ``[L[0], L[0]]``       ``s + 65538``                 ``B = 1`` only: independence of rows
==============  =====================  ============================  ==========================================

A sampler without a seed gets the same calls without seeds; then draws 0 and 1 are two successive calls
(the calls test pairs them), and the seed test and the reproducibility properties are skipped.

Streams
-------
The independence tests read the row of the most spread law (:func:`stream_row`): draws ``j`` and ``j + l`` of
one call (``l = 1..8``), rows ``b`` and ``b + 1`` of one call (:func:`row_pairs`, at most :data:`MAX_ROW_PAIRS`),
seeds ``s`` and ``s + 1``, and two calls; each a lag scan over shifts ``-8..8``
(:func:`verification.stats.independence.lag_scan_test`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..battery.protocol import SEED_LIMIT

__all__ = [
    "CALLS_SEED_OFFSET",
    "COST_SEED_OFFSET",
    "MAX_ROW_PAIRS",
    "MAX_SEED",
    "PILOT_SEED_OFFSET",
    "ROWS_SEED_OFFSET",
    "row_pairs",
    "stream_row",
]

#: Seed offset of the calls call; the draws calls use ``s + k`` for ``k < CALLS_SEED_OFFSET``.
CALLS_SEED_OFFSET = 1 << 16
#: Seed offsets of the pilot (and repeat, moved), the rows call and the cost call.
PILOT_SEED_OFFSET = CALLS_SEED_OFFSET + 1
ROWS_SEED_OFFSET = CALLS_SEED_OFFSET + 2
COST_SEED_OFFSET = CALLS_SEED_OFFSET + 3
#: Largest ``seed`` accepted: the check's seeds ``seed .. seed + 65539`` stay below ``SEED_LIMIT``.
MAX_SEED = SEED_LIMIT - CALLS_SEED_OFFSET - 8
#: Adjacent row pairs tested for independence at most (rows 0-1, ..., 7-8).
MAX_ROW_PAIRS = 8


def stream_row(laws: Sequence[np.ndarray]) -> int | None:
    """The row the independence tests read: the most spread law (largest ``1 - sum p_i**2``, the chance
    that two independent draws differ), first on ties; ``None`` when every law is one token."""
    spread = [1.0 - float(np.sum(p**2)) if np.count_nonzero(p) >= 2 else -1.0 for p in laws]
    best = int(np.argmax(spread))
    return best if spread[best] > 0 else None


def row_pairs(laws: Sequence[np.ndarray]) -> tuple[tuple[int, int], ...]:
    """Adjacent rows whose laws both have two tokens or more, at most :data:`MAX_ROW_PAIRS`; with one row,
    ``((0, 0),)``: the rows call (the row twice in one call)."""
    spread = [np.count_nonzero(p) >= 2 for p in laws]
    if len(laws) == 1:
        return ((0, 0),) if spread[0] else ()
    pairs = [(b, b + 1) for b in range(len(laws) - 1) if spread[b] and spread[b + 1]]
    return tuple(pairs[:MAX_ROW_PAIRS])
