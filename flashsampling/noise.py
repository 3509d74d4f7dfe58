"""The counter-based noise generator: Triton device functions and their NumPy twin.

The random-number contract
--------------------------
A *seed* is an integer in ``[0, 2**64)``.  The noise of one (seed, row, vocabulary index, sample)
is a pure function of those four numbers and of nothing else (not of tile shapes, grid size,
launch layout, shard layout or world size).  Philox4x32-10 maps a 128-bit counter and the key
``(seed_lo, seed_hi)`` to four 32-bit words::

    (w0, w1, w2, w3) = Philox4x32-10(counter=(c, row, sample, stream), key=(seed_lo, seed_hi))

``stream`` is a tag: ``STREAM_TOKEN = 0`` for the token noise, ``STREAM_GROUP = 1`` for the noise
that picks a group in the grouped variants, ``STREAM_ONLINE = 2`` for the coin of the online
variant's binary merge, ``STREAM_TIE = 3`` for the tie-break keys, ``STREAM_TILE = 4`` for the 128-bit uniform
of a tile's inverse-CDF draw (the prototype of :mod:`flashsampling.tile_cdf`).  Philox is a bijection of the
128-bit counter for a fixed key, so no two distinct counters of one seed share a block; seeds ``s``
and ``s + 1`` are different keys, so their streams do not overlap.  Limits: index, row and sample
each below ``2**32``.

Per-request seeds (``sample(..., seed=<[B] int64 tensor>)``): row ``b`` is keyed by its own seed ``seed[b]`` and its
counters' row field is 0, so its noise is that of row 0 of a batch of one with the int seed ``seed[b]``, wherever
the row sits.  The twin takes an array of seeds in place of the int (:func:`key_words`, broadcast against the
counters).

* **Token noise.** Tokens ``2p`` and ``2p + 1`` share the block with counter
  ``(p, row, sample, STREAM_TOKEN)``: the even token takes ``(w0, w1)``, the odd one ``(w2, w3)``
  (all 128 bits used, one block per two tokens).  From its two words a token builds the 64-bit
  integer ``k = w_hi * 2**32 + w_lo``, uniform on ``[0, 2**64)``, the exponential variate
  ``E = -log(U)`` with ``U = (k + 1/2) / 2**64`` in ``(0, 1)``, computed from the side of ``U``
  where floating point is accurate (:func:`exponential_from_bits`), and the Gumbel variate
  ``G = -log(E)``.
* **Tie-break key.** ``K = w0 | 1`` of the block ``(index, row, sample, STREAM_TIE)``: among
  exactly equal float32 scores the larger key wins, so exact ties are broken uniformly at random
  instead of towards the lower index.  The kernel evaluates keys only where they matter (for a
  whole tile when a row has an exact tie at its maximum, otherwise for the winner alone).
* **Group noise** (stream 1, the group draw of the grouped, factorized tensor-parallel and tile inverse-CDF
  samplers): one block per counter, ``G'`` from ``(w0, w1)`` computed in float64
  (:func:`gumbel64_from_bits`) and key ``w2``.
* **Merge coin** (stream 2, the online merge): one block per counter; "take" iff ``k = w1 * 2**32 + w0`` is below
  ``K(q) = ceil(2**64 q - 1/2)`` (:func:`merge_coin`), so ``P(take) = K(q) / 2**64``, within ``2**-65`` of ``q``.

``G`` lies in ``[-log(45.06), 65 log 2] = [-3.81, 45.06]``: never +inf, -inf or NaN.  The largest
noise value, 45.06 nats, is reached when ``k`` is 0 or ``2**64 - 1``; public samplers built on
24-bit or 31-bit uniforms stop at 16.6 and 21.5 nats.

Stream versions
---------------
:data:`STREAM_VERSION` names the map from (seed, row, index, sample) to tokens; it changes whenever a seed's tokens
change.  Version 2: the second-level draws are exact on the 64-bit grid -- the group noise is computed in float64
from its 64 bits (version 1: float32) and the online merge compares the coin's 64-bit integer with an integer
threshold (version 1: a float32 exponential against a float64 log-ratio).  For a given seed the tokens of the
grouped, online, factorized tensor-parallel and tile inverse-CDF samplers differ between the versions (their law
does not); those of :func:`flashsampling.sample`, of greedy rows and of the pathwise tensor-parallel combine do not.

Float64 arithmetic of the second-level draws
--------------------------------------------
:func:`log64` and :func:`exp_neg64` are written with separately rounded IEEE float64 operations (compiled: ``.rn``
PTX instructions in inline assembly, which the compiler cannot contract into fused multiply-adds), so their NumPy
twins :func:`log64_np` and :func:`exp_neg64_np` return the same bits, compiled or interpreted, and the coin's
comparison is integer: the group draw and the merge coin of a kernel equal their twins' bit for bit for the same
inputs.  Their accuracy is proved in ``proofs/finite_precision.md``, section 8.

Float32 arithmetic, and the twin
--------------------------------
The kernel computes ``E`` and ``G`` in float32 with the operation order written in
:func:`exponential_from_bits`.  The NumPy twin (:func:`philox4x32_np`, :func:`gumbel_from_bits_np`,
:func:`token_noise_np`) computes the same 32-bit integers bit for bit and the same float32 operations in the same order.
In the Triton interpreter both run through NumPy and agree bit for bit; compiled on a GPU, ``log``
may differ from NumPy's in the last unit in the last place, so the documented bound is
``|G_kernel - G_twin| <= NOISE_ABS_TOL + NOISE_REL_TOL * |G_twin|`` (measured on the H200: see
``benchmarks/NOTES.md``).

Why one module: every stream is a Triton device function beside the NumPy twin that must equal it bit for bit
(Philox, the token, group and coin variates, the float64 ``log``/``exp``); keeping each pair side by side is what
makes the replay tests and the proofs' checks read one definition.  Hence its length (~750 lines).

References
----------
J. K. Salmon, M. A. Moraes, R. O. Dror, D. E. Shaw, "Parallel random numbers: as easy as 1, 2,
3", SC 2011 (Philox4x32-10, its constants and known-answer vectors).
T. J. Dekker, "A floating-point technique for extending the available precision", Numerische
Mathematik 18, 1971 (Fast2Sum: the rounding error of ``1 - x`` is exact).
W. Kahan and K. C. Ng, fdlibm ``e_log.c`` and ``e_exp.c``, Sun Microsystems, 1993 (the split of ``ln 2``, the
reduction ``x = 2**e m`` with ``m`` in ``[sqrt(1/2), sqrt(2))`` and ``log1p(f) = f - s (f - R)``, ``s = f / (2 + f)``).
"""

from __future__ import annotations

import math
import struct

import numpy as np
import triton.language as tl

from ._device import INTERPRET, device_function  # (sets TRITON_INTERPRET before the kernels are defined)

PHILOX_ROUNDS = 10
PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85

STREAM_TOKEN = 0
STREAM_GROUP = 1
STREAM_ONLINE = 2
STREAM_TIE = 3
STREAM_TILE = 4
#: The stream version (module docstring): 2 since the second-level draws became exact on the 64-bit grid.
STREAM_VERSION = 2

#: The largest Gumbel value the generator can return: -log(-log1p(-2**-65)) = 65 log 2.
MAX_NOISE = 65.0 * float(np.log(2.0))
#: Bound on |G_kernel - G_twin| in float32 (compiled GPU log vs NumPy log); see module docstring.
NOISE_ABS_TOL = 2.0**-21
NOISE_REL_TOL = 2.0**-21

_TWO_M24 = 2.0**-24
_TWO_M32 = 2.0**-32
_TWO_M64 = 2.0**-64
_TWO_M65 = 2.0**-65


def split_seed(seed: int) -> tuple[int, int]:
    """Split a 64-bit seed into the Philox key words ``(lo, hi)``."""
    return seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF


def key_words(seed) -> tuple:
    """The Philox key ``(lo, hi)`` of a seed: ints for an int seed (:func:`split_seed`), uint32 arrays for an array of
    seeds (per-request seeds: one key per element, broadcast against the counters; a signed array is read as its
    two's-complement 64 bits, as the kernels read an int64 seed tensor)."""
    if isinstance(seed, np.ndarray) and seed.ndim:
        bits = seed.astype(np.int64).view(np.uint64) if seed.dtype.kind == "i" else seed.astype(np.uint64)
        return (bits & np.uint64(0xFFFFFFFF)).astype(np.uint32), (bits >> np.uint64(32)).astype(np.uint32)
    return split_seed(int(seed))


# --------------------------------------------------------------------------------------------
# Float64 arithmetic of the second-level draws: constants
# --------------------------------------------------------------------------------------------

#: ``ln 2 = LN2_HI + LN2_LO`` to ``2**-85`` (fdlibm's split); ``LN2_HI`` has 32 significant bits, so ``e * LN2_HI`` is
#: exact for ``|e| < 2**21``.
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
INV_LN2 = 1.4426950408889634
#: ``1.5 * 2**52``: ``(t + R) - R`` is ``rint(t)`` for ``|t| < 2**51``, and the low bits of ``t + R`` hold it.
ROUNDER64 = 6755399441055744.0
_ROUNDER64_BITS = 0x4338000000000000
#: The bits of ``sqrt(1/2)``: :func:`log64` reduces ``x = 2**e m`` with ``m`` in ``[sqrt(1/2), sqrt(2))``.
_SQRT_HALF_BITS = 0x3FE6A09E667F3BCD
#: ``R(z) = sum_{j=1..10} c_j z**j`` with ``c_j = fl(2 / (2j + 1))``: ``2 atanh(s) = 2s + s R(s**2)`` (Taylor).
LOG64_COEFFS = tuple(2.0 / (2 * j + 1) for j in range(1, 11))
#: ``exp(x) ~ sum_{j=0..13} fl(1 / j!) x**j`` on ``|x| <= ln(2) / 2`` (Taylor).
EXP64_COEFFS = tuple(1.0 / math.factorial(j) for j in range(14))
#: :func:`exp_neg64` clamps its argument to ``[0, EXP64_CLAMP]``: ``exp(-64) < 2**-92``, and the coin, whose
#: resolution is ``2**-64``, cannot tell it from anything smaller.
EXP64_CLAMP = 64.0
_TWO_64 = 18446744073709551616.0


def _f64(c: float) -> str:
    """A float64 constant as PTX writes it (``0dXXXXXXXXXXXXXXXX``)."""
    return f"0d{struct.unpack('<Q', struct.pack('<d', c))[0]:016X}"


def _horner_asm(acc: str, x: str, coeffs) -> str:
    """PTX for Horner's rule ``acc = (..(c_n x + c_{n-1}) x + ..) + c_0``, each product and sum rounded (``.rn``)."""
    out = f" mov.f64 {acc}, {_f64(coeffs[-1])};"
    for c in coeffs[-2::-1]:
        out += f" mul.rn.f64 {acc}, {acc}, {x}; add.rn.f64 {acc}, {acc}, {_f64(c)};"
    return out


#: ``$0 = e LN2_HI + (e LN2_LO + log1p(f))`` from ``$1 = f``, ``$2 = e`` (float64): :func:`log64`'s float part.
_LOG64_ASM = (
    "{ .reg .f64 %fs_s, %fs_z, %fs_p, %fs_w;"
    f" add.rn.f64 %fs_s, $1, {_f64(2.0)}; div.rn.f64 %fs_s, $1, %fs_s; mul.rn.f64 %fs_z, %fs_s, %fs_s;"
    + _horner_asm("%fs_p", "%fs_z", LOG64_COEFFS)
    + " mul.rn.f64 %fs_p, %fs_p, %fs_z;"
    " sub.rn.f64 %fs_w, $1, %fs_p; mul.rn.f64 %fs_w, %fs_s, %fs_w; sub.rn.f64 %fs_w, $1, %fs_w;"
    f" mul.rn.f64 %fs_p, $2, {_f64(LN2_LO)}; add.rn.f64 %fs_w, %fs_p, %fs_w;"
    f" mul.rn.f64 %fs_p, $2, {_f64(LN2_HI)}; add.rn.f64 $0, %fs_p, %fs_w; }}"
)
#: ``$0 = fl(fl($1 INV_LN2) + ROUNDER64)``: :func:`exp_neg64`'s rounding of ``a / ln 2``.
_EXP64_ROUND_ASM = (
    f"{{ .reg .f64 %fs_t; mul.rn.f64 %fs_t, $1, {_f64(INV_LN2)}; add.rn.f64 $0, %fs_t, {_f64(ROUNDER64)}; }}"
)
#: ``$0 = P(x)``, ``x = fl(fl(n LN2_HI - a) + fl(n LN2_LO))`` from ``$1 = a``, ``$2 = n``: :func:`exp_neg64`'s
#: polynomial.
_EXP64_POLY_ASM = (
    "{ .reg .f64 %fs_x, %fs_t;"
    f" mul.rn.f64 %fs_x, $2, {_f64(LN2_HI)}; sub.rn.f64 %fs_x, %fs_x, $1;"
    f" mul.rn.f64 %fs_t, $2, {_f64(LN2_LO)}; add.rn.f64 %fs_x, %fs_x, %fs_t;"
    + _horner_asm("$0", "%fs_x", EXP64_COEFFS)
    + " }"
)


# (As constexpr: a compiled kernel reads only constexpr globals.)
_LOG64_ASM_PTX = tl.constexpr(_LOG64_ASM)
_EXP64_ROUND_ASM_PTX = tl.constexpr(_EXP64_ROUND_ASM)
_EXP64_POLY_ASM_PTX = tl.constexpr(_EXP64_POLY_ASM)


# --------------------------------------------------------------------------------------------
# Triton device functions
# --------------------------------------------------------------------------------------------


@device_function
def philox4x32(c0, c1, c2, c3, k0, k1, N_ROUNDS: tl.constexpr):
    """Philox4x32 with ``N_ROUNDS`` rounds on uint32 counters ``c0..c3`` and key ``(k0, k1)``.

    Each round's two multiplications are written as 64-bit products of 32-bit words, whose high and low
    halves are the round's ``mulhi`` and ``mullo``: one ``IMAD.WIDE.U32`` each on sm_90, where separate
    ``umulhi`` and ``mul`` compiled to two instructions (the same integers; ``tests/test_noise.py`` checks the
    kernel's words against the twin and the known answers)."""
    for _ in tl.static_range(N_ROUNDS):
        p0 = c0.to(tl.uint64) * 0xD2511F53
        p2 = c2.to(tl.uint64) * 0xCD9E8D57
        c0 = (p2 >> 32).to(tl.uint32) ^ c1 ^ k0
        c2 = (p0 >> 32).to(tl.uint32) ^ c3 ^ k1
        c1 = p2.to(tl.uint32)
        c3 = p0.to(tl.uint32)
        k0 = tl.add(k0, 0x9E3779B9, sanitize_overflow=False)
        k1 = tl.add(k1, 0xBB67AE85, sanitize_overflow=False)
    return c0, c1, c2, c3


if INTERPRET:

    @device_function
    def positive_log(x):
        """``log(x)`` for float32 ``x``: NumPy's, in the interpreter (the twin's own)."""
        return tl.log(x)

else:

    @device_function
    def positive_log(x):
        """``log(x)`` for positive, normal, finite float32 ``x``: libdevice's ``logf``, bit for bit,
        without its branches for zero, subnormal, infinite, NaN and negative inputs (5-6 of its ~20
        instructions; the noise calls it about twice per token).

        ``x = 2**e * m`` with ``m`` in ``[2/3, 4/3)``, ``f = m - 1`` (exact), ``log(x) = e log 2 +
        log1p(f)`` with ``log1p(f) = f + f * (f * P(f))``, ``P`` libdevice's degree-8 polynomial,
        evaluated in the same order with the same fused multiply-adds (read off the SASS of
        ``tl.log`` on sm_90, triton 3.6).  Every argument the noise passes is in ``[2**-66, 46]``:
        positive and normal.  ``tests/test_noise.py`` checks the equality with ``tl.log`` on the GPU.
        """
        bits = x.to(tl.int32, bitcast=True)
        e = (bits - 0x3F2AAAAB) & -8388608  # the exponent, times 2**23 (0xFF800000)
        f = (bits - e).to(tl.float32, bitcast=True) - 1.0
        p = tl.fma(f, -0.13018856942653656, 0.1408461034297943)
        p = tl.fma(f, p, -0.12148627638816833)
        p = tl.fma(f, p, 0.1398061066865921)
        p = tl.fma(f, p, -0.16684235632419586)
        p = tl.fma(f, p, 0.20012299716472626)
        p = tl.fma(f, p, -0.24999669194221497)
        p = tl.fma(f, p, 0.333331823348999)
        p = tl.fma(f, p, -0.5)
        p = f * p
        r = tl.fma(f, p, f)
        # e log 2 + r with one rounding: (e * 2**-23) * log 2 is e * (2**-23 log 2), both exact products.
        return tl.fma(e.to(tl.float32), 8.262958317573066e-08, r)


if INTERPRET:

    @device_function
    def ratio_to_half_one(d, y):
        """``d / y`` for float32 ``y`` in ``[1/2, 1]``: NumPy's correctly rounded division, in the interpreter
        (the twin's own)."""
        return tl.fdiv(d, y)

else:

    @device_function
    def ratio_to_half_one(d, y):
        """``d / y`` for float32 ``y`` in ``[1/2, 1]`` and normal ``d``: ``div.full.f32`` (what ``tl.fdiv``
        compiles to) without its range checks, i.e. the approximate reciprocal ``MUFU.RCP`` and one multiply.
        ``div.full.f32`` rescales ``y`` only when ``|y| > 2**126`` or ``|y| < 2**-126``, so on ``[1/2, 1]`` the
        two agree bit for bit (``tests/test_noise.py`` checks it on the GPU); 2 instructions instead of about 10."""
        r = tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [y], dtype=tl.float32, is_pure=True,
                                      pack=1)  # fmt: skip
        return d * r


@device_function
def exponential_from_bits(w0, w1):
    """``E = -log(U)``, ``U = (w1 * 2**32 + w0 + 1/2) / 2**64``, in float32, never 0 or inf.

    Let ``b`` be the top bit of ``w1``.  If ``b = 0``, ``U < 1/2`` is formed directly as ``x`` and
    ``-log(x)`` is accurate.  If ``b = 1``, ``U >= 1/2``: we form ``x = 1 - U`` from the complemented
    bits (as small as ``2**-65``), round ``y = fl(1 - x)`` and take its rounding error
    ``d = (1 - y) - x``, which is exact (``1 - y`` is exact by Sterbenz's lemma, and ``d`` is the
    Fast2Sum error term of ``1 + (-x)``).  Then ``U = y + d`` exactly and
    ``-log(U) = -log(y) - log1p(d / y) = -log(y) - d / y`` up to ``(d / y)**2 / 2 < 2**-49``; for
    ``x < 2**-25``, ``y = 1`` and the result is ``x`` itself.  ``d / y`` is a correction below one
    float32 ulp of the result, so an approximate division changes the result by at most one
    rounding (the kernel's, :func:`ratio_to_half_one`, is ``div.full.f32`` bit for bit).  ``x`` is
    built as ``fl((m1 >> 8) * 2**-24 + fl(fl(m1 & 255) * 2**-32 + fl(fl(m0) * 2**-64 + 2**-65)))``: the high
    part is exact and the low word is not truncated, but the sum is not rounded once to nearest -- the middle term is
    rounded to ``2**-48`` before ``x`` is, which moves a class of equal ``x`` by up to ``2**15`` grid points
    (``proofs/finite_precision.md``, section 6, scans every class); products by powers of two are exact, so fused
    multiply-adds give the same result as separate operations.
    """
    x, top = uniform_side_from_bits(w0, w1)
    return exponential_from_side(x, top)


@device_function
def uniform_side_from_bits(w0, w1):
    """``(x, top)``: ``top`` the top bit of ``w1``, ``x = U`` if ``top == 0`` else ``x = 1 - U``, in float32
    (``x`` in ``[2**-65, 1/2]``; its roundings: :func:`exponential_from_bits`)."""
    top = w1 >> 31
    # (x ^ 0xFFFFFFFF is ~x: the interpreter's ~ fails on uint32.)
    m1 = tl.where(top == 1, w1 ^ 0xFFFFFFFF, w1) & 0x7FFFFFFF
    m0 = tl.where(top == 1, w0 ^ 0xFFFFFFFF, w0)
    # x = m1 * 2**-32 + m0 * 2**-64 + 2**-65: the top 23 bits of m1 exact in float32, the rest added as one term
    # (rounded to 2**-48 first, then with the high part: no truncation bias).
    low = m0.to(tl.float32) * 5.421010862427522e-20 + 2.710505431213761e-20
    mid = (m1 & 0xFF).to(tl.float32) * 2.3283064365386963e-10 + low
    x = (m1 >> 8).to(tl.float32) * 5.960464477539063e-08 + mid
    return x, top


@device_function
def exponential_from_side(x, top):
    """``E = -log(U)`` from :func:`uniform_side_from_bits`'s ``(x, top)`` (:func:`exponential_from_bits`)."""
    # top == 0: x is U itself.  top == 1: x is 1 - U, and U = y + d exactly.
    y = 1.0 - x
    d = (1.0 - y) - x
    arg = tl.where(top == 1, y, x)
    corr = tl.where(top == 1, ratio_to_half_one(d, y), 0.0)
    return -positive_log(arg) - corr


@device_function
def gumbel_from_bits(w0, w1):
    """``G = -log(E)`` in float32 for the words ``(w0, w1)`` (:func:`exponential_from_bits`); twin:
    :func:`gumbel_from_bits_np`."""
    return -positive_log(exponential_from_bits(w0, w1))


@device_function
def pair_noise(k0, k1, row, pair, sample, N_ROUNDS: tl.constexpr):
    """Gumbel noise of the token pair ``(2 * pair, 2 * pair + 1)``: one Philox block, two tokens.

    Returns ``(G_even, G_odd)`` float32, from the words ``(w0, w1)`` and ``(w2, w3)`` of the
    block ``(pair, row, sample, STREAM_TOKEN)``.
    """
    w0, w1, w2, w3 = philox4x32(pair, row, sample, tl.zeros_like(sample), k0, k1, N_ROUNDS)
    return gumbel_from_bits(w0, w1), gumbel_from_bits(w2, w3)


@device_function
def token_noise(k0, k1, row, index, sample, N_ROUNDS: tl.constexpr):
    """Gumbel noise of single tokens (uint32 ``index``), for tiles that do not start on a pair.

    The same values as :func:`pair_noise` (block ``index >> 1``, words chosen by ``index & 1``),
    at the cost of one Philox block per token.
    """
    w0, w1, w2, w3 = philox4x32(index >> 1, row, sample, tl.zeros_like(sample), k0, k1, N_ROUNDS)
    odd = (index & 1) == 1
    return gumbel_from_bits(tl.where(odd, w2, w0), tl.where(odd, w3, w1))


@device_function
def tie_key(k0, k1, row, index, sample, N_ROUNDS: tl.constexpr):
    """The tie-break key of token ``index``: word ``w0 | 1`` of block ``(index, row, sample, STREAM_TIE)``."""
    stream = tl.zeros_like(sample) + 3
    w0, w1, w2, w3 = philox4x32(index, row, sample, stream, k0, k1, N_ROUNDS)
    return w0 | 1


# --------------------------------------------------------------------------------------------
# Float64 arithmetic of the second-level draws: Triton device functions
# --------------------------------------------------------------------------------------------

if INTERPRET:

    @device_function
    def _log64_tail(f, e):
        """``e LN2_HI + (e LN2_LO + log1p(f))``, each operation rounded (NumPy's, in the interpreter)."""
        s = f / (2.0 + f)
        z = s * s
        p = LOG64_COEFFS[-1]
        for c in LOG64_COEFFS[-2::-1]:
            p = p * z + c
        r = p * z
        return e * LN2_HI + (e * LN2_LO + (f - s * (f - r)))

    @device_function
    def _exp64_round(a):
        return a * INV_LN2 + ROUNDER64

    @device_function
    def _exp64_poly(a, n):
        x = (n * LN2_HI - a) + n * LN2_LO
        p = EXP64_COEFFS[-1]
        for c in EXP64_COEFFS[-2::-1]:
            p = p * x + c
        return p

else:

    @device_function
    def _log64_tail(f, e):
        """``e LN2_HI + (e LN2_LO + log1p(f))`` in ``.rn`` float64 PTX (:data:`_LOG64_ASM`)."""
        return tl.inline_asm_elementwise(_LOG64_ASM_PTX, "=d,d,d", [f, e], dtype=tl.float64, is_pure=True, pack=1)

    @device_function
    def _exp64_round(a):
        return tl.inline_asm_elementwise(_EXP64_ROUND_ASM_PTX, "=d,d", [a], dtype=tl.float64, is_pure=True, pack=1)

    @device_function
    def _exp64_poly(a, n):
        return tl.inline_asm_elementwise(_EXP64_POLY_ASM_PTX, "=d,d,d", [a, n], dtype=tl.float64, is_pure=True, pack=1)


@device_function
def log64(x):
    """``log(x)`` in float64 for positive, normal, finite float64 ``x``; twin :func:`log64_np`, bit for bit.

    ``x = 2**e m`` with ``m`` in ``[sqrt(1/2), sqrt(2))`` read off the bits, ``f = m - 1`` (exact, Sterbenz),
    ``s = f / (2 + f)``, ``z = s**2``, and ``log x = e LN2_HI + (e LN2_LO + log1p(f))`` with
    ``log1p(f) = 2 atanh(s) = f - s (f - R(z))``, ``R`` the Taylor polynomial :data:`LOG64_COEFFS` (``|s| <= 0.1716``,
    its remainder below ``2**-60`` relative), every operation rounded separately to nearest.
    ``proofs/finite_precision.md`` (Lemma 8.1) bounds the error.
    """
    bits = x.to(tl.int64, bitcast=True)
    e = (bits - 0x3FE6A09E667F3BCD) >> 52  # _SQRT_HALF_BITS; arithmetic shift: the exponent e
    f = (bits - (e << 52)).to(tl.float64, bitcast=True) - 1.0
    return _log64_tail(f, e.to(tl.float64))


@device_function
def exp_neg64(a):
    """``exp(-a)`` in float64 for float64 ``a >= 0`` (clamped to ``[0, 64]``; NaN counts as 64); twin
    :func:`exp_neg64_np`, bit for bit.

    ``n = rint(a / ln 2)`` (by :data:`ROUNDER64`), ``x = (n LN2_HI - a) + n LN2_LO`` (the first difference exact,
    Sterbenz), ``exp(-a) = 2**-n P(x)`` with ``P`` the Taylor polynomial :data:`EXP64_COEFFS` on ``|x| <= 0.3466``,
    every operation rounded separately to nearest; ``2**-n`` is built from its bits.  ``proofs/finite_precision.md``
    (Lemma 8.2) bounds the error.
    """
    a = tl.where(a < 64.0, a, 64.0)  # EXP64_CLAMP
    r = _exp64_round(a)
    n = r.to(tl.int64, bitcast=True) - 0x4338000000000000  # _ROUNDER64_BITS: the integer n in [0, 93]
    scale = ((1023 - n) << 52).to(tl.float64, bitcast=True)
    return _exp64_poly(a, r - 6755399441055744.0) * scale  # (r - ROUNDER64 = n exactly)


@device_function
def coin_take(w0, w1, m, heavy):
    """``True`` iff ``k = w1 * 2**32 + w0 < K(q) = ceil(2**64 q - 1/2)``, ``q = m`` (``heavy`` false) or ``q = 1 - m``
    (``heavy`` true), for float64 ``m`` in ``[0, 1/2]``: the take set is ``[0, K(q))`` and ``P(take) = K(q) / 2**64``.

    ``K`` comes from the accurate side: ``y = 2**64 m`` (exact), ``f = floor(y)`` and ``y - f`` (exact), and
    ``K = f + [y - f > 1/2]`` for ``q = m``; for ``q = 1 - m``, ``K = 2**64 - g`` with ``g = f + [y - f >= 1/2]``,
    and ``k < 2**64 - g`` iff not ``~k < g`` (``~k = 2**64 - 1 - k``, the complemented words).
    """
    y = m * 18446744073709551616.0  # 2**64
    f = y.to(tl.uint64)
    frac = y - f.to(tl.float64)
    g = f + tl.where(heavy, frac >= 0.5, frac > 0.5).to(tl.uint64)
    c1 = tl.where(heavy, w1 ^ 0xFFFFFFFF, w1)
    c0 = tl.where(heavy, w0 ^ 0xFFFFFFFF, w0)
    kk = (c1.to(tl.uint64) << 32) | c0.to(tl.uint64)
    return (kk < g) != heavy


@device_function
def merge_coin(w0, w1, l_keep, l_take):
    """The online merge's coin: ``True`` ("take") with probability ``q = e**l_take / (e**l_keep + e**l_take)``, from
    the words ``(w0, w1)`` of its block; twin :func:`merge_coin_np`, bit for bit.

    ``m = min(q, 1 - q) = e / (1 + e)``, ``e = exp(-|l_keep - l_take|)`` (:func:`exp_neg64`), and
    :func:`coin_take` with ``heavy = l_take > l_keep``.  ``l_take = -inf``: never; ``l_keep = -inf < l_take``: always.
    """
    l_keep = l_keep.to(tl.float64)
    l_take = l_take.to(tl.float64)
    heavy = l_take > l_keep
    e = exp_neg64(tl.abs(l_keep - l_take))  # (-inf - -inf = NaN: clamped to 64, and heavy is false: never)
    return coin_take(w0, w1, e / (1.0 + e), heavy)


@device_function
def exponential64_from_bits(w0, w1):
    """``E = -log(U)``, ``U = (w1 * 2**32 + w0 + 1/2) / 2**64``, in float64 from the accurate side (as
    :func:`exponential_from_bits` in float32); twin :func:`exponential64_from_bits_np`, bit for bit.

    ``x = U`` (top bit 0) or ``1 - U`` (top bit 1) is ``fl((m1 * 2**32) * 2**-64 + (m0 + 1/2) * 2**-64)``: both terms
    exact, one rounding.  Top bit 0: ``E = -log(x)``.  Top bit 1: ``y = fl(1 - x)``, ``d = (1 - y) - x`` (exact), so
    ``U = y + d`` and ``E = -(log(y) + d / y)`` up to ``(d / y)**2 / 2 <= 2**-107``."""
    top = w1 >> 31
    m1 = tl.where(top == 1, w1 ^ 0xFFFFFFFF, w1) & 0x7FFFFFFF
    m0 = tl.where(top == 1, w0 ^ 0xFFFFFFFF, w0)
    # Products by powers of two are exact, so a contraction into a fused multiply-add rounds the same.
    low = m0.to(tl.float64) * 5.421010862427522e-20 + 2.710505431213761e-20  # (m0 + 1/2) 2**-64, exact
    x = m1.to(tl.float64) * 2.3283064365386963e-10 + low  # + m1 2**-32: one rounding
    y = 1.0 - x
    d = (1.0 - y) - x
    arg = tl.where(top == 1, y, x)
    corr = tl.where(top == 1, d / y, 0.0)
    return -(log64(arg) + corr)


@device_function
def gumbel64_from_bits(w0, w1):
    """``G = -log(E)`` in float64 for the words ``(w0, w1)`` (:func:`exponential64_from_bits`, :func:`log64`); twin
    :func:`gumbel64_from_bits_np`, bit for bit.  ``G`` in ``[-3.81, 45.06]``."""
    return -log64(exponential64_from_bits(w0, w1))


# --------------------------------------------------------------------------------------------
# NumPy twin
# --------------------------------------------------------------------------------------------


def philox4x32_np(c0, c1, c2, c3, k0, k1, rounds: int = PHILOX_ROUNDS):
    """Philox4x32 on NumPy arrays; the same integers as :func:`philox4x32`, bit for bit.

    Counters broadcast against each other; keys are scalars in ``[0, 2**32)``, or uint32 arrays that broadcast
    against the counters (per-request seeds, :func:`key_words`).
    """
    if isinstance(k0, np.ndarray) and k0.ndim:
        return _philox4x32_keys_np(c0, c1, c2, c3, k0, k1, rounds)
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint32) for c in np.broadcast_arrays(c0, c1, c2, c3))
    m0 = np.uint64(PHILOX_M0)
    m1 = np.uint64(PHILOX_M1)
    mask = np.uint64(0xFFFFFFFF)
    k0 = int(k0) & 0xFFFFFFFF
    k1 = int(k1) & 0xFFFFFFFF
    for _ in range(rounds):
        p0 = c0.astype(np.uint64) * m0
        p1 = c2.astype(np.uint64) * m1
        hi0 = (p0 >> np.uint64(32)).astype(np.uint32)
        hi1 = (p1 >> np.uint64(32)).astype(np.uint32)
        lo0 = (p0 & mask).astype(np.uint32)
        lo1 = (p1 & mask).astype(np.uint32)
        c0, c1, c2, c3 = hi1 ^ c1 ^ np.uint32(k0), lo1, hi0 ^ c3 ^ np.uint32(k1), lo0
        k0 = (k0 + PHILOX_W0) & 0xFFFFFFFF
        k1 = (k1 + PHILOX_W1) & 0xFFFFFFFF
    return c0, c1, c2, c3


def _philox4x32_keys_np(c0, c1, c2, c3, k0: np.ndarray, k1: np.ndarray, rounds: int):
    """:func:`philox4x32_np` with uint32 key arrays broadcast against the counters (a key per element)."""
    c0, c1, c2, c3, k0, k1 = (np.asarray(c, dtype=np.uint32) for c in np.broadcast_arrays(c0, c1, c2, c3, k0, k1))
    m0 = np.uint64(PHILOX_M0)
    m1 = np.uint64(PHILOX_M1)
    mask = np.uint64(0xFFFFFFFF)
    for _ in range(rounds):
        p0 = c0.astype(np.uint64) * m0
        p1 = c2.astype(np.uint64) * m1
        hi0 = (p0 >> np.uint64(32)).astype(np.uint32)
        hi1 = (p1 >> np.uint64(32)).astype(np.uint32)
        lo0 = (p0 & mask).astype(np.uint32)
        lo1 = (p1 & mask).astype(np.uint32)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0 = k0 + np.uint32(PHILOX_W0)  # uint32 array arithmetic wraps mod 2**32
        k1 = k1 + np.uint32(PHILOX_W1)
    return c0, c1, c2, c3


def exponential_from_bits_np(w0: np.ndarray, w1: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`exponential_from_bits`: the same float32 operations in the same order."""
    f32 = np.float32
    top = w1 >> np.uint32(31)
    m1 = np.where(top == 1, ~w1, w1) & np.uint32(0x7FFFFFFF)
    m0 = np.where(top == 1, ~w0, w0)
    with np.errstate(divide="ignore", invalid="ignore"):
        low = m0.astype(f32) * f32(_TWO_M64) + f32(_TWO_M65)
        mid = (m1 & np.uint32(0xFF)).astype(f32) * f32(_TWO_M32) + low
        x = (m1 >> np.uint32(8)).astype(f32) * f32(_TWO_M24) + mid
    return exponential_from_side_np(x, top)


def exponential_from_side_np(x: np.ndarray, top: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`exponential_from_side` (float32 ``x``, ``top`` 0 or 1)."""
    f32 = np.float32
    x = np.asarray(x, dtype=f32)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = f32(1.0) - x
        d = (f32(1.0) - y) - x
        arg = np.where(top == 1, y, x)
        corr = np.where(top == 1, d / y, f32(0.0))
        return (-np.log(arg) - corr).astype(f32)


def gumbel_from_bits_np(w0: np.ndarray, w1: np.ndarray) -> np.ndarray:
    """``G = -log(E)`` in float32 for the words ``(w0, w1)``, as the kernel computes it."""
    return (-np.log(exponential_from_bits_np(w0, w1))).astype(np.float32)


def tie_key_np(seed, row, index, sample) -> np.ndarray:
    """NumPy twin of :func:`tie_key`: ``w0 | 1`` of block ``(index, row, sample, STREAM_TIE)`` (uint32).  ``seed``: an
    int, or an array of seeds broadcast against the counters (:func:`key_words`)."""
    k0, k1 = key_words(seed)
    w0, _, _, _ = philox4x32_np(index, row, sample, STREAM_TIE, k0, k1)
    return w0 | np.uint32(1)


class TieKeys:
    """The tie-break keys of a broadcast block of tokens, computed when first converted to an array.

    Exact float32 ties are rare among sampled rows, so the twin's :func:`~flashsampling.twin.select`
    asks for the keys only when a row has one; ``np.asarray(keys)`` gives :func:`tie_key_np`'s array.
    """

    def __init__(self, seed: int, row, index, sample) -> None:
        self._args = (seed, row, index, sample)
        self._keys: np.ndarray | None = None

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        if self._keys is None:
            self._keys = tie_key_np(*self._args)
        return self._keys if dtype is None else self._keys.astype(dtype)


def token_noise_np(seed, row, index, sample, stream: int = STREAM_TOKEN, *, lazy_keys: bool = False):
    """NumPy twin of the kernels' noise: ``(G float32, key uint32)`` broadcast over the counters.  ``seed``: an int,
    or an array of seeds broadcast against the counters (per-request seeds, :func:`key_words`).

    ``lazy_keys=True`` returns the token stream's keys as a :class:`TieKeys` (evaluated on demand).

    ``stream == STREAM_TOKEN`` (the token noise): ``G`` from the words of block
    ``(index >> 1, row, sample, STREAM_TOKEN)`` that belong to ``index`` (``(w0, w1)`` for an even
    index, ``(w2, w3)`` for an odd one) and ``key = tie_key_np(...)``.  Any other stream: the float32
    ``G`` from the words ``(w0, w1)`` of block ``(index, row, sample, stream)`` and ``key = w2`` (the
    group draw itself uses the float64 noise of :func:`group_noise_np`).
    """
    k0, k1 = key_words(seed)
    if stream != STREAM_TOKEN:
        w0, w1, w2, _ = philox4x32_np(index, row, sample, stream, k0, k1)
        return gumbel_from_bits_np(w0, w1), w2
    index = np.asarray(index, dtype=np.uint32)
    flat = index.ravel()
    if (
        index.ndim
        and index.size == index.shape[-1] > 1
        and index.size % 2 == 0
        and flat[0] % 2 == 0
        and (np.all(np.diff(flat.astype(np.int64)) == 1))
    ):
        # A run of whole pairs along the last axis (the twin's usual call): one block per pair, as the kernel.
        pairs = (flat[0::2] >> np.uint32(1)).reshape(index.shape[:-1] + (index.size // 2,))
        w0, w1, w2, w3 = philox4x32_np(pairs, row, sample, STREAM_TOKEN, k0, k1)
        both = np.stack([gumbel_from_bits_np(w0, w1), gumbel_from_bits_np(w2, w3)], axis=-1)
        g = both.reshape(both.shape[:-2] + (index.size,))
    else:
        w0, w1, w2, w3 = philox4x32_np(index >> np.uint32(1), row, sample, STREAM_TOKEN, k0, k1)
        odd = (index & np.uint32(1)) == 1
        g = gumbel_from_bits_np(np.where(odd, w2, w0), np.where(odd, w3, w1))
    keys = TieKeys(seed, row, index, sample)
    return g, keys if lazy_keys else np.asarray(keys)


# --------------------------------------------------------------------------------------------
# Float64 arithmetic of the second-level draws: NumPy twins
# --------------------------------------------------------------------------------------------


def log64_np(x: np.ndarray, coeffs=LOG64_COEFFS) -> np.ndarray:
    """NumPy twin of :func:`log64` (float64, the same operations in the same order).  ``coeffs``: the polynomial
    (the proofs plant a shortened one)."""
    x = np.asarray(x, dtype=np.float64)
    bits = x.view(np.int64)
    e = (bits - np.int64(_SQRT_HALF_BITS)) >> np.int64(52)
    f = (bits - (e << np.int64(52))).view(np.float64) - 1.0
    s = f / (2.0 + f)
    z = s * s
    p = np.full_like(z, coeffs[-1])
    for c in coeffs[-2::-1]:
        p = p * z + c
    r = p * z
    ef = e.astype(np.float64)
    return ef * LN2_HI + (ef * LN2_LO + (f - s * (f - r)))


def exp_neg64_np(a: np.ndarray, coeffs=EXP64_COEFFS) -> np.ndarray:
    """NumPy twin of :func:`exp_neg64` (float64 ``a``; the same operations in the same order)."""
    a = np.asarray(a, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        a = np.where(a < EXP64_CLAMP, a, EXP64_CLAMP)
    r = a * INV_LN2 + ROUNDER64
    n = r.view(np.int64) - np.int64(_ROUNDER64_BITS)
    scale = ((np.int64(1023) - n) << np.int64(52)).view(np.float64)
    nf = r - ROUNDER64
    x = (nf * LN2_HI - a) + nf * LN2_LO
    p = np.full_like(x, coeffs[-1])
    for c in coeffs[-2::-1]:
        p = p * x + c
    return p * scale


def coin_take_np(w0: np.ndarray, w1: np.ndarray, m: np.ndarray, heavy: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`coin_take`: ``k < K(q)``, ``q = m`` or ``1 - m`` (``heavy``), bool."""
    m = np.asarray(m, dtype=np.float64)
    heavy = np.asarray(heavy, dtype=bool)
    y = m * _TWO_64
    f = y.astype(np.uint64)
    frac = y - f.astype(np.float64)
    g = f + np.where(heavy, frac >= 0.5, frac > 0.5).astype(np.uint64)
    w0, w1 = np.asarray(w0, dtype=np.uint32), np.asarray(w1, dtype=np.uint32)
    c1 = np.where(heavy, ~w1, w1).astype(np.uint64)
    c0 = np.where(heavy, ~w0, w0).astype(np.uint64)
    return (((c1 << np.uint64(32)) | c0) < g) != heavy


def coin_threshold(m: float, heavy: bool) -> int:
    """``K(q) = ceil(2**64 q - 1/2)`` in exact integer arithmetic, ``q = m`` or ``1 - m`` (the exact rational of the
    float64 ``m``): the take set of :func:`coin_take` is ``[0, K)``."""
    from fractions import Fraction

    q = 1 - Fraction(m) if heavy else Fraction(m)
    return math.ceil(q * 2**64 - Fraction(1, 2))


def merge_coin_probability_np(l_keep: np.ndarray, l_take: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(m, heavy)`` of :func:`merge_coin`: ``m = e / (1 + e)``, ``e = exp_neg64(|l_keep - l_take|)``, float64."""
    l_keep = np.asarray(l_keep, dtype=np.float64)
    l_take = np.asarray(l_take, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        heavy = l_take > l_keep
        e = exp_neg64_np(np.abs(l_keep - l_take))
    return e / (1.0 + e), heavy


def merge_coin_np(w0: np.ndarray, w1: np.ndarray, l_keep: np.ndarray, l_take: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`merge_coin` (broadcast), bool."""
    m, heavy = merge_coin_probability_np(l_keep, l_take)
    return coin_take_np(w0, w1, m, heavy)


def exponential64_from_bits_np(w0: np.ndarray, w1: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`exponential64_from_bits` (float64, the same operations in the same order)."""
    w0, w1 = np.asarray(w0, dtype=np.uint32), np.asarray(w1, dtype=np.uint32)
    top = w1 >> np.uint32(31)
    m1 = np.where(top == 1, ~w1, w1) & np.uint32(0x7FFFFFFF)
    m0 = np.where(top == 1, ~w0, w0)
    low = m0.astype(np.float64) * _TWO_M64 + _TWO_M65
    x = m1.astype(np.float64) * _TWO_M32 + low
    y = 1.0 - x
    d = (1.0 - y) - x
    arg = np.where(top == 1, y, x)
    corr = np.where(top == 1, d / y, 0.0)
    return -(log64_np(arg) + corr)


def gumbel64_from_bits_np(w0: np.ndarray, w1: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`gumbel64_from_bits`: ``G = -log64(E)`` in float64."""
    return -log64_np(exponential64_from_bits_np(w0, w1))


def stream_words_np(seed: int, row, index, sample, stream: int):
    """``(w_lo, w_hi, key)`` (uint32) of ``index`` in ``stream``, broadcast over the counters.

    The token stream: the words of token ``index`` in its pair's block ``(index >> 1, row, sample, 0)`` and its tie
    key (:func:`tie_key_np`).  Any other stream: ``(w0, w1, w2)`` of the block ``(index, row, sample, stream)``.
    """
    k0, k1 = split_seed(int(seed))
    if stream != STREAM_TOKEN:
        w0, w1, w2, _ = philox4x32_np(index, row, sample, stream, k0, k1)
        return w0, w1, w2
    index = np.asarray(index, dtype=np.uint32)
    w0, w1, w2, w3 = philox4x32_np(index >> np.uint32(1), row, sample, STREAM_TOKEN, k0, k1)
    odd = (index & np.uint32(1)) == 1
    return np.where(odd, w2, w0), np.where(odd, w3, w1), tie_key_np(seed, row, index, sample)


def group_noise_np(seed: int, row, index, sample, stream: int = STREAM_GROUP) -> tuple[np.ndarray, np.ndarray]:
    """The group draw's noise: ``(G' float64, key uint32)`` of the group whose id (first global index) is ``index``,
    from the block ``(index, row, sample, STREAM_GROUP)``: ``G'`` by :func:`gumbel64_from_bits_np` from ``(w0, w1)``,
    the key ``w2``.  (``stream``: another stream's words, :func:`stream_words_np`; the proofs plant the token stream.)
    """
    lo, hi, key = stream_words_np(seed, row, index, sample, stream)
    return gumbel64_from_bits_np(lo, hi), key


def exponential_exact(w0: np.ndarray, w1: np.ndarray) -> np.ndarray:
    """Float64 value of ``-log(U)`` for the same bits, from exact integer arithmetic (for bounds)."""
    k = w1.astype(np.uint64) << np.uint64(32) | w0.astype(np.uint64)
    top = (w1 >> np.uint32(31)) == 1
    # X = 1 - U for top bits set, else U; both < 1/2 and computed from the integer in float64.
    comp = np.where(top, ~k, k)
    x = comp.astype(np.float64) * _TWO_M64 + _TWO_M65
    return np.where(top, -np.log1p(-x), -np.log(x))
