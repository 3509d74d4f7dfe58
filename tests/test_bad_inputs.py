"""Bad input, in one table: for every public entry point, the exception each input gets and the argument its message
names (the promises are in docs/reliability.md).

``CASES`` holds one row per input: the call (the test id), the exception (``None``: the input is accepted, and the
tokens must lie in ``[0, V)``), a pattern the message must match (the argument it names), and for the rows that need
them, ``ranks=2`` (a world of two gloo ranks) or ``work_before`` (work precedes the error by design: the kernels'
flags, read at the call's one synchronization, or an earlier good call, such as an OnlineSampler's first chunk).
Every other row must raise before any work: the stage-1 launchers are replaced by a tripwire.

* One rank (``test_one_rank``): ``sample``, ``sample_from_logits``, ``sample_grouped(_from_logits)``,
  ``OnlineSampler`` / ``sample_online``, ``sample_tp(_from_logits)`` in a world of one, ``TileConfig``, the tile
  inverse-CDF entry points and ``flashsampling.ops``.
* Two ranks (``test_two_ranks``): every row runs in one spawned world of two gloo ranks on the CPU, under a deadline
  (a hang fails the test); every rank must raise the expected error, for a mismatch the same message on both.  The
  last row leaves rank 0 alone in an exchange: its ``timeout=2`` must end the wait with ``TimeoutError``.
* Never an out-of-range token (``test_tokens_stay_in_range``): every entry point with ``host_checks=False`` on rows
  of NaN, of ``-inf`` only, with ``+inf``, and with bad temperatures.

Elsewhere, by reference: the verification command line (``tests/verification/test_main.py``: bad ``--variants``,
``--cases``, ``--budget``, ``--alpha``, an unwritable ``--out``, all exit 2 before sampling), its reports
(``tests/verification/test_report.py``: atomic, nothing left of an earlier run), ``Counts`` and the planners
(``tests/verification/test_validation.py``, ``test_planning.py``), the 32-bit offsets of every kernel
(``test_offsets_are_64_bit`` here, on the compiled IR) and the tensor-parallel layouts (``tests/test_distributed.py``).

Time: about 40 s on two cores (the spawned world about 15 s, the IR audit about 15 s).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import flashsampling
import flashsampling._request as request_module
import flashsampling.tile_cdf.sampling as tile_cdf_module
import flashsampling.truncation as truncation_module
from flashsampling import ops
from flashsampling.tile_cdf import sample_fused_tile_cdf, sample_tile_cdf_from_logits

B, V, D = 3, 40, 16
#: Rank r of a world of two holds the columns [SPLIT[r], SPLIT[r + 1]).
SPLIT = (0, 16, V)
ROOT = Path(__file__).resolve().parents[1]


#: The table's inputs are CPU tensors run by the interpreter (the argument checks are the same code on a GPU, run
#: before any launch; the device's own clamps and flags are tests/test_validation.py's and tests/test_reduce.py's,
#: which run on the GPU).
cpu_table = pytest.mark.skipif(not flashsampling.INTERPRET, reason="the table's inputs are CPU tensors (interpreter)")


def inputs() -> SimpleNamespace:
    """``h [B, D]``, ``w [V, D]``, ``z = h @ w.T`` (float32) and the ranks' shards of ``w`` and ``z``."""
    g = torch.Generator().manual_seed(0)
    h = torch.randn(B, D, generator=g)
    w = torch.randn(V, D, generator=g)
    z = h @ w.T
    ws = [w[SPLIT[r] : SPLIT[r + 1]] for r in range(2)]
    zs = [z[:, SPLIT[r] : SPLIT[r + 1]].contiguous() for r in range(2)]
    return SimpleNamespace(h=h, w=w, z=z, ws=ws, zs=zs)


@dataclass(frozen=True)
class Case:
    """One input: ``run(x)`` (``run(x, rank)`` with ``ranks=2``), the exception it gets (``None``: accepted; per rank
    a pair), and the pattern its message matches."""

    call: str
    run: Callable
    error: type | tuple | None
    names: str = ""
    work_before: bool = False
    ranks: int = 1
    alike: bool = True  # two ranks: the same message on both


def _online_two_chunks(x, second):
    """An OnlineSampler fed ``h @ w[:20].T``, then ``second(x)`` as ``(hidden, weight_chunk)``."""
    sampler = flashsampling.OnlineSampler(B, seed=1)
    sampler.update(x.h, x.w[:20])
    sampler.update(*second(x), start=20)
    return sampler.result(vocab_size=V).tokens


def _f64(*values):
    return torch.tensor(values, dtype=torch.float64)


_big_w = lambda x: torch.zeros(1, D).expand(2**31, D)  # V = 2**31 rows, no memory (stride 0)
_S = flashsampling.sample
_L = flashsampling.sample_from_logits
_G = flashsampling.sample_grouped
_GL = flashsampling.sample_grouped_from_logits
_TP = flashsampling.sample_tp
_TPL = flashsampling.sample_tp_from_logits
_TC = sample_tile_cdf_from_logits
_T = flashsampling.TileConfig

CASES = [
    # ---- sample: tensors ----
    Case("sample(hidden=[[1.0]], w)", lambda x: _S([[1.0]], x.w), TypeError, "hidden must be a torch.Tensor"),
    Case("sample(h[0], w)", lambda x: _S(x.h[0], x.w), ValueError, "hidden must have 2 dimensions"),
    Case("sample(h, w[:, :8])", lambda x: _S(x.h, x.w[:, :8]), ValueError, "weight has D=8"),
    Case("sample(h, w.half())", lambda x: _S(x.h, x.w.half()), TypeError, "weight.dtype"),
    Case("sample(h.double(), w.double())", lambda x: _S(x.h.double(), x.w.double()), TypeError, "hidden.dtype"),
    Case(
        "sample(h.to('meta'), w.to('meta'))",
        lambda x: _S(x.h.to("meta"), x.w.to("meta")),
        ValueError,
        "hidden.device=meta",
    ),
    Case("sample(h, w.to('meta'))", lambda x: _S(x.h, x.w.to("meta")), ValueError, "weight.device=meta"),
    Case("sample(h, w.to_sparse())", lambda x: _S(x.h, x.w.to_sparse()), TypeError, "weight must be a dense"),
    Case("sample(h[:0], w)", lambda x: _S(x.h[:0], x.w), ValueError, "B=0"),
    Case("sample(h, w[:0])", lambda x: _S(x.h, x.w[:0]), ValueError, "V=0"),
    Case("sample(h, w expanded to V=2**31)", lambda x: _S(x.h, _big_w(x)), ValueError, "V=2147483648"),
    Case(
        "sample(h.T.contiguous().T, w.T.contiguous().T)",
        lambda x: _S(x.h.T.contiguous().T, x.w.T.contiguous().T, seed=1),
        None,
    ),
    # ---- sample: temperature, one rule for numbers and tensors ----
    Case(
        "sample(h, w, temperature=10**400)",
        lambda x: _S(x.h, x.w, temperature=10**400),
        ValueError,
        r"temperature=1000.*does not fit float32",
    ),
    Case(
        "sample(h, w, temperature=1e-300)",
        lambda x: _S(x.h, x.w, temperature=1e-300),
        ValueError,
        "temperature=1e-300 is too small",
    ),
    Case(
        "sample(h, w, temperature=-1e-300)",
        lambda x: _S(x.h, x.w, temperature=-1e-300),
        ValueError,
        "temperature=-1e-300 is invalid",
    ),
    Case(
        "sample(h, w, temperature=float64 tensor [1e-300, 1, 1])",
        lambda x: _S(x.h, x.w, temperature=_f64(1e-300, 1, 1)),
        ValueError,
        r"temperature\[0\]=1e-300 is invalid",
        work_before=True,
    ),
    Case(
        "sample(h, w, temperature=float64 tensor [1, -1e-300, 1])",
        lambda x: _S(x.h, x.w, temperature=_f64(1, -1e-300, 1)),
        ValueError,
        r"temperature\[1\]=-1e-300 is invalid",
        work_before=True,
    ),
    Case(
        "sample(h, w, temperature=float64 tensor [1, 1, -0.0])",
        lambda x: _S(x.h, x.w, temperature=_f64(1, 1, -0.0), seed=1),
        None,
    ),
    Case("sample(h, w, temperature='1')", lambda x: _S(x.h, x.w, temperature="1"), TypeError, "temperature"),
    Case("sample(h, w, temperature=True)", lambda x: _S(x.h, x.w, temperature=True), TypeError, "temperature"),
    Case(
        "sample(h, w, temperature=np.float32(0.5))", lambda x: _S(x.h, x.w, temperature=np.float32(0.5), seed=1), None
    ),
    Case(
        "sample(h, w, temperature=tensor on meta)",
        lambda x: _S(x.h, x.w, temperature=torch.ones(B, device="meta")),
        ValueError,
        "temperature.device=meta",
    ),
    Case(
        "sample(h, w, temperature=int tensor)",
        lambda x: _S(x.h, x.w, temperature=torch.ones(B, dtype=torch.int32)),
        TypeError,
        "temperature.dtype",
    ),
    # ---- sample: seed, num_samples, host_checks, tiles ----
    Case("sample(h, w, seed=-1)", lambda x: _S(x.h, x.w, seed=-1), ValueError, "seed=-1 is out of range"),
    Case("sample(h, w, seed=2**64)", lambda x: _S(x.h, x.w, seed=2**64), ValueError, "seed=.* is out of range"),
    Case("sample(h, w, seed=1.5)", lambda x: _S(x.h, x.w, seed=1.5), TypeError, "seed"),
    Case("sample(h, w, seed=np.uint64(2**64 - 1))", lambda x: _S(x.h, x.w, seed=np.uint64(2**64 - 1)), None),
    # ---- return_logprobs ----
    Case("sample(h, w, return_logprobs=True)[0]", lambda x: _S(x.h, x.w, seed=1, return_logprobs=True)[0], None),
    Case("sample(h, w, return_logprobs=1)", lambda x: _S(x.h, x.w, return_logprobs=1), TypeError, "return_logprobs"),
    Case(
        "sample_from_logits(z, top_k=2, return_logprobs=True)",
        lambda x: _L(x.z, top_k=2, return_logprobs=True),
        ValueError,
        "return_logprobs=True is not supported with top_k",
    ),
    # ---- per-request seeds: a [B] int64 tensor on the inputs' device ----
    Case("sample(h, w, seed=int64 [B])", lambda x: _S(x.h, x.w, seed=torch.arange(B) - 1, num_samples=2), None),
    Case("sample_from_logits(z, seed=int64 [B])", lambda x: _L(x.z, seed=torch.arange(B) * 2**40), None),
    Case(
        "sample(h, w, seed=int64 [B - 1])",
        lambda x: _S(x.h, x.w, seed=torch.arange(B - 1)),
        TypeError,
        r"per-request seeds must be a torch.int64 tensor of shape \[3\]",
    ),
    Case(
        "sample_from_logits(z, seed=float [B])",
        lambda x: _L(x.z, seed=torch.ones(B)),
        TypeError,
        "per-request seeds must be a torch.int64",
    ),
    Case(
        "sample(h, w, seed=int64 [B] on meta)",
        lambda x: _S(x.h, x.w, seed=torch.arange(B, device="meta")),
        ValueError,
        "per-request seeds are on meta",
    ),
    Case(
        "sample(h, w, seed=int64 [B], top_k=2)",
        lambda x: _S(x.h, x.w, seed=torch.arange(B), top_k=2),
        ValueError,
        "not supported with top_k",
    ),
    Case(
        "sample_grouped(h, w, seed=int64 [B])",
        lambda x: _G(x.h, x.w, group_sizes=[20, 20], seed=torch.arange(B)),
        TypeError,
        "seed must be an int",
    ),
    Case("sample(h, w, num_samples=0)", lambda x: _S(x.h, x.w, num_samples=0), ValueError, "num_samples=0"),
    Case("sample(h, w, num_samples=np.int64(2))", lambda x: _S(x.h, x.w, num_samples=np.int64(2), seed=1), None),
    Case("sample(h, w, host_checks='no')", lambda x: _S(x.h, x.w, host_checks="no"), TypeError, "host_checks"),
    Case("sample(h, w, tiles='big')", lambda x: _S(x.h, x.w, tiles="big"), TypeError, "tiles must be a"),
    Case("TileConfig(block_b='16')", lambda x: _T(block_b="16"), TypeError, "TileConfig.block_b"),
    Case("TileConfig(block_v=48)", lambda x: _T(block_v=48), ValueError, "TileConfig.block_v=48"),
    Case("TileConfig(num_warps=3)", lambda x: _T(num_warps=3), ValueError, "TileConfig.num_warps=3"),
    Case("TileConfig(num_stages=0)", lambda x: _T(num_stages=0), ValueError, "TileConfig.num_stages=0"),
    Case("TileConfig(block_b=np.int64(16))", lambda x: _S(x.h, x.w, seed=1, tiles=_T(block_b=np.int64(16))), None),
    # ---- sample_from_logits ----
    Case("sample_from_logits(z.int())", lambda x: _L(x.z.int()), TypeError, "logits.dtype"),
    Case("sample_from_logits(z[None])", lambda x: _L(x.z[None]), ValueError, "logits must have 2 dimensions"),
    Case("sample_from_logits(z.to('meta'))", lambda x: _L(x.z.to("meta")), ValueError, "logits.device=meta"),
    Case("sample_from_logits(z, block_v=0)", lambda x: _L(x.z, block_v=0), ValueError, "block_v=0"),
    Case("sample_from_logits(z, block_v=1)", lambda x: _L(x.z, block_v=1), ValueError, "block_v=1"),
    Case("sample_from_logits(z, block_v=3)", lambda x: _L(x.z, block_v=3), ValueError, "block_v=3"),
    Case("sample_from_logits(z, block_b=0)", lambda x: _L(x.z, block_b=0), ValueError, "block_b=0"),
    Case("sample_from_logits(z, block_b=3)", lambda x: _L(x.z, block_b=3), ValueError, "block_b=3"),
    Case("sample_from_logits(z, block_v=16.0)", lambda x: _L(x.z, block_v=16.0), TypeError, "block_v"),
    Case("sample_from_logits(z, block_b=True)", lambda x: _L(x.z, block_b=True), TypeError, "block_b"),
    Case(
        "sample_from_logits(z, block_b=1024, block_v=2048)",
        lambda x: _L(x.z, block_b=1024, block_v=2048),
        ValueError,
        "block_b=1024 x block_v=2048",
    ),
    Case(
        "sample_from_logits(z with +inf)",
        lambda x: _L(x.z.index_fill(1, torch.tensor([5]), math.inf)),
        ValueError,
        r"logits contain NaN or infinite values in row\(s\) 0, 1, 2",
        work_before=True,
    ),
    Case("sample_from_logits(z.T.contiguous().T)", lambda x: _L(x.z.T.contiguous().T, seed=1), None),
    # ---- top_k (sample, sample_from_logits) ----
    Case("sample_from_logits(z, top_k=0)", lambda x: _L(x.z, top_k=0), ValueError, "top_k=0 must be >= 1"),
    Case("sample_from_logits(z, top_k=2.0)", lambda x: _L(x.z, top_k=2.0), TypeError, "top_k must be an int"),
    Case("sample_from_logits(z, top_k=True)", lambda x: _L(x.z, top_k=True), TypeError, "top_k must be an int"),
    Case(
        "sample_from_logits(z [1, 2048], top_k=1025)",
        lambda x: _L(torch.zeros(1, 2048), top_k=1025),
        ValueError,
        "top_k=1025 must be <= 1024",
    ),
    Case("sample_from_logits(z, top_k=float tensor)", lambda x: _L(x.z, top_k=torch.ones(B)), TypeError, "top_k.dtype"),
    Case(
        "sample_from_logits(z, top_k=tensor [1, 2])",
        lambda x: _L(x.z, top_k=torch.tensor([1, 2])),
        ValueError,
        r"top_k must be an int or a tensor of shape \(B,\)",
    ),
    Case(
        "sample_from_logits(z, top_k=tensor [1, 0, 3])",
        lambda x: _L(x.z, top_k=torch.tensor([1, 0, 3])),
        ValueError,
        r"top_k\[1\]=0 must be >= 1",
    ),
    Case(
        "sample_from_logits(z, top_k=tensor on meta)",
        lambda x: _L(x.z, top_k=torch.ones(B, dtype=torch.int64, device="meta")),
        ValueError,
        "top_k.device=meta",
    ),
    Case("sample(h, w, top_k=-1)", lambda x: _S(x.h, x.w, top_k=-1), ValueError, "top_k=-1 must be >= 1"),
    Case("sample(h, w, top_k='5')", lambda x: _S(x.h, x.w, top_k="5"), TypeError, "top_k"),
    Case("sample(h, w, top_k=np.int64(5))", lambda x: _S(x.h, x.w, seed=1, top_k=np.int64(5)), None),
    Case(
        "sample_from_logits(z, top_k=tensor [1, 5, 10**6])",
        lambda x: _L(x.z, seed=1, num_samples=2, top_k=torch.tensor([1, 5, 10**6])),
        None,
    ),
    # ---- top_p, min_p, order (sample, sample_from_logits) ----
    Case(
        "sample_from_logits(z, top_p=0.0)", lambda x: _L(x.z, top_p=0.0), ValueError, r"top_p=0.0 must be in \(0, 1\]"
    ),
    Case(
        "sample_from_logits(z, top_p=1.5)", lambda x: _L(x.z, top_p=1.5), ValueError, r"top_p=1.5 must be in \(0, 1\]"
    ),
    Case("sample_from_logits(z, top_p=nan)", lambda x: _L(x.z, top_p=math.nan), ValueError, "top_p=nan must be in"),
    Case("sample_from_logits(z, top_p=True)", lambda x: _L(x.z, top_p=True), TypeError, "top_p must be a number"),
    Case("sample_from_logits(z, top_p='0.9')", lambda x: _L(x.z, top_p="0.9"), TypeError, "top_p must be a number"),
    Case(
        "sample_from_logits(z, top_p=int tensor)",
        lambda x: _L(x.z, top_p=torch.ones(B, dtype=torch.int64)),
        TypeError,
        "top_p.dtype",
    ),
    Case(
        "sample_from_logits(z, top_p=tensor [0.5, 0.5])",
        lambda x: _L(x.z, top_p=torch.tensor([0.5, 0.5])),
        ValueError,
        r"top_p must be a number or a tensor of shape \(B,\)",
    ),
    Case(
        "sample_from_logits(z, top_p=tensor [0.5, 0, 0.5])",
        lambda x: _L(x.z, top_p=torch.tensor([0.5, 0.0, 0.5])),
        ValueError,
        r"top_p\[1\]=0.0 must be in \(0, 1\]",
    ),
    Case(
        "sample_from_logits(z, min_p=-0.1)",
        lambda x: _L(x.z, min_p=-0.1),
        ValueError,
        r"min_p=-0.1 must be in \[0, 1\]",
    ),
    Case(
        "sample_from_logits(z, min_p=1.01)",
        lambda x: _L(x.z, min_p=1.01),
        ValueError,
        r"min_p=1.01 must be in \[0, 1\]",
    ),
    Case("sample(h, w, min_p=None+1j)", lambda x: _S(x.h, x.w, min_p=1j), TypeError, "min_p must be a number"),
    Case(
        "sample_from_logits(z, min_p=tensor [0.1, nan, 0.1])",
        lambda x: _L(x.z, min_p=torch.tensor([0.1, math.nan, 0.1])),
        ValueError,
        r"min_p\[1\]=nan must be in \[0, 1\]",
    ),
    Case("sample(h, w, top_p=0.9, order='hf')", lambda x: _S(x.h, x.w, top_p=0.9, order="hf"), ValueError, "order"),
    Case("sample(h, w, top_p=0.9, order=3)", lambda x: _S(x.h, x.w, top_p=0.9, order=3), TypeError, "order"),
    Case(
        "sample(h, w, top_k=5, order=('temperature', 'top_p'))",
        lambda x: _S(x.h, x.w, top_k=5, order=("temperature", "top_p")),
        ValueError,
        "order",
    ),
    Case(
        "sample(h, w, top_p=0.9, seed=device tensor)",
        lambda x: _S(x.h, x.w, top_p=0.9, seed=torch.tensor(1, dtype=torch.int64)),
        ValueError,
        "not supported with top_k, top_p or min_p",
    ),
    Case("sample(h, w, top_p=np.float32(0.9))", lambda x: _S(x.h, x.w, seed=1, top_p=np.float32(0.9)), None),
    Case(
        "sample_from_logits(z, top_p=[1, 0.5, 1], min_p=[0, 0, 0.2], order='joint')",
        lambda x: _L(
            x.z, seed=1, top_p=torch.tensor([1.0, 0.5, 1.0]), min_p=torch.tensor([0.0, 0.0, 0.2]), order="joint"
        ),
        None,
    ),
    # ---- sample_grouped(_from_logits) ----
    Case(
        "sample_grouped_from_logits(z, group_sizes=[20.0, 20.0])",
        lambda x: _GL(x.z, group_sizes=[20.0, 20.0]),
        TypeError,
        "group_sizes must hold ints",
    ),
    Case(
        "sample_grouped_from_logits(z, group_sizes=[True, 39])",
        lambda x: _GL(x.z, group_sizes=[True, 39]),
        TypeError,
        "group_sizes must hold ints",
    ),
    Case(
        "sample_grouped_from_logits(z, group_sizes=torch.tensor([20.0, 20.0]))",
        lambda x: _GL(x.z, group_sizes=torch.tensor([20.0, 20.0])),
        TypeError,
        "group_sizes.dtype",
    ),
    Case("sample_grouped_from_logits(z, group_sizes=5)", lambda x: _GL(x.z, group_sizes=5), TypeError, "group_sizes"),
    Case(
        "sample_grouped_from_logits(z, group_sizes=[30, 20])",
        lambda x: _GL(x.z, group_sizes=[30, 20]),
        ValueError,
        "group_sizes sum to 50",
    ),
    Case(
        "sample_grouped_from_logits(z, group_sizes=[50, -10])",
        lambda x: _GL(x.z, group_sizes=[50, -10]),
        ValueError,
        "negative size",
    ),
    Case("sample_grouped_from_logits(z, group_sizes=[V, 0])", lambda x: _GL(x.z, group_sizes=[V, 0], seed=1), None),
    Case(
        "sample_grouped_from_logits(z, group_sizes=np.array([16, 24]))",
        lambda x: _GL(x.z, group_sizes=np.array([16, 24]), seed=1),
        None,
    ),
    Case(
        "sample_grouped_from_logits(z, group_sizes=iter([16, 24]))",
        lambda x: _GL(x.z, group_sizes=iter([16, 24]), seed=1),
        None,
    ),
    Case(
        "sample_grouped(h, w, group_sizes=(m for m in (16, 0, 24)))",
        lambda x: _G(x.h, x.w, group_sizes=(m for m in (16, 0, 24)), seed=1),
        None,
    ),
    Case(
        "sample_grouped_from_logits(z expanded to V=1025, group_sizes=[1] * 1025)",
        lambda x: _GL(torch.zeros(1, 1).expand(B, 1025), group_sizes=[1] * 1025),
        ValueError,
        "group_sizes has 1025 groups; at most 1024",
    ),
    Case("sample_grouped_from_logits(z, block_v=3)", lambda x: _GL(x.z, block_v=3), ValueError, "block_v=3"),
    Case(
        "sample_grouped_from_logits(z, return_logsumexp='yes')",
        lambda x: _GL(x.z, return_logsumexp="yes"),
        TypeError,
        "return_logsumexp",
    ),
    Case("sample_grouped(h, w, tiles='big')", lambda x: _G(x.h, x.w, tiles="big"), TypeError, "tiles"),
    Case(
        "sample_grouped(h, w, group_sizes=[20.5, 19.5])",
        lambda x: _G(x.h, x.w, group_sizes=[20.5, 19.5]),
        TypeError,
        "group_sizes",
    ),
    Case("sample_grouped(h, w.to('meta'))", lambda x: _G(x.h, x.w.to("meta")), ValueError, "weight.device=meta"),
    # ---- OnlineSampler / sample_online ----
    Case(
        "OnlineSampler(np.int64(3)).update_logits(z)",
        lambda x: _online_logits(flashsampling.OnlineSampler(np.int64(B), seed=1), x.z),
        None,
    ),
    Case("OnlineSampler(3.0)", lambda x: flashsampling.OnlineSampler(3.0), TypeError, "batch_size must be an int"),
    Case("OnlineSampler(0)", lambda x: flashsampling.OnlineSampler(0), ValueError, "batch_size=0"),
    Case("OnlineSampler(True)", lambda x: flashsampling.OnlineSampler(True), TypeError, "batch_size"),
    Case(
        "OnlineSampler(3, device='meta')",
        lambda x: flashsampling.OnlineSampler(B, device="meta"),
        ValueError,
        "device=meta",
    ),
    Case(
        "OnlineSampler(3, device='nonsense')",
        lambda x: flashsampling.OnlineSampler(B, device="nonsense"),
        ValueError,
        "device='nonsense'",
    ),
    Case(
        "OnlineSampler(3, temperature=10**400)",
        lambda x: flashsampling.OnlineSampler(B, temperature=10**400),
        ValueError,
        "temperature",
    ),
    Case(
        "OnlineSampler.update(h, w[:20]); .update(h[:, :8], w[20:, :8])",
        lambda x: _online_two_chunks(x, lambda x: (x.h[:, :8], x.w[20:, :8])),
        ValueError,
        "hidden has D=8",
        work_before=True,
    ),
    Case(
        "OnlineSampler.update(h, w[:20]); .update(h + 1, w[20:])",
        lambda x: _online_two_chunks(x, lambda x: (x.h + 1, x.w[20:])),
        ValueError,
        "hidden differs",
        work_before=True,
    ),
    Case(
        "OnlineSampler.update(h, w[:20]); .update(h.clone(), w[20:])",
        lambda x: _online_two_chunks(x, lambda x: (x.h.clone(), x.w[20:])),
        None,
    ),
    Case(
        "OnlineSampler.update(h, w.to('meta'))",
        lambda x: flashsampling.OnlineSampler(B).update(x.h, x.w.to("meta")),
        ValueError,
        "weight_chunk.device=meta",
    ),
    Case(
        "OnlineSampler.update(h, w, tiles='big')",
        lambda x: flashsampling.OnlineSampler(B).update(x.h, x.w, tiles="big"),
        TypeError,
        "tiles",
    ),
    Case(
        "OnlineSampler.update_logits(z, start=-1)",
        lambda x: flashsampling.OnlineSampler(B).update_logits(x.z, start=-1),
        ValueError,
        "start=-1",
    ),
    Case(
        "OnlineSampler.update_logits(z[:, :0], start=-1)",
        lambda x: flashsampling.OnlineSampler(B).update_logits(x.z[:, :0], start=-1),
        ValueError,
        "start=-1",
    ),
    Case(
        "OnlineSampler.update(h, w[:0], start=2**32)",
        lambda x: flashsampling.OnlineSampler(B).update(x.h, x.w[:0], start=2**32),
        ValueError,
        "start",
    ),
    Case(
        "OnlineSampler.update_logits(z, block_v=3)",
        lambda x: flashsampling.OnlineSampler(B).update_logits(x.z, block_v=3),
        ValueError,
        "block_v=3",
    ),
    Case(
        "OnlineSampler.update_logits(z); .result(vocab_size=2.5)",
        lambda x: _online_logits(flashsampling.OnlineSampler(B), x.z, 2.5),
        TypeError,
        "vocab_size",
        work_before=True,
    ),
    Case(
        "sample_online(h, w, chunk_size=0)",
        lambda x: flashsampling.sample_online(x.h, x.w, chunk_size=0),
        ValueError,
        "chunk_size=0",
    ),
    Case(
        "sample_online(h, w, chunk_size=1.5)",
        lambda x: flashsampling.sample_online(x.h, x.w, chunk_size=1.5),
        TypeError,
        "chunk_size",
    ),
    Case(
        "sample_online(h, w expanded to V=2**31, chunk_size=2**30)",
        lambda x: flashsampling.sample_online(x.h, _big_w(x), chunk_size=2**30),
        ValueError,
        "V=2147483648",
    ),
    Case(
        "sample_online(h, w, chunk_size=np.int64(16))",
        lambda x: flashsampling.sample_online(x.h, x.w, chunk_size=np.int64(16), seed=1),
        None,
    ),
    # ---- sample_tp(_from_logits), a world of one ----
    Case("sample_tp_from_logits(z, combine='mean')", lambda x: _TPL(x.z, combine="mean"), ValueError, "combine='mean'"),
    Case("sample_tp_from_logits(z, vocab_start=-1)", lambda x: _TPL(x.z, vocab_start=-1), ValueError, "vocab_start=-1"),
    Case("sample_tp_from_logits(z, vocab_start=1.5)", lambda x: _TPL(x.z, vocab_start=1.5), TypeError, "vocab_start"),
    Case(
        "sample_tp_from_logits(z, vocab_size=V + 1)", lambda x: _TPL(x.z, vocab_size=V + 1), ValueError, "vocab_size=41"
    ),
    Case("sample_tp_from_logits(z, timeout=0)", lambda x: _TPL(x.z, timeout=0), ValueError, "timeout=0"),
    Case("sample_tp_from_logits(z, timeout='1')", lambda x: _TPL(x.z, timeout="1"), TypeError, "timeout"),
    Case("sample_tp_from_logits(z, block_v=1)", lambda x: _TPL(x.z, block_v=1), ValueError, "block_v=1"),
    Case("sample_tp_from_logits(z, seed=-1)", lambda x: _TPL(x.z, seed=-1), ValueError, "seed=-1"),
    Case("sample_tp(h, w[None])", lambda x: _TP(x.h, x.w[None]), ValueError, "weight_shard must have 2 dimensions"),
    Case("sample_tp(h, w, tiles='big')", lambda x: _TP(x.h, x.w, tiles="big"), TypeError, "tiles"),
    Case(
        "sample_tp(h, w, temperature=10**400)", lambda x: _TP(x.h, x.w, temperature=10**400), ValueError, "temperature"
    ),
    Case(
        "sample_tp_from_logits(z, group='world')",
        lambda x: _TPL(x.z, seed=1, group="world"),
        TypeError,
        "group must be a torch.distributed.ProcessGroup or None, got str",
    ),
    Case("sample_tp(h, w, group=0)", lambda x: _TP(x.h, x.w, seed=1, group=0), TypeError, "group must be"),
    Case(
        "sample_tp_from_logits(z, temperature=-0.0)",
        lambda x: _TPL(x.z, seed=1, temperature=-0.0),
        None,
    ),
    # ---- the tile inverse-CDF sampler ----
    Case(
        "sample_tile_cdf_from_logits(z, 1.0, seed=-1)",
        lambda x: _TC(x.z, 1.0, -1),
        ValueError,
        "seed=-1 is out of range",
    ),
    Case("sample_tile_cdf_from_logits(z, 1.0, seed=2**64)", lambda x: _TC(x.z, 1.0, 2**64), ValueError, "seed="),
    Case("sample_tile_cdf_from_logits(z, 1.0, seed=2**64 - 1)", lambda x: _TC(x.z, 1.0, 2**64 - 1), None),
    Case(
        "sample_tile_cdf_from_logits(z with +inf, 1.0, 1)",
        lambda x: _TC(x.z.index_fill(1, torch.tensor([5]), math.inf), 1.0, 1),
        ValueError,
        r"logits contain NaN or infinite values",
        work_before=True,
    ),
    Case("sample_tile_cdf_from_logits(z, 0.0, 1)", lambda x: _TC(x.z, 0.0, 1), ValueError, "temperature=0.0 must be"),
    Case(
        "sample_tile_cdf_from_logits(z, tensor [1, 0, 1], 1)",
        lambda x: _TC(x.z, torch.tensor([1.0, 0.0, 1.0]), 1),
        ValueError,
        r"temperature\[1\]=0 must be > 0",
        work_before=True,
    ),
    Case(
        "sample_tile_cdf_from_logits(z, tensor [1, nan, 0], 1, host_checks=False)",
        lambda x: _TC(x.z, torch.tensor([1.0, math.nan, 0.0]), 1, block_v=16, host_checks=False),
        ValueError,
        r"temperature\[2\]=0 must be > 0",
        work_before=True,
    ),
    Case(
        "sample_tile_cdf_from_logits(z, tensor [1, nan, 1], 1, host_checks=False)",
        lambda x: _TC(x.z, torch.tensor([1.0, math.nan, 1.0]), 1, block_v=16, host_checks=False),
        None,
    ),
    Case(
        "sample_tile_cdf_from_logits(z, tensor [1, nan, 0], 1)",
        lambda x: _TC(x.z, torch.tensor([1.0, math.nan, 0.0]), 1, block_v=16),
        ValueError,
        r"temperature\[1\]=nan is invalid",
        work_before=True,
    ),
    Case("sample_tile_cdf_from_logits(z, -1.0, 1)", lambda x: _TC(x.z, -1.0, 1), ValueError, "temperature=-1.0"),
    Case(
        "sample_tile_cdf_from_logits(z, 1.0, 1, block_v=512)",
        lambda x: _TC(x.z, 1.0, 1, block_v=512),
        ValueError,
        "block_v=512",
    ),
    Case(
        "sample_tile_cdf_from_logits(z, 1.0, 1, block_b=0)",
        lambda x: _TC(x.z, 1.0, 1, block_b=0),
        ValueError,
        "block_b=0",
    ),
    Case("sample_tile_cdf_from_logits(z.int(), 1.0, 1)", lambda x: _TC(x.z.int(), 1.0, 1), TypeError, "logits.dtype"),
    Case("sample_tile_cdf_from_logits(z.T.contiguous().T, 1.0, 1)", lambda x: _TC(x.z.T.contiguous().T, 1.0, 1), None),
    Case(
        "sample_fused_tile_cdf(h, w) on the CPU",
        lambda x: sample_fused_tile_cdf(x.h, x.w, seed=1),
        ValueError,
        "needs an sm_90 GPU",
    ),
    Case(
        "sample_fused_tile_cdf(h, w, seed=-1)",
        lambda x: sample_fused_tile_cdf(x.h, x.w, seed=-1),
        ValueError,
        "seed=-1",
    ),
    # ---- flashsampling.ops ----
    Case("ops.sample(h, w, seed=-1)", lambda x: ops.sample(x.h, x.w, seed=-1), ValueError, "seed=-1"),
    Case(
        "ops.sample(h, w, temperature='1')", lambda x: ops.sample(x.h, x.w, temperature="1"), TypeError, "temperature"
    ),
    Case("ops.sample(h, w, num_samples=0)", lambda x: ops.sample(x.h, x.w, num_samples=0), ValueError, "num_samples"),
    Case("ops.sample(h, w, host_checks=1)", lambda x: ops.sample(x.h, x.w, host_checks=1), TypeError, "host_checks"),
    Case("ops.sample(h, w.half())", lambda x: ops.sample(x.h, x.w.half()), TypeError, "weight.dtype"),
    Case(
        "ops.sample_from_logits(z, temperature=1e-300)",
        lambda x: ops.sample_from_logits(x.z, temperature=1e-300),
        ValueError,
        "temperature=1e-300",
    ),
    Case("ops.sample_from_logits(z, seed=1.5)", lambda x: ops.sample_from_logits(x.z, seed=1.5), TypeError, "seed"),
    Case(
        "ops.sample(h, w, seed=meta tensor)",
        lambda x: ops.sample(x.h, x.w, seed=torch.tensor(1, device="meta")),
        ValueError,
        "seed.device=meta",
    ),
    Case(
        "ops.sample(h, w, temperature=meta tensor)",
        lambda x: ops.sample(x.h, x.w, temperature=torch.ones(B, device="meta"), seed=1),
        ValueError,
        "temperature.device=meta",
    ),
    Case(
        "ops.sample_from_logits(z, temperature=meta tensor)",
        lambda x: ops.sample_from_logits(x.z, temperature=torch.ones(B, device="meta"), seed=1),
        ValueError,
        "temperature.device=meta",
    ),
    Case("ops.sample(h.to('meta'), w)", lambda x: ops.sample(x.h.to("meta"), x.w, seed=1), ValueError, "weight.device"),
    Case("ops.sample([[1.0]], w)", lambda x: ops.sample([[1.0]], x.w, seed=1), TypeError, "hidden must be a torch"),
    Case("ops.sample_from_logits(None)", lambda x: ops.sample_from_logits(None, seed=1), TypeError, "logits must be"),
    Case(
        "ops.sample(h, w, num_samples=2**70)",
        lambda x: ops.sample(x.h, x.w, seed=1, num_samples=2**70),
        ValueError,
        "num_samples=1180591620717411303424 is too large",
    ),
    Case(
        "ops.sample(h, w, temperature=10**400)",
        lambda x: ops.sample(x.h, x.w, seed=1, temperature=10**400),
        ValueError,
        "temperature=1000.*does not fit float32",
    ),
    Case(
        "ops.sample(h, w, seed=sparse tensor)",
        lambda x: ops.sample(x.h, x.w, seed=torch.tensor(1).to_sparse()),
        TypeError,
        "seed must be a dense",
    ),
]


def _online_logits(sampler, z, vocab_size=V):
    sampler.update_logits(z)
    return sampler.result(vocab_size=vocab_size).tokens


def _tp_seed_none_on_rank_1(x, rank):
    return _TPL(x.zs[rank], seed=None if rank else 1, timeout=20)


def _tp_stage1_fails_on_rank_1(x, rank):
    """Rank 1's stage 1 raises after the first exchange (as an out-of-memory or a kernel that does not compile for
    its ``tiles`` would); rank 0 must raise too, at once and quoting it (it returned tokens drawn without rank 1's
    shard, or waited for its timeout)."""
    from unittest import mock

    def planted(*args, **kwargs):
        raise RuntimeError("planted stage-1 failure")

    if rank == 0:
        return _TPL(x.zs[rank], seed=1, timeout=10)
    with mock.patch.object(request_module, "launch_logits_stage1", planted):
        return _TPL(x.zs[rank], seed=1, timeout=10)


#: Two temperature tensors whose per-row 1/T bits (0x3f800000 each; 4.0 = +2**24, 0.5 = -2**23) gave the same
#: digest ``sum_b bits_b (b + 1) golden`` that the first exchange compared (before the values were): rank 1 sampled
#: its shard at T = 0.25 while rank 0 sampled at T = 1.
_COLLIDING_TEMPERATURES = ([1.0, 1.0, 1.0], [0.25, 2.0, 1.0])


#: Rows run by both ranks of a world of two (``run(x, rank)``); rank r holds columns SPLIT[r] .. SPLIT[r + 1].
_Z = lambda x, r: x.zs[r]
TP_CASES = [
    Case(
        "sample_tp_from_logits(z_r, num_samples=1 + rank)",
        lambda x, r: _TPL(_Z(x, r), seed=1, num_samples=1 + r),
        ValueError,
        r"ranks passed different num_samples: rank 0: 1, rank 1: 2",
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r[:3 - rank])",
        lambda x, r: _TPL(_Z(x, r)[: B - r], seed=1),
        ValueError,
        "different batch sizes B",
        ranks=2,
    ),
    Case(
        "sample_tp(h[:, :16 - rank], w_r[:, :16 - rank])",
        lambda x, r: _TP(x.h[:, : D - r], x.ws[r][:, : D - r], seed=1),
        ValueError,
        "different hidden sizes D",
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r, temperature=0.8 + rank / 10)",
        lambda x, r: _TPL(_Z(x, r), seed=1, temperature=0.8 + r / 10),
        ValueError,
        r"different temperatures \(rank 0: 0.8, rank 1: 0.9\)",
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r, temperature=tensor [1, 1, 1 + rank])",
        lambda x, r: _TPL(_Z(x, r), seed=1, temperature=torch.tensor([1.0, 1.0, 1.0 + r])),
        ValueError,
        "different temperature tensors",
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r, temperature=tensor ([1, 1, 1], [0.25, 2, 1])[rank]) (digests collided)",
        lambda x, r: _TPL(_Z(x, r), seed=1, temperature=torch.tensor(_COLLIDING_TEMPERATURES[r])),
        ValueError,
        r"different temperature tensors \(row 0: rank 0: 1.0, rank 1: 0.25\)",
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r, temperature=tensor [1, nan, 1 + rank])",
        lambda x, r: _TPL(_Z(x, r), seed=1, temperature=torch.tensor([1.0, math.nan, 1.0 + r])),
        ValueError,
        r"different temperature tensors \(row 2: rank 0: 1.0, rank 1: 2.0\)",
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r, temperature=tensor [1, nan, 1]) (NaN rows alike)",
        lambda x, r: _TPL(_Z(x, r), seed=1, temperature=torch.tensor([1.0, math.nan, 1.0])),
        ValueError,
        r"temperature\[1\]=nan is invalid",
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r, temperature=(0.0, -0.0)[rank])",
        lambda x, r: _TPL(_Z(x, r), seed=1, temperature=(0.0, -0.0)[r]),
        None,
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r, temperature=tensor [1, (0.0, -0.0)[rank], 0.5])",
        lambda x, r: _TPL(_Z(x, r), seed=1, temperature=torch.tensor([1.0, (0.0, -0.0)[r], 0.5])),
        None,
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r, temperature=(tensor 0.5, tensor [0.5, 0.5, 0.5] float64)[rank])",
        lambda x, r: _TPL(_Z(x, r), seed=1, temperature=(torch.tensor(0.5), _f64(0.5, 0.5, 0.5))[r]),
        None,
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r, group='world')",
        lambda x, r: _TPL(_Z(x, r), seed=1, group="world"),
        TypeError,
        "group must be a torch.distributed.ProcessGroup or None, got str",
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r), rank 1's stage 1 raising",
        _tp_stage1_fails_on_rank_1,
        RuntimeError,
        r"planted stage-1 failure",
        ranks=2,
        alike=False,
    ),
    Case(
        "sample_tp_from_logits(z_r, temperature=(tensor [1, 1, 1], 1.0)[rank])",
        lambda x, r: _TPL(_Z(x, r), seed=1, temperature=(torch.ones(B), 1.0)[r]),
        ValueError,
        r"different temperatures \(rank 0: a tensor, rank 1: a number\)",
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r, combine=('pathwise', 'factorized')[rank])",
        lambda x, r: _TPL(_Z(x, r), seed=1, combine=("pathwise", "factorized")[r]),
        ValueError,
        "different combine",
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r, seed=1 + rank)",
        lambda x, r: _TPL(_Z(x, r), seed=1 + r),
        ValueError,
        "different seeds",
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r, seed=(1, None)[rank])",
        _tp_seed_none_on_rank_1,
        ValueError,
        r"different seeds \(rank 0: an int, rank 1: None\)",
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r, vocab_start=0)",
        lambda x, r: _TPL(_Z(x, r), seed=1, vocab_start=0),
        ValueError,
        "do not tile",
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r, vocab_size=V + 1)",
        lambda x, r: _TPL(_Z(x, r), seed=1, vocab_size=V + 1),
        ValueError,
        "vocab_size=41",
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r, vocab_size=(V, None)[rank])",
        lambda x, r: _TPL(_Z(x, r), seed=1, vocab_size=(V, None)[r]),
        ValueError,
        "different vocab_size",
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits((z_r, z_r.half())[rank])",
        lambda x, r: _TPL((_Z(x, r), _Z(x, r).half())[r], seed=1),
        ValueError,
        "different dtypes",
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r, return_logsumexp=(False, True)[rank])",
        lambda x, r: _TPL(_Z(x, r), seed=1, return_logsumexp=bool(r)),
        ValueError,
        "different return_logsumexp",
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r, host_checks=(True, False)[rank])",
        lambda x, r: _TPL(_Z(x, r), seed=1, host_checks=not r),
        ValueError,
        "different host_checks",
        ranks=2,
    ),
    Case(
        "(sample_tp_from_logits(z_0), sample_tp(h, w_1))[rank]",
        lambda x, r: _TPL(_Z(x, r), seed=1) if r == 0 else _TP(x.h, x.ws[r], seed=1),
        ValueError,
        "different entry points",
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r, seed=(1, -1)[rank])",
        lambda x, r: _TPL(_Z(x, r), seed=(1, -1)[r]),
        ValueError,
        r"seed=-1 is out of range",
        ranks=2,
        alike=False,
    ),
    Case(
        "sample_tp_from_logits((z_0, [[1.0]])[rank])",
        lambda x, r: _TPL((_Z(x, r), [[1.0]])[r], seed=1),
        (ValueError, TypeError),
        "logits_shard must be a torch.Tensor",
        ranks=2,
        alike=False,
    ),
    Case(
        "sample_tp_from_logits(z_r, combine='factorized', host_checks=False), rank 1's shard empty, NaN and -inf rows",
        lambda x, r: _TPL(_bad_logits(x)[:, : V * (1 - r)], seed=1, combine="factorized", host_checks=False),
        None,
        ranks=2,
    ),
    Case(
        "sample_tp_from_logits(z_r, timeout=2) on rank 0 alone",
        lambda x, r: _TPL(_Z(x, r), seed=1, timeout=2) if r == 0 else None,
        (TimeoutError, None),
        r"rank 0 waited .* \(timeout=2.0 s\) for the other ranks",
        ranks=2,
        alike=False,
    ),
]


def _bad_logits(x) -> torch.Tensor:
    """``z`` with row 0 all NaN, row 1 all ``-inf``, row 2 holding a ``+inf`` and a NaN."""
    z = x.z.clone()
    z[0] = math.nan
    z[1] = -math.inf
    z[2, 5] = math.inf
    z[2, 7] = math.nan
    return z


class _Launched(Exception):
    """Stage 1 was launched (a row that must raise before any work reached the kernels)."""


@pytest.fixture
def tripwire(monkeypatch):
    """Replace every stage-1 launcher by one that raises :class:`_Launched`."""

    def launched(*args, **kwargs):
        raise _Launched

    for module, name in (
        (request_module, "launch_fused_stage1"),
        (request_module, "launch_logits_stage1"),
        (tile_cdf_module, "launch_tile_cdf_stage1"),
        (tile_cdf_module, "launch_pingpong"),
        (truncation_module, "launch_truncation_stage1"),
        (truncation_module, "launch_truncation_logits_stage1"),
    ):
        monkeypatch.setattr(module, name, launched)


def _in_range(tokens) -> None:
    t = torch.as_tensor(tokens)
    assert t.dtype == torch.int64 and t.numel() > 0
    assert int(t.min()) >= 0 and int(t.max()) < V, t


ONE = [c for c in CASES if c.ranks == 1]


@cpu_table
@pytest.mark.parametrize("case", ONE, ids=[c.call for c in ONE])
def test_one_rank(case, request):
    x = inputs()
    if case.error is None:
        _in_range(case.run(x))
        return
    if not case.work_before:
        request.getfixturevalue("tripwire")
    with pytest.raises(case.error, match=case.names):
        case.run(x)


def _outcome(fn):
    try:
        result = fn()
    except Exception as exc:  # noqa: BLE001 - the outcome is compared by the parent
        return type(exc).__name__, str(exc)
    return "ok", None if result is None else result.cpu()


def _tp_rank(rank: int, init_file: str, out_dir: str) -> None:
    """One rank of the world: every row of TP_CASES in order, the outcomes saved for the parent."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    try:
        x = inputs()
        out = {case.call: _outcome(lambda case=case: case.run(x, rank)) for case in TP_CASES}
        torch.save(out, os.path.join(out_dir, f"rank{rank}.pt"))
        if rank == 1:  # the last row keeps rank 0 in an exchange until its timeout: leave only after it
            end = time.monotonic() + 60
            while not os.path.exists(os.path.join(out_dir, "rank0.pt")) and time.monotonic() < end:
                time.sleep(0.1)
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def tp_outcomes(tmp_path_factory) -> list[dict]:
    from tests.spawn import run_world

    tmp = tmp_path_factory.mktemp("tp_bad")
    run_world(_tp_rank, 2, (str(tmp / "init"), str(tmp)), deadline=240)
    return [torch.load(tmp / f"rank{r}.pt") for r in range(2)]


@cpu_table
@pytest.mark.parametrize("case", TP_CASES, ids=[c.call for c in TP_CASES])
def test_two_ranks(case, tp_outcomes):
    outcomes = [tp_outcomes[r][case.call] for r in range(2)]
    errors = case.error if isinstance(case.error, tuple) else (case.error, case.error)
    for rank, ((kind, value), error) in enumerate(zip(outcomes, errors)):
        if error is None:
            assert kind == "ok", (rank, kind, value)
            if value is not None:
                _in_range(value)
            continue
        assert kind == error.__name__, (rank, kind, value)
        assert __import__("re").search(case.names, value), (rank, value)
    if case.alike:
        assert outcomes[0][1] is None or outcomes[0][0] != "ok" or torch.equal(outcomes[0][1], outcomes[1][1])
        if outcomes[0][0] != "ok":
            assert outcomes[0] == outcomes[1]


#: Every entry point with ``host_checks=False`` on rows of NaN, of -inf only, and with +inf and NaN.
PROMISE = {
    "sample_from_logits(bad z, host_checks=False)": lambda x, z: _L(z, seed=1, num_samples=3, host_checks=False),
    "sample(h with a NaN row and an inf row, w, host_checks=False)": lambda x, z: _S(
        _bad_hidden(x), x.w, seed=1, host_checks=False
    ),
    "sample_from_logits(bad z, top_k=2, host_checks=False)": lambda x, z: _L(
        z, seed=1, num_samples=3, top_k=2, host_checks=False
    ),
    "sample(h with a NaN row and an inf row, w, top_k=[1, 3, V], host_checks=False)": lambda x, z: _S(
        _bad_hidden(x), x.w, seed=1, top_k=torch.tensor([1, 3, V]), host_checks=False
    ),
    "sample_from_logits(bad z, top_p=0.5, min_p=0.1, host_checks=False)": lambda x, z: _L(
        z, seed=1, num_samples=3, top_p=0.5, min_p=0.1, host_checks=False
    ),
    "sample(h, w, temperature=[nan, -1, inf], top_p=0.9, host_checks=False)": lambda x, z: _S(
        x.h, x.w, seed=1, top_p=0.9, temperature=torch.tensor([math.nan, -1.0, math.inf]), host_checks=False
    ),
    "sample(h, w, temperature=[nan, -1, inf], host_checks=False)": lambda x, z: _S(
        x.h, x.w, seed=1, temperature=torch.tensor([math.nan, -1.0, math.inf]), host_checks=False
    ),
    "sample_grouped_from_logits(bad z, group_sizes=[V, 0], host_checks=False)": lambda x, z: _GL(
        z, seed=1, num_samples=4, group_sizes=[V, 0], host_checks=False
    ),
    "sample_grouped_from_logits(bad z, group_sizes=[0, 16, 24, 0], host_checks=False)": lambda x, z: _GL(
        z, seed=2, num_samples=4, group_sizes=[0, 16, 24, 0], host_checks=False
    ),
    "sample_grouped_from_logits(bad z, host_checks=False)": lambda x, z: _GL(z, seed=1, block_v=16, host_checks=False),
    "sample_grouped(h with a NaN row, w, group_sizes=[V, 0], host_checks=False)": lambda x, z: _G(
        _bad_hidden(x), x.w, seed=1, group_sizes=[V, 0], host_checks=False
    ),
    "sample_online(h with a NaN row, w, chunk_size=24, host_checks=False)": lambda x, z: flashsampling.sample_online(
        _bad_hidden(x), x.w, chunk_size=24, seed=1, host_checks=False
    ),
    "OnlineSampler(host_checks=False).update_logits(bad z in chunks of 24)": lambda x, z: _online_chunks(z),
    "sample_tp_from_logits(bad z, combine='factorized', host_checks=False)": lambda x, z: _TPL(
        z, seed=1, combine="factorized", host_checks=False
    ),
    "sample_tp(h with a NaN row, w, host_checks=False)": lambda x, z: _TP(
        _bad_hidden(x), x.w, seed=1, host_checks=False
    ),
    "sample_tile_cdf_from_logits(bad z, 1.0, 1, host_checks=False)": lambda x, z: _TC(
        z, 1.0, 1, block_v=16, host_checks=False
    ),
    "ops.sample_from_logits(bad z, host_checks=False)": lambda x, z: ops.sample_from_logits(
        z, seed=1, host_checks=False
    ),
    "sample_from_logits(bad z, seed=int64 [B], return_logprobs=True, host_checks=False)[0]": lambda x, z: _L(
        z, seed=torch.arange(B), num_samples=2, return_logprobs=True, host_checks=False
    )[0],
    "sample(h with a NaN row and an inf row, w, return_logprobs=True, host_checks=False)[0]": lambda x, z: _S(
        _bad_hidden(x), x.w, seed=1, return_logprobs=True, host_checks=False
    )[0],
}


def _bad_hidden(x) -> torch.Tensor:
    h = x.h.clone()
    h[0, 3] = math.nan
    h[1, 2] = math.inf
    return h


def _online_chunks(z) -> torch.Tensor:
    sampler = flashsampling.OnlineSampler(B, seed=3, num_samples=2, host_checks=False)
    for a in (24, 0):
        sampler.update_logits(z[:, a : a + 24], start=a, block_v=16)
    return sampler.result(vocab_size=V).tokens


@cpu_table
@pytest.mark.parametrize("call", list(PROMISE), ids=list(PROMISE))
def test_tokens_stay_in_range(call):
    x = inputs()
    _in_range(PROMISE[call](x, _bad_logits(x)))


@cpu_table
def test_transposed_logits_give_the_tokens_of_contiguous_ones():
    """Strides are honoured (the tile inverse-CDF prototype read rows of unit column stride: transposed logits gave
    other tokens)."""
    z = inputs().z
    zt = z.T.contiguous().T
    assert zt.stride(1) != 1
    assert torch.equal(_L(zt, seed=5, num_samples=4), _L(z, seed=5, num_samples=4))
    assert np.array_equal(_TC(zt, 0.7, 5, block_v=16), _TC(z, 0.7, 5, block_v=16))


def _subnormal_bf16(rows: int, cols: int, seed: int) -> torch.Tensor:
    """bfloat16 values in ``(-5e-39, 5e-39)``: subnormal (below ``2**-126``), exact in float32."""
    g = torch.Generator().manual_seed(seed)
    return ((torch.rand(rows, cols, generator=g) * 2 - 1) * 5e-39).to(torch.bfloat16)


#: Entry points on bfloat16 subnormal logits at ``T = 1e-38`` (where ``z / T`` is of order 1), against the twin.
SUBNORMAL = {
    "sample_from_logits": lambda z: _L(z, temperature=1e-38, seed=3, num_samples=8),
    "sample (h = 1, w = the logits)": lambda z: _S(torch.ones(1, 1, dtype=torch.bfloat16), z.T.contiguous(),
                                                   temperature=1e-38, seed=3, num_samples=8),
    "sample_tile_cdf_from_logits": lambda z: _TC(z, 1e-38, 3, block_v=16),
}  # fmt: skip


@cpu_table
@pytest.mark.parametrize("entry", list(SUBNORMAL))
def test_bf16_subnormal_logits_are_read_exactly(entry):
    """The interpreter converted bfloat16 subnormals to wrong float32 values (``1.38e-39`` to ``1.03e-38``), a
    silent wrong law at ``T = 1e-38``; the launchers now convert on the host (found by ``tests/fuzz``)."""
    from flashsampling.tile_cdf.twin import draw_tiles_np, tile_logmass, tile_stage1_np
    from flashsampling.twin import sample_twin

    z = _subnormal_bf16(1, 300, 7)
    z32 = z.float().numpy()
    got = np.asarray(SUBNORMAL[entry](z))
    if entry.startswith("sample_tile_cdf"):
        m, q, draw = tile_stage1_np(z32, np.float32(1) / np.float32([1e-38]), 3, block_v=16)
        want = draw[np.arange(1), draw_tiles_np(tile_logmass(m, q), 3, 16)]
    else:
        want = sample_twin(z32, np.float32(1e-38), seed=3, num_samples=8)
    assert np.array_equal(got, want), (got, want)


def test_wide_k_offsets_for_the_issue_shape():
    """The launcher forms the K loop's offsets in int64 for a column-major weight with V * D >= 2**31 (151936 x
    16384: 16383 * 151936 wraps in int32), in int32 for the row-major layouts of every model (shapes only: meta)."""
    from flashsampling.kernels.stage1 import wide_k_offsets

    h = torch.empty(4, 16384, device="meta")
    column_major = torch.empty(16384, 151936, device="meta").T
    assert wide_k_offsets(h, column_major, 64)
    assert not wide_k_offsets(h, torch.empty(151936, 16384, device="meta"), 64)
    assert not wide_k_offsets(h, torch.empty(16384, 2**17, device="meta").T, 64)  # 16383 * 2**17 < 2**31
    assert wide_k_offsets(torch.empty(16384, 4, device="meta").T, torch.empty(2**20, 16384, device="meta"), 64) is \
        (16383 * 4 >= 2**31)  # fmt: skip


@cpu_table
def test_the_wide_k_path_gives_the_same_tokens(monkeypatch):
    """Stage 1's int64 K-loop offsets (``WIDE_K``) compute what the int32 ones do where both fit."""
    import flashsampling.kernels.stage1 as stage1

    x = inputs()
    w = x.w.T.contiguous().T  # column-major: stride_wd = V
    tiles = flashsampling.TileConfig(16, 64, 16)
    narrow = _S(x.h, w, seed=9, num_samples=3, tiles=tiles)
    monkeypatch.setattr(stage1, "wide_k_offsets", lambda *a: True)
    assert torch.equal(_S(x.h, w, seed=9, num_samples=3, tiles=tiles), narrow)


def _compiled(code: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "FLASHSAMPLING_INTERPRET": "0"}
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def test_offsets_are_64_bit():
    """No kernel forms a pointer offset from an int32 product of two runtime values (``tests/offset_audit.py``, on
    the IR Triton builds for sm_90 without a GPU); the audit flags the planted ``ks * stride`` and the narrow K loop."""
    import json

    done = _compiled("import runpy; runpy.run_path('tests/offset_audit.py', run_name='__main__')")
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout[done.stdout.index("{") :])
    planted = {k: v for k, v in found.items() if "(planted)" in k}
    shipped = {k: v for k, v in found.items() if "(planted)" not in k}
    assert len(shipped) >= 11 and not any(shipped.values()), shipped
    assert planted and all(planted.values()), planted
    assert any("stride" in line or "%w_" in line for line in planted["stage1-tiled-narrow (planted)"])


def test_triton_imported_before_flashsampling_still_interprets():
    """``import triton`` first (as ``from transformers import ...`` does) left triton's helpers in compiled mode and
    every interpreted kernel failed; now they are turned into interpreted ones at ``import flashsampling``."""
    if not flashsampling.INTERPRET:
        pytest.skip("only the interpreter depends on the import order")
    code = ("import triton, triton.language, torch\nimport flashsampling\nflashsampling._device.check_triton_mode()\n"
            "z = torch.randn(2, 40)\nprint(flashsampling.sample_from_logits(z, seed=1).tolist(), "
            "flashsampling.sample_grouped_from_logits(z, seed=1).tolist())")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "FLASHSAMPLING_INTERPRET")}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("[[")


RELEASES = {"triton 3.6 + numpy 2.4": ({"triton": (3, 6), "numpy": (2, 4)}, True),
            "triton 3.6 + numpy 2.3": ({"triton": (3, 6), "numpy": (2, 3)}, False),
            "triton 3.9 + numpy 2.4": ({"triton": (3, 9), "numpy": (2, 4)}, False)}  # fmt: skip


@pytest.mark.parametrize("releases, refused", list(RELEASES.values()), ids=list(RELEASES))
def test_an_interpreter_that_cannot_run_is_refused_at_import(releases, refused, monkeypatch):
    """triton 3.6's interpreter fails on every kernel with numpy 2.4 (``int()`` of a one-element array): one clear
    ImportError at ``import flashsampling`` instead."""
    import flashsampling._device as device

    monkeypatch.setattr(device, "_release", releases.__getitem__)
    if refused:
        with pytest.raises(ImportError, match="install numpy<2.4 or triton>=3.9"):
            device.check_interpreter_versions()
    else:
        device.check_interpreter_versions()
