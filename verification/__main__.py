"""The main job: ``python -m verification`` (console script ``flashsampling-verify``).

Runs every variant present (fused kernel, its NumPy twin, grouped/online/TP as they land, the
float64 reference as a control) against the exact softmax on the declared battery
(``verification.cases``), prints a table per (variant, case, test), writes ``report.json`` and PNG
plots into ``--out``, and exits with status 1 when any test fails under the family-wise alpha.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="flashsampling-verify", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="report", help="report folder (default: report/)")
    ap.add_argument("--alpha", type=float, default=1e-3, help="family-wise false-alarm rate (default 1e-3)")
    ap.add_argument("--budget", type=float, default=None, help="seconds of sampling to spread over all runs")
    ap.add_argument("--variants", default=None, help="comma-separated variant names (default: all)")
    ap.add_argument("--cases", default=None, help="comma-separated case names (default: all)")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--audit", action="store_true", help="also audit samplers written elsewhere")
    ap.add_argument("--mutants", action="store_true", help="also run the mutant catalogue (each must be caught)")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)

    import flashsampling

    from .cases import battery
    from .report import format_table, run_battery, write_report
    from .variants import registry

    variants = registry()
    if args.variants:
        keep = set(args.variants.split(","))
        variants = [v for v in variants if v.name in keep]
    cases = battery(large=not flashsampling.INTERPRET)
    if args.cases:
        keep = set(args.cases.split(","))
        cases = [c for c in cases if c.name in keep]
    mode = "interpreter (CPU)" if flashsampling.INTERPRET else "compiled (GPU)"
    print(
        f"flashsampling verify: {len(variants)} variants x {len(cases)} cases, kernels {mode}, "
        f"family-wise alpha {args.alpha:g} (Holm)"
    )
    t0 = time.perf_counter()
    rows = run_battery(
        variants, cases, alpha=args.alpha, budget_s=args.budget, seed=args.seed, progress=not args.no_progress
    )
    audit_rows = []
    if args.audit:
        try:
            from .audit import run_audit
        except ImportError:
            print("audit: verification.audit is not available in this checkout")
        else:
            audit_rows = run_audit(alpha=args.alpha, budget_s=args.budget, seed=args.seed)
    mutant_rows = []
    if args.mutants:
        from .mutants import format_table as format_mutants
        from .mutants import run_mutants

        mutant_rows = run_mutants(alpha=args.alpha, budget_s=args.budget, seed=args.seed)
        print(format_mutants(mutant_rows))
    elapsed = time.perf_counter() - t0
    print(format_table(rows))
    meta = {"mode": mode, "seconds": elapsed, "variants": [v.name for v in variants], "cases": [c.name for c in cases]}
    if audit_rows:
        meta["audit"] = audit_rows
    if mutant_rows:
        meta["mutants"] = mutant_rows
    write_report(rows, cases, Path(args.out), alpha=args.alpha, meta=meta)
    failed = [r for r in rows if not r.passed]
    escaped = [m for m in mutant_rows if not m.get("ok", True)]
    if escaped:
        print(f"{len(escaped)} mutant runs not as required (a mutant escaped or an exact control failed)")
    print(f"\n{len(rows) - len(failed)} passed, {len(failed)} failed in {elapsed:.0f} s; report in {args.out}/")
    return 1 if (failed or escaped) else 0


if __name__ == "__main__":
    sys.exit(main())
