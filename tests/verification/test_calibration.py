"""The meta-test: every test's false-alarm rate and power are what it claims (see docs/calibration.md).

For each test: >= 500 null replicates (p-values uniform by KS, or no smaller than uniform for tests that
are conservative by construction; false-alarm rates at 0.05 and 0.01 within binomial noise), and >= 3
planted biases at exactly the claimed ``min_detectable`` with power consistent with >= 0.99.
"""

from __future__ import annotations

import pytest

from verification.outputs.markdown import calibration_page
from verification.planning.budget import budget
from verification.runners import calibration

SPECS = calibration.specs()
NULL = budget("verification.calibration.null")
POWER = budget("verification.calibration.power")


@pytest.mark.parametrize("k", range(len(SPECS)), ids=[s.name for s in SPECS])
def test_null_calibration(k):
    row = calibration.check_null(SPECS[k], NULL.n, NULL.seed + 101 * k)
    assert row.replicates >= 500
    assert row.ok, row


@pytest.mark.parametrize("k", range(len(SPECS)), ids=[s.name for s in SPECS])
def test_power_at_the_claim(k):
    rows = calibration.check_power(SPECS[k], POWER.n, POWER.seed + 101 * k + 13, 1e-3)
    assert len(rows) >= 3
    bad = [r for r in rows if not r.ok]
    assert not bad, bad


def test_budget_counts_every_check():
    """The budget's alpha for the meta-test is CHECK_LEVEL times the number of checks it runs."""
    checks = sum(len(s.biases(1e-3)) for s in SPECS)
    assert POWER.alpha == pytest.approx(calibration.CHECK_LEVEL * checks)
    assert NULL.alpha == pytest.approx(calibration.CHECK_LEVEL * 3 * len(SPECS))


def test_report_renders():
    report = calibration.Report(
        null=[calibration.NullRow("t", "s", False, 500, 0.5, 0.05, 0.01, 0.9, 0.9)],
        power=[calibration.PowerRow("t", "b", 1e-3, 0.1, 0.1, 500, 0.996, 0.8)],
        seconds=1.0,
    )
    text = calibration_page(report, "cmd", check_level=calibration.CHECK_LEVEL, target_power=calibration.TARGET_POWER)
    assert "| t | s | exact-size | 500 |" in text and "| t | b | 0.001 |" in text and report.ok
