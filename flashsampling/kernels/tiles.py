"""Stage 1's tile configuration and the policy that picks it for a call.

:class:`TileConfig` describes one stage-1 launch: the matmul tile ``block_b x block_v`` with ``block_d``-deep K
blocks, the warps and pipeline stages, and which kernel runs it (the Triton kernels of :mod:`.stage1` and
:mod:`.persistent`, or the warp-specialized Gluon kernel of :mod:`.pingpong`).  Every configuration gives the same
tokens (the noise is keyed by the global vocabulary index), so the policy is about speed only:

* :func:`default_tiles`: the Triton kernels' tiles by batch size;
* :func:`warp_specialized_tiles`: the Gluon kernel's tiles by batch size, or ``None`` where the Triton kernels are
  faster;
* :func:`stage1_tiles`: a call's tiles, the Gluon kernel's where it can run (:func:`warp_specialized_supported`:
  an sm_90 GPU, one sample, no log-masses) and is the faster, else the Triton kernels';
* :func:`logits_tiles`: the block sizes of the kernel on given logits.

The numbers below were measured on the H200 (bf16); the files are under ``benchmarks/results/`` and the history
of each choice is in ``benchmarks/NOTES.md``.
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
import re
from dataclasses import dataclass

import numpy as np
import torch
import triton

from .._device import UPCAST_DOT
from .hardware import device_index, is_sm90, sm_count, tma_compatible
from .launch import cdiv, next_power_of_2

#: Triton's largest tensor has 2**20 elements (``TRITON_MAX_TENSOR_NUMEL``): no block side may exceed it.
MAX_BLOCK = 1 << 20
#: The logits kernel's smallest ``block_v``: token pairs share a Philox block (two columns) and the compiled
#: reductions want at least 16 columns (the defaults never go below).
MIN_LOGITS_BLOCK_V = 16


@dataclass(frozen=True)
class TileConfig:
    """Tile sizes and launch parameters of stage 1."""

    block_b: int = 16
    block_v: int = 128
    block_d: int = 64
    num_warps: int = 4
    num_stages: int = 3
    #: 0: the epilogue (noise, max, candidate) runs on the whole tile in registers.  Else the tile
    #: is staged through a per-program scratch slot and the epilogue runs on ``epilogue_v``-wide
    #: column chunks, one candidate per chunk (wide matmul tiles, epilogue without spills).
    epilogue_v: int = 0
    #: Run the persistent TMA kernel (:mod:`.persistent`; one program per SM, the next tile's loads
    #: overlap this tile's epilogue) where the inputs allow TMA; else the one-program-per-tile kernel.
    persistent: bool = False
    #: Cap on registers per thread (the compiler's ``maxnreg``), e.g. 128 so that two 8-warp programs
    #: share an SM and one's epilogue runs under the other's matmul; ``None``: the compiler's choice.
    max_registers: int | None = None
    #: On an sm_90 GPU, with 16-bit inputs that TMA can read, one sample and no log-masses: the
    #: warp-specialized Gluon kernel of :mod:`.pingpong` (two MMA warp groups take turns, each one's
    #: epilogue under the other's matmul; ``max_registers`` is the consumer groups' register budget).
    #: Elsewhere the Triton kernels run with the same tiles.
    warp_specialized: bool = False

    def __post_init__(self) -> None:
        for name in ("block_b", "block_v", "block_d", "num_warps", "num_stages", "epilogue_v"):
            v = getattr(self, name)
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
                raise TypeError(f"TileConfig.{name} must be an int, got {type(v).__name__}")
            object.__setattr__(self, name, int(v))  # a NumPy int becomes a Python int (hashable, as Triton wants)
        for name in ("persistent", "warp_specialized"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"TileConfig.{name} must be a bool, got {type(getattr(self, name)).__name__}")
            object.__setattr__(self, name, bool(getattr(self, name)))
        for name in ("block_b", "block_v", "block_d"):
            v = getattr(self, name)
            # tl.dot needs every dimension >= 16 and a power of two; Triton's tensors hold at most 2**20 elements.
            if v < 16 or v & (v - 1) or v > MAX_BLOCK:
                raise ValueError(f"TileConfig.{name}={v} must be a power of two in [16, {MAX_BLOCK}]")
        if self.block_b * self.block_v > MAX_BLOCK:
            raise ValueError(f"TileConfig.block_b={self.block_b} x block_v={self.block_v} exceeds Triton's "
                             f"{MAX_BLOCK} elements per tile")  # fmt: skip
        # Triton launches 1 to 32 warps per program, a power of two; a software pipeline needs at least one stage.
        if self.num_warps not in (1, 2, 4, 8, 16, 32):
            raise ValueError(f"TileConfig.num_warps={self.num_warps} must be a power of two in [1, 32]")
        if self.num_stages < 1:
            raise ValueError(f"TileConfig.num_stages={self.num_stages} must be >= 1")
        ev = self.epilogue_v
        if ev and (ev < 16 or ev & (ev - 1) or ev > self.block_v):
            raise ValueError(f"TileConfig.epilogue_v={ev} must be 0 or a power of two in [16, block_v]")
        # The Gluon kernel: 64-row wgmma per warp group, a staged epilogue, and an accumulator of at most 256
        # columns (wgmma's largest N).
        if self.warp_specialized and (self.block_b % 64 or not ev or self.block_v > 256):
            raise ValueError(
                f"TileConfig.warp_specialized=True needs block_b a multiple of 64 (got {self.block_b}), "
                f"epilogue_v > 0 (got {ev}) and block_v <= 256 (got {self.block_v})"
            )
        # 255: the most registers a thread can address; 32: below that no kernel here compiles.
        mr = self.max_registers
        if mr is not None and (isinstance(mr, (bool, np.bool_)) or not isinstance(mr, numbers.Integral)):
            raise TypeError(f"TileConfig.max_registers must be an int or None, got {type(mr).__name__}")
        if mr is not None:
            object.__setattr__(self, "max_registers", int(mr))
        if self.max_registers is not None and not 32 <= self.max_registers <= 255:
            raise ValueError(f"TileConfig.max_registers={self.max_registers} must be None or in [32, 255]")

    def launch_options(self) -> dict:
        """Triton launch options: warps, pipeline stages and, compiled, the register cap."""
        cap = {"maxnreg": self.max_registers} if self.max_registers and not UPCAST_DOT else {}
        return {"num_warps": self.num_warps, "num_stages": self.num_stages, **cap}

    def matmul_constants(self, upcast: bool) -> dict:
        """The Triton stage-1 kernels' compile-time constants of the matmul: block sizes, and whether the inputs
        are converted to fp32 before an IEEE fp32 dot (else the tensor cores' native dot)."""
        return dict(BLOCK_SIZE_B=self.block_b, BLOCK_SIZE_V=self.block_v, BLOCK_SIZE_D=self.block_d, UPCAST=upcast,
                    INPUT_PRECISION="ieee" if upcast else "tf32")  # fmt: skip

    @property
    def candidate_v(self) -> int:
        """Columns per stage-1 candidate of the Triton kernels: ``epilogue_v`` if set, else ``block_v`` (the Gluon
        kernel writes one candidate per ``block_v`` tile)."""
        return self.epilogue_v or self.block_v


@functools.lru_cache(maxsize=1024)  # a pure function of four ints, asked on every call
def default_tiles(B: int, V: int, D: int, element_size: int = 2) -> TileConfig:
    """The Triton kernels' tiles by batch size (bf16 on the H200).

    * ``B <= 16``: 16 x 64 tiles, 128-deep K blocks in 4 stages: 1.5-2% faster than 256-deep blocks in 3 stages on
      201088 x 2880 (whose D is not a multiple of 256), within 0.5% on D = 4096 and 8192
      (``tile_sweep_small_*_h200.json``).
    * ``B <= 64``: ``B``-row tiles (32 or 64) of 64 columns (``tile_sweep_h200_v4.json``: the best configuration
      per B without spills on 151936 x 4096).
    * ``B > 64``: the persistent TMA kernel on wide tiles (``h`` re-read from L2 4-8x less often than with
      64 x 64) with the epilogue on 32-column chunks and 16 warps (the epilogue is latency-bound: 4 warps per
      scheduler instead of 2, 128 registers, no spills; ``persistent_sweep_h200_v*.json``).

    Wider inputs (fp32, ``element_size=4``) halve the K tile until the pipeline's
    ``num_stages * (block_b + block_v) * block_d * element_size`` bytes fit in 200 KB of shared
    memory (the H200 has 227 KB per block): the bf16 choice for B > 128 would need 295 KB in fp32.
    """
    if UPCAST_DOT:  # the interpreter: each tl op costs ~0.1 ms whatever its size; few, large programs
        return TileConfig(block_b=max(16, min(64, next_power_of_2(B))), block_v=256, block_d=64)
    if B <= 16:
        cfg = TileConfig(block_b=16, block_v=64, block_d=128, num_warps=4, num_stages=4)
    elif B <= 32:
        cfg = TileConfig(block_b=32, block_v=64, block_d=128, num_warps=4, num_stages=4)
    elif B <= 64:
        cfg = TileConfig(block_b=64, block_v=64, block_d=128, num_warps=4, num_stages=3)
    elif B <= 128:
        cfg = TileConfig(128, 128, 128, num_warps=16, num_stages=3, epilogue_v=32, persistent=True)
    else:
        cfg = TileConfig(128, 256, 64, num_warps=16, num_stages=4, epilogue_v=32, persistent=True)
    block_d = cfg.block_d
    while block_d > 16 and cfg.num_stages * (cfg.block_b + cfg.block_v) * block_d * element_size > 200 * 1024:
        block_d //= 2
    if block_d != cfg.block_d:
        cfg = dataclasses.replace(cfg, block_d=block_d)
    return cfg


#: ``16 < B <= 32`` runs the Gluon kernel's 64 x 256 tiles when they fill the machine's last wave to at least
#: this fraction (:func:`last_wave_fill`); else the Triton kernel's 32 x 64 tiles (:func:`warp_specialized_tiles`).
SMALL_BATCH_WAVE_FILL = 0.96


def last_wave_fill(num_tiles: int, sms: int) -> float:
    """``num_tiles / (sms * ceil(num_tiles / sms))``: how full a persistent kernel with one program per SM keeps
    the SMs when each program walks ``ceil`` or ``floor`` of ``num_tiles / sms`` tiles (1.0: every SM busy to the
    end; 594 tiles on 132 SMs: 0.9, the last of 5 rounds half empty)."""
    return num_tiles / (sms * cdiv(num_tiles, sms))


@functools.lru_cache(maxsize=1024)  # a pure function of three ints, asked on every call
def warp_specialized_tiles(B: int, V: int | None = None, sms: int | None = None) -> TileConfig | None:
    """Tiles of the warp-specialized Gluon kernel (:mod:`.pingpong`) for ``B`` rows, or ``None`` where the
    Triton kernels are the default.  Measured on the H200:

    * ``B <= 16``: ``None`` (the weight stream, not the epilogue, is the cost; the Triton tiles are within 3%
      of the matmul; the Gluon kernel took 1.00-1.18x their time at B = 16 and 20, ``tile_choice_small_h200.json``).
    * ``16 < B <= 32``: 64 x 256 tiles when ``V`` (the weight's rows) and ``sms`` are given and the
      ``cdiv(V, 256)`` tiles fill the last wave to :data:`SMALL_BATCH_WAVE_FILL` (:func:`last_wave_fill`),
      else ``None``.  On the four shapes whose fill is 0.97-0.99 (V = 201088 with D = 2048, 2880, 4096;
      262144 x 2880) the Gluon kernel took 0.947-0.983 of the Triton kernel's time at every B tried (17-32); on
      the seven filling 0.90-0.95, 0.975-1.111 (``tile_choice_waves_h200.json``, ``tile_choice_smallD_h200.json``).
    * ``32 < B <= 64``: 64 x 128 tiles in 6 stages (an epilogue up to one tile's matmul hides): within 0.7% of
      three consumer groups on the five harness shapes at B = 40, 48 and 64, and 1-30% faster at D = 1536 and
      2048, where three groups' turns cost more than they hide (``tile_choice_b64_h200.json``).
    * ``B > 64``: 64 x 256 tiles with 32-column chunks, 3-10% faster through ``sample()`` than three groups on
      64 x 128 on all five harness shapes at B = 128 and 256 (fewer re-reads of the weights from L2, wider MMAs;
      ``tile_choice_h200.json``); 128 x 128 tiles were no faster (``tiles128_probe_h200.json``).

    Every token gets its exact noise.  (The approximate filter of ``benchmarks/probes/approx_filter.py``, which
    ranks tokens by a cheaper noise, measured -7% to +4% at B = 256 and 2-4% slower at B = 64 and 128:
    ``filter_probe_session9_h200.json``, ``epilogue_probe_filter_h200.json``.)"""
    ws = {"num_warps": 4, "warp_specialized": True}
    wide = TileConfig(64, 256, 64, num_stages=4, epilogue_v=32, **ws)
    if B <= 16:
        return None
    if B <= 32:
        fills = V is not None and sms is not None and last_wave_fill(cdiv(V, 256), sms) >= SMALL_BATCH_WAVE_FILL
        return wide if fills else None
    if B <= 64:
        return TileConfig(64, 128, 64, num_stages=6, epilogue_v=16, **ws)
    return wide


#: The triton release the Gluon kernel is written for and measured with (``gl.warp_specialize`` changed its API in
#: 3.9, where the kernel no longer compiles): on others the Triton kernels run, with the same tokens.
GLUON_TRITON = (3, 6)


def triton_release() -> tuple[int, int]:
    """``(major, minor)`` of the installed triton."""
    major, minor = (int(re.match(r"\d+", part).group()) for part in triton.__version__.split(".")[:2])
    return major, minor


#: Whether the installed triton is :data:`GLUON_TRITON` (asked on every call: computed once).
GLUON_RUNS = triton_release() == GLUON_TRITON


def warp_specialized_supported(hidden: torch.Tensor, weight: torch.Tensor, col_offset: int = 0) -> bool:
    """Whether the Gluon kernel of :mod:`.pingpong` can run on these inputs: compiled on an sm_90 GPU with triton
    :data:`GLUON_TRITON`, 16-bit inputs of one dtype that TMA can read, a shard starting on an even column (a token
    pair never straddles two tiles)."""
    if UPCAST_DOT or not hidden.is_cuda or not GLUON_RUNS:
        return False
    return (
        is_sm90(device_index(hidden.device))
        and hidden.dtype in (torch.bfloat16, torch.float16)
        and weight.dtype == hidden.dtype
        and col_offset % 2 == 0
        and tma_compatible(hidden, weight)
    )


def stage1_tiles(
    hidden: torch.Tensor, weight: torch.Tensor, num_samples: int, *, return_lse: bool = False, col_offset: int = 0,
    device_seed: bool = False,
) -> TileConfig:  # fmt: skip
    """The stage-1 tiles of a call on ``hidden @ weight.T``: the Gluon kernel's (:func:`warp_specialized_tiles`)
    where it runs (sm_90, one sample, no log-masses, a host seed) and is the default for this shape, else the Triton
    kernels' (:func:`default_tiles`)."""
    B, D = hidden.shape
    V = weight.shape[0]
    ws = None
    if num_samples == 1 and not return_lse and B > 16 and hidden.is_cuda and not device_seed:
        ws = warp_specialized_tiles(B, V, sm_count(hidden.device))
    if ws is not None and warp_specialized_supported(hidden, weight, col_offset):
        return ws
    return default_tiles(B, V, D, hidden.element_size())


def check_block(name: str, value, low: int, high: int = MAX_BLOCK) -> int:
    """A caller's block size: an int (Python or NumPy), a power of two in ``[low, high]``; ``TypeError`` or
    ``ValueError`` naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int (a power of two) or None, got {type(value).__name__}")
    v = int(value)
    if v < low or v > high or v & (v - 1):
        raise ValueError(f"{name}={v} must be a power of two in [{low}, {high}]")
    return v


def logits_tiles(B: int, V: int, block_b: int | None = None, block_v: int | None = None) -> tuple[int, int]:
    """(block_b, block_v) for the logits kernel: the caller's (``None``: the default), each a power of two
    (``block_b >= 1``, ``block_v >= 16``, ``block_b * block_v <= 2**20``), or the defaults -- 4 x 1024 compiled; as
    large as 64K elements interpreted."""
    V = max(V, 1)
    if UPCAST_DOT:
        dbb = min(64, next_power_of_2(B))
        dbv = max(16, min(next_power_of_2(V), (1 << 16) // dbb))
    else:
        dbb, dbv = min(4, next_power_of_2(B)), max(16, min(1024, next_power_of_2(V)))
    bb = dbb if block_b is None else check_block("block_b", block_b, 1)
    bv = dbv if block_v is None else check_block("block_v", block_v, MIN_LOGITS_BLOCK_V)
    if bb * bv > MAX_BLOCK:
        raise ValueError(f"block_b={bb} x block_v={bv} exceeds Triton's {MAX_BLOCK} elements per tile")
    return bb, bv
