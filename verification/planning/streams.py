"""Which streams a check compares: the seeds of its calls, the seeds it pairs, the lags it scans, and the rows.

Seed space
----------
``check_sampler(..., seed_bits=b)`` passes seeds in ``[0, 2**b)``, ``b`` in :data:`SEED_BITS` (31 by default:
int32-safe, so ``numpy.random.seed``, ``torch.manual_seed`` and ``jax.random.key`` take every one).  Every seed
below is taken modulo ``2**b``, so the caller's ``seed`` may be any value in that range.

Calls
-----
With ``s`` the caller's seed, ``L`` the logits ``[B, V]`` and ``c`` the columns of a call:

==============  =====================  ============================  ==========================================
call            logits                 seed (mod ``2**b``)           used by
==============  =====================  ============================  ==========================================
pilot           ``L``, 16 draws        ``s + 2**15 + 1``             protocol check, cost, reproducibility
repeat          ``L``, 16 draws        ``s + 2**15 + 1``             property: same seed, same tokens
moved           ``[L[B-1], L]``        ``s + 2**15 + 1``             property: a row's tokens do not depend on
                                                                     its batch position or the batch size (not
                                                                     made with per-row parameters)
cost            ``L``, 128, 1024, ...  ``s + 2**15 + 3``             ``budget_s`` only: the cost model (calls
                draws                                                of growing width, neither counted nor
                                                                     tested)
draws ``k``     ``L``, ``c_k``         ``s + k``, ``k < 2**15``      every distribution test (``n`` the sum
                                                                     of the widths ``c_k <= 2**20``);
                                                                     ``k = 0, 1`` are the seed-s and seed-s+1
                                                                     streams of the lag scans
calls           ``L``, ``m``           ``s + 2**15``                 independence across calls (with draws 0)
rows            ``[L[0], L[0]]``       ``s + 2**15 + 2``             ``B = 1`` only: independence of rows
bit ``j``       ``L``, ``m``           ``s xor 2**j``,               the seed-bit scan (with draws 0), for
                                       ``j = 16 .. b - 1``           ``j`` in :func:`flipped_bits`
==============  =====================  ============================  ==========================================

The seeds of one check are distinct: ``s + k`` for ``0 <= k < 2**15 + 4`` differ from each other, and from
``s xor 2**j`` (``j >= 16``), which is ``s +- 2**j``; ``|2**j| mod 2**b`` is never below ``2**15 + 4``.

A sampler without a seed gets the same calls without seeds (no bit calls); then draws 0 and 1 are two successive
calls (the calls test pairs them), and the seed tests and the reproducibility properties are skipped.

Streams and lags
----------------
The independence tests read the row of the most spread law (:func:`stream_row`) and scan shifts between two
streams, each a lag scan corrected by Bonferroni over what it scans
(:func:`verification.stats.independence.lag_scan_test`):

* ``samples``: draws ``j`` and ``j + l`` of one call, ``l`` in :func:`serial_lags` (1..8, every power of two up
  to half the stream, and half the stream: the second half of a call against the first, in order);
* ``halves``: the first half of a call against its second half read backwards (a call that mirrors itself);
* ``rows b-b+1``: rows ``b`` and ``b + 1`` of one call (:func:`row_pairs`, at most :data:`MAX_ROW_PAIRS`),
  shifts ``-8..8``;
* ``row distances``: row ``r0`` against each row ``r0 + d``, ``d = 2 .. 64``, of one call (:func:`row_distances`),
  shifts ``-8..8``, Bonferroni over the rows and the shifts (noise keyed by a batch slot modulo ``d``);
* ``seeds``: seeds ``s`` and ``s + 1``, shifts ``-8..8`` (a counter advanced by the seed);
* ``seed bits``: seed ``s`` against each ``s xor 2**j``, ``j = 16 .. b - 1``, shifts ``-8..8``, Bonferroni over
  the bits and the shifts (a seed truncated to ``j`` bits, or hashed so that two seeds collide, gives two
  equal streams: total variation ``1 - sum p_i**2`` from independence, found at a few dozen draws);
* ``calls``: two calls.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..stats.independence import DEFAULT_MAX_LAG

__all__ = [
    "CALLS_SEED_OFFSET",
    "COST_SEED_OFFSET",
    "DEFAULT_SEED_BITS",
    "FIRST_FLIPPED_BIT",
    "MAX_DRAW_CALLS",
    "MAX_ROW_DISTANCE",
    "MAX_ROW_PAIRS",
    "MAX_SEED",
    "PILOT_SEED_OFFSET",
    "ROWS_SEED_OFFSET",
    "SEED_BITS",
    "call_seed",
    "flipped_bits",
    "flipped_seed",
    "halves",
    "max_seed",
    "row_distances",
    "row_pairs",
    "serial_lags",
    "shift_lags",
    "stream_row",
]

#: The seed widths a check can be asked to use: int32 and uint32, int64 and uint64 seeds.
SEED_BITS = (31, 32, 63, 64)
#: The default: seeds in ``[0, 2**31)``, which every common generator takes.
DEFAULT_SEED_BITS = 31
#: Draws calls at most: their seeds ``s + k`` stay below the other calls' offsets.  At the widest call
#: (``planning.check.MAX_CALL_DRAWS``, 2**20 columns) that is 3.4e10 draws a row, the most a check draws (with
#: ``budget_s`` the draws stop there whatever time is left).
MAX_DRAW_CALLS = 1 << 15
#: Seed offsets of the calls call, the pilot (and repeat, moved), the rows call and the cost call.
CALLS_SEED_OFFSET = MAX_DRAW_CALLS
PILOT_SEED_OFFSET = CALLS_SEED_OFFSET + 1
ROWS_SEED_OFFSET = CALLS_SEED_OFFSET + 2
COST_SEED_OFFSET = CALLS_SEED_OFFSET + 3
#: The lowest seed bit the seed-bit scan flips (the bits below are the offsets' and the draws calls').
FIRST_FLIPPED_BIT = 16
#: Largest ``seed`` at the default ``seed_bits`` (every value of ``[0, 2**seed_bits)`` is accepted).
MAX_SEED = (1 << DEFAULT_SEED_BITS) - 1
#: Adjacent row pairs tested for independence at most (rows 0-1, ..., 7-8).
MAX_ROW_PAIRS = 8
#: Row distances the ``row distances`` scan covers at most: rows ``r0 + d`` for ``d = 2 .. MAX_ROW_DISTANCE``.
MAX_ROW_DISTANCE = 64


def max_seed(seed_bits: int) -> int:
    """The largest seed of ``seed_bits`` bits, ``2**seed_bits - 1``."""
    return (1 << seed_bits) - 1


def call_seed(seed: int, offset: int, seed_bits: int) -> int:
    """The seed of a call at ``offset`` from ``seed``: ``(seed + offset) mod 2**seed_bits``."""
    return (seed + offset) & max_seed(seed_bits)


def flipped_bits(seed_bits: int) -> tuple[int, ...]:
    """The bits ``j`` whose flip the seed-bit scan pairs with ``s``: ``16 .. seed_bits - 1``."""
    return tuple(range(FIRST_FLIPPED_BIT, seed_bits))


def flipped_seed(seed: int, bit: int) -> int:
    """``seed`` with bit ``bit`` flipped: the partner of ``seed`` in the seed-bit scan."""
    return seed ^ (1 << bit)


def shift_lags(max_lag: int = DEFAULT_MAX_LAG) -> np.ndarray:
    """The shifts ``-K..K`` of a scan between two streams."""
    return np.arange(-max_lag, max_lag + 1)


def serial_lags(n: int, max_lag: int = DEFAULT_MAX_LAG) -> np.ndarray:
    """The lags the ``samples`` scan reads in a stream of ``n`` draws: ``1..K``, every power of two above ``K``
    up to ``n / 2``, and ``n // 2`` (draw ``j`` against draw ``j + n // 2``: the second half of the stream
    against the first, in order), each with at least two disjoint pairs; sorted, distinct."""
    lags = set(range(1, min(max_lag, n // 2) + 1))
    power = 1
    while power * 2 <= n // 2:
        power *= 2
        lags.add(power)
    if n // 2 >= 2:
        lags.add(n // 2)
    return np.array(sorted(lags), dtype=np.int64)


def halves(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first half of a stream and its second half read backwards: draw ``i`` paired with draw ``n - 1 - i``
    for ``i < n // 2`` (disjoint draws)."""
    h = x.size // 2
    return x[:h], x[::-1][:h]


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


def row_distances(laws: Sequence[np.ndarray]) -> tuple[int, ...]:
    """The rows of the ``row distances`` scan: ``(r0, r0 + d, ...)``, ``r0`` the first row whose law has two tokens
    or more and ``d = 2 .. MAX_ROW_DISTANCE`` where row ``r0 + d``'s law has two or more too (distance 1 is the
    adjacent pairs' scan); ``()`` when fewer than two such rows.  Noise keyed by a batch slot modulo ``m`` (or any
    rule that gives rows ``d`` apart the same noise, wherever they sit) pairs ``r0`` with ``r0 + m``: the scan
    finds it; a dependence between two rows neither of which is ``r0`` and not ``d`` apart for every ``r0`` is not
    covered."""
    spread = [np.count_nonzero(p) >= 2 for p in laws]
    if not any(spread):
        return ()
    r0 = spread.index(True)
    others = [r0 + d for d in range(2, MAX_ROW_DISTANCE + 1) if r0 + d < len(laws) and spread[r0 + d]]
    return (r0, *others) if others else ()
