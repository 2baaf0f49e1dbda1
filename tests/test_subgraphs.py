"""Rules apply inside subgraphs (If branches, Loop bodies, nested), outer values intact."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

import rewriter
from helpers import assert_same_outputs, init, model, run, tensor
from rewriter.rewrite.propagation import provider_of

F = TensorProto.FLOAT
B = TensorProto.BOOL


def if_model(then_nodes, then_out, else_nodes, else_out, then_inits=()):
    then_branch = helper.make_graph(then_nodes, "then", [], [tensor(then_out, F, [3])], list(then_inits))
    else_branch = helper.make_graph(else_nodes, "else", [], [tensor(else_out, F, [3])])
    return model([helper.make_node("Relu", ["x"], ["r"]),
                  helper.make_node("If", ["cond"], ["y"], then_branch=then_branch, else_branch=else_branch)],
                 [tensor("x", F, [3]), tensor("cond", B, [])], [tensor("y", F, [3])])


def branches(m: onnx.ModelProto) -> dict[str, list[str]]:
    node = [n for n in m.graph.node if n.op_type == "If"][0]
    return {a.name: [n.op_type for n in a.g.node] for a in node.attribute}


def run_both_branches(before, after):
    for cond in (True, False):
        feeds = {"x": np.array([-1.0, 2.0, 3.0], np.float32), "cond": np.array(cond)}
        np.testing.assert_allclose(run(before, feeds)[0], run(after, feeds)[0])


def test_eliminations_apply_inside_if_branches():
    m = if_model([helper.make_node("Identity", ["r"], ["t0"]), helper.make_node("Mul", ["t0", "one"], ["t1"]),
                  helper.make_node("Neg", ["t1"], ["t"])], "t",
                 [helper.make_node("Abs", ["r"], ["e0"]), helper.make_node("Identity", ["e0"], ["e"])], "e",
                 then_inits=[init("one", np.float32(1.0))])
    result = rewriter.optimize(m, level="basic")
    assert branches(result.model) == {"then_branch": ["Neg"], "else_branch": ["Abs"]}
    assert result.report.applied("IdentityElimination") == 2
    onnx.checker.check_model(result.model, full_check=True)
    run_both_branches(m, result.model)


def test_a_branch_output_that_is_an_outer_value_keeps_its_copy():
    m = if_model([helper.make_node("Identity", ["r"], ["t"])], "t",
                 [helper.make_node("Neg", ["r"], ["e"])], "e")
    result = rewriter.optimize(m, level="basic")
    assert branches(result.model)["then_branch"] == ["Identity"]
    run_both_branches(m, result.model)


def test_loop_body_is_optimized_and_reads_outer_values():
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc_in", "step"], ["a0"]),
         helper.make_node("Identity", ["a0"], ["a1"]),
         helper.make_node("Mul", ["a1", "one"], ["acc_out"])],
        "body", [tensor("i", TensorProto.INT64, []), tensor("cond_in", B, []), tensor("acc_in", F, [3])],
        [tensor("cond_out", B, []), tensor("acc_out", F, [3])], [init("one", np.float32(1.0))])
    m = model([helper.make_node("Neg", ["x"], ["step"]),
               helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body)],
              [tensor("x", F, [3])], [tensor("y", F, [3])], [init("trips", np.int64(3))])
    result = rewriter.optimize(m, level="basic")
    loop = [n for n in result.model.graph.node if n.op_type == "Loop"][0]
    assert [n.op_type for n in loop.attribute[0].g.node] == ["Identity", "Add"]  # cond copy stays
    onnx.checker.check_model(result.model, full_check=True)
    assert_same_outputs(m, result.model)


def test_nested_subgraphs_are_optimized_too():
    inner = helper.make_graph([helper.make_node("Identity", ["r"], ["i0"]), helper.make_node("Neg", ["i0"], ["i"])],
                              "inner", [], [tensor("i", F, [3])])
    outer_then = helper.make_graph([helper.make_node("If", ["cond"], ["t"], then_branch=inner, else_branch=inner)],
                                   "then", [], [tensor("t", F, [3])])
    m = if_model([], "t", [helper.make_node("Abs", ["r"], ["e"])], "e")
    m.graph.node[1].attribute[0].g.CopyFrom(outer_then) if m.graph.node[1].attribute[0].name == "then_branch" \
        else m.graph.node[1].attribute[1].g.CopyFrom(outer_then)
    result = rewriter.optimize(m, level="basic")
    assert "Identity" not in str(result.model.graph)
    onnx.checker.check_model(result.model, full_check=True)
    run_both_branches(m, result.model)


def test_subgraph_nodes_are_placed_when_partitioning():
    m = if_model([helper.make_node("Neg", ["r"], ["t"])], "t", [helper.make_node("Abs", ["r"], ["e"])], "e")
    result = rewriter.optimize(m, level="extended", providers="CPU")
    node = [n for n in result.model.graph.node if n.op_type == "If"][0]
    for attr in node.attribute:
        assert all(provider_of(n) == "CPUExecutionProvider" for n in attr.g.node)
    run_both_branches(m, result.model)
