"""The proofs name only what the code has: every backticked reference in proofs/*.md -- a module path
(`flashsampling.noise.merge_coin`), a file (`flashsampling/kernels/stage2.py`, `tests/test_noise.py::test_x`), a
function, constant or argument name (`merge_coin_np`, `STREAM_TIE`, `vocab_start`) -- must exist, and the code
quoted verbatim must still be in its file.  A renamed or removed function fails here instead of leaving a proof that
describes code that is gone."""

from __future__ import annotations

import ast
import functools
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROOFS = ROOT / "proofs"
#: Where names are defined: the packages, the proofs' checks, the lab and the tests.
SOURCES = ("flashsampling", "verification", "proofs", "benchmarks", "tests", "scripts", "examples")
#: Dotted names outside the project (instructions, other libraries), checked by nobody here.
FOREIGN_PREFIXES = ("tl.", "torch.", "triton.", "np.", "mul.", "add.", "ex2.", "MUFU.", "sub.", "div.", "rcp.", "lg2.")
#: Backticked words that are not code names of this project: keys of a results table, math functions written as code.
NOT_CODE = {"exp2", "gumbel64", "exponential64", "log64(x)", "exp_neg64(a)", "log1p", "logf", "expf", "log2"}
#: Files that a GPU run writes (``proofs/gpu_checks.py`` on an H200): named before they exist.
GPU_OUTPUTS = {"gpu_h200.json", "proofs/results/gpu_h200.json"}
#: Code quoted verbatim in a proof: (markdown file, the text, the file that must contain it).
QUOTED_CODE = [
    ("argmax_decomposition.md", "best_even >= best_odd", "flashsampling/kernels/epilogue.py"),
]


def backticked(md: Path) -> list[str]:
    """The backticked spans of a markdown file, outside display math and code blocks."""
    text = re.sub(r"```.*?```", "", md.read_text(), flags=re.S)
    return [s for s in re.findall(r"`([^`\n]+)`", text) if s.strip()]


@functools.cache
def defined_names() -> frozenset[str]:
    """Every function, class, assigned name, attribute target and argument name of the project's Python files."""
    names: set[str] = set()
    for top in SOURCES:
        for path in (ROOT / top).rglob("*.py"):
            if ".venv" in path.parts:
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(node.name)
                elif isinstance(node, ast.arg):
                    names.add(node.arg)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names.add(node.id)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    names.add(node.attr)
                elif isinstance(node, ast.keyword) and node.arg:
                    names.add(node.arg)
    return frozenset(names)


def resolve_dotted(name: str) -> bool:
    """``a.b.c``: a module and attributes, as written or under ``flashsampling.`` (``twin.select``)."""
    for candidate in (name, f"flashsampling.{name}", f"proofs.{name}"):
        parts = candidate.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            try:
                for attr in parts[cut:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                break
            return True
    return False


def classify(span: str) -> tuple[str, str] | None:
    """``(kind, name)`` of a backticked span that names something checkable, or None (prose, math, commands)."""
    s = span.strip()
    if s in NOT_CODE or s.startswith(FOREIGN_PREFIXES) or s.startswith(("python ", "-", "<!--", ".")):
        return None
    path = re.fullmatch(r"([\w./*-]+\.(?:py|md|json|sh))(?:::(\w+))?", s)
    if path or re.fullmatch(r"[\w-]+(?:/[\w.-]+)+/?", s):
        return ("path", s)
    call = re.fullmatch(r"([A-Za-z_][\w.]*)\(.*\)", s)
    if call:
        s = call.group(1)
    if re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", s):
        return ("dotted", s)
    if re.fullmatch(r"[A-Za-z_]\w*", s) and ("_" in s or re.search(r"\d", s)) and not s.startswith("__"):
        return ("name", s)
    return None


def references() -> list[tuple[str, str, str]]:
    out = []
    for md in sorted(PROOFS.glob("*.md")):
        for span in backticked(md):
            c = classify(span)
            if c is not None:
                out.append((md.name, *c))
    return sorted(set(out))


def path_exists(ref: str, md_name: str) -> bool:
    file, _, test = ref.partition("::")
    if "*" in file:
        return any(ROOT.glob(file)) or any(PROOFS.glob(file))
    for base in (ROOT, PROOFS):
        p = base / file
        if p.exists():
            if test:
                return re.search(rf"^(?:async )?def {re.escape(test)}\b", p.read_text(), re.M) is not None
            return True
    return False


REFS = references()


def test_the_proofs_name_code():
    """The scan finds the references it is meant to check (so that an empty list cannot pass)."""
    kinds = {k for _, k, _ in REFS}
    assert kinds == {"path", "dotted", "name"} and len(REFS) > 150


@pytest.mark.parametrize("md, kind, ref", REFS, ids=[f"{m}:{r}" for m, _, r in REFS])
def test_every_reference_exists(md, kind, ref):
    if kind == "path":
        assert path_exists(ref, md) or ref in GPU_OUTPUTS, f"{md} names the file {ref!r}, which does not exist"
    elif kind == "dotted":
        assert resolve_dotted(ref), f"{md} names {ref!r}, which does not import"
    else:
        assert ref in defined_names(), f"{md} names {ref!r}, which nothing in {SOURCES} defines"


@pytest.mark.parametrize("md, snippet, source", QUOTED_CODE, ids=[q[1] for q in QUOTED_CODE])
def test_quoted_code_is_in_its_file(md, snippet, source):
    assert snippet in (PROOFS / md).read_text()
    assert snippet in (ROOT / source).read_text(), f"{md} quotes {snippet!r}, which {source} no longer has"


def test_a_removed_name_is_caught(tmp_path):
    """The check can fail: a proof naming a function that no module defines, or a dotted name that does not import."""
    assert classify("filter_trials_gone") == ("name", "filter_trials_gone")
    assert "filter_trials_gone" not in defined_names()
    assert not resolve_dotted("flashsampling.noise.no_such_function")
    assert not path_exists("flashsampling/no_such_module.py", "x.md")
    assert resolve_dotted("flashsampling.noise.merge_coin") and resolve_dotted("twin.select")
