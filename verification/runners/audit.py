"""Running the audit: each sampler on its cases, one Holm family per sampler, the rows and their tables.

Every (sampler, case) draws, the suite of :mod:`verification.planning.suite` tests it (for the speculative
case: the suite on the first emitted token and Pearson on the number emitted,
:func:`.speculative.check_speculative`), and one Holm family per sampler decides it at the
family-wise ``alpha``: a sampler that is exact fails with probability at most ``alpha``.  The row
reports whether it passed, the draws it was given, the smallest deviations it was tested to (the
Pearson test's detectable total variation on the sampler's first case, the tail test's detectable
relative deficit on the tail cases), and for a failure what failed and the mechanism behind it.

Budget
------
``budget_s`` seconds are split over the available samplers, the cheap ones (``O(1)`` per draw) first,
each taking an equal part of the time still left; inside a sampler, over its cases in fixed shares
(:attr:`AuditSampler.cases`; for the softmax samplers the tail and mask cases, which need many draws
per vocabulary entry, get most).  A pilot of a few hundred draws measures the cost per draw; each
(sampler, case) then draws ``min(MAX_DRAWS, share / cost)`` and at least ``MIN_DRAWS``.  Per-draw cost
is ``O(V)`` for the races (a full exponential vector per draw), so on a CPU they reach far fewer
draws than the inverse-CDF samplers; the reported detectable deviations say what that bought.
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import numpy as np

from ..battery.cases import Case
from ..battery.libraries.cases import AUDIT_CASES, SpecCase, audit_cases, spec_cases
from ..battery.libraries.samplers import SOFTMAX_SAMPLERS, AuditSampler, _torch_device, _torch_origin
from ..battery.libraries.speculative import SPECULATIVE_SAMPLERS
from ..battery.libraries.truncation import TARGET_SAMPLERS
from ..battery.libraries.vllm_rejection import PLACEHOLDER_TOKEN_ID
from ..outputs.markdown import audit_tables
from ..planning.suite import suite_names
from ..stats.binomial import detectable_shifts
from ..stats.family import Family
from ..stats.gof import goodness_of_fit
from ..stats.tails import TailResult
from .suite import run_suite

__all__ = ["DEFAULT_BUDGET_S", "MAX_DRAWS", "MIN_DRAWS", "SAMPLERS", "format_audit", "main", "run_audit"]

#: Cap on draws per (sampler, case): 10**6 draws detect a total variation of about 0.01 at V = 1000.
MAX_DRAWS = 1_000_000
#: Floor on draws per (sampler, case), whatever the budget.
MIN_DRAWS = 1_000
#: The least share of a sampler, as a fraction of an equal part of the budget (:func:`run_audit`).
MIN_SHARE = 0.5
#: Budget when none is given (seconds, all samplers together): with the main job's battery (about 6 minutes on two
#: cores), ``bash scripts/verify.sh --audit`` measured 14.2 minutes at 480 s; 420 s leaves a minute of margin.
DEFAULT_BUDGET_S = 420.0

#: Every audited sampler: softmax, truncation, speculative.
SAMPLERS: tuple[AuditSampler, ...] = SOFTMAX_SAMPLERS + TARGET_SAMPLERS + SPECULATIVE_SAMPLERS


def _case(name: str) -> Case | SpecCase:
    cases = audit_cases()
    return cases[name] if name in cases else spec_cases()[name]


def _size(case: Case | SpecCase) -> int:
    return speculative_tests(case) if isinstance(case, SpecCase) else len(suite_names(case))


def _check(x: np.ndarray, case: Case | SpecCase, fam: Family, prefix: str) -> None:
    if isinstance(case, SpecCase):
        check_speculative(x, case, fam, prefix)
    else:
        run_suite(x, case, family=fam, prefix=prefix)


def _diagnose(members, case_by_prefix: dict[str, Case | SpecCase]) -> list[str]:
    """One line per failed test: what was observed against what was expected."""
    out = []
    for mm in members:
        if mm.passed:
            continue
        case_name, test = mm.name.split(":", 1)
        case = case_by_prefix[case_name]
        case = case.first if isinstance(case, SpecCase) else case
        r = mm.result
        line = f"{case_name}: {test} failed (Holm p={mm.adjusted_pvalue:.2g})"
        if isinstance(r, TailResult):
            line += f"; {int(r.statistic)} draws in the tail, expected {r.expected:.1f}"
        elif test == "categories":
            worst = r.most_significant(1)[0]
            p = case.probs[worst.category]
            line += (f"; {r.num_flagged} token(s) flagged, worst token {worst.category} (p={p:.3g}): "
                     f"{worst.observed} draws, expected {worst.expected:.1f}")  # fmt: skip
        elif test == "ties":
            line += f"; lower half {r.lower_fraction:.4f}, expected {r.expected_fraction:.4f}"
        if math.isinf(r.statistic) or getattr(r, "impossible", 0) or getattr(r, "outside", 0):
            line += "; impossible draws (probability-0 tokens)"
        out.append(line)
    return out


def _shares(costs: dict[str, float], budget: float, weights: dict[str, float] = AUDIT_CASES) -> dict[str, int]:
    """Draws per case: ``budget`` seconds split by ``weights`` (a sampler's :attr:`~AuditSampler.cases`); a
    case that reaches ``MAX_DRAWS`` inside its share hands the rest to the others (water-filling)."""
    n: dict[str, int] = {}
    todo = dict(costs)
    left = budget
    while todo:
        wsum = sum(weights[k] for k in todo)
        capped = [k for k in todo if MAX_DRAWS * todo[k] <= left * weights[k] / wsum]
        if not capped:
            for k, c in todo.items():
                n[k] = int(max(MIN_DRAWS, min(MAX_DRAWS, left * weights[k] / wsum / max(c, 1e-12))))
            break
        for k in capped:
            n[k] = MAX_DRAWS
            left -= MAX_DRAWS * todo.pop(k)
    return n


def _audit_one(s: AuditSampler, cases: dict[str, Case | SpecCase] | None = None, *, alpha: float, budget: float,
               seed: int) -> dict[str, Any]:  # fmt: skip
    """One sampler on ``cases`` (default: its own, :attr:`AuditSampler.cases`), one Holm family: its row."""
    row: dict[str, Any] = {"sampler": s.name, "call": s.call}
    reason = s.available()
    if reason is not None:
        row.update(available=False, skipped=reason, passed=None)
        return row
    t0 = time.perf_counter()
    cases = {k: _case(k) for k in s.cases} if cases is None else cases
    row.update(available=True, origin=s.origin())
    costs = {}
    warmup = 0.0
    for k, (name, case) in enumerate(cases.items()):
        # O(V) samplers: a few hundred draws; O(1) ones: enough that the fixed cost of a call is amortized.
        pilot = (256 if case.num_categories > 100_000 else 1024) if s.per_draw_vector else 65536
        t = time.perf_counter()
        s.draw(case, pilot, seed + 7919 * (k + 1))  # warm-up (device start, compilation)
        warmup += time.perf_counter() - t
        t = time.perf_counter()
        s.draw(case, pilot, seed + 7919 * (k + 1) + 1)  # timing; these draws are not tested
        costs[name] = (time.perf_counter() - t) / pilot
    # The warm-ups are not charged to the share: a first call that compiles for two minutes (FlashInfer's
    # JIT) would otherwise leave the minimum of draws, and a test with little power.
    weights = {k: s.cases.get(k, 1.0) for k in cases}
    draws = _shares(costs, max(0.0, budget - (time.perf_counter() - t0 - warmup)), weights)
    size = sum(_size(c) for c in cases.values())
    fam = Family(alpha=alpha, size=size, name=s.name)
    per_case = []
    for k, (name, case) in enumerate(cases.items()):
        t = time.perf_counter()
        x = s.draw(case, draws[name], seed + k)
        secs = time.perf_counter() - t
        _check(x, case, fam, f"{name}:")
        per_case.append({"case": name, "n": len(x), "seconds": secs})
    members = fam.members()
    for pc in per_case:
        mine = [mm for mm in members if mm.name.startswith(pc["case"] + ":")]
        pc["passed"] = all(mm.passed for mm in mine)
        pc["failed_tests"] = [mm.name.split(":", 1)[1] for mm in mine if not mm.passed]
        by = {mm.name.split(":", 1)[1]: mm.result for mm in mine}
        pc["min_detectable_tv"] = _finite(by["pearson"].min_detectable)
        if "tail" in by:
            pc["min_detectable_tail_deficit"] = _deficit(by["tail"])
    passed = all(mm.passed for mm in members)
    generic = per_case[0]
    tails = [pc["min_detectable_tail_deficit"] for pc in per_case if pc.get("min_detectable_tail_deficit") is not None]
    row.update(
        passed=passed,
        draws=int(sum(pc["n"] for pc in per_case)),
        smallest_tv=generic["min_detectable_tv"],
        smallest_tail_deficit=min(tails) if tails else None,
        cases=per_case,
        failures=_diagnose(members, cases),
        mechanism=None if passed else _mechanism(s),
        seconds=time.perf_counter() - t0,
        warmup_seconds=warmup,
        tests=len(members),
    )
    return row


def _finite(x: float) -> float | None:
    """``x`` as a float, ``None`` when it is not finite (JSON has no infinity)."""
    return float(x) if math.isfinite(x) else None


def _mechanism(s: AuditSampler) -> str:
    """The documented mechanism for the device this sampler ran on."""
    dev = _torch_device().type if s.origin is _torch_origin else "any"
    return s.mechanism.get(dev) or s.mechanism.get("any") or "not established"


def _deficit(r: TailResult) -> float | None:
    """Smallest relative tail *deficit* the two-sided tail test detects (its 'less' side); ``None``: none is."""
    down, _ = detectable_shifts(r.n, r.tail_mass, r.alpha, r.power, "two-sided")
    return float(down / r.tail_mass) if math.isfinite(down) else None


def run_audit(alpha: float = 1e-3, budget_s: float | None = None, seed: int = 20261129, *,
              samplers: list[str] | None = None, progress: bool = False) -> list[dict[str, Any]]:  # fmt: skip
    """Audit the samplers of :data:`SAMPLERS` that can run here.

    Parameters
    ----------
    alpha : float
        Family-wise false-alarm rate of each sampler's family (all its cases and tests, Holm).
    budget_s : float, optional
        Seconds for the whole audit (default :data:`DEFAULT_BUDGET_S`), split equally over the
        available samplers; each sampler's first calls (compilation, device start) are not charged, and each gets
        at least :data:`MIN_SHARE` of an equal part (so the audit may overrun by that much).
    seed : int
        Base seed of the draws.
    samplers : list of str, optional
        Names to audit (default: all).
    progress : bool
        Print one line per sampler as it finishes.

    Returns
    -------
    list of dict
        One JSON-ready row per sampler: ``sampler``, ``call``, ``available`` (and ``skipped`` with the
        reason when not), ``origin``, ``passed``, ``draws``, ``smallest_tv`` (Pearson, generic case),
        ``smallest_tail_deficit`` (relative; ``None`` when no tail case had draws enough to detect even a
        fully starved tail), ``cases`` (per case: ``n``, ``passed``, ``failed_tests``,
        ``min_detectable_tv``, ``min_detectable_tail_deficit``), ``failures`` (diagnosis lines) and
        ``mechanism`` (for a failure).
    """
    chosen = [s for s in SAMPLERS if samplers is None or s.name in samplers]
    budget = DEFAULT_BUDGET_S if budget_s is None else float(budget_s)
    t0 = time.perf_counter()
    rows: dict[str, dict[str, Any]] = {}
    # Cheap samplers first; each live sampler gets an equal part of the time still left, and never less than half
    # of an equal part of the whole budget (the samplers' uncharged first calls and draw floors overspend: without
    # the floor the last sampler -- the speculative one -- was left the minimum of draws).
    order = sorted(range(len(chosen)), key=lambda k: chosen[k].per_draw_vector)
    live_left = sum(chosen[k].available() is None for k in order)
    floor = MIN_SHARE * budget / max(1, live_left)
    for k in order:
        s = chosen[k]
        share = max(floor, max(0.0, budget - (time.perf_counter() - t0)) / max(1, live_left))
        row = _audit_one(s, alpha=alpha, budget=share, seed=seed + 100_000 * k)
        live_left -= bool(row["available"])
        rows[s.name] = row
        if progress:
            print(format_audit([row]).splitlines()[-1], flush=True)
    return [rows[s.name] for s in chosen]


def format_audit(rows: list[dict[str, Any]]) -> str:
    """Text table of :func:`run_audit` rows."""
    head = f"{'sampler':22} {'verdict':8} {'draws':>10} {'TV tested to':>12} {'tail deficit':>12}  origin / failure"
    out = [head, "-" * len(head)]
    for r in rows:
        if not r.get("available"):
            out.append(f"{r['sampler']:22} {'skipped':8} {'':>10} {'':>12} {'':>12}  {r['skipped']}")
            continue
        tail = r["smallest_tail_deficit"]
        tail_s = "untested" if tail is None else f"{tail:.3g}"
        note = r["origin"] if r["passed"] else (r["failures"][0] if r["failures"] else "")
        out.append(f"{r['sampler']:22} {'pass' if r['passed'] else 'FAIL':8} {r['draws']:>10,} "
                   f"{r['smallest_tv']:>12.3g} {tail_s:>12}  {note}")  # fmt: skip
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m verification.runners.audit", description=__doc__.split("\n\n")[0])
    ap.add_argument("--alpha", type=float, default=1e-3)
    ap.add_argument("--budget", type=float, default=None, help=f"seconds in all (default {DEFAULT_BUDGET_S:g})")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--samplers", default=None, help="comma-separated sampler names")
    ap.add_argument("--json", default=None, help="write the rows as JSON here")
    ap.add_argument("--markdown", default=None, help="write markdown tables of the rows here")
    args = ap.parse_args(argv)
    names = args.samplers.split(",") if args.samplers else None
    rows = run_audit(args.alpha, args.budget, args.seed, samplers=names, progress=True)
    print(format_audit(rows))
    for r in rows:
        for line in r.get("failures", []):
            print(f"  {r['sampler']}: {line}")
    if args.json:
        import json

        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1, default=float)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(audit_tables(rows)) + "\n")
    return 0


def speculative_tests(case: SpecCase) -> int:
    """Tests :func:`check_speculative` adds to a family: the suite on the first token, and the count."""
    return len(suite_names(case.first)) + 1


def check_speculative(x: np.ndarray, case: SpecCase, family: Family, prefix: str) -> None:
    """Add the suite on the first emitted token and Pearson on the number emitted to ``family``."""
    run_suite(x[:, 0], case.first, family=family, prefix=prefix)
    emitted = (x != PLACEHOLDER_TOKEN_ID).sum(axis=1) - 1  # 0 .. K: index into num_emitted
    family.add(prefix + "emitted", goodness_of_fit(emitted, case.law.num_emitted, alpha=family.test_alpha))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
