"""The warp-specialized Gluon stage 1 (flashsampling/kernels/pingpong.py).

On any machine: it compiles for sm_90a (triton ships ptxas) with the default tiles, without register
spills.  On an sm_90 GPU: its candidates equal, bit for bit, those of the unstaged Triton kernel with
the same column tiles, 128 or 256 wide (the MMAs accumulate in the same order), with one or several tiles per
program (the two consumer groups take turns), with exact ties and with flagged rows.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import flashsampling
from flashsampling.kernels.fused import (
    TileConfig,
    allocate_partials,
    choose_tiles,
    default_tiles,
    last_wave_fill,
    launch_fused_stage1,
    warp_specialized_supported,
    warp_specialized_tiles,
)
from flashsampling.kernels.pingpong import check_timing_options, launch_registers
from flashsampling.kernels.reduce import reduce_tiles

PTXAS = Path(__import__("triton").__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9 and not flashsampling.INTERPRET
ROOT = Path(__file__).resolve().parents[1]

COMPILE = """
import json, sys
from flashsampling.kernels.fused import TileConfig
from flashsampling.kernels import handoff, pingpong
tiles, mode, per_group, noise = json.loads(sys.argv[1])
tiles = TileConfig(**tiles)
if tiles.handoff:
    k = handoff.compile_offline(tiles)
else:
    k = pingpong.compile_offline(tiles, mode=mode, stage_per_group=per_group, noise=noise)
open(sys.argv[2], "w").write(k.asm["ptx"])
print(k.metadata.shared)
"""


def _compile(
    tmp_path, tiles: TileConfig, mode: str = "sample", per_group: bool = False, noise: str | None = None
) -> tuple[str, int]:
    """PTX and shared-memory bytes of the Gluon kernel compiled for sm_90a in a fresh process (compiled
    mode, not the interpreter); ``noise``, a key of ``pingpong.NOISES``, overrides the tiles' noise."""
    env = {**os.environ, "FLASHSAMPLING_INTERPRET": "0", "PYTHONPATH": str(ROOT)}
    env.pop("TRITON_INTERPRET", None)
    ptx = tmp_path / "k.ptx"
    arg = json.dumps([dataclasses.asdict(tiles), mode, per_group, noise])
    out = subprocess.run([sys.executable, "-c", COMPILE, arg, str(ptx)], env=env, capture_output=True, text=True,
                         timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return ptx.read_text(), int(out.stdout.split()[-1])


def _assert_no_spills(tmp_path, ptx: str, regs: int) -> None:
    """ptxas (shipped with triton) builds ``ptx`` within ``regs`` registers and spills nothing."""
    (tmp_path / "a.ptx").write_text(ptx)
    rep = subprocess.run([str(PTXAS), "-arch=sm_90a", "-v", "--maxrregcount", str(regs), str(tmp_path / "a.ptx"),
                          "-o", str(tmp_path / "a.cubin")], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert rep.returncode == 0, rep.stderr[-3000:]
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", rep.stderr)]
    assert spills and max(spills) == 0, rep.stderr
    assert f"Used {regs} registers" in rep.stderr, rep.stderr


@pytest.mark.skipif(not PTXAS.exists(), reason="triton without ptxas")
@pytest.mark.parametrize(
    "batch,noise",
    [
        (64, None),
        (128, None),
        (256, None),
        (256, "filtered"),
        (256, "lse_proxy_design"),
        (256, "tile_cdf"),
        (128, "tile_cdf"),
        (256, "filler_ffma"),
        (256, "filler_imad"),
        (256, "filler_imul"),
        (256, "filler_alu"),
        (256, "filler_hilo"),
        (256, "threefry_proxy"),
    ],
)
def test_gluon_kernel_compiles_for_sm90_without_spills(batch, noise, tmp_path):
    """The default warp-specialized tiles of each batch class build for sm_90a, fit the shared memory
    (227 KB) and the launch register budget (168 for 2 consumer groups, 128 for 3), and spill nothing;
    so do the B=256 tiles with the approximate filter and with a timing proxy of the benchmarks (pingpong.NOISES)."""
    tiles = warp_specialized_tiles(batch)
    ptx, shared = _compile(tmp_path, tiles, noise=noise)
    assert shared <= 227 * 1024
    _assert_no_spills(tmp_path, ptx, launch_registers(tiles.warp_groups))


@pytest.mark.skipif(not PTXAS.exists(), reason="triton without ptxas")
@pytest.mark.parametrize("mode", ["bare", "epilogue", "staged_bare", "register_argmax"])
def test_timing_modes_compile_for_sm90(mode, tmp_path):
    """The benchmarks' timing modes of the Gluon kernel (pingpong.MODES) build for sm_90a with the
    B=256 tiles: ``epilogue`` has no loads or MMAs, the others have both; ``staged_bare`` and ``register_argmax``
    do not spill."""
    tiles = warp_specialized_tiles(256)
    text, _ = _compile(tmp_path, tiles, mode)
    matmul = mode != "epilogue"
    assert ("wgmma.mma_async" in text) == matmul
    assert ("mbarrier.try_wait" in text) and ("cp.async.bulk.tensor" in text) == matmul
    if mode in ("staged_bare", "register_argmax"):
        _assert_no_spills(tmp_path, text, launch_registers(tiles.warp_groups))


@pytest.mark.skipif(not PTXAS.exists(), reason="triton without ptxas")
def test_stage_per_group_compiles_without_spills(tmp_path):
    """The experimental staging buffer per group (three groups on 64 x 128 tiles, 5 ring stages) fits
    the shared memory and the 128 launch registers without spills."""
    tiles = TileConfig(64, 128, 64, num_warps=4, num_stages=5, epilogue_v=16, warp_specialized=True, warp_groups=3)
    ptx, shared = _compile(tmp_path, tiles, per_group=True)
    assert shared <= 227 * 1024
    _assert_no_spills(tmp_path, ptx, 128)


def test_kernel_arguments_order():
    """The Gluon kernels' shared launch arguments: two TMA descriptors, then temperatures, the four candidate
    buffers, B, V, D, the column offset and the seed words; the grid never exceeds the tiles."""
    from flashsampling.kernels.pingpong import kernel_arguments

    h = torch.zeros(100, 128, dtype=torch.bfloat16)
    w = torch.zeros(300, 128, dtype=torch.bfloat16)
    parts = allocate_partials(100, 1, 3, h.device)
    progs, args = kernel_arguments(h, w, "inv", parts, 5, 7, WS_WIDE, 2, programs=None)
    assert progs == min(4, 2 * 2)  # 2 row tiles x 2 column tiles; the interpreter's grid is at most 4
    assert [a.__class__.__name__ for a in args[:2]] == ["TensorDescriptor"] * 2 and args[2] == "inv"
    assert all(a is b for a, b in zip(args[3:7], parts[:4])) and args[7:] == (100, 300, 128, 2, 5, 7)
    assert kernel_arguments(h, w, "inv", parts, 5, 7, WS_WIDE, 2, programs=3)[0] == 3


def test_timing_options_are_checked():
    """The benchmarks' modes and noise modes of the Gluon kernel: a clear error naming the argument."""
    check_timing_options("sample", None)
    check_timing_options("bare", "lse_proxy_fixed")
    with pytest.raises(ValueError, match="mode='fast'"):
        check_timing_options("fast", None)
    with pytest.raises(ValueError, match="noise_mode='gumbel'"):
        check_timing_options("sample", "gumbel")


def test_warp_specialized_tiles():
    """B <= 16 keeps the Triton defaults; 16 < B <= 32 too, unless the 64 x 256 tiles fill the last wave of the
    machine's SMs to 0.96; above, tiles that the Gluon kernel accepts (two consumer groups), with the exact noise in
    every token (the approximate filter is an option: no consistent gain measured, NOTES session 9)."""
    wide = warp_specialized_tiles(256)
    for b in (1, 16, 17, 32):
        assert warp_specialized_tiles(b) is None  # V and the SM count unknown
    assert warp_specialized_tiles(16, 201088, 132) is None
    for b in (17, 24, 32):
        assert warp_specialized_tiles(b, 201088, 132) == wide  # 786 tiles on 132 SMs: 0.992 of 6 rounds
        assert warp_specialized_tiles(b, 262144, 132) == wide  # 1024 tiles: 0.970 of 8 rounds
        for v in (151936, 128256, 2000):  # 594, 501 and 8 tiles: 0.900, 0.949, 0.061
            assert warp_specialized_tiles(b, v, 132) is None
    assert warp_specialized_tiles(24, 256 * 114, 114) == wide  # one full wave on 114 SMs
    for b in (33, 64, 65, 128, 129, 256, 4096):
        t = warp_specialized_tiles(b)
        assert t.warp_specialized and t.block_b % 64 == 0 and t.block_v % t.epilogue_v == 0
        assert not t.noise_filter and not t.handoff and t.warp_groups == 2
        assert warp_specialized_tiles(b, 2000, 132) == t  # above 32 rows, the same tiles whatever V
    assert warp_specialized_tiles(64).block_v == 128 and warp_specialized_tiles(65) == wide


def test_last_wave_fill():
    """The fraction of SM rounds a persistent kernel keeps busy: exact on small cases."""
    assert last_wave_fill(132, 132) == 1.0 and last_wave_fill(264, 132) == 1.0
    assert last_wave_fill(594, 132) == 594 / 660 and last_wave_fill(786, 132) == 786 / 792
    assert last_wave_fill(1, 132) == 1 / 132 and last_wave_fill(133, 132) == 133 / 264


def test_choose_tiles_falls_back_to_the_triton_defaults(device):
    """Without an sm_90 GPU (here: the interpreter or another GPU), for several samples or B <= 32,
    sample() keeps the Triton kernels' default tiles."""
    h = torch.randn(100, 64).to(torch.bfloat16).to(device)
    w = torch.randn(300, 64).to(torch.bfloat16).to(device)
    assert choose_tiles(h, w, 2) == default_tiles(100, 300, 64)
    assert choose_tiles(h[:32], w, 1) == default_tiles(32, 300, 64)
    assert not warp_specialized_supported(h.float(), w.float())
    if not HOPPER:
        assert choose_tiles(h, w, 1) == default_tiles(100, 300, 64)
        assert not warp_specialized_supported(h, w)


REF = TileConfig(128, 128, 64, num_warps=8, num_stages=3)  # unstaged Triton kernel, the same columns per tile
WS = TileConfig(128, 128, 64, num_warps=4, num_stages=4, epilogue_v=16, warp_specialized=True)
WS3 = TileConfig(64, 128, 64, num_warps=4, num_stages=4, epilogue_v=16, warp_specialized=True, warp_groups=3)
WS_WIDE = warp_specialized_tiles(256)  # the B > 64 default: 64 x 256 tiles, 32-column chunks
WS_SMALL = warp_specialized_tiles(64)  # the 32 < B <= 64 default: 2 groups on 64 x 128 tiles, 6 stages
# The handoff kernel (flashsampling/kernels/handoff.py): one MMA group, 2 or 3 epilogue groups.
HANDOFF2 = TileConfig(64, 128, 64, num_warps=4, num_stages=6, epilogue_v=16, warp_specialized=True, handoff=True)
HANDOFF3 = dataclasses.replace(HANDOFF2, num_stages=5, warp_groups=3)
# The approximate noise filter (pingpong._scan_tile_filtered) on the 2- and 3-group tiles and the wide default.
WS_FILTER = dataclasses.replace(WS, noise_filter=True)
WS3_FILTER = dataclasses.replace(WS3, noise_filter=True)
WS_WIDE_FILTER = dataclasses.replace(WS_WIDE, noise_filter=True)


@pytest.mark.skipif(not PTXAS.exists(), reason="triton without ptxas")
@pytest.mark.parametrize("tiles", [HANDOFF2], ids=["handoff-2"])
def test_handoff_kernel_compiles_for_sm90_without_spills(tiles, tmp_path):
    """The handoff kernel (one MMA group, 2 epilogue groups with 16-column chunks, a 32 KB staging buffer each)
    fits the shared memory and its 128 launch registers without spills.  (With 3 epilogue groups the budget is
    96 registers, and the filtered fast pass spills 48 bytes there.)"""
    ptx, shared = _compile(tmp_path, tiles)
    assert shared <= 227 * 1024
    assert "setmaxnreg" in ptx and ptx.count("wgmma.mma_async") >= 1
    _assert_no_spills(tmp_path, ptx, launch_registers(tiles.warp_groups + 1))


def _equal_candidates(h, w, inv, programs=None, ws=WS, stage_per_group=False):
    from flashsampling.kernels.pingpong import launch_pingpong

    ref_tiles = REF if ws.block_v == REF.block_v else TileConfig(64, ws.block_v, 64, num_warps=8, num_stages=3)
    ref = launch_fused_stage1(h, w, inv, 11, 12, 1, ref_tiles)
    got = allocate_partials(h.shape[0], 1, ref[0].shape[-1], h.device)
    if ws.handoff:
        from flashsampling.kernels.handoff import launch_handoff

        launch_handoff(h, w, inv, got, 11, 12, ws, col_offset=0, n_rounds=10, noise=True, programs=programs,
                       noise_filter=ws.noise_filter)  # fmt: skip
        return ref, got
    launch_pingpong(h, w, inv, got, 11, 12, ws, col_offset=0, n_rounds=10, noise=True, programs=programs,
                    stage_per_group=stage_per_group, noise_filter=ws.noise_filter)  # fmt: skip
    return ref, got


@pytest.mark.skipif(not HOPPER, reason="needs an sm_90 GPU, compiled")
@pytest.mark.parametrize("shape", [(37, 1000, 256), (256, 3001, 192), (1, 515, 64), (300, 2000, 128)])
@pytest.mark.parametrize("programs", [None, 1, 3])
@pytest.mark.parametrize(
    "ws",
    [WS, WS3, WS_SMALL, HANDOFF2, HANDOFF3, WS_FILTER, WS3_FILTER],
    ids=["2-groups", "3-groups", "small-default", "handoff-2", "handoff-3", "filter-2", "filter-3"],
)
def test_gluon_candidates_equal_the_triton_kernel(shape, programs, ws):
    b, v, d = shape
    g = torch.Generator(device="cuda").manual_seed(v)
    h = torch.randn(b, d, device="cuda", generator=g).to(torch.bfloat16)
    w = (torch.randn(v, d, device="cuda", generator=g) * 0.3).to(torch.bfloat16)
    inv = torch.linspace(0.0, 2.0, b, device="cuda")  # row 0 greedy
    ref, got = _equal_candidates(h, w, inv, programs, ws)
    for x, y in zip(ref[:4], got[:4]):
        assert torch.equal(x, y)


@pytest.mark.skipif(not HOPPER, reason="needs an sm_90 GPU, compiled")
@pytest.mark.parametrize(
    "ws",
    [WS, WS3, WS_WIDE, WS_SMALL, HANDOFF2, HANDOFF3, WS3_FILTER, WS_WIDE_FILTER],
    ids=["2-groups", "3-groups", "wide-default", "small-default", "handoff-2", "handoff-3", "filter-3", "wide-filter"],
)
def test_gluon_ties_and_flags(ws):
    """8 weight rows repeated 300 times: exact ties within and across chunks and tiles, broken by the
    tie-break key as in the Triton kernel; a NaN hidden state, an infinite logit and z / T
    overflowing flag their rows with the same bits in both kernels."""
    g = torch.Generator(device="cuda").manual_seed(2)
    h = torch.randn(64, 64, device="cuda", generator=g).to(torch.bfloat16)
    w = torch.randn(8, 64, device="cuda", generator=g).to(torch.bfloat16).repeat(300, 1)
    inv = torch.where(torch.arange(64, device="cuda") % 2 == 0, 0.0, 1.0)
    ref, got = _equal_candidates(h, w, inv, programs=2, ws=ws)
    for x, y in zip(ref[:4], got[:4]):
        assert torch.equal(x, y)
    h[3, 5] = float("nan")
    inv[9] = 1e38  # z / T overflows (z finite): bit 2 in the fast pass
    inv[11] = 1e38
    h[11, 0] = 3e38  # row 11: some logits overflow to inf in the matmul, others in z / T: both bits
    ref, got = _equal_candidates(h, w, inv, ws=ws)
    assert torch.equal(ref[3], got[3]) and bool((got[3][3] & 1).all())
    assert bool((got[3][9] == 2).any()) and bool((got[3][11] == 3).any())
    ok = (torch.arange(64, device="cuda") != 3) & (torch.arange(64, device="cuda") != 11)
    assert torch.equal(reduce_tiles(*ref[:4], w.shape[0])[0][ok], reduce_tiles(*got[:4], w.shape[0])[0][ok])


@pytest.mark.skipif(not HOPPER, reason="needs an sm_90 GPU, compiled")
@pytest.mark.parametrize("programs", [None, 1])
def test_gluon_stage_per_group(programs):
    """The experimental staging buffer per consumer group (three groups, 4 stages: 192 KB of shared
    memory): the same candidates, also with exact ties and a NaN row."""
    g = torch.Generator(device="cuda").manual_seed(4)
    h = torch.randn(300, 128, device="cuda", generator=g).to(torch.bfloat16)
    w = (torch.randn(2000, 128, device="cuda", generator=g) * 0.3).to(torch.bfloat16)
    inv = torch.linspace(0.0, 2.0, 300, device="cuda")
    ref, got = _equal_candidates(h, w, inv, programs, WS3, stage_per_group=True)
    for x, y in zip(ref[:4], got[:4]):
        assert torch.equal(x, y)
    w = w[:8].repeat(250, 1)  # exact ties
    h[3, 5] = float("nan")
    ref, got = _equal_candidates(h, w, inv, programs, WS3, stage_per_group=True)
    ok = torch.arange(300, device="cuda") != 3
    assert torch.equal(ref[3], got[3]) and bool((got[3][3] & 1).all())
    for x, y in zip(ref[:3], got[:3]):
        assert torch.equal(x[ok], y[ok])


@pytest.mark.skipif(not HOPPER, reason="needs an sm_90 GPU, compiled")
@pytest.mark.parametrize(
    "ws",
    [WS, WS3, WS_WIDE, WS_SMALL, HANDOFF2, HANDOFF3, WS3_FILTER, WS_WIDE_FILTER],
    ids=["2-groups", "3-groups", "wide-default", "small-default", "handoff-2", "handoff-3", "filter-3", "wide-filter"],
)
def test_gluon_overflow_flag_without_ties(ws):
    """z / T overflowing to -inf in one column, no tie at any row's maximum: bit 2 in every row,
    from the exact pass that the fast pass hands such rows to."""
    g = torch.Generator(device="cuda").manual_seed(3)
    h = torch.randn(64, 64, device="cuda", generator=g).to(torch.bfloat16)
    w = (torch.randn(1000, 64, device="cuda", generator=g) * 0.01).to(torch.bfloat16)
    h[:, 0] = 100.0
    w[5] = 0.0
    w[5, 0] = -1e4  # z[:, 5] = -1e6; times 1 / T = 1e33: -inf
    inv = torch.full((64,), 1e33, device="cuda")
    ref, got = _equal_candidates(h, w, inv, ws=ws)
    for x, y in zip(ref[:4], got[:4]):
        assert torch.equal(x, y)
    assert bool((got[3][:, 0] == 2).all()) and int(got[3][:, 1:].max()) == 0


@pytest.mark.skipif(not HOPPER, reason="needs an sm_90 GPU, compiled")
@pytest.mark.parametrize("batch,full_wave", [(40, False), (128, False), (200, False), (17, True), (32, True)])
def test_sample_uses_the_gluon_kernel_and_the_same_tokens(batch, full_wave):
    """sample() picks the warp-specialized tiles for one sample and B > 32 (and for 16 < B <= 32 when the
    64 x 256 tiles fill the SMs' last wave: here V = 256 x the SM count), and returns the tokens of
    the Triton defaults (accumulation order aside: at least 99.9% equal here, all equal in practice)."""
    from flashsampling.kernels.persistent import sm_count

    g = torch.Generator(device="cuda").manual_seed(batch)
    V = 256 * sm_count(torch.device("cuda")) if full_wave else 20000
    h = torch.randn(batch, 512, device="cuda", generator=g).to(torch.bfloat16)
    w = (torch.randn(V, 512, device="cuda", generator=g) * 0.1).to(torch.bfloat16)
    assert warp_specialized_supported(h, w) and not warp_specialized_supported(h, w, col_offset=1)
    assert choose_tiles(h, w, 1).warp_specialized and not choose_tiles(h, w, 2).warp_specialized
    if full_wave:
        assert not choose_tiles(h, w[:20000], 1).warp_specialized  # 79 tiles: a partial wave
    a = flashsampling.sample(h, w, temperature=0.9, seed=5)
    b = flashsampling.sample(h, w, temperature=0.9, seed=5, tiles=default_tiles(batch, V, 512))
    assert (a == b).float().mean() >= 0.999
