"""Value types (element type + shape): from the model, from onnx shape inference, per node.

Shape inference runs once per model on a copy whose large initializers carry no data (so
a big model is not duplicated in memory); nodes created later get their types inferred one
at a time, lazily, when a rule asks.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import overload

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, TypeProto, ValueInfoProto, helper, shape_inference

from ..onnx_facts.schemas import normalize_domain
from .data_propagation import data_propagation_safe
from .proto_pool import ProtoPool
from .stand_ins import needs_stand_in, stand_ins
from .symbolic_shapes import refine_computed_shapes
from .type_reading import is_known_dim, known_dim_count, shape_of, type_string

SMALL_TENSOR = 1024  # elements: initializers up to this size keep their data for inference


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


@cache
def _itemsize(data_type: int) -> int:
    return np.dtype(helper.tensor_dtype_to_np_dtype(data_type)).itemsize


def light_model(
    model: ModelProto,
    nodes,
    initializers,
    inputs=None,
    outputs=None,
    value_info=None,
    opsets: dict[str, int] | None = None,
    with_stand_ins: bool = True,
) -> ModelProto:
    """A model of ``nodes`` for shape inference (the rest from ``model`` unless given):
    small initializers keep their data (shape computations read them), large ones are
    headers only, so nothing big is copied.  Contrib ops are given as their standard
    stand-ins unless ``with_stand_ins`` is false (then onnx leaves their outputs untyped)."""
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
    stubs: list[TensorProto] = []
    if with_stand_ins:
        stubs = _with_stand_ins(graph, nodes, initializers)
    else:
        graph.node.extend(nodes)
    graph.initializer.extend(stubs)  # headers, or the few ints a stand-in's Pad/Slice reads
    for tensor in initializers:
        if _numel(tensor) <= SMALL_TENSOR and tensor.data_location != TensorProto.EXTERNAL:
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
    if not any(needs_stand_in(node) for node in nodes):
        graph.node.extend(nodes)  # nothing to stand in for: one bulk copy
        return []
    declared = {t.name: (t.data_type, list(t.dims)) for t in initializers}
    for vi in (*graph.input, *graph.value_info):
        shape = shape_of(vi.type)
        if shape is not None and vi.name not in declared:
            declared[vi.name] = (vi.type.tensor_type.elem_type, shape)
    stubs: list[TensorProto] = []
    for node in nodes:
        replacement = stand_ins(node, declared.get) if needs_stand_in(node) else None
        if replacement is None:
            graph.node.append(node)
            continue
        graph.node.extend(replacement[0])
        stubs.extend(replacement[1])
    return stubs


def inferred_types(
    light: ModelProto, without_stand_ins: Callable[[], ModelProto] | None = None
) -> dict[str, TypeProto]:
    """What onnx shape inference (with data propagation) finds for ``light``'s values.

    Where inference fails on the whole model (a malformed node: a contrib op whose stand-in
    onnx cannot even read, such as a QLinearConcat with no inputs, raises instead of leaving
    its outputs untyped) and ``without_stand_ins`` gives the same model with contrib ops as
    they are, that is inferred instead: one hostile node costs the stand-ins' types, not
    every type of the model."""
    try:
        inferred = shape_inference.infer_shapes(light, strict_mode=False, data_prop=data_propagation_safe(light))
    except Exception:  # custom ops or a malformed corner (or out of memory): nothing inferred
        if without_stand_ins is None:
            return {}
        return inferred_types(without_stand_ins())
    return {
        vi.name: vi.type
        for vi in (*inferred.graph.value_info, *inferred.graph.output)
        if vi.type.WhichOneof("value") is not None
    }


def infer_model_types(model: ModelProto) -> dict[str, TypeProto]:
    """Types of every value of the main graph: what onnx infers, declarations filling what
    it leaves open (``merged_type``), then the dims computed shapes name
    (``refine_symbolic_dims``)."""
    types = source_types(model)
    graph = model.graph
    declared = declared_types(model)
    add_inferred_types(model, types, graph.node, graph.initializer, declared)
    for name, claimed in declared.items():
        types.setdefault(name, claimed)
    refine_symbolic_dims(model, graph.node, graph.initializer, types)
    return types


def infer_body_types(
    model: ModelProto,
    graph: onnx.GraphProto,
    outer_types: dict[str, TypeProto],
    outer_constants: dict[str, TensorProto],
) -> dict[str, TypeProto]:
    """Types of every value of a subgraph (an If branch, a Loop body) as the main graph's
    are found (``infer_model_types``): the body as a model of its own whose inputs are its
    own and the enclosing graphs' values it reads (``outer_types``), those that are
    initializers there (``outer_constants``) given as initializers (headers only when
    large: nothing big is copied).  Node-by-node inference alone knows far less: no
    symbolic dims behind computed shapes, no reading of a Range's bounds."""
    body = ModelProto()
    body.ir_version = model.ir_version
    body.opset_import.extend(model.opset_import)
    body.functions.extend(model.functions)
    body.graph.name = graph.name
    body.graph.node.extend(graph.node)
    body.graph.input.extend(graph.input)
    body.graph.output.extend(graph.output)
    body.graph.value_info.extend(graph.value_info)
    owned = {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    for tensor in (*graph.initializer, *(t for n, t in outer_constants.items() if n not in owned)):
        if _numel(tensor) <= SMALL_TENSOR and tensor.data_location != TensorProto.EXTERNAL:
            body.graph.initializer.append(tensor)
        else:
            stub = body.graph.initializer.add()
            stub.name, stub.data_type = tensor.name, tensor.data_type
            stub.dims.extend(tensor.dims)
    for name, type_proto in outer_types.items():
        if name not in owned and name not in outer_constants:
            body.graph.input.append(helper.make_value_info(name, type_proto))
    return infer_model_types(body)


def source_types(model: ModelProto, pool: ProtoPool | None = None) -> dict[str, TypeProto]:
    """The types of the values the main graph starts from: its initializers' and inputs'
    (initializer types made in ``pool`` when given).  These define their values."""
    types: dict[str, TypeProto] = {}
    graph = model.graph
    for tensor in graph.initializer:
        types[tensor.name] = tensor_type(tensor, pool)
    for vi in graph.input:
        if vi.type.WhichOneof("value") is not None:
            types[vi.name] = vi.type
    return types


def declared_types(model: ModelProto) -> dict[str, TypeProto]:
    """What the main graph's value_info and outputs claim about computed values: hints that
    may be stale (an edited model), never trusted over inference (``merged_type``)."""
    graph = model.graph
    return {vi.name: vi.type for vi in (*graph.value_info, *graph.output) if vi.type.WhichOneof("value") is not None}


def add_inferred_types(
    model: ModelProto, types: dict[str, TypeProto], nodes, initializers, declared: dict[str, TypeProto]
) -> None:
    """What onnx infers for ``nodes`` (reading ``initializers``) without the model's own
    claims, merged with ``declared`` where inference leaves something open (``types``'
    entries stay)."""
    outputs = [ValueInfoProto(name=vi.name) for vi in model.graph.output]
    for name, inferred in inferred_types(
        light_model(model, nodes, initializers, outputs=outputs, value_info=()),
        lambda: light_model(model, nodes, initializers, outputs=outputs, value_info=(), with_stand_ins=False),
    ).items():
        if name not in types:
            types[name] = merged_type(inferred, declared.get(name))


def type_conflict(old: TypeProto | None, new: TypeProto | None, value: str) -> str | None:
    """How ``new`` contradicts ``old`` as types of ``value`` (kind, element type, rank,
    static dims; what either side does not know is not held against it); None if it
    does not."""
    if old is None or new is None:
        return None
    old_kind, new_kind = old.WhichOneof("value"), new.WhichOneof("value")
    if old_kind is None or new_kind is None:
        return None
    if old_kind != new_kind:
        return f"'{value}' would change from {old_kind} to {new_kind}"
    if old_kind != "tensor_type":
        return None
    old_elem, new_elem = old.tensor_type.elem_type, new.tensor_type.elem_type
    if old_elem and new_elem and old_elem != new_elem:
        return f"'{value}' would change from {type_string(old)} to {type_string(new)}"
    old_shape, new_shape = shape_of(old), shape_of(new)
    if old_shape is None or new_shape is None:
        return None
    if len(old_shape) != len(new_shape):
        return f"'{value}' would change from rank {len(old_shape)} to rank {len(new_shape)}"
    for axis, (a, b) in enumerate(zip(old_shape, new_shape)):
        if type(a) is int and type(b) is int and a != b:
            return f"'{value}' would change shape from {old_shape} to {new_shape} (axis {axis})"
    return None


@overload
def merged_type(inferred: TypeProto, declared: TypeProto | None) -> TypeProto: ...


@overload
def merged_type(inferred: TypeProto | None, declared: TypeProto | None) -> TypeProto | None: ...


def merged_type(inferred: TypeProto | None, declared: TypeProto | None) -> TypeProto | None:
    """A value's type: what inference found, with the dims (and element type) it left open
    taken from a declaration that agrees with it.  A declaration that contradicts inference
    (a stale value_info) is dropped whole: shapes come from inference.

    A dim is open when inference left it unknown or gave it a fresh ``unk__`` name, which
    equals nothing: the dynamo exporter declares the names behind a computed Reshape
    (``batch``, ``((samples//10)) - 1``) that onnx's inference cannot derive, and without
    them two tensors of one shape would not look alike."""
    if declared is None:
        return inferred
    if inferred is None:
        return declared
    if inferred.WhichOneof("value") != "tensor_type" or declared.WhichOneof("value") != "tensor_type":
        return inferred
    if type_conflict(declared, inferred, "") is not None:
        return inferred
    inferred_shape, declared_shape = shape_of(inferred), shape_of(declared)
    open_elem = not inferred.tensor_type.elem_type and declared.tensor_type.elem_type
    open_dims = declared_shape is not None and (
        inferred_shape is None
        or any(not is_known_dim(i) and is_known_dim(d) for i, d in zip(inferred_shape, declared_shape))
    )
    if not open_elem and not open_dims:
        return inferred
    elem = inferred.tensor_type.elem_type or declared.tensor_type.elem_type
    if inferred_shape is None:
        dims = declared_shape
    elif declared_shape is None:  # (only the element type was open)
        dims = inferred_shape
    else:
        dims = [d if not is_known_dim(i) and is_known_dim(d) else i for i, d in zip(inferred_shape, declared_shape)]
    return helper.make_tensor_type_proto(elem, dims)


def refine_symbolic_dims(
    model: ModelProto,
    nodes,
    initializers,
    types: dict[str, TypeProto],
    inputs=None,
    outputs=None,
    opsets: dict[str, int] | None = None,
    view=None,
    aliases: dict[str, str] | None = None,
) -> int:
    """Name the dims behind shapes computed at run time (symbolic_shapes.py), re-inferring
    ``nodes`` as declared types improve; in place, returns how many types improved.
    ``view``: a GraphView of exactly these nodes, with ``types`` as its types; ``aliases``:
    see ``refine_computed_shapes``."""
    nodes, initializers = list(nodes), list(initializers)
    inputs = list(model.graph.input if inputs is None else inputs)
    sources = {t.name for t in initializers} | {i.name for i in inputs}

    def infer(declared):
        declared = [vi for vi in declared if vi.name not in sources]
        return inferred_types(
            light_model(model, nodes, initializers, inputs, outputs, declared, opsets),
            lambda: light_model(model, nodes, initializers, inputs, outputs, declared, opsets, with_stand_ins=False),
        )

    return refine_computed_shapes(nodes, initializers, types, infer, view, aliases)


def _known_dims(type_proto: TypeProto | None) -> int:
    shape = shape_of(type_proto)
    return -1 if shape is None else sum(isinstance(d, int) for d in shape)


def _better(new: TypeProto, old: TypeProto) -> bool:
    """More static dims, or as many and more named ones (a dim an exporter named, where
    inference had left an unnamed one: a LayerNorm after a broadcast its bounds settled)."""
    static_new, static_old = _known_dims(new), _known_dims(old)
    return static_new > static_old or (static_new == static_old and known_dim_count(new) > known_dim_count(old))


def refine_types(
    types: dict[str, TypeProto], light: ModelProto, without_stand_ins: Callable[[], ModelProto] | None = None
) -> int:
    """Re-run inference on ``light`` and keep every type it knows better (``_better``);
    returns how many improved.  Used after constant folding resolved shapes.
    ``without_stand_ins``: see ``inferred_types``."""
    improved = 0
    for name, new in inferred_types(light, without_stand_ins).items():
        old = types.get(name)
        if old is None or (old != new and _better(new, old)):
            types[name] = new
            improved += 1
    return improved


def _rank(type_proto: TypeProto | None) -> int | None:
    if type_proto is None or not type_proto.HasField("tensor_type"):
        return None
    if not type_proto.tensor_type.HasField("shape"):
        return None
    return len(type_proto.tensor_type.shape.dim)


class NodeTypeError(Exception):
    """onnx's inference finds a node inconsistent (types that cannot bind its schema's
    constraints, shapes an op cannot take)."""


def infer_node_types(
    node: onnx.NodeProto,
    input_types: dict[str, TypeProto],
    opsets: dict[str, int],
    input_data: dict[str, TensorProto] | None = None,
    strict: bool = False,
) -> dict[str, TypeProto]:
    """Output types of one node from its input types ({} when onnx cannot tell).
    ``input_data``: contents of small constant inputs (a Reshape target...).  ``strict``:
    raise ``NodeTypeError`` when onnx finds the node inconsistent, instead of knowing nothing."""
    domain = normalize_domain(node.domain)
    if needs_stand_in(node):
        return _stand_in_types(node, input_types, opsets)
    version = opsets.get(domain)
    try:
        schema = onnx.defs.get_schema(node.op_type, version or onnx.defs.onnx_opset_version(), domain)
    except onnx.defs.SchemaError:
        return {}
    try:
        return dict(
            shape_inference.infer_node_outputs(
                schema,
                node,
                input_types,
                input_data or {},
                opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()],
            )
        )
    except (shape_inference.InferenceError, onnx.checker.ValidationError) as err:
        if strict:
            raise NodeTypeError(str(err).splitlines()[0] if str(err) else type(err).__name__) from None
        return {}
    except Exception:
        return {}


def _stand_in_types(
    node: onnx.NodeProto, input_types: dict[str, TypeProto], opsets: dict[str, int]
) -> dict[str, TypeProto]:
    """A contrib node's output types: its stand-ins' (see stand_ins.py), one by one."""

    def type_of(value: str):
        shape = shape_of(input_types.get(value))
        return None if shape is None else (input_types[value].tensor_type.elem_type, shape)

    replacement = stand_ins(node, type_of)
    if replacement is None:
        return {}
    known = dict(input_types)
    data = {stub.name: stub for stub in replacement[1] if stub.raw_data or stub.int64_data}
    for stub in replacement[1]:
        known[stub.name] = tensor_type(stub)
    standard = {d: v for d, v in opsets.items() if d in ("", "ai.onnx")}
    for part in replacement[0]:
        reads = {i: known[i] for i in part.input if i in known}
        known.update(infer_node_types(part, reads, standard, {i: data[i] for i in part.input if i in data}))
    return {o: known[o] for o in node.output if o in known}
