"""Layer 1 of the evidence: the kernel's tokens equal the NumPy twin's, deterministically.

Two comparisons:

* ``sample_from_logits`` on float32 logits against :func:`flashsampling.twin.sample_twin` on the
  same float32 values: no rounding separates them, so the tokens must be equal everywhere (in the
  interpreter the noise is bit-identical; compiled, near-ties within the noise bound are counted).
* ``sample`` (fused matmul) against the argmax of ``z64 / T + G_twin`` with ``z64`` the float64
  target logits: equal wherever the top two perturbed scores are further apart than
  ``2 * (fp32 logit error / T + score rounding)``; the near-ties are counted and reported.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import flashsampling
import flashsampling._request as request_module
from flashsampling import TileConfig
from flashsampling.kernels.stage1 import launch_logits_stage1
from flashsampling.kernels.stage2 import reduce_tiles
from flashsampling.noise import NOISE_ABS_TOL, NOISE_REL_TOL, split_seed, tie_key_np, token_noise_np
from flashsampling.reference import fp32_logit_error_bound, target_logits
from flashsampling.twin import sample_twin

SHAPES = [  # (B, V, D): V < tile, V not a multiple of the tile, B > row tile, D not a multiple of BK
    (1, 10, 16),
    (3, 300, 40),
    (20, 130, 24),
    (2, 517, 80),
]
TILES = [
    TileConfig(16, 16, 16),
    TileConfig(16, 64, 32, epilogue_v=16),
    TileConfig(32, 128, 64, epilogue_v=32),
    TileConfig(16, 32, 16),
    TileConfig(16, 64, 32, persistent=True),
    TileConfig(32, 128, 16, epilogue_v=32, persistent=True),
    TileConfig(64, 128, 16, epilogue_v=16, warp_specialized=True),  # the Gluon kernel on sm_90, else Triton
]


def perturbed_float64(z64: np.ndarray, temperature: float, seed: int, num_samples: int):
    """float64 scores z/T + G (twin noise) for each sample: shape (S, B, V), and the keys."""
    b, v = z64.shape
    scores, keys = [], []
    for s in range(num_samples):
        g, key = token_noise_np(seed, np.arange(b, dtype=np.uint32)[:, None], np.arange(v, dtype=np.uint32)[None, :], s)
        scores.append(z64 / temperature + g.astype(np.float64))
        keys.append(key)
    return np.stack(scores), np.stack(keys)


def compare_with_tolerance(tokens: np.ndarray, scores: np.ndarray, tol: np.ndarray):
    """Tokens (B, S) vs argmax of scores (S, B, V); returns (mismatches outside near-ties, near-ties)."""
    s_count, b, v = scores.shape
    expected = np.argmax(scores, axis=-1).T  # (B, S)
    top2 = np.sort(scores, axis=-1)[..., -2:] if v > 1 else np.concatenate([scores - np.inf, scores], -1)
    gap = (top2[..., 1] - top2[..., 0]).T
    near = gap <= tol
    bad = (tokens != expected) & ~near
    return int(bad.sum()), int(near.sum())


@pytest.mark.parametrize(
    "tiles",
    TILES,
    ids=lambda t: (
        f"bb{t.block_b}-bv{t.block_v}-bd{t.block_d}-ev{t.epilogue_v}-p{int(t.persistent)}-ws{int(t.warp_specialized)}"
    ),
)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"B{s[0]}-V{s[1]}-D{s[2]}")
def test_fused_kernel_replays_twin(shape, tiles, device):
    b, v, d = shape
    gen = torch.Generator().manual_seed(b * 1000 + v)
    h = torch.randn(b, d, generator=gen).to(torch.bfloat16)
    w = (torch.randn(v, d, generator=gen) * 0.5).to(torch.bfloat16)
    seed, temp, s = 1234 + v, 0.8, 1 if tiles.warp_specialized else 3  # (the Gluon kernel: one sample)
    tokens = flashsampling.sample(h.to(device), w.to(device), temperature=temp, seed=seed, num_samples=s, tiles=tiles)
    z64 = target_logits(h, w)
    scores, _ = perturbed_float64(z64, temp, seed, s)
    err = fp32_logit_error_bound(h, w).max() / temp
    rounding = np.abs(scores).max() * 2.0**-23
    noise = 0.0 if flashsampling.INTERPRET else NOISE_ABS_TOL + NOISE_REL_TOL * 46
    bad, near = compare_with_tolerance(tokens.cpu().numpy(), scores, 2 * (err + rounding + noise))
    assert bad == 0, f"{bad} tokens differ from the twin outside near-ties ({near} near-ties)"
    assert near <= max(1, tokens.numel() // 10), f"too many near-ties: {near}"


@pytest.mark.parametrize("block_v", [16, 128, 1024])
@pytest.mark.parametrize("shape", [(1, 10), (3, 300), (9, 1500)], ids=lambda s: f"B{s[0]}-V{s[1]}")
def test_logits_kernel_equals_twin_exactly(shape, block_v, device):
    b, v = shape
    rng = np.random.default_rng(v)
    z = (rng.standard_normal((b, v)) * 3).astype(np.float32)
    z[0, rng.integers(0, v, size=max(1, v // 10))] = -np.inf
    temps = np.linspace(0.5, 2.0, b).astype(np.float32)
    seed = 99 + v
    tokens = flashsampling.sample_from_logits(
        torch.from_numpy(z).to(device),
        temperature=torch.from_numpy(temps).to(device),
        seed=seed,
        num_samples=4,
        block_v=block_v,
    )
    expected = sample_twin(z, temps, seed=seed, num_samples=4)
    if flashsampling.INTERPRET:
        np.testing.assert_array_equal(tokens.cpu().numpy(), expected)
    else:
        agree = (tokens.cpu().numpy() == expected).mean()
        assert agree >= 0.99, agree


def test_tile_invariance(device):
    """One seed gives the same tokens under every tile configuration (and the logits path)."""
    gen = torch.Generator().manual_seed(5)
    b, v, d = 18, 333, 48
    h = torch.randn(b, d, generator=gen).to(torch.float16).to(device)
    w = torch.randn(v, d, generator=gen).to(torch.float16).to(device)
    results = [flashsampling.sample(h, w, seed=77, num_samples=2, tiles=t).cpu() for t in TILES]
    for r in results[1:]:
        assert torch.equal(r, results[0])
    one = [flashsampling.sample(h, w, seed=77, tiles=t).cpu() for t in (TILES[0], TILES[-1])]
    assert torch.equal(one[0], one[1]) and torch.equal(one[0][:, 0], results[0][:, 0])
    z = h.float() @ w.float().T
    for bv in (16, 256):
        r = flashsampling.sample_from_logits(z, seed=77, num_samples=2, block_v=bv).cpu()
        assert (r == results[0]).float().mean() >= 0.97  # only fp32 accumulation order differs


def test_greedy_rows_and_mixed_temperature(device):
    z = torch.tensor([[0.0, 5.0, 1.0, 5.0 - 1e-3], [1.0, 2.0, 3.0, 4.0]], device=device)
    t = torch.tensor([0.0, 1.0], device=device)
    tok = flashsampling.sample_from_logits(z, temperature=t, seed=3, num_samples=50)
    assert torch.all(tok[0] == 1)
    assert len(torch.unique(tok[1])) > 1


@pytest.mark.parametrize("num_samples,batch", [(1, 5), (3, 5), (1, 64)])
def test_scalar_zero_temperature_skips_the_noise_with_the_same_tokens(num_samples, batch, device, monkeypatch):
    """``temperature=0`` (a number) launches stage 1 without the noise, and returns the tokens of the noisy launch
    whose rows are all greedy (a tensor of zeros): exact ties (the weight rows repeated 50 times) included, broken by
    the tie-break keys per sample.  The same for ``sample_from_logits``.  (B = 64 in bf16 runs the Gluon kernel on
    an H100/H200.)"""
    g = torch.Generator().manual_seed(5)
    dtype = torch.bfloat16 if batch == 64 else torch.float32
    h = torch.randn(batch, 64, generator=g).to(device, dtype)
    w = torch.randn(4, 64, generator=g).repeat(50, 1).to(device, dtype)
    zeros = torch.zeros(batch, device=device)
    z = h.float() @ w.float().T
    for launcher, call in [
        ("launch_fused_stage1", lambda t: flashsampling.sample(h, w, temperature=t, seed=9, num_samples=num_samples)),
        ("launch_logits_stage1", lambda t: flashsampling.sample_from_logits(z, temperature=t, seed=9,
                                                                              num_samples=num_samples)),
    ]:  # fmt: skip
        real = getattr(request_module, launcher)
        seen = []
        monkeypatch.setattr(
            request_module, launcher, lambda *a, real=real, seen=seen, **k: seen.append(k["noise"]) or real(*a, **k)
        )
        fast, slow = call(0.0), call(zeros)
        assert seen == [False, True]
        assert torch.equal(fast, slow)
        top = z.argmax(dim=1) % 4  # the tied copies of the best weight row
        assert torch.equal(fast % 4, top[:, None].expand_as(fast))
        if num_samples > 1:
            assert len(torch.unique(fast)) > 5  # ties broken at random, per row and sample


def test_samples_differ_across_rows_and_samples(device):
    z = torch.zeros(4, 1000, device=device)
    tok = flashsampling.sample_from_logits(z, seed=11, num_samples=4).cpu()
    assert len(torch.unique(tok)) >= 14  # 16 uniform draws over 1000 categories


def test_seed_none_uses_torch_generator(device):
    z = torch.zeros(2, 1000, device=device)
    torch.manual_seed(0)
    a = flashsampling.sample_from_logits(z, num_samples=3)
    torch.manual_seed(0)
    b = flashsampling.sample_from_logits(z, num_samples=3)
    c = flashsampling.sample_from_logits(z, num_samples=3)
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize("block_v", [16, 64])
def test_exact_ties_broken_by_the_tie_key(block_v, device):
    """Greedy rows of small integer logits tie exactly inside and across tiles: the kernel takes the
    tied token with the largest tie-break key, as the twin does, on both the paired path (tiles on
    even indices) and the per-token path (a shard at an odd offset)."""
    gen = torch.Generator().manual_seed(5)
    B, V, seed = 6, 203, 0xC0FFEE
    z = torch.randint(0, 3, (B, V), generator=gen).float()
    z[0] = 1.0  # the whole row tied
    inv = torch.zeros(B)  # greedy: no noise, so the ties are exact
    tokens = flashsampling.sample_from_logits(z.to(device), temperature=0.0, seed=seed, num_samples=3, block_v=block_v)
    twin = sample_twin(z.numpy(), 0.0, seed=seed, num_samples=3)
    np.testing.assert_array_equal(tokens.cpu().numpy(), twin)
    assert len(set(tokens[0].tolist())) == 3  # three samples, three different winners of the full tie
    # A shard at global offset 1: the per-token noise path, keyed by the global index.
    lo, hi = split_seed(seed)
    parts = launch_logits_stage1(z[:, 1:].contiguous().to(device), inv.to(device), lo, hi, 2, 16, block_v, col_offset=1)
    tok, _ = reduce_tiles(*parts[:4], V)
    keys = tie_key_np(
        seed,
        np.arange(B, dtype=np.uint32)[:, None, None],
        np.arange(1, V, dtype=np.uint32),
        np.arange(2, dtype=np.uint32)[None, :, None],
    )
    zz = z[:, None, 1:].numpy()
    expect = 1 + np.argmax(np.where(zz == zz.max(axis=-1, keepdims=True), keys, 0), axis=-1)
    np.testing.assert_array_equal(tok.cpu().numpy(), expect)


def test_exact_ties_in_the_fused_kernel_any_tiles(device):
    """Integer h and W (exact fp32 logits) with repeated rows of W: greedy rows tie exactly inside
    tiles, across epilogue chunks and across tiles; every tile configuration returns the twin's
    tokens (and so does a sampled row, whose logits are exact too)."""
    gen = torch.Generator().manual_seed(9)
    b, v, d = 5, 300, 32
    h = torch.randint(-1, 2, (b, d), generator=gen).to(torch.float16)
    w = torch.randint(-1, 2, (v // 3, d), generator=gen).to(torch.float16).repeat(3, 1)
    z = (h.double() @ w.double().T).numpy()
    temps = torch.tensor([0.0, 0.0, 0.0, 1.0, 0.5])
    expect = sample_twin(z, temps.numpy(), seed=21, num_samples=3)
    assert (z == z.max(axis=1, keepdims=True)).sum(axis=1).min() >= 3  # every row has a 3-way tie
    for t in TILES:
        got = flashsampling.sample(h.to(device), w.to(device), temperature=temps.to(device), seed=21, num_samples=3,
                                   tiles=t)  # fmt: skip
        np.testing.assert_array_equal(got.cpu().numpy(), expect)
