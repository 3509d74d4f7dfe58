"""Counting draws into a histogram: the only pass over the raw samples.

Every test in :mod:`verification.stats` reads draws through :func:`as_counts`, so a caller can hand it
either the raw samples (any integer array or tensor) or a :class:`Counts` built once, possibly in
chunks (``count_samples(chunk_a, V) + count_samples(chunk_b, V)``), possibly on another device.
Counting is one ``np.bincount`` (about 1 ns per draw on one core), so 10^8 draws over V = 262144
categories cost well under a second; see :mod:`verification.runners.speed`.

Draws outside ``[0, V)`` are not an input error: a sampler that returns ``-1`` or ``V`` is broken,
and the tests must say so.  They are kept in ``Counts.out_of_range`` and every test treats them as
impossible outcomes (p-value 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validate import check_int, check_samples, to_numpy

#: Draws counted per ``np.bincount`` call in :func:`count_samples`; bounds the temporary int64 copy
#: (8 bytes a draw) made for narrower integer dtypes to 128 MiB.
COUNT_CHUNK = 1 << 24
#: Largest number of draws a :class:`Counts` may hold, in one entry or in total: the int64 sums of counts that
#: every test forms (``n``, bin totals, two samples' columns) then never overflow.
_MAX_COUNT = 1 << 62


@dataclass(frozen=True, eq=False)
class Counts:
    """Histogram of draws over ``V`` categories.

    Attributes
    ----------
    histogram : numpy.ndarray, int64, shape (V,)
        ``histogram[i]`` is the number of draws equal to ``i``.
    out_of_range : int
        Draws outside ``[0, V)`` (impossible outcomes of any distribution on ``V`` categories).

    Raises
    ------
    TypeError
        ``histogram`` is not numeric (or is boolean); ``out_of_range`` is not an integer.
    ValueError
        ``histogram`` is not 1-D, is empty, or holds a negative or non-integer count; ``out_of_range < 0``;
        more than ``2**62`` draws in all (int64 sums of counts would overflow).
    """

    histogram: np.ndarray
    out_of_range: int = 0

    def __post_init__(self) -> None:
        # A hand-built histogram is checked as draws would be: counts are whole and >= 0 (a negative
        # count would let a chi-square statistic cancel a real excess, and g_test would take its log).
        h = to_numpy(self.histogram, "histogram")
        if h.dtype == np.bool_ or not (np.issubdtype(h.dtype, np.integer) or np.issubdtype(h.dtype, np.floating)):
            raise TypeError(f"histogram must hold integer counts, got dtype={h.dtype}")
        if h.ndim != 1 or h.size == 0:
            raise ValueError(f"histogram must be 1-D with one count per category, got shape={h.shape}")
        if np.issubdtype(h.dtype, np.floating) and not (np.isfinite(h).all() and (h == np.floor(h)).all()):
            raise ValueError("histogram must hold whole counts, got a non-integer entry")
        if (h < 0).any():
            raise ValueError(f"histogram must hold counts >= 0, got min={h.min()!r}")
        if (h > _MAX_COUNT).any():
            raise ValueError(f"histogram must hold counts of at most 2**62, got max={h.max()!r}")
        out_of_range = check_int(self.out_of_range, "out_of_range", minimum=0)
        # Every entry is <= 2**62 < 2**63 here, so the cast is exact.  The total is summed in float64 first
        # (an int64 sum could wrap), exactly in Python integers only near the limit.
        h = h.astype(np.int64, copy=False)
        if float(h.sum(dtype=np.float64)) + out_of_range > _MAX_COUNT / 2:
            total = sum(int(c) for c in h[h > 0]) + out_of_range
            if total > _MAX_COUNT:
                raise ValueError(f"Counts must hold at most 2**62 draws in all (int64 sums overflow beyond), got "
                                 f"{total:.4g}")  # fmt: skip
        object.__setattr__(self, "histogram", h)
        object.__setattr__(self, "out_of_range", out_of_range)

    @property
    def num_categories(self) -> int:
        """V, the number of categories."""
        return int(self.histogram.shape[0])

    @property
    def n(self) -> int:
        """Total number of draws, including out-of-range ones."""
        return int(self.histogram.sum()) + int(self.out_of_range)

    def __add__(self, other: Counts) -> Counts:
        if not isinstance(other, Counts):
            return NotImplemented
        if other.num_categories != self.num_categories:
            raise ValueError(f"cannot add Counts over {self.num_categories} and {other.num_categories} categories")
        return Counts(self.histogram + other.histogram, self.out_of_range + other.out_of_range)

    def __repr__(self) -> str:
        return f"Counts(n={self.n}, num_categories={self.num_categories}, out_of_range={self.out_of_range})"


def count_samples(samples, num_categories: int) -> Counts:
    """Count integer draws into a :class:`Counts` over ``num_categories`` categories.

    Parameters
    ----------
    samples : array_like or torch.Tensor of integers, shape (n,)
        Category indices.  Broadcast views (zero strides) are refused: they repeat one draw.
    num_categories : int
        V.  Draws outside ``[0, V)`` are counted in ``out_of_range``.

    Returns
    -------
    Counts

    Raises
    ------
    TypeError
        ``samples`` is not an integer array.
    ValueError
        ``samples`` is not 1-D, is empty or is a broadcast view; ``num_categories < 1``.

    Examples
    --------
    >>> count_samples([0, 2, 2, 5], 3)
    Counts(n=4, num_categories=3, out_of_range=1)
    """
    v = check_int(num_categories, "num_categories")
    s = check_samples(samples)
    hist = np.zeros(v, dtype=np.int64)
    bad = 0
    for start in range(0, s.shape[0], COUNT_CHUNK):
        chunk = s[start : start + COUNT_CHUNK]
        lo, hi = int(chunk.min()), int(chunk.max())
        if lo < 0 or hi >= v:
            inside = (chunk >= 0) & (chunk < v)
            bad += int(chunk.shape[0] - np.count_nonzero(inside))
            chunk = chunk[inside]
            if chunk.size == 0:
                continue
        hist += np.bincount(chunk.astype(np.intp, copy=False), minlength=v)
    return Counts(hist, bad)


def as_counts(samples, num_categories: int, name: str = "samples") -> Counts:
    """``samples`` if it already is a :class:`Counts` over ``num_categories``, else ``count_samples``."""
    if isinstance(samples, Counts):
        if samples.num_categories != num_categories:
            raise ValueError(f"{name} counts {samples.num_categories} categories but {num_categories} were expected")
        if samples.n == 0:
            raise ValueError(f"{name} is empty: at least one draw is needed")
        return samples
    return count_samples(samples, num_categories)
