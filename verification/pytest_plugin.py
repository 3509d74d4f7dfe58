"""pytest integration: fixtures that let a user's own tests call the verification suite.

Registered through the ``pytest11`` entry point of the ``flashsampling`` distribution, so it is active
in any project that installs it; without installing, enable it with ``-p verification.pytest_plugin``.

Fixtures
--------
``sampler_check``
    A :class:`SamplerCheck` bound to the configured family-wise alpha: ``assert_match(samples,
    probs)`` (raises with a diagnosis), ``goodness_of_fit``, ``family(size=...)`` for several tests
    under Holm, and ``rng`` seeded from the test id.
``verification_alpha``
    The configured false-alarm rate (``--verification-alpha`` or the ini option
    ``verification_alpha``; default 1e-6).
``verification_rng``
    A ``numpy.random.Generator`` seeded from the test's node id: reproducible, distinct per test.

Marker ``statistical`` labels tests whose verdict is a statistical decision.  The terminal summary
lists how many checks ran through ``sampler_check`` and their summed alpha (a union bound on the
chance that an exact sampler fails any of them).

Example
-------
.. code-block:: python

    def test_my_sampler(sampler_check):
        probs = my_softmax(logits)
        samples = my_sampler(logits, n=100_000, seed=sampler_check.seed)
        sampler_check.assert_match(samples, probs)
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

DEFAULT_ALPHA = 1e-6
_RECORDS = pytest.StashKey[list]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("verification", "statistical sampler verification")
    group.addoption(
        "--verification-alpha",
        action="store",
        type=float,
        default=None,
        help=f"false-alarm rate of each sampler_check assertion (default {DEFAULT_ALPHA:g})",
    )
    parser.addini("verification_alpha", help="false-alarm rate of each sampler_check assertion", default=None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "statistical: the test's verdict is a statistical decision at a stated alpha")
    config.stash[_RECORDS] = []


def _alpha(config: pytest.Config) -> float:
    value = config.getoption("--verification-alpha", default=None)
    if value is None:
        ini = config.getini("verification_alpha")
        value = float(ini) if ini not in (None, "") else DEFAULT_ALPHA
    if not 0 < value < 1:
        raise pytest.UsageError(f"verification alpha must be in (0, 1), got {value!r}")
    return float(value)


def _seed(nodeid: str) -> int:
    return int.from_bytes(hashlib.sha256(nodeid.encode()).digest()[:8], "little") & ((1 << 63) - 1)


class SamplerCheck:
    """The object behind the ``sampler_check`` fixture.

    Attributes
    ----------
    alpha : float
        False-alarm rate of each assertion.
    seed : int
        A 63-bit seed derived from the test id (stable across runs).
    rng : numpy.random.Generator
        Seeded with ``seed``.
    results : list
        Every result produced through this object.
    """

    def __init__(self, alpha: float, nodeid: str, records: list) -> None:
        import numpy as np

        self.alpha = alpha
        self.nodeid = nodeid
        self.seed = _seed(nodeid)
        self.rng = np.random.default_rng(self.seed)
        self.results: list[Any] = []
        self._records = records

    def _record(self, result: Any) -> Any:
        self.results.append(result)
        self._records.append((self.nodeid, result.test, result.alpha, result.passed))
        return result

    def assert_match(self, samples, probs, *, power: float = 0.99):
        """``verification.assert_samples_match`` at the configured alpha; returns the GofResult."""
        from . import assert_samples_match

        try:
            result = assert_samples_match(samples, probs, alpha=self.alpha, power=power)
        except AssertionError:
            self._records.append((self.nodeid, "assert_samples_match", self.alpha, False))
            raise
        self._records.append((self.nodeid, "assert_samples_match", self.alpha, True))
        self.results.append(result)
        return result

    def goodness_of_fit(self, samples, probs, *, power: float = 0.99):
        """``verification.goodness_of_fit`` at the configured alpha (not asserted)."""
        from . import goodness_of_fit

        return self._record(goodness_of_fit(samples, probs, alpha=self.alpha, power=power))

    def family(self, size: int, name: str | None = None):
        """A :class:`verification.Family` of ``size`` tests under the configured family-wise alpha."""
        from .family import Family

        return Family(alpha=self.alpha, size=size, name=name or self.nodeid)

    def required_samples(self, tv: float, num_categories: int, *, power: float = 0.99) -> int:
        """Draws :meth:`goodness_of_fit` needs to detect a total variation ``tv`` at this alpha."""
        from . import required_samples

        return required_samples(tv, num_categories, alpha=self.alpha, power=power)


@pytest.fixture
def verification_alpha(request: pytest.FixtureRequest) -> float:
    """The configured false-alarm rate of a sampler assertion."""
    return _alpha(request.config)


@pytest.fixture
def verification_rng(request: pytest.FixtureRequest):
    """A numpy Generator seeded from the test's node id."""
    import numpy as np

    return np.random.default_rng(_seed(request.node.nodeid))


@pytest.fixture
def sampler_check(request: pytest.FixtureRequest) -> SamplerCheck:
    """A :class:`SamplerCheck` for this test."""
    return SamplerCheck(_alpha(request.config), request.node.nodeid, request.config.stash[_RECORDS])


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    records = config.stash.get(_RECORDS, [])
    if not records:
        return
    failed = sum(1 for r in records if not r[3])
    total_alpha = sum(r[2] for r in records)
    terminalreporter.write_sep("-", "statistical sampler checks")
    terminalreporter.write_line(
        f"{len(records)} checks, {failed} failed; summed alpha {total_alpha:.3g} "
        "(bound on the chance an exact sampler fails any of them)"
    )
