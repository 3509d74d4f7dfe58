"""Deprecated path: ``verification.mutants`` was a package; the mutants (samplers, laws, catalogue) are
:mod:`verification.battery.mutants`, their runner :mod:`verification.runners.mutants`
(``python -m verification.runners.mutants``)."""

from ._deprecated import forward, moved
from .battery.mutants import catalogue, laws, samplers, speculative, truncation
from .runners import mutants as runner

__getattr__ = forward(
    __name__,
    catalogue,
    runner,
    catalogue=catalogue,
    laws=laws,
    samplers=samplers,
    speculative=speculative,
    truncation=truncation,
    runner=runner,
)

if __name__ == "__main__":
    moved("verification.mutants", runner.__name__, run=True)
    raise SystemExit(runner.main())
