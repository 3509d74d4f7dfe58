"""The pytest plugin, run in a child pytest on a throwaway test file."""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[2]

USER_TESTS = textwrap.dedent(
    """
    import numpy as np
    import pytest

    P = np.array([0.5, 0.3, 0.2])

    @pytest.mark.statistical
    def test_good(sampler_check, verification_alpha, verification_rng):
        assert verification_alpha == sampler_check.alpha == 1e-5
        x = sampler_check.rng.choice(3, 5000, p=P)
        r = sampler_check.assert_match(x, P)
        assert r.n == 5000
        assert sampler_check.required_samples(0.05, 3) > 0
        fam = sampler_check.family(size=2)
        fam.add("a", sampler_check.goodness_of_fit(x, P))
        fam.add("b", sampler_check.goodness_of_fit(verification_rng.choice(3, 5000, p=P), P))
        fam.assert_passed()

    def test_bad(sampler_check):
        sampler_check.assert_match(np.zeros(5000, dtype=np.int64), P)

    def test_seed_is_stable(sampler_check):
        assert sampler_check.seed == sampler_check.seed and sampler_check.seed > 0
    """
)


def _plugin_args() -> list[str]:
    names = {e.value for e in importlib.metadata.entry_points(group="pytest11")}
    return [] if "verification.pytest_plugin" in names else ["-p", "verification.pytest_plugin"]


def test_plugin_fixtures_in_a_child_pytest(tmp_path):
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            *_plugin_args(),
            "--verification-alpha=1e-5",
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_user.py"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "2 passed" in out and "1 failed" in out, out
    assert "samples do not match probs" in out and "most over-sampled" in out
    assert "statistical sampler checks" in out and "4 checks, 1 failed" in out
