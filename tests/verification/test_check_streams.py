"""check_sampler's seed space and lags (issue 35 item 3): seeds in [0, 2**seed_bits), every one distinct; the
seed-bit scan catches a seed reduced mod 2**20 (and mod 2**32 under seed_bits=64); the lag scan at the powers of two
catches antithetic draws 64 apart; the halves scan a call that mirrors itself; exact samplers (NumPy, the fused
kernel's twin) pass with 64-bit seeds, torch's CPU generator with 32-bit ones (it keys on the low 32 bits).  Each
planted defect fails at the n its plan states for tv = 0.1.

Seeds: ``budget("verification.check_streams.exact")`` (null runs, family-wise alpha 1e-3 each) and
``budget("verification.check_streams.planted")``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from verification import check_sampler, lag_scan_test
from verification.battery import examples
from verification.planning.budget import budget
from verification.planning.streams import (
    CALLS_SEED_OFFSET,
    COST_SEED_OFFSET,
    PILOT_SEED_OFFSET,
    ROWS_SEED_OFFSET,
    flipped_bits,
    serial_lags,
)
from verification.stats.independence import min_detectable_streams_scan_tv

EXACT = budget("verification.check_streams.exact")
PLANTED = budget("verification.check_streams.planted")
TV = 0.1


def _logits(v: int = 64) -> np.ndarray:
    """One spread row N(0, 1) of V = 64: the stream row."""
    return np.random.default_rng(11).normal(0, 1, (1, v)).astype(np.float32)


def test_serial_lags_are_1_to_8_the_powers_of_two_and_half_the_stream():
    assert serial_lags(300).tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64, 128, 150]
    assert serial_lags(256).tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64, 128]
    assert serial_lags(10).tolist() == [1, 2, 3, 4, 5]
    assert flipped_bits(31) == tuple(range(16, 31)) and flipped_bits(64)[-1] == 63


@pytest.mark.parametrize("bits", [31, 32, 63, 64])
def test_every_seed_passed_lies_in_range_and_the_calls_seeds_are_distinct(bits):
    """The largest seed wraps: every call's seed is taken modulo 2**seed_bits, and none repeats."""
    seen: list[int] = []

    def recording(logits, num_samples, seed):
        seen.append(seed)
        return examples.inverse_cdf(logits, num_samples, seed % 2**32)

    top = 2**bits - 1
    r = check_sampler(recording, _logits(8), tv=0.5, seed=top, seed_bits=bits)
    assert r.seed_bits == bits and r.to_json().count('"seed_bits"') == 1
    assert all(0 <= s < 2**bits for s in seen)
    pilot = (top + PILOT_SEED_OFFSET) % 2**bits
    assert seen[:3] == [pilot] * 3 and seen[3:5] == [top, 0]  # draws 0 and 1: s and s + 1, wrapped
    assert seen[5:7] == [(top + CALLS_SEED_OFFSET) % 2**bits, (top + ROWS_SEED_OFFSET) % 2**bits]
    assert seen[7:] == [top ^ (1 << j) for j in range(16, bits)]
    assert len(set(seen[2:])) == len(seen) - 2  # the pilot is called three times (protocol, repeat, moved)
    assert (top + COST_SEED_OFFSET) % 2**bits not in seen  # the cost call is made with budget_s only


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        (dict(seed_bits=30), ValueError, "seed_bits must be one of 31, 32, 63, 64"),
        (dict(seed_bits=True), TypeError, "seed_bits"),
        (dict(seed_bits=64.0), TypeError, "seed_bits"),
        (dict(seed=2**31), ValueError, r"seed must be in \[0, 2\*\*31\)"),
        (dict(seed=2**64, seed_bits=64), ValueError, r"seed must be in \[0, 2\*\*64\)"),
        (dict(seed=2**32, seed_bits=32), ValueError, "seed_bits=32"),
    ],
    ids=["seed_bits=30", "seed_bits=True", "seed_bits=64.0", "seed=2**31", "seed=2**64 at 64 bits", "seed=2**32"],
)
def test_bad_seed_bits_and_seeds_raise_before_any_call(kwargs, error, words):
    def never(logits, num_samples, seed):
        raise AssertionError("called")

    with pytest.raises(error, match=words):
        check_sampler(never, _logits(), **kwargs)


def test_a_seed_reduced_mod_2_20_fails_the_seed_bit_scan():
    r = check_sampler(examples.seed_mod_2_20, _logits(), tv=TV, seed=PLANTED.seed)
    bits = r.test("seed bits")
    assert not r.passed and not bits.passed and bits.pvalue == 0.0
    assert bits.result.worst_stream == "bit 20" and bits.result.worst_lag == 0 and bits.result.num_streams == 15
    assert bits.min_detectable <= TV  # planned: the scan detects tv at the bit calls' length
    assert [t.name for t in r.failures()] == ["seed bits"]


def test_a_seed_truncated_to_32_bits_passes_at_31_bits_and_fails_at_64():
    """The defect that seed_bits=64 exists for: at 31 bits no seed reaches bit 32."""
    narrow = check_sampler(examples.seed_mod_2_32, _logits(), tv=TV, seed=PLANTED.seed + 1)
    assert narrow.passed, narrow
    wide = check_sampler(examples.seed_mod_2_32, _logits(), tv=TV, seed=PLANTED.seed + 1, seed_bits=64)
    bits = wide.test("seed bits")
    assert not wide.passed and bits.result.worst_stream == "bit 32" and bits.result.num_streams == 48
    assert [t.name for t in wide.failures()] == ["seed bits"]
    assert int(np.sum(bits.result.pvalues == 0.0)) == 32  # bits 32..63 all collide, bits 16..31 do not


def test_antithetic_draws_64_apart_fail_the_lag_scan_at_lag_64_and_only_there():
    r = check_sampler(examples.antithetic_lag_64, _logits(), tv=TV, seed=PLANTED.seed + 2)
    samples = r.test("samples")
    assert not r.passed and not samples.passed and samples.result.worst_lag == 64
    assert 64 in samples.result.lags and samples.min_detectable <= TV
    # the scan of lags 1..8 alone, on the same draws, sees nothing
    x = examples.antithetic_lag_64(torch.from_numpy(_logits()), 4096, PLANTED.seed)[0]
    assert lag_scan_test(x, num_categories=64, alpha=r.level).passed
    assert not lag_scan_test(x, lags=serial_lags(x.size), num_categories=64, alpha=r.level).passed


def test_a_call_whose_second_half_mirrors_the_first_fails_the_halves_scan():
    r = check_sampler(examples.mirrored_halves, _logits(), tv=TV, seed=PLANTED.seed + 3)
    halves = r.test("halves")
    assert not r.passed and not halves.passed and halves.result.worst_lag == 0 and halves.pvalue == 0.0
    assert halves.min_detectable <= TV


def test_torch_cpu_generator_keys_on_the_low_32_bits_of_its_seed():
    """A finding, not a planted defect: ``torch.manual_seed`` seeds the CPU generator's mt19937 with the low 32
    bits of the seed, so torch's CPU sampler is exact with seeds of 32 bits and collides with 64."""
    narrow = check_sampler(examples.torch_categorical, _logits(), tv=TV, seed=2**32 - 5 - EXACT.seed, seed_bits=32)
    assert narrow.passed, narrow
    wide = check_sampler(examples.torch_categorical, _logits(), tv=TV, seed=EXACT.seed, seed_bits=64)
    assert [t.name for t in wide.failures()] == ["seed bits"] and wide.test("seed bits").result.worst_stream == "bit 32"


@pytest.mark.parametrize(
    "sampler",
    [examples.inverse_cdf, examples.numpy_choice, examples.flashsampling_twin],
    ids=["numpy inverse cdf", "numpy choice", "flashsampling twin"],
)
def test_exact_samplers_pass_with_64_bit_seeds(sampler):
    r = check_sampler(sampler, _logits(), tv=TV, seed=2**64 - 5 - EXACT.seed, seed_bits=64)
    assert r.passed, r
    assert {"samples", "halves", "seeds", "seed bits", "calls"} <= {t.name for t in r.tests}
    bits = r.test("seed bits")
    assert bits.result.num_streams == 48 and bits.n >= 2
    p = np.exp(_logits()[0].astype(np.float64))
    p /= p.sum()
    assert min_detectable_streams_scan_tv(bits.result.n + 8, p, p, num_streams=48, alpha=r.level) <= TV * 1.05
