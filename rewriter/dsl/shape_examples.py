"""``example`` values computed at run time from a tensor's shape, read once for the checker
and the verifier: ``s = shape(x)`` (x's whole shape), and ``s = concat([shape(x)[0:1],
[2, 3], shape(x)[2:3]])`` (pieces of it and numbers: a view target that splits a dim,
as exporters with dynamic axes compute it)."""

from __future__ import annotations

from dataclasses import dataclass

from . import ast as A


@dataclass(frozen=True)
class ShapeExample:
    tensor: str  # the pattern's tensor whose shape is read
    pieces: tuple[tuple[str, tuple], ...]  # ("dims", (start, end)) or ("numbers", (n, ...))

    @property
    def whole(self) -> bool:
        return self.pieces == (("dims", (None, None)),)


def mentions_shape(expr: object) -> bool:
    """Whether an example value reads a tensor's shape anywhere (then it must be one of the
    forms above)."""
    if isinstance(expr, A.Call):
        return expr.func == "shape" or any(mentions_shape(a) for a in expr.args)
    if isinstance(expr, A.ListExpr):
        return any(mentions_shape(i) for i in expr.items)
    if isinstance(expr, A.Index):
        return mentions_shape(expr.obj)
    return False


def shape_example(expr: object) -> ShapeExample | None:
    """The form an example value is, or None when it is not one of them."""
    whole = _shape_of(expr)
    if whole is not None:
        return ShapeExample(whole, (("dims", (None, None)),))
    if not (isinstance(expr, A.Call) and expr.func == "concat" and len(expr.args) == 1):
        return None
    items = expr.args[0]
    if not isinstance(items, A.ListExpr):
        return None
    tensors: set[str] = set()
    pieces: list[tuple[str, tuple]] = []
    for item in items.items:
        tensor = _shape_of(item.obj) if isinstance(item, A.Index) else None
        if isinstance(item, A.Index) and isinstance(item.index, A.Slice) and tensor is not None:
            bounds = (_int(item.index.lower), _int(item.index.upper))
            if (item.index.lower is not None and bounds[0] is None) or (
                item.index.upper is not None and bounds[1] is None
            ):
                return None
            tensors.add(tensor)
            pieces.append(("dims", bounds))
        elif isinstance(item, A.ListExpr) and all(_int(i) is not None for i in item.items):
            pieces.append(("numbers", tuple(_int(i) for i in item.items)))
        else:
            return None
    if len(tensors) != 1:
        return None
    return ShapeExample(tensors.pop(), tuple(pieces))


def _shape_of(expr: object) -> str | None:
    if isinstance(expr, A.Call) and expr.func == "shape" and len(expr.args) == 1 and isinstance(expr.args[0], A.Name):
        return expr.args[0].id
    return None


def _int(expr: object) -> int | None:
    if isinstance(expr, A.Unary) and expr.op == "-":
        inner = _int(expr.operand)
        return None if inner is None else -inner
    if isinstance(expr, A.Num) and isinstance(expr.value, int) and not isinstance(expr.value, bool):
        return expr.value
    return None
