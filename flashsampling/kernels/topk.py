"""The fused top-k sampler's kernels: per-tile candidates in stage 1, their merge and the draw in stage 2.

The law
-------
For one row with logits ``z`` (float32, as the accumulator holds them) and ``k`` in ``[1, MAX_TOP_K]``, the kept
set ``S`` is the first ``k`` finite tokens in the total order

    i before j   iff   z_i > z_j,  or  z_i == z_j and i < j            (z descending, index ascending)

(``verification.targets.top_k(k, ties="low_index")``) and the token is

    argmax_{i in S}  z_i * (1/T) + G(seed, row, i, sample)        (z_i for a greedy row, 1/T = 0)

with exact float32 ties broken by the larger tie-break key :func:`~flashsampling.noise.tie_key`, equal keys by the
lower index: the plain sampler's rule (:mod:`.epilogue`), the same noise keyed by the same global index, restricted
to ``S``.  By the Gumbel-max theorem the draw is exactly ``softmax(z / T)`` on ``S`` (``proofs/``), and a row whose
``k`` covers every finite token gets the plain sampler's token.

The order is total, so a token of the global ``S`` is among the first ``k`` of its own tile: stage 1 keeps each
tile's first ``min(k, BLOCK_SIZE_V)`` tokens, and the first ``k`` of their union is ``S``.  (Keeping every token
tied at the k-th logit, ``ties="all"``, would not decompose so: a tile could hold any number of them.)

Keys
----
A candidate is one int64 whose signed order is the order above (:func:`rank_keys`)::

    key = (ordered(z) << 32) | (2**32 - 1 - i)       ordered(z) = bits(z) ^ ((bits(z) >> 31) & 0x7FFFFFFF)

``ordered`` is the int32 whose order is float32's (``-0.0`` is made ``+0.0`` first: equal logits get equal high
words); ``i`` is the global index (``col_offset`` + column, below ``2**32``).  Keys are distinct, so "the first
``k``" is the ``k`` largest keys, whatever algorithm finds them.  Masked (``-inf``), NaN and out-of-range entries get
:data:`SENTINEL`, below every key; they are never drawn.

Kernels and tiling
------------------
* :func:`topk_stage1_kernel`: one program per ``BLOCK_SIZE_B x BLOCK_SIZE_V`` tile of ``h @ W.T`` (the K loop of
  :func:`~flashsampling.kernels.stage1.fused_stage1_kernel`, fp32 accumulator, its int64 K-loop offsets where
  ``ks * stride`` can reach ``2**31``: ``WIDE_K``), then :func:`candidates_epilogue`:
  the flags of :func:`~flashsampling.kernels.epilogue.scores_and_flags`, the tile's keys and their top
  ``NUM_CANDIDATES = min(K, BLOCK_SIZE_V)`` (a bitonic top-k; all of them unsorted when the tile is no wider) stored at
  ``cand[row, pid_v * NUM_CANDIDATES + j]``.  With ``FULL`` (a batch that mixes untruncated rows, ``k >= V``, with
  truncated ones) the tile also runs the plain epilogue
  (:func:`~flashsampling.kernels.epilogue.perturb_select_store`) into the plain sampler's candidate buffers, which
  the plain stage 2 reduces for those rows.
* :func:`topk_logits_stage1_kernel`: the same epilogue on given logits.
* :func:`topk_merge_kernel`: ``BLOCK_R`` rows per program; a program walks its slice of a row's candidates in
  ``CHUNK``-wide blocks, keeping the running top ``K`` sorted (each block's top ``K`` in ascending order, the
  elementwise max with the descending running list -- a bitonic sequence holding the top ``K`` of both -- and one
  bitonic merge).  Then either it writes those ``K`` keys (a split pass: ``P`` programs per row share a long row) or it
  draws: for each sample, the noise of the ``K`` kept tokens (:func:`~flashsampling.noise.token_noise`, one Philox
  block per token), the Gumbel-max over the row's first ``k``, the tie keys only when a row has an exact tie.

Bytes and FLOPs
---------------
Stage 1: the matmul of the plain sampler (``V*D*2`` bytes of bf16 weight, ``2*B*V*D`` FLOPs) and, per tile, a
bitonic top-k of ``BLOCK_SIZE_V`` keys (``~log2(NC)**2 / 2 + log2(BLOCK_SIZE_V / NC) * log2(NC)`` compare-exchange
passes, ``NC = NUM_CANDIDATES``) instead of the noise of ``BLOCK_SIZE_V`` tokens; writes ``B * T * NC * 8`` bytes of
candidates (``T = ceil(V / BLOCK_SIZE_V)``), ``B * V * 8 * NC / BLOCK_SIZE_V``.  Stage 2 reads them once (plus
``P * K * 8`` bytes per row after a split) and computes the noise of ``K`` tokens per row and sample, where the plain
sampler computes it for all ``V``.  The unfused top-k (``torch.topk`` on the logits, then a draw) writes and
re-reads the ``B * V * 4``-byte logits.

The cap
-------
:data:`MAX_TOP_K` = 1024: a row's running list lives in registers (``K`` int64 per row beside a ``CHUNK``-wide
block: 1024 + 1024 int64 keys are 8 per thread at the 8 warps of :func:`merge_warps`), every chunk costs a bitonic
sort of ``K``-blocks (``log2(K)**2 / 2`` passes: 55 at 1024), and stage 1 keeps ``min(k, BLOCK_SIZE_V)`` keys per
tile, so beyond ``BLOCK_SIZE_V`` the candidates are the whole logit matrix in 8-byte keys.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._device import INTERPRET, device_function
from ..noise import PHILOX_ROUNDS, tie_key, token_noise
from .epilogue import perturb_select_store, scores_and_flags
from .flags import BAD_LOGIT, NO_FINITE, OVERFLOW
from .hardware import sm_count
from .launch import cdiv, direct, next_power_of_2
from .stage1 import allocate_partials, tile_logits, upcast_inputs, wide_k_offsets
from .stage2 import reduce_tiles
from .tiles import TileConfig

#: The largest ``k`` of the fused top-k sampler (the candidate buffer and stage 2's cost; module docstring).
MAX_TOP_K = 1024
#: The key of no candidate (masked, NaN or out-of-range): below every real key.
SENTINEL = tl.constexpr(-(2**63))
#: Stage 2's block of candidates per step, compiled (``K`` when larger): 1024 keys beside the running list.
MERGE_CHUNK = 1024
#: Programs stage 2 aims for, per SM, before it splits long rows over several programs.
MERGE_PROGRAMS_PER_SM = 2


# --------------------------------------------------------------------------------------------
# Keys and their top-k
# --------------------------------------------------------------------------------------------


@device_function
def rank_keys(z, index, live):
    """int64 keys of fp32 logits ``z`` at int64 global indices ``index`` (below ``2**32``), ordered as
    ``(z descending, index ascending)``; :data:`SENTINEL` where not ``live``."""
    bits = tl.where(z == 0.0, 0.0, z).to(tl.int32, bitcast=True)  # -0.0 -> +0.0: equal logits, equal high words
    ordered = bits ^ ((bits >> 31) & 0x7FFFFFFF)
    key = (ordered.to(tl.int64) << 32) | (index ^ 0xFFFFFFFF)
    return tl.where(live, key, SENTINEL)


@device_function
def decode_keys(key):
    """``(z fp32, global index int64)`` of keys made by :func:`rank_keys`."""
    high = (key >> 32).to(tl.int32)
    z = (high ^ ((high >> 31) & 0x7FFFFFFF)).to(tl.float32, bitcast=True)
    return z, (key & 0xFFFFFFFF) ^ 0xFFFFFFFF


if INTERPRET:
    # Triton's tl.topk swaps partners through xor_sum, a reduction the interpreter runs element by element in Python
    # (45 s for a 64 x 256 tile on 2 cores); the same bitonic network with min/max reductions runs as NumPy
    # operations (0.3 s).  The top K of distinct keys is one sorted list, so both give the same keys.

    def _log2(n) -> int:
        return int(n).bit_length() - 1

    def _indicator(ndims: int, j: int):
        """0 or 1: the position along the ``j``-th innermost axis of a ``[2] * ndims`` hypercube."""
        return tl.reshape(tl.arange(0, 2), [1] * (ndims - j - 1) + [2] + [1] * j)

    def _merge_stages(h, stage: int, order: int, ndims: int):
        """``stage`` compare-exchange passes of a bitonic merge on the innermost ``stage`` axes of the hypercube
        ``h``: ascending (``order`` 0), descending (1), or alternating by the ``stage``-th axis (2)."""
        flip = _indicator(ndims, stage) if order == 2 else order
        for i in range(stage):
            axis = ndims - stage + i
            right = _indicator(ndims, stage - 1 - i)
            hi = tl.max(h, axis=axis, keep_dims=True)
            lo = tl.min(h, axis=axis, keep_dims=True)
            h = tl.where((right ^ flip) != 0, hi, lo)
        return h

    def top_keys(x, K, DESCENDING):
        """The ``K`` largest of each row of ``x [R, N]`` (powers of two, ``K <= N``), sorted: Triton's
        ``sort_impl`` (bitonic sort of ``K``-blocks, then halving by elementwise max and re-merging)."""
        rows, n = (int(s) for s in x.shape)
        log_n, log_k = _log2(n), _log2(int(K))
        ndims = _log2(rows) + log_n
        h = tl.reshape(x, [2] * ndims if ndims else [1])
        for i in range(1, log_k + 1):
            h = _merge_stages(h, i, 2 if i < log_n else int(DESCENDING), ndims)
        for i in range(log_k + 1, log_n + 1):
            h = tl.max(h, axis=ndims - 1 - log_k)
            ndims -= 1
            h = _merge_stages(h, log_k, 2 if i < log_n else int(DESCENDING), ndims)
        return tl.reshape(h, [rows, int(K)])

    def merge_keys(run, top):
        """The ``K`` largest of the descending rows ``run [R, K]`` and the ascending rows ``top [R, K]``, descending."""
        rows, k = (int(s) for s in run.shape)
        ndims = _log2(rows) + _log2(k)
        h = tl.reshape(tl.maximum(run, top), [2] * ndims if ndims else [1])
        return tl.reshape(_merge_stages(h, _log2(k), 1, ndims), [rows, k])

else:

    @device_function
    def top_keys(x, K: tl.constexpr, DESCENDING: tl.constexpr):
        """The ``K`` largest of each row of ``x [R, N]`` (powers of two, ``K <= N``), sorted (``tl.topk``; the row
        maximum for ``K = 1``, where ``tl.topk`` of one row reduces to a scalar and fails to compile)."""
        if K == 1:
            top = tl.max(x, axis=1, keep_dims=True)
        else:
            top = tl.topk(x, K)
            if not DESCENDING:
                top = tl.flip(top, 1)
        return top

    @device_function
    def merge_keys(run, top):
        """The ``K`` largest of the descending rows ``run [R, K]`` and the ascending rows ``top [R, K]``, descending:
        their elementwise max is a bitonic sequence holding them, sorted by one bitonic merge."""
        top = tl.maximum(run, top)
        if top.shape[1] > 1:
            top = tl.bitonic_merge(top, descending=True)
        return top


# --------------------------------------------------------------------------------------------
# Stage 1
# --------------------------------------------------------------------------------------------


@device_function
def candidates_epilogue(
    z, rows, cols, row_ok, col_ok, col_offset, inv_temp, pid_v, num_v_tiles, seed_lo, seed_hi, num_samples,
    cand_ptr, flag_ptr, part_max_ptr, part_key_ptr, part_idx_ptr, lse_ptr,
    BLOCK_SIZE_B: tl.constexpr, BLOCK_SIZE_V: tl.constexpr, NUM_CANDIDATES: tl.constexpr,
    ALLOW_NEG_INF: tl.constexpr, FULL: tl.constexpr, N_ROUNDS: tl.constexpr, PAIRED: tl.constexpr,
    NOISE: tl.constexpr,
):  # fmt: skip
    """A ``[BLOCK_SIZE_B, BLOCK_SIZE_V]`` tile of fp32 logits -> its flags and its top ``NUM_CANDIDATES`` keys per
    row (and, with ``FULL``, the plain sampler's candidates of the tile)."""
    rows64 = rows.to(tl.int64)
    if FULL:  # the plain epilogue (it stores the flags too), for the rows with k >= V
        perturb_select_store(
            z, rows, cols, col_offset, row_ok, col_ok, inv_temp, seed_lo.to(tl.uint32), seed_hi.to(tl.uint32),
            num_samples, pid_v, num_v_tiles, part_max_ptr, part_key_ptr, part_idx_ptr, flag_ptr, lse_ptr,
            BLOCK_SIZE_B, BLOCK_SIZE_V, ALLOW_NEG_INF, N_ROUNDS, False, PAIRED, NOISE,
        )  # fmt: skip
    else:
        _, flag, _ = scores_and_flags(z, row_ok, col_ok, inv_temp, ALLOW_NEG_INF)
        tl.store(flag_ptr + rows64 * num_v_tiles + pid_v, flag, mask=row_ok)
    live = row_ok[:, None] & col_ok[None, :] & (z > float("-inf"))
    keys = rank_keys(z, col_offset + cols.to(tl.int64)[None, :], live)
    if NUM_CANDIDATES == BLOCK_SIZE_V:
        top = keys
    else:
        top = top_keys(keys, NUM_CANDIDATES, True)
    j = pid_v.to(tl.int64) * NUM_CANDIDATES + tl.arange(0, NUM_CANDIDATES)
    tl.store(cand_ptr + rows64[:, None] * (num_v_tiles * NUM_CANDIDATES) + j[None, :], top, mask=row_ok[:, None])


@triton.jit(do_not_specialize=["seed_lo", "seed_hi", "col_offset", "num_samples"])
def topk_stage1_kernel(
    h_ptr,
    w_ptr,
    inv_temp_ptr,
    cand_ptr,
    flag_ptr,
    part_max_ptr,
    part_key_ptr,
    part_idx_ptr,
    lse_ptr,
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
    NUM_CANDIDATES: tl.constexpr,
    FULL: tl.constexpr,
    N_ROUNDS: tl.constexpr,
    PAIRED: tl.constexpr,
    NOISE: tl.constexpr,
):
    """``(B,D) @ (D,V) -> per tile and row the top NUM_CANDIDATES keys of (z, index)``, ``z`` accumulated in fp32."""
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
    inv_temp = tl.load(inv_temp_ptr + rows64, mask=row_ok, other=1.0)
    candidates_epilogue(
        acc, rows, cols, row_ok, col_ok, col_offset, inv_temp, pid_v, num_v_tiles, seed_lo, seed_hi, num_samples,
        cand_ptr, flag_ptr, part_max_ptr, part_key_ptr, part_idx_ptr, lse_ptr,
        BLOCK_SIZE_B, BLOCK_SIZE_V, NUM_CANDIDATES, False, FULL, N_ROUNDS, PAIRED, NOISE,
    )  # fmt: skip


@triton.jit(do_not_specialize=["seed_lo", "seed_hi", "col_offset", "num_samples"])
def topk_logits_stage1_kernel(
    z_ptr,
    inv_temp_ptr,
    cand_ptr,
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
    NUM_CANDIDATES: tl.constexpr,
    FULL: tl.constexpr,
    N_ROUNDS: tl.constexpr,
    PAIRED: tl.constexpr,
    NOISE: tl.constexpr,
):
    """``(B,V)`` logits -> per tile and row the top NUM_CANDIDATES keys of (z, index); ``-inf`` masks a token."""
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
    candidates_epilogue(
        z, rows, cols, row_ok, col_ok, col_offset, inv_temp, pid_v, num_v_tiles, seed_lo, seed_hi, num_samples,
        cand_ptr, flag_ptr, part_max_ptr, part_key_ptr, part_idx_ptr, lse_ptr,
        BLOCK_SIZE_B, BLOCK_SIZE_V, NUM_CANDIDATES, True, FULL, N_ROUNDS, PAIRED, NOISE,
    )  # fmt: skip


def topk_tiles(B: int, element_size: int = 2, full: bool = False) -> TileConfig:
    """Stage-1 tiles of the top-k matmul kernel for ``B`` rows (``full``: the plain epilogue runs too).

    Interpreted: as :func:`~flashsampling.kernels.tiles.default_tiles` there (few, large programs).  Compiled, the
    largest tiles whose every specialization (``NUM_CANDIDATES`` 1, 64 and the whole tile; ``full`` or not) compiles
    for sm_90a without spills (``benchmarks/sass_fingerprint.py``; 16 x 128 x 128 at 4 warps spills, as the plain
    kernel's does, and 64 x 128 with ``full`` spills 20-22 registers at 8 and 16 warps): 16 x 256 for ``B <= 16``,
    32 x 128 for ``B <= 32`` or ``full``, else 64 x 128; 64-deep K blocks, 8 warps.  The K block halves until the
    pipeline's ``num_stages * (block_b + block_v) * block_d * element_size`` bytes fit in 200 KB of shared memory
    (fp32 inputs).  Not timed on a GPU yet."""
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


def num_candidates(K: int, block_v: int) -> int:
    """Keys per (row, tile) that stage 1 keeps: ``min(K, block_v)``."""
    return min(K, block_v)


def allocate_candidates(B: int, T: int, NC: int, S: int, device, full: bool) -> tuple:
    """``(cand [B, T * NC] int64, flags [B, T] int32, plain)``: ``plain`` the plain sampler's candidate buffers
    ``[B, S, T]`` and log-mass dummy (:func:`~flashsampling.kernels.stage1.allocate_partials`) with ``full``, else
    1-element dummies."""
    cand = torch.empty((B, T * NC), dtype=torch.int64, device=device)
    if full:
        *plain, flags, lse = allocate_partials(B, S, T, device)
        return cand, flags, (*plain, lse)
    flags = torch.empty((B, T), dtype=torch.int32, device=device)
    dummy = torch.empty(1, dtype=torch.int64, device=device)
    return cand, flags, (dummy.float(), dummy, dummy, dummy.float())


def stage1_constants(K: int, block_v: int, *, full: bool, noise: bool, col_offset: int) -> dict:
    """The candidates epilogue's compile-time constants."""
    return dict(NUM_CANDIDATES=num_candidates(K, block_v), FULL=full, N_ROUNDS=PHILOX_ROUNDS,
                PAIRED=col_offset % 2 == 0, NOISE=noise)  # fmt: skip


def launch_topk_stage1(hidden, weight, inv_temp, seed_lo, seed_hi, num_samples, K: int, tiles: TileConfig, *,
                       col_offset: int = 0, full: bool = False, noise: bool = True) -> tuple:  # fmt: skip
    """Allocate and launch :func:`topk_stage1_kernel` on ``hidden [B, D]`` and ``weight [V, D]`` (``weight`` row
    ``v`` is global index ``col_offset + v``) for a stage 2 of width ``K`` (a power of two); returns
    :func:`allocate_candidates`' ``(cand, flags, plain)``, the plain buffers written with ``full``."""
    B, D = hidden.shape
    V = weight.shape[0]
    T = cdiv(V, tiles.block_v)
    consts = stage1_constants(K, tiles.block_v, full=full, noise=noise, col_offset=col_offset)
    cand, flags, plain = allocate_candidates(B, T, consts["NUM_CANDIDATES"], num_samples, hidden.device, full)
    grid = (cdiv(B, tiles.block_b) * T,)
    direct(topk_stage1_kernel)[grid](
        hidden, weight, inv_temp, cand, flags, *plain,
        B, V, D, col_offset, num_samples, seed_lo, seed_hi,
        hidden.stride(0), hidden.stride(1), weight.stride(0), weight.stride(1),
        wide_k_offsets(hidden, weight, tiles.block_d),
        **tiles.matmul_constants(upcast_inputs(hidden, weight)), **consts, **tiles.launch_options(),
    )  # fmt: skip
    return cand, flags, plain


def launch_topk_logits_stage1(logits, inv_temp, seed_lo, seed_hi, num_samples, K: int, block_b: int, block_v: int,
                              *, col_offset: int = 0, full: bool = False, noise: bool = True) -> tuple:  # fmt: skip
    """Allocate and launch :func:`topk_logits_stage1_kernel` on ``logits [B, V]`` (column ``v`` = global index
    ``col_offset + v``); returns ``(cand, flags, plain)`` as :func:`launch_topk_stage1`."""
    B, V = logits.shape
    T = cdiv(V, block_v)
    consts = stage1_constants(K, block_v, full=full, noise=noise, col_offset=col_offset)
    cand, flags, plain = allocate_candidates(B, T, consts["NUM_CANDIDATES"], num_samples, logits.device, full)
    direct(topk_logits_stage1_kernel)[(cdiv(B, block_b) * T,)](
        logits, inv_temp, cand, flags, *plain,
        B, V, col_offset, num_samples, seed_lo, seed_hi, logits.stride(0), logits.stride(1),
        BLOCK_SIZE_B=block_b, BLOCK_SIZE_V=block_v, **consts,
    )  # fmt: skip
    return cand, flags, plain


# --------------------------------------------------------------------------------------------
# Stage 2
# --------------------------------------------------------------------------------------------


@device_function
def draw_from_keys(
    run, rows, row_ok, k_ptr, inv_temp_ptr, flag_ptr, token_ptr, row_flag_ptr, num_tiles, V, col_offset,
    num_samples, seed_lo, seed_hi,
    BLOCK_R: tl.constexpr, K: tl.constexpr, BLOCK_T: tl.constexpr, N_ROUNDS: tl.constexpr, NOISE: tl.constexpr,
):  # fmt: skip
    """Per row of the descending keys ``run [BLOCK_R, K]``: Gumbel-max over its first ``k`` live keys for each sample,
    stored with the row's flags (the OR of its stage-1 flags, plus ``NO_FINITE`` when nothing is live)."""
    rows64 = rows.to(tl.int64)
    k_row = tl.load(k_ptr + rows64, mask=row_ok, other=1)
    inv_temp = tl.load(inv_temp_ptr + rows64, mask=row_ok, other=1.0)
    greedy = inv_temp == 0.0
    z, index = decode_keys(run)
    kept = (run != SENTINEL) & (tl.arange(0, K)[None, :] < k_row[:, None])
    # The plain epilogue's scores (scores_and_flags, select_chunk): z * (1/T), z for a greedy row, -inf outside.
    base = tl.where(kept, tl.where(greedy[:, None], z, z * inv_temp[:, None]), float("-inf"))
    noisy = (~greedy)[:, None]
    flag = tl.zeros([BLOCK_R], dtype=tl.int32)
    for t0 in range(0, num_tiles, BLOCK_T):
        t = t0 + tl.arange(0, BLOCK_T)
        t_ok = row_ok[:, None] & (t < num_tiles)[None, :]
        f = tl.load(flag_ptr + rows64[:, None] * num_tiles + t[None, :], mask=t_ok, other=0)
        flag = flag | tl.max(tl.where((f & BAD_LOGIT) != 0, BAD_LOGIT, 0), axis=1)
        flag = flag | tl.max(tl.where((f & OVERFLOW) != 0, OVERFLOW, 0), axis=1)
    k0 = seed_lo.to(tl.uint32)
    k1 = seed_hi.to(tl.uint32)
    u_rows = rows.to(tl.uint32)[:, None]
    u_index = index.to(tl.uint32)
    lo = tl.full([], 0, tl.int64) + col_offset
    hi = lo + V - 1
    for smp in range(0, num_samples):
        c_smp = (tl.zeros([1, 1], dtype=tl.int32) + smp).to(tl.uint32)
        if NOISE:
            g = token_noise(k0, k1, u_rows, u_index, c_smp, N_ROUNDS)
            score = tl.where(noisy, base + g, base)
        else:
            score = base
        m = tl.max(score, axis=1)
        hit = (score == m[:, None]) & (m > float("-inf"))[:, None]
        n_hit = tl.sum(hit.to(tl.int32), axis=1)
        if tl.max(n_hit, axis=0) > 1:
            # An exact float32 tie at the top (rare): the larger tie-break key, then the lower index.
            key = tl.where(hit, tie_key(k0, k1, u_rows, u_index, c_smp, N_ROUNDS), 0)
            hit = hit & (key == tl.max(key, axis=1)[:, None])
        token = tl.min(tl.where(hit, index, hi), axis=1)
        token = tl.minimum(tl.maximum(token, lo), hi)
        out = rows64 * num_samples + smp
        tl.store(token_ptr + out, token, mask=row_ok)
        tl.store(row_flag_ptr + out, flag | tl.where(m == float("-inf"), NO_FINITE, 0), mask=row_ok)


@triton.jit(do_not_specialize=["N", "slice_len", "num_tiles", "V", "col_offset", "num_samples", "seed_lo", "seed_hi"])
def topk_merge_kernel(
    cand_ptr,
    k_ptr,
    inv_temp_ptr,
    flag_ptr,
    out_ptr,
    token_ptr,
    row_flag_ptr,
    B,
    N,
    slice_len,
    num_tiles,
    V,
    col_offset,
    num_samples,
    seed_lo,
    seed_hi,
    BLOCK_R: tl.constexpr,
    K: tl.constexpr,
    CHUNK: tl.constexpr,
    BLOCK_T: tl.constexpr,
    N_ROUNDS: tl.constexpr,
    NOISE: tl.constexpr,
    DRAW: tl.constexpr,
):
    """``(B, N)`` candidate keys -> per row the top ``K`` of slice ``program_id(1)`` (written to ``out [B, P, K]``),
    or, with ``DRAW`` (one slice), the draws ``(B, S)`` and their flags."""
    pid_r = tl.program_id(0)
    pid_s = tl.program_id(1)
    rows = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    row_ok = rows < B
    rows64 = rows.to(tl.int64)
    start = pid_s.to(tl.int64) * slice_len
    end = tl.minimum(start + slice_len, N)
    run = tl.full([BLOCK_R, K], SENTINEL, tl.int64)
    for c0 in range(start, end, CHUNK):
        cols = c0 + tl.arange(0, CHUNK)
        x = tl.load(cand_ptr + rows64[:, None] * N + cols[None, :], mask=row_ok[:, None] & (cols < end)[None, :],
                    other=SENTINEL)  # fmt: skip
        run = merge_keys(run, top_keys(x, K, False))
    if DRAW:
        draw_from_keys(
            run, rows, row_ok, k_ptr, inv_temp_ptr, flag_ptr, token_ptr, row_flag_ptr, num_tiles, V, col_offset,
            num_samples, seed_lo, seed_hi, BLOCK_R, K, BLOCK_T, N_ROUNDS, NOISE,
        )  # fmt: skip
    else:
        num_slices = tl.num_programs(1)
        j = pid_s.to(tl.int64) * K + tl.arange(0, K)
        tl.store(out_ptr + rows64[:, None] * (num_slices * K) + j[None, :], run, mask=row_ok[:, None])


def merge_blocks(B: int, N: int, K: int) -> tuple[int, int]:
    """``(rows per program, chunk)`` of :func:`topk_merge_kernel`: compiled one row and :data:`MERGE_CHUNK` keys (or
    ``K``); interpreted up to 64 rows and 64K keys per step (the interpreter pays per operation, not per element)."""
    if INTERPRET:
        block_r = min(64, next_power_of_2(B))
        return block_r, max(K, min(next_power_of_2(N), (1 << 16) // block_r))
    return 1, max(K, MERGE_CHUNK)


def merge_warps(K: int) -> int:
    """Warps of a compiled :func:`topk_merge_kernel` program: 8 from ``K = 512`` (half the instructions of 4 warps at
    ``K = 1024``, no spills either way), else 4."""
    return 8 if K >= 512 else 4


def merge_slices(B: int, N: int, chunk: int, device) -> int:
    """Programs per row of stage 2's split pass: 1 (no split) interpreted or when ``B`` rows already give
    :data:`MERGE_PROGRAMS_PER_SM` programs per SM; else enough to, at most one chunk each."""
    if INTERPRET or device.type != "cuda":
        return 1
    want = cdiv(MERGE_PROGRAMS_PER_SM * sm_count(device), B)
    return max(1, min(want, cdiv(N, chunk)))


def launch_topk_merge(cand, flags, k_rows, K: int, inv_temp, seed_lo, seed_hi, num_samples, V: int, *,
                      col_offset: int = 0, noise: bool = True, slices: int | None = None) -> tuple:  # fmt: skip
    """Stage 2 on the candidate keys ``cand [B, N]`` and stage-1 flags ``[B, T]``: per row the top ``K`` keys, then the
    draws over the first ``k_rows[b]`` of them (int32 ``[B]``, in ``[1, K]``).  ``slices`` programs per row first
    reduce a long row to ``slices * K`` keys (default :func:`merge_slices`).  Returns ``(tokens int64 [B, S], flags
    int32 [B, S])``, the tokens global indices in ``[col_offset, col_offset + V)``."""
    B, N = cand.shape
    T = flags.shape[1]
    block_r, chunk = merge_blocks(B, N, K)
    P = slices if slices is not None else merge_slices(B, N, chunk, cand.device)
    device = cand.device
    tokens = torch.empty((B, num_samples), dtype=torch.int64, device=device)
    row_flags = torch.empty((B, num_samples), dtype=torch.int32, device=device)
    block_t = min(next_power_of_2(T), 1024)
    common = dict(K=K, BLOCK_T=block_t, N_ROUNDS=PHILOX_ROUNDS, NOISE=noise, num_warps=merge_warps(K))
    rest = (num_samples, seed_lo, seed_hi)
    if P > 1:
        slice_len = cdiv(cdiv(N, P), chunk) * chunk
        P = cdiv(N, slice_len)
        top = torch.empty((B, P * K), dtype=torch.int64, device=device)
        direct(topk_merge_kernel)[(cdiv(B, block_r), P)](
            cand, k_rows, inv_temp, flags, top, tokens, row_flags, B, N, slice_len, T, V, col_offset, *rest,
            BLOCK_R=block_r, CHUNK=chunk, DRAW=False, **common,
        )  # fmt: skip
        cand, N = top, P * K
        block_r, chunk = merge_blocks(B, N, K)
    direct(topk_merge_kernel)[(cdiv(B, block_r), 1)](
        cand, k_rows, inv_temp, flags, cand, tokens, row_flags, B, N, N, T, V, col_offset, *rest,
        BLOCK_R=block_r, CHUNK=chunk, DRAW=True, **common,
    )  # fmt: skip
    return tokens, row_flags


def reduce_plain(plain, flags, V: int, col_offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The plain sampler's stage 2 (:func:`~flashsampling.kernels.stage2.reduce_tiles`) on the candidates that a
    ``full`` stage 1 wrote; ``(tokens [B, S], flags [B, S])``."""
    part_max, part_key, part_idx, _ = plain
    return reduce_tiles(part_max, part_key, part_idx, flags, col_offset + V)
