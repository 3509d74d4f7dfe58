"""``return_logprobs=True``: the chosen tokens' log-probabilities against the float64 reference, within the stated
fp32 bound (:func:`flashsampling.logprobs.logprob_error_bound`).

No statistics: the tokens are the ones drawn without the flag (same seed), and each log-probability is compared with
``z64[tok] / T - logsumexp(z64 / T)`` of the exact logits (``T = 1`` for a greedy row, the engines' convention).
Planted errors (the temperature left out, a neighbouring token's value) exceed the bound, so the check can fail.
About 10 s on the CPU (interpreted kernels).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import flashsampling
from flashsampling import TileConfig
from flashsampling.logprobs import logprob_error_bound, reference_logprobs
from flashsampling.reference import fp32_logit_error_bound, target_logits

DEVICE = torch.device("cpu" if flashsampling.INTERPRET else "cuda")
TEMPS = [0.7, 1.0, 0.0, 2.0, 0.3]
#: (input dtype, tiles): the default tiles, one program per tile, the staged epilogue, the persistent kernel, and the
#: Gluon kernel's configuration (the Triton kernels run: it writes no log-masses).
CONFIGS = [
    (torch.bfloat16, None),
    (torch.float32, None),
    (torch.bfloat16, TileConfig(16, 64, 32)),
    (torch.float32, TileConfig(32, 128, 32, epilogue_v=32)),
    (torch.bfloat16, TileConfig(32, 128, 16, epilogue_v=64, persistent=True)),
    (torch.bfloat16, TileConfig(64, 128, 16, epilogue_v=64, warp_specialized=True)),
]


def lm_head(dtype, b=5, v=203, d=48, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, d, generator=g).to(dtype), (torch.randn(v, d, generator=g) * 0.4).to(dtype)


def check_within_bound(logprobs, z64, temps, tokens, logit_error, tile_width) -> np.ndarray:
    """Assert ``|logprobs - reference| <= bound``; returns the errors."""
    ref = reference_logprobs(z64, temps, tokens)
    bound = logprob_error_bound(z64, temps, tokens, logit_error=logit_error, tile_width=tile_width)
    err = np.abs(np.asarray(logprobs, dtype=np.float64) - ref)
    assert (err <= bound).all(), f"max error {err.max():.3g} above the bound (min {bound.min():.3g})"
    assert (np.asarray(logprobs) <= 0).all()
    return err


@pytest.mark.parametrize(
    "dtype, tiles",
    CONFIGS,
    ids=lambda c: str(c).split(".")[-1] if isinstance(c, torch.dtype) else "default" if c is None else
    f"bv{c.block_v}-ev{c.epilogue_v}-p{int(c.persistent)}-ws{int(c.warp_specialized)}",
)  # fmt: skip
def test_sample_logprobs_within_the_bound(tiles, dtype):
    h, w = lm_head(dtype)
    temps = torch.tensor(TEMPS)
    kw = dict(temperature=temps.to(DEVICE), seed=11, num_samples=3, tiles=tiles)
    tokens, logprobs = flashsampling.sample(h.to(DEVICE), w.to(DEVICE), return_logprobs=True, **kw)
    assert logprobs.dtype == torch.float32 and logprobs.shape == tokens.shape == (5, 3)
    assert torch.equal(tokens, flashsampling.sample(h.to(DEVICE), w.to(DEVICE), **kw))  # the same draw
    width = 256 if tiles is None else (tiles.epilogue_v or tiles.block_v)
    check_within_bound(logprobs.cpu(), target_logits(h, w), temps.numpy(), tokens.cpu().numpy(),
                       fp32_logit_error_bound(h, w), width)  # fmt: skip


@pytest.mark.parametrize("block_v", [32, 1024])
def test_sample_from_logits_logprobs_within_the_bound(block_v):
    rng = np.random.default_rng(block_v)
    z = (rng.standard_normal((5, 300)) * 4).astype(np.float32)
    z[0, rng.integers(0, 300, 50)] = -np.inf
    temps = torch.tensor(TEMPS)
    zt = torch.from_numpy(z).to(DEVICE)
    tokens, logprobs = flashsampling.sample_from_logits(
        zt, temperature=temps.to(DEVICE), seed=3, num_samples=4, block_v=block_v, return_logprobs=True
    )
    assert torch.equal(tokens, flashsampling.sample_from_logits(zt, temperature=temps.to(DEVICE), seed=3,
                                                                 num_samples=4, block_v=block_v))  # fmt: skip
    check_within_bound(logprobs.cpu(), z.astype(np.float64), temps.numpy(), tokens.cpu().numpy(), 0.0, block_v)


def test_greedy_rows_report_the_temperature_one_law_and_a_number_zero_too():
    h, w = lm_head(torch.float32, seed=4)
    z64 = target_logits(h, w)
    for temperature in (0.0, torch.zeros(5)):
        t = temperature.to(DEVICE) if isinstance(temperature, torch.Tensor) else temperature
        tokens, logprobs = flashsampling.sample(h.to(DEVICE), w.to(DEVICE), temperature=t, seed=1, return_logprobs=True)
        assert torch.equal(tokens[:, 0].cpu(), torch.from_numpy(z64.argmax(axis=1)))
        log_softmax = z64 - np.log(np.exp(z64 - z64.max(1, keepdims=True)).sum(1, keepdims=True)) - z64.max(1)[:, None]
        expected = np.take_along_axis(log_softmax, tokens.cpu().numpy(), axis=1)
        np.testing.assert_allclose(logprobs.cpu().numpy(), expected, atol=1e-4)
        assert (logprobs < 0).all()  # not the point mass's 0


def test_row_seeds_and_logprobs():
    h, w = lm_head(torch.bfloat16, seed=6)
    seeds = torch.tensor([1, -2, 3, 1, 2**40], device=DEVICE)
    tokens, logprobs = flashsampling.sample(h.to(DEVICE), w.to(DEVICE), seed=seeds, return_logprobs=True)
    assert torch.equal(tokens, flashsampling.sample(h.to(DEVICE), w.to(DEVICE), seed=seeds))
    check_within_bound(logprobs.cpu(), target_logits(h, w), 1.0, tokens.cpu().numpy(), fp32_logit_error_bound(h, w),
                       256)  # fmt: skip


def test_planted_errors_exceed_the_bound():
    # The check can fail: a log-probability without the temperature, or of a neighbouring token, is outside the bound.
    h, w = lm_head(torch.bfloat16)
    temps = np.array(TEMPS)
    tokens, _ = flashsampling.sample(h.to(DEVICE), w.to(DEVICE), temperature=torch.tensor(TEMPS).to(DEVICE), seed=11,
                                     num_samples=3, return_logprobs=True)  # fmt: skip
    tokens = tokens.cpu().numpy()
    z64 = target_logits(h, w)
    bound = logprob_error_bound(z64, temps, tokens, logit_error=fp32_logit_error_bound(h, w), tile_width=256)
    ref = reference_logprobs(z64, temps, tokens)
    sampled = (temps != 1.0) & (temps != 0.0)  # (a greedy row's law is the T = 1 law)
    no_temperature = reference_logprobs(z64, 1.0, tokens)
    assert (np.abs(no_temperature - ref) > bound)[sampled].mean() > 0.9
    neighbour = reference_logprobs(z64, temps, (tokens + 1) % z64.shape[1])
    assert (np.abs(neighbour - ref) > bound).mean() > 0.9


def test_logprobs_need_a_bool_and_no_top_k():
    h, w = lm_head(torch.float32)
    with pytest.raises(TypeError, match="return_logprobs must be a bool"):
        flashsampling.sample(h.to(DEVICE), w.to(DEVICE), seed=1, return_logprobs=1)
    with pytest.raises(ValueError, match="return_logprobs=True is not supported with top_k"):
        flashsampling.sample_from_logits((h @ w.T).to(DEVICE), seed=1, top_k=4, return_logprobs=True)
