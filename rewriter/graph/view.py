"""The graph model: a NetworkX MultiDiGraph over one ONNX graph, updated in place.

One graph node per ONNX node (an int id), plus one source per graph input, initializer and
outer-scope value; one edge per (producer output -> consumer input slot), keyed by the slot.
Values used inside a node's subgraphs (If/Loop bodies reading outer values) are edges too,
keyed ``"implicit:<name>"``, so nothing ever deletes or renames a value a subgraph reads.

Beside the NetworkX graph the view keeps the indexes the matcher needs in O(1): producer
and consumers of each value, nodes by (domain, op type).  Every mutation goes through the
methods here, which keep all of them in sync; nothing is rebuilt per match.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator

import networkx as nx
import numpy as np
from onnx import AttributeProto, GraphProto, NodeProto, TensorProto, TypeProto, numpy_helper

from ..onnx_facts.metadata import set_metadata
from ..onnx_facts.schemas import attribute_value, normalize_domain
from . import types as T
from .proto_pool import ProtoPool
from .symbolic_shapes import is_incomplete
from .type_reading import elem_type_of, shape_of

NodeId = int
_NONE: dict = {}  # read-only empty consumer map
SourceKey = tuple  # ("input" | "init" | "outer", name)


class _FunctionAttribute:
    """An attribute whose value is the calling node's (``ref_attr_name``): unknown here."""

    def __repr__(self) -> str:
        return "<function attribute>"


FUNCTION_ATTRIBUTE = _FunctionAttribute()


_GRAPH_ATTRIBUTES = (AttributeProto.GRAPH, AttributeProto.GRAPHS)


# the standard ops with graph attributes (onnx's schemas, every version)
_CONTROL_FLOW = frozenset({"If", "Loop", "Scan", "SequenceMap"})


def may_have_subgraphs(domain: str, op: str) -> bool:
    """Whether a node of this (normalized) domain and op can hold a graph attribute: the
    standard control-flow ops and any op of another domain.  Asking this first spares
    reading the attributes of every other node."""
    return op in _CONTROL_FLOW or (domain != "" and domain != "ai.onnx.ml")


def has_subgraphs(node: NodeProto) -> bool:
    """Whether the node holds a graph attribute (If, Loop, Scan...): cheaper than asking
    ``subgraphs_of`` for the first one."""
    attributes = node.attribute
    if not attributes:
        return False
    for attr in attributes:
        if attr.type in _GRAPH_ATTRIBUTES:
            return True
    return False


def subgraphs_of(node: NodeProto) -> Iterator[GraphProto]:
    for attr in node.attribute:
        if attr.type == AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == AttributeProto.GRAPHS:
            yield from attr.graphs


def outer_references(graph: GraphProto) -> list[str]:
    """Names a graph (or its nested subgraphs) reads without defining, in first-use order."""
    seen: dict[str, None] = {}

    def walk(g: GraphProto, defined: set[str]) -> None:
        defined = defined | {i.name for i in g.input} | {t.name for t in g.initializer}
        defined |= {t.values.name for t in g.sparse_initializer}
        for inner in g.node:
            defined |= {o for o in inner.output if o}
        for inner in g.node:
            for name in inner.input:
                if name and name not in defined:
                    seen.setdefault(name)
            for sub in subgraphs_of(inner):
                walk(sub, defined)
        for out in g.output:
            if out.name not in defined:
                seen.setdefault(out.name)

    walk(graph, set())
    return list(seen)


def _implicit_inputs(node: NodeProto) -> list[str]:
    """Outer-scope values read inside the node's subgraphs, in first-use order."""
    names: dict[str, None] = {}
    for sub in subgraphs_of(node):
        names.update(dict.fromkeys(outer_references(sub)))
    return list(names)


def _add_edges(graph: nx.MultiDiGraph, edges) -> None:
    """(u, v, key, data) edges between existing nodes, through NetworkX's public API."""
    graph.add_edges_from(edges)


def _remove_edge(graph: nx.MultiDiGraph, u, v, key) -> None:
    """``graph.remove_edge(u, v, key)`` when that edge exists."""
    if graph.has_edge(u, v, key=key):
        graph.remove_edge(u, v, key=key)


def _rename_in_subgraph(graph: GraphProto, old: str, new: str) -> None:
    for inner in graph.node:
        for i, name in enumerate(inner.input):
            if name == old:
                inner.input[i] = new
        for sub in subgraphs_of(inner):
            _rename_in_subgraph(sub, old, new)
    for out in graph.output:
        if out.name == old:
            out.name = new


class GraphView:
    """An ONNX graph as a mutable, indexed NetworkX graph (see the module docstring)."""

    def __init__(
        self,
        graph: GraphProto,
        opsets: dict[str, int],
        types: dict[str, TypeProto] | None = None,
        outer_values: Iterable[str] = (),
        reserved_names: Iterable[str] = (),
        constants=None,
        pool: ProtoPool | None = None,
        hints: dict[str, TypeProto] | None = None,
    ) -> None:
        """``constants`` (a ``load_constants.LoadedConstants``) names nodes to load as
        initializers or aliases instead.  ``pool``: where the view makes its node copies
        and types (see proto_pool.py; by default a pool of its own).  ``types`` are known
        types; ``hints`` what the model declares (value_info, outputs): used only where
        inference finds nothing or leaves dims open (see ``type_of``)."""
        self.nx = nx.MultiDiGraph()
        self.protos = pool if pool is not None else ProtoPool()
        self.opsets = {normalize_domain(d): v for d, v in opsets.items()}
        self._nodes: dict[NodeId, NodeProto] = {}
        self._order: dict[NodeId, tuple[int, int]] = {}
        self._producer: dict[str, tuple[NodeId | SourceKey, int]] = {}
        self._consumers: dict[str, dict[tuple[NodeId, int | str], None]] = {}
        self._by_op: dict[tuple[str, str], dict[NodeId, None]] = {}
        self._keys: dict[NodeId, tuple[str, str]] = {}  # node -> (domain, op type)
        # node -> its input / output names: reading a protobuf repeated string field builds
        # every str again (about 0.5 us each); the engine reads them far more than it edits
        self._inputs: dict[NodeId, tuple[str, ...]] = {}
        self._outputs: dict[NodeId, tuple[str, ...]] = {}
        self._with_subgraphs: dict[NodeId, None] = {}  # If/Loop/Scan... nodes, in order added
        self._implicit: dict[NodeId, list[str]] = {}
        self._ids = itertools.count()
        self._tie = itertools.count(1)
        self._const_cache: dict[str, np.ndarray] = {}
        self._shapes: dict[str, tuple] = {}  # value -> (its TypeProto, dims read from it)
        self._incomplete: dict[str, tuple] = {}  # value -> (its TypeProto, is_incomplete)
        self._attributes: dict[NodeId, dict[str, object]] = {}  # node -> attribute values
        self._metadata: dict[NodeId, dict[str, str]] = {}  # node -> metadata_props, as read
        self.pass_caches: dict[str, dict] = {}  # built-in passes' memos, as long as the view lives
        self.types: dict[str, TypeProto] = dict(types or {})
        self.hints: dict[str, TypeProto] = dict(hints or {})
        self._inferred_nodes: set[NodeId] = set()
        # nodes created or whose inputs changed (new producer, new value), in order; passes
        # that scan the whole graph keep a position in it and later look only at what is new
        self.changes: list[NodeId] = []
        self._input_total = 0  # inputs of all nodes (with nodes: how big the graph is)
        self.initializer_bytes = 0  # data of the initializers, from their headers
        self._pending_edges: list | None = []  # while building: added to nx in one call
        self._pending_nodes: list | None = []
        # every node read only values produced before it, as loaded (then no cycle either)
        self.loaded_in_order = True

        self.graph_inputs = list(graph.input)
        self.graph_outputs = list(graph.output)
        self.input_names = {vi.name for vi in self.graph_inputs}
        self.output_names = {vi.name for vi in self.graph_outputs}
        skipped, aliases = (constants.skipped, constants.aliases) if constants else ((), {})
        dropped = constants.dropped if constants else ()
        self.initializers: dict[str, TensorProto] = {t.name: t for t in graph.initializer if t.name not in dropped}
        for tensor in constants.initializers if constants else ():
            self.initializers[tensor.name] = tensor
        self.initializer_bytes = sum(T.tensor_nbytes(t) for t in self.initializers.values())
        self.node_names: set[str] = set()
        self.repeated_node_names: list[str] = []  # names two loaded nodes share
        self._suffixes: dict[str, int] = {}  # base -> the last N of a fresh name base_N
        # a set passed in is shared (subgraph views keep fresh names unique model-wide)
        self.value_names: set[str] = reserved_names if isinstance(reserved_names, set) else set(reserved_names)
        self.value_names.update(dropped)  # (never reused for fresh values)

        for name in outer_values:
            self._add_source(("outer", name))
        # sparse initializers are read as they are, like outer values: never folded,
        # renamed or removed (write_graph keeps them)
        for sparse in graph.sparse_initializer:
            name = sparse.values.name
            if name and name not in self._producer:
                self._add_source(("outer", name))
                if name not in self.types:
                    self.types[name] = self.protos.tensor_type(sparse.values.data_type, sparse.dims)
        for vi in self.graph_inputs:
            self._add_source(("input", vi.name))
        for name in self.initializers:
            if name not in self.input_names:
                self._add_source(("init", name))
        for tensor in self.initializers.values():
            if tensor.name not in self.types:
                self.types[tensor.name] = T.tensor_type(tensor, self.protos)
        copy_node = self.protos.copy_node
        for index, proto in enumerate(graph.node):
            if index in skipped:
                self.value_names.update(proto.output)  # (never reused for fresh values)
                continue
            copy = copy_node(proto)
            inputs = list(copy.input)
            if aliases:
                for slot, name in enumerate(inputs):
                    if name in aliases:
                        inputs[slot] = copy.input[slot] = aliases[name]
            self.add_node(copy, (index, 0), (inputs, copy.output))
        self.nx.add_nodes_from(self._pending_nodes)
        _add_edges(self.nx, self._pending_edges)
        self._pending_edges = self._pending_nodes = None
        self.changes.clear()

    # ------------------------------------------------------------------ building blocks
    def _add_source(self, key: SourceKey) -> None:
        if self._pending_nodes is not None:
            self._pending_nodes.append(key)
        else:
            self.nx.add_node(key)
        self._producer[key[1]] = (key, 0)
        self._consumers.setdefault(key[1], {})
        self.value_names.add(key[1])

    def _connect_input(self, node_id: NodeId, slot: int | str, value: str) -> None:
        self._consumers.setdefault(value, {})[(node_id, slot)] = None
        producer = self._producer.get(value)
        if producer is not None:
            self._add_edge(producer[0], node_id, slot, value, producer[1])
            if producer[0] == node_id:
                self.loaded_in_order = False  # reads itself: a cycle
        elif self._pending_nodes is not None:
            self.loaded_in_order = False  # produced later (or never: validation says so)

    def _add_edge(self, source, target: NodeId, slot: int | str, value: str, out_slot: int) -> None:
        if self._pending_edges is not None:
            self._pending_edges.append((source, target, slot, {"value": value, "out_slot": out_slot}))
        else:
            _add_edges(self.nx, ((source, target, slot, {"value": value, "out_slot": out_slot}),))

    def _disconnect_input(self, node_id: NodeId, slot: int | str, value: str) -> None:
        consumers = self._consumers.get(value)
        if consumers is not None:
            consumers.pop((node_id, slot), None)
        producer = self._producer.get(value)
        if producer is not None:
            _remove_edge(self.nx, producer[0], node_id, slot)

    # ------------------------------------------------------------------------ mutation
    def add_node(
        self,
        proto: NodeProto,
        order: tuple[int, int] | None = None,
        names: tuple[Iterable[str], Iterable[str]] | None = None,
    ) -> NodeId:
        """Insert a node; its inputs connect to their producers, its outputs to consumers.
        ``names``: the proto's (inputs, outputs) when the caller has them (spares reading
        them back)."""
        node_id = next(self._ids)
        self._nodes[node_id] = proto
        self._order[node_id] = order if order is not None else (1 << 62, next(self._tie))
        if self._pending_nodes is not None:
            self._pending_nodes.append(node_id)
        else:
            self.nx.add_node(node_id)
        key = self._keys[node_id] = (normalize_domain(proto.domain), proto.op_type)
        self._by_op.setdefault(key, {})[node_id] = None
        name = proto.name
        if name:
            if self._pending_nodes is not None and name in self.node_names:
                self.repeated_node_names.append(name)
            self.node_names.add(name)
        given_inputs, given_outputs = (proto.input, proto.output) if names is None else names
        outputs = self._outputs[node_id] = tuple(given_outputs)
        inputs = self._inputs[node_id] = tuple(given_inputs)
        self._input_total += len(inputs)
        for slot, out in enumerate(outputs):
            if not out:
                continue
            if out in self._producer:
                raise ValueError(f"value '{out}' has two producers")
            self._producer[out] = (node_id, slot)
            self.value_names.add(out)
            for consumer, in_slot in self._consumers.setdefault(out, {}):
                self._add_edge(node_id, consumer, in_slot, out, slot)
                self.changes.append(consumer)
        for slot, name in enumerate(inputs):
            if name:
                self._connect_input(node_id, slot, name)
        implicit = []
        if may_have_subgraphs(*key) and has_subgraphs(proto):
            self._with_subgraphs[node_id] = None
            implicit = _implicit_inputs(proto)
        if implicit:
            self._implicit[node_id] = implicit
            for name in implicit:
                self._connect_input(node_id, f"implicit:{name}", name)
        self.changes.append(node_id)
        return node_id

    def remove_node(self, node_id: NodeId) -> NodeProto:
        """Delete a node; values it produced lose their producer (their consumers remain)."""
        proto = self._nodes.pop(node_id)
        consumers = self._consumers
        # only the index here: removing the nx node below removes its edges too
        inputs = self._inputs.pop(node_id)
        self._input_total -= len(inputs)
        for slot, name in enumerate(inputs):
            if name and name in consumers:
                consumers[name].pop((node_id, slot), None)
        for name in self._implicit.pop(node_id, []):
            if name in consumers:
                consumers[name].pop((node_id, f"implicit:{name}"), None)
        for out in self._outputs.pop(node_id):
            if out and self._producer.get(out, (None,))[0] == node_id:
                del self._producer[out]
                self._const_cache.pop(out, None)
                if not self._consumers.get(out):
                    self._consumers.pop(out, None)
        self.nx.remove_node(node_id)
        self._by_op[self._keys.pop(node_id)].pop(node_id, None)
        del self._order[node_id]
        self._with_subgraphs.pop(node_id, None)
        self._attributes.pop(node_id, None)
        self._metadata.pop(node_id, None)
        self._inferred_nodes.discard(node_id)
        return proto

    def set_input(self, node_id: NodeId, slot: int, value: str) -> None:
        """Make input ``slot`` of a node read ``value`` instead."""
        proto = self._nodes[node_id]
        inputs = self._inputs[node_id]
        old = inputs[slot]
        if old:
            self._disconnect_input(node_id, slot, old)
        proto.input[slot] = value
        self._inputs[node_id] = (*inputs[:slot], value, *inputs[slot + 1 :])
        if value:
            self._connect_input(node_id, slot, value)
        self.changes.append(node_id)

    def replace_uses(self, old: str, new: str) -> list[NodeId]:
        """Every consumer of ``old`` reads ``new`` instead (subgraph uses included).

        Graph outputs are not consumers and are left alone.  Returns the rewired nodes."""
        touched: list[NodeId] = []
        for node_id, slot in list(self._consumers.get(old, {})):
            touched.append(node_id)
            if isinstance(slot, int):
                self.set_input(node_id, slot, new)
            else:
                proto = self._nodes[node_id]
                self._disconnect_input(node_id, slot, old)
                for sub in subgraphs_of(proto):
                    _rename_in_subgraph(sub, old, new)
                implicit = self._implicit[node_id]
                implicit[implicit.index(old)] = new
                self._connect_input(node_id, f"implicit:{new}", new)
                self.changes.append(node_id)
        return touched

    def rename_value(self, old: str, new: str) -> list[NodeId]:
        """Give value ``old`` the free name ``new`` everywhere (producer and consumers)."""
        if new in self._producer:
            raise ValueError(f"value '{new}' already exists")
        producer, slot = self._producer[old]
        if isinstance(producer, int):
            proto = self._nodes[producer]
            # re-register the producer under the new name
            out_edges = list(self.nx.out_edges(producer, keys=True, data=True))
            del self._producer[old]
            proto.output[slot] = new
            outputs = self._outputs[producer]
            self._outputs[producer] = (*outputs[:slot], new, *outputs[slot + 1 :])
            self._producer[new] = (producer, slot)
            for _, consumer, key, data in out_edges:
                if data["value"] == old:
                    _remove_edge(self.nx, producer, consumer, key)
        elif producer[0] == "init":
            # initializers are shared with the caller's model: copy
            tensor = self.protos.copy_tensor(self.initializers.pop(old))
            tensor.name = new
            self.initializers[new] = tensor
            self.nx.remove_node(producer)
            del self._producer[old]
            self._add_source(("init", new))
        else:
            raise ValueError(f"cannot rename {producer[0]} value '{old}'")
        if old in self.types:
            self.types[new] = self.types.pop(old)
        if old in self._const_cache:
            self._const_cache[new] = self._const_cache.pop(old)
        self.value_names.add(new)
        # nodes that already read ``new`` (its producer was just removed) connect to this one
        source, out_slot = self._producer[new]
        readers = list(self._consumers.setdefault(new, {}))
        for consumer, in_slot in readers:
            self._add_edge(source, consumer, in_slot, new, out_slot)
            self.changes.append(consumer)
        touched = [c for c, _ in readers] + self.replace_uses(old, new)
        self._consumers.pop(old, None)
        return touched

    def add_initializer(self, tensor: TensorProto) -> None:
        if tensor.name in self._producer:
            raise ValueError(f"value '{tensor.name}' already exists")
        self.initializers[tensor.name] = tensor
        self.initializer_bytes += T.tensor_nbytes(tensor)
        self.types[tensor.name] = T.tensor_type(tensor, self.protos)
        self._add_source(("init", tensor.name))
        for consumer, in_slot in self._consumers[tensor.name]:
            self._add_edge(("init", tensor.name), consumer, in_slot, tensor.name, 0)
            self.changes.append(consumer)

    def remove_initializer(self, name: str) -> None:
        self.initializer_bytes -= T.tensor_nbytes(self.initializers.pop(name))
        self.nx.remove_node(("init", name))
        del self._producer[name]
        self._const_cache.pop(name, None)
        if not self._consumers.get(name):
            self._consumers.pop(name, None)

    def remove_dead(self, candidates: list[str], touched: set[NodeId] | None = None) -> int:
        """Remove initializers and nodes that, starting from ``candidates``, feed nothing.

        Producers of the removed nodes' inputs are added to ``touched``.  Returns how many
        nodes were removed."""
        removed = 0
        candidates = list(candidates)
        while candidates:
            value = candidates.pop()
            if not self.has_value(value) or self.consumer_count(value) or self.is_graph_output(value):
                continue
            if self.is_initializer(value):
                self.remove_initializer(value)
                continue
            producer = self.producer(value)
            if producer is None:
                continue
            if any(o and (self.consumer_count(o) or self.is_graph_output(o)) for o in self._outputs[producer]):
                continue
            inputs = [i for i in self._inputs[producer] if i] + self._implicit.get(producer, [])
            self.remove_node(producer)
            removed += 1
            candidates.extend(inputs)
            if touched is not None:
                touched.update(p for p in map(self.producer, inputs) if p is not None)
        return removed

    # ------------------------------------------------------------------------ queries
    def node(self, node_id: NodeId) -> NodeProto:
        return self._nodes[node_id]

    def inputs(self, node_id: NodeId) -> tuple[str, ...]:
        """The node's input names (as ``node(id).input``, "" for an absent one), cached."""
        return self._inputs[node_id]

    def outputs(self, node_id: NodeId) -> tuple[str, ...]:
        """The node's output names (as ``node(id).output``), cached."""
        return self._outputs[node_id]

    def has_node(self, node_id: NodeId) -> bool:
        return node_id in self._nodes

    def node_ids(self) -> list[NodeId]:
        return list(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def size_units(self) -> int:
        """Nodes plus their inputs: what the graph's memory grows with."""
        return len(self._nodes) + self._input_total

    def nodes_with_subgraphs(self) -> list[NodeId]:
        return list(self._with_subgraphs)

    def has_subgraphs(self, node_id: NodeId) -> bool:
        return node_id in self._with_subgraphs

    def nodes_by_op(self, domain: str, op: str) -> list[NodeId]:
        return list(self._by_op.get((normalize_domain(domain), op), ()))

    def order_of(self, node_id: NodeId) -> tuple[int, int]:
        return self._order[node_id]

    def producer(self, value: str) -> NodeId | None:
        """The node producing ``value`` (None for inputs, initializers, outer values)."""
        entry = self._producer.get(value)
        if entry is None or not isinstance(entry[0], int):
            return None
        return entry[0]

    def producer_node(self, value: str) -> NodeProto | None:
        """The NodeProto producing ``value`` (None for sources)."""
        node_id = self.producer(value)
        return None if node_id is None else self._nodes[node_id]

    def node_key(self, node_id: NodeId) -> tuple[str, str]:
        """(domain, op type) of a node, the key rules are dispatched on."""
        return self._keys[node_id]

    def producer_key(self, value: str) -> tuple[str, str] | None:
        """(domain, op type) of the node producing ``value``; None for sources."""
        entry = self._producer.get(value)
        if entry is None or type(entry[0]) is not int:
            return None
        return self._keys[entry[0]]

    def producer_slot(self, value: str) -> int:
        return self._producer[value][1]

    def has_value(self, value: str) -> bool:
        return value in self._producer

    def consumers(self, value: str) -> list[tuple[NodeId, int | str]]:
        """(node, input slot) pairs reading ``value``; subgraph reads have a str slot."""
        return list(self._consumers.get(value, ()))

    def consumer_slots(self, value: str):
        """Like ``consumers`` but a live view (no copy): for reading, never while mutating."""
        return self._consumers.get(value, _NONE)

    def consumer_count(self, value: str) -> int:
        return len(self._consumers.get(value, ()))

    def is_graph_output(self, value: str) -> bool:
        return value in self.output_names

    def is_graph_input(self, value: str) -> bool:
        return value in self.input_names

    def is_outer(self, value: str) -> bool:
        """A value the graph reads but does not own: an enclosing graph's, or a sparse
        initializer."""
        entry = self._producer.get(value)
        return entry is not None and entry[0] == ("outer", value)

    def is_initializer(self, value: str) -> bool:
        entry = self._producer.get(value)
        return entry is not None and entry[0] == ("init", value)

    def is_constant(self, value: str) -> bool:
        entry = self._producer.get(value)
        if entry is None:
            return False
        source = entry[0]
        if type(source) is int:
            return self._keys[source] == ("", "Constant")
        return source[0] == "init"

    def constant(self, value: str) -> np.ndarray | None:
        """Contents of a constant value (cached), or None when it is not constant."""
        cached = self._const_cache.get(value)
        if cached is not None:
            return cached
        if not self.is_constant(value):
            return None
        source = self._producer[value][0]
        try:
            if isinstance(source, int):
                array = constant_node_value(self._nodes[source])
            else:
                array = numpy_helper.to_array(self.initializers[value])
        except Exception:  # external data not loaded, sparse, unsupported type...
            return None
        if array is not None:
            array.setflags(write=False)
            self._const_cache[value] = array
        return array

    def type_of(self, value: str) -> TypeProto | None:
        """A value's type: known, else inferred from its producer's inputs (lazily, once
        per node), else what the model declared for it (``hints``: value_info that inference
        could not check)."""
        known = self.types.get(value)
        if known is not None:
            return known
        producer = self.producer(value)
        if producer is not None and producer not in self._inferred_nodes:
            self._inferred_nodes.add(producer)
            proto = self._nodes[producer]
            input_types = {}
            for name in self._inputs[producer]:
                if name:
                    t = self.type_of(name)
                    if t is not None:
                        input_types[name] = t
            hints = self.hints
            for name, t in T.infer_node_types(proto, input_types, self.opsets).items():
                self.types.setdefault(name, T.merged_type(t, hints.get(name)) if hints else t)
            known = self.types.get(value)
        if known is None and value in self.hints and self._producer.get(value) is not None:
            known = self.types[value] = self.hints[value]
        return known

    def is_incomplete(self, value: str) -> bool:
        """Whether the type known now (no inference asked) lacks a shape or names a dim
        nobody named (see symbolic_shapes.is_incomplete); cached per type."""
        type_proto = self.types.get(value)
        cached = self._incomplete.get(value)
        if cached is not None and cached[0] is type_proto:
            return cached[1]
        result = is_incomplete(type_proto)
        self._incomplete[value] = (type_proto, result)
        return result

    def elem_type(self, value: str) -> int | None:
        return elem_type_of(self.type_of(value))

    def shape(self, value: str) -> list[int | str | None] | None:
        type_proto = self.type_of(value)
        cached = self._shapes.get(value)
        if cached is not None and cached[0] is type_proto:  # types are replaced, never edited
            shape = cached[1]
        else:
            shape = shape_of(type_proto)
            self._shapes[value] = (type_proto, shape)
        if shape is None:
            if self.is_constant(value):
                array = self.constant(value)
                return None if array is None else list(array.shape)
            return None
        return list(shape)

    def opset(self, domain: str) -> int | None:
        return self.opsets.get(normalize_domain(domain))

    def op_type(self, value: str) -> str | None:
        """The op type of the node producing ``value`` (None for inputs and initializers)."""
        producer = self.producer(value)
        return None if producer is None else self._keys[producer][1]

    def attribute(self, node_id: NodeId, name: str) -> object:
        """A node attribute as a Python value (None when absent; no schema default;
        ``FUNCTION_ATTRIBUTE`` inside a function body when it names the caller's attribute)."""
        values = self._attributes.get(node_id)
        if values is None:
            values = self.attributes(node_id)
        return values.get(name)

    def attributes(self, node_id: NodeId) -> dict[str, object]:
        """Every attribute the node sets, name -> Python value (as ``attribute``); read once
        per node: several rules ask for the same attributes.  Not to be modified."""
        values = self._attributes.get(node_id)
        if values is None:
            values = self._attributes[node_id] = {
                attr.name: FUNCTION_ATTRIBUTE if attr.ref_attr_name else attribute_value(attr)
                for attr in self._nodes[node_id].attribute
            }
        return values

    def metadata(self, node_id: NodeId) -> dict[str, str]:
        """The node's ``metadata_props`` as a dict (read once; the first entry of a key
        wins).  Edit them with ``set_metadata`` (or call ``metadata_changed`` after editing
        the proto)."""
        values = self._metadata.get(node_id)
        if values is None:
            values = {}
            for entry in self._nodes[node_id].metadata_props:
                values.setdefault(entry.key, entry.value)
            self._metadata[node_id] = values
        return values

    def metadata_changed(self, node_id: NodeId) -> None:
        self._metadata.pop(node_id, None)

    def set_metadata(self, node_id: NodeId, key: str, value: str | None) -> None:
        """Set (None: remove) one metadata entry of a node, in its proto and here."""
        values = self.metadata(node_id)
        if value is not None and key not in values:  # (the usual case: one new entry)
            self._nodes[node_id].metadata_props.add(key=key, value=value)
        else:
            set_metadata(self._nodes[node_id], key, value)
        if value is None:
            values.pop(key, None)
        else:
            values[key] = value

    def upstream(self, node_id: NodeId) -> Iterator[NodeId]:
        """Producers of the node's inputs (subgraph reads included)."""
        for name in itertools.chain(self._inputs[node_id], self._implicit.get(node_id, ())):
            entry = self._producer.get(name)
            if entry is not None and type(entry[0]) is int:
                yield entry[0]

    def downstream(self, node_id: NodeId) -> Iterator[NodeId]:
        """Consumers of the node's outputs (subgraph reads included)."""
        consumers = self._consumers
        for name in self._outputs[node_id]:
            for consumer, _ in consumers.get(name, ()):
                yield consumer

    def siblings(self, node_id: NodeId) -> Iterator[NodeId]:
        """Other consumers of the node's inputs."""
        consumers = self._consumers
        for name in itertools.chain(self._inputs[node_id], self._implicit.get(node_id, ())):
            for consumer, _ in consumers.get(name, ()):
                if consumer != node_id:
                    yield consumer

    # ------------------------------------------------------------------------- names
    def fresh_value_name(self, base: str) -> str:
        return self._fresh(base, self.value_names)

    def fresh_node_name(self, base: str) -> str:
        return self._fresh(base, self.node_names)

    def _fresh(self, base: str, taken: set[str]) -> str:
        """``base``, else ``base_N`` with the first free N counting from the last one given
        for that base (a rule's constants all start from one base: probing from 1 each time
        made naming quadratic in their number).  Adds the name to ``taken``."""
        name = base
        if name in taken:
            number = self._suffixes.get(base, 0)
            while name in taken:
                number += 1
                name = f"{base}_{number}"
            self._suffixes[base] = number
        taken.add(name)
        return name

    # -------------------------------------------------------------------- write back
    def topological_ids(self, subset: Iterable[NodeId] | None = None) -> list[NodeId]:
        """Node ids (all, or those of ``subset``) in a topological order that keeps the
        original order where it can (Kahn's algorithm, always taking the earliest ready
        node; O(E + N log N))."""
        order, producer, implicit, nodes = self._order, self._producer, self._implicit, self._inputs
        members = nodes if subset is None else dict.fromkeys(n for n in subset if n in nodes)
        by_order = sorted(members, key=order.__getitem__)
        if self._is_topological(by_order, members):
            return by_order  # the usual case: rewrites place new nodes at their root
        waiting: dict[NodeId, int] = {}
        successors: dict[NodeId, list[NodeId]] = {}
        for node_id in members:
            preds = set()
            for name in itertools.chain(nodes[node_id], implicit.get(node_id, ())):
                entry = producer.get(name)
                if entry is not None and type(entry[0]) is int and entry[0] in members:
                    preds.add(entry[0])
            waiting[node_id] = len(preds)
            for pred in preds:
                successors.setdefault(pred, []).append(node_id)
        ready = [(order[n], n) for n, count in waiting.items() if count == 0]
        heapq.heapify(ready)
        result: list[NodeId] = []
        while ready:
            node_id = heapq.heappop(ready)[1]
            result.append(node_id)
            for consumer in successors.get(node_id, ()):
                waiting[consumer] -= 1
                if not waiting[consumer]:
                    heapq.heappush(ready, (order[consumer], consumer))
        if len(result) != len(members):
            raise ValueError("the graph has a cycle")
        return result

    def _is_topological(self, ids: list[NodeId], members) -> bool:
        """Whether every node of ``ids`` comes after the producers of its inputs (among
        ``members``)."""
        producer, implicit, inputs = self._producer, self._implicit, self._inputs
        placed: set[NodeId] = set()
        for node_id in ids:
            names = inputs[node_id]
            if node_id in implicit:
                names = [*names, *implicit[node_id]]
            for name in names:
                entry = producer.get(name)
                if entry is not None:
                    source = entry[0]
                    if type(source) is int and source not in placed and source in members:
                        return False
            placed.add(node_id)
        return True

    def check_consistency(self) -> None:
        """Engine self-check (tests run it after every level): the NetworkX graph and the
        indexes describe exactly the edges the node protos define.  Raises AssertionError."""
        expected_edges, expected_readers = set(), {}
        for node_id, proto in self._nodes.items():
            reads = [(slot, name) for slot, name in enumerate(proto.input) if name]
            reads += [(f"implicit:{name}", name) for name in self._implicit.get(node_id, ())]
            for slot, name in reads:
                expected_readers.setdefault(name, set()).add((node_id, slot))
                entry = self._producer.get(name)
                if entry is not None:
                    expected_edges.add((entry[0], node_id, slot, name, entry[1]))
        actual_edges = {(u, v, k, d["value"], d["out_slot"]) for u, v, k, d in self.nx.edges(keys=True, data=True)}
        assert actual_edges == expected_edges, (
            f"nx edges out of sync: missing {sorted(map(str, expected_edges - actual_edges))[:3]}, "
            f"extra {sorted(map(str, actual_edges - expected_edges))[:3]}"
        )
        sources = {entry[0] for entry in self._producer.values() if not isinstance(entry[0], int)}
        assert set(self.nx.nodes) == set(self._nodes) | sources, "nx nodes out of sync"
        actual_readers = {name: set(readers) for name, readers in self._consumers.items() if readers}
        assert actual_readers == expected_readers, "consumer index out of sync"
        for node_id, proto in self._nodes.items():
            assert self._keys[node_id] == (normalize_domain(proto.domain), proto.op_type)
            assert self._inputs[node_id] == tuple(proto.input), f"inputs of node {node_id}"
            assert self._outputs[node_id] == tuple(proto.output), f"outputs of node {node_id}"
            if node_id in self._metadata:
                assert self._metadata[node_id] == {e.key: e.value for e in reversed(proto.metadata_props)}, (
                    f"metadata of node {node_id}"
                )
            assert node_id in self._by_op[self._keys[node_id]]
            for slot, out in enumerate(proto.output):
                assert not out or self._producer.get(out) == (node_id, slot), f"producer of '{out}'"

    def changed_since(self, position: int) -> list[NodeId]:
        """Live nodes recorded in ``changes`` from ``position`` on, each once, in order."""
        return [n for n in dict.fromkeys(self.changes[position:]) if n in self._nodes]

    def nodes_in_order(self) -> list[NodeProto]:
        """The node protos in the order they were added (as loaded, then new ones)."""
        return list(self._nodes.values())

    def topological_nodes(self) -> list[NodeProto]:
        return [self._nodes[n] for n in self.topological_ids()]

    def constant_values(self) -> list[str]:
        """Initializers (not graph inputs) and outputs of Constant nodes."""
        return [name for name in self.initializers if self.is_initializer(name)] + [
            self._outputs[n][0] for n in self._by_op.get(("", "Constant"), ()) if self._outputs[n]
        ]

    def live_values(self) -> set[str]:
        return set(self._producer)


def constant_node_value(proto: NodeProto) -> np.ndarray | None:
    """A Constant node's value as numbers (None for strings and sparse values)."""
    for attr in proto.attribute:
        if attr.name == "value":
            return numpy_helper.to_array(attr.t)
        if attr.name == "value_float":
            return np.asarray(attr.f, dtype=np.float32)
        if attr.name == "value_floats":
            return np.asarray(list(attr.floats), dtype=np.float32)
        if attr.name == "value_int":
            return np.asarray(attr.i, dtype=np.int64)
        if attr.name == "value_ints":
            return np.asarray(list(attr.ints), dtype=np.int64)
    return None  # string / sparse constants are not folded or matched as numbers
