"""Float64 reference: the target distribution and exact samplers from it (NumPy only).

The target
----------
Every test in this project compares a sampler against one distribution, defined here:

    p = softmax(z / T),   z = h @ W.T  computed in float64

where ``h`` and ``W`` are the inputs *exactly as the kernel receives them* (bf16, fp16 or fp32
values, converted to float64 without rounding).  For :func:`flashsampling.sample_from_logits`,
``z`` is the given logits tensor converted to float64.  ``-inf`` logits have probability 0;
temperature 0 means the point mass on the argmax (ties shared uniformly).  The kernel computes
``z`` in float32 (``fp32_logit_error_bound`` bounds the difference); the proofs in
``proofs/finite_precision.md`` bound what that and the noise's float32 arithmetic change.

Truncated and speculative targets
---------------------------------
The laws of top-k, top-p and min-p sampling, their compositions in the orders serving stacks use, and
the accept/reject step of speculative decoding live in :mod:`flashsampling.targets` (one module per
family, with their own argument checks); ``docs/targets.md`` gives their definitions and conventions.
"""

from __future__ import annotations

import numpy as np

from .noise import STREAM_TOKEN, token_noise_np


def _as_float64(x) -> np.ndarray:
    try:
        import torch

        if isinstance(x, torch.Tensor):
            return x.detach().to("cpu", torch.float64).numpy()
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    return np.asarray(x, dtype=np.float64)


def target_logits(hidden, weight) -> np.ndarray:
    """Float64 logits ``h @ W.T`` of the inputs exactly as given (bf16/fp16/fp32 values are exact in float64).

    Parameters
    ----------
    hidden : array or tensor, shape (B, D)
    weight : array or tensor, shape (V, D)

    Returns
    -------
    numpy.ndarray, float64, shape (B, V)
    """
    return _as_float64(hidden) @ _as_float64(weight).T


def fp32_logit_error_bound(hidden, weight) -> np.ndarray:
    """Bound on ``|z_fp32 - z_float64|`` per logit for any fp32 accumulation order.

    Standard bound (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., eq. 3.5):
    ``|fl(x.y) - x.y| <= gamma_D * sum_k |x_k y_k|`` with ``gamma_D = D u / (1 - D u)``,
    ``u = 2**-24``.  Products of bf16/fp16 values are exact in fp32, so this covers them too.

    Returns
    -------
    numpy.ndarray, float64, shape (B, V)
    """
    h = np.abs(_as_float64(hidden))
    w = np.abs(_as_float64(weight))
    d = h.shape[1]
    u = 2.0**-24
    gamma = d * u / (1.0 - d * u)
    return gamma * (h @ w.T) + np.finfo(np.float32).tiny


def softmax(logits, temperature=1.0) -> np.ndarray:
    """Float64 ``softmax(logits / T)`` along the last axis, ``-inf`` entries get probability 0.

    ``T`` is a scalar or one value per row; ``T = 0`` gives the uniform distribution over the
    row's maxima (greedy).  A row with no finite logit, a NaN or ``+inf`` logit, or a negative or
    NaN temperature raises ``ValueError``.
    """
    z = np.atleast_2d(_as_float64(logits))
    if np.isnan(z).any() or np.isposinf(z).any():
        raise ValueError("logits must not contain NaN or +inf")
    if (~np.isfinite(z)).all(axis=-1).any():
        raise ValueError("logits: a row has no finite logit")
    t = np.broadcast_to(np.asarray(temperature, dtype=np.float64), z.shape[:-1]).reshape(-1, 1)
    if np.isnan(t).any() or (t < 0).any() or np.isinf(t).any():
        raise ValueError(f"temperature must be finite and >= 0, got {temperature!r}")
    m = z.max(axis=-1, keepdims=True)
    greedy = t == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.where(greedy, np.where(z == m, 0.0, -np.inf), (z - m) / np.where(greedy, 1.0, t))
    e = np.exp(scaled)
    p = e / e.sum(axis=-1, keepdims=True)
    return p.reshape(np.shape(_as_float64(logits))) if np.ndim(logits) == 1 else p


def log_softmax(logits, temperature=1.0) -> np.ndarray:
    """Float64 ``log_softmax(logits / T)``; ``-inf`` where the probability is 0."""
    with np.errstate(divide="ignore"):
        return np.log(softmax(logits, temperature))


def logsumexp(logits, temperature=1.0) -> np.ndarray:
    """Float64 ``log sum_i exp(z_i / T)`` per row (``T > 0``)."""
    z = np.atleast_2d(_as_float64(logits))
    t = np.broadcast_to(np.asarray(temperature, dtype=np.float64), z.shape[:-1]).reshape(-1, 1)
    s = z / t
    m = s.max(axis=-1, keepdims=True)
    return (m + np.log(np.exp(s - m).sum(axis=-1, keepdims=True)))[:, 0]


def sample_inverse_cdf(probs, num_samples: int, rng: np.random.Generator) -> np.ndarray:
    """Exact categorical draws by inverse CDF: ``i = #{k : cumsum(p)_k <= U}``, U ~ Uniform[0, 1).

    ``probs`` has shape (V,) or (B, V) and must sum to 1 per row (it is renormalised by the last
    cumulative sum, so float64 rounding never sends a draw out of range).  Returns int64 of shape
    (num_samples,) or (B, num_samples).
    """
    p = np.atleast_2d(np.asarray(probs, dtype=np.float64))
    cdf = np.cumsum(p, axis=-1)
    cdf /= cdf[:, -1:]
    u = rng.random((p.shape[0], num_samples))
    out = np.empty((p.shape[0], num_samples), dtype=np.int64)
    for b in range(p.shape[0]):
        out[b] = np.searchsorted(cdf[b], u[b], side="right")
    # A zero-probability tail after the last positive entry can never be chosen:
    np.minimum(out, p.shape[1] - 1, out=out)
    return out[0] if np.ndim(probs) == 1 else out


def sample_gumbel_max(logits, num_samples: int, rng: np.random.Generator, temperature=1.0) -> np.ndarray:
    """Gumbel-max in float64: ``argmax_i (z_i / T + G_i)``, G_i iid Gumbel(0, 1) from ``rng``."""
    z = np.atleast_2d(_as_float64(logits))
    b, v = z.shape
    out = np.empty((b, num_samples), dtype=np.int64)
    for s in range(num_samples):
        g = -np.log(rng.standard_exponential((b, v)))
        out[:, s] = np.argmax(z / temperature + g, axis=-1)
    return out[0] if np.ndim(logits) == 1 else out


def perturbed_scores_twin(logits32, inv_temperature32, seed: int, rows, sample: int):
    """The kernel's float32 scores ``z * (1/T) + G`` and tie-break keys, from the NumPy twin.

    ``logits32`` is float32 of shape (R, V) holding the rows ``rows`` of the batch;
    ``inv_temperature32`` float32 of shape (R,) (0 marks a greedy row: the score is ``z``).
    """
    z = np.asarray(logits32, dtype=np.float32)
    r, v = z.shape
    g, key = token_noise_np(
        seed, np.asarray(rows, dtype=np.uint32)[:, None], np.arange(v, dtype=np.uint32)[None, :], sample, STREAM_TOKEN
    )
    inv = np.asarray(inv_temperature32, dtype=np.float32)[:, None]
    with np.errstate(over="ignore", invalid="ignore"):
        s = np.where(inv == 0, z, z * inv + g).astype(np.float32)
    return s, key
