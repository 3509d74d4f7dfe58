"""Stage 1 on Hopper with the epilogue handed off: one MMA warp group, separate epilogue warp groups (an
experiment, slower than the shipped kernel; a probe with its own pipeline, which imports the shipped loader, staging
and epilogue).

In :mod:`flashsampling.kernels.pingpong` every consumer group runs its own tile's epilogue, so while one group's
epilogue runs each scheduler has one epilogue warp beside the other group's MMA warp, and the epilogue's instruction
stream is limited by that one warp's latencies (about one issue every 3 cycles alone, dispatch stalls beside the
MMAs: ``benchmarks/results/ncu_b256_raw_*_h200.txt``).  Here the roles are split:

* a **loader** warp streams ``h`` and ``W`` K blocks by TMA into a ring of ``STAGES`` slots (the shipped
  kernel's partition);
* one **MMA** warp group (the default partition) runs every tile's K loop on the tensor cores, writes the
  accumulator to staging buffer ``j % NE`` (tile ``j`` of the program's list) and moves on to the next tile;
* ``NE`` (2 or 3) **epilogue** warp groups: group ``e`` takes tiles ``e, e + NE, ...`` from its own staging
  buffer and runs ``STAGED`` on them (:func:`~flashsampling.kernels.pingpong.staged_epilogue`, or the filter's
  :func:`~benchmarks.probes.approx_filter.filtered_staged_epilogue`) -- the same fast and exact passes, so the
  candidates equal the shipped kernel's (and the unstaged Triton kernel's with ``block_v = BN``) bit for bit.

Each scheduler then holds ``NE`` epilogue warps, whose latencies hide each other's, and the epilogue
warps hold no accumulator, so they have registers to spare.  Two mbarriers per buffer hand it over:
``full`` (the MMA group has stored the tile; it arrives after a barrier of its 4 warps) and ``free`` (the
epilogue group has read it).  An epilogue may take up to ``NE`` tiles' matmul time before the MMA group
waits for its buffer.

Shared memory: ``NE`` buffers of ``BM x BN`` fp32 beside the ring, so the tiles are ``64 x 128`` (32 KB per
buffer).  An experiment, not a default: on the H200 it is slower than the ping-pong kernel at B = 128 and 256,
and the noise costs it as much (``benchmarks/results/handoff_probe_h200.json``: so the noise's cost is not the
single epilogue warp's latency).  Scope as the shipped kernel's: one sample per row, no log-masses, a shard starting
on an even column, bf16/fp16 inputs that TMA can read, compiled on sm_90.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, warpgroup_mma, warpgroup_mma_wait

from flashsampling.kernels.launch import direct
from flashsampling.kernels.pingpong import (
    NOISE_EXACT,
    NOISE_OFF,
    compile_sm90,
    kernel_arguments,
    launch_registers,
    load_partition,
    stage_tile,
    staged_epilogue,
    staging_layout,
)

from .approx_filter import filtered_staged_epilogue
from .tiles import warp_groups


@gluon.jit
def _mma_partition(args, NE: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
                   STAGES: gl.constexpr, NUM_PROGRAMS: gl.constexpr, EV: gl.constexpr):  # fmt: skip
    """The MMA warp group: every tile of this program, in order -- the K loop (one MMA in flight, each
    slot released once the MMA after it is issued), then the accumulator into the tile's staging buffer
    once its epilogue group has finished with the tile before it."""
    (a_bufs, b_bufs, ready, empty, stage, full, free, inv_temp_ptr, part_max_ptr, part_key_ptr, part_idx_ptr,
     flag_ptr, B, V, D, col_offset, seed_lo, seed_hi) = args  # fmt: skip
    program = gl.program_id(0)
    num_tiles = gl.cdiv(B, BM) * gl.cdiv(V, BN)
    k_tiles = gl.cdiv(D, BK)
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16])
    for tile in range(program, num_tiles, NUM_PROGRAMS):
        j = (tile - program) // NUM_PROGRAMS  # the tile's place in this program's list
        it0 = j * k_tiles
        acc = gl.zeros([BM, BN], gl.float32, mma)
        for ki in range(k_tiles):
            it = it0 + ki
            s = it % STAGES
            mbarrier.wait(ready.index(s), (it // STAGES) & 1)
            acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s).permute((1, 0)), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=ki > 0)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty.index((it0 + k_tiles - 1) % STAGES), count=1)
        # Buffer j % NE is free once tile j - NE's epilogue is done: the (j // NE)-th arrival on `free`.
        buf = j % NE
        mbarrier.wait(free.index(buf), ((j // NE) - 1) & 1, pred=j >= NE)
        stage_tile(acc, stage.index(buf), BM, BN, EV)
        mbarrier.arrive(full.index(buf), count=1)


@gluon.jit
def _epilogue_partition(args, E: gl.constexpr, NE: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr,
                        NUM_PROGRAMS: gl.constexpr, EV: gl.constexpr, N_ROUNDS: gl.constexpr,
                        NOISE: gl.constexpr, STAGED: gl.constexpr):  # fmt: skip
    """Epilogue warp group ``E`` of ``NE``: tiles ``E, E + NE, ...`` of this program's list, each from
    staging buffer ``E`` once the MMA group has filled it."""
    (a_bufs, b_bufs, ready, empty, stage, full, free, inv_temp_ptr, part_max_ptr, part_key_ptr, part_idx_ptr,
     flag_ptr, B, V, D, col_offset, seed_lo, seed_hi) = args  # fmt: skip
    program = gl.program_id(0)
    num_b_tiles = gl.cdiv(B, BM)
    num_v_tiles = gl.cdiv(V, BN)
    num_tiles = num_b_tiles * num_v_tiles
    k0 = seed_lo.to(gl.uint32)
    k1 = seed_hi.to(gl.uint32)
    chunks = stage.index(E)._reinterpret(gl.float32, [BN // EV, BM, EV], stage.layout)
    for tile in range(program + E * NUM_PROGRAMS, num_tiles, NE * NUM_PROGRAMS):
        pid_b = tile % num_b_tiles
        pid_v = tile // num_b_tiles
        j = (tile - program) // NUM_PROGRAMS
        mbarrier.wait(full.index(E), (j // NE) & 1)
        STAGED(chunks, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
               part_key_ptr, part_idx_ptr, flag_ptr, BM, BN, EV, N_ROUNDS, NOISE)  # fmt: skip
        mbarrier.arrive(free.index(E), count=1)


@gluon.jit(do_not_specialize=["seed_lo", "seed_hi", "col_offset"])
def fused_handoff_kernel(h_desc, w_desc, inv_temp_ptr, part_max_ptr, part_key_ptr, part_idx_ptr, flag_ptr,
                         B, V, D, col_offset, seed_lo, seed_hi, STAGES: gl.constexpr, NUM_PROGRAMS: gl.constexpr,
                         EV: gl.constexpr, N_ROUNDS: gl.constexpr, NOISE: gl.constexpr, NE: gl.constexpr,
                         EPILOGUE_REGS: gl.constexpr, STAGED: gl.constexpr):  # fmt: skip
    """Persistent, warp-specialized ``(B,D) @ (D,V) -> per (row, BN tile) argmax(z / T + G)`` with one
    MMA warp group and ``NE`` (2 or 3) epilogue warp groups."""
    BM: gl.constexpr = h_desc.block_type.shape[0]
    BK: gl.constexpr = h_desc.block_type.shape[1]
    BN: gl.constexpr = w_desc.block_type.shape[0]
    a_bufs = gl.allocate_shared_memory(h_desc.dtype, [STAGES] + h_desc.block_type.shape, h_desc.layout)
    b_bufs = gl.allocate_shared_memory(w_desc.dtype, [STAGES] + w_desc.block_type.shape, w_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    full = gl.allocate_shared_memory(gl.int64, [NE, 1], mbarrier.MBarrierLayout())
    free = gl.allocate_shared_memory(gl.int64, [NE, 1], mbarrier.MBarrierLayout())
    stage = gl.allocate_shared_memory(gl.float32, [NE, BN // EV * BM, EV], staging_layout(EV))
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    for i in gl.static_range(NE):
        mbarrier.init(full.index(i), count=1)
        mbarrier.init(free.index(i), count=1)
    args = (a_bufs, b_bufs, ready, empty, stage, full, free, inv_temp_ptr, part_max_ptr, part_key_ptr, part_idx_ptr,
            flag_ptr, B, V, D, col_offset, seed_lo, seed_hi)  # fmt: skip
    loads = (h_desc, w_desc, a_bufs, b_bufs, ready, empty, B, V, D, BM, BN, BK, STAGES, NUM_PROGRAMS)
    if NE == 2:
        gl.warp_specialize(
            [
                (_mma_partition, (args, NE, BM, BN, BK, STAGES, NUM_PROGRAMS, EV)),
                (_epilogue_partition, (args, 0, NE, BM, BN, NUM_PROGRAMS, EV, N_ROUNDS, NOISE, STAGED)),
                (_epilogue_partition, (args, 1, NE, BM, BN, NUM_PROGRAMS, EV, N_ROUNDS, NOISE, STAGED)),
                (load_partition, loads),
            ],
            [4, 4, 1],
            [EPILOGUE_REGS, EPILOGUE_REGS, 24],
        )
    else:
        gl.static_assert(NE == 3, "2 or 3 epilogue warp groups")
        gl.warp_specialize(
            [
                (_mma_partition, (args, NE, BM, BN, BK, STAGES, NUM_PROGRAMS, EV)),
                (_epilogue_partition, (args, 0, NE, BM, BN, NUM_PROGRAMS, EV, N_ROUNDS, NOISE, STAGED)),
                (_epilogue_partition, (args, 1, NE, BM, BN, NUM_PROGRAMS, EV, N_ROUNDS, NOISE, STAGED)),
                (_epilogue_partition, (args, 2, NE, BM, BN, NUM_PROGRAMS, EV, N_ROUNDS, NOISE, STAGED)),
                (load_partition, loads),
            ],
            [4, 4, 4, 1],
            [EPILOGUE_REGS, EPILOGUE_REGS, EPILOGUE_REGS, 24],
        )


def epilogue_registers(groups: int) -> int:
    """Registers per epilogue thread: what the MMA group (at the launch budget) and the loader (24) leave of
    the SM's 64K, split among ``groups`` epilogue groups (176 for 2, 120 for 3)."""
    launch = launch_registers(groups + 1)
    return (launch * (groups + 2) - 24 - launch) // groups // 8 * 8


def handoff_constants(tiles, programs: int, *, noise: bool, n_rounds: int = 10) -> tuple[dict, int]:
    """``(constexprs, maxnreg)`` of :func:`fused_handoff_kernel` for ``tiles`` (``tiles.warp_groups`` epilogue
    groups; ``tiles.noise_filter``: the filter's staged epilogue)."""
    ne = warp_groups(tiles)
    staged = filtered_staged_epilogue if getattr(tiles, "noise_filter", False) else staged_epilogue
    constexprs = {"STAGES": tiles.num_stages, "NUM_PROGRAMS": programs, "EV": tiles.epilogue_v, "N_ROUNDS": n_rounds,
                  "NOISE": (NOISE_EXACT if noise else NOISE_OFF).value, "NE": ne,
                  "EPILOGUE_REGS": tiles.max_registers or epilogue_registers(ne), "STAGED": staged}  # fmt: skip
    return constexprs, launch_registers(ne + 1)


def launch_handoff(hidden, weight, inv_temp, parts, seed_lo, seed_hi, tiles, *, col_offset=0, n_rounds=10, noise=True,
                   programs=None):  # fmt: skip
    """Launch :func:`fused_handoff_kernel` into the candidate buffers ``parts`` (one candidate per ``block_v``
    tile).  Returns the compiled kernel."""
    progs, args = kernel_arguments(hidden, weight, inv_temp, parts, seed_lo, seed_hi, tiles, col_offset, programs)
    constexprs, maxnreg = handoff_constants(tiles, progs, noise=noise, n_rounds=n_rounds)
    return direct(fused_handoff_kernel)[(progs,)](*args, **constexprs, num_warps=4, maxnreg=maxnreg)


def compile_offline(tiles, element: str = "bf16"):
    """Compile :func:`fused_handoff_kernel` for sm_90a without a GPU (for the CPU test that it builds and does not
    spill), 132 programs."""
    constexprs, maxnreg = handoff_constants(tiles, 132, noise=True)
    return compile_sm90(fused_handoff_kernel, tiles, element, constexprs, maxnreg)
