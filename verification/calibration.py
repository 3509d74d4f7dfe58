"""Deprecated path: ``verification.calibration`` is now :mod:`verification.runners.calibration`
(``python -m verification.runners.calibration``)."""

import sys

from ._deprecated import moved
from .runners import calibration

if __name__ == "__main__":
    moved("verification.calibration", calibration.__name__, run=True)
    raise SystemExit(calibration.main())
moved(__name__, calibration.__name__)
sys.modules[__name__] = calibration
