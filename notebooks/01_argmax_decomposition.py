# %% [markdown]
# # 1. Sampling is an argmax, and an argmax decomposes over tiles
#
# **Motivation.** Every decoding step of a language model ends with the LM head: the *logits*
# `z = h @ W.T` (one real number per vocabulary token), then a draw from
# $\mathrm{softmax}(z/T)_i = e^{z_i/T} / \sum_j e^{z_j/T}$ at *temperature* $T$.  With a batch of `B = 256`
# rows and `V = 151936` tokens the float32 logits take `256 * 151936 * 4` bytes, 156 MB, written by the
# matmul and read back by the sampler, although only `B` integers are wanted.  `flashsampling` never
# writes them: each tile of the matmul adds random noise to its logits and keeps its own maximum, and a
# tiny second pass takes the maximum over tiles.  This notebook shows why that is *exact*:
#
# 1. two tokens: the Gumbel-max trick worked out by hand;
# 2. the Gumbel-max theorem for $V$ tokens, derived;
# 3. the same theorem as an exponential race (the form the noise code uses);
# 4. a test with a stated false-alarm rate, and the planted defect it catches;
# 5. float32 ties, and why the order needs a random key;
# 6. the argmax of the tiles' winners is the global argmax (a picture of the reduction);
# 7. the kernel, its random numbers and its NumPy twin;
# 8. the kernel's draws against the softmax.
#
# Proofs: `proofs/gumbel_max.md`, `proofs/argmax_decomposition.md`.  Lines that end in `[machine]`
# (timings, the device) depend on the machine; every other printed number is computed by the cell
# that prints it, from fixed seeds.

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
from scipy import integrate, stats  # noqa: E402

import flashsampling  # noqa: E402
from flashsampling.noise import NOISE_ABS_TOL, NOISE_REL_TOL, token_noise_np  # noqa: E402
from flashsampling.reference import fp32_logit_error_bound, softmax  # noqa: E402
from flashsampling.twin import sample_twin, sample_twin_many, select  # noqa: E402
from verification import goodness_of_fit  # noqa: E402

DEVICE = "cpu" if flashsampling.INTERPRET else "cuda"
print(f"kernels: {'Triton interpreter on the CPU' if flashsampling.INTERPRET else 'compiled, CUDA'} [machine]")
T0 = time.perf_counter()


def gumbel_cdf(x):
    """F(x) = P(G <= x) = exp(-exp(-x)) for a standard Gumbel variable G."""
    return np.exp(-np.exp(-x))


def gumbel_pdf(x):
    """f(x) = F'(x) = exp(-x - exp(-x))."""
    return np.exp(-x - np.exp(-x))


# %% [markdown]
# ## 1. Two tokens, by hand
#
# A *standard Gumbel* variable has distribution function $F(g) = P(G \le g) = e^{-e^{-g}}$ and density
# $f(g) = e^{-g - e^{-g}}$; it is $G = -\log E$ for an exponential $E$, or $-\log(-\log U)$ for a uniform $U$.
#
# Take two tokens with logits $z_0 = 0$ and $z_1 = -d$ (a gap of $d$ nats) and add independent Gumbel noise
# to each.  Token 0 wins when $G_1 - d < G_0$:
#
# $$ P(\text{token 0}) = \int f(g)\, F(g + d)\, dg = \int e^{-g} e^{-e^{-g}} e^{-e^{-g} e^{-d}}\, dg
#    \overset{t = e^{-g}}{=} \int_0^\infty e^{-t(1 + e^{-d})}\, dt = \frac{1}{1 + e^{-d}}
#    = \frac{e^{0}}{e^{0} + e^{-d}} . $$
#
# That is the softmax of $(0, -d)$.  The picture: each token's score $z_i + G_i$ has the Gumbel density
# shifted to $z_i$; the lower token wins whenever its score happens to land above the other's.
# Change `GAP` and rerun.

# %%
GAP = 1.0  # d: how many nats token 1 sits below token 0

integral, _ = integrate.quad(lambda g: gumbel_pdf(g) * gumbel_cdf(g + GAP), -30, 60, epsabs=1e-14)
closed_form = 1.0 / (1.0 + np.exp(-GAP))
print(f"gap d = {GAP}: integral of f(g) F(g + d) = {integral:.12f}; 1 / (1 + e^-d) = {closed_form:.12f}")
assert abs(integral - closed_form) < 1e-10
assert abs(closed_form - softmax(np.array([0.0, -GAP]))[0]) < 1e-15

# The same by simulation: real-valued noise (float64; a tie has probability ~2**-53, so no tie rule matters here).
rng = np.random.default_rng(2026)
n_pairs = 100_000
G = rng.gumbel(size=(n_pairs, 2))
token0_wins = G[:, 0] > G[:, 1] - GAP
print(f"simulated P(token 0) = {token0_wins.mean():.4f} over {n_pairs} draws (standard error "
      f"{np.sqrt(closed_form * (1 - closed_form) / n_pairs):.4f})")  # fmt: skip
assert abs(token0_wins.mean() - closed_form) < 5 * np.sqrt(closed_form * (1 - closed_form) / n_pairs)

x = np.linspace(-5, 9, 600)
fig, ax = plt.subplots(figsize=(9, 3.6))
for z_i, name, color in ((0.0, "token 0: z = 0", "C0"), (-GAP, f"token 1: z = -{GAP:g}", "C1")):
    ax.plot(x, gumbel_pdf(x - z_i), color=color, label=f"score of {name}")
    ax.fill_between(x, gumbel_pdf(x - z_i), color=color, alpha=0.15)
log_w = np.log(1 + np.exp(-GAP))
ax.plot(x, gumbel_pdf(x - log_w), "k--", lw=1, label=f"the larger score: Gumbel(log W = {log_w:.3f})")
ax.set_xlabel("score z + G")
ax.set_ylabel("density")
ax.set_title(f"two shifted Gumbel densities: P(token 0 wins) = {closed_form:.4f} = softmax")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 2. The Gumbel-max theorem
#
# **Theorem.** Let $z_1, \dots, z_V$ be logits, $W = \sum_i e^{z_i}$, and $G_1, \dots, G_V$ independent
# standard Gumbel variables.  Then $P\big(\arg\max_i (z_i + G_i) = j\big) = e^{z_j}/W$.
#
# *Proof* (the two-token computation with $V - 1$ rivals).  Token $j$ wins with score $x$ when every
# other score is below $x$; the rivals are independent, so
#
# $$ P(j \text{ wins}) = \int f(x - z_j) \prod_{i \ne j} F(x - z_i)\, dx
#    = \int e^{z_j} t\, e^{-e^{z_j} t}\, e^{-t \sum_{i \ne j} e^{z_i}}\, \frac{dt}{t}
#    = e^{z_j} \int_0^\infty e^{-W t}\, dt = \frac{e^{z_j}}{W}, $$
#
# with $t = e^{-x}$ (so $F(x - z_i) = e^{-e^{z_i} t}$).  Ties have probability 0 for real-valued noise.
# The same substitution gives the law of the winning score: $P(\max_i (z_i + G_i) \le x) = \prod_i F(x - z_i)
# = e^{-W t} = F(x - \log W)$, a Gumbel variable centred at $\log W$ (the dashed curve above; notebook 2 uses it).
# At temperature $T$ apply it to $z/T$.
#
# Check: the integral, by quadrature, for six logits at a temperature you can change.

# %%
TEMPERATURE = 0.8
z_small = np.array([1.5, 0.2, -0.7, 0.9, -2.0, 0.0])
mu = z_small / TEMPERATURE
by_quadrature = np.array([
    integrate.quad(lambda x, j=j: gumbel_pdf(x - mu[j]) * np.prod(gumbel_cdf(x - np.delete(mu, j))), -30, 60,
                   epsabs=1e-14)[0]
    for j in range(mu.size)
])  # fmt: skip
p_small = softmax(z_small, TEMPERATURE)
print("quadrature :", np.round(by_quadrature, 10))
print("softmax    :", np.round(p_small, 10))
print(f"largest difference {np.abs(by_quadrature - p_small).max():.1e}")
assert np.abs(by_quadrature - p_small).max() < 1e-9

# %% [markdown]
# ## 3. The same theorem as a race
#
# Write $G_i = -\log E_i$ with $E_i$ exponential.  Then $z_i + G_i > z_j + G_j \iff E_i e^{-z_i} < E_j e^{-z_j}$:
# the argmax of the scores is the argmin of the times $E_i / e^{z_i}$, i.e. token $i$'s clock rings at rate
# $e^{z_i}$ and the first to ring wins (an *exponential race*; the first of independent exponential clocks is
# clock $i$ with probability rate$_i$ / total rate).  The library's noise code computes $E = -\log U$ first and
# then $G = -\log E$ (section 7), so both forms describe it.  Check: the two rules pick the same token on every draw.

# %%
E = rng.standard_exponential(size=(50_000, z_small.size))
by_scores = np.argmax(mu - np.log(E), axis=1)
by_race = np.argmin(E * np.exp(-mu), axis=1)
print("argmax(z/T + G) == argmin(E exp(-z/T)) on every draw:", bool(np.array_equal(by_scores, by_race)))
assert np.array_equal(by_scores, by_race)

# %% [markdown]
# ## 4. A test with a stated false-alarm rate
#
# A simulation that "looks right" proves little; a test states two error rates.
# `verification.goodness_of_fit(samples, probs)` is Pearson's chi-square test of the draws against the exact
# probabilities.  It returns a `GofResult` with these fields:
#
# * `statistic`, `pvalue`: the chi-square statistic and the probability, for an exact sampler, of one at least
#   as large; `n`: the number of draws; `dof`: degrees of freedom (bins - 1);
# * `alpha`: the false-alarm rate, here `1e-6`: an exact sampler fails with probability at most `alpha`
#   (it fails when `pvalue <= alpha`);
# * `power` and `min_detectable_tv`: a sampler whose law is at total variation
#   $\mathrm{TV}(p, q) = \frac12 \sum_i |p_i - q_i|$ of at least `min_detectable_tv` from the target fails
#   with probability at least `power` (0.99);
# * `tested_mass`, `pooled_mass`: categories with small expected counts are pooled into one bin (never
#   dropped); `impossible`: draws of a probability-0 token (any one fails the test).
#
# "A test that cannot fail is a defect": the same test must fail on a planted bias of the size it claims to
# detect.  Planted here: draws at temperature `1.05 * TEMPERATURE`.

# %%
n_draws = 200_000
exact_draws = np.argmax(mu + rng.gumbel(size=(n_draws, mu.size)), axis=1)
biased_draws = np.argmax(z_small / (1.05 * TEMPERATURE) + rng.gumbel(size=(n_draws, mu.size)), axis=1)
gof_exact = goodness_of_fit(exact_draws, p_small)
gof_biased = goodness_of_fit(biased_draws, p_small)
tv_planted = 0.5 * np.abs(softmax(z_small, 1.05 * TEMPERATURE) - p_small).sum()
print("exact    :", gof_exact)
print("planted  :", gof_biased)
print(f"the planted bias is TV {tv_planted:.4f}, above min_detectable_tv {gof_biased.min_detectable_tv:.4f}")
assert gof_exact.passed and not gof_biased.passed and tv_planted > gof_biased.min_detectable_tv

# %% [markdown]
# ## 5. Float32 ties, and why the order needs a random key
#
# The kernel compares *float32* scores $s_i = \mathrm{fl}(z_i/T + G_i)$ ($\mathrm{fl}$: rounding to the nearest
# float32).  Two different real scores can round to the same float32: an exact tie.  Float32 numbers near $x$ are spaced
# $h \approx 2^{-23}|x|$ apart.  Two equal logits tie when their noises fall within about $h$ of each other; the
# difference of two Gumbel variables has the logistic density, $1/4$ at 0, so a tie has probability about $h/4$: rare
# for ordinary logits, common when they are large (the table below), and the sampler must be exact for every input.  Two
# equal logits at `OFFSET`: by symmetry each token must win half the time.
#
# * `np.argmax` returns the **first** maximal index: every tie goes to token 0, a bias towards low indices.
# * The shipped rule (`flashsampling.twin.select`, the kernel's rule replayed in NumPy: the *NumPy twin* of
#   section 7): among equal scores the larger
#   **tie key** wins.  Token $i$'s key is the word $w_0$ of its own random block (section 7) with the low bit set,
#   `w0 | 1`: a 32-bit odd number, so **31 random bits** ($2^{31}$ values).  Keys are independent of the noise,
#   so a tie is broken uniformly at random; two equal keys (probability $2^{-31}$ per tied pair) fall to the
#   lower index, which moves a tied pair's odds by $2^{-32}$.
#
# So the kernel orders candidates by the triple **(score, key, −index)**, lexicographically: a *strict* total
# order (no two tokens compare equal), which section 6 needs.

# %%
OFFSET = 2.0**22  # both logits; the float32 spacing there is 2**-1
SEED = 1234
n_tie = 20_000
logits_tied = np.full(2, OFFSET, dtype=np.float32)
g, key = token_noise_np(SEED, 0, np.arange(2, dtype=np.uint32)[None, :], np.arange(n_tie, dtype=np.uint32)[:, None])
scores = (logits_tied + g).astype(np.float32)  # the kernel's float32 score at T = 1
ties = scores[:, 0] == scores[:, 1]
first_index = np.argmax(scores, axis=1)
shipped = select(scores, key)
print(f"offset 2^{np.log2(OFFSET):.0f}: {ties.mean():.1%} of {n_tie} draws are exact float32 ties")
equal_keys = int((key[ties, 0] == key[ties, 1]).sum())
print(f"keys are odd: {bool(np.all(key & 1))}; equal keys among the tied draws: {equal_keys}")
print(f"every tie to token 0 predicts P(token 0) = 1/2 + (tie fraction)/2 = {0.5 + ties.mean() / 2:.4f}")
for name, tokens in (("first index (np.argmax)", first_index), ("shipped (score, key, -index)", shipped)):
    res = goodness_of_fit(tokens, np.array([0.5, 0.5]))
    print(f"{name:30s}: P(token 0) = {np.mean(tokens == 0):.4f}  {res.summary()}")
assert not goodness_of_fit(first_index, np.array([0.5, 0.5])).passed
assert goodness_of_fit(shipped, np.array([0.5, 0.5])).passed
assert np.array_equal(shipped, sample_twin_many(logits_tied, 1.0, seed=SEED, num_samples=n_tie))

# How often ties happen, against the size of the logits (two equal logits, the same draws):
for offset in (1.0, 2.0**10, 2.0**16, 2.0**20, 2.0**22):
    s = (np.float32(offset) + g).astype(np.float32)
    h = float(np.spacing(np.float32(offset)))
    print(f"  logits at {offset:>9.0f}: float32 spacing h = {h:.1e}; P(tie) ~ h/4 = {h / 4:.1e}, "
          f"measured {np.mean(s[:, 0] == s[:, 1]):.1e} in {n_tie} draws")  # fmt: skip

# %% [markdown]
# ## 6. The argmax of the tiles' winners is the global argmax
#
# A GPU program sees one *tile* of `TILE_WIDTH` vocabulary columns at a time.  Stage 1 keeps one candidate per
# tile, the greatest (score, key, −index) of the tile; stage 2 takes the greatest candidate.
#
# **Claim.** For a strict total order, the greatest element of a set is the greatest of the greatest elements
# of the parts, for any partition.  *Proof:* the global maximum $m$ lies in some part, where nothing exceeds
# it, so it is that part's winner; and no part's winner exceeds $m$.  This holds *draw by draw* (pathwise),
# so the law of section 2 carries over unchanged, and it does not matter in which order stage 2 meets the
# tiles.  With a non-strict rule ("keep the candidate met first unless a later one is strictly greater")
# a tie between tiles goes to whichever tile arrives first, and the token depends on the schedule.
#
# First the picture, for 24 tokens of one row.  Change `TILE_WIDTH` (any width; the last tile may be shorter).

# %%
TILE_WIDTH = 8
V_pic = 24
z_pic = np.random.default_rng(5).normal(0.0, 1.0, V_pic).astype(np.float32)
g_pic, key_pic = token_noise_np(SEED, 0, np.arange(V_pic, dtype=np.uint32), 0)
s_pic = (z_pic + g_pic).astype(np.float32)
edges = np.r_[np.arange(0, V_pic, TILE_WIDTH), V_pic]
tile_winners = [int(a + select(s_pic[None, a:b], key_pic[None, a:b])[0]) for a, b in zip(edges[:-1], edges[1:])]
winner = tile_winners[select(s_pic[None, tile_winners], key_pic[None, tile_winners])[0]]
assert winner == select(s_pic[None, :], key_pic[None, :])[0]

fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5.2), gridspec_kw={"height_ratios": [3, 1.3]})
for k, (a, b) in enumerate(zip(edges[:-1], edges[1:])):
    top.bar(np.arange(a, b), s_pic[a:b], color=f"C{k % 10}", alpha=0.55)
    top.axvline(b - 0.5, color="grey", lw=0.8, ls=":")
    top.text((a + b - 1) / 2, s_pic.max() + 0.9, f"tile {k}", ha="center", fontsize=9)
top.plot(tile_winners, s_pic[tile_winners], "ko", mfc="none", ms=11, label="tile winner (stage 1)")
top.plot([winner], [s_pic[winner]], "r*", ms=16, label="global winner (stage 2)")
top.set_ylim(min(0, s_pic.min()) - 0.5, s_pic.max() + 1.6)
top.set_xlabel("vocabulary index")
top.set_ylabel("score z + G")
top.legend(loc="lower right", fontsize=8)
bottom.bar(range(len(tile_winners)), s_pic[tile_winners], color=[f"C{k % 10}" for k in range(len(tile_winners))])
best_tile = tile_winners.index(winner)
bottom.bar([best_tile], [s_pic[winner]], color="none", edgecolor="r", lw=2)
bottom.set_xticks(range(len(tile_winners)), [f"tile {k}\nindex {i}" for k, i in enumerate(tile_winners)], fontsize=8)
bottom.set_ylabel("candidate")
fig.suptitle(f"stage 1 keeps one (score, key, index) per tile of {TILE_WIDTH}; stage 2 keeps the greatest")
fig.tight_layout()
plt.show()
print(f"tile winners {tile_winners}; the greatest of them, index {winner}, is the argmax of all {V_pic} scores")

# %% [markdown]
# Now the claim on many rows with many ties (integer logits at `OFFSET`, where float32 scores tie often), for
# random partitions into up to 40 parts and random orders of meeting the parts: the strict order gives the
# global winner every time; "first met wins ties" does not.


# %%
def greater(a: tuple, b: tuple) -> np.ndarray:
    """Candidate a > candidate b in the order (score, key, -index); a, b = (score, key, index) arrays."""
    return (a[0] > b[0]) | ((a[0] == b[0]) & ((a[1] > b[1]) | ((a[1] == b[1]) & (a[2] < b[2]))))


def reduce_parts(scores, keys, edges, order, strict: bool) -> np.ndarray:
    """Per row: the parts' winners met in ``order``; keep the greater (strict) or the first met on equal scores."""
    best = None
    for k in order:
        a, b = edges[k], edges[k + 1]
        j = a + select(scores[:, a:b], keys[:, a:b])  # the part's winner in the shipped order
        rows = np.arange(scores.shape[0])
        cand = (scores[rows, j], keys[rows, j].astype(np.int64), j)
        if best is None:
            best = cand
            continue
        take = greater(cand, best) if strict else cand[0] > best[0]
        best = tuple(np.where(take, c, o) for c, o in zip(cand, best))
    return best[2]


V_tie, rows = 200, 400
z_tie = (OFFSET + rng.integers(0, 3, V_tie)).astype(np.float32)
g_tie, key_tie = token_noise_np(SEED, np.arange(rows, dtype=np.uint32)[:, None], np.arange(V_tie, dtype=np.uint32), 0)
s_tie = (z_tie + g_tie).astype(np.float32)
key_tie = np.asarray(key_tie)
global_winner = select(s_tie, key_tie)
m = s_tie.max(axis=1, keepdims=True)
print(f"{np.mean((s_tie == m).sum(axis=1) > 1):.0%} of the {rows} rows have an exact tie at their maximum")
wrong = {"strict": 0, "first met": 0}
for _ in range(30):
    cuts = np.sort(rng.choice(np.arange(1, V_tie), size=rng.integers(1, 40), replace=False))
    edges_t = np.r_[0, cuts, V_tie]
    order = rng.permutation(edges_t.size - 1)
    wrong["strict"] += int((reduce_parts(s_tie, key_tie, edges_t, order, True) != global_winner).sum())
    wrong["first met"] += int((reduce_parts(s_tie, key_tie, edges_t, order, False) != global_winner).sum())
print(f"30 random partitions x {rows} rows: tokens different from the global winner: {wrong}")
assert wrong["strict"] == 0 and wrong["first met"] > 0

# %% [markdown]
# ## 7. The kernel, its random numbers, and its NumPy twin
#
# **Random numbers.** The noise must be the same whichever tile computes it, so it is a pure function of
# (seed, row, vocabulary index, sample).  *Philox4x32-10* (Salmon et al., SC 2011) is a counter-based generator:
# ten rounds of a bijection that maps a 128-bit *counter* (four 32-bit words) and a 64-bit *key* (the seed) to
# four random 32-bit words $w_0..w_3$.  Nothing is stored between calls: any tile computes any token's numbers.
# Token $i$'s noise uses the counter (i // 2, row, sample, stream 0); the two tokens of a pair share one block,
# 64 bits each, from which $U = (k + \frac12)/2^{64}$, $E = -\log U$ and $G = -\log E$ (notebook 5 studies
# their precision).  Its tie key is $w_0 | 1$ of the block (i, row, sample, stream 3).
#
# **The NumPy twin** (`flashsampling.twin`, `flashsampling.noise`) is a NumPy reimplementation of the kernel's
# random numbers and selection rule, operation for operation in float32, so that it returns the kernel's tokens
# bit for bit in the Triton interpreter (compiled on a GPU, the logarithm may differ in its last bit, so tokens
# may differ at near-ties).  It is what makes large-sample statistics affordable on a CPU.
#
# **The kernel.** `flashsampling.sample_from_logits(logits, ...)` runs the noise-and-argmax on logits you already
# have; `block_v` is the tile width.  Checks: the tokens do not depend on the tile width, and they equal the twin's.

# %%
TILE_WIDTHS = (16, 32, 128)  # block_v values to compare (powers of two >= 16)
V, B, S = 100, 128, 64
logits32 = rng.normal(0.0, 1.5, V).astype(np.float32)  # what the kernel sees: float32 logits
p_exact = softmax(logits32.astype(np.float64))  # the target: float64 softmax of those float32 logits
logits = torch.from_numpy(logits32).expand(B, V).contiguous().to(DEVICE)  # B identical rows

t = time.perf_counter()
tokens = flashsampling.sample_from_logits(logits, seed=SEED, num_samples=S)
print(f"sample_from_logits: {B} rows x {S} samples in {time.perf_counter() - t:.1f} s [machine]")
for block_v in TILE_WIDTHS:
    other = flashsampling.sample_from_logits(logits, seed=SEED, num_samples=8, block_v=block_v)
    print(f"block_v = {block_v:3d}: the same tokens as the default tiles: {torch.equal(other, tokens[:, :8])}")
    assert torch.equal(other, tokens[:, :8])

twin_tokens = sample_twin(np.broadcast_to(logits32, (B, V)), 1.0, seed=SEED, num_samples=S)
kernel_tokens = tokens.cpu().numpy()


def near_ties(logits_rows: np.ndarray, seed: int, rows, samples, logit_error: float = 0.0) -> np.ndarray:
    """Whether the twin's two largest float32 scores of each (row, sample) are closer than what may separate the
    kernel's from the twin's: the documented noise tolerance (compiled ``log``) plus ``logit_error`` (how far the
    kernel's float32 logits may be from ``logits_rows``), twice (both scores move)."""
    out = []
    for r, s in zip(rows, samples):
        g_r, _ = token_noise_np(seed, int(r), np.arange(logits_rows.shape[1], dtype=np.uint32), int(s))
        sc = np.sort((logits_rows[r] + g_r).astype(np.float32))
        slack = NOISE_ABS_TOL + NOISE_REL_TOL * abs(sc[-1]) + logit_error
        out.append(sc[-1] - sc[-2] <= 2 * slack)
    return np.array(out, dtype=bool)


differ = np.argwhere(kernel_tokens != twin_tokens)
if flashsampling.INTERPRET:
    assert differ.size == 0, "interpreted, the kernel equals its twin bit for bit"
else:
    assert near_ties(np.broadcast_to(logits32, (B, V)), SEED, differ[:, 0], differ[:, 1]).all()
print(f"kernel vs twin: {len(differ)} of {B * S} tokens differ, each at a near-tie [machine]")

# %% [markdown]
# `flashsampling.sample(hidden, weight, ...)` fuses the matmul: stage 1 computes $z = h W^\top$ tile by tile in float32
# and never writes it.  Its tile sizes are a `TileConfig`: `block_b` rows of the batch and `block_v` vocabulary columns
# per program (the tile), `block_d` the width of the slices of the hidden dimension that the matmul loop accumulates;
# `num_warps`, `num_stages` (and `persistent`, `epilogue_v`, `max_registers`, `warp_specialized`) tune the GPU code's
# speed.  `TileConfig(16, 32, 16)` is `block_b=16`, `block_v=32`, `block_d=16`.  A float32 dot product of
# length $D$ is within $\gamma_D \sum_k |h_k w_k|$ of the exact one for any summation order ($\gamma_D = Du/(1 - Du)$,
# $u = 2^{-24}$; `flashsampling.reference.fp32_logit_error_bound`), so the kernel's logits may differ from the exact
# product, rounded once, in their last bits: the tokens agree with the twin's on the exact product except where two
# scores are that close, which the check allows and counts.

# %%
D = 32
gen = torch.Generator().manual_seed(7)
hidden = torch.randn(B, D, generator=gen).to(DEVICE)
weight = (0.3 * torch.randn(V, D, generator=gen)).to(DEVICE)
z_fused = (hidden.double() @ weight.double().T).float().cpu().numpy()  # the logits, rounded once to float32
logit_error = fp32_logit_error_bound(hidden.cpu(), weight.cpu()) + np.spacing(np.abs(z_fused))  # per logit
for tiles in (None, flashsampling.TileConfig(16, 32, 16)):
    fused = flashsampling.sample(hidden, weight, seed=SEED, num_samples=4, tiles=tiles).cpu().numpy()
    twin_fused = sample_twin(z_fused, 1.0, seed=SEED, num_samples=4)
    d = np.argwhere(fused != twin_fused)
    assert near_ties(z_fused, SEED, d[:, 0], d[:, 1], float(logit_error.max())).all()
    shown = "default" if tiles is None else f"TileConfig({tiles.block_b}, {tiles.block_v}, {tiles.block_d})"
    print(f"sample(tiles={shown}): {len(d)} of {fused.size} tokens differ from the twin on the float64 "
          "product, each at a near-tie [machine]")  # fmt: skip

# %% [markdown]
# ## 8. The kernel's draws against the softmax
#
# The `B x S` tokens above are independent draws (each (row, sample) has its own counters) from
# $\mathrm{softmax}$ of the float32 logits.  The kernel is slow in the interpreter, so the large run uses the
# twin, which section 7 showed to return the kernel's tokens.

# %%
kernel_draws = kernel_tokens.ravel()
gof_kernel = goodness_of_fit(kernel_draws, p_exact)
t = time.perf_counter()
twin_draws = sample_twin_many(logits32, 1.0, seed=SEED + 1, num_samples=200_000)
print(f"twin: {twin_draws.size} draws in {time.perf_counter() - t:.1f} s [machine]")
gof_twin = goodness_of_fit(twin_draws, p_exact)
print("kernel:", gof_kernel)
print("twin  :", gof_twin)
assert gof_kernel.passed and gof_twin.passed

fig, axes = plt.subplots(1, 2, figsize=(12, 4))
order = np.argsort(-p_exact)
for ax, draws_, title in ((axes[0], kernel_draws, "kernel"), (axes[1], twin_draws, "NumPy twin")):
    n = draws_.size
    observed = np.bincount(draws_, minlength=V)[order]
    lo, hi = stats.binom.ppf(0.005, n, p_exact[order]), stats.binom.ppf(0.995, n, p_exact[order])
    ax.fill_between(np.arange(V), np.maximum(lo, 0.5), hi, step="mid", color="C0", alpha=0.25, label="99% band")
    ax.plot(n * p_exact[order], "C0-", drawstyle="steps-mid", label="expected n p_i")
    ax.plot(np.maximum(observed, 0.5), "C3.", ms=4, label="observed (0 drawn at 0.5)")
    ax.set_yscale("log")
    ax.set_xlabel("token, by decreasing probability")
    ax.set_title(f"{title}: n = {n}")
axes[0].set_ylabel("count")
axes[1].legend()
fig.tight_layout()
plt.show()
print(f"notebook run time: {time.perf_counter() - T0:.1f} s [machine]")
