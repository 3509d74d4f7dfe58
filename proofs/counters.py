"""The Philox counters of every stream, read off the shipped code (finite_precision.md, section 0).

The proofs' independence arguments rest on which block each random quantity comes from.  Rather than restating the
layouts by hand, this module states each one as a function of the code's constants (``STREAM_TOKEN`` ... of
:mod:`flashsampling.noise`), checks it against the shipped NumPy twins (which ``tests/test_noise.py`` binds to the
kernels) at random counters, and renders the list that finite_precision.md, section 0, shows.  ``python
proofs/counters.py --write`` records the result; ``tests/proofs/test_counters.py`` checks that the recorded layouts
are the code's and that every layout quoted in the proofs is one of them.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as `python proofs/counters.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flashsampling import noise  # noqa: E402


@dataclass(frozen=True)
class Layout:
    """One stream: its name in the code, the counter's first field as the proofs write it, and the words it takes."""

    stream: str  # the constant of flashsampling.noise
    what: str  # what the block serves
    first: str  # the counter's first field, as the proofs write it (LaTeX)
    words: str  # which words, and how (markdown)


LAYOUTS = (
    Layout("STREAM_TOKEN", "token noise", "p",
           "tokens $2p$ and $2p + 1$ share the block; the even token takes the words $(w_0, w_1)$, the odd one "
           "$(w_2, w_3)$, each pair the integer $k = w_{\\text{hi}} 2^{32} + w_{\\text{lo}}$ (`token_noise_np`)"),
    Layout("STREAM_TIE", "tie key of token $i$", "i",
           "$w_0 \\mid 1$, uniform on the $2^{31}$ odd 32-bit numbers (`tie_key_np`)"),
    Layout("STREAM_GROUP", "group noise (grouped, tensor-parallel factorized and tile inverse-CDF draws)",
           "\\text{group id}",
           "$G'$ in float64 from $(w_0, w_1)$ and the key $w_2$, the group id being the group's first global index "
           "(`group_noise_np`)"),
    Layout("STREAM_ONLINE", "online merge's coin", "\\text{chunk start}",
           "the integer $k = w_1 2^{32} + w_0$ (`coin_words_np`)"),
    Layout("STREAM_TILE", "tile inverse-CDF uniform", "\\text{tile start}",
           "the 128 bits $(w_0, w_1, w_2, w_3)$ (`_tile_draws`)"),
)  # fmt: skip


def _counters(n: int, rng: np.random.Generator):
    """Random (row, index, sample) counters (uint32) and a seed."""
    c = rng.integers(0, 2**32, (3, n), dtype=np.uint64).astype(np.uint32)
    return int(rng.integers(0, 2**63)), c[0], c[1], c[2]


def _block(seed: int, first, row, sample, stream: str):
    k0, k1 = noise.split_seed(seed)
    return noise.philox4x32_np(first, row, sample, getattr(noise, stream), k0, k1)


def layout_mismatches(n: int = 4096, seed: int = 12) -> dict[str, int]:
    """For each stream, at ``n`` random counters: how many of the shipped twin's values differ from the documented
    layout (the block of the code's stream constant, the documented words).  All must be 0."""
    from flashsampling.online import coin_words_np
    from flashsampling.tile_cdf import twin as tile_twin

    rng = np.random.default_rng(seed)
    out = {}
    s, row, idx, smp = _counters(n, rng)
    g, _ = noise.token_noise_np(s, row, idx, smp)
    w0, w1, w2, w3 = _block(s, idx >> np.uint32(1), row, smp, "STREAM_TOKEN")
    odd = (idx & np.uint32(1)) == 1
    doc = noise.gumbel_from_bits_np(np.where(odd, w2, w0), np.where(odd, w3, w1))
    out["STREAM_TOKEN"] = int(np.count_nonzero(g.view(np.uint32) != doc.view(np.uint32)))
    s, row, idx, smp = _counters(n, rng)
    w0, _, _, _ = _block(s, idx, row, smp, "STREAM_TIE")
    out["STREAM_TIE"] = int(np.count_nonzero(noise.tie_key_np(s, row, idx, smp) != (w0 | np.uint32(1))))
    s, row, idx, smp = _counters(n, rng)
    g64, key = noise.group_noise_np(s, row, idx, smp)
    w0, w1, w2, _ = _block(s, idx, row, smp, "STREAM_GROUP")
    out["STREAM_GROUP"] = int(np.count_nonzero((g64 != noise.gumbel64_from_bits_np(w0, w1)) | (key != w2)))
    s, row, idx, smp = _counters(n, rng)
    c0, c1 = coin_words_np(s, idx, row, smp)
    w0, w1, _, _ = _block(s, idx, row, smp, "STREAM_ONLINE")
    out["STREAM_ONLINE"] = int(np.count_nonzero((c0 != w0) | (c1 != w1)))
    # The tile draw: a tile of one weight-1 token in 64 (weights 2**55 and 0) draws the column whose cumulative
    # weight first exceeds t = floor(U Q / 2**128), U the block's 128 bits; with two equal weights the draw is the
    # top bit of U (t < 2**55 iff U < 2**127): the documented block's w3 >> 31.
    s, row, idx, smp = _counters(n, rng)
    tiles = np.full((n, 2), 0.0, dtype=np.float32)
    _, _, draw = tile_twin._tile_draws(tiles, idx, row, smp, s)
    _, _, _, w3 = _block(s, idx, row, smp, "STREAM_TILE")
    out["STREAM_TILE"] = int(np.count_nonzero(draw != (w3 >> np.uint32(31))))
    return out


def collect() -> dict:
    return {"streams": {lay.stream: int(getattr(noise, lay.stream)) for lay in LAYOUTS},
            "mismatches": layout_mismatches()}  # fmt: skip


def verdicts(res: dict) -> dict[str, bool]:
    return {
        "every stream's twin uses the documented block": all(v == 0 for v in res["mismatches"].values()),
        "the stream tags are distinct": len(set(res["streams"].values())) == len(res["streams"]),
    }


def quoted_layout(first: str, number: int) -> str:
    """A counter as the proofs write it: ``(p, \\text{row}, \\text{sample}, 0)``."""
    return f"({first}, \\text{{row}}, \\text{{sample}}, {number})"


def render(res: dict) -> dict[str, str]:
    lines = []
    for lay in LAYOUTS:
        number = res["streams"][lay.stream]
        ok = "" if res["mismatches"][lay.stream] == 0 else " **(the twin differs)**"
        lines.append(f"* {lay.what}: block ${quoted_layout(lay.first, number)}$ (`{lay.stream}` $= {number}$); "
                     f"{lay.words}{ok};")  # fmt: skip
    lines[-1] = lines[-1][:-1] + "."
    return {"counters": "\n".join(lines)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    res = collect()
    print(res)
    if "--write" in argv:
        from proofs import _generated as gen

        gen.save("counters", res)
        gen.write_blocks(gen.HERE / "finite_precision.md", "counters.py", render(gen.roundtrip(res)))
    v = verdicts(res)
    print(v)
    return 0 if all(v.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
