"""flashsampling.integrations.transformers: tiny models built from configs (seeded random weights, no download).

Statistical checks (seeds fixed, so the suite is deterministic; alpha and power say what a fresh seed risks):

=========================  ======  ===================  ======  =======================================
check                      seed    n                    alpha   planted defect that must fail it
=========================  ======  ===================  ======  =======================================
step 0 law                 _SEED   _N = 512 rows        1e-4    head without the final norm (TV 0.69)
step 1 law (KV cache)      _SEED   ~150 rows (1 group)  1e-4    decode step that loses the KV cache (0.98)
=========================  ======  ===================  ======  =======================================

The planted runs use ``_N_PLANTED = 128`` rows; each is asserted to be caught, and its exact total variation
to exceed the deviation the check detects with power 0.99 at that n (the passing result's ``min_detectable_tv``
scaled by ``sqrt(_N / _N_PLANTED)``, its ``1 / sqrt(n)`` law), so the catch is planned, not lucky.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import flashsampling
import verification
from flashsampling.reference import softmax

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
fst = pytest.importorskip("flashsampling.integrations.transformers")

#: Where the kernels run (as in conftest's ``device`` fixture): the interpreter takes CPU tensors, compiled
#: kernels CUDA tensors.
DEVICE = torch.device("cpu" if flashsampling.INTERPRET else "cuda")

#: Seed, rows and level of the law checks, rows of the planted runs (see the module docstring).
_SEED, _N, _ALPHA, _TEMPERATURE, _N_PLANTED = 20270, 512, 1e-4, 0.7, 128

_BASE = dict(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=128,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
    # Wide logits (std ~ 2 nats) so that temperature, norm and cache matter to the law; 0.02 gives a near-uniform
    # softmax on which every defect looks alike.
    initializer_range=0.3,
)
#: Family options: experts for the MoE families, sliding windows shorter than the prompts for Mistral and Qwen2.
_EXTRA = {
    "mixtral": dict(num_local_experts=4, num_experts_per_tok=2),
    "qwen2_moe": dict(
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64, shared_expert_intermediate_size=64
    ),
    "qwen3_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64),
    "mistral": dict(sliding_window=4),
    "qwen2": dict(use_sliding_window=True, sliding_window=4, max_window_layers=1, tie_word_embeddings=True),
}


def tiny_model(model_type: str, seed: int = 0, **overrides):
    """A 2-layer model of ``model_type`` with hidden size 64 and seeded random weights, in eval mode."""
    config = transformers.AutoConfig.for_model(model_type, **{**_BASE, **_EXTRA.get(model_type, {}), **overrides})
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(config).eval().to(DEVICE)


def left_padded_batch(vocab_size: int, seed: int = 1):
    """Three prompts of lengths 7, 5 and 4, left-padded with 0 to length 7, and their attention mask."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab_size, (3, 7), generator=g)
    mask = torch.ones_like(ids)
    mask[1, :2] = 0
    mask[2, :3] = 0
    return ids.masked_fill(mask == 0, 0).to(DEVICE), mask.to(DEVICE)


# ------------------------------------------------------------------------------------------------
# The head: which families compute logits = final_norm(h) @ W.T
# ------------------------------------------------------------------------------------------------


def head_is_plain(model, ids, mask) -> bool:
    """Whether the model's last-position logits equal ``backbone(ids)[:, -1] @ W.T`` (fp32 rounding aside)."""
    with torch.no_grad():
        logits = model(ids, attention_mask=mask).logits[:, -1]
        x = model.get_decoder()(input_ids=ids, attention_mask=mask).last_hidden_state[:, -1]
    return torch.allclose(logits, x @ model.get_output_embeddings().weight.T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model_type", sorted(fst.SUPPORTED_MODEL_TYPES))
def test_supported_family_head_is_final_norm_matmul(model_type):
    model = tiny_model(model_type)
    assert head_is_plain(model, *left_padded_batch(256))


@pytest.mark.parametrize(
    "model_type, overrides",
    [("gemma2", {}), ("granite", {"logits_scaling": 8.0}), ("cohere", {})],
    ids=["gemma2-softcap", "granite-logits_scaling", "cohere-logit_scale"],
)
def test_head_check_fails_on_scaled_heads(model_type, overrides):
    # The planted side of the check above: heads that transform the logits are seen as not plain.
    assert not head_is_plain(tiny_model(model_type, **overrides), *left_padded_batch(256))


# ------------------------------------------------------------------------------------------------
# Greedy: token for token what model.generate(do_sample=False) returns
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model_type", sorted(fst.SUPPORTED_MODEL_TYPES))
def test_greedy_equals_hf_generate_left_padded(model_type):
    model = tiny_model(model_type)
    ids, mask = left_padded_batch(256)
    expected = model.generate(
        ids, attention_mask=mask, do_sample=False, max_new_tokens=2, eos_token_id=None, pad_token_id=0
    )
    got = fst.generate(model, ids, attention_mask=mask, max_new_tokens=2, temperature=0.0, eos_token_id=[])
    assert torch.equal(got, expected)


@pytest.mark.parametrize("model_type", ["llama", "qwen2"])
def test_greedy_equals_hf_generate_with_eos(model_type):
    # 6 steps through the KV cache; the end-of-sequence id is the token row 1 emits at step 2, so row 1 stops
    # there and is padded after, as transformers does.
    model = tiny_model(model_type)
    ids, mask = left_padded_batch(256)
    free = fst.generate(model, ids, attention_mask=mask, max_new_tokens=6, temperature=0.0, eos_token_id=[])
    assert torch.equal(
        free,
        model.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=6, eos_token_id=None, pad_token_id=0),
    )
    eos = int(free[1, 7 + 2])
    expected = model.generate(
        ids, attention_mask=mask, do_sample=False, max_new_tokens=6, eos_token_id=eos, pad_token_id=255
    )
    got = fst.generate(
        model, ids, attention_mask=mask, max_new_tokens=6, temperature=0.0, eos_token_id=eos, pad_token_id=255
    )
    assert torch.equal(got, expected)
    assert (got[1, 7 + 3 :] == 255).all() and not torch.equal(got, free)


def test_per_row_temperature_tensor_zero_is_greedy():
    model = tiny_model("llama")
    ids, mask = left_padded_batch(256)
    greedy = fst.generate(model, ids, attention_mask=mask, max_new_tokens=2, temperature=0.0, eos_token_id=[])
    mixed = fst.generate(
        model,
        ids,
        attention_mask=mask,
        max_new_tokens=2,
        eos_token_id=[],
        seed=3,
        temperature=torch.tensor([0.0, 5.0, 0.0], device=DEVICE),
    )
    assert torch.equal(mixed[[0, 2]], greedy[[0, 2]])
    assert not torch.equal(mixed[1], greedy[1])  # T = 5 flattens the law: a greedy row 1 would be a defect


def test_generation_stops_when_every_row_finished():
    model = tiny_model("llama")
    ids, mask = left_padded_batch(256)
    free = fst.generate(model, ids, attention_mask=mask, max_new_tokens=2, temperature=0.0, eos_token_id=[])
    got = fst.generate(
        model, ids, attention_mask=mask, max_new_tokens=8, temperature=0.0, eos_token_id=free[:, 7].tolist()
    )
    assert torch.equal(got, free[:, :8])


def test_eos_and_pad_default_to_generation_config():
    model = tiny_model("llama")
    model.generation_config.eos_token_id = [7, 9]
    model.generation_config.pad_token_id = None
    assert fst._eos_and_pad(model, None, None, 256)[1] == 7  # the first EOS id pads, as in transformers
    eos, pad = fst._eos_and_pad(model, [], 5, 256)
    assert eos is None and pad == 5
    eos, pad = fst._eos_and_pad(model, torch.tensor(4), None, 256)  # a tensor, as some generation configs hold
    assert eos.tolist() == [4] and pad == 4


# ------------------------------------------------------------------------------------------------
# The law of a sampled step
# ------------------------------------------------------------------------------------------------


def _step_laws(model, prompt, first_token, *, lose_cache=False):
    """Float64 laws of step 0 (given the prompt) and step 1 (given the prompt and ``first_token``) at the
    test's temperature, from the model's own logits; with ``lose_cache``, step 1's law when the decode step
    sees only ``first_token`` at position L (the planted defect)."""
    token = torch.tensor([[first_token]], device=prompt.device)
    with torch.no_grad():
        z0 = model(prompt).logits[0, -1]
        if lose_cache:
            z1 = model(token, position_ids=torch.full_like(token, prompt.shape[1])).logits[0, -1]
        else:
            z1 = model(torch.cat([prompt, token], dim=1)).logits[0, -1]
    return softmax(z0.double().cpu().numpy(), _TEMPERATURE), softmax(z1.double().cpu().numpy(), _TEMPERATURE)


def _tv(p, q) -> float:
    return 0.5 * float(np.abs(p - q).sum())


@pytest.fixture(scope="module")
def law_model():
    return tiny_model("llama", seed=3, vocab_size=128, eos_token_id=None, bos_token_id=None, pad_token_id=None)


@pytest.fixture(scope="module")
def law_prompt():
    return torch.randint(0, 128, (1, 5), generator=torch.Generator().manual_seed(4)).to(DEVICE)


@pytest.fixture(scope="module")
def law_draws(law_model, law_prompt):
    """``_N`` rows of one prompt, two sampled steps: ``_N`` independent draws of step 0 (rows are independent
    streams), and, in the rows whose first token is the most frequent ``a``, draws of step 1 given ``a``."""
    out = fst.generate(law_model, law_prompt.repeat(_N, 1), max_new_tokens=2, temperature=_TEMPERATURE, seed=_SEED)
    return out[:, 5].cpu().numpy(), out[:, 6].cpu().numpy()


def _most_frequent(tokens: np.ndarray) -> int:
    return int(np.bincount(tokens).argmax())


def _null_results(law_model, law_prompt, law_draws):
    """The two law checks on the correct draws: ``(first, second, a, p0, p1, result0, result1)``."""
    first, second = law_draws
    a = _most_frequent(first)
    p0, p1 = _step_laws(law_model, law_prompt, a)
    result0 = verification.assert_samples_match(first, p0, alpha=_ALPHA, power=0.99)
    result1 = verification.assert_samples_match(second[first == a], p1, alpha=_ALPHA, power=0.99)
    return a, p0, p1, result0, result1


def test_sampled_step0_law_is_softmax_of_model_logits(law_model, law_prompt, law_draws):
    first, _ = law_draws
    p0, _ = _step_laws(law_model, law_prompt, _most_frequent(first))
    verification.assert_samples_match(first, p0, alpha=_ALPHA, power=0.99)


def test_sampled_step1_law_is_softmax_of_model_logits(law_model, law_prompt, law_draws):
    # Step 1 runs through the KV cache with its own step seed; given its first token, a row's second token is
    # drawn from softmax(z1 / T), independently of the first draw's noise.
    first, second = law_draws
    a = _most_frequent(first)
    _, p1 = _step_laws(law_model, law_prompt, a)
    verification.assert_samples_match(second[first == a], p1, alpha=_ALPHA, power=0.99)


def _planted_draws(law_model, law_prompt, max_new_tokens):
    out = fst.generate(
        law_model,
        law_prompt.repeat(_N_PLANTED, 1),
        max_new_tokens=max_new_tokens,
        temperature=_TEMPERATURE,
        seed=_SEED + 1,
    )
    return out[:, 5].cpu().numpy(), out[:, -1].cpu().numpy()


def test_planted_head_without_final_norm_fails_step0(law_model, law_prompt, law_draws):
    _, p0, _, result0, _ = _null_results(law_model, law_prompt, law_draws)
    norm, law_model.model.norm = law_model.model.norm, torch.nn.Identity()
    try:
        with torch.no_grad():
            q0 = softmax(law_model(law_prompt).logits[0, -1].double().cpu().numpy(), _TEMPERATURE)
        first, _ = _planted_draws(law_model, law_prompt, 1)
    finally:
        law_model.model.norm = norm
    assert _tv(q0, p0) > np.sqrt(_N / _N_PLANTED) * result0.min_detectable_tv
    with pytest.raises(AssertionError, match="samples do not match"):
        verification.assert_samples_match(first, p0, alpha=_ALPHA, power=0.99)


def test_planted_lost_kv_cache_fails_step1(law_model, law_prompt, law_draws, monkeypatch):
    a, _, p1, _, result1 = _null_results(law_model, law_prompt, law_draws)
    _, q1 = _step_laws(law_model, law_prompt, a, lose_cache=True)
    monkeypatch.setattr(fst, "_cache_of", lambda out: None)  # every decode step starts a new cache
    first, second = _planted_draws(law_model, law_prompt, 2)
    n_null, n_planted = int((law_draws[0] == a).sum()), int((first == a).sum())
    assert _tv(q1, p1) > np.sqrt(n_null / n_planted) * result1.min_detectable_tv
    with pytest.raises(AssertionError, match="samples do not match"):
        verification.assert_samples_match(second[first == a], p1, alpha=_ALPHA, power=0.99)


# ------------------------------------------------------------------------------------------------
# Seeds: the random-number contract
# ------------------------------------------------------------------------------------------------


def test_step_seed_is_splitmix64():
    # Known answers: the first outputs of Vigna's splitmix64.c from the state 0.
    assert [fst.step_seed(0, t) for t in range(3)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    assert len({fst.step_seed(2**64 - 1, t) for t in range(10_000)}) == 10_000


def test_nearby_seeds_share_no_step_seed_within_8e12_steps():
    # The docstring's claim: s and s + k share a step seed only at steps d = k / gamma (mod 2**64) apart.
    inv = pow(0x9E3779B97F4A7C15, -1, 2**64)
    k = np.arange(1, 2**20, dtype=np.uint64)
    with np.errstate(over="ignore"):
        d = k * np.uint64(inv)  # wraps mod 2**64
    gap = np.minimum(d, np.uint64(0) - d)  # |d| as a signed offset
    assert int(gap.min()) > 8.6e12
    # The check can fail: the increment 1 in place of gamma would give offsets d = k.
    assert int(np.minimum(k, np.uint64(0) - k).min()) < 8.6e12


def test_each_step_samples_with_its_step_seed(monkeypatch):
    seeds = []
    real = flashsampling.sample

    def recording(hidden, weight, **kwargs):
        seeds.append(kwargs["seed"])
        return real(hidden, weight, **kwargs)

    monkeypatch.setattr(fst.flashsampling, "sample", recording)
    model = tiny_model("llama")
    ids, mask = left_padded_batch(256)
    fst.generate(model, ids, attention_mask=mask, max_new_tokens=4, temperature=1.0, seed=99, eos_token_id=[])
    assert seeds == [fst.step_seed(99, t) for t in range(4)]
    assert len(set(seeds)) == 4


def test_same_seed_same_continuation_different_seeds_differ():
    model = tiny_model("qwen2")
    ids, mask = left_padded_batch(256)
    run = lambda seed, n=3: fst.generate(
        model, ids, attention_mask=mask, max_new_tokens=n, temperature=1.0, seed=seed, eos_token_id=[]
    )
    a, b, c = run(11), run(11), run(12)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)  # would fail if the seed were ignored
    torch.manual_seed(5)
    d = run(None, 1)
    torch.manual_seed(5)
    assert torch.equal(run(None, 1), d)  # seed=None: reproducible through torch.manual_seed


# ------------------------------------------------------------------------------------------------
# Refused models and bad arguments
# ------------------------------------------------------------------------------------------------


#: A batch of two 3-token prompts for the argument checks.
_IDS = torch.tensor([[3, 4, 5], [6, 7, 8]], device=DEVICE)


def _without_head_weight():
    model = tiny_model("llama")
    model.lm_head = torch.nn.Identity()
    return model


def _wide_head():
    model = tiny_model("llama")
    model.lm_head = torch.nn.Linear(72, 256, bias=False, device=DEVICE)
    return model


class _ScaledHead(torch.nn.Linear):
    """A custom head class: the weight of a Linear, logits scaled by 0.5."""

    def forward(self, x):
        return 0.5 * super().forward(x)


def _with_head(head_factory):
    model = tiny_model("llama")
    model.lm_head = head_factory(model.lm_head)
    return model


def _hooked_head():
    model = tiny_model("llama")
    model.lm_head.register_forward_hook(lambda module, args, out: out / 2)
    return model


def _hooked_model():
    model = tiny_model("llama")
    model.register_forward_pre_hook(lambda module, args: None)
    return model


def _instance_forward():
    model = tiny_model("llama")
    real = model.lm_head.forward
    model.lm_head.forward = lambda x: real(x) * 2
    return model


def _custom_head():
    def make(head):
        custom = _ScaledHead(head.in_features, head.out_features, bias=False)
        custom.weight = head.weight
        return custom

    return _with_head(make)


#: name -> (model factory, error, message the error must contain)
_BAD_MODELS = {
    "not-a-model": (lambda: torch.nn.Linear(4, 4), TypeError, "transformers.PreTrainedModel"),
    "base-model": (lambda: tiny_model("llama").model, ValueError, "no LM-head weight"),
    "head-without-weight": (_without_head_weight, ValueError, "no LM-head weight"),
    "encoder-decoder": (
        lambda: transformers.T5ForConditionalGeneration(
            transformers.T5Config(vocab_size=256, d_model=64, d_kv=16, d_ff=128, num_layers=1, num_heads=4)
        ),
        ValueError,
        "is_encoder_decoder=True",
    ),
    "masked-lm": (
        lambda: transformers.BertForMaskedLM(
            transformers.BertConfig(
                vocab_size=256, hidden_size=64, num_hidden_layers=1, num_attention_heads=4, intermediate_size=128
            )
        ).to(DEVICE),
        ValueError,
        "not a causal language model",
    ),
    "bidirectional": (
        lambda: tiny_model("gemma", use_bidirectional_attention=True),
        ValueError,
        "use_bidirectional_attention=True",
    ),
    "softcap": (lambda: tiny_model("gemma2"), ValueError, "final_logit_softcapping=30.0"),
    "logit_scale": (lambda: tiny_model("cohere"), ValueError, "logit_scale=0.0625"),
    "logits_scaling": (lambda: tiny_model("granite", logits_scaling=8.0), ValueError, "logits_scaling=8.0"),
    "lm_head_multiplier": (
        lambda: tiny_model(
            "falcon_h1",
            lm_head_multiplier=0.5,
            mamba_d_ssm=64,
            mamba_n_heads=4,
            mamba_d_head=16,
            mamba_n_groups=1,
            mamba_d_state=16,
        ),
        ValueError,
        "lm_head_multiplier=0.5",
    ),
    "head-bias": (lambda: tiny_model("phi"), ValueError, "it has a bias"),
    "unsupported-family": (lambda: tiny_model("gpt2", n_embd=64, n_layer=1, n_head=4), ValueError, "model_type='gpt2'"),
    "hidden-size-mismatch": (_wide_head, ValueError, "D=72 columns but config.hidden_size=64"),
    "lm_head-forward-hook": (_hooked_head, ValueError, r"model.get_output_embeddings\(\) has forward hooks"),
    "model-forward-pre-hook": (_hooked_model, ValueError, "the model has forward hooks"),
    "lm_head-forward-on-the-instance": (_instance_forward, ValueError, "replaced on the instance"),
    "custom-head-class": (_custom_head, ValueError, "a _ScaledHead whose forward is not torch.nn.Linear's"),
    "meta-device": (lambda: tiny_model("llama").to("meta"), ValueError, "on the meta device"),
}


@pytest.mark.parametrize("name", list(_BAD_MODELS))
def test_refused_models_raise_naming_the_field(name):
    factory, error, message = _BAD_MODELS[name]
    with pytest.raises(error, match=message):
        fst.generate(factory(), _IDS, max_new_tokens=1, seed=0)


@pytest.fixture(scope="module")
def llama():
    return tiny_model("llama")


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(input_ids=[[3, 4]]), TypeError, "input_ids must be a torch.Tensor"),
        (dict(input_ids=_IDS.float()), TypeError, "input_ids.dtype"),
        (dict(input_ids=_IDS[0]), ValueError, r"shape \(B, L\)"),
        (dict(input_ids=_IDS + 300), ValueError, r"input_ids must lie in \[0, 256\)"),
        (dict(attention_mask=torch.tensor([[1, 1, 0], [1, 1, 1]])), ValueError, r"left-padded.*\[0\]"),
        (dict(attention_mask=torch.tensor([[0, 0, 0], [1, 1, 1]])), ValueError, "left-padded"),
        (dict(attention_mask=torch.tensor([[0, 2, 1], [1, 1, 1]])), ValueError, "only 0 and 1"),
        (dict(attention_mask=torch.ones(2, 4, dtype=torch.int64)), ValueError, "attention_mask has shape"),
        (dict(attention_mask=torch.ones(2, 3)), TypeError, "attention_mask.dtype"),
        (dict(max_new_tokens=-1), ValueError, "max_new_tokens=-1"),
        (dict(max_new_tokens=2.0), TypeError, "max_new_tokens must be an int >= 0, got float 2.0"),
        (dict(seed=-1), ValueError, "seed=-1 is out of range"),
        (dict(seed=2**64), ValueError, "out of range"),
        (dict(seed="7"), TypeError, "seed must be an int"),
        (dict(eos_token_id="2"), TypeError, "eos_token_id must be"),
        (dict(eos_token_id=[2, 2.5]), TypeError, "eos_token_id must be"),
        (dict(pad_token_id=1.5), TypeError, "pad_token_id must be"),
        (dict(temperature=-1.0), ValueError, "temperature=-1.0 is invalid"),
        (dict(temperature=torch.ones(3)), ValueError, r"temperature must be a number or a tensor of shape \[2\]"),
    ],
    ids=lambda v: str(v) if isinstance(v, str) else None,
)
def test_bad_arguments_raise_naming_them(llama, kwargs, error, message):
    kwargs = {k: v.to(DEVICE) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    args = dict(input_ids=_IDS, max_new_tokens=2, temperature=1.0, seed=0) | kwargs
    with pytest.raises(error, match=message):
        fst.generate(llama, args.pop("input_ids"), **args)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(temperature=-1.0), ValueError, "temperature=-1.0 is invalid"),
        (dict(temperature=torch.tensor([1.0, float("nan")])), ValueError, r"temperature\[1\]=nan is invalid"),
        (dict(pad_token_id=-1), ValueError, r"pad_token_id=-1 is out of range.*\[0, 256\)"),
        (dict(pad_token_id=2**70), ValueError, "pad_token_id=1180591620717411303424 is out of range"),
        (dict(pad_token_id=256), ValueError, "pad_token_id=256 is out of range"),
        (dict(eos_token_id=-1), ValueError, "eos_token_id=-1 is out of range"),
        (dict(eos_token_id=[2, 2**70]), ValueError, "eos_token_id=1180591620717411303424 is out of range"),
        (dict(max_new_tokens=True), TypeError, "max_new_tokens must be an int"),
        (dict(seed=[1, 2, 3]), ValueError, r"seed has 3 per-request seeds; one per output row \(2\)"),
        (dict(seed=[1, -1]), ValueError, "seed=-1 is out of range"),
        (dict(top_k=-1), ValueError, "top_k=-1 must be an int >= 0"),
        (dict(top_k=2.5), TypeError, "top_k must be an int"),
        (dict(top_p=0.0), ValueError, r"top_p=0.0 must be finite and in \(0.0, 1.0\]"),
        (dict(top_p=1.5), ValueError, "top_p=1.5"),
        (dict(min_p=-0.1), ValueError, "min_p=-0.1"),
        (dict(repetition_penalty=0.0), ValueError, "repetition_penalty=0.0"),
        (dict(presence_penalty=float("inf")), ValueError, "presence_penalty=inf must be finite"),
        (dict(frequency_penalty="1"), TypeError, "frequency_penalty must be a number"),
        (dict(min_new_tokens=-2), ValueError, "min_new_tokens=-2"),
        (dict(num_return_sequences=0), ValueError, "num_return_sequences=0"),
        (dict(num_return_sequences=2, temperature=0.0), ValueError, "num_return_sequences=2 with greedy"),
        (dict(do_sample="yes"), TypeError, "do_sample must be a bool"),
        (dict(do_sample=False, temperature=0.7), ValueError, "do_sample=False .greedy. contradicts temperature=0.7"),
        (dict(stop_strings="ab"), ValueError, "needs tokenizer="),
        (dict(stop_strings=[""], tokenizer=object()), TypeError, "stop_strings must be a non-empty string"),
        (dict(streamer=object()), TypeError, r"streamer must have put\(\) and end\(\)"),
        (dict(output_logprobs="yes"), TypeError, "output_logprobs must be a bool"),
        (dict(verify_head=1), TypeError, "verify_head must be a bool"),
    ],
    ids=lambda v: str(v) if isinstance(v, str) else None,
)
def test_bad_arguments_raise_even_with_zero_new_tokens(llama, kwargs, error, message):
    # Every argument is checked before the loop, so max_new_tokens=0 (which decodes nothing) accepts no bad value.
    kwargs = {k: v.to(DEVICE) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    args = dict(max_new_tokens=0, temperature=1.0, seed=0) | kwargs
    with pytest.raises(error, match=message):
        fst.generate(llama, _IDS, **args)


def test_zero_new_tokens_returns_the_prompt(llama):
    assert torch.equal(fst.generate(llama, _IDS, max_new_tokens=0, seed=0), _IDS)


# ------------------------------------------------------------------------------------------------
# A family outside the list opts in when its head passes the probe
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model_type, overrides", [("gpt2", dict(n_embd=64, n_layer=2, n_head=4)), ("gpt_neox", {})])
def test_verify_head_opts_a_plain_family_in(model_type, overrides):
    model = tiny_model(model_type, **overrides)
    ids, mask = left_padded_batch(256)
    with pytest.raises(ValueError, match="pass verify_head=True"):
        fst.generate(model, ids, attention_mask=mask, max_new_tokens=1)
    expected = model.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=3, eos_token_id=None,
                              pad_token_id=0)  # fmt: skip
    got = fst.generate(model, ids, attention_mask=mask, max_new_tokens=3, temperature=0.0, eos_token_id=[],
                       verify_head=True)  # fmt: skip
    assert torch.equal(got, expected)


def test_verify_head_refuses_a_head_that_fails_the_probe(monkeypatch):
    # A class whose forward scales the logits (no config field, no hook, no instance forward: only the probe sees it).
    model = tiny_model("gpt2", n_embd=64, n_layer=2, n_head=4)
    real = type(model).forward

    def scaled(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        out.logits = out.logits * 0.9
        return out

    fst.split_lm_head(model, verify_head=True)  # plain: passes
    monkeypatch.setattr(type(model), "forward", scaled)
    with pytest.raises(ValueError, match="not a plain final-norm matmul on a probe input"):
        fst.split_lm_head(model, verify_head=True)


def test_triton_imported_before_flashsampling_is_refused(monkeypatch):
    # What `from transformers import ...` before `import flashsampling` leaves on a CPU machine: triton's helpers
    # are compiled-mode JITFunctions, with which every interpreted kernel fails.
    if not flashsampling.INTERPRET:
        pytest.skip("only the interpreter depends on the import order")
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    def compiled_mode_helper(x):
        return x

    fst._check_triton_mode()
    monkeypatch.setattr(tl.standard, "max", JITFunction(compiled_mode_helper))
    with pytest.raises(ImportError, match="import flashsampling before transformers"):
        fst._check_triton_mode()
