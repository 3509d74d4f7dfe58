"""The approximate filter of the Gluon kernels' fast pass against the exact noise in every token (H200).

``python benchmarks/filter_probe.py --out benchmarks/results/filter_probe_h200.json``

For each shape and batch size, the default tiles (:func:`~flashsampling.kernels.tiles.warp_specialized_tiles`)
with ``noise_filter`` on and off and without noise, and cuBLAS ``h @ W.T``, as ``do_bench`` medians in
interleaved rounds; and the two noise modes' candidates compared bit for bit (values, keys, indices, flags) on
the same inputs, at temperature 0.9 and at a high temperature where rows are near-uniform (``--temps``).

``--modes lse_proxy,lse_proxy_f64,lse_proxy_fixed`` also times those noise modes of the kernel (probes.gluon.NOISES:
the cost floor of sampling inside each tile by its inverse CDF, one uniform per row and tile).
``--kernel-modes bare,register_argmax,staged_bare`` times the kernel's timing modes (probes.pipeline.MODES), which
place the noise-free pipeline's cost; ``--base no_noise --temps ''`` skips the filter's runs and its comparison.
``--tiles 128x128x64x4x16x2`` also times the base runs and kernel modes with other tiles of the Gluon kernel
(``block_b x block_v x block_d x stages x epilogue_v x groups``; runs named ``<run>@<tiles>``).
``--filler 0,32,64`` also times the timing probes ``filler_ffma`` and ``filler_imad`` (``--filler-kinds``: also
``imul``, ``alu``, ``hilo``; probes.noise_probes: the noise-free scan plus that many steps of dependent FFMAs, 64-bit
or 32-bit products or rotate-XORs per token or pair), which price one epilogue instruction beside the MMAs.
``--philox-rounds 10,7,0`` also times both noise modes with fewer Philox rounds (``exact_r7``, ...): an
attribution experiment only (how much of the noise's cost is Philox's integer work); the library always runs
10 rounds, and fewer rounds are a different, unverified stream.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import bench_ms, probe_inputs, record_row  # noqa: E402
from benchmarks.probes.gluon import launch_gluon_probe  # noqa: E402
from benchmarks.probes.handoff import launch_handoff  # noqa: E402
from benchmarks.probes.tiles import ws_tiles  # noqa: E402
from flashsampling.kernels.stage1 import allocate_partials  # noqa: E402
from flashsampling.kernels.tiles import warp_specialized_tiles  # noqa: E402

#: The default runs: name -> (noise, noise_filter).
BASE_RUNS = {"filtered": (True, True), "exact": (True, False), "no_noise": (False, False)}


def launcher(h, w, inv, tiles, noise: bool, noise_filter: bool, n_rounds: int = 10, noise_mode=None, mode=None):
    parts = allocate_partials(h.shape[0], 1, triton.cdiv(w.shape[0], tiles.block_v), h.device)
    extra = {} if noise_mode is None else {"noise_mode": noise_mode}
    if mode is not None:
        extra["mode"] = mode

    def run():
        if getattr(tiles, "handoff", False):
            launch_handoff(h, w, inv, parts, 11, 12, tiles, n_rounds=n_rounds, noise=noise)
        else:
            launch_gluon_probe(h, w, inv, parts, 11, 12, tiles, n_rounds=n_rounds, noise=noise,
                               noise_filter=noise_filter, **extra)  # fmt: skip
        return parts

    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default="151936:4096", help="comma-separated V:D")
    ap.add_argument("--batches", default="64,128,256")
    ap.add_argument("--temps", default="0.9,100")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--philox-rounds", default="10", help="comma-separated Philox round counts to time")
    ap.add_argument("--modes", default="", help="comma-separated extra noise modes to time (probes.gluon.NOISES, "
                    "such as lse_proxy,lse_proxy_f64,lse_proxy_fixed; threefry_proxy:20 sets N_ROUNDS)")  # fmt: skip
    ap.add_argument("--kernel-modes", default="", help="comma-separated timing modes of the kernel, without noise "
                    "(probes.pipeline.MODES keys: bare, register_argmax, staged_bare)")  # fmt: skip
    ap.add_argument("--base", default=",".join(BASE_RUNS), help="which of the default runs to time (BASE_RUNS keys)")
    ap.add_argument("--tiles", default="", help="comma-separated other Gluon tiles for the base runs and kernel modes, "
                    "each block_b x block_v x block_d x stages x epilogue_v x groups")  # fmt: skip
    ap.add_argument("--filler", default="", help="comma-separated step counts for the filler probes")
    ap.add_argument("--filler-kinds", default="ffma,imad",
                    help="which filler probes (probes.gluon.NOISES filler_<kind>)")  # fmt: skip
    args = ap.parse_args()
    dev = torch.device("cuda")
    out = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "rows": {}}
    for V, D, B, h, w in probe_inputs(args.shapes, args.batches, dev):
        tiles = warp_specialized_tiles(B)
        rec = {"tiles": repr(tiles), "equal": {}, "rounds": []}
        for t in (float(x) for x in filter(None, args.temps.split(","))):
            inv = torch.full((B,), 1.0 / t, device=dev)
            inv[0] = 0.0  # one greedy row
            a = [x.clone() for x in launcher(h, w, inv, tiles, True, True)()[:4]]
            b = launcher(h, w, inv, tiles, True, False)()[:4]
            rec["equal"][f"T={t}"] = [bool(torch.equal(x, y)) for x, y in zip(a, b)]
        inv = torch.full((B,), 1.0 / 0.9, device=dev)
        runs = {}
        other = {f"@{x}": ws_tiles(*map(int, x.split("x"))) for x in filter(None, args.tiles.split(","))}
        for name, t in {"": tiles, **other}.items():
            runs.update({k + name: launcher(h, w, inv, t, *BASE_RUNS[k]) for k in filter(None, args.base.split(","))})
            for kmode in filter(None, args.kernel_modes.split(",")):
                runs[f"mode_{kmode}{name}"] = launcher(h, w, inv, t, False, False, mode=kmode)
        for spec in filter(None, args.modes.split(",")):
            mode, _, n = spec.partition(":")  # "threefry_proxy:20": the mode with its own N_ROUNDS
            runs[spec] = launcher(h, w, inv, tiles, True, False, int(n or 10), noise_mode=mode)
        for k in (int(x) for x in filter(None, args.filler.split(","))):
            for kind in args.filler_kinds.split(","):
                runs[f"filler_{kind}_{k}"] = launcher(h, w, inv, tiles, True, False, k, noise_mode=f"filler_{kind}")
        for r in (int(x) for x in args.philox_rounds.split(",")):
            if r != 10:
                runs[f"filtered_r{r}"] = launcher(h, w, inv, tiles, True, True, r)
                runs[f"exact_r{r}"] = launcher(h, w, inv, tiles, True, False, r)
        for _ in range(args.rounds):
            times = {"cublas": bench_ms(lambda h=h, w=w: h @ w.T)}
            times.update({k: bench_ms(f) for k, f in runs.items()})
            rec["rounds"].append(times)
        record_row(out, f"{V}x{D}/B{B}", rec, args.out, show=("equal", "min_ms"))


if __name__ == "__main__":
    main()
