"""A model written to a stream piece by piece, never serialized whole.

Why this exists: ``SerializeToString()`` of a 500 MB model makes a 500 MB bytes object,
and a model assembled for it is another copy of every weight; together with the loaded
model that was most of ``optimize``'s peak memory.  Protobuf's wire format is a
concatenation of fields, in any order, so a model is written as: the model's other fields,
then the graph field (its key, then its length, added up from the tensors' headers: upb's
``ByteSize()`` serializes a message to measure it) holding the graph's other fields
followed by its initializers, each serialized on its own.  The largest copy in memory at
any time is one tensor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from google.protobuf.message import Message
from onnx import GraphProto, ModelProto, TensorProto

_LENGTH_DELIMITED = 2
_GRAPH = ModelProto.DESCRIPTOR.fields_by_name["graph"].number
_INITIALIZER = GraphProto.DESCRIPTOR.fields_by_name["initializer"].number


@dataclass
class ModelParts:
    """A model as the writer takes it: the model without its graph (``head``), the main
    graph without its initializers, and those initializers (shared, never copied)."""

    head: ModelProto
    graph: GraphProto
    initializers: Sequence[TensorProto] = ()

    @classmethod
    def of(cls, model: ModelProto) -> ModelParts:
        """A model's parts: everything but the initializers is copied (the caller's model
        is never modified), the initializers are the model's own."""
        return cls(
            copy_without(model, "graph"), copy_without(model.graph, "initializer"), list(model.graph.initializer)
        )


def varint(value: int) -> bytes:
    """Protobuf's base-128 encoding of a non-negative int."""
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _key(number: int) -> bytes:
    return varint(number << 3 | _LENGTH_DELIMITED)


def _is_repeated(field) -> bool:
    repeated = getattr(field, "is_repeated", None)  # protobuf >= 6; older ones have label
    return repeated if repeated is not None else field.label == field.LABEL_REPEATED


def copy_without(message: Message, skip: str) -> Message:
    """A copy of ``message`` without its field ``skip``, which is never read (reading a
    bytes field from Python copies it; ``ListFields()`` would read them all)."""
    copy = type(message)()
    for field in message.DESCRIPTOR.fields:
        name = field.name
        if name == skip:
            continue
        if _is_repeated(field):
            values = getattr(message, name)
            if len(values):
                getattr(copy, name).extend(values)
        elif field.type == field.TYPE_MESSAGE:
            if message.HasField(name):
                getattr(copy, name).CopyFrom(getattr(message, name))
        elif message.HasField(name) if getattr(field, "has_presence", True) else getattr(message, name):
            setattr(copy, name, getattr(message, name))
    return copy


def write_model(
    write: Callable[[bytes], object],
    head: ModelProto,
    graph: GraphProto,
    initializers: Sequence[TensorProto],
    size_of: Callable[[TensorProto], int] = lambda tensor: tensor.ByteSize(),
) -> None:
    """Write the model made of ``head`` (a model without its graph), ``graph`` (the graph
    without initializers) and ``initializers``, as one serialized ``ModelProto`` (the graph
    field once, as protobuf writes it).  ``size_of`` gives a tensor's serialized size
    (``ByteSize()`` by default, which upb computes by serializing); each tensor written is
    checked against it."""
    key = _key(_INITIALIZER)
    sizes = [size_of(tensor) for tensor in initializers]
    inner = graph.ByteSize() + sum(len(key) + len(varint(size)) + size for size in sizes)
    write(head.SerializeToString())
    write(_key(_GRAPH))
    write(varint(inner))
    write(graph.SerializeToString())
    for tensor, size in zip(initializers, sizes):
        data = tensor.SerializeToString()
        if len(data) != size:
            raise ValueError(
                f"tensor '{tensor.name}' serializes to {len(data)} bytes, its "
                f"header says {size}: its data does not fit its type and shape"
            )
        write(key)
        write(varint(size))
        write(data)
