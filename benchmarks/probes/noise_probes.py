"""The noise probes of the Gluon kernel: timing probes, not samplers.  Each is the shipped kernel
(:func:`flashsampling.kernels.pingpong.fused_pingpong_kernel`) with its own ``EPILOGUE``, which stages the tile and
runs the shipped :func:`~flashsampling.kernels.pingpong.staged_epilogue` with its own fast pass (``SCAN``) or draw.

* ``filler_<kind>`` (:func:`filler`): the noise-free scan plus ``COUNT`` steps of one kind of dependent work per
  token or token pair, which price one epilogue instruction beside the other group's MMAs
  (``benchmarks/results/filler_probe_h200.json``, ``filler_kinds_h200.json``);
* ``threefry_proxy`` (:func:`threefry_proxy`): the exact noise's fast pass with each pair's four words from
  Threefry-4x32 with ``COUNT`` rounds in place of Philox: what a multiply-free stream would cost
  (``threefry_proxy_h200.json``);
* ``lse_proxy``, ``lse_proxy_f64``, ``lse_proxy_fixed``: the tiles' argmax without noise plus the work that sampling
  inside a tile by its inverse CDF would add -- one ``exp2`` per token into a per-slot online log-sum-exp, then a
  second pass that accumulates ``exp2`` against a threshold, in float32, float64 or 64-bit fixed point
  (``lse_proxy_shapes_h200.json``, ``lse_proxy_precision_h200.json``);
* ``lse_proxy_design``: the noise-free scan, then two passes of the tile inverse-CDF's integer weights summed in
  uint64 (``lse_proxy_design_h200.json``);
* ``tile_cdf_no_draw``, ``tile_cdf_no_bases``: the shipped tile inverse-CDF stream with a part left out
  (``tile_cdf_ablation_h200.json``).

The kernel's ``N_ROUNDS`` stays Philox's 10 (tie keys and the exact pass run as shipped); a probe's kind and count
ride in the kernel's ``NOISE`` (:func:`probe_noise`), which the shipped epilogue reads as "no noise" in its exact
pass, as these probes always did.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from flashsampling.kernels.pingpong import (
    NOISE_TILE_CDF,
    chunk_base,
    exponential_gl,
    log_gl,
    philox4x32_gl,
    scan_tile,
    stage_tile,
    staged_epilogue,
)
from flashsampling.tile_cdf.fused import TILE_STREAM, mulhi_gl, slot_bases, tile_weight_gl

#: The probes' kinds (:func:`probe_noise`): three log-sum-exp proxies, five fillers, Threefry.
PROBE_KINDS = ("lse_proxy", "lse_proxy_f64", "lse_proxy_fixed", "filler_ffma", "filler_imad", "filler_imul",
               "filler_alu", "filler_hilo", "threefry_proxy")  # fmt: skip
LSE_F32 = gl.constexpr(0)
LSE_F64 = gl.constexpr(1)
LSE_FIXED = gl.constexpr(2)
FILLER_FIRST = gl.constexpr(3)
FILLER_LAST = gl.constexpr(7)
THREEFRY = gl.constexpr(8)
#: The probes' codes of the kernel's ``NOISE`` start here (the shipped codes are 0-2); a count below 100 is added.
PROBE_NOISE_BASE = 1000
_NOISE_BASE = gl.constexpr(PROBE_NOISE_BASE)
#: The tile inverse-CDF ablations (:func:`ablated_tile_cdf_draw`).
NO_DRAW = gl.constexpr(1)
NO_BASES = gl.constexpr(2)
LOG2E = gl.constexpr(1.4426950408889634)


def probe_noise(kind: str, count: int = 0) -> int:
    """The kernel's ``NOISE`` for probe ``kind`` (a key of :data:`PROBE_KINDS`) with ``count`` filler steps or
    Threefry rounds (0 to 99)."""
    if not 0 <= count < 100:
        raise ValueError(f"count={count} must be in [0, 100)")
    return PROBE_NOISE_BASE + 100 * PROBE_KINDS.index(kind) + count


#: The filler probes' instruction kinds, in the order of their probe kinds.
FILLER_KINDS = ("ffma", "imad", "imul", "alu", "hilo")
FILLER_FFMA = gl.constexpr(FILLER_KINDS.index("ffma"))
FILLER_IMAD = gl.constexpr(FILLER_KINDS.index("imad"))
FILLER_IMUL = gl.constexpr(FILLER_KINDS.index("imul"))
FILLER_HILO = gl.constexpr(FILLER_KINDS.index("hilo"))

THREEFRY_ROT_A = gl.constexpr((10, 11, 13, 23, 6, 17, 25, 18))
THREEFRY_ROT_B = gl.constexpr((26, 21, 27, 5, 20, 11, 10, 20))


@gluon.jit
def _mix(a, b, R: gl.constexpr):
    """One Threefry mix: ``a += b; b = rotl(b, R) ^ a``."""
    a = a + b
    b = ((b << R) | (b >> (32 - R))) ^ a
    return a, b


@gluon.jit
def _key_word(i: gl.constexpr, k0, k1, ks4):
    """Word ``i`` (0..4) of the Threefry key schedule ``(k0, k1, 0, 0, ks4)``."""
    if i == 0:
        return k0
    elif i == 1:
        return k1
    elif i == 4:
        return ks4
    else:
        return k0 * 0


@gluon.jit
def threefry_proxy(c0, c1, c2, c3, k0, k1, N_ROUNDS: gl.constexpr):
    """Threefry-4x32 with ``N_ROUNDS`` rounds on uint32 counters and the key ``(k0, k1, 0, 0)``, in Random123's shape
    (Salmon et al., SC 2011): per round two mixes on alternating word pairs, the key schedule added every 4 rounds.
    For the timing probe ``threefry_proxy`` only: the words are not checked against a reference."""
    ks4 = k0 ^ k1 ^ 0x1BD11BDA
    x0 = c0 + k0
    x1 = c1 + k1
    x2 = c2
    x3 = c3
    for r in gl.static_range(N_ROUNDS):
        if r % 2 == 0:
            x0, x1 = _mix(x0, x1, THREEFRY_ROT_A[r % 8])
            x2, x3 = _mix(x2, x3, THREEFRY_ROT_B[r % 8])
        else:
            x0, x3 = _mix(x0, x3, THREEFRY_ROT_A[r % 8])
            x2, x1 = _mix(x2, x1, THREEFRY_ROT_B[r % 8])
        if r % 4 == 3:
            x0 = x0 + _key_word((r // 4 + 1) % 5, k0, k1, ks4)
            x1 = x1 + _key_word((r // 4 + 2) % 5, k0, k1, ks4)
            x2 = x2 + _key_word((r // 4 + 3) % 5, k0, k1, ks4)
            x3 = x3 + _key_word((r // 4 + 4) % 5, k0, k1, ks4) + (r // 4 + 1)
    return x0, x1, x2, x3


@gluon.jit
def filler(s_even, s_odd, COUNT: gl.constexpr, KIND: gl.constexpr):
    """The timing probes ``filler_<kind>``, ``kind = FILLER_KINDS[KIND]``: ``COUNT`` steps of dependent work on the
    pair's scores, folded back into them so that none is dead code.

    * ``filler_ffma``: per token, ``s = s * a + b`` with ``a`` just below 1 (one ``FFMA`` per step and token).
    * ``filler_imad``: per pair, from the even score's bits, ``u = hi(u * M) ^ lo(u * M)`` with Philox's
      multiplier (``IMAD.WIDE.U32``, ``LOP3`` and, as compiled, a ``VIADD`` per step and pair).
    * ``filler_imul``: per pair, ``u = lo(u * M) ^ v`` with ``v`` the odd score's bits (``IMAD`` + ``LOP3``).
    * ``filler_alu``: per pair, ``u = rotl(u, 5) ^ v`` (``SHF`` + ``LOP3``).
    * ``filler_hilo``: per pair, ``u = umulhi(u, M) ^ lo(u * M)`` (``IMAD.HI.U32``, ``IMAD``, ``LOP3``):
      ``filler_imad``'s integers from other instructions.

    The integer probes end with the odd score replaced by the even one where ``u`` is 0 (a compare and a select per
    pair).  The instruction counts per step are those of the SASS compiled for sm_90a (benchmarks/NOTES.md)."""
    if KIND == FILLER_FFMA:
        for _ in gl.static_range(COUNT):
            s_even = s_even * 0.99999994 + 1.0e-30
            s_odd = s_odd * 0.99999994 + 1.0e-30
    else:
        u = s_even.to(gl.uint32, bitcast=True)
        v = s_odd.to(gl.uint32, bitcast=True)
        for _ in gl.static_range(COUNT):
            if KIND == FILLER_IMAD:
                p = u.to(gl.uint64) * 0xD2511F53
                u = (p >> 32).to(gl.uint32) ^ p.to(gl.uint32)
            elif KIND == FILLER_IMUL:
                u = (u * 0xD2511F53) ^ v
            elif KIND == FILLER_HILO:
                u = gl.umulhi(u, 0xD2511F53) ^ (u * 0xD2511F53)
            else:
                u = ((u << 5) | (u >> 27)) ^ v
        s_odd = gl.where(u == 0, s_even, s_odd)
    return s_even, s_odd


@gluon.jit
def proxy_weight(p, KIND: gl.constexpr):
    """An ``exp2`` value as the ``lse_proxy*`` modes accumulate it: float32, float64, or fixed point ``p * 2**56``."""
    if KIND == LSE_F32:
        return p
    elif KIND == LSE_F64:
        return p.to(gl.float64)
    else:
        return (p * 72057594037927936.0).to(gl.uint64)


@gluon.jit
def proxy_half(total, KIND: gl.constexpr):
    """Half of a float32 sum of ``exp2`` values, as :func:`_proxy_weight` accumulates them (``2**55 total`` in
    fixed point)."""
    if KIND == LSE_F32:
        return total * 0.5
    elif KIND == LSE_F64:
        return (total * 0.5).to(gl.float64)
    else:
        return (total * 36028797018963968.0).to(gl.uint64)


@gluon.jit
def lse_proxy_second_pass(stage, cl: gl.constexpr, c_end, mult, bad, lm_even, lm_odd, ls_even, ls_odd, pos_even,
                           pos_odd, BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr, KIND: gl.constexpr,
                          MASKED: gl.constexpr):  # fmt: skip
    """The inverse CDF's second pass of the ``lse_proxy*`` timing modes: accumulate ``exp2`` again (per-slot maxima
    ``lm``, sums ``ls`` from the first pass) and note where each slot crosses half its mass.  Returns ``bad`` with
    the results folded in as ``* 0.0`` (they must stay live)."""
    cum_even = proxy_weight(gl.zeros_like(mult), KIND)
    cum_odd = proxy_weight(gl.zeros_like(mult), KIND)
    half_even = proxy_half(ls_even, KIND)
    half_odd = proxy_half(ls_odd, KIND)
    at_even = gl.zeros_like(pos_even) - 1
    at_odd = gl.zeros_like(pos_even) - 1
    for c in range(0, BN // EV):
        s_even, s_odd, _b = chunk_base(stage.index(c).load(cl), c, c_end, mult, bad, pos_even, pos_odd, BM, EV,
                                       MASKED)  # fmt: skip
        cum_even = cum_even + proxy_weight(gl.exp2((s_even - lm_even) * LOG2E), KIND)
        cum_odd = cum_odd + proxy_weight(gl.exp2((s_odd - lm_odd) * LOG2E), KIND)
        at_even = gl.where((at_even < 0) & (cum_even > half_even), c, at_even)
        at_odd = gl.where((at_odd < 0) & (cum_odd > half_odd), c, at_odd)
    return bad + ((cum_even + cum_odd).to(gl.float32) + (at_even + at_odd).to(gl.float32)) * 0.0


@gluon.jit
def design_proxy_passes(stage, cl: gl.constexpr, c_end, mult, bad, run_even, run_odd, pos_even, pos_odd,
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
        s_even, s_odd, _b = chunk_base(stage.index(c).load(cl), c, c_end, mult, bad, pos_even, pos_odd, BM, EV,
                                       MASKED)  # fmt: skip
        sum_even = sum_even + tile_weight_gl(s_even, m)
        sum_odd = sum_odd + tile_weight_gl(s_odd, m)
    half = gl.zeros_like(sum_even) + (gl.sum(sum_even + sum_odd, axis=1) >> 1)[:, None]
    cum_even = gl.zeros_like(sum_even)
    cum_odd = gl.zeros_like(sum_even)
    at_even = gl.zeros_like(pos_even) - 1
    at_odd = gl.zeros_like(pos_even) - 1
    for c in range(0, BN // EV):
        s_even, s_odd, _b = chunk_base(stage.index(c).load(cl), c, c_end, mult, bad, pos_even, pos_odd, BM, EV,
                                       MASKED)  # fmt: skip
        cum_even = cum_even + tile_weight_gl(s_even, m)
        cum_odd = cum_odd + tile_weight_gl(s_odd, m)
        at_even = gl.where((at_even < 0) & (cum_even > half), c, at_even)
        at_odd = gl.where((at_odd < 0) & (cum_odd > half), c, at_odd)
    return bad + ((cum_even + cum_odd).to(gl.float32) + (at_even + at_odd).to(gl.float32)) * 0.0


@gluon.jit
def ablated_tile_cdf_draw(stage, cl: gl.constexpr, c_end, mult, top, rows, tile_start, k0, k1, pos_even, pos_odd,
                          BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr, N_ROUNDS: gl.constexpr,
                          MASKED: gl.constexpr, ABLATION: gl.constexpr):  # fmt: skip
    """:func:`flashsampling.tile_cdf.fused.tile_cdf_draw` written again with a part left out, a timing ablation (not
    a sampler; the shipped draw is not split into shared pieces, which would change its SASS):
    ``ABLATION`` :data:`NO_DRAW` returns after pass 1 (the weights, the slots' bases and the total; draw 0),
    :data:`NO_BASES` sets every slot's base to 0 (no cross-slot prefix; pass 2 as shipped)."""
    gl.static_assert(EV == 32, "the tile inverse-CDF's slot order is defined for 32-column chunks")
    m = gl.zeros_like(mult) + top[:, None]
    slot = gl.zeros_like(pos_even).to(gl.uint64)
    zero_f = gl.zeros_like(mult)
    for c in range(0, BN // EV):
        s_even, s_odd, _b = chunk_base(stage.index(c).load(cl), c, c_end, mult, zero_f, pos_even, pos_odd, BM, EV,
                                       MASKED)  # fmt: skip
        slot = slot + tile_weight_gl(s_even, m) + tile_weight_gl(s_odd, m)
    if ABLATION == NO_BASES:
        run = gl.zeros_like(slot)
        total = gl.sum(slot, axis=1)
    else:
        run, total = slot_bases(slot, BM)
    total = gl.convert_layout(total, top.type.layout)
    if ABLATION == NO_DRAW:
        return total, gl.zeros_like(rows)
    zero = rows.to(gl.uint32) * 0
    w0, w1, w2, w3 = philox4x32_gl(zero + tile_start.to(gl.uint32), rows.to(gl.uint32), zero, zero + TILE_STREAM, k0,
                                   k1, N_ROUNDS)  # fmt: skip
    t_row = mulhi_gl(w0, w1, w2, w3, total)
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
        s_even, s_odd, _b = chunk_base(stage.index(c).load(cl), c, c_end, mult, zero_f, pos_even, pos_odd, BM, EV,
                                       MASKED)  # fmt: skip
        pick_even = gl.max(gl.where(active, s_even, float("-inf")), axis=1)
        pick_odd = gl.max(gl.where(active, s_odd, float("-inf")), axis=1)
        cum = cum + tile_weight_gl(pick_even, top)
        count = count + (cum <= t_row).to(gl.int32)
        cum = cum + tile_weight_gl(pick_odd, top)
        count = count + (cum <= t_row).to(gl.int32)
    per_slot: gl.constexpr = 2 * (BN // EV)
    n = gl.minimum(below * per_slot + count, BN - 1)  # (BN only for a tile of weight 0, which is never chosen)
    sr = n // per_slot  # the slot's rank: 4q + j
    r = n % per_slot
    return total, (r // 2) * EV + 8 * (sr % 4) + 2 * (sr // 4) + (r % 2)


@gluon.jit
def probe_scan(stage, cl: gl.constexpr, c_end, tile_start, mult, noisy, rows_u, pos_even, pos_odd, k0, k1,
               BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr, N_ROUNDS: gl.constexpr, NOISE: gl.constexpr,
               MASKED: gl.constexpr):  # fmt: skip
    """The shipped fast pass (:func:`~flashsampling.kernels.pingpong.scan_tile`) with a probe's work per chunk:
    Threefry's words for the noise, a filler after the noise-free scores, or the log-sum-exp proxy's accumulation
    and its second pass (folded into ``bad`` as ``* 0.0``: it must stay live).  ``NOISE``: :func:`probe_noise`."""
    KIND: gl.constexpr = (NOISE - _NOISE_BASE) // 100
    COUNT: gl.constexpr = NOISE % 100
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
        s_even, s_odd, bad = chunk_base(z, c, c_end, mult, bad, pos_even, pos_odd, BM, EV, MASKED)
        if KIND == THREEFRY:
            pair = ((tile_start + c * EV) // 2 + (pos_even >> 1)).to(gl.uint32)
            zero = pair * 0
            w0, w1, w2, w3 = threefry_proxy(pair, rows_u, zero, zero, k0, k1, COUNT)
            s_even = s_even - log_gl(exponential_gl(w0, w1)) * noisy
            s_odd = s_odd - log_gl(exponential_gl(w2, w3)) * noisy
        if KIND >= FILLER_FIRST and KIND <= FILLER_LAST:
            s_even, s_odd = filler(s_even, s_odd, COUNT, KIND - FILLER_FIRST)
        if KIND <= LSE_FIXED:
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
    if KIND <= LSE_FIXED:
        bad = lse_proxy_second_pass(stage, cl, c_end, mult, bad, lm_even, lm_odd, ls_even, ls_odd, pos_even, pos_odd,
                                    BM, BN, EV, KIND, MASKED)  # fmt: skip
    return run_even, run_odd, ct_even, ct_odd, bad


@gluon.jit
def design_scan(stage, cl: gl.constexpr, c_end, tile_start, mult, noisy, rows_u, pos_even, pos_odd, k0, k1,
                BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr, N_ROUNDS: gl.constexpr, NOISE: gl.constexpr,
                MASKED: gl.constexpr):  # fmt: skip
    """``lse_proxy_design``: the shipped scan without noise, then :func:`design_proxy_passes`."""
    run_even, run_odd, ct_even, ct_odd, bad = scan_tile(stage, cl, c_end, tile_start, mult, noisy, rows_u, pos_even,
                                                        pos_odd, k0, k1, BM, BN, EV, N_ROUNDS, 0, MASKED)  # fmt: skip
    bad = design_proxy_passes(stage, cl, c_end, mult, bad, run_even, run_odd, pos_even, pos_odd, BM, BN, EV, MASKED)
    return run_even, run_odd, ct_even, ct_odd, bad


@gluon.jit
def probe_epilogue(acc, stage, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                   part_key_ptr, part_idx_ptr, flag_ptr, BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr,
                   N_ROUNDS: gl.constexpr, NOISE: gl.constexpr):  # fmt: skip
    """The kernel's ``EPILOGUE`` for the probes of :data:`PROBE_KINDS` (``NOISE``: :func:`probe_noise`)."""
    chunks = stage_tile(acc, stage, BM, BN, EV)
    staged_epilogue(
        chunks,
        pid_b,
        pid_v,
        num_v_tiles,
        B,
        V,
        col_offset,
        inv_temp_ptr,
        k0,
        k1,
        part_max_ptr,
        part_key_ptr,
        part_idx_ptr,
        flag_ptr,
        BM,
        BN,
        EV,
        N_ROUNDS,
        NOISE,
        SCAN=probe_scan,
    )


@gluon.jit
def design_epilogue(acc, stage, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                    part_key_ptr, part_idx_ptr, flag_ptr, BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr,
                    N_ROUNDS: gl.constexpr, NOISE: gl.constexpr):  # fmt: skip
    """The kernel's ``EPILOGUE`` for ``lse_proxy_design`` (no noise; the kernel's ``NOISE`` is not read)."""
    chunks = stage_tile(acc, stage, BM, BN, EV)
    staged_epilogue(
        chunks,
        pid_b,
        pid_v,
        num_v_tiles,
        B,
        V,
        col_offset,
        inv_temp_ptr,
        k0,
        k1,
        part_max_ptr,
        part_key_ptr,
        part_idx_ptr,
        flag_ptr,
        BM,
        BN,
        EV,
        N_ROUNDS,
        0,
        SCAN=design_scan,
    )


@gluon.jit
def draw_without_pass2(stage, cl: gl.constexpr, c_end, mult, top, rows, tile_start, k0, k1, pos_even, pos_odd,
                       BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr, N_ROUNDS: gl.constexpr,
                       MASKED: gl.constexpr):  # fmt: skip
    """``tile_cdf_no_draw``: :func:`ablated_tile_cdf_draw` returning after pass 1."""
    return ablated_tile_cdf_draw(stage, cl, c_end, mult, top, rows, tile_start, k0, k1, pos_even, pos_odd, BM, BN, EV,
                                 N_ROUNDS, MASKED, NO_DRAW)  # fmt: skip


@gluon.jit
def draw_without_bases(stage, cl: gl.constexpr, c_end, mult, top, rows, tile_start, k0, k1, pos_even, pos_odd,
                       BM: gl.constexpr, BN: gl.constexpr, EV: gl.constexpr, N_ROUNDS: gl.constexpr,
                       MASKED: gl.constexpr):  # fmt: skip
    """``tile_cdf_no_bases``: :func:`ablated_tile_cdf_draw` with every slot's base 0."""
    return ablated_tile_cdf_draw(stage, cl, c_end, mult, top, rows, tile_start, k0, k1, pos_even, pos_odd, BM, BN, EV,
                                 N_ROUNDS, MASKED, NO_BASES)  # fmt: skip


@gluon.jit
def tile_cdf_ablation_epilogue(acc, stage, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1,
                               part_max_ptr, part_key_ptr, part_idx_ptr, flag_ptr, BM: gl.constexpr,
                               BN: gl.constexpr, EV: gl.constexpr, N_ROUNDS: gl.constexpr,
                               NOISE: gl.constexpr):  # fmt: skip
    """The kernel's ``EPILOGUE`` for the tile inverse-CDF ablations (``NOISE``: :data:`NO_DRAW` or
    :data:`NO_BASES`)."""
    chunks = stage_tile(acc, stage, BM, BN, EV)
    if NOISE == NO_DRAW:
        staged_epilogue(chunks, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                        part_key_ptr, part_idx_ptr, flag_ptr, BM, BN, EV, N_ROUNDS, NOISE_TILE_CDF,
                        DRAW=draw_without_pass2)  # fmt: skip
    else:
        staged_epilogue(chunks, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                        part_key_ptr, part_idx_ptr, flag_ptr, BM, BN, EV, N_ROUNDS, NOISE_TILE_CDF,
                        DRAW=draw_without_bases)  # fmt: skip
