"""Generate token ids with a tiny random Llama, every token drawn by flashsampling's fused sampler.

    python examples/generate.py [--model-type llama] [--max-new-tokens 8] [--temperature 0.8] [--seed 1234]

The model is built from a config with seeded random weights (no download, no tokenizer), so the ids are not
text; the point is the call.  Two prompts of different lengths share a left-padded batch.  On a CPU the kernels
run in triton's interpreter: a few seconds for 8 tokens.  The script then decodes the batch again as a server
would (one seed per request, top-p and a repetition penalty, log-probabilities: ``docs/integration.md``) and checks
the greedy continuation (``temperature=0``, fp32) against ``model.generate(do_sample=False)``.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

import flashsampling  # before transformers: on a CPU it selects triton's interpreter before triton loads
from flashsampling.integrations.transformers import generate

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import transformers  # noqa: E402  (after flashsampling, see above)

#: CPU tensors for triton's interpreter, CUDA tensors for compiled kernels.
DEVICE = torch.device("cpu" if flashsampling.INTERPRET else "cuda")


def tiny_model(model_type: str, seed: int = 0) -> transformers.PreTrainedModel:
    """A 2-layer causal LM of ``model_type`` (vocabulary 256, hidden size 64) with seeded random weights."""
    config = transformers.AutoConfig.for_model(
        model_type,
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        initializer_range=0.3,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(config).eval().to(DEVICE)


def main(argv: list[str] | None = None) -> torch.Tensor:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-type", default="llama", help="llama, mistral, qwen2, qwen3, ... (a config name)")
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args(argv)

    model = tiny_model(args.model_type)
    input_ids = torch.tensor([[17, 42, 99, 7, 64], [0, 0, 5, 130, 21]], device=DEVICE)  # row 1: 2 pads on the left
    attention_mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], device=DEVICE)

    start = time.perf_counter()
    tokens = generate(
        model,
        input_ids,
        attention_mask=attention_mask,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        seed=args.seed,
    )
    seconds = time.perf_counter() - start
    for row, ids in enumerate(tokens.tolist()):
        print(f"row {row}: prompt {ids[:5]} -> {ids[5:]}")
    kernels = "interpreted" if flashsampling.INTERPRET else "compiled"
    print(
        f"{tokens.shape[1] - 5} tokens per row in {seconds:.2f} s ({kernels} kernels), "
        f"temperature={args.temperature}, seed={args.seed}"
    )

    served = generate(
        model,
        input_ids,
        attention_mask=attention_mask,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_p=0.9,
        repetition_penalty=1.2,
        seed=[args.seed, args.seed + 1],  # one per request: a request's tokens do not depend on its batch
        output_logprobs=True,
    )
    for b, (ids, logprobs) in enumerate(zip(served.sequences.tolist(), served.logprobs.tolist())):
        print(f"request {b} (seed {args.seed + b}, top_p=0.9, repetition_penalty=1.2): {ids[5:]}, log-probabilities "
              f"{[round(x, 2) for x in logprobs]}")  # fmt: skip

    greedy = generate(
        model, input_ids, attention_mask=attention_mask, max_new_tokens=args.max_new_tokens, temperature=0.0
    )
    expected = model.generate(
        input_ids, attention_mask=attention_mask, do_sample=False, max_new_tokens=args.max_new_tokens
    )
    print(f"greedy equals model.generate(do_sample=False): {torch.equal(greedy, expected)}")
    return tokens


if __name__ == "__main__":
    main()
