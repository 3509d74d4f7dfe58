"""Parallel grouped sampling: a local sample and a log-mass per vocabulary group, then one group draw.

The factorization
-----------------
Split the vocabulary into disjoint groups ``V_1, ..., V_K`` (the kernel's vocabulary tiles, or
caller-given shards of any sizes).  With scaled logits ``s_i = z_i / T``::

    L_k  = logsumexp_{i in V_k} s_i                               group log-mass (fp32 per tile)
    X_k  = argmax_{i in V_k} (s_i + G_i)                          local Gumbel-max sample (token noise)
    k*   = argmax_k (L_k + G'_k)                                  group draw, fresh noise G'
    token = X_{k*}

Then ``P(k* = k) = exp(L_k) / sum_j exp(L_j)`` (Gumbel-max over the groups) and, given ``k* = k``,
``X_k`` is distributed as ``softmax(s)`` restricted to ``V_k``, because ``G'`` is independent of the
token noise ``G``.  So ``P(token = i) = exp(L_k) / Z * exp(s_i - L_k) = exp(s_i) / Z``: exactly the
softmax.  Independence is by construction: ``G`` is the Philox stream ``STREAM_TOKEN`` with counter
``(i, row, sample, 0)``, ``G'_k`` the stream ``STREAM_GROUP`` with counter
``(group_id_k, row, sample, 1)``, where ``group_id_k`` is the group's first global vocabulary index
(:mod:`flashsampling.kernels.stage2`).  Groups with zero mass (``L_k = -inf``) are never chosen.  ``G'_k`` is
computed in float64 from its 64 bits (:func:`flashsampling.noise.gumbel64_from_bits`), so the draw is the
Gumbel-max of the 64-bit grid up to a float64 error (``proofs/finite_precision.md``, section 8).

Pathwise the result differs from :func:`flashsampling.sample` (which takes the flat argmax of the
same token noise) but its distribution is the same.  Greedy rows (``T = 0``) skip the group draw and
keep the flat lexicographic ``(z, key)`` maximum, so they equal the fused result.

What the kernel computes, and the log-mass tolerance
----------------------------------------------------
Stage 1 with ``return_lse`` writes each tile's ``L`` in float32 (max-shifted ``log(sum(exp))`` of
the fp32 ``z * (1/T)``); tiles are combined into shards and the full ``logsumexp`` in float64.  Compared
with the float64 ``logsumexp(z64 / T)`` of :func:`flashsampling.reference.logsumexp` the reported
log-mass differs by at most :func:`logmass_tolerance` (derived in its docstring), and the tests
check that bound.

NumPy twin
----------
:func:`combine_groups_np` is the twin of the combine (bit for bit given the same ``L_k`` and local
candidates).  :func:`grouped_sampler_np` draws many samples of one row with the kernel's rules but
only evaluates the token noise inside the chosen group: ``K + |V_k*|`` Philox blocks per sample instead
of ``V``, so the statistical battery can run it at scale on the CPU.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch

from . import _validate as check
from ._request import Request, lm_head_request, logits_request
from .kernels.stage2 import launch_combine_groups, launch_reduce_candidates
from .kernels.tiles import TileConfig, logits_tiles
from .noise import STREAM_GROUP, STREAM_TOKEN, group_noise_np, token_noise_np
from .twin import inverse_temperature32, sample_twin_many, select

#: Unit roundoff of float32.
U32 = 2.0**-24
#: Default group (tile) size of the NumPy sampler: the interpreter's default stage-1 ``block_v``.
DEFAULT_GROUP_SIZE = 128
#: NumPy work per step of the twins (elements of noise); memory control only.
_CHUNK_ELEMENTS = 1 << 18
#: The most caller-given groups an entry point takes.  Each group is its own stage-1 launch and reduction, so the
#: cost grows linearly with the number of groups: 38 ms a group in the Triton interpreter (2 busy CPU cores:
#: ``group_sizes=[1] * 40`` took 1.55 s against 0.10 s for two groups), so ``[1] * V`` at V = 151936 would take 1.6
#: hours there.  1024 groups is far beyond a tensor-parallel world or a hierarchy of shards; tile groups
#: (``group_sizes=None``) cost one launch whatever their number.
MAX_GROUPS = 1024


# --------------------------------------------------------------------------------------------
# Partials: per (row, group) the log-mass, per (row, sample, group) the local candidate
# --------------------------------------------------------------------------------------------


@dataclass
class GroupPartials:
    """Per-group results of stage 1, ready for a combine.

    Attributes
    ----------
    logmass : torch.Tensor, float32 (tiles) or float64 (shards), shape (B, K)
        ``L_k = logsumexp(z / T)`` over the group (``max z`` for a greedy row; ``-inf`` for a group
        with no finite logit or no columns).
    best : torch.Tensor, float32, shape (B, S, K)
        The local candidate's perturbed score ``z / T + G`` (``z`` for a greedy row).
    key : torch.Tensor, int64, shape (B, S, K)
        Its tie-break key (``-2`` for an empty group).
    index : torch.Tensor, int64, shape (B, S, K)
        Its global vocabulary index: the local Gumbel-max sample ``X_k``.
    starts : torch.Tensor, int64, shape (K,)
        The groups' first global vocabulary index, which is also their noise id.
    flags : torch.Tensor, int32, shape (B, K)
        The groups' stage-1 flags (:mod:`flashsampling.kernels.flags`).
    """

    logmass: torch.Tensor
    best: torch.Tensor
    key: torch.Tensor
    index: torch.Tensor
    starts: torch.Tensor
    flags: torch.Tensor


def masked_logsumexp(logmass: torch.Tensor, greedy: torch.Tensor) -> torch.Tensor:
    """float64 ``logsumexp`` over the groups of ``logmass [B, K]``; ``max`` for greedy rows (``greedy [B]``)."""
    lm = logmass.double()
    return torch.where(greedy, lm.amax(dim=1), torch.logsumexp(lm, dim=1))


def tile_partials(parts, block_v: int, col_offset: int = 0) -> GroupPartials:
    """Stage-1 output (with ``return_lse``) -> one group per vocabulary tile."""
    part_max, part_key, part_idx, flags, lse = parts
    T = part_max.shape[2]
    starts = col_offset + block_v * torch.arange(T, dtype=torch.int64, device=part_max.device)
    return GroupPartials(lse, part_max, part_key, part_idx, starts, flags)


def shard_partials(parts, inv_temp: torch.Tensor, col_offset: int) -> GroupPartials:
    """Stage-1 output (with ``return_lse``) of one shard launch -> a single group (K = 1), in one
    launch of :func:`flashsampling.kernels.stage2.reduce_candidates_kernel`."""
    m, k, i, logmass, f = launch_reduce_candidates(parts, inv_temp, return_lse=True)
    # torch.full, not torch.tensor: a host-to-device copy would wait for the stage-1 kernel.
    starts = torch.full((1,), col_offset, dtype=torch.int64, device=m.device)
    return GroupPartials(logmass[:, None], m[..., None], k[..., None], i[..., None], starts, f[:, None])


def empty_partials(B: int, S: int, start: int, device) -> GroupPartials:
    """A group with no columns: zero mass, never chosen."""
    return GroupPartials(
        torch.full((B, 1), -math.inf, dtype=torch.float64, device=device),
        torch.full((B, S, 1), -math.inf, dtype=torch.float32, device=device),
        torch.full((B, S, 1), -2, dtype=torch.int64, device=device),
        torch.full((B, S, 1), start, dtype=torch.int64, device=device),
        torch.full((1,), start, dtype=torch.int64, device=device),
        torch.zeros((B, 1), dtype=torch.int32, device=device),
    )


def cat_partials(groups: list[GroupPartials]) -> GroupPartials:
    """Concatenate group partials along the group axis."""
    return GroupPartials(
        torch.cat([g.logmass for g in groups], dim=1),
        torch.cat([g.best for g in groups], dim=2),
        torch.cat([g.key for g in groups], dim=2),
        torch.cat([g.index for g in groups], dim=2),
        torch.cat([g.starts for g in groups]),
        torch.cat([g.flags for g in groups], dim=1),
    )


# --------------------------------------------------------------------------------------------
# The combine
# --------------------------------------------------------------------------------------------


def combine_groups(
    partials: GroupPartials, inv_temp: torch.Tensor, seed_lo: int, seed_hi: int, vocab_size: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Draw a group by Gumbel-max over ``L_k`` with fresh noise and return its local sample.

    ``score[b, s, k] = L[b, k] + G'(seed, row=b, group_id=starts[k], sample=s, STREAM_GROUP)`` in
    float64 (``G'`` float64 from its 64 bits); the winner is the lexicographic max of ``(score, key')``.  A greedy row
    (``inv_temp == 0``) instead takes the lexicographic max of its local candidates' ``(z, key)``
    (the flat greedy token).  One launch of :func:`flashsampling.kernels.stage2.combine_groups_kernel`.

    Returns
    -------
    tokens : int64 (B, S), clamped into ``[0, vocab_size)``
    choice : int64 (B, S), the chosen group's position in ``0..K-1``
    flags : int32 (B, S), the groups' flags ORed, plus ``FLAG_NO_FINITE`` where every group is empty
    """
    p = partials
    return launch_combine_groups(p.logmass, p.best, p.key, p.index, p.starts, p.flags, inv_temp, seed_lo, seed_hi,
                                 vocab_size=vocab_size)  # fmt: skip


#: Largest relative error, in float32 ulps, allowed to the compiled ``tl.exp`` on ``[-104, 0]`` (the shifted exponents
#: of the log-mass sums): the H200 measured 62.7 (``proofs/gpu_checks.py``: ``ex2.approx`` after the product with
#: ``log2 e``, whose rounding grows with ``|x|``); the interpreter's NumPy ``exp`` is within 1.
DEVICE_EXP_ULP = 64.0
#: Largest absolute error allowed to the compiled ``tl.log`` on ``[1, 2**12]``: the H200 measured 5.2e-7.
DEVICE_LOG_ABS = 2.0**-20


def logmass_tolerance(max_abs_scaled: float, group_size: int) -> float:
    """Bound on ``|L_reported - logsumexp(z64 / T)|`` for a group (or a union of groups).

    Derivation, with ``u = 2**-24`` and ``M = max |z / T|`` over the finite scaled logits:

    * the fp32 scaled logit ``fl(z * fl(1 / fl(T)))`` has relative error at most ``gamma_3 = 3u / (1 - 3u)``
      (three roundings: the temperature, its reciprocal, the product), and ``logsumexp`` is 1-Lipschitz in the max
      norm: ``<= gamma_3 M``;
    * the max shift ``s - m`` is exact or rounds once: ``<= u * 2M (1 + gamma_3)`` on each term's exponent, which
      changes the sum's log by at most that;
    * ``exp`` of each term and the sum of at most ``n`` terms (``n`` = ``group_size``, the tile
      width for the kernel's per-tile sums) carry a relative error ``<= (n + 4) u`` (a serial sum;
      the kernel's tree sum is better), the ``log`` and the final ``m + log`` two more roundings
      ``<= u (|L| + 1)``, with ``|L| <= M + log n``;
    * combining tiles in float64 adds nothing at this scale, and ``logsumexp`` of the tiles is again
      1-Lipschitz in the tiles' errors.

    The terms in ``M`` add to ``(gamma_3 + 2u (1 + gamma_3) + u) M``, less than ``7 u M``.  The per-term count is
    doubled (``2 (n + 8)``) to leave room for a tree sum's order.  On the GPU ``exp`` and ``log`` are approximations:
    each term's ``exp`` carries a relative error of at most :data:`DEVICE_EXP_ULP` ulps, which moves the sum's log by
    at most ``DEVICE_EXP_ULP * u`` (a relative error of every term bounds the sum's), and ``log`` an absolute error of
    at most :data:`DEVICE_LOG_ABS`; ``proofs/gpu_checks.py`` measures both over their whole input range
    (``proofs/results/gpu_h200.json``: 62.7 ulp and 5.2e-7 on an H200).  Total::

        tol = u * (7 M + 2 (n + 8) + log n + DEVICE_EXP_ULP) + DEVICE_LOG_ABS
    """
    n = max(1, int(group_size))
    return U32 * (7.0 * float(max_abs_scaled) + 2.0 * (n + 8) + math.log(n) + DEVICE_EXP_ULP) + DEVICE_LOG_ABS


# --------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------


def check_group_sizes(group_sizes, V: int) -> list[tuple[int, int]]:
    """``group_sizes`` (ints >= 0 -- Python or NumPy ints, or an integer tensor -- summing to ``V``) ->
    ``[(start, size), ...]``.  Floats and bools are refused (``TypeError``), never truncated."""
    if isinstance(group_sizes, torch.Tensor):
        if group_sizes.is_floating_point() or group_sizes.is_complex() or group_sizes.dtype == torch.bool:
            raise TypeError(f"group_sizes.dtype={group_sizes.dtype} must be an integer dtype")
        group_sizes = group_sizes.reshape(-1).tolist()
    if isinstance(group_sizes, (str, bytes)) or not isinstance(group_sizes, Iterable):
        raise TypeError(f"group_sizes must be a sequence of ints, got {type(group_sizes).__name__}")
    sizes = list(group_sizes)
    for s in sizes:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, numbers.Integral):
            raise TypeError(f"group_sizes must hold ints, got {type(s).__name__} ({s!r})")
    sizes = [int(s) for s in sizes]
    if not sizes:
        raise ValueError("group_sizes is empty; give at least one group")
    if any(s < 0 for s in sizes):
        raise ValueError(f"group_sizes={sizes[:8]} has a negative size; sizes must be >= 0")
    if sum(sizes) != V:
        raise ValueError(f"group_sizes sum to {sum(sizes)} but the vocabulary has V={V}")
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int).tolist()
    return list(zip(starts, sizes))


def check_arguments(group_sizes, V: int, return_logsumexp, *, tiles=None, blocks=None) -> list[int] | None:
    """The grouped entry points' own arguments, before any launch: ``group_sizes`` against ``V`` (at most
    :data:`MAX_GROUPS` groups), the flag ``return_logsumexp``, and ``tiles`` or the logits kernel's ``(B, block_b,
    block_v)``.  Returns the sizes as a list (``None``: tile groups), read once: a generator is consumed here and
    its sizes used, not read again (empty) by the launches."""
    sizes = None
    if group_sizes is not None:
        sizes = [m for _, m in check_group_sizes(group_sizes, V)]
        if len(sizes) > MAX_GROUPS:
            raise ValueError(f"group_sizes has {len(sizes)} groups; at most {MAX_GROUPS}: each group is its own "
                             "stage-1 launch and reduction, so the time grows with their number; group_sizes=None "
                             "makes stage 1's tiles the groups (one launch)")  # fmt: skip
    check.check_flag("return_logsumexp", return_logsumexp)
    check.check_tiles(tiles)
    if blocks is not None:
        logits_tiles(blocks[0], V, *blocks[1:])
    return sizes


def grouped_partials(
    request: Request, hidden: torch.Tensor, weight: torch.Tensor, *, group_sizes=None,
    tiles: TileConfig | None = None, col_offset: int = 0,
) -> GroupPartials:  # fmt: skip
    """Stage 1 on ``hidden @ weight.T`` with log-masses: groups are tiles, or the given shards (one launch each)."""
    if group_sizes is None:
        parts, t = request.stage1(hidden, weight, tiles, col_offset=col_offset, return_lse=True)
        return tile_partials(parts, t.candidate_v, col_offset)

    def shard_stage1(start: int, size: int):
        shard = weight[start : start + size]
        return request.stage1(hidden, shard, tiles, col_offset=col_offset + start, return_lse=True)[0]

    return shard_groups(request, group_sizes, weight.shape[0], hidden.device, col_offset, shard_stage1)


def grouped_partials_from_logits(
    request: Request, logits: torch.Tensor, *, group_sizes=None, block_b: int | None = None,
    block_v: int | None = None, col_offset: int = 0,
) -> GroupPartials:  # fmt: skip
    """Stage 1 on given logits ``[B, V]`` with log-masses: groups are tiles, or the given shards."""
    if group_sizes is None:
        parts, bv = request.logits_stage1(logits, block_b, block_v, col_offset=col_offset, return_lse=True)
        return tile_partials(parts, bv, col_offset)

    def shard_stage1(start: int, size: int):
        shard = logits[:, start : start + size]
        return request.logits_stage1(shard, block_b, block_v, col_offset=col_offset + start, return_lse=True)[0]

    return shard_groups(request, group_sizes, logits.shape[1], logits.device, col_offset, shard_stage1)


def shard_groups(request: Request, group_sizes, V: int, device, col_offset: int, shard_stage1) -> GroupPartials:
    """One group per caller-given shard (``group_sizes``, checked against ``V``): ``shard_stage1(start, size)``'s
    stage 1 (with log-masses) reduced to one candidate, or an empty group for a shard of size 0."""
    groups = []
    for start, size in check_group_sizes(group_sizes, V):
        if size == 0:
            groups.append(empty_partials(request.inv_temp.shape[0], request.num_samples, col_offset + start, device))
            continue
        groups.append(shard_partials(shard_stage1(start, size), request.inv_temp, col_offset + start))
    return cat_partials(groups)


def finish_grouped(partials: GroupPartials, request: Request, return_logsumexp: bool, V: int):
    """The group draw (:func:`combine_groups`, tokens in ``[0, V)``), the request's finish (raise on the flags), and
    the tokens (with the rows' ``logsumexp`` when asked)."""
    tokens, _, flags = combine_groups(partials, request.inv_temp, *request.seed_words, vocab_size=V)
    request.finish(flags)
    if return_logsumexp:
        return tokens, masked_logsumexp(partials.logmass, request.inv_temp == 0)
    return tokens


def sample_grouped(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    *,
    temperature: float | torch.Tensor = 1.0,
    seed: int | None = None,
    num_samples: int = 1,
    group_sizes=None,
    return_logsumexp: bool = False,
    host_checks: bool = True,
    tiles: TileConfig | None = None,
):
    """Sample from ``softmax(hidden @ weight.T / T)`` by the grouped factorization.

    Each group (a vocabulary tile of stage 1, or a caller-given shard) yields a local Gumbel-max
    sample and its log-mass ``L_k`` in the same pass; a Gumbel draw over the ``L_k`` with fresh
    noise picks the group (module docstring).  Exact in distribution; pathwise different from
    :func:`flashsampling.sample` except for greedy rows.

    Parameters
    ----------
    hidden : torch.Tensor, shape (B, D); weight : torch.Tensor, shape (V, D)
        As in :func:`flashsampling.sample`.
    temperature, seed, num_samples, host_checks, tiles
        As in :func:`flashsampling.sample`.
    group_sizes : iterable of int, or None
        Sizes of consecutive vocabulary groups (any sizes >= 0, summing to ``V``; read once, so a generator
        works; at most :data:`MAX_GROUPS` groups); each is one launch with ``col_offset`` = its start.
        ``None``: the groups are stage 1's tiles.
    return_logsumexp : bool
        Also return ``logsumexp(z / T)`` per row (float64 ``[B]``; ``max z`` for a greedy row).

    Returns
    -------
    tokens : torch.Tensor, int64, shape (B, num_samples)
    logsumexp : torch.Tensor, float64, shape (B,) (only with ``return_logsumexp``)

    Raises
    ------
    TypeError, ValueError
        Bad arguments; with ``host_checks``, NaN/inf logits or a row with no finite logit.
    """
    request, V = lm_head_request(hidden, weight, temperature=temperature, seed=seed, num_samples=num_samples,
                                 host_checks=host_checks)  # fmt: skip
    group_sizes = check_arguments(group_sizes, V, return_logsumexp, tiles=tiles)
    partials = grouped_partials(request, hidden, weight, group_sizes=group_sizes, tiles=tiles)
    return finish_grouped(partials, request, return_logsumexp, V)


def sample_grouped_from_logits(
    logits: torch.Tensor,
    *,
    temperature: float | torch.Tensor = 1.0,
    seed: int | None = None,
    num_samples: int = 1,
    group_sizes=None,
    return_logsumexp: bool = False,
    host_checks: bool = True,
    block_b: int | None = None,
    block_v: int | None = None,
):
    """:func:`sample_grouped` on logits a caller already has (``[B, V]``, ``-inf`` masks a token).

    ``block_v`` is the group size when ``group_sizes`` is ``None``.  Returns as :func:`sample_grouped`.
    """
    request, V = logits_request(logits, temperature=temperature, seed=seed, num_samples=num_samples,
                                host_checks=host_checks)  # fmt: skip
    group_sizes = check_arguments(group_sizes, V, return_logsumexp, blocks=(logits.shape[0], block_b, block_v))
    partials = grouped_partials_from_logits(request, logits, group_sizes=group_sizes, block_b=block_b,
                                            block_v=block_v)  # fmt: skip
    return finish_grouped(partials, request, return_logsumexp, V)


# --------------------------------------------------------------------------------------------
# NumPy twins
# --------------------------------------------------------------------------------------------


def select_group(scores: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """The group draw's rule along the last axis, as ``combine_groups_kernel`` applies it: the larger float64 score,
    then the larger key ``w2`` (the whole word, not ``w2 | 1``), then the first group."""
    m = scores.max(axis=-1, keepdims=True)
    return np.argmax(np.where(scores == m, np.asarray(keys).astype(np.int64), -3), axis=-1)


def combine_groups_np(logmass, best, key, index, starts, greedy, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """NumPy twin of :func:`combine_groups`: ``(tokens (B, S), choice (B, S))``, bit for bit.

    Arguments are NumPy arrays of the shapes of :class:`GroupPartials` plus ``greedy`` (B,) bool.
    """
    logmass = np.asarray(logmass, dtype=np.float64)
    best = np.asarray(best, dtype=np.float32)
    B, S, K = best.shape
    rows = np.arange(B, dtype=np.uint32)[:, None, None]
    smp = np.arange(S, dtype=np.uint32)[None, :, None]
    ids = np.asarray(starts, dtype=np.int64).astype(np.uint32)[None, None, :]
    g, gkey = group_noise_np(seed, rows, ids, smp, STREAM_GROUP)
    gr = np.asarray(greedy, dtype=bool)[:, None, None]
    score = np.where(gr, best.astype(np.float64), logmass[:, None, :] + g)
    kk = np.where(gr, np.asarray(key, dtype=np.int64), gkey.astype(np.int64))
    choice = select_group(score, kk)
    tokens = np.take_along_axis(np.asarray(index, dtype=np.int64), choice[..., None], axis=-1)[..., 0]
    return tokens, choice


def _check_row(logits, temperature) -> tuple[np.ndarray, np.float32]:
    z = np.asarray(logits, dtype=np.float64)
    if z.ndim != 1 or z.size == 0:
        raise ValueError(f"logits must have shape (V,) with V >= 1, got shape {z.shape}")
    if np.isnan(z).any() or np.isposinf(z).any():
        raise ValueError("logits contain NaN or +inf")
    if not np.isfinite(z).any():
        raise ValueError("logits: the row has no finite logit (every token is masked)")
    t = float(temperature)
    if not math.isfinite(t) or t < 0:
        raise ValueError(f"temperature={temperature} is invalid; it must be finite and >= 0")
    return z.astype(np.float32), inverse_temperature32(t, 1)[0]


def group_logmass_np(z32: np.ndarray, inv32: np.float32, starts, sizes) -> np.ndarray:
    """float64 ``logsumexp`` of the fp32 scaled logits ``z32 * inv32`` over each group ``(K,)``."""
    with np.errstate(over="ignore", invalid="ignore"):
        s = (z32 * inv32).astype(np.float32).astype(np.float64)
    out = np.full(len(starts), -np.inf)
    for k, (a, m) in enumerate(zip(starts, sizes)):
        seg = s[a : a + m]
        if m == 0 or not np.isfinite(seg).any():
            continue
        mx = seg.max()
        out[k] = mx + np.log(np.exp(seg - mx).sum())
    return out


def local_samples_np(
    z32: np.ndarray, inv32: np.float32, seed: int, starts, sizes, choice: np.ndarray, *, row: int = 0
) -> np.ndarray:
    """For sample ``s`` (position in ``choice``), the kernel's local Gumbel-max sample in group ``choice[s]``.

    Evaluates the token noise only inside the chosen group: ``(index, row, s, STREAM_TOKEN)``,
    score ``z32 * inv32 + G`` in float32, ties by the larger key, exactly as stage 1.
    """
    choice = np.asarray(choice)
    out = np.empty(choice.shape[0], dtype=np.int64)
    order = np.argsort(choice, kind="stable")
    sorted_choice = choice[order]
    for k in np.unique(choice):
        lo_, hi_ = np.searchsorted(sorted_choice, [k, k + 1])
        who = order[lo_:hi_]
        a, m = int(starts[k]), int(sizes[k])
        cols = np.arange(a, a + m, dtype=np.uint32)[None, :]
        zc = z32[a : a + m][None, :]
        per = max(1, _CHUNK_ELEMENTS // m)
        for i0 in range(0, who.size, per):
            w = who[i0 : i0 + per]
            g, key = token_noise_np(seed, row, cols, w.astype(np.uint32)[:, None], STREAM_TOKEN, lazy_keys=True)
            with np.errstate(over="ignore", invalid="ignore"):
                sc = (zc * inv32 + g).astype(np.float32)
            out[w] = a + select(sc, key)
    return out


def default_groups(V: int, group_size: int = DEFAULT_GROUP_SIZE) -> list[tuple[int, int]]:
    """Consecutive groups of ``group_size`` (the last one partial): stage 1's tiles."""
    return [(a, min(group_size, V - a)) for a in range(0, V, group_size)]


def grouped_sampler_np(
    logits: np.ndarray, temperature: float, n: int, seed: int, *, group_sizes=None, group_size: int = DEFAULT_GROUP_SIZE
) -> np.ndarray:
    """``n`` samples of one row by the grouped rule, with the kernel's noise: int64 ``(n,)``.

    Sample ``s`` is row 0, sample ``s`` of :func:`sample_grouped_from_logits` with the given groups
    (``group_sizes``, or tiles of ``group_size``), up to the float32-vs-float64 rounding of ``L_k``.
    Cost: ``K + |V_k|`` noise evaluations per sample.  ``temperature = 0`` is greedy.

    Parameters
    ----------
    logits : numpy.ndarray, shape (V,), float64 (converted to float32 as the kernel would)
    temperature : float
    n : int
    seed : int
    group_sizes : sequence of int or None
    group_size : int

    Returns
    -------
    numpy.ndarray, int64, shape (n,)
    """
    z32, inv32 = _check_row(logits, temperature)
    if inv32 == 0:
        return sample_twin_many(z32, 0.0, seed=seed, num_samples=n)
    V = z32.shape[0]
    groups = check_group_sizes(group_sizes, V) if group_sizes is not None else default_groups(V, group_size)
    starts = np.array([a for a, _ in groups], dtype=np.int64)
    sizes = np.array([m for _, m in groups], dtype=np.int64)
    L = group_logmass_np(z32, inv32, starts, sizes)
    choice = choose_groups_np(L, starts, seed, n)
    return local_samples_np(z32, inv32, seed, starts, sizes, choice)


def choose_groups_np(L: np.ndarray, starts: np.ndarray, seed: int, n: int, *, row: int = 0) -> np.ndarray:
    """Group draws for samples ``0..n-1`` of one row: ``argmax_k (L_k + G'_k)`` in float64 with the group noise of
    :func:`flashsampling.noise.group_noise_np`, ties by the key."""
    K = L.shape[0]
    out = np.empty(n, dtype=np.int64)
    ids = starts.astype(np.uint32)[None, :]
    per = max(1, _CHUNK_ELEMENTS // K)
    for s0 in range(0, n, per):
        smp = np.arange(s0, min(n, s0 + per), dtype=np.uint32)[:, None]
        g, key = group_noise_np(seed, row, ids, smp, STREAM_GROUP)
        out[s0 : s0 + smp.shape[0]] = select_group(L[None, :] + g, key)
    return out
