"""The noise generator: Philox known answers, kernel = twin bit for bit, range, key independence; the float64
arithmetic and the coin of the second-level draws."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import flashsampling
from flashsampling.noise import (
    MAX_NOISE,
    NOISE_ABS_TOL,
    NOISE_REL_TOL,
    coin_take,
    coin_take_np,
    coin_threshold,
    exp_neg64,
    exp_neg64_np,
    exponential64_from_bits,
    exponential64_from_bits_np,
    exponential_exact,
    exponential_from_bits_np,
    gumbel64_from_bits,
    gumbel64_from_bits_np,
    log64,
    log64_np,
    merge_coin,
    merge_coin_np,
    pair_noise,
    philox4x32_np,
    positive_log,
    ratio_to_half_one,
    split_seed,
    tie_key,
    token_noise,
    token_noise_np,
)


@triton.jit(do_not_specialize=["k0", "k1", "row0", "sample"])
def _noise_table_kernel(out_ptr, key_ptr, k0, k1, row0, sample, N: tl.constexpr, V: tl.constexpr):
    r = tl.program_id(0)
    idx = tl.arange(0, V)
    zeros = tl.zeros([V], dtype=tl.uint32)
    c_row = (tl.zeros([V], dtype=tl.int32) + row0 + r).to(tl.uint32)
    c_smp = (tl.zeros([V], dtype=tl.int32) + sample).to(tl.uint32)
    g = token_noise(k0.to(tl.uint32), k1.to(tl.uint32), c_row, idx.to(tl.uint32), c_smp, N)
    key = tie_key(k0.to(tl.uint32), k1.to(tl.uint32), c_row, idx.to(tl.uint32), c_smp + zeros, N)
    tl.store(out_ptr + r * V + idx, g)
    tl.store(key_ptr + r * V + idx, key.to(tl.int64))


@triton.jit(do_not_specialize=["k0", "k1", "sample"])
def _pair_noise_kernel(even_ptr, odd_ptr, k0, k1, sample, N: tl.constexpr, P: tl.constexpr):
    r = tl.program_id(0)
    p = tl.arange(0, P)
    c_row = (tl.zeros([P], dtype=tl.int32) + r).to(tl.uint32)
    c_smp = (tl.zeros([P], dtype=tl.int32) + sample).to(tl.uint32)
    g_even, g_odd = pair_noise(k0.to(tl.uint32), k1.to(tl.uint32), c_row, p.to(tl.uint32), c_smp, N)
    tl.store(even_ptr + r * P + p, g_even)
    tl.store(odd_ptr + r * P + p, g_odd)


def kernel_noise(seed: int, rows: int, v: int, sample: int, device) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = split_seed(seed)
    out = torch.empty((rows, v), dtype=torch.float32, device=device)
    key = torch.empty((rows, v), dtype=torch.int64, device=device)
    _noise_table_kernel[(rows,)](out, key, lo, hi, 0, sample, N=10, V=v)
    return out.cpu().numpy(), key.cpu().numpy()


@pytest.mark.parametrize(
    "ctr, key, expected",
    [
        ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
        ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
        (
            (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
            (0xA4093822, 0x299F31D0),
            (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
        ),
    ],
    ids=["zeros", "ones", "pi"],
)
def test_philox_known_answers(ctr, key, expected):
    """Random123's known-answer vectors for Philox4x32-10."""
    out = philox4x32_np(*ctr, *key)
    assert tuple(int(x) for x in out) == expected


@pytest.mark.parametrize("seed", [0, 1, 2**64 - 1, 0x9E3779B97F4A7C15])
def test_kernel_noise_equals_twin(seed, device):
    g_k, key_k = kernel_noise(seed, rows=3, v=256, sample=5, device=device)
    g_t, key_t = token_noise_np(
        seed, np.arange(3, dtype=np.uint32)[:, None], np.arange(256, dtype=np.uint32)[None, :], 5
    )
    np.testing.assert_array_equal(key_k, key_t.astype(np.int64))
    if flashsampling.INTERPRET:
        np.testing.assert_array_equal(g_k.view(np.uint32), g_t.view(np.uint32))
    else:
        np.testing.assert_allclose(g_k, g_t, rtol=NOISE_REL_TOL, atol=NOISE_ABS_TOL)


def test_pair_noise_equals_token_noise(device):
    """One Philox block per token pair gives each token the noise of the per-token path, bit for bit."""
    lo, hi = split_seed(12345)
    even = torch.empty((2, 64), dtype=torch.float32, device=device)
    odd = torch.empty_like(even)
    _pair_noise_kernel[(2,)](even, odd, lo, hi, 3, N=10, P=64)
    g_k, _ = kernel_noise(12345, rows=2, v=128, sample=3, device=device)
    np.testing.assert_array_equal(even.cpu().numpy().view(np.uint32), g_k[:, 0::2].view(np.uint32))
    np.testing.assert_array_equal(odd.cpu().numpy().view(np.uint32), g_k[:, 1::2].view(np.uint32))


def test_token_noise_layout():
    """Token 2p takes words (w0, w1) of block (p, row, sample, 0), token 2p + 1 words (w2, w3); the
    tie-break key is w0 | 1 of block (index, row, sample, STREAM_TIE)."""
    from flashsampling.noise import STREAM_TIE, gumbel_from_bits_np

    seed = 0xDEADBEEF12345678
    k0, k1 = split_seed(seed)
    idx = np.arange(10, dtype=np.uint32)
    g, key = token_noise_np(seed, 4, idx, 2)
    w0, w1, w2, w3 = philox4x32_np(idx[::2] >> 1, 4, 2, 0, k0, k1)
    np.testing.assert_array_equal(g[0::2], gumbel_from_bits_np(w0, w1))
    np.testing.assert_array_equal(g[1::2], gumbel_from_bits_np(w2, w3))
    np.testing.assert_array_equal(key, philox4x32_np(idx, 4, 2, STREAM_TIE, k0, k1)[0] | np.uint32(1))


def test_noise_never_infinite_at_extreme_bits():
    """k = 0, 2**64 - 1 and the branch edges give finite noise; the extremes are +-MAX values."""
    w = np.array([0, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 1, 0xFFFFFFFE], dtype=np.uint32)
    w0, w1 = np.meshgrid(w, w)
    e = exponential_from_bits_np(w0.ravel(), w1.ravel())
    g = -np.log(e)
    assert np.all(np.isfinite(g)) and np.all(e > 0)
    assert g.max() == pytest.approx(MAX_NOISE, rel=1e-6)
    assert g.min() > -np.log(46.0)


def test_noise_float32_close_to_exact():
    """Float32 E is within a few ulp of the float64 value from exact integer arithmetic."""
    rng = np.random.default_rng(7)
    w0 = rng.integers(0, 2**32, size=200_000, dtype=np.uint32)
    w1 = rng.integers(0, 2**32, size=200_000, dtype=np.uint32)
    # adversarial: near 0, near 2**64, near the branch point 2**63
    w1[:1000] = rng.integers(0, 4, 1000)
    w1[1000:2000] = 0xFFFFFFFF - rng.integers(0, 4, 1000)
    w1[2000:3000] = 0x80000000 - rng.integers(0, 2, 1000).astype(np.uint32)
    e32 = exponential_from_bits_np(w0, w1).astype(np.float64)
    e64 = exponential_exact(w0, w1)
    rel = np.abs(e32 / e64 - 1.0)
    assert rel.max() < 8 * 2.0**-24, rel.max()


def test_streams_distinct_across_row_index_sample_seed():
    """No two of (seed, row, index, sample) share the 128-bit block: compare many."""
    rows, idx, smp = np.meshgrid(np.arange(8), np.arange(64), np.arange(8), indexing="ij")
    blocks = []
    for seed in (0, 1):
        k0, k1 = split_seed(seed)
        w = philox4x32_np(idx.ravel(), rows.ravel(), smp.ravel(), 0, k0, k1)
        blocks.append(np.stack(w, axis=1))
    allb = np.concatenate(blocks)
    packed = allb.view(np.dtype((np.void, 16)))
    assert len(np.unique(packed)) == len(allb)


def test_noise_is_gumbel():
    """KS test of 10^6 twin noise values against Gumbel(0, 1); alpha = 1e-6."""
    from scipy import stats

    g, _ = token_noise_np(3, np.arange(1000, dtype=np.uint32)[:, None], np.arange(1000, dtype=np.uint32)[None, :], 0)
    res = stats.kstest(g.ravel().astype(np.float64), stats.gumbel_r.cdf)
    assert res.pvalue > 1e-6, res


@pytest.mark.parametrize("start, stop", [(0, 10), (4, 12), (3, 11), (0, 7), (6, 7)])
def test_twin_pair_fast_path_equals_per_token_path(start, stop):
    """The twin computes one block per pair for a run of whole pairs and one per token otherwise:
    the same noise either way, and lazy keys equal eager ones."""
    from flashsampling.noise import STREAM_TOKEN, gumbel_from_bits_np

    seed, rows = 99, np.arange(3, dtype=np.uint32)[:, None]
    idx = np.arange(start, stop, dtype=np.uint32)[None, :]
    g, key = token_noise_np(seed, rows, idx, 5)
    g_lazy, key_lazy = token_noise_np(seed, rows, idx, 5, lazy_keys=True)
    k0, k1 = split_seed(seed)
    w0, w1, w2, w3 = philox4x32_np(idx >> np.uint32(1), rows, 5, STREAM_TOKEN, k0, k1)
    odd = (idx & np.uint32(1)) == 1
    expect = gumbel_from_bits_np(np.where(odd, w2, w0), np.where(odd, w3, w1))
    np.testing.assert_array_equal(g.view(np.uint32), expect.view(np.uint32))
    np.testing.assert_array_equal(g_lazy.view(np.uint32), expect.view(np.uint32))
    np.testing.assert_array_equal(np.asarray(key_lazy), key)


@triton.jit
def _logs_kernel(x_ptr, ours_ptr, ref_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(ours_ptr + offs, positive_log(x))
    tl.store(ref_ptr + offs, tl.log(x))


@pytest.mark.skipif(flashsampling.INTERPRET, reason="compiled only: in the interpreter both are NumPy's log")
def test_positive_log_equals_libdevice_bit_for_bit():
    """positive_log (libdevice's logf without its special-case branches) returns exactly tl.log's bits
    on the noise's domain [2**-66, 46]: every float32 in [1/2, 2) (where the polynomial's argument
    sweeps all of [-1/3, 1/3)), and 2**24 random ones across the whole domain."""
    dense = torch.arange(0x3F000000, 0x40000000, dtype=torch.int32)
    g = torch.Generator().manual_seed(0)
    lo, hi = np.float32(2.0**-66).view(np.int32), np.float32(46.0).view(np.int32)
    wide = torch.randint(int(lo), int(hi) + 1, (1 << 24,), dtype=torch.int32, generator=g)
    x = torch.cat([dense, wide]).view(torch.float32).cuda()
    ours, ref = torch.empty_like(x), torch.empty_like(x)
    _logs_kernel[(x.numel() // 1024,)](x, ours, ref, BLOCK=1024)
    assert torch.equal(ours.view(torch.int32), ref.view(torch.int32))


@triton.jit
def _ratio_kernel(d_ptr, y_ptr, ours_ptr, ref_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    d = tl.load(d_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(ours_ptr + offs, ratio_to_half_one(d, y))
    tl.store(ref_ptr + offs, tl.fdiv(d, y))


@pytest.mark.skipif(flashsampling.INTERPRET, reason="compiled only: in the interpreter both are NumPy's division")
def test_ratio_to_half_one_equals_fdiv_bit_for_bit():
    """ratio_to_half_one (MUFU.RCP and a multiply) returns exactly tl.fdiv's bits (div.full.f32) for every
    float32 y in [1/2, 1] and d of either sign in the range the noise passes (|d| in [2**-66, 2**-24]):
    each y once with a random d, and 2**24 random pairs."""
    g = torch.Generator().manual_seed(1)
    every_y = torch.arange(0x3F000000, 0x3F800001, dtype=torch.int32)
    lo, hi = np.float32(0.5).view(np.int32), np.float32(1.0).view(np.int32)
    y = torch.cat([every_y, torch.randint(int(lo), int(hi) + 1, (1 << 24,), dtype=torch.int32, generator=g)])
    d_lo, d_hi = np.float32(2.0**-66).view(np.int32), np.float32(2.0**-24).view(np.int32)
    d = torch.randint(int(d_lo), int(d_hi) + 1, y.shape, dtype=torch.int32, generator=g)
    d = torch.where(torch.rand(y.shape, generator=g) < 0.5, d, d | torch.tensor(-(2**31), dtype=torch.int32))
    n = (y.numel() // 1024) * 1024
    y, d = y[:n].view(torch.float32).cuda(), d[:n].view(torch.float32).cuda()
    ours, ref = torch.empty_like(y), torch.empty_like(y)
    _ratio_kernel[(n // 1024,)](d, y, ours, ref, BLOCK=1024)
    assert torch.equal(ours.view(torch.int32), ref.view(torch.int32))


# --------------------------------------------------------------------------------------------
# Float64 arithmetic of the second-level draws: kernel = twin bit for bit, the coin's take set
# --------------------------------------------------------------------------------------------


@triton.jit
def _f64_kernel(x_ptr, a_ptr, w0_ptr, w1_ptr, log_ptr, exp_ptr, e_ptr, g_ptr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    w0 = tl.load(w0_ptr + i).to(tl.uint32)
    w1 = tl.load(w1_ptr + i).to(tl.uint32)
    tl.store(log_ptr + i, log64(tl.load(x_ptr + i)))
    tl.store(exp_ptr + i, exp_neg64(tl.load(a_ptr + i)))
    tl.store(e_ptr + i, exponential64_from_bits(w0, w1))
    tl.store(g_ptr + i, gumbel64_from_bits(w0, w1))


@triton.jit
def _coin_kernel(w0_ptr, w1_ptr, m_ptr, heavy_ptr, lk_ptr, lt_ptr, take_ptr, merge_ptr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    w0 = tl.load(w0_ptr + i).to(tl.uint32)
    w1 = tl.load(w1_ptr + i).to(tl.uint32)
    tl.store(take_ptr + i, coin_take(w0, w1, tl.load(m_ptr + i), tl.load(heavy_ptr + i) != 0).to(tl.int32))
    tl.store(merge_ptr + i, merge_coin(w0, w1, tl.load(lk_ptr + i), tl.load(lt_ptr + i)).to(tl.int32))


def _pad(x: np.ndarray, n: int) -> np.ndarray:
    return np.concatenate([x, np.repeat(x[-1:], n - x.size)])


def _words(k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    k = np.asarray(k, dtype=np.uint64)
    return (k & np.uint64(0xFFFFFFFF)).astype(np.uint32), (k >> np.uint64(32)).astype(np.uint32)


def _t(x: np.ndarray, device, dtype=None) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x)).to(device=device, dtype=dtype)


def kernel_f64(x, a, w0, w1, device) -> tuple[np.ndarray, ...]:
    """(log64(x), exp_neg64(a), E64(w), G64(w)) from the kernel, float64."""
    size = len(x)
    n = -(-size // 256) * 256
    x, a, w0, w1 = (_pad(np.asarray(v), n) for v in (x, a, w0, w1))
    outs = [torch.empty(n, dtype=torch.float64, device=device) for _ in range(4)]
    _f64_kernel[(n // 256,)](_t(x, device), _t(a, device), _t(w0.astype(np.int64), device),
                             _t(w1.astype(np.int64), device), *outs, BLOCK=256)  # fmt: skip
    return tuple(o.cpu().numpy()[:size] for o in outs)


def kernel_coins(w0, w1, m, heavy, l_keep, l_take, device) -> tuple[np.ndarray, np.ndarray]:
    """(coin_take(w, m, heavy), merge_coin(w, l_keep, l_take)) from the kernel, bool."""
    size = len(w0)
    n = -(-size // 256) * 256
    args = [_pad(np.asarray(v), n) for v in (w0, w1, m, heavy, l_keep, l_take)]
    outs = [torch.empty(n, dtype=torch.int32, device=device) for _ in range(2)]
    _coin_kernel[(n // 256,)](_t(args[0].astype(np.int64), device), _t(args[1].astype(np.int64), device),
                              _t(args[2].astype(np.float64), device), _t(args[3].astype(np.int32), device),
                              _t(args[4].astype(np.float64), device), _t(args[5].astype(np.float64), device), *outs,
                              BLOCK=256)  # fmt: skip
    return tuple(o.cpu().numpy()[:size].astype(bool) for o in outs)


def _f64_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Edge and random inputs: ``x`` over [2**-66, 46] (binade edges, the reduction's edges sqrt(1/2), sqrt(2),
    1 and its neighbours), ``a`` over [0, 70] (0, ln 2 / 2 multiples, the clamp, inf, NaN), words at the
    generator's extremes and its branch point."""
    rng = np.random.default_rng(11)
    edges = [1.0, 0.5, 2.0, 2.0**-66, 46.0, np.sqrt(0.5), np.sqrt(2.0), 45.06]
    edges += [np.nextafter(v, d) for v in (1.0, np.sqrt(0.5), np.sqrt(2.0)) for d in (0.0, 3.0)]
    x = np.concatenate(
        [edges, np.exp(rng.uniform(np.log(2.0**-66), np.log(46.0), 700)), 1 + rng.uniform(-0.3, 0.42, 200)]
    )
    ln2 = np.log(2.0)
    a = np.concatenate([[0.0, 2.0**-60, ln2 / 2, 3 * ln2 / 2, 64.0, np.nextafter(64.0, 0), 70.0, np.inf, np.nan],
                        np.arange(1, 93) * ln2 / 2, rng.uniform(0, 70, 700)])  # fmt: skip
    special = np.array([0, 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64 - 2, 2**52, 2**53 + 1, 2**11], dtype=np.uint64)
    k = np.concatenate([special, rng.integers(0, 2**63, 700, dtype=np.uint64) * np.uint64(2)
                        + rng.integers(0, 2, 700, dtype=np.uint64)])  # fmt: skip
    w0, w1 = _words(k)
    n = max(len(x), len(a), len(w0))
    return _pad(x, n), _pad(a, n), _pad(w0, n), _pad(w1, n)


def test_float64_noise_kernel_equals_twin(device):
    """log64, exp_neg64 and the float64 exponential and Gumbel of the group noise: kernel = twin, bit for bit,
    interpreted and compiled (separately rounded operations on both sides)."""
    x, a, w0, w1 = _f64_inputs()
    got = kernel_f64(x, a, w0, w1, device)
    want = (log64_np(x), exp_neg64_np(a), exponential64_from_bits_np(w0, w1), gumbel64_from_bits_np(w0, w1))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.view(np.int64), w.view(np.int64))


def test_float64_noise_range_and_accuracy_spot():
    """G64 is finite on the extreme words and reaches 65 log 2; E64 and G64 agree with float64 logs of the exact
    integer (``exponential_exact``) to a few ulp on random words (the proved bounds: proofs/finite_precision.md)."""
    x, a, w0, w1 = _f64_inputs()
    g = gumbel64_from_bits_np(w0, w1)
    assert np.all(np.isfinite(g)) and g.max() == pytest.approx(MAX_NOISE, rel=1e-15) and g.min() > -np.log(46.0)
    e = exponential64_from_bits_np(w0, w1)
    np.testing.assert_allclose(e, exponential_exact(w0, w1), rtol=2.0**-48)
    assert log64_np(np.array([1.0]))[0] == 0.0 and exp_neg64_np(np.array([0.0]))[0] == 1.0
    assert exp_neg64_np(np.array([np.inf, np.nan])).tolist() == [exp_neg64_np(np.array([64.0]))[0]] * 2


#: Coin probabilities ``m`` where ``K(q)`` is delicate: ``2**64 m`` a half-integer or an integer, near ``2**52``
#: and ``2**53`` (where float64 stops holding halves and odd integers), the smallest ones, ``1/2``.
def _coin_edges() -> np.ndarray:
    vals = [0.0, 2.0**-70, 2.0**-66, 2.0**-65, np.nextafter(2.0**-65, 1), 2.0**-64, 1.5 * 2.0**-64, 2.5 * 2.0**-64,
            0.5, np.nextafter(0.5, 0), 0.25, 1 / 3]  # fmt: skip
    for e in (-12, -11):  # 2**64 m = 2**52, 2**53
        for j in range(1, 6):
            vals += [2.0**e + j * 2.0 ** (e - 52), 2.0**e - j * 2.0 ** (e - 53)]
    vals += [(j + 0.5) * 2.0**-64 for j in range(1, 8)] + [(2**40 + 0.5) * 2.0**-64, 3 * 2.0**-13]
    return np.array(vals)


def _coin_cases(seed: int = 3):
    """``(m, heavy, k)`` triples: every edge and 300 random ``m``, both sides, at ``k = K - 1, K`` (and 0, 2**64 - 1)
    with ``K`` from exact rationals; returns the arrays and the expected take."""
    rng = np.random.default_rng(seed)
    ms = np.concatenate([_coin_edges(), np.exp(rng.uniform(-45, np.log(0.5), 300))])
    m_out, h_out, k_out, want = [], [], [], []
    for m in ms:
        for heavy in (False, True):
            big_k = coin_threshold(float(m), heavy)
            for k in (big_k - 1, big_k, 0, 2**64 - 1):
                if 0 <= k < 2**64:
                    m_out.append(m)
                    h_out.append(heavy)
                    k_out.append(k)
                    want.append(k < big_k)
    return np.array(m_out), np.array(h_out), np.array(k_out, dtype=np.uint64), np.array(want)


def test_coin_take_set_is_zero_to_k(device):
    """``coin_take`` takes exactly ``k < K(q) = ceil(2**64 q - 1/2)`` (``q = m`` or ``1 - m``): checked at ``k = K - 1``
    and ``K`` on edge and random ``m`` (with ``K`` in exact rationals), twin and kernel, bit for bit."""
    m, heavy, k, want = _coin_cases()
    w0, w1 = _words(k)
    np.testing.assert_array_equal(coin_take_np(w0, w1, m, heavy), want)
    got, _ = kernel_coins(w0, w1, m, heavy, np.zeros(m.size), np.zeros(m.size), device)
    np.testing.assert_array_equal(got, want)


def _float32_coin(w0, w1, m, heavy):
    """A planted defect: the version-1 coin, a float32 exponential against the float64 threshold ``-log q``."""
    q = np.where(heavy, 1.0 - m, m)
    with np.errstate(divide="ignore"):
        return exponential_from_bits_np(w0, w1).astype(np.float64) > -np.log(q)


def _float64_ceil_coin(w0, w1, m, heavy):
    """A planted defect: ``K = ceil(2**64 q - 1/2)`` evaluated in float64 (it rounds once ``2**64 q >= 2**52``)."""
    q = np.where(heavy, 1.0 - np.asarray(m), m)
    big_k = np.array([int(np.ceil(v * 2.0**64 - 0.5)) for v in q], dtype=object)
    k = w1.astype(object) * 2**32 + w0.astype(object)
    return np.array([a < b for a, b in zip(k, big_k)])


@pytest.mark.parametrize("planted", [_float32_coin, _float64_ceil_coin], ids=["float32-exponential", "float64-ceil"])
def test_coin_take_set_check_catches_planted_coins(planted):
    m, heavy, k, want = _coin_cases()
    w0, w1 = _words(k)
    assert (planted(w0, w1, m, heavy) != want).sum() > 0


def test_merge_coin_kernel_equals_twin(device):
    """The merge coin from log-masses: kernel = twin bit for bit on random and edge ``(L, L_C)`` (equal, one or both
    ``-inf``, differences beyond the clamp); ``L_C = -inf`` never takes, ``L = -inf < L_C`` always does."""
    rng = np.random.default_rng(5)
    n = 2000
    lk = rng.normal(0, 8, n)
    lt = lk + rng.normal(0, 3, n) * rng.choice([1e-6, 1.0, 20.0], n)
    lk[:6], lt[:6] = [-np.inf, -np.inf, 1.0, 5.0, 0.0, -80.0], [-np.inf, 2.0, -np.inf, 5.0, 70.0, 0.0]
    w0 = rng.integers(0, 2**32, n, dtype=np.uint32)
    w1 = rng.integers(0, 2**32, n, dtype=np.uint32)
    want = merge_coin_np(w0, w1, lk, lt)
    _, got = kernel_coins(w0, w1, np.zeros(n), np.zeros(n, bool), lk, lt, device)
    np.testing.assert_array_equal(got, want)
    assert want[:6].tolist()[:3] == [False, True, False] and want[5]
    never = merge_coin_np(w0, w1, lk, np.full(n, -np.inf))
    always = merge_coin_np(w0, w1, np.full(n, -np.inf), lt)
    assert not never.any() and always[np.isfinite(lt)].all()
