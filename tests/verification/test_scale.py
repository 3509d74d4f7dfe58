"""check_sampler at scale (issue 35 item 1): many calls of bounded width counted call by call, memory O(B V) at any
n; with ``budget_s`` the draws adapt to the time: doubling the budget roughly doubles n, n goes past two calls of
2**20, and a sampler slower than its pilot (a quadratic cost, a sleep, a sampler that slows down) stops within
10 % past the budget with a report of what it measured; a progress bar with an ETA; an interrupted run tests what
it drew.

Timing is simulated: a fake clock (``verification.runners.check._clock``) that only the samplers advance, by a
stated cost per call, so the sizes (and these tests) are deterministic; one run on the real clock states its bound
with a generous slack.  Seeds: ``budget("verification.scale.exact")`` for the runs on exact samplers (null,
family-wise alpha 1e-3 each) and ``budget("verification.scale.planted")`` for the planted defect.
"""

from __future__ import annotations

import io
import sys
import time

import numpy as np
import pytest
import torch

import verification.runners.check as check_module
from verification import check_sampler
from verification.battery import examples
from verification.planning import check as planning
from verification.planning.budget import budget
from verification.planning.request import check_request
from verification.planning.streams import (
    CALLS_SEED_OFFSET,
    COST_SEED_OFFSET,
    MAX_DRAW_CALLS,
    PILOT_SEED_OFFSET,
    ROWS_SEED_OFFSET,
    flipped_bits,
)
from verification.runners.draws import draw
from verification.runners.progress import SHOW_AFTER_S, DrawProgress, show_progress
from verification.runners.tally import ROW_BINCOUNT, Tally
from verification.stats.counts import count_samples

EXACT = budget("verification.scale.exact")
PLANTED = budget("verification.scale.planted")


class FakeClock:
    """Seconds that pass only when a sampler says so (its cost per call)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def costed(fn, clock: FakeClock, per_call: float, per_draw: float, power: float = 1.0, after: int = 0,
           slowdown: float = 1.0):  # fmt: skip
    """``fn`` that advances ``clock`` by ``per_call + per_draw * B * num_samples**power`` seconds a call, times
    ``slowdown`` from its call number ``after`` on (a sampler slower than its pilot)."""
    made = [0]

    def sampler(logits, num_samples, seed):
        made[0] += 1
        cost = per_call + per_draw * int(logits.shape[0]) * float(num_samples) ** power
        clock.t += cost * (slowdown if after and made[0] > after else 1.0)
        return fn(logits, num_samples, seed)

    return sampler


@pytest.fixture
def fake_clock(monkeypatch) -> FakeClock:
    clock = FakeClock()
    monkeypatch.setattr(check_module, "_clock", clock)
    return clock


def _logits(b: int = 2, v: int = 16, seed: int = 5) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 2, (b, v)).astype(np.float32)


def _softmax(z: np.ndarray) -> np.ndarray:
    p = np.exp(z.astype(np.float64) - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


# ----------------------------------------------------------------------------------------------------------------
# counting: call by call equals all at once; memory O(B V)
# ----------------------------------------------------------------------------------------------------------------


def test_counts_accumulated_over_many_calls_equal_one_bincount_of_all_draws():
    rng = np.random.default_rng(EXACT.seed)
    v, b = 37, 3
    calls = [rng.integers(-2, v + 2, (b, int(rng.integers(1, 500)))).astype(dt)
             for dt in (np.int64, np.int32, np.int16) * 4]  # fmt: skip
    calls += [rng.integers(-2, v + 2, (b, ROW_BINCOUNT + 3)), rng.integers(0, v, (b, ROW_BINCOUNT)).astype(np.uint16)]
    tally = Tally(b, v)
    for x in calls:
        tally.add(x if x.dtype != np.int16 else torch.from_numpy(x))  # CPU tensors are read without a copy
    every = np.concatenate(calls, axis=1)
    assert tally.n == every.shape[1] and tally.calls == len(calls)
    for row, counts in enumerate(tally.counts()):
        one = count_samples(every[row], v)
        assert np.array_equal(counts.histogram, one.histogram) and counts.out_of_range == one.out_of_range


def test_device_counts_equal_one_bincount_of_all_draws():
    """The torch path (``torch.bincount`` into an accumulator on the tokens' device): run on CUDA when there is
    one, else on CPU tensors through the same code."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rng = np.random.default_rng(EXACT.seed + 1)
    v, b = 29, 2
    tally = Tally(b, v)
    calls = [rng.integers(-1, v + 1, (b, n)) for n in (1, 7, 300, 4096)]
    for x in calls:
        t = torch.from_numpy(x).to(device)
        if device == "cuda":
            tally.add(t)
        else:
            tally._add_torch(t, 0)
            tally.n += x.shape[1]
    every = np.concatenate(calls, axis=1)
    for row, counts in enumerate(tally.counts()):
        one = count_samples(every[row], v)
        assert np.array_equal(counts.histogram, one.histogram) and counts.out_of_range == one.out_of_range


def test_draws_keep_counts_of_b_by_v_and_streams_of_one_call_whatever_n(monkeypatch):
    monkeypatch.setattr(planning, "MAX_CALL_DRAWS", 128)  # many calls at a small n
    request = check_request(examples.inverse_cdf, _logits(3, 16), tv=0.05, seed=EXACT.seed)
    rows = planning.row_plans(request)
    plan = planning.plan_check(request, rows, (0.0, 0.0), 0.0)
    assert plan.columns == 128 and plan.calls > 20
    d = draw(request, plan)
    assert d.n == plan.n == plan.calls * 128 and d.draw_calls == plan.calls and d.widths == [128] * plan.calls
    assert [c.n for c in d.counts] == [d.n] * 3 and all(c.histogram.shape == (16,) for c in d.counts)
    kept = [*d.first.values(), d.second, d.calls_stream, *(d.rows_pair or ()), *(d.bit_streams or [])]
    kept = [x for x in kept if x is not None]
    assert kept and max(x.size for x in kept) <= plan.columns < d.n
    assert set(d.first) == {plan.stream_row, *(r for pair in plan.row_pairs for r in pair)}


def test_exact_samplers_pass_and_a_planted_defect_fails_on_many_calls(monkeypatch):
    monkeypatch.setattr(planning, "MAX_CALL_DRAWS", 512)
    z = _logits(2, 30)
    for i, sampler in enumerate((examples.inverse_cdf, examples.torch_categorical)):
        r = check_sampler(sampler, z, tv=0.05, seed=EXACT.seed + 10 + i)
        assert r.passed, r
        assert r.n == r.planned_n >= 10 * 512 and r.calls > 10

    def hot(logits, num_samples, seed):  # a 25 % temperature error: total variation >= 0.05 in each row
        return examples.inverse_cdf(logits / 1.25, num_samples, seed)

    p, q = _softmax(z), _softmax(z / 1.25)
    assert (0.5 * np.abs(p - q).sum(1) >= 0.05).all()
    bad = check_sampler(hot, z, tv=0.05, seed=PLANTED.seed)
    assert not bad.passed and bad.failures()[0].name.startswith("row ") and bad.calls > 10


# ----------------------------------------------------------------------------------------------------------------
# budget_s: n in proportion, beyond 2 x 2**20, on time for slow samplers
# ----------------------------------------------------------------------------------------------------------------


def test_doubling_the_budget_roughly_doubles_n(fake_clock):
    sampler = costed(examples.inverse_cdf, fake_clock, per_call=1e-3, per_draw=2e-6)
    n = [check_sampler(sampler, _logits(1, 16), budget_s=s, seed=EXACT.seed + 20).n for s in (5.0, 10.0)]
    assert 1.4 <= n[1] / n[0] <= 3.0, n


def test_a_budget_buys_more_than_two_calls_of_2_20_draws(fake_clock):
    """B = 1, V = 16, a sampler of 1 ms a call and 1 us a draw (fake), 20 s: the draws run to the time."""
    sampler = costed(examples.inverse_cdf, fake_clock, per_call=1e-3, per_draw=1e-6)
    r = check_sampler(sampler, _logits(1, 16), budget_s=20.0, seed=EXACT.seed + 21)
    assert r.passed, r
    assert r.n > 2 * planning.MAX_CALL_DRAWS * 2 and r.calls > 4
    assert r.test("row 0: pearson").n == r.n  # each test reads the n drawn, and states its deviation there
    assert f"drawn: {r.n:,} draws a row (planned {r.planned_n:,})" in r.plan
    assert r.seconds <= 20.0 and 5e5 < r.draws_per_s < 2e6  # 1e6 draws/s (fake), the per-call cost included
    assert set(r.timing) == {"pilot", "planning", "drawing", "counting", "other calls", "testing", "reporting"}
    doc = r.as_dict()
    assert doc["timing"] == r.timing and doc["draws_per_s"] == r.draws_per_s and doc["planned_n"] == r.planned_n
    assert "draws/s" in r.to_markdown() and "draws/s" in repr(r)


@pytest.mark.parametrize(
    "per_call, per_draw, power, after, slowdown",
    [
        pytest.param(1e-3, 1e-10, 2.0, 0, 1.0, id="quadratic"),
        pytest.param(0.3, 1e-9, 1.0, 0, 1.0, id="sleep-0.3s-a-call"),
        pytest.param(1e-3, 1e-7, 1.0, 8, 30.0, id="30x-slower-after-the-pilot"),
    ],
)
def test_a_sampler_slower_than_its_pilot_stops_within_10_percent_of_the_budget(fake_clock, per_call, per_draw,
                                                                                power, after, slowdown):  # fmt: skip
    sampler = costed(examples.inverse_cdf, fake_clock, per_call, per_draw, power, after, slowdown)
    r = check_sampler(sampler, _logits(2, 16), budget_s=3.0, seed=EXACT.seed + 22)
    assert r.seconds <= 1.1 * 3.0, (r.seconds, r.timing)
    assert r.passed and r.n >= 2 * 18 and r.timing["drawing"] > 0 and r.draws_per_s > 0


def test_a_real_sleeping_sampler_stops_on_time():
    """On the real clock: a sampler that sleeps 50 ms a call, budget 3 s (bound with slack for a loaded host)."""

    def sleepy(logits, num_samples, seed):
        time.sleep(0.05)
        return examples.inverse_cdf(logits, num_samples, seed)

    t = time.perf_counter()
    r = check_sampler(sleepy, _logits(2, 16), budget_s=3.0, seed=EXACT.seed + 23)
    assert time.perf_counter() - t < 2 * 3.0 and r.passed and r.n > r.planned_n / 2


def test_budgeted_seeds_are_distinct_and_in_range(fake_clock):
    seen: list[int] = []
    inner = costed(examples.inverse_cdf, fake_clock, per_call=1e-3, per_draw=1e-5)

    def recording(logits, num_samples, seed):
        seen.append(seed)
        return inner(logits, num_samples, seed)

    s, bits = 2**31 - 7, 31
    r = check_sampler(recording, _logits(1, 16), budget_s=10.0, seed=s)
    assert r.calls == len(seen) and all(0 <= x < 2**bits for x in seen)
    fixed = {(s + o) % 2**bits for o in (PILOT_SEED_OFFSET, COST_SEED_OFFSET, CALLS_SEED_OFFSET, ROWS_SEED_OFFSET)}
    flips = {s ^ (1 << j) for j in flipped_bits(bits)}
    draws = [x for x in seen if x not in fixed | flips]
    k = len(draws)
    assert k > 4 and draws == [(s + i) % 2**bits for i in range(k)] and k < MAX_DRAW_CALLS
    assert {(s + COST_SEED_OFFSET) % 2**bits} < set(seen)  # the pilot's cost calls share one seed, not tested


# ----------------------------------------------------------------------------------------------------------------
# progress and interruption
# ----------------------------------------------------------------------------------------------------------------


def test_progress_bar_shows_an_eta_only_after_two_seconds(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # the text bar (tqdm is optional)
    clock, out = FakeClock(), io.StringIO()
    bar = DrawProgress(True, 1000, stream=out, clock=clock)
    clock.t += SHOW_AFTER_S / 2
    bar.update(100)
    assert out.getvalue() == ""
    clock.t += SHOW_AFTER_S
    bar.update(400)
    assert "400 of 1e+03" in out.getvalue() and "ETA" in out.getvalue()
    bar.close()
    assert not show_progress(None, io.StringIO()) and show_progress(True) and not show_progress(False)


def test_progress_must_be_a_bool_or_none():
    with pytest.raises(TypeError, match="progress"):
        check_sampler(examples.inverse_cdf, _logits(), progress="yes")


def test_an_interrupt_during_the_draws_tests_what_was_drawn(monkeypatch):
    monkeypatch.setattr(planning, "MAX_CALL_DRAWS", 1024)
    made = [0]

    def interrupted(logits, num_samples, seed):
        made[0] += 1
        if made[0] == 30:  # a draws call k >= 2 (after the pilot, draws 0 and 1, and the stream calls)
            raise KeyboardInterrupt
        return examples.inverse_cdf(logits, num_samples, seed)

    r = check_sampler(interrupted, _logits(2, 16), tv=0.02, seed=EXACT.seed + 24)
    assert r.interrupted and r.passed and r.n < r.planned_n and "interrupted" in r.plan
    assert "interrupted" in r.to_markdown()
