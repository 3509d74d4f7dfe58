"""What more time buys: planted defects and exact samplers under :func:`verification.check_sampler` at growing budgets.

``python -m verification.runners.budget_table --run --budgets 10,60,600 --skip-caught`` runs every entry of
:data:`ENTRIES` at each budget (``budget_s``, on the machine it runs on) and records, per run, the verdict, the
draws per row, the failing tests and the certified upper bound on the total variation between the sampler's law and
the target (``report.tv_upper_bound``); ``--only`` runs a subset, ``--skip-caught`` skips a defect at a budget once
a smaller budget caught it (a larger budget only adds draws: it is recorded as caught at the smaller one),
``--resume`` the runs the file holds already. ``--write docs/verify-your-sampler.md`` renders the recorded runs
between the page's ``budget-table`` markers; ``tests/verification/test_check_docs.py`` checks that the page is the
render of the recorded file. Samplers: :mod:`verification.battery.examples`; logits: :func:`budget_cases`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..battery import examples
from ..outputs.markdown import table
from .check import check_sampler

__all__ = ["ENTRIES", "Entry", "budget_cases", "main", "render", "run_entry", "verdict"]

BEGIN = "<!-- budget-table:begin (python -m verification.runners.budget_table --write docs/verify-your-sampler.md) -->"
END = "<!-- budget-table:end -->"
#: The recorded runs the page's table is rendered from.
RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "budget_table_cpu.json"
#: The budgets of the table's columns, in seconds.
BUDGETS = (10.0, 60.0, 600.0)
SEED = 20261205


def budget_cases() -> dict[str, np.ndarray]:
    """The logits: ``normal`` (two rows of V = 1000, N(0, 2**2), as the acceptance table's) and ``batch`` (twelve
    rows of V = 1000, N(0, 2**2): rows 9 apart exist)."""
    rng = np.random.default_rng(20261201)
    normal = rng.normal(0, 2, (2, 1000)).astype(np.float32)
    batch = rng.normal(0, 2, (12, 1000)).astype(np.float32)
    return {"normal": normal, "batch": batch}


@dataclass(frozen=True)
class Entry:
    """One row of the table: a sampler on a case, the check's keyword arguments, and what it breaks."""

    label: str
    sampler: Any
    case: str
    kwargs: dict = field(default_factory=dict)
    exact: bool = False
    breaks: str = ""
    rounding: Any = None

    def what_it_breaks(self) -> str:
        """:attr:`breaks`, with the total variation of each row's law from the target where the defect is a
        rounding of the logits (``rounding``: a torch dtype), computed here in float64."""
        if self.rounding is None:
            return self.breaks
        import torch

        z = budget_cases()[self.case].astype(np.float64)
        q = torch.from_numpy(budget_cases()[self.case]).to(getattr(torch, self.rounding)).double().numpy()
        tv = [0.5 * float(np.abs(_softmax(a) - _softmax(b)).sum()) for a, b in zip(z, q)]
        return f"{self.breaks}: TV {' and '.join(f'{t:.2g}' for t in tv)} in the rows"


def _softmax(z: np.ndarray) -> np.ndarray:
    p = np.exp(z - z.max())
    return p / p.sum()


ENTRIES = (
    Entry("numpy `Generator.choice`", examples.numpy_choice, "normal", exact=True, breaks="nothing (exact)"),
    Entry("`torch.distributions.Categorical`", examples.torch_categorical, "normal", exact=True,
          breaks="nothing (exact at V = 1000)"),
    Entry("flashsampling (its NumPy twin, bit for bit the kernel)", examples.flashsampling_twin, "normal", exact=True,
          breaks="nothing (exact to its finite-precision bound, proofs/end_to_end.md)"),
    Entry("float16 logits", examples.float16_logits, "normal", breaks="the law: softmax of fp16-rounded logits",
          rounding="float16"),
    Entry("bfloat16 logits", examples.bfloat16_logits, "normal", breaks="the law: softmax of bf16-rounded logits",
          rounding="bfloat16"),
    Entry("seed mod 2^20", examples.seed_mod_2_20, "normal", breaks="seeds 2^20 apart give equal streams"),
    Entry("seed mod 2^32, `seed_bits=64`", examples.seed_mod_2_32, "normal", {"seed_bits": 64},
          breaks="a 64-bit seed truncated to 32 bits"),
    Entry("antithetic at lag 64", examples.antithetic_lag_64, "normal", breaks="draws j and j + 64 use u and 1 - u"),
    Entry("mirrored halves", examples.mirrored_halves, "normal",
          breaks="the second half of a call is the first read backwards"),
    Entry("rows 9 apart share noise", examples.rows_9_apart_share_noise, "batch",
          breaks="rows b and b + 9 read the same uniforms"),
)  # fmt: skip


def run_entry(entry: Entry, budget_s: float, seed: int = SEED) -> dict[str, Any]:
    """One check of ``entry`` at ``budget_s``: a JSON-ready record of what it found."""
    logits = budget_cases()[entry.case]
    t = time.perf_counter()
    rep = check_sampler(entry.sampler, logits, budget_s=budget_s, seed=seed, **entry.kwargs)
    seconds = time.perf_counter() - t
    failed = sorted(rep.failures(), key=lambda x: x.adjusted_pvalue)
    bound = getattr(rep, "tv_upper_bound", None)
    return {
        "label": entry.label,
        "case": entry.case,
        "budget_s": budget_s,
        "seconds": seconds,
        "n": int(rep.n),
        "passed": bool(rep.passed),
        "tv_upper_bound": None if bound is None else float(bound),
        "failed": [t.name for t in failed],
        "tests": len(rep.tests),
    }


def _cell(run: dict[str, Any] | None, caught_before: float | None) -> str:
    if run is None:
        return f"caught at {caught_before:g} s" if caught_before is not None else "not run"
    bound = run["tv_upper_bound"]
    tv = f"TV ≤ {bound:.2g}" if bound is not None else "no bound"
    mantissa, exponent = f"{run['n']:.1e}".split("e")
    n = f"n = {mantissa}e{int(exponent)}"
    if run["passed"]:
        return f"pass, {tv} ({n})"
    first = ", ".join(f"`{name}`" for name in run["failed"][:2]) + (" …" if len(run["failed"]) > 2 else "")
    return f"**caught**: {first} ({n})"


def verdict(entry: Entry, runs: list[dict[str, Any] | None], budgets: list[float]) -> str:
    """The row's verdict: an exact sampler passes at every budget it ran; a defect is caught from the smallest
    budget that caught it, or not within the largest."""
    ran = [(b, r) for b, r in zip(budgets, runs) if r is not None]
    if not ran:
        return "-"
    if entry.exact:
        false = [b for b, r in ran if not r["passed"]]
        return "passes at every budget" if not false else f"**false alarm** at {', '.join(f'{b:g} s' for b in false)}"
    caught = [b for b, r in ran if not r["passed"]]
    return f"caught from {caught[0]:g} s" if caught else f"**not caught** within {ran[-1][0]:g} s"


def render(doc: dict[str, Any]) -> str:
    """The table between the markers from the recorded runs ``doc`` (``{"machine": ..., "runs": [...]}``)."""
    runs = {(r["label"], float(r["budget_s"])): r for r in doc["runs"]}
    budgets = sorted({b for _, b in runs})
    rows = []
    for e in ENTRIES:
        cells, caught = [], None
        for b in budgets:
            r = runs.get((e.label, b))
            cells.append(_cell(r, caught))
            if r is not None and not r["passed"] and caught is None:
                caught = b
        rows.append(
            [e.label, e.what_it_breaks(), *cells, verdict(e, [runs.get((e.label, b)) for b in budgets], budgets)]
        )
    head = ["sampler", "what it breaks", *[f"budget {b:g} s" for b in budgets], "verdict"]
    body = table(head, rows, "ll" + "l" * len(budgets) + "l")
    intro = (f"Each cell is one `check_sampler(sampler, logits, budget_s=...)` on {doc['machine']} (alpha 0.001, "
             "power 0.99); *TV ≤* is the certified upper bound on the total variation between the sampler's law and "
             "the target at confidence 0.999, over every row; *n* the draws per row. Recorded in "
             "`docs/results/budget_table_cpu.json`.")  # fmt: skip
    return "\n".join([BEGIN, "", intro, "", *body, "", END])


def _load(path: Path) -> dict[str, Any]:
    if path.is_file():
        return json.loads(path.read_text())
    cores = os.cpu_count()
    return {"machine": f"a {cores}-core {platform.machine()} CPU (Python {platform.python_version()})", "runs": []}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m verification.runners.budget_table", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--budgets", default=",".join(f"{b:g}" for b in BUDGETS), help="comma-separated seconds")
    ap.add_argument("--only", default="", help="comma-separated substrings of the entries' labels to run")
    ap.add_argument("--json", type=Path, default=RESULTS, help="the recorded runs, updated in place")
    ap.add_argument("--skip-caught", action="store_true", help="skip a defect at a budget once a smaller one caught it")
    ap.add_argument("--run", action="store_true", help="run the checks (else only --write)")
    ap.add_argument("--resume", action="store_true", help="skip the runs the file records already")
    ap.add_argument("--write", type=Path, default=None, help="a markdown page with the budget-table markers")
    args = ap.parse_args(argv)
    doc = _load(args.json)
    if args.run:
        budgets = sorted(float(b) for b in args.budgets.split(","))
        only = [s for s in args.only.split(",") if s]
        for e in ENTRIES:
            if only and not any(s in e.label for s in only):
                continue
            for b in budgets:
                caught = any(r["label"] == e.label and not r["passed"] and r["budget_s"] < b for r in doc["runs"])
                if args.skip_caught and caught and not e.exact:
                    continue
                if args.resume and any((r["label"], r["budget_s"]) == (e.label, b) for r in doc["runs"]):
                    continue
                rec = run_entry(e, b)
                print(json.dumps(rec), flush=True)
                doc["runs"] = [r for r in doc["runs"] if (r["label"], r["budget_s"]) != (e.label, b)] + [rec]
                args.json.parent.mkdir(parents=True, exist_ok=True)
                args.json.write_text(json.dumps(doc, indent=1) + "\n")
    block = render(doc)
    print(block)
    if args.write is not None:
        text = args.write.read_text()
        pattern = re.compile(re.escape(BEGIN.split(" (")[0]) + r".*?" + re.escape(END), re.S)
        if not pattern.search(text):
            raise SystemExit(f"{args.write} has no budget-table markers")
        args.write.write_text(pattern.sub(lambda _: block, text))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
