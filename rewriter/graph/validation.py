"""What a model must be before the engine touches it: versions onnx here knows, tensors whose
declared sizes match their data, nodes whose domains are imported and whose ops and input
counts their schemas allow.  Each problem is one ``ModelError`` line."""

from __future__ import annotations

import onnx
from onnx import ModelProto, TensorProto
from onnx import __version__ as ONNX_VERSION

from ..errors import ModelError
from ..onnx_facts.schemas import find_schema, latest_opset
from .tensor_data import all_graphs, element_count, graph_tensors, known_data_type, raw_bytes_needed
from .view import GraphView


def check_versions(model: ModelProto, opsets: dict[str, int]) -> None:
    """Refuse IR versions and standard opsets newer (or older) than onnx here knows: their
    semantics are unknown, so no rewrite could be trusted."""
    if not 1 <= model.ir_version <= onnx.IR_VERSION:
        raise ModelError(
            f"IR version {model.ir_version} is not one this engine knows "
            f"(onnx {ONNX_VERSION} reads 1 to {onnx.IR_VERSION})"
        )
    for domain, version in opsets.items():
        if domain not in ("", "ai.onnx.ml", "ai.onnx.training", "ai.onnx.preview.training"):
            continue  # custom and contrib domains: their nodes are kept as they are
        latest = latest_opset(domain)
        if not 1 <= version <= latest:
            raise ModelError(
                f"opset {version} of {domain or 'ai.onnx'} is not one this engine knows "
                f"(onnx {ONNX_VERSION} knows 1 to {latest})"
            )


_FIELDS: dict[int, tuple[str, int]] = {  # data type -> (typed field, values per element) when not in raw_data
    TensorProto.FLOAT: ("float_data", 1),
    TensorProto.DOUBLE: ("double_data", 1),
    TensorProto.INT64: ("int64_data", 1),
    TensorProto.UINT64: ("uint64_data", 1),
    TensorProto.INT32: ("int32_data", 1),
    TensorProto.INT8: ("int32_data", 1),
    TensorProto.UINT8: ("int32_data", 1),
    TensorProto.INT16: ("int32_data", 1),
    TensorProto.UINT16: ("int32_data", 1),
    TensorProto.BOOL: ("int32_data", 1),
    TensorProto.FLOAT16: ("int32_data", 1),
    TensorProto.BFLOAT16: ("int32_data", 1),
    TensorProto.COMPLEX64: ("float_data", 2),
    TensorProto.COMPLEX128: ("double_data", 2),
    TensorProto.STRING: ("string_data", 1),
}


def tensor_problem(tensor: TensorProto) -> str | None:
    """Why a tensor's data cannot be its declared type and shape (None when it can)."""
    if tensor.data_location == TensorProto.EXTERNAL:
        return None  # (checked against its file before it was read: model_io.py)
    if any(d < 0 for d in tensor.dims):
        return f"negative dimension in {list(tensor.dims)}"
    if tensor.HasField("raw_data") and tensor.data_type != TensorProto.STRING:
        needed = raw_bytes_needed(tensor)
        if needed is None:
            return None
        # exact (the writer relies on it); reading raw_data copies it, one tensor at a
        # time, which is cheaper than upb's ByteSize(): that serializes the tensor
        held = len(tensor.raw_data)
        if held != needed:
            return (
                f"holds {held} bytes, its shape {list(tensor.dims)} of "
                f"{TensorProto.DataType.Name(tensor.data_type).lower()} needs {needed}"
            )
        return None
    if tensor.data_type not in _FIELDS:
        return None
    count = element_count(tensor)
    field, per = _FIELDS[tensor.data_type]
    held = len(getattr(tensor, field))
    if held != count * per and not (held == 0 and count == 0):
        return f"holds {held} values, its shape {list(tensor.dims)} needs {count * per}"
    return None


def check_types(model: ModelProto) -> None:
    """Refuse element types onnx does not define, in every tensor and declared value of
    every graph, before anything reads them (they were KeyErrors deep inside)."""
    for graph in all_graphs(model.graph):
        for sparse in graph.sparse_initializer:
            for tensor in (sparse.values, sparse.indices):
                if not known_data_type(tensor.data_type):
                    raise ModelError(
                        f"malformed sparse initializer '{sparse.values.name}': data type "
                        f"{tensor.data_type} is not one onnx defines"
                    )
                if tensor.data_location == TensorProto.EXTERNAL:
                    raise ModelError(
                        f"sparse initializer '{sparse.values.name}' keeps its data "
                        f"outside the model, which is not supported"
                    )
        for vi in (*graph.input, *graph.output, *graph.value_info):
            kind = vi.type.WhichOneof("value")
            elem = (
                vi.type.tensor_type.elem_type
                if kind == "tensor_type"
                else vi.type.sparse_tensor_type.elem_type
                if kind == "sparse_tensor_type"
                else 0
            )
            if elem and not known_data_type(elem):
                raise ModelError(
                    f"malformed graph: value '{vi.name}' has element type {elem}, which onnx does not define"
                )
    for _, tensor in graph_tensors(model.graph):
        if not known_data_type(tensor.data_type):
            raise ModelError(
                f"malformed initializer '{tensor.name}': data type {tensor.data_type} is not one onnx defines"
            )


def check_node_schema(view: GraphView, node_id: int, opsets: dict[str, int]) -> None:
    """Standard-domain nodes must be ops their opset defines, with their inputs given."""
    domain, op = view.node_key(node_id)
    if domain not in ("", "ai.onnx.ml"):
        return  # contrib and custom ops: kept as they are
    version = opsets.get(domain)
    if version is None:
        raise ModelError(
            f"malformed graph: {_label(view.node(node_id))} uses domain {domain}, which the model does not import"
        )
    info = find_schema(domain, op, version)
    if info is None:
        raise ModelError(
            f"malformed graph: {_label(view.node(node_id))} is {op}, which "
            f"{domain or 'ai.onnx'} opset {version} does not define"
        )
    given = view.inputs(node_id)
    count = len(given)
    while count and not given[count - 1]:
        count -= 1
    if not info.min_inputs <= count <= info.max_inputs and not (
        count < info.min_inputs and len(given) >= info.min_inputs
    ):
        raise ModelError(
            f"malformed graph: {_label(view.node(node_id))} ({op}) has {count} inputs, "
            f"opset {version} takes {info.min_inputs} to {info.max_inputs}"
        )
    if "" in given:
        proto = view.node(node_id)
        for index, name in enumerate(given):
            if not name and index < len(info.required_inputs) and info.required_inputs[index]:
                raise ModelError(
                    f"malformed graph: {_label(proto)} ({proto.op_type}) leaves its required input {index} empty"
                )


def _label(proto: onnx.NodeProto) -> str:
    return f"node '{proto.name or proto.op_type}'"
