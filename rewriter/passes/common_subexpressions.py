"""Built-in pass ``common_subexpression_elimination`` (ORT's ConstantSharing + CSE, level 1).

Two nodes compute the same thing when they have the same op, domain, attributes and the same
inputs — where equal small constants (same type, shape and bytes) count as the same input.
The later node's outputs are replaced by the earlier one's, then it is dead and removed.

Not merged: nondeterministic ops, nodes with subgraphs, nodes whose outputs are graph
outputs (their names must stay), initializers a caller can override (graph inputs), and
nodes placed differently (another layering annotation or execution provider).
"""
from __future__ import annotations

from onnx import TensorProto

from ..dsl.schemas import normalize_domain
from ..graph.model import ModelState
from ..graph.view import GraphView, NodeId, subgraphs_of
from ..rewrite.propagation import annotation_of, provider_of

_SHARED_CONSTANT_BYTES = 1024  # constants up to this size are compared by content
_NONDETERMINISTIC = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike",
                               "RandomUniformLike", "Multinomial", "Bernoulli", "Dropout"})


def _constant_key(view: GraphView, value: str) -> tuple | None:
    tensor = view.initializers.get(value)
    if tensor is None or not view.is_initializer(value):
        return None
    if tensor.data_location == TensorProto.EXTERNAL or tensor.ByteSize() > _SHARED_CONSTANT_BYTES:
        return None
    array = view.constant(value)
    if array is None:
        return None
    return ("const", tensor.data_type, tuple(array.shape), array.tobytes())


def eliminate_common_subexpressions(state: ModelState) -> int:
    """Merge duplicate constants and duplicate nodes; returns the number of nodes removed."""
    view = state.view
    canonical: dict[str, str] = {}          # value -> the value it duplicates
    constants: dict[tuple, str] = {}
    seen: dict[tuple, NodeId] = {}
    duplicates: list[tuple[NodeId, NodeId]] = []

    def canon(value: str) -> object:
        if not value:
            return ""
        value = canonical.get(value, value)
        key = _constant_key(view, value)
        if key is None:
            return value
        first = constants.setdefault(key, value)
        if first != value:
            canonical[value] = first
        return first

    for node_id in view.topological_ids():
        proto = view.node(node_id)
        if proto.op_type in _NONDETERMINISTIC or any(True for _ in subgraphs_of(proto)):
            continue
        inputs = tuple(canon(i) for i in proto.input)
        if any(o and view.is_graph_output(o) for o in proto.output):
            continue
        key = (normalize_domain(proto.domain), proto.op_type, inputs, len(proto.output),
               tuple(sorted(a.SerializeToString() for a in proto.attribute)),
               annotation_of(proto), provider_of(proto))  # never merge across placements
        first = seen.setdefault(key, node_id)
        if first != node_id:
            duplicates.append((node_id, first))
            for mine, theirs in zip(proto.output, view.node(first).output):
                if mine:
                    canonical[mine] = theirs

    for value, first in list(canonical.items()):
        if view.is_initializer(value) and first != value:
            view.replace_uses(value, first)
            view.remove_dead([value])
    removed = 0
    for node_id, first in duplicates:
        if not view.has_node(node_id):
            continue
        outputs = [o for o in view.node(node_id).output if o]
        for mine, theirs in zip(view.node(node_id).output, view.node(first).output):
            if mine:
                view.replace_uses(mine, theirs)
        removed += view.remove_dead(outputs)
    return removed
