"""The tile inverse-CDF sampler fused into the Gluon kernel (its ``EPILOGUE`` ``tile_cdf_epilogue``;
flashsampling.tile_cdf.sample_fused_tile_cdf).  Compiled on an sm_90 GPU only: every test here is skipped elsewhere
(the kernel's CPU test is its compile test in test_pingpong.py, and its twin's law is tested in test_tile_cdf.py).

Layer 1 (deterministic): on inputs whose logits are exact in float32 (small multiples of 1/16), stage 1's
``(m, Q, draw)`` equal the twin's (``tile_stage1_np`` in ``slot_order``) bit for bit, the tokens equal
``fused_tile_cdf_np``'s, and greedy rows get ``flashsampling.sample``'s tokens.
Layer 3 (statistical): one row's logits on ``N`` rows (each its own streams) against the exact softmax: chi-square
at ``ALPHA = 1e-6`` (a family of one check), with its detectable TV at power 0.99 asserted, and the same check
failing on a planted bias of that size (the sampler run at T = 0.73 against the T = 0.70 target: TV 0.031).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import flashsampling
from flashsampling import _validate as check
from flashsampling.kernels.pingpong import launch_pingpong
from flashsampling.kernels.stage1 import allocate_partials
from flashsampling.noise import split_seed
from flashsampling.reference import softmax
from flashsampling.tile_cdf import (
    TILE_CDF_TILES,
    draw_tiles_np,
    fused_tile_cdf_np,
    sample_fused_tile_cdf,
    slot_order,
    tile_logmass,
    tile_stage1_np,
)
from flashsampling.tile_cdf.fused import tile_cdf_epilogue
from verification import goodness_of_fit
from verification.battery.planted import total_variation

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9 and not flashsampling.INTERPRET
pytestmark = pytest.mark.skipif(not HOPPER, reason="the Gluon kernel runs compiled on an sm_90 GPU")

ALPHA = 1e-6
N = 200_000
#: What the chi-square detects with power 0.99 at N over the row's bins (GofResult.min_detectable_tv: 0.02231).
DETECTABLE_TV = 0.0224


def exact_inputs(B: int, V: int, D: int = 128, seed: int = 0):
    """bf16 ``h``, ``W`` with entries in ``{-3..3} / 4``: every logit is a multiple of 1/16 below 2**8 in magnitude,
    exact in float32 whatever the order of the MMA's sums.  Returns ``(h, W, z32)``."""
    g = torch.Generator().manual_seed(seed)
    h = torch.randint(-3, 4, (B, D), generator=g).float() / 4
    w = torch.randint(-3, 4, (V, D), generator=g).float() / 4
    z = (h.double() @ w.double().T).float()
    return h.bfloat16().cuda(), w.bfloat16().cuda(), z.numpy()


def test_stage1_equals_twin_bit_for_bit():
    B, V, seed = 200, 1000, 0xABCDEF0123  # 4 row tiles (the last partial), 4 column tiles (the last partial)
    h, w, z = exact_inputs(B, V)
    temps = torch.linspace(0.4, 1.6, B)
    inv, _, _ = check.inverse_temperature(temps.cuda(), B, h.device)
    parts = allocate_partials(B, 1, 4, h.device)
    lo, hi = split_seed(seed)
    launch_pingpong(h, w, inv, parts, lo, hi, TILE_CDF_TILES, epilogue=tile_cdf_epilogue)
    m, q, j = tile_stage1_np(z, inv.cpu().numpy(), seed, order=slot_order())
    assert np.array_equal(parts[0][:, 0].cpu().numpy(), m)
    assert np.array_equal(parts[1][:, 0].cpu().numpy().view(np.uint64), q)
    assert np.array_equal(parts[2][:, 0].cpu().numpy(), j)
    assert not parts[3].any()


def test_tokens_equal_twin_and_greedy_rows_equal_sample():
    B, V, seed = 300, 1500, 77
    h, w, z = exact_inputs(B, V, seed=1)
    temps = torch.linspace(0.5, 2.0, B)
    temps[::7] = 0.0  # greedy rows
    got = sample_fused_tile_cdf(h, w, temperature=temps.cuda(), seed=seed)[:, 0].cpu().numpy()
    inv, _, _ = check.inverse_temperature(temps.cuda(), B, h.device)
    inv = inv.cpu().numpy()
    hot = inv > 0
    m, q, j = tile_stage1_np(z, inv, seed, order=slot_order())
    k = draw_tiles_np(tile_logmass(m, q), seed)
    assert np.array_equal(got[hot], j[hot, k[hot]])
    assert np.array_equal(got[hot], fused_tile_cdf_np(z, inv, seed)[hot])
    greedy = flashsampling.sample(h, w, temperature=temps.cuda(), seed=seed)[:, 0].cpu().numpy()
    assert np.array_equal(got[~hot], greedy[~hot])


def _row_logits(V: int = 2000):
    """One row of logits exact in float32 on ``N`` identical rows of ``h``: ``(h, W, z64)``."""
    g = torch.Generator().manual_seed(3)
    w = torch.randint(-8, 9, (V, 64), generator=g).float() / 8
    h1 = torch.randint(-2, 3, (1, 64), generator=g).float() / 4
    z = (h1.double() @ w.double().T)[0].numpy()
    return h1.expand(N, -1).contiguous().bfloat16().cuda(), w.bfloat16().cuda(), z


def test_law_matches_softmax_with_power():
    h, w, z = _row_logits()
    tokens = sample_fused_tile_cdf(h, w, temperature=0.7, seed=5)[:, 0].cpu().numpy()
    res = goodness_of_fit(tokens, softmax(z, 0.7), alpha=ALPHA)
    assert res.passed, res.diagnosis()
    assert res.min_detectable_tv <= DETECTABLE_TV and res.power >= 0.99


def test_planted_temperature_bias_fails():
    h, w, z = _row_logits()
    p = softmax(z, 0.7)
    assert total_variation(p, softmax(z, 0.73)) >= DETECTABLE_TV
    tokens = sample_fused_tile_cdf(h, w, temperature=0.73, seed=5)[:, 0].cpu().numpy()
    assert not goodness_of_fit(tokens, p, alpha=ALPHA).passed


def test_bad_input_is_named():
    h, w, _ = exact_inputs(4, 300)
    with pytest.raises(ValueError, match="temperature"):
        sample_fused_tile_cdf(h, w, temperature=-1.0)
    with pytest.raises((ValueError, TypeError), match="weight"):
        sample_fused_tile_cdf(h, w[:, :64], temperature=1.0)
