"""The main job's engine: run every variant on every case, test, correct for multiplicity, report.

For each (variant, case) it draws ``n`` samples (sized to the variant's CPU budget or to a GPU time
budget), runs the applicable tests -- Pearson chi-square with pooling, the G-test, the DKWM CDF
envelope, the two-sided tail-mass test on many-tail cases, the Gumbel-max KS test where a variant exposes
its perturbed maxima, the tie-bias test on flat cases -- and puts all
p-values of the run into one family with Holm's step-down correction at the declared family-wise
``alpha``: a run on correct samplers fails with probability at most ``alpha`` in total.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .cases import Case
from .stats.cdf import dkwm_cdf_test
from .stats.gof import g_test, goodness_of_fit
from .stats.gumbel import gumbel_max_test
from .stats.tails import tail_mass_test
from .stats.ties import tie_bias_test
from .variants import Variant


def holm_adjust(pvalues: np.ndarray) -> np.ndarray:
    """Holm step-down adjusted p-values: reject test i at family-wise alpha iff adjusted_i <= alpha.

    Holm (1979), "A simple sequentially rejective multiple test procedure", Scand. J. Statist. 6(2).
    """
    p = np.asarray(pvalues, dtype=np.float64)
    m = p.size
    order = np.argsort(p)
    adj = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adj[i] = running
    return adj


@dataclass
class Row:
    variant: str
    layer: str
    case: str
    test: str
    n: int
    statistic: float
    pvalue: float
    tested_mass: float
    min_detectable: float
    deviation: str
    seconds: float
    adjusted_pvalue: float = 1.0
    passed: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def _tests_for(case: Case, samples: np.ndarray, alpha_each: float, maxima: np.ndarray | None = None):
    probs = case.probs
    out = [goodness_of_fit(samples, probs, alpha=alpha_each), g_test(samples, probs, alpha=alpha_each)]
    out.append(dkwm_cdf_test(samples, probs, alpha=alpha_each))
    if case.tail_gap is not None:
        # Two-sided: a starved tail (capped noise) and a flooded one (+inf noise from U = 1) both fail.
        out.append(tail_mass_test(samples, probs, case.tail_mask(), alternative="two-sided", alpha=alpha_each))
    if case.flat:
        out.append(tie_bias_test(samples, case.num_categories, alpha=alpha_each))
    if maxima is not None:
        out.append(gumbel_max_test(maxima, case.logits, temperature=case.temperature, alpha=alpha_each))
    return out


def sample_size(variant: Variant, case: Case, budget_s: float | None, pilot_s_per_sample: float | None) -> int:
    """Samples for one (variant, case): the variant's CPU budget in n*V units, or a share of a time budget."""
    n = max(2_000, min(variant.cpu_max_n, variant.cpu_elements // case.num_categories))
    if budget_s is not None and pilot_s_per_sample:
        # 5e7 draws (400 MB of int64) per run at most: memory, not time, is then the limit.
        n = int(min(50_000_000, max(2_000, budget_s / pilot_s_per_sample)))
    return n


def run_battery(
    variants: list[Variant],
    cases: list[Case],
    *,
    alpha: float = 1e-3,
    budget_s: float | None = None,
    seed: int = 20261129,
    progress: bool = True,
) -> list[Row]:
    """Run every variant on every case; returns one Row per test with Holm-adjusted verdicts."""
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        tqdm = None
    pairs = [(v, c) for v in variants for c in cases if c.num_categories <= v.max_vocab]
    it = tqdm(pairs, desc="verify", unit="run") if (progress and tqdm) else pairs
    rows: list[Row] = []
    share = None if budget_s is None else budget_s / max(1, len(pairs))
    # The detectable deviations are stated at Holm's first-step level alpha / m (Bonferroni), the
    # most conservative level any test of the family is held to; m is estimated before the run.
    alpha_each = alpha / max(1, int(3.5 * len(pairs)))
    for k, (variant, case) in enumerate(it):
        if tqdm and progress:
            it.set_postfix_str(f"{variant.name} / {case.name}")
        run_seed = seed + 1000 * k
        pilot = None
        if share is not None:
            try:  # the first call compiles kernels for this shape: warm up, then time a second pilot
                variant.sample(case, 2_000, run_seed + 999_999)
                t0 = time.perf_counter()
                variant.sample(case, 2_000, run_seed + 999_998)
            except NotImplementedError:
                continue
            pilot = (time.perf_counter() - t0) / 2_000
        n = sample_size(variant, case, share, pilot)
        t0 = time.perf_counter()
        try:
            samples = variant.sample(case, n, run_seed)
        except NotImplementedError:
            continue
        maxima = None
        if variant.maxima is not None and case.temperature > 0:
            maxima = variant.maxima(case, n, run_seed + 500)
        secs = time.perf_counter() - t0
        for r in _tests_for(case, samples, alpha_each, maxima):
            rows.append(
                Row(
                    variant=variant.name,
                    layer=variant.layer,
                    case=case.name,
                    test=r.test,
                    n=int(r.n),
                    statistic=float(r.statistic),
                    pvalue=float(r.pvalue),
                    tested_mass=float(getattr(r, "tested_mass", 1.0)),
                    min_detectable=float(r.min_detectable),
                    deviation=r.deviation,
                    seconds=secs,
                    extra={"counts": np.bincount(samples, minlength=case.num_categories)},
                )
            )
    adj = holm_adjust(np.array([r.pvalue for r in rows])) if rows else np.array([])
    for r, a in zip(rows, adj):
        r.adjusted_pvalue = float(a)
        r.passed = bool(a > alpha)
    return rows


def format_table(rows: list[Row]) -> str:
    head = (
        f"{'variant':22} {'case':20} {'test':22} {'n':>9} {'statistic':>11} {'p-value':>10} "
        f"{'Holm p':>9} {'tested':>7} {'detects':>9}  verdict"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.variant:22} {r.case:20} {r.test[:22]:22} {r.n:>9d} {r.statistic:>11.4g} {r.pvalue:>10.3g} "
            f"{r.adjusted_pvalue:>9.3g} {r.tested_mass:>7.4f} {r.min_detectable:>9.3g}  "
            f"{'pass' if r.passed else 'FAIL'}"
        )
    return "\n".join(lines)


def write_report(rows: list[Row], cases: list[Case], out: Path, *, alpha: float, meta: dict[str, Any]) -> None:
    """JSON report and PNG plots (observed vs expected per case, with the pooled tail; p-value QQ)."""
    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "family_alpha": alpha,
        "correction": "Holm step-down over every test of the run",
        "passed": all(r.passed for r in rows),
        **meta,
        "rows": [{k: v for k, v in r.__dict__.items() if k != "extra"} for r in rows],
    }
    (out / "report.json").write_text(json.dumps(doc, indent=2))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover
        return
    plots = out / "plots"
    plots.mkdir(exist_ok=True)
    by_case: dict[str, dict[str, np.ndarray]] = {}
    for r in rows:
        by_case.setdefault(r.case, {})[r.variant] = (r.extra["counts"], r.n)
    for case in cases:
        if case.name not in by_case:
            continue
        p = case.probs
        order = np.argsort(-p, kind="stable")
        head = min(50, len(p))
        ranks = np.arange(len(p))
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
        # Tail mass beyond each rank: the pooled tail, never hidden by sparse per-token counts.
        exp_tail = np.clip(1.0 - np.cumsum(p[order]), 0.0, None)
        for variant, (counts, n) in by_case[case.name].items():
            freq = counts[order] / max(n, 1)
            ax1.plot(ranks[:head], freq[:head], ".", ms=4, alpha=0.7, label=variant)
            ax2.step(ranks, np.clip(1.0 - np.cumsum(freq), 1e-12, None), where="post", lw=1, alpha=0.7, label=variant)
        ax1.plot(ranks[:head], p[order][:head], "k-", lw=1, label="exact softmax")
        ax2.step(ranks, np.clip(exp_tail, 1e-12, None), "k-", where="post", lw=1.5, label="exact softmax")
        ax1.set_yscale("log")
        ax1.set_xlabel("token rank by exact probability (head)")
        ax1.set_ylabel("frequency")
        ax2.set_yscale("log")
        ax2.set_xlabel("token rank by exact probability")
        ax2.set_ylabel("mass beyond rank (tail)")
        ax1.set_title(f"{case.name}: head")
        ax2.set_title("tail mass, observed vs exact")
        ax2.legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(plots / f"case-{case.name}.png", dpi=110)
        plt.close(fig)
    pv = np.sort(np.array([r.pvalue for r in rows]))
    if pv.size:
        fig, ax = plt.subplots(figsize=(4.5, 4.5))
        exp = (np.arange(1, pv.size + 1) - 0.5) / pv.size
        ax.loglog(exp, np.maximum(pv, 1e-300), ".", ms=3)
        ax.loglog([exp[0], 1], [exp[0], 1], "k--", lw=1)
        ax.set_xlabel("uniform quantile")
        ax.set_ylabel("observed p-value")
        ax.set_title("p-value QQ plot (all tests)")
        fig.tight_layout()
        fig.savefig(plots / "pvalue-qq.png", dpi=110)
        plt.close(fig)
