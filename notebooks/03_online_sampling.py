# %% [markdown]
# # 3. Online sampling: the vocabulary chunk by chunk, O(1) state per row
#
# **Motivation.** Sometimes the vocabulary arrives in pieces: a weight streamed from host memory, or too large
# for one launch.  Keeping all logits defeats the purpose; keeping only the running argmax of notebook 1 works but
# needs the token noise of every chunk in one global comparison.  The online sampler keeps, per row and sample,
# one number and one index, and merges each new chunk into them with a biased coin.
#
# What carries it: the **chain rule** and the **independence** of the coin from the samples (section 1), then
# **induction** over the chunks (section 2).  No max-stability is needed.  Sections: 1. the binary merge;
# 2. streaming by induction; 3. any order, any sizes, any merge tree; 4. the library; 5. a picture.
# Proofs: `proofs/factorization.md` (Lemma 2 and the online corollary).  Lines that end in `[machine]` depend on
# the machine; the other numbers are computed by the cell that prints them.

# %%
import sys
import time
import warnings
from pathlib import Path

ROOT = next(p for p in (Path.cwd(), *Path.cwd().parents) if (p / "flashsampling" / "__init__.py").is_file())
for path in (ROOT, ROOT / "notebooks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from diagrams import arrow, box, canvas  # noqa: E402
from scipy.special import logsumexp  # noqa: E402

import flashsampling  # noqa: E402
from flashsampling.grouped import group_logmass_np, local_samples_np  # noqa: E402
from flashsampling.online import online_choice_np, online_sampler_np  # noqa: E402
from flashsampling.reference import softmax  # noqa: E402
from verification import goodness_of_fit  # noqa: E402

DEVICE = "cpu" if flashsampling.INTERPRET else "cuda"
BLOCK_B = 64 if flashsampling.INTERPRET else None  # few, tall row blocks are faster in the interpreter
warnings.filterwarnings("ignore", "divide by zero encountered in log", RuntimeWarning)
print(f"kernels: {'Triton interpreter on the CPU' if flashsampling.INTERPRET else 'compiled, CUDA'} [machine]")
T0 = time.perf_counter()
rng = np.random.default_rng(7)

# %% [markdown]
# ## 1. The binary merge
#
# **Worked example.** Two tokens $a$ and $b$.  Start with the state "token $a$, log-mass $L_a = z_a$"; token $b$
# arrives.  Take $b$ with probability $q = e^{z_b} / (e^{z_a} + e^{z_b})$, keep $a$ otherwise: that is the softmax
# of the two, by definition.  Then the new state is "the chosen token, log-mass $\log(e^{z_a} + e^{z_b})$".
#
# **In general**, an *exact state* of a token set $S$ is its log-mass $L_S = \log \sum_{i \in S} e^{z_i}$ and a
# sample $X_S$ with $P(X_S = i) = e^{z_i - L_S}$.  Two exact states of disjoint sets $S_a$, $S_b$ merge into an exact
# state of $S_a \cup S_b$:
#
# $$ L = \log(e^{L_a} + e^{L_b}), \qquad X = X_b \text{ with probability } q = e^{L_b - L}, \text{ else } X_a, $$
#
# with a coin independent of both samples.  *Proof* (chain rule): for $i \in S_b$,
# $P(X = i) = q\, e^{z_i - L_b} = e^{z_i - L}$; for $i \in S_a$, $P(X = i) = (1 - q)\, e^{z_i - L_a} = e^{L_a - L}
# e^{z_i - L_a} = e^{z_i - L}$.  An empty set ($L = -\infty$) is the neutral state: $q = 1$ or $0$.

# %%
z_ab = np.array([0.3, -0.4])  # logits of a and b: change them
q = np.exp(z_ab[1] - np.logaddexp(*z_ab))
n = 100_000
coins = rng.random(n) < q  # the coin: independent of everything else
merged = np.where(coins, 1, 0)
print(f"q = {q:.4f} = softmax(z)[b] = {softmax(z_ab)[1]:.4f}; frequency of b: {merged.mean():.4f}")
print(goodness_of_fit(merged, softmax(z_ab)).summary())
assert abs(q - softmax(z_ab)[1]) < 1e-15 and goodness_of_fit(merged, softmax(z_ab)).passed

# %% [markdown]
# ## 2. Streaming: merge after merge
#
# Streaming chunks $C_1, C_2, \dots$ is the merge applied again and again: the state after chunk $t$ merges the
# exact state of $C_1 \cup \dots \cup C_{t-1}$ with the chunk's own exact state (its log-mass and its local
# Gumbel-max sample, notebook 1).  By induction on $t$, the state after chunk $t$ is an exact state of
# $C_1 \cup \dots \cup C_t$.  The state is one number and one index per row and sample, whatever $V$.
#
# One draw, step by step (300 logits, 10% masked, five uneven chunks):

# %%
V = 300
z32 = rng.normal(0.0, 1.5, V).astype(np.float32)
z32[rng.random(V) < 0.1] = -np.inf
z = z32.astype(np.float64)
p = softmax(z)
EDGES = np.array([0, 37, 100, 101, 180, 300])
CHUNKS = [np.arange(a, b) for a, b in zip(EDGES[:-1], EDGES[1:])]


def chunk_state(z: np.ndarray, chunk: np.ndarray, rng: np.random.Generator) -> tuple[float, int]:
    """The exact state (L_C, X_C) of one chunk: log-mass and a Gumbel-max sample (-inf, -1 if it has no mass)."""
    if not np.isfinite(z[chunk]).any():
        return -np.inf, -1
    return float(logsumexp(z[chunk])), int(chunk[np.argmax(z[chunk] + rng.gumbel(size=chunk.size))])


state_L, state_X = -np.inf, -1
print("chunk   L_chunk   local X     L_new   q = exp(L_C - L_new)   coin   state X")
for c, chunk in enumerate(CHUNKS):
    L_c, X_c = chunk_state(z, chunk, rng)
    L_new = np.logaddexp(state_L, L_c)
    q = np.exp(L_c - L_new)
    take = rng.random() < q
    state_L, state_X = L_new, (X_c if take else state_X)
    print(f"{c:5d} {L_c:9.3f} {X_c:9d} {L_new:9.3f} {q:22.4f} {'take' if take else 'keep':>6s} {state_X:9d}")
print(f"final L = {state_L:.6f}; logsumexp(z) = {logsumexp(z):.6f}")
assert abs(state_L - logsumexp(z)) < 1e-12

fig, ax = canvas(10, 3.2)
prev = box(ax, 0.05, 0.75, "empty state\nL = -inf", color="0.5")
for c, chunk in enumerate(CHUNKS):
    x = 0.2 + 0.17 * c
    leaf = box(ax, x, 0.15, f"chunk {c}: tokens\n{chunk[0]}..{chunk[-1]}\n(L_C, X_C)", color="C2")
    node = box(ax, x, 0.75, f"merge {c}\ncoin q_{c}", color="C0")
    arrow(ax, prev, node, text="(L, X)")
    arrow(ax, leaf, node)
    prev = node
ax.set_title("streaming = a chain of binary merges; the state (L, X) is O(1) per row and sample", fontsize=10)
plt.show()

# %% [markdown]
# The induction, made exact: propagate the *law* of the state through the merges and compare it, after every
# chunk, with the softmax of the tokens seen so far.


# %%
def merged_law(z: np.ndarray, chunks: list[np.ndarray]) -> tuple[np.ndarray, float]:
    """The exact law of X and the log-mass after merging ``chunks`` in the order given."""
    law, L_run = np.zeros(z.size), -np.inf
    for chunk in chunks:
        L_c = logsumexp(z[chunk]) if np.isfinite(z[chunk]).any() else -np.inf
        L_new = np.logaddexp(L_run, L_c)
        q = np.exp(L_c - L_new) if np.isfinite(L_new) else 0.0  # 0 for a chunk with no mass: the state is kept
        law *= 1.0 - q
        if q > 0:
            law[chunk] += q * softmax(z[chunk])
        L_run = L_new
    return law, L_run


for c in range(len(CHUNKS)):
    seen = np.concatenate(CHUNKS[: c + 1])
    law_c, _ = merged_law(z, CHUNKS[: c + 1])
    z_seen = np.full(V, -np.inf)
    z_seen[seen] = z[seen]
    print(f"after chunk {c}: max |law - softmax(tokens seen)| = {np.abs(law_c - softmax(z_seen)).max():.1e}")
    assert np.abs(law_c - softmax(z_seen)).max() < 1e-15

# %% [markdown]
# ## 3. Any order, any sizes, any merge tree
#
# The merge lemma asks only that the two states be exact and of *disjoint* sets.  So the chunks may come in any
# order and have any sizes (empty ones included), and two merged states may themselves be merged: any binary tree of
# merges over a partition of the vocabulary gives an exact state.  Shown exactly (the law, not a simulation) for the
# chunk order below, random chunk sizes, the reversed order and a balanced tree.  Change `ORDER_SEED` and `N_CHUNKS`.

# %%
ORDER_SEED, N_CHUNKS = 3, 9
order_rng = np.random.default_rng(ORDER_SEED)
cuts = np.sort(order_rng.choice(np.arange(1, V), size=N_CHUNKS - 1, replace=False))
random_chunks = [np.arange(a, b) for a, b in zip(np.r_[0, cuts], np.r_[cuts, V])]
shuffled = [random_chunks[i] for i in order_rng.permutation(N_CHUNKS)]


def tree_law(z: np.ndarray, chunks: list[np.ndarray]) -> tuple[np.ndarray, float]:
    """Exact law after merging the chunks pairwise, level by level (a balanced binary tree of merges)."""
    states = [merged_law(z, [c]) for c in chunks]
    while len(states) > 1:
        nxt = []
        for (law_a, L_a), (law_b, L_b) in zip(states[::2], states[1::2]):
            L = np.logaddexp(L_a, L_b)
            q = np.exp(L_b - L) if np.isfinite(L) else 0.0
            nxt.append(((1 - q) * law_a + q * law_b, L))
        if len(states) % 2:
            nxt.append(states[-1])
        states = nxt
    return states[0]


arrangements = {
    "in order, 5 uneven chunks": merged_law(z, CHUNKS),
    "reversed": merged_law(z, CHUNKS[::-1]),
    f"{N_CHUNKS} random sizes, shuffled order": merged_law(z, shuffled),
    f"{N_CHUNKS} random sizes, balanced tree": tree_law(z, shuffled),
    "shuffled, with an empty chunk": merged_law(z, shuffled[:2] + [np.arange(0)] + shuffled[2:]),
}
print(f"chunk sizes, in the order merged: {[c.size for c in shuffled]}")
for name, (law_x, L_x) in arrangements.items():
    err = np.abs(law_x - p).max()
    print(f"{name:36s}: max |law - softmax| = {err:.1e}, |L - logsumexp(z)| = {abs(L_x - logsumexp(z)):.1e}")
    assert err < 1e-15 and abs(L_x - logsumexp(z)) < 1e-12

# %% [markdown]
# ## 4. The library
#
# `flashsampling.OnlineSampler(B, seed=..., num_samples=...)` keeps the state on the device;
# `update_logits(chunk, start=...)` (or `update(hidden, weight_chunk, start=...)`) runs stage 1 on the chunk with
# `return_lse` (its log-mass and local sample) and merges; `result()` returns the tokens and $\log Z$.  The coin is
# random stream 2, `STREAM_ONLINE`: the 64-bit integer $k$ of the random block (chunk start, row, sample, 2); "take"
# is $k < K(q) = \lceil 2^{64} q - \tfrac12 \rceil$, an event of probability $K(q)/2^{64}$, within $2^{-65}$ of $q$.
# Distinct chunks have distinct starts, so every coin is fresh, and independent of the token noise (stream 0).
#
# Checks: chunks fed in the shuffled order of section 3, with its sizes: the kernel equals its NumPy replay
# (`online_choice_np` draws the coins in the order given, `local_samples_np` the surviving chunk's sample), and
# 200 000 replayed draws match the softmax.  With a single chunk the first merge always takes: the fused sampler.

# %%
B, S, SEED = 64, 32, 99
logits = torch.from_numpy(z32).expand(B, V).contiguous().to(DEVICE)
sampler = flashsampling.OnlineSampler(B, seed=SEED, num_samples=S, device=DEVICE)
t = time.perf_counter()
for chunk in shuffled:
    sampler.update_logits(logits[:, chunk[0] : chunk[-1] + 1], start=int(chunk[0]), block_b=BLOCK_B)
online_tokens, online_lse = sampler.result(vocab_size=V)
print(f"OnlineSampler: {len(shuffled)} chunks, {B * S} draws in {time.perf_counter() - t:.1f} s [machine]")
print(f"log Z from the online state: {online_lse[0].item():.6f} (float64 reference {logsumexp(z):.6f})")
assert abs(online_lse[0].item() - logsumexp(z)) < 1e-5


def online_replay(n: int, seed: int, chunks: list[np.ndarray]) -> np.ndarray:
    """n draws of row 0 with the kernel's coins and noise, chunks merged in the order given."""
    starts = np.array([c[0] for c in chunks], dtype=np.int64)
    sizes = np.array([c.size for c in chunks], dtype=np.int64)
    L_chunks = group_logmass_np(z32, np.float32(1.0), starts, sizes)
    survivor = online_choice_np(L_chunks, starts, seed, n)
    return local_samples_np(z32, np.float32(1.0), seed, starts, sizes, survivor)


differ = int((online_tokens[0].cpu().numpy() != online_replay(S, SEED, shuffled)).sum())
# A difference needs a coin within the float32-vs-float64 rounding of a chunk's log-mass of its threshold.
print(f"row 0, shuffled chunks: kernel vs NumPy replay: {differ} of {S} samples differ")
assert differ <= 1
print("kernel draws:", goodness_of_fit(online_tokens.cpu().numpy().ravel(), p).summary())

one_chunk = flashsampling.OnlineSampler(B, seed=SEED, num_samples=S, device=DEVICE)
one_chunk.update_logits(logits, block_b=BLOCK_B)
fused = flashsampling.sample_from_logits(logits, seed=SEED, num_samples=S)
print("one chunk == flashsampling.sample_from_logits:", torch.equal(one_chunk.result().tokens, fused))
assert torch.equal(one_chunk.result().tokens, fused)

t = time.perf_counter()
replays = {"in order, default chunks": online_sampler_np(z32, 1.0, 200_000, SEED + 2),
           f"shuffled, {N_CHUNKS} chunks": online_replay(200_000, SEED + 3, shuffled)}  # fmt: skip
print(f"replays: 400000 draws in {time.perf_counter() - t:.1f} s [machine]")
for name, draws in replays.items():
    res = goodness_of_fit(draws, p)
    print(f"  {name:26s} {res.summary()}")
    assert res.passed

# %% [markdown]
# ## 5. A picture: where the surviving sample comes from
#
# For the shuffled chunks, the probability that the final token comes from each chunk: the exact value
# $e^{L_C}/Z$ against the frequency in the replayed draws.  Later chunks have no advantage: each coin's $q$ shrinks as
# the state's mass grows, exactly enough.

# %%
draws = replays[f"shuffled, {N_CHUNKS} chunks"]
chunk_of = np.zeros(V, dtype=np.int64)
for j, chunk in enumerate(shuffled):
    chunk_of[chunk] = j
exact_share = np.array([p[c].sum() for c in shuffled])
observed_share = np.bincount(chunk_of[draws], minlength=N_CHUNKS) / draws.size
fig, ax = plt.subplots(figsize=(8, 3.2))
ax.bar(np.arange(N_CHUNKS) - 0.2, exact_share, width=0.4, label="exact exp(L_C) / Z")
ax.bar(np.arange(N_CHUNKS) + 0.2, observed_share, width=0.4, label="replayed draws")
ax.set_xticks(range(N_CHUNKS), [f"{j}\n[{c[0]},{c[-1] + 1})" for j, c in enumerate(shuffled)], fontsize=8)
ax.set_xlabel("chunk, in the order merged")
ax.set_ylabel("P(token from chunk)")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
print(f"largest |observed - exact| share: {np.abs(observed_share - exact_share).max():.4f}")
print(f"notebook run time: {time.perf_counter() - T0:.1f} s [machine]")
