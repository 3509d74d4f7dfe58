"""The house plan of verification/ holds: five layers in a fixed order, every import going down or staying in its
layer, no circle, docs/architecture.md's tables equal to what scripts/architecture.py reads from the code, and the
old module paths still working with a DeprecationWarning.  No statistics: no seeds."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from scripts import architecture as arch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def modules():
    return arch.read_package()


def test_the_layers_bottom_first():
    assert arch.LAYERS == ("stats", "battery", "planning", "outputs", "runners")
    found = {p.name for p in (ROOT / "verification").iterdir() if (p / "__init__.py").is_file()}
    assert found == set(arch.LAYERS), "a subpackage of verification/ that is no layer"


def test_every_layer_and_module_says_its_job(modules):
    for layer in arch.LAYERS:
        assert modules[f"verification.{layer}"].job, f"verification/{layer}/__init__.py has no docstring"
    assert [m.name for m in modules.values() if not m.job] == []


def test_imports_only_go_down(modules):
    assert arch.upward_imports(modules) == []


def test_no_circle(modules):
    assert arch.circles(modules) == []


def test_no_circle_in_the_sampler():
    """flashsampling/ imports no module in a circle either (``TYPE_CHECKING`` imports included)."""
    assert arch.circles(arch.read_package(package="flashsampling", layers=())) == []


def test_the_architecture_tables_are_the_code():
    assert arch.stale() == [], "run: python scripts/architecture.py --write"


def _package(tmp_path: Path, files: dict[str, str]) -> dict[str, arch.Module]:
    for rel, text in files.items():
        path = tmp_path / "verification" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return arch.read_package(tmp_path)


def test_an_upward_import_a_lazy_one_and_a_circle_are_caught(tmp_path):
    """The checks fail on a planted defect: a statistic that imports a runner (inside a function, where it runs
    late), a layer that imports the front door, and two modules of one layer that import each other."""
    mods = _package(tmp_path, {
        "__init__.py": '"""api"""\n',
        "stats/__init__.py": '"""stats"""\n',
        "stats/gof.py": '"""gof"""\ndef f():\n    from ..runners.run import go\n',
        "planning/__init__.py": '"""planning"""\n',
        "planning/a.py": '"""a"""\nfrom .b import x\nfrom .. import api_name\n',
        "planning/b.py": '"""b"""\nfrom .a import y\n',
        "runners/__init__.py": '"""runners"""\n',
        "runners/run.py": '"""run"""\nfrom ..planning import a\n',
    })  # fmt: skip
    assert arch.upward_imports(mods) == [("verification.planning.a", "verification"),
                                         ("verification.stats.gof", "verification.runners.run")]  # fmt: skip
    assert arch.circles(mods) == [["verification.planning.a", "verification.planning.b"]]


def test_a_changed_job_makes_the_tables_stale(tmp_path, monkeypatch):
    doc = tmp_path / "architecture.md"
    doc.write_text(arch.DOC.read_text())
    assert arch.stale(doc) == []
    real = arch.read_package()
    name = "verification.stats.gof"
    changed = dict(real)
    changed[name] = arch.Module(name, real[name].path, "stats", "Something else.", real[name].imports)
    monkeypatch.setattr(arch, "read_package", lambda: changed)
    assert arch.stale(doc) == ["verification-modules"]


OLD_NAMES = [
    ("verification.targets", "top_k", "verification.battery.aims"),
    ("verification.calibration", "specs", "verification.runners.calibration"),
    ("verification.planning", "required_gof_samples", "verification.stats.gof"),
    ("verification.check", "check_sampler", "verification.runners.check"),
    ("verification.check", "SamplerReport", "verification.runners.sampler_report"),
    ("verification.mutants", "MUTANTS", "verification.battery.mutants.catalogue"),
    ("verification.mutants", "planned_n", "verification.runners.mutants"),
    ("verification.audit", "AuditSampler", "verification.battery.libraries.samplers"),
    ("verification.audit", "run_audit", "verification.runners.audit"),
]


@pytest.mark.parametrize(("old", "name", "new"), OLD_NAMES, ids=[f"{o}.{n}" for o, n, _ in OLD_NAMES])
def test_an_old_path_still_works_and_says_where_it_went(old, name, new):
    if old in ("verification.targets", "verification.calibration"):  # the moved module itself: warns on import
        sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(importlib.import_module(old), name)
    assert value is getattr(importlib.import_module(new), name)
    assert any(issubclass(w.category, DeprecationWarning) and new in str(w.message) for w in caught)


def test_every_command_runs_as_python_m(modules):
    """A module with a ``main`` is a command (``python -m verification.runners.mutants``...): it calls it."""
    commands = [m for m in modules.values() if "\ndef main(" in m.path.read_text()]
    assert {m.name for m in commands} >= {"verification.runners.mutants", "verification.runners.audit"}
    assert [m.name for m in commands if 'if __name__ == "__main__":' not in m.path.read_text()] == []


def test_python_m_of_an_old_path_still_runs():
    run = subprocess.run([sys.executable, "-m", "verification.calibration", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0 and "usage: python -m verification.runners.calibration" in run.stdout
    assert "python -m verification.calibration is deprecated" in run.stderr
