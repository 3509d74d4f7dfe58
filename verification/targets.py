"""Deprecated path: ``verification.targets`` is now :mod:`verification.battery.aims` (what a check aims at).

Renamed so that it cannot be confused with :mod:`flashsampling.targets`, the float64 laws themselves.
"""

import sys
import warnings

from .battery import aims

warnings.warn("verification.targets is deprecated: import verification.battery.aims", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = aims
