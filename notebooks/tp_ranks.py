"""One rank of the tensor-parallel demo of ``04_tensor_parallel``: run as a separate process.

Usage::

    python notebooks/tp_ranks.py RANK WORLD_SIZE WORKDIR

``WORKDIR`` holds ``inputs.npz`` (``logits`` float32 ``(B, V)``, ``shard_sizes``, ``seed``, ``num_samples``) and the
rendezvous file.  This rank joins a gloo group of ``WORLD_SIZE`` processes, samples its columns of the logits with
both combine rules of :func:`flashsampling.sample_tp_from_logits` (the factorized one with ``return_logsumexp``), and
writes ``rank{RANK}.npz``: the tokens of each rule, the log-partition function, and what the library handed to
``torch.distributed.all_gather`` (dtype size and element count of each call, recorded by a wrapper around it).

The shard lives where the kernels run: on the GPU when there is one (the compiled kernels refuse CPU tensors; gloo
then carries host copies of the small gathered values), else on the CPU (Triton interpreter).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import flashsampling  # noqa: E402


def record_all_gathers(log: list[tuple[int, int]]):
    """Wrap ``torch.distributed.all_gather`` so that each call appends ``(element_size, numel)`` of this rank's
    input tensor to ``log``; returns the original function (to restore it)."""
    original = dist.all_gather

    def all_gather(tensor_list, tensor, *args, **kwargs):
        log.append((tensor.element_size(), tensor.numel()))
        return original(tensor_list, tensor, *args, **kwargs)

    dist.all_gather = all_gather
    return original


def main(rank: int, world_size: int, workdir: Path) -> None:
    inputs = np.load(workdir / "inputs.npz")
    sizes = [int(s) for s in inputs["shard_sizes"]]
    seed, num_samples = int(inputs["seed"]), int(inputs["num_samples"])
    start = sum(sizes[:rank])
    device = "cpu" if flashsampling.INTERPRET else "cuda"
    shard = torch.from_numpy(inputs["logits"][:, start : start + sizes[rank]].copy()).to(device)
    dist.init_process_group("gloo", init_method=f"file://{workdir / 'rendezvous'}", rank=rank, world_size=world_size)
    out: dict[str, np.ndarray] = {}
    try:
        for combine in ("pathwise", "factorized"):
            log: list[tuple[int, int]] = []
            original = record_all_gathers(log)
            try:
                res = flashsampling.sample_tp_from_logits(
                    shard, vocab_start=start, vocab_size=sum(sizes), seed=seed, num_samples=num_samples,
                    combine=combine, return_logsumexp=combine == "factorized",
                )  # fmt: skip
            finally:
                dist.all_gather = original
            if combine == "factorized":
                res, lse = res
                out["logsumexp"] = lse.cpu().numpy()
            out[combine] = res.cpu().numpy()
            out[f"{combine}_gathers"] = np.array(log, dtype=np.int64).reshape(-1, 2)
        np.savez(workdir / f"rank{rank}.npz", **out)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
