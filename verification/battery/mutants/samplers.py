"""The biased samplers of the mutant catalogue, and the exact machinery that simulates them fast.

Every sampler has the signature ``sample(logits (V,) float64, temperature, n, seed) -> int64 (n,)``;
each reproduces one mechanism of :data:`verification.mutants.MUTANTS` (or, for the controls, an exact
sampler run through the same machinery).

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
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from flashsampling.reference import sample_inverse_cdf, softmax

#: The signature every sampler of the catalogue has.
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
    return sample_inverse_cdf(last_tile_dropped_probs(logits, temperature, tile), n, np.random.default_rng(seed))


def last_index_masked(logits, temperature: float, n: int, seed: int) -> np.ndarray:
    """The tile mask is ``offs < V - 1`` instead of ``offs < V``: token ``V - 1`` is never drawn."""
    return sample_inverse_cdf(last_index_masked_probs(logits, temperature), n, np.random.default_rng(seed))


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


def exact_gumbel_runs_tiled(logits, temperature: float, n: int, seed: int, *, tile: int = 128) -> np.ndarray:
    """Control: continuous Gumbel-max through the run machinery with runs split at ``tile`` boundaries."""
    return _run_sampler(logits, temperature, n, seed, _gumbel_max_noise, tile=tile)


def last_tile_dropped_probs(logits, temperature: float, tile: int = 128) -> np.ndarray:
    """The softmax restricted to the whole tiles of ``tile`` tokens (what a ``V // BLOCK`` grid samples)."""
    p = softmax(np.asarray(logits, dtype=np.float64), temperature)
    keep = p.size - p.size % tile
    if keep == p.size:
        return p
    p[keep:] = 0.0
    return p / p.sum()


def last_index_masked_probs(logits, temperature: float) -> np.ndarray:
    """The softmax with token ``V - 1`` removed (what a mask ``offs < V - 1`` samples)."""
    p = softmax(np.asarray(logits, dtype=np.float64), temperature)
    p[-1] = 0.0
    return p / p.sum()
