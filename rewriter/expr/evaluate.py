"""A small interpreter for rule expressions (``where``, ``let``, computed tensors/attributes).

Each expression is compiled once into closures; the only callables are those in ``functions.FUNCTIONS``; every failure
(non-constant input, unknown shape, numpy error) becomes ``EvalFailure``, which refuses the
match with a reason instead of crashing the engine.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Container, Iterable
from typing import Protocol, SupportsIndex, SupportsInt, runtime_checkable

import numpy as np

from ..errors import Position, rule_error
from . import budget
from . import syntax as A
from .budget import OverBudget
from .dtypes import DTYPES
from .functions import CONSTANTS, FUNCTIONS
from .matmul import MatmulError, matmul_shape, multiply_adds
from .values import EvalFailure, GraphFacts, Ref, materialize


class Env(Protocol):
    """Names visible to an expression: the bindings of a (partial) match."""

    graph: GraphFacts

    def lookup(self, name: str) -> object:
        """The bound value of ``name``; raises ``KeyError`` when it is not bound."""

    def node_attribute(self, var: str, attr: str) -> object:
        """Attribute ``attr`` of the matched node producing ``var`` (schema default if absent)."""


_ARITH: dict[str, Callable] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
    "@": operator.matmul,
}
_COMPARE: dict[str, Callable] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "in": lambda a, b: _contains(b, a),
    "not in": lambda a, b: not _contains(b, a),
}
_ERRORS = (
    TypeError,
    ValueError,
    ZeroDivisionError,
    OverflowError,
    FloatingPointError,
    IndexError,
    KeyError,
    AttributeError,
    MemoryError,
)


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
        budget.charge_elements(budget.broadcast_elements(container, item), 1, "a comparison")
        return bool(np.any(container == item))
    if isinstance(item, np.ndarray):
        item = item.tolist()
    if isinstance(container, list):
        budget.charge_elements(budget.list_elements(container), 8, "a search of a list")
    if not isinstance(container, (Container, Iterable)):  # (what `in` itself would raise)
        raise TypeError(f"argument of type '{type(container).__name__}' is not iterable")
    return item in container


def _plain(value: object) -> object:
    """Lists compared with ``==`` should compare as lists, not elementwise."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value.item()
    return value


def _arith(op: str, left: object, right: object) -> object:
    if left is None or right is None:
        raise EvalFailure(f"an absent optional value was used with '{op}'")
    if op == "@":
        return _matmul(left, right)
    if op == "**" and isinstance(left, int) and isinstance(right, int) and abs(right) > 64:
        left = float(left)
    if isinstance(left, list) and isinstance(right, np.ndarray):
        left = _as_array(left)
    if isinstance(right, list) and isinstance(left, np.ndarray):
        right = _as_array(right)
    _check_arith(op, left, right)
    return _ARITH[op](left, right)


_MATMUL_KINDS = frozenset("biuf")  # bool, integers, floats: what numpy multiplies without objects


def _matmul(left: object, right: object) -> np.ndarray:
    """``left @ right`` with numpy's semantics, for tensors and (nested) lists of numbers of
    rank 1 or more; its result's size and its work are charged before it is computed."""
    a, b = _matmul_operand(left, "left"), _matmul_operand(right, "right")
    try:
        shape = matmul_shape(a.shape, b.shape)
    except MatmulError as err:
        raise EvalFailure(str(err)) from None
    result_type = np.result_type(a.dtype, b.dtype)
    elements = 1
    for dim in shape:
        elements *= int(dim or 0)
    budget.charge_elements(elements, result_type.itemsize, "the result of '@'")
    budget.charge_multiply_adds(multiply_adds(a.shape, b.shape), result_type)
    return np.matmul(a, b)


def _matmul_operand(value: object, side: str) -> np.ndarray:
    if isinstance(value, (list, tuple)):
        value = _as_array(list(value))
    if not isinstance(value, np.ndarray):
        kind = (
            "a string"
            if isinstance(value, str)
            else "a number"
            if isinstance(value, (int, float, np.generic))
            else type(value).__name__
        )
        raise EvalFailure(f"the {side} operand of '@' is {kind}, not a tensor of rank 1 or more")
    if value.dtype.kind not in _MATMUL_KINDS:
        raise EvalFailure(f"the {side} operand of '@' holds {value.dtype} values, not numbers")
    return value


def _as_array(items: list) -> np.ndarray:
    budget.charge_elements(budget.list_elements(items), 8, "an array from a list")
    return np.asarray(items)


def _check_arith(op: str, left: object, right: object) -> None:
    """The size of what ``left op right`` makes, before it is made (see budget.py)."""
    if type(left) is int and type(right) is int:  # (bool is not int here: its arithmetic stays small)
        if op == "*":
            budget.check_int_bits(left.bit_length() + right.bit_length())
        elif op == "**" and right > 0:
            budget.check_int_bits(max(left.bit_length() - 1, 1) * right)
        return
    if type(left) is float or type(right) is float:
        return
    if isinstance(left, (str, list)) or isinstance(right, (str, list)):
        if op == "%" and isinstance(left, str):
            raise EvalFailure("'%' does not format strings in rules")
        if op == "*":
            seq, count = (left, right) if isinstance(left, (str, list)) else (right, left)
            if isinstance(seq, (str, list)) and isinstance(count, (int, np.integer)) and not isinstance(count, bool):
                per = 4 if isinstance(seq, str) else budget.POINTER_BYTES
                budget.charge(
                    max(int(count), 0) * len(seq) * per,
                    "a repeated string" if isinstance(seq, str) else "a repeated list",
                )
        elif op == "+" and isinstance(left, (str, list)) and type(left) is type(right):
            per = 4 if isinstance(left, str) else budget.POINTER_BYTES
            budget.charge((len(left) + len(right)) * per, "a concatenation")
        return
    if isinstance(left, (np.ndarray, np.generic)) or isinstance(right, (np.ndarray, np.generic)):
        budget.charge_elements(budget.broadcast_elements(left, right), 8, f"the result of '{op}'")


_PLAIN_TYPES = frozenset({int, float, str, bool, list})


def _compare(op: str, left: object, right: object) -> bool:
    if type(left) in _PLAIN_TYPES and type(right) in _PLAIN_TYPES:  # no numpy involved
        if type(left) is list or type(right) is list:  # (comparing nested lists takes time)
            budget.charge_elements(budget.list_elements(left) + budget.list_elements(right), 8, "a comparison of lists")
        return bool(_COMPARE[op](left, right))
    if left is None and op in ("in", "not in") and isinstance(right, list):
        return bool(_COMPARE[op](left, right))  # `none in shape(x)`: x has an unknown dim
    if left is None or right is None:
        return (left is right) if op == "==" else (left is not right) if op == "!=" else False
    if isinstance(left, list) and isinstance(right, np.ndarray):
        left = _as_array(left)
    if isinstance(right, list) and isinstance(left, np.ndarray):
        right = _as_array(right)
    if isinstance(left, np.ndarray) or isinstance(right, np.ndarray):
        budget.charge_elements(budget.broadcast_elements(left, right), 1, "a comparison")
    result = _COMPARE[op](_plain(left), _plain(right))
    if isinstance(result, np.ndarray):
        return bool(result.size > 0 and np.all(result)) if op != "!=" else bool(np.any(result))
    return bool(result)


def evaluate(expr: A.Expr, env: Env) -> object:
    """Value of ``expr`` under ``env``; raises ``EvalFailure`` when it cannot be computed,
    ``RuleError`` when it exceeds its budget (an evaluation of its own unless a match
    attempt is open, see budget.py)."""
    with np.errstate(all="ignore"):
        if budget.attempt_open():
            return evaluate_quietly(expr, env)
        budget.start_attempt()
        try:
            return evaluate_quietly(expr, env)
        finally:
            budget.end_attempts()


def evaluate_quietly(expr: A.Expr, env: Env) -> object:
    """``evaluate`` for callers that already silenced numpy's floating-point errors once
    for many evaluations (the level runner does, for matching and rewriting)."""
    try:
        return compile_expr(expr)(env)
    except EVAL_ERRORS as err:
        raise as_failure(err) from None


EVAL_ERRORS = (EvalFailure, *_ERRORS)


def as_failure(err: Exception) -> EvalFailure:
    """What a compiled expression raised (one of ``EVAL_ERRORS``), as the reason it failed.
    Callers that evaluate many compiled expressions catch ``EVAL_ERRORS`` themselves and
    set numpy's error state once (the matcher, under the level runner)."""
    if isinstance(err, EvalFailure):
        return err
    return EvalFailure(f"{err.__class__.__name__}: {err}")


Compiled = Callable[[Env], object]
_CACHE: dict[int, tuple[A.Expr, Compiled]] = {}


def compile_expr(expr: A.Expr) -> Compiled:
    """``expr`` as a closure over its compiled operands, built once per expression (rules are
    immutable): matching evaluates the same few expressions thousands of times, and walking
    the tree each time spent most of it deciding what kind of node it was."""
    entry = _CACHE.get(id(expr))
    if entry is not None and entry[0] is expr:
        return entry[1]
    compiled = _compile(expr)
    _CACHE[id(expr)] = (expr, compiled)  # the expression is kept alive with its closure
    return compiled


def _compile(expr: A.Expr) -> Compiled:
    if isinstance(expr, (A.Num, A.Str, A.Const)):
        value = expr.value
        return lambda env: value
    if isinstance(expr, A.Name):
        return _compile_name(expr.id)
    if isinstance(expr, A.AttrRef):
        var, attr = expr.var, expr.attr
        return lambda env: env.node_attribute(var, attr)
    if isinstance(expr, A.ListExpr):
        items = [_compile(item) for item in expr.items]
        return lambda env: [item(env) for item in items]
    if isinstance(expr, A.Unary):
        return _compile_unary(expr.op, _compile(expr.operand), expr.pos)
    if isinstance(expr, A.Binary):
        return _compile_binary(expr.op, _compile(expr.left), _compile(expr.right), expr.pos)
    if isinstance(expr, A.Compare):
        return _compile_compare(
            expr.ops,
            [_compile(o) for o in expr.operands],
            literal_value(expr.operands[-1]) if len(expr.ops) == 1 else _UNBOUND,
            expr.pos,
        )
    if isinstance(expr, A.BoolOp):
        values = [_compile(v) for v in expr.values]
        if expr.op == "and":
            return lambda env: all(truth(v(env)) for v in values)
        return lambda env: any(truth(v(env)) for v in values)
    if isinstance(expr, A.Index):
        return _compile_index(expr)
    if isinstance(expr, A.Call):
        return _compile_call(expr)
    raise EvalFailure(f"cannot evaluate {type(expr).__name__}")  # pragma: no cover


def literal_value(expr: A.Expr) -> object:
    """The value of a number, string, or flat list of them (a new list each time it is
    asked); ``NOT_LITERAL`` for anything else."""
    if isinstance(expr, (A.Num, A.Str)):
        return expr.value
    if isinstance(expr, A.ListExpr):
        items = [literal_value(item) for item in expr.items]
        return _UNBOUND if any(i is _UNBOUND or type(i) is list for i in items) else items
    return _UNBOUND


def _compile_name(name: str) -> Compiled:
    fallback = DTYPES[name] if name in DTYPES else CONSTANTS.get(name, _UNBOUND)

    def lookup(env: Env) -> object:
        try:
            return env.lookup(name)
        except KeyError:
            if fallback is _UNBOUND:
                raise EvalFailure(f"'{name}' is not bound") from None
            return fallback

    return lookup


_UNBOUND = object()
NOWHERE = Position(0, 0)  # a compiled comparison with no place in a file
NOT_LITERAL = _UNBOUND  # what literal_value() gives for an expression that is not one


def _over(err: OverBudget, pos: Position):
    """The rule error for an operation past its budget, at the operation."""
    return rule_error(f"expression exceeds its budget: {err}", pos)


def _compile_unary(op: str, operand: Compiled, pos: Position) -> Compiled:
    if op == "not":
        return lambda env: not truth(operand(env))

    def negate(env: Env) -> object:
        value = materialize(env.graph, operand(env))
        if value is None:
            raise EvalFailure("an absent optional value was negated")
        try:
            if isinstance(value, list):
                value = _as_array(value)
            if isinstance(value, np.ndarray):
                budget.charge_elements(value.size, value.itemsize, "a negation")
        except OverBudget as err:
            raise _over(err, pos) from None
        if not isinstance(value, _SupportsNeg):  # (what `-` itself would raise)
            raise TypeError(f"bad operand type for unary -: '{type(value).__name__}'")
        return -value

    return negate


def _compile_binary(op: str, left: Compiled, right: Compiled, pos: Position) -> Compiled:
    if op == "??":

        def default(env: Env) -> object:
            value = left(env)
            return value if value is not None else right(env)

        return default

    def arith(env: Env) -> object:
        graph = env.graph
        a, b = materialize(graph, left(env)), materialize(graph, right(env))
        try:
            return _arith(op, a, b)
        except OverBudget as err:
            raise _over(err, pos) from None

    return arith


def _compile_compare(
    ops: tuple[str, ...], operands: list[Compiled], constant: object = _UNBOUND, pos: Position = NOWHERE
) -> Compiled:
    """``constant``: the right operand's value when it is a literal (a number, string or
    list of them), which then needs no evaluation."""
    if len(ops) == 1:  # the usual `a == b`
        (op,), (first, second) = ops, operands
        operator_fn = _COMPARE[op]
        if constant is not _UNBOUND and type(constant) in _PLAIN_TYPES:

            def compare_literal(env: Env) -> bool:
                left = first(env)
                kind = type(left)
                if kind is int or kind is str or kind is float or kind is bool:
                    return bool(operator_fn(left, constant))  # (no numpy involved)
                if left is not None:
                    left = materialize(env.graph, left)
                try:
                    return _compare(op, left, constant)
                except OverBudget as err:
                    raise _over(err, pos) from None

            return compare_literal

        ordering = op not in ("in", "not in")

        def compare_two(env: Env) -> bool:
            left, right = first(env), second(env)
            if ordering and type(left) is int and type(right) is int:
                return operator_fn(left, right)  # (two dims, say: no numpy involved)
            if left is not None and right is not None:  # `x == none` asks presence only
                graph = env.graph
                left, right = materialize(graph, left), materialize(graph, right)
            try:
                return _compare(op, left, right)
            except OverBudget as err:
                raise _over(err, pos) from None

        return compare_two
    pairs = list(zip(ops, range(len(ops))))

    def compare(env: Env) -> bool:
        values = [o(env) for o in operands]
        for op, k in pairs:
            left, right = values[k], values[k + 1]
            if left is not None and right is not None:  # `x == none` asks presence only
                left, right = materialize(env.graph, left), materialize(env.graph, right)
            try:
                if not _compare(op, left, right):
                    return False
            except OverBudget as err:
                raise _over(err, pos) from None
        return True

    return compare


def _compile_index(expr: A.Index) -> Compiled:
    obj = _compile(expr.obj)
    if isinstance(expr.index, A.Slice):
        lower = None if expr.index.lower is None else _compile(expr.index.lower)
        upper = None if expr.index.upper is None else _compile(expr.index.upper)

        def slice_(env: Env) -> object:
            value = _indexable(env, obj(env))
            start = None if lower is None else _as_int(lower(env))
            stop = None if upper is None else _as_int(upper(env))
            if not isinstance(value, _Subscriptable):  # (what subscripting itself would raise)
                raise TypeError(f"'{type(value).__name__}' object is not subscriptable")
            return value[start:stop]

        return slice_
    index = _compile(expr.index)
    if isinstance(expr.index, A.Num) and type(expr.index.value) is int:
        position = expr.index.value  # `shape(x)[-1]`: no index to evaluate

        def item_at(env: Env) -> object:
            value = obj(env)
            if type(value) is not list:
                value = _indexable(env, value)
            return value[position] if isinstance(value, list) else np.asarray(value)[position]

        return item_at

    pos = expr.pos

    def item(env: Env) -> object:
        value = _indexable(env, obj(env))
        i = materialize(env.graph, index(env))
        if isinstance(value, list):
            return value[_as_int(i)]
        value = np.asarray(value)
        if isinstance(i, np.ndarray) and i.ndim:  # picks rows: as many as it has entries
            try:
                row = 1
                for d in value.shape[1:]:
                    row *= d
                budget.charge_elements(i.size * row, value.itemsize, "an indexed tensor")
            except OverBudget as err:
                raise _over(err, pos) from None
        key = i if not isinstance(i, list) else tuple(i)
        if not (key is None or isinstance(key, (int, tuple, np.ndarray, slice, SupportsIndex))):
            raise IndexError(_NOT_AN_INDEX)  # (what numpy itself would raise)
        return value[key]

    return item


_NOT_AN_INDEX = (
    "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) "
    "and integer or boolean arrays are valid indices"
)


@runtime_checkable
class _SupportsNeg(Protocol):
    def __neg__(self) -> object: ...


@runtime_checkable
class _Subscriptable(Protocol):
    def __getitem__(self, key: slice, /) -> object: ...


def _as_int(value: object) -> int:
    """``int(value)``, for an evaluated value: raises what ``int()`` raises."""
    if isinstance(value, (int, str, bytes, bytearray, SupportsInt, SupportsIndex)):
        return int(value)
    raise TypeError(
        f"int() argument must be a string, a bytes-like object or a real number, not '{type(value).__name__}'"
    )


def _indexable(env: Env, value: object) -> object:
    """A list (of values, say *rest) is indexed as is, anything else by its contents."""
    return value if isinstance(value, list) else materialize(env.graph, value)


def _compile_call(expr: A.Call) -> Compiled:
    name = expr.func
    if expr.is_op:

        def op_call(env: Env) -> object:
            raise EvalFailure(f"op {name} cannot be computed in an expression")

        return op_call
    fn = FUNCTIONS.get(name)
    if fn is None:

        def unknown(env: Env) -> object:
            raise EvalFailure(f"unknown function {name}()")

        return unknown
    args = [_compile(a) for a in expr.args]
    impl, what, pos = fn.impl, f"argument of {fn.name}()", expr.pos
    if (
        fn.graph
        and len(args) == 1
        and isinstance(expr.args[0], A.Name)
        and expr.args[0].id not in DTYPES
        and expr.args[0].id not in CONSTANTS
    ):
        name = expr.args[0].id  # rank(x), shape(x), const(x)... of a variable

        def graph_call(env: Env) -> object:
            try:
                value = env.lookup(name)
            except KeyError:
                raise EvalFailure(f"'{name}' is not bound") from None
            try:
                return impl(env.graph, value)
            except OverBudget as err:
                raise _over(err, pos) from None

        return graph_call
    if fn.graph and len(args) == 1:
        (only,) = args

        def graph_call_one(env: Env) -> object:
            value = only(env)
            try:
                return impl(env.graph, value)
            except OverBudget as err:
                raise _over(err, pos) from None

        return graph_call_one
    if fn.graph:

        def graph_call_many(env: Env) -> object:
            values = [a(env) for a in args]
            try:
                return impl(env.graph, *values)
            except OverBudget as err:
                raise _over(err, pos) from None

        return graph_call_many

    def value_call(env: Env) -> object:
        values = [materialize(env.graph, a(env), what) for a in args]
        try:
            return impl(*values)
        except OverBudget as err:
            raise _over(err, pos) from None

    return value_call
