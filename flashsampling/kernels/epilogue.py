"""The epilogue of the Triton stage-1 kernels: perturb a tile of logits, take the max, store a candidate.

For a tile of float32 logits ``z[BLOCK_SIZE_B, BLOCK_SIZE_V]`` and each sample ``s``::

    score[b, v] = z[b, v] * inv_temp[b] + G(seed, row=b, index=v, sample=s)     (z[b, v] if inv_temp[b] == 0)
    m[b]        = max_v score[b, v]
    j[b]        = the v with score == m[b] and the largest tie-break key K(seed, b, v, s)

(``G`` and ``K`` keyed by the *global* index ``col_offset + v``, so shards and tensor-parallel ranks
see the same noise as one device) and ``(m, K(j), global index j)`` is written to the partial
buffers at ``[row, sample, tile]``.

Cost per token: one Philox block serves two tokens (``PAIRED``: the tile starts on an even index,
so its even and odd columns are split apart and each half takes two of the block's four words);
the tie-break keys (:func:`~flashsampling.noise.tie_key`, their own Philox stream) are evaluated
for the whole tile only when some row has an exact float32 tie at its maximum, and otherwise once
per row for the winner.  ``NOISE=False`` drops the noise: a call whose rows are all greedy (a number
``temperature=0``), where a row's score is ``z`` with or without it, so the tokens are the same.

The same pass raises per-(row, tile) flags (:mod:`.flags`): ``FLAG_BAD_LOGIT`` for a NaN or +inf logit (or -inf
where ``ALLOW_NEG_INF`` is false), ``FLAG_OVERFLOW`` for ``z / T`` overflowing float32.  With ``RETURN_LSE`` the
tile's log-mass ``L = logsumexp_v(z / T)`` (fp32, max-shifted; the max of ``z`` for a greedy row) is
written to ``lse[row, tile]`` in the same pass, for the grouped variants; with ``RETURN_LSE == LSE_LOGPROBS`` a
greedy row's is ``logsumexp_v(z)`` (its law at ``T = 1``), for the chosen tokens' log-probabilities
(:mod:`flashsampling.logprobs`).  Stage 2
(:mod:`.stage2`) reduces over tiles.

:func:`tile_epilogue` is the whole epilogue of a stage-1 matmul tile (both the one-program-per-tile
kernel of :mod:`.stage1` and the persistent kernel of :mod:`.persistent` call it): the temperature,
and either :func:`perturb_select_store` on the tile in registers or, staged through a scratch slot,
on ``EPILOGUE_V``-wide column chunks.
"""

from __future__ import annotations

import triton.language as tl

from .._device import INTERPRET, device_function
from ..noise import PHILOX_ROUNDS, pair_noise, tie_key, token_noise
from .flags import BAD_LOGIT, OVERFLOW

#: Mask NaN logits out of the scores in the interpreter (:func:`scores_and_flags`); compiled, this code is not emitted.
NAN_AS_MASKED = tl.constexpr(INTERPRET)


#: ``RETURN_LSE`` values: the tiles' log-masses for the grouped variants (a greedy row's is its max logit), and for
#: log-probabilities (a greedy row's is its log-partition at ``T = 1``).
LSE_LOG_MASSES = 1
LSE_LOGPROBS = 2


def epilogue_constants(*, return_lse: bool | int, noise: bool, col_offset: int) -> dict:
    """The epilogue's compile-time constants for a launch: Philox-10 (the stream's rounds), the tiles' log-masses or
    not, the noise or not, and token pairs sharing a Philox block when the shard starts on an even column."""
    return dict(N_ROUNDS=PHILOX_ROUNDS, RETURN_LSE=return_lse, PAIRED=col_offset % 2 == 0, NOISE=noise)


@device_function
def device_seed_words(seed_ptr):
    """The Philox key ``(lo, hi)`` of a device seed: the low and high 32 bits of the int64 at ``seed_ptr`` (the
    two's-complement bits of the seed ``s``, so ``(s mod 2**32, s >> 32)`` as :func:`~flashsampling.noise.split_seed`
    gives for the int).  The stage-1 kernels call it under ``SEED_PTR``: one scalar load per program."""
    s = tl.load(seed_ptr).to(tl.uint64, bitcast=True)
    lo = (s & 0xFFFFFFFF).to(tl.uint32)
    hi = (s >> 32).to(tl.uint32)
    return lo, hi


@device_function
def row_seed_words(seed_ptr, rows64, row_ok):
    """The Philox keys ``(lo, hi)`` of per-request seeds: per row ``b`` the low and high 32 bits of the int64 at
    ``seed_ptr + b`` (:func:`device_seed_words`, one load per row; 0 for rows outside the batch, whose candidates are
    never stored).  The stage-1 kernels call it under ``ROW_SEEDS``, where the counter's row field is 0."""
    s = tl.load(seed_ptr + rows64, mask=row_ok, other=0).to(tl.uint64, bitcast=True)
    lo = (s & 0xFFFFFFFF).to(tl.uint32)
    hi = (s >> 32).to(tl.uint32)
    return lo, hi


@device_function
def scores_and_flags(z, row_ok, col_ok, inv_temp, ALLOW_NEG_INF: tl.constexpr):
    """The unperturbed scores of a ``[rows, cols]`` block of fp32 logits and its per-row flags.

    Returns ``(base, flag, greedy)``: ``base = z * inv_temp`` (``z`` itself for a greedy row,
    ``inv_temp == 0``) and ``-inf`` outside the valid rows and columns; ``flag`` per row, bit 1 for a
    NaN or +inf logit (or -inf unless ``ALLOW_NEG_INF``), bit 2 for ``z / T`` overflowing float32;
    ``greedy`` per row.
    """
    valid = row_ok[:, None] & col_ok[None, :]
    if NAN_AS_MASKED:
        # Triton >= 3.9 interprets tl.max(..., return_indices=True) with np.nanargmax, which raises on a row of NaN
        # scores; a NaN logit is flagged below either way, so in the interpreter it is masked (-inf) instead.
        valid_score = valid & (z == z)
    else:
        valid_score = valid
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
    # The row's bits, ORed over its elements (a row can hold both kinds).
    flag = tl.max(tl.where(valid & bad, BAD_LOGIT, 0), axis=1) | tl.max(tl.where(valid & overflow, OVERFLOW, 0), axis=1)
    base = tl.where(valid_score, tl.where(greedy[:, None], z, scaled), float("-inf"))
    return base, flag, greedy


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
    PAIRED: tl.constexpr,
    NOISE: tl.constexpr,
    ROW_SEEDS: tl.constexpr = False,
):
    """``(B_tile, V_tile)`` fp32 logits -> per (row, sample) the tile's max score, its key and its index.

    ``k0, k1``: the Philox key, scalars (one seed; the counter's row field is the row) or, with ``ROW_SEEDS``,
    ``[B_tile]`` vectors (:func:`row_seed_words`; the counter's row field is 0)."""
    base, flag, greedy = scores_and_flags(z, row_ok, col_ok, inv_temp, ALLOW_NEG_INF)
    rows64 = rows.to(tl.int64)
    tl.store(flag_ptr + rows64 * num_v_tiles + pid_v, flag, mask=row_ok)

    if RETURN_LSE:
        # The tile's log-mass L = logsumexp(z / T) over its valid tokens (max z for a greedy row).
        m_l = tl.max(base, axis=1)
        safe = tl.where(m_l == float("-inf"), 0.0, m_l)
        tot = tl.sum(tl.exp(base - safe[:, None]), axis=1)
        if RETURN_LSE == 2:  # LSE_LOGPROBS (a compiled kernel reads only constexpr globals)
            lse = safe + tl.log(tl.where(tot > 0.0, tot, 1.0))  # a greedy row's base is z: its T = 1 log-partition
        else:
            lse = tl.where(greedy, m_l, safe + tl.log(tl.where(tot > 0.0, tot, 1.0)))
        lse = tl.where(m_l == float("-inf"), float("-inf"), lse)
        tl.store(lse_ptr + rows64 * num_v_tiles + pid_v, lse, mask=row_ok)

    noisy = (~greedy)[:, None]
    tile_start = col_offset + pid_v.to(tl.int64) * BLOCK_SIZE_V
    if ROW_SEEDS:
        u_rows = tl.zeros_like(rows).to(tl.uint32)  # a request's noise does not depend on its batch slot
    else:
        u_rows = rows.to(tl.uint32)
    for smp in range(0, num_samples):
        c_smp = (tl.zeros([1, 1], dtype=tl.int32) + smp).to(tl.uint32)
        m, idx, key = select_chunk(
            base, noisy, u_rows, c_smp, tile_start, k0, k1, BLOCK_SIZE_B, BLOCK_SIZE_V, N_ROUNDS, PAIRED, NOISE,
            ROW_SEEDS,
        )  # fmt: skip
        off = (rows64 * num_samples + smp) * num_v_tiles + pid_v
        tl.store(part_max_ptr + off, m, mask=row_ok)
        tl.store(part_key_ptr + off, key.to(tl.int64), mask=row_ok)
        tl.store(part_idx_ptr + off, idx, mask=row_ok)


@device_function
def select_chunk(
    base,
    noisy,
    u_rows,
    c_smp,
    chunk_start,
    k0,
    k1,
    BLOCK_SIZE_B: tl.constexpr,
    WIDTH: tl.constexpr,
    N_ROUNDS: tl.constexpr,
    PAIRED: tl.constexpr,
    NOISE: tl.constexpr,
    ROW_SEEDS: tl.constexpr = False,
):
    """Perturb the ``[BLOCK_SIZE_B, WIDTH]`` scores ``base`` (global columns from ``chunk_start``) and
    return per row ``(max score, global index, tie-break key)`` of the winner.  ``ROW_SEEDS``: ``k0, k1`` are
    per-row key vectors (:func:`perturb_select_store`)."""
    c_row = u_rows[:, None]
    if ROW_SEEDS:
        kb0 = k0[:, None]
        kb1 = k1[:, None]
    else:
        kb0 = k0
        kb1 = k1
    if PAIRED:
        # Tokens (2p, 2p + 1) share Philox block p: split the chunk into its even and odd columns.
        b_even, b_odd = tl.split(tl.reshape(base, [BLOCK_SIZE_B, WIDTH // 2, 2]))
        if NOISE:
            pairs = (chunk_start // 2 + tl.arange(0, WIDTH // 2)).to(tl.uint32)[None, :]
            g_even, g_odd = pair_noise(kb0, kb1, c_row, pairs, c_smp, N_ROUNDS)
            s_even = tl.where(noisy, b_even + g_even, b_even)
            s_odd = tl.where(noisy, b_odd + g_odd, b_odd)
        else:
            s_even = b_even
            s_odd = b_odd
        # One reduction gives each half's max and its first index; one more counts the top's copies.
        m_even, j_even = tl.max(s_even, axis=1, return_indices=True)
        m_odd, j_odd = tl.max(s_odd, axis=1, return_indices=True)
        m = tl.maximum(m_even, m_odd)
        pos = tl.where(m_even >= m_odd, 2 * j_even, 2 * j_odd + 1)
        hit_even = (s_even == m[:, None]) & (m > float("-inf"))[:, None]
        hit_odd = (s_odd == m[:, None]) & (m > float("-inf"))[:, None]
        n_hit = tl.sum(hit_even.to(tl.int32) + hit_odd.to(tl.int32), axis=1)
        if tl.max(n_hit, axis=0) > 1:
            # An exact float32 tie at the top (rare): the larger tie-break key wins.
            even_idx = (chunk_start + 2 * tl.arange(0, WIDTH // 2)).to(tl.uint32)[None, :]
            k_even = tl.where(hit_even, tie_key(kb0, kb1, c_row, even_idx, c_smp, N_ROUNDS), 0)
            k_odd = tl.where(hit_odd, tie_key(kb0, kb1, c_row, even_idx + 1, c_smp, N_ROUNDS), 0)
            best_even = tl.max(k_even, axis=1)
            best_odd = tl.max(k_odd, axis=1)
            pos_tie = tl.where(best_even >= best_odd, 2 * tl.argmax(k_even, axis=1), 2 * tl.argmax(k_odd, axis=1) + 1)
            pos = tl.where(n_hit > 1, pos_tie, pos)
    else:
        # A chunk that starts on an odd index (a shard at an odd offset): one block per token.
        gidx = (chunk_start + tl.arange(0, WIDTH)).to(tl.uint32)[None, :]
        if NOISE:
            g = token_noise(kb0, kb1, c_row, gidx, c_smp, N_ROUNDS)
            score = tl.where(noisy, base + g, base)
        else:
            score = base
        m, pos = tl.max(score, axis=1, return_indices=True)
        hit = (score == m[:, None]) & (m > float("-inf"))[:, None]
        n_hit = tl.sum(hit.to(tl.int32), axis=1)
        if tl.max(n_hit, axis=0) > 1:
            kk = tl.where(hit, tie_key(kb0, kb1, c_row, gidx, c_smp, N_ROUNDS), 0)
            pos = tl.where(n_hit > 1, tl.argmax(kk, axis=1), pos)
    idx = chunk_start + pos.to(tl.int64)
    # The winner's key, for ties across chunks and tiles (a [BLOCK_SIZE_B] vector: cheap).
    key = tie_key(k0, k1, u_rows, idx.to(tl.uint32), c_smp.reshape([1]), N_ROUNDS)
    return m, idx, key


@device_function
def tile_epilogue(
    acc, slot_id, pid_b, pid_v, num_v_tiles, B, V, col_offset, num_samples, seed_lo, seed_hi, inv_temp_ptr,
    part_max_ptr, part_key_ptr, part_idx_ptr, flag_ptr, lse_ptr, scratch_ptr,
    BLOCK_SIZE_B: tl.constexpr, BLOCK_SIZE_V: tl.constexpr, N_ROUNDS: tl.constexpr, RETURN_LSE: tl.constexpr,
    PAIRED: tl.constexpr, NOISE: tl.constexpr, EPILOGUE_V: tl.constexpr, ROW_SEEDS: tl.constexpr = False,
):  # fmt: skip
    """The epilogue of one ``[BLOCK_SIZE_B, BLOCK_SIZE_V]`` logit tile ``acc`` (rows from
    ``pid_b * BLOCK_SIZE_B``, columns from ``pid_v * BLOCK_SIZE_V``): temperature, noise, the tile's
    candidate(s).  With ``EPILOGUE_V`` the tile is staged through scratch slot ``slot_id`` (the
    chunk loop unrolled or software-pipelined was measured no faster:
    ``benchmarks/results/persistent_sweep_h200_v5.json``).  ``ROW_SEEDS``: ``seed_lo`` points to the ``[B]`` int64
    per-request seeds (:func:`row_seed_words`)."""
    rows = pid_b * BLOCK_SIZE_B + tl.arange(0, BLOCK_SIZE_B)
    cols = pid_v * BLOCK_SIZE_V + tl.arange(0, BLOCK_SIZE_V)
    row_ok = rows < B
    col_ok = cols < V
    inv_temp = tl.load(inv_temp_ptr + rows.to(tl.int64), mask=row_ok, other=1.0)
    if ROW_SEEDS:
        seed_lo, seed_hi = row_seed_words(seed_lo, rows.to(tl.int64), row_ok)
    if EPILOGUE_V == 0:
        perturb_select_store(
            acc, rows, cols, col_offset, row_ok, col_ok, inv_temp, seed_lo.to(tl.uint32), seed_hi.to(tl.uint32),
            num_samples, pid_v, num_v_tiles, part_max_ptr, part_key_ptr, part_idx_ptr, flag_ptr, lse_ptr,
            BLOCK_SIZE_B, BLOCK_SIZE_V, False, N_ROUNDS, RETURN_LSE, PAIRED, NOISE, ROW_SEEDS,
        )  # fmt: skip
    else:
        # Stage the tile through the scratch slot (it stays in L2) and run the epilogue on
        # EPILOGUE_V-wide chunks, each its own candidate: chunk c of tile pid_v is candidate
        # pid_v * (BLOCK_SIZE_V // EPILOGUE_V) + c of num_chunks.
        slot = scratch_ptr + slot_id.to(tl.int64) * (BLOCK_SIZE_B * BLOCK_SIZE_V)
        r_loc = tl.arange(0, BLOCK_SIZE_B)[:, None] * BLOCK_SIZE_V
        tl.store(slot + r_loc + tl.arange(0, BLOCK_SIZE_V)[None, :], acc)
        tl.debug_barrier()
        num_chunks = tl.cdiv(V, EPILOGUE_V)
        for c in range(0, BLOCK_SIZE_V // EPILOGUE_V):
            staged_chunk(
                c, slot, r_loc, rows, row_ok, pid_v, num_chunks, V, col_offset, num_samples, seed_lo, seed_hi,
                inv_temp, part_max_ptr, part_key_ptr, part_idx_ptr, flag_ptr, lse_ptr,
                BLOCK_SIZE_B, BLOCK_SIZE_V, N_ROUNDS, RETURN_LSE, PAIRED, NOISE, EPILOGUE_V, ROW_SEEDS,
            )  # fmt: skip
        # A persistent program reuses its slot for the next tile: every chunk must be read first.
        tl.debug_barrier()


@device_function
def staged_chunk(
    c, slot, r_loc, rows, row_ok, pid_v, num_chunks, V, col_offset, num_samples, seed_lo, seed_hi, inv_temp,
    part_max_ptr, part_key_ptr, part_idx_ptr, flag_ptr, lse_ptr,
    BLOCK_SIZE_B: tl.constexpr, BLOCK_SIZE_V: tl.constexpr, N_ROUNDS: tl.constexpr, RETURN_LSE: tl.constexpr,
    PAIRED: tl.constexpr, NOISE: tl.constexpr, EPILOGUE_V: tl.constexpr, ROW_SEEDS: tl.constexpr = False,
):  # fmt: skip
    """Chunk ``c`` of a staged tile: reload ``EPILOGUE_V`` columns from the scratch slot and store
    their candidate (candidate ``pid_v * (BLOCK_SIZE_V // EPILOGUE_V) + c`` of ``num_chunks``)."""
    c_loc = c * EPILOGUE_V + tl.arange(0, EPILOGUE_V)
    z = tl.load(slot + r_loc + c_loc[None, :])
    chunk = pid_v * (BLOCK_SIZE_V // EPILOGUE_V) + c
    ccols = pid_v * BLOCK_SIZE_V + c_loc
    perturb_select_store(
        z, rows, ccols, col_offset, row_ok & (tl.zeros_like(rows) + chunk < num_chunks), ccols < V, inv_temp,
        seed_lo.to(tl.uint32), seed_hi.to(tl.uint32), num_samples, chunk, num_chunks,
        part_max_ptr, part_key_ptr, part_idx_ptr, flag_ptr, lse_ptr,
        BLOCK_SIZE_B, EPILOGUE_V, False, N_ROUNDS, RETURN_LSE, PAIRED, NOISE, ROW_SEEDS,
    )  # fmt: skip
