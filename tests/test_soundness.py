"""Engine guarantees that keep a model's numbers whatever a rule says, and regression tests
for the shipped rules that once broke them.  One test per class of bug: an attribute of a
deleted node dropped by the replacement, a replacement outside its op schema's types, a
structural precondition missing, and edge semantics (non-finite masks, negative indices,
a stale value_info)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import assert_same_outputs, init, model, ops, optimize_with, run, tensor
from onnx import TensorProto, helper

import rewriter
from rewriter.errors import RuleError

F, F16, D = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE


def extended(m: onnx.ModelProto, **options):
    options.setdefault("providers", "CPU")
    return rewriter.optimize(m, level="extended", **options)


def assert_valid_and_equal(before: onnx.ModelProto, after: onnx.ModelProto, feeds: dict, atol: float = 1e-4) -> None:
    rewriter.check_model(after, full_check=True)
    for a, b in zip(run(before, feeds), run(after, feeds)):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, atol=atol, rtol=1e-4)


# ------------------------------------------------- every attribute of a deleted node counts


def _causal_attention(unidirectional: int) -> onnx.ModelProto:
    """q, k, v projections of one input into a MultiHeadAttention (as our own fusions make
    it), causal: attention fusion may not forget that."""
    rng = np.random.default_rng(0)
    w = {n: rng.standard_normal((8, 8)).astype(np.float32) for n in "qkv"}
    b = {n: rng.standard_normal(8).astype(np.float32) for n in "qkv"}
    nodes, inits = [], []
    for n in "qkv":
        nodes += [
            helper.make_node("MatMul", ["x", f"w{n}"], [f"m{n}"]),
            helper.make_node("Add", [f"m{n}", f"b{n}"], [n]),
        ]
        inits += [init(f"w{n}", w[n]), init(f"b{n}", b[n])]
    nodes.append(
        helper.make_node(
            "MultiHeadAttention",
            ["q", "k", "v"],
            ["y"],
            domain="com.microsoft",
            num_heads=2,
            unidirectional=unidirectional,
        )
    )
    return model(nodes, [tensor("x", F, [1, 4, 8])], [tensor("y", F, [1, 4, 8])], inits, domains=["com.microsoft"])


def test_attention_fusion_keeps_causal_attention_causal():
    before = _causal_attention(1)
    after = extended(before).model
    feeds = {"x": np.random.default_rng(1).standard_normal((1, 4, 8)).astype(np.float32)}
    assert_valid_and_equal(before, after, feeds)


def test_attention_fusion_still_applies_to_bidirectional_attention():
    after = extended(_causal_attention(0)).model
    assert ops(after)["Attention"] == 1


def test_engine_refuses_to_delete_a_node_whose_unmentioned_attribute_is_not_default():
    """A rule that does not mention an attribute matches only nodes that leave it at its
    schema default: the engine checks every attribute of every node a rewrite deletes."""
    text = "pack t level 1\nrule NegNeg { y = LeakyRelu(LeakyRelu(x)) => y = x }"
    leaky = model(
        [helper.make_node("LeakyRelu", ["x"], ["t"], alpha=0.5), helper.make_node("LeakyRelu", ["t"], ["y"])],
        [tensor("x", F, [3])],
        [tensor("y", F, [3])],
    )
    result = optimize_with(leaky, text)
    assert result.report.applied("NegNeg") == 0
    assert result.report.rules[0].refused == 1


def test_check_reports_a_captured_attribute_the_rule_never_uses():
    text = "pack t level 1\nrule Drops { y = Softmax(x) {axis: a} => y = Softmax(x) }\n"
    with pytest.raises(RuleError) as caught:
        rewriter.load_pack_text(text, "drops.rules")
    error = caught.value
    assert (error.line, error.column) == (2, 30)
    assert "axis" in str(error) and "never used" in str(error)


def test_any_value_is_said_explicitly_and_then_matches_every_value():
    text = "pack t level 1\nrule DropoutAnySeed { y = Dropout(x) {seed: _} => y = x }\n"
    drop = model(
        [helper.make_node("Dropout", ["x"], ["d"], seed=7), helper.make_node("Relu", ["d"], ["r"])],
        [tensor("x", F, [3])],
        [tensor("r", F, [3])],
    )
    assert optimize_with(drop, text).report.applied("DropoutAnySeed") == 1


def test_spreading_a_nodes_attributes_accounts_for_all_of_them():
    text = "pack t level 1\nrule ReluConv root c { c = Conv(x, W) y = Relu(c) => y = Max(Conv(x, W) {...c}, 0.0) }\n"
    conv = model(
        [
            helper.make_node("Conv", ["x", "W"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["y"]),
        ],
        [tensor("x", F, [1, 2, 5, 5])],
        [tensor("y", F, [1, 3, 3, 3])],
        [init("W", np.ones((3, 2, 3, 3), np.float32))],
    )
    after = optimize_with(conv, text)
    assert after.report.applied("ReluConv") == 1
    assert_same_outputs(conv, after.model)


# ------------------------------------------------ replacements obey their schema's types


def _layernorm_of_sum(dtype: int) -> onnx.ModelProto:
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    return model(
        [
            helper.make_node("Add", ["a", "b"], ["s"]),
            helper.make_node("LayerNormalization", ["s", "g", "beta"], ["y"], axis=-1),
        ],
        [tensor("a", dtype, [1, 3, 4]), tensor("b", dtype, [1, 3, 4])],
        [tensor("y", dtype, [1, 3, 4])],
        [init("g", np.ones(4, np_type)), init("beta", np.zeros(4, np_type))],
    )


def test_skip_layernorm_fusion_leaves_double_alone():
    """SkipLayerNormalization's schema allows float, float16 and bfloat16 only (the CPU
    kernel table lists double; onnxruntime still refuses the model)."""
    before = _layernorm_of_sum(D)
    after = extended(before, providers="CUDA").model
    assert "SkipLayerNormalization" not in ops(after)
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal((1, 3, 4)) for n in "ab"}
    assert_valid_and_equal(before, after, feeds)


def test_skip_layernorm_fusion_still_applies_to_float():
    assert ops(extended(_layernorm_of_sum(F), providers="CUDA").model)["SkipLayerNormalization"] == 1


def _conv_bn_mixed(op: str) -> onnx.ModelProto:
    """Opset-15 BatchNormalization: fp16 input, fp32 statistics (valid ONNX)."""
    rng = np.random.default_rng(0)
    stats = [init(n, (rng.uniform(0.5, 1.5, 3)).astype(np.float32)) for n in ("s", "b", "mean", "var")]
    if op == "Conv":
        first = helper.make_node("Conv", ["x", "W"], ["c"])
        weight = init("W", rng.standard_normal((3, 2, 1, 1)).astype(np.float16))
        x, y = tensor("x", F16, [1, 2, 4, 4]), tensor("y", F16, [1, 3, 4, 4])
    else:
        first = helper.make_node("MatMul", ["x", "W"], ["c"])
        weight = init("W", rng.standard_normal((2, 3)).astype(np.float16))
        x, y = tensor("x", F16, [5, 2]), tensor("y", F16, [5, 3])
    bn = helper.make_node("BatchNormalization", ["c", "s", "b", "mean", "var"], ["y"])
    return model([first, bn], [x], [y], [weight, *stats], opset=15)


@pytest.mark.parametrize("op", ["Conv", "MatMul"])
def test_batchnorm_folds_never_mix_precisions(op):
    before = _conv_bn_mixed(op)
    after = rewriter.optimize(before, level="basic").model
    shape = (1, 2, 4, 4) if op == "Conv" else (5, 2)
    feeds = {"x": np.random.default_rng(2).standard_normal(shape).astype(np.float16)}
    assert_valid_and_equal(before, after, feeds, atol=2e-2)


def test_engine_refuses_a_replacement_outside_the_schemas_types():
    text = "pack t level 1\nrule ToFloat { y = Relu(x) => y = Relu(cast(x, float)) }\n"  # x: fp16 constant
    m = model(
        [helper.make_node("Relu", ["x"], ["y"])], [], [tensor("y", F16, [2])], [init("x", np.ones(2, np.float16))]
    )
    result = optimize_with(m, text)
    assert result.report.applied("ToFloat") == 0


def test_engine_refuses_an_alias_that_changes_a_values_shape():
    """`y = x` where x and y have different static shapes would change the model."""
    text = "pack t level 1\nrule Careless { y = Add(x, 0.0) => y = x }\n"
    m = model(
        [helper.make_node("Add", ["x", "z"], ["y"])],
        [tensor("x", F, [3])],
        [tensor("y", F, [2, 3])],
        [init("z", np.zeros((2, 1), np.float32))],
    )
    assert optimize_with(m, text).report.applied("Careless") == 0


# --------------------------------------------------------- structural preconditions


def test_flattened_gemm_needs_the_leading_axes_flattened():
    """Reshape [2, 4, 6] -> [4, 12] then Gemm is not x @ W on the last axis."""
    rng = np.random.default_rng(0)
    before = model(
        [
            helper.make_node("Reshape", ["x", "s1"], ["r"]),
            helper.make_node("Gemm", ["r", "w", "c"], ["g"]),
            helper.make_node("Reshape", ["g", "s2"], ["y"]),
        ],
        [tensor("x", F, [2, 4, 6])],
        [tensor("y", F, [2, 2, 5])],
        [
            init("s1", np.array([4, 12], np.int64)),
            init("w", rng.standard_normal((12, 5)).astype(np.float32)),
            init("c", rng.standard_normal(5).astype(np.float32)),
            init("s2", np.array([2, 2, 5], np.int64)),
        ],
    )
    after = extended(before).model
    feeds = {"x": rng.standard_normal((2, 4, 6)).astype(np.float32)}
    assert_valid_and_equal(before, after, feeds)


def test_skip_layernorm_fusion_needs_gamma_as_long_as_the_last_axis():
    """LayerNormalization broadcasts a [1] gamma over the last axis; SkipLayerNormalization
    refuses it.  With dynamic axes the engine cannot see the difference: the rule must."""
    before = model(
        [
            helper.make_node("Add", ["a", "b"], ["s"]),
            helper.make_node("LayerNormalization", ["s", "g"], ["y"], axis=-1),
        ],
        [tensor("a", F, ["B", "S", "H"]), tensor("b", F, ["B", "S", "H"])],
        [tensor("y", F, ["B", "S", "H"])],
        [init("g", np.array([1.5], np.float32))],
    )
    after = extended(before, providers="CUDA").model
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal((2, 3, 4)).astype(np.float32) for k in "ab"}
    assert_valid_and_equal(before, after, feeds)


# ------------------------------------------------------------------- edge semantics


def _guarded_softmax(mask_value: float, dtype=np.float32) -> onnx.ModelProto:
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    return model(
        [
            helper.make_node("Where", ["c", "zero_m", "low"], ["mask"]),
            helper.make_node("Add", ["s", "mask"], ["t"]),
            helper.make_node("Softmax", ["t"], ["p"], axis=-1),
            helper.make_node("IsNaN", ["p"], ["n"]),
            helper.make_node("Where", ["n", "zero", "p"], ["y"]),
        ],
        [tensor("s", elem, [1, 2, 3]), tensor("c", TensorProto.BOOL, [1, 1, 3])],
        [tensor("y", elem, [1, 2, 3])],
        [
            init("zero_m", np.array(0, dtype)),
            init("low", np.array(mask_value, dtype)),
            init("zero", np.array(0, dtype)),
        ],
    )


def test_softmax_guard_stays_when_the_mask_can_overflow_finite_scores():
    low = float(np.finfo(np.float32).min)
    before = _guarded_softmax(low)
    after = extended(before).model
    feeds = {"s": np.full((1, 2, 3), -1e32, np.float32), "c": np.array([[[True, True, True]]])}
    assert_valid_and_equal(before, after, feeds)


def test_softmax_guard_goes_when_no_finite_score_can_overflow():
    after = extended(_guarded_softmax(-10000.0)).model
    assert "IsNaN" not in ops(after)


def _embeddings() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Gather", ["word", "ids"], ["w"]),
        helper.make_node("Gather", ["seg", "types"], ["t"]),
        helper.make_node("Add", ["w", "t"], ["a"]),
        helper.make_node("Add", ["a", "pos"], ["s"]),
        helper.make_node("LayerNormalization", ["s", "g", "beta"], ["y"], axis=-1),
    ]
    inits = [
        init("word", rng.standard_normal((7, 8)).astype(np.float32)),
        init("seg", rng.standard_normal((2, 8)).astype(np.float32)),
        init("pos", rng.standard_normal((1, 5, 8)).astype(np.float32)),
        init("g", np.ones(8, np.float32)),
        init("beta", np.zeros(8, np.float32)),
    ]
    return model(
        nodes,
        [tensor("ids", TensorProto.INT64, [1, 5]), tensor("types", TensorProto.INT64, [1, 5])],
        [tensor("y", F, [1, 5, 8])],
        inits,
    )


def test_embed_layernorm_fusion_accepts_negative_ids_as_gather_does():
    before = _embeddings()
    after = extended(before, providers="CUDA").model
    assert "EmbedLayerNormalization" in ops(after)
    feeds = {"ids": np.array([[-1, 0, 3, -7, 6]], np.int64), "types": np.array([[0, -1, 1, -2, 0]], np.int64)}
    assert_valid_and_equal(before, after, feeds)


def test_a_stale_value_info_does_not_remove_a_real_reshape():
    """value_info claims the Reshape's output has the input's shape; inference knows better."""
    before = model(
        [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Relu", ["r"], ["y"])],
        [tensor("x", F, [2, 3])],
        [tensor("y", F, [3, 2])],
        [init("s", np.array([3, 2], np.int64))],
        value_info=[tensor("r", F, [2, 3])],
    )
    after = rewriter.optimize(before, level="basic").model
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    assert run(after, feeds)[0].shape == (3, 2)
