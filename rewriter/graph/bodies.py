"""Graphs inside a model optimized like graphs of their own: If/Loop/Scan bodies
(``SubgraphState``) and model-local function bodies (``FunctionState``).  Both follow the
``GraphState`` protocol; what they add to the model (domains) goes through the root's."""

from __future__ import annotations

from collections.abc import Iterator

from onnx import FunctionProto, GraphProto, ValueInfoProto, helper

from ..errors import ModelError
from ..onnx_facts.schemas import normalize_domain
from .names import all_value_names
from .state import GraphState
from .subgraphs import outer_references, subgraphs_of
from .types import infer_body_types
from .view import GraphView
from .writing import write_graph


class SubgraphState:
    """A subgraph (If branch, Loop/Scan body) being optimized like a graph of its own.

    Values of enclosing graphs are outer sources: rules read them but never delete or
    rename them.  Domains a rewrite adds are imported by the root model."""

    def __init__(self, root: GraphState, graph: GraphProto, outer: set[str]) -> None:
        self.root = root
        self.source = root.source
        self.opsets = root.opsets
        self.graph = graph

        reads = [name for name in outer_references(graph) if name in outer]
        # the subgraph's inputs define their values; its value_info and outputs are hints
        # (types of computed values come from inference, node by node: GraphView.type_of)
        types = {vi.name: vi.type for vi in graph.input if vi.type.WhichOneof("value") is not None}
        hints = {
            vi.name: vi.type for vi in (*graph.value_info, *graph.output) if vi.type.WhichOneof("value") is not None
        }
        outer_types = {name: root.view.type_of(name) for name in reads}
        types.update({name: t for name, t in outer_types.items() if t is not None})
        # enclosing graphs' initializers it reads are constants here too (never copied in)
        tensors = {name: root.view.constant_tensor(name) for name in reads}
        constants = {name: tensor for name, tensor in tensors.items() if tensor is not None}
        # every value's type up front, as the main graph's are found (the body's nodes
        # read alone know far less); values rewrites make are typed lazily (type_of)
        inferred = infer_body_types(root.source, graph, {n: t for n, t in types.items() if t is not None}, constants)
        types.update({name: t for name, t in inferred.items() if name not in types})
        try:
            self.view = GraphView(
                graph,
                root.opsets,
                types,
                outer_values=reads,
                reserved_names=root.view.value_names,
                hints=hints,
                outer_constants=constants,
            )
        except ValueError as err:
            raise ModelError(f"malformed subgraph '{graph.name}': {err}") from None
        self.outer = outer

    def require_domain(self, domain: str, version: int = 1) -> None:
        self.root.require_domain(domain, version)
        self.view.opsets = self.root.opsets

    def refresh_types(self, if_incomplete_known: bool = False) -> int:
        """Nothing to redo: a body's types are inferred node by node, lazily (``type_of``)."""
        return 0

    def write_back(self) -> None:
        """Replace the subgraph's contents with the optimized graph, in place."""
        self.graph.CopyFrom(write_graph(self.graph, self.view))

    def subgraph_states(self):
        yield from subgraph_states_of(self.root, self.view, self.outer | self.view.live_values())


class FunctionState:
    """A model-local function's body, optimized like a graph: its inputs are graph inputs,
    its outputs graph outputs (their names kept), its own opset imports apply.  Types are
    unknown here (they depend on the call site), so only rules that need none apply."""

    def __init__(self, root: GraphState, function: FunctionProto) -> None:
        self.root = root
        self.source = root.source
        self.function = function
        self.opsets = {normalize_domain(o.domain): o.version for o in function.opset_import}
        self.opsets.setdefault("", root.opsets[""])
        graph = GraphProto()
        graph.name = f"function {function.domain}.{function.name}"
        graph.node.extend(function.node)
        graph.input.extend(ValueInfoProto(name=name) for name in function.input)
        graph.output.extend(ValueInfoProto(name=name) for name in function.output)
        try:
            self.view = GraphView(graph, self.opsets, {}, reserved_names=all_value_names(graph, set()))
        except ValueError as err:
            raise ModelError(f"malformed function '{function.name}': {err}") from None
        self.outer: set[str] = set()

    def require_domain(self, domain: str, version: int = 1) -> None:
        domain = normalize_domain(domain)
        if domain not in self.opsets:
            self.opsets[domain] = version
            self.view.opsets[domain] = version
            self.function.opset_import.append(helper.make_opsetid(domain, version))
        self.root.require_domain(domain, version)

    def refresh_types(self, if_incomplete_known: bool = False) -> int:
        """Nothing to redo: a function's types depend on its call site (see the class)."""
        return 0

    def write_back(self) -> None:
        """Replace the function's nodes with the optimized ones (inputs/outputs kept).  A
        function has no initializers: constants (folded or computed by a rule) become
        Constant nodes again."""
        try:
            nodes = self.view.topological_nodes()
        except ValueError as err:
            raise ModelError(f"rewriting produced an invalid function: {err}") from None
        del self.function.node[:]
        for name, tensor in self.view.initializers.items():
            if self.view.consumer_count(name) or self.view.is_graph_output(name):
                self.function.node.append(helper.make_node("Constant", [], [name], value=tensor))
        self.function.node.extend(nodes)

    def subgraph_states(self):
        yield from subgraph_states_of(self.root, self.view, self.view.live_values())


def subgraph_states_of(root: GraphState, view: GraphView, visible: set[str]) -> Iterator[SubgraphState]:
    """States for the subgraphs of ``view``'s nodes; ``visible``: the outer values they may read."""
    for node_id in view.nodes_with_subgraphs():
        for graph in subgraphs_of(view.node(node_id)):
            yield SubgraphState(root, graph, set(visible))
