"""The READMEs' speed tables are the harness's results file, rendered (benchmarks/tables.py)."""

from __future__ import annotations

import copy
import json

from benchmarks import tables


def test_readme_blocks_are_the_results_file():
    assert tables.stale() == {}, "run: python benchmarks/tables.py --write"


def test_a_changed_number_is_caught(tmp_path):
    data = copy.deepcopy(tables.load())
    row = next(r for r in data["rows"] if (r["V"], r["D"]) == tables.TABLE_SHAPE and r["B"] == 256)
    row["fused_ms"] *= 1.01
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    assert set(tables.stale(path)) == {"readme", "bench"}


def test_summary_counts_match_the_rows():
    s = tables.summary(tables.load())
    assert s["points"] == 45
    assert sum(s[f"B{lo}-{hi}"]["points"] for lo, hi in tables.BANDS) == s["points"]
    assert 0 <= s["within_5pct"] <= s["points"] and 0 <= s["faster"] <= s["points"]
