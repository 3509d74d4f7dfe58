"""Device seeds: ``sample`` / ``sample_from_logits`` with a seed tensor that the stage-1 kernel loads.

* A 0-dim int64 seed: the tokens must be those of the int seed with the same 64 bits (two's complement:
  ``torch.tensor(-3)`` is the seed ``2**64 - 3``), for the fused and the logits kernels, any temperature form and
  several samples.
* Per-request seeds, a ``[B]`` int64 tensor: row ``b`` is keyed by its own seed with the counter's row field 0, so
  its tokens equal the NumPy twin's with that keying (bit for bit in the interpreter, every tile configuration), and
  equal those of a batch of one with the int seed ``seeds[b]``, whatever slot and batch the row sits in.
* On the GPU a captured CUDA graph replayed after writing new seeds into the tensors gives the eager tokens of
  those seeds.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import flashsampling
from flashsampling.kernels.tiles import TileConfig
from flashsampling.twin import sample_twin
from tests.test_replay import TILES

D, V = 32, 300
DEVICE = torch.device("cpu" if flashsampling.INTERPRET else "cuda")
SEEDS = [0, 7, 2**32 + 5, 2**63 + 11, 2**64 - 3]


def as_tensor(seed: int) -> torch.Tensor:
    return torch.tensor(seed - 2**64 if seed >= 2**63 else seed, dtype=torch.int64, device=DEVICE)


@pytest.fixture(scope="module")
def inputs():
    g = torch.Generator().manual_seed(5)
    hidden = torch.randn(3, D, generator=g)
    weight = torch.randn(V, D, generator=g) * 0.5
    return hidden.to(DEVICE), weight.to(DEVICE)


@pytest.mark.parametrize("seed", SEEDS)
def test_device_seed_equals_the_int_seed(inputs, seed):
    hidden, weight = inputs
    temperature = torch.tensor([0.7, 1.0, 0.0], device=DEVICE)
    for kw in ({"num_samples": 3, "temperature": temperature}, {"temperature": 1.3}):
        expected = flashsampling.sample(hidden, weight, seed=seed, **kw)
        assert torch.equal(flashsampling.sample(hidden, weight, seed=as_tensor(seed), **kw), expected)
        logits = hidden.float() @ weight.float().T
        expected = flashsampling.sample_from_logits(logits, seed=seed, **kw)
        got = flashsampling.sample_from_logits(logits, seed=as_tensor(seed), block_v=64, **kw)
        assert torch.equal(got, expected)


def test_device_seed_on_explicit_tiles_and_the_greedy_path(inputs):
    hidden, weight = inputs
    tiles = TileConfig(block_b=16, block_v=64, block_d=32, num_warps=4, num_stages=2)
    s = 2**40 + 1
    assert torch.equal(
        flashsampling.sample(hidden, weight, seed=as_tensor(s), tiles=tiles),
        flashsampling.sample(hidden, weight, seed=s),
    )
    assert torch.equal(
        flashsampling.sample(hidden, weight, seed=as_tensor(s), temperature=0.0),
        flashsampling.sample(hidden, weight, seed=s, temperature=0.0),
    )


@pytest.mark.parametrize(
    "seed, error, message",
    [
        (torch.tensor(1, dtype=torch.int32, device=DEVICE), TypeError, "0-dim torch.int64"),
        (torch.tensor([1], device=DEVICE), TypeError, r"per-request seeds must be a torch.int64 tensor of shape \[3\]"),
        (torch.tensor([1.0, 2.0, 3.0], device=DEVICE), TypeError, "per-request seeds must be a torch.int64"),
        (torch.ones(3, 1, dtype=torch.int64, device=DEVICE), TypeError, "0-dim torch.int64"),
        (torch.tensor(1.0, device=DEVICE), TypeError, "0-dim torch.int64"),
    ],
    ids=["int32", "1-dim-of-the-wrong-length", "1-dim-float", "2-dim", "float"],
)
def test_bad_seed_tensors_are_refused(inputs, seed, error, message):
    with pytest.raises(error, match=message):
        flashsampling.sample(*inputs, seed=seed)


def test_other_entry_points_take_int_seeds_only(inputs):
    # The grouped, online, tensor-parallel and tile inverse-CDF samplers read the seed on the host.
    with pytest.raises(TypeError, match="seed must be an int"):
        flashsampling.sample_grouped(*inputs, seed=as_tensor(1))


@pytest.mark.skipif(DEVICE.type != "cuda", reason="CUDA-graph capture needs a GPU")
@pytest.mark.parametrize("B", [4, 64])
def test_captured_graph_replays_with_new_seeds(B):
    import flashsampling.ops as ops

    g = torch.Generator(device="cuda").manual_seed(1)
    hidden = torch.randn(B, 256, device="cuda", generator=g).bfloat16()
    weight = (torch.randn(4096, 256, device="cuda", generator=g) * 0.2).bfloat16()
    seed = torch.zeros((), dtype=torch.int64, device="cuda")

    def step():
        return (
            ops.sample(hidden, weight, temperature=1.0, seed=seed, host_checks=False),
            ops.sample_from_logits(hidden.float() @ weight.float().T, temperature=0.8, seed=seed, host_checks=False),
        )

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # warm-up compiles the kernels outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    for s in SEEDS:
        seed.fill_(s - 2**64 if s >= 2**63 else s)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out[0], flashsampling.sample(hidden, weight, seed=s))
        assert torch.equal(
            out[1], flashsampling.sample_from_logits(hidden.float() @ weight.float().T, temperature=0.8, seed=s)
        )


def test_top_k_takes_an_int_seed_only(inputs):
    with pytest.raises(ValueError, match="not supported with top_k"):
        flashsampling.sample(*inputs, seed=as_tensor(1), top_k=5)


# ------------------------------------------------------------------------------------------------
# Per-request seeds: a [B] int64 tensor, one seed per row
# ------------------------------------------------------------------------------------------------

#: Rows 0 and 3 share a seed: the same noise, wherever they sit.
ROW_SEEDS = [3, 2**64 - 7, 2**40 + 1, 3, 12345]


def row_seeds(seeds=ROW_SEEDS) -> torch.Tensor:
    return torch.tensor([s - 2**64 if s >= 2**63 else s for s in seeds], dtype=torch.int64, device=DEVICE)


def logits_with_ties(b: int = 5, v: int = 301, seed: int = 0) -> np.ndarray:
    """float32 logits with masked tokens and an exact 3-way tie at the top of row 2 (its tie keys decide)."""
    rng = np.random.default_rng(seed)
    z = (rng.standard_normal((b, v)) * 2).astype(np.float32)
    z[0, rng.integers(0, v, 30)] = -np.inf
    z[2, [5, 77, 290]] = z[2].max() + 1
    return z


@pytest.mark.parametrize("block_v", [16, 64, 1024])
def test_row_seeds_logits_kernel_equals_twin(block_v):
    z = logits_with_ties()
    temps = np.array([0.7, 1.0, 0.0, 1.3, 0.9], dtype=np.float32)  # row 2 greedy: its tie is broken by the keys
    got = flashsampling.sample_from_logits(
        torch.from_numpy(z).to(DEVICE), temperature=torch.from_numpy(temps).to(DEVICE), seed=row_seeds(),
        num_samples=3, block_v=block_v,
    ).cpu().numpy()  # fmt: skip
    expected = sample_twin(z, temps, seed=np.array(ROW_SEEDS, dtype=np.uint64), num_samples=3)
    if flashsampling.INTERPRET:
        np.testing.assert_array_equal(got, expected)
    else:
        assert (got == expected).mean() >= 0.99
    assert len(set(got[2].tolist())) > 1  # the tie is broken per sample


@pytest.mark.parametrize(
    "tiles",
    TILES,
    ids=lambda t: f"bb{t.block_b}-bv{t.block_v}-ev{t.epilogue_v}-p{int(t.persistent)}-ws{int(t.warp_specialized)}",
)
def test_row_seeds_fused_kernel_equals_twin_on_exact_logits(tiles):
    # Integer inputs give exact fp32 logits (repeated weight rows: exact ties inside and across tiles), so the fused
    # kernel's tokens must be the twin's on every tile configuration (the Gluon one runs the Triton kernels).
    gen = torch.Generator().manual_seed(9)
    h = torch.randint(-1, 2, (5, 32), generator=gen).to(torch.float16)
    w = torch.randint(-1, 2, (100, 32), generator=gen).to(torch.float16).repeat(3, 1)
    z = (h.double() @ w.double().T).numpy()
    temps = torch.tensor([0.0, 1.0, 0.0, 0.5, 2.0])
    expected = sample_twin(z, temps.numpy(), seed=np.array(ROW_SEEDS, dtype=np.uint64), num_samples=3)
    got = flashsampling.sample(h.to(DEVICE), w.to(DEVICE), temperature=temps.to(DEVICE), seed=row_seeds(),
                               num_samples=3, tiles=tiles)  # fmt: skip
    np.testing.assert_array_equal(got.cpu().numpy(), expected)


def test_a_rows_tokens_depend_on_its_seed_not_its_slot():
    z = torch.from_numpy(logits_with_ties()).to(DEVICE)
    seeds = row_seeds()
    together = flashsampling.sample_from_logits(z, seed=seeds, num_samples=4)
    perm = [3, 0, 4, 1, 2]
    assert torch.equal(flashsampling.sample_from_logits(z[perm], seed=seeds[perm], num_samples=4), together[perm])
    for b, s in enumerate(ROW_SEEDS):  # alone, with its seed as an int: a batch of one's row 0
        assert torch.equal(flashsampling.sample_from_logits(z[b : b + 1], seed=s, num_samples=4)[0], together[b])
        assert torch.equal(flashsampling.sample_from_logits(z[b : b + 1], seed=seeds[b : b + 1], num_samples=4)[0],
                           together[b])  # fmt: skip
    # The check can fail: one seed for the batch keys rows by slot, and a permuted batch draws other tokens.
    one = flashsampling.sample_from_logits(z, seed=3, num_samples=4)
    assert not torch.equal(flashsampling.sample_from_logits(z[perm], seed=3, num_samples=4), one[perm])


def test_row_seeds_are_refused_where_the_kernels_take_an_int(inputs):
    hidden, weight = inputs
    with pytest.raises(ValueError, match="not supported with top_k"):
        flashsampling.sample(hidden, weight, seed=row_seeds()[:3], top_k=5)
    with pytest.raises(TypeError, match="seed must be an int"):
        flashsampling.sample_grouped(hidden, weight, seed=row_seeds()[:3])
    with pytest.raises(TypeError, match="seed must be an int"):
        flashsampling.OnlineSampler(3, seed=row_seeds()[:3])


@pytest.mark.skipif(DEVICE.type != "cuda", reason="CUDA-graph capture needs a GPU")
def test_captured_graph_replays_with_new_row_seeds():
    g = torch.Generator(device="cuda").manual_seed(2)
    B = 64
    hidden = torch.randn(B, 256, device="cuda", generator=g).bfloat16()
    weight = (torch.randn(4096, 256, device="cuda", generator=g) * 0.2).bfloat16()
    seeds = torch.zeros(B, dtype=torch.int64, device="cuda")

    def step():
        return flashsampling.sample(hidden, weight, temperature=1.0, seed=seeds, host_checks=False)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    for base in (1, 2**63 + 5):
        new = torch.tensor([(base + 7919 * b) % 2**64 for b in range(B)], dtype=torch.uint64).view(torch.int64)
        seeds.copy_(new.to("cuda"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, flashsampling.sample(hidden, weight, temperature=1.0, seed=seeds.clone()))
