"""The bundled layout pack (level 3): ONNX Runtime's NCHWc rewrites on CPU."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest
from helpers import assert_same_outputs, init, model, tensor
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
    after = rewriter.optimize(before, level="layout", providers="CPU").model
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


def test_unaligned_input_channels_are_left_in_nchw():
    block = nchwc_block_size()
    after = layout(conv_chain(channels=(3, block + 4, block + 4), pool=False))
    assert [n.op_type for n in after.graph.node if n.domain == "" and n.op_type == "Conv"] == ["Conv"]


def test_layout_runs_only_for_the_cpu_provider():
    before = conv_chain()
    after = rewriter.optimize(before, level="layout", providers="CUDA").model
    assert not nchwc_ops(after)
