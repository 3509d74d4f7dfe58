"""The walkthrough notebooks (issue 39): each runs, and each committed ``.ipynb`` is its ``.py`` executed.

``notebooks/NN_name.py`` (jupytext percent format) is the source of truth; ``notebooks/NN_name.ipynb`` is that script
executed, with its outputs and figures, written by ``python notebooks/build.py`` (its docstring has the rules).

* ``test_notebook_runs`` executes each notebook fresh: in a Jupyter kernel (nbclient, ipykernel) where they are
  installed, else the percent-script by ``runpy`` with matplotlib's Agg backend (the GPU machine).  The notebooks
  assert their own claims (kernel == twin, which samplers pass or fail, the measured payload, the proofs' bounds), so
  a run that finishes is a run whose checks held.  Fixed seeds: the runs are deterministic.  10-25 s each on 2 cores.
* ``test_outputs_match_committed`` compares that fresh run with the committed outputs, by ``build.py``'s rules
  (lines tagged ``[machine]`` skipped, figures by presence), where the environment is the one the ``.ipynb`` records
  (kernels interpreted, NumPy's float functions bit for bit the same: ``build.environment``); elsewhere (compiled on a
  GPU, another CPU's SIMD logarithm) the fresh run itself is the test.
* ``test_comparison_*`` show that the comparison fails on a changed number or a lost figure, and only then.
* ``test_ipynb_matches_script``, ``test_ipynb_is_executed`` keep the committed pair in sync and executed.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SCRIPTS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))
NAMES = {"01_argmax_decomposition", "02_grouped_sampling", "03_online_sampling", "04_tensor_parallel",
         "05_finite_precision"}  # fmt: skip
#: Per notebook; each takes 10-25 s on a 2-core CPU with the Triton interpreter.
TIMEOUT_S = 300
RUNNER = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"
REGENERATE = "python notebooks/build.py"

_spec = importlib.util.spec_from_file_location("notebooks_build", NOTEBOOKS / "build.py")
build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build)

#: Fresh runs of this session, by notebook (xdist's --dist loadfile keeps this file's tests in one worker).
_RUNS: dict[str, object] = {}


def _can_use_kernels() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("nbclient", "nbformat", "ipykernel", "jupytext"))


def _ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


def _fresh(script: Path):
    """The executed notebook (nbclient), or ``None`` after a successful ``runpy`` run where nbclient is missing."""
    if script.stem in _RUNS:
        return _RUNS[script.stem]
    start = time.perf_counter()
    if _can_use_kernels():
        nb, _ = build.execute(script, timeout=TIMEOUT_S)
    else:
        env = dict(os.environ, MPLBACKEND="Agg", PYTHONWARNINGS="ignore::UserWarning")
        proc = subprocess.run([sys.executable, "-c", RUNNER, str(script)], cwd=NOTEBOOKS, env=env,
                              capture_output=True, text=True, timeout=TIMEOUT_S * 4)  # fmt: skip
        tail = f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        assert proc.returncode == 0, f"{script.name} failed after {time.perf_counter() - start:.0f} s:\n{tail}"
        assert "notebook run time" in proc.stdout, f"{script.name} did not reach its last cell"
        nb = None
    print(f"{script.name}: {time.perf_counter() - start:.1f} s")
    _RUNS[script.stem] = nb
    return nb


def test_notebooks_exist():
    assert {p.stem for p in SCRIPTS} == NAMES
    assert {p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")} == NAMES, "every .py needs its .ipynb and back"


@pytest.mark.parametrize("script", SCRIPTS, ids=_ids(SCRIPTS))
def test_notebook_runs(script: Path):
    nb = _fresh(script)
    if nb is not None:
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(not any(o.output_type == "error" for o in c.outputs) for c in code)
        stdout = "".join(o.text for c in code for o in c.outputs if o.output_type == "stream" and o.name == "stdout")
        assert "notebook run time" in stdout, f"{script.name} did not reach its last cell"


@pytest.mark.parametrize("script", SCRIPTS, ids=_ids(SCRIPTS))
def test_outputs_match_committed(script: Path):
    if not _can_use_kernels():
        pytest.skip("nbclient, nbformat, ipykernel or jupytext is not installed (the notebooks extra)")
    import nbformat

    committed = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    recorded, here = committed.metadata.get("flashsampling"), build.environment()
    if recorded != here:
        pytest.skip(f"the committed outputs were made in {recorded}, this machine is {here}: draws at near-ties may "
                    "go the other way, so test_notebook_runs is the test here")  # fmt: skip
    diff = build.differences(committed, _fresh(script))
    name = script.with_suffix(".ipynb").name
    assert not diff, (f"{name}'s committed outputs differ from a fresh run; if the change is intended, regenerate: "
                      f"{REGENERATE} {script.stem[:2]}\n" + "\n".join(diff))  # fmt: skip


def _committed(name: str = "01_argmax_decomposition"):
    nbformat = pytest.importorskip("nbformat")
    return nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)


def _first_stdout(nb, predicate):
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.output_type == "stream" and out.name == "stdout" and predicate(out.text):
                return out
    raise AssertionError("no such output in the committed notebook")


def test_comparison_fails_on_a_changed_number():
    nb = _committed()
    other = copy.deepcopy(nb)
    out = _first_stdout(other, lambda t: "largest difference" in t)
    out.text = out.text.replace("largest difference", "largest difference 1", 1)
    assert build.differences(nb, other), "a changed printed number must be a difference"


def test_comparison_skips_machine_lines_and_image_bytes():
    nb = _committed()
    other = copy.deepcopy(nb)
    out = _first_stdout(other, lambda t: build.MACHINE_TAG in t)
    out.text = out.text.replace(build.MACHINE_TAG, f"(another machine) {build.MACHINE_TAG}", 1)
    images = [o for c in other.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert images, "the committed notebook embeds its figures"
    images[0].data["image/png"] = images[0].data["image/png"][::-1]
    assert build.differences(nb, other) == []
    del images[0].data["image/png"]
    assert build.differences(nb, other), "a lost figure must be a difference"


@pytest.mark.parametrize("script", SCRIPTS, ids=_ids(SCRIPTS))
def test_ipynb_matches_script(script: Path):
    jupytext = pytest.importorskip("jupytext")
    nbformat = pytest.importorskip("nbformat")
    expected = [(c.cell_type, c.source.strip()) for c in jupytext.read(script).cells]
    actual = [(c.cell_type, c.source.strip()) for c in nbformat.read(script.with_suffix(".ipynb"), as_version=4).cells]
    assert actual == expected, f"{script.with_suffix('.ipynb').name} is out of date; regenerate: {REGENERATE} " \
                               f"{script.stem[:2]}"  # fmt: skip


@pytest.mark.parametrize("script", SCRIPTS, ids=_ids(SCRIPTS))
def test_ipynb_is_executed(script: Path):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.execution_count is not None for c in code), f"regenerate: {REGENERATE} {script.stem[:2]}"
    assert not any(o.output_type == "error" for c in code for o in c.outputs)
    assert any("image/png" in o.get("data", {}) for c in code for o in c.outputs), "figures are embedded"
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"
    assert set(nb.metadata.get("flashsampling", {})) == {"kernels", "numerics"}, "the environment it was built in"
