"""Checks of tensor_parallel.md: both combine rules over vocabulary shards, and what the noise must satisfy.

Ranks are simulated in one process: rank ``r`` owns the global indices ``shards[r]`` (uneven,
contiguous or scattered) and sees only their logits; what it sends is what the proof says.

* ``pathwise_replay``: each rank's ``(score, key, global index)`` winner with noise keyed by the
  global index, combined by the order of argmax_decomposition.md, equals the single-device twin
  (``flashsampling.twin.sample_twin``) for world sizes 1, 2, 4 and random uneven shards: bit-exact
  replay.
* ``local_keying_counterexample``: noise keyed by the *local* index gives two ranks' first tokens
  the same noise; with one token per rank the larger logit always wins.
* ``factorized_twin``: the factorized rule, ``(L_r, J_r)`` gathered and a shared group draw from
  stream 1, on the twin's noise: passes chi-square; every rank returns the same token when the
  group seed is shared, and ranks disagree when it is not.
* ``factorized_exact``: the exact rational law of the factorized rule over random shardings (it is
  the parallel grouped law of factorization.md).
"""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
from scipy import stats

if __package__ in (None, ""):  # run as `python proofs/check_tensor_parallel.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flashsampling.noise import STREAM_GROUP, STREAM_TOKEN, token_noise_np  # noqa: E402
from flashsampling.reference import softmax  # noqa: E402
from flashsampling.twin import inverse_temperature32, sample_twin, select  # noqa: E402
from proofs.check_argmax_decomposition import better, kernel_key  # noqa: E402
from proofs.check_factorization import exact_parallel_law  # noqa: E402


def random_shards(v: int, world: int, rng: np.random.Generator, scattered: bool) -> list[np.ndarray]:
    """``world`` disjoint shards covering ``range(v)``: uneven contiguous blocks, or a random scatter."""
    if scattered:
        labels = rng.integers(0, world, v)
        labels[rng.permutation(v)[:world]] = np.arange(world)  # no rank left empty
        return [np.flatnonzero(labels == r) for r in range(world)]
    cuts = np.sort(rng.choice(np.arange(1, v), size=world - 1, replace=False)) if world > 1 else []
    return np.split(np.arange(v), cuts)


def pathwise_combine(triples: list[tuple]) -> int:
    """All-gathered ``(score, key w2 | 1, global index)`` per rank -> the global winner (the same on every rank)."""
    best = triples[0]
    for t in triples[1:]:
        if better(t, best):
            best = t
    return best[2]


def pathwise_tokens(logits32: np.ndarray, temperature, seed: int, shards: list[np.ndarray], sample: int) -> np.ndarray:
    """Tokens of the pathwise TP rule for every row: each rank scores only its shard (noise keyed by global index)."""
    rows = logits32.shape[0]
    inv = inverse_temperature32(temperature, rows)
    out = np.empty(rows, dtype=np.int64)
    per_rank = []
    for shard in shards:
        # The rank's own computation: its logits, the noise of its *global* indices.
        g, key = token_noise_np(
            seed, np.arange(rows, dtype=np.uint32)[:, None], shard.astype(np.uint32)[None, :], sample, STREAM_TOKEN
        )
        z = logits32[:, shard]
        with np.errstate(over="ignore", invalid="ignore"):
            s = np.where(inv[:, None] == 0, z, z * inv[:, None] + g).astype(np.float32)
        j = select(s, key)
        per_rank.append((s[np.arange(rows), j], kernel_key(key[np.arange(rows), j]), shard[j]))
    for r in range(rows):
        out[r] = pathwise_combine([(float(s[r]), int(k[r]), int(i[r])) for s, k, i in per_rank])
    return out


def pathwise_replay(v: int = 1500, rows: int = 8, samples: int = 12, worlds=(1, 2, 4), seed: int = 31) -> int:
    """Mismatches between pathwise TP and the single-device twin over world sizes and shardings (expected 0)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 3, (rows, v)).astype(np.float32)
    z[0] = np.round(z[0])  # a greedy row with many exact ties
    z[1, rng.random(v) < 0.3] = -np.inf  # masked tokens
    temps = np.array([0.0] + [0.7, 1.0, 1.3] * rows)[:rows]
    single = sample_twin(z, temps, seed=seed, num_samples=samples)
    bad = 0
    for world in worlds:
        for scattered in (False, True):
            shards = random_shards(v, world, rng, scattered)
            for s in range(samples):
                bad += int((pathwise_tokens(z, temps, seed, shards, s) != single[:, s]).sum())
    return bad


def local_keying_counterexample(mu=(0.0, -1.0)) -> tuple[float, float]:
    """Two ranks with one token each, noise keyed by the local index 0 on both: ``(P(token 0), p_0)``.

    Both tokens get the same Gumbel ``G``, so token 0 wins iff ``mu_0 + G > mu_1 + G``: always or never.
    """
    p = softmax(np.array(mu))
    return (1.0 if mu[0] > mu[1] else 0.0), float(p[0])


def local_keying_twin(mu=(0.0, -1.0), n: int = 2000, seed: int = 3) -> float:
    """Frequency of token 0 when each rank keys its noise by the local index (twin noise; 1.0 here, p_0 = 0.73)."""
    g, _ = token_noise_np(seed, 0, 0, np.arange(n, dtype=np.uint32), STREAM_TOKEN)  # local index 0 on both ranks
    s0, s1 = mu[0] + g.astype(np.float64), mu[1] + g.astype(np.float64)
    return float(np.mean(s0 > s1))


def factorized_tokens(
    mu: np.ndarray, shards: list[np.ndarray], n: int, seed: int, group_seeds: list[int] | None = None
) -> np.ndarray:
    """Factorized TP rule, as computed on each rank: returns an (world, n) array of the tokens each rank returns.

    Rank ``r`` computes ``L_r`` and its local Gumbel-max sample ``J_r`` (token noise keyed by the
    global index); the pairs are all-gathered; each rank draws the group noise ``H`` from stream 1
    with seed ``group_seeds[rank]`` (all equal to ``seed`` by default, as the proof requires).
    """
    world = len(shards)
    smp = np.arange(n, dtype=np.uint32)[:, None]
    gathered_l, gathered_j = [], []
    for shard in shards:  # per-rank local work
        g, _ = token_noise_np(seed, 0, shard.astype(np.uint32)[None, :], smp, STREAM_TOKEN)
        s = mu[shard][None, :] + g.astype(np.float64)
        gathered_l.append(float(np.log(np.exp(mu[shard]).sum())))
        gathered_j.append(shard[np.argmax(s, axis=1)])
    big_l = np.array(gathered_l)
    j = np.stack(gathered_j, axis=1)
    group_seeds = group_seeds or [seed] * world
    out = np.empty((world, n), dtype=np.int64)
    for r in range(world):  # every rank combines the gathered pairs with its own draw of H
        h, _ = token_noise_np(group_seeds[r], 0, np.arange(world, dtype=np.uint32)[None, :], smp, STREAM_GROUP)
        k = np.argmax(big_l[None, :] + h.astype(np.float64), axis=1)
        out[r] = j[np.arange(n), k]
    return out


def factorized_twin(n: int = 40_000, seed: int = 8) -> dict[str, float]:
    """Chi-square p-value of the factorized rule on 4 uneven ranks; rank agreement; disagreement with unshared seeds."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(0, 1.5, 11)
    shards = [np.array([0, 1, 2, 3, 4]), np.array([5]), np.array([6, 7]), np.array([8, 9, 10])]
    tok = factorized_tokens(mu, shards, n, seed)
    p = softmax(mu)
    pv = float(stats.chisquare(np.bincount(tok[0], minlength=mu.size), n * p).pvalue)
    agree = float(np.mean(np.all(tok == tok[0], axis=0)))
    tok_bad = factorized_tokens(mu, shards, 4000, seed, group_seeds=[seed, seed + 1, seed + 2, seed + 3])
    disagree = float(np.mean(~np.all(tok_bad == tok_bad[0], axis=0)))
    return {"chi2_p": pv, "ranks_agree": agree, "unshared_seed_disagree": disagree}


def factorized_exact(n_trials: int = 200, seed: int = 17) -> int:
    """Random shardings whose exact factorized law differs from softmax (expected 0)."""
    rng = np.random.default_rng(seed)
    bad = 0
    for _ in range(n_trials):
        v = int(rng.integers(1, 30))
        world = int(rng.integers(1, min(v, 8) + 1))
        weights = [Fraction(int(rng.integers(0, 20))) for _ in range(v)]
        if sum(weights) == 0:
            weights[0] = Fraction(1)
        shards = [list(s) for s in random_shards(v, world, rng, bool(rng.integers(2)))]
        bad += int(exact_parallel_law(weights, shards) != [w / sum(weights) for w in weights])
    return bad


def main() -> int:
    ok = True
    bad = pathwise_replay()
    ok &= bad == 0
    print(
        f"pathwise TP vs single-device twin, world sizes 1/2/4, uneven contiguous and scattered shards, "
        f"greedy and masked rows: {bad} mismatches"
    )
    p_local, p0 = local_keying_counterexample()
    freq = local_keying_twin()
    ok &= p_local == 1.0 and freq == 1.0
    print(
        f"noise keyed by local index, logits (0, -1) on two ranks: P(token 0) = {p_local} (twin: {freq}) "
        f"instead of {p0:.4f}"
    )
    fz = factorized_twin()
    ok &= fz["chi2_p"] > 1e-3 and fz["ranks_agree"] == 1.0 and fz["unshared_seed_disagree"] > 0.1
    print(
        f"factorized TP (4 uneven ranks, twin, 40000 samples): chi-square p = {fz['chi2_p']:.3f}; ranks agree "
        f"on {fz['ranks_agree']:.0%} of samples; with per-rank group seeds they disagree on "
        f"{fz['unshared_seed_disagree']:.0%}"
    )
    bad = factorized_exact()
    ok &= bad == 0
    print(f"factorized TP exact law over 200 random shardings: {bad} wrong")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
