"""The bundled layout pack (level 3): ONNX Runtime's NCHWc rewrites on CPU."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest
from helpers import assert_same_outputs, init, model, ops, tensor
from onnx import TensorProto, helper

import rewriter
from rewriter.onnx_facts.nchwc import nchwc_block_size

F = TensorProto.FLOAT
RNG = np.random.default_rng(5)
pytestmark = pytest.mark.skipif(nchwc_block_size() is None, reason="onnxruntime does not use NCHWc here")


def conv_chain(channels=(3, 16, 16, 16), pool=True):
    """Conv -> Relu -> Conv -> MaxPool -> Conv on a 12x12 image."""
    nodes, inits, x = [], [], "x"
    for i, (cin, cout) in enumerate(zip(channels, channels[1:])):
        inits += [
            init(f"w{i}", RNG.standard_normal((cout, cin, 3, 3)).astype(np.float32) * 0.2),
            init(f"b{i}", RNG.standard_normal(cout).astype(np.float32)),
        ]
        nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1]))
        x = f"c{i}"
        if i == 0:
            nodes.append(helper.make_node("Relu", [x], ["r0"]))
            x = "r0"
        if i == 1 and pool:
            nodes.append(helper.make_node("MaxPool", [x], ["p1"], kernel_shape=[2, 2], strides=[2, 2]))
            x = "p1"
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    size = 6 if pool else 12
    return model(
        nodes, [tensor("x", F, [1, channels[0], 12, 12])], [tensor("y", F, [1, channels[-1], size, size])], inits
    )


def layout(before: onnx.ModelProto) -> onnx.ModelProto:
    """What the layout pack makes, reorders and all (the node budget is tested apart)."""
    after = rewriter.optimize(before, level="layout", providers="CPU", layout_may_grow=True).model
    assert_same_outputs(before, after, atol=1e-4)
    rewriter.check_model(after, full_check=True)
    return after


def nchwc_ops(m: onnx.ModelProto) -> Counter:
    return Counter(n.op_type for n in m.graph.node if n.domain == "com.microsoft.nchwc")


def test_a_chain_of_convolutions_stays_blocked_between_one_pair_of_reorders():
    after = layout(conv_chain())
    ops = nchwc_ops(after)
    assert ops["Conv"] == 3 and ops["MaxPool"] == 1
    # the first Conv reads NCHW (3 < block channels); one reorder out at the end
    assert ops["ReorderOutput"] == 1 and ops["ReorderInput"] == 0
    first = next(n for n in after.graph.node if n.op_type == "Conv")
    assert {a.name: helper.get_attribute_value(a) for a in first.attribute}["activation"] == b"Relu"


def test_weights_are_padded_to_the_block_and_the_padding_is_dropped():
    block = nchwc_block_size()
    after = layout(conv_chain(channels=(3, 4), pool=False))
    weights = {i.name: i for i in after.graph.initializer}
    conv = next(n for n in after.graph.node if n.op_type == "Conv")
    assert list(weights[conv.input[1]].dims) == [block, 3, 3, 3]
    reorder = next(n for n in after.graph.node if n.op_type == "ReorderOutput")
    assert helper.get_attribute_value(reorder.attribute[0]) == 4


def test_unaligned_channels_stay_blocked_with_zero_padded_weights():
    # as ONNX Runtime does: block + 4 channels are padded to two blocks on both weight axes
    block = nchwc_block_size()
    after = layout(conv_chain(channels=(3, block + 4, block + 4), pool=False))
    ops = nchwc_ops(after)
    assert ops["Conv"] == 2 and ops["ReorderInput"] == 0 and ops["ReorderOutput"] == 1
    weights = {i.name: i for i in after.graph.initializer}
    second = [n for n in after.graph.node if n.op_type == "Conv"][1]
    assert list(weights[second.input[1]].dims) == [2 * block, 2 * block, 3, 3]


def test_channels_reorder_input_cannot_pad_are_left_in_nchw():
    # ReorderInput pads only multiples of 4 channels
    block = nchwc_block_size()
    after = layout(conv_chain(channels=(block + 2, block), pool=False))
    assert not nchwc_ops(after) and [n.op_type for n in after.graph.node] == ["FusedConv"]


def conv(x, y, w, cin, cout, group=1):
    inits = [init(w, RNG.standard_normal((cout, cin // group, 3, 3)).astype(np.float32) * 0.2)]
    return helper.make_node("Conv", [x, w], [y], pads=[1, 1, 1, 1], group=group), inits


def blocked_model(nodes_inits, channels, out_channels, size=6):
    nodes = [n for n, _ in nodes_inits]
    inits = [i for _, ii in nodes_inits for i in ii]
    return model(
        nodes, [tensor("x", F, [1, channels, size, size])], [tensor("y", F, [1, out_channels, size, size])], inits
    )


def test_depthwise_convolutions_of_unaligned_channels_run_blocked():
    block = nchwc_block_size()
    c = block + 8
    before = blocked_model(
        [conv("x", "a", "w0", 8, c), conv("a", "b", "w1", c, c, group=c), conv("b", "y", "w2", c, c)], 8, c
    )
    before.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 8
    after = layout(before)
    convs = [n for n in after.graph.node if n.op_type == "Conv"]
    assert [n.domain for n in convs] == ["com.microsoft.nchwc"] * 3
    groups = {a.name: helper.get_attribute_value(a) for a in convs[1].attribute}["group"]
    assert groups == 2 * block  # the padded channels are groups of their own
    assert nchwc_ops(after)["ReorderOutput"] == 1


def test_activations_sums_and_concats_run_on_blocked_tensors():
    block = nchwc_block_size()
    c = 2 * block
    nodes = [
        conv("x", "a", "w0", block, c),
        conv("x", "b", "w1", block, c),
        (helper.make_node("Sigmoid", ["a"], ["s"]), []),
        (helper.make_node("Mul", ["a", "s"], ["m"]), []),  # SiLU as two blocked ops
        (helper.make_node("Add", ["m", "b"], ["t"]), []),
        (helper.make_node("Concat", ["t", "m"], ["k"], axis=1), []),
        conv("k", "y", "w2", 2 * c, c),
    ]
    after = layout(blocked_model(nodes, block, c))
    # SiLU became QuickGelu (extended), the Add the second Conv's Sum input; all stay blocked
    assert [n.op_type for n in after.graph.node if n.domain != "com.microsoft.nchwc"] == ["QuickGelu", "Concat"]
    assert nchwc_ops(after) == {"ReorderInput": 1, "Conv": 3, "ReorderOutput": 1}


@pytest.mark.parametrize("op", ["Mul", "Div"])
def test_a_scale_by_one_constant_runs_on_the_blocked_tensor(op):
    """NF-ResNet: Relu, then a scale by one number, between unaligned blocked Convs."""
    block = nchwc_block_size()
    c = block + 4  # padded channels: the scale must keep them zero
    nodes = [
        conv("x", "a", "w0", block, c),
        (helper.make_node("Relu", ["a"], ["r"]), []),
        (helper.make_node(op, ["r", "s"], ["m"]), [init("s", np.array(0.37, np.float32))]),
        conv("m", "y", "w1", c, c),
    ]
    after = layout(blocked_model(nodes, block, c))
    assert [n.op_type for n in after.graph.node if n.domain != "com.microsoft.nchwc"] == [op]
    assert nchwc_ops(after) == {"ReorderInput": 1, "Conv": 2, "ReorderOutput": 1}


@pytest.mark.parametrize("scale", [np.full((1, 1, 1, 1), np.inf, np.float32), np.arange(4, dtype=np.float32)])
def test_a_scale_that_is_not_one_finite_number_stays_nchw(scale):
    block = nchwc_block_size()
    nodes = [
        conv("x", "a", "w0", block, 4),
        (helper.make_node("Relu", ["a"], ["r"]), []),
        (helper.make_node("Mul", ["r", "s"], ["m"]), [init("s", scale.reshape(-1, 1, 1) if scale.size > 1 else scale)]),
        conv("m", "y", "w1", 4, 4),
    ]
    after = layout(blocked_model(nodes, block, 4))
    (mul,) = [n for n in after.graph.node if n.op_type == "Mul"]
    producer = next(n for n in after.graph.node if mul.input[0] in n.output)
    assert producer.op_type == "ReorderOutput"  # the Mul reads NCHW


@pytest.mark.parametrize("branches", [3, 4])
def test_a_concat_of_several_blocked_branches_stays_blocked(branches):
    # HGNet / DenseNet: one Concat of three or more convolutions' outputs feeds the next Conv;
    # it folds pair by pair into one Concat of the blocked tensors, no reorder between
    block = nchwc_block_size()
    nodes = [conv("x", f"b{i}", f"w{i}", block, block) for i in range(branches)]
    nodes.append((helper.make_node("Concat", [f"b{i}" for i in range(branches)], ["k"], axis=1), []))
    nodes.append(conv("k", "y", "wy", branches * block, block))
    before = blocked_model(nodes, block, block)
    after = layout(before)
    concats = [n for n in after.graph.node if n.op_type == "Concat"]
    assert len(concats) == 1 and len(concats[0].input) == branches
    assert nchwc_ops(after) == {"ReorderInput": 1, "Conv": branches + 1, "ReorderOutput": 1}
    assert_same_outputs(before, after)


def test_a_concat_with_an_nchw_input_after_the_blocked_ones_keeps_it():
    block = nchwc_block_size()
    nodes = [conv("x", f"b{i}", f"w{i}", block, block) for i in range(2)]
    nodes.append((helper.make_node("Relu", ["x"], ["r"]), []))  # NCHW, never blocked
    nodes.append((helper.make_node("Concat", ["b0", "b1", "r"], ["y"], axis=1), []))
    before = blocked_model(nodes, block, 3 * block)
    after = layout(before)
    outer = next(n for n in after.graph.node if n.output[0] == "y")
    assert outer.op_type == "Concat" and outer.input[1] == "r"  # the blocked pair, reordered out, then r
    assert_same_outputs(before, after)


def test_a_residual_add_becomes_the_convolutions_sum_input():
    block = nchwc_block_size()
    nodes = [
        conv("x", "a", "w0", block, block),
        conv("a", "b", "w1", block, block),
        (helper.make_node("Add", ["a", "b"], ["y"]), []),
    ]
    after = layout(blocked_model(nodes, block, block))
    assert "Add" not in {n.op_type for n in after.graph.node}
    assert max(len(n.input) for n in after.graph.node if n.op_type == "Conv") == 4


def batch_norm(x, y, prefix, channels):
    stats = [
        RNG.standard_normal(channels).astype(np.float32),
        RNG.standard_normal(channels).astype(np.float32),
        RNG.standard_normal(channels).astype(np.float32),
        RNG.uniform(0.5, 2.0, channels).astype(np.float32),
    ]
    names = [f"{prefix}_{n}" for n in ("scale", "b", "mean", "var")]
    node = helper.make_node("BatchNormalization", [x, *names], [y], epsilon=1e-3)
    return node, [init(n, v) for n, v in zip(names, stats)]


@pytest.mark.parametrize("extra", [0, 4])
def test_a_batch_norm_branch_becomes_a_blocked_depthwise_conv_with_the_sum_and_relu(extra):
    # RepVGG / TextNet: relu(conv3x3(a) + bn(a)); ONNX Runtime turns the BN into a 1x1
    # depthwise nchwc Conv that takes the other branch as its Sum input and the Relu
    block = nchwc_block_size()
    c = block + extra
    nodes = [
        conv("x", "a", "w0", block, c),
        (helper.make_node("Relu", ["a"], ["ra"]), []),
        conv("ra", "b", "w1", c, c),
        batch_norm("ra", "n", "bn", c),
        (helper.make_node("Add", ["b", "n"], ["t"]), []),
        (helper.make_node("Relu", ["t"], ["y"]), []),
    ]
    after = layout(blocked_model(nodes, block, c))
    assert {n.op_type for n in after.graph.node if n.domain != "com.microsoft.nchwc"} == set()
    # unaligned: the residual is reordered out and in again (its padding is not t's)
    assert nchwc_ops(after) == {"ReorderInput": 1 + bool(extra), "Conv": 3, "ReorderOutput": 1 + bool(extra)}
    padded = -(-c // block) * block
    groups = [helper.get_attribute_value(a) for n in after.graph.node for a in n.attribute if a.name == "group"]
    assert sorted(groups) == [1, 1, padded]  # the BN's 1x1 depthwise Conv
    assert sum(len(n.input) == 4 for n in after.graph.node if n.op_type == "Conv") == 1  # one took the Add


def test_a_batch_norm_of_an_nchw_tensor_stays_nchw():
    block = nchwc_block_size()
    nodes = [batch_norm("x", "n", "bn", block), conv("n", "y", "w0", block, block)]
    after = layout(blocked_model(nodes, block, block))
    assert "BatchNormalization" in {n.op_type for n in after.graph.node}


def resize(x, y, name, scales, **attrs):
    return helper.make_node("Resize", [x, "", name], [y], **attrs), [init(name, np.array(scales, np.float32))]


@pytest.mark.parametrize(
    ("attrs", "scales", "blocked"),
    [
        ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, [2, 2], True),
        ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, [2, 3], True),
        ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, [1, 2], True),
        ({"mode": "linear", "coordinate_transformation_mode": "half_pixel"}, [1.5, 2], False),
        ({"mode": "cubic"}, [2, 2], False),
        ({"mode": "nearest", "coordinate_transformation_mode": "half_pixel", "nearest_mode": "floor"}, [3, 3], False),
    ],
)
def test_a_resize_by_whole_factors_between_convolutions_stays_blocked(attrs, scales, blocked):
    block = nchwc_block_size()
    nodes = [
        conv("x", "a", "w0", block, block),
        resize("a", "u", "scales", [1, 1, *scales], **attrs),
        conv("u", "y", "w1", block, block),
    ]
    before = blocked_model(nodes, block, block)
    out = before.graph.output[0].type.tensor_type.shape.dim
    out[2].dim_value, out[3].dim_value = int(6 * scales[0]), int(6 * scales[1])
    after = layout(before)
    assert ("Resize" not in {n.op_type for n in after.graph.node}) == blocked
    assert nchwc_ops(after)["Upsample"] == int(blocked)
    assert nchwc_ops(after)["ReorderOutput"] == (1 if blocked else 2)


def test_a_transpose_to_channels_last_is_the_reorder_itself():
    block = nchwc_block_size()
    nodes = [conv("x", "a", "w0", block, block), (helper.make_node("Transpose", ["a"], ["y"], perm=[0, 2, 3, 1]), [])]
    before = model(
        [n for n, _ in nodes], [tensor("x", F, [1, block, 6, 6])], [tensor("y", F, [1, 6, 6, block])], nodes[0][1]
    )
    after = layout(before)
    assert "Transpose" not in {n.op_type for n in after.graph.node}
    reorder = next(n for n in after.graph.node if n.op_type == "ReorderOutput")
    assert {a.name: helper.get_attribute_value(a) for a in reorder.attribute}["channels_last"] == 1


def test_layout_runs_only_for_the_cpu_provider():
    before = conv_chain()
    after = rewriter.optimize(before, level="layout", providers="CUDA", layout_may_grow=True).model
    assert not nchwc_ops(after)


def squeeze_excitation(batch: int | str = 1) -> onnx.ModelProto:
    """Conv -> SE (global pool, two 1x1 FC convs, Sigmoid gate, Mul) -> Conv -> global pool ->
    Flatten: the head and the FC layers run on 1x1 tensors."""
    block = nchwc_block_size()
    c, r = 2 * block, 4
    nodes = [
        conv("x", "a", "w0", 3, c),
        (helper.make_node("Relu", ["a"], ["ar"]), []),
        (helper.make_node("GlobalAveragePool", ["ar"], ["g"]), []),
        (
            helper.make_node("Conv", ["g", "f1"], ["h"]),
            [init("f1", RNG.standard_normal((r, c, 1, 1)).astype(np.float32))],
        ),
        (helper.make_node("Relu", ["h"], ["hr"]), []),
        (
            helper.make_node("Conv", ["hr", "f2"], ["e"]),
            [init("f2", RNG.standard_normal((c, r, 1, 1)).astype(np.float32))],
        ),
        (helper.make_node("Sigmoid", ["e"], ["gate"]), []),
        (helper.make_node("Mul", ["ar", "gate"], ["m"]), []),
        conv("m", "b", "w1", c, c),
        (helper.make_node("GlobalAveragePool", ["b"], ["p"]), []),
        (helper.make_node("Flatten", ["p"], ["y"]), []),
    ]
    return model(
        [n for n, _ in nodes],
        [tensor("x", F, [batch, 3, 8, 8])],
        [tensor("y", F, [batch, c])],
        [i for _, ii in nodes for i in ii],
    )


@pytest.mark.parametrize("batch", [1, "N"])
def test_one_by_one_tensors_skip_reorders_and_fc_layers_stay_nchw(batch):
    # [N, C, 1, 1] with aligned C is laid out alike blocked or not: no reorder for the pooled
    # head nor the SE branch; the FC convs of a 1x1 input stay NCHW (a symbolic batch too)
    after = layout(squeeze_excitation(batch))
    ops = nchwc_ops(after)
    assert ops["GlobalAveragePool"] == 2 and ops["Conv"] == 2
    # only the SE multiply (a broadcast, NCHW) needs the blocked tensor out and back in
    assert ops["ReorderOutput"] == 1 and ops["ReorderInput"] == 1
    fc = [n for n in after.graph.node if n.op_type in ("Conv", "FusedConv") and n.domain != "com.microsoft.nchwc"]
    assert len(fc) == 2


def test_a_pool_of_an_nchw_tensor_is_reordered_in():
    # as ONNX Runtime: MLAS's blocked pooling pays for the copies (bench: 0.44-0.95x)
    block = nchwc_block_size()
    nodes = [
        (helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]), []),
        conv("p", "y", "w0", block, block),
    ]
    after = layout(blocked_model(nodes, block, block, size=6))
    assert nchwc_ops(after) == {"ReorderInput": 1, "MaxPool": 1, "Conv": 1, "ReorderOutput": 1}
    unaligned = blocked_model([(helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3]), [])], 12, 12)
    unaligned.graph.output[0].type.tensor_type.shape.dim[2].dim_value = 4
    unaligned.graph.output[0].type.tensor_type.shape.dim[3].dim_value = 4
    assert not nchwc_ops(layout(unaligned))  # (ReorderInput pads; the pool would read padding)


def test_a_conv_of_few_channels_reads_nchw_after_a_blocked_one():
    # half a block of channels between two blocked convs: reordered out and read as NCHW,
    # as ONNX Runtime does (reading the padded blocked tensor doubles the conv's work)
    block = nchwc_block_size()
    half = block // 2
    before = model(
        [conv("x", "a", "w0", 3, half)[0], conv("a", "y", "w1", half, block)[0]],
        [tensor("x", F, [1, 3, 6, 6])],
        [tensor("y", F, [1, block, 6, 6])],
        conv("x", "a", "w0", 3, half)[1] + conv("a", "y", "w1", half, block)[1],
    )
    after = layout(before)
    assert nchwc_ops(after) == {"Conv": 2, "ReorderOutput": 2}


def test_a_residual_conv_of_few_channels_reads_nchw_and_keeps_the_residual_blocked():
    # a bottleneck's last conv (a quarter block of input channels) plus the block's input:
    # it reads its NCHW input and takes the blocked residual as its Sum input
    block = nchwc_block_size()
    quarter = block // 4
    nodes = [
        conv("x", "a", "w0", 3, block),
        conv("a", "b", "w1", block, quarter),
        (helper.make_node("Relu", ["b"], ["br"]), []),
        conv("br", "c", "w2", quarter, block),
        (helper.make_node("Add", ["c", "a"], ["s"]), []),
        (helper.make_node("Relu", ["s"], ["y"]), []),
    ]
    before = blocked_model(nodes, 3, block)
    after = layout(before)
    assert [n.op_type for n in after.graph.node if n.domain != "com.microsoft.nchwc"] == []
    assert nchwc_ops(after) == {"Conv": 3, "ReorderOutput": 2}


def skip_simplified_layer_norm(opset: int = 17, bias: bool = False, read_inverse: bool = False):
    """SkipSimplifiedLayerNormalization whose sum the next residual reads (a pre-norm
    decoder layer's), as the extended level leaves it."""
    n = helper.make_node
    outputs = ["y", "", "inv" if read_inverse else "", "sum"]
    inputs = ["a", "b", "gamma"] + (["bias"] if bias else [])
    nodes = [
        n("SkipSimplifiedLayerNormalization", inputs, outputs, domain="com.microsoft", epsilon=1e-5),
        n("Add", ["y", "sum"], ["z"]),
    ]
    inits = [init(name, RNG.standard_normal(8).astype(np.float32)) for name in ["gamma"] + (["bias"] if bias else [])]
    outs = [tensor("z", F, [2, 3, 8])] + ([tensor("inv", F, None)] if read_inverse else [])
    m = model(nodes, [tensor("a", F, [2, 3, 8]), tensor("b", F, [2, 3, 8])], outs, inits, opset, ["com.microsoft"])
    return m


@pytest.mark.parametrize("opset, norm", [(17, "SimplifiedLayerNormalization"), (23, "RMSNormalization")])
def test_skip_simplified_layer_norm_is_split_back_on_the_cpu(opset, norm):
    before = skip_simplified_layer_norm(opset)
    after = rewriter.optimize(before, level="all", layout_may_grow=True).model
    assert ops(after) == {"Add": 2, norm: 1}
    assert_same_outputs(before, after, atol=1e-5)
    biased = rewriter.optimize(skip_simplified_layer_norm(opset, bias=True), level="all", layout_may_grow=True).model
    assert ops(biased) == {"Add": 3, norm: 1}


def test_skip_simplified_layer_norm_whose_inverse_deviation_is_read_stays():
    after = rewriter.optimize(skip_simplified_layer_norm(read_inverse=True), level="all", layout_may_grow=True).model
    assert ops(after)["SkipSimplifiedLayerNormalization"] == 1


@pytest.mark.parametrize(
    ("k", "rows", "gelu", "fused"),
    [(16, 40, False, True), (64, 40, True, True), (512, 40, False, False), (16, 5, True, False)],
)
def test_a_linear_layer_of_a_short_inner_dim_runs_as_one_gemm(k, rows, gelu, fused):
    # x @ W + b over [2, rows, K]: Reshape, Gemm with the bias, Reshape (ORT's MatMulAddFusion
    # form: MLAS starts from the bias); BiasGelu's kernel is slow on short rows: Gemm + Gelu
    n = helper.make_node
    nodes = [n("MatMul", ["x", "w"], ["m"]), n("Add", ["m", "b"], ["a"])]
    nodes += [n("Mul", ["a", "half"], ["h"]), n("Div", ["a", "root2"], ["d"]), n("Erf", ["d"], ["e"])] if gelu else []
    nodes += [n("Add", ["e", "one"], ["e1"]), n("Mul", ["h", "e1"], ["y"])] if gelu else [n("Relu", ["a"], ["y"])]
    inits = [
        init("w", RNG.standard_normal((k, 16)).astype(np.float32)),
        init("b", RNG.standard_normal(16).astype(np.float32)),
    ]
    inits += [init(name, np.array(v, np.float32)) for name, v in (("half", 0.5), ("root2", 2**0.5), ("one", 1.0))]
    before = model(nodes, [tensor("x", F, [2, rows, k])], [tensor("y", F, [2, rows, 16])], inits)
    after = layout(before)
    kinds = Counter(n.op_type for n in after.graph.node)
    assert (kinds["Gemm"] == 1 and kinds["MatMul"] == 0 and kinds["Reshape"] == 2) == fused
    assert kinds["Gelu"] == int(gelu and fused) and kinds["BiasGelu"] == int(gelu and not fused)
