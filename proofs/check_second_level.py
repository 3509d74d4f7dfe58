"""Second-level draws on the 64-bit grid (finite_precision.md, section 8): the online merge's coin and the group draw
of the grouped, tensor-parallel and tile inverse-CDF samplers, as shipped (``flashsampling.noise``, stream version 2).

Proofs, with their constants computed by a forward error analysis in interval arithmetic over the whole domain (a
bound for every input, not a maximum over samples):

* ``log64_lemma`` (Lemma 8.1): ``log64`` against ``log`` -- relative ``c_0 u`` for ``x`` in ``[sqrt(1/2), sqrt(2))``,
  else ``u (|log x| + c_1)``, ``u = 2**-53``;
* ``exp64_lemma`` (Lemma 8.2): ``exp_neg64(a)`` against ``e**-a``, relative ``c_e u`` on ``[0, 64]``;
* ``gumbel64_lemma`` (Lemma 8.3): the float64 exponential of the group noise, relative ``c_E u``, and its Gumbel,
  ``|G64 - G| <= u (A + B |G|)`` at every grid point; with it ``D_G64``, the Kolmogorov distance of the float64 group
  noise to the Gumbel law, and the group draw's bound ``K / 2**64 + 2 K D_G64``;
* ``coin_theta`` and ``coin_counts`` (Theorem 8.4): the merge coin takes with probability ``P = K(q') / 2**64``, ``q'``
  its float64 probability, and ``|P - q| <= 2**-65 + min(q, 1 - q) (theta + 1.0001 u |L - L_C|)``.

Checks of the shipped code (each fails on a planted defect, ``tests/proofs/test_second_level.py``):

* ``constants_ok``: the shipped constants are the float64 roundings of the design's reals (the lemmas assume it);
* ``float64_spot_checks``: the shipped twins against 40-digit values on edge and random inputs, within the lemmas'
  bounds (a consistency check of the proofs; shortened polynomials exceed them);
* ``coin_counts``: for pairs of log-masses (the issue's thresholds ``t = L_new - L_C``, random, edge), the shipped
  ``merge_coin_np``'s take set, located at ``k = K - 1`` and ``K``, is ``[0, K)`` with ``K = ceil(2**64 q' - 1/2)`` in
  exact rationals, and ``|K / 2**64 - q|`` (``q`` in 50 digits) is within Theorem 8.4's bound; planted: the float64
  shortcut ``ceil(y - 1/2)`` (a count off by one) and the version-1 coin, a float32 exponential against a float64
  log-ratio, counted exactly over all ``2**64`` grid points (``coin_probability``; ``3.6e-8`` off at ``t = 1``).

Kept for the token noise (section 6 and Theorem 7 use them): ``kolmogorov_bounds`` (``D_E``, ``D_G`` of the float32
noise from the exhaustive scan's error bins), ``first_order_tv_exhaustive``; and ``logmass_example`` (section 8.3).
"""

from __future__ import annotations

import contextlib
import math
import sys
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np

if __package__ in (None, ""):  # run as `python proofs/check_second_level.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import flashsampling.noise as noise  # noqa: E402
from flashsampling.noise import exponential_from_bits_np  # noqa: E402
from proofs.check_float32_noise import (  # noqa: E402
    BRUTE_LIMIT,
    E_EDGES,
    G_EDGES,
    _first_at_least,
    adversarial_keys,
    first_order_tv_exhaustive,
    load_scan,
    log_uniform_keys,
    random_keys,
    side_words,
    side_x,
    split_words,
)

M64 = 2**64

# ----------------------------------------------------------------------------------------------
# The version-1 coin (a planted defect now): a float32 exponential against a float64 threshold, counted exactly
# ----------------------------------------------------------------------------------------------

#: Half-width, in float32 spacings of ``t``, of the window around a threshold evaluated class by class: every grid
#: point outside it is on the same side of ``t`` with the float32 ``E`` as with the exact one, because the scan
#: bounds the error of ``E`` by 4.05 spacings (``coin_probability`` also checks the window's edges).
MARGIN_ULPS = 64
#: Thresholds of :func:`coin_profile` (nats): where a merge's ``q = e^-t`` lives (``t = L_new - L_C >= 0``).
COIN_THRESHOLDS = tuple(float(x) for x in np.concatenate([[1e-6, 1e-4, 0.01, 0.1, 0.3, 0.5, 0.6931, 0.7],
                                                           np.arange(1.0, 44.5, 0.5)]))  # fmt: skip


def _spacing(t: float) -> float:
    return float(np.spacing(np.float32(max(abs(t), 2.0**-126))))


def _count_side(t: float, top: int, exp_fn) -> int:
    """``#{c in [0, 2**63) : float64(E(c, top)) > t}`` for the grid points of one side (``c`` the side integer)."""
    delta = MARGIN_ULPS * _spacing(t)
    half = M64 // 2
    with mpmath.workdps(40):
        t_hi, t_lo = mpmath.mpf(t) + delta, max(mpmath.mpf(t) - delta, mpmath.mpf(0))

        def c_at(e):  # largest c whose exact E is >= e (side 0: E decreasing in c) / smallest c with E >= e (side 1)
            if top == 0:
                return int(mpmath.floor(M64 * mpmath.exp(-e) - mpmath.mpf(0.5)))
            return int(mpmath.ceil(-M64 * mpmath.expm1(-e) - mpmath.mpf(0.5)))

        if top == 0:  # E = -log((c + 1/2) 2**-64), decreasing in c: c < lo surely above t, c > hi surely below
            lo, hi = c_at(t_hi) - 1, c_at(t_lo) + 1
            if hi < 0 or lo >= half:
                return 0 if hi < 0 else half
        else:  # E = -log1p(-(c + 1/2) 2**-64), increasing in c: c < lo surely below t, c > hi surely above
            lo, hi = c_at(t_lo) - 1, c_at(t_hi) + 1
            if lo >= half:
                return 0
    lo, hi = max(lo, 0), min(hi, half - 1)
    above = _count_window(t, top, lo, hi, exp_fn)
    outside = lo if top == 0 else half - 1 - hi
    for c_edge, expect, clipped in ((lo, top == 0, lo == 0), (hi, top == 1, hi == half - 1)):
        w0, w1 = side_words(np.array([c_edge], dtype=np.uint64), top)
        if not clipped and bool(exp_fn(w0, w1).astype(np.float64)[0] > t) != expect:
            raise ArithmeticError(f"coin window too narrow at t={t}: widen MARGIN_ULPS")
    return outside + above


def _count_window(t: float, top: int, lo: int, hi: int, exp_fn) -> int:
    """Grid points ``c`` in ``[lo, hi]`` of side ``top`` whose float32 ``E`` exceeds ``t``, class by class."""
    if hi - lo < (1 << 16) or hi < BRUTE_LIMIT:  # few enough to evaluate one by one
        total = 0
        for a in range(lo, hi + 1, 1 << 20):
            c = np.arange(a, min(hi, a + (1 << 20) - 1) + 1, dtype=np.uint64)
            w0, w1 = side_words(c, top)
            total += int(np.count_nonzero(exp_fn(w0, w1).astype(np.float64) > t))
        return total
    c_lo, c_hi = np.uint64(lo), np.uint64(hi)
    v = side_x(np.array([lo], dtype=np.uint64))[0]
    v_end = side_x(np.array([hi], dtype=np.uint64))[0]
    values = [v]
    while values[-1] < v_end:
        values.append(np.nextafter(values[-1], np.float32(1)))
    v = np.array(values[1:], dtype=np.float32)  # class starts after the first (which starts at lo)
    n = v.size
    starts = _first_at_least(v, np.full(n, c_lo), np.full(n, c_hi))
    starts = np.concatenate([[c_lo], starts])
    ends = np.concatenate([starts[1:] - np.uint64(1), [c_hi]])
    keep = ends >= starts
    starts, ends = starts[keep], ends[keep]
    total = 0
    for cs in (starts, ends):  # the float32 E is constant on a class (checked at both ends)
        w0, w1 = side_words(cs, top)
        e = exp_fn(w0, w1).astype(np.float64)
        if cs is starts:
            e_start = e
        elif not np.array_equal(e, e_start):
            raise ArithmeticError("E differs at the two ends of a class of equal x")
    sizes = (ends - starts).astype(object) + 1
    for s, e in zip(sizes, e_start):
        if e > t:
            total += int(s)
    return total


def coin_probability(t: float, exp_fn=exponential_from_bits_np) -> Fraction:
    """The exact ``P(float64(E) > t)`` over the ``2**64`` grid points, ``E = exp_fn(w0, w1)`` (the version-1 coin with
    the float32 exponential of ``flashsampling.noise``, or a planted one)."""
    if t < 0:
        return Fraction(1)
    return Fraction(_count_side(t, 0, exp_fn) + _count_side(t, 1, exp_fn), M64)


def coin_error(t: float, exp_fn=exponential_from_bits_np) -> tuple[float, float]:
    """``(P - q, (P - q) / q)`` for the version-1 coin at threshold ``t``, ``q = e^-t``, in 40-digit arithmetic."""
    p = coin_probability(t, exp_fn)
    with mpmath.workdps(40):
        q = mpmath.exp(-mpmath.mpf(t))
        d = mpmath.mpf(p.numerator) / p.denominator - q
        return float(d), float(d / q)


def coin_profile(thresholds=COIN_THRESHOLDS, exp_fn=exponential_from_bits_np) -> dict:
    """The exact coin error at each threshold: the largest absolute (a merge's total variation) and relative one."""
    rows = [(t, *coin_error(t, exp_fn)) for t in thresholds]
    i = max(range(len(rows)), key=lambda j: abs(rows[j][1]))
    r = max(range(len(rows)), key=lambda j: abs(rows[j][2]))
    return {"rows": [list(x) for x in rows], "max_abs": abs(rows[i][1]), "max_abs_t": rows[i][0],
            "max_rel": abs(rows[r][2]), "max_rel_t": rows[r][0]}  # fmt: skip


def twenty_four_bit_exponential(w0: np.ndarray, w1: np.ndarray) -> np.ndarray:
    """A planted defect: ``E = -log(U)`` from a 24-bit uniform ``(k >> 40 + 1/2) 2**-24`` (float32), the resolution of
    a float32 uniform.  Its coin never takes when ``t`` exceeds ``24 log 2 + 0.7 = 17.3``."""
    u = ((w1 >> np.uint32(8)).astype(np.float64) + 0.5) * 2.0**-24
    return (-np.log(u)).astype(np.float32)


# ----------------------------------------------------------------------------------------------
# Bounds from the exhaustive scan
# ----------------------------------------------------------------------------------------------


def _gumbel_cdf(g):
    return np.exp(-np.exp(-np.asarray(g, dtype=np.float64)))


def kolmogorov_bounds(scan: dict) -> dict:
    """Rigorous bounds on ``D_E = sup_t |P(E_twin > t) - e^-t|`` and ``D_G = sup_g |P(G_twin <= g) - F(g)|``.

    For any ``t``, the grid points whose float32 ``E`` and exact ``E`` lie on different sides of ``t`` have their
    exact ``E`` within ``eps`` of ``t``, ``eps`` the scan's largest absolute error in the bins around ``t``; so
    ``|P(E_twin > t) - P(E_grid > t)| <= P(E_grid in [t - eps, t + eps]) <= 2 eps max f + 2**-63`` (``f`` the density
    on ``[t - eps, t + eps]``; the two end cells), and ``|P(E_grid > t) - e^-t| <= 2**-65`` (the midpoint grid).  The
    same with the Gumbel law for ``G``.  The max over ``t`` is taken bin by bin (bins of 0.01; each bin's ``eps`` is
    the max over it and its two neighbours, ``f``'s max over the bin widened by ``eps``)."""

    def exp_density_max(a, b):
        return np.exp(-np.maximum(a, 0.0))

    def gumbel_density_max(a, b):
        f = lambda g: np.exp(-g - np.exp(-g))  # noqa: E731
        return np.where((a <= 0) & (b >= 0), math.exp(-1.0), np.maximum(f(a), f(b)))

    out = {}
    for name, edges, key, dens in (("E", E_EDGES, "e_abs_by_bin", exp_density_max),
                                   ("G", G_EDGES, "g_abs_by_bin", gumbel_density_max)):  # fmt: skip
        eps = np.asarray(scan[key])[1:-1]  # bins between consecutive edges (the outer two hold nothing)
        eps = np.maximum(eps, np.maximum(np.concatenate([[0.0], eps[:-1]]), np.concatenate([eps[1:], [0.0]])))
        bound = 2 * eps * dens(edges[:-1] - eps, edges[1:] + eps) + 2.0**-63 + 2.0**-65
        i = int(np.argmax(bound))
        out[f"D_{name}"] = float(bound[i])
        out[f"D_{name}_at"] = float(edges[i])
    return out


def logmass_example(v: int = 4096, block_v: int = 128, temperature: float = 0.7, seed: int = 3) -> dict:
    """The group log-masses as the shipped stage 1 computes them
    (``flashsampling.grouped.grouped_partials_from_logits``: float32 per tile; interpreted on a CPU), against
    30-digit ``logsumexp`` of the same float32 scaled logits, for a row of ``N(0, 2^2)`` logits: the largest error,
    the exact total variation of the group-choice law ``softmax(L_hat)`` to ``softmax(L)``, and Lemma 5's bound
    ``tanh(eps / 2)`` with the library's worst-case ``logmass_tolerance``."""
    import torch

    from flashsampling._request import GIVEN_LOGITS, new_request
    from flashsampling.grouped import grouped_partials_from_logits, logmass_tolerance
    from flashsampling.twin import inverse_temperature32

    rng = np.random.default_rng(seed)
    z = (rng.standard_normal(v) * 2.0).astype(np.float32)
    inv = inverse_temperature32(temperature, 1)
    logits = torch.from_numpy(z[None, :])
    request = new_request(temperature, 1, 1, 1, logits.device, host_checks=True, what=GIVEN_LOGITS)
    parts = grouped_partials_from_logits(request, logits, block_v=block_v)
    l_hat = parts.logmass[0].double().numpy()
    mu = (z * inv[0]).astype(np.float32).astype(np.float64)
    with mpmath.workdps(30):
        exact = []
        for a in range(0, v, block_v):
            exact.append(float(mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(x)) for x in mu[a : a + block_v]))))
    exact = np.array(exact)
    p_hat = np.exp(l_hat - l_hat.max()) / np.exp(l_hat - l_hat.max()).sum()
    p = np.exp(exact - exact.max()) / np.exp(exact - exact.max()).sum()
    tol = logmass_tolerance(float(np.abs(mu).max()), block_v)
    return {"v": v, "block_v": block_v, "max_abs_error": float(np.abs(l_hat - exact).max()),
            "tv": 0.5 * float(np.abs(p_hat - p).sum()), "tolerance": tol, "tv_bound": math.tanh(tol / 2)}  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Forward error analysis in interval arithmetic (Lemmas 8.1-8.3)
# ----------------------------------------------------------------------------------------------

iv = mpmath.iv
iv.dps = 40
#: The unit roundoff of float64.
U64 = iv.mpf(2) ** -53


class Val:
    """A float64 quantity of the analysis: ``r`` encloses the exact value of the ideal computation (real arithmetic,
    exact constants), ``e`` bounds ``|computed - exact|``.  A rounded operation adds at most ``u |computed|`` with
    ``|computed| <= max |exact| + e`` (round to nearest; every quantity of these computations is 0 or between
    ``2**-200`` and ``2**70``, far from underflow and overflow)."""

    __slots__ = ("r", "e")

    def __init__(self, r, e=0):
        self.r = iv.mpf(r)
        self.e = iv.mpf(e)

    def mag(self):
        """An upper bound of ``|exact|``."""
        return iv.mpf(max(abs(self.r.a), abs(self.r.b)))

    def mig(self):
        """A lower bound of ``|exact|``."""
        if self.r.a <= 0 <= self.r.b:
            return iv.mpf(0)
        return iv.mpf(min(abs(self.r.a), abs(self.r.b)))


def _rounded(r, e, exact: bool) -> Val:
    v = Val(r, e)
    if not exact:
        v.e = iv.mpf((v.e + U64 * (v.mag() + v.e)).b)
    return v


def v_add(a: Val, b: Val, exact: bool = False) -> Val:
    return _rounded(a.r + b.r, a.e + b.e, exact)


def v_sub(a: Val, b: Val, exact: bool = False) -> Val:
    return _rounded(a.r - b.r, a.e + b.e, exact)


def v_mul(a: Val, b: Val, exact: bool = False) -> Val:
    return _rounded(a.r * b.r, a.mag() * b.e + b.mag() * a.e + a.e * b.e, exact)


def v_div(a: Val, b: Val) -> Val:
    lo = b.mig()
    if not lo > 2 * b.e:
        raise ArithmeticError("the divisor's range reaches 0")
    return _rounded(a.r / b.r, (a.e * b.mag() + a.mag() * b.e) / (lo * (lo - b.e)), False)


def v_const(computed: float, exact) -> Val:
    """The float64 constant ``computed`` standing for the real ``exact``."""
    exact = iv.mpf(exact)
    return Val(exact, iv.mpf(max(abs(exact.a - computed), abs(exact.b - computed))))


def v_horner(x: Val, computed, exact) -> Val:
    """Horner's rule in ``x`` with the float64 coefficients ``computed`` standing for the reals ``exact`` (``c_0``
    first), every product and every sum rounded, as ``log64_np`` and ``exp_neg64_np`` evaluate it."""
    p = v_const(computed[-1], exact[-1])
    for c, c_exact in zip(computed[-2::-1], exact[-2::-1]):
        p = v_add(v_mul(p, x), v_const(c, c_exact))
    return p


def _up(x) -> float:
    """``x`` (an interval or a real) as a float64 at or above its upper end."""
    hi = iv.mpf(x).b
    f = float(hi)
    return f if f >= hi else math.nextafter(f, math.inf)


#: The design's coefficients as exact reals: ``2 / (2j + 1)`` (``log64``), ``1 / j!`` (``exp_neg64``).
LOG64_EXACT = tuple(iv.mpf(2) / (2 * j + 1) for j in range(1, 11))
EXP64_EXACT = tuple(iv.mpf(1) / math.factorial(j) for j in range(14))
LN2 = iv.log(2)
#: The range of ``f = m - 1`` in ``log64``: ``m`` from the float64 ``sqrt(1/2)`` (above the real one) to below
#: ``sqrt(2)``; the smallest non-zero ``|f|`` is ``2**-53`` (the spacing of ``m`` below 1).
F_MIN, F_MAX, F_TINY = 0.7071067811865476 - 1.0, math.sqrt(2.0) - 1.0 + 2.0**-52, 2.0**-53
#: The exponents ``e`` of the arguments ``log64`` gets: ``x`` in ``[2**-66, 46]``.
LOG64_EXPONENTS = range(-66, 7)


def constants_ok(mod=noise) -> dict[str, bool]:
    """The shipped constants are the float64 roundings of the design's reals, which the lemmas assume."""
    with mpmath.workdps(60):
        ln2 = mpmath.log(2)
        hi, lo = mod.LN2_HI, mod.LN2_LO
        return {
            "LOG64_COEFFS = fl(2 / (2j + 1)), j = 1..10": tuple(mod.LOG64_COEFFS)
            == tuple(float(mpmath.mpf(2) / (2 * j + 1)) for j in range(1, 11)),
            "EXP64_COEFFS = fl(1 / j!), j = 0..13": tuple(mod.EXP64_COEFFS)
            == tuple(float(1 / mpmath.factorial(j)) for j in range(14)),
            "LN2_HI has at most 32 significant bits": hi == math.ldexp(round(math.ldexp(hi, 32)), -32),
            "LN2_LO = fl(ln 2 - LN2_HI)": lo == float(ln2 - hi),
            "INV_LN2 = fl(1 / ln 2)": mod.INV_LN2 == float(1 / ln2),
            "EXP64_CLAMP = 64": mod.EXP64_CLAMP == 64.0,
        }  # fmt: skip


def f_pieces(split: int = 4) -> list[tuple[float, float]]:
    """Pieces covering every non-zero ``f`` of ``log64``: the binades of ``|f|`` from ``2**-54`` to ``F_MAX`` (each
    split geometrically in ``split``), both signs, as ``(lo, hi)`` with ``lo < hi``."""
    out = []
    for sign, top in ((1.0, F_MAX), (-1.0, -F_MIN)):
        for j in range(1, 55):
            a, b = 2.0 ** -(j + 1), min(2.0**-j, top)
            if a >= b:
                continue
            edges = [a * (b / a) ** (i / split) for i in range(split)] + [b]
            for u0, u1 in zip(edges[:-1], edges[1:]):
                out.append((u0, u1) if sign > 0 else (-u1, -u0))
    return out


def log1p_piece(f_lo: float, f_hi: float, coeffs=noise.LOG64_COEFFS) -> Val:
    """``log1p(f)`` as ``log64`` computes it, for ``f`` in ``[f_lo, f_hi]`` (exact, not containing 0): ``s = f / (2 +
    f)``, ``z = s**2``, ``R = z P(z)``, ``f - s (f - R)``, every operation rounded; ``r`` encloses the true
    ``log1p(f)``, ``e`` adds the Taylor remainder ``|s| sum_{j>10} 2 z**j / (2j + 1) <= |s| 2 z**11 / (23 (1 - z))``
    to the arithmetic."""
    f = Val(iv.mpf([f_lo, f_hi]))
    s = v_div(f, v_add(f, Val(2)))
    z = v_mul(s, s)
    r = v_mul(v_horner(z, coeffs, LOG64_EXACT[: len(coeffs)]), z)
    out = v_sub(f, v_mul(s, v_sub(f, r)))
    s_max, z_max = s.mag(), z.mag()
    terms = len(coeffs)
    tail = s_max * 2 * z_max ** (terms + 1) / ((2 * terms + 3) * (1 - z_max))
    return Val(iv.mpf([iv.log(1 + iv.mpf(f_lo)).a, iv.log(1 + iv.mpf(f_hi)).b]), iv.mpf((out.e + tail).b))


def log64_lemma(split: int = 4, coeffs=noise.LOG64_COEFFS) -> dict:
    """Lemma 8.1: ``|log64(x) - log x| <= c_0 u |log x|`` for ``x`` in ``[sqrt(1/2), sqrt(2))`` (``e = 0``, where
    ``log64`` returns ``log1p(f)`` itself: 0 at ``x = 1``) and ``<= u (|log x| + c_1)`` for the other ``x`` in
    ``[2**-66, 46]``.

    ``e != 0``: ``log64 = fl(e LN2_HI + t)``, ``t = fl(fl(e LN2_LO) + log1p(f))`` standing for ``e (ln 2 - LN2_HI) +
    log1p(f)``; ``e LN2_HI`` is exact (32 bits times 7), so ``|log64 - log x| <= u (|log x| + err_t) + err_t`` with
    ``err_t`` bounded for ``|e| <= 66`` at once: ``c_1 = max err_t (1 + u) / u``.  ``c0_within``: the largest relative
    bound over the pieces with ``|f|`` at most each binade's top (Lemma 8.3 uses it near ``x = 1``)."""
    lo_c = v_const(noise.LN2_LO, LN2 - noise.LN2_HI)
    lo = v_mul(Val(iv.mpf([-66, 66])), lo_c)
    c0 = iv.mpf(0)
    c1 = iv.mpf(0)
    by_top: dict[float, float] = {}
    pieces = f_pieces(split)
    for a, b in pieces:
        v = log1p_piece(a, b, coeffs)
        rel = iv.mpf((v.e / (v.mig() * U64)).b)
        c0 = max(c0, rel, key=lambda t: t.b)
        top = max(abs(a), abs(b))
        by_top[top] = max(by_top.get(top, 0.0), _up(rel))
        c1 = max(c1, iv.mpf((v_add(lo, v).e * (1 + U64) / U64).b), key=lambda t: t.b)
    c1 = max(c1, iv.mpf((v_add(lo, Val(0)).e * (1 + U64) / U64).b), key=lambda t: t.b)  # f = 0
    within, run = [], 0.0
    for top in sorted(by_top):
        run = max(run, by_top[top])
        within.append([top, run])
    return {"c0": _up(c0), "c1": _up(c1), "pieces": len(pieces), "c0_within": within}


def c0_within(lem_log: dict, f_abs) -> float:
    """Lemma 8.1's relative constant over the ``f`` with ``|f| <= f_abs``."""
    for top, c in lem_log["c0_within"]:
        if top >= f_abs:
            return c
    return lem_log["c0"]


#: ``|x| <= ln(2) / 2 + X_SLACK`` for ``x = n ln 2 - a`` of ``exp_neg64`` (``n = rint(fl(a INV_LN2))``,
#: ``|fl(a INV_LN2) - a / ln 2| <= 93 * 1.5 u``).
X_SLACK = 2.0**-40


def exp64_lemma(pieces: int = 32, coeffs=noise.EXP64_COEFFS) -> dict:
    """Lemma 8.2: ``c_e`` with ``|exp_neg64(a) / e**-a - 1| <= c_e u`` for ``a`` in ``[0, 64]``.

    ``x = fl(fl(n LN2_HI - a) + fl(n LN2_LO))`` stands for ``n ln 2 - a``: the first difference is exact (Sterbenz:
    ``a`` in ``[(n - 1/2) ln 2 - X_SLACK, (n + 1/2) ln 2 + X_SLACK]`` lies in ``[n LN2_HI / 2, 2 n LN2_HI]``, checked
    for ``n = 1 .. 93``), the product by ``LN2_LO`` and the sum are rounded, and ``LN2_LO`` stands for
    ``ln 2 - LN2_HI``; the worst ``n = 93`` bounds the error of ``x`` for all.  Then Horner's rule on ``x``, the Taylor
    remainder ``|x|**14 / 14! e**|x|``, relative to ``e**x``; ``2**-n`` is exact."""
    sterbenz = all(
        iv.mpf(n) * noise.LN2_HI / 2 <= (n - iv.mpf(0.5)) * LN2 - X_SLACK
        and (n + iv.mpf(0.5)) * LN2 + X_SLACK <= 2 * n * iv.mpf(noise.LN2_HI)
        for n in range(1, 94)
    )
    x_max = LN2 / 2 + X_SLACK
    n_lo = v_mul(Val(93), v_const(noise.LN2_LO, LN2 - noise.LN2_HI))
    x_err = v_add(Val(iv.mpf([-x_max.b, x_max.b])), n_lo).e
    c = iv.mpf(0)
    edges = [-x_max.b + 2 * x_max.b * i / pieces for i in range(pieces + 1)]
    terms = len(coeffs)
    for a, b in zip(edges[:-1], edges[1:]):
        x = Val(iv.mpf([a, b]), x_err)
        p = v_horner(x, coeffs, EXP64_EXACT[:terms])
        xm = x.mag() + x_err
        tail = xm**terms / math.factorial(terms) * iv.exp(xm)
        c = max(c, iv.mpf(((p.e + tail) / (iv.exp(iv.mpf(a) - x_err) * U64)).b), key=lambda t: t.b)
    return {"c_exp": _up(c), "sterbenz": bool(sterbenz), "x_err_units": _up(x_err / U64)}


def gumbel64_lemma(lem_log: dict, split: int = 4) -> dict:
    """Lemma 8.3: ``c_E`` with ``|E64 / E - 1| <= c_E u`` at every grid point (``E = -log U`` exact), and ``A``, ``B``
    with ``|G64 - G| <= u (A + B |G|)``, from Lemma 8.1; with them ``D_G64`` (:func:`d_g64`).

    ``x = U`` or ``1 - U`` in ``[2**-65, 1/2]``, rounded once (``x' = x (1 + d)``, ``|d| <= u``), by pieces of its
    binades.  Top bit 0: ``E = -log x``, ``|E64 - E| <= u (1 + u) + u (|log x'| + c_1)`` (``x' <= 1/2``: ``e <= -1``).
    Top bit 1: ``E = -log(1 - x)``; ``x <= 2**-54`` gives ``y = 1`` and ``E64 = x'`` (relative ``u + x``); otherwise
    ``y = fl(1 - x')``, ``d = (1 - y) - x'`` exact, ``|d| <= 2**-54``, ``t = d / y``: the change from ``x`` to ``x'``
    (``u x / (1 - x')``), ``log1p(t) - t`` (``<= 2**-107 / (1 - 2**-53)``), ``log64(y)`` (Lemma 8.1, ``c_0`` over
    ``|f| <= 1 - y``), ``fl(t)`` (``u |d| / y``), and the final sum (``u`` times the sum's size: ``E(x') + 2**-107``
    plus the errors before it).  Then ``G64 = -log64(E64)``: ``|G64 - G| <= -log(1 - c_E u) + B u |log E64| + c_1 u``
    with ``B = max(c_0, 1)``, and ``|log E64| <= |G| - log(1 - c_E u)``."""
    u = U64
    c0, c1 = lem_log["c0"], lem_log["c1"]
    c_e = iv.mpf(0)
    two54 = iv.mpf(2) ** -54
    for j in range(1, 66):  # x in [2**-(j+1), 2**-j]: j = 1, [1/4, 1/2]; j = 65, [2**-66, 2**-65] (x >= 2**-65)
        a0, b0 = 2.0 ** -(j + 1), 2.0**-j
        edges = [a0 * (b0 / a0) ** (i / split) for i in range(split)] + [b0]
        for a, b in zip(edges[:-1], edges[1:]):
            x = iv.mpf([a, b])
            # top bit 0: E = -log x
            err0 = u * (1 + u) + u * (-iv.log(x.a * (1 - u)) + c1)
            c_e = max(c_e, iv.mpf((err0 / (-iv.log(x.b) * u)).b), key=lambda t: t.b)
            # top bit 1: E = -log(1 - x)
            e1_min = -iv.log(1 - x.a)
            if b <= 2.0**-54:
                rel1 = u + x.b
            else:
                xp_hi = x.b * (1 + u)
                y_min = 1 - xp_hi - two54
                log_y = -iv.log(y_min)
                if y_min >= iv.mpf(0.7071067811865476):
                    err_log = c0_within(lem_log, _up(1 - y_min)) * u * log_y
                else:
                    err_log = max(c0 * u * log_y, u * (log_y + c1), key=lambda t: t.b)
                before = u * xp_hi / (1 - xp_hi) + iv.mpf(2) ** -107 / (1 - u) + err_log + u * two54 / y_min
                e1_max = -iv.log(1 - xp_hi)
                rel1 = (before + u * (e1_max + before)) / e1_min
            c_e = max(c_e, iv.mpf((iv.mpf(rel1) / u).b), key=lambda t: t.b)
    c_e_f = _up(c_e)
    B = max(c0, 1.0)
    A = _up(-iv.log(1 - c_e_f * u) / u * (1 + B * u) + c1)
    return {"c_E": c_e_f, "A": A, "B": B, "D_G64": d_g64(A, B)}


def d_g64(A: float, B: float) -> float:
    """``D_G64 <= sup_g P(G_grid within delta_g of g) + 2**-65 <= sup_g 2 delta_g max_window f + 2**-63 + 2**-65``
    with ``delta_g = u (A + B (|g| + delta))`` (Lemma 8.3 at the grid points near ``g``): the Gumbel density ``f`` and
    ``|g| f(g)`` are at most ``1/e``, ``|f'| <= 1``, and only ``|g| <= 46`` has grid points in its window, so with
    ``delta`` the largest ``delta_g`` and ``eta = u B delta``, ``D_G64 <= 2 u (A + B) / e + 2 u (A + 46 B) delta + 2
    eta (1 + delta) + 2**-63 + 2**-65``."""
    u = U64
    delta = u * (A + 47 * B)  # the largest delta(g) (|g| <= 46, delta itself far below 1)
    eta = u * B * delta
    bound = 2 * u * (A + B) / iv.e + 2 * u * (A + 46 * B) * delta + 2 * eta * (1 + delta)
    return _up(bound + iv.mpf(2) ** -63 + iv.mpf(2) ** -65)


def group_draw_bound64(d_g64_: float, groups: int) -> float:
    """The group draw over ``groups`` groups with the float64 noise: ``K / 2**64 + 2 K D_G64`` (Theorem 2b: the grid,
    then one group at a time, the float64 score ``L_k + G_k`` non-decreasing in ``G_k``)."""
    return _up(iv.mpf(groups) / iv.mpf(2) ** 64 + 2 * groups * iv.mpf(d_g64_))


def coin_theta(c_exp: float) -> float:
    """``theta`` of Theorem 8.4: ``m' = e' / (1 + e')`` (``e'`` within ``c_e u`` of ``e**-a``, two roundings) is
    within a relative ``(1 + c_e u)(1 + u) / (1 - u) - 1`` of ``e**-a / (1 + e**-a)``."""
    u = U64
    return _up((1 + c_exp * u) * (1 + u) / (1 - u) - 1)


def lemmas(split: int = 4) -> dict:
    """Lemmas 8.1-8.3 and Theorem 8.4's ``theta``: every constant the section quotes."""
    lg = log64_lemma(split)
    ex = exp64_lemma()
    gb = gumbel64_lemma(lg, split)
    return {"log64": lg, "exp64": ex, "gumbel64": gb, "theta": coin_theta(ex["c_exp"]),
            "group_bounds": {str(k): group_draw_bound64(gb["D_G64"], k) for k in GROUP_COUNTS}}  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Spot checks of the shipped twins against 40-digit values (consistency of the proofs with the code)
# ----------------------------------------------------------------------------------------------


def _exact_words(w0: np.ndarray, w1: np.ndarray) -> list[tuple]:
    out = []
    with mpmath.workdps(40):
        for a, b in zip(w0.tolist(), w1.tolist()):
            e = -mpmath.log((mpmath.mpf((b << 32) | a) + mpmath.mpf(0.5)) / mpmath.mpf(2) ** 64)  # (exact U: 66 bits)
            out.append((e, -mpmath.log(e)))
    return out


def float64_spot_checks(lem: dict, n: int = 1500, seed: int = 5, log_fn=None, exp_fn=None) -> dict:
    """The shipped ``log64_np``, ``exp_neg64_np``, ``exponential64_from_bits_np`` and ``gumbel64_from_bits_np`` on
    edge and random inputs against 40-digit values: the largest ratio of each error to its lemma's bound (at most 1 if
    the code is what the lemmas analyse).  ``log_fn``, ``exp_fn``: planted replacements of ``log64_np``,
    ``exp_neg64_np``."""
    log_fn = log_fn or noise.log64_np
    exp_fn = exp_fn or noise.exp_neg64_np
    u = 2.0**-53
    c0, c1 = lem["log64"]["c0"], lem["log64"]["c1"]
    rng = np.random.default_rng(seed)
    edges = [1.0, 0.7071067811865476, math.sqrt(2.0), 0.5, 2.0**-66, 46.0, 1 + 2.0**-52, 1 - 2.0**-53]
    x = np.concatenate([np.exp(rng.uniform(math.log(2.0**-66), math.log(46.0), n)), 1 + rng.uniform(F_MIN, F_MAX, n),
                        edges])  # fmt: skip
    lx = log_fn(x)
    r_log = 0.0
    with mpmath.workdps(40):
        for xi, li in zip(x.tolist(), lx.tolist()):
            ex = mpmath.log(xi)
            err = abs(mpmath.mpf(li) - ex)
            bound = c0 * u * abs(ex) if 0.7071067811865476 <= xi < math.sqrt(2.0) else u * (abs(ex) + c1)
            r_log = max(r_log, float(err / bound) if bound else (0.0 if err == 0 else math.inf))
    a = np.concatenate([rng.uniform(0, 64, n), np.arange(0, 93) * math.log(2) / 2, [0.0, 2.0**-60, 64.0]])
    ea = exp_fn(a)
    r_exp = 0.0
    with mpmath.workdps(40):
        for ai, ei in zip(a.tolist(), ea.tolist()):
            ex = mpmath.exp(-mpmath.mpf(ai))
            r_exp = max(r_exp, float(abs(mpmath.mpf(ei) / ex - 1) / (lem["exp64"]["c_exp"] * u)))
    k = np.concatenate([adversarial_keys(), random_keys(n, seed), log_uniform_keys(n, seed + 1)])
    w0, w1 = split_words(k)
    # The shipped functions themselves (read from the module at call time, so that a planted one is what is checked);
    # a planted log64 enters through the shipped code's own call of log64_np.
    with _log64_replaced(log_fn):
        e64 = noise.exponential64_from_bits_np(w0, w1)
        g64 = noise.gumbel64_from_bits_np(w0, w1)
    gb = lem["gumbel64"]
    r_e = r_g = 0.0
    with mpmath.workdps(40):
        for (ex, gx), ei, gi in zip(_exact_words(w0, w1), e64.tolist(), g64.tolist()):
            r_e = max(r_e, float(abs(mpmath.mpf(ei) / ex - 1) / (gb["c_E"] * u)))
            r_g = max(r_g, float(abs(mpmath.mpf(gi) - gx) / (u * (gb["A"] + gb["B"] * abs(gx)))))
    return {"log64": r_log, "exp_neg64": r_exp, "exponential64": r_e, "gumbel64": r_g,
            "inputs": int(x.size + a.size + k.size)}  # fmt: skip


@contextlib.contextmanager
def _log64_replaced(log_fn):
    """``noise.log64_np`` replaced by ``log_fn`` for the block (nothing when it is the shipped one)."""
    shipped = noise.log64_np
    if log_fn is shipped:
        yield
        return
    noise.log64_np = log_fn
    try:
        yield
    finally:
        noise.log64_np = shipped


#: The shipped ``log64_np`` (a planted ``log64`` replaces the module's for a check and calls this one).
_SHIPPED_LOG64 = noise.log64_np


def short_log64(x):
    """A planted defect: ``log64`` with its series cut after 5 terms (``z**5``)."""
    return _SHIPPED_LOG64(x, coeffs=noise.LOG64_COEFFS[:5])


def short_exp64(a):
    """A planted defect: ``exp_neg64`` with its Taylor polynomial cut at degree 9."""
    return noise.exp_neg64_np(a, coeffs=noise.EXP64_COEFFS[:10])


# ----------------------------------------------------------------------------------------------
# The group draw at float64 near-ties: the shipped combine kernel and twins decide as exact noise does
# ----------------------------------------------------------------------------------------------

#: The gap between two groups' exact scores in :func:`group_draw_near_ties`: far above the float64 noise's error
#: (Lemma 8.3: ``u (8.5 + 2.2 |G|) < 1.2e-14``), far below a float32 noise's (``~1e-7``).
NEAR_TIE = 1e-11


def exact_group_noise(seed: int, rows, ids, samples) -> list[mpmath.mpf]:
    """The exact Gumbel value (40 digits) of the grid point of each group block ``(id, row, sample, STREAM_GROUP)``,
    from the documented words ``(w0, w1)``."""
    k0, k1 = noise.split_seed(seed)
    w0, w1, _, _ = noise.philox4x32_np(ids, rows, samples, noise.STREAM_GROUP, k0, k1)
    return [g for _, g in _exact_words(np.ravel(w0), np.ravel(w1))]


@contextlib.contextmanager
def float32_group_noise():
    """A planted defect for the block: the group noise computed in float32 (the token noise's arithmetic, widened),
    in the twin (``noise.gumbel64_from_bits_np``) and in the combine kernel (``stage2.gumbel64_from_bits``; the
    interpreter resolves it at call time)."""
    import triton.language as tl

    from flashsampling._device import device_function
    from flashsampling.kernels import stage2

    @device_function
    def device32(w0, w1):
        return noise.gumbel_from_bits(w0, w1).to(tl.float64)

    def twin32(w0, w1):
        w0, w1 = np.asarray(w0, dtype=np.uint32), np.asarray(w1, dtype=np.uint32)
        return noise.gumbel_from_bits_np(w0, w1).astype(np.float64)

    saved = noise.gumbel64_from_bits_np, stage2.gumbel64_from_bits
    noise.gumbel64_from_bits_np, stage2.gumbel64_from_bits = twin32, device32
    try:
        yield
    finally:
        noise.gumbel64_from_bits_np, stage2.gumbel64_from_bits = saved


def group_draw_near_ties(rows: int = 48, seed: int = 2027, draw: str = "kernel") -> dict:
    """Rows of three groups whose exact scores ``L_k + G'_k`` (``G'`` the group noise at 40 digits) put group 1 above
    group 0 by ``+NEAR_TIE`` on even rows and below it by ``NEAR_TIE`` on odd rows (group 2 far below): the shipped
    draw (``draw="kernel"``: ``combine_groups_kernel`` through ``launch_combine_groups``; ``"twin"``:
    ``combine_groups_np``; ``"sampler"``: ``choose_groups_np``, the grouped and tile samplers' twin) must choose as
    exact noise does on every row -- the float64 noise is within ``1.2e-14`` of exact (Lemma 8.3), and a float32
    noise (the planted defect) is not.  Returns ``{"rows", "wrong"}``."""
    import torch

    from flashsampling import grouped
    from flashsampling.kernels.stage2 import launch_combine_groups

    ids = np.array([0, 100, 357], dtype=np.int64)
    r = np.arange(rows, dtype=np.uint32)
    exact = np.array(exact_group_noise(seed, r[:, None], ids.astype(np.uint32)[None, :], 0), dtype=object)
    exact = exact.reshape(rows, 3)
    sign = np.where(r % 2 == 0, 1, -1)
    with mpmath.workdps(40):
        l1 = [float(exact[i, 0] - exact[i, 1] + sign[i] * mpmath.mpf(NEAR_TIE)) for i in range(rows)]
    logmass = np.stack([np.zeros(rows), np.array(l1), np.full(rows, -30.0)], axis=1)
    # The exact choice, with L_1 as rounded to float64: group 1 iff L_1 + G_1 > G_0.
    with mpmath.workdps(40):
        want = np.array([1 if mpmath.mpf(l1[i]) + exact[i, 1] > exact[i, 0] else 0 for i in range(rows)])
    if draw == "kernel":
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        best = torch.zeros((rows, 1, 3), dtype=torch.float32, device=dev)
        key = torch.ones((rows, 1, 3), dtype=torch.int64, device=dev)
        index = torch.arange(3, device=dev).expand(rows, 1, 3).contiguous()
        lo, hi = noise.split_seed(seed)
        _, choice, _ = launch_combine_groups(
            torch.from_numpy(logmass).to(dev), best, key, index, torch.from_numpy(ids).to(dev),
            torch.zeros((rows, 1), dtype=torch.int32, device=dev), torch.ones(rows, dtype=torch.float32, device=dev),
            lo, hi, vocab_size=1000,
        )  # fmt: skip
        got = choice[:, 0].cpu().numpy()
    elif draw == "twin":
        z = np.zeros((rows, 1, 3), dtype=np.float32)
        idx = np.broadcast_to(np.arange(3), (rows, 1, 3))
        _, choice = grouped.combine_groups_np(logmass, z, np.ones((rows, 1, 3)), idx, ids, np.zeros(rows, bool), seed)
        got = choice[:, 0]
    else:
        got = np.array([grouped.choose_groups_np(logmass[i], ids, seed, 1, row=i)[0] for i in range(rows)])
    return {"rows": rows, "wrong": int(np.count_nonzero(got != want))}


# ----------------------------------------------------------------------------------------------
# The shipped merge coin, counted (Theorem 8.4)
# ----------------------------------------------------------------------------------------------


def coin_cases(n_random: int = 200, seed: int = 9) -> list[tuple[float, float]]:
    """``(L, L_C)`` pairs: the thresholds ``t = L_new - L_C`` of :data:`COIN_THRESHOLDS` (``L_C = 0``,
    ``L = log(e**t - 1)``), random pairs, ``2**64 m`` between ``2**52`` and ``2**53`` on both sides (where a float64
    ``ceil(y - 1/2)`` goes wrong), ties, differences beyond the clamp, ``-inf`` on either side."""
    rng = np.random.default_rng(seed)
    out = [(math.log(math.expm1(t)), 0.0) for t in COIN_THRESHOLDS]
    out += [(float(a), float(b)) for a, b in rng.normal(0, 6, (n_random, 2))]
    d = rng.uniform(math.log(2.0**11 - 1), math.log(2.0**12 - 1), 40)  # m = 1 / (1 + e**d) in [2**-12, 2**-11]
    out += [(float(x), 0.0) for x in d[:20]] + [(0.0, float(x)) for x in d[20:]]
    out += [(0.0, 0.0), (3.5, 3.5), (0.0, 63.9), (0.0, 64.0), (0.0, 100.0), (100.0, 0.0), (1.0, 1.0 + 2.0**-52),
            (-math.inf, 0.0), (0.0, -math.inf), (-math.inf, -math.inf), (-20.0, 25.0), (1e-300, 0.0)]  # fmt: skip
    return out


def _exact_q(l_keep: float, l_take: float):
    """``q = e**L_C / (e**L + e**L_C)`` of the float64 inputs, in 50 digits."""
    if l_take == -math.inf:
        return mpmath.mpf(0)
    if l_keep == -math.inf:
        return mpmath.mpf(1)
    with mpmath.workdps(50):
        return 1 / (1 + mpmath.exp(mpmath.mpf(l_keep) - mpmath.mpf(l_take)))


def coin_counts(theta: float, cases=None, coin=None) -> dict:
    """Theorem 8.4 checked on the shipped coin: per case, ``K = ceil(2**64 q' - 1/2)`` in exact rationals from the
    shipped ``(m', heavy)``; the shipped ``merge_coin_np`` (or ``coin``, a planted replacement) must take at ``k = K -
    1`` and not at ``k = K`` (its take set is a prefix of ``k``: the count is ``K``); then ``|K / 2**64 - q|`` against
    the bound ``2**-65 + min(q, 1 - q) (theta + 1.0001 u |L - L_C|)``."""
    coin = coin or noise.merge_coin_np
    cases = coin_cases() if cases is None else cases
    wrong_count = 0
    worst_abs, worst_ratio, at = 0.0, 0.0, None
    for l_keep, l_take in cases:
        m, heavy = noise.merge_coin_probability_np(np.array([l_keep]), np.array([l_take]))
        q_prime = 1 - Fraction(float(m[0])) if heavy[0] else Fraction(float(m[0]))
        big_k = math.ceil(q_prime * M64 - Fraction(1, 2))
        ks = [k for k in (big_k - 1, big_k) if 0 <= k < M64]
        w0, w1 = split_words(np.array(ks, dtype=np.uint64))
        takes = coin(w0, w1, np.full(len(ks), l_keep), np.full(len(ks), l_take))
        wrong_count += int(any(bool(t) != (k < big_k) for k, t in zip(ks, takes)))
        q = _exact_q(l_keep, l_take)
        with mpmath.workdps(50):
            err = abs(mpmath.mpf(big_k) / M64 - q)
            d = abs(l_keep - l_take) if math.isfinite(l_keep) and math.isfinite(l_take) else 0.0
            bound = mpmath.mpf(2) ** -65 + min(q, 1 - q) * (theta + 1.0001 * 2.0**-53 * min(d, 64.0))
            ratio = float(err / bound)
        if float(err) > worst_abs:
            worst_abs = float(err)
        if ratio > worst_ratio:
            worst_ratio, at = ratio, (l_keep, l_take)
    return {"cases": len(cases), "wrong_counts": wrong_count, "max_abs": worst_abs, "max_ratio": worst_ratio,
            "max_ratio_at": at}  # fmt: skip


def float64_ceil_coin(w0, w1, l_keep, l_take):
    """A planted defect: the coin with ``K = ceil(2**64 q - 1/2)`` evaluated in float64 (it rounds ``y - 1/2`` once
    ``y >= 2**52``)."""
    m, heavy = noise.merge_coin_probability_np(l_keep, l_take)
    q = np.where(heavy, 1.0 - m, m)
    big_k = [min(int(math.ceil(v * 2.0**64 - 0.5)), M64) for v in q]
    k = [(int(b) << 32) | int(a) for a, b in zip(w0, w1)]
    return np.array([a < b for a, b in zip(k, big_k)])


# ----------------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------------


#: Group counts of the budget table: two shards, 8 ranks, the tiles of V = 151936 at 128 and at 256 columns.
GROUP_COUNTS = (2, 8, 1187, 594)
#: The thresholds ``t`` at which the version-1 coin's exact error is quoted (the issue's).
QUOTED_T = (1.0, 7.8, 20.0)


def collect(scan: dict | None = None, thresholds=COIN_THRESHOLDS) -> dict:
    """Everything finite_precision.md, section 8, quotes."""
    scan = scan or load_scan()
    lem = lemmas()
    v1 = coin_profile(thresholds)
    return {
        "lemmas": lem,
        "constants": constants_ok(),
        "spot": float64_spot_checks(lem),
        "spot_planted": {"log64 cut after z**5": float64_spot_checks(lem, n=300, log_fn=short_log64)["log64"],
                         "exp_neg64 cut at degree 9": float64_spot_checks(lem, n=300, exp_fn=short_exp64)["exp_neg64"],
                         "gumbel64 in float32": _planted_spot(lem)},
        "near_ties": {d: group_draw_near_ties(draw=d)["wrong"] for d in NEAR_TIE_DRAWS},
        "near_ties_planted": _planted_near_ties(),
        "coin": coin_counts(lem["theta"]),
        "coin_planted_ceil": coin_counts(lem["theta"], coin=float64_ceil_coin),
        "coin_v1": v1,
        "coin_v1_at": {str(t): {"abs": v[0], "rel_units": v[1] / 2.0**-24} for t, v in
                       ((t, coin_error(t)) for t in QUOTED_T)},
        "kolmogorov": kolmogorov_bounds(scan),
        "first_order": first_order_tv_exhaustive(scan),
        "logmass": logmass_example(),
    }  # fmt: skip


#: The shipped group draws :func:`group_draw_near_ties` runs.
NEAR_TIE_DRAWS = ("kernel", "twin", "sampler")


def _planted_spot(lem: dict) -> float:
    with float32_group_noise():
        return float64_spot_checks(lem, n=300)["gumbel64"]


def _planted_near_ties() -> dict[str, int]:
    with float32_group_noise():
        return {d: group_draw_near_ties(draw=d)["wrong"] for d in NEAR_TIE_DRAWS}


def verdicts(res: dict) -> dict[str, bool]:
    lem, coin = res["lemmas"], res["coin"]
    bound_at_1 = 2.0**-65 + math.exp(-1.0) * (lem["theta"] + 1.0001 * 2.0**-53 * 1.0)
    return {
        "shipped constants are the design's": all(res["constants"].values()),
        "Sterbenz holds in exp_neg64's reduction": lem["exp64"]["sterbenz"],
        "shipped twins within the lemmas' bounds": all(v <= 1.0 for k, v in res["spot"].items() if k != "inputs"),
        "planted shortened polynomials exceed them": all(v > 1.0 for v in res["spot_planted"].values()),
        "coin: take set [0, K(q')) and |P - q| within Theorem 8.4": coin["wrong_counts"] == 0
        and coin["max_ratio"] <= 1.0,
        "planted float64 ceil coin miscounts": res["coin_planted_ceil"]["wrong_counts"] > 0,
        "planted version-1 coin exceeds Theorem 8.4": abs(res["coin_v1_at"]["1.0"]["abs"]) > bound_at_1,
        "group draws exact at float64 near-ties": not any(res["near_ties"].values()),
        "planted float32 group noise caught at near-ties": all(v > 0 for v in res["near_ties_planted"].values()),
        "log-masses within logmass_tolerance": res["logmass"]["max_abs_error"] <= res["logmass"]["tolerance"],
    }  # fmt: skip


def render(res: dict) -> dict[str, str]:
    from proofs._generated import md_table, sci, sci_up

    lem, coin, v1 = res["lemmas"], res["coin"], res["coin_v1"]
    lg, ex, gb = lem["log64"], lem["exp64"], lem["gumbel64"]
    kb, fo, lm = res["kolmogorov"], res["first_order"], res["logmass"]
    spot = res["spot"]
    rows = [
        ("Lemma 8.1, `log64` (forward error analysis over "
         f"{lg['pieces']} pieces of $f$ and every exponent $e \\in [-66, 6]$)",
         f"$c_0 = {lg['c0']:.3f}$ (relative, $e = 0$), $c_1 = {lg['c1']:.3f}$"),
        ("Lemma 8.2, `exp_neg64` on $[0, 64]$", f"$c_e = {ex['c_exp']:.3f}$ (relative); Sterbenz in the reduction: "
         + ("holds" if ex["sterbenz"] else "**fails**")),
        ("Lemma 8.3, the float64 group noise at every grid point",
         f"$c_E = {gb['c_E']:.3f}$; $\\lvert G_{{64}} - G\\rvert \\le u\\,({gb['A']:.3f} + {gb['B']:.3f}"
         f"\\lvert G\\rvert)$; $D_{{G64}} \\le {sci_up(gb['D_G64'])}$"),
        (f"`group_draw_near_ties`: {48} rows whose two groups' exact scores (40-digit noise) differ by "
         f"$\\pm{NEAR_TIE:g}$; the shipped combine kernel (interpreted), `combine_groups_np`, `choose_groups_np`",
         f"wrong choices: {', '.join(str(v) for v in res['near_ties'].values())}; planted float32 group noise: "
         f"{', '.join(str(v) for v in res['near_ties_planted'].values())}"),
        ("group draw over $K$ groups: $K/2^{64} + 2K D_{G64}$",
         ", ".join(f"$K = {k}$: ${sci_up(v)}$" for k, v in lem["group_bounds"].items())),
        ("Theorem 8.4, the merge coin: $\\theta/u = ((1 + c_e u)(1 + u)/(1 - u) - 1)/u$",
         f"${lem['theta'] / 2.0**-53:.3f}$"),
        (f"`constants_ok`: the shipped constants are the design's ({len(res['constants'])} checks)",
         "all hold" if all(res["constants"].values()) else "**a constant differs**"),
        (f"`float64_spot_checks`: the shipped twins at {spot['inputs']} edge and random inputs against 40 digits, "
         "largest error / the lemma's bound",
         "; ".join(f"`{k}` {v:.2f}" for k, v in spot.items() if k != "inputs")
         + "; planted: " + "; ".join(f"{k} {v:.3g}" for k, v in res["spot_planted"].items())),
        (f"`coin_counts`: the shipped `merge_coin_np` at {coin['cases']} pairs $(L, L_C)$ ({len(COIN_THRESHOLDS)} "
         "thresholds $t \\in [10^{-6}, 44]$, random, edge); take set located at $k = K - 1, K$",
         f"take set $= [0, K(q'))$ in {coin['cases'] - coin['wrong_counts']} of {coin['cases']}; "
         f"largest $\\lvert P - q\\rvert = {sci(coin['max_abs'])}$, at most {coin['max_ratio']:.2f} of Theorem 8.4's "
         f"bound; planted float64 `ceil(y - 1/2)`: {res['coin_planted_ceil']['wrong_counts']} counts wrong"),
        (f"planted: the version-1 coin ($\\mathrm{{fl}}_{{64}}(E_{{32}}) > t$), counted over all $2^{{64}}$ grid "
         f"points at {len(v1['rows'])} thresholds",
         f"largest $\\lvert P - e^{{-t}}\\rvert = {sci(v1['max_abs'])}$ (at $t = {v1['max_abs_t']:g}$); "
         + "; ".join(f"$t = {t}$: ${v['rel_units']:+.2f}\\,u_{{32}}$ relative"
                     for t, v in res["coin_v1_at"].items())
         + ": far outside Theorem 8.4"),
        ("`kolmogorov_bounds` of the float32 token noise (from the exhaustive scan's error bins; §6, Theorem 7)",
         f"$D_E \\le {sci_up(kb['D_E'])}$ (near $t = {kb['D_E_at']:.2f}$), $D_G \\le {sci_up(kb['D_G'])}$ "
         f"(near $g = {kb['D_G_at']:.2f}$)"),
        ("first-order change of a Gumbel-max draw by the float32 token noise (eq. (6.4), exhaustive $m(g)$)",
         f"${sci(fo['tv'])}$"),
        (f"`logmass_example`: the shipped stage 1's float32 tile log-masses, {lm['v']} logits $N(0, 2^2)$, $T = 0.7$, "
         f"tiles of {lm['block_v']}, against 30-digit `logsumexp`",
         f"$\\max\\lvert\\hat L - L\\rvert = {sci(lm['max_abs_error'])}$; TV of the group law ${sci(lm['tv'])}$ "
         f"(worst-case bound $\\tanh(\\varepsilon/2) = {sci_up(lm['tv_bound'])}$)"),
    ]  # fmt: skip
    return {"second-level": md_table(rows)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    res = collect()
    lem = res["lemmas"]
    print(f"Lemma 8.1 log64: c0 = {lem['log64']['c0']:.4f}, c1 = {lem['log64']['c1']:.4f}; "
          f"Lemma 8.2 exp_neg64: c_e = {lem['exp64']['c_exp']:.4f}; Lemma 8.3: {lem['gumbel64']}; "
          f"theta = {lem['theta'] / 2.0**-53:.4f} u")  # fmt: skip
    print(f"group draw bounds: {lem['group_bounds']}")
    print(f"spot checks (error / bound): {res['spot']}; planted: {res['spot_planted']}")
    print(f"coin: {res['coin']}; planted ceil: {res['coin_planted_ceil']['wrong_counts']} wrong counts")
    c = res["coin_v1"]
    print(f"version-1 coin, exact over 2^64 grid points at {len(c['rows'])} thresholds: max |P - q| = "
          f"{c['max_abs']:.3e} (t = {c['max_abs_t']})")  # fmt: skip
    kb = res["kolmogorov"]
    print(f"float32 token noise: D_E <= {kb['D_E']:.3e}, D_G <= {kb['D_G']:.3e}; first order {res['first_order']}")
    if "--write" in argv:
        from proofs import _generated as gen

        gen.save("second_level", res)
        gen.write_blocks(gen.HERE / "finite_precision.md", "check_second_level.py", render(gen.roundtrip(res)))
    v = verdicts(res)
    print(v)
    return 0 if all(v.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
