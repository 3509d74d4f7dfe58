"""The arguments of the fused top-k, top-p and min-p sampler, checked once and turned into per-row tensors.

``top_k``, ``top_p``, ``min_p`` and ``order`` of ``sample`` / ``sample_from_logits`` (their rules:
:mod:`flashsampling.truncation`) are checked on the host (``TypeError``/``ValueError`` naming the argument) and
become a :class:`Truncation`: the per-row ``k``, ``p`` and ``log(min_p)`` on the call's device, their host copies
for the exact fallback, and the order's step codes.  The request (:mod:`flashsampling._request`) builds it before any
launch; :mod:`flashsampling.truncation` samples with it.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
import torch

from ._validate import same_device, short_repr
from .kernels.truncation import ASSUMED_KEPT
from .kernels.truncation_stage2 import (
    STEP_JOINT,
    STEP_MIN_P,
    STEP_SCALED,
    STEP_TEMPERATURE,
    STEP_TOP_K,
    STEP_TOP_P,
)
from .targets import DEFAULT_ORDER
from .targets.truncation import parse_order

__all__ = ["MAX_TOP_K", "Truncation", "check_order", "check_top_k", "order_steps", "truncation_rows"]

#: The largest ``k`` of the fused sampler (the lists are sized for it: :func:`~.kernels.truncation.list_length`).
MAX_TOP_K = 1024
#: Integer dtypes a ``top_k`` tensor may have; floating dtypes a ``top_p`` / ``min_p`` tensor may have.
INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_CAP_RULE = "must be <= {} (the fused sampler's lists are sized for it) or >= V={} (no truncation)"


@dataclass(frozen=True)
class Truncation:
    """Checked filters of a call for ``B`` rows.

    Attributes
    ----------
    k, p, log_min_p : torch.Tensor, shape (B,), on the call's device
        int32 ``k`` (0: no top-k), float64 ``p`` (2.0: no top-p), float64 ``log(min_p)`` (``-inf``: no min-p).
    host : dict
        The same per row on the host (``k`` int64 with 0 for none, ``p`` and ``min_p`` float64 with ``nan`` for
        none) and the order, for the exact fallback.
    steps : tuple of 4 ints
        The order's step codes (:mod:`flashsampling.kernels.truncation_stage2`).
    plain_rows : torch.Tensor or None
        bool ``(B,)`` on the device: rows whose filters keep everything, when some row has them (else ``None``).
    kept : int
        The kept-set size the lists are sized for: the largest ``k`` when every truncated row has a top-k, else
        :data:`~flashsampling.kernels.truncation.ASSUMED_KEPT`.
    mass : bool
        Some row's top-p step sees the whole row: stage 1 writes the tiles' masses.
    top_p_scaled : bool
        The top-p step comes after the temperature (its weights at ``T``, else at 1).
    """

    k: torch.Tensor
    p: torch.Tensor
    log_min_p: torch.Tensor
    host: dict
    steps: tuple[int, int, int, int]
    plain_rows: torch.Tensor | None
    kept: int
    mass: bool
    top_p_scaled: bool


# --------------------------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------------------------


def _tensor_values(name: str, value: torch.Tensor, batch: int, device: torch.device, dtypes, kind: str):
    """A per-row tensor's metadata checks, then its values on the host (int64 or float64)."""
    if value.layout != torch.strided or value.is_nested:
        raise TypeError(f"{name} must be a dense (strided) tensor, got layout {value.layout}")
    if value.dtype not in dtypes:
        raise TypeError(f"{name}.dtype={value.dtype} is not supported; {name} must be {kind}")
    if tuple(value.shape) != (batch,):
        what = "an int" if dtypes is INT_DTYPES else "a number"
        raise ValueError(f"{name} must be {what} or a tensor of shape (B,) = ({batch},), got shape "
                         f"{tuple(value.shape)}")  # fmt: skip
    if value.device.type != "cpu" and not same_device(value.device, device):
        raise ValueError(f"{name}.device={value.device} differs from the inputs' device {device}")
    wide = torch.int64 if dtypes is INT_DTYPES else torch.float64
    return value.detach().to("cpu", wide).numpy()


def check_top_k(top_k, batch: int, V: int, device: torch.device) -> np.ndarray | None:
    """``top_k`` as int64 ``k`` per row on the host (0 where ``k >= V``: no truncation), or ``None``."""
    if top_k is None:
        return None
    if isinstance(top_k, torch.Tensor):
        values = _tensor_values("top_k", top_k, batch, device, INT_DTYPES, "an int or an integer tensor")
        for i, k in enumerate(values.tolist()):
            if k < 1:
                raise ValueError(f"top_k[{i}]={k} must be >= 1")
            if MAX_TOP_K < k < V:
                raise ValueError(f"top_k[{i}]={k} {_CAP_RULE.format(MAX_TOP_K, V)}")
        return np.where(values >= V, 0, values)
    if isinstance(top_k, (bool, np.bool_)) or not isinstance(top_k, numbers.Integral):
        raise TypeError(f"top_k must be an int or an integer tensor, got {type(top_k).__name__} {short_repr(top_k)}")
    k = int(top_k)
    if k < 1:
        raise ValueError(f"top_k={k} must be >= 1")
    if MAX_TOP_K < k < V:
        raise ValueError(f"top_k={k} {_CAP_RULE.format(MAX_TOP_K, V)}")
    return np.full(batch, 0 if k >= V else k, dtype=np.int64)


def _check_probability(name: str, value, batch: int, device: torch.device, low_open: bool) -> np.ndarray | None:
    """``top_p`` (``(0, 1]``) or ``min_p`` (``[0, 1]``) as float64 per row on the host, or ``None``."""
    if value is None:
        return None
    interval = "(0, 1]" if low_open else "[0, 1]"
    if isinstance(value, torch.Tensor):
        values = _tensor_values(name, value, batch, device, FLOAT_DTYPES, "a number or a floating tensor")
        for i, x in enumerate(values.tolist()):
            if not (0.0 < x <= 1.0 if low_open else 0.0 <= x <= 1.0):
                raise ValueError(f"{name}[{i}]={x} must be in {interval}")
        return values
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number or a floating tensor, got {type(value).__name__} "
                        f"{short_repr(value)}")  # fmt: skip
    x = float(value)
    if not (0.0 < x <= 1.0 if low_open else 0.0 <= x <= 1.0):
        raise ValueError(f"{name}={short_repr(value)} must be in {interval}")
    return np.full(batch, x, dtype=np.float64)


def check_order(order, filters: tuple[str, ...]) -> tuple:
    """``order`` (``None``: :data:`~flashsampling.targets.DEFAULT_ORDER`; a name of
    :data:`~flashsampling.targets.ORDERS`; a tuple of steps) parsed; ``TypeError`` / ``ValueError`` naming ``order``."""
    if order is None:
        order = DEFAULT_ORDER
    if not isinstance(order, (str, tuple, list)):
        raise TypeError(f"order must be a name of flashsampling.targets.ORDERS or a tuple of steps, got "
                        f"{type(order).__name__}")  # fmt: skip
    return parse_order(order, filters)


def order_steps(steps: tuple) -> tuple[tuple[int, int, int, int], bool]:
    """The parsed order as stage 2's step codes (4 slots) and whether its top-p step follows the temperature."""
    codes, scaled, p_scaled = [], False, False
    names = {"top_k": STEP_TOP_K, "top_p": STEP_TOP_P, "min_p": STEP_MIN_P}
    for step in steps:
        if step == "temperature":
            codes.append(STEP_TEMPERATURE)
            scaled = True
            continue
        for j, f in enumerate(step if isinstance(step, tuple) else (step,)):
            codes.append(names[f] | (STEP_JOINT if j else 0) | (STEP_SCALED if scaled else 0))
            p_scaled = p_scaled or (f == "top_p" and scaled)
    return tuple(codes + [0] * (4 - len(codes))), p_scaled


def _needs_full_mass(steps: tuple, on: dict[str, np.ndarray]) -> bool:
    """Whether some row's top-p step sees the whole row (no active filter in an earlier step)."""
    before = np.zeros_like(on["top_p"])
    for step in steps:
        group = step if isinstance(step, tuple) else (step,)
        if "top_p" in group:
            return bool((on["top_p"] & ~before).any())
        for f in group:
            if f in on:
                before = before | on[f]
    return False


def truncation_rows(top_k, top_p, min_p, order, batch: int, V: int, device: torch.device) -> Truncation | None:
    """Check the filters for ``batch`` rows of ``V`` tokens on ``device``: ``None`` for the plain sampler (no filter,
    or none that truncates any row), else the :class:`Truncation`.  Nothing is launched.

    Raises
    ------
    TypeError
        ``top_k`` not an int or an integer tensor; ``top_p`` / ``min_p`` not a number or a floating tensor;
        ``order`` not a name or a tuple.
    ValueError
        A tensor not of shape ``(B,)`` or on another device; ``k < 1``, or above :data:`MAX_TOP_K` and below ``V``;
        ``top_p`` outside ``(0, 1]``, ``min_p`` outside ``[0, 1]`` (NaN included); an unknown ``order``.
    """
    ks = check_top_k(top_k, batch, V, device)
    ps = _check_probability("top_p", top_p, batch, device, low_open=True)
    qs = _check_probability("min_p", min_p, batch, device, low_open=False)
    given = tuple(n for n, v in (("top_k", ks), ("top_p", ps), ("min_p", qs)) if v is not None)
    steps = check_order(order, given) if (order is not None or given) else ()
    none = np.zeros(batch, dtype=bool)
    on = {
        "top_k": ks > 0 if ks is not None else none,
        "top_p": ps < 1.0 if ps is not None else none,
        "min_p": qs > 0.0 if qs is not None else none,
    }
    truncated = on["top_k"] | on["top_p"] | on["min_p"]
    if not truncated.any():
        return None
    k_host = ks if ks is not None else np.zeros(batch, dtype=np.int64)
    p_host = np.where(on["top_p"], ps if ps is not None else 2.0, 2.0)
    codes, p_scaled = order_steps(steps)
    kept = int(k_host[truncated].max()) if on["top_k"][truncated].all() else ASSUMED_KEPT
    k, p, log_min_p = _device_rows(top_k, top_p, min_p, batch, V, device)
    plain = None
    if not truncated.all():
        plain = (k == 0) & (p >= 1.0) & (log_min_p == -math.inf)
    return Truncation(
        k=k,
        p=p,
        log_min_p=log_min_p,
        host={"k": k_host, "p": np.where(on["top_p"], p_host, np.nan),
              "min_p": np.where(on["min_p"], qs if qs is not None else np.nan, np.nan), "order": steps},
        steps=codes,
        plain_rows=plain,
        kept=kept,
        mass=_needs_full_mass(steps, on),
        top_p_scaled=p_scaled,
    )  # fmt: skip


def _device_rows(top_k, top_p, min_p, batch: int, V: int, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The checked filters per row on the device -- int32 ``k`` (0: none), float64 ``p`` (2: none), float64
    ``log(min_p)`` (``-inf``: none) -- filled there for a number, computed there from a tensor: no copy from the host
    (which would wait for the stream)."""

    def rows(value, dtype):
        if isinstance(value, torch.Tensor):
            return value.detach().to(device=device, dtype=dtype)
        return torch.full((batch,), value if value is not None else 0, dtype=dtype, device=device)

    k = rows(top_k, torch.int64)
    k = torch.where(k >= V, 0, k).to(torch.int32) if top_k is not None else k.to(torch.int32)
    p = rows(top_p, torch.float64)
    p = torch.where(p < 1.0, p, 2.0) if top_p is not None else p + 2.0
    q = rows(min_p, torch.float64)
    log_min_p = torch.where(q > 0, torch.log(torch.where(q > 0, q, 1.0)), -math.inf)
    return k, p, log_min_p
