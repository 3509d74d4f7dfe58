"""Top-k, top-p and min-p fused into the LM head: what ``sample(..., top_k=, top_p=, min_p=, order=)`` and
``sample_from_logits`` with the same arguments run.

The law
-------
``flashsampling.targets.sampling_law(z, T, top_k=k, top_p=p, min_p=q, order=order, top_k_ties="low_index")`` on the
fp32 logits ``z`` as the kernel computes them: top-k keeps the first ``k`` tokens in the order (logit descending,
index ascending); top-p (``ties="all"``, the crossing token kept, ``M_i < p S``) and min-p (``P(i) >= q max P``)
the targets' defaults; the filters composed in ``order`` (a name of :data:`flashsampling.targets.ORDERS`, default
``"transformers"``: temperature, top-k, top-p, min-p; or a tuple of steps), each decision taken on the float64
weights.  The token is ``argmax_{i in K} z_i / T + G(seed, row, i, sample)`` over the kept set ``K`` with the plain
sampler's noise and tie keys, so a row whose filters keep every token gets the plain sampler's token.

How
---
Stage 1 (:mod:`flashsampling.kernels.truncation`) writes, per row and vocabulary tile, the tile's first ``LIST``
tokens in the order (and the tile's float64 mass where a top-p step sees the whole row), no noise; stage 2
(:mod:`flashsampling.kernels.truncation_stage2`) decides each row's kept set from the lists when they provably hold
it, with every float64 decision outside its error bound, and draws.  A row it cannot decide -- a kept set wider
than the lists, or a decision within the bound -- takes the exact fallback: its fp32 logits recomputed by the same
kernel (the same bits), stage 2 on the whole row, and, where a decision is still within the bound, the law itself
on the host (:func:`exact_threshold`).  ``proofs/truncation.md`` has the argument and the bounds.

Arguments
---------
Checked once, before any launch, by :mod:`flashsampling.truncation_args`.
``top_k``: an int or an integer tensor ``[B]``, each ``k`` in ``[1, MAX_TOP_K]`` or ``>= V`` (no truncation).
``top_p``: a number or a floating tensor ``[B]`` in ``(0, 1]`` (1: no truncation).  ``min_p``: a number or a
floating tensor ``[B]`` in ``[0, 1]`` (0: no truncation).  ``None`` disables a filter; a row whose filters all
keep everything is the plain sampler's (a call where every row is, is the plain sampler: the same tokens as without
the arguments).  A tensor's values are read on the host before the launch (one copy; a synchronization when it is
on the GPU), and every truncated call synchronizes once after stage 2 to learn which rows need the fallback.  A
device seed is refused with these arguments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from ._validate import check_tiles
from .kernels.stage2 import reduce_tiles
from .kernels.tiles import TileConfig, logits_tiles
from .kernels.truncation import (
    launch_truncation_logits_stage1,
    launch_truncation_stage1,
    launch_write_logits,
    list_length,
    truncation_tiles,
)
from .kernels.truncation_stage2 import (
    STATUS_UNDECIDED,
    launch_truncation_stage2,
)
from .truncation_args import MAX_TOP_K, Truncation, truncation_rows
from .twin import kept_mask, ordered_np

if TYPE_CHECKING:
    from ._request import Request

__all__ = ["MAX_TOP_K", "Truncation", "exact_threshold", "sample_truncated", "sample_truncated_from_logits",
           "truncation_rows"]  # fmt: skip

#: Unit roundoff of float64.
U64 = 2.0**-53
#: The per-term part of the relative error bound of a float64 mass (``proofs/truncation.md``, Lemma 2): the
#: exponent's rounding over ``|x| <= 64`` (``4 * 64 u``), ``exp_neg64`` (``2.623 u``), NumPy's ``exp`` (``4 u``),
#: one product and slack.
MASS_TERM_ERROR = 300
#: Test hook: a fixed list length instead of :func:`~flashsampling.kernels.truncation.list_length`'s.
LIST_OVERRIDE: int | None = None

# --------------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------------


def row_temperatures(request: Request, batch: int, device: torch.device) -> torch.Tensor:
    """The rows' temperatures in float64 on the device, as the law takes them (the caller's values)."""
    t = request.temperature
    if isinstance(t, torch.Tensor):
        return t.detach().to(device=device, dtype=torch.float64).reshape(-1).expand(batch).contiguous()
    return torch.full((batch,), float(t), dtype=torch.float64, device=device)


def relative_error(block_v: int, T: int, N: int) -> float:
    """The relative error bound ``e`` of stage 2's float64 masses (``proofs/truncation.md``, Lemma 2): per-term
    rounding, the tile sums (``block_v``), the sum over ``T`` tiles and over ``N`` candidates."""
    return (MASS_TERM_ERROR + block_v + T + N) * U64 * 1.01


def _params(request: Request, trunc: Truncation, temp: torch.Tensor, rows: torch.Tensor | None = None) -> dict:
    def pick(x):
        return x if rows is None else x[rows]

    return {"k": pick(trunc.k), "p": pick(trunc.p), "log_min_p": pick(trunc.log_min_p), "temp": pick(temp),
            "inv_temp": pick(request.inv_temp)}  # fmt: skip


def _list_for(trunc: Truncation, block_v: int, V: int) -> int:
    return LIST_OVERRIDE if LIST_OVERRIDE is not None else list_length(trunc.kept, block_v, V)


def sample_truncated(request: Request, hidden: torch.Tensor, weight: torch.Tensor, trunc: Truncation,
                     tiles: TileConfig | None = None) -> torch.Tensor:  # fmt: skip
    """Stage 1 on ``hidden @ weight.T``, stage 2, the fallback and the finish; the tokens, int64 ``[B, S]``."""
    B = hidden.shape[0]
    V = weight.shape[0]
    full = trunc.plain_rows is not None
    if check_tiles(tiles) is None:
        tiles = truncation_tiles(B, hidden.element_size(), full)
    else:
        tiles = TileConfig(tiles.block_b, tiles.block_v, tiles.block_d, tiles.num_warps, tiles.num_stages,
                           max_registers=tiles.max_registers)  # fmt: skip
    temp = row_temperatures(request, B, hidden.device)
    LIST = min(_list_for(trunc, tiles.block_v, V), tiles.block_v)
    lo, hi = request.seed_words
    lists = launch_truncation_stage1(hidden, weight, request.inv_temp, _mass_scale(trunc, temp), lo, hi,
                                     request.num_samples, LIST, tiles, mass=trunc.mass and LIST < tiles.block_v,
                                     full=full, noise=request.noise)  # fmt: skip

    def logits_of(status: torch.Tensor) -> torch.Tensor:
        return launch_write_logits(hidden, weight, tiles, status)

    return _finish(request, trunc, lists, temp, tiles.block_v, V, logits_of)


def sample_truncated_from_logits(request: Request, logits: torch.Tensor, trunc: Truncation, block_b: int | None = None,
                                 block_v: int | None = None) -> torch.Tensor:  # fmt: skip
    """Stage 1 on given ``logits [B, V]`` (block sizes as :func:`~flashsampling.kernels.tiles.logits_tiles`), stage 2,
    the fallback and the finish; the tokens, int64 ``[B, S]``."""
    B, V = logits.shape
    bb, bv = logits_tiles(B, V, block_b, block_v)
    temp = row_temperatures(request, B, logits.device)
    LIST = min(_list_for(trunc, bv, V), bv)
    lo, hi = request.seed_words
    lists = launch_truncation_logits_stage1(logits, request.inv_temp, _mass_scale(trunc, temp), lo, hi,
                                            request.num_samples, LIST, bb, bv, mass=trunc.mass and LIST < bv,
                                            full=trunc.plain_rows is not None, noise=request.noise)  # fmt: skip
    return _finish(request, trunc, lists, temp, bv, V, lambda status: logits)


def _mass_scale(trunc: Truncation, temp: torch.Tensor) -> torch.Tensor:
    """Per row the scale of the top-p step's weights: ``T`` after the temperature (1 for a greedy row), else 1."""
    if trunc.top_p_scaled:
        return torch.where(temp > 0, temp, torch.ones_like(temp))
    return torch.ones_like(temp)


def _finish(request: Request, trunc: Truncation, lists: dict, temp: torch.Tensor, block_v: int, V: int,
            logits_of) -> torch.Tensor:  # fmt: skip
    """Stage 2 on the lists, the plain rows, the device fallback on the rows stage 2 left undecided (their whole
    logits, ``logits_of(status)``: every launch made, none waited for), then the finish: with ``host_checks`` the
    flags raised and the rows whose float64 decision was within its bound redone by the law on the host, in the
    call's one synchronization.  The tokens, int64 ``[B, S]``."""
    lo, hi = request.seed_words
    S = request.num_samples
    T, LIST = lists["T"], lists["list"]
    N = T * LIST
    edge = LIST if LIST < block_v else 0  # a list as wide as its tile is complete: no token is left out
    params = _params(request, trunc, temp)
    tokens, row_flags, status = launch_truncation_stage2(
        lists["cand_z"], lists["cand_i"], lists["mass"], lists["flags"], params, trunc.steps, S, lo, hi, V, LIST=edge,
        mass=trunc.mass and edge > 0, top_p_scaled=trunc.top_p_scaled, rel_err=relative_error(block_v, T, N),
        noise=request.noise,
    )  # fmt: skip
    if trunc.plain_rows is not None:
        part_max, part_key, part_idx, _ = lists["plain"]
        plain_tokens, plain_flags = reduce_tiles(part_max, part_key, part_idx, lists["flags"], V)
        rows = trunc.plain_rows[:, None]
        tokens = torch.where(rows, plain_tokens, tokens)
        row_flags = torch.where(rows, plain_flags, row_flags)
    z = logits_of(status)
    no_flags = torch.zeros((z.shape[0], 1), dtype=torch.int32, device=z.device)  # one (clear) flag per row
    no_mass = torch.zeros(1, dtype=torch.float64, device=z.device)
    launch_truncation_stage2(z, z, no_mass, no_flags, params, trunc.steps, S, lo, hi, V, LIST=0, mass=False,
                             top_p_scaled=trunc.top_p_scaled, rel_err=relative_error(0, 1, V), noise=request.noise,
                             columns=True, redo=(tokens, row_flags, status))  # fmt: skip
    if request.host_checks:
        request.finish(row_flags)  # the call's one synchronization
        undecided = status == STATUS_UNDECIDED
        if request.temp_flags is not None:
            undecided &= request.temp_flags == 0
        rows = undecided.nonzero().flatten()
        if rows.numel():
            tokens[rows] = host_decided(request, trunc, z, rows, temp, V)
    return tokens


def host_decided(request: Request, trunc: Truncation, z: torch.Tensor, rows: torch.Tensor, temp: torch.Tensor,
                 V: int) -> torch.Tensor:  # fmt: skip
    """The tokens ``[n, S]`` of ``rows`` whose float64 decision on the whole row was within its error bound: the
    threshold from the law itself on the host (:func:`exact_threshold`), the draw by stage 2 with it given (the
    noise keyed by the original rows)."""
    lo, hi = request.seed_words
    zr = z[rows].float().contiguous()
    z_host = zr.cpu().numpy()
    host = trunc.host
    given = [exact_threshold(z_host[j], float(temp[r]), host["k"][r], host["p"][r], host["min_p"][r], host["order"])
             for j, r in enumerate(rows.tolist())]  # fmt: skip
    gv = torch.tensor([g[0] for g in given], dtype=torch.int32, device=z.device)
    gb = torch.tensor([g[1] for g in given], dtype=torch.int32, device=z.device)
    params = _params(request, trunc, temp, rows)
    no_flags = torch.zeros((rows.numel(), 1), dtype=torch.int32, device=z.device)
    tokens, _, _ = launch_truncation_stage2(
        zr, zr, torch.zeros(1, dtype=torch.float64, device=z.device), no_flags, params, trunc.steps,
        request.num_samples, lo, hi, V, LIST=0, mass=False,
        top_p_scaled=trunc.top_p_scaled, rel_err=relative_error(0, 1, V), row_ids=rows.to(torch.int32),
        given=(gv, gb), noise=request.noise, columns=True,
    )  # fmt: skip
    return tokens


def exact_threshold(z: np.ndarray, temperature: float, k: int, p: float, min_p: float, order) -> tuple[int, int]:
    """The threshold ``(ordered level, index bound)`` of one row's kept set, from the law itself
    (:func:`~flashsampling.twin.kept_mask` on the float32 logits ``z [V]``; ``k = 0`` and ``nan`` mean no filter): the
    last kept token in the order."""
    law = kept_mask(z[None, :], temperature, k, p, min_p, order)[0]
    level = z[law].min()
    return int(ordered_np(np.float32(level))), int(np.flatnonzero(law & (z == level)).max())
