"""The number of draws at which the suite detects a sampler whose exact law is known.

Given the exact law ``q`` of a biased sampler (and, for paired layouts, the joint law of a pair),
:func:`plan_detection` returns, for every test of the suite (:mod:`verification.planning.suite`), the smallest
``n`` at which that test alone rejects with probability ``>= power`` at level ``alpha / m``.  Holm
rejects every hypothesis that Bonferroni (``alpha / m``) rejects, so the family flags the sampler with
at least that power: the suite's ``n`` is the minimum over its tests.  Each test uses its own planning
twin:

* chi-square tests: the noncentrality ``lambda = n chi2(q_b || p_b)`` over the bins that the pooling
  rule forms at ``n`` (the planning module's law with the actual divergence instead of the worst-case
  ``4 tv**2``), ``n`` the smallest with ``lambda >= lambda*(dof, alpha / m, power)``;
* DKWM: the Kolmogorov distance of ``q`` from ``p`` in the test's order, through
  :func:`verification.stats.cdf.required_cdf_samples`;
* per-category: the largest missing category (``required_category_samples``) and the most
  shifted ones (``min_detectable_category_shift``);
* tail and ties: the exact binomial planning of their modules (the side of the two-sided tail test
  that the deviation is on, at ``alpha / (2m)``; the lower-half shift of the tie test);
* pairs: the contingency noncentrality of the joint law coarsened to the rank classes the test forms
  at ``n`` from simulated observed margins (the test ranks categories by observed counts, so
  equally likely ones fall into classes at random), taken at a low quantile over the simulations;
* impossible draws (``q`` puts mass ``e`` on tokens with ``p = 0``): every test fails with p-value 0
  once one occurs, which happens with probability ``>= power`` from ``log(1 - power) / log(1 - e)``
  draws on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..battery.cases import Case
from ..stats._validate import check_rates
from ..stats.binning import DEFAULT_MIN_EXPECTED, equal_mass_buckets, pool_small_bins
from ..stats.binomial import detectable_shifts
from ..stats.categories import min_detectable_category_shift, required_category_samples
from ..stats.cdf import category_order, required_cdf_samples
from ..stats.independence import MAX_BUCKETS
from ..stats.power import chi2_noncentrality, smallest_n
from ..stats.ties import required_tie_samples
from .suite import suite_names

__all__ = ["Detection", "plan_detection"]

#: Simulated observed margins per candidate n when planning the pairs test (see ``_pairs_n``).
_PAIR_PARTITIONS = 400
#: Largest V * V for which the pairs planning simulates observed margins (beyond: exact margins).
_PAIR_MAX_CELLS = 4096

#: Most-shifted categories examined when planning the per-category test (the rest shift less per
#: standard error, so they need more draws).
_CATEGORY_CANDIDATES = 6


@dataclass(frozen=True)
class Detection:
    """Draws at which each suite test detects a known alternative with ``power`` (``inf``: never).

    Attributes
    ----------
    n : dict[str, float]
        Test name -> smallest number of draws (``math.inf`` when the test cannot see the deviation).
    deviation : dict[str, str]
        Test name -> the deviation in that test's own measure, as text.
    alpha, power : float
        Family-wise alpha and target power; ``m`` tests, each planned at ``alpha / m``.
    m : int
    """

    n: dict[str, float]
    deviation: dict[str, str]
    alpha: float
    power: float
    m: int

    @property
    def best(self) -> str:
        """The test needing the fewest draws."""
        return min(self.n, key=lambda k: (self.n[k], k))

    @property
    def n_min(self) -> float:
        """Draws at which the suite flags the alternative with probability ``>= power``."""
        return self.n[self.best]


def _binned(x: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    keep = labels >= 0
    return np.bincount(labels[keep], weights=x[keep], minlength=k)


def _search(pred) -> float:
    try:
        return float(smallest_n(pred))
    except ValueError:
        return math.inf


def _chi2_n(p: np.ndarray, q: np.ndarray, a: float, power: float) -> tuple[float, str]:
    support = p > 0
    full = float(np.sum((q[support] - p[support]) ** 2 / p[support]))
    if full <= 1e-300:
        return math.inf, "none"

    def pred(n: int) -> bool:
        b = pool_small_bins(p, n, DEFAULT_MIN_EXPECTED)
        if b.num_bins < 2:
            return False
        pb = b.bin_probs
        qb = _binned(q, b.labels, b.num_bins)
        lam = n * float(np.sum((qb - pb) ** 2 / pb))
        return lam >= chi2_noncentrality(b.num_bins - 1, a, power)

    n = _search(pred)
    tv = 0.5 * float(np.abs(q[support] - p[support]).sum())
    return n, f"TV {tv:.3g}, chi2 divergence {full:.3g}"


def _cdf_n(p: np.ndarray, q: np.ndarray, order: str, a: float, power: float) -> tuple[float, str]:
    perm = category_order(p, order)
    d = float(np.max(np.abs(np.cumsum((q - p)[perm]))))
    if d <= 1e-15:
        return math.inf, "none"
    return float(required_cdf_samples(min(d, 1.0), alpha=a, power=power)), f"Kolmogorov distance {d:.3g}"


def _category_n(p: np.ndarray, q: np.ndarray, a: float, power: float) -> tuple[float, str]:
    v = p.size
    best, text = math.inf, "none"
    missing = (p > 0) & (q <= 0)
    if missing.any():
        i = int(np.flatnonzero(missing)[np.argmax(p[missing])])
        best = float(required_category_samples(float(p[i]), v, alpha=a))
        text = f"token {i} (p={p[i]:.3g}) never drawn"
    live = (p > 0) & (q > 0) & (p < 1)
    score = np.where(live, np.abs(q - p) / np.sqrt(np.where(live, p, 1.0)), 0.0)
    for i in np.argsort(-score)[:_CATEGORY_CANDIDATES]:
        if score[i] <= 1e-12:
            break
        pi, qi = float(p[i]), float(q[i])

        def pred(n: int, pi=pi, qi=qi) -> bool:
            down, up = min_detectable_category_shift(n, pi, v, alpha=a, power=power)
            return (pi - qi) >= down if qi < pi else (qi - pi) >= up

        n = _search(pred)
        if n < best:
            best, text = n, f"token {int(i)}: q/p = {qi / pi:.3g} (p={pi:.3g})"
    return best, text


def _tail_n(p: np.ndarray, q: np.ndarray, mask: np.ndarray, a: float, power: float) -> tuple[float, str]:
    p_t, q_t = float(p[mask].sum()), float(q[mask].sum())
    if not 0 < p_t < 1 or abs(q_t - p_t) <= 1e-15 * max(p_t, 1e-300) or q_t >= 1:
        return math.inf, "none"
    text = f"tail mass q_T/p_T = {q_t / p_t:.3g} (p_T={p_t:.3g})"
    # One side of the two-sided test (alpha / 2 each) suffices: plan on the side the deviation is on.
    side = 0 if q_t < p_t else 1
    return _search(lambda n: detectable_shifts(n, p_t, a, power, "two-sided")[side] <= abs(q_t - p_t)), text


def _tie_n(p: np.ndarray, q: np.ndarray, support: np.ndarray, a: float, power: float) -> tuple[float, str]:
    s = np.flatnonzero(support)
    m = s.size
    p_l = (m // 2) / m
    q_l = float(q[s[: m // 2]].sum())
    shift = abs(q_l - p_l)
    if shift <= 1e-15:
        return math.inf, "none"
    n = required_tie_samples(min(shift, 0.5), m, alpha=a, power=power)
    return float(n), f"lower-half mass {q_l:.4f} vs {p_l:.4f}"


def _pairs_n(joint: np.ndarray, a: float, power: float) -> tuple[float, str]:
    j = np.asarray(joint, dtype=np.float64)
    j = j / j.sum()
    v = j.shape[0]
    px, py = j.sum(1), j.sum(0)
    full_tv = 0.5 * float(np.abs(j - np.outer(px, py)).sum())
    if full_tv <= 1e-12:
        return math.inf, "none"

    # The test forms its rank classes from the *observed* margins, so near-equal categories fall into
    # classes at random.  Simulate the observed pairs, form the classes the test would, and plan on a
    # low quantile of the noncentrality over those draws: with the per-draw power raised to
    # 1 - (1 - power) / 2 and the (1 - power) / 2 quantile, the power overall stays >= power.
    rng = np.random.default_rng(0)
    flat = j.ravel()
    k = max(1, int(_PAIR_PARTITIONS * (1 - power) / 2))
    power_each = 1 - (1 - power) / 2

    def lam_dof(n_pairs: int) -> tuple[float, int]:
        b = min(v, MAX_BUCKETS, max(2, math.isqrt(int(n_pairs / (4 * DEFAULT_MIN_EXPECTED)))))
        lams, dof = [], 0
        for _ in range(_PAIR_PARTITIONS if v * v <= _PAIR_MAX_CELLS else 1):
            if v * v <= _PAIR_MAX_CELLS:
                obs = rng.multinomial(n_pairs, flat).reshape(v, v)
                ox, oy = obs.sum(1), obs.sum(0)
            else:
                ox, oy = px, py
            lx, ly = equal_mass_buckets(ox, b), equal_mass_buckets(oy, b)
            r, c = int(lx.max()) + 1, int(ly.max()) + 1
            if r < 2 or c < 2:
                return 0.0, 0
            jb = np.eye(r)[lx].T @ j @ np.eye(c)[ly]
            ex = np.outer(jb.sum(1), jb.sum(0))
            lams.append(n_pairs * float(np.sum((jb - ex) ** 2 / ex)))
            dof = (r - 1) * (c - 1)
        return sorted(lams)[min(k, len(lams)) - 1], dof

    def pred(n_pairs: int) -> bool:
        lam, dof = lam_dof(n_pairs)
        return dof >= 1 and lam >= chi2_noncentrality(dof, a, power_each)

    n_pairs = _search(pred)
    return 2 * n_pairs, f"TV from independence {full_tv:.3g}"


def plan_detection(case: Case, law, *, alpha: float = 1e-3, power: float = 0.99, paired: bool = False,
                   joint=None) -> Detection:  # fmt: skip
    """Draws at which each test of the suite on ``case`` detects a sampler whose law is ``law``.

    Parameters
    ----------
    case : Case
        The case (its exact target ``p``).
    law : array_like of float, shape (V,)
        The biased sampler's exact distribution ``q`` over tokens (mass on ``p = 0`` tokens allowed).
    alpha, power : float
        Family-wise false-alarm rate and target power.
    paired : bool
        The sampler's draws are paired (see :func:`run_suite`); needs ``joint``.
    joint : array_like, shape (V, V), optional
        Joint law of a pair (draw ``2j``, draw ``2j + 1``).

    Returns
    -------
    Detection
        Per test, the smallest ``n`` (in draws) at which it alone rejects with probability
        ``>= power`` at level ``alpha / m``; the family's Holm decision then flags the sampler with at
        least that probability.

    Notes
    -----
    Chi-square tests use the noncentral chi-square law (first order, with the planning module's
    safety margin on the miss rate); the binomial and DKWM plans are exact or conservative.  The
    pairs plan uses rank classes of the exact margins (the test uses observed ones).
    """
    alpha, power = check_rates(alpha, power)
    names = suite_names(case, paired=paired)
    a = alpha / len(names)
    p = case.probs
    q = np.clip(np.asarray(law, dtype=np.float64), 0.0, None)
    q = q / q.sum()
    n: dict[str, float] = {}
    dev: dict[str, str] = {}
    imp = float(q[p == 0].sum())
    if imp > 0:
        n["impossible"] = float(math.ceil(math.log1p(-power) / math.log1p(-imp))) if imp < 1 else 1.0
        dev["impossible"] = f"P(impossible draw) = {imp:.3g} per draw"
    live = q * (p > 0)
    q_live = live / live.sum() if live.sum() > 0 else p
    for name in names:
        if name in ("pearson", "g-test"):
            n[name], dev[name] = _chi2_n(p, q_live, a, power)
        elif name == "cdf-index":
            n[name], dev[name] = _cdf_n(p, q, "index", a, power)
        elif name == "cdf-descending":
            n[name], dev[name] = _cdf_n(p, q, "descending", a, power)
        elif name == "categories":
            n[name], dev[name] = _category_n(p, q_live, a, power)
        elif name == "tail":
            n[name], dev[name] = _tail_n(p, q_live, case.tail_mask(), a, power)
        elif name == "ties":
            n[name], dev[name] = _tie_n(p, q, np.isfinite(case.logits), a, power)
        elif joint is not None:
            n[name], dev[name] = _pairs_n(joint, a, power)
        else:
            n[name], dev[name] = math.inf, "no joint law given"
    return Detection(n=n, deviation=dev, alpha=alpha, power=power, m=len(names))
