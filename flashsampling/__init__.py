"""flashsampling: exact categorical sampling fused into the LM-head matmul.

Public API
----------
sample(hidden, weight, *, temperature, seed, num_samples)        tokens from softmax(h @ W.T / T)
sample_from_logits(logits, *, temperature, seed, num_samples)    the same noise path on given logits
    top_k=, top_p=, min_p=, order= (either entry point)          truncated, exactly (k <= MAX_TOP_K)
sample_grouped, sample_grouped_from_logits                       group log-masses + a group draw
OnlineSampler, OnlineResult, sample_online                       chunk-by-chunk binary merges
sample_tp, sample_tp_from_logits                                 vocabulary-sharded (torch.distributed)
TileConfig                                                       stage-1 tile sizes
"""

from . import _device  # noqa: F401  (must come first: selects compiled vs interpreted Triton)
from ._device import INTERPRET
from .distributed import sample_tp, sample_tp_from_logits
from .grouped import sample_grouped, sample_grouped_from_logits
from .kernels.tiles import TileConfig
from .online import OnlineResult, OnlineSampler, sample_online
from .sampling import sample, sample_from_logits
from .truncation import MAX_TOP_K

__all__ = [
    "INTERPRET",
    "MAX_TOP_K",
    "OnlineResult",
    "OnlineSampler",
    "TileConfig",
    "sample",
    "sample_from_logits",
    "sample_grouped",
    "sample_grouped_from_logits",
    "sample_online",
    "sample_tp",
    "sample_tp_from_logits",
]
__version__ = "0.1.0"
