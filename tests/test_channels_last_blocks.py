"""Nets that work channels-last between convolutions (ConvNeXt): the extended level sinks
their NHWC -> NCHW Transposes until they cancel and folds the LayerScale into the MLP's
weights; the layout level keeps the result blocked without adding nodes (but for the Reshapes
around a linear layer's Gemm)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import assert_same_outputs, init, model, ops, tensor
from onnx import TensorProto, helper

import rewriter
from rewriter.onnx_facts.nchwc import nchwc_block_size

F = TensorProto.FLOAT
RNG = np.random.default_rng(11)
C = 32  # a multiple of either NCHWc block


def weights(name: str, *shape: int, scale: float = 0.2):
    return init(name, (RNG.standard_normal(shape) * scale).astype(np.float32))


def convnext_like(batch: int | str = 1, head: str = "pool") -> onnx.ModelProto:
    """Stem conv, two ConvNeXt blocks (depthwise conv, NHWC LayerNorm and MLP, LayerScale,
    residual), a downsampling LayerNorm + Conv, one more block (head "pool":
    GlobalAveragePool; head "reduce": the dynamo exporter's ReduceMean + as_strided Gather,
    batch 1)."""
    nodes, inits = [], [weights("w_stem", C, 3, 4, 4), weights("b_stem", C)]
    nodes.append(helper.make_node("Conv", ["x", "w_stem", "b_stem"], ["stem"], kernel_shape=[4, 4], strides=[4, 4]))

    def norm(x: str, out: str) -> None:
        nodes.append(helper.make_node("Transpose", [x], [f"{out}_nhwc"], perm=[0, 2, 3, 1]))
        nodes.append(helper.make_node("LayerNormalization", [f"{out}_nhwc", "ln_g", "ln_b"], [f"{out}_ln"], axis=-1))
        nodes.append(helper.make_node("Transpose", [f"{out}_ln"], [out], perm=[0, 3, 1, 2]))

    def block(x: str, c: int, i: int) -> str:
        inits.extend(
            [
                weights(f"ln_g{i}", c),
                weights(f"ln_b{i}", c),
                weights(f"dw{i}", c, 1, 7, 7),
                weights(f"w1_{i}", c, 4 * c),
                weights(f"b1_{i}", 4 * c),
                weights(f"w2_{i}", 4 * c, c),
                weights(f"b2_{i}", c),
                weights(f"gamma{i}", c, 1, 1),
            ]
        )
        nodes.extend(
            [
                helper.make_node("Conv", [x, f"dw{i}"], [f"d{i}"], group=c, pads=[3, 3, 3, 3]),
                helper.make_node("Transpose", [f"d{i}"], [f"t{i}"], perm=[0, 2, 3, 1]),
                helper.make_node("LayerNormalization", [f"t{i}", f"ln_g{i}", f"ln_b{i}"], [f"n{i}"], axis=-1),
                helper.make_node("MatMul", [f"n{i}", f"w1_{i}"], [f"h{i}"]),
                helper.make_node("Add", [f"h{i}", f"b1_{i}"], [f"hb{i}"]),
                helper.make_node("Relu", [f"hb{i}"], [f"r{i}"]),
                helper.make_node("MatMul", [f"r{i}", f"w2_{i}"], [f"o{i}"]),
                helper.make_node("Add", [f"o{i}", f"b2_{i}"], [f"ob{i}"]),
                helper.make_node("Transpose", [f"ob{i}"], [f"back{i}"], perm=[0, 3, 1, 2]),
                helper.make_node("Mul", [f"gamma{i}", f"back{i}"], [f"s{i}"]),
                helper.make_node("Add", [x, f"s{i}"], [f"x{i + 1}"]),
            ]
        )
        return f"x{i + 1}"

    inits += [weights("ln_g", C), weights("ln_b", C)]
    norm("stem", "x0")
    x = block(block("x0", C, 0), C, 1)
    norm(x, "down_in")
    inits += [weights("w_down", 2 * C, C, 2, 2), weights("b_down", 2 * C)]
    nodes.append(
        helper.make_node("Conv", ["down_in", "w_down", "b_down"], ["down"], kernel_shape=[2, 2], strides=[2, 2])
    )
    # the second stage's block adds its MLP to the downsampling Conv's NCHW output
    block("down", 2 * C, 2)
    nodes.append(helper.make_node("Identity", ["x3"], ["last"]))
    if head == "pool":
        nodes += [
            helper.make_node("GlobalAveragePool", ["last"], ["pooled"]),
            helper.make_node("Flatten", ["pooled"], ["y"]),
        ]
        out = tensor("y", F, [batch, 2 * C])
    else:
        inits += [
            init("axes", np.array([-1, -2], np.int64)),
            init("flat", np.array([-1], np.int64)),
            init("strided", np.arange(2 * C, dtype=np.int64).reshape(1, 2 * C, 1, 1)),
        ]
        nodes += [
            helper.make_node("ReduceMean", ["last", "axes"], ["mean"], keepdims=1),
            helper.make_node("Reshape", ["mean", "flat"], ["mean_flat"]),
            helper.make_node("Gather", ["mean_flat", "strided"], ["y"], axis=0),
        ]
        out = tensor("y", F, [1, 2 * C, 1, 1])
    return model(nodes, [tensor("x", F, [batch, 3, 32, 32])], [out], inits, opset=18)


def optimized(before: onnx.ModelProto, level: str) -> onnx.ModelProto:
    after = rewriter.optimize(before, level=level, providers="CPU").model
    assert_same_outputs(before, after, atol=1e-4)
    rewriter.check_model(after, full_check=True)
    return after


@pytest.mark.parametrize("batch", [1, "N"])
def test_transposes_sink_until_they_cancel_and_the_layer_scale_folds(batch):
    before = convnext_like(batch)
    after = optimized(before, "extended")
    assert ops(before)["Transpose"] == 10
    # the residual Adds run on NHWC; the downsampling LayerNorm reads the last one directly
    assert ops(after)["Transpose"] == 8
    assert ops(after)["Mul"] == 0  # (x @ W + B) * gamma = x @ (W * gamma) + B * gamma
    assert len(after.graph.node) <= len(before.graph.node) - 6


def test_attention_transposes_and_scalar_scales_are_left_where_they_are():
    # a head split ([0, 2, 1, 3]) times a constant, and a linear layer times a scalar (the
    # query scaling the attention fusions read): neither is rewritten
    before = model(
        [
            helper.make_node("MatMul", ["x", "w"], ["q"]),
            helper.make_node("Add", ["q", "b"], ["qb"]),
            helper.make_node("Mul", ["qb", "scale"], ["qs"]),
            helper.make_node("Reshape", ["qs", "heads"], ["qh"]),
            helper.make_node("Transpose", ["qh"], ["qt"], perm=[0, 2, 1, 3]),
            helper.make_node("Mul", ["qt", "k"], ["y"]),
        ],
        [tensor("x", F, [1, 5, 16])],
        [tensor("y", F, [1, 4, 5, 4])],
        [
            weights("w", 16, 16),
            weights("b", 16),
            init("scale", np.array(0.5, np.float32)),
            init("heads", np.array([1, 5, 4, 4], np.int64)),
            weights("k", 4),
        ],
    )
    after = optimized(before, "extended")
    kinds = [n.op_type for n in after.graph.node]
    assert kinds.index("Transpose") < max(i for i, k in enumerate(kinds) if k == "Mul")
    assert ops(after)["Mul"] == 2


@pytest.mark.skipif(nchwc_block_size() is None, reason="onnxruntime does not use NCHWc here")
@pytest.mark.parametrize(("batch", "head"), [(1, "pool"), ("N", "pool"), (1, "reduce")])
def test_the_layout_level_adds_no_node_to_a_channels_last_net(batch, head):
    before = convnext_like(batch, head)
    extended = optimized(before, "extended")
    layout = optimized(before, "layout")
    # nothing added but the two Reshapes around each MLP layer's Gemm (LinearGemmForms: a
    # Gemm with its bias is faster than MatMul + Add at these widths)
    gemms = ops(layout)["Gemm"]
    assert len(layout.graph.node) <= len(extended.graph.node) + 2 * gemms
    nchwc = {n.op_type for n in layout.graph.node if n.domain == "com.microsoft.nchwc"}
    # the first residual (the stem's output plus the MLP's, NHWC) is added blocked, and the
    # pooling (a ReduceMean over both spatial axes too) runs on the blocked tensor
    assert {"Conv", "GlobalAveragePool"} <= nchwc
    assert ops(layout)["Transpose"] == 0


def test_an_in_order_gather_of_every_element_is_a_reshape():
    before = convnext_like(1, "reduce")
    after = optimized(before, "basic")
    assert ops(after)["Gather"] == 0


@pytest.mark.parametrize(
    ("dtype", "weight", "scale", "folded"),
    [
        (np.float16, 1.0, 2.0, True),
        (np.float16, 100.0, 1000.0, False),  # 1e5 overflows float16; (x @ W) * g may not
        (np.float32, 0.0, np.inf, False),  # inf * 0 = NaN
    ],
)
def test_a_scale_is_folded_only_where_the_folded_weights_are_finite(dtype, weight, scale, folded):
    # (on CUDA: the CPU computes float16 models in float32, see partition/float16.py)
    kind = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    before = model(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Mul", ["h", "g"], ["y"])],
        [tensor("x", kind, [1, 2, 4])],
        [tensor("y", kind, [1, 2, 4])],
        [init("w", np.full((4, 4), weight, dtype)), init("g", np.array([scale, 1, 1, 1], dtype))],
    )
    after = rewriter.optimize(before, level="extended", providers="CUDA").model
    assert ops(after)["Mul"] == (0 if folded else 1)
