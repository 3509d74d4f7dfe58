"""Stage 1 on Hopper, warp-specialized: MMA warp groups take turns, so the noise hides under the matmul.

The Triton kernels run a tile's matmul and its epilogue (noise, max) one after the other on the same
warps, and the tensor cores idle during the epilogue.  This Gluon kernel splits each persistent
program (one per SM) into partitions that synchronize through mbarriers:

* a **loader** warp streams ``h[rows, k:k+BK]`` and ``W[cols, k:k+BK]`` by TMA into a ring of
  ``STAGES`` shared-memory slots, in the order of the program's tiles;
* ``NC`` (2 or 3) **consumer** warp groups of 4 warps own the program's tiles in turn (group ``c``
  takes tiles ``c, c + NC, ...``).  A group waits for its turn (a ``turn`` mbarrier that the
  previous group signals when its K loop is done), runs the K loop on the tensor cores
  (``warpgroup_mma``, accumulator in registers, one MMA in flight), releases the ring slots, passes
  the turn on and runs the epilogue -- while the next groups' K loops run on the tensor cores.  With
  two groups this is the "ping-pong" schedule (an epilogue up to one matmul long is hidden); with
  three, an epilogue up to two matmuls long is.  The turns also keep every parity wait on the ring
  exact: a group starts waiting for its slots only once they are at most one phase ahead.

Epilogue: the group writes its accumulator to a shared-memory staging buffer (one per program,
which the groups' epilogues take in tile order through a second ring of ``staged`` mbarriers; one
per group with ``STAGE_PER_GROUP``, an experiment that needs a shallower ring) and
reads it back chunk by chunk (``EV`` columns, the next chunk loaded before this one is processed);
the chunk's NVMMA layout maps the same columns to the same thread.  (Staging through a global
scratch slot per group, as in session 5, cost 0.02-0.05 ms more per launch without noise:
benchmarks/NOTES.md, session 6.)  A fast pass keeps, per thread and per slot of the chunk layout, a
running maximum of the perturbed scores (temperature, the Philox noise of token pairs -- both tokens of a
pair live in one thread) with a bit for exact ties, and a NaN sum that catches non-finite scores;
one reduction per row at the end of the tile gives its candidate.  A tile where some row's maximum
is tied or some score is not finite (rare) is redone by the exact pass: per 8-column chunk, flags
and each row's maximum, merged by stage 2's rule, exact float32 ties going to the larger tie-break
key.  With ``TileConfig.noise_filter`` the fast pass ranks tokens by an approximate noise (about a third fewer
instructions per token) and recomputes each kept row's winner exactly; rows whose two best approximate scores
are within a margin go to the exact pass (:func:`_scan_tile_filtered`; proofs/argmax_decomposition.md,
Proposition 5).  The noise is the same stream as the Triton kernels' (``philox4x32``, ``exponential_from_bits``
and ``positive_log`` of :mod:`flashsampling.noise`, compiled by Gluon), and the MMAs accumulate in
the same order, so the candidates equal those of the unstaged Triton kernel with ``block_v = BN``
bit for bit (``tests/test_pingpong.py``, on the H200).

Scope: one sample per row, no log-masses, a shard starting on an even column, bf16/fp16 inputs that
TMA can read, compiled on sm_90 (:func:`~flashsampling.kernels.fused.warp_specialized_supported`);
:func:`~flashsampling.kernels.fused.launch_fused_stage1` runs the Triton kernels otherwise.
"""

from __future__ import annotations

import functools

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from ..noise import (
    APPROX_GUMBEL_TOL,
    STREAM_TILE,
    approx_log2_exponential,
    exponential_from_bits,
    philox4x32,
    positive_log,
    uniform_side_from_bits,
)
from ..tile_weights import tile_weight
from .launch import cdiv, direct
from .persistent import num_programs
from .probes import FILLER_KINDS, filler, threefry_proxy
from .tile_cdf import mulhi_u128_u64

# The noise's device functions, compiled by Gluon (``.fn``: the Python function under triton.jit;
# in the interpreter they are plain functions).
_philox = gluon.jit(getattr(philox4x32, "fn", philox4x32))
_exponential = gluon.jit(getattr(exponential_from_bits, "fn", exponential_from_bits))
_log = gluon.jit(getattr(positive_log, "fn", positive_log))
_side = gluon.jit(getattr(uniform_side_from_bits, "fn", uniform_side_from_bits))
_approx_log2_e = gluon.jit(getattr(approx_log2_exponential, "fn", approx_log2_exponential))
_tile_weight = gluon.jit(getattr(tile_weight, "fn", tile_weight))
_mulhi = gluon.jit(getattr(mulhi_u128_u64, "fn", mulhi_u128_u64))

#: The kernel's ``NOISE`` switch: ``off`` (benchmarks), ``exact`` (the exact noise of every token in the fast
#: pass) or ``filtered`` (the fast pass ranks tokens by ``approx_log2_exponential`` and recomputes each row's
#: winner exactly: the same candidates, fewer instructions per token; :func:`_scan_tile_filtered`).
#: ``lse_proxy*`` are timing proxies for the benchmarks, not samplers: the tiles' argmax without noise, plus the
#: work that sampling inside a tile by its inverse CDF would add (one ``exp2`` per token into a per-slot online
#: log-sum-exp, then a second pass over the staged tile that accumulates ``exp2`` against a threshold, in float32,
#: in float64 (``lse_proxy_f64``) or as 64-bit fixed point (``lse_proxy_fixed``, ``exp2 * 2**56`` truncated)) --
#: what a design with one uniform per (row, tile) instead of a Philox block per token pair would cost at least.
#: ``lse_proxy_design`` follows proofs/tile_inverse_cdf.md more closely: the row's maximum from the noise-free scan,
#: then two passes of the reproducible integer weights (:func:`flashsampling.tile_weights.tile_weight`) summed in
#: uint64, the second against half the row's total (no cross-thread prefix, no final select).
#: ``tile_cdf`` is a sampler with another stream: the tile inverse-CDF of proofs/tile_inverse_cdf.md
#: (:func:`_tile_cdf_draw`); its candidates are ``(m, Q, draw)`` per row and tile, not Gumbel-max candidates.
#: ``tile_cdf_no_draw`` (pass 1 only: no uniform, no pass 2, draw 0) and ``tile_cdf_no_bases`` (slot bases 0) are
#: its timing ablations for the benchmarks, not samplers.
#: ``filler_*`` are timing probes too: the noise-free scan plus ``N_ROUNDS`` (here a count, not Philox rounds)
#: steps of dependent work per token or token pair (:func:`.probes.filler`), which price one epilogue instruction
#: beside the other group's MMAs, by kind: ``FFMA``; Philox's 64-bit product (``IMAD.WIDE.U32``), or the same as
#: ``umulhi`` and a 32-bit product (``filler_hilo``: ``IMAD.HI.U32`` + ``IMAD``); a 32-bit product alone (``IMAD``);
#: rotate-and-XOR (``SHF`` + ``LOP3``).  ``threefry_proxy`` is the exact noise's fast pass with each pair's four
#: words from Threefry-4x32 with ``N_ROUNDS`` rounds (:func:`.probes.threefry_proxy`: additions, rotations and
#: XORs, no products) in place of Philox: what a multiply-free counter-based stream would cost.  Not a sampler (its
#: words are not checked against a reference, and the exact pass still uses Philox).
NOISES = {"off": 0, "exact": 1, "filtered": 2, "lse_proxy": 3, "lse_proxy_f64": 4, "lse_proxy_fixed": 5,
          "lse_proxy_design": 6, "tile_cdf": 7, "tile_cdf_no_draw": 8, "tile_cdf_no_bases": 9,
          **{f"filler_{kind}": 10 + i for i, kind in enumerate(FILLER_KINDS)},
          "threefry_proxy": 10 + len(FILLER_KINDS)}  # fmt: skip
NOISE_EXACT = gl.constexpr(NOISES["exact"])
NOISE_FILTERED = gl.constexpr(NOISES["filtered"])
NOISE_LSE_PROXY = gl.constexpr(NOISES["lse_proxy"])
NOISE_LSE_F64 = gl.constexpr(NOISES["lse_proxy_f64"])
NOISE_LSE_FIXED = gl.constexpr(NOISES["lse_proxy_fixed"])
NOISE_LSE_DESIGN = gl.constexpr(NOISES["lse_proxy_design"])
NOISE_TILE_CDF = gl.constexpr(NOISES["tile_cdf"])
NOISE_TILE_NO_DRAW = gl.constexpr(NOISES["tile_cdf_no_draw"])
NOISE_TILE_NO_BASES = gl.constexpr(NOISES["tile_cdf_no_bases"])
NOISE_FILLER_FFMA = gl.constexpr(NOISES["filler_ffma"])
NOISE_FILLER_HILO = gl.constexpr(NOISES["filler_hilo"])
NOISE_THREEFRY_PROXY = gl.constexpr(NOISES["threefry_proxy"])
TILE_STREAM = gl.constexpr(STREAM_TILE)
LOG2E = gl.constexpr(1.4426950408889634)
#: The filter's margin: a row's approximate winner stands if every other token's approximate score is below
#: ``top - (2 * APPROX_GUMBEL_TOL + 2**-20 * |top|)`` (proofs/argmax_decomposition.md, Proposition 5).
FILTER_ABS = gl.constexpr(2.0 * APPROX_GUMBEL_TOL)
FILTER_REL = gl.constexpr(2.0**-20)

#: The kernel's modes: ``sample``, the sampler; two timing modes for the benchmarks, whose outputs are
#: not samples: ``bare``, the matmul and pipeline with each row's maximum logit as the epilogue
#: (:func:`_bare_epilogue`), and ``epilogue``, the sampler's epilogue alone on a synthetic accumulator,
#: without loads or matmul (the groups' epilogues still take the staging buffer in turn, so the time is
#: the sum of the tiles' epilogues).  Two more place the noise-free pipeline's cost between ``bare`` and the
#: sampler without noise: ``register_argmax``, each row's maximum of ``z / T`` and its first column from the
#: accumulator's registers (:func:`_register_argmax_epilogue`, no staging), and ``staged_bare``, the tile staged in
#: shared memory and read back chunk by chunk for each row's maximum (:func:`_staged_bare_epilogue`, the staging
#: buffer taken in turn as the sampler does).
MODES = {"sample": 0, "bare": 1, "epilogue": 2, "staged_bare": 3, "register_argmax": 4}
MODE_BARE = gl.constexpr(MODES["bare"])
MODE_EPILOGUE_ALONE = gl.constexpr(MODES["epilogue"])
MODE_STAGED_BARE = gl.constexpr(MODES["staged_bare"])
MODE_REGISTER_ARGMAX = gl.constexpr(MODES["register_argmax"])


@gluon.jit
def _tie_key(k0, k1, row, index, N_ROUNDS: gl.constexpr):
    """:func:`flashsampling.noise.tie_key` of sample 0, for uint32 tensors ``row`` and ``index``."""
    zero = index * 0
    w0, w1, w2, w3 = _philox(index, row, zero, zero + 3, k0, k1, N_ROUNDS)
    return w0 | 1


@gluon.jit
def _load_partition(h_desc, w_desc, a_bufs, b_bufs, ready, empty, B, V, D, BM: gl.constexpr, BN: gl.constexpr,
                    BK: gl.constexpr, STAGES: gl.constexpr, NUM_PROGRAMS: gl.constexpr,
                    MODE: gl.constexpr):  # fmt: skip
    """The loader warp: every K block of every tile of this program, in order, into the ring (nothing
    in the epilogue-alone timing mode)."""
    program = gl.program_id(0)
    num_b_tiles = gl.cdiv(B, BM)
    num_tiles = num_b_tiles * gl.cdiv(V, BN)
    k_tiles = gl.cdiv(D, BK)
    it = 0
    if MODE == MODE_EPILOGUE_ALONE:
        num_tiles = 0
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
def _merge_chunk(z, c, pid_b, pid_v, B, V, col_offset, inv_temp_ptr, k0, k1, run_m, run_pos, run_flag,
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
    # Scores and flags as in select.scores_and_flags (ALLOW_NEG_INF false): base = z / T (z if greedy).
    valid = row_ok[:, None] & col_ok[None, :]
    greedy = inv_temp == 0.0
    scaled = z * inv_temp[:, None]
    is_nan = z != z
    inf_z = (z == float("inf")) | (z == float("-inf"))
    overflow = ((scaled == float("inf")) | (scaled == float("-inf"))) & ~inf_z & ~greedy[:, None]
    flag = gl.max(gl.where(valid & (is_nan | inf_z), 1, 0), axis=1) | gl.max(gl.where(valid & overflow, 2, 0), axis=1)
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
    if NOISE == NOISE_EXACT or NOISE == NOISE_FILTERED:
        pair = ((tile_start + p_even) // 2).to(gl.uint32)
        zero = pair * 0
        w0, w1, w2, w3 = _philox(pair, r_even.to(gl.uint32), zero, zero, k0, k1, N_ROUNDS)
        s_even = gl.where(n_even != 0, b_even - _log(_exponential(w0, w1)), b_even)
        s_odd = gl.where(n_odd != 0, b_odd - _log(_exponential(w2, w3)), b_odd)
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
        key_even = _tie_key(k0, k1, r_even.to(gl.uint32), (tile_start + p_even).to(gl.uint32), N_ROUNDS)
        key_odd = _tie_key(k0, k1, r_odd.to(gl.uint32), (tile_start + p_odd).to(gl.uint32), N_ROUNDS)
        k_even = gl.where(hit_even, key_even, 0)
        k_odd = gl.where(hit_odd, key_odd, 0)
        best = gl.maximum(gl.max(k_even, axis=1), gl.max(k_odd, axis=1))
        tie_even = gl.min(gl.where(hit_even & (k_even == best[:, None]), p_even, big), axis=1)
        tie_odd = gl.min(gl.where(hit_odd & (k_odd == best[:, None]), p_odd, big), axis=1)
        pos = gl.where(n_hit > 1, gl.convert_layout(gl.minimum(tie_even, tie_odd), run_pos.type.layout), pos)
        rr = (pid_b * BM + gl.arange(0, BM, layout=run_m.type.layout)).to(gl.uint32)
        k_new = _tie_key(k0, k1, rr, (tile_start + pos).to(gl.uint32), N_ROUNDS)
        k_old = _tie_key(k0, k1, rr, (tile_start + run_pos).to(gl.uint32), N_ROUNDS)
        better = better | (tie & (k_new > k_old))
    flag = gl.convert_layout(flag, run_flag.type.layout)
    return gl.where(better, m, run_m), gl.where(better, pos, run_pos), run_flag | flag


@gluon.jit
def _chunk_base(z, c, c_end, mult, bad, pos_even, pos_odd, BM: gl.constexpr, EV: gl.constexpr, MASKED: gl.constexpr):
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
def _chunk_words(c, tile_start, pos_even, rows_u, k0, k1, EV: gl.constexpr, N_ROUNDS: gl.constexpr,
                 THREEFRY: gl.constexpr = False):  # fmt: skip
    """The Philox words of chunk ``c``'s token pairs: ``(w0, w1)`` for the even token, ``(w2, w3)`` for the odd
    (``THREEFRY``: the timing probe's Threefry-4x32 words instead, :func:`.probes.threefry_proxy`)."""
    pair = ((tile_start + c * EV) // 2 + (pos_even >> 1)).to(gl.uint32)
    zero = pair * 0
    if THREEFRY:
        return threefry_proxy(pair, rows_u, zero, zero, k0, k1, N_ROUNDS)
    return _philox(pair, rows_u, zero, zero, k0, k1, N_ROUNDS)


@gluon.jit
def _scan_tile(stage, cl: gl.constexpr, c_end, tile_start, mult, noisy, rows_u, pos_even, pos_odd, k0, k1,
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
    lm_even = gl.zeros_like(mult) - 1e30  # (lse_proxy: per-slot running maximum and sum of exp2)
    lm_odd = gl.zeros_like(mult) - 1e30
    ls_even = gl.zeros_like(mult)
    ls_odd = gl.zeros_like(mult)
    z = stage.index(0).load(cl)
    for c in range(0, BN // EV):
        z_next = stage.index(gl.minimum(c + 1, BN // EV - 1)).load(cl)  # (the last iteration reloads its own)
        s_even, s_odd, bad = _chunk_base(z, c, c_end, mult, bad, pos_even, pos_odd, BM, EV, MASKED)
        if NOISE == NOISE_EXACT or NOISE == NOISE_THREEFRY_PROXY:
            w0, w1, w2, w3 = _chunk_words(c, tile_start, pos_even, rows_u, k0, k1, EV, N_ROUNDS,
                                          NOISE == NOISE_THREEFRY_PROXY)  # fmt: skip
            # noisy is 1.0 or 0.0 per row: the product is exact, so this is z / T - log(E) or z / T.
            s_even = s_even - _log(_exponential(w0, w1)) * noisy
            s_odd = s_odd - _log(_exponential(w2, w3)) * noisy
        if NOISE >= NOISE_FILLER_FFMA and NOISE <= NOISE_FILLER_HILO:
            s_even, s_odd = filler(s_even, s_odd, N_ROUNDS, NOISE - NOISE_FILLER_FFMA)
        if NOISE >= NOISE_LSE_PROXY and NOISE <= NOISE_LSE_FIXED:
            m_even = gl.maximum(lm_even, s_even)
            m_odd = gl.maximum(lm_odd, s_odd)
            ls_even = ls_even * gl.exp2((lm_even - m_even) * LOG2E) + gl.exp2((s_even - m_even) * LOG2E)
            ls_odd = ls_odd * gl.exp2((lm_odd - m_odd) * LOG2E) + gl.exp2((s_odd - m_odd) * LOG2E)
            lm_even = m_even
            lm_odd = m_odd
        c2 = c * 2
        gt = s_even > run_even
        ct_even = gl.where(gt, c2, ct_even | (s_even == run_even).to(gl.int32))
        run_even = gl.where(gt, s_even, run_even)
        gt = s_odd > run_odd
        ct_odd = gl.where(gt, c2, ct_odd | (s_odd == run_odd).to(gl.int32))
        run_odd = gl.where(gt, s_odd, run_odd)
        z = z_next
    if NOISE == NOISE_LSE_DESIGN:
        bad = _design_proxy_passes(stage, cl, c_end, mult, bad, run_even, run_odd, pos_even, pos_odd, BM, BN, EV,
                                   MASKED)  # fmt: skip
    if NOISE >= NOISE_LSE_PROXY and NOISE <= NOISE_LSE_FIXED:
        bad = _lse_proxy_second_pass(stage, cl, c_end, mult, bad, lm_even, lm_odd, ls_even, ls_odd, pos_even, pos_odd,
                                     BM, BN, EV, NOISE, MASKED)  # fmt: skip
    return run_even, run_odd, ct_even, ct_odd, bad


@gluon.jit
def _proxy_weight(p, NOISE: gl.constexpr):
    """An ``exp2`` value as the ``lse_proxy*`` modes accumulate it: float32, float64, or fixed point ``p * 2**56``."""
    if NOISE == NOISE_LSE_PROXY:
        return p
    elif NOISE == NOISE_LSE_F64:
        return p.to(gl.float64)
    else:
        return (p * 72057594037927936.0).to(gl.uint64)


@gluon.jit
def _proxy_half(total, NOISE: gl.constexpr):
    """Half of a float32 sum of ``exp2`` values, as :func:`_proxy_weight` accumulates them (``2**55 total`` in
    fixed point)."""
    if NOISE == NOISE_LSE_PROXY:
        return total * 0.5
    elif NOISE == NOISE_LSE_F64:
        return (total * 0.5).to(gl.float64)
    else:
        return (total * 36028797018963968.0).to(gl.uint64)


@gluon.jit
def _lse_proxy_second_pass(stage, cl: gl.constexpr, c_end, mult, bad, lm_even, lm_odd, ls_even, ls_odd, pos_even,
                           pos_odd, BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr, NOISE: gl.constexpr,
                           MASKED: gl.constexpr):  # fmt: skip
    """The inverse CDF's second pass of the ``lse_proxy*`` timing modes: accumulate ``exp2`` again (per-slot maxima
    ``lm``, sums ``ls`` from the first pass) and note where each slot crosses half its mass.  Returns ``bad`` with
    the results folded in as ``* 0.0`` (they must stay live)."""
    cum_even = _proxy_weight(gl.zeros_like(mult), NOISE)
    cum_odd = _proxy_weight(gl.zeros_like(mult), NOISE)
    half_even = _proxy_half(ls_even, NOISE)
    half_odd = _proxy_half(ls_odd, NOISE)
    at_even = gl.zeros_like(pos_even) - 1
    at_odd = gl.zeros_like(pos_even) - 1
    for c in range(0, BN // EV):
        s_even, s_odd, _b = _chunk_base(stage.index(c).load(cl), c, c_end, mult, bad, pos_even, pos_odd, BM, EV,
                                        MASKED)  # fmt: skip
        cum_even = cum_even + _proxy_weight(gl.exp2((s_even - lm_even) * LOG2E), NOISE)
        cum_odd = cum_odd + _proxy_weight(gl.exp2((s_odd - lm_odd) * LOG2E), NOISE)
        at_even = gl.where((at_even < 0) & (cum_even > half_even), c, at_even)
        at_odd = gl.where((at_odd < 0) & (cum_odd > half_odd), c, at_odd)
    return bad + ((cum_even + cum_odd).to(gl.float32) + (at_even + at_odd).to(gl.float32)) * 0.0


@gluon.jit
def _design_proxy_passes(stage, cl: gl.constexpr, c_end, mult, bad, run_even, run_odd, pos_even, pos_odd,
                         BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr, MASKED: gl.constexpr):  # fmt: skip
    """The ``lse_proxy_design`` timing mode's work after the noise-free scan: each row's maximum ``m``, then
    two passes over the staged tile computing every token's integer weight (``tile_weight(z / T, m)``), the first
    summing them per slot in uint64, the second noting where each slot's running sum passes half the row's total.
    Returns ``bad`` with the results folded in as ``* 0.0`` (they must stay live)."""
    top = gl.maximum(gl.max(run_even, axis=1), gl.max(run_odd, axis=1))
    m = gl.zeros_like(mult) + top[:, None]
    sum_even = gl.zeros_like(pos_even).to(gl.uint64)
    sum_odd = gl.zeros_like(pos_even).to(gl.uint64)
    for c in range(0, BN // EV):
        s_even, s_odd, _b = _chunk_base(stage.index(c).load(cl), c, c_end, mult, bad, pos_even, pos_odd, BM, EV,
                                        MASKED)  # fmt: skip
        sum_even = sum_even + _tile_weight(s_even, m)
        sum_odd = sum_odd + _tile_weight(s_odd, m)
    half = gl.zeros_like(sum_even) + (gl.sum(sum_even + sum_odd, axis=1) >> 1)[:, None]
    cum_even = gl.zeros_like(sum_even)
    cum_odd = gl.zeros_like(sum_even)
    at_even = gl.zeros_like(pos_even) - 1
    at_odd = gl.zeros_like(pos_even) - 1
    for c in range(0, BN // EV):
        s_even, s_odd, _b = _chunk_base(stage.index(c).load(cl), c, c_end, mult, bad, pos_even, pos_odd, BM, EV,
                                        MASKED)  # fmt: skip
        cum_even = cum_even + _tile_weight(s_even, m)
        cum_odd = cum_odd + _tile_weight(s_odd, m)
        at_even = gl.where((at_even < 0) & (cum_even > half), c, at_even)
        at_odd = gl.where((at_odd < 0) & (cum_odd > half), c, at_odd)
    return bad + ((cum_even + cum_odd).to(gl.float32) + (at_even + at_odd).to(gl.float32)) * 0.0


@gluon.jit
def _slot_bases(slot, BM: gl.constexpr):
    """Exclusive prefix sums of the per-slot weights ``slot [BM, 16]`` (uint64; slot ``p = 4j + q``, the token pair at
    chunk columns ``8j + 2q``, ``+1``) in the order ``(q, j)``: slot ``(q, j)``'s base is the weight of the slots
    ``(q', j')`` before it.  The four ``j`` of a ``q`` are split apart (reshapes, a permute and splits of registers)
    and summed in order; the four ``q`` totals are combined by masked row sums.  Returns ``(bases [BM, 16], row
    totals [BM])``."""
    x = gl.reshape(gl.permute(gl.reshape(slot, [BM, 4, 4]), [0, 2, 1]), [BM, 4, 2, 2])  # [row, q, j // 2, j % 2]
    lo0, lo1 = gl.split(x)  # j even, j odd: [row, q, j // 2]
    t0, t2 = gl.split(lo0)
    t1, t3 = gl.split(lo1)
    e1 = t0
    e2 = e1 + t1
    e3 = e2 + t2
    own = e3 + t3  # the q's four slots: [row, q]
    q = gl.arange(0, 4, layout=gl.SliceLayout(0, own.type.layout))[None, :]
    r0 = gl.sum(gl.where(q == 0, own, 0), axis=1)
    r1 = gl.sum(gl.where(q == 1, own, 0), axis=1)
    r2 = gl.sum(gl.where(q == 2, own, 0), axis=1)
    r3 = gl.sum(gl.where(q == 3, own, 0), axis=1)
    before = gl.where(q > 0, r0[:, None], 0) + gl.where(q > 1, r1[:, None], 0) + gl.where(q > 2, r2[:, None], 0)
    x = gl.join(gl.join(before, before + e2), gl.join(before + e1, before + e3))
    bases = gl.reshape(gl.permute(gl.reshape(x, [BM, 4, 4]), [0, 2, 1]), [BM, 16])
    return gl.convert_layout(bases, slot.type.layout), r0 + r1 + r2 + r3


@gluon.jit
def _tile_cdf_draw(stage, cl: gl.constexpr, c_end, mult, top, rows, tile_start, k0, k1, pos_even, pos_odd,
                   BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr, N_ROUNDS: gl.constexpr,
                   MASKED: gl.constexpr, NOISE: gl.constexpr = NOISE_TILE_CDF):  # fmt: skip
    """The tile inverse-CDF draw of every row of a staged tile (proofs/tile_inverse_cdf.md).

    ``top [BM]``: each row's maximum score ``m`` over the tile.  Pass 1 sums the integer weights
    ``q = tile_weight(z / T, m)`` per slot ``p = 4j + q`` of the chunk layout (the token pair at chunk columns
    ``8j + 2q``, ``+1`` of every chunk); :func:`_slot_bases` gives each slot's base and the row's total ``Q``.  The
    row's uniform ``U`` is the 128-bit Philox block ``(tile_start, row, 0, STREAM_TILE)`` and
    ``t = floor(U Q / 2**128)``.  Pass 2 counts the tokens whose cumulative weight is at most ``t``, the tokens in
    *slot order*: slot ``(q, j)`` (lexicographic), then chunk ``c``, then the pair's element ``e`` (tile column
    ``c * EV + 8j + 2q + e``).  The count ``n`` is the draw's rank in that order.  The slots wholly at or below ``t``
    are exactly those before the one that straddles it and count all their tokens, so pass 2 weighs only the
    straddling slot's tokens (one pair per row and chunk, picked by a masked row maximum).  Integer sums are exact,
    so the draw does not depend on how the sums are reduced; the order of the tokens is part of the stream
    (:func:`flashsampling.tile_cdf.slot_order` is its twin).  Returns ``(Q [BM] uint64, draw [BM] int32)``, the
    draw a tile column.  ``NOISE``: the timing ablations ``tile_cdf_no_draw`` (return after pass 1) and
    ``tile_cdf_no_bases`` (bases 0), not samplers."""
    gl.static_assert(EV == 32, "the tile inverse-CDF's slot order is defined for 32-column chunks")
    m = gl.zeros_like(mult) + top[:, None]
    slot = gl.zeros_like(pos_even).to(gl.uint64)
    zero_f = gl.zeros_like(mult)
    for c in range(0, BN // EV):
        s_even, s_odd, _b = _chunk_base(stage.index(c).load(cl), c, c_end, mult, zero_f, pos_even, pos_odd, BM, EV,
                                        MASKED)  # fmt: skip
        slot = slot + _tile_weight(s_even, m) + _tile_weight(s_odd, m)
    if NOISE == NOISE_TILE_NO_BASES:
        run = gl.zeros_like(slot)
        total = gl.sum(slot, axis=1)
    else:
        run, total = _slot_bases(slot, BM)
    total = gl.convert_layout(total, top.type.layout)
    if NOISE == NOISE_TILE_NO_DRAW:
        return total, gl.zeros_like(rows)
    zero = rows.to(gl.uint32) * 0
    w0, w1, w2, w3 = _philox(zero + tile_start.to(gl.uint32), rows.to(gl.uint32), zero, zero + TILE_STREAM, k0, k1,
                             N_ROUNDS)  # fmt: skip
    t_row = _mulhi(w0, w1, w2, w3, total)
    t = gl.zeros_like(run) + t_row[:, None]
    # The draw lies in the one slot whose weights straddle t: the slots wholly at or below t (all of them before
    # it in slot order) count all their tokens; pass 2 walks that slot's tokens only, each row's pair of every chunk
    # picked out of the chunk by a masked row maximum (one slot per row holds a finite score).
    incl = run + slot
    active = (run <= t) & (incl > t)
    below = gl.sum((incl <= t).to(gl.int32), axis=1)
    cum = gl.max(gl.where(active, run, 0), axis=1)
    count = gl.zeros_like(below)
    for c in range(0, BN // EV):
        s_even, s_odd, _b = _chunk_base(stage.index(c).load(cl), c, c_end, mult, zero_f, pos_even, pos_odd, BM, EV,
                                        MASKED)  # fmt: skip
        pick_even = gl.max(gl.where(active, s_even, float("-inf")), axis=1)
        pick_odd = gl.max(gl.where(active, s_odd, float("-inf")), axis=1)
        cum = cum + _tile_weight(pick_even, top)
        count = count + (cum <= t_row).to(gl.int32)
        cum = cum + _tile_weight(pick_odd, top)
        count = count + (cum <= t_row).to(gl.int32)
    per_slot: gl.constexpr = 2 * (BN // EV)
    n = gl.minimum(below * per_slot + count, BN - 1)  # (BN only for a tile of weight 0, which is never chosen)
    sr = n // per_slot  # the slot's rank: 4q + j
    r = n % per_slot
    return total, (r // 2) * EV + 8 * (sr % 4) + 2 * (sr // 4) + (r % 2)


@gluon.jit
def _scan_tile_filtered(stage, cl: gl.constexpr, c_end, tile_start, mult, slope, rows_u, pos_even, pos_odd, k0, k1,
                        BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr, N_ROUNDS: gl.constexpr,
                        MASKED: gl.constexpr):  # fmt: skip
    """The fast pass with the approximate filter: :func:`_scan_tile` on approximate scores.

    A token's approximate score is ``z / T + slope * A`` with ``A = approx_log2_exponential(x, top)`` (about
    12 instructions after Philox where the exact ``-log(E)`` takes about 35) and ``slope = -ln 2`` (0 for a
    greedy row).  Per slot the pass keeps the running maximum, its chunk and its ``z / T``, and the largest
    approximate score of the slot's other tokens (``second``), so that the tile's end can tell whether a
    row's approximate winner is certain.  Returns ``(max_even, max_odd, second_even, second_odd, base_even,
    base_odd, chunk_even, chunk_odd, bad)``, ``chunk = 2 * c`` (no tie bit: ties count as too close)."""
    run_even = gl.zeros_like(mult) + float("-inf")
    run_odd = gl.zeros_like(mult) + float("-inf")
    sec_even = gl.zeros_like(mult) + float("-inf")
    sec_odd = gl.zeros_like(mult) + float("-inf")
    base_even = gl.zeros_like(mult)
    base_odd = gl.zeros_like(mult)
    ct_even = gl.zeros_like(pos_even)
    ct_odd = gl.zeros_like(pos_even)
    bad = gl.zeros_like(mult)
    z = stage.index(0).load(cl)
    for c in range(0, BN // EV):
        z_next = stage.index(gl.minimum(c + 1, BN // EV - 1)).load(cl)  # (the last iteration reloads its own)
        b_even, b_odd, bad = _chunk_base(z, c, c_end, mult, bad, pos_even, pos_odd, BM, EV, MASKED)
        w0, w1, w2, w3 = _chunk_words(c, tile_start, pos_even, rows_u, k0, k1, EV, N_ROUNDS)
        x_even, top_even = _side(w0, w1)
        x_odd, top_odd = _side(w2, w3)
        s_even = b_even + _approx_log2_e(x_even, top_even) * slope
        s_odd = b_odd + _approx_log2_e(x_odd, top_odd) * slope
        c2 = c * 2
        gt = s_even > run_even
        ct_even = gl.where(gt, c2, ct_even)
        base_even = gl.where(gt, b_even, base_even)
        sec_even = gl.maximum(sec_even, gl.minimum(run_even, s_even))
        run_even = gl.maximum(run_even, s_even)
        gt = s_odd > run_odd
        ct_odd = gl.where(gt, c2, ct_odd)
        base_odd = gl.where(gt, b_odd, base_odd)
        sec_odd = gl.maximum(sec_odd, gl.minimum(run_odd, s_odd))
        run_odd = gl.maximum(run_odd, s_odd)
        z = z_next
    return run_even, run_odd, sec_even, sec_odd, base_even, base_odd, ct_even, ct_odd, bad


@gluon.jit
def _stage_tile(acc, stage, BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr):
    """Write the accumulator to the staging buffer ``stage`` (``[BN // EV * BM, EV]`` fp32) as ``BN // EV``
    chunks of ``[BM, EV]``: the accumulator's ``EV``-column chunks stacked as rows (reshapes and a permute
    of registers: no data moves).  Returns the buffer viewed as ``[BN // EV, BM, EV]`` (the swizzle repeats
    every 4 or 8 rows; BM is 64 or 128), which :func:`_staged_epilogue` reads chunk by chunk."""
    stage.store(gl.reshape(gl.permute(gl.reshape(acc, [BM, BN // EV, EV]), [1, 0, 2]), [BN // EV * BM, EV]))
    return stage._reinterpret(gl.float32, [BN // EV, BM, EV], stage.layout)


@gluon.jit
def _tile_epilogue(acc, stage, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                   part_key_ptr, part_idx_ptr, flag_ptr, BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr,
                   N_ROUNDS: gl.constexpr, NOISE: gl.constexpr):  # fmt: skip
    """The epilogue of one accumulator tile, run by the group that computed it: :func:`_stage_tile`, then
    :func:`_staged_epilogue`."""
    chunks = _stage_tile(acc, stage, BM, BN, EV)
    _staged_epilogue(chunks, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                     part_key_ptr, part_idx_ptr, flag_ptr, BM, BN, EV, N_ROUNDS, NOISE)  # fmt: skip


@gluon.jit
def _staged_epilogue(stage, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                     part_key_ptr, part_idx_ptr, flag_ptr, BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr,
                     N_ROUNDS: gl.constexpr, NOISE: gl.constexpr):  # fmt: skip
    """The epilogue of one staged tile (``stage``: ``[BN // EV, BM, EV]`` fp32 chunks, written by
    :func:`_stage_tile`; a group of 4 warps): a fast pass, and an exact pass for rare tiles.

    The chunks come back one by one in the chunk's NVMMA layout (the same columns in the same thread as
    the accumulator's); chunk ``c + 1`` is loaded before chunk ``c`` is processed.

    The fast pass (:func:`_scan_tile`) keeps per-thread running maxima; one reduction per row at the
    end gives the row's maximum ``M`` and its position.  It is exact unless ``M`` occurs more than
    once in the row (an exact float32 tie, decided by the tie-break keys) or the row holds a NaN or
    infinite logit or ``z / T`` (a flagged row: the element-wise test sets its bits).  If any row of
    the tile has either (one block-wide test per tile), the exact pass -- :func:`_merge_chunk` on
    8-column chunks, the previous epilogue -- recomputes the whole tile from the staging buffer.  Either
    way the candidates are those of the unstaged Triton kernel, bit for bit (the fast pass's part:
    proofs/argmax_decomposition.md, Proposition 4).  With ``NOISE == NOISE_FILTERED`` the fast pass is
    :func:`_scan_tile_filtered`: a row is also handed over when another token's approximate score comes within
    the filter's margin of its maximum, and a kept row's score is recomputed with the winner's exact noise
    (Proposition 5).  (Chunks taken as
    register views of the accumulator, without staging, were measured 1.1-1.9x slower:
    benchmarks/NOTES.md.)"""
    # The probes (filler_*, threefry_proxy) read N_ROUNDS as their own count; their tie keys keep Philox's 10 rounds.
    KEY_ROUNDS: gl.constexpr = 10 if NOISE >= NOISE_FILLER_FFMA and NOISE <= NOISE_THREEFRY_PROXY else N_ROUNDS
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
    if NOISE == NOISE_FILTERED:
        slope = noisy * -0.6931471805599453
        if c_end >= BN:
            run_even, run_odd, sec_even, sec_odd, base_even, base_odd, ct_even, ct_odd, bad = _scan_tile_filtered(
                stage, cl, c_end, tile_start, mult, slope, rows_u, pos_even, pos_odd, k0, k1, BM, BN, EV, N_ROUNDS,
                False,
            )  # fmt: skip
        else:
            run_even, run_odd, sec_even, sec_odd, base_even, base_odd, ct_even, ct_odd, bad = _scan_tile_filtered(
                stage, cl, c_end, tile_start, mult, slope, rows_u, pos_even, pos_odd, k0, k1, BM, BN, EV, N_ROUNDS,
                True,
            )  # fmt: skip
        # Per row: the approximate maximum, its copies, and the largest approximate score of the other tokens.
        top = gl.maximum(gl.max(run_even, axis=1), gl.max(run_odd, axis=1))
        hit_even = run_even == top[:, None]
        hit_odd = run_odd == top[:, None]
        n_hit = gl.sum(hit_even.to(gl.int32) + hit_odd.to(gl.int32), axis=1)
        other = gl.maximum(gl.max(gl.where(hit_even, sec_even, run_even), axis=1),
                           gl.max(gl.where(hit_odd, sec_odd, run_odd), axis=1))  # fmt: skip
        finite = top > float("-inf")
        bad = gl.sum(bad, axis=1)
        close = other >= top - (FILTER_ABS + FILTER_REL * gl.abs(top))
        exact = (finite & ((n_hit > 1) | close)) | (bad != bad)
    else:
        if c_end >= BN:
            run_even, run_odd, ct_even, ct_odd, bad = _scan_tile(
                stage, cl, c_end, tile_start, mult, noisy, rows_u, pos_even, pos_odd, k0, k1,
                BM, BN, EV, N_ROUNDS, NOISE, False,
            )  # fmt: skip
        else:
            run_even, run_odd, ct_even, ct_odd, bad = _scan_tile(
                stage, cl, c_end, tile_start, mult, noisy, rows_u, pos_even, pos_odd, k0, k1,
                BM, BN, EV, N_ROUNDS, NOISE, True,
            )  # fmt: skip
        # Per row: the maximum and its copies (slots holding it, and ties inside a slot).
        top = gl.maximum(gl.max(run_even, axis=1), gl.max(run_odd, axis=1))
        # The inverse-CDF draw, while the scan's state is all that is live.
        if NOISE >= NOISE_TILE_CDF and NOISE <= NOISE_TILE_NO_BASES:
            rows_t = pid_b * BM + gl.arange(0, BM, layout=top.type.layout)
            if c_end >= BN:
                total, draw = _tile_cdf_draw(stage, cl, c_end, mult, top, rows_t, tile_start, k0, k1, pos_even,
                                             pos_odd, BM, BN, EV, N_ROUNDS, False, NOISE)  # fmt: skip
            else:
                total, draw = _tile_cdf_draw(stage, cl, c_end, mult, top, rows_t, tile_start, k0, k1, pos_even,
                                             pos_odd, BM, BN, EV, N_ROUNDS, True, NOISE)  # fmt: skip
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
                m_x, pos_x, flag_x = _merge_chunk(
                    z, c * (EV // 8) + s, pid_b, pid_v, B, V, col_offset, inv_temp_ptr, k0, k1, m_x, pos_x, flag_x,
                    BM, BN, 8, KEY_ROUNDS, NOISE,
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
        if NOISE == NOISE_FILTERED:
            # The winner is certain; its exact score: its z / T (kept by the scan) and its exact noise, in the
            # operations of the exact fast pass (z / T - log(E) * noisy).
            base = gl.maximum(gl.max(gl.where(hit_even, base_even, float("-inf")), axis=1),
                              gl.max(gl.where(hit_odd, base_odd, float("-inf")), axis=1))  # fmt: skip
            base = gl.convert_layout(base, vec)
            index = (tile_start + pos).to(gl.uint32)
            zero = index * 0
            w0, w1, w2, w3 = _philox(index >> 1, rows.to(gl.uint32), zero, zero, k0, k1, N_ROUNDS)
            odd = (index & 1) == 1
            log_e = _log(_exponential(gl.where(odd, w2, w0), gl.where(odd, w3, w1)))
            m = base - log_e * gl.where(greedy, 0.0, 1.0)
            m = gl.where(gl.convert_layout(finite, vec), m, float("-inf"))
        else:
            m = gl.convert_layout(top, vec)
    idx = col_offset + pid_v.to(gl.int64) * BN + pos
    key = _tie_key(k0, k1, rows.to(gl.uint32), idx.to(gl.uint32), KEY_ROUNDS).to(gl.int64)
    if NOISE >= NOISE_TILE_CDF and NOISE <= NOISE_TILE_NO_BASES:
        # A row with T > 0: (m, Q, the inverse-CDF draw) in place of (max, key, argmax); a greedy row keeps its
        # noise-free candidate, which stage 2 takes by (max, key) as the Gumbel sampler's greedy rows.
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
def _bare_epilogue(acc, pid_b, pid_v, num_v_tiles, B, part_max_ptr, BM: gl.constexpr):
    """Timing mode ``bare``, not a sampler: each row's maximum logit of the tile, written to ``part_max``.
    With it the kernel is the matmul and the pipeline with the cheapest epilogue that keeps the MMAs
    live (``benchmarks/power_probe.py`` times the sampler's epilogue against it)."""
    vec: gl.constexpr = gl.SliceLayout(1, acc.type.layout)
    rows = pid_b * BM + gl.arange(0, BM, layout=vec)
    gl.store(part_max_ptr + rows.to(gl.int64) * num_v_tiles + pid_v, gl.max(acc, axis=1), mask=rows < B)


@gluon.jit
def _register_argmax_epilogue(acc, pid_b, pid_v, num_v_tiles, B, inv_temp_ptr, part_max_ptr, part_idx_ptr,
                              BM: gl.constexpr, BN: gl.constexpr):  # fmt: skip
    """Timing mode ``register_argmax``, not a sampler: each row's maximum of ``z / T`` and its first column, from
    the accumulator's registers (a row's columns lie in the 4 threads of a quad), written to ``part_max`` and
    ``part_idx``."""
    layout: gl.constexpr = acc.type.layout
    vec: gl.constexpr = gl.SliceLayout(1, layout)
    rows = pid_b * BM + gl.arange(0, BM, layout=vec)
    row_ok = rows < B
    inv = gl.load(inv_temp_ptr + rows.to(gl.int64), mask=row_ok, other=1.0)
    scores = acc * inv[:, None]
    m = gl.max(scores, axis=1)
    cols = gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
    pos = gl.min(gl.where(scores == m[:, None], cols[None, :], BN), axis=1)
    off = rows.to(gl.int64) * num_v_tiles + pid_v
    gl.store(part_max_ptr + off, m, mask=row_ok)
    gl.store(part_idx_ptr + off, pid_v.to(gl.int64) * BN + pos, mask=row_ok)


@gluon.jit
def _staged_bare_epilogue(stage, pid_b, pid_v, num_v_tiles, B, part_max_ptr, BM: gl.constexpr, BN: gl.constexpr,
                          EV: gl.constexpr):  # fmt: skip
    """Timing mode ``staged_bare``, not a sampler: the staged tile (``[BN // EV, BM, EV]`` chunks, as the sampler's
    epilogue reads them) read back for each row's maximum, written to ``part_max``."""
    cl: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, EV, 16])
    run = gl.full([BM, EV], float("-inf"), gl.float32, cl)
    for c in range(0, BN // EV):
        run = gl.maximum(run, stage.index(c).load(cl))
    m = gl.max(run, axis=1)
    rows = pid_b * BM + gl.arange(0, BM, layout=m.type.layout)
    gl.store(part_max_ptr + rows.to(gl.int64) * num_v_tiles + pid_v, m, mask=rows < B)


@gluon.jit
def _consumer(args, CONSUMER: gl.constexpr, NC: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
              STAGES: gl.constexpr, NUM_PROGRAMS: gl.constexpr, EV: gl.constexpr, N_ROUNDS: gl.constexpr,
              NOISE: gl.constexpr, MODE: gl.constexpr, STAGE_PER_GROUP: gl.constexpr):  # fmt: skip
    """Consumer warp group ``CONSUMER`` of ``NC``: the K loop and the epilogue of tiles ``CONSUMER``,
    ``CONSUMER + NC``, ... of this program's list (``MODE``: see :data:`MODES`)."""
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
        if MODE == MODE_EPILOGUE_ALONE:
            # No matmul: distinct finite values (no exact ties, so the fast pass decides every tile).
            r = gl.arange(0, BM, layout=gl.SliceLayout(1, mma))
            c = gl.arange(0, BN, layout=gl.SliceLayout(0, mma))
            acc = ((r[:, None] * 7919 + c[None, :] + pid_v * BN) % 65521).to(gl.float32) * 1e-4
        else:
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
        # The epilogue, while the other groups' K loops run.
        if MODE == MODE_BARE:
            _bare_epilogue(acc, pid_b, pid_v, num_v_tiles, B, part_max_ptr, BM)
        elif MODE == MODE_REGISTER_ARGMAX:
            _register_argmax_epilogue(acc, pid_b, pid_v, num_v_tiles, B, inv_temp_ptr, part_max_ptr, part_idx_ptr,
                                      BM, BN)  # fmt: skip
        else:
            # A shared staging buffer is ours once tile i - 1's epilogue (the previous group's) is done with it.
            if not STAGE_PER_GROUP:
                mbarrier.wait(staged.index(CONSUMER), phase, pred=i > 0)
            buffer = stage.index(CONSUMER if STAGE_PER_GROUP else 0)
            if MODE == MODE_STAGED_BARE:
                _staged_bare_epilogue(_stage_tile(acc, buffer, BM, BN, EV), pid_b, pid_v, num_v_tiles, B, part_max_ptr,
                                      BM, BN, EV)  # fmt: skip
            else:
                _tile_epilogue(
                    acc, buffer, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                    part_key_ptr, part_idx_ptr, flag_ptr, BM, BN, EV, N_ROUNDS, NOISE,
                )  # fmt: skip
            if not STAGE_PER_GROUP:
                mbarrier.arrive(staged.index((CONSUMER + 1) % NC), count=1)


@gluon.jit(do_not_specialize=["seed_lo", "seed_hi", "col_offset"])
def fused_pingpong_kernel(h_desc, w_desc, inv_temp_ptr, part_max_ptr, part_key_ptr, part_idx_ptr, flag_ptr,
                          B, V, D, col_offset, seed_lo, seed_hi, STAGES: gl.constexpr,
                          NUM_PROGRAMS: gl.constexpr, EV: gl.constexpr, N_ROUNDS: gl.constexpr, NOISE: gl.constexpr,
                          NC: gl.constexpr, CONSUMER_REGS: gl.constexpr, MODE: gl.constexpr = 0,
                          STAGE_PER_GROUP: gl.constexpr = False):  # fmt: skip
    """Persistent, warp-specialized ``(B,D) @ (D,V) -> per (row, BN tile) argmax(z / T + G)`` with
    ``NC`` (2 or 3) consumer warp groups (``MODE``: :data:`MODES`)."""
    BM: gl.constexpr = h_desc.block_type.shape[0]
    BK: gl.constexpr = h_desc.block_type.shape[1]
    BN: gl.constexpr = w_desc.block_type.shape[0]
    a_bufs = gl.allocate_shared_memory(h_desc.dtype, [STAGES] + h_desc.block_type.shape, h_desc.layout)
    b_bufs = gl.allocate_shared_memory(w_desc.dtype, [STAGES] + w_desc.block_type.shape, w_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [NC, 1], mbarrier.MBarrierLayout())
    staged = gl.allocate_shared_memory(gl.int64, [NC, 1], mbarrier.MBarrierLayout())
    # One staging buffer for the epilogues, which take it in tile order.  The swizzle spreads the 8 rows
    # of an accumulator store (8-byte pairs) over all 32 banks: two wavefronts, the minimum.
    stage_layout: gl.constexpr = gl.SwizzledSharedLayout(
        vec=8, per_phase=max(1, 32 // EV), max_phase=min(8, EV // 8), order=[1, 0]
    )
    # One buffer that the groups take in turn, or (STAGE_PER_GROUP, where shared memory allows) one per group.
    stage = gl.allocate_shared_memory(gl.float32, [NC if STAGE_PER_GROUP else 1, BN // EV * BM, EV], stage_layout)
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    for i in gl.static_range(NC):
        mbarrier.init(turn.index(i), count=1)
        mbarrier.init(staged.index(i), count=1)
    args = (a_bufs, b_bufs, ready, empty, turn, stage, staged, inv_temp_ptr, part_max_ptr, part_key_ptr, part_idx_ptr,
            flag_ptr, B, V, D, col_offset, seed_lo, seed_hi)  # fmt: skip
    loads = (h_desc, w_desc, a_bufs, b_bufs, ready, empty, B, V, D, BM, BN, BK, STAGES, NUM_PROGRAMS, MODE)
    SPG: gl.constexpr = STAGE_PER_GROUP
    if NC == 2:
        gl.warp_specialize(
            [
                (_consumer, (args, 0, NC, BM, BN, BK, STAGES, NUM_PROGRAMS, EV, N_ROUNDS, NOISE, MODE, SPG)),
                (_consumer, (args, 1, NC, BM, BN, BK, STAGES, NUM_PROGRAMS, EV, N_ROUNDS, NOISE, MODE, SPG)),
                (_load_partition, loads),
            ],
            [4, 1],
            [CONSUMER_REGS, 24],
        )
    else:
        gl.static_assert(NC == 3, "2 or 3 consumer warp groups")
        gl.warp_specialize(
            [
                (_consumer, (args, 0, NC, BM, BN, BK, STAGES, NUM_PROGRAMS, EV, N_ROUNDS, NOISE, MODE, SPG)),
                (_consumer, (args, 1, NC, BM, BN, BK, STAGES, NUM_PROGRAMS, EV, N_ROUNDS, NOISE, MODE, SPG)),
                (_consumer, (args, 2, NC, BM, BN, BK, STAGES, NUM_PROGRAMS, EV, N_ROUNDS, NOISE, MODE, SPG)),
                (_load_partition, loads),
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
    the positional arguments that the Gluon stage-1 kernels (this module's and :mod:`.handoff`'s) share."""
    B, D = hidden.shape
    V = weight.shape[0]
    num_tiles = cdiv(B, tiles.block_b) * cdiv(V, tiles.block_v)
    progs = programs or num_programs(hidden.device, num_tiles)
    part_max, part_key, part_idx, flags, _ = parts
    args = (*tma_descriptors(hidden, weight, tiles), inv_temp, part_max, part_key, part_idx, flags,
            B, V, D, col_offset, seed_lo, seed_hi)  # fmt: skip
    return progs, args


def noise_switch(noise: bool, noise_filter: bool = False) -> int:
    """The kernels' ``NOISE`` constant (:data:`NOISES`)."""
    return NOISES[("filtered" if noise_filter else "exact") if noise else "off"]


def launch_registers(groups: int) -> int:
    """Registers per thread at launch: the consumer groups and the loader's group (4 warps each)
    share the SM's 64K (168 for 2 groups, 128 for 3); the loader gives back all but 24."""
    return 65536 // ((groups + 1) * 4 * 32) // 8 * 8


def default_consumer_registers(groups: int) -> int:
    """Registers per consumer thread after the loader's give-back (232 for 2 groups, 160 for 3)."""
    return (launch_registers(groups) * (groups + 1) - 24) // groups // 8 * 8


def check_timing_options(mode: str, noise_mode: str | None) -> None:
    """``ValueError`` naming the argument unless ``mode`` is a key of :data:`MODES` and ``noise_mode`` is ``None``
    or a key of :data:`NOISES`."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} must be one of {sorted(MODES)}")
    if noise_mode is not None and noise_mode not in NOISES:
        raise ValueError(f"noise_mode={noise_mode!r} must be None or one of {sorted(NOISES)}")


def launch_pingpong(
    hidden, weight, inv_temp, parts, seed_lo, seed_hi, tiles, *, col_offset, n_rounds, noise, programs=None,
    mode="sample", stage_per_group=False, noise_filter=False, noise_mode=None,
):  # fmt: skip
    """Launch :func:`fused_pingpong_kernel` into the candidate buffers ``parts`` (one candidate per
    ``block_v`` tile); returns the compiled kernel.  ``tiles``: ``block_b x block_v`` tiles,
    ``block_d`` K blocks, ``num_stages`` ring slots, ``epilogue_v`` chunks, ``warp_groups`` consumer
    groups with ``max_registers`` each.  ``programs`` overrides the one-per-SM grid (tests: several
    tiles per program on small inputs); ``mode``: a key of :data:`MODES` (``"sample"``, or a timing mode).
    ``stage_per_group`` (experimental, for the benchmarks; not run on a GPU yet): one staging buffer per
    consumer group, so that the groups' epilogues may overlap, where ``warp_groups`` buffers of
    ``block_b x block_v`` fp32 fit beside the ring (for example three groups on 64 x 128 tiles with 5 stages).
    ``noise_filter``: the fast pass ranks tokens by the approximate noise (:data:`NOISE_FILTERED`; the same
    candidates) or computes the exact noise of every token (``exact`` in :data:`NOISES`, for the benchmarks).
    ``noise_mode``, a key of :data:`NOISES`, overrides both (the benchmarks' ``lse_proxy``)."""
    check_timing_options(mode, noise_mode)
    nc = tiles.warp_groups
    progs, args = kernel_arguments(hidden, weight, inv_temp, parts, seed_lo, seed_hi, tiles, col_offset, programs)
    return direct(fused_pingpong_kernel)[(progs,)](
        *args,
        STAGES=tiles.num_stages, NUM_PROGRAMS=progs, EV=tiles.epilogue_v, N_ROUNDS=n_rounds, NC=nc,
        NOISE=noise_switch(noise, noise_filter) if noise_mode is None else NOISES[noise_mode],
        CONSUMER_REGS=tiles.max_registers or default_consumer_registers(nc), MODE=MODES[mode],
        STAGE_PER_GROUP=stage_per_group, num_warps=4,
        maxnreg=launch_registers(nc),
    )  # fmt: skip


def compile_offline(
    tiles, element: str = "bf16", mode: str = "sample", stage_per_group: bool = False, noise: str | None = None
):
    """Compile :func:`fused_pingpong_kernel` for sm_90a without a GPU (triton ships ``ptxas``).

    Returns the compiled kernel (``.asm["ptx"]``, ``.metadata.shared``), for the CPU test that the
    kernel builds and does not spill (``tests/test_pingpong.py``).  Needs compiled mode
    (``FLASHSAMPLING_INTERPRET=0``): in the interpreter, Gluon kernels are not compiled.  ``noise``, a key of
    :data:`NOISES`, overrides the noise that ``tiles`` selects (exact, or filtered with ``tiles.noise_filter``).
    """
    check_timing_options(mode, noise)
    nc = tiles.warp_groups
    regs = tiles.max_registers or default_consumer_registers(nc)
    code = noise_switch(True, tiles.noise_filter) if noise is None else NOISES[noise]
    constexprs = {"STAGES": tiles.num_stages, "NUM_PROGRAMS": 132, "EV": tiles.epilogue_v, "N_ROUNDS": 10,
                  "NOISE": code, "NC": nc, "CONSUMER_REGS": regs, "MODE": MODES[mode],
                  "STAGE_PER_GROUP": stage_per_group}  # fmt: skip
    return compile_sm90(fused_pingpong_kernel, tiles, element, constexprs, launch_registers(nc))


def compile_sm90(kernel, tiles, element: str, constexprs: dict, maxnreg: int):
    """Compile a Gluon stage-1 kernel with this module's argument list (descriptors, candidate buffers,
    sizes, seed) for sm_90a, without a GPU, with the given compile-time constants and register cap."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime.jit import mangle_type

    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[element]
    h_desc, w_desc = tma_descriptors(torch.empty(256, 4096, dtype=dt), torch.empty(1024, 4096, dtype=dt), tiles)
    signature = {"h_desc": mangle_type(h_desc), "w_desc": mangle_type(w_desc), "inv_temp_ptr": "*fp32",
                 "part_max_ptr": "*fp32", "part_key_ptr": "*i64", "part_idx_ptr": "*i64", "flag_ptr": "*i32",
                 "B": "i32", "V": "i32", "D": "i32", "col_offset": "i32",
                 "seed_lo": "i32", "seed_hi": "i32"}  # fmt: skip
    src = GluonASTSource(fn=kernel, signature=signature, constexprs=constexprs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "maxnreg": maxnreg})
