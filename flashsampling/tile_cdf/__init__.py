"""The tile inverse-CDF sampler (proofs/tile_inverse_cdf.md), an opt-in stream beside :func:`flashsampling.sample`'s.

Within a vocabulary tile every token gets an integer weight (:mod:`.weights`) and one 128-bit uniform per (row,
tile) draws a token by the weights' inverse CDF; stage 2 picks the tile by Gumbel-max over the tiles' log-masses.

=================  ==========================================================================================
:mod:`.weights`    the integer weights ``q = floor(2**(55 + n) P(f))``: Triton device function and NumPy twin
:mod:`.kernel`     Triton: the 128 x 64-bit ``mulhi`` and the prototype's stage 1 on given logits
:mod:`.fused`      Gluon: the draw inside the warp-specialized kernel's epilogue (the product's stage 1)
:mod:`.twin`       NumPy: both stage 1s and stage 2, and the samplers the statistical battery runs
:mod:`.sampling`   the entry points :func:`sample_fused_tile_cdf` and :func:`sample_tile_cdf_from_logits`
=================  ==========================================================================================
"""

from .sampling import TILE_CDF_TILES, sample_fused_tile_cdf, sample_tile_cdf_from_logits
from .twin import (
    draw_tiles_np,
    fused_tile_cdf_np,
    mulhi_u128_u64_np,
    pad_tiles,
    slot_order,
    tile_cdf_sampler_np,
    tile_logmass,
    tile_stage1_np,
)

__all__ = [
    "TILE_CDF_TILES",
    "draw_tiles_np",
    "fused_tile_cdf_np",
    "mulhi_u128_u64_np",
    "pad_tiles",
    "sample_fused_tile_cdf",
    "sample_tile_cdf_from_logits",
    "slot_order",
    "tile_cdf_sampler_np",
    "tile_logmass",
    "tile_stage1_np",
]
