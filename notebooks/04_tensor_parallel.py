# %% [markdown]
# # 4. Tensor parallel: the vocabulary split over processes, a few numbers exchanged
#
# **Motivation.** In a large model the LM-head weight $W$ (one row per vocabulary token) is split by rows over
# several GPUs.  Gathering the logits on one GPU would move `B * V` floats per step; the two combine rules here move
# a few numbers per row and sample, whatever `V`.
#
# **Words.**  Each cooperating process is a **rank** (numbered 0 to `world_size - 1`, usually one per GPU); together
# they form a *process group* (`torch.distributed`).  Rank $r$ holds the **shard** $S_r$, a contiguous range of
# vocabulary rows of $W$ (any sizes, one may be empty).  An **all-gather** is a collective call in which every rank
# contributes a tensor of the same shape and every rank receives all of them, in rank order.  The *backend* moves the
# bytes: **gloo** is PyTorch's CPU backend (host memory, TCP or shared memory), NCCL its GPU one.  Here the ranks are
# three processes on this machine joined by gloo; with a GPU each shard lives on it and gloo carries host copies of
# the few gathered numbers.
#
# What carries each rule: **pathwise** is the argmax decomposition of notebook 1 (section 6) with the shards as the
# parts; **factorized** is the grouped rule of notebook 2 with the shards as the groups.
# Sections: 1. pathwise by hand; 2. factorized by hand; 3. the ranks' exchange, pictured; 4. real ranks and the
# measured payload; 5. both rules at scale.  Proof: `proofs/tensor_parallel.md`.  Lines that end in `[machine]`
# depend on the machine; the other numbers are computed by the cell that prints them.

# %%
import subprocess
import sys
import tempfile
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
from flashsampling._tp_requests import MESSAGE_WORDS  # noqa: E402
from flashsampling.distributed import tp_factorized_sampler_np, tp_pathwise_sampler_np  # noqa: E402
from flashsampling.noise import group_noise_np, token_noise_np  # noqa: E402
from flashsampling.reference import softmax  # noqa: E402
from flashsampling.twin import sample_twin, sample_twin_many, select  # noqa: E402
from verification import goodness_of_fit  # noqa: E402

DEVICE = "cpu" if flashsampling.INTERPRET else "cuda"
warnings.filterwarnings("ignore", "divide by zero encountered in log", RuntimeWarning)
print(f"kernels: {'Triton interpreter on the CPU' if flashsampling.INTERPRET else 'compiled, CUDA'} [machine]")
T0 = time.perf_counter()
rng = np.random.default_rng(11)

V = 300
z32 = rng.normal(0.0, 1.5, V).astype(np.float32)
z32[rng.random(V) < 0.1] = -np.inf
p = softmax(z32.astype(np.float64))
SEED = 99
SHARDS = [120, 0, 180]  # three ranks' shard sizes (one empty); any sizes summing to V
STARTS = np.r_[0, np.cumsum(SHARDS)[:-1]].astype(int)
print(f"V = {V}, shards {SHARDS} starting at {STARTS.tolist()}")

# %% [markdown]
# ## 1. Pathwise, by hand
#
# Each rank perturbs its own logits with the token noise keyed by the **global** vocabulary index (notebook 1,
# section 7), so together the ranks hold exactly the scores one device would.  Each sends its local winner
# (score, key, index); every rank takes the greatest triple in the order (score, key, −index).  By the argmax
# decomposition that is the single-device token, draw by draw.  One row and sample, step by step:

# %%
row, sample = 0, 5
local = []
for r, (a, m) in enumerate(zip(STARTS, SHARDS)):
    if m == 0:
        print(f"rank {r}: empty shard; its candidate has score -inf and never wins")
        continue
    g, key = token_noise_np(SEED, row, np.arange(a, a + m, dtype=np.uint32), sample)  # global indices
    score = (z32[a : a + m] + g).astype(np.float32)
    j = select(score[None, :], key[None, :])[0]
    local.append((float(score[j]), int(key[j]), -int(a + j)))
    print(f"rank {r}: columns [{a}, {a + m}): winner index {a + j}, score {score[j]:.4f}, key {key[j]}")
pathwise_token = -max(local)[2]  # the greatest (score, key, -index)
single_device = sample_twin(z32[None, :], 1.0, seed=SEED, num_samples=sample + 1)[0, sample]
print(f"pathwise combine: {pathwise_token}; single-device token of the same (seed, row, sample): {single_device}")
assert pathwise_token == single_device

# %% [markdown]
# ## 2. Factorized, by hand
#
# Each rank sends its shard's log-mass $L_r$ and its local sample $X_r$; every rank draws the same group noise
# $G'_r$ from the shared seed — random stream 1, `STREAM_GROUP`, at the counter (shard start, row, sample, 1),
# computed in float64 — and takes $X_{r^*}$, $r^* = \arg\max_r (L_r + G'_r)$: the grouped rule of notebook 2 with the
# shards as groups.  An empty shard sends $L_r = -\infty$ and is never picked.

# %%
L_r = np.array([logsumexp(z32[a : a + m].astype(np.float64)) if m else -np.inf for a, m in zip(STARTS, SHARDS)])
G_group, _ = group_noise_np(SEED, row, STARTS.astype(np.uint32), sample)
print(" r  start   L_r      G'_r    L_r + G'_r")
for r in range(len(SHARDS)):
    print(f"{r:2d} {STARTS[r]:6d} {L_r[r]:7.3f} {G_group[r]:8.3f} {L_r[r] + G_group[r]:11.3f}")
r_star = int(np.argmax(L_r + G_group))
print(f"r* = {r_star}: the token is rank {r_star}'s local sample")
# An empty shard starts where the next one does, so both read the same group noise; L = -inf makes it irrelevant.

# %% [markdown]
# ## 3. The ranks' exchange, pictured
#
# Every rank runs the same program on its shard; the only communication is one all-gather of the request (so that
# every rank checks that all passed the same arguments, and settles the seed and the shard starts) and one of the
# candidates.  Every rank then holds the same table and computes the same tokens: nobody waits for a leader.

# %%
fig, ax = canvas(10, 4.2)
table = box(ax, 0.5, 0.5, "all-gather: every rank receives every rank's\n"
            "(L_r, flags, and per sample: score, key, index)", color="C3")  # fmt: skip
for r, (a, m) in enumerate(zip(STARTS, SHARDS)):
    x = 0.15 + 0.35 * r
    shard = box(ax, x, 0.88, f"rank {r}: shard [{a}, {a + m})\nstage 1 on its logits\n(noise by global index)")
    arrow(ax, shard, table, text=f"rank {r}'s candidates")
    out = box(ax, x, 0.1, f"rank {r}: combine\npathwise: greatest (score, key, -index)\nfactorized: argmax L_r + G'_r",
              color="C2")  # fmt: skip
    arrow(ax, table, out, text="the same table")
ax.set_title("tensor parallel: each rank samples its shard, one all-gather, every rank the same tokens", fontsize=10)
plt.show()

# %% [markdown]
# ## 4. Real ranks, and the bytes they exchange
#
# `flashsampling.sample_tp_from_logits(logits_shard, vocab_start=..., ...)` (and `sample_tp` on weight shards) does
# this over `torch.distributed`.  Below, `len(SHARDS)` processes (`notebooks/tp_ranks.py`) each own one shard, on the
# GPU when there is one.  Checks: every rank returns the same tokens; pathwise they equal `sample_from_logits` on the
# full logits and factorized they equal `sample_grouped_from_logits` with the shards as groups, bit for bit;
# `return_logsumexp=True` returns $\log Z$ (each rank's $L_r$ is gathered anyway).
#
# The payload is *measured*: each rank wraps `torch.distributed.all_gather` and records the size of every tensor the
# library hands to it.  Change `B_TP`, `S_TP` or `SHARDS` and rerun.

# %%
B_TP, S_TP = 4, 8
with tempfile.TemporaryDirectory() as tmp:
    work = Path(tmp)
    np.savez(work / "inputs.npz", logits=np.broadcast_to(z32, (B_TP, V)).copy(), shard_sizes=np.array(SHARDS),
             seed=SEED, num_samples=S_TP)  # fmt: skip
    t = time.perf_counter()
    ranks = [
        subprocess.Popen(
            [sys.executable, str(ROOT / "notebooks" / "tp_ranks.py"), str(r), str(len(SHARDS)), tmp],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        for r in range(len(SHARDS))
    ]
    logs = [proc.communicate(timeout=300)[0] for proc in ranks]
    if any(proc.returncode for proc in ranks):
        raise RuntimeError("a rank failed:\n" + "\n".join(logs))
    results = [dict(np.load(work / f"rank{r}.npz")) for r in range(len(SHARDS))]
print(f"{len(SHARDS)} ranks, process start included: {time.perf_counter() - t:.1f} s [machine]")

full = torch.from_numpy(z32).expand(B_TP, V).contiguous().to(DEVICE)
reference = {
    "pathwise": flashsampling.sample_from_logits(full, seed=SEED, num_samples=S_TP).cpu().numpy(),
    "factorized": flashsampling.sample_grouped_from_logits(full, seed=SEED, num_samples=S_TP, group_sizes=SHARDS)
    .cpu()
    .numpy(),
}
for combine, ref in reference.items():
    agree = all(np.array_equal(res[combine], results[0][combine]) for res in results)
    equal = np.array_equal(results[0][combine], ref)
    print(f"{combine:10s}: all ranks agree: {agree}; equal to the single-device reference: {equal}")
    assert agree and equal
print(f"return_logsumexp: log Z = {results[0]['logsumexp'][0]:.6f}; float64 reference "
      f"{logsumexp(z32.astype(np.float64)):.6f}")  # fmt: skip
assert abs(results[0]["logsumexp"][0] - logsumexp(z32.astype(np.float64))) < 1e-5

# %% [markdown]
# What each rank handed to `all_gather`, per call (element size x count).  The candidates' layout, read from the
# library (`flashsampling/distributed.py`, "Exchanges"): per row the log-mass (one float64) and the flags, and per row
# and sample the score, the key and the index, each widened to one int64 word, then a fixed tail saying how the rank's
# stage 1 ended (a status word and `MESSAGE_WORDS` = 32 words of its error message): $8 (B (2 + 3S) + 33)$ bytes.  The
# request header has a fixed length.  Neither depends on `V` or on the shard's size: the empty rank sends as much as
# the others.

# %%
for combine in ("pathwise", "factorized"):
    for r, res in enumerate(results):
        calls = [f"{size} B x {count}" for size, count in res[f"{combine}_gathers"]]
        total = int((res[f"{combine}_gathers"][:, 0] * res[f"{combine}_gathers"][:, 1]).sum())
        print(f"{combine:10s} rank {r} (shard of {SHARDS[r]:3d}): all_gather calls {calls} = {total} bytes")
measured = {tuple(map(tuple, res[f"{c}_gathers"])) for res in results for c in ("pathwise", "factorized")}
assert len(measured) == 1, "every rank and both rules send the same sizes"
(header, candidates) = next(iter(measured))
header_bytes, candidate_bytes = header[0] * header[1], candidates[0] * candidates[1]
TAIL_WORDS = 1 + MESSAGE_WORDS
assert candidate_bytes == 8 * (B_TP * (2 + 3 * S_TP) + TAIL_WORDS), "the candidates' layout described above"
print(f"per call, each rank sends {header_bytes + candidate_bytes} bytes: a {header_bytes}-byte request header and "
      f"{candidate_bytes} bytes of candidates = 8 (B (2 + 3 S) + {TAIL_WORDS}), B = {B_TP}, S = {S_TP}.")  # fmt: skip
print(f"all-gathering the float32 logits instead: {4 * B_TP * V} bytes here, and {4 * B_TP * 151936} bytes for "
      f"B = {B_TP} rows of a 151936-token vocabulary, where the candidates stay {candidate_bytes} bytes")  # fmt: skip

# %% [markdown]
# ## 5. Both rules at scale
#
# The NumPy replays against the softmax: factorized is the grouped replay of notebook 2 with the shards as groups;
# pathwise is the fused twin itself, since the greatest of the ranks' winners is the flat winner for any layout.

# %%
t = time.perf_counter()
tp_fact = tp_factorized_sampler_np(z32, 1.0, 100_000, SEED + 3, shard_sizes=SHARDS)
tp_path = tp_pathwise_sampler_np(z32, 1.0, 100_000, SEED + 4)
print(f"replays: {tp_fact.size + tp_path.size} draws in {time.perf_counter() - t:.1f} s [machine]")
for name, draws in (("factorized", tp_fact), ("pathwise", tp_path)):
    res = goodness_of_fit(draws, p)
    print(f"{name:10s} {res.summary()}")
    assert res.passed
assert np.array_equal(tp_path[:50], sample_twin_many(z32, 1.0, seed=SEED + 4, num_samples=50))
print(f"notebook run time: {time.perf_counter() - T0:.1f} s [machine]")
