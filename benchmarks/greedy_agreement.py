"""How often greedy ``generate`` equals ``model.generate(do_sample=False)``, in fp32 and bf16, and why it differs.

    python benchmarks/greedy_agreement.py              # measure (CPU: about a minute) and rewrite the docs' block
    python benchmarks/greedy_agreement.py --check      # only render the committed results (tests/test_tables.py)

``flashsampling.integrations.transformers.generate(temperature=0)`` takes the argmax of the kernel's fp32 logits
``x @ W.T``; ``model.generate(do_sample=False)`` the argmax of the logits its own head returns, which a bf16 model
rounds to bf16 (8 bits of mantissa: logits 0.02 apart at 5 nats can round to one value, and ties go to the lower
index).  For each supported family (tiny models from configs with seeded random weights, as the tests build them) and
each dtype, 8 prompts decode 16 tokens both ways.  At each row's first differing step the two tokens' fp32 logits
(from the same prefix) are compared with the bf16 rounding of the larger: a difference within it is *explained* (the
two argmaxes are of different roundings of near-equal logits).  Results: ``benchmarks/results/greedy_agreement.json``;
the table of ``docs/integration.md`` is rendered from it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import flashsampling  # noqa: E402  (before transformers)
from proofs._generated import stale_blocks, write_blocks  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "greedy_agreement.json"
DOC = ROOT / "docs" / "integration.md"
SCRIPT = "greedy_agreement.py"
ROWS, STEPS, PROMPT = 8, 16, 6


def tiny_model(model_type: str, dtype: torch.dtype, device: torch.device):
    """The tests' tiny model of ``model_type`` (``tests/test_integrations_transformers.py``), in ``dtype``."""
    import transformers

    from tests.test_integrations_transformers import _BASE, _EXTRA

    config = transformers.AutoConfig.for_model(model_type, **{**_BASE, **_EXTRA.get(model_type, {})})
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(config).eval().to(device, dtype)


def first_divergence(model, prompt: torch.Tensor, ours: torch.Tensor, theirs: torch.Tensor) -> dict | None:
    """At the first step where the two continuations differ: both tokens' fp32 logits ``x @ W.T`` from the common
    prefix, their gap, and whether it is within the bf16 rounding of the larger (half a bf16 ulp each way)."""
    diff = (ours != theirs).nonzero()
    if len(diff) == 0:
        return None
    t = int(diff[0])
    from flashsampling.integrations.transformers import split_lm_head

    backbone, weight = split_lm_head(model)
    prefix = torch.cat([prompt, ours[:t]])[None]
    with torch.no_grad():
        x = backbone(input_ids=prefix).last_hidden_state[0, -1].float()
        a, b = int(ours[t]), int(theirs[t])
        za, zb = float(x @ weight[a].float()), float(x @ weight[b].float())
    ulp = 2.0 ** (torch.frexp(torch.tensor(max(abs(za), abs(zb)))).exponent.item() - 8)  # bf16: 8 significant bits
    return {"step": t, "gap": abs(za - zb), "bf16_ulp": ulp, "explained": abs(za - zb) <= ulp}


def measure(device: torch.device) -> dict:
    from flashsampling.integrations.transformers import SUPPORTED_MODEL_TYPES, generate

    out = {"rows": ROWS, "steps": STEPS, "prompt": PROMPT, "device": str(device), "families": {}}
    g = torch.Generator().manual_seed(7)
    prompts = torch.randint(3, 256, (ROWS, PROMPT), generator=g).to(device)
    for family in sorted(SUPPORTED_MODEL_TYPES):
        for dtype in (torch.float32, torch.bfloat16):
            model = tiny_model(family, dtype, device)
            ours = generate(model, prompts, max_new_tokens=STEPS, temperature=0.0, eos_token_id=[])[:, PROMPT:]
            theirs = model.generate(prompts, do_sample=False, max_new_tokens=STEPS, eos_token_id=None,
                                    pad_token_id=0)[:, PROMPT:]  # fmt: skip
            divergences = [first_divergence(model, prompts[r], ours[r], theirs[r]) for r in range(ROWS)]
            out["families"].setdefault(family, {})[str(dtype).replace("torch.", "")] = {
                "rows_equal": sum(d is None for d in divergences),
                "tokens_equal": int((ours == theirs).sum()),
                "divergences": [d for d in divergences if d is not None],
            }
    return out


def render(data: dict) -> dict[str, str]:
    """The block ``greedy-agreement`` of ``docs/integration.md``."""
    lines = [
        f"Measured by `python benchmarks/greedy_agreement.py` ({data['rows']} prompts x {data['steps']} greedy tokens "
        f"per family, tiny random models, {data['device']}; `benchmarks/results/greedy_agreement.json`):",
        "",
        "| family | fp32: rows equal | bf16: rows equal | bf16: first differences within a bf16 rounding |",
        "|---|---|---|---|",
    ]
    totals = {"float32": 0, "bfloat16": 0, "explained": 0, "diverged": 0}
    for family, by in data["families"].items():
        d32, d16 = by["float32"], by["bfloat16"]
        explained = sum(d["explained"] for d in d16["divergences"])
        totals["float32"] += d32["rows_equal"]
        totals["bfloat16"] += d16["rows_equal"]
        totals["explained"] += explained
        totals["diverged"] += len(d16["divergences"])
        lines.append(f"| {family} | {d32['rows_equal']}/{data['rows']} | {d16['rows_equal']}/{data['rows']} | "
                     f"{explained}/{len(d16['divergences'])} |")  # fmt: skip
    n = data["rows"] * len(data["families"])
    lines += [
        "",
        f"In all: fp32 {totals['float32']}/{n} rows equal, bf16 {totals['bfloat16']}/{n}; of the bf16 rows that "
        f"differ, {totals['explained']} of {totals['diverged']} first differ where the two tokens' fp32 logits are "
        "within a bf16 rounding of each other (the model's bf16 head rounds them to one value, or swaps them).",
    ]
    return {"greedy-agreement": "\n".join(lines) + "\n"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="render the committed results only")
    args = ap.parse_args(argv)
    if not args.check:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        t0 = time.perf_counter()
        data = measure(torch.device("cpu" if flashsampling.INTERPRET else "cuda"))
        data["seconds"] = time.perf_counter() - t0
        RESULTS.write_text(json.dumps(data, indent=1) + "\n")
        write_blocks(DOC, SCRIPT, render(data))
    blocks = render(json.loads(RESULTS.read_text()))
    print(blocks["greedy-agreement"])
    return 1 if stale_blocks(DOC, SCRIPT, blocks) else 0


if __name__ == "__main__":
    sys.exit(main())
