"""verification: statistical tests, with stated error rates, that a sampler draws from the exact distribution.

Public API (a contract)
-----------------------
goodness_of_fit(samples, probs, *, alpha=1e-6, power=0.99) -> GofResult
    Pearson chi-square with pooling of rare categories (never dropped).
assert_samples_match(samples, probs, *, alpha=1e-6)
    AssertionError with a readable diagnosis when the draws do not match.
required_samples(tv, num_categories, *, alpha, power) -> int
min_detectable_tv(n, num_categories, *, alpha, power) -> float
    The planning pair of the chi-square test.
verification.strategies
    Hypothesis strategies for adversarial logits and temperatures (imports hypothesis).
verification.pytest_plugin
    pytest fixtures (``sampler_check``), registered through the ``pytest11`` entry point.

Every test (``verification.stats.*``) states two error rates: ``alpha``, the probability that an
exact sampler fails, and ``power``, the probability that a sampler off by at least the reported
``min_detectable`` deviation fails; each has a planning twin (the deviation detectable at ``n``, and
the ``n`` for a deviation).  ``Family`` applies Holm's correction under a declared family-wise alpha.

Modules
-------
* ``stats/`` - one module per test family, each with its planning twins;
* ``planning``, ``binning`` - sample sizes and detectable deviations; the pooling rule;
* ``counts``, ``results``, ``family`` - the histogram every test reads; result objects; Holm;
* ``cases``, ``variants`` - the main job's logits cases and the samplers it verifies;
* ``suite`` - the tests one sampler faces on one case (``run_suite``);
* ``engine`` - every (variant, case) through the suite into one family (``run_battery``);
* ``report``, ``markdown`` - the report folder (report.md, report.json, plots); every markdown page;
* ``__main__`` - the main job's command line (``python -m verification``);
* ``detection`` - the draws at which the suite detects a sampler of known law;
* ``mutants/`` - biased samplers modelled on real bugs, their laws, the catalogue and its runner;
* ``audit`` - the suite run on samplers written elsewhere;
* ``calibration``, ``planted`` - the suite measuring its own error rates, on planted deviations;
* ``budget`` - seeds and sample sizes of the repository's statistical tests;
* ``assertions``, ``pytest_plugin``, ``strategies``, ``speed`` - for users' tests; throughput.
"""

from .assertions import assert_samples_match
from .counts import Counts, count_samples
from .family import Family, holm
from .planning import min_detectable_tv, required_samples
from .results import Deviation, GofResult, StatResult
from .stats.categories import CategoryResult, category_test
from .stats.cdf import CdfResult, dkwm_cdf_test
from .stats.exact import ExactResult, exact_multinomial
from .stats.gof import g_test, goodness_of_fit, pearson_chisquare
from .stats.gumbel import GumbelResult, gumbel_max_test
from .stats.homogeneity import HomogeneityResult, homogeneity_test
from .stats.independence import IndependenceResult, independence_test, serial_independence_test
from .stats.tails import TailResult, tail_mask, tail_mass_test
from .stats.ties import TieResult, tie_bias_test

__all__ = [
    "CategoryResult",
    "CdfResult",
    "Counts",
    "Deviation",
    "ExactResult",
    "Family",
    "GofResult",
    "GumbelResult",
    "HomogeneityResult",
    "IndependenceResult",
    "StatResult",
    "TailResult",
    "TieResult",
    "assert_samples_match",
    "category_test",
    "count_samples",
    "dkwm_cdf_test",
    "exact_multinomial",
    "g_test",
    "goodness_of_fit",
    "gumbel_max_test",
    "holm",
    "homogeneity_test",
    "independence_test",
    "min_detectable_tv",
    "pearson_chisquare",
    "required_samples",
    "serial_independence_test",
    "tail_mask",
    "tail_mass_test",
    "tie_bias_test",
]
