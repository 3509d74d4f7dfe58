"""Every markdown page the suite writes, from JSON-ready data.

* :func:`report_page` - the main job's ``report.md`` (from the same document as ``report.json``);
* :func:`check_page` - ``check``'s ``report.md`` (``SamplerReport.to_markdown``, from ``SamplerReport.as_dict``);
* :func:`mutants_page` - ``docs/mutants.md`` (``python -m verification.runners.mutants --out docs/mutants.md``);
* :func:`calibration_page` - ``docs/calibration.md`` (``python -m verification.runners.calibration --out ...``);
* :func:`audit_tables` - the audit's tables (``python -m verification.runners.audit --markdown ...``).

The writers only format: the numbers come from the modules that compute them, so a page and the
JSON next to it never disagree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "audit_tables",
    "calibration_page",
    "certificate_lines",
    "check_page",
    "detects",
    "diagnosis_lines",
    "mutants_page",
    "report_page",
    "table",
    "timing_line",
]


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: str | None = None) -> list[str]:
    """A markdown table as lines; ``align`` has one letter per column, ``l`` (default) or ``r``."""
    align = align or "l" * len(header)
    rule = "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"
    return ["| " + " | ".join(header) + " |", rule] + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]


def _g(x: float | None, digits: int = 3) -> str:
    """A number with ``digits`` significant digits; ``-`` for None."""
    if x is None:
        return "-"
    return f"{x:.{digits}g}"


def detects(min_detectable: float | None, deviation: str) -> str:
    """What a test detects with its stated power: ``"<deviation> >= <value>"``, or that it detects nothing
    (``min_detectable`` infinite or None: too few draws for any deviation of that kind)."""
    if min_detectable is None or not math.isfinite(min_detectable):
        return f"no {deviation} at this n"
    return f"{deviation} >= {min_detectable:.3g}"


# --------------------------------------------------------------------------------------------
# The main job's report.md
# --------------------------------------------------------------------------------------------


def _verdict(passed: bool | None) -> str:
    return "pass" if passed else ("**FAIL**" if passed is not None else "-")


def _test_rows(tests: list[dict[str, Any]], *, with_case: bool) -> list[list[Any]]:
    rows = []
    for t in tests:
        row = [f"`{t['variant']}`"] + ([f"`{t['case']}`"] if with_case else [])
        row += [
            t["title"],
            f"{t['n']:,}",
            _g(t["statistic"], 4),
            _g(t["pvalue"]),
            _g(t["adjusted_pvalue"]),
            detects(t["min_detectable"], t["deviation"]),
            _verdict(t["passed"]),
        ]
        rows.append(row)
    return rows


_TEST_HEADER = ["test", "n", "statistic", "p-value", "Holm p", "detects (power {power:g})", "verdict"]


def report_page(doc: dict[str, Any]) -> str:
    """``report.md`` of the main job from its ``report.json`` document (see :mod:`verification.runners.battery_report`).

    Verdict first; then the failed tests; one section per case with its plot and the table of every
    test of every variant on it (statistic, p-value, Holm-adjusted p-value, n, and the deviation the test
    detects at that n with the stated power, at its level ``alpha / m``); the runs; the p-value plot;
    the mutants and audit sections when they ran; the versions.
    """
    fam = doc["family"]
    tests = doc["tests"]
    failed = [t for t in tests if not t["passed"]]
    verdict = "PASSED" if doc["passed"] else "FAILED"
    header = [h.format(power=fam["power"]) for h in _TEST_HEADER]
    out = [
        f"# flashsampling verification: {verdict}",
        "",
        f"**{len(tests) - len(failed)} of {len(tests)} tests pass** under Holm's step-down correction over every "
        f"test of the run, at family-wise alpha = {fam['alpha']:g}: an exact sampler fails any of them with "
        f"probability at most {fam['alpha']:g}. Each test ran at level alpha/m = {fam['test_alpha']:.3g} "
        f"(m = {fam['size']} declared before the first test), which is where its detectable deviation is stated "
        f"(power {fam['power']:g}).",
        "",
        f"- command: `{doc['command']}`",
        f"- started {doc['started']}, {doc['seconds']:.0f} s"
        + (f" (budget {doc['args']['budget']:g} s)" if doc.get("args", {}).get("budget") else ""),
        f"- kernels: {doc['mode']}; {len(doc['variants'])} variants x {len(doc['cases'])} cases, "
        f"{sum(1 for r in doc['runs'] if not r['skipped'])} runs",
    ]
    if doc.get("mutants") is not None or doc.get("audit") is not None:
        extra = []
        if doc.get("mutants") is not None:
            escaped = [m for m in doc["mutants"] if m.get("ok") is False]
            extra.append(f"mutants: {len(escaped)} not as required" if escaped else "mutants: all as required")
        if doc.get("audit") is not None:
            extra.append(f"audit: {sum(1 for a in doc['audit'] if a.get('passed') is False)} samplers failed")
        out.append("- " + "; ".join(extra) + " (sections below; they do not enter the family)")
    if failed:
        out += ["", "## Failed tests", ""]
        out += table(["variant", "case"] + header, _test_rows(failed, with_case=True), "lllrrrrll")
    by_case: dict[str, list[dict[str, Any]]] = {}
    for t in tests:
        by_case.setdefault(t["case"], []).append(t)
    for case in doc["cases"]:
        if case["name"] not in by_case:
            continue
        out += ["", f"## `{case['name']}`: {case['description']}", ""]
        if case.get("plot"):
            out += [f"![{case['name']}]({case['plot']})", ""]
        out += table(["variant"] + header, _test_rows(by_case[case["name"]], with_case=False), "llrrrrll")
    out += ["", "## Runs", "", "Draws per (variant, case) and the seconds they took to draw and test.", ""]
    out += table(
        ["variant", "layer", "case", "draws", "maxima", "seconds", "verdict"],
        [
            [
                f"`{r['variant']}`",
                r["layer"],
                f"`{r['case']}`",
                f"{r['n']:,}",
                f"{r['maxima']:,}" if r["maxima"] else "-",
                f"{r['seconds']:.2f}",
                r["skipped"] or _verdict(r["passed"]),
            ]  # fmt: skip
            for r in doc["runs"]
        ],
        "lllrrrl",
    )
    if doc.get("pvalue_plot"):
        out += [
            "",
            "## p-values",
            "",
            "Every test's p-value against the uniform quantiles (an exact sampler's lie on the diagonal or above",
            "it: some tests are conservative).",
            "",
            f"![p-values]({doc['pvalue_plot']})",
        ]
    if doc.get("mutants") is not None:
        out += ["", "## Mutants", "", "Each mutant must be flagged at its planned n; each exact control must pass.", ""]
        out += table(
            ["mutant", "case", "n", "catching test", "flagged", "verdict"],
            [
                [
                    f"`{m['mutant']}`",
                    f"`{m['case']}`",
                    f"{m['n']:,}" if "n" in m else "-",
                    m.get("catching_test", "-"),
                    m.get("flagged", "-"),
                    _mutant_verdict(m),
                ]  # fmt: skip
                for m in doc["mutants"]
            ],
            "llrlll",
        )
    if doc.get("audit") is not None:
        out += ["", "## Audit of samplers written elsewhere", ""] + audit_tables(doc["audit"])
    out += ["", "## Versions", ""]
    out += table(["package", "version"], [[k, v] for k, v in doc["versions"].items()])
    out += ["", "`report.json` holds the same numbers, the arguments and the timestamps.", ""]
    return "\n".join(out)


def _mutant_verdict(m: dict[str, Any]) -> str:
    if m.get("skipped"):
        return "skipped (budget)"
    if m["ok"]:
        return "ok"
    return "**CONTROL FAILED**" if m["control"] else "**ESCAPED**"


# --------------------------------------------------------------------------------------------
# check's report.md (SamplerReport.as_dict())
# --------------------------------------------------------------------------------------------


def _check_row(t: dict[str, Any]) -> list[str]:
    return [
        f"`{t['name']}` {t['title']}",
        f"{t['n']:,}",
        "inf" if t["statistic"] is None else f"{t['statistic']:.4g}",
        f"{t['pvalue']:.3g}",
        f"{t['adjusted_pvalue']:.3g}",
        detects(t["min_detectable"], t["deviation"]),
        "pass" if t["passed"] else "**FAIL**",
    ]


def timing_line(doc: dict[str, Any]) -> str:
    """One line on the measured rate and where a check's time went (``SamplerReport.as_dict()``'s ``timing``)."""
    rate = doc.get("draws_per_s")
    parts = ", ".join(f"{k} {v:.2f}" for k, v in (doc.get("timing") or {}).items())
    head = f"measured {rate:.3g} draws/s (tokens of all rows, in the sampler's calls)" if rate else "measured"
    tail = "; interrupted: the tests read what was drawn" if doc.get("interrupted") else ""
    return f"{head}; seconds: {parts}{tail}"


def check_page(doc: dict[str, Any], *, title: str | None = None, plots: dict[int, str] | None = None) -> str:
    """``report.md`` of a check from ``SamplerReport.as_dict()``: the verdict, the failed tests, every test with
    what it detects at its ``n``, the tests not run and why, the properties; ``plots`` maps a row to an image
    path shown inline."""
    tests = doc["tests"]
    failed = [t for t in tests if not t["passed"]]
    verdict = "PASSED" if doc["passed"] else "FAILED"
    head = ["test", "n", "statistic", "p-value", "Holm p", f"detects (power {doc['power']:g})", "verdict"]
    out = [
        f"# {title or 'check_sampler'}: {verdict}",
        "",
        f"**{len(tests) - len(failed)} of {len(tests)} tests pass** under Holm's step-down "
        f"correction at family-wise alpha = {doc['alpha']:g}: an exact sampler fails any of them with "
        f"probability at most {doc['alpha']:g}. Each test ran at level alpha/m = {doc['level']:.3g}, where its "
        f"detectable deviation is stated (power {doc['power']:g}).",
        "",
        f"- sampler: `{doc['sampler']}`",
        f"- target: `{doc['target']}`; logits {list(doc['shape'])}; temperature {doc['temperature']}",
        f"- {doc['plan']}",
        f"- {doc['n']:,} draws per row for the distribution tests"
        + (f", {doc['stream']:,} per stream for the lag scans" if doc["stream"] else "")
        + f"; {doc['calls']} calls; {doc['seconds']:.1f} s; seed {doc['seed']}",
    ]
    if doc.get("timing"):
        out.append(f"- {timing_line(doc)}")
    out += [f"- {line}" for line in certificate_lines(doc, markdown=True)]
    if failed:
        out += ["", "## Failed tests", ""]
        out += table(head, [_check_row(t) for t in failed], "lrrrrll")
    if doc.get("diagnoses"):
        out += [
            "",
            "## Diagnosis",
            "",
            "The worst tokens of each failing test (standardized residual "
            "(observed - expected) / sqrt(expected (1 - p))) and the likely mechanism: a hint, not a test.",
            "",
        ]
        out += diagnosis_lines(doc, markdown=True)
    out += ["", "## Tests", ""]
    out += table(head, [_check_row(t) for t in tests], "lrrrrll")
    if doc["skipped"]:
        out += ["", "## Not run", ""]
        out += table(["test", "why"], [[f"`{k}`", v] for k, v in doc["skipped"].items()])
    out += ["", "## Properties", "", "Reported, not tested: a sampler may lack them and still be exact.", ""]
    out += table(
        ["property", "holds", "detail"],
        [[p["name"], "-" if p["holds"] is None else ("yes" if p["holds"] else "no"), p["detail"]]
         for p in doc["properties"]],
    )  # fmt: skip
    for row, path in (plots or {}).items():
        out += ["", f"## Row {row}", "", f"![row {row}]({path})"]
    return "\n".join(out) + "\n"


def certificate_lines(doc: dict[str, Any], *, markdown: bool = False) -> list[str]:
    """The certificate of a check (``SamplerReport.as_dict()``) in words: the bound overall and per row, the tail
    mass it rules out, and, for an underpowered run, the draws and seconds the asked-for ``tv`` needs."""
    if doc.get("tv_upper_bound") is None:
        return []
    bold = (lambda x: f"**{x}**") if markdown else (lambda x: x)
    rows = ", ".join(f"{b:.3g}" for b in doc.get("tv_upper_bounds") or [])
    out = [f"{bold('certified')}: total variation <= {doc['tv_upper_bound']:.3g} from the target at confidence "
           f"1 - {doc['alpha']:g}, every row at once (per row: {rows}); {doc.get('certificate', '')}"]  # fmt: skip
    tails = doc.get("tail_bounds") or []
    if tails:
        shown = "; ".join(f"row {t['row']}: {t['tokens']} tokens of target mass {t['target_mass']:.3g}, sampler's "
                          f"mass in [{t['low']:.3g}, {t['high']:.3g}]" for t in tails[:4])  # fmt: skip
        more = f"; ... ({len(tails) - 4} more rows in report.json)" if len(tails) > 4 else ""
        out.append(f"{bold('tail ruled out')} (the pooled least probable tokens, same confidence): {shown}{more}")
    s = doc.get("shortfall")
    if s:
        if s["n_needed"] is None:
            need = "no planned n reaches it"
        else:
            rate = s["seconds_per_draw"]
            need = (f"{s['n_needed']:,} draws per row needed ({s['more_draws']:,} more), about "
                    f"{s['seconds_needed']:.3g} s at this run's {rate:.3g} s per draw of a row")  # fmt: skip
        out.append(f"{bold('underpowered')} for tv = {s['tv']:g}: {s['reason']}; {need}")
    return out


def diagnosis_lines(doc: dict[str, Any], *, markdown: bool = False) -> list[str]:
    """Each failing test's worst tokens and likely mechanism (``SamplerReport.as_dict()['diagnoses']``)."""
    out: list[str] = []
    for d in doc.get("diagnoses") or []:
        if markdown:
            out += [f"### `{d['test']}`", "", f"Likely mechanism: {d['mechanism']}.", ""]
            if d["tokens"]:
                out += table(["token", "observed", "expected", "logit", "probability", "residual"],
                             [[t["token"], f"{t['observed']:,}", f"{t['expected']:.4g}", _g(t["logit"], 6),
                               f"{t['probability']:.4g}", _g(t["residual"], 3) if t["residual"] is not None else "inf"]
                              for t in d["tokens"]], "rrrrrr")  # fmt: skip
                out.append("")
        else:
            out.append(f"  diagnosis {d['test']}: {d['mechanism']}")
            for t in d["tokens"]:
                r = "inf" if t["residual"] is None else f"{t['residual']:+.3g}"
                out.append(f"    token {t['token']}: observed {t['observed']}, expected {t['expected']:.4g}, logit "
                           f"{_g(t['logit'], 6)}, p {t['probability']:.4g}, residual {r}")  # fmt: skip
    return out


# --------------------------------------------------------------------------------------------
# docs/mutants.md
# --------------------------------------------------------------------------------------------


def mutants_page(alpha: float, power: float, reps: int, seconds: float, rows: list[dict[str, Any]],
                 controls: list[dict[str, Any]], titles: Sequence[str]) -> str:  # fmt: skip
    """``docs/mutants.md`` from the catalogue rows (``verification.runners.mutants.catalogue_table`` with the
    confirmation counts ``confirmed``, ``quarter``) and the control rows; ``titles`` orders the columns of
    the per-test table (those no mutant has are left out)."""
    lines = [
        "# Mutants: realistic sampler bugs and the draws that catch them",
        "",
        f"Generated by `python -m verification.runners.mutants --out docs/mutants.md` in {seconds:.0f} s. "
        "Do not edit by hand.",
        "",
        "Each mutant is a sampler with one defect modelled on a real failure (`verification/battery/mutants/`), run",
        "on the case where the defect shows. The suite is the family of tests of",
        "`verification/planning/suite.py` on that case, decided by Holm at family-wise",
        f"alpha = {alpha:g} over its m tests. **n** is the smallest number of draws at which the suite flags",
        f"the mutant with probability >= {power}, planned from the mutant's exact law with each test's planning",
        "twin at level alpha/m (Holm rejects whatever Bonferroni rejects, so the family has at least that",
        f"power). **Confirmed** runs the mutant at n on {reps} fresh seeds and counts the runs the suite flags;",
        "**at n/4** does the same with a quarter of the draws, to show that n is near the threshold rather",
        "than far above it.",
        "",
    ]
    lines += table(
        [
            "mutant",
            "mechanism",
            "case",
            "catching test",
            "n",
            "deviation seen by that test",
            "confirmed at n",
            "at n/4",
        ],  # fmt: skip
        [
            [
                f"`{r['mutant']}`",
                r["mechanism"],
                f"`{r['case']}`",
                r["catching_test"],
                f"{r['n']:,}",
                r["deviation"],
                f"{r['confirmed']}/{reps}",
                f"{r['quarter']}/{reps}",
            ]  # fmt: skip
            for r in rows
        ],
        "llllrlrr",
    )
    lines += [
        "",
        "## Every test's n",
        "",
        "Draws each test alone needs (at alpha/m, power 0.99); `-` means the test cannot see the defect.",
        "",
    ]
    names = [t for t in titles if any(t in r["per_test_n"] for r in rows)]
    lines += table(
        ["mutant"] + names,
        [
            [f"`{r['mutant']}`"] + [f"{r['per_test_n'][t]:,}" if r["per_test_n"].get(t) else "-" for t in names]
            for r in rows
        ],  # fmt: skip
        "l" + "r" * len(names),
    )
    lines += ["", "## Cases", ""]
    seen: dict[str, list[Any]] = {}
    for r in rows:
        seen.setdefault(r["case"], [f"`{r['case']}`", r["case_description"], r["tests_in_family"]])
    lines += table(["case", "description", "m tests"], seen.values(), "llr")
    lines += [
        "",
        "## Controls",
        "",
        "Exact samplers run through the same fast machinery as the mutants, at the largest n planned on",
        "their case, must pass the same suite:",
        "",
    ]
    lines += table(
        ["control", "what it checks", "case", "n", "passed"],
        [[f"`{c['mutant']}`", c["mechanism"], f"`{c['case']}`", f"{c['n']:,}", c["passed"]] for c in controls],
        "lllrl",
    )
    lines += ["", "## Laws", "", "How each mutant's law (the input of the planning) was obtained:", ""]
    lines += [f"- `{r['mutant']}`: {r['law']}" for r in rows]
    lines += [
        "",
        "## Notes",
        "",
        "- `row-seed-collision` and `sample-offset-shift` draw from the exact marginal law: only the test of",
        "  paired draws sees them, so the suite must be handed pairs (rows 0 and 1; samples s and s+1).",
        "  The pairs test coarsens a large vocabulary into at most 32 rank classes, yet the shift still",
        "  shows there: measured, `sample-offset-shift` on `flat-V1024` was flagged on 10 of 10 seeds at",
        "  2,000 draws, and on `normal-V1000` on 3 of 10 at 2,000 and 10 of 10 at 8,000 (pairs test alone,",
        "  level 1e-3/6).",
        "- Mutants that starve or flood a far tail (the first three, `float32-running-cdf`) are seen by the",
        "  tail test; the chi-square tests pool those tokens into one bin and need 4-5 times more draws.",
        "- The truncation mutants (`top-p-*`, `top-k-ties-by-index`, `min-p-strict`) run on cases whose law is",
        "  a target of `verification.battery.aims` (transformers' conventions: temperature first, the token that",
        "  crosses p kept, every token tied at the k-th logit kept, min-p with `>=`); their laws are",
        "  `flashsampling.targets.sampling_law` with the one convention changed. A token kept wrongly has",
        "  target probability 0, so one draw of it fails every test (`impossible draw`); a token dropped",
        "  wrongly is seen by the per-category test or the chi-square tests. `min-p-strict` and",
        "  `top-k-ties-by-index` need a token exactly at the threshold, which quantized logits (a 0.25 grid)",
        "  provide; on continuous logits the two conventions give the same law.",
        "- The speculative mutants (`spec-*`) emit the first token of one accept/reject step: draft",
        "  `x ~ q` (half of q on the top token, half on tokens 1-1024), accepted iff `u q(x) < p(x)`, else a",
        "  replacement from the mutant's residual; their laws are `flashsampling.targets.speculative_step_law`",
        "  with that residual, and the target is `p` itself.",
        "",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# docs/calibration.md
# --------------------------------------------------------------------------------------------


def calibration_page(report, command: str, *, check_level: float, target_power: float) -> str:
    """``docs/calibration.md`` from a :class:`verification.runners.calibration.Report`; ``check_level`` is the level of
    each calibration check, ``target_power`` the power every claim is checked against."""
    f = lambda x: f"{x:.3g}"
    out = [
        "# Calibration: measured error rates of the verification tests",
        "",
        f"Generated by `{command}` in {report.seconds:.0f} s "
        f"({'all checks pass' if report.ok else 'SOME CHECKS FAIL'}). Do not edit by hand.",
        "",
        "Each test is run on replicates simulated from an exact sampler (the null) and from planted",
        "biases whose size is exactly the deviation the test claims to detect with power 0.99",
        "(`min_detectable` at that n and alpha). Replicates are multinomial counts, which have exactly",
        f"the law of n iid draws. Every check below is itself a test at level {check_level:g}: a `yes` means the",
        "measured numbers are consistent with the claim.",
        "",
        "## False alarms under the null",
        "",
        "*Exact-size* tests must give uniform p-values (two-sided KS) and false-alarm rates equal to",
        "alpha within binomial noise. *Conservative* tests (DKWM bound, Holm, exact discrete tests)",
        "must give p-values no smaller than uniform (one-sided KS) and rates no larger than alpha.",
        "",
    ]
    out += table(
        ["test", "setting", "kind", "replicates", "KS p", "rate at 0.05", "rate at 0.01", "ok"],
        [
            [
                r.test,
                r.setting,
                "conservative" if r.conservative else "exact-size",
                r.replicates,
                f(r.ks_pvalue),
                f"{r.rate_05:.4f} (p={f(r.rate_05_pvalue)})",
                f"{r.rate_01:.4f} (p={f(r.rate_01_pvalue)})",
                "yes" if r.ok else "NO",
            ]  # fmt: skip
            for r in report.null
        ],
        "lllrrrrl",
    )
    out += [
        "",
        "## Power at the claimed detectable deviation",
        "",
        "Each bias is planted at exactly the claimed `min_detectable` (for the per-category test: a",
        "missing category just above the claimed missing probability, and one category shifted by the",
        "shift `category_min_detectable_shift` claims for it). `ok` tests",
        f"power >= {target_power} by a one-sided binomial test on the misses.",
        "",
    ]
    out += table(
        ["test", "bias", "alpha", "claimed", "planted", "replicates", "power", "ok"],
        [
            [
                r.test,
                r.bias,
                f"{r.alpha:g}",
                f(r.claimed),
                f(r.planted),
                r.replicates,
                f"{r.power:.4f}",
                "yes" if r.ok else "NO",
            ]  # fmt: skip
            for r in report.power
        ],
        "llrrrrrl",
    )
    out += [
        "",
        "## Reading the numbers",
        "",
        "- The chi-square planning (`verification.stats.power`) bounds the noncentrality by",
        "  `4 n tv**2` (Cauchy-Schwarz); the `proportional` bias meets that bound with equality, so its",
        "  power is the honest worst case. The planning aims at half the target miss rate to absorb the",
        "  error of the noncentral chi-square approximation; the other shapes have larger",
        "  noncentrality and power near 1.",
        "- DKWM and KS bound the false-pass rate with the DKWM inequality, so their measured power",
        "  at the claim is close to 1: the claims are safe, not tight.",
        "- The binomial tests (tail mass, ties, per-category) compute their power exactly, so their",
        "  claims are tight: the measured power scatters around 0.99-0.995.",
        "- The exact multinomial claim is the worst exact power over a dense numerical search of the",
        "  TV sphere (`verification.stats.exact`); the planted shapes check it at several points.",
        "- Conservative tests show false-alarm rates below alpha (the DKWM p-value is a bound; Holm",
        "  over 200 categories; discrete binomial and multinomial laws cannot hit alpha exactly).",
        "",
    ]
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# The audit's tables
# --------------------------------------------------------------------------------------------


def audit_tables(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown tables of ``verification.runners.audit.run_audit`` rows: one summary line per sampler, then the
    draws per case (a case that failed is marked ``FAIL``)."""
    summary = []
    for r in rows:
        if not r.get("available"):
            summary.append([f"`{r['sampler']}`", "-", "skipped", "-", "-", "-", r["skipped"]])
            continue
        tail = r["smallest_tail_deficit"]
        detailed = [f for f in r["failures"] if "; " in f] or r["failures"]
        summary.append([
            f"`{r['sampler']}`", r["origin"], "pass" if r["passed"] else "**FAIL**", f"{r['draws']:,}",
            f"{r['smallest_tv']:.3g}", "untested" if tail is None else f"{tail:.3g}",
            " / ".join(detailed[:2]) if detailed else "-",
        ])  # fmt: skip
    out = table(
        [
            "sampler",
            "origin",
            "verdict",
            "draws",
            "TV tested to (its first case)",
            "tail deficit tested to",
            "failure",
        ],  # fmt: skip
        summary,
        "lllrrrl",
    )
    live = [r for r in rows if r.get("available")]
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for r in live:
        groups.setdefault(tuple(c["case"] for c in r["cases"]), []).append(r)
    if groups:
        out += ["", "Draws per case (a case that failed is marked `FAIL`):"]
    for names, members in groups.items():
        out += [""]
        out += table(
            ["sampler"] + [f"`{n}`" for n in names],
            [
                [f"`{r['sampler']}`"] + [f"{c['n']:,}" + ("" if c["passed"] else " FAIL") for c in r["cases"]]
                for r in members
            ],  # fmt: skip
            "l" + "r" * len(names),
        )
    return out
