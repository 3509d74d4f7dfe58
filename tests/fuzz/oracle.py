"""What a call should do, and what it did: the expected outcome of a drawn call, the law checks of a result, and the
classification of the outcome.

Expected outcome.  An argument drawn bad (:attr:`~tests.fuzz.recipes.Arg.refuse` not empty) must be refused:
``ValueError``/``TypeError`` whose message matches one of the bad arguments' patterns.  Otherwise the values the
kernels find are judged per row, by this module's own reading of the documented rules (not by the library's code):
a row is *bad* if its logits hold NaN or ``+inf`` (any non-finite value for an LM head), no finite logit, a finite
``z`` whose ``z * (1/T)`` overflows float32, or an invalid temperature (NaN, infinite, negative, too large for
float32, or ``1/T`` overflowing float32; ``-0.0`` is ``0``).  With ``host_checks`` a bad row must raise a
``ValueError`` naming the logits or the temperature; without, every token must still be in ``[0, V)``.

Law checks of a result (every token in ``[0, V)`` first; then on the good rows):

* the exact twin, bit for bit, where the interpreter's kernel is proven equal to it: the plain sampler
  (:func:`flashsampling.twin.sample_twin`), the top-k sampler (:func:`flashsampling.twin.sample_topk_twin`), the
  pathwise tensor-parallel combine, an online sampler with one chunk; an LM head's logits are known exactly only for
  the ``exact`` value kind (elsewhere: greedy rows within the fp32 error bound of the maximum);
* the grouped draw's twin (:func:`flashsampling.grouped.choose_groups_np` and ``local_samples_np``), allowing a
  flip where two groups' perturbed log-masses are within ``1e-4`` (float32 tile sums against float64);
* never a masked token; greedy rows (``T = 0``) on a maximum; a returned ``logsumexp`` within
  :func:`flashsampling.grouped.logmass_tolerance` of the float64 one.

Classes of outcome (:data:`OUTCOMES`); the first four are defects.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import torch

#: Every class of outcome, in the order the tables show them; ``DEFECTS`` are the ones a round must not have.
OUTCOMES = ("clear error", "correct result", "unclear exception", "refused a good input", "silent wrong result",
            "out-of-range token", "hang", "ranks disagree")  # fmt: skip
DEFECTS = ("silent wrong result", "out-of-range token", "hang", "ranks disagree")
#: The names a kernel-found error may carry: the logits (or the LM head's) and the temperature.
ROW_ERROR_NAMES = (r"logits", r"temperature")
_F32_MAX = float(np.finfo(np.float32).max)
_F32_OVERFLOW = 2.0**128 - 2.0**103  # float64 values at or above round to +inf in float32


@dataclasses.dataclass
class Outcome:
    """A call's outcome: its class, and a line saying why (for the defects and unclear exceptions)."""

    kind: str
    detail: str = ""


class Hang(BaseException):
    """Raised by the time bound inside a call (a ``BaseException``: no ``except Exception`` swallows it)."""


# --------------------------------------------------------------------------------------------
# The rules, read independently of the library
# --------------------------------------------------------------------------------------------


def number_temperature_ok(t) -> bool:
    """A number temperature as the docs define a good one (``bool`` and non-reals are refused before this)."""
    try:
        t = float(t)
    except OverflowError:
        return False
    if not math.isfinite(t) or t < 0:
        return False
    if t == 0:
        return True
    t32 = float(np.float32(t)) if t < _F32_OVERFLOW else math.inf
    return math.isfinite(t32) and t32 > 0 and 1.0 / t32 < _F32_OVERFLOW


def inverse_temperatures(temperature, B: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(inv float32 [B], bad bool [B], t32 float32 [B])`` for a number or a float tensor ``[B]``/``[]`` (already
    known to be of a kind the entry point takes): ``t32`` the temperature rounded to float32 (1 on a bad row), ``inv``
    its correctly rounded float32 inverse (0 for ``t = 0`` and on a bad row)."""
    if isinstance(temperature, torch.Tensor):
        raw = temperature.detach().cpu().to(torch.float64).reshape(-1).expand(B).numpy().copy()
        raw32 = temperature.detach().cpu().to(torch.float32).reshape(-1).expand(B).numpy().astype(np.float64)
    else:
        raw = np.full(B, float(temperature))
        big = abs(raw[0]) >= _F32_OVERFLOW
        raw32 = np.full(B, math.copysign(math.inf, raw[0]) if big else float(np.float32(raw[0])))
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        t32 = raw32.astype(np.float32)
        inv = np.where(t32 > 0, np.float32(1) / np.where(t32 > 0, t32, np.float32(1)), np.float32(0))
    bad = np.isnan(raw) | (raw < 0) | np.isinf(raw32) | np.isinf(inv) | ((raw > 0) & (raw32 == 0))
    return (np.where(bad, np.float32(0), inv).astype(np.float32), bad,
            np.where(bad, np.float32(1), t32).astype(np.float32))  # fmt: skip


def bad_logit_rows(z32: np.ndarray, inv: np.ndarray, *, lm_head: bool) -> np.ndarray:
    """Rows the kernels flag: NaN or ``+inf`` (any non-finite value for an LM head), no finite logit, or a finite
    ``z`` whose float32 ``z * inv`` overflows."""
    nonfinite = ~np.isfinite(z32) if lm_head else (np.isnan(z32) | np.isposinf(z32))
    empty = ~np.isfinite(z32).any(axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = z32 * inv[:, None]
    overflow = (np.isinf(scaled) & np.isfinite(z32)).any(axis=1)
    return nonfinite.any(axis=1) | empty | overflow


def exact_lm_head_logits(hidden: torch.Tensor, weight: torch.Tensor) -> tuple[np.ndarray, bool]:
    """float64 ``hidden @ weight.T`` and whether the kernels' fp32 accumulation computes it exactly (values on a
    1/8 grid in [-2, 2] and ``D <= 256``: every product and partial sum is exact in float32)."""
    h = hidden.detach().cpu().to(torch.float64).numpy()
    w = weight.detach().cpu().to(torch.float64).numpy()
    with np.errstate(over="ignore", invalid="ignore"):
        z = h @ w.T
    grid = lambda x: np.isfinite(x).all() and (np.abs(x) <= 2).all() and (x * 8 == np.round(x * 8)).all()  # noqa: E731
    return z, bool(grid(h) and grid(w) and h.shape[1] <= 256)


# --------------------------------------------------------------------------------------------
# Classification
# --------------------------------------------------------------------------------------------


def classify_exception(exc: BaseException, refuse: tuple[str, ...]) -> Outcome:
    """An exception against the patterns of the expected refusal (empty: none was expected)."""
    if isinstance(exc, Hang):
        return Outcome("hang", str(exc))
    text = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    if not refuse:
        if isinstance(exc, (ValueError, TypeError)):
            return Outcome("refused a good input", text)
        return Outcome("unclear exception", text)
    if isinstance(exc, (ValueError, TypeError)) and any(re.search(p, str(exc)) for p in refuse):
        return Outcome("clear error")
    return Outcome("unclear exception", f"{text} (expected one of {list(refuse)})")


def tokens_in_range(tokens, B: int, S: int | None, V: int) -> str:
    """'' if ``tokens`` is an int64 tensor (or array) of shape ``[B, S]`` (``[B]`` for ``S=None``) in ``[0, V)``;
    else what is wrong."""
    t = torch.as_tensor(tokens)
    want = (B,) if S is None else (B, S)
    if t.dtype != torch.int64:
        return f"tokens.dtype={t.dtype}"
    if tuple(t.shape) != want:
        return f"tokens.shape={tuple(t.shape)}, expected {want}"
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= V):
        return f"a token outside [0, {V}): min {int(t.min())}, max {int(t.max())}"
    return ""


def never_masked(tokens: np.ndarray, z: np.ndarray, rows: np.ndarray) -> str:
    """'' if no good row's token has a ``-inf`` logit."""
    for r in np.flatnonzero(rows):
        hit = np.isneginf(z[r][tokens[r]])
        if hit.any():
            return f"row {r} drew the masked token {int(tokens[r][hit][0])}"
    return ""


def greedy_on_maximum(tokens: np.ndarray, z: np.ndarray, inv: np.ndarray, rows: np.ndarray, slack=0.0) -> str:
    """'' if every good greedy row's tokens have a maximal logit (within ``slack`` per row)."""
    for r in np.flatnonzero(rows & (inv == 0)):
        m = np.max(z[r])
        low = z[r][tokens[r]] < m - (slack[r] if np.ndim(slack) else slack)
        if low.any():
            return f"greedy row {r} drew token {int(tokens[r][low][0])} (logit {z[r][tokens[r][low][0]]}, max {m})"
    return ""


def same_on_rows(got: np.ndarray, want: np.ndarray, rows: np.ndarray, what: str) -> str:
    bad = (got != want) & rows[:, None]
    if bad.any():
        r, s = np.argwhere(bad)[0]
        return f"row {r} sample {s}: token {int(got[r, s])}, the {what} gives {int(want[r, s])}"
    return ""


def logsumexp_close(lse: torch.Tensor, z32: np.ndarray, inv: np.ndarray, rows: np.ndarray, group: int) -> str:
    """'' if the returned float64 ``logsumexp`` of each good row is within the log-mass tolerance."""
    from flashsampling.grouped import logmass_tolerance

    got = torch.as_tensor(lse).detach().cpu().to(torch.float64).numpy()
    for r in np.flatnonzero(rows):
        fin = z32[r][np.isfinite(z32[r])].astype(np.float64)
        if inv[r] == 0:
            want, scale = fin.max(), np.abs(fin).max()
        else:
            s = (z32[r][np.isfinite(z32[r])] * inv[r]).astype(np.float32).astype(np.float64)
            m = s.max()
            want, scale = m + math.log(np.exp(s - m).sum()), np.abs(s).max()
        tol = logmass_tolerance(scale, max(group, 1)) + 1e-300
        if not abs(got[r] - want) <= tol:
            return f"row {r}: logsumexp {got[r]!r}, float64 {want!r} (tolerance {tol:.3g})"
    return ""
