"""Deprecated path: ``verification.targets`` is now :mod:`verification.battery.aims` (what a check aims at).

Renamed so that it cannot be confused with :mod:`flashsampling.targets`, the float64 laws themselves.
"""

import sys

from ._deprecated import moved
from .battery import aims

moved(__name__, aims.__name__)
sys.modules[__name__] = aims
