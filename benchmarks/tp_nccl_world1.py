"""Tensor-parallel sampler over NCCL with a world of one GPU (what a one-GPU machine allows of issue 8).

Checks that both combine rules run over a real NCCL process group and that pathwise tokens equal the
single-device tokens bit for bit (V=151936, D=4096, bf16); times both against the single-device call.
``python benchmarks/tp_nccl_world1.py --out benchmarks/results/tp_nccl_world1.json``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import flashsampling  # noqa: E402
from benchmarks.common import median_ms  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/tp_nccl_world1.json")
    args = ap.parse_args()
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
    V, D = 151936, 4096
    torch.manual_seed(0)
    w = (torch.randn(V, D, device="cuda") * 0.02).to(torch.bfloat16)
    rows = []
    for B in (1, 16, 64, 256):
        h = torch.randn(B, D, device="cuda").to(torch.bfloat16)
        ref = flashsampling.sample(h, w, seed=7, num_samples=2)
        path = flashsampling.sample_tp(h, w, vocab_start=0, vocab_size=V, seed=7, num_samples=2)
        fact = flashsampling.sample_tp(h, w, vocab_start=0, vocab_size=V, seed=7, num_samples=2, combine="factorized")
        r = {
            "B": B,
            "pathwise_equals_single_device": bool(torch.equal(path, ref)),
            "factorized_in_range": bool(int(fact.min()) >= 0 and int(fact.max()) < V),
            "single_ms": median_ms(lambda h=h: flashsampling.sample(h, w, seed=7, host_checks=False)),
            "tp_pathwise_ms": median_ms(
                lambda h=h: flashsampling.sample_tp(h, w, vocab_start=0, vocab_size=V, seed=7, host_checks=False)
            ),
            "tp_factorized_ms": median_ms(
                lambda h=h: flashsampling.sample_tp(
                    h, w, vocab_start=0, vocab_size=V, seed=7, host_checks=False, combine="factorized"
                )
            ),
        }
        rows.append(r)
        print(json.dumps(r))
    dist.destroy_process_group()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps({"device": torch.cuda.get_device_name(), "world_size": 1, "rows": rows}, indent=2)
    )


if __name__ == "__main__":
    main()
