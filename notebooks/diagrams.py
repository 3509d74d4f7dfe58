"""Boxes and arrows for the notebooks' diagrams (the group tree, the merge chain, the ranks' exchange).

Not a notebook: ``02_``, ``03_`` and ``04_`` import it.  Coordinates are in axis units ``[0, 1] x [0, 1]``; an arrow
runs from the edge of one box to the edge of the other, along the line between their centres.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt


@dataclass(frozen=True)
class Box:
    """A drawn box: its centre and half sizes, in axis units."""

    x: float
    y: float
    half_width: float
    half_height: float

    def edge_towards(self, x: float, y: float) -> tuple[float, float]:
        """Where the line from the centre towards ``(x, y)`` leaves the box."""
        dx, dy = x - self.x, y - self.y
        inf = float("inf")
        scale = min(self.half_width / abs(dx) if dx else inf, self.half_height / abs(dy) if dy else inf)
        return self.x + scale * dx, self.y + scale * dy


def canvas(width: float = 10.0, height: float = 4.0):
    """A figure with one blank axis spanning ``[0, 1] x [0, 1]``."""
    fig, ax = plt.subplots(figsize=(width, height))
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")
    return fig, ax


def box(ax, x: float, y: float, text: str, *, color: str = "C0", fontsize: float = 8.5) -> Box:
    """A rounded box with ``text`` centred at ``(x, y)``."""
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize,
            bbox={"boxstyle": "round,pad=0.35", "fc": color, "alpha": 0.18, "ec": color})  # fmt: skip
    width_in, height_in = ax.figure.get_size_inches() * ax.get_position().size
    lines = text.split("\n")
    pad = 0.5 * fontsize / 72  # the bbox's padding, in inches
    half_w = (0.5 * max(map(len, lines)) * 0.55 * fontsize / 72 + pad) / width_in
    half_h = (0.5 * len(lines) * 1.2 * fontsize / 72 + pad) / height_in
    return Box(x, y, half_w, half_h)


def arrow(ax, start: Box, end: Box, *, text: str = "", color: str = "0.3") -> None:
    """An arrow from the edge of ``start`` to the edge of ``end``, with an optional label at its middle."""
    a, b = start.edge_towards(end.x, end.y), end.edge_towards(start.x, start.y)
    ax.annotate("", xy=b, xytext=a, arrowprops={"arrowstyle": "->", "color": color, "shrinkA": 0, "shrinkB": 2})
    if text:
        ax.text((a[0] + b[0]) / 2, (a[1] + b[1]) / 2, text, fontsize=7.5, color=color, ha="center", va="center",
                bbox={"fc": "white", "ec": "none", "pad": 0.5})  # fmt: skip
