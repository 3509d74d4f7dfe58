"""Device selection, done once at import: compiled Triton on CUDA, the interpreter otherwise.

Triton decides between compiling and interpreting when ``@triton.jit`` decorates a function,
by reading ``TRITON_INTERPRET``.  This module therefore must be imported before any module that
defines a kernel (``flashsampling/__init__.py`` imports it first).

Import order.  Triton's own ``@triton.jit`` helpers (``tl.max``, ``tl.cdiv``, ``tl.argmax``'s combine functions,
...) are decorated when ``triton.language`` is first imported.  If that happened before this module chose the
interpreter (``from transformers import ...`` imports triton), they are compiled-mode functions, and every
interpreted kernel would fail with "Cannot call @triton.jit'd outside of the scope of a kernel".  This module then
turns each of them into its interpreted twin, in every ``triton.language`` module and on ``tl.tensor``, and sets
Triton's ``interpret`` knob: the interpreter works whatever the import order (:func:`check_triton_mode` says
whether it can).

Environment
-----------
FLASHSAMPLING_INTERPRET
    ``1`` forces the interpreter even with a GPU; ``0`` forces compilation.  Unset: the
    interpreter is used exactly when ``torch.cuda.is_available()`` is false.
"""

from __future__ import annotations

import os
import re
import sys

import torch


def _decide_interpret() -> bool:
    forced = os.environ.get("FLASHSAMPLING_INTERPRET")
    if forced is not None:
        return forced.strip() not in ("", "0", "false", "False")
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return True
    return not torch.cuda.is_available()


def _compiled_helpers() -> dict:
    """``{id: (module or class, name, function)}`` of triton's compiled-mode ``@triton.jit`` helpers (empty if
    triton is not imported yet)."""
    if "triton" not in sys.modules:
        return {}
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    owners = [m for n, m in list(sys.modules.items())
              if m is not None and (n == "triton.language" or n.startswith("triton.language."))]  # fmt: skip
    found = {}
    for owner in [*owners, tl.tensor]:
        for name, value in list(vars(owner).items()):
            if type(value) is JITFunction:  # exactly: Gluon's and others' subclasses are not interpreted
                found.setdefault(id(owner), []).append((owner, name, value))
    return found


def _interpret_triton_helpers() -> None:
    """Replace triton's compiled-mode helpers by interpreted ones (one per function: the interpreter compares them
    by identity) and set Triton's ``interpret`` knob."""
    import triton
    from triton.runtime.interpreter import InterpretedFunction

    knobs = getattr(triton, "knobs", None)
    if knobs is not None:
        knobs.runtime.interpret = True
    twins: dict[int, object] = {}
    for entries in _compiled_helpers().values():
        for owner, name, fn in entries:
            setattr(owner, name, twins.setdefault(id(fn), InterpretedFunction(fn.fn)))


def check_triton_mode() -> None:
    """Raise ``ImportError`` if the interpreter is selected but some triton helper is still a compiled-mode function
    (a helper this module did not know how to convert, or one replaced after the import)."""
    if not INTERPRET:
        return
    left = [f"{getattr(o, '__name__', o)}.{n}" for entries in _compiled_helpers().values() for o, n, _ in entries]
    if left:
        raise ImportError(
            f"triton was imported before flashsampling and its helpers {', '.join(left[:4])} are compiled-mode "
            "functions, with which the interpreted kernels cannot run: import flashsampling before transformers (or "
            "triton), or set TRITON_INTERPRET=1 in the environment"
        )


def _release(package: str) -> tuple[int, int]:
    """``(major, minor)`` of an installed package, from its metadata (without importing it)."""
    from importlib.metadata import version

    major, minor = (int(re.match(r"\d+", part).group()) for part in version(package).split(".")[:2])
    return major, minor


def check_interpreter_versions() -> None:
    """Raise ``ImportError`` for a triton whose interpreter cannot run with the installed NumPy: triton < 3.9 converts
    one-element arrays with ``int()``, which NumPy 2.4 refuses (every interpreted kernel would fail).  The tested pairs
    are triton 3.6 with NumPy < 2.4 and triton 3.9 with NumPy 2.4 (``scripts/test.sh`` runs both)."""
    triton_release, numpy_release = _release("triton"), _release("numpy")
    if triton_release < (3, 9) and numpy_release >= (2, 4):
        raise ImportError(
            f"triton {'.'.join(map(str, triton_release))}'s interpreter does not run with numpy "
            f"{'.'.join(map(str, numpy_release))}: install numpy<2.4 or triton>=3.9 (or run on a GPU)"
        )


INTERPRET: bool = _decide_interpret()
if INTERPRET:
    check_interpreter_versions()
    os.environ["TRITON_INTERPRET"] = "1"
    if "triton" in sys.modules:  # imported before us: its helpers were built for compilation
        _interpret_triton_helpers()

#: In the interpreter (triton 3.6 and 3.9) ``tl.dot`` on bf16 operands returns garbage, while
#: fp16 and fp32 are right.  Kernels upcast to fp32 before the dot when this is true; on the GPU
#: they never do (it would leave the tensor cores' bf16 path).
UPCAST_DOT: bool = INTERPRET


def interpreter_float32(x: torch.Tensor) -> torch.Tensor:
    """``x`` as float32 (exact) if it is bfloat16 and the kernels are interpreted; else ``x`` itself.

    The interpreter (triton 3.6) converts a bfloat16 subnormal (``|x| < 2**-126``) to float32 wrongly
    (``triton/runtime/interpreter.py``, ``_convert_float``: ``1.38e-39`` became ``1.03e-38``), which changed the law
    of logits that small at ``T = 1e-38`` (the fuzzer of ``tests/fuzz`` found it).  The launchers convert on the host
    instead; compiled kernels convert exactly and are left alone."""
    return x.float() if INTERPRET and x.dtype == torch.bfloat16 else x


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
