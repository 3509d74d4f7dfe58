"""A timing probe, not a sampler: the matmul of stage 1 with 128-row tiles shared by two MMA warp groups (its own
pipeline, importing the shipped loader and the noise).

Why.  In :mod:`flashsampling.kernels.pingpong` each consumer group owns a ``64 x BN`` tile, so
every K block of ``W`` that TMA writes into shared memory feeds one warp group's MMAs.  Per ``m64n256k16`` step
(128 tensor cycles at the full rate of an SM) the MMA reads 2 KB of ``h`` and 8 KB of ``W`` from shared memory,
and TMA has written the same 10 KB there: 160 bytes per cycle against the 128 that an SM's shared memory
serves, a ceiling of 80% on the tensor pipe (ncu measured 83% for the ``bare`` mode at B = 256:
``benchmarks/results/ncu_smem_pp_bare_64x256_b256_h200.txt``).  ``128 x 128``
tiles per group have the same 160.  Here two warp groups take the two 64-row halves of one ``128 x BN`` tile
and read the same ``W`` slot: per step of both groups (256 tensor cycles) 12 KB written and 20 KB read, 128 bytes
per cycle.

The price is the ping-pong: both groups finish a tile together, so nothing hides their epilogues.  This probe
has only the cheap epilogues of the timing modes of :mod:`.pipeline` (``bare``: each row's maximum logit;
``register_argmax``: each row's maximum of ``z / T`` and its column, from the accumulator's registers), which
measure the pipeline's ceiling, not a sampler's time.  Each half's accumulator is the MMAs of
the shipped kernel's ``64 x BN`` tile in the same order, so ``register_argmax`` gives the same ``(max, column)``
bit for bit (``benchmarks/coop_probe.py`` checks it on the H200).

Measured on the H200 at B = 256: the tensor pipe 97% busy (83% in the ping-pong kernel) and ``bare`` at cuBLAS's
time on three shapes (``benchmarks/results/coop_probe_h200.json``, ``ncu_smem_coop_bare_128x256_b256_h200.txt``);
with the exact noise's work issued in its K loop (``FILL_KINDS``: ``noise``), no cheaper than the ping-pong kernel's
noise by more than about 6% (``coop_noise_fill_h200.json``).
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, warpgroup_mma, warpgroup_mma_wait

from flashsampling.kernels.launch import direct
from flashsampling.kernels.pingpong import (
    compile_sm90,
    default_consumer_registers,
    exponential_gl,
    kernel_arguments,
    launch_registers,
    load_partition,
    log_gl,
    philox4x32_gl,
)

from .pipeline import MODES, bare_epilogue, register_argmax_epilogue
from .tiles import warp_groups

#: The probe's epilogues: a subset of :data:`.pipeline.MODES`.
COOPERATIVE_MODES = ("bare", "register_argmax")
_BARE = gl.constexpr(MODES["bare"])
#: The kinds of work that the K loop can carry beside its MMAs (:func:`_fill`).
FILL_KINDS = ("ffma", "imad", "imul", "alu", "noise")
_FFMA = gl.constexpr(FILL_KINDS.index("ffma"))
_IMAD = gl.constexpr(FILL_KINDS.index("imad"))
_IMUL = gl.constexpr(FILL_KINDS.index("imul"))
_NOISE = gl.constexpr(FILL_KINDS.index("noise"))


@gluon.jit
def _fill_noise(ctr, row, best, STEPS: gl.constexpr):
    """``STEPS`` token pairs' exact noise per thread, as the sampler's fast pass computes it (a Philox-10 block per
    pair, two exponentials and logs) on the scores ``ctr / 2**20``, into a running maximum: the fast pass's work
    without its chunk loads and tie bits."""
    for _ in gl.static_range(STEPS):
        zero = ctr * 0
        w0, w1, w2, w3 = philox4x32_gl(ctr, row, zero, zero, zero + 0x243F6A88, zero + 0x85A308D3, 10)
        base = ctr.to(gl.float32) * 9.5367431640625e-07
        e_even = base - log_gl(exponential_gl(w0, w1))
        best = gl.maximum(best, gl.maximum(e_even, base - log_gl(exponential_gl(w2, w3))))
        ctr = ctr + 1
    return ctr, best


@gluon.jit
def _fill(u, x, STEPS: gl.constexpr, KIND: gl.constexpr):
    """``STEPS`` dependent steps of one kind of work, carried from K step to K step (so none can leave the loop):
    ``FFMA`` on the float ``x`` (``x = x * a + b``); on the uint32 ``u``, Philox's 64-bit product
    (``u = hi(u * M) ^ lo(u * M)``, ``IMAD.WIDE.U32`` + ``LOP3``), a 32-bit product (``u = lo(u * M) ^ (u >> 7)``)
    or a rotate-XOR (``u = rotl(u, 5) ^ 0x9E3779B9``).  (``noise``: :func:`_fill_noise`.)"""
    for _ in gl.static_range(STEPS):
        if KIND == _FFMA:
            x = x * 0.99999994 + 1.0e-30
        elif KIND == _IMAD:
            p = u.to(gl.uint64) * 0xD2511F53
            u = (p >> 32).to(gl.uint32) ^ p.to(gl.uint32)
        elif KIND == _IMUL:
            u = (u * 0xD2511F53) ^ (u >> 7)
        else:
            u = ((u << 5) | (u >> 27)) ^ 0x9E3779B9
    return u, x


@gluon.jit
def _half_consumer(args, HALF_INDEX: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
                   STAGES: gl.constexpr, NUM_PROGRAMS: gl.constexpr, MODE: gl.constexpr, FILL_STEPS: gl.constexpr,
                   FILL_KIND: gl.constexpr):  # fmt: skip
    """Warp group ``HALF_INDEX``: rows ``[HALF_INDEX * BM / 2, (HALF_INDEX + 1) * BM / 2)`` of every tile of this
    program, from the same ring slots as the other group (each slot is released by both groups' arrivals).

    With ``FILL_STEPS > 0``, every K step also runs :func:`_fill` (``FILL_STEPS`` steps of kind
    ``FILL_KINDS[FILL_KIND]``) on two values per thread, or :func:`_fill_noise` (``FILL_STEPS`` token pairs per
    thread), while its MMA is in flight: what such instructions cost when the MMA warps themselves issue them (the
    result goes to ``part_key``, so none is dead code)."""
    (a_bufs, b_bufs, ready, empty, inv_temp_ptr, part_max_ptr, part_key_ptr, part_idx_ptr, B, V, D) = args
    HALF: gl.constexpr = BM // 2
    program = gl.program_id(0)
    num_b_tiles = gl.cdiv(B, BM)
    num_v_tiles = gl.cdiv(V, BN)
    num_tiles = num_b_tiles * num_v_tiles
    k_tiles = gl.cdiv(D, BK)
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16])
    fill: gl.constexpr = gl.BlockedLayout([1, 2], [32, 1], [4, 1], [1, 0])
    lane = gl.arange(0, 128, layout=gl.SliceLayout(1, fill))[:, None] * 2
    lane = lane + gl.arange(0, 2, layout=gl.SliceLayout(0, fill))[None, :]
    fill_u = (lane + program * 256 + HALF_INDEX + 1).to(gl.uint32)  # distinct per thread: not uniform
    fill_x = fill_u.to(gl.float32)
    # The noise filler: one pair counter and one running maximum per thread.
    nz_ctr, nz_row = gl.split(fill_u)
    nz_best = nz_ctr.to(gl.float32) * 0.0 - 1.0e30
    it = 0
    for tile in range(program, num_tiles, NUM_PROGRAMS):
        pid_b = tile % num_b_tiles
        pid_v = tile // num_b_tiles
        acc = gl.zeros([HALF, BN], gl.float32, mma)
        for ki in range(k_tiles):
            s = it % STAGES
            mbarrier.wait(ready.index(s), (it // STAGES) & 1)
            a = a_bufs.index(s).slice(HALF_INDEX * HALF, HALF)
            acc = warpgroup_mma(a, b_bufs.index(s).permute((1, 0)), acc, is_async=True)
            if FILL_STEPS > 0:
                if FILL_KIND == _NOISE:
                    nz_ctr, nz_best = _fill_noise(nz_ctr, nz_row, nz_best, FILL_STEPS)
                else:
                    fill_u, fill_x = _fill(fill_u, fill_x, FILL_STEPS, FILL_KIND)
            # At most one MMA in flight: the previous K block's slot is released (by this group).
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=ki > 0)
            it += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1)
        half_tile = pid_b * 2 + HALF_INDEX  # the 64-row tile of the ping-pong kernel that this half is
        if MODE == _BARE:
            bare_epilogue(acc, half_tile, pid_v, num_v_tiles, B, part_max_ptr, HALF)
        else:
            register_argmax_epilogue(acc, half_tile, pid_v, num_v_tiles, B, inv_temp_ptr, part_max_ptr, part_idx_ptr,
                                      HALF, BN)  # fmt: skip
    if FILL_STEPS > 0:
        folded = fill_u.to(gl.int64) + fill_x.to(gl.int64)
        if FILL_KIND == _NOISE:
            folded = folded + gl.join(nz_best, nz_best).to(gl.int64)
        gl.store(part_key_ptr + program * 256 + lane, folded, mask=lane + program * 256 < B * num_v_tiles)


@gluon.jit(do_not_specialize=["seed_lo", "seed_hi", "col_offset"])
def cooperative_probe_kernel(h_desc, w_desc, inv_temp_ptr, part_max_ptr, part_key_ptr, part_idx_ptr, flag_ptr,
                             B, V, D, col_offset, seed_lo, seed_hi, STAGES: gl.constexpr,
                             NUM_PROGRAMS: gl.constexpr, CONSUMER_REGS: gl.constexpr, MODE: gl.constexpr,
                             FILL_STEPS: gl.constexpr = 0, FILL_KIND: gl.constexpr = 0):  # fmt: skip
    """Persistent ``(B, D) @ (D, V)`` in ``BM x BN`` tiles (``BM = 128``: two warp groups of 64 rows on one ring
    slot), with a timing mode's epilogue (:data:`COOPERATIVE_MODES`).  The argument list is
    the shipped kernel's, so its host helpers build the launch."""
    BM: gl.constexpr = h_desc.block_type.shape[0]
    BK: gl.constexpr = h_desc.block_type.shape[1]
    BN: gl.constexpr = w_desc.block_type.shape[0]
    gl.static_assert(BM == 128, "two 64-row halves")
    a_bufs = gl.allocate_shared_memory(h_desc.dtype, [STAGES] + h_desc.block_type.shape, h_desc.layout)
    b_bufs = gl.allocate_shared_memory(w_desc.dtype, [STAGES] + w_desc.block_type.shape, w_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)  # both halves release a slot
    args = (a_bufs, b_bufs, ready, empty, inv_temp_ptr, part_max_ptr, part_key_ptr, part_idx_ptr, B, V, D)
    loads = (h_desc, w_desc, a_bufs, b_bufs, ready, empty, B, V, D, BM, BN, BK, STAGES, NUM_PROGRAMS)
    gl.warp_specialize(
        [
            (_half_consumer, (args, 0, BM, BN, BK, STAGES, NUM_PROGRAMS, MODE, FILL_STEPS, FILL_KIND)),
            (_half_consumer, (args, 1, BM, BN, BK, STAGES, NUM_PROGRAMS, MODE, FILL_STEPS, FILL_KIND)),
            (load_partition, loads),
        ],
        [4, 1],
        [CONSUMER_REGS, 24],
    )


def _check(tiles, mode: str, fill: tuple[str, int]) -> None:
    if fill[0] not in FILL_KINDS or fill[1] < 0:
        raise ValueError(f"fill={fill!r} must be (one of {FILL_KINDS}, steps >= 0)")
    if mode not in COOPERATIVE_MODES:
        raise ValueError(f"mode={mode!r} must be one of {COOPERATIVE_MODES}")
    if tiles.block_b != 128 or warp_groups(tiles) != 2:
        raise ValueError(f"tiles={tiles!r} must have block_b=128 and warp_groups=2")


def launch_cooperative_probe(
    hidden, weight, inv_temp, parts, tiles, *, mode: str = "bare", fill: tuple[str, int] = ("ffma", 0), programs=None
):
    """Launch :func:`cooperative_probe_kernel` into the candidate buffers ``parts`` (one per ``block_v`` tile;
    ``part_max``, and ``part_idx`` with ``register_argmax``); ``fill = (kind, steps)``: the filler in the K loop."""
    _check(tiles, mode, fill)
    progs, args = kernel_arguments(hidden, weight, inv_temp, parts, 0, 0, tiles, 0, programs)
    return direct(cooperative_probe_kernel)[(progs,)](
        *args, STAGES=tiles.num_stages, NUM_PROGRAMS=progs, CONSUMER_REGS=default_consumer_registers(2),
        MODE=MODES[mode], FILL_STEPS=fill[1], FILL_KIND=FILL_KINDS.index(fill[0]), num_warps=4,
        maxnreg=launch_registers(2),
    )  # fmt: skip


def compile_cooperative_offline(tiles, mode: str = "bare", fill: tuple[str, int] = ("ffma", 0), element="bf16"):
    """Compile :func:`cooperative_probe_kernel` for sm_90a without a GPU (the CPU test: it builds, no spills)."""
    _check(tiles, mode, fill)
    constexprs = {"STAGES": tiles.num_stages, "NUM_PROGRAMS": 132, "CONSUMER_REGS": default_consumer_registers(2),
                  "MODE": MODES[mode], "FILL_STEPS": fill[1], "FILL_KIND": FILL_KINDS.index(fill[0])}  # fmt: skip
    return compile_sm90(cooperative_probe_kernel, tiles, element, constexprs, launch_registers(2))
