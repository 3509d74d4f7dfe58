"""What a pass of :func:`verification.check_sampler` rules out: the total-variation certificate and the draws still
needed for the asked-for ``tv``.

:func:`certify` puts on a check's report an upper confidence bound on ``TV(sampler's law, target)`` per row
(:func:`verification.stats.tv_certificate.tv_certificate`, each row at ``alpha / B``, so that every row's bound
holds together: Bonferroni) and overall (the largest row's), with the interval on the sampler's mass on each row's
pooled far tail that holds on the same event.  It is a confidence statement at level ``1 - alpha``, whatever the
sampler's law, and separate from the tests' Holm family (it decides nothing: a report may pass with a loose bound,
or fail with a tight one).  The singletons of each row are fixed from the target and ``n`` before the bound reads
the draws.

An *underpowered* run (the chi-square's detectable total variation at the ``n`` drawn, or the certified bound,
above the asked-for ``tv``; with ``budget_s``, ``tv`` is :data:`verification.planning.request.DEFAULT_TV`) states the
draws per row the planner asks for at that ``tv`` (:func:`verification.planning.check.columns_for_tv`, and the
certificate's own twin :func:`verification.stats.tv_certificate.required_certificate_samples`) and the seconds they
would take at the run's measured rate (the sampler's seconds per draw of a row in its draws calls: an estimate).
"""

from __future__ import annotations

import math

from ..planning.check import Plan, columns_for_tv
from ..planning.request import DEFAULT_TV, CheckRequest
from ..planning.streams import flipped_bits
from ..stats.counts import Counts
from ..stats.tv_certificate import (
    TAIL_SHARE,
    certificate_singletons,
    required_certificate_samples,
    tv_certificate,
)
from .sampler_report import SamplerReport

__all__ = ["CERTIFICATE", "certify"]

#: How the certificate of a one-sample check is made (the report's words).
CERTIFICATE = (
    "Weissman et al. (2003) L1 bound over the draws' cells (singletons fixed from the target and n before the draws, "
    f"a pooled tail, the out-of-range cell) at {1 - TAIL_SHARE:g} of each row's alpha/B, plus a Clopper-Pearson "
    f"interval on the pooled tail's mass at {TAIL_SHARE:g} of it (verification.stats.tv_certificate, "
    "proofs/tv_certificate.md); rows joined by Bonferroni; a confidence statement, separate from the tests' Holm family"
)


def certify(report: SamplerReport, request: CheckRequest, plan: Plan, counts: list[Counts]) -> SamplerReport:
    """Fill ``report``'s certificate (``tv_upper_bound``, ``tv_upper_bounds``, ``tail_bounds``, ``certificate``) from
    each row's ``counts``, and its ``shortfall`` when the run is underpowered for the asked-for ``tv``."""
    rows = len(counts)
    a = request.alpha / rows
    certs = []
    for b, c in enumerate(counts):
        p = request.probs[b]
        certs.append(tv_certificate(c, p, alpha=a, singletons=certificate_singletons(p, c.n, alpha=a)))
    report.tv_upper_bounds = [c.bound for c in certs]
    report.tv_upper_bound = max(report.tv_upper_bounds)
    report.tail_bounds = [
        {"row": b, "tokens": c.pooled, "target_mass": c.pooled_target, "low": c.tail_low, "high": c.tail_high}
        for b, c in enumerate(certs)
        if c.pooled
    ]
    report.certificate = CERTIFICATE
    report.shortfall = _shortfall(report, request, plan)
    return report


def _shortfall(report: SamplerReport, request: CheckRequest, plan: Plan) -> dict | None:
    """The draws and seconds the asked-for ``tv`` needs, when the run falls short of it; else ``None``."""
    tv = request.tv if request.tv is not None else DEFAULT_TV
    detectable = [t.min_detectable for t in report.tests if t.name.endswith(": pearson")]
    worst_test = max(detectable, default=0.0)
    bound = report.tv_upper_bound or 0.0
    if worst_test <= tv and bound <= tv:
        return None
    rows = len(plan.rows)
    a = request.alpha / rows
    seeded = request.call.seeded
    bits = flipped_bits(request.seed_bits) if seeded else ()
    try:
        columns, calls, *_ = columns_for_tv(list(plan.rows), tv, request.alpha, request.power, seeded, len(bits))
        tests_n = columns * calls
    except ValueError:  # no n within the planner's limits reaches tv
        tests_n = None
    cert_n = 0
    for r in plan.rows:
        try:
            cert_n = max(cert_n, required_certificate_samples(r.probs, tv, alpha=a))
        except ValueError:
            cert_n = None
            break
    needed = None if tests_n is None or cert_n is None else max(tests_n, cert_n)
    # Seconds per draw of a row: the sampler's measured rate in the draws phase where there is one (every row's
    # tokens per second), else the whole run's seconds over its draws (pilot and tests included: an estimate).
    rows = int(report.shape[0]) if report.shape else 1
    rate = rows / report.draws_per_s if report.draws_per_s else report.seconds / max(report.n, 1)
    why = []
    if worst_test > tv:
        why.append(f"the chi-square detects total variation {_g(worst_test)} at n = {report.n:,}")
    if bound > tv:
        why.append(f"the certified bound is {_g(bound)}")
    return {
        "tv": tv,
        "reason": " and ".join(why) + f", above tv = {tv:g}",
        "n_needed": needed,
        "n_needed_tests": tests_n,
        "n_needed_certificate": cert_n,
        "more_draws": None if needed is None else max(0, needed - report.n),
        "seconds_needed": None if needed is None else needed * rate,
        "seconds_per_draw": rate,
    }


def _g(x: float) -> str:
    return "inf" if not math.isfinite(x) else f"{x:.3g}"
