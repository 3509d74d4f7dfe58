"""Float32 noise of the NumPy twin against its exact value (finite_precision.md, section 6).

The twin computes ``E = -log U`` and ``G = -log E`` in float32 (``flashsampling.noise``).  This
module measures, for the same 64 random bits,

* the error of ``E`` in units in the last place and the absolute error of ``G``, over random,
  log-uniform and adversarial bit patterns, against the documented bounds
  ``|E_twin - E| <= E_ULP_BOUND ulp(E)`` and ``|G_twin - G| <= G_ERR_COEF * (1 + |G|)``;
* the *local mean* ``m(g) = E[G_twin - G | G near g]`` of the error: to first order it is the only
  part of the arithmetic error that moves the token law (eq. (6.3)); a constant ``m`` does nothing,
  so what matters is how much ``m`` varies;
* from it, the first-order total variation for two-level logits (eq. (6.4)).

The exact values come from :func:`flashsampling.noise.exponential_exact` (float64 from the exact
integer; its own error, ~1e-16 relative, is far below float32's).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as `python proofs/check_float32_noise.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from flashsampling.noise import MAX_NOISE, exponential_exact, exponential_from_bits, exponential_from_bits_np  # noqa: E402

#: Documented bound on the twin's E: |E_twin - E_exact| <= E_ULP_BOUND * ulp_float32(E_exact).
E_ULP_BOUND = 6.0
#: Documented bound on the twin's G: |G_twin - G_exact| <= G_ERR_COEF * (1 + |G_exact|).
G_ERR_COEF = 2.0**-22
#: G where U = 1/2 (the two branches of exponential_from_bits meet): -log(log 2).
G_HALF = -math.log(math.log(2.0))
TWO64 = 2.0**64


def split_words(k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(w0, w1)`` uint32 words of uint64 integers ``k = w1 * 2**32 + w0``."""
    k = np.asarray(k, dtype=np.uint64)
    return (k & np.uint64(0xFFFFFFFF)).astype(np.uint32), (k >> np.uint64(32)).astype(np.uint32)


def twin_gumbel(w0: np.ndarray, w1: np.ndarray) -> np.ndarray:
    """The twin's float32 Gumbel noise for the words ``(w0, w1)`` (as in ``token_noise_np``)."""
    return (-np.log(exponential_from_bits_np(w0, w1))).astype(np.float32)


@triton.jit
def _gumbel_from_words_kernel(w0_ptr, w1_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """``out = -log(exponential_from_bits(w0, w1))``: the kernel's own noise path for given words (int32 bits)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    w0 = tl.load(w0_ptr + offs, mask=mask, other=0).to(tl.uint32, bitcast=True)
    w1 = tl.load(w1_ptr + offs, mask=mask, other=0).to(tl.uint32, bitcast=True)
    e = exponential_from_bits(w0, w1)
    tl.store(out_ptr + offs, -tl.log(e), mask=mask)


def kernel_gumbel(w0: np.ndarray, w1: np.ndarray) -> np.ndarray:
    """The Triton device functions' float32 noise for the words ``(w0, w1)``.

    Compiled on a GPU (where ``log`` is the device's), in the Triton interpreter on a CPU (where it
    equals the twin bit for bit).  Use as ``noise=kernel_gumbel`` in :func:`noise_accuracy`,
    :func:`bias_profile` and :func:`noise_sample`.
    """
    import torch

    from flashsampling import _device

    dev = _device.default_device()
    a = torch.from_numpy(np.ascontiguousarray(w0).view(np.int32).reshape(-1)).to(dev)
    b = torch.from_numpy(np.ascontiguousarray(w1).view(np.int32).reshape(-1)).to(dev)
    out = torch.empty(a.numel(), dtype=torch.float32, device=dev)
    block = 1024
    _gumbel_from_words_kernel[(triton.cdiv(a.numel(), block),)](a, b, out, a.numel(), BLOCK=block)
    return out.cpu().numpy().reshape(np.shape(w0))


def adversarial_keys() -> np.ndarray:
    """Bit patterns at the edges of every branch and rounding step of ``exponential_from_bits``.

    ``k`` and ``2**64 - 1 - k`` for: ``k`` within 3 of every power of two (both extremes ``0`` and
    ``2**64 - 1`` included); within 5 of ``2**63`` (where the branches meet); high words at float32
    rounding ties (``2**e + 1``, ``2**e + 3``, ``2**e - 1`` for ``e = 24..31``) with low words
    ``0, 1, 2**31, 2**32 - 2, 2**32 - 1``; and ``1 - U`` near ``2**-25``, where ``1 - X`` rounds to 1
    and ``E = X`` takes over.
    """
    ks: set[int] = set()
    top = (1 << 64) - 1
    for j in range(64):
        for d in range(-3, 4):
            v = (1 << j) + d
            if 0 <= v <= top:
                ks.update((v, top - v))
    ks.update((1 << 63) + d for d in range(-5, 6))
    for e in range(24, 32):
        for m1 in ((1 << e) + 1, (1 << e) + 3, (1 << e) - 1, (1 << e) + (1 << (e - 23)) - 1):
            for m0 in (0, 1, 1 << 31, (1 << 32) - 2, (1 << 32) - 1):
                v = (m1 << 32) | m0
                ks.update((v, top - v))
    for base in (1 << 38, 1 << 39, 1 << 40):
        for d in range(-4, 5):
            ks.add(top - (base + d))
    ks.update((0, top))
    return np.array(sorted(ks), dtype=np.uint64)


def random_keys(n: int, seed: int) -> np.ndarray:
    """Uniform 64-bit integers (the generator's own law)."""
    return np.random.default_rng(seed).integers(0, 2**64, n, dtype=np.uint64, endpoint=False)


def log_uniform_keys(n: int, seed: int) -> np.ndarray:
    """Integers whose distance to 0 or to 2**64 is log-uniform: every binade of U and of 1 - U alike."""
    rng = np.random.default_rng(seed)
    shift = rng.integers(0, 63, n).astype(np.uint64)
    c = rng.integers(0, 2**63, n, dtype=np.uint64) >> (np.uint64(63) - shift)
    return np.where(rng.random(n) < 0.5, c, ~c)


@dataclass
class NoiseAccuracy:
    """Largest errors of the twin's E and G over a set of bit patterns."""

    n: int
    e_ulp_max: float  # max |E_twin - E| / ulp(E)
    e_ulp_mean: float  # mean signed error in ulp (a bias)
    g_abs_max: float  # max |G_twin - G|
    g_ratio_max: float  # max |G_twin - G| / (G_ERR_COEF (1 + |G|)); <= 1 is the documented bound
    g_min: float
    g_max: float
    worst_k: int  # the bit pattern of the largest E error

    @property
    def within_bounds(self) -> bool:
        return not self.e_ulp_max > E_ULP_BOUND and self.g_ratio_max <= 1.0  # NaN E (not measured) passes


def noise_accuracy(keys: np.ndarray, noise=None) -> NoiseAccuracy:
    """Errors of the float32 ``E`` and ``G`` against the float64 values for the integers ``keys``.

    ``noise=None`` measures the twin (``E`` from ``exponential_from_bits_np``); a noise function
    ``noise(w0, w1) -> G`` (e.g. :func:`kernel_gumbel`)
    is measured through ``G`` only (the ``E`` fields are NaN).
    """
    w0, w1 = split_words(keys)
    e64 = exponential_exact(w0, w1)
    g64 = -np.log(e64)
    if noise is None:
        e32 = exponential_from_bits_np(w0, w1)
        g32 = (-np.log(e32)).astype(np.float32).astype(np.float64)
        ue = (e32.astype(np.float64) - e64) / np.spacing(e64.astype(np.float32)).astype(np.float64)
    else:  # only G is observable
        g32 = noise(w0, w1).astype(np.float64)
        ue = np.full(g32.shape, np.nan)
    dg = np.abs(g32 - g64)
    i = int(np.argmax(np.abs(ue))) if noise is None else int(np.argmax(dg))
    return NoiseAccuracy(
        n=int(keys.size),
        e_ulp_max=float(np.abs(ue).max()) if noise is None else float("nan"),
        e_ulp_mean=float(ue.mean()) if noise is None else float("nan"),
        g_abs_max=float(dg.max()),
        g_ratio_max=float((dg / (G_ERR_COEF * (1.0 + np.abs(g64)))).max()),
        g_min=float(g32.min()),
        g_max=float(g32.max()),
        worst_k=int(keys[i]),
    )


def gumbel_bin_range(g0: float, g1: float) -> tuple[int, int, bool]:
    """The grid points whose exact noise lies in ``[g0, g1)``: ``(lo, hi, complemented)``, ``hi`` exclusive.

    Below ``G_HALF`` (``U < 1/2``) the range is of ``k`` with ``(k + 1/2) / 2**64`` in
    ``[F(g0), F(g1))``; above it, of ``c = 2**64 - 1 - k`` with ``(c + 1/2) / 2**64`` in
    ``(1 - F(g1), 1 - F(g0)]``, where float64 keeps the boundaries accurate up to ``G = 65 log 2``.
    Boundaries are exact up to float64's relative precision (a few grid points in ``2**64``).
    """
    if g1 <= G_HALF:
        lo = math.ceil(math.exp(-math.exp(-g0)) * TWO64 - 0.5)
        hi = math.ceil(math.exp(-math.exp(-g1)) * TWO64 - 0.5)
        return max(lo, 0), max(hi, 0), False
    lo = math.floor(-math.expm1(-math.exp(-g1)) * TWO64 - 0.5) + 1
    hi = math.floor(-math.expm1(-math.exp(-g0)) * TWO64 - 0.5) + 1
    return max(lo, 0), min(max(hi, 0), 2**64), True


def keys_in_gumbel_bin(g0: float, g1: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` integers uniform among the grid points whose exact noise lies in ``[g0, g1)`` (empty: ``n`` zeros).

    Sampling ``k`` uniformly in that range is sampling the noise from its law restricted to the bin.
    """
    lo, hi, comp = gumbel_bin_range(g0, g1)
    if hi <= lo:
        return np.zeros(n, dtype=np.uint64)
    c = rng.integers(lo, hi, n, dtype=np.uint64)
    return ~c if comp else c


@dataclass
class BiasProfile:
    """Local mean ``m(g)`` of the noise error in bins of the exact noise value, with standard errors."""

    edges: np.ndarray
    mean: np.ndarray
    stderr: np.ndarray

    @property
    def centers(self) -> np.ndarray:
        return 0.5 * (self.edges[:-1] + self.edges[1:])

    def oscillation(self, g_lo: float = -3.8, g_hi: float = 20.0) -> float:
        """``max m - min m`` over bins with centres in ``[g_lo, g_hi]``."""
        sel = (self.centers >= g_lo) & (self.centers <= g_hi)
        return float(self.mean[sel].max() - self.mean[sel].min())

    def at(self, g: np.ndarray) -> np.ndarray:
        """Piecewise-linear interpolation of ``m`` (constant beyond the first and last centres)."""
        return np.interp(g, self.centers, self.mean)


#: Bins of the exact noise covering its whole range [-3.8079, 45.0546].
DEFAULT_EDGES = np.concatenate([[-3.81], np.arange(-3.7, 15.0, 0.1), np.arange(15.0, 45.0, 1.0), [45.06]])


def bias_profile(
    noise=twin_gumbel, edges: np.ndarray = DEFAULT_EDGES, per_bin: int = 20_000, seed: int = 20260601
) -> BiasProfile:
    """Estimate ``m(g) = E[noise - G_exact | G_exact in bin]`` bin by bin.

    ``noise(w0, w1)`` is any float32 Gumbel function of the words (the twin by default; a GPU run
    can pass the kernel's).  The standard error is the sample standard deviation over
    ``sqrt(per_bin)``.
    """
    rng = np.random.default_rng(seed)
    mean = np.empty(edges.size - 1)
    se = np.empty(edges.size - 1)
    for b, (g0, g1) in enumerate(zip(edges[:-1], edges[1:])):
        w0, w1 = split_words(keys_in_gumbel_bin(float(g0), float(g1), per_bin, rng))
        eta = noise(w0, w1).astype(np.float64) - (-np.log(exponential_exact(w0, w1)))
        mean[b] = eta.mean()
        se[b] = eta.std(ddof=1) / math.sqrt(per_bin)
    return BiasProfile(np.asarray(edges, dtype=float), mean, se)


@dataclass
class NoiseSample:
    """Stratified sample of the grid: per bin of the exact noise, integers drawn uniformly in the bin.

    ``mass[b]`` is the grid's probability of bin ``b`` (its number of points over ``2**64``); ``g[b]``
    the exact noise values and
    ``eta[b]`` the errors ``noise - G_exact`` of its ``per_bin`` draws.  A bin-mass-weighted mean of
    per-bin sample means is an unbiased estimate of ``E[psi(G) eta]`` for any weight ``psi``.
    """

    edges: np.ndarray
    mass: np.ndarray
    g: np.ndarray  # (bins, per_bin)
    eta: np.ndarray  # (bins, per_bin)

    def expectation(self, psi) -> tuple[float, float]:
        """``E[psi(G) eta(G)]`` over the grid law and its standard error (``psi`` vectorized over ``g``)."""
        val = psi(self.g) * self.eta
        n = val.shape[1]
        est = float(np.sum(self.mass * val.mean(axis=1)))
        se = float(np.sqrt(np.sum(self.mass**2 * val.var(axis=1, ddof=1) / n)))
        return est, se


def noise_sample(
    noise=twin_gumbel, edges: np.ndarray = DEFAULT_EDGES, per_bin: int = 20_000, seed: int = 20260602
) -> NoiseSample:
    """Draw the stratified sample of :class:`NoiseSample` for the noise function ``noise(w0, w1)``."""
    rng = np.random.default_rng(seed)
    g_all = np.empty((edges.size - 1, per_bin))
    eta_all = np.empty((edges.size - 1, per_bin))
    for b, (g0, g1) in enumerate(zip(edges[:-1], edges[1:])):
        w0, w1 = split_words(keys_in_gumbel_bin(float(g0), float(g1), per_bin, rng))
        g64 = -np.log(exponential_exact(w0, w1))
        g_all[b] = g64
        eta_all[b] = noise(w0, w1).astype(np.float64) - g64
    mass = np.array(
        [
            (hi - lo) / TWO64 if hi > lo else 0.0
            for lo, hi, _ in (gumbel_bin_range(float(a), float(b)) for a, b in zip(edges[:-1], edges[1:]))
        ]
    )
    return NoiseSample(np.asarray(edges, dtype=float), mass, g_all, eta_all)


def _gumbel_pdf(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.exp(-x - np.exp(-x))


def first_order_tv(sample: NoiseSample, gap: float, n_tail: int) -> tuple[float, float]:
    """First-order TV for one token at 0 and ``n_tail`` tokens at ``-gap`` (eq. (6.4)), with its standard error.

    ``dP_top = n_tail int f(x) f(x + gap) F(x + gap)**(n_tail - 1) [eta(x) - eta(x + gap)] dx``,
    estimated as ``E[psi_top(G) eta(G)] - E[psi_tail(G) eta(G)]`` with
    ``psi_top(g) = n_tail f(g + gap) F(g + gap)**(n_tail - 1)`` (the top token at ``g``) and
    ``psi_tail(g) = n_tail f(g - gap) F(g)**(n_tail - 1)`` (a tail token at ``g``).  Tokens of a level
    are exchangeable, so TV = ``|dP_top|``.
    """

    def psi(g):
        with np.errstate(over="ignore"):
            top = n_tail * _gumbel_pdf(g + gap) * np.exp(-(n_tail - 1) * np.exp(-(g + gap)))
            tail = n_tail * _gumbel_pdf(g - gap) * np.exp(-(n_tail - 1) * np.exp(-g))
        return top - tail

    d, se = sample.expectation(psi)
    return abs(d), se


def worst_first_order_tv(
    sample: NoiseSample, n_tails=(1, 16, 1024, 1 << 18), gaps=None
) -> tuple[float, float, int, float]:
    """Largest first-order TV over two-level logits (gaps 0 to 20 by 0.5 by default): ``(tv, stderr, n_tail, gap)``."""
    gaps = np.arange(0.0, 20.01, 0.5) if gaps is None else gaps
    best = (0.0, 0.0, 1, 0.0)
    for nt in n_tails:
        for g in gaps:
            tv, se = first_order_tv(sample, float(g), int(nt))
            if tv > best[0]:
                best = (tv, se, int(nt), float(g))
    return best


def _interpreted() -> bool:
    from flashsampling import _device

    return _device.INTERPRET


def x_rounding_bias(n: int = 1_000_000, seed: int = 7, *, construction: str = "shipped") -> dict[int, float]:
    """Mean error, in ulp of x, of the float32 ``x`` (``U`` or ``1 - U``) in the binades ``[2**-e, 2**-e+1)``.

    ``construction="shipped"`` is the generator as shipped (flashsampling/noise.py): the top 23 bits
    of the high word exact, the rest added as one term, so ``x`` rounds once to nearest (mean ~0).
    ``construction="truncating"`` is the earlier version, which rounded the high word before adding
    the low word: for ``x >= 2**-8`` the low word never reached the result and ``x`` was biased low
    by about ``2**-33 / ulp(x)`` ulp (a quarter ulp in ``[2**-8, 2**-7)``).
    """
    rng = np.random.default_rng(seed)
    f32 = np.float32
    out = {}
    for e in (2, 4, 6, 8, 9, 12):
        c = rng.integers(2 ** (64 - e), 2 ** (65 - e), n, dtype=np.uint64)  # comp in [2^(64-e), 2^(65-e))
        w0, w1 = split_words(c)  # top bit clear: x = (c + 1/2) 2^-64 = U itself
        low = w0.astype(f32) * f32(2.0**-64) + f32(2.0**-65)
        if construction == "truncating":
            x32 = w1.astype(f32) * f32(2.0**-32) + low
        else:
            mid = (w1 & np.uint32(0xFF)).astype(f32) * f32(2.0**-32) + low
            x32 = (w1 >> np.uint32(8)).astype(f32) * f32(2.0**-24) + mid
        exact = c.astype(np.float64) * 2.0**-64 + 2.0**-65
        out[e] = float(np.mean((x32.astype(np.float64) - exact) / np.spacing(x32)))
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the section 6 checks on the twin, or with ``--kernel`` on the Triton device functions."""
    argv = sys.argv[1:] if argv is None else argv
    use_kernel = "--kernel" in argv
    noise = kernel_gumbel if use_kernel else twin_gumbel
    print(
        "noise measured:",
        "Triton kernel (" + ("interpreter" if _interpreted() else "compiled") + ")" if use_kernel else "NumPy twin",
    )
    sets = {
        "adversarial": adversarial_keys(),
        "uniform 64-bit": random_keys(4_000_000, 1),
        "log-uniform": log_uniform_keys(4_000_000, 2),
    }
    ok = True
    print(f"documented bounds: |E_twin - E| <= {E_ULP_BOUND:g} ulp(E); |G_twin - G| <= 2^-22 (1 + |G|)")
    for name, keys in sets.items():
        acc = noise_accuracy(keys, kernel_gumbel if use_kernel else None)
        ok &= acc.within_bounds
        print(
            f"{name:15s} n={acc.n:8d}: E max {acc.e_ulp_max:.3f} ulp (mean {acc.e_ulp_mean:+.3f}, "
            f"worst k={acc.worst_k:#x}); G max abs {acc.g_abs_max:.2e}, max / bound {acc.g_ratio_max:.3f}; "
            f"G in [{acc.g_min:.4f}, {acc.g_max:.4f}]"
        )
    ext = noise_accuracy(np.array([0, 2**64 - 1], dtype=np.uint64), kernel_gumbel if use_kernel else None)
    print(f"extremes k=0, 2^64-1: G in [{ext.g_min:.6f}, {ext.g_max:.6f}]; MAX_NOISE = {MAX_NOISE:.6f}")
    print(
        "x rounding bias (mean error in ulp of x, by binade 2^-e):",
        {e: round(v, 4) for e, v in x_rounding_bias().items()},
        "(earlier truncating construction:",
        {e: round(v, 4) for e, v in x_rounding_bias(construction="truncating").items()},
        ")",
    )
    prof = bias_profile(noise=noise, per_bin=100_000)
    print(
        f"local mean m(g) of the G error: range [{prof.mean[prof.centers < 20].min():+.2e}, "
        f"{prof.mean[prof.centers < 20].max():+.2e}] for g < 20, oscillation {prof.oscillation():.2e}, "
        f"max stderr {prof.stderr[prof.centers < 20].max():.1e}"
    )
    for g in (-3.0, -1.0, 0.0, 1.0, 3.0, 5.5, 8.0, 12.0, 20.0, 40.0):
        print(f"  m({g:+5.1f}) = {float(prof.at(np.array([g]))[0]):+.2e}")
    _, _, nt, gap = worst_first_order_tv(noise_sample(noise, per_bin=4_000, seed=1))  # locate the worst family
    tv, se = first_order_tv(noise_sample(noise, per_bin=50_000, seed=2), gap, nt)  # and measure it on a fresh sample
    print(
        f"first-order TV from the float32 noise (two-level logits): max {tv:.2e} +- {se:.1e} at n_tail={nt}, gap={gap}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
