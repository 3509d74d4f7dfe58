"""Stage 2: the Triton reduction and its torch twin agree, including ties, -inf tiles and flags."""

from __future__ import annotations

import torch

from flashsampling.kernels.stage2 import launch_reduce_tiles, reduce_tiles_torch


def test_triton_reduce_equals_torch_reduce(device):
    g = torch.Generator().manual_seed(0)
    B, S, T = 5, 3, 37
    m = torch.randint(-3, 3, (B, S, T), generator=g).float()  # many exact ties between tiles
    m[0, :, :] = float("-inf")
    m[1, 0, 5:] = float("-inf")
    k = torch.randint(0, 2**32, (B, S, T), generator=g)
    k[2, 1, :] = 7  # ties in key too: lowest tile wins
    idx = torch.arange(T)[None, None, :].expand(B, S, T) * 10 + 3
    flags = torch.zeros(B, T, dtype=torch.int32)
    flags[3, 4] = 1
    flags[4, 30] = 2
    args = [x.to(device).contiguous() for x in (m, k, idx, flags)]
    tok_t, f_t = launch_reduce_tiles(*args, 400)
    tok_r, f_r = reduce_tiles_torch(*args, 400)
    assert torch.equal(tok_t.cpu(), tok_r.cpu())
    assert torch.equal(f_t.cpu(), f_r.cpu())
    assert f_r[0].tolist() == [4, 4, 4] and f_r[3].tolist() == [1, 1, 1] and f_r[4].tolist() == [2, 2, 2]
