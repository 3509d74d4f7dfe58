"""``sample(..., top_k=k)`` and ``sample_from_logits(..., top_k=k)`` equal the NumPy twin bit for bit, and a row whose
``k`` covers its finite tokens gets the plain sampler's token.

The top-k law runs through the fused truncated sampler (:mod:`flashsampling.truncation`: per-tile lists, stage 2's
decision, the exact fallback); ``tests/test_truncation.py`` covers top-p, min-p and the orders.  The twins
(:func:`flashsampling.twin.sample_topk_twin`, the law ``top_k(k, ties="low_index")`` written in NumPy, and the general
:func:`flashsampling.twin.sample_truncated_twin`) are checked statistically in ``tests/test_topk_stats.py`` and
``tests/test_truncation_stats.py``.  Here, on small shapes of several tiles: per-row ``k`` (1, a cut inside a group of
tied logits, ``V - 1``, ``>= V``), greedy rows, ``-inf`` masks leaving fewer finite tokens than ``k``, several samples,
bf16 logits, the matmul kernel, lists too short for ``k`` (every row through the fallback), an odd shard offset, and
no finite token.  Deterministic (no statistics).

In the interpreter (the inputs are CPU tensors).  Compiled on the GPU the noise agrees with the twin only within
``2^-21 (1 + |G|)`` (tests/test_replay.py counts the near-ties), so bit-for-bit token equality is an interpreter
claim; ``benchmarks/truncation_h200.py --check`` compares the compiled kernels' kept sets and tokens on the H200.

Time: about 25 s on two cores (interpreted launches).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import flashsampling
import flashsampling.truncation as truncation
from flashsampling.kernels.truncation import launch_truncation_logits_stage1
from flashsampling.kernels.truncation_stage2 import STEP_SCALED, STEP_TEMPERATURE, STEP_TOP_K, launch_truncation_stage2
from flashsampling.noise import split_seed
from flashsampling.twin import sample_topk_twin, sample_truncated_twin, sample_twin, top_k_columns

pytestmark = pytest.mark.skipif(not flashsampling.INTERPRET, reason="bit-exact kernel = twin: the interpreter's claim")

V = 300
#: Per-row ``k``: the smallest, a cut inside row 1's tied group, one tile's worth, ``V - 1``, no truncation.
KS = [1, 7, 64, V - 1, V + 5]


def _logits(seed: int = 0, rows: int = len(KS)) -> torch.Tensor:
    """float32 logits on a 0.5 grid (many exact ties), row 1 with 10 ties at its 5th-14th largest logit."""
    g = torch.Generator().manual_seed(seed)
    z = torch.round(torch.randn(rows, V, generator=g) * 4) / 2
    z[1, torch.randperm(V, generator=g)[:10]] = 20.0
    z[1, torch.randperm(V, generator=g)[:4]] = 30.0
    return z


def _twin(z: torch.Tensor, k, temperature, seed: int, num_samples: int, **kw) -> np.ndarray:
    t = temperature.numpy() if isinstance(temperature, torch.Tensor) else temperature
    want = sample_topk_twin(z.float().numpy(), np.asarray(k), t, seed=seed, num_samples=num_samples, **kw)
    general = sample_truncated_twin(z.float().numpy(), t, top_k=np.asarray(k), seed=seed, num_samples=num_samples,
                                    **kw)  # fmt: skip
    assert np.array_equal(want, general)  # the top-k twin and the general twin are the same sampler
    return want


def test_kept_set_is_the_first_k_by_logit_then_index():
    z = np.array([[1.0, 3.0, 2.0, 3.0, -np.inf, 2.0, 2.0]], dtype=np.float32)
    cols, kept = top_k_columns(z, 4)
    assert cols[0][kept[0]].tolist() == [1, 2, 3, 5]  # 3, 3, then the two lowest-index 2s
    cols, kept = top_k_columns(z, 7)
    assert sorted(cols[0][kept[0]].tolist()) == [0, 1, 2, 3, 5, 6]  # -inf never kept


@pytest.mark.parametrize("block_v", [64, 16])
def test_logits_kernel_equals_the_twin_per_row_k(block_v):
    z = _logits()
    temperature = torch.tensor([1.0, 0.7, 0.0, 1.3, 1.0])
    got = flashsampling.sample_from_logits(z, temperature=temperature, seed=11, num_samples=3, block_v=block_v,
                                           top_k=torch.tensor(KS))  # fmt: skip
    assert np.array_equal(got.numpy(), _twin(z, KS, temperature, 11, 3))
    # The row with k >= V is the plain sampler's, token for token.
    plain = flashsampling.sample_from_logits(z, temperature=temperature, seed=11, num_samples=3)
    assert torch.equal(got[-1], plain[-1])


def test_lists_too_short_send_every_row_through_the_fallback(monkeypatch):
    """Two entries per 16-column tile cannot hold 7, 64 or 299 tokens: those rows take the exact fallback (their
    whole logits); the tokens are the twin's all the same."""
    monkeypatch.setattr(truncation, "LIST_OVERRIDE", 2)
    z = _logits(7)
    temperature = torch.tensor([1.0, 0.7, 0.0, 1.3, 1.0])
    got = flashsampling.sample_from_logits(z, temperature=temperature, seed=12, num_samples=2, block_v=16,
                                           top_k=torch.tensor(KS))  # fmt: skip
    assert np.array_equal(got.numpy(), _twin(z, KS, temperature, 12, 2))


def test_greedy_number_temperature_and_bf16():
    z = _logits(1).bfloat16()
    got = flashsampling.sample_from_logits(z, temperature=0.0, seed=5, num_samples=2, top_k=7)
    assert np.array_equal(got.numpy(), _twin(z, 7, 0.0, 5, 2))
    got = flashsampling.sample_from_logits(z, temperature=0.9, seed=6, num_samples=2, top_k=1)
    assert np.array_equal(got.numpy(), _twin(z, 1, 0.9, 6, 2))
    assert torch.equal(got[:, 0], z.float().argmax(dim=1))  # k = 1 is the argmax, ties by lower index


def test_masked_rows_with_fewer_finite_tokens_than_k_are_the_plain_sampler():
    z = _logits(2)
    g = torch.Generator().manual_seed(3)
    z[torch.rand(z.shape, generator=g) < 0.97] = -float("inf")
    finite = torch.isfinite(z).sum(dim=1)
    assert int(finite.max()) < 40 <= truncation.MAX_TOP_K
    got = flashsampling.sample_from_logits(z, seed=8, num_samples=4, top_k=40, block_v=32)
    assert np.array_equal(got.numpy(), _twin(z, 40, 1.0, 8, 4))
    assert torch.equal(got, flashsampling.sample_from_logits(z, seed=8, num_samples=4))


def test_matmul_kernel_equals_the_twin():
    """``h`` one-hot over ``D = 16`` columns and ``W[:, j]`` a logit vector, so ``h @ W.T`` is exact in fp32."""
    z = _logits(3, rows=4)
    w = torch.zeros(V, 16)
    w[:, :4] = z.T
    h = torch.eye(16)[[2, 0, 3, 1]]
    zz = h @ w.T
    ks = torch.tensor([3, 50, 1000, V])
    tiles = flashsampling.TileConfig(block_b=16, block_v=64, block_d=16)
    got = flashsampling.sample(h, w, temperature=0.8, seed=21, num_samples=2, top_k=ks, tiles=tiles)
    assert np.array_equal(got.numpy(), _twin(zz, ks.numpy(), 0.8, 21, 2))
    assert torch.equal(got[3], flashsampling.sample(h, w, temperature=0.8, seed=21, num_samples=2)[3])


def test_shard_offset():
    """An odd ``col_offset`` (a vocabulary shard): the noise keyed by global indices, the tokens global indices."""
    z = _logits(4)
    ks = torch.tensor([1, 5, 9, 16, 16], dtype=torch.int32)
    inv = torch.tensor([1.0, 1.0, 0.0, 2.0, 1.0])
    temp = torch.tensor([1.0, 1.0, 0.0, 0.5, 1.0], dtype=torch.float64)
    lo, hi = split_seed(77)
    lists = launch_truncation_logits_stage1(z, inv, torch.ones(5, dtype=torch.float64), lo, hi, 2, 8, 8, 32,
                                            mass=False, full=False, col_offset=1001)  # fmt: skip
    params = {"k": ks, "p": torch.full((5,), 2.0, dtype=torch.float64), "temp": temp, "inv_temp": inv,
              "log_min_p": torch.full((5,), -np.inf, dtype=torch.float64)}  # fmt: skip
    steps = (STEP_TEMPERATURE, STEP_TOP_K | STEP_SCALED, 0, 0)
    tokens, flags, status = launch_truncation_stage2(lists["cand_z"], lists["cand_i"], lists["mass"], lists["flags"],
                                                     params, steps, 2, lo, hi, V, LIST=8, mass=False,
                                                     top_p_scaled=True, rel_err=1e-12, col_offset=1001)  # fmt: skip
    want = _twin(z, ks.numpy(), temp.numpy(), 77, 2, col_offset=1001)
    assert not flags.any() and not status.any()
    assert np.array_equal(tokens.numpy(), want)


def test_a_row_with_no_finite_logit_is_flagged_and_in_range():
    z = _logits(5)
    z[2] = -float("inf")
    got = flashsampling.sample_from_logits(z, seed=3, top_k=4, host_checks=False)
    assert np.array_equal(got.numpy(), _twin(z, 4, 1.0, 3, 1))
    assert int(got[2, 0]) == V - 1
    with pytest.raises(ValueError, match="row"):
        flashsampling.sample_from_logits(z, seed=3, top_k=4)


def test_k_covering_every_token_is_the_plain_path():
    z = _logits(6)
    plain = flashsampling.sample_from_logits(z, seed=9, num_samples=2)
    assert torch.equal(flashsampling.sample_from_logits(z, seed=9, num_samples=2, top_k=V), plain)
    assert torch.equal(flashsampling.sample_from_logits(z, seed=9, num_samples=2, top_k=10**30), plain)
    assert np.array_equal(plain.numpy(), sample_twin(z.numpy(), 1.0, seed=9, num_samples=2))


def test_the_wide_k_path_gives_the_same_tokens(monkeypatch):
    """The matmul kernel's int64 K-loop offsets (``WIDE_K``, for layouts where ``ks * stride`` reaches ``2**31``)
    compute what the int32 ones do where both fit."""
    import flashsampling.kernels.truncation as kernels

    g = torch.Generator().manual_seed(7)
    h = torch.randn(3, 16, generator=g)
    w = torch.randn(V, 16, generator=g).T.contiguous().T  # column-major: stride_wd = V
    tiles = flashsampling.TileConfig(block_b=16, block_v=64, block_d=16)
    narrow = flashsampling.sample(h, w, seed=9, num_samples=2, top_k=5, tiles=tiles)
    monkeypatch.setattr(kernels, "wide_k_offsets", lambda *a: True)
    assert torch.equal(flashsampling.sample(h, w, seed=9, num_samples=2, top_k=5, tiles=tiles), narrow)
