"""QDQ models: Quantize(op(Dequantize(...))) becomes the op onnxruntime runs on integers."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest
from helpers import init, model, run, tensor
from onnx import TensorProto, helper, numpy_helper

import rewriter

F, U8, I8, I32 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32
RNG = np.random.default_rng(11)


def scalar(name: str, value, dtype=np.float32) -> TensorProto:
    return init(name, np.array(value, dtype))


def qdq_conv(
    bias_scale: float | None = None, moved_scale: float = 0.1, activations=np.uint8, ys: float = 0.1
) -> onnx.ModelProto:
    """float x -> Q -> DQ -> Conv(DQ(w int8), DQ(b int32)) -> Q -> DQ -> Reshape -> Q -> DQ -> y
    (activations uint8 with zero point 128, or int8 with 0: quantize_static's S8S8)."""
    xs, ws = 0.05, 0.02
    zero = 128 if activations == np.uint8 else 0
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"]),
        helper.make_node("DequantizeLinear", ["bq", "bs"], ["b"]),
        helper.make_node("Conv", ["xd", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["cq"]),
        helper.make_node("DequantizeLinear", ["cq", "ys", "yz"], ["cd"]),
        helper.make_node("Reshape", ["cd", "shape"], ["r"]),
        helper.make_node("QuantizeLinear", ["r", "ms", "yz"], ["rq"]),
        helper.make_node("DequantizeLinear", ["rq", "ms", "yz"], ["y"]),
    ]
    inits = [
        scalar("xs", xs),
        scalar("xz", zero, activations),
        init("wq", RNG.integers(-20, 20, (8, 4, 3, 3)).astype(np.int8)),
        scalar("ws", ws),
        scalar("wz", 0, np.int8),
        init("bq", RNG.integers(-500, 500, 8).astype(np.int32)),
        init("bs", np.array([bias_scale or xs * ws], np.float32)),
        scalar("ys", ys),
        scalar("yz", zero, activations),
        scalar("ms", moved_scale),
        init("shape", np.array([1, 8, 36], np.int64)),
    ]
    return model(nodes, [tensor("x", F, [1, 4, 6, 6])], [tensor("y", F, [1, 8, 36])], inits)


def ops(m: onnx.ModelProto) -> Counter:
    return Counter(n.op_type for n in m.graph.node)


def steps_apart(before: onnx.ModelProto, after: onnx.ModelProto, step: float) -> float:
    feeds = {"x": RNG.standard_normal((1, 4, 6, 6)).astype(np.float32) * 3}
    (want,), (got,) = run(before, feeds), run(after, feeds)
    return float(np.abs(want - got).max() / step)


ONE_STEP = 1 + 1e-4  # one step, as float32 outputs measure it (1.0000002 steps at times)


def test_a_qdq_convolution_becomes_qlinear_conv_and_moves_stay_on_integers():
    before = qdq_conv()
    after = rewriter.optimize(before, level="extended", providers="CPU").model
    # the Reshape between equal Q/DQ runs on the integers; one Q at the input, one DQ out
    assert ops(after) == {"QuantizeLinear": 1, "QLinearConv": 1, "Reshape": 1, "DequantizeLinear": 1}
    assert steps_apart(before, after, 0.1) <= ONE_STEP  # one quantization step at most
    rewriter.check_model(after, full_check=True)


def test_int8_activation_pairs_move_to_uint8_and_the_convolution_fuses():
    """S8S8 QDQ (quantize_static's recommended format): every Quantize read only by its
    Dequantize moves to uint8 (zero point + 128, the same float values), as onnxruntime does on
    x86 without int8 kernels, and the convolution fuses on uint8 activations."""
    before = qdq_conv(activations=np.int8)
    after = rewriter.optimize(before, level="extended", providers="CPU").model
    assert ops(after)["QLinearConv"] == 1 and "Conv" not in ops(after)
    zero_points = {t.name: t for t in after.graph.initializer}
    (conv,) = [n for n in after.graph.node if n.op_type == "QLinearConv"]
    assert zero_points[conv.input[2]].data_type == U8 and zero_points[conv.input[7]].data_type == U8
    assert steps_apart(before, after, 0.1) <= ONE_STEP


def same_padded_qdq_conv(activations=np.uint8, pad_value=None) -> onnx.ModelProto:
    """TensorFlow-style "same" padding as TorchScript writes it (HF MobileNet v1), quantized
    with quantize_static: x -> Q -> DQ -> Pad(value DQ(0)) -> Q -> DQ -> Conv(pads 0) -> Q ->
    DQ -> y; the Pad pads the bottom and right edges only.  ``pad_value``: a plain float
    padding value instead."""
    zero = 128 if activations == np.uint8 else 0
    value = ["pv"] if pad_value is not None else ["pvd"]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        *([helper.make_node("DequantizeLinear", ["pvq", "one", "pvq"], ["pvd"])] if pad_value is None else []),
        helper.make_node("Pad", ["xd", "pads", *value], ["p"], mode="constant"),
        helper.make_node("QuantizeLinear", ["p", "xs", "xz"], ["pq"]),
        helper.make_node("DequantizeLinear", ["pq", "xs", "xz"], ["pd"]),
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"]),
        helper.make_node("Conv", ["pd", "w"], ["c"], strides=[2, 2]),
        helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["cq"]),
        helper.make_node("DequantizeLinear", ["cq", "ys", "yz"], ["y"]),
    ]
    inits = [
        scalar("xs", 0.05),
        scalar("xz", zero, activations),
        scalar("pvq", 0, np.int8),
        scalar("one", 1.0),
        scalar("pv", pad_value if pad_value is not None else 0.0),
        init("pads", np.array([0, 0, 0, 0, 0, 0, 1, 1], np.int64)),
        init("wq", RNG.integers(-20, 20, (8, 4, 3, 3)).astype(np.int8)),
        scalar("ws", 0.02),
        scalar("wz", 0, np.int8),
        scalar("ys", 0.1),
        scalar("yz", zero, activations),
    ]
    return model(nodes, [tensor("x", F, [1, 4, 6, 6])], [tensor("y", F, [1, 8, 3, 3])], inits)


@pytest.mark.parametrize("activations", [np.uint8, np.int8], ids=["U8S8", "S8S8"])
def test_a_quantized_same_padding_folds_into_the_quantized_convolution(activations):
    """The Quantize after the Pad moves before it (the padding value quantized with it),
    cancels the Dequantize there, and the Pad of the integers with their zero point becomes
    the QLinearConv's own padding; int8 activations move to uint8 through the Pad too."""
    before = same_padded_qdq_conv(activations)
    after = rewriter.optimize(before, level="extended", providers="CPU").model
    assert ops(after) == {"QuantizeLinear": 1, "QLinearConv": 1, "DequantizeLinear": 1}
    (conv,) = [n for n in after.graph.node if n.op_type == "QLinearConv"]
    assert helper.get_attribute_value(next(a for a in conv.attribute if a.name == "pads")) == [0, 0, 1, 1]
    assert steps_apart(before, after, 0.1) <= ONE_STEP
    rewriter.check_model(after, full_check=True)


def test_a_padding_value_other_than_zero_stays_a_pad_on_the_integers():
    """Padding with 0.37 quantizes to an integer other than the zero point: the Pad moves
    onto the integers with that integer and stays, the convolution still fuses."""
    before = same_padded_qdq_conv(pad_value=0.37)
    after = rewriter.optimize(before, level="extended", providers="CPU").model
    assert ops(after) == {"QuantizeLinear": 1, "Pad": 1, "QLinearConv": 1, "DequantizeLinear": 1}
    (pad,) = [n for n in after.graph.node if n.op_type == "Pad"]
    values = {t.name: onnx.numpy_helper.to_array(t) for t in after.graph.initializer}
    assert values[pad.input[2]] == 128 + round(0.37 / 0.05)
    assert steps_apart(before, after, 0.1) <= ONE_STEP


def test_a_bias_of_another_scale_is_requantized_and_a_requantizing_move_is_left():
    """quantize_static widens a bias's scale where the bias would overflow int32 at x_scale *
    w_scale (per-channel models with large biases): the bias is requantized at that scale
    (its rounding is a fraction of the output's step) and the convolution fuses."""
    before = qdq_conv(bias_scale=0.003, moved_scale=0.2)
    after = rewriter.optimize(before, level="extended", providers="CPU").model
    assert ops(after)["QLinearConv"] == 1 and ops(after)["Reshape"] == 1 and ops(after)["QuantizeLinear"] == 2
    assert steps_apart(before, after, 0.2) <= ONE_STEP
    (conv,) = [n for n in after.graph.node if n.op_type == "QLinearConv"]
    bias = numpy_helper.to_array(next(t for t in after.graph.initializer if t.name == conv.input[8]))
    original = numpy_helper.to_array(next(t for t in before.graph.initializer if t.name == "bq"))
    assert np.array_equal(bias, np.floor(original * 3.0 + 0.5).astype(np.int32))


@pytest.mark.parametrize("bias_scale, ys", [(0.003, 0.01), (0.001 * 3e6, 0.1)])
def test_a_bias_whose_requantization_would_show_is_left(bias_scale, ys):
    """Requantizing rounds the bias by up to half of x_scale * w_scale: left where that is
    more than 1/128 of the output's step, or where the bias would not fit well inside int32."""
    after = rewriter.optimize(qdq_conv(bias_scale=bias_scale, ys=ys), level="extended", providers="CPU").model
    assert "QLinearConv" not in ops(after)


@pytest.mark.parametrize(
    "bias_scale, fused", [(0.05 * 0.02, True), (3 * 0.05 * 0.02, True), (0.05 * 0.02 * 3e7, False)]
)
def test_a_quantized_gemm_requantizes_a_bias_of_another_scale_where_that_fits(bias_scale, fused):
    """QGemm adds an int32 bias of scale a_scale * b_scale: a bias quantize_static gave
    another scale is requantized (within one output step), not where it would overflow."""
    nodes = [
        helper.make_node("DequantizeLinear", ["aq", "sa", "za"], ["a"]),
        helper.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["b"]),
        helper.make_node("DequantizeLinear", ["cq", "sc"], ["c"]),
        helper.make_node("Gemm", ["a", "b", "c"], ["g"], transB=1),
        helper.make_node("QuantizeLinear", ["g", "sy", "za"], ["y"]),
    ]
    inits = [
        scalar("sa", 0.05),
        scalar("za", 128, np.uint8),
        init("bq", RNG.integers(-30, 30, (5, 6)).astype(np.int8)),
        scalar("sb", 0.02),
        scalar("zb", 0, np.int8),
        init("cq", RNG.integers(-300, 300, 5).astype(np.int32)),
        scalar("sc", bias_scale),
        scalar("sy", 0.1),
    ]
    before = model(nodes, [tensor("aq", U8, [4, 6])], [tensor("y", U8, [4, 5])], inits)
    after = rewriter.optimize(before, level="extended", providers="CPU").model
    assert ("QGemm" in ops(after)) == fused and ("Gemm" in ops(after)) != fused
    feeds = {"aq": RNG.integers(0, 255, (4, 6)).astype(np.uint8)}
    (want,), (got,) = run(before, feeds), run(after, feeds)
    assert np.abs(want.astype(int) - got.astype(int)).max() <= 1


def test_quantized_matmul_add_and_gemm_on_integers():
    nodes = [
        helper.make_node("DequantizeLinear", ["aq", "sa", "za"], ["a"]),
        helper.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["b"]),
        helper.make_node("MatMul", ["a", "b"], ["m"]),
        helper.make_node("QuantizeLinear", ["m", "sy", "za"], ["mq"]),
        helper.make_node("DequantizeLinear", ["mq", "sy", "za"], ["md"]),
        helper.make_node("Add", ["md", "a"], ["s"]),  # reads a's Dequantize too
        helper.make_node("QuantizeLinear", ["s", "sy", "za"], ["sq"]),
        helper.make_node("DequantizeLinear", ["sq", "sy", "za"], ["sd"]),
        helper.make_node("DequantizeLinear", ["cq", "sc"], ["c"]),
        helper.make_node("Gemm", ["sd", "b", "c"], ["y"]),
    ]
    inits = [
        scalar("sa", 0.05),
        scalar("za", 128, np.uint8),
        init("bq", RNG.integers(-30, 30, (6, 6)).astype(np.int8)),
        scalar("sb", 0.02),
        scalar("zb", 0, np.int8),
        scalar("sy", 0.08),
        init("cq", RNG.integers(-100, 100, 6).astype(np.int32)),
        scalar("sc", 0.08 * 0.02),
    ]
    before = model(nodes, [tensor("aq", U8, [4, 6])], [tensor("y", F, [4, 6])], inits)
    after = rewriter.optimize(before, level="extended", providers="CPU").model
    assert ops(after) == {"QLinearMatMul": 1, "QLinearAdd": 1, "QGemm": 1}
    feeds = {"aq": RNG.integers(0, 255, (4, 6)).astype(np.uint8)}
    (want,), (got,) = run(before, feeds), run(after, feeds)
    # each integer result one step at most: the Gemm sums 6 of them times the weights
    assert np.abs(want - got).max() <= 0.08 * 0.02 * 30 * 6 * 2 + 1e-6


def dynamic_matmuls(shared: bool) -> onnx.ModelProto:
    """quantize_dynamic's MatMul: DynamicQuantizeLinear -> MatMulInteger -> Cast -> * scales + bias."""
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"])]
    inits = []
    outputs = []
    for k in range(2 if shared else 1):
        nodes += [
            helper.make_node("Mul", ["xs", f"ws{k}"], [f"sc{k}"]),
            helper.make_node("MatMulInteger", ["xq", f"wq{k}", "xz", f"wz{k}"], [f"mi{k}"]),
            helper.make_node("Cast", [f"mi{k}"], [f"f{k}"], to=F),
            helper.make_node("Mul", [f"f{k}", f"sc{k}"], [f"m{k}"]),
            helper.make_node("Add", [f"m{k}", f"b{k}"], [f"y{k}"]),
        ]
        inits += [
            init(f"wq{k}", RNG.integers(-50, 50, (6, 5)).astype(np.int8)),
            scalar(f"ws{k}", 0.02),
            scalar(f"wz{k}", 0, np.int8),
            init(f"b{k}", RNG.standard_normal(5).astype(np.float32)),
        ]
        outputs.append(tensor(f"y{k}", F, [3, 5]))
    return model(nodes, [tensor("x", F, [3, 6])], outputs, inits)


def test_dynamic_quantization_becomes_one_kernel_per_matmul():
    feeds = {"x": RNG.standard_normal((3, 6)).astype(np.float32)}
    for shared, fused in (
        (False, {"DynamicQuantizeMatMul": 1}),
        (True, {"DynamicQuantizeLinear": 1, "MatMulIntegerToFloat": 2}),
    ):
        before = dynamic_matmuls(shared)
        after = rewriter.optimize(before, level="extended", providers="CPU").model
        assert ops(after) == fused
        for want, got in zip(run(before, feeds), run(after, feeds)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_the_layout_level_runs_quantized_convolutions_channels_last():
    before = qdq_conv()
    after = rewriter.optimize(before, level="layout", providers="CPU", layout_may_grow=True).model
    (conv,) = [n for n in after.graph.node if n.op_type == "QLinearConv"]
    assert conv.domain == "com.microsoft" and helper.get_attribute_value(conv.attribute[-1]) == 1
    assert ops(after)["Transpose"] == 2  # into NHWC before it, back after it
    assert steps_apart(before, after, 0.1) <= ONE_STEP


def qdq_conv_pool_conv() -> onnx.ModelProto:
    """conv -> MaxPool -> conv on uint8, QDQ (a quantized ResNet's stem)."""
    xs, ws, ys = 0.05, 0.02, 0.1
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "z"], ["xq"])]
    value = "xq"
    for i, op in enumerate(["Conv", "MaxPool", "Conv"]):
        nodes.append(helper.make_node("DequantizeLinear", [value, "ys" if i else "xs", "z"], [f"d{i}"]))
        if op == "Conv":
            nodes.append(helper.make_node("DequantizeLinear", [f"w{i}", "ws", "wz"], [f"wd{i}"]))
            nodes.append(helper.make_node("Conv", [f"d{i}", f"wd{i}"], [f"o{i}"], pads=[1, 1, 1, 1]))
        else:
            nodes.append(
                helper.make_node(
                    "MaxPool", [f"d{i}"], [f"o{i}"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]
                )
            )
        nodes.append(helper.make_node("QuantizeLinear", [f"o{i}", "ys", "z"], [f"q{i}"]))
        value = f"q{i}"
    nodes.append(helper.make_node("DequantizeLinear", [value, "ys", "z"], ["y"]))
    inits = [scalar("xs", xs), scalar("ys", ys), scalar("ws", ws), scalar("z", 128, np.uint8), scalar("wz", 0, np.int8)]
    inits += [init(f"w{i}", RNG.integers(-20, 20, (4, 4, 3, 3)).astype(np.int8)) for i in (0, 2)]
    return model(nodes, [tensor("x", F, [1, 4, 6, 6])], [tensor("y", F, [1, 4, 3, 3])], inits)


def test_a_quantized_max_pool_runs_channels_last_and_its_region_grows_at_the_layout_level():
    """onnxruntime's CPU MaxPool of uint8 in NCHW is 10x slower than NhwcMaxPool: the
    extended level pools channels-last between two Transposes, and the layout level, whose
    quantized convolutions are channels-last too, cancels them against the convolutions'
    own, so the region has two Transposes in all and no more nodes than extended's."""
    before = qdq_conv_pool_conv()
    extended = rewriter.optimize(before, level="extended", providers="CPU").model
    assert ops(extended) == {
        "QuantizeLinear": 1,
        "QLinearConv": 2,
        "Transpose": 2,
        "NhwcMaxPool": 1,
        "DequantizeLinear": 1,
    }
    layout = rewriter.optimize(before, level="layout", providers="CPU").model
    convs = [n for n in layout.graph.node if n.op_type == "QLinearConv"]
    assert all(n.domain == "com.microsoft" for n in convs) and ops(layout)["Transpose"] == 2
    assert len(layout.graph.node) == len(extended.graph.node)
    for after in (extended, layout):
        assert steps_apart(before, after, 0.1) <= ONE_STEP
        rewriter.check_model(after, full_check=True)


def stand_in_shape(node: onnx.NodeProto, known: dict[str, tuple[int, list]]) -> list:
    """The shape onnx infers for ``node``'s output through its stand-in nodes."""
    from rewriter.graph.stand_ins import stand_ins

    nodes, stubs = stand_ins(node, known.get)
    graph = helper.make_graph(
        nodes,
        "stand_in",
        [tensor(name, elem, dims) for name, (elem, dims) in known.items()],
        [helper.make_tensor_value_info(node.output[0], TensorProto.UNDEFINED, None)],
        stubs,
    )
    inferred = onnx.shape_inference.infer_shapes(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), strict_mode=True
    )
    (out,) = [v for v in inferred.graph.output if v.name == node.output[0]]
    other_type = ("QLinearConv", "QLinearConcat", "MatMulIntegerToFloat")  # input 0 is not of the output's type
    assert out.type.tensor_type.elem_type == known[node.input[0]][0] or node.op_type in other_type
    return [d.dim_value for d in out.type.tensor_type.shape.dim]


def test_quantized_contrib_ops_keep_their_shapes_for_the_rules_after_them():
    """Layout rules after a quantized op ask for its rank (the squeeze-and-excitation gate of
    a QDQ EfficientNet: a channels-last pool needs its input's)."""
    ms = "com.microsoft"
    scale = (F, [])
    known = {"x": (U8, [1, 6, 6, 8]), "g": (U8, [1, 1, 1, 8]), "s": scale, "z": (U8, []), "w": (I8, [4, 8, 3, 3])}
    node = helper.make_node
    assert stand_in_shape(node("QLinearSigmoid", ["x", "s", "z", "s", "z"], ["y"], domain=ms), known) == [1, 6, 6, 8]
    gate = node("QLinearMul", ["x", "s", "z", "g", "s", "z", "s", "z"], ["y"], domain=ms)
    assert stand_in_shape(gate, known) == [1, 6, 6, 8]
    pool = node("QLinearGlobalAveragePool", ["x", "s", "z", "s", "z"], ["y"], domain=ms, channels_last=1)
    assert stand_in_shape(pool, known) == [1, 1, 1, 8]
    nchw = {**known, "x": (U8, [1, 8, 6, 6])}
    pool = node("QLinearGlobalAveragePool", ["x", "s", "z", "s", "z"], ["y"], domain=ms)
    assert stand_in_shape(pool, nchw) == [1, 8, 1, 1]
    conv = node(
        "QLinearConv", ["x", "s", "z", "w", "s", "z", "s", "z"], ["y"], domain=ms, channels_last=1, strides=[2, 2]
    )
    assert stand_in_shape(conv, known) == [1, 2, 2, 4]
    softmax = node("QLinearSoftmax", ["x", "s", "z", "s", "z"], ["y"], domain=ms, axis=-1, opset=13)
    assert stand_in_shape(softmax, known) == [1, 6, 6, 8]
    concat = node("QLinearConcat", ["s", "z", "x", "s", "z", "g", "s", "z"], ["y"], domain=ms, axis=1)
    assert stand_in_shape(concat, {**known, "g": (U8, [1, 2, 6, 8])}) == [1, 8, 6, 8]
    average = node("QLinearAveragePool", ["x", "s", "z", "s", "z"], ["y"], domain=ms, kernel_shape=[3, 3])
    assert stand_in_shape(average, nchw) == [1, 8, 4, 4]
    average = node(
        "QLinearAveragePool", ["x", "s", "z", "s", "z"], ["y"], domain=ms, kernel_shape=[2, 2], channels_last=1
    )
    assert stand_in_shape(average, known) == [1, 5, 5, 8]


def test_integer_products_to_float_keep_their_shapes_for_the_rules_after_them():
    """The extended level's dynamic-quantization kernels (a quantize_dynamic model: every
    shape after them would be unknown, and a rule that needs one refuses)."""
    ms = "com.microsoft"
    known = {"a": (U8, [2, 5, 8]), "x": (F, [2, 5, 8]), "w": (I8, [8, 3]), "s": (F, []), "z": (U8, [])}
    node = helper.make_node
    to_float = node("MatMulIntegerToFloat", ["a", "w", "s", "s", "z"], ["y"], domain=ms)
    assert stand_in_shape(to_float, known) == [2, 5, 3]
    dynamic = node("DynamicQuantizeMatMul", ["x", "w", "s"], ["y"], domain=ms)
    assert stand_in_shape(dynamic, known) == [2, 5, 3]


def test_quantized_rotary_halves_stay_on_integers_and_concat_requantizes_once():
    """A QDQ rotary step as onnxruntime.quantization leaves it: a Split of a dequantized value
    into halves each quantized again, one half negated in float, the halves concatenated and
    quantized, squared (one Dequantize read twice), a constant folded through its Quantize,
    a Where between two dequantized values: every node but the Neg runs on the integers."""
    s, z = 0.05, 128
    nodes = [
        helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["x"]),
        helper.make_node("Split", ["x", "halves"], ["a", "b"], axis=1),
        helper.make_node("QuantizeLinear", ["a", "s", "z"], ["aq"]),
        helper.make_node("QuantizeLinear", ["b", "s", "z"], ["bq"]),
        helper.make_node("DequantizeLinear", ["aq", "s", "z"], ["ad"]),
        helper.make_node("DequantizeLinear", ["bq", "s", "z"], ["bd"]),
        helper.make_node("Neg", ["bd"], ["nb"]),
        helper.make_node("QuantizeLinear", ["nb", "s", "z"], ["nq"]),
        helper.make_node("DequantizeLinear", ["nq", "s", "z"], ["nd"]),
        helper.make_node("Concat", ["nd", "ad"], ["r"], axis=1),
        helper.make_node("QuantizeLinear", ["r", "s2", "z"], ["rq"]),
        helper.make_node("DequantizeLinear", ["rq", "s2", "z"], ["rd"]),
        helper.make_node("Mul", ["rd", "rd"], ["sq"]),
        helper.make_node("QuantizeLinear", ["sq", "s3", "z"], ["sqq"]),
        helper.make_node("DequantizeLinear", ["sqq", "s3", "z"], ["sqd"]),
        helper.make_node("QuantizeLinear", ["half", "s3", "z"], ["hq"]),  # a constant, folded
        helper.make_node("DequantizeLinear", ["hq", "s3", "z"], ["hd"]),
        helper.make_node("Where", ["keep", "sqd", "hd"], ["w"]),
        helper.make_node("QuantizeLinear", ["w", "s3", "z"], ["wq"]),
        helper.make_node("DequantizeLinear", ["wq", "s3", "z"], ["y"]),
    ]
    inits = [
        scalar("s", s),
        scalar("z", z, np.uint8),
        scalar("s2", 0.1),
        scalar("s3", 0.2),
        init("halves", np.array([4, 4], np.int64)),
        init("half", np.full((1, 8), 0.5, np.float32)),
    ]
    inputs = [tensor("xq", U8, [2, 8]), tensor("keep", TensorProto.BOOL, [2, 8])]
    before = model(nodes, inputs, [tensor("y", F, [2, 8])], inits)
    after = rewriter.optimize(before, level="extended", providers="CPU").model
    assert ops(after) == {
        "Split": 1,
        "DequantizeLinear": 2,  # the Neg's input and the output
        "Neg": 1,
        "QuantizeLinear": 1,
        "QLinearConcat": 1,
        "QLinearMul": 1,
        "QLinearWhere": 1,
    }
    rewriter.check_model(after, full_check=True)
    for seed in range(3):
        rng = np.random.default_rng(seed)
        feeds = {"xq": rng.integers(0, 255, (2, 8)).astype(np.uint8), "keep": rng.random((2, 8)) < 0.5}
        (want,), (got,) = run(before, feeds), run(after, feeds)
        assert np.abs(want - got).max() <= 0.2 * ONE_STEP  # one step of the output's scale at most


def test_quantize_and_dequantize_move_past_element_moves_and_double_pairs_cancel():
    """Shapes quantized LLMs leave (seed_oss, lfm2, glm4_moe): a GQA repeat_kv (a dequantized
    key unsqueezed, expanded, reshaped, then quantized), a Quantize/Dequantize pair met by a
    second one of the same parameters, and an MoE router's bias-free Gemm read as float.
    The Quantize moves up past the Reshape, the Dequantize down past the Unsqueeze, the
    pairs cancel and the Gemm becomes a QGemm: no Dequantize then Quantize is left."""
    s, z = 0.05, 128
    nodes = [
        helper.make_node("DequantizeLinear", ["kq", "s", "z"], ["k"]),
        helper.make_node("Unsqueeze", ["k", "ax"], ["ku"]),
        helper.make_node("Expand", ["ku", "grow"], ["ke"]),
        helper.make_node("Reshape", ["ke", "flat"], ["kr"]),
        helper.make_node("QuantizeLinear", ["kr", "s", "z"], ["rq"]),
        helper.make_node("DequantizeLinear", ["rq", "s", "z"], ["rd"]),
        helper.make_node("QuantizeLinear", ["rd", "s", "z"], ["rq2"]),  # the second pair
        helper.make_node("DequantizeLinear", ["rq2", "s", "z"], ["r"]),
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"]),
        helper.make_node("Gemm", ["r", "w"], ["logits"], transB=1),
    ]
    inits = [
        scalar("s", s),
        scalar("z", z, np.uint8),
        scalar("ws", 0.02),
        scalar("wz", 0, np.int8),
        init("ax", np.array([1], np.int64)),
        init("grow", np.array([2, 2, 3, 4], np.int64)),
        init("flat", np.array([12, 4], np.int64)),
        init("wq", np.random.default_rng(0).integers(-127, 128, (5, 4)).astype(np.int8)),
    ]
    before = model(nodes, [tensor("kq", U8, [2, 3, 4])], [tensor("logits", F, [12, 5])], inits)
    after = rewriter.optimize(before, level="extended", providers="CPU").model
    assert ops(after) == {"Unsqueeze": 1, "Expand": 1, "Reshape": 1, "QGemm": 1}
    rewriter.check_model(after, full_check=True)
    for seed in range(3):
        feeds = {"kq": np.random.default_rng(seed).integers(0, 255, (2, 3, 4)).astype(np.uint8)}
        (want,), (got,) = run(before, feeds), run(after, feeds)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_int8_weights_that_would_saturate_the_uint8_kernel_are_shifted_to_uint8():
    """onnxruntime's uint8-by-int8 kernels on x86 without VNNI sum two products in 16 bits,
    which saturates for activations near 255 and weights past +-64 (the float graph does
    not): such constant weights are given as uint8 shifted by 128 (the same real values),
    narrow ones (|w| <= 64, as quantize_static's reduce_range makes them) stay int8."""
    for limit, kept in ((127, False), (64, True)):
        weights = np.random.default_rng(1).integers(-limit, limit + 1, (16, 8)).astype(np.int8)
        weights[0, 0], weights[1, 0] = limit, limit  # two products of one sign in a pair
        nodes = [
            helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["x"]),
            helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"]),
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node("QuantizeLinear", ["m", "sy", "z"], ["y"]),
        ]
        inits = [
            scalar("s", 0.05),
            scalar("z", 0, np.uint8),
            scalar("ws", 0.01),
            scalar("wz", 0, np.int8),
            scalar("sy", 2.0),
            init("wq", weights),
        ]
        before = model(nodes, [tensor("xq", U8, [4, 16])], [tensor("y", U8, [4, 8])], inits)
        after = rewriter.optimize(before, level="extended", providers="CPU").model
        assert ops(after) == {"QLinearMatMul": 1}
        weight_type = {i.name: i.data_type for i in after.graph.initializer}[after.graph.node[0].input[3]]
        assert weight_type == (I8 if kept else U8)
        feeds = {"xq": np.full((4, 16), 255, np.uint8)}  # the worst case for the 16-bit sums
        (want,), (got,) = run(before, feeds), run(after, feeds)
        assert np.abs(want.astype(int) - got.astype(int)).max() <= 1


def test_a_bias_two_convolutions_share_and_a_where_of_constants_stay_on_integers():
    """An exporter shares one bias initializer between equal convolutions (both biases
    zero), so one Dequantize feeds both: each still becomes a QLinearConv (the engine keeps
    a matched node computing from constants for its other readers).  A Where choosing a
    mask's fill constant or a dequantized value, and one choosing between two constants,
    run on the integers."""
    s, z = 0.05, 128
    w = np.random.default_rng(2).integers(-60, 60, (4, 4, 3)).astype(np.int8)
    nodes = [
        helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["x"]),
        helper.make_node("DequantizeLinear", ["wq", "ws"], ["w"]),
        helper.make_node("DequantizeLinear", ["bq", "bs"], ["b"]),
        helper.make_node("Conv", ["x", "w", "b"], ["c1"], pads=[1, 1]),
        helper.make_node("QuantizeLinear", ["c1", "s", "z"], ["c1q"]),
        helper.make_node("DequantizeLinear", ["c1q", "s", "z"], ["c1d"]),
        helper.make_node("Conv", ["c1d", "w", "b"], ["c2"], pads=[1, 1]),
        helper.make_node("QuantizeLinear", ["c2", "s", "z"], ["c2q"]),
        helper.make_node("DequantizeLinear", ["c2q", "s", "z"], ["c2d"]),
        helper.make_node("Where", ["keep", "c2d", "fill"], ["m"]),
        helper.make_node("QuantizeLinear", ["m", "s", "z"], ["mq"]),
        helper.make_node("Where", ["keep", "fill", "zero"], ["k"]),
        helper.make_node("QuantizeLinear", ["k", "s", "z"], ["kq"]),
        helper.make_node("Add", ["mq", "kq"], ["y"]),
    ]
    inits = [
        scalar("s", s),
        scalar("z", z, np.uint8),
        scalar("ws", 0.02),
        scalar("bs", s * 0.02),
        init("wq", w),
        init("bq", np.zeros(4, np.int32)),
        scalar("fill", -3.0),
        scalar("zero", 0.0),
    ]
    inputs = [tensor("xq", U8, [1, 4, 6]), tensor("keep", TensorProto.BOOL, [1, 4, 6])]
    before = model(nodes, inputs, [tensor("y", U8, [1, 4, 6])], inits)
    after = rewriter.optimize(before, level="extended", providers="CPU").model
    assert ops(after) == {"QLinearConv": 2, "QLinearWhere": 1, "Where": 1, "Add": 1}
    rewriter.check_model(after, full_check=True)
    for seed in range(3):
        rng = np.random.default_rng(seed)
        feeds = {"xq": rng.integers(0, 256, (1, 4, 6)).astype(np.uint8), "keep": rng.random((1, 4, 6)) < 0.5}
        (want,), (got,) = run(before, feeds), run(after, feeds)
        assert np.abs(want.astype(int) - got.astype(int)).max() <= 2  # one step per convolution


def test_four_bit_values_are_not_moved_where_onnxruntime_has_no_kernel_for_them():
    """A per-tensor int4 Dequantize before a Reshape stays before it: onnxruntime's CPU has no
    Reshape of int4 values, so moving the Dequantize after it (as for 8-bit ones) would give
    a model that does not load."""
    weights = helper.make_tensor("w", TensorProto.INT4, [4, 6], np.random.default_rng(0).integers(-8, 8, 24).tolist())
    nodes = [
        helper.make_node("DequantizeLinear", ["w", "s", "z"], ["d"]),
        helper.make_node("Reshape", ["d", "shape"], ["r"]),
        helper.make_node("Add", ["r", "x"], ["y"]),
    ]
    zero = helper.make_tensor("z", TensorProto.INT4, [], [1])
    inits = [weights, scalar("s", 0.5), zero, init("shape", np.array([6, 4]))]
    before = model(nodes, [tensor("x", F, [6, 4])], [tensor("y", F, [6, 4])], inits, opset=21)
    after = rewriter.optimize(before, level="extended", providers="CPU").model
    assert [n.op_type for n in after.graph.node] == ["DequantizeLinear", "Reshape", "Add"]
    feeds = {"x": np.random.default_rng(1).standard_normal((6, 4)).astype(np.float32)}
    (want,), (got,) = run(before, feeds), run(after, feeds)
    np.testing.assert_array_equal(got, want)


def softmax_then_finer_requantization(dtype: int) -> onnx.ModelProto:
    """Dequantize -> Softmax -> Quantize(1/255) -> Dequantize -> Where(IsNaN, 0, p) -> Quantize
    to the probabilities' small calibrated range, as quantize_static leaves SDPA's NaN guard."""
    low = -128 if dtype == I8 else 0
    np_type = np.int8 if dtype == I8 else np.uint8
    nodes = [
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["x"]),
        helper.make_node("Softmax", ["x"], ["p"], axis=-1),
        helper.make_node("QuantizeLinear", ["p", "ps", "pz"], ["pq"]),
        helper.make_node("DequantizeLinear", ["pq", "ps", "pz"], ["pd"]),
        helper.make_node("IsNaN", ["pd"], ["nan"]),
        helper.make_node("Where", ["nan", "zero", "pd"], ["g"]),
        helper.make_node("QuantizeLinear", ["g", "gs", "pz"], ["y"]),
    ]
    inits = [
        scalar("xs", 0.001),
        scalar("xz", low + 123, np_type),
        scalar("ps", 1 / 255),
        scalar("pz", low, np_type),
        scalar("zero", 0.0),
        scalar("gs", 0.04 / 255),
    ]
    return model(nodes, [tensor("xq", dtype, [2, 33, 33])], [tensor("y", dtype, [2, 33, 33])], inits)


def test_softmax_stays_float_on_int8_values_where_a_requantization_would_multiply_its_error():
    """onnxruntime's QLinearSoftmax is one step off in a few percent of outputs; a finer
    requantization after it (here 28 times finer) multiplies that step.  On int8 values the
    Softmax is left as onnxruntime leaves it, and the result is exact; on uint8 ones it is
    fused, as onnxruntime fuses it (and gives onnxruntime's numbers)."""
    for dtype, fused in ((I8, False), (U8, True)):
        before = softmax_then_finer_requantization(dtype)
        after = rewriter.optimize(before, level="extended", providers="CPU").model
        assert ("QLinearSoftmax" in ops(after)) == fused
        rewriter.check_model(after, full_check=True)
        info = np.iinfo(np.int8 if dtype == I8 else np.uint8)
        feeds = {"xq": np.random.default_rng(3).integers(info.min, info.max + 1, (2, 33, 33)).astype(info.dtype)}
        (want,), (got,) = run(before, feeds), run(after, feeds)
        if not fused:
            np.testing.assert_array_equal(got, want)


def test_products_of_int8_activations_stay_float_as_onnxruntime_leaves_them_on_x86():
    """onnxruntime's int8-activation QLinearMatMul and QLinearConv are slower than the float
    product between the Dequantize and Quantize on x86: only uint8 activations fuse."""
    for dtype, np_type, fused in ((I8, np.int8, False), (U8, np.uint8, True)):
        low = int(np.iinfo(np_type).min)
        nodes = [
            helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["x"]),
            helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"]),
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node("QuantizeLinear", ["m", "ys", "yz"], ["mq"]),
            helper.make_node("DequantizeLinear", ["mq", "ys", "yz"], ["md"]),
            helper.make_node("Reshape", ["md", "image"], ["r"]),
            helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["rq"]),
            helper.make_node("DequantizeLinear", ["rq", "ys", "yz"], ["rd"]),
            helper.make_node("DequantizeLinear", ["kq", "ws", "wz"], ["k"]),
            helper.make_node("Conv", ["rd", "k"], ["c"], pads=[1, 1]),
            helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["y"]),
        ]
        inits = [
            scalar("xs", 0.05),
            scalar("xz", low + 3, np_type),
            init("wq", RNG.integers(-40, 40, (8, 8)).astype(np.int8)),
            init("kq", RNG.integers(-40, 40, (4, 4, 3)).astype(np.int8)),
            scalar("ws", 0.02),
            scalar("wz", 0, np.int8),
            scalar("ys", 0.1),
            scalar("yz", low + 128, np_type),
            init("image", np.array([2, 4, 12], np.int64)),
        ]
        before = model(nodes, [tensor("xq", dtype, [2, 6, 8])], [tensor("y", dtype, [2, 4, 12])], inits)
        after = rewriter.optimize(before, level="extended", providers="CPU").model
        assert ("QLinearMatMul" in ops(after)) == fused and ("QLinearConv" in ops(after)) == fused
        rewriter.check_model(after, full_check=True)
        info = np.iinfo(np_type)
        feeds = {"xq": RNG.integers(info.min, info.max + 1, (2, 6, 8)).astype(np_type)}
        (want,), (got,) = run(before, feeds), run(after, feeds)
        assert np.abs(want.astype(int) - got.astype(int)).max() <= 2


@pytest.mark.parametrize(
    "hostile",
    [
        helper.make_node("QLinearConcat", ["s", "z"], ["c"], domain="com.microsoft", axis=0),
        helper.make_node("Gelu", [], ["c"], domain="com.microsoft"),
        helper.make_node("SkipLayerNormalization", [], ["c"], domain="com.microsoft"),
    ],
)
def test_a_malformed_contrib_node_costs_only_its_own_types(hostile):
    """A contrib op whose stand-in onnx cannot read (an Identity of no input) makes onnx's
    inference raise for the whole model; the model is then inferred with contrib ops as they are, so the other
    values keep their types (and the rules that need them still apply)."""
    from rewriter.graph.type_reading import shape_of
    from rewriter.graph.types import infer_model_types

    nodes = [hostile, helper.make_node("Relu", ["x"], ["r"])]
    outputs = [tensor("r", F, [2, 3]), helper.make_tensor_value_info("c", F, None)]
    inits = [scalar("s", 0.1), scalar("z", 3, np.uint8)]
    before = model(nodes, [tensor("x", F, [2, 3])], outputs, inits, domains=["com.microsoft"])
    del before.graph.output[0].type.tensor_type.shape.dim[:]  # only inference can say r's shape
    assert shape_of(infer_model_types(before)["r"]) == [2, 3]
