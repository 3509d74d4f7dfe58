"""Deprecated path: ``verification.audit`` was a package; the samplers written elsewhere and their cases are
:mod:`verification.battery.libraries`, the audit itself :mod:`verification.runners.audit`
(``python -m verification.runners.audit``).  The former submodules are attributes under their old names."""

from ._deprecated import forward, moved
from .battery.libraries import cases, samplers, speculative, truncation, vllm_rejection  # noqa: F401 (submodules)
from .runners import audit as runner

__getattr__ = forward(__name__, cases, samplers, runner)

if __name__ == "__main__":
    moved("verification.audit", runner.__name__, run=True)
    raise SystemExit(runner.main())
