"""Time per output token of real-size models decoding inside a CUDA graph, fused sampler against unfused ones.

    python benchmarks/generate_h200.py --out benchmarks/results/generate_h200.json      # an H200, about 8 minutes
    python benchmarks/generate_h200.py --smoke --out /tmp/generate_smoke.json           # any machine, a tiny model

For each model (``MODELS``: the sizes of qwen2.5-1.5b, llama-3.2-3b and llama-3.1-8b, random bf16 weights built on
the GPU directly) and batch size ``B`` in ``--batches``, the milliseconds per output token (a whole generation of
``--new-tokens`` tokens after a ``--prompt``-token prompt, prefill included, divided by the new tokens) of:

* ``graph_fused``: a static KV cache (``transformers.StaticCache``) and one decode step captured in a CUDA graph:
  the backbone on the last token, then :func:`flashsampling.sample` on its hidden state and the LM-head weight with
  per-request seeds on the device (each step's row seeds derived in the graph from a device step counter,
  :func:`~flashsampling.integrations._decode_step.step_seeds`): the logits are never written, nothing is read on the
  host, and every step is one ``graph.replay()``;
* ``graph_unfused``: the same captured loop with ``h @ W.T``, softmax and ``torch.multinomial``;
* ``graph_flashinfer``: the same loop with ``h @ W.T`` and FlashInfer's ``sampling_from_logits`` (where it imports;
  its seed is frozen into the graph, which does not change its cost);
* ``hf_generate``: transformers' ``model.generate(do_sample=True)`` at its fastest setting, a static cache with its
  automatic ``torch.compile`` (``mode="reduce-overhead"``, CUDA graphs).

``decode_ms_per_step`` is the captured loops' decode alone (prefill excluded).  Budget: the captured variants of
every point run first (seconds each), then ``hf_generate`` point by point, each compile bounded by an alarm, until
``--budget`` seconds; the JSON is rewritten after every measurement, so a run cut short still leaves data.  The
first batch size of each model also checks the captured fused loop against the eager
:func:`flashsampling.integrations.transformers.generate` with the same per-request seeds (``tokens_match_eager``: the
fraction of equal tokens; fp32-level differences between the static and dynamic caches can flip near-ties).

``--smoke`` runs the same code on a 2-layer model on the CPU (interpreted kernels, no graph: the step is called
instead of replayed, ``hf_generate`` without compile) and checks the static loop against the eager one.
"""

from __future__ import annotations

import argparse
import inspect
import json
import signal
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import flashsampling  # noqa: E402  (before transformers: see docs/integration.md)
from flashsampling.integrations import transformers as fs_transformers  # noqa: E402
from flashsampling.integrations._decode_step import step_seeds  # noqa: E402

#: Public models' sizes (random weights): family, vocabulary, hidden size, layers, heads, KV heads, MLP width, tied.
MODELS = {
    "qwen2.5-1.5b": ("qwen2", 151936, 1536, 28, 12, 2, 8960, True),
    "llama-3.2-3b": ("llama", 128256, 3072, 28, 24, 8, 8192, True),
    "llama-3.1-8b": ("llama", 128256, 4096, 32, 32, 8, 14336, False),
}
SMOKE_MODEL = ("llama", 256, 64, 2, 4, 2, 128, False)
METHODS = ("graph_fused", "graph_unfused", "graph_flashinfer", "hf_generate")
GRAPH_METHODS = METHODS[:3]


def build(spec, device: torch.device, dtype: torch.dtype):
    """A causal LM of ``spec`` with seeded random weights, created on ``device`` in ``dtype`` (never on the CPU first:
    an 8B model's fp32 initialization there would take minutes)."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    family, V, D, layers, heads, kv, mlp, tied = spec
    cls, model_cls = (Qwen2Config, Qwen2ForCausalLM) if family == "qwen2" else (LlamaConfig, LlamaForCausalLM)
    cfg = cls(vocab_size=V, hidden_size=D, num_hidden_layers=layers, num_attention_heads=heads,
              num_key_value_heads=kv, intermediate_size=mlp, tie_word_embeddings=tied, max_position_embeddings=4096,
              attn_implementation="sdpa")  # fmt: skip
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with device:
            model = model_cls(cfg).eval()
    finally:
        torch.set_default_dtype(default)
    model.generation_config.pad_token_id = 0
    return model


def static_cache(model, batch: int, max_len: int, device, dtype):
    """A ``transformers.StaticCache`` of ``max_len`` positions (its constructor's signature differs across versions)."""
    from transformers import StaticCache

    params = inspect.signature(StaticCache.__init__).parameters
    kw = dict(config=model.config, max_cache_len=max_len)
    if "max_batch_size" in params:
        kw.update(max_batch_size=batch)
    if "device" in params:
        kw.update(device=device)
    if "dtype" in params:
        kw.update(dtype=dtype)
    return StaticCache(**kw)


# --------------------------------------------------------------------------------------------
# Samplers of the captured step: (hidden [B, D], weight, step counter, request seeds) -> tokens [B]
# --------------------------------------------------------------------------------------------


def fused_sampler(T: float):
    def sample(hidden, weight, step, seeds):
        return flashsampling.sample(hidden, weight, temperature=T, seed=step_seeds(seeds, step), host_checks=False)[
            :, 0
        ]

    return sample


def unfused_sampler(T: float):
    def sample(hidden, weight, step, seeds):
        probs = torch.softmax((hidden @ weight.T).float() / T, dim=-1)
        return torch.multinomial(probs, 1)[:, 0]

    return sample


def race_sampler(T: float):
    """The unfused fallback if ``torch.multinomial`` cannot be captured: the exponential race on the written probs."""

    def sample(hidden, weight, step, seeds):
        probs = torch.softmax((hidden @ weight.T).float() / T, dim=-1)
        return probs.div_(torch.empty_like(probs).exponential_()).argmax(dim=-1)

    return sample


def flashinfer_sampler(T: float):
    import flashinfer

    def sample(hidden, weight, step, seeds):
        return flashinfer.sampling.sampling_from_logits((hidden @ weight.T).float() / T).long()

    return sample


class StaticDecoder:
    """Prefill eagerly, then decode one token per call of :meth:`step` (captured in a CUDA graph on a GPU).

    Static buffers: the fed token ``tok [B, 1]``, its position ``pos [B, 1]``, the cache slot ``slot [1]``, the step
    counter ``step []``, the attended slots ``allowed [B, 1, 1, P + N]`` (a 4-D mask is used as given, so the mask
    costs no host read) and the tokens ``out [B, N]``.  The step writes ``allowed[slot]``, runs the backbone with the
    static cache, samples, and advances the counters, all on the device."""

    def __init__(self, model, ids: torch.Tensor, N: int, sampler, seeds: torch.Tensor, graph: bool) -> None:
        self.backbone, self.weight = fs_transformers.split_lm_head(model)
        B, P = ids.shape
        dev, dtype = ids.device, self.weight.dtype
        self.ids, self.N, self.sampler, self.seeds, self.graph = ids, N, sampler, seeds, graph
        self.cache = static_cache(model, B, P + N, dev, dtype)
        params = inspect.signature(self.backbone.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"
        self.pass_slot = "cache_position" in params  # transformers before the cache tracked its own offset
        self.tok = torch.zeros(B, 1, dtype=torch.int64, device=dev)
        self.pos = torch.zeros(B, 1, dtype=torch.int64, device=dev)
        self.slot = torch.zeros(1, dtype=torch.int64, device=dev)
        self.step_t = torch.zeros((), dtype=torch.int64, device=dev)
        self.allowed = torch.zeros(B, 1, 1, P + N, dtype=torch.bool, device=dev)
        self.out = torch.zeros(B, N, dtype=torch.int64, device=dev)
        self.cuda_graph = None

    def _forward(self, input_ids, position_ids, mask, slots):
        kw = {self.cache_kw: self.cache, "use_cache": True}
        if self.pass_slot:
            kw["cache_position"] = slots
        return self.backbone(input_ids=input_ids, position_ids=position_ids, attention_mask=mask, **kw)

    def prefill(self) -> None:
        """Reset the cache and the counters, run the prompt, sample token 0 (step 0)."""
        B, P = self.ids.shape
        self.cache.reset()
        positions = torch.arange(P, device=self.ids.device)
        causal = positions[None, :, None] >= torch.arange(P + self.N, device=self.ids.device)[None, None, :]
        out = self._forward(self.ids, positions.expand(B, P), causal[:, None].expand(B, 1, P, P + self.N), positions)
        self.step_t.zero_()
        first = self.sampler(out.last_hidden_state[:, -1], self.weight, self.step_t, self.seeds)
        self.tok.copy_(first[:, None])
        self.out[:, 0] = first
        self.pos.fill_(P)
        self.slot.fill_(P)
        self.step_t.fill_(1)
        self.allowed.zero_()
        self.allowed[..., :P] = True

    def step(self) -> None:
        """One decode step, device-only: feed ``tok`` at ``pos``, sample token ``step``, advance."""
        self.allowed.index_fill_(3, self.slot, True)
        out = self._forward(self.tok, self.pos, self.allowed, self.slot)
        new = self.sampler(out.last_hidden_state[:, -1], self.weight, self.step_t, self.seeds)
        self.out.index_copy_(1, self.step_t[None], new[:, None])
        self.tok.copy_(new[:, None])
        self.pos.add_(1)
        self.slot.add_(1)
        self.step_t.add_(1)

    def capture(self) -> None:
        """Warm the step up on a side stream (kernels compiled, workspaces allocated), then capture it."""
        self.prefill()
        if not self.graph:
            return
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                self.step()
        torch.cuda.current_stream().wait_stream(side)
        self.prefill()
        self.cuda_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.cuda_graph):
            self.step()

    def decode(self) -> None:
        """The ``N - 1`` decode steps after :meth:`prefill` (one replay each)."""
        for _ in range(self.N - 1):
            if self.cuda_graph is not None:
                self.cuda_graph.replay()
            else:
                self.step()

    def run(self) -> torch.Tensor:
        """A whole generation: prefill and the decode steps; returns the tokens ``[B, N]``."""
        self.prefill()
        self.decode()
        return self.out


# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------


class Clock:
    """Wall time on the CPU, CUDA events on the GPU."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda

    def time(self, fn) -> float:
        if not self.cuda:
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1e3
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)


def graph_point(model, ids, N, T, rounds, clock, seeds, graph: bool, have_flashinfer: bool) -> dict:
    """The captured loops of one (model, B): ``{method: {"times_ms", "decode_ms", "tokens"} or {"error"}}``."""
    samplers = {"graph_fused": fused_sampler(T), "graph_unfused": unfused_sampler(T)}
    if have_flashinfer:
        samplers["graph_flashinfer"] = flashinfer_sampler(T)
    decoders, out = {}, {}
    for name, sampler in samplers.items():
        fallback = race_sampler(T) if name == "graph_unfused" else None
        while True:
            try:
                decoders[name] = StaticDecoder(model, ids, N, sampler, seeds, graph)
                decoders[name].capture()
                decoders[name].run()  # warm
                break
            except Exception as err:  # noqa: BLE001 - recorded, the other methods still run
                decoders.pop(name, None)
                out[name] = {"error": f"{type(err).__name__}: {err}"[:400], "trace": traceback.format_exc()[-1500:]}
                if fallback is None:
                    break
                sampler, fallback = fallback, None
                out[name]["retried_with"] = "exponential race"
    for name in decoders:
        note = {"sampler": "exponential race", "multinomial_error": out[name]["error"]} if name in out else {}
        out[name] = {"times_ms": [], "decode_ms": [], **note}
    for _ in range(rounds):  # interleaved
        for name, dec in decoders.items():
            out[name]["times_ms"].append(clock.time(dec.run))
            dec.prefill()
            out[name]["decode_ms"].append(clock.time(dec.decode))
    for name, dec in decoders.items():
        out[name]["tokens"] = dec.run().clone()
    return out


def hf_generate(model, ids, N, T, compile_: bool):
    """transformers' sampling with a static cache (compiled automatically on a GPU unless ``compile_`` is false)."""
    return model.generate(ids, do_sample=True, temperature=T, top_k=0, top_p=1.0, max_new_tokens=N, min_new_tokens=N,
                          pad_token_id=0, cache_implementation="static", disable_compile=not compile_)  # fmt: skip


class Alarm:
    """Raise ``TimeoutError`` in the main thread after ``seconds`` (SIGALRM; a compile is Python code, so it stops)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = max(1, int(seconds))

    def __enter__(self):
        signal.signal(signal.SIGALRM, self._raise)
        signal.alarm(self.seconds)

    def __exit__(self, *exc):
        signal.alarm(0)

    def _raise(self, *_):
        raise TimeoutError(f"over its {self.seconds} s budget")


def median(xs) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def summarize(rec: dict, N: int) -> None:
    """``ms_per_token``, ``decode_ms_per_step`` and the fused loop's speed-ups, from the raw times."""
    rec["ms_per_token"] = {m: median(r["times_ms"]) / N for m, r in rec["methods"].items() if r.get("times_ms")}
    rec["decode_ms_per_step"] = {m: median(r["decode_ms"]) / (N - 1) for m, r in rec["methods"].items()
                                 if r.get("decode_ms")}  # fmt: skip
    t = rec["ms_per_token"]
    if "graph_fused" in t:
        rec["speedup"] = {f"vs_{m}": t[m] / t["graph_fused"] for m in METHODS[1:] if m in t}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true", help="a 2-layer model on this machine's device, no graph/compile")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,16,64,256")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=450.0, help="seconds for the whole run (partial results kept)")
    ap.add_argument("--hf-budget", type=float, default=100.0, help="seconds for one hf_generate point (its compile)")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    import transformers

    cuda = torch.cuda.is_available() and not flashsampling.INTERPRET
    if not args.smoke and not cuda:
        ap.error("the real run needs a GPU (compiled kernels); --smoke runs anywhere")
    device = torch.device("cuda" if cuda else "cpu")
    dtype = torch.bfloat16 if not args.smoke else torch.float32
    if args.smoke:
        specs = {"tiny-llama": SMOKE_MODEL}
        args.batches, args.prompt, args.new_tokens, args.rounds = "1,3", 6, 4, 1
    else:
        specs = {name: MODELS[name] for name in args.models.split(",")}
    try:
        import flashinfer

        fi_version = getattr(flashinfer, "__version__", "?")
    except Exception:  # noqa: BLE001 - absent or broken: the column is left out
        fi_version = None
    N, T = args.new_tokens, args.temperature
    clock, graph = Clock(cuda), cuda and not args.smoke
    data = {"schema": 2, "gpu": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
            "transformers": transformers.__version__, "flashinfer": fi_version, "prompt": args.prompt,
            "new_tokens": N, "temperature": T, "rounds": args.rounds, "smoke": args.smoke, "dtype": str(dtype),
            "unfused_sampler": "softmax + torch.multinomial", "budget_s": args.budget, "rows": {},
            "build_s": {}}  # fmt: skip

    def save():
        data["elapsed_s"] = time.perf_counter() - t_start
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(data, indent=1, default=str))

    def left() -> float:
        return args.budget - (time.perf_counter() - t_start)

    models, points = {}, []
    for name, spec in specs.items():
        t0 = time.perf_counter()
        models[name] = build(spec, device, dtype)
        data["build_s"][name] = time.perf_counter() - t0
        points += [(name, int(b)) for b in args.batches.split(",")]
    save()
    # Pass 1: the captured loops of every point (cheap), with the eager cross-check on each model's first batch size.
    checked = set()
    with torch.inference_mode():
        for name, B in points:
            if left() < 30:
                data["rows"][f"{name}/B{B}"] = {"model": name, "B": B, "skipped": "budget"}
                continue
            model = models[name]
            g = torch.Generator(device=device).manual_seed(B)
            ids = torch.randint(0, model.config.vocab_size, (B, args.prompt), device=device, generator=g)
            request_seeds = [1000 + 7919 * b for b in range(B)]
            seeds = torch.tensor(request_seeds, dtype=torch.int64, device=device)
            methods = graph_point(model, ids, N, T, args.rounds, clock, seeds, graph, fi_version is not None)
            rec = {"model": name, "B": B, "methods": {m: {k: v for k, v in r.items() if k != "tokens"}
                                                      for m, r in methods.items()}}  # fmt: skip
            if name not in checked and "tokens" in methods.get("graph_fused", {}):
                checked.add(name)
                eager = fs_transformers.generate(model, ids, max_new_tokens=N, temperature=T, seed=request_seeds,
                                                 eos_token_id=[])[:, args.prompt:]  # fmt: skip
                rec["tokens_match_eager"] = float((eager == methods["graph_fused"]["tokens"]).float().mean())
                if args.smoke:
                    greedy = StaticDecoder(model, ids, N, _greedy, seeds, False)
                    greedy.capture()
                    hf = model.generate(ids, do_sample=False, max_new_tokens=N, pad_token_id=0)[:, args.prompt :]
                    rec["greedy_static_equals_hf"] = bool(torch.equal(greedy.run(), hf))
            summarize(rec, N)
            data["rows"][f"{name}/B{B}"] = rec
            print(name, B, json.dumps({k: round(v, 4) for k, v in rec["ms_per_token"].items()}), flush=True)
            save()
    # Pass 2: hf_generate, point by point, each bounded by --hf-budget, until the budget is spent.
    for name, B in points:
        rec = data["rows"].get(f"{name}/B{B}")
        if rec is None or "methods" not in rec:
            continue
        if left() < 20:
            rec["methods"]["hf_generate"] = {"error": "skipped: the run's budget is spent"}
            save()
            continue
        model = models[name]
        g = torch.Generator(device=device).manual_seed(B)
        ids = torch.randint(0, model.config.vocab_size, (B, args.prompt), device=device, generator=g)
        call = lambda model=model, ids=ids: hf_generate(model, ids, N, T, graph)  # noqa: E731
        try:
            with Alarm(min(args.hf_budget, left() - 10)), torch.inference_mode():
                t0 = time.perf_counter()
                call()  # warm-up: the compile
                warm = time.perf_counter() - t0
                times = [clock.time(call) for _ in range(args.rounds)]
            rec["methods"]["hf_generate"] = {"times_ms": times, "warmup_s": warm}
        except Exception as err:  # noqa: BLE001 - recorded
            rec["methods"]["hf_generate"] = {"error": f"{type(err).__name__}: {err}"[:400]}
        summarize(rec, N)
        print(name, B, "hf_generate", rec["ms_per_token"].get("hf_generate"), flush=True)
        save()
    save()
    return 0


def _greedy(hidden, weight, step, seeds):
    """The smoke run's greedy sampler (temperature 0): the static loop must reproduce ``model.generate``'s greedy."""
    return flashsampling.sample(hidden, weight, temperature=0.0, seed=step_seeds(seeds, step), host_checks=False)[:, 0]


if __name__ == "__main__":
    sys.exit(main())
