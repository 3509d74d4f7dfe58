# %% [markdown]
# # 2. Groups: a local sample and a log-mass per group, then one group draw
#
# **Motivation.** Notebook 1 sampled by one global argmax, reduced tile by tile.  Three situations want a
# different shape of computation: *parallel groups* (each group returns a finished sample of its own and one
# number, and a cheap last step picks a group), *online* sampling (the vocabulary arrives chunk by chunk;
# notebook 3) and *tensor parallel* sampling (the vocabulary is split over GPUs; notebook 4).  All three use
# the **grouped rule** of this notebook.
#
# Which fact carries which step:
#
# * the grouped rule is exact by the **Gumbel-max theorem** (notebook 1) applied twice — inside each group, and
#   over the groups' log-masses — joined by the **chain rule** $P(\text{group } k, \text{token } i) =
#   P(\text{group } k)\,P(\text{token } i \mid \text{group } k)$, which holds because the group noise is
#   **independent** of the token noise (sections 2 and 4);
# * **max-stability** (section 1) is what shows that the fused sampler of notebook 1 *is* a grouped rule, with
#   the group noise hidden in the group maxima (section 3).
#
# Sections: 1. max-stability; 2. the grouped rule; 3. the link with the fused argmax; 4. why the group noise must
# be fresh; 5. the library.  Proofs: `proofs/max_stability.md`, `proofs/factorization.md`.  Lines that end in
# `[machine]` depend on the machine; the other numbers are computed by the cell that prints them.

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
from flashsampling.grouped import grouped_sampler_np  # noqa: E402
from flashsampling.reference import softmax  # noqa: E402
from verification import goodness_of_fit, gumbel_max_test, homogeneity_test  # noqa: E402

DEVICE = "cpu" if flashsampling.INTERPRET else "cuda"
# The interpreter runs each Triton program in Python: few, tall row blocks are faster there; on a GPU None keeps
# the library's choice.
BLOCK_B = 64 if flashsampling.INTERPRET else None
# Masked tokens make the kernels take log(0) = -inf on purpose; the interpreter warns about it.
warnings.filterwarnings("ignore", "divide by zero encountered in log", RuntimeWarning)
print(f"kernels: {'Triton interpreter on the CPU' if flashsampling.INTERPRET else 'compiled, CUDA'} [machine]")
T0 = time.perf_counter()
rng = np.random.default_rng(42)


def gumbel_pdf(x):
    return np.exp(-x - np.exp(-x))


# %% [markdown]
# ## 1. Max-stability: a group's maximum summarizes the group
#
# **Worked example.** Two tokens with logits $z_1, z_2$ and independent Gumbel noise.  The larger score
# $M = \max(z_1 + G_1, z_2 + G_2)$ is below $x$ when both are:
# $P(M \le x) = e^{-e^{z_1 - x}} e^{-e^{z_2 - x}} = e^{-(e^{z_1} + e^{z_2}) e^{-x}} = F(x - L)$ with
# $L = \log(e^{z_1} + e^{z_2})$: the maximum is again Gumbel, shifted to the group's **log-mass** $L$.
#
# **In general**, for a group $A$ with $L_A = \log \sum_{i \in A} e^{z_i}$, maximum $M_A$ and winner $I_A$,
# the computation of notebook 1 (section 2) stopped at $x$ gives
#
# $$ P(I_A = i,\ M_A \le x) = \int_{-\infty}^{x} f(y - z_i) \prod_{j \in A, j \ne i} F(y - z_j)\, dy
#    = \frac{e^{z_i}}{e^{L_A}}\; F(x - L_A). $$
#
# The joint law is a product, so (a) $M_A - L_A$ is standard Gumbel, (b) $I_A$ is a softmax sample of the group,
# (c) $I_A$ is independent of $M_A$; and (d) disjoint groups, functions of disjoint noise, are independent.
#
# Checks on one group of a 300-token logit vector (10% of the tokens masked with $-\infty$): the maxima against
# Gumbel$(L_A, 1)$ (Kolmogorov-Smirnov, `gumbel_max_test`), the winners against the group's softmax (chi-square),
# and the winners after a small maximum against those after a large one (two-sample chi-square,
# `homogeneity_test`: fails if the two samples' laws differ).  Each at false-alarm rate `alpha = 1e-6`.

# %%
V = 300
z32 = rng.normal(0.0, 1.5, V).astype(np.float32)
z32[rng.random(V) < 0.1] = -np.inf
z = z32.astype(np.float64)
p = softmax(z)
EDGES = np.array([0, 37, 100, 101, 180, 300])  # five uneven groups (one of a single token); change them freely
GROUPS = [np.arange(a, b) for a, b in zip(EDGES[:-1], EDGES[1:])]
print(f"V = {V}, {np.isinf(z).sum()} masked tokens, groups of sizes {np.diff(EDGES).tolist()}")

A = GROUPS[3]
n = 40_000
scores_A = z[A] + rng.gumbel(size=(n, A.size))
M_A, I_A = scores_A.max(axis=1), np.argmax(scores_A, axis=1)  # float64 noise: ties have probability ~0
L_A = logsumexp(z[A])
checks = {
    "M_A ~ Gumbel(L_A, 1)": gumbel_max_test(M_A, loc=L_A),
    "I_A ~ softmax of the group": goodness_of_fit(I_A, softmax(z[A])),
    "I_A independent of M_A": homogeneity_test(I_A[M_A <= np.median(M_A)], I_A[M_A > np.median(M_A)], A.size),
}
for name, res in checks.items():
    print(f"{name:28s} {res.summary()}")
assert all(res.passed for res in checks.values())

x = np.linspace(L_A - 4, L_A + 8, 400)
fig, ax = plt.subplots(figsize=(8, 3.2))
ax.hist(M_A, bins=80, density=True, color="C0", alpha=0.4, label=f"maxima of group 3 ({A.size} tokens)")
ax.plot(x, gumbel_pdf(x - L_A), "k-", label=f"Gumbel density at L_A = {L_A:.3f}")
ax.set_xlabel("M_A")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 2. The grouped rule
#
# Each group $k$ returns its log-mass $L_k$ and its **local sample** $X_k = \arg\max_{i \in k} (z_i + G_i)$.
# A **fresh** Gumbel vector $G'$, one entry per group and independent of all token noise $G$, picks the group:
#
# $$ k^* = \arg\max_k\,(L_k + G'_k), \qquad \text{token} = X_{k^*}. $$
#
# *Proof.* The Gumbel-max theorem over the numbers $L_k$: $P(k^* = k) = e^{L_k} / Z$ with $Z = \sum_l e^{L_l}$;
# inside group $k$: $P(X_k = i) = e^{z_i} / e^{L_k}$.  $k^*$ is a function of $G'$ and $X_k$ of $G$, independent,
# so the chain rule multiplies them: $P(\text{token} = i) = \frac{e^{L_k}}{Z} \cdot \frac{e^{z_i}}{e^{L_k}} =
# \frac{e^{z_i}}{Z}$.  No max-stability is used.  A group with no finite logit has $L_k = -\infty$ and is never picked.
#
# One draw, step by step:


# %%
def group_logmass(z: np.ndarray) -> np.ndarray:
    """L_k for every group (-inf for a group with no finite logit)."""
    return np.array([logsumexp(z[g]) if np.isfinite(z[g]).any() else -np.inf for g in GROUPS])


L = group_logmass(z)
G = rng.gumbel(size=V)  # token noise
X = np.array([g[np.argmax(z[g] + G[g])] for g in GROUPS])  # local samples
G_fresh = rng.gumbel(size=len(GROUPS))  # group noise, independent of G
k_star = int(np.argmax(L + G_fresh))
print(" k  size     L_k   local X_k    G'_k   L_k + G'_k")
for k, g in enumerate(GROUPS):
    mark = "  <- chosen" if k == k_star else ""
    print(f"{k:2d} {g.size:5d} {L[k]:7.3f} {X[k]:11d} {G_fresh[k]:7.3f} {L[k] + G_fresh[k]:12.3f}{mark}")
print(f"token = X_{k_star} = {X[k_star]}")

# %% [markdown]
# The law of the token, computed exactly from the two factors, is the softmax; then many draws (vectorized),
# checked by chi-square.  The picture is the tree every grouped variant computes.

# %%
law = np.zeros(V)
for k, g in enumerate(GROUPS):
    if np.isfinite(L[k]):
        law[g] = softmax(L)[k] * softmax(z[g])
print(f"max |P(token = i) - softmax_i| = {np.abs(law - p).max():.1e}")
assert np.abs(law - p).max() < 1e-15


def grouped_numpy(z: np.ndarray, n: int, rng: np.random.Generator, *, group_noise: str = "fresh") -> np.ndarray:
    """n draws of the grouped rule with float64 NumPy noise.

    ``group_noise``: ``"fresh"`` (independent G'), ``"max"`` (G'_k = M_k - L_k, section 3) or ``"reused"`` (the
    bug of section 4: G'_k = G_k, the noise of token k).
    """
    G = rng.gumbel(size=(n, z.size))
    X = np.stack([g[np.argmax(z[g] + G[:, g], axis=1)] for g in GROUPS], axis=1)
    L = group_logmass(z)
    if group_noise == "fresh":
        G_group = rng.gumbel(size=(n, len(GROUPS)))
    elif group_noise == "max":
        M = np.stack([(z[g] + G[:, g]).max(axis=1) for g in GROUPS], axis=1)
        with np.errstate(invalid="ignore"):
            G_group = np.where(np.isfinite(L), M - L, 0.0)
    else:
        G_group = G[:, : len(GROUPS)]
    k = np.argmax(L + G_group, axis=1)
    return X[np.arange(n), k]


grouped_draws = grouped_numpy(z, 100_000, rng)
print(goodness_of_fit(grouped_draws, p))
assert goodness_of_fit(grouped_draws, p).passed

fig, ax = canvas(10, 3.4)
out = box(ax, 0.5, 0.88, "token = X_k*,   k* = argmax_k (L_k + G'_k)   (group noise G', stream 1)", color="C3")
for k, g in enumerate(GROUPS):
    xk = 0.1 + 0.8 * k / (len(GROUPS) - 1)
    node = box(ax, xk, 0.5, f"group {k}\nL_{k} = {L[k]:.2f}\nX_{k} = argmax (z + G)", color="C0")
    arrow(ax, node, out)
    leaves = box(ax, xk, 0.1, f"tokens {g[0]}..{g[-1]}", color="C2")
    arrow(ax, leaves, node, text="token noise G")
ax.set_title("the grouped rule: every group summarized by (L_k, X_k); one draw over the groups", fontsize=10)
plt.show()

# %% [markdown]
# ## 3. The fused argmax is the grouped rule with $G'_k = M_k - L_k$
#
# Notebook 1's fused sampler takes the global argmax.  Group its tokens: the global winner is the winner of the
# group with the largest maximum $M_k$, and $M_k = L_k + (M_k - L_k)$.  So the fused sampler *is* the grouped rule
# with the group noise $G'_k := M_k - L_k$, draw by draw.  By max-stability (section 1) these $G'_k$ are standard
# Gumbel (a), independent of the local samples $X_k$ (c) and of each other (d): exactly what section 2's proof
# assumed of fresh noise.  This is where max-stability carries weight: it explains why the per-tile maxima of
# notebook 1 may be compared directly, and why the grouped rule, with fresh noise instead, has the same law.
#
# Checks: pathwise identity with the flat argmax on every draw; $G'_k$ Gumbel; $G'_k$ independent of $X_k$.

# %%
n_link = 40_000
G = rng.gumbel(size=(n_link, V))
flat = np.argmax(z + G, axis=1)
X = np.stack([g[np.argmax(z[g] + G[:, g], axis=1)] for g in GROUPS], axis=1)
M = np.stack([(z[g] + G[:, g]).max(axis=1) for g in GROUPS], axis=1)
finite_groups = np.flatnonzero(np.isfinite(L))
G_link = M[:, finite_groups] - L[finite_groups]
grouped_with_link = X[np.arange(n_link), finite_groups[np.argmax(L[finite_groups] + G_link, axis=1)]]
print(f"grouped rule with G'_k = M_k - L_k == flat argmax on all {n_link} draws:",
      bool(np.array_equal(grouped_with_link, flat)))  # fmt: skip
assert np.array_equal(grouped_with_link, flat)
k = 1  # a group to look at
gk = GROUPS[k]
res_gumbel = gumbel_max_test(G_link[:, list(finite_groups).index(k)], loc=0.0)
low = G_link[:, list(finite_groups).index(k)] <= 0.0
res_indep = homogeneity_test(X[low, k] - gk[0], X[~low, k] - gk[0], gk.size)
print(f"G'_{k} ~ Gumbel(0, 1)          {res_gumbel.summary()}")
print(f"X_{k} independent of G'_{k}     {res_indep.summary()}")
assert res_gumbel.passed and res_indep.passed

# %% [markdown]
# ## 4. Why the group noise must be fresh
#
# The proof of section 2 used independence of $G'$ from the token noise.  Reuse token noise as group noise —
# here $G'_k = G_k$, the noise of token $k$, which is what happens when the group draw reads the token stream at
# counter $k$ — and the chain rule no longer applies.  Smallest case: four equal logits, groups $\{0, 1\}$ and
# $\{2, 3\}$.  Group 0 is chosen when $G_0 > G_1$, which is also when token 0 wins group 0: token 0 comes out
# with probability $P(G_0 > G_1) = 1/2$ instead of $1/4$, and token 1 never.  The library draws the group noise
# from its own random stream, `STREAM_GROUP` (stream 1 of the counter (group's first index, row, sample,
# stream); notebook 1, section 7), so no token's numbers are ever reused.


# %%
def four_token_bug(n: int, rng: np.random.Generator) -> np.ndarray:
    """Groups {0,1}, {2,3}, equal logits, G'_k = G_k (token noise reused)."""
    G = rng.gumbel(size=(n, 4))
    X = np.where(G[:, 0] > G[:, 1], 0, 1), np.where(G[:, 2] > G[:, 3], 2, 3)
    k = np.argmax(np.log(2.0) + G[:, :2], axis=1)  # L_0 = L_1 = log 2
    return np.where(k == 0, X[0], X[1])


bug_draws = four_token_bug(40_000, rng)
print("frequencies with reused noise:", np.round(np.bincount(bug_draws, minlength=4) / bug_draws.size, 3))
print(goodness_of_fit(bug_draws, np.full(4, 0.25)).summary())
reused = grouped_numpy(z, 100_000, rng, group_noise="reused")
print("the same bug on the 300 tokens:", goodness_of_fit(reused, p).summary())
assert not goodness_of_fit(bug_draws, np.full(4, 0.25)).passed and not goodness_of_fit(reused, p).passed

# %% [markdown]
# ## 5. The library
#
# `flashsampling.sample_grouped_from_logits` (and `sample_grouped` on `hidden`, `weight`) runs stage 1 with
# `return_lse`: stage 1's option to compute, besides each tile's candidate, the tile's log-mass (the log-sum-exp
# of its scaled float32 logits).  A small combine kernel adds the tiles of a group in float64, draws the group with
# `STREAM_GROUP` noise (computed in float64 from 64 random bits) and returns $X_{k^*}$.  The groups are the tiles by
# default; `group_sizes` gives any consecutive groups.  `return_logsumexp=True` also returns each row's
# $\log Z = \log\sum_i e^{z_i/T}$.  `grouped_sampler_np` replays the rule in NumPy with the kernel's noise (the twin
# of the combine), evaluating token noise only inside the chosen group, so it affords $10^5$ draws.
#
# Pathwise the grouped tokens differ from the fused ones (different noise picks the group); the law is the same.

# %%
B, S, SEED = 64, 32, 99
logits = torch.from_numpy(z32).expand(B, V).contiguous().to(DEVICE)
t = time.perf_counter()
kernel_grouped, lse = flashsampling.sample_grouped_from_logits(
    logits, seed=SEED, num_samples=S, group_sizes=np.diff(EDGES).tolist(), return_logsumexp=True, block_b=BLOCK_B
)
print(f"grouped kernel: {B * S} draws in {time.perf_counter() - t:.1f} s [machine]")
print(f"return_logsumexp: log Z = {lse[0].item():.6f}; float64 reference {logsumexp(z):.6f}")
assert abs(lse[0].item() - logsumexp(z)) < 1e-5
twin_row0 = grouped_sampler_np(z32, 1.0, S, SEED, group_sizes=np.diff(EDGES).tolist())
differ = int((kernel_grouped[0].cpu().numpy() != twin_row0).sum())
# The kernel adds float32 tile log-masses, the replay takes float64 ones: a draw can differ only when the group
# noise puts it within that rounding (~1e-7) of a tie between groups.
print(f"row 0: kernel vs NumPy replay: {differ} of {S} samples differ")
assert differ <= 1
fused = flashsampling.sample_from_logits(logits, seed=SEED, num_samples=S)
print(f"grouped == fused tokens for {(kernel_grouped == fused).float().mean():.0%} of the draws (the same law):")
print("  kernel:", goodness_of_fit(kernel_grouped.cpu().numpy().ravel(), p).summary())
t = time.perf_counter()
grouped_twin = grouped_sampler_np(z32, 1.0, 200_000, SEED + 1, group_size=64)
print(f"grouped_sampler_np: 200000 draws (tiles of 64) in {time.perf_counter() - t:.1f} s [machine]")
print("  replay:", goodness_of_fit(grouped_twin, p).summary())
assert goodness_of_fit(kernel_grouped.cpu().numpy().ravel(), p).passed and goodness_of_fit(grouped_twin, p).passed

# %% [markdown]
# ## A picture: every variant against the softmax
#
# Standardized residuals $(O_i - E_i)/\sqrt{E_i}$ per token (masked tokens omitted).  An exact sampler gives
# residuals of standard-normal size everywhere (the axes are cut at 8); the reused-noise bug stands out at the
# tokens whose noise it reuses.

# %%
panels = {
    "grouped, fresh NumPy noise": grouped_draws,
    "grouped, G' = M - L (the fused sampler)": grouped_numpy(z, 100_000, rng, group_noise="max"),
    "grouped, reused noise (bug)": reused,
    "grouped, kernel noise (replay)": grouped_twin,
}
finite = np.flatnonzero(np.isfinite(z))
fig, axes = plt.subplots(len(panels), 1, figsize=(11, 7.5), sharex=True, sharey=True)
for ax, (name, draws) in zip(axes, panels.items()):
    expected = draws.size * p[finite]
    resid = (np.bincount(draws, minlength=V)[finite] - expected) / np.sqrt(expected)
    ax.bar(finite, resid, width=1.0, color="C3" if "bug" in name else "C0")
    ax.axhline(0, color="k", lw=0.5)
    for y in (-4, 4):
        ax.axhline(y, color="grey", lw=0.5, ls="--")
    ax.set_title(f"{name} (n = {draws.size}): largest |residual| {np.abs(resid).max():.1f}", fontsize=9)
axes[-1].set_xlabel("token")
axes[len(panels) // 2].set_ylabel("(O - E) / sqrt(E)")
axes[0].set_ylim(-8, 8)
fig.tight_layout()
plt.show()
print(f"notebook run time: {time.perf_counter() - T0:.1f} s [machine]")
