"""Running the mutant catalogue: plan each mutant's n from its law, draw, and run the suite.

:func:`plan` turns a mutant's exact law (:mod:`verification.battery.mutants.laws`, or an estimate from draws
where no closed form exists) into the draws each suite test needs
(:func:`verification.planning.detection.plan_detection`);
:func:`check_mutant` draws that many and runs the suite (:func:`verification.runners.suite.run_suite`) on them;
:func:`run_mutants` is the main job's ``--mutants`` section (every mutant flagged, every control passed);
:func:`generate_docs` confirms each planned ``n`` on fresh seeds and renders ``docs/mutants.md``
(``python -m verification.runners.mutants --out docs/mutants.md``).
"""

from __future__ import annotations

import argparse
import math
import time
from functools import lru_cache
from typing import Any

import numpy as np

from flashsampling.reference import sample_inverse_cdf

from ..battery.cases import Case
from ..battery.mutants.catalogue import CONTROLS, MUTANTS, Mutant, mutant, mutant_cases
from ..battery.mutants.laws import exact
from ..battery.mutants.samplers import Sampler
from ..outputs.markdown import mutants_page
from ..planning.budget import Budget
from ..planning.detection import Detection, plan_detection
from ..planning.suite import TEST_TITLES
from .suite import run_suite

#: The exact sampler that shadows mutant ``m`` in the tests uses seed ``m.seed + EXACT_SEED_OFFSET``.
EXACT_SEED_OFFSET = 1000


def exact_sampler(case: Case | str) -> Sampler:
    """The exact sampler of ``case`` (a case or its name in :func:`mutant_cases`): float64 inverse CDF of
    ``case.probs``, its target law (the softmax, a truncation or the speculative step's ``p``); it ignores
    the logits it is called with."""
    c = mutant_cases()[case] if isinstance(case, str) else case
    probs = c.probs

    def sample(logits, temperature: float, n: int, seed: int) -> np.ndarray:
        return sample_inverse_cdf(probs, n, np.random.default_rng(seed))

    return sample


def law_of(m: Mutant) -> np.ndarray:
    """The mutant's law on its case (closed form, or simulated with a fixed seed)."""
    case = m.the_case
    if m.law is not None:
        try:
            return m.law(case)
        except NotImplementedError:
            pass
    x = m.sample(case.logits, case.temperature, m.law_draws, 10_000 + m.seed)
    return np.bincount(x, minlength=case.num_categories) / x.size


def joint_of(m: Mutant) -> np.ndarray | None:
    """Joint law of a pair (draws ``2j``, ``2j + 1``) for paired mutants (closed form, or simulated)."""
    if not m.paired:
        return None
    case = m.the_case
    if m.joint is not None:
        return m.joint(case)
    x = m.sample(case.logits, case.temperature, m.law_draws, 20_000 + m.seed)
    v = case.num_categories
    j = np.bincount(x[0::2][: x.size // 2] * v + x[1::2][: x.size // 2], minlength=v * v).reshape(v, v)
    return j / j.sum()


@lru_cache(maxsize=256)
def plan(name: str, alpha: float = 1e-3, power: float = 0.99) -> Detection:
    """The planned detection of mutant ``name`` by the suite on its case (cached)."""
    m = mutant(name)
    return plan_detection(m.the_case, law_of(m), alpha=alpha, power=power, paired=m.paired, joint=joint_of(m))


def planned_n(name: str, alpha: float = 1e-3, power: float = 0.99) -> int:
    """Smallest number of draws at which the suite flags mutant ``name`` with probability ``>= power``."""
    n = plan(name, alpha, power).n_min
    if not math.isfinite(n):
        raise ValueError(f"mutant {name!r} is not detectable by the suite on its case")
    return int(n)


def check_mutant(m: Mutant, n: int, seed: int, *, alpha: float = 1e-3) -> dict[str, Any]:
    """Draw ``n`` samples of ``m`` on its case and run the suite; one JSON-ready row."""
    case = m.the_case
    t0 = time.perf_counter()
    x = m.sample(case.logits, case.temperature, n, seed)
    t_draw = time.perf_counter() - t0
    fam = run_suite(x, case, alpha=alpha, paired=m.paired)
    members = fam.members()
    failed = [mm.name for mm in members if not mm.passed]
    worst = min(members, key=lambda mm: mm.adjusted_pvalue)
    return {
        "mutant": m.name,
        "control": m.control,
        "case": case.name,
        "n": int(n),
        "seed": int(seed),
        "flagged": not fam.passed,
        "failed_tests": failed,
        "smallest_holm_p": float(worst.adjusted_pvalue),
        "smallest_holm_p_test": worst.name,
        "draw_seconds": t_draw,
        "seconds": time.perf_counter() - t0,
    }


def catalogue_table(alpha: float = 1e-3, power: float = 0.99) -> list[dict[str, Any]]:
    """One JSON-ready row per mutant: mechanism, case, the catching test and the planned ``n``.

    ``n`` is the smallest number of draws at which the suite (Holm at family-wise ``alpha`` over the
    case's ``m`` tests) flags the mutant with probability ``>= power``, from the planning twins applied
    to the mutant's exact law (:func:`verification.planning.detection.plan_detection`).
    """
    rows = []
    for m in MUTANTS:
        d = plan(m.name, alpha, power)
        best = d.best
        rows.append(
            {
                "mutant": m.name,
                "mechanism": m.mechanism,
                "case": m.case,
                "case_description": m.the_case.description,
                "catching_test": TEST_TITLES[best],
                "n": int(d.n_min) if math.isfinite(d.n_min) else None,
                "deviation": d.deviation[best],
                "per_test_n": {TEST_TITLES[k]: (int(v) if math.isfinite(v) else None) for k, v in d.n.items()},
                "law": m.law_note,
                "alpha": alpha,
                "power": power,
                "tests_in_family": d.m,
            }
        )
    return rows


def run_mutants(alpha: float = 1e-3, budget_s: float | None = None, seed: int = 20261129) -> list[dict[str, Any]]:
    """The main job's ``--mutants`` section: every mutant at its planned ``n`` must be flagged, and the
    exact sampler on each mutant case (plus the run-machinery controls) must pass at the largest ``n``
    planned on that case.

    Parameters
    ----------
    alpha : float
        Family-wise false-alarm rate of each case's suite (the planned ``n`` depends on it).
    budget_s : float, optional
        Stop starting new runs once this many seconds of drawing and testing have passed (rows after
        that are marked ``skipped``); the planning before the first draw (about 10 s on two CPU cores,
        once per process) is not counted.  About 20 s covers every run on two CPU cores.  A mutant row with ``ok`` false
        (escaped) or a control row with ``ok`` false (false alarm, probability <= ``alpha`` per control)
        should fail the job.
    seed : int
        Base seed; row ``k`` uses ``seed + k``.

    Returns
    -------
    list of dict
        JSON-ready rows: ``mutant``, ``control``, ``case``, ``catching_test``, ``n``, ``flagged``,
        ``ok`` (flagged for a mutant, not flagged for a control), ``failed_tests``, ``seconds``.
    """
    rows = []
    n_by_case: dict[str, int] = {}
    paired_cases = set()
    for m in MUTANTS:
        n_by_case[m.case] = max(n_by_case.get(m.case, 0), planned_n(m.name, alpha))
        if m.paired:
            paired_cases.add(m.case)
    t0 = time.perf_counter()  # the budget counts from the first draw: planning is needed whatever it is
    entries: list[tuple[Mutant, bool]] = [(m, True) for m in MUTANTS]
    # Controls: the exact inverse CDF on every mutant case, then the run-machinery controls, each at
    # the largest n planned on its case.
    for k, case in enumerate(n_by_case):
        ctl = Mutant(f"exact-inverse-cdf@{case}", "float64 inverse CDF of the case's target law", exact_sampler(case),
                     case, exact, 700 + k, paired=case in paired_cases, control=True)  # fmt: skip
        entries.append((ctl, False))
    entries += [(c, False) for c in CONTROLS if c.name != "exact-inverse-cdf"]
    for k, (m, is_mutant) in enumerate(entries):
        if budget_s is not None and time.perf_counter() - t0 > budget_s:
            rows.append({"mutant": m.name, "control": m.control, "case": m.case, "skipped": True, "ok": None})
            continue
        if is_mutant:
            d = plan(m.name, alpha)
            n, test = int(d.n_min), TEST_TITLES[d.best]
        else:
            n, test = n_by_case[m.case], "-"
        row = check_mutant(m, n, seed + k, alpha=alpha)
        row["catching_test"] = test
        row["ok"] = (not row["flagged"]) if m.control else row["flagged"]
        row["skipped"] = False
        rows.append(row)
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    """Text table of :func:`run_mutants` rows."""
    w = max([6] + [len(r["mutant"]) for r in rows])
    head = f"{'mutant':{w}} {'case':19} {'n':>8} {'catching test':28} {'flagged':>7}  verdict"
    out = [head, "-" * len(head)]
    for r in rows:
        if r.get("skipped"):
            out.append(f"{r['mutant']:{w}} {r['case']:19} {'':>8} {'':28} {'':>7}  skipped (budget)")
            continue
        verdict = "ok" if r["ok"] else ("CONTROL FAILED" if r["control"] else "ESCAPED")
        out.append(
            f"{r['mutant']:{w}} {r['case']:19} {r['n']:>8d} {r['catching_test'][:28]:28} "
            f"{str(r['flagged']):>7}  {verdict}"
        )
    return "\n".join(out)


def budgets(alpha: float = 1e-3) -> list[Budget]:
    """Seeds, sizes and levels of ``tests/test_mutants.py`` as :class:`verification.planning.budget.Budget` entries.

    One ``planted`` entry per mutant (caught at its planned ``n`` with power 0.99) and one ``null`` entry
    per mutant for the exact sampler run through the same suite at the same ``n`` (family-wise level
    ``alpha`` each), ready to be listed in :mod:`verification.planning.budget`.
    """
    out = []
    for m in MUTANTS:
        n = planned_n(m.name, alpha)
        out.append(Budget(f"mutants.{m.name}", seed=m.seed, n=n, alpha=alpha, kind="planted"))
        out.append(Budget(f"mutants.{m.name}.exact", seed=m.seed + EXACT_SEED_OFFSET, n=n, alpha=alpha))
    return out


def confirm(name: str, n: int, seeds: list[int], *, alpha: float = 1e-3) -> int:
    """How many of ``seeds`` make the suite flag mutant ``name`` at ``n`` draws."""
    m = mutant(name)
    return sum(check_mutant(m, n, s, alpha=alpha)["flagged"] for s in seeds)


def generate_docs(*, alpha: float = 1e-3, power: float = 0.99, reps: int = 10) -> str:
    """Plan, confirm on ``reps`` seeds, and render ``docs/mutants.md``."""
    t0 = time.perf_counter()
    rows = catalogue_table(alpha, power)
    for k, r in enumerate(rows):
        seeds = [1_000_000 + 1000 * k + i for i in range(reps)]
        r["confirmed"] = confirm(r["mutant"], r["n"], seeds, alpha=alpha)
        r["quarter"] = confirm(r["mutant"], max(2, r["n"] // 4), seeds, alpha=alpha)
        print(f"{r['mutant']:26} n={r['n']:>9,} {r['catching_test']:30} confirmed {r['confirmed']}/{reps} "
              f"quarter {r['quarter']}/{reps}", flush=True)  # fmt: skip
    n_by_case: dict[str, int] = {}
    for r in rows:
        n_by_case[r["case"]] = max(n_by_case.get(r["case"], 0), r["n"])
    controls = []
    for c in CONTROLS:
        n = n_by_case[c.case]
        res = check_mutant(c, n, 2_000_000 + c.seed, alpha=alpha)
        controls.append({"mutant": c.name, "mechanism": c.mechanism, "case": c.case, "n": n,
                         "passed": "yes" if not res["flagged"] else "NO"})  # fmt: skip
    return mutants_page(alpha, power, reps, time.perf_counter() - t0, rows, controls, list(TEST_TITLES.values()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m verification.runners.mutants",
        description="Run the mutant catalogue, or regenerate docs/mutants.md.",
    )
    ap.add_argument("--out", default=None, help="write the markdown table here (default: print the run table)")
    ap.add_argument("--alpha", type=float, default=1e-3)
    ap.add_argument("--reps", type=int, default=10, help="seeds per confirmation")
    args = ap.parse_args(argv)
    if args.out:
        text = generate_docs(alpha=args.alpha, reps=args.reps)
        with open(args.out, "w") as f:
            f.write(text)
        return 0
    rows = run_mutants(alpha=args.alpha)
    print(format_table(rows))
    return 0 if all(r["ok"] for r in rows if not r.get("skipped")) else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
