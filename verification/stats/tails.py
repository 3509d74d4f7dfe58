"""Tail-mass test: are the far tokens of a many-tail distribution drawn as often as they should be?

A sampler whose noise is capped (24-bit uniforms give Gumbel noise of at most about 16.6 nats; a
float32 uniform that rounds to 1 gives ``-log(-log(u))`` capped near 17 nats) cannot pick a token
whose logit is more than the cap below the top: tokens 17-40 nats below the maximum are *starved*.
One such token is hopeless to test, but a large flat tail carries real mass: 150000 tokens 20 nats
below the top hold ``150000 e**-20 ~ 3e-4`` of it, enough to test with a few times ``10**5`` draws.

The test counts the draws ``k`` that land in a declared tail set ``T`` and compares them with
``Bin(n, p_T)`` exactly (``scipy.stats.binomtest``), one-sided ``"less"`` by default (starvation).
The deviation is the *relative* tail-mass deficit ``r = 1 - q_T / p_T`` (``r = 1``: fully starved).

Where the tail is not declared, :func:`far_tail` defines it from the target law alone: the tokens whose
probability is at least ``g`` nats below the largest (``p_i <= p_max e**-g``, ``p_i > 0``), for the deepest
``g`` of :data:`TAIL_GAPS` at which the test, at the ``n`` planned, would see the tail lose 90 % of its mass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np

from ._validate import check_fraction, check_int, check_probs, check_rates, to_numpy
from .binomial import binomial_pvalue, check_alternative, detectable_shifts
from .counts import as_counts
from .power import BINOMIAL_MAX_SAMPLES, check_deviation, detectable, smallest_n
from .results import StatResult

__all__ = [
    "TAIL_GAPS",
    "FarTail",
    "TailResult",
    "far_tail",
    "tail_mask",
    "tail_mass_test",
    "min_detectable_tail_deficit",
    "required_tail_samples",
]


@dataclass(frozen=True, eq=False, repr=False)
class TailResult(StatResult):
    """Result of :func:`tail_mass_test`; ``statistic`` is the number of draws in the tail.

    Extra attributes: ``tail_mass`` (``p_T``), ``expected`` (``n p_T``), ``tail_size`` (categories in
    ``T``), ``alternative``, ``impossible``.
    """

    tail_mass: float
    expected: float
    tail_size: int
    alternative: str
    impossible: int
    _show: ClassVar[tuple[str, ...]] = ("expected", "tail_mass", "tail_size", "alternative")

    @property
    def observed_fraction(self) -> float:
        """Fraction of draws in the tail (``statistic / n``)."""
        return self.statistic / self.n

    @property
    def relative_deficit(self) -> float:
        """Observed ``1 - (k / n) / p_T`` (positive when the tail is under-sampled)."""
        return 1.0 - self.observed_fraction / self.tail_mass


def tail_mask(logits, *, gap: float, temperature: float = 1.0) -> np.ndarray:
    """Boolean mask of the tokens at least ``gap`` nats below the top after temperature scaling.

    ``(max(z) - z) / T >= gap`` for finite ``z``; ``-inf`` tokens (probability 0) are never in the tail.
    """
    z = to_numpy(logits, "logits").astype(np.float64)
    if z.ndim != 1:
        raise ValueError(f"logits must be 1-D, got shape={z.shape}")
    gap = float(gap)
    t = float(temperature)
    if not t > 0:
        raise ValueError(f"temperature must be > 0, got temperature={temperature!r}")
    finite = np.isfinite(z)
    m = z[finite].max()
    return finite & ((m - np.where(finite, z, m)) / t >= gap)


#: Depths, in nats below the most likely token, at which :func:`far_tail` looks for a tail, deepest first.
#: Capped noise starves the tokens below its cap: 16.6 nats for Gumbel noise from 24-bit or float32
#: uniforms (``-log(-log(1 - 2**-24))``) and a float32 running CDF (``2**-24`` of the mass); 7.6 nats from
#: float16 uniforms, 5.5 from bfloat16 ones.  The deepest depth the draws can test sees every cap above it.
TAIL_GAPS = (16.0, 12.0, 8.0)
#: :func:`far_tail` keeps a depth when the tail test at the planned ``n`` detects the loss of this
#: fraction of the tail's mass: capped noise starves a tail below its cap completely, which a tail of
#: expected count ``log(2 / alpha)`` already shows; a lighter tail says nothing a reader can use.
TAIL_MAX_DEFICIT = 0.9


class FarTail(NamedTuple):
    """A tail chosen by :func:`far_tail`: its mask over the categories, depth ``gap`` (nats) and mass."""

    mask: np.ndarray
    gap: float
    mass: float


def far_tail(probs, n: int, *, alpha: float = 1e-6, power: float = 0.99, gaps=TAIL_GAPS) -> FarTail | None:
    """The far tail of ``probs`` that :func:`tail_mass_test` can test on ``n`` draws, or ``None``.

    For each depth ``g`` of ``gaps`` (deepest first) the tail is ``T_g = {i : 0 < p_i <= p_max e**-g}``,
    defined by the target law alone (for a softmax, the tokens ``g`` nats below the top after the
    temperature; for a truncated law, the kept tokens that far down, since truncation rescales the kept
    probabilities together).  The first ``T_g`` whose two-sided test at level ``alpha`` and ``n`` draws
    detects a relative deficit of :data:`TAIL_MAX_DEFICIT` with ``power`` is returned; ``None`` when no
    depth qualifies (no token that far down, or too little mass there for ``n`` draws to test).

    Examples
    --------
    >>> import numpy as np
    >>> z = np.r_[0.0, np.full(100_000, -19.0)]
    >>> p = np.exp(z) / np.exp(z).sum()
    >>> t = far_tail(p, 500_000, alpha=1e-4)
    >>> t.gap, int(t.mask.sum()), round(t.mass, 5)
    (16.0, 100000, 0.00056)
    >>> far_tail(p, 10_000, alpha=1e-4) is None
    True
    """
    p = check_probs(probs)
    n = check_int(n, "n")
    alpha, power = check_rates(alpha, power)
    top = float(p.max())
    for g in gaps:
        mask = (p > 0) & (p <= top * math.exp(-float(g)))
        mass = float(p[mask].sum())
        if not 0.0 < mass < 1.0:
            continue
        down, _ = detectable_shifts(n, mass, alpha, power, "two-sided")
        if down / mass <= TAIL_MAX_DEFICIT:
            return FarTail(mask, float(g), mass)
    return None


def _tail_indices(tail, v: int) -> np.ndarray:
    t = to_numpy(tail, "tail")
    if t.dtype == np.bool_:
        if t.shape != (v,):
            raise ValueError(f"tail mask must have shape ({v},), got shape={t.shape}")
        return t
    if not np.issubdtype(t.dtype, np.integer) or t.ndim != 1:
        raise TypeError("tail must be a boolean mask of shape (V,) or a 1-D array of category indices")
    if t.size and (t.min() < 0 or t.max() >= v):
        raise ValueError(f"tail indices must be in [0, {v})")
    mask = np.zeros(v, dtype=bool)
    mask[t] = True
    return mask


def tail_mass_test(
    samples,
    probs,
    tail,
    *,
    alternative: str = "less",
    alpha: float = 1e-6,
    power: float = 0.99,
) -> TailResult:
    """Exact binomial test of the number of draws in the tail set ``tail``.

    Fails if ``P(Bin(n, p_T) <= k) <= alpha`` (``alternative="less"``: the tail is starved; "greater"
    and central "two-sided" also available), or if any draw is impossible.

    Guarantee, exact: (a) an exact sampler fails with probability at most ``alpha``; (b) a sampler
    whose tail mass is ``q_T <= p_T (1 - result.min_detectable)`` passes with probability at most
    ``1 - power``.  Full starvation (``q_T = 0``) is caught with certainty once
    ``(1 - p_T)**n <= alpha``, i.e. ``n >= log(1/alpha) / p_T``; in general ``n`` scales as
    ``1 / (p_T r**2)`` for a relative deficit ``r``.

    Parameters
    ----------
    samples : array_like of int, shape (n,), or Counts
    probs : array_like of float, shape (V,)
    tail : bool mask of shape (V,) or int indices
        The tail set ``T`` (e.g. from :func:`tail_mask`); its exact mass ``p_T`` must be > 0.
    alternative : {"less", "greater", "two-sided"}
    alpha, power : float

    Returns
    -------
    TailResult
        ``min_detectable`` is the relative deficit (``"less"``), excess (``"greater"``) or the larger
        of the two (``"two-sided"``).

    Raises
    ------
    ValueError
        The tail has probability 0 or 1, or bad arguments.

    Notes
    -----
    Planning twins: :func:`min_detectable_tail_deficit`, :func:`required_tail_samples`.  The test
    looks only at the total mass in ``T``: it complements the chi-square tests, which pool exactly
    these categories.

    References
    ----------
    .. [1] Clopper, C. J. and Pearson, E. S. (1934). The use of confidence or fiducial limits
       illustrated in the case of the binomial. *Biometrika* 26(4), 404-413 (exact binomial tails).
    .. [2] Gumbel, E. J. (1954). *Statistical Theory of Extreme Values and Some Practical
       Applications*. National Bureau of Standards Applied Mathematics Series 33 (the Gumbel-max
       construction whose noise cap starves the tail).

    Examples
    --------
    >>> import numpy as np
    >>> p = np.r_[0.9, np.full(100, 0.001)]
    >>> starved = np.zeros(20000, dtype=np.int64)          # a sampler that never leaves the head
    >>> tail_mass_test(starved, p, np.arange(1, 101)).passed
    False
    """
    p = check_probs(probs)
    alternative = check_alternative(alternative)
    alpha, power = check_rates(alpha, power)
    mask = _tail_indices(tail, p.size)
    p_t = float(p[mask].sum())
    if not 0.0 < p_t < 1.0:
        raise ValueError(f"tail must have probability in (0, 1), got tail mass {p_t!r}")
    counts = as_counts(samples, p.size)
    n = counts.n
    k = int(counts.histogram[mask].sum())
    impossible = counts.out_of_range + int(counts.histogram[p == 0].sum())
    pvalue = 0.0 if impossible else binomial_pvalue(k, n, p_t, alternative)
    return TailResult(
        test=f"tail mass ({alternative})",
        statistic=float(k),
        pvalue=pvalue,
        n=n,
        alpha=alpha,
        power=power,
        min_detectable=_relative(n, p_t, alpha, power, alternative),
        deviation="relative tail-mass deficit" if alternative == "less" else "relative tail-mass shift",
        tail_mass=p_t,
        expected=n * p_t,
        tail_size=int(mask.sum()),
        alternative=alternative,
        impossible=impossible,
    )


def _relative(n: int, p_t: float, alpha: float, power: float, alternative: str) -> float:
    down, up = detectable_shifts(n, p_t, alpha, power, alternative)
    vals = [x / p_t for x in (down, up) if not math.isnan(x)]
    return max(vals)


def min_detectable_tail_deficit(
    n: int, tail_mass: float, *, alpha: float = 1e-6, power: float = 0.99, alternative: str = "less"
) -> float:
    """Smallest relative tail deficit ``r`` (``q_T = p_T (1 - r)``) that :func:`tail_mass_test` detects.

    Exact (binomial); ``ValueError`` when even full starvation is not detectable at this ``n``.
    """
    n = check_int(n, "n")
    p_t = check_fraction(tail_mass, "tail_mass", inclusive_upper=False)
    alpha, power = check_rates(alpha, power)
    return detectable(_relative(n, p_t, alpha, power, check_alternative(alternative)), f"n={n}", "the tail test")


def required_tail_samples(
    deficit: float, tail_mass: float, *, alpha: float = 1e-6, power: float = 0.99, alternative: str = "less"
) -> int:
    """Draws for :func:`tail_mass_test` to detect a relative tail deficit ``deficit`` with ``power``.

    ``deficit = 1`` (full starvation) needs about ``log(1/alpha) / tail_mass`` draws.  The returned
    ``n`` satisfies ``min_detectable_tail_deficit(n, tail_mass) <= deficit``.
    """
    p_t = check_fraction(tail_mass, "tail_mass", inclusive_upper=False)
    alpha, power = check_rates(alpha, power)
    r = check_deviation(deficit, "deficit", alpha=alpha, power=power, scale=p_t)
    alternative = check_alternative(alternative)
    return smallest_n(lambda n: _relative(n, p_t, alpha, power, alternative) <= r, what=f"deficit={deficit!r}",
                      limit=BINOMIAL_MAX_SAMPLES)  # fmt: skip


#: Former name of :func:`required_tail_samples` (``notebooks/03_finite_precision.py`` calls it).
tail_required_samples = required_tail_samples
