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

from ..noise import exponential_from_bits, philox4x32

#: Flat counters per program; the interpreter prefers few large programs, the GPU does not care
#: (the kernel writes B*S*K*16 bytes, a few KiB per decoding step).
STREAM_BLOCK = 1024


@triton.jit
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
    w0, w1, w2, w3 = philox4x32(
        gid.to(tl.uint32), b.to(tl.uint32), s.to(tl.uint32), c_stream, seed_lo.to(tl.uint32), seed_hi.to(tl.uint32), N_ROUNDS
    )
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
