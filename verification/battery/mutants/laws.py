"""The exact law of each mutant on its case: the input of the planning.

``law(case) -> q (V,)`` is the distribution over tokens of the sampler of the same name in
:mod:`verification.battery.mutants.samplers`, on the case the catalogue runs it on.  Closed forms where the
mechanism allows: a group of tokens sharing one Gumbel acts as one token of logit ``max z``
(:func:`shared_noise`); a capped noise on a head + flat tail case is a few events; bf16 tile
candidates are a sum over the bf16 grid.  A law raises ``NotImplementedError`` on a case its closed
form does not cover; the runner then estimates it from draws (and the catalogue says so in
``law_note``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from flashsampling.reference import softmax

from ..cases import Case
from .samplers import (
    bf16_softmax_probs,
    float32_cdf,
    last_index_masked_probs,
    last_tile_dropped_probs,
    shard_starts,
    tile_counters,
)


def exact(case: Case) -> np.ndarray:
    """The target itself: the law of an exact sampler (and the marginal of the paired mutants)."""
    return case.probs


def _head_tail(case: Case) -> tuple[float, int]:
    """``(gap, M)`` for a case with one top token at index 0 and ``M`` equal logits ``gap`` nats below."""
    z = case.logits / case.temperature
    if not (np.isfinite(z).all() and z.size >= 2 and np.all(z[1:] == z[1]) and z[0] > z[1]):
        raise NotImplementedError("closed-form law needs one head token at index 0 and a flat tail")
    return float(z[0] - z[1]), int(z.size - 1)


def _head_tail_law(v: int, q_tail: float) -> np.ndarray:
    """Head token 0 with ``1 - q_tail``, the rest shared equally by the ``v - 1`` tail tokens."""
    q = np.full(v, q_tail / (v - 1))
    q[0] = 1.0 - q_tail
    return q


def uniform_rounds_to_one(case: Case) -> np.ndarray:
    """Head + flat tail beyond the finite noise range: the tail wins when some tail uniform rounds to 1
    (noise ``+inf``) and the head's does not, or when the head draws ``u = 0`` (noise ``-inf``), no tail
    token draws ``+inf`` and not every tail token draws ``-inf``."""
    gap, m = _head_tail(case)
    g_max = -math.log(-math.log1p(-(2.0**-24)))  # largest finite noise (u = 1 - 2**-24)
    g_min = -math.log(32 * math.log(2))  # smallest finite noise (u = 2**-32)
    if gap <= g_max - g_min:
        raise NotImplementedError("closed form needs the tail beyond the finite noise range")
    e1, e0 = 2.0**-25, 2.0**-32  # P(u = 1), P(u = 0)
    no_inf = math.exp(m * math.log1p(-e1))
    q_t = (1 - e1) * (1 - no_inf) + e0 * (no_inf - e0**m)
    return _head_tail_law(case.num_categories, q_t)


def uniform_24bit(case: Case) -> np.ndarray:
    """Head + flat tail beyond the 16.6-nat noise cap: the tail wins only through a head noise of ``-inf``."""
    gap, m = _head_tail(case)
    g_max = -math.log(-math.log1p(-(2.0**-24)))
    g_min = -math.log(24 * math.log(2))
    if gap <= g_max - g_min:
        raise NotImplementedError("closed form needs the tail beyond the finite noise range")
    # The tail wins only when the head draws k = 0 (noise -inf) and some tail token does not.
    return _head_tail_law(case.num_categories, 2.0**-24 * (1 - 2.0 ** (-24 * m)))


def race_exponential_floor(case: Case) -> np.ndarray:
    """Head + flat tail: the race with ``E`` floored at ``2**-24``, integrated over the tail's smallest ``E``."""
    gap, m = _head_tail(case)
    f, r = 2.0**-24, math.exp(gap)
    # Tail wins iff max(E0, f) > R max(Emin, f), Emin ~ Exp(M): integrate over Emin.
    q_t = -math.expm1(-m * f) * math.exp(-r * f) + m / (m + r) * math.exp(-(m + r) * f)
    return _head_tail_law(case.num_categories, q_t)


def race_fp16_flush(case: Case) -> np.ndarray:
    """Masked case: a masked token wins when its float16 ``E`` is 0 (``0/0 = NaN``); the allowed tokens keep
    ``p`` up to the (negligible) float16 rounding of ``E``."""
    p = case.probs
    masked = p == 0
    e0 = -math.expm1(-(2.0**-25))  # P(float16(E) == 0)
    q_imp = -math.expm1(int(masked.sum()) * math.log1p(-e0))
    q = p * (1 - q_imp)
    q[masked] = q_imp / max(1, int(masked.sum()))
    return q


def bf16_tile_candidates(case: Case, tile: int = 128) -> np.ndarray:
    """Flat case: tile ``t`` wins when its bf16-rounded maximum is the largest and no lower tile ties it,
    summed over the bf16 grid of the Gumbel(``z + log tile``, 1) tile maxima."""
    z = case.logits / case.temperature
    v = z.size
    if not (case.flat and np.isfinite(z).all() and v % tile == 0):
        raise NotImplementedError("closed form needs flat finite logits and whole tiles")
    tiles = v // tile
    loc = float(z[0]) + math.log(tile)
    lo, hi = np.array([loc - 12.0, loc + 60.0], dtype=np.float32).view(np.uint32) >> 16
    if loc - 12.0 <= 0:
        raise NotImplementedError("closed form assumes positive scores")
    grid = (np.arange(lo, hi + 1, dtype=np.uint32) << 16).view(np.float32).astype(np.float64)
    edges = np.r_[-np.inf, (grid[1:] + grid[:-1]) / 2, np.inf]
    cdf = np.exp(-np.exp(-(edges - loc)))  # Gumbel(loc, 1) at the rounding boundaries
    le, lt = cdf[1:], cdf[:-1]
    mass = le - lt
    t = np.arange(tiles)[:, None]
    wins = (mass[None, :] * np.exp(special.xlogy(t, lt[None, :]) + special.xlogy(tiles - 1 - t, le[None, :]))).sum(1)
    return np.repeat(wins / wins.sum() / tile, tile)


def ties_lower_index_coarse(case: Case, bits: int = 11) -> np.ndarray:
    """Flat case: token ``i`` wins at level ``L`` when the ``i`` tokens before it are below ``L`` and the rest
    at most ``L``, summed over the ``2**bits`` levels."""
    z = case.logits / case.temperature
    if not (case.flat and np.isfinite(z).all()):
        raise NotImplementedError("closed form needs flat finite logits")
    v = z.size
    big = 2**bits
    lvl = np.arange(big, dtype=np.float64)[:, None]
    i = np.arange(v, dtype=np.float64)[None, :]
    logp = -math.log(big) + special.xlogy(i, lvl / big) + (v - 1 - i) * np.log((lvl + 1) / big)
    return np.exp(special.logsumexp(logp, axis=0))


def shared_noise(z: np.ndarray, counters: np.ndarray) -> np.ndarray:
    """Law of Gumbel-max when tokens with equal ``counters`` share one Gumbel: per group, only its first
    largest logit can win, with probability proportional to ``exp(max z)``."""
    order = np.lexsort((np.arange(z.size), -z, counters))
    first = order[np.r_[True, counters[order][1:] != counters[order][:-1]]]
    q = np.zeros(z.size)
    w = z[first]
    with np.errstate(invalid="ignore"):
        q[first] = np.exp(w - w[np.isfinite(w)].max())
    return np.nan_to_num(q) / np.nan_to_num(q).sum()


def tile_seed_overlap(case: Case) -> np.ndarray:
    """Shared noise of tokens ``128 t - 1`` and ``128 t`` (tile stride 127)."""
    return shared_noise(case.logits / case.temperature, tile_counters(case.num_categories, 128, 127))


def tile_local_counter(case: Case) -> np.ndarray:
    """Shared noise of the tokens at one offset of every 128-token tile."""
    return shared_noise(case.logits / case.temperature, tile_counters(case.num_categories, 128, 0))


def tp_shared_seed(case: Case, ranks: int = 4) -> np.ndarray:
    """Shared noise of the tokens in one local slot of every shard."""
    v = case.num_categories
    bounds = shard_starts(v, ranks)
    i = np.arange(v)
    return shared_noise(case.logits / case.temperature, i - bounds[np.searchsorted(bounds, i, side="right") - 1])


def tp_rank_by_max_logit(case: Case, ranks: int = 2) -> np.ndarray:
    """The rank drawn by ``softmax`` of its largest logit, then the exact softmax inside the rank."""
    z = case.logits / case.temperature
    bounds = shard_starts(z.size, ranks)
    top = np.array([z[a:b].max() for a, b in zip(bounds[:-1], bounds[1:])])
    pick = softmax(top)
    q = np.zeros(z.size)
    for r, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        q[a:b] = pick[r] * softmax(z[a:b])
    return q


def float32_running_cdf(case: Case) -> np.ndarray:
    """The steps of the float32 running CDF."""
    return np.diff(np.r_[0.0, float32_cdf(case.probs)])


def bf16_softmax_inverse_cdf(case: Case) -> np.ndarray:
    """The bf16 softmax, renormalized."""
    p = bf16_softmax_probs(case.logits, case.temperature)
    return p / p.sum()


def row_seed_collision_joint(case: Case) -> np.ndarray:
    """Joint law of the two rows' draws: identical, so ``diag(p)``."""
    return np.diag(case.probs)


def temperature_after_noise(case: Case) -> np.ndarray:
    """``softmax(z)``: dividing after the noise leaves the argmax of ``z + G`` unchanged, whatever ``T``."""
    return softmax(case.logits, 1.0)


def last_tile_dropped(case: Case) -> np.ndarray:
    """The softmax restricted to the whole 128-token tiles."""
    return last_tile_dropped_probs(case.logits, case.temperature)


def last_index_masked(case: Case) -> np.ndarray:
    """The softmax without token ``V - 1``."""
    return last_index_masked_probs(case.logits, case.temperature)


def probs_as_logprobs(case: Case) -> np.ndarray:
    """``softmax(p)``: probabilities used as logits."""
    return softmax(case.probs)
