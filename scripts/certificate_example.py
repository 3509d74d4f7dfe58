"""The example of docs/verify-your-sampler.md's "What a pass rules out": an exact NumPy sampler checked on two rows of
V = 1000 logits N(0, 2**2) at tv = 0.02, its certificate lines as repr prints them, and the certificate an exact
sampler gets in expectation at 10**6, 10**8 and 10**10 draws a row (what larger budgets buy).

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
from verification.stats.tv_certificate import expected_tv_certificate

PAGE = Path(__file__).resolve().parents[1] / "docs" / "verify-your-sampler.md"
BEGIN = "<!-- certificate:begin (python scripts/certificate_example.py --write) -->"
END = "<!-- certificate:end -->"
#: Numbers of seconds in the block (they differ from run to run): normalized away when the block is compared.
SECONDS = re.compile(r"[0-9.e+-]+ s\b")
#: Draws per row at which the expected certificate of an exact sampler is stated.
EXPECTED_AT = (10**6, 10**8, 10**10)


def render() -> str:
    """The block: the call, the certificate lines of its report, the expected bound at :data:`EXPECTED_AT` draws."""
    z = np.random.default_rng(0).normal(0.0, 2.0, (2, 1000))
    report = check_sampler(examples.numpy_choice, z, tv=0.02)
    expected = [max(expected_tv_certificate(p, n, alpha=1e-3 / 2) for p in _probs(z)) for n in EXPECTED_AT]
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
        "An exact sampler's certificate on these logits, in expectation "
        "(`verification.stats.tv_certificate.expected_tv_certificate`, each row at alpha / 2): "
        + ", ".join(
            f"{b:.2g} at n = {n:.0e}".replace("e+0", "e").replace("e+", "e") for n, b in zip(EXPECTED_AT, expected)
        )
        + ".",
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
