"""What the proofs need measured on the GPU (end_to_end.md, section 4), in one run: ``python proofs/gpu_checks.py --out
DIR`` on an H200 writes ``DIR/gpu_h200.json``; copied to ``proofs/results/``, it fills the compiled column of
end_to_end.md's table.  ``--cpu`` runs every part on small slices through the Triton interpreter (here, the device
functions equal the twin's bit for bit, which the run checks), so the script's plumbing is tested without a GPU.

The parts:

* ``noise_arithmetic``: the compiled noise at every float32 ``x`` of ``[2**-65, 1/2]``, both sides of ``U = 1/2``
  (``exponential_from_side`` then ``positive_log``, the device functions ``gumbel_from_bits`` runs after
  ``uniform_side_from_bits``), against ``G*(x)`` in float64: the largest ``|N(x) - G*(x)|`` per 0.01-bin of ``G*(x)``
  (Theorem 9's first part; the second is the exhaustive scan's);
* ``x_from_words``: the compiled ``uniform_side_from_bits`` against the twin's float32 ``x`` (``side_x``) on random and
  adversarial words (a fused multiply-add would have to round the same, the noise's docstring argues; this checks it);
* ``positive_log``: equal to ``tl.log`` at every float32 in ``[2**-66, 46]`` (libdevice's ``logf``, bit for bit), and
  its largest error in ulps of the result;
* ``division``: ``ratio_to_half_one`` (the approximate reciprocal) against the correctly rounded ``d / y`` at every
  ``x`` of the upper side where ``d != 0``;
* ``exp_log``: the device's float32 ``exp`` on ``[-104, 0]`` and ``log`` on ``[1, 2**12]`` (``logmass_tolerance``'s
  allowance for the GPU's approximations);
* ``near_ties``: the compiled group-draw kernel at float64 near-ties (``group_draw_near_ties``);
* ``accumulation``: the compiled stage-1 kernels' fp32 logits against the float64 product of their inputs, read back
  through greedy rows (each candidate chunk holds ``w``, ``-w`` and zeros, so its maximum is one logit of the kernel),
  on random and adversarial bf16 inputs, against the round-to-nearest bound and model (A2)'s.

Every figure is machine-dependent: the tests check them as bounds (:func:`verdicts`), never against another
machine's values.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as `python proofs/gpu_checks.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import flashsampling._device  # noqa: E402, F401, I001  (first: it selects the interpreter before triton is imported)
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from flashsampling import noise  # noqa: E402
from flashsampling.grouped import DEVICE_EXP_ULP, DEVICE_LOG_ABS  # noqa: E402
from proofs.check_float32_noise import G_EDGES, adversarial_keys, random_keys, side_x, split_words  # noqa: E402

NAME = "gpu_h200"
BLOCK = 1024


# ----------------------------------------------------------------------------------------------
# Kernels: the shipped device functions on given float32 values
# ----------------------------------------------------------------------------------------------


@triton.jit
def _noise_at_x_kernel(out_ptr, first_bits, n, TOP: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """``out[i] = -positive_log(exponential_from_side(x_i, TOP))``, ``x_i`` the float32 of bits ``first_bits + i``."""
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    bits = (first_bits + offs).to(tl.int32)
    x = bits.to(tl.float32, bitcast=True)
    top = tl.zeros_like(bits) + TOP
    e = noise.exponential_from_side(x, top)
    tl.store(out_ptr + offs, -noise.positive_log(e), mask=mask)


@triton.jit
def _logs_kernel(a_ptr, b_ptr, first_bits, n, BLOCK_SIZE: tl.constexpr):
    """``a = positive_log(x)``, ``b = tl.log(x)`` for the float32 ``x`` of bits ``first_bits + i``."""
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = (first_bits + offs).to(tl.int32).to(tl.float32, bitcast=True)
    tl.store(a_ptr + offs, noise.positive_log(x), mask=mask)
    tl.store(b_ptr + offs, tl.log(x), mask=mask)


@triton.jit
def _side_kernel(w0_ptr, w1_ptr, x_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    w0 = tl.load(w0_ptr + offs, mask=mask, other=0).to(tl.uint32, bitcast=True)
    w1 = tl.load(w1_ptr + offs, mask=mask, other=0).to(tl.uint32, bitcast=True)
    x, _ = noise.uniform_side_from_bits(w0, w1)
    tl.store(x_ptr + offs, x, mask=mask)


@triton.jit
def _division_kernel(q_ptr, first_bits, n, BLOCK_SIZE: tl.constexpr):
    """``ratio_to_half_one(d, y)`` with ``y = 1 - x``, ``d = (1 - y) - x`` for the float32 ``x`` of bits
    ``first_bits + i`` (as ``exponential_from_side`` forms them)."""
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = (first_bits + offs).to(tl.int32).to(tl.float32, bitcast=True)
    y = 1.0 - x
    d = (1.0 - y) - x
    tl.store(q_ptr + offs, noise.ratio_to_half_one(d, y), mask=mask)


@triton.jit
def _exp_log_kernel(e_ptr, first_bits, n, LOG: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = (first_bits + offs).to(tl.int32).to(tl.float32, bitcast=True)
    if LOG:
        tl.store(e_ptr + offs, tl.log(x), mask=mask)
    else:
        tl.store(e_ptr + offs, tl.exp(x), mask=mask)


def _device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def _bits(x: float) -> int:
    return int(np.float32(x).view(np.int32))


def _float(bits: int) -> float:
    return float(np.int32(bits).view(np.float32))


def _launch(kernel, n: int, *args, **meta):
    kernel[(triton.cdiv(n, BLOCK),)](*args, BLOCK_SIZE=BLOCK, **meta)


def _chunks(first: int, last: int, size: int):
    """``(start_bits, n)`` covering the bit patterns ``first .. last`` inclusive."""
    a = first
    while a <= last:
        n = min(size, last - a + 1)
        yield a, n
        a += n


# ----------------------------------------------------------------------------------------------
# The parts
# ----------------------------------------------------------------------------------------------


def noise_arithmetic(x_lo: float = 2.0**-65, x_hi: float = 0.5, chunk: int = 1 << 23, every: int = 1) -> dict:
    """The compiled noise's ``|N(x) - G*(x)|`` at every ``every``-th float32 ``x`` of ``[x_lo, x_hi]`` (both sides),
    the largest per bin of ``G*(x)``; on the CPU (``--cpu``), also whether it equals the twin's bit for bit."""
    dev = _device()
    edges = torch.from_numpy(G_EDGES).to(dev)
    out = torch.zeros(G_EDGES.size + 1, dtype=torch.float64, device=dev)
    values = 0
    twin_mismatches = 0
    for top in (0, 1):
        for start, n in _chunks(_bits(x_lo), _bits(x_hi), chunk):
            g = torch.empty(n, dtype=torch.float32, device=dev)
            _launch(_noise_at_x_kernel, n, g, start, n, TOP=top)
            bits = torch.arange(start, start + n, device=dev, dtype=torch.int64).to(torch.int32)
            if every > 1:
                g, bits = g[::every], bits[::every]
            x = bits.view(torch.float32).double()
            e_star = -torch.log1p(-x) if top == 1 else -torch.log(x)
            g_star = -torch.log(e_star)
            err = (g.double() - g_star).abs()
            b = torch.bucketize(g_star, edges, right=False)
            out.scatter_reduce_(0, b, err, reduce="amax")
            values += int(g.numel())
            if dev.type == "cpu":
                x32 = bits.view(torch.float32).numpy()
                twin = (-np.log(noise.exponential_from_side_np(x32, np.full(x32.shape, top)))).astype(np.float32)
                twin_mismatches += int(np.count_nonzero(twin.view(np.uint32) != g.numpy().view(np.uint32)))
    res = {"values": values, "arith_abs_by_bin": out.cpu().tolist(), "max": float(out.max())}
    if dev.type == "cpu":
        res["twin_mismatches"] = twin_mismatches
    return res


def x_from_words(n: int = 1 << 22) -> dict:
    """The compiled float32 ``x`` from random and adversarial words against the twin's ``side_x``."""
    dev = _device()
    k = np.concatenate([adversarial_keys(), random_keys(n, 77)])
    w0, w1 = split_words(k)
    x = torch.empty(k.size, dtype=torch.float32, device=dev)
    a = torch.from_numpy(w0.view(np.int32)).to(dev)
    b = torch.from_numpy(w1.view(np.int32)).to(dev)
    _launch(_side_kernel, k.size, a, b, x, k.size)
    top = (w1 >> np.uint32(31)).astype(np.uint32)
    c = np.where(top == 1, ~k, k) & np.uint64((1 << 63) - 1)
    twin = side_x(c)
    mismatches = np.count_nonzero(x.cpu().numpy().view(np.uint32) != twin.view(np.uint32))
    return {"words": int(k.size), "mismatches": int(mismatches)}


def positive_log_check(lo: float = 2.0**-66, hi: float = 46.0, chunk: int = 1 << 24, every: int = 1) -> dict:
    """``positive_log`` against ``tl.log`` (bit for bit) and against float64 ``log`` (ulps of the result)."""
    dev = _device()
    mismatches = 0
    max_ulp = 0.0
    values = 0
    for start, n in _chunks(_bits(lo), _bits(hi), chunk):
        a = torch.empty(n, dtype=torch.float32, device=dev)
        b = torch.empty(n, dtype=torch.float32, device=dev)
        _launch(_logs_kernel, n, a, b, start, n)
        if every > 1:
            a, b = a[::every], b[::every]
            bits = torch.arange(start, start + n, every, device=dev, dtype=torch.int64).to(torch.int32)
        else:
            bits = torch.arange(start, start + n, device=dev, dtype=torch.int64).to(torch.int32)
        mismatches += int((a.view(torch.int32) != b.view(torch.int32)).sum())
        exact = torch.log(bits.view(torch.float32).double())
        ulp = torch.where(exact == 0, torch.ones_like(exact), _ulp32(exact))
        max_ulp = max(max_ulp, float(((a.double() - exact).abs() / ulp).max()))
        values += int(a.numel())
    return {"values": values, "mismatches_vs_tl_log": mismatches, "max_ulp": max_ulp}


def _ulp32(v: torch.Tensor) -> torch.Tensor:
    """The float32 spacing at ``|v|`` (float64 input)."""
    _, e = torch.frexp(v.abs())
    return torch.ldexp(torch.ones_like(v), (e - 24).to(torch.int32))


def division_check(lo: float = 2.0**-26, hi: float = 0.5, chunk: int = 1 << 23, every: int = 1) -> dict:
    """``ratio_to_half_one(d, y)`` against the correctly rounded ``d / y`` (float64 division of float32 values, then
    rounded: double rounding is innocuous for division at 53 >= 2 * 24 + 2 bits)."""
    dev = _device()
    wrong = 0
    max_ulp = 0.0
    values = 0
    for start, n in _chunks(_bits(lo), _bits(hi), chunk):
        q = torch.empty(n, dtype=torch.float32, device=dev)
        _launch(_division_kernel, n, q, start, n)
        bits = torch.arange(start, start + n, device=dev, dtype=torch.int64).to(torch.int32)
        if every > 1:
            q, bits = q[::every], bits[::every]
        x = bits.view(torch.float32)
        y = 1.0 - x
        d = (1.0 - y) - x
        exact = (d.double() / y.double()).float()
        nz = d != 0
        wrong += int(((q.view(torch.int32) != exact.view(torch.int32)) & nz).sum())
        ulp = _ulp32(exact.double().where(exact != 0, torch.ones_like(exact.double())))
        max_ulp = max(max_ulp, float(((q.double() - exact.double()).abs() / ulp)[nz].max()) if nz.any() else 0.0)
        values += int(nz.sum())
    return {"values": values, "not_correctly_rounded": wrong, "max_ulp": max_ulp}


def exp_log_check(every: int = 1, chunk: int = 1 << 24) -> dict:
    """The device's float32 ``exp`` on ``[-104, 0]`` (relative error, ulps) and ``log`` on ``[1, 2**12]`` (absolute)."""
    dev = _device()
    max_rel = 0.0
    for start, n in _chunks(_bits(-0.0), _bits(-104.0), chunk):
        e = torch.empty(n, dtype=torch.float32, device=dev)
        _launch(_exp_log_kernel, n, e, start, n, LOG=False)
        bits = torch.arange(start, start + n, device=dev, dtype=torch.int64).to(torch.int32)
        if every > 1:
            e, bits = e[::every], bits[::every]
        exact = torch.exp(bits.view(torch.float32).double())
        normal = exact >= 2.0**-126
        rel = ((e.double() - exact).abs() / _ulp32(exact))[normal]
        max_rel = max(max_rel, float(rel.max()) if rel.numel() else 0.0)
    max_abs = 0.0
    for start, n in _chunks(_bits(1.0), _bits(4096.0), chunk):
        lg = torch.empty(n, dtype=torch.float32, device=dev)
        _launch(_exp_log_kernel, n, lg, start, n, LOG=True)
        bits = torch.arange(start, start + n, device=dev, dtype=torch.int64).to(torch.int32)
        if every > 1:
            lg, bits = lg[::every], bits[::every]
        max_abs = max(max_abs, float((lg.double() - torch.log(bits.view(torch.float32).double())).abs().max()))
    return {"exp_max_ulp": max_rel, "log_max_abs": max_abs}


def near_ties(rows: int = 48) -> dict:
    from proofs.check_second_level import group_draw_near_ties

    return group_draw_near_ties(rows=rows, draw="kernel")


def _slotted_weight(w: torch.Tensor, slot: int) -> torch.Tensor:
    """``[N * slot, D]``: slot ``j`` holds ``w_j``, ``-w_j`` and zeros."""
    n, d = w.shape
    out = torch.zeros(n, slot, d, dtype=w.dtype, device=w.device)
    out[:, 0] = w
    out[:, 1] = -w
    return out.reshape(n * slot, d)


def kernel_logits(h: torch.Tensor, w: torch.Tensor, num_samples: int = 1, slot: int = 256):
    """The stage-1 kernel's fp32 logits of ``h @ w.T`` (and which kernel ran), read through greedy rows: returns
    ``(z [B, N] float64, sign [B, N] (+1: the logit of w_j, -1: of -w_j, 0: neither positive), kind)``."""
    from flashsampling.kernels.stage1 import launch_fused_stage1, stage1_kernel_kind
    from flashsampling.kernels.tiles import stage1_tiles

    B = h.shape[0]
    n = w.shape[0]
    wide = _slotted_weight(w, slot)
    tiles = stage1_tiles(h, wide, num_samples)
    kind = stage1_kernel_kind(h, wide, num_samples, tiles)
    width = tiles.block_v if kind == "gluon" else tiles.candidate_v
    if slot % width:
        raise ValueError(f"candidate width {width} does not divide the slot {slot}")
    inv_temp = torch.zeros(B, dtype=torch.float32, device=h.device)
    part_max, _, part_idx, _, _ = launch_fused_stage1(h, wide, inv_temp, 0, 0, num_samples, tiles, noise=False)
    per_slot = slot // width
    m = part_max[:, 0, ::per_slot][:, :n].double()
    col = part_idx[:, 0, ::per_slot][:, :n] - torch.arange(n, device=h.device)[None, :] * slot
    sign = torch.where(col == 0, 1, torch.where(col == 1, -1, 0))
    return m, sign, kind


def accumulation(d: int = 4096, n: int = 2048, batches=(64, 256), seed: int = 5, samples=(1, 2),
                 deltas=(0.95 * 2.0**-24, 0.95 * 2.0**-23)) -> dict:  # fmt: skip
    """The compiled stage 1's fp32 logits against the float64 product, per kernel kind and input: the largest
    ``|dz|``, over the round-to-nearest bound and over model (A2)'s, and the TV at ``T = 1``, ``0.7`` with Lemma 5."""
    from proofs.check_float32_scores import fp32_logit_error_bound, tensor_core_error_bound

    dev = _device()
    g = torch.Generator(device="cpu").manual_seed(seed)
    out = {}
    inputs = {}
    for B in batches:
        inputs[f"random B={B}"] = (torch.randn(B, d, generator=g), torch.randn(n, d, generator=g) * (2 / math.sqrt(d)))
    for units in deltas:
        h = torch.ones(64, d)
        w = torch.full((n, d), units)
        w[:, 0] = 1.0
        w[:, 1:] *= torch.rand(n, d - 1, generator=g) * 0.1 + 0.95  # a little spread, all below the ulp of 1
        inputs[f"adversarial delta={units / 2.0**-24:.2f} u"] = (h, w)
    for name, (h, w) in inputs.items():
        hb, wb = h.to(torch.bfloat16).to(dev), w.to(torch.bfloat16).to(dev)
        for num_samples in samples:
            z, sign, kind = kernel_logits(hb, wb, num_samples)
            exact = hb.double() @ wb.double().T
            # A chunk's maximum is the kernel's logit of w_j (sign 1) or of -w_j (sign -1), each a logit of the kernel
            # for its own input: its error is |z - exact| or |z + exact|.  (For the TV, -z stands for w_j's.)
            got = torch.where(sign > 0, z, torch.where(sign < 0, -z, exact))
            ok = sign != 0
            err = (got - exact).abs()[ok]
            rn = torch.from_numpy(fp32_logit_error_bound(hb, wb)).to(dev)[ok]
            tc = torch.from_numpy(tensor_core_error_bound(hb, wb)).to(dev)[ok]
            tv = {}
            for t in (1.0, 0.7):
                pk = torch.softmax(torch.where(ok, got, exact) / t, dim=1)
                pe = torch.softmax(exact / t, dim=1)
                tv[str(t)] = float((0.5 * (pk - pe).abs().sum(dim=1)).max())
            max_err = float(err.max()) if err.numel() else 0.0
            out[f"{name}, {kind}, S={num_samples}"] = {
                "kind": kind, "logits": int(ok.sum()), "max_err": max_err,
                "max_over_rn_bound": float((err / rn).max()) if err.numel() else 0.0,
                "max_over_tc_bound": float((err / tc).max()) if err.numel() else 0.0,
                "tv": tv, "tv_bound": {t: math.tanh(max_err / (2 * float(t))) for t in tv},
            }  # fmt: skip
    return out


# ----------------------------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------------------------


def environment() -> dict:
    dev = _device()
    return {
        "device": torch.cuda.get_device_name(0) if dev.type == "cuda" else "CPU (Triton interpreter)",
        "torch": torch.__version__, "triton": triton.__version__, "numpy": np.__version__,
        "python": platform.python_version(), "interpreted": dev.type == "cpu",
    }  # fmt: skip


def run(cpu: bool = False) -> dict:
    """Every part: in full on the GPU; on the CPU (interpreter) on small slices (``every``-th value, a few binades)."""
    t0 = time.perf_counter()
    timings = {}

    def timed(name, fn, *a, **k):
        t = time.perf_counter()
        r = fn(*a, **k)
        timings[name] = round(time.perf_counter() - t, 1)
        return r

    if cpu:
        b = _bits(2.0**-4)
        res = {
            "noise": timed("noise", noise_arithmetic, 2.0**-4, _float(b + (1 << 13)), chunk=1 << 14),
            "x_from_words": timed("x_from_words", x_from_words, 1 << 12),
            "positive_log": timed("positive_log", positive_log_check, 0.5, _float(_bits(0.5) + (1 << 12))),
            "division": timed("division", division_check, 2.0**-10, _float(_bits(2.0**-10) + (1 << 12))),
            "exp_log": {"skipped": "the interpreter's exp and log are NumPy's"},
            "near_ties": timed("near_ties", near_ties, 8),
            "accumulation": timed(
                "accumulation", accumulation, d=64, n=16, batches=(4,), samples=(1,), deltas=(0.95 * 2.0**-24,)
            ),
        }
    else:
        res = {
            "noise": timed("noise", noise_arithmetic),
            "x_from_words": timed("x_from_words", x_from_words),
            "positive_log": timed("positive_log", positive_log_check),
            "division": timed("division", division_check),
            "exp_log": timed("exp_log", exp_log_check),
            "near_ties": timed("near_ties", near_ties),
            "accumulation": timed("accumulation", accumulation),
        }
    res["environment"] = environment()
    res["seconds"] = {**timings, "total": round(time.perf_counter() - t0, 1)}
    return res


#: Bounds the figures are held to (machine-dependent figures: checked as bounds).
MAX_NOISE_ARITH = 4e-6  # below Theorem 9's input range of interest: the twin's largest error is 2.1e-6
MAX_EXP_ULP = DEVICE_EXP_ULP  # logmass_tolerance's allowance for the device's exp
MAX_LOG_ABS = DEVICE_LOG_ABS  # and for its log


def verdicts(res: dict) -> dict[str, bool]:
    out = {
        "noise: every bin measured and finite, below 4e-6": math.isfinite(res["noise"]["max"])
        and res["noise"]["max"] <= MAX_NOISE_ARITH,
        "x from the words = the twin's x": res["x_from_words"]["mismatches"] == 0,
        "positive_log = tl.log bit for bit": res["positive_log"]["mismatches_vs_tl_log"] == 0,
        "the group draw exact at float64 near-ties": res["near_ties"]["wrong"] == 0,
        "every logit within model (A2)'s bound": all(
            r["max_over_tc_bound"] <= 1.0 for r in res["accumulation"].values()),
        "every TV within Lemma 5": all(r["tv"][t] <= r["tv_bound"][t] for r in res["accumulation"].values()
                                       for t in r["tv"]),
    }  # fmt: skip
    if "twin_mismatches" in res["noise"]:
        out["interpreted noise = the twin's, bit for bit"] = res["noise"]["twin_mismatches"] == 0
    if "exp_max_ulp" in res["exp_log"]:
        out["exp and log within logmass_tolerance's allowance"] = (
            res["exp_log"]["exp_max_ulp"] <= MAX_EXP_ULP and res["exp_log"]["log_max_abs"] <= MAX_LOG_ABS
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for gpu_h200.json (cpu_check.json with --cpu)")
    ap.add_argument("--cpu", action="store_true", help="small slices through the Triton interpreter")
    args = ap.parse_args(argv)
    if not args.cpu and not torch.cuda.is_available():
        ap.error("no GPU: run with --cpu for the interpreter's slices")
    res = run(cpu=args.cpu)
    v = verdicts(res)
    res["verdicts"] = v
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / ("cpu_check.json" if args.cpu else f"{NAME}.json")
    path.write_text(json.dumps(res, indent=1) + "\n")
    summary = {k: res[k] for k in ("environment", "seconds", "x_from_words", "positive_log", "division", "exp_log",
                                   "near_ties")}  # fmt: skip
    summary["noise"] = {k: res["noise"][k] for k in res["noise"] if k != "arith_abs_by_bin"}
    print(json.dumps(summary, indent=1))
    for name, r in res["accumulation"].items():
        print(f"{name:60s} max|dz| {r['max_err']:.3g}  /RN {r['max_over_rn_bound']:.3g}  "
              f"/A2 {r['max_over_tc_bound']:.3g}  TV(T=1) {r['tv']['1.0']:.3g}")  # fmt: skip
    print(v, "->", path)
    return 0 if all(v.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
