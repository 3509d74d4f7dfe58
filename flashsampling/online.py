"""Online sampling: consume the vocabulary chunk by chunk with O(1) state per row.

The binary merge
----------------
A row's state after the chunks ``C_1 .. C_j`` is the running log-mass ``L = logsumexp_{i in C_1..C_j}
s_i`` (``s = z / T``) and, per sample, the chosen index ``X``.  A new chunk ``C`` brings its
log-mass ``L_C`` and its local Gumbel-max sample ``X_C`` (stage 1 with ``return_lse``, reduced over
its tiles).  The merge::

    L_new = logaddexp(L, L_C)
    X     = X_C  with probability  p = exp(L_C - L_new),  else unchanged
    L     = L_new

By induction ``P(X = i) = exp(s_i - L)`` after every chunk: a token of the new chunk is kept with
``p * exp(s_i - L_C) = exp(s_i - L_new)``, an old one with ``(1 - p) exp(s_i - L) = exp(s_i - L_new)``.
This needs the coin to be independent of ``X_C`` and of the past: it reads the 64-bit integer ``k``
of the Philox counter ``(chunk_start, row, sample, STREAM_ONLINE)`` (distinct chunks have distinct
starts; the token noise is stream 0) and takes iff ``k < K(p) = ceil(2**64 p - 1/2)``
(:func:`flashsampling.noise.merge_coin`: ``p = 1 / (1 + exp(L - L_C))`` from the accurate side, in
float64 without a logarithm, and ``K`` exactly), so ``P(take) = K(p) / 2**64``, within ``2**-65`` of
``p``: exact on the 64-bit grid (``proofs/finite_precision.md``, section 8).  The first chunk with mass
is always taken (``L = -inf``); a chunk with no mass (``L_C = -inf``) never is.  Greedy rows keep the
lexicographic ``(z, key)`` maximum instead, which equals the fused greedy token.

Chunks may have any sizes and come in any order and number of calls (for a weight streamed from
host memory, or too large for one launch); they must not overlap.  With a single chunk the result
is exactly :func:`flashsampling.sample` (the first chunk is always taken).  With several, the
result differs pathwise from the fused one but has the same distribution.

The state is ``L`` (float64 ``[B]``), and per sample the index, and for greedy rows the score and
key of the current choice: O(1) per row and sample, whatever the vocabulary size.  The final ``L`` is
the full ``logsumexp(z / T)`` (``max z`` for greedy rows), for log-probabilities
``log p_i = z_i / T - L``; its error is bounded by :func:`flashsampling.grouped.logmass_tolerance`
with the largest chunk tile as group size.
"""

from __future__ import annotations

import bisect
import math
from typing import NamedTuple

import numpy as np
import torch

from . import _validate as check
from ._request import GIVEN_LOGITS, new_request
from .grouped import _CHUNK_ELEMENTS, _check_row, group_logmass_np, local_samples_np
from .kernels.flags import FLAG_NO_FINITE
from .kernels.stage2 import launch_online_merge, launch_reduce_candidates
from .kernels.tiles import TileConfig, logits_tiles
from .noise import STREAM_ONLINE, merge_coin_np, philox4x32_np, split_seed
from .twin import sample_twin_many


def _normalize_device(device) -> torch.device:
    """``torch.device`` with an explicit index for CUDA (tensors report ``cuda:0``, not ``cuda``); a device the
    kernels run on (``ValueError`` naming ``device`` otherwise)."""
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"device must be a torch.device, a str or None, got {type(device).__name__}")
    try:
        d = torch.device(device)
    except RuntimeError as exc:
        raise ValueError(f"device={device!r} is not a device: {exc}") from None
    check.check_device_type("device", d)
    if d.type == "cuda":
        # torch.cuda.current_device() on a machine without CUDA raises AssertionError: say what is wrong instead.
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"device={device!r}: CUDA is not available on this machine (torch.cuda.is_available() "
                             "is False)")  # fmt: skip
        if d.index is None:
            d = torch.device("cuda", torch.cuda.current_device())
        elif d.index >= count:
            raise ValueError(f"device={device!r}: this machine has {count} CUDA device(s)")
    return d


class OnlineResult(NamedTuple):
    """Tokens ``int64 [B, S]`` and ``logsumexp(z / T)`` ``float64 [B]`` (``max z`` for greedy rows)."""

    tokens: torch.Tensor
    logsumexp: torch.Tensor


def logaddexp_np(a, b):
    """float64 ``log(exp(a) + exp(b))`` by the merge kernel's formula ``m + log(1 + exp(min - m))``."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    m = np.maximum(a, b)
    with np.errstate(invalid="ignore"):
        d = np.where(m == -np.inf, -np.inf, np.minimum(a, b) - m)
    return np.where(m == -np.inf, m, m + np.log(1.0 + np.exp(d)))


class OnlineSampler:
    """Sample from ``softmax(z / T)`` while the vocabulary arrives chunk by chunk.

    Parameters
    ----------
    batch_size : int
        Rows ``B``.
    temperature : float or torch.Tensor of shape (B,)
        ``0`` means greedy.
    seed : int in [0, 2**64) or None
        As in :func:`flashsampling.sample`; the token noise is keyed by the global vocabulary index,
        the merge coins by ``(chunk_start, row, sample, STREAM_ONLINE)``.
    num_samples : int
    device : torch.device or str or None
        Where the state lives; ``None``: the temperature tensor's device, else the first chunk's.
    host_checks : bool
        As in :func:`flashsampling.sample`; the checks that synchronize (the kernels' flags, a temperature
        tensor's values) run once, in :meth:`result`.

    Examples
    --------
    >>> sampler = OnlineSampler(B, temperature=0.8, seed=1)             # doctest: +SKIP
    >>> for a in range(0, V, 32768):                                     # doctest: +SKIP
    ...     sampler.update(hidden, weight_cpu[a:a + 32768].to(dev, non_blocking=True), start=a)
    >>> tokens, lse = sampler.result(vocab_size=V)                       # doctest: +SKIP
    """

    def __init__(
        self,
        batch_size: int,
        *,
        temperature: float | torch.Tensor = 1.0,
        seed: int | None = None,
        num_samples: int = 1,
        device=None,
        host_checks: bool = True,
    ) -> None:
        batch_size = check.check_int("batch_size", batch_size, low=1, high=check.MAX_INDEX)
        if device is None and isinstance(temperature, torch.Tensor):
            check.check_device_type("temperature.device", temperature.device)
            device = temperature.device
        self.batch_size = batch_size
        self.device: torch.device | None = None
        # The checks now (the seed drawn once); the state is made on the device, else on the first chunk's.  Without
        # a device the number temperature's 1/T is made on "meta" (shapes only: no memory, no kernel, no device the
        # kernels must run on -- the first chunk's device is not known yet, and it need not be the CPU).
        where = _normalize_device(device) if device is not None else torch.device("meta")
        self._request = new_request(temperature, seed, num_samples, batch_size, where, host_checks=host_checks,
                                    what=GIVEN_LOGITS)  # fmt: skip
        self.num_samples = self._request.num_samples
        self.seed = self._request.seed
        self.host_checks = host_checks
        self._temperature = temperature
        self._lo, self._hi = split_seed(self.seed)
        self._intervals: list[tuple[int, int]] = []  # consumed [start, end), sorted and merged
        self._next = 0
        self._hidden: tuple[torch.Tensor, int] | None = None  # the first update's hidden and its version
        if device is not None:
            self._allocate(_normalize_device(device))

    def _allocate(self, device: torch.device) -> None:
        B, S = self.batch_size, self.num_samples
        self.device = device
        if self._request.inv_temp.device != device:
            self._request = new_request(self._temperature, self.seed, S, B, device, host_checks=self.host_checks,
                                        what=GIVEN_LOGITS)  # fmt: skip
        self._inv_temp = self._request.inv_temp
        self._logmass = torch.full((B,), -math.inf, dtype=torch.float64, device=device)
        self._index = torch.zeros((B, S), dtype=torch.int64, device=device)
        self._best = torch.full((B, S), -math.inf, dtype=torch.float32, device=device)
        self._key = torch.full((B, S), -3, dtype=torch.int64, device=device)
        self._flags = torch.zeros((B,), dtype=torch.int32, device=device)

    # -- bookkeeping ------------------------------------------------------------------------
    @property
    def consumed(self) -> int:
        """Number of vocabulary columns merged so far."""
        return sum(b - a for a, b in self._intervals)

    def _check_start(self, start, size: int) -> int:
        """``start`` (``None``: the end of the previous chunk) checked for a chunk of ``size`` columns, whatever
        ``size`` (a chunk of no columns with a bad ``start`` is refused as any other)."""
        if start is None:
            start = self._next
        if isinstance(start, (bool, np.bool_)) or not isinstance(start, (int, np.integer)):
            raise TypeError(f"start must be an int >= 0 or None, got {type(start).__name__}")
        start = int(start)
        if start < 0:
            raise ValueError(f"start={start} must be >= 0")
        check.check_counter("start + chunk size", start + size - 1 if size else start)
        return start

    def _claim(self, start, size: int) -> int:
        start = self._check_start(start, size)
        end = start + size
        j = bisect.bisect_left(self._intervals, (start, end))
        for a, b in self._intervals[max(0, j - 1) : j + 1]:
            if a < end and start < b:
                raise ValueError(f"chunk [{start}, {end}) overlaps the already merged columns [{a}, {b})")
        self._intervals.insert(j, (start, end))
        merged: list[tuple[int, int]] = []
        for a, b in self._intervals:
            if merged and merged[-1][1] == a:
                merged[-1] = (merged[-1][0], b)
            else:
                merged.append((a, b))
        self._intervals = merged
        self._next = end
        return start

    def _check_hidden(self, hidden: torch.Tensor) -> None:
        """Every :meth:`update` samples one ``softmax(hidden @ W.T / T)``: the same ``hidden`` each time (the same
        tensor, unmodified, costs nothing; an equal copy costs one comparison, a synchronization on a GPU)."""
        if self._hidden is None:
            self._hidden = (hidden, hidden._version)
            return
        first, version = self._hidden
        if hidden.shape[1] != first.shape[1]:
            raise ValueError(f"hidden has D={hidden.shape[1]} columns but the first chunk's hidden had "
                             f"D={first.shape[1]}; every update takes the same hidden")  # fmt: skip
        if first._version != version:
            raise ValueError("hidden was modified in place since the first chunk; every update takes the same hidden")
        if hidden is first or (hidden.data_ptr() == first.data_ptr() and hidden.stride() == first.stride()
                               and hidden.dtype == first.dtype):  # fmt: skip
            return
        if hidden.dtype != first.dtype or not torch.equal(hidden, first):
            raise ValueError("hidden differs from the first chunk's hidden; every update takes the same hidden "
                             "(an OnlineSampler samples one softmax(hidden @ W.T / T))")  # fmt: skip

    def _check_rows(self, name: str, rows: int, device: torch.device) -> None:
        if rows != self.batch_size:
            raise ValueError(f"{name} has B={rows} rows but the sampler was made with batch_size={self.batch_size}")
        if self.device is None:
            self._allocate(_normalize_device(device))
        if device != self.device:
            raise ValueError(f"{name}.device={device} differs from the sampler's device {self.device}")

    # -- updates ----------------------------------------------------------------------------
    def update(self, hidden: torch.Tensor, weight_chunk: torch.Tensor, *, start: int | None = None,
               tiles: TileConfig | None = None) -> None:  # fmt: skip
        """Merge the chunk ``z = hidden @ weight_chunk.T`` (global columns ``start .. start + C - 1``).

        ``start`` defaults to the end of the previous chunk (0 at first).  ``weight_chunk`` on
        another device (e.g. pinned host memory) is copied to ``hidden``'s device first.
        """
        both = isinstance(weight_chunk, torch.Tensor) and isinstance(hidden, torch.Tensor)
        if both and weight_chunk.device != hidden.device and weight_chunk.device.type in check.DEVICE_TYPES:
            weight_chunk = weight_chunk.to(hidden.device, non_blocking=True)
        B, C, _, device = check.check_lm_head(hidden, weight_chunk, "weight_chunk")
        check.check_tiles(tiles)
        self._check_rows("hidden", B, device)
        self._check_hidden(hidden)
        if C == 0:
            self._check_start(start, 0)
            return
        start = self._claim(start, C)
        parts, _ = self._request.stage1(hidden, weight_chunk, tiles, col_offset=start, return_lse=True)
        self._merge(parts, start)

    def update_logits(self, logits_chunk: torch.Tensor, *, start: int | None = None,
                      block_b: int | None = None, block_v: int | None = None) -> None:  # fmt: skip
        """Merge given logits ``[B, C]`` for the global columns ``start .. start + C - 1`` (``-inf`` masks)."""
        B, C = check.check_logits(logits_chunk, "logits_chunk", allow_empty=True)
        logits_tiles(B, C, block_b, block_v)  # the block sizes, checked before any work
        self._check_rows("logits_chunk", B, logits_chunk.device)
        if C == 0:
            self._check_start(start, 0)
            return
        start = self._claim(start, C)
        parts, _ = self._request.logits_stage1(logits_chunk, block_b, block_v, col_offset=start, return_lse=True)
        self._merge(parts, start)

    def _merge(self, parts, start: int) -> None:
        """Two launches: reduce the chunk's tiles, then merge (coin, state update) per pair."""
        cand = launch_reduce_candidates(parts, self._inv_temp, return_lse=True)
        self._logmass, self._flags = launch_online_merge(
            cand, self._inv_temp, self._logmass, self._flags, self._best, self._key, self._index,
            start, self._lo, self._hi,
        )  # fmt: skip

    # -- result -----------------------------------------------------------------------------
    def result(self, *, vocab_size: int | None = None) -> OnlineResult:
        """The tokens and ``logsumexp`` so far.

        ``vocab_size``: when given, the merged chunks must cover exactly ``[0, vocab_size)``.
        Raises ``ValueError`` if nothing was merged, and with ``host_checks`` for NaN/inf logits
        or a row with no finite logit.
        """
        if vocab_size is not None:
            vocab_size = check.check_int("vocab_size", vocab_size, low=1, high=check.MAX_COUNTER + 1)
        if not self._intervals:
            raise ValueError("OnlineSampler.result(): no chunk was merged yet; call update() or update_logits() first")
        if vocab_size is not None and self._intervals != [(0, vocab_size)]:
            raise ValueError(f"the merged chunks cover {self._intervals[:4]}, not [0, vocab_size={vocab_size})")
        if self.host_checks:
            flags = self._flags | torch.where(self._logmass == -math.inf, FLAG_NO_FINITE, 0).to(torch.int32)
            self._request.finish(flags)
        # Clamped into the merged columns' range (a row of NaN scores may pick a chunk tile's padding column).
        tokens = self._index.clamp(self._intervals[0][0], self._intervals[-1][1] - 1)
        return OnlineResult(tokens, self._logmass.clone())


def sample_online(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    *,
    chunk_size: int,
    temperature: float | torch.Tensor = 1.0,
    seed: int | None = None,
    num_samples: int = 1,
    return_logsumexp: bool = False,
    host_checks: bool = True,
):
    """:class:`OnlineSampler` over ``weight`` in consecutive chunks of ``chunk_size`` rows.

    Returns ``tokens [B, S]`` (int64), or ``(tokens, logsumexp)`` with ``return_logsumexp``.
    """
    chunk_size = check.check_int("chunk_size", chunk_size, low=1)
    return_logsumexp = check.check_flag("return_logsumexp", return_logsumexp)
    B, V, _, device = check.check_lm_head(hidden, weight)
    check.check_nonempty("weight", V, "V")
    sampler = OnlineSampler(
        B, temperature=temperature, seed=seed, num_samples=num_samples, device=device, host_checks=host_checks
    )
    for a in range(0, V, chunk_size):
        sampler.update(hidden, weight[a : a + chunk_size], start=a)
    res = sampler.result(vocab_size=V)
    return (res.tokens, res.logsumexp) if return_logsumexp else res.tokens


# --------------------------------------------------------------------------------------------
# NumPy twin
# --------------------------------------------------------------------------------------------


def coin_words_np(seed: int, starts, row, samples) -> tuple[np.ndarray, np.ndarray]:
    """The merge coins' words ``(w0, w1)`` (uint32) of the blocks ``(start, row, sample, STREAM_ONLINE)``: the coin
    reads ``k = w1 * 2**32 + w0``."""
    lo, hi = split_seed(int(seed))
    w0, w1, _, _ = philox4x32_np(starts, row, samples, STREAM_ONLINE, lo, hi)
    return w0, w1


def default_chunks(V: int) -> list[int]:
    """Uneven chunk sizes for the NumPy sampler: about ``sqrt(V)`` on average, cycling 1/2, 1, 3/2 of it."""
    c = max(2, math.isqrt(V))
    sizes, pattern, a, j = [], (c // 2 or 1, c, c + c // 2), 0, 0
    while a < V:
        m = min(pattern[j % 3], V - a)
        sizes.append(m)
        a += m
        j += 1
    return sizes


def merged_logmass_np(L_chunks: np.ndarray) -> np.ndarray:
    """The state's log-mass before each merge, float64 ``(C,)``: ``-inf``, then the running
    :func:`logaddexp_np` of the chunks merged so far (the merge kernel's ``L``)."""
    before = np.full(L_chunks.shape[0], -np.inf)
    acc = -np.inf
    for j in range(L_chunks.shape[0] - 1):
        acc = float(logaddexp_np(acc, L_chunks[j]))
        before[j + 1] = acc
    return before


def online_choice_np(L_chunks: np.ndarray, starts: np.ndarray, seed: int, n: int, *, row: int = 0) -> np.ndarray:
    """Which chunk's local sample survives all merges, for samples ``0..n-1`` of one row: int64 ``(n,)``.

    Chunk ``j``'s coin is :func:`flashsampling.noise.merge_coin_np` of its block's words with ``L`` the log-mass
    merged before it (:func:`merged_logmass_np`) and ``L_C = L_chunks[j]``.  The coins do not depend on the local
    samples, so the survivor is the last chunk whose coin said "take" (chunks merged in the order given, as
    :class:`OnlineSampler` would).
    """
    C = L_chunks.shape[0]
    before = merged_logmass_np(L_chunks)
    out = np.empty(n, dtype=np.int64)
    per = max(1, _CHUNK_ELEMENTS // C)
    ids = starts.astype(np.uint32)[None, :]
    for s0 in range(0, n, per):
        smp = np.arange(s0, min(n, s0 + per), dtype=np.uint32)[:, None]
        w0, w1 = coin_words_np(seed, ids, row, smp)
        take = merge_coin_np(w0, w1, before[None, :], L_chunks[None, :])
        out[s0 : s0 + smp.shape[0]] = C - 1 - np.argmax(take[:, ::-1], axis=1)
    return out


def online_sampler_np(logits: np.ndarray, temperature: float, n: int, seed: int, *, chunk_sizes=None) -> np.ndarray:
    """``n`` samples of one row by the online rule, with the kernel's noise and coins: int64 ``(n,)``.

    Chunks (``chunk_sizes``, default :func:`default_chunks`) are merged in order; sample ``s`` is
    row 0, sample ``s`` of an :class:`OnlineSampler` fed those chunks, up to the float32-vs-float64
    rounding of the chunk log-masses.  Only the surviving chunk's token noise is evaluated:
    ``C + |chunk|`` noise evaluations per sample.  ``temperature = 0`` is greedy.
    """
    z32, inv32 = _check_row(logits, temperature)
    if inv32 == 0:
        return sample_twin_many(z32, 0.0, seed=seed, num_samples=n)
    V = z32.shape[0]
    sizes = np.asarray(default_chunks(V) if chunk_sizes is None else [int(c) for c in chunk_sizes], dtype=np.int64)
    if (sizes < 0).any() or sizes.sum() != V:
        raise ValueError(f"chunk_sizes must be >= 0 and sum to V={V}")
    keep = sizes > 0
    starts = (np.cumsum(sizes) - sizes)[keep]
    sizes = sizes[keep]
    L = group_logmass_np(z32, inv32, starts, sizes)
    choice = online_choice_np(L, starts, seed, n)
    return local_samples_np(z32, inv32, seed, starts, sizes, choice)
