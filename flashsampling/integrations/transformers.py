"""A KV-cached decode loop for Hugging Face causal LMs that samples with the fused sampler.

A decoder-only model of the Llama, Mistral or Qwen2/3 families computes its next-token logits as

    z = final_norm(h_L) @ W.T        (h_L: the last layer's output at the last position, W: [V, D])

and samples from ``softmax(z / T)``.  :func:`generate` runs the model's backbone (``model.get_decoder()``,
which applies ``final_norm``) with its KV cache, takes the last position's hidden state ``x = final_norm(h_L)``
and the LM-head weight ``W = model.get_output_embeddings().weight`` (tied to the input embedding or not), and
draws every token with :func:`flashsampling.sample` ``(x, W)``: the logits ``z`` are never written, and each
token is distributed exactly as ``softmax(z / T)`` of the fp32 product (``proofs/``).  A head that is not that
plain product (soft-capped, scaled or biased logits) is refused with an error naming the config field or
attribute, because the fused sampler would sample from a different law.

Random-number contract
----------------------
``seed`` is an int in ``[0, 2**64)``; ``None`` draws one from torch's default CPU generator (so
``torch.manual_seed`` makes it reproducible).  Step ``t = 0, 1, ...`` (the ``t``-th new token) samples with

    seed_t = splitmix64(seed + (t + 1) * 0x9E3779B97F4A7C15 mod 2**64),

the ``(t + 1)``-th output of the SplitMix64 generator started at ``seed`` (:func:`step_seed`; Steele, Lea and
Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014, and Vigna's ``splitmix64.c``).  The map
``t -> seed_t`` is a bijection of ``t mod 2**64`` (an odd increment, then an invertible mixer), so within one
call no ``(seed_t, row)`` pair repeats across steps, and the noise of a step is independent of the noise of
every other step.  Two seeds ``s`` and ``s + k`` share a step seed only at steps ``d`` apart with
``d = k / 0x9E3779B97F4A7C15 mod 2**64``; for every ``0 < |k| < 2**20`` that ``d`` exceeds ``8.6e12``, so
consecutive seeds never overlap in practice.  Rows are keyed by their position in the batch
(:func:`flashsampling.sample`): the continuation of a row is a function of ``(seed, its row index, the model,
the inputs)`` and of nothing else, so the same call with the same seed returns the same tokens (bit for bit on
one device; across devices up to near-ties of the fp32 logits).  To give requests independent streams, give
them different seeds or different rows of one call.  ``temperature=0`` is greedy (the argmax; the seed does not
matter).
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Sequence

import torch

import flashsampling

try:
    import transformers
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "flashsampling.integrations.transformers needs transformers: pip install 'flashsampling[integrations]'"
    ) from err

__all__ = ["SUPPORTED_MODEL_TYPES", "generate", "split_lm_head", "step_seed"]


_check_triton_mode = flashsampling._device.check_triton_mode  # the import order is handled there
_check_triton_mode()

#: ``config.model_type`` of the families whose causal-LM head was read in transformers' source and checked by
#: ``tests/test_integrations_transformers.py`` to compute ``logits = final_norm(h) @ W.T`` (nothing after the
#: matmul), with the final norm inside the backbone.
SUPPORTED_MODEL_TYPES = frozenset(
    {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "phi3", "olmo2"}
)

#: Config fields that change the head's law, with the value that leaves it a plain matmul and what they do.
#: Gemma 2/3 soft-cap (``c * tanh(z / c)``), Cohere multiplies by ``logit_scale``, Granite divides by
#: ``logits_scaling``, Falcon-H1 multiplies by ``lm_head_multiplier`` (transformers' ``modeling_*.py``).
_HEAD_FIELDS = (
    ("final_logit_softcapping", None, "soft-caps the logits, c * tanh(z / c)"),
    ("logit_scale", 1.0, "multiplies the logits"),
    ("logits_scaling", 1.0, "divides the logits"),
    ("lm_head_multiplier", 1.0, "multiplies the logits"),
)

_GOLDEN_GAMMA = 0x9E3779B97F4A7C15  # 2**64 / golden ratio, odd: SplitMix64's increment
_MASK64 = (1 << 64) - 1


def step_seed(seed: int, step: int) -> int:
    """The seed of decoding step ``step``: the ``(step + 1)``-th output of SplitMix64 started at ``seed``.

    ``x = seed + (step + 1) * 0x9E3779B97F4A7C15 mod 2**64``, then SplitMix64's mixer
    ``x ^= x >> 30; x *= 0xBF58476D1CE4E5B9; x ^= x >> 27; x *= 0x94D049BB133111EB; x ^= x >> 31`` (mod ``2**64``).
    Every step of it is invertible, so distinct steps of one seed get distinct seeds.

    Parameters
    ----------
    seed : int in [0, 2**64)
    step : int >= 0

    Returns
    -------
    int in [0, 2**64)

    Examples
    --------
    >>> hex(step_seed(0, 0))  # splitmix64.c's first output for the state 0
    '0xe220a8397b1dcdaf'
    """
    seed = _check_seed(seed)
    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
        raise ValueError(f"step={step!r} must be an int >= 0")
    x = (seed + (int(step) + 1) * _GOLDEN_GAMMA) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def split_lm_head(model) -> tuple[torch.nn.Module, torch.Tensor]:
    """The backbone and LM-head weight of a causal LM whose logits are ``final_norm(h) @ W.T``, after checks.

    The backbone (``model.get_decoder()``) maps token ids to ``x = final_norm(h_L)`` of shape ``[B, L, D]``;
    ``W = model.get_output_embeddings().weight`` has shape ``[V, D]``, and the model's logits are ``x @ W.T``.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A decoder-only causal LM of a family in :data:`SUPPORTED_MODEL_TYPES`.

    Returns
    -------
    (torch.nn.Module, torch.Tensor)
        The backbone and ``W``.

    Raises
    ------
    TypeError
        ``model`` is not a ``transformers.PreTrainedModel``.
    ValueError
        An encoder-decoder or non-causal model; no LM-head weight; a head that is not a plain matmul (the config
        field ``final_logit_softcapping``, ``logit_scale``, ``logits_scaling`` or ``lm_head_multiplier``, or a
        head bias); a family not in :data:`SUPPORTED_MODEL_TYPES`; a head whose width differs from
        ``config.hidden_size``.
    """
    if not isinstance(model, transformers.PreTrainedModel):
        raise TypeError(f"model must be a transformers.PreTrainedModel, got {type(model).__name__}")
    name = type(model).__name__
    config = model.config
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    if getattr(config, "is_encoder_decoder", False):
        raise ValueError(
            f"{name} is an encoder-decoder model (config.is_encoder_decoder=True); generate needs a "
            "decoder-only causal LM"
        )
    head = model.get_output_embeddings()
    weight = getattr(head, "weight", None)
    if not isinstance(weight, torch.Tensor):
        raise ValueError(
            f"{name} has no LM-head weight (model.get_output_embeddings() is "
            f"{type(head).__name__}); load the ...ForCausalLM class, not the base model"
        )
    for cfg in {id(config): config, id(text_config): text_config}.values():
        if getattr(cfg, "use_bidirectional_attention", False):
            raise ValueError(f"{name} is not causal (config.use_bidirectional_attention=True)")
    if not model.can_generate():
        raise ValueError(f"{name} is not a causal language model (model.can_generate() is False)")
    for module_name, module in model.named_modules():
        if getattr(module, "is_causal", True) is False:
            raise ValueError(f"{name} is not causal: module {module_name!r} has is_causal=False")
    for field, neutral, effect in _HEAD_FIELDS:
        for cfg in {id(config): config, id(text_config): text_config}.values():
            value = getattr(cfg, field, None)
            if value is not None and value != neutral:
                raise ValueError(
                    f"{name}'s head is not a plain matmul: config.{field}={value} {effect}, so softmax(x @ W.T / T) "
                    "is not the model's law; flashsampling samples only heads with logits = final_norm(h) @ W.T"
                )
    if getattr(head, "bias", None) is not None:
        raise ValueError(
            f"{name}'s head is not a plain matmul: it has a bias (model.get_output_embeddings().bias); "
            "flashsampling samples only heads with logits = final_norm(h) @ W.T"
        )
    model_type = getattr(text_config, "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"{name} has config.model_type={model_type!r}, not a family whose head is checked to be "
            f"final_norm(h) @ W.T; supported: {', '.join(sorted(SUPPORTED_MODEL_TYPES))}"
        )
    if weight.dim() != 2:
        raise ValueError(f"{name}'s LM-head weight has shape {tuple(weight.shape)}; expected [V, D]")
    hidden_size = getattr(text_config, "hidden_size", None)
    if weight.shape[1] != hidden_size:
        raise ValueError(
            f"{name}'s LM-head weight has D={weight.shape[1]} columns but config.hidden_size="
            f"{hidden_size}; the head must take the backbone's hidden state"
        )
    backbone = model.get_decoder() if hasattr(model, "get_decoder") else getattr(model, "model", None)
    if not isinstance(backbone, torch.nn.Module) or backbone is model:
        raise ValueError(f"{name} has no separate backbone (model.get_decoder() returned {type(backbone).__name__})")
    return backbone, weight


@torch.no_grad()
def generate(
    model,
    input_ids: torch.Tensor,
    *,
    max_new_tokens: int,
    temperature: float | torch.Tensor = 1.0,
    seed: int | None = None,
    attention_mask: torch.Tensor | None = None,
    eos_token_id: int | Sequence[int] | None = None,
    pad_token_id: int | None = None,
) -> torch.Tensor:
    """Continue ``input_ids`` by up to ``max_new_tokens`` tokens, each drawn exactly from ``softmax(x @ W.T / T)``.

    Each step runs the backbone on the new token with the KV cache, takes ``x = final_norm(h_L)`` at the last
    position and samples ``flashsampling.sample(x, W, temperature=T, seed=step_seed(seed, t))`` (module docstring:
    the random-number contract).  The logits are never materialized.  ``temperature=0`` is greedy and returns
    what ``model.generate(do_sample=False)`` returns (up to exact fp32 ties).

    Left padding: ``attention_mask`` marks the padding with 0s before each row's prompt; position ids are
    ``cumsum(attention_mask) - 1`` (0 on padding), then one more per step, as transformers' ``generate`` computes
    them.  End of sequence: a row that draws a token of ``eos_token_id`` keeps it and is finished; its later
    tokens are ``pad_token_id``; the loop stops when every row is finished (as ``model.generate`` does).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM of a family in :data:`SUPPORTED_MODEL_TYPES` (checked by :func:`split_lm_head`).
    input_ids : torch.Tensor, int64 (or int32), shape (B, L), on the model's device
    max_new_tokens : int >= 0
    temperature : float >= 0 or torch.Tensor of shape (B,)
        As in :func:`flashsampling.sample`; ``0`` is greedy.
    seed : int in [0, 2**64) or None
    attention_mask : torch.Tensor of 0/1, shape (B, L), or None
        Left padding only (each row: zeros, then at least one 1).  ``None``: no padding.
    eos_token_id : int, sequence of int, or None
        ``None``: ``model.generation_config.eos_token_id``; ``[]``: no end-of-sequence token.
    pad_token_id : int or None
        Written after a row's end of sequence.  ``None``: ``model.generation_config.pad_token_id``, else the
        first end-of-sequence id (transformers' fallback).

    Returns
    -------
    torch.Tensor, int64, shape (B, L + N) with N <= max_new_tokens
        The prompt followed by the new tokens (N < max_new_tokens when every row finished early).

    Raises
    ------
    TypeError, ValueError
        An unsupported model (:func:`split_lm_head`), or a bad argument, named in the message.

    Examples
    --------
    >>> tokens = generate(model, input_ids, max_new_tokens=16, temperature=0.8, seed=1234)  # doctest: +SKIP
    """
    backbone, weight = split_lm_head(model)
    input_ids, mask = _check_inputs(input_ids, attention_mask, weight.device, model.get_input_embeddings())
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens={max_new_tokens!r} must be an int >= 0")
    seed = _check_seed(seed) if seed is not None else _draw_seed()
    eos, pad = _eos_and_pad(model, eos_token_id, pad_token_id)
    if max_new_tokens == 0:
        return input_ids.clone()

    cache_kw = "cache" if "cache" in inspect.signature(backbone.forward).parameters else "past_key_values"
    positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)
    out = backbone(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True)
    cache = _cache_of(out)
    finished = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
    new_tokens = []
    for t in range(max_new_tokens):
        hidden = out.last_hidden_state[:, -1, :]
        tokens = flashsampling.sample(hidden, weight, temperature=temperature, seed=step_seed(seed, t))[:, 0]
        if eos is not None:
            tokens = torch.where(finished, torch.full_like(tokens, pad), tokens)
            finished |= torch.isin(tokens, eos)
        new_tokens.append(tokens)
        if t + 1 == max_new_tokens or (eos is not None and bool(finished.all())):
            break
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=-1)
        positions = positions[:, -1:] + 1
        out = backbone(
            input_ids=tokens[:, None], attention_mask=mask, position_ids=positions, use_cache=True, **{cache_kw: cache}
        )
        cache = _cache_of(out)
    return torch.cat([input_ids, torch.stack(new_tokens, dim=1)], dim=1)


def _cache_of(out):
    """The KV cache of a backbone's output (``cache`` in transformers 5, ``past_key_values`` before)."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be an int in [0, 2**64) or None, got {type(seed).__name__}")
    if not 0 <= int(seed) < 2**64:
        raise ValueError(f"seed={seed} is out of range; it must be in [0, 2**64)")
    return int(seed)


def _draw_seed() -> int:
    """A 64-bit seed from torch's default CPU generator (two 32-bit draws, as :func:`flashsampling.sample`)."""
    hi, lo = torch.randint(0, 2**32, (2,), dtype=torch.int64).tolist()
    return (hi << 32) | lo


def _check_inputs(input_ids, attention_mask, device: torch.device, embedding) -> tuple[torch.Tensor, torch.Tensor]:
    """``input_ids`` as int64 and the 0/1 int64 mask, after shape, dtype, device, range and padding checks."""
    if not isinstance(input_ids, torch.Tensor):
        raise TypeError(f"input_ids must be a torch.Tensor, got {type(input_ids).__name__}")
    if input_ids.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"input_ids.dtype={input_ids.dtype} must be torch.int64 or torch.int32")
    if input_ids.dim() != 2 or input_ids.shape[0] < 1 or input_ids.shape[1] < 1:
        raise ValueError(f"input_ids must have shape (B, L) with B, L >= 1, got {tuple(input_ids.shape)}")
    if input_ids.device != device:
        raise ValueError(f"input_ids.device={input_ids.device} differs from the model's device {device}")
    num_embeddings = getattr(embedding, "num_embeddings", None)
    if num_embeddings is not None and (int(input_ids.min()) < 0 or int(input_ids.max()) >= num_embeddings):
        raise ValueError(
            f"input_ids must lie in [0, {num_embeddings}) (the input embedding's rows), got values in "
            f"[{int(input_ids.min())}, {int(input_ids.max())}]"
        )
    input_ids = input_ids.long()
    if attention_mask is None:
        return input_ids, torch.ones_like(input_ids)
    if not isinstance(attention_mask, torch.Tensor):
        raise TypeError(f"attention_mask must be a torch.Tensor or None, got {type(attention_mask).__name__}")
    if attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"attention_mask has shape {tuple(attention_mask.shape)}; input_ids has {tuple(input_ids.shape)}"
        )
    if attention_mask.device != device:
        raise ValueError(f"attention_mask.device={attention_mask.device} differs from the model's device {device}")
    if attention_mask.is_floating_point() or attention_mask.is_complex():
        raise TypeError(f"attention_mask.dtype={attention_mask.dtype} must be an integer or bool dtype")
    mask = attention_mask.long()
    if bool(((mask != 0) & (mask != 1)).any()):
        raise ValueError("attention_mask must hold only 0 and 1")
    if bool((mask[:, -1] == 0).any()) or bool((mask[:, 1:] < mask[:, :-1]).any()):
        rows = torch.nonzero((mask[:, -1] == 0) | (mask[:, 1:] < mask[:, :-1]).any(dim=1)).flatten().tolist()
        raise ValueError(
            f"attention_mask must be left-padded (each row: 0s, then 1s up to the last position); "
            f"row(s) {rows[:8]} are not"
        )
    return input_ids, mask


def _eos_and_pad(model, eos_token_id, pad_token_id) -> tuple[torch.Tensor | None, int | None]:
    """The end-of-sequence ids as a tensor on the model's device (``None``: no EOS) and the pad id."""
    gen = getattr(model, "generation_config", None)
    if eos_token_id is None:
        eos_token_id = getattr(gen, "eos_token_id", None)
    if eos_token_id is None:
        eos_ids = []
    elif isinstance(eos_token_id, numbers.Integral) and not isinstance(eos_token_id, bool):
        eos_ids = [int(eos_token_id)]
    elif isinstance(eos_token_id, torch.Tensor) and not eos_token_id.is_floating_point():
        eos_ids = [int(e) for e in eos_token_id.flatten().tolist()]
    elif isinstance(eos_token_id, Sequence) and not isinstance(eos_token_id, str):
        if not all(isinstance(e, numbers.Integral) and not isinstance(e, bool) for e in eos_token_id):
            raise TypeError(f"eos_token_id must be an int, a sequence of ints or None, got {eos_token_id!r}")
        eos_ids = [int(e) for e in eos_token_id]
    else:
        raise TypeError(f"eos_token_id must be an int, a sequence of ints or None, got {type(eos_token_id).__name__}")
    if pad_token_id is None:
        pad_token_id = getattr(gen, "pad_token_id", None)
    if pad_token_id is None and eos_ids:
        pad_token_id = eos_ids[0]
    if pad_token_id is not None and (isinstance(pad_token_id, bool) or not isinstance(pad_token_id, numbers.Integral)):
        raise TypeError(f"pad_token_id must be an int or None, got {type(pad_token_id).__name__}")
    if not eos_ids:
        return None, pad_token_id
    device = model.get_output_embeddings().weight.device
    return torch.tensor(eos_ids, dtype=torch.int64, device=device), int(pad_token_id)
