"""check_sampler: exact samplers pass with every test of the battery; each defect is caught by the test meant
for it at the planned n; the report's API; the protocol; bad arguments before any call.

Seeds: ``budget("verification.check.exact")`` for the runs on exact samplers (null, family-wise alpha 1e-3
each) and ``budget("verification.check.planted")`` for the planted defects.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from verification import check_sampler, independence_test
from verification.battery import examples
from verification.battery.aims import top_k
from verification.planning.budget import budget
from verification.planning.streams import CALLS_SEED_OFFSET, MAX_ROW_PAIRS, PILOT_SEED_OFFSET, ROWS_SEED_OFFSET
from verification.stats.gof import min_detectable_gof_tv
from verification.stats.independence import min_detectable_lag_scan_tv

EXACT = budget("verification.check.exact")
PLANTED = budget("verification.check.planted")


def _case() -> np.ndarray:
    """Two rows: a head of 8 and 248 tokens 9 nats below (a far tail); a spread row with 4 tied maxima."""
    z = np.zeros((2, 256), np.float32)
    z[0, :8] = np.random.default_rng(1).normal(0, 1, 8)
    z[0, 8:] = -9.0
    z[1] = np.random.default_rng(2).normal(0, 1, 256)
    z[1, [3, 9, 17, 30]] = 2.5
    return z


def _softmax(z: np.ndarray, t: float = 1.0) -> np.ndarray:
    s = z.astype(np.float64) / t
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return p / p.sum(axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def exact_report():
    return check_sampler(examples.inverse_cdf, _case(), tv=0.1, seed=EXACT.seed)


def test_exact_sampler_passes_every_test_of_the_battery(exact_report):
    r = exact_report
    assert r.passed, r
    names = [t.name for t in r.tests]
    for b in (0, 1):
        for test in ("pearson", "g-test", "cdf-index", "cdf-descending", "categories", "range"):
            assert f"row {b}: {test}" in names
    assert "row 0: tail" in names and "row 1: ties" in names
    assert names[-6:] == ["samples", "halves", "rows 0-1", "seeds", "seed bits", "calls"]
    assert "row 1: tail" in r.skipped and "no far tail" in r.skipped["row 1: tail"]
    assert "row 0: ties" in r.skipped and "too few" in r.skipped["row 0: ties"]
    for t in r.tests:
        statistic, pvalue = t  # SciPy-style unpacking
        assert (statistic, pvalue) == (t[0], t[1]) == (t.statistic, t.pvalue)
        assert t.adjusted_pvalue >= t.pvalue and t.level == pytest.approx(r.alpha / len(r.tests))
        assert t.passed and t.n >= 1
        assert t.result.alpha == t.level  # each test ran at alpha / m, where its deviation is stated


def test_sizes_detect_the_declared_tv_in_every_row_and_stream(exact_report):
    r = exact_report
    p = _softmax(_case())
    for b in (0, 1):
        pearson = r.test(f"row {b}: pearson")
        assert pearson.n == r.n
        assert pearson.result.min_detectable_tv_any <= r.tv
        assert min_detectable_gof_tv(r.n, p[b], alpha=pearson.level, power=r.power) <= r.tv
    for name in ("rows 0-1", "seeds", "calls"):
        assert r.test(name).min_detectable <= r.tv * 1.05  # the planner's bound uses the fewest pairs
    assert min_detectable_lag_scan_tv(r.stream, p[0], p[1], alpha=r.level, power=r.power) <= r.tv


def test_report_renders_as_markdown_json_and_repr(exact_report):
    r = exact_report
    doc = json.loads(r.to_json())
    assert doc["passed"] is True and doc["n"] == r.n and len(doc["tests"]) == len(r.tests)
    assert doc["tests"][0]["name"] == "row 0: pearson" and doc["tv"] == 0.1 and doc["budget_s"] is None
    md = r.to_markdown()
    assert md.startswith("# check_sampler: PASSED")
    assert "| `row 0: tail` tail mass (two-sided) |" in md and "## Not run" in md and "## Properties" in md
    assert "total variation >= " in md and "relative tail-mass shift >= " in md
    text = repr(r)
    assert text.startswith("SamplerReport(PASSED") and "seeds" in text and "not run" in text
    assert [p.name for p in r.properties] == ["same seed, same tokens", "tokens independent of batch position and size"]
    assert r.properties[0].holds is True


def test_properties_are_reported_not_tested():
    """A sampler whose tokens depend on the batch position is exact and passes; the property says no.  (A
    sampler keyed by the row's content is not exact: two equal rows of one call draw the same tokens.)"""

    def by_row_content(logits, num_samples, seed):
        out = []
        for row, p in zip(logits, _softmax(logits.numpy())):
            key = int.from_bytes(row.numpy().tobytes()[:8], "little")
            out.append(np.random.default_rng([seed, key]).choice(p.size, num_samples, p=p))
        return np.stack(out)

    keyed = check_sampler(by_row_content, _case(), tv=0.2, seed=EXACT.seed + 1)
    assert keyed.passed and keyed.properties[1].holds is True and keyed.properties[0].holds is True
    duplicated = check_sampler(by_row_content, _case()[1], tv=0.2, seed=PLANTED.seed)
    assert [t.name for t in duplicated.failures()] == ["rows 0-0'"]
    positional = check_sampler(examples.inverse_cdf, _case(), tv=0.2, seed=EXACT.seed + 2)
    assert positional.passed and positional.properties[1].holds is False


def test_temperature_error_of_the_declared_size_fails():
    """The 3 % temperature error, checked at tv = its own total variation, fails (power 0.99 by the plan)."""
    z = np.random.default_rng(3).normal(0, 2, (1, 256)).astype(np.float32)
    tv = float(0.5 * np.abs(_softmax(z) - _softmax(z, 1.03)).sum())
    assert 0.02 < tv < 0.03
    r = check_sampler(examples.temperature_error, z, tv=tv, seed=PLANTED.seed)
    assert not r.passed and not r.test("row 0: pearson").passed


def test_shifted_seed_stream_is_found_by_the_lag_scan_without_being_told_the_shift():
    z = _case()
    r = check_sampler(examples.shifted_seed_stream, z, tv=0.1, seed=PLANTED.seed)
    seeds = r.test("seeds")
    assert not seeds.passed and seeds.result.worst_lag == 1 and seeds.pvalue == 0.0
    # Draw j against draw j (no scan) sees nothing: the scan is what finds it.
    x = examples.shifted_seed_stream(torch.from_numpy(z), 4000, PLANTED.seed)[1]
    y = examples.shifted_seed_stream(torch.from_numpy(z), 4000, PLANTED.seed + 1)[1]
    assert independence_test(x, y, 256, alpha=r.level).passed
    assert not independence_test(x[1:], y[:-1], 256, alpha=r.level).passed


def test_rows_sharing_noise_fail_the_rows_test_with_one_row_or_several():
    r = check_sampler(examples.shared_row_noise, _case(), tv=0.1, seed=PLANTED.seed)
    assert not r.passed and not r.test("rows 0-1").passed and r.test("rows 0-1").result.worst_lag == 0
    one = check_sampler(examples.shared_row_noise, _case()[1], tv=0.1, seed=PLANTED.seed)
    assert not one.passed and [t.name for t in one.failures()] == ["rows 0-0'"]


def test_one_impossible_draw_fails_the_range_test():
    def off_by_one(logits, num_samples, seed):
        x = examples.inverse_cdf(logits, num_samples, seed)
        if num_samples > 100:
            x[0, 7] = logits.shape[1]  # index V: one draw out of range
        return x

    r = check_sampler(off_by_one, _case(), tv=0.2, seed=PLANTED.seed)
    rng = r.test("row 0: range")
    assert not r.passed and not rng.passed and rng.pvalue == 0.0 and rng.result.out_of_range == 2  # 2 draws calls
    assert r.test("row 1: range").passed


def test_a_truncated_target_makes_draws_outside_its_support_impossible():
    r = check_sampler(examples.inverse_cdf, _case()[1], target=top_k(20), tv=0.2, seed=PLANTED.seed)
    support = r.test("row 0: range")
    assert not support.passed and support.result.outside_support > 0 and support.result.out_of_range == 0


def test_sampler_without_a_seed_skips_the_seed_test_and_says_so():
    state = np.random.default_rng(EXACT.seed + 3)

    def seedless(logits, num_samples):
        return np.stack([state.choice(p.size, num_samples, p=p) for p in _softmax(logits.numpy())])

    r = check_sampler(seedless, _case(), tv=0.2)
    assert r.passed
    assert "seeds" not in [t.name for t in r.tests] and r.skipped["seeds"] == "the sampler takes no seed"
    assert "calls" in [t.name for t in r.tests]
    assert all(p.holds is None and "no seed" in p.detail for p in r.properties)

    def frozen(logits, num_samples):  # a seedless sampler that repeats itself across calls
        return examples.inverse_cdf(logits, num_samples, 0)

    bad = check_sampler(frozen, _case(), tv=0.2)
    assert not bad.test("calls").passed


def test_batch_of_rows_with_different_logits_shares_one_family():
    z = np.random.default_rng(4).normal(0, 2, (12, 40)).astype(np.float32)
    r = check_sampler(examples.inverse_cdf, z, tv=0.3, seed=EXACT.seed + 4)
    assert r.passed
    pairs = [t.name for t in r.tests if t.name.startswith("rows ")]
    assert len(pairs) == MAX_ROW_PAIRS and pairs[0] == "rows 0-1"
    assert len({t.level for t in r.tests}) == 1 and len(r.tests) == 12 * 6 + 2 + MAX_ROW_PAIRS + 1 + 3
    far = r.test("row distances").result
    assert far.passed and [s for s in far.labels] == [f"rows 0-{d}" for d in range(2, 12)]


def test_rows_that_share_noise_far_apart_are_caught():
    """Noise keyed by a batch slot modulo 9: rows 0 and 9 read the same uniforms, every adjacent pair is
    independent; the ``row distances`` scan (row 0 against rows 2..) finds it, the adjacent pairs do not."""
    z = np.random.default_rng(6).normal(0, 2, (12, 40)).astype(np.float32)
    r = check_sampler(examples.rows_9_apart_share_noise, z, tv=0.1, seed=EXACT.seed + 6)
    assert [t.name for t in r.failures()] == ["row distances"]


def test_per_row_temperatures_and_float64_logits():
    z = np.random.default_rng(5).normal(0, 2, (2, 30))  # float64: the sampler receives float32

    def seen(logits, num_samples, seed):
        assert logits.dtype == torch.float32 and logits.shape == (2, 30)
        t = torch.tensor([[0.5], [2.0]])
        return examples.inverse_cdf(logits / t, num_samples, seed)

    r = check_sampler(seen, z, temperature=[0.5, 2.0], tv=0.2, seed=EXACT.seed + 5)
    assert r.passed and r.temperature == [0.5, 2.0]
    moved = r.properties[1]
    assert moved.holds is None and "per-row" in moved.detail  # no call on a moved batch: T is bound by position


def test_budget_sizes_the_draws_to_the_time_given():
    r = check_sampler(examples.inverse_cdf, _case(), budget_s=2.0, seed=EXACT.seed + 6)
    assert r.passed and r.tv is None and r.budget_s == 2.0 and "budget_s = 2 s" in r.plan
    assert r.n >= 2 * 18 and r.seconds < 8.0


def test_pilot_seeds_and_calls_are_as_documented():
    seen: list[int] = []

    def recording(logits, num_samples, seed):
        seen.append(seed)
        return examples.inverse_cdf(logits, num_samples, seed)

    r = check_sampler(recording, _case()[:1], tv=0.3, seed=100)
    pilot = 100 + PILOT_SEED_OFFSET
    assert seen[:3] == [pilot] * 3 and seen[3:5] == [100, 101]
    assert seen[5:7] == [100 + CALLS_SEED_OFFSET, 100 + ROWS_SEED_OFFSET] == [100 + 2**15, 100 + 2**15 + 2]
    assert seen[7:] == [100 + 2**j for j in range(16, 31)]  # the seed-bit scan: bit 16 .. 30 flipped
    assert r.calls == len(seen)


@pytest.mark.parametrize(
    ("out", "error", "words"),
    [
        (lambda z, n: np.zeros((z.shape[0], n + 1), np.int64), ValueError, "shape"),
        (lambda z, n: np.zeros((z.shape[0], n), np.float32), TypeError, "integer tokens"),
        (lambda z, n: np.zeros(n, np.int64), ValueError, "the protocol asks for"),
        (lambda z, n: torch.zeros(z.shape[0], n, dtype=torch.int64, device="meta"), TypeError, "meta device"),
    ],
    ids=["one draw too many", "float tokens", "1-D tokens", "a meta tensor"],
)
def test_a_sampler_that_breaks_the_protocol_raises_naming_it(out, error, words):
    def broken(logits, num_samples, seed):
        return out(logits, num_samples)

    with pytest.raises(error, match=words) as info:
        check_sampler(broken, _case(), tv=0.3)
    assert "broken" in str(info.value)


def _never(logits, num_samples, seed):
    raise AssertionError("the sampler was called before the arguments were checked")


Z = _case()
BAD = [
    ("tv and budget_s", dict(tv=0.1, budget_s=1.0), ValueError, "not both"),
    ("alpha=0", dict(alpha=0.0), ValueError, "alpha"),
    ("power=alpha", dict(alpha=0.5, power=0.5), ValueError, "power"),
    ("tv=0", dict(tv=0.0), ValueError, "tv"),
    ("tv=1.5", dict(tv=1.5), ValueError, "tv"),
    ("tv=1e-300", dict(tv=1e-300), ValueError, "tv=1e-300 is too small"),
    ("budget_s=-1", dict(budget_s=-1.0), ValueError, "budget_s"),
    ("budget_s=nan", dict(budget_s=math.nan), ValueError, "budget_s"),
    ("seed=-1", dict(seed=-1), ValueError, "seed"),
    ("seed=2**31", dict(seed=2**31), ValueError, "seed"),
    ("seed=1.0", dict(seed=1.0), TypeError, "seed"),
    ("target='top_k'", dict(target="top_k"), TypeError, "target"),
    ("temperature=-1", dict(temperature=-1.0), ValueError, "temperature"),
    ("temperature per row of the wrong length", dict(temperature=[1.0, 1.0, 1.0]), ValueError, "temperature"),
    ("logits int", dict(logits=np.zeros((2, 3), np.int64)), TypeError, "logits"),
    ("logits 3-D", dict(logits=np.zeros((2, 3, 4), np.float32)), ValueError, "logits"),
    ("logits NaN", dict(logits=np.array([0.0, np.nan])), ValueError, "NaN"),
    ("logits of one category", dict(logits=np.array([0.5], np.float32)), ValueError, "V >= 2"),
    ("logits [B, 1]", dict(logits=np.zeros((3, 1), np.float32)), ValueError, "V >= 2"),
    ("logits all -inf row", dict(logits=np.array([[0.0, 1.0], [-np.inf, -np.inf]])), ValueError, "no finite"),
    ("sampler not callable", dict(sampler=3), TypeError, "callable"),
    ("sampler of one argument", dict(sampler=lambda z: z), TypeError, "logits, num_samples"),
]


@pytest.mark.parametrize(("kwargs", "error", "words"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_arguments_raise_before_the_sampler_is_called(kwargs, error, words):
    kwargs = dict(kwargs)
    sampler = kwargs.pop("sampler", _never)
    logits = kwargs.pop("logits", Z)
    with pytest.raises(error, match=words):
        check_sampler(sampler, logits, **kwargs)
