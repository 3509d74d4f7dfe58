"""Deprecated path: ``verification.mutants`` was a package; the mutants (samplers, laws, catalogue) are
:mod:`verification.battery.mutants`, their runner :mod:`verification.runners.mutants`
(``python -m verification.runners.mutants``).  The former submodules are attributes under their old names."""

from ._deprecated import forward, moved
from .battery.mutants import catalogue, laws, samplers, speculative, truncation  # noqa: F401 (former submodules)
from .runners import mutants as runner

__getattr__ = forward(__name__, catalogue, runner)

if __name__ == "__main__":
    moved("verification.mutants", runner.__name__, run=True)
    raise SystemExit(runner.main())
