"""Hypothesis strategies for adversarial logits and temperatures.

Every strategy is small, keyword-only after its core argument, validates its arguments when called
(not when drawn), and accepts either a value or a strategy for its size arguments.  They generate
the extremes a sampler gets wrong:

================================  =================================================================
strategy                          extremes generated
================================  =================================================================
:func:`vocab_sizes`               tiny V (1, 2, 3), V at and one off a multiple of the tile, random V
:func:`flat_logits`               all logits equal (every index tied)
:func:`tied_logits`               a few distinct levels, many exact ties at the maximum
:func:`masked_logits`             ``-inf`` masks, down to a single finite logit
:func:`huge_range_logits`         logits spanning up to ``+-span`` (float32-exact), huge gaps
:func:`peaked_logits`             one token 20-80 nats above the rest (near-degenerate rows)
:func:`many_tail_logits`          a small head and a large flat tail 15-40 nats below it
:func:`logits`                    any of the above, 1-D or batched
:func:`temperatures`              T = 0 (greedy), T = 1, tiny and huge T
================================  =================================================================

Logits are float32 NumPy arrays (the kernel's accumulator precision), shape ``(V,)`` or, with
``batch_size``, ``(B, V)``.

Examples
--------
>>> from hypothesis import given
>>> @given(logits(vocab_size=vocab_sizes(max_size=64)), temperatures())
... def test_softmax_is_normalized(z, t): ...
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

__all__ = [
    "KINDS",
    "flat_logits",
    "huge_range_logits",
    "logits",
    "many_tail_logits",
    "masked_logits",
    "peaked_logits",
    "temperatures",
    "tied_logits",
    "vocab_sizes",
]

#: Largest float32 magnitude used for "huge" logits: 2**24 keeps every integer step exact in float32
#: while leaving ``z / T`` finite for T >= 1e-30.
MAX_SPAN = float(2**24)


def _check_int(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {name}={value!r}")
    return int(value)


def _check_float(value, name: str, *, minimum: float = -math.inf, strict: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(float(value)):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    v = float(value)
    if (v <= minimum) if strict else (v < minimum):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {minimum}, got {name}={value!r}")
    return v


def _sizes(value, name: str) -> SearchStrategy[int]:
    """A strategy for a size argument given as an int or a strategy."""
    if isinstance(value, SearchStrategy):
        return value
    return st.just(_check_int(value, name, 1))


def _range(value, name: str) -> tuple[float, float]:
    lo, hi = value if isinstance(value, tuple) else (value, value)
    lo = _check_float(lo, f"{name}[0]", minimum=0.0)
    hi = _check_float(hi, f"{name}[1]", minimum=0.0)
    if lo > hi:
        raise ValueError(f"{name} must be (low, high) with low <= high, got {name}={value!r}")
    return lo, hi


def _batched(row: SearchStrategy[np.ndarray], batch_size) -> SearchStrategy[np.ndarray]:
    if batch_size is None:
        return row
    b = _sizes(batch_size, "batch_size")
    return b.flatmap(lambda k: st.lists(row, min_size=k, max_size=k).map(lambda rows: np.stack(rows)))


def vocab_sizes(*, min_size: int = 1, max_size: int = 1024, tile: int = 128) -> SearchStrategy[int]:
    """Vocabulary sizes: tiny (1-3), one below / at / one above multiples of ``tile``, and uniform.

    Parameters
    ----------
    min_size, max_size : int
        Bounds on V (``1 <= min_size <= max_size``).
    tile : int
        The tile width whose multiples (and neighbours) are favoured: a last partial tile is the
        classic place for an off-by-one.
    """
    lo = _check_int(min_size, "min_size", 1)
    hi = _check_int(max_size, "max_size", lo)
    t = _check_int(tile, "tile", 1)
    edges = sorted({v for k in range(1, hi // t + 2) for v in (k * t - 1, k * t, k * t + 1) if lo <= v <= hi})
    tiny = [v for v in (1, 2, 3) if lo <= v <= hi]
    options = [st.integers(lo, hi)]
    if edges:
        options.append(st.sampled_from(edges))
    if tiny:
        options.append(st.sampled_from(tiny))
    return st.one_of(options)


def temperatures(*, min_value: float = 0.05, max_value: float = 20.0, allow_zero: bool = True) -> SearchStrategy[float]:
    """Temperatures: 1.0, the bounds, uniform values between them, and 0 (greedy) if ``allow_zero``.

    Parameters
    ----------
    min_value, max_value : float
        Positive bounds (``0 < min_value <= max_value``).
    allow_zero : bool
        Also generate ``T = 0``.
    """
    lo = _check_float(min_value, "min_value", minimum=0.0, strict=True)
    hi = _check_float(max_value, "max_value", minimum=lo)
    if not isinstance(allow_zero, bool):
        raise TypeError(f"allow_zero must be a bool, got {allow_zero!r}")
    options = [st.sampled_from(sorted({lo, hi} | ({1.0} if lo <= 1.0 <= hi else set())))]
    options.append(st.floats(lo, hi, allow_nan=False, allow_infinity=False))
    if allow_zero:
        options.append(st.just(0.0))
    return st.one_of(options)


def flat_logits(vocab_size, *, value: float = 0.0, batch_size=None) -> SearchStrategy[np.ndarray]:
    """All ``V`` logits equal to ``value``: every index tied (the tie-bias test's input)."""
    v = _sizes(vocab_size, "vocab_size")
    val = _check_float(value, "value")
    return _batched(v.map(lambda n: np.full(n, val, dtype=np.float32)), batch_size)


def tied_logits(vocab_size, *, max_levels: int = 4, batch_size=None) -> SearchStrategy[np.ndarray]:
    """Logits taking at most ``max_levels`` distinct values (integers in [-8, 8]), so many exact ties.

    The maximum is tied with probability near 1 for V >> ``max_levels``.
    """
    v = _sizes(vocab_size, "vocab_size")
    k = _check_int(max_levels, "max_levels", 1)

    @st.composite
    def row(draw):
        n = draw(v)
        levels = draw(st.lists(st.integers(-8, 8), min_size=1, max_size=k, unique=True))
        idx = draw(st.lists(st.integers(0, len(levels) - 1), min_size=n, max_size=n))
        return np.asarray(levels, dtype=np.float32)[idx]

    return _batched(row(), batch_size)


def masked_logits(vocab_size, *, max_masked_fraction: float = 1.0, batch_size=None) -> SearchStrategy[np.ndarray]:
    """Random logits in [-10, 10] with some set to ``-inf``; at least one stays finite.

    Parameters
    ----------
    max_masked_fraction : float in [0, 1]
        Largest fraction of masked tokens (1.0 allows all but one).
    """
    v = _sizes(vocab_size, "vocab_size")
    frac = _check_float(max_masked_fraction, "max_masked_fraction", minimum=0.0)
    if frac > 1:
        raise ValueError(f"max_masked_fraction must be <= 1, got max_masked_fraction={max_masked_fraction!r}")

    @st.composite
    def row(draw):
        n = draw(v)
        z = np.asarray(draw(st.lists(st.floats(-10, 10, width=32), min_size=n, max_size=n)), dtype=np.float32)
        masked = draw(st.lists(st.integers(0, n - 1), max_size=min(n - 1, int(frac * n)), unique=True))
        z[masked] = -np.inf
        return z

    return _batched(row(), batch_size)


def huge_range_logits(vocab_size, *, span: float = 1e4, batch_size=None) -> SearchStrategy[np.ndarray]:
    """Logits drawn from ``{-span, -span/2, 0, span/2, span}`` and uniform in ``[-span, span]``.

    Gaps of thousands of nats: every token but the top has probability 0 in float64, and a sampler
    that computes ``exp`` before subtracting the maximum overflows.
    """
    v = _sizes(vocab_size, "vocab_size")
    s = _check_float(span, "span", minimum=0.0, strict=True)
    if s > MAX_SPAN:
        raise ValueError(f"span must be <= {MAX_SPAN:g} (float32-exact), got span={span!r}")
    value = st.one_of(st.sampled_from([-s, -s / 2, 0.0, s / 2, s]), st.floats(-s, s, width=32))

    @st.composite
    def row(draw):
        n = draw(v)
        return np.asarray(draw(st.lists(value, min_size=n, max_size=n)), dtype=np.float32)

    return _batched(row(), batch_size)


def peaked_logits(vocab_size, *, gap=(20.0, 80.0), batch_size=None) -> SearchStrategy[np.ndarray]:
    """One token ``gap`` nats above all others (random in [-1, 1]): a near-degenerate row.

    Parameters
    ----------
    gap : float or (low, high)
        Height of the peak above the rest, in nats.
    """
    v = _sizes(vocab_size, "vocab_size")
    lo, hi = _range(gap, "gap")

    @st.composite
    def row(draw):
        n = draw(v)
        z = np.asarray(draw(st.lists(st.floats(-1, 1, width=32), min_size=n, max_size=n)), dtype=np.float32)
        z[draw(st.integers(0, n - 1))] = np.float32(draw(st.floats(lo, hi)) + 1.0)
        return z

    return _batched(row(), batch_size)


def many_tail_logits(vocab_size, *, head_size=None, gap=(15.0, 40.0), batch_size=None) -> SearchStrategy[np.ndarray]:
    """A head of ``head_size`` tokens in [0, 2] and a flat tail ``gap`` nats below the top of the head.

    The tail's total mass ``(V - head) exp(-gap)`` is what a noise floor starves (a capped Gumbel
    noise cannot lift a token more than its cap).  Head positions are random, so the tail is not
    only at the end of the vocabulary.

    Parameters
    ----------
    head_size : int or strategy, optional
        Number of head tokens (clipped to V - 1 when V > 1); default uniform in 1..8.
    gap : float or (low, high)
        Distance of the tail below the head's maximum, in nats.
    """
    v = _sizes(vocab_size, "vocab_size")
    h = st.integers(1, 8) if head_size is None else _sizes(head_size, "head_size")
    lo, hi = _range(gap, "gap")

    @st.composite
    def row(draw):
        n = draw(v)
        k = max(1, min(draw(h), n - 1)) if n > 1 else 1
        head = np.asarray(draw(st.lists(st.floats(0, 2, width=32), min_size=k, max_size=k)), dtype=np.float32)
        g = draw(st.floats(lo, hi))
        z = np.full(n, np.float32(head.max() - g), dtype=np.float32)
        pos = draw(st.lists(st.integers(0, n - 1), min_size=k, max_size=k, unique=True))
        z[pos] = head
        return z

    return _batched(row(), batch_size)


#: Names of the logit families :func:`logits` draws from.
KINDS = ("flat", "tied", "masked", "huge_range", "peaked", "many_tail")


def logits(*, vocab_size=None, kinds: tuple[str, ...] = KINDS, batch_size=None) -> SearchStrategy[np.ndarray]:
    """Any of the adversarial logit families.

    Parameters
    ----------
    vocab_size : int or strategy, optional
        Default :func:`vocab_sizes` with ``max_size=512``.
    kinds : tuple of str
        A non-empty subset of :data:`KINDS`.
    batch_size : int or strategy, optional
        Draw ``(B, V)`` arrays (every row of one kind and V) instead of ``(V,)``.
    """
    v = vocab_sizes(max_size=512) if vocab_size is None else _sizes(vocab_size, "vocab_size")
    if isinstance(kinds, str) or not kinds:
        raise TypeError(f"kinds must be a non-empty tuple of names from {KINDS}, got {kinds!r}")
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise ValueError(f"unknown kinds {bad}; choose from {KINDS}")
    makers = {
        "flat": lambda: flat_logits(v, batch_size=batch_size),
        "tied": lambda: tied_logits(v, batch_size=batch_size),
        "masked": lambda: masked_logits(v, batch_size=batch_size),
        "huge_range": lambda: huge_range_logits(v, batch_size=batch_size),
        "peaked": lambda: peaked_logits(v, batch_size=batch_size),
        "many_tail": lambda: many_tail_logits(v, batch_size=batch_size),
    }
    return st.one_of([makers[k]() for k in kinds])
