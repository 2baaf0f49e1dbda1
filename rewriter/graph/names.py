"""Names in one model: which value and node names are taken, and fresh ones for new values.

ONNX wants every value name unique in the model (subgraphs included) and onnxruntime wants
node names unique in a graph; rewrites create many values from one base (a rule's name), so
a fresh name is found in amortized constant time.
"""

from __future__ import annotations

from collections.abc import Iterable

from onnx import GraphProto

from .subgraphs import has_subgraphs, subgraphs_of


class FreshNames:
    """Taken value and node names, and fresh ones made from a base."""

    def __init__(self, reserved_values: Iterable[str] = ()) -> None:
        # a set passed in is shared (subgraph views keep fresh names unique model-wide)
        self.values: set[str] = reserved_values if isinstance(reserved_values, set) else set(reserved_values)
        self.nodes: set[str] = set()
        self._suffixes: dict[str, int] = {}  # base -> the last N of a fresh name base_N

    def fresh_value(self, base: str) -> str:
        return self._fresh(base, self.values)

    def fresh_node(self, base: str) -> str:
        return self._fresh(base, self.nodes)

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


def all_value_names(graph: GraphProto, names: set[str]) -> set[str]:
    """Every value name in a graph and its subgraphs (fresh names must avoid all of them)."""
    names.update(vi.name for vi in graph.input)
    names.update(t.name for t in graph.initializer)
    for node in graph.node:
        names.update(node.output)
        names.update(node.input)
        if has_subgraphs(node):
            for sub in subgraphs_of(node):
                all_value_names(sub, names)
    return names
