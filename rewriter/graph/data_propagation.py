"""Whether onnx's shape inference may propagate data through a model without running away.

Why this exists: with data propagation, onnx writes out every 1-D value it can compute as
a list of dims, about 140 bytes each, in C++ we cannot bound from Python; a few hundred
bytes of model made it allocate until the machine ran out (a ConstantOfShape of
``[2**40]``: 13 GB in a minute; a chain of Concats doubling a 4-element constant: 24 GB).
Such lengths come from constants: an amplifying op (Concat, Tile, Expand,
ConstantOfShape, Range, Pad...) whose inputs are all initializers, or a dim declared
beyond any real tensor.  When a model has one, it is first inferred without data
propagation, and data propagation is used only if no 1-D value is longer than
``MAX_LENGTH`` (real shape tensors have a handful of elements).  Models without any
(nearly all exports: their shape arithmetic starts from ``Shape`` of an input) pay nothing.

What the heuristic cannot see (a long length computed from moderate inputs at run time)
is left to the command line's memory ceiling (limits.py).
"""

from __future__ import annotations

from onnx import ModelProto, shape_inference

MAX_LENGTH = 1 << 16  # elements of a 1-D value data propagation may write out
MAX_DIM = 1 << 24  # a declared dim past this is suspect enough to look first
_AMPLIFYING = frozenset(
    {
        "Concat",
        "Tile",
        "Expand",
        "ConstantOfShape",
        "Range",
        "Pad",
        "Resize",
        "Upsample",
        "OneHot",
        "Reshape",
        "Gather",
        "Mul",
        "Add",
        "Sum",
        "Where",
    }
)


def data_propagation_safe(light: ModelProto) -> bool:
    """Whether ``infer_shapes(light, data_prop=True)`` stays small (see the module
    docstring); may run one inference without data propagation to find out."""
    if not _suspect(light):
        return True
    try:
        inferred = shape_inference.infer_shapes(light, strict_mode=False, data_prop=False)
    except Exception:  # it will fail the same way with data propagation: nothing to guard
        return True
    for vi in (*inferred.graph.value_info, *inferred.graph.output, *inferred.graph.input):
        dims = vi.type.tensor_type.shape.dim if vi.type.HasField("tensor_type") else ()
        if len(dims) <= 1 and any(d.dim_value > MAX_LENGTH for d in dims):
            return False
    return True


def _suspect(light: ModelProto) -> bool:
    graph = light.graph
    constants = {t.name for t in graph.initializer}
    for node in graph.node:
        if node.op_type in _AMPLIFYING and node.input and all(not i or i in constants for i in node.input):
            return True
    for vi in (*graph.input, *graph.value_info, *graph.output):
        if vi.type.HasField("tensor_type") and any(d.dim_value > MAX_DIM for d in vi.type.tensor_type.shape.dim):
            return True
    return any(d > MAX_DIM for t in graph.initializer for d in t.dims)
