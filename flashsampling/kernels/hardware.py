"""What the device offers the kernels: its SM count (and so a persistent kernel's grid), whether it is a Hopper
GPU, and which tensors TMA can read.

The answers are cached per device index: each query costs the host microseconds, and the tile policy
(:mod:`.tiles`) and the launchers ask on every call.
"""

from __future__ import annotations

import functools

import torch


def tma_compatible(*tensors: torch.Tensor) -> bool:
    """Whether every tensor can be read through a TMA descriptor (2-D, unit last stride, 16-byte
    aligned base and row stride)."""
    for t in tensors:
        if t.dim() != 2 or t.stride(1) != 1 or (t.stride(0) * t.element_size()) % 16 or t.data_ptr() % 16:
            return False
    return True


def device_index(device: torch.device) -> int:
    """The CUDA device's index (the current device's for ``cuda`` without one)."""
    return device.index if device.index is not None else torch.cuda.current_device()


def sm_count(device: torch.device) -> int:
    """SMs of the CUDA device ``device`` (its index, or the current device's)."""
    return _sm_count(device_index(device))


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


@functools.cache
def is_sm90(index: int) -> bool:
    """Whether CUDA device ``index`` is a Hopper GPU (compute capability 9.x)."""
    return torch.cuda.get_device_capability(index)[0] == 9


def num_programs(device: torch.device, num_tiles: int, per_sm: int = 1) -> int:
    """The grid of a persistent kernel: ``per_sm`` programs per SM, never more programs than tiles; 4 in the
    interpreter (whose cost is per program)."""
    if device.type != "cuda":
        return max(1, min(4, num_tiles))
    return max(1, min(sm_count(device) * per_sm, num_tiles))
