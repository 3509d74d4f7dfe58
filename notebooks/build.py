"""Execute the notebooks and write them with their outputs; or check the committed outputs against a fresh run.

``notebooks/NN_name.py`` (jupytext percent format) is the source of truth.  ``NN_name.ipynb`` is that script executed
in a fresh Jupyter kernel (nbclient, ipykernel; working directory ``notebooks/``, matplotlib's inline backend), with
its outputs and figures, so that a reader on a code host sees every number and picture::

    python notebooks/build.py                 # execute every notebook, write every .ipynb
    python notebooks/build.py 02 05           # only these (by number or name)
    python notebooks/build.py --check         # execute, compare with the committed outputs, write nothing

Comparison (:func:`comparable`), up to what legitimately changes between runs and machines:

* printed lines that contain ``[machine]`` are skipped (timings, the device, counts that depend on the hardware);
  a code cell tagged ``machine`` (``# %% tags=["machine"]``) is skipped whole;
* memory addresses (``0x7f...``) are masked; stderr (warnings) is not compared;
* figures are compared by presence and format, not by bytes.

Everything else printed (the numbers the notebooks compute from fixed seeds) must match exactly, where it can: each
``.ipynb`` records in its metadata the :func:`environment` it was built in (kernels interpreted or compiled, and a
digest of NumPy's floating-point functions, which NumPy dispatches at run time to SIMD code that differs between CPUs:
a draw at a near-tie may then go the other way).  ``tests/test_notebooks.py`` runs the comparison in CI where the
environment is the recorded one, and otherwise only the fresh run.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parent
SCRIPTS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))
#: Printed lines that contain this tag depend on the machine and are not compared.
MACHINE_TAG = "[machine]"
#: A code cell with this tag depends on the machine as a whole.
MACHINE_CELL = "machine"
#: Seconds one cell may run before the execution is abandoned.
CELL_TIMEOUT_S = 600
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
_METADATA = {
    "jupytext": {"cell_metadata_filter": "-all"},
    "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}


def numerics_digest() -> str:
    """A digest of NumPy's float32 and float64 ``log``, ``exp``, ``log1p``, ``expm1`` on fixed inputs (the noise's
    logarithms, the notebooks' float64 sums): equal digests, equal bits."""
    import hashlib

    import numpy as np

    x64 = np.concatenate([np.geomspace(2.0**-66, 64.0, 200_001), 1.0 - np.geomspace(2.0**-25, 0.5, 50_001)])
    h = hashlib.sha256()
    for x in (x64.astype(np.float32), x64):
        for f in (np.log, np.exp, np.log1p, np.expm1):
            with np.errstate(all="ignore"):
                h.update(f(x if f is not np.exp else -x).tobytes())
    return h.hexdigest()[:16]


def environment() -> dict[str, str]:
    """What the printed numbers may depend on beyond the code and the seeds: the kernels' mode and NumPy's numerics."""
    sys.path.insert(0, str(NOTEBOOKS.parent))
    try:
        import flashsampling
    finally:
        sys.path.pop(0)
    return {"kernels": "interpreted" if flashsampling.INTERPRET else "compiled", "numerics": numerics_digest()}


def select(names: list[str]) -> list[Path]:
    """The percent-scripts named by number (``02``) or name (``02_grouped_sampling``); all when ``names`` is empty."""
    if not names:
        return SCRIPTS
    chosen = [s for s in SCRIPTS if any(s.stem == n or s.stem.split("_")[0] == n for n in names)]
    unknown = [n for n in names if not any(s.stem == n or s.stem.split("_")[0] == n for s in SCRIPTS)]
    if unknown:
        raise SystemExit(f"no notebook named {unknown}; the notebooks are {[s.stem for s in SCRIPTS]}")
    return chosen


def execute(script: Path, timeout: int = CELL_TIMEOUT_S):
    """The notebook of ``script`` executed in a fresh python3 kernel: ``(notebook, seconds)``.

    The kernel runs in ``notebooks/`` with matplotlib's inline backend (``MPLBACKEND`` is removed from its
    environment), so figures become embedded PNG outputs.  A cell that raises raises here
    (``nbclient.exceptions.CellExecutionError``, with the cell and the traceback).
    """
    import jupytext
    import nbclient

    nb = jupytext.read(script)
    nb.metadata = dict(_METADATA)
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i}"
    saved = os.environ.pop("MPLBACKEND", None)
    start = time.perf_counter()
    try:
        client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                                         resources={"metadata": {"path": str(NOTEBOOKS)}})  # fmt: skip
        client.execute()
    finally:
        if saved is not None:
            os.environ["MPLBACKEND"] = saved
    nb.metadata = dict(_METADATA, flashsampling=environment())  # drop what the kernel added (its Python version)
    return nb, time.perf_counter() - start


def _lines(text: str) -> list[str]:
    return [_ADDRESS.sub("0x...", line) for line in text.splitlines() if MACHINE_TAG not in line]


def comparable(nb) -> list[tuple[str, str, list[str]]]:
    """Per cell: ``(cell type, source, outputs)`` with the outputs normalized as the module docstring says."""
    cells = []
    for cell in nb.cells:
        outputs: list[str] = []
        if cell.cell_type == "code":
            if MACHINE_CELL in cell.get("metadata", {}).get("tags", []):
                outputs = ["<outputs depend on the machine>"]
            else:
                stdout = "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")
                outputs = [f"stdout: {line}" for line in _lines(stdout)]
                for o in cell.outputs:
                    if o.output_type in ("display_data", "execute_result"):
                        for mime, data in sorted(o.data.items()):
                            outputs += [f"{mime}: {line}" for line in _lines(data)] if mime == "text/plain" else \
                                [f"<{mime}>"]  # fmt: skip
                    elif o.output_type == "error":
                        outputs.append(f"error: {o.ename}: {o.evalue}")
        cells.append((cell.cell_type, cell.source.strip(), outputs))
    return cells


def differences(committed, fresh) -> list[str]:
    """Human-readable differences between two notebooks' :func:`comparable` forms (empty: they match)."""
    a, b = comparable(committed), comparable(fresh)
    if [c[:2] for c in a] != [c[:2] for c in b]:
        return ["the cells' sources differ: the .ipynb was not built from the current .py"]
    out = []
    for i, ((_, _, old), (_, _, new)) in enumerate(zip(a, b)):
        if old != new:
            gone = [line for line in old if line not in new][:3]
            came = [line for line in new if line not in old][:3]
            out.append(f"cell {i}: committed {gone} vs fresh {came}")
    return out


def write(nb, path: Path) -> None:
    import nbformat

    nbformat.validate(nb)
    path.write_text(nbformat.writes(nb) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="notebooks by number or name (default: all)")
    parser.add_argument("--check", action="store_true", help="compare a fresh run with the committed outputs")
    args = parser.parse_args(argv)
    import nbformat

    failed = False
    for script in select(args.names):
        nb, seconds = execute(script)
        ipynb = script.with_suffix(".ipynb")
        if args.check:
            diff = differences(nbformat.read(ipynb, as_version=4), nb) if ipynb.is_file() else ["no .ipynb"]
            failed |= bool(diff)
            print(f"{script.stem}: {seconds:.1f} s, " + ("matches" if not diff else "DIFFERS:\n  " + "\n  ".join(diff)))
        else:
            write(nb, ipynb)
            print(f"{script.stem}: {seconds:.1f} s, wrote {ipynb.relative_to(NOTEBOOKS.parent)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
