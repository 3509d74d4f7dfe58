"""Launch the default stage-1 kernel a few times, for Nsight Compute to profile one launch.

``ncu --kernel-name regex:stage1_kernel\\|persistent_kernel\\|pingpong_kernel\\|pipeline_kernel --launch-skip 2 \\
     --launch-count 1 \\
     --section SpeedOfLight --section WarpStateStats --section SchedulerStats \\
     python benchmarks/ncu_probe.py --B 256``

For the pipes that the noise keeps busy (the open question of NOTES session 8), compare
``--ws-tiles 64,256,64,4,32,2 --noise exact``, ``--noise filtered`` and ``--noise off`` under
``--metrics regex:sm__inst_executed_pipe_.*,regex:sm__pipe_.*_cycles_active.*``.

``--cublas`` launches cuBLAS's ``h @ W.T`` (``--kernel-name regex:gemm|xmma|sm90``), ``--coop-stages 4 --mode bare``
the cooperative probe (kernel ``cooperative_probe_kernel``): the shared-memory traffic of session 13.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.probes.cooperative import launch_cooperative_probe  # noqa: E402
from benchmarks.probes.gluon import launch_gluon_probe  # noqa: E402
from benchmarks.probes.pipeline import MODES  # noqa: E402
from benchmarks.probes.tiles import ws_tiles  # noqa: E402
from flashsampling import TileConfig  # noqa: E402
from flashsampling.kernels.stage1 import allocate_partials, launch_fused_stage1  # noqa: E402
from flashsampling.kernels.tiles import stage1_tiles  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--B", type=int, default=256)
    ap.add_argument("--V", type=int, default=151936)
    ap.add_argument("--D", type=int, default=4096)
    ap.add_argument("--tiles", default=None, help="comma-separated TileConfig fields (default: default_tiles)")
    ap.add_argument("--ws-tiles", default=None,
                    help="the Gluon kernel's block_b,block_v,block_d,num_stages,epilogue_v,warp_groups (launched "
                    "directly, in any mode)")  # fmt: skip
    ap.add_argument("--no-noise", action="store_true")
    ap.add_argument("--noise", default=None, choices=["exact", "filtered", "off"],
                    help="with --ws-tiles or a timing mode: the Gluon kernel's noise (default: exact, or off with "
                    "--no-noise)")  # fmt: skip
    ap.add_argument("--philox-rounds", type=int, default=10,
                    help="with --ws-tiles: Philox rounds (an attribution experiment; the library runs 10)")  # fmt: skip
    ap.add_argument("--noise-mode", default=None,
                    help="with --ws-tiles: one of benchmarks.probes.gluon.NOISES; overrides --noise")  # fmt: skip
    ap.add_argument("--cublas", action="store_true", help="launch cuBLAS's h @ W.T instead (its kernel for ncu)")
    ap.add_argument("--coop-stages", type=int, default=0,
                    help="launch the cooperative probe (probes/cooperative.py: 128 x 256 tiles, this many ring "
                    "stages) in --mode bare or register_argmax instead")  # fmt: skip
    ap.add_argument("--mode", default="sample", choices=sorted(MODES),
                    help="the Gluon kernel's timing modes (benchmarks.probes.pipeline.MODES; kernel "
                    "probe_pipeline_kernel)")  # fmt: skip
    args = ap.parse_args()
    w = (torch.randn(args.V, args.D, device="cuda") * 0.02).to(torch.bfloat16)
    h = torch.randn(args.B, args.D, device="cuda").to(torch.bfloat16)
    inv = torch.ones(args.B, device="cuda")
    if args.ws_tiles:
        tiles = ws_tiles(*(int(x) for x in args.ws_tiles.split(",")))
    elif args.tiles:
        fields = [int(x) for x in args.tiles.split(",")]
        tiles = TileConfig(*fields[:6], persistent=bool(fields[6]) if len(fields) > 6 else False)
    else:
        tiles = stage1_tiles(h, w, 1)  # what sample() runs (the Gluon kernel above B=32 on sm_90)
    for _ in range(4):
        if args.cublas:
            _ = h @ w.T
        elif args.coop_stages:
            coop = ws_tiles(128, 256, 64, args.coop_stages, 32)
            parts = allocate_partials(args.B, 1, triton.cdiv(args.V, coop.block_v), h.device)
            launch_cooperative_probe(h, w, inv, parts, coop, mode=args.mode)
        elif args.mode != "sample" or args.ws_tiles:
            parts = allocate_partials(args.B, 1, triton.cdiv(args.V, tiles.block_v), h.device)
            noise = args.noise or ("off" if args.no_noise else "exact")
            launch_gluon_probe(h, w, inv, parts, 5, 7, tiles, n_rounds=args.philox_rounds, noise=noise != "off",
                               mode=args.mode, noise_filter=noise == "filtered",
                               noise_mode=args.noise_mode)  # fmt: skip
        else:
            launch_fused_stage1(h, w, inv, 5, 7, 1, tiles, noise=not args.no_noise)
    torch.cuda.synchronize()
    print(tiles)


if __name__ == "__main__":
    main()
