"""The tile inverse-CDF sampler prototype (proofs/tile_inverse_cdf.md; flashsampling/tile_cdf/: its kernel, twin
and entry points; not in the public API).

Layer 1 (deterministic): the kernel's 128 x 64-bit ``mulhi`` equals exact integers, and its stage 1 (tile maxima,
weight sums, draws) equals the NumPy twin bit for bit (the interpreter here; compiled on the GPU).
Layer 2 (statistical): the twin's two-level sampler against the exact softmax.

Family: ``STAT_CHECKS`` checks at ``ALPHA = 1e-6`` each, so an exact sampler fails this file with probability at
most ``4e-6`` (Bonferroni).  At ``N = 100_000`` draws the chi-square of
``test_sampler_matches_softmax_at_a_temperature`` detects a total variation of 0.023 over its bins with power 0.99
(``GofResult.min_detectable_tv``, asserted below).  ``test_power_at_the_detectable_size`` shows the same check
failing on a bias of that size (a temperature of 0.72 instead of 0.70: TV 0.025), and
``test_power_against_choice_by_max_score`` on the planted defect of choosing the tile by its maximum score instead
of its log-mass (TV 0.22).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import flashsampling.tile_cdf as tile_cdf
from flashsampling.kernels.stage2 import launch_combine_groups
from flashsampling.noise import split_seed
from flashsampling.reference import softmax
from flashsampling.tile_cdf import (
    draw_tiles_np,
    mulhi_u128_u64_np,
    sample_tile_cdf_from_logits,
    slot_order,
    tile_cdf_sampler_np,
    tile_logmass,
    tile_stage1_np,
)
from flashsampling.tile_cdf.kernel import launch_tile_cdf_stage1, mulhi_u128_u64
from tests.stat_checks import assert_fits_with_tail, many_tail_logits
from verification import goodness_of_fit
from verification.battery.planted import total_variation

ALPHA = 1e-6
STAT_CHECKS = 4  # the tail row (chi-square, binomial tail), the temperature row (chi-square) in two orders
N = 100_000
#: What the temperature row's chi-square detects with power 0.99 at N (GofResult.min_detectable_tv: 0.02339).
DETECTABLE_TV = 0.0234


@triton.jit
def _mulhi_kernel(w_ptr, q_ptr, out_ptr, N_ELEM, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < N_ELEM
    w0 = tl.load(w_ptr + 4 * offs, mask=ok, other=0)
    w1 = tl.load(w_ptr + 4 * offs + 1, mask=ok, other=0)
    w2 = tl.load(w_ptr + 4 * offs + 2, mask=ok, other=0)
    w3 = tl.load(w_ptr + 4 * offs + 3, mask=ok, other=0)
    q = tl.load(q_ptr + offs, mask=ok, other=0)
    tl.store(out_ptr + offs, mulhi_u128_u64(w0, w1, w2, w3, q), mask=ok)


def test_mulhi_equals_exact_integers(device):
    rng = np.random.default_rng(0)
    words = rng.integers(0, 2**32, (300, 4), dtype=np.uint64).astype(np.uint32)
    q = rng.integers(0, 2**63, 300, dtype=np.uint64)
    words[:4] = 0xFFFFFFFF  # U = 2**128 - 1 against the largest sums
    q[:4] = [2**63, 2**63 - 1, 1, 0]
    words[4] = 0
    w = torch.from_numpy(words.reshape(-1).copy()).to(device)
    qt = torch.from_numpy(q.copy()).to(device)
    out = torch.empty(300, dtype=torch.uint64, device=device)
    _mulhi_kernel[(1,)](w, qt, out, 300, BLOCK=512)
    want = mulhi_u128_u64_np(words[:, 0], words[:, 1], words[:, 2], words[:, 3], q)
    assert np.array_equal(out.cpu().numpy(), want)
    assert want[0] == 2**63 - 1 and want[2] == 0  # floor((2**128 - 1) 2**63 / 2**128), and q = 1


def stage1_inputs() -> tuple[np.ndarray, np.ndarray]:
    """Six rows of 700 logits (three tiles, the last partial): normal rows at several temperatures, masked tokens,
    a row whose last tile is entirely masked, and exact ties."""
    rng = np.random.default_rng(5)
    z = (rng.standard_normal((6, 700)) * 3).astype(np.float32)
    z[1, rng.random(700) < 0.3] = -np.inf
    z[2, 512:] = -np.inf
    z[3] = np.tile(np.float32([1.0, -2.0, 0.5, 1.0]), 175)
    inv = np.float32([1.0, 1 / 0.7, 2.0, 1.0, 1 / 3.0, 10.0])
    return z, inv


def test_stage1_kernel_equals_twin_bit_for_bit(device):
    z, inv = stage1_inputs()
    seed = 0x1234_5678_9ABC
    lo, hi = split_seed(seed)
    m, q, j = launch_tile_cdf_stage1(torch.from_numpy(z).to(device), torch.from_numpy(inv).to(device), lo, hi)
    m_np, q_np, j_np = tile_stage1_np(z, inv, seed)
    assert np.array_equal(m.cpu().numpy(), m_np)
    assert np.array_equal(q.cpu().numpy(), q_np)
    assert np.array_equal(j.cpu().numpy(), j_np)
    assert q_np[2, 2] == 0  # the fully masked tile: weight 0, never chosen (L = -inf)


def test_draws_land_on_tokens_with_weight():
    z, inv = stage1_inputs()
    for seed in range(20):
        _, q, j = tile_stage1_np(z, inv, seed)
        s = z * inv[:, None]
        for r, k in zip(*np.nonzero(q)):
            assert np.isfinite(s[r, j[r, k]]) and j[r, k] // 256 == k


def test_block_v_above_256_is_refused():
    with pytest.raises(ValueError, match="block_v=512"):
        launch_tile_cdf_stage1(torch.zeros(1, 8), torch.ones(1), 0, 0, block_v=512)


def test_sampler_matches_softmax_with_its_tail():
    """Head tokens and a flat tail 15 nats below over three tiles: chi-square with pooled bins, and the exact
    binomial test of the tail's mass."""
    z = many_tail_logits(700, seed=3)
    assert_fits_with_tail(tile_cdf_sampler_np(z, 1.0, N, seed=11), z, alpha=ALPHA)


def _temperature_row() -> np.ndarray:
    return np.random.default_rng(8).normal(0, 2, 600).astype(np.float32).astype(np.float64)


def test_sampler_matches_softmax_at_a_temperature():
    z = _temperature_row()
    res = goodness_of_fit(tile_cdf_sampler_np(z, 0.7, N, seed=2), softmax(z, 0.7), alpha=ALPHA)
    assert res.passed, res.diagnosis()
    assert res.min_detectable_tv <= DETECTABLE_TV and res.power >= 0.99


def test_fused_tiles_are_the_streams():
    """The fused sampler's stream is defined on 256-column tiles read in 32-column chunks (slot_order's defaults)."""
    assert (tile_cdf.TILE_CDF_TILES.block_v, tile_cdf.TILE_CDF_TILES.epilogue_v) == (256, 32)


def test_slot_order_is_a_permutation_and_draws_land_on_tokens_with_weight():
    order = slot_order()
    assert np.array_equal(np.sort(order), np.arange(256))
    assert list(order[:4]) == [0, 1, 32, 33] and list(order[16:18]) == [8, 9]  # slot (q=0, j=0), then (0, 1)
    z, inv = stage1_inputs()
    s = z * inv[:, None]
    for seed in range(10):
        _, q, j = tile_stage1_np(z, inv, seed, order=order)
        for r, k in zip(*np.nonzero(q)):
            assert np.isfinite(s[r, j[r, k]]) and j[r, k] // 256 == k


def test_sampler_in_slot_order_matches_softmax():
    """The fused kernel's draw order (flashsampling.tile_cdf.slot_order): the same law, the same check."""
    z = _temperature_row()
    res = goodness_of_fit(tile_cdf_sampler_np(z, 0.7, N, seed=3, order=slot_order()), softmax(z, 0.7), alpha=ALPHA)
    assert res.passed, res.diagnosis()
    assert res.min_detectable_tv <= DETECTABLE_TV and res.power >= 0.99


def test_slot_order_check_fails_at_the_detectable_size():
    """The slot-order check of ``test_sampler_in_slot_order_matches_softmax`` on a bias of the size it claims to detect:
    the sampler at T = 0.72 against the T = 0.70 target (TV 0.0250)."""
    z = _temperature_row()
    p = softmax(z, 0.7)
    assert total_variation(p, softmax(z, 0.72)) >= DETECTABLE_TV
    res = goodness_of_fit(tile_cdf_sampler_np(z, 0.72, N, seed=3, order=slot_order()), p, alpha=ALPHA)
    assert not res.passed, res


def test_power_at_the_detectable_size():
    """A bias just above the detectable size: the sampler run at T = 0.72 against the T = 0.70 target."""
    z = _temperature_row()
    p = softmax(z, 0.7)
    assert total_variation(p, softmax(z, 0.72)) >= DETECTABLE_TV  # 0.0250
    res = goodness_of_fit(tile_cdf_sampler_np(z, 0.72, N, seed=2), p, alpha=ALPHA)
    assert not res.passed, res


def test_power_against_choice_by_max_score(monkeypatch):
    """The planted defect: the tile chosen by Gumbel-max over its maximum score instead of its log-mass.  The check
    of ``test_sampler_matches_softmax_at_a_temperature`` fails on it."""
    z = _temperature_row()
    monkeypatch.setattr(tile_cdf.twin, "tile_logmass", lambda m, total: np.asarray(m, np.float64))
    res = goodness_of_fit(tile_cdf_sampler_np(z, 0.7, N, seed=2), softmax(z, 0.7), alpha=ALPHA)
    assert not res.passed, res


def test_end_to_end_kernel_equals_twin(device):
    """Stage 1 on the device and stage 2 on the host give, row by row, the twin's tokens (rows reading one logits
    row with stride 0, as the main job's variant does)."""
    z = np.random.default_rng(4).normal(0, 2, 700).astype(np.float32)
    rows = 40
    got = sample_tile_cdf_from_logits(torch.from_numpy(z).to(device)[None, :].expand(rows, -1), 0.7, seed=9)
    zz = np.broadcast_to(z, (rows, 700))
    m, total, draw = tile_stage1_np(zz, np.full(rows, np.float32(1) / np.float32(0.7), np.float32), 9)
    want = draw[np.arange(rows), draw_tiles_np(tile_logmass(m, total), 9)]
    assert np.array_equal(got, want)


def test_combine_from_weights_equals_twin(device):
    """Stage 2 of the fused sampler: the combine kernel computing ``L = m + ln Q - 55 ln 2`` from the candidates
    (``from_weights``) chooses the twin's tile (``draw_tiles_np(tile_logmass(m, Q))``) for every row; a greedy row
    takes the larger ``(m, key)``."""

    z, inv = stage1_inputs()
    B, seed = z.shape[0], 21
    m, q, j = tile_stage1_np(z, inv, seed, order=slot_order())
    K = m.shape[1]
    inv_t = torch.from_numpy(inv).to(device)
    inv_t[5] = 0.0  # a greedy row: (m, key) decide
    key = q.view(np.int64).copy()
    key[5] = [3, 9, 1]
    lo, hi = split_seed(seed)
    tokens, choice, _ = launch_combine_groups(
        torch.zeros(1, device=device), torch.from_numpy(m[:, None, :]).to(device),
        torch.from_numpy(key[:, None, :]).to(device), torch.from_numpy(j[:, None, :]).to(device),
        torch.arange(K, device=device) * 256, torch.zeros((B, K), dtype=torch.int32, device=device), inv_t, lo, hi,
        from_weights=True,
    )  # fmt: skip
    want = draw_tiles_np(tile_logmass(m, q), seed)
    got = choice[:, 0].cpu().numpy()
    assert np.array_equal(got[:5], want[:5])
    greedy = max(range(K), key=lambda k: (m[5, k], key[5, k]))
    assert got[5] == greedy and tokens[5, 0].item() == j[5, greedy]
