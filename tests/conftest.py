"""Shared fixtures.  Seeds and sample budgets of the statistical tests live in
``verification/planning/budget.py`` so that the family-wise false-alarm rate can be computed.

GPU runs in parallel processes (``scripts/gpu_tests.sh``): the script sets ``FLASHSAMPLING_GPU_JOBS`` to the number
of processes sharing the GPU.  Each process then caps its own allocations at its share of the GPU's memory
(``torch.cuda.set_per_process_memory_fraction``), so that one test's peak cannot take another process's memory, and
returns its cached blocks after each test.  Tests that need more than a share are marked ``gpu_exclusive`` and run
afterwards, alone, with the whole GPU.  ``FLASHSAMPLING_GPU_MEMLOG=FILE`` appends each test's peak allocation (bytes)
to FILE, which is how the marks were sized.

JAX, which the audit imports, runs on the CPU in the tests (``JAX_PLATFORMS=cpu``, without preallocation): on a GPU it
would otherwise take 75 % of the GPU's memory at import, outside torch's accounting (105 GiB in one process of the
first run of scripts/gpu_tests.sh on the H200, and every other process then ran out of memory).
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

import flashsampling  # noqa: E402


@pytest.fixture(scope="session")
def device() -> torch.device:
    return torch.device("cpu") if flashsampling.INTERPRET else torch.device("cuda")


def pytest_report_header(config):
    mode = "interpreter (CPU)" if flashsampling.INTERPRET else "compiled (CUDA)"
    jobs = os.environ.get("FLASHSAMPLING_GPU_JOBS")
    share = f"; GPU shared by {jobs} processes" if jobs and not flashsampling.INTERPRET else ""
    return f"flashsampling kernels: {mode}; TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET')}{share}"


def _gpu_jobs() -> int:
    return int(os.environ.get("FLASHSAMPLING_GPU_JOBS", "1") or 1)


def pytest_sessionstart(session):
    if flashsampling.INTERPRET or not torch.cuda.is_available():
        return
    jobs = _gpu_jobs()
    if jobs > 1:
        # 5 % of the GPU is left for the CUDA contexts and kernels' local memory, which the allocator does not count.
        torch.cuda.set_per_process_memory_fraction(0.95 / jobs)


@pytest.fixture(autouse=True)
def _gpu_memory_hygiene(request):
    """On a CUDA run: reset the peak counter before each test; after it, log the peak and return cached blocks."""
    on_gpu = not flashsampling.INTERPRET and torch.cuda.is_available()
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    yield
    if not on_gpu:
        return
    log = os.environ.get("FLASHSAMPLING_GPU_MEMLOG")
    if log:
        with open(log, "a") as f:
            f.write(f"{torch.cuda.max_memory_allocated()}\t{torch.cuda.max_memory_reserved()}\t{request.node.nodeid}\n")
    if _gpu_jobs() > 1:
        torch.cuda.empty_cache()
