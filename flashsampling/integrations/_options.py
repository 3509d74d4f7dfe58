"""The arguments of :func:`~flashsampling.integrations.transformers.generate`, resolved against the model's
``generation_config`` and checked.

An argument left ``None`` takes the generation config's value (transformers' own rule); a value the caller passes
overrides it.  Sampling or greedy: a ``temperature`` passed is used as it is (0 greedy); otherwise
``do_sample`` (the argument, else the config's, else ``False``) decides, with the config's ``temperature`` (else 1)
when it samples, as ``model.generate`` does.  The truncations (``top_k``, ``top_p``, ``min_p``) apply to sampled rows;
values that disable them (``top_k = 0``, ``top_p = 1``, ``min_p = 0``, a penalty of 1 or 0) are the same as ``None``.
A config field that would change the law in a way :func:`generate` does not implement (:data:`UNSUPPORTED_CONFIG`:
beam search, typical-p, epsilon/eta cutoffs, n-gram blocking, bad words, forced or suppressed tokens, ...) is
refused by name (``ValueError``) rather than silently ignored; so is anything else out of range.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from flashsampling._validate import check_flag

from ._decode_step import StepLaw

#: Generation-config fields :func:`generate` does not implement, with the values that leave the law unchanged.
UNSUPPORTED_CONFIG = (
    ("num_beams", (1,), "beam search"),
    ("num_beam_groups", (1,), "group beam search"),
    ("penalty_alpha", (None,), "contrastive search"),
    ("diversity_penalty", (0.0,), "diverse beam search"),
    ("typical_p", (1.0,), "typical sampling"),
    ("epsilon_cutoff", (0.0,), "epsilon sampling"),
    ("eta_cutoff", (0.0,), "eta sampling"),
    ("top_h", (None,), "top-H sampling"),
    ("no_repeat_ngram_size", (0,), "n-gram blocking"),
    ("encoder_no_repeat_ngram_size", (0,), "n-gram blocking"),
    ("encoder_repetition_penalty", (1.0,), "the encoder repetition penalty"),
    ("bad_words_ids", (None,), "bad words"),
    ("force_words_ids", (None,), "forced words"),
    ("sequence_bias", (None,), "sequence bias"),
    ("suppress_tokens", (None,), "suppressed tokens"),
    ("begin_suppress_tokens", (None,), "suppressed tokens"),
    ("forced_bos_token_id", (None,), "a forced first token"),
    ("forced_eos_token_id", (None,), "a forced last token"),
    ("exponential_decay_length_penalty", (None,), "a length penalty on EOS"),
    ("guidance_scale", (None, 1.0), "classifier-free guidance"),
    ("watermarking_config", (None,), "watermarking"),
    ("prompt_lookup_num_tokens", (None,), "prompt lookup decoding"),
)


@dataclass(frozen=True)
class DecodeOptions:
    """The resolved, checked options of one :func:`generate` call (temperature per prompt, before expansion)."""

    max_new_tokens: int
    temperature: float | torch.Tensor
    law: StepLaw
    min_new_tokens: int
    num_return_sequences: int
    stop_strings: tuple[str, ...]
    tokenizer: object
    streamer: object
    output_logprobs: bool


def resolve_options(model, *, max_new_tokens, temperature, do_sample, top_k, top_p, min_p, repetition_penalty,
                    presence_penalty, frequency_penalty, min_new_tokens, num_return_sequences, stop_strings, tokenizer,
                    streamer, output_logprobs) -> DecodeOptions:  # fmt: skip
    """Every option of :func:`generate` from its argument or the generation config (module docstring)."""
    gen = getattr(model, "generation_config", None)
    for field, neutral, what in UNSUPPORTED_CONFIG:
        value = getattr(gen, field, None)
        if value is not None and not any(value == n for n in neutral if n is not None):
            raise ValueError(
                f"model.generation_config.{field}={value!r} asks for {what}, which flashsampling's generate does not "
                f"implement; set it to {neutral[-1]!r} (or None) to decode without it"
            )

    def pick(name, value):
        """``(value, label)``: the argument, else the config's field, with how a message names it."""
        if value is not None:
            return value, name
        return getattr(gen, name, None), f"model.generation_config.{name}"

    value, label = pick("max_new_tokens", max_new_tokens)
    if value is None:
        raise ValueError("max_new_tokens is required (model.generation_config.max_new_tokens is None)")
    max_new = _int(label, value, low=0)
    sample_flag, label = pick("do_sample", do_sample)
    sample_flag = False if sample_flag is None else check_flag(label, sample_flag)
    if temperature is not None:
        if do_sample is False and not (_is_number(temperature) and temperature == 0):
            raise ValueError(
                f"do_sample=False (greedy) contradicts temperature={_shown(temperature)}: pass one of them"
            )
    elif sample_flag:
        temperature = getattr(gen, "temperature", None)
        temperature = 1.0 if temperature is None else temperature
    else:
        temperature = 0.0
    greedy = _is_number(temperature) and temperature == 0

    k, label = pick("top_k", top_k)
    k = None if k is None else _int(label, k, low=0)
    p, label = pick("top_p", top_p)
    p = None if p is None else _real(label, p, low=0.0, high=1.0, low_open=True)
    mp, label = pick("min_p", min_p)
    mp = None if mp is None else _real(label, mp, low=0.0, high=1.0)
    r, label = pick("repetition_penalty", repetition_penalty)
    r = None if r is None else _real(label, r, low=0.0, low_open=True)
    presence, label = pick("presence_penalty", presence_penalty)
    presence = None if presence is None else _real(label, presence)
    frequency, label = pick("frequency_penalty", frequency_penalty)
    frequency = None if frequency is None else _real(label, frequency)
    law = StepLaw(
        top_k=None if greedy or not k else k,
        top_p=None if greedy or p is None or p == 1.0 else p,
        min_p=None if greedy or not mp else mp,
        repetition_penalty=None if r is None or r == 1.0 else r,
        presence_penalty=presence or None,
        frequency_penalty=frequency or None,
    )

    value, label = pick("min_new_tokens", min_new_tokens)
    min_new = 0 if value is None else _int(label, value, low=0)
    value, label = pick("num_return_sequences", num_return_sequences)
    n = 1 if value is None else _int(label, value, low=1)
    if n > 1 and greedy:
        raise ValueError(f"{label}={n} with greedy decoding would return {n} copies of one sequence; sample instead")
    stops, label = pick("stop_strings", stop_strings)
    stops = _stop_strings(label, stops)
    if stops and not callable(getattr(tokenizer, "decode", None)):
        raise ValueError(f"{label}={list(stops)!r} needs tokenizer= (an object with .decode) to read the text")
    if streamer is not None and not all(callable(getattr(streamer, m, None)) for m in ("put", "end")):
        raise TypeError(f"streamer must have put() and end() methods (transformers' BaseStreamer), got "
                        f"{type(streamer).__name__}")  # fmt: skip
    return DecodeOptions(max_new, temperature, law, min_new, n, stops, tokenizer, streamer,
                         check_flag("output_logprobs", output_logprobs))  # fmt: skip


def _is_number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_))


def _shown(x) -> str:
    return f"tensor of shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else repr(x)


def _int(name: str, value, *, low: int) -> int:
    """An int (not a bool) ``>= low``: ``TypeError`` for another type, ``ValueError`` below ``low``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int >= {low}, got {type(value).__name__} {value!r}")
    if value < low:
        raise ValueError(f"{name}={value!r} must be an int >= {low}")
    return int(value)


def _real(name: str, value, *, low=None, high=None, low_open: bool = False) -> float:
    """A finite real number in ``[low, high]`` (``(low, high]`` with ``low_open``)."""
    if not _is_number(value):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    v = float(value)
    below = low is not None and (v <= low if low_open else v < low)
    if not math.isfinite(v) or below or (high is not None and v > high):
        span = (
            f"{'(' if low_open else '['}{low}, {high if high is not None else 'inf'}{']' if high is not None else ')'}"
        )
        raise ValueError(f"{name}={value!r} must be finite" + (f" and in {span}" if low is not None else ""))
    return v


def _stop_strings(name: str, value) -> tuple[str, ...]:
    if value is None:
        return ()
    items = (value,) if isinstance(value, str) else value
    if not isinstance(items, Sequence) or not all(isinstance(s, str) and s for s in items):
        raise TypeError(f"{name} must be a non-empty string or a sequence of them, got {value!r}")
    return tuple(items)
