"""One preamble for every entry point: validate, choose the tiles, the temperature policy, the finish.

Every public sampler (``sample``, ``sample_from_logits``, the grouped, online and tensor-parallel variants, and the
tile inverse-CDF sampler) goes through the same steps::

    request = lm_head_request(hidden, weight, ...)     # or logits_request / new_request: the checks below
    parts   = request.stage1(hidden, weight, tiles)    # the fastest stage-1 kernel this call's needs allow
    tokens, flags = <stage 2 of the variant>(parts)    # reduce over tiles, or a combine
    request.finish(flags)                              # the call's one synchronization: raise on the flags

Checks.  Shape, dtype, device, seed, ``num_samples``, ``host_checks`` and a number temperature are checked on the
host before any work (:mod:`flashsampling._validate`: ``TypeError``/``ValueError`` naming the argument); ``tiles``
and the logits kernel's ``block_b``/``block_v`` when stage 1 picks its tiles, before its launch.

Temperature policy.  A number is checked on the host (finite, ``>= 0``, ``1/T`` fits float32) and becomes a
per-row float32 ``1/T`` filled on the device (0 marks a greedy row; a number 0 also turns the noise off, which
gives the same tokens: a greedy row's score is ``z`` either way).  A tensor's shape, dtype and device are checked at
once; its values are checked on the device by :mod:`flashsampling.kernels.temperature`, whose flags are ORed into
the kernels' flags at the finish: never an extra synchronization before the launch.

Tiles.  :func:`~flashsampling.kernels.tiles.stage1_tiles` picks the Gluon kernel on an sm_90 GPU where the call
needs one sample and no log-masses (``sample``, and ``sample_tp(combine="pathwise")`` with one sample and no
``logsumexp``), else the Triton kernels; a caller's ``tiles`` overrides it (the tokens do not depend on tiles).

Finish.  With ``host_checks`` (the default) the flags are read once (``raise_on_kernel_flags``): NaN or infinite
logits, ``z / T`` overflowing float32, rows with no finite logit, invalid per-row temperatures.
``host_checks=False`` skips that synchronization (serving); the tokens are then still in ``[0, V)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import _validate as check
from .kernels.flags import raise_on_kernel_flags
from .kernels.stage1 import launch_fused_stage1, launch_logits_stage1
from .kernels.stage2 import reduce_tiles
from .kernels.tiles import TileConfig, logits_tiles, stage1_tiles
from .noise import split_seed
from .truncation_args import Truncation, truncation_rows

#: How the messages name the logits of an LM head and given logits.
LM_HEAD_LOGITS = "logits hidden @ weight.T"
GIVEN_LOGITS = "logits"


@dataclass(frozen=True)
class Request:
    """A validated call: its sample count, seed, per-row ``1/T`` on the device and what the finish checks.

    Attributes
    ----------
    num_samples : int
    seed : int in ``[0, 2**64)`` (drawn from torch's CPU generator when the caller passed ``None``), or a 0-dim
        int64 tensor on the data's device (a device seed: the stage-1 kernel loads it, :func:`device_seed_words`), or
        a ``[B]`` one (per-request seeds, :func:`~flashsampling.kernels.epilogue.row_seed_words`)
    inv_temp : torch.Tensor, float32, shape (B,)
        ``1/T`` per row, 0 for a greedy row.
    temp_flags : torch.Tensor or None, int32, shape (B,)
        ``FLAG_BAD_TEMPERATURE`` per row of a temperature tensor (computed on the device, read at the finish);
        ``None`` for a number (checked on the host).
    all_greedy : bool
        A number temperature of 0: stage 1 runs without noise.
    temperature : float or torch.Tensor
        The caller's argument, for the messages.
    host_checks : bool
    what : str
        How the messages name the logits.
    truncation : Truncation or None
        The checked ``top_k``, ``top_p``, ``min_p`` and ``order`` of ``sample``/``sample_from_logits``
        (:func:`~flashsampling.truncation_args.truncation_rows`); ``None``: the plain sampler.
    """

    num_samples: int
    seed: int | torch.Tensor
    inv_temp: torch.Tensor
    temp_flags: torch.Tensor | None
    all_greedy: bool
    temperature: object
    host_checks: bool
    what: str = LM_HEAD_LOGITS
    truncation: Truncation | None = None

    @property
    def seed_words(self) -> tuple[int, int] | tuple[torch.Tensor, int]:
        """The Philox key ``(seed_lo, seed_hi)``; for a device seed ``(seed tensor, 0)``, the stage-1 kernels'
        ``SEED_PTR`` form."""
        if isinstance(self.seed, torch.Tensor):
            return self.seed, 0
        return split_seed(self.seed)

    @property
    def device_seed(self) -> bool:
        """Whether the seed is a tensor that the stage-1 kernel loads (never the Gluon kernel's case)."""
        return isinstance(self.seed, torch.Tensor)

    @property
    def noise(self) -> bool:
        """Whether stage 1 adds the noise (not for a call whose rows are all greedy)."""
        return not self.all_greedy

    def stage1(self, hidden: torch.Tensor, weight: torch.Tensor, tiles: TileConfig | None = None, *,
               col_offset: int = 0, return_lse: bool = False) -> tuple[tuple, TileConfig]:  # fmt: skip
        """Stage 1 on ``hidden @ weight.T`` (``weight`` row ``v`` = global index ``col_offset + v``): ``(parts,
        tiles)``, the candidates of :func:`~flashsampling.kernels.stage1.launch_fused_stage1` and the tiles used
        (``tiles``, else :func:`~flashsampling.kernels.tiles.stage1_tiles` for this call's needs)."""
        S = self.num_samples
        tiles = check.check_tiles(tiles) or stage1_tiles(
            hidden, weight, S, return_lse=return_lse, col_offset=col_offset, device_seed=self.device_seed
        )
        lo, hi = self.seed_words
        parts = launch_fused_stage1(hidden, weight, self.inv_temp, lo, hi, S, tiles, col_offset=col_offset,
                                    return_lse=return_lse, noise=self.noise)  # fmt: skip
        return parts, tiles

    def logits_stage1(self, logits: torch.Tensor, block_b: int | None = None, block_v: int | None = None, *,
                      col_offset: int = 0, return_lse: bool = False) -> tuple[tuple, int]:  # fmt: skip
        """Stage 1 on given ``logits [B, V]`` (column ``v`` = global index ``col_offset + v``): ``(parts,
        block_v)``, the candidates and the columns per candidate (the caller's block sizes, checked, or
        :func:`~flashsampling.kernels.tiles.logits_tiles`'s)."""
        B, V = logits.shape
        bb, bv = logits_tiles(B, V, block_b, block_v)
        lo, hi = self.seed_words
        parts = launch_logits_stage1(logits, self.inv_temp, lo, hi, self.num_samples, bb, bv, col_offset=col_offset,
                                     return_lse=return_lse, noise=self.noise)  # fmt: skip
        return parts, bv

    def finish(self, flags: torch.Tensor, what: str | None = None) -> None:
        """With ``host_checks``: raise ``ValueError`` for the rows whose flags (``[B]`` or ``[B, S]``, from stage 2
        or a combine) or temperature flags are set -- the call's one synchronization."""
        if not self.host_checks:
            return
        if self.temp_flags is not None:
            flags = flags | (self.temp_flags[:, None] if flags.dim() == 2 else self.temp_flags)
        raise_on_kernel_flags(flags, what or self.what, temperature=self.temperature)

    def reduce_and_finish(self, parts, V: int) -> torch.Tensor:
        """Stage 2 over the tiles' candidates (:func:`~flashsampling.kernels.stage2.reduce_tiles`), then
        :meth:`finish`; returns the tokens, int64 ``[B, S]``."""
        tokens, flags = reduce_tiles(*parts[:4], V)
        self.finish(flags)
        return tokens


def new_request(temperature, seed, num_samples, batch: int, device: torch.device, *, host_checks: bool,
                what: str = LM_HEAD_LOGITS, device_seed: bool = False,
                truncation: Truncation | None = None) -> Request:  # fmt: skip
    """Check ``num_samples``, ``seed`` and ``temperature`` for ``batch`` rows on ``device`` (in that order) and
    make the :class:`Request` (the seed drawn when ``None``; ``1/T`` per row on the device).  ``device_seed``: a
    0-dim int64 seed tensor on ``device`` is kept for the kernel to load (:func:`~flashsampling._validate.check_seed`;
    the single-device entry points only)."""
    S = check.check_num_samples(num_samples)
    seed = check.check_seed(seed, device if device_seed else None, batch if device_seed else None)
    host_checks = check.check_flag("host_checks", host_checks)
    inv_temp, temp_flags, all_greedy = check.inverse_temperature(temperature, batch, device)
    return Request(S, seed, inv_temp, temp_flags, all_greedy, temperature, host_checks, what, truncation)


def lm_head_request(hidden, weight, *, temperature, seed, num_samples, host_checks: bool,
                    device_seed: bool = False, top_k=None, top_p=None, min_p=None,
                    order=None) -> tuple[Request, int]:  # fmt: skip
    """Check ``hidden [B, D]`` and ``weight [V, D]`` (``B`` and ``V`` at least 1 and below ``2**31``) and the filters
    (:func:`~flashsampling.truncation_args.truncation_rows`), then as :func:`new_request`.  Returns ``(request, V)``."""
    B, V, _, device = check.check_lm_head(hidden, weight)
    check.check_nonempty("weight", V, "V")
    rows = truncation_rows(top_k, top_p, min_p, order, B, V, device)
    request = new_request(temperature, seed, num_samples, B, device, host_checks=host_checks,
                          device_seed=device_seed, truncation=rows)  # fmt: skip
    return _no_device_seed_with_truncation(request), V


def _no_device_seed_with_truncation(request: Request) -> Request:
    """The truncated sampler's kernels take the seed as an int: a device seed with ``top_k``, ``top_p`` or ``min_p``
    is refused (``ValueError``)."""
    if request.device_seed and request.truncation is not None:
        raise ValueError("seed as a device tensor is not supported with top_k, top_p or min_p (the truncated "
                         "sampler's kernels take an int seed)")  # fmt: skip
    return request


def logits_request(logits, *, temperature, seed, num_samples, host_checks: bool,
                   device_seed: bool = False, top_k=None, top_p=None, min_p=None,
                   order=None) -> tuple[Request, int]:  # fmt: skip
    """Check ``logits [B, V]`` and the filters, then as :func:`new_request`.  Returns ``(request, V)``."""
    B, V = check.check_logits(logits)
    rows = truncation_rows(top_k, top_p, min_p, order, B, V, logits.device)
    request = new_request(temperature, seed, num_samples, B, logits.device, host_checks=host_checks,
                          what=GIVEN_LOGITS, device_seed=device_seed, truncation=rows)  # fmt: skip
    return _no_device_seed_with_truncation(request), V
