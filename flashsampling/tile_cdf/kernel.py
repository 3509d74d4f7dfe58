"""The tile inverse-CDF stream's Triton kernels: the 128 x 64-bit ``mulhi`` (also compiled into the Gluon draw,
:mod:`flashsampling.tile_cdf.fused`) and stage 1 on given logits (the prototype of proofs/tile_inverse_cdf.md).

Per row and vocabulary tile of ``BLOCK_V`` columns: the scores ``s = fl(z * (1/T))``, the tile's maximum ``m``, the
integer weights ``q = tile_weight(s, m)`` (:mod:`flashsampling.tile_cdf.weights`), their uint64 sum ``Q``, the 128-bit
uniform ``U`` of the Philox block ``(tile_start, row, sample 0, STREAM_TILE)`` (``U = w0 + w1 2**32 + w2 2**64 +
w3 2**96``), ``t = floor(U Q / 2**128)`` and the local draw: the first column whose cumulative weight exceeds
``t``, i.e. the number of columns whose cumulative weight is at most ``t``.  Outputs ``m`` (float32), ``Q`` (uint64)
and the draw as a global column (int64) per ``[row, tile]``; the tile is then chosen by Gumbel-max over
``L = m + ln Q - 55 ln 2`` (:func:`flashsampling.tile_cdf.twin.draw_tiles_np`).  Rows need ``T > 0``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._device import interpreter_float32
from ..kernels.launch import cdiv, direct
from ..noise import PHILOX_ROUNDS, STREAM_TILE, philox4x32
from .weights import tile_weight

_STREAM = tl.constexpr(STREAM_TILE)


@triton.jit
def mulhi_u128_u64(u0, u1, u2, u3, q):
    """``floor(U * q / 2**128)`` for ``U = u0 + u1 2**32 + u2 2**64 + u3 2**96`` (uint32 words) and uint64 ``q``:
    schoolbook multiplication on 32-bit limbs.  Column ``k`` sums the low halves of the products ``u_i q_j`` with
    ``i + j = k``, the high halves of those with ``i + j = k - 1`` and the carry: at most five terms below
    ``2**32``, so uint64 never overflows.  The result is columns 4 and 5."""
    lo32 = 0xFFFFFFFF
    q0 = q & lo32
    q1 = q >> 32
    a0 = u0.to(tl.uint64)
    a1 = u1.to(tl.uint64)
    a2 = u2.to(tl.uint64)
    a3 = u3.to(tl.uint64)
    p00 = a0 * q0
    p01 = a0 * q1
    p10 = a1 * q0
    p11 = a1 * q1
    p20 = a2 * q0
    p21 = a2 * q1
    p30 = a3 * q0
    p31 = a3 * q1
    c = ((p01 & lo32) + (p10 & lo32) + (p00 >> 32)) >> 32  # column 1 (column 0 never carries)
    c = ((p11 & lo32) + (p20 & lo32) + (p01 >> 32) + (p10 >> 32) + c) >> 32  # column 2
    c = ((p21 & lo32) + (p30 & lo32) + (p11 >> 32) + (p20 >> 32) + c) >> 32  # column 3
    col4 = (p31 & lo32) + (p21 >> 32) + (p30 >> 32) + c
    col5 = (p31 >> 32) + (col4 >> 32)
    return (col5 << 32) | (col4 & lo32)


@triton.jit(do_not_specialize=["seed_lo", "seed_hi"])
def tile_cdf_stage1_kernel(
    logits_ptr, inv_temp_ptr, m_ptr, q_ptr, j_ptr, B, V, stride_b, seed_lo, seed_hi,
    BLOCK_B: tl.constexpr, BLOCK_V: tl.constexpr, N_ROUNDS: tl.constexpr,
):  # fmt: skip
    """One ``BLOCK_B x BLOCK_V`` tile: ``m``, ``Q`` and the local draw per row (module docstring)."""
    pid = tl.program_id(0)
    num_b = tl.cdiv(B, BLOCK_B)
    pid_b = pid % num_b
    pid_v = pid // num_b
    rows = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)
    cols = pid_v * BLOCK_V + tl.arange(0, BLOCK_V)
    row_ok = rows < B
    ok = row_ok[:, None] & (cols < V)[None, :]
    z = tl.load(logits_ptr + rows.to(tl.int64)[:, None] * stride_b + cols[None, :], mask=ok, other=float("-inf"))
    inv = tl.load(inv_temp_ptr + rows, mask=row_ok, other=1.0)
    s = z.to(tl.float32) * inv[:, None]
    m = tl.max(s, axis=1)
    q = tile_weight(s, tl.zeros_like(s) + m[:, None])
    cum = tl.cumsum(q, axis=1)
    total = tl.sum(q, axis=1)
    start = (pid_v * BLOCK_V).to(tl.uint32)
    zero = rows.to(tl.uint32) * 0
    w0, w1, w2, w3 = philox4x32(zero + start, rows.to(tl.uint32), zero, zero + _STREAM, seed_lo.to(tl.uint32),
                                seed_hi.to(tl.uint32), N_ROUNDS)  # fmt: skip
    t = mulhi_u128_u64(w0, w1, w2, w3, total)
    local = tl.sum((cum <= t[:, None]).to(tl.int32), axis=1)
    out = rows.to(tl.int64) * tl.cdiv(V, BLOCK_V) + pid_v
    tl.store(m_ptr + out, m, mask=row_ok)
    tl.store(q_ptr + out, total, mask=row_ok)
    tl.store(j_ptr + out, pid_v.to(tl.int64) * BLOCK_V + local, mask=row_ok)


def launch_tile_cdf_stage1(logits: torch.Tensor, inv_temp: torch.Tensor, seed_lo: int, seed_hi: int,
                           block_b: int = 4, block_v: int = 256):  # fmt: skip
    """``(m [B, K] float32, Q [B, K] uint64, draw [B, K] int64)`` for logits ``[B, V]`` (unit column stride) and
    per-row ``1/T > 0``; ``K = ceil(V / block_v)``, ``block_v <= 256`` (weights below ``2**63`` per tile)."""
    if block_v > 256:
        raise ValueError(f"block_v={block_v} must be <= 256: 2**55-scaled weights of a tile must sum below 2**63")
    logits = interpreter_float32(logits)  # the interpreter reads bfloat16 subnormals wrongly
    B, V = logits.shape
    K = cdiv(V, block_v)
    m = torch.empty((B, K), dtype=torch.float32, device=logits.device)
    q = torch.empty((B, K), dtype=torch.uint64, device=logits.device)
    j = torch.empty((B, K), dtype=torch.int64, device=logits.device)
    grid = (cdiv(B, block_b) * K,)
    direct(tile_cdf_stage1_kernel)[grid](logits, inv_temp, m, q, j, B, V, logits.stride(0), seed_lo, seed_hi,
                                 BLOCK_B=block_b, BLOCK_V=block_v, N_ROUNDS=PHILOX_ROUNDS)  # fmt: skip
    return m, q, j
