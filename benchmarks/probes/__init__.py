"""The lab's kernels: timing probes and experiments around the shipped stage 1, none of which ``sample()`` runs.

A probe of the Gluon kernel is the shipped kernel
(:func:`flashsampling.kernels.pingpong.fused_pingpong_kernel`) with its own ``EPILOGUE``, built from the shipped
device functions; where a probe changes the pipeline itself it has its own pipeline that imports them (each
module's docstring says which):

==================  ================================================================================================
:mod:`.tiles`       :class:`ProbeTiles`: ``TileConfig`` plus three consumer groups, the handoff kernel, the filter
:mod:`.gluon`       launch or compile any Gluon probe by name (mode, noise, tiles): :func:`launch_gluon_probe`
:mod:`.stage1`      the product's stage-1 dispatcher with the lab's hooks (Philox rounds, the compiled kernel)
:mod:`.pipeline`    the timing modes (bare, epilogue alone, staged bare, register argmax), a staging buffer per group
:mod:`.noise_probes`  the noise probes (fillers, Threefry, log-sum-exp proxies, tile inverse-CDF ablations)
:mod:`.approx_noise`, :mod:`.approx_filter`  the approximate filter and its noise
:mod:`.handoff`     one MMA warp group handing each tile to epilogue warp groups (own pipeline)
:mod:`.cooperative`  128-row tiles shared by two MMA warp groups (own pipeline)
==================  ================================================================================================

A new probe goes here, as an epilogue of the shipped kernel where it can be one; ``tests/test_probes.py`` compiles
each for sm_90a on the CPU, and its GPU checks run on an H200.  Results go to ``benchmarks/results/``, the story to
``benchmarks/NOTES.md``.
"""
