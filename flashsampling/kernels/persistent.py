"""Stage 1, persistent: one program per SM walks the tiles, weights streamed by TMA descriptors.

The same computation as :func:`~flashsampling.kernels.fused.fused_stage1_kernel` (same tiles, same
epilogue :func:`~flashsampling.kernels.select.tile_epilogue`, so the same candidates), arranged for
the Hopper memory system::

    for tile in range(program, num_tiles, NUM_PROGRAMS):      # flattened with the K loop
        pid_b = tile % num_b_tiles ; pid_v = tile // num_b_tiles
        for k in range(0, D, BLOCK_SIZE_D):
            acc += h_desc.load([pid_b*BB, k]) @ w_desc.load([pid_v*BV, k]).T
        tile_epilogue(acc, ...)                                # scratch slot = program id

With ``flatten`` the compiler fuses the two loops into one software pipeline, so the loads of the
next tile's first K blocks are in flight while this tile's epilogue (noise, max) runs: the noise
overlaps the weight stream instead of following it.  Programs are launched for every SM slot
(:func:`programs_per_sm`: more than one when ``TileConfig.max_registers`` and the pipeline's
shared memory allow it, so that one program's epilogue runs under another's matmul).  The staged
epilogue's scratch is one slot per program (``NUM_PROGRAMS * BB * BV * 4`` bytes, 17 MB for 132
programs of 128 x 256), not one per tile.

TMA needs the last dimension contiguous, the other strides and the base 16-byte aligned;
:func:`tma_compatible` says whether a pair of inputs qualifies (otherwise the caller uses the
pointer kernel).  Out-of-range rows, columns and K blocks are zero-filled by the descriptor.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from .launch import cdiv, direct
from .select import tile_epilogue


def tma_compatible(*tensors: torch.Tensor) -> bool:
    """Whether every tensor can be read through a TMA descriptor (2-D, unit last stride, 16-byte
    aligned base and row stride)."""
    for t in tensors:
        if t.dim() != 2 or t.stride(1) != 1 or (t.stride(0) * t.element_size()) % 16 or t.data_ptr() % 16:
            return False
    return True


@triton.jit(do_not_specialize=["seed_lo", "seed_hi", "col_offset", "num_samples"])
def fused_persistent_kernel(
    h_desc,
    w_desc,
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
    BLOCK_SIZE_B: tl.constexpr,
    BLOCK_SIZE_V: tl.constexpr,
    BLOCK_SIZE_D: tl.constexpr,
    NUM_PROGRAMS: tl.constexpr,
    UPCAST: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    N_ROUNDS: tl.constexpr,
    RETURN_LSE: tl.constexpr,
    PAIRED: tl.constexpr,
    NOISE: tl.constexpr,
    EPILOGUE_V: tl.constexpr,
    FLATTEN: tl.constexpr,
):
    """Persistent ``(B,D) @ (D,V) -> per tile argmax_V(z * (1/T) + G)``, fp32 accumulation."""
    program = tl.program_id(0)
    num_b_tiles = tl.cdiv(B, BLOCK_SIZE_B)
    num_v_tiles = tl.cdiv(V, BLOCK_SIZE_V)
    num_tiles = num_b_tiles * num_v_tiles
    k_tiles = tl.cdiv(D, BLOCK_SIZE_D)
    for tile in tl.range(program, num_tiles, NUM_PROGRAMS, flatten=FLATTEN):
        pid_b = tile % num_b_tiles
        pid_v = tile // num_b_tiles
        acc = tl.zeros([BLOCK_SIZE_B, BLOCK_SIZE_V], dtype=tl.float32)
        for ki in range(k_tiles):
            h = h_desc.load([pid_b * BLOCK_SIZE_B, ki * BLOCK_SIZE_D])
            w = w_desc.load([pid_v * BLOCK_SIZE_V, ki * BLOCK_SIZE_D])
            if UPCAST:
                h = h.to(tl.float32)
                w = w.to(tl.float32)
            acc = tl.dot(h, w.T, acc, input_precision=INPUT_PRECISION)
        tile_epilogue(
            acc, program, pid_b, pid_v, num_v_tiles, B, V, col_offset, num_samples, seed_lo, seed_hi, inv_temp_ptr,
            part_max_ptr, part_key_ptr, part_idx_ptr, flag_ptr, lse_ptr, scratch_ptr,
            BLOCK_SIZE_B, BLOCK_SIZE_V, N_ROUNDS, RETURN_LSE, PAIRED, NOISE, EPILOGUE_V,
        )  # fmt: skip


def programs_per_sm(tiles, element_size: int) -> int:
    """How many programs of ``tiles`` one SM holds at once: 64K registers (at ``max_registers`` per
    thread, else up to 255) and 227 KB of shared memory (the pipeline's
    ``num_stages * (block_b + block_v) * block_d * element_size`` bytes)."""
    regs = tiles.max_registers or 255
    by_regs = 65536 // (regs * 32 * tiles.num_warps)
    smem = tiles.num_stages * (tiles.block_b + tiles.block_v) * tiles.block_d * element_size
    by_smem = (227 * 1024) // max(1, smem)
    return max(1, min(by_regs, by_smem))


def num_programs(device: torch.device, num_tiles: int, per_sm: int = 1) -> int:
    """``per_sm`` programs per SM (never more programs than tiles); 4 in the interpreter."""
    if device.type != "cuda":
        return max(1, min(4, num_tiles))
    return max(1, min(sm_count(device) * per_sm, num_tiles))


def sm_count(device: torch.device) -> int:
    """SMs of the CUDA device ``device`` (its index, or the current device's)."""
    return _sm_count(device.index if device.index is not None else torch.cuda.current_device())


@functools.cache
def _sm_count(index: int) -> int:
    """SMs of CUDA device ``index`` (cached: the query costs microseconds on every launch)."""
    return torch.cuda.get_device_properties(index).multi_processor_count


def launch_persistent(
    hidden, weight, inv_temp, parts, seed_lo, seed_hi, num_samples, tiles, *, col_offset, return_lse,
    n_rounds, noise, upcast, flatten: bool = True,
):  # fmt: skip
    """Launch :func:`fused_persistent_kernel` into the candidate buffers ``parts``; returns the
    compiled kernel.  ``flatten=False`` compiles the tile and K loops separately (a benchmark
    comparison; triton's ``warp_specialize`` was also tried and compiled to the same kernel on the
    H200, so it is not offered)."""
    B, D = hidden.shape
    V = weight.shape[0]
    num_tiles = cdiv(B, tiles.block_b) * cdiv(V, tiles.block_v)
    progs = num_programs(hidden.device, num_tiles, programs_per_sm(tiles, hidden.element_size()))
    scratch_numel = progs * tiles.block_b * tiles.block_v if tiles.epilogue_v else 1
    scratch = torch.empty(scratch_numel, dtype=torch.float32, device=hidden.device)
    h_desc = TensorDescriptor.from_tensor(hidden, block_shape=[tiles.block_b, tiles.block_d])
    w_desc = TensorDescriptor.from_tensor(weight, block_shape=[tiles.block_v, tiles.block_d])
    return direct(fused_persistent_kernel)[(progs,)](
        h_desc, w_desc, inv_temp, *parts, scratch,
        B, V, D, col_offset, num_samples, seed_lo, seed_hi,
        BLOCK_SIZE_B=tiles.block_b, BLOCK_SIZE_V=tiles.block_v, BLOCK_SIZE_D=tiles.block_d, NUM_PROGRAMS=progs,
        UPCAST=upcast, INPUT_PRECISION="ieee" if upcast else "tf32", N_ROUNDS=n_rounds, RETURN_LSE=return_lse,
        PAIRED=col_offset % 2 == 0, NOISE=noise, EPILOGUE_V=tiles.epilogue_v, FLATTEN=flatten,
        **tiles.launch_options(),
    )  # fmt: skip
