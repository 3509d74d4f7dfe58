"""Two samplers against each other: :func:`check_samplers_agree` and :func:`assert_same_law`.

When the target cannot be written down (a serving stack's pipeline with penalties and processors, a reference
implementation), the question is whether a sampler draws from the same law as a trusted one.  The plan (tests,
sizes, seeds) is :mod:`verification.planning.agreement`'s; the certificate is
:func:`verification.stats.two_sample_bound.two_sample_tv_upper_bound`.
"""

from __future__ import annotations

import time

import numpy as np

from ..battery.protocol import SamplerCall
from ..planning.agreement import B_SEED_OFFSET, AgreementPlan, AgreementRequest, agreement_request, plan_agreement
from ..planning.check import COST_DRAWS, PILOT_DRAWS
from ..planning.check import test_title as check_title
from ..planning.streams import DEFAULT_SEED_BITS, PILOT_SEED_OFFSET, call_seed
from ..stats._validate import check_int, check_rates, to_numpy
from ..stats.counts import Counts, as_counts, count_samples
from ..stats.family import Family
from ..stats.homogeneity import category_homogeneity_test, homogeneity_test
from ..stats.results import fmt
from ..stats.support import SupportResult
from ..stats.two_sample_bound import singletons_for, two_sample_tv_upper_bound
from .sampler_report import Property, SamplerReport, sampler_report

__all__ = ["assert_same_law", "check_samplers_agree"]

#: How the certificate of a two-sample check is made (the report's words).
CERTIFICATE = ("Weissman et al. (2003) L1 bound on each sample over singletons fixed from the planning law, plus the "
               "pooled mass, joined by the triangle inequality (verification.stats.two_sample_bound)")  # fmt: skip


def check_samplers_agree(
    sampler_a,
    sampler_b,
    logits,
    *,
    temperature=1.0,
    alpha: float = 1e-3,
    power: float = 0.99,
    tv: float | None = None,
    budget_s: float | None = None,
    seed: int = 0,
    seed_bits: int = DEFAULT_SEED_BITS,
    planning_law="softmax",
) -> SamplerReport:
    """Check that two samplers draw from the same law on ``logits``: one verdict under one Holm family, and an
    upper confidence bound on the total variation between their laws.

    Fails (``not report.passed``) if any test's Holm-adjusted p-value is ``<= alpha``.  Guarantee: (a) two
    samplers with the same law (each drawing independently across calls) fail with probability at most
    ``alpha``; (b) each test states the deviation it detects with probability ``>= power`` at its ``n``; with
    ``tv``, the homogeneity test of every row detects a total variation ``tv`` between the two laws (over all
    categories, the pooled mass included, when both draw about the planning law).  ``report.tv_upper_bound``
    bounds ``TV(law A, law B)`` in every row at once with probability at least ``1 - alpha``
    (``report.tv_upper_bounds`` per row, each at ``alpha / B``), whatever the laws.

    Both samplers follow the protocol of :func:`verification.check_sampler` (``sampler(logits, num_samples,
    seed)``); sampler A's calls use seeds ``s + k``, B's ``s + 2**14 + k`` (:mod:`verification.planning.agreement`).
    The temperature is not passed: bind it; ``temperature`` and ``planning_law`` say which law the sizes are
    planned at (``softmax`` of ``logits / temperature``, or an aim such as ``top_p(0.9)``), never what is tested.

    Tests per row: ``homogeneity`` (pooled chi-square, the pooled mass counted and stated), ``categories`` (each
    token's split between the samplers, exact binomial), ``range`` (a draw outside ``[0, V)``).

    Parameters
    ----------
    sampler_a, sampler_b : callable
    logits : array_like or torch.Tensor, float, shape (V,) or (B, V)
    temperature : float >= 0 or sequence (one per row)
    alpha, power, tv, budget_s, seed, seed_bits
        As :func:`verification.check_sampler` (``tv`` defaults to 0.01 when ``budget_s`` is not given).
    planning_law : "softmax" or Target

    Returns
    -------
    SamplerReport
        ``.sampler`` is ``"A vs B"``, ``.target`` ``"the law of B"``; ``.tv_upper_bound`` the certificate.

    Raises
    ------
    TypeError, ValueError
        An argument out of range, before any call; a sampler that breaks the protocol, at its first call.

    Examples
    --------
    >>> from verification.battery import examples
    >>> import numpy as np
    >>> z = np.array([[0.0, 1.0, 2.0, 3.0]])
    >>> r = check_samplers_agree(examples.inverse_cdf, examples.numpy_choice, z, tv=0.1)
    >>> r.passed, r.tv_upper_bound < 0.2
    (True, True)
    """
    t0 = time.perf_counter()
    request = agreement_request(sampler_a, sampler_b, logits, temperature=temperature, planning_law=planning_law,
                                alpha=alpha, power=power, tv=tv, budget_s=budget_s, seed=seed,
                                seed_bits=seed_bits)  # fmt: skip
    properties, cost = _pilot(request)
    plan = plan_agreement(request, cost, time.perf_counter() - t0)
    counts_a, calls_a = _draw(request, request.call_a, plan, 0)
    counts_b, calls_b = _draw(request, request.call_b, plan, B_SEED_OFFSET)
    family = Family(alpha=request.alpha, size=len(plan.tests), name=f"{request.call_a.name} vs {request.call_b.name}")
    level = family.test_alpha
    v = int(request.logits.shape[1])
    for b in range(len(counts_a)):
        prefix = f"row {b}: "
        if prefix + "homogeneity" in plan.tests:
            h = homogeneity_test(counts_a[b], counts_b[b], v, alpha=level, power=request.power)
            family.add(prefix + "homogeneity", _with_pooled_mass(h))
        family.add(prefix + "categories", category_homogeneity_test(counts_a[b], counts_b[b], v, alpha=level,
                                                                    power=request.power))  # fmt: skip
        family.add(prefix + "range", _range(counts_a[b], counts_b[b], level, request.power))
    rows = len(counts_a)
    bounds = [two_sample_tv_upper_bound(counts_a[b], counts_b[b], v, alpha=request.alpha / rows,
                                        singletons=singletons_for(request.probs[b], plan.n, plan.n,
                                                                  alpha=request.alpha / rows)).bound
              for b in range(rows)]  # fmt: skip
    report = sampler_report(_as_check_request(request), family, plan.tests, _title, properties=properties,
                            skipped=plan.skipped, shape=tuple(int(s) for s in request.logits.shape), n=plan.n,
                            stream=0, calls=3 * 2 + calls_a + calls_b, seconds=time.perf_counter() - t0,
                            how=plan.how)  # fmt: skip
    report.sampler = f"{request.call_a.name} vs {request.call_b.name}"
    report.target = f"the law of {request.call_b.name} (sizes planned at {request.planning!r})"
    report.tv_upper_bound = max(bounds)
    report.tv_upper_bounds = bounds
    report.certificate = CERTIFICATE
    return report


def _title(name: str) -> str:
    test = name.split(": ", 1)[-1]
    return {
        "homogeneity": "same law: pooled chi-square (pooled mass counted)",
        "categories": "same law, token by token (exact binomial)",
        "range": "range: every draw of both in [0, V)",
    }.get(test, check_title(name))


def _with_pooled_mass(h):
    """The homogeneity result stating the total variation over categories (pooled mass included)."""
    import dataclasses

    return dataclasses.replace(
        h,
        min_detectable=h.min_detectable_tv_any,
        deviation=f"total variation (pooled columns, plus the pooled mass {h.pooled_mass:.3g})",
    )


def _range(a: Counts, b: Counts, level: float, power: float) -> SupportResult:
    bad = a.out_of_range + b.out_of_range
    n = a.n + b.n
    return SupportResult(
        "range (two samples)",
        float(bad),
        0.0 if bad else 1.0,
        n,
        level,
        power,
        -float(np.expm1(np.log1p(-power) / n)),
        "probability of an impossible draw",
        bad,
        0,
        (),
    )


def _as_check_request(r: AgreementRequest):
    """The fields :func:`.sampler_report.sampler_report` reads, from the two-sample request."""
    from ..planning.request import CheckRequest

    return CheckRequest(r.call_a, r.planning, r.logits, np.zeros(0), r.temperatures, r.probs, r.alpha, r.power, r.tv,
                        r.budget_s, r.seed, r.seed_bits)  # fmt: skip


def _pilot(request: AgreementRequest) -> tuple[list[Property], tuple[float, float]]:
    """Each sampler twice on 16 draws (the protocol; same seed, same tokens) and, with a budget, once on 128
    (the affine cost of both together: seconds per call, per draw of a row)."""
    L, seeded = request.logits, request.seeded
    s = call_seed(request.seed, PILOT_SEED_OFFSET, request.seed_bits) if seeded else None
    rows = int(L.shape[0])
    props, a_cost, per_cost = [], 0.0, 0.0
    for label, call in (("A", request.call_a), ("B", request.call_b)):
        first = call(L, PILOT_DRAWS, s)
        t = time.perf_counter()
        again = call(L, PILOT_DRAWS, s)
        small = time.perf_counter() - t
        if seeded:
            props.append(Property(f"{label}: same seed, same tokens", bool(np.array_equal(first, again)),
                                  f"{call.name}: two calls with seed {s}, {PILOT_DRAWS} draws a row"))  # fmt: skip
        else:
            props.append(Property(f"{label}: same seed, same tokens", None, "the samplers are called without seeds"))
        if request.budget_s is not None:
            t = time.perf_counter()
            call(L, COST_DRAWS, s)
            big = time.perf_counter() - t
            per = max((big - small) / (rows * (COST_DRAWS - PILOT_DRAWS)), big / (rows * COST_DRAWS) / 4, 1e-12)
            per_cost += per
            a_cost += max(0.0, small - per * rows * PILOT_DRAWS)
    return props, (a_cost, per_cost)


def _draw(request: AgreementRequest, call: SamplerCall, plan: AgreementPlan, offset: int) -> tuple[list[Counts], int]:
    """``plan.calls`` calls of ``plan.columns`` draws of one sampler, counted per row."""
    v = int(request.logits.shape[1])
    counts: list[Counts] = []
    for k in range(plan.calls):
        seed = call_seed(request.seed, offset + k, request.seed_bits) if request.seeded else None
        x = call(request.logits, plan.columns, seed)
        per_row = [count_samples(x[b], v) for b in range(x.shape[0])]
        counts = per_row if not counts else [c + d for c, d in zip(counts, per_row)]
    return counts, plan.calls


def assert_same_law(samples_a, samples_b, *, num_categories: int | None = None, alpha: float = 1e-6,
                    power: float = 0.99):  # fmt: skip
    """Assert that two samples come from the same law; ``AssertionError`` with a diagnosis if not.

    Runs the pooled homogeneity chi-square (:func:`verification.stats.homogeneity.homogeneity_test`) and the
    per-category test (:func:`verification.stats.homogeneity.category_homogeneity_test`), each at ``alpha / 2``
    (Bonferroni: together an agreeing pair fails with probability at most ``alpha``).  Fails if either rejects or
    a draw is outside ``[0, V)``.

    Parameters
    ----------
    samples_a, samples_b : array_like of int, shape (n,) or (B, n), or Counts
        Independent draws (a 2-D array is one row per law: each row is tested, Bonferroni over the rows).
    num_categories : int, optional
        V; default one more than the largest draw.
    alpha, power : float

    Returns
    -------
    HomogeneityResult
        The (first row's) homogeneity result, when the assertion holds.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> p = [0.5, 0.3, 0.2]
    >>> _ = assert_same_law(rng.choice(3, 5000, p=p), rng.choice(3, 5000, p=p))
    >>> assert_same_law(rng.choice(3, 5000, p=p), rng.choice(3, 5000, p=[0.4, 0.4, 0.2]))
    Traceback (most recent call last):
    ...
    AssertionError: the two samples do not share one law (alpha=1e-06): row 0: homogeneity...
    """
    alpha, power = check_rates(alpha, power)
    rows_a, rows_b = _rows(samples_a, "samples_a"), _rows(samples_b, "samples_b")
    if len(rows_a) != len(rows_b):
        raise ValueError(f"samples_a has {len(rows_a)} rows but samples_b has {len(rows_b)}")
    if num_categories is None:
        top = max(int(_max(r)) for r in (*rows_a, *rows_b))
        v = max(top + 1, 2)
    else:
        v = check_int(num_categories, "num_categories")
    level = alpha / (2 * len(rows_a))
    failed, lines, first = [], [], None
    for b, (xa, xb) in enumerate(zip(rows_a, rows_b)):
        a, c = as_counts(xa, v, "samples_a"), as_counts(xb, v, "samples_b")
        h = homogeneity_test(a, c, v, alpha=level, power=power)
        cat = category_homogeneity_test(a, c, v, alpha=level, power=power)
        first = h if first is None else first
        for name, r in (("homogeneity", h), ("categories", cat)):
            if not r.passed:
                failed.append(f"row {b}: {name}")
        if not (h.passed and cat.passed):
            pa, pc = a.histogram / a.n, c.histogram / c.n
            worst = np.argsort(-np.abs(pa - pc))[:5]
            shown = ", ".join(f"{int(i)} ({int(a.histogram[i])} of {a.n} vs {int(c.histogram[i])} of {c.n})"
                              for i in worst)  # fmt: skip
            lines += [f"row {b}: {h!r}", f"  {cat!r}", f"  most different tokens (A vs B): {shown}",
                      f"  observed total variation {0.5 * float(np.abs(pa - pc).sum()):.4g}; detectable: "
                      f"{fmt(h.min_detectable_tv_any)} over categories (pooled mass {h.pooled_mass:.3g})"]  # fmt: skip
    if failed:
        raise AssertionError(f"the two samples do not share one law (alpha={fmt(alpha)}): {', '.join(failed)} "
                             "failed\n" + "\n".join(lines))  # fmt: skip
    return first


def _rows(samples, name: str) -> list:
    if isinstance(samples, Counts):
        return [samples]
    arr = to_numpy(samples, name)
    if arr.ndim == 2:
        return list(arr)
    return [arr]


def _max(x) -> int:
    if isinstance(x, Counts):
        return x.num_categories - 1
    arr = np.asarray(x)
    if arr.size == 0:
        raise ValueError("samples are empty: at least one draw is needed")
    return int(arr.max())
