"""``python -m tests.fuzz``: a full fuzz round; writes ``docs/fuzz.json`` and the table in ``docs/reliability.md``.

Exit status 1 if the round found a defect (a silent wrong result, an out-of-range token, a hang, ranks that
disagree) or a refused good input; unclear exceptions are listed under the table.
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

import numpy as np
import torch
import triton

import flashsampling

from . import report
from .oracle import DEFECTS
from .run import CALL_BOUND_S, fuzz_round

#: The full round's size: distinct inputs per single-process entry point, and world calls (of every twist alike).
EXAMPLES = 150
WORLD_CALLS = 135


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("--examples", type=int, default=EXAMPLES, help="distinct inputs per entry point")
    parser.add_argument("--worlds", type=int, default=WORLD_CALLS, help="calls in worlds of 1-4 gloo ranks")
    parser.add_argument("--seed", type=int, default=0, help="Hypothesis seed")
    parser.add_argument("--bound", type=float, default=CALL_BOUND_S, help="seconds before a call is a hang")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--out", help="write the record here instead of docs/fuzz.json (and leave the docs alone)")
    parser.add_argument("--render", action="store_true", help="rewrite the table from docs/fuzz.json (no round)")
    parser.add_argument("--label", help="what code the round ran on (stored in the record)")
    args = parser.parse_args(argv)
    if args.render:
        report.write_block(report.render(report.load(), report.load(report.BEFORE)))
        return 0
    record = fuzz_round(args.examples, args.seed, worlds=args.worlds, bound=args.bound,
                        progress=lambda line: print(line, file=sys.stderr, flush=True))  # fmt: skip
    mode = "Triton interpreter" if flashsampling.INTERPRET else f"compiled, {torch.cuda.get_device_name()}"
    record["environment"] = (f"torch {torch.__version__.split('+')[0]}, triton {triton.__version__}, numpy "
                             f"{np.__version__}, Python {platform.python_version()}, {mode}")  # fmt: skip
    defaults = args.examples == EXAMPLES and args.worlds == WORLD_CALLS and args.seed == 0
    record["command"] = "python -m tests.fuzz" + (
        "" if defaults else f" --examples {args.examples} --worlds {args.worlds} --seed {args.seed}"
    )
    if args.label:
        record["label"] = args.label
    table = report.render(record, report.load(report.BEFORE) if report.BEFORE.exists() else None)
    print(table)
    if args.out:
        report.save(record, Path(args.out))
    elif not args.no_write:
        report.save(record)
        report.write_block(table)
    bad = sum(record["totals"][k] for k in (*DEFECTS, "refused a good input"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
