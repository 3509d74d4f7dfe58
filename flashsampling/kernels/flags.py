"""What the kernels report about a row, and how the host turns it into an error.

Every stage-1 kernel writes an int32 of bits per (row, vocabulary tile), stage 2 ORs them per row (and per
sample), and the temperature kernel writes its own per row::

    FLAG_BAD_LOGIT        1   a NaN or +inf logit (or -inf, in the matmul kernels, whose logits cannot be masks)
    FLAG_OVERFLOW         2   z / T overflows float32 while z is finite
    FLAG_NO_FINITE        4   no finite score in the row: every token masked (set by stage 2)
    FLAG_BAD_TEMPERATURE  8   the row's temperature is NaN, infinite, negative, or 1 / T overflows float32

The kernels read the bits as the compile-time constants ``BAD_LOGIT``, ``OVERFLOW`` and ``NO_FINITE`` (Triton
reads only ``constexpr`` globals); the host reads them once per call, in :func:`raise_on_kernel_flags` (the call's
one synchronization, skipped with ``host_checks=False``).  The kernels OR a row's bits inline, not through a shared
device function: an inlined function's debug line ranges change where ptxas may schedule, and so the SASS
(``benchmarks/sass_fingerprint.py`` found ``reduce_candidates_kernel`` changed by one).
"""

from __future__ import annotations

import torch
import triton.language as tl

FLAG_BAD_LOGIT = 1
FLAG_OVERFLOW = 2
FLAG_NO_FINITE = 4
FLAG_BAD_TEMPERATURE = 8

#: The same bits as compile-time constants of the Triton and Gluon kernels.
BAD_LOGIT = tl.constexpr(FLAG_BAD_LOGIT)
OVERFLOW = tl.constexpr(FLAG_OVERFLOW)
NO_FINITE = tl.constexpr(FLAG_NO_FINITE)


def raise_on_kernel_flags(flags: torch.Tensor, what: str, *, temperature=None) -> None:
    """Raise ``ValueError`` for the rows whose kernel flags are set (one host synchronization).

    ``flags`` is ``[B]`` or ``[B, S]``; ``what`` names the logits in the message (``"logits"``, ``"logits hidden @
    weight.T"``); ``temperature`` (the caller's argument) names the value of a row flagged
    ``FLAG_BAD_TEMPERATURE``, which is reported first (it causes the others).
    """
    row_flags = flags.amax(dim=1) if flags.dim() == 2 else flags
    if not bool(row_flags.any()):
        return
    if bool((row_flags & FLAG_BAD_TEMPERATURE).any()):
        row = int(torch.nonzero(row_flags & FLAG_BAD_TEMPERATURE)[0, 0])
        t = temperature.reshape(-1)[row if temperature.numel() > 1 else 0] if temperature is not None else None
        value = f"={float(t)}" if t is not None else ""
        raise ValueError(
            f"temperature[{row}]{value} is invalid; temperatures must be finite and >= 0, and 1/temperature "
            "must fit float32 (0 means greedy)"
        )
    bad = torch.nonzero(row_flags).flatten().tolist()
    f = int(row_flags[bad[0]])
    rows = ", ".join(map(str, bad[:8])) + (" ..." if len(bad) > 8 else "")
    if f & FLAG_BAD_LOGIT:
        raise ValueError(f"{what} contain NaN or infinite values in row(s) {rows}")
    if f & FLAG_OVERFLOW:
        raise ValueError(
            f"{what} divided by temperature overflow float32 in row(s) {rows}; raise the temperature or use 0 (greedy)"
        )
    if f & FLAG_NO_FINITE:
        raise ValueError(f"{what}: row(s) {rows} have no finite logit (every token is masked)")
