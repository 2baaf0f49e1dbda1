"""Named dims behind shapes computed at run time.

With dynamic axes exporters write ``Reshape(t, Concat(Gather(Shape(x), 0), ..., [64]))``.
onnx's shape inference cannot read such a target and names the output's dims ``unk__N``,
fresh names equal to nothing: from there on two tensors of the same [batch, seq, hidden]
shape no longer look alike, and rules that need equal shapes refuse.  Here the size inputs
of Reshape, Expand, Tile and Range are read with ``dims()`` (expr/shape_values.py): where they
name a dim of another tensor whose name is known (``batch``), or a number, the output gets
it (a single -1 of a Reshape is what is left of the input's dims); an elementwise op's
unnamed dim takes the one known size its inputs agree on (broadcasting in a model that
runs).  The improved types are declared and inference runs again so they flow downstream,
a few rounds at most.  Dims nobody can name stay as inference left them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cached_property

import numpy as np
from onnx import NodeProto, TensorProto, TypeProto, ValueInfoProto, helper, numpy_helper

from ..expr.dim_algebra import CLAMP, broadcast_result, provably_nonnegative, vanishing_atom, without_atoms
from ..expr.shape_values import (
    ShapeFacts,
    dim_difference,
    dim_extremum,
    dim_floor_quotient,
    dim_product,
    dim_quotient,
    dim_sum,
    shape_values,
)
from ..expr.values import EvalFailure
from .type_reading import FRESH_DIM, fully_known, is_known_dim, known_dim_count, shape_of

_ROUNDS = 6
_BROADCASTING = {
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Where",
    "And",
    "Or",
    "Xor",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "Max",
    "Min",
    "Mod",
}


_FRESH = FRESH_DIM
_is_known = is_known_dim


def _kept(d) -> int | str | None:
    """A dim as an improved type keeps it: known, or onnx's fresh name it had (one unknown
    size that other values share: two tensors of [unk__5, 4] are alike; dropping it for a
    blank would make the next inference name each anew); a dims() token is blank."""
    if _is_known(d):
        return d
    return d if isinstance(d, str) and d.startswith(_FRESH) else None


def is_incomplete(type_proto: TypeProto | None) -> bool:
    """No type, a tensor type without a shape, or a dim nobody named (see ``_is_known``);
    a non-tensor type (sequence, optional) counts as complete: inference adds nothing.
    Remembered per serialized type (see type_reading.shape_of)."""
    if type_proto is None:
        return True
    key = type_proto.SerializeToString()
    known = _INCOMPLETE.get(key)
    if known is None:
        if len(_INCOMPLETE) >= 1 << 16:
            _INCOMPLETE.clear()
        known = _INCOMPLETE[key] = _reads_incomplete(type_proto)
    return known


_INCOMPLETE: dict[bytes, bool] = {}


def _reads_incomplete(type_proto: TypeProto) -> bool:
    if not type_proto.HasField("tensor_type"):
        return False
    tensor = type_proto.tensor_type
    if not tensor.HasField("shape"):
        return True
    for d in tensor.shape.dim:
        if not d.HasField("dim_value") and (not d.dim_param or d.dim_param.startswith(_FRESH)):
            return True
    return False


class _ModelFacts:
    """Just enough of GraphFacts for ``shape_values`` over nodes and a types table."""

    def __init__(self, nodes: list[NodeProto], initializers: list[TensorProto], types: dict[str, TypeProto]) -> None:
        self.types = types
        self._nodes, self._initializers = nodes, initializers
        self._cache: dict[str, np.ndarray | None] = {}

    @cached_property
    def producers(self) -> dict[str, NodeProto]:  # built when a shape is first traced
        return {o: n for n in self._nodes for o in n.output if o}

    @cached_property
    def small(self) -> dict[str, TensorProto]:
        return {t.name: t for t in self._initializers if t.data_type in (6, 7) and len(t.dims) <= 1}

    def constant(self, value: str) -> np.ndarray | None:
        if value not in self._cache:
            array = None
            if value in self.small:
                array = numpy_helper.to_array(self.small[value])
            else:
                node = self.producers.get(value)
                if node is not None and node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                    attr = next((a for a in node.attribute if a.name == "value"), None)
                    if attr is not None:
                        array = numpy_helper.to_array(attr.t)
            self._cache[value] = array
        return self._cache[value]

    def producer_node(self, value: str) -> NodeProto | None:
        return self.producers.get(value)

    def shape(self, value: str) -> list[int | str | None] | None:
        return shape_of(self.types.get(value))

    def settled_dim(self, dim: int | str) -> int | str:
        return dim  # (the types' own spellings: the view applies the bounds and aliases it knows)


def _inferred_minus_one(source: list, target: list) -> object:
    """The dim a single -1 in a Reshape target stands for: the product of the source's dims
    divided by the product of the target's others, after taking out the dims both name
    (``[batch, seq, 64]`` to ``[-1, 64]``: ``batch*seq``; ``[4*batch, s, 16]`` to
    ``[-1, 4, s, 16]``: ``batch``); None when unsure (a remainder, an unknown dim)."""
    rest = [d for d in target if d != -1]
    if target.count(-1) != 1 or not all(_is_known(d) for d in rest + source):
        return None
    left = list(source)
    divisors = []
    for d in rest:
        if d in left:
            left.remove(d)
        else:
            divisors.append(d)
    try:
        return dim_quotient(dim_product(left), dim_product(divisors))
    except EvalFailure:
        return None


def _target_dims(node: NodeProto, target: list, source: list, current: list | None) -> list:
    dims = []
    allowzero = next((a.i for a in node.attribute if a.name == "allowzero"), 0)
    if node.op_type == "Reshape" and not allowzero:  # a 0 copies the input's dim
        target = [(source[axis] if axis < len(source) else None) if d == 0 else d for axis, d in enumerate(target)]
    for axis, d in enumerate(target):
        if node.op_type == "Reshape" and d == -1:
            d = _inferred_minus_one(source, target)
        elif node.op_type == "Expand":  # broadcast: a 1 keeps the input's dim
            offset = len(target) - len(source)
            if d == 1:
                d = source[axis - offset] if axis >= offset else 1
        elif node.op_type == "Tile":  # repeats: 1 keeps the input's dim, a number multiplies a number
            have = source[axis]
            d = have if d == 1 else (have * d if isinstance(have, int) and isinstance(d, int) else None)
        old = current[axis] if current is not None and axis < len(current) else None
        dims.append(d if _is_known(d) else old)
    return dims


def _range_length(facts: ShapeFacts, node: NodeProto) -> int | str | None:
    """The length of Range(start, limit, 1), max(0, limit - start): Range(0, n, 1) has n
    elements (n as the model names it: where it runs, n is a size), and a decoding step's
    positions Range(past, past + new, 1) have new (start and limit computed from shapes) —
    another difference only where it is a number or provably >= 0."""
    delta = facts.constant(node.input[2]) if len(node.input) > 2 else None
    if delta is None or delta.size != 1 or delta.ravel()[0] != 1:
        return None
    try:
        (start,) = shape_values(facts, node.input[0])
        (limit,) = shape_values(facts, node.input[1])
        length = dim_difference(limit, start)
    except (EvalFailure, ValueError):
        return None
    if isinstance(length, int):
        return max(length, 0)
    if start == 0:  # Range(0, n, 1): n, as the sizes the model computes it from name it
        return limit if _is_known(limit) else None
    return facts.settled_dim(length) if provably_nonnegative(length) else None


def _sliced_dims(facts: ShapeFacts, node: NodeProto, source: list | None, current: list | None) -> list | None:
    """A Slice's output dims.  The axes it does not cut keep the input's dims whatever its
    starts and ends (onnx's inference loses them all when those are computed, as TorchScript
    slices a causal-mask buffer: ``bias[:, :, k - q:k, :k]``).  An axis cut with step 1
    keeps ``clamp(end) - clamp(start)`` elements (``slice_length``) where that is known to
    be >= 0: the dynamo exporter slices a position table to the sequence,
    ``position_ids[:, 0:seq]`` of a [1, 512] table, which keeps ``Min(512, seq)``; and a
    cache's new positions, ``x[:, past:]`` of ``past + 1``, keep 1.  None when nothing
    improves."""
    inputs = list(node.input) + [""] * (5 - len(node.input))
    if source is None or current is None or len(source) != len(current) or not all(inputs[1:3]):
        return None
    axes = facts.constant(inputs[3]) if inputs[3] else np.arange(len(source))
    if axes is None:
        return None
    axes = np.atleast_1d(axes)
    if not all(-len(source) <= int(a) < len(source) for a in axes):
        return None
    cut = {int(a) % len(source) for a in axes}
    if len(cut) != len(axes):
        return None  # (an axis named twice: onnx refuses the model)
    dims = [d if _is_known(d) or i in cut else source[i] for i, d in enumerate(current)]
    for axis, length in _cut_lengths(facts, inputs, source, axes).items():
        if not _is_known(dims[axis]):
            dims[axis] = length
    return dims if sum(map(_is_known, dims)) > sum(map(_is_known, current)) else None


def _cut_lengths(facts: ShapeFacts, inputs: list[str], source: list, axes: np.ndarray) -> dict[int, int | str]:
    """axis -> the elements a Slice keeps along it, for the axes cut with step 1 whose
    starts and ends ``dims()`` reads (see _sliced_dims)."""
    try:
        starts, ends = shape_values(facts, inputs[1]), shape_values(facts, inputs[2])
    except EvalFailure:
        return {}
    steps = facts.constant(inputs[4]) if inputs[4] else np.ones(len(axes), np.int64)
    if steps is None or not len(starts) == len(ends) == len(axes) == np.atleast_1d(steps).size:
        return {}
    lengths: dict[int, int | str] = {}
    for a, start, end, step in zip(axes, starts, ends, np.atleast_1d(steps)):
        axis = int(a) % len(source)
        if int(step) == 1 and _is_known(source[axis]):
            length = slice_length(source[axis], start, end)
            if length is not None:
                lengths[axis] = length
    return lengths


def slice_length(dim: int | str, start: int | str, end: int | str) -> int | str | None:
    """``clamp(end) - clamp(start)`` (ONNX Slice, step 1: an index clamped to [0, dim], a
    negative number counting from the end) when it is provably >= 0: a number >= 0, a sum
    of sizes, or an end clamped from a start of 0 (``Min(512, seq)``); None otherwise."""
    low, high = _clamped_index(dim, start), _clamped_index(dim, end)
    if low is None or high is None:
        return None
    if low == 0:
        return high
    try:
        length = dim_difference(high, low)
    except EvalFailure:
        return None
    if isinstance(length, int):
        return max(length, 0)
    return length if provably_nonnegative(length) else None


_TO_THE_END = np.iinfo(np.int32).max  # an end at least this covers any symbolic dim


def _clamped_index(dim: int | str, index: int | str) -> int | str | None:
    """A Slice start or end clamped to [0, dim]; None where the clamp cannot be written
    (a negative index into a symbolic dim, a computed index that may be negative)."""
    if isinstance(index, int):
        if isinstance(dim, int):
            return min(max(index + dim if index < 0 else index, 0), dim)
        if index < 0:
            return None
        if index >= _TO_THE_END:
            return dim
    elif not provably_nonnegative(index):
        return None
    try:
        return dim_extremum(False, index, dim)
    except EvalFailure:
        return None


def _broadcast_type(node: NodeProto, types: dict[str, TypeProto]) -> TypeProto | None:
    """An elementwise op's output dim that inference left unnamed, when the inputs agree on
    one known size there (the others unknown or 1): in a model that runs, an unknown dim
    broadcast against a known size is 1 or that size, so the result is that size; 1 when
    every input has a known 1 there (or lacks the axis)."""

    out = node.output[0]
    current = shape_of(types.get(out))
    if current is None or all(_is_known(d) for d in current) or types.get(out) is None:
        return None
    maybe_shapes = [shape_of(types.get(i)) for i in node.input if i]
    shapes = [sh for sh in maybe_shapes if sh is not None]
    if len(shapes) != len(maybe_shapes):
        return None
    dims = list(current)
    for axis in range(len(current)):
        if _is_known(current[axis]):
            continue
        candidates, ones = set(), True
        for sh in shapes:
            k = axis - (len(current) - len(sh))
            if 0 <= k < len(sh) and _is_known(sh[k]) and sh[k] != 1:
                candidates.add(sh[k])
            ones = ones and not (0 <= k < len(sh) and sh[k] != 1)
        if len(candidates) == 1:
            dims[axis] = candidates.pop()
        elif ones:
            dims[axis] = 1
    if sum(map(_is_known, dims)) <= sum(map(_is_known, current)):
        return None
    return helper.make_tensor_type_proto(types[out].tensor_type.elem_type, [_kept(d) for d in dims])


def broadcast_bounds(nodes: Iterable[NodeProto], shape: Callable[[str], list | None]) -> set[str]:
    """The ``Max(0, d)`` atoms that the elementwise broadcasts among ``nodes`` make 0 wherever
    the model runs (dim_algebra.vanishing_atom): the dynamo exporter's ``Min(128, seq)``,
    a causal buffer sliced to the sequence and broadcast against the scores, is seq.
    ``nodes`` must be a main graph's, each of which runs whenever the model does (a
    branch's broadcast bounds nothing outside it); ``shape`` reads a value's dims."""
    found: set[str] = set()
    for node in nodes:
        if node.op_type not in _BROADCASTING or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
            continue
        shapes = [shape(i) for i in node.input if i]
        bounded = [sh for sh in shapes if sh is not None and any(isinstance(d, str) and CLAMP in d for d in sh)]
        if not bounded:
            continue
        for sh in bounded:
            for other in shapes:
                if other is None or other is sh:
                    continue
                for a, b in zip(reversed(sh), reversed(other)):
                    if isinstance(a, str) and CLAMP in a and b is not None and b != a:
                        atom = vanishing_atom(a, b)
                        if atom is not None:
                            found.add(atom)
    return found


def broadcast_output_type(node: NodeProto, type_of: Callable[[str], TypeProto | None]) -> TypeProto | None:
    """An elementwise op's output type with each dim its inputs' dims provably broadcast to
    (dim_algebra.broadcast_result), where the type known now names another: onnx's
    inference names one of two differing dims, and for ``Min(1, seq)`` against seq it
    names the first, which is 1 where the result is seq.  None when nothing changes."""
    if node.op_type not in _BROADCASTING or node.domain not in ("", "ai.onnx") or not node.output:
        return None
    out = type_of(node.output[0])
    current = shape_of(out)
    if out is None or current is None:
        return None
    maybe = [shape_of(type_of(i)) for i in node.input if i]
    shapes = [sh for sh in maybe if sh is not None]
    if len(shapes) != len(maybe):
        return None
    dims = list(current)
    for axis in range(len(current)):
        result: int | str | None = 1
        for sh in shapes:
            k = axis - (len(current) - len(sh))
            d = sh[k] if 0 <= k < len(sh) else 1
            result = broadcast_result(result, d) if result is not None and d is not None and _is_known(d) else None
        if result is not None and result != current[axis]:
            dims[axis] = result
    if dims == current:
        return None
    return helper.make_tensor_type_proto(out.tensor_type.elem_type, [_kept(d) for d in dims])


def settled_type(type_proto: TypeProto, vanishing: frozenset[str], aliases: dict[str, str] | None = None) -> TypeProto:
    """``type_proto`` with the ``vanishing`` atoms of its dims taken as 0 (``Min(128, seq)``
    declared seq: onnx's inference then sees the one name where the two broadcast) and a
    sum that ``aliases`` names otherwise by that name (``past + seq`` is the cache's
    ``total_sequence_length``, see ``dim_aliases``); the same object when nothing changes."""
    dims = shape_of(type_proto) if vanishing or aliases else None
    if dims is None or not any(isinstance(d, str) for d in dims):
        return type_proto
    settled = [without_atoms(d, vanishing) if isinstance(d, str) and CLAMP in d else d for d in dims]
    if aliases:
        settled = _aliased(settled, aliases)
    if settled == dims:
        return type_proto
    return helper.make_tensor_type_proto(type_proto.tensor_type.elem_type, [_kept(d) for d in settled])


_COMPUTED_SHAPES = ("Reshape", "Expand", "Range", "Tile", "Slice")
_WINDOWED = frozenset({"Conv", "MaxPool", "AveragePool", "LpPool", "ConvTranspose"})
_CANDIDATE_OPS = frozenset(_COMPUTED_SHAPES) | _BROADCASTING | _WINDOWED | {"Concat"}


def _windowed_type(node: NodeProto, types: dict[str, TypeProto]) -> TypeProto | None:
    """A convolution's or pooling's output with its spatial dims computed from the input's
    symbolic ones, where inference left them unnamed (it does no arithmetic on names):
    ``floor((in + pads - dilation * (kernel - 1) - 1) / stride) + 1`` (``ceil(in / stride)``
    with SAME padding; ConvTranspose the inverse), the spelling the dynamo exporter declares
    (``(samples//5) + -1``).  None when unsure, and with ceil_mode."""
    out = node.output[0] if node.output else ""
    current, source = shape_of(types.get(out)), shape_of(types.get(node.input[0]))
    if current is None or source is None or len(current) != len(source) or len(source) < 3 or types.get(out) is None:
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    spatial = len(source) - 2
    kernel = attrs.get("kernel_shape")
    if kernel is None and node.op_type in ("Conv", "ConvTranspose") and len(node.input) > 1:
        weights = shape_of(types.get(node.input[1]))
        kernel = weights[2:] if weights is not None else None
    if kernel is None or len(kernel) != spatial or not all(isinstance(k, int) and k > 0 for k in kernel):
        return None
    strides = list(attrs.get("strides") or [1] * spatial)
    dilations = list(attrs.get("dilations") or [1] * spatial)
    pads = list(attrs.get("pads") or [0] * (2 * spatial))
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if attrs.get("ceil_mode", 0):
        return None  # (ceil drops a last window that would start in the padding: not arithmetic)
    if len(strides) != spatial or len(dilations) != spatial or len(pads) != 2 * spatial:
        return None
    if node.op_type == "ConvTranspose" and (auto_pad != "NOTSET" or "output_shape" in attrs):
        return None
    dims = list(current)
    for axis in range(spatial):
        have, size = current[axis + 2], source[axis + 2]
        if _is_known(have) or size is None or not _is_known(size) or strides[axis] <= 0:
            continue
        reach = dilations[axis] * (kernel[axis] - 1) + 1
        try:
            if node.op_type == "ConvTranspose":
                padding = attrs.get("output_padding") or [0] * spatial
                grown = dim_product([strides[axis], dim_sum([size, -1])])
                dims[axis + 2] = dim_sum([grown, padding[axis], reach, -pads[axis], -pads[axis + spatial]])
            elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                dims[axis + 2] = dim_floor_quotient(dim_sum([size, strides[axis] - 1]), strides[axis])
            elif auto_pad in ("NOTSET", "VALID"):
                padded = 0 if auto_pad == "VALID" else pads[axis] + pads[axis + spatial]
                span = dim_sum([size, padded - reach])
                dims[axis + 2] = dim_sum([dim_floor_quotient(span, strides[axis]), 1])
        except EvalFailure:
            continue
    if sum(map(_is_known, dims)) <= sum(map(_is_known, current)):
        return None
    return helper.make_tensor_type_proto(types[out].tensor_type.elem_type, [_kept(d) for d in dims])


def _concat_sum(node: NodeProto, types: dict[str, TypeProto]) -> tuple[int, int | str] | None:
    """(axis, the sum of the inputs' dims along it) of a Concat whose inputs' dims there
    are all known (a KV cache: past + new); None otherwise."""
    maybe = [shape_of(types.get(i)) for i in node.input if i]
    shapes = [sh for sh in maybe if sh is not None]
    if not shapes or len(shapes) != len(maybe) or len({len(sh) for sh in shapes}) != 1:
        return None
    rank = len(shapes[0])
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
    axis += rank if axis < 0 else 0
    if not 0 <= axis < rank or not all(_is_known(sh[axis]) for sh in shapes):
        return None
    dims: list[int | str] = [d for sh in shapes for d in (sh[axis],) if d is not None]
    try:
        return axis, dim_sum(dims)
    except EvalFailure:
        return None


def dim_aliases(concats: list[NodeProto], types: dict[str, TypeProto]) -> dict[str, str]:
    """Sums of named dims that a Concat's declared output names: a KV cache's present key
    concatenates past and new along the sequence axis, and the exporter calls the result
    ``total_sequence_length`` — the name the attention mask's computed length must use to
    be recognised as the same dim (ONNX: one dim_param names one size throughout the
    model)."""
    aliases: dict[str, str] = {}
    for node in concats:
        found = _concat_sum(node, types)
        out = shape_of(types.get(node.output[0])) if node.output else None
        if found is None or out is None or found[0] >= len(out):
            continue
        axis, total = found
        named = out[axis]
        if isinstance(total, str) and isinstance(named, str) and _is_known(named) and named != total:
            aliases.setdefault(total, named)
    return aliases


def declared_aliases(
    nodes: Iterable[NodeProto], types: dict[str, TypeProto], hints: dict[str, TypeProto]
) -> dict[str, str]:
    """Sums of named dims that a declared type names through a Cast or Identity (which keep
    the shape): a float16 model's present key is Cast to float32 for its output from the
    Concat that computes it, typed ``past + seq`` by inference and declared
    ``total_sequence_length``: the two are one size, as a Concat's own declared output
    says (``dim_aliases``)."""
    aliases: dict[str, str] = {}
    for node in nodes:
        if node.op_type not in ("Cast", "Identity") or node.domain not in ("", "ai.onnx") or not node.output:
            continue
        declared = hints.get(node.output[0])
        named, inferred = shape_of(declared), shape_of(types.get(node.input[0]))
        if named is None or inferred is None or len(named) != len(inferred):
            continue
        for total, alias in zip(inferred, named):
            if (
                isinstance(total, str)
                and isinstance(alias, str)
                and " + " in total
                and _is_known(total)
                and _is_known(alias)
                and " + " not in alias
                and alias != total
            ):
                aliases.setdefault(total, alias)
    return aliases


def _known_aliases(
    aliases: dict[str, str] | None, concats: list[NodeProto], types: dict[str, TypeProto]
) -> dict[str, str]:
    """The aliases these Concats give, added to ``aliases`` (kept by the caller between
    runs: a later run over a region without the Concat must still know them)."""
    found = dim_aliases(concats, types)
    if aliases is None:
        return found
    for total, named in found.items():
        aliases.setdefault(total, named)
    return aliases


def _concats(nodes: list[NodeProto], view) -> list[NodeProto]:
    if view is not None:
        return [view.node(n) for n in view.nodes_by_op("", "Concat")]
    return [n for n in nodes if n.op_type == "Concat" and n.domain in ("", "ai.onnx")]


def _renamed_sums(types: dict[str, TypeProto], values, aliases: dict[str, str]) -> dict[str, TypeProto]:
    """Types of ``values`` that name a dim by a sum an alias names otherwise (typed before
    the alias was known: a round that resolved the mask's length before the cache's)."""
    renamed: dict[str, TypeProto] = {}
    for name in values:
        t = types.get(name)
        dims = shape_of(t)
        if t is not None and dims is not None and any(isinstance(d, str) and d in aliases for d in dims):
            new = _aliased(dims, aliases)
            renamed[name] = helper.make_tensor_type_proto(
                t.tensor_type.elem_type, [d if _is_known(d) else None for d in new]
            )
    return renamed


def _aliased(dims: list, aliases: dict[str, str]) -> list:
    return [aliases.get(d, d) if isinstance(d, str) else d for d in dims]


def _concat_type(
    node: NodeProto, types: dict[str, TypeProto], aliases: dict[str, str], better: dict[str, TypeProto]
) -> None:
    """A Concat's output dim along its axis, unnamed by inference: the inputs' sum."""
    out = node.output[0]
    current = shape_of(types.get(out))
    found = _concat_sum(node, types)
    if current is None or found is None or types.get(out) is None or found[0] >= len(current):
        return
    axis, total = found
    if _is_known(current[axis]):
        return
    dims = list(current)
    dims[axis] = aliases.get(total, total) if isinstance(total, str) else total
    elem = types[out].tensor_type.elem_type
    better[out] = helper.make_tensor_type_proto(elem, [_kept(d) for d in dims])


def resolved_types(
    nodes: list[NodeProto],
    initializers: list[TensorProto],
    types: dict[str, TypeProto],
    view=None,
    aliases: dict[str, str] | None = None,
) -> dict[str, TypeProto]:
    """Better types for values whose dims the shape arithmetic or broadcasting names.
    With ``view`` (a GraphView of these nodes whose types are ``types``) its indexes and
    caches answer instead of scanning the nodes."""

    # only a node whose output is incomplete can gain (most graphs: a few, or none)
    if view is not None:
        candidates = [
            view.node(n)
            for op in _CANDIDATE_OPS
            for n in view.nodes_by_op("", op)
            if view.outputs(n) and view.is_incomplete(view.outputs(n)[0])
        ]
    else:  # (the op type first: reading a node's other fields costs more)
        candidates = [
            n
            for n in nodes
            if n.op_type in _CANDIDATE_OPS
            and n.output
            and n.domain in ("", "ai.onnx")
            and is_incomplete(types.get(n.output[0]))
        ]
    if not candidates:
        return {}
    facts: ShapeFacts = _ModelFacts(nodes, initializers, types) if view is None else view
    concats = _concats(nodes, view)
    aliases = _known_aliases(aliases, concats, types)
    better: dict[str, TypeProto] = {}
    for node in candidates:
        if node.op_type in _WINDOWED:
            windowed = _windowed_type(node, types)
            if windowed is not None:
                better[node.output[0]] = windowed
            continue
        if node.op_type == "Concat":
            _concat_type(node, types, aliases, better)
            continue
        if node.op_type not in _COMPUTED_SHAPES or len(node.input) < 2:
            continue
        out = node.output[0]
        current = shape_of(types.get(out))
        if (current is not None and all(_is_known(d) for d in current)) or types.get(out) is None:
            continue
        if node.op_type == "Range":
            length = _range_length(facts, node)
            if length is not None:
                length = aliases.get(length, length) if isinstance(length, str) else length
                better[out] = helper.make_tensor_type_proto(types[out].tensor_type.elem_type, [length])
            continue
        if node.op_type == "Slice":
            sliced = _sliced_dims(facts, node, shape_of(types.get(node.input[0])), current)
            if sliced is not None:
                better[out] = helper.make_tensor_type_proto(types[out].tensor_type.elem_type, sliced)
            continue
        try:
            target = shape_values(facts, node.input[1])
        except EvalFailure:
            continue
        source = shape_of(types.get(node.input[0]))
        if source is None:
            continue
        if (node.op_type == "Expand" and len(source) > len(target)) or (
            node.op_type == "Tile" and len(source) != len(target)
        ):
            continue
        dims = _target_dims(node, _aliased(target, aliases), source, current)
        known_before = sum(_is_known(d) for d in current) if current is not None else -1
        if sum(_is_known(d) for d in dims) > known_before:
            elem = types[out].tensor_type.elem_type
            better[out] = helper.make_tensor_type_proto(elem, [_kept(d) for d in dims])
    # broadcasting joins unnamed dims to the named ones (same round: each costs an inference)
    for node in candidates:
        if node.op_type in _BROADCASTING:
            improved = _broadcast_type(node, types)
            if improved is not None and node.output[0] not in better:
                better[node.output[0]] = improved
    return better


def refine_computed_shapes(
    nodes: list[NodeProto],
    initializers: list[TensorProto],
    types: dict[str, TypeProto],
    infer,
    view=None,
    aliases: dict[str, str] | None = None,
) -> int:
    """Declare the resolved types and re-infer (``infer(value_infos)`` returns the new
    types), keeping every type that gained known dims; in place.  Returns how many types
    improved.  ``view``: see ``resolved_types``."""

    improved = 0
    made: dict[str, tuple[TypeProto, ValueInfoProto]] = {}  # declarations of earlier rounds
    for _ in range(_ROUNDS):
        better = resolved_types(nodes, initializers, types, view, aliases)
        if not better:
            break
        types.update(better)
        improved += len(better)
        # declare what improved and what is fully known (a type inference left with a fresh
        # unk__ name, declared, would stick where the next inference could say more)
        declared = []
        for name, t in types.items():
            if name in better or fully_known(t):
                entry = made.get(name)
                if entry is None or entry[0] is not t:
                    # (an improved type keeps the fresh names it had: inference carries each
                    # to the value's readers, so their dims stay alike; blank, each would
                    # get a fresh name of its own)
                    entry = made[name] = (t, helper.make_value_info(name, t))
                declared.append(entry[1])
        for name, new in infer(declared).items():
            if known_dim_count(new) > known_dim_count(types.get(name)):
                types[name] = new
                improved += 1
    # a sum typed before the Concat that names it was resolved: rename it everywhere
    concats = _concats(nodes, view)
    known = _known_aliases(aliases, concats, types)
    if known:
        types.update(_renamed_sums(types, (o for n in nodes for o in n.output if o), known))
    return improved
