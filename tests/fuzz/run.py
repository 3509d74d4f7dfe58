"""Running drawn calls: a time bound per call, the expected outcome, the classification, a round over every entry.

:func:`execute` runs one :class:`~tests.fuzz.entries.Call` and classifies it (:mod:`tests.fuzz.oracle`);
:func:`fuzz_entry` draws ``examples`` calls of one entry point with Hypothesis (a fixed seed: a round is reproducible
on one machine) and runs each; :func:`fuzz_round` does every entry and, if asked, the worlds of
:mod:`tests.fuzz.worlds`, and returns the counts by entry and outcome with the defects' calls.
"""

from __future__ import annotations

import contextlib
import re
import signal
import time

import numpy as np
import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

from .entries import ENTRIES, Call, Entry, Rows
from .oracle import DEFECTS, OUTCOMES, ROW_ERROR_NAMES, Hang, Outcome, classify_exception
from .recipes import build

#: Seconds a call may take before it counts as a hang.  The slowest good call of a round (40 groups, each its own
#: interpreted launch) takes about 2 s; a hang is a call that never ends.
CALL_BOUND_S = 60.0
#: Hypothesis draws per distinct example asked for (the rest are repeats, skipped).
DRAWS_PER_EXAMPLE = 6


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise :class:`~tests.fuzz.oracle.Hang` in the main thread after ``seconds`` (SIGALRM: the Triton interpreter
    is Python, so the signal is seen between its steps)."""

    def on_alarm(signum, frame):
        raise Hang(f"no result within {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def expectation(entry: Entry, call: Call, built: dict) -> tuple[tuple[str, ...], Rows | None, bool]:
    """``(refuse, rows, either)``: the patterns of the refusal the call must get (empty: it must return), the rows
    the kernels must flag, and whether a row error is as right as a result (an LM head whose fp32 accumulation
    may overflow)."""
    refuse = call.refuse
    if refuse:
        return refuse, None, False
    rows = entry.rows(call, built)
    if rows is None:
        return (), None, False
    host_checks = bool(built.get("host_checks", True))
    if rows.refuse:  # refused whatever host_checks; with them a bad row's error may come first
        return rows.refuse + (ROW_ERROR_NAMES if host_checks and rows.bad.any() else ()), rows, False
    if host_checks and rows.bad.any():
        return ROW_ERROR_NAMES, rows, False
    return (), rows, bool(host_checks and rows.unknown.any())


def execute(entry: Entry, call: Call, bound: float = CALL_BOUND_S) -> Outcome:
    """Run ``call`` under the time bound and classify its outcome."""
    built = {k: build(a.make) for k, a in call.args}
    refuse, rows, either = expectation(entry, call, built)
    built = {k: build(a.make) for k, a in call.args}  # fresh (a generator read by the expectation is consumed)
    torch.manual_seed(call.torch_seed)
    try:
        with np.errstate(all="ignore"), time_limit(bound):
            result = entry.run(call, built)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - every outcome is classified
        if either and isinstance(exc, ValueError) and any(re.search(p, str(exc)) for p in ROW_ERROR_NAMES):
            return Outcome("clear error")
        return classify_exception(exc, refuse)
    if refuse:
        return Outcome("silent wrong result", f"returned; expected a refusal naming one of {list(refuse)}")
    empty = np.zeros(0, dtype=bool)
    with np.errstate(all="ignore"):
        kind, detail = entry.check(call, built, result, rows or Rows(empty, empty))
    return Outcome(kind, detail)


def distinct(strategy, examples: int, seed: int) -> list:
    """Up to ``examples`` distinct values of ``strategy`` drawn by Hypothesis from ``seed`` (its generation repeats
    and mutates earlier examples: 200 draws of ``sample_from_logits`` calls held 78 distinct ones), in draw order."""
    seen: dict[str, object] = {}

    @hypothesis_seed(seed)
    @settings(max_examples=DRAWS_PER_EXAMPLE * examples, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(strategy)
    def one(value) -> None:
        if len(seen) < examples:
            seen.setdefault(repr(value), value)

    one()
    return list(seen.values())


def fuzz_entry(entry: Entry, examples: int, seed: int, bound: float = CALL_BOUND_S) -> list[tuple[Call, Outcome]]:
    """``examples`` distinct calls of ``entry`` drawn by Hypothesis from ``seed``, each run and classified."""
    return [(call, execute(entry, call, bound)) for call in distinct(entry.draw(), examples, seed)]


def summarize(results: dict[str, list[tuple[Call, Outcome]]], *, keep: int = 5) -> dict:
    """Counts by entry and outcome, totals, and up to ``keep`` calls of each outcome that is neither a clear error
    nor a correct result."""
    counts = {name: {k: 0 for k in OUTCOMES} for name in results}
    shown: dict[str, list[dict]] = {}
    for name, pairs in results.items():
        for call, outcome in pairs:
            counts[name][outcome.kind] += 1
            if outcome.kind not in ("clear error", "correct result"):
                bucket = shown.setdefault(outcome.kind, [])
                if len(bucket) < keep:
                    bucket.append({"entry": name, "call": call.shown()[:400], "detail": outcome.detail[:400]})
    totals = {k: sum(c[k] for c in counts.values()) for k in OUTCOMES}
    return {"counts": counts, "totals": totals, "inputs": sum(totals.values()), "examples": shown,
            "defects": sum(totals[k] for k in DEFECTS)}  # fmt: skip


def fuzz_round(examples: int, seed: int, *, entries=ENTRIES, worlds: int = 0, world_seed: int | None = None,
               bound: float = CALL_BOUND_S, progress=None) -> dict:  # fmt: skip
    """A round: ``examples`` calls of every single-process entry, and ``worlds`` calls of the worlds of 1 to 4 ranks
    (:mod:`tests.fuzz.worlds`); returns :func:`summarize`'s dict plus the parameters and the time taken."""
    began = time.monotonic()
    results: dict[str, list] = {}
    for i, entry in enumerate(entries):
        t = time.monotonic()
        results[entry.name] = fuzz_entry(entry, examples, seed + i, bound)
        if progress:
            progress(f"{entry.name}: {len(results[entry.name])} calls in {time.monotonic() - t:.0f} s")
    if worlds:
        from .worlds import fuzz_worlds

        t = time.monotonic()
        results["sample_tp(_from_logits), worlds of 1-4 ranks"] = fuzz_worlds(worlds, world_seed or seed, bound)
        if progress:
            progress(f"worlds: {worlds} calls in {time.monotonic() - t:.0f} s")
    summary = summarize(results)
    summary.update({"examples_per_entry": examples, "seed": seed, "world_calls": worlds,
                    "seconds": round(time.monotonic() - began)})  # fmt: skip
    return summary
