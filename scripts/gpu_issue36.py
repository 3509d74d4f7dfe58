"""The GPU half of issue 36's fixes, in one process: ``python scripts/gpu_issue36.py --out $OUT/issue36.json``.

On a CUDA machine (compiled kernels): an ``OnlineSampler`` made without ``device`` (it was refused there: its
state was made on the CPU first), ``device="cuda:<count>"`` refused; over an NCCL world of one, a temperature
tensor's values exchanged and compared (``B`` words, read on the host), a rank's planted stage-1 failure raised
through the exchange of candidates (``host_checks``), pathwise tokens equal to the single-device ones; and the cost
of ``group_sizes`` per group (``MAX_GROUPS``' reason: each group is a launch and a reduction) at ``V = 151936``.
Without CUDA the same checks run in the interpreter over a gloo world of one (the cost figure is then the
interpreter's).  Prints the JSON and exits 1 if a check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from unittest import mock

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import flashsampling  # noqa: E402
import flashsampling._request as request_module  # noqa: E402


def _raises(fn, kind, text: str) -> bool:
    try:
        fn()
    except kind as exc:
        return text in str(exc)
    return False


def checks(device: torch.device) -> dict:
    out = {}
    g = torch.Generator().manual_seed(0)
    z = torch.randn(4, 500, generator=g).to(device)
    # OnlineSampler without device: the first chunk's device.
    o = flashsampling.OnlineSampler(4, temperature=0.7, seed=3, num_samples=2)
    o.update_logits(z[:, :200])
    o.update_logits(z[:, 200:])
    tok = o.result(vocab_size=500).tokens
    out["online_without_device"] = bool(tok.device == z.device and int(tok.max()) < 500)
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    out["online_device_beyond_count_refused"] = _raises(
        lambda: flashsampling.OnlineSampler(4, device=f"cuda:{count}"), ValueError, "CUDA"
    )
    # Tensor parallel, a world of one: temperature tensors, a planted stage-1 failure, pathwise = single device.
    t = torch.tensor([0.7, 0.0, 1.3, 2.0], device=device)
    single = flashsampling.sample_from_logits(z, temperature=t, seed=5, num_samples=3)
    tp = flashsampling.sample_tp_from_logits(z, temperature=t, seed=5, num_samples=3)
    out["tp_temperature_tensor_pathwise_equals_single"] = bool(torch.equal(tp, single))

    def planted(*args, **kwargs):
        raise RuntimeError("planted stage-1 failure")

    with mock.patch.object(request_module, "launch_logits_stage1", planted):
        out["tp_stage1_failure_raised"] = _raises(
            lambda: flashsampling.sample_tp_from_logits(z, temperature=t, seed=5), RuntimeError, "planted"
        )
    out["tp_negative_zero_accepted"] = bool(
        torch.equal(flashsampling.sample_tp_from_logits(z, temperature=-0.0, seed=5), z.argmax(dim=1, keepdim=True))
    )
    return out


def group_cost(device: torch.device, V: int = 151936, B: int = 1) -> dict:
    """Seconds per call of ``sample_grouped_from_logits`` with K equal groups, and per group."""
    z = torch.randn(B, V, device=device)
    rows = {}
    for K in (1, 16, 256, 1024) if device.type == "cuda" else (1, 16):
        sizes = [V // K] * (K - 1) + [V - (V // K) * (K - 1)]
        flashsampling.sample_grouped_from_logits(z, seed=1, group_sizes=sizes)  # compile
        if device.type == "cuda":
            torch.cuda.synchronize()
        began = time.perf_counter()
        reps = 5 if device.type == "cuda" else 1
        for _ in range(reps):
            flashsampling.sample_grouped_from_logits(z, seed=1, group_sizes=sizes)
        if device.type == "cuda":
            torch.cuda.synchronize()
        s = (time.perf_counter() - began) / reps
        rows[str(K)] = {"seconds": s, "seconds_per_group": s / K}
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    cuda = torch.cuda.is_available() and not flashsampling.INTERPRET
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29536")
    if cuda:
        dist.init_process_group("nccl", rank=0, world_size=1, device_id=device)
    else:
        dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        result = {"device": torch.cuda.get_device_name() if cuda else "cpu (interpreter)", "checks": checks(device)}
    finally:
        dist.destroy_process_group()
    result["group_cost"] = group_cost(device, V=151936 if cuda else 4096)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0 if all(result["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
