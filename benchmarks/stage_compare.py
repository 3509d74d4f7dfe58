"""Two versions of the Gluon kernel side by side on the H200: candidates bit for bit, then time.

``git show REV:flashsampling/kernels/pingpong.py | sed 's/from \\.\\./from flashsampling./; s/from \\.persistent/from
flashsampling.kernels.persistent/' > /tmp/prev.py`` then
``python benchmarks/stage_compare.py --prev /tmp/prev.py --out benchmarks/results/stage_compare_h200.json``

Session 6 compared the epilogue staged through a global scratch slot per consumer group (the previous
kernel) with one shared-memory staging buffer that the groups' epilogues take in tile order (this one).
For each B: cuBLAS ``h @ W.T``; each version with noise and without; this version's bare timing
baseline (the matmul and pipeline, each row's maximum logit only); and the candidates of both versions
compared (scores, indices, flags), which must be equal bit for bit.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import bench_ms  # noqa: E402
from benchmarks.probes.gluon import launch_gluon_probe  # noqa: E402
from benchmarks.probes.tiles import warp_groups, ws_tiles  # noqa: E402
from flashsampling.kernels.stage1 import allocate_partials  # noqa: E402
from flashsampling.kernels.tiles import warp_specialized_tiles  # noqa: E402


def load_module(path: str):
    spec = importlib.util.spec_from_file_location("pingpong_prev", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def launcher(launch, h, w, inv, parts, tiles, **kw):
    """A launch of a version's Gluon kernel (``launch``: its ``launch_pingpong``, or this tree's probe launcher) into
    ``parts`` (fixed seed), for the timer."""
    return lambda: launch(h, w, inv, parts, 5, 7, tiles, col_offset=0, n_rounds=10, **kw)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prev", required=True,
                    help="the previous pingpong.py, imports made absolute; several, comma-separated, are tagged "
                    "prev, prev2, ...")  # fmt: skip
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", default="256,128,64")
    ap.add_argument("--V", type=int, default=151936)
    ap.add_argument("--D", type=int, default=4096)
    ap.add_argument("--extra", default="64x128x64x6x16x3,128x128x64x4x16x2",
                    help="more tiles (bb x bv x bd x stages x ev x groups), timed at B > 64")  # fmt: skip
    args = ap.parse_args()
    versions = [("prev" if i == 0 else f"prev{i + 1}", load_module(p).launch_pingpong)
                for i, p in enumerate(args.prev.split(","))]  # fmt: skip
    versions.append(("new", launch_gluon_probe))
    dev = torch.device("cuda")
    V, D = args.V, args.D
    gen = torch.Generator(device=dev).manual_seed(0)
    w = (torch.randn(V, D, device=dev, generator=gen) * 0.02).to(torch.bfloat16)
    out = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "V": V, "D": D, "rows": []}
    for B in [int(b) for b in args.batches.split(",")]:
        h = torch.randn(B, D, device=dev, generator=gen).to(torch.bfloat16)
        inv = torch.linspace(0.5, 1.5, B, device=dev)
        inv[::7] = 0.0  # some greedy rows
        row: dict = {"B": B, "cublas": bench_ms(lambda h=h: h @ w.T)}
        configs = [warp_specialized_tiles(B)]
        if B > 64:
            for spec in args.extra.split(","):
                configs.append(ws_tiles(*map(int, spec.split("x"))))
        for tiles in configs:
            t = tiles
            fields = (t.block_b, t.block_v, t.block_d, t.num_stages, t.epilogue_v, warp_groups(t))
            name = "x".join(map(str, fields))
            rec: dict = {}
            try:
                parts = {}
                for tag, launch in versions:
                    p = allocate_partials(B, 1, triton.cdiv(V, tiles.block_v), dev)
                    k = launch(h, w, inv, p, 5, 7, tiles, col_offset=0, n_rounds=10, noise=True)
                    torch.cuda.synchronize()
                    parts[tag] = p
                    rec[f"{tag}_regs"], rec[f"{tag}_spills"] = k.n_regs, k.n_spills
                    rec[f"{tag}_shared"] = k.metadata.shared
                b = parts["new"]
                for tag, _ in versions[:-1]:
                    a = parts[tag]
                    same = torch.equal(a[0], b[0]) and torch.equal(a[2], b[2]) and torch.equal(a[3], b[3])
                    rec["equal" if tag == "prev" else f"equal_{tag}"] = bool(same)
                for tag, launch in versions:
                    for noise in (True, False):
                        rec[f"{tag}_{'noise' if noise else 'no_noise'}"] = bench_ms(
                            launcher(launch, h, w, inv, parts[tag], tiles, noise=noise)
                        )
                rec["bare"] = bench_ms(launcher(launch_gluon_probe, h, w, inv, parts["new"], tiles, noise=False,
                                                mode="bare"))  # fmt: skip
            except Exception as e:  # noqa: BLE001
                rec["error"] = repr(e)[-1500:]
            row[name] = rec
            print(B, name, json.dumps(rec), flush=True)
        out["rows"].append(row)
        Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
