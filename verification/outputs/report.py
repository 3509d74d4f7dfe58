"""The report folder of the main job and of ``check``: ``report.md`` first, ``report.json``, plots; written whole or
not at all.

Layout of ``--out`` (default ``report/``)::

    report.md               what a person reads first: the verdict, a table per case (or row) with the plot
                            inline (:mod:`verification.outputs.markdown`)
    report.json             the same numbers, with timestamps, the command line, the arguments and the
                            versions of python, numpy, scipy, torch, triton and flashsampling
    plots/                  the figures of :mod:`verification.outputs.plots`

Writing is atomic: the folder is built beside the target (a hidden sibling) and swapped in with two
renames, so the target holds one run's files and nothing of an earlier run.  :func:`begin` swaps in a
folder that holds only a ``report.json`` with ``"status": "running"`` before the first draw, so a run
stopped by Ctrl-C (:func:`interrupted`) or a crash leaves no earlier report claiming ``passed: true``.
:func:`check_out` refuses a target that is a file or a non-empty folder without a ``report.json`` (the
swap replaces the whole folder; ``--out .`` must not delete a checkout).
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["PACKAGES", "begin", "check_out", "interrupted", "now", "publish", "to_json", "versions"]

#: Packages whose versions every report records.
PACKAGES = ("numpy", "scipy", "torch", "triton", "flashsampling")


def now() -> str:
    """The current time, ISO 8601 in UTC to the second."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def versions() -> dict[str, str]:
    """Versions of python and :data:`PACKAGES` (``"not installed"`` for a missing one)."""
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = getattr(sys.modules.get(name), "__version__", "not installed")
    return out


def check_out(out: Path) -> Path:
    """The report folder ``out``, resolved, if a report can replace it; else ``ValueError`` saying why.

    Accepted: a missing path whose parent can be created and written, or a folder that is empty or
    holds a ``report.json`` (an earlier report), in a writable parent, with a name short enough for the
    folders built beside it (``.<name>.new-XXXXXXXX``).
    """
    out = Path(out).expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / "report.json").is_file():
        raise ValueError(f"--out {out} is a folder with files but no report.json: a report would replace it whole")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out.parent):
            pass
        for kind in ("new", "old"):  # the folders publish() builds beside the target: a name too long fails here
            os.rmdir(tempfile.mkdtemp(prefix=f".{out.name}.{kind}-", dir=out.parent))
    except OSError as e:
        raise ValueError(f"--out {out}: cannot write in {out.parent} ({e.strerror or e})") from None
    return out


def publish(out: Path, files: dict[str, str], write_more: Callable[[Path], None] | None = None) -> None:
    """Replace the folder ``out`` by one holding exactly ``files`` (relative path -> text) and what
    ``write_more(folder)`` writes, built aside and swapped in with two renames."""
    out = Path(out)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", dir=out.parent))
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    try:
        for rel, text in files.items():
            path = stage / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        if write_more is not None:
            write_more(stage)
        os.chmod(stage, 0o755)  # mkdtemp makes it 0o700
        if out.exists():
            os.replace(out, old / out.name)
        os.replace(stage, out)
    except BaseException:
        if not out.exists() and (old / out.name).exists():
            os.replace(old / out.name, out)  # put the earlier folder back
        shutil.rmtree(stage, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)


def to_json(doc: dict[str, Any]) -> str:
    """``doc`` as indented JSON text (NumPy scalars as numbers, non-finite numbers as null, paths as text)."""
    return json.dumps(doc, indent=2, allow_nan=False, default=_plain) + "\n"


def _plain(x: Any) -> Any:
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x) if np.isfinite(x) else None
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, Path):
        return str(x)
    raise TypeError(f"not JSON-ready: {type(x).__name__}")


def begin(out: Path, head: dict[str, Any]) -> None:
    """Mark ``out`` as a run in progress: a folder holding only ``report.json`` with status ``running``."""
    publish(out, {"report.json": to_json({**head, "status": "running", "passed": None})})


def interrupted(out: Path, head: dict[str, Any], reason: str) -> None:
    """Mark ``out`` as a run that did not finish (``reason``, e.g. ``"KeyboardInterrupt"``); no verdict."""
    publish(out, {"report.json": to_json({**head, "status": "interrupted", "reason": reason, "passed": None,
                                        "finished": now()})})  # fmt: skip
