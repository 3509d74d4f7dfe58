"""proofs/counters.py: the Philox counter of every stream, as the proofs state it, is the one the shipped twins use;
every counter quoted in proofs/*.md is one of them, with the code's stream tag (so a changed key layout fails here
instead of leaving the proofs' independence arguments about a layout that is gone)."""

from __future__ import annotations

import re

import pytest

import flashsampling.noise as noise
from proofs import _generated as gen
from proofs import counters as chk

#: Counters quoted as ``(first, \text{row}, \text{sample}, N)``: the first field -> the stream constant it must carry.
FIRST_FIELD = {lay.first: lay.stream for lay in chk.LAYOUTS} | {
    "\\text{group id}_k": "STREAM_GROUP",  # factorization.md: group k's block
    "\\text{tile start}": ("STREAM_GROUP", "STREAM_TILE"),  # a tile's group draw, or its uniform
}
#: Streams quoted as ``name(\text{seed}, ..., \text{stream } N)`` (tensor_parallel.md): the function -> the stream.
STREAM_OF = {"noise": "STREAM_TOKEN", "Gumbel": "STREAM_GROUP"}


def quoted_counters() -> list[tuple[str, str, int]]:
    out = []
    for md in sorted(gen.HERE.glob("*.md")):
        text = md.read_text()
        for first, n in re.findall(r"\(([^(),]+), \\text\{row\}, \\text\{sample\}, (\d+)\)", text):
            out.append((md.name, first.strip(), int(n)))
        for name, n in re.findall(r"\\text\{(\w+)\}\([^()]*\\text\{stream \} (\d+)\)", text):
            out.append((md.name, name, int(n)))
    return out


QUOTED = quoted_counters()


def test_every_stream_uses_its_documented_block():
    assert not any(chk.layout_mismatches(n=512).values())


def test_recorded_results_are_current():
    fresh = gen.roundtrip(chk.collect())
    assert gen.same(fresh, gen.load("counters"))
    assert all(chk.verdicts(fresh).values())


def test_the_proofs_quote_counters():
    assert len(QUOTED) >= 12


@pytest.mark.parametrize("md, first, number", QUOTED, ids=[f"{m}:{f}:{n}" for m, f, n in QUOTED])
def test_every_quoted_counter_has_the_codes_stream_tag(md, first, number):
    streams = FIRST_FIELD.get(first) or STREAM_OF.get(first)
    assert streams is not None, f"{md} quotes a counter starting with {first!r}, which no layout has"
    streams = (streams,) if isinstance(streams, str) else streams
    assert number in {getattr(noise, s) for s in streams}, (md, first, number, streams)


def test_a_twin_off_its_documented_block_is_caught(monkeypatch):
    """The check can fail: tie keys taken from another stream than STREAM_TIE differ from the documented layout."""

    def planted(seed, row, index, sample):
        k0, k1 = noise.split_seed(int(seed))
        return noise.philox4x32_np(index, row, sample, 5, k0, k1)[0] | 1

    monkeypatch.setattr(noise, "tie_key_np", planted)
    assert chk.layout_mismatches(n=256)["STREAM_TIE"] > 250


def test_a_changed_stream_tag_is_caught(monkeypatch):
    """The check can fail: with STREAM_TIE changed in the code, the recorded layouts and the counters the proofs quote
    by hand (argmax_decomposition.md's (i, row, sample, 3)) no longer match it."""
    monkeypatch.setattr(noise, "STREAM_TIE", 5)
    assert not gen.same(gen.roundtrip(chk.collect()), gen.load("counters"))
    quoted = [n for md, first, n in QUOTED if md == "argmax_decomposition.md" and first == "i"]
    assert quoted and all(n != noise.STREAM_TIE for n in quoted)
