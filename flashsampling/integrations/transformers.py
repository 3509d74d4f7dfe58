"""A KV-cached decode loop for Hugging Face causal LMs that samples with the fused sampler.

A decoder-only model of the Llama, Mistral or Qwen2/3 families computes its next-token logits as

    z = final_norm(h_L) @ W.T        (h_L: the last layer's output at the last position, W: [V, D])

and samples from ``softmax(z / T)``.  :func:`generate` runs the model's backbone (``model.get_decoder()``,
which applies ``final_norm``) with its KV cache, takes the last position's hidden state ``x = final_norm(h_L)``
and the LM-head weight ``W = model.get_output_embeddings().weight`` (tied to the input embedding or not), and
draws every token with :func:`flashsampling.sample` ``(x, W)``: the logits ``z`` are never written, and each
token is distributed exactly as ``softmax(z / T)`` of the fp32 product (``proofs/``).  A head that is not that
plain product (soft-capped, scaled or biased logits, hooks, a custom head) is refused with an error naming what
(:mod:`._head`), because the fused sampler would sample from a different law.

Processors.  ``top_k``, ``top_p``, ``min_p``, ``repetition_penalty``, ``presence_penalty``, ``frequency_penalty``,
``min_new_tokens``, end-of-sequence ids and ``stop_strings`` define each step's law exactly (:mod:`._decode_step`:
the float64 law of :mod:`flashsampling.targets` on the penalized logits); a step that needs only what the kernel
fuses runs fused, any other computes its logits once and samples them with :func:`flashsampling.sample_from_logits`.
Arguments left ``None`` come from ``model.generation_config`` (:mod:`._options`).

Random-number contract
----------------------
``seed`` is an int in ``[0, 2**64)``, a sequence of such ints (one per output row: per-request seeds), or ``None``
(one int drawn from torch's default CPU generator, so ``torch.manual_seed`` makes it reproducible).  Step
``t = 0, 1, ...`` (the ``t``-th new token) samples with

    seed_t = splitmix64(seed + (t + 1) * 0x9E3779B97F4A7C15 mod 2**64),

the ``(t + 1)``-th output of the SplitMix64 generator started at ``seed`` (:func:`step_seed`; Steele, Lea and
Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014, and Vigna's ``splitmix64.c``).  The map
``t -> seed_t`` is a bijection of ``t mod 2**64`` (an odd increment, then an invertible mixer), so within one
call no ``(seed_t, row)`` pair repeats across steps, and the noise of a step is independent of the noise of
every other step.  Two seeds ``s`` and ``s + k`` share a step seed only at steps ``d`` apart with
``d = k / 0x9E3779B97F4A7C15 mod 2**64``; for every ``0 < |k| < 2**20`` that ``d`` exceeds ``8.6e12``, so
consecutive seeds never overlap in practice.

* An int seed keys rows by their position in the batch (:func:`flashsampling.sample`): the continuation of a row
  is a function of ``(seed, its row index, the model, the inputs)``, so the same call with the same seed returns
  the same tokens (bit for bit on one device; across devices up to near-ties of the fp32 logits).
* Per-request seeds ``[s_0, s_1, ...]``: row ``b``'s step seed ``step_seed(s_b, t)`` is computed on the device
  (:func:`~._decode_step.step_seeds`, the same map in int64 arithmetic) and passed as a ``[B]`` seed tensor, which
  keys the row by its own seed alone (:func:`flashsampling.sample`'s per-request seeds).  A request's tokens are
  then a function of ``(s_b, t, the model, its prompt)``: the same in any batch, at any slot, beside any other
  requests (up to the fp32 differences a batch makes in the backbone's hidden state, i.e. near-ties).  Give
  distinct requests distinct seeds.

``temperature=0`` is greedy (the argmax; the seed does not matter).
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import torch

import flashsampling
from flashsampling._validate import inverse_temperature
from flashsampling.kernels.flags import raise_on_kernel_flags

try:
    import transformers  # noqa: F401  (the extra: _head needs it)
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "flashsampling.integrations.transformers needs transformers: pip install 'flashsampling[integrations]'"
    ) from err

__all__ = ["SUPPORTED_MODEL_TYPES", "GenerateOutput", "generate", "split_lm_head", "step_seed"]


_check_triton_mode = flashsampling._device.check_triton_mode  # the import order is handled there
_check_triton_mode()

from ._decode_step import TokenCounts, draw, step_seeds  # noqa: E402
from ._head import SUPPORTED_MODEL_TYPES, split_lm_head  # noqa: E402
from ._options import DecodeOptions, resolve_options  # noqa: E402

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


@dataclass(frozen=True)
class GenerateOutput:
    """What :func:`generate` returns with ``output_logprobs=True``.

    Attributes
    ----------
    sequences : torch.Tensor, int64, shape (B * num_return_sequences, L + N)
        The prompts followed by the new tokens (as :func:`generate` returns them otherwise).
    logprobs : torch.Tensor, float32, shape (B * num_return_sequences, N)
        Each new token's log-probability under the law it was drawn from (its step's processed law: penalties,
        temperature and truncations applied; a greedy row's at ``T = 1``, :mod:`flashsampling.logprobs`); 0 where a
        finished row was padded.
    """

    sequences: torch.Tensor
    logprobs: torch.Tensor


@torch.no_grad()
def generate(
    model,
    input_ids: torch.Tensor,
    *,
    max_new_tokens: int | None = None,
    temperature: float | torch.Tensor | None = None,
    seed: int | Sequence[int] | None = None,
    attention_mask: torch.Tensor | None = None,
    eos_token_id: int | Sequence[int] | None = None,
    pad_token_id: int | None = None,
    do_sample: bool | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
    repetition_penalty: float | None = None,
    presence_penalty: float | None = None,
    frequency_penalty: float | None = None,
    min_new_tokens: int | None = None,
    num_return_sequences: int | None = None,
    stop_strings: str | Sequence[str] | None = None,
    tokenizer=None,
    streamer=None,
    output_logprobs: bool = False,
    verify_head: bool = False,
) -> torch.Tensor | GenerateOutput:
    """Continue ``input_ids`` by up to ``max_new_tokens`` tokens, each drawn exactly from its step's law.

    Each step runs the backbone on the new token with the KV cache, takes ``x = final_norm(h_L)`` at the last
    position and draws from the law of ``z = x @ W.T`` after the processors (module docstring): with none but the
    temperature (and ``top_k`` with an int seed) ``flashsampling.sample(x, W, temperature=T, seed=seed_t)`` never
    writes the logits.  ``temperature=0`` is greedy: the argmax of the kernel's fp32 logits ``x @ W.T`` (after the
    penalties), ties broken at random; ``model.generate(do_sample=False)`` takes the argmax of the logits its own
    head computes (bf16-rounded in a bf16 model), so the two agree except where those differ
    (``docs/integration.md`` measures how often).

    Left padding: ``attention_mask`` marks the padding with 0s before each row's prompt; position ids are
    ``cumsum(attention_mask) - 1`` (0 on padding), then one more per step, as transformers' ``generate`` computes
    them.  End of sequence: a row that draws a token of ``eos_token_id``, or whose new text contains one of
    ``stop_strings``, keeps that token and is finished; its later tokens are ``pad_token_id``; the loop stops when
    every row is finished (as ``model.generate`` does).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM of a family in :data:`SUPPORTED_MODEL_TYPES`, or another with ``verify_head=True``
        (:func:`split_lm_head`).
    input_ids : torch.Tensor, int64 (or int32), shape (B, L), on the model's device
    max_new_tokens : int >= 0, or None for ``model.generation_config.max_new_tokens``
    temperature : float >= 0, torch.Tensor of shape (B,), or None
        As in :func:`flashsampling.sample`; ``0`` is greedy.  ``None``: ``do_sample`` and the generation config
        decide (``_options``: sampling at the config's temperature, else greedy).
    seed : int in [0, 2**64), sequence of ints (one per output row), or None
        The random-number contract (module docstring).
    attention_mask : torch.Tensor of 0/1, shape (B, L), or None
        Left padding only (each row: zeros, then at least one 1).  ``None``: no padding.
    eos_token_id : int, sequence of int, or None
        ``None``: ``model.generation_config.eos_token_id``; ``[]``: no end-of-sequence token.
    pad_token_id : int in [0, vocabulary) or None
        Written after a row's end of sequence.  ``None``: ``model.generation_config.pad_token_id``, else the
        first end-of-sequence id (transformers' fallback).
    do_sample : bool or None
        Greedy (``False``) or sampling when ``temperature`` is not given.
    top_k : int >= 0, top_p : float in (0, 1], min_p : float in [0, 1]
        Truncations of the sampled rows' law (``0``, ``1``, ``0`` disable them), in transformers' order (after the
        temperature: top-k, top-p, min-p); ties at a cut ranked by lower index.
    repetition_penalty : float > 0, presence_penalty, frequency_penalty : float
        Penalties on the logits before the temperature, as vLLM applies them (``_decode_step``).
    min_new_tokens : int >= 0
        The end-of-sequence ids are masked until this many tokens are out.
    num_return_sequences : int >= 1
        Sequences per prompt (rows ``b * n ... b * n + n - 1`` continue prompt ``b``); sampling only.
    stop_strings : str or sequence of str, with ``tokenizer``
        A row whose decoded new text contains one of them is finished (the token that completes it is kept).
    tokenizer : object with ``decode(ids) -> str``
        Needed by ``stop_strings``.
    streamer : object with ``put`` and ``end`` (a ``transformers.TextStreamer``)
        Receives the prompts, then each step's tokens ``[rows]`` (CPU), then ``end()``, as ``model.generate`` does.
    output_logprobs : bool
        Return a :class:`GenerateOutput` with the tokens' log-probabilities.
    verify_head : bool
        Check the head on a probe input and accept a family outside :data:`SUPPORTED_MODEL_TYPES`.

    Returns
    -------
    torch.Tensor, int64, shape (B * num_return_sequences, L + N) with N <= max_new_tokens
        The prompts followed by the new tokens (N < max_new_tokens when every row finished early); with
        ``output_logprobs``, a :class:`GenerateOutput`.

    Raises
    ------
    TypeError, ValueError
        An unsupported model (:func:`split_lm_head`), an unsupported generation-config field, or a bad argument,
        named in the message; all before any decoding.

    Examples
    --------
    >>> tokens = generate(model, input_ids, max_new_tokens=16, temperature=0.8, seed=1234)  # doctest: +SKIP
    """
    backbone, weight = split_lm_head(model, verify_head=verify_head)
    embedding = model.get_input_embeddings()
    input_ids, mask = _check_inputs(input_ids, attention_mask, weight.device, embedding)
    opts = resolve_options(
        model, max_new_tokens=max_new_tokens, temperature=temperature, do_sample=do_sample, top_k=top_k, top_p=top_p,
        min_p=min_p, repetition_penalty=repetition_penalty, presence_penalty=presence_penalty,
        frequency_penalty=frequency_penalty, min_new_tokens=min_new_tokens, num_return_sequences=num_return_sequences,
        stop_strings=stop_strings, tokenizer=tokenizer, streamer=streamer, output_logprobs=output_logprobs,
    )  # fmt: skip
    n = opts.num_return_sequences
    temperature = _row_temperature(opts.temperature, input_ids.shape[0], n, weight.device)
    if n > 1:
        input_ids, mask = input_ids.repeat_interleave(n, dim=0), mask.repeat_interleave(n, dim=0)
    rows = input_ids.shape[0]
    seeds = _request_seeds(seed, rows, weight.device)
    vocab = getattr(embedding, "num_embeddings", weight.shape[0])
    eos, pad = _eos_and_pad(model, eos_token_id, pad_token_id, vocab)
    if opts.stop_strings and pad is None:
        raise ValueError("stop_strings need a pad_token_id (or an eos_token_id) to pad the rows they finish")
    if opts.streamer is not None:
        opts.streamer.put(input_ids.cpu())
    new_tokens, new_logprobs = [], []
    if opts.max_new_tokens > 0:
        _decode(backbone, weight, input_ids, mask, opts, temperature, seeds, eos, pad, new_tokens, new_logprobs)
    if opts.streamer is not None:
        opts.streamer.end()
    sequences = torch.cat([input_ids, *(t[:, None] for t in new_tokens)], dim=1)
    if not opts.output_logprobs:
        return sequences
    logprobs = torch.stack(new_logprobs, dim=1) if new_logprobs else sequences.new_zeros((rows, 0), dtype=torch.float32)
    return GenerateOutput(sequences, logprobs)


def _decode(backbone, weight, input_ids, mask, opts: DecodeOptions, temperature, seeds, eos, pad, new_tokens,
            new_logprobs) -> None:  # fmt: skip
    """The decode loop: appends each step's tokens (and log-probabilities) to ``new_tokens`` (``new_logprobs``)."""
    cache_kw = "cache" if "cache" in inspect.signature(backbone.forward).parameters else "past_key_values"
    positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)
    out = backbone(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True)
    cache = _cache_of(out)
    rows = input_ids.shape[0]
    finished = torch.zeros(rows, dtype=torch.bool, device=input_ids.device)
    ends = eos is not None or bool(opts.stop_strings)
    counts = TokenCounts(input_ids, mask, weight.shape[0]) if opts.law.penalties else None
    texts = _StopStrings(opts.stop_strings, opts.tokenizer, rows) if opts.stop_strings else None
    for t in range(opts.max_new_tokens):
        hidden = out.last_hidden_state[:, -1, :]
        seed_t = step_seed(seeds, t) if isinstance(seeds, int) else step_seeds(seeds, t)
        masked = eos if eos is not None and t < opts.min_new_tokens else None
        tokens, logprobs = draw(hidden, weight, temperature=temperature, seed=seed_t, law=opts.law, counts=counts,
                                masked_ids=masked, return_logprobs=opts.output_logprobs)  # fmt: skip
        if ends:
            tokens = torch.where(finished, torch.full_like(tokens, pad), tokens)
            if logprobs is not None:
                logprobs = torch.where(finished, torch.zeros_like(logprobs), logprobs)
        if counts is not None:
            counts.add(tokens, ~finished)
        if ends:
            done = finished.clone()
            if eos is not None:
                finished |= torch.isin(tokens, eos)
            if texts is not None:
                finished |= texts.update(tokens, done)
        new_tokens.append(tokens)
        if logprobs is not None:
            new_logprobs.append(logprobs)
        if opts.streamer is not None:
            opts.streamer.put(tokens.cpu())
        if t + 1 == opts.max_new_tokens or (ends and bool(finished.all())):
            break
        mask = torch.cat([mask, mask.new_ones((rows, 1))], dim=-1)
        positions = positions[:, -1:] + 1
        out = backbone(
            input_ids=tokens[:, None], attention_mask=mask, position_ids=positions, use_cache=True, **{cache_kw: cache}
        )
        cache = _cache_of(out)


class _StopStrings:
    """Each row's new text, decoded after every step: a row whose text contains a stop string is finished."""

    def __init__(self, stops: tuple[str, ...], tokenizer, rows: int) -> None:
        self.stops, self.tokenizer = stops, tokenizer
        self.ids: list[list[int]] = [[] for _ in range(rows)]

    def update(self, tokens: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """Append ``tokens`` to the rows not ``done``; returns which of them now contain a stop string."""
        hit = torch.zeros_like(done)
        for row, (token, was_done) in enumerate(zip(tokens.tolist(), done.tolist())):
            if was_done:
                continue
            self.ids[row].append(token)
            text = self.tokenizer.decode(self.ids[row])
            hit[row] = any(s in text for s in self.stops)
        return hit


def _row_temperature(temperature, prompts: int, n: int, device: torch.device):
    """The temperature for the ``prompts * n`` output rows, its values checked now (a tensor's on the host: one
    synchronization before decoding, so that a bad value is refused even with ``max_new_tokens=0``)."""
    _, flags, _ = inverse_temperature(temperature, prompts, device)
    if flags is not None:
        raise_on_kernel_flags(flags, "logits", temperature=temperature)
    if isinstance(temperature, torch.Tensor):
        temperature = temperature.reshape(-1).expand(prompts) if temperature.dim() == 0 else temperature
        return temperature.repeat_interleave(n) if n > 1 else temperature
    return float(temperature)


def _request_seeds(seed, rows: int, device: torch.device) -> int | torch.Tensor:
    """An int seed (drawn when ``None``), or per-request seeds as an int64 ``[rows]`` tensor on ``device``."""
    if seed is None:
        return _draw_seed()
    if isinstance(seed, (Sequence, torch.Tensor)) and not isinstance(seed, (str, bytes)):
        values = seed.tolist() if isinstance(seed, torch.Tensor) else list(seed)
        if len(values) != rows:
            raise ValueError(f"seed has {len(values)} per-request seeds; one per output row ({rows}) is needed")
        checked = [_check_seed(s) for s in values]
        return torch.tensor([s - 2**64 if s >= 2**63 else s for s in checked], dtype=torch.int64, device=device)
    return _check_seed(seed)


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


def _eos_and_pad(model, eos_token_id, pad_token_id, vocab: int) -> tuple[torch.Tensor | None, int | None]:
    """The end-of-sequence ids as a tensor on the model's device (``None``: no EOS) and the pad id.

    EOS ids are ints in ``[0, 2**63)`` (an id outside the vocabulary is never drawn: allowed); the pad id, which is
    written into the output and fed back to the model after a row's end, must be a row of the input embedding,
    ``[0, vocab)``."""
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
    bad = [e for e in eos_ids if not 0 <= e < 2**63]
    if bad:
        raise ValueError(f"eos_token_id={bad[0]} is out of range; token ids are >= 0 (and < 2**63)")
    if pad_token_id is None:
        pad_token_id = getattr(gen, "pad_token_id", None)
    if pad_token_id is None and eos_ids:
        pad_token_id = eos_ids[0]
    if pad_token_id is not None:
        if isinstance(pad_token_id, bool) or not isinstance(pad_token_id, numbers.Integral):
            raise TypeError(f"pad_token_id must be an int or None, got {type(pad_token_id).__name__}")
        if not 0 <= int(pad_token_id) < vocab:
            raise ValueError(
                f"pad_token_id={int(pad_token_id)} is out of range: finished rows are padded with it and fed back to "
                f"the model, so it must be a row of the input embedding, in [0, {vocab})"
            )
        pad_token_id = int(pad_token_id)
    if not eos_ids:
        return None, pad_token_id
    device = model.get_output_embeddings().weight.device
    return torch.tensor(eos_ids, dtype=torch.int64, device=device), pad_token_id
