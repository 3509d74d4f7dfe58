"""The NumPy twin of the fused kernel's selection rule, vectorized for large-sample statistics.

Given float32 logits ``z`` (what the kernel computes in its accumulator) the kernel returns, per
row and sample, the index maximizing the float32 score ``s_i = z_i * (1/T) + G_i`` (``s_i = z_i`` for
a greedy row), ties in ``s`` broken by the larger tie-break key (see
:mod:`flashsampling.noise`).  This module computes exactly that, so that
``tests/test_replay.py`` can bind kernel and twin bit for bit and the statistical battery can draw
millions of samples on the CPU from code proven equal to the kernel.
"""

from __future__ import annotations

import numpy as np

from .noise import STREAM_TOKEN, token_noise_np


def inverse_temperature32(temperature, num_rows: int) -> np.ndarray:
    """float32 ``1/T`` per row as the launcher computes it (0 marks a greedy row)."""
    t = np.broadcast_to(np.asarray(temperature, dtype=np.float32), (num_rows,))
    with np.errstate(divide="ignore"):
        return np.where(t > 0, np.float32(1.0) / np.where(t > 0, t, np.float32(1.0)), np.float32(0.0)).astype(
            np.float32
        )


def select(scores: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Row-wise argmax of ``scores`` with exact ties broken by the larger ``keys | 1`` (uint32).

    ``keys`` is an array or a :class:`~flashsampling.noise.TieKeys`, converted only when some row has
    an exact tie.  As in the kernel: a candidate's key is its tie-break key (odd) and a non-candidate's 0; equal
    keys (probability ``2**-31`` per tied pair) fall to the lower index.  A row whose scores are all
    ``-inf`` (no mass) returns its first index, as the kernel does.
    """
    m = scores.max(axis=-1, keepdims=True)
    hit = (scores == m) & (m > -np.inf)
    if not (hit.sum(axis=-1) > 1).any():  # no exact tie: the keys are not needed (nor evaluated)
        return np.argmax(hit, axis=-1)
    k = np.where(hit, np.asarray(keys) | np.uint32(1), np.uint32(0))
    return np.argmax(k, axis=-1)


def sample_twin(
    logits,
    temperature=1.0,
    *,
    seed: int | np.ndarray,
    num_samples: int = 1,
    row_offset: int = 0,
    sample_offset: int = 0,
    chunk_elements: int = 1 << 15,
) -> np.ndarray:
    """Tokens the fused kernel returns for float32 ``logits`` of shape (B, V), computed in NumPy.

    Parameters
    ----------
    logits : array, shape (B, V)
        Converted to float32 (the kernel's accumulator precision).  ``-inf`` masks a token.
    temperature : float or array of shape (B,)
        ``0`` means greedy.
    seed : int, or an integer array of shape (B,)
        The 64-bit seed given to the kernel; an array holds per-request seeds (row ``b`` keyed by its own seed
        ``seed[b]``, int64 values read as their two's-complement bits, and row counter 0, whatever its position:
        :func:`flashsampling.sample`'s contract).
    num_samples : int
        Samples per row; sample ``s`` uses noise counter ``sample_offset + s``.
    row_offset : int
        Global row number of the first row (the noise is keyed by the global row; not used with per-request seeds).
    chunk_elements : int
        Work size per NumPy step (memory control only; the result does not depend on it).

    Returns
    -------
    numpy.ndarray, int64, shape (B, num_samples)
    """
    z = np.atleast_2d(np.asarray(logits, dtype=np.float32))
    b, v = z.shape
    row_seeds = isinstance(seed, np.ndarray) and seed.ndim > 0
    if row_seeds and seed.shape != (b,):
        raise ValueError(f"per-request seeds must have shape ({b},), got {seed.shape}")
    inv = inverse_temperature32(temperature, b)[:, None]
    out = np.empty((b, num_samples), dtype=np.int64)
    cols = np.arange(v, dtype=np.uint32)[None, :]
    rows_per_chunk = max(1, chunk_elements // max(v, 1))
    for s in range(num_samples):
        for r0 in range(0, b, rows_per_chunk):
            r1 = min(b, r0 + rows_per_chunk)
            if row_seeds:  # the key is the row's seed, the counter's row field 0
                keyed, rows = seed[r0:r1, None], np.zeros((r1 - r0, 1), dtype=np.uint32)
            else:
                keyed, rows = seed, np.arange(row_offset + r0, row_offset + r1, dtype=np.uint32)[:, None]
            g, key = token_noise_np(keyed, rows, cols, sample_offset + s, STREAM_TOKEN, lazy_keys=True)
            zz = z[r0:r1]
            ii = inv[r0:r1]
            with np.errstate(over="ignore", invalid="ignore"):
                sc = np.where(ii == 0, zz, zz * ii + g).astype(np.float32)
            out[r0:r1, s] = select(sc, key)
    return out


def sample_twin_many(
    logits_row, temperature: float, *, seed: int, num_samples: int, chunk_elements: int = 1 << 15
) -> np.ndarray:
    """Many samples of one row (shape (V,)) with the kernel's rule; returns int64 (num_samples,).

    Vectorized over samples: sample ``s`` of row 0 uses counter ``(index, 0, s)``, exactly as
    ``sample_twin(logits_row[None], ..., num_samples=num_samples)[0]``.
    """
    z = np.asarray(logits_row, dtype=np.float32)[None, :]
    v = z.shape[1]
    inv = inverse_temperature32(temperature, 1)[0]
    cols = np.arange(v, dtype=np.uint32)[None, :]
    out = np.empty(num_samples, dtype=np.int64)
    per = max(1, chunk_elements // max(v, 1))
    for s0 in range(0, num_samples, per):
        s1 = min(num_samples, s0 + per)
        smp = np.arange(s0, s1, dtype=np.uint32)[:, None]
        g, key = token_noise_np(seed, 0, cols, smp, STREAM_TOKEN, lazy_keys=True)
        with np.errstate(over="ignore", invalid="ignore"):
            sc = z if inv == 0 else (z * inv + g).astype(np.float32)
        if inv == 0:
            sc = np.broadcast_to(z, g.shape)
        out[s0:s1] = select(sc, key)
    return out


# --------------------------------------------------------------------------------------------
# Top-k (the fused top-k sampler, flashsampling.kernels.topk)
# --------------------------------------------------------------------------------------------


def top_k_columns(logits: np.ndarray, k) -> tuple[np.ndarray, np.ndarray]:
    """Per row of float32 ``logits (B, V)``, the columns of its kept set: the first ``k`` finite tokens in the order
    (logit descending, index ascending), ``ties="low_index"``.

    Returns ``(columns, kept)``, int64 and bool ``(B, K)`` with ``K = max(min(k, V))``: row ``b``'s first
    ``min(k_b, V)`` ranks, sorted by column (so that :func:`select`'s tie rule, the first column among equal keys, is
    the lower index); ``kept`` marks those of rank below ``k_b`` whose logit is finite (``-inf`` is never kept).
    """
    z = np.atleast_2d(np.asarray(logits, dtype=np.float32))
    b, v = z.shape
    kk = np.minimum(np.broadcast_to(np.asarray(k, dtype=np.int64), (b,)), v)
    width = int(kk.max())
    # A stable sort of -z: z descending, equal logits (-0.0 == +0.0 included) by index; -inf and NaN last.
    order = np.argsort(-z, axis=1, kind="stable")[:, :width]
    kept = (np.arange(width)[None, :] < kk[:, None]) & (np.take_along_axis(z, order, axis=1) > -np.inf)
    by_index = np.argsort(order, axis=1)
    return np.take_along_axis(order, by_index, axis=1), np.take_along_axis(kept, by_index, axis=1)


def sample_topk_twin(
    logits,
    top_k,
    temperature=1.0,
    *,
    seed: int,
    num_samples: int = 1,
    row_offset: int = 0,
    sample_offset: int = 0,
    col_offset: int = 0,
) -> np.ndarray:
    """Tokens the fused top-k sampler returns for float32 ``logits (B, V)``, computed in NumPy.

    Row ``b`` draws ``argmax_{i in S_b} z_i / T + G(seed, row_offset + b, col_offset + i, sample_offset + s)`` over
    its kept set ``S_b`` (:func:`top_k_columns`), ties in the float32 score by the larger tie-break key, then the
    lower index; a greedy row (``T = 0``) scores ``z_i``.  The noise is :func:`~flashsampling.noise.token_noise_np`,
    the plain twin's (:func:`sample_twin`), so a row whose ``k`` covers its finite tokens gets the plain twin's token.

    Parameters
    ----------
    logits : array, shape (B, V)
        Converted to float32.  ``-inf`` masks a token.
    top_k : int or array of shape (B,)
        ``k >= 1`` per row; ``k >= V`` keeps every finite token.
    temperature, seed, num_samples, row_offset, sample_offset
        As in :func:`sample_twin`.
    col_offset : int
        Global index of column 0 (a vocabulary shard): the noise is keyed by, and the tokens are, global indices.

    Returns
    -------
    numpy.ndarray, int64, shape (B, num_samples)
        Global indices; a row with no finite logit returns ``col_offset + V - 1`` (the kernel's clamp).
    """
    z = np.atleast_2d(np.asarray(logits, dtype=np.float32))
    b, v = z.shape
    cols, kept = top_k_columns(z, top_k)
    zz = np.take_along_axis(z, cols, axis=1)
    inv = inverse_temperature32(temperature, b)[:, None]
    index = cols + col_offset
    rows = np.arange(row_offset, row_offset + b, dtype=np.uint32)[:, None]
    out = np.empty((b, num_samples), dtype=np.int64)
    for s in range(num_samples):
        g, key = token_noise_np(seed, rows, index.astype(np.uint32), sample_offset + s, STREAM_TOKEN, lazy_keys=True)
        with np.errstate(over="ignore", invalid="ignore"):
            sc = np.where(kept, np.where(inv == 0, zz, zz * inv + g), -np.inf).astype(np.float32)
        out[:, s] = np.take_along_axis(index, select(sc, key)[:, None], axis=1)[:, 0]
    out[~kept.any(axis=1)] = col_offset + v - 1
    return out


def sample_topk_twin_many(
    logits_row, top_k: int, temperature: float, *, seed: int, num_samples: int, chunk_elements: int = 1 << 15
) -> np.ndarray:
    """Many samples of one row (shape (V,)) with the fused top-k sampler's rule; int64 (num_samples,).

    Vectorized over samples: sample ``s`` uses counter ``(index, 0, s)``, exactly as
    ``sample_topk_twin(logits_row[None], top_k, ..., num_samples=num_samples)[0]``; the noise is computed for the
    kept tokens only (``k`` per sample, not ``V``).
    """
    z = np.asarray(logits_row, dtype=np.float32)[None, :]
    cols, kept = top_k_columns(z, top_k)
    index = cols[0][kept[0]]
    if index.size == 0:
        return np.full(num_samples, z.shape[1] - 1, dtype=np.int64)
    zz = z[0, index][None, :]
    inv = inverse_temperature32(temperature, 1)[0]
    out = np.empty(num_samples, dtype=np.int64)
    per = max(1, chunk_elements // index.size)
    for s0 in range(0, num_samples, per):
        s1 = min(num_samples, s0 + per)
        smp = np.arange(s0, s1, dtype=np.uint32)[:, None]
        g, key = token_noise_np(seed, 0, index.astype(np.uint32)[None, :], smp, STREAM_TOKEN, lazy_keys=True)
        with np.errstate(over="ignore", invalid="ignore"):
            sc = np.broadcast_to(zz, g.shape) if inv == 0 else (zz * inv + g).astype(np.float32)
        out[s0:s1] = index[select(sc, key)]
    return out


# --------------------------------------------------------------------------------------------
# Top-k, top-p, min-p and their orders (the fused truncated sampler, flashsampling.truncation)
# --------------------------------------------------------------------------------------------


def ordered_np(z) -> np.ndarray:
    """The int32 whose order is float32's (``-0.0`` as ``+0.0``), as
    :func:`flashsampling.kernels.truncation_stage2.ordered` computes it."""
    z = np.asarray(z, dtype=np.float32)
    bits = np.where(z == 0, np.float32(0), z).astype(np.float32).view(np.int32)
    return bits ^ ((bits >> 31) & np.int32(0x7FFFFFFF))


def kept_mask(z, temperature, k=None, p=None, min_p=None, order=None) -> np.ndarray:
    """The kept sets ``[B, V]`` of float32 logits ``z [B, V]`` under the fused truncated sampler's law:
    :func:`flashsampling.targets.sampling_law` with ``top_k_ties="low_index"`` (the other conventions the targets'
    defaults) in ``order`` (``None``: ``"transformers"``), the tokens of positive probability.

    ``k``, ``p``, ``min_p`` are numbers or per-row arrays; ``None`` disables a filter, and so do ``k = 0`` and ``nan``
    on a row.  A kept token whose float64 weight underflows is left out; no draw can notice (its score is more than
    700 nats below the maximum's).  A row with no finite logit keeps nothing.
    """
    from .targets import DEFAULT_ORDER, sampling_law

    z32 = np.atleast_2d(np.asarray(z, dtype=np.float32))
    b, v = z32.shape
    out = np.zeros((b, v), dtype=bool)
    rows = np.isfinite(z32).any(axis=1) & ~np.isnan(z32).any(axis=1) & ~(z32 == np.inf).any(axis=1)
    if not rows.any():
        return out

    def per_row(x, off, fill):
        if x is None:
            return None
        a = np.broadcast_to(np.asarray(x, dtype=np.float64), (b,))[rows]
        return None if off(a).all() else np.where(off(a), fill, a)

    kk = per_row(k, lambda a: a == 0, v)
    kwargs = {"top_k": None if kk is None else kk.astype(np.int64), "top_p": per_row(p, np.isnan, 1.0),
              "min_p": per_row(min_p, np.isnan, 0.0)}  # fmt: skip
    kwargs = {name: value for name, value in kwargs.items() if value is not None}
    t = np.broadcast_to(np.asarray(temperature, dtype=np.float64), (b,))[rows]
    probs = sampling_law(z32[rows].astype(np.float64), t, order=order or DEFAULT_ORDER, top_k_ties="low_index",
                         **kwargs)  # fmt: skip
    out[rows] = probs > 0
    return out


def sample_truncated_twin(
    logits,
    temperature=1.0,
    *,
    top_k=None,
    top_p=None,
    min_p=None,
    order=None,
    seed: int,
    num_samples: int = 1,
    row_offset: int = 0,
    sample_offset: int = 0,
    col_offset: int = 0,
) -> np.ndarray:
    """Tokens the fused truncated sampler returns for float32 ``logits (B, V)``, computed in NumPy.

    Row ``b`` draws ``argmax_{i in K_b} z_i / T + G(seed, row_offset + b, col_offset + i, sample_offset + s)`` over
    its kept set ``K_b`` (:func:`kept_mask`), ties in the float32 score by the larger tie-break key, then the lower
    index; a greedy row (``T = 0``) scores ``z_i``: the plain twin's rule (:func:`sample_twin`) restricted to
    ``K_b``.  ``top_k``, ``top_p``, ``min_p``, ``order`` as :func:`flashsampling.sample` takes them (numbers or
    per-row arrays; ``k >= V``, ``p = 1`` and ``min_p = 0`` keep everything).

    Returns
    -------
    numpy.ndarray, int64, shape (B, num_samples)
        Global indices; a row with no finite logit returns ``col_offset + V - 1`` (the kernel's clamp).
    """
    z = np.atleast_2d(np.asarray(logits, dtype=np.float32))
    b, v = z.shape
    kept = kept_mask(z, temperature, top_k, top_p, min_p, order)
    inv = inverse_temperature32(temperature, b)[:, None]
    index = (np.arange(v, dtype=np.int64) + col_offset)[None, :]
    rows = np.arange(row_offset, row_offset + b, dtype=np.uint32)[:, None]
    out = np.empty((b, num_samples), dtype=np.int64)
    for s in range(num_samples):
        g, key = token_noise_np(seed, rows, index.astype(np.uint32), sample_offset + s, STREAM_TOKEN, lazy_keys=True)
        with np.errstate(over="ignore", invalid="ignore"):
            sc = np.where(kept, np.where(inv == 0, z, z * inv + g), -np.inf).astype(np.float32)
        out[:, s] = select(sc, key) + col_offset
    out[~kept.any(axis=1)] = col_offset + v - 1
    return out


def sample_truncated_twin_many(
    logits_row, temperature: float, *, top_k=None, top_p=None, min_p=None, order=None, seed: int, num_samples: int,
    chunk_elements: int = 1 << 15,
) -> np.ndarray:  # fmt: skip
    """Many samples of one row (shape (V,)) with the fused truncated sampler's rule; int64 (num_samples,).

    Sample ``s`` uses counter ``(index, 0, s)``, exactly as ``sample_truncated_twin(logits_row[None], ...)[0]``; the
    noise is computed for the kept tokens only.
    """
    z = np.asarray(logits_row, dtype=np.float32)
    index = np.flatnonzero(kept_mask(z[None, :], temperature, top_k, top_p, min_p, order)[0])
    if index.size == 0:
        return np.full(num_samples, z.shape[0] - 1, dtype=np.int64)
    zz = z[index][None, :]
    inv = inverse_temperature32(temperature, 1)[0]
    out = np.empty(num_samples, dtype=np.int64)
    per = max(1, chunk_elements // index.size)
    for s0 in range(0, num_samples, per):
        s1 = min(num_samples, s0 + per)
        smp = np.arange(s0, s1, dtype=np.uint32)[:, None]
        g, key = token_noise_np(seed, 0, index.astype(np.uint32)[None, :], smp, STREAM_TOKEN, lazy_keys=True)
        with np.errstate(over="ignore", invalid="ignore"):
            sc = np.broadcast_to(zz, g.shape) if inv == 0 else (zz * inv + g).astype(np.float32)
        out[s0:s1] = index[select(sc, key)]
    return out
