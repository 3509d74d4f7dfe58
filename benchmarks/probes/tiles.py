"""Tile configurations of the probes: the product's :class:`~flashsampling.kernels.tiles.TileConfig` plus the
options the product's defaults never choose.

* ``warp_groups``: consumer warp groups of the Gluon kernel (2, the product's, or 3: an epilogue may take up to
  twice a tile's matmul time and still hide under the other groups' matmuls);
* ``handoff``: the handoff kernel of :mod:`benchmarks.probes.handoff` (one MMA warp group hands each accumulator
  to ``warp_groups`` epilogue groups);
* ``noise_filter``: the approximate filter of :mod:`benchmarks.probes.approx_filter`.
"""

from __future__ import annotations

from dataclasses import dataclass

from flashsampling.kernels.tiles import TileConfig


@dataclass(frozen=True)
class ProbeTiles(TileConfig):
    """:class:`~flashsampling.kernels.tiles.TileConfig` with the probes' options (module docstring)."""

    warp_groups: int = 2
    handoff: bool = False
    noise_filter: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.warp_groups not in (2, 3):
            raise ValueError(f"ProbeTiles.warp_groups={self.warp_groups} must be 2 or 3")
        for name in ("handoff", "noise_filter"):
            if getattr(self, name) and not self.warp_specialized:
                raise ValueError(f"ProbeTiles.{name}=True needs warp_specialized=True")


def ws_tiles(bb: int, bv: int, bd: int, stages: int, ev: int, groups: int = 2, **options) -> ProbeTiles:
    """The Gluon kernel's tiles ``bb x bv`` with ``bd``-deep K blocks, ``stages`` ring slots, ``ev``-column chunks
    and ``groups`` consumer groups (``options``: more :class:`ProbeTiles` fields)."""
    return ProbeTiles(bb, bv, bd, num_warps=4, num_stages=stages, epilogue_v=ev, warp_specialized=True,
                      warp_groups=groups, **options)  # fmt: skip


def warp_groups(tiles: TileConfig) -> int:
    """The consumer (or epilogue) warp groups of ``tiles``: ``ProbeTiles.warp_groups``, else the product's 2."""
    return getattr(tiles, "warp_groups", 2)
