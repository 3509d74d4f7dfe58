"""The cooperative timing probe (flashsampling/kernels/cooperative.py): 128-row tiles shared by two MMA warp groups.

On any machine: it compiles for sm_90a without register spills in both of its epilogues and with work in its K
loop, and rejects arguments it does not support.  On an sm_90 GPU: each row's maximum of ``z / T`` and its column
equal, bit for bit, those of the ping-pong kernel's ``register_argmax`` mode on ``64 x 256`` tiles (the same MMAs in
the same order), with partial row and column tiles and several tiles per program.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton

import flashsampling
from flashsampling.kernels.cooperative import FILL_KINDS, launch_cooperative_probe
from flashsampling.kernels.fused import TileConfig, allocate_partials
from flashsampling.kernels.pingpong import launch_pingpong, launch_registers

PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9 and not flashsampling.INTERPRET
ROOT = Path(__file__).resolve().parents[1]
COOP = TileConfig(128, 256, 64, num_warps=4, num_stages=4, epilogue_v=32, warp_specialized=True, warp_groups=2)
PINGPONG = TileConfig(64, 256, 64, num_warps=4, num_stages=4, epilogue_v=32, warp_specialized=True, warp_groups=2)

COMPILE = """
import sys
from flashsampling.kernels.cooperative import compile_cooperative_offline
from flashsampling.kernels.fused import TileConfig
mode, kind, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
tiles = TileConfig(128, 256, 64, num_warps=4, num_stages=4, epilogue_v=32, warp_specialized=True, warp_groups=2)
k = compile_cooperative_offline(tiles, mode, (kind, steps))
open(sys.argv[4], "w").write(k.asm["ptx"])
print(k.metadata.shared)
"""


@pytest.mark.skipif(not PTXAS.exists(), reason="triton without ptxas")
@pytest.mark.parametrize("mode,fill", [("bare", ("ffma", 0)), ("register_argmax", ("ffma", 0)), ("bare", ("imad", 10))])
def test_cooperative_probe_compiles_without_spills(mode, fill, tmp_path):
    """Four 48 KB ring slots fit the shared memory (227 KB), and ptxas builds the kernel within the launch's 168
    registers without spills; its MMAs are 64 x 256 x 16 per warp group, and the imad filler has its 64-bit products."""
    env = {**os.environ, "FLASHSAMPLING_INTERPRET": "0", "PYTHONPATH": str(ROOT)}
    env.pop("TRITON_INTERPRET", None)
    ptx = tmp_path / "k.ptx"
    out = subprocess.run([sys.executable, "-c", COMPILE, mode, *map(str, fill), str(ptx)], env=env,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout.split()[-1]) <= 227 * 1024
    text = ptx.read_text()
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in text
    assert ("mul.wide.u32" in text) == (fill[0] == "imad" and fill[1] > 0)
    rep = subprocess.run([str(PTXAS), "-arch=sm_90a", "-v", "--maxrregcount", str(launch_registers(2)), str(ptx),
                          "-o", str(tmp_path / "k.cubin")], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert rep.returncode == 0, rep.stderr[-3000:]
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", rep.stderr)]
    assert spills and max(spills) == 0, rep.stderr


@pytest.mark.parametrize(
    "kwargs,tiles,match",
    [
        ({"mode": "sample"}, COOP, "mode="),
        ({"mode": "bare"}, PINGPONG, "tiles="),
        ({"mode": "bare", "fill": ("fma", 4)}, COOP, "fill="),
        ({"mode": "bare", "fill": ("ffma", -1)}, COOP, "fill="),
    ],
)
def test_cooperative_probe_rejects_what_it_does_not_run(kwargs, tiles, match):
    """The probe has two epilogues, 128-row tiles of two groups, and the fill kinds of ``FILL_KINDS``: anything
    else is a ``ValueError`` naming the argument, before a launch."""
    h = torch.zeros(4, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=match):
        launch_cooperative_probe(h, h, torch.ones(4), None, tiles, **kwargs)
    assert FILL_KINDS == ("ffma", "imad", "imul", "alu", "noise")


@pytest.mark.skipif(not HOPPER, reason="needs an sm_90 GPU, compiled")
@pytest.mark.parametrize("shape", [(256, 3001, 192), (200, 1000, 256), (129, 515, 64)])
@pytest.mark.parametrize("programs", [None, 1, 3])
def test_cooperative_argmax_equals_the_pingpong_kernel(shape, programs):
    """Each row's maximum of ``z / T`` and its first column, per 256-column tile: equal bit for bit to the ping-pong
    kernel's ``register_argmax`` on 64-row tiles (last row and column tiles partial; one, three or one program per
    SM)."""
    b, v, d = shape
    g = torch.Generator(device="cuda").manual_seed(v)
    h = torch.randn(b, d, device="cuda", generator=g).to(torch.bfloat16)
    w = (torch.randn(v, d, device="cuda", generator=g) * 0.3).to(torch.bfloat16)
    inv = torch.linspace(0.5, 2.0, b, device="cuda")
    ref = allocate_partials(b, 1, triton.cdiv(v, 256), h.device)
    got = allocate_partials(b, 1, triton.cdiv(v, 256), h.device)
    launch_pingpong(h, w, inv, ref, 0, 0, PINGPONG, col_offset=0, n_rounds=10, noise=False, programs=programs,
                    mode="register_argmax")  # fmt: skip
    launch_cooperative_probe(h, w, inv, got, COOP, mode="register_argmax", programs=programs)
    torch.cuda.synchronize()
    assert torch.equal(ref[0], got[0]) and torch.equal(ref[2], got[2])
