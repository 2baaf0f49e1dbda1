"""What a graph loads instead of its constant nodes: the result of a load hook (the
built-in passes' on-load step, passes/on_load.py), read by ``GraphView`` while it loads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from onnx import GraphProto, TensorProto

from .proto_pool import ProtoPool


@dataclass
class LoadedConstants:
    """What the view loads instead of the graph's constant nodes."""

    pool: ProtoPool  # where the tensors are made
    skipped: set[int] = field(default_factory=set)  # node indexes not loaded
    initializers: list[TensorProto] = field(default_factory=list)  # from Constant nodes
    aliases: dict[str, str] = field(default_factory=dict)  # name read -> initializer read instead
    dropped: set[str] = field(default_factory=set)  # graph initializers not loaded
    counted_as: str = "constant_folding"  # the built-in whose work this is, in the report

    @property
    def removed(self) -> int:
        return len(self.skipped)


# A load hook: (the graph, the pool its view makes messages in) -> what to load instead.
LoadHook = Callable[[GraphProto, ProtoPool], LoadedConstants]
