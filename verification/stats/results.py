"""Result objects: every test returns one, carrying n, the statistic, the p-value, alpha and the deviation
it could have detected.

``StatResult`` holds the fields every test has; each test family adds its own (``GofResult`` adds the
degrees of freedom, the tested and pooled mass, and methods for the most deviant categories and their
confidence intervals).  Results print as one readable line, ``as_dict()`` gives a JSON-ready dict, and,
like SciPy's result objects, every result unpacks as ``statistic, pvalue = result`` (``result[0]``,
``result[1]``; the other fields are attributes only).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np
from scipy import stats

from .binning import Binning
from .counts import Counts


def fmt(x: Any) -> str:
    """Compact text for a number in reprs and tables (4 significant digits)."""
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, (float, np.floating)):
        x = float(x)
        if math.isinf(x) or math.isnan(x):
            return str(x)
        return f"{x:.4g}"
    return repr(x)


class UnpacksLikeScipy:
    """SciPy's convention for a test's result: ``statistic, pvalue = result`` (a 2-sequence: ``result[0]``,
    ``result[1]``; every other field is an attribute only).  The class has ``statistic`` and ``pvalue``."""

    statistic: float
    pvalue: float

    def __iter__(self):
        return iter((self.statistic, self.pvalue))

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> float:
        return (self.statistic, self.pvalue)[index]


@dataclass(frozen=True, eq=False, repr=False)
class StatResult(UnpacksLikeScipy):
    """Outcome of one statistical test.

    Attributes
    ----------
    test : str
        Name of the test, e.g. ``"pearson chi-square"``.
    statistic : float
        The test statistic (``inf`` when an impossible outcome was observed).
    pvalue : float
        Probability, under the null hypothesis (the sampler is exact), of a statistic at least as
        extreme.  The test fails when ``pvalue <= alpha``.
    n : int
        Number of draws (or pairs, or maxima) the test used.
    alpha : float
        False-alarm rate: an exact sampler fails with probability at most ``alpha``.
    power : float
        Probability of failing a sampler off by ``min_detectable`` or more.
    min_detectable : float
        Smallest deviation (measured as ``deviation`` says) detected with probability ``>= power``.
    deviation : str
        What ``min_detectable`` measures, e.g. ``"total variation"``.
    """

    test: str
    statistic: float
    pvalue: float
    n: int
    alpha: float
    power: float
    min_detectable: float
    deviation: str

    #: Extra attribute names shown by ``repr`` and ``as_dict`` (set by subclasses).
    _show: ClassVar[tuple[str, ...]] = ()
    #: Name under which ``repr`` shows ``min_detectable``.
    _detect_name: ClassVar[str] = "min_detectable"

    @property
    def passed(self) -> bool:
        """True when ``pvalue > alpha`` (no evidence against exactness at this level)."""
        return bool(self.pvalue > self.alpha)

    @property
    def verdict(self) -> str:
        """``"pass"`` or ``"FAIL"``."""
        return "pass" if self.passed else "FAIL"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the scalar fields, ``passed`` included."""
        out: dict[str, Any] = {"test": self.test, "passed": self.passed}
        for name in ("statistic", "pvalue", "n", "alpha", "power", "min_detectable", "deviation", *self._show):
            v = getattr(self, name)
            if isinstance(v, (np.integer,)):
                v = int(v)
            elif isinstance(v, (np.floating,)):
                v = float(v)
            out[name] = v
        return out

    def __repr__(self) -> str:
        parts = [
            f"{self.verdict} {self.test}",
            f"statistic={fmt(self.statistic)}",
            f"pvalue={fmt(self.pvalue)}",
            f"n={self.n}",
        ]
        parts += [f"{name}={fmt(getattr(self, name))}" for name in self._show]
        parts += [
            f"alpha={fmt(self.alpha)}",
            f"power={fmt(self.power)}",
            f"{self._detect_name}={fmt(self.min_detectable)} ({self.deviation})",
        ]
        return f"{type(self).__name__}({', '.join(parts)})"

    def summary(self) -> str:
        """One table row: verdict, test, n, statistic, p-value, detectable deviation."""
        return (
            f"{self.verdict:4}  {self.test:28}  n={self.n:<12d} stat={fmt(self.statistic):>10}  "
            f"p={fmt(self.pvalue):>10}  detects {self.deviation} >= {fmt(self.min_detectable)}"
        )

    def replace(self, **changes: Any) -> StatResult:
        """A copy with some fields changed (e.g. ``alpha`` when a family applies a correction)."""
        return dataclasses.replace(self, **changes)


class Deviation(NamedTuple):
    """One category's observed count against its expected count."""

    category: int
    observed: int
    expected: float
    residual: float  # (observed - expected) / sqrt(expected); +-inf where expected == 0 < observed


@dataclass(frozen=True, eq=False, repr=False)
class GofResult(StatResult):
    """Goodness-of-fit result (Pearson chi-square or G-test) with pooling information.

    Attributes (beyond :class:`StatResult`)
    ---------------------------------------
    dof : int
        Degrees of freedom, ``num_bins - 1``.
    tested_mass : float
        Probability of the categories tested one by one (expected count ``>= min_expected``).
    pooled_mass : float
        Probability pooled into one bin (never dropped); ``tested_mass + pooled_mass == 1``.
    num_bins : int
    impossible : int
        Draws on probability-0 categories or outside ``[0, V)``; any such draw fails the test.
    counts : Counts
    probs : numpy.ndarray
    binning : Binning
    """

    dof: int
    tested_mass: float
    pooled_mass: float
    num_bins: int
    impossible: int
    counts: Counts
    probs: np.ndarray
    binning: Binning

    _show: ClassVar[tuple[str, ...]] = ("dof", "tested_mass", "pooled_mass", "impossible")
    _detect_name: ClassVar[str] = "min_detectable_tv"

    @property
    def min_detectable_tv(self) -> float:
        """Smallest total variation between the binned distributions detected with ``power``."""
        return self.min_detectable

    @property
    def min_detectable_tv_any(self) -> float:
        """Smallest total variation over *categories* that is guaranteed to be detected.

        Pooling can hide a deviation inside the pooled bin, but only up to its mass:
        ``TV_categories <= TV_bins + pooled_mass``, so any deviation of at least
        ``min_detectable_tv + pooled_mass`` is detected with ``power`` (capped at 1).
        """
        return min(1.0, self.min_detectable + self.pooled_mass) if self.min_detectable < 1 else math.inf

    def expected(self) -> np.ndarray:
        """Expected count per category, ``n * probs`` (float64, shape (V,))."""
        return (self.counts.n - self.counts.out_of_range) * self.probs

    def residuals(self) -> np.ndarray:
        """Standardized residual per category, ``(observed - expected) / sqrt(expected)``.

        Under the null each is approximately standard normal when its expected count is large.
        A draw on a probability-0 category gives ``+inf``.
        """
        e = self.expected()
        o = self.counts.histogram.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = (o - e) / np.sqrt(e)
        r[(e == 0) & (o == 0)] = 0.0
        return r

    def _deviations(self, idx: np.ndarray, r: np.ndarray) -> list[Deviation]:
        e = self.expected()
        h = self.counts.histogram
        return [Deviation(int(i), int(h[i]), float(e[i]), float(r[i])) for i in idx]

    def most_deviant(self, k: int = 5) -> list[Deviation]:
        """The ``k`` categories with the largest ``|residual|``, largest first."""
        r = self.residuals()
        k = min(int(k), r.size)
        idx = np.argsort(-np.abs(r), kind="stable")[:k]
        return self._deviations(idx, r)

    def over_sampled(self, k: int = 5) -> list[Deviation]:
        """The ``k`` categories with the largest positive residuals."""
        r = self.residuals()
        idx = [i for i in np.argsort(-r, kind="stable")[: int(k)] if r[i] > 0]
        return self._deviations(np.asarray(idx, dtype=np.int64), r)

    def under_sampled(self, k: int = 5) -> list[Deviation]:
        """The ``k`` categories with the most negative residuals."""
        r = self.residuals()
        idx = [i for i in np.argsort(r, kind="stable")[: int(k)] if r[i] < 0]
        return self._deviations(np.asarray(idx, dtype=np.int64), r)

    def interval(self, category: int, confidence: float = 0.99) -> tuple[float, float]:
        """Clopper-Pearson interval for the probability of ``category`` from the observed draws."""
        c = int(category)
        if not 0 <= c < self.probs.size:
            raise ValueError(f"category must be in [0, {self.probs.size}), got category={category!r}")
        k = int(self.counts.histogram[c])
        ci = stats.binomtest(k, self.counts.n, 0.5).proportion_ci(confidence_level=confidence, method="exact")
        return float(ci.low), float(ci.high)

    def pooled_bin(self) -> tuple[int, float]:
        """Observed draws and expected count in the pooled bin (``(0, 0.0)`` when nothing was pooled)."""
        if self.binning.pooled_bin < 0:
            return 0, 0.0
        pooled = self.binning.labels == self.binning.pooled_bin
        n_in = self.counts.n - self.counts.out_of_range
        return int(self.counts.histogram[pooled].sum()), float(n_in * self.probs[pooled].sum())

    def diagnosis(self, k: int = 5) -> str:
        """Multi-line text: the verdict, the pooled tail, and the most over- and under-sampled categories."""
        lines = [repr(self)]
        obs, exp = self.pooled_bin()
        lines.append(
            f"  tested mass {fmt(self.tested_mass)} in {self.num_bins} bins; pooled tail mass "
            f"{fmt(self.pooled_mass)}: observed {obs} draws, expected {fmt(exp)}"
        )
        if self.impossible:
            lines.append(
                f"  {self.impossible} impossible draws (on probability-0 categories or outside [0, {self.probs.size}))"
            )
        for title, devs in (("most over-sampled", self.over_sampled(k)), ("most under-sampled", self.under_sampled(k))):
            lines.append(f"  {title}:")
            lines.append(f"    {'category':>10} {'observed':>12} {'expected':>14} {'std.resid':>10}")
            if not devs:
                lines.append("    (none)")
            for d in devs:
                lines.append(f"    {d.category:>10d} {d.observed:>12d} {d.expected:>14.6g} {d.residual:>10.3g}")
        lines.append(
            f"  detects total variation >= {fmt(self.min_detectable_tv)} over the bins "
            f"(>= {fmt(self.min_detectable_tv_any)} over categories) with power {fmt(self.power)}"
        )
        return "\n".join(lines)
