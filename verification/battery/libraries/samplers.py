"""The audit's softmax samplers (torch, NumPy, JAX, FlashInfer) and the :class:`AuditSampler` record.

=============================  ===============================================================
name                           call
=============================  ===============================================================
``torch.multinomial``          ``torch.multinomial(softmax(z / T), n, replacement=True)``
``torch.multinomial-1``        ``torch.multinomial(probs, 1)`` per row of a batch (PyTorch's
                               exponential-race fast path)
``torch.Categorical``          ``torch.distributions.Categorical(logits=z / T).sample((n,))``
``vllm-race-fp32``             ``probs.div(torch.empty_like(probs).exponential_()).argmax(-1)``
                               with float32 probabilities (vLLM's random sampler)
``vllm-race-fp16``             the same race with float16 probabilities and exponentials
``numpy.choice``               ``numpy.random.Generator.choice(V, n, p=softmax(z / T))``, float64
``jax.categorical``            ``jax.random.categorical(key, z / T)`` (when ``import jax`` works)
``jax.categorical-high``       the same with ``mode="high"`` (twice the uniform bits)
``flashinfer``                 ``flashinfer.sampling.sampling_from_logits`` (CUDA and flashinfer)
=============================  ===============================================================

Torch samplers run on CUDA when it is available, else on the CPU.  Every sampler receives the
case's float32 logits (or the probabilities computed from them the way its users do), and the
target is the float64 softmax of those float32 logits.
"""

from __future__ import annotations

import importlib
import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flashsampling.reference import softmax

from ..cases import Case
from .cases import AUDIT_CASES

__all__ = ["SOFTMAX_SAMPLERS", "AuditSampler"]

#: Vocabulary entries per batched call of the race samplers (64 MB of float32).
_BATCH_ELEMENTS = 1 << 24


@dataclass(frozen=True)
class AuditSampler:
    """A sampler written elsewhere.

    Attributes
    ----------
    name : str
    call : str
        The call audited, as its users write it.
    draw : callable
        ``(case, n, seed) -> int64 (n,)``.
    available : callable
        ``() -> None`` when the sampler can run here, else the reason it cannot.
    origin : callable
        ``() -> str``: library, version and device.
    mechanism : dict[str, str]
        The mechanism of the failures this audit found, by device type (``"cpu"``, ``"cuda"``, or
        ``"any"``); shown only when the sampler fails.
    per_draw_vector : bool
        Each draw costs a vector over the vocabulary (a race); such samplers run after the cheap ones
        and inherit the time those leave unused.
    cases : dict[str, float]
        The cases it draws from (names in :func:`verification.battery.libraries.cases.audit_cases` or
        :func:`~verification.battery.libraries.cases.spec_cases`) and their shares of its time; the first is the
        one whose detectable total variation the row reports.
    """

    name: str
    call: str
    draw: Callable[[Any, int, int], np.ndarray]
    available: Callable[[], str | None]
    origin: Callable[[], str]
    mechanism: dict[str, str] = field(default_factory=dict)
    per_draw_vector: bool = True
    cases: dict[str, float] = field(default_factory=lambda: dict(AUDIT_CASES))


def _torch_device():
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _torch_origin() -> str:
    import torch

    dev = _torch_device()
    name = torch.cuda.get_device_name(0) if dev.type == "cuda" else platform.processor() or "cpu"
    return f"torch {torch.__version__} on {dev.type} ({name})"


def _torch_probs(case: Case, dtype=None):
    import torch

    z = torch.tensor(case.logits, dtype=torch.float32, device=_torch_device())
    p = torch.softmax(z / case.temperature, dim=-1)
    return p if dtype is None else p.to(dtype)


def _batched(n: int, v: int, draw_rows: Callable[[int], Any]) -> np.ndarray:
    out = []
    left = n
    rows = max(1, min(n, _BATCH_ELEMENTS // v))
    while left > 0:
        b = min(rows, left)
        out.append(draw_rows(b).reshape(-1).cpu().numpy())
        left -= b
    return np.concatenate(out).astype(np.int64)


def _torch_multinomial(case: Case, n: int, seed: int) -> np.ndarray:
    import torch

    g = torch.Generator(device=_torch_device()).manual_seed(seed)
    return torch.multinomial(_torch_probs(case), n, replacement=True, generator=g).cpu().numpy().astype(np.int64)


def _torch_multinomial_one(case: Case, n: int, seed: int) -> np.ndarray:
    import torch

    g = torch.Generator(device=_torch_device()).manual_seed(seed)
    p = _torch_probs(case)
    return _batched(n, p.numel(), lambda b: torch.multinomial(p.expand(b, -1).contiguous(), 1, generator=g))


def _race(dtype) -> Callable[[Case, int, int], np.ndarray]:
    def draw(case: Case, n: int, seed: int) -> np.ndarray:
        import torch

        g = torch.Generator(device=_torch_device()).manual_seed(seed)
        p = _torch_probs(case, getattr(torch, dtype))

        def rows(b: int):
            probs = p.expand(b, -1)
            q = torch.empty_like(probs)
            q.exponential_(generator=g)
            return probs.div(q).argmax(dim=-1)

        return _batched(n, p.numel(), rows)

    return draw


def _torch_categorical(case: Case, n: int, seed: int) -> np.ndarray:
    import torch

    z = torch.tensor(case.logits, dtype=torch.float32, device=_torch_device())
    with torch.random.fork_rng(devices=[z.device] if z.is_cuda else []):
        torch.manual_seed(seed)  # Distribution.sample takes no generator: it draws from the default one
        dist = torch.distributions.Categorical(logits=z / case.temperature)
        return dist.sample((n,)).cpu().numpy().astype(np.int64)


def _numpy_choice(case: Case, n: int, seed: int) -> np.ndarray:
    p = softmax(case.logits, case.temperature)
    return np.random.default_rng(seed).choice(p.size, size=n, p=p).astype(np.int64)


def _jax_categorical(case: Case, n: int, seed: int, mode: str | None = None) -> np.ndarray:
    """``jax.random.categorical`` in batches; ``mode`` is its Gumbel resolution (``None``: JAX's default, "low")."""
    import jax
    import jax.numpy as jnp

    z = jnp.asarray((case.logits / case.temperature).astype(np.float32))
    key = jax.random.PRNGKey(seed)
    out = []
    rows = max(1, min(n, _BATCH_ELEMENTS // z.size))
    for i, s0 in enumerate(range(0, n, rows)):
        b = min(rows, n - s0)
        out.append(np.asarray(jax.random.categorical(jax.random.fold_in(key, i), z, shape=(b,), mode=mode)))
    return np.concatenate(out).astype(np.int64)


def _flashinfer(case: Case, n: int, seed: int) -> np.ndarray:
    import flashinfer
    import torch

    z = torch.tensor(case.logits / case.temperature, dtype=torch.float32, device="cuda")
    g = torch.Generator(device="cuda").manual_seed(seed)
    return _batched(n, z.numel(), lambda b: flashinfer.sampling.sampling_from_logits(z.expand(b, -1).contiguous(),
                                                                                      generator=g))  # fmt: skip


def _has(module: str) -> str | None:
    try:
        importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - any import failure means "not available here"
        return f"import {module} failed: {type(e).__name__}: {e}".splitlines()[0][:160]
    return None


def _flashinfer_available() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch not installed"
    if not torch.cuda.is_available():
        return "no CUDA device"
    return _has("flashinfer")


def _version(module: str) -> Callable[[], str]:
    def origin() -> str:
        mod = importlib.import_module(module)
        extra = ""
        if module == "jax":
            extra = f" on {mod.default_backend()}"
        return f"{module} {getattr(mod, '__version__', '?')}{extra}"

    return origin


SOFTMAX_SAMPLERS: tuple[AuditSampler, ...] = (
    AuditSampler(
        "torch.multinomial",
        "torch.multinomial(torch.softmax(z / T, -1), n, replacement=True)",
        _torch_multinomial,
        lambda: _has("torch"),
        _torch_origin,
        {
            "cpu": "the CPU kernel (aten/src/ATen/native/cpu/MultinomialKernel.cpp) accumulates the CDF as a "
            "float32 running sum; once the sum nears 1 its float32 step (6e-8) exceeds a tail token's "
            "probability (2e-9 at 20 nats below the top), the addition rounds away, and those tokens get "
            "zero-width CDF intervals: never drawn",
        },
        per_draw_vector=False,
    ),
    AuditSampler(
        "torch.Categorical",
        "torch.distributions.Categorical(logits=z / T).sample((n,))",
        _torch_categorical,
        lambda: _has("torch"),
        _torch_origin,
        {
            "cpu": "Categorical.sample is torch.multinomial(probs, n, replacement=True) (torch/distributions/"
            "categorical.py), so it inherits the CPU kernel's float32 running CDF: tail tokens 20 nats below "
            "the top add 2e-9 to a sum near 1 whose float32 step is 6e-8 and get zero-width intervals",
        },
        per_draw_vector=False,
    ),
    AuditSampler(
        "torch.multinomial-1",
        "torch.multinomial(probs, 1) per row (PyTorch's exponential-race fast path)",
        _torch_multinomial_one,
        lambda: _has("torch"),
        _torch_origin,
        {
            "cuda": "the num_samples=1 path is the race probs / Exp(1) (as vllm-race-fp32); on CUDA PyTorch "
            "sets log(u) = -eps/2 for u >= 1 - eps/2 (aten/src/ATen/core/TransformationHelper.h), so E >= "
            "2**-24 and p/E <= p 2**24: tokens more than ~16.6 nats below the top cannot win",
        },
    ),
    AuditSampler(
        "vllm-race-fp32",
        "q = torch.empty_like(probs).exponential_(); probs.div(q).argmax(-1), float32 probs",
        _race("float32"),
        lambda: _has("torch"),
        _torch_origin,
        {
            "cuda": "on CUDA PyTorch's exponential sets log(u) = -eps/2 for u >= 1 - eps/2 "
            "(aten/src/ATen/core/TransformationHelper.h): E >= 2**-24, p/E <= p 2**24, so tokens more than "
            "~16.6 nats below the top cannot win (fully starved at 20 nats, partly at 17)",
        },
    ),
    AuditSampler(
        "vllm-race-fp16",
        "the same race with probs.half() and a float16 exponential_()",
        _race("float16"),
        lambda: _has("torch"),
        _torch_origin,
        {
            "cpu": "float16 exponentials are exactly 0 about once in 2**25 (rounding of E < 2**-25): 0/0 = NaN, "
            "which argmax ranks first, so a masked token is drawn (about once per 2**25 / #masked draws); "
            "tokens whose float16 probability flushes to 0 (below 3e-8: the tail 20 nats down) are drawn "
            "only that way, far too often",
            "cuda": "float16 probabilities sit on the subnormal grid 2**-24 = 6e-8: a tail token of 4.1e-8 "
            "rounds up to 6e-8 (+44%, the 17-nat tail over-drawn) and one of 2e-9 to 0 (the 20-nat tail never "
            "drawn); CUDA's exponential never returns 0, so no NaN",
        },
    ),
    AuditSampler(
        "numpy.choice",
        "numpy.random.default_rng(seed).choice(V, n, p=softmax64(z / T))",
        _numpy_choice,
        lambda: None,
        lambda: f"numpy {np.__version__} on cpu",
        per_draw_vector=False,
    ),
    AuditSampler(
        "jax.categorical",
        "jax.random.categorical(key, z / T, shape=(n,))",
        _jax_categorical,
        lambda: _has("jax"),
        _version("jax"),
        {
            "any": "Gumbel noise -log(-log(u)) from float32 uniforms u in [tiny, 1) (jax/_src/random.py, "
            "_gumbel, default mode): the largest noise is -log(-log(1 - 2**-24)) = 16.6 nats, so tokens "
            "further below the top are starved",
        },
    ),
    AuditSampler(
        "jax.categorical-high",
        "jax.random.categorical(key, z / T, shape=(n,), mode='high')",
        lambda case, n, seed: _jax_categorical(case, n, seed, mode="high"),
        lambda: _has("jax"),
        _version("jax"),
    ),
    AuditSampler(
        "flashinfer",
        "flashinfer.sampling.sampling_from_logits(logits, generator=g)",
        _flashinfer,
        _flashinfer_available,
        _version("flashinfer"),
    ),
)


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------
