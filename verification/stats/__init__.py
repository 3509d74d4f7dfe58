"""The statistics: each test of a sampler's draws, with its stated error rates and its planning twins.

One module per test family, each with its planning twins ``min_detectable_<test>_<measure>`` (the deviation
detected at ``n``) and ``required_<test>_samples`` (the ``n`` for a deviation); below them, what every test shares.
Nothing here knows a sampler, a case or a run: the statistics read counts and laws.

========================  ===========================================================================
module                    tests
========================  ===========================================================================
:mod:`.gof`               Pearson chi-square and G-test with pooling (the workhorse)
:mod:`.exact`             exact multinomial test (tiny V and n)
:mod:`.cdf`               DKWM-envelope CDF test in a declared category order
:mod:`.homogeneity`       two-sample chi-square between two samplers
:mod:`.tails`             one-sided binomial test on the tail mass (many-tail logits)
:mod:`.gumbel`            KS test that the perturbed maximum is Gumbel(logsumexp, 1)
:mod:`.ties`              tie-bias test on flat logits (lower vs upper index half)
:mod:`.categories`        per-category binomial tests with Holm correction
:mod:`.independence`      contingency chi-square between paired draws (rows, seeds, samples, ranks);
                          the lag scan of two streams at shifts -K..K
:mod:`.support`           range test: every draw in [0, V) on a category of positive probability
========================  ===========================================================================

========================  ===========================================================================
module                    shared by the tests
========================  ===========================================================================
:mod:`.counts`            ``Counts``, the histogram every test reads
:mod:`.binning`           the pooling rule of the chi-square tests (rare categories pooled, never dropped)
:mod:`.results`           the result objects (n, statistic, p-value, alpha, the detectable deviation)
:mod:`.power`             the power machinery of the twins: noncentral chi-square, DKWM and KS, exact binomial
:mod:`.binomial`          binomial p-values and detectable shifts of the tail, tie and per-category tests
:mod:`.family`            Holm's step-down correction over a family declared before its first test
:mod:`._validate`         the argument checks every public function shares
========================  ===========================================================================
"""
