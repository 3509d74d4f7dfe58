"""The approximate filter: the Gluon kernel's fast pass ranks tokens by a cheaper noise (a probe, not a default).

The fast pass ranks tokens by ``z / T + slope * A`` with ``A = approx_log2_exponential(x, top)``
(:mod:`benchmarks.probes.approx_noise`: about 12 instructions after Philox where the exact ``-log(E)`` takes about
35) and recomputes each row's winner exactly; rows whose two best approximate scores are within the margin
``2 * APPROX_GUMBEL_TOL + 2**-20 |top|`` go to the shipped exact pass (proofs/argmax_decomposition.md, Proposition 5).
The candidates equal the shipped kernel's bit for bit (``tests/test_probes.py`` on the H200), with about a third
fewer instructions per token; on the H200 it measured -7% to +4% at B = 256 and 2-4% slower at B = 64 and 128
(``benchmarks/results/filter_probe_session9_h200.json``, ``epilogue_probe_filter_h200.json``), so the product
computes the exact noise of every token.

:func:`filter_epilogue` is the shipped kernel's ``EPILOGUE`` for it (:func:`filtered_staged_epilogue` on the staged
tile; the handoff probe runs that one too).  :func:`filtered_staged_epilogue` is the shipped
:func:`~flashsampling.kernels.pingpong.staged_epilogue` written again with the filter's scan, margin test and
recomputed winner, calling the shipped ``chunk_base``, ``chunk_words``, ``merge_chunk`` and ``tie_key_gl``: splitting
the shipped function into shared pieces would change the shipped kernel's SASS.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from flashsampling.kernels.pingpong import (
    NOISE_EXACT,
    chunk_base,
    chunk_words,
    exponential_gl,
    log_gl,
    merge_chunk,
    philox4x32_gl,
    stage_tile,
    tie_key_gl,
)
from flashsampling.noise import uniform_side_from_bits

from .approx_noise import APPROX_GUMBEL_TOL, approx_log2_exponential

side_gl = gluon.jit(getattr(uniform_side_from_bits, "fn", uniform_side_from_bits))
approx_log2_exponential_gl = gluon.jit(getattr(approx_log2_exponential, "fn", approx_log2_exponential))
#: The filter's margin: a row's approximate winner stands if every other token's approximate score is below
#: ``top - (2 * APPROX_GUMBEL_TOL + 2**-20 * |top|)`` (proofs/argmax_decomposition.md, Proposition 5).
FILTER_ABS = gl.constexpr(2.0 * APPROX_GUMBEL_TOL)
FILTER_REL = gl.constexpr(2.0**-20)


@gluon.jit
def scan_tile_filtered(stage, cl: gl.constexpr, c_end, tile_start, mult, slope, rows_u, pos_even, pos_odd, k0, k1,
                       BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr, N_ROUNDS: gl.constexpr,
                       MASKED: gl.constexpr):  # fmt: skip
    """The fast pass with the approximate filter: :func:`~flashsampling.kernels.pingpong.scan_tile` on approximate
    scores.

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
        b_even, b_odd, bad = chunk_base(z, c, c_end, mult, bad, pos_even, pos_odd, BM, EV, MASKED)
        w0, w1, w2, w3 = chunk_words(c, tile_start, pos_even, rows_u, k0, k1, EV, N_ROUNDS)
        x_even, top_even = side_gl(w0, w1)
        x_odd, top_odd = side_gl(w2, w3)
        s_even = b_even + approx_log2_exponential_gl(x_even, top_even) * slope
        s_odd = b_odd + approx_log2_exponential_gl(x_odd, top_odd) * slope
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
def filtered_staged_epilogue(stage, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                             part_key_ptr, part_idx_ptr, flag_ptr, BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr,
                             N_ROUNDS: gl.constexpr, NOISE: gl.constexpr, SCAN: gl.constexpr = scan_tile_filtered,
                             HIGH_WORDS: gl.constexpr = 0, MARGIN: gl.constexpr = 0.0):  # fmt: skip
    """:func:`flashsampling.kernels.pingpong.staged_epilogue` with the filtered fast pass: a row is also handed to
    the exact pass when another token's approximate score comes within the filter's margin of its maximum, and a
    kept row's score is recomputed with the winner's exact noise (Proposition 5).  ``NOISE`` is not read.

    The probes of :mod:`.high_words` pass their own ``SCAN`` (bounds from the high words of a shared block), a
    ``HIGH_WORDS`` count (4 or 8 tokens per block: the winner is refined with two blocks, its high words and its low
    word) and an extra ``MARGIN`` for their wider bounds; the filter's values are the defaults."""
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
    slope = noisy * -0.6931471805599453
    if c_end >= BN:
        run_even, run_odd, sec_even, sec_odd, base_even, base_odd, ct_even, ct_odd, bad = SCAN(
            stage, cl, c_end, tile_start, mult, slope, rows_u, pos_even, pos_odd, k0, k1, BM, BN, EV, N_ROUNDS,
            False,
        )  # fmt: skip
    else:
        run_even, run_odd, sec_even, sec_odd, base_even, base_odd, ct_even, ct_odd, bad = SCAN(
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
    if MARGIN > 0.0:
        close = other >= top - (FILTER_ABS + FILTER_REL * gl.abs(top) + MARGIN)
    else:
        close = other >= top - (FILTER_ABS + FILTER_REL * gl.abs(top))
    exact = (finite & ((n_hit > 1) | close)) | (bad != bad)
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
                    BM, BN, 8, N_ROUNDS, NOISE_EXACT,
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
        # The winner is certain; its exact score: its z / T (kept by the scan) and its exact noise, in the
        # operations of the exact fast pass (z / T - log(E) * noisy).
        base = gl.maximum(gl.max(gl.where(hit_even, base_even, float("-inf")), axis=1),
                          gl.max(gl.where(hit_odd, base_odd, float("-inf")), axis=1))  # fmt: skip
        base = gl.convert_layout(base, vec)
        index = (tile_start + pos).to(gl.uint32)
        zero = index * 0
        odd = (index & 1) == 1
        if HIGH_WORDS == 0:
            w0, w1, w2, w3 = philox4x32_gl(index >> 1, rows.to(gl.uint32), zero, zero, k0, k1, N_ROUNDS)
            log_e = log_gl(exponential_gl(gl.where(odd, w2, w0), gl.where(odd, w3, w1)))
        else:
            # The probes' refinement: the winner's high word (its shared block) and its low word (a second block).
            h0, h1, h2, h3 = philox4x32_gl(index >> 2, rows.to(gl.uint32), zero, zero + 5, k0, k1, N_ROUNDS)
            l0, l1, l2, l3 = philox4x32_gl(index >> 1, rows.to(gl.uint32), zero, zero + 6, k0, k1, N_ROUNDS)
            w_hi = gl.where((index & 32) != 0, gl.where(odd, h3, h2), gl.where(odd, h1, h0))
            log_e = log_gl(exponential_gl(gl.where(odd, l2, l0), w_hi))
        m = base - log_e * gl.where(greedy, 0.0, 1.0)
        m = gl.where(gl.convert_layout(finite, vec), m, float("-inf"))
    idx = col_offset + pid_v.to(gl.int64) * BN + pos
    key = tie_key_gl(k0, k1, rows.to(gl.uint32), idx.to(gl.uint32), N_ROUNDS).to(gl.int64)
    off = rows.to(gl.int64) * num_v_tiles + pid_v
    gl.store(part_max_ptr + off, m, mask=row_ok)
    gl.store(part_key_ptr + off, key, mask=row_ok)
    gl.store(part_idx_ptr + off, idx, mask=row_ok)
    gl.store(flag_ptr + off, flag, mask=row_ok)


@gluon.jit
def filter_epilogue(acc, stage, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                    part_key_ptr, part_idx_ptr, flag_ptr, BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr,
                    N_ROUNDS: gl.constexpr, NOISE: gl.constexpr):  # fmt: skip
    """The shipped kernel's ``EPILOGUE`` with the filter: stage the tile, then :func:`filtered_staged_epilogue`."""
    chunks = stage_tile(acc, stage, BM, BN, EV)
    filtered_staged_epilogue(chunks, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                             part_key_ptr, part_idx_ptr, flag_ptr, BM, BN, EV, N_ROUNDS, NOISE)  # fmt: skip
