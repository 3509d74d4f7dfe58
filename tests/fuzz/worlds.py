"""Tensor-parallel calls in worlds of 1 to 4 gloo ranks (spawned processes), with ranks that disagree.

Hypothesis draws a :class:`WorldCall`: the world size, the entry point (``sample_tp_from_logits`` or ``sample_tp``),
uneven shards (empty ones included, in rank order or permuted with explicit ``vocab_start``), the data (the value
kinds of :mod:`tests.fuzz.recipes`), the arguments every rank passes, and one *twist* (:data:`TWISTS`): an argument
that differs between ranks (``num_samples``, seeds, temperatures as numbers, kinds, tensors -- two whose old digests
collided --, ``combine``, dtypes, ``B``, ``D``, ``return_logsumexp``, ``host_checks``, ``vocab_size``, the entry
point), shards that leave a gap, a rank whose own argument is bad, a rank that never calls, a bad ``group``, or
equal values written differently (``0.0``/``-0.0``, ``0.5``/``np.float32(0.5)``/``Fraction(1, 2)``, float32/float64
tensors of equal values), which must be accepted.

Every call of a world runs in its own process group (a fresh file store), so a call that leaves the collectives out
of step (a timeout) cannot touch the next; each rank bounds each call with SIGALRM.  The outcome: ``hang`` if a rank
did not finish, ``ranks disagree`` if one rank returned while another raised (or two returned different tokens),
else each rank's exception against its expected pattern, or rank 0's tokens against the twin of the whole logits
(pathwise: the plain twin; factorized: the grouped twin with the shards as groups).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tempfile
import time

import numpy as np
import torch
from hypothesis import strategies as st

from . import arguments as A
from .entries import check_grouped, check_plain, lm_head, logits_rows, z32_of
from .oracle import ROW_ERROR_NAMES, Hang, Outcome, classify_exception, logsumexp_close
from .recipes import Arg, TensorRecipe, build, lit, tensor

#: The twists of a world call; a round draws as many calls of each (none: every rank passes the same arguments).
TWISTS = ("none", "num_samples", "seed", "seed_none", "temperature_number",
          "temperature_kind", "temperature_tensor", "temperature_collide", "equal_forms", "combine", "dtype", "B",
          "D", "return_logsumexp", "host_checks", "vocab_size", "vocab_size_all", "entry", "gap", "bad_arg",
          "absent", "bad_group", "blocks_differ", "permuted")  # fmt: skip
#: Seconds the ranks wait in an exchange in these calls (the absent rank's peers time out after it).
TIMEOUT_S = 3.0


@dataclasses.dataclass(frozen=True)
class WorldCall:
    """One call of a world: ``sizes[j]`` is shard ``j``'s width (shards in vocabulary order), ``holds[r]`` the shard
    rank ``r`` holds; ``args[r]``: rank ``r``'s keyword arguments (``None``: the rank does not call); ``expect[r]``:
    the patterns its refusal must match (empty: it must return); ``twist`` names what differs."""

    world: int
    entry: str
    B: int
    V: int
    D: int
    sizes: tuple[int, ...]
    holds: tuple[int, ...]
    data: tuple[TensorRecipe, ...]
    args: tuple
    expect: tuple[tuple[str, ...], ...]
    twist: str
    other_dtype: str | None = None
    other_B: int | None = None
    other_entry_rank: int | None = None
    torch_seed: int = 0

    def shown(self) -> str:
        per_rank = []
        for r, a in enumerate(self.args):
            kw = "absent" if a is None else ", ".join(f"{k}={v.shown}" for k, v in a)
            per_rank.append(f"rank {r} (shard {self.holds[r]}): {kw}")
        data = ", ".join(map(str, self.data))
        return (f"world {self.world}, {self.entry}, twist {self.twist}, B={self.B} V={self.V} D={self.D}, "
                f"shards {list(self.sizes)}, data {data}; " + "; ".join(per_rank))  # fmt: skip


def _starts(sizes) -> list[int]:
    return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int).tolist()


@st.composite
def world_call(draw, twist: str, worlds=(1, 2, 2, 3, 4)) -> WorldCall:
    """A call of a world of ``worlds`` ranks with ``twist`` (:data:`TWISTS`; ``none`` where the call cannot have it:
    a world of one, one row, logits where ``D`` is to differ)."""
    world = draw(A.pick(list(worlds)))
    entry = draw(A.pick(["sample_tp_from_logits", "sample_tp_from_logits", "sample_tp"]))
    B = draw(A.pick([1, 2, 3]))
    V = draw(A.pick([5, 17, 40, 64]))
    D = draw(A.pick([3, 16]))
    cuts = sorted(draw(st.lists(st.integers(0, V), min_size=world - 1, max_size=world - 1)))
    sizes = tuple(int(b - a) for a, b in zip([0, *cuts], [*cuts, V]))
    holds = tuple(range(world))
    if world == 1 and twist not in ("none", "equal_forms", "bad_arg", "bad_group", "vocab_size_all", "gap"):
        twist = "none"
    kinds = ["normal", "exact", "masked", "ties", "nan", "masked_row", "huge", "posinf"]
    kind = draw(A.pick(kinds))
    dtype = draw(A.pick(["float32", "float32", "bfloat16", "float16"]))
    if entry == "sample_tp_from_logits":
        data = (TensorRecipe((B, V), dtype, kind=kind, seed=draw(A.seeds)),)
    else:
        hk = draw(A.pick(["exact", "exact", "normal", "nan"]))
        data = (TensorRecipe((B, D), dtype, kind=hk, seed=draw(A.seeds)),
                TensorRecipe((V, D), dtype, kind="exact", seed=draw(A.seeds)))  # fmt: skip
    base = {"seed": draw(A.pick([lit(7), lit(2**64 - 1), lit(None), lit(np.int64(3))])),
            "num_samples": draw(A.pick([lit(1), lit(2)])),
            "temperature": draw(A.pick([lit(0.9), lit(0.0), lit(1.0), lit(np.float32(0.5)),
                                        tensor(TensorRecipe((B,), values=tuple(0.5 + 0.5 * i for i in range(B)))),
                                        tensor(TensorRecipe((B,), values=(0.0,) + (1.0,) * (B - 1)))])),
            "combine": draw(A.pick([lit("pathwise"), lit("factorized")])),
            "host_checks": draw(A.pick([lit(True), lit(True), lit(False)])),
            "return_logsumexp": draw(A.pick([lit(False), lit(False), lit(True)])),
            "timeout": lit(TIMEOUT_S)}  # fmt: skip
    if draw(st.booleans()):
        base["vocab_size"] = lit(V)
    args = [dict(base) for _ in range(world)]
    expect: list[tuple[str, ...]] = [() for _ in range(world)]
    last = world - 1
    extra = {}

    def all_refuse(pattern: str) -> None:
        for r in range(world):
            expect[r] = (pattern,)

    if twist == "num_samples":
        args[last]["num_samples"] = lit(3)
        all_refuse("different num_samples")
    elif twist == "seed":
        args[last]["seed"] = lit(8)
        args[0]["seed"] = lit(7)
        all_refuse("different seeds")
    elif twist == "seed_none":
        args[0]["seed"], args[last]["seed"] = lit(7), lit(None)
        all_refuse("different seeds")
    elif twist == "temperature_number":
        for r in range(world):
            args[r]["temperature"] = lit(0.9 if r == last else 0.8)
        all_refuse("different temperatures")
    elif twist == "temperature_kind":
        for r in range(world):
            args[r]["temperature"] = tensor(TensorRecipe((B,), values=(1.0,) * B)) if r == last else lit(1.0)
        all_refuse("different temperatures")
    elif twist == "temperature_tensor":
        for r in range(world):
            args[r]["temperature"] = tensor(
                TensorRecipe((B,), values=(1.0,) * (B - 1) + ((1.5,) if r == last else (1.0,)))
            )
        all_refuse("different temperature tensors")
    elif twist == "temperature_collide" and B >= 2:
        for r in range(world):  # 1/T bits +2**24 in row 0 and -2**23 in row 1: the old digest's collision
            vals = (0.25, 2.0) + (1.0,) * (B - 2) if r == last else (1.0,) * B
            args[r]["temperature"] = tensor(TensorRecipe((B,), values=vals))
        all_refuse("different temperature tensors")
    elif twist == "equal_forms":
        forms = draw(A.pick(["zero", "half", "tensor_dtypes", "tensor_scalar"]))
        for r in range(world):
            if forms == "zero":
                args[r]["temperature"] = lit((0.0, -0.0)[r % 2])
            elif forms == "half":
                args[r]["temperature"] = [lit(0.5), lit(np.float32(0.5)), Arg(("fraction", (1, 2)), "Fraction(1, 2)"),
                                          lit(np.float64(0.5))][r % 4]  # fmt: skip
            elif forms == "tensor_dtypes":
                args[r]["temperature"] = tensor(TensorRecipe((B,), ("float32", "float64", "float16")[r % 3],
                                                             values=(0.5,) * B))  # fmt: skip
            else:
                args[r]["temperature"] = tensor(TensorRecipe((), values=(0.75,)) if r % 2 else
                                                TensorRecipe((B,), layout="expanded", values=(0.75,)))  # fmt: skip
    elif twist == "combine":
        args[0]["combine"], args[last]["combine"] = lit("pathwise"), lit("factorized")
        all_refuse("different combine")
    elif twist == "dtype":
        extra["other_dtype"] = "float16" if dtype != "float16" else "float32"
        all_refuse("different dtypes")
    elif twist == "B" and B >= 2:
        extra["other_B"] = B - 1
        all_refuse("different batch sizes")
    elif twist == "D" and entry == "sample_tp":
        extra["other_B"] = -1  # marks D - 1 columns on the last rank
        all_refuse("different hidden sizes")
    elif twist == "return_logsumexp":
        args[0]["return_logsumexp"], args[last]["return_logsumexp"] = lit(False), lit(True)
        all_refuse("different return_logsumexp")
    elif twist == "host_checks":
        args[0]["host_checks"], args[last]["host_checks"] = lit(True), lit(False)
        all_refuse("different host_checks")
    elif twist == "vocab_size":
        args[0]["vocab_size"], args[last]["vocab_size"] = lit(V), lit(None)
        all_refuse("different vocab_size")
    elif twist == "vocab_size_all":
        for r in range(world):
            args[r]["vocab_size"] = lit(V + 1)
        all_refuse("vocab_size")
    elif twist == "entry":
        extra["other_entry_rank"] = last
        all_refuse("different entry points")
    elif twist == "gap":
        starts = _starts(sizes)
        for r in range(world):
            args[r]["vocab_start"] = lit(starts[r] + (1 if r == last else 0))
        all_refuse("do not tile")
    elif twist == "bad_arg":
        bad_rank = draw(st.integers(0, last))
        name, value = draw(A.pick([("seed", -1), ("num_samples", 0), ("temperature", math.nan), ("combine", "mean"),
                                   ("timeout", 0), ("host_checks", "yes"), ("vocab_start", -5)]))  # fmt: skip
        arg = lit(value, (name,))
        args[bad_rank][name] = arg
        for r in range(world):
            expect[r] = arg.refuse if r == bad_rank else ("rejected their arguments",)
    elif twist == "absent":
        absent = draw(st.integers(0, last))
        args[absent] = None
        for r in range(world):
            expect[r] = ("absent",) if r == absent else (r"waited .* for the other ranks", "failed after")
    elif twist == "bad_group":
        for r in range(world):
            args[r]["group"] = lit("world", ("group",))
        all_refuse("group must be")
    elif twist == "blocks_differ":
        for r in range(world):
            if entry == "sample_tp":
                args[r]["tiles"] = [lit(None), Arg(("tiles", (16, 64, 16)), "TileConfig(16, 64, 16)")][r % 2]
            else:
                args[r]["block_v"] = [lit(None), lit(16), lit(64)][r % 3]
    elif twist == "permuted" and world > 1:
        holds = tuple(draw(st.permutations(list(range(world)))))
        starts = _starts(sizes)
        for r in range(world):
            args[r]["vocab_start"] = lit(starts[holds[r]])
    else:  # a twist this call cannot have (two rows, two ranks, an LM head): none
        twist = "none"
    packed = tuple(None if a is None else tuple(sorted(a.items())) for a in args)
    return WorldCall(world, entry, B, V, D, sizes, holds, data, packed, tuple(expect), twist,
                     torch_seed=draw(A.seeds), **extra)  # fmt: skip


# --------------------------------------------------------------------------------------------
# The ranks
# --------------------------------------------------------------------------------------------


def _rank_call(call: WorldCall, rank: int):
    """Rank ``rank``'s call of ``call`` (the shard it holds, its arguments)."""
    import flashsampling

    kw = {k: build(a.make) for k, a in call.args[rank]}
    shard = call.holds[rank]
    a = _starts(call.sizes)[shard]
    b = a + call.sizes[shard]
    entry = call.entry
    if call.other_entry_rank == rank:
        entry = "sample_tp" if entry == "sample_tp_from_logits" else "sample_tp_from_logits"
    if entry == "sample_tp_from_logits":
        z = _full_logits(call)
        if call.other_dtype and rank == call.world - 1:
            z = z.to(getattr(torch, call.other_dtype))
        if call.other_B and call.other_B > 0 and rank == call.world - 1:
            z = z[: call.other_B]
        kw.pop("tiles", None)
        return flashsampling.sample_tp_from_logits(z[:, a:b], **kw)
    h, w = _head(call)
    if call.other_dtype and rank == call.world - 1:
        h, w = h.to(getattr(torch, call.other_dtype)), w.to(getattr(torch, call.other_dtype))
    if call.other_B and rank == call.world - 1:
        h, w = (h[:, :-1], w[:, :-1]) if call.other_B < 0 else (h[: call.other_B], w)
    kw.pop("block_v", None)
    return flashsampling.sample_tp(h, w[a:b], **kw)


def _full_logits(call: WorldCall) -> torch.Tensor:
    from .recipes import make_tensor

    if call.entry == "sample_tp_from_logits":
        return make_tensor(call.data[0])
    g = torch.Generator().manual_seed(call.torch_seed)  # the other entry point on logits: any logits of the shape
    return torch.randn(call.B, call.V, generator=g)


def _head(call: WorldCall) -> tuple[torch.Tensor, torch.Tensor]:
    from .recipes import make_tensor

    if call.entry == "sample_tp":
        return make_tensor(call.data[0]), make_tensor(call.data[1])
    g = torch.Generator().manual_seed(call.torch_seed)
    return torch.randn(call.B, call.D, generator=g), torch.randn(call.V, call.D, generator=g)


def _outcome(call: WorldCall, rank: int, bound: float):
    from .run import time_limit

    torch.manual_seed(call.torch_seed if rank == 0 else call.torch_seed + 1 + rank)
    try:
        with np.errstate(all="ignore"), time_limit(bound):
            result = _rank_call(call, rank)
    except Hang as exc:
        return "Hang", str(exc)
    except Exception as exc:  # noqa: BLE001 - the parent classifies
        return type(exc).__name__, str(exc).splitlines()[0][:400] if str(exc) else ""
    if isinstance(result, tuple):
        return "ok", (result[0].cpu(), result[1].cpu())
    return "ok", result.cpu()


def _world_rank(rank: int, world: int, calls: list[WorldCall], folder: str, bound: float) -> None:
    """One rank of a world: each call in a process group of its own; the outcomes saved after each call."""
    import torch.distributed as dist

    import flashsampling  # noqa: F401  (the interpreter's setup before any call)

    outcomes = []
    for i, call in enumerate(calls):
        dist.init_process_group("gloo", init_method=f"file://{folder}/store{i}", rank=rank, world_size=world,
                                timeout=__import__("datetime").timedelta(seconds=60))  # fmt: skip
        try:
            if call.args[rank] is None:  # absent: stay in the group until the others' timeout has passed
                time.sleep(TIMEOUT_S + 2)
                outcomes.append(("absent", None))
            else:
                outcomes.append(_outcome(call, rank, bound))
        finally:
            dist.destroy_process_group()
        torch.save(outcomes, os.path.join(folder, f"rank{rank}.pt"))
        with open(os.path.join(folder, f"rank{rank}.count"), "w") as f:
            f.write(str(len(outcomes)))


def _spawn(calls: list[WorldCall], world: int, bound: float) -> tuple[list[list], tuple[str, str] | None]:
    """One spawned world running ``calls``: each rank's recorded outcomes, and how the world ended if not every
    call was recorded: ``("Hang", ...)`` (no progress within the bound: the processes are killed) or
    ``("Crash", ...)`` (a rank's process died)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as folder:
        procs = [ctx.Process(target=_world_rank, args=(r, world, calls, folder, bound)) for r in range(world)]
        for p in procs:
            p.start()
        patience = bound + TIMEOUT_S + 60  # a call's bound, the absent rank's wait, a world's start
        last, done, ended = time.monotonic(), -1, None
        while any(p.is_alive() for p in procs):
            time.sleep(0.2)
            now = min(_recorded(folder, r) for r in range(world))
            if now != done:
                last, done = time.monotonic(), now
            elif time.monotonic() - last > patience:
                ended = ("Hang", f"no progress within {patience:.0f} s")
                break
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join(5)
        codes = [p.exitcode for p in procs]
        if ended is None and any(codes):
            ended = ("Crash", f"a rank's process died (exit codes {codes})")
        per_rank = []
        for r in range(world):
            path = os.path.join(folder, f"rank{r}.pt")
            per_rank.append(torch.load(path, weights_only=False) if os.path.exists(path) else [])
    return per_rank, ended


def _recorded(folder: str, rank: int) -> int:
    try:
        return int(open(os.path.join(folder, f"rank{rank}.count")).read() or 0)
    except (OSError, ValueError):
        return 0


def run_world_calls(calls: list[WorldCall], world: int, bound: float) -> list[list]:
    """Every call of one world size: ``[call][rank] -> (kind, value)``.  A world that hangs or loses a rank is
    started again after the call it was in, which gets ``("Hang" | "Crash", ...)`` for the ranks that did not
    record it."""
    results: list[list] = []
    while len(results) < len(calls):
        per_rank, ended = _spawn(calls[len(results) :], world, bound)
        done = min(len(o) for o in per_rank)
        results += [[per_rank[r][k] for r in range(world)] for k in range(done)]
        if len(results) < len(calls):
            ended = ended or ("Crash", "the world ended early")
            results.append([per_rank[r][done] if len(per_rank[r]) > done else ended for r in range(world)])
    return results


# --------------------------------------------------------------------------------------------
# Classification
# --------------------------------------------------------------------------------------------


class _Raised(Exception):
    """An exception re-made from a rank's recorded ``(kind, message)``."""


def _as_exception(kind: str, message: str) -> BaseException:
    known = {"ValueError": ValueError, "TypeError": TypeError, "TimeoutError": TimeoutError,
             "RuntimeError": RuntimeError}  # fmt: skip
    if kind == "Hang":
        return Hang(message)
    exc = known.get(kind, _Raised)(message)
    if isinstance(exc, _Raised):
        exc = _Raised(f"{kind}: {message}")
    return exc


def classify_world(call: WorldCall, outcomes: list) -> Outcome:
    """One world call's outcome (module docstring)."""
    present = [r for r in range(call.world) if call.args[r] is not None]
    if any(outcomes[r][0] == "Hang" for r in present):
        r = next(r for r in present if outcomes[r][0] == "Hang")
        return Outcome("hang", f"rank {r}: {outcomes[r][1]}")
    if any(outcomes[r][0] == "Crash" for r in present):
        r = next(r for r in present if outcomes[r][0] == "Crash")
        return Outcome("unclear exception", f"rank {r}: {outcomes[r][1]}")
    ok = [r for r in present if outcomes[r][0] == "ok"]
    if ok and len(ok) != len(present):
        r = next(r for r in present if outcomes[r][0] != "ok")
        return Outcome("ranks disagree", f"rank {ok[0]} returned, rank {r} raised {outcomes[r][0]}: {outcomes[r][1]}")
    refusing = any(call.expect[r] for r in present)
    rows = None if refusing else _rows(call)
    if not ok:
        for r in present:
            patterns = call.expect[r] or (ROW_ERROR_NAMES if rows is not None and rows[0] else ())
            exc = _as_exception(*outcomes[r])
            if call.twist == "absent" and isinstance(exc, (TimeoutError, RuntimeError)):
                if any(re.search(p, str(exc)) for p in patterns):
                    continue  # the bounded wait for the absent rank
            outcome = classify_exception(exc, patterns)
            if outcome.kind != "clear error":
                return Outcome(outcome.kind, f"rank {r}: {outcome.detail}")
        return Outcome("clear error")
    values = [outcomes[r][1] for r in ok]
    first = values[0][0] if isinstance(values[0], tuple) else values[0]
    for r, v in zip(ok[1:], values[1:]):
        t = v[0] if isinstance(v, tuple) else v
        if not torch.equal(t, first):
            return Outcome("ranks disagree", f"ranks {ok[0]} and {r} returned different tokens")
    if refusing:
        return Outcome("silent wrong result", f"returned; expected {[list(e) for e in call.expect]}")
    bad, unknown = rows
    if bool(_host_checks(call)) and bad:
        return Outcome("silent wrong result", "returned for rows the kernels must flag")
    return _check_tokens(call, values[0])


def _host_checks(call: WorldCall) -> bool:
    first = next(a for a in call.args if a is not None)
    return bool(build(dict(first)["host_checks"].make))


def _temperature(call: WorldCall):
    first = next(a for a in call.args if a is not None)
    return build(dict(first)["temperature"].make)


def _z32(call: WorldCall) -> tuple[np.ndarray, bool, object]:
    if call.entry == "sample_tp_from_logits":
        return z32_of(_full_logits(call)), True, 0.0
    head = lm_head(*_head(call))
    return head.z32, head.exact, head


def _rows(call: WorldCall):
    """``(any bad row, the bad mask)`` of the whole logits (``None`` when a refusal is expected)."""
    z32, exact, head = _z32(call)
    inv, bad = logits_rows(z32, _temperature(call), lm_head=call.entry == "sample_tp")
    if not exact:
        bad = bad & ~head.unknown
    return bool(bad.any()), bad


def _check_tokens(call: WorldCall, value) -> Outcome:
    from .entries import temps_of

    tokens, lse = value if isinstance(value, tuple) else (value, None)
    z32, exact, head = _z32(call)
    _, bad = _rows(call)
    unknown = head.unknown if not exact else np.zeros_like(bad)
    good = ~(bad | unknown)
    temps = temps_of(_temperature(call), call.B)
    first = dict(next(a for a in call.args if a is not None))
    seed_value = build(first["seed"].make)
    if seed_value is None:
        torch.manual_seed(call.torch_seed)
        import flashsampling

        seed_value = flashsampling._validate.check_seed(None)
    S = int(build(first["num_samples"].make))
    combine = build(first["combine"].make)
    slack = head.slack if not exact else 0.0
    if combine == "pathwise":
        kind, detail = check_plain(tokens, z32, temps, good, int(seed_value), S, exact=exact, slack=slack,
                                   what="plain twin of the whole logits")  # fmt: skip
    else:
        groups = [(a, m) for a, m in zip(_starts(call.sizes), call.sizes)]
        kind, detail = check_grouped(tokens, z32, temps, good, int(seed_value), S, groups, exact=exact, slack=slack)
    if kind == "correct result" and lse is not None and exact:
        from flashsampling.twin import inverse_temperature32

        detail = logsumexp_close(lse, z32, inverse_temperature32(temps, call.B), good, call.V)
        kind = "silent wrong result" if detail else kind
    return Outcome(kind, detail)


def fuzz_worlds(examples: int, seed: int, bound: float) -> list[tuple[WorldCall, Outcome]]:
    """``examples`` world calls drawn by Hypothesis from ``seed`` (as many of each twist), grouped by world size,
    each size one spawned world; returns ``(call, outcome)`` pairs."""
    from .run import distinct

    per = -(-examples // len(TWISTS))
    drawn = [c for i, t in enumerate(TWISTS) for c in distinct(world_call(t), per, seed + i)][:examples]
    out = []
    for world in sorted({c.world for c in drawn}):
        calls = [c for c in drawn if c.world == world]
        for call, outcomes in zip(calls, run_world_calls(calls, world, bound)):
            out.append((_Shown(call), classify_world(call, outcomes)))
    return out


class _Shown:
    """A world call as :func:`tests.fuzz.run.summarize` shows it."""

    def __init__(self, call: WorldCall) -> None:
        self.call = call

    def shown(self) -> str:
        return self.call.shown()
