"""The per-tile selection shared by every stage-1 kernel: perturb, take the max, store a candidate.

For a tile of float32 logits ``z[BLOCK_SIZE_B, BLOCK_SIZE_V]`` and each sample ``s``::

    score[b, v] = z[b, v] * inv_temp[b] + G(seed, row=b, index=v, sample=s)     (z[b, v] if inv_temp[b] == 0)
    m[b]        = max_v score[b, v]
    j[b]        = the v with score == m[b] and the largest tie-break key w2(seed, b, v, s) | 1

(``G`` keyed by the *global* index ``col_offset + v``, so shards and tensor-parallel ranks see
the same noise as one device) and ``(m, w2, global index)`` is written to the partial buffers
at ``[row, sample, tile]``.  The same pass raises per-(row, tile) flags: bit 1 for a NaN or +inf
logit (or -inf where ``ALLOW_NEG_INF`` is false), bit 2 for ``z / T`` overflowing float32.  With
``RETURN_LSE`` the tile's log-mass ``L = logsumexp_v(z / T)`` (fp32, max-shifted; the max of ``z``
for a greedy row) is written to ``lse[row, tile]`` in the same pass, for the grouped variants.
Stage 2 (:mod:`.reduce`) reduces over tiles.
"""

from __future__ import annotations

import triton.language as tl

from .._device import device_function
from ..noise import token_noise

FLAG_BAD_LOGIT = 1
FLAG_OVERFLOW = 2
FLAG_NO_FINITE = 4


@device_function
def perturb_select_store(
    z,
    rows,
    cols,
    col_offset,
    row_ok,
    col_ok,
    inv_temp,
    k0,
    k1,
    num_samples,
    pid_v,
    num_v_tiles,
    part_max_ptr,
    part_key_ptr,
    part_idx_ptr,
    flag_ptr,
    lse_ptr,
    BLOCK_SIZE_B: tl.constexpr,
    BLOCK_SIZE_V: tl.constexpr,
    ALLOW_NEG_INF: tl.constexpr,
    N_ROUNDS: tl.constexpr,
    RETURN_LSE: tl.constexpr,
):
    """``(B_tile, V_tile)`` fp32 logits -> per (row, sample) the tile's max score, its key and its index."""
    valid = row_ok[:, None] & col_ok[None, :]
    greedy = inv_temp == 0.0
    scaled = z * inv_temp[:, None]
    is_nan = z != z
    pos_inf = z == float("inf")
    neg_inf = z == float("-inf")
    if ALLOW_NEG_INF:
        bad = is_nan | pos_inf
    else:
        bad = is_nan | pos_inf | neg_inf
    overflow = ((scaled == float("inf")) | (scaled == float("-inf"))) & ~(pos_inf | neg_inf) & ~greedy[:, None]
    flag = tl.where(valid & bad, 1, 0) | tl.where(valid & overflow, 2, 0)
    flag = tl.max(flag, axis=1)
    rows64 = rows.to(tl.int64)
    tl.store(flag_ptr + rows64 * num_v_tiles + pid_v, flag, mask=row_ok)

    if RETURN_LSE:
        # The tile's log-mass L = logsumexp(z / T) over its valid tokens (max z for a greedy row).
        sv = tl.where(valid, tl.where(greedy[:, None], z, scaled), float("-inf"))
        m_l = tl.max(sv, axis=1)
        safe = tl.where(m_l == float("-inf"), 0.0, m_l)
        tot = tl.sum(tl.exp(sv - safe[:, None]), axis=1)
        lse = tl.where(greedy, m_l, safe + tl.log(tl.where(tot > 0.0, tot, 1.0)))
        lse = tl.where(m_l == float("-inf"), float("-inf"), lse)
        tl.store(lse_ptr + rows64 * num_v_tiles + pid_v, lse, mask=row_ok)

    gcols = cols.to(tl.int64) + col_offset
    # Counters broadcast: (index [1, BV], row [BB, 1], sample [1, 1], stream [1, 1]); the first two
    # Philox rounds then work on vectors, not on the whole tile.
    c_row = rows.to(tl.uint32)[:, None]
    c_col = gcols.to(tl.uint32)[None, :]
    c_stream = tl.zeros([1, 1], dtype=tl.uint32)
    for smp in range(0, num_samples):
        c_smp = (tl.zeros([1, 1], dtype=tl.int32) + smp).to(tl.uint32)
        g, key = token_noise(k0, k1, c_row, c_col, c_smp, c_stream, N_ROUNDS)
        score = tl.where(greedy[:, None], z, scaled + g)
        score = tl.where(valid, score, float("-inf"))
        m = tl.max(score, axis=1)
        hit = (score == m[:, None]) & valid
        # Tie-break key in uint32: w2 | 1 for a candidate, 0 otherwise (so 0 never names a token).
        kk = tl.where(hit, key | 1, 0)
        best_key = tl.max(kk, axis=1).to(tl.int64)
        j = tl.argmax(kk, axis=1)
        idx = col_offset + pid_v.to(tl.int64) * BLOCK_SIZE_V + j.to(tl.int64)
        off = (rows64 * num_samples + smp) * num_v_tiles + pid_v
        tl.store(part_max_ptr + off, m, mask=row_ok)
        tl.store(part_key_ptr + off, best_key, mask=row_ok)
        tl.store(part_idx_ptr + off, idx, mask=row_ok)
