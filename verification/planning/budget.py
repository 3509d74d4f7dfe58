"""Seeds and sample budgets of the statistical tests, in one place.

Every test in the repository whose verdict is a statistical decision takes its seed, its number of
draws and its level from an entry here, so the error rates of the whole test suite can be computed:

* ``kind="null"`` - an exact sampler must pass; the entry's ``alpha`` is the chance that a fresh
  seed would make the test fail spuriously.  :func:`family_wise_alpha` sums them (a union bound, valid
  for any dependence): the probability that changing every seed breaks a correct build.
* ``kind="planted"`` - a planted bias (or a mutant) must be caught; ``1 - power`` is the chance that
  a fresh seed would let it through.  :func:`family_wise_miss` sums those.

With the seeds fixed the suite is deterministic; these totals say how much that luck is worth.
``python -m verification.planning.budget`` prints the table.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BUDGETS", "Budget", "budget", "family_wise_alpha", "family_wise_miss", "table"]


@dataclass(frozen=True)
class Budget:
    """One statistical test's seed, sample size and error rates.

    Attributes
    ----------
    name : str
        Dotted name, ``<test file>.<check>``.
    seed : int
        Seed of the draws.
    n : int
        Number of draws (or pairs, maxima, replicates).
    alpha : float
        Level of the test.
    kind : str
        ``"null"`` (exact sampler must pass) or ``"planted"`` (bias must be caught).
    power : float
        Claimed power for planted entries.
    """

    name: str
    seed: int
    n: int
    alpha: float
    kind: str = "null"
    power: float = 0.99

    def __post_init__(self) -> None:
        if self.kind not in ("null", "planted"):
            raise ValueError(f"kind must be 'null' or 'planted', got kind={self.kind!r}")


_B = Budget
_ENTRIES = (
    # tests/verification/test_gof.py
    _B("verification.gof.exact", seed=1101, n=50_000, alpha=1e-6),
    _B("verification.gof.planted", seed=1102, n=50_000, alpha=1e-6, kind="planted"),
    _B("verification.gof.starved_pool", seed=1103, n=4_000, alpha=1e-6, kind="planted"),
    _B("verification.gof.diluted", seed=1104, n=200_000, alpha=1e-6, kind="planted"),
    # tests/verification/test_exact.py
    _B("verification.exact.exact", seed=1201, n=30, alpha=1e-2),
    _B("verification.exact.planted", seed=1202, n=30, alpha=1e-2, kind="planted"),
    # tests/verification/test_cdf.py
    _B("verification.cdf.exact", seed=1301, n=20_000, alpha=1e-6),
    _B("verification.cdf.planted", seed=1302, n=20_000, alpha=1e-6, kind="planted"),
    # tests/verification/test_homogeneity.py
    _B("verification.homogeneity.exact", seed=1401, n=20_000, alpha=1e-6),
    _B("verification.homogeneity.planted", seed=1402, n=20_000, alpha=1e-6, kind="planted"),
    # tests/verification/test_tails.py
    _B("verification.tails.exact", seed=1501, n=3_000_000, alpha=1e-6),
    _B("verification.tails.starved", seed=1502, n=3_000_000, alpha=1e-6, kind="planted"),
    _B("verification.tails.planted", seed=1503, n=100_000, alpha=1e-6, kind="planted"),
    # tests/verification/test_gumbel.py
    _B("verification.gumbel.exact", seed=1601, n=4_000, alpha=1e-6),
    _B("verification.gumbel.twin", seed=1602, n=4_000, alpha=1e-6),
    _B("verification.gumbel.planted", seed=1603, n=4_000, alpha=1e-6, kind="planted"),
    # tests/verification/test_ties.py
    _B("verification.ties.exact", seed=1701, n=40_000, alpha=1e-6),
    _B("verification.ties.planted", seed=1702, n=40_000, alpha=1e-6, kind="planted"),
    _B("verification.ties.coarse_noise", seed=1703, n=40_000, alpha=1e-6, kind="planted"),
    # tests/verification/test_categories.py
    _B("verification.categories.exact", seed=1801, n=100_000, alpha=1e-6),
    _B("verification.categories.planted", seed=1802, n=100_000, alpha=1e-6, kind="planted"),
    # tests/verification/test_independence.py
    _B("verification.independence.exact", seed=1901, n=20_000, alpha=1e-6),
    _B("verification.independence.planted", seed=1902, n=20_000, alpha=1e-6, kind="planted"),
    _B("verification.independence.serial", seed=1903, n=40_000, alpha=1e-6, kind="planted"),
    # tests/verification/test_engine.py: five batteries of exact toy variants that must pass (family-wise
    # alpha 1e-3 each); planted: maxima 1 nat high and an ignored temperature must fail.
    _B("verification.engine.exact", seed=3100, n=20_000, alpha=5 * 1e-3),
    _B("verification.engine.planted", seed=3100, n=20_000, alpha=1e-3, kind="planted"),
    # tests/verification/test_report.py: five batteries of the exact toy variant that must pass.
    _B("verification.report.exact", seed=3200, n=20_000, alpha=5 * 1e-3),
    # tests/verification/test_main.py: the reference on tiny-V3 (three runs), and a planted run whose
    # sampler ignores the temperature on hot-V1000-T2.
    _B("verification.main.exact", seed=3301, n=2_000_000, alpha=3 * 1e-3),
    _B("verification.main.planted", seed=3301, n=400_000, alpha=1e-3, kind="planted"),
    # tests/verification/test_lag_scan.py: the lag scan, range test, far tail and assert_samples_match's tail
    # test on exact draws (null) and on planted defects (overlaps, impossible mass, a starved tail).
    _B("verification.lag_scan.exact", seed=3501, n=4_000, alpha=7 * 1e-6),
    _B("verification.lag_scan.planted", seed=3502, n=2_016, alpha=1e-6, kind="planted"),
    # tests/verification/test_check*.py: check_sampler on exact samplers (family-wise alpha 1e-3 each; the count
    # is in the alpha) and on planted defects, each of which must fail.
    # Eighteen runs at 1e-3 (seven in test_check.py, four in test_check_targets.py, four in
    # test_check_adapters.py, one in test_check_cli.py, the two doctests) and ten plugin checks at 1e-6.
    _B("verification.check.exact", seed=3401, n=10_040, alpha=18 * 1e-3 + 10 * 1e-6),
    _B("verification.check.planted", seed=3402, n=10_040, alpha=1e-3, kind="planted"),
    # tests/verification/test_check_streams.py: seed space and lags; five runs on exact samplers at 1e-3 (three at
    # 64-bit seeds, torch's at 32 bits, seed mod 2**32 at 31 bits), four planted defects that must fail.
    _B("verification.check_streams.exact", seed=3701, n=10_000, alpha=5 * 1e-3),
    _B("verification.check_streams.planted", seed=3702, n=10_000, alpha=1e-3, kind="planted"),
    # tests/verification/test_scale.py: check_sampler on many calls and with adaptive budgets; eleven runs on exact
    # samplers at 1e-3, one planted defect (a 3 % temperature error on many calls) that must fail.
    _B("verification.scale.exact", seed=3901, n=10_000, alpha=11 * 1e-3),
    _B("verification.scale.planted", seed=3902, n=10_000, alpha=1e-3, kind="planted"),
    # tests/verification/test_agreement.py: check_samplers_agree and assert_same_law; four runs on agreeing
    # samplers at 1e-3 and two assert_same_law calls at 1e-6 (null), planted pairs at their stated deviation; the
    # certificate's coverage measured on planted pairs (a check at level 1e-3).
    _B("verification.agreement.exact", seed=3801, n=10_000, alpha=4 * 1e-3 + 2 * 1e-6 + 1e-3),
    _B("verification.agreement.planted", seed=3802, n=10_000, alpha=1e-3, kind="planted"),
    # tests/verification/test_check_calibration.py: the recorded false-alarm rate of check_sampler within its
    # binomial band, a check at level calibration.CHECK_LEVEL (its seeds are the calibration script's).
    _B("verification.check.calibration", seed=20261202, n=1000, alpha=1e-3),
    # tests/verification/test_calibration.py: each calibration check is a test at level 1e-3;
    # 11 tests x (KS + 2 rates) and 39 power checks (planted biases at alpha = 1e-3).
    _B("verification.calibration.null", seed=20240601, n=500, alpha=33 * 1e-3),
    _B("verification.calibration.power", seed=20240601, n=500, alpha=39 * 1e-3),
    # tests/test_topk_stats.py: the fused top-k sampler's twin on five cases and its kernels on four runs
    # (family-wise alpha 1e-3 each; n is the twin's), and two planted defects at their planned n.
    _B("topk.stats.exact", seed=3601, n=200_000, alpha=9 * 1e-3),
    _B("topk.stats.planted", seed=3602, n=4_480, alpha=1e-3, kind="planted"),
)

#: Every registered budget by name.
BUDGETS: dict[str, Budget] = {b.name: b for b in _ENTRIES}
if len(BUDGETS) != len(_ENTRIES):  # pragma: no cover - caught by tests/verification/test_budget.py
    raise RuntimeError("duplicate budget names")


def budget(name: str) -> Budget:
    """The budget registered under ``name`` (``KeyError`` names the missing entry)."""
    try:
        return BUDGETS[name]
    except KeyError:
        raise KeyError(f"no budget named {name!r} in verification/planning/budget.py") from None


def family_wise_alpha(prefix: str = "") -> float:
    """Sum of ``alpha`` over the null entries whose name starts with ``prefix`` (union bound)."""
    return sum(b.alpha for b in BUDGETS.values() if b.kind == "null" and b.name.startswith(prefix))


def family_wise_miss(prefix: str = "") -> float:
    """Sum of ``1 - power`` over the planted entries whose name starts with ``prefix``."""
    return sum(1.0 - b.power for b in BUDGETS.values() if b.kind == "planted" and b.name.startswith(prefix))


def table() -> str:
    """The budgets as a text table, with the family-wise totals."""
    lines = [f"{'name':44} {'kind':8} {'seed':>9} {'n':>10} {'alpha':>9}"]
    for b in BUDGETS.values():
        lines.append(f"{b.name:44} {b.kind:8} {b.seed:>9d} {b.n:>10d} {b.alpha:>9.3g}")
    lines.append(f"family-wise false alarm (union bound over null entries): {family_wise_alpha():.3g}")
    lines.append(f"family-wise miss (union bound over planted entries):     {family_wise_miss():.3g}")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    print(table())
