"""examples/generate.py runs as a script (in this process: the imports are already paid for)."""

from __future__ import annotations

import pathlib
import runpy
import sys

import pytest

pytest.importorskip("transformers")

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "generate.py"


def test_example_generates_and_matches_greedy(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [str(EXAMPLE), "--max-new-tokens", "4", "--seed", "7"])
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("row ")]
    assert len(rows) == 2 and all(len(line.split("->")[1].split(",")) == 4 for line in rows)
    assert "greedy equals model.generate(do_sample=False): True" in out
