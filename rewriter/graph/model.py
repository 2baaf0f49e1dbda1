"""A whole model being optimized: the main graph's view plus everything else kept intact.

``ModelState`` is built from a ``ModelProto`` (never mutating it) and turns back into a new
``ModelProto`` with the same IR version, metadata, graph inputs/outputs and their order,
value_info (of values that still exist), functions and opset imports (plus any domain a
rewrite introduced).
"""
from __future__ import annotations

import onnx
from onnx import GraphProto, ModelProto, helper

from ..dsl.schemas import normalize_domain
from ..errors import ModelError
from .types import infer_model_types
from .view import GraphView


def _all_value_names(graph: GraphProto, names: set[str]) -> set[str]:
    """Every value name in a graph and its subgraphs (fresh names must avoid all of them)."""
    from .view import subgraphs_of
    names.update(vi.name for vi in graph.input)
    names.update(t.name for t in graph.initializer)
    for node in graph.node:
        names.update(node.output)
        names.update(node.input)
        for sub in subgraphs_of(node):
            _all_value_names(sub, names)
    return names


class ModelState:
    """The main graph as a ``GraphView`` plus the model-level fields needed to write it back."""

    def __init__(self, model: ModelProto) -> None:
        self.source = model
        self.opsets: dict[str, int] = {}
        for opset in model.opset_import:
            self.opsets[normalize_domain(opset.domain)] = opset.version
        if "" not in self.opsets:
            raise ModelError("the model imports no default (ai.onnx) opset")
        types = infer_model_types(model)
        try:
            self.view = GraphView(model.graph, self.opsets, types,
                                  reserved_names=_all_value_names(model.graph, set()))
        except ValueError as err:
            raise ModelError(f"malformed graph: {err}") from None
        self._validate()
        self.added_domains: dict[str, int] = {}

    def _validate(self) -> None:
        """Refuse graphs no runtime would load: dangling inputs, missing outputs, cycles."""
        view = self.view
        for node_id in view.node_ids():
            proto = view.node(node_id)
            for name in proto.input:
                if name and not view.has_value(name):
                    raise ModelError(f"malformed graph: node '{proto.name or proto.op_type}' reads "
                                     f"'{name}', which no node, input or initializer produces")
        for output in view.graph_outputs:
            if not view.has_value(output.name):
                raise ModelError(f"malformed graph: graph output '{output.name}' is never produced")
        try:
            view.topological_ids()
        except ValueError:
            import networkx as nx
            cycle = nx.find_cycle(view.nx)
            names = [view.node(u).name or view.node(u).op_type for u, *_ in cycle if isinstance(u, int)]
            raise ModelError(f"malformed graph: cycle through nodes {' -> '.join(names)}") from None

    def require_domain(self, domain: str, version: int = 1) -> None:
        """Make sure the written model imports ``domain`` (added by a rewrite)."""
        domain = normalize_domain(domain)
        if domain not in self.opsets:
            self.opsets[domain] = version
            self.view.opsets[domain] = version
            self.added_domains[domain] = version

    def refresh_types(self) -> int:
        """Re-infer value types on the current graph (after folding resolved shapes)."""
        from .types import light_model, refine_types

        view = self.view
        light = light_model(self.source, view.topological_nodes(), view.initializers.values(),
                            view.graph_inputs, view.graph_outputs, (), self.opsets)
        return refine_types(view.types, light)

    def subgraph_states(self):
        """A state per subgraph of the main graph's current nodes (nested ones come from
        their parent's state)."""
        yield from _subgraph_states(self, self.view, self.view.live_values())

    def to_model(self) -> ModelProto:
        source, view = self.source, self.view
        model = ModelProto()
        model.ir_version = source.ir_version
        for field in ("producer_name", "producer_version", "domain", "model_version", "doc_string"):
            if source.HasField(field):
                setattr(model, field, getattr(source, field))
        model.metadata_props.extend(source.metadata_props)
        model.opset_import.extend(source.opset_import)
        for domain, version in self.added_domains.items():
            model.opset_import.append(helper.make_opsetid(domain, version))
        model.functions.extend(source.functions)
        if hasattr(source, "training_info"):
            model.training_info.extend(source.training_info)

        model.graph.CopyFrom(write_graph(source.graph, view))
        return model


def write_graph(src: GraphProto, view: GraphView) -> GraphProto:
    """A graph proto from ``view``, keeping ``src``'s name, docs, metadata, inputs/outputs
    (order and names), sparse initializers and the value_info of values that still exist."""
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
    graph.initializer.extend(view.initializers.values())
    graph.sparse_initializer.extend(src.sparse_initializer)
    live = view.live_values()
    graph.value_info.extend(vi for vi in src.value_info if vi.name in live)
    graph.quantization_annotation.extend(qa for qa in src.quantization_annotation if qa.tensor_name in live)
    return graph


class SubgraphState:
    """A subgraph (If branch, Loop/Scan body) being optimized like a graph of its own.

    Values of enclosing graphs are outer sources: rules read them but never delete or
    rename them.  Domains a rewrite adds are imported by the root model."""

    def __init__(self, root: "ModelState", graph: GraphProto, outer: set[str]) -> None:
        self.root = root
        self.source = root.source
        self.opsets = root.opsets
        self.graph = graph
        from .view import outer_references

        reads = [name for name in outer_references(graph) if name in outer]
        types = {vi.name: vi.type for vi in (*graph.input, *graph.value_info, *graph.output)
                 if vi.type.WhichOneof("value") is not None}
        types.update({name: root.view.types[name] for name in reads if name in root.view.types})
        try:
            self.view = GraphView(graph, root.opsets, types, outer_values=reads,
                                  reserved_names=root.view.value_names)
        except ValueError as err:
            raise ModelError(f"malformed subgraph '{graph.name}': {err}") from None
        self.outer = outer

    def require_domain(self, domain: str, version: int = 1) -> None:
        self.root.require_domain(domain, version)
        self.view.opsets = self.root.opsets

    def write_back(self) -> None:
        """Replace the subgraph's contents with the optimized graph, in place."""
        self.graph.CopyFrom(write_graph(self.graph, self.view))

    def subgraph_states(self):
        yield from _subgraph_states(self.root, self.view, self.outer | self.view.live_values())


def _subgraph_states(root: "ModelState", view: GraphView, visible: set[str]):
    from .view import subgraphs_of

    for node_id in view.node_ids():
        for graph in subgraphs_of(view.node(node_id)):
            yield SubgraphState(root, graph, set(visible))


def count_nodes(model: ModelProto) -> int:
    return len(model.graph.node)


def op_histogram(model: ModelProto) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in model.graph.node:
        key = f"{node.domain}.{node.op_type}" if normalize_domain(node.domain) else node.op_type
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


__all__ = ["ModelState", "count_nodes", "op_histogram", "onnx"]
