"""Build Gluon kernels for sm_90a on any machine: compile in a fresh process (compiled mode, not the interpreter the
tests run in), then check ptxas's report (triton ships ptxas).

:func:`compile_all` runs one process for a whole table of kernels (each Gluon compile costs 2-20 s; the process's
imports are paid once) and returns each kernel's PTX and shared memory, or its error.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import triton

PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
ROOT = Path(__file__).resolve().parents[1]
#: The shared memory of one sm_90 thread block.
SHARED_BYTES = 227 * 1024

_DRIVER = """
import json, sys, traceback
from pathlib import Path
out = Path(sys.argv[1])
exec(sys.argv[2])  # defines KERNELS: name -> zero-argument function returning the compiled kernel
report = {}
for name, build in KERNELS.items():
    try:
        k = build()
        (out / f"{name}.ptx").write_text(k.asm["ptx"])
        report[name] = {"shared": k.metadata.shared}
    except Exception:  # one failure must not hide the others
        report[name] = {"error": traceback.format_exc()[-3000:]}
(out / "report.json").write_text(json.dumps(report))
"""


def compile_all(table: str, out_dir: Path, timeout: int = 1800) -> dict[str, dict]:
    """Run ``table`` (Python source defining ``KERNELS``, a dict of builders) in a fresh compiled-mode process;
    returns ``name -> {"ptx": text, "shared": bytes}`` or ``{"error": traceback}``."""
    env = {**os.environ, "FLASHSAMPLING_INTERPRET": "0", "PYTHONPATH": str(ROOT)}
    env.pop("TRITON_INTERPRET", None)
    out_dir.mkdir(parents=True, exist_ok=True)
    run = subprocess.run([sys.executable, "-c", _DRIVER, str(out_dir), table], env=env, capture_output=True,
                         text=True, timeout=timeout, cwd=ROOT)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads((out_dir / "report.json").read_text())
    for name, rec in report.items():
        if "error" not in rec:
            rec["ptx"] = (out_dir / f"{name}.ptx").read_text()
    return report


def assert_no_spills(tmp_path: Path, ptx: str, regs: int, *, exact_registers: bool = True,
                     known_spill_bytes: int = 0) -> None:  # fmt: skip
    """ptxas builds ``ptx`` within ``regs`` registers per thread and spills nothing (and, with
    ``exact_registers``, reports exactly ``regs``: the launch budget of a warp-specialized kernel);
    ``known_spill_bytes``: a probe's recorded spill stores, which must be exactly those."""
    src = tmp_path / "a.ptx"
    src.write_text(ptx)
    rep = subprocess.run([str(PTXAS), "-arch=sm_90a", "-v", "--maxrregcount", str(regs), str(src),
                          "-o", str(tmp_path / "a.cubin")], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert rep.returncode == 0, rep.stderr[-3000:]
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", rep.stderr)]
    assert spills and max(spills) == known_spill_bytes, rep.stderr
    assert not exact_registers or f"Used {regs} registers" in rep.stderr, rep.stderr
