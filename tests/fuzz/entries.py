"""The entry points the fuzzer calls: for each, a strategy that draws a :class:`Call`, how to run it, which rows the
kernels must flag, and the law checks of its result (:mod:`tests.fuzz.oracle`).

Single process: ``sample``, ``sample_from_logits``, ``sample_grouped``, ``sample_grouped_from_logits``,
``sample_online``, ``OnlineSampler`` (a plan of chunks: in any order, overlapping, with gaps, of no columns, with a
changed ``hidden``), ``sample_tp``/``sample_tp_from_logits`` in a world of one, the tile inverse-CDF entry points,
and the target laws of :mod:`flashsampling.targets`.  Worlds of 2 to 4 ranks are :mod:`tests.fuzz.worlds`'.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import torch
from hypothesis import strategies as st

import flashsampling
from flashsampling import targets
from flashsampling.tile_cdf import sample_fused_tile_cdf, sample_tile_cdf_from_logits
from flashsampling.twin import inverse_temperature32

from . import arguments as A
from .oracle import (
    bad_logit_rows,
    exact_lm_head_logits,
    greedy_on_maximum,
    inverse_temperatures,
    logsumexp_close,
    never_masked,
    same_on_rows,
    tokens_in_range,
)
from .recipes import Arg, TensorRecipe, build, lit, tensor

_F32_MAX = float(np.finfo(np.float32).max)


@dataclasses.dataclass(frozen=True)
class Call:
    """A drawn call: the entry point's name, its arguments (keyword -> :class:`Arg`, in call order), an
    entry-specific ``plan`` (an online sampler's chunks, a world's shards), patterns of a refusal the plan itself
    must get (``plan_refuse``), and the torch seed set before the call (a ``seed=None`` draw is replayed)."""

    entry: str
    args: tuple[tuple[str, Arg], ...]
    plan: tuple = ()
    plan_refuse: tuple[str, ...] = ()
    torch_seed: int = 0

    @property
    def refuse(self) -> tuple[str, ...]:
        """Patterns of the expected refusal, one per bad argument (empty: no argument is bad)."""
        return tuple(dict.fromkeys([p for _, a in self.args for p in a.refuse] + list(self.plan_refuse)))

    def shown(self) -> str:
        args = ", ".join(f"{k}={a.shown}" if not k.startswith("_") else a.shown for k, a in self.args)
        plan = f" plan={list(self.plan)}" if self.plan else ""
        return f"{self.entry}({args}){plan}"

    def arg(self, name: str) -> Arg | None:
        return dict(self.args).get(name)


@dataclasses.dataclass
class Rows:
    """What the kernels must find in the rows (an argument check did not refuse the call): ``bad`` rows (raise
    with ``host_checks``), ``unknown`` rows (an LM head whose fp32 accumulation may or may not overflow: either
    outcome is right), and ``refuse``: patterns of a refusal due whatever ``host_checks`` (the tile inverse-CDF's
    zero temperature)."""

    bad: np.ndarray
    unknown: np.ndarray
    refuse: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Entry:
    """An entry point: ``draw`` (a strategy of :class:`Call`), ``run(call, built)``, ``rows(call, built) ->
    Rows | None`` (``None``: no kernel-found rows, as for the target laws) and ``check(call, built, result, rows) ->
    (outcome, detail)``."""

    name: str
    draw: Callable
    run: Callable
    rows: Callable
    check: Callable


# --------------------------------------------------------------------------------------------
# Shared readings of the built arguments
# --------------------------------------------------------------------------------------------


def resolved_seed(call: Call, built: dict) -> int:
    """The seed the call used: the int, a tensor's value, or torch's draw after
    ``torch.manual_seed(call.torch_seed)``."""
    s = built.get("seed")
    if s is None:
        torch.manual_seed(call.torch_seed)
        return flashsampling._validate.check_seed(None)
    if isinstance(s, torch.Tensor):
        return int(s.item()) & (2**64 - 1)
    return int(s)


def _int(x, default: int) -> int:
    return default if x is None else int(x)


def logits_rows(z32: np.ndarray, temperature, *, lm_head: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(inv, bad)`` per row for float32 logits and a temperature of a kind the entry point takes."""
    inv, tbad, _ = inverse_temperatures(temperature, z32.shape[0])
    return inv, tbad | bad_logit_rows(z32, inv, lm_head=lm_head)


def temps_of(temperature, B: int) -> np.ndarray:
    """float32 temperatures per row (1 on a bad row) for the twins, which invert them as the launcher does."""
    return inverse_temperatures(temperature, B)[2]


def z32_of(logits: torch.Tensor) -> np.ndarray:
    return logits.detach().to(torch.float32).cpu().numpy()


@dataclasses.dataclass
class Head:
    """An LM head's logits as the oracle knows them: float64 ``z``, float32 ``z32`` (inf where it overflows),
    whether exact, and the fp32 error bound per row (greedy slack)."""

    z: np.ndarray
    z32: np.ndarray
    exact: bool
    slack: np.ndarray
    unknown: np.ndarray


def lm_head(hidden: torch.Tensor, weight: torch.Tensor) -> Head:
    from flashsampling.reference import fp32_logit_error_bound

    z, exact = exact_lm_head_logits(hidden, weight)
    h = np.abs(hidden.detach().cpu().to(torch.float64).numpy())
    w = np.abs(weight.detach().cpu().to(torch.float64).numpy())
    with np.errstate(over="ignore", invalid="ignore"):
        z32 = z.astype(np.float32)
        reach = h @ w.T  # the largest partial sum any accumulation order can meet
        slack = 2 * np.nan_to_num(fp32_logit_error_bound(hidden, weight), posinf=np.inf).max(axis=1)
    finite_inputs = np.isfinite(h).all(axis=1)[:, None] & np.isfinite(w).all(axis=1)[None, :]
    unknown = ((reach >= _F32_MAX / 4) & finite_inputs).any(axis=1) & (not exact)
    return Head(z, z32, exact, slack, unknown)


def head_rows(head: Head, temperature) -> Rows:
    inv, bad = logits_rows(head.z32, temperature, lm_head=True)
    with np.errstate(over="ignore", invalid="ignore"):
        near = (np.abs(head.z * inv[:, None].astype(np.float64)) >= _F32_MAX / 2).any(axis=1) & (not head.exact)
    unknown = head.unknown | near
    return Rows(bad & ~unknown, unknown)


# --------------------------------------------------------------------------------------------
# Law checks shared by the samplers
# --------------------------------------------------------------------------------------------


def check_plain(tokens, z32, temps, good, seed: int, S: int, *, top_k=None, exact: bool = True, slack=0.0,
                what: str = "plain twin") -> tuple[str, str]:  # fmt: skip
    """Tokens of the plain (or top-k) sampler: in range, then on the good rows the twin bit for bit (``exact``),
    or never a masked token and greedy rows on a maximum."""
    from flashsampling.twin import sample_topk_twin, sample_twin

    B, V = z32.shape
    problem = tokens_in_range(tokens, B, S, V)
    if problem:
        return "out-of-range token", problem
    got = tokens.cpu().numpy()
    inv = inverse_temperature32(temps, B)
    z = np.where(good[:, None], z32, 0.0).astype(np.float32)
    if exact:
        with np.errstate(over="ignore", invalid="ignore"):
            if top_k is None:
                want = sample_twin(z, temps, seed=seed, num_samples=S)
            else:
                want = sample_topk_twin(z, top_k, temps, seed=seed, num_samples=S)
        problem = same_on_rows(got, want, good, what)
    else:
        problem = never_masked(got, z32, good) or greedy_on_maximum(got, z32.astype(np.float64), inv, good, slack)
    return ("silent wrong result", problem) if problem else ("correct result", "")


def check_grouped(tokens, z32, temps, good, seed: int, S: int, groups: list[tuple[int, int]] | None,
                  *, exact: bool = True, slack=0.0) -> tuple[str, str]:  # fmt: skip
    """Tokens of the grouped draw: in range; good greedy rows the plain twin's; other good rows the grouped twin's
    (``groups``: ``(start, size)``; ``None``: unknown tiles, then only never a masked token), a flip tolerated
    where the two best groups' perturbed log-masses are within ``1e-4``."""
    from flashsampling.grouped import choose_groups_np, group_logmass_np, local_samples_np
    from flashsampling.noise import STREAM_GROUP, group_noise_np
    from flashsampling.twin import sample_twin

    B, V = z32.shape
    problem = tokens_in_range(tokens, B, S, V)
    if problem:
        return "out-of-range token", problem
    got = tokens.cpu().numpy()
    inv = inverse_temperature32(temps, B)
    if not exact:
        problem = never_masked(got, z32, good) or greedy_on_maximum(got, z32.astype(np.float64), inv, good, slack)
        return ("silent wrong result", problem) if problem else ("correct result", "")
    z = np.where(good[:, None], z32, 0.0).astype(np.float32)
    greedy = good & (inv == 0)
    want = sample_twin(z, np.where(greedy, 0.0, 1.0), seed=seed, num_samples=S)
    problem = same_on_rows(got, want, greedy, "plain twin (greedy rows)") or never_masked(got, z32, good)
    if problem or groups is None:
        return ("silent wrong result", problem) if problem else ("correct result", "")
    starts = np.array([a for a, _ in groups], dtype=np.int64)
    sizes = np.array([m for _, m in groups], dtype=np.int64)
    for r in np.flatnonzero(good & (inv > 0)):
        L = group_logmass_np(z32[r], inv[r], starts, sizes)
        choice = choose_groups_np(L, starts, seed, S, row=r)
        twin = local_samples_np(z32[r], inv[r], seed, starts, sizes, choice, row=r)
        for s in np.flatnonzero(twin != got[r]):
            g, _ = group_noise_np(seed, r, starts.astype(np.uint32), s, STREAM_GROUP)
            score = np.sort(L + g)
            if not (len(score) > 1 and score[-1] - score[-2] <= 1e-4):
                return "silent wrong result", f"row {r} sample {s}: token {got[r, s]}, the grouped twin {twin[s]}"
    return "correct result", ""


# --------------------------------------------------------------------------------------------
# sample_from_logits / sample
# --------------------------------------------------------------------------------------------


def _either(good: list, bad: list):
    """An extra argument's strategy from its good and bad options."""
    return lambda B, V, bad_: A.pick(bad if bad_ else good)


@st.composite
def _logits_call(draw, entry: str, *, extras, shape_refuse: tuple[str, ...] = ("logits",)) -> Call:
    """``entry(logits, **extras)``: ``extras`` is ``((name, strategy(B, V, bad)), ...)``."""
    bad = draw(A.bad_names(["shape", "logits"] + [name for name, _ in extras]))
    shape = draw(A.logits_shape(bad="shape" in bad))
    logits = draw(A.data_tensor("logits", shape, bad="logits" in bad))
    if "shape" in bad:
        logits = Arg(logits.make, logits.shown, logits.refuse + shape_refuse)
    B, V = shape if len(shape) == 2 else (3, 40)
    args = [("_logits", dataclasses.replace(logits, shown=f"logits={logits.shown}"))]
    args += [(name, draw(strategy(max(B, 1), max(V, 1), name in bad))) for name, strategy in extras]
    return Call(entry, tuple(args), torch_seed=draw(A.seeds))


def _positional(call: Call, built: dict) -> tuple[list, dict]:
    pos = [built[k] for k, _ in call.args if k.startswith("_")]
    kw = {k: built[k] for k, _ in call.args if not k.startswith("_")}
    return pos, kw


def _run_plain(fn):
    def run(call: Call, built: dict):
        pos, kw = _positional(call, built)
        return fn(*pos, **kw)

    return run


def _logits_rows(call: Call, built: dict) -> Rows:
    inv, bad = logits_rows(z32_of(built["_logits"]), built.get("temperature", 1.0))
    return Rows(bad, np.zeros_like(bad))


def _top_k_rows(top_k, B: int, V: int):
    if top_k is None:
        return None
    if isinstance(top_k, torch.Tensor):
        return top_k.detach().cpu().to(torch.int64).numpy()
    return np.full(B, min(int(top_k), V), dtype=np.int64)


def _check_from_logits(call: Call, built: dict, result, rows: Rows):
    z32 = z32_of(built["_logits"])
    temps = temps_of(built.get("temperature", 1.0), z32.shape[0])
    good = ~(rows.bad | rows.unknown)
    S = _int(built.get("num_samples"), 1)
    k = _top_k_rows(built.get("top_k"), *z32.shape)
    return check_plain(result, z32, temps, good, resolved_seed(call, built), S, top_k=k)


_COMMON_LOGITS = (
    ("temperature", lambda B, V, bad: A.temperature(B, bad=bad)),
    ("seed", lambda B, V, bad: A.seed(bad=bad, tensors=True)),
    ("num_samples", lambda B, V, bad: A.num_samples(bad=bad)),
    ("host_checks", lambda B, V, bad: A.flag("host_checks", default=True, bad=bad)),
)


@st.composite
def _head_call(draw, entry: str, *, extras, weight_name: str = "weight", allow_empty: bool = False) -> Call:
    """``entry(hidden, weight, **extras)``: an LM head of ``B`` rows, ``V`` tokens and ``D`` columns."""
    bad = draw(A.bad_names(["shape", "hidden", "weight", "dtypes"] + [name for name, _ in extras]))
    B = draw(A.pick([1, 2, 3, 5]))
    V = draw(A.pick([1, 2, 17, 40, 100] + ([0] if allow_empty else [])))
    D = draw(A.pick([1, 3, 16, 40]))
    hs, ws, shape_refuse = (B, D), (V, D), ()
    if "shape" in bad:
        hs, ws, shape_refuse = draw(A.pick([((0, D), (V, D), ("hidden",)), ((B, D), (V, D + 1), ("hidden",)),
                                            ((D,), (V, D), ("hidden",)), ((B, D), (0, D), ("V=0",))]))  # fmt: skip
    kinds = ["exact"] * 4 + ["normal", "ties", "flat", "nan", "posinf", "neginf", "huge", "tiny", "subnormal", "wide"]
    hidden = draw(A.data_tensor("hidden", hs, kinds=kinds, bad="hidden" in bad))
    weight = draw(A.data_tensor(weight_name, ws, kinds=kinds, bad=weight_name.split("_")[0] in bad))
    h, w = hidden.make[1], weight.make[1]
    if "dtypes" in bad and h.dtype in A.GOOD_FLOAT_DTYPES and w.dtype in A.GOOD_FLOAT_DTYPES:
        other = draw(A.pick([d for d in A.GOOD_FLOAT_DTYPES if d != h.dtype]))
        weight = tensor(dataclasses.replace(w, dtype=other), weight.refuse + ("dtype",))
    elif h.dtype in A.GOOD_FLOAT_DTYPES and w.dtype in A.GOOD_FLOAT_DTYPES:
        weight = tensor(dataclasses.replace(w, dtype=h.dtype), weight.refuse)
    hidden = Arg(hidden.make, hidden.shown, hidden.refuse + shape_refuse)
    args = [("_hidden", dataclasses.replace(hidden, shown=f"hidden={hidden.shown}")),
            ("_weight", dataclasses.replace(weight, shown=f"{weight_name}={weight.shown}"))]  # fmt: skip
    args += [(name, draw(strategy(max(B, 1), max(V, 1), name in bad))) for name, strategy in extras]
    return Call(entry, tuple(args), torch_seed=draw(A.seeds))


def _head_rows(call: Call, built: dict) -> Rows:
    return head_rows(lm_head(built["_hidden"], built["_weight"]), built.get("temperature", 1.0))


def _check_head(call: Call, built: dict, result, rows: Rows):
    head = lm_head(built["_hidden"], built["_weight"])
    B, V = head.z32.shape
    temps = temps_of(built.get("temperature", 1.0), B)
    good = ~(rows.bad | rows.unknown)
    S = _int(built.get("num_samples"), 1)
    k = _top_k_rows(built.get("top_k"), B, V)
    return check_plain(result, head.z32, temps, good, resolved_seed(call, built), S, top_k=k, exact=head.exact,
                       slack=head.slack)  # fmt: skip


def _device_seed_with_top_k(call: Call) -> Call:
    """A device seed (a good 0-dim tensor) with a truncating ``top_k`` (some row's ``k < V``) is refused: the top-k
    kernels take an int seed (documented in ``sample``)."""
    seed, k = call.arg("seed"), call.arg("top_k")
    if seed.refuse or k.refuse or seed.make[0] != "tensor" or k.make in (("lit", None),):
        return call
    data = call.arg("_logits") or call.arg("_weight")
    if data.make[0] != "tensor" or len(data.make[1].shape) != 2:
        return call
    V = data.make[1].shape[1] if call.arg("_logits") else data.make[1].shape[0]
    values = k.make[1].values if k.make[0] == "tensor" else (k.make[-1],)
    if min(values) < V:
        return dataclasses.replace(call, plan_refuse=call.plan_refuse + ("seed as a device tensor",))
    return call


_BLOCKS = (
    ("block_b", lambda B, V, bad: A.block("block_b", bad=bad)),
    ("block_v", lambda B, V, bad: A.block("block_v", bad=bad)),
)
_TOP_K = (("top_k", lambda B, V, bad: A.top_k(B, V, bad=bad)),)
_TILES = (("tiles", lambda B, V, bad: A.tiles(bad=bad)),)

SAMPLE_FROM_LOGITS = Entry(
    "sample_from_logits",
    lambda: _logits_call("sample_from_logits", extras=_COMMON_LOGITS + _BLOCKS + _TOP_K).map(_device_seed_with_top_k),
    _run_plain(flashsampling.sample_from_logits),
    _logits_rows,
    _check_from_logits,
)
SAMPLE = Entry(
    "sample",
    lambda: _head_call("sample", extras=_COMMON_LOGITS + _TILES + _TOP_K).map(_device_seed_with_top_k),
    _run_plain(flashsampling.sample),
    _head_rows,
    _check_head,
)


# --------------------------------------------------------------------------------------------
# Grouped
# --------------------------------------------------------------------------------------------

_COMMON_NO_TENSOR_SEED = (
    ("temperature", lambda B, V, bad: A.temperature(B, bad=bad)),
    ("seed", lambda B, V, bad: A.seed(bad=bad)),
    ("num_samples", lambda B, V, bad: A.num_samples(bad=bad)),
    ("host_checks", lambda B, V, bad: A.flag("host_checks", default=True, bad=bad)),
)
_GROUPED = (
    ("group_sizes", lambda B, V, bad: A.group_sizes(V, bad=bad)),
    ("return_logsumexp", lambda B, V, bad: A.flag("return_logsumexp", default=False, bad=bad)),
)


def _group_list(call: Call, V: int, B: int, block_b, block_v) -> list[tuple[int, int]]:
    """The groups the call asked for: its ``group_sizes`` (rebuilt: a generator is consumed by the call), or the
    logits kernel's tiles."""
    from flashsampling.kernels.tiles import logits_tiles

    arg = call.arg("group_sizes")
    sizes = build(arg.make) if arg is not None else None
    if sizes is None:
        _, bv = logits_tiles(B, V, block_b, block_v)
        return [(a, min(bv, V - a)) for a in range(0, V, bv)]
    sizes = [int(m) for m in (sizes.tolist() if hasattr(sizes, "tolist") else list(sizes))]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int).tolist()
    return list(zip(starts, sizes))


def _check_grouped_logits(call: Call, built: dict, result, rows: Rows):
    tokens, lse = result if isinstance(result, tuple) else (result, None)
    z32 = z32_of(built["_logits"])
    B, V = z32.shape
    temps = temps_of(built.get("temperature", 1.0), B)
    good = ~(rows.bad | rows.unknown)
    S = _int(built.get("num_samples"), 1)
    groups = _group_list(call, V, B, built.get("block_b"), built.get("block_v"))
    kind, detail = check_grouped(tokens, z32, temps, good, resolved_seed(call, built), S, groups)
    if kind == "correct result" and lse is not None:
        detail = logsumexp_close(lse, z32, inverse_temperature32(temps, len(temps)), good, V)
        kind = "silent wrong result" if detail else kind
    return kind, detail


def _check_grouped_head(call: Call, built: dict, result, rows: Rows):
    tokens, lse = result if isinstance(result, tuple) else (result, None)
    head = lm_head(built["_hidden"], built["_weight"])
    B, V = head.z32.shape
    temps = temps_of(built.get("temperature", 1.0), B)
    good = ~(rows.bad | rows.unknown)
    S = _int(built.get("num_samples"), 1)
    groups = _group_list(call, V, B, None, None) if call.arg("group_sizes").make != ("lit", None) else None
    kind, detail = check_grouped(tokens, head.z32, temps, good, resolved_seed(call, built), S, groups,
                                 exact=head.exact, slack=head.slack)  # fmt: skip
    if kind == "correct result" and lse is not None and head.exact:
        detail = logsumexp_close(lse, head.z32, inverse_temperature32(temps, len(temps)), good, V)
        kind = "silent wrong result" if detail else kind
    return kind, detail


SAMPLE_GROUPED_FROM_LOGITS = Entry(
    "sample_grouped_from_logits",
    lambda: _logits_call(
        "sample_grouped_from_logits",
        extras=_COMMON_NO_TENSOR_SEED
        + _GROUPED
        + (
            ("block_b", lambda B, V, bad: A.block("block_b", bad=bad)),
            ("block_v", lambda B, V, bad: A.block("block_v", bad=bad)),
        ),
    ),  # fmt: skip
    _run_plain(flashsampling.sample_grouped_from_logits),
    _logits_rows,
    _check_grouped_logits,
)
SAMPLE_GROUPED = Entry(
    "sample_grouped",
    lambda: _head_call(
        "sample_grouped", extras=_COMMON_NO_TENSOR_SEED + _GROUPED + (("tiles", lambda B, V, bad: A.tiles(bad=bad)),)
    ),  # fmt: skip
    _run_plain(flashsampling.sample_grouped),
    _head_rows,
    _check_grouped_head,
)


# --------------------------------------------------------------------------------------------
# Online
# --------------------------------------------------------------------------------------------


def _check_online_tokens(tokens, z32, temps, good, seed, S, chunks, *, exact=True, slack=0.0):
    """One chunk at 0: the plain twin; several: never masked, greedy on the plain twin, the others the online
    twin's merges (a coin within 1e-5 of its probability tolerated, as tests/test_online.py does)."""
    from flashsampling.grouped import group_logmass_np, local_samples_np
    from flashsampling.noise import merge_coin_probability_np
    from flashsampling.online import coin_words_np, merged_logmass_np, online_choice_np

    if len(chunks) == 1 and chunks[0][0] == 0:
        return check_plain(tokens, z32, temps, good, seed, S, exact=exact, slack=slack)
    kind, detail = check_grouped(tokens, z32, temps, good, seed, S, None, exact=exact, slack=slack)
    inv = inverse_temperature32(temps, z32.shape[0])
    if kind != "correct result" or not exact:
        return kind, detail
    got = tokens.cpu().numpy()
    starts = np.array([a for a, _ in chunks], dtype=np.int64)
    sizes = np.array([m for _, m in chunks], dtype=np.int64)
    for r in np.flatnonzero(good & (inv > 0)):
        L = group_logmass_np(z32[r], inv[r], starts, sizes)
        choice = online_choice_np(L, starts, seed, S, row=r)
        twin = local_samples_np(z32[r], inv[r], seed, starts, sizes, choice, row=r)
        before = merged_logmass_np(L)
        m, heavy = merge_coin_probability_np(before, L)
        q = np.where(heavy, 1.0 - m, m)
        for s in np.flatnonzero(twin != got[r]):
            w0, w1 = coin_words_np(seed, starts, r, s)
            u = (w1.astype(np.float64) * 2.0**32 + w0.astype(np.float64) + 0.5) * 2.0**-64
            if not ((np.isfinite(L) & np.isfinite(before)) & (np.abs(u - q) <= 1e-5)).any():
                return "silent wrong result", f"row {r} sample {s}: token {got[r, s]}, the online twin {twin[s]}"
    return "correct result", ""


@st.composite
def _online_plan(draw, V: int, bad: bool) -> tuple[tuple, tuple[str, ...]]:
    """Chunks ``(how, start, a, b)`` (columns ``[a, b)``, ``start`` given, or ``None`` for ``how="next"``) in
    merge order, any order, a chunk of no columns, then ``("result", vocab_size)``; ``bad``: one twist the sampler
    must refuse (overlap, gap, a bad ``start``, no chunk, a bad ``vocab_size``)."""
    cuts = sorted(set(draw(st.lists(st.integers(1, max(V - 1, 1)), max_size=3))) | {0, V})
    chunks = [(a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
    order = draw(A.pick(["in order", "in order", "reversed", "shuffled"]))
    if order == "reversed":
        chunks = chunks[::-1]
    elif order == "shuffled":
        chunks = draw(st.permutations(chunks))
    plan = [("start", a, a, b) for a, b in chunks]
    vocab = draw(A.pick(["V", "V", "None"]))
    if not bad:
        twist = draw(A.pick(["none"] * 4 + ["empty", "implicit"]))
        if twist == "empty":
            plan.insert(draw(st.integers(0, len(plan))), ("start", V + 5, 0, 0))
        elif twist == "implicit" and order == "in order":
            plan = [("next", None, a, b) for _, _, a, b in plan]
        return tuple(plan) + (("result", vocab),), ()
    twist = draw(A.pick(["overlap", "gap", "empty_bad_start", "float_start", "no_chunk", "vocab"]))
    if twist == "gap" and len(plan) < 2:
        twist = "overlap"
    if twist == "overlap":
        a = plan[0][2]
        plan.append(("start", a, a, a + 1))
        refuse = "overlaps"
    elif twist == "gap":
        plan.pop(draw(st.integers(0, len(plan) - 1)))
        vocab, refuse = "V", "merged chunks cover"
    elif twist == "empty_bad_start":
        plan.insert(draw(st.integers(0, len(plan))), ("start", draw(A.pick([-1, 2**32, "0"])), 0, 0))
        refuse = "start"
    elif twist == "float_start":
        plan[0] = ("start", float(plan[0][1]), *plan[0][2:])
        refuse = "start"
    elif twist == "no_chunk":
        plan, refuse = [], "no chunk was merged"
    else:
        vocab, refuse = draw(A.pick(["V+1", "2.5", "0"])), "vocab_size"
    return tuple(plan) + (("result", vocab),), (refuse,)


@st.composite
def _online_call(draw) -> Call:
    bad = draw(A.bad_names(["batch_size", "device", "plan", "temperature", "seed", "num_samples", "host_checks",
                            "data"]))  # fmt: skip
    B = draw(A.pick([1, 2, 3, 5]))
    V = draw(A.pick([1, 2, 17, 40, 100]))
    matmul = draw(st.integers(0, 3)) == 0
    p = ("batch_size",)
    bad_batch = [lit(B + 1, p + ("temperature",)), lit(0, p), lit(3.0, p), lit(True, p), lit(None, p)]
    batch = draw(A.pick(bad_batch if "batch_size" in bad else [lit(B)] * 3 + [lit(np.int64(B))]))
    dp = ("device",)
    device = draw(A.pick([lit("meta", dp), lit("cuda", dp), lit("cuda:1", dp), lit("nonsense", dp), lit(0, dp)]
                         if "device" in bad else
                         [lit(None)] * 3 + [lit("cpu"), Arg(("device", "cpu"), "torch.device('cpu')")]))  # fmt: skip
    if matmul:
        D = draw(A.pick([3, 16]))
        data = draw(A.data_tensor("hidden", (B, D), kinds=["exact", "exact", "normal", "nan", "huge"]))
        weight = draw(A.data_tensor("weight", (V, D), kinds=["exact", "exact", "normal", "ties"]))
        weight = tensor(dataclasses.replace(weight.make[1], dtype=data.make[1].dtype, layout="contiguous"))
        extra = [("_hidden", data), ("_weight", weight)]
    else:
        data = draw(A.data_tensor("logits_chunk", (B, V)))
        extra = [("_logits", tensor(dataclasses.replace(data.make[1], layout="contiguous")))]
    plan, refuse = draw(_online_plan(V, "plan" in bad))
    if matmul and "data" in bad and sum(1 for step in plan if step[0] != "result" and step[3] > step[2]) > 1:
        first = next(k for k, step in enumerate(plan) if step[0] != "result" and step[3] > step[2])
        rest = [k for k, step in enumerate(plan) if k > first and step[0] != "result" and step[3] > step[2]]
        plan = tuple(("changed_hidden", *step[1:]) if k == rest[0] else step for k, step in enumerate(plan))
        refuse = refuse + ("hidden",)
    args = [
        ("batch_size", batch),
        ("temperature", draw(A.temperature(B, bad="temperature" in bad))),
        ("seed", draw(A.seed(bad="seed" in bad))),
        ("num_samples", draw(A.num_samples(bad="num_samples" in bad))),
        ("device", device),
        ("host_checks", draw(A.flag("host_checks", default=True, bad="host_checks" in bad))),
    ]
    return Call("OnlineSampler", tuple(args + extra), plan, refuse, torch_seed=draw(A.seeds))  # fmt: skip


def _run_online(call: Call, built: dict):
    kw = {k: built[k] for k in ("temperature", "seed", "num_samples", "device", "host_checks")}
    sampler = flashsampling.OnlineSampler(built["batch_size"], **kw)
    V = built["_logits"].shape[1] if "_logits" in built else built["_weight"].shape[0]
    for step in call.plan:
        if step[0] == "result":
            vocab = {"V": V, "None": None, "V+1": V + 1, "2.5": 2.5, "0": 0}[step[1]]
            return sampler.result(vocab_size=vocab)
        how, start, a, b = step
        start = None if how == "next" else start
        if "_logits" in built:
            sampler.update_logits(built["_logits"][:, a:b], start=start)
        else:
            h = built["_hidden"]
            if how == "changed_hidden":  # other values everywhere (h + 1 equals h where |h| >= 2**24)
                h = torch.where(h == 0, torch.ones_like(h), -h)
            sampler.update(h, built["_weight"][a:b], start=start)
    raise AssertionError("a plan ends with its result")


def _online_rows(call: Call, built: dict) -> Rows:
    if "_logits" in built:
        return _logits_rows(call, built)
    return _head_rows(call, built)


def _check_online(call: Call, built: dict, result, rows: Rows):
    tokens, lse = result
    chunks = [(a, b - a) for step in call.plan if step[0] != "result" for _, _, a, b in [step] if b > a]
    good = ~(rows.bad | rows.unknown)
    S = _int(built.get("num_samples"), 1)
    seed = resolved_seed(call, built)
    if "_logits" in built:
        z32, exact, slack = z32_of(built["_logits"]), True, 0.0
    else:
        head = lm_head(built["_hidden"], built["_weight"])
        z32, exact, slack = head.z32, head.exact, head.slack
    temps = temps_of(built.get("temperature", 1.0), z32.shape[0])
    kind, detail = _check_online_tokens(tokens, z32, temps, good, seed, S, chunks, exact=exact, slack=slack)
    if kind == "correct result" and exact:
        detail = logsumexp_close(lse, z32, inverse_temperature32(temps, len(temps)), good, z32.shape[1])
        kind = "silent wrong result" if detail else kind
    return kind, detail


ONLINE = Entry("OnlineSampler", _online_call, _run_online, _online_rows, _check_online)


def _chunk_size(B, V, bad):
    p = ("chunk_size",)
    return A.pick([lit(0, p), lit(1.5, p), lit(None, p), lit(-3, p)] if bad else
                  [lit(max(1, V // 8)), lit(7), lit(16), lit(V), lit(V + 5), lit(np.int64(16))])  # fmt: skip


def _sample_online_call():
    return _head_call("sample_online", extras=(("chunk_size", _chunk_size), *_COMMON_NO_TENSOR_SEED, _GROUPED[1]))


def _check_sample_online(call: Call, built: dict, result, rows: Rows):
    tokens, lse = result if isinstance(result, tuple) else (result, None)
    head = lm_head(built["_hidden"], built["_weight"])
    B, V = head.z32.shape
    c = int(built["chunk_size"])
    chunks = [(a, min(c, V - a)) for a in range(0, V, c)]
    temps = temps_of(built.get("temperature", 1.0), B)
    good = ~(rows.bad | rows.unknown)
    S = _int(built.get("num_samples"), 1)
    kind, detail = _check_online_tokens(tokens, head.z32, temps, good, resolved_seed(call, built), S, chunks,
                                        exact=head.exact, slack=head.slack)  # fmt: skip
    if kind == "correct result" and lse is not None and head.exact:
        detail = logsumexp_close(lse, head.z32, inverse_temperature32(temps, len(temps)), good, V)
        kind = "silent wrong result" if detail else kind
    return kind, detail


SAMPLE_ONLINE = Entry("sample_online", _sample_online_call, _run_plain(flashsampling.sample_online), _head_rows,
                      _check_sample_online)  # fmt: skip


# --------------------------------------------------------------------------------------------
# Tensor parallel, a world of one (no process group)
# --------------------------------------------------------------------------------------------


def _tp_extras():
    def start(B, V, bad):
        p = ("vocab_start",)
        return A.pick([lit(1, ("shards", "tile")), lit(-1, p), lit(1.5, p), lit(2**32, p)] if bad else
                      [lit(None)] * 4 + [lit(0), lit(np.int64(0))])  # fmt: skip

    def size(B, V, bad):
        p = ("vocab_size",)
        return A.pick([lit(V + 1, p), lit(0, p), lit("V", p), lit(float(V), p)] if bad else [lit(None)] * 2 + [lit(V)])

    p = ("timeout",)
    return (
        ("vocab_start", start),
        ("vocab_size", size),
        ("combine", _either([lit("pathwise"), lit("factorized")], [lit("mean", ("combine",)), lit(None, ("combine",)),
                                                                   lit("Pathwise", ("combine",))])),
        _GROUPED[1],
        ("timeout", _either([lit(60.0), lit(60), lit(np.float32(60))],
                            [lit(0, p), lit(-1.0, p), lit(math.nan, p), lit(math.inf, p), lit("1", p),
                             lit(True, p)])),
        ("group", _either([lit(None)], [lit("world", ("group",)), lit(0, ("group",))])),
    )  # fmt: skip


def _tp_logits_call():
    extras = _COMMON_NO_TENSOR_SEED + _tp_extras() + (("block_v", lambda B, V, bad: A.block("block_v", bad=bad)),)
    return _logits_call("sample_tp_from_logits", extras=extras, shape_refuse=("logits", "V=0", "shards cover")).map(
        _tp_call_fix
    )


def _tp_head_call():
    extras = _COMMON_NO_TENSOR_SEED + _tp_extras() + (("tiles", lambda B, V, bad: A.tiles(bad=bad)),)
    return _head_call("sample_tp", extras=extras, weight_name="weight_shard", allow_empty=True).map(_tp_call_fix)


def _tp_call_fix(call: Call) -> Call:
    """A world of one: an empty shard is the whole vocabulary, ``V = 0`` (refused), and the message names the
    shards."""
    args = []
    for k, a in call.args:
        if k == "_logits" and a.make[0] == "tensor" and len(a.make[1].shape) == 2 and a.make[1].shape[1] == 0:
            a = Arg(a.make, a.shown, a.refuse + ("V=0", "shards cover"))
        if k == "_weight" and a.make[0] == "tensor" and len(a.make[1].shape) == 2 and a.make[1].shape[0] == 0:
            a = Arg(a.make, a.shown, a.refuse + ("V=0", "shards cover"))
        args.append((k, a))
    return dataclasses.replace(call, args=tuple(args))


def _check_tp(call: Call, built: dict, result, rows: Rows):
    tokens, lse = result if isinstance(result, tuple) else (result, None)
    if "_logits" in built:
        z32, exact, slack = z32_of(built["_logits"]), True, 0.0
    else:
        head = lm_head(built["_hidden"], built["_weight"])
        z32, exact, slack = head.z32, head.exact, head.slack
    B, V = z32.shape
    temps = temps_of(built.get("temperature", 1.0), B)
    good = ~(rows.bad | rows.unknown)
    S = _int(built.get("num_samples"), 1)
    kind, detail = check_plain(tokens, z32, temps, good, resolved_seed(call, built), S, exact=exact, slack=slack,
                               what="plain twin (one shard)")  # fmt: skip
    if kind == "correct result" and lse is not None and exact:
        detail = logsumexp_close(lse, z32, inverse_temperature32(temps, len(temps)), good, V)
        kind = "silent wrong result" if detail else kind
    return kind, detail


TP_LOGITS_ONE = Entry("sample_tp_from_logits (world of one)", _tp_logits_call, _run_plain(
    flashsampling.sample_tp_from_logits), _logits_rows, _check_tp)  # fmt: skip
TP_HEAD_ONE = Entry("sample_tp (world of one)", _tp_head_call, _run_plain(flashsampling.sample_tp), _head_rows,
                    _check_tp)  # fmt: skip


# --------------------------------------------------------------------------------------------
# The tile inverse-CDF sampler
# --------------------------------------------------------------------------------------------


@st.composite
def _tile_cdf_call(draw) -> Call:
    call = draw(_logits_call("sample_tile_cdf_from_logits", extras=(
        ("_temperature", lambda B, V, bad: A.temperature(B, bad=bad)),
        ("_seed", lambda B, V, bad: A.seed(bad=bad)),
        ("block_b", _either([lit(4), lit(1), lit(8)], [lit(0, ("block_b",)), lit(3, ("block_b",))])),
        ("block_v", _either([lit(256), lit(16), lit(32)], [lit(512, ("block_v",)), lit(8, ("block_v",)),
                                                         lit(None, ("block_v",))])),
        ("host_checks", lambda B, V, bad: A.flag("host_checks", default=True, bad=bad)))))  # fmt: skip
    args = []
    for k, a in call.args:
        if k == "_temperature":
            a = dataclasses.replace(a, shown=f"temperature={a.shown}")
            if a.make in (("lit", 0.0), ("lit", -0.0)):  # no greedy path: a number 0 is refused
                a = Arg(a.make, a.shown, ("temperature",))
        if k == "_seed":
            a = dataclasses.replace(a, shown=f"seed={a.shown}")
        args.append((k, a))
    return dataclasses.replace(call, args=tuple(args))


def _tile_cdf_rows(call: Call, built: dict) -> Rows:
    z32 = z32_of(built["_logits"])
    inv, bad = logits_rows(z32, built["_temperature"])
    zero = (inv == 0) & ~bad
    return Rows(bad, np.zeros_like(bad), ("temperature",) if zero.any() else ())


def _check_tile_cdf(call: Call, built: dict, result, rows: Rows):
    from flashsampling.tile_cdf.twin import draw_tiles_np, tile_logmass, tile_stage1_np

    z32 = z32_of(built["_logits"])
    B, V = z32.shape
    problem = tokens_in_range(torch.as_tensor(result), B, None, V)
    if problem:
        return "out-of-range token", problem
    temps = temps_of(built["_temperature"], B)
    good = ~(rows.bad | rows.unknown)
    seed = int(built["_seed"]) if built["_seed"] is not None else resolved_seed(call, {"seed": None})
    z = np.where(good[:, None], z32, 0.0).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        m, total, draw = tile_stage1_np(z, inverse_temperature32(temps, B), seed,
                                        block_v=int(built["block_v"]))  # fmt: skip
        k = draw_tiles_np(tile_logmass(m, total), seed, int(built["block_v"]))
    want = np.clip(draw[np.arange(B), k], 0, V - 1)
    got = np.asarray(result)
    bad = np.flatnonzero(good & (got != want))
    if bad.size:
        r = bad[0]
        return "silent wrong result", f"row {r}: token {got[r]}, the tile twin {want[r]}"
    return "correct result", ""


TILE_CDF = Entry("tile_cdf.sample_tile_cdf_from_logits", _tile_cdf_call, _run_plain(sample_tile_cdf_from_logits),
                 _tile_cdf_rows, _check_tile_cdf)  # fmt: skip


@st.composite
def _fused_tile_cdf_call(draw) -> Call:
    call = draw(_head_call("sample_fused_tile_cdf", extras=(
        ("temperature", lambda B, V, bad: A.temperature(B, bad=bad)), ("seed", lambda B, V, bad: A.seed(bad=bad)),
        ("host_checks", lambda B, V, bad: A.flag("host_checks", default=True, bad=bad)))))  # fmt: skip
    # On the CPU (the interpreter) the fused sampler is always refused: it needs an sm_90 GPU.
    return dataclasses.replace(call, plan_refuse=("sm_90",) if flashsampling.INTERPRET else ())


FUSED_TILE_CDF = Entry("tile_cdf.sample_fused_tile_cdf", _fused_tile_cdf_call, _run_plain(sample_fused_tile_cdf),
                       _head_rows, _check_head)  # fmt: skip


# --------------------------------------------------------------------------------------------
# Target laws
# --------------------------------------------------------------------------------------------


@st.composite
def _law_logits(draw) -> Arg:
    """Logits for a target law: NumPy, torch or a nested list, any float dtype, 1 to 3 dimensions; refused when the
    built values hold NaN or ``+inf`` or a row of ``-inf`` only, or the shape or dtype is wrong."""
    from .recipes import make_tensor

    B = draw(A.pick([1, 2, 3]))
    V = draw(A.pick([1, 2, 5, 17, 64]))
    shape = draw(A.pick([(B, V)] * 4 + [(V,), (2, B, V), (B, 0), (0, V), ()]))
    kind = draw(A.pick(["normal", "exact", "ties", "flat", "masked", "huge", "tiny", "subnormal", "wide",
                        "masked_row", "nan", "posinf", "neginf"]))  # fmt: skip
    dtype = draw(A.pick(["float64", "float32", "float16", "bfloat16", "int32", "bool"]))
    form = draw(A.pick(["numpy", "torch", "torch", "list"]))
    layout = (
        draw(A.pick(["contiguous", "transposed", "strided"]))
        if form == "torch"
        else {"list": "list"}.get(form, "contiguous")
    )
    recipe = TensorRecipe(tuple(shape), dtype, "cpu", layout if len(shape) == 2 or layout == "list" else "contiguous",
                          kind, draw(A.seeds))  # fmt: skip
    refuse = len(shape) == 0 or 0 in shape or dtype in ("int32", "bool")
    if not refuse:
        built = make_tensor(recipe)  # the values the law sees (a strided view skips half of its base)
        z = built.to(torch.float64).numpy() if isinstance(built, torch.Tensor) else np.asarray(built, dtype=np.float64)
        rows = z.reshape(-1, z.shape[-1])
        refuse = bool(np.isnan(z).any() or np.isposinf(z).any() or np.isneginf(rows).all(axis=1).any())
    if form == "numpy":
        return Arg(("numpy_of", recipe), f"np.asarray({recipe})", ("logits",) if refuse else ())
    return tensor(recipe, ("logits",) if refuse else ())


def _law_param(name: str, kind: str) -> st.SearchStrategy[Arg]:
    p = (name,)
    if kind == "k":
        return A.pick([lit(1), lit(2), lit(5), lit(100), lit(np.int64(3)), lit(0, p), lit(-2, p), lit(2.0, p),
                       lit(True, p), lit(None, p), lit("3", p)])  # fmt: skip
    if kind == "p":
        return A.pick([lit(0.5), lit(0.9), lit(1.0), lit(1e-300), lit(np.float32(0.3)), lit(0.0, p), lit(1.5, p),
                       lit(math.nan, p), lit(-0.1, p), lit(True, p), lit("0.5", p)])  # fmt: skip
    if kind == "min_p":
        return A.pick([lit(0.0), lit(0.1), lit(1.0), lit(0.5), lit(1.5, p), lit(math.nan, p), lit(-0.1, p),
                       lit(True, p)])  # fmt: skip
    return A.pick([lit(1.0), lit(0.7), lit(0.0), lit(-0.0), lit(2), lit(1e-300), lit(1e300), lit(-1.0, p),
                   lit(math.nan, p), lit(math.inf, p), lit(True, p), lit("1", p)])  # fmt: skip


@st.composite
def _law_call(draw) -> Call:
    fn = draw(A.pick(["top_k_law", "top_p_law", "min_p_law", "sampling_law"]))
    args = [("_logits", draw(_law_logits()))]
    if fn == "top_k_law":
        args.append(("_k", draw(_law_param("top_k", "k"))))
        args.append(("ties", draw(A.pick([lit("all"), lit("low_index"), lit("high_index"), lit("lowest", ("ties",))]))))
    elif fn == "top_p_law":
        args.append(("_p", draw(_law_param("top_p", "p"))))
        args.append(("crossing", draw(A.pick([lit("keep"), lit("drop"), lit("maybe", ("crossing",))]))))
    elif fn == "min_p_law":
        args.append(("_p", draw(_law_param("min_p", "min_p"))))
        args.append(("strict", draw(A.pick([lit(False), lit(True), lit("yes", ("strict",))]))))
    else:
        for name, kind in (("top_k", "k"), ("top_p", "p"), ("min_p", "min_p")):
            if draw(st.booleans()):
                a = draw(_law_param(name, kind))
                if a.make != ("lit", None):
                    args.append((name, a))
        args.append(("order", draw(A.pick([lit("transformers"), lit("vllm"), lit("llama.cpp"), lit("joint"),
                                           lit("sglang?", ("order",))]))))  # fmt: skip
    args.append(("temperature", draw(_law_param("temperature", "temperature"))))
    return Call(f"targets.{fn}", tuple(args))


def _run_law(call: Call, built: dict):
    fn = getattr(targets, call.entry.split(".")[1])
    pos, kw = _positional(call, built)
    return fn(*pos, **kw)


def _check_law(call: Call, built: dict, result, rows):
    """A law: the logits' shape, finite, ``>= 0``, rows summing to 1, masked tokens 0, a maximal logit kept, and
    monotone in the logit (a larger logit never less probable, where both are kept)."""
    x = built["_logits"]
    z = x.to(torch.float64).numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=np.float64)
    P = np.asarray(result)
    if P.shape != z.shape or P.dtype != np.float64:
        return "silent wrong result", f"law of shape {P.shape} dtype {P.dtype} for logits {z.shape}"
    z2, P2 = z.reshape(-1, z.shape[-1]), P.reshape(-1, z.shape[-1])
    if not np.isfinite(P2).all() or (P2 < 0).any():
        return "silent wrong result", "a probability not finite or negative"
    if (np.abs(P2.sum(axis=1) - 1) > 1e-9).any():
        return "silent wrong result", f"a row sums to {P2.sum(axis=1).tolist()}"
    if (P2[np.isneginf(z2)] != 0).any():
        return "silent wrong result", "a masked token has probability > 0"
    for r in range(z2.shape[0]):
        top = z2[r] == z2[r].max()
        if not (P2[r][top] > 0).any():
            return "silent wrong result", f"row {r}: no maximal logit kept"
        order = np.argsort(-z2[r], kind="stable")
        zs, ps = z2[r][order], P2[r][order]
        larger = zs[:-1] > zs[1:]
        if (larger & (ps[1:] > 0) & (ps[:-1] < ps[1:] * (1 - 1e-12))).any():
            return "silent wrong result", f"row {r}: a larger logit is less probable"
    return "correct result", ""


TARGET_LAWS = Entry("targets (top_k, top_p, min_p, sampling_law)", _law_call, _run_law, lambda call, built: None,
                    _check_law)  # fmt: skip


@st.composite
def _spec_call(draw) -> Call:
    fn = draw(A.pick(["speculative_step_law", "residual_law", "draw_draft_tokens"]))
    V = draw(A.pick([1, 2, 5, 17]))
    B = draw(A.pick([1, 2, 3]))

    def table(name):
        kind = draw(A.pick(["softmax", "softmax", "onehot", "zeros_some", "negative", "nan", "unnormalized", "int"]))
        rng = np.random.default_rng(draw(A.seeds))
        x = np.exp(rng.normal(0, 2, (B, V)))
        if kind == "onehot":
            x = np.zeros((B, V))
            x[:, rng.integers(0, V)] = 1.0
        elif kind == "zeros_some":
            x[:, rng.random(V) < 0.4] = 0.0
            x[x.sum(axis=1) == 0, 0] = 1.0
        x = x / x.sum(axis=1, keepdims=True)
        bad = kind in ("nan", "unnormalized", "int") or (kind == "negative" and V > 1)
        if kind == "negative" and V > 1:
            x[0, 0] = -0.1
        elif kind == "nan":
            x[0, 0] = np.nan
        elif kind == "unnormalized":
            x = x * 1.5
        dtype = "int64" if kind == "int" else "float64"
        return tensor(
            TensorRecipe((B, V), dtype, values=tuple(x.reshape(-1).tolist())), (rf"\b{name}\b",) if bad else ()
        )

    if fn == "draw_draft_tokens":
        args = [("_q", table("q")), ("_n", draw(A.pick([lit(1), lit(5), lit(0, ("num_samples",)),
                                                        lit(2.0, ("num_samples",))]))),
                ("seed", draw(A.pick([lit(0), lit(7), lit(-1, ("seed",)), lit("s", ("seed",))])))]  # fmt: skip
    else:
        args = [("_p", table("p")), ("_q", table("q"))]
    return Call(f"targets.{fn}", tuple(args))


def _check_spec(call: Call, built: dict, result, rows):
    fn = call.entry.split(".")[1]
    q = built["_q"].to(torch.float64).numpy()
    if fn == "draw_draft_tokens":
        t = np.asarray(result)
        n = int(built["_n"])
        if t.shape != (n, q.shape[0]) or t.dtype != np.int64:
            return "silent wrong result", f"tokens of shape {t.shape} {t.dtype}"
        if (t < 0).any() or (t >= q.shape[1]).any():
            return "out-of-range token", f"tokens {t.min()}..{t.max()} for V={q.shape[1]}"
        if (np.take_along_axis(q, t.T, axis=1) == 0).any():
            return "silent wrong result", "a draft of probability 0"
        return "correct result", ""
    p = built["_p"].to(torch.float64).numpy()
    p = p / p.sum(axis=1, keepdims=True)
    got = np.asarray(result, dtype=np.float64)
    if fn == "speculative_step_law":
        if not np.allclose(got, p, rtol=0, atol=4 * p.shape[1] * 2.0**-50):
            return "silent wrong result", f"the step's law differs from p by {np.abs(got - p).max():.3g}"
        return "correct result", ""
    qn = q / q.sum(axis=1, keepdims=True)
    if (got < 0).any() or (np.abs(got.sum(axis=1) - 1) > 1e-9).any():
        return "silent wrong result", "the residual is not a law"
    excess = np.maximum(p - qn, 0)
    has = excess.sum(axis=1) > 1e-12
    if ((got > 1e-12) & (excess <= 0) & has[:, None]).any():
        return "silent wrong result", "the residual puts mass where p <= q"
    return "correct result", ""


TARGET_SPECULATIVE = Entry("targets (speculative_step_law, residual_law, draw_draft_tokens)", _spec_call, _run_law,
                           lambda call, built: None, _check_spec)  # fmt: skip

#: Every single-process entry, in the order the tables show them.
ENTRIES = (SAMPLE, SAMPLE_FROM_LOGITS, SAMPLE_GROUPED, SAMPLE_GROUPED_FROM_LOGITS, SAMPLE_ONLINE, ONLINE,
           TP_HEAD_ONE, TP_LOGITS_ONE, TILE_CDF, FUSED_TILE_CDF, TARGET_LAWS, TARGET_SPECULATIVE)  # fmt: skip
