"""Parallel grouped variant (tiles or caller-given groups): replay, log-mass accuracy, errors, statistics.

Layer 1 (deterministic): the kernel's per-group local samples equal the twin's Gumbel-max restricted
to each group, its log-masses equal the float64 ``logsumexp`` within ``logmass_tolerance``, and the
combine equals :func:`combine_groups_np` bit for bit (interpreted and compiled) given the same partials.
Layer 2 (statistical): the vectorized twin ``grouped_sampler_np`` against the exact softmax.

Family: ``STAT_CHECKS`` checks at ``ALPHA = 1e-6`` each, so an exact sampler fails this file with
probability at most ``STAT_CHECKS * 1e-6`` (Bonferroni).  ``test_power_against_shared_noise``
shows a check of the same size failing on a subtly wrong combine (group noise = token noise).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import flashsampling
import flashsampling.grouped as grouped
from flashsampling._request import Request, new_request
from flashsampling.grouped import (
    combine_groups_np,
    grouped_partials,
    grouped_partials_from_logits,
    grouped_sampler_np,
    logmass_tolerance,
    sample_grouped,
    sample_grouped_from_logits,
)
from flashsampling.noise import token_noise_np
from flashsampling.reference import fp32_logit_error_bound, logsumexp, softmax, target_logits
from flashsampling.twin import inverse_temperature32, select
from tests.stat_checks import assert_fits, assert_fits_with_tail, many_tail_logits
from verification import goodness_of_fit

ALPHA = 1e-6
STAT_CHECKS = 6  # normal, many-tail (2), masked, wide-range, kernel
N = 100_000


def _logits(b: int, v: int, seed: int, mask_frac: float = 0.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    z = (rng.standard_normal((b, v)) * 2.5).astype(np.float32)
    if mask_frac:
        z[rng.random((b, v)) < mask_frac] = -np.inf
    return z


def _request(temperature, seed: int, S: int, x: torch.Tensor) -> Request:
    """The request of a call on ``x``'s rows (the preamble every entry point runs)."""
    return new_request(temperature, seed, S, x.shape[0], x.device, host_checks=True)


def twin_local_samples(z32: np.ndarray, temps, seed: int, S: int, starts, sizes) -> np.ndarray:
    """Twin of the per-group candidates: argmax of ``z * (1/T) + G`` restricted to each group, (B, S, K)."""
    b, v = z32.shape
    inv = inverse_temperature32(temps, b)[:, None]
    out = np.empty((b, S, len(starts)), dtype=np.int64)
    for s in range(S):
        g, key = token_noise_np(seed, np.arange(b, dtype=np.uint32)[:, None], np.arange(v, dtype=np.uint32)[None], s)
        with np.errstate(over="ignore", invalid="ignore"):
            sc = np.where(inv == 0, z32, z32 * inv + g).astype(np.float32)
        for k, (a, m) in enumerate(zip(starts, sizes)):
            out[:, s, k] = a + select(sc[:, a : a + m], key[:, a : a + m]) if m else a
    return out


def _assert_combine_replays(p, greedy: np.ndarray, seed: int, tokens: torch.Tensor) -> None:
    expected, _ = combine_groups_np(
        p.logmass.cpu().numpy(), p.best.cpu().numpy(), p.key.cpu().numpy(), p.index.cpu().numpy(),
        p.starts.cpu().numpy(), greedy, seed,
    )  # fmt: skip
    # The group noise is float64 in separately rounded operations on both sides: equal, compiled or interpreted.
    np.testing.assert_array_equal(tokens.cpu().numpy(), expected)


# --------------------------------------------------------------------------------------------
# Layer 1: kernel = twin, deterministically
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("block_v", [32, 128])
def test_tile_groups_replay_twin(block_v, device):
    b, v, S, seed = 3, 300, 4, 4242
    z = _logits(b, v, 1, mask_frac=0.2)
    z[2, :block_v] = -np.inf  # a whole tile with zero mass in row 2
    temps = np.array([0.7, 1.0, 1.6], dtype=np.float32)
    zt = torch.from_numpy(z).to(device)
    p = grouped_partials_from_logits(_request(torch.from_numpy(temps).to(device), seed, S, zt), zt, block_v=block_v)
    starts = list(range(0, v, block_v))
    sizes = [min(block_v, v - a) for a in starts]
    np.testing.assert_array_equal(p.starts.cpu().numpy(), starts)
    local = twin_local_samples(z, temps, seed, S, starts, sizes)
    if flashsampling.INTERPRET:
        np.testing.assert_array_equal(p.index.cpu().numpy(), local)
    # log-masses: per tile, against float64
    lm = p.logmass.cpu().numpy()
    for k, (a, m) in enumerate(zip(starts, sizes)):
        seg = z[:, a : a + m].astype(np.float64)
        for r in range(b):
            if not np.isfinite(seg[r]).any():
                assert lm[r, k] == -np.inf
                continue
            ref = logsumexp(seg[r][np.isfinite(seg[r])], float(temps[r]))[0]
            tol = logmass_tolerance(np.abs(seg[r][np.isfinite(seg[r])] / temps[r]).max(), m)
            assert abs(lm[r, k] - ref) <= tol, (r, k, lm[r, k] - ref, tol)
    tokens = sample_grouped_from_logits(zt, temperature=torch.from_numpy(temps).to(device), seed=seed, num_samples=S,
                                        block_v=block_v)  # fmt: skip
    _assert_combine_replays(p, np.zeros(b, bool), seed, tokens)
    assert not np.isin(tokens[2].cpu().numpy(), np.arange(block_v)).any()  # the empty tile is never chosen


def test_caller_groups_any_sizes(device):
    """Uneven groups, an empty one and one with zero mass: each is one col_offset launch."""
    b, v, S, seed = 3, 700, 4, 77
    z = _logits(b, v, 2)
    sizes = [100, 0, 333, 1, 266]
    z[:, 100:433] = -np.inf  # the 333-group has zero mass in every row
    zt = torch.from_numpy(z).to(device)
    p = grouped_partials_from_logits(_request(0.9, seed, S, zt), zt, group_sizes=sizes)
    starts = [0, 100, 100, 433, 434]
    np.testing.assert_array_equal(p.starts.cpu().numpy(), starts)
    assert torch.all(p.logmass[:, 1:3] == -np.inf)
    if flashsampling.INTERPRET:
        local = twin_local_samples(z, np.float32(0.9), seed, S, starts, sizes)
        nonempty = [0, 3, 4]
        np.testing.assert_array_equal(p.index.cpu().numpy()[..., nonempty], local[..., nonempty])
    tokens, lse = sample_grouped_from_logits(zt, temperature=0.9, seed=seed, num_samples=S, group_sizes=sizes,
                                             return_logsumexp=True)  # fmt: skip
    _assert_combine_replays(p, np.zeros(b, bool), seed, tokens)
    tok = tokens.cpu().numpy()
    assert np.all(np.isfinite(z[np.arange(b)[:, None], tok]))  # never a masked token
    ref = logsumexp(z.astype(np.float64), 0.9)
    tol = logmass_tolerance(np.abs(z[np.isfinite(z)] / np.float32(0.9)).max(), 333)
    np.testing.assert_allclose(lse.cpu().numpy(), ref, rtol=0, atol=tol)


def test_single_group_and_greedy_rows_equal_fused(device):
    """One group: the group draw is trivial and the local sample is the fused token, bit for bit.
    Greedy rows skip the group draw in any grouping and equal the fused greedy token."""
    z = torch.from_numpy(_logits(4, 500, 3, mask_frac=0.1)).to(device)
    t = torch.tensor([0.8, 0.0, 1.3, 0.0], device=device)
    fused = flashsampling.sample_from_logits(z, temperature=t, seed=9, num_samples=3)
    one = sample_grouped_from_logits(z, temperature=t, seed=9, num_samples=3, group_sizes=[500])
    assert torch.equal(one, fused)
    tiles = sample_grouped_from_logits(z, temperature=t, seed=9, num_samples=3, block_v=64)
    assert torch.equal(tiles[[1, 3]], fused[[1, 3]])
    assert not torch.equal(tiles[[0, 2]], fused[[0, 2]])  # pathwise different, same distribution


def test_fused_matmul_grouped(device):
    """The matmul path: per-tile log-mass within tolerance of float64 (plus the fp32 logit error),
    local samples replay the twin on float64 logits away from near-ties, and the combine replays."""
    gen = torch.Generator().manual_seed(11)
    b, v, d, S, seed, temp = 5, 300, 48, 3, 31337, 0.9
    h = torch.randn(b, d, generator=gen).to(torch.bfloat16)
    w = (torch.randn(v, d, generator=gen) * 0.5).to(torch.bfloat16)
    tiles = flashsampling.TileConfig(16, 64, 16)
    p = grouped_partials(_request(temp, seed, S, h.to(device)), h.to(device), w.to(device), tiles=tiles)
    z64 = target_logits(h, w)
    err = fp32_logit_error_bound(h, w).max() / temp
    lm = p.logmass.cpu().numpy()
    for k, a in enumerate(range(0, v, 64)):
        ref = logsumexp(z64[:, a : a + 64], temp)
        tol = logmass_tolerance(np.abs(z64 / temp).max(), 64) + err
        np.testing.assert_allclose(lm[:, k], ref, rtol=0, atol=tol)
    tokens, lse = sample_grouped(h.to(device), w.to(device), temperature=temp, seed=seed, num_samples=S, tiles=tiles,
                                 return_logsumexp=True)  # fmt: skip
    _assert_combine_replays(p, np.zeros(b, bool), seed, tokens)
    np.testing.assert_allclose(lse.cpu().numpy(), logsumexp(z64, temp), rtol=0,
                               atol=logmass_tolerance(np.abs(z64 / temp).max(), 64) + err)  # fmt: skip
    shard = sample_grouped(h.to(device), w.to(device), temperature=temp, seed=seed, num_samples=S,
                           group_sizes=[150, 150], tiles=tiles)  # fmt: skip
    assert shard.shape == (b, S) and int(shard.min()) >= 0 and int(shard.max()) < v


@pytest.mark.parametrize(
    "case",
    ["normal", "wide-range-60-nats", "many-tail", "masked", "hot-T3", "cold-T0.2"],
)
def test_logsumexp_matches_float64(case, device):
    """The reported log-mass equals float64 logsumexp within the documented tolerance."""
    rng = np.random.default_rng(5)
    temp = {"hot-T3": 3.0, "cold-T0.2": 0.2}.get(case, 1.0)
    z = rng.normal(0, 2, (2, 1000))
    if case == "wide-range-60-nats":
        z = rng.uniform(-60, 0, (2, 1000))
    if case == "many-tail":
        z = np.full((2, 1000), -30.0)
        z[:, :5] = rng.normal(0, 1, (2, 5))
    if case == "masked":
        z[rng.random((2, 1000)) < 0.5] = -np.inf
        z[:, :128] = -np.inf
    z32 = z.astype(np.float32)
    _, lse = sample_grouped_from_logits(torch.from_numpy(z32).to(device), temperature=temp, seed=1, block_v=128,
                                        return_logsumexp=True)  # fmt: skip
    fin = np.isfinite(z32)
    tol = logmass_tolerance(np.abs(z32[fin] / np.float32(temp)).max(), 128)
    err = np.abs(lse.cpu().numpy() - logsumexp(z32.astype(np.float64), temp))
    assert err.max() <= tol, (err, tol)


def test_errors(device):
    z = torch.zeros(2, 50, device=device)
    z[1] = -float("inf")
    with pytest.raises(ValueError, match="no finite logit"):
        sample_grouped_from_logits(z, seed=1)
    with pytest.raises(ValueError, match="no finite logit"):
        sample_grouped_from_logits(z, seed=1, group_sizes=[10, 40])
    ok = torch.zeros(2, 50, device=device)
    with pytest.raises(ValueError, match="group_sizes"):
        sample_grouped_from_logits(ok, seed=1, group_sizes=[10, 30])
    with pytest.raises(ValueError, match="group_sizes"):
        sample_grouped_from_logits(ok, seed=1, group_sizes=[60, -10])
    with pytest.raises(TypeError, match="group_sizes"):
        sample_grouped_from_logits(ok, seed=1, group_sizes=5)
    bad = ok.clone()
    bad[0, 3] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        sample_grouped_from_logits(bad, seed=1, group_sizes=[25, 25])
    # with host checks off, an all-masked row still gets an index in range
    tok = sample_grouped_from_logits(z, seed=1, host_checks=False, num_samples=3)
    assert int(tok.min()) >= 0 and int(tok.max()) < 50
    with pytest.raises(ValueError, match="no finite logit"):
        grouped_sampler_np(np.full(10, -np.inf), 1.0, 10, 1)


def test_numpy_sampler_is_the_kernel_pathwise(device):
    """``grouped_sampler_np`` sample s == kernel row 0, sample s, except at group-draw near-ties
    (the twin's float64 L_k vs the kernel's float32 tile sums), which are counted."""
    z = _logits(1, 1000, 8, mask_frac=0.3)[0]
    S, seed, temp = 16, 2024, 0.8
    got = sample_grouped_from_logits(torch.from_numpy(z[None]).to(device), temperature=temp, seed=seed, num_samples=S,
                                     block_v=128)[0].cpu().numpy()  # fmt: skip
    twin = grouped_sampler_np(z.astype(np.float64), temp, S, seed, group_size=128)
    assert (got != twin).sum() <= 1, np.flatnonzero(got != twin)


# --------------------------------------------------------------------------------------------
# Layer 2: statistics of the twin (and a small kernel run) against the exact softmax
# --------------------------------------------------------------------------------------------


def _check(samples, probs) -> None:
    assert_fits(samples, probs, alpha=ALPHA)


def test_stats_normal_tiles():
    z = np.random.default_rng(20).normal(0, 2, 1000).astype(np.float32).astype(np.float64)
    _check(grouped_sampler_np(z, 0.7, N, seed=1), softmax(z, 0.7))


def test_stats_many_tail_15_nats():
    """Head of 6 tokens, flat tail of 20000 tokens 15 nats below: whole tiles of tail only, so the
    group draw picks groups ~10 nats below the head group.  Chi-square (tail pooled) and the exact
    binomial test of the tail mass (two-sided)."""
    z = many_tail_logits(20006, seed=21)
    assert_fits_with_tail(grouped_sampler_np(z, 1.0, N, seed=2), z, alpha=ALPHA)


def test_stats_masked_uneven_groups_with_zero_mass():
    rng = np.random.default_rng(22)
    z = rng.normal(0, 2, 1000)
    z[rng.random(1000) < 0.3] = -np.inf
    z[200:450] = -np.inf  # whole groups with zero mass
    z = z.astype(np.float32).astype(np.float64)
    sizes = [13, 187, 0, 250, 1, 300, 249]
    _check(grouped_sampler_np(z, 1.3, N, seed=3, group_sizes=sizes), softmax(z, 1.3))


def test_stats_wide_range():
    z = np.random.default_rng(23).uniform(-60, 0, 2000).astype(np.float32).astype(np.float64)
    _check(grouped_sampler_np(z, 1.0, N, seed=4, group_size=64), softmax(z))


def test_stats_kernel_small(device):
    """The kernel itself: 256 independent rows x 25 samples of one masked row, tiles of 64
    (one row tile: the interpreter's cost is per program and sample)."""
    z = np.random.default_rng(24).normal(0, 1.5, 200).astype(np.float32)
    z[::7] = -np.inf
    zt = torch.from_numpy(z).to(device).expand(256, -1)
    bb = 256 if flashsampling.INTERPRET else None
    tok = sample_grouped_from_logits(zt, temperature=1.0, seed=5, num_samples=25, block_b=bb, block_v=64)
    _check(tok.reshape(-1).cpu().numpy(), softmax(z.astype(np.float64)))


def test_power_against_shared_noise(monkeypatch):
    """A subtly wrong combine -- the group draw reusing the token noise stream, so it is correlated
    with the local samples -- fails the same check (its deviation is above the detectable TV)."""
    z = np.random.default_rng(20).normal(0, 2, 1000).astype(np.float32).astype(np.float64)
    p = softmax(z, 0.7)
    monkeypatch.setattr(grouped, "STREAM_GROUP", flashsampling.noise.STREAM_TOKEN)
    res = goodness_of_fit(grouped_sampler_np(z, 0.7, N, seed=1), p, alpha=ALPHA)
    assert not res.passed, res
