"""The values a failed ``where`` (or ``let``) saw: its parts evaluated again over the names
bound when it failed, and each name it reads with what it was bound to.

``where max(rank(k), rank(one)) <= rank(x)`` that did not hold is shown as
``max(rank(k), rank(one)) = 1``, ``rank(x) = 0``, then ``k = 'c' (an initializer,
float[1, 1] = [[1.4142135]])``... — enough to see which side was off without a debugger.
"""

from __future__ import annotations

from ..dsl import ast as A
from ..dsl.unparse import show as show_expr
from ..expr.evaluate import EVAL_ERRORS, as_failure, evaluate
from ..expr.values import EvalFailure, GraphFacts, Ref
from ..graph.view import GraphView
from ..match.matcher import Failure, RootEnv, attribute_with_default
from ..match.plan import CompiledRule
from .describe import describe_value, show

MAX_PARTS = 6  # parts of one expression shown


class FailureEnv:
    """The ``Env`` the failed check ran in, rebuilt from the failure: tensor names are
    values of the graph, the others attribute captures and lets."""

    def __init__(self, view: GraphView, rule: CompiledRule, failure: Failure) -> None:
        self.graph: GraphFacts = view
        self.view = view
        self.rule = rule
        self.failure = failure

    def lookup(self, name: str) -> object:
        bindings = self.failure.bindings
        if name not in bindings:
            raise EvalFailure(f"'{name}' is not bound yet")
        value = bindings[name]
        if name not in self.rule.tensor_vars:
            return value
        if isinstance(value, list):
            return [Ref(v) for v in value]
        return None if value is None else Ref(str(value))

    def node_attribute(self, var: str, attr: str) -> object:
        eq_index = self.rule.produced_by.get(var)
        node_id = self.failure.nodes.get(eq_index) if eq_index is not None else None
        if node_id is None:
            raise EvalFailure(f"'{var}' is not matched yet")
        return attribute_with_default(self.view, node_id, attr)


def environment(view: GraphView, rule: CompiledRule, failure: Failure) -> FailureEnv | RootEnv:
    """Where the failed check's names are read: a where on the root alone ran before any
    binding, on the root node itself (``CompiledRule.root_wheres``)."""
    if not failure.bindings and failure.depth == 0 and failure.node is not None and rule.root_names:
        return RootEnv(view, failure.node, rule.root_names)
    return FailureEnv(view, rule, failure)


def check_details(view: GraphView, rule: CompiledRule, failure: Failure) -> tuple[str, ...]:
    """What the failed check saw: each part's value, then each name it reads."""
    expr = failure.check
    if expr is None:
        return ()
    env = environment(view, rule, failure)
    lines = [f"`{show_expr(part)}` = {_value(part, env)}" for part in _parts(expr)[:MAX_PARTS]]
    for name in sorted(A.names_read(expr)):
        try:
            value = env.lookup(name)
        except (EvalFailure, KeyError):
            continue  # (a constant's name, or not bound when it failed)
        if isinstance(value, Ref):
            lines.append(f"{name} = {describe_value(view, value.name)}")
        else:
            lines.append(f"{name} = {show(value)}")
    return tuple(dict.fromkeys(lines))


def _value(expr: A.Expr, env: FailureEnv | RootEnv) -> str:
    try:
        return show(evaluate(expr, env))
    except EVAL_ERRORS as err:
        return f"cannot be computed ({as_failure(err)})"


def _parts(expr: A.Expr) -> list[A.Expr]:
    """The parts worth a value: the operands of a comparison, what ``not`` negates, the
    alternatives of an ``or``, a call itself (``const(k)``); not literals or bare names
    (names are listed on their own)."""
    if isinstance(expr, A.Compare):
        found = list(expr.operands)
    elif isinstance(expr, A.Unary) and expr.op == "not":
        found = [expr.operand, *_parts(expr.operand)]
    elif isinstance(expr, A.BoolOp):
        found = [p for v in expr.values for p in (v, *_parts(v))]
    else:
        found = [expr]
    return [p for p in dict.fromkeys(found) if not isinstance(p, (A.Num, A.Str, A.Const, A.Name))]
