"""Every check of proofs/ can fail on the defect it guards (issue 33, item 2).

For each check function of each ``proofs/check_*.py`` (and of ``counters.py``, ``noise_bound.py``), a defect of the
kind it guards is planted -- in the shipped code where the check reads the shipped code (by ``monkeypatch``, so
nothing leaks), or in the theorem it checks where it checks mathematics (a bound smaller than the largest exact
value the check computes) -- and the check must report it.  ``REGISTRY`` maps every check function to the test that
plants its defect (here or in the module's own test file); ``NOT_CHECKS`` lists the other public functions, with why
they are not checks.  ``test_every_check_has_a_mutation_test`` fails when a check function is added without either.
"""

from __future__ import annotations

import importlib
import inspect

import numpy as np
import pytest

import flashsampling
import flashsampling.noise as noise
from proofs import check_argmax_decomposition as argmax_chk
from proofs import check_float32_noise as noise_chk
from proofs import check_float32_scores as scores_chk
from proofs import check_gumbel_max as gumbel_chk
from proofs import check_max_stability as stability_chk
from proofs import check_second_level as second_chk
from proofs import check_tile_inverse_cdf as tile_chk

#: Checks that run the kernels on CPU tensors through the interpreter (bit for bit with the twins); on a GPU host
#: the kernels run compiled and refuse CPU tensors: the compiled kernels' checks are ``proofs/gpu_checks.py``.
interpreted_only = pytest.mark.skipif(
    not flashsampling.INTERPRET, reason="CPU tensors through the interpreted kernels (GPU: proofs/gpu_checks.py)"
)


# ----------------------------------------------------------------------------------------------
# Planted defects in the shipped code
# ----------------------------------------------------------------------------------------------


def lower_index_select(scores, keys):
    """A planted tie rule: exact ties to the lower index, keys ignored (a biased rule that still decomposes)."""
    m = np.asarray(scores).max(axis=-1, keepdims=True)
    return np.argmax(np.asarray(scores) == m, axis=-1)


def pair_shared_noise(shipped):
    """A planted token noise: the odd token of a pair gets its even neighbour's noise (dependent noise)."""

    def planted(seed, row, index, sample, stream=noise.STREAM_TOKEN, *, lazy_keys=False):
        index = np.asarray(index, dtype=np.uint32) & np.uint32(0xFFFFFFFE)
        return shipped(seed, row, index, sample, stream, lazy_keys=lazy_keys)

    return planted


def test_tie_keys_from_the_token_block_are_caught(monkeypatch):
    monkeypatch.setattr(noise, "tie_key_np", argmax_chk.token_block_key)
    assert argmax_chk.tie_keys_as_documented(v=256, rows=2, samples=2) > 400


def test_a_twin_rule_off_the_order_is_caught(monkeypatch):
    """decomposition_trials and twin_tiles_equal_full hold the twin's select to the order (score, key, -index)."""
    monkeypatch.setattr(argmax_chk, "select", lower_index_select)
    assert argmax_chk.decomposition_trials(n_trials=200, seed=2)[0] > 0
    assert argmax_chk.twin_tiles_equal_full(v=200, rows=4, samples=3, tiles=(1, 64), seed=5) > 0


def test_a_biased_tie_break_is_caught(monkeypatch):
    import flashsampling.twin as twin

    monkeypatch.setattr(twin, "select", lower_index_select)
    assert argmax_chk.greedy_tie_uniformity(v=6, n=6_000) < 1e-6


def test_dependent_token_noise_is_caught_by_the_statistical_checks(monkeypatch):
    """twin_goodness_of_fit (gumbel_max.md) and twin_group_statistics (max_stability.md), the pair's noise shared."""
    import flashsampling.twin as twin

    monkeypatch.setattr(twin, "token_noise_np", pair_shared_noise(noise.token_noise_np))
    assert gumbel_chk.twin_goodness_of_fit(n=4_000) < 1e-6
    monkeypatch.setattr(stability_chk, "token_noise_np", pair_shared_noise(noise.token_noise_np))
    assert min(stability_chk.twin_group_statistics(n=4_000).values()) < 1e-6


def test_the_truncating_x_is_caught(monkeypatch):
    monkeypatch.setattr(noise, "exponential_from_bits_np", noise_chk.truncating_exponential)
    assert noise_chk.x_construction_matches(n=20_000) > 0


def test_noise_outside_6_1_is_caught():
    """noise_accuracy holds the noise to (6.1): without the Fast2Sum correction, E is 0 for x < 2**-25."""
    keys = np.concatenate([noise_chk.adversarial_keys(), noise_chk.log_uniform_keys(20_000, 2)])
    assert not noise_chk.noise_accuracy(keys, noise_chk.planted_no_correction_gumbel).within_bounds


def test_a_kernel_noise_off_the_twin_is_caught(monkeypatch):
    """kernel_gumbel's comparison with the twin (bit for bit in the interpreter) sees a twin computed otherwise."""
    k = noise_chk.log_uniform_keys(4_000, 3)
    w0, w1 = noise_chk.split_words(k)
    monkeypatch.setattr(noise_chk, "exponential_from_bits_np", noise_chk.truncating_exponential)
    assert not np.array_equal(
        noise_chk.kernel_gumbel(w0, w1).view(np.uint32), noise_chk.twin_gumbel(w0, w1).view(np.uint32)
    )


@interpreted_only
def test_a_float32_group_noise_is_caught():
    """check_second_level (the twins against 40 digits, and near-ties), check_factorization and
    check_tensor_parallel (the near-ties of the draws they run) with the group noise computed in float32."""
    from proofs import check_factorization, check_tensor_parallel

    lem = second_chk.lemmas()
    with second_chk.float32_group_noise():
        assert second_chk.float64_spot_checks(lem, n=100)["gumbel64"] > 1.0
        assert all(second_chk.group_draw_near_ties(draw=d)["wrong"] > 0 for d in second_chk.NEAR_TIE_DRAWS)
    assert check_factorization.group_noise_near_ties() == {"shipped": 0, "planted float32 group noise": 23}
    assert check_tensor_parallel.group_noise_near_ties() == {"shipped": 0, "planted float32 group noise": 23}


@interpreted_only
def test_bf16_tile_log_masses_are_caught(monkeypatch):
    """logmass_example holds the shipped stage 1's log-masses to logmass_tolerance: rounded to bf16 they are not."""
    import torch

    import flashsampling.grouped as grouped

    shipped = grouped.grouped_partials_from_logits

    def bf16(*args, **kwargs):
        parts = shipped(*args, **kwargs)
        parts.logmass.copy_(parts.logmass.to(torch.bfloat16).to(parts.logmass.dtype))
        return parts

    monkeypatch.setattr(grouped, "grouped_partials_from_logits", bf16)
    res = second_chk.logmass_example(v=1024)
    assert res["max_abs_error"] > res["tolerance"]


def test_a_polynomial_one_ulp_off_is_caught(monkeypatch):
    """exp2_error against the documented eta: c_1 one ulp up gives 1.92 * 2**-24 (the old threshold, 2, let it
    pass); exp2_tiny_is_one: c_0 one ulp up breaks P(tiny) = 1."""
    from flashsampling.tile_cdf import weights

    bad = weights.EXP2_COEFFS.copy()
    bad[1] = np.nextafter(bad[1], np.float32(1))
    monkeypatch.setattr(weights, "EXP2_COEFFS", bad)
    assert tile_chk.exp2_error(n_points=1 << 14) / 2.0**-24 > tile_chk.documented_eta_units()
    bad0 = weights.EXP2_COEFFS.copy()
    bad0[0] = np.nextafter(bad0[0], np.float32(2))
    monkeypatch.setattr(weights, "EXP2_COEFFS", bad0)
    assert not tile_chk.exp2_tiny_is_one()


def test_an_off_by_one_in_the_shipped_tile_draw_is_caught():
    assert tile_chk.shipped_draw_at_boundaries(n_tiles=6)["wrong"] == 0
    assert tile_chk.planted_off_by_one_draws()["wrong"] > 0


def test_an_off_by_one_in_the_proofs_draw_is_caught(monkeypatch):
    """index_law_trials: the enumeration of draw_index against the closed form sees ``t + 1``."""
    shipped = tile_chk.draw_index
    monkeypatch.setattr(tile_chk, "draw_index", lambda q, u, u_bits=128: shipped(q, min(u + 1, 2**u_bits - 1), u_bits))
    assert tile_chk.index_law_trials(n_trials=20, u_bits=8)["enumeration != closed form"] > 0


# ----------------------------------------------------------------------------------------------
# Planted bounds: a bound smaller than what the check computes exactly
# ----------------------------------------------------------------------------------------------


def test_a_smaller_rounding_bound_is_caught(monkeypatch):
    """rounding_tv / rounding_scan (Theorem 4): a bound below the largest exact TV / h**2 found (0.0151) fails."""
    monkeypatch.setattr(scores_chk, "rounding_tv_bound", lambda h: 0.012 * h**2)
    r = scores_chk.rounding_tv((0.0, -1.0), 2.0**-4, offset=0.0371)
    assert r.tv > r.bound


def test_a_smaller_grid_bound_is_caught(monkeypatch):
    """hybrid_rounding_trials (Theorem 2b with rounded scores): a grid bound below its exact TV fails."""
    r = scores_chk.hybrid_rounding_trials(cases=((0.0, -0.3, -2.0),), hs=(2.0**-4,))[0]
    assert r["tv_grid_cont"] <= r["bound_grid_cont"]
    assert r["tv_grid_cont"] > r["bound_grid_cont"] / 40


def test_a_smaller_lemma_5_bound_is_caught(monkeypatch):
    shipped = scores_chk.lemma5_bound
    monkeypatch.setattr(scores_chk, "lemma5_bound", lambda e: 0.99 * shipped(e))
    assert scores_chk.perturbation_trials(n=10, seed=1)[0] > 1.0


def test_a_bound_4x_smaller_on_the_accumulation_is_caught(monkeypatch):
    """fp32_logits' bound (fp32_logit_error_bound) divided by 4: worst_case_accumulation's error exceeds it."""
    shipped = scores_chk.fp32_logit_error_bound
    monkeypatch.setattr(scores_chk, "fp32_logit_error_bound", lambda h, w: shipped(h, w) / 4)
    assert scores_chk.worst_case_accumulation(d=1024)["ratio"] > 1.0


def test_a_bound_4x_smaller_on_the_tensor_core_model_is_caught(monkeypatch):
    shipped = scores_chk.tensor_core_error_bound
    monkeypatch.setattr(scores_chk, "tensor_core_error_bound", lambda h, w: shipped(h, w) / 4)
    assert scores_chk.tensor_core_model_trials(n=4, d=128)["max_over_tc_bound"] > 1.0


def test_a_smaller_temperature_bound_is_caught(monkeypatch):
    """temperature_scaling's gamma_3 with u / 4: the measured relative error (1.78 u) exceeds it."""
    monkeypatch.setattr(scores_chk, "U32", 2.0**-26)
    assert any(r.max_rel_err > r.rel_bound for r in scores_chk.temperature_scaling(v=2000, b=2))


def test_a_smaller_grid_law_bound_is_caught():
    """bits_scan (Theorem 2b on exact grid laws): the exact TV is within 80 of V'/2**b, so the comparison is live."""
    from proofs import check_grid_noise as grid_chk

    scan = grid_chk.bits_scan((0.0, -1.0, -3.0), bits_list=(4, 6))
    assert all(t > grid_chk.hybrid_tv_bound(3, b) / 80 for b, t in zip(scan.bits, scan.tv))


def test_theorem_9_is_not_vacuous():
    """noise_bound: the exact TV that a planted perturbation of every grid point's noise by +-eps causes on an
    enumerated law is within a factor 16 of Theorem 9's bound (so a bound 16 times smaller fails)."""
    from proofs import check_end_to_end as e2e

    r = e2e.theorem9_on_exact_laws(bits=14)
    assert r["tv"] <= r["bound"] < 16 * r["tv"]


# ----------------------------------------------------------------------------------------------
# The registry
# ----------------------------------------------------------------------------------------------

#: (module, check function) -> the test (``file::name``) that plants its defect.
REGISTRY = {
    ("check_argmax_decomposition", "tie_keys_as_documented"): "test_tie_keys_from_the_token_block_are_caught",
    ("check_argmax_decomposition", "decomposition_trials"): "test_a_twin_rule_off_the_order_is_caught",
    ("check_argmax_decomposition", "twin_tiles_equal_full"): "test_a_twin_rule_off_the_order_is_caught",
    ("check_argmax_decomposition", "greedy_tie_uniformity"): "test_a_biased_tie_break_is_caught",
    ("check_argmax_decomposition", "fast_pass_trials"):
        "test_argmax_decomposition.py::test_fast_pass_check_catches_a_broken_fast_pass",
    ("check_factorization", "enumerated_laws"): "test_factorization.py::test_every_planted_defect_changes_a_law",
    ("check_factorization", "grouped_twin_pvalues"): "test_factorization.py::test_recorded_results_are_current",
    ("check_factorization", "group_noise_near_ties"): "test_a_float32_group_noise_is_caught",
    ("check_float32_noise", "noise_accuracy"): "test_noise_outside_6_1_is_caught",
    ("check_float32_noise", "exhaustive_scan"): "test_float32_noise.py::test_scan_catches_a_missing_correction",
    ("check_float32_noise", "scan_part"): "test_float32_noise.py::test_scan_catches_a_missing_correction",
    ("check_float32_noise", "x_construction_matches"): "test_the_truncating_x_is_caught",
    ("check_float32_noise", "kernel_gumbel"): "test_a_kernel_noise_off_the_twin_is_caught",
    ("check_float32_noise", "class_boundaries"): "test_float32_noise.py::test_class_boundaries_are_verified",
    ("check_float32_scores", "rounding_tv"): "test_a_smaller_rounding_bound_is_caught",
    ("check_float32_scores", "rounding_scan"): "test_a_smaller_rounding_bound_is_caught",
    ("check_float32_scores", "hybrid_rounding_trials"): "test_a_smaller_grid_bound_is_caught",
    ("check_float32_scores", "perturbation_trials"): "test_a_smaller_lemma_5_bound_is_caught",
    ("check_float32_scores", "fp32_logits"): "test_a_bound_4x_smaller_on_the_accumulation_is_caught",
    ("check_float32_scores", "worst_case_accumulation"): "test_a_bound_4x_smaller_on_the_accumulation_is_caught",
    ("check_float32_scores", "tensor_core_model_trials"): "test_a_bound_4x_smaller_on_the_tensor_core_model_is_caught",
    ("check_float32_scores", "temperature_scaling"): "test_a_smaller_temperature_bound_is_caught",
    ("check_grid_noise", "bits_scan"): "test_a_smaller_grid_law_bound_is_caught",
    ("check_grid_noise", "grid_tv_scan"): "test_grid_noise.py::test_recorded_results_are_current",
    ("check_grid_noise", "cross_check_two_level"): "test_grid_noise.py::test_recorded_results_are_current",
    ("check_gumbel_max", "twin_goodness_of_fit"): "test_dependent_token_noise_is_caught_by_the_statistical_checks",
    ("check_max_stability", "twin_group_statistics"): "test_dependent_token_noise_is_caught_by_the_statistical_checks",
    ("check_second_level", "float64_spot_checks"): "test_a_float32_group_noise_is_caught",
    ("check_second_level", "group_draw_near_ties"): "test_a_float32_group_noise_is_caught",
    ("check_second_level", "lemmas"): "test_second_level.py::test_the_analysis_sees_a_shortened_polynomial",
    ("check_second_level", "log64_lemma"): "test_second_level.py::test_the_analysis_sees_a_shortened_polynomial",
    ("check_second_level", "exp64_lemma"): "test_second_level.py::test_the_analysis_sees_a_shortened_polynomial",
    ("check_second_level", "gumbel64_lemma"): "test_second_level.py::test_the_analysis_sees_a_shortened_polynomial",
    ("check_second_level", "constants_ok"):
        "test_second_level.py::test_constants_are_the_designs_and_a_changed_one_is_caught",
    ("check_second_level", "coin_counts"): "test_second_level.py::test_planted_coins_are_caught",
    ("check_second_level", "logmass_example"): "test_bf16_tile_log_masses_are_caught",
    ("check_tensor_parallel", "check_worlds"): "test_tensor_parallel.py::test_every_planted_defect_is_caught",
    ("check_tensor_parallel", "group_noise_near_ties"): "test_a_float32_group_noise_is_caught",
    ("check_tile_inverse_cdf", "exp2_error"): "test_a_polynomial_one_ulp_off_is_caught",
    ("check_tile_inverse_cdf", "exp2_error_binade"):
        "test_tile_inverse_cdf.py::test_exp2_scan_catches_a_wrong_coefficient",
    ("check_tile_inverse_cdf", "exp2_error_exhaustive"):
        "test_tile_inverse_cdf.py::test_exp2_scan_catches_a_wrong_coefficient",
    ("check_tile_inverse_cdf", "exp2_tiny_is_one"): "test_a_polynomial_one_ulp_off_is_caught",
    ("check_tile_inverse_cdf", "index_law_trials"): "test_an_off_by_one_in_the_proofs_draw_is_caught",
    ("check_tile_inverse_cdf", "shipped_draw_at_boundaries"): "test_an_off_by_one_in_the_shipped_tile_draw_is_caught",
    ("check_tile_inverse_cdf", "run"): "test_tile_inverse_cdf.py::test_design_passes_and_every_defect_is_caught",
    ("counters", "layout_mismatches"): "test_counters.py::test_a_twin_off_its_documented_block_is_caught",
    ("noise_bound", "noise_bound"): "test_theorem_9_is_not_vacuous",
    ("check_end_to_end", "theorem9_on_exact_laws"): "test_theorem_9_is_not_vacuous",
    ("gpu_checks", "noise_arithmetic"): "test_gpu_checks.py::test_a_noise_off_the_twin_is_caught",
    ("gpu_checks", "x_from_words"): "test_gpu_checks.py::test_an_x_off_the_twin_is_caught",
    ("gpu_checks", "accumulation"): "test_gpu_checks.py::test_an_accumulation_bound_too_small_is_caught",
    ("gpu_checks", "near_ties"): "test_a_float32_group_noise_is_caught",
}  # fmt: skip

#: Public functions that are not checks: helpers, planted defects, renderers, identities of the proofs' algebra
#: (labelled as such in the markdown), closed forms and derived numbers.
NOT_CHECKS = {
    "check_argmax_decomposition": {
        "odd_key", "documented_tie_key", "token_block_key", "better", "winner", "reduce_groups", "random_partition",
        "first_seen_counterexample",  # a counterexample: the rule it shows wrong is not shipped
        "tie_break_law", "tie_break_deviation_closed_form",  # exact closed forms (identities)
        "fast_pass",  # the model the fast-pass check runs
    },
    "check_factorization": {
        "patched", "grouped_reference_law", "online_reference_law", "enumerated_grouped_law",
        "enumerated_online_law", "enumerated_ok", "parallel_law_identity", "online_laws_identity",
        "tree_law_identity", "identity_trials", "symbolic_online",  # identities of the proof's algebra
        "reused_noise_counterexample",  # a closed form
    },
    "check_finite_precision": {"load_all"},
    "check_float32_noise": {
        "split_words", "twin_gumbel", "adversarial_keys", "random_keys", "log_uniform_keys", "gumbel_bin_range",
        "keys_in_gumbel_bin", "bias_profile", "noise_sample", "first_order_tv", "worst_first_order_tv",  # estimates
        "x_rounding_bias",  # the mean error of a construction: a measurement, the shipped x is checked above
        "side_x", "side_words", "gumbel_at_x", "planted_no_correction", "planted_no_correction_gumbel",
        "truncating_exponential", "planted", "brute_blocks", "binade_blocks", "scan_blocks", "write_exhaustive",
        "load_scan", "local_mean_at", "first_order_tv_exhaustive",  # a first-order estimate, not a bound
    },
    "check_float32_scores": {
        "softmax", "rounding_tv_bound", "rounding_law", "uniform_edges", "float_edges", "float32_rounding_budget",
        "rounded_grid_law", "combined_bound", "perturbation_tv", "lemma5_bound", "tensor_core_error_bound",
        "torch_to_numpy", "model_a2_dot",
    },
    "check_grid_noise": {
        "softmax", "grid_token_law", "tv_fraction", "grid_tv_bound", "hybrid_tv_bound", "token_deviations",
        "two_level_tail_mass", "gap_profile", "generator_caps", "starved_mass",  # exact values, no bound to hold
    },
    "check_gumbel_max": {
        "integrand_in_t", "symbolic_gumbel_max", "symbolic_exponential_race", "quadrature_check",
        "pathwise_equivalence",  # identities of the proof (sympy, 30-digit quadrature, float64)
    },
    "check_max_stability": {"symbolic_max_stability", "quadrature_check"},  # identities
    "check_second_level": {
        "coin_probability", "coin_error", "coin_profile", "twenty_four_bit_exponential",  # the planted version-1 coin
        "kolmogorov_bounds",  # derived from the scan's bins
        "v_add", "v_sub", "v_mul", "v_div", "v_const", "v_horner", "f_pieces", "log1p_piece", "c0_within", "d_g64",
        "group_draw_bound64", "coin_theta", "short_log64", "short_exp64", "coin_cases", "float64_ceil_coin",
        "exact_group_noise", "float32_group_noise",
    },
    "check_tensor_parallel": {"inputs", "run_world", "references", "compare", "local_keying_counterexample"},
    "check_tile_inverse_cdf": {
        "documented_eta_units", "load_exp2_exhaustive", "integer_weights", "draw_index", "exact_index_law",
        "enumerated_index_law", "scores_of", "design_log_law", "float32_cdf_log_law", "compare", "tv_bound",
        "tv_bound_closed_form", "weight_errors", "mean_abs_d", "example_rows", "passes", "write_exp2_exhaustive",
        "planted_off_by_one_draws",
    },
    "counters": {"quoted_layout"},
    "gpu_checks": {
        "kernel_logits", "environment", "run",
        # compiled-only comparisons: in the interpreter tl.log is NumPy's log and the division is exact, so the
        # GPU run is what can fail them (their verdicts are checked on its JSON by test_end_to_end.py)
        "positive_log_check", "division_check", "exp_log_check",
    },
    "check_end_to_end": {
        "interpreter_bins", "compiled_bins", "load_gpu", "temperature_term", "theorem7_term", "group_draw_term",
        "logmass_term", "coin_term", "running_logmass_term", "tile_weights_term", "tile_logmass_term", "noise_term",
        "theorems",  # the proved terms' arithmetic
    },
    "noise_bound": {"bins_from_split", "widen", "gamma2_cdf", "psi_upper", "upper_concave_hull", "psi_hat",
                    "total_variation_of_window"},
}  # fmt: skip
#: Every module's entry points, which are not checks themselves.
ENTRY_POINTS = {"collect", "verdicts", "render", "main"}
MODULES = sorted(NOT_CHECKS)


@pytest.mark.parametrize("name", MODULES)
def test_every_check_has_a_mutation_test(name):
    mod = importlib.import_module(f"proofs.{name}")
    public = {
        n for n, f in vars(mod).items()
        if inspect.isfunction(f) and f.__module__ == mod.__name__ and not n.startswith("_")
    }  # fmt: skip
    checks = {f for m, f in REGISTRY if m == name}
    unclassified = public - checks - NOT_CHECKS[name] - ENTRY_POINTS
    assert not unclassified, f"{name}: check functions without a mutation test (REGISTRY) or a reason (NOT_CHECKS)"
    assert not (checks & NOT_CHECKS[name])
    assert checks <= public, f"{name}: REGISTRY names functions the module no longer has: {checks - public}"


@pytest.mark.parametrize("key", sorted(REGISTRY), ids=[f"{m}.{f}" for m, f in sorted(REGISTRY)])
def test_every_registered_mutation_test_exists(key):
    target = REGISTRY[key]
    file, _, test = target.rpartition("::")
    source = inspect.getsource(importlib.import_module(f"tests.proofs.{(file or 'test_mutations.py')[:-3]}"))
    assert f"def {test}(" in source, target
