"""All checks of finite_precision.md, in the order of its sections.

* sections 2-4 (grid of uniforms, cap, other generators): :mod:`proofs.check_grid_noise`;
* sections 5 and 7 (float32 scores, logits, temperature): :mod:`proofs.check_float32_scores`;
* section 6 (float32 arithmetic of the noise): :mod:`proofs.check_float32_noise`.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as `python proofs/check_finite_precision.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proofs import check_float32_noise, check_float32_scores, check_grid_noise  # noqa: E402


def main() -> int:
    status = 0
    for name, mod in (
        ("grid of uniforms (sections 2-4)", check_grid_noise),
        ("float32 scores and logits (sections 5, 7)", check_float32_scores),
        ("float32 noise arithmetic (section 6)", check_float32_noise),
    ):
        print(f"######## {name}")
        status |= mod.main()
    return status


if __name__ == "__main__":
    raise SystemExit(main())
