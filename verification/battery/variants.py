"""Registry of the samplers the main job verifies.

A variant draws ``n`` samples of one case's row: ``sample(case, n, seed) -> int64 array (n,)``.
Layers, as in the design's three layers of evidence:

* ``control``: the float64 inverse-CDF reference (a correct sampler: it must pass);
* ``twin``: NumPy code proven bit-exact to a kernel (fast on CPU, so n is large);
* ``kernel``: the Triton kernel itself (interpreted on CPU, so n is small there; compiled on GPU).

The fused top-k sampler's variants (``twin-topk``, ``kernel-topk-logits``, ``kernel-topk-matmul``) sample a case
whose target is ``top_k(k, ties="low_index")`` (:func:`verification.battery.cases.topk_cases`, in the battery) and
refuse every other case (:func:`fused_topk_case`); the plain variants sample ``softmax(z / T)`` and refuse a case
with another target (:func:`softmax_case`, :func:`plain`); the control samples any case's target law.

A variant that cannot run a case (the matmul path has no ``-inf`` logits; the tile inverse-CDF sampler
has no greedy path) says so through ``applies``, so the main job knows every run, and the size of its
family, before it draws.  Variants whose module is not in this checkout (grouped, online, tensor
parallel, the tile inverse-CDF prototype) are left out of the registry.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from flashsampling.reference import sample_inverse_cdf
from flashsampling.twin import sample_topk_twin_many, sample_twin_many

from .cases import Case


@dataclass(frozen=True)
class Variant:
    """A named sampler under test.

    Attributes
    ----------
    name : str
    layer : str
        ``"control"``, ``"twin"`` or ``"kernel"``.
    sample : callable
        ``(case, n, seed) -> numpy int64 array of shape (n,)``.
    cpu_elements : int
        Sample budget on CPU in units of ``n * V`` (vocabulary entries processed).
    cpu_max_n : int
        Cap on n on CPU (the interpreter's cost per sample does not shrink with V).
    max_vocab : int
        Largest V this variant is run on (CPU twins skip the LM-sized GPU cases).
    maxima : callable or None
        ``(case, n, seed) -> float64 array (n,)`` of perturbed maxima ``max_v(z_v / T + G_v)``, for
        variants that expose them (the battery then tests they are Gumbel(logsumexp(z / T), 1)).
    applies : callable
        ``(case) -> bool``: the variant can sample this case (checked before any draw).
    """

    name: str
    layer: str
    sample: Callable[[Case, int, int], np.ndarray]
    cpu_elements: int
    cpu_max_n: int = 2_000_000
    max_vocab: int = 1 << 62
    maxima: Callable[[Case, int, int], np.ndarray] | None = None
    applies: Callable[[Case], bool] = lambda case: True

    def runs_on(self, case: Case) -> bool:
        """True when this variant samples ``case`` in the battery: the vocabulary fits and it applies."""
        return case.num_categories <= self.max_vocab and self.applies(case)

    def has_maxima(self, case: Case) -> bool:
        """True when the battery tests this variant's perturbed maxima on ``case`` (a noise, ``T > 0``)."""
        return self.maxima is not None and case.temperature > 0


def softmax_case(case: Case) -> bool:
    """The case's target is the plain ``softmax(z / T)`` (no truncation): the law of every variant but the top-k ones
    and the control."""
    return case.target is None


def plain(sample: Callable[[Case, int, int], np.ndarray]) -> Callable[[Case, int, int], np.ndarray]:
    """``sample`` refusing (``NotImplementedError``) a case whose target is not the plain softmax."""

    def softmax_only(case: Case, n: int, seed: int) -> np.ndarray:
        if not softmax_case(case):
            raise NotImplementedError(f"this sampler draws softmax(z / T), not {case.target!r}")
        return sample(case, n, seed)

    return softmax_only


def finite_logits(case: Case) -> bool:
    """No ``-inf`` logit: the matmul paths build the logits from a product, which has no ``-inf``."""
    return bool(np.isfinite(case.logits).all())


def sampled_temperature(case: Case) -> bool:
    """``T > 0``: the tile inverse-CDF sampler has no greedy path."""
    return case.temperature > 0


def _reference(case: Case, n: int, seed: int) -> np.ndarray:
    return sample_inverse_cdf(case.probs, n, np.random.default_rng(seed))


def _twin(case: Case, n: int, seed: int) -> np.ndarray:
    return sample_twin_many(case.logits.astype(np.float32), case.temperature, seed=seed, num_samples=n)


def _kernel_rows(n: int, v: int, device_is_cpu: bool) -> tuple[int, int]:
    """Split n samples into (rows, samples per row): rows are independent streams of one row's logits."""
    rows = 64 if device_is_cpu else 1024
    rows = max(1, min(rows, n))
    return rows, -(-n // rows)


def _kernel_logits(case: Case, n: int, seed: int, top_k: int | None = None) -> np.ndarray:
    import torch

    import flashsampling

    device = "cpu" if flashsampling.INTERPRET else "cuda"
    rows, per = _kernel_rows(n, case.num_categories, flashsampling.INTERPRET)
    z = torch.tensor(case.logits, dtype=torch.float32, device=device).expand(rows, -1)
    tok = flashsampling.sample_from_logits(z, temperature=case.temperature, seed=seed, num_samples=per, top_k=top_k)
    return tok.reshape(-1)[:n].cpu().numpy()


def _kernel_logits_maxima(case: Case, n: int, seed: int) -> np.ndarray:
    """The kernel's perturbed maxima: stage 1 on the case's row, max over the per-tile candidates."""
    import torch

    import flashsampling
    from flashsampling.kernels.stage1 import launch_logits_stage1
    from flashsampling.kernels.tiles import logits_tiles
    from flashsampling.noise import split_seed

    device = "cpu" if flashsampling.INTERPRET else "cuda"
    rows, per = _kernel_rows(n, case.num_categories, flashsampling.INTERPRET)
    z = torch.tensor(case.logits, dtype=torch.float32, device=device).expand(rows, -1)
    inv = torch.full((rows,), 1.0 / case.temperature, dtype=torch.float32, device=device)
    lo, hi = split_seed(seed)
    bb, bv = logits_tiles(rows, case.num_categories)
    part_max = launch_logits_stage1(z, inv, lo, hi, per, bb, bv)[0]
    return part_max.amax(dim=-1).reshape(-1)[:n].double().cpu().numpy()


def _kernel_matmul(case: Case, n: int, seed: int, top_k: int | None = None) -> np.ndarray:
    """The fused matmul kernel on an fp32 identity-like factorization of the case's logits.

    ``h = [z, 0...]`` padded to D=16 columns and ``W = [e_0 ...]`` so that ``h @ W.T = z`` exactly in
    fp32 (one nonzero product per logit): the target is the case's softmax with no rounding.
    """
    import torch

    import flashsampling

    if not finite_logits(case):
        raise NotImplementedError("the matmul path has no -inf logits")
    device = "cpu" if flashsampling.INTERPRET else "cuda"
    v = case.num_categories
    rows, per = _kernel_rows(n, v, flashsampling.INTERPRET)
    w = torch.zeros(v, 16, dtype=torch.float32)
    w[:, 0] = torch.tensor(case.logits, dtype=torch.float32)
    h = torch.zeros(rows, 16, dtype=torch.float32)
    h[:, 0] = 1.0
    tok = flashsampling.sample(h.to(device), w.to(device), temperature=case.temperature, seed=seed, num_samples=per,
                               top_k=top_k)  # fmt: skip
    return tok.reshape(-1)[:n].cpu().numpy()


def topk_of(case: Case) -> int:
    """The ``k`` of a case whose target is ``top_k(k, ties="low_index")`` with one ``k``: the law of
    ``flashsampling.sample(..., top_k=k)``.  Raises ``NotImplementedError`` for any other case."""
    t = case.target
    if t is None or t.name != "top_k" or t.param("ties") != "low_index" or not isinstance(t.param("k"), int):
        raise NotImplementedError(f"the fused top-k sampler's law is top_k(k, ties='low_index'), not {t!r}")
    return t.param("k")


def fused_topk_case(case: Case) -> bool:
    """The case's target is the fused top-k sampler's law (:func:`topk_of`)."""
    try:
        topk_of(case)
    except NotImplementedError:
        return False
    return True


def _twin_topk(case: Case, n: int, seed: int) -> np.ndarray:
    k = topk_of(case)
    return sample_topk_twin_many(case.logits.astype(np.float32), k, case.temperature, seed=seed, num_samples=n)


def _kernel_topk_logits(case: Case, n: int, seed: int) -> np.ndarray:
    return _kernel_logits(case, n, seed, top_k=topk_of(case))


def _kernel_topk_matmul(case: Case, n: int, seed: int) -> np.ndarray:
    return _kernel_matmul(case, n, seed, top_k=topk_of(case))


def _kernel_tile_cdf(case: Case, n: int, seed: int) -> np.ndarray:
    """The tile inverse-CDF prototype (proofs/tile_inverse_cdf.md): its Triton stage 1 on ``n`` rows that all read
    the case's logits (row stride 0), one token per row (each row its own streams), stage 2 on the host."""
    import torch

    import flashsampling
    from flashsampling.tile_cdf import sample_tile_cdf_from_logits

    if not sampled_temperature(case):
        raise NotImplementedError("the prototype has no greedy path")
    device = "cpu" if flashsampling.INTERPRET else "cuda"
    z = torch.tensor(case.logits, dtype=torch.float32, device=device)[None, :].expand(n, -1)
    return sample_tile_cdf_from_logits(z, case.temperature, seed, block_b=64 if flashsampling.INTERPRET else 4)


def _kernel_tile_cdf_fused(case: Case, n: int, seed: int) -> np.ndarray:
    """The tile inverse-CDF sampler fused into the Gluon kernel (flashsampling.tile_cdf.sample_fused_tile_cdf), on
    ``n`` rows of an exact bf16 factorization of the case's logits: ``h = [1, 1, 1, 0...]`` (D = 64) and ``W``'s first
    three columns the float32 logit split into three bf16 parts (``z = a + b + c`` exactly; 8 bits each cover float32's
    24), so ``h @ W.T`` is the float32 logits exactly.  One token per row (each row its own streams)."""
    import torch

    from flashsampling.tile_cdf import sample_fused_tile_cdf

    if not finite_logits(case):
        raise NotImplementedError("the matmul path has no -inf logits")
    z = torch.tensor(case.logits, dtype=torch.float32)
    a = z.bfloat16()
    b = (z - a.float()).bfloat16()
    c = (z - a.float() - b.float()).bfloat16()
    if not torch.equal(a.float() + b.float() + c.float(), z):
        raise NotImplementedError("logits not split exactly into three bf16 parts")
    w = torch.zeros(z.numel(), 64, dtype=torch.bfloat16)
    w[:, 0], w[:, 1], w[:, 2] = a, b, c
    h = torch.zeros(n, 64, dtype=torch.bfloat16)
    h[:, :3] = 1
    tok = sample_fused_tile_cdf(h.cuda(), w.cuda(), temperature=case.temperature, seed=seed)
    return tok[:, 0].cpu().numpy()


def _hopper() -> bool:
    """A compiled sm_90 GPU, where the Gluon kernels run."""
    import torch

    import flashsampling

    return not flashsampling.INTERPRET and torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


def _optional(module: str, attr: str) -> Callable | None:
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return None

    def sample(case: Case, n: int, seed: int) -> np.ndarray:
        return np.asarray(fn(case.logits, case.temperature, n, seed), dtype=np.int64)

    return sample


def topk_variants() -> list[Variant]:
    """The fused top-k sampler's variants: its twin and its kernel on logits and through the matmul (noise for ``k``
    tokens per draw in the twin, so its budget in ``n * V`` units is larger than the plain twin's)."""
    return [
        Variant("twin-topk", "twin", _twin_topk, 1_000_000_000, max_vocab=8192, applies=fused_topk_case),
        Variant(
            "kernel-topk-logits", "kernel", _kernel_topk_logits, 8_000_000, cpu_max_n=64 * 160, applies=fused_topk_case
        ),  # fmt: skip
        Variant(
            "kernel-topk-matmul",
            "kernel",
            _kernel_topk_matmul,
            4_000_000,
            cpu_max_n=64 * 80,
            applies=lambda c: fused_topk_case(c) and finite_logits(c),
        ),  # fmt: skip
    ]


def registry() -> list[Variant]:
    """All variants present in this checkout, controls first."""
    out = [
        Variant("reference-inverse-cdf", "control", _reference, 400_000_000),
        Variant("twin-fused", "twin", plain(_twin), 60_000_000, max_vocab=8192, applies=softmax_case),
        Variant(
            "kernel-fused-logits",
            "kernel",
            plain(_kernel_logits),
            8_000_000,
            cpu_max_n=64 * 160,
            maxima=_kernel_logits_maxima,
            applies=softmax_case,
        ),  # fmt: skip
        Variant(
            "kernel-fused-matmul",
            "kernel",
            plain(_kernel_matmul),
            4_000_000,
            cpu_max_n=64 * 80,
            applies=lambda c: softmax_case(c) and finite_logits(c),
        ),  # fmt: skip
        Variant(
            "kernel-tile-cdf-prototype",
            "kernel",
            plain(_kernel_tile_cdf),
            2_000_000,
            cpu_max_n=64 * 32,
            applies=lambda c: softmax_case(c) and sampled_temperature(c),
        ),  # fmt: skip
        *topk_variants(),
    ]
    if _hopper():
        out.append(
            Variant(
                "kernel-tile-cdf-fused",
                "kernel",
                plain(_kernel_tile_cdf_fused),
                4_000_000,
                applies=lambda c: softmax_case(c) and finite_logits(c) and sampled_temperature(c),
            )
        )
    for name, module, attr, budget in (
        ("grouped-parallel", "flashsampling.grouped", "grouped_sampler_np", 60_000_000),
        ("online", "flashsampling.online", "online_sampler_np", 60_000_000),
        ("tp-factorized", "flashsampling.distributed", "tp_factorized_sampler_np", 60_000_000),
        ("tile-cdf-prototype", "flashsampling.tile_cdf", "tile_cdf_sampler_np", 60_000_000),
    ):
        fn = _optional(module, attr)
        if fn is not None:
            out.append(Variant(name, "twin", plain(fn), budget, max_vocab=8192, applies=softmax_case))
    return out
