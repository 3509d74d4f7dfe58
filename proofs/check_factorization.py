"""Checks of factorization.md: the parallel grouped variant, the binary merge and the online variant.

* ``exact_parallel_law``, ``exact_online_laws``, ``exact_tree_law``: the law of the output computed
  in exact rational arithmetic from the rules of the proof (group choice with probabilities
  ``W_k / W``; merge coin ``q = W_C / (W + W_C)``), over random weights, random groups (zero-mass
  groups included), random chunkings and random merge trees: equal to ``w_i / W`` every time.
* ``symbolic_online(n)``: the product formula of the induction for symbolic chunk masses.
* ``reused_noise_counterexample``: the group-choice noise taken from the token stream (the noise of
  token ``k`` picks group ``k``): the closed-form law is far from softmax.
* ``grouped_twin``: the parallel grouped sampler run on the shipped generator's twin, group
  noise from stream 1 (passes a chi-square test) and from stream 0 (fails it).
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import sympy as sp
from scipy import stats

if __package__ in (None, ""):  # run as `python proofs/check_factorization.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flashsampling.noise import STREAM_GROUP, STREAM_TOKEN, token_noise_np  # noqa: E402
from flashsampling.reference import softmax  # noqa: E402


def exact_parallel_law(weights: list[Fraction], groups: list[list[int]]) -> list[Fraction]:
    """Law of the parallel grouped sampler: group ``k`` with chance ``W_k / W``, then token ``i`` with ``w_i / W_k``."""
    total = sum(weights)
    law = [Fraction(0)] * len(weights)
    for g in groups:
        wk = sum((weights[i] for i in g), Fraction(0))
        if wk == 0:
            continue  # L_k = -inf: never chosen
        for i in g:
            law[i] += (wk / total) * (weights[i] / wk)
    return law


def exact_online_laws(weights: list[Fraction], chunks: list[list[int]]) -> list[dict[int, Fraction]]:
    """Law of the online state after each chunk, by the binary merge rule (exact).

    State ``(W, J)``; a chunk with mass ``W_C`` and an exact local sample is taken with probability
    ``q = W_C / (W + W_C)`` (``= exp(L_C - L_new)``), otherwise the state's sample is kept.
    """
    mass, law, history = Fraction(0), {}, []
    for c in chunks:
        wc = sum((weights[i] for i in c), Fraction(0))
        if wc > 0:
            q = wc / (mass + wc)
            law = {i: (1 - q) * p for i, p in law.items()}
            for i in c:
                law[i] = law.get(i, Fraction(0)) + q * weights[i] / wc
            mass += wc
        history.append(dict(law))
    return history


def exact_tree_law(weights: list[Fraction], tree) -> tuple[Fraction, dict[int, Fraction]]:
    """``(mass, law)`` of a merge tree: a leaf is a list of token indices, a node a pair ``(left, right)``."""
    if isinstance(tree, list):
        wc = sum((weights[i] for i in tree), Fraction(0))
        return wc, ({i: weights[i] / wc for i in tree} if wc > 0 else {})
    (wl, ll), (wr, lr) = exact_tree_law(weights, tree[0]), exact_tree_law(weights, tree[1])
    if wl + wr == 0:
        return Fraction(0), {}
    q = wr / (wl + wr)
    law = {i: (1 - q) * p for i, p in ll.items()}
    for i, p in lr.items():
        law[i] = law.get(i, Fraction(0)) + q * p
    return wl + wr, law


def _random_tree(leaves: list, rng: np.random.Generator):
    nodes = list(leaves)
    while len(nodes) > 1:
        a = nodes.pop(int(rng.integers(len(nodes))))
        b = nodes.pop(int(rng.integers(len(nodes))))
        nodes.append((a, b))
    return nodes[0]


def random_exact_trials(n_trials: int = 300, seed: int = 5) -> int:
    """Cases (parallel, online prefixes, merge trees) whose exact law differs from ``w_i / W``; expected 0."""
    rng = np.random.default_rng(seed)
    bad = 0
    for _ in range(n_trials):
        v = int(rng.integers(1, 25))
        weights = [Fraction(int(rng.integers(0, 50)), int(rng.integers(1, 9))) for _ in range(v)]
        if sum(weights) == 0:
            weights[int(rng.integers(v))] = Fraction(1)
        target = [w / sum(weights) for w in weights]
        labels = rng.integers(0, int(rng.integers(1, 7)), v)
        groups = [list(np.flatnonzero(labels == k)) for k in np.unique(labels)]
        bad += int(exact_parallel_law(weights, groups) != target)
        cuts = sorted(set(rng.integers(1, v + 1, int(rng.integers(0, 6))).tolist()) | {v})
        chunks = [list(range(a, b)) for a, b in zip([0] + cuts[:-1], cuts)]
        seen = []
        for c, law in zip(chunks, exact_online_laws(weights, chunks)):
            seen += c
            wp = sum((weights[i] for i in seen), Fraction(0))
            if wp > 0:
                bad += int(any(law.get(i, Fraction(0)) != weights[i] / wp for i in seen))
        mass, law = exact_tree_law(weights, _random_tree(groups, rng))
        bad += int(mass != sum(weights) or [law.get(i, Fraction(0)) for i in range(v)] != target)
    return bad


def symbolic_online(n_chunks: int) -> list[sp.Expr]:
    """For symbolic chunk masses ``W_1..W_n`` and a token of weight ``w`` in chunk ``c``: ``P - w / sum W`` (all 0).

    ``P = (w / W_c) q_c prod_{t > c} (1 - q_t)`` with ``q_t = W_t / (W_1 + ... + W_t)`` (``q_1 = 1``).
    """
    big = list(sp.symbols(f"W1:{n_chunks + 1}", positive=True))
    w = sp.symbols("w", positive=True)
    out = []
    for c in range(n_chunks):
        prefix = [sum(big[: t + 1]) for t in range(n_chunks)]
        q = [big[t] / prefix[t] for t in range(n_chunks)]
        p = w / big[c] * q[c]
        for t in range(c + 1, n_chunks):
            p *= 1 - q[t]
        out.append(sp.simplify(p - w / prefix[-1]))
    return out


def reused_noise_counterexample(mu=(0.0, 0.0, 0.0, 0.0)) -> tuple[float, float]:
    """Groups ``{0, 1}``, ``{2, 3}``; group ``k`` picked by the *token* noise of token ``k`` (``H_k = G_k``).

    The output is token 0 iff ``G_0 - G_1 > max(mu_1 - mu_0, L_1 - L_0)``, and ``G_0 - G_1`` is
    standard logistic, so ``P(out = 0) = 1 / (1 + exp(max(mu_1 - mu_0, L_1 - L_0)))``.  Returns
    ``(P(out = 0), p_0)``.
    """
    mu = np.asarray(mu, dtype=np.float64)
    l0 = float(np.logaddexp(mu[0], mu[1]))
    l1 = float(np.logaddexp(mu[2], mu[3]))
    c = max(mu[1] - mu[0], l1 - l0)
    return 1.0 / (1.0 + math.exp(c)), float(softmax(mu)[0])


def grouped_twin(mu, groups: list[np.ndarray], n: int, seed: int, group_stream: int = STREAM_GROUP) -> np.ndarray:
    """Parallel grouped sampling with the twin's noise: local Gumbel-max per group, group by Gumbel-max over ``L_k``.

    Token noise: counter ``(index, 0, sample, STREAM_TOKEN)``; group noise: counter
    ``(group, 0, sample, group_stream)``.  ``group_stream = STREAM_TOKEN`` reuses the token noise
    (the noise of token ``k`` picks group ``k``): the dependence that breaks exactness.
    """
    mu = np.asarray(mu, dtype=np.float64)
    smp = np.arange(n, dtype=np.uint32)[:, None]
    g, _ = token_noise_np(seed, 0, np.arange(mu.size, dtype=np.uint32)[None, :], smp, STREAM_TOKEN)
    s = mu[None, :] + g.astype(np.float64)
    local = np.stack([grp[np.argmax(s[:, grp], axis=1)] for grp in groups], axis=1)
    big_l = np.array([np.log(np.exp(mu[grp]).sum()) for grp in groups])
    h, _ = token_noise_np(seed, 0, np.arange(len(groups), dtype=np.uint32)[None, :], smp, group_stream)
    k = np.argmax(big_l[None, :] + h.astype(np.float64), axis=1)
    return local[np.arange(n), k]


def grouped_twin_pvalues(n: int = 40_000, seed: int = 2024) -> dict[str, float]:
    """Chi-square p-values against softmax: group noise from stream 1 (exact) and reused from stream 0 (biased)."""
    mu = np.zeros(4)
    groups = [np.array([0, 1]), np.array([2, 3])]
    out = {}
    for name, stream in (("stream 1 (ours)", STREAM_GROUP), ("stream 0 reused", STREAM_TOKEN)):
        x = grouped_twin(mu, groups, n, seed, stream)
        out[name] = float(stats.chisquare(np.bincount(x, minlength=4), n * softmax(mu)).pvalue)
    mu2 = np.array([1.0, -0.5, 0.3, 2.0, -2.0, 0.0, 0.7])
    groups2 = [np.array([0, 3]), np.array([1]), np.array([2, 4, 5, 6])]
    x = grouped_twin(mu2, groups2, n, seed + 1)
    out["uneven groups, stream 1"] = float(stats.chisquare(np.bincount(x, minlength=7), n * softmax(mu2)).pvalue)
    return out


def main() -> int:
    ok = True
    bad = random_exact_trials()
    ok &= bad == 0
    print(f"exact rational laws (parallel, every online prefix, random merge trees), 300 random cases: {bad} wrong")
    for n in (2, 3, 4, 5):
        good = all(e == 0 for e in symbolic_online(n))
        ok &= good
        print(f"{n} chunks: symbolic online law = w / W for a token of every chunk: {good}")
    p_out, p0 = reused_noise_counterexample()
    ok &= abs(p_out - 0.5) < 1e-15 and abs(p0 - 0.25) < 1e-15
    print(f"group noise reused from the token stream, 4 equal logits in 2 groups: P(token 0) = {p_out} instead of {p0}")
    pv = grouped_twin_pvalues()
    ok &= pv["stream 1 (ours)"] > 1e-3 and pv["uneven groups, stream 1"] > 1e-3 and pv["stream 0 reused"] < 1e-12
    print("twin, 40000 samples, chi-square p-values:", {k: f"{v:.3g}" for k, v in pv.items()})
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
