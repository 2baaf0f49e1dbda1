"""Writing a view back as a ``GraphProto`` with everything of the source graph the view does
not hold kept: name, docs, metadata, input/output order, sparse initializers, the value_info
of values that still exist, quantization annotations."""

from __future__ import annotations

from onnx import GraphProto

from ..errors import ModelError
from .types import (
    type_conflict,
)
from .view import GraphView


def write_graph(src: GraphProto, view: GraphView, initializers: bool = True) -> GraphProto:
    """A graph proto from ``view``, keeping ``src``'s name, docs, metadata, inputs/outputs
    (order and names), sparse initializers and the value_info of values that still exist;
    with the view's initializers unless ``initializers`` is False."""
    graph = GraphProto()
    graph.name = src.name
    if src.HasField("doc_string"):
        graph.doc_string = src.doc_string
    if hasattr(graph, "metadata_props"):
        graph.metadata_props.extend(src.metadata_props)
    try:
        graph.node.extend(view.topological_nodes())
    except ValueError as err:
        raise ModelError(f"rewriting produced an invalid graph: {err}") from None
    graph.input.extend(view.graph_inputs)
    graph.output.extend(view.graph_outputs)
    if initializers:
        graph.initializer.extend(view.initializers.values())
    graph.sparse_initializer.extend(src.sparse_initializer)
    live = view.live_values()
    types = view.types  # (a value_info inference contradicts is dropped, not written back)
    # nor one of a value that is now an initializer (a Constant folded): the initializer
    # gives its type and shape, and onnx's shape inference takes a value_info as a value it
    # cannot read (a Slice's axes then read as absent), contradicting the declared outputs
    graph.value_info.extend(
        vi
        for vi in src.value_info
        if vi.name in live
        and vi.name not in view.initializers
        and type_conflict(types.get(vi.name), vi.type, vi.name) is None
    )
    graph.quantization_annotation.extend(qa for qa in src.quantization_annotation if qa.tensor_name in live)
    return graph
