"""Bad arguments get a TypeError or ValueError naming the argument; broadcast draws are refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from verification import (
    Counts,
    assert_samples_match,
    category_test,
    count_samples,
    dkwm_cdf_test,
    goodness_of_fit,
    gumbel_max_test,
    homogeneity_test,
    min_detectable_gof_tv,
    min_detectable_tv,
    required_gof_samples,
    required_samples,
    tail_mass_test,
    tie_bias_test,
)
from verification.stats.categories import required_category_samples
from verification.stats.cdf import min_detectable_cdf_distance, required_cdf_samples
from verification.stats.exact import min_detectable_exact_tv, required_exact_samples
from verification.stats.gumbel import (
    min_detectable_gumbel_distance,
    min_detectable_gumbel_shift,
    required_gumbel_samples,
)
from verification.stats.homogeneity import min_detectable_homogeneity_tv, required_homogeneity_samples
from verification.stats.independence import min_detectable_independence_tv, required_independence_samples
from verification.stats.tails import min_detectable_tail_deficit, required_tail_samples
from verification.stats.ties import min_detectable_tie_shift, required_tie_samples

P = np.array([0.25, 0.25, 0.5])
X = np.array([0, 1, 2, 2])

CASES = [
    ("goodness_of_fit(samples=float)", lambda: goodness_of_fit(X.astype(float), P), TypeError, "integer"),
    ("goodness_of_fit(samples=bool)", lambda: goodness_of_fit(X > 0, P), TypeError, "integer"),
    ("goodness_of_fit(samples=2-D)", lambda: goodness_of_fit(X.reshape(2, 2), P), ValueError, "1-D"),
    ("goodness_of_fit(samples=[])", lambda: goodness_of_fit(np.array([], dtype=int), P), ValueError, "empty"),
    (
        "goodness_of_fit(samples=broadcast)",
        lambda: goodness_of_fit(np.broadcast_to(np.int64(1), (100,)), P),
        ValueError,
        "broadcast",
    ),
    (
        "goodness_of_fit(samples=expanded tensor)",
        lambda: goodness_of_fit(torch.tensor([1]).expand(100), P),
        ValueError,
        "broadcast",
    ),
    ("goodness_of_fit(probs sum 0.9)", lambda: goodness_of_fit(X, [0.3, 0.3, 0.3]), ValueError, "sum to 1"),
    ("goodness_of_fit(probs<0)", lambda: goodness_of_fit(X, [-0.5, 0.5, 1.0]), ValueError, ">= 0"),
    ("goodness_of_fit(probs=nan)", lambda: goodness_of_fit(X, [np.nan, 0.5, 0.5]), ValueError, "finite"),
    ("goodness_of_fit(probs=2-D)", lambda: goodness_of_fit(X, P[None]), ValueError, "1-D"),
    ("goodness_of_fit(probs=str)", lambda: goodness_of_fit(X, ["a", "b"]), TypeError, "real"),
    ("goodness_of_fit(alpha=0)", lambda: goodness_of_fit(X, P, alpha=0), ValueError, "alpha"),
    ("goodness_of_fit(alpha='x')", lambda: goodness_of_fit(X, P, alpha="x"), TypeError, "alpha"),
    ("goodness_of_fit(power=alpha)", lambda: goodness_of_fit(X, P, alpha=0.1, power=0.1), ValueError, "power"),
    ("goodness_of_fit(counts V mismatch)", lambda: goodness_of_fit(Counts(np.ones(4, int)), P), ValueError, "4"),
    ("assert_samples_match(alpha=1)", lambda: assert_samples_match(X, P, alpha=1.0), ValueError, "alpha"),
    ("required_samples(tv=0)", lambda: required_samples(0.0, 10), ValueError, "tv"),
    ("required_samples(tv=1.5)", lambda: required_samples(1.5, 10), ValueError, "tv"),
    ("required_samples(num_categories=1)", lambda: required_samples(0.1, 1), ValueError, "num_categories"),
    ("required_samples(num_categories=2.0)", lambda: required_samples(0.1, 2.0), TypeError, "num_categories"),
    ("min_detectable_tv(n=0)", lambda: min_detectable_tv(0, 10), ValueError, "n"),
    ("min_detectable_tv(n=True)", lambda: min_detectable_tv(True, 10), TypeError, "n"),
    ("count_samples(num_categories=0)", lambda: count_samples(X, 0), ValueError, "num_categories"),
    ("dkwm_cdf_test(order='up')", lambda: dkwm_cdf_test(X, P, order="up"), ValueError, "order"),
    ("tail_mass_test(tail=float)", lambda: tail_mass_test(X, P, np.array([0.5])), TypeError, "tail"),
    ("tail_mass_test(tail out of range)", lambda: tail_mass_test(X, P, [7]), ValueError, "tail"),
    (
        "tail_mass_test(alternative='up')",
        lambda: tail_mass_test(X, P, [2], alternative="up"),
        ValueError,
        "alternative",
    ),
    ("tie_bias_test(support=[1])", lambda: tie_bias_test(X, 3, support=[1]), ValueError, "support"),
    ("homogeneity_test(min_expected=0)", lambda: homogeneity_test(X, X, 3, min_expected=0), ValueError, "min_expected"),
    ("category_test(power=1)", lambda: category_test(X, P, power=1.0), ValueError, "power"),
    # Counts built by hand: whole, non-negative counts only
    ("Counts([-1, 1, 1])", lambda: Counts(np.array([-1, 1, 1])), ValueError, "histogram must hold counts >= 0"),
    ("Counts([1.5, 1, 1])", lambda: Counts(np.array([1.5, 1, 1])), ValueError, "histogram must hold whole"),
    ("Counts([nan, 1])", lambda: Counts(np.array([np.nan, 1.0])), ValueError, "histogram must hold whole"),
    ("Counts([True, False])", lambda: Counts(np.array([True, False])), TypeError, "histogram"),
    ("Counts([[1, 2]])", lambda: Counts(np.array([[1, 2]])), ValueError, "histogram must be 1-D"),
    ("Counts([1, 2], out_of_range=-1)", lambda: Counts(np.array([1, 2]), -1), ValueError, "out_of_range"),
    ("Counts([1, 2], out_of_range=0.5)", lambda: Counts(np.array([1, 2]), 0.5), TypeError, "out_of_range"),
    # more draws than int64 sums hold: refused, never a wrapped (negative) n and a p-value of 1 (issue 36)
    ("Counts([2**62] * 3)", lambda: Counts(np.full(3, 2**62, np.int64)), ValueError, "at most 2\\*\\*62 draws"),
    ("Counts(uint64 2**63)", lambda: Counts(np.array([2**63, 1], np.uint64)), ValueError, "at most 2\\*\\*62"),
    ("Counts([2**62], out_of_range=1)", lambda: Counts(np.array([2**62]), 1), ValueError, "2\\*\\*62 draws"),
    (
        "Counts + Counts past 2**62",
        lambda: Counts(np.array([2**61, 2**61])) + Counts(np.array([1, 1])),
        ValueError,
        "2\\*\\*62 draws",
    ),
    # gumbel_max_test: a location that is not finite is refused, never a NaN p-value (issue 36)
    ("gumbel_max_test(loc=nan)", lambda: gumbel_max_test([0.0, 1.0], loc=np.nan), ValueError, "loc must be finite"),
    ("gumbel_max_test(loc=inf)", lambda: gumbel_max_test([0.0, 1.0], loc=np.inf), ValueError, "loc must be finite"),
    ("gumbel_max_test(logits=[nan])", lambda: gumbel_max_test([0.0], [np.nan, 0.0]), ValueError, "logits"),
    ("gumbel_max_test(logits=[inf])", lambda: gumbel_max_test([0.0], [np.inf, 0.0]), ValueError, "logits"),
    ("gumbel_max_test(logits all -inf)", lambda: gumbel_max_test([0.0], [-np.inf, -np.inf]), ValueError, "logits"),
    # a law of one category: no chi-square at any n, said as such (issue 36)
    ("min_detectable_gof_tv(100, [1.0])", lambda: min_detectable_gof_tv(100, [1.0]), ValueError, "one category"),
    ("required_gof_samples(0.1, [0, 1])", lambda: required_gof_samples(0.1, [0.0, 1.0]), ValueError, "one category"),
    # planners asked for a deviation no sample size up to 2**62 detects
    ("required_samples(1e-300, 10)", lambda: required_samples(1e-300, 10), ValueError, "tv=1e-300"),
    ("required_samples(1e-12, 10)", lambda: required_samples(1e-12, 10), ValueError, "tv=1e-12"),
    ("required_cdf_samples(1e-300)", lambda: required_cdf_samples(1e-300), ValueError, "delta=1e-300"),
    ("required_gumbel_samples(1e-300)", lambda: required_gumbel_samples(1e-300), ValueError, "delta=1e-300"),
    ("required_tail_samples(1e-300, .01)", lambda: required_tail_samples(1e-300, 0.01), ValueError, "deficit=1e-300"),
    ("required_tail_samples(1e-15, .01)", lambda: required_tail_samples(1e-15, 0.01), ValueError, "deficit=1e-15"),
    ("required_tie_samples(1e-300, 100)", lambda: required_tie_samples(1e-300, 100), ValueError, "shift=1e-300"),
    ("required_tie_samples(1e-18, 100)", lambda: required_tie_samples(1e-18, 100), ValueError, "shift=1e-18"),
    (
        "required_category_samples(1e-300, 100)",
        lambda: required_category_samples(1e-300, 100),
        ValueError,
        "missing_probability=1e-300",
    ),
    ("required_homogeneity_samples(1e-300)", lambda: required_homogeneity_samples(1e-300, 10), ValueError, "tv="),
    ("required_independence_samples(1e-18)", lambda: required_independence_samples(1e-18, 3, 3), ValueError, "tv="),
    ("required_exact_samples(1e-300, P)", lambda: required_exact_samples(1e-300, P), ValueError, "tv=1e-300"),
    ("required_exact_samples(1e-9, P)", lambda: required_exact_samples(1e-9, P), ValueError, "tv=1e-09"),
    # planners asked what too few draws detect: they raise rather than state an impossible deviation
    ("min_detectable_tv(1, 2)", lambda: min_detectable_tv(1, 2), ValueError, "n=1 draws are too few"),
    ("min_detectable_cdf_distance(1)", lambda: min_detectable_cdf_distance(1), ValueError, "n=1 draws are too few"),
    ("min_detectable_gumbel_distance(1)", lambda: min_detectable_gumbel_distance(1), ValueError, "n=1 draws are"),
    ("min_detectable_gumbel_shift(1)", lambda: min_detectable_gumbel_shift(1), ValueError, "n=1 draws"),
    ("min_detectable_homogeneity_tv(1, 1, 2)", lambda: min_detectable_homogeneity_tv(1, 1, 2), ValueError, "n_a=1"),
    ("min_detectable_independence_tv(1, 2, 2)", lambda: min_detectable_independence_tv(1, 2, 2), ValueError, "n=1"),
    ("min_detectable_tail_deficit(1, .01)", lambda: min_detectable_tail_deficit(1, 0.01), ValueError, "n=1"),
    ("min_detectable_tie_shift(1, 100)", lambda: min_detectable_tie_shift(1, 100), ValueError, "n=1"),
    ("min_detectable_exact_tv(1, P)", lambda: min_detectable_exact_tv(1, P), ValueError, "n=1"),
]


@pytest.mark.parametrize(("call", "exc", "match"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_torch_and_narrow_integer_inputs_are_accepted():
    x = np.random.default_rng(0).choice(3, 3000, p=P)
    a = goodness_of_fit(x, P)
    assert goodness_of_fit(torch.from_numpy(x), torch.tensor(P)).statistic == a.statistic
    assert goodness_of_fit(x.astype(np.int16), P).statistic == a.statistic
    assert goodness_of_fit(x.astype(np.uint8), P.astype(np.float32)).pvalue == pytest.approx(a.pvalue, rel=1e-6)


def test_counts_add_and_out_of_range():
    a = count_samples(np.array([0, 1, 5, -1]), 3)
    assert a.n == 4 and a.out_of_range == 2 and a.histogram.tolist() == [1, 1, 0]
    b = a + count_samples(np.array([2]), 3)
    assert b.n == 5 and b.histogram.tolist() == [1, 1, 1]
    with pytest.raises(ValueError, match="cannot add"):
        a + count_samples(np.array([2]), 4)


def test_hand_built_counts_are_whole_and_typed():
    """Integer-valued float counts are accepted and stored as int64; the tests see what draws would give."""
    c = Counts(np.array([1.0, 2.0, 3.0]))
    assert c.histogram.dtype == np.int64 and c.n == 6
    assert (
        goodness_of_fit(c, np.full(3, 1 / 3)).statistic
        == goodness_of_fit(np.array([0, 1, 1, 2, 2, 2]), np.full(3, 1 / 3)).statistic
    )
