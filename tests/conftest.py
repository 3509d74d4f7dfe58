"""Shared fixtures.  Seeds and sample budgets of the statistical tests live in
``verification/planning/budget.py`` so that the family-wise false-alarm rate can be computed."""

from __future__ import annotations

import os

import pytest
import torch

import flashsampling


@pytest.fixture(scope="session")
def device() -> torch.device:
    return torch.device("cpu") if flashsampling.INTERPRET else torch.device("cuda")


def pytest_report_header(config):
    mode = "interpreter (CPU)" if flashsampling.INTERPRET else "compiled (CUDA)"
    return f"flashsampling kernels: {mode}; TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET')}"
