"""Theorem 9 of end_to_end.md: what the float32 arithmetic of the token noise can cost, rigorously.

A noise implementation is described by its error bins: ``eps[b]`` bounds ``|N(k) - G(k)|`` over every grid point
``k`` whose exact Gumbel value ``G(k)`` lies in bin ``b`` of :data:`~proofs.check_float32_noise.G_EDGES` (bin ``b`` is
``(edges[b - 1], edges[b]]``, as ``np.searchsorted``).  The theorem turns them into a bound on the total variation
between the law of the token with that noise and with exact noise on the same grid (float32 scores and keys in both):

    TV <= 4 c_f psi_hat(H(p)) + 2 V' 2**-64 + 2 V' (V' - 1) 2**-65 TotVar(Phi)

with ``psi(l) = (1 - e**-l) E[eps_hat(l - log Gamma_2)]`` (``Gamma_2`` a Gamma(2, 1) variable), ``psi_hat`` its least
concave majorant on ``[0, inf)`` (non-decreasing), ``H(p)`` the entropy of ``p = softmax(mu)`` in nats (at most
``log V'``), ``eps_hat`` the bins widened by the score's bucket ``h`` and the largest error, and ``c_f`` the most the
Gumbel density can grow across such a window.  Everything here is exact arithmetic on the bins (closed-form Gamma
probabilities) or an upper bound of it; see end_to_end.md, section 2, for the proof.
"""

from __future__ import annotations

import math

import numpy as np

from proofs.check_float32_noise import BIN, G_EDGES

#: Margin added to every bin for the float64 reference values the bins were measured against (``-log(-log x)`` and
#: ``log1p`` in float64: relative error a few ``2**-53``, i.e. below ``1e-14`` absolute for ``|G| <= 46``).
REFERENCE_MARGIN = 1e-13
#: The noise range: every grid point's exact value lies in ``[G_MIN, G_MAX]`` (Proposition 3 of finite_precision.md).
G_MIN = -math.log(65 * math.log(2.0))
G_MAX = -math.log(-math.log1p(-(2.0**-65)))
#: ``|d/dt log f(t)| = |e**-t - 1| <= e**3.82`` on ``t >= -3.82``, ``f`` the Gumbel density.
LOG_DENSITY_SLOPE = math.exp(3.82)


def bins_from_split(arith: np.ndarray, x_rounding: np.ndarray) -> np.ndarray:
    """Error bins of a noise function of the float32 ``x`` from its two parts (finite_precision.md, section 6): the
    arithmetic given ``x`` binned by ``G*(x)`` (``arith``) and the rounding of ``x`` binned by the exact ``G``
    (``x_rounding``).  ``|G*(x) - G| < BIN`` (it is below ``1e-6``), so a grid point's ``G*(x)`` is in its own bin or a
    neighbour: ``eps[b] = max(arith[b - 1 : b + 2]) + x_rounding[b]``."""
    a = np.asarray(arith, dtype=float)
    if np.max(x_rounding) >= BIN:
        raise ValueError("the rounding of x moves G by a bin or more: the split does not hold")
    widened = np.maximum(a, np.maximum(np.r_[0.0, a[:-1]], np.r_[a[1:], 0.0]))
    return widened + np.asarray(x_rounding, dtype=float) + REFERENCE_MARGIN


def widen(eps: np.ndarray, width: float) -> np.ndarray:
    """``eps_hat[b]``: the largest ``eps`` over the bins that meet ``[g - width, g + width]`` for some ``g`` in bin
    ``b`` (a sliding maximum over ``ceil(width / BIN)`` bins on each side)."""
    k = int(math.ceil(width / BIN))
    out = np.asarray(eps, dtype=float).copy()
    for s in range(1, k + 1):
        out[s:] = np.maximum(out[s:], eps[:-s])
        out[:-s] = np.maximum(out[:-s], eps[s:])
    return out


def gamma2_cdf(y: np.ndarray) -> np.ndarray:
    """``P(Gamma_2 <= y) = 1 - (1 + y) e**-y`` (``y >= 0``), computed as ``-expm1(-y) - y e**-y`` for accuracy."""
    y = np.minimum(np.asarray(y, dtype=float), 800.0)  # (beyond, the value is 1 to float64's precision)
    return -np.expm1(-y) - y * np.exp(-y)


def psi_upper(eps_hat: np.ndarray, step: float = BIN, l_max: float = 50.0) -> tuple[np.ndarray, np.ndarray]:
    """``(l_j, U_j)``: ``U_j >= psi(l)`` for every ``l`` in ``[l_j, l_j + step]`` (``step <= BIN``): the expectation
    of the bins shifted by at most one (``l - log Gamma_2`` moves by at most ``step`` across the interval) against the
    exact Gamma(2) probabilities of the bins, times ``1 - e**-(l_j + step)``.  (Beyond ``l_max = 50``, ``psi`` is
    below ``max eps * P(Gamma_2 > e**4.9)``, far below its maximum: the majorant's flat part covers it.)"""
    if step > BIN:
        raise ValueError("step must not exceed the bin width")
    e = np.asarray(eps_hat, dtype=float)
    shifted = np.maximum(e, np.r_[e[1:], 0.0])  # bin b or b + 1
    nz = np.flatnonzero(shifted > 0)
    lo_bin, hi_bin = nz.min(), nz.max()
    # bin b is (padded[b], padded[b + 1]]: the edges that bound the bins lo_bin..hi_bin
    padded = np.r_[-np.inf, G_EDGES, np.inf]
    edges = padded[lo_bin : hi_bin + 2]
    weights = shifted[lo_bin : hi_bin + 1]
    ls = np.arange(0.0, l_max + step / 2, step)
    out = np.empty(ls.size)
    for j0 in range(0, ls.size, 1024):
        with np.errstate(over="ignore"):  # g = l - log G in (lo, hi]  <=>  G in [e**(l - hi), e**(l - lo))
            cdf = gamma2_cdf(np.exp(ls[j0 : j0 + 1024, None] - edges[None, :]))
        out[j0 : j0 + 1024] = (cdf[:, :-1] - cdf[:, 1:]) @ weights
    return ls, out * -np.expm1(-(ls + step))


def upper_concave_hull(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The vertices of the least concave majorant of the points ``(x, y)`` (``x`` ascending), extended flat to the
    right (a bounded concave function on ``[0, inf)`` is non-decreasing)."""
    hull: list[tuple[float, float]] = []
    for p in zip(x.tolist(), y.tolist()):
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (x2 - x1) * (p[1] - y1) >= (p[0] - x1) * (y2 - y1):  # hull[-1] is on or below the chord
                hull.pop()
            else:
                break
        hull.append(p)
    hx, hy = (np.array(v) for v in zip(*hull))
    top = int(np.argmax(hy))
    return hx[: top + 1], hy[: top + 1]


_PSI_CACHE: dict = {}


def psi_hat(eps_hat: np.ndarray, step: float = BIN, l_max: float = 50.0):
    """The least concave majorant of :func:`psi_upper`'s step function, as a callable of the entropy ``H`` (nats)
    (cached by the bins' bytes: the end-to-end tables ask for the same bins many times)."""
    key = (np.asarray(eps_hat, dtype=float).tobytes(), step, l_max)
    if key not in _PSI_CACHE:
        _PSI_CACHE.clear() if len(_PSI_CACHE) > 16 else None
        _PSI_CACHE[key] = _psi_hat(np.asarray(eps_hat, dtype=float), step, l_max)
    return _PSI_CACHE[key]


def _psi_hat(eps_hat: np.ndarray, step: float, l_max: float):
    ls, up = psi_upper(eps_hat, step, l_max)
    x = np.repeat(ls, 2)
    x[1::2] += step
    hx, hy = upper_concave_hull(x, np.repeat(up, 2))

    def at(h):
        return np.interp(np.asarray(h, dtype=float), hx, hy, right=hy[-1])

    return at


def total_variation_of_window(eps_hat: np.ndarray, c_f: float) -> float:
    """An upper bound on the total variation (in ``t``) of ``Phi(t) = 2 c_f eps_hat(t) f(t)`` (plus a constant): the
    jumps of the bins times ``max f = 1/e``, plus ``max eps_hat`` times the total variation of ``f`` (``2/e``)."""
    e = np.asarray(eps_hat, dtype=float)
    jumps = float(np.abs(np.diff(np.r_[0.0, e, 0.0])).sum())
    return 2.0 * c_f * (jumps / math.e + float(e.max()) * 2.0 / math.e)


def noise_bound(eps: np.ndarray, h: float, num_finite: int, entropy: float | None = None, psi=None,
                grid_bits: int = 64) -> dict:  # fmt: skip
    """Theorem 9's bound for noise error bins ``eps`` (:func:`bins_from_split`, or an exhaustive scan's own), float32
    score buckets of width at most ``h``, ``V' = num_finite`` finite logits and a law of entropy ``entropy`` nats
    (``None``: the worst case ``log V'``), on the midpoint grid of ``grid_bits`` bits (64: the generator's; the grid's
    distribution function is within ``2**-(grid_bits + 1)`` of the Gumbel one).  Returns the terms and their sum."""
    eps = np.asarray(eps, dtype=float)
    e_max = float(eps.max())
    width = h + 3.0 * e_max
    eps_hat = widen(eps, width)
    c_f = math.exp(LOG_DENSITY_SLOPE * width)
    psi = psi or psi_hat(eps_hat)
    H = math.log(num_finite) if entropy is None else float(entropy)
    main = 4.0 * c_f * float(psi(H))
    grid = 2.0 * num_finite * 2.0**-grid_bits
    coupling = 2.0 * num_finite * (num_finite - 1) * 2.0 ** -(grid_bits + 1) * total_variation_of_window(eps_hat, c_f)
    return {"eps_max": e_max, "c_f": c_f, "entropy": H, "main": main, "grid": grid, "coupling": coupling,
            "total": main + grid + coupling}  # fmt: skip
