"""The check of a speculative (accept/reject) sampler: ``check_sampler(sampler, logits, target=speculative(q))``.

Protocol
--------
``sampler(draft_tokens, draft_probs, target_probs, seed) -> tokens`` (the seed optional, as for the plain
protocol, :mod:`verification.battery.protocol`):

* ``draft_tokens``: ``torch.int64 [B, N, K]``, ``N`` independent draft sequences per row, drawn by the checker
  from ``q`` (:meth:`verification.battery.aims.SpeculativeTarget.draw_draft_tokens`); a fresh copy each call;
* ``draft_probs``: ``torch.float32 [B, K, V]``, the draft model's ``q`` of each row and position;
* ``target_probs``: ``torch.float32 [B, K + 1, V]``, the target model's ``p`` (the last position is the bonus
  token's), computed by the checker in float64 from ``logits (B, K + 1, V)`` with the target's law;
* ``tokens``: integers ``[B, N, K + 1]``, the tokens emitted for each draft sequence, ``-1`` after the first
  rejection (the layout of vLLM's ``RejectionSampler`` and FlashInfer's ``chain_speculative_sampling``).

The ``N`` sequences of a row must be independent given their drafts (a sampler written per request handles
them as ``N`` requests of the same ``p, q``).  The law of the output is
:func:`flashsampling.targets.speculative_chain_law` of the float64 ``p, q`` (the float32 tables the sampler
reads differ from them by float32 rounding, ``V 2**-24`` at most in total variation, far below any deviation
the tests detect).

Tests (one Holm family, names ``row b: ...``)
---------------------------------------------
``emitted`` (Pearson on the number of tokens emitted, ``K + 1`` categories, against ``law.num_emitted``);
for each draft position ``i`` that the draws reach often enough, ``draft i pearson``, ``draft i g-test`` and
``draft i categories`` on the outcome at that position (accepted with token ``y``, or rejected with
replacement ``y``: ``2V`` categories, against ``law.outcome[b, i]``; conditional on reaching ``i``, which the
exact law makes independent of the earlier positions); ``bonus pearson``, ``bonus g-test``,
``bonus categories`` on the bonus token; ``range`` (tokens outside ``[0, V)``, a ``-1`` before a token, an
accepted token that is not the draft, an outcome of probability 0).  Independence on the outcome at
position 0 of row 0: ``samples``, ``rows`` (``B = 1``: a call with row 0 twice), ``seeds`` and ``calls``,
each call with its own draft tokens (the same drafts would make any two calls dependent).
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from flashsampling.targets import draw_draft_tokens, speculative_chain_law

from ..battery.aims import SpeculativeTarget
from ..battery.protocol import SamplerCall, SamplerError, read_tokens
from ..planning.check import COST_DRAWS, PILOT_DRAWS, test_title
from ..planning.request import CheckRequest
from ..planning.speculative import plan_speculative
from ..planning.streams import CALLS_SEED_OFFSET, COST_SEED_OFFSET, PILOT_SEED_OFFSET, ROWS_SEED_OFFSET, call_seed
from ..planning.suite import TEST_TITLES
from ..stats.categories import category_test
from ..stats.counts import Counts
from ..stats.family import Family
from ..stats.gof import g_test, pearson_chisquare
from ..stats.independence import lag_scan_test
from ..stats.results import StatResult
from ..stats.support import SupportResult
from .sampler_report import Property, SamplerReport, sampler_report

__all__ = ["check_speculative"]

#: Seed offset of the draft tokens of a call (the checker's NumPy seed ``[call seed, DRAFT_KEY]``).
DRAFT_KEY = 0xD2AF7


def _spec_call(call: SamplerCall, x: torch.Tensor, q: torch.Tensor, p: torch.Tensor, seed: int | None) -> np.ndarray:
    args = (x.clone(), q.clone(), p.clone())
    try:
        if not call.seeded:
            out = call.fn(*args)
        elif call.seed_by_keyword:
            out = call.fn(*args, seed=seed)
        else:
            out = call.fn(*args, seed)
    except SystemExit as e:  # a sampler never ends the checker's process
        raise SamplerError(f"sampler {call.name} called sys.exit({e.code!r}) during a call, seed={seed}") from e
    b, n, k = x.shape
    return read_tokens(out, (b, n, k + 1), call.name)


class _Session:
    """The tables a speculative sampler receives, and its calls with fresh draft tokens."""

    def __init__(self, call: SamplerCall, goal: SpeculativeTarget, p: np.ndarray):
        self.call = call
        self.goal = goal
        self.q32 = torch.from_numpy(goal.draft_probs.astype(np.float32))
        self.p32 = torch.from_numpy(p.astype(np.float32))
        self.calls = 0

    def __call__(self, n: int, seed: int, rows: list[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(tokens [B', n, K + 1], drafts [B', n, K])`` of one call with seed ``seed`` on ``rows``."""
        q, p, table = self.q32, self.p32, self.goal.draft_probs
        if rows is not None:  # a repeated row gets drafts of its own: equal drafts would make the rows dependent
            q, p, table = q[rows], p[rows], table[rows]
        rng = np.random.default_rng([seed, DRAFT_KEY])
        x = np.ascontiguousarray(draw_draft_tokens(table, n, seed=rng).transpose(1, 0, 2))
        self.calls += 1
        out = _spec_call(self.call, torch.from_numpy(x), q, p, seed if self.call.seeded else None)
        return out, x


def _decode(tokens: np.ndarray, drafts: np.ndarray, v: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per sequence: ``(bad, emitted, outcome)`` with ``bad`` the protocol violations, ``emitted`` the number
    of tokens (``1..K+1``) and ``outcome [.., K + 1]`` the category at each position (accepted ``y`` -> ``y``,
    rejected with replacement ``y`` -> ``V + y``, the bonus token ``y`` -> ``y``; ``-1`` where not reached)."""
    k = drafts.shape[-1]
    valid = tokens >= 0
    lead = np.cumprod(valid, axis=-1).sum(-1)
    bad = (valid.sum(-1) != lead) | (lead == 0) | (tokens >= v).any(-1)
    pos = np.arange(k + 1)
    reached = pos < lead[..., None]
    accepted = pos < (lead[..., None] - 1)
    mismatch = accepted[..., :k] & (tokens[..., :k] != drafts)
    bad |= mismatch.any(-1)
    outcome = np.where(reached, np.where(accepted | (pos == k), tokens, v + tokens), -1)
    outcome[bad] = -1
    return bad, lead, outcome


def _empty(test: str, deviation: str, alpha: float, power: float) -> StatResult:
    return StatResult(test, 0.0, 1.0, 0, alpha, power, math.inf, deviation)


def check_speculative(request: CheckRequest, *, started: float) -> SamplerReport:
    """:func:`verification.check_sampler` for a :class:`~verification.battery.aims.SpeculativeTarget` (see the
    module docstring), from its checked ``request``; ``started`` is the ``time.perf_counter()`` of the call."""
    call, goal, p, seed, power = request.call, request.aim, request.probs, request.seed, request.power
    bits = request.seed_bits
    b, k, v = goal.draft_probs.shape
    law = speculative_chain_law(p, goal.draft_probs)
    session = _Session(call, goal, p)
    props, cost = _pilot(session, seed, bits, request.budget_s is not None)
    outcome_law = law.outcome.reshape(b, k, 2 * v)
    plan = plan_speculative(request, law, cost, time.perf_counter() - started)
    names, columns, calls, stream, n = plan.tests, plan.columns, plan.calls, plan.stream, plan.n
    family = Family(alpha=request.alpha, size=len(names), name=call.name)
    a = family.test_alpha
    emitted = np.zeros((b, k + 1), dtype=np.int64)
    hist = np.zeros((b, k + 1, 2 * v), dtype=np.int64)
    bad = np.zeros(b, dtype=np.int64)
    first = second = None
    for c in range(calls):
        tokens, drafts = session(columns, call_seed(seed, c, bits))
        wrong, lead, outcome = _decode(tokens, drafts, v)
        for r in range(b):
            bad[r] += int(wrong[r].sum())
            emitted[r] += np.bincount(lead[r][~wrong[r]] - 1, minlength=k + 1)[: k + 1]
            for i in range(k + 1):
                o = outcome[r, :, i]
                hist[r, i] += np.bincount(o[o >= 0], minlength=2 * v)
        if c == 0:
            first = outcome[:, :, 0]
        elif c == 1:
            second = outcome[0, :, 0]
    for r in range(b):
        prefix = f"row {r}: "
        family.add(prefix + "emitted", pearson_chisquare(Counts(emitted[r]), law.num_emitted[r], alpha=a, power=power))
        for i in range(k + 1):
            where = f"draft {i}" if i < k else "bonus"
            if prefix + where + " pearson" not in names:
                continue
            probs = outcome_law[r, i] if i < k else np.r_[law.bonus[r], np.zeros(v)]
            h = Counts(hist[r, i])
            for test, fn in (("pearson", pearson_chisquare), ("g-test", g_test), ("categories", category_test)):
                if h.n == 0:
                    res = _empty(test, "total variation", a, power)
                else:
                    res = fn(h, probs, alpha=a, power=power)
                family.add(f"{prefix}{where} {test}", res)
        zero = np.concatenate([outcome_law[r].ravel() == 0, np.r_[law.bonus[r], np.zeros(v)] == 0])
        impossible = int(bad[r]) + int((np.concatenate([hist[r, :k].ravel(), hist[r, k]]) * zero).sum())
        family.add(prefix + "range", SupportResult(
            "range and protocol", float(impossible), 0.0 if impossible else 1.0, n, a, power,
            -math.expm1(math.log1p(-power) / n), "probability of an impossible output", int(bad[r]),
            impossible - int(bad[r]), ()))  # fmt: skip
    if "samples" in names:
        x0 = first[0]
        family.add("samples", lag_scan_test(x0, num_categories=2 * v, alpha=a, power=power))
        if "rows 0-1" in names:
            family.add("rows 0-1", lag_scan_test(x0, first[1], num_categories=2 * v, alpha=a, power=power))
        else:
            tok, dr = session(stream, call_seed(seed, ROWS_SEED_OFFSET, bits), rows=[0, 0])
            o = _decode(tok, dr, v)[2][:, :, 0]
            family.add("rows 0-0'", lag_scan_test(o[0], o[1], num_categories=2 * v, alpha=a, power=power))
        if "seeds" in names:
            family.add("seeds", lag_scan_test(x0, second, num_categories=2 * v, alpha=a, power=power))
        if call.seeded:
            tok, dr = session(stream, call_seed(seed, CALLS_SEED_OFFSET, bits))
            y = _decode(tok, dr, v)[2][0, :, 0]
        else:
            y = second
        family.add("calls", lag_scan_test(x0, y, num_categories=2 * v, alpha=a, power=power))
    return sampler_report(request, family, names, _title, properties=props, skipped=plan.skipped,
                          shape=(b, k + 1, v), n=n, stream=stream, calls=session.calls,
                          seconds=time.perf_counter() - started, how=plan.how)  # fmt: skip


def _title(name: str) -> str:
    rest = name.split(": ", 1)[-1]
    words = rest.split(" ")
    if words[0] == "draft":
        return f"draft position {words[1]}: {TEST_TITLES.get(words[2], words[2])}"
    if words[0] == "bonus":
        return f"bonus token: {TEST_TITLES.get(words[1], words[1])}"
    if words[0] == "emitted":
        return "number of tokens emitted (Pearson)"
    if words[0] == "range":
        return "range and protocol"
    return test_title(name)


def _pilot(session: _Session, seed: int, bits: int, budgeted: bool) -> tuple[list[Property], tuple[float, float]]:
    s = call_seed(seed, PILOT_SEED_OFFSET, bits)
    b = int(session.q32.shape[0])
    first, _ = session(PILOT_DRAWS, s)
    t = time.perf_counter()
    again, _ = session(PILOT_DRAWS, s)
    t_small = time.perf_counter() - t
    if session.call.seeded:
        detail = f"two calls with seed {s} and the same draft tokens, {PILOT_DRAWS} sequences a row"
        props = [Property("same seed and drafts, same tokens", bool(np.array_equal(first, again)), detail)]
    else:
        props = [Property("same seed and drafts, same tokens", None, "the sampler takes no seed")]
    cost = (0.0, 0.0)
    if budgeted:
        t = time.perf_counter()
        session(COST_DRAWS, call_seed(seed, COST_SEED_OFFSET, bits))
        t_big = time.perf_counter() - t
        per = max((t_big - t_small) / (b * (COST_DRAWS - PILOT_DRAWS)), t_big / (b * COST_DRAWS) / 4, 1e-12)
        cost = (max(0.0, t_small - per * b * PILOT_DRAWS), per)
    return props, cost
