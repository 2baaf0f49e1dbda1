"""What a rule's text alone says about the value of an expression: its kind (a number, a
string, a tensor...) and, where the text spells it out, its shape.

Why: most of what an expression computes depends on the model, so the checker cannot know
it; but some mistakes are in the text itself — ``rank(x) @ W`` multiplies a number,
``[[1, 2]] @ [[1, 2]]`` has inner dimensions 2 and 1 — and a rule author should hear of
them from ``rewriter check`` as ``file:line:col``, not as matches quietly refused on every
model.  So this is deliberately partial: literals, a function's declared result kind
(``Function.returns`` in the registry), the few functions whose result shape follows from
their arguments' (``zeros([2, 3])``, ``reshape(w, [4, 6])``, ``sqrt(k)``), ``let``s, and
``@`` itself.  Everything else is ``UNKNOWN``, which no check complains about.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..expr.dtypes import DTYPES
from ..expr.functions import CONSTANTS, FUNCTIONS
from ..expr.matmul import Dim, MatmulError, matmul_shape
from . import ast as A

# kinds: "number" (and bool: numpy multiplies them alike, as rank 0), "string", "none",
# "tensor" (numbers of some rank: a constant, a list of numbers), "strings" (a list of
# strings), "unknown"
RANK_ZERO = frozenset({"number", "string", "none"})


@dataclass(frozen=True)
class Static:
    """What is known of a value before any model: its ``kind`` and, for a tensor whose rank
    the text fixes, its ``shape`` (dims the text does not fix are ``None``)."""

    kind: str
    shape: tuple[Dim, ...] | None = None

    def describe(self) -> str:
        if self.kind == "tensor" and self.shape == ():
            return "a single number (rank 0)"
        return {
            "number": "a number (rank 0)",
            "string": "a string",
            "none": "none",
            "strings": "a list of strings",
        }.get(self.kind, "a tensor")


UNKNOWN = Static("unknown")
_NUMBER = Static("number", ())
_TENSOR = Static("tensor")
# functions whose result has the shape of their first argument
_ELEMENTWISE = frozenset({"sqrt", "exp", "log", "abs", "tanh", "reciprocal", "floor", "ceil", "cast", "array"})
# functions whose first argument is the shape of their result
_FILLED = frozenset({"zeros", "ones", "full"})
_RETURNS = {"bool": _NUMBER, "int": _NUMBER, "float": _NUMBER, "string": Static("string", ())}


def static_of(expr: A.Expr, lets: Mapping[str, Static]) -> Static:
    """What the text says of ``expr``'s value (``lets``: what it says of the rule's lets)."""
    if isinstance(expr, A.Num):
        return _NUMBER
    if isinstance(expr, A.Str):
        return Static("string", ())
    if isinstance(expr, A.Const):
        return Static("none", ()) if expr.value is None else _NUMBER
    if isinstance(expr, A.Name):
        if expr.id in lets:
            return lets[expr.id]
        if expr.id in CONSTANTS or expr.id in DTYPES:  # (an element type is a number)
            return _NUMBER
        return UNKNOWN
    if isinstance(expr, A.ListExpr):
        return _list(expr, lets)
    if isinstance(expr, A.Unary):
        operand = static_of(expr.operand, lets)
        return _NUMBER if expr.op == "not" else operand if operand.kind in ("number", "tensor") else UNKNOWN
    if isinstance(expr, (A.Compare, A.BoolOp)):
        return _NUMBER
    if isinstance(expr, A.Binary):
        return _binary(expr, lets)
    if isinstance(expr, A.Call):
        return _call(expr, lets)
    return UNKNOWN


def matmul_problem(expr: A.Binary, lets: Mapping[str, Static]) -> tuple[str, A.Expr] | None:
    """What is wrong with ``a @ b`` by its text alone, and where (the operand at fault, or
    the product); None when nothing is known to be."""
    operands = (("left", expr.left), ("right", expr.right))
    statics = []
    for side, operand in operands:
        found = static_of(operand, lets)
        if found.kind in RANK_ZERO or found.kind == "strings" or found.shape == ():
            what = "multiplies numbers" if found.kind in ("string", "strings", "none") else "needs rank 1 or more"
            return f"the {side} operand of '@' is {found.describe()}: a matrix product {what}", operand
        statics.append(found)
    left, right = statics
    if left.shape is None or right.shape is None:
        return None
    try:
        matmul_shape(left.shape, right.shape)
    except MatmulError as err:
        return f"{err}", expr
    return None


def _list(expr: A.ListExpr, lets: Mapping[str, Static]) -> Static:
    items = [static_of(item, lets) for item in expr.items]
    if not items:
        return Static("tensor", (0,))
    if all(i.kind == "string" for i in items):
        return Static("strings", (len(items),))
    if any(i.kind not in ("number", "tensor") or i.shape is None for i in items):
        return UNKNOWN
    first = items[0].shape
    if any(i.shape != first for i in items[1:]) or first is None:
        return UNKNOWN  # (ragged, or dims unknown: numpy decides at run time)
    return Static("tensor", (len(items), *first))


def _binary(expr: A.Binary, lets: Mapping[str, Static]) -> Static:
    if expr.op == "@":
        left, right = static_of(expr.left, lets), static_of(expr.right, lets)
        if left.kind != "tensor" or right.kind != "tensor":
            return _TENSOR if "unknown" not in (left.kind, right.kind) else UNKNOWN
        if left.shape is None or right.shape is None:
            return _TENSOR
        try:
            return Static("tensor", matmul_shape(left.shape, right.shape))
        except MatmulError:
            return _TENSOR  # (reported where the product is checked)
    if expr.op == "??":
        return UNKNOWN
    left, right = static_of(expr.left, lets), static_of(expr.right, lets)
    if left.kind == "number" and right.kind == "number":
        return _NUMBER
    return UNKNOWN  # (lists add and repeat as Python's do; tensors broadcast)


def _call(expr: A.Call, lets: Mapping[str, Static]) -> Static:
    fn = None if expr.is_op else FUNCTIONS.get(expr.func)
    if fn is None:
        return UNKNOWN
    args = expr.args
    if fn.name in _ELEMENTWISE and args:
        first = static_of(args[0], lets)
        return first if first.kind == "tensor" else _NUMBER if first.kind == "number" else UNKNOWN
    if fn.name in _FILLED and args:
        return Static("tensor", _literal_dims(args[0]))
    if fn.name == "reshape" and len(args) == 2:
        dims = _literal_dims(args[1])
        return Static("tensor", None if dims is None or any(d is not None and d < 0 for d in dims) else dims)
    if fn.name == "transpose" and args:
        first = static_of(args[0], lets)
        if first.kind != "tensor" or first.shape is None:
            return _TENSOR
        if len(args) == 1:
            return Static("tensor", tuple(reversed(first.shape)))
        perm = _literal_dims(args[1])
        if perm is None or sorted(d for d in perm if d is not None) != list(range(len(first.shape))):
            return _TENSOR
        return Static("tensor", tuple(first.shape[d] for d in perm if d is not None))
    if fn.returns in _RETURNS:
        return _RETURNS[fn.returns]
    if fn.returns in ("list", "tensor"):
        return Static("tensor", (None,)) if fn.returns == "list" else _TENSOR
    return UNKNOWN


def _literal_dims(expr: A.Expr) -> tuple[Dim, ...] | None:
    """The dims a literal list of integers spells (``[2, 3]``); None for anything else."""
    if not isinstance(expr, A.ListExpr):
        return None
    dims: list[Dim] = []
    for item in expr.items:
        if not (isinstance(item, A.Num) and type(item.value) is int):
            return None
        dims.append(item.value)
    return tuple(dims)
