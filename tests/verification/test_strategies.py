"""The hypothesis strategies generate the extremes they promise and validate their arguments."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from flashsampling.reference import softmax
from verification import strategies as vs


def generates(strategy, condition, examples: int = 150) -> bool:
    """True when some of ``examples`` generated values satisfy ``condition`` (no shrinking: fast)."""
    hits = []

    @settings(max_examples=examples, phases=[Phase.generate], derandomize=True, database=None, deadline=None)
    @given(strategy)
    def run(x):
        if condition(x):
            hits.append(True)

    run()
    return bool(hits)


@pytest.mark.parametrize(
    ("strategy", "condition"),
    [
        (vs.vocab_sizes(max_size=1000, tile=128), lambda v: v == 1),
        (vs.vocab_sizes(max_size=1000, tile=128), lambda v: v % 128 == 127),
        (vs.vocab_sizes(max_size=1000, tile=128), lambda v: v > 128 and v % 128 == 1),
        (vs.temperatures(), lambda t: t == 0.0),
        (vs.temperatures(min_value=1e-3, max_value=1e3), lambda t: t == 1e3),
        (vs.masked_logits(st.integers(2, 8)), lambda z: np.isfinite(z).sum() == 1),
        (vs.tied_logits(50), lambda z: (z == z.max()).sum() >= 10),
        (vs.huge_range_logits(20, span=1e4), lambda z: z.max() - z.min() >= 2e4),
        (vs.peaked_logits(8), lambda z: np.sort(z)[-1] - np.sort(z)[-2] >= 60),
        (vs.many_tail_logits(50, gap=(15.0, 40.0)), lambda z: z.max() - np.median(z) > 35),
        (vs.logits(vocab_size=vs.vocab_sizes(max_size=64)), lambda z: (~np.isfinite(z)).any()),
    ],
    ids=[
        "vocab_sizes->1",
        "vocab_sizes->tile-1",
        "vocab_sizes->tile+1",
        "temperatures->0",
        "temperatures->max",
        "masked->one finite",
        "tied->10 tied maxima",
        "huge_range->2e4 span",
        "peaked->60 nat peak",
        "many_tail->35 nat tail",
        "logits->has -inf",
    ],
)
def test_generates_promised_extremes(strategy, condition):
    assert generates(strategy, condition)


@settings(max_examples=60, deadline=None)
@given(vs.logits(vocab_size=vs.vocab_sizes(max_size=300)), vs.temperatures())
def test_every_generated_case_is_a_valid_target(z, t):
    p = softmax(z, t)
    assert z.dtype == np.float32 and np.isfinite(p).all() and p.sum() == pytest.approx(1.0)
    assert np.isfinite(z).any() and not np.isnan(z).any() and not np.isposinf(z).any()


@settings(max_examples=20, deadline=None)
@given(vs.logits(vocab_size=16, batch_size=3))
def test_batched_logits(z):
    assert z.shape == (3, 16) and z.dtype == np.float32


@settings(max_examples=40, deadline=None)
@given(vs.many_tail_logits(st.integers(2, 400), gap=(15.0, 40.0)))
def test_many_tail_shape(z):
    top = z.max()
    tail = z[z < top - 10]
    assert tail.size >= 1 and np.all(tail == tail[0]) and 15 - 1e-3 <= top - tail[0] <= 40 + 1e-3


BAD = [
    ("vocab_sizes(min_size=0)", lambda: vs.vocab_sizes(min_size=0), ValueError, "min_size"),
    ("vocab_sizes(max_size=1.5)", lambda: vs.vocab_sizes(max_size=1.5), TypeError, "max_size"),
    ("vocab_sizes(min_size=10, max_size=5)", lambda: vs.vocab_sizes(min_size=10, max_size=5), ValueError, "max_size"),
    ("temperatures(min_value=0)", lambda: vs.temperatures(min_value=0.0), ValueError, "min_value"),
    ("temperatures(allow_zero=1)", lambda: vs.temperatures(allow_zero=1), TypeError, "allow_zero"),
    ("flat_logits(0)", lambda: vs.flat_logits(0), ValueError, "vocab_size"),
    ("tied_logits(5, max_levels=0)", lambda: vs.tied_logits(5, max_levels=0), ValueError, "max_levels"),
    (
        "masked_logits(5, max_masked_fraction=2)",
        lambda: vs.masked_logits(5, max_masked_fraction=2),
        ValueError,
        "fraction",
    ),
    ("huge_range_logits(5, span=1e9)", lambda: vs.huge_range_logits(5, span=1e9), ValueError, "span"),
    ("peaked_logits(5, gap=(3, 1))", lambda: vs.peaked_logits(5, gap=(3.0, 1.0)), ValueError, "gap"),
    ("many_tail_logits(5, gap=nan)", lambda: vs.many_tail_logits(5, gap=float("nan")), TypeError, "gap"),
    ("logits(kinds=('nope',))", lambda: vs.logits(kinds=("nope",)), ValueError, "unknown kinds"),
    ("logits(kinds='flat')", lambda: vs.logits(kinds="flat"), TypeError, "kinds"),
]


@pytest.mark.parametrize(("call", "exc", "match"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_arguments_are_validated_when_called(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
