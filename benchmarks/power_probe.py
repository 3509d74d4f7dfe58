"""Where the B=256 time goes: the Gluon kernel with its epilogue left out, without noise and with it,
each timed and then looped for a few seconds while ``nvidia-smi`` logs the SM clock and the power.

``python benchmarks/power_probe.py --out benchmarks/results/power_probe_h200.json``

Variants (same process, same inputs, V=151936, D=4096, B=256 by default):
* ``cublas``: ``h @ W.T`` into a preallocated output;
* ``bare``: the Gluon kernel whose epilogue only takes each row's maximum logit (the matmul and the
  pipeline; :func:`benchmarks.probes.pipeline.bare_epilogue`);
* ``no_noise``: the sampler's epilogue without the noise (scratch round trip, scan, candidates);
* ``noise``: the shipped kernel;
* ``epilogue_alone`` (and ``_no_noise``): the sampler's epilogue on a synthetic accumulator, without
  loads or matmul; the groups take the staging buffer in turn, so this is the sum of the tiles' epilogues
  (session 6 added it after the runs recorded in ``results/power_probe_h200*.json``).
Each variant: a ``do_bench`` median, then ``--seconds`` of back-to-back launches with the clock and
power log (``nvidia-smi --query-gpu=... -lms 20``); the loop's time per launch is reported beside the
median SM clock, power draw and the throttle reasons seen.  The hypothesis under test (NOTES.md,
session 5): at B=256 the noise pushes the chip to its power limit and the clock drops.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import bench_ms  # noqa: E402
from benchmarks.probes.gluon import launch_gluon_probe  # noqa: E402
from flashsampling.kernels.stage1 import allocate_partials  # noqa: E402
from flashsampling.kernels.tiles import stage1_tiles  # noqa: E402

FIELDS = ["clocks.sm", "clocks.mem", "power.draw", "power.limit", "temperature.gpu", "clocks_event_reasons.active"]


def smi_fields() -> list[str]:
    """The query fields this nvidia-smi knows (older ones call the reasons ``clocks_throttle_reasons``)."""
    ok = []
    for f in FIELDS:
        for name in (f, f.replace("clocks_event_reasons", "clocks_throttle_reasons")):
            r = subprocess.run(["nvidia-smi", f"--query-gpu={name}", "--format=csv,noheader,nounits"],
                               capture_output=True, text=True)  # fmt: skip
            if r.returncode == 0 and "not a valid field" not in r.stdout.lower() + r.stderr.lower():
                ok.append(name)
                break
    return ok


def logged_loop(fn, seconds: float, fields: list[str]) -> dict:
    """Run ``fn`` back to back for ``seconds`` while nvidia-smi samples ``fields`` every 20 ms."""
    fn()
    torch.cuda.synchronize()
    log = subprocess.Popen(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits",
                            "-lms", "20"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    time.sleep(0.3)
    n, t0 = 0, time.perf_counter()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    while time.perf_counter() - t0 < seconds:
        for _ in range(50):
            fn()
        n += 50
        torch.cuda.synchronize()
    end.record()
    end.synchronize()
    log.terminate()
    out, _ = log.communicate(timeout=10)
    rows = [[c.strip() for c in line.split(",")] for line in out.strip().splitlines() if line.strip()]
    rec: dict = {"launches": n, "ms_per_launch": start.elapsed_time(end) / n, "samples": len(rows)}
    for i, f in enumerate(fields):
        vals = [r[i] for r in rows if len(r) == len(fields)]
        nums = []
        for v in vals:
            try:
                nums.append(float(v))
            except ValueError:
                pass
        if nums:
            rec[f] = {"median": statistics.median(nums), "min": min(nums), "max": max(nums)}
        else:
            rec[f] = sorted(set(vals))
    return rec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--B", type=int, default=256)
    ap.add_argument("--V", type=int, default=151936)
    ap.add_argument("--D", type=int, default=4096)
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    dev = torch.device("cuda")
    B, V, D = args.B, args.V, args.D
    gen = torch.Generator(device=dev).manual_seed(0)
    w = (torch.randn(V, D, device=dev, generator=gen) * 0.02).to(torch.bfloat16)
    h = torch.randn(B, D, device=dev, generator=gen).to(torch.bfloat16)
    inv = torch.ones(B, device=dev)
    tiles = stage1_tiles(h, w, 1)  # the Gluon kernel's tiles for this B
    parts = allocate_partials(B, 1, triton.cdiv(V, tiles.block_v), dev)
    logits = torch.empty(B, V, dtype=torch.bfloat16, device=dev)

    def gluon(noise=True, mode="sample"):
        return lambda: launch_gluon_probe(h, w, inv, parts, 5, 7, tiles, col_offset=0, n_rounds=10, noise=noise,
                                          mode=mode)  # fmt: skip

    variants = {"cublas": lambda: torch.matmul(h, w.T, out=logits), "bare": gluon(mode="bare"),
                "no_noise": gluon(noise=False), "noise": gluon(),
                "epilogue_alone": gluon(mode="epilogue"),
                "epilogue_alone_no_noise": gluon(noise=False, mode="epilogue")}  # fmt: skip
    fields = smi_fields()
    out = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "B": B, "V": V, "D": D,
           "tiles": str(tiles), "smi_fields": fields, "variants": {}}  # fmt: skip
    idle = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    out["idle"] = idle
    for name, fn in variants.items():
        rec = {"do_bench_ms": bench_ms(fn)}
        rec.update(logged_loop(fn, args.seconds, fields))
        out["variants"][name] = rec
        print(name, json.dumps(rec), flush=True)
        Path(args.out).write_text(json.dumps(out, indent=1))
    # Again in reverse order: the first variants ran on a cooler chip.
    for name in reversed(list(variants)):
        rec = {"do_bench_ms": bench_ms(variants[name])}
        rec.update(logged_loop(variants[name], args.seconds, fields))
        out["variants"][name + "/again"] = rec
        print(name + "/again", json.dumps(rec), flush=True)
        Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
