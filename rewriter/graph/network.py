"""The NetworkX graph every other part of the engine reads topology from.

One graph node per ONNX node (an int id) and one source node per graph input, initializer
and outer-scope value, keyed ``(kind, name)``; one edge per (producer output -> consumer
input slot), keyed by the slot, with the value's name and the producer's output slot as
edge attributes.  A node's facts (its proto, op key, input and output names, load order)
are its NetworkX node attributes.

NetworkX documents ``node_dict_factory`` and ``adjlist_outer_dict_factory`` as the hooks a
subclass uses to choose the dicts it keeps its nodes and adjacency in.  ``OnnxNetwork``
makes them plain dicts and remembers them, so the engine can read a node's attributes and
its successors at dict speed: NetworkX's public views wrap every level of a lookup in a new
view object, about 3 us for a consumer lookup that the matcher makes tens of thousands of
times per model.  Every change still goes through NetworkX's public methods, so NetworkX's
algorithms (``find_cycle``, ``lexicographical_topological_sort``) see the same graph.
"""

from __future__ import annotations

from typing import Any

import networkx as nx


class OnnxNetwork(nx.MultiDiGraph):
    """A MultiDiGraph that exposes, read-only, the tables its factories made."""

    node_table: dict[Any, dict[str, Any]]
    successor_table: dict[Any, dict[Any, dict[Any, dict[str, Any]]]]

    def __init__(self) -> None:
        self.__dict__["_outer_tables"] = []
        super().__init__()
        # Which outer table holds successors and which predecessors: told apart by one
        # probe edge rather than by the order NetworkX happens to create them in.
        u, v = object(), object()
        self.add_edge(u, v)
        (self.successor_table,) = [t for t in self.__dict__.pop("_outer_tables") if v in t.get(u, ())]
        self.remove_nodes_from((u, v))

    def node_dict_factory(self) -> dict:  # a documented hook
        table: dict = {}
        self.node_table = table
        return table

    def adjlist_outer_dict_factory(self) -> dict:  # a documented hook
        table: dict = {}
        self.__dict__["_outer_tables"].append(table)
        return table
