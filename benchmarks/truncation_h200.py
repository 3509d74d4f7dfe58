"""One GPU call for the fused truncated sampler (issue 37): compile report, correctness, the GPU tests, a tile sweep
and the timing grid, within a time budget, every result written as it comes.

Usage (on the H200, from the repository root; ``$OUT`` the folder the results go to)::

    python benchmarks/truncation_h200.py --mode quick --out "$OUT" --budget-s 500   # first probe, ~5-8 minutes
    python benchmarks/truncation_h200.py --mode full  --out "$OUT" --budget-s 520   # the grid

``quick``: (1) every kernel specialization the grid uses compiled, with its registers and spills; (2) correctness on
the GPU: stage 1's lists against the logits its ``WRITE`` mode recomputes (the same bits: what the fallback relies
on) and against a sort of each tile, and the compiled tokens against the twin's on the kernel's own logits, with
every mismatch checked to be a near-tie of the noise (lists and forced fallback, five filters and orders); (3) the
GPU tests (``tests/test_truncation_gpu.py``, ``tests/test_topk_stats.py``, the device-seed refusal); (4) a stage-1
tile sweep at B = 16, 64, 256; (5) the grid on two shapes, B = 1, 64, 256, with stage 1 and stage 2 timed apart.
``full``: (1), the lists check, then the whole grid of ``bench_truncation_h200.py`` (5 shapes, B = 1..256, k in
{1, 20, 50, 256, 1024}, p in {0.5, 0.9, 0.99}, min_p in {0.05, 0.1}, random and peaked logits) with the compiled
torch pipelines, until the budget.

Files under ``--out``: ``truncation_check.json`` (compile report, checks, sweep), ``bench_truncation_h200.json``
(the grid, the format of ``bench_truncation_h200.py``), ``pytest.txt``, ``summary.txt`` (also printed).
``--dry-run`` runs the same code on tiny shapes in the interpreter (CPU), to check the script itself.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import flashsampling  # noqa: E402
import flashsampling.truncation as truncation  # noqa: E402
from benchmarks import bench_truncation_h200 as bench  # noqa: E402
from flashsampling.kernels import truncation as kernels  # noqa: E402
from flashsampling.kernels import truncation_stage2  # noqa: E402
from flashsampling.kernels.tiles import TileConfig  # noqa: E402
from flashsampling.noise import NOISE_ABS_TOL, NOISE_REL_TOL, STREAM_TOKEN, token_noise_np  # noqa: E402
from flashsampling.twin import inverse_temperature32, kept_mask, sample_truncated_twin  # noqa: E402


class Run:
    """The results so far, written to ``truncation_check.json`` after every step."""

    def __init__(self, out: Path, budget_s: float) -> None:
        self.out = out
        self.deadline = time.monotonic() + budget_s
        self.start = time.monotonic()
        self.data: dict = {"meta": {"mode": None, "device": _device_name()}}
        out.mkdir(parents=True, exist_ok=True)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def step(self, name: str, fn, *args, min_left: float = 0.0):
        """Run ``fn(*args)`` (if ``min_left`` seconds remain), store its result or its error under ``name``."""
        if self.left() < min_left:
            self.data[name] = {"skipped": f"{self.left():.0f} s left"}
            return None
        t0 = time.monotonic()
        try:
            result = fn(*args)
            self.data[name] = result
        except Exception:  # noqa: BLE001 - one failure must not hide the others
            result = None
            self.data[name] = {"error": traceback.format_exc()[-2500:]}
        self.data.setdefault("seconds", {})[name] = round(time.monotonic() - t0, 1)
        (self.out / "truncation_check.json").write_text(json.dumps(self.data, indent=1, default=str))
        print(f"[{time.monotonic() - self.start:6.0f} s] {name}: {_brief(self.data[name])}", flush=True)
        return result


def _device_name() -> str:
    return torch.cuda.get_device_name() if torch.cuda.is_available() and not flashsampling.INTERPRET else "cpu"


def _brief(x) -> str:
    text = json.dumps(x, default=str)
    return text if len(text) < 400 else text[:400] + " ..."


# --------------------------------------------------------------------------------------------
# (1) Compile report
# --------------------------------------------------------------------------------------------


def compile_report() -> dict:
    """Registers and spills of every compiled specialization of the truncated sampler's kernels so far."""
    if flashsampling.INTERPRET:
        return {"interpreter": True}
    out = {}
    fns = {"stage1": kernels.truncation_stage1_kernel, "logits": kernels.truncation_logits_stage1_kernel,
           "stage2": truncation_stage2.truncation_stage2_kernel}  # fmt: skip
    for name, fn in fns.items():
        for cache in fn.device_caches.values():
            for key, k in cache[0].items():
                try:
                    k._init_handles()
                    c = k.src.constants if hasattr(k, "src") else {}
                    tag = ",".join(f"{n}={v}" for n, v in sorted(k.metadata._asdict().items())
                                   if n in ("num_warps", "num_stages"))  # fmt: skip
                    out[f"{name}[{len(out)}]"] = {"n_regs": k.n_regs, "n_spills": k.n_spills, "opts": tag,
                                                  "key": str(key)[-300:], "constants": str(c)[:300]}  # fmt: skip
                except Exception as e:  # noqa: BLE001
                    out[f"{name}[{len(out)}]"] = {"error": repr(e)[:200]}
    return out


def warm_up(shapes, batches) -> dict:
    """One call per (shape, B, filter kind): compiles what the grid will run; the seconds it took."""
    data = bench.Inputs(_dev())
    t = {}
    for V, D in shapes:
        w = data.weight(V, D)
        for B in batches:
            h = data.hidden(V, D, B, "random")
            for kind, value in (("k", 50), ("k", 1024), ("p", 0.9), ("min_p", 0.05)):
                t0 = time.monotonic()
                bench.fused_call(h, w, kind, value)()
                _sync()
                t[f"{V}x{D} B={B} {kind}={value}"] = round(time.monotonic() - t0, 2)
            flashsampling.sample(h, w, temperature=0.8, seed=1, host_checks=False)
    return t


def _dev():
    return "cpu" if flashsampling.INTERPRET else "cuda"


def _sync():
    if not flashsampling.INTERPRET:
        torch.cuda.synchronize()


# --------------------------------------------------------------------------------------------
# (2) Correctness on the GPU
# --------------------------------------------------------------------------------------------


def lists_check(V: int, D: int, batches) -> dict:
    """Stage 1's lists against the logits recomputed by its ``WRITE`` mode at the same tiles: every listed logit
    equals the recomputed one at its index (bit for bit), and each tile's list is the first ``LIST`` of the tile in the
    order (logit descending, index ascending) -- a sort of the recomputed tile."""
    data = bench.Inputs(_dev())
    w = data.weight(V, D)
    out = {}
    for B in batches:
        h = data.hidden(V, D, B, "random")
        tiles = kernels.truncation_tiles(B, h.element_size())
        LIST = kernels.list_length(1024, tiles.block_v, V)
        ones = torch.ones(B, dtype=torch.float64, device=h.device)
        lists = kernels.launch_truncation_stage1(h, w, torch.ones(B, device=h.device), ones, 1, 2, 1, LIST, tiles,
                                                 mass=True, full=False)  # fmt: skip
        z = kernels.launch_write_logits(h, w, tiles)
        cz, ci = lists["cand_z"], lists["cand_i"].long()
        live = cz > float("-inf")  # (an entry past a tile's last finite logit is -inf, its index arbitrary)
        same = bool(torch.equal(cz[live], torch.gather(z, 1, ci.clamp(0, V - 1))[live]))
        T = lists["T"]
        pad = T * tiles.block_v - V
        zt = torch.nn.functional.pad(z, (0, pad), value=float("-inf")).reshape(B, T, tiles.block_v)
        # Sort each tile by (z descending, index ascending): a stable descending sort.
        top = torch.sort(zt, dim=-1, descending=True, stable=True)
        want_z = top.values[..., :LIST].reshape(B, -1)
        want_i = (top.indices[..., :LIST] + torch.arange(T, device=z.device)[None, :, None] * tiles.block_v).reshape(
            B, -1
        )
        finite = want_z > float("-inf")
        sorted_ok = bool(torch.equal(cz, want_z)) and bool(torch.equal(ci[finite], want_i[finite]))
        mass_ok = bool((lists["mass"] >= 1.0).all())
        out[f"B={B}"] = {"list": LIST, "tiles": [tiles.block_b, tiles.block_v], "lists_equal_recomputed_logits": same,
                         "lists_are_the_tiles_first": sorted_ok, "tile_masses_at_least_1": mass_ok}  # fmt: skip
    return out


def twin_check(V: int, D: int, B: int, S: int) -> dict:
    """Compiled tokens against the twin's on the kernel's own fp32 logits; every mismatch must be kept and a
    near-tie of the noise (``2 (NOISE_ABS_TOL + NOISE_REL_TOL |G|)``).  Lists as shipped, and forced through the
    fallback (two entries per tile)."""
    g = torch.Generator(device=_dev()).manual_seed(5)
    w = (torch.randn(V, D, device=_dev(), generator=g) * 0.05).bfloat16()
    h = torch.randn(B, D, device=_dev(), generator=g).bfloat16()
    T = 0.8
    z = kernels.launch_write_logits(h, w, kernels.truncation_tiles(B, 2)).cpu().numpy()
    inv = inverse_temperature32(T, 1)[0]
    cases = [dict(top_k=50), dict(top_k=1024), dict(top_p=0.9), dict(min_p=0.05),
             dict(top_k=100, top_p=0.9, min_p=0.02, order="vllm"),
             dict(top_p=0.5, min_p=0.1, order="joint")]  # fmt: skip
    out = {}
    for forced in (None, 2):
        for filters in cases:
            truncation.LIST_OVERRIDE = forced
            try:
                got = flashsampling.sample(h, w, temperature=T, seed=99, num_samples=S, **filters).cpu().numpy()
            finally:
                truncation.LIST_OVERRIDE = None
            want = sample_truncated_twin(z, T, seed=99, num_samples=S, **filters)
            kept = kept_mask(
                z, T, filters.get("top_k"), filters.get("top_p"), filters.get("min_p"), filters.get("order")
            )
            rows, samples = np.nonzero(got != want)
            bad = []
            for r, s in zip(rows.tolist(), samples.tolist()):
                a, b = int(got[r, s]), int(want[r, s])
                g2, _ = token_noise_np(99, r, np.array([a, b], dtype=np.uint32), s, STREAM_TOKEN, lazy_keys=True)
                gap = abs(float(z[r, a] * inv + g2[0] - (z[r, b] * inv + g2[1])))
                if not (kept[r, a] and gap <= 2 * (NOISE_ABS_TOL + NOISE_REL_TOL * float(np.abs(g2).max()))):
                    bad.append((r, s, a, b, gap, bool(kept[r, a])))
            out[f"{'fallback ' if forced else ''}{filters}"] = {"draws": int(got.size), "mismatches": int(rows.size),
                                                                "not_near_ties": bad[:5]}  # fmt: skip
    return out


def pytest_gpu(out_dir: Path, timeout: float) -> dict:
    """The GPU tests in a subprocess, with a timeout; the tail of their output."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_truncation_gpu.py",
           "tests/test_topk_stats.py", "tests/test_device_seed.py"]  # fmt: skip
    t0 = time.monotonic()
    try:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        text, rc = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as e:
        text, rc = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), "timeout"
    (out_dir / "pytest.txt").write_text(text)
    last = [line for line in text.splitlines() if line.strip()][-3:]
    return {"returncode": rc, "seconds": round(time.monotonic() - t0, 1), "tail": last}


# --------------------------------------------------------------------------------------------
# (4) Tile sweep
# --------------------------------------------------------------------------------------------

#: Stage-1 tiles tried per batch band: (block_b, block_v, block_d, warps, stages); spill-free at sm_90a except where
#: noted (``ptxas -v``, recorded in benchmarks/NOTES.md).
SWEEP = {
    16: [(16, 256, 64, 8, 4), (16, 64, 128, 4, 4), (16, 128, 64, 4, 4)],
    64: [(64, 128, 64, 8, 3), (32, 128, 64, 8, 4), (64, 64, 64, 8, 3)],
    256: [(64, 128, 64, 8, 3), (128, 128, 64, 16, 3), (64, 256, 64, 16, 3)],
}


def tile_sweep(V: int, D: int, rep_ms: float) -> dict:
    data = bench.Inputs(_dev())
    w = data.weight(V, D)
    out = {}
    for B, configs in SWEEP.items():
        h = data.hidden(V, D, B, "random")
        plain = bench.time_ms(bench.plain_call(h, w), rep_ms)
        row = {"plain_fused_ms": plain}
        for kind, value in (("k", 1024),):  # one list length: each tile configuration is one more compile
            for cfg in configs:
                bb, bv, bd, warps, stages = cfg
                tiles = TileConfig(bb, bv, bd, num_warps=warps, num_stages=stages)
                try:
                    row[f"{kind}={value} {cfg}"] = bench.time_ms(bench.fused_call(h, w, kind, value, tiles), rep_ms)
                except Exception as e:  # noqa: BLE001
                    row[f"{kind}={value} {cfg}"] = f"{type(e).__name__}: {str(e)[:120]}"
        out[f"B={B}"] = row
    return out


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=("quick", "full"), default="quick")
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    ap.add_argument("--budget-s", type=float, default=500.0)
    ap.add_argument("--dry-run", action="store_true", help="tiny shapes in the interpreter (CPU): the script itself")
    args = ap.parse_args(argv)
    out = Path(args.out)
    run = Run(out, args.budget_s)
    run.data["meta"]["mode"] = args.mode
    dry = args.dry_run or flashsampling.INTERPRET
    shapes = [(300, 32)] if dry else [(151936, 4096), (128256, 8192)]
    small = (2000, 64, 4, 2) if dry else (32000, 1024, 64, 8)
    batches = [2] if dry else [1, 64, 256]
    rep = 20.0 if args.mode == "quick" else 30.0
    run.step("warm_up_seconds", warm_up, shapes[:1] if dry else shapes, batches)
    run.step("compile_report", compile_report)
    run.step("lists_check", lists_check, *(shapes[0] if dry else (151936, 4096)), batches)
    if args.mode == "quick":
        run.step("twin_check", twin_check, *small, min_left=60)
        if not dry:
            run.step("pytest", pytest_gpu, out, max(30.0, min(180.0, run.left() - 200)), min_left=120)
            run.step("tile_sweep", tile_sweep, 151936, 4096, rep, min_left=150)
        grid = ["--shapes", ";".join(f"{v},{d}" for v, d in shapes), "--batches", ",".join(map(str, batches)),
                "--filters", "k=1,k=50,k=1024,p=0.5,p=0.9,min_p=0.05", "--split"]  # fmt: skip
    else:
        grid = ["--compiled"] if not dry else ["--shapes", "300,32", "--batches", "2", "--filters", "k=5,p=0.9"]
    grid += ["--out", str(out / "bench_truncation_h200.json"), "--rep-ms", str(rep),
             "--budget-s", str(max(10.0, run.left() - 15))]  # fmt: skip
    result = run.step("grid", lambda: bench.main(grid), min_left=20)
    run.step("compile_report_after", compile_report)
    lines = [f"mode {args.mode}, {time.monotonic() - run.start:.0f} s, device {run.data['meta']['device']}"]
    for name in ("lists_check", "twin_check", "pytest", "tile_sweep"):
        if name in run.data:
            lines.append(f"{name}: {_brief(run.data[name])[:900]}")
    spills = {k: v for k, v in (run.data.get("compile_report_after") or {}).items()
              if isinstance(v, dict) and v.get("n_spills")}  # fmt: skip
    lines.append(f"kernels with spills: {json.dumps(spills)[:600] if spills else 'none'}")
    if result:
        lines.append(bench.summary(result["rows"]))
    text = "\n".join(lines)
    (out / "summary.txt").write_text(text + "\n")
    print("\n===== summary =====\n" + text, flush=True)


if __name__ == "__main__":
    main()
