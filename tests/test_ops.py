"""flashsampling.ops: the torch.library custom ops, their fake implementations and torch.compile.

No statistics here: the ops call :func:`flashsampling.sample` / :func:`flashsampling.sample_from_logits`, whose
laws are tested elsewhere; these tests check that the ops return exactly those functions' tokens, eagerly and
compiled, for the same seed.
"""

from __future__ import annotations

import os

import pytest
import torch

import flashsampling
import flashsampling.ops as ops

D, V = 64, 200
#: Where the kernels run (as in conftest's ``device`` fixture).
DEVICE = torch.device("cpu" if flashsampling.INTERPRET else "cuda")


@pytest.fixture(scope="module")
def inputs():
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(3, D, generator=g)
    weight = torch.randn(V, D, generator=g) * 0.3
    return hidden.to(DEVICE), weight.to(DEVICE)


def test_schemas_carry_the_seed_as_a_tensor():
    for op in (torch.ops.flashsampling.sample.default, torch.ops.flashsampling.sample_from_logits.default):
        schema = str(op._schema)
        assert "Tensor seed" in schema and "Tensor? temperature" in schema and "float temperature_value" in schema
        assert schema.endswith("-> Tensor")


def test_opcheck(inputs):
    # Schema, fake-tensor implementation, autograd registration and AOT dispatch, as torch.library defines them.
    hidden, weight = inputs
    seed = torch.tensor(7)
    torch.library.opcheck(torch.ops.flashsampling.sample.default, (hidden, weight, None, 0.8, seed, 2, True))
    torch.library.opcheck(
        torch.ops.flashsampling.sample_from_logits.default,
        (hidden @ weight.T, torch.full((3,), 0.5, device=DEVICE), 1.0, seed, 1, True),
    )


@pytest.mark.parametrize(
    "seed, same_as, temperature",
    [
        (7, 7, 0.8),
        (torch.tensor(7), 7, 0.8),
        (2**64 - 3, 2**64 - 3, 0.8),
        (torch.tensor(-3), 2**64 - 3, 0.8),
        (2**63, 2**63, 0.8),
        (torch.tensor(5), 5, "tensor"),
        (5, 5, 0.0),
    ],
    ids=["int", "tensor", "int-above-2**63", "negative-tensor-is-2**64-3", "2**63", "tensor-temperature", "greedy"],
)
def test_ops_return_the_functions_tokens(inputs, seed, same_as, temperature):
    hidden, weight = inputs
    if temperature == "tensor":
        temperature = torch.tensor([0.5, 1.0, 2.0], device=DEVICE)
    got = ops.sample(hidden, weight, temperature=temperature, seed=seed, num_samples=2)
    assert got.dtype == torch.int64 and got.shape == (3, 2)
    assert torch.equal(got, flashsampling.sample(hidden, weight, temperature=temperature, seed=same_as, num_samples=2))
    logits = hidden @ weight.T
    assert torch.equal(
        ops.sample_from_logits(logits, temperature=temperature, seed=seed),
        flashsampling.sample_from_logits(logits, temperature=temperature, seed=same_as),
    )


def test_seed_none_draws_as_flashsampling_sample(inputs):
    hidden, weight = inputs
    torch.manual_seed(11)
    got = ops.sample(hidden, weight, num_samples=4)
    torch.manual_seed(11)
    assert torch.equal(got, flashsampling.sample(hidden, weight, num_samples=4))


def test_fake_implementation_gives_shape_and_dtype():
    hidden = torch.empty(5, D, device="meta")
    weight = torch.empty(V, D, device="meta")
    out = ops.sample(hidden, weight, seed=1, num_samples=3)
    assert out.device.type == "meta" and out.shape == (5, 3) and out.dtype == torch.int64
    out = ops.sample_from_logits(torch.empty(4, V, device="meta"), seed=torch.tensor(1))
    assert out.device.type == "meta" and out.shape == (4, 1) and out.dtype == torch.int64


def _tiny_backbone_and_head():
    transformers = pytest.importorskip("transformers")
    from flashsampling.integrations.transformers import split_lm_head

    os.environ["HF_HUB_OFFLINE"] = "1"
    config = transformers.LlamaConfig(
        vocab_size=V,
        hidden_size=D,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        initializer_range=0.3,
    )
    torch.manual_seed(0)
    return split_lm_head(transformers.LlamaForCausalLM(config).eval().to(DEVICE))


def test_decode_step_compiles_fullgraph_and_returns_eager_tokens():
    # A decode step of a Llama model (backbone, last position, fused sampler) traced in one graph: dynamo and
    # AOTAutograd run the op's fake implementation; the compiled graph calls the real op.  ("aot_eager": the
    # same tracing as inductor without its C++ compilation, ~90 s for this model on 2 CPU cores.)
    backbone, weight = _tiny_backbone_and_head()

    def step(input_ids, seed):
        hidden = backbone(input_ids=input_ids, use_cache=False).last_hidden_state[:, -1]
        return ops.sample(hidden, weight, temperature=0.8, seed=seed)

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    input_ids = torch.randint(0, V, (4, 6), generator=torch.Generator().manual_seed(1)).to(DEVICE)
    with torch.no_grad():
        eager = [step(input_ids, torch.tensor(s)) for s in (7, 8)]
        first = compiled(input_ids, torch.tensor(7))
        with torch._dynamo.config.patch(error_on_recompile=True):  # a new seed tensor is an input, not a constant
            second = compiled(input_ids, torch.tensor(8))
    assert torch.equal(first, eager[0]) and torch.equal(second, eager[1])
    assert not torch.equal(eager[0], eager[1])  # a seed frozen into the graph would fail the line above


def test_inductor_lowers_both_ops(inputs):
    # The default backend: inductor's graph calls the matmul and the ops as external kernels.
    hidden, weight = inputs

    def step(h, seed, temperature):
        return (
            ops.sample(h, weight, temperature=temperature, seed=seed, num_samples=2),
            ops.sample_from_logits(h @ weight.T, temperature=0.0, seed=seed),
        )

    compiled = torch.compile(step, fullgraph=True)
    temperature = torch.tensor([0.5, 1.0, 2.0], device=DEVICE)
    for s in (3, 4):
        seed = torch.tensor(s)
        for got, expected in zip(compiled(hidden, seed, temperature), step(hidden, seed, temperature)):
            assert torch.equal(got, expected)


@pytest.mark.parametrize(
    "seed, host_checks, message",
    [(1, False, "must be a tensor on"), (torch.tensor(1), True, "host_checks=True")],
    ids=["int-seed", "host-checks"],
)
def test_capture_refuses_what_the_host_reads(inputs, monkeypatch, seed, host_checks, message):
    # A seed read on the host, or flags read on the host, would be frozen into (or break) a captured graph.
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    cuda = torch.device("cuda")
    with pytest.raises(ValueError, match=message):
        ops._checked_seed(ops._seed_tensor(seed), cuda, host_checks)


def test_a_seed_tensor_on_the_inputs_device_goes_to_the_kernel(inputs):
    # On the inputs' device the tensor itself reaches the sampler (the kernel loads it); elsewhere its value.
    hidden, _ = inputs
    seed = torch.tensor(-3, device=hidden.device)
    assert ops._checked_seed(seed, hidden.device, True) is seed
    assert ops._checked_seed(torch.tensor(-3), torch.device("meta"), True) == 2**64 - 3


_META_H, _META_W = torch.empty(2, D, device="meta"), torch.empty(V, D, device="meta")


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda h, w: ops.sample(h, w, seed=torch.tensor(1, dtype=torch.int32)), TypeError, "0-dim torch.int64"),
        (lambda h, w: ops.sample(h, w, seed=torch.tensor([1])), TypeError, r"torch.int64 tensor of shape \[3\]"),
        (lambda h, w: ops.sample(h, w, seed=torch.ones(3, 1, dtype=torch.int64)), TypeError, "0-dim torch.int64"),
        (lambda h, w: ops.sample(h, w, seed=-1), ValueError, "seed=-1 is out of range"),
        (lambda h, w: ops.sample(h, w, seed=2**64), ValueError, "out of range"),
        (lambda h, w: ops.sample(h, w, seed=True), TypeError, "seed must be an int"),
        (lambda h, w: ops.sample(h, w, seed=1.0), TypeError, "seed must be an int"),
        (lambda h, w: ops.sample(h, w, seed=1, temperature="0.5"), TypeError, "temperature must be a float"),
        (lambda h, w: ops.sample(h, w, seed=1, temperature=True), TypeError, "temperature must be a float"),
        (lambda h, w: ops.sample(h, w, seed=1, temperature=-1.0), ValueError, "temperature=-1.0 is invalid"),
        (lambda h, w: ops.sample(h, w, seed=1, num_samples=0), ValueError, "num_samples=0"),
        (lambda h, w: ops.sample(h, w, seed=1, num_samples=1.5), TypeError, "num_samples must be an int"),
        (lambda h, w: ops.sample(h, w, seed=1, host_checks=1), TypeError, "host_checks must be a bool"),
        (lambda h, w: ops.sample(h[None], w, seed=1), ValueError, "hidden must have 2 dimensions"),
        (lambda h, w: ops.sample(h, w[:, :8], seed=1), ValueError, "D=64 columns but weight has D=8"),
        (lambda h, w: ops.sample(_META_H[None], _META_W, seed=1), ValueError, "hidden must have 2 dimensions"),
        (lambda h, w: ops.sample(_META_H, _META_W[:, :8], seed=1), ValueError, "weight has D=8"),
        (lambda h, w: ops.sample_from_logits(_META_H[0], seed=1), ValueError, "logits must have 2 dimensions"),
        (lambda h, w: ops.sample_from_logits(h[0], seed=1), ValueError, "logits must have 2 dimensions"),
    ],
    ids=[
        "int32-seed",
        "1d-seed-of-the-wrong-length",
        "2d-seed",
        "negative-seed",
        "seed-2**64",
        "bool-seed",
        "float-seed",
        "str-temperature",
        "bool-temperature",
        "negative-temperature",
        "zero-samples",
        "float-samples",
        "int-host_checks",
        "3d-hidden",
        "d-mismatch",
        "fake-3d-hidden",
        "fake-d-mismatch",
        "fake-1d-logits",
        "1d-logits",
    ],
)
def test_bad_arguments_raise_naming_them(inputs, call, error, message):
    with pytest.raises(error, match=message):
        call(*inputs)


def test_seed_none_compiles_fullgraph(inputs):
    # seed=None draws the seed as a tensor (never read on the host): no data-dependent guard under fullgraph=True,
    # and with aot_eager (torch's own randint) the draw of the eager call for the same torch.manual_seed.
    hidden, weight = inputs
    compiled = torch.compile(lambda h: ops.sample(h, weight, temperature=0.8), fullgraph=True, backend="aot_eager")
    torch.manual_seed(21)
    got = compiled(hidden)
    torch.manual_seed(21)
    assert torch.equal(got, flashsampling.sample(hidden, weight, temperature=0.8))


def test_per_request_seeds_through_the_ops(inputs):
    hidden, weight = inputs
    seeds = torch.tensor([5, -1, 2**40], device=DEVICE)
    assert torch.equal(ops.sample(hidden, weight, seed=seeds, num_samples=2),
                       flashsampling.sample(hidden, weight, seed=seeds, num_samples=2))  # fmt: skip
    logits = hidden @ weight.T
    assert torch.equal(ops.sample_from_logits(logits, seed=seeds), flashsampling.sample_from_logits(logits, seed=seeds))
