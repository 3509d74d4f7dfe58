"""Before the first draw: which tests a run faces, how many draws each needs, at which level.

``verification.planning`` was one module before this package; its power machinery and the chi-square's planning
twins now live in :mod:`verification.stats.power` and :mod:`verification.stats.gof`, and are still found here under
their old names, with a ``DeprecationWarning``.
"""

import warnings

from ..stats import gof, power


def __getattr__(name: str):
    for home in (gof, power):
        if not name.startswith("__") and hasattr(home, name):
            warnings.warn(
                f"verification.planning.{name} is deprecated: import it from {home.__name__}",
                DeprecationWarning,
                stacklevel=2,
            )
            value = globals()[name] = getattr(home, name)  # warned once
            return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
