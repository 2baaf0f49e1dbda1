"""A whole model being optimized: the main graph's view plus everything else kept intact.

``ModelState`` is built from a ``ModelProto`` (never mutating it) and turns back into a new
``ModelProto`` with the same IR version, metadata, graph inputs/outputs and their order,
value_info (of values that still exist), functions and opset imports (plus any domain a
rewrite introduced).
"""

from __future__ import annotations

from collections.abc import Iterable

import onnx
from onnx import FunctionProto, ModelProto, TensorProto, helper

from ..errors import ModelError
from ..onnx_facts.schemas import normalize_domain
from .bodies import FunctionState, SubgraphState, subgraph_states_of
from .loaded_constants import LoadHook
from .names import all_value_names
from .proto_pool import ProtoPool
from .state import GraphState
from .subgraphs import subgraphs_of
from .symbolic_shapes import broadcast_bounds, declared_aliases
from .types import (
    add_inferred_types,
    declared_types,
    light_model,
    refine_symbolic_dims,
    refine_types,
    source_types,
)
from .validation import check_node_schema, check_types, check_versions, tensor_problem
from .view import GraphView
from .wire import ModelParts
from .writing import write_graph

# re-inferences after corrected broadcasts while loading (each may correct more readers)
_CORRECTION_ROUNDS = 3


class ModelState:
    """The main graph as a ``GraphView`` plus the model-level fields needed to write it back."""

    def __init__(self, model: ModelProto, on_load: LoadHook | None = None) -> None:
        """``on_load``: what the built-in passes do while the graph is loaded (take constant
        nodes out, read equal constants as one; see passes/on_load.py); None loads the graph
        as it is."""
        self.source = model
        self.opsets: dict[str, int] = {}
        for opset in model.opset_import:
            self.opsets[normalize_domain(opset.domain)] = opset.version
        if "" not in self.opsets:
            raise ModelError("the model imports no default (ai.onnx) opset")
        check_versions(model, self.opsets)
        check_types(model)
        pool = ProtoPool()  # the view's messages, made together (see proto_pool.py)
        loaded = None if on_load is None else on_load(model.graph, pool)
        self.removed_on_load = loaded.removed if loaded is not None else 0
        self.counted_as = loaded.counted_as if loaded is not None else ""
        declared = declared_types(model)
        try:
            self.view = GraphView(
                model.graph, self.opsets, source_types(model, pool), constants=loaded, pool=pool, hints=declared
            )
        except ValueError as err:
            raise ModelError(f"malformed graph: {err}") from None
        view = self.view
        # types are inferred on the graph as loaded: its constants taken out (fewer nodes)
        add_inferred_types(model, view.types, view.nodes_in_order(), view.initializers.values(), declared)
        for node_id in view.nodes_with_subgraphs():  # fresh names avoid the inner ones too
            for sub in subgraphs_of(view.node(node_id)):
                all_value_names(sub, view.value_names)
        self._validate()
        self.dim_aliases: dict[str, str] = view.dim_aliases  # sums of dims the model names otherwise
        refine_symbolic_dims(
            model, view.nodes_in_order(), view.initializers.values(), view.types, view=view, aliases=self.dim_aliases
        )
        found = declared_aliases(view.nodes_in_order(), view.types, view.hints)
        new = {total: name for total, name in found.items() if total not in self.dim_aliases}
        self.dim_aliases.update(new)
        self._settle_bounds(None, renamed=bool(new))
        corrected = view.correct_broadcasts(view.nodes_in_order())
        for _ in range(_CORRECTION_ROUNDS):  # their readers were typed from the dims inference had
            if not corrected:
                break
            readers = [r for value in corrected for r, _ in view.consumer_slots(value)]
            corrected = self._reinfer(_incomplete_region(view, readers))[1]
        self._inferred_at = 0  # position in view.changes the types reflect
        self.added_domains: dict[str, int] = {}
        self.functions = [FunctionProto() for _ in model.functions]  # optimized copies
        for copy, function in zip(self.functions, model.functions):
            copy.CopyFrom(function)

    def _validate(self) -> None:
        """Refuse graphs no runtime would load: dangling inputs, missing outputs, cycles,
        initializers whose data does not fit their shape."""
        view = self.view
        for tensor in view.initializers.values():
            problem = tensor_problem(tensor)
            if problem:
                raise ModelError(f"malformed initializer '{tensor.name}': {problem}")
        if view.repeated_node_names:  # onnxruntime refuses such a graph
            raise ModelError(f"malformed graph: two nodes are named '{view.repeated_node_names[0]}'")
        for node_id in view.node_ids():
            check_node_schema(view, node_id, self.opsets)
            if view.loaded_in_order:
                continue  # every input was produced by then
            for name in view.inputs(node_id):
                if name and not view.has_value(name):
                    proto = view.node(node_id)
                    raise ModelError(
                        f"malformed graph: node '{proto.name or proto.op_type}' reads "
                        f"'{name}', which no node, input or initializer produces"
                    )
        for output in view.graph_outputs:
            if not view.has_value(output.name):
                raise ModelError(f"malformed graph: graph output '{output.name}' is never produced")
        try:
            if not view.loaded_in_order:  # else sorted already, so without cycles
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

    def refresh_types(self, if_incomplete_known: bool = False) -> int:
        """Re-infer value types on the current graph (after folding resolved shapes, after
        rewrites that made computed shapes readable); returns how many improved.

        Only nodes changed since the last inference and what they feed are re-inferred
        (nothing else can tell more than it did), and of those only the ones with an
        incomplete output (a complete type cannot improve), with the shape arithmetic
        feeding them; what they read from outside is declared with the types known now.
        With ``if_incomplete_known`` (after rewrites), only when the region holds a known
        type with unnamed dims: new nodes merely not typed yet are left to be typed lazily."""

        view = self.view
        position = len(view.changes)
        region = _incomplete_region(view, view.changed_since(self._inferred_at))
        if if_incomplete_known:
            region_values = (o for n in region for o in view.node(n).output if o)
            if not any(o in view.types and view.is_incomplete(o) for o in region_values):
                return 0  # (these changes stay to be looked at next time)
        self._inferred_at = position
        if not region:
            return 0
        return self._reinfer(region)[0]

    def _reinfer(self, region: set[int]) -> tuple[int, list[str]]:
        """Re-infer the nodes of ``region`` (in order), what they read from outside declared
        with the types known now; then settle its bounds and correct its broadcasts.  Returns
        how many types inference improved and the values whose broadcast was corrected."""
        view = self.view
        if not region:
            return 0, []
        nodes = [view.node(n) for n in view.topological_ids(region)]
        produced = {o for n in nodes for o in n.output if o}
        reads = dict.fromkeys(i for n in nodes for i in n.input if i and i not in produced)
        initializers = [view.initializers[r] for r in reads if view.is_initializer(r)]
        inputs = [
            helper.make_value_info(r, view.types[r]) for r in reads if not view.is_initializer(r) and r in view.types
        ]
        light = light_model(self.source, nodes, initializers, inputs, (), (), self.opsets)
        improved = refine_types(
            view.types,
            light,
            lambda: light_model(self.source, nodes, initializers, inputs, (), (), self.opsets, with_stand_ins=False),
        )
        improved += refine_symbolic_dims(
            self.source, nodes, initializers, view.types, inputs, (), self.opsets, aliases=self.dim_aliases
        )
        self._settle_bounds(region, produced)  # (a rewrite's nodes run too)
        return improved, view.correct_broadcasts(nodes)

    def _settle_bounds(self, region: set[int] | None, values: set[str] | None = None, renamed: bool = False) -> None:
        """Take as 0 the dims' ``Max(0, d)`` atoms that broadcasts among the main graph's
        nodes (``region``'s, or all) bound (symbolic_shapes.broadcast_bounds), in the types
        of ``values`` (all by default).  Only nodes a graph output needs count: onnxruntime
        runs those whenever the model runs, and drops the rest."""
        view = self.view
        nodes = view.nodes_in_order() if region is None else [view.node(n) for n in region]
        # (the cheap scan first: tracing what the outputs need is only worth it for new bounds)
        if not broadcast_bounds(nodes, view.shape) - view.vanishing:
            view.settle_dims((), values, renamed)
            return
        view.settle_dims(broadcast_bounds(view.output_ancestors(region), view.shape), values, renamed)

    def subgraph_states(self):
        """A state per subgraph of the main graph's current nodes (nested ones come from
        their parent's state)."""
        yield from subgraph_states_of(self, self.view, self.view.live_values())

    def model_parts(self) -> ModelParts:
        """The optimized model as the writer takes it (see model_io.ModelParts): no weight
        is copied, the initializers are the view's own."""
        source, view = self.source, self.view
        head = ModelProto()
        head.ir_version = source.ir_version
        for field in ("producer_name", "producer_version", "domain", "model_version", "doc_string"):
            if source.HasField(field):
                setattr(head, field, getattr(source, field))
        head.metadata_props.extend(source.metadata_props)
        head.opset_import.extend(source.opset_import)
        for domain, version in self.added_domains.items():
            head.opset_import.append(helper.make_opsetid(domain, version))
        head.functions.extend(self.functions)
        if hasattr(source, "training_info"):
            head.training_info.extend(source.training_info)
        graph = write_graph(source.graph, view, initializers=False)
        return ModelParts(head, graph, list(view.initializers.values()))

    def to_model(self) -> ModelProto:
        """The optimized model as a new ``ModelProto`` (every weight copied into it)."""
        return assembled(self.model_parts())


class SavedModel:
    """A model as a ``ModelState`` held it at one moment (``ModelParts`` taken then): what a
    run gives back when it undoes what came after (the layout level over its node budget,
    see pipeline.py).  The parts' initializers are the view's own, never copied: the view
    replaces an initializer it changes (``rename_value`` copies), so they stay as saved."""

    def __init__(self, parts: ModelParts) -> None:
        self.parts = parts

    def nodes(self) -> list[onnx.NodeProto]:
        return list(self.parts.graph.node)

    def model_parts(self) -> ModelParts:
        return self.parts

    def to_model(self) -> ModelProto:
        return assembled(self.parts)


def assembled(parts: ModelParts) -> ModelProto:
    """``parts`` as one new ``ModelProto`` (every weight copied into it)."""
    model = ModelProto()
    model.CopyFrom(parts.head)
    graph = model.graph
    graph.CopyFrom(parts.graph)
    # (protobuf writes fields by number, so where the initializers go in the message
    # does not matter; they keep their order)
    graph.initializer.extend(parts.initializers)
    return model


_SHAPE_TYPES = (TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL)  # bool: Where(Equal(s, -1), ..)


def _incomplete_region(view: GraphView, changed: list[int]) -> set[int]:
    """The ``changed`` nodes and those downstream of them with an output whose type is
    missing or has unnamed dims, plus the shape arithmetic they read (nodes computing int
    or bool tensors of rank <= 1), transitively: data propagation and ``dims()`` read the
    shapes those compute."""
    incomplete = view.is_incomplete
    region: set[int] = set()
    passed: set[int] = set()
    stack = list(changed)
    while stack:  # down from the changes, through incomplete types and shape arithmetic
        node_id = stack.pop()
        if node_id in passed:
            continue
        passed.add(node_id)
        outputs = [o for o in view.node(node_id).output if o]
        if any(incomplete(o) for o in outputs):
            region.add(node_id)
        elif not any(_is_shape_like(view, o) for o in outputs):
            continue  # (a shape's values may have changed with complete types: go on)
        stack.extend(view.downstream(node_id))
    stack = list(region)
    while stack:
        for value in view.node(stack.pop()).input:
            producer = view.producer(value) if value else None
            if producer is None or producer in region:
                continue
            if view.node_key(producer)[0]:
                continue  # shape arithmetic is standard ops
            if _is_shape_like(view, value):
                region.add(producer)
                stack.append(producer)
    return region


def _is_shape_like(view: GraphView, value: str) -> bool:
    shape = view.shape(value)
    return shape is not None and len(shape) <= 1 and view.elem_type(value) in _SHAPE_TYPES


def count_nodes(model: ModelProto) -> int:
    return len(model.graph.node)


def op_histogram(model: ModelProto | Iterable[onnx.NodeProto]) -> dict[str, int]:
    """Nodes per op (``domain.op`` outside the default domain) of a model or of nodes."""
    counts: dict[str, int] = {}
    for node in model.graph.node if isinstance(model, ModelProto) else model:
        key = f"{node.domain}.{node.op_type}" if normalize_domain(node.domain) else node.op_type
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


__all__ = ["FunctionState", "GraphState", "ModelState", "SubgraphState", "count_nodes", "op_histogram"]
