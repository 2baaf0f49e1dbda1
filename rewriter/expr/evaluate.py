"""A small interpreter for rule expressions (``where``, ``let``, computed tensors/attributes).

It walks the AST; the only callables are those in ``functions.FUNCTIONS``; every failure
(non-constant input, unknown shape, numpy error) becomes ``EvalFailure``, which refuses the
match with a reason instead of crashing the engine.
"""
from __future__ import annotations

import operator
from typing import Callable, Protocol

import numpy as np

from ..dsl import ast as A
from .dtypes import DTYPES
from .functions import CONSTANTS, FUNCTIONS
from .values import EvalFailure, GraphFacts, Ref, materialize


class Env(Protocol):
    """Names visible to an expression: the bindings of a (partial) match."""

    graph: GraphFacts

    def lookup(self, name: str) -> object:
        """The bound value of ``name``; raises ``KeyError`` when it is not bound."""

    def node_attribute(self, var: str, attr: str) -> object:
        """Attribute ``attr`` of the matched node producing ``var`` (schema default if absent)."""


_ARITH: dict[str, Callable] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow,
}
_COMPARE: dict[str, Callable] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge,
    "in": lambda a, b: _contains(b, a), "not in": lambda a, b: not _contains(b, a),
}
_ERRORS = (TypeError, ValueError, ZeroDivisionError, OverflowError, FloatingPointError,
           IndexError, KeyError, AttributeError, MemoryError)


def truth(value: object) -> bool:
    """Truth of a constraint: an array holds when every element holds (and it is non-empty)."""
    if value is None:
        return False
    if isinstance(value, np.ndarray):
        return bool(value.size > 0 and np.all(value))
    if isinstance(value, Ref):
        raise EvalFailure(f"'{value.name}' is a tensor, not a condition")
    return bool(value)


def _contains(container: object, item: object) -> bool:
    if isinstance(container, np.ndarray):
        return bool(np.any(container == item))
    if isinstance(item, np.ndarray):
        item = item.tolist()
    return item in container


def _plain(value: object) -> object:
    """Lists compared with ``==`` should compare as lists, not elementwise."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value.item()
    return value


def _arith(op: str, left: object, right: object) -> object:
    if left is None or right is None:
        raise EvalFailure(f"an absent optional value was used with '{op}'")
    if op == "**" and isinstance(left, int) and isinstance(right, int) and abs(right) > 64:
        left = float(left)
    if isinstance(left, list) and isinstance(right, np.ndarray):
        left = np.asarray(left)
    if isinstance(right, list) and isinstance(left, np.ndarray):
        right = np.asarray(right)
    return _ARITH[op](left, right)


def _compare(op: str, left: object, right: object) -> object:
    if left is None or right is None:
        return (left is right) if op == "==" else (left is not right) if op == "!=" else False
    if isinstance(left, list) and isinstance(right, np.ndarray):
        left = np.asarray(left)
    if isinstance(right, list) and isinstance(left, np.ndarray):
        right = np.asarray(right)
    result = _COMPARE[op](_plain(left), _plain(right))
    if isinstance(result, np.ndarray):
        return bool(result.size > 0 and np.all(result)) if op != "!=" else bool(np.any(result))
    return bool(result)


def evaluate(expr: A.Expr, env: Env) -> object:
    """Value of ``expr`` under ``env``; raises ``EvalFailure`` when it cannot be computed."""
    try:
        with np.errstate(all="ignore"):
            return _eval(expr, env)
    except EvalFailure:
        raise
    except _ERRORS as err:
        raise EvalFailure(f"{err.__class__.__name__}: {err}") from None


def _name(name: str, env: Env) -> object:
    try:
        return env.lookup(name)
    except KeyError:
        pass
    if name in DTYPES:
        return DTYPES[name]
    if name in CONSTANTS:
        return CONSTANTS[name]
    raise EvalFailure(f"'{name}' is not bound")


def _eval(expr: A.Expr, env: Env) -> object:
    if isinstance(expr, A.Num):
        return expr.value
    if isinstance(expr, (A.Str, A.Const)):
        return expr.value
    if isinstance(expr, A.Name):
        return _name(expr.id, env)
    if isinstance(expr, A.AttrRef):
        return env.node_attribute(expr.var, expr.attr)
    if isinstance(expr, A.ListExpr):
        return [_eval(item, env) for item in expr.items]
    if isinstance(expr, A.Unary):
        operand = _eval(expr.operand, env)
        if expr.op == "not":
            return not truth(operand)
        value = materialize(env.graph, operand)
        if value is None:
            raise EvalFailure("an absent optional value was negated")
        if isinstance(value, list):
            value = np.asarray(value)
        return -value
    if isinstance(expr, A.Binary):
        left = _eval(expr.left, env)
        if expr.op == "??":
            return left if left is not None else _eval(expr.right, env)
        right = _eval(expr.right, env)
        return _arith(expr.op, materialize(env.graph, left), materialize(env.graph, right))
    if isinstance(expr, A.Compare):
        values = [_eval(o, env) for o in expr.operands]
        for op, left, right in zip(expr.ops, values, values[1:]):
            if left is not None and right is not None:  # `x == none` asks presence only
                left, right = materialize(env.graph, left), materialize(env.graph, right)
            if not _compare(op, left, right):
                return False
        return True
    if isinstance(expr, A.BoolOp):
        if expr.op == "and":
            return all(truth(_eval(v, env)) for v in expr.values)
        return any(truth(_eval(v, env)) for v in expr.values)
    if isinstance(expr, A.Index):
        obj = _eval(expr.obj, env)
        if not isinstance(obj, list):  # a list (of values, say *rest) is indexed as is
            obj = materialize(env.graph, obj)
        if isinstance(expr.index, A.Slice):
            lower = None if expr.index.lower is None else int(_eval(expr.index.lower, env))
            upper = None if expr.index.upper is None else int(_eval(expr.index.upper, env))
            return obj[lower:upper]
        index = materialize(env.graph, _eval(expr.index, env))
        if isinstance(obj, list):
            return obj[int(index)]
        return np.asarray(obj)[index if not isinstance(index, list) else tuple(index)]
    if isinstance(expr, A.Call):
        return _call(expr, env)
    raise EvalFailure(f"cannot evaluate {type(expr).__name__}")  # pragma: no cover


def _call(expr: A.Call, env: Env) -> object:
    if expr.is_op:
        raise EvalFailure(f"op {expr.func} cannot be computed in an expression")
    fn = FUNCTIONS.get(expr.func)
    if fn is None:
        raise EvalFailure(f"unknown function {expr.func}()")
    args = [_eval(a, env) for a in expr.args]
    if fn.graph:
        return fn.impl(env.graph, *args)
    return fn.impl(*[materialize(env.graph, a, f"argument of {fn.name}()") for a in args])
