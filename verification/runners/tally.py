"""Per-row counts of a check's draws, accumulated call by call where the tokens lie: memory ``O(B V)`` at any ``n``.

A check draws ``n`` tokens a row in many calls of at most ``MAX_CALL_DRAWS`` columns
(:mod:`verification.planning.check`); :class:`Tally` adds each call's ``[B, c]`` tokens to one ``[B, V + 1]``
int64 accumulator (the last column counts the draws outside ``[0, V)``, which every test treats as impossible)
and keeps nothing else, so ``10**10`` draws a row cost the same memory as ``10**3``.  The count is one offset
bincount per block of rows: token ``x`` of row ``b`` lands in bin ``b (V + 1) + x`` (``V`` for an impossible
``x``), and ``bincount`` over the flattened block is every row's histogram at once.  Torch tokens off the CPU (a
CUDA sampler's) are counted on their own device by ``torch.bincount`` into an accumulator there: only the
``[B, V + 1]`` counts cross to the host, once, at the end.  NumPy arrays and CPU tensors (read without a copy) are
counted by ``numpy.bincount`` (row by row, by :func:`~verification.stats.counts.count_samples`, where the calls
are wide).

Exactness: integer counts, no sampling or rounding; the sum over calls equals the bincount of all draws at once
(``tests/verification/test_scale.py`` checks it).
"""

from __future__ import annotations

import numpy as np
import torch

from ..stats.counts import Counts, count_samples

__all__ = ["COUNT_BLOCK", "ROW_BINCOUNT", "Tally"]

#: Tokens per offset bincount at most (a block of whole rows; at least one row): bounds the int64 index copy
#: to 128 MiB whatever ``B`` and the call's width.
COUNT_BLOCK = 1 << 24

#: Calls at least this wide are counted on the host one row at a time (no index copy: measured 2.4x faster than
#: the offset bincount on [2, 2**20] tokens); narrower ones by one offset bincount over the block.
ROW_BINCOUNT = 1 << 12


class Tally:
    """Counts of ``B`` rows over ``V`` categories, added call by call (see the module docstring).

    Attributes
    ----------
    rows, num_categories : int
        ``B`` and ``V``.
    n : int
        Draws per row counted so far (every call draws the same number for every row).
    calls : int
        Calls counted.
    """

    def __init__(self, rows: int, num_categories: int) -> None:
        self.rows = int(rows)
        self.num_categories = int(num_categories)
        self.n = 0
        self.calls = 0
        self._host = np.zeros((self.rows, self.num_categories + 1), dtype=np.int64)
        self._device: torch.Tensor | None = None

    def add(self, tokens: torch.Tensor | np.ndarray) -> None:
        """Count one call's tokens ``[B, c]`` (a torch tensor on any device, or an integer NumPy array)."""
        if isinstance(tokens, torch.Tensor) and tokens.device.type == "cpu":
            tokens = tokens.numpy()
        b, c = tokens.shape
        if b != self.rows:
            raise ValueError(f"tokens have {b} rows; the tally counts {self.rows}")
        step = max(1, COUNT_BLOCK // max(c, 1))
        for r0 in range(0, b, step):
            block = tokens[r0 : r0 + step]
            if isinstance(block, torch.Tensor):
                self._add_torch(block, r0)
            else:
                self._add_numpy(block, r0)
        self.n += int(c)
        self.calls += 1

    def _bins(self, rows: int) -> int:
        return rows * (self.num_categories + 1)

    def _add_numpy(self, x: np.ndarray, r0: int) -> None:
        v = self.num_categories
        if x.shape[1] >= ROW_BINCOUNT:
            for i, row in enumerate(x):
                c = count_samples(row, v)
                self._host[r0 + i, :v] += c.histogram
                self._host[r0 + i, v] += c.out_of_range
            return
        x = x.astype(np.int64, copy=False)
        if x.size and (x.min() < 0 or x.max() >= v):
            x = np.where((x >= 0) & (x < v), x, v)
        idx = x + (np.arange(x.shape[0], dtype=np.int64) * (v + 1))[:, None]
        h = np.bincount(idx.ravel(), minlength=self._bins(x.shape[0]))
        self._host[r0 : r0 + x.shape[0]] += h.reshape(x.shape[0], v + 1)

    def _add_torch(self, x: torch.Tensor, r0: int) -> None:
        v = self.num_categories
        if self._device is None:
            self._device = torch.zeros((self.rows, v + 1), dtype=torch.int64, device=x.device)
        elif self._device.device != x.device:
            raise ValueError(f"tokens on {x.device} after tokens on {self._device.device}: one device per check")
        x = x.to(torch.int64)
        offsets = torch.arange(x.shape[0], dtype=torch.int64, device=x.device)[:, None] * (v + 1)
        idx = torch.where((x >= 0) & (x < v), x, v) + offsets
        h = torch.bincount(idx.reshape(-1), minlength=self._bins(x.shape[0]))
        self._device[r0 : r0 + x.shape[0]] += h.view(x.shape[0], v + 1)

    def table(self) -> np.ndarray:
        """The counts ``[B, V + 1]`` on the host (the last column: draws outside ``[0, V)``)."""
        out = self._host.copy()
        if self._device is not None:
            out += self._device.cpu().numpy()
        return out

    def counts(self) -> list[Counts]:
        """One :class:`~verification.stats.counts.Counts` per row."""
        t = self.table()
        return [Counts(row[:-1], int(row[-1])) for row in t]
