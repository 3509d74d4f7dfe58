"""Audit of samplers written elsewhere: the suite run on code no one here wrote.

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
:mod:`.speculative`        its vectorized twin, and the checks of the first token and the count
:mod:`.runner`             budget, one Holm family per sampler, rows, ``python -m verification.audit``
=========================  ======================================================================

Each sampler is the library's own code, installed from the registry (``pip install -e .[audit]``:
transformers, JAX on the CPU); one that cannot run here is skipped with the reason.  Results,
mechanisms of the failures and the targeted experiments behind them: ``docs/audit.md``.
"""

from ..battery.libraries.cases import AUDIT_CASES, TARGET_CASES, SpecCase, audit_cases, spec_cases
from ..battery.libraries.samplers import AuditSampler
from .runner import DEFAULT_BUDGET_S, MAX_DRAWS, MIN_DRAWS, SAMPLERS, format_audit, main, run_audit

__all__ = [
    "AUDIT_CASES",
    "DEFAULT_BUDGET_S",
    "MAX_DRAWS",
    "MIN_DRAWS",
    "SAMPLERS",
    "TARGET_CASES",
    "AuditSampler",
    "SpecCase",
    "audit_cases",
    "format_audit",
    "main",
    "run_audit",
    "spec_cases",
]
