"""Repeat launches of a compiled kernel without Triton's per-call bookkeeping.

``fn[grid](*args, **kw)`` in Triton 3.6 does, on every call: the binder (each argument's
specialization: dtype, 16-byte alignment, ``== 1``), reads of the knobs, a string of the options
for the cache key, a check of the kernel's global values, a launch-metadata dict for the profiling
hooks, then the launcher.  On the H200's host the stage-1 launch alone took 100-290 us of a
``sample()`` call's 230-420 us (``benchmarks/results/host_overhead_h200.json``), comparable with the GPU time of a
small-batch call, so "as called" could wait on the host.  The direct path takes 12-20% off the call's
host time (median of paired runs, ``benchmarks/results/host_overhead_direct_h200.json``).

:func:`direct` keeps Triton's own specialization -- it runs the same binder, so a call whose
arguments Triton would specialize differently gets a different key -- and replaces the rest by
one dictionary lookup: the key is ``(device, debug, the binder's specialization, the options)``,
the value the kernel that ``fn[grid]`` compiled for it on the first such call.  The launch then
goes straight to the compiled kernel's launcher on the current stream, without the profiling
hooks.  It falls back to ``fn[grid]`` in the interpreter, when a launch hook is registered (for
example Proton's), when :data:`ENABLED` is false (the benchmarks time both paths), and on a Triton other
than 3.6 (the binder's return value and the launcher's arguments are Triton internals, checked on 3.6 only).
Not repeated: Triton's check that the kernel's global values have not changed since it was compiled (this
package's kernels read only constants).
``tests/test_launch.py`` checks on the GPU that both paths give the same bits and that differently
specialized arguments get their own kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import triton
from triton import knobs

from .._device import INTERPRET

#: Switch for the benchmarks (``benchmarks/host_overhead.py`` times both paths in one process).
ENABLED: bool = True

#: The Triton versions whose internals the direct path was checked against (``tests/test_launch.py`` on the H200).
CHECKED_TRITON: tuple[str, ...] = ("3.6.",)
_CHECKED = triton.__version__.startswith(CHECKED_TRITON)


class DirectKernel:
    """A JIT kernel launched as ``DirectKernel(fn)[grid](*args, **kw)``, the same call as ``fn[grid]``."""

    def __init__(self, fn) -> None:
        self.fn = fn
        self.compiled: dict[tuple, Any] = {}

    def __getitem__(self, grid: Sequence[int]) -> Callable[..., Any]:
        return lambda *args, **kwargs: self.launch(grid, args, kwargs)

    def launch(self, grid: Sequence[int], args: tuple, kwargs: dict) -> Any:
        """Launch on ``grid`` (a tuple of ints); returns the compiled kernel, as ``fn[grid]`` does."""
        if INTERPRET or not ENABLED or not _CHECKED or _hooked(knobs.runtime):
            return self.fn[grid](*args, **kwargs)
        device = torch.cuda.current_device()
        bound, specialization, options = self.fn.device_caches[device][4](*args, **kwargs)
        try:
            key = (device, knobs.runtime.debug, tuple(specialization), tuple(options.items()))
            kernel = self.compiled.get(key)
        except TypeError:  # an unhashable argument: Triton's own path
            return self.fn[grid](*args, **kwargs)
        if kernel is None:  # Triton's own launch, compiling if needed; its kernel is kept under the key
            kernel = self.fn[grid](*args, **kwargs)
            self.compiled[key] = kernel.result() if hasattr(kernel, "result") else kernel
            return kernel
        grid_x, grid_y, grid_z = (*grid, 1, 1)[:3]
        stream = torch._C._cuda_getCurrentRawStream(device)
        kernel.run(grid_x, grid_y, grid_z, stream, kernel.function, kernel.packed_metadata, None, None, None,
                   *bound.values())  # fmt: skip
        return kernel


def _hooked(runtime) -> bool:
    """Whether a launch hook is registered (Triton 3.6 keeps them in ``HookChain.calls``; a plain callable or
    ``None`` also counts, as other versions may hold one)."""
    enter, leave = runtime.launch_enter_hook, runtime.launch_exit_hook
    return bool(getattr(enter, "calls", enter)) or bool(getattr(leave, "calls", leave))


_DIRECT: dict[int, DirectKernel] = {}


def direct(fn) -> DirectKernel:
    """The one :class:`DirectKernel` of the JIT function ``fn`` (kept, with its compiled kernels, for the process)."""
    kernel = _DIRECT.get(id(fn))
    if kernel is None:
        kernel = _DIRECT[id(fn)] = DirectKernel(fn)
    return kernel


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for positive ints (``triton.cdiv`` is a constexpr function in Triton 3.6, whose host call
    unwraps its arguments: a few microseconds on every launch)."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of two ``>= n`` for ``n >= 1`` (0 for 0), as ``triton.next_power_of_2``, in plain Python."""
    return 1 << (n - 1).bit_length() if n > 0 else 0
