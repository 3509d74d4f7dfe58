"""flashsampling: exact categorical sampling fused into the LM-head matmul.

Public API
----------
sample(hidden, weight, *, temperature, seed, num_samples)      tokens from softmax(h @ W.T / T)
sample_from_logits(logits, *, temperature, seed, num_samples)  the same noise path on given logits
TileConfig                                                     stage-1 tile sizes
"""

from . import _device  # noqa: F401  (must come first: selects compiled vs interpreted Triton)
from ._device import INTERPRET
from .kernels.fused import TileConfig
from .sampling import sample, sample_from_logits

__all__ = ["INTERPRET", "TileConfig", "sample", "sample_from_logits"]
__version__ = "0.1.0"
