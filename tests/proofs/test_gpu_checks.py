"""proofs/gpu_checks.py's CPU part: every measurement on small slices through the Triton interpreter (where the
device functions are the twin's), its verdicts, planted defects caught, and the path by which a GPU run's JSON fills
end_to_end.md's compiled column."""

from __future__ import annotations

import numpy as np
import pytest

import flashsampling
import flashsampling.noise as noise
from proofs import check_end_to_end as e2e
from proofs import gpu_checks as chk

#: Checks that run the kernels on CPU tensors through the interpreter (bit for bit with the twins); on a GPU host
#: the kernels run compiled and refuse CPU tensors: the compiled kernels' checks are ``proofs/gpu_checks.py``.
interpreted_only = pytest.mark.skipif(
    not flashsampling.INTERPRET, reason="CPU tensors through the interpreted kernels (GPU: proofs/gpu_checks.py)"
)


@pytest.fixture(scope="module")
def cpu_run():
    return chk.run(cpu=True)


@interpreted_only
def test_the_cpu_slices_pass(cpu_run):
    v = chk.verdicts(cpu_run)
    assert all(v.values()), v
    assert cpu_run["noise"]["values"] == 2 * ((1 << 13) + 1)
    assert cpu_run["accumulation"] and cpu_run["environment"]["interpreted"]


@interpreted_only
def test_a_noise_off_the_twin_is_caught(monkeypatch):
    """The interpreted noise is compared with the twin's bit for bit: a twin computed otherwise differs."""

    shipped = noise.exponential_from_side_np

    def planted(x, top):
        return shipped(np.nextafter(np.asarray(x, np.float32), np.float32(1)), top)

    monkeypatch.setattr(noise, "exponential_from_side_np", planted)
    assert chk.noise_arithmetic(2.0**-4, chk._float(chk._bits(2.0**-4) + 64), chunk=1 << 10)["twin_mismatches"] > 0


def test_an_x_off_the_twin_is_caught(monkeypatch):
    monkeypatch.setattr(chk, "side_x", lambda c: np.zeros(np.shape(c), dtype=np.float32))
    assert chk.x_from_words(1 << 8)["mismatches"] > 0


def test_an_accumulation_bound_too_small_is_caught(monkeypatch):
    import proofs.check_float32_scores as scores

    shipped = scores.tensor_core_error_bound
    monkeypatch.setattr(scores, "tensor_core_error_bound", lambda h, w: shipped(h, w) / 1e4)
    res = chk.accumulation(d=64, n=8, batches=(2,), samples=(1,), deltas=(0.95 * 2.0**-24,))
    assert any(r["max_over_tc_bound"] > 1.0 for r in res.values())


def test_a_gpu_json_fills_the_compiled_column():
    """With the twin's arithmetic bins in place of a GPU's, the compiled column is the split bound on the twin."""
    from proofs._generated import load
    from proofs.check_float32_noise import load_scan

    scan = load_scan()
    fake = {"noise": {"arith_abs_by_bin": scan["g_arith_abs_by_bin"]}}
    th = e2e.theorems(e2e.compiled_bins(scan, fake), load("second_level"), load("tile_inverse_cdf"))
    want = e2e.noise_term(
        e2e.nb.bins_from_split(np.asarray(scan["g_arith_abs_by_bin"]), np.asarray(scan["g_x_abs_by_bin"])),
        e2e.REF["V"],
        e2e.REF["a"],
    )["total"]
    assert th["samplers"]["fused"]["Theorem 9 (noise)"] == pytest.approx(want, rel=1e-12)
