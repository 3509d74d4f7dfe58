"""The command line as people use it (issue 35 item 6, issue 36): from their own folder, with a read-only install;
bad arguments exit 2 with one line on stderr and leave an earlier report alone; a sampler that raises or calls
sys.exit (at import or during the run) never gives "passed"; partial's keywords name the sampler; a seed under
another name is refused by name; --target speculative(...), --against and --seed-bits.

Seeds: ``budget("verification.check.exact")`` / ``"verification.check.planted"``; the --against runs
``budget("verification.agreement.exact")``.
"""

from __future__ import annotations

import functools
import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import verification.__main__ as cli
from verification import check_sampler
from verification.__main__ import main
from verification.adapters import with_seed
from verification.battery import examples
from verification.planning.budget import budget

EXACT = budget("verification.check.exact")
PLANTED = budget("verification.check.planted")
AGREE = budget("verification.agreement.exact")
ROOT = pathlib.Path(__file__).resolve().parents[2]

MODULE = textwrap.dedent(
    """
    import sys

    import numpy as np

    def exact(logits, num_samples, seed):
        z = logits.double().numpy()
        p = np.exp(z - z.max(1, keepdims=True))
        rng = np.random.default_rng(seed)
        return np.stack([rng.choice(r.size, num_samples, p=r / r.sum()) for r in p])

    def inverse(logits, num_samples, seed):
        z = logits.double().numpy()
        p = np.exp(z - z.max(1, keepdims=True))
        c = np.cumsum(p / p.sum(1, keepdims=True), axis=1)
        u = np.random.default_rng(seed).random((z.shape[0], num_samples))
        return np.stack([np.minimum(np.searchsorted(c[b], u[b]), z.shape[1] - 1) for b in range(z.shape[0])])

    def hot(logits, num_samples, seed):
        return exact(logits * 1.5, num_samples, seed)

    def raises(logits, num_samples, seed):
        if num_samples > 16:
            raise RuntimeError("out of memory, pretend")
        return exact(logits, num_samples, seed)

    def exits(logits, num_samples, seed):
        sys.exit(0)

    def with_generator(logits, num_samples, generator=None):
        return exact(logits, num_samples, 0)

    def speculative(draft_tokens, draft_probs, target_probs, seed):
        rng = np.random.default_rng(seed)
        x = draft_tokens.numpy()
        q, p = draft_probs.double().numpy(), target_probs.double().numpy()
        b_, n, k = x.shape
        out = -np.ones((b_, n, k + 1), np.int64)
        for b in range(b_):
            alive = np.ones(n, bool)
            for i in range(k):
                xi = x[b, :, i]
                accept = alive & (rng.random(n) * q[b, i, xi] < p[b, i, xi])
                reject = alive & ~accept
                out[b, accept, i] = xi[accept]
                out[b, reject, i] = icdf(rng, np.maximum(p[b, i] - q[b, i], 0), reject.sum())
                alive = accept
            out[b, alive, k] = icdf(rng, p[b, k], alive.sum())
        return out

    def icdf(rng, w, n):
        c = np.cumsum(w)
        return np.minimum(np.searchsorted(c, rng.random(n) * c[-1], side="right"), c.size - 1)
    """
)


@pytest.fixture
def user(tmp_path, monkeypatch):
    """The user's folder, as the current folder: their module ``mine``, logits ``z.npy`` (and bad ones), a module
    that exits at import, and a speculative case (draft ``q.npy``, target logits ``t.npy``)."""
    (tmp_path / "mine.py").write_text(MODULE)
    (tmp_path / "quits.py").write_text("import sys\nsys.exit(0)\n")
    (tmp_path / "broken.py").write_text("raise ImportError('missing dependency, pretend')\n")
    rng = np.random.default_rng(0)
    np.save(tmp_path / "z.npy", rng.normal(0, 1, (2, 20)).astype(np.float32))
    np.save(tmp_path / "nan.npy", np.array([[0.0, np.nan, 1.0]], np.float32))
    np.save(tmp_path / "inf.npy", np.array([[0.0, np.inf, 1.0]], np.float32))
    np.save(tmp_path / "q.npy", rng.dirichlet(np.ones(6), size=(1, 2)))
    np.save(tmp_path / "t.npy", rng.normal(0, 1, (1, 3, 6)))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("mine", "quits", "broken"):
        sys.modules.pop(name, None)
    return tmp_path


@pytest.fixture
def no_calls(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("the check ran before the arguments were checked")

    monkeypatch.setattr(cli, "check_sampler", never)
    monkeypatch.setattr(cli, "check_samplers_agree", never)


BAD = [
    ("NaN logits", ["mine:exact", "--logits", "nan.npy"], "logits must not contain NaN"),
    ("inf logits", ["mine:exact", "--logits", "inf.npy"], "NaN or +inf"),
    ("power below alpha", ["mine:exact", "--alpha", "0.01", "--power", "0.005"], "power must be in (alpha, 1)"),
    ("power equal to alpha", ["mine:exact", "--alpha", "0.5", "--power", "0.5"], "power must be in (alpha, 1)"),
    ("out too long", ["mine:exact", "--out", "x" * 250], "--out"),
    ("seed past 31 bits", ["mine:exact", "--seed", str(2**31)], "seed must be in [0, 2**31)"),
    ("seed bits 30", ["mine:exact", "--seed-bits", "30"], "--seed-bits"),
    ("tv too small", ["mine:exact", "--tv", "1e-300"], "tv=1e-300 is too small"),
    ("a generator, not a seed", ["mine:with_generator"], "takes its randomness as 'generator'"),
    ("exit at import", ["quits:f"], "cannot import 'quits': it called sys.exit(0) at import"),
    ("import error", ["broken:f"], "cannot import 'broken': ImportError"),
    ("against a missing sampler", ["mine:exact", "--against", "mine:nope"], "argument --against"),
    ("speculative without a file", ["mine:speculative", "--target", "speculative(q)"], "speculative('draft.npy'"),
    ("speculative on a case", ["mine:speculative", "--target", "speculative('q.npy')"], "needs --logits"),
    ("speculative file missing", ["mine:speculative", "--target", "speculative('none.npy')"], "cannot load"),
    (
        "speculative against",
        ["mine:speculative", "--against", "mine:exact", "--logits", "t.npy", "--target", "speculative('q.npy')"],
        "--against",
    ),  # fmt: skip
]


@pytest.mark.parametrize(("argv", "words"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_arguments_exit_2_with_one_line(argv, words, user, no_calls, capsys):
    out = user / "report"
    with pytest.raises(SystemExit) as e:
        main(["check", *argv, *([] if "--out" in argv else ["--out", str(out)])])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and err.startswith("flashsampling-verify check: error: "), err
    assert not out.exists()


def test_a_bad_argument_leaves_an_earlier_report_alone(user, capsys):
    out = user / "report"
    assert main(["check", "mine:exact", "--logits", "z.npy", "--tv", "0.3", "--no-plots", "--seed",
                 str(EXACT.seed + 50), "--out", str(out)]) == 0  # fmt: skip
    before = (out / "report.json").read_text()
    with pytest.raises(SystemExit):
        main(["check", "mine:exact", "--logits", "nan.npy", "--out", str(out)])
    assert (out / "report.json").read_text() == before and json.loads(before)["status"] == "finished"


@pytest.mark.parametrize(
    ("sampler", "words"),
    [("mine:raises", "RuntimeError: out of memory, pretend"), ("mine:exits", "called sys.exit(0)")],
    ids=["raises", "sys.exit(0)"],
)
def test_a_sampler_that_raises_or_exits_during_the_run_gives_a_failed_report(sampler, words, user, capsys):
    out = user / "report"
    code = main(["check", sampler, "--logits", "z.npy", "--tv", "0.3", "--out", str(out)])
    assert code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("FAILED: the check stopped") and words in err, err
    doc = json.loads((out / "report.json").read_text())
    assert doc["passed"] is False and doc["status"] == "finished" and words in doc["error"]
    assert doc["raised_at"].startswith("mine.py:")
    md = (out / "report.md").read_text()
    assert md.startswith(f"# check_sampler({sampler}): FAILED") and words in md


def test_python_m_verification_check_exits_nonzero_for_a_module_that_exits_at_import(user):
    """In a child process too: sys.exit(0) at import is exit 2, never 0 (the defect: exit 0, "passed")."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, "-m", "verification", "check", "quits:f", "--case", "tiny-V3"],
                          capture_output=True, text=True, cwd=user, env=env, timeout=300)  # fmt: skip
    assert proc.returncode == 2 and "passed" not in proc.stdout.lower(), proc.stdout + proc.stderr


def test_partial_keywords_show_in_the_sampler_name():
    tempered = functools.partial(examples.temperature_error)
    assert check_sampler(tempered, np.zeros((1, 4), np.float32), tv=0.5).sampler == (
        "partial(verification.battery.examples.temperature_error)"
    )
    hot = functools.partial(_scaled, scale=2.0, table=np.zeros((3, 4)))
    r = check_sampler(hot, np.zeros((1, 4), np.float32), tv=0.5)
    assert r.sampler.endswith("_scaled, scale=2.0, table=<float64 (3, 4)>)") and r.sampler.startswith("partial(")


def _scaled(logits, num_samples, seed, *, scale, table):
    return examples.inverse_cdf(logits * scale, num_samples, seed)


@pytest.mark.parametrize("name", ["generator", "rng", "key", "random_state"])
def test_a_seed_under_another_name_is_refused_by_name(name):
    ns: dict = {}
    exec(f"def sampler(logits, num_samples, {name}=None):\n    return None", ns)
    with pytest.raises(TypeError, match=f"takes its randomness as '{name}'.*with_seed"):
        check_sampler(ns["sampler"], np.zeros((1, 4), np.float32))


def test_with_seed_passes_a_generator_or_an_rng_built_from_the_seed():
    def torch_style(logits, num_samples, generator):
        import torch

        return torch.multinomial(torch.softmax(logits.double(), -1), num_samples, True, generator=generator)

    def numpy_style(logits, num_samples, *, rng):
        p = logits.double().softmax(-1).numpy()
        return np.stack([rng.choice(r.size, num_samples, p=r) for r in p])

    z = np.random.default_rng(1).normal(0, 1, (2, 16)).astype(np.float32)
    for fn, seed in ((torch_style, EXACT.seed + 51), (numpy_style, EXACT.seed + 52)):
        r = check_sampler(with_seed(fn), z, tv=0.2, seed=seed)
        assert r.passed and r.properties[0].holds is True and "with_seed[" in r.sampler, r


def test_speculative_target_on_the_command_line(user):
    out = user / "spec"
    code = main(["check", "mine:speculative", "--logits", "t.npy", "--target", "speculative('q.npy')", "--tv",
                 "0.3", "--seed", str(EXACT.seed + 53), "--out", str(out)])  # fmt: skip
    doc = json.loads((out / "report.json").read_text())
    assert code == 0 and doc["passed"] and doc["target"].startswith("speculative(") and doc["shape"] == [1, 3, 6]
    assert any(t["name"] == "row 0: emitted" for t in doc["tests"])


def test_against_checks_two_samplers_and_seed_bits(user):
    out = user / "pair"
    code = main(["check", "mine:exact", "--against", "mine:inverse", "--logits", "z.npy", "--tv", "0.2",
                 "--seed", str(2**40 + AGREE.seed), "--seed-bits", "64", "--out", str(out)])  # fmt: skip
    doc = json.loads((out / "report.json").read_text())
    assert code == 0 and doc["passed"] and doc["seed_bits"] == 64 and doc["tv_upper_bound"] < 1
    assert (out / "report.md").read_text().startswith("# check_samplers_agree(mine:exact, mine:inverse): PASSED")
    code = main(["check", "mine:exact", "--against", "mine:hot", "--logits", "z.npy", "--tv", "0.1", "--no-plots",
                 "--seed", str(PLANTED.seed + 54), "--out", str(out)])  # fmt: skip
    assert code == 1 and json.loads((out / "report.json").read_text())["passed"] is False


def _snapshot(folder: pathlib.Path) -> dict[str, float]:
    return {str(p.relative_to(folder)): p.stat().st_mtime for p in folder.rglob("*")}


def test_from_the_users_folder_with_a_read_only_install(user, tmp_path_factory):
    """``python -m verification check mine:exact`` in the user's folder, the package a read-only copy elsewhere:
    the user's module imports from their folder, the report lands under it, nothing is written into the package
    (bytecode off, which a read-only install cannot write anyway).  Then ``bash scripts/verify.sh check`` from the
    same folder, when this checkout's .venv runs the tests."""
    site = tmp_path_factory.mktemp("site")
    for pkg in ("verification", "flashsampling"):
        shutil.copytree(ROOT / pkg, site / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for p in site.rglob("*"):
        p.chmod(0o555 if p.is_dir() else 0o444)
    before = _snapshot(site)
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        proc = subprocess.run([sys.executable, "-m", "verification", "check", "mine:exact", "--case", "tiny-V3",
                               "--tv", "0.3", "--seed", str(EXACT.seed + 55), "--out", "reports/mine"],
                              capture_output=True, text=True, cwd=user, env=env, timeout=300)  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert (user / "reports" / "mine" / "report.md").read_text().startswith("# check_sampler(mine:exact): PASSED")
        where = subprocess.run([sys.executable, "-c", "import verification; print(verification.__file__)"],
                               capture_output=True, text=True, cwd=user, env=env, timeout=300)  # fmt: skip
        assert where.stdout.strip() == str(site / "verification" / "__init__.py")  # the copy ran, not the checkout
        assert _snapshot(site) == before
    finally:
        for p in site.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
    venv = ROOT / ".venv" / "bin" / "python"
    if not (venv.exists() and pathlib.Path(sys.prefix).resolve() == (ROOT / ".venv").resolve()):
        pytest.skip("scripts/verify.sh runs the checkout's .venv, which is not the one running the tests")
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "verify.sh"), "check", "mine:exact", "--case", "tiny-V3",
                           "--tv", "0.3", "--no-plots", "--seed", str(EXACT.seed + 56), "--out", "rep"],
                          capture_output=True, text=True, cwd=user, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (user / "rep" / "report.json").exists() and not (ROOT / "rep").exists()


def test_sigterm_during_a_run_leaves_a_report_saying_so(user):
    """A SIGTERM (a scheduler's stop, a CI timeout) in the middle of the draws: exit 143 and report.json saying
    the run was interrupted by SIGTERM, never "running" (the defect) and never a verdict."""
    import json
    import signal
    import time

    (user / "slow.py").write_text("import time\n\nfrom mine import exact\n\n\ndef f(logits, num_samples, seed):\n"
                                  "    time.sleep(0.05)\n    return exact(logits, num_samples, seed)\n")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen([sys.executable, "-m", "verification", "check", "slow:f", "--case", "tiny-V3",
                             "--budget", "120", "--out", "term"], cwd=user, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    target = user / "term" / "report.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (target.is_file() and '"running"' in target.read_text()):
        time.sleep(0.2)
    time.sleep(1.0)  # into the draws
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    js = json.loads(target.read_text())
    assert proc.returncode == 128 + signal.SIGTERM, out + err
    assert js["status"] == "interrupted" and js["reason"] == "SIGTERM" and js["passed"] is None
