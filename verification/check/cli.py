"""``flashsampling-verify check pkg.module:function ...`` (also ``python -m verification check ...``).

Runs :func:`verification.check_sampler` on an importable callable and writes the report folder with the
main job's writer (:mod:`verification.outputs.report`): ``report.md`` (the verdict, every test with what it detects
at its ``n``, the tests not run, the properties, a plot per row), ``report.json`` (the same numbers with the
command, the arguments, the versions and the timestamps) and ``plots/``; written whole or not at all.
Exits 0 when the sampler passes, 1 when it fails, 2 for a bad argument, which every argument is checked for
before the sampler is first called: the callable must import (the current folder is on the import path, as
for ``python -m``), the logits file must load as a float array ``[V]`` or ``[B, V]``, the case must exist,
the target must parse, the numbers must be in range, and ``--out`` must be writable.

``--target`` takes the constructors of :mod:`verification.battery.aims` as written in Python, with literal
arguments only: ``softmax()``, ``top_k(50)``, ``top_p(0.9, crossing='drop')``, ``min_p(0.05)``,
``chain(top_k(50), top_p(0.9), order='vllm')``.  A speculative target needs draft probabilities: use the
Python call.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import math
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..__main__ import _checked
from ..battery import aims as target_module
from ..battery.cases import battery
from ..outputs import report as folder
from ..outputs.plots import case_figure, pyplot
from ..planning.check import LawCase
from ..planning.streams import MAX_SEED
from ..runners.check import check_sampler

__all__ = ["build_parser", "load_sampler", "main", "parse_target"]

#: Rows plotted in the report at most.
MAX_PLOTS = 4
_TARGETS = ("softmax", "top_k", "top_p", "min_p", "chain")


def _literal(node: ast.AST, text: str):
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ValueError(f"{text!r}: arguments must be literals (numbers, strings, tuples)") from None


def _build(node: ast.AST, text: str):
    if isinstance(node, ast.Name) and node.id == "softmax":
        return target_module.softmax()
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _TARGETS):
        raise ValueError(f"{text!r} is not a target: write softmax(), top_k(k), top_p(p), min_p(p) or chain(...)")
    name = node.func.id
    args = [_build(a, text) if name == "chain" else _literal(a, text) for a in node.args]
    kwargs = {k.arg: _literal(k.value, text) for k in node.keywords if k.arg is not None}
    if len(kwargs) != len(node.keywords):
        raise ValueError(f"{text!r}: ** arguments are not accepted")
    return getattr(target_module, name)(*args, **kwargs)


def parse_target(text: str):
    """A :class:`verification.battery.aims.Target` from its Python spelling (literal arguments only); ``ValueError``
    or ``TypeError`` with the reason otherwise.  ``"softmax"`` alone is accepted."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise ValueError(f"{text!r} does not parse as a Python expression") from None
    return _build(tree.body, text)


def load_sampler(spec: str):
    """The callable named by ``pkg.module:function`` (the function may be dotted: ``module:Class.method``)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{spec!r} is not of the form pkg.module:function")
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        obj = importlib.import_module(module_name)
    except Exception as e:  # the user's module may raise anything on import
        raise ValueError(f"cannot import {module_name!r}: {type(e).__name__}: {e}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{spec!r} is not callable ({type(obj).__name__})")
    return obj


_positive = _checked(float, lambda v: math.isfinite(v) and v > 0, "a finite number > 0")
_unit = _checked(float, lambda v: 0.0 < v < 1.0, "a number in (0, 1)")
_tv = _checked(float, lambda v: 0.0 < v <= 1.0, "a number in (0, 1]")
_seed = _checked(int, lambda v: 0 <= v <= MAX_SEED, f"an integer in [0, {MAX_SEED}]")
_temperature = _checked(float, lambda v: math.isfinite(v) and v >= 0, "a finite number >= 0")


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``check``."""
    ap = argparse.ArgumentParser(
        prog="flashsampling-verify check",
        description="Check that an importable sampler draws exactly from its target: every test of "
        "verification.check_sampler under one Holm family; writes report.md and report.json.",
    )
    ap.add_argument("sampler", help="pkg.module:function, a callable of the protocol (sampler(logits, n, seed))")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--logits", type=Path, help="a .npy file of float logits [V] or [B, V]")
    src.add_argument("--case", help="a case of the main job's battery (default normal-V1000)")
    ap.add_argument("--target", default="softmax()",
                    help="softmax(), top_k(k), top_p(p), min_p(p) or chain(...) (default softmax())")  # fmt: skip
    ap.add_argument("--temperature", type=_temperature, default=None,
                    help="temperature of the target (default: the case's, else 1)")  # fmt: skip
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--tv", type=_tv, default=None, help="total variation to plan the draws for (default 0.01)")
    size.add_argument("--budget", type=_positive, default=None, help="seconds for the whole check")
    ap.add_argument("--alpha", type=_unit, default=1e-3, help="family-wise false-alarm rate (default 1e-3)")
    ap.add_argument("--power", type=_unit, default=0.99, help="power of each stated deviation (default 0.99)")
    ap.add_argument("--seed", type=_seed, default=0)
    ap.add_argument("--out", type=Path, default=Path("report"), help="report folder (default: report/)")
    ap.add_argument("--no-plots", action="store_true", help="write report.md and report.json without plots")
    return ap


def _logits(ap: argparse.ArgumentParser, args) -> tuple[np.ndarray, float]:
    if args.logits is not None:
        try:
            z = np.load(args.logits, allow_pickle=False)
        except (OSError, ValueError) as e:
            ap.error(f"argument --logits: cannot load {args.logits} ({e})")
        if z.dtype.kind != "f" or z.ndim not in (1, 2) or z.size == 0:
            ap.error(f"argument --logits: {args.logits} must hold floats of shape [V] or [B, V], got "
                     f"dtype={z.dtype}, shape={z.shape}")  # fmt: skip
        return z, 1.0 if args.temperature is None else args.temperature
    cases = {c.name: c for c in battery(large=True)}
    name = args.case or "normal-V1000"
    if name not in cases:
        ap.error(f"argument --case: unknown {name} (valid: {', '.join(cases)})")
    case = cases[name]
    return case.logits.astype(np.float32), case.temperature if args.temperature is None else args.temperature


def _plot(stage: Path, result, rows: list[tuple[int, Any]]) -> None:
    """Per row, the main job's case figure (head frequencies, tail mass) of the draws against the target."""
    plt = pyplot()
    (stage / "plots").mkdir()
    for b, gof in rows:
        case = LawCase(f"row {b}", np.zeros(gof.probs.size), 1.0, f"row {b}", law=gof.probs)
        case_figure(plt, case, [(result.sampler, gof.counts.histogram, gof.counts.n)], stage / f"plots/row-{b}.png")


def main(argv: list[str] | None = None) -> int:
    t_start = time.perf_counter()
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        sampler = load_sampler(args.sampler)
    except ValueError as e:
        ap.error(f"argument sampler: {e}")
    try:
        target = parse_target(args.target)
    except (TypeError, ValueError) as e:
        ap.error(f"argument --target: {e}")
    z, temperature = _logits(ap, args)
    try:
        out = folder.check_out(args.out)
    except ValueError as e:
        ap.error(f"argument {e}")
    head = {
        "started": folder.now(),
        "command": shlex.join(["flashsampling-verify", "check", *(sys.argv[2:] if argv is None else argv)]),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "versions": folder.versions(),
    }
    try:
        folder.begin(out, head)
    except OSError as e:
        ap.error(f"argument --out: cannot write {out} ({e})")
    budget = None if args.budget is None else max(1e-3, args.budget - (time.perf_counter() - t_start))
    print(f"flashsampling verify check: {args.sampler} on logits {list(z.shape)}, target {target!r}, "
          f"family-wise alpha {args.alpha:g} (Holm)")  # fmt: skip
    try:
        result = check_sampler(sampler, z, target=target, temperature=temperature, alpha=args.alpha, power=args.power,
                               tv=args.tv, budget_s=budget, seed=args.seed)  # fmt: skip
        rows = []
        if not args.no_plots:
            for t in result.tests:
                if t.name.endswith(": pearson") and len(rows) < MAX_PLOTS:
                    rows.append((int(t.name.split()[1].rstrip(":")), t.result))
        plots = {b: f"plots/row-{b}.png" for b, _ in rows}
        doc = {**head, "status": "finished", "finished": folder.now(), **result.as_dict(), "plots": plots}
        files = {
            "report.md": result.to_markdown(title=f"check_sampler({args.sampler})", plots=plots),
            "report.json": json.dumps(doc, indent=2, allow_nan=False) + "\n",
        }
        folder.publish(out, files, (lambda stage: _plot(stage, result, rows)) if rows else None)
    except KeyboardInterrupt:
        folder.interrupted(out, head, "KeyboardInterrupt")
        print(f"\ninterrupted; {out}/report.json says so", file=sys.stderr)
        return 130
    except BaseException as e:
        folder.interrupted(out, head, f"{type(e).__name__}: {e}")
        raise
    print(repr(result))
    print(f"\n{'PASSED' if result.passed else 'FAILED'}: report in {out}/")
    return 0 if result.passed else 1
