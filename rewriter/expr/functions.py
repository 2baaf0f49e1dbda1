"""The fixed set of functions a rule may call.  Nothing else is callable: rules never eval.

Two kinds:
* graph predicates receive the ``GraphFacts`` and raw arguments (``Ref``s stay references),
  so they can ask for ranks, shapes, consumers... of non-constant values;
* value functions receive plain numbers, lists and numpy arrays (constants are
  materialized first) and compute with numpy — that is how computed initializers are made.

More graph predicates can be registered from Python with ``register_predicate`` (like PDLL's
native constraints) for what text cannot say.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError, expect
from ..onnx_facts.nchwc import nchwc_block_size
from . import budget
from .dtypes import FLOAT_TYPES, from_numpy_dtype, to_numpy_dtype
from .shape_values import shape_values
from .values import EvalFailure, GraphFacts, Ref, materialize

# Each value function tells the budget (budget.py) what it is about to make before making
# it; views (reshape, transpose, squeeze) make nothing.


@dataclass(frozen=True)
class Function:
    name: str
    impl: Callable
    min_args: int
    max_args: int | None
    graph: bool
    doc: str


FUNCTIONS: dict[str, Function] = {}


def _register(name: str, min_args: int, max_args: int | None, graph: bool):
    def wrap(impl: Callable) -> Callable:
        FUNCTIONS[name] = Function(name, impl, min_args, max_args, graph, (impl.__doc__ or "").strip())
        return impl

    return wrap


def register_predicate(
    name: str, impl: Callable[..., object], min_args: int = 1, max_args: int | None = None, doc: str = ""
) -> None:
    """Add a graph predicate callable from rules as ``name(args)``.

    ``impl(graph, *args)`` receives the ``GraphFacts`` and the arguments unevaluated
    (tensor variables as ``Ref``).  It must not mutate anything.
    """
    expect(name, str, "register_predicate()'s name")
    if not callable(impl):
        raise ArgumentError(f"register_predicate()'s impl must be callable, not {type(impl).__name__}")
    expect(min_args, int, "register_predicate()'s min_args")
    if max_args is not None:
        expect(max_args, int, "register_predicate()'s max_args")
    expect(doc, str, "register_predicate()'s doc")
    if not name.isidentifier() or not name[:1].islower():
        raise ArgumentError("predicate names are lower-case identifiers")
    FUNCTIONS[name] = Function(name, impl, min_args, max_args, True, doc)


# --------------------------------------------------------------------------- helpers


def _ref(arg: object, fn: str) -> Ref | None:
    if arg is None or isinstance(arg, Ref):
        return arg
    raise EvalFailure(f"{fn}() takes a tensor variable")


def _shape_of(graph: GraphFacts, arg: object, fn: str) -> list:
    if isinstance(arg, Ref):
        shape = graph.shape(arg.name)
        if shape is None:
            raise EvalFailure(f"the shape of '{arg.name}' is unknown")
        return shape
    if isinstance(arg, np.ndarray):
        return list(arg.shape)
    if isinstance(arg, (int, float, bool, np.generic)):
        return []
    raise EvalFailure(f"{fn}() takes a tensor")


def _elements(shape) -> int:
    count = 1
    for d in shape:
        count *= max(int(d), 0)
    return count


def _array(value: object) -> np.ndarray:
    if value is None:
        raise EvalFailure("an absent optional value was used")
    if isinstance(value, (list, tuple)):
        budget.charge_elements(budget.list_elements(value), 8, "an array from a list")
    return np.asarray(value)


def _ints(value: object, fn: str) -> list[int]:
    arr = _array(value)
    if arr.dtype.kind not in "iub" and arr.size:  # [] is an empty list of ints (a scalar's shape)
        raise EvalFailure(f"{fn}() needs integers")
    return [int(v) for v in arr.reshape(-1)]


# ---------------------------------------------------------------- graph predicates


@_register("const", 1, None, graph=True)
def _const(graph: GraphFacts, *args):
    """const(x, ...): every argument is a constant (initializer or Constant output); an
    absent optional input counts as constant."""
    return all(a is None or not isinstance(a, Ref) or graph.is_constant(a.name) for a in args)


@_register("single_use", 1, None, graph=True)
def _single_use(graph: GraphFacts, *args):
    """single_use(x, ...): each value has exactly one consumer and is not a graph output."""
    for a in args:
        ref = _ref(a, "single_use")
        if ref is None:
            continue
        if graph.is_graph_output(ref.name) or graph.consumer_count(ref.name) != 1:
            return False
    return True


@_register("consumers", 1, 1, graph=True)
def _consumers(graph: GraphFacts, x):
    """consumers(x): how many node inputs read x (graph outputs not counted)."""
    ref = _ref(x, "consumers")
    return 0 if ref is None else graph.consumer_count(ref.name)


@_register("is_output", 1, 1, graph=True)
def _is_output(graph: GraphFacts, x):
    """is_output(x): x is an output of the graph."""
    ref = _ref(x, "is_output")
    return ref is not None and graph.is_graph_output(ref.name)


@_register("absent", 1, 1, graph=True)
def _absent(graph: GraphFacts, x):
    """absent(x): the optional input x is not given."""
    return x is None


@_register("present", 1, 1, graph=True)
def _present(graph: GraphFacts, x):
    """present(x): the optional input x is given."""
    return x is not None


@_register("shape", 1, 1, graph=True)
def _shape(graph: GraphFacts, x):
    """shape(x): list of dims; a symbolic dim is its name (a string), an unknown one none."""
    return list(_shape_of(graph, x, "shape"))


@_register("dims", 1, 1, graph=True)
def _dims(graph: GraphFacts, x):
    """dims(s): what the 1-D int tensor s holds, also when it is computed from shapes at run
    time (Shape/Gather/Slice/Concat/Unsqueeze): numbers, symbolic dim names, or a token for
    an unnamed dim of a tensor (equal only to itself).  See expr/shape_values.py."""
    ref = _ref(x, "dims")
    if ref is None:
        raise EvalFailure("dims() takes a tensor")
    return shape_values(graph, ref.name)


@_register("rank", 1, 1, graph=True)
def _rank(graph: GraphFacts, x):
    """rank(x): number of dimensions."""
    return len(_shape_of(graph, x, "rank"))


@_register("static", 1, None, graph=True)
def _static(graph: GraphFacts, *args):
    """static(x, ...): every dim of each argument is a known number."""
    for a in args:
        try:
            shape = _shape_of(graph, a, "static")
        except EvalFailure:
            return False
        if not all(isinstance(d, int) for d in shape):
            return False
    return True


@_register("numel", 1, 1, graph=True)
def _numel(graph: GraphFacts, x):
    """numel(x): number of elements (needs a static shape)."""
    shape = _shape_of(graph, x, "numel")
    if not all(isinstance(d, int) for d in shape):
        raise EvalFailure("numel() needs a static shape")
    return int(np.prod(shape, dtype=np.int64))


@_register("dtype", 1, 1, graph=True)
def _dtype(graph: GraphFacts, x):
    """dtype(x): the ONNX element type (compare with float, float16, int64, ...)."""
    if isinstance(x, Ref):
        elem = graph.elem_type(x.name)
        if elem is None:
            raise EvalFailure(f"the element type of '{x.name}' is unknown")
        return elem
    return from_numpy_dtype(_array(x).dtype)


@_register("is_float", 1, None, graph=True)
def _is_float(graph: GraphFacts, *args):
    """is_float(x, ...): every argument has a floating-point element type."""
    return all(_dtype(graph, a) in FLOAT_TYPES for a in args)


@_register("same_shape", 2, None, graph=True)
def _same_shape(graph: GraphFacts, *args):
    """same_shape(a, b, ...): all shapes known and equal (symbolic dims by name).  An unknown
    shape, whole or one dim, is false, not a failure: ``same_shape(r, s) or same_shape(t, u)``
    holds when either pair is known to agree."""
    try:
        shapes = [_shape_of(graph, a, "same_shape") for a in args]
    except EvalFailure:
        return False
    if any(d is None for s in shapes for d in s):
        return False
    return all(s == shapes[0] for s in shapes[1:])


@_register("opset", 0, 1, graph=True)
def _opset(graph: GraphFacts, domain=""):
    """opset(domain=""): the model's opset version for a domain (0 when not imported)."""
    return graph.opset(str(domain)) or 0


@_register("op", 1, 1, graph=True)
def _op(graph: GraphFacts, x):
    """op(x): the op type of the node producing x (matters when alternatives matched)."""
    ref = _ref(x, "op")
    kind = None if ref is None else graph.op_type(ref.name)
    if kind is None:
        raise EvalFailure("op() of a value no node produces")
    return kind


@_register("value", 1, 1, graph=True)
def _value(graph: GraphFacts, x):
    """value(x): the contents of constant x as an array."""
    return materialize(graph, x)


@_register("per_channel", 3, 3, graph=True)
def _per_channel(graph: GraphFacts, b, rank, channels):
    """per_channel(b, rank, channels): constant b, broadcast against a rank-`rank` tensor,
    varies only along axis 1, where that tensor has `channels` entries."""
    try:
        _channel(graph, b, rank, channels)
    except EvalFailure:
        return False
    return True


@_register("channel", 3, 3, graph=True)
def _channel(graph: GraphFacts, b, rank, channels):
    """channel(b, rank, channels): the per-channel vector of b (length `channels`), see
    per_channel; refuses the match if b is not per-channel."""
    arr = _array(materialize(graph, b))
    rank, channels = int(rank), int(channels)
    if arr.ndim > rank:
        raise EvalFailure("broadcast would raise the rank")
    if rank > 64:
        raise EvalFailure(f"rank {rank} is more than a tensor can have")
    budget.charge_elements(channels, arr.itemsize, "a per-channel vector")
    shape = [1] * (rank - arr.ndim) + list(arr.shape)
    if any(d != 1 for i, d in enumerate(shape) if i != 1) or (rank < 2) or shape[1] not in (1, channels):
        raise EvalFailure("not a per-channel tensor")
    return np.broadcast_to(arr.reshape(-1), (channels,)).copy()


# ------------------------------------------------------------------- value functions


def _value_fn(name: str, min_args: int, max_args: int | None):
    return _register(name, min_args, max_args, graph=False)


def _unary(name: str, fn: Callable, doc: str) -> None:
    def impl(x):
        arr = _array(x)
        budget.charge_elements(arr.size, 8, f"{name}()")
        return fn(arr)

    impl.__doc__ = doc
    _value_fn(name, 1, 1)(impl)


for _name, _fn in (
    ("sqrt", np.sqrt),
    ("exp", np.exp),
    ("log", np.log),
    ("abs", np.abs),
    ("tanh", np.tanh),
    ("reciprocal", np.reciprocal),
    ("floor", np.floor),
    ("ceil", np.ceil),
):
    _unary(_name, _fn, f"{_name}(x): elementwise, with numpy.")


@_value_fn("reshape", 2, 2)
def _reshape(x, shape):
    """reshape(x, shape): numpy reshape (-1 allowed)."""
    arr = _array(x)
    if not arr.flags.c_contiguous:  # (a transposed view is copied)
        budget.charge(arr.nbytes, "a reshaped tensor")
    return arr.reshape(_ints(shape, "reshape"))


@_value_fn("transpose", 1, 2)
def _transpose(x, perm=None):
    """transpose(x, perm=reversed): numpy transpose."""
    return np.transpose(_array(x), None if perm is None else _ints(perm, "transpose"))


@_value_fn("unsqueeze", 2, 2)
def _unsqueeze(x, axes):
    """unsqueeze(x, axes): insert size-1 dims (ONNX Unsqueeze semantics, negative axes ok)."""
    arr = _array(x)
    axes = _ints(axes, "unsqueeze")
    out_rank = arr.ndim + len(axes)
    axes = sorted(a + out_rank if a < 0 else a for a in axes)
    if len(set(axes)) != len(axes) or any(not 0 <= a < out_rank for a in axes):
        raise EvalFailure("bad unsqueeze axes")
    for a in axes:
        arr = np.expand_dims(arr, a)
    return arr


@_value_fn("squeeze", 1, 2)
def _squeeze(x, axes=None):
    """squeeze(x, axes=all size-1): remove size-1 dims."""
    arr = _array(x)
    if axes is None:
        return np.squeeze(arr)
    return np.squeeze(arr, axis=tuple(_ints(axes, "squeeze")))


@_value_fn("concat", 1, 2)
def _concat(xs, axis=0):
    """concat([a, b, ...], axis=0)."""
    arrays = [_array(x) for x in xs]
    budget.charge(sum(a.nbytes for a in arrays), "a concatenation")
    return np.concatenate(arrays, axis=int(axis))


@_value_fn("known", 1, 1)
def _known(dims):
    """known(list): every element is a number (no symbolic or unknown dim)."""
    items = dims if isinstance(dims, list) else list(_array(dims).ravel())
    return all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in items)


@_value_fn("zero_copies", 2, 2)
def _zero_copies(target, source):
    """zero_copies(t, s): Reshape target t with each entry that is s's dim at the same
    index replaced by 0 (Reshape copies it); numbers stay; anything else fails."""
    out = []
    for i, d in enumerate(target):
        if i < len(source) and isinstance(d, str) and d == source[i]:
            out.append(0)
        elif isinstance(d, (int, np.integer)) and not isinstance(d, bool):
            out.append(int(d))
        else:
            raise EvalFailure(f"target entry {d!r} is not a dim of the input at index {i}")
    return out


@_value_fn("pad_to", 3, 3)
def _pad_to(x, axis, size):
    """pad_to(x, axis, size): x with zeros appended along `axis` up to length `size`
    (blocked layouts pad channels to a multiple of the block)."""
    arr = _array(x)
    axis = int(axis) + (arr.ndim if int(axis) < 0 else 0)
    if not 0 <= axis < arr.ndim or int(size) < arr.shape[axis]:
        raise EvalFailure(f"pad_to: cannot pad axis {axis} of {list(arr.shape)} to {size}")
    widths = [(0, 0)] * arr.ndim
    widths[axis] = (0, int(size) - arr.shape[axis])
    budget.charge_elements(
        _elements([int(size) if i == axis else d for i, d in enumerate(arr.shape)]), arr.itemsize, "a padded tensor"
    )
    return np.pad(arr, widths)


@_value_fn("nchwc_block", 0, 0)
def _nchwc_block():
    """nchwc_block(): the NCHWc channel block of the installed onnxruntime on this CPU
    (8 or 16), none where onnxruntime does not use NCHWc."""
    return nchwc_block_size()


@_value_fn("cast", 2, 2)
def _cast(x, elem_type):
    """cast(x, dtype): convert to an ONNX element type (float, float16, int64...)."""
    arr, dtype = _array(x), _numpy_dtype(elem_type)
    budget.charge_elements(arr.size, dtype.itemsize, "a cast tensor")
    return arr.astype(dtype)


def _numpy_dtype(elem_type) -> np.dtype:
    try:
        return to_numpy_dtype(int(elem_type))
    except (KeyError, ValueError, TypeError, OverflowError):
        raise EvalFailure(f"{elem_type!r} is not an element type") from None


@_value_fn("array", 1, 2)
def _make_array(x, elem_type=None):
    """array(x, dtype=inferred): a tensor from a number or list."""
    arr = _array(x)
    return arr if elem_type is None else _cast(arr, elem_type)


def _filled(shape, fill, elem_type) -> np.ndarray:
    shape = _ints(shape, "zeros")
    if any(d < 0 for d in shape):
        raise EvalFailure(f"negative dimension in {shape}")
    dtype = np.dtype(np.float32) if elem_type is None else _numpy_dtype(elem_type)
    budget.charge_elements(_elements(shape), dtype.itemsize, "a filled tensor")
    return np.full(shape, fill, dtype=dtype)


@_value_fn("zeros", 1, 2)
def _zeros(shape, elem_type=None):
    """zeros(shape, dtype=float)."""
    return _filled(shape, 0, elem_type)


@_value_fn("ones", 1, 2)
def _ones(shape, elem_type=None):
    """ones(shape, dtype=float)."""
    return _filled(shape, 1, elem_type)


@_value_fn("full", 2, 3)
def _full(shape, fill, elem_type=None):
    """full(shape, value, dtype=float)."""
    return _filled(shape, fill, elem_type)


@_value_fn("arange", 1, 2)
def _arange(start, stop=None):
    """arange(stop) or arange(start, stop), int64."""
    if stop is None:
        start, stop = 0, start
    budget.charge_elements(int(stop) - int(start), 8, "a range")
    return np.arange(int(start), int(stop), dtype=np.int64)


@_value_fn("broadcast_shape", 2, None)
def _broadcast_shape(*shapes):
    """broadcast_shape(s1, s2, ...): numpy broadcasting of static shapes."""
    try:
        return list(np.broadcast_shapes(*[tuple(_ints(s, "broadcast_shape")) for s in shapes]))
    except ValueError as err:
        raise EvalFailure(str(err)) from None


@_value_fn("take", 2, 2)
def _take(x, indices):
    """take(x, indices): elements of a 1-D list/array at indices."""
    if isinstance(x, (list, tuple)):
        seq = list(x)
    else:
        arr = _array(x)
        budget.charge_elements(arr.size, budget.OBJECT_BYTES, "a list of a tensor's elements")
        seq = arr.reshape(-1).tolist()
    positions = _ints(indices, "take")
    budget.charge_elements(len(positions), budget.POINTER_BYTES, "a list")
    try:
        return [seq[i] for i in positions]
    except IndexError:
        raise EvalFailure("take() index out of range") from None


@_value_fn("inverse_perm", 1, 1)
def _inverse_perm(perm):
    """inverse_perm(p): the permutation q that undoes p (transpose(transpose(x, p), q) is x)."""
    axes = _ints(perm, "inverse_perm")
    budget.charge_elements(len(axes), budget.POINTER_BYTES, "a list")
    if sorted(axes) != list(range(len(axes))):
        raise EvalFailure(f"inverse_perm() takes a permutation, not {axes}")
    inverse = [0] * len(axes)
    for position, axis in enumerate(axes):
        inverse[axis] = position
    return inverse


def _reduce(name: str, fn: Callable) -> None:
    def impl(x, axis=None):
        arr = _array(x)
        budget.charge_elements(arr.size, 8, f"{name}()")  # (mean of ints makes floats)
        return fn(arr, axis=None if axis is None else int(axis))

    impl.__doc__ = f"{name}(x, axis=all): numpy reduction."
    _value_fn(name, 1, 2)(impl)


for _name, _reducer in (("sum", np.sum), ("prod", np.prod), ("mean", np.mean), ("all", np.all), ("any", np.any)):
    _reduce(_name, _reducer)


@_value_fn("max", 1, None)
def _max(*xs):
    """max(x): largest element; max(a, b, ...): elementwise maximum."""
    if len(xs) == 1:
        return np.max(_array(xs[0]))
    result = _array(xs[0])
    for x in xs[1:]:
        other = _array(x)
        budget.charge_elements(budget.broadcast_elements(result, other), 8, "max()")
        result = np.maximum(result, other)
    return result


@_value_fn("min", 1, None)
def _min(*xs):
    """min(x): smallest element; min(a, b, ...): elementwise minimum."""
    if len(xs) == 1:
        return np.min(_array(xs[0]))
    result = _array(xs[0])
    for x in xs[1:]:
        other = _array(x)
        budget.charge_elements(budget.broadcast_elements(result, other), 8, "min()")
        result = np.minimum(result, other)
    return result


@_register("len", 1, 1, graph=True)
def _len(graph: GraphFacts, x):
    """len(x): length of a list (such as a *rest binding) or of a tensor's first axis."""
    if isinstance(x, (list, tuple, str)):
        return len(x)
    shape = _shape_of(graph, x, "len")
    if not shape or not isinstance(shape[0], int):
        raise EvalFailure("len() needs a known first dimension")
    return shape[0]


@_value_fn("size", 1, 1)
def _size(x):
    """size(x): number of elements of a constant."""
    return int(_array(x).size)


@_value_fn("list", 1, 1)
def _list(x):
    """list(x): a constant's elements as a flat list."""
    if type(x) is list and all(type(v) is int for v in x):
        return list(x)  # a shape, a perm: what numpy would give back anyway
    arr = _array(x)
    budget.charge_elements(arr.size, budget.OBJECT_BYTES, "a list of a tensor's elements")
    return arr.reshape(-1).tolist()


@_value_fn("int", 1, 1)
def _int(x):
    """int(x): a one-element constant as an integer."""
    arr = _array(x)
    if arr.size != 1:
        raise EvalFailure("int() of a tensor with several elements")
    return int(arr.reshape(-1)[0])


@_value_fn("float", 1, 1)
def _float(x):
    """float(x): a one-element constant as a float."""
    arr = _array(x)
    if arr.size != 1:
        raise EvalFailure("float() of a tensor with several elements")
    return float(arr.reshape(-1)[0])


@_value_fn("isclose", 2, 4)
def _isclose(a, b, rtol=1e-5, atol=1e-8):
    """isclose(a, b, rtol=1e-5, atol=1e-8): every element close (numpy.allclose)."""
    a, b = _array(a), _array(b)
    budget.charge_elements(budget.broadcast_elements(a, b), 32, "isclose()")  # (temporaries)
    return bool(np.allclose(a, b, rtol=float(rtol), atol=float(atol)))


CONSTANTS: dict[str, object] = {"pi": math.pi, "e": math.e, "nan": math.nan}
