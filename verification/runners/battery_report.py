"""What the main job returns and writes: :class:`BatteryResult`, its ``report.json`` document and its report folder.

:func:`write_report` writes the folder with :mod:`verification.outputs`: ``report.md``
(:func:`verification.outputs.markdown.report_page` of the document), ``report.json`` (:func:`document`: the
family, every test, every run, the head's timestamps, command, arguments and versions) and the plots (one per
case with its variants' curves, one of every p-value: :mod:`verification.outputs.plots`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..battery.cases import Case
from ..outputs import plots as figures
from ..outputs.markdown import report_page
from ..outputs.report import now, publish, to_json
from ..planning.runs import Run
from ..planning.suite import TEST_TITLES
from ..stats.counts import Counts
from ..stats.family import Family, FamilyMember

__all__ = ["BatteryResult", "RunResult", "document", "format_table", "write_report"]


@dataclass
class RunResult:
    """What one run drew: ``n`` draws counted in ``counts`` (and ``maxima`` perturbed maxima) in
    ``batches`` calls, ``seconds`` to draw and test; ``skipped`` holds the reason a variant refused the
    case at draw time (its declared tests then count as passed with p = 1 in Holm's procedure)."""

    run: Run
    n: int = 0
    maxima: int = 0
    batches: int = 0
    seconds: float = 0.0
    counts: Counts | None = field(default=None, repr=False)
    skipped: str | None = None


@dataclass
class BatteryResult:
    """The battery's outcome: one family over every test, and what each run drew."""

    family: Family
    runs: list[RunResult]
    power: float
    budget_s: float | None
    seconds: float

    @property
    def passed(self) -> bool:
        """No test rejected by Holm at the family-wise alpha."""
        return self.family.passed

    def members(self, run: Run) -> list[tuple[str, FamilyMember]]:
        """``(test name, member)`` of ``run``'s tests, in suite order (none for a skipped run)."""
        by_name = {m.name: m for m in self.family.members()}
        key = run.name + ":"
        return [(t, by_name[key + t]) for t in run.tests if key + t in by_name]

    def tests(self) -> list[dict[str, Any]]:
        """One JSON-ready row per test: variant, layer, case, test, title, n, statistic, p-value, Holm-adjusted
        p-value, verdict, the level it ran at, and the deviation it detects with ``power`` at its n."""
        rows = []
        by_name = {m.name: m for m in self.family.members()}
        for rr in self.runs:
            run = rr.run
            for t in run.tests:
                m = by_name.get(f"{run.name}:{t}")
                if m is None:
                    continue
                r = m.result
                rows.append(
                    {
                        "variant": run.variant.name,
                        "layer": run.variant.layer,
                        "case": run.case.name,
                        "test": t,
                        "title": TEST_TITLES[t],
                        "n": int(r.n),
                        "statistic": _finite(r.statistic),
                        "pvalue": float(r.pvalue),
                        "adjusted_pvalue": m.adjusted_pvalue,
                        "passed": m.passed,
                        "alpha": float(r.alpha),
                        "min_detectable": _finite(r.min_detectable),
                        "deviation": r.deviation,
                    }
                )
        return rows


def _finite(x: float) -> float | None:
    """``x`` as a float, ``None`` when not finite (JSON has no infinity)."""
    x = float(x)
    return x if np.isfinite(x) else None


def document(result: BatteryResult, head: dict[str, Any], cases: list[Case], *, mutants=None, audit=None,
             plots: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """The JSON-ready document of a finished run: ``head`` (timestamps, command, arguments, versions), the
    family, every test, every run, and the mutants and audit rows when they ran."""
    fam = result.family
    plots = plots or {}
    runs = []
    for rr in result.runs:
        members = result.members(rr.run)
        runs.append(
            {
                "variant": rr.run.variant.name,
                "layer": rr.run.variant.layer,
                "case": rr.run.case.name,
                "seed": rr.run.seed,
                "n": rr.n,
                "maxima": rr.maxima,
                "batches": rr.batches,
                "seconds": rr.seconds,
                "skipped": rr.skipped,
                "passed": None if rr.skipped else all(m.passed for _, m in members),
            }
        )
    escaped = [m for m in (mutants or []) if m.get("ok") is False]
    doc = {
        **head,
        "status": "finished",
        "finished": now(),
        "passed": bool(result.passed and not escaped),
        "battery_passed": result.passed,
        "family": {
            "alpha": fam.alpha,
            "size": fam.size,
            "test_alpha": fam.test_alpha,
            "power": result.power,
            "correction": "Holm step-down over every test of the run",
            "failed": len(fam.failures()),
        },
        "cases": [{"name": c.name, "description": c.description, "plot": plots.get(c.name)} for c in cases],
        "runs": runs,
        "tests": result.tests(),
        "pvalue_plot": plots.get(""),
    }
    if mutants is not None:
        doc["mutants"] = mutants
    if audit is not None:
        doc["audit"] = audit
    return doc


def write_report(out: Path, result: BatteryResult, head: dict[str, Any], cases: list[Case], *, mutants=None,
                 audit=None, plots: bool = True) -> dict[str, Any]:  # fmt: skip
    """Write the finished report folder (``report.md``, ``report.json``, ``plots/``) and return its document."""
    case_list = [c for c in cases if any(rr.run.case.name == c.name and rr.counts is not None for rr in result.runs)]
    names: dict[str, str] = {}
    if plots:
        names = {c.name: f"plots/case-{c.name}.png" for c in case_list}
        names[""] = "plots/pvalue-qq.png"
    doc = document(result, head, case_list, mutants=mutants, audit=audit, plots=names)
    files = {"report.md": report_page(doc), "report.json": to_json(doc)}

    def draw(folder: Path) -> None:
        if plots:
            _plot(folder, result, case_list)

    publish(out, files, draw)
    return doc


def _plot(folder: Path, result: BatteryResult, cases: list[Case]) -> None:
    """The case plots and the p-value QQ plot."""
    plt = figures.pyplot()
    plots = folder / "plots"
    plots.mkdir()
    for case in cases:
        curves = [
            (rr.run.variant.name, rr.counts.histogram, rr.n)
            for rr in result.runs
            if rr.run.case.name == case.name and rr.counts is not None
        ]
        figures.case_figure(plt, case, curves, plots / f"case-{case.name}.png")
    figures.pvalue_figure(plt, np.array([m.result.pvalue for m in result.family.members()]), plots / "pvalue-qq.png")


def format_table(result: BatteryResult) -> str:
    """Text table of every test (the console's view of ``report.md``)."""
    head = (
        f"{'variant':26} {'case':20} {'test':16} {'n':>9} {'statistic':>11} {'p-value':>10} "
        f"{'Holm p':>9} {'detects':>9}  verdict"
    )
    lines = [head, "-" * len(head)]
    for t in result.tests():
        stat = "inf" if t["statistic"] is None else f"{t['statistic']:.4g}"
        det = "-" if t["min_detectable"] is None else f"{t['min_detectable']:.3g}"
        lines.append(
            f"{t['variant'][:26]:26} {t['case'][:20]:20} {t['test']:16} {t['n']:>9d} {stat:>11} {t['pvalue']:>10.3g} "
            f"{t['adjusted_pvalue']:>9.3g} {det:>9}  {'pass' if t['passed'] else 'FAIL'}"
        )
    return "\n".join(lines)
