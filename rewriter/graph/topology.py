"""Topology of one ONNX graph: its nodes, who produces each value and who reads it.

Everything is read from and written to the NetworkX graph of ``network.py`` (nodes with
their facts as attributes, one edge per read).  Beside it only the two indexes NetworkX has
no notion of: value name -> (producer, output slot), and (domain, op type) -> nodes, both
needed in O(1) by the matcher's dispatch.

A value whose producer is gone while nodes still read it (mid-rewrite, between removing the
old root and adding its replacement; or a model listed out of order) hangs from a
placeholder source ``("missing", name)``: its readers stay edges like any other and move to
the producer when one is added.  Every mutation goes through the methods here, which keep
graph and indexes in sync; ``check_consistency`` verifies that they are.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

import networkx as nx
from onnx import NodeProto

from ..onnx_facts.schemas import normalize_domain
from .names import FreshNames
from .network import OnnxNetwork
from .subgraphs import has_subgraphs, implicit_inputs, may_have_subgraphs, rename_in_subgraph, subgraphs_of

NodeId = int
SourceKey = tuple  # ("input" | "init" | "outer" | "missing", name)
Slot = int | str  # an input position, or "implicit:<name>" for a read inside a subgraph
_LAST = 1 << 62  # order of nodes created after loading: after every loaded node
_RANK_STEP = 2.0**-20  # a new node without readers yet ranks this far above its highest producer


def _missing(value: str) -> SourceKey:
    return ("missing", value)


class Topology:
    """Nodes, values and reads of one graph, kept in a NetworkX MultiDiGraph (``nx``)."""

    def __init__(self, names: FreshNames) -> None:
        self.nx = OnnxNetwork()
        self.names = names
        self._nodes: dict[Any, dict[str, Any]] = self.nx.node_table  # node -> its attributes
        self._out_edges = self.nx.successor_table  # node -> consumer -> slot -> edge attributes
        self._producer: dict[str, tuple[NodeId | SourceKey, int]] = {}
        self._by_op: dict[tuple[str, str], dict[NodeId, None]] = {}
        self._ids = itertools.count()
        self._tie = itertools.count(1)
        self._count = 0  # nodes (the graph also holds sources)
        self._input_total = 0  # inputs of all nodes (with nodes: how big the graph is)
        # nodes created or whose inputs changed (new producer, new value), in order; passes
        # that scan the whole graph keep a position in it and later look only at what is new
        self.changes: list[NodeId] = []
        # every node read only values produced before it, as loaded (then no cycle either)
        self.loaded_in_order = True
        # node -> a number that grows along every read (see ``rank``); None: to be numbered
        self._ranks: dict[NodeId, float] | None = None
        self.repeated_node_names: list[str] = []  # names two loaded nodes share

    # ------------------------------------------------------------------ building blocks
    def _node_attributes(self, proto: NodeProto, order: tuple[int, int], inputs, outputs) -> dict[str, Any]:
        """A node's NetworkX attributes.  Input and output names are kept as tuples: reading
        a protobuf repeated string field builds every str again (about 0.5 us each), and the
        engine reads them far more often than it edits them."""
        key = (normalize_domain(proto.domain), proto.op_type)
        attrs: dict[str, Any] = {
            "proto": proto,
            "key": key,
            "inputs": tuple(inputs),
            "outputs": tuple(outputs),
            "order": order,
        }
        if may_have_subgraphs(*key) and has_subgraphs(proto):
            attrs["subgraphs"] = True
            implicit = implicit_inputs(proto)
            if implicit:
                attrs["implicit"] = implicit
        return attrs

    def _register(self, node_id: NodeId, attrs: dict[str, Any], loading: bool) -> None:
        """Index a node being added: op key, names, the values it produces."""
        self._count += 1
        self._input_total += len(attrs["inputs"])
        self._by_op.setdefault(attrs["key"], {})[node_id] = None
        name = attrs["proto"].name
        if name:
            if loading and name in self.names.nodes:
                self.repeated_node_names.append(name)
            self.names.nodes.add(name)
        for slot, out in enumerate(attrs["outputs"]):
            if out:
                self._producer[out] = (node_id, slot)
                self.names.values.add(out)

    @staticmethod
    def _reads(attrs: dict[str, Any]) -> Iterator[tuple[Slot, str]]:
        """(slot, value) of every read of a node: inputs, then values its subgraphs read."""
        for slot, name in enumerate(attrs["inputs"]):
            if name:
                yield slot, name
        for name in attrs.get("implicit", ()):
            yield f"implicit:{name}", name

    def _source_of(self, value: str) -> tuple[NodeId | SourceKey, int]:
        entry = self._producer.get(value)
        return entry if entry is not None else (_missing(value), 0)

    def _add_source(self, key: SourceKey) -> None:
        """A graph input, initializer or outer value; readers waiting for it move to it."""
        self.nx.add_node(key)
        self._producer[key[1]] = (key, 0)
        self.names.values.add(key[1])
        self._adopt_readers(key[1], key, 0)

    def _remove_source(self, key: SourceKey) -> None:
        del self._producer[key[1]]
        self._orphan_readers(key)
        self.nx.remove_node(key)

    def _adopt_readers(self, value: str, source: NodeId | SourceKey, out_slot: int) -> None:
        """Readers of ``value`` that waited on its placeholder now read it from ``source``."""
        missing = _missing(value)
        readers = self._out_edges.get(missing)
        if readers is None:
            return
        reads = [(consumer, slot) for consumer, keyed in readers.items() for slot in keyed]
        self.nx.remove_node(missing)
        add_edge = self.nx.add_edge  # (add_edges_from reads every edge back through views)
        for consumer, slot in reads:
            add_edge(source, consumer, key=slot, value=value, out_slot=out_slot)
            self._follow(source, consumer)
            self.changes.append(consumer)

    def _orphan_readers(self, source: NodeId | SourceKey) -> None:
        """Readers of values ``source`` produced (it is about to go) wait on placeholders."""
        reads = [
            (consumer, slot, data["value"])
            for consumer, keyed in self._out_edges[source].items()
            if consumer != source
            for slot, data in keyed.items()
        ]
        add_edge = self.nx.add_edge
        for consumer, slot, value in reads:
            add_edge(_missing(value), consumer, key=slot, value=value, out_slot=0)

    def _connect(self, node_id: NodeId, slot: Slot, value: str) -> None:
        source, out_slot = self._source_of(value)
        self.nx.add_edge(source, node_id, key=slot, value=value, out_slot=out_slot)
        self._follow(source, node_id)

    def _disconnect(self, node_id: NodeId, slot: Slot, value: str) -> None:
        source, _ = self._source_of(value)
        self.nx.remove_edge(source, node_id, key=slot)
        if type(source) is tuple and source[0] == "missing" and not self._out_edges[source]:
            self.nx.remove_node(source)

    def _load(self, entries: Iterable[tuple[NodeProto, tuple[int, int], list[str]]]) -> None:
        """Add a graph's nodes in two batches: every node first (so that every output has
        its producer), then every read as an edge."""
        self._ranks = None  # (numbered when first asked)
        nodes = []
        for proto, order, inputs in entries:
            node_id = next(self._ids)
            attrs = self._node_attributes(proto, order, inputs, proto.output)
            for out in attrs["outputs"]:
                if out and out in self._producer:
                    raise ValueError(f"value '{out}' has two producers")
            self._register(node_id, attrs, loading=True)
            nodes.append((node_id, attrs))
        self.nx.add_nodes_from(nodes)
        add_edge, source_of = self.nx.add_edge, self._source_of
        for node_id, attrs in nodes:
            for slot, value in self._reads(attrs):
                source, out_slot = source_of(value)
                if source[0] == "missing" if isinstance(source, tuple) else source >= node_id:
                    self.loaded_in_order = False  # produced later, never, or by itself
                add_edge(source, node_id, key=slot, value=value, out_slot=out_slot)

    # ------------------------------------------------------------------------ mutation
    def add_node(
        self,
        proto: NodeProto,
        order: tuple[int, int] | None = None,
        names: tuple[Iterable[str], Iterable[str]] | None = None,
    ) -> NodeId:
        """Insert a node; its inputs connect to their producers, its outputs to readers.
        ``names``: the proto's (inputs, outputs) when the caller has them (spares reading
        them back)."""
        given_inputs, given_outputs = (proto.input, proto.output) if names is None else names
        attrs = self._node_attributes(proto, order or (_LAST, next(self._tie)), given_inputs, given_outputs)
        for out in attrs["outputs"]:
            if out and out in self._producer:
                raise ValueError(f"value '{out}' has two producers")
        node_id = next(self._ids)
        self._place(node_id, attrs)
        self.nx.add_node(node_id, **attrs)
        self._register(node_id, attrs, loading=False)
        for out_slot, out in enumerate(attrs["outputs"]):
            if out:
                self._adopt_readers(out, node_id, out_slot)
        for slot, value in self._reads(attrs):
            self._connect(node_id, slot, value)
        self.changes.append(node_id)
        return node_id

    def remove_node(self, node_id: NodeId) -> NodeProto:
        """Delete a node; values it produced lose their producer (their readers remain)."""
        return self.remove_nodes((node_id,))[0]

    def remove_nodes(self, node_ids: Iterable[NodeId]) -> list[NodeProto]:
        """Delete nodes at once; readers outside them keep reading the values they produced
        (from placeholders).  Reads among the deleted nodes simply go with them."""
        node_ids = tuple(node_ids)
        gone = set(node_ids) if len(node_ids) > 1 else node_ids
        nodes, succ, producer, by_op = self._nodes, self._out_edges, self._producer, self._by_op
        orphans: list[tuple[NodeId, Slot, str]] = []
        read: list[str] = []
        protos: list[NodeProto] = []
        ranks = self._ranks
        for node_id in node_ids:
            attrs = nodes[node_id]
            self._forget(node_id, attrs)
            if ranks is not None:
                ranks.pop(node_id, None)
            for out in attrs["outputs"]:
                if out and producer.get(out, (None,))[0] == node_id:
                    del producer[out]
            for consumer, keyed in succ[node_id].items():
                if consumer not in gone:
                    orphans.extend((consumer, slot, data["value"]) for slot, data in keyed.items())
            inputs = attrs["inputs"]
            read.extend(inputs)
            read.extend(attrs.get("implicit", ()))
            self._count -= 1
            self._input_total -= len(inputs)
            by_op[attrs["key"]].pop(node_id, None)
            protos.append(attrs["proto"])
        self.nx.remove_nodes_from(node_ids)  # (and their edges)
        add_edge = self.nx.add_edge
        for consumer, slot, value in orphans:
            add_edge(_missing(value), consumer, key=slot, value=value, out_slot=0)
        for value in read:  # placeholders only they read from go too
            if value and value not in producer:
                missing = _missing(value)
                if missing in succ and not succ[missing]:
                    self.nx.remove_node(missing)
        return protos

    def _forget(self, node_id: NodeId, attrs: dict[str, Any]) -> None:
        """Called for each node removed, before it goes (a subclass drops what it remembers)."""

    def set_input(self, node_id: NodeId, slot: int, value: str) -> None:
        """Make input ``slot`` of a node read ``value`` instead."""
        attrs = self._nodes[node_id]
        inputs = attrs["inputs"]
        old = inputs[slot]
        if old:
            self._disconnect(node_id, slot, old)
        attrs["proto"].input[slot] = value
        attrs["inputs"] = (*inputs[:slot], value, *inputs[slot + 1 :])
        if value:
            self._connect(node_id, slot, value)
        self.changes.append(node_id)

    def replace_uses(self, old: str, new: str) -> list[NodeId]:
        """Every reader of ``old`` reads ``new`` instead (subgraph reads included).

        Graph outputs are not readers and are left alone.  Returns the rewired nodes."""
        touched: list[NodeId] = []
        for node_id, slot in self.consumers(old):
            touched.append(node_id)
            if isinstance(slot, int):
                self.set_input(node_id, slot, new)
                continue
            attrs = self._nodes[node_id]
            self._disconnect(node_id, slot, old)
            for sub in subgraphs_of(attrs["proto"]):
                rename_in_subgraph(sub, old, new)
            implicit = attrs["implicit"]
            implicit[implicit.index(old)] = new
            self._connect(node_id, f"implicit:{new}", new)
            self.changes.append(node_id)
        return touched

    # ------------------------------------------------------------------------ queries
    def node(self, node_id: NodeId) -> NodeProto:
        return self._nodes[node_id]["proto"]

    def inputs(self, node_id: NodeId) -> tuple[str, ...]:
        """The node's input names (as ``node(id).input``, "" for an absent one)."""
        return self._nodes[node_id]["inputs"]

    def outputs(self, node_id: NodeId) -> tuple[str, ...]:
        """The node's output names (as ``node(id).output``)."""
        return self._nodes[node_id]["outputs"]

    def implicit_reads(self, node_id: NodeId) -> list[str]:
        """Outer values the node's subgraphs read."""
        return self._nodes[node_id].get("implicit", [])

    def has_node(self, node_id: NodeId) -> bool:
        return type(node_id) is int and node_id in self._nodes

    def node_ids(self) -> list[NodeId]:
        return [n for n in self._nodes if type(n) is int]

    def __len__(self) -> int:
        return self._count

    def size_units(self) -> int:
        """Nodes plus their inputs: what the graph's memory grows with."""
        return self._count + self._input_total

    def nodes_with_subgraphs(self) -> list[NodeId]:
        return [n for n, attrs in self._nodes.items() if "subgraphs" in attrs]

    def has_subgraphs(self, node_id: NodeId) -> bool:
        return "subgraphs" in self._nodes[node_id]

    def nodes_by_op(self, domain: str, op: str) -> list[NodeId]:
        return list(self._by_op.get((normalize_domain(domain), op), ()))

    def order_of(self, node_id: NodeId) -> tuple[int, int]:
        return self._nodes[node_id]["order"]

    def producer(self, value: str) -> NodeId | None:
        """The node producing ``value`` (None for inputs, initializers, outer values)."""
        entry = self._producer.get(value)
        if entry is None or type(entry[0]) is not int:
            return None
        return entry[0]

    def producer_node(self, value: str) -> NodeProto | None:
        """The NodeProto producing ``value`` (None for sources)."""
        node_id = self.producer(value)
        return None if node_id is None else self._nodes[node_id]["proto"]

    def node_key(self, node_id: NodeId) -> tuple[str, str]:
        """(domain, op type) of a node, the key rules are dispatched on."""
        return self._nodes[node_id]["key"]

    def producer_key(self, value: str) -> tuple[str, str] | None:
        """(domain, op type) of the node producing ``value``; None for sources."""
        entry = self._producer.get(value)
        if entry is None or type(entry[0]) is not int:
            return None
        return self._nodes[entry[0]]["key"]

    def producer_slot(self, value: str) -> int:
        return self._producer[value][1]

    def has_value(self, value: str) -> bool:
        return value in self._producer

    def consumers(self, value: str) -> list[tuple[NodeId, Slot]]:
        """(node, input slot) pairs reading ``value``: the out-edges of its producer that
        carry it; subgraph reads have a str slot."""
        entry = self._producer.get(value)
        if entry is None:
            readers = self._out_edges.get(_missing(value))
            return [(c, s) for c, keyed in readers.items() for s in keyed] if readers else []
        source = entry[0]
        readers = self._out_edges[source]
        if not readers:
            return []
        if type(source) is int and len(self._nodes[source]["outputs"]) > 1:  # edges of other outputs too
            return [(c, s) for c, keyed in readers.items() for s, data in keyed.items() if data["value"] == value]
        return [(c, s) for c, keyed in readers.items() for s in keyed]

    consumer_slots = consumers  # (kept for callers that only iterate)

    def consumer_keys(self, value: str) -> frozenset[tuple[str, str]]:
        """(domain, op type) of the nodes reading ``value`` (the matcher's root checks)."""
        nodes = self._nodes
        entry = self._producer.get(value)
        if entry is not None and not (type(entry[0]) is int and len(nodes[entry[0]]["outputs"]) > 1):
            readers = self._out_edges[entry[0]]
            return frozenset([nodes[c]["key"] for c in readers if type(c) is int])
        return frozenset([nodes[c]["key"] for c, _ in self.consumers(value) if type(c) is int])

    def consumer_count(self, value: str) -> int:
        entry = self._producer.get(value)
        if entry is None:
            readers = self._out_edges.get(_missing(value))
            return sum(map(len, readers.values())) if readers else 0
        source = entry[0]
        readers = self._out_edges[source]
        if not readers:
            return 0
        if type(source) is int and len(self._nodes[source]["outputs"]) > 1:
            return sum(data["value"] == value for keyed in readers.values() for data in keyed.values())
        if len(readers) == 1:
            for keyed in readers.values():
                return len(keyed)
        return sum(map(len, readers.values()))

    def upstream(self, node_id: NodeId) -> Iterator[NodeId]:
        """Producers of the node's inputs (subgraph reads included)."""
        for _, name in self._reads(self._nodes[node_id]):
            entry = self._producer.get(name)
            if entry is not None and type(entry[0]) is int:
                yield entry[0]

    def downstream(self, node_id: NodeId) -> Iterator[NodeId]:
        """Readers of the node's outputs (subgraph reads included), once per read."""
        for consumer, keyed in self._out_edges[node_id].items():
            for _ in keyed:
                yield consumer

    def siblings(self, node_id: NodeId) -> Iterator[NodeId]:
        """Other readers of the node's inputs."""
        for _, name in self._reads(self._nodes[node_id]):
            for consumer, _ in self.consumers(name):
                if consumer != node_id:
                    yield consumer

    def changed_since(self, position: int) -> list[NodeId]:
        """Live nodes recorded in ``changes`` from ``position`` on, each once, in order."""
        return [n for n in dict.fromkeys(self.changes[position:]) if n in self._nodes]

    def nodes_in_order(self) -> list[NodeProto]:
        """The node protos in the order they were added (as loaded, then new ones)."""
        return [attrs["proto"] for n, attrs in self._nodes.items() if type(n) is int]

    def live_values(self) -> set[str]:
        return set(self._producer)

    # ------------------------------------------------------------------------ ordering
    def topological_ids(self, subset: Iterable[NodeId] | None = None) -> list[NodeId]:
        """Node ids (all, or those of ``subset``) in a topological order that keeps the
        original order where it can: the nodes by order when that is topological (the usual
        case: rewrites place new nodes at their root), else NetworkX's lexicographical
        topological sort keyed by that order."""
        members = self.node_ids() if subset is None else [n for n in dict.fromkeys(subset) if self.has_node(n)]
        by_order = sorted(members, key=self.order_of)
        if self._is_topological(by_order):
            return by_order
        order = {n: self._nodes[n]["order"] for n in members}
        try:
            return list(nx.lexicographical_topological_sort(self.nx.subgraph(members), key=order.__getitem__))
        except nx.NetworkXUnfeasible:
            raise ValueError("the graph has a cycle") from None

    def _is_topological(self, ids: list[NodeId]) -> bool:
        """Whether every node of ``ids`` comes after the producers of its reads that are
        among ``ids``."""
        members = set(ids)
        placed: set[NodeId] = set()
        producer, nodes = self._producer, self._nodes
        for node_id in ids:
            for _, name in self._reads(nodes[node_id]):
                entry = producer.get(name)
                if entry is not None:
                    source = entry[0]
                    if type(source) is int and source not in placed and source in members:
                        return False
            placed.add(node_id)
        return True

    def topological_nodes(self) -> list[NodeProto]:
        return [self._nodes[n]["proto"] for n in self.topological_ids()]

    # --------------------------------------------------------------------------- ranks
    def rank(self, node_id: NodeId) -> float | None:
        """A number above the ranks of the nodes ``node_id`` reads from (so a node ranked
        below another is never computed from it); None when the graph has a cycle.  The
        whole graph is numbered from a topological sort when first asked; after that a new
        node is placed between its producers and the readers waiting for its outputs, and a
        change that leaves no room between them has the graph numbered again.  Answers
        "can this value depend on that one" without walking everything upstream."""
        ranks = self._ranks if self._ranks is not None else self._number()
        return None if ranks is None else ranks[node_id]

    def _number(self) -> dict[NodeId, float] | None:
        try:
            ids = self.topological_ids()
        except ValueError:  # a cycle: no numbering (asked again after the next change)
            return None
        self._ranks = {node_id: float(i) for i, node_id in enumerate(ids)}
        return self._ranks

    def _place(self, node_id: NodeId, attrs: dict[str, Any]) -> None:
        """Rank a node about to be added: above its producers, below the readers already
        waiting for its outputs (halfway between), or renumber later when there is no
        room."""
        ranks = self._ranks
        if ranks is None:
            return
        low = high = None
        for _, name in self._reads(attrs):
            entry = self._producer.get(name)
            if entry is not None and type(entry[0]) is int:
                rank = ranks.get(entry[0])
                if rank is None:
                    self._ranks = None
                    return
                low = rank if low is None or rank > low else low
        for out in attrs["outputs"]:
            for reader in self._out_edges.get(_missing(out), ()) if out else ():
                rank = ranks.get(reader)
                if rank is None:
                    self._ranks = None
                    return
                high = rank if high is None or rank < high else high
        if high is None:
            ranks[node_id] = -1.0 if low is None else low + _RANK_STEP
        elif low is None:
            ranks[node_id] = high - 1.0
        else:
            middle = (low + high) / 2
            if low < middle < high:
                ranks[node_id] = middle
            else:  # no room (or a read that comes later): numbered again when next asked
                self._ranks = None

    def _follow(self, source: NodeId | SourceKey, reader: NodeId) -> None:
        """A read from ``source`` was added to ``reader``: the ranks still hold, or the
        graph is numbered again when next asked."""
        ranks = self._ranks
        if ranks is not None and type(source) is int:
            above, below = ranks.get(source), ranks.get(reader)
            if above is None or below is None or above >= below:
                self._ranks = None

    # ---------------------------------------------------------------------- self-check
    def check_consistency(self) -> None:
        """Engine self-check (tests run it after every level): the NetworkX graph and the
        indexes describe exactly the reads the node protos define.  Raises AssertionError."""
        expected_edges = set()
        for node_id in self.node_ids():
            attrs = self._nodes[node_id]
            proto = attrs["proto"]
            assert attrs["key"] == (normalize_domain(proto.domain), proto.op_type)
            assert attrs["inputs"] == tuple(proto.input), f"inputs of node {node_id}"
            assert attrs["outputs"] == tuple(proto.output), f"outputs of node {node_id}"
            assert node_id in self._by_op[attrs["key"]]
            for out_slot, out in enumerate(proto.output):
                assert not out or self._producer.get(out) == (node_id, out_slot), f"producer of '{out}'"
            for slot, name in self._reads(attrs):
                source, source_slot = self._source_of(name)
                expected_edges.add((source, node_id, slot, name, source_slot))
        actual_edges = {(u, v, k, d["value"], d["out_slot"]) for u, v, k, d in self.nx.edges(keys=True, data=True)}
        assert actual_edges == expected_edges, (
            f"nx edges out of sync: missing {sorted(map(str, expected_edges - actual_edges))[:3]}, "
            f"extra {sorted(map(str, actual_edges - expected_edges))[:3]}"
        )
        sources = {entry[0] for entry in self._producer.values() if type(entry[0]) is not int}
        waiting = {u for u, _, _, _, _ in expected_edges if type(u) is tuple and u[0] == "missing"}
        assert set(self.nx.nodes) == set(self.node_ids()) | sources | waiting, "nx nodes out of sync"
        assert sum(map(len, self._by_op.values())) == self._count == len(self.node_ids()), "op index out of sync"
        if self._ranks is not None:  # the numbering kept through rewrites still grows along every read
            assert set(self._ranks) == set(self.node_ids()), "ranks out of sync"
            for u, v, _, _, _ in actual_edges:
                assert type(u) is not int or self._ranks[u] < self._ranks[v], f"rank of node {u} not below {v}"
