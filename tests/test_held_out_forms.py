"""Forms found on exports of families the packs were not written against (BLOOM, MobileBERT,
decoders that fold heads into the batch axis): BLOOM's factored tanh-GELU, chains of
constant Adds or Muls, and a Reshape's -1 named through heads moved into or out of the
batch axis."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_same_outputs, init, model, ops, tensor
from onnx import helper

import rewriter
from rewriter.graph.type_reading import shape_of
from rewriter.graph.types import infer_model_types


def bloom_gelu() -> object:
    """x * 0.5 * (1 + tanh(0.79788456 * x * (1 + 0.044715 * x * x))), as BLOOM writes it."""
    n = helper.make_node
    nodes = [
        n("Mul", ["x", "half"], ["xh"]),
        n("Mul", ["x", "k2"], ["xk2"]),
        n("Mul", ["x", "k1"], ["xk1"]),
        n("Mul", ["xk1", "x"], ["xx"]),
        n("Add", ["xx", "one"], ["inner"]),
        n("Mul", ["xk2", "inner"], ["arg"]),
        n("Tanh", ["arg"], ["t"]),
        n("Add", ["t", "one"], ["t1"]),
        n("Mul", ["xh", "t1"], ["y"]),
    ]
    constants = {"half": 0.5, "k2": 0.79788456, "k1": 0.044715, "one": 1.0}
    return model(
        nodes,
        [tensor("x", shape=["B", 4, 8])],
        [tensor("y", shape=["B", 4, 8])],
        [init(k, np.array(v, np.float32)) for k, v in constants.items()],
    )


def test_bloom_gelu_becomes_fast_gelu():
    before = bloom_gelu()
    after = rewriter.optimize(before, level="extended")
    assert ops(after.model) == {"FastGelu": 1}
    assert after.report.applied("GeluTanhFactoredCubic") == 1
    assert_same_outputs(before, after.model, atol=1e-5)


def chain(op: str, c1, c2):
    nodes = [helper.make_node(op, ["x", "c1"], ["t"]), helper.make_node(op, ["t", "c2"], ["y"])]
    return model(
        nodes,
        [tensor("x", shape=["B", 8])],
        [tensor("y", shape=["B", 8])],
        [init("c1", np.asarray(c1, np.float32)), init("c2", np.asarray(c2, np.float32))],
    )


@pytest.mark.parametrize("op", ["Add", "Mul"])
def test_two_constants_in_a_row_become_one(op):
    rng = np.random.default_rng(0)
    before = chain(op, rng.standard_normal(8), rng.standard_normal([1, 8]))
    after = rewriter.optimize(before, level="extended").model
    assert ops(after) == {op: 1}
    assert_same_outputs(before, after, atol=1e-5)


@pytest.mark.parametrize(
    "op, c1, c2",
    [
        ("Mul", np.full(8, 1e30), np.full(8, 1e30)),  # the product overflows where x * c1 * c2 may not
        ("Add", np.ones([8, 1]), np.ones([1, 8])),  # a [8, 8] constant from two of 8
    ],
)
def test_a_chain_whose_combined_constant_is_infinite_or_larger_stays(op, c1, c2):
    before = chain(op, c1, c2)
    if c1.shape == (8, 1):
        before.graph.output[0].CopyFrom(tensor("y", shape=None))
        before.graph.input[0].CopyFrom(tensor("x", shape=[8]))
    after = rewriter.optimize(before, level="extended").model
    assert ops(after) == {op: 2}


def test_a_minus_one_through_heads_in_the_batch_axis_keeps_its_name():
    """[batch, 4, 8, 16] -> [-1, 8, 16] is 4*batch; back with [-1, 4, 8, 16] it is batch."""
    n = helper.make_node
    nodes = [
        n("Reshape", ["x", "to3"], ["folded"]),
        n("Relu", ["folded"], ["r"]),
        n("Reshape", ["r", "to4"], ["y"]),
    ]
    m = model(
        nodes,
        [tensor("x", shape=["batch", 4, 8, 16])],
        [tensor("y", shape=None)],
        [init("to3", np.array([-1, 8, 16], np.int64)), init("to4", np.array([-1, 4, 8, 16], np.int64))],
    )
    m.graph.output[0].CopyFrom(tensor("y", shape=None))
    types = infer_model_types(m)
    assert shape_of(types["folded"]) == ["4*batch", 8, 16]
    assert shape_of(types["y"]) == ["batch", 4, 8, 16]
