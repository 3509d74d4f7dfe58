"""Bad input gets a clear error naming the argument; never a silent wrong token."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import flashsampling
from flashsampling._request import new_request
from flashsampling._validate import check_same_device, host_inverse_temperature
from flashsampling.grouped import grouped_partials
from flashsampling.kernels.flags import FLAG_BAD_TEMPERATURE
from flashsampling.kernels.hardware import tma_compatible
from flashsampling.kernels.persistent import programs_per_sm
from flashsampling.kernels.stage1 import launch_fused_stage1
from flashsampling.kernels.temperature import inverse_temperature_kernel, inverse_temperature_torch
from flashsampling.kernels.tiles import default_tiles


def _hw(device, b=2, v=40, d=16, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, d, generator=g).to(dtype).to(device), torch.randn(v, d, generator=g).to(dtype).to(device)


CASES = [
    # (id, kwargs-builder, exception, message fragment)
    ("temperature=-1", lambda h, w: dict(temperature=-1.0), ValueError, "temperature"),
    ("temperature=nan", lambda h, w: dict(temperature=math.nan), ValueError, "temperature"),
    ("temperature=inf", lambda h, w: dict(temperature=math.inf), ValueError, "temperature"),
    ("temperature='1'", lambda h, w: dict(temperature="1"), TypeError, "temperature"),
    (
        "temperature=tensor[nan]",
        lambda h, w: dict(temperature=torch.tensor([1.0, math.nan], device=h.device)),
        ValueError,
        "temperature[1]",
    ),
    (
        "temperature=tensor[-1]",
        lambda h, w: dict(temperature=torch.tensor([-1.0, 1.0], device=h.device)),
        ValueError,
        "temperature[0]",
    ),
    ("temperature=tensor(shape 3)", lambda h, w: dict(temperature=torch.ones(3, device=h.device)), ValueError, "shape"),
    (
        "temperature=int tensor",
        lambda h, w: dict(temperature=torch.ones(2, dtype=torch.int32, device=h.device)),
        TypeError,
        "temperature.dtype",
    ),
    ("temperature=1e-45", lambda h, w: dict(temperature=1e-45), ValueError, "too small"),
    ("temperature=1e39", lambda h, w: dict(temperature=1e39), ValueError, "does not fit float32"),
    ("seed=-1", lambda h, w: dict(seed=-1), ValueError, "seed"),
    ("seed=2**64", lambda h, w: dict(seed=2**64), ValueError, "seed"),
    ("seed=1.5", lambda h, w: dict(seed=1.5), TypeError, "seed"),
    ("seed=True", lambda h, w: dict(seed=True), TypeError, "seed"),
    ("num_samples=0", lambda h, w: dict(num_samples=0), ValueError, "num_samples"),
    ("num_samples=2.0", lambda h, w: dict(num_samples=2.0), TypeError, "num_samples"),
    ("num_samples=2**32", lambda h, w: dict(num_samples=2**32), ValueError, "num_samples"),
]


@pytest.mark.parametrize("make, exc, msg", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_sample_rejects(make, exc, msg, device):
    h, w = _hw(device)
    with pytest.raises(exc, match=msg.replace("[", r"\[").replace("]", r"\]")):
        flashsampling.sample(h, w, **make(h, w))


@pytest.mark.parametrize("make, exc, msg", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_sample_from_logits_rejects(make, exc, msg, device):
    h, w = _hw(device)
    z = h.float() @ w.float().T
    with pytest.raises(exc, match=msg.replace("[", r"\[").replace("]", r"\]")):
        flashsampling.sample_from_logits(z, **make(h, w))


SHAPE_CASES = [
    ("hidden=list", lambda h, w: ([[1.0]], w), TypeError, "hidden must be a torch.Tensor"),
    ("hidden 1-D", lambda h, w: (h[0], w), ValueError, "hidden must have 2 dimensions"),
    ("weight 3-D", lambda h, w: (h, w[None]), ValueError, "weight must have 2 dimensions"),
    ("D mismatch", lambda h, w: (h, w[:, :8]), ValueError, "D="),
    ("dtype mismatch", lambda h, w: (h, w.half()), TypeError, "must match"),
    ("int dtype", lambda h, w: (h.to(torch.int32), w.to(torch.int32)), TypeError, "hidden.dtype"),
    ("float64", lambda h, w: (h.double(), w.double()), TypeError, "hidden.dtype"),
    ("B=0", lambda h, w: (h[:0], w), ValueError, "B=0"),
    ("V=0", lambda h, w: (h, w[:0]), ValueError, "V=0"),
    ("D=0", lambda h, w: (h[:, :0], w[:, :0]), ValueError, "D=0"),
]


@pytest.mark.parametrize("make, exc, msg", [c[1:] for c in SHAPE_CASES], ids=[c[0] for c in SHAPE_CASES])
def test_sample_rejects_shapes(make, exc, msg, device):
    h, w = _hw(device)
    a, b = make(h, w)
    with pytest.raises(exc, match=msg):
        flashsampling.sample(a, b)


def test_device_mismatch():
    h, w = _hw("cpu")
    with pytest.raises(ValueError, match="weight.device=meta is not supported"):
        flashsampling.sample(h, w.to("meta"))
    with pytest.raises(ValueError, match="one device"):
        check_same_device(hidden=h, weight=w.to("meta"))


@pytest.mark.parametrize("bad", [math.nan, math.inf], ids=["nan", "+inf"])
def test_nonfinite_logits_detected_in_kernel(bad, device):
    z = torch.randn(3, 200, device=device)
    z[1, 150] = bad
    with pytest.raises(ValueError, match=r"NaN or infinite values in row\(s\) 1"):
        flashsampling.sample_from_logits(z, seed=1)
    tok = flashsampling.sample_from_logits(z, seed=1, host_checks=False)
    assert int(tok.min()) >= 0 and int(tok.max()) < 200


def test_fused_overflow_detected(device):
    """h @ W.T overflowing to inf inside the kernel's own pass is reported (no extra read of W)."""
    h = torch.full((2, 16), 60000.0, dtype=torch.float16, device=device)
    w = torch.full((40, 16), 60000.0, dtype=torch.float16, device=device)
    h[0] = 0.01
    with pytest.raises(ValueError, match=r"row\(s\) 1"):
        flashsampling.sample(h.float(), w.float().mul(1e30), seed=0)
    tok = flashsampling.sample(h.float(), w.float().mul(1e30), seed=0, host_checks=False)
    assert int(tok.min()) >= 0 and int(tok.max()) < 40


def test_row_flags_hold_both_bits(device):
    """A tile row with an infinite logit in one column and a finite logit whose z / T overflows in
    another gets both flag bits (the bits are ORed over the row's elements, not maxed)."""
    h = torch.ones(2, 16, device=device)
    w = torch.full((40, 16), 0.01, device=device)
    w[3] = math.inf  # z[:, 3] = +inf: bit 1
    w[7] = 1e9  # z[:, 7] = 1.6e10, times 1 / T = 1e30: bit 2
    inv = torch.tensor([1e30, 1.0], device=device)
    flags = launch_fused_stage1(h, w, inv, 1, 2, 1, default_tiles(2, 40, 16))[3]
    assert flags[0].max().item() == 3 and flags[1].max().item() == 1


def test_all_masked_row(device):
    z = torch.randn(2, 50, device=device)
    z[0] = -math.inf
    with pytest.raises(ValueError, match="no finite logit"):
        flashsampling.sample_from_logits(z, seed=1)


def test_masked_tokens_never_sampled(device):
    z = torch.zeros(4, 300, device=device)
    z[:, ::2] = -math.inf
    tok = flashsampling.sample_from_logits(z, seed=5, num_samples=20)
    assert torch.all(tok % 2 == 1)


def test_temperature_overflow_detected(device):
    z = torch.full((1, 20), 3e38, device=device)
    with pytest.raises(ValueError, match="overflow"):
        flashsampling.sample_from_logits(z, temperature=0.5, seed=1)


def test_int64_offsets_beyond_2_31(device):
    """Rows whose element offset exceeds 2**31 are addressed correctly (int64 pointer math).

    A half-precision buffer of 2**31 + 3000 elements is allocated but only three rows are touched;
    the row stride puts row 2 at offset 2**31 + 2 * 7 + ... > 2**31.
    """
    if device.type == "cpu":
        pytest.importorskip("numpy")
    stride = 2**30 + 7
    v = 1000
    try:
        buf = torch.empty(2 * stride + v, dtype=torch.float16, device=device)
    except (RuntimeError, MemoryError):
        pytest.skip("cannot reserve a 4 GiB buffer")
    z = buf.as_strided((3, v), (stride, 1))
    z.fill_(-10.0)
    planted = [3, 517, 999]
    for r, c in enumerate(planted):
        z[r, c] = 10.0
    tok = flashsampling.sample_from_logits(z, temperature=0.0, seed=2, num_samples=2)
    assert tok.cpu().tolist() == [[c, c] for c in planted]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("batch", [1, 40, 100, 200])
def test_default_tiles_fit_every_dtype(batch, dtype, device):
    """The default tile choice compiles for every input dtype (fp32 needs half the K tile on the H200)."""
    g = torch.Generator().manual_seed(batch)
    h = torch.randn(batch, 320, generator=g).to(dtype).to(device)
    w = torch.randn(200, 320, generator=g).to(dtype).to(device)
    tok = flashsampling.sample(h, w, seed=4)
    assert tok.shape == (batch, 1) and int(tok.max()) < 200


@pytest.mark.parametrize(
    "kwargs, msg",
    [
        ({"block_v": 48}, "block_v=48"),
        ({"block_b": 8}, "block_b=8"),
        ({"block_v": 64, "epilogue_v": 24}, "epilogue_v=24"),
        ({"block_v": 64, "epilogue_v": 128}, "epilogue_v=128"),
        ({"block_v": 64, "epilogue_v": 8}, "epilogue_v=8"),
        ({"block_b": 32, "epilogue_v": 16, "warp_specialized": True}, "block_b a multiple of 64"),
        ({"block_b": 64, "warp_specialized": True}, "epilogue_v > 0"),
        ({"max_registers": 16}, "max_registers=16"),
        ({"max_registers": 256}, "max_registers=256"),
    ],
)
def test_tile_config_rejects(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        flashsampling.TileConfig(**kwargs)


def test_staged_epilogue_candidates_per_chunk(device):
    """With epilogue_v, stage 1 writes one candidate per chunk: the grouped variant's groups are the
    chunks, and the fused tokens equal those of the plain epilogue."""
    g = torch.Generator().manual_seed(3)
    h = torch.randn(3, 32, generator=g).to(torch.float16).to(device)
    w = torch.randn(200, 32, generator=g).to(torch.float16).to(device)
    staged = flashsampling.TileConfig(16, 64, 16, epilogue_v=16)
    assert staged.candidate_v == 16 and flashsampling.TileConfig(16, 64, 16).candidate_v == 64
    p = grouped_partials(new_request(1.0, 5, 2, 3, h.device, host_checks=True), h, w, tiles=staged)
    assert p.starts.cpu().tolist() == list(range(0, 200, 16))
    plain = flashsampling.sample(h, w, seed=8, num_samples=3, tiles=flashsampling.TileConfig(16, 64, 16))
    assert torch.equal(flashsampling.sample(h, w, seed=8, num_samples=3, tiles=staged), plain)


@pytest.mark.parametrize("d", [48, 20], ids=["tma", "fallback"])
def test_persistent_kernel_writes_the_same_candidates(d, device):
    """The persistent kernel (one program per SM walking the tiles) writes exactly the candidates,
    flags and log-masses of the one-program-per-tile kernel; a row stride that TMA cannot read
    (D=20 halves: 40 bytes) falls back to the pointer kernel."""
    g = torch.Generator().manual_seed(d)
    h = torch.randn(37, d, generator=g).to(torch.float16).to(device)
    w = torch.randn(300, d, generator=g).to(torch.float16).to(device)
    assert tma_compatible(h, w) == (d == 48)
    inv = torch.linspace(0.0, 2.0, 37, device=h.device)  # row 0 greedy
    for ev in (0, 32):
        plain = flashsampling.TileConfig(16, 64, 16, epilogue_v=ev)
        persistent = flashsampling.TileConfig(16, 64, 16, epilogue_v=ev, persistent=True)
        a = launch_fused_stage1(h, w, inv, 5, 6, 2, plain, return_lse=True)
        b = launch_fused_stage1(h, w, inv, 5, 6, 2, persistent, return_lse=True)
        for x, y in zip(a, b):
            assert torch.equal(x, y)


def test_inverse_temperature_kernel_equals_torch(device):
    """The device kernel and the interpreter's torch path give the same inverse temperatures
    (float32 division correctly rounded) and the same flags, for every dtype and edge case."""
    values = [0.0, 1.0, 0.7, 3.0, 1e-45, -1.0, math.nan, math.inf, 1e-30, 123.456]
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        t = torch.tensor(values, dtype=dtype, device=device)
        inv_ref, flags_ref = inverse_temperature_torch(t, len(values))
        inv = torch.empty(len(values), dtype=torch.float32, device=device)
        flags = torch.empty(len(values), dtype=torch.int32, device=device)
        inverse_temperature_kernel[(1,)](t, inv, flags, len(values), 1, BLOCK=16, FLAG=FLAG_BAD_TEMPERATURE)
        assert torch.equal(inv, inv_ref) and torch.equal(flags, flags_ref)
        expected = torch.tensor(values, dtype=dtype).float()
        assert torch.equal(inv_ref[1:4].cpu(), torch.tensor(1.0) / expected[1:4])
        bad = [i for i, v in enumerate(flags_ref.cpu().tolist()) if v & FLAG_BAD_TEMPERATURE]
        assert bad == ([4, 5, 6, 7] if dtype != torch.bfloat16 else [5, 6, 7]), (dtype, bad)  # bf16(1e-45) = 0


@pytest.mark.parametrize("entry", ["sample", "sample_from_logits"])
def test_bad_tensor_temperature_found_after_the_kernels(entry, device):
    """A per-row temperature is checked on the device; the error names the row and its value, and
    with host_checks=False the tokens are still in range."""
    g = torch.Generator().manual_seed(1)
    h = torch.randn(3, 16, generator=g).to(torch.float16).to(device)
    w = torch.randn(50, 16, generator=g).to(torch.float16).to(device)

    def call(t, **kw):
        if entry == "sample":
            return flashsampling.sample(h, w, temperature=t, seed=1, **kw)
        return flashsampling.sample_from_logits(h.float() @ w.float().T, temperature=t, seed=1, **kw)

    for bad, row in (([1.0, 1e-45, 1.0], 1), ([1.0, 1.0, -2.0], 2), ([math.inf, 1.0, 1.0], 0)):
        t = torch.tensor(bad, device=h.device)
        with pytest.raises(ValueError, match=rf"temperature\[{row}\]="):
            call(t)
        tok = call(t, host_checks=False)
        assert int(tok.min()) >= 0 and int(tok.max()) < 50
    scalar_tensor = call(torch.tensor(0.8, dtype=torch.float64, device=h.device))
    assert torch.equal(scalar_tensor, call(0.8))


def test_programs_per_sm_counts_registers_and_shared_memory():
    """The persistent kernel launches as many programs per SM as registers and shared memory allow."""
    T = flashsampling.TileConfig
    assert programs_per_sm(T(128, 256, 64, num_warps=16, num_stages=4, epilogue_v=32, persistent=True), 2) == 1
    capped = T(128, 128, 64, num_warps=8, num_stages=3, epilogue_v=32, persistent=True, max_registers=128)
    assert programs_per_sm(capped, 2) == 2  # 2 x 128 regs x 256 threads = 64K; 2 x 96 KB of shared memory
    assert programs_per_sm(capped, 4) == 1  # fp32 inputs: 192 KB of pipeline
    assert programs_per_sm(T(16, 64, 64, num_warps=4, num_stages=2, max_registers=64), 2) == 8


def test_host_inverse_temperature_is_float32_division():
    """The scalar path's float64-then-float32 quotient equals NumPy's float32 ``1 / float32(t)`` bit for bit:
    log-uniform temperatures over float32's whole range (quotients from subnormal to near overflow), the powers of
    two, and the two edges (the largest temperature whose inverse is nonzero, the smallest that does not overflow)."""

    rng = np.random.default_rng(5)
    ts = np.concatenate(
        [
            np.exp(rng.uniform(np.log(3e-39), np.log(3.4e38), 200_000)),
            rng.uniform(0.05, 4.0, 100_000),
            2.0 ** np.arange(-126, 128, dtype=np.float64),
            np.float32(1) / np.array([np.finfo(np.float32).max, np.finfo(np.float32).tiny], dtype=np.float32),
        ]
    ).astype(np.float32)
    with np.errstate(over="ignore", divide="ignore"):
        want = np.float32(1) / ts
    for t, q in zip(ts.tolist(), want.tolist(), strict=True):
        if math.isinf(q):
            with pytest.raises(ValueError, match="too small"):
                host_inverse_temperature(t)
        else:
            assert host_inverse_temperature(t) == q, t
    # a float64 temperature between float32 values is rounded to float32 first, as the tensor path does
    assert host_inverse_temperature(0.7) == float(np.float32(1) / np.float32(0.7))
