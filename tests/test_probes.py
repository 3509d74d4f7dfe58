"""The probes of the Gluon stage 1 (benchmarks/probes/): what they accept, the filter's approximate noise, and on an
sm_90 GPU that the probes which are samplers' variants write the shipped kernel's candidates bit for bit.

The CPU build of every probe (sm_90a, no spills) is tests/test_benchmarks_build.py's.  On the H200: three consumer
groups, the handoff kernel and the approximate filter equal the unstaged Triton kernel (as the shipped kernel does,
tests/test_pingpong.py), with ties, flags and overflow; a staging buffer per group too; the cooperative probe's
``register_argmax`` equals the pipeline's on 64-row tiles.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import flashsampling
from benchmarks.probes.approx_noise import APPROX_GUMBEL_TOL, approx_log2_exponential, approx_log2_exponential_np
from benchmarks.probes.cooperative import FILL_KINDS, launch_cooperative_probe
from benchmarks.probes.gluon import NOISES, check_timing_options, launch_gluon_probe
from benchmarks.probes.handoff import launch_handoff
from benchmarks.probes.noise_probes import PROBE_KINDS, probe_noise
from benchmarks.probes.pipeline import MODES
from benchmarks.probes.tiles import ProbeTiles, ws_tiles
from flashsampling.kernels.stage1 import allocate_partials
from flashsampling.noise import exponential_from_side, exponential_from_side_np, positive_log
from tests.test_pingpong import equal_candidates, overflow_without_ties, ties_and_flags

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9 and not flashsampling.INTERPRET
gpu = pytest.mark.skipif(not HOPPER, reason="needs an sm_90 GPU, compiled")

WS = ws_tiles(128, 128, 64, 4, 16)
WS3 = ws_tiles(64, 128, 64, 4, 16, 3)
WS_WIDE = ws_tiles(64, 256, 64, 4, 32)
HANDOFF2 = ws_tiles(64, 128, 64, 6, 16, 2, handoff=True)
HANDOFF3 = ws_tiles(64, 128, 64, 5, 16, 3, handoff=True)
COOP = ws_tiles(128, 256, 64, 4, 32)
#: The probes that are samplers' variants: (tiles, launcher, its options).
VARIANTS = {
    "3-groups": (WS3, launch_gluon_probe, {}),
    "handoff-2": (HANDOFF2, launch_handoff, {}),
    "handoff-3": (HANDOFF3, launch_handoff, {}),
    "filter-2": (WS, launch_gluon_probe, {"noise_filter": True}),
    "filter-3": (WS3, launch_gluon_probe, {"noise_filter": True}),
    "wide-filter": (WS_WIDE, launch_gluon_probe, {"noise_filter": True}),
    "filter-handoff": (ws_tiles(64, 128, 64, 6, 16, 2, handoff=True, noise_filter=True), launch_handoff, {}),
}


@pytest.mark.parametrize(
    "kwargs, msg",
    [
        ({"warp_groups": 4, "warp_specialized": True, "block_b": 64, "epilogue_v": 16}, "warp_groups=4"),
        ({"handoff": True}, "handoff=True needs warp_specialized"),
        ({"noise_filter": True}, "noise_filter=True needs warp_specialized"),
        ({"block_v": 48}, "block_v=48"),  # the product's checks still run
    ],
)
def test_probe_tiles_reject(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        ProbeTiles(**kwargs)


def test_timing_options_are_checked():
    """The Gluon probes' modes and noises: a clear error naming the argument, before a launch."""
    check_timing_options("sample", None)
    check_timing_options("bare", "lse_proxy_fixed")
    with pytest.raises(ValueError, match="mode='fast'"):
        check_timing_options("fast", None)
    with pytest.raises(ValueError, match="noise_mode='gumbel'"):
        check_timing_options("sample", "gumbel")
    assert set(MODES) == {"sample", "bare", "epilogue", "staged_bare", "register_argmax"}
    assert set(PROBE_KINDS) < set(NOISES) and {"off", "exact", "filtered", "tile_cdf"} < set(NOISES)


def test_probe_noise_codes_are_distinct_and_above_the_shipped_codes():
    """A probe's kind and count ride in the kernel's NOISE: distinct for every (kind, count), never a shipped code
    (0-2), and a count of 100 or more is refused."""
    codes = {probe_noise(kind, count) for kind in PROBE_KINDS for count in (0, 10, 99)}
    assert len(codes) == 3 * len(PROBE_KINDS) and min(codes) >= 1000
    with pytest.raises(ValueError, match="count=100"):
        probe_noise("filler_ffma", 100)


@pytest.mark.parametrize(
    "kwargs,tiles,match",
    [
        ({"mode": "sample"}, COOP, "mode="),
        ({"mode": "bare"}, WS_WIDE, "tiles="),
        ({"mode": "bare"}, ws_tiles(128, 256, 64, 4, 32, 3), "tiles="),
        ({"mode": "bare", "fill": ("fma", 4)}, COOP, "fill="),
        ({"mode": "bare", "fill": ("ffma", -1)}, COOP, "fill="),
    ],
)
def test_cooperative_probe_rejects_what_it_does_not_run(kwargs, tiles, match):
    """The cooperative probe has two epilogues, 128-row tiles of two groups, and the fill kinds of ``FILL_KINDS``:
    anything else is a ``ValueError`` naming the argument, before a launch."""
    h = torch.zeros(4, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=match):
        launch_cooperative_probe(h, h, torch.ones(4), None, tiles, **kwargs)
    assert FILL_KINDS == ("ffma", "imad", "imul", "alu", "noise")


def _inputs(b, v, d, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    h = torch.randn(b, d, device="cuda", generator=g).to(torch.bfloat16)
    w = (torch.randn(v, d, device="cuda", generator=g) * 0.3).to(torch.bfloat16)
    return h, w


@gpu
@pytest.mark.parametrize("shape", [(37, 1000, 256), (256, 3001, 192), (1, 515, 64), (300, 2000, 128)])
@pytest.mark.parametrize("programs", [None, 1, 3])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_variants_equal_the_triton_kernel(shape, programs, variant):
    tiles, launch, kw = VARIANTS[variant]
    b, v, d = shape
    h, w = _inputs(b, v, d, v)
    inv = torch.linspace(0.0, 2.0, b, device="cuda")  # row 0 greedy
    ref, got = equal_candidates(h, w, inv, programs, tiles, launch, **kw)
    for x, y in zip(ref[:4], got[:4]):
        assert torch.equal(x, y)


@gpu
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_variants_ties_flags_and_overflow(variant):
    tiles, launch, kw = VARIANTS[variant]
    ties_and_flags(tiles, launch, **kw)
    overflow_without_ties(tiles, launch, **kw)


@gpu
@pytest.mark.parametrize("programs", [None, 1])
def test_stage_per_group(programs):
    """A staging buffer per consumer group (three groups, 4 stages: 192 KB of shared memory): the same
    candidates, also with exact ties and a NaN row."""
    h, w = _inputs(300, 2000, 128, 4)
    inv = torch.linspace(0.0, 2.0, 300, device="cuda")
    ref, got = equal_candidates(h, w, inv, programs, WS3, launch_gluon_probe, stage_per_group=True)
    for x, y in zip(ref[:4], got[:4]):
        assert torch.equal(x, y)
    w = w[:8].repeat(250, 1)  # exact ties
    h[3, 5] = float("nan")
    ref, got = equal_candidates(h, w, inv, programs, WS3, launch_gluon_probe, stage_per_group=True)
    ok = torch.arange(300, device="cuda") != 3
    assert torch.equal(ref[3], got[3]) and bool((got[3][3] & 1).all())
    for x, y in zip(ref[:3], got[:3]):
        assert torch.equal(x[ok], y[ok])


@gpu
@pytest.mark.parametrize("shape", [(256, 3001, 192), (200, 1000, 256), (129, 515, 64)])
@pytest.mark.parametrize("programs", [None, 1, 3])
def test_cooperative_argmax_equals_the_pipeline(shape, programs):
    """Each row's maximum of ``z / T`` and its first column, per 256-column tile: equal bit for bit to the pipeline
    probe's ``register_argmax`` on 64-row tiles (last row and column tiles partial; one, three or one program per
    SM)."""
    b, v, d = shape
    h, w = _inputs(b, v, d, v)
    inv = torch.linspace(0.5, 2.0, b, device="cuda")
    ref = allocate_partials(b, 1, triton.cdiv(v, 256), h.device)
    got = allocate_partials(b, 1, triton.cdiv(v, 256), h.device)
    launch_gluon_probe(h, w, inv, ref, 0, 0, WS_WIDE, noise=False, programs=programs, mode="register_argmax")
    launch_cooperative_probe(h, w, inv, got, COOP, mode="register_argmax", programs=programs)
    torch.cuda.synchronize()
    assert torch.equal(ref[0], got[0]) and torch.equal(ref[2], got[2])


# --------------------------------------------------------------------------------------------
# The approximate noise of the filter (benchmarks/probes/approx_noise.py)
# --------------------------------------------------------------------------------------------

#: float32(-ln 2), the slope by which the kernel turns ``A ~ log2(E)`` into ``-log(E)``.
NEG_LN2_F32 = float(np.float32(-0.6931471805599453))
#: The rounding of the kernel's product ``A * slope`` (at most 2**-24 * 46) is budgeted apart from the formula's error.
PRODUCT_ROUNDING = 2.0**-18
X_LO_BITS = 0x1F000000  # float32 bits of 2**-65, the smallest x
X_HI_BITS = 0x3F000000  # float32 bits of 1/2, the largest


def _approx_error_np(bits: np.ndarray, top: int, series: bool = True) -> float:
    """max |slope * A - G| over the float32 ``x`` with these bits (NumPy, float64 difference)."""
    x = bits.astype(np.uint32).view(np.float32)
    t = np.full(x.shape, top, dtype=np.uint32)
    g = (-np.log(exponential_from_side_np(x, t))).astype(np.float32)
    a = approx_log2_exponential_np(x, t, series)
    with np.errstate(invalid="ignore"):
        err = np.abs(a.astype(np.float64) * NEG_LN2_F32 - g.astype(np.float64))
    return float(np.max(np.where(np.isnan(err), np.inf, err)))


@pytest.mark.parametrize("top", [0, 1])
def test_approx_noise_formulas_within_tolerance(top):
    """The approximation's formulas, with lg2.approx modelled as log2 rounded to multiples of 2**-22, are within
    APPROX_GUMBEL_TOL of the noise's G on every 251st float32 x in [2**-65, 1/2] and on the 2**16 smallest and
    largest x."""
    ends = [np.arange(X_LO_BITS, X_LO_BITS + 2**16), np.arange(X_HI_BITS - 2**16, X_HI_BITS + 1)]
    bits = np.concatenate([np.arange(X_LO_BITS, X_HI_BITS + 1, 251, dtype=np.int64), *ends])
    assert _approx_error_np(bits, top) <= APPROX_GUMBEL_TOL - PRODUCT_ROUNDING


def test_approx_noise_without_series_fails_the_tolerance():
    """Planted defect: without the series for x < 2**-6 (U close to 1), E from log2(1 - x) loses its relative
    accuracy and the error exceeds the tolerance by orders of magnitude -- the check above can fail."""
    bits = np.arange(X_LO_BITS, X_HI_BITS + 1, 251, dtype=np.int64)
    assert _approx_error_np(bits, 1, series=False) > 100 * APPROX_GUMBEL_TOL


@triton.jit
def _approx_error_kernel(out_ptr, n, TOP: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    bits = (offs + 0x1F000000).to(tl.int32)
    x = bits.to(tl.float32, bitcast=True)
    top = tl.zeros([BLOCK], dtype=tl.uint32) + TOP
    g = -positive_log(exponential_from_side(x, top))
    a = approx_log2_exponential(x, top)
    err = tl.abs(a.to(tl.float64) * -0.693147182464599609375 - g.to(tl.float64))
    err = tl.where(err == err, err, float("inf"))  # a NaN counts as an unbounded error
    tl.store(out_ptr + pid, tl.max(tl.where(offs < n, err, 0.0), axis=0))


@pytest.mark.skipif(flashsampling.INTERPRET, reason="compiled only: the hardware's lg2.approx")
@pytest.mark.parametrize("top", [0, 1])
def test_approx_noise_within_tolerance_on_every_float(top):
    """On the GPU, with MUFU.LG2: |slope * A - G| <= APPROX_GUMBEL_TOL - 2**-18 on every float32 x in
    [2**-65, 1/2] (536,870,913 values per side); the measured maximum is recorded in benchmarks/NOTES.md."""
    n = X_HI_BITS - X_LO_BITS + 1
    block = 4096
    out = torch.empty(triton.cdiv(n, block), dtype=torch.float64, device="cuda")
    _approx_error_kernel[(out.numel(),)](out, n, TOP=top, BLOCK=block)
    worst = float(out.max())
    print(f"top={top}: max |slope * A - G| = {worst:.3e}")
    assert worst <= APPROX_GUMBEL_TOL - PRODUCT_ROUNDING
