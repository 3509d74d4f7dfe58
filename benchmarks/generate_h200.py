"""Time per output token of a real-size model decoding with the fused sampler, against transformers' own sampling.

``python benchmarks/generate_h200.py --out benchmarks/results/generate_h200.json`` (an H200; transformers is in the
image).  For each model configuration (random bf16 weights, seeded; real sizes of public models) and batch size, in
one process, interleaved over ``--rounds``:

* ``hf``: ``model.generate(do_sample=True, temperature=T, top_k=0, top_p=1.0)``, transformers' sampling
  (temperature warper, softmax, ``torch.multinomial`` on the logits it materializes);
* ``fused``: :func:`flashsampling.integrations.transformers.generate` (the backbone with its KV cache, then
  ``flashsampling.sample`` on the last hidden state and the LM-head weight: the logits are never written);
* ``loop_unfused``: the same loop as ``fused`` with its sampler replaced by ``h @ W.T``, softmax and
  ``torch.multinomial`` -- the same decode loop, so ``fused`` against it isolates the sampler.

Every run generates exactly ``--new-tokens`` tokens after a ``--prompt``-token prompt (no end-of-sequence), timed
with CUDA events around the whole call; the time per output token is the total over the new tokens.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import flashsampling  # noqa: E402  (before transformers: see docs/integration.md)
from flashsampling.integrations import transformers as fs_transformers  # noqa: E402

#: Public models' sizes (random weights): vocabulary, hidden size, layers, heads, KV heads, MLP width, tied head.
MODELS = {
    "qwen2.5-1.5b": ("qwen2", 151936, 1536, 28, 12, 2, 8960, True),
    "llama-3.2-3b": ("llama", 128256, 3072, 28, 24, 8, 8192, True),
    "llama-3.1-8b": ("llama", 128256, 4096, 32, 32, 8, 14336, False),
}


def build(name: str):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    family, V, D, layers, heads, kv, mlp, tied = MODELS[name]
    cls, model_cls = (Qwen2Config, Qwen2ForCausalLM) if family == "qwen2" else (LlamaConfig, LlamaForCausalLM)
    cfg = cls(
        vocab_size=V,
        hidden_size=D,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        intermediate_size=mlp,
        tie_word_embeddings=tied,
        max_position_embeddings=4096,
    )
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = model_cls(cfg).eval()
    finally:
        torch.set_default_dtype(default)
    return model


def unfused_sample(hidden, weight, *, temperature, seed):
    """The ``loop_unfused`` sampler: logits written, softmax, ``torch.multinomial`` (seeded per step)."""
    gen = torch.Generator(device=hidden.device).manual_seed(seed & (2**63 - 1))
    probs = torch.softmax((hidden @ weight.T).float() / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=gen)


def timed(fn) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def measure(model, ids: torch.Tensor, N: int, T: float, rounds: int) -> dict:
    """``{method: [ms per call]}`` of the three methods on one prompt batch, interleaved (after one warm-up each)."""
    real = fs_transformers.flashsampling

    def hf():
        model.generate(
            ids, do_sample=True, temperature=T, top_k=0, top_p=1.0, max_new_tokens=N, min_new_tokens=N, pad_token_id=0
        )

    def fused():
        fs_transformers.generate(model, ids, max_new_tokens=N, temperature=T, seed=1234, eos_token_id=[])

    def loop_unfused():
        fs_transformers.flashsampling = SimpleNamespace(sample=unfused_sample)
        try:
            fused()
        finally:
            fs_transformers.flashsampling = real

    runs = {"hf": hf, "fused": fused, "loop_unfused": loop_unfused}
    with torch.inference_mode():
        for f in runs.values():  # warm-up: compiles the kernels, fills the allocator
            f()
        times = {k: [] for k in runs}
        for _ in range(rounds):
            for k, f in runs.items():
                times[k].append(timed(f))
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,16,64")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import transformers

    out = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "prompt": args.prompt,
        "new_tokens": args.new_tokens,
        "temperature": args.temperature,
        "rows": {},
    }
    N = args.new_tokens
    for name in args.models.split(","):
        t0 = time.perf_counter()
        model = build(name)
        out.setdefault("build_s", {})[name] = time.perf_counter() - t0
        for B in (int(b) for b in args.batches.split(",")):
            gen = torch.Generator(device="cuda").manual_seed(B)
            ids = torch.randint(0, model.config.vocab_size, (B, args.prompt), device="cuda", generator=gen)
            times = measure(model, ids, N, args.temperature, args.rounds)
            per_token = {k: statistics.median(v) / N for k, v in times.items()}
            rec = {"ms_per_token": per_token, "times_ms": times, "speedup_vs_hf": per_token["hf"] / per_token["fused"],
                   "speedup_vs_loop_unfused": per_token["loop_unfused"] / per_token["fused"]}  # fmt: skip
            out["rows"][f"{name}/B{B}"] = rec
            shown = json.dumps({k: round(v, 4) for k, v in per_token.items()})
            print(name, B, shown, f"vs hf {rec['speedup_vs_hf']:.3f}x, vs loop_unfused "
                  f"{rec['speedup_vs_loop_unfused']:.3f}x", flush=True)  # fmt: skip
            Path(args.out).write_text(json.dumps(out, indent=1))
        del model
        torch.cuda.empty_cache()
    assert not flashsampling.INTERPRET


if __name__ == "__main__":
    main()
