"""Online variant: chunk-by-chunk merges with O(1) state, against its twin and the exact softmax.

Layer 1 (deterministic): one chunk is exactly the fused kernel; several chunks (any sizes, any order)
replay the twin's merges except at counted coin near-ties; greedy rows equal the fused token; the
final log-mass equals float64 ``logsumexp`` within ``logmass_tolerance``.
Layer 2 (statistical): ``online_sampler_np`` and a small kernel run against the exact softmax.

Family: ``STAT_CHECKS`` checks at ``ALPHA = 1e-6`` each: an exact sampler fails this file with
probability at most ``STAT_CHECKS * 1e-6`` (Bonferroni).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import flashsampling
from flashsampling.grouped import group_logmass_np, local_samples_np, logmass_tolerance
from flashsampling.noise import merge_coin_probability_np
from flashsampling.online import (
    OnlineSampler,
    coin_words_np,
    default_chunks,
    merged_logmass_np,
    online_choice_np,
    online_sampler_np,
    sample_online,
)
from flashsampling.reference import fp32_logit_error_bound, logsumexp, softmax, target_logits
from flashsampling.twin import inverse_temperature32
from tests.stat_checks import assert_fits, assert_fits_with_tail, many_tail_logits

ALPHA = 1e-6
STAT_CHECKS = 5  # normal, many-tail (2), masked, kernel
N = 100_000


def _logits(b: int, v: int, seed: int, mask_frac: float = 0.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    z = (rng.standard_normal((b, v)) * 2.5).astype(np.float32)
    if mask_frac:
        z[rng.random((b, v)) < mask_frac] = -np.inf
    return z


def _run(z: np.ndarray, chunks, *, temperature, seed, S, device) -> flashsampling.online.OnlineResult:
    o = OnlineSampler(z.shape[0], temperature=temperature, seed=seed, num_samples=S, device=device)
    zt = torch.from_numpy(z).to(device)
    for a, m in chunks:
        o.update_logits(zt[:, a : a + m], start=a)
    return o.result(vocab_size=z.shape[1])


# --------------------------------------------------------------------------------------------
# Layer 1
# --------------------------------------------------------------------------------------------


def test_single_chunk_is_the_fused_kernel(device):
    z = _logits(4, 600, 1, mask_frac=0.1)
    t = torch.tensor([0.8, 0.0, 1.3, 2.0], device=device)
    res = _run(z, [(0, 600)], temperature=t, seed=5, S=3, device=device)
    fused = flashsampling.sample_from_logits(torch.from_numpy(z).to(device), temperature=t, seed=5, num_samples=3)
    assert torch.equal(res.tokens, fused)
    gen = torch.Generator().manual_seed(2)
    h = torch.randn(3, 32, generator=gen).to(device)
    w = torch.randn(200, 32, generator=gen).to(device)
    tiles = flashsampling.TileConfig(16, 64, 32)
    o = OnlineSampler(3, temperature=0.9, seed=8, num_samples=2, device=device)
    o.update(h, w, tiles=tiles)
    fused_mm = flashsampling.sample(h, w, temperature=0.9, seed=8, num_samples=2, tiles=tiles)
    assert torch.equal(o.result().tokens, fused_mm)


def test_chunks_in_any_order_replay_the_twin(device):
    """Uneven chunks (one of a single column, one with zero mass) merged out of order; the tokens
    equal the twin's except where a coin's uniform ``(k + 1/2) / 2**64`` is within 1e-5 of the twin's take
    probability (the kernel's float32 tile log-masses against the twin's float64 ones; counted)."""
    b, v, S, seed, temp = 3, 500, 6, 606, 0.9
    z = _logits(b, v, 2, mask_frac=0.2)
    z[:, 237:238] = 0.5
    z[1, 238:] = -np.inf  # the last chunk has zero mass in row 1
    chunks = [(200, 37), (0, 200), (237, 1), (238, 262)]
    res = _run(z, chunks, temperature=temp, seed=seed, S=S, device=device)
    starts = np.array([a for a, _ in chunks])
    sizes = np.array([m for _, m in chunks])
    inv = inverse_temperature32(temp, 1)[0]
    expected = np.empty((b, S), dtype=np.int64)
    near = np.zeros((b, S), dtype=bool)
    for r in range(b):
        L = group_logmass_np(z[r], inv, starts, sizes)
        choice = online_choice_np(L, starts, seed, S, row=r)
        expected[r] = local_samples_np(z[r], inv, seed, starts, sizes, choice, row=r)
        before = merged_logmass_np(L)
        m, heavy = merge_coin_probability_np(before, L)
        q = np.where(heavy, 1.0 - m, m)
        w0, w1 = coin_words_np(seed, starts[None, :], r, np.arange(S)[:, None])
        u = (w1.astype(np.float64) * 2.0**32 + w0.astype(np.float64) + 0.5) * 2.0**-64
        both = np.isfinite(L) & np.isfinite(before)
        near[r] = (both & (np.abs(u - q) <= 1e-5)).any(axis=1)
    got = res.tokens.cpu().numpy()
    bad = (got != expected) & ~near
    assert bad.sum() == 0, (got, expected)
    assert near.sum() <= 1
    assert not np.isin(got[1], np.arange(238, 500)).any()


def test_greedy_rows_equal_fused_in_any_chunking(device):
    z = _logits(2, 300, 3)
    z[0, [10, 250]] = 9.0  # an exact tie across chunks: broken by the key, as in the fused kernel
    t = torch.zeros(2, device=device)
    fused = flashsampling.sample_from_logits(torch.from_numpy(z).to(device), temperature=t, seed=4, num_samples=4)
    res = _run(z, [(100, 200), (0, 100)], temperature=t, seed=4, S=4, device=device)
    assert torch.equal(res.tokens, fused)
    np.testing.assert_array_equal(res.logsumexp.cpu().numpy(), z.max(axis=1))


@pytest.mark.parametrize("chunks", [[1, 1, 5, 13, 40], [60], [30, 30]], ids=lambda c: "-".join(map(str, c)))
def test_logsumexp_matches_float64(chunks, device):
    rng = np.random.default_rng(6)
    z = rng.uniform(-40, 10, (2, 60)).astype(np.float32)
    z[1, :20] = -np.inf
    starts = np.cumsum([0] + chunks[:-1])
    res = _run(z, list(zip(starts, chunks)), temperature=0.7, seed=1, S=1, device=device)
    fin = np.isfinite(z)
    tol = logmass_tolerance(np.abs(z[fin] / np.float32(0.7)).max(), max(chunks))
    err = np.abs(res.logsumexp.cpu().numpy() - logsumexp(z.astype(np.float64), 0.7))
    assert err.max() <= tol, (err, tol)


def test_weight_streamed_in_chunks(device):
    """The matmul path over a weight handed over in chunks: log-mass within tolerance plus the fp32
    logit error, tokens in range, greedy row equal to the fused greedy token."""
    gen = torch.Generator().manual_seed(9)
    h = torch.randn(3, 40, generator=gen).to(torch.bfloat16)
    w = (torch.randn(500, 40, generator=gen) * 0.5).to(torch.bfloat16)
    t = torch.tensor([1.0, 0.0, 0.6])
    tok, lse = sample_online(h.to(device), w.to(device), chunk_size=160, temperature=t.to(device), seed=3,
                             num_samples=2, return_logsumexp=True)  # fmt: skip
    z64 = target_logits(h, w)
    err = fp32_logit_error_bound(h, w).max()
    for r, temp in enumerate(t.tolist()):
        ref = z64[r].max() if temp == 0 else logsumexp(z64[r], temp)[0]
        tol = logmass_tolerance(np.abs(z64[r] / (temp or 1.0)).max(), 128) + err / (temp or 1.0)
        assert abs(float(lse[r]) - ref) <= tol
    assert int(tok.min()) >= 0 and int(tok.max()) < 500
    fused = flashsampling.sample(h.to(device), w.to(device), temperature=t.to(device), seed=3, num_samples=2)
    assert torch.equal(tok[1], fused[1])


def test_errors(device):
    o = OnlineSampler(2, seed=1, device=device)
    with pytest.raises(ValueError, match="no chunk was merged"):
        o.result()
    z = torch.zeros(2, 50, device=device)
    o.update_logits(z[:, :20])
    with pytest.raises(ValueError, match="overlaps"):
        o.update_logits(z[:, :10], start=15)
    with pytest.raises(ValueError, match="batch_size=2"):
        o.update_logits(torch.zeros(3, 5, device=device))
    with pytest.raises(ValueError, match="vocab_size=50"):
        o.result(vocab_size=50)
    with pytest.raises(TypeError, match="start"):
        o.update_logits(z[:, :5], start=2.0)
    with pytest.raises(TypeError, match="batch_size"):
        OnlineSampler(2.0)
    with pytest.raises(ValueError, match="temperature"):
        OnlineSampler(2, temperature=-1.0, device=device)
    masked = OnlineSampler(2, seed=1, device=device)
    zz = torch.zeros(2, 50, device=device)
    zz[1] = -float("inf")
    masked.update_logits(zz[:, :25])
    masked.update_logits(zz[:, 25:])
    with pytest.raises(ValueError, match="no finite logit"):
        masked.result()
    nan = OnlineSampler(2, seed=1, device=device)
    zn = torch.zeros(2, 50, device=device)
    zn[0, 40] = float("nan")
    nan.update_logits(zn)
    with pytest.raises(ValueError, match="NaN"):
        nan.result()
    off = OnlineSampler(2, seed=1, device=device, host_checks=False)
    off.update_logits(zz)
    tok = off.result().tokens
    assert int(tok.min()) >= 0 and int(tok.max()) < 50
    with pytest.raises(ValueError, match="no finite logit"):
        online_sampler_np(np.full(10, -np.inf), 1.0, 10, 1)


def test_no_device_given_takes_the_first_chunks(device):
    """``OnlineSampler(B)`` without ``device`` lives on the first chunk's device.  It made its state on the CPU
    first, which a GPU machine refuses (the kernels run on CUDA there): on the GPU this is that machine's test."""
    z = torch.from_numpy(_logits(2, 60, 8)).to(device)
    o = OnlineSampler(2, temperature=0.8, seed=3, num_samples=2)
    o.update_logits(z[:, :25])
    o.update_logits(z[:, 25:])
    assert o.device == z.device
    tok = o.result(vocab_size=60).tokens
    assert tok.device == z.device and int(tok.min()) >= 0 and int(tok.max()) < 60
    greedy = OnlineSampler(2, temperature=0.0, seed=3)
    greedy.update_logits(z)
    assert torch.equal(greedy.result().tokens[:, 0], z.argmax(dim=1))


def test_no_device_given_where_the_kernels_run_only_on_cuda(monkeypatch):
    """What a GPU machine does, on the CPU: with the kernels on CUDA only, ``OnlineSampler(B)`` is made (it raised
    ``device=cpu is not supported``) and a CPU chunk is refused naming the chunk."""
    monkeypatch.setattr(flashsampling._validate, "DEVICE_TYPES", ("cuda",))
    o = OnlineSampler(2, temperature=0.8, seed=3)
    assert o.device is None
    with pytest.raises(ValueError, match="logits_chunk.device=cpu is not supported"):
        o.update_logits(torch.zeros(2, 10))


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without CUDA")
@pytest.mark.parametrize("where", ["cuda", "cuda:0", torch.device("cuda", 1)], ids=str)
def test_cuda_device_without_cuda_is_refused(where):
    """``device="cuda"`` on a machine without CUDA: ``ValueError`` naming the device (it was torch's
    ``AssertionError: Torch not compiled with CUDA enabled``)."""
    with pytest.raises(ValueError, match="CUDA is not available"):
        OnlineSampler(2, device=where)


@pytest.mark.parametrize("update", ["update", "update_logits"])
@pytest.mark.parametrize("start, error", [(-1, ValueError), (2**32, ValueError), (1.0, TypeError), ("0", TypeError)])
def test_a_chunk_of_no_columns_checks_its_start(update, start, error, device):
    """A chunk with no columns merges nothing but its ``start`` is checked as any chunk's (it was accepted)."""
    o = OnlineSampler(2, seed=1, device=device)
    h = torch.zeros(2, 8, device=device)
    args = (h, torch.zeros(0, 8, device=device)) if update == "update" else (torch.zeros(2, 0, device=device),)
    with pytest.raises(error, match="start"):
        getattr(o, update)(*args, start=start)
    getattr(o, update)(*args, start=5)  # a good start: accepted, nothing merged
    assert o.consumed == 0


def test_default_chunks_are_uneven_and_cover():
    for v in (1, 2, 7, 400, 20006):
        sizes = default_chunks(v)
        assert sum(sizes) == v and min(sizes) >= 1
    assert len(set(default_chunks(400))) >= 3


def test_numpy_sampler_is_the_kernel_pathwise(device):
    """``online_sampler_np`` sample s == an OnlineSampler fed the same chunks, row 0, sample s
    (up to coin near-ties from the float32 tile sums, at most one here)."""
    z = _logits(1, 400, 7, mask_frac=0.2)
    sizes = [50, 150, 1, 199]
    starts = np.cumsum([0] + sizes[:-1])
    res = _run(z, list(zip(starts, sizes)), temperature=1.1, seed=77, S=8, device=device)
    twin = online_sampler_np(z[0].astype(np.float64), 1.1, 8, 77, chunk_sizes=sizes)
    assert (res.tokens[0].cpu().numpy() != twin).sum() <= 1


# --------------------------------------------------------------------------------------------
# Layer 2
# --------------------------------------------------------------------------------------------


def _check(samples, probs) -> None:
    assert_fits(samples, probs, alpha=ALPHA)


def test_stats_normal_default_chunks():
    z = np.random.default_rng(30).normal(0, 2, 1000).astype(np.float32).astype(np.float64)
    _check(online_sampler_np(z, 0.7, N, seed=1), softmax(z, 0.7))


def test_stats_many_tail_15_nats():
    z = many_tail_logits(20006, seed=31)
    assert_fits_with_tail(online_sampler_np(z, 1.0, N, seed=2), z, alpha=ALPHA)


def test_stats_masked_with_zero_mass_chunks():
    rng = np.random.default_rng(32)
    z = rng.normal(0, 2, 1000)
    z[rng.random(1000) < 0.3] = -np.inf
    z[:150] = -np.inf  # the first chunks have zero mass: the first chunk with mass is always taken
    z[600:700] = -np.inf
    z = z.astype(np.float32).astype(np.float64)
    sizes = [100, 50, 1, 149, 100, 150, 100, 0, 50, 200, 100]
    _check(online_sampler_np(z, 1.3, N, seed=3, chunk_sizes=sizes), softmax(z, 1.3))


def test_stats_kernel_small(device):
    """The sampler itself: 256 rows x 25 samples of one row, in three uneven chunks out of order."""
    z = np.random.default_rng(33).normal(0, 1.5, 200).astype(np.float32)
    z[::9] = -np.inf
    zz = np.broadcast_to(z, (256, 200)).copy()
    o = OnlineSampler(256, temperature=1.0, seed=6, num_samples=25, device=device)
    zt = torch.from_numpy(zz).to(device)
    for a, b in [(120, 200), (0, 7), (7, 120)]:
        o.update_logits(zt[:, a:b], start=a, block_b=256 if flashsampling.INTERPRET else None)
    tok = o.result(vocab_size=200).tokens
    _check(tok.reshape(-1).cpu().numpy(), softmax(z.astype(np.float64)))
