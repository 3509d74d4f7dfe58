"""The warp-specialized Gluon stage 1 (flashsampling/kernels/pingpong.py) and the tile policy that picks it.

On any machine: it compiles for sm_90a (triton ships ptxas) with the default tiles of each batch class, with and
without noise and with the tile inverse-CDF stream's epilogue, without register spills; the tile policy.  On an sm_90
GPU: its candidates equal, bit for bit, those of the unstaged Triton kernel with the same column tiles, 128 or 256
wide (the MMAs accumulate in the same order), with one or several tiles per program (the two consumer groups take
turns), with exact ties and with flagged rows.  (The probes of this kernel are tested in tests/test_probes.py and
tests/test_benchmarks_build.py.)
"""

from __future__ import annotations

import pytest
import torch

import flashsampling
from flashsampling.kernels.hardware import sm_count
from flashsampling.kernels.pingpong import CONSUMER_GROUPS, kernel_arguments, launch_pingpong, launch_registers
from flashsampling.kernels.stage1 import allocate_partials, launch_fused_stage1
from flashsampling.kernels.stage2 import reduce_tiles
from flashsampling.kernels.tiles import (
    TileConfig,
    default_tiles,
    last_wave_fill,
    stage1_tiles,
    warp_specialized_supported,
    warp_specialized_tiles,
)
from tests.sm90 import PTXAS, SHARED_BYTES, assert_no_spills, compile_all

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9 and not flashsampling.INTERPRET

#: The shipped specializations: the default tiles of each batch class (B = 128 shares B = 256's), no noise (a call
#: whose rows are all greedy), and the tile inverse-CDF stream.
SHIPPED = """
from flashsampling.kernels.pingpong import compile_offline
from flashsampling.kernels.tiles import warp_specialized_tiles as ws
from flashsampling.tile_cdf.fused import tile_cdf_epilogue
KERNELS = {
    "b64": lambda: compile_offline(ws(64)),
    "b128": lambda: compile_offline(ws(128)),
    "b256": lambda: compile_offline(ws(256)),
    "b256-no-noise": lambda: compile_offline(ws(256), noise=False),
    "tile-cdf-b256": lambda: compile_offline(ws(256), epilogue=tile_cdf_epilogue),
    "tile-cdf-b128": lambda: compile_offline(ws(128), epilogue=tile_cdf_epilogue),
}
"""


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    return compile_all(SHIPPED, tmp_path_factory.mktemp("shipped"))


@pytest.mark.skipif(not PTXAS.exists(), reason="triton without ptxas")
@pytest.mark.parametrize("name", ["b64", "b128", "b256", "b256-no-noise", "tile-cdf-b256", "tile-cdf-b128"])
def test_gluon_kernel_compiles_for_sm90_without_spills(name, shipped, tmp_path):
    """Each shipped specialization builds for sm_90a, fits the shared memory (227 KB) and the launch register budget
    (168 for the two consumer groups), and spills nothing."""
    rec = shipped[name]
    assert "error" not in rec, rec.get("error")
    assert rec["shared"] <= SHARED_BYTES
    assert_no_spills(tmp_path, rec["ptx"], launch_registers(CONSUMER_GROUPS))


def test_kernel_arguments_order():
    """The Gluon kernel's launch arguments: two TMA descriptors, then temperatures, the four candidate
    buffers, B, V, D, the column offset and the seed words; the grid never exceeds the tiles."""
    h = torch.zeros(100, 128, dtype=torch.bfloat16)
    w = torch.zeros(300, 128, dtype=torch.bfloat16)
    parts = allocate_partials(100, 1, 3, h.device)
    progs, args = kernel_arguments(h, w, "inv", parts, 5, 7, WS_WIDE, 2, programs=None)
    assert progs == min(4, 2 * 2)  # 2 row tiles x 2 column tiles; the interpreter's grid is at most 4
    assert [a.__class__.__name__ for a in args[:2]] == ["TensorDescriptor"] * 2 and args[2] == "inv"
    assert all(a is b for a, b in zip(args[3:7], parts[:4])) and args[7:] == (100, 300, 128, 2, 5, 7)
    assert kernel_arguments(h, w, "inv", parts, 5, 7, WS_WIDE, 2, programs=3)[0] == 3


def test_warp_specialized_tiles():
    """B <= 16 keeps the Triton defaults; 16 < B <= 32 too, unless the 64 x 256 tiles fill the last wave of the
    machine's SMs to 0.96; above, tiles that the Gluon kernel accepts, with the exact noise in every token."""
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
        assert warp_specialized_tiles(b, 2000, 132) == t  # above 32 rows, the same tiles whatever V
    assert warp_specialized_tiles(64).block_v == 128 and warp_specialized_tiles(65) == wide


def test_last_wave_fill():
    """The fraction of SM rounds a persistent kernel keeps busy: exact on small cases."""
    assert last_wave_fill(132, 132) == 1.0 and last_wave_fill(264, 132) == 1.0
    assert last_wave_fill(594, 132) == 594 / 660 and last_wave_fill(786, 132) == 786 / 792
    assert last_wave_fill(1, 132) == 1 / 132 and last_wave_fill(133, 132) == 133 / 264


def test_stage1_tiles_falls_back_to_the_triton_defaults(device):
    """Without an sm_90 GPU (here: the interpreter or another GPU), for several samples, log-masses or B <= 32,
    a call keeps the Triton kernels' default tiles."""
    h = torch.randn(100, 64).to(torch.bfloat16).to(device)
    w = torch.randn(300, 64).to(torch.bfloat16).to(device)
    assert stage1_tiles(h, w, 2) == default_tiles(100, 300, 64)
    assert stage1_tiles(h, w, 1, return_lse=True) == default_tiles(100, 300, 64)
    assert stage1_tiles(h[:32], w, 1) == default_tiles(32, 300, 64)
    assert not warp_specialized_supported(h.float(), w.float())
    if not HOPPER:
        assert stage1_tiles(h, w, 1) == default_tiles(100, 300, 64)
        assert not warp_specialized_supported(h, w)


REF = TileConfig(128, 128, 64, num_warps=8, num_stages=3)  # unstaged Triton kernel, the same columns per tile
WS = TileConfig(128, 128, 64, num_warps=4, num_stages=4, epilogue_v=16, warp_specialized=True)
WS_WIDE = warp_specialized_tiles(256)  # the B > 64 default: 64 x 256 tiles, 32-column chunks
WS_SMALL = warp_specialized_tiles(64)  # the 32 < B <= 64 default: 64 x 128 tiles, 6 stages
SHIPPED_TILES = {"128x128": WS, "wide-default": WS_WIDE, "small-default": WS_SMALL}


def equal_candidates(h, w, inv, programs=None, ws=WS, launch=launch_pingpong, **kw):
    """``(ref, got)``: the unstaged Triton kernel's candidates with ``ws``'s columns per tile, and the Gluon kernel's
    (``launch``: the shipped launcher, or a probe's with ``kw``)."""
    ref_tiles = REF if ws.block_v == REF.block_v else TileConfig(64, ws.block_v, 64, num_warps=8, num_stages=3)
    ref = launch_fused_stage1(h, w, inv, 11, 12, 1, ref_tiles)
    got = allocate_partials(h.shape[0], 1, ref[0].shape[-1], h.device)
    launch(h, w, inv, got, 11, 12, ws, programs=programs, **kw)
    return ref, got


@pytest.mark.skipif(not HOPPER, reason="needs an sm_90 GPU, compiled")
@pytest.mark.parametrize("shape", [(37, 1000, 256), (256, 3001, 192), (1, 515, 64), (300, 2000, 128)])
@pytest.mark.parametrize("programs", [None, 1, 3])
@pytest.mark.parametrize("ws", list(SHIPPED_TILES.values()), ids=list(SHIPPED_TILES))
def test_gluon_candidates_equal_the_triton_kernel(shape, programs, ws):
    b, v, d = shape
    g = torch.Generator(device="cuda").manual_seed(v)
    h = torch.randn(b, d, device="cuda", generator=g).to(torch.bfloat16)
    w = (torch.randn(v, d, device="cuda", generator=g) * 0.3).to(torch.bfloat16)
    inv = torch.linspace(0.0, 2.0, b, device="cuda")  # row 0 greedy
    ref, got = equal_candidates(h, w, inv, programs, ws)
    for x, y in zip(ref[:4], got[:4]):
        assert torch.equal(x, y)


def ties_and_flags(ws, launch=launch_pingpong, **kw):
    """8 weight rows repeated 300 times: exact ties within and across chunks and tiles, broken by the
    tie-break key as in the Triton kernel; a NaN hidden state, an infinite logit and z / T
    overflowing flag their rows with the same bits in both kernels."""
    g = torch.Generator(device="cuda").manual_seed(2)
    h = torch.randn(64, 64, device="cuda", generator=g).to(torch.bfloat16)
    w = torch.randn(8, 64, device="cuda", generator=g).to(torch.bfloat16).repeat(300, 1)
    inv = torch.where(torch.arange(64, device="cuda") % 2 == 0, 0.0, 1.0)
    ref, got = equal_candidates(h, w, inv, 2, ws, launch, **kw)
    for x, y in zip(ref[:4], got[:4]):
        assert torch.equal(x, y)
    h[3, 5] = float("nan")
    inv[9] = 1e38  # z / T overflows (z finite): bit 2 in the fast pass
    inv[11] = 1e38
    h[11, 0] = 3e38  # row 11: some logits overflow to inf in the matmul, others in z / T: both bits
    ref, got = equal_candidates(h, w, inv, None, ws, launch, **kw)
    assert torch.equal(ref[3], got[3]) and bool((got[3][3] & 1).all())
    assert bool((got[3][9] == 2).any()) and bool((got[3][11] == 3).any())
    ok = (torch.arange(64, device="cuda") != 3) & (torch.arange(64, device="cuda") != 11)
    assert torch.equal(reduce_tiles(*ref[:4], w.shape[0])[0][ok], reduce_tiles(*got[:4], w.shape[0])[0][ok])


def overflow_without_ties(ws, launch=launch_pingpong, **kw):
    """z / T overflowing to -inf in one column, no tie at any row's maximum: bit 2 in every row,
    from the exact pass that the fast pass hands such rows to."""
    g = torch.Generator(device="cuda").manual_seed(3)
    h = torch.randn(64, 64, device="cuda", generator=g).to(torch.bfloat16)
    w = (torch.randn(1000, 64, device="cuda", generator=g) * 0.01).to(torch.bfloat16)
    h[:, 0] = 100.0
    w[5] = 0.0
    w[5, 0] = -1e4  # z[:, 5] = -1e6; times 1 / T = 1e33: -inf
    inv = torch.full((64,), 1e33, device="cuda")
    ref, got = equal_candidates(h, w, inv, None, ws, launch, **kw)
    for x, y in zip(ref[:4], got[:4]):
        assert torch.equal(x, y)
    assert bool((got[3][:, 0] == 2).all()) and int(got[3][:, 1:].max()) == 0


@pytest.mark.skipif(not HOPPER, reason="needs an sm_90 GPU, compiled")
@pytest.mark.parametrize("ws", list(SHIPPED_TILES.values()), ids=list(SHIPPED_TILES))
def test_gluon_ties_and_flags(ws):
    ties_and_flags(ws)


@pytest.mark.skipif(not HOPPER, reason="needs an sm_90 GPU, compiled")
@pytest.mark.parametrize("ws", list(SHIPPED_TILES.values()), ids=list(SHIPPED_TILES))
def test_gluon_overflow_flag_without_ties(ws):
    overflow_without_ties(ws)


@pytest.mark.skipif(not HOPPER, reason="needs an sm_90 GPU, compiled")
@pytest.mark.parametrize("batch,full_wave", [(40, False), (128, False), (200, False), (17, True), (32, True)])
def test_sample_uses_the_gluon_kernel_and_the_same_tokens(batch, full_wave):
    """sample() picks the warp-specialized tiles for one sample and B > 32 (and for 16 < B <= 32 when the
    64 x 256 tiles fill the SMs' last wave: here V = 256 x the SM count), and returns the tokens of
    the Triton defaults (accumulation order aside: at least 99.9% equal here, all equal in practice)."""
    g = torch.Generator(device="cuda").manual_seed(batch)
    V = 256 * sm_count(torch.device("cuda")) if full_wave else 20000
    h = torch.randn(batch, 512, device="cuda", generator=g).to(torch.bfloat16)
    w = (torch.randn(V, 512, device="cuda", generator=g) * 0.1).to(torch.bfloat16)
    assert warp_specialized_supported(h, w) and not warp_specialized_supported(h, w, col_offset=1)
    assert stage1_tiles(h, w, 1).warp_specialized and not stage1_tiles(h, w, 2).warp_specialized
    assert not stage1_tiles(h, w, 1, return_lse=True).warp_specialized
    if full_wave:
        assert not stage1_tiles(h, w[:20000], 1).warp_specialized  # 79 tiles: a partial wave
    a = flashsampling.sample(h, w, temperature=0.9, seed=5)
    b = flashsampling.sample(h, w, temperature=0.9, seed=5, tiles=default_tiles(batch, V, 512))
    assert (a == b).float().mean() >= 0.999


@pytest.mark.skipif(not HOPPER, reason="needs an sm_90 GPU, compiled")
def test_tensor_parallel_pathwise_runs_the_gluon_kernel_with_the_same_tokens():
    """sample_tp(combine="pathwise") with one sample and no logsumexp needs no log-masses, so it runs the Gluon
    kernel (a world of one here): the tokens of sample() on the same seed (which runs it too)."""
    g = torch.Generator(device="cuda").manual_seed(8)
    h = torch.randn(128, 512, device="cuda", generator=g).to(torch.bfloat16)
    w = (torch.randn(20000, 512, device="cuda", generator=g) * 0.1).to(torch.bfloat16)
    tp = flashsampling.sample_tp(h, w, vocab_start=0, temperature=0.9, seed=5)
    assert torch.equal(tp, flashsampling.sample(h, w, temperature=0.9, seed=5))
