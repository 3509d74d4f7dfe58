"""The GPU probes' shared helpers (benchmarks/common.py), on the CPU: the same inputs in every probe, and rows
recorded with their minima."""

from __future__ import annotations

import json

import torch

from benchmarks.common import probe_inputs, record_row


def test_probe_inputs_are_the_same_tensors_in_every_probe():
    first = list(probe_inputs("64:32,48:16", "2,3", "cpu"))
    again = list(probe_inputs("64:32,48:16", "2,3", "cpu"))
    assert [(V, D, B) for V, D, B, _, _ in first] == [(64, 32, 2), (64, 32, 3), (48, 16, 2), (48, 16, 3)]
    for (_, D, B, h, w), (_, _, _, h2, w2) in zip(first, again):
        assert h.shape == (B, D) and h.dtype == w.dtype == torch.bfloat16 and torch.equal(h, h2) and torch.equal(w, w2)
    assert first[0][4] is first[1][4] and not torch.equal(first[0][3][:2], first[1][3][:2])  # one W per shape


def test_record_row_keeps_minima_and_writes_every_row(tmp_path, capsys):
    out, path = {"gpu": "none"}, tmp_path / "probe.json"
    record_row(out, "a", {"rounds": [{"x": 2.0, "y": 1.0}, {"x": 1.5, "y": 3.0}]}, str(path), show=("min_ms",))
    assert out["rows"]["a"]["min_ms"] == {"x": 1.5, "y": 1.0}
    assert json.loads(path.read_text()) == out and capsys.readouterr().out.startswith('a {"min_ms"')
    record_row(out, "b", {"host_us": 3}, str(path))
    assert list(json.loads(path.read_text())["rows"]) == ["a", "b"]
