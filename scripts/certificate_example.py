"""The example of docs/verify-your-sampler.md's "What a pass rules out": an exact NumPy sampler checked on two rows of
V = 1000 logits N(0, 2**2) at tv = 0.02, its certificate lines as repr prints them, and the certificate an exact
sampler gets in expectation at 2**21 draws a row (two calls of ``MAX_CALL_DRAWS``).

``python scripts/certificate_example.py --write`` replaces the block between the markers in the page;
``tests/verification/test_tv_certificate.py`` checks that the block is this script's output (the seconds, which
differ from run to run, aside).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

from verification import check_sampler
from verification.battery import examples
from verification.outputs.markdown import certificate_lines
from verification.planning.check import MAX_CALL_DRAWS
from verification.stats.tv_certificate import expected_tv_certificate

PAGE = Path(__file__).resolve().parents[1] / "docs" / "verify-your-sampler.md"
BEGIN = "<!-- certificate:begin (python scripts/certificate_example.py --write) -->"
END = "<!-- certificate:end -->"
#: Numbers of seconds in the block (they differ from run to run): normalized away when the block is compared.
SECONDS = re.compile(r"[0-9.e+-]+ s\b")


def render() -> str:
    """The block: the call, the certificate lines of its report, the expected bound at ``2 * MAX_CALL_DRAWS``."""
    z = np.random.default_rng(0).normal(0.0, 2.0, (2, 1000))
    report = check_sampler(examples.numpy_choice, z, tv=0.02)
    n = 2 * MAX_CALL_DRAWS
    budget = max(expected_tv_certificate(report_probs, n, alpha=1e-3 / 2) for report_probs in _probs(z))
    lines = [
        "```python",
        "z = np.random.default_rng(0).normal(0.0, 2.0, (2, 1000))",
        "report = check_sampler(examples.numpy_choice, z, tv=0.02)  # verification.battery.examples",
        "print(repr(report))",
        "```",
        "",
        "```",
        f"... n={report.n} per row ...",
        *(f"  {line}" for line in certificate_lines(report.as_dict())),
        "```",
        "",
        f"At n = {n:,} draws a row (two calls of `MAX_CALL_DRAWS`), an exact sampler's certificate on these logits is "
        f"{budget:.3g} in expectation "
        "(`verification.stats.tv_certificate.expected_tv_certificate`, each row at alpha / 2).",
    ]
    return "\n".join(lines)


def _probs(z: np.ndarray) -> list[np.ndarray]:
    p = np.exp(z.astype(np.float32).astype(np.float64) - z.max(axis=1, keepdims=True))
    return list(p / p.sum(axis=1, keepdims=True))


def block(text: str) -> str:
    """The current block of ``text``: what lies between the markers' lines."""
    start = text.index(BEGIN) + len(BEGIN) + 1
    return text[start : text.index(END, start)].removesuffix("\n")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = render()
    print(out)
    if "--write" in argv:
        text = PAGE.read_text()
        start = text.index(BEGIN) + len(BEGIN) + 1
        PAGE.write_text(text[:start] + out + "\n" + text[text.index(END, start) :])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
