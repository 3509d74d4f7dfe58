"""One decode step of :func:`~flashsampling.integrations.transformers.generate`: its law and the sampler call.

A step draws row ``b``'s token from the float64 law of :mod:`flashsampling.targets` on the step's processed logits::

    z   = x @ W.T                                   fp32 (the kernel's logits; never written on the fused path)
    z'  = penalties(z)                              repetition, then frequency and presence (below)
    z'' = z' with the end-of-sequence ids at -inf   while fewer than min_new_tokens tokens are out
    P   = sampling_law(z'', T, top_k, top_p, min_p, order="transformers", top_k_ties="low_index",
                       top_p_ties="low_index")      (targets' defaults otherwise: crossing "keep", strict top-p,
                                                     non-strict min-p); a greedy row (T = 0) takes argmax z''

Penalties, as vLLM applies them (``vllm/model_executor/layers/utils.py``, ``apply_penalties``; the repetition
penalty of Keskar et al., "CTRL", 2019, Sec. 4.1, as transformers' ``RepetitionPenaltyLogitsProcessor``; presence and
frequency as the OpenAI API defines them): with ``c_i`` the times token ``i`` was generated so far in the row and
``C`` the tokens of its prompt (padding excluded) or generated so far,

    z_i <- z_i / r if z_i > 0 else z_i * r          for i in C            (repetition_penalty r > 0)
    z_i <- z_i - f c_i - p [c_i > 0]                                      (frequency f, presence p)

Two paths, one law.  The *fused* path calls :func:`flashsampling.sample` on the hidden state and the LM-head weight
(the logits never written) when nothing needs them: no penalty, no masked end-of-sequence id, and only truncations
the kernel fuses (:data:`FUSED_TRUNCATIONS`: ``top_k`` and ``min_p``, with an int seed and no log-probabilities).
Otherwise the *exact* path computes ``z`` once (an fp32 matmul in column chunks), applies the penalties, masks what the
truncations remove (:func:`kept_mask`, whose decisions equal :func:`flashsampling.targets.sampling_law`'s) and draws
with :func:`flashsampling.sample_from_logits`: the same noise (seed, row, index, sample), so the seed contract holds
on both paths, and a Gumbel-max over the kept set is an exact draw from its renormalized law.  ``sample`` also fuses
``top_p``, but keeps the tokens tied at the crossing together, where this module ranks them by index: a truncation
joins :data:`FUSED_TRUNCATIONS` only when its conventions are the ones above.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

import flashsampling
from flashsampling.targets import sampling_law

#: The truncations :func:`flashsampling.sample` fuses with this module's conventions: a step whose truncations are all
#: here (and that needs no penalty or end-of-sequence mask) runs on the fused kernel.  ``top_p`` stays on the exact
#: path: the fused kernel keeps the tokens tied at the crossing together (``flashsampling.targets``' default
#: ``ties="all"``), where this module ranks them by index.
FUSED_TRUNCATIONS = frozenset({"top_k", "min_p"})
#: Truncations that the fused kernels cannot run with per-request seeds or log-probabilities (their kernels take an
#: int seed and reduce no log-sum-exp yet).
_INT_SEED_ONLY = frozenset({"top_k", "min_p"})

_U = 2.0**-53  # float64 unit roundoff
_TINY = 2.0**-1074
_GOLDEN_GAMMA = 0x9E3779B97F4A7C15
_MIX1, _MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def _signed(x: int) -> int:
    return x - 2**64 if x >= 2**63 else x


def step_seeds(seeds: torch.Tensor, step: int | torch.Tensor) -> torch.Tensor:
    """:func:`~flashsampling.integrations.transformers.step_seed` of every request seed, on the seeds' device.

    ``seeds`` int64 ``[B]`` (two's complement: the 64-bit seeds); ``step`` an int or a 0-dim int64 tensor on the
    device (a captured decode step keeps its counter there).  The same SplitMix64 map in wrapping int64 arithmetic
    (logical right shifts by masking), so the loop never reads a seed on the host and stays graph-capturable."""
    if isinstance(step, torch.Tensor):
        x = seeds + (step + 1) * _signed(_GOLDEN_GAMMA)  # int64 products wrap mod 2**64
    else:
        x = seeds + _signed((int(step) + 1) * _GOLDEN_GAMMA % 2**64)
    x = (x ^ ((x >> 30) & ((1 << 34) - 1))) * _signed(_MIX1)
    x = (x ^ ((x >> 27) & ((1 << 37) - 1))) * _signed(_MIX2)
    return x ^ ((x >> 31) & ((1 << 33) - 1))


@dataclass(frozen=True)
class StepLaw:
    """What a step applies besides the temperature: truncations (``None`` when off) and penalties (``None`` off)."""

    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None

    @property
    def truncations(self) -> dict:
        return {k: v for k, v in (("top_k", self.top_k), ("top_p", self.top_p), ("min_p", self.min_p)) if v is not None}

    @property
    def penalties(self) -> bool:
        return any(v is not None for v in (self.repetition_penalty, self.presence_penalty, self.frequency_penalty))


class TokenCounts:
    """Per row, the prompt's tokens (padding excluded) and the generated tokens' counts, ``[B, V]`` on the device:
    what the penalties read.  Allocated only when a penalty is on."""

    def __init__(self, input_ids: torch.Tensor, mask: torch.Tensor, vocab_size: int) -> None:
        B = input_ids.shape[0]
        self.in_prompt = torch.zeros(B, vocab_size, dtype=torch.bool, device=input_ids.device)
        ids = input_ids.clamp(0, vocab_size - 1)
        self.in_prompt.scatter_(1, ids, (mask != 0) & (input_ids < vocab_size))
        self.generated = torch.zeros(B, vocab_size, dtype=torch.int32, device=input_ids.device)

    def add(self, tokens: torch.Tensor, active: torch.Tensor) -> None:
        """Count ``tokens [B]`` in the rows still ``active`` (a finished row's padding is not generated text)."""
        self.generated.scatter_add_(1, tokens[:, None], active[:, None].to(torch.int32))


def apply_penalties(z: torch.Tensor, law: StepLaw, counts: TokenCounts) -> torch.Tensor:
    """The penalties of the module docstring on fp32 logits ``z [B, V]`` (a new tensor)."""
    if law.repetition_penalty is not None:
        seen = counts.in_prompt | (counts.generated > 0)
        r = law.repetition_penalty
        z = torch.where(seen, torch.where(z > 0, z / r, z * r), z)
    if law.frequency_penalty is not None:
        z = z - law.frequency_penalty * counts.generated.to(z.dtype)
    if law.presence_penalty is not None:
        z = z - law.presence_penalty * (counts.generated > 0).to(z.dtype)
    return z


def fp32_logits(hidden: torch.Tensor, weight: torch.Tensor, chunk_elements: int = 1 << 24) -> torch.Tensor:
    """``hidden @ weight.T`` in fp32 (``[B, V]``), the weight upcast ``chunk_elements`` at a time (products of
    bf16/fp16 values are exact in fp32, as in the kernel)."""
    B, D = hidden.shape
    V = weight.shape[0]
    out = torch.empty(B, V, dtype=torch.float32, device=hidden.device)
    h = hidden.float()
    step = max(1, chunk_elements // max(D, 1))
    for v0 in range(0, V, step):
        out[:, v0 : v0 + step] = h @ weight[v0 : v0 + step].float().T
    return out


def kept_mask(z: torch.Tensor, temperature: torch.Tensor, law: StepLaw) -> torch.Tensor:
    """Which tokens the truncations keep, ``[B, V]`` bool, for sampled rows (``temperature [B] > 0``): exactly the
    support decisions of :func:`flashsampling.targets.sampling_law` with the module docstring's conventions.

    Computed in float64 torch on the device; a row where a top-p or min-p decision is within the float64 error bound
    of its threshold (the targets' bound plus an ulp for ``torch.exp`` against ``numpy.exp``) is re-decided by
    :func:`~flashsampling.targets.sampling_law` itself on the CPU (its exact rational arithmetic; a kept token
    whose weight underflows float64 there, probability below ``e**-745``, is dropped)."""
    z64 = z.double()
    B, V = z64.shape
    kept = torch.isfinite(z64)
    masked = torch.where(kept, z64, -torch.inf)
    m = masked.amax(dim=1, keepdim=True)
    is_max = z64 == m
    t = temperature.double()[:, None]
    unsure = torch.zeros(B, dtype=torch.bool, device=z.device)
    if law.top_k is not None:
        kept &= _ranks(masked) < law.top_k
    if law.top_p is not None:
        order = torch.sort(torch.where(kept, z64, -torch.inf), dim=1, descending=True, stable=True).indices
        ws = torch.where(kept, torch.exp((z64 - m) / t), 0.0).gather(1, order)
        cum = ws.cumsum(dim=1)
        before = torch.cat([torch.zeros_like(cum[:, :1]), cum[:, :-1]], dim=1)
        total = cum[:, -1:]
        threshold = law.top_p * total
        keep = before < threshold
        keep[:, 0] = True  # the first-ranked token always stays
        bound = (3.0 * (V + 1) + 8.0) * _U * (before + total) + (V + 1) * _TINY
        unsure |= (((before - threshold).abs() <= bound) & kept.gather(1, order)).any(dim=1)
        kept &= torch.zeros_like(kept).scatter_(1, order, keep)
    if law.min_p is not None:
        w = torch.exp((z64 - m) / t)
        unsure |= (((w - law.min_p).abs() <= 4 * _U * w.clamp(min=law.min_p)) & kept).any(dim=1)
        kept &= (w >= law.min_p) | is_max
    for row in torch.nonzero(unsure).flatten().tolist():
        kept[row] = _exact_row(z[row], float(temperature[row]), law).to(z.device)
    return kept


def _ranks(masked: torch.Tensor) -> torch.Tensor:
    """Each token's position in the ranking by logit, highest first, ties by lower index (``-inf`` last)."""
    order = torch.sort(masked, dim=1, descending=True, stable=True).indices
    ranks = torch.empty_like(order)
    return ranks.scatter_(1, order, torch.arange(masked.shape[1], device=masked.device).expand_as(order))


def _exact_row(z_row: torch.Tensor, temperature: float, law: StepLaw) -> torch.Tensor:
    """One row's kept set from :func:`flashsampling.targets.sampling_law` (float64 NumPy, exact decisions)."""
    probs = sampling_law(
        z_row.detach().cpu().numpy()[None].astype(np.float64), temperature, **law.truncations,
        order="transformers", top_k_ties="low_index", top_p_ties="low_index",
    )  # fmt: skip
    return torch.from_numpy(probs[0] > 0)


def fused_step(law: StepLaw, seed, return_logprobs: bool, vocab_size: int) -> bool:
    """Whether a step runs on the fused kernel (module docstring): no penalty, no end-of-sequence mask (checked by
    the caller), and truncations that ``flashsampling.sample`` fuses for this seed and output (a ``top_k`` in
    ``(MAX_TOP_K, V)`` is beyond the fused kernel's)."""
    names = set(law.truncations)
    if law.penalties or not names <= FUSED_TRUNCATIONS:
        return False
    if law.top_k is not None and flashsampling.MAX_TOP_K < law.top_k < vocab_size:
        return False
    return not (names & _INT_SEED_ONLY) or (isinstance(seed, int) and not return_logprobs)


def draw(
    hidden,
    weight,
    *,
    temperature,
    seed,
    law: StepLaw,
    counts: TokenCounts | None,
    masked_ids: torch.Tensor | None,
    return_logprobs: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One step's tokens ``[B]`` (and their log-probabilities ``[B]`` under the step's law, or ``None``).

    ``temperature``: a number or a ``[B]`` tensor (0 greedy); ``seed``: the step's int seed or ``[B]`` int64 row
    seeds; ``masked_ids``: end-of-sequence ids set to ``-inf`` this step (``min_new_tokens``), or ``None``."""
    if masked_ids is None and fused_step(law, seed, return_logprobs, weight.shape[0]):
        out = flashsampling.sample(hidden, weight, temperature=temperature, seed=seed, **law.truncations,
                                   return_logprobs=return_logprobs)  # fmt: skip
        return (out[0][:, 0], out[1][:, 0]) if return_logprobs else (out[:, 0], None)
    z = fp32_logits(hidden, weight)
    if counts is not None:
        z = apply_penalties(z, law, counts)
    if masked_ids is not None:
        z = z.index_fill(1, masked_ids, -torch.inf)
    if law.truncations:
        rows_t = torch.as_tensor(temperature, dtype=torch.float64, device=z.device).expand(z.shape[0])
        sampled = rows_t > 0
        mask = kept_mask(z, torch.where(sampled, rows_t, 1.0), law)
        z = torch.where(mask | ~sampled[:, None], z, -torch.inf)  # a greedy row takes argmax z (no truncation)
    out = flashsampling.sample_from_logits(z, temperature=temperature, seed=seed, return_logprobs=return_logprobs)
    return (out[0][:, 0], out[1][:, 0]) if return_logprobs else (out[:, 0], None)
