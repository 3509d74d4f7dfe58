"""The command line: ``python -m verification`` (console script ``flashsampling-verify``) and its ``check``.

``flashsampling-verify check pkg.module:function [--logits file.npy | --case NAME] [--target ...]
[--budget S] [--out DIR]`` checks one importable sampler instead (:func:`check_main`); every other first
argument runs the main job below.

Runs every variant present (fused kernel, its NumPy twin, grouped/online/TP, the float64 reference as
a control) on every case of the battery (``verification.battery.cases``) through the suite, all tests in one
Holm family at the family-wise ``--alpha`` (:mod:`verification.runners.engine`); writes the report folder
``--out`` (``report.md``, ``report.json``, plots: :mod:`verification.runners.battery_report`) and exits with
status 1 when any test fails (or, with ``--mutants``, a mutant escapes).

Every argument is checked before the first draw: unknown ``--variants``/``--cases`` names, a
``--budget`` that is not a finite number of seconds > 0, an ``--alpha`` outside (0, 1), a negative
``--seed`` and an ``--out`` that cannot be written all exit with status 2 and argparse's message.
``--budget S`` is the wall-clock time of the whole command, report included: the runs share what is
left after the start-up and a reserve for the plots (the engine's module docstring says how).

``check`` runs :func:`verification.check_sampler` on an importable callable and writes the same report folder
(:mod:`verification.outputs.report`): ``report.md`` (the verdict, every test with what it detects at its ``n``,
the tests not run, the properties, a plot per row), ``report.json`` (the same numbers with the command, the
arguments, the versions and the timestamps) and ``plots/``; written whole or not at all.  It exits 0 when the
sampler passes, 1 when it fails, 2 for a bad argument, which every argument is checked for before the sampler
is first called: the callable must import (the current folder is on the import path, as for ``python -m``), the
logits file must load as a float array ``[V]`` or ``[B, V]``, the case must exist, the target must parse
(:func:`verification.battery.aims.parse_target`: ``softmax()``, ``top_k(50)``, ``top_p(0.9, crossing='drop')``,
``min_p(0.05)``, ``chain(top_k(50), top_p(0.9), order='vllm')``; a speculative target needs draft
probabilities: use the Python call), the numbers must be in range, and ``--out`` must be writable.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import shlex
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

import flashsampling

from .battery.aims import SpeculativeTarget, parse_target
from .battery.cases import battery
from .battery.protocol import SamplerError
from .battery.variants import registry
from .outputs import plots, report
from .planning.agreement import agreement_request
from .planning.check import LawCase
from .planning.request import check_request
from .planning.runs import NoRuns, plan_battery
from .planning.streams import DEFAULT_SEED_BITS, SEED_BITS
from .runners.agreement import check_samplers_agree
from .runners.audit import format_audit, run_audit
from .runners.battery_report import format_table, write_report
from .runners.check import check_sampler
from .runners.engine import run_plan
from .runners.mutants import format_table as format_mutants
from .runners.mutants import run_mutants

__all__ = ["build_parser", "check_main", "check_parser", "load_sampler", "main"]

#: Seconds reserved, within a budget, for what follows the report (printing, the interpreter's exit).
EXIT_SECONDS = 0.5
#: Below this fraction of its share left for the runs, a budget is reported as too small: the runs'
#: pilot batches alone then take longer (see verification.runners.engine: 14-28 s for the CPU battery).
FLOOR_SHARE = 0.25
#: Rows plotted in a check's report at most.
MAX_PLOTS = 4

R = TypeVar("R")


def _process_start() -> float:
    """``time.perf_counter()`` at this process's start (from ``/proc`` on Linux; elsewhere: now), so that
    ``--budget`` counts the imports that precede :func:`main` too."""
    now = time.perf_counter()
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime, in clock ticks
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return now - max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return now


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line on stderr, ``prog: error: message (see prog --help)``, and exit 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {' '.join(str(message).split())} (see {self.prog} --help)\n")


def _checked(convert: Callable[[str], float], ok: Callable[[float], bool], requirement: str):
    """An argparse type: ``convert(text)`` if it succeeds and ``ok`` holds, else the message ``must be ...``."""

    def parse(text: str):
        try:
            v = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {requirement}, got {text!r}") from None
        if not ok(v):
            raise argparse.ArgumentTypeError(f"must be {requirement}, got {text!r}")
        return v

    return parse


_budget = _checked(float, lambda v: math.isfinite(v) and v > 0, "a finite number of seconds > 0")
_alpha = _checked(float, lambda v: 0.0 < v < 1.0, "a number in (0, 1)")
_seed = _checked(int, lambda v: 0 <= v < 2**62, "an integer in [0, 2**62)")
_positive = _checked(float, lambda v: math.isfinite(v) and v > 0, "a finite number > 0")
_tv = _checked(float, lambda v: 0.0 < v <= 1.0, "a number in (0, 1]")
_check_seed = _checked(int, lambda v: 0 <= v < 2**64, "an integer in [0, 2**seed_bits)")
_temperature = _checked(float, lambda v: math.isfinite(v) and v >= 0, "a finite number >= 0")


def _names(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"must be comma-separated names, got {text!r}")
    return names


def _open_report(ap: argparse.ArgumentParser, where: Path, head: dict[str, Any]) -> Path:
    """The report folder ``where``, checked (:func:`verification.outputs.report.check_out`) and marked as a run in
    progress; argparse's error (exit 2) when it cannot be written."""
    try:
        out = report.check_out(where)
    except ValueError as e:
        ap.error(f"argument {e}")
    try:
        report.begin(out, head)
    except OSError as e:
        ap.error(f"argument --out: cannot write {out} ({e})")
    return out


class Terminated(BaseException):
    """SIGTERM arrived during a run (a job scheduler's stop, ``kill``, a CI timeout)."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated(f"signal {signum}")


def _guarded(out: Path, head: dict[str, Any], body: Callable[[], R]) -> R | None:
    """``body()``, which writes the report folder ``out``; ``None`` after a Ctrl-C or a SIGTERM, which, like a
    crash, leave the folder saying that the run did not finish (no verdict; exit status 130 or 143 from
    :func:`main`)."""
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if _main_thread() else None
    try:
        return body()
    except (KeyboardInterrupt, Terminated) as e:
        reason = "KeyboardInterrupt" if isinstance(e, KeyboardInterrupt) else "SIGTERM"
        report.interrupted(out, head, reason)
        print(f"\ninterrupted ({reason}); {out}/report.json says so", file=sys.stderr)
        if isinstance(e, Terminated):
            raise SystemExit(128 + signal.SIGTERM) from None
        return None
    except BaseException as e:
        report.interrupted(out, head, f"{type(e).__name__}: {e}")
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


# ---------------------------------------------------------------------------------------------
# The main job
# ---------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The command line of the main job."""
    ap = OneLineParser(prog="flashsampling-verify", description=__doc__.split("\n\n")[2].replace("\n", " "),
                                 epilog="flashsampling-verify check --help: check one sampler of your own")  # fmt: skip
    ap.add_argument("--out", type=Path, default=Path("report"), help="report folder (default: report/)")
    ap.add_argument("--alpha", type=_alpha, default=1e-3, help="family-wise false-alarm rate (default 1e-3)")
    ap.add_argument("--budget", type=_budget, default=None,
                    help="wall-clock seconds for the whole command (default: fixed sample sizes)")  # fmt: skip
    ap.add_argument("--variants", type=_names, default=None, help="comma-separated variant names (default: all)")
    ap.add_argument("--cases", type=_names, default=None, help="comma-separated case names (default: all)")
    ap.add_argument("--seed", type=_seed, default=20261129)
    ap.add_argument("--audit", action="store_true", help="also audit samplers written elsewhere")
    ap.add_argument("--mutants", action="store_true", help="also run the mutant catalogue (each must be caught)")
    ap.add_argument("--no-plots", action="store_true", help="write report.md and report.json without plots")
    ap.add_argument("--no-progress", action="store_true")
    return ap


def _select(ap: argparse.ArgumentParser, option: str, wanted: list[str] | None, available: list, default: list):
    """The items of ``available`` named in ``wanted`` (``default`` when None); argparse error on unknown names."""
    if wanted is None:
        return default
    by_name = {x.name: x for x in available}
    unknown = [w for w in wanted if w not in by_name]
    if unknown:
        ap.error(f"argument {option}: unknown {', '.join(unknown)} (valid: {', '.join(by_name)})")
    return [by_name[w] for w in dict.fromkeys(wanted)]


def main(argv: list[str] | None = None) -> int:
    """``flashsampling-verify [options]``: the main job; ``flashsampling-verify check ...``: :func:`check_main`."""
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["check"]:
        return check_main(args_in[1:])
    t_start = _process_start() if argv is None else time.perf_counter()
    ap = build_parser()
    args = ap.parse_args(argv)

    variants = _select(ap, "--variants", args.variants, registry(), registry())
    all_cases = battery(large=True)
    cases = _select(ap, "--cases", args.cases, all_cases, battery(large=not flashsampling.INTERPRET))
    try:
        plan = plan_battery(variants, cases, alpha=args.alpha, seed=args.seed)
    except NoRuns:
        ap.error("arguments --variants/--cases: no chosen variant runs on any chosen case")
    except ValueError as e:  # an --alpha at or above the power the tests state their deviations at
        ap.error(f"argument --alpha: {e}")
    mode = "interpreter (CPU)" if flashsampling.INTERPRET else "compiled (GPU)"
    head = {
        "started": report.now(),
        "command": shlex.join(["python", "-m", "verification", *(sys.argv[1:] if argv is None else argv)]),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "versions": report.versions(),
        "mode": mode,
        "variants": [v.name for v in variants],
        "seed": args.seed,
    }
    out = _open_report(ap, args.out, head)

    sections = 1 + args.audit + args.mutants
    share = None if args.budget is None else args.budget / sections
    budget_text = "" if share is None else f", budget {args.budget:g} s"
    print(f"flashsampling verify: {len(variants)} variants x {len(cases)} cases, {len(plan.runs)} runs, kernels "
          f"{mode}, family-wise alpha {args.alpha:g} (Holm){budget_text}")  # fmt: skip

    def job() -> tuple[dict[str, Any], list | None]:
        bar = None
        if not args.no_progress:
            try:
                from tqdm import tqdm

                bar = tqdm(total=len(plan.runs), desc="verify", unit="run")
            except ImportError:  # pragma: no cover - tqdm is in the verify extra
                bar = None
        battery_s = None
        if share is not None:
            # The report's plots come after the battery: time one figure now (the largest case, every
            # variant) and keep that much per figure (one per case, one for the p-values).
            reserve = EXIT_SECONDS
            if not args.no_plots:
                big = max(cases, key=lambda c: c.num_categories)
                reserve += (len(cases) + 1) * plots.plot_seconds(big, len(variants))
            elapsed = time.perf_counter() - t_start
            battery_s = share - elapsed - reserve
            head["timing"] = {"report_reserve_s": reserve}
            if battery_s < FLOOR_SHARE * share:
                print(f"warning: --budget {args.budget:g} s leaves {max(battery_s, 0):.1f} s for the runs after the "
                      f"start ({elapsed:.0f} s) and the plots ({reserve:.0f} s); each run still draws one pilot "
                      f"batch, so the job will take longer", file=sys.stderr)  # fmt: skip
            battery_s = max(1e-3, battery_s)

        def progress(result) -> None:
            if bar is not None:
                bar.set_postfix_str(result.run.name, refresh=False)
                bar.update(1)

        head["timing"] = {**head.get("timing", {}), "before_battery_s": time.perf_counter() - t_start,
                          "battery_budget_s": battery_s}  # fmt: skip
        result = run_plan(plan, budget_s=battery_s, progress=progress)
        head["timing"]["battery_s"] = result.seconds
        if bar is not None:
            bar.close()
        audit_rows = mutant_rows = None
        if args.audit:
            audit_rows = run_audit(alpha=args.alpha, budget_s=share, seed=args.seed)
            print(format_audit(audit_rows))
        if args.mutants:
            mutant_rows = run_mutants(alpha=args.alpha, budget_s=share, seed=args.seed)
            print(format_mutants(mutant_rows))
        print(format_table(result))
        head["seconds"] = time.perf_counter() - t_start
        doc = write_report(out, result, head, cases, mutants=mutant_rows, audit=audit_rows, plots=not args.no_plots)
        return doc, mutant_rows

    done = _guarded(out, head, job)
    if done is None:
        return 130
    doc, mutant_rows = done
    tests = doc["tests"]
    failed = sum(not t["passed"] for t in tests)
    escaped = [m for m in (mutant_rows or []) if m.get("ok") is False]
    if escaped:
        print(f"{len(escaped)} mutant runs not as required (a mutant escaped or an exact control failed)")
    elapsed = time.perf_counter() - t_start
    print(f"\n{len(tests) - failed} passed, {failed} failed of {len(tests)} tests (Holm, family-wise alpha "
          f"{args.alpha:g}) in {elapsed:.0f} s; report in {out}/")  # fmt: skip
    return 0 if doc["passed"] else 1


# ---------------------------------------------------------------------------------------------
# check: one sampler of the user's
# ---------------------------------------------------------------------------------------------


def load_sampler(spec: str):
    """The callable named by ``pkg.module:function`` (the function may be dotted: ``module:Class.method``), imported
    with the current folder first on the import path; ``ValueError`` saying why when it cannot be, a module that
    raises or calls ``sys.exit`` at import included (never an exit of this process)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{spec!r} is not of the form pkg.module:function")
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        obj = importlib.import_module(module_name)
    except KeyboardInterrupt:
        raise
    except SystemExit as e:  # a module that exits at import is not a sampler, and must not end this process
        raise ValueError(f"cannot import {module_name!r}: it called sys.exit({e.code!r}) at import") from None
    except BaseException as e:  # the user's module may raise anything on import
        raise ValueError(f"cannot import {module_name!r}: {type(e).__name__}: {e}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{spec!r} is not callable ({type(obj).__name__})")
    return obj


def check_parser() -> argparse.ArgumentParser:
    """The command line of ``check``."""
    ap = OneLineParser(
        prog="flashsampling-verify check",
        description="Check that an importable sampler draws exactly from its target: every test of "
        "verification.check_sampler under one Holm family; writes report.md and report.json.  With --against, "
        "check that two samplers draw from one law (verification.check_samplers_agree).",
    )
    ap.add_argument("sampler", help="pkg.module:function, a callable of the protocol (sampler(logits, n, seed))")
    ap.add_argument("--against", default=None, metavar="MODULE:FUNCTION",
                    help="a second sampler: test that both draw from one law instead of testing a target")  # fmt: skip
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--logits", type=Path, help="a .npy file of float logits [V] or [B, V] ([B, K + 1, V] for "
                     "a speculative target)")  # fmt: skip
    src.add_argument("--case", help="a case of the main job's battery (default normal-V1000)")
    ap.add_argument(
        "--target",
        default="softmax()",
        help="softmax(), top_k(k), top_p(p), min_p(p), chain(...) or speculative('draft.npy'[, "
        "target=...]) (default softmax(); with --against: the law the sizes are planned at)",
    )
    ap.add_argument("--temperature", type=_temperature, default=None,
                    help="temperature of the target (default: the case's, else 1)")  # fmt: skip
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--tv", type=_tv, default=None, help="total variation to plan the draws for (default 0.01)")
    size.add_argument("--budget", type=_positive, default=None, help="seconds for the whole check")
    ap.add_argument("--alpha", type=_alpha, default=1e-3, help="family-wise false-alarm rate (default 1e-3)")
    ap.add_argument("--power", type=_alpha, default=0.99, help="power of each stated deviation (default 0.99)")
    ap.add_argument("--seed", type=_check_seed, default=0)
    ap.add_argument("--seed-bits", type=int, choices=SEED_BITS, default=DEFAULT_SEED_BITS,
                    help="the seeds passed lie in [0, 2**SEED_BITS) (default 31)")  # fmt: skip
    ap.add_argument("--out", type=Path, default=Path("report"),
                    help="report folder, relative to the current folder (default: report/)")  # fmt: skip
    ap.add_argument("--no-plots", action="store_true", help="write report.md and report.json without plots")
    bar = ap.add_mutually_exclusive_group()
    bar.add_argument("--progress", dest="progress", action="store_true", default=None,
                     help="show a bar of the draws on stderr (default: when stderr is a terminal)")  # fmt: skip
    bar.add_argument("--no-progress", dest="progress", action="store_false", help="never show the progress bar")
    return ap


def _load_array(path: str) -> np.ndarray:
    """A ``.npy`` array named on the command line (relative to the current folder)."""
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot load {path} ({e})") from None


def _logits(ap: argparse.ArgumentParser, args, speculative: bool) -> tuple[np.ndarray, float]:
    dims = (3,) if speculative else (1, 2)
    if args.logits is not None:
        try:
            z = _load_array(str(args.logits))
        except ValueError as e:
            ap.error(f"argument --logits: {e}")
        if z.dtype.kind != "f" or z.ndim not in dims or z.size == 0:
            shape = "[B, K + 1, V] (a speculative target)" if speculative else "[V] or [B, V]"
            ap.error(f"argument --logits: {args.logits} must hold floats of shape {shape}, got dtype={z.dtype}, "
                     f"shape={z.shape}")  # fmt: skip
        return z, 1.0 if args.temperature is None else args.temperature
    if speculative:
        ap.error("argument --target: a speculative target needs --logits of the target model [B, K + 1, V]")
    cases = {c.name: c for c in battery(large=True)}
    name = args.case or "normal-V1000"
    if name not in cases:
        ap.error(f"argument --case: unknown {name} (valid: {', '.join(cases)})")
    case = cases[name]
    return case.logits.astype(np.float32), case.temperature if args.temperature is None else args.temperature


def _plot(stage: Path, result, rows: list[tuple[int, Any]]) -> None:
    """Per row, the main job's case figure (head frequencies, tail mass) of the draws against the target."""
    plt = plots.pyplot()
    (stage / "plots").mkdir()
    for b, gof in rows:
        case = LawCase(f"row {b}", np.zeros(gof.probs.size), 1.0, f"row {b}", law=gof.probs)
        curves = [(result.sampler, gof.counts.histogram, gof.counts.n)]
        marked = [t["token"] for d in result.diagnoses if d["row"] == b for t in d["tokens"]]
        plots.case_figure(plt, case, curves, stage / f"plots/row-{b}.png", label=f"target {result.target}",
                          marked=marked)  # fmt: skip


def _where(e: BaseException) -> str:
    """Where an exception was raised: the last frame of its traceback, ``file:line in function``."""
    tb = traceback.extract_tb(e.__traceback__)
    if not tb:
        return "unknown"
    f = tb[-1]
    return f"{Path(f.filename).name}:{f.lineno} in {f.name}"


def _stopped(title: str, e: BaseException) -> tuple[str, dict[str, Any]]:
    """report.md and the report.json fields of a check that did not reach a verdict because a call raised: a
    failed check (a sampler that raises, exits or breaks the protocol draws from no law)."""
    cause = e.__cause__ if isinstance(e, SamplerError) and e.__cause__ is not None else e
    what = f"{type(e).__name__}: {e}"
    md = "\n".join([
        f"# {title}: FAILED",
        "",
        f"The check stopped before its verdict: `{what}` (raised at {_where(cause)}).",
        "",
        "A sampler that raises, calls `sys.exit` or breaks the protocol during a check has drawn from no law: the "
        "check fails. No test ran; fix the call, then run the check again.",
    ]) + "\n"  # fmt: skip
    return md, {"passed": False, "error": what, "raised_at": _where(cause), "tests": []}


def check_main(argv: list[str] | None = None) -> int:
    """``flashsampling-verify check pkg.module:function ...`` (see the module docstring)."""
    t_start = time.perf_counter()
    ap = check_parser()
    args = ap.parse_args(argv)
    samplers = []
    for option, spec in (("sampler", args.sampler), ("--against", args.against)):
        if spec is None:
            continue
        try:
            samplers.append(load_sampler(spec))
        except ValueError as e:
            ap.error(f"argument {option}: {e}")
    try:
        target = parse_target(args.target, load=_load_array)
    except (TypeError, ValueError) as e:
        ap.error(f"argument --target: {e}")
    speculative = isinstance(target, SpeculativeTarget)
    if speculative and args.against:
        ap.error("argument --against: two samplers are compared on plain logits, not with a speculative target")
    z, temperature = _logits(ap, args, speculative)
    common = dict(temperature=temperature, alpha=args.alpha, power=args.power, tv=args.tv, budget_s=args.budget,
                  seed=args.seed, seed_bits=args.seed_bits)  # fmt: skip
    try:  # every argument, checked as the Python call checks it, before the sampler's first call
        if args.against:
            agreement_request(*samplers, z, planning_law=target, **common)
        else:
            check_request(samplers[0], z, target=target, **common)
    except (TypeError, ValueError) as e:
        ap.error(f"invalid arguments: {e}")
    title = (f"check_samplers_agree({args.sampler}, {args.against})" if args.against
             else f"check_sampler({args.sampler})")  # fmt: skip
    head = {
        "started": report.now(),
        "command": shlex.join(["flashsampling-verify", "check", *(sys.argv[2:] if argv is None else argv)]),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "versions": report.versions(),
    }
    out = _open_report(ap, args.out, head)
    common["budget_s"] = None if args.budget is None else max(1e-3, args.budget - (time.perf_counter() - t_start))
    print(f"flashsampling verify {title} on logits {list(z.shape)}, target {target!r}, family-wise alpha "
          f"{args.alpha:g} (Holm)")  # fmt: skip

    def job():
        try:
            if args.against:
                result = check_samplers_agree(*samplers, z, planning_law=target, **common)
            else:
                result = check_sampler(samplers[0], z, target=target, progress=args.progress, **common)
        except (Exception, SamplerError) as e:  # the sampler raised, exited or broke the protocol: no law
            md, fields = _stopped(title, e)
            doc = {**head, "status": "finished", "finished": report.now(), **fields}
            report.publish(out, {"report.md": md, "report.json": report.to_json(doc)})
            return e
        rows = []
        if not args.no_plots:
            for t in result.tests:
                if t.name.endswith(": pearson") and len(rows) < MAX_PLOTS:
                    rows.append((int(t.name.split()[1].rstrip(":")), t.result))
        figures = {b: f"plots/row-{b}.png" for b, _ in rows}
        doc = {**head, "status": "finished", "finished": report.now(), **result.as_dict(), "plots": figures}
        files = {
            "report.md": result.to_markdown(title=title, plots=figures),
            "report.json": json.dumps(doc, indent=2, allow_nan=False) + "\n",
        }
        report.publish(out, files, (lambda stage: _plot(stage, result, rows)) if rows else None)
        return result

    result = _guarded(out, head, job)
    if result is None:
        return 130
    if isinstance(result, BaseException):
        print(f"FAILED: the check stopped: {type(result).__name__}: {' '.join(str(result).split())}; report in "
              f"{out}/", file=sys.stderr)  # fmt: skip
        return 1
    print(repr(result))
    print(f"\n{'PASSED' if result.passed else 'FAILED'}: report in {out}/")
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())
