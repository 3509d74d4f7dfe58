"""One rank of the tensor-parallel demo of ``02_hierarchical_factorization``: run as a separate process.

Usage::

    python notebooks/tp_ranks.py RANK WORLD_SIZE WORKDIR

``WORKDIR`` holds ``inputs.npz`` (``logits`` float32 ``(B, V)``, ``shard_sizes``, ``seed``,
``num_samples``) and the rendezvous file; this rank joins a gloo group of ``WORLD_SIZE`` processes,
samples its columns of the logits with both combine rules of
:func:`flashsampling.distributed.sample_tp_from_logits`, and writes ``rank{RANK}.npz``.
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

from flashsampling.distributed import sample_tp_from_logits  # noqa: E402


def main(rank: int, world_size: int, workdir: Path) -> None:
    inputs = np.load(workdir / "inputs.npz")
    sizes = [int(s) for s in inputs["shard_sizes"]]
    seed, num_samples = int(inputs["seed"]), int(inputs["num_samples"])
    start = sum(sizes[:rank])
    shard = torch.from_numpy(inputs["logits"][:, start : start + sizes[rank]].copy())
    dist.init_process_group("gloo", init_method=f"file://{workdir / 'rendezvous'}", rank=rank, world_size=world_size)
    try:
        out = {}
        for combine in ("pathwise", "factorized"):
            out[combine] = sample_tp_from_logits(
                shard, vocab_start=start, vocab_size=sum(sizes), seed=seed, num_samples=num_samples, combine=combine
            ).numpy()
        np.savez(workdir / f"rank{rank}.npz", **out)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
