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
* **Group and coin noise** (streams 1 and 2): one block per counter, ``G`` from ``(w0, w1)`` and
  key ``w2``.

``G`` lies in ``[-log(45.06), 65 log 2] = [-3.81, 45.06]``: never +inf, -inf or NaN.  The largest
noise value, 45.06 nats, is reached when ``k`` is 0 or ``2**64 - 1``; public samplers built on
24-bit or 31-bit uniforms stop at 16.6 and 21.5 nats.

Float32 arithmetic, and the twin
--------------------------------
The kernel computes ``E`` and ``G`` in float32 with the operation order written in
:func:`exponential_from_bits`.  The NumPy twin (:func:`philox4x32_np`, :func:`gumbel_from_bits_np`,
:func:`token_noise_np`) computes the same 32-bit integers bit for bit and the same float32 operations in the same order.
In the Triton interpreter both run through NumPy and agree bit for bit; compiled on a GPU, ``log``
may differ from NumPy's in the last unit in the last place, so the documented bound is
``|G_kernel - G_twin| <= NOISE_ABS_TOL + NOISE_REL_TOL * |G_twin|`` (measured on the H200: see
``benchmarks/NOTES.md``).

References
----------
J. K. Salmon, M. A. Moraes, R. O. Dror, D. E. Shaw, "Parallel random numbers: as easy as 1, 2,
3", SC 2011 (Philox4x32-10, its constants and known-answer vectors).
T. J. Dekker, "A floating-point technique for extending the available precision", Numerische
Mathematik 18, 1971 (Fast2Sum: the rounding error of ``1 - x`` is exact).
"""

from __future__ import annotations

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
    built as ``(m1 >> 8) * 2**-24 + ((m1 & 255) * 2**-32 + (m0 * 2**-64 + 2**-65))``: the high part
    is exact, so the sum rounds once to nearest instead of truncating the low word
    (``proofs/finite_precision.md``); products by powers of two are exact, so fused multiply-adds
    give the same result as separate operations.
    """
    x, top = uniform_side_from_bits(w0, w1)
    return exponential_from_side(x, top)


@device_function
def uniform_side_from_bits(w0, w1):
    """``(x, top)``: ``top`` the top bit of ``w1``, ``x = U`` if ``top == 0`` else ``x = 1 - U``, in float32
    (``x`` in ``[2**-65, 1/2]``, rounded once to nearest; :func:`exponential_from_bits`)."""
    top = w1 >> 31
    # (x ^ 0xFFFFFFFF is ~x: the interpreter's ~ fails on uint32.)
    m1 = tl.where(top == 1, w1 ^ 0xFFFFFFFF, w1) & 0x7FFFFFFF
    m0 = tl.where(top == 1, w0 ^ 0xFFFFFFFF, w0)
    # x = m1 * 2**-32 + m0 * 2**-64 + 2**-65, with the top 23 bits of m1 exact in float32 and the
    # rest added as one term, so the final sum rounds once to nearest (no truncation bias).
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
# NumPy twin
# --------------------------------------------------------------------------------------------


def philox4x32_np(c0, c1, c2, c3, k0, k1, rounds: int = PHILOX_ROUNDS):
    """Philox4x32 on NumPy arrays; the same integers as :func:`philox4x32`, bit for bit.

    Counters broadcast against each other; keys are scalars in ``[0, 2**32)``.
    """
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


def tie_key_np(seed: int, row, index, sample) -> np.ndarray:
    """NumPy twin of :func:`tie_key`: ``w0 | 1`` of block ``(index, row, sample, STREAM_TIE)`` (uint32)."""
    k0, k1 = split_seed(int(seed))
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


def token_noise_np(seed: int, row, index, sample, stream: int = STREAM_TOKEN, *, lazy_keys: bool = False):
    """NumPy twin of the kernels' noise: ``(G float32, key uint32)`` broadcast over the counters.

    ``lazy_keys=True`` returns the token stream's keys as a :class:`TieKeys` (evaluated on demand).

    ``stream == STREAM_TOKEN`` (the token noise): ``G`` from the words of block
    ``(index >> 1, row, sample, STREAM_TOKEN)`` that belong to ``index`` (``(w0, w1)`` for an even
    index, ``(w2, w3)`` for an odd one) and ``key = tie_key_np(...)``.  Any other stream (the group
    noise of the grouped variants): ``G`` from the words ``(w0, w1)`` of block
    ``(index, row, sample, stream)`` and ``key = w2``.
    """
    k0, k1 = split_seed(int(seed))
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


def exponential_exact(w0: np.ndarray, w1: np.ndarray) -> np.ndarray:
    """Float64 value of ``-log(U)`` for the same bits, from exact integer arithmetic (for bounds)."""
    k = w1.astype(np.uint64) << np.uint64(32) | w0.astype(np.uint64)
    top = (w1 >> np.uint32(31)) == 1
    # X = 1 - U for top bits set, else U; both < 1/2 and computed from the integer in float64.
    comp = np.where(top, ~k, k)
    x = comp.astype(np.float64) * _TWO_M64 + _TWO_M65
    return np.where(top, -np.log1p(-x), -np.log(x))
