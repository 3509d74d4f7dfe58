"""Deprecated path: ``verification.check`` was a package; ``check_sampler`` is :mod:`verification.runners.check`
(and ``verification.check_sampler``), its report :mod:`verification.runners.sampler_report`, its request and plan
:mod:`verification.planning.request` and :mod:`verification.planning.check`, the protocol
:mod:`verification.battery.protocol`.  The former submodules are attributes under their old names."""

from ._deprecated import forward
from .battery import examples, protocol  # noqa: F401 (former submodules)
from .planning import check as plan
from .planning import request
from .runners import acceptance, sampler_report, speculative  # noqa: F401 (former submodules)
from .runners import check as run
from .runners import sampler_report as report  # noqa: F401 (a former submodule)

__getattr__ = forward(__name__, sampler_report, request, plan, run)
