"""Exact float64 laws of temperature, top-k, top-p (nucleus) and min-p sampling, and their compositions.

Definitions (``docs/targets.md`` has the conventions table with its sources)
----------------------------------------------------------------------------
The logits ``z`` of a row are taken exactly as given (float32, bf16, fp16 values are exact in float64);
``-inf`` marks a masked token, which is never kept.  ``m = max z``.  At scale ``t`` (``t = 1`` before
the temperature step, ``t = T`` after it) the weights are

    w_i = exp((z_i - m) / t)        (float64; w = 1 at the maxima, 0 for masked or underflowed tokens)

and every filter keeps a subset ``K`` of the tokens kept so far:

* top-k:  rank the kept tokens by logit, highest first.  ``ties="all"`` keeps ``i`` iff fewer than
  ``k`` kept tokens have a strictly larger logit (every token tied at the k-th logit stays);
  ``"low_index"`` / ``"high_index"`` rank tied logits by index (lower / higher index first) and keep
  exactly ``min(k, |K|)`` tokens.
* top-p:  with ``S`` the kept weight and ``M_i`` the kept weight ranked before ``i`` (``ties="all"``:
  with a strictly larger logit; otherwise by the index ranking above), ``crossing="keep"`` keeps ``i``
  iff ``M_i < p S`` (``strict=True``) or ``M_i <= p S`` (the token that crosses ``p`` stays), and
  ``crossing="drop"`` keeps ``i`` iff ``M_i + w_i < p S`` (or ``<=``; with ``ties="all"`` ``w_i`` is the
  weight of ``i``'s whole tie group).  The first-ranked token (group) is always kept.
* min-p:  keeps ``i`` iff ``w_i >= p`` (``strict=False``) or ``w_i > p``, i.e. ``P(i) >= p max_j P(j)``
  on the current law; the maxima are always kept.
* temperature:  switches the scale to ``t = T``; with ``T = 0`` only the maxima stay (greedy).

The law is ``P(i) = w_i(T) / sum_{j in K} w_j(T)`` on the final kept set ``K``.  Filters run in
``order``, each on the law left by the previous ones (renormalized); a tuple of filters inside
``order`` is a *joint* step: each of them is computed on the same law and the kept sets intersect.

Exactness
---------
Every keep/drop decision is an exact function of the float64 weights: cumulative masses are compared
with ``p S`` in float64 with an error bound, and rows where the bound cannot decide are recomputed in
exact integer arithmetic, so a mass that equals ``p S`` exactly (flat logits, ``p = 1/2``) is decided
as the definition says.  Tied logits give bit-equal weights.  The final normalization is float64
(relative error ``<= V 2^-53`` per entry).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ._inputs import (
    check_bool,
    check_choice,
    check_k,
    check_probability,
    check_temperature,
    float_logits,
    per_row,
)

__all__ = [
    "CROSSINGS",
    "DEFAULT_ORDER",
    "FILTERS",
    "ORDERS",
    "TIES",
    "min_p_law",
    "sampling_law",
    "top_k_law",
    "top_p_law",
]

#: Tie conventions at the cut: keep every tied token, or rank tied logits by index and keep exactly k.
TIES = ("all", "low_index", "high_index")
#: Whether the token whose mass crosses p is kept ("keep": smallest set with mass >= p) or not.
CROSSINGS = ("keep", "drop")
#: The filters a composition may name, besides ``"temperature"``.
FILTERS = ("top_k", "top_p", "min_p")
#: Temperature, then top-k, then top-p, then min-p, each on the renormalized law of the previous step.
DEFAULT_ORDER = ("temperature", "top_k", "top_p", "min_p")
#: The orders of well-known implementations (``docs/targets.md`` cites each from its source).
ORDERS = {
    "transformers": DEFAULT_ORDER,
    "vllm": ("temperature", "min_p", "top_k", "top_p"),
    "llama.cpp": ("top_k", "top_p", "min_p", "temperature"),
    "joint": ("temperature", ("top_k", "top_p", "min_p")),
}

_U = 2.0**-53  # unit roundoff of float64
_TINY = 2.0**-1074  # smallest subnormal: the absolute rounding error of a subnormal weight


def parse_order(order, given: tuple[str, ...] = ()) -> tuple:
    """``order`` (a name from ``ORDERS`` or a tuple) as a tuple of steps: ``"temperature"`` or a tuple of filters.

    Raises ``ValueError`` (naming ``order``) for an unknown name or step, a repeated step, a missing or
    grouped ``"temperature"``, or a filter in ``given`` that the order does not place.
    """
    if isinstance(order, str):
        if order not in ORDERS:
            raise ValueError(f"order must be one of {tuple(ORDERS)} or a tuple of steps, got order={order!r}")
        order = ORDERS[order]
    if not isinstance(order, (tuple, list)) or not order:
        raise ValueError(f"order must be a non-empty tuple of steps from {('temperature', *FILTERS)}, got {order!r}")
    steps, seen = [], []
    for step in order:
        group = tuple(step) if isinstance(step, (tuple, list)) else None
        names = group if group is not None else (step,)
        for name in names:
            if name not in ("temperature", *FILTERS):
                raise ValueError(f"order has an unknown step {name!r}; steps are {('temperature', *FILTERS)}")
            if name in seen:
                raise ValueError(f"order names {name!r} twice: {order!r}")
            if name == "temperature" and group is not None:
                raise ValueError(f"order: 'temperature' cannot be inside a joint group, got {order!r}")
            seen.append(name)
        if group is not None and not group:
            raise ValueError(f"order has an empty joint group: {order!r}")
        steps.append(group if group is not None else step)
    if "temperature" not in seen:
        raise ValueError(f"order must contain 'temperature' exactly once, got {order!r}")
    missing = [f for f in given if f not in seen]
    if missing:
        raise ValueError(f"order {tuple(order)!r} does not place {missing}; add them or leave them None")
    return tuple(steps)


def sampling_law(
    logits,
    temperature=1.0,
    *,
    top_k=None,
    top_p=None,
    min_p=None,
    order="transformers",
    top_k_ties: str = "all",
    top_p_ties: str = "all",
    top_p_crossing: str = "keep",
    top_p_strict: bool = True,
    min_p_strict: bool = False,
) -> np.ndarray:
    r"""Float64 law of temperature + top-k + top-p + min-p sampling, composed in ``order``.

    Parameters
    ----------
    logits : array or tensor, float, shape (..., V)
        The logits exactly as the sampler sees them (e.g. float32); ``-inf`` masks a token.
    temperature : float or array (...,)
        ``T >= 0`` per row; ``T = 0`` is greedy (the maxima, shared uniformly).
    top_k : int or int array (...,), optional
        ``k >= 1``; ``k >= V`` keeps everything.  ``None`` disables the filter.
    top_p : float or array (...,), optional
        ``p`` in ``(0, 1]``; ``p = 1`` keeps every token of positive weight.
    min_p : float or array (...,), optional
        ``p`` in ``[0, 1]``; ``0`` keeps everything, ``1`` keeps the maxima.
    order : str or tuple
        A name from :data:`ORDERS` (``"transformers"``, the default: temperature, top-k, top-p, min-p;
        ``"vllm"``: temperature, min-p, top-k, top-p; ``"llama.cpp"``: top-k, top-p, min-p, then
        temperature; ``"joint"``: temperature, then all filters on one law) or a tuple of steps, where
        a nested tuple of filters is a joint step.
    top_k_ties, top_p_ties : {"all", "low_index", "high_index"}
        Tokens tied at the cut: all kept, or ranked by index (lower / higher first) and cut exactly.
    top_p_crossing : {"keep", "drop"}
        Whether the token whose cumulative mass crosses ``p`` is kept.
    top_p_strict, min_p_strict : bool
        Strict (``<``, ``>``) or non-strict (``<=``, ``>=``) comparison at the threshold.

    Returns
    -------
    numpy.ndarray, float64, shape (..., V)
        ``P(i) = w_i(T) / sum_{j in K} w_j(T)`` on the kept set ``K`` (module docstring).

    Raises
    ------
    TypeError
        Logits not floating-point; ``top_k`` not an integer; a parameter not a number.
    ValueError
        NaN or ``+inf`` logits, an all-masked row, ``top_k < 1``, ``top_p`` outside ``(0, 1]``,
        ``min_p`` outside ``[0, 1]``, a negative or non-finite temperature, a parameter whose shape
        is neither scalar nor the batch shape, an unknown convention or a bad ``order``.

    Notes
    -----
    Top-k and min-p commute with every other filter (they cut by rank and by ratio to the maximum,
    which earlier cuts never change); top-p does not, because ``S`` shrinks when top-k or min-p ran
    first, and top-p and min-p depend on the temperature, so their position relative to it matters.

    References
    ----------
    .. [1] A. Fan, M. Lewis, Y. Dauphin, "Hierarchical Neural Story Generation", ACL 2018, Sec. 5
       (top-k sampling).
    .. [2] A. Holtzman, J. Buys, L. Du, M. Forbes, Y. Choi, "The Curious Case of Neural Text
       Degeneration", ICLR 2020, Sec. 3.1, Eq. (2) (the smallest set of mass >= p).
    .. [3] M. N. Nguyen et al., "Turning Up the Heat: Min-p Sampling for Creative and Coherent LLM
       Outputs", arXiv:2407.01082 (2024), Sec. 3.

    Examples
    --------
    >>> import numpy as np
    >>> z = np.array([2.0, 1.0, 0.0, -1.0])           # softmax: 0.644, 0.237, 0.087, 0.032
    >>> sampling_law(z, top_p=0.7).round(6).tolist()   # the 2nd token crosses 0.7 and is kept
    [0.731059, 0.268941, 0.0, 0.0]
    >>> sampling_law(z, top_p=0.7, top_p_crossing="drop").tolist()
    [1.0, 0.0, 0.0, 0.0]
    >>> sampling_law(np.zeros(4), top_p=0.5, top_p_ties="low_index", top_p_strict=False).round(6).tolist()
    [0.333333, 0.333333, 0.333333, 0.0]
    >>> sampling_law(np.zeros(4), top_k=1, top_k_ties="low_index").tolist()
    [1.0, 0.0, 0.0, 0.0]
    """
    k_ties = check_choice(top_k_ties, "top_k_ties", TIES)
    p_ties = check_choice(top_p_ties, "top_p_ties", TIES)
    crossing = check_choice(top_p_crossing, "top_p_crossing", CROSSINGS)
    p_strict = check_bool(top_p_strict, "top_p_strict")
    mp_strict = check_bool(min_p_strict, "min_p_strict")
    z, batch_shape = float_logits(logits)
    t = per_row(check_temperature(temperature), "temperature", batch_shape)
    filters = {}
    if top_k is not None:
        filters["top_k"] = (per_row(check_k(top_k, "top_k"), "top_k", batch_shape), k_ties)
    if top_p is not None:
        p = per_row(check_probability(top_p, "top_p", low=0.0, low_open=True), "top_p", batch_shape)
        filters["top_p"] = (p, p_ties, crossing, p_strict)
    if min_p is not None:
        mp = per_row(check_probability(min_p, "min_p", low=0.0, low_open=False), "min_p", batch_shape)
        filters["min_p"] = (mp, mp_strict)
    steps = parse_order(order, tuple(filters))
    probs = _law(z, t, filters, steps)
    return probs.reshape(*batch_shape, z.shape[1])


def top_k_law(logits, k, *, temperature=1.0, ties: str = "all") -> np.ndarray:
    """Float64 law of top-k sampling at temperature ``T``: :func:`sampling_law` with only ``top_k``.

    Parameters
    ----------
    logits : array or tensor, float, shape (..., V)
    k : int or int array (...,)
        ``k >= 1`` tokens kept (``k >= V``: all); with ``ties="all"`` more when logits tie at the cut.
    temperature : float or array (...,)
    ties : {"all", "low_index", "high_index"}

    Returns
    -------
    numpy.ndarray, float64, shape (..., V)

    Raises
    ------
    TypeError, ValueError
        As :func:`sampling_law` (``k`` reported as ``top_k``).

    Examples
    --------
    >>> top_k_law([2.0, 1.0, 1.0, 0.0], 2).round(6).tolist()     # the tie at the 2nd logit is kept
    [0.576117, 0.211942, 0.211942, 0.0]
    >>> top_k_law([2.0, 1.0, 1.0, 0.0], 2, ties="high_index").round(6).tolist()
    [0.731059, 0.0, 0.268941, 0.0]
    """
    return sampling_law(logits, temperature, top_k=_required(k, "top_k"), top_k_ties=ties)


def top_p_law(
    logits, p, *, temperature=1.0, ties: str = "all", crossing: str = "keep", strict: bool = True
) -> np.ndarray:
    """Float64 law of top-p (nucleus) sampling at temperature ``T`` (temperature first).

    Parameters
    ----------
    logits : array or tensor, float, shape (..., V)
    p : float or array (...,)
        In ``(0, 1]``.
    temperature : float or array (...,)
    ties : {"all", "low_index", "high_index"}
    crossing : {"keep", "drop"}
    strict : bool

    Returns
    -------
    numpy.ndarray, float64, shape (..., V)

    Raises
    ------
    TypeError, ValueError
        As :func:`sampling_law` (``p`` reported as ``top_p``).

    Examples
    --------
    >>> top_p_law([0.0, 0.0, 0.0, 0.0], 0.5).tolist()                      # all tied: all kept
    [0.25, 0.25, 0.25, 0.25]
    >>> top_p_law([0.0, 0.0, 0.0, 0.0], 0.5, ties="low_index").tolist()     # M = 0, 1/4, 1/2, 3/4
    [0.5, 0.5, 0.0, 0.0]
    """
    return sampling_law(
        logits, temperature, top_p=_required(p, "top_p"), top_p_ties=ties, top_p_crossing=crossing, top_p_strict=strict
    )


def min_p_law(logits, p, *, temperature=1.0, strict: bool = False) -> np.ndarray:
    """Float64 law of min-p sampling at temperature ``T`` (temperature first): keep ``P(i) >= p max P``.

    Parameters
    ----------
    logits : array or tensor, float, shape (..., V)
    p : float or array (...,)
        In ``[0, 1]``.
    temperature : float or array (...,)
    strict : bool
        ``P(i) > p max P`` instead of ``>=``.

    Returns
    -------
    numpy.ndarray, float64, shape (..., V)

    Raises
    ------
    TypeError, ValueError
        As :func:`sampling_law` (``p`` reported as ``min_p``).

    Examples
    --------
    >>> z = np.log(np.array([0.5, 0.25, 0.25]))
    >>> min_p_law(z, 0.5).round(6).tolist(), min_p_law(z, 0.5, strict=True).round(6).tolist()
    ([0.5, 0.25, 0.25], [1.0, 0.0, 0.0])
    """
    return sampling_law(logits, temperature, min_p=_required(p, "min_p"), min_p_strict=strict)


def _required(value, name: str):
    if value is None:
        raise TypeError(f"{name} must be a number or an array of numbers, got None")
    return value


def _law(z: np.ndarray, t: np.ndarray, filters: dict, steps: tuple) -> np.ndarray:
    """The composed law on rows ``z [R, V]`` with per-row temperature ``t [R]``."""
    m = z.max(axis=1, keepdims=True)
    is_max = z == m
    kept = np.isfinite(z)
    scale = np.ones_like(t)
    for step in steps:
        if step == "temperature":
            scale = t
            kept &= is_max | (t != 0)[:, None]
            continue
        group = step if isinstance(step, tuple) else (step,)
        active = [f for f in group if f in filters]
        if not active:
            continue
        w = _weights(z, m, scale, kept)
        new = kept.copy()
        for name in active:
            new &= _KEEP[name](z, w, kept, is_max, *filters[name])
        kept = new
    w = _weights(z, m, t, kept)
    return w / w.sum(axis=1, keepdims=True)


def _weights(z: np.ndarray, m: np.ndarray, scale: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """``exp((z - m) / t)`` on the kept tokens, 0 elsewhere (greedy rows keep only maxima: weight 1)."""
    t = np.where(scale == 0, 1.0, scale)[:, None]
    with np.errstate(invalid="ignore", over="ignore"):
        d = (z - m) / t
    return np.where(kept, np.exp(np.where(kept, d, -np.inf)), 0.0)


def _ranking(z: np.ndarray, kept: np.ndarray, ties: str) -> tuple[np.ndarray, np.ndarray]:
    """Permutation ``[R, V]`` listing kept tokens by decreasing logit (ties per ``ties``), masked last."""
    key = np.where(kept, z, -np.inf)
    idx = np.broadcast_to(np.arange(z.shape[1]), z.shape)
    perm = np.lexsort((-idx if ties == "high_index" else idx, -key), axis=-1)
    return perm, np.take_along_axis(key, perm, axis=1)


def _level_bounds(zs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For sorted rows ``zs``, the first and last position of each entry's run of equal values."""
    r, v = zs.shape
    pos = np.broadcast_to(np.arange(v), zs.shape)
    new = np.ones(zs.shape, dtype=bool)
    new[:, 1:] = zs[:, 1:] != zs[:, :-1]
    start = np.maximum.accumulate(np.where(new, pos, 0), axis=1)
    last = np.ones(zs.shape, dtype=bool)
    last[:, :-1] = new[:, 1:]
    end = np.minimum.accumulate(np.where(last, pos, v)[:, ::-1], axis=1)[:, ::-1]
    return start, end


def _unsort(sorted_mask: np.ndarray, perm: np.ndarray) -> np.ndarray:
    out = np.empty_like(sorted_mask)
    np.put_along_axis(out, perm, sorted_mask, axis=1)
    return out


def _keep_top_k(z, w, kept, is_max, k: np.ndarray, ties: str) -> np.ndarray:
    perm, zs = _ranking(z, kept, ties)
    if ties == "all":
        rank = _level_bounds(zs)[0]  # kept tokens with a strictly larger logit
    else:
        rank = np.broadcast_to(np.arange(z.shape[1]), z.shape)
    return _unsort(rank < k[:, None], perm) & kept


def _keep_min_p(z, w, kept, is_max, p: np.ndarray, strict: bool) -> np.ndarray:
    above = w > p[:, None] if strict else w >= p[:, None]
    return (above | is_max) & kept


def _keep_top_p(z, w, kept, is_max, p: np.ndarray, ties: str, crossing: str, strict: bool) -> np.ndarray:
    perm, zs = _ranking(z, kept, ties)
    ws = np.take_along_axis(w, perm, axis=1)
    r, v = ws.shape
    cum = np.cumsum(ws, axis=1)
    before = np.zeros_like(cum)
    before[:, 1:] = cum[:, :-1]
    total = cum[:, -1:]
    if ties == "all":
        start, end = _level_bounds(zs)
        x = np.take_along_axis(before, start, axis=1) if crossing == "keep" else np.take_along_axis(cum, end, axis=1)
    else:
        start = end = np.broadcast_to(np.arange(v), ws.shape)
        x = before if crossing == "keep" else cum
    threshold = p[:, None] * total
    keep = x < threshold if strict else x <= threshold
    # Recursive summation error <= (j-1) u * C_j per prefix, V u * S for the total, u for the product:
    # decide in exact arithmetic where the margin is within (a generous multiple of) that bound.
    kept_sorted = np.take_along_axis(kept, perm, axis=1)
    bound = 3.0 * (v + 1) * _U * (x + total) + (v + 1) * _TINY
    unsure = ((np.abs(x - threshold) <= bound) & kept_sorted).any(axis=1)
    for row in np.flatnonzero(unsure):
        keep[row] = _exact_top_p_row(ws[row], start[row], end[row], float(p[row]), crossing, strict)
    keep |= start == 0  # the first-ranked token (its tie group with ties='all') always stays
    return _unsort(keep, perm) & kept


def _exact_top_p_row(ws: np.ndarray, start: np.ndarray, end: np.ndarray, p: float, crossing: str, strict: bool):
    """Top-p decisions of one sorted row in exact arithmetic: ``x * den (<|<=) num * S`` on integer weights."""
    mantissa, exponent = np.frexp(ws)
    # w = mantissa * 2**exponent with mantissa * 2**53 an integer; scale every weight by 2**(1074 + 53).
    ints = [int(mi * 2.0**53) << int(e + 1074) if mi else 0 for mi, e in zip(mantissa, exponent)]
    cum, acc = [], 0
    for i in ints:
        acc += i
        cum.append(acc)
    total = acc
    frac = Fraction(p)
    num, den = frac.numerator, frac.denominator
    out = np.empty(ws.shape, dtype=bool)
    for j in range(ws.size):
        x = (cum[start[j]] - ints[start[j]]) if crossing == "keep" else cum[end[j]]
        lhs, rhs = x * den, num * total
        out[j] = lhs < rhs if strict else lhs <= rhs
    return out


_KEEP = {"top_k": _keep_top_k, "top_p": _keep_top_p, "min_p": _keep_min_p}
