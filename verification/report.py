"""The main job's report folder: ``report.md`` first, ``report.json``, plots; written whole or not at all.

Layout of ``--out`` (default ``report/``)::

    report.md               what a person reads first: the verdict, a table per case with the plot inline
                            (:func:`verification.markdown.report_page`)
    report.json             the same numbers, with timestamps, the command line, the arguments and the
                            versions of python, numpy, scipy, torch, triton and flashsampling
    plots/case-<name>.png   per case: observed vs exact frequency of the head tokens, and the mass beyond
                            each rank (the pooled tail, never hidden by sparse per-token counts)
    plots/pvalue-qq.png     every p-value against the uniform quantiles

Writing is atomic: the folder is built beside the target (a hidden sibling) and swapped in with two
renames, so the target holds one run's files and nothing of an earlier run.  :func:`begin` swaps in a
folder that holds only a ``report.json`` with ``"status": "running"`` before the first draw, so a run
stopped by Ctrl-C (:func:`interrupted`) or a crash leaves no earlier report claiming ``passed: true``.
:func:`check_out` refuses a target that is a file or a non-empty folder without a ``report.json`` (the
swap replaces the whole folder; ``--out .`` must not delete a checkout).
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import io
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .battery.cases import Case
from .engine import BatteryResult
from .markdown import report_page

__all__ = [
    "begin",
    "check_out",
    "document",
    "format_table",
    "interrupted",
    "plot_seconds",
    "publish",
    "versions",
    "write_report",
]

#: Packages whose versions every report records.
PACKAGES = ("numpy", "scipy", "torch", "triton", "flashsampling")
#: Largest number of points drawn per curve of a case plot (a V = 151936 curve is thinned on a log grid).
_PLOT_POINTS = 4000


def now() -> str:
    """The current time, ISO 8601 in UTC to the second."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def versions() -> dict[str, str]:
    """Versions of python and :data:`PACKAGES` (``"not installed"`` for a missing one)."""
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = getattr(sys.modules.get(name), "__version__", "not installed")
    return out


def check_out(out: Path) -> Path:
    """The report folder ``out``, resolved, if a report can replace it; else ``ValueError`` saying why.

    Accepted: a missing path whose parent can be created and written, or a folder that is empty or
    holds a ``report.json`` (an earlier report), in a writable parent.
    """
    out = Path(out).expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / "report.json").is_file():
        raise ValueError(f"--out {out} is a folder with files but no report.json: a report would replace it whole")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out.parent):
            pass
    except OSError as e:
        raise ValueError(f"--out {out}: cannot write in {out.parent} ({e.strerror or e})") from None
    return out


def publish(out: Path, files: dict[str, str], write_more: Callable[[Path], None] | None = None) -> None:
    """Replace the folder ``out`` by one holding exactly ``files`` (relative path -> text) and what
    ``write_more(folder)`` writes, built aside and swapped in with two renames."""
    out = Path(out)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", dir=out.parent))
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    try:
        for rel, text in files.items():
            path = stage / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        if write_more is not None:
            write_more(stage)
        os.chmod(stage, 0o755)  # mkdtemp makes it 0o700
        if out.exists():
            os.replace(out, old / out.name)
        os.replace(stage, out)
    except BaseException:
        if not out.exists() and (old / out.name).exists():
            os.replace(old / out.name, out)  # put the earlier folder back
        shutil.rmtree(stage, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)


def _json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, allow_nan=False, default=_plain) + "\n"


def _plain(x: Any) -> Any:
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x) if np.isfinite(x) else None
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, Path):
        return str(x)
    raise TypeError(f"not JSON-ready: {type(x).__name__}")


def begin(out: Path, head: dict[str, Any]) -> None:
    """Mark ``out`` as a run in progress: a folder holding only ``report.json`` with status ``running``."""
    publish(out, {"report.json": _json({**head, "status": "running", "passed": None})})


def interrupted(out: Path, head: dict[str, Any], reason: str) -> None:
    """Mark ``out`` as a run that did not finish (``reason``, e.g. ``"KeyboardInterrupt"``); no verdict."""
    publish(out, {"report.json": _json({**head, "status": "interrupted", "reason": reason, "passed": None,
                                        "finished": now()})})  # fmt: skip


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
    files = {"report.md": report_page(doc), "report.json": _json(doc)}

    def draw(folder: Path) -> None:
        if plots:
            _plot(folder, result, case_list)

    publish(out, files, draw)
    return doc


def _thin(x: np.ndarray) -> np.ndarray:
    """Indices ``0 .. x.size - 1`` thinned to about ``_PLOT_POINTS`` on a log grid (all of them if fewer)."""
    if x.size <= _PLOT_POINTS:
        return np.arange(x.size)
    return np.unique(np.geomspace(1, x.size, _PLOT_POINTS).astype(np.int64) - 1)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _case_figure(plt, case: Case, curves: list[tuple[str, np.ndarray, int]], target) -> None:
    """One case's figure: head frequencies and the tail mass beyond each rank, each ``(label, histogram, n)``
    of ``curves`` against the exact softmax; saved to ``target`` (a path or a file object)."""
    p = case.probs
    order = np.argsort(-p, kind="stable")
    head = min(50, p.size)
    ranks = np.arange(p.size)
    keep = _thin(ranks)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    exp_tail = np.clip(1.0 - np.cumsum(p[order]), 1e-12, None)
    for label, histogram, n in curves:
        freq = histogram[order] / max(n, 1)
        tail = np.clip(1.0 - np.cumsum(freq), 1e-12, None)
        ax1.plot(ranks[:head], freq[:head], ".", ms=4, alpha=0.7, label=label)
        ax2.step(ranks[keep], tail[keep], where="post", lw=1, alpha=0.7, label=label)
    ax1.plot(ranks[:head], p[order][:head], "k-", lw=1, label="exact softmax")
    ax2.step(ranks[keep], exp_tail[keep], "k-", where="post", lw=1.5, label="exact softmax")
    ax1.set_yscale("log")
    ax1.set_xlabel("token rank by exact probability (head)")
    ax1.set_ylabel("frequency")
    ax2.set_yscale("log")
    ax2.set_xlabel("token rank by exact probability")
    ax2.set_ylabel("mass beyond rank (tail)")
    ax1.set_title(f"{case.name}: head")
    ax2.set_title("tail mass, observed vs exact")
    ax2.legend(fontsize=6)
    # Fixed margins: tight_layout measured every tick label of the log axes, half the figure's time.
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.12, top=0.93, wspace=0.22)
    fig.savefig(target, dpi=110, format="png")
    plt.close(fig)


def plot_seconds(case: Case, curves: int) -> float:
    """Seconds one figure of ``case`` with ``curves`` variants takes to draw here, now: two throwaway
    figures, the first of which loads matplotlib and its fonts; the second one's time is returned."""
    plt = _pyplot()
    draws = np.bincount(np.arange(case.num_categories) % 7, minlength=case.num_categories)
    curves_ = [(f"v{k}", draws, int(draws.sum())) for k in range(curves)]
    _case_figure(plt, case, curves_, io.BytesIO())
    t = time.perf_counter()
    _case_figure(plt, case, curves_, io.BytesIO())
    return time.perf_counter() - t


def _plot(folder: Path, result: BatteryResult, cases: list[Case]) -> None:
    """The case plots and the p-value QQ plot (matplotlib, Agg backend)."""
    plt = _pyplot()
    plots = folder / "plots"
    plots.mkdir()
    for case in cases:
        curves = [
            (rr.run.variant.name, rr.counts.histogram, rr.n)
            for rr in result.runs
            if rr.run.case.name == case.name and rr.counts is not None
        ]
        _case_figure(plt, case, curves, plots / f"case-{case.name}.png")
    pv = np.sort(np.array([m.result.pvalue for m in result.family.members()]))
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    if pv.size:
        exp = (np.arange(1, pv.size + 1) - 0.5) / pv.size
        ax.loglog(exp, np.maximum(pv, 1e-300), ".", ms=3)
        ax.loglog([exp[0], 1], [exp[0], 1], "k--", lw=1)
    ax.set_xlabel("uniform quantile")
    ax.set_ylabel("observed p-value")
    ax.set_title("p-value QQ plot (all tests)")
    fig.tight_layout()
    fig.savefig(plots / "pvalue-qq.png", dpi=110)
    plt.close(fig)


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
