"""flashsampling/tile_cdf/weights.py: the Triton integer weights equal their NumPy twin bit for bit (the interpreter on
the CPU; compiled, the inline-assembly path on the GPU), and approximate exp(s - m) as proofs/tile_inverse_cdf.md
states."""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from flashsampling.tile_cdf.weights import WEIGHT_BITS, tile_weight, tile_weights_np


@triton.jit
def _weights_kernel(s_ptr, m_ptr, q_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < N
    s = tl.load(s_ptr + offs, mask=ok, other=0.0)
    m = tl.load(m_ptr + offs, mask=ok, other=0.0)
    tl.store(q_ptr + offs, tile_weight(s, m), mask=ok)


def kernel_weights(s: np.ndarray, m: np.ndarray, device) -> np.ndarray:
    st = torch.from_numpy(np.ascontiguousarray(s, np.float32)).to(device)
    mt = torch.from_numpy(np.ascontiguousarray(m, np.float32)).to(device)
    q = torch.empty(st.shape, dtype=torch.uint64, device=device)
    _weights_kernel[(triton.cdiv(st.numel(), 1024),)](st, mt, q, st.numel(), BLOCK=1024)
    return q.cpu().numpy()


def edge_scores() -> tuple[np.ndarray, np.ndarray]:
    """Scores and maxima at the edges: the maximum itself, masked tokens and tiles, the cutoff ``n = -55`` and
    below, halfway cases of ``rint``, huge gaps and large magnitudes."""
    ln2 = np.log(2.0)
    d = np.array([0.0, -1e-30, -0.5 * ln2, -1.5 * ln2, -54.5 * ln2, -55.0 * ln2, -55.49 * ln2, -55.51 * ln2,
                  -60.0, -1e4, -1e30, -np.inf], dtype=np.float64)  # fmt: skip
    m = np.float32([0.0, 7.25, -3.0, 1e4])
    s = (m[:, None].astype(np.float64) + d[None, :]).astype(np.float32)
    s = np.concatenate([s.reshape(-1), np.float32([-np.inf, 5.0])])
    mm = np.concatenate([np.repeat(m, len(d)), np.float32([-np.inf, 5.0])])
    return s, mm


def random_scores(n_tiles: int = 64, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Tiles of 256 scores ``N(0, 4**2)`` (some masked), each with its maximum."""
    rng = np.random.default_rng(seed)
    s = (rng.standard_normal((n_tiles, 256)) * 4).astype(np.float32)
    s[rng.random(s.shape) < 0.05] = -np.inf
    m = np.broadcast_to(s.max(axis=1, keepdims=True), s.shape)
    return s.reshape(-1), m.reshape(-1)


def test_kernel_equals_twin_bit_for_bit(device):
    for s, m in (edge_scores(), random_scores()):
        got = kernel_weights(s, m, device)
        assert np.array_equal(got, tile_weights_np(s, m))


def test_weights_approximate_exp_within_the_bound():
    s, m = random_scores(seed=1)
    q = tile_weights_np(s, m).astype(np.float64)
    d = s.astype(np.float64) - m
    assert np.all(q[d == 0] == 2.0**WEIGHT_BITS) and np.all(q[np.isneginf(s)] == 0)
    big = q >= 2.0**24  # truncation below 2**-24 relative
    rel = np.abs(q[big] * 2.0**-WEIGHT_BITS / np.exp(d[big]) - 1)
    assert np.all(rel <= (3 * np.abs(d[big]) + 1.72 + 1) * 2.0**-24)
    assert np.all(tile_weights_np(np.float32([-39.0]), np.float32([0.0])) == 0)  # 2**x below 2**-55


def test_tile_sums_fit_in_uint64():
    s = np.zeros(256, np.float32)  # every token at the maximum
    assert int(tile_weights_np(s, s).astype(object).sum()) == 256 * 2**WEIGHT_BITS < 2**64
