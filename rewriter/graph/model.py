"""A whole model being optimized: the main graph's view plus everything else kept intact.

``ModelState`` is built from a ``ModelProto`` (never mutating it) and turns back into a new
``ModelProto`` with the same IR version, metadata, graph inputs/outputs and their order,
value_info (of values that still exist), functions and opset imports (plus any domain a
rewrite introduced).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

import onnx
from onnx import FunctionProto, GraphProto, ModelProto, TensorProto, ValueInfoProto, helper

from ..errors import ModelError
from ..onnx_facts.schemas import find_schema, latest_opset, normalize_domain
from .loaded_constants import LoadHook
from .proto_pool import ProtoPool
from .subgraphs import has_subgraphs, outer_references, subgraphs_of
from .tensor_data import all_graphs, element_count, graph_tensors, known_data_type, raw_bytes_needed
from .types import (
    add_inferred_types,
    declared_types,
    light_model,
    refine_symbolic_dims,
    refine_types,
    source_types,
    type_conflict,
)
from .view import GraphView
from .wire import ModelParts


def _all_value_names(graph: GraphProto, names: set[str]) -> set[str]:
    """Every value name in a graph and its subgraphs (fresh names must avoid all of them)."""
    names.update(vi.name for vi in graph.input)
    names.update(t.name for t in graph.initializer)
    for node in graph.node:
        names.update(node.output)
        names.update(node.input)
        if has_subgraphs(node):
            for sub in subgraphs_of(node):
                _all_value_names(sub, names)
    return names


def _check_versions(model: ModelProto, opsets: dict[str, int]) -> None:
    """Refuse IR versions and standard opsets newer (or older) than onnx here knows: their
    semantics are unknown, so no rewrite could be trusted."""
    if not 1 <= model.ir_version <= onnx.IR_VERSION:
        raise ModelError(
            f"IR version {model.ir_version} is not one this engine knows "
            f"(onnx {onnx.__version__} reads 1 to {onnx.IR_VERSION})"
        )
    for domain, version in opsets.items():
        if domain not in ("", "ai.onnx.ml", "ai.onnx.training", "ai.onnx.preview.training"):
            continue  # custom and contrib domains: their nodes are kept as they are
        latest = latest_opset(domain)
        if not 1 <= version <= latest:
            raise ModelError(
                f"opset {version} of {domain or 'ai.onnx'} is not one this engine knows "
                f"(onnx {onnx.__version__} knows 1 to {latest})"
            )


_FIELDS: dict[int, tuple[str, int]] = {  # data type -> (typed field, values per element) when not in raw_data
    TensorProto.FLOAT: ("float_data", 1),
    TensorProto.DOUBLE: ("double_data", 1),
    TensorProto.INT64: ("int64_data", 1),
    TensorProto.UINT64: ("uint64_data", 1),
    TensorProto.INT32: ("int32_data", 1),
    TensorProto.INT8: ("int32_data", 1),
    TensorProto.UINT8: ("int32_data", 1),
    TensorProto.INT16: ("int32_data", 1),
    TensorProto.UINT16: ("int32_data", 1),
    TensorProto.BOOL: ("int32_data", 1),
    TensorProto.FLOAT16: ("int32_data", 1),
    TensorProto.BFLOAT16: ("int32_data", 1),
    TensorProto.COMPLEX64: ("float_data", 2),
    TensorProto.COMPLEX128: ("double_data", 2),
    TensorProto.STRING: ("string_data", 1),
}


def _tensor_problem(tensor: TensorProto) -> str | None:
    """Why a tensor's data cannot be its declared type and shape (None when it can)."""
    if tensor.data_location == TensorProto.EXTERNAL:
        return None  # (checked against its file before it was read: model_io.py)
    if any(d < 0 for d in tensor.dims):
        return f"negative dimension in {list(tensor.dims)}"
    if tensor.HasField("raw_data") and tensor.data_type != TensorProto.STRING:
        needed = raw_bytes_needed(tensor)
        if needed is None:
            return None
        # exact (the writer relies on it); reading raw_data copies it, one tensor at a
        # time, which is cheaper than upb's ByteSize(): that serializes the tensor
        held = len(tensor.raw_data)
        if held != needed:
            return (
                f"holds {held} bytes, its shape {list(tensor.dims)} of "
                f"{TensorProto.DataType.Name(tensor.data_type).lower()} needs {needed}"
            )
        return None
    if tensor.data_type not in _FIELDS:
        return None
    count = element_count(tensor)
    field, per = _FIELDS[tensor.data_type]
    held = len(getattr(tensor, field))
    if held != count * per and not (held == 0 and count == 0):
        return f"holds {held} values, its shape {list(tensor.dims)} needs {count * per}"
    return None


def _check_types(model: ModelProto) -> None:
    """Refuse element types onnx does not define, in every tensor and declared value of
    every graph, before anything reads them (they were KeyErrors deep inside)."""
    for graph in all_graphs(model.graph):
        for sparse in graph.sparse_initializer:
            for tensor in (sparse.values, sparse.indices):
                if not known_data_type(tensor.data_type):
                    raise ModelError(
                        f"malformed sparse initializer '{sparse.values.name}': data type "
                        f"{tensor.data_type} is not one onnx defines"
                    )
                if tensor.data_location == TensorProto.EXTERNAL:
                    raise ModelError(
                        f"sparse initializer '{sparse.values.name}' keeps its data "
                        f"outside the model, which is not supported"
                    )
        for vi in (*graph.input, *graph.output, *graph.value_info):
            kind = vi.type.WhichOneof("value")
            elem = (
                vi.type.tensor_type.elem_type
                if kind == "tensor_type"
                else vi.type.sparse_tensor_type.elem_type
                if kind == "sparse_tensor_type"
                else 0
            )
            if elem and not known_data_type(elem):
                raise ModelError(
                    f"malformed graph: value '{vi.name}' has element type {elem}, which onnx does not define"
                )
    for _, tensor in graph_tensors(model.graph):
        if not known_data_type(tensor.data_type):
            raise ModelError(
                f"malformed initializer '{tensor.name}': data type {tensor.data_type} is not one onnx defines"
            )


def _check_node_schema(view: GraphView, node_id: int, opsets: dict[str, int]) -> None:
    """Standard-domain nodes must be ops their opset defines, with their inputs given."""
    domain, op = view.node_key(node_id)
    if domain not in ("", "ai.onnx.ml"):
        return  # contrib and custom ops: kept as they are
    version = opsets.get(domain)
    if version is None:
        raise ModelError(
            f"malformed graph: {_label(view.node(node_id))} uses domain {domain}, which the model does not import"
        )
    info = find_schema(domain, op, version)
    if info is None:
        raise ModelError(
            f"malformed graph: {_label(view.node(node_id))} is {op}, which "
            f"{domain or 'ai.onnx'} opset {version} does not define"
        )
    given = view.inputs(node_id)
    count = len(given)
    while count and not given[count - 1]:
        count -= 1
    if not info.min_inputs <= count <= info.max_inputs and not (
        count < info.min_inputs and len(given) >= info.min_inputs
    ):
        raise ModelError(
            f"malformed graph: {_label(view.node(node_id))} ({op}) has {count} inputs, "
            f"opset {version} takes {info.min_inputs} to {info.max_inputs}"
        )
    if "" in given:
        proto = view.node(node_id)
        for index, name in enumerate(given):
            if not name and index < len(info.required_inputs) and info.required_inputs[index]:
                raise ModelError(
                    f"malformed graph: {_label(proto)} ({proto.op_type}) leaves its required input {index} empty"
                )


def _label(proto: onnx.NodeProto) -> str:
    return f"node '{proto.name or proto.op_type}'"


class GraphState(Protocol):
    """What the engine drives, for the main graph, a subgraph or a function body alike: a
    view to rewrite, domains to import, types to refresh after folding, nested graphs."""

    view: GraphView
    opsets: dict[str, int]
    source: ModelProto  # the model as read (its functions, metadata, IR version)

    def require_domain(self, domain: str, version: int = 1) -> None: ...

    def refresh_types(self, if_incomplete_known: bool = False) -> int: ...

    def subgraph_states(self) -> Iterator[SubgraphState]: ...


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
        _check_versions(model, self.opsets)
        _check_types(model)
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
                _all_value_names(sub, view.value_names)
        self._validate()
        refine_symbolic_dims(model, view.nodes_in_order(), view.initializers.values(), view.types, view=view)
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
            problem = _tensor_problem(tensor)
            if problem:
                raise ModelError(f"malformed initializer '{tensor.name}': {problem}")
        if view.repeated_node_names:  # onnxruntime refuses such a graph
            raise ModelError(f"malformed graph: two nodes are named '{view.repeated_node_names[0]}'")
        for node_id in view.node_ids():
            _check_node_schema(view, node_id, self.opsets)
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
        nodes = [view.node(n) for n in view.topological_ids(region)]
        produced = {o for n in nodes for o in n.output if o}
        reads = dict.fromkeys(i for n in nodes for i in n.input if i and i not in produced)
        initializers = [view.initializers[r] for r in reads if view.is_initializer(r)]
        inputs = [
            helper.make_value_info(r, view.types[r]) for r in reads if not view.is_initializer(r) and r in view.types
        ]
        light = light_model(self.source, nodes, initializers, inputs, (), (), self.opsets)
        improved = refine_types(view.types, light)
        return improved + refine_symbolic_dims(self.source, nodes, initializers, view.types, inputs, (), self.opsets)

    def subgraph_states(self):
        """A state per subgraph of the main graph's current nodes (nested ones come from
        their parent's state)."""
        yield from _subgraph_states(self, self.view, self.view.live_values())

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
        parts = self.model_parts()
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
    graph.value_info.extend(
        vi for vi in src.value_info if vi.name in live and type_conflict(types.get(vi.name), vi.type, vi.name) is None
    )
    graph.quantization_annotation.extend(qa for qa in src.quantization_annotation if qa.tensor_name in live)
    return graph


class SubgraphState:
    """A subgraph (If branch, Loop/Scan body) being optimized like a graph of its own.

    Values of enclosing graphs are outer sources: rules read them but never delete or
    rename them.  Domains a rewrite adds are imported by the root model."""

    def __init__(self, root: ModelState, graph: GraphProto, outer: set[str]) -> None:
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
        types.update({name: root.view.type_of(name) for name in reads if root.view.type_of(name) is not None})
        try:
            self.view = GraphView(
                graph, root.opsets, types, outer_values=reads, reserved_names=root.view.value_names, hints=hints
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
        yield from _subgraph_states(self.root, self.view, self.outer | self.view.live_values())


class FunctionState:
    """A model-local function's body, optimized like a graph: its inputs are graph inputs,
    its outputs graph outputs (their names kept), its own opset imports apply.  Types are
    unknown here (they depend on the call site), so only rules that need none apply."""

    def __init__(self, root: ModelState, function: FunctionProto) -> None:
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
            self.view = GraphView(graph, self.opsets, {}, reserved_names=_all_value_names(graph, set()))
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
        yield from _subgraph_states(self.root, self.view, self.view.live_values())


def _subgraph_states(root: ModelState, view: GraphView, visible: set[str]):
    for node_id in view.nodes_with_subgraphs():
        for graph in subgraphs_of(view.node(node_id)):
            yield SubgraphState(root, graph, set(visible))


def count_nodes(model: ModelProto) -> int:
    return len(model.graph.node)


def op_histogram(model: ModelProto | Iterable[onnx.NodeProto]) -> dict[str, int]:
    """Nodes per op (``domain.op`` outside the default domain) of a model or of nodes."""
    counts: dict[str, int] = {}
    for node in model.graph.node if isinstance(model, ModelProto) else model:
        key = f"{node.domain}.{node.op_type}" if normalize_domain(node.domain) else node.op_type
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


__all__ = ["FunctionState", "GraphState", "ModelState", "SubgraphState", "count_nodes", "op_histogram", "onnx"]
