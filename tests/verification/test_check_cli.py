"""``flashsampling-verify check``: every bad argument exits 2 with argparse's message before the sampler is
called; a run writes report.md and report.json; a failing sampler exits 1; ``python -m verification check``
runs it in a child process.  Seeds: ``budget("verification.check.exact")`` / ``"verification.check.planted"``.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import verification.__main__ as cli
from verification.__main__ import main
from verification.battery.aims import chain, parse_target, softmax, top_k, top_p
from verification.planning.budget import budget

EXACT = budget("verification.check.exact")
PLANTED = budget("verification.check.planted")
ROOT = pathlib.Path(__file__).resolve().parents[2]

MODULE = textwrap.dedent(
    """
    import numpy as np

    def exact(logits, num_samples, seed):
        z = logits.double().numpy()
        p = np.exp(z - z.max(1, keepdims=True))
        rng = np.random.default_rng(seed)
        return np.stack([rng.choice(r.size, num_samples, p=r / r.sum()) for r in p])

    def greedy(logits, num_samples, seed):
        return np.repeat(logits.argmax(1, keepdim=True).numpy(), num_samples, axis=1)

    NOT_CALLABLE = 3
    """
)


@pytest.fixture
def user(tmp_path, monkeypatch):
    """A folder holding the user's module ``mysampler`` and logits ``z.npy``, as the current folder."""
    (tmp_path / "mysampler.py").write_text(MODULE)
    np.save(tmp_path / "z.npy", np.random.default_rng(0).normal(0, 1, (2, 20)).astype(np.float32))
    np.save(tmp_path / "ints.npy", np.zeros((2, 3), np.int64))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("mysampler", None)
    return tmp_path


@pytest.fixture
def no_calls(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("check_sampler ran before the arguments were checked")

    monkeypatch.setattr(cli, "check_sampler", never)


BAD = [
    ("no colon", ["mysampler.exact"], ["pkg.module:function"]),
    ("missing module", ["nosuchmodule:f"], ["cannot import 'nosuchmodule'"]),
    ("missing function", ["mysampler:nope"], ["no attribute 'nope'"]),
    ("not callable", ["mysampler:NOT_CALLABLE"], ["not callable"]),
    ("missing logits file", ["mysampler:exact", "--logits", "none.npy"], ["--logits", "cannot load"]),
    ("integer logits", ["mysampler:exact", "--logits", "ints.npy"], ["--logits", "floats"]),
    ("unknown case", ["mysampler:exact", "--case", "bogus"], ["--case", "unknown bogus", "normal-V1000"]),
    ("logits and case", ["mysampler:exact", "--logits", "z.npy", "--case", "tiny-V3"], ["not allowed with"]),
    ("target not a target", ["mysampler:exact", "--target", "__import__('os')"], ["--target", "is not a target"]),
    ("target bad k", ["mysampler:exact", "--target", "top_k(0)"], ["--target", "k must be >= 1"]),
    ("target syntax", ["mysampler:exact", "--target", "top_k(("], ["--target", "does not parse"]),
    ("target variable", ["mysampler:exact", "--target", "top_k(k)"], ["--target", "literals"]),
    ("tv and budget", ["mysampler:exact", "--tv", "0.1", "--budget", "5"], ["not allowed with"]),
    ("tv 2", ["mysampler:exact", "--tv", "2"], ["--tv", "(0, 1]"]),
    ("budget 0", ["mysampler:exact", "--budget", "0"], ["--budget", "> 0"]),
    ("alpha 1", ["mysampler:exact", "--alpha", "1"], ["--alpha", "(0, 1)"]),
    ("seed -1", ["mysampler:exact", "--seed", "-1"], ["--seed", "integer in [0,"]),
    ("temperature -1", ["mysampler:exact", "--temperature", "-1"], ["--temperature", ">= 0"]),
]


@pytest.mark.parametrize(("argv", "words"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_arguments_exit_2_before_the_sampler_is_called(argv, words, user, no_calls, capsys):
    out = user / "report"
    with pytest.raises(SystemExit) as e:
        main(["check", *argv, "--out", str(out)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert all(w in err for w in words), err
    assert not out.exists()


def test_out_that_cannot_take_a_report_exits_2(user, no_calls, capsys):
    (user / "src").mkdir()
    (user / "src" / "code.py").write_text("x")
    with pytest.raises(SystemExit) as e:
        main(["check", "mysampler:exact", "--out", str(user / "src")])
    assert e.value.code == 2 and "no report.json" in capsys.readouterr().err


def test_a_run_writes_the_report_folder(user):
    out = user / "report"
    code = main(["check", "mysampler:exact", "--logits", "z.npy", "--target", "top_p(0.9)", "--tv", "0.2",
                 "--seed", str(EXACT.seed + 40), "--out", str(out)])  # fmt: skip
    assert code == 1  # a softmax sampler against top-p: draws outside the support
    md = (out / "report.md").read_text()
    assert md.startswith("# check_sampler(mysampler:exact): FAILED") and "![row 0](plots/row-0.png)" in md
    assert (out / "plots" / "row-0.png").stat().st_size > 0 and (out / "plots" / "row-1.png").exists()
    doc = json.loads((out / "report.json").read_text())
    assert doc["status"] == "finished" and doc["passed"] is False and doc["target"].startswith("top_p(p=0.9")
    assert doc["args"]["tv"] == 0.2 and "numpy" in doc["versions"] and doc["command"].startswith("flashsampling")
    assert not {t["name"] for t in doc["tests"] if not t["passed"]}.isdisjoint({"row 0: range", "row 1: range"})

    code = main(["check", "mysampler:exact", "--logits", "z.npy", "--tv", "0.2", "--no-plots",
                 "--seed", str(EXACT.seed + 41), "--out", str(out)])  # fmt: skip
    assert code == 0 and sorted(p.name for p in out.iterdir()) == ["report.json", "report.md"]


def test_python_m_verification_check_in_a_child_process(user):
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run(
        [sys.executable, "-m", "verification", "check", "mysampler:greedy", "--case", "tiny-V3", "--tv", "0.3",
         "--no-plots", "--seed", str(PLANTED.seed), "--out", "rep"],  # fmt: skip
        capture_output=True, text=True, cwd=user, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED: report in" in proc.stdout and (user / "rep" / "report.md").exists()


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("softmax", softmax()),
        ("softmax()", softmax()),
        ("top_k(50)", top_k(50)),
        ("top_k(50, ties='low_index')", top_k(50, ties="low_index")),
        ("top_p(0.9, crossing='drop', strict=False)", top_p(0.9, crossing="drop", strict=False)),
        ("chain(top_k(50), top_p(0.9), order='vllm')", chain(top_k(50), top_p(0.9), order="vllm")),
        ("top_k((3, 5))", top_k((3, 5))),
    ],
)
def test_target_expressions_parse_to_the_targets(text, target):
    assert parse_target(text) == target
    assert parse_target(repr(target)) == target  # a target's repr is its own expression
