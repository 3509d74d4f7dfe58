"""An approximate Gumbel noise that only ranks tokens: the approximate filter's noise (a probe, not a sampler).

:func:`approx_log2_exponential` computes ``A ~ log2(E)`` from the same 64 random bits as the exact noise
(:func:`flashsampling.noise.uniform_side_from_bits`) in about 12 instructions where the exact ``G = -log(E)`` takes
about 35; ``-ln2 * A`` is within :data:`APPROX_GUMBEL_TOL` of ``G``.  The filter probe
(:mod:`benchmarks.probes.approx_filter`) ranks tokens by it and recomputes each row's winner exactly.  It measured no
consistent gain on the H200 (-7% to +4% at B = 256, 2-4% slower at B = 64 and 128:
``benchmarks/results/filter_probe_session9_h200.json``, ``epilogue_probe_filter_h200.json``), so the product computes
the exact noise of every token.
"""

from __future__ import annotations

import numpy as np
import triton.language as tl

from flashsampling._device import INTERPRET, device_function

#: Budget for ``|fl(-ln 2) * approx_log2_exponential(x, top) - G|`` (``G`` the kernel's float32 Gumbel value) over
#: every float32 ``x`` in ``[2**-65, 1/2]`` and both sides: ``tests/test_probes.py`` asserts the error is at most
#: ``APPROX_GUMBEL_TOL - 2**-18`` on the GPU (measured on the H200: 6.4e-7 for ``U < 1/2``, 7.3e-6 for ``U >= 1/2``);
#: the filter's margin (:mod:`benchmarks.probes.approx_filter`) is ``2 * APPROX_GUMBEL_TOL + 2**-20 |top|``.
APPROX_GUMBEL_TOL = 2.0**-15


if INTERPRET:

    @device_function
    def approx_log2(x):
        """``log2(x)``: NumPy's, in the interpreter (the approximate filter runs only in the compiled Gluon
        kernel)."""
        return tl.log2(x)

else:

    @device_function
    def approx_log2(x):
        """``log2(x)`` by ``lg2.approx.ftz.f32`` (``MUFU.LG2``: one instruction; its error is part of
        :data:`APPROX_GUMBEL_TOL`, measured on every float32 argument by ``tests/test_probes.py``)."""
        return tl.inline_asm_elementwise("lg2.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True,
                                         pack=1)  # fmt: skip


@device_function
def approx_log2_exponential(x, top):
    """``A ~ log2(E)`` for :func:`~flashsampling.noise.uniform_side_from_bits`'s ``(x, top)``, in about 12 instructions
    where the exact ``G = -log(E)`` takes about 35: ``-ln2 * A`` is within :data:`APPROX_GUMBEL_TOL` of the kernel's
    ``G`` (the float32 value of :func:`~flashsampling.noise.gumbel_from_bits`) for every float32 ``x`` in ``[2**-65,
    1/2]`` and both sides (measured exhaustively on the H200, ``tests/test_probes.py``).  It only *ranks* tokens: the
    filter probe's fast pass keeps a row's winner by ``A`` when no other token of the row comes within a margin of it,
    and recomputes the winner's score exactly (``proofs/argmax_decomposition.md``, Proposition 5).

    ``E`` is approximated as ``-ln2 * log2(x)`` for ``top == 0`` (``x = U <= 1/2``, ``E >= ln 2``), as
    ``x (1 + x/2 + x**2/3)`` for ``top == 1`` and ``x < 2**-6`` (``E = -log1p(-x)``, series remainder below
    ``x**3 / 4 < 2**-20`` relative), else as ``-ln2 * log2(y) - d`` with ``y = fl(1 - x)``, ``d = (1 - y) - x``
    (``-log1p(d / y)`` within ``2**-25`` absolute of ``-d``)."""
    y = 1.0 - x
    d = (1.0 - y) - x
    la = approx_log2(tl.where(top == 1, y, x))
    e_log = la * -0.6931471805599453 - tl.where(top == 1, d, 0.0)
    e_series = x * (x * (x * 0.3333333432674408 + 0.5) + 1.0)
    e = tl.where((top == 1) & (x < 0.015625), e_series, e_log)
    return approx_log2(e)


def approx_log2_exponential_np(
    x: np.ndarray, top: np.ndarray, series: bool = True, log2_quantum: float = 2.0**-22
) -> np.ndarray:
    """:func:`approx_log2_exponential` in float32 NumPy, with ``lg2.approx`` modelled as NumPy's ``log2`` rounded
    to a multiple of ``log2_quantum`` (an absolute error of up to half of it; PTX documents ``lg2.approx.f32``'s
    error as absolute, about 2**-22; the GPU test measures the hardware's).  ``series=False`` drops the
    small-``x`` series, a planted defect for the tests: ``E`` from ``log2(1 - x)`` then inherits the absolute
    error of ``log2`` near 1 and loses its relative accuracy as ``x -> 0``."""
    f32 = np.float32
    x = np.asarray(x, dtype=f32)

    def lg2(v):
        exact = np.log2(v.astype(np.float64))
        return (np.round(exact / log2_quantum) * log2_quantum if log2_quantum else exact).astype(f32)

    y = f32(1.0) - x
    d = (f32(1.0) - y) - x
    la = lg2(np.where(top == 1, y, x))
    e_log = la * f32(-0.6931471805599453) - np.where(top == 1, d, f32(0.0))
    e_series = x * (x * (x * f32(0.3333333432674408) + f32(0.5)) + f32(1.0))
    small = (top == 1) & (x < f32(0.015625)) if series else np.zeros(x.shape, bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        return lg2(np.where(small, e_series, e_log))
