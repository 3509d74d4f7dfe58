"""The report's figures (matplotlib, Agg backend): per case, observed against exact frequencies; the p-values.

* :func:`case_figure` - one case: the frequency of the head tokens by exact rank, and the mass beyond each rank
  (the pooled tail, never hidden by sparse per-token counts), each curve a ``(label, histogram, n)`` against the
  case's exact law;
* :func:`pvalue_figure` - every p-value of a family against the uniform quantiles;
* :func:`plot_seconds` - what one case figure costs here, now (a budget keeps that much per figure).
"""

from __future__ import annotations

import io
import time

import numpy as np

from ..battery.cases import Case

__all__ = ["case_figure", "plot_seconds", "pvalue_figure", "pyplot", "target_label"]

#: Largest number of points drawn per curve of a case plot (a V = 151936 curve is thinned on a log grid).
_PLOT_POINTS = 4000


def thin(x: np.ndarray) -> np.ndarray:
    """Indices ``0 .. x.size - 1`` thinned to about ``_PLOT_POINTS`` on a log grid (all of them if fewer)."""
    if x.size <= _PLOT_POINTS:
        return np.arange(x.size)
    return np.unique(np.geomspace(1, x.size, _PLOT_POINTS).astype(np.int64) - 1)


def pyplot():
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def target_label(case: Case) -> str:
    """The name of a case's law in a legend: ``exact softmax``, or the target it is (``exact top_p(p=0.9, ...)``)."""
    return "exact softmax" if case.target is None or case.target.name == "softmax" else f"exact {case.target!r}"


def case_figure(plt, case: Case, curves: list[tuple[str, np.ndarray, int]], target, *, label: str | None = None,
                marked: list[int] | tuple[int, ...] = ()) -> None:  # fmt: skip
    """One case's figure: head frequencies and the tail mass beyond each rank, each ``(label, histogram, n)``
    of ``curves`` against the case's law (named ``label``, default :func:`target_label`); ``marked`` tokens (a failing
    test's worst) are circled in the head and, beyond it, listed with their rank in a note; saved to ``target`` (a
    path or a file object)."""
    law = label or target_label(case)
    p = case.probs
    order = np.argsort(-p, kind="stable")
    head = min(50, p.size)
    ranks = np.arange(p.size)
    keep = thin(ranks)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    exp_tail = np.clip(1.0 - np.cumsum(p[order]), 1e-12, None)
    for name, histogram, n in curves:
        freq = histogram[order] / max(n, 1)
        tail = np.clip(1.0 - np.cumsum(freq), 1e-12, None)
        ax1.plot(ranks[:head], freq[:head], ".", ms=4, alpha=0.7, label=name)
        ax2.step(ranks[keep], tail[keep], where="post", lw=1, alpha=0.7, label=name)
    ax1.plot(ranks[:head], p[order][:head], "k-", lw=1, label=law)
    ax2.step(ranks[keep], exp_tail[keep], "k-", where="post", lw=1.5, label=law)
    _mark(ax1, p, order, head, [int(t) for t in marked], curves)
    ax1.set_yscale("log")
    ax1.set_xlabel("token rank by exact probability (head)")
    ax1.set_ylabel("frequency")
    ax2.set_yscale("log")
    ax2.set_xlabel("token rank by exact probability")
    ax2.set_ylabel("mass beyond rank (tail)")
    ax1.set_title(f"{case.name}: head")
    ax2.set_title(f"tail mass, observed vs {law}")
    ax2.legend(fontsize=6)
    # Fixed margins: tight_layout measured every tick label of the log axes, half the figure's time.
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.12, top=0.93, wspace=0.22)
    fig.savefig(target, dpi=110, format="png")
    plt.close(fig)


def _mark(ax, p: np.ndarray, order: np.ndarray, head: int, marked: list[int], curves) -> None:
    """Circle the marked tokens within the plotted head; list those beyond it (rank, token, observed / expected)."""
    if not marked:
        return
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    inside = [t for t in marked if rank[t] < head]
    if inside and curves:
        _, histogram, n = curves[0]
        r = [int(rank[t]) for t in inside]
        ax.plot(r, [histogram[t] / max(n, 1) for t in inside], "o", mfc="none", mec="red", ms=9, label="failing tokens")
    beyond = [t for t in marked if rank[t] >= head]
    if beyond:
        lines = ["failing tokens beyond the head:"]
        for t in beyond:
            seen = f", observed {curves[0][1][t] / max(curves[0][2], 1):.3g}" if curves else ""
            lines.append(f"token {t} (rank {int(rank[t])}): p {p[t]:.3g}{seen}")
        ax.text(0.98, 0.98, "\n".join(lines), transform=ax.transAxes, ha="right", va="top", fontsize=6, color="red",
                bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "red"})  # fmt: skip
    ax.legend(fontsize=6, loc="lower left")


def plot_seconds(case: Case, curves: int) -> float:
    """Seconds one figure of ``case`` with ``curves`` variants takes to draw here, now: two throwaway
    figures, the first of which loads matplotlib and its fonts; the second one's time is returned."""
    plt = pyplot()
    draws = np.bincount(np.arange(case.num_categories) % 7, minlength=case.num_categories)
    curves_ = [(f"v{k}", draws, int(draws.sum())) for k in range(curves)]
    case_figure(plt, case, curves_, io.BytesIO())
    t = time.perf_counter()
    case_figure(plt, case, curves_, io.BytesIO())
    return time.perf_counter() - t


def pvalue_figure(plt, pvalues: np.ndarray, target) -> None:
    """Every p-value against the uniform quantiles (log-log; an exact family lies on the diagonal), saved to
    ``target``."""
    pv = np.sort(np.asarray(pvalues, dtype=np.float64))
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    if pv.size:
        exp = (np.arange(1, pv.size + 1) - 0.5) / pv.size
        ax.loglog(exp, np.maximum(pv, 1e-300), ".", ms=3)
        ax.loglog([exp[0], 1], [exp[0], 1], "k--", lw=1)
    ax.set_xlabel("uniform quantile")
    ax.set_ylabel("observed p-value")
    ax.set_title("p-value QQ plot (all tests)")
    fig.tight_layout()
    fig.savefig(target, dpi=110)
    plt.close(fig)
