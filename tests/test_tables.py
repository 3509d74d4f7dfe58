"""The READMEs' speed tables are the harness's results file, rendered (benchmarks/tables.py)."""

from __future__ import annotations

import copy
import json

import pytest

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


def test_the_generate_benchmark_smoke_run_and_its_table(tmp_path):
    # benchmarks/generate_h200.py --smoke: the captured-loop code on a 2-layer model here (no graph on the CPU), its
    # static-cache loop checked against the eager generate (same per-request seeds) and greedy model.generate, and the
    # schema-2 file rendered into the tables.  About 10 s.
    pytest.importorskip("transformers")
    from benchmarks import generate_h200

    out = tmp_path / "generate.json"
    assert generate_h200.main(["--smoke", "--out", str(out)]) == 0
    data = tables.load(out)
    first = data["rows"]["tiny-llama/B1"]
    assert data["schema"] == 2 and first["tokens_match_eager"] == 1.0 and first["greedy_static_equals_hf"]
    assert all(set(r["ms_per_token"]) >= {"graph_fused", "graph_unfused", "hf_generate"} for r in data["rows"].values())
    blocks = tables.render_generate(data)
    assert "| tiny-llama/B3 |" in blocks["bench-generate"] and "graph, fused" in blocks["bench-generate"]
    assert "2 model × batch points" in blocks["readme-generate"]


def test_the_greedy_agreement_block_is_the_results_file():
    # docs/integration.md's measured greedy agreement is benchmarks/results/greedy_agreement.json, rendered.
    pytest.importorskip("transformers")
    from benchmarks import greedy_agreement

    assert greedy_agreement.main(["--check"]) == 0, "run: python benchmarks/greedy_agreement.py"
