"""Hypothesis strategies for the arguments the entry points share.  Each takes ``bad``: draw a good value (the
kernels then run on unusual but valid inputs) or a bad one, which must be refused with a message naming the
argument (its :attr:`~tests.fuzz.recipes.Arg.refuse` patterns).  :func:`bad_names` picks which arguments of a call are
drawn bad: none in half the calls, one in 40 %, two in 10 %.

Extremes drawn: shapes with ``B``/``V``/``D`` of 0 and 1, wrong ranks; dtypes float32/16, bfloat16 and the refused
float64, int, bool, complex; the ``meta`` device; transposed, strided, zero-stride (expanded) and sparse layouts,
nested lists; the value kinds of :data:`~tests.fuzz.recipes.FLOAT_KINDS` (huge, tiny, subnormal, ``-inf`` rows, NaN,
``+inf``); temperatures ``0``, ``-0.0``, ``1e-300``, ``1e-39``, ``3e38``, ``1e39``, ``10**400``, NaN, infinities,
tensors with bad rows; ``bool``/NumPy/``Fraction``/string/``None``/tensor values where ints or floats are expected.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from .recipes import FLOAT_KINDS, Arg, TensorRecipe, lit, tensor

GOOD_FLOAT_DTYPES = ("float32", "float16", "bfloat16")
BAD_DTYPES = ("float64", "int32", "bool", "complex64")
seeds = st.integers(0, 2**31 - 1)


def pick(options):
    """One of ``options`` (a list: repeat an entry to weight it)."""
    return st.sampled_from(options)


@st.composite
def bad_names(draw, names: list[str]) -> set[str]:
    """The arguments of a call drawn bad: none (1/2), one (2/5), two (1/10)."""
    n = draw(pick([0] * 5 + [1] * 4 + [2]))
    return set(draw(st.permutations(names))[:n])


@st.composite
def data_tensor(draw, name: str, shape: tuple, *, kinds=tuple(FLOAT_KINDS), bad: bool = False) -> Arg:
    """A float data tensor (logits, hidden, weight) of ``shape`` and a value kind; ``bad``: of a refused dtype,
    device or layout."""
    dtype = draw(pick(["float32"] * 3 + ["float16", "bfloat16"]))
    layouts = (
        ["contiguous"] * 5 + ["transposed", "strided", "expanded"] + (["expanded_cols"] if len(shape) == 2 else [])
    )
    layout, device = draw(pick(layouts)), "cpu"
    if bad:
        what = draw(pick(["dtype", "layout", "device"]))
        if what == "dtype":
            dtype = draw(pick(list(BAD_DTYPES)))
        elif what == "layout":
            layout = draw(pick(["sparse", "list"]))
        else:
            device = "meta"
    recipe = TensorRecipe(tuple(shape), dtype, device, layout, draw(pick(list(kinds))), draw(seeds))
    return tensor(recipe, (name,) if bad else ())


@st.composite
def logits_shape(draw, *, bad: bool = False) -> tuple:
    """A logits shape ``(B, V)``; ``bad``: ``B = 0``, ``V = 0`` or the wrong number of dimensions."""
    B = draw(pick([1, 2, 3, 3, 5]))
    V = draw(pick([1, 2, 3, 17, 40, 40, 100, 300]))
    return draw(pick([(0, V), (B, 0), (V,), (1, B, V)])) if bad else (B, V)


_TEMPERATURE_ROWS = ("ones", "mixed", "mixed", "zeros", "one_zero", "negzero", "nan", "neg", "inf", "tiny64", "tiny32",
                     "huge", "scalar")  # fmt: skip


def _temperature_values(rows: str, B: int) -> list[float]:
    return {
        "ones": [1.0] * B,
        "mixed": [0.5 + 0.25 * (i % 7) for i in range(B)],
        "zeros": [0.0] * B,
        "one_zero": [0.0] + [0.9] * (B - 1),
        "negzero": [-0.0] + [1.1] * (B - 1),
        "nan": [1.0] * (B - 1) + [math.nan],
        "neg": [-1.0] + [1.0] * (B - 1),
        "inf": [math.inf] + [1.0] * (B - 1),
        "tiny64": [1e-300] + [1.0] * (B - 1),
        "tiny32": [1e-39] + [1.0] * (B - 1),
        "huge": [1e38] * B,
        "scalar": [0.8],
    }[rows]


@st.composite
def temperature(draw, B: int, *, bad: bool = False, tensors: bool = True) -> Arg:
    """A temperature: a number, or a tensor ``[B]``/``[]`` whose rows may be bad (found by the kernels: the argument
    itself is good); ``bad``: a refused number or kind, or a tensor of a refused shape, dtype, device or layout."""
    p = ("temperature",)
    if bad:
        options = [lit(v, p) for v in (1e-39, 1e-300, 5e-324, 1e39, 1e300, math.inf, -math.inf, math.nan, -1.0,
                                       -1e-300)]  # fmt: skip
        options += [lit(10**400, p, "10**400"), lit(True, p), lit(np.bool_(True), p), lit("1", p), lit(None, p),
                    lit(1j, p), lit([1.0] * B, p)]  # fmt: skip
        if tensors:
            v = tuple([0.8] * B)
            options += [tensor(TensorRecipe((B + 1,), values=v + (0.8,)), p),
                        tensor(TensorRecipe((B, 1), values=v), p),
                        tensor(TensorRecipe((B,), "int64", values=v), p),
                        tensor(TensorRecipe((B,), "bool", values=v), p),
                        tensor(TensorRecipe((B,), device="meta", values=v), p),
                        tensor(TensorRecipe((B,), layout="sparse", values=v), p)]  # fmt: skip
        return draw(pick(options))
    numbers = [lit(1.0), lit(0.7), lit(2.0), lit(0.0), lit(-0.0), lit(1e-30), lit(1e-38), lit(3e38), lit(2),
               lit(np.float32(0.5)), lit(np.float64(1.5)), lit(np.int64(1)), lit(np.float16(0.25)),
               Arg(("fraction", (1, 2)), "Fraction(1, 2)")]  # fmt: skip
    if not tensors or draw(st.booleans()):
        return draw(pick(numbers))
    rows = draw(pick(list(_TEMPERATURE_ROWS)))
    values = _temperature_values(rows, B)
    shape = () if rows == "scalar" else (B,)
    dtype = "float64" if rows == "tiny64" else draw(pick(["float32", "float32", "float16", "bfloat16", "float64"]))
    layout = draw(pick(["contiguous"] * 4 + (["strided", "expanded"] if shape else [])))
    if layout == "expanded":
        values = values[:1]
    return tensor(TensorRecipe(shape, dtype, "cpu", layout, "values", draw(seeds), tuple(values)))


@st.composite
def seed(draw, *, bad: bool = False, tensors: bool = False) -> Arg:
    """A seed: ints of ``[0, 2**64)``, ``None``, NumPy ints, a 0-dim int64 tensor where the entry point takes device
    seeds (``tensors``); ``bad``: out of range, wrong kinds, wrong tensors."""
    p = ("seed",)
    five = (5.0,)
    if bad:
        options = [lit(-1, p), lit(2**64, p), lit(1.5, p), lit("1", p), lit(True, p), lit(np.bool_(False), p),
                   tensor(TensorRecipe((), "int32", values=five), p),
                   tensor(TensorRecipe((1, 1), "int64", values=five), p),  # ([1] is a batch of one's row seeds)
                   tensor(TensorRecipe((), "float32", values=five), p),
                   tensor(TensorRecipe((), "int64", device="meta", values=five), p)]  # fmt: skip
        if not tensors:
            options.append(tensor(TensorRecipe((), "int64", values=five), p))
        return draw(pick(options))
    options = [lit(0), lit(1), lit(12345), lit(2**63), lit(2**64 - 1), lit(None), lit(None), lit(np.uint64(2**64 - 1)),
               lit(np.int32(7))]  # fmt: skip
    if tensors:
        options += [tensor(TensorRecipe((), "int64", values=five)), tensor(TensorRecipe((), "int64", values=(-1.0,)))]
    return draw(pick(options))


def num_samples(*, bad: bool = False) -> st.SearchStrategy[Arg]:
    p = ("num_samples",)
    if bad:
        return pick([lit(0, p), lit(-1, p), lit(True, p), lit(2.0, p), lit("2", p), lit(None, p), lit(2**32, p),
                     tensor(TensorRecipe((), "int64", values=(2.0,)), p)])  # fmt: skip
    return pick([lit(1), lit(1), lit(2), lit(3), lit(np.int64(2))])


def flag(name: str, *, default: bool, bad: bool = False) -> st.SearchStrategy[Arg]:
    p = (name,)
    if bad:
        return pick([lit(1, p), lit("no", p), lit(None, p)])
    return pick([lit(default)] * 3 + [lit(not default)] * 2 + [lit(np.bool_(default))])


def top_k(B: int, V: int, *, bad: bool = False) -> st.SearchStrategy[Arg]:
    p = ("top_k",)
    if bad:
        return pick([lit(0, p), lit(-1, p), lit(2.0, p), lit(True, p), lit("5", p),
                     tensor(TensorRecipe((B,), "float32", values=(2.0,) * B), p),
                     tensor(TensorRecipe((B + 1,), "int64", values=(2.0,) * (B + 1)), p),
                     tensor(TensorRecipe((B,), "int64", values=(0.0,) * B), p),
                     tensor(TensorRecipe((B,), "int64", device="meta", values=(2.0,) * B), p)])  # fmt: skip
    per_row = tuple(float(1 + i % V) for i in range(B))
    return pick([lit(None)] * 6 + [lit(1), lit(2), lit(3), lit(V), lit(V + 3), lit(1024), lit(np.int64(2)),
                                   tensor(TensorRecipe((B,), "int64", values=per_row)),
                                   tensor(TensorRecipe((B,), "int32", values=(float(V),) * B))])  # fmt: skip


def block(name: str, *, bad: bool = False) -> st.SearchStrategy[Arg]:
    p = (name,)
    if name == "block_b":
        if bad:
            return pick([lit(0, p), lit(3, p), lit(2.5, p), lit(True, p)])
        return pick([lit(None)] * 4 + [lit(1), lit(2), lit(4), lit(16), lit(np.int64(4))])
    if bad:
        return pick([lit(0, p), lit(1, p), lit(8, p), lit(48, p), lit(16.0, p), lit(True, p), lit(2**21, p)])
    return pick([lit(None)] * 4 + [lit(16), lit(32), lit(64), lit(256), lit(np.int64(32))])


def tiles(*, bad: bool = False) -> st.SearchStrategy[Arg]:
    if bad:
        return pick([lit("big", ("tiles",)), lit((16, 64, 16), ("tiles",))])
    return pick([lit(None)] * 4 + [Arg(("tiles", (16, 64, 16)), "TileConfig(16, 64, 16)"),
                                   Arg(("tiles", (16, 32, 32)), "TileConfig(16, 32, 32)")])  # fmt: skip


@st.composite
def group_sizes(draw, V: int, *, bad: bool = False) -> Arg:
    p = ("group_sizes",)
    a = draw(st.integers(0, V))
    if bad:
        return draw(pick([lit([V / 2, V / 2], p), lit([True, V - 1], p), lit([V + 1], p), lit([-1, V + 1], p),
                          lit([], p), lit(5, p), lit("ab", p), lit([None, V], p),
                          tensor(TensorRecipe((2,), "float32", values=(float(a), float(V - a))), p)]))  # fmt: skip
    good = [lit(None)] * 4 + [lit([V]), lit([a, V - a]), lit([0, V]), lit([V, 0]), lit([a, 0, V - a]),
                              Arg(("iter", [a, V - a]), f"iter([{a}, {V - a}])"),
                              Arg(("gen", [a, V - a]), f"(m for m in ({a}, {V - a}))"),
                              Arg(("npa", "int64", [a, V - a]), f"np.array([{a}, {V - a}])"),
                              tensor(TensorRecipe((2,), "int64", values=(float(a), float(V - a))))]  # fmt: skip
    if V <= 40:  # each group is a launch (MAX_GROUPS): 40 of them take 1.5 s in the interpreter
        good.append(lit([1] * V, (), f"[1] * {V}"))
    return draw(pick(good))
