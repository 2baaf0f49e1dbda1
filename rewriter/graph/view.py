"""The graph model: one ONNX graph as a NetworkX graph (topology.py) plus what the matcher
asks about its values and nodes, read lazily and remembered.

``GraphView`` adds to the topology the graph's inputs, outputs and initializers, value
types (known, inferred node by node on demand, or declared), constant contents, attribute
and metadata values, and fresh names.  Every mutation goes through the methods here or in
topology.py, which keep the caches in step with the graph.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from onnx import GraphProto, NodeProto, TensorProto, TypeProto, numpy_helper

from ..expr.dim_algebra import without_atoms
from ..onnx_facts.metadata import set_metadata
from ..onnx_facts.schemas import attribute_value, normalize_domain
from . import types as T
from .names import FreshNames
from .proto_pool import ProtoPool
from .symbolic_shapes import broadcast_output_type, is_incomplete, settled_type
from .topology import NodeId, SourceKey, Topology
from .type_reading import elem_type_of, shape_of

__all__ = ["FUNCTION_ATTRIBUTE", "GraphView", "NodeId", "SourceKey", "constant_node_value"]


class _FunctionAttribute:
    """An attribute whose value is the calling node's (``ref_attr_name``): unknown here."""

    def __repr__(self) -> str:
        return "<function attribute>"


FUNCTION_ATTRIBUTE = _FunctionAttribute()


class GraphView(Topology):
    """An ONNX graph as a mutable NetworkX graph with lazily read facts (see the module
    docstring)."""

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
        outer_constants: dict[str, TensorProto] | None = None,
    ) -> None:
        """``constants`` (a ``loaded_constants.LoadedConstants``) names nodes to load as
        initializers or aliases instead.  ``pool``: where the view makes its node copies
        and types (see proto_pool.py; by default a pool of its own).  ``types`` are known
        types; ``hints`` what the model declares (value_info, outputs): used only where
        inference finds nothing or leaves dims open (see ``type_of``).  ``outer_constants``:
        the initializers of enclosing graphs among ``outer_values`` (a merged decoder's
        weights, which both its branches read): constants to the rules, read but never
        deleted, renamed or copied into this graph."""
        super().__init__(FreshNames(reserved_names))
        self.protos = pool if pool is not None else ProtoPool()
        self.opsets = {normalize_domain(d): v for d, v in opsets.items()}
        self._const_cache: dict[str, np.ndarray] = {}
        self._shapes: dict[str, tuple] = {}  # value -> (its TypeProto, dims read from it)
        self._incomplete: dict[str, tuple] = {}  # value -> (its TypeProto, is_incomplete)
        self._attributes: dict[NodeId, dict[str, object]] = {}  # node -> attribute values
        self._metadata: dict[NodeId, dict[str, str]] = {}  # node -> metadata_props, as read
        self.pass_caches: dict[str, dict] = {}  # built-in passes' memos, as long as the view lives
        # values widened from a narrower float type (float16 the CPU computes in float32,
        # partition/float16.py) -> that type: literals still match such constants with its
        # tolerance, and `~` attributes of the nodes reading them (match/matcher.py)
        self.widened: dict[str, int] = {}
        # Max(0, d) atoms of dims that are 0 wherever the model runs (its broadcasts bound
        # them: symbolic_shapes.broadcast_bounds); shape() and dims() read them as 0
        self.vanishing: frozenset[str] = frozenset()
        # sums of dims the model names otherwise (symbolic_shapes.dim_aliases: a cache's
        # past + new is its total_sequence_length): lazily inferred types use the name
        self.dim_aliases: dict[str, str] = {}
        self.types: dict[str, TypeProto] = dict(types or {})
        self.hints: dict[str, TypeProto] = dict(hints or {})
        self._inferred_nodes: set[NodeId] = set()
        self.outer_constants: dict[str, TensorProto] = dict(outer_constants or {})

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
        self.value_names = self.names.values
        self.node_names = self.names.nodes
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
        self._load(self._copies(graph, skipped, aliases))
        self.changes.clear()

    def _copies(self, graph: GraphProto, skipped, aliases: dict[str, str]):
        """(node copy, load order, input names) of the nodes to load, aliases applied."""
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
            yield copy, (index, 0), inputs

    # ------------------------------------------------------------------------ mutation
    def _forget(self, node_id: NodeId, attrs: dict) -> None:
        """What is remembered about a node being removed (see Topology.remove_nodes)."""
        for out in attrs["outputs"]:
            self._const_cache.pop(out, None)
        self._attributes.pop(node_id, None)
        self._metadata.pop(node_id, None)
        self._inferred_nodes.discard(node_id)

    def rename_value(self, old: str, new: str) -> list[NodeId]:
        """Give value ``old`` the free name ``new`` everywhere (producer and readers)."""
        if new in self._producer:
            raise ValueError(f"value '{new}' already exists")
        producer, slot = self._producer[old]
        readers = self.consumers(old)
        if isinstance(producer, int):
            attrs = self._nodes[producer]
            for consumer, in_slot in readers:  # they read ``old`` until replace_uses below
                self.nx.remove_edge(producer, consumer, key=in_slot)
            del self._producer[old]
            attrs["proto"].output[slot] = new
            outputs = attrs["outputs"]
            attrs["outputs"] = (*outputs[:slot], new, *outputs[slot + 1 :])
            self._producer[new] = (producer, slot)
            self.value_names.add(new)
            for consumer, in_slot in readers:
                self.nx.add_edge(("missing", old), consumer, key=in_slot, value=old, out_slot=0)
            self._adopt_readers(new, producer, slot)  # nodes that already read ``new``
        elif producer[0] == "init":
            # initializers are shared with the caller's model: copy
            tensor = self.protos.copy_tensor(self.initializers.pop(old))
            tensor.name = new
            self.initializers[new] = tensor
            self._remove_source(producer)
            self._add_source(("init", new))
        else:
            raise ValueError(f"cannot rename {producer[0]} value '{old}'")
        if old in self.types:
            self.types[new] = self.types.pop(old)
        if old in self._const_cache:
            self._const_cache[new] = self._const_cache.pop(old)
        waiting = [c for c, _ in self.consumers(new)]
        return waiting + self.replace_uses(old, new)

    def add_initializer(self, tensor: TensorProto) -> None:
        if tensor.name in self._producer:
            raise ValueError(f"value '{tensor.name}' already exists")
        self.initializers[tensor.name] = tensor
        self.initializer_bytes += T.tensor_nbytes(tensor)
        self.types[tensor.name] = T.tensor_type(tensor, self.protos)
        self._add_source(("init", tensor.name))

    def remove_initializer(self, name: str) -> None:
        self.initializer_bytes -= T.tensor_nbytes(self.initializers.pop(name))
        self._remove_source(("init", name))
        self._const_cache.pop(name, None)

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
            attrs = self._nodes[producer]
            if any(o and (self.consumer_count(o) or self.is_graph_output(o)) for o in attrs["outputs"]):
                continue
            inputs = [name for _, name in self._reads(attrs)]
            self.remove_node(producer)
            removed += 1
            candidates.extend(inputs)
            if touched is not None:
                touched.update(p for p in map(self.producer, inputs) if p is not None)
        return removed

    # ------------------------------------------------------------------------- facts
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
        if isinstance(source, int):
            return self._nodes[source]["key"] == ("", "Constant")
        return source[0] == "init" or (source[0] == "outer" and value in self.outer_constants)

    def constant_tensor(self, value: str) -> TensorProto | None:
        """The initializer holding ``value``: this graph's, or an enclosing graph's."""
        tensor = self.initializers.get(value)
        return tensor if tensor is not None else self.outer_constants.get(value)

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
                array = constant_node_value(self._nodes[source]["proto"])
            else:
                tensor = self.constant_tensor(value)
                array = None if tensor is None else numpy_helper.to_array(tensor)
        except Exception:  # external data not loaded, sparse, unsupported type...
            return None
        if array is not None:
            array.setflags(write=False)
            self._const_cache[value] = array
        return array

    def _small_constant(self, value: str) -> TensorProto | None:
        """A constant of at most ``T.SMALL_TENSOR`` elements as a tensor (for inference)."""
        if not self.is_constant(value):
            return None
        tensor = self.constant_tensor(value)
        if tensor is not None and T.tensor_nbytes(tensor) > 8 * T.SMALL_TENSOR:
            return None
        array = self.constant(value)
        if array is None or array.size > T.SMALL_TENSOR:
            return None
        return numpy_helper.from_array(np.asarray(array), value)

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
            attrs = self._nodes[producer]
            input_types, input_data = {}, {}
            for name in attrs["inputs"]:
                if name:
                    t = self.type_of(name)
                    if t is not None:
                        input_types[name] = t
                    # small constants' contents too (a ReduceMean's axes, a Reshape's
                    # target): without them onnx cannot tell the output's shape (whole-graph
                    # inference reads them; the nodes rewrites make are only typed here)
                    data = self._small_constant(name)
                    if data is not None:
                        input_data[name] = data
            hints = self.hints
            inferred = T.infer_node_types(attrs["proto"], input_types, self.opsets, input_data)
            for name, t in inferred.items():
                t = T.merged_type(t, hints.get(name)) if hints else t
                settled = settled_type(t, self.vanishing, self.dim_aliases) if self.vanishing or self.dim_aliases else t
                self.types.setdefault(name, settled)
            self.correct_broadcasts([attrs["proto"]])
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
        if self.vanishing:
            return [without_atoms(d, self.vanishing) if isinstance(d, str) else d for d in shape]
        return list(shape)

    def settled_dim(self, dim: int | str) -> int | str:
        if isinstance(dim, int) or not (self.vanishing or self.dim_aliases):
            return dim
        dim = without_atoms(dim, self.vanishing)
        return self.dim_aliases.get(dim, dim) if isinstance(dim, str) else dim

    def settle_dims(self, vanishing: Iterable[str], values: Iterable[str] | None = None, renamed: bool = False) -> None:
        """Take the ``Max(0, d)`` atoms ``vanishing`` (and those known before) as 0, and the
        sums ``dim_aliases`` names by their names, in the types of ``values`` (all, by
        default or when new atoms came or ``renamed`` says new aliases did, and the
        hints): what the model's runs bound (symbolic_shapes.broadcast_bounds) and what
        it declares.  Inference then sees ``Min(128, seq)`` and seq as the one size they
        are wherever the model runs."""
        before = self.vanishing
        self.vanishing = before | frozenset(vanishing)
        if not self.vanishing and not self.dim_aliases:
            return
        if values is None or self.vanishing != before or renamed:
            for table in (self.types, self.hints):
                for name, known in list(table.items()):
                    table[name] = settled_type(known, self.vanishing, self.dim_aliases)
            return
        for name in values:
            t = self.types.get(name)
            if t is not None:
                self.types[name] = settled_type(t, self.vanishing, self.dim_aliases)

    def output_ancestors(self, nodes: Iterable[NodeId] | None = None) -> list[NodeProto]:
        """The nodes (of ``nodes``, by default all) that a graph output depends on, in
        order: what onnxruntime runs whenever the model runs (it drops the rest), and so
        the only nodes whose broadcasts bound dims."""
        seen: set[NodeId] = set()
        stack = [p for p in (self.producer(name) for name in self.output_names) if p is not None]
        while stack:
            node_id = stack.pop()
            if node_id in seen:
                continue
            seen.add(node_id)
            stack.extend(self.upstream(node_id))
        wanted = seen if nodes is None else seen.intersection(nodes)
        return [self.node(n) for n in self.topological_ids(wanted)]

    def correct_broadcasts(self, nodes: Iterable[NodeProto]) -> list[str]:
        """Give these nodes' elementwise outputs the dims their inputs provably broadcast to
        (symbolic_shapes.broadcast_output_type), where inference named another; returns the
        values corrected (their readers were typed from the old dims)."""
        values = []
        for node in nodes:
            corrected = broadcast_output_type(node, self.types.get)
            if corrected is not None:
                self.types[node.output[0]] = corrected
                values.append(node.output[0])
        return values

    def opset(self, domain: str) -> int | None:
        return self.opsets.get(normalize_domain(domain))

    def op_type(self, value: str) -> str | None:
        """The op type of the node producing ``value`` (None for inputs and initializers)."""
        producer = self.producer(value)
        return None if producer is None else self._nodes[producer]["key"][1]

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
                for attr in self._nodes[node_id]["proto"].attribute
            }
        return values

    def metadata(self, node_id: NodeId) -> dict[str, str]:
        """The node's ``metadata_props`` as a dict (read once; the first entry of a key
        wins).  Edit them with ``set_metadata`` (or call ``metadata_changed`` after editing
        the proto)."""
        values = self._metadata.get(node_id)
        if values is None:
            values = {}
            for entry in self._nodes[node_id]["proto"].metadata_props:
                values.setdefault(entry.key, entry.value)
            self._metadata[node_id] = values
        return values

    def metadata_changed(self, node_id: NodeId) -> None:
        self._metadata.pop(node_id, None)

    def set_metadata(self, node_id: NodeId, key: str, value: str | None) -> None:
        """Set (None: remove) one metadata entry of a node, in its proto and here."""
        values = self.metadata(node_id)
        if value is not None and key not in values:  # (the usual case: one new entry)
            self._nodes[node_id]["proto"].metadata_props.add(key=key, value=value)
        else:
            set_metadata(self._nodes[node_id]["proto"], key, value)
        if value is None:
            values.pop(key, None)
        else:
            values[key] = value

    def check_consistency(self) -> None:
        """The topology's self-check, and the metadata remembered matches the protos."""
        super().check_consistency()
        for node_id, values in self._metadata.items():
            proto = self._nodes[node_id]["proto"]
            assert values == {e.key: e.value for e in reversed(proto.metadata_props)}, f"metadata of node {node_id}"

    # ------------------------------------------------------------------------- names
    def fresh_value_name(self, base: str) -> str:
        return self.names.fresh_value(base)

    def fresh_node_name(self, base: str) -> str:
        return self.names.fresh_node(base)

    def constant_values(self) -> list[str]:
        """Initializers (not graph inputs) and outputs of Constant nodes."""
        constants = self._by_op.get(("", "Constant"), ())
        return [name for name in self.initializers if self.is_initializer(name)] + [
            self._nodes[n]["outputs"][0] for n in constants if self._nodes[n]["outputs"]
        ]


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
