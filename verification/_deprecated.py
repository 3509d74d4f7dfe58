"""The deprecated module paths of verification: each old module forwards its names to where they live now.

``verification.check``, ``verification.mutants`` and ``verification.audit`` were packages whose parts now sit in
different layers (the mutants' samplers in :mod:`verification.battery.mutants`, their runner in
:mod:`verification.runners.mutants`); each is now a module whose attributes are found in its new homes, with a
``DeprecationWarning`` naming the new path.  Moved modules whose content stayed whole (``verification.targets``,
``verification.calibration``) are the new module itself.
"""

from __future__ import annotations

import warnings
from types import ModuleType


def forward(old: str, *homes: ModuleType):
    """A module ``__getattr__`` for the deprecated module ``old``: a name is looked up in ``homes`` (the one that
    defines it first, else the first that has it), with a ``DeprecationWarning`` that says where it lives now."""

    def __getattr__(name: str):
        found = [h for h in homes if not name.startswith("__") and hasattr(h, name)]
        if not found:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        # the module that defines it, where one of them does (the others import it)
        home = next((h for h in found if getattr(getattr(h, name), "__module__", None) == h.__name__), found[0])
        warnings.warn(f"{old}.{name} is deprecated: use {home.__name__}.{name}", DeprecationWarning, stacklevel=2)
        return getattr(home, name)

    return __getattr__


def moved(old: str, new: str, *, run: bool = False) -> None:
    """Warn that the module ``old`` is now ``new`` (``run``: that ``python -m old`` is now ``python -m new``)."""
    if run:
        warnings.warn(f"python -m {old} is deprecated: run python -m {new}", DeprecationWarning, stacklevel=2)
    else:
        warnings.warn(f"{old} is deprecated: import {new}", DeprecationWarning, stacklevel=3)
