"""Protobuf messages of one graph view, allocated together in one holder message.

Why this exists: Python's protobuf (upb) gives every message created on its own
(``NodeProto()``, ``TypeProto()``...) an arena of its own, and after every 10,000 arena
blocks it frees it calls glibc's ``malloc_trim(0)``, which returns the process's free heap
to the OS — the allocations that follow fault those pages in again.  Optimizing a BERT
export made and dropped about 13,000 such arenas per run (node copies removed by rewrites,
types of initializers, new nodes): a trim in every run, which cost it a tenth of its time.

Messages made here are elements of one holder's repeated fields, so they share its arena
(dropping one frees nothing, and the whole pool goes at once with the view that owns it);
tensor types are made once per distinct type.
Nothing is ever removed from the holder (a removed node's message stays until then), so
memory stays proportional to the nodes loaded and created.
"""

from __future__ import annotations

from collections.abc import Iterable

from onnx import GraphProto, NodeProto, TensorProto, TypeProto, helper


class ProtoPool:
    """Makes node, tensor and type messages inside one holder (see the module docstring)."""

    __slots__ = ("_holder", "_add_node", "_add_tensor", "_types")

    def __init__(self) -> None:
        self._holder = GraphProto()
        self._add_node = self._holder.node.add
        self._add_tensor = self._holder.initializer.add
        self._types: dict[tuple, TypeProto] = {}

    def node(self, **fields) -> NodeProto:
        """A new NodeProto with these fields (as ``NodeProto(**fields)``)."""
        return self._add_node(**fields)

    def copy_node(self, proto: NodeProto) -> NodeProto:
        """A copy of ``proto`` (the caller's message is never edited)."""
        copy = self._add_node()
        copy.CopyFrom(proto)
        return copy

    def copy_tensor(self, tensor: TensorProto) -> TensorProto:
        copy = self._add_tensor()
        copy.CopyFrom(tensor)
        return copy

    def tensor_type(self, elem_type: int, dims: Iterable[int]) -> TypeProto:
        """The type of a tensor with these static dims, one message per distinct type
        (types are replaced, never edited, so values may share one); no dims is a scalar."""
        key = (elem_type, tuple(dims))
        found = self._types.get(key)
        if found is None:
            found = self._types[key] = helper.make_tensor_type_proto(elem_type, list(key[1]))
        return found
