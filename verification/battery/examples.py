"""Samplers of the protocol that the acceptance of :func:`verification.check_sampler` is measured on.

Three exact ones, written the way their users write them, and five with one defect each, as shipped
samplers have had them; every one is a plain callable ``sampler(logits, num_samples, seed)``.

===========================  ======================================================================
sampler                      what it does
===========================  ======================================================================
:func:`inverse_cdf`          float64 inverse CDF, one NumPy ``Generator`` per call: exact, fast
:func:`numpy_choice`         ``numpy.random.Generator.choice`` on the float64 softmax: exact
:func:`torch_categorical`    ``torch.distributions.Categorical(logits=...).sample``: exact at these
                             vocabularies (its float32 CDF starves tokens below ``2**-24`` of the mass)
:func:`fused_kernel`         ``flashsampling.sample_from_logits``: exact (interpreted on the CPU)
:func:`multinomial_float32`  ``torch.multinomial`` on float32 ``softmax``: its float32 running sum stops
                             growing once the tail's entries fall below half an ulp of it
:func:`gumbel_float16`       Gumbel-max with float16 uniforms: noise capped near 7.6 nats, ties broken
                             toward the lower index
:func:`temperature_error`    an exact sampler at ``1.03 T`` (a 3 % temperature error)
:func:`shifted_seed_stream`  uniform number ``seed + j`` for draw ``j``: seed ``s + 1``'s draw ``j`` is
                             seed ``s``'s draw ``j + 1``
:func:`shared_row_noise`     one uniform per draw shared by every row of the batch
===========================  ======================================================================
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = [
    "fused_kernel",
    "gumbel_float16",
    "inverse_cdf",
    "multinomial_float32",
    "numpy_choice",
    "shared_row_noise",
    "shifted_seed_stream",
    "temperature_error",
    "torch_categorical",
]

#: Uniforms per chunk of the Gumbel-max sampler (``B * chunk * V`` float32 values at most).
_CHUNK_ELEMENTS = 1 << 22


def _probs(logits: torch.Tensor, temperature: float = 1.0) -> np.ndarray:
    z = logits.double().cpu().numpy() / temperature
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def _inverse(p: np.ndarray, u: np.ndarray) -> np.ndarray:
    c = np.cumsum(p)
    return np.minimum(np.searchsorted(c, u * c[-1], side="right"), p.size - 1)


def inverse_cdf(logits: torch.Tensor, num_samples: int, seed: int) -> np.ndarray:
    """Exact: float64 inverse CDF of ``softmax(logits)``, uniforms from ``numpy.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    return np.stack([_inverse(p, rng.random(num_samples)) for p in _probs(logits)])


def numpy_choice(logits: torch.Tensor, num_samples: int, seed: int) -> np.ndarray:
    """Exact: ``numpy.random.default_rng(seed).choice(V, num_samples, p=softmax(row))`` per row."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.choice(p.size, num_samples, p=p) for p in _probs(logits)])


def torch_categorical(logits: torch.Tensor, num_samples: int, seed: int) -> torch.Tensor:
    """``torch.manual_seed(seed)``, then ``Categorical(logits=logits).sample((num_samples,)).T``."""
    torch.manual_seed(seed)
    return torch.distributions.Categorical(logits=logits).sample((num_samples,)).T


def fused_kernel(logits: torch.Tensor, num_samples: int, seed: int) -> torch.Tensor:
    """``flashsampling.sample_from_logits(logits, temperature=1.0, seed=seed, num_samples=num_samples)``."""
    import flashsampling

    return flashsampling.sample_from_logits(logits, temperature=1.0, seed=seed, num_samples=num_samples)


def multinomial_float32(logits: torch.Tensor, num_samples: int, seed: int) -> torch.Tensor:
    """``torch.multinomial(torch.softmax(logits, -1), num_samples, replacement=True)`` in float32."""
    g = torch.Generator(device=logits.device).manual_seed(seed)
    return torch.multinomial(torch.softmax(logits, dim=-1), num_samples, replacement=True, generator=g)


def gumbel_float16(logits: torch.Tensor, num_samples: int, seed: int) -> torch.Tensor:
    """``argmax(logits - log(-log(u)))`` with ``u`` rounded to float16 (drawn in chunks of draws)."""
    g = torch.Generator().manual_seed(seed)
    b, v = logits.shape
    step = max(1, _CHUNK_ELEMENTS // (b * v))
    out = []
    for j in range(0, num_samples, step):
        m = min(step, num_samples - j)
        u = torch.rand(b, m, v, generator=g).half().float()
        out.append((logits[:, None, :].float() - torch.log(-torch.log(u))).argmax(dim=-1))
    return torch.cat(out, dim=1)


def temperature_error(logits: torch.Tensor, num_samples: int, seed: int) -> np.ndarray:
    """An exact inverse-CDF sampler of ``softmax(logits / 1.03)``: a 3 % temperature error."""
    rng = np.random.default_rng(seed)
    return np.stack([_inverse(p, rng.random(num_samples)) for p in _probs(logits, 1.03)])


def shifted_seed_stream(logits: torch.Tensor, num_samples: int, seed: int) -> np.ndarray:
    """Inverse CDF on uniform number ``seed + j`` of a per-row Philox stream: streams of adjacent seeds
    overlap, shifted by one draw (the counter is advanced by the seed instead of keyed by it)."""
    out = []
    for b, p in enumerate(_probs(logits)):
        bits = np.random.Philox(key=0x5EED + b)
        bits.advance(seed // 4)  # one Philox counter step is four 64-bit outputs: four uniforms
        u = np.random.Generator(bits).random(num_samples + 4)[seed % 4 : seed % 4 + num_samples]
        out.append(_inverse(p, u))
    return np.stack(out)


def shared_row_noise(logits: torch.Tensor, num_samples: int, seed: int) -> np.ndarray:
    """Inverse CDF with one uniform per draw shared by every row (the noise is not keyed by the row)."""
    u = np.random.default_rng(seed).random(num_samples)
    return np.stack([_inverse(p, u) for p in _probs(logits)])
