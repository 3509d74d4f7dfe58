"""The kernels of the fused sampler, by role (each module's docstring gives its math and tiling):

=================  ==============================================================================================
:mod:`.tiles`      ``TileConfig`` and the tile policy: the Triton and Gluon defaults, a call's tiles
:mod:`.hardware`   what the device offers: SM count, Hopper or not, TMA-readable tensors, persistent grids
:mod:`.stage1`     stage 1's Triton kernels (one program per tile; on given logits) and the dispatcher
:mod:`.persistent`  stage 1, persistent: one program per SM, inputs read by TMA
:mod:`.pingpong`   stage 1 on sm_90: the warp-specialized Gluon kernel, its epilogue an argument
:mod:`.epilogue`   the Triton kernels' epilogue: temperature, noise, the tile's candidates and flags
:mod:`.stage2`     reduce the candidates over tiles; the grouped, online and tensor-parallel combines
:mod:`.topk`       the fused top-k sampler: per-tile top-k keys in stage 1, their merge and the draw in stage 2
:mod:`.temperature`  per-row ``1/T`` and its validity flags on the device
:mod:`.flags`      the bits the kernels report, and their decoding on the host
:mod:`.launch`     repeat launches without Triton's per-call bookkeeping
=================  ==============================================================================================

A new stage-1 kernel goes beside :mod:`.stage1` with its own module and launcher, and the dispatcher
(:func:`.stage1.launch_fused_stage1`, :func:`.stage1.stage1_kernel_kind`) learns when to run it; its tiles come from
:mod:`.tiles`.  A timing probe or an experiment goes to ``benchmarks/probes/``, never here.
"""
