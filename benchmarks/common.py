"""Timing helpers shared by the GPU benchmarks: CUDA-event medians, copy bandwidth, baselines."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from pathlib import Path

import torch
import triton


def median_ms(fn, *, warmup: int = 5, reps: int = 30) -> float:
    """Median wall time of ``fn()`` in ms, timed with CUDA events after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def bench_ms(fn) -> float:
    """The harness's timer: ``triton.testing.do_bench`` median in ms (25 ms warm-up, 100 ms of repetitions,
    L2 flushed between them)."""
    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def copy_bandwidth_gbs(nbytes: int = 4 << 30) -> float:
    """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written."""
    a = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    ms = median_ms(lambda: b.copy_(a), warmup=3, reps=20)
    return nbytes / (ms * 1e-3) / 1e9


def multinomial_sampler(h, w, temperature: float):
    logits = h @ w.T
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    return torch.multinomial(probs, 1)


def exponential_race_sampler(h, w, temperature: float):
    """vLLM's torch sampler: argmax(p / E), E ~ Exp(1)."""
    logits = h @ w.T
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    q = torch.empty_like(probs).exponential_()
    return probs.div_(q).argmax(dim=-1, keepdim=True)


def gumbel_argmax(h, w, temperature: float):
    logits = (h @ w.T).float() / temperature
    u = torch.rand_like(logits)
    return (logits - torch.log(-torch.log(u))).argmax(dim=-1, keepdim=True)


def probe_inputs(shapes: str, batches: str, device) -> Iterator[tuple[int, int, int, torch.Tensor, torch.Tensor]]:
    """The probes' inputs, ``(V, D, B, h, w)``: for each ``V:D`` of ``shapes`` (comma-separated) a weight
    ``W ~ N(0, 0.02**2)``, then for each ``B`` of ``batches`` a hidden state ``h ~ N(0, 1)``, both bf16, drawn in
    that order from one generator seeded 0 per shape (so every probe times the same tensors)."""
    for shape in shapes.split(","):
        V, D = (int(x) for x in shape.split(":"))
        gen = torch.Generator(device=device).manual_seed(0)
        w = (torch.randn(V, D, device=device, generator=gen) * 0.02).to(torch.bfloat16)
        for B in (int(b) for b in batches.split(",")):
            yield V, D, B, torch.randn(B, D, device=device, generator=gen).to(torch.bfloat16), w


def record_row(out: dict, key: str, rec: dict, path: str, show: tuple[str, ...] | None = None) -> None:
    """Store a probe's row: ``rec["min_ms"]``, the minimum over ``rec["rounds"]`` of each timing (when there are
    rounds), ``out["rows"][key] = rec``; print the ``show`` fields (all by default) and rewrite ``path`` (after
    every row, so that a run cut short keeps its data)."""
    if rec.get("rounds"):
        rec["min_ms"] = {k: min(r[k] for r in rec["rounds"]) for k in rec["rounds"][0]}
    out.setdefault("rows", {})[key] = rec
    shown = rec if show is None else {k: rec[k] for k in show}
    print(key, json.dumps(shown), flush=True)
    Path(path).write_text(json.dumps(out, indent=1))
