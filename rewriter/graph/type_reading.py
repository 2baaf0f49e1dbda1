"""Reading a value's ``TypeProto``: element type, dims, and the type string schemas use.

Pure functions of one type, kept apart from inference (``types.py``) so that the symbolic
shape refinement, which inference calls, can read shapes without importing it back.
"""

from __future__ import annotations

import re

from onnx import TypeProto

from ..expr.dim_algebra import canonical_dim

FRESH_DIM = "unk__"  # how onnx's inference names a dim it cannot tell


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
    dims = _read(type_proto)[0]
    return None if dims is None else list(dims)


def known_dim_count(type_proto: TypeProto | None) -> int:
    """How many dims of a tensor type are known (``is_known_dim``); -1 without a shape."""
    return -1 if type_proto is None else _read(type_proto)[1]


def fully_known(type_proto: TypeProto | None) -> bool:
    """A shape whose every dim is known (a scalar's included)."""
    if type_proto is None:
        return False
    dims, known = _read(type_proto)
    return dims is not None and known == len(dims)


def is_known_dim(dim) -> bool:
    """A number, or a name a user or exporter gave (not onnx's fresh ``unk__``, not a
    ``dims()`` token for an unnamed dim), or a combination of such names (``dims()``
    arithmetic: ``"past + 1"``; one over a fresh name is as unknown as the name)."""
    if isinstance(dim, int):
        return True
    return isinstance(dim, str) and _UNKNOWN_ATOM.search(dim) is None


_UNKNOWN_ATOM = re.compile(rf"(?<![\w.])({FRESH_DIM}|\?)")


def _read(type_proto: TypeProto) -> tuple[tuple[int | str | None, ...] | None, int]:
    key = type_proto.SerializeToString()
    try:
        return _SHAPES[key]
    except KeyError:
        if len(_SHAPES) >= _MAX_REMEMBERED:
            _SHAPES.clear()
        dims = _read_shape(type_proto)
        found = _SHAPES[key] = (dims, -1 if dims is None else sum(map(is_known_dim, dims)))
        return found


_SHAPES: dict[bytes, tuple[tuple[int | str | None, ...] | None, int]] = {}
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
        dims.append(
            dim.dim_value if which == "dim_value" else canonical_dim(dim.dim_param) if which == "dim_param" else None
        )
    return tuple(dims)
