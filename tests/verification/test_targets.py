"""verification.battery.aims: value objects that name a law, compute it with flashsampling.targets, refuse bad input."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
import torch

import verification.battery.aims as vt
from flashsampling import reference
from flashsampling.targets import (
    min_p_law,
    sampling_law,
    speculative_chain_law,
    top_k_law,
    top_p_law,
)
from verification.battery.aims import SpeculativeTarget, Target, chain, min_p, softmax, speculative, top_k, top_p

Z = np.array([[2.0, 1.0, 1.0, 0.0, -np.inf], [0.0, 0.0, -1.0, 3.0, 2.5]], dtype=np.float32)


def test_reprs_read_like_the_calls():
    assert repr(softmax()) == "softmax()"
    assert repr(top_k(50)) == "top_k(k=50, ties='all')"
    assert repr(top_k([1, 2], ties="low_index")) == "top_k(k=(1, 2), ties='low_index')"
    assert repr(top_p(0.9)) == "top_p(p=0.9, ties='all', crossing='keep', strict=True)"
    assert repr(min_p(0.05, strict=True)) == "min_p(p=0.05, strict=True)"
    assert repr(chain(top_p(0.9), top_k(40))) == (
        "chain(top_k(k=40, ties='all'), top_p(p=0.9, ties='all', crossing='keep', strict=True), order='transformers')"
    )


def test_targets_are_values():
    assert top_k(5) == top_k(5) and hash(top_k(5)) == hash(top_k(5))
    assert top_k(5) != top_k(5, ties="low_index")
    assert chain(top_k(5), top_p(0.5)) == chain(top_p(0.5), top_k(5))  # canonical step order; `order` composes
    assert chain(top_k(5), order=["temperature", "top_k"]) == chain(top_k(5), order=("temperature", "top_k"))
    assert {top_p(0.9): 1}[top_p(0.9)] == 1
    assert top_p(0.9).param("crossing") == "keep"
    with pytest.raises(KeyError):
        top_p(0.9).param("k")
    with pytest.raises(AttributeError):
        top_k(5).name = "top_p"  # frozen


@pytest.mark.parametrize("t", [1.0, 0.0, 0.7, np.array([0.5, 2.0])])
def test_probs_are_the_flashsampling_laws(t):
    np.testing.assert_array_equal(softmax().probs(Z, t), reference.softmax(Z, t))
    np.testing.assert_array_equal(
        top_k(2, ties="high_index").probs(Z, t), top_k_law(Z, 2, temperature=t, ties="high_index")
    )
    np.testing.assert_array_equal(
        top_p(0.8, crossing="drop", strict=False).probs(Z, t),
        top_p_law(Z, 0.8, temperature=t, crossing="drop", strict=False),
    )
    np.testing.assert_array_equal(min_p(0.3).probs(Z, t), min_p_law(Z, 0.3, temperature=t))
    for order in ("transformers", "vllm", "llama.cpp", "joint", ("temperature", ("top_k", "top_p"), "min_p")):
        target = chain(top_k(3), top_p(0.7, ties="low_index"), min_p(0.1), order=order)
        want = sampling_law(Z, t, top_k=3, top_p=0.7, top_p_ties="low_index", min_p=0.1, order=order)
        np.testing.assert_array_equal(target.probs(Z, t), want)
    np.testing.assert_array_equal(chain().probs(Z, t), reference.softmax(Z, t))


def test_per_row_parameters():
    target = chain(top_k([1, 3]), top_p([0.5, 1.0]))
    rows = [sampling_law(Z[0], top_k=1, top_p=0.5), sampling_law(Z[1], top_k=3, top_p=1.0)]
    np.testing.assert_array_equal(target.probs(Z), np.stack(rows))
    np.testing.assert_array_equal(target.probs(torch.from_numpy(Z)), np.stack(rows))
    with pytest.raises(ValueError, match="top_k must be a number or have the batch shape"):
        top_k([1, 2, 3]).probs(Z)


def test_speculative_target_gives_p_q_the_law_and_draft_tokens():
    rng = np.random.default_rng(0)
    q = rng.dirichlet(np.ones(5), size=(2, 3))  # B=2, K=3, V=5
    logits = rng.normal(size=(2, 4, 5)).astype(np.float32)
    s = speculative(torch.from_numpy(q), target=top_k(2))
    assert isinstance(s, SpeculativeTarget) and s.num_draft_tokens == 3
    assert repr(s) == "speculative(draft_probs=<float64 (B=2, K=3, V=5)>, target=top_k(k=2, ties='all'))"
    p = s.probs(logits, 0.5)
    assert p.shape == (2, 4, 5)
    for i in range(4):
        np.testing.assert_array_equal(p[:, i], top_k_law(logits[:, i], 2, temperature=0.5))
    law = s.law(logits, 0.5)
    want = speculative_chain_law(p, q)
    np.testing.assert_array_equal(law.outcome, want.outcome)
    np.testing.assert_allclose(law.marginals, p, rtol=0, atol=1e-15)
    x = s.draw_draft_tokens(100, seed=3)
    assert x.shape == (100, 2, 3) and x.dtype == np.int64
    np.testing.assert_array_equal(x, s.draw_draft_tokens(100, seed=3))
    with pytest.raises(ValueError):
        s.draft_probs[0, 0, 0] = 1.0  # read-only
    with pytest.raises(ValueError, match=r"logits must have shape \(B, K \+ 1, V\)"):
        s.probs(logits[:, :3])


BAD = [
    ("top_k(0)", lambda: top_k(0), ValueError, "k must be >= 1"),
    ("top_k(2.5)", lambda: top_k(2.5), TypeError, "k must be an integer"),
    ("top_k([[1]])", lambda: top_k([[1]]), ValueError, "per-row"),
    ("top_k(3, ties='any')", lambda: top_k(3, ties="any"), ValueError, "ties"),
    ("top_p(0)", lambda: top_p(0.0), ValueError, r"p must be in \(0, 1\]"),
    ("top_p(1.01)", lambda: top_p(1.01), ValueError, "p must be"),
    ("top_p(nan)", lambda: top_p(float("nan")), ValueError, "p must be"),
    ("top_p(0.5, crossing='cross')", lambda: top_p(0.5, crossing="cross"), ValueError, "crossing"),
    ("top_p(0.5, strict=1)", lambda: top_p(0.5, strict=1), TypeError, "strict"),
    ("min_p(-0.5)", lambda: min_p(-0.5), ValueError, r"p must be in \[0, 1\]"),
    ("min_p('0.1')", lambda: min_p("0.1"), TypeError, "p must be"),
    ("chain(top_k(1), top_k(2))", lambda: chain(top_k(1), top_k(2)), ValueError, "once"),
    ("chain(softmax())", lambda: chain(softmax()), TypeError, "chain takes"),
    ("chain(0.9)", lambda: chain(0.9), TypeError, "chain takes"),
    ("chain(top_p(0.5), order='sglang')", lambda: chain(top_p(0.5), order="sglang"), ValueError, "order"),
    (
        "chain(top_p(0.5), order=('temperature',))",
        lambda: chain(top_p(0.5), order=("temperature",)),
        ValueError,
        "top_p",
    ),
    (
        "speculative(2-D draft)",
        lambda: speculative(np.full((2, 4), 0.25)),
        ValueError,
        r"draft_probs must have shape \(B, K, V\)",
    ),
    (
        "speculative(draft sums to 2)",
        lambda: speculative(np.full((1, 1, 2), 1.0)),
        ValueError,
        "draft_probs must sum to 1",
    ),
    ("speculative(int draft)", lambda: speculative(np.ones((1, 1, 1), dtype=int)), TypeError, "draft_probs"),
    (
        "speculative(target='softmax')",
        lambda: speculative(np.full((1, 1, 2), 0.5), target="softmax"),
        TypeError,
        "target",
    ),
]


@pytest.mark.parametrize(("call", "exc", "match"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_target_is_a_plain_value_object():
    assert Target("softmax") == softmax()
    assert top_k(4).steps == () and chain(top_k(4)).steps == (top_k(4),)


def test_docstring_examples():
    result = doctest.testmod(vt, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
