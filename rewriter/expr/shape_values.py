"""What a computed shape tensor holds, as dims: ``dims(s)`` in rules.

Exporters with dynamic axes build Reshape targets at run time:
``Concat(Unsqueeze(Gather(Shape(x), 0)), Unsqueeze(Gather(Shape(x), 1)), [-1], [32])``.
The tensor is not constant, but what it holds is known in terms of x's dims: x's batch
dim, x's sequence dim, -1, 32.  This module follows such a value back through the few ops
shape arithmetic is made of (Shape, Gather, Slice, Concat, Unsqueeze, Squeeze, Reshape
of one element, Cast, Identity, torch's expand(-1) Where) and returns one entry per
element: an int (a known number), the dim's symbolic name (a string, as ``shape()``
reports it), or for a dim nobody named a token ``"?<value>[<axis>]"`` that equals only
the same dim of the same tensor.

Dims also combine, as the dynamo exporter computes a slice's length from symbolic sizes
(``max(0, (past + 1) - min(past, past + 1))``), heads folded into the batch (``4*batch``)
or an audio front end's frames (``samples // 10 - 1``): Add, Sub, Mul, Neg, Div of a size
by a positive number, and Min/Max (the provably larger or smaller, else a ``Max(0, d)`` atom,
which is 0 where the model's broadcasts bound it: ``Min(128, seq)`` is seq in a model that
broadcasts the two against each other).  A combination is
one canonical name (dim_algebra.py: ``"past + 1"``, ``"a + -1*b"``, ``"batch*seq"``,
``"(samples//10) + -1"``), the spelling declared types are read in too, so equal sizes get
equal names; one that cancels to a number is that number.  Anything else (a data-dependent
shape, an unknown dim) is unknown: the function fails, and the match is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np
from onnx import NodeProto, helper

from . import dim_algebra as algebra
from .dim_algebra import Poly
from .values import EvalFailure


class ShapeFacts(Protocol):
    """What ``shape_values`` asks of the graph: a part of ``GraphFacts`` (which a
    ``GraphView`` implements), small enough for a types table to answer as well."""

    def constant(self, value: str) -> np.ndarray | None: ...

    def producer_node(self, value: str) -> NodeProto | None: ...

    def shape(self, value: str) -> list[int | str | None] | None: ...

    def settled_dim(self, dim: int | str) -> int | str:
        """A computed dim as the model's types spell it: its ``Max(0, d)`` atoms that are 0
        wherever the model runs taken as 0 (its broadcasts bound them:
        dim_algebra.vanishing_atom), a sum the model names otherwise by that name (a
        cache's past + new is its ``total_sequence_length``: symbolic_shapes.dim_aliases)."""
        ...


_MAX_DEPTH = 16  # shape arithmetic is shallow; a deeper chain is not worth following


def shape_values(graph: ShapeFacts, value: str, depth: int = 0) -> list[int | str]:
    """The elements of the 1-D (or 0-D, then one entry) int tensor ``value`` as dims."""
    if depth > _MAX_DEPTH:
        raise EvalFailure(f"'{value}' is computed too deep to follow")
    constant = graph.constant(value)
    if constant is not None:
        if constant.dtype.kind not in "iu" or constant.ndim > 1:
            raise EvalFailure(f"'{value}' is not a shape")
        return [int(v) for v in np.atleast_1d(constant)]
    node = graph.producer_node(value)
    if node is None:
        raise EvalFailure(f"'{value}' is not computed from shapes")
    op = node.op_type if node.domain in ("", "ai.onnx") else None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if op == "Shape":
        dims = _dims_of(graph, node.input[0])
        start, end = attrs.get("start", 0), attrs.get("end")
        return dims[start:end]
    if op in ("Identity", "Cast"):
        if op == "Cast" and helper.tensor_dtype_to_np_dtype(attrs["to"]).kind not in "iu":
            raise EvalFailure("a shape cast to a non-integer type")
        return shape_values(graph, node.input[0], depth + 1)
    if op == "Concat":
        out: list[int | str] = []
        for part in node.input:
            out += shape_values(graph, part, depth + 1)
        return out
    if op in ("Unsqueeze", "Squeeze", "Reshape"):
        inner = shape_values(graph, node.input[0], depth + 1)
        if len(inner) != 1:
            raise EvalFailure(f"{op} of a shape with {len(inner)} elements")
        return inner
    if op == "Gather" and attrs.get("axis", 0) == 0:
        source = shape_values(graph, node.input[0], depth + 1)
        indices = graph.constant(node.input[1])
        if indices is None:
            raise EvalFailure("Gather of a shape at computed indices")
        try:
            return [source[int(i)] for i in np.atleast_1d(indices)]
        except IndexError:
            raise EvalFailure("Gather index outside the shape") from None
    if op == "Slice":
        return _slice(graph, node, shape_values(graph, node.input[0], depth + 1))
    if op == "Where":
        return _where_equal(graph, node, depth)
    if op in _ARITHMETIC and len(node.input) == _ARITHMETIC[op][0]:
        operands = [shape_values(graph, part, depth + 1) for part in node.input]
        if any(len(o) != 1 for o in operands):
            raise EvalFailure(f"{op} of shapes of more than one element")
        return [graph.settled_dim(_ARITHMETIC[op][1](*(o[0] for o in operands)))]
    raise EvalFailure(f"'{value}' comes from {node.op_type}, not shape arithmetic")


def dim_sum(dims: list[int | str]) -> int | str:
    """The sum of dims as one dim: a number when the names cancel (or there are none), else
    the canonical name ``"a + b + 3"`` (dim_algebra.py): the same dims give the same name
    whatever the order they were added in (a KV cache's total length, past + new).  An
    unnamed dim (a ``?`` token) makes the sum unknown."""
    total: Poly = {}
    for d in dims:
        total = algebra.add(total, algebra.poly_of(d))
    return algebra.dim_of(total)


def dim_difference(a: int | str, b: int | str) -> int | str:
    """a - b as one dim (see ``dim_sum``): a number when the names cancel."""
    return algebra.dim_of(algebra.add(algebra.poly_of(a), algebra.poly_of(b), -1))


def dim_product(dims: list[int | str]) -> int | str:
    """The product of dims as one dim (``batch*seq``: a flattened batch and sequence)."""
    total: Poly = {(): 1}
    for d in dims:
        total = algebra.multiply(total, algebra.poly_of(d))
    return algebra.dim_of(total)


def dim_quotient(a: int | str, b: int | str) -> int | str | None:
    """a / b when b (a number times names) divides every term of a exactly (``4*batch`` by 4,
    ``batch*seq`` by ``batch``); None otherwise."""
    try:
        quotient = algebra.divide_exactly(algebra.poly_of(a), algebra.poly_of(b))
    except EvalFailure:
        return None
    return None if quotient is None else algebra.dim_of(quotient)


def dim_floor_quotient(d: int | str, k: int) -> int | str:
    """floor(d / k) for a number k > 0 as one dim (dim_algebra.floor_divide): a window's
    count of positions, ``(samples + -10)//5 + 1``, is ``(samples//5) + -1``."""
    return algebra.dim_of(algebra.floor_divide(algebra.poly_of(d), k))


def _scaled(d: int | str, factor: int | str) -> int | str:
    return dim_product([d, factor])


def _floor_divided(d: int | str, k: int | str) -> int | str:
    """Integer Div of a size by a positive number: exact, or the floor atom ``(d//k)``
    (ONNX truncates, the same for a dividend >= 0: every term's coefficient >= 0)."""
    if not isinstance(k, int) or k <= 0:
        raise EvalFailure("Div of a dim by anything but a positive number")
    poly = algebra.poly_of(d)
    exact = algebra.divide_exactly(poly, {(): k})
    if exact is not None:
        return algebra.dim_of(exact)
    if any(c < 0 for c in poly.values()):
        raise EvalFailure("Div of a dim that may be negative")
    return algebra.dim_of(algebra.floor_divide(poly, k))


def dim_extremum(largest: bool, a: int | str, b: int | str) -> int | str:
    """Max (largest) or Min of two dims (dim_algebra.extremum: the provably larger or
    smaller, else written with a ``Max(0, d)`` atom that a model's runs may settle)."""
    return algebra.dim_of(algebra.extremum(algebra.poly_of(a), algebra.poly_of(b), largest))


# op -> (its number of inputs, the dim it computes from its operands' dims)
_ARITHMETIC: dict[str, tuple[int, Callable[..., int | str]]] = {
    "Add": (2, lambda a, b: dim_sum([a, b])),
    "Sub": (2, dim_difference),
    "Mul": (2, _scaled),
    "Div": (2, _floor_divided),
    "Neg": (1, lambda a: _scaled(a, -1)),
    "Min": (2, lambda a, b: dim_extremum(False, a, b)),
    "Max": (2, lambda a, b: dim_extremum(True, a, b)),
}


def _where_equal(graph: ShapeFacts, node, depth: int) -> list[int | str]:
    """``Where(Equal(s, k), t, s)`` with constant k and t: torch's expand(-1) idiom (a -1
    in the target keeps the dim).  A dim that is a name is a size, never equal to a
    negative k; an unknown one leaves the result unknown."""
    cond = graph.producer_node(node.input[0])
    if cond is None or cond.op_type != "Equal" or node.input[2] not in cond.input:
        raise EvalFailure("Where over a shape that is not the expand(-1) idiom")
    other = cond.input[1] if cond.input[0] == node.input[2] else cond.input[0]
    k, then = graph.constant(other), graph.constant(node.input[1])
    if k is None or then is None:
        raise EvalFailure("Where over a shape with computed branches")
    dims = shape_values(graph, node.input[2], depth + 1)
    k = np.broadcast_to(np.atleast_1d(k), (len(dims),))
    then = np.broadcast_to(np.atleast_1d(then), (len(dims),))
    out: list[int | str] = []
    for d, kk, tt in zip(dims, k, then):
        if isinstance(d, int):
            out.append(int(tt) if d == int(kk) else d)
        elif int(kk) < 0 and not d.startswith("?"):
            out.append(d)
        else:
            raise EvalFailure("Where over an unknown dim")
    return out


def _dims_of(graph: ShapeFacts, value: str) -> list[int | str]:
    shape = graph.shape(value)
    if shape is None:
        raise EvalFailure(f"the rank of '{value}' is unknown")
    return [d if d is not None else f"?{value}[{axis}]" for axis, d in enumerate(shape)]


def _slice(graph: ShapeFacts, node, source: list[int | str]) -> list[int | str]:
    bounds = [graph.constant(name) if name else None for name in list(node.input[1:]) + [""] * 4][:4]
    starts, ends, axes, steps = bounds
    if starts is None or ends is None or any(b is None for b, name in zip(bounds[2:], node.input[3:]) if name):
        raise EvalFailure("Slice of a shape with computed bounds")
    if (axes is not None and list(np.atleast_1d(axes)) not in ([0], [-1])) or len(np.atleast_1d(starts)) != 1:
        raise EvalFailure("Slice of a shape along more than one axis")
    step = 1 if steps is None else int(np.atleast_1d(steps)[0])
    if step == 0:
        raise EvalFailure("Slice step 0")
    return source[int(np.atleast_1d(starts)[0]) : int(np.atleast_1d(ends)[0]) : step]
