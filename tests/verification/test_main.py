"""The main job's command line: every bad argument exits 2 with argparse's message before any draw; a run
writes its report folder; Ctrl-C leaves a report.json that claims no verdict; a failing test exits 1.

Seeds: the runs use ``--seed`` from ``budget("verification.main.exact")`` (the float64 reference on
``tiny-V3``, null at family-wise alpha 1e-3) and the planted run a sampler that ignores the temperature.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import verification.__main__ as job
from flashsampling.reference import sample_inverse_cdf
from verification.__main__ import main
from verification.battery.variants import Variant
from verification.planning.budget import budget
from verification.runners.engine import FIRST_BATCH

B = budget("verification.main.exact")
GOOD = ["--variants", "reference-inverse-cdf", "--cases", "tiny-V3", "--no-progress", "--no-plots",
        "--seed", str(B.seed)]  # fmt: skip


@pytest.fixture
def no_draws(monkeypatch):
    """Fail the test if the battery starts: a bad argument must stop the job before any draw."""

    def never(*args, **kwargs):
        raise AssertionError("the battery started before the arguments were checked")

    monkeypatch.setattr(job, "run_plan", never)


BAD = [
    ("--variants bogus", ["--variants", "bogus"], ["unknown bogus", "valid:", "reference-inverse-cdf"]),
    ("--variants twin-fused,bogus2", ["--variants", "twin-fused,bogus2"], ["unknown bogus2", "twin-fused"]),
    ("--cases bogus", ["--cases", "bogus"], ["unknown bogus", "tiny-V3"]),
    ("--cases ''", ["--cases", ""], ["--cases", "comma-separated"]),
    ("--budget -1", ["--budget", "-1"], ["--budget", "finite number of seconds > 0"]),
    ("--budget 0", ["--budget", "0"], ["--budget", "> 0"]),
    ("--budget nan", ["--budget", "nan"], ["--budget", "> 0"]),
    ("--budget inf", ["--budget", "inf"], ["--budget", "finite"]),
    ("--budget abc", ["--budget", "abc"], ["--budget", "number of seconds"]),
    ("--alpha 0", ["--alpha", "0"], ["--alpha", "(0, 1)"]),
    ("--alpha 2", ["--alpha", "2"], ["--alpha", "(0, 1)"]),
    ("--alpha 1", ["--alpha", "1"], ["--alpha", "(0, 1)"]),
    ("--alpha nan", ["--alpha", "nan"], ["--alpha", "(0, 1)"]),
    ("--seed -1", ["--seed", "-1"], ["--seed", "[0, 2**62)"]),
    (
        "--variants twin-fused --cases normal-V151936",
        ["--variants", "twin-fused", "--cases", "normal-V151936"],
        ["no chosen variant runs on any chosen case"],
    ),
]


@pytest.mark.parametrize(("argv", "words"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_arguments_exit_2_before_sampling(argv, words, tmp_path, capsys, no_draws):
    out = tmp_path / "report"
    with pytest.raises(SystemExit) as e:
        main([*argv, "--out", str(out), "--no-progress"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert all(w in err for w in words), err
    assert not out.exists()


def test_out_that_cannot_take_a_report_exits_2(tmp_path, capsys, no_draws):
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "code.py").write_text("x")
    for out, words in ((tmp_path / "a-file", "not a folder"), (tmp_path / "src", "no report.json")):
        with pytest.raises(SystemExit) as e:
            main([*GOOD, "--out", str(out)])
        err = capsys.readouterr().err
        assert e.value.code == 2 and "--out" in err and words in err, err
    assert (tmp_path / "src" / "code.py").read_text() == "x"


def test_a_run_writes_its_report_and_ctrl_c_withdraws_it(tmp_path, monkeypatch, capsys):
    out = tmp_path / "report"
    assert main([*GOOD, "--out", str(out)]) == 0
    js = json.loads((out / "report.json").read_text())
    assert js["status"] == "finished" and js["passed"] is True
    assert js["args"]["variants"] == ["reference-inverse-cdf"] and js["args"]["seed"] == B.seed
    assert js["command"].startswith("python -m verification --variants reference-inverse-cdf")
    assert (out / "report.md").read_text().startswith("# flashsampling verification: PASSED")
    assert "passed, 0 failed of" in capsys.readouterr().out

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(job, "run_plan", interrupted)
    assert main([*GOOD, "--out", str(out)]) == 130
    js = json.loads((out / "report.json").read_text())
    assert js["status"] == "interrupted" and js["passed"] is None
    assert sorted(p.name for p in out.iterdir()) == ["report.json"]


def test_a_budgeted_run_records_its_budget(tmp_path):
    out = tmp_path / "report"
    assert main([*GOOD, "--budget", "3", "--out", str(out)]) == 0
    js = json.loads((out / "report.json").read_text())
    assert js["args"]["budget"] == 3.0 and js["timing"]["battery_budget_s"] > 0
    assert all(r["n"] >= FIRST_BATCH for r in js["runs"])


def test_a_failing_test_exits_1(tmp_path, monkeypatch):
    def cold(case, n, seed):  # planted defect: the temperature is ignored
        z = case.logits
        p = np.exp(z - z.max())
        return sample_inverse_cdf(p / p.sum(), n, np.random.default_rng(seed))

    hot = [c for c in job.registry() if c.name == "reference-inverse-cdf"]
    planted = Variant("temperature-ignored", "control", cold, 400_000_000)
    monkeypatch.setattr(job, "registry", lambda: hot + [planted])
    out = tmp_path / "report"
    argv = ["--variants", "temperature-ignored", "--cases", "hot-V1000-T2", "--no-progress", "--no-plots"]
    assert main([*argv, "--out", str(out), "--seed", str(budget("verification.main.planted").seed)]) == 1
    js = json.loads((out / "report.json").read_text())
    assert js["passed"] is False and js["family"]["failed"] >= 1
    assert (out / "report.md").read_text().startswith("# flashsampling verification: FAILED")
