"""The fused truncated sampler (``top_k``, ``top_p``, ``min_p``, ``order``) equals its NumPy twin bit for bit, through
each of its three paths: stage 2's decision from the lists, the fallback on a row's whole logits, and the law on the
host for a decision within its float64 bound.

The twin (:func:`flashsampling.twin.sample_truncated_twin`) is the law of :mod:`flashsampling.targets`
(``sampling_law(..., top_k_ties="low_index")``, the other conventions the defaults) with the plain sampler's noise;
its law is checked statistically in ``tests/test_truncation_stats.py``.  Every test here spies on stage 2 to assert
which path the rows took, so a path that silently stopped running would fail.  Deterministic, interpreter only
(CPU tensors; compiled, the noise agrees with the twin within ``2^-21 (1 + |G|)``).

Time: about 60 s on two cores (interpreted launches).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import flashsampling
import flashsampling.truncation as truncation
from flashsampling.kernels import truncation_stage2 as stage2
from flashsampling.kernels.truncation import launch_truncation_stage1, launch_write_logits, list_length
from flashsampling.targets import sampling_law
from flashsampling.twin import kept_mask, sample_truncated_twin, sample_twin

pytestmark = pytest.mark.skipif(not flashsampling.INTERPRET, reason="bit-exact kernel = twin: the interpreter's claim")

V = 400


class Paths:
    """Counts the rows of each stage-2 launch by path: ``fast`` (decided from the lists), ``sent`` (sent from the
    lists to the fallback), ``whole`` (decided by the fallback on whole rows), ``undecided`` (the fallback's float64
    decision within its bound), ``host`` (the law's threshold given)."""

    def __init__(self) -> None:
        self.fast = self.sent = self.whole = self.undecided = self.host = 0

    def __call__(self, *args, **kwargs):
        redo = kwargs.get("redo")
        before = redo[2].clone() if redo is not None else None
        tokens, flags, status = launch(*args, **kwargs)
        if kwargs.get("given") is not None:
            self.host += status.numel()
        elif redo is not None:
            was = before == stage2.STATUS_FALLBACK
            self.whole += int((was & (status == stage2.STATUS_DRAWN)).sum())
            self.undecided += int((was & (status == stage2.STATUS_UNDECIDED)).sum())
        else:
            self.fast += int((status == stage2.STATUS_DRAWN).sum())
            self.sent += int((status == stage2.STATUS_FALLBACK).sum())
        return tokens, flags, status


launch = stage2.launch_truncation_stage2


@pytest.fixture
def paths(monkeypatch) -> Paths:
    spy = Paths()
    monkeypatch.setattr(truncation, "launch_truncation_stage2", spy)
    return spy


def _logits(seed: int, rows: int = 4, scale: float = 3.0, ties: bool = False) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(rows, V, generator=g) * scale
    if ties:
        z = torch.round(z * 2) / 2
    return z


def _numpy(x):
    return x.numpy() if isinstance(x, torch.Tensor) else x


def _check(z, temperature, seed: int, num_samples: int = 2, block_v: int = 64, **filters) -> torch.Tensor:
    got = flashsampling.sample_from_logits(z, temperature=temperature, seed=seed, num_samples=num_samples,
                                           block_v=block_v, **filters)  # fmt: skip
    want = sample_truncated_twin(z.float().numpy(), _numpy(temperature), seed=seed, num_samples=num_samples,
                                 **{k: _numpy(v) for k, v in filters.items()})  # fmt: skip
    assert np.array_equal(got.numpy(), want), (got.numpy().T, want.T)
    return got


FILTERS = {
    "top_p": dict(top_p=0.8),
    "min_p": dict(min_p=0.05),
    "top_k+top_p+min_p": dict(top_k=30, top_p=0.9, min_p=0.02),
    "per-row tensors": dict(
        top_k=torch.tensor([5, 500, 40, 1]),
        top_p=torch.tensor([0.5, 0.95, 1.0, 0.3]),
        min_p=torch.tensor([0.0, 0.1, 0.3, 0.0], dtype=torch.float64),
    ),  # fmt: skip
}


@pytest.mark.parametrize("order", [None, "vllm", "joint", "llama.cpp"])
@pytest.mark.parametrize("name", list(FILTERS))
def test_lists_decide_and_equal_the_twin(paths, name, order):
    temperature = torch.tensor([0.8, 1.0, 0.0, 1.5])
    _check(_logits(1, ties=name == "top_p"), temperature, seed=3, order=order, **FILTERS[name])
    assert paths.fast >= 3 and paths.host == 0


@pytest.mark.parametrize("name", list(FILTERS))
def test_lists_too_short_take_the_fallback(paths, monkeypatch, name):
    """Two entries per 64-column tile hold none of these kept sets: the rows go through the whole-row stage 2."""
    monkeypatch.setattr(truncation, "LIST_OVERRIDE", 2)
    _check(_logits(2, scale=0.7), 0.9, seed=4, **FILTERS[name])
    assert paths.sent >= 2 and paths.whole >= 2


def test_top_p_alone_uses_the_tiles_masses(paths):
    """Top-p on the whole row with lists that are not complete: ``S`` comes from stage 1's float64 tile masses."""
    lists = {}

    def keep(*args, **kwargs):
        out = launch_truncation_stage1(*args, **kwargs)
        lists.update(out, mass_flag=kwargs["mass"])
        return out

    monkey = pytest.MonkeyPatch()
    monkey.setattr(truncation, "launch_truncation_stage1", keep)
    try:
        h = _logits(3, rows=3)
        w = torch.eye(V)  # identity weights: h @ W.T = h exactly
        got = flashsampling.sample(h, w, temperature=0.7, seed=5, num_samples=3, top_p=0.6)
    finally:
        monkey.undo()
    want = sample_truncated_twin(h.numpy(), 0.7, top_p=0.6, seed=5, num_samples=3)
    assert np.array_equal(got.numpy(), want)
    assert lists["mass_flag"] and paths.fast == 3
    assert float(lists["mass"].min()) >= 1.0  # every tile's mass counts its maximum with weight 1


def _two_levels() -> tuple[torch.Tensor, float]:
    """3 tokens at logit 1, 5 at 0 (T = 1): the mass above level 0 is 3 and S = 3 + 5 e^-1."""
    z = torch.tensor([[1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0]])
    return z, 3.0 + 5.0 * float(np.exp(np.float64(-1.0)))


@pytest.mark.parametrize("step", [0, -1, 1])
def test_top_p_at_a_cumulative_mass_is_decided_by_the_law(paths, step):
    """``p`` within an ulp of ``M / S``: stage 2 cannot decide within its bound, neither on the lists nor on the
    whole row, and the law decides on the host: level 0 kept iff ``3 < p S`` exactly."""
    z, s = _two_levels()
    p = float(np.nextafter(3.0 / s, 2.0 * step))
    got = _check(z, 1.0, seed=5, num_samples=64, top_p=p)
    assert paths.host == 1
    kept = sampling_law(z.double().numpy(), 1.0, top_p=p)[0] > 0
    assert set(got[0].tolist()) <= set(np.flatnonzero(kept).tolist())


@pytest.mark.parametrize("up", [False, True])
def test_min_p_at_a_weight_is_decided_by_the_law(paths, up):
    z, _ = _two_levels()
    q = float(np.exp(np.float64(-1.0)))
    q = float(np.nextafter(q, 1.0)) if up else q
    got = _check(z, 1.0, seed=6, num_samples=64, min_p=q)
    assert paths.host == 1
    assert (0 in got[0].tolist()) and ((1 in got[0].tolist()) != up)  # level 0 kept iff e^-1 >= q in numpy


def test_rows_whose_filters_keep_everything_get_the_plain_tokens(paths):
    z = _logits(7)
    filters = dict(top_k=torch.tensor([V, 10, V + 3, 2]), top_p=torch.tensor([1.0, 0.9, 1.0, 1.0]),
                   min_p=torch.tensor([0.0, 0.0, 0.0, 0.2]))  # fmt: skip
    got = _check(z, 0.9, seed=7, num_samples=3, **filters)
    plain = flashsampling.sample_from_logits(z, temperature=0.9, seed=7, num_samples=3)
    assert torch.equal(got[[0, 2]], plain[[0, 2]])
    assert np.array_equal(plain.numpy(), sample_twin(z.numpy(), 0.9, seed=7, num_samples=3))
    # No row truncated: the plain path itself.
    assert torch.equal(flashsampling.sample_from_logits(z, temperature=0.9, seed=7, num_samples=3, top_p=1.0,
                                                        min_p=0.0, top_k=V), plain)  # fmt: skip


def test_tiny_top_p_keeps_the_top_tie_group():
    z = _logits(8, ties=True)
    got = _check(z, 1.0, seed=8, num_samples=16, top_p=1e-300)
    for row in range(z.shape[0]):
        assert set(got[row].tolist()) <= set(torch.nonzero(z[row] == z[row].max()).flatten().tolist())


def test_matmul_path_and_its_recomputed_logits(paths, monkeypatch):
    """Through ``sample(h, W)``: the lists, then (lists too short) the fallback recomputing the rows' logits with the
    same kernel and tiles -- the same bits as the logits the lists were taken from."""
    g = torch.Generator().manual_seed(9)
    h = torch.randn(5, 48, generator=g)
    w = torch.randn(V, 48, generator=g) * 0.3
    tiles = truncation.truncation_tiles(5, 4)
    z = launch_write_logits(h, w, tiles)
    for override in (None, 2):
        monkeypatch.setattr(truncation, "LIST_OVERRIDE", override)
        got = flashsampling.sample(h, w, temperature=0.9, seed=10, num_samples=2, top_k=50, top_p=0.9, min_p=0.01)
        want = sample_truncated_twin(z.numpy(), 0.9, top_k=50, top_p=0.9, min_p=0.01, seed=10, num_samples=2)
        assert np.array_equal(got.numpy(), want), override
    assert paths.whole >= 1
    lists = launch_truncation_stage1(h, w, torch.ones(5), torch.ones(5, dtype=torch.float64), 1, 2, 1, 8, tiles,
                                     mass=False, full=False)  # fmt: skip
    picked = torch.gather(z, 1, lists["cand_i"].long().clamp(0, V - 1))
    finite = lists["cand_z"] > -float("inf")
    assert torch.equal(lists["cand_z"][finite], picked[finite])  # the lists' logits are the written logits


def test_no_finite_logit_is_flagged_and_in_range():
    z = _logits(11)
    z[1] = -float("inf")
    got = flashsampling.sample_from_logits(z, seed=3, top_p=0.5, host_checks=False)
    assert int(got[1, 0]) == V - 1
    with pytest.raises(ValueError, match="row"):
        flashsampling.sample_from_logits(z, seed=3, top_p=0.5)


def test_kept_mask_is_the_law_support():
    z = _logits(12, ties=True).numpy()
    for kw in (dict(k=7), dict(p=0.5), dict(min_p=0.1), dict(k=20, p=0.9, min_p=0.05, order="joint")):
        mask = kept_mask(z, 0.8, **kw)
        law = sampling_law(z.astype(np.float64), 0.8, top_k=kw.get("k"), top_p=kw.get("p"), min_p=kw.get("min_p"),
                           order=kw.get("order", "transformers"), top_k_ties="low_index")  # fmt: skip
        assert np.array_equal(mask, law > 0)


def test_list_length_covers_the_expected_kept_tokens_per_tile():
    assert list_length(20, 256, 128256) == 4  # 0.04 per tile
    assert list_length(50, 256, 128256) == 8
    assert list_length(1024, 256, 128256) == 16  # 2.0 per tile
    assert list_length(1024, 1024, 128256) == 32
    assert list_length(1024, 64, 100) == 64  # never more than the tile
    assert math.isclose(truncation.relative_error(0, 1, 0), 301 * 2.0**-53 * 1.01)


def test_without_host_checks_a_decision_within_its_bound_is_taken_in_float64(paths):
    """``host_checks=False`` never synchronizes: a row whose float64 decision on its whole logits is within the error
    bound is drawn with that decision (status ``STATUS_UNDECIDED``), not redone by the law on the host."""
    z, s = _two_levels()
    got = flashsampling.sample_from_logits(z, temperature=1.0, seed=5, num_samples=64, top_p=3.0 / s,
                                           host_checks=False)  # fmt: skip
    assert paths.undecided == 1 and paths.host == 0
    assert int(got.min()) >= 0 and int(got.max()) < z.shape[1]


@pytest.mark.parametrize("rel, host", [(1e-14, 1), (-1e-14, 1), (1e-9, 0), (-1e-9, 0)])
def test_the_top_p_margin_is_float64(paths, rel, host):
    """``p`` a relative ``1e-14`` from a cumulative mass ratio is inside the certified margin (``3 e``, about
    ``1e-13`` here): stage 2 must not decide it in float64 and the host's law does; ``1e-9`` away it is decided on
    the lists.  (A margin passed as a float32 argument rounds ``1 - 3e`` to 1 and decides both.)"""
    z, s = _two_levels()
    _check(z, 1.0, seed=9, num_samples=16, top_p=3.0 / s * (1.0 + rel))
    assert paths.host == host


def test_stage_2_takes_no_float_argument(monkeypatch):
    """Triton passes a Python ``float`` argument as float32 (``triton.runtime.jit.mangle_type(1e-13) == "fp32"``):
    the relative error bound ``e ~ 1e-13`` would round ``1 - 3e`` to 1 and certify nothing.  Stage 2 reads it from a
    float64 tensor; no launch of it takes a Python float."""
    from triton.runtime.jit import mangle_type

    assert mangle_type(1e-13) == "fp32"
    seen = []
    real = stage2.direct

    def spy(fn):
        launcher = real(fn)
        return type("Spy", (), {"__getitem__": lambda self, grid: lambda *a, **k: (seen.append(a), launcher[grid](
            *a, **k))[1]})()  # fmt: skip

    monkeypatch.setattr(stage2, "direct", spy)
    z, s = _two_levels()
    flashsampling.sample_from_logits(z, temperature=1.0, seed=1, top_p=0.5, min_p=0.1)
    assert seen and not [x for args in seen for x in args if isinstance(x, float)]
