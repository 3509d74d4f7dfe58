"""What a check aims at: small value objects naming a target law and its parameters.

The laws themselves are :mod:`flashsampling.targets`; an aim only names one.  A :class:`Target` says *which* law a
sampler promises (the plain softmax, top-k, top-p, min-p, or a
composition of them in an order); :meth:`Target.probs` computes it in float64 from the logits the sampler
was given, with :mod:`flashsampling.targets`.  A :class:`SpeculativeTarget` holds the draft
probabilities of a speculative sampler and gives the exact law of its output.  Neither draws anything.

==========================  ==================================================================
constructor                 law (``docs/targets.md``)
==========================  ==================================================================
:func:`softmax`             ``softmax(z / T)``
:func:`top_k`               top-k; ``ties="all" | "low_index" | "high_index"``
:func:`top_p`               top-p; ``ties``, ``crossing="keep" | "drop"``, ``strict``
:func:`min_p`               min-p; ``strict``
:func:`chain`               several of the above in an ``order`` (default: temperature, top-k,
                            top-p, min-p)
:func:`speculative`         the output of an accept/reject sampler given ``q`` (draft) and ``p``
==========================  ==================================================================

Examples
--------
>>> import numpy as np
>>> t = chain(top_k(2), top_p(0.9))
>>> t
chain(top_k(k=2, ties='all'), top_p(p=0.9, ties='all', crossing='keep', strict=True), order='transformers')
>>> t.probs(np.array([[2.0, 1.0, 0.0]]), temperature=1.0).round(4).tolist()
[[0.7311, 0.2689, 0.0]]
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import numpy as np

from flashsampling.targets import (
    CROSSINGS,
    TIES,
    ChainLaw,
    draw_draft_tokens,
    sampling_law,
    speculative_chain_law,
)
from flashsampling.targets._inputs import (
    check_bool,
    check_choice,
    check_k,
    check_probability,
    probability_table,
    to_numpy,
)
from flashsampling.targets.truncation import parse_order

__all__ = [
    "SpeculativeTarget",
    "parse_target",
    "Target",
    "chain",
    "min_p",
    "softmax",
    "speculative",
    "top_k",
    "top_p",
]

_FILTER_NAMES = ("top_k", "top_p", "min_p")


@dataclass(frozen=True, repr=False)
class Target:
    """A target law by name and parameters (hashable; compares by value).

    Attributes
    ----------
    name : str
        ``"softmax"``, ``"top_k"``, ``"top_p"``, ``"min_p"`` or ``"chain"``.
    params : tuple of (str, value) pairs
        The law's parameters in a fixed order; per-row values are tuples.
    steps : tuple of Target
        For ``"chain"``: the filters composed, in their canonical order.
    """

    name: str
    params: tuple[tuple[str, object], ...] = ()
    steps: tuple[Target, ...] = ()

    def param(self, key: str):
        """The value of parameter ``key`` (``KeyError`` if the target has none)."""
        for k, v in self.params:
            if k == key:
                return v
        raise KeyError(key)

    def probs(self, logits, temperature=1.0) -> np.ndarray:
        """The float64 law ``[..., V]`` for ``logits [..., V]`` (exactly as the sampler saw them) at ``temperature``.

        Raises ``TypeError``/``ValueError`` as :func:`flashsampling.targets.sampling_law`, e.g. when a
        per-row parameter's length differs from the batch.
        """
        if self.name == "softmax":
            return sampling_law(logits, temperature)
        return sampling_law(logits, temperature, **self._law_kwargs())

    def _law_kwargs(self) -> dict:
        kwargs: dict = {}
        steps = self.steps if self.name == "chain" else (self,)
        for step in steps:
            value = _as_array(step.params[0][1])
            if step.name == "top_k":
                kwargs.update(top_k=value, top_k_ties=step.param("ties"))
            elif step.name == "top_p":
                kwargs.update(
                    top_p=value,
                    top_p_ties=step.param("ties"),
                    top_p_crossing=step.param("crossing"),
                    top_p_strict=step.param("strict"),
                )
            else:
                kwargs.update(min_p=value, min_p_strict=step.param("strict"))
        if self.name == "chain":
            kwargs["order"] = self.param("order")
        return kwargs

    def __repr__(self) -> str:
        inner = [repr(s) for s in self.steps] + [f"{k}={v!r}" for k, v in self.params]
        return f"{self.name}({', '.join(inner)})"


def _as_array(value):
    return np.asarray(value) if isinstance(value, tuple) else value


def _frozen(arr: np.ndarray, kind: type):
    """A checked parameter as an immutable value: a Python number, or a tuple of them (one per row)."""
    if arr.ndim == 0:
        return kind(arr[()])
    if arr.ndim != 1:
        raise ValueError(f"a per-row parameter must be a number or 1-D (one per row), got shape {arr.shape}")
    return tuple(kind(x) for x in arr)


def softmax() -> Target:
    """The plain law ``softmax(z / T)`` (:func:`flashsampling.reference.softmax`).

    Examples
    --------
    >>> softmax().probs(np.array([0.0, 0.0])).tolist()
    [0.5, 0.5]
    """
    return Target("softmax")


def top_k(k, *, ties: str = "all") -> Target:
    """Top-k: the ``k`` highest logits (``k >= 1``, or a sequence of them, one per row).

    ``ties="all"`` keeps every token tied at the k-th logit; ``"low_index"``/``"high_index"`` keep
    exactly ``k``, tied logits ranked by lower / higher index first.

    Raises
    ------
    TypeError
        ``k`` not an integer (``2.0`` included).
    ValueError
        ``k < 1``, or an unknown ``ties``.

    Examples
    --------
    >>> top_k(50)
    top_k(k=50, ties='all')
    """
    return Target("top_k", (("k", _frozen(check_k(k), int)), ("ties", check_choice(ties, "ties", TIES))))


def top_p(p, *, ties: str = "all", crossing: str = "keep", strict: bool = True) -> Target:
    """Top-p (nucleus): keep ``i`` iff the mass ranked before it is ``< p`` (``strict``) or ``<= p``.

    ``crossing="drop"`` also removes the token whose mass crosses ``p``; ``ties`` as :func:`top_k`.

    Raises
    ------
    TypeError
        ``p`` not a number, ``strict`` not a bool.
    ValueError
        ``p`` outside ``(0, 1]`` or NaN, an unknown ``ties`` or ``crossing``.

    Examples
    --------
    >>> top_p(0.9, crossing="drop")
    top_p(p=0.9, ties='all', crossing='drop', strict=True)
    """
    value = _frozen(check_probability(p, "p", low=0.0, low_open=True), float)
    return Target(
        "top_p",
        (
            ("p", value),
            ("ties", check_choice(ties, "ties", TIES)),
            ("crossing", check_choice(crossing, "crossing", CROSSINGS)),
            ("strict", check_bool(strict, "strict")),
        ),
    )


def min_p(p, *, strict: bool = False) -> Target:
    """Min-p: keep ``i`` iff ``P(i) >= p max P`` (``P(i) > p max P`` with ``strict``), ``p`` in ``[0, 1]``.

    Raises
    ------
    TypeError
        ``p`` not a number, ``strict`` not a bool.
    ValueError
        ``p`` outside ``[0, 1]`` or NaN.

    Examples
    --------
    >>> min_p(0.1)
    min_p(p=0.1, strict=False)
    """
    value = _frozen(check_probability(p, "p", low=0.0, low_open=False), float)
    return Target("min_p", (("p", value), ("strict", check_bool(strict, "strict"))))


def chain(*filters: Target, order="transformers") -> Target:
    """Several filters composed in ``order`` (a name of :data:`flashsampling.targets.ORDERS` or a tuple).

    Parameters
    ----------
    *filters : Target
        At most one each of :func:`top_k`, :func:`top_p`, :func:`min_p` (any order of arguments; the
        ``order`` decides the composition).  None gives the plain softmax.
    order : str or tuple
        ``"transformers"`` (temperature, top-k, top-p, min-p), ``"vllm"``, ``"llama.cpp"``, ``"joint"``,
        or a tuple of steps with nested tuples for joint steps.

    Raises
    ------
    TypeError
        An argument that is not a filter target.
    ValueError
        A filter given twice, or a bad ``order``.

    Examples
    --------
    >>> chain(min_p(0.05), top_k(40), order="vllm")
    chain(top_k(k=40, ties='all'), min_p(p=0.05, strict=False), order='vllm')
    """
    for f in filters:
        if not isinstance(f, Target) or f.name not in _FILTER_NAMES:
            raise TypeError(f"chain takes top_k(...), top_p(...) or min_p(...) targets, got {f!r}")
    names = [f.name for f in filters]
    if len(set(names)) != len(names):
        raise ValueError(f"chain: each filter may appear once, got {names}")
    parse_order(order, tuple(names))
    frozen_order = order if isinstance(order, str) else tuple(tuple(s) if isinstance(s, list) else s for s in order)
    steps = tuple(sorted(filters, key=lambda f: _FILTER_NAMES.index(f.name)))
    return Target("chain", (("order", frozen_order),), steps)


@dataclass(frozen=True, eq=False, repr=False)
class SpeculativeTarget:
    """The law of a speculative (accept/reject) sampler given its draft probabilities.

    The sampler under test takes ``(draft_tokens, q, p)``: draft tokens ``x[..., i] ~ q[..., i, :]``
    (drawn by the checker, :meth:`draw_draft_tokens`), the draft probabilities ``q`` ``(B, K, V)`` and
    the target probabilities ``p`` ``(B, K + 1, V)`` (:meth:`probs`), and emits up to ``K + 1`` tokens
    per row; :meth:`law` gives their exact law (:class:`flashsampling.targets.ChainLaw`).

    Attributes
    ----------
    draft_probs : numpy.ndarray, float64, shape (B, K, V)
        ``q``, read-only.
    target : Target
        The law ``p`` is computed with, per position, from logits ``(B, K + 1, V)``.
    """

    draft_probs: np.ndarray
    target: Target

    @property
    def num_draft_tokens(self) -> int:
        """K."""
        return self.draft_probs.shape[-2]

    def probs(self, logits, temperature=1.0) -> np.ndarray:
        """The target probabilities ``p``, float64 ``(B, K + 1, V)``, from logits ``(B, K + 1, V)``.

        Each position ``i`` is ``target.probs(logits[:, i], temperature)``, so per-row parameters and
        temperatures have one value per row ``B``.  Raises ``ValueError`` when the logits' shape is not
        ``(B, K + 1, V)`` for the draft's ``B, K, V``.
        """
        b, k, v = self.draft_probs.shape
        shape = tuple(to_numpy(logits, "logits").shape)
        if shape != (b, k + 1, v):
            raise ValueError(f"logits must have shape (B, K + 1, V) = {(b, k + 1, v)} for this draft, got {shape}")
        z = to_numpy(logits, "logits")
        return np.stack([self.target.probs(z[:, i], temperature) for i in range(k + 1)], axis=1)

    def law(self, logits, temperature=1.0) -> ChainLaw:
        """The exact law of the sampler's output: :func:`flashsampling.targets.speculative_chain_law` of ``p, q``."""
        return speculative_chain_law(self.probs(logits, temperature), self.draft_probs)

    def draw_draft_tokens(self, num_samples: int, *, seed) -> np.ndarray:
        """Draft tokens ``x ~ q``, int64 ``(num_samples, B, K)``: :func:`flashsampling.targets.draw_draft_tokens`."""
        return draw_draft_tokens(self.draft_probs, num_samples, seed=seed)

    def __repr__(self) -> str:
        b, k, v = self.draft_probs.shape
        return f"speculative(draft_probs=<float64 (B={b}, K={k}, V={v})>, target={self.target!r})"


def speculative(draft_probs, *, target: Target | None = None) -> SpeculativeTarget:
    """The target of a speculative sampler: its output must follow ``target`` position by position.

    Parameters
    ----------
    draft_probs : array or tensor, float, shape (B, K, V)
        The draft model's probabilities ``q`` at each of the ``K >= 1`` draft positions; finite,
        ``>= 0``, each row summing to 1 within ``V * 2**-23`` (renormalized in float64).
    target : Target, optional
        How the target model's probabilities ``p`` are computed from its logits; default
        :func:`softmax`.

    Raises
    ------
    TypeError
        ``draft_probs`` not floating-point; ``target`` not a :class:`Target`.
    ValueError
        ``draft_probs`` not 3-D, empty, negative, non-finite or not summing to 1.

    Examples
    --------
    >>> s = speculative(np.full((1, 2, 4), 0.25))
    >>> s
    speculative(draft_probs=<float64 (B=1, K=2, V=4)>, target=softmax())
    >>> law = s.law(np.zeros((1, 3, 4)))
    >>> law.acceptance.tolist(), law.num_emitted.tolist()
    ([[1.0, 1.0]], [[0.0, 0.0, 1.0]])
    """
    q = probability_table(draft_probs, "draft_probs")
    if q.dtype == object:
        q = q.astype(np.float64)
    if q.ndim != 3:
        raise ValueError(f"draft_probs must have shape (B, K, V), got {q.shape}")
    t = softmax() if target is None else target
    if not isinstance(t, Target):
        raise TypeError(f"target must be a Target (softmax(), top_k(...), ...), got {t!r}")
    q = q.copy()
    q.setflags(write=False)
    return SpeculativeTarget(q, t)


#: The constructors :func:`parse_target` reads (a speculative target needs draft probabilities: no spelling).
_TARGETS = ("softmax", "top_k", "top_p", "min_p", "chain")


def _literal(node: ast.AST, text: str):
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ValueError(f"{text!r}: arguments must be literals (numbers, strings, tuples)") from None


def _build(node: ast.AST, text: str):
    if isinstance(node, ast.Name) and node.id == "softmax":
        return softmax()
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _TARGETS):
        raise ValueError(f"{text!r} is not a target: write softmax(), top_k(k), top_p(p), min_p(p) or chain(...)")
    name = node.func.id
    args = [_build(a, text) if name == "chain" else _literal(a, text) for a in node.args]
    kwargs = {k.arg: _literal(k.value, text) for k in node.keywords if k.arg is not None}
    if len(kwargs) != len(node.keywords):
        raise ValueError(f"{text!r}: ** arguments are not accepted")
    return _CONSTRUCTORS[name](*args, **kwargs)


def parse_target(text: str, *, load=None) -> Target | SpeculativeTarget:
    """A :class:`Target` from its Python spelling, literal arguments only (the command line's ``--target``):
    ``softmax()``, ``top_k(50)``, ``top_p(0.9, crossing='drop')``, ``min_p(0.05)``, ``chain(top_k(50), top_p(0.9),
    order='vllm')``; ``"softmax"`` alone is accepted.  With ``load`` (a function from a file name to an array), also
    ``speculative('draft.npy')`` and ``speculative('draft.npy', target=top_k(50))``: a :class:`SpeculativeTarget`
    whose draft probabilities ``(B, K, V)`` are ``load('draft.npy')``.  ``ValueError`` or ``TypeError`` with the
    reason otherwise."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise ValueError(f"{text!r} does not parse as a Python expression") from None
    node = tree.body
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "speculative":
        if load is None:
            raise ValueError(f"{text!r}: a speculative target needs draft probabilities: use the Python call")
        if len(node.args) != 1 or not isinstance(node.args[0], ast.Constant) or not isinstance(node.args[0].value,
                                                                                              str):  # fmt: skip
            raise ValueError(f"{text!r}: write speculative('draft.npy'[, target=...]) with the file of the draft "
                             "probabilities (B, K, V)")  # fmt: skip
        extra = [k.arg for k in node.keywords if k.arg != "target"]
        if extra:
            raise ValueError(f"{text!r}: speculative takes a file and target=..., not {', '.join(map(str, extra))}")
        inner = [k.value for k in node.keywords]
        target = _build(inner[0], text) if inner else None
        return speculative(load(node.args[0].value), target=target)
    return _build(node, text)


_CONSTRUCTORS = {"softmax": softmax, "top_k": top_k, "top_p": top_p, "min_p": min_p, "chain": chain}
