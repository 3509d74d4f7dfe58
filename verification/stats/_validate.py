"""Argument checks shared by every public function of :mod:`verification`.

Each check raises ``TypeError`` (wrong kind of object) or ``ValueError`` (right kind, bad value) with a
short, searchable message naming the argument as ``name=value`` and what would be valid.  They never
use ``assert``, which ``python -O`` removes.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from flashsampling.targets._inputs import PROBS_SUM_TOLERANCE_PER_CATEGORY

#: Largest accepted deviation of ``sum(probs)`` from 1, per category: ``|sum - 1| <= V * 2**-23``, the rule
#: of :mod:`flashsampling.targets` for probability tables.  A float32 softmax of ``V`` logits sums to 1 only
#: within a few ``V`` float32 ulps (measured: 9e-6 at V = 131072, 2.5e-5 at V = 262144; the bound there is
#: 0.016 and 0.031); probabilities computed in float64 are within ~V * 2**-53.
PROBS_SUM_TOLERANCE = PROBS_SUM_TOLERANCE_PER_CATEGORY


def to_numpy(x, name: str) -> np.ndarray:
    """``x`` as a NumPy array; torch tensors are moved to the CPU (duck-typed, torch is optional).

    A view with a zero stride along an axis of length > 1 (``np.broadcast_to``, ``Tensor.expand``)
    is refused: it would silently count one draw many times.
    """
    if hasattr(x, "detach") and hasattr(x, "stride") and callable(x.stride):
        if any(st == 0 and sz > 1 for st, sz in zip(x.stride(), x.shape)):
            raise ValueError(f"{name} is a broadcast view (a zero stride); pass real draws, not repeated ones")
        x = x.detach().cpu().numpy()
    arr = np.asarray(x)
    if arr.ndim and any(st == 0 and sz > 1 for st, sz in zip(arr.strides, arr.shape)):
        raise ValueError(f"{name} is a broadcast view (a zero stride); pass real draws, not repeated ones")
    return arr


def check_samples(samples, name: str = "samples") -> np.ndarray:
    """A 1-D array of integer category indices (any integer dtype; not bool, not float)."""
    arr = to_numpy(samples, name)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must hold integer category indices, got dtype={arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(
            f"{name} must be 1-D (one draw per entry), got shape={arr.shape}; ravel() it if all draws share probs"
        )
    if arr.size == 0:
        raise ValueError(f"{name} is empty: at least one draw is needed")
    return arr


def check_probs(probs, name: str = "probs") -> np.ndarray:
    """A 1-D float64 probability vector: finite, >= 0, summing to 1 within ``V * 2**-23``.

    The tolerance admits float32 probabilities at any vocabulary size (a float32 softmax sums to 1 within a
    few float32 ulps per category); they are renormalized in float64: returns ``probs / probs.sum()``.
    Beyond it, ``ValueError`` (a vector that does not sum to 1 is not a law, or not the caller's).
    """
    arr = to_numpy(probs, name)
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)) or arr.dtype == np.bool_:
        raise TypeError(f"{name} must be a real array, got dtype={arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one probability per category), got shape={arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty: at least one category is needed")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    if (arr < 0).any():
        raise ValueError(f"{name} must be >= 0, got min={arr.min()!r}")
    total = float(arr.sum())
    tol = arr.size * PROBS_SUM_TOLERANCE
    if abs(total - 1.0) > tol:
        raise ValueError(f"{name} must sum to 1 (within V * 2**-23 = {tol:.3g}), got sum={total!r}")
    return arr / total


def check_alpha(alpha, name: str = "alpha") -> float:
    """A false-alarm rate strictly between 0 and 1."""
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {alpha!r}")
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {name}={alpha!r}")
    return a


def check_power(power, alpha: float, name: str = "power") -> float:
    """A target power strictly between ``alpha`` and 1 (a test with power <= alpha is a coin toss)."""
    if isinstance(power, bool) or not isinstance(power, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {power!r}")
    p = float(power)
    if not alpha < p < 1.0:
        raise ValueError(f"{name} must be in (alpha, 1) = ({alpha}, 1), got {name}={power!r}")
    return p


def check_rates(alpha, power) -> tuple[float, float]:
    """``(alpha, power)``: the two error rates every test states, checked in that order (:func:`check_alpha`,
    then :func:`check_power` against that alpha)."""
    a = check_alpha(alpha)
    return a, check_power(power, a)


def check_law(probs, alpha, power) -> tuple[np.ndarray, float, float]:
    """``(probs, alpha, power)``: the law a test compares draws with (:func:`check_probs`, renormalized in float64)
    and its two error rates (:func:`check_rates`), checked in that order."""
    return (check_probs(probs), *check_rates(alpha, power))


def check_int(value, name: str, *, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (NumPy integers accepted, bools and floats refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    v = int(value)
    if v < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {name}={value!r}")
    return v


def check_fraction(value, name: str, *, upper: float = 1.0, inclusive_upper: bool = True) -> float:
    """A real number in ``(0, upper]`` (or ``(0, upper)``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    v = float(value)
    ok = 0.0 < v <= upper if inclusive_upper else 0.0 < v < upper
    if not ok or math.isnan(v):
        bracket = "]" if inclusive_upper else ")"
        raise ValueError(f"{name} must be in (0, {upper}{bracket}, got {name}={value!r}")
    return v


def check_positive_real(value, name: str) -> float:
    """A finite real number > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    v = float(value)
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"{name} must be finite and > 0, got {name}={value!r}")
    return v
