"""Tensor-parallel sampling: a vocabulary-sharded LM head over ``torch.distributed``.

Each rank holds the rows ``[start, start + V_r)`` of ``W`` (any sizes, in any rank order, empty
shards allowed) and runs stage 1 on its shard with ``col_offset = start``.  The noise is keyed by
the *global* vocabulary index, so each rank perturbs its logits exactly as one device would.  The
ranks then all-gather O(1) scalars per row and sample (never the logits).  Two combine rules:

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

Exchanges
---------
Two all-gathers per call (three with temperature tensors):

1. *The request*, before any work: a fixed-length int64 header per rank (:data:`HEADER_FIELDS`): the entry point,
   ``B``, ``D``, ``num_samples``, the dtype, ``combine``, ``return_logsumexp``, ``host_checks``, the seed (or that
   it is to be drawn), ``vocab_size``, the temperature (a number's float64 bits, ``-0.0`` read as ``0.0``, or that it
   is a tensor), the shard ``(vocab_start, size)``, and whether this rank's own argument checks failed (with the
   start of its message).  Every rank sees the same table and applies the same checks, so a mismatch raises the same
   ``ValueError`` on every rank (``ranks passed different num_samples: rank 0: 2, rank 1: 3``); a rank whose own
   arguments were rejected raises its own error and the others a ``ValueError`` that names it and quotes it.  The
   table also settles the shard starts (``vocab_start=None``: consecutive in rank order), the seed (``seed=None``:
   rank 0's draw), and checks that the shards tile ``[0, V)``.  Where every rank passed a temperature tensor, its
   values follow (``B`` float64 words per rank) and are compared exactly, never through a digest that two different
   tensors could share.
2. *The candidates*, after stage 1: ``B * (2 + 3 S) + 1 + MESSAGE_WORDS`` int64 words per rank (log-mass,
   ``(score, key, index)`` per sample, flags; then how the rank's stage 1 ended: a status and the start of its error),
   then the combine.  A rank
   whose stage 1 raised (an out-of-memory, a kernel that does not compile for its ``tiles``) raises its own error,
   the others a ``RuntimeError`` (or ``ValueError``) quoting it -- where the status is read at no cost (gloo) or
   anyway (``host_checks``); on NCCL without ``host_checks`` the failed rank raises without joining.

Errors found after the second exchange (NaN/inf logits on any rank, a row with no finite logit) are raised on every
rank alike (with ``host_checks``); the tokens are always global indices in ``[0, V)``.

Bounded waits.  Each exchange waits at most ``timeout`` seconds (default :data:`DEFAULT_TIMEOUT_S`) for the other
ranks, then raises ``TimeoutError`` (a rank that crashed raises at once: the connection closes): a rank that died
or is not calling never leaves the others waiting for the process group's own timeout (30 minutes by default).  A
rank whose arguments are rejected still joins the first exchange, so its peers raise at once too.  After a timeout
the group's collectives are out of step: destroy the process group.  On gloo both waits are bounded; on NCCL the
first (read on the host anyway) is, the second is stream-ordered and bounded by NCCL's own watchdog (the process
group's ``timeout``).

Synchronizations.  The first exchange is read on the host: with gloo that is a host collective, with NCCL one
device-to-host copy (which waits for the work queued before the call); a temperature tensor's values likewise.  With
``host_checks`` the ranks' stage-1 statuses and the flags are read once more at the end
(:meth:`flashsampling._request.Request.finish`).

Backends: gloo on CPU (CUDA payloads are staged through host memory for gloo), NCCL on GPU.
Without an initialized process group the functions run as a world of one (the same checks, no exchange).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from . import _validate as check
from ._request import GIVEN_LOGITS, LM_HEAD_LOGITS, Request, new_request
from ._tp_requests import (
    COMBINES,
    DEFAULT_TIMEOUT_S,
    MESSAGE_WORDS,
    Agreed,
    Shard,
    agree,
    all_gather_rows,
    check_shard_arguments,
    check_timeout,
    failure_words,
    is_gloo,
    raise_on_failures,
    world_of,
)
from .grouped import _check_row, grouped_sampler_np, masked_logsumexp
from .kernels.stage2 import launch_combine_groups, launch_reduce_candidates
from .kernels.tiles import TileConfig, logits_tiles
from .twin import sample_twin_many

__all__ = ["COMBINES", "DEFAULT_TIMEOUT_S", "sample_tp", "sample_tp_from_logits", "tp_factorized_sampler_np",
           "tp_pathwise_sampler_np", "uneven_shards"]  # fmt: skip


# --------------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------------


def _f32_bits(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().view(torch.int32).to(torch.int64)


def _f32_from_bits(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.int32).view(torch.float32)


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


def _sample_shard(agreed: Agreed, stage1, *, size: int, combine: str, return_logsumexp, group, timeout):
    """This rank's candidates (``stage1(request, start, return_lse)``'s, reduced; none for an empty shard), then the
    exchange and the combine.  Log-masses are computed only where the combine or the caller needs them.

    A stage 1 that raises (an out-of-memory, a kernel that does not compile for this rank's ``tiles``) still joins
    the exchange with its error, where its peers can read it on the host at no cost (gloo) or read the exchange
    anyway (``host_checks``): then every rank raises.  Otherwise (NCCL without ``host_checks``, where reading it
    would synchronize) the rank raises at once and its peers wait for NCCL's watchdog: never tokens drawn without
    its shard."""
    request = agreed.request
    need_lse = combine == "factorized" or return_logsumexp
    B = request.inv_temp.shape[0]
    error = None
    cands = None
    if size:
        try:
            cands = _local_candidates(stage1(request, agreed.start, need_lse), request.inv_temp, need_lse)
        except Exception as exc:  # noqa: BLE001 - carried to the peers, then re-raised here
            if not (is_gloo(group) or request.host_checks):
                raise
            error = exc
    if cands is None:
        cands = _empty_candidates(B, request.num_samples, agreed.start, request.inv_temp.device)
    return _exchange_and_combine(cands, agreed, combine=combine, return_logsumexp=return_logsumexp, group=group,
                                 timeout=timeout, error=error)  # fmt: skip


def _exchange_and_combine(cands, agreed: Agreed, *, combine, return_logsumexp, group, timeout, error=None):
    """The second exchange (the ranks' candidates, in the order of the first exchange's starts, and how each rank's
    stage 1 ended: :func:`~flashsampling._tp_requests.failure_words`) and the combine."""
    request = agreed.request
    L, m, k, i, flags = cands
    B, S = m.shape
    lo, hi = request.seed_words
    device = m.device
    # A constant tail is a fill on the device (a host-to-device copy would wait for stage 1).
    tail = torch.zeros(1 + MESSAGE_WORDS, dtype=torch.int64, device=device) if error is None else \
        torch.tensor(failure_words(error), dtype=torch.int64).to(device)  # fmt: skip
    payload = torch.cat(
        [L.contiguous().view(torch.int64), _f32_bits(m).reshape(-1), k.reshape(-1), i.reshape(-1),
         flags.to(torch.int64), tail]
    )  # fmt: skip
    gloo = is_gloo(group)
    table = all_gather_rows(payload, group, timeout=timeout if gloo else None, what="the exchange of candidates",
                            keep_host=True)  # fmt: skip
    if table.device.type == "cpu" or request.host_checks:  # free on gloo; with host_checks the finish reads anyway
        raise_on_failures(table[:, -(1 + MESSAGE_WORDS) :].cpu().tolist(), error, "stage 1")
    table = table.to(device)
    W = table.shape[0]
    o = 0
    L_all = table[:, o : o + B].contiguous().view(torch.float64)  # [W, B]
    o += B
    m_all = _f32_from_bits(table[:, o : o + B * S]).reshape(W, B, S)
    o += B * S
    k_all = table[:, o : o + B * S].reshape(W, B, S)
    o += B * S
    i_all = table[:, o : o + B * S].reshape(W, B, S)
    o += B * S
    f_all = table[:, o : o + B].to(torch.int32)
    by_rank = [x.permute(1, 2, 0) for x in (m_all, k_all, i_all)]  # [B, S, W]
    tokens, _, flags = launch_combine_groups(
        L_all.T, *by_rank, agreed.starts, f_all.T, request.inv_temp, lo, hi, vocab_size=agreed.vocab_size,
        pathwise=combine == "pathwise",
    )  # fmt: skip
    request.finish(flags)
    if return_logsumexp:
        return tokens, masked_logsumexp(L_all.T, request.inv_temp == 0)
    return tokens


def _run(local_checks, stage1, *, combine, return_logsumexp, timeout, group):
    """The shared body of both entry points: this rank's checks (``local_checks() -> Shard``; an argument error is
    carried into the first exchange, so that every rank raises), the first exchange, stage 1 and the second."""
    world_of(group)  # a bad group raises here, on this rank (no exchange is possible)
    try:
        timeout = check_timeout(timeout)
    except (TypeError, ValueError) as exc:
        timeout_error, timeout = exc, DEFAULT_TIMEOUT_S  # still join the exchange, then raise
    else:
        timeout_error = None
    try:
        if timeout_error is not None:
            raise timeout_error
        shard, error = local_checks(), None
    except (TypeError, ValueError) as exc:
        shard, error = None, exc
    agreed = agree(shard, error, group, timeout)
    return _sample_shard(agreed, stage1, size=shard.size, combine=combine, return_logsumexp=return_logsumexp,
                         group=group, timeout=timeout)  # fmt: skip


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
    timeout: float = DEFAULT_TIMEOUT_S,
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
        (settled by the first exchange).
    vocab_size : int or None
        The global ``V``; checked against the shards.
    temperature, num_samples, host_checks, tiles
        As in :func:`flashsampling.sample`; the same on every rank (``tiles`` may differ).
    seed : int or None
        The same on every rank.  ``None`` on every rank: rank 0's torch generator draws it (shared in
        the first exchange).
    combine : {"pathwise", "factorized"}
        The combine rule (module docstring).
    return_logsumexp : bool
        Also return the global ``logsumexp(z / T)`` (float64 ``[B]``); with ``pathwise`` this
        makes stage 1 compute the tiles' log-masses too.
    timeout : float
        Seconds each of the two exchanges waits for the other ranks before ``TimeoutError`` (default
        :data:`DEFAULT_TIMEOUT_S`; module docstring: Bounded waits).
    group : torch.distributed.ProcessGroup or None
        Default: the world.

    Returns
    -------
    tokens : torch.Tensor, int64, shape (B, num_samples), global indices in ``[0, V)``, identical on every rank
    logsumexp : torch.Tensor, float64, shape (B,) (only with ``return_logsumexp``)

    Raises
    ------
    TypeError, ValueError
        On every rank alike: a rank's bad argument (that rank raises its own error, the others a ``ValueError``
        naming it), arguments that differ between ranks (B, D, num_samples, dtype, temperature -- compared by value
        --, combine, seed, return_logsumexp, host_checks, vocab_size), shards that do not tile ``[0, V)``, a
        ``group`` that is not a ``ProcessGroup`` (this rank); with ``host_checks``, NaN/inf logits or a row with no
        finite logit on any rank.
    RuntimeError
        A rank's stage 1 raised (that rank raises its own error).
    TimeoutError, RuntimeError
        A rank did not join an exchange within ``timeout`` seconds, or crashed.
    """

    def local_checks() -> Shard:
        check_shard_arguments(combine, vocab_start, vocab_size, return_logsumexp)
        B, V_r, D, device = check.check_lm_head(hidden, weight_shard, "weight_shard")
        check.check_tiles(tiles)
        request = new_request(temperature, seed, num_samples, B, device, host_checks=host_checks, what=LM_HEAD_LOGITS)
        return Shard(request, 0, B, D, hidden.dtype, combine, return_logsumexp, seed is not None, vocab_size,
                      vocab_start, V_r)  # fmt: skip

    def stage1(request: Request, start: int, lse: bool):
        # Pathwise with one sample and no logsumexp needs no log-masses: on an sm_90 GPU, the Gluon kernel.
        return request.stage1(hidden, weight_shard, tiles, col_offset=start, return_lse=lse)[0]

    return _run(local_checks, stage1, combine=combine, return_logsumexp=return_logsumexp, timeout=timeout,
                group=group)  # fmt: skip


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
    timeout: float = DEFAULT_TIMEOUT_S,
    group=None,
):
    """:func:`sample_tp` on this rank's columns of given logits, ``logits_shard [B, V_r]`` (``-inf`` masks; ``V_r``
    may be 0).  ``block_b``, ``block_v``: as in :func:`flashsampling.sample_from_logits` (may differ between ranks).

    Pathwise, the tokens equal :func:`flashsampling.sample_from_logits` on the full logits, bit for bit.
    """

    def local_checks() -> Shard:
        check_shard_arguments(combine, vocab_start, vocab_size, return_logsumexp)
        B, V_r = check.check_logits(logits_shard, "logits_shard", allow_empty=True)
        logits_tiles(B, V_r, block_b, block_v)  # the block sizes, checked before the exchange
        device = logits_shard.device
        request = new_request(temperature, seed, num_samples, B, device, host_checks=host_checks, what=GIVEN_LOGITS)
        return Shard(request, 1, B, -1, logits_shard.dtype, combine, return_logsumexp, seed is not None,
                      vocab_size, vocab_start, V_r)  # fmt: skip

    def stage1(request: Request, start: int, lse: bool):
        return request.logits_stage1(logits_shard, block_b, block_v, col_offset=start, return_lse=lse)[0]

    return _run(local_checks, stage1, combine=combine, return_logsumexp=return_logsumexp, timeout=timeout,
                group=group)  # fmt: skip


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
