"""Plots of ``bench_h200.py``'s JSON: time vs batch per shape, and the fused sampler over its bound.

``python benchmarks/plot_bench.py benchmarks/results/bench_h200.json`` writes
``bench_h200_times.png`` and ``bench_h200_ratio.png`` beside the JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

METHODS = [
    ("fused", "fused (ours)", "C3", "-"),
    ("fused_graph", "fused, CUDA graph", "C3", ":"),
    ("matmul", "matmul alone", "k", "-"),
    ("gumbel_compiled", "Gumbel argmax, compiled", "C0", "--"),
    ("flashinfer", "FlashInfer sampling_from_logits", "C2", "--"),
    ("exponential_race", "exponential race (vLLM)", "C1", "--"),
    ("multinomial", "softmax + multinomial", "C4", "--"),
]


def main(path: str) -> None:
    data = json.loads(Path(path).read_text())
    rows = data["rows"]
    shapes = sorted({(r["V"], r["D"]) for r in rows}, key=lambda s: (s[1], s[0]))
    fig, axes = plt.subplots(1, len(shapes), figsize=(4.2 * len(shapes), 3.8), sharey=False)
    for ax, (V, D) in zip(axes, shapes):
        rs = sorted((r for r in rows if (r["V"], r["D"]) == (V, D)), key=lambda r: r["B"])
        bs = [r["B"] for r in rs]
        for key, label, color, style in METHODS:
            if all(f"{key}_ms" in r for r in rs):
                ax.plot(bs, [r[f"{key}_ms"] for r in rs], style, color=color, label=label, marker=".")
        ax.plot(bs, [r["floor_ms"] for r in rs], color="0.6", lw=3, alpha=0.5, label="weight-read floor")
        ax.set_xscale("log", base=2)
        ax.set_title(f"V={V}, D={D}")
        ax.set_xlabel("batch B")
    axes[0].set_ylabel("median ms")
    axes[-1].legend(fontsize=7)
    fig.suptitle(f"{data['device']}: time per sampling step (do_bench medians)")
    fig.tight_layout()
    out = Path(path).with_name(Path(path).stem + "_times.png")
    fig.savefig(out, dpi=110)
    fig, ax = plt.subplots(figsize=(6, 4))
    for V, D in shapes:
        rs = sorted((r for r in rows if (r["V"], r["D"]) == (V, D)), key=lambda r: r["B"])
        bound = [max(r["floor_ms"], r["matmul_ms"]) for r in rs]
        ax.plot([r["B"] for r in rs], [r["fused_ms"] / b for r, b in zip(rs, bound)], marker=".", label=f"{V}x{D}")
    ax.axhline(1.05, color="k", ls="--", lw=1, label="target 1.05")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch B")
    ax.set_ylabel("fused / max(floor, matmul)")
    ax.legend(fontsize=8)
    ax.set_title("Fused sampler over its bound")
    fig.tight_layout()
    fig.savefig(Path(path).with_name(Path(path).stem + "_ratio.png"), dpi=110)
    print("wrote", out)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/bench_h200.json")
