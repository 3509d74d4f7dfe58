"""verification.adapters: NumPy, torch-generator, JAX and per-request speculative samplers reach the protocol
with their seed form intact, and check_sampler passes them (seeds: ``budget("verification.check.exact")``)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

from verification import adapters, check_sampler
from verification.battery.aims import speculative
from verification.battery.protocol import SamplerCall
from verification.planning.budget import budget

EXACT = budget("verification.check.exact")
Z = np.random.default_rng(9).normal(0, 1, (2, 12)).astype(np.float32)


def _p(z: np.ndarray) -> np.ndarray:
    w = np.exp(z - z.max(axis=1, keepdims=True))
    return w / w.sum(axis=1, keepdims=True)


def numpy_sampler(logits, num_samples, seed):
    assert isinstance(logits, np.ndarray) and logits.dtype == np.float32
    rng = np.random.default_rng(seed)
    return np.stack([rng.choice(r.size, num_samples, p=r) for r in _p(logits.astype(np.float64))])


def test_from_numpy_keeps_the_seed_form_and_passes():
    wrapped = adapters.from_numpy(numpy_sampler)
    assert list(inspect.signature(wrapped).parameters) == ["logits", "num_samples", "seed"]
    assert SamplerCall.wrap(wrapped).name.endswith("from_numpy(numpy_sampler)")
    r = check_sampler(wrapped, Z, tv=0.2, seed=EXACT.seed + 30)
    assert r.passed and "from_numpy(numpy_sampler)" in r.sampler

    rng = np.random.default_rng(EXACT.seed + 31)
    seedless = adapters.from_numpy(lambda logits, n: np.stack([rng.choice(r.size, n, p=r) for r in _p(logits)]))
    assert not SamplerCall.wrap(seedless).seeded
    assert check_sampler(seedless, Z, tv=0.3).skipped["seeds"] == "the sampler takes no seed"


def test_from_torch_passes_a_seeded_generator():
    def with_generator(logits, num_samples, generator):
        assert isinstance(generator, torch.Generator)
        return torch.multinomial(torch.softmax(logits, -1), num_samples, replacement=True, generator=generator)

    r = check_sampler(adapters.from_torch(with_generator), Z, tv=0.2, seed=EXACT.seed + 32)
    assert r.passed and r.properties[0].holds is True


def test_jax_categorical_passes_where_jax_is_installed():
    pytest.importorskip("jax")
    r = check_sampler(adapters.jax_categorical(), Z, tv=0.2, seed=EXACT.seed + 33)
    assert r.passed and r.properties[0].holds is True


def test_speculative_rows_adapts_a_per_request_sampler():
    rng0 = np.random.default_rng(10)
    q = rng0.dirichlet(np.ones(6), size=(1, 1))
    logits = rng0.normal(0, 1, (1, 2, 6))

    def per_request(draft_tokens, draft_probs, target_probs, seed):
        x = draft_tokens.numpy()[:, 0]
        qq, pp = draft_probs.double().numpy()[:, 0], target_probs.double().numpy()
        rng = np.random.default_rng(seed)
        rows = np.arange(x.size)
        accept = rng.random(x.size) * qq[rows, x] < pp[rows, 0, x]
        out = np.stack([x, np.full(x.size, -1)], axis=1)
        for r in np.flatnonzero(accept):  # bonus token after an acceptance
            out[r, 1] = rng.choice(6, p=pp[r, 1] / pp[r, 1].sum())
        for r in np.flatnonzero(~accept):  # replacement from the residual
            res = np.maximum(pp[r, 0] - qq[r], 0)
            out[r, 0] = rng.choice(6, p=res / res.sum())
        return out

    r = check_sampler(adapters.speculative_rows(per_request), logits, target=speculative(q), tv=0.15,
                      seed=EXACT.seed + 34)  # fmt: skip
    assert r.passed, r


def test_adapters_refuse_what_is_not_callable():
    for make in (adapters.from_numpy, adapters.from_torch, adapters.from_jax, adapters.speculative_rows):
        with pytest.raises(TypeError, match="callable"):
            make(3)
    with pytest.raises(ValueError, match="temperature"):
        adapters.jax_categorical(0.0)
