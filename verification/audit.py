"""Audit of samplers written elsewhere: the suite run on code no one here wrote.

Each audited sampler draws from the cases below, the suite of :mod:`verification.suite` tests
every (sampler, case), and one Holm family per sampler decides it at the family-wise ``alpha``: a
sampler that is exact fails with probability at most ``alpha``.  The row reports whether it passed,
the draws it was given, the smallest deviations it was tested to (the Pearson test's detectable total
variation on the generic case, the tail test's detectable relative deficit on the tail cases), and
for a failure what failed and the mechanism behind it.

Samplers
--------
=============================  ===============================================================
name                           call
=============================  ===============================================================
``torch.multinomial``          ``torch.multinomial(softmax(z / T), n, replacement=True)``
``torch.multinomial-1``        ``torch.multinomial(probs, 1)`` per row of a batch (PyTorch's
                               exponential-race fast path)
``vllm-race-fp32``             ``probs.div(torch.empty_like(probs).exponential_()).argmax(-1)``
                               with float32 probabilities (vLLM's random sampler)
``vllm-race-fp16``             the same race with float16 probabilities and exponentials
``numpy.choice``               ``numpy.random.Generator.choice(V, n, p=softmax(z / T))``, float64
``jax.categorical``            ``jax.random.categorical(key, z / T)`` (when ``import jax`` works)
``flashinfer``                 ``flashinfer.sampling.sampling_from_logits`` (CUDA and flashinfer)
=============================  ===============================================================

Torch samplers run on CUDA when it is available, else on the CPU.  Every sampler receives the
case's float32 logits (or the probabilities computed from them the way its users do), and the
target is the float64 softmax of those float32 logits.

Budget
------
``budget_s`` seconds are split over the available samplers, the cheap ones (``O(1)`` per draw) first,
each taking an equal part of the time still left; inside a sampler, over the
cases in fixed shares (the tail and mask cases, which need many draws per vocabulary entry, get
most).  A pilot of a few hundred draws measures the cost per draw; each (sampler, case) then draws
``min(MAX_DRAWS, share / cost)`` and at least ``MIN_DRAWS``.  Per-draw cost is ``O(V)`` for the
races (a full exponential vector per draw), so on a CPU they reach far fewer draws than the
inverse-CDF samplers; the reported detectable deviations say what that bought.
"""

from __future__ import annotations

import argparse
import importlib
import math
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from flashsampling.reference import softmax

from .cases import Case
from .family import Family
from .markdown import audit_tables
from .mutants import mutant_cases
from .stats._binomial import detectable_shifts
from .stats.tails import TailResult
from .suite import run_suite, suite_names

__all__ = ["AUDIT_CASES", "SAMPLERS", "AuditSampler", "audit_cases", "format_audit", "run_audit"]

#: Cap on draws per (sampler, case): 10**6 draws detect a total variation of about 0.01 at V = 1000.
MAX_DRAWS = 1_000_000
#: Floor on draws per (sampler, case), whatever the budget.
MIN_DRAWS = 1_000
#: Vocabulary entries per batched call of the race samplers (64 MB of float32).
_BATCH_ELEMENTS = 1 << 24
#: Budget when none is given (seconds, all samplers together).
DEFAULT_BUDGET_S = 120.0

#: Cases of the audit and their share of a sampler's time.
AUDIT_CASES = {
    "normal-V1000": 0.10,
    "tail17-V32768": 0.30,
    "tail20-V262144": 0.15,
    "grammar-V32768": 0.35,
    "flat-V1024": 0.10,
}


@lru_cache(maxsize=1)
def audit_cases() -> dict[str, Case]:
    """The audit's cases (three shared with :func:`verification.mutants.mutant_cases`)."""
    base = mutant_cases()
    out = {k: base[k] for k in ("normal-V1000", "tail20-V262144", "flat-V1024")}
    z = np.full(32768, -17.0)
    z[0] = 0.0
    out["tail17-V32768"] = Case("tail17-V32768", z, 1.0, "one token at 0, 32767 tokens 17 nats below (p_T=1.4e-3)",
                                tail_gap=16.0)  # fmt: skip
    z = np.full(32768, -np.inf)
    z[:64] = base["grammar-V262144"].logits[:64]
    out["grammar-V32768"] = Case("grammar-V32768", z, 1.0, "grammar mask: 64 allowed tokens, 32704 at -inf")
    return {k: out[k] for k in AUDIT_CASES}


# --------------------------------------------------------------------------------------------
# The samplers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditSampler:
    """A sampler written elsewhere.

    Attributes
    ----------
    name : str
    call : str
        The call audited, as its users write it.
    draw : callable
        ``(case, n, seed) -> int64 (n,)``.
    available : callable
        ``() -> None`` when the sampler can run here, else the reason it cannot.
    origin : callable
        ``() -> str``: library, version and device.
    mechanism : dict[str, str]
        The mechanism of the failures this audit found, by device type (``"cpu"``, ``"cuda"``, or
        ``"any"``); shown only when the sampler fails.
    per_draw_vector : bool
        Each draw costs a vector over the vocabulary (a race); such samplers run after the cheap ones
        and inherit the time those leave unused.
    """

    name: str
    call: str
    draw: Callable[[Case, int, int], np.ndarray]
    available: Callable[[], str | None]
    origin: Callable[[], str]
    mechanism: dict[str, str] = field(default_factory=dict)
    per_draw_vector: bool = True


def _torch_device():
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _torch_origin() -> str:
    import torch

    dev = _torch_device()
    name = torch.cuda.get_device_name(0) if dev.type == "cuda" else platform.processor() or "cpu"
    return f"torch {torch.__version__} on {dev.type} ({name})"


def _torch_probs(case: Case, dtype=None):
    import torch

    z = torch.tensor(case.logits, dtype=torch.float32, device=_torch_device())
    p = torch.softmax(z / case.temperature, dim=-1)
    return p if dtype is None else p.to(dtype)


def _batched(n: int, v: int, draw_rows: Callable[[int], Any]) -> np.ndarray:
    out = []
    left = n
    rows = max(1, min(n, _BATCH_ELEMENTS // v))
    while left > 0:
        b = min(rows, left)
        out.append(draw_rows(b).reshape(-1).cpu().numpy())
        left -= b
    return np.concatenate(out).astype(np.int64)


def _torch_multinomial(case: Case, n: int, seed: int) -> np.ndarray:
    import torch

    g = torch.Generator(device=_torch_device()).manual_seed(seed)
    return torch.multinomial(_torch_probs(case), n, replacement=True, generator=g).cpu().numpy().astype(np.int64)


def _torch_multinomial_one(case: Case, n: int, seed: int) -> np.ndarray:
    import torch

    g = torch.Generator(device=_torch_device()).manual_seed(seed)
    p = _torch_probs(case)
    return _batched(n, p.numel(), lambda b: torch.multinomial(p.expand(b, -1).contiguous(), 1, generator=g))


def _race(dtype) -> Callable[[Case, int, int], np.ndarray]:
    def draw(case: Case, n: int, seed: int) -> np.ndarray:
        import torch

        g = torch.Generator(device=_torch_device()).manual_seed(seed)
        p = _torch_probs(case, getattr(torch, dtype))

        def rows(b: int):
            probs = p.expand(b, -1)
            q = torch.empty_like(probs)
            q.exponential_(generator=g)
            return probs.div(q).argmax(dim=-1)

        return _batched(n, p.numel(), rows)

    return draw


def _numpy_choice(case: Case, n: int, seed: int) -> np.ndarray:
    p = softmax(case.logits, case.temperature)
    return np.random.default_rng(seed).choice(p.size, size=n, p=p).astype(np.int64)


def _jax_categorical(case: Case, n: int, seed: int) -> np.ndarray:
    import jax
    import jax.numpy as jnp

    z = jnp.asarray((case.logits / case.temperature).astype(np.float32))
    key = jax.random.PRNGKey(seed)
    out = []
    rows = max(1, min(n, _BATCH_ELEMENTS // z.size))
    for i, s0 in enumerate(range(0, n, rows)):
        b = min(rows, n - s0)
        out.append(np.asarray(jax.random.categorical(jax.random.fold_in(key, i), z, shape=(b,))))
    return np.concatenate(out).astype(np.int64)


def _flashinfer(case: Case, n: int, seed: int) -> np.ndarray:
    import flashinfer
    import torch

    z = torch.tensor(case.logits / case.temperature, dtype=torch.float32, device="cuda")
    g = torch.Generator(device="cuda").manual_seed(seed)
    return _batched(n, z.numel(), lambda b: flashinfer.sampling.sampling_from_logits(z.expand(b, -1).contiguous(),
                                                                                      generator=g))  # fmt: skip


def _has(module: str) -> str | None:
    try:
        importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - any import failure means "not available here"
        return f"import {module} failed: {type(e).__name__}: {e}".splitlines()[0][:160]
    return None


def _flashinfer_available() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch not installed"
    if not torch.cuda.is_available():
        return "no CUDA device"
    return _has("flashinfer")


def _version(module: str) -> Callable[[], str]:
    def origin() -> str:
        mod = importlib.import_module(module)
        extra = ""
        if module == "jax":
            extra = f" on {mod.default_backend()}"
        return f"{module} {getattr(mod, '__version__', '?')}{extra}"

    return origin


SAMPLERS: tuple[AuditSampler, ...] = (
    AuditSampler(
        "torch.multinomial",
        "torch.multinomial(torch.softmax(z / T, -1), n, replacement=True)",
        _torch_multinomial,
        lambda: _has("torch"),
        _torch_origin,
        {
            "cpu": "the CPU kernel (aten/src/ATen/native/cpu/MultinomialKernel.cpp) accumulates the CDF as a "
            "float32 running sum; once the sum nears 1 its float32 step (6e-8) exceeds a tail token's "
            "probability (2e-9 at 20 nats below the top), the addition rounds away, and those tokens get "
            "zero-width CDF intervals: never drawn",
        },
        per_draw_vector=False,
    ),
    AuditSampler(
        "torch.multinomial-1",
        "torch.multinomial(probs, 1) per row (PyTorch's exponential-race fast path)",
        _torch_multinomial_one,
        lambda: _has("torch"),
        _torch_origin,
        {
            "cuda": "the num_samples=1 path is the race probs / Exp(1) (as vllm-race-fp32); on CUDA PyTorch "
            "sets log(u) = -eps/2 for u >= 1 - eps/2 (aten/src/ATen/core/TransformationHelper.h), so E >= "
            "2**-24 and p/E <= p 2**24: tokens more than ~16.6 nats below the top cannot win",
        },
    ),
    AuditSampler(
        "vllm-race-fp32",
        "q = torch.empty_like(probs).exponential_(); probs.div(q).argmax(-1), float32 probs",
        _race("float32"),
        lambda: _has("torch"),
        _torch_origin,
        {
            "cuda": "on CUDA PyTorch's exponential sets log(u) = -eps/2 for u >= 1 - eps/2 "
            "(aten/src/ATen/core/TransformationHelper.h): E >= 2**-24, p/E <= p 2**24, so tokens more than "
            "~16.6 nats below the top cannot win (fully starved at 20 nats, partly at 17)",
        },
    ),
    AuditSampler(
        "vllm-race-fp16",
        "the same race with probs.half() and a float16 exponential_()",
        _race("float16"),
        lambda: _has("torch"),
        _torch_origin,
        {
            "cpu": "float16 exponentials are exactly 0 about once in 2**25 (rounding of E < 2**-25): 0/0 = NaN, "
            "which argmax ranks first, so a masked token is drawn (about once per 2**25 / #masked draws); "
            "tokens whose float16 probability flushes to 0 (below 3e-8: the tail 20 nats down) are drawn "
            "only that way, far too often",
            "cuda": "float16 probabilities sit on the subnormal grid 2**-24 = 6e-8: a tail token of 4.1e-8 "
            "rounds up to 6e-8 (+44%, the 17-nat tail over-drawn) and one of 2e-9 to 0 (the 20-nat tail never "
            "drawn); CUDA's exponential never returns 0, so no NaN",
        },
    ),
    AuditSampler(
        "numpy.choice",
        "numpy.random.default_rng(seed).choice(V, n, p=softmax64(z / T))",
        _numpy_choice,
        lambda: None,
        lambda: f"numpy {np.__version__} on cpu",
        per_draw_vector=False,
    ),
    AuditSampler(
        "jax.categorical",
        "jax.random.categorical(key, z / T, shape=(n,))",
        _jax_categorical,
        lambda: _has("jax"),
        _version("jax"),
        {
            "any": "Gumbel noise -log(-log(u)) from float32 uniforms u in [tiny, 1) (jax/_src/random.py, "
            "_gumbel, default mode): the largest noise is -log(-log(1 - 2**-24)) = 16.6 nats, so tokens "
            "further below the top are starved",
        },
    ),
    AuditSampler(
        "flashinfer",
        "flashinfer.sampling.sampling_from_logits(logits, generator=g)",
        _flashinfer,
        _flashinfer_available,
        _version("flashinfer"),
    ),
)


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


def _diagnose(members, case_by_prefix: dict[str, Case]) -> list[str]:
    """One line per failed test: what was observed against what was expected."""
    out = []
    for mm in members:
        if mm.passed:
            continue
        case_name, test = mm.name.split(":", 1)
        case = case_by_prefix[case_name]
        r = mm.result
        line = f"{case_name}: {test} failed (Holm p={mm.adjusted_pvalue:.2g})"
        if isinstance(r, TailResult):
            line += f"; {int(r.statistic)} draws in the tail, expected {r.expected:.1f}"
        elif test == "categories":
            worst = r.most_significant(1)[0]
            p = case.probs[worst.category]
            line += (f"; {r.num_flagged} token(s) flagged, worst token {worst.category} (p={p:.3g}): "
                     f"{worst.observed} draws, expected {worst.expected:.1f}")  # fmt: skip
        elif test == "ties":
            line += f"; lower half {r.lower_fraction:.4f}, expected {r.expected_fraction:.4f}"
        if math.isinf(r.statistic) or getattr(r, "impossible", 0) or getattr(r, "outside", 0):
            line += "; impossible draws (probability-0 tokens)"
        out.append(line)
    return out


def _shares(costs: dict[str, float], budget: float) -> dict[str, int]:
    """Draws per case: ``budget`` seconds split by the weights of :data:`AUDIT_CASES`; a case that reaches
    ``MAX_DRAWS`` inside its share hands the rest to the others (water-filling)."""
    n: dict[str, int] = {}
    todo = dict(costs)
    left = budget
    while todo:
        wsum = sum(AUDIT_CASES[k] for k in todo)
        capped = [k for k in todo if MAX_DRAWS * todo[k] <= left * AUDIT_CASES[k] / wsum]
        if not capped:
            for k, c in todo.items():
                n[k] = int(max(MIN_DRAWS, min(MAX_DRAWS, left * AUDIT_CASES[k] / wsum / max(c, 1e-12))))
            break
        for k in capped:
            n[k] = MAX_DRAWS
            left -= MAX_DRAWS * todo.pop(k)
    return n


def _audit_one(s: AuditSampler, cases: dict[str, Case], *, alpha: float, budget: float, seed: int) -> dict[str, Any]:
    row: dict[str, Any] = {"sampler": s.name, "call": s.call}
    reason = s.available()
    if reason is not None:
        row.update(available=False, skipped=reason, passed=None)
        return row
    t0 = time.perf_counter()
    row.update(available=True, origin=s.origin())
    costs = {}
    warmup = 0.0
    for k, (name, case) in enumerate(cases.items()):
        pilot = 256 if case.num_categories > 100_000 else 1024
        t = time.perf_counter()
        s.draw(case, pilot, seed + 7919 * (k + 1))  # warm-up (device start, compilation)
        warmup += time.perf_counter() - t
        t = time.perf_counter()
        s.draw(case, pilot, seed + 7919 * (k + 1) + 1)  # timing; these draws are not tested
        costs[name] = (time.perf_counter() - t) / pilot
    # The warm-ups are not charged to the share: a first call that compiles for two minutes (FlashInfer's
    # JIT) would otherwise leave the minimum of draws, and a test with little power.
    draws = _shares(costs, max(0.0, budget - (time.perf_counter() - t0 - warmup)))
    size = sum(len(suite_names(c)) for c in cases.values())
    fam = Family(alpha=alpha, size=size, name=s.name)
    per_case = []
    for k, (name, case) in enumerate(cases.items()):
        t = time.perf_counter()
        x = s.draw(case, draws[name], seed + k)
        secs = time.perf_counter() - t
        run_suite(x, case, alpha=alpha, family=fam, prefix=f"{name}:")
        per_case.append({"case": name, "n": int(x.size), "seconds": secs})
    members = fam.members()
    for pc in per_case:
        mine = [mm for mm in members if mm.name.startswith(pc["case"] + ":")]
        pc["passed"] = all(mm.passed for mm in mine)
        pc["failed_tests"] = [mm.name.split(":", 1)[1] for mm in mine if not mm.passed]
        by = {mm.name.split(":", 1)[1]: mm.result for mm in mine}
        pc["min_detectable_tv"] = _finite(by["pearson"].min_detectable)
        if "tail" in by:
            pc["min_detectable_tail_deficit"] = _deficit(by["tail"])
    passed = all(mm.passed for mm in members)
    generic = next(pc for pc in per_case if pc["case"] == "normal-V1000")
    tails = [pc["min_detectable_tail_deficit"] for pc in per_case if pc.get("min_detectable_tail_deficit") is not None]
    row.update(
        passed=passed,
        draws=int(sum(pc["n"] for pc in per_case)),
        smallest_tv=generic["min_detectable_tv"],
        smallest_tail_deficit=min(tails) if tails else None,
        cases=per_case,
        failures=_diagnose(members, cases),
        mechanism=None if passed else _mechanism(s),
        seconds=time.perf_counter() - t0,
        warmup_seconds=warmup,
        tests=len(members),
    )
    return row


def _finite(x: float) -> float | None:
    """``x`` as a float, ``None`` when it is not finite (JSON has no infinity)."""
    return float(x) if math.isfinite(x) else None


def _mechanism(s: AuditSampler) -> str:
    """The documented mechanism for the device this sampler ran on."""
    dev = _torch_device().type if s.origin is _torch_origin else "any"
    return s.mechanism.get(dev) or s.mechanism.get("any") or "not established"


def _deficit(r: TailResult) -> float | None:
    """Smallest relative tail *deficit* the two-sided tail test detects (its 'less' side); ``None``: none is."""
    down, _ = detectable_shifts(r.n, r.tail_mass, r.alpha, r.power, "two-sided")
    return float(down / r.tail_mass) if math.isfinite(down) else None


def run_audit(alpha: float = 1e-3, budget_s: float | None = None, seed: int = 20261129, *,
              samplers: list[str] | None = None, progress: bool = False) -> list[dict[str, Any]]:  # fmt: skip
    """Audit the samplers of :data:`SAMPLERS` that can run here.

    Parameters
    ----------
    alpha : float
        Family-wise false-alarm rate of each sampler's family (all its cases and tests, Holm).
    budget_s : float, optional
        Seconds for the whole audit (default :data:`DEFAULT_BUDGET_S`), split equally over the
        available samplers; each sampler's first calls (compilation, device start) are not charged.
    seed : int
        Base seed of the draws.
    samplers : list of str, optional
        Names to audit (default: all).
    progress : bool
        Print one line per sampler as it finishes.

    Returns
    -------
    list of dict
        One JSON-ready row per sampler: ``sampler``, ``call``, ``available`` (and ``skipped`` with the
        reason when not), ``origin``, ``passed``, ``draws``, ``smallest_tv`` (Pearson, generic case),
        ``smallest_tail_deficit`` (relative; ``None`` when no tail case had draws enough to detect even a
        fully starved tail), ``cases`` (per case: ``n``, ``passed``, ``failed_tests``,
        ``min_detectable_tv``, ``min_detectable_tail_deficit``), ``failures`` (diagnosis lines) and
        ``mechanism`` (for a failure).
    """
    chosen = [s for s in SAMPLERS if samplers is None or s.name in samplers]
    budget = DEFAULT_BUDGET_S if budget_s is None else float(budget_s)
    t0 = time.perf_counter()
    cases = audit_cases()
    rows: dict[str, dict[str, Any]] = {}
    # Cheap samplers first; each live sampler gets an equal part of the time still left.
    order = sorted(range(len(chosen)), key=lambda k: chosen[k].per_draw_vector)
    live_left = sum(chosen[k].available() is None for k in order)
    for k in order:
        s = chosen[k]
        share = max(0.0, budget - (time.perf_counter() - t0)) / max(1, live_left)
        row = _audit_one(s, cases, alpha=alpha, budget=share, seed=seed + 100_000 * k)
        live_left -= bool(row["available"])
        rows[s.name] = row
        if progress:
            print(format_audit([row]).splitlines()[-1], flush=True)
    return [rows[s.name] for s in chosen]


def format_audit(rows: list[dict[str, Any]]) -> str:
    """Text table of :func:`run_audit` rows."""
    head = f"{'sampler':22} {'verdict':8} {'draws':>10} {'TV tested to':>12} {'tail deficit':>12}  origin / failure"
    out = [head, "-" * len(head)]
    for r in rows:
        if not r.get("available"):
            out.append(f"{r['sampler']:22} {'skipped':8} {'':>10} {'':>12} {'':>12}  {r['skipped']}")
            continue
        tail = r["smallest_tail_deficit"]
        tail_s = "untested" if tail is None else f"{tail:.3g}"
        note = r["origin"] if r["passed"] else (r["failures"][0] if r["failures"] else "")
        out.append(f"{r['sampler']:22} {'pass' if r['passed'] else 'FAIL':8} {r['draws']:>10,} "
                   f"{r['smallest_tv']:>12.3g} {tail_s:>12}  {note}")  # fmt: skip
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m verification.audit", description=__doc__.split("\n\n")[0])
    ap.add_argument("--alpha", type=float, default=1e-3)
    ap.add_argument("--budget", type=float, default=None, help=f"seconds in all (default {DEFAULT_BUDGET_S:g})")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--samplers", default=None, help="comma-separated sampler names")
    ap.add_argument("--json", default=None, help="write the rows as JSON here")
    ap.add_argument("--markdown", default=None, help="write markdown tables of the rows here")
    args = ap.parse_args(argv)
    names = args.samplers.split(",") if args.samplers else None
    rows = run_audit(args.alpha, args.budget, args.seed, samplers=names, progress=True)
    print(format_audit(rows))
    for r in rows:
        for line in r.get("failures", []):
            print(f"  {r['sampler']}: {line}")
    if args.json:
        import json

        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1, default=float)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(audit_tables(rows)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
