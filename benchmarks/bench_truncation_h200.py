"""The fused truncated sampler (top-k, top-p, min-p) against the unfused pipelines people run, on the GPU (issue 37).

``python benchmarks/bench_truncation_h200.py --out benchmarks/results/bench_truncation_h200.json``

For every shape ``(V, D)`` (those of ``bench_h200.py``), batch size ``B`` and filter (``k``, ``p`` or ``min_p``) it
times, with ``triton.testing.do_bench`` (medians, L2 flushed; ``--rep-ms`` of repetitions), the bf16 LM head at
``T = 0.8``:

=======================  ==============================================================================
``fused``                ``flashsampling.sample(h, W, top_k=k | top_p=p | min_p=q)`` (no host checks)
``plain_fused``          ``flashsampling.sample(h, W)``: the plain fused sampler
``torch``                ``h @ W.T``, then ``topk`` + softmax + multinomial (top-k); sort + softmax + cumsum
                         mask + multinomial (top-p, transformers' rule); softmax + ``< q max`` mask +
                         multinomial (min-p), eager
``torch_compiled``       the same under ``torch.compile`` (``--compiled``)
``flashinfer_*``         ``h @ W.T``, softmax, then ``top_k_sampling_from_probs`` / ``top_p_sampling_from_probs``
                         / ``min_p_sampling_from_probs``; and ``top_k_top_p_sampling_from_logits`` (top-k)
=======================  ==============================================================================

Each row of ``rows`` in the JSON has ``V, D, B``, the filter (``k``, ``p`` or ``min_p``), ``logits`` (``"random"``:
``bench_h200.py``'s inputs, ``W ~ N(0, 0.02^2)``, ``h ~ N(0, 1)``, a softmax of 9-11 nats of entropy at ``T = 0.8``;
``"peaked"``: ``h`` scaled so that ``z / T`` has standard deviation 4, about 3 nats, the range of a language
model's next-token distributions), ``fused_ms``, ``plain_fused_ms``, ``best_unfused_ms`` and ``best_unfused`` (the
name of that pipeline), every method's time (or its error), the rows that took the exact fallback in one call, the
list length and tiles, and the ratios ``fused_over_best_unfused`` and ``fused_over_plain``.  The file is rewritten
after every row (a run cut short keeps its data); ``--budget-s`` stops the grid in time.

The grid's order puts the widest coverage first (every shape at ``B`` = 1, 64, 256, then 16, 4, 128), so a run cut
short by its budget still spans the shapes.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import flashsampling  # noqa: E402
import flashsampling.truncation as truncation  # noqa: E402
from flashsampling.kernels.tiles import TileConfig  # noqa: E402

SHAPES = [(128256, 4096), (151936, 4096), (151936, 5120), (128256, 8192), (201088, 2880)]
BATCHES = [1, 64, 256, 16, 4, 128]
FILTERS = [("k", 1), ("k", 20), ("k", 50), ("k", 256), ("k", 1024), ("p", 0.5), ("p", 0.9), ("p", 0.99),
           ("min_p", 0.05), ("min_p", 0.1)]  # fmt: skip
TEMPERATURE = 0.8
#: The standard deviation of ``z / T`` of the ``"peaked"`` logits (about 3 nats of entropy at V ~ 150k).
PEAKED_SIGMA = 4.0
SEED = 1234
ARGUMENT = {"k": "top_k", "p": "top_p", "min_p": "min_p"}


def load_flashinfer():
    """``(module, version)`` or ``(None, reason)``."""
    try:
        import flashinfer
        import flashinfer.sampling

        return flashinfer.sampling, flashinfer.__version__
    except Exception as e:  # noqa: BLE001 - the reason goes into the JSON
        return None, f"{type(e).__name__}: {e}"


def time_ms(fn, rep_ms: float) -> float:
    """``do_bench`` median in ms (warm-up a quarter of ``rep_ms``), or the interpreter's single wall time."""
    if flashsampling.INTERPRET:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    import triton

    return float(triton.testing.do_bench(fn, warmup=max(5, rep_ms / 4), rep=rep_ms, return_mode="median"))


# --------------------------------------------------------------------------------------------
# Unfused pipelines
# --------------------------------------------------------------------------------------------


def torch_top_k(h, w, k: int):
    z = (h @ w.T).float() / TEMPERATURE
    v, i = torch.topk(z, k, dim=-1)
    return i.gather(1, torch.multinomial(torch.softmax(v, dim=-1), 1))


def torch_top_p(h, w, p: float):
    """transformers' rule: sort, softmax, remove the tokens whose mass before them reaches ``p``."""
    z = (h @ w.T).float() / TEMPERATURE
    v, i = torch.sort(z, dim=-1, descending=True)
    probs = torch.softmax(v, dim=-1)
    before = torch.cumsum(probs, dim=-1) - probs
    probs = probs.masked_fill(before >= p, 0.0)
    return i.gather(1, torch.multinomial(probs, 1))


def torch_min_p(h, w, q: float):
    probs = torch.softmax((h @ w.T).float() / TEMPERATURE, dim=-1)
    probs = probs.masked_fill(probs < q * probs.amax(dim=-1, keepdim=True), 0.0)
    return torch.multinomial(probs, 1)


TORCH = {"k": torch_top_k, "p": torch_top_p, "min_p": torch_min_p}
COMPILED: dict = {}


def unfused_methods(h, w, kind: str, value, fi, compiled: bool) -> dict:
    """``name -> callable`` of the unfused pipelines for one filter."""
    out = {"torch": lambda: TORCH[kind](h, w, value)}
    if compiled:
        fn = COMPILED.setdefault(kind, torch.compile(TORCH[kind], dynamic=True))
        out["torch_compiled"] = lambda: fn(h, w, value)
    if fi is not None:

        def probs():
            return torch.softmax((h @ w.T).float() / TEMPERATURE, dim=-1)

        if kind == "k":
            out["flashinfer_probs"] = lambda: fi.top_k_sampling_from_probs(probs(), value)
            out["flashinfer_logits"] = lambda: fi.top_k_top_p_sampling_from_logits(
                (h @ w.T).float() / TEMPERATURE, value, 1.0
            )
        elif kind == "p":
            out["flashinfer_probs"] = lambda: fi.top_p_sampling_from_probs(probs(), value)
        else:
            out["flashinfer_probs"] = lambda: fi.min_p_sampling_from_probs(probs(), value)
    return out


# --------------------------------------------------------------------------------------------
# The fused sampler, instrumented
# --------------------------------------------------------------------------------------------


def plain_call(h, w):
    return lambda: flashsampling.sample(h, w, temperature=TEMPERATURE, seed=SEED, host_checks=False)


def fused_call(h, w, kind: str, value, tiles: TileConfig | None = None):
    kwargs = {ARGUMENT[kind]: value}
    return lambda: flashsampling.sample(h, w, temperature=TEMPERATURE, seed=SEED, host_checks=False, tiles=tiles,
                                        **kwargs)  # fmt: skip


def fused_details(h, w, kind: str, value, tiles: TileConfig | None = None) -> dict:
    """One instrumented call: the list length, the tiles, and the rows that took the exact fallback (and those that
    reached the host's law)."""
    seen = {"fallback_rows": 0, "host_rows": 0}
    launch1, launch2 = truncation.launch_truncation_stage1, truncation.launch_truncation_stage2

    def stage1(*args, **kwargs):
        out = launch1(*args, **kwargs)
        seen.update(list=out["list"], tiles_v=out["T"], mass=kwargs.get("mass"))
        t = args[8]
        seen["tiles"] = [t.block_b, t.block_v, t.block_d, t.num_warps, t.num_stages]
        return out

    def stage2(*args, **kwargs):
        tokens, flags, status = launch2(*args, **kwargs)
        if kwargs.get("given") is not None:
            seen["host_rows"] += int(status.numel())
        elif kwargs.get("redo") is None:
            seen["fallback_rows"] += int((status == 1).sum())
        else:
            seen["undecided_rows"] = int((status == 3).sum())
        return tokens, flags, status

    truncation.launch_truncation_stage1, truncation.launch_truncation_stage2 = stage1, stage2
    try:
        fused_call(h, w, kind, value, tiles)()
    finally:
        truncation.launch_truncation_stage1, truncation.launch_truncation_stage2 = launch1, launch2
    return seen


def stage_split_ms(h, w, kind: str, value, rep_ms: float) -> dict:
    """Stage 1 alone and stage 2 alone (on stage 1's lists), as ``sample`` runs them."""
    captured = {}
    launch2 = truncation.launch_truncation_stage2

    def stage2(*args, **kwargs):
        if "first" not in captured:
            captured["first"] = (args, kwargs)
        return launch2(*args, **kwargs)

    truncation.launch_truncation_stage2 = stage2
    launch1 = truncation.launch_truncation_stage1

    def stage1(*args, **kwargs):
        captured.setdefault("stage1", (args, kwargs))
        return launch1(*args, **kwargs)

    truncation.launch_truncation_stage1 = stage1
    try:
        fused_call(h, w, kind, value)()
    finally:
        truncation.launch_truncation_stage1, truncation.launch_truncation_stage2 = launch1, launch2
    a1, k1 = captured["stage1"]
    a2, k2 = captured["first"]
    return {"stage1_ms": time_ms(lambda: launch1(*a1, **k1), rep_ms), "stage2_ms": time_ms(lambda: launch2(*a2, **k2),
            rep_ms)}  # fmt: skip


# --------------------------------------------------------------------------------------------
# The grid
# --------------------------------------------------------------------------------------------


class Inputs:
    """Weights per shape (kept: the grid revisits shapes) and hidden states per (shape, B, logits kind), bf16,
    from generators seeded by the shape (the same tensors in every run)."""

    def __init__(self, device) -> None:
        self.device = device
        self.weights: dict = {}

    def weight(self, V: int, D: int) -> torch.Tensor:
        if (V, D) not in self.weights:
            if len(self.weights) >= 3:  # at most three weights held (the largest is 2.1 GB)
                self.weights.pop(next(iter(self.weights)))
            g = torch.Generator(device=self.device).manual_seed(V * 7 + D)
            self.weights[(V, D)] = (torch.randn(V, D, device=self.device, generator=g) * 0.02).to(torch.bfloat16)
        return self.weights[(V, D)]

    def hidden(self, V: int, D: int, B: int, kind: str) -> torch.Tensor:
        g = torch.Generator(device=self.device).manual_seed(V + D + B)
        h = torch.randn(B, D, device=self.device, generator=g)
        if kind == "peaked":  # z ~ N(0, (0.02^2 D) |h|^2 / D): scale h so that z / T has standard deviation 4
            h = h * (PEAKED_SIGMA * TEMPERATURE / (0.02 * math.sqrt(D)))
        return h.to(torch.bfloat16)


def entropy_nats(h, w) -> float:
    """The softmax entropy of the first row at ``T``, in nats (what the logits kind means)."""
    p = torch.softmax((h[:1] @ w.T).float() / TEMPERATURE, dim=-1)
    return float(-(p * torch.log(p.clamp_min(1e-30))).sum())


def grid_points(shapes, batches, filters, kinds):
    for B in batches:
        for V, D in shapes:
            for kind in kinds:
                yield V, D, B, kind, filters


def run_grid(args, out: dict, path: Path, deadline: float) -> None:
    """Time every grid point until ``deadline`` (``time.monotonic()``), writing ``path`` after each row."""
    fi, fi_version = load_flashinfer() if not args.no_flashinfer else (None, "disabled")
    out["meta"]["flashinfer"] = fi_version
    data = Inputs(args.device)
    rows = out.setdefault("rows", [])
    for V, D, B, kind, filters in grid_points(args.shapes, args.batches, args.filters, args.logits):
        if time.monotonic() > deadline:
            out["meta"]["stopped"] = f"budget reached before V={V} D={D} B={B} {kind}"
            break
        w = data.weight(V, D)
        h = data.hidden(V, D, B, kind)
        plain = time_ms(plain_call(h, w), args.rep_ms)
        ent = entropy_nats(h, w)
        for name, value in filters:
            if time.monotonic() > deadline:
                break
            r = {"V": V, "D": D, "B": B, name: value, "logits": kind, "entropy_nats": round(ent, 3),
                 "plain_fused_ms": plain}  # fmt: skip
            try:
                r.update(fused_details(h, w, name, value))
                r["fused_ms"] = time_ms(fused_call(h, w, name, value), args.rep_ms)
            except Exception as e:  # noqa: BLE001 - record and go on
                r["fused_error"] = f"{type(e).__name__}: {str(e)[:300]}"
            if args.split:
                try:
                    r.update(stage_split_ms(h, w, name, value, args.rep_ms))
                except Exception as e:  # noqa: BLE001
                    r["split_error"] = f"{type(e).__name__}: {str(e)[:300]}"
            unfused = {}
            for m, fn in unfused_methods(h, w, name, value, fi, args.compiled).items():
                try:
                    unfused[m] = time_ms(fn, args.rep_ms)
                except Exception as e:  # noqa: BLE001
                    r[f"{m}_error"] = f"{type(e).__name__}: {str(e)[:300]}"
            r["unfused_ms"] = unfused
            if unfused:
                best = min(unfused, key=unfused.get)
                r["best_unfused"], r["best_unfused_ms"] = best, unfused[best]
            if "fused_ms" in r:
                r["fused_over_plain"] = r["fused_ms"] / plain
                if unfused:
                    r["fused_over_best_unfused"] = r["fused_ms"] / r["best_unfused_ms"]
            rows.append(r)
            path.write_text(json.dumps(out, indent=1))
            print(json.dumps({k: r.get(k) for k in ("V", "D", "B", name, "logits", "fused_ms", "plain_fused_ms",
                                                     "best_unfused_ms", "best_unfused", "fallback_rows", "list")}),
                  flush=True)  # fmt: skip


def summary(rows: list[dict]) -> str:
    """One line per filter value: how many points the fused sampler beats the best unfused pipeline at, and its
    ratios to the plain fused sampler at ``B <= 64``."""
    lines = []
    keys = sorted({(k, r[k]) for r in rows for k in ("k", "p", "min_p") if k in r}, key=str)
    for kind in ("random", "peaked"):
        for k, v in keys:
            sel = [r for r in rows if r.get(k) == v and r["logits"] == kind and "fused_ms" in r]
            if not sel:
                continue
            wins = sum(r.get("fused_over_best_unfused", 9) < 1 for r in sel)
            small = [r["fused_over_plain"] for r in sel if r["B"] <= 64]
            worst = max((r.get("fused_over_best_unfused", math.nan) for r in sel), default=math.nan)
            fb = sum(r.get("fallback_rows", 0) > 0 for r in sel)
            lines.append(f"{kind:7s} {k}={v:<6} points {len(sel):3d}  faster than best unfused {wins:3d}  worst "
                         f"fused/unfused {worst:5.2f}  fused/plain at B<=64 max "
                         f"{max(small) if small else math.nan:5.2f}  points with fallback rows {fb}")  # fmt: skip
    return "\n".join(lines)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="benchmarks/results/bench_truncation_h200.json")
    ap.add_argument("--shapes", default=";".join(f"{v},{d}" for v, d in SHAPES))
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--filters", default=",".join(f"{k}={v}" for k, v in FILTERS))
    ap.add_argument("--logits", default="random,peaked")
    ap.add_argument("--rep-ms", type=float, default=40.0)
    ap.add_argument("--budget-s", type=float, default=1e9)
    ap.add_argument("--compiled", action="store_true", help="also time the torch pipelines under torch.compile")
    ap.add_argument("--split", action="store_true", help="also time stage 1 and stage 2 alone")
    ap.add_argument("--no-flashinfer", action="store_true")
    ap.add_argument("--device", default="cpu" if flashsampling.INTERPRET else "cuda")
    args = ap.parse_args(argv)
    args.shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes.split(";")]
    args.batches = [int(b) for b in args.batches.split(",")]
    args.filters = [(f.split("=")[0], (int if f.startswith("k=") else float)(f.split("=")[1]))
                    for f in args.filters.split(",")]  # fmt: skip
    args.logits = args.logits.split(",")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    start = time.monotonic()
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    import triton

    meta = {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu (interpreter)",
            "torch": torch.__version__, "triton": triton.__version__, "temperature": TEMPERATURE,
            "timer": f"triton.testing.do_bench median (rep {args.rep_ms} ms, L2 flushed)"}  # fmt: skip
    out = {"meta": meta, "rows": []}
    run_grid(args, out, path, start + args.budget_s)
    out["meta"]["seconds"] = time.monotonic() - start
    path.write_text(json.dumps(out, indent=1))
    print(summary(out["rows"]), flush=True)
    return out


if __name__ == "__main__":
    main()
