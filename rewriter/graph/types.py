"""Value types (element type + shape): from the model, from onnx shape inference, per node.

Shape inference runs once per model on a copy whose large initializers carry no data (so
a big model is not duplicated in memory); nodes created later get their types inferred one
at a time, lazily, when a rule asks.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, TypeProto, helper, shape_inference

from ..dsl.schemas import normalize_domain
from .data_propagation import data_propagation_safe
from .proto_pool import ProtoPool
from .stand_ins import stand_ins
from .symbolic_shapes import refine_computed_shapes

_SMALL_TENSOR = 1024  # elements: initializers up to this size keep their data for inference


def tensor_type(tensor: TensorProto, pool: ProtoPool | None = None) -> TypeProto:
    """An initializer's type (made in ``pool`` when given, see proto_pool.py)."""
    if pool is not None:
        return pool.tensor_type(tensor.data_type, tensor.dims)
    return helper.make_tensor_type_proto(tensor.data_type, list(tensor.dims))


def _numel(tensor: TensorProto) -> int:
    n = 1
    for d in tensor.dims:
        n *= d
    return n


def tensor_nbytes(tensor: TensorProto) -> int:
    """Size of a tensor's contents from its header (no data is read; 0 for strings)."""
    if tensor.data_type in (TensorProto.STRING, TensorProto.UNDEFINED):
        return 0
    return _numel(tensor) * _itemsize(tensor.data_type)


@lru_cache(maxsize=None)
def _itemsize(data_type: int) -> int:
    return np.dtype(helper.tensor_dtype_to_np_dtype(data_type)).itemsize


def light_model(model: ModelProto, nodes, initializers, inputs=None, outputs=None,
                value_info=None, opsets: dict[str, int] | None = None) -> ModelProto:
    """A model of ``nodes`` for shape inference (the rest from ``model`` unless given):
    small initializers keep their data (shape computations read them), large ones are
    headers only, so nothing big is copied."""
    light = ModelProto()
    light.ir_version = model.ir_version
    if opsets is None:
        light.opset_import.extend(model.opset_import)
    else:
        light.opset_import.extend(helper.make_opsetid(d, v) for d, v in opsets.items())
    light.functions.extend(model.functions)
    graph, src = light.graph, model.graph
    graph.name = src.name
    graph.input.extend(src.input if inputs is None else inputs)
    graph.output.extend(src.output if outputs is None else outputs)
    graph.value_info.extend(src.value_info if value_info is None else value_info)
    stubs = _with_stand_ins(graph, nodes, initializers)
    graph.initializer.extend(stubs)  # headers only: shapes for inference, never data
    for tensor in initializers:
        if _numel(tensor) <= _SMALL_TENSOR and tensor.data_location != TensorProto.EXTERNAL:
            graph.initializer.append(tensor)
        else:
            stub = graph.initializer.add()
            stub.name = tensor.name
            stub.data_type = tensor.data_type
            stub.dims.extend(tensor.dims)
    return light


def _with_stand_ins(graph, nodes, initializers) -> list[TensorProto]:
    """Append ``nodes`` to ``graph``, contrib ops as their standard stand-ins (see
    stand_ins.py), which read the types ``graph``'s inputs and value_info declare;
    returns the stub initializers the stand-ins read."""
    nodes = list(nodes)
    if all(node.domain in ("", "ai.onnx") for node in nodes):
        graph.node.extend(nodes)  # nothing to stand in for: one bulk copy
        return []
    declared = {t.name: (t.data_type, list(t.dims)) for t in initializers}
    for vi in (*graph.input, *graph.value_info):
        shape = shape_of(vi.type)
        if shape is not None and vi.name not in declared:
            declared[vi.name] = (vi.type.tensor_type.elem_type, shape)
    stubs: list[TensorProto] = []
    for node in nodes:
        replacement = stand_ins(node, declared.get) if node.domain not in ("", "ai.onnx") else None
        if replacement is None:
            graph.node.append(node)
            continue
        graph.node.extend(replacement[0])
        stubs.extend(replacement[1])
    return stubs


def inferred_types(light: ModelProto) -> dict[str, TypeProto]:
    """What onnx shape inference (with data propagation) finds for ``light``'s values."""
    try:
        inferred = shape_inference.infer_shapes(light, strict_mode=False,
                                                data_prop=data_propagation_safe(light))
    except Exception:  # custom ops or a malformed corner (or out of memory): nothing inferred
        return {}
    return {vi.name: vi.type for vi in (*inferred.graph.value_info, *inferred.graph.output)
            if vi.type.WhichOneof("value") is not None}


def infer_model_types(model: ModelProto) -> dict[str, TypeProto]:
    """Types of every value of the main graph: declared ones, then what onnx infers, then
    the dims computed shapes name (``refine_symbolic_dims``)."""
    types = declared_types(model)
    graph = model.graph
    add_inferred_types(model, types, graph.node, graph.initializer)
    refine_symbolic_dims(model, graph.node, graph.initializer, types)
    return types


def declared_types(model: ModelProto, pool: ProtoPool | None = None) -> dict[str, TypeProto]:
    """The types the main graph states: its initializers', inputs', value_info's, outputs'
    (initializer types made in ``pool`` when given)."""
    types: dict[str, TypeProto] = {}
    graph = model.graph
    for tensor in graph.initializer:
        types[tensor.name] = tensor_type(tensor, pool)
    for vi in (*graph.input, *graph.value_info, *graph.output):
        if vi.type.WhichOneof("value") is not None:
            types[vi.name] = vi.type
    return types


def add_inferred_types(model: ModelProto, types: dict[str, TypeProto], nodes, initializers) -> None:
    """What onnx infers for ``nodes`` (reading ``initializers``), where ``types`` knows no rank."""
    for name, inferred in inferred_types(light_model(model, nodes, initializers)).items():
        if name not in types or _rank(types[name]) is None:
            types[name] = inferred


def refine_symbolic_dims(model: ModelProto, nodes, initializers, types: dict[str, TypeProto],
                         inputs=None, outputs=None, opsets: dict[str, int] | None = None,
                         view=None) -> int:
    """Name the dims behind shapes computed at run time (symbolic_shapes.py), re-inferring
    ``nodes`` as declared types improve; in place, returns how many types improved.
    ``view``: a GraphView of exactly these nodes, with ``types`` as its types."""
    nodes, initializers = list(nodes), list(initializers)
    inputs = list(model.graph.input if inputs is None else inputs)
    sources = {t.name for t in initializers} | {i.name for i in inputs}

    def infer(declared):
        declared = [vi for vi in declared if vi.name not in sources]
        return inferred_types(light_model(model, nodes, initializers, inputs, outputs, declared, opsets))

    return refine_computed_shapes(nodes, initializers, types, infer, view)


def _known_dims(type_proto: TypeProto | None) -> int:
    shape = shape_of(type_proto)
    return -1 if shape is None else sum(isinstance(d, int) for d in shape)


def refine_types(types: dict[str, TypeProto], light: ModelProto) -> int:
    """Re-run inference on ``light`` and keep every type it knows better (more static
    dims); returns how many improved.  Used after constant folding resolved shapes."""
    improved = 0
    for name, new in inferred_types(light).items():
        old = types.get(name)
        if old is None or (old != new and _known_dims(new) > _known_dims(old)):
            types[name] = new
            improved += 1
    return improved


def _rank(type_proto: TypeProto | None) -> int | None:
    if type_proto is None or not type_proto.HasField("tensor_type"):
        return None
    if not type_proto.tensor_type.HasField("shape"):
        return None
    return len(type_proto.tensor_type.shape.dim)


def infer_node_types(node: onnx.NodeProto, input_types: dict[str, TypeProto],
                     opsets: dict[str, int]) -> dict[str, TypeProto]:
    """Output types of one node from its input types ({} when onnx cannot tell)."""
    domain = normalize_domain(node.domain)
    if domain not in ("", "ai.onnx"):
        return _stand_in_types(node, input_types, opsets)
    version = opsets.get(domain)
    try:
        schema = onnx.defs.get_schema(node.op_type, version or onnx.defs.onnx_opset_version(), domain)
        return dict(shape_inference.infer_node_outputs(
            schema, node, input_types,
            opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()]))
    except Exception:
        return {}


def _stand_in_types(node: onnx.NodeProto, input_types: dict[str, TypeProto],
                    opsets: dict[str, int]) -> dict[str, TypeProto]:
    """A contrib node's output types: its stand-ins' (see stand_ins.py), one by one."""
    def type_of(value: str):
        shape = shape_of(input_types.get(value))
        return None if shape is None else (input_types[value].tensor_type.elem_type, shape)

    replacement = stand_ins(node, type_of)
    if replacement is None:
        return {}
    known = dict(input_types)
    for stub in replacement[1]:
        known[stub.name] = tensor_type(stub)
    standard = {d: v for d, v in opsets.items() if d in ("", "ai.onnx")}
    for part in replacement[0]:
        known.update(infer_node_types(part, {i: known[i] for i in part.input if i in known}, standard))
    return {o: known[o] for o in node.output if o in known}


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
    dims = _SHAPES.get(key, _UNREAD)
    if dims is _UNREAD:
        if len(_SHAPES) >= _MAX_REMEMBERED:
            _SHAPES.clear()
        dims = _SHAPES[key] = _read_shape(type_proto)
    return None if dims is None else list(dims)


_SHAPES: dict[bytes, tuple | None] = {}
_UNREAD = object()
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
