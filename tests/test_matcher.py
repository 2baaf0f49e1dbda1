"""The matcher: unification, commutativity, alternatives, literals, attributes, optional
inputs, multi-output nodes and variadic inputs."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_same_outputs, init, model, ops, optimize_with, tensor
from onnx import TensorProto, helper

HEADER = "pack test level 1\n"


def x_model(nodes, initializers=(), shape=(2, 3), out_shape=None, opset=17):
    return model(
        nodes,
        [tensor("x", shape=list(shape))],
        [tensor("y", shape=list(out_shape or shape))],
        initializers,
        opset=opset,
    )


GELU = (
    HEADER
    + """
rule GeluErf root d {
    d = Div(x, ~1.41421356) | Mul(x, ~0.70710678)
    y = Mul(Mul(x, Add(Erf(d), 1.0)), 0.5)
  =>
    y = com.microsoft.Gelu(x)
}
"""
)


def gelu_nodes(scale_op="Div", constant=1.4142135, swap=False):
    nodes = [
        helper.make_node(scale_op, ["x", "c_scale"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["one", "e"] if swap else ["e", "one"], ["a"]),
        helper.make_node("Mul", ["a", "x"] if swap else ["x", "a"], ["m"]),
        helper.make_node("Mul", ["half", "m"] if swap else ["m", "half"], ["y"]),
    ]
    inits = [init("c_scale", np.float32(constant)), init("one", np.float32(1.0)), init("half", np.float32(0.5))]
    return nodes, inits


@pytest.mark.parametrize("swap", [False, True])
def test_commutative_ops_match_in_either_operand_order(swap):
    nodes, inits = gelu_nodes(swap=swap)
    before = x_model(nodes, inits)
    result = optimize_with(before, GELU)
    assert ops(result.model) == {"Gelu": 1}
    assert_same_outputs(before, result.model)


def test_alternatives_match_either_form():
    nodes, inits = gelu_nodes("Mul", 0.70710678)
    result = optimize_with(x_model(nodes, inits), GELU)
    assert ops(result.model) == {"Gelu": 1}


def test_approximate_literal_rejects_a_different_constant():
    nodes, inits = gelu_nodes(constant=1.5)
    result = optimize_with(x_model(nodes, inits), GELU)
    assert result.report.applied("GeluErf") == 0


def test_exact_literal_needs_the_exact_value():
    rules = HEADER + "rule R { y = Mul(x, 0.5) => y = Neg(x) }"
    for value, applies in ((0.5, True), (0.50001, False)):
        m = x_model([helper.make_node("Mul", ["x", "c"], ["y"])], [init("c", np.float32(value))])
        assert optimize_with(m, rules).report.applied("R") == int(applies)


def test_literal_needs_a_one_element_constant_not_a_graph_input():
    rules = HEADER + "rule R { y = Mul(x, 1.0) => y = Neg(x) }"
    m = model(
        [helper.make_node("Mul", ["x", "c"], ["y"])],
        [tensor("x", shape=[3]), tensor("c", shape=[3])],
        [tensor("y", shape=[3])],
    )
    assert optimize_with(m, rules).report.applied("R") == 0
    m = x_model([helper.make_node("Mul", ["x", "c"], ["y"])], [init("c", np.ones([3], np.float32))], shape=[2, 3])
    assert optimize_with(m, rules).report.applied("R") == 0


def test_literal_matches_constant_node_outputs_too():
    rules = HEADER + "rule R { y = Mul(x, 2.0) => y = Add(x, x) }"
    nodes = [helper.make_node("Constant", [], ["c"], value_float=2.0), helper.make_node("Mul", ["x", "c"], ["y"])]
    before = x_model(nodes)
    after = optimize_with(before, rules).model
    assert ops(after) == {"Add": 1}
    assert_same_outputs(before, after)


def test_a_name_used_twice_must_bind_the_same_value():
    rules = HEADER + "rule Square { y = Mul(a, a) => y = Pow(a, 2.0) }"
    same = model([helper.make_node("Mul", ["x", "x"], ["y"])], [tensor("x", shape=[3])], [tensor("y", shape=[3])])
    other = model(
        [helper.make_node("Mul", ["x", "z"], ["y"])],
        [tensor("x", shape=[3]), tensor("z", shape=[3])],
        [tensor("y", shape=[3])],
    )
    assert optimize_with(same, rules).report.applied("Square") == 1
    assert optimize_with(other, rules).report.applied("Square") == 0


def test_attribute_match_uses_schema_defaults_when_absent():
    rules = HEADER + "rule R { y = Gemm(a, b) {transA: 0, alpha: 1.0} => y = MatMul(a, b) }"
    m = model(
        [helper.make_node("Gemm", ["a", "b"], ["y"])],
        [tensor("a", shape=[2, 3]), tensor("b", shape=[3, 4])],
        [tensor("y", shape=[2, 4])],
    )
    result = optimize_with(m, rules)
    assert ops(result.model) == {"MatMul": 1}
    assert_same_outputs(m, result.model)
    m.graph.node[0].attribute.append(helper.make_attribute("alpha", 2.0))
    assert optimize_with(m, rules).report.applied("R") == 0


def test_attribute_captures_unify_across_nodes():
    rules = (
        HEADER
        + """rule DoubleTranspose root b {
        a = Transpose(x) {perm: p}
        b = Transpose(a) {perm: p}
      where p == [1, 0]
      => b = x }"""
    )

    def chain(p1, p2):
        return model(
            [
                helper.make_node("Transpose", ["x"], ["a"], perm=p1),
                helper.make_node("Transpose", ["a"], ["b"], perm=p2),
                helper.make_node("Neg", ["b"], ["y"]),
            ],
            [tensor("x", shape=[2, 3])],
            [tensor("y", shape=None)],
        )

    assert optimize_with(chain([1, 0], [1, 0]), rules).report.applied("DoubleTranspose") == 1
    m = model(
        [
            helper.make_node("Transpose", ["x"], ["a"], perm=[0, 2, 1]),
            helper.make_node("Transpose", ["a"], ["b"], perm=[1, 0, 2]),
            helper.make_node("Neg", ["b"], ["y"]),
        ],
        [tensor("x", shape=[2, 3, 4])],
        [tensor("y", shape=None)],
    )
    assert optimize_with(m, rules).report.applied("DoubleTranspose") == 0


def test_optional_input_binds_absent_or_present():
    rules = HEADER + """rule R { y = Clip(x, lo?, hi?) where absent(hi) => y = Relu(x) }"""
    no_max = x_model([helper.make_node("Clip", ["x", "lo"], ["y"])], [init("lo", np.float32(0))])
    with_max = x_model(
        [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], [init("lo", np.float32(0)), init("hi", np.float32(6))]
    )
    assert optimize_with(no_max, rules).report.applied("R") == 1
    assert optimize_with(with_max, rules).report.applied("R") == 0


def test_pattern_can_extend_from_the_root_to_its_consumers():
    rules = HEADER + "rule R root r { r = Relu(x)  y = Neg(r) => y = Sub(0.0, r) }"
    # Sub(0, r) keeps the Relu (its output is referenced) and replaces the Neg
    m = x_model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])])
    after = optimize_with(m, rules).model
    assert ops(after) == {"Relu": 1, "Sub": 1}
    assert_same_outputs(m, after)


def test_variadic_rest_binds_the_remaining_inputs():
    rules = (
        HEADER
        + """rule R { y = Sum(first, *rest) where len(rest) == 2
                          => y = Add(Add(first, rest[0]), rest[1]) }"""
    )
    m = model(
        [helper.make_node("Sum", ["a", "b", "c"], ["y"])],
        [tensor(n, shape=[2]) for n in "abc"],
        [tensor("y", shape=[2])],
    )
    result = optimize_with(m, rules)
    assert ops(result.model) == {"Add": 2}
    assert_same_outputs(m, result.model)
    two = model(
        [helper.make_node("Sum", ["a", "b"], ["y"])], [tensor(n, shape=[2]) for n in "ab"], [tensor("y", shape=[2])]
    )
    assert optimize_with(two, rules).report.applied("R") == 0


def test_an_empty_rest_adds_no_input_to_the_replacement():
    rules = (
        HEADER
        + """rule R { c = Concat(*xs) {axis: 0}
                                 y = Concat(c, *rest) {axis: 0}
                               => y = Concat(xs, rest) {axis: 0} }"""
    )
    m = model(
        [helper.make_node("Concat", ["a", "b"], ["c"], axis=0), helper.make_node("Concat", ["c"], ["y"], axis=0)],
        [tensor(n, shape=[2]) for n in "ab"],
        [tensor("y", shape=[4])],
    )
    after = optimize_with(m, rules).model
    assert [list(n.input) for n in after.graph.node] == [["a", "b"]]
    assert not after.graph.initializer
    assert_same_outputs(m, after)


def test_multi_output_nodes_bind_each_output():
    rules = (
        HEADER
        + """rule R root a {
        a, b = Split(x) {axis: 0, num_outputs: 2}
        y = Add(a, b)
      => y = ReduceSum(x, [0]) {keepdims: 1} }"""
    )
    m = model(
        [helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=0), helper.make_node("Add", ["a", "b"], ["y"])],
        [tensor("x", shape=[2, 3])],
        [tensor("y", shape=[1, 3])],
        [init("sizes", np.array([1, 1], np.int64))],
    )
    # Split here has an extra input (sizes) the pattern does not list: no match
    assert optimize_with(m, rules).report.applied("R") == 0
    m2 = model(
        [
            helper.make_node("Split", ["x"], ["a", "b"], axis=0, num_outputs=2),
            helper.make_node("Add", ["a", "b"], ["y"]),
        ],
        [tensor("x", shape=[2, 3])],
        [tensor("y", shape=[1, 3])],
        opset=18,
    )
    result = optimize_with(m2, rules)
    assert ops(result.model) == {"ReduceSum": 1}
    assert_same_outputs(m2, result.model)


def test_where_constraints_see_shapes_and_types():
    rules = (
        HEADER + "rule R { y = Relu(x) where rank(x) == 2 and dtype(x) == float and shape(x)[1] == 3 => y = Neg(x) }"
    )
    assert optimize_with(x_model([helper.make_node("Relu", ["x"], ["y"])]), rules).report.applied("R") == 1
    m = model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [tensor("x", TensorProto.DOUBLE, [2, 3])],
        [tensor("y", TensorProto.DOUBLE, [2, 3])],
    )
    assert optimize_with(m, rules).report.applied("R") == 0


def test_symbolic_dims_compare_by_name():
    rules = HEADER + "rule R { y = Add(a, b) where same_shape(a, b) => y = Mul(a, 2.0) }"
    m = model(
        [helper.make_node("Add", ["x", "x"], ["y"])], [tensor("x", shape=["N", 3])], [tensor("y", shape=["N", 3])]
    )
    assert optimize_with(m, rules).report.applied("R") == 1


def test_matching_only_tries_rules_at_their_root_op():
    from rewriter.graph.model import ModelState

    m = x_model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])])
    state = ModelState(m)
    assert len(state.view.nodes_by_op("", "Relu")) == 1
    assert state.view.nodes_by_op("", "Conv") == []


ROOT_WHERES = (
    HEADER
    + """
rule TransposeRelu root t {
    t = Transpose(x) {perm: p}
    y = Relu(t)
  where list(p) == [1, 0] and rank(x) == 2 and rank(y) == 2
  =>
    y = Transpose(Relu(x)) {perm: p}
}

rule CommutativeRoot root a {
    a = Add(x, b)
    y = Relu(a)
  where rank(b) == 1
  =>
    y = Relu(a)
}
"""
)


def test_wheres_on_the_root_alone_are_checked_with_the_root_checks_and_not_again():
    from rewriter.dsl import load_pack_text
    from rewriter.match.plan import compile_rule

    transpose, commutative = (compile_rule(r) for r in load_pack_text(ROOT_WHERES).rules)
    assert transpose.root_names == {"x": ("input", 0), "t": ("output", 0), "p": ("attr", "perm")}
    assert len(transpose.root_wheres) == 2  # list(p) == [1, 0] and rank(x) == 2
    assert len(transpose.steps[0].checks) == 0  # (not repeated in the search)
    assert len(transpose.steps[1].checks) == 1  # rank(y): y is the Relu's
    # an Add may bind its operands either way round: its wheres stay in the search
    assert commutative.root_wheres == () and len(commutative.steps[0].checks) == 1


@pytest.mark.parametrize(
    "perm, shape, applies", [([1, 0], [2, 3], True), ([0, 1], [2, 3], False), ([1, 0, 2], [2, 3, 4], False)]
)
def test_a_root_that_fails_a_where_on_it_alone_is_not_matched(perm, shape, applies):
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=perm), helper.make_node("Relu", ["t"], ["y"])]
    out_shape = [shape[p] for p in perm]
    before = model(nodes, [tensor("x", shape=shape)], [tensor("y", shape=out_shape)])
    result = optimize_with(before, ROOT_WHERES)
    assert result.report.applied("TransposeRelu") == (1 if applies else 0)
    assert ops(result.model) == {"Transpose": 1, "Relu": 1}
    assert_same_outputs(before, result.model)
