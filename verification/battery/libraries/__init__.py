"""Samplers written elsewhere, as their libraries ship them, and the cases the audit runs them on.

=========================  ======================================================================
module                     job
=========================  ======================================================================
:mod:`.cases`              the cases: softmax (far tails, a mask, ties), truncation targets, a
                           speculative step
:mod:`.samplers`           :class:`AuditSampler`; torch (``multinomial``, ``Categorical``, the
                           exponential race), NumPy's ``choice``, ``jax.random.categorical``,
                           FlashInfer
:mod:`.truncation`         transformers' logits warpers; ``lax.top_k`` and the top-p idiom in JAX
:mod:`.vllm_rejection`     vLLM's rejection sampler, a labelled line-for-line transcription
:mod:`.speculative`        its vectorized twin
=========================  ======================================================================

Each sampler is the library's own code, installed from the registry (``pip install -e .[audit]``:
transformers, JAX on the CPU); one that cannot run here is skipped with the reason.  The audit itself
(budget, one Holm family per sampler, the rows) is :mod:`verification.runners.audit`; results,
mechanisms of the failures and the targeted experiments behind them: ``docs/audit.md``.
"""
