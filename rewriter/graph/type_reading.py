"""Reading a value's ``TypeProto``: element type, dims, and the type string schemas use.

Pure functions of one type, kept apart from inference (``types.py``) so that the symbolic
shape refinement, which inference calls, can read shapes without importing it back.
"""

from __future__ import annotations

from onnx import TypeProto


def type_string(type_proto: TypeProto | None) -> str | None:
    """A value type as op schemas write it (``tensor(float)``, ``seq(tensor(int64))``); None
    when unknown or of a kind schemas here do not constrain."""
    if type_proto is None:
        return None
    which = type_proto.WhichOneof("value")
    if which == "tensor_type":
        return _TENSOR_TYPE_STRINGS.get(type_proto.tensor_type.elem_type)
    if which == "sequence_type":
        inner = type_string(type_proto.sequence_type.elem_type)
        return None if inner is None else f"seq({inner})"
    return None


_ONNX_TYPE_NAMES = {
    1: "float",
    2: "uint8",
    3: "int8",
    4: "uint16",
    5: "int16",
    6: "int32",
    7: "int64",
    8: "string",
    9: "bool",
    10: "float16",
    11: "double",
    12: "uint32",
    13: "uint64",
    14: "complex64",
    15: "complex128",
    16: "bfloat16",
    17: "float8e4m3fn",
    18: "float8e4m3fnuz",
    19: "float8e5m2",
    20: "float8e5m2fnuz",
    21: "uint4",
    22: "int4",
}
_TENSOR_TYPE_STRINGS = {elem: f"tensor({name})" for elem, name in _ONNX_TYPE_NAMES.items()}


def elem_type_of(type_proto: TypeProto | None) -> int | None:
    if type_proto is None or not type_proto.HasField("tensor_type"):
        return None
    elem = type_proto.tensor_type.elem_type
    return elem or None


def shape_of(type_proto: TypeProto | None) -> list[int | str | None] | None:
    """Dims of a tensor type: ints, symbolic names, or None for unknown; None if no shape.

    Remembered per serialized type: a model has few distinct types, and serializing one
    (one call into protobuf) costs a tenth of reading its dims field by field."""
    if type_proto is None:
        return None
    key = type_proto.SerializeToString()
    try:
        dims = _SHAPES[key]
    except KeyError:
        if len(_SHAPES) >= _MAX_REMEMBERED:
            _SHAPES.clear()
        dims = _SHAPES[key] = _read_shape(type_proto)
    return None if dims is None else list(dims)


_SHAPES: dict[bytes, tuple[int | str | None, ...] | None] = {}
_MAX_REMEMBERED = 1 << 16


def _read_shape(type_proto: TypeProto) -> tuple[int | str | None, ...] | None:
    if not type_proto.HasField("tensor_type"):
        return None
    tensor = type_proto.tensor_type
    if not tensor.HasField("shape"):
        return None
    dims: list[int | str | None] = []
    for dim in tensor.shape.dim:
        which = dim.WhichOneof("value")
        dims.append(dim.dim_value if which == "dim_value" else dim.dim_param if which == "dim_param" else None)
    return tuple(dims)
