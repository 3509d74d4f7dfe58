"""check_sampler(..., target=...): samplers written the way Hugging Face transformers writes its logits warpers
(in torch, here) pass against the convention they implement and fail against the other one; speculative
samplers pass against ``speculative(q)`` and fail with a replacement drawn from the wrong law.

Seeds: ``budget("verification.check.exact")`` (the correct samplers, family-wise alpha 1e-3 each) and
``budget("verification.check.planted")`` (the wrong conventions, each of which must fail).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from verification import check_sampler
from verification.battery.aims import chain, speculative, top_k, top_p
from verification.planning.budget import budget

EXACT = budget("verification.check.exact")
PLANTED = budget("verification.check.planted")


def _top_k(scores: torch.Tensor, k: int) -> torch.Tensor:
    """``TopKLogitsWarper``: remove every score below the k-th largest (ties at the k-th score stay)."""
    remove = scores < torch.topk(scores, k)[0][..., -1, None]
    return scores.masked_fill(remove, -float("inf"))


def _top_p(scores: torch.Tensor, p: float) -> torch.Tensor:
    """``TopPLogitsWarper``: ascending sort, float32 cumulative softmax, remove while it is ``<= 1 - p``."""
    sorted_logits, sorted_indices = torch.sort(scores, descending=False)
    cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    remove_sorted = cumulative <= (1 - p)
    remove_sorted[..., -1:] = False
    remove = remove_sorted.scatter(1, sorted_indices, remove_sorted)
    return scores.masked_fill(remove, -float("inf"))


def _multinomial(scores: torch.Tensor, num_samples: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.multinomial(torch.softmax(scores, dim=-1), num_samples, replacement=True, generator=g)


def top_k_sampler(logits, num_samples, seed):
    return _multinomial(_top_k(logits, 4), num_samples, seed)


def top_p_sampler(logits, num_samples, seed):
    return _multinomial(_top_p(logits, 0.7), num_samples, seed)


def top_k_top_p_sampler(logits, num_samples, seed):
    return _multinomial(_top_p(_top_k(logits, 6), 0.5), num_samples, seed)


def _logits() -> np.ndarray:
    """Two rows; in each the 4th largest logit is tied with a token of higher index (a tie at the cut)."""
    z = np.random.default_rng(7).normal(0, 1.5, (2, 40)).astype(np.float32)
    for row in z:
        order = np.argsort(-row, kind="stable")
        fourth = order[3]
        row[next(t for t in order[4:] if t > fourth)] = row[fourth]
    return z


def test_the_logits_tie_at_the_cut_and_the_conventions_differ():
    z = _logits()
    for k_ties in ("all", "low_index"):
        assert top_k(4, ties=k_ties).probs(z).shape == (2, 40)
    assert (np.count_nonzero(top_k(4).probs(z), axis=1) == 5).all()
    assert (np.count_nonzero(top_k(4, ties="low_index").probs(z), axis=1) == 4).all()
    keep, drop = top_p(0.7).probs(z), top_p(0.7, crossing="drop").probs(z)
    assert (np.count_nonzero(keep, axis=1) > np.count_nonzero(drop, axis=1)).all()
    # The crossing token is far from the float32 boundary: the warper's float32 cumsum decides as float64 does.
    joint = chain(top_k(6), top_p(0.5), order="joint").probs(z)
    assert (np.count_nonzero(chain(top_k(6), top_p(0.5)).probs(z), axis=1) != np.count_nonzero(joint, axis=1)).any()


@pytest.mark.parametrize(
    ("sampler", "right", "wrong", "first_failure"),
    [
        (top_k_sampler, top_k(4), top_k(4, ties="low_index"), "row 0: range"),
        (top_p_sampler, top_p(0.7), top_p(0.7, crossing="drop"), "row 0: range"),
        (
            top_k_top_p_sampler,
            chain(top_k(6), top_p(0.5)),
            chain(top_k(6), top_p(0.5), order="joint"),
            "row 0: pearson",
        ),  # fmt: skip
    ],
    ids=["top-k ties kept", "top-p crossing token kept", "top-k then top-p, sequential"],
)
def test_transformers_style_sampler_passes_its_convention_and_fails_the_other(sampler, right, wrong, first_failure):
    """The wrong convention keeps fewer tokens (a kept one is drawn: impossible) or other ones (the law moves)."""
    z = _logits()
    good = check_sampler(sampler, z, target=right, tv=0.05, seed=EXACT.seed + 20)
    assert good.passed, good
    bad = check_sampler(sampler, z, target=wrong, tv=0.05, seed=PLANTED.seed + 20)
    assert not bad.passed and first_failure in [t.name for t in bad.failures()]


def _icdf(rng, w, n):
    c = np.cumsum(w)
    return np.minimum(np.searchsorted(c, rng.random(n) * c[-1], side="right"), w.size - 1)


def _rejection(draft_tokens, draft_probs, target_probs, seed, replacement="residual"):
    """One speculative step per draft sequence: accept x_i with probability min(1, p/q), else draw the
    replacement from max(p - q, 0) (or, as a defect, from p), and the bonus token from p_{K+1}."""
    rng = np.random.default_rng(seed)
    x = draft_tokens.numpy()
    q, p = draft_probs.double().numpy(), target_probs.double().numpy()
    b_, n, k = x.shape
    out = -np.ones((b_, n, k + 1), np.int64)
    for b in range(b_):
        alive = np.ones(n, bool)
        for i in range(k):
            xi = x[b, :, i]
            accept = alive & (rng.random(n) * q[b, i, xi] < p[b, i, xi])
            reject = alive & ~accept
            out[b, accept, i] = xi[accept]
            law = np.maximum(p[b, i] - q[b, i], 0) if replacement == "residual" else p[b, i]
            if reject.any():
                out[b, reject, i] = _icdf(rng, law, int(reject.sum()))
            alive = accept
        if alive.any():
            out[b, alive, k] = _icdf(rng, p[b, k], int(alive.sum()))
    return out


def _draft_and_logits():
    rng = np.random.default_rng(8)
    q = rng.dirichlet(np.ones(10), size=(2, 2))
    return q, rng.normal(0, 1, (2, 3, 10))


def test_speculative_sampler_passes_and_a_wrong_replacement_fails():
    q, logits = _draft_and_logits()
    good = check_sampler(_rejection, logits, target=speculative(q), tv=0.08, seed=EXACT.seed + 21)
    assert good.passed, good
    names = [t.name for t in good.tests]
    assert names[:5] == ["row 0: emitted", "row 0: draft 0 pearson", "row 0: draft 0 g-test",
                         "row 0: draft 0 categories", "row 0: draft 1 pearson"]  # fmt: skip
    assert names[-4:] == ["samples", "rows 0-1", "seeds", "calls"]
    assert good.shape == (2, 3, 10) and good.properties[0].holds is True

    def from_p(draft_tokens, draft_probs, target_probs, seed):
        return _rejection(draft_tokens, draft_probs, target_probs, seed, replacement="target")

    bad = check_sampler(from_p, logits, target=speculative(q), tv=0.08, seed=PLANTED.seed + 21)
    assert not bad.passed and not bad.test("row 0: draft 0 pearson").passed


def test_speculative_protocol_violations_are_impossible_outputs():
    q, logits = _draft_and_logits()

    def accepts_a_token_not_drafted(draft_tokens, draft_probs, target_probs, seed):
        out = _rejection(draft_tokens, draft_probs, target_probs, seed)
        out[0, 0, :] = [(int(draft_tokens[0, 0, 0]) + 1) % 10, 0, 0]  # "accepted" a token that was not the draft
        return out

    r = check_sampler(accepts_a_token_not_drafted, logits, target=speculative(q), tv=0.3, seed=PLANTED.seed + 22)
    assert not r.test("row 0: range").passed and r.test("row 1: range").passed


def test_speculative_logits_must_match_the_draft():
    q, logits = _draft_and_logits()
    with pytest.raises(ValueError, match="K \\+ 1"):
        check_sampler(_rejection, logits[:, :2], target=speculative(q), tv=0.3)
