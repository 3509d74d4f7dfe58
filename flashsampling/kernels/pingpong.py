"""Stage 1 on Hopper, warp-specialized: MMA warp groups take turns, so the noise hides under the matmul.

The Triton kernels run a tile's matmul and its epilogue (noise, max) one after the other on the same
warps, and the tensor cores idle during the epilogue.  This Gluon kernel splits each persistent
program (one per SM) into partitions that synchronize through mbarriers:

* a **loader** warp streams ``h[rows, k:k+BK]`` and ``W[cols, k:k+BK]`` by TMA into a ring of
  ``STAGES`` shared-memory slots, in the order of the program's tiles (:func:`load_partition`);
* ``NC`` **consumer** warp groups of 4 warps own the program's tiles in turn (group ``c`` takes tiles
  ``c, c + NC, ...``).  A group waits for its turn (a ``turn`` mbarrier that the previous group signals when
  its K loop is done), runs the K loop on the tensor cores (``warpgroup_mma``, accumulator in registers, one MMA
  in flight), releases the ring slots, passes the turn on and runs the epilogue -- while the next groups' K loops
  run on the tensor cores (:func:`consumer_partition`).  With two groups (what the product runs,
  :data:`CONSUMER_GROUPS`) this is the "ping-pong" schedule: an epilogue up to one matmul long is hidden.  The
  turns also keep every parity wait on the ring exact: a group starts waiting for its slots only once they are
  at most one phase ahead.

The epilogue is the kernel's ``EPILOGUE`` argument, a Gluon function called with the group's accumulator and the
staging buffer, which the groups' epilogues take in tile order through a second ring of ``staged`` mbarriers
(:func:`sample_epilogue` for ``sample()``; the tile inverse-CDF stream passes its own,
:func:`flashsampling.tile_cdf.fused.tile_cdf_epilogue`; the noise probes of ``benchmarks/probes/`` pass theirs, so
such a probe is this kernel with another epilogue).  ``N_ROUNDS`` and ``NOISE`` are the epilogue's compile-time
parameters: Philox's rounds (10) and the noise (:data:`NOISE_EXACT`, :data:`NOISE_OFF`, :data:`NOISE_TILE_CDF`).
The function boundaries of this file are part of what the H200 runs: an inlined function's line ranges move where
ptxas schedules, so splitting or merging a function on the shipped path changes the SASS even when the
instructions are the same (``benchmarks/sass_fingerprint.py`` checks the shipped specializations); probes that
change the pipeline's structure hold their own copy of it (``benchmarks/probes/pipeline.py``).

:func:`sample_epilogue` writes the accumulator to the staging buffer and reads it back chunk by
chunk (``EV`` columns, the next chunk loaded before this one is processed); the chunk's NVMMA layout maps the
same columns to the same thread.  (Staging through a global scratch slot per group instead cost 0.02-0.05 ms
more per launch without noise: ``benchmarks/results/stage_compare_h200.json``.)  A fast pass
(:func:`scan_tile`) keeps, per thread and per slot of the chunk layout, a running maximum of the perturbed
scores (temperature, the Philox noise of token pairs -- both tokens of a pair live in one thread) with a bit
for exact ties, and a NaN sum that catches non-finite scores; one reduction per row at the end of the tile
gives its candidate.  A tile where some row's maximum is tied or some score is not finite (rare) is redone by
the exact pass (:func:`merge_chunk` on 8-column chunks): flags and each row's maximum, merged by stage 2's
rule, exact float32 ties going to the larger tie-break key.  The noise is the same stream as the Triton
kernels' (``philox4x32``, ``exponential_from_bits`` and ``positive_log`` of :mod:`flashsampling.noise`,
compiled by Gluon), and the MMAs accumulate in the same order, so the candidates equal those of the unstaged
Triton kernel with ``block_v = BN`` bit for bit (``tests/test_pingpong.py``, on the H200).

Scope: one sample per row, no log-masses, a shard starting on an even column, bf16/fp16 inputs that
TMA can read, compiled on sm_90 (:func:`~flashsampling.kernels.tiles.warp_specialized_supported`);
:func:`~flashsampling.kernels.stage1.launch_fused_stage1` runs the Triton kernels otherwise.
"""

from __future__ import annotations

import functools

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from triton.runtime.jit import mangle_type

from ..noise import PHILOX_ROUNDS, exponential_from_bits, philox4x32, positive_log
from .flags import BAD_LOGIT, OVERFLOW
from .hardware import num_programs
from .launch import cdiv, direct

# The noise's device functions, compiled by Gluon (``.fn``: the Python function under triton.jit;
# in the interpreter they are plain functions).
philox4x32_gl = gluon.jit(getattr(philox4x32, "fn", philox4x32))
exponential_gl = gluon.jit(getattr(exponential_from_bits, "fn", exponential_from_bits))
log_gl = gluon.jit(getattr(positive_log, "fn", positive_log))

#: The noise of the sampler's epilogue (the kernel's ``NOISE``): none (a call whose rows are all greedy), the exact
#: Gumbel noise of every token, or the tile inverse-CDF stream (:mod:`flashsampling.tile_cdf`).
NOISE_OFF = gl.constexpr(0)
NOISE_EXACT = gl.constexpr(1)
NOISE_TILE_CDF = gl.constexpr(2)

#: Consumer warp groups of the product's launches.  The pipeline is written for ``NC`` groups (2 or 3: a third
#: group hides an epilogue up to two matmuls long, at 128 launch registers per thread instead of 168); three were
#: no faster on the harness shapes and 1-30% slower at D = 1536 and 2048
#: (``benchmarks/results/tile_choice_b64_h200.json``, ``tile_choice_h200.json``), so only the probes run them.
CONSUMER_GROUPS = 2


@gluon.jit
def tie_key_gl(k0, k1, row, index, N_ROUNDS: gl.constexpr):
    """:func:`flashsampling.noise.tie_key` of sample 0, for uint32 tensors ``row`` and ``index``."""
    zero = index * 0
    w0, w1, w2, w3 = philox4x32_gl(index, row, zero, zero + 3, k0, k1, N_ROUNDS)
    return w0 | 1


@gluon.jit
def load_partition(h_desc, w_desc, a_bufs, b_bufs, ready, empty, B, V, D, BM: gl.constexpr, BN: gl.constexpr,
                   BK: gl.constexpr, STAGES: gl.constexpr, NUM_PROGRAMS: gl.constexpr):  # fmt: skip
    """The loader warp: every K block of every tile of this program, in order, into the ring."""
    program = gl.program_id(0)
    num_b_tiles = gl.cdiv(B, BM)
    num_tiles = num_b_tiles * gl.cdiv(V, BN)
    k_tiles = gl.cdiv(D, BK)
    it = 0
    for tile in range(program, num_tiles, NUM_PROGRAMS):
        pid_b = tile % num_b_tiles
        pid_v = tile // num_b_tiles
        for ki in range(k_tiles):
            s = it % STAGES
            mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(s), h_desc.block_type.nbytes + w_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(h_desc, [pid_b * BM, ki * BK], ready.index(s), a_bufs.index(s))
            tma.async_copy_global_to_shared(w_desc, [pid_v * BN, ki * BK], ready.index(s), b_bufs.index(s))
            it += 1


@gluon.jit
def merge_chunk(z, c, pid_b, pid_v, B, V, col_offset, inv_temp_ptr, k0, k1, run_m, run_pos, run_flag,
                BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr, N_ROUNDS: gl.constexpr,
                NOISE: gl.constexpr):  # fmt: skip
    """Chunk ``c`` of the tile (``z``: tile columns ``c * EV`` on, in the chunk's NVMMA layout, a token
    pair in one thread): perturb, take each row's maximum and merge it into the tile's running
    ``(run_m, run_pos, run_flag)`` by stage 2's rule.  Ties -- exact float32 ties at a row's top
    inside the chunk, or between the chunk's winner and the running one -- go to the larger
    tie-break key; one block-wide test decides whether any row needs the keys (rare)."""
    cl: gl.constexpr = z.type.layout
    r = gl.arange(0, BM, layout=gl.SliceLayout(1, cl))
    cc = gl.arange(0, EV, layout=gl.SliceLayout(0, cl))
    rows = pid_b * BM + r
    row_ok = rows < B
    inv_temp = gl.load(inv_temp_ptr + rows.to(gl.int64), mask=row_ok, other=1.0)
    col_ok = pid_v * BN + c * EV + cc < V
    # Scores and flags as in epilogue.scores_and_flags (ALLOW_NEG_INF false): base = z / T (z if greedy).
    valid = row_ok[:, None] & col_ok[None, :]
    greedy = inv_temp == 0.0
    scaled = z * inv_temp[:, None]
    is_nan = z != z
    inf_z = (z == float("inf")) | (z == float("-inf"))
    overflow = ((scaled == float("inf")) | (scaled == float("-inf"))) & ~inf_z & ~greedy[:, None]
    flag = gl.max(gl.where(valid & (is_nan | inf_z), BAD_LOGIT, 0), axis=1) | gl.max(
        gl.where(valid & overflow, OVERFLOW, 0), axis=1
    )
    base = gl.where(valid, gl.where(greedy[:, None], z, scaled), float("-inf"))
    # Tile positions, rows and the noise switch as full tensors, split with the scores into even and
    # odd columns (a token pair lives in one thread: no data moves).
    pos_full = gl.zeros([BM, EV], gl.int32, cl) + (c * EV + cc)[None, :]
    row_full = gl.zeros([BM, EV], gl.int32, cl) + rows[:, None]
    noisy_full = gl.zeros([BM, EV], gl.int32, cl) + gl.where(greedy, 0, 1)[:, None]
    b_even, b_odd = gl.split(gl.reshape(base, [BM, EV // 2, 2]))
    p_even, p_odd = gl.split(gl.reshape(pos_full, [BM, EV // 2, 2]))
    r_even, r_odd = gl.split(gl.reshape(row_full, [BM, EV // 2, 2]))
    n_even, n_odd = gl.split(gl.reshape(noisy_full, [BM, EV // 2, 2]))
    tile_start = col_offset + pid_v * BN  # even: a pair never straddles two chunks
    if NOISE == NOISE_EXACT:
        pair = ((tile_start + p_even) // 2).to(gl.uint32)
        zero = pair * 0
        w0, w1, w2, w3 = philox4x32_gl(pair, r_even.to(gl.uint32), zero, zero, k0, k1, N_ROUNDS)
        s_even = gl.where(n_even != 0, b_even - log_gl(exponential_gl(w0, w1)), b_even)
        s_odd = gl.where(n_odd != 0, b_odd - log_gl(exponential_gl(w2, w3)), b_odd)
    else:
        s_even = b_even
        s_odd = b_odd
    m = gl.maximum(gl.max(s_even, axis=1), gl.max(s_odd, axis=1))
    finite = m > float("-inf")
    hit_even = (s_even == m[:, None]) & finite[:, None]
    hit_odd = (s_odd == m[:, None]) & finite[:, None]
    big = BN * 2
    pos = gl.minimum(gl.min(gl.where(hit_even, p_even, big), axis=1), gl.min(gl.where(hit_odd, p_odd, big), axis=1))
    pos = gl.where(finite, pos, c * EV)  # an all -inf chunk: its first column, as in the Triton kernels
    n_hit = gl.sum(hit_even.to(gl.int32) + hit_odd.to(gl.int32), axis=1)
    # The merge (stage 2's rule: the larger score; on an exact tie, the larger key).
    m = gl.convert_layout(m, run_m.type.layout)
    pos = gl.convert_layout(pos, run_pos.type.layout)
    n_hit = gl.convert_layout(n_hit, run_pos.type.layout)
    better = m > run_m
    tie = (m == run_m) & (m > float("-inf"))
    if gl.max(((n_hit > 1) | tie).to(gl.int32), axis=0) > 0:
        key_even = tie_key_gl(k0, k1, r_even.to(gl.uint32), (tile_start + p_even).to(gl.uint32), N_ROUNDS)
        key_odd = tie_key_gl(k0, k1, r_odd.to(gl.uint32), (tile_start + p_odd).to(gl.uint32), N_ROUNDS)
        k_even = gl.where(hit_even, key_even, 0)
        k_odd = gl.where(hit_odd, key_odd, 0)
        best = gl.maximum(gl.max(k_even, axis=1), gl.max(k_odd, axis=1))
        tie_even = gl.min(gl.where(hit_even & (k_even == best[:, None]), p_even, big), axis=1)
        tie_odd = gl.min(gl.where(hit_odd & (k_odd == best[:, None]), p_odd, big), axis=1)
        pos = gl.where(n_hit > 1, gl.convert_layout(gl.minimum(tie_even, tie_odd), run_pos.type.layout), pos)
        rr = (pid_b * BM + gl.arange(0, BM, layout=run_m.type.layout)).to(gl.uint32)
        k_new = tie_key_gl(k0, k1, rr, (tile_start + pos).to(gl.uint32), N_ROUNDS)
        k_old = tie_key_gl(k0, k1, rr, (tile_start + run_pos).to(gl.uint32), N_ROUNDS)
        better = better | (tie & (k_new > k_old))
    flag = gl.convert_layout(flag, run_flag.type.layout)
    return gl.where(better, m, run_m), gl.where(better, pos, run_pos), run_flag | flag


@gluon.jit
def chunk_base(z, c, c_end, mult, bad, pos_even, pos_odd, BM: gl.constexpr, EV: gl.constexpr, MASKED: gl.constexpr):
    """Chunk ``c``'s ``z / T`` split into even and odd columns (a token pair in one thread), with columns at or
    past ``V`` masked to ``-inf`` when ``MASKED``, and the NaN sum ``bad`` with the chunk's ``(z / T) * 0`` added
    (before the mask).  Returns ``(base_even, base_odd, bad)``."""
    z_even, z_odd = gl.split(gl.reshape(z, [BM, EV // 2, 2]))
    b_even = z_even * mult
    b_odd = z_odd * mult
    bad = bad + b_even * 0.0 + b_odd * 0.0
    if MASKED:
        limit = c_end - c * EV  # columns of this chunk below V
        b_even = gl.where(pos_even < limit, b_even, float("-inf"))
        b_odd = gl.where(pos_odd < limit, b_odd, float("-inf"))
    return b_even, b_odd, bad


@gluon.jit
def chunk_words(c, tile_start, pos_even, rows_u, k0, k1, EV: gl.constexpr, N_ROUNDS: gl.constexpr):
    """The Philox words of chunk ``c``'s token pairs: ``(w0, w1)`` for the even token, ``(w2, w3)`` for the odd."""
    pair = ((tile_start + c * EV) // 2 + (pos_even >> 1)).to(gl.uint32)
    zero = pair * 0
    return philox4x32_gl(pair, rows_u, zero, zero, k0, k1, N_ROUNDS)


@gluon.jit
def scan_tile(stage, cl: gl.constexpr, c_end, tile_start, mult, noisy, rows_u, pos_even, pos_odd, k0, k1,
              BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr, N_ROUNDS: gl.constexpr, NOISE: gl.constexpr,
              MASKED: gl.constexpr):  # fmt: skip
    """The fast pass over a staged tile: per thread, per slot of the chunk layout, a running maximum.

    Every thread owns the same ``[BM, EV // 2]`` (even, odd) slots of every chunk (the chunk's NVMMA
    layout), so it keeps, per slot and across chunks, the running ``(max score, chunk)`` with a strict
    ``>`` and a bit that records an exact tie with the running maximum -- elementwise, with no
    reduction, shuffle or barrier inside the chunk loop.  Non-finite values are accumulated as a NaN
    sum: ``bad += (z / T) * 0`` turns NaN once a logit is NaN or infinite or ``z / T`` overflows.
    Returns ``(max_even, max_odd, chunk_tie_even, chunk_tie_odd, bad)`` with
    ``chunk_tie = 2 * chunk + tie``.  Columns at or past ``V`` (zeros, from TMA's out-of-bounds fill)
    are masked to ``-inf`` when ``MASKED`` (the last tile of the row)."""
    run_even = gl.zeros_like(mult) + float("-inf")
    run_odd = gl.zeros_like(mult) + float("-inf")
    ct_even = gl.zeros_like(pos_even)
    ct_odd = gl.zeros_like(pos_even)
    bad = gl.zeros_like(mult)
    z = stage.index(0).load(cl)
    for c in range(0, BN // EV):
        z_next = stage.index(gl.minimum(c + 1, BN // EV - 1)).load(cl)  # (the last iteration reloads its own)
        s_even, s_odd, bad = chunk_base(z, c, c_end, mult, bad, pos_even, pos_odd, BM, EV, MASKED)
        if NOISE == NOISE_EXACT:
            w0, w1, w2, w3 = chunk_words(c, tile_start, pos_even, rows_u, k0, k1, EV, N_ROUNDS)
            # noisy is 1.0 or 0.0 per row: the product is exact, so this is z / T - log(E) or z / T.
            s_even = s_even - log_gl(exponential_gl(w0, w1)) * noisy
            s_odd = s_odd - log_gl(exponential_gl(w2, w3)) * noisy
        c2 = c * 2
        gt = s_even > run_even
        ct_even = gl.where(gt, c2, ct_even | (s_even == run_even).to(gl.int32))
        run_even = gl.where(gt, s_even, run_even)
        gt = s_odd > run_odd
        ct_odd = gl.where(gt, c2, ct_odd | (s_odd == run_odd).to(gl.int32))
        run_odd = gl.where(gt, s_odd, run_odd)
        z = z_next
    return run_even, run_odd, ct_even, ct_odd, bad


@gluon.jit
def stage_tile(acc, stage, BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr):
    """Write the accumulator to the staging buffer ``stage`` (``[BN // EV * BM, EV]`` fp32) as ``BN // EV``
    chunks of ``[BM, EV]``: the accumulator's ``EV``-column chunks stacked as rows (reshapes and a permute
    of registers: no data moves).  Returns the buffer viewed as ``[BN // EV, BM, EV]`` (the swizzle repeats
    every 4 or 8 rows; BM is 64 or 128), which :func:`staged_epilogue` reads chunk by chunk."""
    stage.store(gl.reshape(gl.permute(gl.reshape(acc, [BM, BN // EV, EV]), [1, 0, 2]), [BN // EV * BM, EV]))
    return stage._reinterpret(gl.float32, [BN // EV, BM, EV], stage.layout)


@gluon.jit
def staged_epilogue(stage, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                    part_key_ptr, part_idx_ptr, flag_ptr, BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr,
                    N_ROUNDS: gl.constexpr, NOISE: gl.constexpr, SCAN: gl.constexpr = scan_tile,
                    DRAW: gl.constexpr = None):  # fmt: skip
    """The epilogue of one staged tile (``stage``: ``[BN // EV, BM, EV]`` fp32 chunks, written by
    :func:`stage_tile`; a group of 4 warps): a fast pass, and an exact pass for rare tiles.

    The chunks come back one by one in the chunk's NVMMA layout (the same columns in the same thread as
    the accumulator's); chunk ``c + 1`` is loaded before chunk ``c`` is processed.

    The fast pass (``SCAN``: :func:`scan_tile`) keeps per-thread running maxima; one reduction per row at the
    end gives the row's maximum ``M`` and its position.  It is exact unless ``M`` occurs more than
    once in the row (an exact float32 tie, decided by the tie-break keys) or the row holds a NaN or
    infinite logit or ``z / T`` (a flagged row: the element-wise test sets its bits).  If any row of
    the tile has either (one block-wide test per tile), the exact pass -- :func:`merge_chunk` on
    8-column chunks -- recomputes the whole tile from the staging buffer.  Either
    way the candidates are those of the unstaged Triton kernel, bit for bit (the fast pass's part:
    proofs/argmax_decomposition.md, Proposition 4).  (Chunks taken as register views of the accumulator, without
    staging, were 1.1-1.9x slower and spilled at B = 256: benchmarks/NOTES.md, the Gluon kernel's sweeps.)

    ``NOISE``: :data:`NOISE_EXACT` (the Gumbel noise of every token), :data:`NOISE_OFF` (none: a call whose rows
    are all greedy), or :data:`NOISE_TILE_CDF`: the tile inverse-CDF stream, whose ``DRAW``
    (:func:`flashsampling.tile_cdf.fused.tile_cdf_draw`) turns each row's noise-free maximum into ``(m, Q, draw)``
    (written as ``(max, key, index)``; a greedy row keeps its noise-free candidate, which stage 2 takes by
    ``(max, key)`` as the Gumbel sampler's greedy rows).  Timing probes pass other ``SCAN`` functions and codes."""
    cl: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, EV, 16])
    vec: gl.constexpr = gl.SliceLayout(1, cl)
    r = gl.arange(0, BM, layout=vec)
    cc = gl.arange(0, EV, layout=gl.SliceLayout(0, cl))
    rows = pid_b * BM + r
    row_ok = rows < B
    inv_temp = gl.load(inv_temp_ptr + rows.to(gl.int64), mask=row_ok, other=1.0)
    greedy = inv_temp == 0.0
    # Per-row and per-column constants as full chunk tensors, split like the scores (no data moves).
    full = gl.zeros([BM, EV], gl.float32, cl)
    mult, _m = gl.split(gl.reshape(full + gl.where(greedy, 1.0, inv_temp)[:, None], [BM, EV // 2, 2]))
    noisy, _n = gl.split(gl.reshape(full + gl.where(greedy, 0.0, 1.0)[:, None], [BM, EV // 2, 2]))
    ifull = gl.zeros([BM, EV], gl.int32, cl)
    rows_u, _r = gl.split(gl.reshape(ifull + rows[:, None], [BM, EV // 2, 2]))
    rows_u = rows_u.to(gl.uint32)
    pos_even, pos_odd = gl.split(gl.reshape(ifull + cc[None, :], [BM, EV // 2, 2]))
    tile_start = col_offset + pid_v * BN  # even: a pair never straddles two chunks
    c_end = V - pid_v * BN  # tile columns below V
    if c_end >= BN:
        run_even, run_odd, ct_even, ct_odd, bad = SCAN(
            stage, cl, c_end, tile_start, mult, noisy, rows_u, pos_even, pos_odd, k0, k1,
            BM, BN, EV, N_ROUNDS, NOISE, False,
        )  # fmt: skip
    else:
        run_even, run_odd, ct_even, ct_odd, bad = SCAN(
            stage, cl, c_end, tile_start, mult, noisy, rows_u, pos_even, pos_odd, k0, k1,
            BM, BN, EV, N_ROUNDS, NOISE, True,
        )  # fmt: skip
    # Per row: the maximum and its copies (slots holding it, and ties inside a slot).
    top = gl.maximum(gl.max(run_even, axis=1), gl.max(run_odd, axis=1))
    # The inverse-CDF draw, while the scan's state is all that is live.
    if NOISE == NOISE_TILE_CDF:
        rows_t = pid_b * BM + gl.arange(0, BM, layout=top.type.layout)
        if c_end >= BN:
            total, draw = DRAW(stage, cl, c_end, mult, top, rows_t, tile_start, k0, k1, pos_even, pos_odd, BM, BN, EV,
                               N_ROUNDS, False)  # fmt: skip
        else:
            total, draw = DRAW(stage, cl, c_end, mult, top, rows_t, tile_start, k0, k1, pos_even, pos_odd, BM, BN, EV,
                               N_ROUNDS, True)  # fmt: skip
    hit_even = run_even == top[:, None]
    hit_odd = run_odd == top[:, None]
    n_hit = gl.sum(hit_even.to(gl.int32) + hit_odd.to(gl.int32), axis=1)
    tied = gl.max(gl.where(hit_even, ct_even & 1, 0) | gl.where(hit_odd, ct_odd & 1, 0), axis=1)
    finite = top > float("-inf")
    bad = gl.sum(bad, axis=1)
    exact = (finite & ((n_hit > 1) | (tied > 0))) | (bad != bad)
    if gl.max(gl.convert_layout(exact, vec).to(gl.int32), axis=0) > 0:
        # Rare: an exact tie at some row's maximum, or a NaN/infinite logit or z / T.  The exact pass.
        # 8-column chunks (any multiple of 8 maps the same columns to the same thread as the
        # accumulator), so that this rarely taken pass needs few registers.
        xl: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 8, 16])
        xvec: gl.constexpr = gl.SliceLayout(1, xl)
        m_x = gl.full([BM], float("-inf"), gl.float32, xvec)
        pos_x = gl.zeros([BM], gl.int32, xvec)
        flag_x = gl.zeros([BM], gl.int32, xvec)
        for c in range(0, BN // EV):
            for s in gl.static_range(EV // 8):
                z = stage.index(c).slice(s * 8, 8, dim=1).load(xl)
                m_x, pos_x, flag_x = merge_chunk(
                    z, c * (EV // 8) + s, pid_b, pid_v, B, V, col_offset, inv_temp_ptr, k0, k1, m_x, pos_x, flag_x,
                    BM, BN, 8, N_ROUNDS, NOISE,
                )  # fmt: skip
        m = gl.convert_layout(m_x, vec)
        pos = gl.convert_layout(pos_x, vec)
        flag = gl.convert_layout(flag_x, vec)
    else:
        # The maximum is unique and every score finite: its position, no flags.
        big = BN * 2
        p_even = gl.where(hit_even, (ct_even >> 1) * EV + pos_even, big)
        p_odd = gl.where(hit_odd, (ct_odd >> 1) * EV + pos_odd, big)
        pos = gl.minimum(gl.min(p_even, axis=1), gl.min(p_odd, axis=1))
        pos = gl.convert_layout(gl.where(finite, pos, 0), vec)  # all -inf: the first column, as in Triton
        flag = gl.zeros([BM], gl.int32, vec)
        m = gl.convert_layout(top, vec)
    idx = col_offset + pid_v.to(gl.int64) * BN + pos
    key = tie_key_gl(k0, k1, rows.to(gl.uint32), idx.to(gl.uint32), N_ROUNDS).to(gl.int64)
    if NOISE == NOISE_TILE_CDF:
        # A row with T > 0: (m, Q, the inverse-CDF draw) in place of (max, key, argmax).
        total = gl.convert_layout(total, vec).to(gl.int64, bitcast=True)
        draw = gl.convert_layout(draw, vec)
        idx = gl.where(greedy, idx, col_offset + pid_v.to(gl.int64) * BN + draw)
        key = gl.where(greedy, key, total)
    off = rows.to(gl.int64) * num_v_tiles + pid_v
    gl.store(part_max_ptr + off, m, mask=row_ok)
    gl.store(part_key_ptr + off, key, mask=row_ok)
    gl.store(part_idx_ptr + off, idx, mask=row_ok)
    gl.store(flag_ptr + off, flag, mask=row_ok)


@gluon.jit
def sample_epilogue(acc, stage, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                    part_key_ptr, part_idx_ptr, flag_ptr, BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr,
                    N_ROUNDS: gl.constexpr, NOISE: gl.constexpr):  # fmt: skip
    """The sampler's ``EPILOGUE``: the epilogue of one accumulator tile, run by the consumer group that computed it
    (:func:`stage_tile` into the staging buffer ``stage``, then :func:`staged_epilogue`)."""
    chunks = stage_tile(acc, stage, BM, BN, EV)
    staged_epilogue(chunks, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                    part_key_ptr, part_idx_ptr, flag_ptr, BM, BN, EV, N_ROUNDS, NOISE)  # fmt: skip


@gluon.jit
def consumer_partition(args, CONSUMER: gl.constexpr, NC: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr,
                       BK: gl.constexpr, STAGES: gl.constexpr, NUM_PROGRAMS: gl.constexpr, EV: gl.constexpr,
                       N_ROUNDS: gl.constexpr, NOISE: gl.constexpr, EPILOGUE: gl.constexpr):  # fmt: skip
    """Consumer warp group ``CONSUMER`` of ``NC``: the K loop and the ``EPILOGUE`` of tiles ``CONSUMER``,
    ``CONSUMER + NC``, ... of this program's list.  The epilogues take the one staging buffer in tile order."""
    (a_bufs, b_bufs, ready, empty, turn, stage, staged, inv_temp_ptr, part_max_ptr, part_key_ptr, part_idx_ptr,
     flag_ptr, B, V, D, col_offset, seed_lo, seed_hi) = args  # fmt: skip
    program = gl.program_id(0)
    num_b_tiles = gl.cdiv(B, BM)
    num_v_tiles = gl.cdiv(V, BN)
    num_tiles = num_b_tiles * num_v_tiles
    k_tiles = gl.cdiv(D, BK)
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16])
    k0 = seed_lo.to(gl.uint32)
    k1 = seed_hi.to(gl.uint32)
    for tile in range(program + CONSUMER * NUM_PROGRAMS, num_tiles, NC * NUM_PROGRAMS):
        pid_b = tile % num_b_tiles
        pid_v = tile // num_b_tiles
        i = (tile - program) // NUM_PROGRAMS  # the tile's place in this program's list
        it0 = i * k_tiles  # its first slot use in the ring
        # Tile i waits for the (i // NC)-th arrival of the previous group on the turns and on the staging
        # buffer (one fewer for group 0): the parity of that arrival.
        phase = ((i // NC) - (1 if CONSUMER == 0 else 0)) & 1
        # Our turn on the tensor cores: the previous group has waited for every slot of tile i - 1,
        # so the slots of tile i are at most one phase ahead of us (the parity waits are exact).
        mbarrier.wait(turn.index(CONSUMER), phase, pred=i > 0)
        acc = gl.zeros([BM, BN], gl.float32, mma)
        for ki in range(k_tiles):
            it = it0 + ki
            s = it % STAGES
            mbarrier.wait(ready.index(s), (it // STAGES) & 1)
            acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s).permute((1, 0)), acc, is_async=True)
            # At most one MMA in flight: the previous K block's slot is free again.
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=ki > 0)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty.index((it0 + k_tiles - 1) % STAGES), count=1)
        mbarrier.arrive(turn.index((CONSUMER + 1) % NC), count=1)
        # The epilogue, while the other groups' K loops run.  The staging buffer is ours once tile i - 1's
        # epilogue (the previous group's) is done with it.
        mbarrier.wait(staged.index(CONSUMER), phase, pred=i > 0)
        EPILOGUE(acc, stage.index(0), pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                 part_key_ptr, part_idx_ptr, flag_ptr, BM, BN, EV, N_ROUNDS, NOISE)  # fmt: skip
        mbarrier.arrive(staged.index((CONSUMER + 1) % NC), count=1)


@gluon.constexpr_function
def staging_layout(EV):
    """The staging buffer's shared-memory layout for ``EV``-column chunks: the swizzle spreads the 8 rows of an
    accumulator store (8-byte pairs) over all 32 banks, two wavefronts, the minimum."""
    return gl.SwizzledSharedLayout(vec=8, per_phase=max(1, 32 // EV), max_phase=min(8, EV // 8), order=[1, 0])


@gluon.jit(do_not_specialize=["seed_lo", "seed_hi", "col_offset"])
def fused_pingpong_kernel(h_desc, w_desc, inv_temp_ptr, part_max_ptr, part_key_ptr, part_idx_ptr, flag_ptr,
                          B, V, D, col_offset, seed_lo, seed_hi, STAGES: gl.constexpr,
                          NUM_PROGRAMS: gl.constexpr, EV: gl.constexpr, N_ROUNDS: gl.constexpr, NOISE: gl.constexpr,
                          NC: gl.constexpr, CONSUMER_REGS: gl.constexpr, EPILOGUE: gl.constexpr):  # fmt: skip
    """Persistent, warp-specialized ``(B,D) @ (D,V) -> per (row, BN tile) EPILOGUE(z)`` with ``NC`` (2 or 3)
    consumer warp groups (:func:`sample_epilogue`: ``argmax(z / T + G)``)."""
    BM: gl.constexpr = h_desc.block_type.shape[0]
    BK: gl.constexpr = h_desc.block_type.shape[1]
    BN: gl.constexpr = w_desc.block_type.shape[0]
    a_bufs = gl.allocate_shared_memory(h_desc.dtype, [STAGES] + h_desc.block_type.shape, h_desc.layout)
    b_bufs = gl.allocate_shared_memory(w_desc.dtype, [STAGES] + w_desc.block_type.shape, w_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [NC, 1], mbarrier.MBarrierLayout())
    staged = gl.allocate_shared_memory(gl.int64, [NC, 1], mbarrier.MBarrierLayout())
    # One staging buffer for the epilogues, which take it in tile order.
    stage = gl.allocate_shared_memory(gl.float32, [1, BN // EV * BM, EV], staging_layout(EV))
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    for i in gl.static_range(NC):
        mbarrier.init(turn.index(i), count=1)
        mbarrier.init(staged.index(i), count=1)
    args = (a_bufs, b_bufs, ready, empty, turn, stage, staged, inv_temp_ptr, part_max_ptr, part_key_ptr, part_idx_ptr,
            flag_ptr, B, V, D, col_offset, seed_lo, seed_hi)  # fmt: skip
    loads = (h_desc, w_desc, a_bufs, b_bufs, ready, empty, B, V, D, BM, BN, BK, STAGES, NUM_PROGRAMS)
    if NC == 2:
        gl.warp_specialize(
            [
                (consumer_partition, (args, 0, NC, BM, BN, BK, STAGES, NUM_PROGRAMS, EV, N_ROUNDS, NOISE, EPILOGUE)),
                (consumer_partition, (args, 1, NC, BM, BN, BK, STAGES, NUM_PROGRAMS, EV, N_ROUNDS, NOISE, EPILOGUE)),
                (load_partition, loads),
            ],
            [4, 1],
            [CONSUMER_REGS, 24],
        )
    else:
        gl.static_assert(NC == 3, "2 or 3 consumer warp groups")
        gl.warp_specialize(
            [
                (consumer_partition, (args, 0, NC, BM, BN, BK, STAGES, NUM_PROGRAMS, EV, N_ROUNDS, NOISE, EPILOGUE)),
                (consumer_partition, (args, 1, NC, BM, BN, BK, STAGES, NUM_PROGRAMS, EV, N_ROUNDS, NOISE, EPILOGUE)),
                (consumer_partition, (args, 2, NC, BM, BN, BK, STAGES, NUM_PROGRAMS, EV, N_ROUNDS, NOISE, EPILOGUE)),
                (load_partition, loads),
            ],
            [4, 4, 1],
            [CONSUMER_REGS, CONSUMER_REGS, 24],
        )


def tma_descriptors(hidden, weight, tiles) -> tuple:
    """The TMA descriptors of ``hidden`` (``block_b x block_d`` boxes) and ``weight`` (``block_v x block_d``)."""
    bm, bn, bk = tiles.block_b, tiles.block_v, tiles.block_d
    bf16 = hidden.dtype == torch.bfloat16
    h_desc = TensorDescriptor.from_tensor(hidden, [bm, bk], _shared_layout(bm, bk, bf16))
    w_desc = TensorDescriptor.from_tensor(weight, [bn, bk], _shared_layout(bn, bk, bf16))
    return h_desc, w_desc


@functools.cache
def _shared_layout(rows: int, cols: int, bf16: bool):
    """The TMA boxes' shared-memory layout (cached: building one costs the host microseconds on every call)."""
    return gl.NVMMASharedLayout.get_default_for([rows, cols], gl.bfloat16 if bf16 else gl.float16)


def kernel_arguments(hidden, weight, inv_temp, parts, seed_lo, seed_hi, tiles, col_offset, programs=None):
    """``(programs, args)``: the grid (one program per SM unless ``programs`` is given, never more than tiles) and
    the positional arguments of :func:`fused_pingpong_kernel` (and of the probes' Gluon kernels)."""
    B, D = hidden.shape
    V = weight.shape[0]
    num_tiles = cdiv(B, tiles.block_b) * cdiv(V, tiles.block_v)
    progs = programs or num_programs(hidden.device, num_tiles)
    part_max, part_key, part_idx, flags, _ = parts
    args = (*tma_descriptors(hidden, weight, tiles), inv_temp, part_max, part_key, part_idx, flags,
            B, V, D, col_offset, seed_lo, seed_hi)  # fmt: skip
    return progs, args


def launch_registers(groups: int) -> int:
    """Registers per thread at launch: the consumer groups and the loader's group (4 warps each)
    share the SM's 64K (168 for 2 groups, 128 for 3); the loader gives back all but 24."""
    return 65536 // ((groups + 1) * 4 * 32) // 8 * 8


def default_consumer_registers(groups: int) -> int:
    """Registers per consumer thread after the loader's give-back (232 for 2 groups, 160 for 3)."""
    return (launch_registers(groups) * (groups + 1) - 24) // groups // 8 * 8


def kernel_constants(tiles, programs: int, *, noise: bool, epilogue, groups: int = CONSUMER_GROUPS) -> dict:
    """The compile-time constants of :func:`fused_pingpong_kernel` for ``tiles`` on ``programs`` programs: ring
    depth, chunk width, Philox-10, the noise switch, ``groups`` consumer groups with ``tiles.max_registers`` each
    (or what the loader leaves them), and the ``epilogue``."""
    return dict(STAGES=tiles.num_stages, NUM_PROGRAMS=programs, EV=tiles.epilogue_v, N_ROUNDS=PHILOX_ROUNDS,
                NOISE=NOISE_EXACT.value if noise else NOISE_OFF.value, NC=groups,
                CONSUMER_REGS=tiles.max_registers or default_consumer_registers(groups), EPILOGUE=epilogue)  # fmt: skip


def launch_pingpong(hidden, weight, inv_temp, parts, seed_lo, seed_hi, tiles, *, col_offset: int = 0,
                    noise: bool = True, epilogue=sample_epilogue, programs: int | None = None):  # fmt: skip
    """Launch :func:`fused_pingpong_kernel` into the candidate buffers ``parts`` (one candidate per
    ``block_v`` tile); returns the compiled kernel.  ``tiles``: ``block_b x block_v`` tiles,
    ``block_d`` K blocks, ``num_stages`` ring slots, ``epilogue_v`` chunks, ``max_registers`` per consumer thread.
    ``epilogue``: the kernel's ``EPILOGUE`` (the sampler's by default).  ``programs`` overrides the one-per-SM grid
    (tests: several tiles per program on small inputs)."""
    progs, args = kernel_arguments(hidden, weight, inv_temp, parts, seed_lo, seed_hi, tiles, col_offset, programs)
    consts = kernel_constants(tiles, progs, noise=noise, epilogue=epilogue)
    return direct(fused_pingpong_kernel)[(progs,)](
        *args, **consts, num_warps=4, maxnreg=launch_registers(CONSUMER_GROUPS)
    )


def compile_offline(tiles, *, noise: bool = True, epilogue=sample_epilogue, element: str = "bf16"):
    """Compile :func:`fused_pingpong_kernel` for sm_90a without a GPU (triton ships ``ptxas``), 132 programs.

    Returns the compiled kernel (``.asm["ptx"]``, ``.asm["cubin"]``, ``.metadata.shared``), for the CPU tests that
    the kernel builds and does not spill and for ``benchmarks/sass_fingerprint.py``.  Needs compiled mode
    (``FLASHSAMPLING_INTERPRET=0``): in the interpreter, Gluon kernels are not compiled."""
    consts = kernel_constants(tiles, 132, noise=noise, epilogue=epilogue)
    return compile_sm90(fused_pingpong_kernel, tiles, element, consts, launch_registers(CONSUMER_GROUPS))


def compile_sm90(kernel, tiles, element: str, constexprs: dict, maxnreg: int):
    """Compile a Gluon stage-1 kernel with this module's argument list (descriptors, candidate buffers,
    sizes, seed) for sm_90a, without a GPU, with the given compile-time constants and register cap."""
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[element]
    h_desc, w_desc = tma_descriptors(torch.empty(256, 4096, dtype=dt), torch.empty(1024, 4096, dtype=dt), tiles)
    signature = {"h_desc": mangle_type(h_desc), "w_desc": mangle_type(w_desc), "inv_temp_ptr": "*fp32",
                 "part_max_ptr": "*fp32", "part_key_ptr": "*i64", "part_idx_ptr": "*i64", "flag_ptr": "*i32",
                 "B": "i32", "V": "i32", "D": "i32", "col_offset": "i32",
                 "seed_lo": "i32", "seed_hi": "i32"}  # fmt: skip
    src = GluonASTSource(fn=kernel, signature=signature, constexprs=constexprs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "maxnreg": maxnreg})
