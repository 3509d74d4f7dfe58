"""What is tested: the laws a check aims at, the logits cases, and the samplers (ours, defective, other libraries').

Nothing here computes a statistic: the battery is data and samplers, the input of every runner.

=====================  ==========================================================================
module                 job
=====================  ==========================================================================
:mod:`.aims`           what a check aims at: ``softmax()``, ``top_k(k)``, ..., ``speculative(q)``
                       (value objects; the float64 laws are :mod:`flashsampling.targets`)
:mod:`.cases`          the main job's logits cases, each with its aim and the extra tests it takes
:mod:`.variants`       the samplers of this repository that the main job verifies
:mod:`.protocol`       how any sampler is called and its tokens read (``check_sampler``'s protocol)
:mod:`.examples`       exact and defective samplers of the protocol (the acceptance's)
:mod:`.planted`        planted deviations of an exactly known size (the power claims' alternatives)
:mod:`.mutants`        biased samplers modelled on real bugs, with their exact laws
:mod:`.libraries`      samplers written elsewhere (torch, NumPy, JAX, transformers, vLLM, FlashInfer)
=====================  ==========================================================================
"""
