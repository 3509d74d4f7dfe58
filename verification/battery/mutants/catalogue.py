"""The mutant catalogue: each biased sampler with its mechanism, its case, its law and its seed.

=========================  ==================================================================
mutant                     mechanism
=========================  ==================================================================
uniform-rounds-to-one      float32 ``u = k * 2**-32`` rounds to 1.0: ``-log(-log u) = +inf`` wins
uniform-24bit              24-bit uniforms: Gumbel noise capped at 16.6 nats, far tail starved
race-exponential-floor     exponential race ``argmax p / E`` with ``E`` floored at ``2**-24``
race-fp16-flush            race with ``E`` in float16: ``E = 0`` gives ``p/0 = inf`` or ``0/0 = NaN``
bf16-tile-candidates       per-tile maxima stored in bf16; equal candidates go to the lower tile
tile-seed-overlap          tile ``t`` reads stream offset ``t * k`` with ``k = 127 < 128`` per tile
row-seed-collision         the row is not in the counter: two rows draw identical tokens
sample-offset-shift        sample ``s`` reads offset ``s`` of one stream: ``s + 1`` sees shifted noise
tile-local-counter         counter = offset inside the tile: noise depends on the tile shape
temperature-after-noise    ``(z + G) / T`` instead of ``z / T + G``: the temperature is ignored
ties-lower-index-coarse    11-bit uniforms and ``argmax`` keeping the first of equal scores
last-tile-dropped          grid ``V // BLOCK`` instead of ``ceil``: the last partial tile is never drawn
last-index-masked          mask ``i < V - 1``: the last token (often end-of-text) is never drawn
probs-as-logprobs          ``p_i + G`` where ``log p_i + G`` belongs: nearly uniform draws
bf16-softmax-inverse-cdf   logits and softmax in bf16 before an exact inverse-CDF draw
tp-shared-seed             TP ranks key noise by the local index: equal local slots share noise
tp-rank-by-max-logit       TP factorized combine picks the rank by its largest logit, not log-mass
float32-running-cdf        inverse CDF over a float32 running sum (``torch.multinomial`` on CPU)
top-p-crossing-dropped     top-p compares the mass *including* the token (``cumsum <= p``)
top-p-before-temperature   top-p decided at ``T = 1``, the draw made at ``T``
top-p-unrenormalized-...   top-p's cumulative sum over the softmax before top-k renormalized it
top-k-ties-by-index        exactly ``k`` by a stable sort where all tokens tied at the cut belong
min-p-strict               ``P(i) > p max P`` instead of ``>=``
spec-residual-unnormalized the speculative residual's inverse CDF never divided by its mass
spec-residual-float16      the speculative residual ``max(p - q, 0)`` computed in float16
spec-resample-from-target  a rejected draft replaced by a draw from ``p``, not the residual
=========================  ==================================================================

:data:`CONTROLS` are exact samplers run through the same machinery; they must pass.  The cases
(:func:`mutant_cases`) hold float32-representable logits on which each defect shows; the last six
(:func:`_target_cases`) carry a ``target`` (top-p, top-k, min-p, a chain) or are the target of a
speculative step, and their mutants (:mod:`.truncation`, :mod:`.speculative`) have exact laws from
:mod:`flashsampling.targets` with the wrong convention or residual.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..aims import chain, min_p, top_k, top_p
from ..cases import Case
from . import laws
from . import samplers as S
from . import speculative as SP
from . import truncation as TR
from .samplers import Sampler

# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------


def _f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).astype(np.float64)


@lru_cache(maxsize=1)
def mutant_cases() -> dict[str, Case]:
    """The logits cases on which the mutants show (float32-representable logits)."""
    rng = np.random.default_rng(20261205)
    c: dict[str, Case] = {}
    v = 262144
    z = np.full(v, -20.0)
    z[0] = 0.0
    c["tail20-V262144"] = Case("tail20-V262144", z, 1.0, "one token at 0, 262143 tokens 20 nats below (p_T=5.4e-4)",
                               tail_gap=19.0)  # fmt: skip
    z = np.full(v, -np.inf)
    z[:64] = _f32(rng.normal(0, 1, 64))
    c["grammar-V262144"] = Case("grammar-V262144", z, 1.0, "grammar mask: 64 allowed tokens, 262080 at -inf")
    c["flat30-V4096"] = Case("flat30-V4096", np.full(4096, 30.0), 1.0, "4096 equal logits at 30 (32 tiles)",
                             flat=True)  # fmt: skip
    c["flat-V1024"] = Case("flat-V1024", np.zeros(1024), 1.0, "1024 equal logits", flat=True)
    c["flat-V16"] = Case("flat-V16", np.zeros(16), 1.0, "16 equal logits (full contingency table)", flat=True)
    c["normal-V256"] = Case("normal-V256", _f32(rng.normal(0, 1, 256)), 1.0, "N(0, 1) logits, two 128-token tiles")
    z = _f32(rng.normal(0, 2, 1000))
    c["normal-V1000"] = Case("normal-V1000", z, 1.0, "N(0, 2^2) logits, 8 tiles (last one partial)")
    c["normal-V1000-T0.6"] = Case("normal-V1000-T0.6", z, 0.6, "N(0, 2^2) logits at temperature 0.6")
    c["normal-V1024-4ranks"] = Case("normal-V1024-4ranks", _f32(rng.normal(0, 2, 1024)), 1.0,
                                    "N(0, 2^2) logits over 4 shards of 256")  # fmt: skip
    v = 50257
    c["normal-V50257"] = Case("normal-V50257", _f32(rng.normal(0, 2, v)), 1.0,
                              "N(0, 2^2) logits, GPT-2 vocabulary size (81-token last tile)")  # fmt: skip
    z = _f32(rng.normal(0, 2, v))
    z[-1] = np.float32(np.log(0.02 / 0.98 * np.exp(z[:-1].astype(np.float64)).sum()))
    c["eos-V50257"] = Case("eos-V50257", _f32(z), 1.0, "GPT-2 size, end-of-text token V-1 at p = 0.02")
    c["bf16-V16"] = Case("bf16-V16", _f32(20 + rng.normal(0, 2, 16)), 1.0, "16 logits near 20, not bf16-representable")
    z = np.full(512, -8.0)
    z[0] = 4.0
    z[256:] = _f32(rng.normal(0, 0.5, 256))
    c["tp-peaked-vs-broad"] = Case("tp-peaked-vs-broad", z, 1.0,
                                   "rank 0: one logit at 4; rank 1: 256 logits near 0 (84% of the mass)")  # fmt: skip
    c.update(_target_cases())
    return c


#: Parameters of the target cases (the mutants' samplers and laws take the same values).
TOP_P = 0.9
TOP_K = 50
TOP_K_TOP_P = 0.8
TIES_K = 20
#: Min-p at exactly the relative probability ``exp(-2.25)`` of the tokens 2.25 nats below the top.
MIN_P = float(np.exp(-2.25))


def _target_cases() -> dict[str, Case]:
    """Cases whose law is a truncation or a speculative step (``Case.target``); float32 logits."""
    rng = np.random.default_rng(20261206)
    c: dict[str, Case] = {}
    z = _f32(rng.normal(0, 2, 1000))
    c["topp0.9-V1000"] = Case("topp0.9-V1000", z, 1.0, "N(0, 2^2) logits, top-p 0.9 (263 tokens kept)",
                              target=top_p(TOP_P))  # fmt: skip
    c["topp0.9-V1000-T0.7"] = Case("topp0.9-V1000-T0.7", z, 0.7, "the same logits, top-p 0.9 at temperature 0.7 "
                                   "(88 tokens kept)", target=top_p(TOP_P))  # fmt: skip
    both = chain(top_k(TOP_K), top_p(TOP_K_TOP_P))
    c["topk50-topp0.8-V1000"] = Case("topk50-topp0.8-V1000", z, 1.0, "the same logits, top-k 50 then top-p 0.8 "
                                     "(top 50 hold 60% of the softmax)", target=both)  # fmt: skip
    zq = np.round(rng.normal(0, 2, 1000) * 4) / 4
    c["topk20-ties-V1000"] = Case("topk20-ties-V1000", zq, 1.0, "N(0, 2^2) logits on a 0.25 grid; top-k 20 cuts "
                                  "a group of 15 tied logits after 5", target=top_k(TIES_K))  # fmt: skip
    zm = np.minimum(np.round(rng.normal(0, 1.5, 1000) * 4) / 4, 4.75)
    zm[0] = 5.0
    zm[zm == 2.75] = 2.5
    zm[1:9] = 2.75
    c["minp-boundary-V1000"] = Case("minp-boundary-V1000", zm, 1.0, "logits on a 0.25 grid, top at 5, 8 tokens at "
                                    "2.75: min-p e^-2.25 lies exactly on them", target=min_p(MIN_P))  # fmt: skip
    c["spec-tail17-V32768"] = Case("spec-tail17-V32768", np.r_[0.0, np.full(32767, -17.0)], 1.0,
                                   "target: one token at 0, 32767 at -17; draft: 1/2 on token 0, 1/2 on "
                                   "tokens 1-1024", tail_gap=16.0)  # fmt: skip
    return c


# --------------------------------------------------------------------------------------------
# The catalogue
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mutant:
    """One biased (or, for controls, exact) sampler and where it shows.

    Attributes
    ----------
    name : str
    mechanism : str
        One line: what is wrong and what it does to the draws.
    sample : callable
        ``(logits (V,) float64, temperature, n, seed) -> int64 (n,)``.
    case : str
        Name of its case in :func:`mutant_cases`.
    law : callable or None
        ``law(case) -> q (V,)``, the sampler's exact distribution on its case; ``None``: estimated
        from ``law_draws`` draws.
    law_note : str
        ``"exact"`` or how the law was obtained.
    paired : bool
        Draws ``2j`` and ``2j + 1`` must be independent (rows or consecutive samples).
    joint : callable or None
        ``joint(case) -> (V, V)`` law of a pair, for paired mutants; ``None``: estimated.
    seed : int
        Seed of the draws in ``tests/test_mutants.py``.
    control : bool
        An exact sampler that must pass (a check on the machinery).
    """

    name: str
    mechanism: str
    sample: Sampler
    case: str
    law: Callable[[Case], np.ndarray] | None
    seed: int
    law_note: str = "exact"
    paired: bool = False
    joint: Callable[[Case], np.ndarray] | None = None
    control: bool = False
    law_draws: int = 2_000_000

    @property
    def the_case(self) -> Case:
        return mutant_cases()[self.case]


_M = Mutant
MUTANTS: tuple[Mutant, ...] = (
    _M(
        "uniform-rounds-to-one",
        "u = float32(k)*2^-32 rounds to 1.0 for 128 of 2^32 values: noise +inf, a random "
        "token wins (2^-25 per token per draw)",
        S.uniform_rounds_to_one,
        "tail20-V262144",
        laws.uniform_rounds_to_one,
        501,
    ),
    _M(
        "uniform-24bit",
        "u = (k>>8)*2^-24 <= 1-2^-24: Gumbel noise capped at 16.6 nats, tokens 20 nats below the top never win",
        S.uniform_24bit,
        "tail20-V262144",
        laws.uniform_24bit,
        502,
    ),
    _M(
        "race-exponential-floor",
        "argmax p/E with E clamped to >= 2^-24: p/E capped at p*2^24, the tail 20 nats down is starved",
        S.race_exponential_floor,
        "tail20-V262144",
        laws.race_exponential_floor,
        503,
    ),
    _M(
        "race-fp16-flush",
        "E in float16 is 0 with probability 2^-25: 0/0 = NaN wins argmax and a masked token is "
        "drawn (p/0 = inf for allowed ones)",
        S.race_fp16_flush,
        "grammar-V262144",
        laws.race_fp16_flush,
        504,
        law_note="exact impossible mass; allowed part approximated by p (float16 rounding of E < 1e-4 relative)",
    ),
    _M(
        "bf16-tile-candidates",
        "per-tile max score stored in bf16 (0.25 grid at 32-64): equal candidates resolve to the lower tile",
        S.bf16_tile_candidates,
        "flat30-V4096",
        laws.bf16_tile_candidates,
        505,
    ),
    _M(
        "tile-seed-overlap",
        "tile t starts at stream offset t*127 but uses 128 numbers: tokens 127 and 128 share "
        "a Gumbel, the lower logit is never drawn",
        S.tile_seed_overlap,
        "normal-V256",
        laws.tile_seed_overlap,
        506,
    ),
    _M(
        "row-seed-collision",
        "row index missing from the noise counter: rows with equal logits (parallel samples "
        "of one prompt) draw identical tokens",
        S.row_seed_collision,
        "flat-V16",
        laws.exact,
        507,
        paired=True,
        joint=laws.row_seed_collision_joint,
    ),
    _M(
        "sample-offset-shift",
        "sample s reads stream offset s (advance 1, not V): sample s+1 gets s's noise shifted by one token",
        S.sample_offset_shift,
        "flat-V16",
        laws.exact,
        508,
        paired=True,
        joint=None,
        law_note="exact marginal; joint law of (s, s+1) simulated",
    ),
    _M(
        "tile-local-counter",
        "noise counter = offset inside the tile (depends on BLOCK_V): every tile reuses one "
        "noise vector, 7 in 8 tokens starved",
        S.tile_local_counter,
        "normal-V1000",
        laws.tile_local_counter,
        509,
    ),
    _M(
        "temperature-after-noise",
        "argmax (z+G)/T instead of z/T+G: the scaling cannot change the argmax, draws follow softmax(z) for every T",
        S.temperature_after_noise,
        "normal-V1000-T0.6",
        laws.temperature_after_noise,
        510,
    ),
    _M(
        "ties-lower-index-coarse",
        "11-bit uniforms (float16 rand) make equal scores common; argmax keeps the first, favouring low indices",
        S.ties_lower_index_coarse,
        "flat-V1024",
        laws.ties_lower_index_coarse,
        511,
    ),
    _M(
        "last-tile-dropped",
        "grid V//BLOCK instead of cdiv(V, BLOCK): the last partial tile (81 tokens of 50257) is never sampled",
        S.last_tile_dropped,
        "normal-V50257",
        laws.last_tile_dropped,
        512,
    ),
    _M(
        "last-index-masked",
        "off-by-one mask offs < V-1: token V-1 (GPT-2's end-of-text) is never drawn",
        S.last_index_masked,
        "eos-V50257",
        laws.last_index_masked,
        513,
    ),
    _M(
        "probs-as-logprobs",
        "argmax p_i + G_i (probabilities for log-probabilities): draws follow softmax(p), nearly uniform",
        S.probs_as_logprobs,
        "normal-V1000",
        laws.probs_as_logprobs,
        514,
    ),
    _M(
        "bf16-softmax-inverse-cdf",
        "logits and softmax in bf16 (0.125-nat grid near 20) before an exact inverse-CDF "
        "draw: probabilities off by up to 6%",
        S.bf16_softmax_inverse_cdf,
        "bf16-V16",
        laws.bf16_softmax_inverse_cdf,
        515,
    ),
    _M(
        "tp-shared-seed",
        "4 TP ranks key noise by local index with one seed: slot j of every shard shares a "
        "Gumbel, only the largest of the 4 wins",
        S.tp_shared_seed,
        "normal-V1024-4ranks",
        laws.tp_shared_seed,
        516,
    ),
    _M(
        "tp-rank-by-max-logit",
        "TP factorized combine picks the rank by its largest logit instead of its log-mass: broad shards lose",
        S.tp_rank_by_max_logit,
        "tp-peaked-vs-broad",
        laws.tp_rank_by_max_logit,
        517,
    ),
    _M(
        "float32-running-cdf",
        "inverse CDF over a float32 running sum (torch.multinomial on CPU): past 0.9995 a "
        "2e-9 step rounds away, the tail is never drawn",
        S.float32_running_cdf,
        "tail20-V262144",
        laws.float32_running_cdf,
        518,
    ),
    _M(
        "top-p-crossing-dropped",
        "top-p removes cumsum > p without shifting by one: the mass compared includes the token itself, "
        "so the token that crosses p is dropped",
        TR.bind(TR.top_p, p=TOP_P, mass="inclusive"),
        "topp0.9-V1000",
        TR.law(top_p=TOP_P, top_p_crossing="drop", top_p_strict=False),
        519,
    ),
    _M(
        "top-p-before-temperature",
        "top-p decided on softmax(z) and the draw made at T = 0.7: at T = 1 the nucleus is wider, "
        "175 tokens outside the target's are kept",
        TR.bind(TR.top_p, p=TOP_P, before_temperature=True),
        "topp0.9-V1000-T0.7",
        TR.law(top_p=TOP_P, order=("top_p", "temperature")),
        520,
    ),
    _M(
        "top-p-unrenormalized-after-top-k",
        "top-p's cumulative sum over the full softmax instead of the top-k renormalized one (a joint "
        "filter): the 50 top-k tokens hold 0.6 < p, so all are kept",
        TR.bind(TR.top_k_top_p, k=TOP_K, p=TOP_K_TOP_P, renormalize=False),
        "topk50-topp0.8-V1000",
        TR.law(top_k=TOP_K, top_p=TOP_K_TOP_P, order="joint"),
        521,
    ),
    _M(
        "top-k-ties-by-index",
        "top-k keeps exactly k by a stable sort (torch.topk, lax.top_k) where the target keeps every "
        "token tied at the k-th logit: 10 tied tokens of higher index never drawn",
        TR.bind(TR.top_k, k=TIES_K, ties="index"),
        "topk20-ties-V1000",
        TR.law(top_k=TIES_K, top_k_ties="low_index"),
        522,
    ),
    _M(
        "min-p-strict",
        "min-p keeps P(i) > p max P instead of >=: the 8 tokens exactly at the threshold are dropped",
        TR.bind(TR.min_p, p=MIN_P, strict=True),
        "minp-boundary-V1000",
        TR.law(min_p=MIN_P, min_p_strict=True),
        523,
    ),
    _M(
        "spec-residual-unnormalized",
        "speculative step: inverse CDF over max(p - q, 0) never divided by its sum; u past the residual "
        "mass is clamped to token V-1",
        SP.sampler("unnormalized"),
        "spec-tail17-V32768",
        SP.law("unnormalized"),
        524,
    ),
    _M(
        "spec-residual-float16",
        "speculative step: residual max(p - q, 0) in float16: tail residuals of 4.1e-8 round to the "
        "subnormal 6.0e-8 (+44%), the tail is over-drawn",
        SP.sampler("float16"),
        "spec-tail17-V32768",
        SP.law("float16"),
        525,
    ),
    _M(
        "spec-resample-from-target",
        "speculative step: a rejected draft is replaced by a draw from p instead of the residual: tokens "
        "the draft never proposes are drawn at half their rate",
        SP.sampler("target"),
        "spec-tail17-V32768",
        SP.law("target"),
        526,
    ),
)

CONTROLS: tuple[Mutant, ...] = (
    _M(
        "exact-inverse-cdf",
        "float64 inverse CDF of the exact softmax",
        S.exact_inverse_cdf,
        "tail20-V262144",
        laws.exact,
        601,
        control=True,
    ),
    _M(
        "exact-gumbel-runs",
        "continuous Gumbel through the run machinery (max of M Gumbels = Gumbel + log M)",
        S.exact_gumbel_runs,
        "tail20-V262144",
        laws.exact,
        602,
        control=True,
    ),
    _M(
        "exact-race-runs",
        "exact exponential race through the run machinery (min of M exponentials = Exp/M)",
        S.exact_race_runs,
        "grammar-V262144",
        laws.exact,
        603,
        control=True,
    ),
    _M(
        "exact-gumbel-runs-flat",
        "continuous Gumbel through the run machinery, split at 128-token tiles",
        S.exact_gumbel_runs_tiled,
        "flat30-V4096",
        laws.exact,
        604,
        control=True,
    ),
    _M(
        "exact-top-p",
        "the top-p sampler with the shift (mass before the token < p), temperature first",
        TR.bind(TR.top_p, p=TOP_P),
        "topp0.9-V1000",
        laws.exact,
        605,
        control=True,
    ),
    _M(
        "exact-top-p-T0.7",
        "the top-p sampler at temperature 0.7, temperature first",
        TR.bind(TR.top_p, p=TOP_P),
        "topp0.9-V1000-T0.7",
        laws.exact,
        606,
        control=True,
    ),
    _M(
        "exact-top-k-top-p",
        "top-k, then top-p on the renormalized top-k probabilities",
        TR.bind(TR.top_k_top_p, k=TOP_K, p=TOP_K_TOP_P),
        "topk50-topp0.8-V1000",
        laws.exact,
        607,
        control=True,
    ),
    _M(
        "exact-top-k-ties",
        "top-k keeping every logit >= the k-th largest",
        TR.bind(TR.top_k, k=TIES_K),
        "topk20-ties-V1000",
        laws.exact,
        608,
        control=True,
    ),
    _M(
        "exact-min-p",
        "min-p keeping P(i) >= p max P",
        TR.bind(TR.min_p, p=MIN_P),
        "minp-boundary-V1000",
        laws.exact,
        609,
        control=True,
    ),
    _M(
        "exact-speculative-step",
        "the speculative step with the normalized float64 residual",
        SP.sampler("exact"),
        "spec-tail17-V32768",
        laws.exact,
        610,
        control=True,
    ),
)


def catalogue(*, controls: bool = False) -> list[Mutant]:
    """The mutants (and, with ``controls=True``, the exact control samplers after them)."""
    return list(MUTANTS) + (list(CONTROLS) if controls else [])


def mutant(name: str) -> Mutant:
    """The catalogue entry called ``name`` (controls included); ``KeyError`` names the missing one."""
    for m in catalogue(controls=True):
        if m.name == name:
            return m
    raise KeyError(f"no mutant named {name!r}")
