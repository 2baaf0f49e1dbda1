"""What expressions compute with, and how they fail.

A tensor variable of a rule evaluates to a ``Ref`` (the name of a value in the graph): graph
predicates (``rank``, ``single_use``...) read facts about it, while arithmetic asks for its
constant contents.  A failed evaluation is a reason a match is refused, never a crash.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import onnx

from . import budget


class EvalFailure(Exception):
    """An expression could not be evaluated for this match (not constant, unknown shape...)."""


class Ref:
    """A value of the graph, by name.  (A plain slotted class: matching creates one per
    variable lookup, a frozen dataclass cost three times as much.)"""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return type(other) is Ref and other.name == self.name

    def __hash__(self) -> int:
        return hash(("Ref", self.name))

    def __repr__(self) -> str:
        return f"Ref(name={self.name!r})"


class GraphFacts(Protocol):
    """What expressions may ask of the graph.  ``GraphView`` implements it."""

    def is_constant(self, value: str) -> bool: ...

    def constant(self, value: str) -> np.ndarray | None: ...

    def elem_type(self, value: str) -> int | None: ...

    def shape(self, value: str) -> list[int | str | None] | None: ...

    def consumer_count(self, value: str) -> int: ...

    def is_graph_output(self, value: str) -> bool: ...

    def opset(self, domain: str) -> int | None: ...

    def op_type(self, value: str) -> str | None: ...

    def producer_node(self, value: str) -> onnx.NodeProto | None: ...

    def settled_dim(self, dim: int | str) -> int | str: ...


def materialize(graph: GraphFacts, value: object, what: str = "value") -> object:
    """Replace ``Ref``s (also inside lists) by their constant contents."""
    if type(value) is list:  # shapes, attribute lists: usually plain numbers, returned as they are
        for item in value:
            if type(item) is Ref or type(item) is list:
                return _materialize_list(graph, value, what, {})
        return value
    kind = type(value)
    if kind is int or kind is float or kind is str or kind is bool:
        return value
    if isinstance(value, Ref):
        array = graph.constant(value.name)
        if array is None:
            raise EvalFailure(f"{what} '{value.name}' is not a constant")
        budget.read(value.name, array.nbytes)
        return array
    if isinstance(value, list):
        return _materialize_list(graph, value, what, {})
    return value


def _materialize_list(graph: GraphFacts, value: list, what: str, done: dict[int, list]) -> list:
    """A list with its ``Ref``s replaced, each list object once: ``[[[0] * 1000] * 1000] *
    1000`` is three lists shared a million times, and copied leaf by leaf it took a minute."""
    found = done.get(id(value))
    if found is not None:
        return found
    out = done[id(value)] = []
    for item in value:
        out.append(
            _materialize_list(graph, item, what, done) if isinstance(item, list) else materialize(graph, item, what)
        )
    return out
