"""The warp-specialized Gluon stage 1 (flashsampling/kernels/pingpong.py) on the H200: check, then time.

``python benchmarks/pingpong_sweep.py --out benchmarks/results/pingpong_sweep_h200.json``

Checks (small shapes, then every timed shape): the Gluon kernel's candidates against the unstaged
Triton kernel with the same 128-column tiles (indices, scores, flags), exact float32 ties from
repeated weight rows, and the tokens of the shipped defaults.  Timing (``do_bench`` medians, one
process): cuBLAS ``h @ W.T``, the shipped defaults, and the Gluon kernel over ring depths, epilogue
chunk widths and tile shapes, with and without noise.  Results are written after every row.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import bench_ms  # noqa: E402
from benchmarks.probes.gluon import launch_gluon_probe  # noqa: E402
from benchmarks.probes.stage1 import launch_stage1_probe  # noqa: E402
from benchmarks.probes.tiles import ws_tiles  # noqa: E402
from flashsampling import TileConfig  # noqa: E402
from flashsampling.kernels.stage1 import allocate_partials  # noqa: E402
from flashsampling.kernels.stage2 import reduce_tiles  # noqa: E402
from flashsampling.kernels.tiles import default_tiles  # noqa: E402

# (block_b, block_v, block_d, num_stages, epilogue_v, consumer registers[, epilogue]).  v1
# (results/pingpong_sweep_h200_v1.json): the epilogue staged through scratch.  v2: epilogue "regs" (chunks
# as register views of the accumulator) against "staged".
CONFIGS_V1 = {
    64: [(64, 128, 64, 6, 16, 232), (64, 256, 64, 4, 16, 232), (128, 128, 64, 6, 16, 232)],
    128: [(128, 128, 64, 4, 16, 232), (128, 128, 64, 6, 16, 232), (128, 128, 64, 6, 8, 232), (64, 256, 64, 4, 16, 232)],
    256: [(128, 128, 64, 4, 16, 232), (128, 128, 64, 6, 16, 232), (128, 128, 64, 6, 8, 232), (64, 256, 64, 4, 16, 232)],
}
CONFIGS_V2 = {
    256: [
        (128, 128, 64, 4, 16, 232, "staged"),
        (128, 128, 64, 4, 16, 232, "regs"),
        (128, 128, 64, 4, 32, 232, "regs"),
        (64, 256, 64, 4, 32, 232, "regs"),
    ],
    128: [(128, 128, 64, 4, 16, 232, "regs"), (128, 128, 64, 6, 16, 232, "regs"), (64, 256, 64, 4, 32, 232, "regs")],
    64: [(64, 128, 64, 6, 16, 232, "regs"), (64, 128, 64, 6, 32, 232, "regs")],
}
# v3 (the register-view epilogue removed): (block_b, block_v, block_d, num_stages, epilogue_v, warp_groups);
# consumer registers: the kernel's default for the group count (240 for 2 groups, 160 for 3).
CONFIGS_V3 = {
    256: [(64, 256, 64, 4, 16, 2), (128, 128, 64, 4, 16, 2), (64, 128, 64, 6, 16, 3), (64, 128, 64, 4, 16, 3)],
    128: [(128, 128, 64, 4, 16, 2), (64, 128, 64, 6, 16, 3), (64, 128, 64, 4, 16, 3), (64, 256, 64, 4, 16, 2)],
    64: [(64, 128, 64, 6, 16, 2), (64, 128, 64, 6, 16, 3), (64, 128, 64, 4, 16, 3)],
}
# v4: B=256, a deeper ring or wider chunks for the 64 x 256 tiles.
CONFIGS_V4 = {256: [(64, 256, 64, 4, 16, 2), (64, 256, 64, 5, 16, 2), (64, 256, 64, 4, 32, 2)]}
# v5 (session 5): the fast pass (per-thread running maxima, one reduction per tile) and positive_log.
CONFIGS_V5 = {
    256: [(64, 256, 64, 4, 32, 2), (64, 256, 64, 4, 16, 2), (64, 256, 64, 5, 32, 2), (64, 128, 64, 6, 16, 3)],
    128: [(64, 128, 64, 6, 16, 3), (64, 128, 64, 6, 32, 3), (64, 256, 64, 4, 32, 2)],
    64: [(64, 128, 64, 6, 16, 3), (64, 128, 64, 6, 32, 3)],
}
# v6 (session 6, prepared, not yet run): shared-memory staging, one buffer taken in turn (the default) against
# one buffer per consumer group ("spg", launch_gluon_probe(stage_per_group=True)), which needs a shallower ring.
CONFIGS = {
    256: [(64, 256, 64, 4, 32, 2), (64, 256, 64, 2, 32, 2, "spg"), (64, 128, 64, 6, 16, 3),
          (64, 128, 64, 5, 16, 3, "spg"), (64, 128, 64, 4, 16, 3, "spg")],
    128: [(64, 256, 64, 4, 32, 2), (64, 128, 64, 6, 16, 3), (64, 128, 64, 5, 16, 3, "spg")],
    64: [(64, 128, 64, 6, 16, 3), (64, 128, 64, 5, 16, 3, "spg")],
}  # fmt: skip


def compare_candidates(h, w, inv, tiles, ref_tiles, col_offset=0) -> dict:
    """Candidates of ``tiles`` (Gluon) against ``ref_tiles`` (unstaged Triton, same block_v)."""
    V = w.shape[0]
    ks = []
    a = launch_stage1_probe(h, w, inv, 11, 12, 1, tiles, col_offset=col_offset, compiled=ks)
    b = launch_stage1_probe(h, w, inv, 11, 12, 1, ref_tiles, col_offset=col_offset)
    ta, tb = reduce_tiles(*a[:4], V)[0], reduce_tiles(*b[:4], V)[0]
    torch.cuda.synchronize()
    return {
        "kernel": getattr(ks[0], "name", "?"),
        "n_regs": getattr(ks[0], "n_regs", None),
        "n_spills": getattr(ks[0], "n_spills", None),
        "idx_agree": float((a[2] == b[2]).float().mean()),
        "max_abs_diff": float((a[0] - b[0]).abs().max()),
        "flags_equal": bool(torch.equal(a[3], b[3])),
        "token_agree": float((ta == tb).float().mean()),
    }


def checks(dev) -> list:
    out = []
    gen = torch.Generator(device=dev).manual_seed(1)
    ref = TileConfig(128, 128, 64, num_warps=8, num_stages=3)
    for B, V, D in [(37, 1000, 256), (128, 5000, 512), (256, 3001, 192), (1, 515, 64), (300, 2000, 128)]:
        h = torch.randn(B, D, device=dev, generator=gen).to(torch.bfloat16)
        w = (torch.randn(V, D, device=dev, generator=gen) * 0.3).to(torch.bfloat16)
        inv = torch.linspace(0.0, 2.0, B, device=dev)
        rec = {"shape": [B, V, D], **compare_candidates(h, w, inv, ws_tiles(128, 128, 64, 4, 16), ref)}
        out.append(rec)
        print(rec, flush=True)
    # Several tiles per program (the two consumer groups take turns): 1, 2 and 3 programs.
    h = torch.randn(256, 192, device=dev, generator=gen).to(torch.bfloat16)
    w = (torch.randn(3001, 192, device=dev, generator=gen) * 0.3).to(torch.bfloat16)
    inv = torch.linspace(0.0, 2.0, 256, device=dev)
    b = launch_stage1_probe(h, w, inv, 11, 12, 1, ref)
    for progs, groups in ((1, 2), (3, 2), (1, 3), (3, 3), (7, 3), (None, 3)):
        a = allocate_partials(256, 1, b[0].shape[-1], dev)
        tc = ws_tiles(128, 128, 64, 4, 16) if groups == 2 else ws_tiles(64, 128, 64, 4, 16, 3)
        launch_gluon_probe(h, w, inv, a, 11, 12, tc, programs=progs)
        torch.cuda.synchronize()
        rec = {"shape": [256, 3001, 192], "programs": progs, "groups": groups,
               "idx_agree": float((a[2] == b[2]).float().mean()),
               "max_abs_diff": float((a[0] - b[0]).abs().max()),
               "flags_equal": bool(torch.equal(a[3], b[3]))}  # fmt: skip
        out.append(rec)
        print(rec, flush=True)
    # Exact ties: 8 weight rows repeated, greedy rows tie at their max.
    h = torch.randn(64, 64, device=dev, generator=gen).to(torch.bfloat16)
    w = torch.randn(8, 64, device=dev, generator=gen).to(torch.bfloat16).repeat(300, 1)
    inv = torch.where(torch.arange(64, device=dev) % 2 == 0, 0.0, 1.0)
    rec = {"shape": "ties", **compare_candidates(h, w, inv, ws_tiles(128, 128, 64, 4, 16), ref)}
    out.append(rec)
    print(rec, flush=True)
    rec = {"shape": "ties/3 groups", **compare_candidates(h, w, inv, ws_tiles(64, 128, 64, 4, 16, 3), ref)}
    out.append(rec)
    print(rec, flush=True)
    # NaN row: flagged in both.
    h[3, 5] = float("nan")
    rec = {"shape": "nan", **compare_candidates(h, w, inv, ws_tiles(128, 128, 64, 4, 16), ref)}
    out.append(rec)
    print(rec, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", default="256,128,64")
    ap.add_argument("--no-checks", action="store_true", help="skip the correctness checks (tests/test_pingpong.py)")
    ap.add_argument("--V", type=int, default=151936)
    ap.add_argument("--D", type=int, default=4096)
    args = ap.parse_args()
    dev = torch.device("cuda")
    out = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__,
           "V": args.V, "D": args.D, "rows": []}  # fmt: skip
    try:
        out["checks"] = "skipped" if args.no_checks else checks(dev)
    except Exception as e:  # noqa: BLE001
        out["checks"] = {"error": "".join(traceback.format_exception(e))[-3000:]}
        print(out["checks"]["error"], flush=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    V, D = args.V, args.D
    gen = torch.Generator(device=dev).manual_seed(0)
    w = (torch.randn(V, D, device=dev, generator=gen) * 0.02).to(torch.bfloat16)
    for B in [int(b) for b in args.batches.split(",")]:
        h = torch.randn(B, D, device=dev, generator=gen).to(torch.bfloat16)
        inv = torch.full((B,), 1.0, device=dev)
        row = {"B": B, "cublas_bf16": bench_ms(lambda h=h: h @ w.T)}
        t = default_tiles(B, V, D)

        def run(tc, h=h, inv=inv, **kw):
            return reduce_tiles(*launch_stage1_probe(h, w, inv, 5, 7, 1, tc, **kw)[:4], V)[0]

        ref = run(t)
        row["default"] = bench_ms(lambda t=t: run(t))
        row["default_no_noise"] = bench_ms(lambda t=t: run(t, noise=False))
        for cfg in CONFIGS.get(B, []):
            name = "ws/" + "x".join(map(str, cfg))
            try:
                tc = ws_tiles(*cfg[:6])
                spg = cfg[6:] == ("spg",)

                def run_ws(tc=tc, noise=True, h=h, inv=inv, spg=spg):
                    parts = allocate_partials(h.shape[0], 1, triton.cdiv(V, tc.block_v), dev)
                    k = launch_gluon_probe(h, w, inv, parts, 5, 7, tc, noise=noise, stage_per_group=spg)
                    return reduce_tiles(*parts[:4], V)[0], k

                t0 = time.time()
                tok, k = run_ws()
                torch.cuda.synchronize()
                rec = {"compile_s": round(time.time() - t0, 1), "kernel": k.name, "n_regs": k.n_regs,
                       "n_spills": k.n_spills, "agree": float((tok == ref).float().mean())}  # fmt: skip
                rec["ms"] = bench_ms(lambda run_ws=run_ws: run_ws())
                rec["ms_no_noise"] = bench_ms(lambda run_ws=run_ws: run_ws(noise=False))
                row[name] = rec
            except Exception as e:  # noqa: BLE001
                row[name] = {"error": "".join(traceback.format_exception_only(e))[-1500:]}
            print(B, name, row[name], flush=True)
        print({k: v for k, v in row.items() if not isinstance(v, dict)}, flush=True)
        out["rows"].append(row)
        Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
