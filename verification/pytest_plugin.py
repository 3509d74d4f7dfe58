"""pytest integration: fixtures that let a user's own tests call the verification suite.

Registered through the ``pytest11`` entry point of the ``flashsampling`` distribution, so it is active
in any project that installs it; without installing, enable it with ``-p verification.pytest_plugin``.

Fixtures and helpers
--------------------
``sampler_check``
    A :class:`SamplerCheck` bound to the configured family-wise alpha: ``assert_match(samples,
    probs)`` (raises with a diagnosis), ``goodness_of_fit``, ``family(size=...)`` for several tests
    under Holm, and ``rng`` seeded from the test id.
``sampler_checker`` (session scope: usable inside Hypothesis ``@given`` tests)
    A :class:`SamplerChecker`: ``assert_sampler(sampler, logits, ...)`` runs
    :func:`verification.check_sampler` and raises with the report's markdown when it fails;
    ``check_sampler`` returns the report; ``assert_samples_match`` asserts draws.  Each call's seed is
    :func:`example_seed` of the running test's id and the call's arguments, so every Hypothesis example
    gets its own seed, the same on every run.
:func:`example_seed`
    The same seed as a plain function, for code outside fixtures.
``verification_alpha``
    The configured false-alarm rate (``--verification-alpha`` or the ini option
    ``verification_alpha``; default 1e-6).
``verification_rng``
    A ``numpy.random.Generator`` seeded from the test's node id: reproducible, distinct per test.

Marker ``statistical`` labels tests whose verdict is a statistical decision.  The terminal summary
lists how many checks ran through ``sampler_check`` and their summed alpha (a union bound on the
chance that an exact sampler fails any of them).

Examples
--------
.. code-block:: python

    def test_my_sampler(sampler_check):
        probs = my_softmax(logits)
        samples = my_sampler(logits, n=100_000, seed=sampler_check.seed)
        sampler_check.assert_match(samples, probs)

    @settings(max_examples=10, derandomize=True, deadline=None)
    @given(logits=logits(vocab_size=st.integers(2, 16)))
    def test_my_sampler_on_any_logits(sampler_checker, logits):
        sampler_checker.assert_sampler(my_sampler, logits, tv=0.1)

With ``max_examples`` examples at alpha each, an exact sampler fails the test with probability at most
``max_examples * alpha`` (a union bound; the terminal summary adds up the alpha of every check); fixed
seeds and ``derandomize=True`` make the outcome the same on every run.
"""

from __future__ import annotations

import hashlib
import os
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


#: Seeds from :func:`example_seed` lie in ``[0, 2**30)``, inside what ``check_sampler`` accepts.
EXAMPLE_SEED_BITS = 30


def _fingerprint(value: Any, h) -> None:
    """Feed ``value`` to the hash ``h``: arrays and tensors by dtype, shape and bytes, the rest by repr."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu().numpy()
    if hasattr(value, "__array__") and not isinstance(value, (str, bytes)):
        import numpy as np

        arr = np.ascontiguousarray(np.asarray(value))
        h.update(f"{arr.dtype}{arr.shape}".encode())
        h.update(arr.tobytes())
    elif isinstance(value, dict):
        for k in sorted(value, key=repr):
            h.update(repr(k).encode())
            _fingerprint(value[k], h)
    elif isinstance(value, (list, tuple)):
        h.update(f"{type(value).__name__}{len(value)}".encode())
        for v in value:
            _fingerprint(v, h)
    else:
        h.update(repr(value).encode())


def current_test_id() -> str:
    """The node id of the test pytest is running (``PYTEST_CURRENT_TEST`` without its phase), or ``""``."""
    return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]


def example_seed(*values: Any, test_id: str | None = None) -> int:
    """A seed in ``[0, 2**30)`` from the running test's id and ``values`` (a Hypothesis example's arguments).

    SHA-256 of the test id and the values (arrays and tensors by dtype, shape and bytes, other values by
    ``repr``): the same example of the same test gets the same seed on every run and on every machine,
    and two examples or two tests get unrelated ones.  ``test_id`` defaults to :func:`current_test_id`.
    """
    h = hashlib.sha256((current_test_id() if test_id is None else test_id).encode())
    for v in values:
        h.update(b"\0")
        _fingerprint(v, h)
    return int.from_bytes(h.digest()[:8], "little") & ((1 << EXAMPLE_SEED_BITS) - 1)


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
        from .stats.family import Family

        return Family(alpha=self.alpha, size=size, name=name or self.nodeid)

    def required_samples(self, tv: float, num_categories: int, *, power: float = 0.99) -> int:
        """Draws :meth:`goodness_of_fit` needs to detect a total variation ``tv`` at this alpha."""
        from . import required_samples

        return required_samples(tv, num_categories, alpha=self.alpha, power=power)


class SamplerChecker:
    """The object behind the session-scoped ``sampler_checker`` fixture (safe inside ``@given``).

    Every method seeds its check with :func:`example_seed` of the running test and its own arguments,
    unless ``seed=`` is given, and records the check for the terminal summary.

    Attributes
    ----------
    alpha : float
        The configured false-alarm rate (``--verification-alpha``): the default family-wise ``alpha`` of
        each check.
    """

    def __init__(self, alpha: float, records: list) -> None:
        self.alpha = alpha
        self._records = records

    def seed(self, *values: Any) -> int:
        """:func:`example_seed` of the running test and ``values``."""
        return example_seed(*values)

    def check_sampler(self, sampler, logits, **kwargs):
        """:func:`verification.check_sampler` with ``alpha`` and ``seed`` defaulted as above; not asserted."""
        from .runners.check import check_sampler

        kwargs.setdefault("alpha", self.alpha)
        if "seed" not in kwargs:
            kwargs["seed"] = example_seed(getattr(sampler, "__qualname__", repr(sampler)), logits, kwargs)
        report = check_sampler(sampler, logits, **kwargs)
        self._records.append((current_test_id(), "check_sampler", kwargs["alpha"], report.passed))
        return report

    def assert_sampler(self, sampler, logits, **kwargs):
        """:meth:`check_sampler`, raising ``AssertionError`` with the report's markdown when it fails."""
        report = self.check_sampler(sampler, logits, **kwargs)
        if not report.passed:
            raise AssertionError(report.to_markdown(title=f"check_sampler({report.sampler})"))
        return report

    def assert_samples_match(self, samples, probs, **kwargs):
        """:func:`verification.assert_samples_match` at the configured alpha (unless given)."""
        from .runners.assertions import assert_samples_match

        kwargs.setdefault("alpha", self.alpha)
        try:
            result = assert_samples_match(samples, probs, **kwargs)
        except AssertionError:
            self._records.append((current_test_id(), "assert_samples_match", kwargs["alpha"], False))
            raise
        self._records.append((current_test_id(), "assert_samples_match", kwargs["alpha"], True))
        return result


@pytest.fixture(scope="session")
def sampler_checker(request: pytest.FixtureRequest) -> SamplerChecker:
    """A :class:`SamplerChecker` for the session (Hypothesis accepts session-scoped fixtures in ``@given``)."""
    return SamplerChecker(_alpha(request.config), request.config.stash[_RECORDS])


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
