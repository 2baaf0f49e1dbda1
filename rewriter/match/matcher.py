"""Anchored backtracking matcher: find the instances of a rule's pattern rooted at a node.

It follows the compiled plan step by step, trying every candidate node, every alternative
and (for commutative ops) every operand order, binding names by unification: a name seen
twice must denote the same value.  Literals match constants; attribute patterns unify with
attribute values (schema defaults when absent).  ``where``/``let`` run as soon as their names
are bound.  Matches are produced lazily; the deepest failure is kept for ``explain``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache
from typing import Final, Literal

import numpy as np
from onnx import TensorProto, helper

from ..dsl import ast as A
from ..expr.evaluate import EVAL_ERRORS, as_failure, truth
from ..expr.values import EvalFailure, GraphFacts, Ref
from ..graph.view import FUNCTION_ATTRIBUTE, GraphView, NodeId
from ..onnx_facts.schemas import attribute_default
from .plan import (
    ANY,
    APPROX,
    CAPTURE,
    FIXED,
    LITERAL,
    REST,
    VAR,
    AltPlan,
    CompiledRule,
    NeighborCheck,
    OpKey,
    OutPlan,
    RootCheck,
    RootPlace,
    Step,
)


class _Missing(Enum):
    MISSING = 0


_MISSING: Final = _Missing.MISSING  # (an enum member: `is _MISSING` narrows for mypy)

# what a pattern value is bound to: a value of the graph, None (an absent optional
# input or output), or the list of a *rest's values
BoundValue = str | list[str] | None


@dataclass
class Match:
    """One instance of a pattern: what every name denotes and which nodes were matched."""

    rule: CompiledRule
    values: dict[str, BoundValue]  # tensor var -> value name | None | [names]
    scalars: dict[str, object]  # attribute captures and lets
    nodes: dict[int, NodeId]  # equation index -> graph node
    root: NodeId
    alternatives: dict[int, AltPlan] = field(default_factory=dict)  # equation -> what it matched as


# how far an attempt got within one step (a later stage is the more telling failure)
OP, ATTRIBUTES, INPUTS, CONSTRAINTS = 0, 1, 2, 3


@dataclass
class Failure:
    """Why the deepest attempt failed: the step, how far into it (``stage``), the reason,
    and the names bound so far; for ``explain``, also what it looked at: the equations
    bound to nodes so far, the node the failing check was about, the graph value that
    differed and the ``where``/``let`` that did not hold (recorded only with
    ``record_failures``, so matching in a run pays nothing for them)."""

    depth: int
    reason: str
    bindings: dict[str, object] = field(default_factory=dict)
    stage: int = OP
    kind: str = "op"  # "root", "op", "link", "attribute", "input", "where", "let" or "budget"
    nodes: dict[int, NodeId] = field(default_factory=dict)  # equation index -> node, bound so far
    node: NodeId | None = None  # the node the failing check looked at
    value: str | None = None  # the graph value that differed (an input, a value with no producer)
    check: A.Expr | None = None  # the where or let that failed
    root_check: RootCheck | None = None  # the neighbour the root lacks (kind "root")
    name: str | None = None  # the pattern name already bound to another value (kind "input")


class _State:
    """Bindings with an undo trail, and the ``Env`` expressions evaluate in."""

    __slots__ = ("graph", "view", "compiled", "values", "scalars", "nodes", "alternatives", "used", "trail")

    def __init__(self, view: GraphView, compiled: CompiledRule) -> None:
        self.graph: GraphFacts = view
        self.view = view
        self.compiled = compiled
        self.values: dict[str, BoundValue] = {}
        self.scalars: dict[str, object] = {}
        self.nodes: dict[int, NodeId] = {}
        self.alternatives: dict[int, AltPlan] = {}  # (entries of unbound equations are stale)
        self.used: set[NodeId] = set()
        self.trail: list[_TrailEntry] = []

    # -- Env protocol
    def lookup(self, name: str) -> object:
        value = self.values.get(name, _MISSING)
        if type(value) is str:  # (the usual case: one value of the graph)
            return Ref(value)
        if value is _MISSING:
            return self.scalars[name]
        if isinstance(value, list):
            return [Ref(v) for v in value]
        return None if value is None else Ref(value)

    def node_attribute(self, var: str, attr: str) -> object:
        eq_index = self.compiled.produced_by.get(var)
        node_id = self.nodes.get(eq_index) if eq_index is not None else None
        if node_id is None:
            raise EvalFailure(f"'{var}' is not matched yet")
        return attribute_with_default(self.view, node_id, attr)

    # -- binding with undo
    def mark(self) -> int:
        return len(self.trail)

    def undo(self, mark: int) -> None:
        trail = self.trail
        while len(trail) > mark:
            entry = trail.pop()
            if entry[0] == _VALUE:
                del self.values[entry[1]]
            elif entry[0] == _SCALAR:
                del self.scalars[entry[1]]
            else:
                self.used.discard(self.nodes.pop(entry[1]))

    def unify_value(self, name: str, value: BoundValue) -> bool:
        current = self.values.get(name, _MISSING)
        if current is _MISSING:
            self.values[name] = value
            self.trail.append((_VALUE, name))
            return True
        return current == value

    def unify_scalar(self, name: str, value: object) -> bool:
        current = self.scalars.get(name, _MISSING)
        if current is _MISSING:
            self.scalars[name] = value
            self.trail.append((_SCALAR, name))
            return True
        return values_equal(current, value)

    def bind_node(self, eq_index: int, node_id: NodeId, plan: AltPlan) -> None:
        self.nodes[eq_index] = node_id
        self.alternatives[eq_index] = plan
        self.used.add(node_id)
        self.trail.append((_NODE, eq_index))


# what a trail entry undoes: the binding of a value or a scalar (by name), of a node (by
# equation index)
_VALUE: Final = 0
_SCALAR: Final = 1
_NODE: Final = 2
_TrailEntry = tuple[Literal[0], str] | tuple[Literal[1], str] | tuple[Literal[2], int]


def attribute_with_default(view: GraphView, node_id: NodeId, name: str) -> object:
    value = view.attribute(node_id, name)
    if value is FUNCTION_ATTRIBUTE:
        raise EvalFailure(f"attribute {name} is the calling node's (inside a function)")
    if value is not None:
        return value
    proto = view.node(node_id)
    return attribute_default(proto.domain, proto.op_type, view.opset(proto.domain), name)


def values_equal(a: object, b: object) -> bool:
    """Equality for attribute values: lists, arrays and floats (to float32 precision)."""
    if a is None or b is None:
        return a is b
    if type(a) is list and type(b) is list and _plain_list(a) and _plain_list(b):
        return a == b  # ints and strings (perm, axes): no arrays needed
    if isinstance(a, float) or isinstance(b, float):
        # (float() of any other value raises TypeError: not equal)
        if not isinstance(a, (float, int, str, bytes, np.generic, np.ndarray)):
            return False
        if not isinstance(b, (float, int, str, bytes, np.generic, np.ndarray)):
            return False
        try:
            return _isclose(float(a), float(b), rtol=1e-6, atol=0.0)
        except (TypeError, ValueError):
            return False
    if isinstance(a, (list, tuple, np.ndarray)) or isinstance(b, (list, tuple, np.ndarray)):
        try:
            left, right = np.asarray(a), np.asarray(b)
            return left.shape == right.shape and bool(np.all(left == right))
        except (TypeError, ValueError):
            return False
    return a == b


def _plain_list(items: list) -> bool:
    return all(type(x) is int or type(x) is str for x in items)


_APPROX_RTOL = {np.dtype(np.float16): 2e-3}
_DEFAULT_APPROX_RTOL = 1e-4


def literal_matches(array: np.ndarray | None, literal: A.Literal, widened_from: int | None = None) -> bool:
    """A one-element constant equal to the literal (within tolerance for ``~``: float16's
    also for a constant widened from float16, which keeps float16's precision)."""
    if array is None or array.size != 1:
        return False
    actual = array.reshape(-1)[0]
    if array.dtype == np.bool_ or isinstance(literal.value, bool):
        return array.dtype == np.bool_ and bool(actual) == bool(literal.value)
    if array.dtype.kind not in "iuf":
        return False
    if literal.approx:
        origin = array.dtype if widened_from is None else helper.tensor_dtype_to_np_dtype(widened_from)
        return approx_equal(float(actual), literal, origin)
    if array.dtype.kind in "iu":
        return float(literal.value).is_integer() and int(actual) == int(literal.value)
    return bool(actual == _stored(literal.value, array.dtype))


def approx_equal(actual: float, literal: A.Literal, origin: np.dtype | None) -> bool:
    """``actual`` within the tolerance of ``~literal`` for a number kept in ``origin``'s
    precision (float16's is coarser; None: the default)."""
    rtol = _APPROX_RTOL.get(origin, _DEFAULT_APPROX_RTOL) if origin is not None else _DEFAULT_APPROX_RTOL
    return _isclose(actual, float(literal.value), rtol=rtol, atol=1e-6)


def approx_attribute_matches(actual: object, literal: A.Literal, origin: np.dtype | None) -> bool:
    """A float attribute within the tolerance of ``~literal``: ONNX keeps it as a float32,
    but a node computing in float16 (or widened from it, ``GraphView.widened``) uses it in
    float16's precision, so ``origin`` (the node's float type) sets the tolerance, as a
    constant's type does for a literal input.  Anything but a float does not match."""
    if type(actual) is not float:
        return False
    return approx_equal(actual, literal, origin)


def node_float_type(view: GraphView, node_id: NodeId) -> np.dtype | None:
    """The precision a node computes in: the narrowest floating-point element type among
    its inputs and outputs, each taken as the type it was widened from, if it was (a
    float16 node the CPU computes in float32 may read the float32 value a skipped Cast
    read, but its outputs stand for float16 ones); None when it has no float value."""
    found: np.dtype | None = None
    for name in (*view.inputs(node_id), *view.outputs(node_id)):
        if not name:
            continue
        elem = view.widened.get(name) or view.elem_type(name)
        dtype = _FLOAT_ELEMENTS.get(elem) if elem is not None else None
        if dtype is not None and (found is None or dtype.itemsize < found.itemsize):
            found = dtype
    return found


# ONNX float element types numpy has (bfloat16 has no numpy type: the default tolerance)
_FLOAT_ELEMENTS: dict[int, np.dtype] = {
    TensorProto.FLOAT16: np.dtype(np.float16),
    TensorProto.FLOAT: np.dtype(np.float32),
    TensorProto.DOUBLE: np.dtype(np.float64),
}


@lru_cache(maxsize=1024)
def _stored(value: float, dtype: np.dtype) -> np.generic:
    """A float literal as a constant of ``dtype`` stores it."""
    with np.errstate(all="ignore"):
        # (numpy's stubs type `[()]` of a 0-d array as an array: it is a scalar)
        return np.asarray(value).astype(dtype)[()]  # type: ignore[return-value]


def _isclose(a: float, b: float, rtol: float, atol: float) -> bool:
    """``np.isclose`` for two Python floats (infinities equal only to themselves, NaN to
    nothing), without numpy's per-call cost."""
    if a == b:
        return True
    if math.isinf(a) or math.isinf(b) or math.isnan(a) or math.isnan(b):
        return False
    return abs(a - b) <= atol + rtol * abs(b)


def _may_have_one_element(shape: list | None) -> bool:
    if shape is None:
        return True  # unknown: cannot rule it out
    count = 1
    for dim in shape:
        if not isinstance(dim, int):
            return True
        count *= dim
    return count == 1


class Neighborhood:
    """Op keys around a node — what produces its inputs, what consumes each output — each
    read once, when a rule's root check first asks (rules at one root share it)."""

    __slots__ = ("view", "root", "_producers", "_scalars", "_consumers")

    def __init__(self, view: GraphView, root: NodeId) -> None:
        self.view = view
        self.root = root
        self._producers: frozenset[OpKey | None] | None = None
        self._scalars: list[tuple[np.ndarray | None, int | None]] | None = None
        self._consumers: dict[int, frozenset[OpKey]] = {}

    def producers(self) -> frozenset[OpKey | None]:
        """The op keys of the producers of the root's inputs (None: a graph input or a
        constant)."""
        if self._producers is None:
            producer_key = self.view.producer_key
            self._producers = frozenset(producer_key(name) for name in self.view.inputs(self.root))
        return self._producers

    def scalar_constants(self) -> list[tuple[np.ndarray | None, int | None]]:
        """The inputs that are one-element constants (all a literal can match), each with
        the element type it was widened from (``GraphView.widened``), if any."""
        if self._scalars is None:
            view = self.view
            self._scalars = [
                (view.constant(name), view.widened.get(name))
                for name in view.inputs(self.root)
                if name and view.is_constant(name) and _may_have_one_element(view.shape(name))
            ]
        return self._scalars

    def consumers(self, slot: int) -> frozenset[OpKey]:
        found = self._consumers.get(slot)
        if found is None:
            outputs = self.view.outputs(self.root)
            found = self.view.consumer_keys(outputs[slot]) if slot < len(outputs) and outputs[slot] else frozenset()
            self._consumers[slot] = found
        return found


class RootEnv:
    """The ``Env`` of a rule's wheres on the root alone: each name the root equation binds
    read off the root node where the matcher would bind it (``CompiledRule.root_names``)
    — the same values whenever the root matches, so these wheres need not run again."""

    __slots__ = ("graph", "view", "node", "names")

    def __init__(self, view: GraphView, node: NodeId, names: dict[str, RootPlace]) -> None:
        self.graph: GraphFacts = view
        self.view = view
        self.node = node
        self.names = names

    def lookup(self, name: str) -> object:
        place = self.names[name]  # (KeyError: not a name of the root's)
        if place.kind == "attr":
            return attribute_with_default(self.view, self.node, place.name)
        values = self.view.inputs(self.node) if place.kind == "input" else self.view.outputs(self.node)
        slot = place.slot
        value = values[slot] if slot < len(values) else ""
        return Ref(value) if value else None

    def node_attribute(self, var: str, attr: str) -> object:
        if self.names.get(var, ("",))[0] != "output":
            raise EvalFailure(f"'{var}' is not matched yet")
        return attribute_with_default(self.view, self.node, attr)


class RootDispatch:
    """The rules rooted at one op, in the order they are tried, with the first neighbour
    check of each (``CompiledRule.root_checks``: a producer or consumer op it needs)
    indexed by that op.  One look at a node's neighbours then picks the rules that can
    hold there — a decision shared by all of them — instead of every rule asking in turn
    (a MatMul is the root of seven rules, each wanting another consumer)."""

    def __init__(self, rules: Iterable[CompiledRule]) -> None:
        self.rules = tuple(rules)
        # each rule with the root checks left to ask once its indexed one holds
        pairs: list[tuple[CompiledRule, tuple[RootCheck, ...]]] = []
        self._always = 0  # bit set of the rules with no neighbour check
        # (looked up with a producer's op key, None for a graph input or a constant)
        tables: dict[tuple[str, int], dict[OpKey | None, int]] = {}
        for position, rule in enumerate(self.rules):
            check = next((c for c in rule.root_checks if isinstance(c, NeighborCheck)), None)
            pairs.append((rule, tuple(c for c in rule.root_checks if c is not check)))
            if check is None:
                self._always |= 1 << position
                continue
            table = tables.setdefault((check.kind, check.slot), {})
            for op in check.ops:
                table[op] = table.get(op, 0) | 1 << position
        self._pairs = tuple(pairs)
        # (kind, slot, op -> bit set of the rules needing that op there)
        self._index = [(kind, slot, table) for (kind, slot), table in tables.items()]
        # bit set -> those rules, in order
        self._chosen: dict[int, tuple[tuple[CompiledRule, tuple[RootCheck, ...]], ...]] = {}

    def candidates(self, hood: Neighborhood) -> tuple[tuple[CompiledRule, tuple[RootCheck, ...]], ...]:
        """(rule, its other root checks, to be asked) for each rule whose indexed check
        holds at ``hood``'s node, in order."""
        bits = self._always
        view, root = hood.view, hood.root
        for kind, slot, table in self._index:
            if kind == "producer":
                producer_key = view.producer_key
                for name in view.inputs(root):
                    if name:
                        bits |= table.get(producer_key(name), 0)
            else:
                outputs = view.outputs(root)
                if slot < len(outputs) and outputs[slot]:
                    for key in view.consumer_keys(outputs[slot]):
                        bits |= table.get(key, 0)
        chosen = self._chosen.get(bits)
        if chosen is None:
            chosen = self._chosen[bits] = tuple(
                pair for position, pair in enumerate(self._pairs) if bits >> position & 1
            )
        return chosen


class Matcher:
    """Finds matches of compiled rules in a ``GraphView``."""

    def __init__(self, view: GraphView, max_attempts: int = 10_000, record_failures: bool = True) -> None:
        self.view = view
        self.max_attempts = max_attempts  # candidate bindings tried per root, then give up
        self.record_failures = record_failures  # keep why the deepest attempt failed
        self.last_failure: Failure | None = None
        self._looking_at: NodeId | None = None  # (recorded failures only) the node being tried

    def matches(
        self, compiled: CompiledRule, root: NodeId, neighborhood: Neighborhood | None = None
    ) -> Iterator[Match]:
        """Every instance of ``compiled`` whose root node is ``root`` (lazily).

        A caller trying several rules at one root passes the ``neighborhood`` it checked
        them with (``root_checks_hold``): the root checks are then not repeated."""
        self.last_failure = None
        if neighborhood is None and not self.root_checks_hold(compiled, self.neighborhood(root)):
            return
        state = _State(self.view, compiled)
        budget = [self.max_attempts]
        yield from self._search(compiled, state, 0, root, budget)

    def neighborhood(self, root: NodeId) -> Neighborhood:
        """What the root checks of rules ask about a node (read lazily, then kept)."""
        return Neighborhood(self.view, root)

    def root_checks_hold(
        self, compiled: CompiledRule, hood: Neighborhood, checks: tuple[RootCheck, ...] | None = None
    ) -> bool:
        """The rule's necessary conditions on the root's neighbours (see plan._root_checks;
        ``checks``: those of them still to ask), then its wheres on the root alone
        (``CompiledRule.root_wheres``)."""
        if self.record_failures:
            self._looking_at = hood.root
        for check in compiled.root_checks if checks is None else checks:
            if check.kind == "producer":
                found = not check.ops.isdisjoint(hood.producers())
            elif check.kind == "constant":
                literals = check.literals
                found = any(
                    literal_matches(array, lit, origin) for array, origin in hood.scalar_constants() for lit in literals
                )
            else:
                found = not check.ops.isdisjoint(hood.consumers(check.slot))
            if not found:
                if self.record_failures:
                    if check.kind == "constant":
                        shown = (f"{'~' if lit.approx else ''}{lit.value}" for lit in check.literals)
                        wanted = "constant " + " or ".join(shown)
                    else:
                        wanted = " or ".join(op for _, op in sorted(check.ops))
                    self._fail(0, f"no {wanted} next to the root", None, kind="root", root_check=check)
                return False
        if compiled.root_wheres:
            env = RootEnv(self.view, hood.root, compiled.root_names)
            for where, label, expr in compiled.root_wheres:
                try:
                    holds = truth(where(env))
                except EVAL_ERRORS as err:
                    if self.record_failures:
                        self._fail(0, f"{label}: {as_failure(err)}", None, CONSTRAINTS, "where", check=expr)
                    return False
                if not holds:
                    if self.record_failures:
                        self._fail(0, f"{label} does not hold", None, CONSTRAINTS, "where", check=expr)
                    return False
        return True

    # --------------------------------------------------------------------- search
    def _fail(
        self,
        depth: int,
        reason: str,
        state: _State | None,
        stage: int = OP,
        kind: str = "op",
        value: str | None = None,
        check: A.Expr | None = None,
        root_check: RootCheck | None = None,
        name: str | None = None,
    ) -> None:
        """Record why an attempt failed (callers format the reason only when recording):
        the deepest step, and within it the furthest stage (a where that did not hold says
        more than the next alternative's op that did not fit)."""
        if not self.record_failures:
            return
        last = self.last_failure
        if last is None or (depth, stage) >= (last.depth, last.stage):
            bindings = {} if state is None else dict(state.values) | dict(state.scalars)
            nodes = {} if state is None else dict(state.nodes)
            self.last_failure = Failure(
                depth, reason, bindings, stage, kind, nodes, self._looking_at, value, check, root_check, name
            )

    def _search(
        self, compiled: CompiledRule, state: _State, step_index: int, root: NodeId, budget: list[int]
    ) -> Iterator[Match]:
        if step_index == len(compiled.steps):
            yield Match(
                compiled, dict(state.values), dict(state.scalars), dict(state.nodes), root, dict(state.alternatives)
            )
            return
        step = compiled.steps[step_index]
        view = self.view
        link = step.link  # the candidate nodes: the root, a bound value's producer or its readers
        if link is None:  # (the root step)
            candidates: Sequence[NodeId] = (root,)
        else:
            bound = state.values.get(link)
            if type(bound) is not str:  # (None or a list)
                return
            if step.via == "output":
                producer = view.producer(bound)
                if producer is None:
                    if self.record_failures:
                        self._link_failure(step, step_index, bound, state)
                    return
                candidates = (producer,)
            else:
                candidates = list(dict.fromkeys(n for n, slot in view.consumer_slots(bound) if type(slot) is int))
                if not candidates and self.record_failures:
                    self._link_failure(step, step_index, bound, state)
        by_key = step.alternatives
        for node_id in candidates:
            if node_id in state.used:
                continue
            if self.record_failures:
                self._looking_at = node_id
            plans = by_key.get(view.node_key(node_id))
            if plans is None:
                if self.record_failures:
                    domain, op = view.node_key(node_id)
                    wanted = " or ".join(sorted({op for _, op in by_key}))
                    self._fail(step_index, f"{op} is not {wanted}", state)
                continue
            for plan in plans:
                # this node as this alternative: outputs, attributes, then each operand
                # order (commutative ops) binds the inputs; each binding goes one step deeper
                mark = state.mark()
                if self._match_outputs(step.outs, view.outputs(node_id), state) and self._match_attrs(
                    plan, node_id, state, step_index
                ):
                    inputs: Sequence[str] = view.inputs(node_id)
                    if inputs and not inputs[-1]:  # trailing absent optional inputs
                        present = list(inputs)
                        while present and not present[-1]:
                            present.pop()
                        inputs = present
                    for order in self._input_orders(plan, inputs):
                        inner = state.mark()
                        if self._match_inputs(plan, order, state, step_index):
                            budget[0] -= 1
                            if budget[0] < 0:
                                self._fail(step_index, "match attempt budget exhausted", state, CONSTRAINTS, "budget")
                                return
                            state.bind_node(step.equation, node_id, plan)
                            if self._constraints(compiled, step, state, step_index):
                                yield from self._search(compiled, state, step_index + 1, root, budget)
                                if self.record_failures:  # (the deeper steps looked at others)
                                    self._looking_at = node_id
                        state.undo(inner)
                state.undo(mark)

    def _link_failure(self, step: Step, depth: int, value: str, state: _State) -> None:
        """Record that the value a step reaches its node through has no producer (a graph
        input, an initializer) or no reader."""
        wanted = " or ".join(sorted({op for _, op in step.alternatives}))
        if step.via == "output":
            reason = f"'{value}' has no producer ({wanted} wanted)"
        else:
            reason = f"'{value}' has no reader ({wanted} wanted)"
        self._looking_at = None  # (no node to look at)
        self._fail(depth, reason, state, kind="link", value=value)

    def _constraints(self, compiled: CompiledRule, step: Step, state: _State, depth: int) -> bool:
        # lets and wheres run compiled (see plan.Step.checks), without numpy's errstate
        # each time: the level runner sets it once (evaluate() does both per call)
        for name, check, label, expr in step.checks:
            try:
                value = check(state)
                ok = state.unify_scalar(name, value) if name is not None else truth(value)
            except EVAL_ERRORS as err:
                if self.record_failures:
                    kind = "where" if name is None else "let"
                    self._fail(depth, f"{label}: {as_failure(err)}", state, CONSTRAINTS, kind, check=expr)
                return False
            if not ok:
                if self.record_failures and name is None:
                    self._fail(depth, f"{label} does not hold", state, CONSTRAINTS, "where", check=expr)
                return False
        return True

    # ----------------------------------------------------------------- one node
    def _match_outputs(self, outs: tuple[OutPlan, ...], outputs: tuple[str, ...], state: _State) -> bool:
        for slot, name, optional in outs:
            value = outputs[slot] if slot < len(outputs) else ""
            if not value:
                if not optional or not state.unify_value(name, None):
                    return False
            elif not state.unify_value(name, value):
                return False
        return True

    def _match_attrs(self, plan: AltPlan, node_id: NodeId, state: _State, depth: int) -> bool:
        view = self.view
        for name, how, bind, fixed, compiled in plan.attrs:
            actual = view.attribute(node_id, name)
            if actual is None:
                proto = view.node(node_id)
                actual = attribute_default(proto.domain, proto.op_type, view.opset(proto.domain), name)
            elif actual is FUNCTION_ATTRIBUTE:
                if self.record_failures:
                    reason = f"attribute {name} is the calling node's (inside a function)"
                    self._fail(depth, reason, state, ATTRIBUTES, "attribute")
                return False
            # a name not bound yet captures the attribute, also one that another alternative
            # binds to an input (`ReduceMean(x) {axes: ax} | ReduceMean(x, ax)`)
            if bind is not None and bind not in state.values and (how == CAPTURE or bind in state.scalars):
                if not state.unify_scalar(bind, actual):
                    if self.record_failures:
                        self._fail(depth, f"attribute {name}={actual!r} differs", state, ATTRIBUTES, "attribute")
                    return False
                continue
            if how == APPROX:
                assert isinstance(fixed, A.Literal)
                if not approx_attribute_matches(actual, fixed, node_float_type(view, node_id)):
                    if self.record_failures:
                        reason = f"attribute {name}={actual!r}, wanted ~{fixed.value!r} (within tolerance)"
                        self._fail(depth, reason, state, ATTRIBUTES, "attribute")
                    return False
                continue
            if how == FIXED:
                expected = fixed
            else:
                try:
                    expected = compiled(state)
                except EVAL_ERRORS as err:
                    if self.record_failures:
                        self._fail(depth, f"attribute {name}: {as_failure(err)}", state, ATTRIBUTES, "attribute")
                    return False
            if not values_equal(actual, expected):
                if self.record_failures:
                    reason = f"attribute {name}={actual!r}, wanted {expected!r}"
                    self._fail(depth, reason, state, ATTRIBUTES, "attribute")
                return False
        return True

    def _input_orders(self, plan: AltPlan, inputs: Sequence[str]) -> Sequence[Sequence[str]]:
        """The operand orders to try: as given, then (commutative ops) the others."""
        if len(inputs) < 2 or not plan.reorderable:
            return (inputs,)
        if len(inputs) == 2:
            return (inputs,) if inputs[0] == inputs[1] else (inputs, [inputs[1], inputs[0]])
        if len(inputs) <= 4:
            return [list(perm) for perm in itertools.permutations(inputs)]
        return (inputs,)

    def _match_inputs(self, plan: AltPlan, inputs: Sequence[str], state: _State, depth: int) -> bool:
        count = len(inputs)
        if count > plan.fixed and not plan.has_rest:
            if self.record_failures:
                self._fail(depth, f"{plan.alt.op} has {count} inputs, pattern has {plan.fixed}", state, INPUTS, "input")
            return False
        for i, arg in enumerate(plan.inputs):
            value = inputs[i] if i < count and inputs[i] else None
            if arg.kind is VAR:
                if value is None and not arg.optional:
                    if self.record_failures:
                        self._fail(depth, f"input {i} of {plan.alt.op} is missing", state, INPUTS, "input")
                    return False
                if not state.unify_value(arg.name, value):
                    if self.record_failures:
                        reason = f"'{arg.name}' is bound to another value"
                        self._fail(depth, reason, state, INPUTS, "input", value=value, name=arg.name)
                    return False
            elif arg.kind is ANY:
                if value is None:
                    return False
            elif arg.kind is LITERAL:
                if value is None or not literal_matches(
                    self.view.constant(value), arg.literal, self.view.widened.get(value)
                ):
                    if self.record_failures:
                        self._fail(
                            depth,
                            f"input {i} of {plan.alt.op} is not the constant "
                            f"{'~' if arg.literal.approx else ''}{arg.literal.value}",
                            state,
                            INPUTS,
                            "input",
                            value=value,
                        )
                    return False
                if arg.bind and not state.unify_value(arg.bind, value):
                    return False
            elif arg.kind is REST:
                if not state.unify_value(arg.name, list(inputs[i:])):
                    return False
        return True
