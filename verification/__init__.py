"""verification: statistical tests, with stated error rates, that a sampler draws from the exact distribution.

Public API (a contract)
-----------------------
check_sampler(sampler, logits, *, target="softmax", temperature=1.0, alpha=1e-3, power=0.99, tv=None,
              budget_s=None, seed=0, seed_bits=31) -> SamplerReport
    A sampler written anywhere against the exact law of its logits: the whole battery under one Holm
    family, sizes planned for a deviation or a time budget (``docs/verify-your-sampler.md``).
check_samplers_agree(sampler_a, sampler_b, logits, *, temperature=1.0, alpha=1e-3, power=0.99, tv=None,
                     budget_s=None, seed=0, seed_bits=31) -> SamplerReport
    Two samplers against each other when the target cannot be written down; ``report.tv_upper_bound``
    bounds the total variation between their laws.
assert_same_law(samples_a, samples_b, *, alpha=1e-6, power=0.99)
    AssertionError with a diagnosis when two samples do not share one law (homogeneity and per-token tests).
goodness_of_fit(samples, probs, *, alpha=1e-6, power=0.99) -> GofResult
    Pearson chi-square with pooling of rare categories (never dropped).
assert_samples_match(samples, probs, *, alpha=1e-6, power=0.99, tail="auto")
    AssertionError with a readable diagnosis when the draws do not match (chi-square, per-category and
    the two-sided tail test).
required_samples(tv, num_categories, *, alpha, power) -> int
min_detectable_tv(n, num_categories, *, alpha, power) -> float
    The planning pair of the chi-square test for an unknown law (``V - 1`` degrees of freedom);
    ``required_gof_samples(tv, probs)`` / ``min_detectable_gof_tv(n, probs)`` plan at the bins the test
    forms for a known law.
verification.adapters
    NumPy, torch-generator and JAX samplers to the protocol of ``check_sampler``.
verification.strategies
    Hypothesis strategies for adversarial logits and temperatures (imports hypothesis).
verification.pytest_plugin
    pytest fixtures (``sampler_check``, ``sampler_checker``), registered through the ``pytest11`` entry point.

Every test (``verification.stats.*``) states two error rates: ``alpha``, the probability that an
exact sampler fails, and ``power``, the probability that a sampler off by at least the reported
``min_detectable`` deviation fails; each has planning twins named ``min_detectable_<test>_<measure>``
(the deviation detectable at ``n``) and ``required_<test>_samples`` (the ``n`` for a deviation).  Every
result unpacks as ``statistic, pvalue = result``, like SciPy's.  ``Family`` applies Holm's correction
under a declared family-wise alpha.

Layers
------
Five subpackages, each importing only from those below it (``docs/architecture.md`` draws them from the code,
``scripts/architecture.py``; ``tests/verification/test_architecture.py`` holds the order):

* ``runners/`` - draw, count, test, decide: the main job, ``check_sampler``, the mutants, the audit, the calibration;
* ``outputs/`` - report.md, report.json and plots, every markdown page, rendered from data;
* ``planning/`` - before the first draw: which tests a run faces, how many draws, at which level;
* ``battery/`` - what is tested: the aims (``softmax()``, ``top_k(k)``, ...), cases, our variants, the mutants,
  samplers from other libraries, the sampler protocol;
* ``stats/`` - the statistics: each test with its stated error rates and its planning twins.

Above them, the front door: this module (the API), ``__main__`` (the command line), ``adapters``, ``strategies``
and ``pytest_plugin``.  ``verification.targets``, ``.check``, ``.mutants``, ``.audit``, ``.calibration`` and the
old names of ``.planning`` still work, with a ``DeprecationWarning`` naming the new path.
"""

from .runners.agreement import assert_same_law, check_samplers_agree
from .runners.assertions import assert_samples_match
from .runners.check import check_sampler
from .runners.sampler_report import CheckedTest, SamplerReport
from .stats.categories import CategoryResult, category_test
from .stats.cdf import CdfResult, dkwm_cdf_test
from .stats.counts import Counts, count_samples
from .stats.exact import ExactResult, exact_multinomial
from .stats.family import Family, holm
from .stats.gof import (
    g_test,
    goodness_of_fit,
    min_detectable_gof_tv,
    min_detectable_tv,
    pearson_chisquare,
    required_gof_samples,
    required_samples,
)
from .stats.gumbel import GumbelResult, gumbel_max_test
from .stats.homogeneity import (
    CategoryHomogeneityResult,
    HomogeneityResult,
    category_homogeneity_test,
    homogeneity_test,
)
from .stats.independence import (
    IndependenceResult,
    LagScanResult,
    independence_test,
    lag_scan_test,
    serial_independence_test,
    streams_scan_test,
)
from .stats.results import Deviation, GofResult, StatResult
from .stats.support import SupportResult, support_test
from .stats.tails import TailResult, tail_mask, tail_mass_test
from .stats.ties import TieResult, tie_bias_test
from .stats.two_sample_bound import TvBound, two_sample_tv_upper_bound

__all__ = [
    "CategoryHomogeneityResult",
    "CategoryResult",
    "CdfResult",
    "CheckedTest",
    "Counts",
    "Deviation",
    "ExactResult",
    "Family",
    "GofResult",
    "GumbelResult",
    "HomogeneityResult",
    "IndependenceResult",
    "LagScanResult",
    "SamplerReport",
    "StatResult",
    "SupportResult",
    "TailResult",
    "TieResult",
    "TvBound",
    "assert_same_law",
    "assert_samples_match",
    "category_homogeneity_test",
    "category_test",
    "check_sampler",
    "check_samplers_agree",
    "count_samples",
    "dkwm_cdf_test",
    "exact_multinomial",
    "g_test",
    "goodness_of_fit",
    "gumbel_max_test",
    "holm",
    "homogeneity_test",
    "independence_test",
    "lag_scan_test",
    "min_detectable_gof_tv",
    "min_detectable_tv",
    "pearson_chisquare",
    "required_gof_samples",
    "required_samples",
    "serial_independence_test",
    "streams_scan_test",
    "support_test",
    "tail_mask",
    "tail_mass_test",
    "tie_bias_test",
    "two_sample_tv_upper_bound",
]
