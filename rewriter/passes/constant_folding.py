"""Built-in pass ``constant_folding``: what ONNX Runtime's level-1 ConstantFolding does.

* ``Constant`` nodes become initializers;
* ``Shape`` / ``Size`` of a value whose shape is static become initializers;
* ``Identity`` of an initializer is dropped, its readers read the initializer (exporters
  share weights this way; a copy would double them);
* every other standard-domain node whose inputs are all constant is evaluated — all of
  them at once, in one onnxruntime session (the reference executor) — and replaced by
  initializers holding its outputs;
* an ``If`` whose condition is a constant is replaced by the nodes of the branch it takes
  (TorchScript traces keep a shape test as an ``If`` on a folded condition: ViTDet's
  position-embedding resize), unless that branch holds graphs of its own.

Not folded: nondeterministic ops, control flow, DequantizeLinear (QDQ patterns must stay
visible to later fusions; a QuantizeLinear of a constant is folded into the integers its
DequantizeLinear reads, as onnxruntime folds it) unless only QuantizeLinears read it (a
constant requantized: a quantized Pad's value once its Quantize moved ahead of it, which no
fusion reads as a pair), nodes producing graph outputs, and outputs
that would blow the model up (larger than 16 MiB and more than twice their inputs), and
nodes reading more than 64 MiB of constants (evaluating them would copy the weights).

Sizes are known before anything is evaluated: an output's size comes from its inferred
type (or, for ops that cannot make more than they read, from its inputs); a node whose
output size is unknown is not folded.  (A 126-byte model's Expand to 20000 x 20000 was
evaluated, 1.7 GB, before its size was checked.)  Nodes are evaluated in sessions of at
most 64 MiB of inputs and outputs, and all folding together may add at most twice the
constants the graph started with (plus 64 MiB): a chain of Concats doubling a constant
stops being folded there, and the rest of the graph is still optimized.  The growth counted
is net: constants whose every reader is folded go away.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import NodeProto, TensorProto, helper, numpy_helper

from ..graph.state import GraphState
from ..graph.subgraphs import has_subgraphs
from ..graph.tensor_data import bits_per_element
from ..graph.types import tensor_nbytes
from ..graph.view import GraphView, NodeId
from ..onnx_facts.placement import copy_placement
from .on_load import constant_node_tensor

NOT_FOLDED = frozenset(
    {
        "RandomNormal",
        "RandomUniform",
        "RandomNormalLike",
        "RandomUniformLike",
        "Multinomial",
        "Bernoulli",
        "If",
        "Loop",
        "Scan",
        "DequantizeLinear",
        "DynamicQuantizeLinear",
        "Constant",
        "Shape",
        "Size",
        "SequenceConstruct",
        "SequenceEmpty",
        "SequenceInsert",
        "SequenceErase",
        "SequenceAt",
        "SplitToSequence",
        "ConcatFromSequence",
        "SequenceLength",
        "SequenceMap",
        "Optional",
        "OptionalGetElement",
        "OptionalHasElement",
    }
)
_LARGE_OUTPUT = 16 << 20
LARGE_INPUT = 64 << 20  # bytes of constants a folded node may read
BATCH_BYTES = 64 << 20  # inputs plus outputs of one evaluation session
GROWTH = 2  # folding may add this many times the graph's first constants...
GROWTH_SLACK = 64 << 20  # ...plus this
_GROWTH_CACHE = "constant_folding_growth"  # view.pass_caches: {"allowed": bytes, "start": bytes}
# ops whose outputs hold at most as many elements as their inputs together (Cast may widen
# each element up to 8 times): their size is bounded when inference cannot tell it
_BOUNDED_BY_INPUTS = frozenset(
    {
        "Identity",
        "Reshape",
        "Flatten",
        "Squeeze",
        "Unsqueeze",
        "Transpose",
        "Cast",
        "CastLike",
        "Slice",
        "Concat",
        "Split",
        "Neg",
        "Abs",
        "Relu",
        "Sqrt",
        "Exp",
        "Log",
        "Reciprocal",
        "Floor",
        "Ceil",
        "Round",
        "Sign",
        "Not",
        "Sigmoid",
        "Tanh",
        "Erf",
        "Softmax",
        "LogSoftmax",
        "ReduceSum",
        "ReduceMean",
        "ReduceMax",
        "ReduceMin",
        "ReduceProd",
        "ReduceL1",
        "ReduceL2",
        "ArgMax",
        "ArgMin",
        "Shape",
        "Size",
    }
)


def fold_constants(state: GraphState, changed: list[NodeId] | None = None) -> int:
    """Fold what can be folded; returns the number of nodes removed.

    With ``changed`` (nodes created or rewired since the last run) only computations those
    nodes start are looked at: nothing else can have become constant."""
    view = state.view
    made_constant = _fold_constant_nodes(view) + _fold_static_shapes(view)
    if changed is not None:  # those folds may have removed some; what reads their values starts anew
        changed = [node_id for node_id in changed if view.has_node(node_id)]
        changed += [reader for value in made_constant for reader, _ in view.consumer_slots(value)]
    folded = len(made_constant) + _fold_computations(state, changed)
    return folded + _inline_constant_ifs(view)


def _inline_constant_ifs(view: GraphView) -> int:
    """Each ``If`` of a constant condition -> the nodes of its taken branch: the branch's
    own values keep their names (ONNX makes them unique in the model) unless the graph
    already has one, its initializers join the graph's, and each If output is the branch
    output it names (an Identity where the branch passes on an outer value or gives one
    value twice).  Returns the number of If nodes removed."""
    count = 0
    for node_id in view.nodes_by_op("", "If"):
        proto = view.node(node_id)
        condition = view.constant(proto.input[0]) if proto.input and proto.input[0] else None
        if condition is None or np.asarray(condition).size != 1:
            continue
        name = "then_branch" if bool(np.asarray(condition).reshape(-1)[0]) else "else_branch"
        branch = next((a.g for a in proto.attribute if a.name == name and a.type == onnx.AttributeProto.GRAPH), None)
        outputs = list(proto.output)
        if branch is None or len(branch.output) != len(outputs) or branch.sparse_initializer or branch.input:
            continue
        if any(has_subgraphs(inner) for inner in branch.node):
            continue  # nested bodies would need their reads renamed too
        produced = [o for inner in branch.node for o in inner.output if o]
        local = [t.name for t in branch.initializer] + produced
        renamed = {v: (view.fresh_value_name(v) if view.has_value(v) else v) for v in local}
        direct: dict[str, str] = {}  # a branch node's output -> the If output it becomes
        for value, out in zip((o.name for o in branch.output), outputs):
            if out and value in produced and value not in direct:
                direct[value] = out
        renamed.update(direct)
        metadata = view.metadata(node_id)
        read = [i for i in proto.input if i] + list(view.implicit_reads(node_id))
        view.remove_node(node_id)
        for tensor in branch.initializer:
            copy = TensorProto()
            copy.CopyFrom(tensor)
            copy.name = renamed[tensor.name]
            view.add_initializer(copy)
        for inner in list(branch.node) + [
            helper.make_node("Identity", [value], [out])
            for value, out in zip((o.name for o in branch.output), outputs)
            if out and direct.get(value) != out
        ]:
            node = NodeProto()
            node.CopyFrom(inner)
            node.input[:] = [renamed.get(i, i) for i in node.input]
            node.output[:] = [renamed.get(o, o) for o in node.output]
            node.name = view.fresh_node_name(inner.name or f"{proto.name or 'If'}/{name}")
            copy_placement(metadata, node)
            view.add_node(node)
        view.remove_dead(read)  # the condition, what the other branch read
        count += 1
    return count


def _fold_constant_nodes(view: GraphView) -> list[str]:
    """Constant nodes -> initializers; the values made initializers."""
    folded: list[str] = []
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
        folded.append(out)
    return folded


def _fold_static_shapes(view: GraphView) -> list[str]:
    """Shape / Size of a static tensor -> an initializer; the values made initializers."""
    folded: list[str] = []
    for op in ("Shape", "Size"):
        for node_id in view.nodes_by_op("", op):
            proto = view.node(node_id)
            if not proto.input or not proto.output or view.is_graph_output(proto.output[0]):
                continue
            shape = view.shape(proto.input[0])
            if shape is None or any(a.ref_attr_name for a in proto.attribute):
                continue
            dims = [d for d in shape if isinstance(d, int)]
            if len(dims) != len(shape):
                continue
            if op == "Shape":
                rank = len(dims)
                start = view.attribute(node_id, "start") or 0
                end = view.attribute(node_id, "end")
                end = rank if end is None else end
                if not isinstance(start, int) or not isinstance(end, int):
                    continue  # (a malformed model's attribute: not folded)
                start, end = (max(0, min(rank, v + rank if v < 0 else v)) for v in (start, end))
                value = np.asarray(dims[start:end], dtype=np.int64)
            else:
                value = np.asarray(int(np.prod(dims, dtype=np.int64)), dtype=np.int64)
            out = proto.output[0]
            inputs = [i for i in proto.input if i]
            view.remove_node(node_id)
            view.add_initializer(numpy_helper.from_array(value, out))
            view.remove_dead(inputs)
            folded.append(out)
    return folded


def _foldable(view: GraphView, node_id: NodeId, constant_values: set[str]) -> bool:
    domain, op = view.node_key(node_id)
    if domain != "" or (op in NOT_FOLDED and not (op == "DequantizeLinear" and _requantized_only(view, node_id))):
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


def _requantized_only(view: GraphView, node_id: NodeId) -> bool:
    """Whether every reader of this DequantizeLinear's output is a QuantizeLinear's input:
    a constant dequantized only to be quantized again, a pair no QDQ fusion reads."""
    readers = view.consumers(view.outputs(node_id)[0])
    return bool(readers) and all(slot == 0 and view.node_key(r) == ("", "QuantizeLinear") for r, slot in readers)


def _foldable_nodes(view: GraphView, changed: list[NodeId] | None = None) -> list[NodeId]:
    """Standard-domain nodes computable from constants alone, in topological order: all of
    them, or those reachable from ``changed`` through foldable nodes."""
    constant_values: set[str] = set()
    chosen: dict[NodeId, None] = {}
    if changed is None:  # what reads a constant starts every constant computation
        changed = [c for name in view.constant_values() for c, _ in view.consumer_slots(name)]
    queue = list(changed)
    # a DequantizeLinear of constants becomes foldable when its readers change (all of
    # them QuantizeLinears now): asked again from the changed reader's side
    for node_id in changed:
        if view.has_node(node_id) and view.node_key(node_id) == ("", "QuantizeLinear"):
            source = view.producer(view.inputs(node_id)[0])
            if source is not None and view.node_key(source) == ("", "DequantizeLinear"):
                queue.append(source)
    while queue:
        node_id = queue.pop()
        if node_id in chosen or not _foldable(view, node_id, constant_values):
            continue
        chosen[node_id] = None
        constant_values.update(o for o in view.outputs(node_id) if o)
        queue.extend(view.downstream(node_id))  # rechecked now that this input is constant
    return view.topological_ids(chosen) if chosen else []


def _run(state: GraphState, nodes: list[onnx.NodeProto], initializers: list[TensorProto]) -> dict[str, np.ndarray]:
    """Run ``nodes`` on ``initializers`` in onnxruntime (optimizations off); {} on failure."""
    import onnxruntime as ort

    outputs = [onnx.ValueInfoProto(name=o) for n in nodes for o in n.output if o]
    model = helper.make_model(
        helper.make_graph(nodes, "fold", [], outputs, initializers),
        opset_imports=[helper.make_opsetid(d, v) for d, v in state.opsets.items() if d in ("", "ai.onnx.ml")],
    )
    model.ir_version = min(state.source.ir_version or _ORT_SAFE_IR, _ORT_SAFE_IR)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    # a few small constants: one thread, and no thread pool left spinning beside the engine
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        return dict(zip(names, session.run(names, {})))
    except Exception:  # an op ORT cannot run on CPU, a type it refuses...: not folded
        return {}


_ORT_SAFE_IR = 10  # every onnxruntime this project supports loads IR 10


def _expected_bytes(view: GraphView, node_id: NodeId) -> int | None:
    """What a node's outputs will hold, known before evaluating it: from their inferred
    types, else bounded by the inputs for ops that cannot make more (NonZero: at most one
    index per element and axis of a constant: X-MOD's adapter routing by a fixed language);
    None if unknown."""
    total = 0
    for out in view.outputs(node_id):
        if not out:
            continue
        shape, elem = view.shape(out), view.elem_type(out)
        if shape is None or elem is None:
            break
        dims = [d for d in shape if isinstance(d, int) and d >= 0]
        if len(dims) != len(shape):
            break
        bits = bits_per_element(elem)
        if bits is None:  # strings: no size from the type
            break
        count = 1
        for d in dims:
            count *= d
        total += (count * bits + 7) // 8
    else:
        return total
    op = view.node_key(node_id)[1]
    if op in _BOUNDED_BY_INPUTS:
        return 8 * sum(_nbytes(view, i) for i in view.inputs(node_id) if i)
    if op == "NonZero":  # [rank, count] int64 indices: at most rank of them per input element
        inputs = view.inputs(node_id)
        tensor = view.initializers.get(inputs[0]) if len(inputs) == 1 and inputs[0] else None
        if tensor is not None:
            return 8 * max(1, len(tensor.dims)) * math.prod(tensor.dims)
    return None


def _plan(view: GraphView, node_ids: list[NodeId]) -> list[list[NodeId]]:
    """The nodes to evaluate, in sessions (see the module docstring): each one's output size
    known and acceptable, each one's inputs constants or outputs of nodes kept before it.

    Growth is net: a constant every reader of which is folded goes away, so a weight
    standardized by a chain of full-size steps (NF-ResNet's (w - mean) / std * gain) adds
    only what the last step leaves, not every intermediate."""
    growth = view.pass_caches.get(_GROWTH_CACHE)
    if growth is None:
        growth = view.pass_caches[_GROWTH_CACHE] = {
            "allowed": GROWTH * view.initializer_bytes + GROWTH_SLACK,
            "start": view.initializer_bytes,
        }
    added = view.initializer_bytes - growth["start"]  # what folding (and rules) added so far
    kept: dict[str, int] = {}  # outputs of planned nodes -> their expected bytes
    readers_left: dict[str, int] = {}  # constants read by planned nodes -> readers not planned
    batches: list[list[NodeId]] = [[]]
    batch_bytes = 0
    for node_id in node_ids:
        inputs = [i for i in view.inputs(node_id) if i]
        if not all(i in kept or view.is_initializer(i) for i in inputs):
            continue  # reads a value that will not be folded
        made = _expected_bytes(view, node_id)
        if made is None:
            continue
        read = sum(kept[i] if i in kept else _nbytes(view, i) for i in inputs)
        if made > _LARGE_OUTPUT and made > 2 * read:
            continue  # would blow the model up
        freed = 0
        for value in set(inputs):
            left = readers_left.get(value, view.consumer_count(value)) - inputs.count(value)
            readers_left[value] = left
            if left <= 0 and not view.is_graph_output(value):
                freed += kept[value] if value in kept else _nbytes(view, value)
        if added + made - freed > growth["allowed"]:
            for value in set(inputs):  # not planned after all: its reads stay
                readers_left[value] += inputs.count(value)
            continue  # folding has added all it may
        added += made - freed
        if batches[-1] and batch_bytes + read + made > BATCH_BYTES:
            batches.append([])
            batch_bytes = 0
        batches[-1].append(node_id)
        batch_bytes += read + made
        outputs = [o for o in view.outputs(node_id) if o]
        kept.update((o, made // len(outputs)) for o in outputs)
    return [b for b in batches if b]


def _fold_computations(state: GraphState, changed: list[NodeId] | None) -> int:
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
    for batch in _plan(view, node_ids):  # each batch reads what the ones before it folded
        count += _fold_batch(state, [n for n in batch if view.has_node(n)])
    return count


def _fold_batch(state: GraphState, node_ids: list[NodeId]) -> int:
    """Evaluate ``node_ids`` (in topological order) in one session and replace each by
    initializers holding its outputs; returns how many were folded."""
    view = state.view
    count = 0
    if not node_ids:
        return count
    nodes = [view.node(n) for n in node_ids]
    produced = {o for n in nodes for o in n.output if o}
    needed = {i for n in nodes for i in n.input if i and i not in produced}
    if not all(view.is_initializer(i) for i in needed):
        return count  # an input an earlier batch could not fold
    results = _run(state, nodes, [view.initializers[i] for i in sorted(needed)])
    if not results:  # one bad node spoils a batch: fold one node at a time instead
        for node in nodes:
            inputs = [i for i in node.input if i]
            if all(i in results or view.is_initializer(i) for i in inputs):
                tensors = [
                    view.initializers[i]
                    if view.is_initializer(i)
                    else numpy_helper.from_array(np.asarray(results[i]), i)
                    for i in set(inputs)
                ]
                results.update(_run(state, [node], tensors))
    for node_id in node_ids:
        proto = view.node(node_id)
        outputs = [o for o in proto.output if o]
        if not outputs or not all(o in results for o in outputs):
            continue
        input_bytes = sum(_nbytes(view, i) for i in proto.input if i)
        if any(results[o].nbytes > _LARGE_OUTPUT and results[o].nbytes > 2 * input_bytes for o in outputs):
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
