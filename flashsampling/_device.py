"""Device selection, done once at import: compiled Triton on CUDA, the interpreter otherwise.

Triton decides between compiling and interpreting when ``@triton.jit`` decorates a function,
by reading ``TRITON_INTERPRET``.  This module therefore must be imported before any module that
defines a kernel (``flashsampling/__init__.py`` imports it first).

Environment
-----------
FLASHSAMPLING_INTERPRET
    ``1`` forces the interpreter even with a GPU; ``0`` forces compilation.  Unset: the
    interpreter is used exactly when ``torch.cuda.is_available()`` is false.
"""

from __future__ import annotations

import os

import torch


def _decide_interpret() -> bool:
    forced = os.environ.get("FLASHSAMPLING_INTERPRET")
    if forced is not None:
        return forced.strip() not in ("", "0", "false", "False")
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return True
    return not torch.cuda.is_available()


INTERPRET: bool = _decide_interpret()
if INTERPRET:
    os.environ["TRITON_INTERPRET"] = "1"

#: In the interpreter (triton 3.6 and 3.9) ``tl.dot`` on bf16 operands returns garbage, while
#: fp16 and fp32 are right.  Kernels upcast to fp32 before the dot when this is true; on the GPU
#: they never do (it would leave the tensor cores' bf16 path).
UPCAST_DOT: bool = INTERPRET


def device_function(fn):
    """``triton.jit`` for device functions; in the interpreter, the function is used as it is.

    The interpreter re-patches ``triton.language`` on every call of a jitted *device* function
    (~2.5 ms per call in triton 3.6), which made a 64-row launch with 100 samples take a minute.
    The kernel entry point already patched the language, so a plain Python call computes the same
    NumPy operations, just without that overhead.
    """
    if INTERPRET:
        return fn
    import triton  # (here, not at the top: this module sets TRITON_INTERPRET before anything imports triton)

    return triton.jit(fn)


def default_device() -> torch.device:
    """The device the kernels run on when the caller gives CPU tensors in interpreter mode."""
    return torch.device("cpu") if INTERPRET else torch.device("cuda")
