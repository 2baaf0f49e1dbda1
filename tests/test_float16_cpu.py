"""float16 the CPU provider has no kernels for is computed in float32 after partitioning."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
from helpers import init, model, run, tensor
from onnx import TensorProto, helper

import rewriter

F, H = TensorProto.FLOAT, TensorProto.FLOAT16
RNG = np.random.default_rng(3)


def half(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float16)


def float16_block() -> onnx.ModelProto:
    """keep_io_types style: float input -> Cast -> MatMul + bias + Gelu (erf) -> Reshape ->
    Add residual -> LayerNormalization -> Cast -> float output."""
    nodes = [
        helper.make_node("Cast", ["x"], ["xh"], to=H),
        helper.make_node("MatMul", ["xh", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["a"]),
        helper.make_node("Div", ["a", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["a", "e1"], ["g0"]),
        helper.make_node("Mul", ["g0", "half"], ["g"]),
        helper.make_node("Reshape", ["g", "shape"], ["r"]),
        helper.make_node("Add", ["r", "xh"], ["s"]),
        helper.make_node("LayerNormalization", ["s", "gamma", "beta"], ["n"], axis=-1),
        helper.make_node("Cast", ["n"], ["y"], to=F),
    ]
    inits = [
        init("w", half(8, 8) * np.float16(0.3)),
        init("b", half(8)),
        init("sqrt2", np.array(1.4142135, np.float16)),
        init("one", np.array(1.0, np.float16)),
        init("half", np.array(0.5, np.float16)),
        init("shape", np.array([2, 4, 8], np.int64)),
        init("gamma", half(8)),
        init("beta", half(8)),
    ]
    return model(nodes, [tensor("x", F, [2, 4, 8])], [tensor("y", F, [2, 4, 8])], inits)


def ops(m: onnx.ModelProto) -> Counter:
    return Counter(n.op_type for n in m.graph.node)


def test_the_cpu_computes_float16_in_float32_and_the_fusions_form():
    before = float16_block()
    result = rewriter.optimize(before, level="extended", providers="CPU")
    after = result.model
    # the Casts of the model's boundary are gone (float in, float out); Gelu + bias fused
    assert ops(after)["Cast"] == 0 and ops(after)["BiasGelu"] == 1
    assert all(i.data_type != H for i in after.graph.initializer if i.name in {n.input[1] for n in after.graph.node})
    assert result.report.partition.float32_nodes > 0 and result.report.partition.warnings == []
    rewriter.check_model(after, full_check=True)
    feeds = {"x": RNG.standard_normal((2, 4, 8)).astype(np.float32)}
    (want,), (got,) = run(before, feeds), run(after, feeds)
    np.testing.assert_allclose(got, want, atol=2e-2, rtol=2e-2)


def test_float16_is_kept_when_asked_and_on_other_providers():
    before = float16_block()
    kept = rewriter.optimize(before, level="extended", providers="CPU", keep_float16=True)
    assert kept.report.partition.float32_nodes == 0 and ops(kept.model)["Cast"] == 2
    assert kept.report.partition.warnings == []  # onnxruntime runs them between Casts: no warning
    cuda = rewriter.optimize(before, level="extended", providers="CUDA")
    assert cuda.report.partition.float32_nodes == 0 and ops(cuda.model)["Cast"] == 2


def test_a_float16_output_read_outside_keeps_its_float16_value():
    # the float32 region's result is also a float16 graph output: a Cast back keeps its name
    before = float16_block()
    before.graph.output.append(tensor("s", H, [2, 4, 8]))
    after = rewriter.optimize(before, level="extended", providers="CPU").model
    assert [o.name for o in after.graph.output] == ["y", "s"]
    producer = next(n for n in after.graph.node if "s" in n.output)
    assert producer.op_type == "Cast"
    feeds = {"x": RNG.standard_normal((2, 4, 8)).astype(np.float32)}
    for want, got in zip(run(before, feeds), run(after, feeds)):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), atol=2e-2, rtol=2e-2)


def ceil_half_of_int(*, float16_outputs: tuple[str, ...] = ()) -> onnx.ModelProto:
    """An int64 size halved and rounded up in float16 (as TorchScript exports of padding
    arithmetic convert): x -> Cast to float16 -> Mul 0.5 -> Ceil -> Cast to int64."""
    nodes = [
        helper.make_node("Cast", ["x"], ["h"], to=H),
        helper.make_node("Mul", ["h", "half"], ["m"]),
        helper.make_node("Ceil", ["m"], ["c"]),
        helper.make_node("Cast", ["c"], ["y"], to=TensorProto.INT64),
    ]
    outputs = [tensor("y", TensorProto.INT64, [3])] + [tensor(name, H, [3]) for name in float16_outputs]
    return model(nodes, [tensor("x", TensorProto.INT64, [3])], outputs, [init("half", np.array(0.5, np.float16))])


def test_the_casts_at_the_float32_edge_merge_as_onnxruntime_merges_them():
    # onnxruntime wraps Mul and Ceil (no float16 kernels) in Casts it then merges with the
    # model's: int64 -> float and float -> int64, never rounding 4097 to float16's 4096
    before = ceil_half_of_int()
    after = rewriter.optimize(before, level="extended", providers="CPU").model
    casts = [n for n in after.graph.node if n.op_type == "Cast"]
    assert ops(after) == Counter({"Cast": 2, "Mul": 1, "Ceil": 1})
    assert [(n.input[0], n.attribute[0].i) for n in casts] == [("x", F), (casts[1].input[0], TensorProto.INT64)]
    feeds = {"x": np.array([4097, 7, 33], np.int64)}
    assert run(before, feeds)[0].tolist() == run(after, feeds)[0].tolist() == [2049, 4, 17]


def test_a_cast_the_float32_edge_shares_with_other_readers_stays():
    # the float16 values are graph outputs too: onnxruntime keeps both float16 Casts, so the
    # int64 size is rounded to float16 (4096) on the way in and the result (2049) on the way out
    before = ceil_half_of_int(float16_outputs=("h", "c"))
    after = rewriter.optimize(before, level="extended", providers="CPU").model
    assert ops(after)["Cast"] == 4
    feeds = {"x": np.array([4097, 7, 33], np.int64)}
    want, got = run(before, feeds), run(after, feeds)
    assert want[0].tolist() == got[0].tolist() == [2048, 4, 17]
    for a, b in zip(want[1:], got[1:]):
        assert a.dtype == b.dtype == np.float16 and a.tolist() == b.tolist()


def doubled_halves_rotary() -> onnx.ModelProto:
    """Qwen3-VL's multimodal rotary in float16: halves hc, hs [B, S, 4] computed elsewhere
    (float16 inputs here, as ScatterElements with a float16 kernel leave them), doubled by
    Concat and unsqueezed for the heads, x * cos + rotate_half(x) * sin."""
    n = helper.make_node
    nodes = [
        n("Concat", ["hc", "hc"], ["co"], axis=-1),
        n("Concat", ["hs", "hs"], ["si"], axis=-1),
        n("Unsqueeze", ["co", "one"], ["cu"]),
        n("Unsqueeze", ["si", "one"], ["su"]),
        n("Mul", ["q", "cu"], ["a"]),
        n("Split", ["q", "sp"], ["q1", "q2"], axis=3),
        n("Neg", ["q2"], ["m"]),
        n("Concat", ["m", "q1"], ["r"], axis=-1),
        n("Mul", ["r", "su"], ["b"]),
        n("Add", ["a", "b"], ["y"]),
    ]
    inits = [init("one", np.array([1], np.int64)), init("sp", np.array([4, 4], np.int64))]
    shape = ["batch", 2, "seq", 8]
    halves = [tensor(name, H, ["batch", "seq", 4]) for name in ("hc", "hs")]
    return model(nodes, [tensor("q", H, shape), *halves], [tensor("y", H, shape)], inits)


def test_doubled_rotary_halves_fuse_when_float32_starts_after_their_concat():
    """The float16 step casts the doubled halves into the float32 region after the Concat
    (it has a float16 kernel); the Cast moves before it, and the halves rotary forms."""
    before = doubled_halves_rotary()
    after = rewriter.optimize(before, level="extended", providers="CPU").model
    assert ops(after)["RotaryEmbedding"] == 1 and "Neg" not in ops(after)
    feeds = {"q": half(2, 2, 3, 8), "hc": half(2, 3, 4), "hs": half(2, 3, 4)}
    (expected,), (got,) = run(before, feeds), run(after, feeds)
    assert np.allclose(got.astype(np.float32), expected.astype(np.float32), atol=2e-2)


def test_an_inlined_function_op_without_float16_kernels_joins_the_float32_region():
    # HardSwish has no kernel: onnxruntime inlines it (HardSigmoid, Mul), whose CPU kernels
    # are float only, so in float16 it runs between Casts like any node without a kernel;
    # computed in float32 with its convolutions it needs none and fuses into FusedConv
    nodes = [
        helper.make_node("Cast", ["x"], ["xh"], to=H),
        helper.make_node("Conv", ["xh", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("HardSwish", ["c1"], ["h"]),
        helper.make_node("Conv", ["h", "w2"], ["c2"]),
        helper.make_node("Cast", ["c2"], ["y"], to=F),
    ]
    inits = [init("w1", half(8, 4, 3, 3) * np.float16(0.3)), init("w2", half(8, 8, 1, 1) * np.float16(0.3))]
    before = model(nodes, [tensor("x", F, [1, 4, 6, 6])], [tensor("y", F, [1, 8, 6, 6])], inits, opset=17)
    after = rewriter.optimize(before, level="extended", providers="CPU").model
    assert ops(after) == Counter({"FusedConv": 1, "Conv": 1}), ops(after)
    rewriter.check_model(after, full_check=True)
    feeds = {"x": RNG.standard_normal((1, 4, 6, 6)).astype(np.float32)}
    (want,), (got,) = run(before, feeds), run(after, feeds)
    np.testing.assert_allclose(got, want, atol=2e-2, rtol=2e-2)
