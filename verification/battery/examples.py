"""Samplers of the protocol that the acceptance of :func:`verification.check_sampler` is measured on.

Five exact ones, written the way their users write them, and twelve with one defect each, as shipped
samplers have had them; every one is a plain callable ``sampler(logits, num_samples, seed)``.

===========================  ======================================================================
sampler                      what it does
===========================  ======================================================================
:func:`inverse_cdf`          float64 inverse CDF, one NumPy ``Generator`` per call: exact, fast
:func:`numpy_choice`         ``numpy.random.Generator.choice`` on the float64 softmax: exact
:func:`torch_categorical`    ``torch.distributions.Categorical(logits=...).sample``: exact at these
                             vocabularies (its float32 CDF starves tokens below ``2**-24`` of the mass)
:func:`fused_kernel`         ``flashsampling.sample_from_logits``: exact (interpreted on the CPU)
:func:`flashsampling_twin`   the fused kernel's NumPy twin (bit-exact to it, ``flashsampling.twin``), vectorized
                             over draws: exact, any 64-bit seed
:func:`multinomial_float32`  ``torch.multinomial`` on float32 ``softmax``: its float32 running sum stops
                             growing once the tail's entries fall below half an ulp of it
:func:`gumbel_float16`       Gumbel-max with float16 uniforms: noise capped near 7.6 nats, ties broken
                             toward the lower index
:func:`temperature_error`    an exact sampler at ``1.03 T`` (a 3 % temperature error)
:func:`shifted_seed_stream`  uniform number ``seed + j`` for draw ``j``: seed ``s + 1``'s draw ``j`` is
                             seed ``s``'s draw ``j + 1``
:func:`shared_row_noise`     one uniform per draw shared by every row of the batch
:func:`seed_mod_2_20`        :func:`inverse_cdf` keyed by ``seed mod 2**20``: seeds ``2**20`` apart collide
:func:`seed_mod_2_32`        keyed by ``seed mod 2**32`` (a 64-bit seed truncated to 32 bits)
:func:`antithetic_lag_64`    draw ``j + 64`` uses ``1 - u`` of draw ``j`` (blocks of 128): antithetic at lag 64
:func:`mirrored_halves`      the second half of a call is the first read backwards (draw ``n - 1 - i`` is draw
                             ``i``)
:func:`float16_logits`       :func:`inverse_cdf` on the logits rounded to float16 (a half-precision LM head)
:func:`bfloat16_logits`      :func:`inverse_cdf` on the logits rounded to bfloat16
:func:`rows_9_apart_share_noise`  row ``b`` and row ``b + 9`` read the same uniforms (noise keyed by ``b mod 9``, a
                             batch slot reused)
===========================  ======================================================================
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = [
    "antithetic_lag_64",
    "bfloat16_logits",
    "float16_logits",
    "flashsampling_twin",
    "fused_kernel",
    "gumbel_float16",
    "inverse_cdf",
    "mirrored_halves",
    "multinomial_float32",
    "numpy_choice",
    "rows_9_apart_share_noise",
    "seed_mod_2_20",
    "seed_mod_2_32",
    "shared_row_noise",
    "shifted_seed_stream",
    "temperature_error",
    "torch_categorical",
]

#: Uniforms per chunk of the Gumbel-max sampler (``B * chunk * V`` float32 values at most).
_CHUNK_ELEMENTS = 1 << 22
#: Noise values per chunk of the twin sampler (``chunk * V`` at most).
_TWIN_ELEMENTS = 1 << 16


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


def flashsampling_twin(logits: torch.Tensor, num_samples: int, seed: int) -> np.ndarray:
    """The fused kernel's tokens at temperature 1, from its NumPy twin: row ``b``, draw ``j`` is
    ``argmax_i z_i + G(seed, b, i, j)`` with the kernel's Philox noise and tie keys (as
    ``flashsampling.twin.sample_twin(logits, seed=seed, num_samples=num_samples)``, vectorized over draws)."""
    from flashsampling.noise import STREAM_TOKEN, token_noise_np
    from flashsampling.twin import select

    z = logits.float().cpu().numpy()
    b, v = z.shape
    cols = np.arange(v, dtype=np.uint32)[None, :]
    out = np.empty((b, num_samples), dtype=np.int64)
    step = max(1, _TWIN_ELEMENTS // v)
    for r in range(b):
        for j in range(0, num_samples, step):
            m = min(step, num_samples - j)
            draws = np.arange(j, j + m, dtype=np.uint32)[:, None]
            g, key = token_noise_np(seed, np.uint32(r), cols, draws, STREAM_TOKEN, lazy_keys=True)
            with np.errstate(over="ignore", invalid="ignore"):
                out[r, j : j + m] = select((z[r][None, :] + g).astype(np.float32), key)
    return out


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


def seed_mod_2_20(logits: torch.Tensor, num_samples: int, seed: int) -> np.ndarray:
    """:func:`inverse_cdf` keyed by ``seed mod 2**20``: seeds that differ only above bit 19 give equal streams."""
    return inverse_cdf(logits, num_samples, seed % (1 << 20))


def seed_mod_2_32(logits: torch.Tensor, num_samples: int, seed: int) -> np.ndarray:
    """:func:`inverse_cdf` keyed by ``seed mod 2**32``: a 64-bit seed truncated to 32 bits (a ``uint32`` cast)."""
    return inverse_cdf(logits, num_samples, seed % (1 << 32))


def antithetic_lag_64(logits: torch.Tensor, num_samples: int, seed: int) -> np.ndarray:
    """Inverse CDF whose draw ``j + 64`` uses ``1 - u_j`` for ``j mod 128 < 64`` (antithetic variates, a variance
    reduction that is no sampler): every draw alone is exact, draws 64 apart are strongly dependent."""
    rng = np.random.default_rng(seed)
    out = []
    for p in _probs(logits):
        u = rng.random(num_samples)
        j = np.arange(num_samples)
        late = (j % 128) >= 64
        u[late] = 1.0 - u[j[late] - 64]
        out.append(_inverse(p, u))
    return np.stack(out)


def mirrored_halves(logits: torch.Tensor, num_samples: int, seed: int) -> np.ndarray:
    """Inverse CDF whose second half of a call reads the first half's uniforms backwards: draw ``n - 1 - i`` is
    draw ``i`` (a counter that runs down from the middle)."""
    rng = np.random.default_rng(seed)
    h = num_samples // 2
    out = []
    for p in _probs(logits):
        u = rng.random(num_samples)
        u[num_samples - h :] = u[:h][::-1]
        out.append(_inverse(p, u))
    return np.stack(out)


def float16_logits(logits: torch.Tensor, num_samples: int, seed: int) -> np.ndarray:
    """:func:`inverse_cdf` on ``logits.half()``: the law is ``softmax(fl16(z))``, off by ``|z| 2**-11`` per logit."""
    return inverse_cdf(logits.half().float(), num_samples, seed)


def bfloat16_logits(logits: torch.Tensor, num_samples: int, seed: int) -> np.ndarray:
    """:func:`inverse_cdf` on ``logits.bfloat16()``: the law is ``softmax(bf16(z))``, off by ``|z| 2**-8`` per logit."""
    return inverse_cdf(logits.bfloat16().float(), num_samples, seed)


def rows_9_apart_share_noise(logits: torch.Tensor, num_samples: int, seed: int) -> np.ndarray:
    """Inverse CDF whose row ``b`` reads the uniforms of slot ``b mod 9``: rows 9 apart share their noise, each row
    alone exact (a noise buffer of 9 batch slots reused)."""
    probs = _probs(logits)
    slots = np.random.default_rng(seed).random((min(9, len(probs)), num_samples))
    return np.stack([_inverse(p, slots[b % 9]) for b, p in enumerate(probs)])
