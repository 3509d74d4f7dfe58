"""Exact float64 target laws of the samplers people ship: top-k, top-p, min-p, their orders, speculative decoding.

:mod:`flashsampling.reference` defines the plain target ``softmax(z / T)``; this package defines the laws
a serving stack samples from once it truncates or speculates, each a pure function of the logits exactly
as the sampler sees them (``[..., V]``, NumPy or torch, float16/bfloat16/float32/float64) and of its
parameters (a number, or one per row), returning float64 probabilities ``[..., V]``.

==========================================  ====================================================================
function                                    law
==========================================  ====================================================================
:func:`top_k_law`                           the ``k`` highest logits (ties at the cut: all, or by index)
:func:`top_p_law`                           the smallest head of mass ``>= p`` (crossing token, strictness, ties)
:func:`min_p_law`                           ``P(i) >= p max P`` (or ``>``)
:func:`sampling_law`                        temperature + the three filters in a named ``order``
:func:`speculative_step_law`                one accept/reject step: equals the target ``p``
:func:`speculative_chain_law`               K draft tokens and the bonus token (:class:`ChainLaw`)
:func:`residual_law`, :func:`draw_draft_tokens`  what a checker of speculative samplers needs
==========================================  ====================================================================

The definitions, the conventions of well-known implementations (with their sources) and the edge cases
are in ``docs/targets.md``; each module's docstring gives its math.
"""

from .speculative import ChainLaw, draw_draft_tokens, residual_law, speculative_chain_law, speculative_step_law
from .truncation import (
    CROSSINGS,
    DEFAULT_ORDER,
    FILTERS,
    ORDERS,
    TIES,
    min_p_law,
    sampling_law,
    top_k_law,
    top_p_law,
)

__all__ = [
    "CROSSINGS",
    "DEFAULT_ORDER",
    "FILTERS",
    "ORDERS",
    "TIES",
    "ChainLaw",
    "draw_draft_tokens",
    "min_p_law",
    "residual_law",
    "sampling_law",
    "speculative_chain_law",
    "speculative_step_law",
    "top_k_law",
    "top_p_law",
]
