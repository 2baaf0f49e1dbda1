"""The fixed set of functions a rule may call.  Nothing else is callable: rules never eval.

Two kinds:
* graph predicates receive the ``GraphFacts`` and raw arguments (``Ref``s stay references),
  so they can ask for ranks, shapes, consumers... of non-constant values;
* value functions receive plain numbers, lists and numpy arrays (constants are
  materialized first) and compute with numpy — that is how computed initializers are made.

Each function is registered with what a rule author needs to know of it — its argument
names, what it gives back, a one-line meaning — so that the checker counts arguments from
the same place the reference (docs/functions.md, written by ``function_docs``) is made
from, and neither can drift from the code.

More graph predicates can be registered from Python with ``register_predicate`` (like PDLL's
native constraints) for what text cannot say; they never replace a built-in function.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError, expect
from ..onnx_facts.nchwc import nchwc_block_size
from . import budget
from . import dim_algebra as algebra
from .dtypes import FLOAT_TYPES, from_numpy_dtype, to_numpy_dtype
from .shape_values import dim_product, shape_values
from .values import EvalFailure, GraphFacts, Ref, materialize

# Each value function tells the budget (budget.py) what it is about to make before making
# it; views (reshape, transpose, squeeze) make nothing.

# What a function gives back, as far as its name tells (the checker reads it: `rank(x) @ W`
# multiplies a number); "value" when it depends on the arguments.
RESULT_KINDS = ("bool", "int", "float", "string", "list", "tensor", "value")


@dataclass(frozen=True)
class Function:
    """A function rules may call: how many arguments it takes, whether it reads the graph
    (``graph``: gets ``GraphFacts`` and unevaluated arguments) and, for authors, its
    argument names (``params``: ``x``, ``axis=all`` for an optional one with its default,
    ``...`` for more of the one before), what it gives back (``returns``, one of
    ``RESULT_KINDS``) and what it means, in one line (``meaning``)."""

    name: str
    impl: Callable
    min_args: int
    max_args: int | None
    graph: bool
    meaning: str
    params: tuple[str, ...] = ()
    returns: str = "value"
    builtin: bool = False  # one of the language's own (register_predicate adds the others)

    @property
    def signature(self) -> str:
        """``name(params)`` as the reference writes it."""
        return f"{self.name}({', '.join(self.params)})"


FUNCTIONS: dict[str, Function] = {}


def _arity(params: tuple[str, ...]) -> tuple[int, int | None]:
    """(min, max) arguments of a parameter list (``x``, ``axis=all``, ``...``)."""
    if "..." in params:
        return sum(1 for p in params if p != "..." and "=" not in p), None
    return sum(1 for p in params if "=" not in p), len(params)


def _register(name: str, params: str, returns: str, meaning: str, graph: bool):
    """Register the decorated implementation as built-in function ``name``; ``params``
    (comma-separated) and ``meaning`` are what the reference shows."""
    names = tuple(p.strip() for p in params.split(",")) if params else ()
    if returns not in RESULT_KINDS or not meaning or "\n" in meaning:
        raise ValueError(f"function {name}: a result kind and a one-line meaning are required")
    low, high = _arity(names)

    def wrap(impl: Callable) -> Callable:
        FUNCTIONS[name] = Function(name, impl, low, high, graph, meaning, names, returns, builtin=True)
        return impl

    return wrap


def _graph_fn(name: str, params: str, returns: str, meaning: str):
    return _register(name, params, returns, meaning, graph=True)


def _value_fn(name: str, params: str, returns: str, meaning: str):
    return _register(name, params, returns, meaning, graph=False)


def register_predicate(
    name: str,
    impl: Callable[..., object],
    min_args: int = 1,
    max_args: int | None = None,
    doc: str = "",
    params: Sequence[str] = (),
) -> None:
    """Add a graph predicate callable from rules as ``name(args)`` (see docs/rules.md,
    "Predicates from Python").

    ``impl(graph, *args)`` receives the ``GraphFacts`` and the arguments unevaluated
    (tensor variables as ``Ref``).  It must not mutate anything.  ``doc`` says in one line
    what it means, ``params`` names its arguments (for messages).  A built-in function
    cannot be replaced; a predicate registered before can (the last registration wins).
    """
    expect(name, str, "register_predicate()'s name")
    if not callable(impl):
        raise ArgumentError(f"register_predicate()'s impl must be callable, not {type(impl).__name__}")
    expect(min_args, int, "register_predicate()'s min_args")
    if max_args is not None:
        expect(max_args, int, "register_predicate()'s max_args")
    expect(doc, str, "register_predicate()'s doc")
    if isinstance(params, str) or not all(isinstance(p, str) for p in params):
        raise ArgumentError("register_predicate()'s params must be a sequence of argument names")
    if not name.isidentifier() or not name[:1].islower():
        raise ArgumentError("predicate names are lower-case identifiers")
    known = FUNCTIONS.get(name)
    if known is not None and known.builtin:
        raise ArgumentError(f"'{name}' is a built-in function of the rule language and cannot be replaced")
    if min_args < 0 or (max_args is not None and max_args < min_args):
        raise ArgumentError(f"register_predicate(): {min_args} to {max_args} arguments is no range")
    shown = tuple(params) or tuple(f"arg{i + 1}" for i in range(min_args)) + (() if max_args == min_args else ("...",))

    def guarded(graph: GraphFacts, *args: object) -> object:
        """``impl``, whose errors refuse the match with a reason (a user's code may raise
        anything; a rule's evaluation must not end in a traceback)."""
        try:
            return impl(graph, *args)
        except EvalFailure:
            raise
        except Exception as err:
            raise EvalFailure(f"{name}() raised {type(err).__name__}: {err}") from None

    FUNCTIONS[name] = Function(name, guarded, min_args, max_args, True, doc.strip(), shown, "value")


def is_builtin(name: str) -> bool:
    """``name`` is one of the language's own functions (not a predicate a program added:
    a pack's constraint or family parameter may take such a name, and then means its own)."""
    found = FUNCTIONS.get(name)
    return found is not None and found.builtin


def registered_predicates() -> list[str]:
    """The names of the predicates ``register_predicate`` added in this process (a new
    process, a verify worker, has none of them)."""
    return sorted(f.name for f in FUNCTIONS.values() if not f.builtin)


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


@_graph_fn(
    "const",
    "x, ...",
    "bool",
    "every argument is a constant (an initializer or a Constant's output); an absent optional input counts as constant",
)
def _const(graph: GraphFacts, *args):
    return all(a is None or not isinstance(a, Ref) or graph.is_constant(a.name) for a in args)


@_graph_fn("single_use", "x, ...", "bool", "each argument has exactly one consumer and is not a graph output")
def _single_use(graph: GraphFacts, *args):
    for a in args:
        ref = _ref(a, "single_use")
        if ref is None:
            continue
        if graph.is_graph_output(ref.name) or graph.consumer_count(ref.name) != 1:
            return False
    return True


@_graph_fn("consumers", "x", "int", "how many node inputs read x (a graph output is not counted)")
def _consumers(graph: GraphFacts, x):
    ref = _ref(x, "consumers")
    return 0 if ref is None else graph.consumer_count(ref.name)


@_graph_fn("is_output", "x", "bool", "x is an output of the graph")
def _is_output(graph: GraphFacts, x):
    ref = _ref(x, "is_output")
    return ref is not None and graph.is_graph_output(ref.name)


@_graph_fn("absent", "x", "bool", "the optional input x is not given")
def _absent(graph: GraphFacts, x):
    return x is None


@_graph_fn("present", "x", "bool", "the optional input x is given")
def _present(graph: GraphFacts, x):
    return x is not None


@_graph_fn("shape", "x", "list", "x's dims: numbers, a symbolic dim's name (a string), none for an unknown one")
def _shape(graph: GraphFacts, x):
    return list(_shape_of(graph, x, "shape"))


@_graph_fn(
    "dims",
    "s",
    "list",
    "what the 1-D int tensor s holds, also when computed from shapes at run time (Shape, Gather, Slice, "
    "Concat, Unsqueeze): numbers, symbolic dim names, or a token for an unnamed dim (equal only to itself)",
)
def _dims(graph: GraphFacts, x):
    """(How the values are followed through the shape ops: expr/shape_values.py.)"""
    ref = _ref(x, "dims")
    if ref is None:
        raise EvalFailure("dims() takes a tensor")
    return shape_values(graph, ref.name)


@_graph_fn("rank", "x", "int", "x's number of dimensions")
def _rank(graph: GraphFacts, x):
    return len(_shape_of(graph, x, "rank"))


@_graph_fn("static", "x, ...", "bool", "every dim of every argument is a known number")
def _static(graph: GraphFacts, *args):
    for a in args:
        try:
            shape = _shape_of(graph, a, "static")
        except EvalFailure:
            return False
        if not all(isinstance(d, int) for d in shape):
            return False
    return True


@_graph_fn("numel", "x", "int", "x's number of elements (its shape must be static)")
def _numel(graph: GraphFacts, x):
    shape = _shape_of(graph, x, "numel")
    if not all(isinstance(d, int) for d in shape):
        raise EvalFailure("numel() needs a static shape")
    return int(np.prod(shape, dtype=np.int64))


@_graph_fn("dtype", "x", "int", "x's ONNX element type, to compare with float, float16, int64, ...")
def _dtype(graph: GraphFacts, x):
    if isinstance(x, Ref):
        elem = graph.elem_type(x.name)
        if elem is None:
            raise EvalFailure(f"the element type of '{x.name}' is unknown")
        return elem
    return from_numpy_dtype(_array(x).dtype)


@_graph_fn("is_float", "x, ...", "bool", "every argument has a floating-point element type")
def _is_float(graph: GraphFacts, *args):
    return all(_dtype(graph, a) in FLOAT_TYPES for a in args)


@_graph_fn(
    "same_shape",
    "a, b, ...",
    "bool",
    "every shape is known and all are equal (symbolic dims by name); false, not a failure, when one is unknown",
)
def _same_shape(graph: GraphFacts, *args):
    """An unknown shape, whole or one dim, is false, not a failure, so that
    ``same_shape(r, s) or same_shape(t, u)`` holds when either pair is known to agree."""
    try:
        shapes = [_shape_of(graph, a, "same_shape") for a in args]
    except EvalFailure:
        return False
    if any(d is None for s in shapes for d in s):
        return False
    return all(s == shapes[0] for s in shapes[1:])


@_graph_fn("opset", 'domain=""', "int", "the model's opset version for a domain (0 when the model does not import it)")
def _opset(graph: GraphFacts, domain=""):
    return graph.opset(str(domain)) or 0


@_graph_fn("op", "x", "string", "the op type of the node producing x (which alternative matched)")
def _op(graph: GraphFacts, x):
    ref = _ref(x, "op")
    kind = None if ref is None else graph.op_type(ref.name)
    if kind is None:
        raise EvalFailure("op() of a value no node produces")
    return kind


@_graph_fn("value", "x", "tensor", "the contents of the constant x")
def _value(graph: GraphFacts, x):
    return materialize(graph, x)


@_graph_fn(
    "per_channel",
    "b, rank, channels",
    "bool",
    "the constant b, broadcast against a rank-`rank` tensor, varies only along axis 1, where that tensor "
    "has `channels` entries",
)
def _per_channel(graph: GraphFacts, b, rank, channels):
    try:
        _channel(graph, b, rank, channels)
    except EvalFailure:
        return False
    return True


@_graph_fn(
    "channel",
    "b, rank, channels",
    "tensor",
    "the per-channel vector of b (length `channels`, see per_channel); refuses the match if b is not per-channel",
)
def _channel(graph: GraphFacts, b, rank, channels):
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


def _unary(name: str, fn: Callable, meaning: str) -> None:
    def impl(x):
        arr = _array(x)
        budget.charge_elements(arr.size, 8, f"{name}()")
        return fn(arr)

    _value_fn(name, "x", "tensor", meaning)(impl)


for _name, _fn, _meaning in (
    ("sqrt", np.sqrt, "the square root of each element"),
    ("exp", np.exp, "e to the power of each element"),
    ("log", np.log, "the natural logarithm of each element"),
    ("abs", np.abs, "the absolute value of each element"),
    ("tanh", np.tanh, "the hyperbolic tangent of each element"),
    ("reciprocal", np.reciprocal, "1 / x, elementwise (an integer tensor stays integer, as in numpy)"),
    ("floor", np.floor, "each element rounded down"),
    ("ceil", np.ceil, "each element rounded up"),
):
    _unary(_name, _fn, _meaning)


@_value_fn("reshape", "x, shape", "tensor", "x reshaped as numpy does (one -1 allowed)")
def _reshape(x, shape):
    arr = _array(x)
    if not arr.flags.c_contiguous:  # (a transposed view is copied)
        budget.charge(arr.nbytes, "a reshaped tensor")
    return arr.reshape(_ints(shape, "reshape"))


@_value_fn("transpose", "x, perm=reversed", "tensor", "x with its axes permuted (numpy transpose)")
def _transpose(x, perm=None):
    return np.transpose(_array(x), None if perm is None else _ints(perm, "transpose"))


@_value_fn(
    "unsqueeze",
    "x, axes",
    "tensor",
    "x with size-1 dims inserted at axes (ONNX Unsqueeze: negative axes count from the end of the result)",
)
def _unsqueeze(x, axes):
    arr = _array(x)
    axes = _ints(axes, "unsqueeze")
    out_rank = arr.ndim + len(axes)
    axes = sorted(a + out_rank if a < 0 else a for a in axes)
    if len(set(axes)) != len(axes) or any(not 0 <= a < out_rank for a in axes):
        raise EvalFailure("bad unsqueeze axes")
    for a in axes:
        arr = np.expand_dims(arr, a)
    return arr


@_value_fn("squeeze", "x, axes=all size-1", "tensor", "x without the size-1 dims at axes")
def _squeeze(x, axes=None):
    arr = _array(x)
    if axes is None:
        return np.squeeze(arr)
    return np.squeeze(arr, axis=tuple(_ints(axes, "squeeze")))


@_value_fn("concat", "xs, axis=0", "tensor", "the tensors of the list xs joined along axis")
def _concat(xs, axis=0):
    arrays = [_array(x) for x in xs]
    budget.charge(sum(a.nbytes for a in arrays), "a concatenation")
    return np.concatenate(arrays, axis=int(axis))


@_value_fn(
    "dim_times",
    "a, b",
    "value",
    "the product of two dims as one dim: numbers multiply, a symbolic dim times a number or another dim "
    "is the name dims() gives that product (a batch of heads: 4*batch); fails on an unknown dim",
)
def _dim_times(a, b):
    for d in (a, b):
        if isinstance(d, bool) or not isinstance(d, (int, np.integer, str)):
            raise EvalFailure(f"dim_times: {d!r} is not a dim")
    return dim_product([int(a) if isinstance(a, np.integer) else a, int(b) if isinstance(b, np.integer) else b])


@_value_fn("known", "xs", "bool", "every element of the list is a number (no symbolic or unknown dim)")
def _known(dims):
    items = dims if isinstance(dims, list) else list(_array(dims).ravel())
    return all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in items)


@_value_fn(
    "zero_copies",
    "target, source",
    "list",
    "Reshape's target with each entry that is source's dim at the same index replaced by 0 (Reshape "
    "copies it); fails on any other non-number",
)
def _zero_copies(target, source):
    out = []
    for i, d in enumerate(target):
        if i < len(source) and isinstance(d, str) and d == source[i]:
            out.append(0)
        elif isinstance(d, (int, np.integer)) and not isinstance(d, bool):
            out.append(int(d))
        else:
            raise EvalFailure(f"target entry {d!r} is not a dim of the input at index {i}")
    return out


@_value_fn(
    "copies_agree",
    "target, a, b",
    "bool",
    "every 0 entry of the Reshape target (a list) copies a dim that the shapes a and b both have at its index, "
    "known and equal (a number or the same symbolic name): the target then means the same for either input",
)
def _copies_agree(target, a, b):
    if not all(isinstance(v, list) for v in (target, a, b)):
        return False
    for i, d in enumerate(target):
        if isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d == 0:
            if i >= len(a) or i >= len(b) or a[i] is None or a[i] != b[i]:
                return False
    return True


@_value_fn(
    "keeps_shape",
    "target, source, allowzero=0",
    "bool",
    "Reshape to the target (a list) provably gives the dims source: the same length, each entry 0 "
    "(a copy, unless allowzero) or source's dim there (a number or the same symbolic name), but for at "
    "most one -1, which then infers its own dim",
)
def _keeps_shape(target, source, allowzero=0):
    # the Reshape may see any shape source describes: an unknown dim is proven only by a copy
    if not isinstance(source, list) or not isinstance(target, list) or len(target) != len(source):
        return False
    inferred = 0
    for d, s in zip(target, source):
        if isinstance(d, str):
            same = d == s
        elif isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            same = False
        elif d == -1:
            inferred += 1
            same = True
        elif d == 0 and not allowzero:
            same = True
        else:
            same = isinstance(s, (int, np.integer)) and not isinstance(s, bool) and d == s
        if not same:
            return False
    return inferred <= 1


@_value_fn(
    "pad_to",
    "x, axis, size",
    "tensor",
    "x with zeros appended along axis up to length size (blocked layouts pad channels to a multiple of the block)",
)
def _pad_to(x, axis, size):
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


@_value_fn(
    "nchwc_block",
    "",
    "int",
    "the channel block of onnxruntime's NCHWc kernels on this CPU (8 or 16), none where it has none",
)
def _nchwc_block():
    return nchwc_block_size()


@_value_fn("cast", "x, dtype", "tensor", "x converted to an ONNX element type (float, float16, int64, ...)")
def _cast(x, elem_type):
    arr, dtype = _array(x), _numpy_dtype(elem_type)
    budget.charge_elements(arr.size, dtype.itemsize, "a cast tensor")
    return arr.astype(dtype)


def _numpy_dtype(elem_type) -> np.dtype:
    try:
        return to_numpy_dtype(int(elem_type))
    except (KeyError, ValueError, TypeError, OverflowError):
        raise EvalFailure(f"{elem_type!r} is not an element type") from None


@_value_fn(
    "array", "x, dtype=inferred", "tensor", "a tensor of a number or a (nested) list, of that element type if given"
)
def _make_array(x, elem_type=None):
    arr = _array(x)
    return arr if elem_type is None else _cast(arr, elem_type)


def _filled(shape, fill, elem_type) -> np.ndarray:
    shape = _ints(shape, "zeros")
    if any(d < 0 for d in shape):
        raise EvalFailure(f"negative dimension in {shape}")
    dtype = np.dtype(np.float32) if elem_type is None else _numpy_dtype(elem_type)
    budget.charge_elements(_elements(shape), dtype.itemsize, "a filled tensor")
    return np.full(shape, fill, dtype=dtype)


@_value_fn("zeros", "shape, dtype=float", "tensor", "a tensor of zeros")
def _zeros(shape, elem_type=None):
    return _filled(shape, 0, elem_type)


@_value_fn("ones", "shape, dtype=float", "tensor", "a tensor of ones")
def _ones(shape, elem_type=None):
    return _filled(shape, 1, elem_type)


@_value_fn("full", "shape, value, dtype=float", "tensor", "a tensor filled with value")
def _full(shape, fill, elem_type=None):
    return _filled(shape, fill, elem_type)


@_value_fn("arange", "start, stop=none", "tensor", "the int64 range start..stop-1; with one argument, 0..start-1")
def _arange(start, stop=None):
    if stop is None:
        start, stop = 0, start
    budget.charge_elements(int(stop) - int(start), 8, "a range")
    return np.arange(int(start), int(stop), dtype=np.int64)


@_value_fn(
    "broadcast_shape",
    "s1, s2, ...",
    "list",
    "the shape numpy broadcasting gives shapes s1, s2, ...; a symbolic dim broadcasts with 1 and with itself",
)
def _broadcast_shape(*shapes):
    """Broadcast dim by dim from the right, as onnx's multidirectional broadcasting does.

    Symbolic dims (names) take part so a rule can see that `Expand(x[u, 16], [1, 16])` keeps
    x whatever u is.  A dim only resolves when the others at its place are 1 or equal to it;
    a name against another name or a number other than 1, or any unknown dim (none) that is not
    matched against 1 alone, could be either size, so the call fails rather than guess.
    """
    dims_lists = [_shape_dims(s) for s in shapes]
    rank = max((len(d) for d in dims_lists), default=0)
    budget.charge_elements(rank, budget.POINTER_BYTES, "a list")
    out = []
    for place in range(rank):
        at = [d[len(d) - rank + place] for d in dims_lists if len(d) - rank + place >= 0]
        out.append(_broadcast_dim(at))
    return out


def _shape_dims(shape) -> list:
    """A shape's dims as ints, names or none (shape() gives such lists; constants give ints)."""
    if isinstance(shape, (list, tuple)):
        if all(d is None or isinstance(d, str) or isinstance(d, (int, np.integer)) for d in shape):
            return [d if d is None or isinstance(d, str) else int(d) for d in shape]
    return _ints(shape, "broadcast_shape")


def _broadcast_dim(dims: list):
    """The broadcast of the dims at one place: 1s drop out, an unknown dim only stands alone,
    the rest broadcast pairwise as the shape arithmetic proves it (dim_algebra)."""
    if any(isinstance(d, int) and d < 0 for d in dims):
        raise EvalFailure(f"broadcast_shape() of a negative dim in {dims}")
    rest = [d for d in dims if d != 1]
    if not rest:
        return 1
    if len(rest) == 1:
        return rest[0]
    if all(isinstance(d, int) for d in rest) and len(set(rest)) > 1:
        raise EvalFailure(f"dims {rest} do not broadcast")
    result = rest[0]
    for d in rest[1:]:
        result = None if result is None or d is None else algebra.broadcast_result(result, d)
        if result is None:
            raise EvalFailure(f"broadcast_shape() cannot tell the broadcast of dims {rest}")
    return result


@_value_fn("take", "x, indices", "list", "the elements of a 1-D list or tensor at indices")
def _take(x, indices):
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


@_value_fn(
    "inverse_perm",
    "perm",
    "list",
    "the permutation that undoes perm: transpose(transpose(x, perm), inverse_perm(perm)) is x",
)
def _inverse_perm(perm):
    axes = _ints(perm, "inverse_perm")
    budget.charge_elements(len(axes), budget.POINTER_BYTES, "a list")
    if sorted(axes) != list(range(len(axes))):
        raise EvalFailure(f"inverse_perm() takes a permutation, not {axes}")
    inverse = [0] * len(axes)
    for position, axis in enumerate(axes):
        inverse[axis] = position
    return inverse


@_value_fn(
    "unsqueeze_perm",
    "perm, axes",
    "list",
    "the perm that moves a Transpose below an Unsqueeze: Unsqueeze(Transpose(x, perm), axes) is "
    "Transpose(Unsqueeze(x, axes), unsqueeze_perm(perm, axes)) (the new axes stay in place)",
)
def _unsqueeze_perm(perm, axes):
    order = _ints(perm, "unsqueeze_perm")
    if sorted(order) != list(range(len(order))):
        raise EvalFailure(f"unsqueeze_perm() takes a permutation, not {order}")
    inserted = _ints(axes, "unsqueeze_perm")
    rank = len(order) + len(inserted)
    new = sorted(a + rank if a < 0 else a for a in inserted)
    if len(set(new)) != len(new) or any(not 0 <= a < rank for a in new):
        raise EvalFailure("bad unsqueeze axes")
    budget.charge_elements(rank, budget.POINTER_BYTES, "a list")
    kept = [a for a in range(rank) if a not in new]  # where x's axes land, in order
    result = list(range(rank))
    for position, axis in zip(kept, order):
        result[position] = kept[axis]
    return result


@_value_fn(
    "einsum_matmul",
    "equation, rank=any",
    "list",
    "[transA, transB] when the Einsum equation is one batched matrix product (the same leading "
    "letters on every side, then ik,kj->ij with either operand's last two swapped; rank letters "
    "each when rank is given), none otherwise",
)
def _einsum_matmul(equation, rank=None):
    if not isinstance(equation, str) or len(equation) > 64:
        return None
    text = equation.replace(" ", "")
    if text.count("->") != 1 or "." in text:
        return None
    inputs, output = text.split("->")
    operands = inputs.split(",")
    if len(operands) != 2:
        return None
    a, b = operands
    if not (len(a) == len(b) == len(output) >= 2) or not (a + b + output).isalpha():
        return None
    if rank is not None and len(a) != int(rank):
        return None
    batch = output[:-2]
    if a[:-2] != batch or b[:-2] != batch or len(set(batch)) != len(batch):
        return None
    i, j = output[-2:]
    letters = set(a[-2:]) | set(b[-2:])
    if i == j or i in batch or j in batch or len(letters) != 3 or not {i, j} <= letters:
        return None
    (k,) = letters - {i, j}
    if k in batch:
        return None
    trans_a = {i + k: 0, k + i: 1}.get(a[-2:])
    trans_b = {k + j: 0, j + k: 1}.get(b[-2:])
    if trans_a is None or trans_b is None:
        return None
    return [trans_a, trans_b]


def _reduce(name: str, fn: Callable, meaning: str) -> None:
    def impl(x, axis=None):
        arr = _array(x)
        budget.charge_elements(arr.size, 8, f"{name}()")  # (mean of ints makes floats)
        return fn(arr, axis=None if axis is None else int(axis))

    _value_fn(name, "x, axis=all", "value", f"{meaning}, or along one axis (numpy)")(impl)


for _name, _reducer, _meaning in (
    ("sum", np.sum, "the sum of x's elements"),
    ("prod", np.prod, "the product of x's elements"),
    ("mean", np.mean, "the mean of x's elements"),
    ("all", np.all, "whether every element of x is true (nonzero)"),
    ("any", np.any, "whether some element of x is true (nonzero)"),
):
    _reduce(_name, _reducer, _meaning)


@_value_fn("max", "x, ...", "value", "one argument: its largest element; several: their elementwise maximum")
def _max(*xs):
    if len(xs) == 1:
        return np.max(_array(xs[0]))
    result = _array(xs[0])
    for x in xs[1:]:
        other = _array(x)
        budget.charge_elements(budget.broadcast_elements(result, other), 8, "max()")
        result = np.maximum(result, other)
    return result


@_value_fn("min", "x, ...", "value", "one argument: its smallest element; several: their elementwise minimum")
def _min(*xs):
    if len(xs) == 1:
        return np.min(_array(xs[0]))
    result = _array(xs[0])
    for x in xs[1:]:
        other = _array(x)
        budget.charge_elements(budget.broadcast_elements(result, other), 8, "min()")
        result = np.minimum(result, other)
    return result


@_graph_fn("len", "x", "int", "the length of a list (a *rest binding, say) or of a tensor's first axis")
def _len(graph: GraphFacts, x):
    if isinstance(x, (list, tuple, str)):
        return len(x)
    shape = _shape_of(graph, x, "len")
    if not shape or not isinstance(shape[0], int):
        raise EvalFailure("len() needs a known first dimension")
    return shape[0]


@_value_fn("size", "x", "int", "the number of elements of a constant")
def _size(x):
    return int(_array(x).size)


@_value_fn("list", "x", "list", "a constant's elements as a flat list")
def _list(x):
    if type(x) is list and all(type(v) is int for v in x):
        return list(x)  # a shape, a perm: what numpy would give back anyway
    if type(x) is list and all(v is None or type(v) in (int, str) for v in x):
        # a shape with symbolic (or unknown) dims stays one: numpy would make every entry a string
        budget.charge_elements(len(x), budget.POINTER_BYTES, "a list")
        return list(x)
    arr = _array(x)
    budget.charge_elements(arr.size, budget.OBJECT_BYTES, "a list of a tensor's elements")
    return arr.reshape(-1).tolist()


@_value_fn("int", "x", "int", "a one-element constant as an integer")
def _int(x):
    arr = _array(x)
    if arr.size != 1:
        raise EvalFailure("int() of a tensor with several elements")
    return int(arr.reshape(-1)[0])


@_value_fn("float", "x", "float", "a one-element constant as a float")
def _float(x):
    arr = _array(x)
    if arr.size != 1:
        raise EvalFailure("float() of a tensor with several elements")
    return float(arr.reshape(-1)[0])


@_value_fn("isclose", "a, b, rtol=1e-5, atol=1e-8", "bool", "every element of a is close to b's (numpy.allclose)")
def _isclose(a, b, rtol=1e-5, atol=1e-8):
    a, b = _array(a), _array(b)
    budget.charge_elements(budget.broadcast_elements(a, b), 32, "isclose()")  # (temporaries)
    return bool(np.allclose(a, b, rtol=float(rtol), atol=float(atol)))


CONSTANTS: dict[str, object] = {"pi": math.pi, "e": math.e, "nan": math.nan}
