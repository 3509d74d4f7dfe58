"""``torch.library`` custom ops of the fused sampler, so that ``torch.compile`` traces a decode step through it.

Importing this module registers two operators with a fake (meta) implementation, which gives the output's
shape ``[B, num_samples]`` and dtype int64 from the inputs' metadata without running the kernels::

    flashsampling::sample(Tensor hidden, Tensor weight, Tensor? temperature, float temperature_value,
                          Tensor seed, SymInt num_samples, bool host_checks) -> Tensor
    flashsampling::sample_from_logits(Tensor logits, Tensor? temperature, float temperature_value,
                                      Tensor seed, SymInt num_samples, bool host_checks) -> Tensor

``torch.compile(fullgraph=True)`` keeps the op as one opaque node of the graph; the compiled graph calls the
real implementation (:func:`flashsampling.sample` / :func:`flashsampling.sample_from_logits`), so the tokens
are the eager tokens for the same seed.  Call the ops through :func:`sample` and :func:`sample_from_logits`
below (keyword arguments as in :mod:`flashsampling`), or as ``torch.ops.flashsampling.sample(...)``.

Temperature
-----------
A tensor ``[B]`` goes to ``temperature`` (``temperature_value`` is then ignored); a number goes to
``temperature_value`` with ``temperature=None`` (``0`` is greedy and skips the noise's work).

Seed (random-number contract)
-----------------------------
The op takes the seed as a 0-dim ``torch.int64`` tensor whose 64 bits are the seed: ``s = value mod 2**64``
(negative values are the seeds in ``[2**63, 2**64)``).  The tokens are those of :func:`flashsampling.sample`
with ``seed=s``, with its contract (noise a pure function of ``(s, row, vocabulary index, sample)``; never reuse
one seed for two steps of the same rows).  The wrappers accept an int in ``[0, 2**64)``, such a tensor, or
``None`` (a fresh seed from torch's default generator, the same draw as :func:`flashsampling.sample`'s, made as a
tensor and never read on the host: under ``torch.compile`` it is a random node of the graph, with no data-dependent
guard; inductor draws it from its own generator unless ``torch._inductor.config.fallback_random`` is set).
Under ``torch.compile``, pass the seed as a tensor: an int is a constant of the graph (a new value recompiles).

Checks
------
The wrappers check every argument before the op (``TypeError``/``ValueError`` naming it, never the schema's
``RuntimeError``): tensors where tensors go, a number temperature that fits a float, ``num_samples`` below
``2**32``, and every tensor on the data's device (the seed there or on the CPU).  The fake implementation repeats
the device check: a ``meta`` seed or temperature beside real data would otherwise route the op to the meta kernel,
whose output is uninitialized memory.

A seed tensor on the inputs' device is loaded by the stage-1 kernel (a device seed: no synchronization, the
Triton stage-1 kernels), so a captured CUDA graph replays with the value the tensor holds at replay: write the
next step's seed into it (``seed.fill_(s)`` or ``seed.copy_(...)``) and replay, without recapture.  A seed tensor
on the CPU (or an int, or ``None``) is read on the host and would be frozen into a captured graph, so the ops
refuse it during capture (``ValueError``); so does ``host_checks=True`` (its flags are read on the host: pass
``host_checks=False`` in a captured step).
"""

from __future__ import annotations

import numbers

import numpy as np
import torch

import flashsampling
from flashsampling._validate import check_flag, check_num_samples, check_seed, same_device, short_repr

__all__ = ["sample", "sample_from_logits"]


@torch.library.custom_op("flashsampling::sample", mutates_args=())
def _sample_op(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    temperature: torch.Tensor | None,
    temperature_value: float,
    seed: torch.Tensor,
    num_samples: int,
    host_checks: bool,
) -> torch.Tensor:
    """``flashsampling.sample(hidden, weight, ...)``: tokens ``[B, num_samples]`` from ``softmax(h @ W.T / T)``."""
    return flashsampling.sample(
        hidden,
        weight,
        temperature=temperature if temperature is not None else temperature_value,
        seed=_checked_seed(seed, hidden.device, host_checks),
        num_samples=num_samples,
        host_checks=host_checks,
    )


@_sample_op.register_fake
def _sample_fake(hidden, weight, temperature, temperature_value, seed, num_samples, host_checks):
    _check_2d(hidden=hidden, weight=weight)
    _check_devices(hidden, temperature, seed, weight=weight)
    return hidden.new_empty((hidden.shape[0], num_samples), dtype=torch.int64)


@torch.library.custom_op("flashsampling::sample_from_logits", mutates_args=())
def _sample_from_logits_op(
    logits: torch.Tensor,
    temperature: torch.Tensor | None,
    temperature_value: float,
    seed: torch.Tensor,
    num_samples: int,
    host_checks: bool,
) -> torch.Tensor:
    """``flashsampling.sample_from_logits(logits, ...)``: tokens ``[B, num_samples]`` from ``softmax(z / T)``."""
    return flashsampling.sample_from_logits(
        logits,
        temperature=temperature if temperature is not None else temperature_value,
        seed=_checked_seed(seed, logits.device, host_checks),
        num_samples=num_samples,
        host_checks=host_checks,
    )


@_sample_from_logits_op.register_fake
def _sample_from_logits_fake(logits, temperature, temperature_value, seed, num_samples, host_checks):
    _check_2d(logits=logits)
    _check_devices(logits, temperature, seed, name="logits")
    return logits.new_empty((logits.shape[0], num_samples), dtype=torch.int64)


def sample(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    *,
    temperature: float | torch.Tensor = 1.0,
    seed: int | torch.Tensor | None = None,
    num_samples: int = 1,
    host_checks: bool = True,
) -> torch.Tensor:
    """:func:`flashsampling.sample` through the ``flashsampling::sample`` op (traceable by ``torch.compile``).

    Draws tokens from ``softmax(hidden @ weight.T / temperature)`` without writing the logits; the same tokens
    as :func:`flashsampling.sample` for the same seed.

    Parameters
    ----------
    hidden : torch.Tensor, shape (B, D), bf16/fp16/fp32
    weight : torch.Tensor, shape (V, D), same dtype and device
    temperature : float >= 0 or torch.Tensor of shape (B,)
        ``0`` is greedy.
    seed : int in [0, 2**64), 0-dim torch.int64 tensor (its 64 bits), [B] torch.int64 tensor on the inputs' device
        (per-request seeds, :func:`flashsampling.sample`), or None
    num_samples : int >= 1
    host_checks : bool
        As in :func:`flashsampling.sample` (one synchronization that reports NaN/inf logits and bad temperatures).

    Returns
    -------
    torch.Tensor, int64, shape (B, num_samples)

    Raises
    ------
    TypeError, ValueError
        Bad arguments, named in the message; during CUDA-graph capture, a seed that is not a tensor on the inputs'
        device, or ``host_checks=True``.
    """
    _check_tensor("hidden", hidden)
    _check_tensor("weight", weight)
    temperature, temperature_value = _split_temperature(temperature)
    seed = _seed_tensor(seed)
    _check_devices(hidden, temperature, seed, weight=weight)
    return _sample_op(
        hidden,
        weight,
        temperature,
        temperature_value,
        seed,
        check_num_samples(num_samples),
        check_flag("host_checks", host_checks),
    )


def sample_from_logits(
    logits: torch.Tensor,
    *,
    temperature: float | torch.Tensor = 1.0,
    seed: int | torch.Tensor | None = None,
    num_samples: int = 1,
    host_checks: bool = True,
) -> torch.Tensor:
    """:func:`flashsampling.sample_from_logits` through the ``flashsampling::sample_from_logits`` op.

    Draws tokens from ``softmax(logits / temperature)``; the same tokens as
    :func:`flashsampling.sample_from_logits` for the same seed.

    Parameters
    ----------
    logits : torch.Tensor, shape (B, V), bf16/fp16/fp32
    temperature, seed, num_samples, host_checks
        As in :func:`sample`.

    Returns
    -------
    torch.Tensor, int64, shape (B, num_samples)
    """
    _check_tensor("logits", logits)
    temperature, temperature_value = _split_temperature(temperature)
    seed = _seed_tensor(seed)
    _check_devices(logits, temperature, seed, name="logits")
    return _sample_from_logits_op(
        logits,
        temperature,
        temperature_value,
        seed,
        check_num_samples(num_samples),
        check_flag("host_checks", host_checks),
    )


def _check_tensor(name: str, x) -> None:
    """A dense tensor: anything else would reach the op's schema and fail there with a ``RuntimeError``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.layout != torch.strided:
        raise TypeError(f"{name} must be a dense (strided) tensor, got layout {x.layout}")


def _split_temperature(temperature) -> tuple[torch.Tensor | None, float]:
    """A tensor goes to the op's ``temperature``; a number to ``temperature_value`` (its value is checked by the
    sampler; one that does not fit a float is refused here, before the op's schema would turn it into an
    ``OverflowError``)."""
    if isinstance(temperature, torch.Tensor):
        _check_tensor("temperature", temperature)
        return temperature, 1.0
    if isinstance(temperature, (bool, np.bool_)) or not isinstance(temperature, numbers.Real):
        raise TypeError(f"temperature must be a float or a tensor, got {type(temperature).__name__}")
    try:
        return None, float(temperature)
    except OverflowError:  # an int beyond float64's range, e.g. 10**400
        raise ValueError(f"temperature={short_repr(temperature)} does not fit float32 (it would round to "
                         "infinity)") from None  # fmt: skip


def _seed_tensor(seed) -> torch.Tensor:
    """The op's seed: a 0-dim int64 tensor whose two's-complement bits are the 64-bit seed.

    ``None`` draws the seed of :func:`flashsampling.sample` (two 32-bit words ``hi, lo`` from torch's default
    generator, ``hi * 2**32 + lo``) as a tensor, never read on the host: the same seed eagerly, and under
    ``torch.compile`` a random node of the graph instead of a data-dependent guard."""
    if isinstance(seed, torch.Tensor):
        _check_tensor("seed", seed)
        if seed.dim() > 1 or seed.dtype != torch.int64:
            raise TypeError(
                f"a tensor seed must be a 0-dim torch.int64 tensor (or [B]: per-request seeds), got dtype={seed.dtype} "
                f"and shape {tuple(seed.shape)}"
            )
        return seed
    if seed is None:
        words = torch.randint(0, 2**32, (2,), dtype=torch.int64)
        return (words[0] << 32) | words[1]  # two's complement: hi >= 2**31 gives a negative int64, seed mod 2**64
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be an int in [0, 2**64), a 0-dim int64 tensor or None, got {type(seed).__name__}")
    seed = int(seed)
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed={short_repr(seed)} is out of range; it must be in [0, 2**64)")
    return torch.tensor(seed - 2**64 if seed >= 2**63 else seed, dtype=torch.int64)


def _check_devices(data: torch.Tensor, temperature, seed: torch.Tensor, *, name: str = "hidden", **others) -> None:
    """Every tensor on the data's device (the seed there or on the CPU).  Checked before the op and again in its
    fake implementation: a tensor on another device (``meta`` included) would otherwise send the op to that
    device's kernel, whose output is an uninitialized tensor."""
    device = data.device
    for other, t in others.items():
        if not same_device(t.device, device):
            raise ValueError(f"{other}.device={t.device} differs from {name}.device={device}")
    if temperature is not None and not same_device(temperature.device, device):
        raise ValueError(f"temperature.device={temperature.device} differs from {name}.device={device}")
    if not same_device(seed.device, device) and seed.device.type != "cpu":
        raise ValueError(f"seed.device={seed.device} must be {name}.device={device} (a device seed) or the CPU")


def _checked_seed(seed: torch.Tensor, device: torch.device, host_checks: bool) -> torch.Tensor | int:
    """The op's seed for the sampler (:func:`flashsampling._validate.check_seed`): the tensor itself when it is on
    ``device`` (a device seed, loaded by the kernel), else its value read on the host as an int in ``[0, 2**64)``;
    per-request seeds (``[B]``) as they are.  During CUDA-graph capture only a device seed with
    ``host_checks=False`` is accepted (anything read on the host would be frozen into the graph)."""
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        if host_checks:
            raise ValueError(
                "host_checks=True reads the kernels' flags on the host, which CUDA-graph capture "
                "forbids: pass host_checks=False in a captured step"
            )
        if seed.device != device:
            raise ValueError(
                f"seed is on {seed.device}: during CUDA-graph capture the seed must be a tensor on "
                f"{device}, which the kernel loads at every replay (a host seed would be frozen)"
            )
    if seed.dim() == 1:
        return seed  # per-request seeds: checked by the sampler against the batch
    return check_seed(seed, device)


def _check_2d(**tensors: torch.Tensor) -> None:
    """Shape checks the fake implementation needs to state the output's shape (the rest run in the sampler)."""
    for name, t in tensors.items():
        if t.dim() != 2:
            raise ValueError(f"{name} must have 2 dimensions, got shape {tuple(t.shape)}")
    if "hidden" in tensors and tensors["hidden"].shape[1] != tensors["weight"].shape[1]:
        raise ValueError(
            f"hidden has D={tensors['hidden'].shape[1]} columns but weight has "
            f"D={tensors['weight'].shape[1]}; shapes are (B, D) and (V, D)"
        )
