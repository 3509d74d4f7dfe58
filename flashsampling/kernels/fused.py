"""Stage 1 of the fused sampler: LM-head matmul tile + temperature + Gumbel noise + per-tile max.

Tiling
------
The grid is 1-D over ``num_b_tiles * num_v_tiles`` programs, row tile fastest, so the programs
that read the same weight tile run next to each other and share it through L2::

    pid_b = pid % num_b_tiles ; pid_v = pid // num_b_tiles
    for k in range(0, D, BLOCK_SIZE_D):                       # K loop, fp32 accumulator
        h_tile = h[rows, k:k+BK]          at h_ptr + row * stride_hb + k * stride_hd
        w_tile = W[cols, k:k+BK].T        at w_ptr + col * stride_wv + k * stride_wd
        acc   += h_tile @ w_tile                               # (BB, BK) @ (BK, BV)
    perturb_select_store(acc, ...)                             # kernels/select.py

With ``TileConfig.epilogue_v`` set (the default for B > 64) the accumulator is stored to a
per-program scratch slot (it stays in L2) and the epilogue reloads it in ``epilogue_v``-wide
column chunks, each its own candidate for stage 2.  This lets the matmul use a wide tile (128 x 256:
every program re-reads its rows of ``h`` from L2, ``B*V*D*2*(1/block_v + 1/block_b)`` bytes in all)
without a register-hungry epilogue; it costs ``B*V*4`` bytes of scratch here (one slot per tile),
``SMs*block_b*block_v*4`` in the persistent kernel (one slot per program).

With ``TileConfig.persistent`` (the default for B > 64) the same tiles and the same epilogue run in
the persistent TMA kernel of :mod:`.persistent` (one program per SM walking the tiles; identical
candidates), where the inputs allow TMA.

Offsets are formed in int64 (``rows.to(int64) * stride``), so no index overflows 32 bits at
large ``B * V`` or ``V * D``.

Bytes and FLOPs
---------------
Fused: reads ``V*D*2`` bytes of bf16 weight (once when ``B <= BLOCK_SIZE_B``) and ``B*D*2`` of
hidden state, writes ``B*S*T*20`` bytes of candidates (``T = V / BLOCK_SIZE_V``); ``2*B*V*D``
FLOPs.  Unfused ``matmul -> softmax -> multinomial`` additionally writes and re-reads the
``B*V*4``-byte logits at least twice (softmax in and out, then the CDF scan).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from .._device import UPCAST_DOT
from .launch import cdiv, direct, next_power_of_2
from .persistent import launch_persistent, sm_count, tma_compatible
from .select import perturb_select_store, tile_epilogue


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
    #: Consumer warp groups of the Gluon kernel (2: ping-pong; 3: each epilogue may take up to twice
    #: a tile's matmul time and still hide under the other groups' matmuls).
    warp_groups: int = 2
    #: With ``warp_specialized``: the Gluon kernel of :mod:`.handoff` instead (one MMA warp group hands each
    #: accumulator to ``warp_groups`` epilogue warp groups through shared memory; an experiment, slower).
    handoff: bool = False
    #: With ``warp_specialized``: the fast pass ranks tokens by an approximate noise and recomputes each row's
    #: winner exactly (:func:`~flashsampling.kernels.pingpong._scan_tile_filtered`; the same candidates, about a
    #: third fewer instructions per token; no consistent gain measured, so off by default: benchmarks/NOTES.md
    #: sessions 8 and 9).
    noise_filter: bool = False

    def __post_init__(self) -> None:
        for name in ("block_b", "block_v", "block_d"):
            v = getattr(self, name)
            # tl.dot needs every dimension >= 16 and a power of two.
            if v < 16 or v & (v - 1):
                raise ValueError(f"TileConfig.{name}={v} must be a power of two >= 16")
        ev = self.epilogue_v
        if ev and (ev < 16 or ev & (ev - 1) or ev > self.block_v):
            raise ValueError(f"TileConfig.epilogue_v={ev} must be 0 or a power of two in [16, block_v]")
        if self.warp_groups not in (2, 3):
            raise ValueError(f"TileConfig.warp_groups={self.warp_groups} must be 2 or 3")
        if self.warp_specialized and (self.block_b % 64 or not ev or self.block_v > 256):
            raise ValueError(
                f"TileConfig.warp_specialized=True needs block_b a multiple of 64 (got {self.block_b}), "
                f"epilogue_v > 0 (got {ev}) and block_v <= 256 (got {self.block_v})"
            )
        for name in ("handoff", "noise_filter"):
            if getattr(self, name) and not self.warp_specialized:
                raise ValueError(f"TileConfig.{name}=True needs warp_specialized=True")
        if self.max_registers is not None and not 32 <= self.max_registers <= 255:
            raise ValueError(f"TileConfig.max_registers={self.max_registers} must be None or in [32, 255]")

    def launch_options(self) -> dict:
        """Triton launch options: warps, pipeline stages and, compiled, the register cap."""
        cap = {"maxnreg": self.max_registers} if self.max_registers and not UPCAST_DOT else {}
        return {"num_warps": self.num_warps, "num_stages": self.num_stages, **cap}

    @property
    def candidate_v(self) -> int:
        """Columns per stage-1 candidate: ``epilogue_v`` if set, else ``block_v``."""
        return self.epilogue_v or self.block_v


@functools.lru_cache(maxsize=1024)  # a pure function of four ints, asked on every call
def default_tiles(B: int, V: int, D: int, element_size: int = 2) -> TileConfig:
    """Tile choice by batch size (tuned on the H200 for bf16: see benchmarks/NOTES.md).

    Wider inputs (fp32, ``element_size=4``) halve the K tile until the pipeline's
    ``num_stages * (block_b + block_v) * block_d * element_size`` bytes fit in 200 KB of shared
    memory (the H200 has 227 KB per block): the bf16 choice for B > 128 would need 295 KB in fp32.
    """
    if UPCAST_DOT:  # the interpreter: each tl op costs ~0.1 ms whatever its size; few, large programs
        return TileConfig(block_b=max(16, min(64, next_power_of_2(B))), block_v=256, block_d=64)
    # benchmarks/results/tile_sweep_h200_v4.json (V=151936, D=4096, bf16): best config per B without spills.
    # B <= 16, session 11 (tile_sweep_small_*_h200.json): 128-deep K blocks in 4 stages instead of 256 in 3,
    # 1.5-2 % faster on 201088 x 2880 (whose D is not a multiple of 256), within 0.5 % on D = 4096 and 8192.
    if B <= 16:
        cfg = TileConfig(block_b=16, block_v=64, block_d=128, num_warps=4, num_stages=4)
    elif B <= 32:
        cfg = TileConfig(block_b=32, block_v=64, block_d=128, num_warps=4, num_stages=4)
    elif B <= 64:
        cfg = TileConfig(block_b=64, block_v=64, block_d=128, num_warps=4, num_stages=3)
    # B > 64 (results/persistent_sweep_h200_v*.json): persistent TMA kernel, wide matmul tile (h re-read
    # from L2 4-8x less often than with 64 x 64), epilogue on 32-column chunks, 16 warps (the epilogue
    # is latency-bound: 4 warps per scheduler instead of 2, 128 registers, no spills).
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
#: this fraction (:func:`last_wave_fill`); else the Triton kernel's 32 x 64 tiles (benchmarks/NOTES.md, session 12).
SMALL_BATCH_WAVE_FILL = 0.96


def last_wave_fill(num_tiles: int, sms: int) -> float:
    """``num_tiles / (sms * ceil(num_tiles / sms))``: how full a persistent kernel with one program per SM keeps
    the SMs when each program walks ``ceil`` or ``floor`` of ``num_tiles / sms`` tiles (1.0: every SM busy to the
    end; 594 tiles on 132 SMs: 0.9, the last of 5 rounds half empty)."""
    return num_tiles / (sms * cdiv(num_tiles, sms))


@functools.lru_cache(maxsize=1024)  # a pure function of three ints, asked on every call
def warp_specialized_tiles(B: int, V: int | None = None, sms: int | None = None) -> TileConfig | None:
    """Tiles of the warp-specialized Gluon kernel (:mod:`.pingpong`) for ``B`` rows, or ``None`` where the
    Triton kernels are the default.  Tuned on the H200 (benchmarks/NOTES.md):

    * ``B <= 16``: ``None`` (the weight stream, not the epilogue, is the cost; the Triton tiles are within 3%
      of the matmul).
    * ``16 < B <= 32``: two groups on 64 x 256 tiles when ``V`` (the weight's rows) and ``sms`` are given and
      the ``cdiv(V, 256)`` tiles fill the last wave to :data:`SMALL_BATCH_WAVE_FILL` (:func:`last_wave_fill`),
      else ``None``.  Session 12 (tile_choice_{smallD,waves}_h200.json): on the four shapes whose fill is
      0.97-0.99 (V = 201088 with D = 2048, 2880, 4096; 262144 x 2880) the Gluon kernel took 0.947-0.983 of the
      Triton kernel's time at every B tried (17-32); on the seven filling 0.90-0.95, 0.975-1.111.
    * ``32 < B <= 64``: two consumer groups on 64 x 128 tiles (an epilogue up to one tile's matmul hides).
      Session 12 (tile_choice_b64_h200.json, _smallD): within 0.7% of three groups on the five harness
      shapes at B = 40, 48 and 64, and 1-30% faster at D = 1536 and 2048, where three groups' turns cost more
      than they hide.
    * ``B > 64``: two groups on 64 x 256 tiles with 32-column chunks, 3-10% faster than three groups on
      64 x 128 through ``sample()`` on all five harness shapes at B=128 and B=256 (fewer re-reads of the weights
      from L2, wider MMAs; session 12 found the L2 below its limit there).  128 x 128 tiles were no faster.

    The exact noise in every token: the approximate filter (``noise_filter``) measured -7% to +4% at B=256 in five
    comparisons (sessions 8-9), no consistent gain, and 2-4% slower at B=128 and B=64; it stays an option."""
    ws = {"num_warps": 4, "warp_specialized": True}
    wide = TileConfig(64, 256, 64, num_stages=4, epilogue_v=32, warp_groups=2, **ws)
    if B <= 16:
        return None
    if B <= 32:
        fills = V is not None and sms is not None and last_wave_fill(cdiv(V, 256), sms) >= SMALL_BATCH_WAVE_FILL
        return wide if fills else None
    if B <= 64:
        return TileConfig(64, 128, 64, num_stages=6, epilogue_v=16, warp_groups=2, **ws)
    return wide


def choose_tiles(hidden: torch.Tensor, weight: torch.Tensor, num_samples: int) -> TileConfig:
    """The default tiles of a ``sample`` call: the Gluon kernel's (:func:`warp_specialized_tiles`)
    where it runs (sm_90, one sample) and is the default for this shape, else the Triton kernels'
    (:func:`default_tiles`)."""
    B, D = hidden.shape
    V = weight.shape[0]
    ws = None
    if num_samples == 1 and B > 16 and hidden.is_cuda:
        ws = warp_specialized_tiles(B, V, sm_count(hidden.device))
    if ws is not None and warp_specialized_supported(hidden, weight):
        return ws
    return default_tiles(B, V, D, hidden.element_size())


def logits_tiles(B: int, V: int, block_b: int | None = None, block_v: int | None = None) -> tuple[int, int]:
    """(block_b, block_v) for the logits kernel: the caller's, checked to be powers of two, or the
    defaults -- 4 x 1024 compiled; as large as 64K elements interpreted."""
    V = max(V, 1)
    if UPCAST_DOT:
        dbb = min(64, next_power_of_2(B))
        dbv = max(16, min(next_power_of_2(V), (1 << 16) // dbb))
    else:
        dbb, dbv = min(4, next_power_of_2(B)), max(16, min(1024, next_power_of_2(V)))
    bb, bv = block_b or dbb, block_v or dbv
    for name, v in (("block_b", bb), ("block_v", bv)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1 or v & (v - 1):
            raise ValueError(f"{name}={v} must be a power of two")
    return bb, bv


@triton.jit(do_not_specialize=["seed_lo", "seed_hi", "col_offset", "num_samples"])
def fused_stage1_kernel(
    h_ptr,
    w_ptr,
    inv_temp_ptr,
    part_max_ptr,
    part_key_ptr,
    part_idx_ptr,
    flag_ptr,
    lse_ptr,
    scratch_ptr,
    B,
    V,
    D,
    col_offset,
    num_samples,
    seed_lo,
    seed_hi,
    stride_hb,
    stride_hd,
    stride_wv,
    stride_wd,
    BLOCK_SIZE_B: tl.constexpr,
    BLOCK_SIZE_V: tl.constexpr,
    BLOCK_SIZE_D: tl.constexpr,
    UPCAST: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    N_ROUNDS: tl.constexpr,
    RETURN_LSE: tl.constexpr,
    PAIRED: tl.constexpr,
    NOISE: tl.constexpr,
    EPILOGUE_V: tl.constexpr,
):
    """``(B,D) @ (D,V) -> per tile argmax_V(z * (1/T) + G)`` with ``z`` accumulated in fp32."""
    pid = tl.program_id(0)
    num_b_tiles = tl.cdiv(B, BLOCK_SIZE_B)
    num_v_tiles = tl.cdiv(V, BLOCK_SIZE_V)
    pid_b = pid % num_b_tiles
    pid_v = pid // num_b_tiles
    rows = pid_b * BLOCK_SIZE_B + tl.arange(0, BLOCK_SIZE_B)
    cols = pid_v * BLOCK_SIZE_V + tl.arange(0, BLOCK_SIZE_V)
    row_ok = rows < B
    col_ok = cols < V
    rows64 = rows.to(tl.int64)
    cols64 = cols.to(tl.int64)
    acc = tl.zeros([BLOCK_SIZE_B, BLOCK_SIZE_V], dtype=tl.float32)
    for k in range(0, D, BLOCK_SIZE_D):
        ks = k + tl.arange(0, BLOCK_SIZE_D)
        k_ok = ks < D
        h = tl.load(
            h_ptr + rows64[:, None] * stride_hb + ks[None, :] * stride_hd,
            mask=row_ok[:, None] & k_ok[None, :],
            other=0.0,
        )
        w = tl.load(
            w_ptr + cols64[None, :] * stride_wv + ks[:, None] * stride_wd,
            mask=k_ok[:, None] & col_ok[None, :],
            other=0.0,
        )
        if UPCAST:
            h = h.to(tl.float32)
            w = w.to(tl.float32)
        acc = tl.dot(h, w, acc, input_precision=INPUT_PRECISION)
    tile_epilogue(
        acc, pid, pid_b, pid_v, num_v_tiles, B, V, col_offset, num_samples, seed_lo, seed_hi, inv_temp_ptr,
        part_max_ptr, part_key_ptr, part_idx_ptr, flag_ptr, lse_ptr, scratch_ptr,
        BLOCK_SIZE_B, BLOCK_SIZE_V, N_ROUNDS, RETURN_LSE, PAIRED, NOISE, EPILOGUE_V,
    )  # fmt: skip


@triton.jit(do_not_specialize=["seed_lo", "seed_hi", "col_offset", "num_samples"])
def logits_stage1_kernel(
    z_ptr,
    inv_temp_ptr,
    part_max_ptr,
    part_key_ptr,
    part_idx_ptr,
    flag_ptr,
    lse_ptr,
    B,
    V,
    col_offset,
    num_samples,
    seed_lo,
    seed_hi,
    stride_zb,
    stride_zv,
    BLOCK_SIZE_B: tl.constexpr,
    BLOCK_SIZE_V: tl.constexpr,
    N_ROUNDS: tl.constexpr,
    RETURN_LSE: tl.constexpr,
    PAIRED: tl.constexpr,
    NOISE: tl.constexpr,
):
    """``(B,V)`` logits -> per tile argmax_V(z * (1/T) + G); ``-inf`` logits are masked tokens."""
    pid = tl.program_id(0)
    num_b_tiles = tl.cdiv(B, BLOCK_SIZE_B)
    num_v_tiles = tl.cdiv(V, BLOCK_SIZE_V)
    pid_b = pid % num_b_tiles
    pid_v = pid // num_b_tiles
    rows = pid_b * BLOCK_SIZE_B + tl.arange(0, BLOCK_SIZE_B)
    cols = pid_v * BLOCK_SIZE_V + tl.arange(0, BLOCK_SIZE_V)
    row_ok = rows < B
    col_ok = cols < V
    rows64 = rows.to(tl.int64)
    cols64 = cols.to(tl.int64)
    z = tl.load(
        z_ptr + rows64[:, None] * stride_zb + cols64[None, :] * stride_zv,
        mask=row_ok[:, None] & col_ok[None, :],
        other=float("-inf"),
    ).to(tl.float32)
    inv_temp = tl.load(inv_temp_ptr + rows64, mask=row_ok, other=1.0)
    perturb_select_store(
        z,
        rows,
        cols,
        col_offset,
        row_ok,
        col_ok,
        inv_temp,
        seed_lo.to(tl.uint32),
        seed_hi.to(tl.uint32),
        num_samples,
        pid_v,
        num_v_tiles,
        part_max_ptr,
        part_key_ptr,
        part_idx_ptr,
        flag_ptr,
        lse_ptr,
        BLOCK_SIZE_B,
        BLOCK_SIZE_V,
        True,
        N_ROUNDS,
        RETURN_LSE,
        PAIRED,
        NOISE,
    )


def allocate_partials(B: int, S: int, T: int, device, return_lse: bool = False) -> tuple[torch.Tensor, ...]:
    """Candidate buffers ``[B, S, T]`` (max fp32, key int64, global index int64), flags ``[B, T]``
    and, with ``return_lse``, the tiles' log-masses ``[B, T]`` fp32 (else a 1-element dummy)."""
    return (
        torch.empty((B, S, T), dtype=torch.float32, device=device),
        torch.empty((B, S, T), dtype=torch.int64, device=device),
        torch.empty((B, S, T), dtype=torch.int64, device=device),
        torch.empty((B, T), dtype=torch.int32, device=device),
        torch.empty((B, T) if return_lse else (1,), dtype=torch.float32, device=device),
    )


def launch_fused_stage1(
    hidden, weight, inv_temp, seed_lo, seed_hi, num_samples, tiles: TileConfig, *,
    col_offset: int = 0, return_lse: bool = False, n_rounds: int = 10, noise: bool = True,
    compiled: list | None = None,
):  # fmt: skip
    """Allocate the buffers and launch stage 1 on ``hidden [B, D]`` and ``weight [V, D]``.

    ``weight`` row ``v`` is global vocabulary index ``col_offset + v`` (a shard of a larger
    vocabulary).  Returns ``(part_max, part_key, part_idx, flags, lse)`` (see :func:`allocate_partials`).
    ``noise=False`` skips the noise (``sample`` with a temperature of 0: a greedy row's score is ``z`` either way);
    ``n_rounds`` exists for benchmarks that time the noise's parts; ``compiled``,
    if given, receives the compiled kernel (registers, spills and shared memory for the reports).
    """
    B, D = hidden.shape
    V = weight.shape[0]
    persistent = tiles.persistent and tma_compatible(hidden, weight)
    one_sample = num_samples == 1 and not return_lse
    pingpong = tiles.warp_specialized and one_sample and warp_specialized_supported(hidden, weight, col_offset)
    T = cdiv(V, tiles.block_v if pingpong else tiles.candidate_v)
    parts = allocate_partials(B, num_samples, T, hidden.device, return_lse)
    upcast = UPCAST_DOT or hidden.dtype == torch.float32 or weight.dtype == torch.float32
    if pingpong:
        from .handoff import launch_handoff
        from .pingpong import launch_pingpong

        kernel = (launch_handoff if tiles.handoff else launch_pingpong)(
            hidden, weight, inv_temp, parts, seed_lo, seed_hi, tiles, col_offset=col_offset, n_rounds=n_rounds,
            noise=noise, noise_filter=tiles.noise_filter,
        )  # fmt: skip
    elif persistent:
        kernel = launch_persistent(
            hidden, weight, inv_temp, parts, seed_lo, seed_hi, num_samples, tiles, col_offset=col_offset,
            return_lse=return_lse, n_rounds=n_rounds, noise=noise, upcast=upcast,
        )  # fmt: skip
    else:
        grid = (cdiv(B, tiles.block_b) * cdiv(V, tiles.block_v),)
        # The staged epilogue's scratch: one fp32 tile per program (B_pad * V_pad * 4 bytes).
        scratch_numel = grid[0] * tiles.block_b * tiles.block_v if tiles.epilogue_v else 1
        scratch = torch.empty(scratch_numel, dtype=torch.float32, device=hidden.device)
        kernel = direct(fused_stage1_kernel)[grid](
            hidden, weight, inv_temp, *parts, scratch,
            B, V, D, col_offset, num_samples, seed_lo, seed_hi,
            hidden.stride(0), hidden.stride(1), weight.stride(0), weight.stride(1),
            BLOCK_SIZE_B=tiles.block_b, BLOCK_SIZE_V=tiles.block_v, BLOCK_SIZE_D=tiles.block_d,
            UPCAST=upcast, INPUT_PRECISION="ieee" if upcast else "tf32", N_ROUNDS=n_rounds, RETURN_LSE=return_lse,
            PAIRED=col_offset % 2 == 0, NOISE=noise, EPILOGUE_V=tiles.epilogue_v, **tiles.launch_options(),
        )  # fmt: skip
    if compiled is not None:
        compiled.append(kernel)
    return parts


def warp_specialized_supported(hidden: torch.Tensor, weight: torch.Tensor, col_offset: int = 0) -> bool:
    """Whether the Gluon kernel of :mod:`.pingpong` can run on these inputs: compiled on an sm_90 GPU,
    16-bit inputs of one dtype that TMA can read, a shard starting on an even column."""
    if UPCAST_DOT or not hidden.is_cuda:
        return False
    index = hidden.device.index if hidden.device.index is not None else torch.cuda.current_device()
    return (
        _is_sm90(index)
        and hidden.dtype in (torch.bfloat16, torch.float16)
        and weight.dtype == hidden.dtype
        and col_offset % 2 == 0
        and tma_compatible(hidden, weight)
    )


@functools.cache
def _is_sm90(index: int) -> bool:
    """Whether CUDA device ``index`` is a Hopper GPU (cached: the query costs microseconds)."""
    return torch.cuda.get_device_capability(index)[0] == 9


def launch_logits_stage1(
    logits, inv_temp, seed_lo, seed_hi, num_samples, block_b: int, block_v: int, *,
    col_offset: int = 0, return_lse: bool = False, n_rounds: int = 10, noise: bool = True,
):  # fmt: skip
    """Allocate the buffers and launch stage 1 on ``logits [B, V]`` (column ``v`` = global index
    ``col_offset + v``).  Returns ``(part_max, part_key, part_idx, flags, lse)``."""
    B, V = logits.shape
    T = cdiv(V, block_v)
    parts = allocate_partials(B, num_samples, T, logits.device, return_lse)
    grid = (cdiv(B, block_b) * T,)
    direct(logits_stage1_kernel)[grid](
        logits, inv_temp, *parts,
        B, V, col_offset, num_samples, seed_lo, seed_hi,
        logits.stride(0), logits.stride(1),
        BLOCK_SIZE_B=block_b, BLOCK_SIZE_V=block_v, N_ROUNDS=n_rounds, RETURN_LSE=return_lse,
        PAIRED=col_offset % 2 == 0, NOISE=noise,
    )  # fmt: skip
    return parts
