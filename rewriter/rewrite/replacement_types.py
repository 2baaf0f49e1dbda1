"""A replacement is well-typed: its nodes obey their op schemas, and every value it
redefines keeps its type and shape.

The provider's kernel table (checked after partitioning) is not the schema: the CPU table
lists SkipLayerNormalization for double, whose schema allows float, float16 and bfloat16
only, and onnxruntime refuses such a model.  Nor is a replacement's type a rule author's
promise: folding an opset-15 BatchNormalization with float16 input and float32 statistics
would give a float16 Conv float32 weights.  So before a rewrite touches the graph, each new
node is checked in order:

* the types of its inputs and outputs (known ones) are allowed by its schema's type
  constraints, and each type parameter binds one type (unless the schema lets a variadic
  formal vary);
* onnx's own inference of the node (standard ops; contrib ops are typed lazily, when a rule
  asks) finds it consistent — shapes an op can take (matrix products of matching dims,
  broadcastable operands) — and gives the types of its fresh outputs, which later nodes of
  the replacement read;
* a value the replacement redefines (a node output keeping a pattern value's name, an
  alias ``y = x``, a computed constant) keeps its element type, rank and every static dim.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from onnx import TensorProto, TypeProto

from ..graph.type_reading import type_string
from ..graph.types import NodeTypeError, infer_node_types, tensor_type, type_conflict
from ..graph.view import GraphView
from ..onnx_facts.schemas import OpInfo, find_schema, normalize_domain

_SMALL_CONSTANT = 64  # elements: constants onnx's inference may read (shapes, axes)


class TypeProblem(str):
    """Why a replacement is ill-typed.  ``rule_fault``: the rule's constraints let through a
    rewrite that changes a value's type or shape, or builds a node onnx finds inconsistent —
    where shapes are unknown (dynamic axes) the engine could not have refused it, so the
    verifier counts it against the rule; a type the op's schema does not take is the
    engine's to refuse (rules rely on it), not a fault."""

    rule_fault: bool = False

    @classmethod
    def fault(cls, message: str) -> TypeProblem:
        problem = cls(message)
        problem.rule_fault = True
        return problem


def replacement_type_problem(
    view: GraphView,
    nodes,
    names,
    initializers: list[TensorProto],
    aliases: list[tuple[str, str]],
    replaced: set[str],
    new_types: dict[str, TypeProto],
) -> TypeProblem | None:
    """Why the replacement is ill-typed (None when it is fine); fills ``new_types`` with the
    types inferred for the values it creates.  ``names``: each node's (inputs, outputs);
    ``replaced``: the graph values the replacement redefines."""
    data: dict[str, TensorProto] = {}
    for tensor in initializers:
        new_types[tensor.name] = tensor_type(tensor, view.protos)
        if tensor.name in replaced:
            problem = type_conflict(view.type_of(tensor.name), new_types[tensor.name], tensor.name)
            if problem:
                return TypeProblem.fault(problem)
        if _numel(tensor) <= _SMALL_CONSTANT:
            data[tensor.name] = tensor

    def type_of(value: str) -> TypeProto | None:
        known = new_types.get(value)
        return known if known is not None else view.type_of(value)

    for node, (inputs, outputs) in zip(nodes, names):
        domain = normalize_domain(node.domain)
        info = find_schema(domain, node.op_type, view.opset(domain))
        if info is None:
            continue  # a custom domain: nothing to check against
        input_types = {name: t for name in inputs if name and (t := type_of(name)) is not None}
        expected = {name: view.type_of(name) for name in outputs if name in replaced}
        problem = _binding_problem(info, inputs, outputs, {**input_types, **expected})
        if problem:
            return TypeProblem(problem)
        if domain or any(name and name not in input_types for name in inputs):
            # a contrib op (its schema's types were checked; inferring shapes through its
            # standard stand-ins costs more than all the rest: its outputs are typed lazily
            # when a rule asks), or an input of unknown type: onnx cannot check the node
            continue
        for name in inputs:
            if name and name not in data and view.is_initializer(name):
                tensor = view.initializers[name]
                if _numel(tensor) <= _SMALL_CONSTANT and tensor.data_location != TensorProto.EXTERNAL:
                    data[name] = tensor
        try:
            inferred = infer_node_types(node, input_types, view.opsets, data, strict=True)
        except NodeTypeError as err:
            return TypeProblem.fault(f"{node.op_type} as the replacement builds it is invalid: {err}")
        for name in outputs:
            if not name or name not in inferred:
                continue
            if name in expected:
                problem = type_conflict(expected[name], inferred[name], name)
                if problem:
                    return TypeProblem.fault(problem)
            else:
                new_types[name] = inferred[name]
    for target, source in aliases:
        problem = type_conflict(view.type_of(target), type_of(source), target)
        if problem:
            return TypeProblem.fault(problem)
    return None


def _binding_problem(info: OpInfo, inputs, outputs, types: Mapping[str, TypeProto | None]) -> str | None:
    """Whether the known types fit the schema's type constraints, one type per parameter
    (``types``: None where unknown)."""
    bound: dict[str, str] = {}
    for output, names in ((False, inputs), (True, outputs)):
        for index, name in enumerate(names):
            if not name:
                continue
            actual = type_string(types.get(name))
            formal = info.formal(index, output)
            if actual is None or formal is None:
                continue
            allowed = info.type_constraints.get(formal)
            if allowed is None and "(" in formal:
                allowed = frozenset({formal})  # a fixed type, tensor(int64) say
            if allowed is None:
                continue
            what = f"{'output' if output else 'input'} {index} of {info.name}"
            if actual not in allowed:
                return f"{what} would be {actual}; its schema allows {', '.join(sorted(allowed))}"
            if formal in info.heterogeneous:
                continue
            first = bound.setdefault(formal, actual)
            if first != actual:
                return f"{what} would be {actual} where {info.name}'s {formal} is already {first}"
    return None


def _numel(tensor: TensorProto) -> int:
    return int(np.prod(tensor.dims, dtype=np.int64)) if tensor.dims else 1
