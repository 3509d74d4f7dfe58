"""Cost of the grouped variants on the GPU (issue 4): the per-tile log-mass in the fused pass, the
grouped combine, the online merges and the tensor-parallel combine (world of one).

Run on the H200: ``python benchmarks/grouped_cost.py --out benchmarks/results/grouped_cost_h200.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import flashsampling  # noqa: E402
from benchmarks.common import median_ms  # noqa: E402
from flashsampling._request import new_request  # noqa: E402
from flashsampling.distributed import sample_tp  # noqa: E402
from flashsampling.grouped import combine_groups, grouped_partials, sample_grouped, shard_partials  # noqa: E402
from flashsampling.kernels.stage1 import launch_fused_stage1  # noqa: E402
from flashsampling.kernels.tiles import default_tiles  # noqa: E402
from flashsampling.online import sample_online  # noqa: E402


def host_ms(fn, reps: int = 20) -> float:
    """Median host time of one call, without synchronizing inside (launch overhead + any hidden sync)."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
        torch.cuda.synchronize()
    return statistics.median(times)


def breakdown(w: torch.Tensor, D: int) -> dict:
    """B=1, 8 shards: where the time of a shard-grouped call goes."""
    V = w.shape[0]
    h = torch.randn(1, D, device="cuda").to(torch.bfloat16)
    request = new_request(1.0, (2 << 32) | 1, 1, 1, h.device, host_checks=False)  # seed words (1, 2)
    inv = request.inv_temp
    size = V // 8
    ws = w[:size]
    t = default_tiles(1, size, D)
    parts = launch_fused_stage1(h, ws, inv, 1, 2, 1, t, return_lse=True)
    sizes = [size] * 7 + [V - 7 * size]
    gp = grouped_partials(request, h, w, group_sizes=sizes)
    steps = {
        "shard_stage1": lambda: launch_fused_stage1(h, ws, inv, 1, 2, 1, t, return_lse=True),
        "shard_partials": lambda: shard_partials(parts, inv, 0),
        "combine_8": lambda: combine_groups(gp, inv, 1, 2),
        "grouped_partials_8": lambda: grouped_partials(request, h, w, group_sizes=sizes),
        "sample_grouped_8": lambda: sample_grouped(h, w, seed=1, host_checks=False, group_sizes=sizes),
    }
    out = {}
    for name, fn in steps.items():
        out[name + "_gpu_ms"] = median_ms(fn)
        out[name + "_host_ms"] = host_ms(fn)
    print(json.dumps(out), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/grouped_cost_h200.json")
    ap.add_argument("--V", type=int, default=151936)
    ap.add_argument("--D", type=int, default=4096)
    args = ap.parse_args()
    V, D = args.V, args.D
    torch.manual_seed(0)
    w = (torch.randn(V, D, device="cuda") * 0.02).to(torch.bfloat16)
    rows = []
    for B in (1, 64, 256):
        h = torch.randn(B, D, device="cuda").to(torch.bfloat16)
        inv = torch.ones(B, device="cuda")
        t = default_tiles(B, V, D)
        r = {"B": B, "V": V, "D": D}
        r["stage1_ms"] = median_ms(lambda h=h, inv=inv, t=t: launch_fused_stage1(h, w, inv, 1, 2, 1, t))
        r["stage1_lse_ms"] = median_ms(
            lambda h=h, inv=inv, t=t: launch_fused_stage1(h, w, inv, 1, 2, 1, t, return_lse=True)
        )
        r["fused_ms"] = median_ms(lambda h=h: flashsampling.sample(h, w, seed=1, host_checks=False))
        r["grouped_tiles_ms"] = median_ms(lambda h=h: sample_grouped(h, w, seed=1, host_checks=False))
        r["grouped_8_shards_ms"] = median_ms(
            lambda h=h: sample_grouped(h, w, seed=1, host_checks=False, group_sizes=[V // 8] * 7 + [V - 7 * (V // 8)])
        )
        r["online_32768_ms"] = median_ms(lambda h=h: sample_online(h, w, chunk_size=32768, seed=1, host_checks=False))
        r["tp_world1_pathwise_ms"] = median_ms(lambda h=h: sample_tp(h, w, vocab_start=0, seed=1, host_checks=False))
        r["tp_world1_factorized_ms"] = median_ms(
            lambda h=h: sample_tp(h, w, vocab_start=0, seed=1, host_checks=False, combine="factorized")
        )
        r["lse_overhead_pct"] = 100.0 * (r["stage1_lse_ms"] / r["stage1_ms"] - 1.0)
        rows.append(r)
        print(json.dumps(r), flush=True)
    out = {"device": torch.cuda.get_device_name(), "rows": rows, "torch": torch.__version__,
           "breakdown_B1_8_shards": breakdown(w, D)}  # fmt: skip
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
