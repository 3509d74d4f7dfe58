""":class:`SamplerReport`: the verdict of :func:`verification.check_sampler`, its tests and its properties.

``report.passed`` is the family's verdict (Holm at the family-wise ``alpha``); ``report.tests`` lists every
test with its statistic, p-value, Holm-adjusted p-value, ``n``, the level it ran at and the deviation it
detects there with the stated power; ``report.properties`` the reproducibility properties (facts about the
sampler, not exactness failures); ``report.skipped`` the tests that did not run and why.
``to_markdown()`` is what a person reads first, ``to_json()`` the same numbers for a machine.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..outputs.markdown import certificate_lines, check_page, detects, diagnosis_lines, timing_line
from ..planning.request import CheckRequest
from ..stats.family import Family
from ..stats.results import StatResult, UnpacksLikeScipy, fmt

__all__ = ["CheckedTest", "Property", "SamplerReport", "sampler_report"]


def _finite(x: float) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class CheckedTest(UnpacksLikeScipy):
    """One test of the family; unpacks as ``statistic, pvalue = test`` like SciPy's results.

    Attributes
    ----------
    name : str
        Member name: ``"row 0: pearson"``, ``"rows 0-1"``, ``"seeds"`` ...
    title : str
    statistic, pvalue : float
    adjusted_pvalue : float
        Holm-adjusted over the family; the test fails when it is ``<= alpha``.
    n : int
        Draws (or pairs) the test read.
    level : float
        ``alpha / m``, the level it ran at and states its detectable deviation at.
    min_detectable : float
        The deviation detected with ``power`` at ``n`` (``inf``: none at this ``n``).
    deviation : str
        What ``min_detectable`` measures.
    passed : bool
    result : StatResult
        The test's own result object (its diagnosis methods).
    """

    name: str
    title: str
    statistic: float
    pvalue: float
    adjusted_pvalue: float
    n: int
    level: float
    min_detectable: float
    deviation: str
    passed: bool
    result: StatResult = field(repr=False, compare=False)

    @property
    def detects(self) -> str:
        """``"<deviation> >= <value>"``, or that it detects none at this ``n``."""
        return detects(_finite(self.min_detectable), self.deviation)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "statistic": _finite(self.statistic),
            "pvalue": float(self.pvalue),
            "adjusted_pvalue": float(self.adjusted_pvalue),
            "n": int(self.n),
            "level": float(self.level),
            "min_detectable": _finite(self.min_detectable),
            "deviation": self.deviation,
            "passed": bool(self.passed),
        }


@dataclass(frozen=True)
class Property:
    """A fact about the sampler that is reported, not tested: ``holds`` is ``None`` when not applicable."""

    name: str
    holds: bool | None
    detail: str


@dataclass
class SamplerReport:
    """The outcome of :func:`verification.check_sampler`.

    Attributes
    ----------
    passed : bool
        No test rejected by Holm at the family-wise ``alpha``.
    tests : list of CheckedTest
    properties : list of Property
    skipped : dict[str, str]
        Tests that did not run, and why (no far tail, no ties, a sampler without a seed ...).
    sampler, target : str
    shape : tuple of int
        ``(B, V)`` of the logits.
    temperature : float or list of float
    alpha, power : float
    tv, budget_s : float or None
        What the sizes were planned for (the other is ``None``).
    n : int
        Draws per row read by the distribution tests.
    stream : int
        Draws per stream of the lag scans.
    calls : int
        Calls made to the sampler.
    seed : int
    seconds : float
    plan : str
        One line on how the sizes were chosen.
    seed_bits : int
        The seeds passed lay in ``[0, 2**seed_bits)``.
    tv_upper_bound : float or None
        An upper confidence bound, at confidence ``1 - alpha``, on the total variation between the sampler's law and
        the target (of a two-sample check: between the two laws), every row at once: a confidence statement,
        separate from the tests' Holm family (:mod:`.certify`); ``None`` where none was computed (a speculative
        check).
    tv_upper_bounds : list of float or None
        The bound per row (each at ``alpha / B``, so that all hold together).
    certificate : str
        How the bound was made.
    tail_bounds : list of dict
        Per row whose certificate pools tokens: ``{"row", "tokens", "target_mass", "low", "high"}``, the interval
        on the sampler's mass on the pooled least probable tokens (on the certificate's event).
    shortfall : dict or None
        When the run is underpowered for the asked-for ``tv`` (``DEFAULT_TV`` with a budget): ``tv``, ``reason``,
        ``n_needed`` (draws per row: the tests' planner and the certificate's twin), ``more_draws``,
        ``seconds_needed`` at the run's measured ``seconds_per_draw`` (:mod:`.certify`).
    diagnoses : list of dict
        Per failing test: ``test``, ``row``, the worst ``tokens`` (token, observed, expected, logit, probability,
        residual) and the likely ``mechanism`` (:mod:`.diagnosis`); empty when the check passed.
    planned_n : int or None
        Draws per row the plan expected (with ``budget_s`` the draws adapt to the time: ``n`` is what was drawn).
    draws_per_s : float or None
        The sampler's measured rate: tokens (every row's) per second in its calls of the draws phase.
    timing : dict[str, float] or None
        Seconds of each phase: ``pilot``, ``planning``, ``drawing`` (in the sampler's calls), ``counting``,
        ``other calls`` (the rest of the draws phase), ``testing``, ``reporting``.
    interrupted : bool
        A ``KeyboardInterrupt`` stopped the draws; the tests read what was drawn.
    """

    passed: bool
    tests: list[CheckedTest]
    properties: list[Property]
    skipped: dict[str, str]
    sampler: str
    target: str
    shape: tuple[int, ...]
    temperature: Any
    alpha: float
    power: float
    tv: float | None
    budget_s: float | None
    n: int
    stream: int
    calls: int
    seed: int
    seconds: float
    plan: str
    seed_bits: int = 31
    tv_upper_bound: float | None = None
    tv_upper_bounds: list[float] | None = None
    certificate: str = ""
    tail_bounds: list[dict[str, Any]] = field(default_factory=list)
    shortfall: dict[str, Any] | None = None
    diagnoses: list[dict[str, Any]] = field(default_factory=list)
    planned_n: int | None = None
    draws_per_s: float | None = None
    timing: dict[str, float] | None = None
    interrupted: bool = False

    @property
    def level(self) -> float:
        """``alpha / m``, the level of each test."""
        return self.alpha / max(1, len(self.tests))

    def failures(self) -> list[CheckedTest]:
        """The tests Holm rejected."""
        return [t for t in self.tests if not t.passed]

    def test(self, name: str) -> CheckedTest:
        """The test named ``name`` (``KeyError`` lists the names)."""
        for t in self.tests:
            if t.name == name:
                return t
        raise KeyError(f"no test named {name!r}; tests: {', '.join(t.name for t in self.tests)}")

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict of everything in the report."""
        return {
            "passed": self.passed,
            "sampler": self.sampler,
            "target": self.target,
            "shape": list(self.shape),
            "temperature": self.temperature,
            "alpha": self.alpha,
            "power": self.power,
            "level": self.level,
            "correction": "Holm step-down over every test of the check",
            "tv": self.tv,
            "budget_s": self.budget_s,
            "n": self.n,
            "stream": self.stream,
            "calls": self.calls,
            "seed": self.seed,
            "seed_bits": self.seed_bits,
            "tv_upper_bound": self.tv_upper_bound,
            "tv_upper_bounds": self.tv_upper_bounds,
            "certificate": self.certificate,
            "tail_bounds": list(self.tail_bounds),
            "shortfall": self.shortfall,
            "diagnoses": list(self.diagnoses),
            "seconds": self.seconds,
            "planned_n": self.planned_n,
            "draws_per_s": self.draws_per_s,
            "timing": None if self.timing is None else dict(self.timing),
            "interrupted": self.interrupted,
            "plan": self.plan,
            "tests": [t.as_dict() for t in self.tests],
            "properties": [asdict(p) for p in self.properties],
            "skipped": dict(self.skipped),
        }

    def to_json(self, **kwargs) -> str:
        """:meth:`as_dict` as JSON text (``kwargs`` go to ``json.dumps``; indent 2 by default)."""
        kwargs.setdefault("indent", 2)
        return json.dumps(self.as_dict(), allow_nan=False, **kwargs)

    def to_markdown(self, *, title: str | None = None, plots: dict[int, str] | None = None) -> str:
        """The report as markdown: the verdict, the failed tests, every test with what it detects at its
        ``n``, the tests not run and why, the properties; ``plots`` maps a row to an image path shown inline."""
        return check_page(self.as_dict(), title=title, plots=plots)

    def __repr__(self) -> str:
        failed = self.failures()
        lines = [
            f"SamplerReport({'PASSED' if self.passed else 'FAILED'}: {len(self.tests) - len(failed)} of "
            f"{len(self.tests)} tests pass at family-wise alpha={fmt(self.alpha)} (Holm); sampler={self.sampler}, "
            f"target={self.target}, n={self.n} per row, {self.seconds:.1f} s)"
        ]
        if self.timing is not None:
            lines.append(f"  {timing_line(self.as_dict())}")
        doc = self.as_dict()
        lines += [f"  {line}" for line in certificate_lines(doc)]
        for t in self.tests:
            lines.append(
                f"  {'pass' if t.passed else 'FAIL':4}  {t.name:26}  n={t.n:<10d} stat={fmt(t.statistic):>9}  "
                f"p={fmt(t.pvalue):>9}  p_holm={fmt(t.adjusted_pvalue):>9}  detects {t.detects}"
            )
        for k, v in self.skipped.items():
            lines.append(f"  -     {k:26}  not run: {v}")
        for p in self.properties:
            lines.append(f"  prop  {p.name}: {'-' if p.holds is None else p.holds} ({p.detail})")
        lines += diagnosis_lines(doc)
        return "\n".join(lines)


def sampler_report(request: CheckRequest, family: Family, names: Sequence[str], title: Callable[[str], str], *,
                   properties: list[Property], skipped: dict[str, str], shape: tuple[int, ...], n: int, stream: int,
                   calls: int, seconds: float, how: str, planned_n: int | None = None,
                   draws_per_s: float | None = None, interrupted: bool = False) -> SamplerReport:  # fmt: skip
    """The report of a check: its family's members ``names``, in that order, each titled by ``title``."""
    members = {m.name: m for m in family.members()}
    tests = []
    for name in names:
        m = members[name]
        r = m.result
        tests.append(CheckedTest(name, title(name), float(r.statistic), float(r.pvalue), m.adjusted_pvalue,
                                 int(r.n), float(r.alpha), float(r.min_detectable), r.deviation, m.passed,
                                 r))  # fmt: skip
    t_out = [float(t) for t in request.temperatures]
    return SamplerReport(
        passed=family.passed,
        tests=tests,
        properties=properties,
        skipped=skipped,
        sampler=request.call.name,
        target=repr(request.aim),
        shape=shape,
        temperature=t_out[0] if len(set(t_out)) == 1 else t_out,
        alpha=request.alpha,
        power=request.power,
        tv=request.tv,
        budget_s=request.budget_s,
        n=n,
        stream=stream,
        calls=calls,
        seed=request.seed,
        seconds=seconds,
        plan=how,
        seed_bits=request.seed_bits,
        planned_n=planned_n,
        draws_per_s=draws_per_s,
        interrupted=interrupted,
    )
