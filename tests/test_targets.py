"""The target laws of flashsampling.targets against brute-force enumeration, their edge cases and bad input.

The oracle here is written independently of the implementation: it takes the float64 weights of the
definition (``numpy.exp((z - max z) / t)``, the one primitive both share), turns them into exact
``Fraction``s, and finds every kept set by *enumerating subsets* (the valid top-k sets, the closed heads
of the ranking) instead of the implementation's sorting and cumulative comparisons.  Laws are then
exact Fractions; the implementation must have the same support and agree within ``8 V 2**-53``
relatively.  Hypothesis runs derandomized (fixed examples, never flaky).
"""

from __future__ import annotations

import doctest
import importlib
import itertools
from collections import defaultdict
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flashsampling import reference
from flashsampling.targets import (
    DEFAULT_ORDER,
    ORDERS,
    TIES,
    draw_draft_tokens,
    min_p_law,
    residual_law,
    sampling_law,
    speculative_chain_law,
    speculative_step_law,
    top_k_law,
    top_p_law,
    truncation,
)
from verification import strategies as vs

SETTINGS = settings(
    max_examples=150, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
SMALL_V = st.integers(1, 7)
LOGITS = vs.logits(vocab_size=SMALL_V)


def batched_logits(vocab_size, batch_size):
    """(B, V) adversarial logits with one V for the whole batch (V is drawn once, then passed as a number)."""
    return vocab_size.flatmap(lambda v: vs.logits(vocab_size=v, batch_size=batch_size))


# ----------------------------------------------------------------------------------------------------
# The oracle: exact Fractions, kept sets by enumeration of subsets.
# ----------------------------------------------------------------------------------------------------


def exact_weights(z: np.ndarray, scale: float) -> list[Fraction]:
    """The definition's float64 weights as exact Fractions (0 for masked tokens; greedy scale: 1)."""
    finite = np.isfinite(z)
    m = z[finite].max()
    t = 1.0 if scale == 0 else scale
    return [Fraction(float(np.exp((zi - m) / t))) if f else Fraction(0) for zi, f in zip(z, finite)]


def ranked_before(z: np.ndarray, ties: str):
    """``before(j, i)``: token j is ranked ahead of token i (strictly larger logit, or tied and ahead by index)."""

    def before(j: int, i: int) -> bool:
        if z[j] != z[i]:
            return z[j] > z[i]
        if ties == "low_index":
            return j < i
        if ties == "high_index":
            return j > i
        return False

    return before


def subsets(kept: frozenset):
    items = sorted(kept)
    for r in range(1, len(items) + 1):
        yield from (frozenset(c) for c in itertools.combinations(items, r))


def oracle_top_k(z, w, kept: frozenset, k: int, ties: str) -> frozenset:
    """Union (ties='all') or the lowest / highest-index member of the valid top-k sets: size min(k, |K|), no
    token outside with a larger logit than a token inside."""
    size = min(k, len(kept))
    valid = [
        a
        for a in (frozenset(c) for c in itertools.combinations(sorted(kept), size))
        if min(z[i] for i in a) >= max((z[j] for j in kept - a), default=-np.inf)
    ]
    if ties == "all":
        return frozenset().union(*valid)
    pick = min if ties == "low_index" else max
    return pick(valid, key=lambda a: tuple(sorted(a)))


def oracle_top_p(z, w, kept: frozenset, p: float, ties: str, crossing: str, strict: bool) -> frozenset:
    """Holtzman's nucleus as a set definition over the heads of the ranking (subsets closed under 'ranked
    ahead'; with ties='all' closed under >= within tie groups): crossing='keep' gives the smallest head
    whose mass is >= p S (> p S if not strict, else everything); 'drop' the largest head whose mass is
    < p S (<= p S if not strict), at least the first head."""
    before = ranked_before(z, ties)
    tied_closed = ties == "all"

    def is_head(a):
        return all(j in a for i in a for j in kept if before(j, i) or (tied_closed and z[j] == z[i]))

    heads = sorted((a for a in subsets(kept) if is_head(a)), key=len)
    total = sum(w[i] for i in kept)
    threshold = Fraction(p) * total

    def mass(a):
        return sum(w[i] for i in a)

    if crossing == "keep":
        ok = [a for a in heads if (mass(a) >= threshold if strict else mass(a) > threshold)]
        return ok[0] if ok else kept
    ok = [a for a in heads if (mass(a) < threshold if strict else mass(a) <= threshold)]
    return ok[-1] if ok else heads[0]


def oracle_min_p(z, w, kept: frozenset, p: float, strict: bool) -> frozenset:
    """Tokens with P(i) >= p max P (or >) in exact arithmetic, and the maxima."""
    total = sum(w[i] for i in kept)
    probs = {i: w[i] / total for i in kept}
    top = max(probs.values())
    m = max(z[i] for i in kept)
    return frozenset(
        i for i in kept if (probs[i] > Fraction(p) * top if strict else probs[i] >= Fraction(p) * top) or z[i] == m
    )


ORACLES = {"top_k": oracle_top_k, "top_p": oracle_top_p, "min_p": oracle_min_p}


def oracle_law(z, t: float, filters: dict, order) -> list[Fraction]:
    """The composed law, exactly: steps applied in order on the kept set, weights at the current scale."""
    z = np.asarray(z, dtype=np.float64)
    order = ORDERS[order] if isinstance(order, str) else order
    kept = frozenset(int(i) for i in np.flatnonzero(np.isfinite(z)))
    scale = 1.0
    for step in order:
        if step == "temperature":
            scale = t
            if t == 0:
                m = max(z[i] for i in kept)
                kept = frozenset(i for i in kept if z[i] == m)
            continue
        group = step if isinstance(step, tuple) else (step,)
        w = exact_weights(z, scale)
        new = kept
        for name in group:
            if name in filters:
                new = new & ORACLES[name](z, w, kept, *filters[name])
        kept = new
    w = exact_weights(z, t)
    total = sum(w[i] for i in kept)
    return [w[i] / total if i in kept else Fraction(0) for i in range(len(z))]


def assert_matches(law: np.ndarray, exact: list[Fraction]) -> None:
    """Same support; every probability within 8 V 2**-53 of the exact one, relatively."""
    law = np.asarray(law, dtype=np.float64)
    exact_f = np.array([float(x) for x in exact])
    support = np.array([x > 0 for x in exact])
    np.testing.assert_array_equal(law > 0, support, err_msg=f"support differs: {law} vs {exact}")
    tol = 8 * len(exact) * 2.0**-53
    np.testing.assert_allclose(law, exact_f, rtol=tol, atol=0)


def as_kwargs(filters: dict) -> dict:
    kw = {}
    if "top_k" in filters:
        kw.update(top_k=filters["top_k"][0], top_k_ties=filters["top_k"][1])
    if "top_p" in filters:
        p, ties, crossing, strict = filters["top_p"]
        kw.update(top_p=p, top_p_ties=ties, top_p_crossing=crossing, top_p_strict=strict)
    if "min_p" in filters:
        kw.update(min_p=filters["min_p"][0], min_p_strict=filters["min_p"][1])
    return kw


# ----------------------------------------------------------------------------------------------------
# Strategies for parameters that land on the boundaries.
# ----------------------------------------------------------------------------------------------------


@st.composite
def boundary_p(draw, z: np.ndarray, *, low_open: bool = True):
    """A p in (0, 1] (or [0, 1]): round values, tiny ones, and the exact cumulative masses / weight ratios
    of this row rounded to float64 (the cut then falls on a token's mass, in either rounding direction)."""
    w = exact_weights(z, 1.0)
    total = sum(w)
    ordered = sorted(w, reverse=True)
    cums = [sum(ordered[: j + 1]) / total for j in range(len(ordered))]
    ratios = [x for x in w if x > 0]
    options = [float(c) for c in cums] + [float(r) for r in ratios] + [1.0, 0.5, 0.25, 1 / 3, 2 / 3, 1e-300]
    p = draw(st.one_of(st.sampled_from(options), st.floats(1e-9, 1.0)))
    if not low_open:
        p = draw(st.sampled_from([p, 0.0]))
    return p if p > 0 or not low_open else 1e-300


# ----------------------------------------------------------------------------------------------------
# Property tests: each law against the enumeration.
# ----------------------------------------------------------------------------------------------------


@SETTINGS
@given(z=LOGITS, k=st.integers(1, 8), ties=st.sampled_from(TIES), t=vs.temperatures())
def test_top_k_matches_enumeration(z, k, ties, t):
    filters = {"top_k": (k, ties)}
    assert_matches(top_k_law(z, k, temperature=t, ties=ties), oracle_law(z, t, filters, DEFAULT_ORDER))


@SETTINGS
@given(
    data=st.data(),
    z=LOGITS,
    ties=st.sampled_from(TIES),
    crossing=st.sampled_from(("keep", "drop")),
    strict=st.booleans(),
)
def test_top_p_matches_enumeration(data, z, ties, crossing, strict):
    p = data.draw(boundary_p(z))
    filters = {"top_p": (p, ties, crossing, strict)}
    law = top_p_law(z, p, ties=ties, crossing=crossing, strict=strict)
    assert_matches(law, oracle_law(z, 1.0, filters, DEFAULT_ORDER))


@SETTINGS
@given(data=st.data(), z=LOGITS, strict=st.booleans(), t=vs.temperatures())
def test_min_p_matches_enumeration(data, z, strict, t):
    p = data.draw(boundary_p(z, low_open=False))
    assert_matches(
        min_p_law(z, p, temperature=t, strict=strict), oracle_law(z, t, {"min_p": (p, strict)}, DEFAULT_ORDER)
    )


ORDER_CHOICES = [
    *ORDERS.values(),
    ("temperature", "top_p", "top_k", "min_p"),  # top-p before top-k
    ("top_p", "temperature", "top_k", "min_p"),  # top-p before temperature
    ("temperature", ("top_k", "top_p"), "min_p"),  # FlashInfer's joint top-k/top-p, then min-p
]


@SETTINGS
@given(
    data=st.data(),
    z=LOGITS,
    t=vs.temperatures(),
    order=st.sampled_from(ORDER_CHOICES),
    use=st.sets(st.sampled_from(("top_k", "top_p", "min_p")), min_size=1),
)
def test_compositions_match_enumeration(data, z, t, order, use):
    filters = {}
    if "top_k" in use:
        filters["top_k"] = (data.draw(st.integers(1, 8)), data.draw(st.sampled_from(TIES)))
    if "top_p" in use:
        filters["top_p"] = (
            data.draw(boundary_p(z)),
            data.draw(st.sampled_from(TIES)),
            data.draw(st.sampled_from(("keep", "drop"))),
            data.draw(st.booleans()),
        )
    if "min_p" in use:
        filters["min_p"] = (data.draw(boundary_p(z, low_open=False)), data.draw(st.booleans()))
    law = sampling_law(z, t, order=order, **as_kwargs(filters))
    assert_matches(law, oracle_law(z, t, filters, order))


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(
    z=batched_logits(st.integers(1, 40), st.integers(1, 4)),
    data=st.data(),
    order=st.sampled_from(list(ORDERS)),
)
def test_per_row_parameters_equal_row_by_row(z, data, order):
    b = z.shape[0]
    k = np.array(data.draw(st.lists(st.integers(1, 45), min_size=b, max_size=b)))
    p = np.array(data.draw(st.lists(st.floats(1e-6, 1.0), min_size=b, max_size=b)))
    mp = np.array(data.draw(st.lists(st.floats(0.0, 1.0), min_size=b, max_size=b)))
    t = np.array(data.draw(st.lists(vs.temperatures(), min_size=b, max_size=b)))
    batched = sampling_law(z, t, top_k=k, top_p=p, min_p=mp, order=order)
    rows = [sampling_law(z[i], t[i], top_k=k[i], top_p=p[i], min_p=mp[i], order=order) for i in range(b)]
    np.testing.assert_array_equal(batched, np.stack(rows))


@settings(max_examples=80, derandomize=True, database=None, deadline=None)
@given(z=batched_logits(vs.vocab_sizes(max_size=300), st.just(2)), t=vs.temperatures())
def test_without_filters_the_law_is_reference_softmax(z, t):
    np.testing.assert_array_equal(sampling_law(z, t), reference.softmax(z, t))
    np.testing.assert_array_equal(top_p_law(z, 1.0, temperature=t), reference.softmax(z, t))
    np.testing.assert_array_equal(top_k_law(z, z.shape[1], temperature=t), reference.softmax(z, t))
    np.testing.assert_array_equal(min_p_law(z, 0.0, temperature=t), reference.softmax(z, t))


def test_torch_and_numpy_inputs_agree():
    rng = np.random.default_rng(3)
    z = rng.normal(size=(3, 20)).astype(np.float32)
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        zt = torch.from_numpy(z).to(dtype)
        znp = zt.float().numpy()  # bf16/fp16 values are exact in float32
        kw = {"top_k": torch.tensor([2, 5, 9]), "top_p": torch.tensor([0.5, 0.8, 1.0]), "min_p": 0.05}
        np.testing.assert_array_equal(
            sampling_law(zt, torch.tensor([0.7, 1.0, 0.0]), **kw),
            sampling_law(znp, np.array([0.7, 1.0, 0.0]), top_k=[2, 5, 9], top_p=[0.5, 0.8, 1.0], min_p=0.05),
        )


# ----------------------------------------------------------------------------------------------------
# The comparison can fail: planted defects (a wrong convention, a float-only top-p) are caught.
# ----------------------------------------------------------------------------------------------------

FLAT = np.zeros(4, dtype=np.float32)
STEPS = np.array([2.0, 1.0, 0.0, -1.0], dtype=np.float32)
TIED_CUT = np.array([3.0, 1.0, 1.0, 0.0], dtype=np.float32)
HALVES = np.log(np.array([4.0, 2.0, 1.0], dtype=np.float32))
W1 = float(np.exp(np.float64(HALVES[1]) - np.float64(HALVES[0])))  # token 1's weight: min-p's cut lands on it

PLANTED = [
    # (name, row, filters of the law promised, the law a defective implementation computes)
    (
        "top-k keeps k by index, ties all promised",
        TIED_CUT,
        {"top_k": (2, "all")},
        {"top_k": 2, "top_k_ties": "low_index"},
    ),
    ("top-k keeps all ties, k by index promised", TIED_CUT, {"top_k": (2, "low_index")}, {"top_k": 2}),
    (
        "top-k ranks ties by the wrong index",
        FLAT,
        {"top_k": (1, "low_index")},
        {"top_k": 1, "top_k_ties": "high_index"},
    ),
    (
        "top-p drops the crossing token",
        STEPS,
        {"top_p": (0.7, "all", "keep", True)},
        {"top_p": 0.7, "top_p_crossing": "drop"},
    ),
    ("top-p keeps the crossing token", STEPS, {"top_p": (0.7, "all", "drop", True)}, {"top_p": 0.7}),
    (
        "top-p non-strict at an exact cut",
        FLAT,
        {"top_p": (0.5, "low_index", "keep", True)},
        {"top_p": 0.5, "top_p_ties": "low_index", "top_p_strict": False},
    ),
    ("top-p keeps all ties, by index promised", FLAT, {"top_p": (0.5, "low_index", "keep", True)}, {"top_p": 0.5}),
    ("min-p strict, >= promised", HALVES, {"min_p": (W1, False)}, {"min_p": W1, "min_p_strict": True}),
    ("min-p >=, strict promised", HALVES, {"min_p": (W1, True)}, {"min_p": W1}),
    ("top-p before temperature", STEPS, {"top_p": (0.7, "all", "keep", True)}, {"top_p": 0.7, "order": "llama.cpp"}),
]


@pytest.mark.parametrize(("row", "filters", "defective"), [c[1:] for c in PLANTED], ids=[c[0] for c in PLANTED])
def test_comparison_catches_a_planted_convention_defect(row, filters, defective):
    t = 0.5 if defective.get("order") == "llama.cpp" else 1.0
    promised = oracle_law(row, t, filters, DEFAULT_ORDER)
    assert_matches(sampling_law(row, t, **as_kwargs(filters)), promised)  # the right convention passes
    with pytest.raises(AssertionError):
        assert_matches(sampling_law(row, t, **defective), promised)


def test_composition_order_matters_and_the_oracle_sees_it():
    # top-k then top-p renormalizes before the nucleus; the joint order does not: different laws.
    z = np.array([2.0, 1.5, 1.0, 0.0], dtype=np.float32)
    filters = {"top_k": (2, "all"), "top_p": (0.6, "all", "keep", True)}
    sequential = sampling_law(z, top_k=2, top_p=0.6)
    joint = sampling_law(z, top_k=2, top_p=0.6, order="joint")
    assert (sequential > 0).sum() != (joint > 0).sum()
    assert_matches(sequential, oracle_law(z, 1.0, filters, DEFAULT_ORDER))
    with pytest.raises(AssertionError):
        assert_matches(joint, oracle_law(z, 1.0, filters, DEFAULT_ORDER))
    # temperature after the filters (llama.cpp) changes what top-p keeps.
    late = sampling_law(z, 0.25, top_p=0.6, order="llama.cpp")
    early = sampling_law(z, 0.25, top_p=0.6)
    assert (late > 0).sum() > (early > 0).sum()


def test_exact_fallback_decides_what_float64_cumulative_sums_cannot(monkeypatch):
    # Weights 1 and three of ~1e-16: in float64, 1 + 1e-16 == 1, so the running mass before the last
    # token looks like S and p = 1 would drop it; in exact arithmetic it is below S and stays.
    z = np.array([0.0, -36.9, -36.9, -36.9])
    law = top_p_law(z, 1.0, ties="low_index")
    assert (law > 0).all()
    assert_matches(law, oracle_law(z, 1.0, {"top_p": (1.0, "low_index", "keep", True)}, DEFAULT_ORDER))
    # Planted defect: no exact fallback (the float64 decision stands): the last token is lost.
    monkeypatch.setattr(truncation, "_exact_top_p_row", lambda ws, start, end, p, crossing, strict: _float_only(ws, p))
    assert not (top_p_law(z, 1.0, ties="low_index") > 0).all()


def _float_only(ws, p):
    before = np.concatenate([[0.0], np.cumsum(ws)[:-1]])
    return before < p * ws.sum()


# ----------------------------------------------------------------------------------------------------
# Edge cases.
# ----------------------------------------------------------------------------------------------------

TIED_MAX = np.array([1.0, 3.0, 0.0, 3.0, 3.0, -np.inf], dtype=np.float32)  # maxima at 1, 3, 4


def one_hot(i, v=6):
    e = np.zeros(v)
    e[i] = 1.0
    return e


@pytest.mark.parametrize("ties", TIES)
def test_p_equal_one_keeps_every_token(ties):
    z = np.array([0.0, -1.0, -1.0, -5.0, -np.inf])
    np.testing.assert_array_equal(top_p_law(z, 1.0, ties=ties), reference.softmax(z))
    np.testing.assert_array_equal(top_p_law(z, 1.0, ties=ties, strict=False), reference.softmax(z))
    np.testing.assert_array_equal(top_p_law(z, 1.0, ties=ties, crossing="drop", strict=False), reference.softmax(z))


def test_p_equal_one_with_a_strict_dropped_crossing_loses_the_last_token():
    # Documented: crossing="drop" keeps i iff M_i + w_i < p S; at p = 1 the last token has M + w = S.
    law = top_p_law(np.array([0.0, -1.0, -2.0]), 1.0, ties="low_index", crossing="drop")
    assert law[2] == 0 and law[:2].min() > 0


@pytest.mark.parametrize("k", [6, 7, 100])
def test_k_at_least_v_keeps_every_finite_token(k):
    np.testing.assert_array_equal(top_k_law(TIED_MAX, k), reference.softmax(TIED_MAX))


def test_k_larger_than_the_finite_tokens_never_keeps_a_masked_one():
    z = np.array([0.0, -np.inf, 1.0, -np.inf])
    law = top_k_law(z, 3, ties="low_index")
    assert law[1] == 0 and law[3] == 0
    np.testing.assert_array_equal(law, reference.softmax(z))


@pytest.mark.parametrize(("ties", "expected"), [("all", None), ("low_index", 1), ("high_index", 4)])
def test_k_one_is_greedy_with_tied_maxima(ties, expected):
    law = top_k_law(TIED_MAX, 1, ties=ties)
    if expected is None:
        np.testing.assert_array_equal(law, reference.softmax(TIED_MAX, 0.0))  # uniform over the maxima
    else:
        np.testing.assert_array_equal(law, one_hot(expected))


@pytest.mark.parametrize(("ties", "expected"), [("all", None), ("low_index", 1), ("high_index", 4)])
def test_tiny_p_keeps_only_the_top_token(ties, expected):
    for p in (1e-300, 1e-9):
        law = top_p_law(TIED_MAX, p, ties=ties)
        want = reference.softmax(TIED_MAX, 0.0) if expected is None else one_hot(expected)
        np.testing.assert_array_equal(law, want)
    np.testing.assert_array_equal(top_p_law(STEPS, 1e-9), np.array([1.0, 0, 0, 0]))


def test_min_p_zero_keeps_all_and_one_keeps_the_maxima():
    np.testing.assert_array_equal(min_p_law(TIED_MAX, 0.0), reference.softmax(TIED_MAX))
    np.testing.assert_array_equal(min_p_law(TIED_MAX, 1.0), reference.softmax(TIED_MAX, 0.0))
    np.testing.assert_array_equal(min_p_law(TIED_MAX, 1.0, strict=True), reference.softmax(TIED_MAX, 0.0))


@pytest.mark.parametrize("order", list(ORDERS))
def test_greedy_temperature_with_filters_is_uniform_over_kept_maxima(order):
    kw = {"top_k": 3, "top_p": 0.5, "min_p": 0.2}
    np.testing.assert_array_equal(sampling_law(TIED_MAX, 0.0, order=order, **kw), reference.softmax(TIED_MAX, 0.0))
    law = sampling_law(TIED_MAX, 0.0, order=order, top_k=1, top_k_ties="high_index")
    np.testing.assert_array_equal(law, one_hot(4))


def test_all_masked_row_has_no_law():
    z = np.array([[0.0, 1.0], [-np.inf, -np.inf]])
    for call in (
        lambda: top_k_law(z, 1),
        lambda: top_p_law(z, 0.9),
        lambda: min_p_law(z, 0.1),
        lambda: sampling_law(z),
    ):
        with pytest.raises(ValueError, match=r"row\(s\) 1 have no finite logit"):
            call()


def test_underflow_of_float32_softmax_is_not_underflow_of_the_target():
    import mpmath

    z = np.array([0.0, -150.0, -200.0, -1e4], dtype=np.float32)
    f32 = torch.softmax(torch.from_numpy(z), dim=-1).numpy()
    assert f32[1] == 0 and f32[2] == 0  # e^-150 and e^-200 are below float32's smallest subnormal
    for law in (top_k_law(z, 3), top_p_law(z, 1.0), min_p_law(z, 0.0), sampling_law(z, top_k=4, top_p=1.0)):
        mpmath.mp.dps = 40
        weights = [mpmath.e ** mpmath.mpf(float(x)) for x in z[:3]]
        total = sum(weights)
        for i in range(3):
            assert abs(law[i] - float(weights[i] / total)) <= 4 * 2.0**-53 * law[i]
        assert law[3] == 0.0  # e^-10000 underflows float64 too
    assert top_k_law(z, 2)[2] == 0 and top_k_law(z, 2)[1] > 0


def test_huge_temperature_and_huge_logits_stay_finite():
    z = np.array([-(2.0**24), 0.0, 2.0**24], dtype=np.float32)
    for t in (1e-30, 1.0, 1e30):
        law = sampling_law(z, t, top_k=2, top_p=0.99, min_p=0.01)
        assert np.isfinite(law).all() and abs(law.sum() - 1) < 1e-15


# ----------------------------------------------------------------------------------------------------
# Speculative decoding: exact laws with Fractions, the chain by enumeration, planted defects.
# ----------------------------------------------------------------------------------------------------


@st.composite
def rational_table(draw, shape, *, allow_zeros=True):
    """Fraction probability rows of the given shape (small integer weights, some zero)."""
    low = 0 if allow_zeros else 1
    rows = []
    for _ in range(int(np.prod(shape[:-1]))):
        weights = draw(
            st.lists(st.integers(low, 6), min_size=shape[-1], max_size=shape[-1]).filter(lambda x: sum(x) > 0)
        )
        total = sum(weights)
        rows.append([Fraction(x, total) for x in weights])
    return np.array(rows, dtype=object).reshape(shape)


def enumerate_step(p, q) -> list[Fraction]:
    """Sum over draft tokens x ~ q: accept with min(1, p/q), else draw the normalized residual."""
    v = len(p)
    excess = [max(p[i] - q[i], Fraction(0)) for i in range(v)]
    mass = sum(excess)
    out = [Fraction(0)] * v
    for x in range(v):
        if q[x] == 0:
            continue
        accept = min(Fraction(1), p[x] / q[x])
        out[x] += q[x] * accept
        if accept < 1:
            for y in range(v):
                out[y] += q[x] * (1 - accept) * excess[y] / mass
    return out


def enumerate_chain(p, q) -> dict[tuple[int, ...], Fraction]:
    """The joint law of the emitted tokens, by walking every draft sequence and accept/reject outcome."""
    k, v = len(q), len(p[0])
    out: dict[tuple[int, ...], Fraction] = defaultdict(Fraction)

    def walk(i, prefix, prob):
        if i == k:
            for y in range(v):
                out[prefix + (y,)] += prob * p[k][y]
            return
        excess = [max(p[i][y] - q[i][y], Fraction(0)) for y in range(v)]
        mass = sum(excess)
        for x in range(v):
            if q[i][x] == 0:
                continue
            accept = min(Fraction(1), p[i][x] / q[i][x])
            walk(i + 1, prefix + (x,), prob * q[i][x] * accept)
            if accept < 1:
                for y in range(v):
                    out[prefix + (y,)] += prob * q[i][x] * (1 - accept) * excess[y] / mass

    walk(0, (), Fraction(1))
    return out


@settings(max_examples=150, derandomize=True, database=None, deadline=None)
@given(data=st.data(), v=st.integers(1, 6), batch=st.integers(1, 3))
def test_speculative_step_law_is_exactly_p(data, v, batch):
    p = data.draw(rational_table((batch, v)))
    q = data.draw(rational_table((batch, v)))
    law = speculative_step_law(p, q)
    assert law.tolist() == p.tolist()  # exact Fractions
    for b in range(batch):
        assert enumerate_step(list(p[b]), list(q[b])) == list(p[b])
    np.testing.assert_allclose(
        speculative_step_law(p.astype(float), q.astype(float)), p.astype(float), rtol=0, atol=4 * v * 2.0**-53
    )


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(data=st.data(), v=st.integers(1, 3), k=st.integers(1, 3))
def test_speculative_chain_law_equals_the_enumeration(data, v, k):
    p = data.draw(rational_table((k + 1, v)))
    q = data.draw(rational_table((k, v)))
    law = speculative_chain_law(p, q)
    joint = enumerate_chain(p.tolist(), q.tolist())
    sequences = [s for n in range(1, k + 2) for s in itertools.product(range(v), repeat=n)]
    for s in sequences:
        assert law.sequence_probability(s) == joint.get(s, Fraction(0)), s
    assert sum(law.sequence_probability(s) for s in sequences) == 1
    assert law.marginals.tolist() == p.tolist()  # every emitted position follows its target
    assert sum(law.num_emitted) == 1
    assert all(sum(law.outcome[i].reshape(-1)) == 1 for i in range(k))
    for n in range(1, k + 2):  # the law of the number of emitted tokens, by enumeration
        assert law.num_emitted[n - 1] == sum(pr for s, pr in joint.items() if len(s) == n)
    positions = law.position_probs()
    for i in range(k + 1):
        for y in range(v):
            assert positions[i, y] == sum(pr for s, pr in joint.items() if len(s) > i and s[i] == y)
    flt = speculative_chain_law(p.astype(float), q.astype(float))
    np.testing.assert_allclose(flt.marginals, p.astype(float), rtol=0, atol=1e-15)
    np.testing.assert_allclose(flt.num_emitted, law.num_emitted.astype(float), rtol=0, atol=1e-15)


def test_speculative_chain_law_in_batches_equals_row_by_row():
    rng = np.random.default_rng(5)
    p = rng.dirichlet(np.ones(7), size=(3, 4))
    q = rng.dirichlet(np.ones(7), size=(3, 3))
    law = speculative_chain_law(p, q)
    for b in range(3):
        one = speculative_chain_law(p[b], q[b])
        np.testing.assert_array_equal(law.outcome[b], one.outcome)
        np.testing.assert_array_equal(law.num_emitted[b], one.num_emitted)
        assert law.sequence_probability([1, 2])[b] == one.sequence_probability([1, 2])
    np.testing.assert_allclose(law.marginals, p, rtol=0, atol=1e-15)


P3 = np.array([Fraction(1, 2), Fraction(1, 3), Fraction(1, 6)], dtype=object)
Q3 = np.array([Fraction(1, 6), Fraction(1, 6), Fraction(2, 3)], dtype=object)


def test_planted_speculative_defects_do_not_give_p():
    excess = np.maximum(P3 - Q3, 0)
    # The residual not renormalized: the law loses the rejected mass.
    unnormalized = speculative_step_law(P3, Q3, residual=excess)
    assert unnormalized.tolist() != P3.tolist() and sum(unnormalized) != 1
    # The residual computed in float16 (exact law of the rounded table): off by the rounding.
    r16 = (P3.astype(np.float16) - Q3.astype(np.float16)).clip(0)
    r16 = r16 / r16.sum(dtype=np.float16)
    assert speculative_step_law(P3, Q3, residual=r16).tolist() != P3.tolist()
    # Accepting with min(1, q/p) instead of min(1, p/q).
    swapped = np.minimum(1, Q3 / P3)
    assert speculative_step_law(P3, Q3, acceptance=swapped).tolist() != P3.tolist()
    # A float16 residual at a realistic size is off by far more than float64 rounding.
    rng = np.random.default_rng(11)
    p = rng.dirichlet(np.full(1000, 0.3))
    q = rng.dirichlet(np.full(1000, 0.3))
    r = np.maximum(p.astype(np.float16) - q.astype(np.float16), 0).astype(np.float32)
    law = speculative_step_law(p, q, residual=r / r.sum())
    assert np.abs(law - p).sum() > 1e-4 > 1e3 * np.abs(speculative_step_law(p, q) - p).sum()


def test_residual_law_and_zero_rejection():
    r = residual_law(P3, Q3)
    assert r.tolist() == [Fraction(2, 3), Fraction(1, 3), Fraction(0)]  # max(p - q, 0) = (1/3, 1/6, 0)
    same = np.array([[0.25, 0.75]])
    np.testing.assert_array_equal(residual_law(same, same), same)  # no residual mass: the placeholder p
    np.testing.assert_array_equal(speculative_step_law(same, same), same)
    # p puts mass where q has none: only the residual can emit it, and does.
    p = np.array([Fraction(1, 2), Fraction(1, 2)], dtype=object)
    q = np.array([Fraction(1), Fraction(0)], dtype=object)
    assert speculative_step_law(p, q).tolist() == p.tolist()
    assert residual_law(p, q).tolist() == [0, 1]


def test_draw_draft_tokens_is_seeded_and_follows_q():
    from verification import goodness_of_fit

    q = np.array([[[0.5, 0.3, 0.2, 0.0], [0.1, 0.1, 0.1, 0.7]]])  # (B=1, K=2, V=4)
    a = draw_draft_tokens(q, 20000, seed=7)
    assert a.shape == (20000, 1, 2) and a.dtype == np.int64
    np.testing.assert_array_equal(a, draw_draft_tokens(torch.from_numpy(q), 20000, seed=7))
    assert not np.array_equal(a, draw_draft_tokens(q, 20000, seed=8))
    assert (a[:, 0, 0] != 3).all()  # probability 0 never drawn
    # alpha = 1e-6 per position (fixed seed: deterministic); power 0.99 against the detectable TV it reports.
    for i in range(2):
        result = goodness_of_fit(a[:, 0, i], q[0, i], alpha=1e-6)
        assert result.pvalue > 1e-6, result
    # Planted defect: the draws of position 1 tested against position 0's q fail.
    assert goodness_of_fit(a[:, 0, 1], q[0, 0], alpha=1e-6).pvalue <= 1e-6


# ----------------------------------------------------------------------------------------------------
# Bad input: one table, ids read like the calls.
# ----------------------------------------------------------------------------------------------------

Z = np.array([[0.0, 1.0, 2.0]], dtype=np.float32)
PQ = np.array([0.5, 0.5])

BAD = [
    ("top_k_law(k=0)", lambda: top_k_law(Z, 0), ValueError, "top_k must be >= 1"),
    ("top_k_law(k=-3)", lambda: top_k_law(Z, -3), ValueError, "top_k"),
    ("top_k_law(k=2.0)", lambda: top_k_law(Z, 2.0), TypeError, "top_k must be an integer"),
    ("top_k_law(k=True)", lambda: top_k_law(Z, True), TypeError, "top_k"),
    ("top_k_law(k='2')", lambda: top_k_law(Z, "2"), TypeError, "top_k"),
    (
        "top_k_law(k=[1, 2] for 1 row)",
        lambda: top_k_law(Z, [1, 2]),
        ValueError,
        "top_k must be a number or have the batch shape",
    ),
    (
        "top_k_law(k=[0] per row)",
        lambda: top_k_law(Z, [0]),
        ValueError,
        r"top_k must be >= 1, got top_k=0 \(at index 0\)",
    ),
    ("top_k_law(ties='first')", lambda: top_k_law(Z, 1, ties="first"), ValueError, "top_k_ties"),
    ("top_p_law(p=0)", lambda: top_p_law(Z, 0.0), ValueError, r"top_p must be in \(0, 1\]"),
    ("top_p_law(p=1.5)", lambda: top_p_law(Z, 1.5), ValueError, "top_p"),
    ("top_p_law(p=-0.1)", lambda: top_p_law(Z, -0.1), ValueError, "top_p"),
    ("top_p_law(p=nan)", lambda: top_p_law(Z, float("nan")), ValueError, "top_p"),
    ("top_p_law(p='0.5')", lambda: top_p_law(Z, "0.5"), TypeError, "top_p"),
    ("top_p_law(p=None)", lambda: top_p_law(Z, None), TypeError, "top_p"),
    ("top_p_law(crossing='maybe')", lambda: top_p_law(Z, 0.5, crossing="maybe"), ValueError, "top_p_crossing"),
    ("top_p_law(strict='yes')", lambda: top_p_law(Z, 0.5, strict="yes"), TypeError, "top_p_strict"),
    ("min_p_law(p=-0.1)", lambda: min_p_law(Z, -0.1), ValueError, r"min_p must be in \[0, 1\]"),
    ("min_p_law(p=1.1)", lambda: min_p_law(Z, 1.1), ValueError, "min_p"),
    ("min_p_law(p=nan)", lambda: min_p_law(Z, float("nan")), ValueError, "min_p"),
    ("sampling_law(temperature=-1)", lambda: sampling_law(Z, -1.0), ValueError, "temperature"),
    ("sampling_law(temperature=inf)", lambda: sampling_law(Z, float("inf")), ValueError, "temperature"),
    ("sampling_law(temperature=[1, 2] for 1 row)", lambda: sampling_law(Z, [1.0, 2.0]), ValueError, "temperature"),
    ("sampling_law(logits=int)", lambda: sampling_law(np.array([1, 2])), TypeError, "logits must hold floating-point"),
    ("sampling_law(logits=bool tensor)", lambda: sampling_law(torch.tensor([True])), TypeError, "logits"),
    ("sampling_law(logits=nan)", lambda: sampling_law(np.array([0.0, np.nan])), ValueError, "NaN or \\+inf"),
    ("sampling_law(logits=+inf)", lambda: sampling_law(np.array([0.0, np.inf])), ValueError, "NaN or \\+inf"),
    (
        "sampling_law(logits=all -inf)",
        lambda: sampling_law(np.array([-np.inf, -np.inf])),
        ValueError,
        "no finite logit",
    ),
    ("sampling_law(logits=scalar)", lambda: sampling_law(np.float64(1.0)), ValueError, "logits must have shape"),
    ("sampling_law(logits V=0)", lambda: sampling_law(np.zeros((2, 0))), ValueError, "V=0"),
    ("sampling_law(logits empty batch)", lambda: sampling_law(np.zeros((0, 3))), ValueError, "empty batch"),
    ("sampling_law(logits ragged)", lambda: sampling_law([[0.0], [0.0, 1.0]]), TypeError, "logits"),
    ("sampling_law(order='hf')", lambda: sampling_law(Z, order="hf"), ValueError, "order must be one of"),
    ("sampling_law(order without temperature)", lambda: sampling_law(Z, order=("top_k",)), ValueError, "temperature"),
    (
        "sampling_law(order repeats top_k)",
        lambda: sampling_law(Z, order=("temperature", "top_k", "top_k")),
        ValueError,
        "twice",
    ),
    (
        "sampling_law(order groups temperature)",
        lambda: sampling_law(Z, order=(("temperature", "top_k"),)),
        ValueError,
        "joint",
    ),
    (
        "sampling_law(order misses min_p)",
        lambda: sampling_law(Z, min_p=0.1, order=("temperature", "top_k")),
        ValueError,
        "min_p",
    ),
    ("sampling_law(order unknown step)", lambda: sampling_law(Z, order=("temperature", "top_a")), ValueError, "top_a"),
    ("speculative_step_law(q negative)", lambda: speculative_step_law(PQ, [1.5, -0.5]), ValueError, "q must be >= 0"),
    (
        "speculative_step_law(q sums to 0.9)",
        lambda: speculative_step_law(PQ, [0.45, 0.45]),
        ValueError,
        r"q must sum to 1 per row \(within",
    ),
    ("speculative_step_law(q nan)", lambda: speculative_step_law(PQ, [np.nan, 1.0]), ValueError, "q must be finite"),
    (
        "speculative_step_law(q int)",
        lambda: speculative_step_law(PQ, np.array([0, 1])),
        TypeError,
        "q must hold floating-point",
    ),
    (
        "speculative_step_law(q Fraction sums to 2/3)",
        lambda: speculative_step_law(PQ, np.array([Fraction(1, 3)] * 2, dtype=object)),
        ValueError,
        "exactly 1",
    ),
    (
        "speculative_step_law(q object float)",
        lambda: speculative_step_law(PQ, np.array([0.5, 0.5], dtype=object)),
        TypeError,
        "q: an object array",
    ),
    ("speculative_step_law(p negative)", lambda: speculative_step_law([1.5, -0.5], PQ), ValueError, "p must be >= 0"),
    (
        "speculative_step_law(shapes differ)",
        lambda: speculative_step_law(PQ, [0.2, 0.3, 0.5]),
        ValueError,
        "q has shape",
    ),
    (
        "speculative_step_law(acceptance>1)",
        lambda: speculative_step_law(PQ, PQ, acceptance=[1.5, 0.5]),
        ValueError,
        "acceptance",
    ),
    (
        "speculative_step_law(residual shape)",
        lambda: speculative_step_law(PQ, PQ, residual=[1.0]),
        ValueError,
        "residual has shape",
    ),
    (
        "speculative_chain_law(p not K+1)",
        lambda: speculative_chain_law(np.full((2, 2), 0.5), np.full((2, 2), 0.5)),
        ValueError,
        "one more position",
    ),
    (
        "speculative_chain_law(V differs)",
        lambda: speculative_chain_law(np.full((2, 2), 0.5), np.full((1, 4), 0.25)),
        ValueError,
        "shape",
    ),
    ("speculative_chain_law(q 1-D)", lambda: speculative_chain_law(np.full((2, 2), 0.5), PQ), ValueError, "shape"),
    ("draw_draft_tokens(num_samples=0)", lambda: draw_draft_tokens(PQ, 0, seed=1), ValueError, "num_samples"),
    ("draw_draft_tokens(num_samples=1.5)", lambda: draw_draft_tokens(PQ, 1.5, seed=1), TypeError, "num_samples"),
    ("draw_draft_tokens(seed=-1)", lambda: draw_draft_tokens(PQ, 1, seed=-1), ValueError, "seed"),
    ("draw_draft_tokens(seed='x')", lambda: draw_draft_tokens(PQ, 1, seed="x"), TypeError, "seed"),
    ("draw_draft_tokens(q sums to 2)", lambda: draw_draft_tokens([1.0, 1.0], 1, seed=1), ValueError, "q must sum to 1"),
]


@pytest.mark.parametrize(("call", "exc", "match"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_input_raises_naming_the_argument(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_float32_probabilities_at_llm_vocabulary_sizes_are_accepted():
    rng = np.random.default_rng(2)
    p = torch.softmax(torch.from_numpy(rng.normal(size=262144).astype(np.float32)) * 3, dim=-1)
    assert abs(float(p.double().sum()) - 1) > 1e-7  # float32 rounding of the sum at this V
    law = speculative_step_law(p, p)
    np.testing.assert_allclose(law.sum(), 1.0, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "name", ["flashsampling.targets.truncation", "flashsampling.targets.speculative", "flashsampling.targets"]
)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
