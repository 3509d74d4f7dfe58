"""Per-row inverse temperature on the device, with its validity flags, in one launch.

For a temperature tensor ``t`` (any float dtype, shape ``[B]`` or ``[]``)::

    t32[b]  = float32(t[b])
    inv[b]  = 1 / t32[b]  (correctly rounded, div_rn)   if t32[b] > 0
              0                                          otherwise (0 marks a greedy row)
    flag[b] = FLAG_BAD_TEMPERATURE  if t[b] is NaN or < 0, t32[b] is infinite, 1 / t32[b] overflows,
                                    or t[b] > 0 rounds to t32[b] = 0

The tests on the sign and on rounding to 0 read ``t`` in its own dtype, so a float64 ``-1e-300`` or ``1e-300``
(``-0.0`` and ``0`` in float32) is flagged as the same Python float is refused on the host
(:func:`flashsampling._validate.inverse_temperature`): one rule for numbers and tensors.

This replaces a chain of small torch kernels and, above all, the host synchronization that
checking the temperatures before the launch needed: the flags are read with the kernel's own
flags after stage 2 (one synchronization per call, as before).  Invalid rows still get a finite
``inv`` by the formula above, so with ``host_checks=False`` the tokens stay in ``[0, V)``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._device import INTERPRET
from .flags import FLAG_BAD_TEMPERATURE
from .launch import cdiv, direct, next_power_of_2


@triton.jit
def inverse_temperature_kernel(t_ptr, inv_ptr, flag_ptr, B, stride_t, BLOCK: tl.constexpr, FLAG: tl.constexpr):
    """``t [B] -> (1 / t or 0, flags)`` as in the module docstring (``FLAG``: ``FLAG_BAD_TEMPERATURE``)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < B
    raw = tl.load(t_ptr + offs.to(tl.int64) * stride_t, mask=ok, other=1.0)
    t = raw.to(tl.float32)
    pos = t > 0.0
    inv = tl.where(pos, tl.div_rn(tl.full([BLOCK], 1.0, tl.float32), tl.where(pos, t, 1.0)), 0.0)
    bad = (t != t) | (t == float("inf")) | (inv == float("inf"))
    if raw.dtype == tl.float64:
        # Only float64 loses anything in float32: a negative may round to -0.0, a positive to 0.
        bad = bad | (raw < 0.0) | ((raw > 0.0) & (t == 0.0))
    else:
        bad = bad | (t < 0.0)
    tl.store(inv_ptr + offs, inv, mask=ok)
    tl.store(flag_ptr + offs, tl.where(bad, FLAG, 0), mask=ok)


def inverse_temperature_torch(t: torch.Tensor, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The same computation in torch (the interpreter's path; ``tests/test_validation.py`` binds
    the two)."""
    raw = t.reshape(-1).expand(batch)
    t32 = raw.to(torch.float32)
    pos = t32 > 0
    inv = torch.where(pos, 1.0 / torch.where(pos, t32, torch.ones_like(t32)), torch.zeros_like(t32))
    bad = torch.isnan(raw) | (raw < 0) | torch.isinf(t32) | torch.isinf(inv) | ((raw > 0) & (t32 == 0))
    return inv.contiguous(), torch.where(bad, FLAG_BAD_TEMPERATURE, 0).to(torch.int32)


def inverse_temperature(t: torch.Tensor, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(inv float32 [batch], flags int32 [batch])`` of a float tensor ``t`` of shape ``[batch]`` or ``[]``."""
    if INTERPRET:
        return inverse_temperature_torch(t, batch)
    inv = torch.empty(batch, dtype=torch.float32, device=t.device)
    flags = torch.empty(batch, dtype=torch.int32, device=t.device)
    stride = t.stride(0) if t.dim() == 1 else 0
    block = min(1024, next_power_of_2(batch))
    direct(inverse_temperature_kernel)[(cdiv(batch, block),)](
        t, inv, flags, batch, stride, BLOCK=block, FLAG=FLAG_BAD_TEMPERATURE
    )
    return inv, flags
