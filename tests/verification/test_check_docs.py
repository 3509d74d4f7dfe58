"""docs/verify-your-sampler.md: its pytest example runs as a user would run it (a child pytest, Hypothesis
``@given`` with the session-scoped ``sampler_checker``, health checks on), seeds differ per example, a failing
sampler fails with the report; its acceptance table is what the acceptance script records, as required.

Seeds: ``budget("verification.check.exact")`` (the example's checks are seeded from the test ids and
examples, ``example_seed``) and ``budget("verification.check.planted")``.
"""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

from verification.planning.budget import budget
from verification.pytest_plugin import example_seed
from verification.runners.acceptance import BEGIN, END, RUNS

EXACT = budget("verification.check.exact")
PLANTED = budget("verification.check.planted")
ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "verify-your-sampler.md"


def _plugin_args() -> list[str]:
    names = {e.value for e in importlib.metadata.entry_points(group="pytest11")}
    return [] if "verification.pytest_plugin" in names else ["-p", "verification.pytest_plugin"]


def _pytest(folder: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *_plugin_args(),
         "--rootdir", str(folder), *args],  # fmt: skip
        capture_output=True, text=True, cwd=folder, env=env, timeout=600,
    )  # fmt: skip


def _example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    found = [b for b in blocks if b.startswith("# test_my_sampler.py")]
    assert len(found) == 1
    return found[0]


SEEDS_AND_FAILURE = textwrap.dedent(
    """
    import json, pathlib
    import numpy as np
    from hypothesis import given, settings, strategies as st

    SEEDS = []

    def exact(logits, num_samples, seed):
        SEEDS.append(seed)
        z = logits.double().numpy()
        p = np.exp(z - z.max(1, keepdims=True))
        rng = np.random.default_rng(seed)
        return np.stack([rng.choice(len(r), num_samples, p=r / r.sum()) for r in p])

    @settings(max_examples=4, derandomize=True, deadline=None)
    @given(scale=st.floats(0.5, 3.0))
    def test_seeds(sampler_checker, scale):
        z = (np.arange(8, dtype=np.float32) * np.float32(scale))[None, :] / 8
        r = sampler_checker.assert_sampler(exact, z, tv=0.3)
        pathlib.Path("seeds.jsonl").open("a").write(json.dumps([scale, r.seed]) + "\\n")

    def ignores_the_logits(logits, num_samples, seed):
        return np.random.default_rng(seed).integers(0, logits.shape[1], (logits.shape[0], num_samples))

    def test_fails_with_the_report(sampler_checker):
        sampler_checker.assert_sampler(ignores_the_logits, np.array([[0.0, 2.0, 4.0]], np.float32), tv=0.2)
    """
)


@pytest.fixture(scope="module")
def child(tmp_path_factory):
    """One child pytest (its start-up costs seconds) on the page's example and on ``test_user.py``."""
    folder = tmp_path_factory.mktemp("user")
    (folder / "test_my_sampler.py").write_text(_example())
    (folder / "test_user.py").write_text(SEEDS_AND_FAILURE)
    proc = _pytest(folder, "-rA", "test_my_sampler.py", "test_user.py")
    return folder, proc.returncode, proc.stdout + proc.stderr


def test_the_documented_example_test_passes_as_a_user_runs_it(child):
    _, code, out = child
    assert code == 1, out  # test_user.py's failing sampler; the page's two tests pass
    for name in ("test_my_sampler", "test_my_top_k_sampler_on_adversarial_logits"):
        assert f"PASSED test_my_sampler.py::{name}" in out, out
    assert "statistical sampler checks" in out
    assert int(re.search(r"(\d+) checks, 1 failed", out).group(1)) >= 8, out


def test_hypothesis_examples_get_their_own_seed_and_a_failure_shows_the_report(child):
    folder, _, out = child
    assert "PASSED test_user.py::test_seeds" in out and "FAILED test_user.py::test_fails_with_the_report" in out
    assert "# check_sampler(test_user.ignores_the_logits): FAILED" in out and "## Failed tests" in out
    lines = (folder / "seeds.jsonl").read_text().splitlines()
    seeds = [int(line.split(",")[1].strip(" ]")) for line in lines]
    assert len(lines) >= 4 and len(set(seeds)) == len({line.split(",")[0] for line in lines})  # one per example


def test_example_seed_depends_on_the_test_and_the_example():
    a = example_seed(1.0, test_id="t.py::a")
    assert a == example_seed(1.0, test_id="t.py::a") and 0 <= a < 2**30
    assert a != example_seed(2.0, test_id="t.py::a") and a != example_seed(1.0, test_id="t.py::b")
    import numpy as np

    z = np.zeros(4, np.float32)
    assert example_seed(z, test_id="x") != example_seed(z.astype(np.float64), test_id="x")


def test_the_acceptance_table_is_recorded_and_as_required():
    text = PAGE.read_text()
    block = text[text.index(BEGIN) : text.index(END)]
    rows = [line for line in block.splitlines() if line.startswith("| ") and not line.startswith("| sampler")]
    table = rows[: len(RUNS)]
    assert len(table) == len(RUNS)
    for run, row in zip(RUNS, table):
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[0] == run.label and cells[1].startswith(run.case)
        assert cells[6] == ("pass" if run.exact else "**FAIL**") and cells[7] == "yes", row
    assert "detects with power" in block


def test_the_budget_table_is_the_render_of_its_recorded_runs():
    """docs/verify-your-sampler.md's budget table is :func:`budget_table.render` of the recorded runs, every exact
    sampler passes at every budget it ran, and every defect is caught at some budget (the fp16 rounding excepted
    where its total variation is below what the largest budget's draws resolve: the row says so)."""
    import json

    from verification.runners import budget_table

    doc = json.loads(budget_table.RESULTS.read_text())
    text = PAGE.read_text()
    start = text.index(budget_table.BEGIN.split(" (")[0])
    block = text[start : text.index(budget_table.END, start) + len(budget_table.END)]
    assert block == budget_table.render(doc), "run: python -m verification.runners.budget_table --write " + str(PAGE)
    budgets = sorted({float(r["budget_s"]) for r in doc["runs"]})
    assert budgets == list(budget_table.BUDGETS)
    runs = {(r["label"], float(r["budget_s"])): r for r in doc["runs"]}
    for e in budget_table.ENTRIES:
        ran = [runs.get((e.label, b)) for b in budgets]
        v = budget_table.verdict(e, ran, budgets)
        assert ("passes at every budget" if e.exact else "caught from") in v or e.rounding == "float16", (e.label, v)
        if e.exact:
            assert all(r is not None and r["tv_upper_bound"] is not None for r in ran), e.label
