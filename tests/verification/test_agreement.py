"""Two samplers against each other (issue 35 item 4): check_samplers_agree passes two exact samplers and fails a
pair that differs by the total variation it states it detects; its certificate bounds the total variation between
the two laws (coverage measured on planted pairs of known distance); assert_same_law is the pytest one-liner.

Seeds: ``budget("verification.agreement.exact")`` (null) and ``budget("verification.agreement.planted")``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy import stats

from verification import (
    Counts,
    assert_same_law,
    category_homogeneity_test,
    check_samplers_agree,
    homogeneity_test,
    two_sample_tv_upper_bound,
)
from verification.battery import examples, planted
from verification.battery.aims import top_k
from verification.planning.agreement import B_SEED_OFFSET
from verification.planning.budget import budget
from verification.planning.streams import PILOT_SEED_OFFSET
from verification.stats.homogeneity import min_detectable_homogeneity_tv, required_homogeneity_samples
from verification.stats.two_sample_bound import singletons_for

EXACT = budget("verification.agreement.exact")
PLANTED = budget("verification.agreement.planted")
TV = 0.1


def _logits() -> np.ndarray:
    """Two rows of V = 128: N(0, 1.5**2), and a row with a far tail (16 tokens, the rest 9 nats down)."""
    z = np.random.default_rng(21).normal(0, 1.5, (2, 128)).astype(np.float32)
    z[1, 16:] = z[1, :16].min() - 9.0
    return z


def _softmax(z: np.ndarray) -> np.ndarray:
    s = z.astype(np.float64)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return p / p.sum(axis=-1, keepdims=True)


def _from_laws(laws: np.ndarray):
    """An inverse-CDF sampler of fixed per-row laws (a sampler whose law is known exactly)."""

    def sampler(logits, num_samples, seed):
        rng = np.random.default_rng(seed)
        out = []
        for q in laws:
            c = np.cumsum(q)
            out.append(np.minimum(np.searchsorted(c, rng.random(num_samples) * c[-1], side="right"), q.size - 1))
        return np.stack(out)

    return sampler


@pytest.fixture(scope="module")
def exact_pair():
    return check_samplers_agree(examples.inverse_cdf, examples.numpy_choice, _logits(), tv=TV, seed=EXACT.seed)


def test_two_exact_samplers_agree_and_the_report_says_what_it_rules_out(exact_pair):
    r = exact_pair
    assert r.passed, r
    assert [t.name for t in r.tests] == [f"row {b}: {t}" for b in (0, 1) for t in ("homogeneity", "categories",
                                                                                   "range")]  # fmt: skip
    assert r.sampler.endswith("inverse_cdf vs verification.battery.examples.numpy_choice")
    assert r.target.startswith("the law of verification.battery.examples.numpy_choice")
    for b in (0, 1):
        h = r.test(f"row {b}: homogeneity")
        assert h.min_detectable <= TV and "pooled mass" in h.deviation  # planned: tv over categories, pooled included
        assert h.n == 2 * r.n
    assert 0 < r.tv_upper_bound < 1 and r.tv_upper_bound == max(r.tv_upper_bounds) and len(r.tv_upper_bounds) == 2
    doc = json.loads(r.to_json())
    assert doc["tv_upper_bound"] == r.tv_upper_bound and "Weissman" in doc["certificate"]
    assert "**certified**: total variation <=" in r.to_markdown() and "certified" in repr(r)
    assert [p.holds for p in r.properties] == [True, True]


def test_a_pair_that_differs_by_the_stated_tv_fails():
    """Sampler B draws from laws at total variation tv from A's (a tilt, a transfer to one token): the
    homogeneity test, which states it detects tv, fails."""
    p = _softmax(_logits())
    for make in (lambda q: planted.tilt(q, TV), lambda q: planted.transfer(q, TV, to=int(np.argmin(q)))):
        q = np.stack([make(row) for row in p])
        assert np.allclose(0.5 * np.abs(p - q).sum(axis=1), TV)
        r = check_samplers_agree(_from_laws(p), _from_laws(q), _logits(), tv=TV, seed=PLANTED.seed)
        assert not r.passed and not r.test("row 0: homogeneity").passed, r
        assert r.tv_upper_bound >= TV  # the certificate covers the true distance


def test_a_token_only_one_sampler_draws_fails_the_per_token_test():
    p = _softmax(_logits())
    token = int(np.argmin(np.abs(p[0] - 0.01)))  # a token of probability about 1 %
    q = p.copy()
    q[:, token] = 0.0
    q /= q.sum(axis=1, keepdims=True)
    r = check_samplers_agree(_from_laws(p), _from_laws(q), _logits(), tv=TV, seed=PLANTED.seed + 1)
    cat = r.test("row 0: categories")
    assert not cat.passed and cat.result.worst == token and cat.result.observed_b == 0
    assert p[0, token] >= cat.min_detectable  # the per-token test states it detects this token's probability


def test_seeds_of_the_two_samplers_are_distinct_and_as_documented():
    seen = {"a": [], "b": []}

    def recording(key):
        def sampler(logits, num_samples, seed):
            seen[key].append(seed)
            return examples.inverse_cdf(logits, num_samples, seed)

        return sampler

    r = check_samplers_agree(recording("a"), recording("b"), _logits()[:1], tv=0.3, seed=7)
    pilot = 7 + PILOT_SEED_OFFSET
    assert seen["a"][:2] == seen["b"][:2] == [pilot, pilot]
    k = len(seen["a"]) - 2
    assert seen["a"][2:] == [7 + i for i in range(k)] and seen["b"][2:] == [7 + B_SEED_OFFSET + i for i in range(k)]
    assert r.calls == len(seen["a"]) + len(seen["b"]) + 2


def test_budget_sizes_both_samplers_draws():
    r = check_samplers_agree(examples.inverse_cdf, examples.numpy_choice, _logits(), budget_s=2.0,
                             seed=EXACT.seed + 1)  # fmt: skip
    assert r.passed and r.tv is None and "budget_s = 2 s" in r.plan and r.n >= 32


def test_planning_law_and_a_truncated_pipeline():
    """Two top-k pipelines agree; the planning law (the top-k) sizes the draws at its 5 tokens."""

    def topk(sampler):
        def run(logits, num_samples, seed):
            kth = logits.topk(5, dim=1).values[:, -1:]
            return sampler(logits.masked_fill(logits < kth, -float("inf")), num_samples, seed)

        return run

    r = check_samplers_agree(topk(examples.inverse_cdf), topk(examples.numpy_choice), _logits(), tv=TV,
                             planning_law=top_k(5), seed=EXACT.seed + 2)  # fmt: skip
    assert r.passed, r
    assert r.n == required_homogeneity_samples(TV, 128, probs=top_k(5).probs(_logits().astype(np.float64),
                                               np.ones(2))[0], alpha=r.level, power=r.power)  # fmt: skip


BAD = [
    ("sampler_b not callable", dict(sampler_b=3), TypeError, "callable"),
    ("tv and budget_s", dict(tv=0.1, budget_s=1.0), ValueError, "not both"),
    ("power=alpha", dict(alpha=0.1, power=0.1), ValueError, "power"),
    ("planning_law='top_k'", dict(planning_law="top_k"), TypeError, "planning_law"),
    ("logits NaN", dict(logits=np.array([0.0, np.nan])), ValueError, "NaN"),
    ("seed_bits=16", dict(seed_bits=16), ValueError, "seed_bits"),
]


@pytest.mark.parametrize(("kwargs", "error", "words"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_arguments_raise_before_any_call(kwargs, error, words):
    def never(logits, num_samples, seed):
        raise AssertionError("called")

    kwargs = dict(kwargs)
    sampler_b = kwargs.pop("sampler_b", never)
    logits = kwargs.pop("logits", _logits())
    with pytest.raises(error, match=words):
        check_samplers_agree(never, sampler_b, logits, **kwargs)


# ---------------------------------------------------------------------------------------------
# The statistics
# ---------------------------------------------------------------------------------------------


def test_certificate_covers_the_true_distance_on_planted_pairs():
    """Coverage measured: 300 pairs of known total variation (0, 0.02, 0.1, 0.3) at alpha = 0.1; the bound must
    hold in at least a 1 - alpha share, within the binomial band at level 1e-3 (it holds in all: Weissman's
    bound is conservative).  Tightness on equal laws: the bound is within 3x its deviation terms."""
    rng = np.random.default_rng(EXACT.seed + 3)
    p = _softmax(_logits())[0]
    alpha, reps, n = 0.1, 75, 20_000
    misses = 0
    for tv in (0.0, 0.02, 0.1, 0.3):
        q = p if tv == 0 else planted.tilt(p, tv)
        keep = singletons_for(p, n, n, alpha=alpha)
        for _ in range(reps):
            a, b = rng.multinomial(n, p), rng.multinomial(n, q)
            bound = two_sample_tv_upper_bound(Counts(a), Counts(b), p.size, alpha=alpha, singletons=keep)
            misses += bound.bound < tv
            if tv == 0:
                assert bound.bound <= 3 * (bound.eps_a + bound.eps_b) / 2
    assert stats.binom.sf(misses - 1, 4 * reps, alpha) > 1e-3 and misses == 0


def test_homogeneity_planner_counts_the_pooled_mass():
    p = _softmax(_logits())[1]
    n = required_homogeneity_samples(TV, p.size, probs=p, alpha=1e-3)
    assert min_detectable_homogeneity_tv(n, n, p.size, probs=p, alpha=1e-3) <= TV
    assert n < required_homogeneity_samples(TV, p.size, alpha=1e-3)  # fewer than at V - 1 degrees of freedom
    x = np.random.default_rng(EXACT.seed + 4).choice(p.size, n, p=p)
    y = np.random.default_rng(EXACT.seed + 5).choice(p.size, n, p=p)
    r = homogeneity_test(x, y, p.size, alpha=1e-3)
    assert r.pooled_mass == pytest.approx(1 - r.tested_mass) and r.min_detectable_tv_any >= r.min_detectable


def test_category_homogeneity_flags_one_token_and_nothing_on_equal_laws():
    rng = np.random.default_rng(PLANTED.seed + 2)
    p = np.full(50, 0.02)
    x, y = rng.choice(50, 20_000, p=p), rng.choice(50, 20_000, p=p)
    assert category_homogeneity_test(x, y, 50, alpha=1e-6).passed
    y[y == 7] = 8  # token 7 never drawn by B
    r = category_homogeneity_test(x, y, 50, alpha=1e-6)
    assert not r.passed and r.worst == 7 and r.observed_b == 0 and r.min_detectable < 0.02


# ---------------------------------------------------------------------------------------------
# assert_same_law
# ---------------------------------------------------------------------------------------------


def test_assert_same_law_passes_agreeing_samples_and_explains_a_difference():
    z = torch.from_numpy(_logits())
    a = examples.inverse_cdf(z, 20_000, EXACT.seed + 6)
    b = examples.numpy_choice(z, 20_000, EXACT.seed + 7)
    assert assert_same_law(a, b).passed  # 2-D: one law per row, V read from the draws
    assert assert_same_law(a[0], b[0], num_categories=128).n == 40_000
    c = _from_laws(np.stack([planted.tilt(q, TV) for q in _softmax(_logits())]))(z, 20_000, PLANTED.seed + 3)
    with pytest.raises(AssertionError, match="do not share one law") as info:
        assert_same_law(a, c)
    assert "most different tokens" in str(info.value) and "observed total variation" in str(info.value)


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: assert_same_law(np.zeros((2, 5), int), np.zeros((3, 5), int)), ValueError, "rows"),
        (lambda: assert_same_law([0, 1], [0, 1], alpha=2.0), ValueError, "alpha"),
        (lambda: assert_same_law([0.5, 1.0], [0, 1]), TypeError, "integer"),
        (lambda: assert_same_law([0, 1], [0, 1], num_categories=0), ValueError, "num_categories"),
    ],
    ids=["rows differ", "alpha=2", "float draws", "num_categories=0"],
)
def test_assert_same_law_bad_arguments(call, error, words):
    with pytest.raises(error, match=words):
        call()
