"""Launch or compile any probe of the Gluon stage 1 by name: a timing mode, a noise probe, a tile configuration.

:func:`launch_gluon_probe` takes the arguments of :func:`flashsampling.kernels.pingpong.launch_pingpong` plus the
probe's: ``mode`` (:data:`~benchmarks.probes.pipeline.MODES`), ``noise_mode`` (:data:`NOISES`), ``noise_filter``
(the approximate filter), ``stage_per_group``, ``n_rounds`` (Philox's rounds for ``exact`` and ``filtered``, an
attribution experiment -- the product always runs 10; the step count of ``filler_*``; Threefry's rounds), and
``tiles.warp_groups`` (:class:`~benchmarks.probes.tiles.ProbeTiles`).  It runs:

* the shipped kernel (:func:`~flashsampling.kernels.pingpong.fused_pingpong_kernel`) with the probe's ``EPILOGUE``
  for ``mode="sample"``: the sampler (``exact``, ``off``), the tile inverse-CDF stream (``tile_cdf``), and the noise
  probes (:mod:`.noise_probes`, :mod:`.approx_filter`);
* the probe pipeline (:func:`~benchmarks.probes.pipeline.probe_pipeline_kernel`) for the other modes and for
  ``stage_per_group``.

:func:`compile_gluon_probe` compiles the same for sm_90a without a GPU (the CPU tests: each probe builds, without
spills).
"""

from __future__ import annotations

from flashsampling.kernels.launch import direct
from flashsampling.kernels.pingpong import (
    NOISE_EXACT,
    NOISE_OFF,
    compile_sm90,
    default_consumer_registers,
    fused_pingpong_kernel,
    kernel_arguments,
    launch_registers,
    sample_epilogue,
)
from flashsampling.tile_cdf.fused import tile_cdf_epilogue

from .approx_filter import filter_epilogue
from .high_words import oct_epilogue, quad_epilogue
from .noise_probes import (
    FILLER_KINDS,
    NO_BASES,
    NO_DRAW,
    design_epilogue,
    probe_epilogue,
    probe_noise,
    tile_cdf_ablation_epilogue,
)
from .pipeline import MODES, probe_pipeline_kernel
from .tiles import warp_groups

#: The noises of the probes' Gluon kernel: ``off``, ``exact`` (the sampler's), ``filtered`` (:mod:`.approx_filter`),
#: ``tile_cdf`` (the shipped tile inverse-CDF stream), the timing probes of :mod:`.noise_probes`, and ``quad_hi`` /
#: ``oct_hi`` (:mod:`.high_words`: high words only, bounds, a refinement per row and tile).
NOISES = ("off", "exact", "filtered", "lse_proxy", "lse_proxy_f64", "lse_proxy_fixed", "lse_proxy_design", "tile_cdf",
          "tile_cdf_no_draw", "tile_cdf_no_bases", *(f"filler_{kind}" for kind in FILLER_KINDS),
          "threefry_proxy", "quad_hi", "oct_hi")  # fmt: skip


def check_timing_options(mode: str, noise_mode: str | None) -> None:
    """``ValueError`` naming the argument unless ``mode`` is a key of :data:`MODES` and ``noise_mode`` is ``None``
    or one of :data:`NOISES`."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} must be one of {sorted(MODES)}")
    if noise_mode is not None and noise_mode not in NOISES:
        raise ValueError(f"noise_mode={noise_mode!r} must be None or one of {sorted(NOISES)}")


def probe_epilogue_of(noise: str, n_rounds: int) -> tuple:
    """``(EPILOGUE, NOISE, N_ROUNDS)`` of the Gluon kernel for the noise ``noise`` (one of :data:`NOISES`)."""
    if noise in ("off", "exact"):
        return sample_epilogue, (NOISE_EXACT if noise == "exact" else NOISE_OFF).value, n_rounds
    if noise == "filtered":
        return filter_epilogue, NOISE_EXACT.value, n_rounds
    if noise in ("quad_hi", "oct_hi"):
        return (quad_epilogue if noise == "quad_hi" else oct_epilogue), NOISE_EXACT.value, n_rounds
    if noise == "tile_cdf":
        return tile_cdf_epilogue, NOISE_EXACT.value, 10
    if noise in ("tile_cdf_no_draw", "tile_cdf_no_bases"):
        return tile_cdf_ablation_epilogue, (NO_DRAW if noise == "tile_cdf_no_draw" else NO_BASES).value, 10
    if noise == "lse_proxy_design":
        return design_epilogue, NOISE_OFF.value, 10
    # The fillers' step count and Threefry's rounds; the log-sum-exp proxies count nothing.
    count = n_rounds if noise.startswith("filler_") or noise == "threefry_proxy" else 0
    return probe_epilogue, probe_noise(noise, count), 10


def probe_constants(tiles, programs: int, *, n_rounds: int = 10, noise: bool = True, mode: str = "sample",
                    stage_per_group: bool = False, noise_filter: bool = False,
                    noise_mode: str | None = None) -> tuple:  # fmt: skip
    """``(kernel, constexprs, maxnreg)`` of a probe on ``programs`` programs (the arguments as
    :func:`launch_gluon_probe`'s)."""
    check_timing_options(mode, noise_mode)
    name = noise_mode or (("filtered" if noise_filter else "exact") if noise else "off")
    epilogue, code, rounds = probe_epilogue_of(name, n_rounds)
    nc = warp_groups(tiles)
    constexprs = {"STAGES": tiles.num_stages, "NUM_PROGRAMS": programs, "EV": tiles.epilogue_v, "N_ROUNDS": rounds,
                  "NOISE": code, "NC": nc, "CONSUMER_REGS": tiles.max_registers or default_consumer_registers(nc),
                  "EPILOGUE": epilogue}  # fmt: skip
    if mode == "sample" and not stage_per_group:
        return fused_pingpong_kernel, constexprs, launch_registers(nc)
    constexprs.update(MODE=MODES[mode], STAGE_PER_GROUP=stage_per_group)
    return probe_pipeline_kernel, constexprs, launch_registers(nc)


def launch_gluon_probe(hidden, weight, inv_temp, parts, seed_lo, seed_hi, tiles, *, col_offset: int = 0,
                       n_rounds: int = 10, noise: bool = True, programs: int | None = None, **probe):  # fmt: skip
    """Launch a probe of the Gluon stage 1 into the candidate buffers ``parts`` (one per ``block_v`` tile); returns the
    compiled kernel.  ``probe``: ``mode``, ``stage_per_group``, ``noise_filter``, ``noise_mode`` (module
    docstring); the rest as :func:`~flashsampling.kernels.pingpong.launch_pingpong`'s."""
    progs, args = kernel_arguments(hidden, weight, inv_temp, parts, seed_lo, seed_hi, tiles, col_offset, programs)
    kernel, constexprs, maxnreg = probe_constants(tiles, progs, n_rounds=n_rounds, noise=noise, **probe)
    return direct(kernel)[(progs,)](*args, **constexprs, num_warps=4, maxnreg=maxnreg)


def compile_gluon_probe(tiles, element: str = "bf16", mode: str = "sample", stage_per_group: bool = False,
                        noise: str | None = None, n_rounds: int = 10):  # fmt: skip
    """Compile a probe for sm_90a without a GPU, 132 programs (``noise``: one of :data:`NOISES`, else the exact noise,
    or the filter with ``tiles.noise_filter``).  Needs ``FLASHSAMPLING_INTERPRET=0``."""
    kernel, constexprs, maxnreg = probe_constants(
        tiles, 132, n_rounds=n_rounds, mode=mode, stage_per_group=stage_per_group,
        noise_filter=getattr(tiles, "noise_filter", False), noise_mode=noise,
    )  # fmt: skip
    return compile_sm90(kernel, tiles, element, constexprs, maxnreg)
