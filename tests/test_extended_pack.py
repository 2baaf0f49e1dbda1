"""The bundled extended pack (level 2), rule by rule, on CPU after partitioning."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import assert_same_outputs, check_rule, init, model, ops, run, tensor
from onnx import TensorProto, helper

import rewriter

F = TensorProto.FLOAT
RNG = np.random.default_rng(3)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def check(before: onnx.ModelProto, rule: str, expect: bool, atol: float = 1e-5, **options) -> onnx.ModelProto:
    return check_rule(before, "extended", rule, expect, "extended", atol, **options)


def gelu_graph(form: str, scale_op: str = "Div", constant: float = 1.4142135, dtype=F, shape=(2, 8)):
    scale = init("k", np.asarray(constant, np.float32))
    nodes = [
        helper.make_node(scale_op, ["x", "k"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["a"]),
    ]
    if form == "last":
        nodes += [helper.make_node("Mul", ["x", "a"], ["m"]), helper.make_node("Mul", ["m", "half"], ["y"])]
    elif form == "first":
        nodes += [helper.make_node("Mul", ["half", "x"], ["h"]), helper.make_node("Mul", ["h", "a"], ["y"])]
    else:
        nodes += [helper.make_node("Mul", ["a", "half"], ["h"]), helper.make_node("Mul", ["x", "h"], ["y"])]
    return model(
        nodes,
        [tensor("x", dtype, list(shape))],
        [tensor("y", dtype, list(shape))],
        [scale, init("one", np.float32(1.0)), init("half", np.float32(0.5))],
    )


@pytest.mark.parametrize(
    "form, rule", [("last", "GeluErf"), ("first", "GeluErfHalfFirst"), ("inside", "GeluErfHalfInside")]
)
@pytest.mark.parametrize("scale_op, constant", [("Div", 1.4142135), ("Mul", 0.70710678)])
def test_gelu_erf_forms(form, rule, scale_op, constant):
    after = check(gelu_graph(form, scale_op, constant), rule, True)
    assert ops(after) == {"Gelu": 1}


def test_gelu_refuses_a_wrong_constant():
    check(gelu_graph("last", "Div", 1.5), "GeluErf", False)


def test_bias_gelu_fusion():
    m = model(
        [helper.make_node("Add", ["x", "bias"], ["s"]), helper.make_node("Gelu", ["s"], ["y"], domain="com.microsoft")],
        [tensor("x", F, ["batch", 8])],
        [tensor("y", F, ["batch", 8])],
        [init("bias", rand(8))],
        domains=["com.microsoft"],
    )
    after = check(m, "BiasGeluFusion", True)
    assert ops(after) == {"BiasGelu": 1}


def test_bias_gelu_refuses_a_bias_along_another_axis():
    m = model(
        [helper.make_node("Add", ["x", "bias"], ["s"]), helper.make_node("Gelu", ["s"], ["y"], domain="com.microsoft")],
        [tensor("x", F, [8, 8])],
        [tensor("y", F, [8, 8])],
        [init("bias", rand(8, 1))],
        domains=["com.microsoft"],
    )
    check(m, "BiasGeluFusion", False)


def skip_ln(extra_use=False, b_shape=(2, 4, 8), axis=-1):
    nodes = [
        helper.make_node("Add", ["a", "b"], ["s"]),
        helper.make_node("LayerNormalization", ["s", "gamma", "beta"], ["y"], axis=axis, epsilon=1e-5),
    ]
    outputs = [tensor("y", F, [2, 4, 8])]
    if extra_use:
        nodes.append(helper.make_node("Neg", ["s"], ["z"]))
        outputs.append(tensor("z", F, [2, 4, 8]))
    return model(
        nodes,
        [tensor("a", F, [2, 4, 8]), tensor("b", F, list(b_shape))],
        outputs,
        [init("gamma", rand(8)), init("beta", rand(8))],
    )


@pytest.mark.parametrize("axis", [-1, 2])
def test_skip_layer_norm_fusion(axis):
    after = check(skip_ln(axis=axis), "SkipLayerNormFusion", True, atol=1e-4, providers="CUDA")
    assert ops(after) == {"SkipLayerNormalization": 1}


def test_skip_layer_norm_is_split_back_by_the_cpu_layout_level():
    # extended fuses it on the CPU too (as every peer does); onnxruntime's CPU
    # SkipLayerNormalization is slower than Add + LayerNormalization, so level 3 splits it
    assert ops(check(skip_ln(), "SkipLayerNormFusion", True)) == {"SkipLayerNormalization": 1}
    before = skip_ln()
    after = rewriter.optimize(before, level="all", layout_may_grow=True).model
    assert ops(after) == {"Add": 1, "LayerNormalization": 1}
    assert_same_outputs(before, after, atol=1e-5)


def test_skip_layer_norm_fusion_keeps_a_shared_sum_through_its_fourth_output():
    after = check(skip_ln(extra_use=True), "SkipLayerNormFusionSharedSum", True, atol=1e-4, providers="CUDA")
    assert ops(after) == {"SkipLayerNormalization": 1, "Neg": 1}


def test_skip_layer_norm_refuses_broadcasting_and_other_axes():
    # the kernel's skip may broadcast over the batch only ([1, S, H]: tests/test_skip_broadcast.py)
    check(skip_ln(b_shape=(2, 1, 8)), "SkipLayerNormFusion", False, providers="CUDA")
    check(skip_ln(b_shape=(1, 1, 8)), "SkipLayerNormFusion", False, providers="CUDA")
    check(skip_ln(axis=1), "SkipLayerNormFusion", False, providers="CUDA")


@pytest.mark.parametrize("op, rule", [("Div", "MatMulDivFusion"), ("Mul", "MatMulScaleFusion")])
def test_matmul_scale_fusion(op, rule):
    m = model(
        [helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node(op, ["m", "c"], ["y"])],
        [tensor("a", F, [2, 3, 4]), tensor("b", F, [2, 4, 5])],
        [tensor("y", F, [2, 3, 5])],
        [init("c", np.float32(8.0))],
    )
    after = check(m, rule, True)
    assert ops(after) == {"FusedMatMul": 1}


def test_matmul_scale_fusion_refuses_a_tensor_scale():
    m = model(
        [helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("Div", ["m", "c"], ["y"])],
        [tensor("a", F, [3, 4]), tensor("b", F, [4, 5])],
        [tensor("y", F, [3, 5])],
        [init("c", rand(5) + 3)],
    )
    check(m, "MatMulDivFusion", False)


def test_fused_matmul_absorbs_a_further_division():
    m = model(
        [
            helper.make_node("FusedMatMul", ["a", "b"], ["m"], domain="com.microsoft", alpha=2.0, transB=1),
            helper.make_node("Div", ["m", "c"], ["y"]),
        ],
        [tensor("a", F, [3, 4]), tensor("b", F, [5, 4])],
        [tensor("y", F, [3, 5])],
        [init("c", np.float32(4.0))],
        domains=["com.microsoft"],
    )
    after = check(m, "FusedMatMulDivFusion", True)
    attrs = {a.name: helper.get_attribute_value(a) for a in after.graph.node[0].attribute}
    assert attrs == {"alpha": 0.5, "transB": 1}


@pytest.mark.parametrize("c_shape", [[5], [1, 5], [3, 5], [3, 1], []])
def test_matmul_add_fusion_to_gemm(c_shape):
    m = model(
        [helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("Add", ["m", "c"], ["y"])],
        [tensor("a", F, [3, 4])],
        [tensor("y", F, [3, 5])],
        [init("b", rand(4, 5)), init("c", rand(*c_shape))],
    )
    after = check(m, "MatMulAddFusion", True)
    assert ops(after) == {"Gemm": 1}


def test_matmul_add_refuses_batched_and_broadcasting_addends():
    batched = model(
        [helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("Add", ["m", "c"], ["y"])],
        [tensor("a", F, [2, 3, 4])],
        [tensor("y", F, [2, 3, 5])],
        [init("b", rand(4, 5)), init("c", rand(5))],
    )
    check(batched, "MatMulAddFusion", False)
    wider = model(
        [helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("Add", ["m", "c"], ["y"])],
        [tensor("a", F, [1, 4])],
        [tensor("y", F, [3, 5])],
        [init("b", rand(4, 5)), init("c", rand(3, 5))],
    )
    check(wider, "MatMulAddFusion", False)


def test_extended_rules_do_not_run_on_providers_they_do_not_name():
    import dataclasses

    from helpers import only

    import rewriter

    m = gelu_graph("last")
    cuda_only = dataclasses.replace(only("extended", "GeluErf"), providers=("CUDAExecutionProvider",))
    on_cpu = rewriter.optimize(m, level="extended", rules=[cuda_only], bundled=False, providers="CPU")
    assert on_cpu.report.applied("GeluErf") == 0
    on_cuda = rewriter.optimize(m, level="extended", rules=[cuda_only], bundled=False, providers="CUDA")
    assert on_cuda.report.applied("GeluErf") == 1
    assert {n.op_type for n in on_cuda.model.graph.node} == {"Gelu"}


def conv_then(nodes, inits=(), opset=17, z_shape=None):
    inputs = [tensor("x", F, [1, 3, 6, 6])]
    if z_shape is not None:
        inputs.append(tensor("z", F, z_shape))
    return model(
        [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1])] + nodes,
        inputs,
        [tensor("y", F, [1, 4, 6, 6])],
        [init("W", rand(4, 3, 3, 3)), init("B", rand(4)), *inits],
        opset=opset,
    )


@pytest.mark.parametrize("activation", ["Relu", "Sigmoid", "Tanh"])
def test_conv_activation_fusion(activation):
    after = check(conv_then([helper.make_node(activation, ["c"], ["y"])]), "ConvActivationFusion", True)
    (node,) = after.graph.node
    assert node.op_type == "FusedConv"
    assert helper.get_attribute_value([a for a in node.attribute if a.name == "activation"][0]) == activation.encode()
    assert [helper.get_attribute_value(a) for a in node.attribute if a.name == "pads"] == [[1, 1, 1, 1]]


def test_conv_hard_sigmoid_is_fused_conv_with_alpha_and_beta():
    """MobileNetV3's squeeze-excitation gate (Conv then HardSigmoid)."""
    node = helper.make_node("HardSigmoid", ["c"], ["y"], alpha=1 / 6, beta=0.5)
    after = check(conv_then([node]), "ConvHardSigmoidFusion", True)
    assert ops(after) == {"FusedConv": 1}
    attrs = {a.name: helper.get_attribute_value(a) for a in after.graph.node[0].attribute}
    assert attrs["activation"] == b"HardSigmoid" and np.allclose(attrs["activation_params"], [1 / 6, 0.5])


def test_conv_leaky_relu_and_clip_fusions_carry_their_parameters():
    after = check(conv_then([helper.make_node("LeakyRelu", ["c"], ["y"], alpha=0.2)]), "ConvLeakyReluFusion", True)
    params = [helper.get_attribute_value(a) for a in after.graph.node[0].attribute if a.name == "activation_params"]
    assert np.allclose(params, [[0.2]])
    clip = conv_then(
        [helper.make_node("Clip", ["c", "lo", "hi"], ["y"])], [init("lo", np.float32(0)), init("hi", np.float32(6))]
    )
    check(clip, "ConvClipFusion", True)


def test_conv_add_relu_fusion_takes_a_same_shape_residual():
    m = conv_then(
        [helper.make_node("Add", ["c", "z"], ["s"]), helper.make_node("Relu", ["s"], ["y"])], z_shape=[1, 4, 6, 6]
    )
    after = check(m, "ConvAddReluFusion", True)
    assert [n.op_type for n in after.graph.node] == ["FusedConv"] and len(after.graph.node[0].input) == 4


def test_conv_add_relu_fusion_refuses_a_broadcasting_addend():
    m = conv_then(
        [helper.make_node("Add", ["c", "z"], ["s"]), helper.make_node("Relu", ["s"], ["y"])], z_shape=[1, 4, 1, 1]
    )
    check(m, "ConvAddReluFusion", False)


def fast_gelu_graph(k1=0.044715):
    nodes = [
        helper.make_node("Pow", ["x", "three"], ["p"]),
        helper.make_node("Mul", ["p", "k1"], ["q"]),
        helper.make_node("Add", ["x", "q"], ["s"]),
        helper.make_node("Mul", ["s", "k2"], ["u"]),
        helper.make_node("Tanh", ["u"], ["h"]),
        helper.make_node("Add", ["h", "one"], ["a"]),
        helper.make_node("Mul", ["x", "half"], ["xh"]),
        helper.make_node("Mul", ["xh", "a"], ["y"]),
    ]
    consts = {"three": 3.0, "k1": k1, "k2": 0.7978845608, "one": 1.0, "half": 0.5}
    return model(
        nodes, [tensor("x", F, [2, 8])], [tensor("y", F, [2, 8])], [init(k, np.float32(v)) for k, v in consts.items()]
    )


def test_fast_gelu_fusion():
    after = check(fast_gelu_graph(), "FastGeluTanh", True, atol=1e-4)
    assert ops(after) == {"FastGelu": 1}
    check(fast_gelu_graph(k1=0.05), "FastGeluTanh", False)


def test_quick_gelu_fusion_carries_alpha():
    m = model(
        [
            helper.make_node("Mul", ["x", "k"], ["kx"]),
            helper.make_node("Sigmoid", ["kx"], ["g"]),
            helper.make_node("Mul", ["x", "g"], ["y"]),
        ],
        [tensor("x", F, [2, 8])],
        [tensor("y", F, [2, 8])],
        [init("k", np.float32(1.702))],
    )
    after = check(m, "QuickGeluFusion", True)
    assert np.isclose(helper.get_attribute_value(after.graph.node[0].attribute[0]), 1.702)


def test_silu_is_quick_gelu_with_alpha_one():
    m = model(
        [helper.make_node("Sigmoid", ["x"], ["g"]), helper.make_node("Mul", ["x", "g"], ["y"])],
        [tensor("x", F, [2, 8])],
        [tensor("y", F, [2, 8])],
    )
    after = check(m, "SiluFusion", True)
    assert ops(after) == {"QuickGelu": 1}
    assert helper.get_attribute_value(after.graph.node[0].attribute[0]) == 1.0
    # x * sigmoid(z) of another value is no SiLU
    other = model(
        [helper.make_node("Sigmoid", ["z"], ["g"]), helper.make_node("Mul", ["x", "g"], ["y"])],
        [tensor("x", F, [2, 8]), tensor("z", F, [2, 8])],
        [tensor("y", F, [2, 8])],
    )
    check(other, "SiluFusion", False)


def decomposed_layer_norm(opset=17, axes=(-1,), residual=False, eps=1e-5, shape=(2, 4, 8), params=(8,)):
    """(x - mean) / sqrt(var + eps) * gamma + beta over ``axes`` of x ``shape`` (gamma and
    beta of shape ``params``); residual: x = a + b."""
    x = "x"
    nodes = []
    if residual:
        nodes.append(helper.make_node("Add", ["a", "b"], ["x"]))
    if opset >= 18:  # axes became an input
        nodes += [
            helper.make_node("ReduceMean", [x, "axes"], ["m"]),
            helper.make_node("Sub", [x, "m"], ["d"]),
            helper.make_node("Pow", ["d", "two"], ["p"]),
            helper.make_node("ReduceMean", ["p", "axes"], ["v"]),
        ]
    else:
        nodes += [
            helper.make_node("ReduceMean", [x], ["m"], axes=list(axes)),
            helper.make_node("Sub", [x, "m"], ["d"]),
            helper.make_node("Pow", ["d", "two"], ["p"]),
            helper.make_node("ReduceMean", ["p"], ["v"], axes=list(axes)),
        ]
    nodes += [
        helper.make_node("Add", ["v", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["s"]),
        helper.make_node("Div", ["d", "s"], ["n"]),
        helper.make_node("Mul", ["n", "gamma"], ["g"]),
        helper.make_node("Add", ["g", "beta"], ["y"]),
    ]
    inputs = [tensor("a", F, list(shape)), tensor("b", F, list(shape))] if residual else [tensor("x", F, list(shape))]
    return model(
        nodes,
        inputs,
        [tensor("y", F, list(shape))],
        [init("two", np.float32(2)), init("eps", np.float32(eps))]
        + [init("gamma", rand(*params)), init("beta", rand(*params))]
        + ([init("axes", np.array(axes, np.int64))] if opset >= 18 else []),
        opset=opset,
    )


@pytest.mark.parametrize("opset", [17, 18])
def test_decomposed_layer_norm_fusion_from_opset_17(opset):
    after = check(decomposed_layer_norm(opset=opset), "LayerNormDecomposed", True, atol=1e-4)
    assert ops(after) == {"LayerNormalization": 1}
    check(decomposed_layer_norm(opset=opset, axes=(1,)), "LayerNormDecomposed", False)


def test_decomposed_layer_norm_refuses_another_axis():
    check(decomposed_layer_norm(axes=(1,)), "LayerNormDecomposed", False)


@pytest.mark.parametrize("opset", [14, 17, 18])
def test_a_layer_norm_over_the_channels_is_one_over_the_last_axis_between_transposes(opset):
    """LayerNorm2d (ConvNeXt, ViTDet): the channels of NCHW normalized, gamma [C, 1, 1]."""
    over_channels = decomposed_layer_norm(opset=opset, axes=(1,), shape=(2, 6, 3, 5), params=(6, 1, 1))
    after = check(over_channels, "LayerNormChannelsFirstDecomposed", True, atol=1e-4)
    assert ops(after) == {"Transpose": 2, "LayerNormalization": 1}
    along_width = decomposed_layer_norm(opset=opset, axes=(1,), shape=(2, 6, 3, 6), params=(1, 1, 6))
    check(along_width, "LayerNormChannelsFirstDecomposed", False)
    over_rows = decomposed_layer_norm(opset=opset, axes=(2,), shape=(2, 6, 6, 5), params=(6, 1, 1))
    check(over_rows, "LayerNormChannelsFirstDecomposed", False)


def test_decomposed_layer_norm_before_opset_17_is_onnxruntimes_layer_norm():
    after = check(decomposed_layer_norm(opset=14), "LayerNormDecomposed", True, atol=1e-4)
    assert ops(after) == {"LayerNormalization": 1}
    rewriter.check_model(after, full_check=True)  # (onnx's checker alone: no LayerNormalization at 14)


def test_decomposed_layer_norm_over_a_residual_becomes_skip_layer_norm_at_any_opset():
    after = check(
        decomposed_layer_norm(opset=14, residual=True), "SkipLayerNormDecomposed", True, atol=1e-4, providers="CUDA"
    )
    assert ops(after) == {"SkipLayerNormalization": 1}
    check(decomposed_layer_norm(opset=14, residual=True, eps=-0.1), "SkipLayerNormDecomposed", False, providers="CUDA")


def attention_graph(softmax_axis=-1, heads=2, head_size=4, beside: bool = False, mask_rows: int = 3):
    """Self-attention over per-head reshapes of q, k, v; beside: its heads concatenated with
    other heads before the merge (as ConvBERT puts its convolution's heads beside them)."""
    hidden = heads * head_size
    split = np.array([2, 3, heads, head_size], np.int64)
    nodes = []
    for name, perm in (("q", (0, 2, 1, 3)), ("k", (0, 2, 3, 1)), ("v", (0, 2, 1, 3))):
        nodes += [
            helper.make_node("Reshape", [name, "split"], [f"{name}r"]),
            helper.make_node("Transpose", [f"{name}r"], [f"{name}t"], perm=list(perm)),
        ]
    nodes += [
        helper.make_node("FusedMatMul", ["qt", "kt"], ["s"], domain="com.microsoft", alpha=0.5),
        helper.make_node("Add", ["s", "mask"], ["a"]),
        helper.make_node("Softmax", ["a"], ["p"], axis=softmax_axis),
        helper.make_node("MatMul", ["p", "vt"], ["o"]),
        helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
    ]
    inputs = [tensor(n, F, [2, 3, hidden]) for n in "qkv"] + [tensor("mask", F, [2, 1, mask_rows, 3])]
    if beside:
        nodes.append(helper.make_node("Concat", ["ot", "other"], ["both"], axis=2))
        inputs.append(tensor("other", F, [2, 3, heads, head_size]))
        hidden *= 2
    nodes.append(helper.make_node("Reshape", ["both" if beside else "ot", "merge"], ["y"]))
    return model(
        nodes,
        inputs,
        [tensor("y", F, [2, 3, hidden])],
        [init("split", split), init("merge", np.array([2, 3, hidden], np.int64))],
        domains=["com.microsoft"],
    )


def test_multi_head_attention_fusion():
    after = check(attention_graph(), "MultiHeadAttentionFusion", True, atol=1e-4)
    (node,) = after.graph.node
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert node.op_type == "MultiHeadAttention" and attrs["num_heads"] == 2 and np.isclose(attrs["scale"], 0.5)


def test_multi_head_attention_refuses_softmax_over_another_axis():
    check(attention_graph(softmax_axis=2), "MultiHeadAttentionFusion", False)


def test_multi_head_attention_with_one_mask_row_for_every_query():
    """BERT's classic (1 - mask[:, None, None, :]) * min: the kernel wants a row per query."""
    after = check(attention_graph(mask_rows=1), "MultiHeadAttentionRowMaskFusion", True, atol=1e-4)
    assert ops(after)["MultiHeadAttention"] == 1 and ops(after)["Expand"] == 1
    check(attention_graph(mask_rows=1, softmax_axis=2), "MultiHeadAttentionRowMaskFusion", False)


def test_multi_head_attention_with_its_heads_left_split():
    after = check(attention_graph(beside=True), "MultiHeadAttentionSplitOutputFusion", True, atol=1e-4)
    assert ops(after) == {"MultiHeadAttention": 1, "Reshape": 2, "Concat": 1}
    check(attention_graph(softmax_axis=2, beside=True), "MultiHeadAttentionSplitOutputFusion", False)
    merged = rewriter.optimize(attention_graph(), level="extended").report
    assert merged.applied("MultiHeadAttentionFusion") == 1  # tried first where the heads merge
    assert merged.applied("MultiHeadAttentionSplitOutputFusion") == 0


def projected_attention_graph(mask=True, cross=False):
    """BERT-style self-attention from one input x: q, k, v = x @ W + b, per-head reshapes."""
    hidden, heads = 8, 2
    nodes, inits = [], []
    for name in "qkv":
        source = "x2" if cross and name != "q" else "x"
        nodes += [
            helper.make_node("MatMul", [source, f"w{name}"], [f"{name}m"]),
            helper.make_node("Add", [f"b{name}", f"{name}m"], [name]),
        ]
        inits += [init(f"w{name}", rand(hidden, hidden)), init(f"b{name}", rand(hidden))]
    base = attention_graph(heads=heads, head_size=hidden // heads)
    nodes += list(base.graph.node)
    if not mask:
        nodes = [n for n in nodes if n.op_type != "Add" or n.input[1] != "mask"]
        softmax = next(n for n in nodes if n.op_type == "Softmax")
        softmax.input[0] = "s"
    inputs = (
        [tensor("x", F, [2, 3, hidden])]
        + ([tensor("x2", F, [2, 3, hidden])] if cross else [])
        + ([tensor("mask", F, [2, 1, 3, 3])] if mask else [])
    )
    return model(
        nodes, inputs, [tensor("y", F, [2, 3, hidden])], list(base.graph.initializer) + inits, domains=["com.microsoft"]
    )


def test_attention_fusion_packs_the_projections():
    after = rewriter_extended(projected_attention_graph())
    (node,) = after.graph.node
    weights = {i.name: onnx.numpy_helper.to_array(i) for i in after.graph.initializer}
    assert node.op_type == "Attention" and weights[node.input[1]].shape == (8, 24)
    assert weights[node.input[2]].shape == (24,) and node.input[5] == "mask"


def test_attention_fusion_refuses_cross_attention():
    after = rewriter_extended(projected_attention_graph(cross=True))
    assert ops(after)["MultiHeadAttention"] == 1 and ops(after)["Attention"] == 0


def cross_attention_graph(key_bias: bool = True, decoder_length: int = 3, encoder_length: int = 5):
    """A decoder's cross-attention as BART (key_bias) and Whisper (keys without a bias) write
    it: q from the decoder's x, k and v from the encoder's states e (another length), q
    scaled before its head split, per-head reshapes copying batch and length (0s)."""
    hidden, n = 8, helper.make_node
    nodes, inits = [], [init("split", np.array([0, 0, -1, 4], np.int64)), init("merge", np.array([0, 0, -1], np.int64))]
    for name, source in (("q", "x"), ("k", "e"), ("v", "e")):
        biased = key_bias or name != "k"
        nodes.append(n("MatMul", [source, f"w{name}"], [f"{name}m" if biased else name]))
        inits.append(init(f"w{name}", rand(hidden, hidden)))
        if biased:
            nodes.append(n("Add", [f"{name}m", f"b{name}"], [name]))
            inits.append(init(f"b{name}", rand(hidden)))
    nodes += [n("Mul", ["q", "c"], ["qs"])]
    inits.append(init("c", np.array(0.5, np.float32)))
    for name, source, perm in (("q", "qs", (0, 2, 1, 3)), ("k", "k", (0, 2, 3, 1)), ("v", "v", (0, 2, 1, 3))):
        nodes += [n("Reshape", [source, "split"], [f"{name}r"]), n("Transpose", [f"{name}r"], [f"{name}t"], perm=perm)]
    nodes += [
        n("MatMul", ["qt", "kt"], ["s"]),
        n("Softmax", ["s"], ["p"], axis=-1),
        n("MatMul", ["p", "vt"], ["o"]),
        n("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
        n("Reshape", ["ot", "merge"], ["y"]),
    ]
    inputs = [tensor("x", F, ["B", decoder_length, hidden]), tensor("e", F, ["B", encoder_length, hidden])]
    return model(nodes, inputs, [tensor("y", F, ["B", decoder_length, hidden])], inits)


@pytest.mark.parametrize("key_bias", [True, False])
def test_cross_attention_fuses_with_its_biases_packed(key_bias):
    before = cross_attention_graph(key_bias)
    result = rewriter.optimize(before, level="extended")
    assert ops(result.model) == {"MatMul": 3, "MultiHeadAttention": 1}
    assert result.report.applied("MultiHeadAttentionScaledQNoMaskFusion") == 1
    assert (
        result.report.applied("MultiHeadAttentionBiasFusion" if key_bias else "MultiHeadAttentionNoKeyBiasFusion") == 1
    )
    assert_same_outputs(before, result.model, atol=1e-4)


def test_attention_without_mask_fuses():
    check(projected_attention_graph(mask=False), "MultiHeadAttentionNoMaskFusion", True, atol=1e-4)
    assert ops(rewriter_extended(projected_attention_graph(mask=False))) == {"Attention": 1}


def rewriter_extended(before: onnx.ModelProto) -> onnx.ModelProto:
    from helpers import assert_same_outputs

    import rewriter

    after = rewriter.optimize(before, level="extended", providers="CPU").model
    assert_same_outputs(before, after, atol=1e-4)
    rewriter.check_model(after, full_check=True)
    return after


def nan_guard_graph(low: float):
    nodes = [
        helper.make_node("Where", ["c", "zero", "low"], ["mask"]),
        helper.make_node("Add", ["s", "mask"], ["a"]),
        helper.make_node("Softmax", ["a"], ["p"], axis=-1),
        helper.make_node("IsNaN", ["p"], ["n"]),
        helper.make_node("Where", ["n", "zero", "p"], ["y"]),
    ]
    return model(
        nodes,
        [tensor("s", F, [2, 2, 3, 3]), tensor("c", TensorProto.BOOL, [2, 1, 1, 3])],
        [tensor("y", F, [2, 2, 3, 3])],
        [init("zero", np.float32(0.0)), init("low", np.float32(low))],
    )


def test_softmax_nan_guard_goes_with_a_finite_mask_only():
    after = check(nan_guard_graph(-10000.0), "SoftmaxNanGuardElimination", True)
    assert "IsNaN" not in ops(after)
    # float32's lowest value (the dynamo exporter's mask): still finite, no row is NaN for
    # scores below 1e31 in magnitude
    check(nan_guard_graph(float(np.finfo(np.float32).min)), "SoftmaxNanGuardElimination", True)
    # with -inf or NaN a fully masked row is NaN and the guard makes it 0: it must stay
    check(nan_guard_graph(-np.inf), "SoftmaxNanGuardElimination", False)
    check(nan_guard_graph(np.nan), "SoftmaxNanGuardElimination", False)


def guarded_attention_graph(low: float = -np.inf, opset: int = 17):
    """BERT-style attention as TorchScript exports SDPA: the mask Where(c, 0, low) of a
    boolean c, and Where(IsNaN(p), 0, p) after the Softmax."""
    base = projected_attention_graph()
    nodes = [helper.make_node("Where", ["c", "zero", "low"], ["mask"])]
    for node in base.graph.node:
        if node.op_type == "MatMul" and node.input[0] == "p":
            nodes += [
                helper.make_node("IsNaN", ["p"], ["nan"]),
                helper.make_node("Where", ["nan", "zero", "p"], ["guarded"]),
            ]
            node.input[0] = "guarded"
        nodes.append(node)
    inputs = [tensor("x", F, [2, 3, 8]), tensor("c", TensorProto.BOOL, [2, 1, 3, 3])]
    inits = list(base.graph.initializer) + [init("zero", np.float32(0.0)), init("low", np.float32(low))]
    return model(nodes, inputs, [tensor("y", F, [2, 3, 8])], inits, domains=["com.microsoft"], opset=opset)


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_infinite_mask_guard_keeps_fully_masked_rows_zero_and_lets_attention_fuse(opset):
    from helpers import run

    before = guarded_attention_graph(opset=opset)
    after = rewriter.optimize(before, level="extended", providers="CPU").model
    rewriter.check_model(after, full_check=True)
    assert ops(after)["Attention"] == 1 and ops(after)["IsNaN"] == 0
    x = np.random.default_rng(3).standard_normal((2, 3, 8)).astype(np.float32)
    c = np.ones((2, 1, 3, 3), bool)
    c[0, 0, 1, :] = False  # query row 1 of batch item 0 sees nothing
    c[1, 0, :, 2] = False  # key 2 of batch item 1 is padding
    (want,) = run(before, {"x": x, "c": c})
    (got,) = run(after, {"x": x, "c": c})
    assert not np.isnan(got).any() and np.all(got[0, 1] == 0) and np.all(want[0, 1] == 0)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_infinite_mask_guard_needs_an_infinite_mask_of_heads_shape():
    # a finite mask: the guard simply goes (SoftmaxNanGuardElimination), nothing is added
    after = rewriter.optimize(guarded_attention_graph(low=-10000.0), level="extended", providers="CPU").model
    assert ops(after) == {"Attention": 1, "Where": 1}
    # a NaN "masked" value: every masked row is NaN whatever the scores; the guard stays
    kept = rewriter.optimize(guarded_attention_graph(low=np.nan), level="extended", providers="CPU").model
    assert ops(kept)["IsNaN"] == 1


@pytest.mark.parametrize("scaled", ["A", "B"])
def test_matmul_scaled_input_fusion(scaled):
    nodes = [
        helper.make_node("Mul", [scaled.lower(), "c"], ["sc"]),
        helper.make_node("MatMul", ["sc", "b"] if scaled == "A" else ["a", "sc"], ["y"]),
    ]
    before = model(
        nodes,
        [tensor("a", F, [2, 3, 4]), tensor("b", F, [2, 4, 5])],
        [tensor("y", F, [2, 3, 5])],
        [init("c", np.float32(0.25))],
    )
    after = check(before, f"MatMulScaledInput{scaled}Fusion", True)
    (node,) = after.graph.node
    assert node.op_type == "FusedMatMul" and list(node.input) == ["a", "b"]


def test_skip_layer_norm_takes_the_bias_of_its_input():
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Add", ["m", "bias"], ["s"]),
        helper.make_node(
            "SkipLayerNormalization",
            ["s", "skip", "gamma", "beta"],
            ["y", "", "", "sum"],
            domain="com.microsoft",
            epsilon=1e-5,
        ),
    ]
    before = model(
        nodes,
        [tensor("x", F, [2, 3, 4]), tensor("skip", F, [2, 3, 4])],
        [tensor("y", F, [2, 3, 4]), tensor("sum", F, [2, 3, 4])],
        [init("w", rand(4, 4)), init("bias", rand(4)), init("gamma", rand(4)), init("beta", rand(4))],
        domains=["com.microsoft"],
    )
    after = check(before, "SkipLayerNormBiasFusion", True, providers="CUDA")
    node = next(n for n in after.graph.node if n.op_type == "SkipLayerNormalization")
    assert list(node.input) == ["m", "skip", "gamma", "beta", "bias"] and list(node.output) == ["y", "", "", "sum"]


def test_onnx_gelu_becomes_bias_gelu():
    nodes = [helper.make_node("Add", ["x", "bias"], ["s"]), helper.make_node("Gelu", ["s"], ["y"])]
    before = model(nodes, [tensor("x", F, [2, 8])], [tensor("y", F, [2, 8])], [init("bias", rand(8))], opset=20)
    assert ops(rewriter_extended(before)) == {"BiasGelu": 1}


def test_decomposed_layer_norm_over_a_shared_residual_keeps_the_sum():
    before = decomposed_layer_norm(opset=14, residual=True)
    before.graph.output.append(tensor("x", F, [2, 4, 8]))  # the sum is read on
    after = check(before, "SkipLayerNormDecomposedSharedSum", True, atol=1e-4, providers="CUDA")
    (node,) = after.graph.node
    assert node.op_type == "SkipLayerNormalization" and node.output[3] == "x"
    check(decomposed_layer_norm(opset=14, residual=True), "SkipLayerNormDecomposedSharedSum", False, providers="CUDA")


def test_gemm_activation_fusion_is_cpu_only():
    import rewriter

    nodes = [
        helper.make_node("Gemm", ["a", "b", "c"], ["g"], transB=1),
        helper.make_node("LeakyRelu", ["g"], ["y"], alpha=0.2),
    ]
    before = model(
        nodes, [tensor("a", F, [3, 4])], [tensor("y", F, [3, 5])], [init("b", rand(5, 4)), init("c", rand(5))]
    )
    after = check(before, "GemmLeakyReluFusion", True)
    (node,) = after.graph.node
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert node.op_type == "FusedGemm" and attrs["transB"] == 1 and np.isclose(attrs["activation_alpha"], 0.2)
    assert ops(rewriter.optimize(before, level="extended", providers="CUDA").model) == {"Gemm": 1, "LeakyRelu": 1}


def rms_norm_graph(opset=23, residual=False, reciprocal=False, axis=-1, scaled=True, power=False):
    nodes = [helper.make_node("Add", ["a", "b"], ["x"])] if residual else []
    nodes += [
        helper.make_node("Pow", ["x", "two"], ["p"]),
        helper.make_node("ReduceMean", ["p", "axes"], ["v"]),
        helper.make_node("Add", ["v", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["r"]),
    ]
    if power:  # Gemma: x * pow(mean + eps, -0.5)
        nodes[-1] = helper.make_node("Pow", ["ve", "minus_half"], ["ir"])
        nodes.append(helper.make_node("Mul", ["x", "ir"], ["n"]))
    elif reciprocal:
        nodes += [helper.make_node("Reciprocal", ["r"], ["ir"]), helper.make_node("Mul", ["x", "ir"], ["n"])]
    else:
        nodes.append(helper.make_node("Div", ["x", "r"], ["n"]))
    if scaled:
        nodes.append(helper.make_node("Mul", ["n", "gamma"], ["y"]))
    else:
        nodes[-1].output[0] = "y"
    inputs = [tensor("a", F, [2, 4, 8]), tensor("b", F, [2, 4, 8])] if residual else [tensor("x", F, [2, 4, 8])]
    return model(
        nodes,
        inputs,
        [tensor("y", F, [2, 4, 8])],
        [
            init("two", np.float32(2)),
            init("eps", np.float32(1e-6)),
            init("gamma", rand(8)),
            init("axes", np.array([axis], np.int64)),
            init("minus_half", np.float32(-0.5)),
        ],
        opset=opset,
    )


@pytest.mark.parametrize("opset", [18, 23])
def test_rms_norm_without_a_scale_and_as_a_power(opset):
    fused = "SimplifiedLayerNormalization" if opset < 23 else "RMSNormalization"
    before = rms_norm_graph(opset=opset, scaled=False)
    after = rewriter.optimize(before, level="extended").model
    assert ops(after) == {fused: 1}
    assert_same_outputs(before, after, atol=1e-4)
    before = rms_norm_graph(opset=opset, power=True)
    after = rewriter.optimize(before, level="extended").model
    assert ops(after) == {fused: 1}  # the scale fused too, not left behind
    assert_same_outputs(before, after, atol=1e-4)


def test_rms_norm_fusion():
    after = check(rms_norm_graph(), "RMSNormDecomposed", True, atol=1e-4)
    assert ops(after) == {"RMSNormalization": 1}
    check(rms_norm_graph(axis=1), "RMSNormDecomposed", False)
    check(rms_norm_graph(opset=18), "RMSNormDecomposed", False)  # no such op yet
    # x * rsqrt(...): the basic pack makes it a Div first
    assert ops(rewriter_extended(rms_norm_graph(reciprocal=True))) == {"RMSNormalization": 1}


def test_rms_norm_before_opset_23_is_simplified_layer_norm_and_the_output_checks():
    """The final norm of LLaMA-style exports has no residual: onnxruntime's ONNX-domain
    SimplifiedLayerNormalization; onnx's checker knows it once rewriter registers it."""
    after = check(rms_norm_graph(opset=18), "SimplifiedLayerNormFusion", True, atol=1e-4)
    assert ops(after) == {"SimplifiedLayerNormalization": 1}
    assert after.graph.node[0].domain == ""
    rewriter.check_model(after)  # (onnx.checker alone: "No Op registered")
    check(rms_norm_graph(opset=18, axis=1), "SimplifiedLayerNormFusion", False)
    check(rms_norm_graph(), "SimplifiedLayerNormFusion", False)  # opset 23: RMSNormalization


def test_rms_norm_over_a_residual_is_skip_simplified_layer_norm_at_any_opset():
    after = check(rms_norm_graph(opset=18, residual=True), "SkipRMSNormDecomposed", True, atol=1e-4)
    assert ops(after) == {"SkipSimplifiedLayerNormalization": 1}


def embeddings_graph(shared_sum=False):
    nodes = [
        helper.make_node("Gather", ["word", "ids"], ["w"], axis=0),
        helper.make_node("Gather", ["seg", "types"], ["t"], axis=0),
        helper.make_node("Add", ["w", "t"], ["a"]),
        helper.make_node(
            "SkipLayerNormalization",
            ["a", "p", "gamma", "beta"],
            ["y", "", "", "sum"] if shared_sum else ["y"],
            domain="com.microsoft",
            epsilon=1e-5,
        ),
    ]
    outputs = [tensor("y", F, [2, 5, 8])] + ([tensor("sum", F, [2, 5, 8])] if shared_sum else [])
    return model(
        nodes,
        [tensor("ids", TensorProto.INT64, [2, 5]), tensor("types", TensorProto.INT64, [2, 5])],
        outputs,
        [
            init("word", rand(7, 8)),
            init("seg", rand(2, 8)),
            init("p", rand(1, 5, 8)),
            init("gamma", rand(8)),
            init("beta", rand(8)),
        ],
        domains=["com.microsoft"],
    )


@pytest.mark.parametrize("shared_sum", [False, True])
def test_embed_layer_norm_fusion(shared_sum):

    import rewriter

    before = embeddings_graph(shared_sum)
    after = rewriter.optimize(before, level="extended", providers="CUDA").model
    feeds = {
        "ids": np.array([[1, 2, 3, 4, 5], [6, 0, 1, 2, 3]], np.int64),
        "types": np.array([[0, 0, 1, 1, 0]] * 2, np.int64),
    }
    from helpers import run

    for x, y in zip(run(before, feeds), run(after, feeds)):
        np.testing.assert_allclose(x, y, atol=1e-5)
    rewriter.check_model(after, full_check=True)
    # ids go through Mod by the table's rows: Gather reads negative ids from the end
    assert ops(after) == {"EmbedLayerNormalization": 1, "Cast": 2, "Mod": 2}


def rotary_graph(equal_halves=True, heads_last=False, negated=False):
    """q [1, 2, 4, 8] * cos + Concat(-q2, q1) * sin, cos/sin [1, 1, 4, 8] constants; heads
    last (Gemma 3n/4 rotate before transposing the heads): q [1, 4, 2, 8], cos [1, 4, 1, 8]."""
    angles = np.outer(np.arange(4), 1.0 / 10000 ** (np.arange(0, 8, 2) / 8)).astype(np.float32)
    second = angles if equal_halves else angles * 2
    cos = np.cos(np.concatenate([angles, second], -1))[None, None]
    sin = np.sin(np.concatenate([angles, second], -1))[None, None]
    shape = [1, 2, 4, 8]
    if heads_last:
        cos, sin, shape = cos.transpose(0, 2, 1, 3), sin.transpose(0, 2, 1, 3), [1, 4, 2, 8]
    nodes = [
        helper.make_node("Mul", ["q", "cos"], ["a"]),
        helper.make_node("Split", ["q", "sp"], ["q1", "q2"], axis=3),
        helper.make_node("Neg", ["q1" if negated else "q2"], ["n"]),
        helper.make_node("Concat", ["q2", "n"] if negated else ["n", "q1"], ["r"], axis=-1),
        helper.make_node("Mul", ["r", "sin"], ["b"]),
        helper.make_node("Add", ["a", "b"], ["y"]),
    ]
    inits = [init("cos", cos), init("sin", sin), init("sp", np.array([4, 4], np.int64))]
    return model(nodes, [tensor("q", F, shape)], [tensor("y", F, shape)], inits)


def test_half_split_rotary_the_other_way_is_rotary_embedding_by_minus_the_angle():
    """NanoChat: x * cos + Concat(x2, -x1) * sin."""
    after = check(rotary_graph(negated=True), "RotaryEmbeddingHalfSplitNegated", True)
    assert ops(after) == {"RotaryEmbedding": 1}
    check(rotary_graph(negated=True), "RotaryEmbeddingHalfSplit", False)


def test_half_split_rotary_becomes_rotary_embedding():
    after = check(rotary_graph(), "RotaryEmbeddingHalfSplit", True)
    assert ops(after) == {"RotaryEmbedding": 1}
    cache = {i.name: i for i in after.graph.initializer}[after.graph.node[0].input[2]]
    assert list(cache.dims) == [4, 4]  # one row per position, half the head


def test_rotary_with_unequal_halves_is_left():
    check(rotary_graph(equal_halves=False), "RotaryEmbeddingHalfSplit", False)


def test_half_split_rotary_on_heads_last_q_rotates_the_merged_heads():
    after = check(rotary_graph(heads_last=True), "RotaryEmbeddingHalfSplitHeadsLast", True)
    (rotary,) = [n for n in after.graph.node if n.op_type == "RotaryEmbedding"]
    assert helper.get_attribute_value(rotary.attribute[[a.name for a in rotary.attribute].index("num_heads")]) == 2
    check(rotary_graph(heads_last=True), "RotaryEmbeddingHalfSplit", False)  # rows are not axis 2


def computed_rotary(
    heads_last: bool, lead: int | str, halves: bool = False, scales: tuple[np.ndarray, np.ndarray] | None = None
) -> onnx.ModelProto:
    """q rotated half-split by angles computed at run time, f [lead, seq, 4]: Cos/Sin of
    Concat(f, f) (or, with halves, Concat(Cos(f), Cos(f)) and of Sin: Qwen2.5-VL's doubled
    halves) unsqueezed at axis 2 for heads-last q (Gemma 4), axis 1 for heads-first q; with
    scales, Cos and Sin times those constants (YaRN's attention factor)."""
    n = helper.make_node
    axis = "two" if heads_last else "one"
    if halves:
        angles = [n("Cos", ["f"], ["fc"]), n("Sin", ["f"], ["fs"])]
        angles += [n("Concat", ["fc", "fc"], ["co"], axis=-1), n("Concat", ["fs", "fs"], ["si"], axis=-1)]
    elif scales is None:
        angles = [n("Concat", ["f", "f"], ["c"], axis=-1), n("Cos", ["c"], ["co"]), n("Sin", ["c"], ["si"])]
    else:
        angles = [n("Concat", ["f", "f"], ["c"], axis=-1), n("Cos", ["c"], ["cm"]), n("Sin", ["c"], ["sm"])]
        angles += [n("Mul", ["cm", "m"], ["co"]), n("Mul", ["sm", "ms"], ["si"])]
    nodes = angles + [
        n("Unsqueeze", ["co", axis], ["cu"]),
        n("Unsqueeze", ["si", axis], ["su"]),
        n("Mul", ["q", "cu"], ["a"]),
        n("Split", ["q", "sp"], ["q1", "q2"], axis=3),
        n("Neg", ["q2"], ["n"]),
        n("Concat", ["n", "q1"], ["r"], axis=-1),
        n("Mul", ["r", "su"], ["b"]),
        n("Add", ["a", "b"], ["y"]),
    ]
    inits = [init(axis, np.array([2 if heads_last else 1], np.int64)), init("sp", np.array([4, 4], np.int64))]
    if scales is not None:
        inits += [init("m", scales[0]), init("ms", scales[1])]
    shape = ["batch", "seq", 2, 8] if heads_last else ["batch", 2, "seq", 8]
    return model(nodes, [tensor("q", F, shape), tensor("f", F, [lead, "seq", 4])], [tensor("y", F, shape)], inits)


def test_half_split_rotary_of_computed_angles_on_heads_last_q():
    """Gemma 4 with dynamic axes: Cos/Sin of Concat(f, f) unsqueezed at axis 2."""
    after = check(computed_rotary(True, 1), "RotaryEmbeddingHalfSplitComputedHeadsLast", True)
    assert "RotaryEmbedding" in ops(after) and "Neg" not in ops(after)


def test_heads_last_rotary_runs_on_an_empty_batch():
    """The heads are merged for the kernel by a view that names its width: [0, 0, -1] of an
    empty batch is ambiguous, and onnxruntime refuses it where the original ran."""
    before = computed_rotary(True, 1)
    after = check(before, "RotaryEmbeddingHalfSplitComputedHeadsLast", True)
    for batch, seq in ((0, 3), (2, 0)):
        feeds = {"q": np.zeros((batch, seq, 2, 8), np.float32), "f": np.zeros((1, seq, 4), np.float32)}
        assert [y.shape for y in run(after, feeds)] == [y.shape for y in run(before, feeds)]


@pytest.mark.parametrize(
    "heads_last, halves, rule",
    [
        (False, False, "RotaryEmbeddingHalfSplitComputedPerBatch"),
        (True, False, "RotaryEmbeddingHalfSplitComputedHeadsLastPerBatch"),
        (False, True, "RotaryEmbeddingHalfSplitHalvesPerBatch"),
    ],
)
def test_half_split_rotary_of_angles_per_batch_item_reads_flat_positions(heads_last, halves, rule):
    """position_ids given as an input (optimum's exports): angles [batch, seq, 4] differ per
    item; the caches hold batch*seq rows and each item reads its own (positions b*S + s,
    computed at run time).  The feeds draw f per item, so a cache read from item 0 fails."""
    before = computed_rotary(heads_last, "batch", halves)
    after = check(before, rule, True)
    (rotary,) = [node for node in after.graph.node if node.op_type == "RotaryEmbedding"]
    assert {"Range", "Size"} <= set(ops(after))  # the positions, computed
    # an empty batch of some tokens, and the reverse: the positions' view names no -1, the
    # caches keep at least seq rows (the kernel refuses fewer rows than tokens)
    for batch, seq in ((0, 3), (2, 0), (0, 0)):
        q = (batch, seq, 2, 8) if heads_last else (batch, 2, seq, 8)
        feeds = {"q": np.zeros(q, np.float32), "f": np.zeros((batch, seq, 4), np.float32)}
        assert [y.shape for y in run(after, feeds)] == [y.shape for y in run(before, feeds)]
    # angles of one item (a leading 1 where q has more): the batch-1 forms, positions from 0
    one = check(computed_rotary(heads_last, 1, halves), rule, False)
    assert "Range" not in ops(one)


@pytest.mark.parametrize(
    "lead, rule",
    [(1, "RotaryEmbeddingHalfSplitComputedScaled"), ("batch", "RotaryEmbeddingHalfSplitComputedScaledPerBatch")],
)
def test_half_split_rotary_of_scaled_computed_angles_scales_its_caches(lead, rule):
    """YaRN with dynamic axes: Cos and Sin of the angles times its attention factor (one
    constant each; the feeds' angles differ per item where the lead is the batch) ->
    RotaryEmbedding whose caches are scaled alike.  A factor per angle is left alone."""
    scales = (np.array(1.25, np.float32), np.array([0.75], np.float32))
    after = check(computed_rotary(False, lead, scales=scales), rule, True)
    assert "RotaryEmbedding" in ops(after) and "Neg" not in ops(after)
    per_angle = (np.array([1.0, 2.0] * 4, np.float32), np.array(0.75, np.float32))
    check(computed_rotary(False, lead, scales=per_angle), rule, False)


def scaled_query_attention(bias: bool = False, scale: float | None = 1.0):
    """One cached decoding step's attention as the heads family leaves Whisper's: q scaled by
    a constant before MultiHeadAttention, keys and values appended to a cache (3 outputs)."""
    n = helper.make_node
    attributes = {"num_heads": 2} | ({} if scale is None else {"scale": scale})
    inputs = ["qs", "k", "v", "bias" if bias else "", "", "", "pk", "pv"]
    nodes = [
        n("Mul", ["q", "c"], ["qs"]),
        n("MultiHeadAttention", inputs, ["y", "pk_out", "pv_out"], domain="com.microsoft", **attributes),
    ]
    inits = [init("c", np.array([0.25], np.float32))] + ([init("bias", rand(24))] if bias else [])
    step = [tensor(name, F, ["B", 1, 8]) for name in ("q", "k", "v")]
    cache = [tensor(name, F, ["B", 2, "P", 4]) for name in ("pk", "pv")]
    outputs = [tensor("y", F, ["B", 1, 8])] + [tensor(name, F, ["B", 2, "T", 4]) for name in ("pk_out", "pv_out")]
    return model(nodes, step + cache, outputs, inits, domains=["com.microsoft"])


@pytest.mark.parametrize("scale", [1.0, None])
def test_a_constant_scaling_the_query_folds_into_the_attention_scale(scale):
    after = check(scaled_query_attention(scale=scale), "MultiHeadAttentionQueryScaleFold", True, atol=1e-5)
    assert ops(after) == {"MultiHeadAttention": 1}
    (node,) = after.graph.node
    expected = 0.25 * (1.0 if scale is not None else 1 / np.sqrt(4))  # the default: 1/sqrt(head size)
    assert np.isclose(
        helper.get_attribute_value(node.attribute[[a.name for a in node.attribute].index("scale")]), expected
    )
    assert list(node.output) == ["y", "pk_out", "pv_out"]


def test_the_query_scale_stays_outside_an_attention_that_adds_a_bias():
    check(scaled_query_attention(bias=True), "MultiHeadAttentionQueryScaleFold", False)


def packed_heads_attention(table_shape=(2, 4, 4), heads=2, qk=4, v=8):
    """LeViT's attention: one projection reshaped to heads [B, S, N, qk + qk + v] and split
    into q, k and v there (values' heads wider), a constant bias table (N, S, T) added to the
    scores, heads merged to [B, S, N * v] with allowzero set."""
    n, seq = helper.make_node, 4
    nodes = [
        n("Reshape", ["x", "heads"], ["h"]),
        n("Split", ["h", "sizes"], ["qh", "kh", "vh"], axis=3),
        n("Transpose", ["qh"], ["qt"], perm=[0, 2, 1, 3]),
        n("Transpose", ["kh"], ["kt"], perm=[0, 2, 3, 1]),
        n("Transpose", ["vh"], ["vt"], perm=[0, 2, 1, 3]),
        n("FusedMatMul", ["qt", "kt"], ["s"], domain="com.microsoft", alpha=0.35),
        n("Add", ["s", "table"], ["sb"]),
        n("Softmax", ["sb"], ["p"], axis=-1),
        n("MatMul", ["p", "vt"], ["o"]),
        n("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
        n("Reshape", ["ot", "merge"], ["y"], allowzero=1),
    ]
    inits = [
        init("heads", np.array([1, seq, heads, 2 * qk + v], np.int64)),
        init("sizes", np.array([qk, qk, v], np.int64)),
        init("table", rand(*table_shape)),
        init("merge", np.array([1, seq, heads * v], np.int64)),
    ]
    inputs = [tensor("x", F, [1, seq, heads * (2 * qk + v)])]
    return model(nodes, inputs, [tensor("y", F, [1, seq, heads * v])], inits, domains=["com.microsoft"])


def test_attention_over_heads_split_after_the_head_reshape_with_wider_values():
    after = check(packed_heads_attention(), "MultiHeadAttentionBSNHTableFusion", True, atol=1e-5)
    assert ops(after) == {"Reshape": 4, "Split": 1, "MultiHeadAttention": 1}
    mha = next(node for node in after.graph.node if node.op_type == "MultiHeadAttention")
    (table,) = [t for t in after.graph.initializer if t.name == mha.input[5]]
    assert list(table.dims) == [1, 2, 4, 4]  # the table given its batch axis, no node left to do it


def test_a_plain_bias_table_is_an_attention_bias_and_one_of_a_single_row_is_not():
    """The Add broadcasts a (N, 1, T) table over the queries; the kernel would read S rows."""
    check(packed_heads_attention(table_shape=(4, 4)), "MultiHeadAttentionBSNHTableFusion", True, 1e-5)
    check(packed_heads_attention(table_shape=(2, 1, 4)), "MultiHeadAttentionBSNHTableFusion", False)


def test_a_query_split_into_heads_from_three_dims_reaches_the_fused_attention_as_it_was():
    """CodeGen: q is a 3-D value (the rotary fusion's output) viewed as heads [B, S, N, H],
    k and v are cut from one projection's heads.  The split-heads fusion merges q's heads
    again; the round trip of Reshapes is then q itself, not two more nodes."""
    n, seq = helper.make_node, 4
    nodes = [
        n("Reshape", ["q3", "q_heads"], ["qh"]),
        n("Reshape", ["kv", "kv_heads"], ["h"]),
        n("Split", ["h", "sizes"], ["kh", "vh"], axis=3),
        n("Transpose", ["qh"], ["qt"], perm=[0, 2, 1, 3]),
        n("Transpose", ["kh"], ["kt"], perm=[0, 2, 3, 1]),
        n("Transpose", ["vh"], ["vt"], perm=[0, 2, 1, 3]),
        n("FusedMatMul", ["qt", "kt"], ["s"], domain="com.microsoft", alpha=0.5),
        n("Add", ["s", "mask"], ["sb"]),
        n("Softmax", ["sb"], ["p"], axis=-1),
        n("MatMul", ["p", "vt"], ["o"]),
        n("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
        n("Reshape", ["ot", "merge"], ["y"]),
    ]
    inits = [
        init("q_heads", np.array([1, seq, 2, 4], np.int64)),
        init("kv_heads", np.array([1, seq, 2, 8], np.int64)),
        init("sizes", np.array([4, 4], np.int64)),
        init("mask", np.triu(np.full((1, 1, seq, seq), -1e9, np.float32), 1)),
        init("merge", np.array([1, seq, 8], np.int64)),
    ]
    inputs = [tensor("q3", F, [1, seq, 8]), tensor("kv", F, [1, seq, 16])]
    before = model(nodes, inputs, [tensor("y", F, [1, seq, 8])], inits, domains=["com.microsoft"])
    check(before, "MultiHeadAttentionBSNHFusion", True, atol=1e-5)
    after = rewriter.optimize(before, level="extended").model
    assert ops(after) == {"Reshape": 3, "Split": 1, "MultiHeadAttention": 1}
    mha = next(node for node in after.graph.node if node.op_type == "MultiHeadAttention")
    assert mha.input[0] == "q3"


def int64s(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


def batched_head_views(b: int, heads: int, s: int, t: int, d: int) -> list:
    """The view targets of attention over batched heads [B*N, ., .]: q's and k's (and v's)
    heads batched, the scores viewed [B, N, S, T] and back, the output viewed [B, N, S, H]
    and merged to [B, S, N*H]."""
    return [
        init("batched_q", int64s(b * heads, s, d)),
        init("batched_k", int64s(b * heads, t, d)),
        init("scores4", int64s(b, heads, s, t)),
        init("batched_p", int64s(b * heads, s, t)),
        init("heads4", int64s(b, heads, s, d)),
        init("merge", int64s(b, s, heads * d)),
    ]


def alibi_attention(batched_product: bool, cached: bool = False, projected: bool = False):
    """BLOOM's attention: q, k and v picked from one projection's [B, S, N, 3, H] by Gather,
    heads batched [B*N, S, H], the ALiBi bias [B*N, 1, T] added to the batched scores, viewed
    [B, N, S, T], masked; the product with v batched too (TorchScript) or over the 4-D
    weights (dynamo); with a cache, k and v are the past concatenated with the new heads."""
    b, s, heads, d, past, n = 2, 3, 2, 4, 2 if cached else 0, helper.make_node
    t = s + past
    nodes = [n("Reshape", ["qkv", "split"], ["h"])]
    if projected:  # q, k and v from one projection of x, interleaved by head
        nodes[:0] = [n("MatMul", ["x", "w"], ["xw"]), n("Add", ["xw", "bias"], ["qkv"])]
    nodes += [n("Gather", ["h", f"i{j}"], [f"{x}h"], axis=3) for j, x in enumerate("qkv")]
    nodes += [n("Transpose", [f"{x}h"], [f"{x}t"], perm=[0, 2, 1, 3]) for x in "qkv"]
    if cached:
        nodes += [n("Concat", ["past_k", "kt"], ["k4"], axis=2), n("Concat", ["past_v", "vt"], ["v4"], axis=2)]
    else:
        nodes += [n("Identity", ["kt"], ["k4"]), n("Identity", ["vt"], ["v4"])]
    nodes += [
        n("Reshape", ["qt", "batched_q"], ["q3"]),
        n("Reshape", ["k4", "batched_k"], ["k3"]),
        n("FusedMatMul", ["q3", "k3"], ["sc"], domain="com.microsoft", alpha=0.5, transB=1),
        n("Add", ["sc", "alibi"], ["sb"]),
        n("Reshape", ["sb", "scores4"], ["s4"]),
        n("Add", ["s4", "mask"], ["sm"]),
        n("Softmax", ["sm"], ["p"], axis=-1),
    ]
    if batched_product:
        nodes += [
            n("Reshape", ["p", "batched_p"], ["p3"]),
            n("Reshape", ["v4", "batched_k"], ["v3"]),
            n("MatMul", ["p3", "v3"], ["o3"]),
            n("Reshape", ["o3", "heads4"], ["o"]),
        ]
    else:
        nodes.append(n("MatMul", ["p", "v4"], ["o"]))
    nodes += [n("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]), n("Reshape", ["ot", "merge"], ["y"])]
    inits = [init("split", int64s(b, s, heads, 3, d))] + [init(f"i{j}", np.array(j, np.int64)) for j in range(3)]
    inits += batched_head_views(b, heads, s, t, d)
    inputs = [
        tensor("qkv", F, [b, s, heads * 3 * d]),
        tensor("alibi", F, [b * heads, 1, t]),
        tensor("mask", F, [b, 1, s, t]),
    ]
    if cached:
        inputs += [tensor("past_k", F, [b, heads, past, d]), tensor("past_v", F, [b, heads, past, d])]
    if projected:
        inputs[0] = tensor("x", F, [b, s, 8])
        inits += [init("w", rand(8, heads * 3 * d)), init("bias", rand(heads * 3 * d))]
    return model(nodes, inputs, [tensor("y", F, [b, s, heads * d])], inits, domains=["com.microsoft"])


@pytest.mark.parametrize(
    "batched_product, cached, rule",
    [
        (True, False, "MultiHeadAttentionBatchedBiasFusion"),
        (False, False, "MultiHeadAttentionBatchedBiasHeadsProductFusion"),
        (False, True, "MultiHeadAttentionBatchedBiasHeadsProductFusion"),
    ],
)
def test_alibi_added_to_batched_heads_is_the_fused_attentions_bias(batched_product, cached, rule):
    after = check(alibi_attention(batched_product, cached), rule, True, atol=1e-5)
    assert ops(after)["MultiHeadAttention"] == 1 and "Softmax" not in ops(after)


def test_a_projection_interleaved_by_head_packs_into_attention():
    """BLOOM's q, k and v from one projection viewed [B, S, N, 3, H]: once the attention
    fuses, its weight's columns are reordered head-wise into Attention's [q | k | v]."""
    before = alibi_attention(True, projected=True)
    result = rewriter.optimize(before, level="extended")
    assert result.report.applied("AttentionInterleavedPackedFusion") == 1
    assert ops(result.model)["Attention"] == 1 and "Gather" not in ops(result.model)
    assert_same_outputs(before, result.model, atol=1e-5)


def test_picked_heads_after_a_cache_become_the_kernels_past():
    """BLOOM with a cache: the new heads picked as [B, S, N, H] and concatenated to the past
    -> MultiHeadAttention of the new heads merged, the caches its past inputs."""
    before = alibi_attention(False, cached=True)
    result = rewriter.optimize(before, level="extended")
    assert result.report.applied("MultiHeadAttentionPastHeadsFusion") == 1
    (mha,) = [node for node in result.model.graph.node if node.op_type == "MultiHeadAttention"]
    assert list(mha.input[6:]) == ["past_k", "past_v"]
    assert_same_outputs(before, result.model, atol=1e-5)


def test_one_alibi_row_for_every_head_is_not_viewed_per_head():
    """A bias [1, 1, T] broadcast over B*N batched heads would not view as [B, N, 1, T]."""
    before = alibi_attention(True)
    (alibi,) = [i for i in before.graph.input if i.name == "alibi"]
    alibi.type.tensor_type.shape.dim[0].dim_value = 1
    check(before, "MultiHeadAttentionBatchedBiasFusion", False)


def test_batched_heads_after_a_cache_fuse_and_take_the_past():
    """XGLM's cached attention: q [B, S, D] split into batched heads, the cache and the new
    heads concatenated [B, N, T, H] then batched, the scores viewed [B, N, S, T] to be
    masked and back for the Softmax, the product batched -> MultiHeadAttention, which
    then takes the cache as its past inputs."""
    b, s, heads, d, past, n = 2, 1, 2, 4, 3, helper.make_node
    t = s + past
    nodes = [n("Reshape", ["q", "split"], ["qh"]), n("Transpose", ["qh"], ["qt"], perm=[0, 2, 1, 3])]
    for x in "kv":
        nodes += [
            n("Reshape", [x, "split"], [f"{x}h"]),
            n("Transpose", [f"{x}h"], [f"{x}t"], perm=[0, 2, 1, 3]),
            n("Concat", [f"past_{x}", f"{x}t"], [f"present_{x}"], axis=2),
            n("Reshape", [f"present_{x}", "batched_k"], [f"{x}3"]),
        ]
    nodes += [
        n("Reshape", ["qt", "batched_q"], ["q3"]),
        n("FusedMatMul", ["q3", "k3"], ["sc"], domain="com.microsoft", alpha=0.5, transB=1),
        n("Reshape", ["sc", "scores4"], ["s4"]),
        n("Add", ["s4", "mask"], ["sm"]),
        n("Reshape", ["sm", "batched_p"], ["sm3"]),
        n("Softmax", ["sm3"], ["p"], axis=-1),
        n("MatMul", ["p", "v3"], ["o3"]),
        n("Reshape", ["o3", "heads4"], ["o"]),
        n("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
        n("Reshape", ["ot", "merge"], ["y"]),
    ]
    inits = [init("split", int64s(0, 0, heads, d)), *batched_head_views(b, heads, s, t, d)]
    inputs = [tensor(x, F, [b, s, heads * d]) for x in "qkv"]
    inputs += [tensor(f"past_{x}", F, [b, heads, past, d]) for x in "kv"] + [tensor("mask", F, [b, 1, s, t])]
    outputs = [tensor("y", F, [b, s, heads * d])] + [tensor(f"present_{x}", F, [b, heads, t, d]) for x in "kv"]
    before = model(nodes, inputs, outputs, inits, domains=["com.microsoft"])
    check(before, "MultiHeadAttentionBatchedHeadsCachedFusion", True, atol=1e-5)
    after = rewriter.optimize(before, level="extended").model
    assert ops(after) == {"MultiHeadAttention": 1}
    (mha,) = after.graph.node
    assert list(mha.input) == ["q", "k", "v", "", "", "mask", "past_k", "past_v"]


def t5_attention(position_rows: int = 4):
    """T5's attention: no scaling, a relative position bias (1, N, S, T) and a mask
    (B, 1, 1, T) added to the scores one after the other."""
    hidden, heads, seq, n = 8, 2, 4, helper.make_node
    nodes = []
    for name, perm in (("q", (0, 2, 1, 3)), ("k", (0, 2, 3, 1)), ("v", (0, 2, 1, 3))):
        nodes += [n("Reshape", [name, "split"], [f"{name}r"]), n("Transpose", [f"{name}r"], [f"{name}t"], perm=perm)]
    nodes += [
        n("MatMul", ["qt", "kt"], ["s"]),
        n("Add", ["s", "position_bias"], ["sp"]),
        n("Add", ["sp", "mask"], ["sm"]),
        n("Softmax", ["sm"], ["p"], axis=-1),
        n("MatMul", ["p", "vt"], ["o"]),
        n("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
        n("Reshape", ["ot", "merge"], ["y"]),
    ]
    inits = [
        init("split", np.array([0, 0, heads, hidden // heads], np.int64)),
        init("merge", np.array([0, 0, hidden], np.int64)),
        init("position_bias", rand(1, heads, position_rows, seq)),
    ]
    inputs = [tensor(name, F, ["B", seq, hidden]) for name in ("q", "k", "v")] + [tensor("mask", F, ["B", 1, 1, seq])]
    return model(nodes, inputs, [tensor("y", F, ["B", seq, hidden])], inits)


def test_unscaled_attention_with_a_position_bias_and_a_mask():
    after = check(t5_attention(), "MultiHeadAttentionUnscaledTwoMaskFusion", True, atol=1e-4)
    assert ops(after) == {"Add": 1, "MultiHeadAttention": 1}  # the two biases added once
    # a position bias of one row for every query, beside a mask of one row, leaves the
    # kernel one row where it reads S
    check(t5_attention(position_rows=1), "MultiHeadAttentionUnscaledTwoMaskFusion", False)


def test_a_norm_after_a_4_bit_linear_layer_still_fuses():
    """A model quantized to 4-bit weights before it is optimized (MatMulNBits, which onnx's
    shape inference does not know): the residual sum after it, typed when the model loads,
    still has a shape, and the norm over it fuses."""
    quantized = rms_norm_graph(opset=18, residual=True)
    graph = quantized.graph
    graph.input[0].CopyFrom(tensor("h", F, ["B", 4, 16]))
    graph.input[1].CopyFrom(tensor("ids", TensorProto.INT64, ["B", 4]))
    graph.node.insert(0, helper.make_node("Gather", ["table", "ids"], ["b"], axis=0))  # embeddings
    graph.output[0].CopyFrom(tensor("y", F, ["B", 4, 8]))
    linear = helper.make_node(
        "MatMulNBits", ["hr", "w4", "w4_scales"], ["a"], domain="com.microsoft", K=16, N=8, bits=4, block_size=16
    )
    graph.node.insert(0, linear)
    graph.node.insert(0, helper.make_node("Relu", ["h"], ["hr"]))  # (its input computed, not declared)
    weights = RNG.integers(0, 256, (8, 1, 8)).astype(np.uint8)  # [N, blocks of K, 16 nibbles]
    graph.initializer.extend([init("w4", weights), init("w4_scales", np.abs(rand(8)) * 0.1), init("table", rand(5, 8))])
    quantized.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    after = check(quantized, "SkipRMSNormDecomposed", True, atol=1e-4)
    assert ops(after) == {"Gather": 1, "Relu": 1, "MatMulNBits": 1, "SkipSimplifiedLayerNormalization": 1}


def residual_rms_normalization(axis: int = -1):
    """ONNX's RMSNormalization (opset 23) over a residual sum the next residual reads."""
    nodes = [
        helper.make_node("Add", ["a", "b"], ["x"]),
        helper.make_node("RMSNormalization", ["x", "gamma"], ["y"], axis=axis, epsilon=1e-5),
        helper.make_node("Add", ["x", "y"], ["z"]),
    ]
    inputs = [tensor("a", F, [2, 4, 8]), tensor("b", F, [2, 4, 8])]
    return model(nodes, inputs, [tensor("z", F, [2, 4, 8])], [init("gamma", rand(8))], opset=23)


def test_rms_normalization_over_a_residual_is_skip_simplified_layer_norm_on_cuda_only():
    after = check(residual_rms_normalization(), "SkipRMSNormalizationFusion", True, atol=1e-5, providers="CUDA")
    assert ops(after) == {"SkipSimplifiedLayerNormalization": 1, "Add": 1}
    check(residual_rms_normalization(axis=1), "SkipRMSNormalizationFusion", False, providers="CUDA")
    on_cpu = rewriter.optimize(residual_rms_normalization(), level="extended")
    assert on_cpu.report.applied("SkipRMSNormalizationFusion") == 0  # slower there


def test_a_4_bit_layer_is_typed_from_its_scales_before_its_input_is():
    """While a model loads, whole-graph inference knows only initializers and declared
    types: the stand-in takes the element type from the scales (the input's type)."""
    from rewriter.graph.stand_ins import stand_ins

    node = helper.make_node("MatMulNBits", ["hidden", "w4", "scales"], ["y"], domain="com.microsoft", K=16, N=8)
    known = {"scales": (TensorProto.FLOAT16, [8])}
    nodes, stubs = stand_ins(node, known.get)
    assert [n.op_type for n in nodes] == ["MatMul"] and list(nodes[0].input) == ["hidden", stubs[0].name]
    assert stubs[0].data_type == TensorProto.FLOAT16 and list(stubs[0].dims) == [16, 8]


def deinterleaved_rotary(swapped: bool = False, computed: bool = False):
    """DeepSeek-V3's rotary: the even and odd elements of the heads' last axis rotated and
    concatenated (e cos - o sin, o cos + e sin), cos and sin constants [1, 1, S, R/2] (or,
    ``computed``, inputs of that shape, as dynamic-axes exports compute them)."""
    n = helper.make_node
    first = ["ec", "os"] if not swapped else ["os", "ec"]
    nodes = [
        n("Slice", ["x", "zero", "end", "last", "two"], ["e"]),
        n("Slice", ["x", "one", "end", "last", "two"], ["o"]),
        n("Mul", ["e", "cos"], ["ec"]),
        n("Mul", ["o", "sin"], ["os"]),
        n("Sub", first, ["c1"]),
        n("Mul", ["o", "cos"], ["oc"]),
        n("Mul", ["e", "sin"], ["es"]),
        n("Add", ["oc", "es"], ["c2"]),
        n("Concat", ["c1", "c2"], ["y"], axis=-1),
    ]
    ints = {"zero": [0], "one": [1], "end": [2**62], "last": [-1], "two": [2]}
    inits = [init(k, np.array(v, np.int64)) for k, v in ints.items()]
    inputs = [tensor("x", F, ["B", 2, "S", 8])]
    if computed:
        inputs += [tensor("cos", F, [1, 1, "S", 4]), tensor("sin", F, [1, 1, "S", 4])]
    else:
        inputs[0] = tensor("x", F, ["B", 2, 3, 8])
        inits += [init("cos", np.cos(rand(1, 1, 3, 4))), init("sin", np.sin(rand(1, 1, 3, 4)))]
    return model(nodes, inputs, [tensor("y", F, ["B", 2, "S" if computed else 3, 8])], inits)


def test_deinterleaved_rotary_is_rotary_embedding_of_the_even_and_odd_halves():
    after = check(deinterleaved_rotary(), "RotaryEmbeddingDeinterleavedFusion", True, atol=1e-5)
    assert ops(after) == {"Slice": 2, "Concat": 1, "RotaryEmbedding": 1}
    check(deinterleaved_rotary(swapped=True), "RotaryEmbeddingDeinterleavedFusion", False)
    computed = check(deinterleaved_rotary(computed=True), "RotaryEmbeddingDeinterleavedComputedFusion", True, 1e-5)
    assert ops(computed) == {"Slice": 2, "Concat": 1, "Reshape": 2, "RotaryEmbedding": 1}


def rotate_every_two() -> list[onnx.NodeProto]:
    """The pairs (x[2i], x[2i+1]) of x's last axis as (-x[2i+1], x[2i]), stacked on a new
    last axis ``k`` (the caller merges it back into x's shape): rotate_every_two as exporters
    write it; the int64 constants zero, one, two, end, last and minus are the caller's."""
    n = helper.make_node
    return [
        n("Slice", ["x", "zero", "end", "last", "two"], ["e"]),
        n("Slice", ["x", "one", "end", "last", "two"], ["o"]),
        n("Neg", ["o"], ["no"]),
        n("Unsqueeze", ["no", "minus"], ["nou"]),
        n("Unsqueeze", ["e", "minus"], ["eu"]),
        n("Concat", ["nou", "eu"], ["k"], axis=-1),
    ]


def interleaved_computed_rotary(repeated_angles: bool) -> onnx.ModelProto:
    """x * cos + rotate_every_two(x) * sin on heads-first x [batch, 2, seq, 4] with cos and
    sin computed from this call's angles f [1, seq, 2] as the dynamo exporter writes them
    with dynamic axes: repeat_interleave of Cos(f) unsqueezed to [1, 1, seq, 2] (ERNIE 4.5,
    GLM-4), or Cos of f's repeat_interleave (``repeated_angles``: Cohere 2)."""
    n = helper.make_node
    nodes = [*rotate_every_two(), n("Shape", ["x"], ["sx"]), n("Reshape", ["k", "sx"], ["r"])]
    if repeated_angles:
        nodes += [
            n("Unsqueeze", ["f", "three"], ["fu"]),
            n("Expand", ["fu", "rep4"], ["fe"]),
            n("Reshape", ["fe", "rows3"], ["ri"]),
            n("Cos", ["ri"], ["c3"]),
            n("Sin", ["ri"], ["s3"]),
            n("Unsqueeze", ["c3", "one"], ["cos"]),
            n("Unsqueeze", ["s3", "one"], ["sin"]),
        ]
    else:
        nodes += [n("Unsqueeze", ["f", "zero"], ["f4"]), n("Cos", ["f4"], ["ch"]), n("Sin", ["f4"], ["sh"])]
        for h, out in (("ch", "cos"), ("sh", "sin")):
            nodes += [
                n("Unsqueeze", [h, "four"], [f"{h}u"]),
                n("Expand", [f"{h}u", "rep5"], [f"{h}e"]),
                n("Reshape", [f"{h}e", "rows4"], [out]),
            ]
    nodes += [n("Mul", ["x", "cos"], ["a"]), n("Mul", ["r", "sin"], ["b"]), n("Add", ["a", "b"], ["y"])]
    ints = {
        "zero": [0], "one": [1], "two": [2], "three": [3], "four": [4], "minus": [-1], "last": [3],
        "end": [np.iinfo(np.int64).max], "rep4": [1, 1, 1, 2], "rep5": [1, 1, 1, 1, 2],
        "rows3": [1, -1, 4], "rows4": [1, 1, -1, 4],
    }  # fmt: skip
    inits = [init(name, np.array(v, np.int64)) for name, v in ints.items()]
    inputs = [tensor("x", F, ["batch", 2, "seq", 4]), tensor("f", F, [1, "seq", 2])]
    return model(nodes, inputs, [tensor("y", F, ["batch", 2, "seq", 4])], inits)


@pytest.mark.parametrize(
    ("repeated", "rule"),
    [
        (False, "RotaryEmbeddingInterleavedComputedHeadsFirstFusion"),
        (True, "RotaryEmbeddingInterleavedRepeatedAnglesFusion"),
    ],
)
def test_interleaved_rotary_of_angles_computed_with_dynamic_axes(repeated, rule):
    after = check(interleaved_computed_rotary(repeated), rule, True)
    assert ops(after)["RotaryEmbedding"] == 1 and "Neg" not in ops(after)


def halves_rotary(num_outputs: bool) -> onnx.ModelProto:
    """GPT-OSS's rotary: x1 * cos - x2 * sin, x2 * cos + x1 * sin over x's two halves,
    concatenated; cos and sin [1, 1, 3, 2] constants; the halves a Split with sizes, or with
    num_outputs 2 (opset 18)."""
    n = helper.make_node
    split = (
        n("Split", ["x"], ["x1", "x2"], axis=-1, num_outputs=2)
        if num_outputs
        else n("Split", ["x", "sizes"], ["x1", "x2"], axis=3)
    )
    nodes = [
        split,
        n("Mul", ["x1", "cos"], ["a"]),
        n("Mul", ["x2", "sin"], ["b"]),
        n("Sub", ["a", "b"], ["c1"]),
        n("Mul", ["x2", "cos"], ["c"]),
        n("Mul", ["x1", "sin"], ["d"]),
        n("Add", ["c", "d"], ["c2"]),
        n("Concat", ["c1", "c2"], ["y"], axis=-1),
    ]
    angles = np.arange(6, dtype=np.float32).reshape(1, 1, 3, 2) * 0.3
    inits = [init("cos", np.cos(angles)), init("sin", np.sin(angles)), init("sizes", np.array([2, 2], np.int64))]
    return model(
        nodes, [tensor("x", F, [2, 2, 3, 4])], [tensor("y", F, [2, 2, 3, 4])], inits, opset=18 if num_outputs else 17
    )


@pytest.mark.parametrize("num_outputs", [False, True])
def test_rotary_over_the_two_halves_spelled_out_is_rotary_embedding(num_outputs):
    after = check(halves_rotary(num_outputs), "RotaryEmbeddingHalvesFusion", True)
    assert ops(after) == {"RotaryEmbedding": 1}


def gptj_tiled_rotary() -> onnx.ModelProto:
    """GPT-J's rotary as TorchScript exports it with dynamic axes: x [batch, seq, 2, 4]
    heads-last, cos and sin of this call's angles ch, sh [1, seq, 2] unsqueezed at axes 2
    then 4 (two nodes, which the basic level merges), tiled by [1, 1, 1, 1, 2] and merged
    to [1, seq, 1, 4]."""
    n = helper.make_node
    nodes = [*rotate_every_two(), n("Reshape", ["k", "heads"], ["r"])]
    for h, out in (("ch", "cos"), ("sh", "sin")):
        nodes += [
            n("Unsqueeze", [h, "two"], [f"{h}2"]),
            n("Unsqueeze", [f"{h}2", "four"], [f"{h}4"]),
            n("Tile", [f"{h}4", "rep"], [f"{h}t"]),
            n("Reshape", [f"{h}t", "rows"], [out]),
        ]
    nodes += [n("Mul", ["x", "cos"], ["a"]), n("Mul", ["r", "sin"], ["b"]), n("Add", ["a", "b"], ["y"])]
    ints = {
        "zero": [0], "one": [1], "two": [2], "four": [4], "minus": [-1], "last": [3],
        "end": [np.iinfo(np.int64).max], "rep": [1, 1, 1, 1, 2], "rows": [0, 0, 1, -1], "heads": [0, 0, 2, -1],
    }  # fmt: skip
    inits = [init(name, np.array(v, np.int64)) for name, v in ints.items()]
    inputs = [tensor("x", F, ["batch", "seq", 2, 4]), tensor("ch", F, [1, "seq", 2]), tensor("sh", F, [1, "seq", 2])]
    return model(nodes, inputs, [tensor("y", F, ["batch", "seq", 2, 4])], inits)


def test_gptj_rotary_of_tiled_angles_fuses_after_the_basic_level_merges_the_unsqueezes():
    check(gptj_tiled_rotary(), "RotaryEmbeddingInterleavedTiledFusion", True)  # the extended pack alone
    before = gptj_tiled_rotary()
    result = rewriter.optimize(before, level="extended")
    assert result.report.applied("UnsqueezePairFusion") == 2
    assert result.report.applied("RotaryEmbeddingInterleavedTiledMergedFusion") == 1
    assert ops(result.model)["RotaryEmbedding"] == 1 and "Tile" not in ops(result.model)
    assert_same_outputs(before, result.model, atol=1e-5)


def sink_attention(start: int = 0, end: int = -1) -> onnx.ModelProto:
    """GPT-OSS's attention with a sink: q.k^T (FusedMatMul transB) plus the mask, each
    query's sink logit concatenated as one more column, Softmax, that column dropped (a
    Slice from ``start`` to ``end``), times V, heads merged: q, k, v [1, 2, 3, 4], mask
    [1, 1, 3, 3]."""
    n = helper.make_node
    nodes = [
        n("FusedMatMul", ["q", "k"], ["s"], domain="com.microsoft", alpha=0.5, transB=1),
        n("Add", ["s", "mask"], ["m"]),
        n("Concat", ["m", "sink"], ["c"], axis=-1),
        n("Softmax", ["c"], ["p"], axis=-1),
        n("Slice", ["p", "zero", "end", "last"], ["kept"]),
        n("MatMul", ["kept", "v"], ["o"]),
        n("Transpose", ["o"], ["t"], perm=[0, 2, 1, 3]),
        n("Reshape", ["t", "merged"], ["y"]),
    ]
    inits = [
        init("zero", np.array([start], np.int64)),
        init("end", np.array([end], np.int64)),
        init("last", np.array([3], np.int64)),
        init("merged", np.array([1, 3, 8], np.int64)),
        init("sink", np.broadcast_to(np.array([0.3, -0.7], np.float32).reshape(1, 2, 1, 1), (1, 2, 3, 1)).copy()),
    ]
    inputs = [tensor(name, F, [1, 2, 3, 4]) for name in "qkv"] + [tensor("mask", F, [1, 1, 3, 3])]
    return model(nodes, inputs, [tensor("y", F, [1, 3, 8])], inits, opset=17, domains=["com.microsoft"])


def test_attention_with_a_sink_is_multi_head_attention_over_a_zero_key():
    after = check(sink_attention(), "MultiHeadAttentionSinkTransBFusion", True)
    assert ops(after)["MultiHeadAttention"] == 1 and ops(after)["Pad"] == 2
    check(sink_attention(1, 4), "MultiHeadAttentionSinkTransBFusion", False)  # drops another column


def batched_heads_attention(mask: bool = True, zero_copy: bool = False) -> onnx.ModelProto:
    """LED's decoder attention (torch bmm over heads folded into the batch): q [2, 3, 8]
    and k, v [2, 5, 8], 2 heads of 4, viewed as [4, S, 4]; the mask added to the scores
    viewed as [2, 2, 3, 5]."""
    nodes = []
    for name in ("q", "k", "v"):
        nodes += [
            helper.make_node("Reshape", [name, f"s_{name}"], [f"{name}4"]),
            helper.make_node("Transpose", [f"{name}4"], [f"{name}t"], perm=[0, 2, 1, 3]),
            helper.make_node(
                "Reshape", [f"{name}t", "fold" if name != "k" or not zero_copy else "fold0"], [f"{name}3"]
            ),
        ]
    nodes += [
        helper.make_node("Transpose", ["k3"], ["kT"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q3", "kT"], ["scores"]),
    ]
    if mask:
        nodes += [
            helper.make_node("Reshape", ["scores", "unfold_scores"], ["s4"]),
            helper.make_node("Add", ["s4", "mask"], ["masked"]),
            helper.make_node("Reshape", ["masked", "fold_scores"], ["s3"]),
        ]
    nodes += [
        helper.make_node("Softmax", ["s3" if mask else "scores"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v3"], ["o3"]),
        helper.make_node("Reshape", ["o3", "unfold"], ["o4"]),
        helper.make_node("Transpose", ["o4"], ["ot"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ot", "merge"], ["y"]),
    ]
    mask_values = np.where(np.tril(np.ones((3, 5))) > 0, 0.0, -1e9).astype(np.float32)[None, None]
    inits = [
        init("s_q", np.array([2, 3, 2, 4], np.int64)),
        init("s_k", np.array([2, 5, 2, 4], np.int64)),
        init("s_v", np.array([2, -1, 2, 4], np.int64)),
        init("fold", np.array([4, -1, 4], np.int64)),
        init("fold0", np.array([0, -1, 4], np.int64)),  # a 0 copies the batch, 2, not 4
        init("unfold_scores", np.array([2, 2, 3, 5], np.int64)),
        init("fold_scores", np.array([4, 3, 5], np.int64)),
        init("mask", np.repeat(mask_values, 2, axis=0)),
        init("unfold", np.array([2, 2, 3, 4], np.int64)),
        init("merge", np.array([2, 3, 8], np.int64)),
    ]
    return model(
        nodes,
        [tensor("q", F, [2, 3, 8]), tensor("k", F, [2, 5, 8]), tensor("v", F, [2, 5, 8])],
        [tensor("y", F, [2, 3, 8])],
        inits,
    )


@pytest.mark.parametrize("mask", [True, False])
def test_attention_over_heads_folded_into_the_batch_is_multi_head_attention(mask):
    before = batched_heads_attention(mask)
    after = rewriter.optimize(before, level="extended").model
    assert ops(after) == {"MultiHeadAttention": 1}
    assert_same_outputs(before, after)


def test_a_fold_that_copies_the_batch_is_not_attention():
    before = batched_heads_attention(zero_copy=True)
    after = rewriter.optimize(before, level="extended").model
    assert "MultiHeadAttention" not in ops(after)


def test_attention_with_a_gate_on_each_heads_output_is_multi_head_attention():
    """Laguna: softmax(q.k^T * scale + mask).v, heads moved back, times a per-head gate
    [B, S, N, 1] before the heads are merged."""
    nodes = [
        helper.make_node("Transpose", ["k"], ["kT"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kT"], ["qk"]),
        helper.make_node("Mul", ["qk", "scale"], ["s"]),
        helper.make_node("Add", ["s", "mask"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["pv"]),
        helper.make_node("Transpose", ["pv"], ["o"], perm=[0, 2, 1, 3]),
        helper.make_node("Sigmoid", ["gate_in"], ["gate"]),
        helper.make_node("Mul", ["o", "gate"], ["gated"]),
        helper.make_node("Reshape", ["gated", "merge"], ["y"]),
    ]
    mask = np.where(np.tril(np.ones((3, 3))) > 0, 0.0, -1e9).astype(np.float32)[None, None]
    inits = [init("scale", np.array(0.5, np.float32)), init("mask", mask), init("merge", np.array([0, 0, 8], np.int64))]
    before = model(
        nodes,
        [
            tensor("q", F, [2, 2, 3, 4]),
            tensor("k", F, [2, 2, 3, 4]),
            tensor("v", F, [2, 2, 3, 4]),
            tensor("gate_in", F, [2, 3, 2, 1]),
        ],
        [tensor("y", F, [2, 3, 8])],
        inits,
    )
    after = rewriter.optimize(before, level="extended").model
    assert ops(after)["MultiHeadAttention"] == 1 and "Softmax" not in ops(after)
    assert_same_outputs(before, after)


LOWEST = float(np.finfo(np.float32).min)


def masked_scores_graph(form: str) -> onnx.ModelProto:
    """projected_attention_graph with the mask applied as three decoders export it:
    clamp (XGLM: Max(scores + mask, lowest)), kept (GPT-Neo: Where(causal, scores, lowest)
    plus the padding mask), divided (CodeGen: (scores + mask) / c)."""
    base = projected_attention_graph()
    nodes, extra = [], []
    for node in base.graph.node:
        if node.op_type == "Add" and list(node.input) == ["s", "mask"]:
            if form == "clamp":
                nodes += [
                    helper.make_node("Where", ["keep", "zero", "low"], ["m"]),
                    helper.make_node("Add", ["s", "m"], ["t"]),
                    helper.make_node("Max", ["t", "low"], ["a"]),
                ]
            elif form == "kept":
                nodes += [
                    helper.make_node("Where", ["causal", "s", "low"], ["w"]),
                    helper.make_node("Add", ["w", "mask"], ["a"]),
                ]
            else:
                nodes += [
                    helper.make_node("Where", ["keep", "zero", "low"], ["m"]),
                    helper.make_node("Add", ["s", "m"], ["t"]),
                    helper.make_node("Div", ["t", "two"], ["a"]),
                ]
            continue
        nodes.append(node)
    causal = np.tril(np.ones((3, 3), bool))[None, None]
    extra = [init("zero", np.float32(0.0)), init("low", np.float32(LOWEST)), init("two", np.float32(2.0))]
    extra.append(init("causal", causal))
    inputs = [tensor("x", F, [2, 3, 8])]
    inputs.append(tensor("mask", F, [2, 1, 3, 3]) if form == "kept" else tensor("keep", TensorProto.BOOL, [2, 1, 3, 3]))
    inits = list(base.graph.initializer) + extra
    return model(nodes, inputs, [tensor("y", F, [2, 3, 8])], inits, domains=["com.microsoft"])


@pytest.mark.parametrize(
    "form, rule",
    [
        ("clamp", "SoftmaxLowestClampElimination"),
        ("kept", "SoftmaxFilledFusedScoresFusion"),
        ("divided", "SoftmaxDividedMaskFusion"),
    ],
)
def test_scores_masked_as_decoders_export_them_become_one_bias_and_fuse(form, rule):
    """The clamp, the causal fill and the scale after the mask are moved off the scores, so
    the attention fuses; the numbers stay, fully masked rows included."""
    from helpers import run

    before = masked_scores_graph(form)
    check(before, rule, True)
    after = rewriter_extended(before)
    assert ops(after)["Attention"] + ops(after)["MultiHeadAttention"] == 1 and ops(after)["Softmax"] == 0
    rng = np.random.default_rng(5)
    feeds = {"x": rng.standard_normal((2, 3, 8)).astype(np.float32)}
    if form == "kept":
        feeds["mask"] = np.where(rng.random((2, 1, 3, 3)) < 0.3, LOWEST, 0.0).astype(np.float32)
        feeds["mask"][1, 0, 2, :] = LOWEST  # a query that sees no key
    else:
        feeds["keep"] = rng.random((2, 1, 3, 3)) < 0.7
        feeds["keep"][1, 0, 2, :] = False
    (want,), (got,) = run(before, feeds), run(after, feeds)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_a_mask_holding_minus_infinity_keeps_its_clamp():
    """Max(scores + mask, lowest) turns a fully masked row of -inf uniform where the Softmax
    alone would make it NaN: the clamp stays."""
    before = masked_scores_graph("clamp")
    for tensor_ in before.graph.initializer:
        if tensor_.name == "low":
            tensor_.CopyFrom(init("low", np.float32(-np.inf)))
    before.graph.initializer.append(init("lowest", np.float32(LOWEST)))
    max_node = next(n for n in before.graph.node if n.op_type == "Max")
    max_node.input[1] = "lowest"
    check(before, "SoftmaxLowestClampElimination", False)


def split_heads_onnx_attention(kv_heads: int = 2, past: bool = False, merge=(0, 0, -1)):
    """The dynamo exporter's scaled_dot_product_attention at opset 23: q, k and v [B, S, 8]
    split into heads by Reshape + Transpose, ONNX's Attention with a boolean mask, the
    output's heads merged back (with a cache: past key and value inputs, present outputs)."""
    n = helper.make_node
    nodes = []
    for name in ("q", "k", "v"):
        nodes += [
            n("Reshape", [name, f"s{name}"], [f"{name}r"]),
            n("Transpose", [f"{name}r"], [f"{name}t"], perm=[0, 2, 1, 3]),
        ]
    inputs = ["qt", "kt", "vt"] + (["", "pk", "pv"] if past else ["mask"])  # (a mask would be P + T long)
    outputs = ["o"] + (["pk_out", "pv_out"] if past else [])
    nodes += [
        n("Attention", inputs, outputs, scale=0.3),
        n("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
        n("Reshape", ["ot", "so"], ["y"]),
    ]
    kv_width = 4 * kv_heads
    inits = [
        init("sq", np.array([0, 0, 2, 4], np.int64)),
        init("sk", np.array([0, 0, kv_heads, 4], np.int64)),
        init("sv", np.array([0, 0, kv_heads, 4], np.int64)),
        init("so", np.array(merge, np.int64)),
    ]
    graph_inputs = [
        tensor("q", F, ["B", "S", 8]),
        tensor("k", F, ["B", "T", kv_width]),
        tensor("v", F, ["B", "T", kv_width]),
    ] + ([] if past else [tensor("mask", TensorProto.BOOL, ["B", 1, "S", "T"])])
    graph_outputs = [tensor("y", F, ["B", "S", 8] if tuple(merge) == (0, 0, -1) else ["B", "M", 4])]
    if past:
        graph_inputs += [tensor(name, F, ["B", kv_heads, "P", 4]) for name in ("pk", "pv")]
        graph_outputs += [tensor(name, F, ["B", kv_heads, "L", 4]) for name in ("pk_out", "pv_out")]
    return model(nodes, graph_inputs, graph_outputs, inits, opset=23)


@pytest.mark.parametrize("kv_heads", [2, 1])
def test_onnx_attention_of_split_heads_takes_the_3d_inputs(kv_heads):
    """Fewer key/value heads (grouped-query) are kv_num_heads; the view and transposes go."""
    after = check(split_heads_onnx_attention(kv_heads), "AttentionSplitHeadsFolding", True)
    assert ops(after) == {"Attention": 1}
    (node,) = after.graph.node
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert attributes["q_num_heads"] == 2 and attributes["kv_num_heads"] == kv_heads
    assert np.isclose(attributes["scale"], 0.3)


def test_onnx_attention_with_a_cache_or_another_merge_keeps_its_heads():
    """Past key/value inputs (present outputs read the 4-D heads) are not folded, nor an
    output merged to another width than the heads side by side."""
    check(split_heads_onnx_attention(past=True), "AttentionSplitHeadsFolding", False)
    check(split_heads_onnx_attention(merge=(0, -1, 4)), "AttentionSplitHeadsFolding", False)


def key_padding_attention() -> onnx.ModelProto:
    """An Attention whose bias is an encoder's key padding mask as transformers 4.x and
    optimum export it: Where(bool(1 - float(m)), finfo.min, 1 - float(m)) over
    Expand(m[:, None, None, :]) to [B, 1, S, S], the Expand's target computed from shapes."""
    n = helper.make_node
    shape_nodes = [
        n("Shape", ["m"], ["ms"]),
        n("Shape", ["x"], ["xs"]),
        n("Gather", ["ms", "zero"], ["b"], axis=0),
        n("Gather", ["xs", "one_i"], ["s"], axis=0),
        n("Gather", ["ms", "one_i"], ["t"], axis=0),
        n("Unsqueeze", ["b", "axis0"], ["b1"]),
        n("Unsqueeze", ["s", "axis0"], ["s1"]),
        n("Unsqueeze", ["t", "axis0"], ["t1"]),
        n("Concat", ["b1", "ones1", "s1", "t1"], ["target"], axis=0),
    ]
    nodes = shape_nodes + [
        n("Unsqueeze", ["m", "axes12"], ["u"]),
        n("Expand", ["u", "target"], ["e"]),
        n("Cast", ["e"], ["f"], to=F),
        n("Sub", ["one", "f"], ["d"]),
        n("Cast", ["d"], ["c"], to=TensorProto.BOOL),
        n("Where", ["c", "fill", "d"], ["bias"]),
        n("Attention", ["x", "w", "wb", "", "", "bias"], ["y"], domain="com.microsoft", num_heads=2),
    ]
    inits = [
        init("zero", np.array(0, np.int64)),
        init("one_i", np.array(1, np.int64)),
        init("axis0", np.array([0], np.int64)),
        init("ones1", np.array([1], np.int64)),
        init("axes12", np.array([1, 2], np.int64)),
        init("one", np.array(1.0, np.float32)),
        init("fill", np.array(np.finfo(np.float32).min, np.float32)),
        init("w", rand(8, 24)),
        init("wb", rand(24)),
    ]
    inputs = [tensor("x", F, ["B", "S", 8]), tensor("m", TensorProto.INT64, ["B", "S"])]
    return model(nodes, inputs, [tensor("y", F, ["B", "S", 8])], inits, domains=["com.microsoft"])


def test_a_key_padding_bias_becomes_the_attentions_own_mask():
    """The 4-D bias becomes a 2-D mask (Equal(m, 1) as int32, the fill as mask_filter_value):
    the same numbers for masks of 0 and 1 and for other values, which the bias masks too."""
    before = key_padding_attention()
    after = check(before, "AttentionKeyPaddingMask", True)
    assert ops(after) == {"Attention": 1, "Equal": 1, "Cast": 1}
    for mask in ([[1, 1, 0, 1], [0, 0, 0, 0]], [[2, 1, -1, 1], [1, 3, 1, 0]]):
        feeds = {"x": rand(2, 4, 8), "m": np.array(mask, np.int64)}
        np.testing.assert_allclose(run(after, feeds)[0], run(before, feeds)[0], atol=1e-5)
