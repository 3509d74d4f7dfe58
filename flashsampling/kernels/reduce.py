"""Stage 2: reduce the per-tile candidates of stage 1 to one token per (row, sample).

One program per (row, sample) reads its ``T`` candidates ``(m_t, key_t, idx_t)`` and keeps the
lexicographic maximum of ``(m, key)`` -- the global argmax of the perturbed scores, because the
argmax over the whole vocabulary is the argmax over the tile maxima (argmax decomposition,
``proofs/argmax_decomposition.md``), with exact float32 ties broken by the random key exactly as
inside a tile.  It also ORs the row's stage-1 flags and adds ``FLAG_NO_FINITE`` when every score is
``-inf``.  The token is clamped into ``[0, V)`` so that, even with host checks off, no index is ever
out of range.

Bytes: ``B * S * T * 20`` read, ``B * S * 12`` written (``T = ceil(V / BLOCK_SIZE_V)``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._device import INTERPRET
from .launch import direct, next_power_of_2


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
        run_f = run_f | tl.max(tl.where((f & 1) != 0, 1, 0), axis=0) | tl.max(tl.where((f & 2) != 0, 2, 0), axis=0)
        cm = tl.max(m, axis=0)
        kk = tl.where(ok & (m == cm), k, -2)
        ck = tl.max(kk, axis=0)
        j = tl.argmax(kk, axis=0)
        ci = tl.sum(tl.where(offs == j, i, 0), axis=0)
        better = (cm > run_m) | ((cm == run_m) & (ck > run_k))
        run_m = tl.where(better, cm, run_m)
        run_k = tl.where(better, ck, run_k)
        run_i = tl.where(better, ci, run_i)
    run_f = run_f | tl.where(run_m == float("-inf"), 4, 0)
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
    row = ((flags & 1) != 0).any(dim=-1).to(torch.int32) | (((flags & 2) != 0).any(dim=-1).to(torch.int32) * 2)
    row_flags = row[:, None] | torch.where(m.squeeze(-1) == float("-inf"), 4, 0).to(torch.int32)
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
