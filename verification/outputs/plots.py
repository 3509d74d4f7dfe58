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

__all__ = ["case_figure", "plot_seconds", "pvalue_figure", "pyplot"]

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


def case_figure(plt, case: Case, curves: list[tuple[str, np.ndarray, int]], target) -> None:
    """One case's figure: head frequencies and the tail mass beyond each rank, each ``(label, histogram, n)``
    of ``curves`` against the exact softmax; saved to ``target`` (a path or a file object)."""
    p = case.probs
    order = np.argsort(-p, kind="stable")
    head = min(50, p.size)
    ranks = np.arange(p.size)
    keep = thin(ranks)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    exp_tail = np.clip(1.0 - np.cumsum(p[order]), 1e-12, None)
    for label, histogram, n in curves:
        freq = histogram[order] / max(n, 1)
        tail = np.clip(1.0 - np.cumsum(freq), 1e-12, None)
        ax1.plot(ranks[:head], freq[:head], ".", ms=4, alpha=0.7, label=label)
        ax2.step(ranks[keep], tail[keep], where="post", lw=1, alpha=0.7, label=label)
    ax1.plot(ranks[:head], p[order][:head], "k-", lw=1, label="exact softmax")
    ax2.step(ranks[keep], exp_tail[keep], "k-", where="post", lw=1.5, label="exact softmax")
    ax1.set_yscale("log")
    ax1.set_xlabel("token rank by exact probability (head)")
    ax1.set_ylabel("frequency")
    ax2.set_yscale("log")
    ax2.set_xlabel("token rank by exact probability")
    ax2.set_ylabel("mass beyond rank (tail)")
    ax1.set_title(f"{case.name}: head")
    ax2.set_title("tail mass, observed vs exact")
    ax2.legend(fontsize=6)
    # Fixed margins: tight_layout measured every tick label of the log axes, half the figure's time.
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.12, top=0.93, wspace=0.22)
    fig.savefig(target, dpi=110, format="png")
    plt.close(fig)


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
