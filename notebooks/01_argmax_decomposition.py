# %% [markdown]
# # 1. From the Gumbel-max theorem to the tiled kernel
#
# **Motivation.** Every decoding step of a language model ends with the LM head,
# `logits = h @ W.T`, followed by a softmax and a categorical draw.  With a batch of `B = 256` rows
# and a vocabulary of `V = 151936` tokens the float32 logits take `256 * 151936 * 4` bytes, about
# 156 MB, written by the matmul and read back (at least twice) by the sampler, although only
# `B` integers are wanted.  `flashsampling` never writes the logits: each tile of the matmul adds
# random noise to its logits, keeps its own maximum, and a tiny second pass takes the maximum over
# tiles.  This notebook shows why that is *exact*, not an approximation:
#
# 1. the Gumbel-max theorem turns sampling into an argmax;
# 2. an argmax decomposes over any partition of the vocabulary, so tiles can work independently;
# 3. the kernel does exactly that (and is replayed bit for bit by a NumPy twin);
# 4. a goodness-of-fit test with a stated false-alarm rate compares its draws with the softmax;
# 5. a plot of observed against expected counts.
#
# The proofs are in `proofs/gumbel_max.md` and `proofs/argmax_decomposition.md`.

# %%
import sys
import time
from pathlib import Path

ROOT = next(p for p in (Path.cwd(), *Path.cwd().parents) if (p / "flashsampling" / "__init__.py").is_file())
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from scipy import stats  # noqa: E402

import flashsampling  # noqa: E402
from flashsampling.reference import softmax  # noqa: E402
from flashsampling.twin import sample_twin, sample_twin_many  # noqa: E402
from verification import goodness_of_fit  # noqa: E402

DEVICE = "cpu" if flashsampling.INTERPRET else "cuda"
print(f"kernels run {'in the Triton interpreter (CPU)' if flashsampling.INTERPRET else 'compiled on CUDA'}")
T0 = time.perf_counter()

# %% [markdown]
# ## The idea: sampling is an argmax
#
# **Gumbel-max theorem.** Let $z_1, \dots, z_V$ be logits and $G_1, \dots, G_V$ independent standard
# Gumbel variables ($G = -\log E$ with $E \sim \mathrm{Exp}(1)$). Then
#
# $$ P\Big(\arg\max_i\, (z_i + G_i) = j\Big) = \frac{e^{z_j}}{\sum_i e^{z_i}} = \mathrm{softmax}(z)_j . $$
#
# Equivalently (the *exponential race*), $\arg\min_i E_i e^{-z_i}$ has the same law: token $i$'s
# clock rings at rate $e^{z_i}$ and the first to ring wins.  With temperature $T$ use $z / T$.
#
# A direct check in float64 NumPy: draw many argmaxes and compare with the softmax by a Pearson
# chi-square test whose false-alarm rate is `alpha = 1e-6`.

# %%
rng = np.random.default_rng(2026)
z_small = np.array([1.5, 0.2, -0.7, 0.9, -2.0, 0.0])
n_small = 200_000
G = rng.gumbel(size=(n_small, z_small.size))
gumbel_tokens = np.argmax(z_small + G, axis=1)
race_tokens = np.argmin(np.exp(-G) * np.exp(-z_small), axis=1)  # E_i = exp(-G_i): the same draws, as a race
print("argmax(z + G) == argmin(E / exp(z)) on every draw:", bool(np.array_equal(gumbel_tokens, race_tokens)))

p_small = softmax(z_small)
print("softmax      :", np.round(p_small, 4))
print("frequencies  :", np.round(np.bincount(gumbel_tokens, minlength=z_small.size) / n_small, 4))
print(goodness_of_fit(gumbel_tokens, p_small))

# %% [markdown]
# ## Argmax over tiles = global argmax
#
# The theorem needs the argmax over the *whole* vocabulary, but a GPU kernel sees one tile of
# `BLOCK_V` columns at a time.  The argmax is a maximum of a total order, and a maximum decomposes
# over any partition: the winner of the whole set is the winner among the winners of the parts.
# That holds *pathwise*, draw by draw, for the same noise, so nothing about the distribution has
# to be re-proved.  Ties need care: the order must depend on the values only, so the kernel orders
# candidates by (score, random 32-bit key, index) — never "first tile wins", which would favour
# low indices.
#
# Check: for random logits and noise, the tile-by-tile winner equals `np.argmax` for regular tiles
# and for random uneven partitions.


# %%
def tiled_argmax(scores: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Per row: the max within each tile [edges[k], edges[k+1]), then the max over the tile winners."""
    winners = np.stack([a + np.argmax(scores[:, a:b], axis=1) for a, b in zip(edges[:-1], edges[1:])], axis=1)
    best_tile = np.argmax(np.take_along_axis(scores, winners, axis=1), axis=1)
    return winners[np.arange(scores.shape[0]), best_tile]


V_demo, draws = 1000, 2000
z_demo = rng.normal(0.0, 2.0, V_demo)
scores = z_demo + rng.gumbel(size=(draws, V_demo))
regular = np.r_[np.arange(0, V_demo, 128), V_demo]
agree = {"128-wide tiles": np.array_equal(tiled_argmax(scores, regular), np.argmax(scores, axis=1))}
for trial in range(5):
    cuts = np.sort(rng.choice(np.arange(1, V_demo), size=rng.integers(1, 40), replace=False))
    edges = np.r_[0, cuts, V_demo]
    agree[f"random partition {trial} ({edges.size - 1} parts)"] = np.array_equal(
        tiled_argmax(scores, edges), np.argmax(scores, axis=1)
    )
for name, ok in agree.items():
    print(f"{name:32s}: tiled winner == global argmax on all {draws} draws: {ok}")
assert all(agree.values())

# %% [markdown]
# ## The code
#
# `flashsampling.sample(hidden, weight, ...)` fuses the matmul: each program computes a
# `BLOCK_B x BLOCK_V` tile of `h @ W.T` in float32, adds the noise, and writes one candidate
# (score, key, index) per row and sample; stage 2 reduces the candidates of all tiles.
# `flashsampling.sample_from_logits(logits, ...)` runs the same noise path on logits you already have.
#
# The noise of token `v` in row `b` for sample `s` is a pure function of `(seed, b, v, s)` (Philox4x32-10
# counter-based noise), so the tokens cannot depend on tile sizes: the decomposition above is what
# makes the result identical across tilings.  On CPU the kernels run in the Triton interpreter, so
# the shapes here are small.

# %%
V, B, S, SEED = 100, 128, 64, 1234
logits32 = rng.normal(0.0, 1.5, V).astype(np.float32)  # what the kernel sees: float32 logits
p_exact = softmax(logits32.astype(np.float64))  # the exact target: float64 softmax of those logits
logits = torch.from_numpy(logits32).expand(B, V).contiguous().to(DEVICE)  # B identical rows

t = time.perf_counter()
tokens = flashsampling.sample_from_logits(logits, seed=SEED, num_samples=S)
print(f"sample_from_logits: {B} rows x {S} samples = {B * S} tokens in {time.perf_counter() - t:.1f} s")

# Tile invariance: other tile widths give the same tokens (compare the first 8 samples).
for block_v in (16, 32, 128):
    other = flashsampling.sample_from_logits(logits, seed=SEED, num_samples=8, block_v=block_v)
    print(f"block_v={block_v:3d}: identical tokens: {torch.equal(other, tokens[:, :8])}")

# The NumPy twin replays the kernel's selection rule bit for bit.
twin_tokens = sample_twin(np.broadcast_to(logits32, (B, V)), 1.0, seed=SEED, num_samples=S)
print("kernel == NumPy twin on every token:", np.array_equal(tokens.cpu().numpy(), twin_tokens))

# %% [markdown]
# The fused path takes `hidden` and `weight` instead of logits.  Its tokens equal
# `sample_from_logits(h @ W.T)` wherever the two float32 accumulations agree (they differ only in
# summation order), and they do not depend on the `TileConfig` either.

# %%
D = 32
gen = torch.Generator().manual_seed(7)
hidden = torch.randn(B, D, generator=gen).to(DEVICE)
weight = (0.3 * torch.randn(V, D, generator=gen)).to(DEVICE)
fused = flashsampling.sample(hidden, weight, seed=SEED, num_samples=4)
retiled = flashsampling.sample(hidden, weight, seed=SEED, num_samples=4, tiles=flashsampling.TileConfig(16, 32, 16))
via_logits = flashsampling.sample_from_logits(hidden @ weight.T, seed=SEED, num_samples=4)
print("sample(): TileConfig(16, 32, 16) gives the same tokens as the default:", torch.equal(fused, retiled))
print(f"sample() vs sample_from_logits(h @ W.T): {(fused == via_logits).float().mean().item():.1%} of tokens equal")

# %% [markdown]
# ## A check: the kernel's draws against the exact distribution
#
# The `B x S` tokens above are independent draws from `softmax(logits)` (every row and sample has
# its own noise counters).  `goodness_of_fit` pools categories with small expected counts (never
# drops them) and reports, besides the p-value, the smallest total-variation deviation it would
# have detected with probability `power = 0.99`.  The kernel is slow in the interpreter, so the
# large-sample run uses the twin, which the previous cell showed to be equal to it draw by draw.

# %%
kernel_draws = tokens.cpu().numpy().ravel()
gof_kernel = goodness_of_fit(kernel_draws, p_exact)
print(gof_kernel)

t = time.perf_counter()
twin_draws = sample_twin_many(logits32, 1.0, seed=SEED + 1, num_samples=200_000)
print(f"twin: {twin_draws.size} draws in {time.perf_counter() - t:.1f} s")
gof_twin = goodness_of_fit(twin_draws, p_exact)
print(gof_twin)
assert gof_kernel.passed and gof_twin.passed
print(
    f"a sampler off by TV >= {gof_kernel.min_detectable_tv:.3f} (kernel run) or "
    f">= {gof_twin.min_detectable_tv:.4f} (twin run) would have failed with probability >= 0.99"
)

# %% [markdown]
# ## A plot: observed against expected counts
#
# Categories sorted by probability; the band is the central 99% range of each count under the
# exact law, `Binomial(n, p_i)`.  Roughly one category in a hundred falls outside it by chance.

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=False)
order = np.argsort(-p_exact)
for ax, draws_, title in ((axes[0], kernel_draws, "kernel (Triton)"), (axes[1], twin_draws, "NumPy twin")):
    n = draws_.size
    observed = np.bincount(draws_, minlength=V)[order]
    expected = n * p_exact[order]
    lo, hi = stats.binom.ppf(0.005, n, p_exact[order]), stats.binom.ppf(0.995, n, p_exact[order])
    x = np.arange(V)
    ax.fill_between(x, np.maximum(lo, 0.5), hi, step="mid", color="C0", alpha=0.25, label="99% band")
    ax.plot(x, expected, "C0-", drawstyle="steps-mid", label="expected n p_i")
    ax.plot(x, np.maximum(observed, 0.5), "C3.", ms=4, label="observed (0 drawn at 0.5)")
    ax.set_yscale("log")
    ax.set_xlabel("token, by decreasing probability")
    ax.set_title(f"{title}: n = {n}")
ax.legend()
axes[0].set_ylabel("count")
fig.tight_layout()
plt.show()
print(f"notebook run time: {time.perf_counter() - T0:.1f} s")
