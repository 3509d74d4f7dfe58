"""Check a sampler written anywhere: one call, one calibrated verdict.

:func:`check_sampler` calls a user's sampler under a documented protocol (:mod:`.protocol`), plans the
draws each test needs for a declared deviation or a time budget, runs the whole battery under one Holm
family (:mod:`.plan` lists the calls and the tests) and returns a :class:`SamplerReport`.

=====================  ==========================================================================
module                 job
=====================  ==========================================================================
:mod:`.protocol`       how the sampler is called and its tokens read; the logits it receives
:mod:`.plan`           the calls, their seeds and sizes, the tests and why some do not run
:mod:`.run`            :func:`check_sampler`: pilot, properties, draws, tests
:mod:`.speculative`    the protocol and battery of a speculative (accept/reject) sampler
:mod:`.report`         :class:`SamplerReport`, :class:`CheckedTest`, :class:`Property`
:mod:`.cli`            ``flashsampling-verify check pkg.module:function ...``
:mod:`.examples`       exact and defective samplers of the protocol (the acceptance's)
:mod:`.acceptance`     the acceptance, measured: ``python -m verification.check.acceptance``
=====================  ==========================================================================
"""

from ..planning.check import DEFAULT_TV
from ..runners.check import check_sampler
from ..runners.sampler_report import CheckedTest, Property, SamplerReport

__all__ = ["DEFAULT_TV", "CheckedTest", "Property", "SamplerReport", "check_sampler"]
