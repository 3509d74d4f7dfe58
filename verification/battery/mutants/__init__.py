"""Biased samplers modelled on real failures: the bugs the suite must catch, each with its exact law.

Each mutant is a sampler with one defect, a one-line description of its mechanism, the logits case
where the defect shows, and its exact law on that case (so the number of draws needed to catch it can
be *planned*, not guessed: :mod:`verification.runners.mutants`).

=====================  ====================================================================
module                 job
=====================  ====================================================================
:mod:`.samplers`       the biased samplers and the exact machinery that simulates them fast
:mod:`.laws`           each mutant's exact law on its case (the input of the planning)
:mod:`.truncation`     top-k / top-p / min-p samplers with one convention switch, and their laws
:mod:`.speculative`    one speculative accept/reject step with a wrong residual, and its law
:mod:`.catalogue`      the cases, the :class:`Mutant` records, ``MUTANTS`` and ``CONTROLS``
=====================  ====================================================================

``tests/test_mutants.py`` checks each sampler against its own law, then that the suite catches it
at the planned ``n`` and that the exact sampler passes the same checks.
"""
