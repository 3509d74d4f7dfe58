"""The main job: ``python -m verification`` (console script ``flashsampling-verify``); and ``check``.

``flashsampling-verify check pkg.module:function [--logits file.npy | --case NAME] [--target ...]
[--budget S] [--out DIR]`` checks one importable sampler instead (:mod:`verification.check.cli`); every
other first argument runs the main job below.

Runs every variant present (fused kernel, its NumPy twin, grouped/online/TP, the float64 reference as
a control) on every case of the battery (``verification.battery.cases``) through the suite, all tests in one
Holm family at the family-wise ``--alpha`` (:mod:`verification.runners.engine`); writes the report folder
``--out`` (``report.md``, ``report.json``, plots: :mod:`verification.runners.battery_report`) and exits with status 1
when any test fails (or, with ``--mutants``, a mutant escapes).

Every argument is checked before the first draw: unknown ``--variants``/``--cases`` names, a
``--budget`` that is not a finite number of seconds > 0, an ``--alpha`` outside (0, 1), a negative
``--seed`` and an ``--out`` that cannot be written all exit with status 2 and argparse's message.
``--budget S`` is the wall-clock time of the whole command, report included: the runs share what is
left after the start-up and a reserve for the plots (the engine's module docstring says how).
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

import flashsampling

from .audit import format_audit, run_audit
from .battery.cases import battery
from .battery.variants import registry
from .mutants import format_table as format_mutants
from .mutants import run_mutants
from .outputs import plots, report
from .planning.runs import plan_runs
from .runners.battery_report import format_table, write_report
from .runners.engine import run_battery

#: Seconds reserved, within a budget, for what follows the report (printing, the interpreter's exit).
EXIT_SECONDS = 0.5
#: Below this fraction of its share left for the runs, a budget is reported as too small: the runs'
#: pilot batches alone then take longer (see verification.runners.engine: 14-28 s for the CPU battery).
FLOOR_SHARE = 0.25


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


def _names(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"must be comma-separated names, got {text!r}")
    return names


def build_parser() -> argparse.ArgumentParser:
    """The command line of the main job."""
    ap = argparse.ArgumentParser(prog="flashsampling-verify", description=__doc__.split("\n\n")[2].replace("\n", " "),
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
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["check"]:
        from .check.cli import main as check_main

        return check_main(args_in[1:])
    t_start = _process_start() if argv is None else time.perf_counter()
    ap = build_parser()
    args = ap.parse_args(argv)

    variants = _select(ap, "--variants", args.variants, registry(), registry())
    all_cases = battery(large=True)
    cases = _select(ap, "--cases", args.cases, all_cases, battery(large=not flashsampling.INTERPRET))
    runs = plan_runs(variants, cases, seed=args.seed)
    if not runs:
        ap.error("arguments --variants/--cases: no chosen variant runs on any chosen case")
    try:
        out = report.check_out(args.out)
    except ValueError as e:
        ap.error(f"argument {e}")
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
    try:
        report.begin(out, head)
    except OSError as e:
        ap.error(f"argument --out: cannot write {out} ({e})")

    sections = 1 + args.audit + args.mutants
    share = None if args.budget is None else args.budget / sections
    budget_text = "" if share is None else f", budget {args.budget:g} s"
    print(f"flashsampling verify: {len(variants)} variants x {len(cases)} cases, {len(runs)} runs, kernels {mode}, "
          f"family-wise alpha {args.alpha:g} (Holm){budget_text}")  # fmt: skip
    try:
        bar = None
        if not args.no_progress:
            try:
                from tqdm import tqdm

                bar = tqdm(total=len(runs), desc="verify", unit="run")
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
        result = run_battery(variants, cases, alpha=args.alpha, budget_s=battery_s, seed=args.seed, progress=progress)
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
        doc = write_report(out, result, head, cases, mutants=mutant_rows, audit=audit_rows,
                                  plots=not args.no_plots)  # fmt: skip
    except KeyboardInterrupt:
        report.interrupted(out, head, "KeyboardInterrupt")
        print(f"\ninterrupted; {out}/report.json says so", file=sys.stderr)
        return 130
    except BaseException as e:
        report.interrupted(out, head, f"{type(e).__name__}: {e}")
        raise
    tests = doc["tests"]
    failed = sum(not t["passed"] for t in tests)
    escaped = [m for m in (mutant_rows or []) if m.get("ok") is False]
    if escaped:
        print(f"{len(escaped)} mutant runs not as required (a mutant escaped or an exact control failed)")
    elapsed = time.perf_counter() - t_start
    print(f"\n{len(tests) - failed} passed, {failed} failed of {len(tests)} tests (Holm, family-wise alpha "
          f"{args.alpha:g}) in {elapsed:.0f} s; report in {out}/")  # fmt: skip
    return 0 if doc["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
