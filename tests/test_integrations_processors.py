"""generate's processors, per-request seeds, log-probabilities, stop strings, streamer and generation config.

Tiny models built from configs (seeded random weights, no download), as in ``tests/test_integrations_transformers.py``.

Statistical checks (seeds fixed, so the suite is deterministic; alpha and power say what a fresh seed risks):

==================================  ==================  ======  =========================================
check                               n                   alpha   planted defect that must fail it
==================================  ==================  ======  =========================================
step 0, fused top-k, prompt 0      planned for tv 0.35 1e-3    the truncation lost (plain softmax)
step 0, exact path: penalties,      planned for tv 0.35 1e-3    the truncation lost; the repetition
  EOS mask, top-k+top-p+min-p                                   penalty lost
step 1, presence + frequency        ~150 rows           1e-4    the penalties lost at step 1
==================================  ==================  ======  =========================================

Each planted run (planned for tv 0.5, on one prompt) is asserted to fail, and the planted law's total variation from
the target to exceed the deviation that run detects with power 0.99 (its Pearson test's ``min_detectable``; for the
step-1 check the passing run's, scaled by ``sqrt(n / n_planted)``), so the catch is planned, not lucky.  The
deterministic checks (the kept set against :func:`flashsampling.targets.sampling_law` on 300 random rows, the
penalties against their definitions, the step seeds against :func:`step_seed`, the dispatch) run in a second.
About 40 s in all on the CPU.
"""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest
import torch

import flashsampling
import verification
from flashsampling.reference import softmax
from flashsampling.targets import sampling_law
from verification.battery import aims as vt

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
fst = pytest.importorskip("flashsampling.integrations.transformers")
step_module = pytest.importorskip("flashsampling.integrations._decode_step")

from tests.test_integrations_transformers import DEVICE, left_padded_batch, tiny_model  # noqa: E402

#: Level of the law checks; the total variation their sizes are planned for (null runs, planted runs).
_ALPHA, _TV, _TV_PLANTED = 1e-3, 0.35, 0.5


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", seed=3, vocab_size=128, eos_token_id=None, bos_token_id=None, pad_token_id=None)


@pytest.fixture(scope="module")
def prompts():
    return torch.randint(0, 128, (2, 5), generator=torch.Generator().manual_seed(4)).to(DEVICE)


def model_logits(model, ids) -> torch.Tensor:
    """The model's own last-position logits, float32 ``[B, V]`` on the CPU."""
    with torch.no_grad():
        return model(ids).logits[:, -1].float().cpu()


def penalized(z, prompt, generated=(), *, repetition=None, presence=None, frequency=None) -> np.ndarray:
    """The penalties' definitions (``_decode_step``'s docstring) in float64 on one row's logits ``z [V]``."""
    z = np.asarray(z, dtype=np.float64).copy()
    counts = Counter(int(t) for t in generated)
    if repetition is not None:
        for i in set(int(t) for t in prompt) | set(counts):
            z[i] = z[i] / repetition if z[i] > 0 else z[i] * repetition
    for i, c in counts.items():
        z[i] -= (frequency or 0.0) * c + (presence or 0.0)
    return z


def tv(p, q) -> float:
    return 0.5 * float(np.abs(np.asarray(p) - np.asarray(q)).sum())


def pearson(report):
    return next(t for t in report.tests if t.name == "row 0: pearson")


# ------------------------------------------------------------------------------------------------
# Deterministic: the kept set, the penalties, the step seeds, the dispatch
# ------------------------------------------------------------------------------------------------


def test_kept_mask_equals_the_targets_decisions():
    # Random rows, integer rows (ties at every cut), flat rows (cumulative masses landing exactly on p) and masked
    # rows, with every combination of filters: the kept set is sampling_law's support, decision for decision.
    rng = np.random.default_rng(0)
    checked = 0
    for trial in range(300):
        V = int(rng.integers(2, 60))
        kind = trial % 4
        z = [rng.normal(size=(3, V)) * 3, rng.integers(-2, 3, (3, V)).astype(float), np.zeros((3, V)),
             rng.normal(size=(3, V))][kind]  # fmt: skip
        if kind == 3:
            z[:, rng.integers(0, V, V // 3)] = -np.inf
            z[:, 0] = 1.0
        z = z.astype(np.float32)
        T = float(rng.choice([0.5, 1.0, 2.0]))
        law = step_module.StepLaw(
            top_k=int(rng.integers(1, V + 2)) if rng.random() < 0.6 else None,
            top_p=float(rng.choice([0.25, 0.3, 0.5, 0.9])) if rng.random() < 0.7 else None,
            min_p=float(rng.choice([0.1, 0.5, 1.0, np.exp(-1 / T)])) if rng.random() < 0.5 else None,
        )
        if not law.truncations:
            continue
        got = step_module.kept_mask(torch.from_numpy(z), torch.full((3,), T, dtype=torch.float64), law).numpy()
        expected = sampling_law(z.astype(np.float64), T, **law.truncations, order="transformers",
                                top_k_ties="low_index", top_p_ties="low_index") > 0  # fmt: skip
        np.testing.assert_array_equal(got, expected, err_msg=f"trial {trial}: {law}, T={T}")
        checked += 1
    assert checked > 250


def test_kept_mask_defers_an_exact_boundary_to_the_targets(monkeypatch):
    # Flat logits with p = 1/2: the cumulative mass lands exactly on p S, and the row goes to the exact code.
    called = []
    real = step_module._exact_row
    monkeypatch.setattr(step_module, "_exact_row", lambda *a: called.append(1) or real(*a))
    kept = step_module.kept_mask(torch.zeros(1, 4), torch.ones(1, dtype=torch.float64), step_module.StepLaw(top_p=0.5))
    assert called and kept.tolist() == [[True, True, False, False]]  # M = 0, 1/4 < 1/2; 1/2 is not < 1/2


def test_penalties_are_the_definitions():
    g = torch.Generator().manual_seed(1)
    z = torch.randn(2, 12, generator=g) * 2
    ids = torch.tensor([[1, 2, 3], [0, 4, 4]])
    mask = torch.tensor([[1, 1, 1], [0, 1, 1]])  # row 1's token 0 is padding: not in its prompt
    counts = step_module.TokenCounts(ids, mask, 12)
    for tokens in ([5, 4], [5, 7], [2, 7]):
        counts.add(torch.tensor(tokens), torch.tensor([True, True]))
    counts.add(torch.tensor([9, 9]), torch.tensor([True, False]))  # row 1 finished: its padding is not counted
    law = step_module.StepLaw(repetition_penalty=1.7, presence_penalty=0.3, frequency_penalty=0.45)
    got = step_module.apply_penalties(z, law, counts)
    generated = ([5, 5, 2, 9], [4, 7, 7])
    for b in range(2):
        prompt = ids[b][mask[b] == 1].tolist()
        expected = penalized(z[b], prompt, generated[b], repetition=1.7, presence=0.3, frequency=0.45)
        np.testing.assert_allclose(got[b].numpy(), expected, rtol=1e-6)
    assert got[1, 0] == z[1, 0]  # padding id untouched


def test_step_seeds_on_the_device_are_step_seed():
    rng = np.random.default_rng(2)
    seeds = [0, 1, 2**63 - 1, 2**63, 2**64 - 1, *(int(x) for x in rng.integers(0, 2**63, 50, dtype=np.uint64) * 2)]
    t = torch.tensor([s - 2**64 if s >= 2**63 else s for s in seeds], dtype=torch.int64)
    for step in (0, 1, 17, 2**40):
        expected = [fst.step_seed(s, step) for s in seeds]
        assert [int(v) % 2**64 for v in step_module.step_seeds(t, step)] == expected
        assert [int(v) % 2**64 for v in step_module.step_seeds(t, torch.tensor(step))] == expected  # a device counter


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        (dict(), ["sample"] * 2),
        (dict(top_k=5), ["sample"] * 2),
        (dict(seed=[1, 2, 3]), ["sample"] * 2),
        (dict(top_k=5, seed=[1, 2, 3]), ["sample_from_logits"] * 2),  # the top-k kernels take an int seed
        (dict(top_k=5, output_logprobs=True), ["sample_from_logits"] * 2),
        (dict(output_logprobs=True), ["sample"] * 2),
        (dict(top_p=0.9), ["sample_from_logits"] * 2),
        (dict(min_p=0.1), ["sample"] * 2),  # min-p is fused (the kernel's conventions are the law's)
        (dict(repetition_penalty=1.2), ["sample_from_logits"] * 2),
        (dict(presence_penalty=0.5), ["sample_from_logits"] * 2),
        (dict(min_new_tokens=1, eos_token_id=[7]), ["sample_from_logits", "sample"]),
        (dict(top_p=1.0, min_p=0.0, top_k=0, repetition_penalty=1.0), ["sample"] * 2),  # values that disable them
        (dict(top_k=127), ["sample_from_logits"] * 2),  # beyond MAX_TOP_K (patched to 64 below), below V = 128
        (dict(top_k=128), ["sample"] * 2),  # k >= V: no truncation
    ],
    ids=lambda v: ",".join(f"{k}={v[k]}" for k in v) if isinstance(v, dict) else None,
)
def test_a_step_runs_fused_unless_it_needs_the_logits(model, monkeypatch, kwargs, expected):
    monkeypatch.setattr(flashsampling, "MAX_TOP_K", 64)
    calls = []
    for name in ("sample", "sample_from_logits"):
        real = getattr(flashsampling, name)
        monkeypatch.setattr(
            flashsampling, name, lambda *a, real=real, name=name, **k: calls.append(name) or real(*a, **k)
        )
    args = dict(max_new_tokens=2, temperature=0.8, seed=3, eos_token_id=[]) | kwargs
    ids = torch.randint(0, 128, (3, 4), generator=torch.Generator().manual_seed(0)).to(DEVICE)
    fst.generate(model, ids, **args)
    assert calls == expected


def test_the_fused_truncations_switch_is_one_name(model, monkeypatch):
    # When sample() takes top_p, adding "top_p" to FUSED_TRUNCATIONS sends such steps to it, with the argument.
    seen = []
    monkeypatch.setattr(
        flashsampling, "sample", lambda h, w, **k: seen.append(k) or h.new_zeros((h.shape[0], 1), dtype=torch.int64)
    )
    monkeypatch.setattr(step_module, "FUSED_TRUNCATIONS", frozenset({"top_k", "top_p"}))
    fst.generate(model, torch.tensor([[1, 2]], device=DEVICE), max_new_tokens=1, temperature=0.8, top_p=0.9, seed=1)
    assert seen and seen[0]["top_p"] == 0.9


# ------------------------------------------------------------------------------------------------
# The law of a step: check_sampler through generate
# ------------------------------------------------------------------------------------------------


def generate_sampler(model, prompts, *, per_request_seeds=False, **kwargs):
    """``sampler(logits, n, seed)`` for check_sampler: step 0 of ``n`` sequences per prompt (the logits are only the
    target's; the draws come from the model).  With ``per_request_seeds`` every row gets its own seed."""

    def sampler(logits, n, seed):
        rows = prompts[torch.arange(logits.shape[0]) % prompts.shape[0]]  # (check_sampler may repeat a lone row)
        seeds = [seed * 1_000_003 + i for i in range(rows.shape[0] * n)] if per_request_seeds else seed
        out = fst.generate(model, rows, max_new_tokens=1, num_return_sequences=n, seed=seeds, **kwargs)
        return out[:, -1].reshape(rows.shape[0], n)

    return sampler


def test_fused_top_k_step_law(model, prompts):
    # Prompt 0 alone (the fused top-k kernel is the slowest to interpret); k = 4 keeps about a third of the mass.
    z = model_logits(model, prompts[:1])
    target = vt.top_k(4, ties="low_index")
    report = verification.check_sampler(generate_sampler(model, prompts[:1], temperature=0.7, top_k=4,
                                                         eos_token_id=[]),
                                        z, target=target, temperature=0.7, alpha=_ALPHA, tv=_TV)  # fmt: skip
    assert report.passed, report.to_markdown()
    # Planted: the truncation lost (the plain softmax).
    plain = generate_sampler(model, prompts[:1], temperature=0.7, eos_token_id=[])
    planted = verification.check_sampler(plain, z, target=target, temperature=0.7, alpha=_ALPHA, tv=_TV_PLANTED)
    q = sampling_law(z[0].double().numpy(), 0.7, top_k=4, top_k_ties="low_index")
    assert tv(softmax(z[0].double().numpy(), 0.7), q) > pearson(planted).min_detectable
    assert not planted.passed


#: The exact path's step: repetition penalty (prompt tokens), the EOS id masked (min_new_tokens), and all three
#: truncations, each binding (asserted below).
_EXACT = dict(temperature=0.9, top_k=12, top_p=0.8, min_p=0.2, repetition_penalty=1.6, min_new_tokens=1)


def exact_target(model, prompts, eos: int, *, repetition=True) -> np.ndarray:
    """float32 target logits of the exact step: the penalty's definition, then the EOS id at -inf."""
    z = model_logits(model, prompts)
    rows = [penalized(z[b], prompts[b].tolist(), repetition=1.6 if repetition else None) for b in range(len(z))]
    out = np.stack(rows).astype(np.float32)
    out[:, eos] = -np.inf
    return out


def test_exact_path_step_law_with_every_processor(model, prompts):
    eos = int(model_logits(model, prompts)[0].argmax())  # the most likely token: min_new_tokens masks it
    z = exact_target(model, prompts, eos)
    target = vt.chain(vt.top_k(12, ties="low_index"), vt.top_p(0.8, ties="low_index"), vt.min_p(0.2))
    conventions = dict(order="transformers", top_k_ties="low_index", top_p_ties="low_index")
    law = sampling_law(z.astype(np.float64), 0.9, top_k=12, top_p=0.8, min_p=0.2, **conventions)
    for drop in ("top_k", "top_p", "min_p"):  # each filter changes the law of a row (by 0.11 to 0.14 in TV)
        rest = {k: v for k, v in dict(top_k=12, top_p=0.8, min_p=0.2).items() if k != drop}
        without = sampling_law(z.astype(np.float64), 0.9, **rest, **conventions)
        assert max(tv(law[b], without[b]) for b in range(2)) > 0.1, drop
    sampler = generate_sampler(model, prompts, per_request_seeds=True, eos_token_id=[eos], pad_token_id=0, **_EXACT)
    report = verification.check_sampler(sampler, z, target=target, temperature=0.9, alpha=_ALPHA, tv=_TV)
    assert report.passed, report.to_markdown()
    # Planted: the truncation lost, and the repetition penalty lost (prompt 1 alone: the penalty moves 0.45 of its
    # mass, 0.14 of prompt 0's).
    one = dict(eos_token_id=[eos], pad_token_id=0, **_EXACT)
    no_truncation = dict(one, top_k=None, top_p=None, min_p=None)
    no_penalty = dict(one, repetition_penalty=None)
    for planted_kwargs, planted_law in [
        (no_truncation, softmax(z[1].astype(np.float64), 0.9)),
        (no_penalty, sampling_law(exact_target(model, prompts, eos, repetition=False)[1].astype(np.float64), 0.9,
                                  top_k=12, top_p=0.8, min_p=0.2, **conventions)),
    ]:  # fmt: skip
        planted = verification.check_sampler(generate_sampler(model, prompts[1:], **planted_kwargs), z[1:],
                                             target=target, temperature=0.9, alpha=_ALPHA, tv=_TV_PLANTED)  # fmt: skip
        assert tv(planted_law, law[1]) > pearson(planted).min_detectable
        assert not planted.passed


def test_step1_law_with_presence_and_frequency_penalties(model, prompts, monkeypatch):
    # Step 1 given the first token a: softmax of the model's logits given (prompt, a), a's logit lowered by
    # frequency * 1 + presence (negative penalties here: a is encouraged, so the penalties move much mass).
    n, T, pres, freq = 512, 0.7, -4.0, -3.0
    prompt = prompts[:1]
    kw = dict(max_new_tokens=2, temperature=T, presence_penalty=pres, frequency_penalty=freq, eos_token_id=[], seed=9)
    out = fst.generate(model, prompt.repeat(n, 1), **kw)
    first, second = out[:, 5].cpu().numpy(), out[:, 6].cpu().numpy()
    a = int(np.bincount(first).argmax())
    z1 = model_logits(model, torch.cat([prompt, torch.tensor([[a]], device=DEVICE)], dim=1))[0]
    p1 = softmax(penalized(z1, prompt[0].tolist(), [a], presence=pres, frequency=freq), T)
    result = verification.assert_samples_match(second[first == a], p1, alpha=1e-4, power=0.99)
    # Planted: the penalties lost at step 1.
    monkeypatch.setattr(step_module, "apply_penalties", lambda z, law, counts: z)
    out = fst.generate(model, prompt.repeat(n, 1), **kw)
    first_p, second_p = out[:, 5].cpu().numpy(), out[:, 6].cpu().numpy()
    scale = np.sqrt((first == a).sum() / (first_p == a).sum())
    assert tv(softmax(z1.double().numpy(), T), p1) > scale * result.min_detectable_tv
    with pytest.raises(AssertionError, match="samples do not match"):
        verification.assert_samples_match(second_p[first_p == a], p1, alpha=1e-4, power=0.99)


# ------------------------------------------------------------------------------------------------
# Per-request seeds: a request's tokens do not depend on its batch
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("processors", [{}, dict(top_p=0.9, repetition_penalty=1.3)], ids=["fused", "exact"])
def test_a_request_decodes_the_same_alone_and_in_another_batch(processors):
    model = tiny_model("llama")
    ids, mask = left_padded_batch(256)  # lengths 7, 5, 4
    kw = dict(max_new_tokens=4, temperature=1.0, eos_token_id=[], **processors)
    alone = fst.generate(model, ids[1:2, 2:], seed=[777], **kw)[:, 5:]  # prompt 1 (length 5) alone, no padding
    batch = fst.generate(model, ids, attention_mask=mask, seed=[5, 777, 6], **kw)[:, 7:]  # at slot 1, padded
    other = fst.generate(model, ids[[2, 0, 1]], attention_mask=mask[[2, 0, 1]], seed=[8, 9, 777], **kw)[:, 7:]
    assert torch.equal(batch[1], alone[0]) and torch.equal(other[2], alone[0])
    # The check can fail: an int seed keys rows by slot, and the same prompt at another slot draws other tokens.
    by_slot = fst.generate(model, ids, attention_mask=mask, seed=777, **kw)[:, 7:]
    moved = fst.generate(model, ids[[2, 0, 1]], attention_mask=mask[[2, 0, 1]], seed=777, **kw)[:, 7:]
    assert not torch.equal(by_slot[1], moved[2])


# ------------------------------------------------------------------------------------------------
# Log-probabilities, sequences, stop strings, streamer, generation config
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "processors",
    [dict(temperature=torch.tensor([0.7, 0.0])), dict(temperature=0.8, top_k=10, top_p=0.9, repetition_penalty=1.4)],
    ids=["fused-with-a-greedy-row", "exact"],
)
def test_output_logprobs_are_the_step_laws(model, prompts, processors):
    processors = {k: v.to(DEVICE) if isinstance(v, torch.Tensor) else v for k, v in processors.items()}
    out = fst.generate(model, prompts, max_new_tokens=3, seed=4, eos_token_id=[], output_logprobs=True, **processors)
    assert isinstance(out, fst.GenerateOutput) and out.logprobs.shape == (2, 3) and out.logprobs.dtype == torch.float32
    assert torch.equal(out.sequences, fst.generate(model, prompts, max_new_tokens=3, seed=4, eos_token_id=[],
                                                   **processors))  # fmt: skip
    temps = processors["temperature"]
    for b in range(2):
        T = float(temps[b]) if isinstance(temps, torch.Tensor) else temps
        for t in range(3):
            seq = out.sequences[b : b + 1, : 5 + t]
            z = penalized(model_logits(model, seq)[0], prompts[b].tolist(), out.sequences[b, 5 : 5 + t].tolist(),
                          repetition=processors.get("repetition_penalty"))  # fmt: skip
            truncations = {k: processors[k] for k in ("top_k", "top_p", "min_p") if k in processors}
            law = sampling_law(
                z,
                T if T > 0 else 1.0,
                **truncations,
                order="transformers",
                top_k_ties="low_index",
                top_p_ties="low_index",
            )  # fmt: skip  (a greedy row's: the T = 1 law)
            token = int(out.sequences[b, 5 + t])
            assert abs(float(out.logprobs[b, t]) - np.log(law[token])) < 1e-4, (b, t)


def test_num_return_sequences_are_rows_of_the_repeated_prompts(model, prompts):
    t2, t6 = torch.tensor([0.5, 2.0], device=DEVICE), torch.tensor([0.5] * 3 + [2.0] * 3, device=DEVICE)
    got = fst.generate(model, prompts, max_new_tokens=2, num_return_sequences=3, temperature=t2, seed=5,
                       eos_token_id=[])  # fmt: skip
    same = fst.generate(model, prompts.repeat_interleave(3, dim=0), max_new_tokens=2, temperature=t6, seed=5,
                        eos_token_id=[])  # fmt: skip
    assert got.shape == (6, 7) and torch.equal(got, same)
    assert len({tuple(r) for r in got[3:, 5:].tolist()}) > 1  # T = 2: the three sequences differ


class _Letters:
    """A tokenizer stand-in: token i is the letter ``'a' + i % 26``."""

    def decode(self, ids):
        return "".join(chr(97 + int(i) % 26) for i in ids)


def test_stop_strings_finish_a_row_after_the_token_that_completes_them(model, prompts):
    kw = dict(max_new_tokens=8, temperature=1.5, seed=12, eos_token_id=[])
    free = fst.generate(model, prompts, **kw)[:, 5:]
    text = _Letters().decode(free[0].tolist())
    stop = text[2:4]  # a 2-letter string the free run of row 0 completes by step 3 (perhaps earlier)
    got = fst.generate(model, prompts, stop_strings=[stop], tokenizer=_Letters(), pad_token_id=0, **kw)[:, 5:]
    for b in range(2):
        row = _Letters().decode(free[b].tolist())
        end = next((t for t in range(len(row)) if stop in row[: t + 1]), None)
        expected = free[b].clone()
        if end is not None:
            expected[end + 1 :] = 0
        assert torch.equal(got[b, : len(expected)], expected[: got.shape[1]])
    assert got.shape[1] <= 8


def test_streamer_receives_the_prompt_each_step_and_the_end(model, prompts):
    class Recorder:
        def __init__(self):
            self.puts, self.ended = [], False

        def put(self, value):
            self.puts.append(value.clone())

        def end(self):
            self.ended = True

    rec = Recorder()
    out = fst.generate(model, prompts, max_new_tokens=3, temperature=1.0, seed=1, eos_token_id=[], streamer=rec)
    assert rec.ended and len(rec.puts) == 4 and torch.equal(rec.puts[0], prompts.cpu())
    assert torch.equal(torch.stack(rec.puts[1:], dim=1), out[:, 5:].cpu())


def test_generation_config_is_honoured_unless_overridden(model, prompts, monkeypatch):
    gen = model.generation_config
    for field, value in dict(do_sample=True, temperature=0.7, top_k=8, max_new_tokens=2).items():
        monkeypatch.setattr(gen, field, value)
    from_config = fst.generate(model, prompts, seed=3, eos_token_id=[])
    assert torch.equal(from_config, fst.generate(model, prompts, temperature=0.7, top_k=8, max_new_tokens=2, seed=3,
                                                 eos_token_id=[]))  # fmt: skip
    assert not torch.equal(from_config, fst.generate(model, prompts, top_k=0, seed=3, eos_token_id=[]))  # overridden
    monkeypatch.setattr(gen, "do_sample", False)  # greedy, as model.generate
    expected = model.generate(prompts, do_sample=False, max_new_tokens=2, pad_token_id=0)
    assert torch.equal(fst.generate(model, prompts, eos_token_id=[]), expected)
    monkeypatch.setattr(gen, "num_beams", 4)
    with pytest.raises(ValueError, match="generation_config.num_beams=4 asks for beam search"):
        fst.generate(model, prompts)
