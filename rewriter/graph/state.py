"""The protocol every graph the engine optimizes follows (model.py's ``ModelState``, and the
subgraph and function bodies of bodies.py): what the rewriter, the fixpoint driver and the
built-in passes may ask of it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from onnx import ModelProto

from .view import GraphView


class GraphState(Protocol):
    """What the engine drives, for the main graph, a subgraph or a function body alike: a
    view to rewrite, domains to import, types to refresh after folding, nested graphs."""

    view: GraphView
    opsets: dict[str, int]
    source: ModelProto  # the model as read (its functions, metadata, IR version)

    def require_domain(self, domain: str, version: int = 1) -> None: ...

    def refresh_types(self, if_incomplete_known: bool = False) -> int: ...

    def subgraph_states(self) -> Iterator[GraphState]: ...
