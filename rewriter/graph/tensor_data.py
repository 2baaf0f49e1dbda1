"""What a tensor's header says about its data: whether its element type is one onnx knows,
how many bytes its ``raw_data`` must hold, and every tensor a graph holds.

All of it is read from the header (type and dims): reading ``raw_data`` from Python copies
it, which for a model's weights is a copy of the model.
"""

from __future__ import annotations

from collections.abc import Iterator

from onnx import AttributeProto, GraphProto, TensorProto, helper

# element types packed below a byte in raw_data: bits per element
_PACKED_BITS = {
    getattr(TensorProto, name): bits
    for name, bits in (("UINT4", 4), ("INT4", 4), ("FLOAT4E2M1", 4), ("UINT2", 2), ("INT2", 2))
    if hasattr(TensorProto, name)
}
_KNOWN = frozenset(TensorProto.DataType.values()) - {TensorProto.UNDEFINED}
_BITS: dict[int, int | None] = {}


def known_data_type(data_type: int) -> bool:
    """Whether ``data_type`` is an element type onnx defines (UNDEFINED is not)."""
    return data_type in _KNOWN


def bits_per_element(data_type: int) -> int | None:
    """Bits each element takes in ``raw_data``; None for strings and types whose packing
    is not plain (6-bit floats) or unknown."""
    if data_type in _BITS:
        return _BITS[data_type]
    bits: int | None
    if data_type in _PACKED_BITS:
        bits = _PACKED_BITS[data_type]
    elif data_type == TensorProto.STRING or not known_data_type(data_type):
        bits = None
    else:
        try:
            bits = helper.tensor_dtype_to_np_dtype(data_type).itemsize * 8
        except Exception:  # a type this onnx defines but numpy cannot hold
            bits = None
        if data_type in (getattr(TensorProto, "FLOAT6E2M3", -1), getattr(TensorProto, "FLOAT6E3M2", -1)):
            bits = None
    _BITS[data_type] = bits
    return bits


def element_count(tensor: TensorProto) -> int:
    count = 1
    for d in tensor.dims:
        count *= d
    return count


def raw_bytes_needed(tensor: TensorProto) -> int | None:
    """How many bytes ``raw_data`` must hold for the tensor's type and dims (None when the
    type does not say: strings, unusual packings, unknown types)."""
    bits = bits_per_element(tensor.data_type)
    if bits is None or any(d < 0 for d in tensor.dims):
        return None
    return (element_count(tensor) * bits + 7) // 8


def graph_tensors(graph: GraphProto) -> Iterator[tuple[GraphProto, TensorProto]]:
    """(graph, tensor) for every initializer and every tensor-valued attribute (Constant
    values...) of ``graph`` and of all the graphs nested in it, without recursion (a deeply
    nested model must not exhaust Python's stack)."""
    stack = [graph]
    while stack:
        current = stack.pop()
        for tensor in current.initializer:
            yield current, tensor
        for node in current.node:
            for attr in node.attribute:
                if attr.type == AttributeProto.TENSOR:
                    yield current, attr.t
                elif attr.type == AttributeProto.TENSORS:
                    for tensor in attr.tensors:
                        yield current, tensor
                elif attr.type == AttributeProto.GRAPH:
                    stack.append(attr.g)
                elif attr.type == AttributeProto.GRAPHS:
                    stack.extend(attr.graphs)


def all_graphs(graph: GraphProto) -> Iterator[GraphProto]:
    """``graph`` and every graph nested in it (If branches, Loop bodies...), iteratively."""
    stack = [graph]
    while stack:
        current = stack.pop()
        yield current
        for node in current.node:
            for attr in node.attribute:
                if attr.type == AttributeProto.GRAPH:
                    stack.append(attr.g)
                elif attr.type == AttributeProto.GRAPHS:
                    stack.extend(attr.graphs)


def external_location(tensor: TensorProto) -> dict[str, str] | None:
    """A tensor's external data entries (location, offset, length...) as a dict, or None
    when it keeps its data inline."""
    if tensor.data_location != TensorProto.EXTERNAL:
        return None
    return {entry.key: entry.value for entry in tensor.external_data}
