"""The tile inverse-CDF stream inside the warp-specialized Gluon kernel (proofs/tile_inverse_cdf.md).

:func:`tile_cdf_epilogue` is the Gluon kernel's ``EPILOGUE`` for this stream: the sampler's staged epilogue
(:func:`flashsampling.kernels.pingpong.staged_epilogue`) with ``NOISE = NOISE_TILE_CDF`` and :func:`tile_cdf_draw`
as its ``DRAW``: the scan without noise gives each row's maximum ``m`` over the tile, then the draw weighs every
token by :func:`flashsampling.tile_cdf.weights.tile_weight` and picks one by an integer inverse CDF with one 128-bit
uniform per (row, tile).  Each (row, tile) candidate is ``(m, Q, draw)``, which stage 2 turns into a token by
Gumbel-max over the tiles' log-masses (:func:`flashsampling.tile_cdf.sampling.sample_fused_tile_cdf`).
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from ..kernels.pingpong import NOISE_TILE_CDF, chunk_base, philox4x32_gl, stage_tile, staged_epilogue
from ..noise import STREAM_TILE
from .kernel import mulhi_u128_u64
from .weights import tile_weight

tile_weight_gl = gluon.jit(getattr(tile_weight, "fn", tile_weight))
mulhi_gl = gluon.jit(getattr(mulhi_u128_u64, "fn", mulhi_u128_u64))
TILE_STREAM = gl.constexpr(STREAM_TILE)


@gluon.jit
def slot_bases(slot, BM: gl.constexpr):
    """Exclusive prefix sums of the per-slot weights ``slot [BM, 16]`` (uint64; slot ``p = 4j + q``, the token pair at
    chunk columns ``8j + 2q``, ``+1``) in the order ``(q, j)``: slot ``(q, j)``'s base is the weight of the slots
    ``(q', j')`` before it.  The four ``j`` of a ``q`` are split apart (reshapes, a permute and splits of registers)
    and summed in order; the four ``q`` totals are combined by masked row sums.  Returns ``(bases [BM, 16], row
    totals [BM])``."""
    x = gl.reshape(gl.permute(gl.reshape(slot, [BM, 4, 4]), [0, 2, 1]), [BM, 4, 2, 2])  # [row, q, j // 2, j % 2]
    lo0, lo1 = gl.split(x)  # j even, j odd: [row, q, j // 2]
    t0, t2 = gl.split(lo0)
    t1, t3 = gl.split(lo1)
    e1 = t0
    e2 = e1 + t1
    e3 = e2 + t2
    own = e3 + t3  # the q's four slots: [row, q]
    q = gl.arange(0, 4, layout=gl.SliceLayout(0, own.type.layout))[None, :]
    r0 = gl.sum(gl.where(q == 0, own, 0), axis=1)
    r1 = gl.sum(gl.where(q == 1, own, 0), axis=1)
    r2 = gl.sum(gl.where(q == 2, own, 0), axis=1)
    r3 = gl.sum(gl.where(q == 3, own, 0), axis=1)
    before = gl.where(q > 0, r0[:, None], 0) + gl.where(q > 1, r1[:, None], 0) + gl.where(q > 2, r2[:, None], 0)
    x = gl.join(gl.join(before, before + e2), gl.join(before + e1, before + e3))
    bases = gl.reshape(gl.permute(gl.reshape(x, [BM, 4, 4]), [0, 2, 1]), [BM, 16])
    return gl.convert_layout(bases, slot.type.layout), r0 + r1 + r2 + r3


@gluon.jit
def tile_cdf_draw(stage, cl: gl.constexpr, c_end, mult, top, rows, tile_start, k0, k1, pos_even, pos_odd,
                  BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr, N_ROUNDS: gl.constexpr,
                  MASKED: gl.constexpr):  # fmt: skip
    """The tile inverse-CDF draw of every row of a staged tile (proofs/tile_inverse_cdf.md).

    ``top [BM]``: each row's maximum score ``m`` over the tile.  Pass 1 sums the integer weights
    ``q = tile_weight(z / T, m)`` per slot ``p = 4j + q`` of the chunk layout (the token pair at chunk columns
    ``8j + 2q``, ``+1`` of every chunk); :func:`slot_bases` gives each slot's base and the row's total ``Q``.  The
    row's uniform ``U`` is the 128-bit Philox block ``(tile_start, row, 0, STREAM_TILE)`` and
    ``t = floor(U Q / 2**128)``.  Pass 2 counts the tokens whose cumulative weight is at most ``t``, the tokens in
    *slot order*: slot ``(q, j)`` (lexicographic), then chunk ``c``, then the pair's element ``e`` (tile column
    ``c * EV + 8j + 2q + e``).  The count ``n`` is the draw's rank in that order.  The slots wholly at or below ``t``
    are exactly those before the one that straddles it and count all their tokens, so pass 2 weighs only the
    straddling slot's tokens (one pair per row and chunk, picked by a masked row maximum).  Integer sums are exact,
    so the draw does not depend on how the sums are reduced; the order of the tokens is part of the stream
    (:func:`flashsampling.tile_cdf.twin.slot_order` is its twin).  Returns ``(Q [BM] uint64, draw [BM] int32)``,
    the draw a tile column."""
    gl.static_assert(EV == 32, "the tile inverse-CDF's slot order is defined for 32-column chunks")
    m = gl.zeros_like(mult) + top[:, None]
    slot = gl.zeros_like(pos_even).to(gl.uint64)
    zero_f = gl.zeros_like(mult)
    for c in range(0, BN // EV):
        s_even, s_odd, _b = chunk_base(stage.index(c).load(cl), c, c_end, mult, zero_f, pos_even, pos_odd, BM, EV,
                                       MASKED)  # fmt: skip
        slot = slot + tile_weight_gl(s_even, m) + tile_weight_gl(s_odd, m)
    run, total = slot_bases(slot, BM)
    total = gl.convert_layout(total, top.type.layout)
    zero = rows.to(gl.uint32) * 0
    w0, w1, w2, w3 = philox4x32_gl(zero + tile_start.to(gl.uint32), rows.to(gl.uint32), zero, zero + TILE_STREAM, k0,
                                   k1, N_ROUNDS)  # fmt: skip
    t_row = mulhi_gl(w0, w1, w2, w3, total)
    t = gl.zeros_like(run) + t_row[:, None]
    # The draw lies in the one slot whose weights straddle t: the slots wholly at or below t (all of them before
    # it in slot order) count all their tokens; pass 2 walks that slot's tokens only, each row's pair of every chunk
    # picked out of the chunk by a masked row maximum (one slot per row holds a finite score).
    incl = run + slot
    active = (run <= t) & (incl > t)
    below = gl.sum((incl <= t).to(gl.int32), axis=1)
    cum = gl.max(gl.where(active, run, 0), axis=1)
    count = gl.zeros_like(below)
    for c in range(0, BN // EV):
        s_even, s_odd, _b = chunk_base(stage.index(c).load(cl), c, c_end, mult, zero_f, pos_even, pos_odd, BM, EV,
                                       MASKED)  # fmt: skip
        pick_even = gl.max(gl.where(active, s_even, float("-inf")), axis=1)
        pick_odd = gl.max(gl.where(active, s_odd, float("-inf")), axis=1)
        cum = cum + tile_weight_gl(pick_even, top)
        count = count + (cum <= t_row).to(gl.int32)
        cum = cum + tile_weight_gl(pick_odd, top)
        count = count + (cum <= t_row).to(gl.int32)
    per_slot: gl.constexpr = 2 * (BN // EV)
    n = gl.minimum(below * per_slot + count, BN - 1)  # (BN only for a tile of weight 0, which is never chosen)
    sr = n // per_slot  # the slot's rank: 4q + j
    r = n % per_slot
    return total, (r // 2) * EV + 8 * (sr % 4) + 2 * (sr // 4) + (r % 2)


@gluon.jit
def tile_cdf_epilogue(acc, stage, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                      part_key_ptr, part_idx_ptr, flag_ptr, BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr,
                      N_ROUNDS: gl.constexpr, NOISE: gl.constexpr):  # fmt: skip
    """The Gluon kernel's ``EPILOGUE`` for the tile inverse-CDF stream (the kernel's ``NOISE`` is not read: the
    stream is the tile's): :func:`~flashsampling.kernels.pingpong.stage_tile`, then the staged epilogue with
    :func:`tile_cdf_draw`."""
    chunks = stage_tile(acc, stage, BM, BN, EV)
    staged_epilogue(
        chunks,
        pid_b,
        pid_v,
        num_v_tiles,
        B,
        V,
        col_offset,
        inv_temp_ptr,
        k0,
        k1,
        part_max_ptr,
        part_key_ptr,
        part_idx_ptr,
        flag_ptr,
        BM,
        BN,
        EV,
        N_ROUNDS,
        NOISE_TILE_CDF,
        DRAW=tile_cdf_draw,
    )
