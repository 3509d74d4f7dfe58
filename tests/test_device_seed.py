"""A device seed: ``sample`` / ``sample_from_logits`` with a 0-dim int64 seed tensor that the stage-1 kernel loads.

The tokens must be those of the int seed with the same 64 bits (two's complement: ``torch.tensor(-3)`` is the seed
``2**64 - 3``), for the fused and the logits kernels, any temperature form and several samples; on the GPU a
captured CUDA graph replayed after writing a new seed into the tensor gives the eager tokens of that seed.
"""

from __future__ import annotations

import pytest
import torch

import flashsampling
from flashsampling.kernels.tiles import TileConfig

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
        (torch.tensor([1], device=DEVICE), TypeError, "0-dim torch.int64"),
        (torch.tensor(1.0, device=DEVICE), TypeError, "0-dim torch.int64"),
    ],
    ids=["int32", "1-dim", "float"],
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
