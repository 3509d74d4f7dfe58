"""Counting and testing speed (the full 10^8-draw measurement is ``python -m verification.runners.speed``)."""

from __future__ import annotations

from verification.runners.speed import measure


def test_counting_and_testing_are_fast():
    m = measure(num_samples=2_000_000, num_categories=262144, seed=1)
    assert all(r.passed for r in m["results"]), [r.summary() for r in m["results"]]
    # 10^8 draws must take under a minute; at this rate 2e6 draws take well under a second.
    assert m["count_and_test_seconds"] < 10.0
    assert m["samples_per_second"] * 60 > 1e8 or m["count_seconds"] < 2.0
