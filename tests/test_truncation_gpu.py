"""The compiled truncated sampler on the GPU: its draws against the targets' laws (the cases of
``tests/test_truncation_stats.py``, through logits and through the matmul, with the lists and forced through the
fallback), and its tokens against the twin's up to counted near-ties.

Guarantee.  Each :func:`verification.assert_samples_match` call fails an exact sampler with probability at most
``ALPHA = 1e-3``; the ``len(CASES) + 3`` calls here at most ``1.3e-2`` together (13 of them).  Each states the total
variation its chi-square detects with power 0.99 at ``ROWS * PER_ROW = 131072`` draws (below 0.02 on these cases).
Compiled, the noise agrees with the twin within ``2^-21 (1 + |G|)`` (``flashsampling.noise.NOISE_ABS_TOL``), so
a token may differ from the twin's only where the twin's two best kept scores are that close: every mismatch must be
such a near-tie.

GPU only (skipped in the interpreter); about 20 s on the H200.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import flashsampling
import flashsampling.truncation as truncation
import verification
from flashsampling.kernels.truncation import launch_write_logits
from flashsampling.noise import NOISE_ABS_TOL, NOISE_REL_TOL, STREAM_TOKEN, token_noise_np
from flashsampling.twin import inverse_temperature32, kept_mask, sample_truncated_twin
from tests.test_truncation_stats import CASES, _law

pytestmark = pytest.mark.skipif(flashsampling.INTERPRET, reason="the compiled kernels on a GPU")

ALPHA = 1e-3
ROWS, PER_ROW = 1024, 128
SEED = 3711


def _draws(name: str, **extra) -> np.ndarray:
    z, t, filters, _ = CASES[name]
    logits = torch.tensor(z, dtype=torch.float32, device="cuda").expand(ROWS, -1)
    out = flashsampling.sample_from_logits(logits, temperature=t, seed=SEED, num_samples=PER_ROW, **filters, **extra)
    return out.reshape(-1).cpu().numpy()


@pytest.mark.parametrize("name", list(CASES))
def test_compiled_kernel_matches_the_law(name):
    result = verification.assert_samples_match(_draws(name), _law(name), alpha=ALPHA)
    assert result.min_detectable_tv < 0.02, result


def test_compiled_fallback_matches_the_law(monkeypatch):
    monkeypatch.setattr(truncation, "LIST_OVERRIDE", 4)
    verification.assert_samples_match(_draws("topp0.9-V1000", block_v=64), _law("topp0.9-V1000"), alpha=ALPHA)


@pytest.mark.parametrize("name", ["chain-transformers-T0.9", "minp0.1-V1000-T0.7"])
def test_compiled_matmul_kernel_matches_the_law(name):
    """``h`` one-hot and ``W[:, 0]`` the logits in fp32: ``h @ W.T`` is the case's logits exactly."""
    z, t, filters, _ = CASES[name]
    w = torch.zeros(z.size, 16, dtype=torch.float32, device="cuda")
    w[:, 0] = torch.tensor(z, dtype=torch.float32)
    h = torch.zeros(ROWS, 16, dtype=torch.float32, device="cuda")
    h[:, 0] = 1.0
    out = flashsampling.sample(h, w, temperature=t, seed=SEED, num_samples=PER_ROW, **filters)
    verification.assert_samples_match(out.reshape(-1).cpu().numpy(), _law(name), alpha=ALPHA)


FILTERS = [dict(top_k=50), dict(top_k=1024), dict(top_p=0.9), dict(min_p=0.05),
           dict(top_k=100, top_p=0.9, min_p=0.02, order="vllm")]  # fmt: skip


@pytest.mark.parametrize("filters", FILTERS, ids=[str(f) for f in FILTERS])
def test_compiled_tokens_equal_the_twin_up_to_near_ties(filters):
    """The bf16 matmul at 64 rows of ``V = 32000``: the twin on the kernel's own fp32 logits (its ``WRITE`` mode at
    the same tiles), 4 samples a row; a token that differs must be a near-tie of the twin's kept scores."""
    g = torch.Generator(device="cuda").manual_seed(5)
    V, D, B, T, S = 32000, 1024, 64, 0.8, 4
    w = (torch.randn(V, D, device="cuda", generator=g) * 0.05).bfloat16()
    h = torch.randn(B, D, device="cuda", generator=g).bfloat16()
    got = flashsampling.sample(h, w, temperature=T, seed=99, num_samples=S, **filters).cpu().numpy()
    z = launch_write_logits(h, w, truncation.truncation_tiles(B, 2)).cpu().numpy()
    want = sample_truncated_twin(z, T, seed=99, num_samples=S, **filters)
    rows, samples = np.nonzero(got != want)
    kept = kept_mask(z, T, filters.get("top_k"), filters.get("top_p"), filters.get("min_p"), filters.get("order"))
    inv = inverse_temperature32(T, 1)[0]
    for r, s in zip(rows.tolist(), samples.tolist()):
        a, b = int(got[r, s]), int(want[r, s])
        assert kept[r, a], (r, s, a)  # the kernel's token is kept
        g2, _ = token_noise_np(99, r, np.array([a, b], dtype=np.uint32), s, STREAM_TOKEN, lazy_keys=True)
        scores = z[r, [a, b]] * inv + g2
        gap = abs(float(scores[0] - scores[1]))
        assert gap <= 2 * (NOISE_ABS_TOL + NOISE_REL_TOL * float(np.abs(g2).max())), (r, s, gap)
    assert rows.size <= 2, rows.size
