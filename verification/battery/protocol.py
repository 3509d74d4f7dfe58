"""The sampler protocol of :func:`verification.check_sampler`: how a user's callable is called and read.

A sampler is a callable ``sampler(logits, num_samples, seed) -> tokens``:

* ``logits``: a float32 ``torch.Tensor`` of shape ``[B, V]`` (rows may differ; ``-inf`` masks a token), on
  the device of the logits given to the checker (the CPU for NumPy input), a fresh copy at every call;
* ``num_samples``: an ``int >= 1``;
* ``seed``: an ``int`` in ``[0, 2**seed_bits)``, ``2**31`` by default (int32-safe: ``numpy.random.seed``, JAX
  keys; ``check_sampler(seed_bits=64)`` for samplers keyed by 64-bit seeds); the same seed must give the same
  tokens, and distinct seeds independent draws;
* ``tokens``: integers of shape ``[B, num_samples]``, a torch tensor, a NumPy array or anything
  ``numpy.asarray`` takes (a JAX array); ``tokens[b, j]`` is draw ``j`` of row ``b``.

A sampler without a seed is allowed: it is called as ``sampler(logits, num_samples)``.  Which form a
callable has is read from its signature: it takes a seed when it has a parameter named ``seed`` (passed by
keyword) or a third positional parameter without a default (passed by position); a callable whose signature
cannot be read (some builtins and extension functions) is called with three positional arguments.  Other
parameters must have defaults: bind the temperature, top-k and the like with ``functools.partial`` or a
closure, since the protocol does not pass them (a partial's bound arguments show in the sampler's name).  A
sampler whose randomness comes as a ``generator``, ``rng``, ``key`` (:data:`SEED_ALIASES`) and no ``seed`` is
refused by name: :func:`verification.adapters.with_seed` builds that object from the seed.  A call that ends
in ``sys.exit`` raises :class:`SamplerError`: a sampler never ends the checker's process.

A call whose result is not an integer array of shape ``[B, num_samples]`` raises ``ValueError`` (shape) or
``TypeError`` (dtype) naming the sampler: it broke the protocol, which no statistic can judge.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from flashsampling.targets._inputs import float_logits

__all__ = [
    "SEED_ALIASES",
    "SEED_LIMIT",
    "SamplerCall",
    "SamplerError",
    "check_tokens",
    "host_tokens",
    "prepare_logits",
    "read_tokens",
    "seed_form",
]

#: Seeds passed to a sampler lie in ``[0, SEED_LIMIT)``: int32-safe, so ``numpy.random.seed``,
#: ``torch.manual_seed`` and ``jax.random.key`` all accept them.
SEED_LIMIT = 2**31


#: Longest repr of a bound argument shown in a sampler's name (longer ones are cut with "...").
_ARG_REPR = 40


def _short(value) -> str:
    """A bound argument as a report shows it: its repr, or ``<dtype (shape)>`` for an array or a tensor."""
    if isinstance(value, (np.ndarray, torch.Tensor)):
        return f"<{str(value.dtype).replace('torch.', '')} {tuple(value.shape)}>"
    text = repr(value)
    return text if len(text) <= _ARG_REPR else text[: _ARG_REPR - 3] + "..."


def _describe(fn) -> str:
    """``module.qualname`` of a callable; ``partial(module.fn, 0.5, temperature=0.7)`` for a
    ``functools.partial``, its bound arguments shown, so two partials of one function have distinct names."""
    if isinstance(fn, functools.partial):
        bound = [_short(a) for a in fn.args] + [f"{k}={_short(v)}" for k, v in fn.keywords.items()]
        return f"partial({', '.join([_describe(fn.func), *bound])})"
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    module = getattr(fn, "__module__", None)
    if name is None:
        return type(fn).__name__
    return f"{module}.{name}" if module and module != "builtins" else str(name)


#: Parameter names that carry randomness other than an integer seed (a ``torch.Generator``, a NumPy
#: ``Generator``, a JAX key): a sampler that takes one and no ``seed`` is refused by name, never called with an
#: int in its place or without it (its randomness would be ignored); :func:`verification.adapters.with_seed`
#: builds the object from the seed.
SEED_ALIASES = ("generator", "gen", "rng", "random_state", "key", "rng_key", "prng_key")


class SamplerError(RuntimeError):
    """A sampler left a call by ``sys.exit`` (``SystemExit``) or another exit that is not an exception: the check
    turns it into this error, so no sampler ends the checker's process (let alone with status 0)."""


def seed_form(fn) -> tuple[bool, bool]:
    """``(takes_seed, by_keyword)`` read from the signature (see the module docstring); ``TypeError`` naming the
    parameter for a sampler whose randomness comes under another name (:data:`SEED_ALIASES`)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return True, False
    params = sig.parameters
    kinds = inspect.Parameter
    if "seed" in params and params["seed"].kind not in (kinds.VAR_POSITIONAL, kinds.VAR_KEYWORD):
        return True, params["seed"].kind != kinds.POSITIONAL_ONLY
    alias = next((p for p in params if p in SEED_ALIASES), None)
    if alias is not None:
        raise TypeError(
            f"sampler {_describe(fn)} takes its randomness as {alias!r}, not as an integer seed: wrap it in "
            f"verification.adapters.with_seed({_describe(fn)}, {alias!r}), which builds the {alias} from the seed, or "
            "rename the parameter seed"
        )
    positional = [p for p in params.values() if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == kinds.VAR_POSITIONAL for p in params.values()):
        return True, False
    if len(positional) >= 3 and positional[2].default is kinds.empty:
        return True, False
    if len(positional) >= 2:
        return False, False
    raise TypeError(
        f"sampler must take (logits, num_samples[, seed]); {_describe(fn)} takes {len(positional)} positional "
        "argument(s)"
    )


@dataclass(frozen=True)
class SamplerCall:
    """A user's callable behind the protocol.

    Attributes
    ----------
    fn : callable
    seeded : bool
        It takes a seed (see the module docstring).
    seed_by_keyword : bool
    name : str
        ``module.qualname`` of the callable, for reports.
    """

    fn: Callable
    seeded: bool
    seed_by_keyword: bool
    name: str

    @classmethod
    def wrap(cls, sampler) -> SamplerCall:
        """Read ``sampler``'s form; ``TypeError`` if it is not callable or takes fewer than two arguments."""
        if not callable(sampler):
            raise TypeError(f"sampler must be callable, got {type(sampler).__name__}")
        seeded, by_keyword = seed_form(sampler)
        return cls(sampler, seeded, by_keyword, _describe(sampler))

    def __call__(self, logits: torch.Tensor, num_samples: int, seed: int | None) -> np.ndarray:
        """Call the sampler on a copy of ``logits`` and return its tokens as int64 ``[B, num_samples]``."""
        return host_tokens(self.tokens(logits, num_samples, seed))

    def tokens(self, logits: torch.Tensor, num_samples: int, seed: int | None) -> torch.Tensor | np.ndarray:
        """Call the sampler on a copy of ``logits``; its tokens checked (:func:`check_tokens`) where they lie: a
        torch tensor stays on its device (a check counts CUDA tokens there), anything else as an int64 array."""
        z = logits.clone()
        try:
            if not self.seeded:
                out = self.fn(z, num_samples)
            elif self.seed_by_keyword:
                out = self.fn(z, num_samples, seed=seed)
            else:
                out = self.fn(z, num_samples, seed)
        except SystemExit as e:  # a sampler never ends the checker's process
            raise SamplerError(f"sampler {self.name} called sys.exit({e.code!r}) during a call with num_samples="
                               f"{num_samples}, seed={seed}") from e  # fmt: skip
        return check_tokens(out, (int(logits.shape[0]), num_samples), self.name)


def check_tokens(out, shape: tuple[int, ...], name: str) -> torch.Tensor | np.ndarray:
    """A sampler's output checked where it lies: a torch tensor of integers of ``shape`` (detached, on its device,
    not copied), or else :func:`read_tokens`'s int64 array; ``TypeError``/``ValueError`` naming the sampler."""
    if not isinstance(out, torch.Tensor):
        return read_tokens(out, shape, name)
    if out.device.type == "meta":
        raise TypeError(f"sampler {name} returned a tensor on the meta device, which holds no tokens")
    if out.dtype == torch.bool or out.dtype.is_floating_point or out.dtype.is_complex:
        raise TypeError(f"sampler {name} must return integer tokens, got dtype={str(out.dtype).replace('torch.', '')}")
    if tuple(out.shape) != shape:
        raise ValueError(f"sampler {name} returned shape {tuple(out.shape)}; the protocol asks for {shape}")
    return out.detach()


def host_tokens(tokens: torch.Tensor | np.ndarray) -> np.ndarray:
    """Checked tokens (:func:`check_tokens`) as a fresh int64 NumPy array on the host."""
    if isinstance(tokens, torch.Tensor):
        return np.array(tokens.cpu().numpy(), dtype=np.int64)
    return tokens


def read_tokens(out, shape: tuple[int, ...], name: str) -> np.ndarray:
    """A sampler's output as a fresh int64 array of ``shape`` (a broadcast view is copied, so repeated
    draws reach the tests, which judge them); ``TypeError``/``ValueError`` naming the sampler otherwise."""
    if isinstance(out, torch.Tensor):
        if out.device.type == "meta":
            raise TypeError(f"sampler {name} returned a tensor on the meta device, which holds no tokens")
        out = out.detach().cpu()
        if out.dtype == torch.bfloat16:
            out = out.float()
        out = out.numpy()
    try:
        arr = np.array(out)
    except (TypeError, ValueError) as e:
        raise TypeError(f"sampler {name} returned {type(out).__name__}, not an array of tokens") from e
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"sampler {name} must return integer tokens, got dtype={arr.dtype}")
    if arr.shape != shape:
        raise ValueError(f"sampler {name} returned shape {arr.shape}; the protocol asks for {shape}")
    return arr.astype(np.int64, copy=False)


def prepare_logits(logits) -> tuple[torch.Tensor, np.ndarray]:
    """``logits`` ``[V]`` or ``[B, V]`` as the sampler receives them (float32 torch ``[B, V]``, on the
    device of a torch input, else the CPU) and their values in float64 (from which targets are computed).

    Raises ``TypeError`` for a non-floating input; ``ValueError`` for another shape, ``V = 0``, NaN or
    ``+inf``, or a row with no finite logit (:func:`flashsampling.targets._inputs.float_logits`).
    """
    if isinstance(logits, torch.Tensor):
        if not logits.dtype.is_floating_point:
            raise TypeError(f"logits must hold floating-point values, got dtype={logits.dtype}")
        t = logits.detach().to(torch.float32)
    else:
        arr = np.asarray(logits)
        if arr.dtype.kind != "f":
            raise TypeError(f"logits must hold floating-point values, got dtype={arr.dtype}")
        t = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32))
    if t.dim() == 1:
        t = t[None, :]
    if t.dim() != 2:
        raise ValueError(f"logits must have shape [V] or [B, V], got shape {tuple(t.shape)}")
    t = t.contiguous()
    z, _ = float_logits(t.cpu(), "logits")
    return t, z
