"""Stage 1, persistent: one program per SM walks the tiles, weights streamed by TMA descriptors.

The same computation as :func:`~flashsampling.kernels.stage1.fused_stage1_kernel` (same tiles, same
epilogue :func:`~flashsampling.kernels.epilogue.tile_epilogue`, so the same candidates), arranged for
the Hopper memory system::

    for tile in range(program, num_tiles, NUM_PROGRAMS):      # flattened with the K loop
        pid_b = tile % num_b_tiles ; pid_v = tile // num_b_tiles
        for k in range(0, D, BLOCK_SIZE_D):
            acc += h_desc.load([pid_b*BB, k]) @ w_desc.load([pid_v*BV, k]).T
        tile_epilogue(acc, ...)                                # scratch slot = program id

With ``FLATTEN`` the compiler fuses the two loops into one software pipeline, so the loads of the
next tile's first K blocks are in flight while this tile's epilogue (noise, max) runs: the noise
overlaps the weight stream instead of following it.  Programs are launched for every SM slot
(:func:`programs_per_sm`: more than one when ``TileConfig.max_registers`` and the pipeline's
shared memory allow it, so that one program's epilogue runs under another's matmul).  The staged
epilogue's scratch is one slot per program (``NUM_PROGRAMS * BB * BV * 4`` bytes, 17 MB for 132
programs of 128 x 256), not one per tile.

TMA needs the last dimension contiguous, the other strides and the base 16-byte aligned;
:func:`~flashsampling.kernels.hardware.tma_compatible` says whether a pair of inputs qualifies (otherwise the
dispatcher runs the pointer kernel).  Out-of-range rows, columns and K blocks are zero-filled by the descriptor.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from .epilogue import device_seed_words, epilogue_constants, tile_epilogue
from .hardware import num_programs
from .launch import cdiv, direct


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
    SEED_PTR: tl.constexpr = False,
    ROW_SEEDS: tl.constexpr = False,
):
    """Persistent ``(B,D) @ (D,V) -> per tile argmax_V(z * (1/T) + G)``, fp32 accumulation.  ``SEED_PTR`` and
    ``ROW_SEEDS`` as in :func:`~.stage1.fused_stage1_kernel`."""
    if SEED_PTR:
        seed_lo, seed_hi = device_seed_words(seed_lo)
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
            BLOCK_SIZE_B, BLOCK_SIZE_V, N_ROUNDS, RETURN_LSE, PAIRED, NOISE, EPILOGUE_V, ROW_SEEDS,
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


def persistent_arguments(hidden, weight, inv_temp, parts, seed_lo, seed_hi, num_samples, tiles, col_offset: int):
    """``(grid, args)`` of :func:`fused_persistent_kernel` writing into the candidate buffers ``parts``: one program
    per SM slot (:func:`programs_per_sm`), the TMA descriptors, and the staged epilogue's scratch (one slot per
    program) when ``tiles.epilogue_v``."""
    B, D = hidden.shape
    V = weight.shape[0]
    num_tiles = cdiv(B, tiles.block_b) * cdiv(V, tiles.block_v)
    progs = num_programs(hidden.device, num_tiles, programs_per_sm(tiles, hidden.element_size()))
    scratch_numel = progs * tiles.block_b * tiles.block_v if tiles.epilogue_v else 1
    scratch = torch.empty(scratch_numel, dtype=torch.float32, device=hidden.device)
    h_desc = TensorDescriptor.from_tensor(hidden, block_shape=[tiles.block_b, tiles.block_d])
    w_desc = TensorDescriptor.from_tensor(weight, block_shape=[tiles.block_v, tiles.block_d])
    args = (h_desc, w_desc, inv_temp, *parts, scratch, B, V, D, col_offset, num_samples, seed_lo, seed_hi)
    return (progs,), args


def launch_persistent(
    hidden, weight, inv_temp, parts, seed_lo, seed_hi, num_samples, tiles, *, col_offset, return_lse, noise, upcast
):
    """Launch :func:`fused_persistent_kernel` into the candidate buffers ``parts``; returns the compiled kernel.
    (Triton's ``warp_specialize`` was also tried on this kernel and compiled to the same code on the H200, so it is
    not offered.)"""
    grid, args = persistent_arguments(hidden, weight, inv_temp, parts, seed_lo, seed_hi, num_samples, tiles,
                                      col_offset)  # fmt: skip
    consts = epilogue_constants(return_lse=return_lse, noise=noise, col_offset=col_offset)
    if isinstance(seed_lo, torch.Tensor):  # a device seed (0-dim) or per-request seeds ([B]): the kernel loads them
        consts["ROW_SEEDS" if seed_lo.dim() == 1 else "SEED_PTR"] = True
    return direct(fused_persistent_kernel)[grid](
        *args, **tiles.matmul_constants(upcast), NUM_PROGRAMS=grid[0], FLATTEN=True, **consts,
        EPILOGUE_V=tiles.epilogue_v, **tiles.launch_options(),
    )  # fmt: skip
