"""Rules apply inside subgraphs (If branches, Loop bodies, nested), outer values intact."""

from __future__ import annotations

import numpy as np
import onnx
from helpers import assert_same_outputs, init, model, run, tensor
from onnx import TensorProto, helper

import rewriter
from rewriter.onnx_facts.placement import provider_of

F = TensorProto.FLOAT
B = TensorProto.BOOL


def if_model(then_nodes, then_out, else_nodes, else_out, then_inits=()):
    then_branch = helper.make_graph(then_nodes, "then", [], [tensor(then_out, F, [3])], list(then_inits))
    else_branch = helper.make_graph(else_nodes, "else", [], [tensor(else_out, F, [3])])
    return model(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("If", ["cond"], ["y"], then_branch=then_branch, else_branch=else_branch),
        ],
        [tensor("x", F, [3]), tensor("cond", B, [])],
        [tensor("y", F, [3])],
    )


def branches(m: onnx.ModelProto) -> dict[str, list[str]]:
    node = [n for n in m.graph.node if n.op_type == "If"][0]
    return {a.name: [n.op_type for n in a.g.node] for a in node.attribute}


def run_both_branches(before, after):
    for cond in (True, False):
        feeds = {"x": np.array([-1.0, 2.0, 3.0], np.float32), "cond": np.array(cond)}
        np.testing.assert_allclose(run(before, feeds)[0], run(after, feeds)[0])


def test_eliminations_apply_inside_if_branches():
    m = if_model(
        [
            helper.make_node("Identity", ["r"], ["t0"]),
            helper.make_node("Mul", ["t0", "one"], ["t1"]),
            helper.make_node("Neg", ["t1"], ["t"]),
        ],
        "t",
        [helper.make_node("Abs", ["r"], ["e0"]), helper.make_node("Identity", ["e0"], ["e"])],
        "e",
        then_inits=[init("one", np.float32(1.0))],
    )
    result = rewriter.optimize(m, level="basic")
    assert branches(result.model) == {"then_branch": ["Neg"], "else_branch": ["Abs"]}
    assert result.report.applied("IdentityElimination") == 2
    rewriter.check_model(result.model, full_check=True)
    run_both_branches(m, result.model)


def test_a_branch_output_that_is_an_outer_value_keeps_its_copy():
    m = if_model([helper.make_node("Identity", ["r"], ["t"])], "t", [helper.make_node("Neg", ["r"], ["e"])], "e")
    result = rewriter.optimize(m, level="basic")
    assert branches(result.model)["then_branch"] == ["Identity"]
    run_both_branches(m, result.model)


def test_loop_body_is_optimized_and_reads_outer_values():
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["acc_in", "step"], ["a0"]),
            helper.make_node("Identity", ["a0"], ["a1"]),
            helper.make_node("Mul", ["a1", "one"], ["acc_out"]),
        ],
        "body",
        [tensor("i", TensorProto.INT64, []), tensor("cond_in", B, []), tensor("acc_in", F, [3])],
        [tensor("cond_out", B, []), tensor("acc_out", F, [3])],
        [init("one", np.float32(1.0))],
    )
    m = model(
        [helper.make_node("Neg", ["x"], ["step"]), helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body)],
        [tensor("x", F, [3])],
        [tensor("y", F, [3])],
        [init("trips", np.int64(3))],
    )
    result = rewriter.optimize(m, level="basic")
    loop = [n for n in result.model.graph.node if n.op_type == "Loop"][0]
    assert [n.op_type for n in loop.attribute[0].g.node] == ["Identity", "Add"]  # cond copy stays
    rewriter.check_model(result.model, full_check=True)
    assert_same_outputs(m, result.model)


def test_nested_subgraphs_are_optimized_too():
    inner = helper.make_graph(
        [helper.make_node("Identity", ["r"], ["i0"]), helper.make_node("Neg", ["i0"], ["i"])],
        "inner",
        [],
        [tensor("i", F, [3])],
    )
    outer_then = helper.make_graph(
        [helper.make_node("If", ["cond"], ["t"], then_branch=inner, else_branch=inner)],
        "then",
        [],
        [tensor("t", F, [3])],
    )
    m = if_model([], "t", [helper.make_node("Abs", ["r"], ["e"])], "e")
    m.graph.node[1].attribute[0].g.CopyFrom(outer_then) if m.graph.node[1].attribute[
        0
    ].name == "then_branch" else m.graph.node[1].attribute[1].g.CopyFrom(outer_then)
    result = rewriter.optimize(m, level="basic")
    assert "Identity" not in str(result.model.graph)
    rewriter.check_model(result.model, full_check=True)
    run_both_branches(m, result.model)


def test_subgraph_nodes_are_placed_when_partitioning():
    m = if_model([helper.make_node("Neg", ["r"], ["t"])], "t", [helper.make_node("Abs", ["r"], ["e"])], "e")
    result = rewriter.optimize(m, level="extended", providers="CPU")
    node = [n for n in result.model.graph.node if n.op_type == "If"][0]
    for attr in node.attribute:
        assert all(provider_of(n) == "CPUExecutionProvider" for n in attr.g.node)
    run_both_branches(m, result.model)


def _ref_attribute(name: str, kind: int) -> onnx.AttributeProto:
    attr = onnx.AttributeProto()
    attr.name, attr.ref_attr_name, attr.type = name, name, kind
    return attr


def function_model() -> onnx.ModelProto:
    """A model calling a local function whose body has an Identity, a constant, and nodes
    whose attributes are the caller's (``ref_attr_name``)."""
    leaky = helper.make_node("LeakyRelu", ["m"], ["l"])
    leaky.attribute.append(_ref_attribute("alpha", onnx.AttributeProto.FLOAT))
    cast = helper.make_node("Cast", ["l"], ["out"])
    cast.attribute.append(_ref_attribute("to", onnx.AttributeProto.INT))
    body = [
        helper.make_node("Identity", ["a"], ["ai"]),
        helper.make_node("Add", ["ai", "b"], ["s"]),
        helper.make_node("Constant", [], ["two"], value=helper.make_tensor("v", TensorProto.FLOAT, [], [2.0])),
        helper.make_node("Mul", ["s", "two"], ["m"]),
        leaky,
        cast,
    ]
    function = helper.make_function(
        "my.lib", "Block", ["a", "b"], ["out"], body, [helper.make_opsetid("", 17)], attributes=["alpha", "to"]
    )
    call = helper.make_node("Block", ["x", "y"], ["z"], domain="my.lib", alpha=0.2, to=TensorProto.FLOAT)
    graph = helper.make_graph(
        [call, helper.make_node("Identity", ["z"], ["w"])],
        "g",
        [tensor("x", shape=[3]), tensor("y", shape=[3])],
        [tensor("w", shape=[3])],
    )
    m = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.lib", 1)], functions=[function]
    )
    m.ir_version = 10
    return m


def test_model_local_functions_are_optimized_and_stay_valid():
    before = function_model()
    rewriter.check_model(before, full_check=True)
    result = rewriter.optimize(before, level="extended", providers="CPU")
    after = result.model
    rewriter.check_model(after, full_check=True)
    body = [n.op_type for n in after.functions[0].node]
    assert "Identity" not in body and "Identity" not in [n.op_type for n in after.graph.node]
    assert body.count("Cast") == 1 and body.count("LeakyRelu") == 1  # caller's attributes: kept
    assert list(after.functions[0].input) == ["a", "b"] and list(after.functions[0].output) == ["out"]
    assert list(after.functions[0].attribute) == ["alpha", "to"]
    assert_same_outputs(before, after)


def test_every_op_with_graph_attributes_is_looked_into():
    """The view reads attributes only of nodes that may hold subgraphs: no standard op
    whose schema (any version) declares a graph attribute may be left out of that."""
    from onnx import AttributeProto

    from rewriter.graph.subgraphs import may_have_subgraphs
    from rewriter.onnx_facts.schemas import normalize_domain

    with_graphs = {
        (normalize_domain(s.domain), s.name)
        for s in onnx.defs.get_all_schemas_with_history()
        if any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in s.attributes.values())
    }
    assert ("", "If") in with_graphs and ("", "Loop") in with_graphs
    assert all(may_have_subgraphs(domain, op) for domain, op in with_graphs)
    assert not may_have_subgraphs("", "Relu")


def test_shapes_inside_a_branch_read_its_constants():
    """A branch's values are typed node by node; a ReduceMean whose axes (a Constant in the
    branch) onnx must read to know the shape it gives: T5's RMS norm inside optimum's merged
    decoder (an If of the first and the cached step) fused in neither branch before."""

    def rms_norm(prefix: str) -> list[onnx.NodeProto]:
        n = helper.make_node

        def constant(name: str, values, dtype=TensorProto.FLOAT) -> onnx.NodeProto:
            value = helper.make_tensor(f"{prefix}{name}_value", dtype, [len(values)], values)
            return n("Constant", [], [f"{prefix}{name}"], value=value)

        return [
            constant("axes", [-1], TensorProto.INT64),
            constant("two", [2.0]),
            constant("eps", [1e-6]),
            constant("one", [1.0]),
            constant("gamma", [0.5, 1.0, 2.0]),
            n("Pow", ["r", f"{prefix}two"], [f"{prefix}p"]),
            n("ReduceMean", [f"{prefix}p", f"{prefix}axes"], [f"{prefix}v"], keepdims=1),
            n("Add", [f"{prefix}v", f"{prefix}eps"], [f"{prefix}ve"]),
            n("Sqrt", [f"{prefix}ve"], [f"{prefix}s"]),
            n("Div", [f"{prefix}one", f"{prefix}s"], [f"{prefix}i"]),
            n("Mul", ["r", f"{prefix}i"], [f"{prefix}n"]),
            n("Mul", [f"{prefix}gamma", f"{prefix}n"], [f"{prefix}y"]),
        ]

    before = if_model(rms_norm("t"), "ty", rms_norm("e"), "ey")
    before.opset_import[0].version = 18
    after = rewriter.optimize(before, level="extended", providers="CPU").model
    assert branches(after) == {
        "then_branch": ["SimplifiedLayerNormalization"],
        "else_branch": ["SimplifiedLayerNormalization"],
    }
    run_both_branches(before, after)
