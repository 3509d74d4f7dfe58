"""Where the stage-1 kernel's local memory at small B comes from (NOTES session 9 §7).

``python benchmarks/spill_probe.py --out DIR`` compiles, for each B, the stage-1 kernel that ``sample()``
runs on (151936, 4096) and records three views of its local memory:

* ``n_spills`` / ``n_regs``: what Triton's loader reports from the driver (``cuFuncGetAttribute``);
* ``cuobjdump --dump-resource-usage`` of the cubin that Triton cached;
* ``ptxas -v`` rerun on the cached PTX with the same architecture.

The cubins and PTX are written to DIR for inspection.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.probes.stage1 import launch_stage1_probe  # noqa: E402
from flashsampling._validate import inverse_temperature  # noqa: E402
from flashsampling.kernels.tiles import stage1_tiles  # noqa: E402

BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"


def tool(name: str, *args: str) -> str:
    run = subprocess.run([str(BIN / name), *args], capture_output=True, text=True)
    return (run.stdout + run.stderr).strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--batches", default="1,2,4,8,16,32")
    parser.add_argument("--after-inductor", action="store_true",
                        help="first run a torch.compile'd sampler in this process, as the harness does")  # fmt: skip
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    V, D = 151936, 4096
    w = (torch.randn(V, D, device="cuda") * 0.02).to(torch.bfloat16)
    arch = f"sm_{torch.cuda.get_device_capability()[0]}{torch.cuda.get_device_capability()[1]}a"
    rows = []
    if args.after_inductor:
        gumbel = torch.compile(lambda z: torch.argmax(z.float() - torch.log(-torch.log(torch.rand_like(z.float())))))
        gumbel(torch.randn(2, D, device="cuda").to(torch.bfloat16) @ w.T)
        torch.cuda.synchronize()
    for B in (int(b) for b in args.batches.split(",")):
        h = torch.randn(B, D, device="cuda").to(torch.bfloat16)
        tiles = stage1_tiles(h, w, 1)
        inv = inverse_temperature(0.9, B, h.device)[0]
        compiled: list = []
        launch_stage1_probe(h, w, inv, 1, 2, 1, tiles, compiled=compiled)
        k = compiled[0]
        stem = out / f"stage1_B{B}"
        stem.with_suffix(".cubin").write_bytes(k.asm["cubin"])
        stem.with_suffix(".ptx").write_text(k.asm["ptx"])
        usage = tool("cuobjdump", "--dump-resource-usage", str(stem.with_suffix(".cubin")))
        ptxas = tool("ptxas", "-v", f"--gpu-name={arch}", str(stem.with_suffix(".ptx")), "-o", "/dev/null")
        meta = {name: getattr(k.metadata, name, None) for name in ("num_warps", "num_stages", "maxnreg", "arch")}
        rec = {"B": B, "tiles": list(vars(tiles).values()), "n_regs": k.n_regs, "n_spills": k.n_spills,
               "cuobjdump_local": re.findall(r"LOCAL:(\d+)", usage),
               "cuobjdump_stack": re.findall(r"STACK:(\d+)", usage),
               "ptxas_v": [line for line in ptxas.splitlines() if "spill" in line or "stack" in line.lower()],
               "metadata": meta}  # fmt: skip
        print(json.dumps(rec), flush=True)
        rows.append(rec)
    (out / "spill_probe.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
