"""Names in one model: which value and node names are taken, and fresh ones for new values.

ONNX wants every value name unique in the model (subgraphs included) and onnxruntime wants
node names unique in a graph; rewrites create many values from one base (a rule's name), so
a fresh name is found in amortized constant time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from onnx import GraphProto

from .subgraphs import has_subgraphs, subgraphs_of


class FreshNames:
    """Taken value and node names, and fresh ones made from a base."""

    def __init__(self, reserved_values: Iterable[str] = ()) -> None:
        # a set passed in is shared (subgraph views keep fresh names unique model-wide)
        self.values: set[str] = reserved_values if isinstance(reserved_values, set) else set(reserved_values)
        self.nodes: set[str] = set()
        self._suffixes: dict[str, int] = {}  # base -> the last N of a fresh name base_N
        # inside ``trial``: (taken set, name, base, the base's suffix before) per name given
        self._given: list[tuple[set[str], str, str, int | None]] | None = None

    @contextmanager
    def trial(self) -> Iterator[None]:
        """Names given out inside are free again afterwards: a rewrite that is only tried
        (``explain`` asking whether a match would apply) leaves the names a run then gives
        out as they would have been."""
        outer, self._given = self._given, []
        try:
            yield
        finally:
            for taken, name, base, suffix in reversed(self._given):
                taken.discard(name)
                if suffix is None:
                    self._suffixes.pop(base, None)
                else:
                    self._suffixes[base] = suffix
            self._given = outer

    def fresh_value(self, base: str) -> str:
        return self._fresh(base, self.values)

    def fresh_node(self, base: str) -> str:
        return self._fresh(base, self.nodes)

    def _fresh(self, base: str, taken: set[str]) -> str:
        """``base``, else ``base_N`` with the first free N counting from the last one given
        for that base (a rule's constants all start from one base: probing from 1 each time
        made naming quadratic in their number).  Adds the name to ``taken``."""
        name = base
        before = self._suffixes.get(base)
        if name in taken:
            number = before or 0
            while name in taken:
                number += 1
                name = f"{base}_{number}"
            self._suffixes[base] = number
        taken.add(name)
        if self._given is not None:
            self._given.append((taken, name, base, before))
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
