"""The tile inverse-CDF sampler's entry points (proofs/tile_inverse_cdf.md; opt-in, not in ``flashsampling``'s
namespace: another stream than :func:`flashsampling.sample`'s, with the same law within the proof's bound).

* :func:`sample_fused_tile_cdf`: fused into the warp-specialized Gluon kernel (sm_90), the product's version;
* :func:`sample_tile_cdf_from_logits`: the prototype on given logits (the Triton kernel of
  :mod:`flashsampling.tile_cdf.kernel`; stage 2 on the host, in NumPy).

Both run :mod:`flashsampling._request`'s preamble (checks, per-row ``1/T``) like every entry point.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .._request import lm_head_request, logits_request
from ..kernels.flags import FLAG_BAD_LOGIT, FLAG_NO_FINITE, FLAG_OVERFLOW
from ..kernels.launch import cdiv
from ..kernels.pingpong import launch_pingpong
from ..kernels.stage1 import allocate_partials
from ..kernels.stage2 import launch_combine_groups
from ..kernels.tiles import MIN_LOGITS_BLOCK_V, check_block, warp_specialized_supported, warp_specialized_tiles
from .fused import tile_cdf_epilogue
from .kernel import launch_tile_cdf_stage1
from .twin import draw_tiles_np, tile_logmass

#: The fused sampler's tiles: the B=256 warp-specialized tiles, 256 columns (the stream's ``block_v``) read in
#: 32-column chunks (its slot order); tests/test_tile_cdf.py holds both.
TILE_CDF_TILES = warp_specialized_tiles(256)


def sample_fused_tile_cdf(hidden, weight, *, temperature=1.0, seed: int | None = None, host_checks: bool = True):
    """The tile inverse-CDF sampler fused into the LM-head matmul: one token per row of
    ``softmax(hidden @ weight.T / T)``, int64 ``[B, 1]``.

    Stage 1 is the warp-specialized Gluon kernel with the stream's epilogue
    (:func:`~flashsampling.tile_cdf.fused.tile_cdf_epilogue`) on 256-column tiles (an sm_90 GPU, bf16 or fp16 inputs
    that TMA can read): per row and tile ``m``, ``Q`` and the draw in the kernel's slot order.  Stage 2 chooses the
    tile by Gumbel-max over ``L = m + ln Q - 55 ln 2`` (float64) with the group stream's noise, in the grouped
    variant's combine kernel; a greedy row (``T = 0``) takes the noise-free candidates by ``(max, key)``, as
    :func:`flashsampling.sample` does.  Arguments and errors as :func:`flashsampling.sample`'s
    (``num_samples = 1``)."""
    request, V = lm_head_request(hidden, weight, temperature=temperature, seed=seed, num_samples=1,
                                 host_checks=host_checks)  # fmt: skip
    if not warp_specialized_supported(hidden, weight):
        raise ValueError("hidden/weight: the fused tile inverse-CDF sampler needs an sm_90 GPU (compiled, not "
                         "interpreted, with triton 3.6: the Gluon kernel's) and bf16 or fp16 inputs of one dtype that "
                         "TMA can read")  # fmt: skip
    tiles = TILE_CDF_TILES
    K = cdiv(V, tiles.block_v)
    parts = allocate_partials(hidden.shape[0], 1, K, hidden.device)
    lo, hi = request.seed_words
    launch_pingpong(hidden, weight, request.inv_temp, parts, lo, hi, tiles, epilogue=tile_cdf_epilogue)
    part_max, part_key, part_idx, flags, _ = parts
    starts = torch.arange(K, dtype=torch.int64, device=hidden.device) * tiles.block_v
    # L = m + ln Q - 55 ln 2 from the candidates (key = Q) inside the combine kernel: one launch for stage 2.
    tokens, _, row_flags = launch_combine_groups(part_max, part_max, part_key, part_idx, starts, flags,
                                                 request.inv_temp, lo, hi, vocab_size=V, from_weights=True)  # fmt: skip
    request.finish(row_flags)
    return tokens


def sample_tile_cdf_from_logits(logits, temperature, seed: int | None, *, block_b: int = 4, block_v: int = 256,
                                host_checks: bool = True) -> np.ndarray:  # fmt: skip
    """The prototype end to end: stage 1 on the logits' device (:func:`~flashsampling.tile_cdf.kernel.
    launch_tile_cdf_stage1`; compiled on a GPU, interpreted on the CPU), stage 2 on the host
    (:func:`~flashsampling.tile_cdf.twin.draw_tiles_np`).  One token per row (sample 0 of each row's streams), int64
    ``[B]``, always in ``[0, V)``.

    Arguments and errors as :func:`flashsampling.sample_from_logits`'s (``logits [B, V]`` of any strides, ``-inf``
    masks a token; ``seed`` in ``[0, 2**64)``), except: ``temperature`` (a number or a tensor ``[B]``) must be
    ``> 0`` in every row -- the prototype has no greedy path, and since stage 2 reads the candidates on the host
    anyway, a row of temperature 0 is refused whatever ``host_checks`` (an invalid row, NaN or negative, only with
    ``host_checks``, as everywhere); ``block_b`` a power of two, ``block_v`` one in ``[16, 256]``
    (the tile's weights sum below ``2**63``).  With ``host_checks`` (the default) NaN or infinite logits, ``z / T``
    overflowing float32 and rows with no finite logit raise ``ValueError`` (a pass over the logits on their device:
    the kernel reports no flags)."""
    request, V = logits_request(logits, temperature=temperature, seed=seed, num_samples=1, host_checks=host_checks)
    if request.all_greedy:
        raise ValueError(f"temperature={temperature} must be > 0: the tile inverse-CDF prototype has no greedy path")
    block_b = check_block("block_b", block_b, 1)
    block_v = check_block("block_v", block_v, MIN_LOGITS_BLOCK_V, MAX_TILE_CDF_BLOCK_V)
    if logits.stride(1) != 1:
        logits = logits.contiguous()  # the prototype's kernel reads rows of unit column stride
    lo, hi = request.seed_words
    m, total, draw = (x.cpu().numpy() for x in launch_tile_cdf_stage1(logits, request.inv_temp, lo, hi, block_b,
                                                                      block_v))  # fmt: skip
    if request.host_checks:
        request.finish(logit_flags(logits, request.inv_temp))
    # Rows of temperature 0: 1/T = 0 with no flag (an invalid row, NaN say, has 1/T = 0 too, but a flag: it raised
    # above with host_checks, and without them it is sampled, its token in range, as every entry point does).
    zero = request.inv_temp == 0
    if request.temp_flags is not None:
        zero &= request.temp_flags == 0
    greedy = np.flatnonzero(zero.cpu().numpy())
    if greedy.size:
        raise ValueError(f"temperature[{greedy[0]}]=0 must be > 0: the tile inverse-CDF prototype has no greedy path")
    k = draw_tiles_np(tile_logmass(m, total), request.seed, block_v)
    return np.clip(draw[np.arange(draw.shape[0]), k], 0, V - 1)


#: The prototype's largest tile: 256 weights below 2**55 each sum below 2**63.
MAX_TILE_CDF_BLOCK_V = 256


def logit_flags(logits: torch.Tensor, inv_temp: torch.Tensor) -> torch.Tensor:
    """Per row, the flags the Triton kernels raise on given logits (:mod:`flashsampling.kernels.flags`): a NaN or
    ``+inf`` logit, ``z * (1/T)`` overflowing float32 for a finite ``z``, no finite logit; int32 ``[B]``, computed on
    the logits' device (torch operations; the prototype's kernel reports no flags)."""
    z = logits.float()
    bad = (torch.isnan(z) | (z == math.inf)).any(dim=1)
    scaled = z * inv_temp[:, None]
    overflow = (torch.isinf(scaled) & torch.isfinite(z)).any(dim=1)
    empty = ~torch.isfinite(z).any(dim=1)
    flags = torch.where(bad, FLAG_BAD_LOGIT, 0) | torch.where(overflow, FLAG_OVERFLOW, 0)
    return (flags | torch.where(empty, FLAG_NO_FINITE, 0)).to(torch.int32)
