"""The shared-memory ceiling of the ping-pong kernel's 64-row tiles, against 128-row tiles that two MMA warp
groups share (benchmarks/probes/cooperative.py), on the H200.

``python benchmarks/coop_probe.py --out benchmarks/results/coop_probe_h200.json``

For each shape and batch size, in interleaved rounds of ``do_bench`` medians: cuBLAS ``h @ W.T``; the ping-pong
kernel with its default tiles in its timing modes ``bare`` and ``register_argmax`` and as the sampler (exact noise,
and none); the cooperative probe (``128 x 256`` tiles, ``--stages``) in both timing modes; with ``--fill``, the
bare probe with ``steps`` dependent instructions of one kind per K step on two values per thread, issued by the
MMA warps while their MMAs are in flight (what the noise's instructions would cost there).  Before timing, the
cooperative ``register_argmax`` candidates are compared bit for bit with the ping-pong kernel's on ``64 x 256``
tiles (each row's maximum of ``z / T`` and its column): the same MMAs in the same order, so they must be equal.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import bench_ms, probe_inputs, record_row  # noqa: E402
from benchmarks.filter_probe import launcher  # noqa: E402
from benchmarks.probes.cooperative import COOPERATIVE_MODES, launch_cooperative_probe  # noqa: E402
from benchmarks.probes.tiles import ws_tiles  # noqa: E402
from flashsampling.kernels.stage1 import allocate_partials  # noqa: E402
from flashsampling.kernels.tiles import warp_specialized_tiles  # noqa: E402


def cooperative(h, w, inv, tiles, mode: str, fill: tuple[str, int] = ("ffma", 0)):
    parts = allocate_partials(h.shape[0], 1, triton.cdiv(w.shape[0], tiles.block_v), h.device)

    def run():
        launch_cooperative_probe(h, w, inv, parts, tiles, mode=mode, fill=fill)
        return parts

    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default="151936:4096,201088:2880,128256:8192", help="comma-separated V:D")
    ap.add_argument("--batches", default="128,256")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--stages", default="4,3", help="comma-separated ring depths of the cooperative probe")
    ap.add_argument("--fill", default="", help="the bare probe (4 stages) with work in its K loop: "
                    "kind:steps,steps;kind:steps (kinds: cooperative.FILL_KINDS), e.g. imad:10,20;ffma:20")  # fmt: skip
    args = ap.parse_args()
    dev = torch.device("cuda")
    out = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "rows": {}}
    for V, D, B, h, w in probe_inputs(args.shapes, args.batches, dev):
        tiles = warp_specialized_tiles(B)
        inv = torch.full((B,), 1.0 / 0.9, device=dev)
        rec = {"tiles": repr(tiles), "equal": {}, "rounds": []}
        ref = [x.clone() for x in launcher(h, w, inv, ws_tiles(64, 256, 64, 4, 32), False, False,
                                           mode="register_argmax")()[:3]]  # fmt: skip
        runs = {"pp_exact": launcher(h, w, inv, tiles, True, False)}
        runs["pp_no_noise"] = launcher(h, w, inv, tiles, False, False)
        runs.update({f"pp_{m}": launcher(h, w, inv, tiles, False, False, mode=m) for m in COOPERATIVE_MODES})
        for st in (int(x) for x in args.stages.split(",")):
            ct = ws_tiles(128, 256, 64, st, 32)
            got = cooperative(h, w, inv, ct, "register_argmax")()
            torch.cuda.synchronize()
            rec["equal"][f"stages={st}"] = [bool(torch.equal(ref[0], got[0])), bool(torch.equal(ref[2], got[2]))]
            runs.update({f"coop_{m}_s{st}": cooperative(h, w, inv, ct, m) for m in COOPERATIVE_MODES})
        for spec in filter(None, args.fill.split(";")):
            kind, _, counts = spec.partition(":")
            for n in (int(x) for x in counts.split(",")):
                tiles4 = ws_tiles(128, 256, 64, 4, 32)
                runs[f"coop_bare_s4_{kind}{n}"] = cooperative(h, w, inv, tiles4, "bare", (kind, n))
        for _ in range(args.rounds):
            times = {"cublas": bench_ms(lambda h=h, w=w: h @ w.T)}
            times.update({k: bench_ms(f) for k, f in runs.items()})
            rec["rounds"].append(times)
        record_row(out, f"{V}x{D}/B{B}", rec, args.out, show=("equal", "min_ms"))


if __name__ == "__main__":
    main()
