"""First statistical checks of the Triton kernel itself against the exact softmax (interpreted on
CPU, compiled on GPU).  Pearson chi-square with the low-count tail pooled, never dropped.

Family: four checks at alpha = 1e-6 each (three goodness-of-fit, one Gumbel-max KS), so a correct
kernel fails this file with probability at most 4e-6 (Bonferroni).  Each check states the deviation
it detects with power 0.99 at its n (total variation; for the KS check a location shift), and
``test_check_detects_planted_bias`` / ``test_gumbel_check_detects_its_stated_shift`` show the
checks failing on deviations of those sizes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import flashsampling
from flashsampling.kernels.stage1 import launch_logits_stage1
from flashsampling.noise import split_seed
from flashsampling.reference import softmax, target_logits
from verification import goodness_of_fit, gumbel_max_test

ALPHA = 1e-6
ROWS, PER_ROW = 64, 100  # n = 6400 draws of one row, from 64 independent row streams


def _draws(logits_row: np.ndarray, temperature: float, seed: int, device) -> np.ndarray:
    z = torch.tensor(logits_row, dtype=torch.float32, device=device).expand(ROWS, -1)
    tok = flashsampling.sample_from_logits(z, temperature=temperature, seed=seed, num_samples=PER_ROW)
    return tok.reshape(-1).cpu().numpy()


def test_logits_kernel_matches_softmax(device):
    z = np.random.default_rng(1).normal(0, 1.5, 200).astype(np.float32)
    res = goodness_of_fit(_draws(z, 1.0, seed=101, device=device), softmax(z.astype(np.float64)), alpha=ALPHA)
    assert res.passed, res.diagnosis() if hasattr(res, "diagnosis") else res
    assert res.tested_mass + res.pooled_mass == pytest.approx(1.0)


def test_masked_many_tail_kernel_matches_softmax(device):
    rng = np.random.default_rng(2)
    z = np.full(300, -9.0, dtype=np.float32)
    z[:5] = rng.normal(0, 0.3, 5)
    z[rng.random(300) < 0.2] = -np.inf
    z[0] = 0.0
    res = goodness_of_fit(_draws(z, 1.0, seed=202, device=device), softmax(z.astype(np.float64)), alpha=ALPHA)
    assert res.passed, res


def test_fused_matmul_kernel_matches_softmax(device):
    gen = torch.Generator().manual_seed(3)
    h = torch.randn(1, 32, generator=gen).to(torch.bfloat16)
    w = (torch.randn(150, 32, generator=gen) * 0.3).to(torch.bfloat16)
    hh = h.expand(ROWS, -1).contiguous()
    tok = flashsampling.sample(hh.to(device), w.to(device), temperature=0.7, seed=303, num_samples=PER_ROW)
    probs = softmax(target_logits(h, w)[0], 0.7)
    res = goodness_of_fit(tok.reshape(-1).cpu().numpy(), probs, alpha=ALPHA)
    assert res.passed, res


def test_check_detects_planted_bias(device):
    """The same check fails on a kernel run at the wrong temperature, a deviation above its detectable TV."""
    z = np.random.default_rng(1).normal(0, 1.5, 200).astype(np.float32)
    p = softmax(z.astype(np.float64), 1.0)
    biased = _draws(z, 1.6, seed=101, device=device)
    q = softmax(z.astype(np.float64), 1.6)
    res = goodness_of_fit(biased, p, alpha=ALPHA)
    tv = 0.5 * np.abs(p - q).sum()
    assert tv >= res.min_detectable_tv, (tv, res.min_detectable_tv)
    assert not res.passed, res


def _kernel_maxima(z: np.ndarray, temperature: float, seed: int, device) -> np.ndarray:
    """The kernel's perturbed maxima max_v(z_v / T + G_v): the max over its per-tile candidates."""
    zt = torch.tensor(z, dtype=torch.float32, device=device).expand(ROWS, -1).contiguous()
    inv = torch.full((ROWS,), 1.0 / temperature, dtype=torch.float32, device=device)
    lo, hi = split_seed(seed)
    part_max = launch_logits_stage1(zt, inv, lo, hi, PER_ROW, 64, 128)[0]
    return part_max.amax(dim=-1).reshape(-1).double().cpu().numpy()


def test_kernel_perturbed_max_is_gumbel_at_logsumexp(device):
    """Max-stability on the kernel itself: max_v(z_v/T + G_v) ~ Gumbel(logsumexp(z/T), 1) (exact KS)."""
    z = np.random.default_rng(4).normal(0, 2, 300).astype(np.float32)
    res = gumbel_max_test(_kernel_maxima(z, 0.8, 404, device), z.astype(np.float64), temperature=0.8, alpha=ALPHA)
    assert res.passed, res


def test_gumbel_check_detects_its_stated_shift(device):
    """The same KS check fails when the maxima are shifted by the location error it claims to detect."""
    z = np.random.default_rng(4).normal(0, 2, 300).astype(np.float32)
    m = _kernel_maxima(z, 0.8, 404, device)
    res = gumbel_max_test(m, z.astype(np.float64), temperature=0.8, alpha=ALPHA)
    shifted = gumbel_max_test(m + res.min_detectable_shift, z.astype(np.float64), temperature=0.8, alpha=ALPHA)
    assert not shifted.passed, shifted
