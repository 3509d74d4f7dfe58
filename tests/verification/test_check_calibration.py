"""The recorded calibration of check_sampler (docs/calibration.md, written by
``python -m verification.runners.calibration``): >= 500 independent null runs of the whole battery at family-wise
alpha 0.05, a false-alarm rate at most alpha within its binomial band (a check at level
``calibration.CHECK_LEVEL``, registered as ``budget("verification.check.calibration")``), the lag scan's rows
consistent with their claims; the first recorded runs reproduce when run again, so the record is of this code."""

from __future__ import annotations

import pathlib
import re

import pytest
from scipy import stats

from verification.planning.budget import budget
from verification.runners import calibration

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "calibration.md"
CAL = budget("verification.check.calibration")


def _section() -> str:
    text = PAGE.read_text()
    return text[text.index("## check_sampler: the whole battery on an exact sampler") :]


def _summary() -> list[str]:
    row = next(line for line in _section().splitlines() if re.match(r"\| \d+ \| \d+ \|", line))
    return [c.strip() for c in row.strip("|").split("|")]


def test_recorded_false_alarm_rate_is_at_most_alpha_within_its_band():
    runs, failures, rate, alpha, pvalue, band, ok = _summary()
    runs, failures = int(runs), int(failures)
    assert runs >= 500 and float(alpha) == calibration.CHECK_ALPHA == 0.05 and ok == "yes"
    assert float(rate) == pytest.approx(failures / runs, abs=5e-5)
    p = float(stats.binom.sf(failures - 1, runs, calibration.CHECK_ALPHA))
    assert p == pytest.approx(float(pvalue), rel=1e-2) and p > CAL.alpha
    assert failures / runs <= float(band)


def test_recorded_runs_reproduce():
    line = next(line for line in _section().splitlines() if line.startswith("- first runs"))
    recorded = re.findall(r"(\d+): (pass|FAIL), smallest Holm p ([0-9.e+-]+)", line)
    assert len(recorded) == calibration.CHECK_RECORDED
    for seed, verdict, p in recorded[:2]:
        report = calibration.check_sampler_run(int(seed))
        assert report.passed == (verdict == "pass")
        assert min(t.adjusted_pvalue for t in report.tests) == pytest.approx(float(p), rel=1e-5)


def test_lag_scan_rows_are_recorded_and_consistent_with_their_claims():
    text = PAGE.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| lag scan (17 shifts) |")]
    assert len(rows) == 1 + 3 * 2  # the null row; three overlaps at alpha 1e-3 and 1e-6
    assert all(line.rstrip().endswith("| yes |") for line in rows)


def test_recorded_runs_share_no_call():
    """The binomial band assumes independent runs: no seed of one run's calls is another run's (the draws calls
    ``s + k``, the calls and pilot calls, the bit calls ``s xor 2**j``: planning.streams)."""
    from verification.planning.streams import CALLS_SEED_OFFSET, PILOT_SEED_OFFSET, flipped_bits, flipped_seed

    runs = int(_summary()[0])
    owner: dict[int, int] = {}
    for r in range(runs):
        s = 20261202 + calibration.CHECK_SEED_STRIDE * r
        seeds = {s, s + 1, s + CALLS_SEED_OFFSET, s + PILOT_SEED_OFFSET}
        seeds |= {flipped_seed(s, j) for j in flipped_bits(31)}
        for x in seeds:
            assert owner.setdefault(x, r) == r, f"runs {owner[x]} and {r} share seed {x}"
