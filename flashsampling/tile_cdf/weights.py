"""Integer token weights inside a vocabulary tile, for sampling by an integer inverse CDF (proofs/tile_inverse_cdf.md;
the weights of :mod:`flashsampling.tile_cdf`'s samplers).

For a float32 score ``s`` and its tile's maximum ``m``::

    d = fl(s - m),  x = fl(d * fl(log2 e)),  n = rint(x),  f = x - n          (f exact, in [-1/2, 1/2])
    P(f) = Horner over EXP2_COEFFS, each product and each sum rounded to float32 (no fused multiply-add)
    q = floor(P(f) * 2**(WEIGHT_BITS + n))                                      (0 once n < -WEIGHT_BITS)

so ``q / 2**WEIGHT_BITS`` approximates ``exp(s - m)`` within a relative ``3|d| 2**-24 + 1.734 * 2**-24`` plus the
truncation, and a 256-token tile's weights sum below ``2**63``.  ``rint`` is ``(x + 1.5 * 2**23) - 1.5 * 2**23`` in
float32 (round half to even for ``|x| < 2**22``; beyond, the weight is 0 either way), and the integer ``n`` is read
from the low bits of ``x + 1.5 * 2**23``.

Every step is one IEEE float32 operation or exact integer work, so :func:`tile_weight` (Triton; compiled, each
operation is written as ``sub.rn``/``mul.rn``/``add.rn`` so that the compiler cannot contract a product and a sum
into one rounding) and :func:`tile_weights_np` (NumPy) agree bit for bit (``tests/test_tile_weights.py``).
"""

from __future__ import annotations

import numpy as np
import triton.language as tl

from .._device import INTERPRET, device_function

#: ``2**f ~ sum c_j f**j`` on ``[-1/2, 1/2]`` with ``c_0 = 1`` (a tile's maximum gets exactly ``2**WEIGHT_BITS``);
#: relative error at most 1.734 * 2**-24 at every float32 ``f`` (the exhaustive scan of
#: proofs/check_tile_inverse_cdf.py, Lemma 0 of proofs/tile_inverse_cdf.md).
EXP2_COEFFS = np.array(
    [1.0, 0.6931471824645996, 0.24022647738456726, 0.055503323674201965, 0.009618437848985195,
     0.0013398873852565885, 0.00015353181515820324], dtype=np.float32,
)  # fmt: skip
LOG2E = np.float32(1.4426950408889634)
#: ``q <= 2**WEIGHT_BITS``: 256 weights sum below ``2**63``.
WEIGHT_BITS = 55
_ROUNDER = np.float32(1.5 * 2**23)


if INTERPRET:

    @device_function
    def _sub(a, b):
        return a - b

    @device_function
    def _mul_log2e(d):
        return d * 1.4426950408889634

    @device_function
    def _add_rounder(x):
        return x + 12582912.0

    @device_function
    def _sub_rounder(r):
        return r - 12582912.0

    @device_function
    def _horner(f):
        p = f * 0.00015353181515820324 + 0.0013398873852565885
        p = p * f + 0.009618437848985195
        p = p * f + 0.055503323674201965
        p = p * f + 0.24022647738456726
        p = p * f + 0.6931471824645996
        return p * f + 1.0

else:

    @device_function
    def _sub(a, b):
        return tl.inline_asm_elementwise("sub.rn.f32 $0, $1, $2;", "=r,r,r", [a, b], dtype=tl.float32, is_pure=True,
                                         pack=1)  # fmt: skip

    @device_function
    def _unary(x, ASM: tl.constexpr):
        """One float32 result of the PTX in ``ASM`` on ``x`` (each operation rounded as written)."""
        return tl.inline_asm_elementwise(ASM, "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)

    @device_function
    def _mul_log2e(d):
        return _unary(d, "mul.rn.f32 $0, $1, 0f3FB8AA3B;")

    @device_function
    def _add_rounder(x):
        return _unary(x, "add.rn.f32 $0, $1, 0f4B400000;")

    @device_function
    def _sub_rounder(r):
        return _unary(r, "sub.rn.f32 $0, $1, 0f4B400000;")

    @device_function
    def _horner(f):
        return _unary(
            f,
            "{ mul.rn.f32 $0, $1, 0f3920FD62; add.rn.f32 $0, $0, 0f3AAF9F29;"
            "  mul.rn.f32 $0, $0, $1; add.rn.f32 $0, $0, 0f3C1D96A7;"
            "  mul.rn.f32 $0, $0, $1; add.rn.f32 $0, $0, 0f3D635774;"
            "  mul.rn.f32 $0, $0, $1; add.rn.f32 $0, $0, 0f3E75FDEE;"
            "  mul.rn.f32 $0, $0, $1; add.rn.f32 $0, $0, 0f3F317218;"
            "  mul.rn.f32 $0, $0, $1; add.rn.f32 $0, $0, 0f3F800000; }",
        )


@device_function
def tile_weight(s, m):
    """``q = floor(P(f) * 2**(WEIGHT_BITS + n))`` as uint64 for float32 scores ``s`` and tile maxima ``m`` of the
    same shape (module docstring); 0 where ``s`` is ``-inf`` or the whole tile is."""
    x = _mul_log2e(_sub(s, m))
    r = _add_rounder(x)  # 1.5 * 2**23 + n: n = rint(x) sits in the low bits (no float-to-int conversion)
    n = _sub_rounder(r)
    valid = n >= -55.0  # -WEIGHT_BITS; False for -inf and NaN
    p = tl.where(valid, _horner(_sub(x, tl.where(valid, n, 0.0))), 0.0)
    k = tl.where(valid, r.to(tl.int32, bitcast=True) - 0x4B400000 + 55, 0)  # WEIGHT_BITS + n in [0, 55]
    scale = ((k + 127) << 23).to(tl.float32, bitcast=True)  # 2**k, exact
    return (p * scale).to(tl.uint64)  # exact product (a power of two), truncated: the floor


def exp2_poly_np(f: np.ndarray) -> np.ndarray:
    """``P(f)``, the float32 ``2**f`` on ``[-1/2, 1/2]``: Horner's rule on :data:`EXP2_COEFFS`, each product and
    each sum rounded to float32 (the kernel's ``mul.rn``/``add.rn``)."""
    f = np.asarray(f, dtype=np.float32)
    p = np.full_like(f, EXP2_COEFFS[-1])
    for c in EXP2_COEFFS[-2::-1]:
        p = ((p * f).astype(np.float32) + c).astype(np.float32)
    return p


def tile_weights_np(s: np.ndarray, m: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`tile_weight` (uint64, the same bits): ``s`` and ``m`` float32, broadcast together."""
    s, m = np.broadcast_arrays(np.asarray(s, np.float32), np.asarray(m, np.float32))
    with np.errstate(invalid="ignore"):
        x = ((s - m).astype(np.float32) * LOG2E).astype(np.float32)
        n = ((x + _ROUNDER).astype(np.float32) - _ROUNDER).astype(np.float32)
        valid = n >= -WEIGHT_BITS
        f = (x - np.where(valid, n, np.float32(0))).astype(np.float32)
    p = exp2_poly_np(f)
    k = np.where(valid, n + WEIGHT_BITS, 0).astype(np.int64)
    q = np.floor(np.ldexp(np.where(valid, p, 0).astype(np.float64), k))
    return q.astype(np.uint64)
