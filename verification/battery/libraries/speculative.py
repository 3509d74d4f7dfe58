"""The audit's speculative sampler: vLLM's rejection step (:mod:`.vllm_rejection`), vectorized.

The checker draws the draft tokens ``x_i ~ q_i`` itself (exact inverse CDF,
:func:`flashsampling.targets.draw_draft_tokens`) and the bonus token from ``p_{K+1}``; vLLM's
``rejection_sample`` receives them with float32 ``p = softmax(z / T)`` and ``q``, one request per
draw, and emits ``K + 1`` slots padded with ``-1``.  The audit checks two laws of the output
(:func:`flashsampling.targets.speculative_chain_law`; the checks are in the audit's runner): the first emitted
token must follow ``p_1`` and the number of emitted tokens ``num_emitted``.

The interpreted Triton kernels cost about 20 ms per request on a CPU, so the draws use
:func:`rejection_sample_vectorized`: the same host code, and the two kernels' bodies as torch
operations over the batch.  ``tests/test_audit.py`` checks that it returns exactly the transcription's
tokens, request by request, from the same random numbers.
"""

from __future__ import annotations

import numpy as np

from flashsampling.targets import draw_draft_tokens

from .cases import SpecCase
from .samplers import AuditSampler, _has
from .vllm_rejection import PLACEHOLDER_TOKEN_ID, Metadata, generate_uniform_probs, rejection_sample

__all__ = ["SPECULATIVE_SAMPLERS", "rejection_sample_vectorized", "speculative_inputs"]

#: Requests per batched call.
_REQUESTS = 8192


def rejection_sample_vectorized(draft_token_ids, num_draft_tokens, max_spec_len, cu_num_draft_tokens, draft_probs,
                                target_probs, bonus_token_ids, sampling_metadata):  # fmt: skip
    """vLLM's ``rejection_sample`` for requests of ``max_spec_len`` drafts each, kernels as torch operations.

    The random numbers are drawn as in the transcription (float64 uniforms, then one float32 exponential
    vector per request); ``sample_recovered_tokens_kernel`` is ``argmax(max(p - q, 0) / exp)`` per
    position, ``rejection_random_sample_kernel`` the acceptance ``q(x) > 0 and p(x) / q(x) >= u`` walked
    left to right.
    """
    import torch

    batch, k = len(num_draft_tokens), max_spec_len
    num_tokens, vocab = target_probs.shape
    uniform = generate_uniform_probs(num_tokens, num_draft_tokens, sampling_metadata.generators,
                                     target_probs.device).reshape(batch, k)  # fmt: skip
    q = torch.empty((batch, vocab), dtype=torch.float32, device=target_probs.device)
    q.exponential_()
    for i, generator in sampling_metadata.generators.items():
        if num_draft_tokens[i] > 0:
            q[i].exponential_(generator=generator)
    tp, dp = target_probs.reshape(batch, k, vocab), draft_probs.reshape(batch, k, vocab)
    recovered = (torch.clamp(tp - dp, min=0) / q[:, None, :]).argmax(dim=-1)
    x = draft_token_ids.reshape(batch, k)
    t_x = tp.gather(2, x[..., None])[..., 0]
    d_x = dp.gather(2, x[..., None])[..., 0]
    accept = (d_x > 0) & ((t_x / d_x).double() >= uniform)
    out = torch.full((batch, k + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.int32, device=target_probs.device)
    alive = torch.ones(batch, dtype=torch.bool, device=target_probs.device)
    for pos in range(k):
        tok = torch.where(accept[:, pos], x[:, pos], recovered[:, pos])
        out[:, pos] = torch.where(alive, tok.to(torch.int32), out[:, pos])
        alive = alive & accept[:, pos]
    out[:, k] = torch.where(alive, bonus_token_ids[:, 0].to(torch.int32), out[:, k])
    return out


def speculative_inputs(case: SpecCase, n: int, seed: int):
    """The arguments of ``rejection_sample`` for ``n`` requests of ``case`` (drafts and bonus drawn exactly)."""
    import torch

    k = case.num_draft_tokens
    rng = np.random.default_rng(seed)
    drafts = draw_draft_tokens(case.draft, n, seed=rng)  # (n, K)
    bonus = draw_draft_tokens(case.target_probs[-1], n, seed=rng)  # (n,)
    p = torch.softmax(torch.tensor(case.logits / case.temperature, dtype=torch.float32), dim=-1)
    qt = torch.tensor(case.draft, dtype=torch.float32)
    return (
        torch.from_numpy(drafts.reshape(-1)).to(torch.int64),
        [k] * n,
        k,
        # int32, as vLLM's spec-decode metadata builds it: compiled, the kernel's ternary refuses int64 (H200 run).
        torch.arange(1, n + 1, dtype=torch.int32) * k,
        qt.repeat(n, 1).contiguous(),
        p[:k].repeat(n, 1).contiguous(),
        torch.from_numpy(bonus.reshape(n, 1)).to(torch.int64),
        Metadata(temperature=torch.full((n,), float(case.temperature))),
    )


def _vllm_draw(case: SpecCase, n: int, seed: int, *, interpreted: bool = False) -> np.ndarray:
    """``(n, K + 1)`` emitted tokens (``-1`` after the first rejection), in batches of requests.

    No request has its own generator, so vLLM draws the uniforms and exponentials from torch's default
    generator: it is seeded per batch inside ``torch.random.fork_rng`` (the caller's state is kept).
    """
    import torch

    fn = rejection_sample if interpreted else rejection_sample_vectorized
    out = []
    for i, s0 in enumerate(range(0, n, _REQUESTS)):
        b = min(_REQUESTS, n - s0)
        args = speculative_inputs(case, b, seed + 7919 * i)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed + 7919 * i)
            out.append(fn(*args).numpy().astype(np.int64))
    return np.concatenate(out)


SPECULATIVE_SAMPLERS: tuple[AuditSampler, ...] = (
    AuditSampler(
        "vllm.rejection_sample",
        "vLLM v1 rejection_sample (vllm/v1/sample/rejection_sampler.py @7f6fc1c, transcribed; kernels as torch "
        "operations, checked equal to the interpreted Triton kernels)",
        _vllm_draw,
        lambda: _has("torch") or _has("triton"),
        lambda: "vLLM @7f6fc1c (transcription) on torch " + __import__("torch").__version__ + " cpu",
        per_draw_vector=True,
        cases={"spec-K2-V1000": 1.0},
    ),
)
