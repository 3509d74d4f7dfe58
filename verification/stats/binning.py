"""Which categories a chi-square statistic tests one by one, and which it pools.

The pooling rule (used by every chi-square test here)
----------------------------------------------------
A Pearson or G statistic is close to its chi-square law only when every bin has an adequate expected
count (Cochran's rule: at least 5).  Public sampler tests often *drop* the low bins, which makes a
sampler that never draws rare tokens pass.  Here nothing is dropped:

1. a category with expected count ``>= min_expected`` is its own bin;
2. all categories with ``0 < expected < min_expected`` go into ONE pooled bin;
3. if that pooled bin's expected count is itself below ``min_expected``, it is merged into the
   smallest regular bin (so it is still tested, only more coarsely);
4. categories of probability exactly 0 are in no bin: a draw there is an impossible outcome, which
   every test reports as a failure with p-value 0.

``tested_mass`` is the probability of the categories tested one by one, ``pooled_mass`` the rest
(``tested_mass + pooled_mass == 1``).  A deviation that moves mass *inside* the pooled bin is invisible
to the chi-square statistic; :mod:`verification.stats.tails` and :mod:`verification.stats.categories`
look there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Cochran (1954), section 4: expected counts of at least 5 keep the chi-square approximation good.
DEFAULT_MIN_EXPECTED = 5.0


@dataclass(frozen=True, eq=False)
class Binning:
    """A map from categories to bins.

    Attributes
    ----------
    labels : numpy.ndarray, int64, shape (V,)
        Bin of each category, ``-1`` for probability-0 categories.
    num_bins : int
    bin_probs : numpy.ndarray, float64, shape (num_bins,)
        Probability of each bin.
    tested_mass, pooled_mass : float
        Mass in singleton bins / in the pooled bin (see the module docstring).
    pooled_bin : int
        Index of the bin holding the pooled categories, ``-1`` when none was pooled.
    """

    labels: np.ndarray
    num_bins: int
    bin_probs: np.ndarray
    tested_mass: float
    pooled_mass: float
    pooled_bin: int

    def bin_counts(self, histogram: np.ndarray) -> np.ndarray:
        """Per-bin totals of a per-category ``histogram`` (probability-0 categories excluded)."""
        keep = self.labels >= 0
        return np.bincount(self.labels[keep], weights=histogram[keep], minlength=self.num_bins)


def pool_small_bins(probs: np.ndarray, n: int, min_expected: float = DEFAULT_MIN_EXPECTED) -> Binning:
    """Bin categories by the pooling rule of this module for ``n`` draws from ``probs``.

    Parameters
    ----------
    probs : numpy.ndarray, float64, shape (V,)
        Validated probabilities (sum 1).
    n : int
        Number of draws (expected count of category i is ``n * probs[i]``).
    min_expected : float
        Smallest expected count of a bin of its own.

    Returns
    -------
    Binning
    """
    expected = n * probs
    positive = probs > 0
    big = positive & (expected >= min_expected)
    small = positive & ~big
    labels = np.full(probs.shape[0], -1, dtype=np.int64)
    big_idx = np.flatnonzero(big)
    labels[big_idx] = np.arange(big_idx.size)
    num_bins = int(big_idx.size)
    pooled_bin = -1
    pooled_mass = float(probs[small].sum())
    if small.any():
        if n * pooled_mass >= min_expected or num_bins == 0:
            pooled_bin = num_bins
            num_bins += 1
        else:
            # Rule 3: too little expected mass for a bin of its own; merge into the smallest regular bin.
            pooled_bin = int(labels[big_idx[np.argmin(probs[big_idx])]])
            pooled_mass += float(probs[big_idx[pooled_bin]])
        labels[small] = pooled_bin
    bin_probs = np.bincount(labels[positive], weights=probs[positive], minlength=num_bins)
    tested_mass = float(max(0.0, 1.0 - pooled_mass))
    return Binning(labels, num_bins, bin_probs, tested_mass, pooled_mass, pooled_bin)


def equal_mass_buckets(weights: np.ndarray, num_buckets: int) -> np.ndarray:
    """Label categories with ``num_buckets`` buckets of about equal total weight, heaviest first.

    Categories are sorted by decreasing weight (ties by index) and cut where the cumulative weight
    crosses ``k / num_buckets``; a category heavier than one share takes a bucket alone.  Used to
    coarsen a large vocabulary into rank classes for contingency tables.

    Parameters
    ----------
    weights : numpy.ndarray, shape (V,), >= 0
    num_buckets : int, >= 1

    Returns
    -------
    numpy.ndarray, int64, shape (V,)
        Labels ``0 .. b-1`` with ``b <= num_buckets`` (bucket 0 holds the heaviest categories).
    """
    w = np.asarray(weights, dtype=np.float64)
    order = np.lexsort((np.arange(w.size), -w))
    total = float(w.sum())
    if total <= 0:
        return np.zeros(w.size, dtype=np.int64)
    # Cumulative weight *before* each category, so a heavy category starts its own bucket.
    before = np.concatenate(([0.0], np.cumsum(w[order])[:-1])) / total
    raw = np.minimum((before * num_buckets).astype(np.int64), num_buckets - 1)
    # Renumber to consecutive labels (a heavy category can skip bucket numbers).
    _, dense = np.unique(raw, return_inverse=True)
    labels = np.empty(w.size, dtype=np.int64)
    labels[order] = dense
    return labels
