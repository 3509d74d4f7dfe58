"""Stage 2: reduce the per-tile candidates of stage 1 to one token per (row, sample), or combine them by the
grouped, online and tensor-parallel rules.

Reduce over tiles
-----------------
:func:`reduce_tiles_kernel`: one program per (row, sample) reads its ``T`` candidates ``(m_t, key_t, idx_t)`` and
keeps the lexicographic maximum of ``(m, key)`` -- the global argmax of the perturbed scores, because the
argmax over the whole vocabulary is the argmax over the tile maxima (argmax decomposition,
``proofs/argmax_decomposition.md``), with exact float32 ties broken by the random key exactly as
inside a tile.  It also ORs the row's stage-1 flags and adds ``FLAG_NO_FINITE`` when every score is
``-inf``.  The token is clamped into ``[0, V)`` so that, even with host checks off, no index is ever
out of range.

Bytes: ``B * S * T * 20`` read, ``B * S * 12`` written (``T = ceil(V / BLOCK_SIZE_V)``).

Combine (grouped, online, tensor-parallel)
------------------------------------------
The combine kernels work on the candidates of stage 1 (``(max score, key, global index)`` per row, sample
and vocabulary tile, and the tiles' log-masses) and on a few scalars per row: none reads a logit.
Every kernel takes ``BLOCK_SIZE_P`` flat (row, sample) pairs ``p = row * S + sample`` per program
(the interpreter's cost is per program, so there it takes one large tile; on the GPU a few pairs)
and walks its other axis in blocks.

*Group noise.*
Besides the token noise of stage 1 the variants need one random block per (group, row, sample):
the Gumbel noise that picks a group (``STREAM_GROUP = 1``) or the bits of an online merge's coin
(``STREAM_ONLINE = 2``), from the same Philox generator with the counter::

    (group_id, row, sample, stream)          group_id = the group's first global vocabulary index

so they are independent of the token noise (stream 0) by construction, and reproducible from the
seed alone (every tensor-parallel rank computes the same values without communication).  The group
noise is :func:`flashsampling.noise.gumbel64_from_bits` (float64; twin ``group_noise_np``), the coin
:func:`flashsampling.noise.merge_coin` (an integer comparison; twin ``merge_coin_np``): both exact on
the 64-bit grid and equal to their twins bit for bit (``proofs/finite_precision.md``, section 8).

*The kernels.*
``reduce_candidates_kernel``: candidates ``[B, S, T]`` -> the lexicographic max over ``T`` per pair
(a shard's or chunk's local sample) and, optionally, ``L = logsumexp_t lse[b, t]`` in float64 (max
for a greedy row) and the OR of the tiles' flags.  Bytes: ``B S T 20 + B T 8`` read.

``combine_groups_kernel``: ``L [B, K]`` and candidates ``[B, S, K]`` -> per pair::

    for k in range(K):
        G'    = gumbel64_from_bits(philox(ids[k], row, sample, STREAM_GROUP))       float64
        score = z_best[k]            if greedy row or PATHWISE   else   L[k] + G'      (float64)
        key   = key_best[k]          if greedy row or PATHWISE   else   w2(...)
        keep the lexicographic max of (score, key), its local index and position k
    flags = OR of the stage-1 flags [B, F], plus FLAG_NO_FINITE when no group has mass

``PATHWISE`` is the tensor-parallel pathwise combine (the flat argmax over ranks' maxima).
Bytes: ``B K 8 + B F 4 + B S K 20`` read, ``B S 20`` written.

``online_merge_kernel``: one binary merge of :class:`flashsampling.online.OnlineSampler` per pair
(module docstring there), the coin ``merge_coin(w0, w1, L, L_C)`` of the block ``(chunk start, row,
sample, STREAM_ONLINE)``; the row's new log-mass and flags go to separate output buffers (other pairs
of the row still read the old ones).

*Lexicographic max.*
Every kernel keeps the candidate with the largest ``(score, key)`` pair, first position on a full
tie: the rule of a stage-1 tile and of :func:`reduce_tiles_kernel`.  It is associative, so reducing in
any grouping (tiles, shards, ranks, chunks) gives the same winner as one flat argmax.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._device import INTERPRET
from ..noise import PHILOX_ROUNDS, STREAM_GROUP, STREAM_ONLINE, gumbel64_from_bits, merge_coin, philox4x32
from .flags import BAD_LOGIT, FLAG_BAD_LOGIT, FLAG_NO_FINITE, FLAG_OVERFLOW, NO_FINITE, OVERFLOW
from .launch import cdiv, direct, next_power_of_2


@triton.jit
def reduce_tiles_kernel(
    part_max_ptr,
    part_key_ptr,
    part_idx_ptr,
    flag_ptr,
    token_ptr,
    row_flag_ptr,
    num_samples,
    num_tiles,
    V,
    BLOCK_SIZE_T: tl.constexpr,
):
    """``(B*S, T)`` candidates -> ``(B*S,)`` tokens: lexicographic argmax of (max score, key)."""
    pid = tl.program_id(0).to(tl.int64)
    row = pid // num_samples
    base = pid * num_tiles
    offs = tl.arange(0, BLOCK_SIZE_T)
    run_m = tl.full([], float("-inf"), tl.float32)
    run_k = tl.full([], -2, tl.int64)
    run_i = tl.full([], 0, tl.int64)
    run_f = tl.full([], 0, tl.int32)
    for t0 in range(0, num_tiles, BLOCK_SIZE_T):
        t = t0 + offs
        ok = t < num_tiles
        m = tl.load(part_max_ptr + base + t, mask=ok, other=float("-inf"))
        k = tl.load(part_key_ptr + base + t, mask=ok, other=-2)
        i = tl.load(part_idx_ptr + base + t, mask=ok, other=0)
        f = tl.load(flag_ptr + row * num_tiles + t, mask=ok, other=0)
        run_f = (
            run_f
            | tl.max(tl.where((f & BAD_LOGIT) != 0, BAD_LOGIT, 0), axis=0)
            | tl.max(tl.where((f & OVERFLOW) != 0, OVERFLOW, 0), axis=0)
        )
        cm = tl.max(m, axis=0)
        kk = tl.where(ok & (m == cm), k, -2)
        ck = tl.max(kk, axis=0)
        j = tl.argmax(kk, axis=0)
        ci = tl.sum(tl.where(offs == j, i, 0), axis=0)
        better = (cm > run_m) | ((cm == run_m) & (ck > run_k))
        run_m = tl.where(better, cm, run_m)
        run_k = tl.where(better, ck, run_k)
        run_i = tl.where(better, ci, run_i)
    run_f = run_f | tl.where(run_m == float("-inf"), NO_FINITE, 0)
    token = tl.minimum(tl.maximum(run_i, 0), V - 1)
    tl.store(token_ptr + pid, token)
    tl.store(row_flag_ptr + pid, run_f)


def reduce_tiles_torch(part_max, part_key, part_idx, flags, V: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The same reduction as :func:`reduce_tiles_kernel`, in vectorized torch.

    Used in the interpreter, where each program's reductions cost milliseconds of patching;
    ``tests/test_reduce.py`` binds the two.
    """
    m = part_max.max(dim=-1, keepdim=True).values
    k = torch.where(part_max == m, part_key, torch.full_like(part_key, -2))
    j = k.argmax(dim=-1, keepdim=True)
    tokens = part_idx.gather(-1, j).squeeze(-1).clamp(0, V - 1)
    row = ((flags & FLAG_BAD_LOGIT) != 0).any(dim=-1).to(torch.int32) * FLAG_BAD_LOGIT
    row = row | ((flags & FLAG_OVERFLOW) != 0).any(dim=-1).to(torch.int32) * FLAG_OVERFLOW
    row_flags = row[:, None] | torch.where(m.squeeze(-1) == float("-inf"), FLAG_NO_FINITE, 0).to(torch.int32)
    return tokens, row_flags


def reduce_tiles(part_max, part_key, part_idx, flags, V: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Stage 2 on partials of shape ``[B, S, T]`` and flags ``[B, T]``.

    Returns ``(tokens int64 [B, S], flags int32 [B, S])``.  Compiled: one Triton launch; in the
    interpreter: :func:`reduce_tiles_torch`.
    """
    if INTERPRET:
        return reduce_tiles_torch(part_max, part_key, part_idx, flags, V)
    return launch_reduce_tiles(part_max, part_key, part_idx, flags, V)


def launch_reduce_tiles(part_max, part_key, part_idx, flags, V: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch :func:`reduce_tiles_kernel`; returns ``(tokens [B, S], flags [B, S])``."""
    B, S, T = part_max.shape
    tokens = torch.empty((B, S), dtype=torch.int64, device=part_max.device)
    row_flags = torch.empty((B, S), dtype=torch.int32, device=part_max.device)
    block_t = min(next_power_of_2(T), 1024)
    direct(reduce_tiles_kernel)[(B * S,)](
        part_max, part_key, part_idx, flags, tokens, row_flags, S, T, V, BLOCK_SIZE_T=block_t
    )
    return tokens, row_flags


def _blocks(P: int, inner: int) -> tuple[int, int]:
    """(pairs per program, inner block) for ``P`` pairs and an inner axis of length ``inner``."""
    if INTERPRET:
        # One 64k-element tile: the interpreter pays per program, not per element.
        block_i = min(next_power_of_2(max(inner, 1)), 256)
        return min(next_power_of_2(P), max(1, (1 << 16) // block_i)), block_i
    # GPU: 128 per step; pairs per program only once there are more than ~256 programs (two per
    # SM), and at most 2048 elements per program (16 per thread at 4 warps) beside Philox's state.
    block_i = min(next_power_of_2(max(inner, 1)), 128)
    return min(next_power_of_2(cdiv(P, 256)), max(1, (1 << 11) // block_i)), block_i


# --------------------------------------------------------------------------------------------
# Reduce a launch's tiles to one candidate (and one log-mass) per pair
# --------------------------------------------------------------------------------------------


# Sizes are data: never specialize them (each new T or P would compile a new variant).
@triton.jit(do_not_specialize=["P", "S", "T"])
def reduce_candidates_kernel(
    part_max_ptr,
    part_key_ptr,
    part_idx_ptr,
    lse_ptr,
    tile_flag_ptr,
    inv_temp_ptr,
    m_ptr,
    key_ptr,
    idx_ptr,
    logmass_ptr,
    flag_ptr,
    P,
    S,
    T,
    BLOCK_SIZE_P: tl.constexpr,
    BLOCK_SIZE_T: tl.constexpr,
    RETURN_LSE: tl.constexpr,
):
    """``[B, S, T]`` candidates -> ``[B, S]`` lexmax; ``lse [B, T]`` -> ``[B]`` float64 logsumexp; flags OR."""
    pid = tl.program_id(0).to(tl.int64)
    p = pid * BLOCK_SIZE_P + tl.arange(0, BLOCK_SIZE_P)
    p_ok = p < P
    row = p // S
    first = p_ok & (p % S == 0)
    greedy = tl.load(inv_temp_ptr + row, mask=p_ok, other=1.0) == 0.0
    offs = tl.arange(0, BLOCK_SIZE_T)
    run_m = tl.full([BLOCK_SIZE_P], float("-inf"), tl.float32)
    run_k = tl.full([BLOCK_SIZE_P], -5, tl.int64)
    run_i = tl.zeros([BLOCK_SIZE_P], tl.int64)
    run_f = tl.zeros([BLOCK_SIZE_P], tl.int32)
    run_max = tl.full([BLOCK_SIZE_P], float("-inf"), tl.float64)
    run_sum = tl.zeros([BLOCK_SIZE_P], tl.float64)
    for t0 in range(0, T, BLOCK_SIZE_T):
        t = t0 + offs
        ok = p_ok[:, None] & (t < T)[None, :]
        pt = p[:, None] * T + t[None, :]
        rt = row[:, None] * T + t[None, :]
        m = tl.load(part_max_ptr + pt, mask=ok, other=float("-inf"))
        k = tl.load(part_key_ptr + pt, mask=ok, other=-5)
        i = tl.load(part_idx_ptr + pt, mask=ok, other=0)
        cm = tl.max(m, axis=1)
        kh = tl.where(ok & (m == cm[:, None]), k, -5)
        ck = tl.max(kh, axis=1)
        j = tl.argmax(kh, axis=1)
        ci = tl.sum(tl.where(offs[None, :] == j[:, None], i, 0), axis=1)
        better = (cm > run_m) | ((cm == run_m) & (ck > run_k))
        run_m = tl.where(better, cm, run_m)
        run_k = tl.where(better, ck, run_k)
        run_i = tl.where(better, ci, run_i)
        f = tl.load(tile_flag_ptr + rt, mask=ok & first[:, None], other=0)
        run_f = (
            run_f
            | tl.max(tl.where((f & BAD_LOGIT) != 0, BAD_LOGIT, 0), axis=1)
            | tl.max(tl.where((f & OVERFLOW) != 0, OVERFLOW, 0), axis=1)
        )
        if RETURN_LSE:
            lm = tl.load(lse_ptr + rt, mask=ok & first[:, None], other=float("-inf")).to(tl.float64)
            new_max = tl.maximum(run_max, tl.max(lm, axis=1))
            safe = tl.where(new_max == float("-inf"), 0.0, new_max)
            run_sum = run_sum * tl.exp(run_max - safe) + tl.sum(tl.exp(lm - safe[:, None]), axis=1)
            run_max = new_max
    tl.store(m_ptr + p, run_m, mask=p_ok)
    tl.store(key_ptr + p, run_k, mask=p_ok)
    tl.store(idx_ptr + p, run_i, mask=p_ok)
    tl.store(flag_ptr + row, run_f, mask=first)
    if RETURN_LSE:
        safe_sum = tl.where(run_sum > 0.0, run_sum, 1.0)
        lse = tl.where(run_max == float("-inf"), float("-inf"), run_max + tl.log(safe_sum))
        tl.store(logmass_ptr + row, tl.where(greedy, run_max, lse), mask=first)


def launch_reduce_candidates(parts, inv_temp: torch.Tensor, *, return_lse: bool):
    """Stage-1 output ``(part_max, part_key, part_idx, flags, lse)`` -> one candidate per pair.

    Returns ``(m f32 [B, S], key int64 [B, S], index int64 [B, S], logmass f64 [B], flags i32 [B])``;
    ``logmass`` is ``logsumexp`` of the tiles' log-masses (``max`` for a greedy row) with
    ``return_lse`` (the stage-1 launch must have had it too), else uninitialized.
    """
    part_max, part_key, part_idx, tile_flags, lse = parts
    B, S, T = part_max.shape
    P = B * S
    dev = part_max.device
    m = torch.empty((B, S), dtype=torch.float32, device=dev)
    key = torch.empty((B, S), dtype=torch.int64, device=dev)
    idx = torch.empty((B, S), dtype=torch.int64, device=dev)
    logmass = torch.empty((B,), dtype=torch.float64, device=dev)
    flags = torch.empty((B,), dtype=torch.int32, device=dev)
    block_p, block_t = _blocks(P, T)
    direct(reduce_candidates_kernel)[(cdiv(P, block_p),)](
        part_max, part_key, part_idx, lse, tile_flags, inv_temp.contiguous(), m, key, idx, logmass, flags, P, S, T,
        BLOCK_SIZE_P=block_p, BLOCK_SIZE_T=block_t, RETURN_LSE=return_lse,
    )  # fmt: skip
    return m, key, idx, logmass, flags


# --------------------------------------------------------------------------------------------
# Combine K groups: group draw over the log-masses (or the pathwise max), one launch
# --------------------------------------------------------------------------------------------


@triton.jit(do_not_specialize=["P", "S", "K", "F", "V", "seed_lo", "seed_hi"])
def combine_groups_kernel(
    logmass_ptr,
    best_ptr,
    key_ptr,
    idx_ptr,
    ids_ptr,
    flag_ptr,
    inv_temp_ptr,
    token_ptr,
    choice_ptr,
    row_flag_ptr,
    P,
    S,
    K,
    F,
    V,
    seed_lo,
    seed_hi,
    BLOCK_SIZE_P: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    PATHWISE: tl.constexpr,
    STREAM: tl.constexpr,
    N_ROUNDS: tl.constexpr,
    FROM_WEIGHTS: tl.constexpr = False,
):
    """``L [B, K]``, candidates ``[B, S, K]`` -> ``[B, S]``: lexmax_k (L_k + G'_k, key'_k), its local index.
    ``FROM_WEIGHTS`` (the tile inverse-CDF sampler's candidates, where ``key`` holds the tile's weight sum ``Q`` as
    uint64 bits and ``best`` its maximum ``m``): ``L = m + ln Q - 55 ln 2`` in float64 (``-inf`` where ``Q = 0``), as
    :func:`flashsampling.tile_cdf.twin.tile_logmass`; ``logmass_ptr`` is not read."""
    pid = tl.program_id(0).to(tl.int64)
    p = pid * BLOCK_SIZE_P + tl.arange(0, BLOCK_SIZE_P)
    p_ok = p < P
    row = p // S
    smp = p % S
    greedy = tl.load(inv_temp_ptr + row, mask=p_ok, other=1.0) == 0.0
    offs = tl.arange(0, BLOCK_SIZE_K)
    zeros = tl.zeros([BLOCK_SIZE_P, BLOCK_SIZE_K], dtype=tl.uint32)
    c_row = zeros + row.to(tl.uint32)[:, None]
    c_smp = zeros + smp.to(tl.uint32)[:, None]
    c_str = zeros + STREAM
    k0 = seed_lo.to(tl.uint32)
    k1 = seed_hi.to(tl.uint32)
    run_s = tl.full([BLOCK_SIZE_P], float("-inf"), tl.float64)
    run_k = tl.full([BLOCK_SIZE_P], -5, tl.int64)
    run_i = tl.zeros([BLOCK_SIZE_P], tl.int64)
    run_j = tl.zeros([BLOCK_SIZE_P], tl.int64)
    run_l = tl.full([BLOCK_SIZE_P], float("-inf"), tl.float64)
    for g0 in range(0, K, BLOCK_SIZE_K):
        k = g0 + offs
        ok = p_ok[:, None] & (k < K)[None, :]
        pk = p[:, None] * K + k[None, :]
        m = tl.load(best_ptr + pk, mask=ok, other=float("-inf")).to(tl.float64)
        key = tl.load(key_ptr + pk, mask=ok, other=-5)
        idx = tl.load(idx_ptr + pk, mask=ok, other=0)
        if PATHWISE:
            score = m
            kk = key
            run_l = tl.maximum(run_l, tl.max(m, axis=1))
        else:
            if FROM_WEIGHTS:
                q = key.to(tl.uint64, bitcast=True).to(tl.float64)
                ln2_55 = tl.full([BLOCK_SIZE_P, BLOCK_SIZE_K], 38.12309493079699, tl.float64)  # the twin's 55 ln 2
                lm = tl.where(ok & (q > 0), m + tl.log(q) - ln2_55, float("-inf"))
            else:
                lm = tl.load(logmass_ptr + row[:, None] * K + k[None, :], mask=ok, other=float("-inf")).to(tl.float64)
            gid = tl.load(ids_ptr + k, mask=k < K, other=0)
            c_gid = zeros + gid.to(tl.uint32)[None, :]
            w0, w1, w2, w3 = philox4x32(c_gid, c_row, c_smp, c_str, k0, k1, N_ROUNDS)
            score = tl.where(greedy[:, None], m, lm + gumbel64_from_bits(w0, w1))
            kk = tl.where(greedy[:, None], key, w2.to(tl.int64))
            run_l = tl.maximum(run_l, tl.max(lm, axis=1))
        score = tl.where(ok, score, float("-inf"))
        cm = tl.max(score, axis=1)
        kh = tl.where(ok & (score == cm[:, None]), kk, -5)
        ck = tl.max(kh, axis=1)
        j = tl.argmax(kh, axis=1)
        ci = tl.sum(tl.where(offs[None, :] == j[:, None], idx, 0), axis=1)
        better = (cm > run_s) | ((cm == run_s) & (ck > run_k))
        run_s = tl.where(better, cm, run_s)
        run_k = tl.where(better, ck, run_k)
        run_i = tl.where(better, ci, run_i)
        run_j = tl.where(better, g0 + j.to(tl.int64), run_j)
    run_f = tl.where(run_l == float("-inf"), NO_FINITE, 0)
    for f0 in range(0, F, BLOCK_SIZE_K):
        fc = f0 + offs
        f = tl.load(flag_ptr + row[:, None] * F + fc[None, :], mask=p_ok[:, None] & (fc < F)[None, :], other=0)
        run_f = (
            run_f
            | tl.max(tl.where((f & BAD_LOGIT) != 0, BAD_LOGIT, 0), axis=1)
            | tl.max(tl.where((f & OVERFLOW) != 0, OVERFLOW, 0), axis=1)
        )
    # Clamped into [0, V): an empty group's or an all-NaN row's winner may carry an index at V (host_checks=False).
    tl.store(token_ptr + p, tl.minimum(tl.maximum(run_i, 0), V - 1), mask=p_ok)
    tl.store(choice_ptr + p, run_j, mask=p_ok)
    tl.store(row_flag_ptr + p, run_f, mask=p_ok)


#: The combine's clamp without a vocabulary size: int32's largest index.
_MAX_INDEX = 2**31 - 1


def launch_combine_groups(
    logmass: torch.Tensor,
    best: torch.Tensor,
    key: torch.Tensor,
    index: torch.Tensor,
    ids: torch.Tensor,
    flags: torch.Tensor,
    inv_temp: torch.Tensor,
    seed_lo: int,
    seed_hi: int,
    *,
    vocab_size: int | None = None,
    pathwise: bool = False,
    from_weights: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Launch :func:`combine_groups_kernel`.

    ``vocab_size``: the tokens are clamped into ``[0, vocab_size)`` (every sampler passes its ``V``, so that no flag,
    read or not, lets an index outside the vocabulary out); ``None``: below ``2**31`` only (the kernel's tests).

    ``logmass [B, K]`` (float32 or float64; unused when ``pathwise``), ``best [B, S, K]`` float32,
    ``key``/``index [B, S, K]`` int64, ``ids [K]`` int64, ``flags [B, F]`` int32 (any ``F``),
    ``inv_temp [B]`` float32 (0 = greedy).  ``from_weights``: ``L`` from ``(best, key) = (m, Q)`` in the kernel
    (:func:`combine_groups_kernel`'s ``FROM_WEIGHTS``; ``logmass`` is not read).  Returns ``(tokens int64 [B, S],
    choice int64 [B, S], flags int32 [B, S])``.
    """
    B, S, K = best.shape
    P = B * S
    device = best.device
    tokens = torch.empty((B, S), dtype=torch.int64, device=device)
    choice = torch.empty((B, S), dtype=torch.int64, device=device)
    row_flags = torch.empty((B, S), dtype=torch.int32, device=device)
    block_p, block_k = _blocks(P, K)
    direct(combine_groups_kernel)[(cdiv(P, block_p),)](
        logmass.contiguous(), best.contiguous(), key.contiguous(), index.contiguous(), ids.contiguous(),
        flags.contiguous(), inv_temp.contiguous(), tokens, choice, row_flags, P, S, K, flags.shape[1],
        _MAX_INDEX if vocab_size is None else vocab_size, seed_lo, seed_hi,
        BLOCK_SIZE_P=block_p, BLOCK_SIZE_K=block_k, PATHWISE=pathwise, STREAM=STREAM_GROUP, N_ROUNDS=PHILOX_ROUNDS,
        FROM_WEIGHTS=from_weights,
    )  # fmt: skip
    return tokens, choice, row_flags


# --------------------------------------------------------------------------------------------
# Online: one binary merge per pair
# --------------------------------------------------------------------------------------------


@triton.jit(do_not_specialize=["P", "S", "start", "seed_lo", "seed_hi"])
def online_merge_kernel(
    cm_ptr,
    ck_ptr,
    ci_ptr,
    lc_ptr,
    cflag_ptr,
    inv_temp_ptr,
    l_ptr,
    flag_ptr,
    best_ptr,
    key_ptr,
    idx_ptr,
    l_out_ptr,
    flag_out_ptr,
    P,
    S,
    start,
    seed_lo,
    seed_hi,
    BLOCK_SIZE_P: tl.constexpr,
    STREAM: tl.constexpr,
    N_ROUNDS: tl.constexpr,
):
    """State ``(L [B], best/key/idx [B, S])`` + chunk ``(L_C [B], candidate [B, S])`` -> merged state."""
    pid = tl.program_id(0).to(tl.int64)
    p = pid * BLOCK_SIZE_P + tl.arange(0, BLOCK_SIZE_P)
    p_ok = p < P
    row = p // S
    smp = p % S
    first = p_ok & (smp == 0)
    greedy = tl.load(inv_temp_ptr + row, mask=p_ok, other=1.0) == 0.0
    lo = tl.load(l_ptr + row, mask=p_ok, other=float("-inf"))
    lc = tl.load(lc_ptr + row, mask=p_ok, other=float("-inf"))
    mx = tl.maximum(lo, lc)
    d = tl.where(mx == float("-inf"), float("-inf"), tl.minimum(lo, lc) - mx)
    l_new = tl.where(mx == float("-inf"), mx, mx + tl.log(1.0 + tl.exp(d)))
    zeros = tl.zeros([BLOCK_SIZE_P], dtype=tl.uint32)
    w0, w1, w2, w3 = philox4x32(
        zeros + start.to(tl.uint32), row.to(tl.uint32), smp.to(tl.uint32), zeros + STREAM,
        seed_lo.to(tl.uint32), seed_hi.to(tl.uint32), N_ROUNDS,
    )  # fmt: skip
    cm = tl.load(cm_ptr + p, mask=p_ok, other=float("-inf"))
    ck = tl.load(ck_ptr + p, mask=p_ok, other=-5)
    ci = tl.load(ci_ptr + p, mask=p_ok, other=0)
    bm = tl.load(best_ptr + p, mask=p_ok, other=float("-inf"))
    bk = tl.load(key_ptr + p, mask=p_ok, other=-5)
    take = tl.where(greedy, (cm > bm) | ((cm == bm) & (ck > bk)), merge_coin(w0, w1, lo, lc))
    tl.store(best_ptr + p, cm, mask=p_ok & take)
    tl.store(key_ptr + p, ck, mask=p_ok & take)
    tl.store(idx_ptr + p, ci, mask=p_ok & take)
    tl.store(l_out_ptr + row, tl.where(greedy, mx, l_new), mask=first)
    f = tl.load(flag_ptr + row, mask=first, other=0) | tl.load(cflag_ptr + row, mask=first, other=0)
    tl.store(flag_out_ptr + row, f, mask=first)


def launch_online_merge(
    cand, inv_temp, logmass, flags, best, key, index, start: int, seed_lo: int, seed_hi: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge a chunk's ``cand = (m, key, index, L_C, flags)`` (from :func:`launch_reduce_candidates`)
    into the state; ``best``, ``key``, ``index`` are updated in place, the new ``(logmass, flags)``
    returned."""
    cm, ck, ci, lc, cflags = cand
    B, S = cm.shape
    P = B * S
    l_out = torch.empty_like(logmass)
    f_out = torch.empty_like(flags)
    block_p, _ = _blocks(P, 1)
    direct(online_merge_kernel)[(cdiv(P, block_p),)](
        cm, ck, ci, lc, cflags, inv_temp, logmass, flags, best, key, index, l_out, f_out, P, S, start,
        seed_lo, seed_hi, BLOCK_SIZE_P=block_p, STREAM=STREAM_ONLINE, N_ROUNDS=PHILOX_ROUNDS,
    )  # fmt: skip
    return l_out, f_out
