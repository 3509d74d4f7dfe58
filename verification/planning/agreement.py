"""The plan of a two-sample check (:func:`verification.check_samplers_agree`): its request, tests, sizes and seeds.

Request
-------
:func:`agreement_request` checks the arguments as :func:`verification.planning.request.check_request` does (the
logits, temperatures, rates, ``tv`` or ``budget_s``, ``seed`` and ``seed_bits``) and wraps both samplers in the
protocol.  The *planning law* of each row (``softmax`` of the logits at the temperature by default, or an aim of
:mod:`verification.battery.aims`) sizes the draws and fixes the certificate's singletons before any draw; the
samplers are compared with each other, never with it, so a wrong planning law costs power, never validity.

Tests (one Holm family, ``m = 3 B`` members at most)
----------------------------------------------------
Per row ``b``: ``row b: homogeneity`` (Pearson's chi-square on the pooled ``2 x k`` table,
:func:`verification.stats.homogeneity.homogeneity_test`; its stated deviation is the total variation over
categories, pooled mass included), ``row b: categories`` (each token's split between the samplers,
:func:`verification.stats.homogeneity.category_homogeneity_test`) and ``row b: range`` (a draw outside
``[0, V)`` by either sampler fails it).  A row whose planning law is one token has no homogeneity test.

Sizes
-----
With ``tv``: ``n`` draws per row and sampler, the largest over the rows of
:func:`verification.stats.homogeneity.required_homogeneity_samples` at the row's planning law (``V - 1`` degrees of
freedom where the pooled mass of the planning law stays above ``tv``), at level ``alpha / m``; ``K = ceil(n / c)``
calls of ``c = min(n, MAX_CALL_DRAWS)`` columns per sampler.  With ``budget_s``: two calls per sampler, ``c`` the
most that fits the pilot's affine costs.

Seeds (modulo ``2**seed_bits``)
-------------------------------
Sampler A's call ``k``: ``s + k``; sampler B's: ``s + 2**14 + k`` (distinct seeds: the two samples must be
independent even when both samplers are one generator); the pilot: ``s + 2**15 + 1`` for both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ..battery.aims import Target, softmax
from ..battery.protocol import SamplerCall
from ..stats.homogeneity import required_homogeneity_samples
from ..stats.power import check_deviation
from .check import MAX_CALL_DRAWS, PILOT_DRAWS, TEST_RESERVE
from .request import check_request
from .streams import DEFAULT_SEED_BITS

__all__ = [
    "AgreementPlan",
    "AgreementRequest",
    "B_SEED_OFFSET",
    "agreement_request",
    "plan_agreement",
    "row_tests",
]

#: Seed offset of sampler B's calls (sampler A's are ``s + k``, ``k < 2**14``).
B_SEED_OFFSET = 1 << 14
#: Tests of a row, in order (``homogeneity`` where the planning law has two tokens or more).
ROW_TESTS = ("homogeneity", "categories", "range")


@dataclass(frozen=True)
class AgreementRequest:
    """The checked arguments of :func:`verification.check_samplers_agree`.

    Attributes
    ----------
    call_a, call_b : SamplerCall
    logits : torch.Tensor
        float32 ``[B, V]``, as both samplers receive them.
    temperatures : numpy.ndarray, float64 (B,)
    planning : Target
        The law the sizes and the certificate's singletons are planned at.
    probs : numpy.ndarray, float64 (B, V)
        The planning law of every row.
    alpha, power, tv, budget_s, seed, seed_bits
        As :class:`verification.planning.request.CheckRequest`.
    """

    call_a: SamplerCall
    call_b: SamplerCall
    logits: torch.Tensor
    temperatures: np.ndarray
    planning: Target
    probs: np.ndarray = field(repr=False)
    alpha: float
    power: float
    tv: float | None
    budget_s: float | None
    seed: int
    seed_bits: int

    @property
    def seeded(self) -> bool:
        """Both samplers take a seed (else neither gets one: two seedless calls are two fresh draws)."""
        return self.call_a.seeded and self.call_b.seeded


def agreement_request(sampler_a, sampler_b, logits, *, temperature=1.0, planning_law="softmax", alpha: float = 1e-3,
                      power: float = 0.99, tv: float | None = None, budget_s: float | None = None, seed: int = 0,
                      seed_bits: int = DEFAULT_SEED_BITS) -> AgreementRequest:  # fmt: skip
    """Check the arguments of :func:`verification.check_samplers_agree` (``TypeError``/``ValueError`` naming the
    argument, before any call)."""
    if planning_law != "softmax" and not isinstance(planning_law, Target):
        raise TypeError(f"planning_law must be 'softmax' or a verification.battery.aims.Target, got {planning_law!r}")
    r = check_request(sampler_a, logits, target=planning_law, temperature=temperature, alpha=alpha, power=power,
                      tv=tv, budget_s=budget_s, seed=seed, seed_bits=seed_bits)  # fmt: skip
    call_b = SamplerCall.wrap(sampler_b)
    return AgreementRequest(r.call, call_b, r.logits, r.temperatures, r.aim if isinstance(r.aim, Target) else softmax(),
                            r.probs, r.alpha, r.power, r.tv, r.budget_s, r.seed, r.seed_bits)  # fmt: skip


@dataclass(frozen=True)
class AgreementPlan:
    """The calls and tests of a two-sample check: ``calls`` calls of ``columns`` draws per sampler."""

    columns: int
    calls: int
    tests: tuple[str, ...]
    skipped: dict[str, str]
    how: str

    @property
    def n(self) -> int:
        """Draws per row and sampler."""
        return self.calls * self.columns


def row_tests(probs: np.ndarray) -> tuple[list[str], dict[str, str]]:
    """Member names of every row and the tests not run (a row whose planning law is one token)."""
    names, skipped = [], {}
    for b, p in enumerate(probs):
        for test in ROW_TESTS:
            if test == "homogeneity" and np.count_nonzero(p) < 2:
                skipped[f"row {b}: homogeneity"] = "the row's planning law is one token: the range and per-category " \
                    "tests see any other draw"  # fmt: skip
                continue
            names.append(f"row {b}: {test}")
    return names, skipped


def _n_for_tv(request: AgreementRequest, level: float) -> tuple[int, list[str]]:
    v = request.probs.shape[1]
    tv = check_deviation(request.tv, "tv", alpha=level, power=request.power)
    n, notes = 1, []
    for b, p in enumerate(request.probs):
        if np.count_nonzero(p) < 2:
            continue
        try:
            m = required_homogeneity_samples(tv, v, probs=p, alpha=level, power=request.power)
        except ValueError:  # the planning law's pooled mass stays above tv: plan for V - 1 degrees of freedom
            m = required_homogeneity_samples(tv, v, alpha=level, power=request.power)
            notes.append(f"row {b}: planned at V - 1 degrees of freedom (the planning law's pooled mass stays above "
                         f"tv = {tv:g})")  # fmt: skip
        n = max(n, m)
    return n, notes


def plan_agreement(request: AgreementRequest, cost: tuple[float, float], elapsed: float) -> AgreementPlan:
    """The plan: the tests, then the sizes for ``request.tv`` or for what is left of ``request.budget_s`` after
    ``elapsed`` seconds at the pilot's affine ``cost`` (both samplers' calls together: ``a + b B c``)."""
    names, skipped = row_tests(request.probs)
    level = request.alpha / len(names)
    rows = request.probs.shape[0]
    if request.budget_s is not None:
        a, per = cost
        left = (request.budget_s - elapsed) * (1 - TEST_RESERVE)
        columns = int(min(MAX_CALL_DRAWS, max(PILOT_DRAWS, (left - 2 * a) / max(2 * per * rows, 1e-12))))
        calls = 2
        how = (f"sizes fit budget_s = {request.budget_s:g} s after a pilot (both samplers: {a:.3g} s per call + "
               f"{per:.3g} s per draw of a row)")  # fmt: skip
    else:
        n, notes = _n_for_tv(request, level)
        columns = min(n, MAX_CALL_DRAWS)
        calls = math.ceil(n / columns)
        how = (f"sizes planned for total variation tv = {request.tv:g} between the two laws (the homogeneity "
               f"test at level alpha/{len(names)}, at the planning law's pooled columns)")  # fmt: skip
        how += "".join(f"; {note}" for note in notes)
    return AgreementPlan(columns, calls, tuple(names), skipped, how)
