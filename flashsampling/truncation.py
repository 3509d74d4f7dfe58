"""Top-k, top-p and min-p fused into the LM head: what ``sample(..., top_k=, top_p=, min_p=, order=)`` and
``sample_from_logits`` with the same arguments run.

The law
-------
``flashsampling.targets.sampling_law(z, T, top_k=k, top_p=p, min_p=q, order=order, top_k_ties="low_index")`` on the
fp32 logits ``z`` as the kernel computes them: top-k keeps the first ``k`` tokens in the order (logit descending,
index ascending); top-p (``ties="all"``, the crossing token kept, ``M_i < p S``) and min-p (``P(i) >= q max P``)
the targets' defaults; the filters composed in ``order`` (a name of :data:`flashsampling.targets.ORDERS`, default
``"transformers"``: temperature, top-k, top-p, min-p; or a tuple of steps), each decision taken on the float64
weights.  The token is ``argmax_{i in K} z_i / T + G(seed, row, i, sample)`` over the kept set ``K`` with the plain
sampler's noise and tie keys, so a row whose filters keep every token gets the plain sampler's token.

How
---
Stage 1 (:mod:`flashsampling.kernels.truncation`) writes, per row and vocabulary tile, the tile's first ``LIST``
tokens in the order (and the tile's float64 mass where a top-p step sees the whole row), no noise; stage 2
(:mod:`flashsampling.kernels.truncation_stage2`) decides each row's kept set from the lists when they provably hold
it, with every float64 decision outside its error bound, and draws.  A row it cannot decide -- a kept set wider
than the lists, or a decision within the bound -- takes the exact fallback: its fp32 logits recomputed by the same
kernel (the same bits), stage 2 on the whole row, and, where a decision is still within the bound, the law itself
on the host (:func:`exact_threshold`).  ``proofs/truncation.md`` has the argument and the bounds.

Arguments
---------
``top_k``: an int or an integer tensor ``[B]``, each ``k`` in ``[1, MAX_TOP_K]`` or ``>= V`` (no truncation).
``top_p``: a number or a floating tensor ``[B]`` in ``(0, 1]`` (1: no truncation).  ``min_p``: a number or a
floating tensor ``[B]`` in ``[0, 1]`` (0: no truncation).  ``None`` disables a filter; a row whose filters all
keep everything is the plain sampler's (a call where every row is, is the plain sampler: the same tokens as without
the arguments).  A tensor's values are read on the host before the launch (one copy; a synchronization when it is
on the GPU), and every truncated call synchronizes once after stage 2 to learn which rows need the fallback.  A
device seed is refused with these arguments.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from ._validate import check_tiles, same_device, short_repr
from .kernels.stage2 import reduce_tiles
from .kernels.tiles import TileConfig, logits_tiles
from .kernels.truncation import (
    ASSUMED_KEPT,
    launch_truncation_logits_stage1,
    launch_truncation_stage1,
    launch_write_logits,
    list_length,
    truncation_tiles,
)
from .kernels.truncation_stage2 import (
    STATUS_UNDECIDED,
    STEP_JOINT,
    STEP_MIN_P,
    STEP_SCALED,
    STEP_TEMPERATURE,
    STEP_TOP_K,
    STEP_TOP_P,
    launch_truncation_stage2,
)
from .targets import DEFAULT_ORDER
from .targets.truncation import parse_order
from .twin import kept_mask, ordered_np

if TYPE_CHECKING:
    from ._request import Request

__all__ = ["MAX_TOP_K", "Truncation", "exact_threshold", "sample_truncated", "sample_truncated_from_logits",
           "truncation_rows"]  # fmt: skip

#: The largest ``k`` of the fused sampler (the lists are sized for it: :func:`~.kernels.truncation.list_length`).
MAX_TOP_K = 1024
#: Integer dtypes a ``top_k`` tensor may have; floating dtypes a ``top_p`` / ``min_p`` tensor may have.
INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
#: Unit roundoff of float64.
U64 = 2.0**-53
#: The per-term part of the relative error bound of a float64 mass (``proofs/truncation.md``, Lemma 2): the
#: exponent's rounding over ``|x| <= 64`` (``4 * 64 u``), ``exp_neg64`` (``2.623 u``), NumPy's ``exp`` (``4 u``),
#: one product and slack.
MASS_TERM_ERROR = 300
#: Test hook: a fixed list length instead of :func:`~flashsampling.kernels.truncation.list_length`'s.
LIST_OVERRIDE: int | None = None

_CAP_RULE = "must be <= {} (the fused sampler's lists are sized for it) or >= V={} (no truncation)"


@dataclass(frozen=True)
class Truncation:
    """Checked filters of a call for ``B`` rows.

    Attributes
    ----------
    k, p, log_min_p : torch.Tensor, shape (B,), on the call's device
        int32 ``k`` (0: no top-k), float64 ``p`` (2.0: no top-p), float64 ``log(min_p)`` (``-inf``: no min-p).
    host : dict
        The same per row on the host (``k`` int64 with 0 for none, ``p`` and ``min_p`` float64 with ``nan`` for
        none) and the order, for the exact fallback.
    steps : tuple of 4 ints
        The order's step codes (:mod:`flashsampling.kernels.truncation_stage2`).
    plain_rows : torch.Tensor or None
        bool ``(B,)`` on the device: rows whose filters keep everything, when some row has them (else ``None``).
    kept : int
        The kept-set size the lists are sized for: the largest ``k`` when every truncated row has a top-k, else
        :data:`~flashsampling.kernels.truncation.ASSUMED_KEPT`.
    mass : bool
        Some row's top-p step sees the whole row: stage 1 writes the tiles' masses.
    top_p_scaled : bool
        The top-p step comes after the temperature (its weights at ``T``, else at 1).
    """

    k: torch.Tensor
    p: torch.Tensor
    log_min_p: torch.Tensor
    host: dict
    steps: tuple[int, int, int, int]
    plain_rows: torch.Tensor | None
    kept: int
    mass: bool
    top_p_scaled: bool


# --------------------------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------------------------


def _tensor_values(name: str, value: torch.Tensor, batch: int, device: torch.device, dtypes, kind: str):
    """A per-row tensor's metadata checks, then its values on the host (int64 or float64)."""
    if value.layout != torch.strided or value.is_nested:
        raise TypeError(f"{name} must be a dense (strided) tensor, got layout {value.layout}")
    if value.dtype not in dtypes:
        raise TypeError(f"{name}.dtype={value.dtype} is not supported; {name} must be {kind}")
    if tuple(value.shape) != (batch,):
        what = "an int" if dtypes is INT_DTYPES else "a number"
        raise ValueError(f"{name} must be {what} or a tensor of shape (B,) = ({batch},), got shape "
                         f"{tuple(value.shape)}")  # fmt: skip
    if value.device.type != "cpu" and not same_device(value.device, device):
        raise ValueError(f"{name}.device={value.device} differs from the inputs' device {device}")
    wide = torch.int64 if dtypes is INT_DTYPES else torch.float64
    return value.detach().to("cpu", wide).numpy()


def check_top_k(top_k, batch: int, V: int, device: torch.device) -> np.ndarray | None:
    """``top_k`` as int64 ``k`` per row on the host (0 where ``k >= V``: no truncation), or ``None``."""
    if top_k is None:
        return None
    if isinstance(top_k, torch.Tensor):
        values = _tensor_values("top_k", top_k, batch, device, INT_DTYPES, "an int or an integer tensor")
        for i, k in enumerate(values.tolist()):
            if k < 1:
                raise ValueError(f"top_k[{i}]={k} must be >= 1")
            if MAX_TOP_K < k < V:
                raise ValueError(f"top_k[{i}]={k} {_CAP_RULE.format(MAX_TOP_K, V)}")
        return np.where(values >= V, 0, values)
    if isinstance(top_k, (bool, np.bool_)) or not isinstance(top_k, numbers.Integral):
        raise TypeError(f"top_k must be an int or an integer tensor, got {type(top_k).__name__} {short_repr(top_k)}")
    k = int(top_k)
    if k < 1:
        raise ValueError(f"top_k={k} must be >= 1")
    if MAX_TOP_K < k < V:
        raise ValueError(f"top_k={k} {_CAP_RULE.format(MAX_TOP_K, V)}")
    return np.full(batch, 0 if k >= V else k, dtype=np.int64)


def _check_probability(name: str, value, batch: int, device: torch.device, low_open: bool) -> np.ndarray | None:
    """``top_p`` (``(0, 1]``) or ``min_p`` (``[0, 1]``) as float64 per row on the host, or ``None``."""
    if value is None:
        return None
    interval = "(0, 1]" if low_open else "[0, 1]"
    if isinstance(value, torch.Tensor):
        values = _tensor_values(name, value, batch, device, FLOAT_DTYPES, "a number or a floating tensor")
        for i, x in enumerate(values.tolist()):
            if not (0.0 < x <= 1.0 if low_open else 0.0 <= x <= 1.0):
                raise ValueError(f"{name}[{i}]={x} must be in {interval}")
        return values
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number or a floating tensor, got {type(value).__name__} "
                        f"{short_repr(value)}")  # fmt: skip
    x = float(value)
    if not (0.0 < x <= 1.0 if low_open else 0.0 <= x <= 1.0):
        raise ValueError(f"{name}={short_repr(value)} must be in {interval}")
    return np.full(batch, x, dtype=np.float64)


def check_order(order, filters: tuple[str, ...]) -> tuple:
    """``order`` (``None``: :data:`~flashsampling.targets.DEFAULT_ORDER`; a name of
    :data:`~flashsampling.targets.ORDERS`; a tuple of steps) parsed; ``TypeError`` / ``ValueError`` naming ``order``."""
    if order is None:
        order = DEFAULT_ORDER
    if not isinstance(order, (str, tuple, list)):
        raise TypeError(f"order must be a name of flashsampling.targets.ORDERS or a tuple of steps, got "
                        f"{type(order).__name__}")  # fmt: skip
    return parse_order(order, filters)


def order_steps(steps: tuple) -> tuple[tuple[int, int, int, int], bool]:
    """The parsed order as stage 2's step codes (4 slots) and whether its top-p step follows the temperature."""
    codes, scaled, p_scaled = [], False, False
    names = {"top_k": STEP_TOP_K, "top_p": STEP_TOP_P, "min_p": STEP_MIN_P}
    for step in steps:
        if step == "temperature":
            codes.append(STEP_TEMPERATURE)
            scaled = True
            continue
        for j, f in enumerate(step if isinstance(step, tuple) else (step,)):
            codes.append(names[f] | (STEP_JOINT if j else 0) | (STEP_SCALED if scaled else 0))
            p_scaled = p_scaled or (f == "top_p" and scaled)
    return tuple(codes + [0] * (4 - len(codes))), p_scaled


def _needs_full_mass(steps: tuple, on: dict[str, np.ndarray]) -> bool:
    """Whether some row's top-p step sees the whole row (no active filter in an earlier step)."""
    before = np.zeros_like(on["top_p"])
    for step in steps:
        group = step if isinstance(step, tuple) else (step,)
        if "top_p" in group:
            return bool((on["top_p"] & ~before).any())
        for f in group:
            if f in on:
                before = before | on[f]
    return False


def truncation_rows(top_k, top_p, min_p, order, batch: int, V: int, device: torch.device) -> Truncation | None:
    """Check the filters for ``batch`` rows of ``V`` tokens on ``device``: ``None`` for the plain sampler (no filter,
    or none that truncates any row), else the :class:`Truncation`.  Nothing is launched.

    Raises
    ------
    TypeError
        ``top_k`` not an int or an integer tensor; ``top_p`` / ``min_p`` not a number or a floating tensor;
        ``order`` not a name or a tuple.
    ValueError
        A tensor not of shape ``(B,)`` or on another device; ``k < 1``, or above :data:`MAX_TOP_K` and below ``V``;
        ``top_p`` outside ``(0, 1]``, ``min_p`` outside ``[0, 1]`` (NaN included); an unknown ``order``.
    """
    ks = check_top_k(top_k, batch, V, device)
    ps = _check_probability("top_p", top_p, batch, device, low_open=True)
    qs = _check_probability("min_p", min_p, batch, device, low_open=False)
    given = tuple(n for n, v in (("top_k", ks), ("top_p", ps), ("min_p", qs)) if v is not None)
    steps = check_order(order, given) if (order is not None or given) else ()
    none = np.zeros(batch, dtype=bool)
    on = {
        "top_k": ks > 0 if ks is not None else none,
        "top_p": ps < 1.0 if ps is not None else none,
        "min_p": qs > 0.0 if qs is not None else none,
    }
    truncated = on["top_k"] | on["top_p"] | on["min_p"]
    if not truncated.any():
        return None
    k_host = ks if ks is not None else np.zeros(batch, dtype=np.int64)
    p_host = np.where(on["top_p"], ps if ps is not None else 2.0, 2.0)
    codes, p_scaled = order_steps(steps)
    kept = int(k_host[truncated].max()) if on["top_k"][truncated].all() else ASSUMED_KEPT
    k, p, log_min_p = _device_rows(top_k, top_p, min_p, batch, V, device)
    plain = None
    if not truncated.all():
        plain = (k == 0) & (p >= 1.0) & (log_min_p == -math.inf)
    return Truncation(
        k=k,
        p=p,
        log_min_p=log_min_p,
        host={"k": k_host, "p": np.where(on["top_p"], p_host, np.nan),
              "min_p": np.where(on["min_p"], qs if qs is not None else np.nan, np.nan), "order": steps},
        steps=codes,
        plain_rows=plain,
        kept=kept,
        mass=_needs_full_mass(steps, on),
        top_p_scaled=p_scaled,
    )  # fmt: skip


def _device_rows(top_k, top_p, min_p, batch: int, V: int, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The checked filters per row on the device -- int32 ``k`` (0: none), float64 ``p`` (2: none), float64
    ``log(min_p)`` (``-inf``: none) -- filled there for a number, computed there from a tensor: no copy from the host
    (which would wait for the stream)."""

    def rows(value, dtype):
        if isinstance(value, torch.Tensor):
            return value.detach().to(device=device, dtype=dtype)
        return torch.full((batch,), value if value is not None else 0, dtype=dtype, device=device)

    k = rows(top_k, torch.int64)
    k = torch.where(k >= V, 0, k).to(torch.int32) if top_k is not None else k.to(torch.int32)
    p = rows(top_p, torch.float64)
    p = torch.where(p < 1.0, p, 2.0) if top_p is not None else p + 2.0
    q = rows(min_p, torch.float64)
    log_min_p = torch.where(q > 0, torch.log(torch.where(q > 0, q, 1.0)), -math.inf)
    return k, p, log_min_p


# --------------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------------


def row_temperatures(request: Request, batch: int, device: torch.device) -> torch.Tensor:
    """The rows' temperatures in float64 on the device, as the law takes them (the caller's values)."""
    t = request.temperature
    if isinstance(t, torch.Tensor):
        return t.detach().to(device=device, dtype=torch.float64).reshape(-1).expand(batch).contiguous()
    return torch.full((batch,), float(t), dtype=torch.float64, device=device)


def relative_error(block_v: int, T: int, N: int) -> float:
    """The relative error bound ``e`` of stage 2's float64 masses (``proofs/truncation.md``, Lemma 2): per-term
    rounding, the tile sums (``block_v``), the sum over ``T`` tiles and over ``N`` candidates."""
    return (MASS_TERM_ERROR + block_v + T + N) * U64 * 1.01


def _params(request: Request, trunc: Truncation, temp: torch.Tensor, rows: torch.Tensor | None = None) -> dict:
    def pick(x):
        return x if rows is None else x[rows]

    return {"k": pick(trunc.k), "p": pick(trunc.p), "log_min_p": pick(trunc.log_min_p), "temp": pick(temp),
            "inv_temp": pick(request.inv_temp)}  # fmt: skip


def _list_for(trunc: Truncation, block_v: int, V: int) -> int:
    return LIST_OVERRIDE if LIST_OVERRIDE is not None else list_length(trunc.kept, block_v, V)


def sample_truncated(request: Request, hidden: torch.Tensor, weight: torch.Tensor, trunc: Truncation,
                     tiles: TileConfig | None = None) -> torch.Tensor:  # fmt: skip
    """Stage 1 on ``hidden @ weight.T``, stage 2, the fallback and the finish; the tokens, int64 ``[B, S]``."""
    B = hidden.shape[0]
    V = weight.shape[0]
    full = trunc.plain_rows is not None
    if check_tiles(tiles) is None:
        tiles = truncation_tiles(B, hidden.element_size(), full)
    else:
        tiles = TileConfig(tiles.block_b, tiles.block_v, tiles.block_d, tiles.num_warps, tiles.num_stages,
                           max_registers=tiles.max_registers)  # fmt: skip
    temp = row_temperatures(request, B, hidden.device)
    LIST = min(_list_for(trunc, tiles.block_v, V), tiles.block_v)
    lo, hi = request.seed_words
    lists = launch_truncation_stage1(hidden, weight, request.inv_temp, _mass_scale(trunc, temp), lo, hi,
                                     request.num_samples, LIST, tiles, mass=trunc.mass and LIST < tiles.block_v,
                                     full=full, noise=request.noise)  # fmt: skip

    def logits_of(status: torch.Tensor) -> torch.Tensor:
        return launch_write_logits(hidden, weight, tiles, status)

    return _finish(request, trunc, lists, temp, tiles.block_v, V, logits_of)


def sample_truncated_from_logits(request: Request, logits: torch.Tensor, trunc: Truncation, block_b: int | None = None,
                                 block_v: int | None = None) -> torch.Tensor:  # fmt: skip
    """Stage 1 on given ``logits [B, V]`` (block sizes as :func:`~flashsampling.kernels.tiles.logits_tiles`), stage 2,
    the fallback and the finish; the tokens, int64 ``[B, S]``."""
    B, V = logits.shape
    bb, bv = logits_tiles(B, V, block_b, block_v)
    temp = row_temperatures(request, B, logits.device)
    LIST = min(_list_for(trunc, bv, V), bv)
    lo, hi = request.seed_words
    lists = launch_truncation_logits_stage1(logits, request.inv_temp, _mass_scale(trunc, temp), lo, hi,
                                            request.num_samples, LIST, bb, bv, mass=trunc.mass and LIST < bv,
                                            full=trunc.plain_rows is not None, noise=request.noise)  # fmt: skip
    return _finish(request, trunc, lists, temp, bv, V, lambda status: logits)


def _mass_scale(trunc: Truncation, temp: torch.Tensor) -> torch.Tensor:
    """Per row the scale of the top-p step's weights: ``T`` after the temperature (1 for a greedy row), else 1."""
    if trunc.top_p_scaled:
        return torch.where(temp > 0, temp, torch.ones_like(temp))
    return torch.ones_like(temp)


def _finish(request: Request, trunc: Truncation, lists: dict, temp: torch.Tensor, block_v: int, V: int,
            logits_of) -> torch.Tensor:  # fmt: skip
    """Stage 2 on the lists, the plain rows, the device fallback on the rows stage 2 left undecided (their whole
    logits, ``logits_of(status)``: every launch made, none waited for), then the finish: with ``host_checks`` the
    flags raised and the rows whose float64 decision was within its bound redone by the law on the host, in the
    call's one synchronization.  The tokens, int64 ``[B, S]``."""
    lo, hi = request.seed_words
    S = request.num_samples
    T, LIST = lists["T"], lists["list"]
    N = T * LIST
    edge = LIST if LIST < block_v else 0  # a list as wide as its tile is complete: no token is left out
    params = _params(request, trunc, temp)
    tokens, row_flags, status = launch_truncation_stage2(
        lists["cand_z"], lists["cand_i"], lists["mass"], lists["flags"], params, trunc.steps, S, lo, hi, V, LIST=edge,
        mass=trunc.mass and edge > 0, top_p_scaled=trunc.top_p_scaled, rel_err=relative_error(block_v, T, N),
        noise=request.noise,
    )  # fmt: skip
    if trunc.plain_rows is not None:
        part_max, part_key, part_idx, _ = lists["plain"]
        plain_tokens, plain_flags = reduce_tiles(part_max, part_key, part_idx, lists["flags"], V)
        rows = trunc.plain_rows[:, None]
        tokens = torch.where(rows, plain_tokens, tokens)
        row_flags = torch.where(rows, plain_flags, row_flags)
    z = logits_of(status)
    no_flags = torch.zeros((z.shape[0], 1), dtype=torch.int32, device=z.device)  # one (clear) flag per row
    no_mass = torch.zeros(1, dtype=torch.float64, device=z.device)
    launch_truncation_stage2(z, z, no_mass, no_flags, params, trunc.steps, S, lo, hi, V, LIST=0, mass=False,
                             top_p_scaled=trunc.top_p_scaled, rel_err=relative_error(0, 1, V), noise=request.noise,
                             columns=True, redo=(tokens, row_flags, status))  # fmt: skip
    if request.host_checks:
        request.finish(row_flags)  # the call's one synchronization
        undecided = status == STATUS_UNDECIDED
        if request.temp_flags is not None:
            undecided &= request.temp_flags == 0
        rows = undecided.nonzero().flatten()
        if rows.numel():
            tokens[rows] = host_decided(request, trunc, z, rows, temp, V)
    return tokens


def host_decided(request: Request, trunc: Truncation, z: torch.Tensor, rows: torch.Tensor, temp: torch.Tensor,
                 V: int) -> torch.Tensor:  # fmt: skip
    """The tokens ``[n, S]`` of ``rows`` whose float64 decision on the whole row was within its error bound: the
    threshold from the law itself on the host (:func:`exact_threshold`), the draw by stage 2 with it given (the
    noise keyed by the original rows)."""
    lo, hi = request.seed_words
    zr = z[rows].float().contiguous()
    z_host = zr.cpu().numpy()
    host = trunc.host
    given = [exact_threshold(z_host[j], float(temp[r]), host["k"][r], host["p"][r], host["min_p"][r], host["order"])
             for j, r in enumerate(rows.tolist())]  # fmt: skip
    gv = torch.tensor([g[0] for g in given], dtype=torch.int32, device=z.device)
    gb = torch.tensor([g[1] for g in given], dtype=torch.int32, device=z.device)
    params = _params(request, trunc, temp, rows)
    no_flags = torch.zeros((rows.numel(), 1), dtype=torch.int32, device=z.device)
    tokens, _, _ = launch_truncation_stage2(
        zr, zr, torch.zeros(1, dtype=torch.float64, device=z.device), no_flags, params, trunc.steps,
        request.num_samples, lo, hi, V, LIST=0, mass=False,
        top_p_scaled=trunc.top_p_scaled, rel_err=relative_error(0, 1, V), row_ids=rows.to(torch.int32),
        given=(gv, gb), noise=request.noise, columns=True,
    )  # fmt: skip
    return tokens


def exact_threshold(z: np.ndarray, temperature: float, k: int, p: float, min_p: float, order) -> tuple[int, int]:
    """The threshold ``(ordered level, index bound)`` of one row's kept set, from the law itself
    (:func:`~flashsampling.twin.kept_mask` on the float32 logits ``z [V]``; ``k = 0`` and ``nan`` mean no filter): the
    last kept token in the order."""
    law = kept_mask(z[None, :], temperature, k, p, min_p, order)[0]
    level = z[law].min()
    return int(ordered_np(np.float32(level))), int(np.flatnonzero(law & (z == level)).max())
