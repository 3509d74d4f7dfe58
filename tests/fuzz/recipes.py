"""Arguments as recipes: what the fuzzer draws is plain data (picklable, printable, sent to the ranks of a world),
built into objects only when the call runs.

An :class:`Arg` is one argument: ``make`` (the recipe), ``shown`` (how the call reads) and ``refuse`` (empty for a
good argument; else patterns of which a refusal's message must match one: the argument's name).  A tensor's recipe is
a :class:`TensorRecipe`: shape, dtype, device, layout (contiguous, transposed, strided, expanded with a zero stride,
sparse, or a nested list instead of a tensor) and a value kind (:data:`FLOAT_KINDS`), drawn from its own seed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from fractions import Fraction

import numpy as np
import torch

import flashsampling

#: Value kinds of float data, with what each plants.
FLOAT_KINDS = {
    "normal": "N(0, 2.5^2)",
    "exact": "multiples of 1/8 in [-2, 2]: every fp32 product and sum exact, so a matmul's logits are known exactly",
    "ties": "integers in [-2, 2]: many exact ties",
    "flat": "all zero: every token tied",
    "masked": "about 30 % -inf, at least one finite logit per row",
    "masked_row": "row 0 all -inf (no finite logit)",
    "nan": "one NaN",
    "posinf": "one +inf",
    "neginf": "one -inf (a mask in logits, an error in hidden or weight)",
    "huge": "uniform in +-(largest finite of the dtype)",
    "tiny": "N(0, 1) * 1e-30 (0 in float16)",
    "subnormal": "subnormal values of the dtype",
    "wide": "N(0, 1), a few entries +-1e30",
}

DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
    "complex64": torch.complex64,
}


@dataclasses.dataclass(frozen=True)
class TensorRecipe:
    """A tensor to build: ``shape`` (logical), ``dtype`` (a key of :data:`DTYPES`), ``device`` (``cpu`` or
    ``meta``), ``layout`` (contiguous, transposed, strided, expanded, expanded_cols, sparse, list), ``kind``
    (:data:`FLOAT_KINDS`, or ``values`` with ``values`` given) and ``seed``."""

    shape: tuple
    dtype: str = "float32"
    device: str = "cpu"
    layout: str = "contiguous"
    kind: str = "normal"
    seed: int = 0
    values: tuple | None = None

    def __str__(self) -> str:
        parts = [f"{list(self.shape)}", self.dtype]
        if self.values is not None:
            parts.append(f"values={list(self.values)}")
        elif self.kind != "normal":
            parts.append(self.kind)
        if self.layout != "contiguous":
            parts.append(self.layout)
        if self.device != "cpu":
            parts.append(self.device)
        return "tensor(" + " ".join(parts) + ")"


@dataclasses.dataclass(frozen=True)
class Arg:
    """One argument: the recipe, how the call shows it, and the patterns a refusal must match (empty: good)."""

    make: object
    shown: str
    refuse: tuple[str, ...] = ()


def lit(value, refuse: Iterable[str] = (), shown: str | None = None) -> Arg:
    """A Python or NumPy value as it is (NumPy scalars are kept as ``("np", dtype, value)`` to stay picklable)."""
    if isinstance(value, np.generic):
        return Arg(("np", value.dtype.name, value.item()), shown or f"np.{value.dtype.name}({value.item()!r})",
                   tuple(refuse))  # fmt: skip
    return Arg(("lit", value), shown or _short(repr(value)), tuple(refuse))


def _short(text: str, limit: int = 48) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def tensor(recipe: TensorRecipe, refuse: Iterable[str] = ()) -> Arg:
    return Arg(("tensor", recipe), str(recipe), tuple(refuse))


# --------------------------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------------------------


def build(make):
    """The object a recipe describes (a fresh one each time: a generator is consumed by the call)."""
    tag = make[0]
    if tag == "lit":
        return make[1]
    if tag == "np":
        return np.dtype(make[1]).type(make[2])
    if tag == "npa":
        return np.asarray(make[2], dtype=make[1])
    if tag == "iter":
        return iter(list(make[1]))
    if tag == "gen":
        return (m for m in make[1])
    if tag == "fraction":
        return Fraction(*make[1])
    if tag == "device":
        return torch.device(make[1])
    if tag == "tiles":
        return flashsampling.TileConfig(*make[1])
    if tag == "tensor":
        return make_tensor(make[1])
    if tag == "numpy_of":  # the tensor's values as a NumPy array (bfloat16, which NumPy lacks, as float32)
        t = make_tensor(dataclasses.replace(make[1], layout="contiguous"))
        return (t.float() if t.dtype == torch.bfloat16 else t).numpy()
    raise ValueError(f"unknown recipe {make!r}")


def float_values(kind: str, shape: tuple, dtype: str, rng: np.random.Generator) -> np.ndarray:
    """float64 values of ``kind`` (:data:`FLOAT_KINDS`) representable in ``dtype`` (rounded to it by the caller)."""
    n = math.prod(shape)
    big = {"float16": 65504.0, "bfloat16": 3.38e38}.get(dtype, 3.4e38)
    sub = {"float16": 3e-6, "bfloat16": 5e-39, "float64": 1e-310}.get(dtype, 5e-39)
    if kind == "normal":
        x = rng.normal(0, 2.5, n)
    elif kind == "exact":
        x = rng.integers(-16, 17, n) / 8.0
    elif kind == "ties":
        x = rng.integers(-2, 3, n).astype(np.float64)
    elif kind == "flat":
        x = np.zeros(n)
    elif kind == "huge":
        x = rng.uniform(-1, 1, n) * big
    elif kind == "tiny":
        x = rng.normal(0, 1, n) * 1e-30
    elif kind == "subnormal":
        x = rng.uniform(-1, 1, n) * sub
    elif kind == "wide":
        x = rng.normal(0, 1, n)
        x[rng.random(n) < 0.2] = 1e30 * rng.choice([-1.0, 1.0])
    else:
        x = rng.normal(0, 2.5, n)
    x = x.reshape(shape)
    if n == 0 or len(shape) == 0:
        return x
    rows = x.reshape(-1, shape[-1])  # a view: the rows along the last axis
    if kind == "masked":
        rows[rng.random(rows.shape) < 0.3] = -np.inf
        empty = ~np.isfinite(rows).any(axis=1)
        rows[empty, rng.integers(0, shape[-1], empty.sum())] = 0.5
    elif kind == "masked_row":
        rows[0] = -np.inf
    elif kind in ("nan", "posinf", "neginf"):
        rows.reshape(-1)[rng.integers(0, n)] = {"nan": np.nan, "posinf": np.inf, "neginf": -np.inf}[kind]
    return x


def make_tensor(r: TensorRecipe):
    """Build :class:`TensorRecipe` ``r``."""
    rng = np.random.default_rng(r.seed)
    dtype = DTYPES[r.dtype]
    base_shape = tuple(r.shape)
    if r.layout == "expanded" and len(base_shape) >= 1:  # a zero stride along dim 0
        base_shape = (1, *base_shape[1:]) if len(base_shape) == 2 else ()
    elif r.layout == "expanded_cols" and len(base_shape) == 2:  # a zero stride along dim 1
        base_shape = (base_shape[0], 1)
    elif r.layout == "strided":
        base_shape = (*base_shape[:-1], 2 * base_shape[-1]) if base_shape else base_shape
    if r.values is not None and r.layout == "strided":
        x = np.full(base_shape, 7.0)  # the skipped elements
        x[..., ::2] = np.asarray(r.values, dtype=np.float64).reshape(r.shape)
    elif r.values is not None:
        x = np.asarray(r.values, dtype=np.float64).reshape(base_shape)
    elif dtype in (torch.int32, torch.int64):
        x = rng.integers(1, 4, base_shape).astype(np.float64)
    elif dtype == torch.bool:
        x = rng.integers(0, 2, base_shape).astype(np.float64)
    else:
        x = float_values(r.kind, base_shape, r.dtype, rng)
    t = torch.from_numpy(np.array(x, dtype=np.float64))
    t = t.to(dtype) if dtype != torch.complex64 else t.to(torch.complex64)
    if r.layout == "transposed" and t.dim() == 2:
        t = t.T.contiguous().T
    elif r.layout == "strided":
        t = t[..., ::2]
    elif r.layout == "expanded":
        t = t.expand(*r.shape)
    elif r.layout == "expanded_cols" and t.dim() == 2:
        t = t.expand(*r.shape)
    if r.device != "cpu":
        t = t.to(r.device)
    if r.layout == "sparse":
        t = t.to_sparse()
    elif r.layout == "list":
        return t.tolist()
    return t
