"""SkipLayerNormalization with a skip broadcast over the batch: a decoder's learned positions
([1, S, H] or [S, H]) added to its token embeddings ([B, S, H]) before a LayerNorm.  The
kernel takes such a skip as its second input only; a sum broadcast along any other axis,
or shapes with an unknown dim, stay unfused.  Also `none in shape(x)` in rule expressions."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_same_outputs, init, model, ops, optimize_with, run, tensor
from onnx import helper

import rewriter

H = 8


def embeddings_ln(x_shape, pos_shape, pos_first=False, read_sum=False):
    """LayerNormalization(x + pos); with read_sum the sum is also an output (pre-LN residual)."""
    rng = np.random.default_rng(0)
    pos = init("pos", rng.standard_normal([d if isinstance(d, int) else 4 for d in pos_shape]).astype(np.float32))
    add = helper.make_node("Add", ["pos", "x"] if pos_first else ["x", "pos"], ["s"])
    ln = helper.make_node("LayerNormalization", ["s", "g", "b"], ["y"], axis=-1, epsilon=1e-5)
    outputs = [tensor("y", shape=x_shape)] + ([tensor("s", shape=x_shape)] if read_sum else [])
    return model(
        [add, ln],
        [tensor("x", shape=x_shape)],
        outputs,
        [
            pos,
            init("g", rng.standard_normal(H).astype(np.float32)),
            init("b", rng.standard_normal(H).astype(np.float32)),
        ],
    )


@pytest.mark.parametrize("pos_shape", [[1, 4, H], [4, H]])
@pytest.mark.parametrize("pos_first", [False, True])
@pytest.mark.parametrize("read_sum", [False, True])
def test_positions_broadcast_over_the_batch_fuse_as_the_skip(pos_shape, pos_first, read_sum):
    before = embeddings_ln(["B", 4, H], pos_shape, pos_first, read_sum)
    after = rewriter.optimize(before, level="extended").model
    assert ops(after) == {"SkipLayerNormalization": 1}
    (sln,) = after.graph.node
    assert list(sln.input[:2]) == ["x", "pos"]  # only the second input may broadcast
    assert_same_outputs(before, after, atol=1e-4)  # batch 1
    feeds = {"x": np.random.default_rng(1).standard_normal((3, 4, H)).astype(np.float32)}
    for a, b in zip(run(before, feeds), run(after, feeds)):
        np.testing.assert_allclose(a, b, atol=1e-4)
    # the CPU layout splits it back (the kernel is slower than Add + LayerNormalization)
    split = rewriter.optimize(before, level="all", layout_may_grow=True).model
    assert ops(split) == {"Add": 1, "LayerNormalization": 1}
    for a, b in zip(run(before, feeds), run(split, feeds)):
        np.testing.assert_allclose(a, b, atol=1e-4)


@pytest.mark.parametrize(
    "x_shape, pos_shape",
    [
        (["B", 4, H], ["B", 1, H]),  # broadcast along the sequence: the kernel refuses it
        (["B", 4, H], [1, 1, H]),
        (["B", None, H], [1, 4, H]),  # an unknown dim: cannot tell the shapes agree
        ([2, 4, H], [2, 4, 1, H]),  # the sum is 4-D
    ],
)
def test_other_broadcasts_stay_unfused(x_shape, pos_shape):
    before = embeddings_ln(x_shape, pos_shape)
    after = rewriter.optimize(before, level="extended").model
    assert "SkipLayerNormalization" not in ops(after)


RULES = """
pack p level 1
rule ReluUnknownDim {
    y = Relu(x)
  where none in shape(x)
  => y = x
}
"""


@pytest.mark.parametrize("shape, fires", [([2, None, 3], True), ([2, "S", 3], False), ([2, 3], False)])
def test_none_in_a_shape_asks_for_an_unknown_dim(shape, fires):
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["y"], ["z"])]
    before = model(nodes, [tensor("x", shape=shape)], [tensor("z", shape=shape)])
    result = optimize_with(before, RULES)
    assert result.report.applied("ReluUnknownDim") == (1 if fires else 0)
