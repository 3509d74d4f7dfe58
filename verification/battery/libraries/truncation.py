"""The audit's truncation samplers: transformers' logits warpers and the JAX idioms for top-k and top-p.

=============================  =================================================================
name                           call
=============================  =================================================================
``transformers.warpers``       ``TemperatureLogitsWarper``, ``TopKLogitsWarper``,
                               ``TopPLogitsWarper``, ``MinPLogitsWarper`` (the order ``generate``
                               builds them in), then ``torch.multinomial(softmax(scores), 1)`` per
                               row, as ``generate``'s sampling step; float32 scores on the CPU
``jax.top_k``                  ``vals, idx = lax.top_k(z / T, k)``, then
                               ``idx[jax.random.categorical(key, vals)]``
``jax.top_p``                  softmax, descending sort, ``cumsum``; the cut at the first position
                               whose cumulative mass reaches ``p``; ``where(z < cut, -inf, z)``,
                               then ``jax.random.categorical`` (the idiom of Gemma's
                               ``TopPSampling``, ``docs/targets.md``)
=============================  =================================================================

Each runs on the cases whose target is its library's convention (``docs/targets.md``, the table of
conventions): transformers keeps every token tied at the k-th logit, keeps the token that crosses
``p`` (strictly: ``M_i < p``), and keeps ``P(i) >= min_p max P``; ``lax.top_k`` keeps exactly ``k``,
lower index first.  The samplers are the libraries' own code, installed from the registry
(``pip install -e .[integrations,audit]``); only the glue that calls them is written here.
"""

from __future__ import annotations

import numpy as np

from ..cases import Case
from .samplers import AuditSampler, _batched, _has, _version

__all__ = ["TARGET_SAMPLERS", "hf_processors"]


def hf_processors(case: Case):
    """transformers' warpers for ``case`` (temperature and its target's filters) in ``generate``'s order."""
    from transformers.generation.logits_process import (
        LogitsProcessorList,
        MinPLogitsWarper,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    t = case.target
    steps = {s.name: s for s in (t.steps if t is not None and t.name == "chain" else (t,) if t is not None else ())}
    procs = []
    if case.temperature != 1.0:
        procs.append(TemperatureLogitsWarper(case.temperature))
    if "top_k" in steps:
        procs.append(TopKLogitsWarper(top_k=steps["top_k"].param("k")))
    if "top_p" in steps:
        procs.append(TopPLogitsWarper(top_p=steps["top_p"].param("p")))
    if "min_p" in steps:
        procs.append(MinPLogitsWarper(min_p=steps["min_p"].param("p")))
    return LogitsProcessorList(procs)


def _hf_warpers(case: Case, n: int, seed: int) -> np.ndarray:
    import torch

    procs = hf_processors(case)
    z = torch.tensor(case.logits, dtype=torch.float32)
    g = torch.Generator().manual_seed(seed)

    def rows(b: int):
        scores = procs(torch.zeros((b, 1), dtype=torch.long), z.expand(b, -1).clone())
        probs = torch.nn.functional.softmax(scores, dim=-1)
        return torch.multinomial(probs, num_samples=1, generator=g).squeeze(1)

    return _batched(n, z.numel(), rows)


def _jax_batches(n: int, draw) -> np.ndarray:
    out, rows = [], max(1, min(n, 1 << 16))
    for i, s0 in enumerate(range(0, n, rows)):
        out.append(np.asarray(draw(i, min(rows, n - s0))))
    return np.concatenate(out).astype(np.int64)


def _jax_top_k(case: Case, n: int, seed: int) -> np.ndarray:
    import jax
    import jax.numpy as jnp

    k = case.target.param("k")
    z = jnp.asarray((case.logits / case.temperature).astype(np.float32))
    vals, idx = jax.lax.top_k(z, k)
    key = jax.random.PRNGKey(seed)
    return _jax_batches(n, lambda i, b: idx[jax.random.categorical(jax.random.fold_in(key, i), vals, shape=(b,))])


def _jax_top_p(case: Case, n: int, seed: int) -> np.ndarray:
    import jax
    import jax.numpy as jnp

    p = case.target.param("p")
    logits = jnp.asarray((case.logits / case.temperature).astype(np.float32))
    probs = jax.nn.softmax(logits)
    sorted_probs = jnp.sort(probs)[::-1]
    cumulative = jnp.cumsum(sorted_probs)
    cut_index = jnp.sum(cumulative < p)  # the first position whose cumulative mass reaches p
    cut_logit = jnp.sort(logits)[::-1][cut_index]
    masked = jnp.where(logits < cut_logit, -jnp.inf, logits)
    key = jax.random.PRNGKey(seed)
    return _jax_batches(n, lambda i, b: jax.random.categorical(jax.random.fold_in(key, i), masked, shape=(b,)))


def _transformers_available() -> str | None:
    return _has("torch") or _has("transformers")


TARGET_SAMPLERS: tuple[AuditSampler, ...] = (
    AuditSampler(
        "transformers.warpers",
        "LogitsProcessorList([TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper, MinPLogitsWarper]) "
        "then torch.multinomial(softmax(scores), 1)",
        _hf_warpers,
        _transformers_available,
        _version("transformers"),
        {},
        cases={
            "chain-V1000-T0.7": 0.25,
            "topp0.9-V1000-T0.7": 0.25,
            "topk20-ties-V1000": 0.25,
            "minp-boundary-V1000": 0.25,
        },  # fmt: skip
    ),
    AuditSampler(
        "jax.top_k",
        "vals, idx = jax.lax.top_k(z / T, k); idx[jax.random.categorical(key, vals, shape=(n,))]",
        _jax_top_k,
        lambda: _has("jax"),
        _version("jax"),
        per_draw_vector=False,
        cases={"topk20-ties-V1000-low-index": 1.0},
    ),
    AuditSampler(
        "jax.top_p",
        "sort, cumsum, cut at the first cumulative >= p, where(z < cut, -inf, z), jax.random.categorical",
        _jax_top_p,
        lambda: _has("jax"),
        _version("jax"),
        cases={"topp0.9-V1000-T0.7": 1.0},
    ),
)
