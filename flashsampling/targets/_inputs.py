"""Argument checks and float64 conversion shared by the target laws.

Every check raises ``TypeError`` (wrong kind of object) or ``ValueError`` (right kind, bad value) with a
short message that names the argument, shows the offending value and says what would be valid.  Checks
run before any work and never use ``assert`` (``python -O`` removes it).
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

import numpy as np
import torch

#: Tolerance per category on ``|sum(probs) - 1|`` for floating-point probability tables: ``V * 2**-23``.
#: float32 softmax output at V = 262144 sums to 1 within ~2.5e-5 < V * 2**-23 = 0.031; a table typed by
#: hand sums to 1 within a few float64 ulps.  Tables of ``fractions.Fraction`` must sum to exactly 1.
PROBS_SUM_TOLERANCE_PER_CATEGORY = 2.0**-23


def to_numpy(x, name: str) -> np.ndarray:
    """``x`` as a NumPy array; torch tensors are detached and moved to the CPU (bfloat16 widened exactly)."""
    if isinstance(x, torch.Tensor):
        t = x.detach().cpu()
        if t.dtype == torch.bfloat16:
            t = t.to(torch.float32)  # every bfloat16 value is a float32 value
        if t.is_complex() or t.dtype == torch.bool:
            raise TypeError(f"{name} must hold real numbers, got dtype={t.dtype}")
        return t.numpy()
    try:
        return np.asarray(x)
    except (TypeError, ValueError) as exc:  # ragged lists
        raise TypeError(f"{name} must be an array of numbers, got {type(x).__name__}") from exc


def float_logits(logits, name: str = "logits") -> tuple[np.ndarray, tuple[int, ...]]:
    """Logits ``[..., V]`` as float64 rows ``[R, V]`` (values exactly as given) and the batch shape.

    Raises ``TypeError`` for a non-floating dtype; ``ValueError`` for a scalar, ``V = 0``, an empty
    batch, NaN or ``+inf`` entries, or a row whose every logit is ``-inf`` (no law exists there).
    """
    arr = to_numpy(logits, name)
    if arr.dtype.kind != "f":
        raise TypeError(f"{name} must hold floating-point values (float16/32/64, bfloat16), got dtype={arr.dtype}")
    if arr.ndim == 0:
        raise ValueError(f"{name} must have shape [..., V], got a scalar")
    batch_shape, v = tuple(arr.shape[:-1]), arr.shape[-1]
    if v == 0:
        raise ValueError(f"{name} has V=0 categories; at least one is needed")
    if math.prod(batch_shape) == 0:
        raise ValueError(f"{name} has an empty batch, shape={tuple(arr.shape)}")
    z = arr.astype(np.float64).reshape(-1, v)
    bad = np.isnan(z) | np.isposinf(z)
    if bad.any():
        rows = np.flatnonzero(bad.any(axis=1))
        raise ValueError(f"{name} must not contain NaN or +inf; found in row(s) {_rows(rows)}")
    empty = np.isneginf(z).all(axis=1)
    if empty.any():
        raise ValueError(
            f"{name}: row(s) {_rows(np.flatnonzero(empty))} have no finite logit (every token is masked), "
            "so no law exists there"
        )
    return z, batch_shape


def _rows(rows: np.ndarray) -> str:
    shown = ", ".join(str(int(r)) for r in rows[:8])
    return shown + (" ..." if rows.size > 8 else "")


def _values(value, name: str) -> np.ndarray:
    """A parameter given as a number, an array or a tensor, as a NumPy array (bool refused)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a number or an array of numbers, got {value!r}")
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be a number or an array of numbers, got {value!r}")
    arr = to_numpy(value, name)
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold real numbers, got dtype={arr.dtype}")
    return arr


def check_k(value, name: str = "k") -> np.ndarray:
    """A top-k size: an integer >= 1, or an array of them (one per row).  Floats are refused, even 2.0."""
    arr = _values(value, name)
    if arr.dtype.kind == "f":
        raise TypeError(f"{name} must be an integer (or integers, one per row), got {value!r}")
    if arr.size and (arr < 1).any():
        raise ValueError(f"{name} must be >= 1, got {name}={_shown(value, arr, arr < 1)}")
    return arr.astype(np.int64)


def check_probability(value, name: str, *, low: float, low_open: bool) -> np.ndarray:
    """A probability parameter in ``(low, 1]`` (``low_open``) or ``[low, 1]``; NaN refused; arrays allowed."""
    arr = _values(value, name).astype(np.float64)
    bad = np.isnan(arr) | (arr > 1) | ((arr <= low) if low_open else (arr < low))
    if arr.size and bad.any():
        bracket = "(" if low_open else "["
        raise ValueError(f"{name} must be in {bracket}{low:g}, 1], got {name}={_shown(value, arr, bad)}")
    return arr


def check_temperature(value, name: str = "temperature") -> np.ndarray:
    """Temperatures: finite and >= 0 (0 means greedy), a number or one per row."""
    arr = _values(value, name).astype(np.float64)
    bad = ~np.isfinite(arr) | (arr < 0)
    if arr.size and bad.any():
        raise ValueError(f"{name} must be finite and >= 0 (0 means greedy), got {name}={_shown(value, arr, bad)}")
    return arr


def _shown(value, arr: np.ndarray, bad: np.ndarray):
    """The offending value for a message: the number itself, or the first bad entry of an array."""
    if arr.ndim == 0:
        return value
    first = int(np.flatnonzero(bad.reshape(-1))[0])
    return f"{arr.reshape(-1)[first].item()!r} (at index {first})"


def per_row(arr: np.ndarray, name: str, batch_shape: tuple[int, ...]) -> np.ndarray:
    """A checked parameter broadcast to one value per row ``[R]``: a scalar, or exactly the batch shape."""
    rows = math.prod(batch_shape)
    if arr.ndim == 0:
        return np.full(rows, arr[()], dtype=arr.dtype)
    if tuple(arr.shape) != batch_shape:
        raise ValueError(
            f"{name} must be a number or have the batch shape {batch_shape} of the logits, got shape {tuple(arr.shape)}"
        )
    return arr.reshape(rows)


def check_choice(value, name: str, choices: tuple[str, ...]) -> str:
    """One of a fixed set of names."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {name}={value!r}")
    return value


def check_bool(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def probability_table(x, name: str) -> np.ndarray:
    """A probability table ``[..., V]``: float64 (normalized), or an object array of Fractions (exact).

    Floating-point input (float16/bfloat16/float32/float64, NumPy or torch) must be finite, >= 0 and sum
    to 1 per row within ``V * PROBS_SUM_TOLERANCE_PER_CATEGORY``; it is returned as float64 divided by
    its row sums.  An object array of ``int``/``fractions.Fraction`` entries must be >= 0 and sum to
    exactly 1; it is returned as an object array of Fractions, and every law computed from it is exact.
    """
    arr = to_numpy(x, name)
    if arr.ndim == 0:
        raise ValueError(f"{name} must have shape [..., V], got a scalar")
    if arr.shape[-1] == 0 or arr.size == 0:
        raise ValueError(f"{name} is empty, shape={tuple(arr.shape)}")
    if arr.dtype == object:
        flat = arr.reshape(-1)
        for e in flat:
            if isinstance(e, bool) or not isinstance(e, numbers.Rational):
                raise TypeError(f"{name}: an object array must hold int or fractions.Fraction entries, got {e!r}")
        table = np.array([Fraction(e) for e in flat], dtype=object).reshape(arr.shape)
        if (table < 0).any():
            raise ValueError(f"{name} must be >= 0, got min={min(flat)!r}")
        sums = table.sum(axis=-1, keepdims=True)
        if (sums != 1).any():
            raise ValueError(f"{name} must sum to exactly 1 per row (Fractions), got sum={sums.reshape(-1)[0]!r}")
        return table
    if arr.dtype.kind != "f":
        raise TypeError(f"{name} must hold floating-point probabilities (or Fractions), got dtype={arr.dtype}")
    table = arr.astype(np.float64)
    if not np.isfinite(table).all():
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    if (table < 0).any():
        raise ValueError(f"{name} must be >= 0, got min={float(table.min())!r}")
    v = table.shape[-1]
    tol = v * PROBS_SUM_TOLERANCE_PER_CATEGORY
    sums = table.sum(axis=-1, keepdims=True)
    off = np.abs(sums - 1.0) > tol
    if off.any():
        worst = float(sums.reshape(-1)[np.argmax(np.abs(sums - 1.0).reshape(-1))])
        raise ValueError(f"{name} must sum to 1 per row (within V * 2**-23 = {tol:.3g}), got sum={worst!r}")
    return table / sums


def as_common(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two checked tables in one arithmetic: exact if both are Fractions, else float64."""
    if a.dtype == object and b.dtype == object:
        return a, b
    return a.astype(np.float64), b.astype(np.float64)
