"""The report folder: report.md first, report.json with timestamps/arguments/versions, plots of this run only,
swapped in whole; a run in progress or interrupted leaves no earlier verdict behind.

Seed: ``budget("verification.report.exact")``, the exact toy variant of ``test_engine`` (null checks at
family-wise alpha 1e-3).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from verification.outputs import report
from verification.outputs.markdown import report_page
from verification.planning.budget import budget
from verification.runners.battery_report import write_report
from verification.runners.engine import run_battery

from .test_engine import EXACT, FLAT, NORMAL

SEED = budget("verification.report.exact").seed
HEAD = {"started": "2026-01-01T00:00:00+00:00", "command": "python -m verification", "args": {"budget": None},
        "versions": report.versions(), "mode": "interpreter (CPU)", "variants": ["toy-exact"], "seed": SEED,
        "seconds": 1.0}  # fmt: skip


def _write(out: Path, cases, plots: bool = False) -> dict:
    result = run_battery([EXACT], cases, seed=SEED)
    return write_report(out, result, HEAD, cases, plots=plots)


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def test_report_md_json_and_plots(tmp_path):
    out = tmp_path / "report"
    doc = _write(out, [NORMAL], plots=True)
    assert _files(out) == {"report.md", "report.json", "plots/case-toy-normal-V50.png", "plots/pvalue-qq.png"}
    md = (out / "report.md").read_text()
    assert md.startswith("# flashsampling verification: PASSED")
    assert "| variant | test | n | statistic | p-value | Holm p | detects (power 0.99) | verdict |" in md
    assert "![toy-normal-V50](plots/case-toy-normal-V50.png)" in md and "](plots/pvalue-qq.png)" in md
    assert "total variation >= " in md  # what each test detects at its n
    js = json.loads((out / "report.json").read_text())
    assert js == json.loads(json.dumps(doc))
    assert js["status"] == "finished" and js["passed"] is True
    assert {"started", "finished", "command", "args", "versions"} <= set(js)
    assert set(js["versions"]) == {"python", "numpy", "scipy", "torch", "triton", "flashsampling"}
    assert js["family"]["size"] == len(js["tests"]) and all("adjusted_pvalue" in t for t in js["tests"])


def test_a_failed_test_is_listed_first():
    doc = {"family": {"alpha": 1e-3, "test_alpha": 1e-4, "size": 1, "power": 0.99}, "passed": False,
           "command": "c", "started": "s", "seconds": 1.0, "mode": "m", "variants": ["v"], "runs": [],
           "cases": [{"name": "k", "description": "d", "plot": None}], "versions": {}, "args": {},
           "tests": [{"variant": "v", "case": "k", "title": "G-test", "n": 10, "statistic": None, "pvalue": 0.0,
                      "adjusted_pvalue": 0.0, "min_detectable": None, "deviation": "total variation",
                      "passed": False}]}  # fmt: skip
    md = report_page(doc)
    assert md.startswith("# flashsampling verification: FAILED")
    assert md.index("## Failed tests") < md.index("## `k`")
    assert "| `v` | `k` | G-test | 10 | - | 0 | 0 | no total variation at this n | **FAIL** |" in md


def test_a_rerun_leaves_nothing_of_the_earlier_run(tmp_path):
    out = tmp_path / "report"
    _write(out, [NORMAL, FLAT], plots=True)
    assert "plots/case-toy-flat-V64.png" in _files(out)
    (out / "notes.txt").write_text("from an earlier run")
    _write(out, [NORMAL], plots=False)
    assert _files(out) == {"report.md", "report.json"}
    assert [p.name for p in tmp_path.iterdir()] == ["report"]  # no staging folder left beside it


def test_a_run_in_progress_or_interrupted_claims_no_verdict(tmp_path):
    out = tmp_path / "report"
    _write(out, [NORMAL])
    assert json.loads((out / "report.json").read_text())["passed"] is True
    report.begin(out, HEAD)
    assert _files(out) == {"report.json"}
    js = json.loads((out / "report.json").read_text())
    assert js["status"] == "running" and js["passed"] is None
    report.interrupted(out, HEAD, "KeyboardInterrupt")
    js = json.loads((out / "report.json").read_text())
    assert js["status"] == "interrupted" and js["passed"] is None and js["reason"] == "KeyboardInterrupt"


def test_a_failure_while_writing_keeps_the_earlier_folder(tmp_path):
    out = tmp_path / "report"
    _write(out, [NORMAL])
    before = (out / "report.json").read_text()

    def broken(folder):
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        report.publish(out, {"report.json": "{}"}, broken)
    assert (out / "report.json").read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["report"]


def test_check_out(tmp_path):
    assert report.check_out(tmp_path / "new" / "report") == (tmp_path / "new" / "report").resolve()
    (tmp_path / "empty").mkdir()
    report.check_out(tmp_path / "empty")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="not a folder"):
        report.check_out(tmp_path / "file")
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "main.py").write_text("x")
    with pytest.raises(ValueError, match="no report.json"):
        report.check_out(tmp_path / "code")
    (tmp_path / "code" / "report.json").write_text("{}")
    report.check_out(tmp_path / "code")


def test_json_has_no_infinity(tmp_path):
    """Non-finite statistics and detectable deviations are written as null (JSON has no Infinity)."""
    out = tmp_path / "report"
    result = run_battery([EXACT], [NORMAL], seed=SEED)
    doc = write_report(out, result, HEAD, [NORMAL], plots=False)
    text = (out / "report.json").read_text()
    assert "Infinity" not in text and "NaN" not in text
    assert all(t["min_detectable"] is None or np.isfinite(t["min_detectable"]) for t in doc["tests"])
