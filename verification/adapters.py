"""Adapters from common sampler shapes to the protocol of :func:`verification.check_sampler`.

The protocol (:mod:`verification.battery.protocol`) is ``sampler(logits, num_samples, seed) -> [B, num_samples]``
with ``logits`` a float32 torch tensor ``[B, V]``.  Samplers written for NumPy, for a ``torch.Generator`` or
for JAX take other arguments; each adapter returns a callable of the protocol (with a seed parameter when
the wrapped one has a way to receive one):

=========================  ================================================================================
adapter                    wraps
=========================  ================================================================================
:func:`from_numpy`         ``fn(logits: np.ndarray float32 [B, V], num_samples[, seed])``
:func:`from_torch`         ``fn(logits: torch.Tensor [B, V], num_samples, generator: torch.Generator)``
:func:`with_seed`          ``fn(logits, num_samples, <name>=...)`` whose randomness is a parameter named
                           ``generator``/``gen`` (a ``torch.Generator``), ``rng``/``random_state`` (a NumPy
                           ``Generator``) or ``key``/``rng_key``/``prng_key`` (a JAX key), built from the seed
:func:`from_jax`           ``fn(key, logits: jax.Array float32 [B, V], num_samples)``, ``key = jax.random.key(seed)``
:func:`jax_categorical`    ``jax.random.categorical`` itself, at a temperature
:func:`speculative_rows`   a speculative sampler written per request: ``fn(draft_tokens [R, K],
                           draft_probs [R, K, V], target_probs [R, K + 1, V], seed) -> [R, K + 1]``
=========================  ================================================================================

JAX is imported only when a JAX adapter's sampler is called: it is not a dependency of this package.

Examples
--------
>>> import numpy as np
>>> def numpy_sampler(logits, num_samples, seed):
...     p = np.exp(logits - logits.max(1, keepdims=True))
...     rng = np.random.default_rng(seed)
...     return np.stack([rng.choice(len(r), num_samples, p=r / r.sum()) for r in p])
>>> from verification import check_sampler
>>> check_sampler(from_numpy(numpy_sampler), np.array([0.0, 1.0, 2.0]), tv=0.2).passed
True
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import torch

from .battery.protocol import SEED_ALIASES, seed_form

__all__ = ["from_jax", "from_numpy", "from_torch", "jax_categorical", "speculative_rows", "with_seed"]


def _named(wrapper: Callable, fn: Callable, kind: str) -> Callable:
    functools.update_wrapper(wrapper, fn, assigned=("__module__", "__name__", "__qualname__", "__doc__"))
    del wrapper.__wrapped__  # the protocol reads the wrapper's own signature, not the wrapped one's
    wrapper.__qualname__ = f"{kind}({getattr(fn, '__qualname__', type(fn).__name__)})"
    return wrapper


def from_numpy(fn: Callable) -> Callable:
    """A NumPy sampler ``fn(logits: np.ndarray float32 [B, V], num_samples[, seed])`` behind the protocol.

    The wrapper takes a seed exactly when ``fn`` does (read from its signature as the protocol reads it).
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    seeded, by_keyword = seed_form(fn)

    if seeded:

        def sampler(logits, num_samples, seed):
            z = logits.detach().cpu().numpy()
            return fn(z, num_samples, seed=seed) if by_keyword else fn(z, num_samples, seed)

    else:

        def sampler(logits, num_samples):
            return fn(logits.detach().cpu().numpy(), num_samples)

    return _named(sampler, fn, "from_numpy")


def from_torch(fn: Callable) -> Callable:
    """A torch sampler ``fn(logits, num_samples, generator)`` behind the protocol: the wrapper passes a
    ``torch.Generator`` on the logits' device seeded with ``seed`` (``manual_seed``)."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")

    def sampler(logits, num_samples, seed):
        g = torch.Generator(device=logits.device).manual_seed(seed)
        return fn(logits, num_samples, g)

    return _named(sampler, fn, "from_torch")


def from_jax(fn: Callable) -> Callable:
    """A JAX sampler ``fn(key, logits: jax.Array float32 [B, V], num_samples) -> [B, num_samples]`` behind the
    protocol: ``key = jax.random.key(seed)``, the logits moved to JAX's default device."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")

    def sampler(logits, num_samples, seed):
        import jax
        import jax.numpy as jnp

        z = jnp.asarray(logits.detach().cpu().numpy())
        return np.asarray(fn(jax.random.key(seed), z, num_samples))

    return _named(sampler, fn, "from_jax")


def jax_categorical(temperature: float = 1.0) -> Callable:
    """``jax.random.categorical(key, logits / temperature, shape=(num_samples, B))`` transposed to
    ``[B, num_samples]``, behind the protocol (its target is ``softmax(logits / temperature)``)."""
    t = float(temperature)
    if not t > 0:
        raise ValueError(f"temperature must be > 0, got temperature={temperature!r}")

    def categorical(key, logits, num_samples):
        import jax

        return jax.random.categorical(key, logits / t, axis=-1, shape=(num_samples, logits.shape[0])).T

    categorical.__qualname__ = f"jax.random.categorical[T={t:g}]"
    categorical.__module__ = "jax.random"
    return from_jax(categorical)


def speculative_rows(fn: Callable) -> Callable:
    """A speculative sampler written per request behind the speculative protocol
    (:mod:`verification.runners.speculative`): ``fn(draft_tokens [R, K], draft_probs [R, K, V],
    target_probs [R, K + 1, V], seed) -> [R, K + 1]`` with ``R = B N`` requests, request ``b N + j`` being
    draft sequence ``j`` of row ``b``.  The tables are repeated ``N`` times per row (``R (2K + 1) V`` floats
    of memory: keep ``N`` moderate through ``tv`` or ``budget_s``)."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")

    def sampler(draft_tokens, draft_probs, target_probs, seed):
        b, n, k = draft_tokens.shape
        out = fn(draft_tokens.reshape(b * n, k), draft_probs.repeat_interleave(n, dim=0),
                 target_probs.repeat_interleave(n, dim=0), seed)  # fmt: skip
        if isinstance(out, torch.Tensor):
            return out.reshape(b, n, k + 1)
        return np.asarray(out).reshape(b, n, k + 1)

    return _named(sampler, fn, "speculative_rows")


def _torch_generator(logits: torch.Tensor, seed: int):
    return torch.Generator(device=logits.device).manual_seed(seed)


def _numpy_generator(logits: torch.Tensor, seed: int):
    return np.random.default_rng(seed)


def _jax_key(logits: torch.Tensor, seed: int):
    import jax

    return jax.random.key(seed)


#: What :func:`with_seed` passes for each parameter name, built from the seed.
SEED_MAKERS = {
    "generator": _torch_generator,
    "gen": _torch_generator,
    "rng": _numpy_generator,
    "random_state": _numpy_generator,
    "key": _jax_key,
    "rng_key": _jax_key,
    "prng_key": _jax_key,
}
assert set(SEED_MAKERS) == set(SEED_ALIASES)


def with_seed(fn: Callable, param: str | None = None, make: Callable | None = None) -> Callable:
    """A sampler ``fn(logits, num_samples, <param>)`` whose randomness is an object, behind the protocol: the wrapper
    takes the seed and passes ``make(logits, seed)`` as ``param``.

    ``param`` defaults to ``fn``'s parameter among ``generator``, ``gen``, ``rng``, ``random_state``, ``key``,
    ``rng_key``, ``prng_key``; ``make`` to what that name means: a ``torch.Generator`` on the logits' device seeded
    by ``manual_seed(seed)`` (``generator``, ``gen``), ``numpy.random.default_rng(seed)`` (``rng``,
    ``random_state``), ``jax.random.key(seed)`` (``key``, ``rng_key``, ``prng_key``).  The object is passed by
    keyword (positionally when ``param`` is positional-only).

    Examples
    --------
    >>> import numpy as np
    >>> def choice(logits, num_samples, rng):
    ...     p = logits.double().softmax(-1).numpy()
    ...     return np.stack([rng.choice(r.size, num_samples, p=r) for r in p])
    >>> from verification import check_sampler
    >>> check_sampler(with_seed(choice), np.array([0.0, 1.0, 2.0]), tv=0.2).passed
    True
    """
    import inspect

    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    params = inspect.signature(fn).parameters
    if param is None:
        param = next((p for p in params if p in SEED_MAKERS), None)
        if param is None:
            raise ValueError(f"fn has no parameter named {', '.join(SEED_MAKERS)}: pass param= and make=")
    if param not in params:
        raise ValueError(f"fn has no parameter {param!r}")
    if make is None:
        if param not in SEED_MAKERS:
            raise ValueError(f"param={param!r} has no default maker: pass make=lambda logits, seed: ...")
        make = SEED_MAKERS[param]
    positional = params[param].kind == inspect.Parameter.POSITIONAL_ONLY

    def sampler(logits, num_samples, seed):
        obj = make(logits, seed)
        return fn(logits, num_samples, obj) if positional else fn(logits, num_samples, **{param: obj})

    return _named(sampler, fn, f"with_seed[{param}]")
