"""Stage 2 of the fused truncated sampler: from the tiles' lists, the kept set of every row exactly (or the verdict
that the lists do not suffice), then the Gumbel-max over it.

The order and thresholds
------------------------
Tokens are ranked by ``key = (z descending, index ascending)``.  A *threshold* ``(v, b)`` (``v`` the ordered int32
of a logit, :func:`ordered`; ``b`` an index bound) keeps ``{z > v} U {z == v, index <= b}``: an upper set of the
order, and every filter's kept set is one (``proofs/truncation.md``).  ``b = IDX_ALL`` keeps the whole level.

The lists leave every token listed whose key is above ``R``, the largest last entry of a full list (every token of
a tile ranked after its list's last entry is unlisted; none when no list is full: ``R`` "none").  So a threshold
above ``R`` (*listed*) is decided from the lists alone, and a threshold at or below ``R`` is only known to be
there.  Each step's result has a state: ``EXACT`` (the threshold is known), ``BELOW`` (only known to be at or below
``R``), ``FAIL`` (undecidable from the lists, or a float64 decision within its error bound).

Per row (``BLOCK_R`` rows per program, each with its own ``n`` candidates)::

    pass 0   m = max z;  R;  the stage-1 flags;  S_full = sum_t mass_t exp(-(m - m_t) / t)   (with MASS)
    pass 1   compact the candidates above R (and their float64 weights w = exp(-(m - z) / t) with top-p)
    chain    theta = everything; for each step of the order (a joint step's filters see the same input):
               temperature   greedy row: theta = max(theta, (m, IDX_ALL))   (only the maxima stay)
               top_k         the k-th largest candidate key (bisection over levels, then over indices)
               top_p         S of the input set; the lowest level tau with mass(z > tau) < p S (bisection),
                             certified: mass(z > tau) < p S (1 - 3e) and mass(z >= tau) >= p S (1 + 3e)
               min_p         keep iff x = (z - m) / t >= log p, certified by a margin mu (or z == m)
             theta = max(theta, step) combined by state (EXACT wins over BELOW when it is listed)
    final    EXACT and listed: the Gumbel-max over the kept candidates, each sample;  else status FALLBACK

The draw scores a kept candidate ``z * (1/T) + G(seed, row, index, sample)`` (``z`` for a greedy row), the plain
sampler's float32 score and noise (:func:`~flashsampling.noise.token_noise`), exact ties by the larger tie key
(:func:`~flashsampling.noise.tie_key`), then the lower index: the plain sampler's token wherever the kept set holds
its winner.  With ``GIVEN`` the thresholds come from the caller (the host's exact decision), with ``LIST = 0`` the
candidates are whole rows of logits (the fallback), with ``ROW_IDS`` the noise is keyed by the given rows.

Work: two passes over the ``N = T * LIST`` candidates, then passes over the compacted ones (a few thousand at most
on typical rows): about ``log2`` of the level range (~25) for top-k and top-p each, ~18 more for a top-k cut inside
a tie, and ``S`` for the draw.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._device import INTERPRET, device_function
from ..noise import PHILOX_ROUNDS, exp_neg64, tie_key, token_noise
from .flags import BAD_LOGIT, NO_FINITE, OVERFLOW
from .launch import direct, next_power_of_2

#: ``ordered(-inf)``: the smallest ordered logit; ``ORD_NONE`` is below it (``R`` when no list is full).
ORD_NEG_INF = tl.constexpr(-2139095041)
ORD_NONE = tl.constexpr(-2139095042)
#: The index bound that keeps a whole level.
IDX_ALL = tl.constexpr(2147483647)
#: Step states.
EXACT = tl.constexpr(0)
BELOW = tl.constexpr(1)
FAIL = tl.constexpr(2)
#: Step codes of the order (``CHAIN_*`` constants; ``JOINT`` marks a filter computed on the previous one's input,
#: ``SCALED`` one after the temperature step).
STEP_TEMPERATURE = 1
STEP_TOP_K = 2
STEP_TOP_P = 3
STEP_MIN_P = 4
STEP_JOINT = 8
STEP_SCALED = 16
#: Row status written by stage 2.
STATUS_DRAWN = 0
STATUS_FALLBACK = 1
STATUS_PLAIN = 2
#: Drawn by the fallback's ``FORCE`` pass with a float64 decision inside its error bound: the host's law redoes it
#: (``host_checks``).
STATUS_UNDECIDED = 3
#: The relative margin of min-p's comparison with ``log p`` (``proofs/truncation.md``, Lemma 3): ``mu = MIN_P_MARGIN
#: (1 + |log p|)``.
MIN_P_MARGIN = 2.0**-46


@device_function
def ordered(z):
    """The int32 whose signed order is float32's (``-0.0`` made ``+0.0`` first: equal logits, equal values)."""
    bits = tl.where(z == 0.0, 0.0, z).to(tl.int32, bitcast=True)
    return bits ^ ((bits >> 31) & 0x7FFFFFFF)


@device_function
def listed(v, b, rv, ri):
    """Whether the threshold ``(v, b)`` is above ``R = (rv, ri)``: every token it keeps is listed."""
    return (rv < v) | ((rv == v) & (ri > b))


@device_function
def combine(av, ab, a_s, bv, bb, b_s, rv, ri):
    """The intersection of two kept sets (the higher threshold), by state: both ``EXACT``: the higher; one
    ``EXACT`` and listed, the other ``BELOW``: the listed one; both at or below ``R``: ``BELOW``; ``FAIL`` wins."""
    a_higher = (av > bv) | ((av == bv) & (ab < bb))
    both = (a_s == EXACT) & (b_s == EXACT)
    a_only = (a_s == EXACT) & (b_s == BELOW) & listed(av, ab, rv, ri)
    b_only = (b_s == EXACT) & (a_s == BELOW) & listed(bv, bb, rv, ri)
    take_a = (both & a_higher) | a_only
    v = tl.where(take_a, av, bv)
    b = tl.where(take_a, ab, bb)
    s = tl.where((a_s == FAIL) | (b_s == FAIL), FAIL, tl.where(both | a_only | b_only, EXACT, BELOW))
    return v, b, s


@device_function
def kept_by(o, i, tv, tb):
    """Whether candidates ``(ordered z, index)`` ``[R, C]`` are kept by per-row thresholds ``(tv, tb)`` ``[R]``."""
    return (o > tv[:, None]) | ((o == tv[:, None]) & (i <= tb[:, None]))


# --------------------------------------------------------------------------------------------
# Passes over the lists and over the compacted candidates
# --------------------------------------------------------------------------------------------


@device_function
def list_stats(cz_ptr, ci_ptr, rows64, row_ok, N, stride_b, stride_v, LIST: tl.constexpr, BLOCK_R: tl.constexpr,
               CH: tl.constexpr):  # fmt: skip
    """Pass 0: per row the largest finite logit ``m``, ``R = (rv, ri)`` (the largest key among the full lists' last
    entries, ``ORD_NONE`` when none is full or ``LIST == 0``) and the number of finite candidates."""
    m = tl.full([BLOCK_R], float("-inf"), tl.float32)
    rv = tl.full([BLOCK_R], ORD_NONE, tl.int32)
    ri = tl.full([BLOCK_R], IDX_ALL, tl.int32)
    nf = tl.zeros([BLOCK_R], tl.int32)
    for c0 in range(0, N, CH):
        offs = c0 + tl.arange(0, CH)
        ok = row_ok[:, None] & (offs < N)[None, :]
        at = rows64[:, None] * stride_b + offs.to(tl.int64)[None, :] * stride_v
        z = tl.load(cz_ptr + at, mask=ok, other=float("-inf")).to(tl.float32)
        fin = ok & (z > float("-inf")) & (z == z)
        m = tl.maximum(m, tl.max(tl.where(fin, z, float("-inf")), axis=1))
        nf += tl.sum(fin.to(tl.int32), axis=1)
        if LIST > 0:
            edge = fin & ((offs % LIST) == LIST - 1)[None, :]
            i = tl.load(ci_ptr + at, mask=edge, other=IDX_ALL)
            o = tl.where(edge, ordered(z), ORD_NONE)
            co = tl.max(o, axis=1)
            cmin = tl.min(tl.where(edge & (o == co[:, None]), i, IDX_ALL), axis=1)
            ri = tl.where(co > rv, cmin, tl.where(co == rv, tl.minimum(ri, cmin), ri))
            rv = tl.maximum(rv, co)
    return m, rv, ri, nf


@device_function
def stage1_flags(flag_ptr, rows64, row_ok, T, BLOCK_R: tl.constexpr, BLOCK_T: tl.constexpr):
    """The OR of a row's stage-1 flags (NaN/inf logits, overflow) over its ``T`` tiles."""
    flag = tl.zeros([BLOCK_R], dtype=tl.int32)
    for t0 in range(0, T, BLOCK_T):
        t = t0 + tl.arange(0, BLOCK_T)
        f = tl.load(flag_ptr + rows64[:, None] * T + t[None, :], mask=row_ok[:, None] & (t < T)[None, :], other=0)
        flag = flag | tl.max(tl.where((f & BAD_LOGIT) != 0, BAD_LOGIT, 0), axis=1)
        flag = flag | tl.max(tl.where((f & OVERFLOW) != 0, OVERFLOW, 0), axis=1)
    return flag


@device_function
def full_mass(cz_ptr, mass_ptr, rows64, row_ok, m, scale, T, LIST: tl.constexpr, BLOCK_R: tl.constexpr,
              BLOCK_T: tl.constexpr):  # fmt: skip
    """``S_full = sum_t mass_t exp(-(m - m_t) / scale)`` in float64, ``m_t`` the tile maximum (its list's first
    entry): the row's whole mass at the scale of its top-p step."""
    s = tl.zeros([BLOCK_R], dtype=tl.float64)
    m64 = m.to(tl.float64)
    for t0 in range(0, T, BLOCK_T):
        t = t0 + tl.arange(0, BLOCK_T)
        ok = row_ok[:, None] & (t < T)[None, :]
        mt = tl.load(cz_ptr + rows64[:, None] * (T * LIST) + t.to(tl.int64)[None, :] * LIST, mask=ok,
                     other=float("-inf"))  # fmt: skip
        st = tl.load(mass_ptr + rows64[:, None] * T + t[None, :], mask=ok, other=0.0)
        live = ok & (mt > float("-inf"))
        a = tl.where(live, (m64[:, None] - mt.to(tl.float64)) / scale[:, None], 0.0)
        s += tl.sum(tl.where(live, st * exp_neg64(a), 0.0), axis=1)
    return s


@device_function
def compact(cz_ptr, ci_ptr, kz_ptr, ki_ptr, kw_ptr, rows64, row_ok, N, stride_b, stride_v, col_offset, rv, ri, m,
            scale, CAP: tl.constexpr, WEIGHTS: tl.constexpr, BLOCK_R: tl.constexpr, CH: tl.constexpr):  # fmt: skip
    """Pass 1: copy each row's finite candidates with key above ``R`` to the front of its scratch row (``CAP``
    entries; and, with ``WEIGHTS``, their float64 weights ``exp(-(m - z) / scale)``); returns how many there are
    per row (more than ``CAP``: the scratch holds the first ``CAP``)."""
    n = tl.zeros([BLOCK_R], dtype=tl.int32)
    m64 = m.to(tl.float64)
    for c0 in range(0, N, CH):
        offs = c0 + tl.arange(0, CH)
        ok = row_ok[:, None] & (offs < N)[None, :]
        at = rows64[:, None] * stride_b + offs.to(tl.int64)[None, :] * stride_v
        z = tl.load(cz_ptr + at, mask=ok, other=float("-inf")).to(tl.float32)
        i = tl.load(ci_ptr + at, mask=ok, other=IDX_ALL)
        o = ordered(z)
        keep = ok & (z > float("-inf")) & (z == z) & ((o > rv[:, None]) | ((o == rv[:, None]) & (i < ri[:, None])))
        k32 = keep.to(tl.int32)
        pos = n[:, None] + tl.cumsum(k32, axis=1) - 1
        fits = keep & (pos < CAP)
        dst = rows64[:, None] * CAP + pos.to(tl.int64)
        tl.store(kz_ptr + dst, z, mask=fits)
        tl.store(ki_ptr + dst, i, mask=fits)
        if WEIGHTS:
            a = tl.where(fits, (m64[:, None] - z.to(tl.float64)) / scale[:, None], 0.0)
            tl.store(kw_ptr + dst, exp_neg64(a), mask=fits)
        n += tl.sum(k32, axis=1)
    return n


@device_function
def load_candidates(sz_ptr, si_ptr, sw_ptr, rows64, offs, ok, N, stride_b, stride_v, col_offset, m64, scale,
                    COLUMNS: tl.constexpr, WEIGHTS: tl.constexpr, BLOCK_R: tl.constexpr,
                    CH: tl.constexpr):  # fmt: skip
    """Candidates ``offs`` of each row, ``(z fp32, index int32, w float64)``: from the compacted scratch rows
    (``stride_b = N``, ``stride_v = 1``; the weights stored), or with ``COLUMNS`` from whole rows of logits (index
    ``col_offset + offs``, the weights ``exp(-(m - z) / scale)`` computed here).  ``-inf`` (and 0 weight) where not
    ``ok``; without ``WEIGHTS`` the weights are 0."""
    z = tl.load(sz_ptr + rows64[:, None] * stride_b + offs.to(tl.int64)[None, :] * stride_v, mask=ok,
                other=float("-inf")).to(tl.float32)  # fmt: skip
    if COLUMNS:
        i = tl.zeros([BLOCK_R, CH], dtype=tl.int32) + (col_offset + offs)[None, :]
    else:
        i = tl.load(si_ptr + rows64[:, None] * N + offs[None, :], mask=ok, other=IDX_ALL)
    if WEIGHTS:
        if COLUMNS:
            live = ok & (z > float("-inf"))
            a = tl.where(live, (m64[:, None] - z.to(tl.float64)) / scale[:, None], 0.0)
            w = tl.where(live, exp_neg64(a), 0.0)
        else:
            w = tl.load(sw_ptr + rows64[:, None] * N + offs[None, :], mask=ok, other=0.0)
    else:
        w = tl.zeros([BLOCK_R, CH], dtype=tl.float64)
    return z, i, w


@device_function
def count_at_least(sz_ptr, si_ptr, sw_ptr, rows64, n, N, stride_b, stride_v, col_offset, m64, scale, lv,
                   COLUMNS: tl.constexpr, BLOCK_R: tl.constexpr, CH: tl.constexpr):  # fmt: skip
    """Per row, the candidates whose ordered logit is ``>= lv`` (int64 ``[BLOCK_R]``)."""
    c = tl.zeros([BLOCK_R], dtype=tl.int32)
    for c0 in range(0, tl.max(n, axis=0), CH):
        offs = c0 + tl.arange(0, CH)
        ok = offs[None, :] < n[:, None]
        z, _, _ = load_candidates(sz_ptr, si_ptr, sw_ptr, rows64, offs, ok, N, stride_b, stride_v, col_offset, m64,
                                  scale, COLUMNS, False, BLOCK_R, CH)  # fmt: skip
        c += tl.sum((ok & (ordered(z).to(tl.int64) >= lv[:, None])).to(tl.int32), axis=1)
    return c


@device_function
def count_level_index(sz_ptr, si_ptr, sw_ptr, rows64, n, N, stride_b, stride_v, col_offset, m64, scale, lv, lb,
                      COLUMNS: tl.constexpr, BLOCK_R: tl.constexpr, CH: tl.constexpr):  # fmt: skip
    """Per row, the candidates at level ``lv`` with index ``<= lb``."""
    c = tl.zeros([BLOCK_R], dtype=tl.int32)
    for c0 in range(0, tl.max(n, axis=0), CH):
        offs = c0 + tl.arange(0, CH)
        ok = offs[None, :] < n[:, None]
        z, i, _ = load_candidates(sz_ptr, si_ptr, sw_ptr, rows64, offs, ok, N, stride_b, stride_v, col_offset, m64,
                                  scale, COLUMNS, False, BLOCK_R, CH)  # fmt: skip
        hit = ok & (ordered(z) == lv[:, None]) & (i.to(tl.int64) <= lb[:, None])
        c += tl.sum(hit.to(tl.int32), axis=1)
    return c


@device_function
def mass_above(sz_ptr, si_ptr, sw_ptr, rows64, n, N, stride_b, stride_v, col_offset, m64, scale, lv, tv, tb,
               COLUMNS: tl.constexpr, BLOCK_R: tl.constexpr, CH: tl.constexpr):  # fmt: skip
    """Per row, the float64 weight of the candidates kept by ``(tv, tb)`` whose ordered logit is ``> lv``
    (``lv = ORD_NEG_INF``: the whole kept weight)."""
    s = tl.zeros([BLOCK_R], dtype=tl.float64)
    for c0 in range(0, tl.max(n, axis=0), CH):
        offs = c0 + tl.arange(0, CH)
        ok = offs[None, :] < n[:, None]
        z, i, w = load_candidates(sz_ptr, si_ptr, sw_ptr, rows64, offs, ok, N, stride_b, stride_v, col_offset, m64,
                                  scale, COLUMNS, True, BLOCK_R, CH)  # fmt: skip
        o = ordered(z)
        hit = ok & kept_by(o, i, tv, tb) & (o.to(tl.int64) > lv[:, None])
        s += tl.sum(tl.where(hit, w, 0.0), axis=1)
    return s


# --------------------------------------------------------------------------------------------
# The filters' thresholds
# --------------------------------------------------------------------------------------------


@device_function
def top_k_threshold(sz_ptr, si_ptr, sw_ptr, rows64, n, N, stride_b, stride_v, col_offset, m64, scale, k, m, rv,
                    need, V, COLUMNS: tl.constexpr, BLOCK_R: tl.constexpr, CH: tl.constexpr):  # fmt: skip
    """The ``k``-th largest key among the candidates above ``R``: ``EXACT`` when there are at least ``k`` of them
    (then it is the row's ``k``-th largest key), else ``BELOW`` (everything ``EXACT`` when no list is full: the row
    has fewer than ``k`` finite tokens)."""
    nn = tl.where(need, n, 0)
    hi = ordered(m).to(tl.int64) + 1  # count(>= hi) = 0 < k
    lo = tl.where(rv == ORD_NONE, ORD_NEG_INF + 1, rv).to(tl.int64)  # every candidate above R is at or above lo
    total = count_at_least(sz_ptr, si_ptr, sw_ptr, rows64, nn, N, stride_b, stride_v, col_offset, m64, scale, lo,
                           COLUMNS, BLOCK_R, CH)  # fmt: skip
    go = need & (total >= k)
    nn = tl.where(go, n, 0)
    lo = tl.where(go, lo, hi - 1)
    while tl.max(hi - lo, axis=0) > 1:
        mid = lo + (hi - lo) // 2
        ok = count_at_least(sz_ptr, si_ptr, sw_ptr, rows64, nn, N, stride_b, stride_v, col_offset, m64, scale, mid,
                            COLUMNS, BLOCK_R, CH) >= k  # fmt: skip
        lo = tl.where(ok, mid, lo)
        hi = tl.where(ok, hi, mid)
    gt = count_at_least(sz_ptr, si_ptr, sw_ptr, rows64, nn, N, stride_b, stride_v, col_offset, m64, scale, lo + 1,
                        COLUMNS, BLOCK_R, CH)  # fmt: skip
    at = count_at_least(sz_ptr, si_ptr, sw_ptr, rows64, nn, N, stride_b, stride_v, col_offset, m64, scale, lo,
                        COLUMNS, BLOCK_R, CH)  # fmt: skip
    r = k - gt
    cut = go & (at - gt > r)  # the k-th key cuts a group of tied logits: find the r-th lowest index of the level
    b = tl.full([BLOCK_R], IDX_ALL, tl.int32)
    if tl.max(cut.to(tl.int32), axis=0) > 0:
        b_hi = tl.zeros([BLOCK_R], dtype=tl.int64) + (col_offset + V - 1)  # count(<= b_hi) = at - gt >= r
        b_lo = tl.where(cut, b_hi * 0 + (col_offset - 1), b_hi - 1)  # count(<= b_lo) = 0 < r
        nc = tl.where(cut, n, 0)
        while tl.max(b_hi - b_lo, axis=0) > 1:
            mid = b_lo + (b_hi - b_lo) // 2
            ok = count_level_index(sz_ptr, si_ptr, sw_ptr, rows64, nc, N, stride_b, stride_v, col_offset, m64,
                                   scale, lo, mid, COLUMNS, BLOCK_R, CH) >= r  # fmt: skip
            b_hi = tl.where(ok, mid, b_hi)
            b_lo = tl.where(ok, b_lo, mid)
        b = tl.where(cut, b_hi.to(tl.int32), b)
    everything = need & (total < k) & (rv == ORD_NONE)
    v = tl.where(everything, ORD_NEG_INF, lo.to(tl.int32))
    b = tl.where(everything, IDX_ALL, b)
    s = tl.where(go | everything, EXACT, BELOW)
    return v, b, s


@device_function
def top_p_threshold(sz_ptr, si_ptr, sw_ptr, rows64, n, N, stride_b, stride_v, col_offset, m64, scale, p, s_full, tv,
                    tb, ts, m, rv, ri, need, rel_err, MASS: tl.constexpr, FORCE: tl.constexpr,
                    COLUMNS: tl.constexpr, BLOCK_R: tl.constexpr, CH: tl.constexpr):  # fmt: skip
    """Top-p (ties ``"all"``, the crossing token kept, strict) on the set kept by ``(tv, tb, ts)``: the lowest level
    ``tau`` with ``mass(z > tau) < p S``.  ``EXACT`` when ``tau`` is above ``R`` and both comparisons clear the
    error bound ``3 rel_err``; ``BELOW`` when the crossing is certainly at or below ``R``; else ``FAIL`` -- or, with
    ``FORCE`` (whole rows, ``R`` none), ``EXACT`` at the float64 decision and ``forced`` set.  Returns ``(v, b,
    state, forced)``."""
    everything = (ts == EXACT) & (tv == ORD_NEG_INF) & (tb == IDX_ALL)
    in_listed = (ts == EXACT) & listed(tv, tb, rv, ri)
    nn = tl.where(need, n, 0)
    all_levels = tl.zeros_like(rv).to(tl.int64) + ORD_NEG_INF
    s = mass_above(sz_ptr, si_ptr, sw_ptr, rows64, nn, N, stride_b, stride_v, col_offset, m64, scale, all_levels, tv,
                   tb, COLUMNS, BLOCK_R, CH)  # fmt: skip
    s_ok = in_listed
    if MASS:
        use_full = everything & (rv != ORD_NONE)
        s = tl.where(use_full, s_full, s)
        s_ok = s_ok | use_full
    go = need & s_ok
    target = p * s
    low = target * (1.0 - 3.0 * rel_err)
    high = target * (1.0 + 3.0 * rel_err)
    hi = ordered(m).to(tl.int64)  # mass(z > m) = 0 < p S
    lo = tl.where(rv == ORD_NONE, ORD_NEG_INF, rv).to(tl.int64)
    nn = tl.where(go, n, 0)
    a_lo = mass_above(sz_ptr, si_ptr, sw_ptr, rows64, nn, N, stride_b, stride_v, col_offset, m64, scale, lo, tv, tb,
                      COLUMNS, BLOCK_R, CH)  # fmt: skip
    below = a_lo < target  # the crossing is at or below lo
    search = go & ~below
    lo = tl.where(search, lo, hi - 1)
    while tl.max(hi - lo, axis=0) > 1:
        mid = lo + (hi - lo) // 2
        keep = mass_above(sz_ptr, si_ptr, sw_ptr, rows64, nn, N, stride_b, stride_v, col_offset, m64, scale, mid, tv,
                          tb, COLUMNS, BLOCK_R, CH) < target  # fmt: skip
        hi = tl.where(keep, mid, hi)
        lo = tl.where(keep, lo, mid)
    a_tau = mass_above(sz_ptr, si_ptr, sw_ptr, rows64, nn, N, stride_b, stride_v, col_offset, m64, scale, hi, tv, tb,
                       COLUMNS, BLOCK_R, CH)  # fmt: skip
    a_ge = mass_above(sz_ptr, si_ptr, sw_ptr, rows64, nn, N, stride_b, stride_v, col_offset, m64, scale, hi - 1, tv,
                      tb, COLUMNS, BLOCK_R, CH)  # fmt: skip
    sure = (a_tau < low) & (a_ge >= high)
    below_ok = below & (rv != ORD_NONE) & (a_lo < low)
    state = tl.where(search & sure, EXACT, tl.where(go & below_ok, BELOW, FAIL))
    v = hi.to(tl.int32)
    forced = go & (state == FAIL)
    if FORCE:
        v = tl.where(forced & below, ORD_NEG_INF, v)  # (below with R none: every token, p within rounding of 1)
        state = tl.where(forced, EXACT, state)
    else:
        forced = forced & ~forced
    return v, tl.full([BLOCK_R], IDX_ALL, tl.int32), state, forced


@device_function
def min_p_threshold(sz_ptr, si_ptr, sw_ptr, rows64, n, N, stride_b, stride_v, col_offset, m64, log_p, m, scale, rv,
                    need, FORCE: tl.constexpr, COLUMNS: tl.constexpr, BLOCK_R: tl.constexpr,
                    CH: tl.constexpr):  # fmt: skip
    """Min-p (``w >= p``, the maxima kept): each candidate above ``R`` kept iff ``x = (z - m) / scale >= log p`` with
    the margin ``mu = MIN_P_MARGIN (1 + |log p|)`` (``FAIL`` on a candidate within it); ``EXACT`` at the lowest kept
    level when some candidate is dropped (so is every unlisted token), else ``BELOW`` (everything ``EXACT`` when no
    list is full).  ``FORCE`` decides a candidate within the margin by ``x >= log p`` (``forced`` set).  Returns
    ``(v, b, state, forced)``."""
    mu = 1.4210854715202004e-14 * (
        1.0 + tl.abs(log_p)
    )  # MIN_P_MARGIN = 2**-46 (a literal: Triton reads no float global)
    n_drop = tl.zeros([BLOCK_R], dtype=tl.int32)
    n_unsure = tl.zeros([BLOCK_R], dtype=tl.int32)
    low = tl.full([BLOCK_R], IDX_ALL, tl.int32)  # the lowest kept ordered level
    nn = tl.where(need, n, 0)
    for c0 in range(0, tl.max(nn, axis=0), CH):
        offs = c0 + tl.arange(0, CH)
        ok = offs[None, :] < nn[:, None]
        z, _, _ = load_candidates(sz_ptr, si_ptr, sw_ptr, rows64, offs, ok, N, stride_b, stride_v, col_offset, m64,
                                  scale, COLUMNS, False, BLOCK_R, CH)  # fmt: skip
        ok = ok & (z > float("-inf"))
        x = (z.to(tl.float64) - m64[:, None]) / scale[:, None]
        top = z == m[:, None]
        keep = ok & (top | (x >= (log_p + mu)[:, None]))
        drop = ok & ~top & (x <= (log_p - mu)[:, None])
        n_unsure += tl.sum((ok & ~keep & ~drop).to(tl.int32), axis=1)
        if FORCE:
            keep = ok & (top | (x >= log_p[:, None]))
            drop = ok & ~keep
        n_drop += tl.sum(drop.to(tl.int32), axis=1)
        low = tl.minimum(low, tl.min(tl.where(keep, ordered(z), IDX_ALL), axis=1))
    everything = n_drop == 0
    v = tl.where(everything, ORD_NEG_INF, low)
    if FORCE:
        forced = n_unsure > 0
        s = tl.where(everything & (rv != ORD_NONE), BELOW, EXACT)
    else:
        forced = n_unsure < 0
        s = tl.where(n_unsure > 0, FAIL, tl.where(everything & (rv != ORD_NONE), BELOW, EXACT))
    return v, tl.full([BLOCK_R], IDX_ALL, tl.int32), s, forced


@device_function
def apply_step(
    STEP: tl.constexpr, tv, tb, ts, gv, gb, gs, forced, sz_ptr, si_ptr, sw_ptr, rows64, n, N, stride_b, stride_v,
    col_offset, m64, p_scale, m, rv, ri, greedy, k, p, log_p, temp, s_full, V, rel_err, MASS: tl.constexpr,
    FORCE: tl.constexpr, COLUMNS: tl.constexpr, BLOCK_R: tl.constexpr, CH: tl.constexpr,
):  # fmt: skip
    """One step of the order on the thresholds: ``(tv, tb, ts)`` the set so far, ``(gv, gb, gs)`` the input of the
    current joint step, ``forced`` the rows with a ``FORCE`` decision so far.  Returns all, updated."""
    if (STEP & 7) != 0:
        if (STEP & 8) == 0:  # STEP_JOINT: a new step, whose input is the set so far
            gv = tv
            gb = tb
            gs = ts
        if (STEP & 16) != 0:  # STEP_SCALED: after the temperature
            scale = tl.where(temp > 0.0, temp, 1.0)
            applies = ~greedy  # a greedy row keeps its maxima: top-p and min-p keep them all
        else:
            scale = tl.zeros_like(temp) + 1.0
            applies = greedy | ~greedy
        if (STEP & 7) == 1:  # STEP_TEMPERATURE
            sv = ordered(m)
            sb = tl.full([BLOCK_R], IDX_ALL, tl.int32)
            ss = tl.full([BLOCK_R], EXACT, tl.int32)
            on = greedy
        elif (STEP & 7) == 2:  # STEP_TOP_K
            on = k > 0
            sv, sb, ss = top_k_threshold(sz_ptr, si_ptr, sw_ptr, rows64, n, N, stride_b, stride_v, col_offset, m64,
                                         p_scale, k, m, rv, on, V, COLUMNS, BLOCK_R, CH)  # fmt: skip
        elif (STEP & 7) == 3:  # STEP_TOP_P
            on = (p < 1.0) & applies
            sv, sb, ss, sf = top_p_threshold(sz_ptr, si_ptr, sw_ptr, rows64, n, N, stride_b, stride_v, col_offset, m64,
                                             p_scale, p, s_full, gv, gb, gs, m, rv, ri, on, rel_err, MASS, FORCE,
                                             COLUMNS, BLOCK_R, CH)  # fmt: skip
            forced = forced | (on & sf)
        else:  # STEP_MIN_P
            on = (log_p > float("-inf")) & applies
            sv, sb, ss, sf = min_p_threshold(sz_ptr, si_ptr, sw_ptr, rows64, n, N, stride_b, stride_v, col_offset, m64,
                                             log_p, m, scale, rv, on, FORCE, COLUMNS, BLOCK_R, CH)  # fmt: skip
            forced = forced | (on & sf)
        nv, nb, ns = combine(tv, tb, ts, sv, sb, ss, rv, ri)
        tv = tl.where(on, nv, tv)
        tb = tl.where(on, nb, tb)
        ts = tl.where(on, ns, ts)
    return tv, tb, ts, gv, gb, gs, forced


# --------------------------------------------------------------------------------------------
# The draw
# --------------------------------------------------------------------------------------------


@device_function
def draw_sample(sz_ptr, si_ptr, sw_ptr, rows64, n, N, stride_b, stride_v, col_offset, m64, scale, tv, tb, inv_temp,
                u_rows, k0, k1, smp, N_ROUNDS: tl.constexpr, NOISE: tl.constexpr, COLUMNS: tl.constexpr,
                BLOCK_R: tl.constexpr, CH: tl.constexpr):  # fmt: skip
    """Sample ``smp`` of each row: the kept candidate with the largest ``(score, tie key, -index)``; returns
    ``(best score, index)`` (``-inf``, ``IDX_ALL`` for a row with nothing kept)."""
    greedy = inv_temp == 0.0
    c_smp = (tl.zeros([1, 1], dtype=tl.int32) + smp).to(tl.uint32)
    best_s = tl.full([BLOCK_R], float("-inf"), tl.float32)
    best_k = tl.zeros([BLOCK_R], dtype=tl.uint32)
    best_i = tl.full([BLOCK_R], IDX_ALL, tl.int32)
    for c0 in range(0, tl.max(n, axis=0), CH):
        offs = c0 + tl.arange(0, CH)
        ok = offs[None, :] < n[:, None]
        z, i, _ = load_candidates(sz_ptr, si_ptr, sw_ptr, rows64, offs, ok, N, stride_b, stride_v, col_offset, m64,
                                  scale, COLUMNS, False, BLOCK_R, CH)  # fmt: skip
        kept = ok & (z > float("-inf")) & kept_by(ordered(z), i, tv, tb)
        base = tl.where(greedy[:, None], z, z * inv_temp[:, None])
        if NOISE:
            g = token_noise(k0, k1, u_rows[:, None], i.to(tl.uint32), c_smp, N_ROUNDS)
            score = tl.where(greedy[:, None], base, base + g)
        else:
            score = base
        score = tl.where(kept, score, float("-inf"))
        mx = tl.max(score, axis=1)
        hit = kept & (score == mx[:, None]) & (mx > float("-inf"))[:, None]
        if tl.max(tl.sum(hit.to(tl.int32), axis=1), axis=0) > 1:
            # An exact float32 tie (rare): the larger tie-break key, then the lower index.
            key = tl.where(hit, tie_key(k0, k1, u_rows[:, None], i.to(tl.uint32), c_smp, N_ROUNDS), 0)
            hit = hit & (key == tl.max(key, axis=1)[:, None])
        ci = tl.min(tl.where(hit, i, IDX_ALL), axis=1)
        ck = tie_key(k0, k1, u_rows, ci.to(tl.uint32), c_smp.reshape([1]), N_ROUNDS)
        live = mx > float("-inf")
        better = live & ((mx > best_s) | ((mx == best_s) & ((ck > best_k) | ((ck == best_k) & (ci < best_i)))))
        best_s = tl.where(better, mx, best_s)
        best_k = tl.where(better, ck, best_k)
        best_i = tl.where(better, ci, best_i)
    return best_s, best_i


# --------------------------------------------------------------------------------------------
# The kernel
# --------------------------------------------------------------------------------------------


@triton.jit(do_not_specialize=["N", "T", "V", "col_offset", "num_samples", "seed_lo", "seed_hi", "stride_cb",
                               "stride_cv"])  # fmt: skip
def truncation_stage2_kernel(
    cand_z_ptr,
    cand_i_ptr,
    mass_ptr,
    flag_ptr,
    row_id_ptr,
    k_ptr,
    p_ptr,
    log_min_p_ptr,
    temp_ptr,
    inv_temp_ptr,
    given_v_ptr,
    given_b_ptr,
    kz_ptr,
    ki_ptr,
    kw_ptr,
    token_ptr,
    row_flag_ptr,
    status_ptr,
    rel_err_ptr,
    B,
    N,
    T,
    V,
    col_offset,
    num_samples,
    seed_lo,
    seed_hi,
    stride_cb,
    stride_cv,
    BLOCK_R: tl.constexpr,
    CH: tl.constexpr,
    CAP: tl.constexpr,
    BLOCK_T: tl.constexpr,
    LIST: tl.constexpr,
    MASS: tl.constexpr,
    WEIGHTS: tl.constexpr,
    TOP_P_SCALED: tl.constexpr,
    STEP0: tl.constexpr,
    STEP1: tl.constexpr,
    STEP2: tl.constexpr,
    STEP3: tl.constexpr,
    COLUMNS: tl.constexpr,
    REDO: tl.constexpr,
    FORCE: tl.constexpr,
    GIVEN: tl.constexpr,
    ROW_IDS: tl.constexpr,
    N_ROUNDS: tl.constexpr,
    NOISE: tl.constexpr,
):
    """``(B, N)`` lists (or, with ``COLUMNS``, rows of logits) -> per row its kept set's threshold, ``S`` draws
    ``(B, S)``, flags and status.  ``REDO``: only the rows whose status is ``STATUS_FALLBACK``, in place."""
    pid = tl.program_id(0)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    row_ok = rows < B
    rows64 = rows.to(tl.int64)
    k = tl.load(k_ptr + rows64, mask=row_ok, other=0)
    p = tl.load(p_ptr + rows64, mask=row_ok, other=2.0)
    log_p = tl.load(log_min_p_ptr + rows64, mask=row_ok, other=float("-inf"))
    temp = tl.load(temp_ptr + rows64, mask=row_ok, other=1.0)
    inv_temp = tl.load(inv_temp_ptr + rows64, mask=row_ok, other=1.0)
    greedy = temp == 0.0
    rel_err = tl.load(rel_err_ptr)  # float64 (a Python float argument would be float32: 1 - 3e would round to 1)
    if GIVEN:
        active = row_ok
    elif REDO:
        active = row_ok & (tl.load(status_ptr + rows64, mask=row_ok, other=0) == 1)  # STATUS_FALLBACK
    else:
        active = row_ok & ((k > 0) | (p < 1.0) | (log_p > float("-inf")))
    if ROW_IDS:
        u_rows = tl.load(row_id_ptr + rows64, mask=row_ok, other=0).to(tl.uint32)
    else:
        u_rows = rows.to(tl.uint32)
    if TOP_P_SCALED:
        p_scale = tl.where(temp > 0.0, temp, 1.0)
    else:
        p_scale = tl.zeros_like(temp) + 1.0

    n_any = tl.max(tl.where(active, N, 0), axis=0)  # 0 when no row of the program is active: every loop is empty
    m, rv, ri, n_fin = list_stats(cand_z_ptr, cand_i_ptr, rows64, active, n_any, stride_cb, stride_cv, LIST, BLOCK_R,
                                  CH)  # fmt: skip
    m64 = tl.where(m > float("-inf"), m, 0.0).to(tl.float64)
    flag = stage1_flags(flag_ptr, rows64, row_ok, T, BLOCK_R, BLOCK_T)
    if MASS:
        s_full = full_mass(cand_z_ptr, mass_ptr, rows64, active, m, p_scale, T, LIST, BLOCK_R, BLOCK_T)
    else:
        s_full = tl.zeros([BLOCK_R], dtype=tl.float64)
    if COLUMNS:  # whole rows: every candidate is a column, read where it is
        n = tl.where(active, N, 0)
        sz_ptr = cand_z_ptr
        stride_b = tl.zeros([], dtype=tl.int64) + stride_cb
        stride_v = tl.zeros([], dtype=tl.int64) + stride_cv
        overflow = n < 0
    else:
        n = compact(cand_z_ptr, cand_i_ptr, kz_ptr, ki_ptr, kw_ptr, rows64, active, n_any, stride_cb, stride_cv,
                    col_offset, rv, ri, m, p_scale, CAP, WEIGHTS, BLOCK_R, CH)  # fmt: skip
        overflow = n > CAP  # more candidates above R than the scratch holds: the fallback takes the row
        n = tl.where(active & ~overflow, n, 0)
        sz_ptr = kz_ptr
        stride_b = tl.zeros([], dtype=tl.int64) + CAP
        stride_v = tl.zeros([], dtype=tl.int64) + 1

    tv = tl.full([BLOCK_R], ORD_NEG_INF, tl.int32)
    tb = tl.full([BLOCK_R], IDX_ALL, tl.int32)
    ts = tl.full([BLOCK_R], EXACT, tl.int32)
    forced = rows < 0
    if GIVEN:
        tv = tl.load(given_v_ptr + rows64, mask=row_ok, other=ORD_NEG_INF)
        tb = tl.load(given_b_ptr + rows64, mask=row_ok, other=IDX_ALL)
    else:
        gv = tv
        gb = tb
        gs = ts
        tv, tb, ts, gv, gb, gs, forced = apply_step(
            STEP0, tv, tb, ts, gv, gb, gs, forced, sz_ptr, ki_ptr, kw_ptr, rows64, n, CAP, stride_b, stride_v,
            col_offset, m64, p_scale, m, rv, ri, greedy, k, p, log_p, temp, s_full, V, rel_err, MASS, FORCE, COLUMNS,
            BLOCK_R, CH,
        )  # fmt: skip
        tv, tb, ts, gv, gb, gs, forced = apply_step(
            STEP1, tv, tb, ts, gv, gb, gs, forced, sz_ptr, ki_ptr, kw_ptr, rows64, n, CAP, stride_b, stride_v,
            col_offset, m64, p_scale, m, rv, ri, greedy, k, p, log_p, temp, s_full, V, rel_err, MASS, FORCE, COLUMNS,
            BLOCK_R, CH,
        )  # fmt: skip
        tv, tb, ts, gv, gb, gs, forced = apply_step(
            STEP2, tv, tb, ts, gv, gb, gs, forced, sz_ptr, ki_ptr, kw_ptr, rows64, n, CAP, stride_b, stride_v,
            col_offset, m64, p_scale, m, rv, ri, greedy, k, p, log_p, temp, s_full, V, rel_err, MASS, FORCE, COLUMNS,
            BLOCK_R, CH,
        )  # fmt: skip
        tv, tb, ts, gv, gb, gs, forced = apply_step(
            STEP3, tv, tb, ts, gv, gb, gs, forced, sz_ptr, ki_ptr, kw_ptr, rows64, n, CAP, stride_b, stride_v,
            col_offset, m64, p_scale, m, rv, ri, greedy, k, p, log_p, temp, s_full, V, rel_err, MASS, FORCE, COLUMNS,
            BLOCK_R, CH,
        )  # fmt: skip
    decided = (ts == EXACT) & listed(tv, tb, rv, ri) & ~overflow
    bad = (flag & BAD_LOGIT) != 0
    no_finite = n_fin == 0
    drawn = active & (decided | bad | no_finite)
    status = tl.where(~active, 2, tl.where(drawn, tl.where(forced, 3, 0), 1))  # STATUS_*
    write = active if REDO else row_ok
    tl.store(status_ptr + rows64, status, mask=write)

    k0 = seed_lo.to(tl.uint32)
    k1 = seed_hi.to(tl.uint32)
    nd = tl.where(drawn, n, 0)
    flag = flag | tl.where(no_finite & active, NO_FINITE, 0)
    last = col_offset + V - 1
    for smp in range(0, num_samples):
        best_s, best_i = draw_sample(sz_ptr, ki_ptr, kw_ptr, rows64, nd, CAP, stride_b, stride_v, col_offset, m64,
                                     p_scale, tv, tb, inv_temp, u_rows, k0, k1, smp, N_ROUNDS, NOISE, COLUMNS,
                                     BLOCK_R, CH)  # fmt: skip
        token = tl.where(best_s > float("-inf"), best_i.to(tl.int64), last)
        token = tl.minimum(tl.maximum(token, col_offset), last)
        out = rows64 * num_samples + smp
        tl.store(token_ptr + out, token, mask=write)
        if not REDO:
            tl.store(row_flag_ptr + out, flag, mask=row_ok)


# --------------------------------------------------------------------------------------------
# Launcher
# --------------------------------------------------------------------------------------------

#: Compacted candidates a row may hold in stage 2's scratch (more: the row takes the fallback): ``B * CAP * 16``
#: bytes of scratch (32 MB at ``B = 256``).
SCRATCH_CAP = 8192


def stage2_blocks(B: int, N: int) -> tuple[int, int, int]:
    """``(rows per program, candidates per step, warps)``: compiled one row and 4096 candidates per step at 8 warps
    (16 per thread); interpreted up to 64 rows and 64K candidates per step (the interpreter pays per operation)."""
    if INTERPRET:
        block_r = min(64, next_power_of_2(B))
        return block_r, max(16, min(next_power_of_2(N), (1 << 16) // block_r)), 4
    return 1, min(4096, max(256, next_power_of_2(N))), 8


def launch_truncation_stage2(
    cand_z, cand_i, masses, flags, params: dict, steps: tuple[int, int, int, int], num_samples: int, seed_lo: int,
    seed_hi: int, V: int, *, LIST: int, mass: bool, top_p_scaled: bool, rel_err: float, col_offset: int = 0,
    row_ids: torch.Tensor | None = None, given: tuple[torch.Tensor, torch.Tensor] | None = None, noise: bool = True,
    columns: bool = False, redo: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """Stage 2 on lists ``cand_z, cand_i [B, N]`` (``LIST`` entries per tile; ``LIST = 0``: complete lists, whole
    tiles), tile masses ``[B, T]`` (with ``mass``, which needs ``LIST > 0``) and stage-1 flags ``[B, T]``; with
    ``columns``, ``cand_z`` is whole rows of logits ``[B, V]`` (any float dtype and strides; ``cand_i`` unused).
    ``params``: the rows' ``k`` (int32, 0 for none), ``p`` and ``log_min_p`` (float64; ``p >= 1`` and ``-inf`` for
    none), ``temp`` (float64 ``T``) and ``inv_temp`` (float32 ``1/T``).  ``steps``: the order's step codes.
    ``redo = (tokens, flags, status)`` of an earlier pass: only its rows with status ``STATUS_FALLBACK`` are decided
    again, float64 decisions within their bound forced (status ``STATUS_UNDECIDED``), written in place.  Returns
    ``(tokens int64 [B, S], flags int32 [B, S], status int32 [B])``."""
    B, N = cand_z.shape
    T = flags.shape[1]
    device = cand_z.device
    block_r, ch, warps = stage2_blocks(B, N)
    weights = any((s & 7) == STEP_TOP_P for s in steps)
    cap = N if columns else min(N, SCRATCH_CAP)
    scratch = (B, cap) if not columns else (1,)
    kz = torch.empty(scratch, dtype=torch.float32, device=device)
    ki = torch.empty(scratch, dtype=torch.int32, device=device)
    kw = torch.empty(scratch if weights else (1,), dtype=torch.float64, device=device)
    if redo is not None:
        tokens, row_flags, status = redo
    else:
        tokens = torch.empty((B, num_samples), dtype=torch.int64, device=device)
        row_flags = torch.empty((B, num_samples), dtype=torch.int32, device=device)
        status = torch.empty((B,), dtype=torch.int32, device=device)
    rid = row_ids if row_ids is not None else status
    gv, gb = given if given is not None else (status, status)
    err = torch.full((1,), rel_err, dtype=torch.float64, device=device)  # a fill: no copy from the host
    direct(truncation_stage2_kernel)[(triton.cdiv(B, block_r),)](
        cand_z, cand_i, masses, flags, rid, params["k"], params["p"], params["log_min_p"], params["temp"],
        params["inv_temp"], gv, gb, kz, ki, kw, tokens, row_flags, status, err,
        B, N, T, V, col_offset, num_samples, seed_lo, seed_hi, cand_z.stride(0), cand_z.stride(1),
        BLOCK_R=block_r, CH=ch, CAP=cap, BLOCK_T=min(1024, next_power_of_2(max(T, 1))), LIST=LIST, MASS=mass,
        WEIGHTS=weights, TOP_P_SCALED=top_p_scaled, STEP0=steps[0], STEP1=steps[1], STEP2=steps[2],
        STEP3=steps[3], COLUMNS=columns, REDO=redo is not None, FORCE=redo is not None, GIVEN=given is not None,
        ROW_IDS=row_ids is not None, N_ROUNDS=PHILOX_ROUNDS, NOISE=noise, num_warps=warps,
    )  # fmt: skip
    return tokens, row_flags, status
