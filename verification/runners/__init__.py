"""Draw, count, test, decide: every way the suite is run on samplers, each run under one Holm family.

A runner takes what planning fixed, calls the samplers, counts their draws, runs the tests of :mod:`verification.stats`
into the family, and returns its result (which :mod:`verification.outputs` renders): the main job (``engine``),
``check_sampler`` (``check``, ``draws``, ``speculative``), the mutants, the audit, the calibration and the
acceptance; ``suite`` is the one step they share, a case's suite on one sampler's draws.
"""
