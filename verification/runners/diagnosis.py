"""Why a check failed: each failing test's worst tokens and the likely mechanism.

:func:`diagnose` reads a finished check (its failing tests, every row's counts, logits and target) and returns one
entry per failing test:

* a row's distribution test (``pearson``, ``g-test``, ``cdf-*``, ``categories``, ``tail``, ``ties``, ``range``): the
  tokens with the largest standardized residual ``(o_i - e_i) / sqrt(e_i (1 - p_i))`` among those the test reads
  (the far tail for ``tail``, the tied group for ``ties``, the excluded tokens for ``range``; a drawn token of
  probability 0 first), each with its observed and expected count, its logit and its probability;
* an independence test (``samples``, ``halves``, ``rows``, ``seeds``, ``seed bits``, ``calls``): the lag, rows or
  seed bit at fault (draws of independent streams have no worst token).

The mechanism of a distribution test is the simple alternative law that explains the draws best, when one explains
them much better than the target: ``G = 2 (log L(alternative) - log L(target))`` above :data:`MECHANISM_G` (the
0.999999 quantile of chi-square(1): a chance gain that large has probability below ``1e-6`` for one fitted
parameter).  The alternatives: the target of the logits rounded to bfloat16 or float16 (low-precision logits), at
another temperature (fitted), without its tokens 8, 12 or 16 nats below the top (a dropped tail), and shifted by
one index (an off-by-one).  Otherwise the mechanism is read from the test (a starved or flooded tail, the tie
rule, an impossible draw).  A diagnosis is a hint for a person, not a test: it changes no verdict.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from scipy import optimize, stats

from ..planning.check import Plan
from ..planning.request import CheckRequest
from ..stats.counts import Counts
from .sampler_report import SamplerReport

__all__ = ["MECHANISM_G", "WORST_TOKENS", "diagnose"]

#: Tokens listed per failing test.
WORST_TOKENS = 5
#: Log-likelihood-ratio gain ``G`` an alternative law needs to be named as the mechanism (chi-square(1) at 1e-6).
MECHANISM_G = float(stats.chi2.isf(1e-6, 1))
#: Gaps (nats below the top) of the dropped-tail alternatives.
_DROP_GAPS = (8.0, 12.0, 16.0)

_STREAMS = {
    "samples": "draws j and j + {lag} of one call are dependent (lag {lag}): a counter or stream reused within a call",
    "halves": "a call's second half mirrors its first (shift {lag}): the stream restarts or runs backwards mid-call",
    "seeds": "seeds s and s + 1 give overlapping streams (shift {lag}): the seed used as a counter offset",
    "calls": "two calls overlap (shift {lag}): the seed ignored, or one generator re-seeded alike per call",
}


def diagnose(report: SamplerReport, request: CheckRequest, plan: Plan, counts: list[Counts]) -> list[dict[str, Any]]:
    """One diagnosis per failing test of ``report`` (module docstring), the tests of one row that give the same
    tokens and mechanism in one entry (``tests`` lists them, ``test`` names them); empty when the check passed."""
    out: list[dict[str, Any]] = []
    for t in report.failures():
        if t.name.startswith("row ") and ": " in t.name:
            b = int(t.name.split()[1].rstrip(":"))
            d = _row_diagnosis(t.name, t.result, request, plan, b, counts[b])
        else:
            d = _stream_diagnosis(t.name, t.result)
        same = [e for e in out if (e["row"], e["tokens"], e["mechanism"]) == (d["row"], d["tokens"], d["mechanism"])]
        if same:  # the row's distribution tests read the same draws: one entry names them all
            same[0]["tests"].append(d["test"])
            same[0]["test"] = f"{same[0]['test']}, {d['test'].split(': ', 1)[-1]}"
        else:
            out.append({**d, "tests": [d["test"]]})
    return out


def _residuals(h: np.ndarray, p: np.ndarray, n: int) -> np.ndarray:
    e = n * p
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (h - e) / np.sqrt(e * (1.0 - p))
    r[(e == 0) & (h > 0)] = np.inf
    r[(e == 0) & (h == 0)] = 0.0
    return np.nan_to_num(r, nan=0.0, posinf=np.inf)


def _worst(h: np.ndarray, p: np.ndarray, z: np.ndarray, n: int, among: np.ndarray) -> list[dict[str, Any]]:
    r = _residuals(h.astype(np.float64), p, n)
    idx = np.flatnonzero(among)
    idx = idx[np.argsort(-np.abs(r[idx]), kind="stable")][:WORST_TOKENS]
    return [
        {
            "token": int(i),
            "observed": int(h[i]),
            "expected": float(n * p[i]),
            "logit": float(z[i]) if math.isfinite(z[i]) else None,
            "probability": float(p[i]),
            "residual": float(r[i]) if math.isfinite(r[i]) else None,
        }
        for i in idx
    ]


def _row_diagnosis(name: str, result, request: CheckRequest, plan: Plan, b: int, c: Counts) -> dict[str, Any]:
    p, z = request.probs[b], request.values[b]
    h, n = c.histogram, c.n
    test = name.split(": ", 1)[1]
    row = plan.rows[b]
    among = np.ones(p.size, dtype=bool)
    if test == "tail" and row.case.tail_gap is not None:
        among = row.case.tail_mask()
    elif test == "ties" and row.tie is not None:
        among = row.tie
    elif test == "range":
        among = (p == 0) & (h > 0)
    tokens = _worst(h, p, z, n, among)
    mechanism = _test_mechanism(test, result, h, p, c, among)
    if mechanism is None:
        mechanism = _best_alternative(request, b, h, p) or (
            "no simple alternative explains the draws: per-token errors (see the worst tokens)")  # fmt: skip
    return {"test": name, "row": b, "tokens": tokens, "mechanism": mechanism}


def _test_mechanism(test: str, result, h, p, c: Counts, among) -> str | None:
    """The mechanism a test's own result names (range, ties, tail); ``None``: ask the alternatives."""
    if test == "range":
        if c.out_of_range:
            return (f"{c.out_of_range} draws outside [0, V): an index off by one, or an unmasked padding column of "
                    "the vocabulary")  # fmt: skip
        return ("tokens the target excludes were drawn: a -inf mask or a filter (top-k, top-p, min-p) ignored or "
                "applied with another convention")  # fmt: skip
    if test == "ties":
        low = float(getattr(result, "lower_fraction", 0.5))
        expected = float(getattr(result, "expected_fraction", 0.5))
        side = "lowest" if low > expected else "highest"
        return (f"over-drawn {side} indices in tied groups (lower half {low:.3g} of the group's draws, expected "
                f"{expected:.3g}): a tie rule (the {'first' if side == 'lowest' else 'last'} index wins on equal "
                "scores) instead of a uniform tie break")  # fmt: skip
    if test == "tail":
        o, e = float(h[among].sum()), float(c.n * p[among].sum())
        if o < e:
            return (f"under-drawn far tail ({o:.0f} draws, expected {e:.4g}): low-precision logits or noise (a capped "
                    "Gumbel, a uniform rounded away from 0), or a dropped tail")  # fmt: skip
        return (f"over-drawn far tail ({o:.0f} draws, expected {e:.4g}): a uniform rounded to its end (a flooded "
                "tail), or a temperature above the target's")  # fmt: skip
    return None


def _loglik(h: np.ndarray, q: np.ndarray) -> float:
    drawn = h > 0
    if np.any(q[drawn] <= 0):
        return -math.inf
    return float(np.sum(h[drawn] * np.log(q[drawn])))


def _law(request: CheckRequest, z: np.ndarray, t: float) -> np.ndarray:
    return np.asarray(request.aim.probs(z[None, :], np.array([t])), dtype=np.float64)[0]


def _best_alternative(request: CheckRequest, b: int, h: np.ndarray, p: np.ndarray) -> str | None:
    """The alternative law with the largest gain ``G`` over the target, named when ``G > MECHANISM_G``."""
    z = request.values[b]
    t = float(request.temperatures[b])
    base = _loglik(h, p)
    if not math.isfinite(base):
        return None
    found: list[tuple[float, str]] = []
    zt = torch.from_numpy(z.astype(np.float32))
    for dtype, label in ((torch.bfloat16, "bfloat16"), (torch.float16, "float16")):
        zr = zt.to(dtype).to(torch.float64).numpy()
        if np.array_equal(zr, z) or t <= 0:
            continue
        found.append((_loglik(h, _law(request, zr, t)),
                      f"the draws fit the target of the logits rounded to {label}: low-precision logits"))  # fmt: skip
    if t > 0:
        fit = optimize.minimize_scalar(lambda s: -_loglik(h, _law(request, z, t * math.exp(s))), bounds=(-1.5, 1.5),
                                       method="bounded", options={"xatol": 1e-4})  # fmt: skip
        t_fit = t * math.exp(float(fit.x))
        found.append((-float(fit.fun), f"the draws fit the target at temperature {t_fit:.4g} instead of {t:g}: the "
                      "temperature applied wrongly (twice, not at all, or rounded)"))  # fmt: skip
    top = p.max()
    for gap in _DROP_GAPS:
        keep = p > top * math.exp(-gap)
        if keep.all() or not np.any(p[~keep] > 0):
            continue
        q = np.where(keep, p, 0.0)
        found.append((_loglik(h, q / q.sum()), f"the draws fit the target without its tokens {gap:g} nats or more "
                      "below the top: a dropped or truncated far tail"))  # fmt: skip
    for shift in (1, -1):
        found.append((_loglik(h, np.roll(p, shift)), f"the draws fit the target shifted by {shift:+d} index: an "
                      "off-by-one in the token index"))  # fmt: skip
    gain, what = max(found, key=lambda x: x[0], default=(-math.inf, ""))
    g = 2.0 * (gain - base)
    if not g > MECHANISM_G:
        return None
    return f"{what} (log-likelihood ratio G = {g:.4g} over the target)"


def _stream_diagnosis(name: str, result) -> dict[str, Any]:
    lag = int(getattr(result, "worst_lag", 0))
    if name == "seed bits":
        labels = list(getattr(result, "labels", ()))
        pv = np.asarray(getattr(result, "pvalues", []), dtype=np.float64).reshape(len(labels), -1) if labels else None
        bad = [
            int(lbl.split()[1])
            for k, lbl in enumerate(labels)
            if pv is not None and pv[k].min() * len(labels) <= result.alpha
        ]
        j = min(bad) if bad else int(str(getattr(result, "worst_stream", "bit 0")).split()[-1])
        text = (f"streams equal across seeds differing in bit {j}"
                + (f" (and bits {', '.join(str(x) for x in sorted(bad)[1:])})" if len(bad) > 1 else "")
                + f": the seed truncated to {j} bits")  # fmt: skip
    elif name.startswith("rows"):
        text = (f"{name.replace('rows', 'rows', 1)} share their draws (shift {lag}): a counter not keyed by the row, "
                "or one stream split across rows")  # fmt: skip
    else:
        text = _STREAMS.get(name, "dependent draws (shift {lag})").format(lag=lag)
    return {"test": name, "row": None, "tokens": [], "lag": lag, "mechanism": text}
