"""Combine steps of the grouped variants: stream noise for group choices and coins, lexicographic max.

Stream noise
------------
The grouped, online and tensor-parallel variants need, besides the token noise of stage 1, one
random variate per (group, row, sample): the Gumbel noise that picks a group (``STREAM_GROUP``) or
the exponential variate behind an online merge coin (``STREAM_ONLINE``).  They come from the same
Philox generator as the token noise, with the counter::

    (group_id, row, sample, stream)          group_id = the group's first global vocabulary index

so they are independent of the token noise (stream 0) by construction, and reproducible from the
seed alone: every tensor-parallel rank computes the same values without communication.  The kernel
is one flat loop over the ``B * S * K`` counters::

    for f in range(B * S * K):                # BLOCK_SIZE per program
        k = f % K ; s = (f // K) % S ; b = f // (K * S)
        (w0, w1, w2, _) = philox(ids[k], b, s, stream)
        E[f] = -log(U(w0, w1)) ; G[f] = -log(E[f]) ; key[f] = w2

with ``E`` and ``G`` computed by the very float32 operations of :func:`flashsampling.noise.token_noise`,
so :func:`flashsampling.noise.token_noise_np` (``G``, key) and ``exponential_from_bits_np`` (``E``)
are its NumPy twin.  Bytes: ``K * 8`` read, ``B * S * K * 16`` written; no FLOPs worth counting.

Group combine
-------------
:func:`launch_combine_groups` is the whole combine of the grouped variants in one launch: each
program takes ``BLOCK_SIZE_P`` (row, sample) pairs and walks the ``K`` groups in blocks of
``BLOCK_SIZE_K``; per pair::

    for k in range(K):
        G'    = -log(E(philox(ids[k], row, sample, STREAM_GROUP)))           float32, as token noise
        score = z_best[k]            if greedy row    else   L[k] + G'         float64
        key   = key_best[k]          if greedy row    else   w2(...)
        keep the lexicographic max of (score, key), its local index and position k
    flags = OR of the groups' stage-1 flags, plus FLAG_NO_FINITE when every L[k] is -inf

Bytes: ``B * K * 12 + B * S * K * 20`` read, ``B * S * 20`` written.

Lexicographic max
-----------------
:func:`lexmax` keeps, along one axis, the candidate with the largest ``(score, key)`` pair: the same
rule as inside a stage-1 tile and in stage 2 (:mod:`.reduce`), so reducing candidates in any
grouping (tiles, shards, ranks) gives the same winner as one flat argmax (the lexicographic max is
associative).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._device import INTERPRET
from ..noise import STREAM_GROUP, exponential_from_bits, philox4x32

#: Flat counters per program; the interpreter prefers few large programs, the GPU does not care
#: (the kernel writes B*S*K*16 bytes, a few KiB per decoding step).
STREAM_BLOCK = 1024


# Seeds, the stream tag and the sizes are data: never let Triton specialize them (a seed word or
# stream equal to 1 would become a constexpr, and every new B*S*K would compile a new variant).
@triton.jit(do_not_specialize=["B", "S", "K", "seed_lo", "seed_hi", "stream"])
def stream_noise_kernel(
    ids_ptr,
    g_ptr,
    e_ptr,
    key_ptr,
    B,
    S,
    K,
    seed_lo,
    seed_hi,
    stream,
    BLOCK_SIZE: tl.constexpr,
    N_ROUNDS: tl.constexpr,
):
    """``ids [K]`` -> ``G, E, key [B, S, K]`` for the Philox counter ``(ids[k], b, s, stream)``."""
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    ok = offs < B * S * K
    k = offs % K
    bs = offs // K
    s = bs % S
    b = bs // S
    gid = tl.load(ids_ptr + k, mask=ok, other=0)
    zeros = tl.zeros([BLOCK_SIZE], dtype=tl.int32)
    c_stream = (zeros + stream).to(tl.uint32)
    k0 = seed_lo.to(tl.uint32)
    k1 = seed_hi.to(tl.uint32)
    w0, w1, w2, w3 = philox4x32(gid.to(tl.uint32), b.to(tl.uint32), s.to(tl.uint32), c_stream, k0, k1, N_ROUNDS)
    e = exponential_from_bits(w0, w1)
    g = -tl.log(e)
    tl.store(g_ptr + offs, g, mask=ok)
    tl.store(e_ptr + offs, e, mask=ok)
    tl.store(key_ptr + offs, w2.to(tl.int64), mask=ok)


def launch_stream_noise(
    ids: torch.Tensor, B: int, S: int, seed_lo: int, seed_hi: int, stream: int, *, n_rounds: int = 10
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gumbel ``G``, exponential ``E`` (float32) and tie-break key (int64), each ``[B, S, K]``.

    ``ids`` is an int64 tensor ``[K]`` of group ids (each in ``[0, 2**32)``) on the device the noise
    is wanted on; entry ``[b, s, k]`` is keyed by the counter ``(ids[k], b, s, stream)``.
    """
    K = ids.shape[0]
    device = ids.device
    g = torch.empty((B, S, K), dtype=torch.float32, device=device)
    e = torch.empty((B, S, K), dtype=torch.float32, device=device)
    key = torch.empty((B, S, K), dtype=torch.int64, device=device)
    total = B * S * K
    if total == 0:
        return g, e, key
    grid = (triton.cdiv(total, STREAM_BLOCK),)
    stream_noise_kernel[grid](
        ids.contiguous(), g, e, key, B, S, K, seed_lo, seed_hi, stream, BLOCK_SIZE=STREAM_BLOCK, N_ROUNDS=n_rounds
    )
    return g, e, key


# Sizes and seeds are data (see stream_noise_kernel).
@triton.jit(do_not_specialize=["P", "S", "K", "seed_lo", "seed_hi"])
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
    seed_lo,
    seed_hi,
    BLOCK_SIZE_P: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    STREAM: tl.constexpr,
    N_ROUNDS: tl.constexpr,
):
    """``L [B, K]``, candidates ``[B, S, K]`` -> ``[B, S]``: lexmax_k (L_k + G'_k, key'_k), its local index.

    Each program takes ``BLOCK_SIZE_P`` flat (row, sample) pairs ``p = row * S + sample``.
    """
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
    run_f = tl.zeros([BLOCK_SIZE_P], tl.int32)
    run_l = tl.full([BLOCK_SIZE_P], float("-inf"), tl.float64)
    for g0 in range(0, K, BLOCK_SIZE_K):
        k = g0 + offs
        ok = p_ok[:, None] & (k < K)[None, :]
        rk = row[:, None] * K + k[None, :]
        pk = p[:, None] * K + k[None, :]
        lm = tl.load(logmass_ptr + rk, mask=ok, other=float("-inf")).to(tl.float64)
        m = tl.load(best_ptr + pk, mask=ok, other=float("-inf")).to(tl.float64)
        key = tl.load(key_ptr + pk, mask=ok, other=-4)
        idx = tl.load(idx_ptr + pk, mask=ok, other=0)
        f = tl.load(flag_ptr + rk, mask=ok, other=0)
        gid = tl.load(ids_ptr + k, mask=k < K, other=0)
        c_gid = zeros + gid.to(tl.uint32)[None, :]
        w0, w1, w2, w3 = philox4x32(c_gid, c_row, c_smp, c_str, k0, k1, N_ROUNDS)
        g = -tl.log(exponential_from_bits(w0, w1))
        score = tl.where(greedy[:, None], m, lm + g.to(tl.float64))
        kk = tl.where(greedy[:, None], key, w2.to(tl.int64))
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
        run_f = run_f | tl.max(tl.where((f & 1) != 0, 1, 0), axis=1) | tl.max(tl.where((f & 2) != 0, 2, 0), axis=1)
        run_l = tl.maximum(run_l, tl.max(lm, axis=1))
    run_f = run_f | tl.where(run_l == float("-inf"), 4, 0)
    tl.store(token_ptr + p, run_i, mask=p_ok)
    tl.store(choice_ptr + p, run_j, mask=p_ok)
    tl.store(row_flag_ptr + p, run_f, mask=p_ok)


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
    n_rounds: int = 10,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Launch :func:`combine_groups_kernel`.

    ``logmass [B, K]`` (float32 or float64), ``best [B, S, K]`` float32, ``key``/``index [B, S, K]``
    int64, ``ids [K]`` int64, ``flags [B, K]`` int32, ``inv_temp [B]`` float32 (0 = greedy).
    Returns ``(tokens int64 [B, S], choice int64 [B, S], flags int32 [B, S])``.
    """
    B, S, K = best.shape
    P = B * S
    device = best.device
    tokens = torch.empty((B, S), dtype=torch.int64, device=device)
    choice = torch.empty((B, S), dtype=torch.int64, device=device)
    row_flags = torch.empty((B, S), dtype=torch.int32, device=device)
    # Groups per step: 256 at most keeps one program's registers small on the GPU.
    block_k = min(triton.next_power_of_2(max(K, 1)), 256)
    # (row, sample) pairs per program: the interpreter's cost is per program, so it takes a
    # 64k-element tile; on the GPU 2048 elements (16 per thread at 4 warps) leave room for Philox.
    budget = 1 << 16 if INTERPRET else 1 << 11
    block_p = min(triton.next_power_of_2(P), max(1, budget // block_k))
    combine_groups_kernel[(triton.cdiv(P, block_p),)](
        logmass.contiguous(), best.contiguous(), key.contiguous(), index.contiguous(), ids.contiguous(),
        flags.contiguous(), inv_temp.contiguous(), tokens, choice, row_flags, P, S, K, seed_lo, seed_hi,
        BLOCK_SIZE_P=block_p, BLOCK_SIZE_K=block_k, STREAM=STREAM_GROUP, N_ROUNDS=n_rounds,
    )  # fmt: skip
    return tokens, choice, row_flags


def lexmax(
    score: torch.Tensor, key: torch.Tensor, index: torch.Tensor, dim: int = -1
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Along ``dim``, the entry with the largest ``(score, key)`` pair.

    ``score`` is a float tensor, ``key`` int64 (uint32 values, ``-2`` or less for "no candidate"),
    ``index`` int64, all of one shape.  Returns ``(score, key, index, position)`` of the winners
    with ``dim`` removed.  A NaN score never wins unless every score is NaN (then position 0).
    """
    m = score.amax(dim=dim, keepdim=True)
    kk = torch.where(score == m, key, torch.full_like(key, -3))
    j = kk.argmax(dim=dim, keepdim=True)
    return (
        m.squeeze(dim),
        kk.gather(dim, j).squeeze(dim),
        index.gather(dim, j).squeeze(dim),
        j.squeeze(dim),
    )
