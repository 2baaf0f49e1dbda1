"""Built-in passes: constant folding and common subexpression elimination."""

from __future__ import annotations

import numpy as np
from helpers import assert_same_outputs, init, model, ops, optimize_basic, optimize_with, tensor
from onnx import TensorProto, helper

F = TensorProto.FLOAT
RNG = np.random.default_rng(7)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_constant_folding_folds_shape_computations():
    m = model(
        [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("Gather", ["s", "i"], ["g"], axis=0),
            helper.make_node("Unsqueeze", ["g", "zero"], ["u"]),
            helper.make_node("Concat", ["u", "minus1"], ["shape"], axis=0),
            helper.make_node("Reshape", ["x", "shape"], ["y"]),
        ],
        [tensor("x", F, [2, 3, 4])],
        [tensor("y", F, [2, 12])],
        [init("i", np.int64(0)), init("zero", np.array([0], np.int64)), init("minus1", np.array([-1], np.int64))],
    )
    result = optimize_basic(m)
    assert ops(result.model) == {"Reshape": 1}
    assert result.report.builtins["constant_folding"] == 4
    assert_same_outputs(m, result.model)


def test_constant_folding_leaves_symbolic_shapes_alone():
    m = model(
        [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Reshape", ["x", "s"], ["y"])],
        [tensor("x", F, ["N", 3])],
        [tensor("y", F, ["N", 3])],
    )
    result = optimize_basic(m)
    assert result.report.builtins.get("constant_folding", 0) == 0
    # the Reshape's target only repeats x's own dims: a constant [0, 3] ("copy dim 0")
    assert ops(result.model) == {"Reshape": 1}
    assert result.report.applied("ReshapeComputedTargetFolding") == 1
    assert_same_outputs(m, result.model)


def test_constant_folding_keeps_graph_outputs_and_overridable_initializers():
    m = model(
        [
            helper.make_node("Neg", ["w"], ["y"]),
            helper.make_node("Neg", ["v"], ["z"]),
            helper.make_node("Neg", ["z"], ["q"]),
        ],
        [tensor("w", F, [2])],
        [tensor("y", F, [2]), tensor("q", F, [2])],
        [init("w", rand(2)), init("v", rand(2))],
    )
    result = optimize_basic(m)
    # w is also a graph input (a caller may override it): its Neg stays; q is an output: its Neg stays
    assert ops(result.model) == {"Neg": 2}
    assert_same_outputs(m, result.model)


def test_constant_folding_evaluates_chains_of_standard_ops():
    m = model(
        [
            helper.make_node("Mul", ["a", "b"], ["p"]),
            helper.make_node("Sqrt", ["p"], ["q"]),
            helper.make_node("Add", ["x", "q"], ["y"]),
        ],
        [tensor("x", F, [3])],
        [tensor("y", F, [3])],
        [init("a", np.float32([1, 4, 9])), init("b", np.float32([1, 1, 1]))],
    )
    result = optimize_basic(m)
    assert ops(result.model) == {"Add": 1}
    assert_same_outputs(m, result.model)


def test_constant_folding_folds_nonzero_of_a_constant():
    """NonZero's output length depends on the data, so inference cannot size it; a constant
    input bounds it (X-MOD routes every token to a fixed language's adapter this way)."""
    m = model(
        [
            helper.make_node("NonZero", ["mask"], ["nz"]),
            helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
            helper.make_node("GatherND", ["x", "idx"], ["y"]),
        ],
        [tensor("x", F, [4, 3])],
        [tensor("y", F, ["n", 3])],
        [init("mask", np.array([True, False, True, True]))],
    )
    result = optimize_basic(m)
    assert ops(result.model) == {"GatherND": 1}
    assert_same_outputs(m, result.model)


def test_constant_folding_never_folds_random_ops():
    m = model(
        [helper.make_node("RandomUniform", [], ["r"], shape=[3], dtype=F), helper.make_node("Add", ["x", "r"], ["y"])],
        [tensor("x", F, [3])],
        [tensor("y", F, [3])],
    )
    assert ops(optimize_basic(m).model) == {"RandomUniform": 1, "Add": 1}


CSE_ONLY = "pack p level 1\nbuiltin common_subexpression_elimination\n"


def test_cse_merges_identical_nodes():
    m = model(
        [
            helper.make_node("Relu", ["x"], ["a"]),
            helper.make_node("Relu", ["x"], ["b"]),
            helper.make_node("Add", ["a", "b"], ["y"]),
        ],
        [tensor("x", F, [3])],
        [tensor("y", F, [3])],
    )
    result = optimize_with(m, CSE_ONLY)
    assert ops(result.model) == {"Relu": 1, "Add": 1}
    assert_same_outputs(m, result.model)


def test_cse_treats_equal_small_constants_as_the_same_input():
    m = model(
        [
            helper.make_node("Add", ["x", "c1"], ["a"]),
            helper.make_node("Add", ["x", "c2"], ["b"]),
            helper.make_node("Mul", ["a", "b"], ["y"]),
        ],
        [tensor("x", F, [3])],
        [tensor("y", F, [3])],
        [init("c1", np.float32(2)), init("c2", np.float32(2))],
    )
    result = optimize_with(m, CSE_ONLY)
    assert ops(result.model) == {"Add": 1, "Mul": 1}
    assert len(result.model.graph.initializer) == 1
    assert_same_outputs(m, result.model)


def test_cse_keeps_nodes_that_differ_in_attributes_or_constants():
    m = model(
        [
            helper.make_node("Add", ["x", "c1"], ["a"]),
            helper.make_node("Add", ["x", "c2"], ["b"]),
            helper.make_node("LeakyRelu", ["x"], ["l1"], alpha=0.1),
            helper.make_node("LeakyRelu", ["x"], ["l2"], alpha=0.2),
            helper.make_node("Sum", ["a", "b", "l1", "l2"], ["y"]),
        ],
        [tensor("x", F, [3])],
        [tensor("y", F, [3])],
        [init("c1", np.float32(2)), init("c2", np.float32(3))],
    )
    assert ops(optimize_with(m, CSE_ONLY).model) == {"Add": 2, "LeakyRelu": 2, "Sum": 1}


def test_cse_takes_an_attribute_set_to_its_default_for_an_absent_one():
    # the dynamo exporter writes Reshape {allowzero: 0} beside a bare Reshape of the same target
    m = model(
        [
            helper.make_node("Reshape", ["x", "s"], ["a"]),
            helper.make_node("Reshape", ["x", "s"], ["b"], allowzero=0),
            helper.make_node("Reshape", ["x", "s"], ["c"], allowzero=1),
            helper.make_node("LeakyRelu", ["x"], ["l1"]),
            helper.make_node("LeakyRelu", ["x"], ["l2"], alpha=0.01),
            helper.make_node("LeakyRelu", ["x"], ["l3"], alpha=0.2),
            helper.make_node("Concat", ["a", "b", "c"], ["r"], axis=0),
            helper.make_node("Concat", ["l1", "l2", "l3"], ["l"], axis=0),
        ],
        [tensor("x", F, [2, 3])],
        [tensor("r", F, [9, 2]), tensor("l", F, [6, 3])],
        [init("s", np.array([3, 2], np.int64))],
    )
    result = optimize_with(m, CSE_ONLY)
    assert ops(result.model) == {"Reshape": 2, "LeakyRelu": 2, "Concat": 2}
    assert_same_outputs(m, result.model)


def test_cse_keeps_duplicates_that_are_graph_outputs():
    m = model(
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["x"], ["b"])],
        [tensor("x", F, [3])],
        [tensor("a", F, [3]), tensor("b", F, [3])],
    )
    result = optimize_with(m, CSE_ONLY)
    assert ops(result.model) == {"Relu": 2}
    assert_same_outputs(m, result.model)


def test_cse_never_merges_random_ops():
    m = model(
        [
            helper.make_node("RandomNormal", [], ["a"], shape=[3]),
            helper.make_node("RandomNormal", [], ["b"], shape=[3]),
            helper.make_node("Add", ["a", "b"], ["y"]),
        ],
        [],
        [tensor("y", F, [3])],
    )
    assert ops(optimize_with(m, CSE_ONLY).model) == {"RandomNormal": 2, "Add": 1}


def _constants_model():
    """Constant nodes (one a graph output), Identity nodes of constants (one of an
    initializer a caller may override, one chained, one of a larger weight), and readers."""
    nodes = [
        helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", F, [3], [1.0, 2.0, 3.0])),
        helper.make_node("Constant", [], ["k"], value_floats=[0.5, 0.5, 0.5]),
        helper.make_node("Constant", [], ["out_c"], value_float=2.0),
        helper.make_node("Identity", ["w"], ["w1"]),
        helper.make_node("Identity", ["w1"], ["w2"]),
        helper.make_node("Identity", ["b"], ["b1"]),
        helper.make_node("Identity", ["big"], ["big1"]),
        helper.make_node("MatMul", ["x", "w2"], ["m"]),
        helper.make_node("Add", ["m", "c"], ["a"]),
        helper.make_node("Mul", ["a", "k"], ["p"]),
        helper.make_node("Add", ["p", "b1"], ["q"]),
        helper.make_node("MatMul", ["q", "big1"], ["y"]),
    ]
    return model(
        nodes,
        [tensor("x", F, [2, 3]), tensor("b", F, [3])],
        [tensor("y", F, [2, 4]), tensor("out_c", F, [])],
        [init("w", rand(3, 3)), init("b", rand(3)), init("big", rand(3, 4))],
    )


def _summary(state):
    graph = state.to_model().graph
    return (
        sorted((n.op_type, tuple(n.input), tuple(n.output)) for n in graph.node),
        sorted(t.name for t in graph.initializer),
    )


def test_constants_taken_out_while_loading_give_the_graph_the_builtin_gives():
    from rewriter.graph.model import ModelState
    from rewriter.passes import load_hook
    from rewriter.passes.constant_folding import fold_constants

    m = _constants_model()
    loaded = ModelState(m, on_load=load_hook(["constant_folding"]))
    # c, k, w1, w2, big1; not out_c (a graph output) nor b1 (b is also a graph input)
    assert loaded.removed_on_load == 5
    plain = ModelState(m)
    assert fold_constants(plain, None) == 5
    assert _summary(loaded) == _summary(plain)
    assert fold_constants(loaded, None) == 0  # nothing left for the built-in's first round


def test_a_changed_node_the_shape_fold_removes_is_not_looked_at_again():
    """The fixpoint hands the built-in the nodes rewritten since its last run; its static
    shape fold may remove one of them before the computations are looked at (LLaMA's
    dynamo export without its optimizer: a KeyError)."""
    from rewriter.graph.model import ModelState
    from rewriter.passes.constant_folding import fold_constants

    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Cast", ["s"], ["f"], to=F),
        helper.make_node("Add", ["x", "f"], ["y"]),
    ]
    state = ModelState(model(nodes, [tensor("x", F, [3])], [tensor("y", F, [3])]))
    shape_node = next(n for n in state.view.node_ids() if state.view.node(n).op_type == "Shape")
    assert fold_constants(state, [shape_node]) >= 1
    assert [n.op_type for n in state.to_model().graph.node] == ["Add"]


def test_constants_taken_out_while_loading_respect_the_size_limit():
    from rewriter.graph.model import ModelState
    from rewriter.passes.on_load import take_constants

    big_is_48_bytes = ModelState(_constants_model(), on_load=lambda graph, pool: take_constants(graph, 36, pool))
    loaded = big_is_48_bytes
    assert loaded.removed_on_load == 4
    assert ("Identity", ("big",), ("big1",)) in _summary(loaded)[0]


def test_constants_taken_out_while_loading_count_as_folding():
    m = _constants_model()
    result = optimize_basic(m)
    assert result.report.builtins["constant_folding"] >= 5
    assert ops(result.model)["Constant"] == 1  # out_c is a graph output: its node stays
    assert_same_outputs(m, result.model)


def _equal_constants_model():
    """Equal small constants as initializers and Constant nodes (one a graph output, one
    an initializer a caller may override, one stored as float_data instead of raw bytes),
    a different one, and readers of each."""
    half = np.full(3, 0.5, np.float32)
    nodes = [
        helper.make_node("Constant", [], ["c1"], value=helper.make_tensor("v", F, [3], half.tolist())),
        helper.make_node("Constant", [], ["c2"], value=helper.make_tensor("v", F, [3], half.tobytes(), raw=True)),
        helper.make_node("Constant", [], ["out_c"], value=helper.make_tensor("v", F, [3], half.tolist())),
        helper.make_node("Constant", [], ["other"], value=helper.make_tensor("v", F, [3], [0.5, 0.5, 0.25])),
        helper.make_node("Mul", ["x", "i1"], ["a"]),
        helper.make_node("Mul", ["a", "i2"], ["b"]),
        helper.make_node("Mul", ["b", "c1"], ["c"]),
        helper.make_node("Mul", ["c", "c2"], ["d"]),
        helper.make_node("Mul", ["d", "over"], ["e"]),
        helper.make_node("Mul", ["e", "other"], ["y"]),
    ]
    return model(
        nodes,
        [tensor("x", F, [3]), tensor("over", F, [3])],
        [tensor("y", F, [3]), tensor("out_c", F, [3])],
        [init("i1", half), init("i2", half), init("over", half)],
    )


def test_equal_constants_shared_while_loading_give_the_graph_the_builtins_give():
    from rewriter.graph.model import ModelState
    from rewriter.passes import load_hook
    from rewriter.passes.common_subexpressions import eliminate_common_subexpressions
    from rewriter.passes.constant_folding import fold_constants

    m = _equal_constants_model()
    loaded = ModelState(m, on_load=load_hook(["constant_folding", "common_subexpression_elimination"]))
    plain = ModelState(m)
    fold_constants(plain, None)
    eliminate_common_subexpressions(plain, None)
    assert _summary(loaded) == _summary(plain)
    nodes, initializers = _summary(loaded)
    # i2, c1 and c2 are read as i1; `over` (a graph input too) and `other` (not equal) stay
    assert initializers == ["i1", "other", "over"]
    assert ("Mul", ("c", "i1"), ("d",)) in nodes and ("Mul", ("d", "over"), ("e",)) in nodes
    assert ("Constant", (), ("out_c",)) in nodes  # a graph output keeps its name
    assert eliminate_common_subexpressions(loaded, None) == 0  # nothing left to merge
    result = optimize_basic(m)
    assert_same_outputs(m, result.model)


def test_types_are_known_after_fused_ops_a_model_already_holds():
    """A model optimized before (ours or ONNX Runtime's) holds RotaryEmbedding and the
    ONNX-domain SimplifiedLayerNormalization: values after them must keep their types, or
    every rule that asks for a rank refuses on a second run."""
    from helpers import init, model, tensor
    from onnx import TensorProto, helper

    from rewriter.graph.types import infer_model_types

    f = TensorProto.FLOAT
    nodes = [
        helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["n"], axis=-1, epsilon=1e-6),
        helper.make_node("RotaryEmbedding", ["n", "pos", "cos", "sin"], ["r"], domain="com.microsoft"),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    m = model(
        nodes,
        [tensor("x", f, ["b", 2, "s", 8]), tensor("pos", TensorProto.INT64, [1])],
        [tensor("y", f, None)],
        [
            init("g", np.ones(8, np.float32)),
            init("cos", np.ones((16, 4), np.float32)),
            init("sin", np.zeros((16, 4), np.float32)),
        ],
        domains=["com.microsoft"],
    )
    types = infer_model_types(m)
    for name in ("n", "r", "y"):
        tensor_type = types[name].tensor_type
        assert tensor_type.elem_type == f
        assert [d.dim_param or d.dim_value for d in tensor_type.shape.dim] == ["b", 2, "s", 8]


def constant_if(condition: bool, nested: bool = False, condition_constant: bool = True):
    """y = If(c) then relu(x) * w (w the branch's own constant) else x (an outer value passed
    on), and z reads y; with ``nested`` the taken branch holds an If of its own."""
    then_nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "w"], ["t"])]
    if nested:
        inner = helper.make_graph([helper.make_node("Neg", ["t0"], ["n"])], "inner", [], [tensor("n", F, [2, 3])])
        then_nodes = [
            helper.make_node("Relu", ["x"], ["t0"]),
            helper.make_node("If", ["c2"], ["t"], then_branch=inner, else_branch=inner),
        ]
    then_branch = helper.make_graph(then_nodes, "then", [], [tensor("t", F, [2, 3])], [init("w", rand(3))])
    else_branch = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [], [tensor("e", F, [2, 3])])
    nodes = [
        helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch),
        helper.make_node("Add", ["y", "x"], ["z"]),
    ]
    inits = [init("c2", np.array(True))] + ([init("c", np.array(condition))] if condition_constant else [])
    inputs = [tensor("x", F, [2, 3])] + ([] if condition_constant else [tensor("c", TensorProto.BOOL, [])])
    return model(nodes, inputs, [tensor("y", F, [2, 3]), tensor("z", F, [2, 3])], inits)


def test_an_if_of_a_constant_condition_becomes_the_branch_it_takes():
    for condition, expected in ((True, {"Relu": 1, "Mul": 1, "Add": 1}), (False, {"Identity": 1, "Add": 1})):
        before = constant_if(condition)
        result = optimize_basic(before)
        assert ops(result.model) == expected
        assert [o.name for o in result.model.graph.output] == ["y", "z"]  # the If's output kept its name
        assert result.report.builtins["constant_folding"] >= 1
        assert_same_outputs(before, result.model)


def test_an_if_stays_when_its_condition_is_an_input_or_its_branch_holds_graphs():
    for before in (constant_if(True, condition_constant=False), constant_if(True, nested=True)):
        after = optimize_basic(before).model
        assert ops(after)["If"] == 1
        assert_same_outputs(before, after)
