"""float16 that the CPU provider cannot run, computed in float32: ONNX Runtime's
InsertCastTransformer, done once after partitioning instead of at every session start.

onnxruntime's CPU provider has float16 kernels for data movement and a few normalizations
only (Reshape, Transpose, Gather, LayerNormalization...), not for MatMul, Add, Mul, Softmax
or most contrib ops.  A float16 model placed on the CPU still runs: at session creation
onnxruntime wraps every such node in Casts to float32 and back, and with its optimizations
on it then removes the Cast pairs between neighbours, so in effect the graph computes in
float32 between a few Casts.  With optimizations off (our output run offline) every node
keeps its own pair of Casts, which costs more than the fusions save; and the extended
level's fusions would never form, because the fused ops have no float16 CPU kernels either.

So after partitioning, the CPU-placed nodes that have no kernel for their float16 types
but one in float32 are rewritten in float32, and so are neighbours that run either way when
most of their float16 edges already lead to float32 nodes (a Reshape between two MatMuls,
a LayerNormalization between residual Adds); float16 constants they read get float32
copies; other float16 values are cast at the edge of the float32 region, once each.  The
Casts at the edge merge with the model's own as onnxruntime merges them with those it
inserts (its RemoveDuplicateCastTransformer, which runs at every optimization level): a
Cast from float to float16 feeding the region is skipped (its input is read directly);
one from another type that feeds only the region becomes a Cast from that type to float
(an int64 size computed in float16: onnxruntime does not round it to float16 either); a
Cast to float reading the region reads the float32 value, and when only Casts read a
region value, they read the float32 value (Ceil(x) -> Cast to int64 without a float16
step).  The numbers are those onnxruntime computes for the model at any optimization
level: each op in float32, without rounding to float16 between ops (closer to the float32
model the float16 one was converted from).

Not converted: nodes placed on other providers, Casts, nodes with subgraphs, ops whose
attributes name a type or hold a tensor, and nodes whose float32 form has no kernel either.
"""

from __future__ import annotations

import numpy as np
from onnx import AttributeProto, NodeProto, TensorProto, TypeProto, helper, numpy_helper

from ..graph.state import GraphState
from ..graph.view import GraphView, NodeId
from ..onnx_facts.placement import EXECUTION_PROVIDER_KEY
from ..onnx_facts.provenance import FLOAT16_STEP, record_provenance
from ..onnx_facts.providers import CPU
from .kernels import KernelTable

_F16, _F32 = TensorProto.FLOAT16, TensorProto.FLOAT
_TYPED_ATTRIBUTES = frozenset({"to", "dtype", "output_dtype", "saturate"})
# element types a Cast to float16 reads that onnxruntime lets its inserted Cast to float
# read directly (strings and the 8- and 4-bit types are not merged here)
_NUMERIC = frozenset(
    {
        TensorProto.BOOL,
        TensorProto.INT8,
        TensorProto.INT16,
        TensorProto.INT32,
        TensorProto.INT64,
        TensorProto.UINT8,
        TensorProto.UINT16,
        TensorProto.UINT32,
        TensorProto.UINT64,
        TensorProto.DOUBLE,
        TensorProto.BFLOAT16,
    }
)


def compute_float16_in_float32(state: GraphState, cpu: KernelTable) -> int:
    """Rewrite the CPU's float16 nodes without kernels (and neighbours, see the module
    docstring) in float32; returns how many nodes now compute in float32."""
    view = state.view
    on_cpu = [n for n in view.node_ids() if view.metadata(n).get(EXECUTION_PROVIDER_KEY) == CPU]
    candidates = {n for n in on_cpu if _convertible(view, n) and cpu.supports_in_float32(view, n)}
    region = {n for n in candidates if not cpu.supports(view, view.node(n), n)}
    if not region:
        return 0
    _grow(view, region, candidates - region)
    _rewrite(view, region)
    return len(region)


def _float16_values(view: GraphView, node_id: NodeId) -> tuple[list[str], list[str]]:
    inputs = [v for v in view.inputs(node_id) if v and view.elem_type(v) == _F16]
    outputs = [v for v in view.outputs(node_id) if v and view.elem_type(v) == _F16]
    return inputs, outputs


def _convertible(view: GraphView, node_id: NodeId) -> bool:
    proto = view.node(node_id)
    if proto.op_type == "Cast" or view.has_subgraphs(node_id):
        return False
    if any(
        a.name in _TYPED_ATTRIBUTES or a.type in (AttributeProto.TENSOR, AttributeProto.TENSORS)
        for a in proto.attribute
    ):
        return False
    inputs, outputs = _float16_values(view, node_id)
    return bool(inputs or outputs)


def _grow(view: GraphView, region: set[NodeId], optional: set[NodeId]) -> None:
    """Add the nodes of ``optional`` most of whose float16 edges lead into the region (a
    constant input counts as one: it is converted once, ahead of time).  A worklist: a node
    is looked at again only when a neighbour joins the region (one sweep per change would be
    quadratic along a long chain)."""

    def neighbours(node_id: NodeId) -> list[NodeId]:
        inputs, outputs = _float16_values(view, node_id)
        found = [p for p in map(view.producer, inputs) if p is not None]
        found += [c for value in outputs for c, _ in view.consumers(value)]
        return found

    def joins(node_id: NodeId) -> bool:
        inside = outside = 0
        inputs, outputs = _float16_values(view, node_id)
        for value in inputs:
            if view.producer(value) in region or view.is_initializer(value):
                inside += 1
            else:
                outside += 1
        for value in outputs:
            readers = [c for c, _ in view.consumers(value)]
            inside += sum(r in region for r in readers)
            outside += sum(r not in region for r in readers) + view.is_graph_output(value)
        return bool(inside) and inside >= outside

    pending = sorted({n for r in region for n in neighbours(r) if n in optional} | optional, reverse=True)
    queued = set(pending)
    while pending:
        node_id = pending.pop()
        queued.discard(node_id)
        if node_id in region or not joins(node_id):
            continue
        region.add(node_id)
        for other in neighbours(node_id):
            if other in optional and other not in region and other not in queued:
                pending.append(other)
                queued.add(other)


def _float_type(type_proto: TypeProto | None) -> TypeProto:
    converted = TypeProto()
    if type_proto is not None:
        converted.CopyFrom(type_proto)
    converted.tensor_type.elem_type = _F32
    return converted


def _rewrite(view: GraphView, region: set[NodeId]) -> None:
    as_float: dict[str, str] = {}  # float16 value -> its float32 version

    def float_version(value: str) -> str:
        """The float32 version of a float16 value the region reads from outside."""
        if value in as_float:
            return as_float[value]
        producer = view.producer(value)
        source = view.inputs(producer)[0] if producer is not None and view.node(producer).op_type == "Cast" else ""
        if source and view.elem_type(source) == _F32:  # Cast(float -> float16): skip it
            as_float[value] = source
            return source
        name = view.fresh_value_name(f"{value}_float32")
        array = view.constant(value) if view.is_initializer(value) else None
        if source and view.elem_type(source) in _NUMERIC and _feeds_only(view, value, region):
            _add_cast(view, source, name, _F32)  # Cast(x -> float16 -> float) read as Cast(x -> float)
            view.widened[name] = _F16
        elif array is not None:
            view.add_initializer(numpy_helper.from_array(np.asarray(array, np.float32), name))
            view.widened[name] = _F16
        else:
            _add_cast(view, value, name, _F32)
            view.widened[name] = _F16
        view.types[name] = _float_type(view.type_of(value))
        as_float[value] = name
        return name

    renamed: dict[str, str] = {}  # float16 output of a region node -> its float32 name
    for node_id in region:
        for value in _float16_values(view, node_id)[1]:
            renamed[value] = view.fresh_value_name(f"{value}_float32")
            view.types[renamed[value]] = _float_type(view.type_of(value))
            view.widened[renamed[value]] = _F16
    for node_id in sorted(region, key=view.order_of):
        proto = NodeProto()
        proto.CopyFrom(view.node(node_id))
        for slot, value in enumerate(proto.input):
            if value in renamed:
                proto.input[slot] = renamed[value]
            elif value and view.elem_type(value) == _F16:
                proto.input[slot] = float_version(value)
        for slot, value in enumerate(proto.output):
            if value in renamed:
                proto.output[slot] = renamed[value]
        order = view.order_of(node_id)
        view.remove_node(node_id)
        view.add_node(proto, order)
    for value, name in renamed.items():  # readers outside the region: a Cast back to float16
        for reader, in_slot in list(view.consumers(value)):
            reader_proto = view.node(reader)
            if reader_proto.op_type == "Cast" and isinstance(in_slot, int) and _cast_target(reader_proto) == _F32:
                # Cast(float16 -> float) of the float32 value is the value itself
                (cast_output,) = view.outputs(reader)
                view.remove_node(reader)
                if not view.is_graph_output(cast_output):
                    view.replace_uses(cast_output, name)
                elif view.producer(name) is not None and not view.is_graph_output(name) and name in renamed.values():
                    view.rename_value(name, cast_output)  # the region's value takes the output's name
                    view.widened[cast_output] = view.widened.pop(name, _F16)
                    renamed[value] = name = cast_output
                else:
                    _add_cast(view, name, cast_output, _F32)
        readers = view.consumers(value)
        if readers and not view.is_graph_output(value) and all(_is_cast(view, r, slot) for r, slot in readers):
            for reader, in_slot in readers:  # Cast(float -> float16 -> T) read as Cast(float -> T)
                assert isinstance(in_slot, int)
                view.set_input(reader, in_slot, name)
        elif readers or view.is_graph_output(value):
            _add_cast(view, name, value, _F16)
    view.remove_dead(list(as_float))  # skipped Casts and float16 constants nothing reads now


def _feeds_only(view: GraphView, value: str, region: set[NodeId]) -> bool:
    """``value`` is read by nodes of ``region`` only (and is not a graph output)."""
    return not view.is_graph_output(value) and all(reader in region for reader, _ in view.consumers(value))


def _is_cast(view: GraphView, node_id: NodeId, slot: object) -> bool:
    return isinstance(slot, int) and view.node(node_id).op_type == "Cast"


def _cast_target(proto: NodeProto) -> int | None:
    for attribute in proto.attribute:
        if attribute.name == "to":
            return int(attribute.i)
    return None


def _add_cast(view: GraphView, source: str, target: str, to: int) -> NodeId:
    """A Cast placed on the CPU, ordered right after ``source``'s producer."""
    proto = helper.make_node("Cast", [source], [target], to=to, name=view.fresh_node_name("Float16InFloat32Cast"))
    producer = view.producer(source)
    order = None
    if producer is not None:
        first, second = view.order_of(producer)
        order = (first, second + 1)
    record_provenance(proto, FLOAT16_STEP, ())
    node_id = view.add_node(proto, order)
    view.set_metadata(node_id, EXECUTION_PROVIDER_KEY, CPU)
    return node_id
