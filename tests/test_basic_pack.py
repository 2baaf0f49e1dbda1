"""The bundled basic pack, rule by rule: where each must apply and where it must not.

Every positive case is also run in onnxruntime before and after, on random inputs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import assert_same_outputs, check_rule, init, model, ops, optimize_basic, run, tensor
from onnx import TensorProto, helper

from rewriter.expr.functions import FUNCTIONS
from rewriter.expr.values import EvalFailure

F = TensorProto.FLOAT
RNG = np.random.default_rng(42)


def rand(*shape, positive=False):
    values = RNG.standard_normal(shape).astype(np.float32)
    return np.abs(values) + 0.5 if positive else values


def applied(result, rule: str) -> int:
    return result.report.applied(rule)


def check(before: onnx.ModelProto, rule: str, expect: bool, atol: float = 1e-5):
    return check_rule(before, "basic", rule, expect, "basic", atol)


def unary(op_nodes, x_shape=(2, 3), y_shape=None, inits=(), opset=17, dtype=F, inputs=None):
    return model(
        op_nodes,
        inputs or [tensor("x", dtype, list(x_shape))],
        [tensor("y", dtype, list(y_shape or x_shape))],
        inits,
        opset=opset,
    )


def tail(op_node):
    """op_node writes 't'; a Neg after it keeps the graph output away from the graph input."""
    return [op_node, helper.make_node("Neg", ["t"], ["y"])]


# ---------------------------------------------------------------------- eliminations


def test_identity_elimination():
    after = check(unary(tail(helper.make_node("Identity", ["x"], ["t"]))), "IdentityElimination", True)
    assert ops(after) == {"Neg": 1}


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
def test_a_variadic_op_of_one_input_is_that_input(op):
    after = check(unary(tail(helper.make_node(op, ["x"], ["t"]))), "VariadicSingleElimination", True)
    assert ops(after) == {"Neg": 1}
    two = model(
        tail(helper.make_node(op, ["x", "x2"], ["t"])),
        [tensor("x", F, [2, 3]), tensor("x2", F, [2, 3])],
        [tensor("y", F, [2, 3])],
    )
    check(two, "VariadicSingleElimination", False)


def expand_to_computed(order: list[int]) -> onnx.ModelProto:
    """x [1, seq, 1] expanded to Gather(Shape(x), order): its own shape when order keeps it."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "order"], ["t"], axis=0),
        helper.make_node("Expand", ["x", "t"], ["e"]),
        helper.make_node("Neg", ["e"], ["y"]),
    ]
    return model(
        nodes,
        [tensor("x", F, [1, "seq", 1])],
        [tensor("y", F, ["a", "b", 1])],
        [init("order", np.array(order, np.int64))],
    )


def test_expand_to_its_own_computed_shape_goes():
    after = check(expand_to_computed([0, 1, 2]), "ExpandSameDimsElimination", True)
    assert "Expand" not in ops(after)
    # the sizes in another order broadcast the 1-dims: [seq, seq, 1], kept
    check(expand_to_computed([1, 0, 2]), "ExpandSameDimsElimination", False)


def gather_of_transpose(perm: list[int], axis: int) -> onnx.ModelProto:
    """Gather of index 1 along axis of Transpose(x [2, 3, 4, 5], perm)."""
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=perm),
        helper.make_node("Gather", ["t", "one"], ["g"], axis=axis),
        helper.make_node("Neg", ["g"], ["y"]),
    ]
    shape = [[2, 3, 4, 5][p] for k, p in enumerate(perm) if k != axis]
    return model(nodes, [tensor("x", F, [2, 3, 4, 5])], [tensor("y", F, shape)], [init("one", np.array(1, np.int64))])


def test_a_gather_of_one_index_reads_through_a_transpose_that_moves_only_its_axis():
    after = check(gather_of_transpose([0, 2, 1, 3], 1), "GatherTransposeFusion", True)
    assert ops(after) == {"Gather": 1, "Neg": 1}  # the Transpose went with its last reader
    check(gather_of_transpose([1, 2, 0, 3], 0), "GatherTransposeFusion", False)  # the others swap


def padding_mask_gather(batch, keys: str, static: bool = False) -> onnx.ModelProto:
    """transformers 4.x's padding mask as torch.export writes it: attention_mask[b, kv] for
    b < B (the mask's Shape) and kv < T (the cache's length + 1), through Max, Expand,
    Unsqueeze, Concat and GatherND; ``static``: the index grid folded to a constant."""
    i64 = TensorProto.INT64
    nodes = [helper.make_node("Cast", ["mask"], ["m"], to=TensorProto.BOOL)]
    inits = [init("zero", np.array(0, np.int64)), init("one", np.array(1, np.int64))]
    if static:
        b, t = batch, 5
        grid = np.stack(np.meshgrid(np.arange(b), np.arange(t), indexing="ij"), -1).astype(np.int64)
        inits.append(init("c", grid))
        inputs = [tensor("mask", i64, [b, t + 2])]
    else:
        nodes += [
            helper.make_node("Shape", ["mask"], ["b"], start=0, end=1),
            helper.make_node("Squeeze", ["b"], ["n0"]),
            helper.make_node("Range", ["zero", "n0", "one"], ["ar0"]),
            helper.make_node("Reshape", ["ar0", "col"], ["r"]),
            helper.make_node("Shape", ["past"], ["p"], start=2, end=3),
            helper.make_node("Squeeze", ["p"], ["ps"]),
            helper.make_node("Add", ["one", "ps"], ["n1"]),
            helper.make_node("Range", ["zero", "n1", "one"], ["t"]),
            helper.make_node("Max", ["r", "t"], ["mx"]),
            helper.make_node("Shape", ["mx"], ["s"]),
            helper.make_node("Expand", ["r", "s"], ["er"]),
            helper.make_node("Unsqueeze", ["er", "last"], ["ur"]),
            helper.make_node("Expand", ["t", "s"], ["et"]),
            helper.make_node("Unsqueeze", ["et", "last"], ["ut"]),
            helper.make_node("Concat", ["ur", "ut"], ["c"], axis=-1),
        ]
        inits += [init("col", np.array([-1, 1], np.int64)), init("last", np.array([-1], np.int64))]
        inputs = [tensor("mask", i64, [batch, keys]), tensor("past", F, [batch, 2, "past", 4])]
    nodes.append(helper.make_node("GatherND", ["m", "c"], ["y"]))
    out = [batch, 5] if static else [batch, keys]
    return model(nodes, inputs, [tensor("y", TensorProto.BOOL, out)], inits, opset=18)


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_an_index_grid_over_the_padding_mask_becomes_a_slice(static):
    # the mask's width named apart from the cache's length: nothing ties the two but the run
    before = padding_mask_gather(2 if static else "batch", keys="width", static=static)
    after = optimize_basic(before).model
    assert "GatherND" not in ops(after) and "Expand" not in ops(after)
    if static:
        assert_same_outputs(before, after)
        return
    rng = np.random.default_rng(3)
    # a mask as long as the cache plus one, one longer (the grid reads its first columns),
    # and an empty batch (the grid gives its T columns whatever the mask's width)
    for batch, past, width in [(3, 4, 5), (2, 3, 5), (0, 3, 2)]:
        feeds = {
            "mask": rng.integers(0, 2, (batch, width)).astype(np.int64),
            "past": np.zeros((batch, 2, past, 4), np.float32),
        }
        (want,), (got,) = run(before, feeds), run(after, feeds)
        assert want.shape == got.shape == (batch, past + 1) and (want == got).all()


def test_dropout_elimination_in_inference():
    after = check(
        unary(tail(helper.make_node("Dropout", ["x", "ratio"], ["t"])), inits=[init("ratio", np.float32(0.3))]),
        "DropoutElimination",
        True,
    )
    assert ops(after) == {"Neg": 1}


def test_dropout_kept_in_training_mode():
    m = unary(
        tail(helper.make_node("Dropout", ["x", "ratio", "training"], ["t"])),
        inits=[init("ratio", np.float32(0.0)), init("training", np.bool_(True))],
    )
    assert applied(optimize_basic(m), "DropoutElimination") == 0


def test_dropout_kept_when_its_mask_is_used():
    m = model(
        [helper.make_node("Dropout", ["x"], ["t", "mask"]), helper.make_node("Neg", ["t"], ["y"])],
        [tensor("x", F, [2, 3])],
        [tensor("y", F, [2, 3]), tensor("mask", TensorProto.BOOL, [2, 3])],
    )
    result = optimize_basic(m)
    assert applied(result, "DropoutElimination") == 0 and "Dropout" in ops(result.model)


def slice_model(starts, ends, axes=None, steps=None, shape=(4, 5)):
    names, inits = (
        ["x", "starts", "ends"],
        [init("starts", np.array(starts, np.int64)), init("ends", np.array(ends, np.int64))],
    )
    for name, value in (("axes", axes), ("steps", steps)):
        if value is not None:
            names.append(name)
            inits.append(init(name, np.array(value, np.int64)))
    index = [slice(None)] * len(shape)
    for i, axis in enumerate(axes if axes is not None else range(len(starts))):
        index[axis] = slice(starts[i], min(ends[i], 2**62), None if steps is None else steps[i])
    out_shape = list(np.empty(shape)[tuple(index)].shape)
    return model(
        tail(helper.make_node("Slice", names, ["t"])), [tensor("x", F, list(shape))], [tensor("y", F, out_shape)], inits
    )


@pytest.mark.parametrize(
    "starts, ends, axes, steps",
    [
        ([0], [np.iinfo(np.int64).max], [1], None),
        ([0, 0], [4, 5], [0, 1], [1, 1]),
        ([0], [100], [-1], None),
        ([-5], [np.iinfo(np.int64).max], [1], None),  # from the end, past the start (XLM's x[:, -16:])
        ([-9, 0], [4, 5], [0, 1], None),
    ],
)
def test_slice_elimination_when_it_keeps_everything(starts, ends, axes, steps):
    check(slice_model(starts, ends, axes, steps), "SliceElimination", True)


@pytest.mark.parametrize(
    "starts, ends, axes, steps",
    [
        ([1], [5], [1], None),  # drops the first column
        ([0], [4], [1], None),  # drops the last column
        ([0], [100], [1], [2]),  # strided
        ([-4], [100], [1], None),  # the last four of five
    ],
)
def test_slice_elimination_refuses_real_slices(starts, ends, axes, steps):
    check(slice_model(starts, ends, axes, steps), "SliceElimination", False)


def test_a_concat_of_one_input_is_that_input():
    after = check(unary(tail(helper.make_node("Concat", ["x"], ["t"], axis=1))), "ConcatSingleElimination", True)
    assert ops(after) == {"Neg": 1}


def test_slice_attribute_form_before_opset_10():
    m = model(
        tail(helper.make_node("Slice", ["x"], ["t"], starts=[0], ends=[2**31 - 1], axes=[0])),
        [tensor("x", F, [3, 2])],
        [tensor("y", F, [3, 2])],
        opset=9,
    )
    check(m, "SliceAttributeElimination", True)


def test_unsqueeze_of_constant_becomes_a_constant():
    m = model(
        [helper.make_node("Unsqueeze", ["c", "axes"], ["u"]), helper.make_node("Add", ["x", "u"], ["y"])],
        [tensor("x", F, [2, 1, 3])],
        [tensor("y", F, [2, 1, 3])],
        [init("c", rand(2, 3)), init("axes", np.array([1], np.int64))],
    )
    after = check(m, "UnsqueezeConstant", True)
    assert ops(after) == {"Add": 1}


def test_unsqueeze_attribute_form_before_opset_13():
    m = model(
        [helper.make_node("Unsqueeze", ["c"], ["u"], axes=[0]), helper.make_node("Add", ["x", "u"], ["y"])],
        [tensor("x", F, [2, 3])],
        [tensor("y", F, [2, 3])],
        [init("c", rand(3))],
        opset=11,
    )
    after = check(m, "UnsqueezeConstantAttribute", True)
    assert ops(after) == {"Add": 1}


def test_unsqueeze_of_a_graph_input_is_kept():
    m = model(
        [helper.make_node("Unsqueeze", ["x", "axes"], ["y"])],
        [tensor("x", F, [2, 3])],
        [tensor("y", F, [1, 2, 3])],
        [init("axes", np.array([0], np.int64))],
    )
    check(m, "UnsqueezeConstant", False)


def expand_model(shape_value, x_shape=(2, 3), y_shape=None):
    return model(
        tail(helper.make_node("Expand", ["x", "s"], ["t"])),
        [tensor("x", F, list(x_shape))],
        [tensor("y", F, list(y_shape or x_shape))],
        [init("s", np.array(shape_value, np.int64))],
    )


@pytest.mark.parametrize("shape_value", [[2, 3], [1, 3], [1], [3]])
def test_expand_elimination_when_shape_is_unchanged(shape_value):
    check(expand_model(shape_value), "ExpandElimination", True)


@pytest.mark.parametrize("shape_value, y_shape", [([4, 2, 3], [4, 2, 3]), ([1, 2, 3], [1, 2, 3])])
def test_expand_kept_when_it_broadcasts(shape_value, y_shape):
    check(expand_model(shape_value, y_shape=y_shape), "ExpandElimination", False)


@pytest.mark.parametrize(
    "x_shape, shape_value, applies",
    [
        (["u", 16, 64], [1, 16, 64], True),  # xmod, dynamo without optimization: u from a NonZero
        (["u", 16, 64], [16, 1], True),
        ([None, 16], [1, 16], True),
        (["u", 16], [3, 16], False),  # u may be 1
        ([None, 16], [3, 16], False),
        (["u", 1], [1, 4], False),
        (["u", 16], [1, 1, 16], False),  # adds a dim
    ],
)
def test_expand_elimination_with_symbolic_dims(x_shape, shape_value, applies):
    """A symbolic or unknown dim broadcasts with 1 to itself; against another number it could
    be 1 and grow, so the Expand stays."""
    out_shape = x_shape if applies else [f"o{i}" for i in range(max(len(x_shape), len(shape_value)))]
    check(expand_model(shape_value, x_shape=x_shape, y_shape=out_shape), "ExpandElimination", applies)


@pytest.mark.parametrize(
    "shapes, expected",
    [
        ((["u", 16], [1, 16]), ["u", 16]),
        ((["u", 16], ["u", 1]), ["u", 16]),
        (([2, 1, 3], [4, 1]), [2, 4, 3]),
        (([None], [1]), [None]),
        (([], [5]), [5]),
    ],
)
def test_broadcast_shape_with_symbolic_dims(shapes, expected):
    assert FUNCTIONS["broadcast_shape"].impl(*shapes) == expected


@pytest.mark.parametrize("shapes", [(["u"], ["v"]), (["u"], [3]), ([None], [3]), ([None], [None]), ([2], [3])])
def test_broadcast_shape_refuses_what_it_cannot_tell(shapes):
    with pytest.raises(EvalFailure):
        FUNCTIONS["broadcast_shape"].impl(*shapes)


def test_cast_elimination_to_the_same_type():
    check(unary(tail(helper.make_node("Cast", ["x"], ["t"], to=F))), "CastElimination", True)


def test_a_constant_cast_like_a_tensor_folds():
    """The dynamo exporter without its optimizer scales BLOOM's scores by CastLike(c, scores):
    as a Cast of a constant it folds, and the scale reaches the product's fusions."""
    nodes = [
        helper.make_node("CastLike", ["c", "x"], ["k"]),
        helper.make_node("Mul", ["x", "k"], ["y"]),
    ]
    m = model(nodes, [tensor("x", F, [2, 3])], [tensor("y", F, [2, 3])], [init("c", np.array(0.5, np.float64))])
    check(m, "CastLikeToCast", True)
    assert ops(optimize_basic(m).model) == {"Mul": 1}


def test_cast_kept_when_it_converts():
    m = model(
        tail(helper.make_node("Cast", ["x"], ["t"], to=TensorProto.INT64)),
        [tensor("x", F, [2, 3])],
        [tensor("y", TensorProto.INT64, [2, 3])],
    )
    check(m, "CastElimination", False)


@pytest.mark.parametrize(
    "op, value, rule",
    [
        ("Add", 0.0, "AddZeroElimination"),
        ("Sub", 0.0, "SubZeroElimination"),
        ("Mul", 1.0, "MulOneElimination"),
        ("Div", 1.0, "DivOneElimination"),
    ],
)
def test_noop_arithmetic_elimination(op, value, rule):
    m = unary(tail(helper.make_node(op, ["x", "c"], ["t"])), inits=[init("c", np.float32(value))])
    after = check(m, rule, True)
    assert ops(after) == {"Neg": 1}


def test_noop_elimination_with_constant_on_the_left():
    m = unary(tail(helper.make_node("Add", ["c", "x"], ["t"])), inits=[init("c", np.zeros([1], np.float32))])
    check(m, "AddZeroElimination", True)


@pytest.mark.parametrize(
    "op, inputs, value, shape",
    [
        ("Sub", ["c", "x"], 0.0, []),  # 0 - x is not x
        ("Div", ["c", "x"], 1.0, []),  # 1 / x is not x
        ("Add", ["x", "c"], 0.0, [1, 1, 1]),  # broadcasting raises the rank
        ("Mul", ["x", "c"], 2.0, []),  # not the unit
    ],
)
def test_noop_elimination_refuses(op, inputs, value, shape):
    c = np.full(shape, value, np.float32)
    y_shape = [1, 2, 3] if shape == [1, 1, 1] else [2, 3]
    m = model(
        tail(helper.make_node(op, inputs, ["t"])), [tensor("x", F, [2, 3])], [tensor("y", F, y_shape)], [init("c", c)]
    )
    result = optimize_basic(m)
    assert op in ops(result.model)
    assert_same_outputs(m, result.model)


# ------------------------------------------------------------------------- fusions


def conv_model(tail_nodes, with_bias=True, out="y", inits=(), channels=4):
    conv_inputs = ["x", "W", "B"] if with_bias else ["x", "W"]
    nodes = [helper.make_node("Conv", conv_inputs, ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3])] + tail_nodes
    weights = [init("W", rand(channels, 3, 3, 3))] + ([init("B", rand(channels))] if with_bias else [])
    return model(nodes, [tensor("x", F, [1, 3, 8, 8])], [tensor(out, F, [1, channels, 8, 8])], weights + list(inits))


@pytest.mark.parametrize("b_shape", [[4, 1, 1], [1, 4, 1, 1], [1], []])
@pytest.mark.parametrize("with_bias", [True, False])
def test_conv_add_fusion(b_shape, with_bias):
    m = conv_model(
        [helper.make_node("Add", ["c", "b"], ["y"])],
        with_bias,
        inits=[init("b", rand(*b_shape) if b_shape != [1] else rand(1))],
    )
    after = check(m, "ConvAddFusion", True)
    assert ops(after) == {"Conv": 1}


@pytest.mark.parametrize("b_shape", [[1, 4, 8, 1], [4, 8, 8], [1, 1, 4, 1, 1]])
def test_conv_add_fusion_refuses_non_per_channel_bias(b_shape):
    out_shape = list(np.broadcast_shapes((1, 4, 8, 8), tuple(b_shape)))
    m = conv_model([helper.make_node("Add", ["c", "b"], ["y"])], inits=[init("b", rand(*b_shape))])
    m.graph.output[0].CopyFrom(tensor("y", F, out_shape))
    check(m, "ConvAddFusion", False)


def test_conv_add_fusion_refuses_a_non_constant_addend():
    m = conv_model([helper.make_node("Add", ["c", "b"], ["y"])])
    m.graph.input.append(tensor("b", F, [4, 1, 1]))
    check(m, "ConvAddFusion", False)


@pytest.mark.parametrize("with_bias", [True, False])
def test_conv_mul_fusion(with_bias):
    m = conv_model([helper.make_node("Mul", ["s", "c"], ["y"])], with_bias, inits=[init("s", rand(4, 1, 1))])
    after = check(m, "ConvMulFusion", True, atol=1e-4)
    assert ops(after) == {"Conv": 1}


def test_conv_mul_fusion_refuses_spatial_scale():
    m = conv_model([helper.make_node("Mul", ["c", "s"], ["y"])], inits=[init("s", rand(1, 1, 8, 8))])
    check(m, "ConvMulFusion", False)


def test_conv_mul_fusion_refuses_a_scale_that_would_fold_to_nan():
    # an infinite scale times the zero weights: NaN weights, where the output was infinite
    scale = np.ones((4, 1, 1), np.float32)
    scale[0] = np.inf
    m = conv_model([helper.make_node("Mul", ["c", "s"], ["y"])], inits=[init("s", scale)])
    for w in m.graph.initializer:
        if w.name == "W":
            w.CopyFrom(init("W", np.zeros((4, 3, 3, 3), np.float32)))
    check(m, "ConvMulFusion", False)


def bn(inputs_prefix="", eps=1e-3, channels=4, **attrs):
    node = helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"], epsilon=eps, **attrs)
    inits = [
        init("scale", rand(channels)),
        init("bias", rand(channels)),
        init("mean", rand(channels)),
        init("var", rand(channels, positive=True)),
    ]
    return node, inits


@pytest.mark.parametrize("with_bias", [True, False])
def test_conv_batchnorm_fusion(with_bias):
    node, inits = bn(eps=1e-2)
    after = check(conv_model([node], with_bias, inits=inits), "ConvBatchNormFusion", True, atol=1e-4)
    assert ops(after) == {"Conv": 1}


def test_conv_batchnorm_fusion_uses_epsilon():
    # a large epsilon makes forgetting it visible; the fused model must still agree
    node, inits = bn(eps=10.0)
    check(conv_model([node], inits=inits), "ConvBatchNormFusion", True, atol=1e-4)


def test_conv_batchnorm_fusion_refuses_non_constant_statistics():
    node, inits = bn()
    m = conv_model([node], inits=[i for i in inits if i.name != "mean"])
    m.graph.input.append(tensor("mean", F, [4]))
    check(m, "ConvBatchNormFusion", False)


def test_conv_batchnorm_fusion_refuses_a_zero_variance_without_epsilon():
    node, inits = bn(eps=0.0)
    inits = [init("var", np.zeros(4, np.float32)) if i.name == "var" else i for i in inits]
    check(conv_model([node], inits=inits), "ConvBatchNormFusion", False)


def test_conv_batchnorm_fusion_in_an_old_opset():
    node, inits = bn()
    m = conv_model([node], inits=inits)
    m.opset_import[0].version = 9
    check(m, "ConvBatchNormFusion", True, atol=1e-4)


def test_matmul_batchnorm_fusion():
    node = helper.make_node("BatchNormalization", ["m", "scale", "bias", "mean", "var"], ["y"], epsilon=1e-3)
    m = model(
        [helper.make_node("MatMul", ["x", "W"], ["m"]), node],
        [tensor("x", F, [5, 3])],
        [tensor("y", F, [5, 4])],
        [
            init("W", rand(3, 4)),
            init("scale", rand(4)),
            init("bias", rand(4)),
            init("mean", rand(4)),
            init("var", rand(4, positive=True)),
        ],
    )
    after = check(m, "MatMulBatchNormFusion", True, atol=1e-4)
    assert ops(after) == {"Gemm": 1}


def test_matmul_batchnorm_fusion_refuses_batched_matmul():
    node = helper.make_node("BatchNormalization", ["m", "scale", "bias", "mean", "var"], ["y"], epsilon=1e-3)
    m = model(
        [helper.make_node("MatMul", ["x", "W"], ["m"]), node],
        [tensor("x", F, [2, 4, 3])],
        [tensor("y", F, [2, 4, 4])],
        [
            init("W", rand(3, 4)),
            init("scale", rand(4)),
            init("bias", rand(4)),
            init("mean", rand(4)),
            init("var", rand(4, positive=True)),
        ],
    )
    check(m, "MatMulBatchNormFusion", False)


def moved_batchnorm(move: str, x_shape=(2, 5, 4), columns: int = 3, channels: int = 3, back: bool = True):
    """MatMul -> (Reshape to [-1, channels] | Flatten at an axis | Transpose by a perm) ->
    BatchNormalization, and (back) a Reshape to the MatMul's shape after it, as LeViT writes
    every linear layer.  move: "Reshape", "Flatten 2", "Transpose 0 2 1"."""
    n = helper.make_node
    matmul_shape = [*x_shape[:-1], columns]
    nodes = [n("MatMul", ["x", "W"], ["m"])]
    inits = [init("W", rand(x_shape[-1], columns))]
    op, *numbers = move.split()
    if op == "Reshape":
        nodes.append(n("Reshape", ["m", "to2"], ["t"]))
        inits.append(init("to2", np.array([-1, channels], np.int64)))
        moved_shape = [int(np.prod(matmul_shape)) // channels, channels]
    elif op == "Flatten":
        axis = int(numbers[0])
        nodes.append(n("Flatten", ["m"], ["t"], axis=axis))
        moved_shape = [int(np.prod(matmul_shape[:axis])), int(np.prod(matmul_shape[axis:]))]
    else:
        perm = [int(a) for a in numbers]
        nodes.append(n("Transpose", ["m"], ["t"], perm=perm))
        moved_shape = [matmul_shape[a] for a in perm]
    nodes.append(n("BatchNormalization", ["t", "scale", "bias", "mean", "var"], ["b"], epsilon=1e-3))
    inits += [init("scale", rand(channels)), init("bias", rand(channels)), init("mean", rand(channels))]
    inits.append(init("var", rand(channels, positive=True)))
    if back:
        nodes.append(n("Reshape", ["b", "back"], ["y"]))
        inits.append(init("back", np.array(matmul_shape, np.int64)))
    else:
        nodes.append(n("Identity", ["b"], ["y"]))
    y_shape = matmul_shape if back else moved_shape
    return model(nodes, [tensor("x", F, list(x_shape))], [tensor("y", F, y_shape)], inits)


@pytest.mark.parametrize(
    "move, rule", [("Reshape", "MatMulReshapeBatchNormFusion"), ("Flatten 2", "MatMulFlattenBatchNormFusion")]
)
def test_matmul_batchnorm_through_flattened_tokens_folds_and_the_reshapes_cancel(move, rule):
    before = moved_batchnorm(move)
    check(before, rule, True, atol=1e-4)
    after = optimize_basic(before).model
    assert ops(after) == {"MatMul": 1, "Add": 1}  # the flattening and the Reshape back cancel


def test_matmul_batchnorm_over_a_transposed_sequence_folds():
    after = check(moved_batchnorm("Transpose 0 2 1", back=False), "MatMulTransposeBatchNormFusion", True, atol=1e-4)
    assert ops(after) == {"MatMul": 1, "Add": 1, "Transpose": 1, "Identity": 1}


@pytest.mark.parametrize(
    "move, x_shape, columns, channels",
    [
        ("Reshape", (2, 6, 4), 3, 6),  # [12, 3] read as [6, 6]: BN's channels are not the columns
        ("Flatten 1", (2, 3, 4), 3, 9),  # [2, 3 * 3]
        ("Transpose 2 1 0", (2, 5, 4), 3, 5),  # the sequence on axis 1
        ("Transpose 1 0 2", (2, 5, 4), 3, 2),  # the batch on axis 1
    ],
)
def test_matmul_batchnorm_elsewhere_than_the_columns_stays(move, x_shape, columns, channels):
    before = moved_batchnorm(move, x_shape, columns, channels, back=False)
    after = optimize_basic(before).model
    assert ops(after)["BatchNormalization"] == 1
    assert_same_outputs(before, after, atol=1e-4)


@pytest.mark.parametrize("lo, hi", [(-1.0, 6.0), (0.5, 6.0), (None, 6.0), (-2.0, None)])
def test_relu_clip_fusion(lo, hi):
    names = ["r", "" if lo is None else "lo"] + ([] if hi is None else ["hi"])
    inits = ([] if lo is None else [init("lo", np.float32(lo))]) + ([] if hi is None else [init("hi", np.float32(hi))])
    m = unary([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Clip", names, ["y"])], inits=inits)
    after = check(m, "ReluClipFusion", True)
    assert ops(after) == {"Clip": 1}


def test_relu_clip_fusion_with_attribute_bounds():
    m = unary(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Clip", ["r"], ["y"], min=-1.0, max=6.0)], opset=10
    )
    check(m, "ReluClipAttributeFusion", True)


def test_relu_clip_fusion_refuses_non_constant_bounds():
    m = model(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Clip", ["r", "lo"], ["y"])],
        [tensor("x", F, [2, 3]), tensor("lo", F, [])],
        [tensor("y", F, [2, 3])],
    )
    check(m, "ReluClipFusion", False)


def test_div_mul_fusion():
    m = model(
        [helper.make_node("Div", ["one", "x"], ["d"]), helper.make_node("Mul", ["a", "d"], ["y"])],
        [tensor("x", F, [2, 3]), tensor("a", F, [2, 3])],
        [tensor("y", F, [2, 3])],
        [init("one", np.float32(1.0))],
    )
    after = check(m, "DivMulFusion", True)
    assert ops(after) == {"Div": 1}


def test_div_mul_fusion_refuses_integers():
    i64 = TensorProto.INT64
    m = model(
        [helper.make_node("Div", ["one", "x"], ["d"]), helper.make_node("Mul", ["d", "a"], ["y"])],
        [tensor("x", i64, [2, 3]), tensor("a", i64, [2, 3])],
        [tensor("y", i64, [2, 3])],
        [init("one", np.int64(1))],
    )
    assert applied(optimize_basic(m), "DivMulFusion") == 0


def gemm_inputs():
    return [tensor("a", F, [3, 4]), tensor("b", F, [4, 5])]


def test_gemm_transpose_a_fusion():
    m = model(
        [
            helper.make_node("Transpose", ["a"], ["at"], perm=[1, 0]),
            helper.make_node("Gemm", ["at", "b", "c"], ["y"], alpha=0.5),
        ],
        [tensor("a", F, [4, 3]), tensor("b", F, [4, 5])],
        [tensor("y", F, [3, 5])],
        [init("c", rand(5))],
    )
    after = check(m, "GemmTransposeAFusion", True)
    assert ops(after) == {"Gemm": 1}
    assert {a.name: helper.get_attribute_value(a) for a in after.graph.node[0].attribute} == {"alpha": 0.5, "transA": 1}


def test_gemm_transpose_b_fusion_flips_an_existing_flag():
    m = model(
        [helper.make_node("Transpose", ["b"], ["bt"]), helper.make_node("Gemm", ["a", "bt"], ["y"], transB=1)],
        [tensor("a", F, [3, 4]), tensor("b", F, [4, 5])],
        [tensor("y", F, [3, 5])],
    )
    after = check(m, "GemmTransposeBFusion", True)
    assert ops(after) == {"Gemm": 1}


def test_gemm_transpose_output_fusion():
    m = model(
        [
            helper.make_node("Gemm", ["a", "b"], ["g"], alpha=2.0),
            helper.make_node("Transpose", ["g"], ["y"], perm=[1, 0]),
        ],
        gemm_inputs(),
        [tensor("y", F, [5, 3])],
    )
    after = check(m, "GemmTransposeOutputFusion", True)
    assert ops(after) == {"Gemm": 1}


def test_gemm_transpose_output_fusion_refuses_when_gemm_has_c():
    m = model(
        [helper.make_node("Gemm", ["a", "b", "c"], ["g"]), helper.make_node("Transpose", ["g"], ["y"], perm=[1, 0])],
        gemm_inputs(),
        [tensor("y", F, [5, 3])],
        [init("c", rand(5))],
    )
    check(m, "GemmTransposeOutputFusion", False)


def test_not_where_fusion():
    b = TensorProto.BOOL
    m = model(
        [helper.make_node("Not", ["cond"], ["n"]), helper.make_node("Where", ["n", "a", "x"], ["y"])],
        [tensor("cond", b, [2, 3]), tensor("a", F, [2, 3]), tensor("x", F, [2, 3])],
        [tensor("y", F, [2, 3])],
    )
    after = check(m, "NotWhereFusion", True)
    assert ops(after) == {"Where": 1}


def test_not_where_fusion_refused_while_the_not_has_other_consumers():
    b = TensorProto.BOOL
    m = model(
        [
            helper.make_node("Not", ["cond"], ["n"]),
            helper.make_node("Where", ["n", "a", "x"], ["y"]),
            helper.make_node("Cast", ["n"], ["z"], to=F),
        ],
        [tensor("cond", b, [2, 3]), tensor("a", F, [2, 3]), tensor("x", F, [2, 3])],
        [tensor("y", F, [2, 3]), tensor("z", F, [2, 3])],
    )
    check(m, "NotWhereFusion", False)


# ------------------------------------------------------------------------ transposes


def test_transpose_transpose_composes_and_identity_disappears():
    nodes = [
        helper.make_node("Transpose", ["x"], ["a"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["a"], ["t"], perm=[0, 1, 3, 2]),
    ]
    after = check(
        unary(nodes + [helper.make_node("Neg", ["t"], ["y"])], x_shape=(2, 3, 4, 5), y_shape=(2, 4, 5, 3)),
        "TransposeTransposeFusion",
        True,
    )
    (transpose,) = [n for n in after.graph.node if n.op_type == "Transpose"]
    assert list(transpose.attribute[0].ints) == [0, 2, 3, 1]
    back = [
        helper.make_node("Transpose", ["x"], ["a"], perm=[0, 2, 3, 1]),
        helper.make_node("Transpose", ["a"], ["t"], perm=[0, 3, 1, 2]),
        helper.make_node("Neg", ["t"], ["y"]),
    ]
    assert ops(optimize_basic(unary(back, x_shape=(2, 3, 4, 5))).model) == {"Neg": 1}


def transpose_unsqueeze_transpose(p1, axes, p2, y_shape=(2, 1, 3, 4), shared: str = ""):
    """x -> Transpose(p1) -> Unsqueeze(axes) -> Transpose(p2) -> Neg -> y; ``shared`` names
    an intermediate (t or u) a second output reads too."""
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=p1),
        helper.make_node("Unsqueeze", ["t", "axes"], ["u"]),
        helper.make_node("Transpose", ["u"], ["v"], perm=p2),
        helper.make_node("Neg", ["v"], ["y"]),
    ]
    outputs = [tensor("y", F, list(y_shape))]
    if shared:
        nodes.append(helper.make_node("Abs", [shared], ["z"]))
        outputs.append(tensor("z", F, [2, 4, 3] if shared == "t" else [2, 1, 4, 3]))
    axes_init = init("axes", np.array(axes, np.int64))
    return model(nodes, [tensor("x", F, [2, 3, 4])], outputs, [axes_init])


def test_transpose_through_an_unsqueeze_merges_with_the_next_and_cancels():
    """MobileNetV4's keys: swapped, a head axis added, swapped back -> no Transpose left."""
    after = check(
        transpose_unsqueeze_transpose([0, 2, 1], [1], [0, 1, 3, 2]), "TransposeUnsqueezeTransposeFusion", True
    )
    assert ops(after) == {"Unsqueeze": 1, "Transpose": 1, "Neg": 1}  # the identity goes in the pipeline
    assert ops(optimize_basic(transpose_unsqueeze_transpose([0, 2, 1], [1], [0, 1, 3, 2])).model) == {
        "Unsqueeze": 1,
        "Neg": 1,
    }
    # a perm that does not cancel, negative axes: one Transpose of the merged perm
    before = transpose_unsqueeze_transpose([2, 0, 1], [-1, 0], [4, 3, 2, 1, 0], y_shape=(1, 3, 2, 4, 1))
    after = optimize_basic(before).model
    assert ops(after) == {"Unsqueeze": 1, "Transpose": 1, "Neg": 1}
    assert_same_outputs(before, after)


@pytest.mark.parametrize("shared", ["t", "u"])
def test_a_transpose_or_unsqueeze_read_elsewhere_stays(shared):
    check(
        transpose_unsqueeze_transpose([0, 2, 1], [1], [0, 1, 3, 2], shared=shared),
        "TransposeUnsqueezeTransposeFusion",
        False,
    )


def reshape_transpose_reshape(s1, s2, y_shape):
    nodes = [
        helper.make_node("Reshape", ["x", "s1"], ["r"]),
        helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
        helper.make_node("Reshape", ["t", "s2"], ["u"]),
        helper.make_node("Neg", ["u"], ["y"]),
    ]
    return unary(
        nodes,
        x_shape=(2, 3, 4, 5),
        y_shape=y_shape,
        inits=[init("s1", np.array(s1, np.int64)), init("s2", np.array(s2, np.int64))],
    )


def test_reshape_transpose_reshape_that_swaps_the_last_axes_is_one_transpose():
    after = check(
        reshape_transpose_reshape([-1, 4, 5], [2, 3, 5, 4], (2, 3, 5, 4)), "ReshapeTransposeReshapeFusion", True
    )
    assert ops(after) == {"Transpose": 1, "Neg": 1}
    # regrouping the last axes is not a transpose of them
    check(reshape_transpose_reshape([6, 2, 10], [2, 3, 10, 2], (2, 3, 10, 2)), "ReshapeTransposeReshapeFusion", False)


def test_reshape_transpose_reshape_that_regroups_the_leading_axes_is_a_view_and_a_transpose():
    # dynamo's k^T of keys repeated for grouped-query heads: [2, 3, 4, 5] merged to [6, 4, 5],
    # swapped, split to [3, 2, 5, 4] -> viewed [3, 2, 4, 5], then the last two swapped
    after = check(
        reshape_transpose_reshape([6, 4, 5], [3, 2, 5, 4], (3, 2, 5, 4)), "ReshapeTransposeRegroupedFusion", True
    )
    assert ops(after) == {"Reshape": 1, "Transpose": 1, "Neg": 1}
    check(reshape_transpose_reshape([6, 4, 5], [6, 5, 4], (6, 5, 4)), "ReshapeTransposeRegroupedFusion", True)
    # regrouping the last axes too is another order of the elements
    check(reshape_transpose_reshape([6, 4, 5], [3, 2, 10, 2], (3, 2, 10, 2)), "ReshapeTransposeRegroupedFusion", False)


def dynamic_key_transpose(swap: tuple[int, int] = (5, 4)):
    """k^T as the dynamo exporter writes it with dynamic axes: Reshape(k, [-1, 4, 5]),
    Transpose(0, 2, 1), Reshape to k's own leading dims (computed from its Shape) + swap."""
    n = helper.make_node
    nodes = [
        n("Reshape", ["x", "s1"], ["r"]),
        n("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
        n("Shape", ["x"], ["sx"]),
        n("Slice", ["sx", "zero", "minus2"], ["lead"]),
        n("Concat", ["lead", "last"], ["s2"], axis=0),
        n("Reshape", ["t", "s2"], ["u"]),
        n("Neg", ["u"], ["y"]),
    ]
    inits = [
        init("s1", np.array([-1, 4, 5], np.int64)),
        init("zero", np.array([0], np.int64)),
        init("minus2", np.array([-2], np.int64)),
        init("last", np.array(swap, np.int64)),
    ]
    return model(nodes, [tensor("x", F, ["batch", 3, 4, 5])], [tensor("y", F, ["batch", 3, *swap])], inits)


def test_a_key_transpose_written_with_dynamic_axes_is_one_transpose():
    after = check(dynamic_key_transpose(), "ReshapeTransposeReshapeSymbolicFusion", True)
    assert ops(after) == {"Transpose": 1, "Neg": 1}
    # splitting back as [.., 4, 5] is no transpose of the last axes (a regrouping)
    check(dynamic_key_transpose((4, 5)), "ReshapeTransposeReshapeSymbolicFusion", False)


@pytest.mark.parametrize(("a1", "a2", "axes"), [(0, 1, [0, 1]), (0, 0, [0, 1]), (-1, 1, [1, 3]), (1, -1, [1, 3])])
def test_two_single_axis_unsqueezes_are_one(a1, a2, axes):
    nodes = [
        helper.make_node("Unsqueeze", ["x", "a1"], ["u"]),
        helper.make_node("Unsqueeze", ["u", "a2"], ["v"]),
        helper.make_node("Neg", ["v"], ["y"]),
    ]
    inits = [init("a1", np.array([a1], np.int64)), init("a2", np.array([a2], np.int64))]
    y_shape = np.expand_dims(np.zeros((2, 3)), axes).shape
    after = check(unary(nodes, x_shape=(2, 3), y_shape=y_shape, inits=inits), "UnsqueezePairFusion", True)
    (unsqueeze,) = [n for n in after.graph.node if n.op_type == "Unsqueeze"]
    constants = {i.name: onnx.numpy_helper.to_array(i) for i in after.graph.initializer}
    assert list(constants[unsqueeze.input[1]]) == axes


@pytest.mark.parametrize(("max_axis", "expect"), [(-1, True), (1, False)])
def test_softmax_of_x_minus_its_max_is_softmax_of_x(max_axis, expect):
    nodes = [
        helper.make_node("ReduceMax", ["x", "axes"], ["m"], keepdims=1),
        helper.make_node("Sub", ["x", "m"], ["d"]),
        helper.make_node("Softmax", ["d"], ["y"], axis=-1),
    ]
    before = unary(nodes, x_shape=(2, 3, 4), inits=[init("axes", np.array([max_axis], np.int64))], opset=18)
    after = check(before, "SoftmaxMaxShiftElimination", expect)
    assert (ops(after) == {"Softmax": 1}) == expect


# ----------------------------------------------------------- shapes with dynamic axes


def dynamic_reshape_graph(index=1):
    """Reshape(x, [-1, shape(x)[index]]) for x: [batch, 3, 4] as exporters write it."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i"], ["d"], axis=0),
        helper.make_node("Unsqueeze", ["d", "zero"], ["u"]),
        helper.make_node("Concat", ["minus", "u"], ["t"], axis=0),
        helper.make_node("Reshape", ["x", "t"], ["r"]),
        helper.make_node("Neg", ["r"], ["y"]),
    ]
    return model(
        nodes,
        [tensor("x", F, ["batch", 3, 4])],
        [tensor("y", F, ["rows", "cols"])],
        [
            init("i", np.array(index, np.int64)),
            init("zero", np.array([0], np.int64)),
            init("minus", np.array([-1], np.int64)),
        ],
    )


def test_a_known_dim_of_a_dynamic_shape_is_folded():
    before = dynamic_reshape_graph(index=2)
    after = check(before, "ShapeGatherFolding", True)
    assert "Shape" not in ops(optimize_basic(before).model)
    reshape = next(n for n in optimize_basic(before).model.graph.node if n.op_type == "Reshape")
    shape = next(i for i in optimize_basic(before).model.graph.initializer if i.name == reshape.input[1])
    assert list(onnx.numpy_helper.to_array(shape)) == [-1, 4]
    assert after is not None


def test_a_dynamic_dim_is_not_folded():
    check(dynamic_reshape_graph(index=0), "ShapeGatherFolding", False)


def test_dims_follows_shape_arithmetic():
    import rewriter
    from rewriter.expr.shape_values import shape_values
    from rewriter.graph.model import ModelState

    view = ModelState(dynamic_reshape_graph(index=0)).view
    assert shape_values(view, "t") == [-1, "batch"]
    assert shape_values(view, "s") == ["batch", 3, 4]
    assert rewriter  # the public package imports the function table the rules use


def test_dims_behind_computed_reshapes_keep_their_names():
    """Reshape(ids, [-1, seq]) then Range(0, seq): onnx's inference calls their dims unk__N;
    read through the shape arithmetic they are batch and seq again."""
    from rewriter.graph.type_reading import shape_of
    from rewriter.graph.types import infer_model_types

    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "zero"], ["u"]),
        helper.make_node("Concat", ["minus", "u"], ["t"], axis=0),
        helper.make_node("Reshape", ["x", "t"], ["r"]),
        helper.make_node("Range", ["start", "n", "step"], ["p"]),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    m = model(
        nodes,
        [tensor("x", F, ["batch", "seq"])],
        [tensor("y", F, [None, None]), tensor("p", TensorProto.INT64, [None])],
        [
            init("one", np.array(1, np.int64)),
            init("zero", np.array([0], np.int64)),
            init("minus", np.array([-1], np.int64)),
            init("start", np.array(0, np.int64)),
            init("step", np.array(1, np.int64)),
        ],
    )
    types = infer_model_types(m)
    assert shape_of(types["r"]) == ["batch", "seq"] and shape_of(types["p"]) == ["seq"]
    assert shape_of(types["y"]) == ["batch", "seq"]  # and inference carried them on


def test_a_computed_reshape_target_of_own_dims_becomes_constant():
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
        helper.make_node("Unsqueeze", ["b", "axes"], ["u"]),
        helper.make_node("Concat", ["u", "minus"], ["t"], axis=0),
        helper.make_node("Reshape", ["x", "t"], ["y"]),
    ]
    before = model(
        nodes,
        [tensor("x", F, ["batch", 3, 4])],
        [tensor("y", F, ["batch", 12])],
        [
            init("zero", np.array(0, np.int64)),
            init("axes", np.array([0], np.int64)),
            init("minus", np.array([-1], np.int64)),
        ],
    )
    after = check(before, "ReshapeComputedTargetFolding", True)
    assert ops(optimize_basic(before).model) == {"Reshape": 1}
    target = next(i for i in optimize_basic(before).model.graph.initializer)
    assert list(onnx.numpy_helper.to_array(target)) == [0, -1]
    assert after is not None


def split_heads_view(middle: list[int], seq_last: bool = True):
    """SqueezeBERT's view of a channels-first [batch, 64, seq] to [batch, 4, 16, seq], its
    target computed from x's shape: Concat(batch, middle, seq) (without seq_last, the
    numbers end it)."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
        helper.make_node("Gather", ["s", "two"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["b", "axes"], ["ub"]),
        helper.make_node("Unsqueeze", ["n", "axes"], ["un"]),
        helper.make_node("Concat", ["ub", "middle", "un"] if seq_last else ["ub", "middle"], ["t"], axis=0),
        helper.make_node("Reshape", ["x", "t"], ["y"]),
    ]
    inits = [
        init("zero", np.array(0, np.int64)),
        init("two", np.array(2, np.int64)),
        init("axes", np.array([0], np.int64)),
        init("middle", np.array(middle, np.int64)),
    ]
    out = [tensor("y", F, [f"y{i}" for i in range(len(middle) + 1 + seq_last)])]
    return model(nodes, [tensor("x", F, ["batch", 64, "seq"])], out, inits)


def test_a_computed_view_that_splits_a_dim_folds_to_copies_of_an_unsqueezed_input():
    before = split_heads_view([4, 16])
    after = check(before, "ReshapeComputedTargetUnsqueezedFolding", True)
    assert ops(after) == {"Unsqueeze": 1, "Reshape": 1}
    target = onnx.numpy_helper.to_array(next(i for i in after.graph.initializer if i.dims == [4]))
    assert list(target) == [0, 4, 16, 0]  # copies, no -1: onnxruntime's [0, 4, 16, -1] fails on
    feeds = {"x": np.zeros((0, 64, 5), np.float32)}  # an empty batch where this runs
    assert [y.shape for y in run(after, feeds)] == [y.shape for y in run(before, feeds)] == [(0, 4, 16, 5)]
    # (no tokens: the computed target [2, 4, 16, 0] copies a fourth dim x lacks, and the
    # original fails; the folded view gives the empty result)
    assert [y.shape for y in run(after, {"x": np.zeros((2, 64, 0), np.float32)})] == [(2, 4, 16, 0)]


def test_a_copy_from_the_last_place_on_is_not_moved_by_the_unsqueeze():
    """[batch, 2, 0, 32]: the 0 copies x's last dim (seq) in place 2; after the Unsqueeze
    place 2 holds a 1.  The rule must leave it."""
    check(split_heads_view([2, 0, 32], seq_last=False), "ReshapeComputedTargetUnsqueezedFolding", False)


def reshape_of(target, shape, allowzero=None, opset=17):
    """Reshape(x, target) then Relu, for x of a (partly symbolic) shape."""
    attrs = {} if allowzero is None else {"allowzero": allowzero}
    nodes = [helper.make_node("Reshape", ["x", "t"], ["r"], **attrs), helper.make_node("Relu", ["r"], ["y"])]
    return model(
        nodes,
        [tensor("x", F, shape)],
        [tensor("y", F, [f"y{i}" for i in range(len(target))])],
        [init("t", np.array(target, np.int64))],
        opset=opset,
    )


@pytest.mark.parametrize(
    "target, shape",
    [([0, -1, 0, 4], ["b", 2, "s", 4]), ([0, 2, -1], ["b", 2, "s"]), ([2, 3], [2, 3]), ([-1], ["n"])],
)
def test_a_reshape_that_copies_every_dim_goes(target, shape):
    check(reshape_of(target, shape), "ReshapeCopiesElimination", True)
    assert ops(optimize_basic(reshape_of(target, shape)).model) == {"Relu": 1}


@pytest.mark.parametrize(
    "target, shape, allowzero",
    [
        ([0, 2, -1], ["b", "h", 4], 0),  # 2 where the dim is symbolic: may differ
        ([0, -1], ["b", 2, 3], 0),  # a real merge
        ([3, 0, -1], ["b", 2, 6], 0),  # the 3 at index 0 stands where b is
    ],
)
def test_a_reshape_that_may_change_the_shape_stays(target, shape, allowzero):
    check(reshape_of(target, shape, allowzero), "ReshapeCopiesElimination", False)


def test_keeps_shape_reads_symbolic_and_unknown_dims():
    def keeps(target, shape, allowzero=0):
        return FUNCTIONS["keeps_shape"].impl(target, shape, allowzero)

    assert keeps([0, -1, "S", 4], ["B", 2, "S", 4])
    assert keeps([0, 0], [None, None]) and not keeps([0, 3], [None, 3], 1)
    assert not keeps([-1, -1], [2, 3]) and not keeps(["S"], ["T"]) and not keeps([3], [None])
    assert not keeps([0, -1], ["B", 2, 3])


def sliced(bounds, width=8, opset=17):
    """Slices of x along its last axis, each (start, end), each a graph output."""
    nodes, inits, outputs = [], [], []
    for k, (start, end) in enumerate(bounds):
        inits += [
            init(f"s{k}", np.array([start], np.int64)),
            init(f"e{k}", np.array([end], np.int64)),
            init(f"a{k}", np.array([-1], np.int64)),
        ]
        nodes.append(helper.make_node("Slice", ["x", f"s{k}", f"e{k}", f"a{k}"], [f"y{k}"]))
        outputs.append(tensor(f"y{k}", F, [2, 3, len(range(width)[start:end])]))
    return model(nodes, [tensor("x", F, [2, 3, width])], outputs, inits, opset=opset)


def test_slices_that_cut_an_axis_into_consecutive_parts_become_one_split():
    after = check(sliced([(0, 3), (3, 2**63 - 1)]), "SliceSplitFusion", True)
    (split,) = after.graph.node
    assert split.op_type == "Split" and list(split.output) == ["y0", "y1"]
    after = check(sliced([(0, 2), (-6, -3), (5, 8)]), "SliceSplitThreeFusion", True)
    assert ops(after) == {"Split": 1}


@pytest.mark.parametrize(
    "bounds",
    [[(0, 3), (4, 8)], [(0, 4), (2, 8)], [(1, 4), (4, 8)], [(0, 4), (4, 7)], [(0, 8), (8, 9)]],
    ids=["gap", "overlap", "not-from-start", "short-of-end", "empty-part"],
)
def test_slices_that_do_not_partition_the_axis_stay(bounds):
    check(sliced(bounds), "SliceSplitFusion", False)


# ------------------------------------------------------------------ padding and linear dims
def pad_conv(pads, value=0.0, mode="constant", conv_attrs=None, opset=17):
    """Pad(x) then a 3x3 Conv reading it (pads and value as initializers)."""
    nodes = [
        helper.make_node("Pad", ["x", "pads", "v"], ["p"], mode=mode),
        helper.make_node("Conv", ["p", "w"], ["y"], kernel_shape=[3, 3], **(conv_attrs or {})),
    ]
    inits = [
        init("pads", np.array(pads, np.int64)),
        init("v", np.array(value, np.float32)),
        init("w", rand(4, 3, 3, 3)),
    ]
    return model(nodes, [tensor("x", F, [1, 3, 9, 9])], [tensor("y", F, [None, 4, None, None])], inits, opset=opset)


def test_zero_padding_of_spatial_axes_folds_into_the_conv():
    after = check(pad_conv([0, 0, 1, 0, 0, 0, 0, 2], conv_attrs={"pads": [1, 1, 1, 1]}), "PadConvFusion", True)
    (conv,) = after.graph.node
    assert helper.get_attribute_value(next(a for a in conv.attribute if a.name == "pads")) == [2, 1, 1, 3]


@pytest.mark.parametrize(
    "pads, value, mode, conv_attrs",
    [
        ([1, 0, 1, 1, 0, 0, 1, 1], 0.0, "constant", None),  # pads the batch
        ([0, 0, 1, 1, 0, 0, 1, 1], 0.5, "constant", None),  # not zeros
        ([0, 0, 1, 1, 0, 0, 1, 1], 0.0, "reflect", None),
        ([0, 0, -1, 0, 0, 0, 0, 0], 0.0, "constant", None),  # crops
        ([0, 0, 1, 1, 0, 0, 1, 1], 0.0, "constant", {"auto_pad": "SAME_UPPER"}),
    ],
)
def test_padding_the_conv_cannot_do_stays(pads, value, mode, conv_attrs):
    check(pad_conv(pads, value, mode, conv_attrs), "PadConvFusion", False)


def test_a_pad_of_nothing_is_eliminated():
    check(pad_conv([0] * 8, value=1.0, mode="edge"), "PadElimination", True)


def linear_dims_model():
    """The dynamo exporter's length of the new positions of a cache: max(0, (past + 1) -
    min(past, past + 1)) from the cache's Shape, reshaped to one element."""
    nodes = [
        helper.make_node("Shape", ["past"], ["s"], start=2, end=3),
        helper.make_node("Squeeze", ["s"], ["p"]),
        helper.make_node("Add", ["one", "p"], ["total"]),
        helper.make_node("Min", ["p", "total"], ["low"]),
        helper.make_node("Mul", ["minus", "low"], ["neg"]),
        helper.make_node("Add", ["total", "neg"], ["diff"]),
        helper.make_node("Max", ["zero", "diff"], ["len"]),
        helper.make_node("Reshape", ["len", "flat"], ["t"]),
        helper.make_node("Sub", ["total", "p"], ["again"]),
        helper.make_node("Mul", ["p", "p"], ["square"]),
        helper.make_node("Div", ["p", "p"], ["unknown"]),
        helper.make_node("Slice", ["m", "s", "end", "axis"], ["y"]),
    ]
    inits = [
        init("one", np.array(1, np.int64)),
        init("minus", np.array(-1, np.int64)),
        init("zero", np.array(0, np.int64)),
        init("flat", np.array([-1], np.int64)),
        init("end", np.array([2**62], np.int64)),
        init("axis", np.array([1], np.int64)),
    ]
    return model(
        nodes,
        [tensor("past", F, ["batch", 4, "past", 8]), tensor("m", F, ["batch", "past + 1"])],
        [tensor("t", TensorProto.INT64, [1]), tensor("y", F, [None, None])],
        inits,
    )


def test_dims_follow_linear_arithmetic_on_sizes():
    from rewriter.expr.shape_values import shape_values
    from rewriter.expr.values import EvalFailure
    from rewriter.graph.model import ModelState

    view = ModelState(linear_dims_model()).view
    assert shape_values(view, "total") == ["past + 1"]
    assert shape_values(view, "low") == ["past"]  # min(past, past + 1): they differ by 1
    assert shape_values(view, "neg") == ["-1*past"]
    assert shape_values(view, "t") == [1]  # the names cancel
    assert shape_values(view, "again") == [1]
    assert shape_values(view, "square") == ["past*past"]  # a product of two dims is a name too
    with pytest.raises(EvalFailure):
        shape_values(view, "unknown")  # Div by a size, not a number


def test_a_slice_from_a_size_to_the_end_has_the_length_left():
    from rewriter.graph.type_reading import shape_of
    from rewriter.graph.types import infer_model_types

    types = infer_model_types(linear_dims_model())
    assert shape_of(types["y"]) == ["batch", 1]  # (past + 1) - past


def test_a_slice_of_computed_bounds_keeps_the_dims_of_the_axes_it_does_not_cut():
    """TorchScript slices a causal-mask buffer [1, 1, 128, 128] by the key and query lengths
    (``bias[:, :, k - q:k, :k]``): onnx's inference loses every dim; the two axes no Slice
    cuts keep theirs, and broadcasting against the padding mask names the rest."""
    from rewriter.graph.type_reading import shape_of
    from rewriter.graph.types import infer_model_types

    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "zero"], ["end"]),
        helper.make_node("Sub", ["n", "n"], ["d"]),
        helper.make_node("Unsqueeze", ["d", "zero"], ["start"]),
        helper.make_node("Slice", ["buffer", "start", "end", "two"], ["rows"]),
        helper.make_node("Slice", ["rows", "zeros", "end", "three"], ["causal"]),
        helper.make_node("Add", ["causal", "mask"], ["y"]),
    ]
    m = model(
        nodes,
        [tensor("x", F, ["batch", "seq"]), tensor("mask", F, ["batch", 1, "seq", "seq"])],
        [tensor("y", F, None)],
        [
            init("one", np.array(1, np.int64)),
            init("zero", np.array([0], np.int64)),
            init("zeros", np.array([0], np.int64)),
            init("two", np.array([2], np.int64)),
            init("three", np.array([3], np.int64)),
            init("buffer", np.zeros((1, 1, 128, 128), np.float32)),
        ],
    )
    types = infer_model_types(m)
    assert shape_of(types["causal"])[:2] == [1, 1]
    assert shape_of(types["y"]) == ["batch", 1, "seq", "seq"]


def test_a_tile_by_one_keeps_the_named_dim():
    from rewriter.graph.type_reading import shape_of
    from rewriter.graph.types import infer_model_types

    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["n"], axis=0),
        helper.make_node("Range", ["start", "n", "one"], ["r"]),
        helper.make_node("Unsqueeze", ["r", "axes"], ["u"]),
        helper.make_node("Tile", ["u", "reps"], ["y"]),
    ]
    m = model(
        nodes,
        [tensor("x", F, ["batch", "seq"])],
        [tensor("y", TensorProto.INT64, [None, None])],
        [
            init("one", np.array(1, np.int64)),
            init("start", np.array(0, np.int64)),
            init("axes", np.array([1], np.int64)),
            init("reps", np.array([1, 8], np.int64)),
        ],
    )
    assert shape_of(infer_model_types(m)["y"]) == ["seq", 8]


def test_a_sum_over_a_fresh_dim_is_as_unknown_as_the_dim():
    from rewriter.graph.type_reading import is_known_dim

    assert is_known_dim("past + 1") and is_known_dim("a + -1*b") and is_known_dim(3)
    assert not is_known_dim("2*unk__11") and not is_known_dim("batch + unk__2") and not is_known_dim("?x[0] + 1")


def sliced_keys(second_rows=(8, 16), computed_buffer=False):
    """DeepSeek's keys as dynamo writes `k[..., :8] = nope; k[..., 8:] = rope`: a zero buffer
    [16, N, T, 1] filled by two ScatterNDs of Transposed updates, transposed back to k^T;
    with a cache, the buffer a ConstantOfShape of a shape computed from the keys."""
    n = helper.make_node
    nodes = []
    if computed_buffer:
        nodes += [
            n("Shape", ["nope"], ["ns"]),
            n("Slice", ["ns", "s0", "s3", "a0"], ["lead"]),
            n("Concat", ["lead", "width"], ["bshape"], axis=0),
            n("ConstantOfShape", ["bshape"], ["zeros"]),
            n("Transpose", ["zeros"], ["buffer"], perm=[3, 1, 2, 0]),
        ]
    nodes += [
        n("Transpose", ["nope"], ["nt"], perm=[3, 1, 2, 0]),
        n("ScatterND", ["buffer", "first", "nt"], ["s1"]),
        n("Transpose", ["rope"], ["rt"], perm=[3, 1, 2, 0]),
        n("ScatterND", ["s1", "second", "rt"], ["s2"]),
        n("Transpose", ["s2"], ["kt"], perm=[3, 1, 0, 2]),
    ]
    inits = [
        init("first", np.arange(8, dtype=np.int64).reshape(8, 1)),
        init("second", np.arange(*second_rows, dtype=np.int64).reshape(-1, 1)),
    ]
    if computed_buffer:
        for name, value in (("s0", [0]), ("s3", [3]), ("a0", [0]), ("width", [16])):
            inits.append(init(name, np.array(value, np.int64)))
    else:
        inits.append(init("buffer", np.zeros((16, 2, 5, 1), np.float32)))
    t = "past" if computed_buffer else 5
    inputs = [tensor("nope", F, [1, 2, t, 8]), tensor("rope", F, [1, 2, t, second_rows[1] - second_rows[0]])]
    return model(nodes, inputs, [tensor("kt", F, [1, 2, 16, t])], inits)


def test_keys_filled_by_two_scatters_are_a_concat_of_the_two_parts():
    before = sliced_keys()
    after = optimize_basic(before).model
    assert ops(after) == {"Concat": 1, "Transpose": 1}  # one Transpose: [0, 1, 3, 2] of the Concat
    assert_same_outputs(before, after)
    # rows 7..14 written second: row 7 twice and row 15 never (the buffer's zero stays)
    overlapping = sliced_keys(second_rows=(7, 15))
    assert ops(optimize_basic(overlapping).model)["ScatterND"] == 2


def test_keys_scattered_into_a_buffer_of_a_computed_shape_are_a_concat_too():
    """minicpm3/DeepSeek/GLM-4-lite with a cache: what the buffer held does not matter."""
    before = sliced_keys(computed_buffer=True)
    after = optimize_basic(before).model
    assert ops(after) == {"Concat": 1, "Transpose": 1}
    assert_same_outputs(before, after)


def test_a_dim_read_through_a_transpose_and_a_copying_reshape_is_read_from_their_input():
    """MPT reads the keys' length through their head split and transpose: Gather(Shape(...))
    goes through both to the projection's own shape, which leaves the transposed keys to the
    attention alone."""
    nodes = [
        helper.make_node("Reshape", ["x", "heads"], ["r"]),
        helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3]),
        helper.make_node("Shape", ["t"], ["s"]),
        helper.make_node("Gather", ["s", "two"], ["n"], axis=0),
        helper.make_node("Relu", ["t"], ["y"]),
    ]
    before = model(
        nodes,
        [tensor("x", F, ["batch", "seq", 32])],
        [tensor("y", F, ["batch", 4, "seq", 8]), tensor("n", TensorProto.INT64, [])],
        [init("heads", np.array([0, 0, 4, 8], np.int64)), init("two", np.array(2, np.int64))],
    )
    after = optimize_basic(before).model
    readers = [n.op_type for n in after.graph.node if "t" in n.input]
    assert readers == ["Relu"]
    shape = next(n for n in after.graph.node if n.op_type == "Shape")
    assert list(shape.input) == ["x"]
    x = np.random.default_rng(0).standard_normal((2, 5, 32)).astype(np.float32)
    for a, b in zip(run(before, {"x": x}), run(after, {"x": x})):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(("shape", "applies"), [(["batch", 4, 16], True), (["batch", 4, "seq"], False)])
def test_an_unsqueeze_before_a_view_goes_when_the_view_reads_only_x_s_own_places(shape, applies):
    """[batch, 4, 16] unsqueezed at 2 and viewed to [0, 2, 2, 0]: [batch, 2, 2, 16], which
    is x viewed to [0, 2, 2, 16]; with seq last, the view's last dim is not x's dim 3."""
    nodes = [helper.make_node("Unsqueeze", ["x", "a"], ["u"]), helper.make_node("Reshape", ["u", "c"], ["y"])]
    inits = [init("a", np.array([2], np.int64)), init("c", np.array([0, 2, 2, 0], np.int64))]
    before = model(nodes, [tensor("x", F, shape)], [tensor("y", F, ["b", 2, 2, "d"])], inits)
    after = check(before, "UnsqueezeReshapeFolding", applies)
    if applies:
        assert ops(after) == {"Reshape": 1}


def split_to_sequence(sizes, indices, axis=1):
    """torch.split as the dynamo exporter writes it without optimization: SplitToSequence
    with constant sizes, each piece read by a SequenceAt of a constant index."""
    n = helper.make_node
    nodes = [n("SplitToSequence", ["x", "sizes"], ["seq"], axis=axis)]
    inits = [init("sizes", np.array(sizes, np.int64))]
    for j, index in enumerate(indices):
        inits.append(init(f"i{j}", np.array(index, np.int64)))
        nodes.append(n("SequenceAt", ["seq", f"i{j}"], [f"y{j}"]))
    outputs = [tensor(f"y{j}", shape=[2, "p", 3]) for j in range(len(indices))]
    return model(nodes, [tensor("x", shape=[2, sum(sizes), 3])], outputs, inits)


def test_pieces_of_a_split_to_sequence_become_one_split():
    """Every piece read (one from the end): Slices that tile the axis, then one Split."""
    after = optimize_basic(split_to_sequence([1, 3, 1], [0, 1, -1])).model
    assert ops(after) == {"Split": 1}
    assert_same_outputs(split_to_sequence([1, 3, 1], [0, 1, -1]), after)


def test_a_split_to_sequence_of_one_piece_read_is_a_slice():
    after = check(split_to_sequence([2, 3], [1]), "SequenceAtSplitFolding", True)
    assert ops(after) == {"Slice": 1}


def test_a_split_to_sequence_of_an_axis_of_unknown_length_stays():
    """Sizes that do not add up to the axis make the op fail, where a Slice would not: an
    axis whose length is not known keeps the SplitToSequence."""
    before = split_to_sequence([2, 3], [0])
    before.graph.input[0].CopyFrom(tensor("x", shape=[2, "L", 3]))
    result = optimize_basic(before)
    assert applied(result, "SequenceAtSplitFolding") == 0 and ops(result.model)["SplitToSequence"] == 1


def einsum_attention(first: str, second: str, k_batch="B") -> onnx.ModelProto:
    """CvT's attention: the scores Q.K^T and their product with V as two Einsums over
    heads [B, 2, L, 4] (dynamic batch and length)."""
    n = helper.make_node
    nodes = [
        n("Einsum", ["q", "k"], ["s"], equation=first),
        n("Softmax", ["s"], ["p"], axis=-1),
        n("Einsum", ["p", "v"], ["y"], equation=second),
    ]
    inputs = [
        tensor("q", shape=["B", 2, "L", 4]),
        tensor("k", shape=[k_batch, 2, "L", 4]),
        tensor("v", shape=["B", 2, "L", 4]),
    ]
    return model(nodes, inputs, [tensor("y", shape=["B", 2, "L", 4])])


@pytest.mark.parametrize(
    "first, second, matmuls",
    [
        ("bhlk,bhtk->bhlt", "bhlt,bhtv->bhlv", 2),  # CvT: Q.K^T (K swapped), then P.V
        ("b h l k , b h t k -> b h l t", "bhlt,bhtv->bhlv", 2),  # spaces
        ("bhlk,bhtk->bhtl", "bhlt,bhtv->bhlv", 1),  # the first's output axes swapped: stays
        ("bhlk,bhtk->bhlt", "...lt,...tv->...lv", 1),  # an ellipsis: stays
    ],
)
def test_an_einsum_of_one_batched_matrix_product_is_a_matmul(first, second, matmuls):
    before = einsum_attention(first, second)
    after = optimize_basic(before).model
    assert ops(after)["MatMul"] == matmuls and ops(after)["Einsum"] == 2 - matmuls
    feeds = {name: np.random.default_rng(0).standard_normal((3, 2, 5, 4)).astype(np.float32) for name in "qkv"}
    for want, got in zip(run(before, feeds), run(after, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_an_einsum_that_broadcasts_a_batch_of_one_stays():
    """Einsum broadcasts k's batch of 1 against q's; the batches must be known equal."""
    after = optimize_basic(einsum_attention("bhlk,bhtk->bhlt", "bhlt,bhtv->bhlv", k_batch=1)).model
    assert ops(after)["Einsum"] == 1 and ops(after)["MatMul"] == 1


@pytest.mark.parametrize(
    "equation, expected",
    [
        ("bhlk,bhtk->bhlt", [0, 1]),
        ("ki,jk->ij", [1, 1]),
        ("ij,jk->ik", [0, 0]),
        ("bij,bjk->bki", None),
        ("i,j->ij", None),
        ("bij,bjk,bkl->bil", None),
        ("bii,bij->bij", None),
        ("bij,bjk", None),
    ],
)
def test_einsum_matmul_reads_the_equation(equation, expected):
    assert FUNCTIONS["einsum_matmul"].impl(equation) == expected
