"""All checks of finite_precision.md, in the order of its sections, and its budget table.

* sections 2-4 (grid of uniforms, cap, other generators): :mod:`proofs.check_grid_noise`;
* sections 5, 7, 7b (float32 scores, logits, temperature, Theorem 7): :mod:`proofs.check_float32_scores`;
* section 6 (float32 arithmetic of the noise, the exhaustive scan): :mod:`proofs.check_float32_noise`;
* section 8 (second-level draws): :mod:`proofs.check_second_level`;
* the budget table: :func:`render` from the recorded results of all of them (and of the tile inverse-CDF check).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as `python proofs/check_finite_precision.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proofs import (  # noqa: E402
    _generated,
    check_float32_noise,
    check_float32_scores,
    check_grid_noise,
    check_second_level,
)

SOURCES = ("grid_noise", "float32_scores", "float32_noise", "second_level", "tile_inverse_cdf", "exp2_exhaustive",
           "end_to_end")  # fmt: skip


def load_all() -> dict:
    return {name: _generated.load(name) for name in SOURCES}


def render(res: dict) -> dict[str, str]:
    """The budget table of finite_precision.md from the recorded results ``res[name]`` of :data:`SOURCES`."""
    from proofs._generated import md_table, sci, sci_up

    g, s, n, sl, tc, ex, ee = (res[k] for k in SOURCES)
    nz = ee["interpreter"]["noise"]
    compiled = (f"compiled (H200): $\\le {sci_up(ee['compiled']['noise']['total'])}$" if ee.get("compiled")
                else "compiled (H200): from `gpu_checks.py`")  # fmt: skip
    worst = g["tv_scan"][str(1 << 18)]
    cap = g["caps"][2]["gap"]
    comb = {c["a"]: c for c in s["combined"]}
    ratio = max(r["ratio"] for r in s["rounding"])
    e = n["exhaustive"]
    coin, lem = sl["coin"], sl["lemmas"]
    lm = sl["logmass"]
    logits = s["fp32_logits"]
    rows = [
        ("64-bit grid of uniforms, exact arithmetic (token draw)",
         f"Theorem 2b: $V'/2^{{64}}$ (${sci_up(2.0**18 / 2**64)}$ at $V' = 2^{{18}}$; Theorem 2: $4V'/2^{{64}}$)",
         f"worst two-level logits, exact: {worst[0] / ((2**18 + 1) / 2**64):.3f} $V/2^{{64}}$ "
         f"(${sci(worst[0])}$ at $V = 2^{{18}} + 1$, gap {worst[1]:g} nats)"),
        ("the noise cap $65\\log 2$", f"Proposition 3: tokens more than {cap:.2f} nats below the top never win; their "
         f"softmax mass $\\le V \\cdot {sci_up(math.exp(-cap))}$", "included in the line above"),
        ("float32 rounding of the scores",
         f"Theorem 4 / 7: (5.1) with $h = 2^{{a-24}}$: ${sci_up(comb[7]['rounding'])}$ for "
         f"$\\lvert\\max\\mu\\rvert \\le 64$, ${sci_up(comb[21]['rounding'])}$ up to $2^{{21}}$",
         f"TV$/h^2 \\le {ratio:.3f}$ (exact, continuous noise)"),
        ("tie keys $w_0 \\mid 1$ of the tie block ($2^{31}$ values)", "Theorem 7: $2^{-32}h$; per exact tie of $m$ "
                                                                      "tokens "
         "$m(m-1)/2^{32}$ ([argmax_decomposition.md](argmax_decomposition.md))", "$2^{-32}$ per tied pair (closed "
                                                                                 "form)"),
        ("**Theorem 7** (grid + rounding + keys)", f"${sci_up(comb[7]['total'])}$ for $V' = 2^{{18}}$, "
         f"$\\lvert\\max\\mu\\rvert \\le 64$", "the table of §7b"),
        ("float32 arithmetic of $E$, $G$ (token noise, §6)",
         f"(6.1) over all $2^{{64}}$ points: $\\lvert\\Delta E\\rvert \\le {e['e_ulp_max']:.2f}$ ulp, $\\lvert\\Delta "
         "G\\rvert"
         f" \\le {e['g_ratio_max']:.2f}\\cdot2^{{-22}}(1+\\lvert G\\rvert)$; Theorem 9 "
         f"([end_to_end.md](end_to_end.md)): $\\le {sci_up(nz['total'])}$ at $V' = 2^{{18}}$, worst entropy "
         f"(interpreter); {compiled}",
         f"first order, exhaustive $m(g)$: ${sci(n['first_order']['tv'])}$ (an estimate)"),
        ("online merge's coin: the 64-bit integer against $K(q') = \\lceil 2^{64}q' - \\frac12\\rceil$ (§8.2)",
         "Theorem 8.4: $2^{-65} + \\min(q, 1 - q)(\\theta + 1.0001\\,u_{64}\\lvert L - L_C\\rvert)$, "
         f"$\\theta = {lem['theta'] / 2.0**-53:.2f}\\,u_{{64}}$, per merge; over $n$ merges the sum",
         f"shipped coin at {coin['cases']} pairs $(L, L_C)$, take set $[0, K)$ exact: largest $\\lvert P - q\\rvert = "
         f"{sci(coin['max_abs'])}$ (the version-1 float32 coin: ${sci(sl['coin_v1']['max_abs'])}$)"),
        ("group draw: float64 Gumbel over $K$ groups (grouped, factorized TP, tile inverse CDF; §8.3)",
         f"$K/2^{{64}} + 2K D_{{G64}}$, $D_{{G64}} \\le {sci_up(lem['gumbel64']['D_G64'])}$ (Lemma 8.3): "
         f"${sci_up(lem['group_bounds']['2'])}$ for $K = 2$, ${sci_up(lem['group_bounds']['1187'])}$ for $K = 1187$",
         f"the float64 noise within $u_{{64}}({lem['gumbel64']['A']:.2f} + "
         f"{lem['gumbel64']['B']:.2f}\\lvert G\\rvert)$ at every grid point (Lemma 8.3)"),
        ("float32 log-masses of groups, chunks, shards (§8.4)", "Lemma 5: $\\tanh(\\varepsilon/2)$, $\\varepsilon$ = "
         f"`logmass_tolerance` (${sci_up(lm['tv_bound'])}$ in the example)",
         f"example: $\\max\\lvert\\hat L - L\\rvert = {sci(lm['max_abs_error'])}$, TV ${sci(lm['tv'])}$"),
        ("tile inverse CDF: integer weights and index ([tile_inverse_cdf.md](tile_inverse_cdf.md))",
         f"Proposition 3: $R/(1 - R)$, $R \\le 1.00001(\\gamma' E_p\\lvert d\\rvert + "
         f"{tc['eta_documented_units']:.3f}\\cdot2^{{-24}}) + 2^{{-45}}$; index $2^{{-128}}$ per token",
         f"TV ${sci(tc['rows']['bench T=0.9']['design']['tv'])}$ on the benchmark row (bound "
         f"${sci_up(tc['rows']['bench T=0.9']['tv_bound'])}$)"),
        ("float32 logits: $z\\cdot\\mathrm{fl}(1/T)$ and fp32 accumulation (§7; a change of the target)",
         "Lemma 5: $\\tanh(\\gamma_3\\max\\lvert z/T\\rvert/2)$; $\\tanh(\\max\\lvert\\Delta z\\rvert/2T)$ with "
         "model (A2)'s bound on tensor cores ([end_to_end.md](end_to_end.md), §5; Higham's $\\gamma_D$ assumes "
         "rounding to nearest)", f"TV ${sci(logits['1.0']['tv'])}$ ($D = {logits['1.0']['d']}$, $T = 1$, this "
         f"machine's CPU matmul), ${sci(s['temperature'][0]['tv'])}$ ($T = {s['temperature'][0]['t']:g}$)"),
    ]  # fmt: skip
    return {"budget": md_table(rows, header=("source", "bound (proved)", "computed"))}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    status = 0
    for name, mod in (
        ("grid of uniforms (sections 2-4)", check_grid_noise),
        ("float32 scores and logits (sections 5, 7, 7b)", check_float32_scores),
        ("float32 noise arithmetic (section 6)", check_float32_noise),
        ("second-level draws (section 8)", check_second_level),
    ):
        print(f"######## {name}")
        status |= mod.main(argv)
    if "--write" in argv:
        md = _generated.HERE / "finite_precision.md"
        _generated.write_blocks(md, "check_finite_precision.py", render(load_all()))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
