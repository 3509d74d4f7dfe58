"""Tensor-parallel sampling over ``torch.distributed`` with gloo: world sizes 1 (in process), 2 and 4
(spawned processes), uneven shards including an empty one.

Layer 1 (deterministic, every world size): every rank returns the same tokens; pathwise tokens are
bit for bit the single-device tokens of :func:`flashsampling.sample_from_logits` /
:func:`flashsampling.sample` for the same seed; factorized tokens are bit for bit those of
:func:`flashsampling.grouped.sample_grouped` with the shards as groups; the reported log-mass equals
float64 ``logsumexp`` within ``logmass_tolerance``; errors (no finite logit, seeds that differ,
shards that leave a gap) are raised on every rank alike.
Layer 2 (statistical): ``tp_factorized_sampler_np`` against the exact softmax.

Family: ``STAT_CHECKS`` checks at ``ALPHA = 1e-6`` each (Bonferroni: at most ``STAT_CHECKS * 1e-6``).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import torch.distributed as dist

import flashsampling
from flashsampling.distributed import (
    sample_tp,
    sample_tp_from_logits,
    tp_factorized_sampler_np,
    tp_pathwise_sampler_np,
    uneven_shards,
)
from flashsampling.grouped import logmass_tolerance, sample_grouped, sample_grouped_from_logits
from flashsampling.reference import logsumexp, softmax
from flashsampling.twin import sample_twin_many
from tests.spawn import run_world

ALPHA = 1e-6
STAT_CHECKS = 4  # normal, masked with zero-mass and empty shards, many-tail (2)

B, V, D, S, SEED = 3, 700, 40, 3, 4321
SHARDS = {1: [700], 2: [300, 400], 4: [100, 0, 333, 267]}  # uneven, not tile-aligned, one empty
TILES = flashsampling.TileConfig(16, 64, 16)
SEED_NONE_TORCH_SEED = 123
#: Seconds a spawned world may take (a hang fails the test; the worlds take 20-60 s on two busy cores).
WORLD_DEADLINE_S = 600


def _inputs():
    rng = np.random.default_rng(0)
    z = (rng.standard_normal((B, V)) * 2.5).astype(np.float32)
    z[rng.random((B, V)) < 0.1] = -np.inf
    gen = torch.Generator().manual_seed(1)
    h = torch.randn(B, D, generator=gen).to(torch.bfloat16)
    w = (torch.randn(V, D, generator=gen) * 0.5).to(torch.bfloat16)
    temps = torch.tensor([0.8, 0.0, 1.4])
    return z, h, w, temps


def _error(fn) -> str:
    try:
        fn()
    except ValueError as exc:
        return str(exc)
    return ""


def _rank_results(rank: int, world: int, device: str) -> dict:
    """What one rank computes; run inside each process of a world."""
    z, h, w, temps = _inputs()
    sizes = SHARDS[world]
    start, size = sum(sizes[:rank]), sizes[rank]
    zs = torch.from_numpy(z[:, start : start + size].copy()).to(device)
    ws = w[start : start + size].to(device)
    hd, t = h.to(device), temps.to(device)
    out = {}
    out["logits_pathwise"] = sample_tp_from_logits(zs, vocab_start=start, vocab_size=V, temperature=t, seed=SEED,
                                                   num_samples=S, block_v=128)  # fmt: skip
    out["logits_pathwise_auto_start"] = sample_tp_from_logits(zs, temperature=t, seed=SEED, num_samples=S)
    tok, lse = sample_tp_from_logits(zs, vocab_start=start, temperature=t, seed=SEED, num_samples=S,
                                     combine="factorized", return_logsumexp=True)  # fmt: skip
    out["logits_factorized"], out["logits_factorized_lse"] = tok, lse
    out["matmul_pathwise"] = sample_tp(hd, ws, vocab_start=start, temperature=0.9, seed=SEED, num_samples=S,
                                       tiles=TILES)  # fmt: skip
    out["matmul_factorized"] = sample_tp(hd, ws, vocab_start=start, temperature=0.9, seed=SEED, num_samples=S,
                                         tiles=TILES, combine="factorized")  # fmt: skip
    torch.manual_seed(SEED_NONE_TORCH_SEED if rank == 0 else 999 + rank)  # only rank 0's draw counts
    out["seed_none"] = sample_tp_from_logits(zs, vocab_start=start, seed=None, num_samples=S)
    masked = zs.clone()
    masked[1] = -float("inf")
    out["err_no_finite"] = _error(lambda: sample_tp_from_logits(masked, vocab_start=start, seed=SEED))
    out["err_no_finite_factorized"] = _error(
        lambda: sample_tp_from_logits(masked, vocab_start=start, seed=SEED, combine="factorized")
    )
    out["err_seed"] = _error(lambda: sample_tp_from_logits(zs, vocab_start=start, seed=SEED + rank))
    gap = 1 if rank == world - 1 else 0
    out["err_gap"] = _error(lambda: sample_tp_from_logits(zs, vocab_start=start + gap, seed=SEED))
    return {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in out.items()}


def _worker(rank: int, world: int, init_file: str, out_dir: str, device: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        torch.save(_rank_results(rank, world, device), os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def tp_results(tmp_path_factory, device) -> dict:
    """``{world: [per-rank result dicts]}``; world 1 in this process, 2 and 4 spawned (gloo)."""
    dev = str(device)
    out: dict[int, list[dict]] = {}
    for world in (1, 2, 4):
        tmp = tmp_path_factory.mktemp(f"tp{world}")
        init_file = str(tmp / "init")
        if world == 1:
            _worker(0, 1, init_file, str(tmp), dev)
        else:
            run_world(_worker, world, (world, init_file, str(tmp), dev), deadline=WORLD_DEADLINE_S)
        out[world] = [torch.load(tmp / f"rank{r}.pt") for r in range(world)]
    return out


WORLDS = [1, 2, 4]


@pytest.mark.parametrize("world", WORLDS)
def test_every_rank_returns_the_same(tp_results, world):
    ranks = tp_results[world]
    for key, val in ranks[0].items():
        for r in ranks[1:]:
            if isinstance(val, torch.Tensor):
                assert torch.equal(r[key], val), key
            else:
                assert r[key] == val, key


@pytest.mark.parametrize("world", WORLDS)
def test_pathwise_is_single_device_bit_exact(tp_results, world, device):
    z, h, w, temps = _inputs()
    zt, h, w, temps = torch.from_numpy(z).to(device), h.to(device), w.to(device), temps.to(device)
    res = tp_results[world][0]
    single = flashsampling.sample_from_logits(zt, temperature=temps, seed=SEED, num_samples=S).cpu()
    assert torch.equal(res["logits_pathwise"], single)
    assert torch.equal(res["logits_pathwise_auto_start"], single)
    single_mm = flashsampling.sample(h, w, temperature=0.9, seed=SEED, num_samples=S, tiles=TILES).cpu()
    assert torch.equal(res["matmul_pathwise"], single_mm)
    torch.manual_seed(SEED_NONE_TORCH_SEED)
    drawn = flashsampling._validate.check_seed(None)
    expected = flashsampling.sample_from_logits(zt, seed=drawn, num_samples=S).cpu()
    assert torch.equal(res["seed_none"], expected)


@pytest.mark.parametrize("world", WORLDS)
def test_factorized_is_grouped_with_shards_bit_exact(tp_results, world, device):
    z, h, w, temps = _inputs()
    zt, h, w, temps = torch.from_numpy(z).to(device), h.to(device), w.to(device), temps.to(device)
    res = tp_results[world][0]
    grouped = sample_grouped_from_logits(zt, temperature=temps, seed=SEED, num_samples=S,
                                         group_sizes=SHARDS[world]).cpu()  # fmt: skip
    assert torch.equal(res["logits_factorized"], grouped)
    grouped_mm = sample_grouped(h, w, temperature=0.9, seed=SEED, num_samples=S, group_sizes=SHARDS[world],
                                tiles=TILES).cpu()  # fmt: skip
    assert torch.equal(res["matmul_factorized"], grouped_mm)
    fused = flashsampling.sample_from_logits(zt, temperature=temps, seed=SEED, num_samples=S).cpu()
    assert torch.equal(res["logits_factorized"][1], fused[1])  # the greedy row is pathwise in both rules


@pytest.mark.parametrize("world", WORLDS)
def test_logsumexp_matches_float64(tp_results, world):
    z, _, _, temps = _inputs()
    lse = tp_results[world][0]["logits_factorized_lse"].numpy()
    z64 = z.astype(np.float64)
    for r, t in enumerate(temps.tolist()):
        fin = z64[r][np.isfinite(z64[r])]
        ref = fin.max() if t == 0 else logsumexp(fin, t)[0]
        tol = logmass_tolerance(np.abs(fin / (t or 1.0)).max(), 1024)
        assert abs(lse[r] - ref) <= tol, (r, lse[r] - ref, tol)


@pytest.mark.parametrize("world", WORLDS)
def test_errors_are_raised_on_every_rank(tp_results, world):
    for r in tp_results[world]:
        assert "no finite logit" in r["err_no_finite"]
        assert "no finite logit" in r["err_no_finite_factorized"]
        assert "do not tile" in r["err_gap"]
        if world > 1:
            assert "different seeds" in r["err_seed"]


def test_argument_errors(device):
    z = torch.zeros(2, 10, device=device)
    with pytest.raises(ValueError, match="combine"):
        sample_tp_from_logits(z, seed=1, combine="mean")
    with pytest.raises(ValueError, match="vocab_start"):
        sample_tp_from_logits(z, seed=1, vocab_start=-1)
    with pytest.raises(ValueError, match="vocab_size=11"):
        sample_tp_from_logits(z, seed=1, vocab_size=11)


def test_uneven_shards():
    for v, world in [(700, 4), (10, 8), (151936, 8), (5, 1)]:
        sizes = uneven_shards(v, world)
        assert len(sizes) == world and sum(sizes) == v and min(sizes) >= 0
    assert len(set(uneven_shards(1000, 4))) == 4


def test_pathwise_numpy_sampler_is_the_fused_twin():
    z = np.random.default_rng(3).normal(0, 1, 50)
    np.testing.assert_array_equal(
        tp_pathwise_sampler_np(z, 0.9, 100, 5), sample_twin_many(z.astype(np.float32), 0.9, seed=5, num_samples=100)
    )


# --------------------------------------------------------------------------------------------
# Layer 2
# --------------------------------------------------------------------------------------------


def _check(samples, probs) -> None:
    from tests.stat_checks import assert_fits

    assert_fits(samples, probs, alpha=ALPHA)


def test_stats_factorized_normal_world4():
    z = np.random.default_rng(40).normal(0, 2, 1000).astype(np.float32).astype(np.float64)
    _check(tp_factorized_sampler_np(z, 0.7, 50_000, seed=1), softmax(z, 0.7))


def test_stats_factorized_masked_empty_and_zero_mass_shards():
    rng = np.random.default_rng(41)
    z = rng.normal(0, 2, 1000)
    z[rng.random(1000) < 0.3] = -np.inf
    z[300:450] = -np.inf  # rank 2's shard has zero mass
    z = z.astype(np.float32).astype(np.float64)
    sizes = [120, 180, 0, 150, 200, 350]
    _check(tp_factorized_sampler_np(z, 1.3, 60_000, seed=2, shard_sizes=sizes), softmax(z, 1.3))


def test_stats_factorized_many_tail_15_nats_world8():
    from tests.stat_checks import assert_fits_with_tail, many_tail_logits

    z = many_tail_logits(8006, seed=42)
    assert_fits_with_tail(tp_factorized_sampler_np(z, 1.0, 40_000, seed=3, world_size=8), z, alpha=ALPHA)
