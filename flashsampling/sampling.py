"""Public entry points: exact sampling from ``softmax(h @ W.T / T)`` without writing the logits.

Random-number contract
----------------------
``seed`` is an int in ``[0, 2**64)``.  The noise of token ``v`` in row ``b`` for sample ``s`` is a
pure function of ``(seed, b, v, s)`` (:mod:`flashsampling.noise`), so the tokens do not depend on
tile sizes, grid or launch layout: the same call gives the same tokens on every configuration
(bit for bit on one device; across devices up to near-ties, see ``tests/test_replay.py``).
``seed=None`` draws a fresh 64-bit seed from torch's default CPU generator (so
``torch.manual_seed`` makes it reproducible).  A caller who passes seeds must not reuse one seed for
two decoding steps of the same rows: the noise would repeat.  Rows are keyed by their position in
the batch; to give requests independent streams across steps, vary the seed per step.

A device seed: :func:`sample` and :func:`sample_from_logits` also take a 0-dim ``torch.int64`` tensor on the
inputs' device, whose two's-complement 64 bits are the seed (the same tokens as that int).  The stage-1 kernel
loads it (``SEED_PTR``), so the call never reads it on the host and a captured CUDA graph replays with whatever
value the tensor holds (:mod:`flashsampling.ops`).  Such a call runs the Triton stage-1 kernels, not the Gluon
kernel.

Per-request seeds: a ``[B]`` ``torch.int64`` tensor on the inputs' device gives each row its own seed (its 64 bits,
as a device seed's).  Row ``b`` is then keyed by ``seed[b]`` with the counter's row field 0: its noise is a pure
function of ``(seed[b], v, s)``, not of its batch slot, the batch size or the other rows, so a request's tokens are
those of a batch of one with the int seed ``seed[b]`` (``sample(h[b:b+1], W, seed=int(seed[b]))``) wherever it sits.
Two rows with one seed draw the same noise (give requests distinct seeds, and a request a new seed per step).  The
kernel loads the seeds (``ROW_SEEDS``: no synchronization, CUDA-graph replayable) and, as a device seed, runs the
Triton stage-1 kernels.  ``top_k`` and the grouped, online, tensor-parallel and tile inverse-CDF samplers refuse them
(``ValueError``/``TypeError`` naming ``seed``).

Checks
------
Shape, dtype and device checks are always on.  ``host_checks=True`` (the default) adds the checks
that read device memory on the host (one synchronization): NaN or infinite logits found by the
kernel during its own pass (never an extra read of ``W``), ``z / T`` overflowing float32, rows with
no finite logit, and invalid per-row temperatures (flagged on the device by
:mod:`flashsampling.kernels.temperature`, read with the kernel's flags: no synchronization before
the launch).  ``host_checks=False`` is for serving; the tokens are then still always in ``[0, V)``.
Every entry point runs the same preamble and finish (:mod:`flashsampling._request`).
"""

from __future__ import annotations

import torch

from ._request import lm_head_request, logits_request
from ._validate import check_flag
from .kernels.epilogue import LSE_LOGPROBS
from .kernels.tiles import TileConfig
from .logprobs import chosen_logprobs, token_logits
from .truncation import sample_truncated, sample_truncated_from_logits


def sample(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    *,
    temperature: float | torch.Tensor = 1.0,
    seed: int | torch.Tensor | None = None,
    num_samples: int = 1,
    host_checks: bool = True,
    tiles: TileConfig | None = None,
    top_k: int | torch.Tensor | None = None,
    top_p: float | torch.Tensor | None = None,
    min_p: float | torch.Tensor | None = None,
    order: str | tuple | None = None,
    return_logprobs: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Sample tokens from ``softmax(hidden @ weight.T / temperature)`` without writing the logits.

    The logits ``z = h @ W.T`` are computed tile by tile in fp32; each tile adds Gumbel noise to
    ``z / T`` and keeps its maximum; a second pass takes the maximum over tiles.  By the Gumbel-max
    theorem and argmax decomposition the result is distributed exactly as the softmax of the fp32
    logits (``proofs/``).

    Parameters
    ----------
    hidden : torch.Tensor, shape (B, D), bf16/fp16/fp32
    weight : torch.Tensor, shape (V, D), same dtype and device as ``hidden``
    temperature : float or torch.Tensor of shape (B,)
        ``0`` means greedy (argmax; exact ties broken at random).  Must be finite and ``>= 0``.  A number
        ``0`` skips the noise's work altogether (the same tokens as zeros in a tensor).
    seed : int in [0, 2**64), None, a 0-dim int64 tensor on the inputs' device (a device seed, see above), or a
        ``[B]`` int64 tensor there (per-request seeds, see above)
    num_samples : int >= 1
        Independent samples per row.
    host_checks : bool
        Run the checks that synchronize with the device (see module docstring).
    tiles : TileConfig or None
        Override the tile choice (tests use this to show tile invariance).  By default: on an sm_90
        GPU (H100/H200), for one sample and ``B > 32`` (``B > 16`` where the vocabulary's 256-column
        tiles fill the SMs' last round), the warp-specialized Gluon kernel
        (:func:`~flashsampling.kernels.tiles.warp_specialized_tiles`); else the Triton kernels'
        :func:`~flashsampling.kernels.tiles.default_tiles`.  Every choice gives the same tokens.  With ``top_k`` the
        truncated sampler's stage 1 runs one program per tile on these block sizes
        (:func:`flashsampling.truncation.sample_truncated`).
    top_k : int, torch.Tensor of shape (B,) (integer), or None
        Sample from the ``k`` largest logits only (per row for a tensor): ties at the k-th logit kept by lower index
        (``flashsampling.targets.top_k_law(k, ties="low_index")``).  Each ``k`` in ``[1, 1024]``, or ``>= V`` for no
        truncation.
    top_p : float, torch.Tensor of shape (B,) (floating), or None
        Nucleus sampling: the smallest head of the ranking whose mass reaches ``p`` (``flashsampling.targets``'
        defaults: tied logits kept together, the crossing token kept), ``p`` in ``(0, 1]`` (1: no truncation).
    min_p : float, torch.Tensor of shape (B,) (floating), or None
        Keep the tokens with ``P(i) >= min_p * max P``, ``min_p`` in ``[0, 1]`` (0: no truncation).
    order : str, tuple, or None
        How the temperature and the filters compose: a name of ``flashsampling.targets.ORDERS`` (``None``:
        ``"transformers"``, i.e. temperature, top-k, top-p, min-p) or a tuple of steps.  The law is
        ``flashsampling.targets.sampling_law(z, T, top_k=, top_p=, min_p=, order=, top_k_ties="low_index")``
        (:mod:`flashsampling.truncation`), exactly, the logits never written.  With no filter (or none that
        truncates any row) this is the plain path, with the same tokens as without the arguments; a row whose
        filters keep every token gets the plain sampler's token for the same seed.  Tensors are read on the host,
        and a truncated call synchronizes once after its second stage (rows its lists cannot decide take an exact
        fallback that recomputes their logits).
    return_logprobs : bool
        Also return each token's log-probability under the law it was drawn from, ``z_tok / T - logsumexp(z / T)``
        (a greedy row's under ``T = 1``), from a log-sum-exp that stage 1 reduces in its own pass (the logits are
        still never written; the Triton stage-1 kernels run): :mod:`flashsampling.logprobs` (its fp32 error bound
        included).  Not with ``top_k``, ``top_p`` or ``min_p`` yet (``ValueError``).

    Returns
    -------
    torch.Tensor, int64, shape (B, num_samples), values in [0, V)
        With ``return_logprobs``: ``(tokens, logprobs)``, the second float32 of the same shape.

    Raises
    ------
    TypeError, ValueError
        Bad arguments (named in the message); NaN/inf logits when ``host_checks``.
    """
    request, V = lm_head_request(hidden, weight, temperature=temperature, seed=seed, num_samples=num_samples,
                                 host_checks=host_checks, device_seed=True, top_k=top_k, top_p=top_p, min_p=min_p,
                                 order=order)  # fmt: skip
    want_logprobs = _check_return_logprobs(return_logprobs, request)
    if request.truncation is not None:
        return sample_truncated(request, hidden, weight, request.truncation, tiles)
    if want_logprobs:
        parts, _ = request.stage1(hidden, weight, tiles, return_lse=LSE_LOGPROBS)
        tokens = request.reduce_and_finish(parts, V)
        return tokens, chosen_logprobs(token_logits(hidden, weight, tokens), parts[4], request.inv_temp)
    # A greedy row's score is z, noise or not (its noise is multiplied by 0): a number temperature of 0 skips the
    # noise's work, with the same tokens (15-26% faster at B = 256: the no-noise runs of
    # benchmarks/results/coop_probe_h200.json).
    parts, _ = request.stage1(hidden, weight, tiles)
    return request.reduce_and_finish(parts, V)


def sample_from_logits(
    logits: torch.Tensor,
    *,
    temperature: float | torch.Tensor = 1.0,
    seed: int | torch.Tensor | None = None,
    num_samples: int = 1,
    host_checks: bool = True,
    block_b: int | None = None,
    block_v: int | None = None,
    top_k: int | torch.Tensor | None = None,
    top_p: float | torch.Tensor | None = None,
    min_p: float | torch.Tensor | None = None,
    order: str | tuple | None = None,
    return_logprobs: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Sample from ``softmax(logits / temperature)`` with the same noise path as :func:`sample`.

    For the same seed, ``sample_from_logits(h @ W.T)`` and ``sample(h, W)`` return the same tokens
    wherever the two fp32 logit computations agree (they differ only in accumulation order).

    Parameters
    ----------
    logits : torch.Tensor, shape (B, V), bf16/fp16/fp32
        ``-inf`` masks a token; NaN and ``+inf`` are errors (with ``host_checks``).
    temperature, seed, num_samples, host_checks
        As in :func:`sample`.
    block_b, block_v : int or None
        Tile sizes (powers of two); the tokens do not depend on them.
    top_k, top_p, min_p, order
        As in :func:`sample`.
    return_logprobs : bool
        As in :func:`sample` (the chosen token's logit is the logits' own entry).

    Returns
    -------
    torch.Tensor, int64, shape (B, num_samples)
        With ``return_logprobs``: ``(tokens, logprobs)``, the second float32 of the same shape.
    """
    request, V = logits_request(logits, temperature=temperature, seed=seed, num_samples=num_samples,
                                host_checks=host_checks, device_seed=True, top_k=top_k, top_p=top_p, min_p=min_p,
                                order=order)  # fmt: skip
    want_logprobs = _check_return_logprobs(return_logprobs, request)
    if request.truncation is not None:
        return sample_truncated_from_logits(request, logits, request.truncation, block_b, block_v)
    if want_logprobs:
        parts, _ = request.logits_stage1(logits, block_b, block_v, return_lse=LSE_LOGPROBS)
        tokens = request.reduce_and_finish(parts, V)
        return tokens, chosen_logprobs(logits.gather(1, tokens).float(), parts[4], request.inv_temp)
    parts, _ = request.logits_stage1(logits, block_b, block_v)
    return request.reduce_and_finish(parts, V)


def _check_return_logprobs(return_logprobs, request) -> bool:
    """``return_logprobs`` as a bool; with ``top_k``, ``top_p`` or ``min_p`` (whose kernels do not reduce the kept set's
    log-sum-exp yet) a ``ValueError``."""
    if check_flag("return_logprobs", return_logprobs) and request.truncation is not None:
        raise ValueError(
            "return_logprobs=True is not supported with top_k, top_p or min_p yet (flashsampling.truncation)"
        )
    return bool(return_logprobs)
