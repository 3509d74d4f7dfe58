"""Argument checks shared by every entry point.

Each ``check_*`` raises ``TypeError`` (wrong kind of thing) or ``ValueError`` (right kind, bad value)
with a message that names the argument, shows its value and says what would be valid.  Everything
here is free (metadata only, no device-to-host synchronization): a temperature tensor's values are checked on the
device and read with the kernels' flags at the call's finish (:mod:`flashsampling._request`).  Never ``assert``:
``python -O`` removes it.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

from ._device import INTERPRET
from .kernels.temperature import inverse_temperature as device_inverse_temperature
from .kernels.tiles import TileConfig

#: Noise counters are uint32 words: index, row and sample must each stay below 2**32.
MAX_COUNTER = 2**32
#: The kernels index the rows and columns of one launch in int32 (``pid * BLOCK + arange``; every product with a
#: stride is int64): a launch's ``B`` and ``V`` must stay below 2**31.
MAX_INDEX = 2**31
#: Float dtypes the kernels read; products of bf16/fp16 values are exact in the fp32 accumulator.
FLOAT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
#: Where the kernels run: compiled on CUDA; the interpreter reads host memory (CUDA tensors are copied).
DEVICE_TYPES = ("cpu", "cuda") if INTERPRET else ("cuda",)


def short_repr(value, limit: int = 40) -> str:
    """``repr(value)``, cut to ``limit`` characters (a 400-digit int would drown the message)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_int(name: str, value, *, low: int | None = None, high: int | None = None) -> int:
    """An integer (Python or NumPy, never a bool or a float) in ``[low, high)``: ``TypeError`` or ``ValueError``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    v = int(value)
    if low is not None and v < low:
        raise ValueError(f"{name}={v} must be >= {low}")
    if high is not None and v >= high:
        raise ValueError(f"{name}={v} is too large; it must be < {high}")
    return v


def check_flag(name: str, value) -> bool:
    """A bool (Python or NumPy): a string or a tensor here is a mistake, never silently truthy."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return bool(value)


def check_device_type(name: str, device: torch.device) -> torch.device:
    """A device the kernels run on (:data:`DEVICE_TYPES`): ``meta`` and others get a ``ValueError`` naming ``name``."""
    if device.type not in DEVICE_TYPES:
        mode = "in the Triton interpreter" if INTERPRET else "compiled (FLASHSAMPLING_INTERPRET=1 runs the CPU)"
        raise ValueError(f"{name}={device} is not supported: the kernels run on {' or '.join(DEVICE_TYPES)} {mode}")
    return device


def check_tensor(name: str, x, *, ndim: int, dtypes=FLOAT_DTYPES) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.layout != torch.strided or x.is_nested:
        raise TypeError(f"{name} must be a dense (strided) tensor, got layout {x.layout}")
    if x.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(x.shape)}")
    if dtypes is not None and x.dtype not in dtypes:
        raise TypeError(f"{name}.dtype={x.dtype} is not supported; use one of {', '.join(map(str, dtypes))}")
    check_device_type(f"{name}.device", x.device)
    return x


def check_nonempty(name: str, size: int, what: str) -> None:
    if size <= 0:
        raise ValueError(f"{name} has {what}={size}; it must be at least 1")


def check_counter(name: str, value: int) -> None:
    if value >= MAX_COUNTER:
        raise ValueError(f"{name}={value} is too large: the noise counter is 32 bits, so it must be < {MAX_COUNTER}")


def check_index(name: str, value: int) -> None:
    """A launch's row or column count below :data:`MAX_INDEX`."""
    if value >= MAX_INDEX:
        raise ValueError(f"{name}={value} is too large: a launch indexes rows and columns in 32 bits, so it must be "
                         f"< {MAX_INDEX}")  # fmt: skip


def same_device(a: torch.device, b: torch.device) -> bool:
    """Device equality that treats ``cuda`` and ``cuda:<current>`` as one device."""
    a, b = torch.device(a), torch.device(b)
    if a.type != b.type:
        return False
    if a.index is None or b.index is None:
        cur = torch.cuda.current_device() if a.type == "cuda" and torch.cuda.is_available() else 0
        return (a.index if a.index is not None else cur) == (b.index if b.index is not None else cur)
    return a.index == b.index


def check_same_device(**tensors: torch.Tensor) -> torch.device:
    devices = {name: t.device for name, t in tensors.items()}
    first = next(iter(devices.values()))
    for dev in devices.values():
        if dev != first:
            listing = ", ".join(f"{n}.device={d}" for n, d in devices.items())
            raise ValueError(f"tensors must be on one device, got {listing}")
    return first


def check_lm_head(hidden, weight, weight_name: str = "weight") -> tuple[int, int, int, torch.device]:
    """Shape, dtype and device checks of ``hidden [B, D]`` and ``weight [V, D]`` (``V = 0`` allowed: an
    empty shard); returns ``(B, V, D, device)``.  ``weight_name`` names the weight in the messages."""
    check_tensor("hidden", hidden, ndim=2)
    check_tensor(weight_name, weight, ndim=2)
    device = check_same_device(**{"hidden": hidden, weight_name: weight})
    if hidden.dtype != weight.dtype:
        raise TypeError(f"hidden.dtype={hidden.dtype} and {weight_name}.dtype={weight.dtype} must match")
    B, D = hidden.shape
    V, D_w = weight.shape
    if D != D_w:
        raise ValueError(f"hidden has D={D} columns but {weight_name} has D={D_w}; shapes are (B, D) and (V, D)")
    check_nonempty("hidden", B, "B")
    check_nonempty("hidden", D, "D")
    check_index("B", B)
    check_index("V", V)
    return B, V, D, device


def check_logits(logits, name: str = "logits", *, allow_empty: bool = False) -> tuple[int, int]:
    """Checks of a ``logits [B, V]`` tensor (float dtype, B and V at least 1 -- V = 0 too with ``allow_empty``, an
    empty shard or chunk -- and below :data:`MAX_INDEX`); returns ``(B, V)``."""
    check_tensor(name, logits, ndim=2)
    B, V = logits.shape
    check_nonempty(name, B, "B")
    if not allow_empty:
        check_nonempty(name, V, "V")
    check_index("B", B)
    check_index("V", V)
    return B, V


def check_tiles(tiles):
    """``None`` or a :class:`~flashsampling.kernels.tiles.TileConfig` (whose fields it checked when made)."""
    if tiles is not None and not isinstance(tiles, TileConfig):
        raise TypeError(f"tiles must be a flashsampling.TileConfig or None, got {type(tiles).__name__}")
    return tiles


def check_seed(seed, device: torch.device | None = None, batch: int | None = None) -> int | torch.Tensor:
    """A seed in ``[0, 2**64)`` (a Python or NumPy int); ``None`` draws one from torch's default CPU generator.

    With ``device`` (the entry points whose stage-1 kernels can load the seed: :func:`~flashsampling.sample` and
    :func:`~flashsampling.sample_from_logits`), a 0-dim ``torch.int64`` tensor is accepted too, its two's-complement
    64 bits being the seed: on ``device`` it is returned as it is (the kernel loads it: no synchronization, and a
    captured CUDA graph replays with whatever value the tensor holds); on the CPU (data elsewhere) it is read on the
    host.  With ``batch`` too, a ``[batch]`` ``torch.int64`` tensor on ``device`` holds per-request seeds (one per
    row, loaded by the kernel; returned contiguous)."""
    if device is not None and isinstance(seed, torch.Tensor):
        if seed.layout != torch.strided:
            raise TypeError(f"seed must be a dense (strided) tensor, got layout {seed.layout}")
        if batch is not None and seed.dim() == 1:
            if seed.dtype != torch.int64 or seed.shape[0] != batch:
                raise TypeError(
                    f"per-request seeds must be a torch.int64 tensor of shape [{batch}] (one per row), got "
                    f"dtype={seed.dtype} and shape {tuple(seed.shape)}"
                )
            if not same_device(seed.device, device):
                raise ValueError(f"per-request seeds are on {seed.device} but the inputs are on {device}: the kernel "
                                 "loads them, so they must be on the inputs' device")  # fmt: skip
            return seed.contiguous()
        if seed.dim() != 0 or seed.dtype != torch.int64:
            rows = f", or a torch.int64 tensor of shape [{batch}] (per-request seeds)" if batch is not None else ""
            raise TypeError(
                f"a tensor seed must be a 0-dim torch.int64 tensor{rows}, got dtype={seed.dtype} and shape "
                f"{tuple(seed.shape)}"
            )
        if seed.device == device:
            return seed
        if seed.device.type != "cpu":
            raise ValueError(f"seed is on {seed.device} but the inputs are on {device}")
        return int(seed.item()) & (2**64 - 1)
    if seed is None:
        # Two 32-bit draws: torch.randint's upper bound is exclusive and must fit int64.
        hi, lo = torch.randint(0, 2**32, (2,), dtype=torch.int64).tolist()
        return (hi << 32) | lo
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be an int in [0, 2**64) or None, got {type(seed).__name__}")
    seed = int(seed)
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed={short_repr(seed)} is out of range; it must be in [0, 2**64)")
    return seed


def check_num_samples(num_samples) -> int:
    if isinstance(num_samples, (bool, np.bool_)) or not isinstance(num_samples, numbers.Integral):
        raise TypeError(f"num_samples must be an int >= 1, got {type(num_samples).__name__}")
    if num_samples < 1:
        raise ValueError(f"num_samples={short_repr(num_samples)} must be >= 1")
    check_counter("num_samples", int(num_samples))
    return int(num_samples)


def inverse_temperature(
    temperature, batch: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor | None, bool]:
    """``(inv, flags, all_greedy)``: the per-row float32 inverse temperature (0 marks greedy), and for
    a tensor the per-row ``FLAG_BAD_TEMPERATURE`` flags, computed on the device without a
    synchronization (``None`` for a number, which is checked here).  Metadata checks raise at once.

    ``temperature`` is a real number or a float tensor of shape ``[B]`` (or ``[]``).  One rule for both, applied to
    the value as given (before any rounding to float32): NaN, infinite and negative values are invalid, and so is a
    positive value whose inverse overflows float32 (below about ``2.9e-39``, ``1e-300`` included: it rounds to a
    float32 0, which would sample greedily); 0 (and -0.0) means greedy.  A number is checked here (``ValueError``), a
    tensor on the device (its rows' flags raise at the call's finish)."""
    if isinstance(temperature, torch.Tensor):
        if temperature.dim() > 1 or (temperature.dim() == 1 and temperature.shape[0] != batch):
            raise ValueError(
                f"temperature must be a number or a tensor of shape [{batch}], got shape {tuple(temperature.shape)}"
            )
        if not temperature.is_floating_point():
            raise TypeError(f"temperature.dtype={temperature.dtype} must be a floating dtype")
        if temperature.layout != torch.strided:
            raise TypeError(f"temperature must be a dense (strided) tensor, got layout {temperature.layout}")
        if not same_device(temperature.device, device):
            raise ValueError(f"temperature.device={temperature.device} differs from the inputs' device {device}")
        inv, flags = device_inverse_temperature(temperature, batch)
        return inv, flags, False
    if type(temperature) is not float and (
        isinstance(temperature, (bool, np.bool_)) or not isinstance(temperature, numbers.Real)
    ):  # the exact-type test first: numbers.Real's isinstance costs microseconds on every call
        raise TypeError(f"temperature must be a float or a tensor, got {type(temperature).__name__}")
    try:
        t = float(temperature)
    except OverflowError:  # an int beyond float64's range, e.g. 10**400
        raise ValueError(f"temperature={short_repr(temperature)} does not fit float32 (it would round to "
                         "infinity)") from None  # fmt: skip
    if math.isnan(t) or math.isinf(t) or t < 0:
        raise ValueError(f"temperature={temperature} is invalid; it must be finite and >= 0 (0 means greedy)")
    inv = host_inverse_temperature(t, temperature) if t > 0 else 0.0
    # torch.full launches a fill (no host-to-device copy, which would wait for the stream).
    return torch.full((batch,), inv, dtype=torch.float32, device=device), None, t == 0


#: Finite float64 values at or above this round to +inf in float32 (FLT_MAX plus half its last place).
_FLOAT32_OVERFLOW = 2.0**128 - 2.0**103


def host_inverse_temperature(t: float, name_value=None) -> float:
    """``float32(1) / float32(t)`` for a finite ``t > 0``, correctly rounded as the device's ``div_rn``.

    Computed in float64 and rounded once to float32: for division, rounding to 53 bits and then to 24 gives the
    correctly rounded 24-bit quotient, because 53 >= 2 * 24 + 2 (Figueroa, "When is double rounding
    innocuous?", SIGNUM Newsl. 30(3), 1995).  ``tests/test_validation.py`` compares it with NumPy's float32
    division.  No NumPy error state is touched (``np.errstate`` costs microseconds on every call).

    Raises ``ValueError`` (naming ``temperature=name_value``) when ``t`` does not fit float32 (it would round to
    +inf and sample greedily), or when ``1/t`` overflows float32 (``t`` too small; 0 is greedy).
    """
    shown = t if name_value is None else short_repr(name_value)
    if t >= _FLOAT32_OVERFLOW:
        raise ValueError(f"temperature={shown} does not fit float32 (it would round to infinity)")
    t32 = float(np.float32(t))
    q = 1.0 / t32 if t32 > 0 else math.inf
    if q >= _FLOAT32_OVERFLOW:
        raise ValueError(f"temperature={shown} is too small: 1/temperature overflows float32; use 0 for greedy")
    return float(np.float32(q))
