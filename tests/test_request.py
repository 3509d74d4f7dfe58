"""One preamble for every entry point (flashsampling/_request.py): the same checks, the same temperature policy, the
same finish, and the stage-1 kernel each call's needs allow.

Every entry point -- ``sample``, ``sample_from_logits``, ``sample_grouped`` (+ ``_from_logits``), ``OnlineSampler``
/ ``sample_online``, ``sample_tp`` (+ ``_from_logits``), in a world of one -- is run here on the same rows:

* a temperature tensor with a bad row is found by the kernels' flags at the call's one synchronization, after every
  launch (the flag check runs once, last), and the error names the row and its value; with ``host_checks=False``
  nothing is read and the tokens are in range;
* a number temperature of 0 launches stage 1 without the noise and returns the tokens of the noisy launch on a
  tensor of zeros (a greedy row's score is ``z`` either way);
* the tile policy is asked for what the call needs: log-masses for the grouped, online and factorized calls, none for
  ``sample`` and a pathwise tensor-parallel call with one sample (which therefore may run the Gluon kernel).
"""

from __future__ import annotations

import math

import pytest
import torch

import flashsampling
import flashsampling._request as request_module

B, V, D = 4, 300, 32


def _inputs(device):
    g = torch.Generator().manual_seed(3)
    h = torch.randn(B, D, generator=g).to(device)
    w = torch.randn(V, D, generator=g).to(device)
    return h, w, h @ w.T


#: name -> call(h, w, z, temperature, **kw): every public entry point on the same rows.
ENTRY_POINTS = {
    "sample": lambda h, w, z, t, **kw: flashsampling.sample(h, w, temperature=t, seed=7, num_samples=2, **kw),
    "sample_from_logits": lambda h, w, z, t, **kw: flashsampling.sample_from_logits(z, temperature=t, seed=7,
                                                                                    num_samples=2, **kw),
    "sample_grouped": lambda h, w, z, t, **kw: flashsampling.sample_grouped(h, w, temperature=t, seed=7,
                                                                            num_samples=2, **kw),
    "sample_grouped_from_logits": lambda h, w, z, t, **kw: flashsampling.sample_grouped_from_logits(
        z, temperature=t, seed=7, num_samples=2, group_sizes=[100, 200], **kw),
    "sample_online": lambda h, w, z, t, **kw: flashsampling.sample_online(h, w, chunk_size=128, temperature=t,
                                                                          seed=7, num_samples=2, **kw),
    "OnlineSampler.update_logits": lambda h, w, z, t, **kw: _online_logits(z, t, **kw),
    "sample_tp(pathwise)": lambda h, w, z, t, **kw: flashsampling.sample_tp(h, w, temperature=t, seed=7, **kw),
    "sample_tp(factorized)": lambda h, w, z, t, **kw: flashsampling.sample_tp(h, w, temperature=t, seed=7,
                                                                              combine="factorized", **kw),
    "sample_tp_from_logits": lambda h, w, z, t, **kw: flashsampling.sample_tp_from_logits(z, temperature=t, seed=7,
                                                                                          num_samples=2, **kw),
}  # fmt: skip


def _online_logits(z, t, **kw):
    sampler = flashsampling.OnlineSampler(B, temperature=t, seed=7, num_samples=2, device=z.device, **kw)
    sampler.update_logits(z[:, 200:], start=200)
    sampler.update_logits(z[:, :200], start=0)
    return sampler.result(vocab_size=V).tokens


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_bad_tensor_temperature_is_found_at_the_one_finish(entry, device, monkeypatch):
    """The error names the row and its value, and the flags are read once, after every launch."""
    h, w, z = _inputs(device)
    events = []
    for name in ("launch_fused_stage1", "launch_logits_stage1"):
        real = getattr(request_module, name)
        monkeypatch.setattr(request_module, name,
                            lambda *a, real=real, **k: events.append("launch") or real(*a, **k))  # fmt: skip
    real_raise = request_module.raise_on_kernel_flags
    monkeypatch.setattr(request_module, "raise_on_kernel_flags",
                        lambda *a, **k: events.append("finish") or real_raise(*a, **k))  # fmt: skip
    bad = torch.tensor([1.0, 0.5, math.nan, 1.0], device=device)
    with pytest.raises(ValueError, match=r"temperature\[2\]=nan is invalid"):
        ENTRY_POINTS[entry](h, w, z, bad)
    assert "launch" in events and events.index("finish") == len(events) - 1 == events.count("launch")
    events.clear()
    tokens = ENTRY_POINTS[entry](h, w, z, bad, host_checks=False)
    assert "finish" not in events and int(tokens.min()) >= 0 and int(tokens.max()) < V


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_bad_number_temperature_raises_before_any_work(entry, device, monkeypatch):
    h, w, z = _inputs(device)
    monkeypatch.setattr(request_module, "launch_fused_stage1", lambda *a, **k: pytest.fail("launched"))
    monkeypatch.setattr(request_module, "launch_logits_stage1", lambda *a, **k: pytest.fail("launched"))
    with pytest.raises(ValueError, match="temperature=-1.0 is invalid"):
        ENTRY_POINTS[entry](h, w, z, -1.0)


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_number_zero_temperature_skips_the_noise_with_the_same_tokens(entry, device, monkeypatch):
    h, w, z = _inputs(device)
    seen = []
    for name in ("launch_fused_stage1", "launch_logits_stage1"):
        real = getattr(request_module, name)
        monkeypatch.setattr(request_module, name,
                            lambda *a, real=real, **k: seen.append(k["noise"]) or real(*a, **k))  # fmt: skip
    fast = ENTRY_POINTS[entry](h, w, z, 0.0)
    assert seen and not any(seen)
    seen.clear()
    slow = ENTRY_POINTS[entry](h, w, z, torch.zeros(B, device=device))
    assert seen and all(seen)
    assert torch.equal(fast, slow)


@pytest.mark.parametrize(
    "entry, return_lse",
    [("sample", False), ("sample_grouped", True), ("sample_online", True), ("sample_tp(pathwise)", False),
     ("sample_tp(factorized)", True)],
)  # fmt: skip
def test_the_tile_policy_is_asked_for_what_the_call_needs(entry, return_lse, device, monkeypatch):
    """Log-masses need the Triton kernels; a call without them (one sample) may run the Gluon kernel on sm_90."""
    h, w, z = _inputs(device)
    asked = []
    real = request_module.stage1_tiles
    monkeypatch.setattr(request_module, "stage1_tiles",
                        lambda *a, **k: asked.append(k["return_lse"]) or real(*a, **k))  # fmt: skip
    ENTRY_POINTS[entry](h, w, z, 0.8)
    assert asked and set(asked) == {return_lse}
