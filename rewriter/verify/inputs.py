"""What to feed a pattern node's free inputs and attributes so the instance is well-typed.

Knowledge of common ops' input shapes (Conv weights, BatchNorm statistics, MatMul operands,
broadcasting partners...) lives here, one function per op family.  An op without an entry
gets the instance's main shape; onnx shape inference then decides whether the draw is
valid.  Rules can always steer with ``example`` hints instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st
from onnx import TensorProto

from ..onnx_facts.schemas import OpInfo
from .choices import chance, permutation, pick

F = TensorProto.FLOAT
I64 = TensorProto.INT64
BOOL = TensorProto.BOOL

Draw = Callable  # draw(strategy) -> value: hypothesis' data.draw


@dataclass
class Spec:
    """A free input to create: element type, shape, and optionally fixed contents."""

    dtype: int
    shape: list[int]
    value: np.ndarray | None = None
    const: bool = False  # the op needs a constant here (shape, axes...)
    dim_names: list | None = None  # symbolic dims to declare (a dynamic-axes input)
    divisor: bool = False  # integers here must not be 0 (Div's, Mod's second input)


@dataclass
class NodeContext:
    """What is known while generating one node."""

    op: str
    domain: str
    opset: int
    known: list[tuple[int, list[int]] | None]  # (dtype, shape) of each input slot, if known
    attrs: dict = field(default_factory=dict)
    main_shape: list[int] = field(default_factory=list)
    dtype: int = F
    info: OpInfo | None = None  # the op's schema at the instance's opset
    inputs: list[str] = field(default_factory=list)  # pattern names of the node's inputs
    dim: Callable[[], int] = lambda: 2  # a dim size for the instance (see _Builder.dim)
    outputs: list[str] = field(default_factory=list)  # pattern names of the node's outputs

    def shape(self, slot: int) -> list[int] | None:
        known = self.known[slot] if slot < len(self.known) else None
        return None if known is None else known[1]

    def type(self, slot: int) -> int | None:
        known = self.known[slot] if slot < len(self.known) else None
        return None if known is None else known[0]


BROADCASTING = frozenset(
    {
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Pow",
        "Max",
        "Min",
        "Sum",
        "Mean",
        "Equal",
        "Greater",
        "Less",
        "GreaterOrEqual",
        "LessOrEqual",
        "PRelu",
        "Mod",
    }
)
BOOLEAN = frozenset({"And", "Or", "Xor", "Not"})


def broadcast_partner(draw: Draw, shape: list[int]) -> list[int]:
    """A shape that broadcasts against ``shape`` without growing it (mostly), sometimes
    one that does (a near miss for rules that must check it)."""
    kind = pick(draw, ["same", "same", "last", "suffix", "ones", "axis", "axis", "scalar", "grow"])
    if kind == "same" or not shape:
        return list(shape)
    if kind == "last":  # a bias along the last axis, the most common addend in real models
        return [shape[-1]]
    if kind == "suffix":
        return list(shape[draw(st.integers(0, len(shape))) :])
    if kind == "ones":
        return [d if chance(draw, 2) else 1 for d in shape]
    if kind == "axis":  # varies along one axis only: [C, 1, 1] per-channel style, or another axis
        axis = draw(st.integers(0, len(shape) - 1))
        full = [1] * len(shape)
        full[axis] = shape[axis]
        return full[draw(st.integers(0, axis)) :]
    if kind == "scalar":
        return pick(draw, [[], [1]])
    return [2] + list(shape)  # grows the rank


def input_spec(draw: Draw, ctx: NodeContext, slot: int) -> Spec:
    """The spec of free input ``slot`` of a node (see the module docstring)."""
    handler = _HANDLERS.get((ctx.domain, ctx.op))
    if handler is not None:
        spec = handler(draw, ctx, slot)
        if spec is not None:
            return spec
    if ctx.op in BOOLEAN and ctx.domain == "":
        other = next((s for s in (ctx.shape(i) for i in range(len(ctx.known))) if s is not None), None)
        return Spec(BOOL, broadcast_partner(draw, other) if other is not None else list(ctx.main_shape))
    if ctx.op in BROADCASTING and ctx.domain == "":
        partner = next((ctx.known[i] for i in range(len(ctx.known)) if i != slot and ctx.known[i]), None)
        if partner is not None:
            return Spec(partner[0], broadcast_partner(draw, partner[1]))
    return Spec(ctx.dtype, list(ctx.main_shape))


# ------------------------------------------------------------------- per-op handlers


def _conv(draw, ctx: NodeContext, slot: int) -> Spec | None:
    """Channels and spatial sizes come from one small pool, so they often coincide (which
    is when a per-channel check that looks at sizes only goes wrong)."""
    group = int(ctx.attrs.get("group", 1) or 1)
    x = ctx.shape(0)

    def counts() -> int:  # few channels, now and then counts around a vector width (NCHWc blocks)
        if pick(draw, ["few", "few", "few", "block"]) == "few":
            return ctx.dim()
        return pick(draw, [4, 7, 8, 15, 16, 20, 24, 32])

    if slot == 0:
        rank = pick(draw, [4, 3])
        channels = group * counts()
        return Spec(ctx.dtype, [draw(st.integers(1, 2)), channels] + [ctx.dim() for _ in range(rank - 2)])
    if x is None:
        return None
    # a kernel no larger than a known spatial size (an empty or symbolic one: any small one)
    kernel = ctx.attrs.get("kernel_shape") or [
        draw(st.integers(1, min(3, d) if isinstance(d, int) and d >= 1 else 3)) for d in x[2:]
    ]
    if slot == 1:
        out_channels = group * counts()
        return Spec(ctx.dtype, [out_channels, x[1] // group] + list(kernel))
    w = ctx.shape(1)
    return Spec(ctx.dtype, [w[0] if w else x[1]])


def _batchnorm(draw, ctx: NodeContext, slot: int) -> Spec | None:
    """Statistics per channel; per element (all but the batch axis) where an opset 7-8
    BatchNormalization has ``spatial`` 0."""
    x = ctx.shape(0)
    if slot == 0 or x is None or len(x) < 2:
        return None
    return Spec(ctx.dtype, list(x[1:]) if ctx.attrs.get("spatial", 1) == 0 else [x[1]])


def _layernorm(draw, ctx: NodeContext, slot: int) -> Spec | None:
    x = ctx.shape(0)
    if slot == 0 or x is None:
        return None
    axis = int(ctx.attrs.get("axis", -1))
    return Spec(ctx.dtype, list(x[axis if axis >= 0 else len(x) + axis :]))


def _matmul(draw, ctx: NodeContext, slot: int) -> Spec | None:
    """Operands whose contracted dims agree; one draw in six the second a vector (a 1-D
    operand, which MatMul reads as a column: onnxruntime's FusedMatMul transposes A wrongly
    beside a 1-D B, which a rewrite into transA met)."""
    a = ctx.shape(0)
    if slot == 1 and a is not None and a:
        transposed = int(ctx.attrs.get("transB", 0) or 0)
        if not transposed and chance(draw, 6):
            return Spec(ctx.dtype, [a[-1]])
        n = ctx.dim()
        tail = [n, a[-1]] if transposed else [a[-1], n]
        if len(a) > 2 and chance(draw, 2):
            return Spec(ctx.dtype, list(a[:-2]) + tail)
        return Spec(ctx.dtype, tail)
    if slot == 0:
        b = ctx.shape(1)
        if b is not None and len(b) >= 2:
            return Spec(ctx.dtype, [ctx.dim(), b[-2]])
        return Spec(ctx.dtype, list(ctx.main_shape) if len(ctx.main_shape) >= 2 else [2, 3])
    return None


def _gemm(draw, ctx: NodeContext, slot: int) -> Spec | None:
    trans_a, trans_b = int(ctx.attrs.get("transA", 0) or 0), int(ctx.attrs.get("transB", 0) or 0)
    a, b = ctx.shape(0), ctx.shape(1)
    if slot == 0:
        if b is not None and len(b) == 2:
            k = b[1] if trans_b else b[0]
            m = ctx.dim()
            return Spec(ctx.dtype, [k, m] if trans_a else [m, k])
        return Spec(ctx.dtype, [ctx.dim(), ctx.dim()])
    if slot == 1 and a is not None and len(a) == 2:
        k = a[0] if trans_a else a[1]
        n = ctx.dim()
        return Spec(ctx.dtype, [n, k] if trans_b else [k, n])
    if slot == 2 and a is not None and b is not None and len(a) == 2 and len(b) == 2:
        m = a[1] if trans_a else a[0]
        n = b[0] if trans_b else b[1]
        return Spec(ctx.dtype, pick(draw, [[n], [1, n], [m, n], [m, 1], []]))
    return None


def _clip(draw, ctx: NodeContext, slot: int) -> Spec | None:
    if slot == 0:
        return None
    return Spec(ctx.type(0) or ctx.dtype, [])


def _dropout(draw, ctx: NodeContext, slot: int) -> Spec | None:
    if slot == 1:
        return Spec(F, [], np.asarray(pick(draw, [0.0, 0.1, 0.5]), np.float32), const=True)
    if slot == 2:
        return Spec(BOOL, [], np.asarray(chance(draw, 2)), const=True)
    return None


def _axes_values(draw, rank: int, count: int) -> list[int]:
    axes = permutation(draw, list(range(rank)))[:count]
    return [a - rank if chance(draw, 2) else a for a in axes]


def _slice(draw, ctx: NodeContext, slot: int) -> Spec | None:
    x = ctx.shape(0)
    if slot == 0 or x is None or not x:
        return None
    count = len(ctx.attrs.get("_slice_axes", [])) or 1
    if slot == 3:
        axes = _axes_values(draw, len(x), count)
        ctx.attrs["_slice_axes"] = axes
        return Spec(I64, [len(axes)], np.asarray(axes, np.int64), const=True)
    if slot == 1:
        return Spec(I64, [count], np.asarray([pick(draw, [0, 0, 1]) for _ in range(count)], np.int64), const=True)
    if slot == 2:
        ends = [pick(draw, [np.iinfo(np.int64).max, 2**31 - 1, 100, 1, -1]) for _ in range(count)]
        return Spec(I64, [count], np.asarray(ends, np.int64), const=True)
    if slot == 4:
        return Spec(I64, [count], np.asarray([pick(draw, [1, 1, 2]) for _ in range(count)], np.int64), const=True)
    return None


def _unsqueeze(draw, ctx: NodeContext, slot: int) -> Spec | None:
    x = ctx.shape(0)
    if slot == 1 and x is not None:
        axis = draw(st.integers(-(len(x) + 1), len(x)))
        return Spec(I64, [1], np.asarray([axis], np.int64), const=True)
    return None


def _expand(draw, ctx: NodeContext, slot: int) -> Spec | None:
    x = ctx.shape(0)
    if slot == 1 and x is not None:
        kind = pick(draw, ["ones", "same", "grow"])
        target = (
            [1] * draw(st.integers(0, len(x)))
            if kind == "ones"
            else list(x)
            if kind == "same"
            else [2] + [d if d != 1 else 3 for d in x]
        )
        return Spec(I64, [len(target)], np.asarray(target, np.int64), const=True)
    return None


def _reshape(draw, ctx: NodeContext, slot: int) -> Spec | None:
    """A target shape for x: its own (as given, with a -1, or with 0 = copy) or another of
    the same size (flattened, or with a 1 added)."""
    x = ctx.shape(0)
    if slot != 1 or x is None:
        return None
    own = list(x)
    choices = [own, [int(np.prod(x))], own + [1], [1] + own]
    if own:
        choices += [[-1] + own[1:], [0] + own[1:]]
    if len(own) >= 2:  # the same count regrouped: the axes reversed, the last two merged
        choices += [own[::-1], own[:-2] + [own[-2] * own[-1]]]
    target = pick(draw, choices, label="reshape to")
    return Spec(I64, [len(target)], np.asarray(target, np.int64), const=True)


def _gather(draw, ctx: NodeContext, slot: int) -> Spec | None:
    """Integer indices inside the gathered axis."""
    data = ctx.shape(0)
    if slot != 1 or not data:
        return None
    axis = int(ctx.attrs.get("axis", 0))
    size = data[axis] if -len(data) <= axis < len(data) else 1
    if size < 1:  # nothing to gather from
        return None
    index = draw(st.integers(-size, size - 1), label="gather index")
    shape = pick(draw, [[], [1]], label="indices shape")
    return Spec(I64, shape, np.full(shape, index, np.int64), const=True)


def _where(draw, ctx: NodeContext, slot: int) -> Spec | None:
    base = next((s for s in (ctx.shape(i) for i in range(3)) if s is not None), ctx.main_shape)
    if slot == 0:
        return Spec(BOOL, list(base))
    other = ctx.type(1) or ctx.type(2) or ctx.dtype
    return Spec(other, broadcast_partner(draw, list(base)))


def _transpose(draw, ctx: NodeContext, slot: int) -> Spec | None:
    """A tensor of the rank a given ``perm`` permutes (a hinted or captured one)."""
    perm = ctx.attrs.get("perm")
    if slot != 0 or not isinstance(perm, (list, tuple)) or not perm:
        return None
    return Spec(ctx.dtype, [ctx.dim() for _ in perm])


def _split(draw, ctx: NodeContext, slot: int) -> Spec | None:
    """The sizes input: int64 sizes of the outputs that add up to the split axis."""
    x = ctx.shape(0)
    if slot != 1 or not x:
        return None
    axis = int(ctx.attrs.get("axis", 0) or 0)
    if not -len(x) <= axis < len(x) or not isinstance(x[axis], int):
        return None
    parts, total = max(len(ctx.outputs), 1), x[axis]
    if total < parts:
        return None
    cuts = sorted(draw(st.sets(st.integers(1, total - 1), min_size=parts - 1, max_size=parts - 1))) if parts > 1 else []
    sizes = np.diff([0, *cuts, total]).astype(np.int64)
    return Spec(I64, [parts], sizes, const=True)


def _pad(draw, ctx: NodeContext, slot: int) -> Spec | None:
    """Pads as an input (opset 11 on): small non-negative int64 begins and ends per axis;
    the constant value a scalar of the data's type."""
    x = ctx.shape(0)
    if x is None:
        return None
    if slot == 1:
        pads = [pick(draw, [0, 0, 1, 2]) for _ in range(2 * len(x))]
        return Spec(I64, [2 * len(x)], np.asarray(pads, np.int64), const=True)
    if slot == 2:
        return Spec(ctx.type(0) or ctx.dtype, [])
    return None


def _tile(draw, ctx: NodeContext, slot: int) -> Spec | None:
    """Repeats: int64, one per axis."""
    x = ctx.shape(0)
    if slot != 1 or x is None:
        return None
    repeats = [pick(draw, [1, 1, 2]) for _ in x]
    return Spec(I64, [len(x)], np.asarray(repeats, np.int64), const=True)


def _bias_last_axis(draw, ctx: NodeContext, slot: int) -> Spec | None:
    x = ctx.shape(0)
    if slot >= 1 and x:
        return Spec(ctx.dtype, [x[-1]])
    return None


def _skip_layernorm(draw, ctx: NodeContext, slot: int) -> Spec | None:
    x = ctx.shape(0)
    if slot == 0:
        return Spec(ctx.dtype, list(ctx.main_shape) if len(ctx.main_shape) == 3 else [2, 3, 4])
    if not x:  # unknown, or a rank-0 draw the op refuses anyway
        return None
    return Spec(ctx.dtype, list(x) if slot == 1 else [x[-1]])


_HANDLERS: dict[tuple[str, str], Callable] = {
    ("", "Conv"): _conv,
    ("", "BatchNormalization"): _batchnorm,
    ("", "LayerNormalization"): _layernorm,
    ("", "MatMul"): _matmul,
    ("", "Gemm"): _gemm,
    ("", "Clip"): _clip,
    ("", "Dropout"): _dropout,
    ("", "Slice"): _slice,
    ("", "Unsqueeze"): _unsqueeze,
    ("", "Reshape"): _reshape,
    ("", "Gather"): _gather,
    ("", "Expand"): _expand,
    ("", "Where"): _where,
    ("", "Transpose"): _transpose,
    ("", "Split"): _split,
    ("", "Pad"): _pad,
    ("", "Tile"): _tile,
    ("com.microsoft", "FusedMatMul"): _matmul,
    ("com.microsoft", "BiasGelu"): _bias_last_axis,
    ("com.microsoft", "SkipLayerNormalization"): _skip_layernorm,
    ("com.microsoft", "FusedConv"): _conv,
}


# --------------------------------------------------------------------- attributes


def attribute_candidates(op: str, name: str, rank: int) -> list | None:
    """Values worth trying for a captured attribute (None: leave it at its default)."""
    table: dict[str, list | None] = {
        "epsilon": [1e-5, 1e-3, 0.1, 1.0],
        "alpha": [1.0, 0.5, 2.0],
        "beta": [1.0, 0.5, 2.0],
        "transA": [0, 1],
        "transB": [0, 1],
        "group": [1, 2],
        "strides": [[1] * max(rank - 2, 1), [2] * max(rank - 2, 1)],
        "pads": [[0] * (2 * max(rank - 2, 1)), [1] * (2 * max(rank - 2, 1))],
        "to": [TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64],
        "axis": list(range(-rank, rank)) if rank else [0],
        "keepdims": [0, 1],
        # the last axis mostly (what normalizations reduce), any other now and then
        "axes": [[-1]] * 3 + [[rank - 1]] * 2 + [[a] for a in range(rank - 1)] + [[a - rank] for a in range(rank - 1)]
        if rank
        else None,
        "min": [-1.0, 0.5],
        "max": [1.0, 6.0],
        "perm": [list(range(rank)), list(range(rank))[::-1], list(range(rank - 2)) + [rank - 1, rank - 2]]
        if rank >= 2
        else None,
    }
    if name == "perm":
        return None  # drawn as a permutation of the input rank
    return table.get(name)
