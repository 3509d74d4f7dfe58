"""Top-k sampling fused into the LM head: what ``sample(..., top_k=k)`` and ``sample_from_logits(..., top_k=k)`` run.

The law is ``verification.targets.top_k(k, ties="low_index")``: the ``k`` largest logits in the order (logit
descending, index ascending), then ``softmax(z / T)`` on them (``T = 0``: their argmax, exact ties broken at random).
The kernels and the argument for exactness are in :mod:`flashsampling.kernels.topk`; the NumPy twin is
:func:`flashsampling.twin.sample_topk_twin`; ``docs/targets.md`` ("The fused top-k sampler") has the conventions and
the cost.

``top_k`` is an int or an integer tensor ``[B]`` (one ``k`` per row), each ``k`` in ``[1, MAX_TOP_K]`` or ``>= V``
(no truncation).  ``None``, or ``k >= V`` for every row, is the plain sampler, unchanged.  A batch that mixes rows
with ``k >= V`` and truncated rows runs the top-k kernels with the plain epilogue added (those rows get the plain
sampler's tokens).  A tensor's values are read on the host before the launch (they size the candidate buffers and
the compile-time width): one copy of ``B`` integers, a synchronization when the tensor is on the GPU (none on the
CPU).
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from ._validate import same_device, short_repr
from .kernels.launch import next_power_of_2
from .kernels.tiles import TileConfig, logits_tiles
from .kernels.topk import (
    MAX_TOP_K,
    launch_topk_logits_stage1,
    launch_topk_merge,
    launch_topk_stage1,
    reduce_plain,
    topk_tiles,
)

if TYPE_CHECKING:
    from ._request import Request

__all__ = ["MAX_TOP_K", "TopK", "sample_top_k", "sample_top_k_from_logits", "top_k_rows"]

#: Integer dtypes a ``top_k`` tensor may have.
INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


@dataclass(frozen=True)
class TopK:
    """A checked ``top_k`` for ``B`` rows.

    Attributes
    ----------
    k : torch.Tensor, int32, shape (B,), on the call's device
        Each truncated row's ``k``; ``width`` for a row with ``k >= V``.
    width : int
        ``K``, the power of two at least every truncated row's ``k`` (at most :data:`MAX_TOP_K`): stage 2 keeps
        ``K`` keys per row, stage 1 ``min(K, block_v)`` per tile.
    untruncated : torch.Tensor or None
        bool ``(B,)`` on the device, rows with ``k >= V``, when some row has one (else ``None``).
    """

    k: torch.Tensor
    width: int
    untruncated: torch.Tensor | None


def top_k_rows(top_k, batch: int, V: int, device: torch.device) -> TopK | None:
    """Check ``top_k`` for ``batch`` rows of ``V`` tokens on ``device``: ``None`` for the plain sampler (``top_k``
    None, or ``k >= V`` on every row), else the :class:`TopK`.  Metadata first, then the values (a tensor's are read
    on the host); nothing is launched.

    Raises
    ------
    TypeError
        ``top_k`` not an int (a bool, ``2.0`` and a NumPy float included) or a dense integer tensor.
    ValueError
        A tensor not of shape ``(B,)``, or on a device other than the call's (or the CPU); a ``k < 1``; a ``k`` above
        :data:`MAX_TOP_K` and below ``V``.
    """
    if top_k is None:
        return None
    if isinstance(top_k, torch.Tensor):
        if top_k.layout != torch.strided or top_k.is_nested:
            raise TypeError(f"top_k must be a dense (strided) tensor, got layout {top_k.layout}")
        if top_k.dtype not in INT_DTYPES:
            raise TypeError(f"top_k.dtype={top_k.dtype} is not supported; top_k must be an int or an integer tensor")
        if tuple(top_k.shape) != (batch,):
            raise ValueError(f"top_k must be an int or a tensor of shape (B,) = ({batch},), got shape "
                             f"{tuple(top_k.shape)}")  # fmt: skip
        if top_k.device.type != "cpu" and not same_device(top_k.device, device):
            raise ValueError(f"top_k.device={top_k.device} differs from the inputs' device {device}")
        values = top_k.detach().to("cpu", torch.int64)
        low = (values < 1).nonzero()
        if low.numel():
            i = int(low[0, 0])
            raise ValueError(f"top_k[{i}]={int(values[i])} must be >= 1")
        capped = ((values > MAX_TOP_K) & (values < V)).nonzero()
        if capped.numel():
            i = int(capped[0, 0])
            raise ValueError(f"top_k[{i}]={int(values[i])} {_CAP_RULE.format(MAX_TOP_K, V)}")
        untruncated = values >= V
        if bool(untruncated.all()):
            return None
        width = next_power_of_2(int(values[~untruncated].max()))
        on_device = top_k.to(device=device, dtype=torch.int64)
        k = torch.where(on_device >= V, width, on_device).to(torch.int32)
        return TopK(k, width, (on_device >= V) if bool(untruncated.any()) else None)
    if isinstance(top_k, (bool, np.bool_)) or not isinstance(top_k, numbers.Integral):
        raise TypeError(f"top_k must be an int or an integer tensor, got {type(top_k).__name__} {short_repr(top_k)}")
    k = int(top_k)
    if k < 1:
        raise ValueError(f"top_k={k} must be >= 1")
    if k >= V:
        return None
    if k > MAX_TOP_K:
        raise ValueError(f"top_k={k} {_CAP_RULE.format(MAX_TOP_K, V)}")
    return TopK(torch.full((batch,), k, dtype=torch.int32, device=device), next_power_of_2(k), None)


#: The cap's message: stage 2 keeps a row's candidates in registers (:mod:`flashsampling.kernels.topk`, "The cap").
_CAP_RULE = "must be <= {} (the fused sampler's candidate buffer) or >= V={} (no truncation)"


def topk_tiles_for(hidden: torch.Tensor, tiles: TileConfig | None, full: bool = False) -> TileConfig:
    """The top-k matmul kernel's tiles: the caller's block sizes, warps, stages and register cap (its
    ``epilogue_v``, ``persistent`` and ``warp_specialized`` do not apply: one program per tile), else
    :func:`~flashsampling.kernels.topk.topk_tiles` (``full``: with the plain epilogue)."""
    if tiles is None:
        return topk_tiles(hidden.shape[0], hidden.element_size(), full)
    return dataclasses.replace(tiles, epilogue_v=0, persistent=False, warp_specialized=False)


def sample_top_k(request: Request, hidden: torch.Tensor, weight: torch.Tensor, top_k: TopK,
                 tiles: TileConfig | None = None) -> torch.Tensor:  # fmt: skip
    """Stage 1 on ``hidden @ weight.T`` (:func:`~flashsampling.kernels.topk.launch_topk_stage1`), stage 2, the
    finish; the tokens, int64 ``[B, S]``."""
    lo, hi = request.seed_words
    full = top_k.untruncated is not None
    cand, flags, plain = launch_topk_stage1(
        hidden, weight, request.inv_temp, lo, hi, request.num_samples, top_k.width, topk_tiles_for(hidden, tiles, full),
        full=full, noise=request.noise,
    )  # fmt: skip
    return finish_top_k(request, top_k, cand, flags, plain, weight.shape[0])


def sample_top_k_from_logits(request: Request, logits: torch.Tensor, top_k: TopK, block_b: int | None = None,
                             block_v: int | None = None) -> torch.Tensor:  # fmt: skip
    """Stage 1 on given ``logits [B, V]`` (block sizes as :func:`~flashsampling.kernels.tiles.logits_tiles`), stage 2,
    the finish; the tokens, int64 ``[B, S]``."""
    B, V = logits.shape
    bb, bv = logits_tiles(B, V, block_b, block_v)
    lo, hi = request.seed_words
    cand, flags, plain = launch_topk_logits_stage1(
        logits, request.inv_temp, lo, hi, request.num_samples, top_k.width, bb, bv,
        full=top_k.untruncated is not None, noise=request.noise,
    )  # fmt: skip
    return finish_top_k(request, top_k, cand, flags, plain, V)


def finish_top_k(request: Request, top_k: TopK, cand, flags, plain, V: int) -> torch.Tensor:
    """Stage 2 (:func:`~flashsampling.kernels.topk.launch_topk_merge`; the plain reduction for untruncated rows),
    then :meth:`Request.finish`; the tokens, int64 ``[B, S]``."""
    lo, hi = request.seed_words
    tokens, row_flags = launch_topk_merge(cand, flags, top_k.k, top_k.width, request.inv_temp, lo, hi,
                                          request.num_samples, V, noise=request.noise)  # fmt: skip
    if top_k.untruncated is not None:
        plain_tokens, plain_flags = reduce_plain(plain, flags, V)
        rows = top_k.untruncated[:, None]
        tokens = torch.where(rows, plain_tokens, tokens)
        row_flags = torch.where(rows, plain_flags, row_flags)
    request.finish(row_flags)
    return tokens
