"""The direct launch path (flashsampling/kernels/launch.py).

On any machine: one :class:`DirectKernel` per JIT function; the cache logic against a stand-in JIT function (first
call per specialization through ``fn[grid]``, later ones direct, a new kernel per specialization, Triton's path for an
unhashable one); hooks detected; the host ``cdiv``/``next_power_of_2`` equal to Triton's.
On a GPU: the direct path gives the bits of Triton's ``fn[grid]`` path for the Triton and the Gluon stage 1 and
for ``sample()`` (per-row temperatures, several samples, CUDA-graph capture, a side stream); arguments that
Triton specializes differently (16-byte alignment, an integer equal to 1) get their own compiled kernel; a
registered launch hook sends the launch back through Triton (so that profilers still see it).
"""

from __future__ import annotations

import contextlib

import pytest
import torch

import flashsampling
from flashsampling.kernels import launch
from flashsampling.kernels.stage1 import fused_stage1_kernel, launch_fused_stage1
from flashsampling.kernels.stage2 import reduce_tiles_kernel
from flashsampling.kernels.tiles import TileConfig, default_tiles, stage1_tiles

GPU = torch.cuda.is_available() and not flashsampling.INTERPRET
HOPPER = GPU and torch.cuda.get_device_capability()[0] == 9
gpu = pytest.mark.skipif(not GPU, reason="needs a CUDA GPU (compiled kernels)")


@contextlib.contextmanager
def launch_path(direct: bool):
    """Run the block with the direct launch on or off."""
    before = launch.ENABLED
    launch.ENABLED = direct
    try:
        yield
    finally:
        launch.ENABLED = before


def test_one_direct_kernel_per_function():
    assert launch.direct(reduce_tiles_kernel) is launch.direct(reduce_tiles_kernel)
    assert launch.direct(reduce_tiles_kernel) is not launch.direct(fused_stage1_kernel)
    assert launch.direct(reduce_tiles_kernel).fn is reduce_tiles_kernel


def test_launch_hooks_detected():
    """A registered hook (Triton 3.6's ``HookChain``, or a bare callable) sends launches through Triton."""
    from types import SimpleNamespace

    from triton.knobs import HookChain

    empty = SimpleNamespace(launch_enter_hook=HookChain(), launch_exit_hook=HookChain(reversed=True))
    assert not launch._hooked(empty)
    chain = HookChain()
    chain.add(print)
    assert launch._hooked(SimpleNamespace(launch_enter_hook=chain, launch_exit_hook=HookChain()))
    assert launch._hooked(SimpleNamespace(launch_enter_hook=None, launch_exit_hook=print))
    assert not launch._hooked(SimpleNamespace(launch_enter_hook=None, launch_exit_hook=None))


def test_direct_path_only_on_checked_triton():
    import triton

    assert launch._CHECKED == triton.__version__.startswith(launch.CHECKED_TRITON)


class _FakeKernel:
    """A compiled kernel's launch surface: records ``run``'s grid, stream and arguments."""

    def __init__(self, name):
        self.name, self.function, self.packed_metadata, self.launches = name, object(), object(), []

    def run(self, gx, gy, gz, stream, function, metadata, launch_metadata, enter, leave, *args):
        assert function is self.function and metadata is self.packed_metadata
        assert launch_metadata is None and enter is None and leave is None
        self.launches.append(((gx, gy, gz), stream, args))


class _FakeJIT:
    """``fn[grid](*args, **kw)`` and ``fn.device_caches[device][4]`` (the binder) of a JIT function: one 'compiled'
    kernel per specialization, the specialization being each positional argument's type and whether it is 1."""

    def __init__(self):
        self.kernels, self.slow_launches = {}, 0
        self.device_caches = {0: (None, None, None, None, self.binder)}

    def binder(self, *args, **kwargs):
        bound = {f"a{i}": a for i, a in enumerate(args)} | {k: v for k, v in kwargs.items() if k.isupper()}
        spec = [(type(a).__name__, a == 1 if isinstance(a, int) else None) for a in args]
        spec += [("constexpr", v) for k, v in kwargs.items() if k.isupper()]
        return bound, spec, {k: v for k, v in kwargs.items() if not k.isupper()}

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.slow_launches += 1
            _, spec, options = self.binder(*args, **kwargs)
            key = (tuple(spec), tuple(options.items()))
            return self.kernels.setdefault(key, _FakeKernel(key))

        return launch


def test_direct_kernel_logic(monkeypatch):
    """Without a GPU, against a stand-in JIT function: the first call of each specialization goes through
    ``fn[grid]`` (which compiles); later calls launch the kept kernel directly, with every bound argument in order
    and the grid padded to three dimensions; a different specialization (an int that becomes 1, another constexpr,
    another option) gets its own kernel; an unhashable specialization falls back to ``fn[grid]``."""
    monkeypatch.setattr(launch, "INTERPRET", False)
    monkeypatch.setattr(launch, "_CHECKED", True)
    monkeypatch.setattr(launch.torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(launch.torch._C, "_cuda_getCurrentRawStream", lambda device: 1234, raising=False)
    fn = _FakeJIT()
    direct = launch.DirectKernel(fn)
    first = direct[(7,)](3, 4.0, BLOCK=64, num_warps=4)
    assert fn.slow_launches == 1 and first.launches == []
    again = direct[(7,)](5, 6.0, BLOCK=64, num_warps=4)
    assert again is first and fn.slow_launches == 1
    assert first.launches == [((7, 1, 1), 1234, (5, 6.0, 64))]
    direct[(2, 3)](5, 6.0, BLOCK=64, num_warps=4)
    assert first.launches[-1][0] == (2, 3, 1)
    for args, kwargs in (((1, 6.0), {"BLOCK": 64, "num_warps": 4}), ((5, 6.0), {"BLOCK": 128, "num_warps": 4}),
                         ((5, 6.0), {"BLOCK": 64, "num_warps": 8})):  # fmt: skip
        other = direct[(7,)](*args, **kwargs)
        assert other is not first
    assert fn.slow_launches == 4 and len(direct.compiled) == 4
    unhashable = _FakeJIT()
    unhashable.device_caches = {0: (None, None, None, None, lambda *a, **k: ({}, [["a list"]], {}))}
    direct = launch.DirectKernel(unhashable)
    direct[(1,)](2, BLOCK=8)
    direct[(1,)](2, BLOCK=8)
    assert unhashable.slow_launches == 2 and direct.compiled == {}


def _inputs(B: int, V: int, D: int, seed: int = 0, offset: int = 0):
    """bf16 ``hidden [B, D]``, ``offset`` elements into its storage (misaligned when odd), and ``weight [V, D]``."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    storage = torch.empty(B * D + offset, dtype=torch.bfloat16, device="cuda")
    h = storage[offset:].view(B, D)
    h.copy_(torch.randn(B, D, generator=g, device="cuda"))
    w = (torch.randn(V, D, generator=g, device="cuda") * 0.5).bfloat16()
    return h, w


def _stage1(h, w, tiles: TileConfig, inv: torch.Tensor) -> tuple[torch.Tensor, ...]:
    parts = launch_fused_stage1(h, w, inv, 0x12345678, 0x9ABCDEF0, 1, tiles)
    torch.cuda.synchronize()
    return tuple(p.clone() for p in parts[:4])


def _assert_same(a: tuple[torch.Tensor, ...], b: tuple[torch.Tensor, ...]) -> None:
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y)


@gpu
@pytest.mark.parametrize(
    "B, V, D, offset",
    [(1, 1000, 256, 0), (5, 3001, 320, 0), (5, 3001, 320, 1), (16, 4096, 512, 0), (3, 777, 96, 3)],
)
def test_triton_stage1_same_bits(B, V, D, offset):
    h, w = _inputs(B, V, D, offset=offset)
    inv = torch.full((B,), 1.25, device="cuda")
    tiles = default_tiles(B, V, D)
    with launch_path(False):
        ref = _stage1(h, w, tiles, inv)
    with launch_path(True):
        first = _stage1(h, w, tiles, inv)  # compiles (or finds Triton's kernel) and keeps it
        again = _stage1(h, w, tiles, inv)  # the direct launch
    _assert_same(ref, first)
    _assert_same(ref, again)


@gpu
def test_differently_specialized_arguments_get_their_own_kernel():
    """An aligned and a misaligned ``hidden``, and ``B == 1`` against ``B == 2``: Triton specializes on both,
    so the direct path must hold a kernel for each, and each must give Triton's bits."""
    direct = launch.direct(fused_stage1_kernel)
    D, V = 256, 1000
    keys = []
    for B, offset in ((2, 0), (2, 1), (1, 0)):
        h, w = _inputs(B, V, D, seed=B + offset, offset=offset)
        inv = torch.full((B,), 0.9, device="cuda")
        tiles = default_tiles(B, V, D)
        with launch_path(False):
            ref = _stage1(h, w, tiles, inv)
        with launch_path(True):
            before = set(direct.compiled)
            _stage1(h, w, tiles, inv)
            keys.append(set(direct.compiled) - before)
            _assert_same(ref, _stage1(h, w, tiles, inv))
    new = [k for ks in keys for k in ks]
    assert len(new) == len(set(new))
    assert len({id(direct.compiled[k]) for k in direct.compiled}) >= 3


@gpu
@pytest.mark.skipif(not HOPPER, reason="the Gluon kernel needs an sm_90 GPU")
@pytest.mark.parametrize("B", [48, 128, 256])
def test_gluon_stage1_same_bits(B):
    h, w = _inputs(B, 5000, 512, seed=B)
    inv = torch.linspace(0.5, 2.0, B, device="cuda")
    tiles = stage1_tiles(h, w, 1)
    assert tiles.warp_specialized
    with launch_path(False):
        ref = _stage1(h, w, tiles, inv)
    with launch_path(True):
        _stage1(h, w, tiles, inv)
        again = _stage1(h, w, tiles, inv)
    _assert_same(ref, again)


@gpu
@pytest.mark.parametrize("B, S", [(4, 1), (4, 3), (64, 1), (200, 1)])
def test_sample_same_tokens(B, S):
    h, w = _inputs(B, 6000, 256, seed=7)
    temps = torch.linspace(0.0, 1.5, B, device="cuda")
    calls = [dict(temperature=0.8, seed=11, num_samples=S), dict(temperature=temps, seed=12, num_samples=S)]
    for kw in calls:
        with launch_path(False):
            ref = flashsampling.sample(h, w, **kw)
        with launch_path(True):
            flashsampling.sample(h, w, **kw)
            assert torch.equal(flashsampling.sample(h, w, **kw), ref)


@gpu
def test_side_stream_and_graph_capture():
    B = 40
    h, w = _inputs(B, 4000, 256, seed=3)
    with launch_path(False):
        ref = flashsampling.sample(h, w, temperature=0.7, seed=5, host_checks=False)
    with launch_path(True):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                out = flashsampling.sample(h, w, temperature=0.7, seed=5, host_checks=False)
        torch.cuda.current_stream().wait_stream(side)
        assert torch.equal(out, ref)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = flashsampling.sample(h, w, temperature=0.7, seed=5, host_checks=False)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(captured, ref)


@gpu
def test_launch_hook_goes_through_triton():
    from triton import knobs

    seen = []

    def hook(metadata):
        seen.append(metadata)

    h, w = _inputs(4, 1000, 256)
    flashsampling.sample(h, w, seed=1)  # compiled and kept
    knobs.runtime.launch_enter_hook.add(hook)
    try:
        flashsampling.sample(h, w, seed=1)
        torch.cuda.synchronize()
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    assert len(seen) >= 2  # stage 1 and the reduction, each seen by the hook


def test_host_arithmetic_matches_triton():
    import triton

    for n in range(0, 5000):
        assert launch.next_power_of_2(n) == triton.next_power_of_2(n)
        for d in (1, 3, 16, 64, 256):
            assert launch.cdiv(n, d) == triton.cdiv(n, d)
    assert launch.next_power_of_2(2**40 + 1) == 2**41
