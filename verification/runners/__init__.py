"""Draw, count, test, decide: every way the suite is run on samplers, each under one Holm family."""
