"""Tensor-parallel sampling: a vocabulary-sharded LM head over ``torch.distributed``.

Each rank holds the rows ``[start, start + V_r)`` of ``W`` (any sizes, in any rank order, empty
shards allowed) and runs stage 1 on its shard with ``col_offset = start``.  The noise is keyed by
the *global* vocabulary index, so each rank perturbs its logits exactly as one device would.  The
ranks then all-gather O(1) scalars per row and sample (never the logits): one ``all_gather`` of an
int64 payload of ``6 + B * (2 + 3 S)`` words per rank.  Two combine rules:

pathwise
    Each rank sends its lexicographic ``(max score, key, index)`` per (row, sample); every rank
    takes the lexicographic max over ranks.  The lexicographic max is associative, so the tokens
    are exactly those of :func:`flashsampling.sample` on the whole ``W`` for the same seed, for any
    world size and shard layout (bit for bit wherever the fp32 logits agree, which they do for the
    same tile configuration: see ``tests/test_distributed.py``).
factorized
    Each rank sends its shard log-mass ``L_r = logsumexp(z_r / T)`` and its local Gumbel-max sample
    (the grouped factorization of :mod:`flashsampling.grouped` with the shards as groups); every
    rank draws the shard by ``argmax_r (L_r + G'_r)`` with ``G'`` the Philox stream ``STREAM_GROUP``
    keyed by ``(shard start, row, sample)``, which all ranks compute identically from the seed.
    Same distribution as pathwise; the payload is the same size.  Equal, bit for bit, to
    :func:`flashsampling.grouped.sample_grouped` with ``group_sizes`` = the shard sizes.

Every rank returns the same tokens.  Errors found after the exchange (NaN/inf logits on any rank,
a row with no finite logit, ranks that disagree on the seed, shards that do not tile ``[0, V)``)
are raised on every rank alike.  Argument errors found before it (shapes, dtypes) are raised only
where they occur, and the other ranks would wait: call with consistent arguments.

Backends: gloo on CPU (CUDA payloads are staged through host memory for gloo), NCCL on GPU.
Without an initialized process group the functions run as a world of one.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch
import torch.distributed as dist

from . import _validate as check
from ._request import GIVEN_LOGITS, LM_HEAD_LOGITS, Request, new_request
from .grouped import _check_row, grouped_sampler_np, masked_logsumexp
from .kernels.stage2 import launch_combine_groups, launch_reduce_candidates
from .kernels.tiles import TileConfig
from .twin import sample_twin_many

COMBINES = ("pathwise", "factorized")
#: Words of the payload header: start, size, seed_lo, seed_hi, B, S.
_HEADER = 6


# --------------------------------------------------------------------------------------------
# Collectives
# --------------------------------------------------------------------------------------------


def world_of(group=None) -> tuple[int, int]:
    """``(rank, world_size)`` of ``group``; ``(0, 1)`` without an initialized process group."""
    if not (dist.is_available() and dist.is_initialized()):
        return 0, 1
    return dist.get_rank(group), dist.get_world_size(group)


def all_gather_rows(payload: torch.Tensor, group=None) -> torch.Tensor:
    """All-gather a 1-D tensor (same length on every rank) -> ``[world, N]`` in rank order."""
    if not (dist.is_available() and dist.is_initialized()):
        return payload[None]
    buf = payload.contiguous()
    if dist.get_backend(group) == "gloo" and buf.device.type != "cpu":
        buf = buf.cpu()
    outs = [torch.empty_like(buf) for _ in range(dist.get_world_size(group))]
    dist.all_gather(outs, buf, group=group)
    return torch.stack(outs).to(payload.device)


def _f32_bits(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().view(torch.int32).to(torch.int64)


def _f32_from_bits(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.int32).view(torch.float32)


def _agree(local_size: int, seed: int, device, group) -> tuple[int, int]:
    """One small all-gather: this rank's start (prefix sum of the sizes in rank order) and a
    common seed (rank 0's ``seed``: the callers' seed, or the one each rank's request drew from its torch
    generator when the callers passed ``None``)."""
    rank, _ = world_of(group)
    mine = torch.tensor([local_size, seed >> 32, seed & 0xFFFFFFFF], dtype=torch.int64, device=device)
    table = all_gather_rows(mine, group).cpu()
    start = int(table[:rank, 0].sum())
    common = (int(table[0, 1]) << 32) | int(table[0, 2])
    return start, common


# --------------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------------


def _local_candidates(parts, inv_temp, need_lse: bool):
    """One launch: this rank's (L, m, key, index, flags) from its stage-1 tiles."""
    m, k, i, L, f = launch_reduce_candidates(parts, inv_temp, return_lse=need_lse)
    if not need_lse:
        L.zero_()  # not used; zeros keep the payload deterministic
    return L, m, k, i, f


def _empty_candidates(B: int, S: int, start: int, device):
    return (
        torch.full((B,), -math.inf, dtype=torch.float64, device=device),
        torch.full((B, S), -math.inf, dtype=torch.float32, device=device),
        torch.full((B, S), -3, dtype=torch.int64, device=device),
        torch.full((B, S), start, dtype=torch.int64, device=device),
        torch.zeros(B, dtype=torch.int32, device=device),
    )


def _device_ints(values, device: torch.device) -> torch.Tensor:
    """A small int64 tensor on ``device`` without stalling: on CUDA through pinned memory and an
    asynchronous copy (a pageable host-to-device copy would wait for the stage-1 kernel)."""
    t = torch.tensor(values, dtype=torch.int64)
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def _sample_shard(request: Request, stage1, *, start: int, size: int, combine: str, vocab_size, return_logsumexp,
                  group):  # fmt: skip
    """This rank's candidates (``stage1(return_lse)``'s, reduced; none for an empty shard), then the exchange and
    the combine.  Log-masses are computed only where the combine or the caller needs them."""
    need_lse = combine == "factorized" or return_logsumexp
    B = request.inv_temp.shape[0]
    if size == 0:
        cands = _empty_candidates(B, request.num_samples, start, request.inv_temp.device)
    else:
        cands = _local_candidates(stage1(need_lse), request.inv_temp, need_lse)
    return _exchange_and_combine(cands, request, start=start, size=size, combine=combine, vocab_size=vocab_size,
                                 return_logsumexp=return_logsumexp, group=group)  # fmt: skip


def _exchange_and_combine(cands, request: Request, *, start, size, combine, vocab_size, return_logsumexp, group):
    L, m, k, i, flags = cands
    B, S = m.shape
    device = m.device
    lo, hi = request.seed_words
    header = _device_ints([start, size, lo, hi, B, S], device)
    payload = torch.cat(
        [header, L.contiguous().view(torch.int64), _f32_bits(m).reshape(-1), k.reshape(-1), i.reshape(-1),
         flags.to(torch.int64)]
    )  # fmt: skip
    table = all_gather_rows(payload, group)  # [W, N]
    W = table.shape[0]
    o = _HEADER
    L_all = table[:, o : o + B].contiguous().view(torch.float64)  # [W, B]
    o += B
    m_all = _f32_from_bits(table[:, o : o + B * S]).reshape(W, B, S)
    o += B * S
    k_all = table[:, o : o + B * S].reshape(W, B, S)
    o += B * S
    i_all = table[:, o : o + B * S].reshape(W, B, S)
    o += B * S
    f_all = table[:, o : o + B].to(torch.int32)
    if request.host_checks:
        _check_layout(table[:, :_HEADER].cpu(), vocab_size)
    by_rank = [x.permute(1, 2, 0) for x in (m_all, k_all, i_all)]  # [B, S, W]
    tokens, _, flags = launch_combine_groups(
        L_all.T, *by_rank, table[:, 0], f_all.T, request.inv_temp, lo, hi, pathwise=combine == "pathwise"
    )
    request.finish(flags)
    if return_logsumexp:
        return tokens, masked_logsumexp(L_all.T, request.inv_temp == 0)
    return tokens


def _check_layout(headers: torch.Tensor, vocab_size: int | None) -> None:
    """Every rank sees the same gathered headers, so every rank raises alike."""
    h = headers.tolist()
    if len({(r[2], r[3]) for r in h}) > 1:
        raise ValueError("ranks passed different seeds; every rank must pass the same seed (or all pass None)")
    spans = sorted((r[0], r[0] + r[1]) for r in h)
    pos = 0
    for a, b in spans:
        if a != pos:
            raise ValueError(f"the ranks' shards {spans} do not tile [0, V): a gap or overlap at column {min(a, pos)}")
        pos = b
    if vocab_size is not None and pos != vocab_size:
        raise ValueError(f"the ranks' shards cover [0, {pos}) but vocab_size={vocab_size}")


def _check_layout_arguments(combine, vocab_start, vocab_size) -> None:
    if combine not in COMBINES:
        raise ValueError(f"combine={combine!r} must be one of {COMBINES}")
    if vocab_start is not None:
        if isinstance(vocab_start, bool) or not isinstance(vocab_start, (int, np.integer)) or vocab_start < 0:
            raise ValueError(f"vocab_start={vocab_start!r} must be an int >= 0 or None")
    if vocab_size is not None:
        check.check_counter("vocab_size", int(vocab_size))


def _shard_request(temperature, seed, num_samples, B: int, local_size: int, vocab_start, device, group, *,
                   host_checks: bool, what: str) -> tuple[Request, int]:  # fmt: skip
    """The rank's request (checks, per-row ``1/T``) with the seed every rank uses, and its shard's start: one small
    all-gather settles both when the callers left either to the ranks (``None``)."""
    request = new_request(temperature, seed, num_samples, B, device, host_checks=host_checks, what=what)
    if vocab_start is None or seed is None:
        start, common = _agree(local_size, request.seed, device, group)
        vocab_start = start if vocab_start is None else vocab_start
        if seed is None:
            request = dataclasses.replace(request, seed=common)
    return request, int(vocab_start)


def sample_tp(
    hidden: torch.Tensor,
    weight_shard: torch.Tensor,
    *,
    vocab_start: int | None = None,
    vocab_size: int | None = None,
    temperature: float | torch.Tensor = 1.0,
    seed: int | None = None,
    num_samples: int = 1,
    combine: str = "pathwise",
    return_logsumexp: bool = False,
    host_checks: bool = True,
    tiles: TileConfig | None = None,
    group=None,
):
    """Sample from ``softmax(hidden @ W.T / T)`` with ``W`` sharded by vocabulary rows over ``group``.

    Parameters
    ----------
    hidden : torch.Tensor, shape (B, D)
        The same on every rank.
    weight_shard : torch.Tensor, shape (V_r, D)
        This rank's rows of ``W`` (global rows ``vocab_start .. vocab_start + V_r - 1``; may be empty).
    vocab_start : int or None
        Global index of this rank's first row.  ``None``: shards are consecutive in rank order
        (found with one extra small all-gather).
    vocab_size : int or None
        The global ``V``; checked against the shards with ``host_checks``.
    temperature, num_samples, host_checks, tiles
        As in :func:`flashsampling.sample`; the same on every rank.
    seed : int or None
        The same on every rank.  ``None``: rank 0's torch generator draws it (and it is shared in
        the same small all-gather as the offsets).
    combine : {"pathwise", "factorized"}
        The combine rule (module docstring).
    return_logsumexp : bool
        Also return the global ``logsumexp(z / T)`` (float64 ``[B]``); with ``pathwise`` this
        makes stage 1 compute the tiles' log-masses too.
    group : torch.distributed.ProcessGroup or None
        Default: the world.

    Returns
    -------
    tokens : torch.Tensor, int64, shape (B, num_samples), global indices, identical on every rank
    logsumexp : torch.Tensor, float64, shape (B,) (only with ``return_logsumexp``)
    """
    _check_layout_arguments(combine, vocab_start, vocab_size)
    check.check_tensor("hidden", hidden, ndim=2)
    check.check_tensor("weight_shard", weight_shard, ndim=2)
    B, V_r, _, device = check.check_lm_head(hidden, weight_shard)
    check.check_counter("weight_shard rows", V_r)
    request, vocab_start = _shard_request(temperature, seed, num_samples, B, V_r, vocab_start, device, group,
                                          host_checks=host_checks, what=LM_HEAD_LOGITS)  # fmt: skip
    # Pathwise with one sample and no logsumexp needs no log-masses: on an sm_90 GPU, the Gluon kernel.
    return _sample_shard(
        request, lambda lse: request.stage1(hidden, weight_shard, tiles, col_offset=vocab_start, return_lse=lse)[0],
        start=vocab_start, size=V_r, combine=combine, vocab_size=vocab_size, return_logsumexp=return_logsumexp,
        group=group,
    )  # fmt: skip


def sample_tp_from_logits(
    logits_shard: torch.Tensor,
    *,
    vocab_start: int | None = None,
    vocab_size: int | None = None,
    temperature: float | torch.Tensor = 1.0,
    seed: int | None = None,
    num_samples: int = 1,
    combine: str = "pathwise",
    return_logsumexp: bool = False,
    host_checks: bool = True,
    block_b: int | None = None,
    block_v: int | None = None,
    group=None,
):
    """:func:`sample_tp` on this rank's columns of given logits, ``logits_shard [B, V_r]`` (``-inf`` masks).

    Pathwise, the tokens equal :func:`flashsampling.sample_from_logits` on the full logits, bit for bit.
    """
    _check_layout_arguments(combine, vocab_start, vocab_size)
    check.check_tensor("logits_shard", logits_shard, ndim=2)
    B, V_r = logits_shard.shape
    check.check_nonempty("logits_shard", B, "B")
    check.check_counter("B", B)
    check.check_counter("logits_shard columns", V_r)
    device = logits_shard.device
    request, vocab_start = _shard_request(temperature, seed, num_samples, B, V_r, vocab_start, device, group,
                                          host_checks=host_checks, what=GIVEN_LOGITS)  # fmt: skip
    return _sample_shard(
        request, lambda lse: request.logits_stage1(logits_shard, block_b, block_v, col_offset=vocab_start,
                                                   return_lse=lse)[0],
        start=vocab_start, size=V_r, combine=combine, vocab_size=vocab_size, return_logsumexp=return_logsumexp,
        group=group,
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# Shard layouts and NumPy samplers for the verification battery
# --------------------------------------------------------------------------------------------

#: Relative shard weights of :func:`uneven_shards` (rank r gets weight _WEIGHTS[r % 8]).
_WEIGHTS = (3, 1, 4, 2, 5, 9, 2, 6)


def uneven_shards(V: int, world_size: int) -> list[int]:
    """Deliberately uneven shard sizes (weights 3, 1, 4, 2, ...) summing to ``V``; the last takes the rest."""
    if world_size < 1:
        raise ValueError(f"world_size={world_size} must be >= 1")
    w = [_WEIGHTS[r % len(_WEIGHTS)] for r in range(world_size)]
    sizes = [V * x // sum(w) for x in w[:-1]]
    return sizes + [V - sum(sizes)]


def tp_factorized_sampler_np(
    logits: np.ndarray, temperature: float, n: int, seed: int, *, world_size: int = 4, shard_sizes=None
) -> np.ndarray:
    """``n`` samples of one row by the factorized tensor-parallel rule: int64 ``(n,)``.

    The shards (``shard_sizes``, default :func:`uneven_shards`) are the groups of
    :func:`flashsampling.grouped.grouped_sampler_np`: that is exactly what the ranks compute.
    """
    V = np.asarray(logits).shape[-1]
    sizes = uneven_shards(V, world_size) if shard_sizes is None else list(shard_sizes)
    return grouped_sampler_np(logits, temperature, n, seed, group_sizes=sizes)


def tp_pathwise_sampler_np(logits: np.ndarray, temperature: float, n: int, seed: int) -> np.ndarray:
    """``n`` samples of one row by the pathwise tensor-parallel rule: the fused twin itself, because
    the lexicographic max over ranks of the ranks' maxima is the flat maximum (any world size)."""
    z32, _ = _check_row(logits, temperature)
    return sample_twin_many(z32, temperature, seed=seed, num_samples=n)
