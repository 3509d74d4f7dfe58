"""A progress bar with an ETA for a check's draws, on stderr: shown once a run has lasted :data:`SHOW_AFTER_S`.

``progress=None`` (the default of :func:`verification.check_sampler`) shows it when stderr is a terminal;
``True`` always (still only past :data:`SHOW_AFTER_S`), ``False`` never.  The bar counts draws per row against the
planned ``n`` (with ``budget_s``: the draws the remaining time buys at the measured rate, re-estimated as the
calls come back) and its ETA is the one of the draws (the tests follow).  It uses ``tqdm`` where it is installed
(the ``verify`` extra) and a one-line text bar otherwise.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["SHOW_AFTER_S", "DrawProgress", "show_progress"]

#: Seconds a run lasts before its bar appears: a short check prints nothing.
SHOW_AFTER_S = 2.0
#: Seconds between two redraws of the text bar at least.
_REDRAW_S = 0.5


def show_progress(progress: bool | None, stream: TextIO | None = None) -> bool:
    """Whether to show the bar: ``progress`` if given, else whether ``stream`` (stderr) is a terminal."""
    if progress is not None:
        return bool(progress)
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


class DrawProgress:
    """The bar of one check's draws: :meth:`update` with the draws per row so far and the total expected."""

    def __init__(self, enabled: bool, total: int, *, desc: str = "draws a row", stream: TextIO | None = None,
                 clock=time.perf_counter) -> None:  # fmt: skip
        self.enabled = enabled
        self.total = max(1, int(total))
        self.done = 0
        self.desc = desc
        self.stream = sys.stderr if stream is None else stream
        self.clock = clock
        self.started = clock()
        self._bar = None
        self._last = -1e300
        self._shown = False
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:  # pragma: no cover - tqdm is in the verify extra
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=self.total, desc=desc, unit="draw", unit_scale=True, delay=SHOW_AFTER_S,
                                 file=self.stream, leave=False, dynamic_ncols=True)  # fmt: skip

    def update(self, done: int, total: int | None = None) -> None:
        """``done`` draws a row so far, of ``total`` (unchanged when ``None``)."""
        if not self.enabled:
            return
        if total is not None:
            self.total = max(int(total), int(done), 1)
        if self._bar is not None:
            if self._bar.total != self.total:
                self._bar.total = self.total
            self._bar.update(int(done) - self.done)
            self.done = int(done)
            return
        self.done = int(done)
        now = self.clock()
        if now - self.started < SHOW_AFTER_S or now - self._last < _REDRAW_S:
            return
        self._last = now
        self._shown = True
        rate = self.done / max(now - self.started, 1e-9)
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        self.stream.write(f"\r{self.desc}: {self.done:.3g} of {self.total:.3g} ({100 * self.done / self.total:.0f} %), "
                          f"{rate:.3g}/s, ETA {eta:.0f} s   ")  # fmt: skip
        self.stream.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False
