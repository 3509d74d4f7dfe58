"""Deprecated path: ``verification.check`` was a package; ``check_sampler`` is :mod:`verification.runners.check`
(and ``verification.check_sampler``), its report :mod:`verification.runners.sampler_report`, its plan
:mod:`verification.planning.check`, the protocol :mod:`verification.battery.protocol`."""

from ._deprecated import forward
from .battery import examples, protocol
from .planning import check as plan
from .planning import request
from .runners import acceptance, sampler_report, speculative
from .runners import check as run

__getattr__ = forward(
    __name__,
    sampler_report,
    request,
    plan,
    run,
    protocol=protocol,
    plan=plan,
    run=run,
    speculative=speculative,
    report=sampler_report,
    examples=examples,
    acceptance=acceptance,
)
