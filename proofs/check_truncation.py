"""Checks of truncation.md: the fused truncated sampler decides every row's kept set exactly.

* ``upper_sets``: on adversarial rows (ties, masks, flat and peaked logits) every filter and order of
  :mod:`flashsampling.targets` (top-k with ``ties="low_index"``, the others at their defaults) keeps an upper set of
  the order (logit descending, index ascending) -- Lemma 1.  Planted: top-k with ``ties="high_index"`` does not.
* ``lists_cover``: for random rows, tile widths and list lengths, every token ranked before ``R`` (the earliest last
  entry of a full list) is listed -- Lemma 2.  Planted: ``R`` taken as the latest last entry.
* ``mass_error``: stage 2's float64 masses (``exp_neg64`` of ``(m - z) / t``, per-tile sums rescaled, in the worst
  summation order) against the exact sums of NumPy's weights (fractions), relative to the bound
  :func:`flashsampling.truncation.relative_error` -- Lemma 3.  Planted: a bound of one unit roundoff.
* ``numpy_exp``: the assumption on NumPy's ``exp`` the bound uses (within 4 ulp of ``e^x``, measured against a
  40-digit ``decimal`` exponential) and its monotonicity on adjacent arguments.
* ``min_p_margin``: rows with a level exactly at ``min_p``'s weight (``min_p = numpy.exp(x)``): the kernel's rule
  with the margin never disagrees with the law (it sends the row on); without the margin it does -- Lemma 4.
* ``list_lengths``: the constants of :func:`flashsampling.kernels.truncation.list_length` recomputed:
  ``P(Poisson(lambda_M) > M) <= 1e-9``.
* ``shipped``: the shipped sampler (interpreted) against the twin's law on random rows, short lists forcing the
  fallback: 0 mismatches.  Planted: the fallback's pass disabled (its rows keep the lists' undecided placeholder).
* ``benchmark_kept``: the kept fraction of ``bench_h200.py``'s random logits (``z / T ~ N(0, s^2)``) per filter, in
  closed form: what sets which grid points the lists can hold (section 6).
"""

from __future__ import annotations

import decimal
import math
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
from scipy import stats

if __package__ in (None, ""):  # run as `python proofs/check_truncation.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flashsampling.kernels.truncation import EXPECTED_PER_TILE  # noqa: E402
from flashsampling.noise import exp_neg64_np  # noqa: E402
from flashsampling.targets import sampling_law  # noqa: E402
from flashsampling.truncation import relative_error  # noqa: E402
from flashsampling.twin import kept_mask  # noqa: E402

U = 2.0**-53
#: Filter settings of the adversarial rows: (top_k, top_p, min_p, order).
SETTINGS = [(5, None, None, None), (None, 0.5, None, None), (None, None, 0.1, None), (20, 0.9, 0.05, None),
            (20, 0.9, 0.05, "vllm"), (20, 0.9, 0.05, "joint"), (20, 0.9, 0.05, "llama.cpp"),
            (3, 0.3, 0.5, None)]  # fmt: skip


def adversarial_rows(n: int, v: int, seed: int) -> np.ndarray:
    """float32 rows: normal, on a 0.5 grid (ties), flat with a few spikes, masked (-inf), and peaked."""
    rng = np.random.default_rng(seed)
    out = []
    for j in range(n):
        kind = j % 5
        if kind == 0:
            z = rng.normal(0, 3, v)
        elif kind == 1:
            z = np.round(rng.normal(0, 2, v) * 2) / 2
        elif kind == 2:
            z = np.zeros(v)
            z[rng.integers(0, v, 3)] = 1.0
        elif kind == 3:
            z = rng.normal(0, 2, v)
            z[rng.random(v) < 0.5] = -np.inf
            z[0] = 0.0
        else:
            z = rng.normal(0, 8, v)
        out.append(z)
    return np.array(out, dtype=np.float32)


def rank(z: np.ndarray) -> np.ndarray:
    """Positions in the order (logit descending, index ascending) of a row's finite tokens (-1 for masked)."""
    finite = np.isfinite(z)
    order = np.lexsort((np.arange(z.size), -np.where(finite, z, -np.inf)))
    pos = np.empty(z.size, dtype=np.int64)
    pos[order] = np.arange(z.size)
    return np.where(finite, pos, -1)


def upper_set_violations(kept: np.ndarray, z: np.ndarray) -> int:
    """Kept tokens with a finite predecessor in the order that is not kept."""
    pos = rank(z)
    finite = pos >= 0
    if not kept.any():
        return 0
    last = pos[kept].max()
    return int(((pos <= last) & finite & ~kept).sum())


def upper_sets(n: int = 200, v: int = 60, seed: int = 1, planted: bool = False) -> dict:
    """Lemma 1 on :func:`adversarial_rows`: violations per setting (0 expected); ``planted``: top-k by higher index."""
    rows = adversarial_rows(n, v, seed)
    out = {}
    for k, p, q, order in SETTINGS:
        for t in (0.0, 0.7, 1.0):
            if planted:
                kw = {"top_k": k or 5, "top_k_ties": "high_index"}
                kept = sampling_law(rows.astype(np.float64), t, **kw) > 0
            else:
                kept = kept_mask(rows, t, k, p, q, order)
            bad = sum(upper_set_violations(kept[r], rows[r]) for r in range(n))
            out[f"k={k} p={p} min_p={q} order={order} T={t}"] = bad
    return out


def lists_cover(n: int = 300, seed: int = 2, planted: bool = False) -> dict:
    """Lemma 2: for random rows, tile widths and list lengths, the unlisted tokens ranked before ``R``."""
    rng = np.random.default_rng(seed)
    bad = full_rows = 0
    for _ in range(n):
        v = int(rng.integers(20, 300))
        width = int(rng.choice([8, 16, 32]))
        m = int(rng.choice([1, 2, 4, 8]))
        z = adversarial_rows(1, v, int(rng.integers(1 << 30)))[0]
        pos = rank(z)
        listed = np.zeros(v, dtype=bool)
        edges = []
        for t0 in range(0, v, width):
            tile = np.arange(t0, min(v, t0 + width))
            fin = tile[pos[tile] >= 0]
            first = fin[np.argsort(pos[fin])][:m]
            listed[first] = True
            if fin.size >= m:  # a full list: its last entry is an edge
                edges.append(pos[first[-1]])
        if not edges:
            continue
        full_rows += 1
        r = max(edges) if planted else min(edges)  # R: the earliest edge (the smallest position)
        bad += int(((pos >= 0) & (pos < r) & ~listed).sum())
    return {"rows_with_a_full_list": full_rows, "unlisted_before_R": bad}


def _exact_sum(ws) -> Fraction:
    return sum((Fraction(float(w)) for w in ws), Fraction(0))


def mass_error(n: int = 60, v: int = 2048, width: int = 256, seed: int = 3) -> dict:
    """Lemma 3: stage 2's masses (tile sums of ``exp_neg64((m_t - z) / t)`` rescaled by ``exp_neg64((m - m_t) / t)``,
    summed in increasing order, the worst for nonnegative terms) against the exact sum of NumPy's weights
    ``exp((z - m) / t)``, in units of the shipped bound; and of a bound of one unit roundoff (planted)."""
    rng = np.random.default_rng(seed)
    worst = worst_planted = 0.0
    for j in range(n):
        t = float(rng.choice([0.3, 0.8, 1.0, 2.0]))
        z = rng.normal(0, 1 + 3 * (j % 4), v).astype(np.float32).astype(np.float64)
        m = z.max()
        law = np.exp((z - m) / t)
        exact = _exact_sum(law)
        tiles = z.reshape(-1, width)
        mt = tiles.max(axis=1)
        s_tiles = [float(np.sum(np.sort(exp_neg64_np((mt[i] - tiles[i]) / t)))) for i in range(len(mt))]
        terms = np.sort([s * exp_neg64_np(np.array([(m - mt[i]) / t]))[0] for i, s in enumerate(s_tiles)])
        s = 0.0
        for x in terms:  # increasing order: the recursive-summation bound's worst case for nonnegative terms
            s += float(x)
        rel = abs(Fraction(s) - exact) / exact
        e = relative_error(width, len(mt), 0)
        worst = max(worst, float(rel) / e)
        worst_planted = max(worst_planted, float(rel) / U)
    return {"worst_over_bound": worst, "worst_over_planted_bound": worst_planted}


def numpy_exp(n: int = 20000, seed: int = 4) -> dict:
    """NumPy's float64 ``exp`` against a 40-digit ``decimal`` exponential on ``[-745, 0]``: the largest error in ulps;
    and monotonicity on ``n`` pairs of adjacent arguments."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([-rng.exponential(5.0, n // 2), -rng.uniform(0, 745, n // 2)])
    y = np.exp(x)
    ctx = decimal.Context(prec=40)
    worst = 0.0
    for xi, yi in zip(x.tolist(), y.tolist()):
        true = ctx.exp(decimal.Decimal(xi))
        ulp = math.ulp(float(true))
        worst = max(worst, abs(float(decimal.Decimal(yi) - true)) / ulp)
    up = np.nextafter(x, 0.0)
    return {"max_ulps": worst, "nonmonotone_pairs": int((np.exp(up) < y).sum())}


def min_p_margin(n: int = 4000, seed: int = 5, margin: float = 2.0**-46) -> dict:
    """Lemma 4 on rows whose level ``x0 = z - m`` has weight exactly ``min_p``: ``q = numpy.exp(x0)``, so the law keeps
    the level.  The kernel's rule (keep iff ``x >= log q + mu``, drop iff ``x <= log q - mu``, else undecided) with
    ``mu = margin (1 + |log q|)``: its decisions that disagree with the law (0 expected); ``margin = 0`` (planted)
    decides every row."""
    rng = np.random.default_rng(seed)
    x0 = -rng.uniform(0.0, 40.0, n).astype(np.float32).astype(np.float64)
    q = np.exp(x0)
    lq = np.log(q)
    mu = margin * (1 + np.abs(lq))
    if margin > 0:
        keep = x0 >= lq + mu
        drop = x0 <= lq - mu
    else:  # no margin: every row decided by the comparison with log q
        keep = x0 >= lq
        drop = ~keep
    law_keeps = np.exp(x0) >= q  # always True: the weight is min_p exactly
    wrong = int((keep & ~law_keeps).sum() + (drop & law_keeps).sum())
    return {"rows": n, "undecided_sent_on": int((~keep & ~drop).sum()), "wrong": wrong}


def list_lengths() -> dict:
    """``P(Poisson(lambda_M) > M)`` at the shipped constants (each must be ``<= 1e-9``)."""
    return {str(m): float(stats.poisson.sf(m, lam)) for m, lam in EXPECTED_PER_TILE.items()}


def shipped(n: int = 12, seed: int = 6, planted: bool = False) -> dict:
    """The shipped sampler (interpreted) on adversarial rows with two-entry lists (most rows take the fallback) for
    every setting: tokens equal the twin's (the law's kept set, the plain noise).  ``planted``: the fallback's pass
    skipped."""
    import torch

    import flashsampling
    import flashsampling.truncation as truncation
    from flashsampling.twin import sample_truncated_twin

    rows = adversarial_rows(n, 96, seed)
    rows[:, 0] = np.where(np.isfinite(rows[:, 0]), rows[:, 0], 0.0)
    z = torch.tensor(rows)
    saved = truncation.LIST_OVERRIDE, truncation.launch_truncation_stage2
    truncation.LIST_OVERRIDE = 2
    if planted:
        real = truncation.launch_truncation_stage2

        def skip_redo(*args, **kwargs):
            if kwargs.get("redo") is not None:
                return kwargs["redo"]
            return real(*args, **kwargs)

        truncation.launch_truncation_stage2 = skip_redo
    mismatched = draws = 0
    try:
        for k, p, q, order in SETTINGS:
            kw = {key: val for key, val in (("top_k", k), ("top_p", p), ("min_p", q), ("order", order)) if val}
            got = flashsampling.sample_from_logits(z, temperature=0.8, seed=seed, num_samples=4, block_v=16, **kw)
            want = sample_truncated_twin(rows, 0.8, seed=seed, num_samples=4, **kw)
            mismatched += int((got.numpy() != want).sum())
            draws += want.size
    finally:
        truncation.LIST_OVERRIDE, truncation.launch_truncation_stage2 = saved
    return {"draws": draws, "mismatches": mismatched}


def benchmark_kept(s_values=(1.34, 1.6, 2.26), V: int = 151936, width: int = 128) -> dict:
    """Section 6: for logits with ``z / T ~ N(0, s^2)`` (``bench_h200.py``'s: ``s = 0.02 sqrt(D) / 0.8``), the
    fraction of tokens top-p keeps (the softmax-tilted law of ``z / T`` is ``N(s^2, s^2)``: keep ``z / T > s^2 -
    Phi^-1(p) s``) and min-p keeps (``z > max - T log(1/q)``, the max about ``s sqrt(2 log V)``), and the expected
    kept tokens per ``width``-column tile."""
    out = {}
    top = math.sqrt(2 * math.log(V))
    for s in s_values:
        row = {}
        for p in (0.5, 0.9, 0.99):
            frac = float(stats.norm.sf(s - stats.norm.ppf(p)))
            row[f"top_p={p}"] = {"fraction": frac, "per_tile": frac * width}
        for q in (0.05, 0.1):
            frac = float(stats.norm.sf(top - math.log(1 / q) / s))
            row[f"min_p={q}"] = {"fraction": frac, "per_tile": frac * width}
        out[f"s={s}"] = row
    return out


def collect(full: bool = True) -> dict:
    return {
        "upper_sets": upper_sets(200 if full else 40),
        "upper_sets_planted": sum(upper_sets(200 if full else 40, planted=True).values()),
        "lists_cover": lists_cover(300 if full else 60),
        "lists_cover_planted": lists_cover(300 if full else 60, planted=True)["unlisted_before_R"],
        "mass_error": mass_error(60 if full else 8),
        "numpy_exp": numpy_exp(20000 if full else 2000),
        "min_p_margin": min_p_margin(),
        "min_p_no_margin": min_p_margin(margin=0.0),
        "list_lengths": list_lengths(),
        "shipped": shipped(12 if full else 4),
        "benchmark_kept": benchmark_kept(),
    }


def verdicts(res: dict) -> dict[str, bool]:
    return {
        "every filter and order keeps an upper set": not any(res["upper_sets"].values()),
        "the planted high-index top-k is caught": res["upper_sets_planted"] > 0,
        "every token before R is listed": res["lists_cover"]["unlisted_before_R"] == 0,
        "the planted R is caught": res["lists_cover_planted"] > 0,
        "masses within the bound": res["mass_error"]["worst_over_bound"] <= 1.0,
        "the planted bound is exceeded": res["mass_error"]["worst_over_planted_bound"] > 1.0,
        "numpy exp within 4 ulp and monotone": res["numpy_exp"]["max_ulps"] <= 4
        and res["numpy_exp"]["nonmonotone_pairs"] == 0,
        "min-p with its margin never wrong": res["min_p_margin"]["wrong"] == 0,
        "min-p without its margin is wrong": res["min_p_no_margin"]["wrong"] > 0,
        "list lengths at 1e-9": all(v <= 1e-9 for v in res["list_lengths"].values()),
        "shipped = law": res["shipped"]["mismatches"] == 0,
    }


def render(res: dict) -> dict[str, str]:
    from proofs._generated import holds, md_table, sci

    lc, me, ne, mp, mp0, sh = (res[k] for k in ("lists_cover", "mass_error", "numpy_exp", "min_p_margin",
                                                "min_p_no_margin", "shipped"))  # fmt: skip
    ll = ", ".join(f"$M = {m}$: ${sci(p)}$" for m, p in res["list_lengths"].items())
    rows = [
        ("`upper_sets`: Lemma 1 on 200 adversarial rows (ties, masks, flat, peaked), 8 filter settings in the four "
         "named orders, $T \\in \\{0, 0.7, 1\\}$", holds(not any(res["upper_sets"].values()), "0 violations") +
         f"; planted top-k by higher index: {res['upper_sets_planted']} violations"),
        ("`lists_cover`: Lemma 2 on 300 random rows, tiles of 8-32, lists of 1-8",
         f"{lc['unlisted_before_R']} unlisted tokens before $R$ ({lc['rows_with_a_full_list']} rows with a full "
         f"list); planted $R$ = the latest edge: {res['lists_cover_planted']}"),
        ("`mass_error`: Lemma 3, 60 rows of 2048 in tiles of 256, worst summation order, against exact fractions",
         f"largest error ${sci(me['worst_over_bound'])}$ of the bound; planted bound $u$: "
         f"${sci(me['worst_over_planted_bound'])}$ of it"),
        ("`numpy_exp`: NumPy's `exp` against 40-digit `decimal` on 20 000 arguments in $[-745, 0]$",
         f"max {ne['max_ulps']:.3f} ulp; {ne['nonmonotone_pairs']} non-monotone adjacent pairs"),
        ("`min_p_margin`: Lemma 4, 4000 rows with a level at exactly `min_p`'s weight",
         f"{mp['wrong']} wrong, {mp['undecided_sent_on']} sent to the host's law; without the margin "
         f"{mp0['wrong']} wrong"),
        ("`list_lengths`: $P(\\mathrm{Poisson}(\\lambda_M) > M)$ at the shipped constants", ll),
        ("`shipped`: the interpreted sampler, two-entry lists, 8 settings, 12 adversarial rows, 4 draws each",
         f"{sh['mismatches']} of {sh['draws']} draws differ from the law's twin; planted (fallback skipped): "
         f"{res.get('shipped_planted', {}).get('mismatches', 'see tests')}"),
    ]  # fmt: skip
    kept = [(s, *(f"{r[f]['fraction']:.3g} ({r[f]['per_tile']:.1f})" for f in r)) for s, r in
            res["benchmark_kept"].items()]  # fmt: skip
    header = ("logits", *next(iter(res["benchmark_kept"].values())).keys())
    return {"table": md_table(rows), "kept": md_table(kept, header=header)}


#: The markers of this file's blocks in truncation.md (its own: the shared generator's owner table is not edited).
MD = Path(__file__).resolve().parent / "truncation.md"


def write_md(rendered: dict[str, str], md: Path = MD) -> None:
    text = md.read_text()
    for key, body in rendered.items():
        start, end = f"<!-- check_truncation.py: {key} -->\n", f"<!-- end check_truncation.py: {key} -->"
        i, j = text.index(start) + len(start), text.index(end)
        text = text[:i] + body.rstrip("\n") + "\n" + text[j:]
    md.write_text(text)


def md_blocks(md: Path = MD) -> dict[str, str]:
    text = md.read_text()
    out = {}
    for key in ("table", "kept"):
        start, end = f"<!-- check_truncation.py: {key} -->\n", f"<!-- end check_truncation.py: {key} -->"
        out[key] = text[text.index(start) + len(start) : text.index(end)]
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    res = collect()
    res["shipped_planted"] = shipped(12, planted=True)
    for name, ok in verdicts(res).items():
        print(f"{'pass' if ok else 'FAIL'}  {name}")
    print(res["mass_error"], res["numpy_exp"], res["min_p_margin"], res["shipped"], res["shipped_planted"])
    if "--write" in argv:
        from proofs import _generated as gen

        gen.save("truncation", res)
        write_md(render(gen.roundtrip(res)))
    return 0 if all(verdicts(res).values()) and res["shipped_planted"]["mismatches"] > 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
