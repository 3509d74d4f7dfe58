"""The fused sampler against what users run today, on the GPU, in one process (issue 7).

``python benchmarks/bench_h200.py --out benchmarks/results/bench_h200.json`` (see benchmarks/README.md)

For every shape ``(V, D)`` and batch size ``B`` it times, with ``triton.testing.do_bench``
(medians; warm-up; L2 flushed between repetitions; inputs random, never zeros):

==========================  ===================================================================
``fused``                   ``flashsampling.sample`` (scalar temperature, no host checks)
``fused_row_temp``          the same with a per-row temperature tensor
``matmul``                  ``h @ W.T`` alone (cuBLAS, bf16 out)
``multinomial``             matmul + ``softmax(z.float() / T)`` + ``torch.multinomial`` (eager)
``multinomial_compiled``    the same under ``torch.compile``
``exponential_race``        matmul + ``argmax(p / E)``, ``E ~ Exp(1)`` (vLLM's torch sampler)
``gumbel_compiled``         matmul + ``argmax(z / T - log(-log U))`` under ``torch.compile``
``flashinfer``              matmul + ``flashinfer.sampling.sampling_from_logits`` (if importable)
``fused_tile_cdf``          ``tile_cdf.sample_fused_tile_cdf``: the tile inverse-CDF sampler (another stream)
``fused_graph``             ``fused`` replayed from a CUDA graph (no Python or launch overhead)
``matmul_graph``            ``matmul`` replayed from a CUDA graph
==========================  ===================================================================

and the floor ``(V*D*2 + B*D*2 + B*8) / copy bandwidth``, the bandwidth measured in the same run.
It also records the compiler's report (registers, spills, shared memory) of the stage-1 kernel
used at each point, and the peak extra memory of every method at ``--memory-batch``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import flashsampling  # noqa: E402
from benchmarks.common import (  # noqa: E402
    bench_ms,
    copy_bandwidth_gbs,
    exponential_race_sampler,
    gumbel_argmax,
    multinomial_sampler,
)
from benchmarks.probes.stage1 import launch_stage1_probe  # noqa: E402
from flashsampling._validate import inverse_temperature  # noqa: E402
from flashsampling.kernels.tiles import stage1_tiles, warp_specialized_supported  # noqa: E402
from flashsampling.tile_cdf import sample_fused_tile_cdf  # noqa: E402

SHAPES = [(128256, 4096), (151936, 4096), (151936, 5120), (128256, 8192), (201088, 2880)]
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
TEMPERATURE = 0.8


def load_flashinfer():
    """``(sampling_from_logits, version)`` or ``(None, reason)``."""
    try:
        import flashinfer
        from flashinfer.sampling import sampling_from_logits

        return sampling_from_logits, flashinfer.__version__
    except Exception as e:  # noqa: BLE001 - the reason goes into the JSON
        return None, f"{type(e).__name__}: {e}"


def graphed(fn):
    """``fn`` captured in a CUDA graph; returns the replay (no Python or launch overhead)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def peak_extra_mb(fn) -> float:
    """Peak memory allocated during ``fn()`` above what was allocated before it, in MB."""
    fn()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 1e6


COMPILED = {}


def methods(h, w, temps, flashinfer_sample):
    T = TEMPERATURE
    if not COMPILED:  # once, dynamic in every dimension: one compilation serves every shape
        COMPILED["multinomial"] = torch.compile(multinomial_sampler, dynamic=True)
        COMPILED["gumbel"] = torch.compile(gumbel_argmax, dynamic=True)
    compiled_multinomial, compiled_gumbel = COMPILED["multinomial"], COMPILED["gumbel"]
    out = {
        "fused": lambda: flashsampling.sample(h, w, temperature=T, seed=1234, host_checks=False),
        "fused_row_temp": lambda: flashsampling.sample(h, w, temperature=temps, seed=1234, host_checks=False),
        "matmul": lambda: h @ w.T,
        "multinomial": lambda: multinomial_sampler(h, w, T),
        "multinomial_compiled": lambda: compiled_multinomial(h, w, T),
        "exponential_race": lambda: exponential_race_sampler(h, w, T),
        "gumbel_compiled": lambda: compiled_gumbel(h, w, T),
    }
    if flashinfer_sample is not None:
        out["flashinfer"] = lambda: flashinfer_sample((h @ w.T) / T)
    if warp_specialized_supported(h, w):  # the tile inverse-CDF sampler (another stream; proofs/tile_inverse_cdf.md)
        out["fused_tile_cdf"] = lambda: sample_fused_tile_cdf(h, w, temperature=T, seed=1234, host_checks=False)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/bench_h200.json")
    ap.add_argument("--shapes", default=";".join(f"{v},{d}" for v, d in SHAPES))
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--memory-batch", type=int, default=256)
    args = ap.parse_args()
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes.split(";")]
    batches = [int(b) for b in args.batches.split(",")]
    fi_sample, fi_version = load_flashinfer()
    bw = copy_bandwidth_gbs()
    print(f"copy bandwidth {bw:.0f} GB/s; flashinfer: {fi_version}", flush=True)
    meta = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "flashinfer": fi_version,
        "copy_bandwidth_GBs": bw,
        "temperature": TEMPERATURE,
        "timer": "triton.testing.do_bench median (warmup 25 ms, rep 100 ms, L2 flushed)",
    }
    rows, memory = [], {}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)

    def write() -> None:  # after every row, so that a run cut short keeps its data
        Path(args.out).write_text(json.dumps({**meta, "rows": rows, "peak_extra_MB_at_B256": memory}, indent=2))

    gen = torch.Generator(device="cuda").manual_seed(0)
    for V, D in shapes:
        w = (torch.randn(V, D, device="cuda", generator=gen) * 0.02).to(torch.bfloat16)
        for B in batches:
            h = torch.randn(B, D, device="cuda", generator=gen).to(torch.bfloat16)
            temps = 0.5 + torch.rand(B, device="cuda", generator=gen)
            r = {"V": V, "D": D, "B": B, "floor_ms": (V * D * 2 + B * D * 2 + B * 8) / (bw * 1e9) * 1e3}
            ms = methods(h, w, temps, fi_sample)
            ms["fused_graph"] = graphed(ms["fused"])
            ms["matmul_graph"] = graphed(ms["matmul"])
            if "fused_tile_cdf" in ms:
                ms["fused_tile_cdf_graph"] = graphed(ms["fused_tile_cdf"])
            for name, fn in ms.items():
                try:
                    r[f"{name}_ms"] = bench_ms(fn)
                except Exception as e:  # noqa: BLE001 - record and go on
                    r[f"{name}_error"] = f"{type(e).__name__}: {str(e)[:200]}"
            tiles = stage1_tiles(h, w, 1)  # what sample() runs
            compiled: list = []
            inv = inverse_temperature(TEMPERATURE, B, h.device)[0]
            launch_stage1_probe(h, w, inv, 1, 2, 1, tiles, compiled=compiled)
            k = compiled[0]
            r.update(tiles=list(vars(tiles).values()), n_regs=k.n_regs, n_spills=k.n_spills, shared=k.metadata.shared)
            r["fused_over_bound"] = r["fused_ms"] / max(r["floor_ms"], r["matmul_ms"])
            rows.append(r)
            write()
            print(json.dumps(r), flush=True)
            if B == args.memory_batch and (V, D) == (151936, 4096):
                memory = {name: peak_extra_mb(fn) for name, fn in methods(h, w, temps, fi_sample).items()}
                memory["logits_fp32_MB"] = B * V * 4 / 1e6
                print("peak extra MB", json.dumps(memory), flush=True)
        del w
        torch.cuda.empty_cache()
    write()


if __name__ == "__main__":
    main()
