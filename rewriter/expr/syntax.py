"""Expressions of the rule language: the syntax tree the evaluator reads.

The parser (``dsl``) builds these; ``expr.evaluate`` computes them over a match.  They live
here, below the DSL, so that evaluating an expression needs nothing of the rule language
around it (patterns, rules, packs), which ``dsl.ast`` builds on top of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import Position

# ----------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Num:
    value: float | int
    pos: Position


@dataclass(frozen=True)
class Str:
    value: str
    pos: Position


@dataclass(frozen=True)
class Const:
    """``none``, ``true`` or ``false``."""

    value: object
    pos: Position


@dataclass(frozen=True)
class Name:
    id: str
    pos: Position


@dataclass(frozen=True)
class AttrRef:
    """``c.group``: attribute ``group`` of the node that produced value ``c``."""

    var: str
    attr: str
    pos: Position


@dataclass(frozen=True)
class ListExpr:
    items: tuple[Expr, ...]
    pos: Position


@dataclass(frozen=True)
class Unary:
    op: str  # "-" or "not"
    operand: Expr
    pos: Position


@dataclass(frozen=True)
class Binary:
    op: str  # + - * / // % ** ??
    left: Expr
    right: Expr
    pos: Position


@dataclass(frozen=True)
class Compare:
    """A comparison chain ``a < b <= c`` (ops: == != < <= > >= in, not in)."""

    ops: tuple[str, ...]
    operands: tuple[Expr, ...]
    pos: Position


@dataclass(frozen=True)
class BoolOp:
    op: str  # "and" / "or"
    values: tuple[Expr, ...]
    pos: Position


@dataclass(frozen=True)
class Index:
    obj: Expr
    index: Expr
    pos: Position


@dataclass(frozen=True)
class Slice:
    lower: Expr | None
    upper: Expr | None
    pos: Position


@dataclass(frozen=True)
class AttrSet:
    """``name: expr`` in a replacement's attribute block."""

    name: str
    value: Expr
    pos: Position


@dataclass(frozen=True)
class AttrSpread:
    """``...c``: copy every attribute of the matched node that produced ``c``."""

    var: str
    pos: Position


@dataclass(frozen=True)
class Call:
    """``f(args)`` (a safe function) or ``Op(args) {attrs}`` (an ONNX op, in replacements).

    Ops and functions share the call syntax; a name that starts with an upper-case letter or
    carries a domain (``com.microsoft.Gelu``) is an op, a lower-case name is a function.
    """

    func: str
    args: tuple[Expr, ...]
    attrs: tuple[AttrSet | AttrSpread, ...] | None
    pos: Position

    @property
    def is_op(self) -> bool:
        return is_op_name(self.func)


Expr = Num | Str | Const | Name | AttrRef | ListExpr | Unary | Binary | Compare | BoolOp | Index | Slice | Call


def names_read(expr: Expr) -> set[str]:
    """Names an expression reads: variables, captures and lets; ``c.group`` and ``{...c}``
    count ``c``."""
    names: set[str] = set()
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, Name):
            names.add(e.id)
        elif isinstance(e, AttrRef):
            names.add(e.var)
        elif isinstance(e, Call):
            stack.extend(e.args)
            for attr in e.attrs or ():
                if isinstance(attr, AttrSet):
                    stack.append(attr.value)
                else:
                    names.add(attr.var)
        else:
            stack.extend(operands(e))
    return names


def operands(expr: Expr) -> tuple[Expr, ...]:
    """The subexpressions an operator, a list, an index or a slice reads (a call's arguments
    and attributes are the caller's to walk: ops and functions treat them differently)."""
    if isinstance(expr, ListExpr):
        return tuple(expr.items)
    if isinstance(expr, Unary):
        return (expr.operand,)
    if isinstance(expr, Binary):
        return (expr.left, expr.right)
    if isinstance(expr, Compare):
        return tuple(expr.operands)
    if isinstance(expr, BoolOp):
        return tuple(expr.values)
    if isinstance(expr, Index):
        return (expr.obj, expr.index)
    if isinstance(expr, Slice):
        return tuple(e for e in (expr.lower, expr.upper) if e is not None)
    return ()


def conjuncts(expr: Expr) -> list[Expr]:
    """``a and (b and c)`` as ``[a, b, c]`` (anything else as itself)."""
    if isinstance(expr, BoolOp) and expr.op == "and":
        return [c for v in expr.values for c in conjuncts(v)]
    return [expr]


def is_op_name(name: str) -> bool:
    """An op name carries a domain or starts upper-case; function names are lower-case."""
    return "." in name or name[:1].isupper()


def split_op_name(name: str) -> tuple[str, str]:
    """``com.microsoft.Gelu`` -> (``com.microsoft``, ``Gelu``); ``Conv`` -> (``""``, ``Conv``)."""
    domain, _, op = name.rpartition(".")
    return ("" if domain == "ai.onnx" else domain), op
