"""Stage 1 as the benchmarks launch it: the product's dispatcher with the lab's hooks.

:func:`launch_stage1_probe` runs the kernel that :func:`flashsampling.kernels.stage1.launch_fused_stage1` would
(:func:`~flashsampling.kernels.stage1.stage1_kernel_kind`), with what the product never does:

* ``n_rounds``: Philox's rounds in the noise (the product runs 10; 0 or 7 attribute the noise's cost to its rounds,
  ``benchmarks/results/filter_probe_rounds_h200.json``);
* ``compiled``: a list that receives the compiled kernel (registers, spills, shared memory for the reports);
* :class:`~benchmarks.probes.tiles.ProbeTiles`' options: the handoff kernel, the approximate filter, three consumer
  groups.

:func:`launch_persistent_probe` launches the persistent kernel with ``n_rounds`` and ``flatten`` (the tile and K
loops compiled as one pipeline, the product's, or separately); :func:`sample_probe` is ``sample()`` on
:func:`launch_stage1_probe` (a probe's tiles through the product's preamble and stage 2).
"""

from __future__ import annotations

from flashsampling._request import lm_head_request
from flashsampling.kernels.epilogue import epilogue_constants
from flashsampling.kernels.launch import direct
from flashsampling.kernels.persistent import fused_persistent_kernel, persistent_arguments
from flashsampling.kernels.stage1 import (
    allocate_partials,
    fused_stage1_kernel,
    num_candidates,
    stage1_kernel_kind,
    tiled_arguments,
    upcast_inputs,
)
from flashsampling.kernels.tiles import stage1_tiles

from .gluon import launch_gluon_probe
from .handoff import launch_handoff


def launch_persistent_probe(hidden, weight, inv_temp, parts, seed_lo, seed_hi, num_samples, tiles, *,
                            col_offset: int = 0, return_lse: bool = False, noise: bool = True, upcast: bool = False,
                            n_rounds: int = 10, flatten: bool = True):  # fmt: skip
    """:func:`~flashsampling.kernels.persistent.launch_persistent` with Philox's rounds and the loop flattening as
    arguments; returns the compiled kernel."""
    grid, args = persistent_arguments(hidden, weight, inv_temp, parts, seed_lo, seed_hi, num_samples, tiles,
                                      col_offset)  # fmt: skip
    consts = {**epilogue_constants(return_lse=return_lse, noise=noise, col_offset=col_offset), "N_ROUNDS": n_rounds}
    return direct(fused_persistent_kernel)[grid](
        *args, **tiles.matmul_constants(upcast), NUM_PROGRAMS=grid[0], FLATTEN=flatten, **consts,
        EPILOGUE_V=tiles.epilogue_v, **tiles.launch_options(),
    )  # fmt: skip


def launch_stage1_probe(hidden, weight, inv_temp, seed_lo, seed_hi, num_samples, tiles, *, col_offset: int = 0,
                        return_lse: bool = False, n_rounds: int = 10, noise: bool = True,
                        compiled: list | None = None):  # fmt: skip
    """Allocate the candidate buffers and launch stage 1 as the product's dispatcher would, with the module's hooks;
    returns ``(part_max, part_key, part_idx, flags, lse)``."""
    B = hidden.shape[0]
    V = weight.shape[0]
    kind = stage1_kernel_kind(hidden, weight, num_samples, tiles, col_offset=col_offset, return_lse=return_lse)
    parts = allocate_partials(B, num_samples, num_candidates(V, tiles, kind), hidden.device, return_lse)
    upcast = upcast_inputs(hidden, weight)
    if kind == "gluon" and getattr(tiles, "handoff", False):
        kernel = launch_handoff(hidden, weight, inv_temp, parts, seed_lo, seed_hi, tiles, col_offset=col_offset,
                                n_rounds=n_rounds, noise=noise)  # fmt: skip
    elif kind == "gluon":
        kernel = launch_gluon_probe(hidden, weight, inv_temp, parts, seed_lo, seed_hi, tiles, col_offset=col_offset,
                                    n_rounds=n_rounds, noise=noise,
                                    noise_filter=getattr(tiles, "noise_filter", False))  # fmt: skip
    elif kind == "persistent":
        kernel = launch_persistent_probe(hidden, weight, inv_temp, parts, seed_lo, seed_hi, num_samples, tiles,
                                         col_offset=col_offset, return_lse=return_lse, noise=noise, upcast=upcast,
                                         n_rounds=n_rounds)  # fmt: skip
    else:
        grid, args = tiled_arguments(hidden, weight, inv_temp, parts, seed_lo, seed_hi, num_samples, tiles, col_offset)
        consts = {**epilogue_constants(return_lse=return_lse, noise=noise, col_offset=col_offset), "N_ROUNDS": n_rounds}
        kernel = direct(fused_stage1_kernel)[grid](*args, **tiles.matmul_constants(upcast), **consts,
                                                   EPILOGUE_V=tiles.epilogue_v, **tiles.launch_options())  # fmt: skip
    if compiled is not None:
        compiled.append(kernel)
    return parts


def sample_probe(hidden, weight, *, temperature=1.0, seed=None, num_samples: int = 1, host_checks: bool = True,
                 tiles=None):  # fmt: skip
    """:func:`flashsampling.sample` with stage 1 from :func:`launch_stage1_probe` (so that ``tiles`` may be a
    :class:`~benchmarks.probes.tiles.ProbeTiles`): the same preamble, stage 2 and finish, the same tokens."""
    request, V = lm_head_request(hidden, weight, temperature=temperature, seed=seed, num_samples=num_samples,
                                 host_checks=host_checks)  # fmt: skip
    tiles = tiles or stage1_tiles(hidden, weight, request.num_samples)
    parts = launch_stage1_probe(hidden, weight, request.inv_temp, *request.seed_words, request.num_samples, tiles,
                                noise=request.noise)  # fmt: skip
    return request.reduce_and_finish(parts, V)
