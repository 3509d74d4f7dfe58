"""Biased samplers modelled on real failures: the bugs the suite must catch, and the draws it needs.

Each mutant is a sampler with one defect, a one-line description of its mechanism, the logits case
where the defect shows, its exact law on that case (so the number of draws needed to catch it can
be *planned*, not guessed), and the test that catches it first.

=====================  ====================================================================
module                 job
=====================  ====================================================================
:mod:`.samplers`       the biased samplers and the exact machinery that simulates them fast
:mod:`.laws`           each mutant's exact law on its case (the input of the planning)
:mod:`.truncation`     top-k / top-p / min-p samplers with one convention switch, and their laws
:mod:`.speculative`    one speculative accept/reject step with a wrong residual, and its law
:mod:`.catalogue`      the cases, the :class:`Mutant` records, ``MUTANTS`` and ``CONTROLS``
:mod:`.runner`         plan each mutant's n, draw, run the suite; the main job's ``--mutants``
                       section; ``python -m verification.mutants --out docs/mutants.md``
=====================  ====================================================================

``tests/test_mutants.py`` checks each sampler against its own law, then that the suite catches it
at the planned ``n`` and that the exact sampler passes the same checks.
"""

from ..battery.mutants.catalogue import CONTROLS, MUTANTS, Mutant, catalogue, mutant, mutant_cases
from .runner import (
    EXACT_SEED_OFFSET,
    budgets,
    catalogue_table,
    check_mutant,
    exact_sampler,
    format_table,
    joint_of,
    law_of,
    plan,
    planned_n,
    run_mutants,
)

__all__ = [
    "CONTROLS",
    "EXACT_SEED_OFFSET",
    "MUTANTS",
    "Mutant",
    "budgets",
    "catalogue",
    "catalogue_table",
    "check_mutant",
    "exact_sampler",
    "format_table",
    "joint_of",
    "law_of",
    "mutant",
    "mutant_cases",
    "plan",
    "planned_n",
    "run_mutants",
]
