"""The bundled extended pack (level 2), rule by rule, on CPU after partitioning."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from helpers import check_rule, init, model, ops, tensor

F = TensorProto.FLOAT
RNG = np.random.default_rng(3)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def check(before: onnx.ModelProto, rule: str, expect: bool, atol: float = 1e-5) -> onnx.ModelProto:
    return check_rule(before, "extended", rule, expect, "extended", atol)


def gelu_graph(form: str, scale_op: str = "Div", constant: float = 1.4142135, dtype=F, shape=(2, 8)):
    scale = init("k", np.asarray(constant, np.float32))
    nodes = [helper.make_node(scale_op, ["x", "k"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"])]
    if form == "last":
        nodes += [helper.make_node("Mul", ["x", "a"], ["m"]), helper.make_node("Mul", ["m", "half"], ["y"])]
    elif form == "first":
        nodes += [helper.make_node("Mul", ["half", "x"], ["h"]), helper.make_node("Mul", ["h", "a"], ["y"])]
    else:
        nodes += [helper.make_node("Mul", ["a", "half"], ["h"]), helper.make_node("Mul", ["x", "h"], ["y"])]
    return model(nodes, [tensor("x", dtype, list(shape))], [tensor("y", dtype, list(shape))],
                 [scale, init("one", np.float32(1.0)), init("half", np.float32(0.5))])


@pytest.mark.parametrize("form, rule", [("last", "GeluErf"), ("first", "GeluErfHalfFirst"),
                                        ("inside", "GeluErfHalfInside")])
@pytest.mark.parametrize("scale_op, constant", [("Div", 1.4142135), ("Mul", 0.70710678)])
def test_gelu_erf_forms(form, rule, scale_op, constant):
    after = check(gelu_graph(form, scale_op, constant), rule, True)
    assert ops(after) == {"Gelu": 1}


def test_gelu_refuses_a_wrong_constant():
    check(gelu_graph("last", "Div", 1.5), "GeluErf", False)


def test_bias_gelu_fusion():
    m = model([helper.make_node("Add", ["x", "bias"], ["s"]), helper.make_node("Gelu", ["s"], ["y"], domain="com.microsoft")],
              [tensor("x", F, ["batch", 8])], [tensor("y", F, ["batch", 8])], [init("bias", rand(8))],
              domains=["com.microsoft"])
    after = check(m, "BiasGeluFusion", True)
    assert ops(after) == {"BiasGelu": 1}


def test_bias_gelu_refuses_a_bias_along_another_axis():
    m = model([helper.make_node("Add", ["x", "bias"], ["s"]), helper.make_node("Gelu", ["s"], ["y"], domain="com.microsoft")],
              [tensor("x", F, [8, 8])], [tensor("y", F, [8, 8])], [init("bias", rand(8, 1))],
              domains=["com.microsoft"])
    check(m, "BiasGeluFusion", False)


def skip_ln(extra_use=False, b_shape=(2, 4, 8), axis=-1):
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]),
             helper.make_node("LayerNormalization", ["s", "gamma", "beta"], ["y"], axis=axis, epsilon=1e-5)]
    outputs = [tensor("y", F, [2, 4, 8])]
    if extra_use:
        nodes.append(helper.make_node("Neg", ["s"], ["z"]))
        outputs.append(tensor("z", F, [2, 4, 8]))
    return model(nodes, [tensor("a", F, [2, 4, 8]), tensor("b", F, list(b_shape))], outputs,
                 [init("gamma", rand(8)), init("beta", rand(8))])


@pytest.mark.parametrize("axis", [-1, 2])
def test_skip_layer_norm_fusion(axis):
    after = check(skip_ln(axis=axis), "SkipLayerNormFusion", True, atol=1e-4)
    assert ops(after) == {"SkipLayerNormalization": 1}


def test_skip_layer_norm_fusion_keeps_a_shared_sum_through_its_fourth_output():
    after = check(skip_ln(extra_use=True), "SkipLayerNormFusionSharedSum", True, atol=1e-4)
    assert ops(after) == {"SkipLayerNormalization": 1, "Neg": 1}


def test_skip_layer_norm_refuses_broadcasting_and_other_axes():
    check(skip_ln(b_shape=(1, 4, 8)), "SkipLayerNormFusion", False)
    check(skip_ln(axis=1), "SkipLayerNormFusion", False)


@pytest.mark.parametrize("op, rule", [("Div", "MatMulDivFusion"), ("Mul", "MatMulScaleFusion")])
def test_matmul_scale_fusion(op, rule):
    m = model([helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node(op, ["m", "c"], ["y"])],
              [tensor("a", F, [2, 3, 4]), tensor("b", F, [2, 4, 5])], [tensor("y", F, [2, 3, 5])],
              [init("c", np.float32(8.0))])
    after = check(m, rule, True)
    assert ops(after) == {"FusedMatMul": 1}


def test_matmul_scale_fusion_refuses_a_tensor_scale():
    m = model([helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("Div", ["m", "c"], ["y"])],
              [tensor("a", F, [3, 4]), tensor("b", F, [4, 5])], [tensor("y", F, [3, 5])], [init("c", rand(5) + 3)])
    check(m, "MatMulDivFusion", False)


def test_fused_matmul_absorbs_a_further_division():
    m = model([helper.make_node("FusedMatMul", ["a", "b"], ["m"], domain="com.microsoft", alpha=2.0, transB=1),
               helper.make_node("Div", ["m", "c"], ["y"])],
              [tensor("a", F, [3, 4]), tensor("b", F, [5, 4])], [tensor("y", F, [3, 5])], [init("c", np.float32(4.0))],
              domains=["com.microsoft"])
    after = check(m, "FusedMatMulDivFusion", True)
    attrs = {a.name: helper.get_attribute_value(a) for a in after.graph.node[0].attribute}
    assert attrs == {"alpha": 0.5, "transB": 1}


@pytest.mark.parametrize("c_shape", [[5], [1, 5], [3, 5], [3, 1], []])
def test_matmul_add_fusion_to_gemm(c_shape):
    m = model([helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("Add", ["m", "c"], ["y"])],
              [tensor("a", F, [3, 4])], [tensor("y", F, [3, 5])], [init("b", rand(4, 5)), init("c", rand(*c_shape))])
    after = check(m, "MatMulAddFusion", True)
    assert ops(after) == {"Gemm": 1}


def test_matmul_add_refuses_batched_and_broadcasting_addends():
    batched = model([helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("Add", ["m", "c"], ["y"])],
                    [tensor("a", F, [2, 3, 4])], [tensor("y", F, [2, 3, 5])], [init("b", rand(4, 5)), init("c", rand(5))])
    check(batched, "MatMulAddFusion", False)
    wider = model([helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("Add", ["m", "c"], ["y"])],
                  [tensor("a", F, [1, 4])], [tensor("y", F, [3, 5])], [init("b", rand(4, 5)), init("c", rand(3, 5))])
    check(wider, "MatMulAddFusion", False)


def test_extended_rules_do_not_run_on_providers_they_do_not_name():
    import dataclasses

    import rewriter
    from helpers import only

    m = gelu_graph("last")
    cuda_only = dataclasses.replace(only("extended", "GeluErf"), providers=("CUDAExecutionProvider",))
    on_cpu = rewriter.optimize(m, level="extended", rules=[cuda_only], bundled=False, providers="CPU")
    assert on_cpu.report.applied("GeluErf") == 0
    on_cuda = rewriter.optimize(m, level="extended", rules=[cuda_only], bundled=False, providers="CUDA")
    assert on_cuda.report.applied("GeluErf") == 1
    assert {n.op_type for n in on_cuda.model.graph.node} == {"Gelu"}
