"""The Gluon pipeline's timing modes: the shipped pipeline with its epilogue replaced, or left alone (probes, not
samplers).

:data:`MODES`: ``sample``, the sampler (the shipped kernel itself); ``bare``, the matmul and pipeline with each row's
maximum logit as the epilogue (:func:`bare_epilogue`); ``epilogue``, the sampler's epilogue alone on a synthetic
accumulator, without loads or matmul (the groups' epilogues still take the staging buffer in turn, so the time is the
sum of the tiles' epilogues); ``register_argmax``, each row's maximum of ``z / T`` and its first column from the
accumulator's registers (:func:`register_argmax_epilogue`, no staging); ``staged_bare``, the tile staged in shared
memory and read back chunk by chunk for each row's maximum (:func:`staged_bare_epilogue`, the staging buffer taken in
turn as the sampler does).  ``STAGE_PER_GROUP``: one staging buffer per consumer group (an experiment, not run on a
GPU yet), so that the groups' epilogues may overlap, where ``NC`` buffers fit beside the ring.

These change the pipeline's structure (no staging turn, no loads, more buffers), which the shipped kernel's
``EPILOGUE`` argument cannot, and an extra function boundary in the shipped consumer changes its SASS; so this module
holds its own copy of the consumer and kernel (:func:`probe_consumer`, :func:`probe_pipeline_kernel`: the shipped
K loop, turns and allocations, written again) and imports the shipped loader, staging and epilogues.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, warpgroup_mma, warpgroup_mma_wait

from flashsampling.kernels.pingpong import load_partition, stage_tile, staging_layout

#: The timing modes (module docstring).
MODES = {"sample": 0, "bare": 1, "epilogue": 2, "staged_bare": 3, "register_argmax": 4}
MODE_BARE = gl.constexpr(MODES["bare"])
MODE_EPILOGUE_ALONE = gl.constexpr(MODES["epilogue"])
MODE_STAGED_BARE = gl.constexpr(MODES["staged_bare"])
MODE_REGISTER_ARGMAX = gl.constexpr(MODES["register_argmax"])


@gluon.jit
def bare_epilogue(acc, pid_b, pid_v, num_v_tiles, B, part_max_ptr, BM: gl.constexpr):
    """Timing mode ``bare``, not a sampler: each row's maximum logit of the tile, written to ``part_max``.
    With it the kernel is the matmul and the pipeline with the cheapest epilogue that keeps the MMAs
    live (``benchmarks/power_probe.py`` times the sampler's epilogue against it)."""
    vec: gl.constexpr = gl.SliceLayout(1, acc.type.layout)
    rows = pid_b * BM + gl.arange(0, BM, layout=vec)
    gl.store(part_max_ptr + rows.to(gl.int64) * num_v_tiles + pid_v, gl.max(acc, axis=1), mask=rows < B)


@gluon.jit
def register_argmax_epilogue(acc, pid_b, pid_v, num_v_tiles, B, inv_temp_ptr, part_max_ptr, part_idx_ptr,
                             BM: gl.constexpr, BN: gl.constexpr):  # fmt: skip
    """Timing mode ``register_argmax``, not a sampler: each row's maximum of ``z / T`` and its first column, from
    the accumulator's registers (a row's columns lie in the 4 threads of a quad), written to ``part_max`` and
    ``part_idx``."""
    layout: gl.constexpr = acc.type.layout
    vec: gl.constexpr = gl.SliceLayout(1, layout)
    rows = pid_b * BM + gl.arange(0, BM, layout=vec)
    row_ok = rows < B
    inv = gl.load(inv_temp_ptr + rows.to(gl.int64), mask=row_ok, other=1.0)
    scores = acc * inv[:, None]
    m = gl.max(scores, axis=1)
    cols = gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
    pos = gl.min(gl.where(scores == m[:, None], cols[None, :], BN), axis=1)
    off = rows.to(gl.int64) * num_v_tiles + pid_v
    gl.store(part_max_ptr + off, m, mask=row_ok)
    gl.store(part_idx_ptr + off, pid_v.to(gl.int64) * BN + pos, mask=row_ok)


@gluon.jit
def staged_bare_epilogue(stage, pid_b, pid_v, num_v_tiles, B, part_max_ptr, BM: gl.constexpr, BN: gl.constexpr,
                         EV: gl.constexpr):  # fmt: skip
    """Timing mode ``staged_bare``, not a sampler: the staged tile (``[BN // EV, BM, EV]`` chunks, as the sampler's
    epilogue reads them) read back for each row's maximum, written to ``part_max``."""
    cl: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, EV, 16])
    run = gl.full([BM, EV], float("-inf"), gl.float32, cl)
    for c in range(0, BN // EV):
        run = gl.maximum(run, stage.index(c).load(cl))
    m = gl.max(run, axis=1)
    rows = pid_b * BM + gl.arange(0, BM, layout=m.type.layout)
    gl.store(part_max_ptr + rows.to(gl.int64) * num_v_tiles + pid_v, m, mask=rows < B)


@gluon.jit
def probe_consumer(args, CONSUMER: gl.constexpr, NC: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr,
                   BK: gl.constexpr, STAGES: gl.constexpr, NUM_PROGRAMS: gl.constexpr, EV: gl.constexpr,
                   N_ROUNDS: gl.constexpr, NOISE: gl.constexpr, MODE: gl.constexpr, STAGE_PER_GROUP: gl.constexpr,
                   EPILOGUE: gl.constexpr):  # fmt: skip
    """Consumer warp group ``CONSUMER`` of ``NC``: the shipped consumer's K loop and turns (or, in the
    ``epilogue`` mode, a synthetic accumulator), then the ``MODE``'s epilogue of tiles ``CONSUMER``,
    ``CONSUMER + NC``, ... of this program's list (:data:`MODES`; ``EPILOGUE`` for ``sample`` and ``epilogue``)."""
    (a_bufs, b_bufs, ready, empty, turn, stage, staged, inv_temp_ptr, part_max_ptr, part_key_ptr, part_idx_ptr,
     flag_ptr, B, V, D, col_offset, seed_lo, seed_hi) = args  # fmt: skip
    program = gl.program_id(0)
    num_b_tiles = gl.cdiv(B, BM)
    num_v_tiles = gl.cdiv(V, BN)
    num_tiles = num_b_tiles * num_v_tiles
    k_tiles = gl.cdiv(D, BK)
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16])
    k0 = seed_lo.to(gl.uint32)
    k1 = seed_hi.to(gl.uint32)
    for tile in range(program + CONSUMER * NUM_PROGRAMS, num_tiles, NC * NUM_PROGRAMS):
        pid_b = tile % num_b_tiles
        pid_v = tile // num_b_tiles
        i = (tile - program) // NUM_PROGRAMS  # the tile's place in this program's list
        it0 = i * k_tiles  # its first slot use in the ring
        # Tile i waits for the (i // NC)-th arrival of the previous group on the turns and on the staging
        # buffer (one fewer for group 0): the parity of that arrival.
        phase = ((i // NC) - (1 if CONSUMER == 0 else 0)) & 1
        if MODE == MODE_EPILOGUE_ALONE:
            # No matmul: distinct finite values (no exact ties, so the fast pass decides every tile).
            r = gl.arange(0, BM, layout=gl.SliceLayout(1, mma))
            c = gl.arange(0, BN, layout=gl.SliceLayout(0, mma))
            acc = ((r[:, None] * 7919 + c[None, :] + pid_v * BN) % 65521).to(gl.float32) * 1e-4
        else:
            # Our turn on the tensor cores: the previous group has waited for every slot of tile i - 1,
            # so the slots of tile i are at most one phase ahead of us (the parity waits are exact).
            mbarrier.wait(turn.index(CONSUMER), phase, pred=i > 0)
            acc = gl.zeros([BM, BN], gl.float32, mma)
            for ki in range(k_tiles):
                it = it0 + ki
                s = it % STAGES
                mbarrier.wait(ready.index(s), (it // STAGES) & 1)
                acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s).permute((1, 0)), acc, is_async=True)
                # At most one MMA in flight: the previous K block's slot is free again.
                acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
                mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=ki > 0)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            mbarrier.arrive(empty.index((it0 + k_tiles - 1) % STAGES), count=1)
            mbarrier.arrive(turn.index((CONSUMER + 1) % NC), count=1)
        # The epilogue, while the other groups' K loops run.
        if MODE == MODE_BARE:
            bare_epilogue(acc, pid_b, pid_v, num_v_tiles, B, part_max_ptr, BM)
        elif MODE == MODE_REGISTER_ARGMAX:
            register_argmax_epilogue(acc, pid_b, pid_v, num_v_tiles, B, inv_temp_ptr, part_max_ptr, part_idx_ptr,
                                     BM, BN)  # fmt: skip
        else:
            # A shared staging buffer is ours once tile i - 1's epilogue (the previous group's) is done with it.
            if not STAGE_PER_GROUP:
                mbarrier.wait(staged.index(CONSUMER), phase, pred=i > 0)
            buffer = stage.index(CONSUMER if STAGE_PER_GROUP else 0)
            if MODE == MODE_STAGED_BARE:
                staged_bare_epilogue(stage_tile(acc, buffer, BM, BN, EV), pid_b, pid_v, num_v_tiles, B, part_max_ptr,
                                     BM, BN, EV)  # fmt: skip
            else:
                EPILOGUE(
                    acc, buffer, pid_b, pid_v, num_v_tiles, B, V, col_offset, inv_temp_ptr, k0, k1, part_max_ptr,
                    part_key_ptr, part_idx_ptr, flag_ptr, BM, BN, EV, N_ROUNDS, NOISE,
                )  # fmt: skip
            if not STAGE_PER_GROUP:
                mbarrier.arrive(staged.index((CONSUMER + 1) % NC), count=1)


@gluon.jit(do_not_specialize=["seed_lo", "seed_hi", "col_offset"])
def probe_pipeline_kernel(h_desc, w_desc, inv_temp_ptr, part_max_ptr, part_key_ptr, part_idx_ptr, flag_ptr,
                          B, V, D, col_offset, seed_lo, seed_hi, STAGES: gl.constexpr,
                          NUM_PROGRAMS: gl.constexpr, EV: gl.constexpr, N_ROUNDS: gl.constexpr, NOISE: gl.constexpr,
                          NC: gl.constexpr, CONSUMER_REGS: gl.constexpr, EPILOGUE: gl.constexpr, MODE: gl.constexpr,
                          STAGE_PER_GROUP: gl.constexpr):  # fmt: skip
    """The shipped kernel's pipeline with a timing ``MODE`` (:data:`MODES`) or a staging buffer per consumer group
    (``STAGE_PER_GROUP``), ``NC`` (2 or 3) consumer warp groups."""
    BM: gl.constexpr = h_desc.block_type.shape[0]
    BK: gl.constexpr = h_desc.block_type.shape[1]
    BN: gl.constexpr = w_desc.block_type.shape[0]
    a_bufs = gl.allocate_shared_memory(h_desc.dtype, [STAGES] + h_desc.block_type.shape, h_desc.layout)
    b_bufs = gl.allocate_shared_memory(w_desc.dtype, [STAGES] + w_desc.block_type.shape, w_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [NC, 1], mbarrier.MBarrierLayout())
    staged = gl.allocate_shared_memory(gl.int64, [NC, 1], mbarrier.MBarrierLayout())
    # One buffer that the groups take in turn, or (STAGE_PER_GROUP, where shared memory allows) one per group.
    stage = gl.allocate_shared_memory(gl.float32, [NC if STAGE_PER_GROUP else 1, BN // EV * BM, EV],
                                      staging_layout(EV))  # fmt: skip
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    for i in gl.static_range(NC):
        mbarrier.init(turn.index(i), count=1)
        mbarrier.init(staged.index(i), count=1)
    args = (a_bufs, b_bufs, ready, empty, turn, stage, staged, inv_temp_ptr, part_max_ptr, part_key_ptr, part_idx_ptr,
            flag_ptr, B, V, D, col_offset, seed_lo, seed_hi)  # fmt: skip
    # The epilogue-alone mode loads nothing: the loader sees no rows.
    loads = (h_desc, w_desc, a_bufs, b_bufs, ready, empty, 0 if MODE == MODE_EPILOGUE_ALONE else B, V, D, BM, BN, BK,
             STAGES, NUM_PROGRAMS)  # fmt: skip
    SPG: gl.constexpr = STAGE_PER_GROUP
    EPI: gl.constexpr = EPILOGUE
    if NC == 2:
        gl.warp_specialize(
            [
                (probe_consumer, (args, 0, NC, BM, BN, BK, STAGES, NUM_PROGRAMS, EV, N_ROUNDS, NOISE, MODE, SPG, EPI)),
                (probe_consumer, (args, 1, NC, BM, BN, BK, STAGES, NUM_PROGRAMS, EV, N_ROUNDS, NOISE, MODE, SPG, EPI)),
                (load_partition, loads),
            ],
            [4, 1],
            [CONSUMER_REGS, 24],
        )
    else:
        gl.static_assert(NC == 3, "2 or 3 consumer warp groups")
        gl.warp_specialize(
            [
                (probe_consumer, (args, 0, NC, BM, BN, BK, STAGES, NUM_PROGRAMS, EV, N_ROUNDS, NOISE, MODE, SPG, EPI)),
                (probe_consumer, (args, 1, NC, BM, BN, BK, STAGES, NUM_PROGRAMS, EV, N_ROUNDS, NOISE, MODE, SPG, EPI)),
                (probe_consumer, (args, 2, NC, BM, BN, BK, STAGES, NUM_PROGRAMS, EV, N_ROUNDS, NOISE, MODE, SPG, EPI)),
                (load_partition, loads),
            ],
            [4, 4, 1],
            [CONSUMER_REGS, CONSUMER_REGS, 24],
        )
