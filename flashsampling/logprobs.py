"""The chosen tokens' log-probabilities, from the log-sum-exp that stage 1 reduces in its own pass.

``sample(..., return_logprobs=True)`` (and ``sample_from_logits``) returns with the tokens ``[B, S]`` their
log-probabilities ``[B, S]`` (float32) under the law they were drawn from::

    logprob[b, s] = z[b, tok] / T_b - L_b,        L_b = log sum_v exp(z[b, v] / T_b)

Stage 1 writes, beside its candidates, each tile's ``L_t = logsumexp_{v in tile}(z / T)`` (fp32, max-shifted, the
logits still never written: :data:`~flashsampling.kernels.epilogue.LSE_LOGPROBS`); ``L_b = logsumexp_t L_t`` is
taken in float64 over the ``[B, tiles]`` log-masses (:func:`chosen_logprobs`).  The chosen token's logit ``z[b, tok]``
is a gather: the logits' own entry for :func:`~flashsampling.sample_from_logits`, and for
:func:`~flashsampling.sample` the fp32 dot product of ``hidden[b]`` with ``weight[tok]`` (:func:`token_logits`:
``B * S * D`` reads, accumulated in another order than the kernel's, both within the fp32 bound below).  The value
is clamped at 0 (rounding can leave ``+1e-7`` where the token's probability is ~1).

Greedy rows (``T = 0``)
-----------------------
A greedy token is drawn from a point mass, whose log-probability (0, or ``-log m`` among ``m`` exact ties) says
nothing.  Serving engines report the log-probability of the model's distribution instead: vLLM with
``logprobs_mode="processed_logprobs"`` (the law after temperature and processors, the convention followed here for
``T > 0``) divides a greedy row's logits by 1 (``Sampler.apply_temperature``, ``vllm/v1/sample/sampler.py``), and
transformers' ``output_scores`` of greedy decoding are the logits with no temperature.  So do we: a greedy row's
log-probability is that of ``softmax(z)`` (``T = 1``), ``z[b, tok] - log sum_v exp z[b, v]``.  (vLLM's default,
``raw_logprobs``, reports the model's ``T = 1`` law before any processing for every row: at ``T != 1`` it is not the
law the token was drawn from.)

Error bound
-----------
Against the float64 target (``z64`` the exact logits of the inputs, ``s = z64 / T``, ``L64 = logsumexp(s)``),
:func:`logprob_error_bound` gives, with ``E_v`` the fp32 logit error bound
(:func:`flashsampling.reference.fp32_logit_error_bound`; 0 for given logits), ``u = 2**-24`` and ``n`` the widest
tile (the columns of one candidate)::

    |logprob - (s_tok - L64)|  <=  E_tok / T + u |s_tok| + Delta + u (2.5 n + 26 + |L64| + |s_tok - L64|)
    Delta = max_v (E_v / T (1 + u) + 2.1 u |s_v|)

``Delta`` bounds how far the kernel's scores ``fl(z_v fl(1/T))`` are from ``s_v`` (log-sum-exp is 1-Lipschitz in
the max norm).  The rest is the fp32 evaluation of each tile's log-sum-exp: the shifted argument ``fl(c_v - m)``
perturbs term ``v`` by a factor ``exp(+-u x_v)`` with ``x_v = m - c_v``, and since ``x e^-x <= 1/e`` the tile's sum
moves by at most ``0.74 n u`` relative (doubled for the GPU's ``exp`` through ``exp2``, whose argument is rounded
too); the summation ``(n - 1) u``; ``exp``'s own relative error ``2**-21`` and ``log``'s absolute ``2**-22 + u log n``
(PTX ``ex2.approx``, ``lg2.approx``; NumPy's are within an ulp); the final additions ``u |L|`` and ``u |logprob|``.
The float64 combine over tiles is exact to ``2**-50``.  ``tests/test_logprobs.py`` checks the bound on the kernels
and shows a planted error (the temperature left out of the token's term, a neighbouring token's logit) exceeding it.
"""

from __future__ import annotations

import numpy as np
import torch

#: Unit roundoff of float32.
_U = 2.0**-24


def token_logits(hidden: torch.Tensor, weight: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """``z[b, s] = hidden[b] . weight[tokens[b, s]]`` in fp32 (products exact for bf16/fp16 inputs), ``[B, S]``."""
    rows = weight.index_select(0, tokens.reshape(-1)).reshape(*tokens.shape, -1).float()
    return torch.einsum("bd,bsd->bs", hidden.float(), rows)


def chosen_logprobs(token_logit: torch.Tensor, lse: torch.Tensor, inv_temp: torch.Tensor) -> torch.Tensor:
    """``min(z_tok * inv - L, 0)`` in float64, returned as float32 ``[B, S]``.

    Parameters
    ----------
    token_logit : torch.Tensor, float32, shape (B, S)
        The chosen tokens' logits.
    lse : torch.Tensor, float32, shape (B, T)
        Stage 1's per-tile log-sum-exp at the row's temperature (at ``T = 1`` for a greedy row).
    inv_temp : torch.Tensor, float32, shape (B,)
        The kernel's ``fl(1/T)``, 0 for a greedy row (whose scale is then 1).
    """
    log_partition = torch.logsumexp(lse.double(), dim=-1, keepdim=True)
    scale = torch.where(inv_temp == 0, 1.0, inv_temp.double())[:, None]
    return torch.clamp(token_logit.double() * scale - log_partition, max=0.0).float()


def logprob_error_bound(z64, temperature, tokens, *, logit_error=0.0, tile_width: int = 1024) -> np.ndarray:
    """The bound of the module docstring on ``|logprob - logprob64|`` for each chosen token, float64 ``[B, S]``.

    Parameters
    ----------
    z64 : array, float64, shape (B, V)
        The exact logits (:func:`flashsampling.reference.target_logits`, or the given logits).
    temperature : float or array (B,)
        ``T >= 0``; a greedy row's bound is the one at ``T = 1`` (its reported law, module docstring).
    tokens : array of int, shape (B, S)
    logit_error : float or array (B, V)
        ``E_v``: :func:`flashsampling.reference.fp32_logit_error_bound` for ``sample``, 0 for given logits.
    tile_width : int
        The most columns one stage-1 candidate covers (``block_v``, or ``epilogue_v``).
    """
    z = np.asarray(z64, dtype=np.float64)
    b, v = z.shape
    t = np.broadcast_to(np.asarray(temperature, dtype=np.float64), (b,))
    t = np.where(t == 0, 1.0, t)[:, None]
    err = np.broadcast_to(np.asarray(logit_error, dtype=np.float64), z.shape)
    with np.errstate(invalid="ignore"):
        s = z / t
        finite = np.isfinite(s)
        m = np.max(np.where(finite, s, -np.inf), axis=1, keepdims=True)
        lse = m + np.log(np.sum(np.where(finite, np.exp(s - m), 0.0), axis=1, keepdims=True))
    delta = np.max(np.where(finite, err / t * (1 + _U) + 2.1 * _U * np.abs(s), 0.0), axis=1, keepdims=True)
    tok = np.asarray(tokens, dtype=np.int64)
    s_tok = np.take_along_axis(s, tok, axis=1)
    e_tok = np.take_along_axis(err, tok, axis=1) / t
    lp = s_tok - lse
    return e_tok + _U * np.abs(s_tok) + delta + _U * (2.5 * tile_width + 26 + np.abs(lse) + np.abs(lp))


def reference_logprobs(z64, temperature, tokens) -> np.ndarray:
    """Float64 ``s_tok - logsumexp(s)``, ``s = z64 / T`` (``T = 1`` for a greedy row): the target of the bound."""
    z = np.asarray(z64, dtype=np.float64)
    t = np.broadcast_to(np.asarray(temperature, dtype=np.float64), (z.shape[0],))
    s = z / np.where(t == 0, 1.0, t)[:, None]
    m = np.max(s, axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        lse = m + np.log(np.sum(np.exp(s - m), axis=1, keepdims=True))
    return np.take_along_axis(s, np.asarray(tokens, dtype=np.int64), axis=1) - lse
