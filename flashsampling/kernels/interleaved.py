"""Stage 1, persistent and interleaved: tile n's epilogue runs inside tile n + 1's K loop.

In :mod:`.persistent` every program runs its tiles' matmul and epilogue one after the other, so the
tensor cores idle while the noise is drawn.  Here the epilogue of a program's previous tile is cut
into ``EPILOGUE_V``-wide column pieces and one piece runs every ``stride`` K steps of the current
tile, between the asynchronous warp-group MMAs::

    for n, tile in enumerate(my_tiles):
        for ki in range(k_tiles):
            acc += h_desc.load(...) @ w_desc.load(...).T          # async MMA, in flight ...
            if n > 0 and ki % stride == 0:                          # ... while the piece runs
                piece ki // stride of tile n - 1 (from the scratch slot): noise, max, merge
        store tile n - 1's candidate ; acc -> scratch slot
    finish the last tile's pieces ; store its candidate

``stride = max(1, k_tiles // pieces)`` with ``pieces = BLOCK_SIZE_V // EPILOGUE_V``; pieces left
over when ``k_tiles < pieces`` run after the K loop.  The pieces of a tile merge in registers into
one candidate per (row, tile) by the rule of stage 2 (larger score; on an exact float32 tie, the
larger tie-break key), so the candidates are those of the unstaged kernel with the same
``block_v`` bit for bit (``tests/test_validation.py``).  One scratch slot per program suffices:
every piece of tile n - 1 is read before tile n's accumulator is stored.

Only one sample per row and no log-masses (the decoding step): the K loop must stay free of
nested loops for triton's software pipeliner, and a streamed log-sum-exp would not equal the
one-pass value of the other kernels.  :func:`~flashsampling.kernels.fused.launch_fused_stage1`
falls back to :mod:`.persistent` otherwise.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from .._device import device_function
from ..noise import tie_key
from .persistent import num_programs, programs_per_sm
from .select import scores_and_flags, select_chunk_position


@device_function
def epilogue_piece(
    c, slot, r_loc, rows, row_ok, pid_v, V, col_offset, inv_temp, k0, k1, run_m, run_pos, run_flag,
    BLOCK_SIZE_B: tl.constexpr, BLOCK_SIZE_V: tl.constexpr, EPILOGUE_V: tl.constexpr, N_ROUNDS: tl.constexpr,
    PAIRED: tl.constexpr, NOISE: tl.constexpr,
):  # fmt: skip
    """Piece ``c`` (columns ``c * EPILOGUE_V`` on) of the staged tile in ``slot``: perturb, take each
    row's max and merge it into the running ``(run_m, run_pos, run_flag)`` of the tile."""
    c_loc = c * EPILOGUE_V + tl.arange(0, EPILOGUE_V)
    z = tl.load(slot + r_loc + c_loc[None, :])
    base, flag, greedy = scores_and_flags(z, row_ok, pid_v * BLOCK_SIZE_V + c_loc < V, inv_temp, False)
    tile_start = col_offset + pid_v.to(tl.int64) * BLOCK_SIZE_V
    u_rows = rows.to(tl.uint32)
    c_smp = tl.zeros([1, 1], dtype=tl.uint32)
    m, pos = select_chunk_position(
        base, (~greedy)[:, None], u_rows, c_smp, tile_start + c * EPILOGUE_V, k0, k1,
        BLOCK_SIZE_B, EPILOGUE_V, N_ROUNDS, PAIRED, NOISE,
    )  # fmt: skip
    pos = c * EPILOGUE_V + pos.to(tl.int32)
    better = m > run_m
    tie = (m == run_m) & (m > float("-inf"))
    if tl.max(tie.to(tl.int32), axis=0) > 0:
        # An exact float32 tie with an earlier piece's winner (rare): the larger key wins, as in stage 2.
        smp = tl.zeros([1], dtype=tl.uint32)
        k_new = tie_key(k0, k1, u_rows, (tile_start + pos).to(tl.uint32), smp, N_ROUNDS).to(tl.int64)
        k_old = tie_key(k0, k1, u_rows, (tile_start + run_pos).to(tl.uint32), smp, N_ROUNDS).to(tl.int64)
        better = better | (tie & (k_new > k_old))
    return tl.where(better, m, run_m), tl.where(better, pos, run_pos), run_flag | flag


@device_function
def store_tile_candidate(
    rows, row_ok, pid_v, num_v_tiles, col_offset, k0, k1, run_m, run_pos, run_flag,
    part_max_ptr, part_key_ptr, part_idx_ptr, flag_ptr, BLOCK_SIZE_V: tl.constexpr, N_ROUNDS: tl.constexpr,
):  # fmt: skip
    """Write the merged candidate ``(max, key, global index)`` and the flags of tile ``pid_v``."""
    idx = col_offset + pid_v.to(tl.int64) * BLOCK_SIZE_V + run_pos
    key = tie_key(k0, k1, rows.to(tl.uint32), idx.to(tl.uint32), tl.zeros([1], dtype=tl.uint32), N_ROUNDS)
    off = rows.to(tl.int64) * num_v_tiles + pid_v
    tl.store(part_max_ptr + off, run_m, mask=row_ok)
    tl.store(part_key_ptr + off, key.to(tl.int64), mask=row_ok)
    tl.store(part_idx_ptr + off, idx, mask=row_ok)
    tl.store(flag_ptr + off, run_flag, mask=row_ok)


@triton.jit(do_not_specialize=["seed_lo", "seed_hi", "col_offset"])
def fused_interleaved_kernel(
    h_desc,
    w_desc,
    inv_temp_ptr,
    part_max_ptr,
    part_key_ptr,
    part_idx_ptr,
    flag_ptr,
    scratch_ptr,
    B,
    V,
    D,
    col_offset,
    seed_lo,
    seed_hi,
    BLOCK_SIZE_B: tl.constexpr,
    BLOCK_SIZE_V: tl.constexpr,
    BLOCK_SIZE_D: tl.constexpr,
    NUM_PROGRAMS: tl.constexpr,
    UPCAST: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    N_ROUNDS: tl.constexpr,
    PAIRED: tl.constexpr,
    NOISE: tl.constexpr,
    EPILOGUE_V: tl.constexpr,
):
    """Persistent ``(B,D) @ (D,V) -> per tile argmax_V(z * (1/T) + G)``, one sample, the epilogue of
    each tile interleaved with the next tile's MMAs."""
    program = tl.program_id(0)
    num_b_tiles = tl.cdiv(B, BLOCK_SIZE_B)
    num_v_tiles = tl.cdiv(V, BLOCK_SIZE_V)
    num_tiles = num_b_tiles * num_v_tiles
    k_tiles = tl.cdiv(D, BLOCK_SIZE_D)
    PIECES: tl.constexpr = BLOCK_SIZE_V // EPILOGUE_V
    stride = tl.maximum(k_tiles // PIECES, 1)
    in_loop = tl.minimum(tl.cdiv(k_tiles, stride), PIECES)
    slot = scratch_ptr + program.to(tl.int64) * (BLOCK_SIZE_B * BLOCK_SIZE_V)
    r_loc = tl.arange(0, BLOCK_SIZE_B)[:, None] * BLOCK_SIZE_V
    k0 = seed_lo.to(tl.uint32)
    k1 = seed_hi.to(tl.uint32)
    prev_b = program * 0 - 1  # the previous tile's (pid_b, pid_v); pid_b < 0: none yet
    prev_v = program * 0
    for tile in range(program, num_tiles, NUM_PROGRAMS):
        pid_b = tile % num_b_tiles
        pid_v = tile // num_b_tiles
        has_prev = prev_b >= 0
        rows = prev_b * BLOCK_SIZE_B + tl.arange(0, BLOCK_SIZE_B)
        row_ok = (rows < B) & has_prev
        inv_temp = tl.load(inv_temp_ptr + rows.to(tl.int64), mask=row_ok, other=1.0)
        run_m = tl.full([BLOCK_SIZE_B], float("-inf"), tl.float32)
        run_pos = tl.zeros([BLOCK_SIZE_B], dtype=tl.int32)
        run_flag = tl.zeros([BLOCK_SIZE_B], dtype=tl.int32)
        acc = tl.zeros([BLOCK_SIZE_B, BLOCK_SIZE_V], dtype=tl.float32)
        for ki in range(k_tiles):
            h = h_desc.load([pid_b * BLOCK_SIZE_B, ki * BLOCK_SIZE_D])
            w = w_desc.load([pid_v * BLOCK_SIZE_V, ki * BLOCK_SIZE_D])
            if UPCAST:
                h = h.to(tl.float32)
                w = w.to(tl.float32)
            acc = tl.dot(h, w.T, acc, input_precision=INPUT_PRECISION)
            if has_prev & (ki % stride == 0) & (ki // stride < PIECES):
                run_m, run_pos, run_flag = epilogue_piece(
                    ki // stride, slot, r_loc, rows, row_ok, prev_v, V, col_offset, inv_temp, k0, k1,
                    run_m, run_pos, run_flag, BLOCK_SIZE_B, BLOCK_SIZE_V, EPILOGUE_V, N_ROUNDS, PAIRED, NOISE,
                )  # fmt: skip
        if has_prev:
            for c in range(in_loop, PIECES):
                run_m, run_pos, run_flag = epilogue_piece(
                    c, slot, r_loc, rows, row_ok, prev_v, V, col_offset, inv_temp, k0, k1,
                    run_m, run_pos, run_flag, BLOCK_SIZE_B, BLOCK_SIZE_V, EPILOGUE_V, N_ROUNDS, PAIRED, NOISE,
                )  # fmt: skip
            store_tile_candidate(
                rows, row_ok, prev_v, num_v_tiles, col_offset, k0, k1, run_m, run_pos, run_flag,
                part_max_ptr, part_key_ptr, part_idx_ptr, flag_ptr, BLOCK_SIZE_V, N_ROUNDS,
            )  # fmt: skip
        # Every piece of the previous tile has been read: the slot can take this tile.
        tl.debug_barrier()
        tl.store(slot + r_loc + tl.arange(0, BLOCK_SIZE_V)[None, :], acc)
        tl.debug_barrier()
        prev_b = pid_b
        prev_v = pid_v
    # The last tile's epilogue, with no MMA left to hide under.
    if prev_b >= 0:
        rows = prev_b * BLOCK_SIZE_B + tl.arange(0, BLOCK_SIZE_B)
        row_ok = rows < B
        inv_temp = tl.load(inv_temp_ptr + rows.to(tl.int64), mask=row_ok, other=1.0)
        run_m = tl.full([BLOCK_SIZE_B], float("-inf"), tl.float32)
        run_pos = tl.zeros([BLOCK_SIZE_B], dtype=tl.int32)
        run_flag = tl.zeros([BLOCK_SIZE_B], dtype=tl.int32)
        for c in range(0, PIECES):
            run_m, run_pos, run_flag = epilogue_piece(
                c, slot, r_loc, rows, row_ok, prev_v, V, col_offset, inv_temp, k0, k1,
                run_m, run_pos, run_flag, BLOCK_SIZE_B, BLOCK_SIZE_V, EPILOGUE_V, N_ROUNDS, PAIRED, NOISE,
            )  # fmt: skip
        store_tile_candidate(
            rows, row_ok, prev_v, num_v_tiles, col_offset, k0, k1, run_m, run_pos, run_flag,
            part_max_ptr, part_key_ptr, part_idx_ptr, flag_ptr, BLOCK_SIZE_V, N_ROUNDS,
        )  # fmt: skip


def launch_interleaved(
    hidden, weight, inv_temp, parts, seed_lo, seed_hi, tiles, *, col_offset, n_rounds, noise, upcast,
):  # fmt: skip
    """Launch :func:`fused_interleaved_kernel` (one sample per row) into the candidate buffers
    ``parts`` (one candidate per ``block_v`` tile); returns the compiled kernel."""
    B, D = hidden.shape
    V = weight.shape[0]
    num_tiles = triton.cdiv(B, tiles.block_b) * triton.cdiv(V, tiles.block_v)
    progs = num_programs(hidden.device, num_tiles, programs_per_sm(tiles, hidden.element_size()))
    scratch = torch.empty(progs * tiles.block_b * tiles.block_v, dtype=torch.float32, device=hidden.device)
    h_desc = TensorDescriptor.from_tensor(hidden, block_shape=[tiles.block_b, tiles.block_d])
    w_desc = TensorDescriptor.from_tensor(weight, block_shape=[tiles.block_v, tiles.block_d])
    part_max, part_key, part_idx, flags, _ = parts
    return fused_interleaved_kernel[(progs,)](
        h_desc, w_desc, inv_temp, part_max, part_key, part_idx, flags, scratch,
        B, V, D, col_offset, seed_lo, seed_hi,
        BLOCK_SIZE_B=tiles.block_b, BLOCK_SIZE_V=tiles.block_v, BLOCK_SIZE_D=tiles.block_d, NUM_PROGRAMS=progs,
        UPCAST=upcast, INPUT_PRECISION="ieee" if upcast else "tf32", N_ROUNDS=n_rounds,
        PAIRED=col_offset % 2 == 0, NOISE=noise, EPILOGUE_V=tiles.epilogue_v, **tiles.launch_options(),
    )  # fmt: skip
