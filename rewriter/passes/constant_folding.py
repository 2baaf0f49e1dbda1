"""Built-in pass ``constant_folding``: what ONNX Runtime's level-1 ConstantFolding does.

* ``Constant`` nodes become initializers;
* ``Shape`` / ``Size`` of a value whose shape is static become initializers;
* ``Identity`` of an initializer is dropped, its readers read the initializer (exporters
  share weights this way; a copy would double them);
* every other standard-domain node whose inputs are all constant is evaluated — all of
  them at once, in one onnxruntime session (the reference executor) — and replaced by
  initializers holding its outputs.

Not folded: nondeterministic ops, control flow, QuantizeLinear/DequantizeLinear (QDQ
patterns must stay visible to later fusions), nodes producing graph outputs, and outputs
that would blow the model up (larger than 16 MiB and more than twice their inputs), and
nodes reading more than 64 MiB of constants (evaluating them would copy the weights).
"""
from __future__ import annotations


import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..graph.load_constants import constant_node_tensor
from ..graph.model import ModelState
from ..graph.types import tensor_nbytes
from ..graph.view import GraphView, NodeId

NOT_FOLDED = frozenset({
    "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
    "Bernoulli", "If", "Loop", "Scan", "QuantizeLinear", "DequantizeLinear",
    "DynamicQuantizeLinear", "Constant", "Shape", "Size", "SequenceConstruct", "SequenceEmpty",
    "SequenceInsert", "SequenceErase", "SequenceAt", "SplitToSequence", "ConcatFromSequence",
    "SequenceLength", "SequenceMap", "Optional", "OptionalGetElement", "OptionalHasElement",
})
_LARGE_OUTPUT = 16 << 20
LARGE_INPUT = 64 << 20  # bytes of constants a folded node may read


def fold_constants(state: ModelState, changed: list[NodeId] | None = None) -> int:
    """Fold what can be folded; returns the number of nodes removed.

    With ``changed`` (nodes created or rewired since the last run) only computations those
    nodes start are looked at: nothing else can have become constant."""
    view = state.view
    return (_fold_constant_nodes(view) + _fold_static_shapes(view)
            + _fold_computations(state, changed))


def _fold_constant_nodes(view: GraphView) -> int:
    count = 0
    for node_id in view.nodes_by_op("", "Constant"):
        proto = view.node(node_id)
        out = proto.output[0] if proto.output else ""
        if not out or view.is_graph_output(out):
            continue
        tensor = constant_node_tensor(proto, view.protos)
        if tensor is None:
            continue
        view.remove_node(node_id)
        view.add_initializer(tensor)
        count += 1
    return count


def _fold_static_shapes(view: GraphView) -> int:
    count = 0
    for op in ("Shape", "Size"):
        for node_id in view.nodes_by_op("", op):
            proto = view.node(node_id)
            if not proto.input or not proto.output or view.is_graph_output(proto.output[0]):
                continue
            shape = view.shape(proto.input[0])
            if shape is None or not all(isinstance(d, int) for d in shape) or \
                    any(a.ref_attr_name for a in proto.attribute):
                continue
            if op == "Shape":
                rank = len(shape)
                start = view.attribute(node_id, "start") or 0
                end = view.attribute(node_id, "end")
                end = rank if end is None else end
                start, end = (max(0, min(rank, v + rank if v < 0 else v)) for v in (start, end))
                value = np.asarray(shape[start:end], dtype=np.int64)
            else:
                value = np.asarray(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
            out = proto.output[0]
            inputs = [i for i in proto.input if i]
            view.remove_node(node_id)
            view.add_initializer(numpy_helper.from_array(value, out))
            view.remove_dead(inputs)
            count += 1
    return count


def _foldable(view: GraphView, node_id: NodeId, constant_values: set[str]) -> bool:
    domain, op = view.node_key(node_id)
    if domain != "" or op in NOT_FOLDED:
        return False
    is_constant = view.is_constant
    inputs = view.inputs(node_id)
    for value in inputs:  # the usual reason, so asked first
        if value and value not in constant_values and not is_constant(value):
            return False
    if view.has_subgraphs(node_id) or any(a.ref_attr_name for a in view.node(node_id).attribute):
        return False  # control flow; or inside a function, an attribute set by the caller
    if any(o and view.is_graph_output(o) for o in view.outputs(node_id)):
        return False
    # evaluating copies its inputs into a session: big weights stay as they are
    return sum(_nbytes(view, i) for i in inputs if i) <= LARGE_INPUT


def _foldable_nodes(view: GraphView, changed: list[NodeId] | None = None) -> list[NodeId]:
    """Standard-domain nodes computable from constants alone, in topological order: all of
    them, or those reachable from ``changed`` through foldable nodes."""
    constant_values: set[str] = set()
    chosen: dict[NodeId, None] = {}
    if changed is None:  # what reads a constant starts every constant computation
        changed = [c for name in view.constant_values() for c, _ in view.consumer_slots(name)]
    queue = list(changed)
    while queue:
        node_id = queue.pop()
        if node_id in chosen or not _foldable(view, node_id, constant_values):
            continue
        chosen[node_id] = None
        constant_values.update(o for o in view.outputs(node_id) if o)
        queue.extend(view.downstream(node_id))  # rechecked now that this input is constant
    return view.topological_ids(chosen) if chosen else []


def _run(state: ModelState, nodes: list[onnx.NodeProto],
         initializers: list[TensorProto]) -> dict[str, np.ndarray]:
    """Run ``nodes`` on ``initializers`` in onnxruntime (optimizations off); {} on failure."""
    import onnxruntime as ort

    outputs = [onnx.ValueInfoProto(name=o) for n in nodes for o in n.output if o]
    model = helper.make_model(
        helper.make_graph(nodes, "fold", [], outputs, initializers),
        opset_imports=[helper.make_opsetid(d, v) for d, v in state.opsets.items()
                       if d in ("", "ai.onnx.ml")])
    model.ir_version = min(state.source.ir_version or _ORT_SAFE_IR, _ORT_SAFE_IR)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    # a few small constants: one thread, and no thread pool left spinning beside the engine
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        session = ort.InferenceSession(model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        return dict(zip(names, session.run(names, {})))
    except Exception:  # an op ORT cannot run on CPU, a type it refuses...: not folded
        return {}


_ORT_SAFE_IR = 10  # every onnxruntime this project supports loads IR 10


def _fold_computations(state: ModelState, changed: list[NodeId] | None) -> int:
    view = state.view
    node_ids = _foldable_nodes(view, changed)
    count = 0
    for node_id in node_ids:  # Identity of a constant: its readers read the constant itself
        proto = view.node(node_id)
        if proto.op_type == "Identity" and view.is_initializer(proto.input[0]):
            view.replace_uses(proto.output[0], proto.input[0])  # (no copy of the weights)
            view.remove_node(node_id)
            count += 1
    node_ids = [n for n in node_ids if view.has_node(n)]
    if not node_ids:
        return count
    nodes = [view.node(n) for n in node_ids]
    produced = {o for n in nodes for o in n.output if o}
    needed = {i for n in nodes for i in n.input if i and i not in produced}
    results = _run(state, nodes, [view.initializers[i] for i in sorted(needed)])
    if not results:  # one bad node spoils a batch: fold one node at a time instead
        for node in nodes:
            inputs = [i for i in node.input if i]
            if all(i in results or view.is_initializer(i) for i in inputs):
                tensors = [view.initializers[i] if view.is_initializer(i) else
                           numpy_helper.from_array(np.asarray(results[i]), i) for i in set(inputs)]
                results.update(_run(state, [node], tensors))
    for node_id in node_ids:
        proto = view.node(node_id)
        outputs = [o for o in proto.output if o]
        if not outputs or not all(o in results for o in outputs):
            continue
        input_bytes = sum(_nbytes(view, i) for i in proto.input if i)
        if any(results[o].nbytes > _LARGE_OUTPUT and results[o].nbytes > 2 * input_bytes
               for o in outputs):
            continue
        inputs = [i for i in proto.input if i]
        view.remove_node(node_id)
        for out in outputs:
            if view.consumer_count(out):
                view.add_initializer(numpy_helper.from_array(np.asarray(results[out]), out))
        view.remove_dead(inputs)
        count += 1
    return count


def _nbytes(view: GraphView, value: str) -> int:
    """Size of an initializer's contents, from its header (no data is read)."""
    tensor = view.initializers.get(value)
    return 0 if tensor is None else tensor_nbytes(tensor)
