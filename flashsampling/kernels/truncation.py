"""Stage 1 of the fused truncated sampler (top-k, top-p, min-p): per row and vocabulary tile, the tile's first
``LIST`` tokens in the order (logit descending, index ascending) and, where top-p needs the row's whole mass, the
tile's mass; no noise.

Why lists suffice
-----------------
Every filter of :mod:`flashsampling.targets` keeps an *upper set* of the total order

    i before j   iff   z_i > z_j,  or  z_i == z_j and i < j          (``key(i)`` the position in that order)

(top-k with ``ties="low_index"``: the first ``k``; top-p: a head of tie groups; min-p: ``z_i >= m + t log p``, and so
does every composition), and the token is ``argmax_{i in K} z_i / T + G_i`` over the kept set ``K`` with the plain
sampler's noise.  If every tile whose list is full has its ``LIST``-th entry outside ``K``, every kept token is
listed (a token missing from its tile's list comes after that tile's last entry), so stage 2
(:mod:`.truncation_stage2`) can decide ``K`` and draw from the lists alone; it checks the condition row by row
(``proofs/truncation.md``) and sends a row that fails it to the exact fallback.

Kernels and tiling
------------------
* :func:`truncation_stage1_kernel`: one program per ``BLOCK_SIZE_B x BLOCK_SIZE_V`` tile of ``h @ W.T`` (the K loop
  :func:`~flashsampling.kernels.stage1.tile_logits` of the plain kernel), then :func:`list_epilogue`; with ``WRITE``
  the same program stores the tile's fp32 logits instead (the fallback's recomputation: the same code and tiles,
  hence the same bits).
* :func:`truncation_logits_stage1_kernel`: the same epilogue on given logits (``-inf`` masks a token).

:func:`list_epilogue` on a tile ``z [BLOCK_SIZE_B, BLOCK_SIZE_V]`` (fp32)::

    flags                      NaN / +inf / overflow, as the plain epilogue (:func:`~.epilogue.scores_and_flags`)
    for j in range(LIST):      (z_j, i_j) = the first remaining entry: a max-reduction with the lowest index on ties
                               (Triton's ``return_indices`` tie-break), then that column masked
    cand_z[row, tile * LIST + j] = z_j ;  cand_i[...] = col_offset + tile * BLOCK_SIZE_V + i_j    (-inf: no token)
    MASS:  mass[row, tile] = sum_i exp(-(m_t - z_i) / t)    float64 (:func:`~flashsampling.noise.exp_neg64`),
                               m_t the tile maximum, t the row's top-p scale (``T``, or 1 before the temperature)
    FULL:  the plain epilogue (:func:`~.epilogue.perturb_select_store`) for rows whose filters keep everything

Bytes and work
--------------
Stage 1 reads the weight once, as the plain sampler (``V*D*2`` bytes of bf16, ``2*B*V*D`` FLOPs), and writes
``B * T * LIST * 8`` bytes of lists (``T = ceil(V / BLOCK_SIZE_V)``; ``LIST / BLOCK_SIZE_V`` 8-byte entries per
logit: at 16 per 256 columns, 0.5 bytes per logit, an eighth of the fp32 logits) plus ``B * T * 8`` of masses with
``MASS``.  Per logit the epilogue does ``LIST`` masked max-reductions (about 5 operations each) and, with ``MASS``,
one float64 exponential, where the plain epilogue draws a Philox block per token pair and two logarithms per token.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._device import INTERPRET, device_function, interpreter_float32
from ..noise import PHILOX_ROUNDS, exp_neg64
from .epilogue import perturb_select_store, scores_and_flags
from .launch import cdiv, direct, next_power_of_2
from .stage1 import allocate_partials, tile_logits, upcast_inputs, wide_k_offsets
from .tiles import TileConfig

#: List lengths stage 1 is compiled for (:func:`list_length` picks one).
LIST_LENGTHS = (4, 8, 16, 32, 64)
#: ``EXPECTED_PER_TILE[M]``: the largest expected number of kept tokens per tile for which a list of ``M`` entries
#: misses a kept token of a given tile with probability at most ``1e-9``, were the kept tokens spread uniformly
#: (``P(Poisson(lambda) > M) <= 1e-9``; ``proofs/check_truncation.py`` recomputes them).
EXPECTED_PER_TILE = {4: 0.041, 8: 0.43, 16: 2.4, 32: 9.1, 64: 27.0}
#: The kept-set size assumed for top-p and min-p, whose size is not known before the logits are: the top-k cap.
ASSUMED_KEPT = 1024


def list_length(kept: int, block_v: int, V: int) -> int:
    """Entries per (row, tile) for a kept set of about ``kept`` tokens out of ``V`` on ``block_v``-wide tiles: the
    shortest of :data:`LIST_LENGTHS` whose :data:`EXPECTED_PER_TILE` covers ``kept * block_v / V`` (at most the tile
    width, at most 64)."""
    lam = kept * block_v / max(V, 1)
    for m in LIST_LENGTHS:
        if lam <= EXPECTED_PER_TILE[m] or m >= block_v:
            return min(m, next_power_of_2(block_v))
    return min(LIST_LENGTHS[-1], block_v)


# --------------------------------------------------------------------------------------------
# The epilogue
# --------------------------------------------------------------------------------------------


@device_function
def list_epilogue(
    z, rows, row_ok, col_ok, col_offset, inv_temp, mass_t, pid_v, num_v_tiles, seed_lo, seed_hi, num_samples,
    cand_z_ptr, cand_i_ptr, mass_ptr, flag_ptr, part_max_ptr, part_key_ptr, part_idx_ptr, lse_ptr,
    BLOCK_SIZE_B: tl.constexpr, BLOCK_SIZE_V: tl.constexpr, LIST: tl.constexpr, ALLOW_NEG_INF: tl.constexpr,
    MASS: tl.constexpr, FULL: tl.constexpr, N_ROUNDS: tl.constexpr, PAIRED: tl.constexpr, NOISE: tl.constexpr,
):  # fmt: skip
    """A ``[BLOCK_SIZE_B, BLOCK_SIZE_V]`` tile of fp32 logits -> its flags, its first ``LIST`` entries per row (and
    its float64 mass with ``MASS``; the plain sampler's candidates with ``FULL``)."""
    rows64 = rows.to(tl.int64)
    local = tl.arange(0, BLOCK_SIZE_V)
    if FULL:  # the plain epilogue (it stores the flags too), for the rows whose filters keep everything
        cols = pid_v * BLOCK_SIZE_V + local
        perturb_select_store(
            z, rows, cols, col_offset, row_ok, col_ok, inv_temp, seed_lo.to(tl.uint32), seed_hi.to(tl.uint32),
            num_samples, pid_v, num_v_tiles, part_max_ptr, part_key_ptr, part_idx_ptr, flag_ptr, lse_ptr,
            BLOCK_SIZE_B, BLOCK_SIZE_V, ALLOW_NEG_INF, N_ROUNDS, False, PAIRED, NOISE,
        )  # fmt: skip
    else:
        _, flag, _ = scores_and_flags(z, row_ok, col_ok, inv_temp, ALLOW_NEG_INF)
        tl.store(flag_ptr + rows64 * num_v_tiles + pid_v, flag, mask=row_ok)
    live = row_ok[:, None] & col_ok[None, :] & (z > float("-inf")) & (z == z)
    zs = tl.where(live, z, float("-inf"))
    slot = tl.arange(0, LIST)[None, :]
    tile_max = tl.max(zs, axis=1)
    if LIST == BLOCK_SIZE_V:  # the whole tile (unsorted; stage 2 then treats the lists as complete)
        top_z = zs
        top_i = tl.zeros([BLOCK_SIZE_B, LIST], tl.int32) + slot
    else:
        top_z = tl.full([BLOCK_SIZE_B, LIST], float("-inf"), tl.float32)
        top_i = tl.zeros([BLOCK_SIZE_B, LIST], tl.int32)
        for j in range(LIST):
            # The first remaining entry of each row: the largest logit, the lowest column among equal ones.
            mz, pos = tl.max(zs, axis=1, return_indices=True)
            top_z = tl.where(slot == j, mz[:, None], top_z)
            top_i = tl.where(slot == j, pos.to(tl.int32)[:, None], top_i)
            zs = tl.where(local[None, :] == pos[:, None], float("-inf"), zs)
    out = rows64[:, None] * (num_v_tiles * LIST) + (pid_v.to(tl.int64) * LIST + slot)
    tl.store(cand_z_ptr + out, top_z, mask=row_ok[:, None])
    first = col_offset + pid_v * BLOCK_SIZE_V
    tl.store(cand_i_ptr + out, (first + top_i).to(tl.int32), mask=row_ok[:, None])
    if MASS:
        # sum_i exp(-(m_t - z_i) / t) in float64 (every term <= 1; exp_neg64 clamps the exponent at 64).
        m64 = tl.where(tile_max > float("-inf"), tile_max, 0.0).to(tl.float64)
        a = (m64[:, None] - z.to(tl.float64)) / mass_t[:, None]
        w = tl.where(live, exp_neg64(tl.where(live, a, 0.0)), 0.0)
        tl.store(mass_ptr + rows64 * num_v_tiles + pid_v, tl.sum(w, axis=1), mask=row_ok)


# --------------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------------


@triton.jit(do_not_specialize=["seed_lo", "seed_hi", "col_offset", "num_samples"])
def truncation_stage1_kernel(
    h_ptr,
    w_ptr,
    inv_temp_ptr,
    mass_t_ptr,
    cand_z_ptr,
    cand_i_ptr,
    mass_ptr,
    flag_ptr,
    part_max_ptr,
    part_key_ptr,
    part_idx_ptr,
    lse_ptr,
    logits_ptr,
    status_ptr,
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
    LIST: tl.constexpr,
    MASS: tl.constexpr,
    FULL: tl.constexpr,
    WRITE: tl.constexpr,
    N_ROUNDS: tl.constexpr,
    PAIRED: tl.constexpr,
    NOISE: tl.constexpr,
):
    """``(B,D) @ (D,V) -> per tile and row its first LIST (z, index)`` (z accumulated in fp32); with ``WRITE`` the
    logits ``(B, V)`` themselves, of the rows whose stage-2 status is ``STATUS_FALLBACK`` (a tile without one
    returns at once)."""
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
    if WRITE:
        redo = row_ok & (tl.load(status_ptr + rows64, mask=row_ok, other=0) == 1)  # STATUS_FALLBACK
        if tl.max(redo.to(tl.int32), axis=0) > 0:
            acc = tile_logits(
                h_ptr, w_ptr, rows64, cols64, row_ok, col_ok, D, stride_hb, stride_hd, stride_wv, stride_wd,
                WIDE_K, BLOCK_SIZE_B, BLOCK_SIZE_V, BLOCK_SIZE_D, UPCAST, INPUT_PRECISION,
            )  # fmt: skip
            tl.store(logits_ptr + rows64[:, None] * V + cols64[None, :], acc, mask=redo[:, None] & col_ok[None, :])
    else:
        acc = tile_logits(
            h_ptr, w_ptr, rows64, cols64, row_ok, col_ok, D, stride_hb, stride_hd, stride_wv, stride_wd,
            WIDE_K, BLOCK_SIZE_B, BLOCK_SIZE_V, BLOCK_SIZE_D, UPCAST, INPUT_PRECISION,
        )  # fmt: skip
        inv_temp = tl.load(inv_temp_ptr + rows64, mask=row_ok, other=1.0)
        mass_t = tl.load(mass_t_ptr + rows64, mask=row_ok, other=1.0)
        list_epilogue(
            acc, rows, row_ok, col_ok, col_offset, inv_temp, mass_t, pid_v, num_v_tiles, seed_lo, seed_hi,
            num_samples, cand_z_ptr, cand_i_ptr, mass_ptr, flag_ptr, part_max_ptr, part_key_ptr, part_idx_ptr, lse_ptr,
            BLOCK_SIZE_B, BLOCK_SIZE_V, LIST, False, MASS, FULL, N_ROUNDS, PAIRED, NOISE,
        )  # fmt: skip


@triton.jit(do_not_specialize=["seed_lo", "seed_hi", "col_offset", "num_samples"])
def truncation_logits_stage1_kernel(
    z_ptr,
    inv_temp_ptr,
    mass_t_ptr,
    cand_z_ptr,
    cand_i_ptr,
    mass_ptr,
    flag_ptr,
    part_max_ptr,
    part_key_ptr,
    part_idx_ptr,
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
    LIST: tl.constexpr,
    MASS: tl.constexpr,
    FULL: tl.constexpr,
    N_ROUNDS: tl.constexpr,
    PAIRED: tl.constexpr,
    NOISE: tl.constexpr,
):
    """``(B,V)`` logits -> per tile and row its first LIST (z, index); ``-inf`` masks a token."""
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
    z = tl.load(
        z_ptr + rows64[:, None] * stride_zb + cols.to(tl.int64)[None, :] * stride_zv,
        mask=row_ok[:, None] & col_ok[None, :],
        other=float("-inf"),
    ).to(tl.float32)
    inv_temp = tl.load(inv_temp_ptr + rows64, mask=row_ok, other=1.0)
    mass_t = tl.load(mass_t_ptr + rows64, mask=row_ok, other=1.0)
    list_epilogue(
        z, rows, row_ok, col_ok, col_offset, inv_temp, mass_t, pid_v, num_v_tiles, seed_lo, seed_hi, num_samples,
        cand_z_ptr, cand_i_ptr, mass_ptr, flag_ptr, part_max_ptr, part_key_ptr, part_idx_ptr, lse_ptr,
        BLOCK_SIZE_B, BLOCK_SIZE_V, LIST, True, MASS, FULL, N_ROUNDS, PAIRED, NOISE,
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# Tiles, buffers and launchers
# --------------------------------------------------------------------------------------------


def truncation_tiles(B: int, element_size: int = 2, full: bool = False) -> TileConfig:
    """Stage-1 tiles of :func:`truncation_stage1_kernel` for ``B`` rows (``full``: with the plain epilogue).

    Interpreted: few, large programs (as :func:`~flashsampling.kernels.tiles.default_tiles` there).  Compiled:
    16 x 256 for ``B <= 16`` (half the lists of 128-wide tiles; the weight stream dominates), 32 x 128 for ``B <= 32``
    or ``full``, else 64 x 128; 64-deep K blocks, 8 warps (the old top-k kernel's tiles, spill-free for its heavier
    epilogue).  The K block halves until the pipeline's ``num_stages * (block_b + block_v) * block_d *
    element_size`` bytes fit in 200 KB of shared memory (fp32 inputs).  ``benchmarks/truncation_h200.py`` times
    the alternatives on the H200."""
    if INTERPRET:
        return TileConfig(block_b=max(16, min(64, next_power_of_2(B))), block_v=256, block_d=64)
    if B <= 16:
        bb, bv, stages = 16, 256, 4
    elif B <= 32 or full:
        bb, bv, stages = 32, 128, 4
    else:
        bb, bv, stages = 64, 128, 3
    block_d = 64
    while block_d > 16 and stages * (bb + bv) * block_d * element_size > 200 * 1024:
        block_d //= 2
    return TileConfig(bb, bv, block_d, num_warps=8, num_stages=stages)


def allocate_lists(B: int, T: int, LIST: int, S: int, device, *, mass: bool, full: bool) -> dict:
    """Stage 1's outputs: ``cand_z [B, T * LIST]`` fp32, ``cand_i`` int32, ``mass [B, T]`` float64 (with
    ``mass``, else a 1-element dummy), ``flags [B, T]`` int32 and ``plain``, the plain sampler's candidate buffers
    ``[B, S, T]`` and log-mass dummy with ``full`` (else 1-element dummies)."""
    cand_z = torch.empty((B, T * LIST), dtype=torch.float32, device=device)
    cand_i = torch.empty((B, T * LIST), dtype=torch.int32, device=device)
    masses = torch.empty((B, T) if mass else (1,), dtype=torch.float64, device=device)
    if full:
        *plain, flags, lse = allocate_partials(B, S, T, device)
        plain = (*plain, lse)
    else:
        flags = torch.empty((B, T), dtype=torch.int32, device=device)
        dummy = torch.empty(1, dtype=torch.int64, device=device)
        plain = (dummy.float(), dummy, dummy, dummy.float())
    return {"cand_z": cand_z, "cand_i": cand_i, "mass": masses, "flags": flags, "plain": plain, "list": LIST, "T": T}


def epilogue_constants(LIST: int, *, mass: bool, full: bool, noise: bool, col_offset: int) -> dict:
    """The list epilogue's compile-time constants."""
    return dict(LIST=LIST, MASS=mass, FULL=full, N_ROUNDS=PHILOX_ROUNDS, PAIRED=col_offset % 2 == 0, NOISE=noise)


def launch_truncation_stage1(hidden, weight, inv_temp, mass_t, seed_lo, seed_hi, num_samples, LIST: int,
                             tiles: TileConfig, *, mass: bool, full: bool, col_offset: int = 0,
                             noise: bool = True) -> dict:  # fmt: skip
    """Allocate and launch :func:`truncation_stage1_kernel` on ``hidden [B, D]`` and ``weight [V, D]`` (row ``v`` is
    global index ``col_offset + v``); ``mass_t`` float64 ``[B]`` the rows' top-p scales.  Returns
    :func:`allocate_lists`' buffers."""
    hidden, weight = interpreter_float32(hidden), interpreter_float32(weight)  # interpreter: bf16 subnormals
    B, D = hidden.shape
    V = weight.shape[0]
    T = cdiv(V, tiles.block_v)
    out = allocate_lists(B, T, LIST, num_samples, hidden.device, mass=mass, full=full)
    consts = epilogue_constants(LIST, mass=mass, full=full, noise=noise, col_offset=col_offset)
    direct(truncation_stage1_kernel)[(cdiv(B, tiles.block_b) * T,)](
        hidden, weight, inv_temp, mass_t, out["cand_z"], out["cand_i"], out["mass"], out["flags"], *out["plain"],
        out["cand_z"], out["flags"], B, V, D, col_offset, num_samples, seed_lo, seed_hi,
        hidden.stride(0), hidden.stride(1), weight.stride(0), weight.stride(1),
        wide_k_offsets(hidden, weight, tiles.block_d),
        **tiles.matmul_constants(upcast_inputs(hidden, weight)), **consts, WRITE=False, **tiles.launch_options(),
    )  # fmt: skip
    return out


def launch_write_logits(hidden, weight, tiles: TileConfig, status: torch.Tensor | None = None) -> torch.Tensor:
    """The fp32 logits ``hidden @ weight.T`` ``[B, V]`` from :func:`truncation_stage1_kernel` with ``WRITE``: the
    same K loop at the same tiles as the lists were computed with, so the same bits for a row (the fallback's
    recomputation).  With ``status`` (int32 ``[B]``, stage 2's) only the rows marked ``STATUS_FALLBACK`` are
    computed and written (the others are left unwritten; a tile of rows without one costs a load and returns)."""
    hidden, weight = interpreter_float32(hidden), interpreter_float32(weight)  # interpreter: bf16 subnormals
    B, D = hidden.shape
    V = weight.shape[0]
    T = cdiv(V, tiles.block_v)
    logits = torch.empty((B, V), dtype=torch.float32, device=hidden.device)
    f = torch.empty(1, dtype=torch.float32, device=hidden.device)
    i = torch.empty(1, dtype=torch.int64, device=hidden.device)
    if status is None:
        status = torch.ones(B, dtype=torch.int32, device=hidden.device)
    consts = epilogue_constants(16, mass=False, full=False, noise=False, col_offset=0)
    direct(truncation_stage1_kernel)[(cdiv(B, tiles.block_b) * T,)](
        hidden, weight, f, f.double(), f, i.int(), f.double(), i.int(), f, i, i, f, logits, status,
        B, V, D, 0, 1, 0, 0, hidden.stride(0), hidden.stride(1), weight.stride(0), weight.stride(1),
        wide_k_offsets(hidden, weight, tiles.block_d),
        **tiles.matmul_constants(upcast_inputs(hidden, weight)), **consts, WRITE=True, **tiles.launch_options(),
    )  # fmt: skip
    return logits


def launch_truncation_logits_stage1(logits, inv_temp, mass_t, seed_lo, seed_hi, num_samples, LIST: int,
                                    block_b: int, block_v: int, *, mass: bool, full: bool, col_offset: int = 0,
                                    noise: bool = True) -> dict:  # fmt: skip
    """Allocate and launch :func:`truncation_logits_stage1_kernel` on ``logits [B, V]`` (column ``v`` = global index
    ``col_offset + v``); returns :func:`allocate_lists`' buffers."""
    logits = interpreter_float32(logits)  # interpreter: bf16 subnormals
    B, V = logits.shape
    T = cdiv(V, block_v)
    out = allocate_lists(B, T, LIST, num_samples, logits.device, mass=mass, full=full)
    consts = epilogue_constants(LIST, mass=mass, full=full, noise=noise, col_offset=col_offset)
    direct(truncation_logits_stage1_kernel)[(cdiv(B, block_b) * T,)](
        logits, inv_temp, mass_t, out["cand_z"], out["cand_i"], out["mass"], out["flags"], *out["plain"],
        B, V, col_offset, num_samples, seed_lo, seed_hi, logits.stride(0), logits.stride(1),
        BLOCK_SIZE_B=block_b, BLOCK_SIZE_V=block_v, **consts,
    )  # fmt: skip
    return out
