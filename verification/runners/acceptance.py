"""The acceptance of :func:`verification.check_sampler`, measured: exact samplers pass, defective ones fail.

``python -m verification.runners.acceptance --out docs/verify-your-sampler.md`` runs every entry of
:data:`RUNS` on the CPU (each at its planned ``n``: the default ``tv``, or the ``tv`` or ``budget_s`` its entry
gives) and writes the table between the page's ``acceptance`` markers; ``tests/verification/test_check_docs.py``
checks the recorded table.  Samplers: :mod:`verification.battery.examples`.
"""

from __future__ import annotations

import argparse
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..battery import examples
from ..outputs.markdown import table
from ..planning.request import DEFAULT_TV
from .check import check_sampler

__all__ = ["RUNS", "Run", "acceptance_cases", "main", "run_all"]

BEGIN = "<!-- acceptance:begin (python -m verification.runners.acceptance --out docs/verify-your-sampler.md) -->"
END = "<!-- acceptance:end -->"


def acceptance_cases() -> dict[str, np.ndarray]:
    """The logits: ``normal`` (two rows of V = 1000, N(0, 2**2)), ``tail`` (one row of V = 262144: 8 tokens
    N(0, 0.5**2), the rest 18-20 nats below) and ``small`` (two rows of V = 32, N(0, 1), for the interpreted
    kernel)."""
    rng = np.random.default_rng(20261201)
    normal = rng.normal(0, 2, (2, 1000)).astype(np.float32)
    v = 262_144
    tail = np.empty((1, v), np.float32)
    tail[0, :8] = rng.normal(0, 0.5, 8)
    tail[0, 8:] = rng.uniform(-20, -18, v - 8)
    small = rng.normal(0, 1, (2, 32)).astype(np.float32)
    return {"normal": normal, "tail": tail, "small": small}


@dataclass(frozen=True)
class Run:
    """One acceptance run: a sampler on a case, the sizes' argument, and whether it must pass."""

    label: str
    sampler: Any
    case: str
    kwargs: dict = field(default_factory=dict)
    exact: bool = True
    why: str = ""


RUNS = (
    Run("numpy `Generator.choice`", examples.numpy_choice, "normal"),
    Run("`torch.distributions.Categorical`", examples.torch_categorical, "normal"),
    Run("`flashsampling.sample_from_logits` (interpreted)", examples.fused_kernel, "small", {"budget_s": 150.0}),
    Run("numpy `Generator.choice`", examples.numpy_choice, "tail"),
    Run(
        "float32 `torch.multinomial`",
        examples.multinomial_float32,
        "tail",
        exact=False,
        why="float32 running sum: the tail 18-20 nats down is never drawn",
    ),  # fmt: skip
    Run(
        "`torch.distributions.Categorical`",
        examples.torch_categorical,
        "tail",
        exact=False,
        why="it samples through the same float32 multinomial",
    ),  # fmt: skip
    Run(
        "Gumbel-max, float16 uniforms",
        examples.gumbel_float16,
        "normal",
        {"tv": 0.05},
        exact=False,
        why="noise capped near 7.6 nats; ties at equal uniforms",
    ),  # fmt: skip
    Run(
        "3 % temperature error",
        examples.temperature_error,
        "normal",
        exact=False,
        why="total variation 0.021 and 0.024 in the two rows",
    ),  # fmt: skip
    Run(
        "seed s + 1 = seed s shifted by one draw",
        examples.shifted_seed_stream,
        "normal",
        exact=False,
        why="found at shift +1 of the seed lag scan",
    ),  # fmt: skip
    Run("rows share noise", examples.shared_row_noise, "normal", exact=False, why="rows 0 and 1 dependent"),
)


def run_all(runs=RUNS, seed: int = 20261201) -> tuple[list[dict[str, Any]], Any]:
    """Run each entry; one JSON-ready row each (verdict, sizes, time, the failed tests with their p-values),
    and the first run's report (its tests' detectable deviations are the page's example)."""
    cases = acceptance_cases()
    rows = []
    first = None
    for k, r in enumerate(runs):
        t = time.perf_counter()
        rep = check_sampler(r.sampler, cases[r.case], seed=seed + 100_000 * k, **r.kwargs)
        seconds = time.perf_counter() - t
        first = first or rep
        failed = sorted(rep.failures(), key=lambda x: x.adjusted_pvalue)
        rows.append({
            "sampler": r.label,
            "case": r.case,
            "shape": list(rep.shape),
            "planned": (f"budget_s = {r.kwargs['budget_s']:g}" if "budget_s" in r.kwargs
                        else f"tv = {r.kwargs.get('tv', DEFAULT_TV):g}"),
            "n": rep.n,
            "tests": len(rep.tests),
            "seconds": seconds,
            "passed": rep.passed,
            "required": r.exact,
            "failed": [f"`{t.name}` (p = {t.pvalue:.2g})" for t in failed[:3]] + (
                [f"{len(failed) - 3} more"] if len(failed) > 3 else []),
            "why": r.why,
        })  # fmt: skip
        print(rows[-1], flush=True)
    return rows, first


def render(rows: list[dict[str, Any]], first) -> str:
    """The markdown tables between the markers: the acceptance runs, then what each test of the first run
    detected at its ``n``."""
    body = table(
        [
            "sampler",
            "logits",
            "planned for",
            "n per row",
            "tests",
            "seconds",
            "verdict",
            "as required",
            "failed (Holm-adjusted order)",
        ],  # fmt: skip
        [
            [
                r["sampler"],
                f"{r['case']} {r['shape']}",
                r["planned"],
                f"{r['n']:,}",
                r["tests"],
                f"{r['seconds']:.0f}",
                "pass" if r["passed"] else "**FAIL**",
                "yes" if r["passed"] == r["required"] else "NO",
                ", ".join(r["failed"]) + (f": {r['why']}" if r["why"] and not r["passed"] else "") or "-",
            ]  # fmt: skip
            for r in rows
        ],
        "lllrrrlll",
    )
    detects = table(
        ["test", "n", "level", f"detects with power {first.power:g}"],
        [[f"`{t.name}` {t.title}", f"{t.n:,}", f"{t.level:.3g}", t.detects] for t in first.tests],
        "lrrl",
    )
    r0 = rows[0]
    intro = (f"What each test of the first run ({r0['sampler']} on {r0['case']} {r0['shape']}, planned for "
             f"{r0['planned']}, family-wise alpha {first.alpha:g}) detects at the n it read:")  # fmt: skip
    return "\n".join([BEGIN, "", *body, "", intro, "", *detects, "", END])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m verification.runners.acceptance", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="a markdown page with the acceptance markers to update")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows, first = run_all()
    block = render(rows, first)
    print(block)
    print(f"{time.perf_counter() - t0:.0f} s")
    if args.out is not None:
        text = args.out.read_text()
        pattern = re.compile(re.escape(BEGIN.split(" (")[0]) + r".*?" + re.escape(END), re.S)
        if not pattern.search(text):
            raise SystemExit(f"{args.out} has no acceptance markers")
        args.out.write_text(pattern.sub(lambda _: block, text))
    return 0 if all(r["passed"] == r["required"] for r in rows) else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
