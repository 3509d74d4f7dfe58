# %% [markdown]
# # 5. Finite precision: what the shipped sampler actually samples
#
# **Motivation.** Notebooks 1-4 proved the samplers exact for real numbers.  The kernel computes in float32 with
# random numbers made of bits, and differs from the mathematics in four places:
#
# 1. the noise comes from 64 random bits: a grid of $2^{64}$ uniforms, with a largest and a smallest value;
# 2. the score $\mathrm{fl}(\mu_i + G_i)$ is rounded to float32, whose spacing grows with the size of the top score;
#    exact ties are broken by the 31-bit random key (notebook 1, section 5);
# 3. $E = -\log U$ and $G = -\log E$ are computed in float32;
# 4. the logits themselves are float32: the kernel's target is the softmax of $\mu = \mathrm{fl}(z \cdot
#    \mathrm{fl}(1/T))$, the scaled logits it actually holds.
#
# `proofs/finite_precision.md` proves one end-to-end theorem for 1 and 2 together (grid, rounding and keys), with a
# condition on the top scaled logit $|\max_i \mu_i|$, and bounds or computes 3 and 4 as separate lines of a budget.
# This notebook follows it: every number it quotes from the proofs is *read* from `proofs/results/*.json` (what the
# proofs' checks recorded), so it follows the proofs as they are revised; a missing number stops it with the key's
# name.  Everything else is computed here.  Sections: 1. the budget; 2. score rounding against the offset of the
# logits; 3. the shipped sampler failing a test where rounding is large; 4. the float32 noise arithmetic;
# 5. float32 logits; 6. the noise grid and the tokens short generators starve; 7. a test that sees the starvation.
# Lines that end in `[machine]` depend on the machine.

# %%
import json
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
from flashsampling.noise import MAX_NOISE, exponential_exact, exponential_from_bits_np, gumbel_from_bits_np  # noqa: E402
from flashsampling.reference import softmax  # noqa: E402
from flashsampling.twin import sample_twin, sample_twin_many  # noqa: E402
from verification import goodness_of_fit, tail_mask, tail_mass_test  # noqa: E402

DEVICE = "cpu" if flashsampling.INTERPRET else "cuda"
print(f"kernels: {'Triton interpreter on the CPU' if flashsampling.INTERPRET else 'compiled, CUDA'} [machine]")
T0 = time.perf_counter()
RESULTS = ROOT / "proofs" / "results"
READ: list[str] = []  # every number taken from the proofs, as "file: key/path"


def from_proofs(name: str, *path):
    """The value at ``path`` in ``proofs/results/<name>.json``; a missing file or key raises, naming it."""
    file = RESULTS / f"{name}.json"
    if not file.is_file():
        raise FileNotFoundError(f"proofs/results/{name}.json is missing (written by proofs/check_*.py --write)")
    node = json.loads(file.read_text())
    for i, key in enumerate(path):
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            where = "/".join(map(str, path[: i + 1]))
            raise KeyError(f"proofs/results/{name}.json has no key {where!r}: the proofs changed; update "
                           "notebooks/05_finite_precision.py") from None  # fmt: skip
    READ.append(f"{name}.json: {'/'.join(map(str, path))}")
    return node


def rows_by(name: str, path: tuple, field: str) -> dict:
    """A list of records in ``proofs/results/<name>.json`` at ``path``, keyed by ``field`` (each must have it)."""
    rows = from_proofs(name, *path)
    missing = [i for i, r in enumerate(rows) if field not in r]
    if missing:
        raise KeyError(f"proofs/results/{name}.json: {'/'.join(path)}[{missing[0]}] has no key {field!r}")
    return {r[field]: r for r in rows}


# %% [markdown]
# ## 1. The budget, from the proofs
#
# Notation: $\mu$ the scaled logits the noise is added to, $V'$ the number of finite ones, and $h = 2^{a-24}$ the
# float32 spacing bound of numbers below $2^a$ in magnitude.  The end-to-end theorem: if $|\max_i \mu_i| \le 2^a - 64$
# (for the $a$ of the proofs' table), the token's law is within total variation
#
# $$ \underbrace{V'/2^{64}}_{\text{noise grid}} + \underbrace{R(h)}_{\text{score rounding}, O(h^2)}
#    + \underbrace{2^{-32} h}_{\text{tie keys}} + \text{(a tail term)} $$
#
# of $\mathrm{softmax}(\mu)$, with exact arithmetic of $E$ and $G$; $R$ is the proofs' rounding bound.
# The float32 arithmetic of the noise and the float32 logits are separate lines.  Set `TOP_SCORE`, the largest
# $|\mu_i|$ you expect (the table's first entry covers $|\max \mu| \le 2^7 - 64 = 64$).

# %%
TOP_SCORE = 30.0
theorem = rows_by("float32_scores", ("combined",), "a")
covering = [a for a in sorted(theorem) if abs(TOP_SCORE) <= 2.0**a - 64]
if not covering:
    raise ValueError(f"TOP_SCORE={TOP_SCORE} is beyond the theorem's table (|max mu| <= 2^{max(theorem)} - 64)")
a = covering[0]
row = theorem[a]
V_prime = round(from_proofs("float32_scores", "combined", 0, "grid") * 2.0**64)  # V' of the table
D_G = from_proofs("second_level", "kolmogorov", "D_G")
budget = {
    f"64-bit noise grid, V' = 2^{np.log2(V_prime):.0f}": (row["grid"], "proved"),
    f"float32 score rounding, h = 2^{np.log2(row['h']):.0f}": (row["rounding"], "proved"),
    "tie keys (31 random bits)": (row["keys"], "proved"),
    "tail term": (row["tails"], "proved"),
    "end-to-end theorem, total": (row["total"], "proved"),
    "float32 noise arithmetic, first order": (
        from_proofs("float32_noise", "first_order", "tv"),
        "computed over all 2^64 grid points",
    ),  # fmt: skip
    "float32 noise arithmetic, 2 V' D_G": (2 * V_prime * D_G, "proved, weak for a vocabulary"),
    "float32 logits: fp32 accumulation, D = 4096, T = 1": (
        from_proofs("float32_scores", "fp32_logits", "1.0", "tv"),
        "measured by the proofs' check",
    ),  # fmt: skip
    "float32 logits: z * fl(1/T), T = 0.7": (
        rows_by("float32_scores", ("temperature",), "t")[0.7]["tv"],
        "measured by the proofs' check",
    ),  # fmt: skip
}
print(f"|max mu| <= {TOP_SCORE:g} <= 2^{a} - 64:")
for term, (value, kind) in budget.items():
    print(f"  {term:52s} {value:9.1e}   {kind}")
sampler_terms = {k: v for k, (v, kind) in budget.items() if "total" not in k and "2 V'" not in k}
largest = max(sampler_terms, key=sampler_terms.get)
own = {k: v for k, v in sampler_terms.items() if "logits" not in k}  # the sampler's, not the target's
print(f"largest term: {largest}; of the sampler's own terms: {max(own, key=own.get)}")
first_order = budget["float32 noise arithmetic, first order"][0]
above = [b for b in sorted(theorem) if theorem[b]["rounding"] > first_order]
if above:
    below = [b for b in sorted(theorem) if b < above[0]]
    print(f"the rounding bound exceeds the first-order noise arithmetic in the table's entries from "
          f"|max mu| <= 2^{above[0]} - 64 on ({theorem[above[0]]['rounding']:.1e}); "
          + (f"at 2^{below[-1]} - 64 it is {theorem[below[-1]]['rounding']:.1e}" if below else ""))  # fmt: skip

# %% [markdown]
# ## 2. Score rounding grows with the offset of the logits
#
# **Worked example.** Two tokens with logits $c$ and $c - d$.  Softmax does not care about $c$; float32 does.  Near
# $c$ the float32 numbers are $h \approx c \cdot 2^{-23}$ apart, and each real score $c + G$ is rounded to the
# nearest: it falls in a *bucket* of width $h$.  When both scores fall in the same bucket they tie and the random key
# picks one uniformly, where real arithmetic would have picked the higher.  With continuous noise the law of the
# rounded sampler is a sum over buckets $B$:
#
# $$ P_R(\text{token } 0) = \sum_B P(S_0 \in B)\,\big[P(S_1 < B) + \tfrac12 P(S_1 \in B)\big], \qquad S_0 = c + G_0,\
#    S_1 = c - d + G_1, $$
#
# computed below exactly over every float32 bucket the scores can reach (each term from `expm1`, so the tiny
# differences survive).  First-order effects cancel (a tie is as likely to be decided either way), so the TV is of
# order $h^2$: the printed TV/$h^2$ stays constant while $h$ grows by $2^{16}$.  The plot puts it next to the
# theorem's bound (a step function of $a$) and the other lines of the budget.  Change `GAP` and rerun.

# %%
GAP = 1.0
EXPONENTS = range(7, 24)  # offsets c = 2^7 .. 2^23


def rounded_law(offset: float, gap: float, below: float = 4.5, above: float = 32.0) -> float:
    """P_R(token 0) for logits (offset, offset - gap), continuous Gumbel noise, float32-rounded scores, ties uniform.

    The buckets cover the scores from ``offset - gap - below`` to ``offset + above``; below, a score has probability
    < exp(-e^4.5) ~ 1e-39, and above it the two scores are compared without rounding (their tie there has
    probability < e^-32 * h).
    """
    lo, hi = np.float32(offset - gap - below), np.float32(offset + above)
    values = np.arange(lo.view(np.int32), hi.view(np.int32) + 1, dtype=np.int32).view(np.float32).astype(np.float64)
    edges = (values[:-1] + values[1:]) / 2  # round to nearest: bucket boundaries halfway between float32 values
    left, width = edges[:-1], np.diff(edges)

    def bucket_mass(mu: float) -> tuple[np.ndarray, np.ndarray]:
        """P(mu + G in [left, left + width)) and P(mu + G < left), accurately."""
        t_left = np.exp(mu - left)
        below_left = np.exp(-t_left)
        inside = np.exp(-t_left * np.exp(-width)) * -np.expm1(-t_left * -np.expm1(-width))
        return inside, below_left

    in0, _ = bucket_mass(offset)
    in1, below1 = bucket_mass(offset - gap)
    p0 = 1.0 / (1.0 + np.exp(-gap))
    above_range = p0 * -np.expm1(-np.exp(offset - edges[-1]) * (1 + np.exp(-gap)))  # the larger score above the range
    return float(np.sum(in0 * (below1 + 0.5 * in1)) + above_range)


t = time.perf_counter()
p0_exact = 1.0 / (1.0 + np.exp(-GAP))
offsets = np.array([2.0**k for k in EXPONENTS])
tv_rounding = np.array([abs(rounded_law(c, GAP) - p0_exact) for c in offsets])
spacing = np.array([np.spacing(np.float32(c)) for c in offsets], dtype=np.float64)
print(f"exact rounded laws at {offsets.size} offsets in {time.perf_counter() - t:.1f} s [machine]")
print("offset c   float32 spacing h     TV       TV / h^2   theorem's bound (a)")
for c, h, tv in zip(offsets, spacing, tv_rounding):
    a_c = min((b for b in theorem if c <= 2.0**b - 64), default=None)
    bound = f"{theorem[a_c]['total']:9.1e} ({a_c})" if a_c else "   beyond the table"
    print(f"2^{np.log2(c):<4.0f} {h:12.2e} {tv:14.2e} {tv / h**2:10.4f}   {bound}")
    if a_c:
        assert tv <= theorem[a_c]["total"]

fig, ax = plt.subplots(figsize=(9, 4.2))
ax.plot(offsets, tv_rounding, "C0o-", ms=4, label=f"exact TV, logits (c, c - {GAP:g}), rounded scores")
steps = sorted(theorem)
ax.step([2.0**5] + [2.0**b - 64 for b in steps], [theorem[steps[0]]["total"]] + [theorem[b]["total"] for b in steps],
        "C3", where="pre",
        label="end-to-end theorem (bound), |max mu| <= 2^a - 64")  # fmt: skip
lines = {
    "float32 noise arithmetic (first order)": budget["float32 noise arithmetic, first order"][0],
    "float32 logits (fp32 accumulation example)": budget["float32 logits: fp32 accumulation, D = 4096, T = 1"][0],
    f"64-bit grid, V' = 2^{np.log2(V_prime):.0f}": row["grid"],
}
for (name, value), color in zip(lines.items(), ("C1", "C2", "C4")):
    ax.axhline(value, color=color, ls="--", lw=1, label=name)
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("offset of the logits c = |max mu|")
ax.set_ylabel("total variation to softmax")
ax.set_title("softmax is shift invariant, float32 is not")
ax.legend(fontsize=7.5, loc="upper left")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 3. Seeing it: the shipped sampler at a large offset
#
# At `OFFSET` $= 2^{23}$ (beyond the theorem's table, float32 spacing 1 at the top) the rounding costs the TV in the
# last row of the table above, enough for a chi-square test to see in $2 \times 10^6$ draws.  The shipped
# sampler's NumPy twin (equal to the kernel, checked on a batch below) must then *fail* against the softmax and
# *pass* against the rounded law $P_R$ computed above: the computation predicts the sampler.

# %%
OFFSET = 2.0**23
n_offset = 2_000_000
pair = np.array([OFFSET, OFFSET - GAP], dtype=np.float32)
P_R = rounded_law(OFFSET, GAP)
draws = sample_twin_many(pair, 1.0, seed=17, num_samples=n_offset, chunk_elements=1 << 20)
vs_softmax = goodness_of_fit(draws, softmax(pair.astype(np.float64)))
vs_rounded = goodness_of_fit(draws, np.array([P_R, 1 - P_R]))
print(f"P(token 0): softmax {p0_exact:.5f}, rounded law {P_R:.5f} (TV {abs(P_R - p0_exact):.1e}), "
      f"twin {np.mean(draws == 0):.5f}")  # fmt: skip
print("against softmax    :", vs_softmax.summary())
print("against rounded law:", vs_rounded.summary())
assert not vs_softmax.passed and vs_rounded.passed
kernel = flashsampling.sample_from_logits(torch.from_numpy(pair).expand(64, 2).contiguous().to(DEVICE), seed=17,
                                          num_samples=16).cpu().numpy()  # fmt: skip
twin = sample_twin(np.broadcast_to(pair, (64, 2)), 1.0, seed=17, num_samples=16)
print(f"kernel == twin on 64 rows x 16 samples at this offset: {np.array_equal(kernel, twin)} [machine]")
assert np.array_equal(kernel, twin) or not flashsampling.INTERPRET  # compiled: the last bit of log may differ

# %% [markdown]
# ## 4. The float32 arithmetic of the noise
#
# The kernel forms $U$ from its 64 bits and computes $E = -\log U$, $G = -\log E$ in float32 (from the accurate side of
# $U$: notebook 1, section 7).  The proofs scan **all** $2^{64}$ grid points (by classes of equal float32 value) and
# record the largest error of $G$ relative to $2^{-22}(1 + |G|)$.  A million random bit patterns here must stay below
# that maximum.  The error's *local mean* drifts slowly with $g$ (NumPy's float32 logarithm is slightly biased), which
# acts like a tiny change of temperature; the proofs compute its first-order effect on the law over every grid point
# (the budget's line).  The GPU's logarithm is a different function: its numbers come from the GPU.

# %%
noise_rng = np.random.default_rng(0)
w0, w1 = noise_rng.integers(0, 2**32, size=(2, 1_000_000), dtype=np.uint64).astype(np.uint32)
g32 = gumbel_from_bits_np(w0, w1).astype(np.float64)
g_exact = -np.log(exponential_exact(w0, w1))
ratio = np.abs(g32 - g_exact) / (2.0**-22 * (1 + np.abs(g_exact)))
exhaustive = from_proofs("float32_noise", "exhaustive", "g_ratio_max")
print(f"max |G_float32 - G| / (2^-22 (1 + |G|)): {ratio.max():.3f} on 10^6 random words; "
      f"{exhaustive:.3f} over all 2^64 grid points (proofs)")  # fmt: skip
assert ratio.max() <= exhaustive
local_mean = from_proofs("float32_noise", "local_mean")
g_points = np.array(sorted(local_mean, key=float), dtype=float)
fig, ax = plt.subplots(figsize=(8, 3))
ax.plot(g_points, [local_mean[k] for k in sorted(local_mean, key=float)], "C1o-")
ax.axhline(0, color="k", lw=0.5)
ax.set_xlabel("g (noise value)")
ax.set_ylabel("local mean error m(g)")
ax.set_title("the float32 noise error averages to a slow drift (proofs, all 2^64 points)")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 5. Float32 logits: a change of the target
#
# **A lemma of the proofs** (`finite_precision.md`, float32 logits).  If every logit moves by $e_i$, the softmax moves
# by at most $\tanh((\max e - \min e)/4)$ in total variation.  The kernel holds $\mu = \mathrm{fl}(z \cdot
# \mathrm{fl}(1/T))$, three roundings away from $z/T$; and its $z$ is a float32 matmul.  These change the target itself
# (any float32 softmax shares them), not the sampling.  Checked on one row: the TV between the softmax of $z/T$ in
# float64 and of the kernel's $\mu$, against the lemma's bound.  The proofs' measured values are the budget's last
# lines.

# %%
row_rng = np.random.default_rng(1)
z_row = row_rng.normal(0.0, 4.0, 32_000)
T = 0.7
mu32 = (z_row.astype(np.float32) * (np.float32(1.0) / np.float32(T))).astype(np.float32).astype(np.float64)
e = mu32 - z_row / T
tv_logits = 0.5 * np.abs(softmax(mu32) - softmax(z_row / T)).sum()
bound = np.tanh((e.max() - e.min()) / 4)
print(f"T = {T}: TV(softmax(z/T), softmax(mu)) = {tv_logits:.2e} <= tanh(range(e)/4) = {bound:.2e}")
assert tv_logits <= bound

# %% [markdown]
# ## 6. The noise grid, and the tokens short generators starve
#
# A *grid generator* with $b$ random bits draws $k$ uniform on $\{0, \dots, 2^b - 1\}$ and sets $U = (k + \theta)/2^b$,
# $G = -\log(-\log U)$.  Its noise has a largest value $G_{\max}$ and a smallest $G_{\min}$ (for $k \ge 1$):
#
# * 24-bit, $U = k\,2^{-24}$ ($\theta = 0$; a float32 uniform in $[0, 1)$): $G_{\max} = -\log(-\log(1 - 2^{-24}))$;
# * 31-bit, $U = k\,2^{-31}$ (generators built on 31-bit integers);
# * ours: $U = (k + \frac12)/2^{64}$, $G \in [-\log(65 \log 2), 65 \log 2 + \ldots]$, computed from the accurate side.
#
# A token more than $G_{\max} - G_{\min}$ nats below the top token can beat it **only if the top token's noise is
# $-\infty$**, which the $\theta = 0$ generators produce when $k = 0$ ($U = 0$, probability $2^{-b}$); ours never does.
# So beyond that gap a short generator gives a tail exactly $2^{-b}$, whatever its softmax mass: too little where the
# tail is heavier, too much where it is lighter.  Caps, closed form against the proofs' recorded values:

# %%
caps = {}
for b in (24, 31):
    g_max, g_min = -np.log(-np.log1p(-(2.0**-b))), -np.log(b * np.log(2.0))  # k = 2^b - 1 and k = 1
    caps[f"{b}-bit"] = (g_min, g_max)
ones, zeros = np.array([0xFFFFFFFF], dtype=np.uint32), np.array([0], dtype=np.uint32)
caps["ours"] = (-np.log(exponential_from_bits_np(zeros, zeros))[0], -np.log(exponential_from_bits_np(ones, ones))[0])
recorded = from_proofs("grid_noise", "caps")
for (name, (g_min, g_max)), rec in zip(caps.items(), recorded):
    print(f"{name:7s}: noise in [{g_min:.4f}, {g_max:.4f}], never wins below the top by {g_max - g_min:.2f} nats "
          f"(proofs: '{rec['name']}', {rec['gap']:.2f})")  # fmt: skip
    assert abs(g_max - g_min - rec["gap"]) < 1e-5
print(f"ours: MAX_NOISE = 65 log 2 = {MAX_NOISE:.4f}")

# %% [markdown]
# **The exact tail mass.** One top token at 0 and $n$ tail tokens at $-\Delta$ ($a = e^{-\Delta}$).  Given the top's
# grid point $k \ge 1$, a tail token beats it iff its $u_m > u_k^{a}$, i.e. iff $m$ is one of the
# $c(k) = 2^b - 1 - \lfloor 2^b (k/2^b)^a \rfloor$ top grid points; so
#
# $$ P(\text{tail wins}) = 2^{-b}\Big[1 + \sum_{k \ge 1} \big(1 - (1 - c(k)/2^b)^n\big)\Big], $$
#
# the 1 being the top token's $k = 0$.  Grouping the $k$ by $c(k)$ makes it a short sum (about $2^b a \log 2^b$ terms).
# It reproduces the proofs' recorded values (checked below).  For our generator the sum is $2^{64}$-long; the proofs
# computed it where it is short (from 36 nats) and bound it by $V'/2^{64}$ elsewhere: those recorded values are plotted.
# Set `N_TAIL`.

# %%
N_TAIL = 1 << 17


def tail_win_probability(gap: float, n: int, bits: int) -> float:
    """Exact P(a tail token wins) for logits (0, -gap x n), grid generator U = k / 2^bits (theta = 0), float64."""
    M = 2.0**bits
    c_max = M - 1 - np.floor(M * np.exp(-np.exp(-gap) * np.log(M)))  # c(1): tail points above the lowest top
    c = np.arange(1, int(c_max) + 1, dtype=np.float64)
    k_below = np.clip(np.ceil(M * np.exp(np.exp(gap) * np.log1p(-c / M))) - 1, 0, M - 1)  # #{k >= 1 : c(k) >= c}
    step = np.exp(n * np.log1p(-(c - 1) / M)) * -np.expm1(-n * np.log1p(1 / (M - c)))  # (1-(c-1)/M)^n - (1-c/M)^n
    return float((1 + np.sum(k_below * step)) / M)


def softmax_tail(gap: float, n: int) -> float:
    return n * np.exp(-gap) / (1 + n * np.exp(-gap))


starved = from_proofs("grid_noise", "starved")  # recorded for 2^17 tail tokens
for gap_s, by_gen in starved.items():
    for name in ("24-bit", "31-bit"):
        mine = tail_win_probability(float(gap_s), 1 << 17, int(name[:2]))
        assert abs(mine - by_gen[name]["grid"]) <= 1e-12 * by_gen[name]["grid"], (gap_s, name)
print(f"tail_win_probability reproduces the proofs' {2 * len(starved)} recorded tail masses (2^17 tail tokens)")
for name, (g_min, g_max) in list(caps.items())[:2]:
    beyond = g_max - g_min + 0.5
    tail = tail_win_probability(beyond, N_TAIL, int(name[:2]))
    print(f"{name}: at {beyond:.2f} nats (beyond the never-win gap) the tail gets {tail:.3e} = 2^-{name[:2]}; "
          f"softmax: {softmax_tail(beyond, N_TAIL):.3e}")  # fmt: skip
    assert tail == 2.0 ** -int(name[:2])

t = time.perf_counter()
curves = {}
for name, gaps in (("24-bit", np.arange(8.0, 32.0, 0.1)), ("31-bit", np.arange(12.0, 36.0, 0.1))):
    curves[name] = (gaps, np.array([tail_win_probability(g, N_TAIL, int(name[:2])) for g in gaps]))
n_gaps = sum(g.size for g, _ in curves.values())
print(f"exact tail masses at {n_gaps} gaps in {time.perf_counter() - t:.1f} s [machine]")
profile = from_proofs("grid_noise", "gap_profile")  # ours, n = 2^18 tail tokens, from 36 nats
print("gap at which the tail keeps only   99%     50%      1% of its softmax mass")
for name, (gaps, mass) in curves.items():
    r = mass / np.array([softmax_tail(g, N_TAIL) for g in gaps])
    print(f"  {name:7s}" + "".join(f"{gaps[np.argmax(r < level)]:8.2f}" for level in (0.99, 0.5, 0.01)))
worst = {name: max(abs(m - softmax_tail(g, N_TAIL)) for g, m in zip(*curve)) for name, curve in curves.items()}
worst_ours = from_proofs("grid_noise", "tv_scan", "262144")[0]
print("largest TV over the gaps: " + ", ".join(f"{k} {v:.1e}" for k, v in worst.items())
      + f"; ours (proofs, n = 2^18) {worst_ours:.1e}")  # fmt: skip

fig, ax = plt.subplots(figsize=(9, 4))
for (name, (gaps, mass)), color in zip(curves.items(), ("C3", "C1")):
    ax.plot(gaps, mass / [softmax_tail(g, N_TAIL) for g in gaps], color=color, label=name)
    ax.axvline(caps[name][1] - caps[name][0], color=color, ls=":", lw=1)
ax.plot([p_["gap"] for p_ in profile], [max(p_["grid"] / p_["softmax"], 1e-9) for p_ in profile], "C0o-", ms=3,
        label="ours (proofs' exact values, 2^18 tail tokens)")  # fmt: skip
ax.plot([8, 36], [1, 1], "C0--", lw=1, label="ours: within V'/2^64 of softmax (proved)")
ax.axvline(caps["ours"][1] - caps["ours"][0], color="C0", ls=":", lw=1)
ax.set_yscale("log")
ax.set_ylim(1e-9, 1e3)
ax.set_xlabel("gap below the top token (nats)")
ax.set_ylabel("tail mass / softmax tail mass")
ax.set_title(f"one top token and {N_TAIL} tail tokens; dotted: never-win gaps")
ax.annotate("beyond the never-win gap only the top token's\nU = 0 (G = -inf) lets the tail win: mass 2^-b",
            xy=(30, 5), xytext=(17, 60), fontsize=8, arrowprops={"arrowstyle": "->"})  # fmt: skip
ax.legend(loc="lower left", fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 7. A test that sees the starvation
#
# `verification.tail_mass_test` counts the draws that land in a declared tail set and compares the count with
# $\mathrm{Binomial}(n, p_T)$ exactly; one-sided, it fails when the tail is drawn too rarely (false-alarm rate
# `alpha = 1e-6`).  Full starvation is caught once $(1 - p_T)^n \le \alpha$, i.e. $n \ge \log\alpha / \log(1 - p_T)$.
#
# Drawing $n$ samples over $2^{17} + 1$ tokens directly costs $n 2^{17}$ noise values.  The trick: the tail tokens
# are exchangeable and only the *largest* tail grid index matters; the largest of $N$ uniform indices has
# distribution function $F^N$, so it is drawn by inverse CDF from one uniform $W$: $c = \lfloor 2^b (1 - W^{1/N})
# \rfloor$ grid points lie above it.  One draw then costs a few operations, and is exactly a draw of the Gumbel-max
# sampler with that generator: float64 $-\log(-\log(k/2^b))$ for the short generators, the shipped float32 noise of
# the 64-bit index (`exponential_from_bits_np`, bit for bit the kernel's in the interpreter) for ours.

# %%
GENERATORS = {"24-bit": 24, "31-bit": 31, "ours": 64}


def max_grid_index(rng: np.random.Generator, n: int, count: int, bits: int) -> np.ndarray:
    """``n`` draws of the largest of ``count`` iid uniform indices on {0, ..., 2**bits - 1}, as uint64."""
    w = rng.random(n)
    with np.errstate(divide="ignore"):
        c = np.floor(-(2.0**bits) * np.expm1(np.log(w) / count))
    c = np.minimum(c, 2.0**bits - 1).astype(np.uint64)
    return np.uint64(2**bits - 1) - c if bits == 64 else (2**bits - 1 - c.astype(np.int64)).astype(np.uint64)


def common_gumbel(k: np.ndarray, bits: int) -> np.ndarray:
    """G = -log(-log(k / 2**bits)) in float64 (k = 0 gives -inf)."""
    with np.errstate(divide="ignore"):
        return -np.log(-np.log(k.astype(np.float64) / 2.0**bits))


def ours_gumbel(k: np.ndarray) -> np.ndarray:
    """The shipped float32 noise of the 64-bit index k (words w1 = k >> 32, w0 = k mod 2**32)."""
    k = k.astype(np.uint64)
    w0 = (k & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    w1 = (k >> np.uint64(32)).astype(np.uint32)
    return (-np.log(exponential_from_bits_np(w0, w1))).astype(np.float32)


def two_level_sampler(generator: str, gap: float, n_tail: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """n Gumbel-max draws for logits (0, -gap, ..., -gap): token 0, or 1 + a uniform tail index."""
    bits = GENERATORS[generator]
    top_k = rng.integers(0, 2**bits, size=n, dtype=np.uint64)
    tail_k = max_grid_index(rng, n, n_tail, bits)
    if generator == "ours":
        tail_wins = (np.float32(-gap) + ours_gumbel(tail_k)).astype(np.float32) > ours_gumbel(top_k)
    else:
        tail_wins = -gap + common_gumbel(tail_k, bits) > common_gumbel(top_k, bits)
    return np.where(tail_wins, 1 + rng.integers(0, n_tail, size=n), 0)


rng = np.random.default_rng(3)
brute = rng.integers(0, 2**24, size=(4000, 500)).max(axis=1)
trick = max_grid_index(rng, 4000, 500, 24).astype(np.int64)
ks = stats.ks_2samp(brute, trick)
print(f"largest of 500 indices, inverse CDF against brute force: KS p = {ks.pvalue:.2f}")
assert ks.pvalue > 1e-6
for name, gap in (("24-bit", 17.25), ("31-bit", 21.25)):  # the simulation against its own exact law
    exact = tail_win_probability(gap, N_TAIL, GENERATORS[name])
    sim = two_level_sampler(name, gap, N_TAIL, 400_000, rng)
    q = np.r_[1 - exact, np.full(N_TAIL, exact / N_TAIL)]
    res = tail_mass_test(sim, q, np.arange(1, N_TAIL + 1), alternative="two-sided")
    print(f"{name} simulation at gap {gap}: tail frequency {res.observed_fraction:.3e}, exact {exact:.3e}; "
          f"two-sided p = {res.pvalue:.2f}")  # fmt: skip
    assert res.passed

# %% [markdown]
# Now the test against the *softmax*, at 20 nats (beyond the 24-bit generator's never-win gap) and at 23 nats.
# `min_detectable` is the relative deficit caught with probability 0.99.

# %%
results = {}
for gap, n in ((20.0, 1_000_000), (23.0, 3_000_000)):
    logits = np.r_[0.0, np.full(N_TAIL, -gap)]
    p = softmax(logits)
    tail = tail_mask(logits, gap=gap - 0.5)
    p_tail = p[tail].sum()
    print(f"gap {gap}: tail mass {p_tail:.3e}; full starvation is caught from n >= "
          f"{np.log(1e-6) / np.log1p(-p_tail):.0f} draws; we draw {n}")  # fmt: skip
    for name in GENERATORS:
        t = time.perf_counter()
        res = tail_mass_test(two_level_sampler(name, gap, N_TAIL, n, rng), p, tail)
        results[(name, gap)] = res
        print(f"   {name:7s} {res.verdict}: {int(res.statistic):6d} tail draws, expected {res.expected:7.1f}, "
              f"p = {res.pvalue:.1e}, detectable deficit {res.min_detectable:.0%}")  # fmt: skip
assert not results[("24-bit", 20.0)].passed and not results[("31-bit", 23.0)].passed
for gap in (20.0, 23.0):
    kept = tail_win_probability(gap, N_TAIL, 31) / softmax_tail(gap, N_TAIL)
    res = results[("31-bit", gap)]
    print(f"31-bit at {gap:g} nats: keeps {kept:.1%} of the tail, a deficit of {1 - kept:.1%} against the "
          f"{res.min_detectable:.0%} these draws detect: {res.verdict}")  # fmt: skip
assert results[("ours", 20.0)].passed and results[("ours", 23.0)].passed

fig, ax = plt.subplots(figsize=(8, 3.5))
for x, res in enumerate(results.values()):
    threshold = stats.binom.ppf(res.alpha, res.n, res.tail_mass) / res.expected  # fails at or below
    ratio = res.statistic / res.expected
    color = "C0" if res.passed else "C3"
    ax.bar(x, ratio, color=color, width=0.6)
    ax.hlines(threshold, x - 0.4, x + 0.4, color="k", lw=2, label="fails at or below" if x == 0 else None)
    ax.text(x, max(ratio, threshold) + 0.05, res.verdict, ha="center", color=color)
ax.axhline(1.0, color="k", lw=0.5, ls="--")
ax.set_xticks(range(len(results)), [f"{name}\ngap {gap:g}" for name, gap in results])
ax.set_ylim(0, 1.3)
ax.set_ylabel("tail draws / expected")
ax.set_title("one-sided tail-mass test against the softmax, alpha = 1e-6")
ax.legend(loc="upper right")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## The numbers this notebook read from the proofs

# %%
for key in dict.fromkeys(READ):
    print(key)
print(f"notebook run time: {time.perf_counter() - T0:.1f} s [machine]")
