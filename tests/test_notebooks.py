"""The walkthrough notebooks (issue 6): each one runs, and each ``.ipynb`` is its ``.py`` without outputs.

``notebooks/NN_name.py`` (jupytext percent format) is the source of truth; ``notebooks/NN_name.ipynb``
is generated from it with outputs stripped::

    jupytext --to ipynb --set-kernel python3 notebooks/NN_name.py

* ``test_notebook_runs`` executes the percent-script in a fresh interpreter (``runpy``, matplotlib's
  Agg backend, working directory ``notebooks/`` as in Jupyter).  The notebooks assert their own
  claims (kernel == twin, tile invariance, which samplers pass or fail), so a run that finishes is
  a run whose checks held.  Their statistical checks use fixed seeds: they are deterministic.
* ``test_ipynb_matches_script`` and ``test_ipynb_has_no_outputs`` keep the committed pair in sync.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SCRIPTS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))
#: Per notebook; each takes 5-30 s on a 2-core CPU with the Triton interpreter.
TIMEOUT_S = 300
RUNNER = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"


def _ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


def test_notebooks_exist():
    names = {p.stem for p in SCRIPTS}
    assert {"01_argmax_decomposition", "02_hierarchical_factorization", "03_finite_precision"} <= names
    assert {p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")} == names, "every .py needs its .ipynb and back"


@pytest.mark.parametrize("script", SCRIPTS, ids=_ids(SCRIPTS))
def test_notebook_runs(script: Path):
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONWARNINGS="ignore::UserWarning")
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, str(script)],
        cwd=NOTEBOOKS,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    elapsed = time.perf_counter() - start
    tail = f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0, f"{script.name} failed after {elapsed:.0f} s:\n{tail}"
    assert "notebook run time" in proc.stdout, f"{script.name} did not reach its last cell"
    print(f"{script.name}: {elapsed:.1f} s")


def _cells(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


@pytest.mark.parametrize("script", SCRIPTS, ids=_ids(SCRIPTS))
def test_ipynb_matches_script(script: Path):
    jupytext = pytest.importorskip("jupytext")
    nbformat = pytest.importorskip("nbformat")
    ipynb = script.with_suffix(".ipynb")
    expected = _cells(jupytext.read(script))
    actual = _cells(nbformat.read(ipynb, as_version=4))
    assert actual == expected, (
        f"{ipynb.name} is out of date; regenerate it with: jupytext --to ipynb --set-kernel python3 "
        f"notebooks/{script.name}"
    )


@pytest.mark.parametrize("script", SCRIPTS, ids=_ids(SCRIPTS))
def test_ipynb_has_no_outputs(script: Path):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "a notebook without code cells"
    assert all(not c.outputs and c.execution_count is None for c in code), "strip the outputs before committing"
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"
