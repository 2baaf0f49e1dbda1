"""Apply one match: build the replacement, check the engine's guarantees, then mutate.

Everything that can fail (evaluating computed tensors and attributes, the safety checks) runs
before the graph is touched, so a refused match leaves no trace.  The guarantees enforced
here, never by rule authors:

* a value that is a graph output, or read by a node outside the match, is never deleted
  (a matched node computing from constants only stays for such readers, as a `keep` would);
* every attribute of a deleted node is accounted for: mentioned by the pattern, copied by
  the replacement, or at its default (accounting.py);
* every new node obeys its op schema's types and onnx's inference, and a value the
  replacement redefines keeps its type and static shape (replacement_types.py);
* ``y = x`` keeps a graph output's name (the surviving value is renamed to it) and refuses
  when that is impossible (``x`` is a graph input, another output, or an outer value);
* a replaced value keeps its name, type and value_info; new values and nodes get fresh,
  unique names; new domains are imported; dead initializers and dead nodes are dropped;
* every new node inherits the root's placement (``layer_ann`` / execution provider).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import SupportsFloat, SupportsIndex, SupportsInt

import numpy as np
from onnx import AttributeProto, NodeProto, TensorProto, TypeProto, helper, numpy_helper

from ..dsl import ast as A
from ..expr.evaluate import evaluate_quietly  # the level runner sets numpy's errstate
from ..expr.values import EvalFailure, GraphFacts, Ref
from ..graph.state import GraphState
from ..graph.view import GraphView, NodeId
from ..match.matcher import Match, attribute_with_default
from ..onnx_facts.placement import copy_placement
from ..onnx_facts.provenance import record_provenance
from ..onnx_facts.schemas import attribute_type, find_schema, known_domains, normalize_domain
from .accounting import unaccounted_attribute
from .replacement_types import replacement_type_problem


class Refused(Exception):
    """The match is valid but applying it would break a guarantee; the graph is untouched.
    ``rule_fault``: the rule's own constraints should have excluded it (see
    replacement_types.TypeProblem).  ``kind`` names the guarantee (one of ``REFUSAL_KINDS``),
    ``node`` the node it concerns (the reader outside the match, the node whose attribute
    would be dropped...) and ``value`` the value, where there is one: ``explain`` shows them."""

    def __init__(
        self,
        message: str,
        rule_fault: bool = False,
        kind: str = "guarantee",
        node: NodeId | None = None,
        value: str | None = None,
    ) -> None:
        super().__init__(message)
        self.rule_fault = rule_fault
        self.kind = kind
        self.node = node
        self.value = value


# what refused a match: a deleted value that is a graph output or is read outside the
# match; an attribute the rewrite would drop; a replacement node the opset does not define
# as built, or that its schema's types or onnx's inference reject; no kernel for it on the
# root's provider; an alias that cannot keep a graph output's name; a redefined value's
# producer still needed; (fixpoint.py) a match across providers or layer annotations
REFUSAL_KINDS = (
    "graph output",
    "read outside",
    "attribute",
    "opset",
    "types",
    "kernel",
    "alias",
    "guarantee",
    "placement",
)


@dataclass
class Applied:
    """What a rewrite changed: the nodes it created, and every surviving node a pattern
    could now see differently (new or rewired inputs, or a changed set of consumers)."""

    new_nodes: list[NodeId]
    touched: set[NodeId]
    removed_nodes: int
    replaced: tuple[str, ...] = ()  # names of the nodes it deleted (as provenance records them)


class _ReplacementEnv:
    """Expressions in a replacement see the match's names and the values built so far."""

    def __init__(self, view: GraphView, match: Match, defined: dict[str, str]) -> None:
        self.graph: GraphFacts = view
        self.view = view
        self.match = match
        self.defined = defined

    def lookup(self, name: str) -> object:
        if name in self.defined:
            return Ref(self.defined[name])
        if name in self.match.values:
            value = self.match.values[name]
            if isinstance(value, list):
                return [Ref(v) for v in value]
            return None if value is None else Ref(value)
        return self.match.scalars[name]

    def node_attribute(self, var: str, attr: str) -> object:
        eq_index = self.match.rule.produced_by.get(var)
        if eq_index is None or eq_index not in self.match.nodes:
            raise EvalFailure(f"'{var}' is not the output of a matched node")
        return attribute_with_default(self.view, self.match.nodes[eq_index], attr)


def _replaced_value(match: Match, name: str) -> str:
    """The graph value a pattern output the replacement redefines is bound to; "" (absent)
    for an optional output the matched node does not have (``sum?``)."""
    value = match.values[name]
    return value if type(value) is str else ""


def _replaced_values(match: Match) -> set[str]:
    """The graph values the replacement redefines (absent optional outputs left out)."""
    return {value for name in match.rule.replaced if (value := _replaced_value(match, name))}


@dataclass
class _Build:
    nodes: list[NodeProto] = field(default_factory=list)
    # each node's (inputs, outputs), kept beside the proto: reading names back from a
    # proto costs more than building them
    names: list[tuple[list[str], list[str]]] = field(default_factory=list)
    initializers: list[TensorProto] = field(default_factory=list)
    aliases: list[tuple[str, str]] = field(default_factory=list)  # (replaced y, existing x)
    defined: dict[str, str] = field(default_factory=dict)  # replacement name -> value
    domains: set[str] = field(default_factory=set)
    types: dict[str, TypeProto] = field(default_factory=dict)  # of the values it creates

    def reads(self) -> set[str]:
        """Values the replacement reads: its nodes' inputs and its aliases' sources."""
        return {i for inputs, _ in self.names for i in inputs if i} | {source for _, source in self.aliases}


def to_tensor(value: object, name: str) -> TensorProto:
    """A computed value as an initializer: numpy dtypes kept; Python floats become float32,
    Python ints int64 (use cast() in the rule for anything else)."""
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
    else:
        array = np.asarray(value)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        elif array.dtype.kind in "iu":
            array = array.astype(np.int64)
    if array.dtype == object:
        raise EvalFailure("computed value is not a tensor")
    # not np.ascontiguousarray: it turns a rank-0 value into shape [1]
    return numpy_helper.from_array(np.array(array, order="C", copy=True), name)


def make_attribute(name: str, value: object, attr_type: int | None) -> dict | AttributeProto:
    """An attribute of the type the op's schema declares (coercing ints/floats/lists): the
    fields of one (``node.attribute.add(**fields)`` makes it inside the node, no message
    of its own, see graph/proto_pool.py), or a message for tensors and untyped values."""
    if isinstance(value, np.ndarray) and attr_type != AttributeProto.TENSOR:
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    try:
        if attr_type == AttributeProto.INT:
            return {"name": name, "type": attr_type, "i": _int(value)}
        if attr_type == AttributeProto.FLOAT:
            return {"name": name, "type": attr_type, "f": _float(value)}
        if attr_type == AttributeProto.INTS:
            return {"name": name, "type": attr_type, "ints": [_int(v) for v in _items(value)]}
        if attr_type == AttributeProto.FLOATS:
            return {"name": name, "type": attr_type, "floats": [_float(v) for v in _items(value)]}
        if attr_type == AttributeProto.STRING:
            return {"name": name, "type": attr_type, "s": str(value).encode("utf-8")}
        if attr_type == AttributeProto.TENSOR:
            return helper.make_attribute(name, to_tensor(value, ""))
        return helper.make_attribute(name, value)
    except (TypeError, ValueError) as err:
        raise EvalFailure(f"attribute {name}: {err}") from None


# an evaluated value converted as int(), float() and iteration do, raising what they raise
# (the concrete types first: a protocol's isinstance costs microseconds)
def _int(value: object) -> int:
    if isinstance(value, (int, float, np.generic, str, bytes, bytearray, SupportsInt, SupportsIndex)):
        return int(value)
    raise TypeError(
        f"int() argument must be a string, a bytes-like object or a real number, not '{type(value).__name__}'"
    )


def _float(value: object) -> float:
    if isinstance(value, (float, int, np.generic, str, bytes, bytearray, SupportsFloat, SupportsIndex)):
        return float(value)
    raise TypeError(f"float() argument must be a string or a real number, not '{type(value).__name__}'")


def _items(value: object) -> Iterable[object]:
    if isinstance(value, Iterable):
        return value
    raise TypeError(f"'{type(value).__name__}' object is not iterable")


def add_attributes(node: NodeProto, attributes: Iterable[dict | AttributeProto]) -> None:
    """Give ``node`` these attributes (fields from ``make_attribute``, or messages, copied)."""
    add = node.attribute.add
    for attr in attributes:
        if type(attr) is dict:
            add(**attr)
        else:
            add().CopyFrom(attr)


_UNBOUND = object()

# What a nested call of a replacement (`Mul(Cast(x), c)`: the Cast) names its output before
# it gets a fresh one: "$" and a letter, which neither a rule's names nor the parser's
# temporaries ("$" and digits) can be, so it never takes the graph name of a value the
# rule replaces.
_NESTED_OUTPUT = "$t"


class Rewriter:
    """Applies matches to a graph's state (``GraphState``)."""

    def __init__(
        self,
        state: GraphState,
        check_node: Callable[[NodeProto, NodeId, list[str], list[str]], str | None] | None = None,
    ) -> None:
        self.state = state
        self.view = state.view
        # extra veto on each built node, given the root's id and the node's input and output
        # names: a reason
        self.check_node = check_node

    # ------------------------------------------------------------------- build
    def _input_values(self, arg: A.Expr, build: _Build, env: _ReplacementEnv, match: Match) -> list[str]:
        if type(arg) is A.Name:  # the usual input: a value of the match or of the replacement
            name = arg.id
            if name in build.defined:
                return [build.defined[name]]
            value = match.values.get(name, _UNBOUND)
            if value is None:
                return [""]
            if type(value) is str:
                return [value]
            if type(value) is list:  # a *rest: its inputs in place (none when it is empty)
                return list(value)
        if isinstance(arg, A.Call) and arg.is_op:
            return self._build_node(arg, None, build, env, match)[:1]
        if isinstance(arg, A.Const) and arg.value is None:
            return [""]
        value = evaluate_quietly(arg, env)
        if isinstance(value, Ref):
            return [value.name]
        if value is None:
            return [""]
        if isinstance(value, list) and value and all(isinstance(v, Ref) for v in value):
            return [v.name for v in value]
        tensor = to_tensor(value, self.view.fresh_value_name(f"{match.rule.name}_const"))
        build.initializers.append(tensor)
        return [tensor.name]

    def _attributes(
        self, call: A.Call, domain: str, op: str, env: _ReplacementEnv, match: Match
    ) -> dict[str, dict | AttributeProto]:
        """name -> the attribute (see ``make_attribute``; a matched node's, copied later)."""
        attrs: dict[str, dict | AttributeProto] = {}
        version = self.view.opset(domain)
        for item in call.attrs or ():
            if isinstance(item, A.AttrSpread):
                node_id = match.nodes[match.rule.produced_by[item.var]]
                for attr in self.view.node(node_id).attribute:
                    attrs[attr.name] = attr
            else:
                value = evaluate_quietly(item.value, env)
                if value is None:
                    attrs.pop(item.name, None)
                    continue
                attrs[item.name] = make_attribute(item.name, value, attribute_type(domain, op, version, item.name))
        return attrs

    def _output_name(self, name: str, match: Match) -> str:
        """A replaced pattern value keeps its graph name ("" when it is absent, unless the
        replacement reads it); anything else gets a fresh one."""
        if name in match.rule.replaced:
            value = _replaced_value(match, name)
            if value or name not in match.rule.replacement_reads:
                return value
            # absent in the match (`sum?`) but read by the replacement: an intermediate
        return self.view.fresh_value_name(f"{match.rule.name}_{name.lstrip('$')}")

    def _build_node(
        self, call: A.Call, outs: tuple[A.Out, ...] | None, build: _Build, env: _ReplacementEnv, match: Match
    ) -> list[str]:
        domain, op = A.split_op_name(call.func)
        domain = normalize_domain(domain)
        inputs: list[str] = []
        for arg in call.args:
            inputs.extend(self._input_values(arg, build, env, match))
        while inputs and not inputs[-1]:
            inputs.pop()
        rule = match.rule
        outputs: list[str] = []
        for out in outs if outs is not None else (A.Out(_NESTED_OUTPUT, False, call.pos),):
            # a pattern output bound as absent (`sum?` matched nothing) stays absent
            outputs.append("" if out.name is None else self._output_name(out.name, match) or "")
        while outputs and not outputs[-1]:
            outputs.pop()
        root = self.view.node(match.root)
        root_metadata = self.view.metadata(match.root)
        base = root.name or rule.name
        attributes = self._attributes(call, domain, op, env, match)
        self._validate(op, domain, len(inputs), len(outputs), attributes)
        node = self.view.protos.node(
            op_type=op, input=inputs, output=outputs, name=self.view.fresh_node_name(f"{base}/{rule.name}")
        )
        add_attributes(node, attributes.values())
        if domain:
            node.domain = domain
        copy_placement(root_metadata, node)  # (the placement is inherited, always)
        if self.check_node is not None:
            reason = self.check_node(node, match.root, inputs, outputs)
            if reason:
                raise Refused(reason, kind="kernel", node=match.root)
        if domain:
            build.domains.add(domain)
        build.nodes.append(node)
        build.names.append((inputs, outputs))
        return outputs

    def _validate(
        self, op: str, domain: str, n_inputs: int, n_outputs: int, attributes: dict[str, dict | AttributeProto]
    ) -> None:
        """Refuse a node the model's opset does not define as built (arity, attributes)."""
        version = self.view.opset(domain)
        info = find_schema(domain, op, version)
        if info is None:
            if domain == "" or domain in known_domains():
                raise Refused(f"{op} does not exist at opset {version} of '{domain}'", kind="opset")
            return  # a custom domain the pack declared: nothing to check against
        if domain == "" and version is not None and info.since_version > version:
            raise Refused(f"{op} does not exist at opset {version}", kind="opset")
        if not info.min_inputs <= n_inputs <= info.max_inputs:
            raise Refused(
                f"{op}-{info.since_version} takes {info.min_inputs}.."
                f"{info.max_inputs} inputs, the replacement gives {n_inputs}",
                kind="opset",
            )
        if n_outputs > info.max_outputs:
            raise Refused(f"{op}-{info.since_version} has at most {info.max_outputs} outputs", kind="opset")
        unknown = [name for name in attributes if name not in info.attributes]
        if unknown:
            raise Refused(f"{op}-{info.since_version} has no attribute {unknown[0]}", kind="opset")

    def build(self, match: Match) -> _Build:
        build = _Build()
        env = _ReplacementEnv(self.view, match, build.defined)
        for eq in match.rule.rule.replacement:
            value = eq.value
            if isinstance(value, A.Call) and value.is_op:
                outputs = self._build_node(value, eq.outs, build, env, match)
                for out, name in zip(eq.outs, outputs):
                    if out.name is not None and name:
                        build.defined[out.name] = name
                continue
            (out,) = eq.outs
            result = evaluate_quietly(value, env)
            if result is None:
                raise EvalFailure(f"'{out.name}' would be an absent value")
            if out.name is None:
                continue  # `_ = expr`: evaluated, and named nothing
            if isinstance(result, Ref):
                self._alias(out.name, result.name, build, match)
            else:
                name = self._output_name(out.name, match)
                build.initializers.append(to_tensor(result, name))
                build.defined[out.name] = name
        return build

    def _alias(self, name: str, source: str, build: _Build, match: Match) -> None:
        """``name = source``; a source built by this replacement just takes the name."""
        if name not in match.rule.replaced:  # a new name for an existing value
            build.defined[name] = source
            return
        target = _replaced_value(match, name)
        produced_here = [k for k, (_, outputs) in enumerate(build.names) if source in outputs]
        fresh = [t for t in build.initializers if t.name == source]
        if produced_here or fresh:
            for k in produced_here:
                outputs = build.names[k][1]
                slot = outputs.index(source)
                outputs[slot] = build.nodes[k].output[slot] = target
            for tensor in fresh:
                tensor.name = target
            for node, (inputs, _) in zip(build.nodes, build.names):
                for i, value in enumerate(inputs):
                    if value == source:
                        inputs[i] = node.input[i] = target
            for key, value in build.defined.items():
                if value == source:
                    build.defined[key] = target
        else:
            build.aliases.append((target, source))
        build.defined[name] = target if (produced_here or fresh) else source

    # ------------------------------------------------------------------ safety
    def _deleted_nodes(self, match: Match, build: _Build) -> set[NodeId]:
        view = self.view
        matched = set(match.nodes.values())
        new_values = {o for _, outputs in build.names for o in outputs} | {t.name for t in build.initializers}
        referenced = build.reads() - new_values
        equations = match.rule.rule.equations
        context = {node_id for index, node_id in match.nodes.items() if equations[index].keep}
        kept: set[NodeId] = set(context)
        referenced |= {i for node_id in context for i in view.inputs(node_id) if i}  # what they read stays
        stack = [view.producer(v) for v in referenced]
        while stack:
            node_id = stack.pop()
            if node_id is None or node_id not in matched or node_id in kept:
                continue
            kept.add(node_id)
            stack.extend(view.producer(i) for i in view.inputs(node_id) if i)
        kept |= self._shared_constant_steps(match, matched - kept)
        return matched - kept

    def _shared_constant_steps(self, match: Match, candidates: set[NodeId]) -> set[NodeId]:
        """Matched nodes that compute from constants only (a Dequantize of weights, a Cast
        of a constant) and that a node outside the match reads too: they stay for it, as if
        the pattern said `keep` (onnxruntime's EnsureUniqueDQForNodeUnit gives each fusion
        its own copy instead).  Keeping one never changes what the graph computes and costs
        nothing per token; refusing the match would leave the whole pattern unfused because
        an exporter shared one bias between two convolutions.  A node whose output the rule
        replaces is never kept."""
        view = self.view
        matched = set(match.nodes.values())
        replaced = _replaced_values(match)
        shared: set[NodeId] = set()
        for node_id in candidates:
            inputs = [i for i in view.inputs(node_id) if i]
            outputs = [o for o in view.outputs(node_id) if o]
            if not inputs or not all(view.is_constant(i) for i in inputs) or any(o in replaced for o in outputs):
                continue
            if any(view.is_graph_output(o) or any(c not in matched for c, _ in view.consumers(o)) for o in outputs):
                shared.add(node_id)
        return shared

    def _check(self, match: Match, build: _Build, deleted: set[NodeId]) -> None:
        view = self.view
        dropped = unaccounted_attribute(view, match, deleted)
        if dropped:
            raise Refused(dropped[0], kind="attribute", node=dropped[1])
        # (an absent optional output is no value of the graph)
        replaced = _replaced_values(match)
        referenced = build.reads()
        dying: dict[NodeId, bool] = {}
        for node_id in deleted:
            for value in view.outputs(node_id):
                if not value or value in replaced:
                    continue
                if view.is_graph_output(value):
                    raise Refused(f"'{value}' is a graph output", kind="graph output", node=node_id, value=value)
                outside = [
                    c
                    for c, _ in view.consumers(value)
                    if c not in deleted and not self._dies_with(c, deleted, referenced, dying)
                ]
                if outside:
                    raise Refused(
                        f"'{value}' is also used by node '{view.node(outside[0]).name or outside[0]}'",
                        kind="read outside",
                        node=outside[0],
                        value=value,
                    )
        for value in replaced:
            producer = view.producer(value)
            if producer is not None and producer not in deleted:
                raise Refused(f"'{value}' is replaced but its producer is still needed", node=producer, value=value)
        renamed: set[str] = set()
        for target, source in build.aliases:
            if view.producer(source) in deleted:
                raise Refused(f"'{source}' would be deleted", kind="alias", value=source)
            if not view.is_graph_output(target):
                continue
            if view.is_graph_input(source) or view.is_outer(source):
                raise Refused(
                    f"graph output '{target}' would become graph input '{source}'", kind="alias", value=target
                )
            if view.is_graph_output(source):
                raise Refused(f"graph outputs '{target}' and '{source}' would merge", kind="alias", value=target)
            if source in renamed or not view.has_value(source):
                raise Refused(f"'{source}' cannot take the name '{target}'", kind="alias", value=source)
            renamed.add(source)
        loop = self._read_through_replaced(replaced, referenced, deleted, build)
        if loop:
            read, redefined = loop
            raise Refused(
                f"'{read}' is computed from '{redefined}', which the replacement redefines: a cycle",
                kind="cycle",
                value=read,
            )
        ill_typed = replacement_type_problem(
            view, build.nodes, build.names, build.initializers, build.aliases, replaced, build.types
        )
        if ill_typed:
            raise Refused(ill_typed, ill_typed.rule_fault, kind="types")

    def _read_through_replaced(
        self, replaced: set[str], referenced: set[str], deleted: set[NodeId], build: _Build
    ) -> tuple[str, str] | None:
        """A value the replacement reads that the graph computes from a value the replacement
        redefines (a mask computed from the shape of the present key that a new attention
        node outputs), with that value: the rewritten graph would have a cycle."""
        view = self.view
        outside = [c for value in replaced for c, _ in view.consumers(value) if c not in deleted]
        if not outside:
            return None  # nothing outside the match reads a redefined value
        # a path from a redefined value to a read goes through one of ``outside``, so only
        # nodes ranked at or above the lowest of them can be on it (without the ranks, a
        # rewrite walked everything upstream of what it reads: quadratic in the graph)
        ranks = [view.rank(c) for c in outside]
        floor = None if None in ranks else min(r for r in ranks if r is not None)
        new_values = {o for _, outputs in build.names for o in outputs} | {t.name for t in build.initializers}
        seen: set[NodeId] = set()  # searched already, no redefined value above them
        for read in sorted(referenced - new_values):
            stack = [read]
            while stack:
                value = stack.pop()
                if value in replaced:
                    return read, value
                producer = view.producer(value)
                if producer is None or producer in seen or producer in deleted:
                    continue
                seen.add(producer)
                rank = view.rank(producer) if floor is not None else None
                if rank is not None and floor is not None and rank < floor:
                    continue  # below every reader of a redefined value: not computed from one
                stack.extend(i for i in view.inputs(producer) if i)
        return None

    def _dies_with(
        self, node_id: NodeId, deleted: set[NodeId], referenced: set[str], memo: dict[NodeId, bool], depth: int = 0
    ) -> bool:
        """Whether a node reading a deleted value feeds only deleted nodes (directly or
        through nodes that do): then it is dead after the rewrite and goes with it.  With
        dynamic axes a Reshape target is computed from Shape(o) of a value o inside the
        match; that shape arithmetic dies with the Reshape."""
        if node_id in memo:
            return memo[node_id]
        memo[node_id] = False  # until shown (also breaks cycles)
        view = self.view
        if depth > 12 or view.has_subgraphs(node_id):
            return False
        for out in view.outputs(node_id):
            if not out:
                continue
            if out in referenced or view.is_graph_output(out):
                return False
            for consumer, _ in view.consumers(out):
                if consumer not in deleted and not self._dies_with(consumer, deleted, referenced, memo, depth + 1):
                    return False
        memo[node_id] = True
        return True

    # ------------------------------------------------------------------- apply
    def would_apply(self, match: Match) -> bool:
        """Whether ``apply`` would rewrite (the graph is not touched)."""
        return self.refusal(match) is None

    def refusal(self, match: Match) -> Refused | EvalFailure | None:
        """Why ``apply`` would refuse ``match`` (None when it would rewrite; the graph is
        not touched)."""
        try:
            build = self.build(match)
            self._check(match, build, self._deleted_nodes(match, build))
        except (Refused, EvalFailure) as why:
            return why
        return None

    def apply(self, match: Match) -> Applied:
        """Rewrite the graph for ``match``; raises ``Refused`` or ``EvalFailure`` untouched."""
        view = self.view
        build = self.build(match)
        deleted = self._deleted_nodes(match, build)
        self._check(match, build, deleted)

        root_order = view.order_of(match.root)
        watched = {i for n in deleted for i in view.inputs(n) if i}
        watched.update(i for inputs, _ in build.names for i in inputs if i)
        watched.update(source for _, source in build.aliases)
        consumers_before = {v: view.consumer_count(v) for v in watched}
        dead_candidates: list[str] = []
        for node_id in deleted:
            dead_candidates.extend(i for i in view.inputs(node_id) if i)
        replaced_names = tuple(sorted(name for name in (view.node(n).name for n in deleted) if name))
        for node in build.nodes:
            record_provenance(node, match.rule.name, replaced_names)
        view.remove_nodes(deleted)
        for tensor in build.initializers:
            view.add_initializer(tensor)
        for domain in build.domains:
            self.state.require_domain(domain, 1)  # contrib domains are all at version 1
        new_ids = [
            view.add_node(node, (root_order[0], root_order[1] + k + 1), names)
            for k, (node, names) in enumerate(zip(build.nodes, build.names))
        ]
        types = view.types
        for _, outputs in build.names:  # what the type check inferred (no lazy inference later)
            for name in outputs:
                if name and name not in types and name in build.types:
                    types[name] = build.types[name]
        touched: set[NodeId] = set(new_ids)
        for target, source in build.aliases:
            if view.is_graph_output(target):
                touched.update(view.rename_value(source, target))
                producer = view.producer(target)
                if producer is not None:
                    touched.add(producer)
            else:
                touched.update(view.replace_uses(target, source))
                dead_candidates.append(target)
        for name in match.rule.replaced:
            value = _replaced_value(match, name)
            if value:  # (an absent optional output has no readers)
                touched.update(c for c, _ in view.consumers(value))
        removed = len(deleted) + view.remove_dead(dead_candidates, touched)
        for value, count in consumers_before.items():  # producers whose consumers changed
            if view.has_value(value) and view.consumer_count(value) != count:
                producer = view.producer(value)
                if producer is not None:
                    touched.add(producer)
        return Applied(new_ids, {n for n in touched if view.has_node(n)}, removed, replaced_names)
