"""How long the Gluon kernel's epilogue takes alone, and beside the matmul (H200).

``python benchmarks/epilogue_probe.py --out benchmarks/results/epilogue_probe_h200.json``

For each tile configuration and batch size, ``do_bench`` medians (one process) of the kernel's modes
(:data:`benchmarks.probes.pipeline.MODES`): ``bare`` (the matmul and pipeline, a row maximum as the
epilogue), ``sample`` (the sampler) and ``epilogue`` (the sampler's epilogue alone on a synthetic
accumulator: no loads, no MMAs), each with the exact noise, the approximate filter (``_filtered``) and without
noise (``_no_noise``).  Derived, per program (one per SM):

* ``tiles_per_program``: ``ceil(tiles / programs)``;
* ``epilogue_alone_us``: the epilogue-alone time per tile.  With one staging buffer the groups' epilogues
  take it in turn, so the launch is the sum of the program's epilogues (time / tiles); with a buffer per
  group (``spg``) they overlap, and the figure is the time per tile of all groups together;
* ``period_model_us``: the epilogue that the sampler's time implies if a tile's period is
  ``max(M, (M + E) / NC)`` (``M``: the bare time per tile), i.e. ``E = NC * t - M`` when the epilogue
  does not hide.

If the epilogue alone is as slow as the period model says, the epilogue's own instruction stream is the
bottleneck; if it is much faster, it is slowed by the matmul running beside it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import traceback
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import bench_ms  # noqa: E402
from benchmarks.probes.gluon import launch_gluon_probe  # noqa: E402
from benchmarks.probes.tiles import ws_tiles  # noqa: E402
from flashsampling.kernels.hardware import num_programs  # noqa: E402
from flashsampling.kernels.stage1 import allocate_partials  # noqa: E402

# (block_b, block_v, block_d, num_stages, epilogue_v, warp_groups[, "spg"])
CONFIGS = {
    256: [(64, 256, 64, 4, 32, 2), (64, 128, 64, 6, 16, 3), (64, 128, 64, 5, 16, 3, "spg")],
    128: [(64, 256, 64, 4, 32, 2), (64, 128, 64, 5, 16, 3, "spg")],
}  # fmt: skip


def probe(h, w, cfg) -> dict:
    tiles = ws_tiles(*cfg[:6])
    spg = cfg[6:] == ("spg",)
    B, V = h.shape[0], w.shape[0]
    parts = allocate_partials(B, 1, triton.cdiv(V, tiles.block_v), h.device)
    inv = torch.ones(B, device=h.device)

    # The noise variants: the exact noise in every token, the approximate filter, none.
    noises = {"": (True, False), "_filtered": (True, True), "_no_noise": (False, False)}

    def launch(mode, suffix):
        noise, noise_filter = noises[suffix]
        return lambda: launch_gluon_probe(h, w, inv, parts, 5, 7, tiles, noise=noise, mode=mode, stage_per_group=spg,
                                          noise_filter=noise_filter)  # fmt: skip

    rec = {}
    for mode in ("bare", "sample", "epilogue"):
        for suffix in noises:
            if mode == "bare" and suffix:
                continue
            k = launch(mode, suffix)()
            torch.cuda.synchronize()
            rec[mode + suffix + "_ms"] = bench_ms(launch(mode, suffix))
            rec.setdefault("n_spills", {})[mode + suffix] = k.n_spills
    n_tiles = triton.cdiv(B, tiles.block_b) * triton.cdiv(V, tiles.block_v)
    per = math.ceil(n_tiles / num_programs(h.device, n_tiles))
    nc = tiles.warp_groups
    m_us = rec["bare_ms"] * 1e3 / per
    rec.update(tiles_per_program=per, bare_per_tile_us=m_us)
    for suffix in noises:
        rec["epilogue_alone" + suffix + "_us"] = rec["epilogue" + suffix + "_ms"] * 1e3 / per
        rec["period_model" + suffix + "_us"] = nc * rec["sample" + suffix + "_ms"] * 1e3 / per - m_us
    return rec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--V", type=int, default=151936)
    ap.add_argument("--D", type=int, default=4096)
    ap.add_argument("--batches", default=None, help="comma-separated batch sizes (default: those of CONFIGS)")
    ap.add_argument("--configs", default=None,
                    help="comma-separated configurations such as 64x256x64x4x32x2 or 64x128x64x5x16x3xspg "
                    "(default: CONFIGS)")  # fmt: skip
    args = ap.parse_args()
    configs_by_b = CONFIGS
    if args.batches or args.configs:
        batches = [int(b) for b in args.batches.split(",")] if args.batches else list(CONFIGS)
        parsed = None
        if args.configs:
            parsed = [tuple(int(f) if f.isdigit() else f for f in c.split("x")) for c in args.configs.split(",")]
        configs_by_b = {b: parsed or CONFIGS.get(b, []) for b in batches}
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    w = (torch.randn(args.V, args.D, device=dev, generator=gen) * 0.02).to(torch.bfloat16)
    out = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "V": args.V, "D": args.D, "rows": {}}
    for B, configs in configs_by_b.items():
        h = torch.randn(B, args.D, device=dev, generator=gen).to(torch.bfloat16)
        for cfg in configs:
            name = f"B{B}/" + "x".join(map(str, cfg))
            try:
                out["rows"][name] = probe(h, w, cfg)
            except Exception as e:  # noqa: BLE001
                out["rows"][name] = {"error": "".join(traceback.format_exception_only(e))[-1500:]}
            print(name, json.dumps(out["rows"][name]), flush=True)
            Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
