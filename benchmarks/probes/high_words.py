"""Fewer random bits per token (issue 28, lever 1): timing probes that draw only each token's high bits eagerly.

A token's 64-bit uniform is ``hi * 2**32 + lo``.  The probes' fast pass draws only the high parts, several tokens
per Philox-4x32-10 block, and bounds each token's noise from above by evaluating the approximate noise
(:func:`~benchmarks.probes.approx_noise.approx_log2_exponential`) at the end of the uniform's interval that maximizes
it; per slot the scan keeps the largest and second-largest bound.  At the tile's end each row's best token is
refined (its high part again and its low word from a second block: two blocks per row and tile) and the row stands
when no other token's bound comes within the margin, else it goes to the shipped exact pass -- the filtered
epilogue of :mod:`.approx_filter` with these scans:

* ``quad_hi``: one block per four tokens, the 32-bit high words of a slot's pair in chunks ``c`` and ``c + 1``;
* ``oct_hi``: one block per eight tokens, 16-bit high parts of a slot's pair in chunks ``c`` to ``c + 3`` (the
  ``2**-16`` interval's wider bounds priced by a ``2**-9`` margin).

Their tokens are not a checked stream (the exact pass uses the pair stream): they price the work only.  Measured on
the H200 (``benchmarks/results/quad_probe_h200.json``, ``quad_probe_rounds_h200.json``, ``oct_probe_h200.json``;
benchmarks/NOTES.md): ``quad_hi`` costs +0.077 to +0.117 ms over the noise-free kernel at 151936 x 4096, B = 256
(the issue's cap was 0.07), Philox being 0.071 of it; ``oct_hi`` sends so many tiles to the exact pass that it
takes 1.02 ms there.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from flashsampling.kernels.pingpong import chunk_base, philox4x32_gl, stage_tile

from .approx_filter import approx_log2_exponential_gl, filtered_staged_epilogue

#: The extra margin of ``oct_hi``'s certainty test for its ``2**-16``-wide bounds.
OCT_MARGIN = gl.constexpr(2.0**-9)


@gluon.jit
def hi_word_bound_x(h):
    """``(x, top)`` of :func:`flashsampling.noise.uniform_side_from_bits` at the end of the uniform's ``2**-32``
    interval fixed by its high word ``h`` that maximizes the noise (``U`` up to ``(h + 1) 2**-32`` when ``top == 0``;
    ``1 - U`` down to ``m1 2**-32 + 2**-65`` when ``top == 1``)."""
    top = h >> 31
    m1 = gl.where(top == 1, h ^ 0xFFFFFFFF, h) & 0x7FFFFFFF
    low = gl.where(top == 1, 2.710505431213761e-20, 2.3283064365386963e-10)
    x = (m1 >> 8).to(gl.float32) * 5.960464477539063e-08 + ((m1 & 0xFF).to(gl.float32) * 2.3283064365386963e-10 + low)
    return x, top


@gluon.jit
def hi16_bound_x(h):
    """As :func:`hi_word_bound_x` for a 16-bit high part ``h`` (a ``2**-16`` interval)."""
    top = h >> 15
    m = gl.where(top == 1, h ^ 0xFFFF, h) & 0x7FFF
    x = m.to(gl.float32) * 1.52587890625e-05 + gl.where(top == 1, 2.710505431213761e-20, 1.52587890625e-05)
    return x, top


@gluon.jit
def bound_update(b, x, top, slope, c2, run, sec, base, ct):
    """One token's bound ``b + slope * A(x, top)`` into its slot's running (max, second, ``z / T`` of the max,
    chunk of the max)."""
    s = b + approx_log2_exponential_gl(x, top) * slope
    gt = s > run
    ct = gl.where(gt, c2, ct)
    base = gl.where(gt, b, base)
    sec = gl.maximum(sec, gl.minimum(run, s))
    run = gl.maximum(run, s)
    return run, sec, base, ct


@gluon.jit
def scan_tile_quad(stage, cl: gl.constexpr, c_end, tile_start, mult, slope, rows_u, pos_even, pos_odd, k0, k1,
                   BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr, N_ROUNDS: gl.constexpr,
                   MASKED: gl.constexpr):  # fmt: skip
    """``quad_hi``'s fast pass: :func:`~benchmarks.probes.approx_filter.scan_tile_filtered`'s returns, one block per
    chunks ``c`` and ``c + 1`` (words: even and odd token of chunk ``c``, then of chunk ``c + 1``)."""
    run_even = gl.zeros_like(mult) + float("-inf")
    run_odd = gl.zeros_like(mult) + float("-inf")
    sec_even = gl.zeros_like(mult) + float("-inf")
    sec_odd = gl.zeros_like(mult) + float("-inf")
    base_even = gl.zeros_like(mult)
    base_odd = gl.zeros_like(mult)
    ct_even = gl.zeros_like(pos_even)
    ct_odd = gl.zeros_like(pos_even)
    bad = gl.zeros_like(mult)
    for c in range(0, BN // EV, 2):
        z0 = stage.index(c).load(cl)
        z1 = stage.index(c + 1).load(cl)
        b0_even, b0_odd, bad = chunk_base(z0, c, c_end, mult, bad, pos_even, pos_odd, BM, EV, MASKED)
        b1_even, b1_odd, bad = chunk_base(z1, c + 1, c_end, mult, bad, pos_even, pos_odd, BM, EV, MASKED)
        quad = ((tile_start + c * EV) // 4 + (pos_even >> 1)).to(gl.uint32)
        zero = quad * 0
        w0, w1, w2, w3 = philox4x32_gl(quad, rows_u, zero, zero + 5, k0, k1, N_ROUNDS)
        x, top = hi_word_bound_x(w0)
        run_even, sec_even, base_even, ct_even = bound_update(b0_even, x, top, slope, c * 2, run_even, sec_even,
                                                              base_even, ct_even)  # fmt: skip
        x, top = hi_word_bound_x(w1)
        run_odd, sec_odd, base_odd, ct_odd = bound_update(b0_odd, x, top, slope, c * 2, run_odd, sec_odd, base_odd,
                                                          ct_odd)  # fmt: skip
        x, top = hi_word_bound_x(w2)
        run_even, sec_even, base_even, ct_even = bound_update(b1_even, x, top, slope, c * 2 + 2, run_even, sec_even,
                                                              base_even, ct_even)  # fmt: skip
        x, top = hi_word_bound_x(w3)
        run_odd, sec_odd, base_odd, ct_odd = bound_update(b1_odd, x, top, slope, c * 2 + 2, run_odd, sec_odd, base_odd,
                                                          ct_odd)  # fmt: skip
    return run_even, run_odd, sec_even, sec_odd, base_even, base_odd, ct_even, ct_odd, bad


@gluon.jit
def oct_chunk(stage, c, cl: gl.constexpr, c_end, mult, slope, bad, pos_even, pos_odd, w, run_even, sec_even,
              base_even, ct_even, run_odd, sec_odd, base_odd, ct_odd, BM: gl.constexpr, EV: gl.constexpr,
              MASKED: gl.constexpr):  # fmt: skip
    """Chunk ``c`` of ``oct_hi``'s pass: its even and odd tokens' 16-bit high parts are the halves of ``w``."""
    b_even, b_odd, bad = chunk_base(stage.index(c).load(cl), c, c_end, mult, bad, pos_even, pos_odd, BM, EV, MASKED)
    x, top = hi16_bound_x(w & 0xFFFF)
    run_even, sec_even, base_even, ct_even = bound_update(b_even, x, top, slope, c * 2, run_even, sec_even, base_even,
                                                          ct_even)  # fmt: skip
    x, top = hi16_bound_x(w >> 16)
    run_odd, sec_odd, base_odd, ct_odd = bound_update(b_odd, x, top, slope, c * 2, run_odd, sec_odd, base_odd,
                                                      ct_odd)  # fmt: skip
    return bad, run_even, sec_even, base_even, ct_even, run_odd, sec_odd, base_odd, ct_odd


@gluon.jit
def scan_tile_oct(stage, cl: gl.constexpr, c_end, tile_start, mult, slope, rows_u, pos_even, pos_odd, k0, k1,
                  BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr, N_ROUNDS: gl.constexpr,
                  MASKED: gl.constexpr):  # fmt: skip
    """``oct_hi``'s fast pass: one block per chunks ``c`` to ``c + 3`` (word ``i`` for chunk ``c + i``)."""
    run_even = gl.zeros_like(mult) + float("-inf")
    run_odd = gl.zeros_like(mult) + float("-inf")
    sec_even = gl.zeros_like(mult) + float("-inf")
    sec_odd = gl.zeros_like(mult) + float("-inf")
    base_even = gl.zeros_like(mult)
    base_odd = gl.zeros_like(mult)
    ct_even = gl.zeros_like(pos_even)
    ct_odd = gl.zeros_like(pos_even)
    bad = gl.zeros_like(mult)
    for c in range(0, BN // EV, 4):
        octet = ((tile_start + c * EV) // 8 + (pos_even >> 1)).to(gl.uint32)
        zero = octet * 0
        w0, w1, w2, w3 = philox4x32_gl(octet, rows_u, zero, zero + 7, k0, k1, N_ROUNDS)
        bad, run_even, sec_even, base_even, ct_even, run_odd, sec_odd, base_odd, ct_odd = oct_chunk(
            stage, c, cl, c_end, mult, slope, bad, pos_even, pos_odd, w0, run_even, sec_even, base_even, ct_even,
            run_odd, sec_odd, base_odd, ct_odd, BM, EV, MASKED)  # fmt: skip
        bad, run_even, sec_even, base_even, ct_even, run_odd, sec_odd, base_odd, ct_odd = oct_chunk(
            stage, c + 1, cl, c_end, mult, slope, bad, pos_even, pos_odd, w1, run_even, sec_even, base_even, ct_even,
            run_odd, sec_odd, base_odd, ct_odd, BM, EV, MASKED)  # fmt: skip
        bad, run_even, sec_even, base_even, ct_even, run_odd, sec_odd, base_odd, ct_odd = oct_chunk(
            stage, c + 2, cl, c_end, mult, slope, bad, pos_even, pos_odd, w2, run_even, sec_even, base_even, ct_even,
            run_odd, sec_odd, base_odd, ct_odd, BM, EV, MASKED)  # fmt: skip
        bad, run_even, sec_even, base_even, ct_even, run_odd, sec_odd, base_odd, ct_odd = oct_chunk(
            stage, c + 3, cl, c_end, mult, slope, bad, pos_even, pos_odd, w3, run_even, sec_even, base_even, ct_even,
            run_odd, sec_odd, base_odd, ct_odd, BM, EV, MASKED)  # fmt: skip
    return run_even, run_odd, sec_even, sec_odd, base_even, base_odd, ct_even, ct_odd, bad


@gluon.jit
def quad_epilogue(acc, stage, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                  part_key_ptr, part_idx_ptr, flag_ptr, BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr,
                  N_ROUNDS: gl.constexpr, NOISE: gl.constexpr):  # fmt: skip
    """The shipped kernel's ``EPILOGUE`` for ``quad_hi``."""
    chunks = stage_tile(acc, stage, BM, BN, EV)
    filtered_staged_epilogue(chunks, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                             part_key_ptr, part_idx_ptr, flag_ptr, BM, BN, EV, N_ROUNDS, NOISE, scan_tile_quad, 4,
                             0.0)  # fmt: skip


@gluon.jit
def oct_epilogue(acc, stage, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                 part_key_ptr, part_idx_ptr, flag_ptr, BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr,
                 N_ROUNDS: gl.constexpr, NOISE: gl.constexpr):  # fmt: skip
    """The shipped kernel's ``EPILOGUE`` for ``oct_hi``."""
    chunks = stage_tile(acc, stage, BM, BN, EV)
    filtered_staged_epilogue(chunks, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                             part_key_ptr, part_idx_ptr, flag_ptr, BM, BN, EV, N_ROUNDS, NOISE, scan_tile_oct, 8,
                             OCT_MARGIN)  # fmt: skip
