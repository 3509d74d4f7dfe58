"""The benchmarks build on any machine: every script under benchmarks/ imports, and every probe kernel of
benchmarks/probes/ compiles for sm_90a (triton ships ptxas) within its launch's registers, without spills.

The scripts themselves time kernels on a GPU (benchmarks/README.md); here they are imported only, which checks that
their imports of the package and of the probes resolve.  The probes' compiles run in one fresh compiled-mode process
(tests/sm90.py); the shipped kernel's own specializations are tests/test_pingpong.py's.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

from benchmarks.probes.gluon import NOISES
from benchmarks.probes.pipeline import MODES
from flashsampling.kernels.pingpong import launch_registers
from tests.sm90 import PTXAS, SHARED_BYTES, assert_no_spills, compile_all

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p.stem for p in BENCHMARKS.glob("*.py") if p.stem != "__init__")
#: The shipped noises, compiled by tests/test_pingpong.py.
SHIPPED_NOISES = ("off", "exact", "tile_cdf")
PROBE_NOISES = [n for n in NOISES if n not in SHIPPED_NOISES]
PROBE_MODES = [m for m in MODES if m != "sample"]

PROBES = f"""
NOISES, MODES = {PROBE_NOISES!r}, {PROBE_MODES!r}
from benchmarks.probes import cooperative, handoff
from benchmarks.probes.gluon import compile_gluon_probe
from benchmarks.probes.tiles import ws_tiles
from flashsampling.kernels.tiles import warp_specialized_tiles
wide = warp_specialized_tiles(256)
coop = ws_tiles(128, 256, 64, 4, 32)
KERNELS = {{
    **{{f"noise-{{n}}": (lambda n=n: compile_gluon_probe(wide, noise=n)) for n in NOISES}},
    **{{f"mode-{{m}}": (lambda m=m: compile_gluon_probe(wide, mode=m)) for m in MODES}},
    "3-groups": lambda: compile_gluon_probe(ws_tiles(64, 128, 64, 4, 16, 3)),
    "stage-per-group": lambda: compile_gluon_probe(ws_tiles(64, 128, 64, 5, 16, 3), stage_per_group=True),
    "handoff-2": lambda: handoff.compile_offline(ws_tiles(64, 128, 64, 6, 16, 2, handoff=True)),
    "coop-bare": lambda: cooperative.compile_cooperative_offline(coop, "bare"),
    "coop-register_argmax": lambda: cooperative.compile_cooperative_offline(coop, "register_argmax"),
    "coop-bare-imad": lambda: cooperative.compile_cooperative_offline(coop, "bare", ("imad", 10)),
}}
"""

#: Registers per thread at launch: two consumer groups and the loader (168), three (128); the handoff kernel's MMA
#: group, two epilogue groups and the loader (128).
REGISTERS = {"3-groups": launch_registers(3), "stage-per-group": launch_registers(3), "handoff-2": launch_registers(3)}


#: Probes whose recorded compiles spill (bytes of spill stores), kept as measured: ``oct_hi``'s 16-bit bounds
#: (benchmarks/NOTES.md, the noise-cost probes' round 3: a 56-byte stack frame outside the scan).
KNOWN_SPILLS = {"noise-oct_hi": 60}


@pytest.mark.parametrize("name", SCRIPTS)
def test_benchmark_script_imports(name):
    """The script imports (its ``main`` is not run: it needs a GPU).  What a script sets in the environment at import
    (``sass_fingerprint.py`` asks for compiled kernels) is undone, so that it does not reach later tests' processes."""
    env = dict(os.environ)
    try:
        module = importlib.import_module(f"benchmarks.{name}")
    finally:
        os.environ.clear()
        os.environ.update(env)
    assert module.__doc__, f"benchmarks/{name}.py has no docstring"


@pytest.fixture(scope="module")
def probes(tmp_path_factory):
    return compile_all(PROBES, tmp_path_factory.mktemp("probes"))


@pytest.mark.skipif(not PTXAS.exists(), reason="triton without ptxas")
@pytest.mark.parametrize(
    "name",
    [f"noise-{n}" for n in PROBE_NOISES] + [f"mode-{m}" for m in PROBE_MODES]
    + ["3-groups", "stage-per-group", "handoff-2", "coop-bare", "coop-register_argmax", "coop-bare-imad"],
)  # fmt: skip
def test_probe_compiles_for_sm90_without_spills(name, probes, tmp_path):
    """Each probe builds for sm_90a, fits the shared memory (227 KB) and its launch's register budget, and spills
    nothing -- but the ``epilogue`` mode (the sampler's epilogue alone, a timing probe), whose 240 bytes of spills
    are those it always had (its SASS is unchanged by the move out of the package), and :data:`KNOWN_SPILLS`.
    The ``epilogue`` mode has no loads or MMAs, the others both; the cooperative probe's MMAs are
    ``64 x 256 x 16`` per warp group, and its ``imad`` filler has its 64-bit products."""
    rec = probes[name]
    assert "error" not in rec, rec.get("error")
    assert rec["shared"] <= SHARED_BYTES
    ptx = rec["ptx"]
    matmul = name != "mode-epilogue"
    assert ("wgmma.mma_async" in ptx) == matmul and ("cp.async.bulk.tensor" in ptx) == matmul
    if name.startswith("coop"):
        assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in ptx
        assert ("mul.wide.u32" in ptx) == name.endswith("imad")
    if name == "mode-epilogue":
        return
    regs = REGISTERS.get(name, launch_registers(2))
    assert_no_spills(
        tmp_path, ptx, regs, exact_registers=not name.startswith("coop"), known_spill_bytes=KNOWN_SPILLS.get(name, 0)
    )
