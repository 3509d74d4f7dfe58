"""``check_sampler``'s arguments, each checked once, at the entry: the :class:`CheckRequest` every later step reads.

:func:`check_request` checks every argument of :func:`verification.check_sampler` in the order of its signature and
returns the request: the sampler behind its protocol (:mod:`verification.battery.protocol`), the aim (a
:class:`~verification.battery.aims.Target` or a :class:`~verification.battery.aims.SpeculativeTarget`), the float32
logits the sampler receives and their float64 values, one temperature per row, the target law of every row, the
error rates, the size argument (``tv`` or ``budget_s``) and the seed.  The pilot, the plan
(:mod:`verification.planning.check`), the draws and the report read it; none checks an argument again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from flashsampling.targets._inputs import check_temperature, per_row, to_numpy

from ..battery.aims import SpeculativeTarget, Target, softmax
from ..battery.protocol import SamplerCall, prepare_logits
from ..stats._validate import check_int, check_positive_real, check_rates
from ..stats.power import check_deviation
from .streams import DEFAULT_SEED_BITS, SEED_BITS, max_seed

__all__ = ["DEFAULT_TV", "CheckRequest", "check_request", "check_seed", "per_row_parameters", "temperatures"]

#: Total variation the sizes are planned for when neither ``tv`` nor ``budget_s`` is given.  One percent
#: of the mass moved is the size of the defects that matter in practice and that a CPU can afford to
#: resolve: a 3 % temperature error on N(0, 2**2) logits moves about 2 % (measured in
#: ``docs/verify-your-sampler.md``), and at V = 1000 the chi-square needs about 10**6 draws a row for 1 %,
#: a second for a NumPy sampler.  Defects far below 1 % in total variation but deadly in practice (a
#: starved tail, shared noise, an overlapping stream) are the tail, range and independence tests' job,
#: and they catch them at this ``n``.
DEFAULT_TV = 0.01


@dataclass(frozen=True)
class CheckRequest:
    """The arguments of :func:`verification.check_sampler`, checked: what every later step reads.

    Attributes
    ----------
    call : SamplerCall
        The sampler behind its protocol (:mod:`verification.battery.protocol`).
    aim : Target or SpeculativeTarget
        What the sampler must draw from.
    logits : torch.Tensor or None
        The float32 logits ``[B, V]`` the sampler receives (on the device of a torch input); ``None`` for a
        speculative aim, whose sampler receives probability tables.
    values : numpy.ndarray
        The logits' values the law is computed from: float64 ``[B, V]`` (of the float32 logits), or the
        target model's logits ``(B, K + 1, V)`` for a speculative aim.
    temperatures : numpy.ndarray, float64, shape (B,)
    probs : numpy.ndarray
        The target law of every row ``[B, V]`` (for a speculative aim: the target model's ``p (B, K + 1, V)``).
    alpha, power : float
    tv, budget_s : float or None
        What the sizes are planned for (exactly one is set).
    seed : int
    seed_bits : int
        The seeds passed lie in ``[0, 2**seed_bits)`` (:mod:`verification.planning.streams`).
    progress : bool or None
        Show a progress bar of the draws (``None``: when stderr is a terminal).
    """

    call: SamplerCall
    aim: Target | SpeculativeTarget
    logits: torch.Tensor | None
    values: np.ndarray = field(repr=False)
    temperatures: np.ndarray
    probs: np.ndarray = field(repr=False)
    alpha: float
    power: float
    tv: float | None
    budget_s: float | None
    seed: int
    seed_bits: int = DEFAULT_SEED_BITS
    progress: bool | None = None

    @property
    def speculative(self) -> bool:
        return isinstance(self.aim, SpeculativeTarget)

    @property
    def per_row(self) -> bool:
        """The rows differ by a parameter (a temperature or a target parameter given per row), which a sampler
        binds by batch position."""
        return len(set(self.temperatures.tolist())) > 1 or per_row_parameters(self.aim)


def _aim(target) -> Target | SpeculativeTarget:
    if isinstance(target, (Target, SpeculativeTarget)):
        return target
    if target == "softmax":
        return softmax()
    raise TypeError(
        "target must be 'softmax', a verification.battery.aims.Target (top_k(...), top_p(...), min_p(...), "
        f"chain(...)) or a SpeculativeTarget (speculative(...)), got {target!r}"
    )


def temperatures(temperature, rows: int) -> np.ndarray:
    """``temperature`` (a number or one per row) checked, as float64 ``(rows,)``."""
    t = check_temperature(temperature)
    return per_row(t, "temperature", (rows,)).astype(np.float64)


def per_row_parameters(target: Target) -> bool:
    """The target has a parameter given per row (then a sampler binds it by batch position)."""
    return any(isinstance(v, tuple) for k, v in target.params if k != "order") or any(
        per_row_parameters(s) for s in target.steps
    )


def check_seed(seed, seed_bits) -> tuple[int, int]:
    """``(seed, seed_bits)`` checked: ``seed_bits`` one of :data:`~verification.planning.streams.SEED_BITS`, ``seed``
    an integer in ``[0, 2**seed_bits)``."""
    seed_bits = check_int(seed_bits, "seed_bits")
    if seed_bits not in SEED_BITS:
        raise ValueError(f"seed_bits must be one of {', '.join(map(str, SEED_BITS))}, got seed_bits={seed_bits}")
    seed = check_int(seed, "seed", minimum=0)
    if seed > max_seed(seed_bits):
        raise ValueError(f"seed must be in [0, 2**{seed_bits}) (seed_bits={seed_bits}), got seed={seed}")
    return seed, seed_bits


def check_request(sampler, logits, *, target="softmax", temperature=1.0, alpha: float = 1e-3, power: float = 0.99,
                  tv: float | None = None, budget_s: float | None = None, seed: int = 0,
                  seed_bits: int = DEFAULT_SEED_BITS, progress: bool | None = None) -> CheckRequest:  # fmt: skip
    """Check the arguments of :func:`verification.check_sampler` (the same signature) and compute the target law.

    Raises
    ------
    TypeError, ValueError
        An argument out of range, named in the message (``tv`` and ``budget_s`` together included).
    """
    alpha, power = check_rates(alpha, power)
    if tv is not None and budget_s is not None:
        raise ValueError("pass tv or budget_s, not both: tv plans the sizes for a deviation, budget_s for a time")
    if budget_s is not None:
        budget_s = check_positive_real(budget_s, "budget_s")
    elif tv is None:
        tv = DEFAULT_TV
    if tv is not None:
        tv = check_deviation(tv, "tv", alpha=alpha, power=power)
    seed, seed_bits = check_seed(seed, seed_bits)
    if progress is not None and not isinstance(progress, (bool, np.bool_)):
        raise TypeError(f"progress must be True, False or None, got {progress!r}")
    aim = _aim(target)
    call = SamplerCall.wrap(sampler)
    if isinstance(aim, SpeculativeTarget):
        L, z = None, to_numpy(logits, "logits")
        temps = temperatures(temperature, aim.draft_probs.shape[0])
    else:
        L, z = prepare_logits(logits)
        if z.shape[1] < 2:
            raise ValueError(f"logits must have V >= 2 categories (one category leaves nothing to test), got "
                             f"shape {tuple(z.shape)}")  # fmt: skip
        temps = temperatures(temperature, z.shape[0])
    probs = aim.probs(z, temps)  # a speculative aim checks the shape (B, K + 1, V)
    return CheckRequest(call, aim, L, z, temps, probs, alpha, power, tv, budget_s, seed, seed_bits,
                        None if progress is None else bool(progress))  # fmt: skip
