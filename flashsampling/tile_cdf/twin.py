"""The NumPy twin of the tile inverse-CDF sampler of proofs/tile_inverse_cdf.md (of both its kernels: the prototype
on given logits and the stream fused into the Gluon kernel).

Stage 1 (:func:`tile_stage1_np`, the twin of :func:`flashsampling.tile_cdf.kernel.launch_tile_cdf_stage1` and of
:func:`flashsampling.tile_cdf.fused.tile_cdf_draw`): per row and tile of ``block_v`` columns, the maximum score ``m``,
the integer weights ``q`` (:func:`flashsampling.tile_cdf.weights.tile_weights_np`) and their sum ``Q``, the 128-bit
uniform ``U`` of the Philox block ``(tile_start, row, sample, STREAM_TILE)``, ``t = floor(U Q / 2**128)`` and the draw:
the number of columns whose cumulative weight is at most ``t`` (the first column whose cumulative weight exceeds ``t``).

Stage 2 (:func:`tile_logmass`, then :func:`draw_tiles_np`, as :func:`flashsampling.grouped.choose_groups_np`): the tile
by Gumbel-max over ``L = m + ln Q - 55 ln 2`` with the group stream's noise, as the grouped variant chooses its groups.
Given the tile, the result's law is ``e^m q / sum e^m q`` within ``2**-128`` per token; the tile draw is the grouped
sampler's, exact on the 64-bit grid up to its float64 error (proofs/tile_inverse_cdf.md, Propositions 1 and 2).

The order in which a tile's cumulative weights run is part of the stream: natural for the prototype,
:func:`slot_order` for the fused kernel (any fixed order has the same law).
"""

from __future__ import annotations

import math

import numpy as np

from ..grouped import choose_groups_np, select_group
from ..noise import STREAM_GROUP, STREAM_TILE, group_noise_np, philox4x32_np, split_seed
from ..twin import sample_twin_many
from .weights import WEIGHT_BITS, tile_weights_np


def mulhi_u128_u64_np(w0, w1, w2, w3, q) -> np.ndarray:
    """``floor(U * q / 2**128)`` elementwise, ``U = w0 + w1 2**32 + w2 2**64 + w3 2**96``, in exact integers."""
    words = np.broadcast_arrays(*(np.asarray(x, dtype=np.uint64) for x in (w0, w1, w2, w3, q)))
    out = [
        ((int(a) | int(b) << 32 | int(c) << 64 | int(d) << 96) * int(e)) >> 128
        for a, b, c, d, e in zip(*(x.reshape(-1) for x in words))
    ]
    return np.array(out, dtype=np.uint64).reshape(words[0].shape)


def pad_tiles(s: np.ndarray, block_v: int) -> np.ndarray:
    """Float32 scores ``[B, V]`` as tiles ``[B, K, block_v]``, the last one padded with ``-inf``."""
    B, V = s.shape
    K = -(-V // block_v)
    out = np.full((B, K * block_v), -np.inf, dtype=np.float32)
    out[:, :V] = s
    return out.reshape(B, K, block_v)


def slot_order(block_v: int = 256, chunk: int = 32) -> np.ndarray:
    """The fused kernel's draw order of a tile's columns (:func:`flashsampling.tile_cdf.fused.tile_cdf_draw`):
    ``order[rank]`` is the tile column of rank ``rank``.  Column ``c * chunk + 8j + 2q + e`` (chunk ``c``, token pair
    ``(j, q)`` of the chunk, element ``e``) has rank ``((q * chunk / 8 + j) * (block_v / chunk) + c) * 2 + e``: the
    kernel's slots in the order ``(q, j)``, each slot's tokens by chunk, then by element.  Any fixed order gives the
    same law (the inverse CDF is exact in every order); this one lets each thread count its own tokens."""
    col = np.arange(block_v)
    q, j, c, e = (col % 8) // 2, (col % chunk) // 8, col // chunk, col % 2
    return np.argsort(((q * (chunk // 8) + j) * (block_v // chunk) + c) * 2 + e, kind="stable")


def _tile_draws(tiles: np.ndarray, starts, rows, samples, seed: int, order: np.ndarray | None = None):
    """``(m, Q, local draw)`` of float32 tiles ``[..., block_v]`` whose uniforms come from the Philox blocks
    ``(starts, rows, samples, STREAM_TILE)`` (broadcast against ``tiles``' leading axes).  The cumulative weights
    run over the columns in ``order`` (natural order if ``None``); the draw is a tile column either way."""
    m = tiles.max(axis=-1)
    q = tile_weights_np(tiles, m[..., None])
    cum = np.cumsum(q if order is None else q[..., order], axis=-1, dtype=np.uint64)
    total = cum[..., -1]
    lo, hi = split_seed(seed)
    w0, w1, w2, w3 = philox4x32_np(starts, rows, samples, STREAM_TILE, lo, hi)
    t = mulhi_u128_u64_np(w0, w1, w2, w3, total)
    rank = np.sum(cum <= t[..., None], axis=-1)
    # (A tile of weight 0 -- all -inf, never chosen -- counts every column: rank block_v, clamped as the kernel does.)
    return m, total, rank if order is None else order[np.minimum(rank, order.size - 1)]


def tile_stage1_np(z32: np.ndarray, inv32: np.ndarray, seed: int, *, block_v: int = 256, sample=0,
                   order: np.ndarray | None = None):  # fmt: skip
    """``(m [B, K] float32, Q [B, K] uint64, draw [B, K] int64)`` for float32 logits ``[B, V]`` and per-row float32
    ``1/T > 0``; ``sample`` is an int or an array broadcast against ``[B, K]`` (one draw per entry); ``order``: the
    tile's draw order (:func:`slot_order` for the fused kernel; natural order if ``None``)."""
    z32 = np.asarray(z32, dtype=np.float32)
    s = (z32 * np.asarray(inv32, dtype=np.float32)[:, None]).astype(np.float32)
    tiles = pad_tiles(s, block_v)
    B, K, _ = tiles.shape
    starts = (np.arange(K, dtype=np.uint64) * block_v)[None, :]
    rows = np.arange(B, dtype=np.uint64)[:, None]
    m, total, local = _tile_draws(tiles, starts, rows, np.asarray(sample, dtype=np.uint64), seed, order)
    return m, total, starts.astype(np.int64) + local


def tile_logmass(m: np.ndarray, total: np.ndarray) -> np.ndarray:
    """``L = m + ln Q - 55 ln 2`` in float64 (``-inf`` where ``Q = 0``): the log of ``sum_i e^m q_i 2**-55``."""
    with np.errstate(divide="ignore"):
        log_q = np.log(np.asarray(total, dtype=np.float64))
    return np.where(np.asarray(total) > 0, np.asarray(m, np.float64) + log_q - WEIGHT_BITS * math.log(2.0), -np.inf)


def tile_cdf_sampler_np(logits: np.ndarray, temperature: float, n: int, seed: int, *, block_v: int = 256,
                        order: np.ndarray | None = None):  # fmt: skip
    """``n`` samples (int64) of one row by the two-level rule: sample ``i`` chooses its tile with the group noise of
    sample ``i`` and draws inside it with the tile uniform of sample ``i``, over the tile's columns in ``order``
    (natural order if ``None``; :func:`slot_order` for the fused kernel's).  ``temperature = 0`` keeps the argmax
    path (:func:`flashsampling.twin.sample_twin_many`, greedy)."""
    if temperature == 0:
        return sample_twin_many(np.asarray(logits, dtype=np.float32), 0.0, seed=seed, num_samples=n)
    if not temperature > 0:
        raise ValueError(f"temperature={temperature} must be >= 0")
    z32 = np.asarray(logits, dtype=np.float32)[None, :]
    inv32 = np.float32(1.0) / np.array([temperature], dtype=np.float32)
    m, total, _ = tile_stage1_np(z32, inv32, seed, block_v=block_v)
    K = m.shape[1]
    starts = np.arange(K, dtype=np.int64) * block_v
    choice = choose_groups_np(tile_logmass(m[0], total[0]), starts, seed, n)
    samples = np.arange(n, dtype=np.uint64)
    tiles = pad_tiles((z32 * inv32[:, None]).astype(np.float32), block_v)[0]
    # Every sample's draw inside its own chosen tile, with the sample's uniform.
    out = np.empty(n, dtype=np.int64)
    for k in np.unique(choice):
        sel = np.flatnonzero(choice == k)
        start = np.uint64(k * block_v)
        out[sel] = int(start) + _tile_draws(tiles[k], start, np.uint64(0), samples[sel], seed, order)[2]
    return out


def draw_tiles_np(logmass: np.ndarray, seed: int, block_v: int = 256) -> np.ndarray:
    """Stage 2 for sample 0 of every row, the vocabulary tile it draws from: ``argmax_k (L[r, k] + G'_k)`` in float64
    with the group stream's float64 noise of the block ``(k * block_v, row, 0, STREAM_GROUP)`` (as
    :func:`~flashsampling.grouped.choose_groups_np`), exact ties by its key; ``[B]`` int64."""
    B, K = logmass.shape
    starts = (np.arange(K, dtype=np.uint32) * np.uint32(block_v))[None, :]
    g, key = group_noise_np(seed, np.arange(B, dtype=np.uint32)[:, None], starts, 0, STREAM_GROUP)
    return select_group(logmass + g, key).astype(np.int64)


def fused_tile_cdf_np(z32: np.ndarray, inv32: np.ndarray, seed: int, *, block_v: int = 256, chunk: int = 32):
    """Twin of :func:`flashsampling.tile_cdf.sampling.sample_fused_tile_cdf` (one token per row, int64 ``[B]``) for
    float32 logits ``[B, V]`` and per-row float32 ``1/T > 0``: stage 1 in the kernel's slot order, then the tile by
    :func:`draw_tiles_np`."""
    m, total, draw = tile_stage1_np(z32, inv32, seed, block_v=block_v, order=slot_order(block_v, chunk))
    k = draw_tiles_np(tile_logmass(m, total), seed, block_v)
    return draw[np.arange(draw.shape[0]), k]
