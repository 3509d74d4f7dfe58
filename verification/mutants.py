"""A catalogue of biased samplers modelled on real failures: the bugs the suite must catch.

Each :class:`Mutant` is a sampler with one defect, a one-line description of its mechanism, the
logits case where the defect shows, its exact law on that case (so the number of draws needed to
catch it can be *planned*, not guessed), and the test that catches it first.  Every sampler has the
signature ``sample(logits (V,) float64, temperature, n, seed) -> int64 (n,)``.

=========================  ==================================================================
mutant                     mechanism
=========================  ==================================================================
uniform-rounds-to-one      float32 ``u = k * 2**-32`` rounds to 1.0: ``-log(-log u) = +inf`` wins
uniform-24bit              24-bit uniforms: Gumbel noise capped at 16.6 nats, far tail starved
race-exponential-floor     exponential race ``argmax p / E`` with ``E`` floored at ``2**-24``
race-fp16-flush            race with ``E`` in float16: ``E = 0`` gives ``p/0 = inf`` or ``0/0 = NaN``
bf16-tile-candidates       per-tile maxima stored in bf16; equal candidates go to the lower tile
tile-seed-overlap          tile ``t`` reads stream offset ``t * k`` with ``k = 127 < 128`` per tile
row-seed-collision         the row is not in the counter: two rows draw identical tokens
sample-offset-shift        sample ``s`` reads offset ``s`` of one stream: ``s + 1`` sees shifted noise
tile-local-counter         counter = offset inside the tile: noise depends on the tile shape
temperature-after-noise    ``(z + G) / T`` instead of ``z / T + G``: the temperature is ignored
ties-lower-index-coarse    11-bit uniforms and ``argmax`` keeping the first of equal scores
last-tile-dropped          grid ``V // BLOCK`` instead of ``ceil``: the last partial tile is never drawn
last-index-masked          mask ``i < V - 1``: the last token (often end-of-text) is never drawn
probs-as-logprobs          ``p_i + G`` where ``log p_i + G`` belongs: nearly uniform draws
bf16-softmax-inverse-cdf   logits and softmax in bf16 before an exact inverse-CDF draw
tp-shared-seed             TP ranks key noise by the local index: equal local slots share noise
tp-rank-by-max-logit       TP factorized combine picks the rank by its largest logit, not log-mass
float32-running-cdf        inverse CDF over a float32 running sum (``torch.multinomial`` on CPU)
=========================  ==================================================================

Fast exact simulation
---------------------
The battery runs the mutants at up to millions of draws on two cores, so none of them loops over
the vocabulary per draw when the case has structure to exploit.  A case's logits are split into
*runs* of equal values (and at tile boundaries where the mechanism has tiles).  Within a run the
tokens are exchangeable, so only the best noise of the run matters, and it has a closed form:

* continuous Gumbel: ``max`` of ``M`` iid ``Gumbel(0, 1)`` is ``Gumbel(log M, 1)``;
* exponential race: ``min`` of ``M`` iid ``Exp(1)`` is ``Exp(1) / M``;
* noise that is a nondecreasing function of a uniform ``b``-bit integer ``k``: the maximum ``K`` of
  ``M`` such integers has ``P(K <= j) = ((j + 1) / 2**b)**M``, sampled exactly by inverse CDF as
  ``K = floor(2**b U**(1/M))`` (computed as ``2**b - ceil(2**b (1 - U**(1/M)))`` with ``expm1`` and
  ``log1p`` for accuracy).  Rounding (float32, float16, bf16) is monotone, so the rounded maximum is
  the maximum of the rounded values.

The winning run is the argmax over runs (NumPy's ``argmax``: first maximum, NaN beats everything, as
``torch.argmax`` does); the winning token is drawn uniformly inside the run, except for the
tie-breaking mutant, where the first token that attains the run's maximum level ``L`` is drawn
exactly: it is ``i`` with probability proportional to ``(L / (L + 1))**i`` (tokens before ``i`` below
``L``, token ``i`` at ``L``, tokens after at most ``L``), a truncated geometric law.  Mechanisms whose
defect is a restriction of an otherwise exact sampler (dropped tile, masked last index, bf16 softmax,
float32 CDF) draw from their exact law by inverse CDF.

Exact laws
----------
``Mutant.law(case)`` is the sampler's distribution over tokens, in closed form where the mechanism
allows (shared noise: a group of tokens sharing one Gumbel acts as one token of logit
``max z``; capped noise on a head + flat tail case: a few events; bf16 tile candidates: a sum over
the bf16 grid), and by simulation otherwise (noted in ``law_note``).  :mod:`verification.detection`
turns the law into the number of draws each test needs; ``tests/test_mutants.py`` checks each
sampler against its own law, then that the suite catches it at the planned ``n``.

``python -m verification.mutants --out docs/mutants.md`` regenerates the documentation table,
confirming each planned ``n`` empirically on several seeds.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import special

from flashsampling.reference import sample_inverse_cdf, softmax

from .cases import Case
from .detection import TEST_TITLES, Detection, plan_detection, run_suite

__all__ = [
    "CONTROLS",
    "EXACT_SEED_OFFSET",
    "MUTANTS",
    "Mutant",
    "budgets",
    "catalogue",
    "catalogue_table",
    "format_table",
    "mutant",
    "round_bf16",
    "run_mutants",
]

Sampler = Callable[[np.ndarray, float, int, int], np.ndarray]

#: Elements (draws x runs) handled per NumPy step: bounds temporaries to ~64 MB of float64.
_CHUNK = 1 << 23


# --------------------------------------------------------------------------------------------
# Primitives
# --------------------------------------------------------------------------------------------


def round_bf16(x) -> np.ndarray:
    """Round to bfloat16 (8 significant bits), nearest-even, via float32; returned as float64."""
    f = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    b = f.view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32).astype(np.float64)


def _runs(z: np.ndarray, tile: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs of equal consecutive values of ``z`` (split at multiples of ``tile``): starts, lengths, values."""
    v = z.size
    cut = np.zeros(v, dtype=bool)
    cut[0] = True
    cut[1:] = z[1:] != z[:-1]
    if tile:
        cut[::tile] = True
    starts = np.flatnonzero(cut)
    lengths = np.diff(np.r_[starts, v])
    return starts, lengths, z[starts]


def _chunked(n: int, width: int, draw: Callable[[int], np.ndarray]) -> np.ndarray:
    """Concatenate ``draw(m)`` over chunks with ``m * width <= _CHUNK`` (deterministic chunking)."""
    out = np.empty(n, dtype=np.int64)
    step = max(1, _CHUNK // max(1, width))
    for s0 in range(0, n, step):
        s1 = min(n, s0 + step)
        out[s0:s1] = draw(s1 - s0)
    return out


def _max_uniform_int(lengths: np.ndarray, m: int, bits: int, rng: np.random.Generator) -> np.ndarray:
    """(m, G) float64: maximum of ``lengths[g]`` iid uniform integers on ``[0, 2**bits)`` (exact)."""
    big = float(2**bits)
    u = rng.random((m, lengths.size))  # U' = 1 - u is uniform on (0, 1]
    d = -np.expm1(np.log1p(-u) / lengths)  # 1 - U'**(1/M), accurate when small
    return np.clip(big - np.ceil(big * d), 0.0, big - 1.0)


def _pick_uniform(starts: np.ndarray, lengths: np.ndarray, g: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A uniform member of run ``g`` per draw."""
    off = np.floor(rng.random(g.size) * lengths[g]).astype(np.int64)
    return starts[g] + np.minimum(off, lengths[g] - 1)


def _gumbel_from_u(u: np.ndarray) -> np.ndarray:
    """``-log(-log u)`` in float64: ``u = 1`` gives ``+inf``, ``u = 0`` gives ``-inf``."""
    with np.errstate(divide="ignore"):
        return -np.log(-np.log(u))


def _scores(values: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """``values + noise`` where ``-inf + inf`` is NaN (as in float hardware)."""
    with np.errstate(invalid="ignore"):
        return values[None, :] + noise


def _argmax(s: np.ndarray) -> np.ndarray:
    """Row-wise first maximum, NaN counting as the largest value (``torch.argmax`` semantics)."""
    return np.argmax(s, axis=1)


def _run_sampler(logits, temperature: float, n: int, seed: int, noise, *, tile: int | None = None,
                 values: Callable[[np.ndarray, float], np.ndarray] | None = None) -> np.ndarray:  # fmt: skip
    """Argmax over runs of ``values[run] + noise(lengths, m, rng)``; the winner is uniform inside its run.

    ``noise(lengths, m, rng) -> (m, G)`` is the best noise of each run (its maximum over the run's
    ``lengths[g]`` tokens); ``values(z, T)`` maps logits to the per-token value (default ``z / T``).
    """
    z = np.asarray(logits, dtype=np.float64)
    vals = z / temperature if values is None else values(z, temperature)
    starts, lengths, v = _runs(vals, tile)
    rng = np.random.default_rng(seed)

    def draw(m: int) -> np.ndarray:
        g = _argmax(_scores(v, noise(lengths, m, rng)))
        return _pick_uniform(starts, lengths, g, rng)

    return _chunked(n, lengths.size, draw)


def _gumbel_max_noise(lengths: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    return rng.gumbel(size=(m, lengths.size)) + np.log(lengths)


# --------------------------------------------------------------------------------------------
# The samplers
# --------------------------------------------------------------------------------------------


def exact_gumbel_runs(logits, temperature: float, n: int, seed: int) -> np.ndarray:
    """Control: Gumbel-max with exact continuous noise, through the same run machinery as the mutants."""
    return _run_sampler(logits, temperature, n, seed, _gumbel_max_noise)


def exact_race_runs(logits, temperature: float, n: int, seed: int) -> np.ndarray:
    """Control: exponential race ``argmax p / E`` with exact ``E``, through the run machinery."""
    p = softmax(np.asarray(logits, dtype=np.float64), temperature)
    starts, lengths, pv = _runs(p)
    rng = np.random.default_rng(seed)

    def draw(m: int) -> np.ndarray:
        e = rng.standard_exponential((m, lengths.size)) / lengths
        return _pick_uniform(starts, lengths, _argmax(pv[None, :] / e), rng)

    return _chunked(n, lengths.size, draw)


def exact_inverse_cdf(logits, temperature: float, n: int, seed: int) -> np.ndarray:
    """Control: float64 inverse CDF of the exact softmax."""
    p = softmax(np.asarray(logits, dtype=np.float64), temperature)
    return sample_inverse_cdf(p, n, np.random.default_rng(seed))


def uniform_rounds_to_one(logits, temperature: float, n: int, seed: int) -> np.ndarray:
    """``u = float32(k) * 2**-32`` for a uniform 32-bit ``k``; Gumbel noise ``-log(-log u)``.

    The top 128 values of ``k`` round to ``u = 1.0`` (probability ``2**-25`` per token), whose noise
    is ``+inf``: that token wins whatever its logit.  Below 1 the float32 grid is ``2**-24``, so finite
    noise stops at 16.6 nats.
    """

    def noise(lengths, m, rng):
        k = _max_uniform_int(lengths, m, 32, rng)
        return _gumbel_from_u((k * 2.0**-32).astype(np.float32).astype(np.float64))

    return _run_sampler(logits, temperature, n, seed, noise)


def uniform_24bit(logits, temperature: float, n: int, seed: int) -> np.ndarray:
    """``u = (k >> 8) * 2**-24``: at most ``1 - 2**-24``, so the noise is capped at 16.6 nats."""

    def noise(lengths, m, rng):
        return _gumbel_from_u(_max_uniform_int(lengths, m, 24, rng) * 2.0**-24)

    return _run_sampler(logits, temperature, n, seed, noise)


def _race(logits, temperature: float, n: int, seed: int, transform: Callable[[np.ndarray], np.ndarray],
          prob_dtype=np.float64) -> np.ndarray:  # fmt: skip
    p = softmax(np.asarray(logits, dtype=np.float64), temperature).astype(prob_dtype)
    starts, lengths, pv = _runs(p)
    rng = np.random.default_rng(seed)

    def draw(m: int) -> np.ndarray:
        e = transform(rng.standard_exponential((m, lengths.size)) / lengths)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = pv[None, :] / e
        return _pick_uniform(starts, lengths, _argmax(s), rng)

    return _chunked(n, lengths.size, draw)


def race_exponential_floor(logits, temperature: float, n: int, seed: int) -> np.ndarray:
    """Exponential race ``argmax p_i / E_i`` with ``E_i`` clamped to at least ``2**-24``.

    The clamp caps ``p_i / E_i`` at ``p_i 2**24``: a token more than ``log(2**24) = 16.6`` nats below
    the top can no longer win, exactly as with a capped Gumbel noise.
    """
    return _race(logits, temperature, n, seed, lambda e: np.maximum(e, 2.0**-24))


def race_fp16_flush(logits, temperature: float, n: int, seed: int) -> np.ndarray:
    """Exponential race with float32 probabilities and ``E`` rounded to float16.

    float16 rounds ``E <= 2**-25`` to 0 (probability ``2**-25`` per token): ``p / 0 = inf`` wins, and for
    a masked token ``0 / 0 = NaN``, which ``argmax`` ranks above everything: a forbidden token is drawn.
    """
    return _race(logits, temperature, n, seed, lambda e: e.astype(np.float16).astype(np.float32), np.float32)


def bf16_tile_candidates(logits, temperature: float, n: int, seed: int, *, tile: int = 128) -> np.ndarray:
    """Exact per-tile Gumbel-max, but each tile's best score is stored in bf16 before the cross-tile
    argmax, which keeps the first (lowest) tile among equal candidates."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    starts, lengths, v = _runs(z, tile)
    tile_of = starts // tile
    first_run = np.flatnonzero(np.r_[True, tile_of[1:] != tile_of[:-1]])
    rng = np.random.default_rng(seed)

    def draw(m: int) -> np.ndarray:
        s = _scores(v, _gumbel_max_noise(lengths, m, rng))
        cand = round_bf16(np.maximum.reduceat(s, first_run, axis=1))
        t = _argmax(cand)
        inside = np.where(tile_of[None, :] == tile_of[first_run][t][:, None], s, -np.inf)
        return _pick_uniform(starts, lengths, _argmax(inside), rng)

    return _chunked(n, lengths.size, draw)


def _shared_counter_sampler(logits, temperature: float, n: int, seed: int, counters: np.ndarray) -> np.ndarray:
    """Gumbel-max where token ``i`` takes noise number ``counters[i]`` of one stream (shared numbers collide)."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    c = np.asarray(counters, dtype=np.int64)
    width = int(c.max()) + 1
    rng = np.random.default_rng(seed)

    def draw(m: int) -> np.ndarray:
        g = rng.gumbel(size=(m, width))
        return _argmax(_scores(z, g[:, c]))

    return _chunked(n, z.size + width, draw)


def tile_counters(v: int, tile: int, stride: int) -> np.ndarray:
    """Noise number of each token when tile ``t`` starts at stream offset ``t * stride``."""
    i = np.arange(v)
    return (i // tile) * stride + i % tile


def tile_seed_overlap(logits, temperature: float, n: int, seed: int, *, tile: int = 128,
                      stride: int = 127) -> np.ndarray:  # fmt: skip
    """Tile ``t`` reads its noise from stream offset ``t * stride`` but consumes ``tile`` numbers; with
    ``stride = tile - 1`` the last token of a tile and the first of the next share one Gumbel, and the
    lower logit of the pair is never drawn."""
    v = np.asarray(logits).size
    return _shared_counter_sampler(logits, temperature, n, seed, tile_counters(v, tile, stride))


def tile_local_counter(logits, temperature: float, n: int, seed: int, *, tile: int = 128) -> np.ndarray:
    """The noise counter is the offset inside the tile (``arange(BLOCK)``), not the global index: every
    tile reuses the same noise, and of the tokens at one offset only the largest logit can win."""
    v = np.asarray(logits).size
    return _shared_counter_sampler(logits, temperature, n, seed, tile_counters(v, tile, 0))


def shard_starts(v: int, ranks: int) -> np.ndarray:
    """First index of each of ``ranks`` near-equal contiguous shards of ``[0, v)`` (and ``v`` at the end)."""
    return np.linspace(0, v, ranks + 1).round().astype(np.int64)


def tp_shared_seed(logits, temperature: float, n: int, seed: int, *, ranks: int = 4) -> np.ndarray:
    """Tensor parallel, pathwise combine, but each rank keys the noise by its *local* index with the
    same seed: the tokens in slot ``j`` of every shard share one Gumbel."""
    v = np.asarray(logits).size
    bounds = shard_starts(v, ranks)
    i = np.arange(v)
    local = i - bounds[np.searchsorted(bounds, i, side="right") - 1]
    return _shared_counter_sampler(logits, temperature, n, seed, local)


def row_seed_collision(logits, temperature: float, n: int, seed: int) -> np.ndarray:
    """Rows 0 and 1 of a batch with the same logits, the row index missing from the noise counter.

    Draws are interleaved: draw ``2j`` is row 0 and draw ``2j + 1`` row 1 of sample ``j``.  Each row is
    exact, and the two are identical.
    """
    p = softmax(np.asarray(logits, dtype=np.float64), temperature)
    x = sample_inverse_cdf(p, (n + 1) // 2, np.random.default_rng(seed))
    return np.repeat(x, 2)[:n]


def sample_offset_shift(logits, temperature: float, n: int, seed: int) -> np.ndarray:
    """Sample ``s`` reads its V noise numbers from offset ``s`` of one stream (the offset advances by 1
    per sample instead of by V): sample ``s + 1`` sees sample ``s``'s noise shifted by one token."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    v = z.size
    stream = np.random.default_rng(seed).gumbel(size=n + v - 1)
    windows = np.lib.stride_tricks.sliding_window_view(stream, v)
    out = np.empty(n, dtype=np.int64)
    step = max(1, _CHUNK // v)
    for s0 in range(0, n, step):
        s1 = min(n, s0 + step)
        out[s0:s1] = _argmax(z[None, :] + windows[s0:s1])
    return out


def temperature_after_noise(logits, temperature: float, n: int, seed: int) -> np.ndarray:
    """``argmax (z + G) / T``: dividing after the noise rescales every score alike, so the draw is
    ``softmax(z)`` whatever ``T``."""
    return _run_sampler(logits, temperature, n, seed, lambda L, m, r: _gumbel_max_noise(L, m, r) / temperature)


def ties_lower_index_coarse(logits, temperature: float, n: int, seed: int, *, bits: int = 11) -> np.ndarray:
    """Uniforms with ``bits`` random bits (a float16 ``rand``), ``u = (k + 1/2) / 2**bits``, Gumbel noise,
    and ``argmax`` keeping the first of equal float32 scores: ties go to the lower index."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    starts, lengths, v = _runs(z)
    big = float(2**bits)
    rng = np.random.default_rng(seed)

    def draw(m: int) -> np.ndarray:
        k = _max_uniform_int(lengths, m, bits, rng)
        s = (v[None, :] + _gumbel_from_u((k + 0.5) / big)).astype(np.float32)
        g = _argmax(s)
        level = k[np.arange(m), g]
        r = level / (level + 1.0)  # P(token below the level) / P(token at most the level)
        size = lengths[g]
        u = rng.random(m)
        with np.errstate(divide="ignore", invalid="ignore"):
            first = np.floor(np.log1p(-u * -np.expm1(size * np.log(r))) / np.log(r))
        first = np.where(r > 0, first, 0.0)
        return starts[g] + np.clip(first, 0, size - 1).astype(np.int64)

    return _chunked(n, lengths.size, draw)


def last_tile_dropped(logits, temperature: float, n: int, seed: int, *, tile: int = 128) -> np.ndarray:
    """Grid of ``V // BLOCK`` tiles instead of ``ceil(V / BLOCK)``: the last partial tile is never
    sampled (the rest is exact, so it draws from the renormalized restriction)."""
    return sample_inverse_cdf(_law_last_tile_dropped(logits, temperature, tile), n, np.random.default_rng(seed))


def last_index_masked(logits, temperature: float, n: int, seed: int) -> np.ndarray:
    """The tile mask is ``offs < V - 1`` instead of ``offs < V``: token ``V - 1`` is never drawn."""
    return sample_inverse_cdf(_law_last_index_masked(logits, temperature), n, np.random.default_rng(seed))


def probs_as_logprobs(logits, temperature: float, n: int, seed: int) -> np.ndarray:
    """``argmax p_i + G_i``: probabilities where log-probabilities belong, so the draw is ``softmax(p)``,
    nearly uniform."""
    return _run_sampler(logits, temperature, n, seed, _gumbel_max_noise, values=lambda z, t: softmax(z, t))


def bf16_softmax_probs(logits, temperature: float) -> np.ndarray:
    """The probabilities a bf16 softmax produces: bf16 logits, bf16 ``exp``, sum and quotient."""
    x = round_bf16(np.asarray(logits, dtype=np.float64) / temperature)
    e = round_bf16(np.exp(x - x.max()))
    return round_bf16(e / round_bf16(e.sum()))


def bf16_softmax_inverse_cdf(logits, temperature: float, n: int, seed: int) -> np.ndarray:
    """Softmax computed in bf16 (logits rounded to 8 significant bits: a 0.125-nat grid at 20-30), then an
    exact float64 inverse-CDF draw from those probabilities."""
    p = bf16_softmax_probs(logits, temperature)
    return sample_inverse_cdf(p / p.sum(), n, np.random.default_rng(seed))


def tp_rank_by_max_logit(logits, temperature: float, n: int, seed: int, *, ranks: int = 2) -> np.ndarray:
    """Tensor-parallel factorized combine choosing the rank by ``max_j z_rj / T + G_r`` instead of its
    log-mass ``logsumexp_j z_rj / T + G_r``; each rank's local draw is exact."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    bounds = shard_starts(z.size, ranks)
    rng = np.random.default_rng(seed)
    top = np.array([z[a:b].max() for a, b in zip(bounds[:-1], bounds[1:])])
    rank = np.argmax(top[None, :] + rng.gumbel(size=(n, ranks)), axis=1)
    out = np.empty(n, dtype=np.int64)
    for r, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        idx = np.flatnonzero(rank == r)
        out[idx] = a + sample_inverse_cdf(softmax(z[a:b]), idx.size, rng)
    return out


def float32_cdf(probs: np.ndarray) -> np.ndarray:
    """The CDF of ``torch.multinomial``'s CPU kernel: a float32 running sum, divided by its total in
    float32, the last entry forced to 1."""
    c = np.cumsum(np.asarray(probs, dtype=np.float32), dtype=np.float32)
    c = (c / c[-1]).astype(np.float32)
    c[-1] = 1.0
    return c.astype(np.float64)


def float32_running_cdf(logits, temperature: float, n: int, seed: int) -> np.ndarray:
    """Inverse CDF over a float32 running sum: once the sum nears 1 its float32 step (6e-8) exceeds a
    tail token's probability, whose CDF interval then rounds to zero width (or to a full step)."""
    cdf = float32_cdf(softmax(np.asarray(logits, dtype=np.float64), temperature))
    u = np.random.default_rng(seed).random(n)
    return np.searchsorted(cdf, u, side="left").astype(np.int64)


# --------------------------------------------------------------------------------------------
# Exact laws
# --------------------------------------------------------------------------------------------


def _head_tail(case: Case) -> tuple[float, int]:
    """``(gap, M)`` for a case with one top token at index 0 and ``M`` equal logits ``gap`` nats below."""
    z = case.logits / case.temperature
    if not (np.isfinite(z).all() and z.size >= 2 and np.all(z[1:] == z[1]) and z[0] > z[1]):
        raise NotImplementedError("closed-form law needs one head token at index 0 and a flat tail")
    return float(z[0] - z[1]), int(z.size - 1)


def _head_tail_law(v: int, q_tail: float) -> np.ndarray:
    q = np.full(v, q_tail / (v - 1))
    q[0] = 1.0 - q_tail
    return q


def _law_rounds_to_one(case: Case) -> np.ndarray:
    gap, m = _head_tail(case)
    g_max = -math.log(-math.log1p(-(2.0**-24)))  # largest finite noise (u = 1 - 2**-24)
    g_min = -math.log(32 * math.log(2))  # smallest finite noise (u = 2**-32)
    if gap <= g_max - g_min:
        raise NotImplementedError("closed form needs the tail beyond the finite noise range")
    e1, e0 = 2.0**-25, 2.0**-32  # P(u = 1), P(u = 0)
    no_inf = math.exp(m * math.log1p(-e1))
    q_t = (1 - e1) * (1 - no_inf) + e0 * (no_inf - e0**m)
    return _head_tail_law(case.num_categories, q_t)


def _law_24bit(case: Case) -> np.ndarray:
    gap, m = _head_tail(case)
    g_max = -math.log(-math.log1p(-(2.0**-24)))
    g_min = -math.log(24 * math.log(2))
    if gap <= g_max - g_min:
        raise NotImplementedError("closed form needs the tail beyond the finite noise range")
    # The tail wins only when the head draws k = 0 (noise -inf) and some tail token does not.
    return _head_tail_law(case.num_categories, 2.0**-24 * (1 - 2.0 ** (-24 * m)))


def _law_race_floor(case: Case) -> np.ndarray:
    gap, m = _head_tail(case)
    f, r = 2.0**-24, math.exp(gap)
    # Tail wins iff max(E0, f) > R max(Emin, f), Emin ~ Exp(M): integrate over Emin.
    q_t = -math.expm1(-m * f) * math.exp(-r * f) + m / (m + r) * math.exp(-(m + r) * f)
    return _head_tail_law(case.num_categories, q_t)


def _law_fp16_flush(case: Case) -> np.ndarray:
    p = case.probs
    masked = p == 0
    e0 = -math.expm1(-(2.0**-25))  # P(float16(E) == 0)
    q_imp = -math.expm1(int(masked.sum()) * math.log1p(-e0))
    q = p * (1 - q_imp)
    q[masked] = q_imp / max(1, int(masked.sum()))
    return q


def _law_bf16_tiles(case: Case, tile: int = 128) -> np.ndarray:
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


def _law_ties_coarse(case: Case, bits: int = 11) -> np.ndarray:
    z = case.logits / case.temperature
    if not (case.flat and np.isfinite(z).all()):
        raise NotImplementedError("closed form needs flat finite logits")
    v = z.size
    big = 2**bits
    lvl = np.arange(big, dtype=np.float64)[:, None]
    i = np.arange(v, dtype=np.float64)[None, :]
    logp = -math.log(big) + special.xlogy(i, lvl / big) + (v - 1 - i) * np.log((lvl + 1) / big)
    return np.exp(special.logsumexp(logp, axis=0))


def _law_shared(z: np.ndarray, counters: np.ndarray) -> np.ndarray:
    """Law of Gumbel-max when tokens with equal ``counters`` share one Gumbel: per group, only its first
    largest logit can win, with probability proportional to ``exp(max z)``."""
    order = np.lexsort((np.arange(z.size), -z, counters))
    first = order[np.r_[True, counters[order][1:] != counters[order][:-1]]]
    q = np.zeros(z.size)
    w = z[first]
    with np.errstate(invalid="ignore"):
        q[first] = np.exp(w - w[np.isfinite(w)].max())
    return np.nan_to_num(q) / np.nan_to_num(q).sum()


def _law_tile_overlap(case: Case) -> np.ndarray:
    return _law_shared(case.logits / case.temperature, tile_counters(case.num_categories, 128, 127))


def _law_tile_local(case: Case) -> np.ndarray:
    return _law_shared(case.logits / case.temperature, tile_counters(case.num_categories, 128, 0))


def _law_tp_shared(case: Case, ranks: int = 4) -> np.ndarray:
    v = case.num_categories
    bounds = shard_starts(v, ranks)
    i = np.arange(v)
    return _law_shared(case.logits / case.temperature, i - bounds[np.searchsorted(bounds, i, side="right") - 1])


def _law_last_tile_dropped(logits, temperature: float, tile: int = 128) -> np.ndarray:
    p = softmax(np.asarray(logits, dtype=np.float64), temperature)
    keep = p.size - p.size % tile
    if keep == p.size:
        return p
    p[keep:] = 0.0
    return p / p.sum()


def _law_last_index_masked(logits, temperature: float) -> np.ndarray:
    p = softmax(np.asarray(logits, dtype=np.float64), temperature)
    p[-1] = 0.0
    return p / p.sum()


def _law_tp_rank_by_max(case: Case, ranks: int = 2) -> np.ndarray:
    z = case.logits / case.temperature
    bounds = shard_starts(z.size, ranks)
    top = np.array([z[a:b].max() for a, b in zip(bounds[:-1], bounds[1:])])
    pick = softmax(top)
    q = np.zeros(z.size)
    for r, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        q[a:b] = pick[r] * softmax(z[a:b])
    return q


def _law_float32_cdf(case: Case) -> np.ndarray:
    return np.diff(np.r_[0.0, float32_cdf(case.probs)])


def _law_bf16_softmax(case: Case) -> np.ndarray:
    p = bf16_softmax_probs(case.logits, case.temperature)
    return p / p.sum()


def _joint_identical(case: Case) -> np.ndarray:
    return np.diag(case.probs)


def _law_from_draws(sample: Sampler, case: Case, n: int, seed: int) -> np.ndarray:
    x = sample(case.logits, case.temperature, n, seed)
    return np.bincount(x, minlength=case.num_categories) / n


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------


def _f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).astype(np.float64)


@lru_cache(maxsize=1)
def mutant_cases() -> dict[str, Case]:
    """The logits cases on which the mutants show (float32-representable logits)."""
    rng = np.random.default_rng(20261205)
    c: dict[str, Case] = {}
    v = 262144
    z = np.full(v, -20.0)
    z[0] = 0.0
    c["tail20-V262144"] = Case("tail20-V262144", z, 1.0, "one token at 0, 262143 tokens 20 nats below (p_T=5.4e-4)",
                               tail_gap=19.0)  # fmt: skip
    z = np.full(v, -np.inf)
    z[:64] = _f32(rng.normal(0, 1, 64))
    c["grammar-V262144"] = Case("grammar-V262144", z, 1.0, "grammar mask: 64 allowed tokens, 262080 at -inf")
    c["flat30-V4096"] = Case("flat30-V4096", np.full(4096, 30.0), 1.0, "4096 equal logits at 30 (32 tiles)",
                             flat=True)  # fmt: skip
    c["flat-V1024"] = Case("flat-V1024", np.zeros(1024), 1.0, "1024 equal logits", flat=True)
    c["flat-V16"] = Case("flat-V16", np.zeros(16), 1.0, "16 equal logits (full contingency table)", flat=True)
    c["normal-V256"] = Case("normal-V256", _f32(rng.normal(0, 1, 256)), 1.0, "N(0, 1) logits, two 128-token tiles")
    z = _f32(rng.normal(0, 2, 1000))
    c["normal-V1000"] = Case("normal-V1000", z, 1.0, "N(0, 2^2) logits, 8 tiles (last one partial)")
    c["normal-V1000-T0.6"] = Case("normal-V1000-T0.6", z, 0.6, "N(0, 2^2) logits at temperature 0.6")
    c["normal-V1024-4ranks"] = Case("normal-V1024-4ranks", _f32(rng.normal(0, 2, 1024)), 1.0,
                                    "N(0, 2^2) logits over 4 shards of 256")  # fmt: skip
    v = 50257
    c["normal-V50257"] = Case("normal-V50257", _f32(rng.normal(0, 2, v)), 1.0,
                              "N(0, 2^2) logits, GPT-2 vocabulary size (81-token last tile)")  # fmt: skip
    z = _f32(rng.normal(0, 2, v))
    z[-1] = np.float32(np.log(0.02 / 0.98 * np.exp(z[:-1].astype(np.float64)).sum()))
    c["eos-V50257"] = Case("eos-V50257", _f32(z), 1.0, "GPT-2 size, end-of-text token V-1 at p = 0.02")
    c["bf16-V16"] = Case("bf16-V16", _f32(20 + rng.normal(0, 2, 16)), 1.0, "16 logits near 20, not bf16-representable")
    z = np.full(512, -8.0)
    z[0] = 4.0
    z[256:] = _f32(rng.normal(0, 0.5, 256))
    c["tp-peaked-vs-broad"] = Case("tp-peaked-vs-broad", z, 1.0,
                                   "rank 0: one logit at 4; rank 1: 256 logits near 0 (84% of the mass)")  # fmt: skip
    return c


# --------------------------------------------------------------------------------------------
# The catalogue
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mutant:
    """One biased (or, for controls, exact) sampler and where it shows.

    Attributes
    ----------
    name : str
    mechanism : str
        One line: what is wrong and what it does to the draws.
    sample : callable
        ``(logits (V,) float64, temperature, n, seed) -> int64 (n,)``.
    case : str
        Name of its case in :func:`mutant_cases`.
    law : callable or None
        ``law(case) -> q (V,)``, the sampler's exact distribution on its case; ``None``: estimated
        from ``law_draws`` draws.
    law_note : str
        ``"exact"`` or how the law was obtained.
    paired : bool
        Draws ``2j`` and ``2j + 1`` must be independent (rows or consecutive samples).
    joint : callable or None
        ``joint(case) -> (V, V)`` law of a pair, for paired mutants; ``None``: estimated.
    seed : int
        Seed of the draws in ``tests/test_mutants.py``.
    control : bool
        An exact sampler that must pass (a check on the machinery).
    """

    name: str
    mechanism: str
    sample: Sampler
    case: str
    law: Callable[[Case], np.ndarray] | None
    seed: int
    law_note: str = "exact"
    paired: bool = False
    joint: Callable[[Case], np.ndarray] | None = None
    control: bool = False
    law_draws: int = 2_000_000

    @property
    def the_case(self) -> Case:
        return mutant_cases()[self.case]


def _p(case: Case) -> np.ndarray:
    return case.probs


_M = Mutant
MUTANTS: tuple[Mutant, ...] = (
    _M(
        "uniform-rounds-to-one",
        "u = float32(k)*2^-32 rounds to 1.0 for 128 of 2^32 values: noise +inf, a random "
        "token wins (2^-25 per token per draw)",
        uniform_rounds_to_one,
        "tail20-V262144",
        _law_rounds_to_one,
        501,
    ),
    _M(
        "uniform-24bit",
        "u = (k>>8)*2^-24 <= 1-2^-24: Gumbel noise capped at 16.6 nats, tokens 20 nats below the top never win",
        uniform_24bit,
        "tail20-V262144",
        _law_24bit,
        502,
    ),
    _M(
        "race-exponential-floor",
        "argmax p/E with E clamped to >= 2^-24: p/E capped at p*2^24, the tail 20 nats down is starved",
        race_exponential_floor,
        "tail20-V262144",
        _law_race_floor,
        503,
    ),
    _M(
        "race-fp16-flush",
        "E in float16 is 0 with probability 2^-25: 0/0 = NaN wins argmax and a masked token is "
        "drawn (p/0 = inf for allowed ones)",
        race_fp16_flush,
        "grammar-V262144",
        _law_fp16_flush,
        504,
        law_note="exact impossible mass; allowed part approximated by p (float16 rounding of E < 1e-4 relative)",
    ),
    _M(
        "bf16-tile-candidates",
        "per-tile max score stored in bf16 (0.25 grid at 32-64): equal candidates resolve to the lower tile",
        bf16_tile_candidates,
        "flat30-V4096",
        _law_bf16_tiles,
        505,
    ),
    _M(
        "tile-seed-overlap",
        "tile t starts at stream offset t*127 but uses 128 numbers: tokens 127 and 128 share "
        "a Gumbel, the lower logit is never drawn",
        tile_seed_overlap,
        "normal-V256",
        _law_tile_overlap,
        506,
    ),
    _M(
        "row-seed-collision",
        "row index missing from the noise counter: rows with equal logits (parallel samples "
        "of one prompt) draw identical tokens",
        row_seed_collision,
        "flat-V16",
        _p,
        507,
        paired=True,
        joint=_joint_identical,
    ),
    _M(
        "sample-offset-shift",
        "sample s reads stream offset s (advance 1, not V): sample s+1 gets s's noise shifted by one token",
        sample_offset_shift,
        "flat-V16",
        _p,
        508,
        paired=True,
        joint=None,
        law_note="exact marginal; joint law of (s, s+1) simulated",
    ),
    _M(
        "tile-local-counter",
        "noise counter = offset inside the tile (depends on BLOCK_V): every tile reuses one "
        "noise vector, 7 in 8 tokens starved",
        tile_local_counter,
        "normal-V1000",
        _law_tile_local,
        509,
    ),
    _M(
        "temperature-after-noise",
        "argmax (z+G)/T instead of z/T+G: the scaling cannot change the argmax, draws follow softmax(z) for every T",
        temperature_after_noise,
        "normal-V1000-T0.6",
        lambda c: softmax(c.logits, 1.0),
        510,
    ),
    _M(
        "ties-lower-index-coarse",
        "11-bit uniforms (float16 rand) make equal scores common; argmax keeps the first, favouring low indices",
        ties_lower_index_coarse,
        "flat-V1024",
        _law_ties_coarse,
        511,
    ),
    _M(
        "last-tile-dropped",
        "grid V//BLOCK instead of cdiv(V, BLOCK): the last partial tile (81 tokens of 50257) is never sampled",
        last_tile_dropped,
        "normal-V50257",
        lambda c: _law_last_tile_dropped(c.logits, c.temperature),
        512,
    ),
    _M(
        "last-index-masked",
        "off-by-one mask offs < V-1: token V-1 (GPT-2's end-of-text) is never drawn",
        last_index_masked,
        "eos-V50257",
        lambda c: _law_last_index_masked(c.logits, c.temperature),
        513,
    ),
    _M(
        "probs-as-logprobs",
        "argmax p_i + G_i (probabilities for log-probabilities): draws follow softmax(p), nearly uniform",
        probs_as_logprobs,
        "normal-V1000",
        lambda c: softmax(c.probs),
        514,
    ),
    _M(
        "bf16-softmax-inverse-cdf",
        "logits and softmax in bf16 (0.125-nat grid near 20) before an exact inverse-CDF "
        "draw: probabilities off by up to 6%",
        bf16_softmax_inverse_cdf,
        "bf16-V16",
        _law_bf16_softmax,
        515,
    ),
    _M(
        "tp-shared-seed",
        "4 TP ranks key noise by local index with one seed: slot j of every shard shares a "
        "Gumbel, only the largest of the 4 wins",
        tp_shared_seed,
        "normal-V1024-4ranks",
        _law_tp_shared,
        516,
    ),
    _M(
        "tp-rank-by-max-logit",
        "TP factorized combine picks the rank by its largest logit instead of its log-mass: broad shards lose",
        tp_rank_by_max_logit,
        "tp-peaked-vs-broad",
        _law_tp_rank_by_max,
        517,
    ),
    _M(
        "float32-running-cdf",
        "inverse CDF over a float32 running sum (torch.multinomial on CPU): past 0.9995 a "
        "2e-9 step rounds away, the tail is never drawn",
        float32_running_cdf,
        "tail20-V262144",
        _law_float32_cdf,
        518,
    ),
)

CONTROLS: tuple[Mutant, ...] = (
    _M(
        "exact-inverse-cdf",
        "float64 inverse CDF of the exact softmax",
        exact_inverse_cdf,
        "tail20-V262144",
        _p,
        601,
        control=True,
    ),
    _M(
        "exact-gumbel-runs",
        "continuous Gumbel through the run machinery (max of M Gumbels = Gumbel + log M)",
        exact_gumbel_runs,
        "tail20-V262144",
        _p,
        602,
        control=True,
    ),
    _M(
        "exact-race-runs",
        "exact exponential race through the run machinery (min of M exponentials = Exp/M)",
        exact_race_runs,
        "grammar-V262144",
        _p,
        603,
        control=True,
    ),
    _M(
        "exact-gumbel-runs-flat",
        "continuous Gumbel through the run machinery, split at 128-token tiles",
        lambda z, t, n, s: _run_sampler(z, t, n, s, _gumbel_max_noise, tile=128),
        "flat30-V4096",
        _p,
        604,
        control=True,
    ),
)


def catalogue(*, controls: bool = False) -> list[Mutant]:
    """The mutants (and, with ``controls=True``, the exact control samplers after them)."""
    return list(MUTANTS) + (list(CONTROLS) if controls else [])


def mutant(name: str) -> Mutant:
    """The catalogue entry called ``name`` (controls included); ``KeyError`` names the missing one."""
    for m in catalogue(controls=True):
        if m.name == name:
            return m
    raise KeyError(f"no mutant named {name!r}")


# --------------------------------------------------------------------------------------------
# Planning, running, reporting
# --------------------------------------------------------------------------------------------


def law_of(m: Mutant) -> np.ndarray:
    """The mutant's law on its case (closed form, or simulated with a fixed seed)."""
    case = m.the_case
    if m.law is not None:
        try:
            return m.law(case)
        except NotImplementedError:
            pass
    return _law_from_draws(m.sample, case, m.law_draws, 10_000 + m.seed)


def joint_of(m: Mutant) -> np.ndarray | None:
    """Joint law of a pair (draws ``2j``, ``2j + 1``) for paired mutants (closed form, or simulated)."""
    if not m.paired:
        return None
    case = m.the_case
    if m.joint is not None:
        return m.joint(case)
    x = m.sample(case.logits, case.temperature, m.law_draws, 20_000 + m.seed)
    v = case.num_categories
    j = np.bincount(x[0::2][: x.size // 2] * v + x[1::2][: x.size // 2], minlength=v * v).reshape(v, v)
    return j / j.sum()


@lru_cache(maxsize=256)
def plan(name: str, alpha: float = 1e-3, power: float = 0.99) -> Detection:
    """The planned detection of mutant ``name`` by the suite on its case (cached)."""
    m = mutant(name)
    return plan_detection(m.the_case, law_of(m), alpha=alpha, power=power, paired=m.paired, joint=joint_of(m))


def planned_n(name: str, alpha: float = 1e-3, power: float = 0.99) -> int:
    """Smallest number of draws at which the suite flags mutant ``name`` with probability ``>= power``."""
    n = plan(name, alpha, power).n_min
    if not math.isfinite(n):
        raise ValueError(f"mutant {name!r} is not detectable by the suite on its case")
    return int(n)


def check_mutant(m: Mutant, n: int, seed: int, *, alpha: float = 1e-3) -> dict[str, Any]:
    """Draw ``n`` samples of ``m`` on its case and run the suite; one JSON-ready row."""
    case = m.the_case
    t0 = time.perf_counter()
    x = m.sample(case.logits, case.temperature, n, seed)
    t_draw = time.perf_counter() - t0
    fam = run_suite(x, case, alpha=alpha, paired=m.paired)
    members = fam.members()
    failed = [mm.name for mm in members if not mm.passed]
    worst = min(members, key=lambda mm: mm.adjusted_pvalue)
    return {
        "mutant": m.name,
        "control": m.control,
        "case": case.name,
        "n": int(n),
        "seed": int(seed),
        "flagged": not fam.passed,
        "failed_tests": failed,
        "smallest_holm_p": float(worst.adjusted_pvalue),
        "smallest_holm_p_test": worst.name,
        "draw_seconds": t_draw,
        "seconds": time.perf_counter() - t0,
    }


def catalogue_table(alpha: float = 1e-3, power: float = 0.99) -> list[dict[str, Any]]:
    """One JSON-ready row per mutant: mechanism, case, the catching test and the planned ``n``.

    ``n`` is the smallest number of draws at which the suite (Holm at family-wise ``alpha`` over the
    case's ``m`` tests) flags the mutant with probability ``>= power``, from the planning twins applied
    to the mutant's exact law (:func:`verification.detection.plan_detection`).
    """
    rows = []
    for m in MUTANTS:
        d = plan(m.name, alpha, power)
        best = d.best
        rows.append(
            {
                "mutant": m.name,
                "mechanism": m.mechanism,
                "case": m.case,
                "case_description": m.the_case.description,
                "catching_test": TEST_TITLES[best],
                "n": int(d.n_min) if math.isfinite(d.n_min) else None,
                "deviation": d.deviation[best],
                "per_test_n": {TEST_TITLES[k]: (int(v) if math.isfinite(v) else None) for k, v in d.n.items()},
                "law": m.law_note,
                "alpha": alpha,
                "power": power,
                "tests_in_family": d.m,
            }
        )
    return rows


def run_mutants(alpha: float = 1e-3, budget_s: float | None = None, seed: int = 20261129) -> list[dict[str, Any]]:
    """The main job's ``--mutants`` section: every mutant at its planned ``n`` must be flagged, and the
    exact sampler on each mutant case (plus the run-machinery controls) must pass at the largest ``n``
    planned on that case.

    Parameters
    ----------
    alpha : float
        Family-wise false-alarm rate of each case's suite (the planned ``n`` depends on it).
    budget_s : float, optional
        Stop starting new runs once this many seconds have passed (rows after that are marked
        ``skipped``).  About 20 s covers everything on two CPU cores.  A mutant row with ``ok`` false
        (escaped) or a control row with ``ok`` false (false alarm, probability <= ``alpha`` per control)
        should fail the job.
    seed : int
        Base seed; row ``k`` uses ``seed + k``.

    Returns
    -------
    list of dict
        JSON-ready rows: ``mutant``, ``control``, ``case``, ``catching_test``, ``n``, ``flagged``,
        ``ok`` (flagged for a mutant, not flagged for a control), ``failed_tests``, ``seconds``.
    """
    t0 = time.perf_counter()
    rows = []
    n_by_case: dict[str, int] = {}
    paired_cases = set()
    for m in MUTANTS:
        n_by_case[m.case] = max(n_by_case.get(m.case, 0), planned_n(m.name, alpha))
        if m.paired:
            paired_cases.add(m.case)
    entries: list[tuple[Mutant, bool]] = [(m, True) for m in MUTANTS]
    # Controls: the exact inverse CDF on every mutant case, then the run-machinery controls, each at
    # the largest n planned on its case.
    for k, case in enumerate(n_by_case):
        ctl = Mutant(f"exact-inverse-cdf@{case}", "float64 inverse CDF of the exact softmax", exact_inverse_cdf,
                     case, _p, 700 + k, paired=case in paired_cases, control=True)  # fmt: skip
        entries.append((ctl, False))
    entries += [(c, False) for c in CONTROLS if c.name != "exact-inverse-cdf"]
    for k, (m, is_mutant) in enumerate(entries):
        if budget_s is not None and time.perf_counter() - t0 > budget_s:
            rows.append({"mutant": m.name, "control": m.control, "case": m.case, "skipped": True, "ok": None})
            continue
        if is_mutant:
            d = plan(m.name, alpha)
            n, test = int(d.n_min), TEST_TITLES[d.best]
        else:
            n, test = n_by_case[m.case], "-"
        row = check_mutant(m, n, seed + k, alpha=alpha)
        row["catching_test"] = test
        row["ok"] = (not row["flagged"]) if m.control else row["flagged"]
        row["skipped"] = False
        rows.append(row)
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    """Text table of :func:`run_mutants` rows."""
    w = max([6] + [len(r["mutant"]) for r in rows])
    head = f"{'mutant':{w}} {'case':19} {'n':>8} {'catching test':28} {'flagged':>7}  verdict"
    out = [head, "-" * len(head)]
    for r in rows:
        if r.get("skipped"):
            out.append(f"{r['mutant']:{w}} {r['case']:19} {'':>8} {'':28} {'':>7}  skipped (budget)")
            continue
        verdict = "ok" if r["ok"] else ("CONTROL FAILED" if r["control"] else "ESCAPED")
        out.append(
            f"{r['mutant']:{w}} {r['case']:19} {r['n']:>8d} {r['catching_test'][:28]:28} "
            f"{str(r['flagged']):>7}  {verdict}"
        )
    return "\n".join(out)


def budgets(alpha: float = 1e-3) -> list:
    """Seeds, sizes and levels of ``tests/test_mutants.py`` as :class:`verification.budget.Budget` entries.

    One ``planted`` entry per mutant (caught at its planned ``n`` with power 0.99) and one ``null`` entry
    per mutant for the exact sampler run through the same suite at the same ``n`` (family-wise level
    ``alpha`` each), ready to be listed in :mod:`verification.budget`.
    """
    from .budget import Budget

    out = []
    for m in MUTANTS:
        n = planned_n(m.name, alpha)
        out.append(Budget(f"mutants.{m.name}", seed=m.seed, n=n, alpha=alpha, kind="planted"))
        out.append(Budget(f"mutants.{m.name}.exact", seed=m.seed + EXACT_SEED_OFFSET, n=n, alpha=alpha))
    return out


#: The exact sampler that shadows mutant ``m`` in the tests uses seed ``m.seed + EXACT_SEED_OFFSET``.
EXACT_SEED_OFFSET = 1000


# --------------------------------------------------------------------------------------------
# Documentation generator
# --------------------------------------------------------------------------------------------


def confirm(name: str, n: int, seeds: list[int], *, alpha: float = 1e-3) -> int:
    """How many of ``seeds`` make the suite flag mutant ``name`` at ``n`` draws."""
    m = mutant(name)
    return sum(check_mutant(m, n, s, alpha=alpha)["flagged"] for s in seeds)


def _markdown(alpha: float, power: float, reps: int, seconds: float, rows: list[dict[str, Any]],
              controls: list[dict[str, Any]]) -> str:  # fmt: skip
    lines = [
        "# Mutants: realistic sampler bugs and the draws that catch them",
        "",
        f"Generated by `python -m verification.mutants --out docs/mutants.md` in {seconds:.0f} s. Do not edit by hand.",
        "",
        "Each mutant is a sampler with one defect modelled on a real failure (`verification/mutants.py`), run",
        "on the case where the defect shows. The suite is the family of tests of",
        "`verification/detection.py` on that case, decided by Holm at family-wise",
        f"alpha = {alpha:g} over its m tests. **n** is the smallest number of draws at which the suite flags",
        f"the mutant with probability >= {power}, planned from the mutant's exact law with each test's planning",
        "twin at level alpha/m (Holm rejects whatever Bonferroni rejects, so the family has at least that",
        f"power). **Confirmed** runs the mutant at n on {reps} fresh seeds and counts the runs the suite flags;",
        "**at n/4** does the same with a quarter of the draws, to show that n is near the threshold rather",
        "than far above it.",
        "",
        "| mutant | mechanism | case | catching test | n | deviation seen by that test | confirmed at n | at n/4 |",
        "|---|---|---|---|---:|---|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| `{r['mutant']}` | {r['mechanism']} | `{r['case']}` | {r['catching_test']} | {r['n']:,} | "
            f"{r['deviation']} | {r['confirmed']}/{reps} | {r['quarter']}/{reps} |"
        )
    lines += [
        "",
        "## Every test's n",
        "",
        "Draws each test alone needs (at alpha/m, power 0.99); `-` means the test cannot see the defect.",
        "",
    ]
    names = list(TEST_TITLES.values())
    lines.append("| mutant | " + " | ".join(names) + " |")
    lines.append("|---|" + "---:|" * len(names))
    for r in rows:
        cells = [f"{r['per_test_n'][t]:,}" if r["per_test_n"].get(t) else "-" for t in names]
        lines.append(f"| `{r['mutant']}` | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Cases",
        "",
        "| case | description | m tests |",
        "|---|---|---:|",
    ]
    seen = set()
    for r in rows:
        if r["case"] not in seen:
            seen.add(r["case"])
            lines.append(f"| `{r['case']}` | {r['case_description']} | {r['tests_in_family']} |")
    lines += [
        "",
        "## Controls",
        "",
        "Exact samplers run through the same fast machinery as the mutants, at the largest n planned on",
        "their case, must pass the same suite:",
        "",
        "| control | what it checks | case | n | passed |",
        "|---|---|---|---:|---|",
    ]
    for c in controls:
        lines.append(f"| `{c['mutant']}` | {c['mechanism']} | `{c['case']}` | {c['n']:,} | {c['passed']} |")
    lines += ["", "## Laws", "", "How each mutant's law (the input of the planning) was obtained:", ""]
    for m in MUTANTS:
        lines.append(f"- `{m.name}`: {m.law_note}")
    lines += [
        "",
        "## Notes",
        "",
        "- `row-seed-collision` and `sample-offset-shift` draw from the exact marginal law: only the test of",
        "  paired draws sees them, so the suite must be handed pairs (rows 0 and 1; samples s and s+1).",
        "  The pairs test coarsens a large vocabulary into at most 32 rank classes, yet the shift still",
        "  shows there: measured, `sample-offset-shift` on `flat-V1024` was flagged on 10 of 10 seeds at",
        "  2,000 draws, and on `normal-V1000` on 3 of 10 at 2,000 and 10 of 10 at 8,000 (pairs test alone,",
        "  level 1e-3/6).",
        "- Mutants that starve or flood a far tail (the first three, `float32-running-cdf`) are seen by the",
        "  tail test; the chi-square tests pool those tokens into one bin and need 4-5 times more draws.",
        "",
    ]
    return "\n".join(lines)


def generate_docs(*, alpha: float = 1e-3, power: float = 0.99, reps: int = 10) -> str:
    """Plan, confirm on ``reps`` seeds, and render ``docs/mutants.md``."""
    t0 = time.perf_counter()
    rows = catalogue_table(alpha, power)
    for k, r in enumerate(rows):
        seeds = [1_000_000 + 1000 * k + i for i in range(reps)]
        r["confirmed"] = confirm(r["mutant"], r["n"], seeds, alpha=alpha)
        r["quarter"] = confirm(r["mutant"], max(2, r["n"] // 4), seeds, alpha=alpha)
        print(f"{r['mutant']:26} n={r['n']:>9,} {r['catching_test']:30} confirmed {r['confirmed']}/{reps} "
              f"quarter {r['quarter']}/{reps}", flush=True)  # fmt: skip
    n_by_case: dict[str, int] = {}
    for r in rows:
        n_by_case[r["case"]] = max(n_by_case.get(r["case"], 0), r["n"])
    controls = []
    for c in CONTROLS:
        n = n_by_case[c.case]
        res = check_mutant(c, n, 2_000_000 + c.seed, alpha=alpha)
        controls.append({"mutant": c.name, "mechanism": c.mechanism, "case": c.case, "n": n,
                         "passed": "yes" if not res["flagged"] else "NO"})  # fmt: skip
    return _markdown(alpha, power, reps, time.perf_counter() - t0, rows, controls)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m verification.mutants", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="write the markdown table here (default: print the run table)")
    ap.add_argument("--alpha", type=float, default=1e-3)
    ap.add_argument("--reps", type=int, default=10, help="seeds per confirmation")
    args = ap.parse_args(argv)
    if args.out:
        text = generate_docs(alpha=args.alpha, reps=args.reps)
        with open(args.out, "w") as f:
            f.write(text)
        return 0
    rows = run_mutants(alpha=args.alpha)
    print(format_table(rows))
    return 0 if all(r["ok"] for r in rows if not r.get("skipped")) else 1


if __name__ == "__main__":
    raise SystemExit(main())
