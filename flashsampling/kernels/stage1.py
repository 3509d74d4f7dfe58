"""Stage 1 of the fused sampler: LM-head matmul tile + temperature + Gumbel noise + per-tile max; and the
dispatcher that runs it on the fastest kernel the inputs allow.

Kernels
-------
* :func:`fused_stage1_kernel` (here): one program per ``block_b x block_v`` tile of ``h @ W.T``;
* :func:`~flashsampling.kernels.persistent.fused_persistent_kernel`: the same tiles walked by one program per SM,
  the inputs read by TMA (``TileConfig.persistent``);
* :func:`~flashsampling.kernels.pingpong.fused_pingpong_kernel`: the warp-specialized Gluon kernel on sm_90, one
  sample and no log-masses (``TileConfig.warp_specialized``);
* :func:`logits_stage1_kernel` (here): the same epilogue on logits a caller already has.

:func:`launch_fused_stage1` picks among the first three (:func:`stage1_kernel_kind`); the Triton kernels share
their epilogue (:mod:`.epilogue`), and all of them write the candidates that stage 2 (:mod:`.stage2`) reduces.

Tiling
------
The grid is 1-D over ``num_b_tiles * num_v_tiles`` programs, row tile fastest, so the programs
that read the same weight tile run next to each other and share it through L2::

    pid_b = pid % num_b_tiles ; pid_v = pid // num_b_tiles
    for k in range(0, D, BLOCK_SIZE_D):                       # K loop, fp32 accumulator
        h_tile = h[rows, k:k+BK]          at h_ptr + row * stride_hb + k * stride_hd
        w_tile = W[cols, k:k+BK].T        at w_ptr + col * stride_wv + k * stride_wd
        acc   += h_tile @ w_tile                               # (BB, BK) @ (BK, BV)
    tile_epilogue(acc, ...)                                    # kernels/epilogue.py

With ``TileConfig.epilogue_v`` set (the default for B > 64) the accumulator is stored to a
per-program scratch slot (it stays in L2) and the epilogue reloads it in ``epilogue_v``-wide
column chunks, each its own candidate for stage 2.  This lets the matmul use a wide tile (128 x 256:
every program re-reads its rows of ``h`` from L2, ``B*V*D*2*(1/block_v + 1/block_b)`` bytes in all)
without a register-hungry epilogue; it costs ``B*V*4`` bytes of scratch here (one slot per tile),
``SMs*block_b*block_v*4`` in the persistent kernel (one slot per program).

With ``TileConfig.persistent`` (the default for B > 64) the same tiles and the same epilogue run in
the persistent TMA kernel of :mod:`.persistent` (one program per SM walking the tiles; identical
candidates), where the inputs allow TMA.

Offsets.  Row and column offsets are formed in int64 (``rows.to(int64) * stride``), so none overflows 32 bits at
large ``B * D`` or ``V * D``.  The K loop's ``ks * stride`` (``ks < cdiv(D, BLOCK_SIZE_D) * BLOCK_SIZE_D``) is int32
where it provably fits, as in the row-major inputs of every model (``stride_hd = stride_wd = 1``), and int64
otherwise (``WIDE_K``, :func:`wide_k_offsets`: e.g. a column-major weight with ``V * D >= 2**31``): the shipped
specializations keep their 32-bit address arithmetic, and no layout can wrap.

Bytes and FLOPs
---------------
Fused: reads ``V*D*2`` bytes of bf16 weight (once when ``B <= BLOCK_SIZE_B``) and ``B*D*2`` of
hidden state, writes ``B*S*T*20`` bytes of candidates (``T = V / BLOCK_SIZE_V``); ``2*B*V*D``
FLOPs.  Unfused ``matmul -> softmax -> multinomial`` additionally writes and re-reads the
``B*V*4``-byte logits at least twice (softmax in and out, then the CDF scan).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._device import UPCAST_DOT, device_function, interpreter_float32
from .epilogue import device_seed_words, epilogue_constants, perturb_select_store, row_seed_words, tile_epilogue
from .hardware import tma_compatible
from .launch import cdiv, direct
from .persistent import launch_persistent
from .pingpong import launch_pingpong
from .tiles import TileConfig, warp_specialized_supported

#: What :func:`stage1_kernel_kind` returns: the Gluon kernel, the persistent TMA kernel, one program per tile.
KERNEL_KINDS = ("gluon", "persistent", "tiled")


@device_function
def tile_logits(
    h_ptr, w_ptr, rows64, cols64, row_ok, col_ok, D, stride_hb, stride_hd, stride_wv, stride_wd,
    WIDE_K: tl.constexpr, BLOCK_SIZE_B: tl.constexpr, BLOCK_SIZE_V: tl.constexpr, BLOCK_SIZE_D: tl.constexpr,
    UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr,
):  # fmt: skip
    """The fp32 logits of one tile, ``z[r, c] = sum_k h[rows[r], k] * w[cols[c], k]`` (rows and columns outside the
    masks are 0), accumulated over ``BLOCK_SIZE_D``-wide slices of ``D``; with ``WIDE_K`` the K offsets
    ``ks * stride`` are formed in int64 (:func:`wide_k_offsets`); ``UPCAST`` converts the inputs to fp32 before the
    dot (:func:`upcast_inputs`).  The K loop of :func:`fused_stage1_kernel` and of the top-k matmul kernel."""
    acc = tl.zeros([BLOCK_SIZE_B, BLOCK_SIZE_V], dtype=tl.float32)
    for k in range(0, D, BLOCK_SIZE_D):
        ks = k + tl.arange(0, BLOCK_SIZE_D)
        k_ok = ks < D
        if WIDE_K:
            ks_off = ks.to(tl.int64)  # some ks * stride reaches 2**31 (wide_k_offsets)
        else:
            ks_off = ks
        h = tl.load(
            h_ptr + rows64[:, None] * stride_hb + ks_off[None, :] * stride_hd,
            mask=row_ok[:, None] & k_ok[None, :],
            other=0.0,
        )
        w = tl.load(
            w_ptr + cols64[None, :] * stride_wv + ks_off[:, None] * stride_wd,
            mask=k_ok[:, None] & col_ok[None, :],
            other=0.0,
        )
        if UPCAST:
            h = h.to(tl.float32)
            w = w.to(tl.float32)
        acc = tl.dot(h, w, acc, input_precision=INPUT_PRECISION)
    return acc


@triton.jit(do_not_specialize=["seed_lo", "seed_hi", "col_offset", "num_samples"])
def fused_stage1_kernel(
    h_ptr,
    w_ptr,
    inv_temp_ptr,
    part_max_ptr,
    part_key_ptr,
    part_idx_ptr,
    flag_ptr,
    lse_ptr,
    scratch_ptr,
    B,
    V,
    D,
    col_offset,
    num_samples,
    seed_lo,
    seed_hi,
    stride_hb,
    stride_hd,
    stride_wv,
    stride_wd,
    WIDE_K: tl.constexpr,
    BLOCK_SIZE_B: tl.constexpr,
    BLOCK_SIZE_V: tl.constexpr,
    BLOCK_SIZE_D: tl.constexpr,
    UPCAST: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    N_ROUNDS: tl.constexpr,
    RETURN_LSE: tl.constexpr,
    PAIRED: tl.constexpr,
    NOISE: tl.constexpr,
    EPILOGUE_V: tl.constexpr,
    SEED_PTR: tl.constexpr = False,
    ROW_SEEDS: tl.constexpr = False,
):
    """``(B,D) @ (D,V) -> per tile argmax_V(z * (1/T) + G)`` with ``z`` accumulated in fp32.  ``SEED_PTR``:
    ``seed_lo`` points to the int64 seed (a device seed, :func:`~.epilogue.device_seed_words`); ``ROW_SEEDS``: to
    ``B`` int64 per-request seeds (:func:`~.epilogue.row_seed_words`)."""
    if SEED_PTR:
        seed_lo, seed_hi = device_seed_words(seed_lo)
    pid = tl.program_id(0)
    num_b_tiles = tl.cdiv(B, BLOCK_SIZE_B)
    num_v_tiles = tl.cdiv(V, BLOCK_SIZE_V)
    pid_b = pid % num_b_tiles
    pid_v = pid // num_b_tiles
    rows = pid_b * BLOCK_SIZE_B + tl.arange(0, BLOCK_SIZE_B)
    cols = pid_v * BLOCK_SIZE_V + tl.arange(0, BLOCK_SIZE_V)
    row_ok = rows < B
    col_ok = cols < V
    rows64 = rows.to(tl.int64)
    cols64 = cols.to(tl.int64)
    acc = tile_logits(
        h_ptr, w_ptr, rows64, cols64, row_ok, col_ok, D, stride_hb, stride_hd, stride_wv, stride_wd,
        WIDE_K, BLOCK_SIZE_B, BLOCK_SIZE_V, BLOCK_SIZE_D, UPCAST, INPUT_PRECISION,
    )  # fmt: skip
    tile_epilogue(
        acc, pid, pid_b, pid_v, num_v_tiles, B, V, col_offset, num_samples, seed_lo, seed_hi, inv_temp_ptr,
        part_max_ptr, part_key_ptr, part_idx_ptr, flag_ptr, lse_ptr, scratch_ptr,
        BLOCK_SIZE_B, BLOCK_SIZE_V, N_ROUNDS, RETURN_LSE, PAIRED, NOISE, EPILOGUE_V, ROW_SEEDS,
    )  # fmt: skip


@triton.jit(do_not_specialize=["seed_lo", "seed_hi", "col_offset", "num_samples"])
def logits_stage1_kernel(
    z_ptr,
    inv_temp_ptr,
    part_max_ptr,
    part_key_ptr,
    part_idx_ptr,
    flag_ptr,
    lse_ptr,
    B,
    V,
    col_offset,
    num_samples,
    seed_lo,
    seed_hi,
    stride_zb,
    stride_zv,
    BLOCK_SIZE_B: tl.constexpr,
    BLOCK_SIZE_V: tl.constexpr,
    N_ROUNDS: tl.constexpr,
    RETURN_LSE: tl.constexpr,
    PAIRED: tl.constexpr,
    NOISE: tl.constexpr,
    SEED_PTR: tl.constexpr = False,
    ROW_SEEDS: tl.constexpr = False,
):
    """``(B,V)`` logits -> per tile argmax_V(z * (1/T) + G); ``-inf`` logits are masked tokens.  ``SEED_PTR`` and
    ``ROW_SEEDS`` as in :func:`fused_stage1_kernel`."""
    if SEED_PTR:
        seed_lo, seed_hi = device_seed_words(seed_lo)
    pid = tl.program_id(0)
    num_b_tiles = tl.cdiv(B, BLOCK_SIZE_B)
    num_v_tiles = tl.cdiv(V, BLOCK_SIZE_V)
    pid_b = pid % num_b_tiles
    pid_v = pid // num_b_tiles
    rows = pid_b * BLOCK_SIZE_B + tl.arange(0, BLOCK_SIZE_B)
    cols = pid_v * BLOCK_SIZE_V + tl.arange(0, BLOCK_SIZE_V)
    row_ok = rows < B
    col_ok = cols < V
    rows64 = rows.to(tl.int64)
    cols64 = cols.to(tl.int64)
    z = tl.load(
        z_ptr + rows64[:, None] * stride_zb + cols64[None, :] * stride_zv,
        mask=row_ok[:, None] & col_ok[None, :],
        other=float("-inf"),
    ).to(tl.float32)
    inv_temp = tl.load(inv_temp_ptr + rows64, mask=row_ok, other=1.0)
    if ROW_SEEDS:
        seed_lo, seed_hi = row_seed_words(seed_lo, rows64, row_ok)
    perturb_select_store(
        z,
        rows,
        cols,
        col_offset,
        row_ok,
        col_ok,
        inv_temp,
        seed_lo.to(tl.uint32),
        seed_hi.to(tl.uint32),
        num_samples,
        pid_v,
        num_v_tiles,
        part_max_ptr,
        part_key_ptr,
        part_idx_ptr,
        flag_ptr,
        lse_ptr,
        BLOCK_SIZE_B,
        BLOCK_SIZE_V,
        True,
        N_ROUNDS,
        RETURN_LSE,
        PAIRED,
        NOISE,
        ROW_SEEDS,
    )


def seed_constants(seed_lo) -> dict:
    """The stage-1 kernels' seed mode for ``seed_lo``: an int (no constant), a 0-dim int64 tensor (``SEED_PTR``, a
    device seed) or a ``[B]`` int64 tensor (``ROW_SEEDS``, per-request seeds), both loaded by the kernel."""
    if not isinstance(seed_lo, torch.Tensor):
        return {}
    return {"ROW_SEEDS": True} if seed_lo.dim() == 1 else {"SEED_PTR": True}


def allocate_partials(B: int, S: int, T: int, device, return_lse: bool = False) -> tuple[torch.Tensor, ...]:
    """Candidate buffers ``[B, S, T]`` (max fp32, key int64, global index int64), flags ``[B, T]``
    and, with ``return_lse``, the tiles' log-masses ``[B, T]`` fp32 (else a 1-element dummy)."""
    return (
        torch.empty((B, S, T), dtype=torch.float32, device=device),
        torch.empty((B, S, T), dtype=torch.int64, device=device),
        torch.empty((B, S, T), dtype=torch.int64, device=device),
        torch.empty((B, T), dtype=torch.int32, device=device),
        torch.empty((B, T) if return_lse else (1,), dtype=torch.float32, device=device),
    )


def stage1_kernel_kind(hidden, weight, num_samples: int, tiles: TileConfig, *, col_offset: int = 0,
                       return_lse: bool = False, device_seed: bool = False) -> str:  # fmt: skip
    """Which kernel :func:`launch_fused_stage1` runs (a key of :data:`KERNEL_KINDS`): the Gluon kernel for
    ``tiles.warp_specialized`` where it can run (one sample, no log-masses, a host seed,
    :func:`warp_specialized_supported`), the persistent kernel for ``tiles.persistent`` where TMA can read the
    inputs, else one program per tile."""
    if tiles.warp_specialized and num_samples == 1 and not return_lse and not device_seed:
        if warp_specialized_supported(hidden, weight, col_offset):
            return "gluon"
    if tiles.persistent and tma_compatible(hidden, weight):
        return "persistent"
    return "tiled"


def num_candidates(V: int, tiles: TileConfig, kind: str) -> int:
    """Candidates per (row, sample) that stage 1 writes: one per ``block_v`` tile from the Gluon kernel, one per
    ``candidate_v`` columns from the Triton kernels."""
    return cdiv(V, tiles.block_v if kind == "gluon" else tiles.candidate_v)


def upcast_inputs(hidden, weight) -> bool:
    """Whether the Triton kernels convert the inputs to fp32 before the dot: in the interpreter (its bf16 dot is
    wrong, :data:`~flashsampling._device.UPCAST_DOT`) and for fp32 inputs (an IEEE fp32 dot, not tf32)."""
    return UPCAST_DOT or hidden.dtype == torch.float32 or weight.dtype == torch.float32


#: Offsets at or above this wrap in int32.
INT32_LIMIT = 2**31


def wide_k_offsets(hidden, weight, block_d: int) -> bool:
    """Whether :func:`fused_stage1_kernel`'s K-loop offsets ``ks * stride_hd`` or ``ks * stride_wd`` can reach
    ``2**31`` (``ks`` runs to ``cdiv(D, block_d) * block_d - 1``, masked lanes included), so that the kernel must
    form them in int64 (``WIDE_K``)."""
    last_k = cdiv(hidden.shape[1], block_d) * block_d - 1
    return last_k * max(hidden.stride(1), weight.stride(1)) >= INT32_LIMIT


def tiled_arguments(hidden, weight, inv_temp, parts, seed_lo, seed_hi, num_samples, tiles: TileConfig,
                    col_offset: int) -> tuple[tuple, tuple]:  # fmt: skip
    """``(grid, args)`` of :func:`fused_stage1_kernel` writing into the candidate buffers ``parts`` (the arguments up
    to ``WIDE_K``, :func:`wide_k_offsets`); allocates the staged epilogue's scratch (one fp32 tile per program:
    ``B_pad * V_pad * 4`` bytes) when ``tiles.epilogue_v``."""
    B, D = hidden.shape
    V = weight.shape[0]
    grid = (cdiv(B, tiles.block_b) * cdiv(V, tiles.block_v),)
    scratch_numel = grid[0] * tiles.block_b * tiles.block_v if tiles.epilogue_v else 1
    scratch = torch.empty(scratch_numel, dtype=torch.float32, device=hidden.device)
    args = (hidden, weight, inv_temp, *parts, scratch, B, V, D, col_offset, num_samples, seed_lo, seed_hi,
            hidden.stride(0), hidden.stride(1), weight.stride(0), weight.stride(1),
            wide_k_offsets(hidden, weight, tiles.block_d))  # fmt: skip
    return grid, args


def launch_fused_stage1(
    hidden, weight, inv_temp, seed_lo, seed_hi, num_samples, tiles: TileConfig, *, col_offset: int = 0,
    return_lse: bool = False, noise: bool = True,
):  # fmt: skip
    """Allocate the buffers and launch stage 1 on ``hidden [B, D]`` and ``weight [V, D]``, on the kernel that
    :func:`stage1_kernel_kind` names.

    ``weight`` row ``v`` is global vocabulary index ``col_offset + v`` (a shard of a larger vocabulary).  Returns
    ``(part_max, part_key, part_idx, flags, lse)`` (see :func:`allocate_partials`).  ``noise=False`` skips the noise
    (a call whose rows are all greedy: a greedy row's score is ``z`` either way, so the tokens are the same).
    ``seed_lo`` may be a 0-dim int64 tensor on the device, or a ``[B]`` one of per-request seeds (then ``seed_hi`` is
    ignored): the Triton kernels load it (:func:`seed_constants`).
    """
    hidden, weight = interpreter_float32(hidden), interpreter_float32(weight)
    V = weight.shape[0]
    device_seed = isinstance(seed_lo, torch.Tensor)
    kind = stage1_kernel_kind(hidden, weight, num_samples, tiles, col_offset=col_offset, return_lse=return_lse,
                              device_seed=device_seed)  # fmt: skip
    parts = allocate_partials(hidden.shape[0], num_samples, num_candidates(V, tiles, kind), hidden.device, return_lse)
    upcast = upcast_inputs(hidden, weight)
    if kind == "gluon":
        launch_pingpong(hidden, weight, inv_temp, parts, seed_lo, seed_hi, tiles, col_offset=col_offset, noise=noise)
    elif kind == "persistent":
        launch_persistent(
            hidden, weight, inv_temp, parts, seed_lo, seed_hi, num_samples, tiles, col_offset=col_offset,
            return_lse=return_lse, noise=noise, upcast=upcast,
        )  # fmt: skip
    else:
        grid, args = tiled_arguments(hidden, weight, inv_temp, parts, seed_lo, seed_hi, num_samples, tiles, col_offset)
        consts = epilogue_constants(return_lse=return_lse, noise=noise, col_offset=col_offset)
        direct(fused_stage1_kernel)[grid](
            *args, **tiles.matmul_constants(upcast), **consts, EPILOGUE_V=tiles.epilogue_v, **seed_constants(seed_lo),
            **tiles.launch_options(),
        )  # fmt: skip
    return parts


def launch_logits_stage1(
    logits, inv_temp, seed_lo, seed_hi, num_samples, block_b: int, block_v: int, *,
    col_offset: int = 0, return_lse: bool = False, noise: bool = True,
):  # fmt: skip
    """Allocate the buffers and launch stage 1 on ``logits [B, V]`` (column ``v`` = global index
    ``col_offset + v``).  Returns ``(part_max, part_key, part_idx, flags, lse)``.  ``seed_lo`` may be a device
    seed, as in :func:`launch_fused_stage1`."""
    logits = interpreter_float32(logits)
    B, V = logits.shape
    T = cdiv(V, block_v)
    parts = allocate_partials(B, num_samples, T, logits.device, return_lse)
    grid = (cdiv(B, block_b) * T,)
    direct(logits_stage1_kernel)[grid](
        logits, inv_temp, *parts,
        B, V, col_offset, num_samples, seed_lo, seed_hi,
        logits.stride(0), logits.stride(1),
        BLOCK_SIZE_B=block_b, BLOCK_SIZE_V=block_v,
        **epilogue_constants(return_lse=return_lse, noise=noise, col_offset=col_offset),
        **seed_constants(seed_lo),
    )  # fmt: skip
    return parts
