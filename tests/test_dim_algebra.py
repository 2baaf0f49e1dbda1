"""Symbolic dims spelled one way whoever wrote them (rewriter/expr/dim_algebra.py), and what
that lets the engine prove on a dynamo export with dynamic axes: the exporter's declared
``((samples//10)) - 1`` and the graph's own Shape/Div/Sub arithmetic name one size."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import init, model, ops, run, tensor
from onnx import TensorProto, helper

import rewriter
from rewriter.expr.dim_algebra import canonical_dim
from rewriter.expr.shape_values import dim_product, dim_quotient, dim_sum
from rewriter.expr.values import EvalFailure
from rewriter.graph.type_reading import is_known_dim, shape_of
from rewriter.graph.types import merged_type


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("((samples//10)) - 1", "(samples//10) + -1"),  # sympy, as the dynamo exporter prints it
        ("batch*(((samples//10)) - 1)", "(samples//10)*batch + -1*batch"),
        ("s1*s0", "s0*s1"),
        ("2*s0*s1 + s1*s0", "3*s0*s1"),
        ("(s0 + 1)//2", "((s0 + 1)//2)"),
        ("(2*s0 + 4)//2", "s0 + 2"),  # exact: no floor atom
        ("7//2", 3),
        ("((batch*seq)//batch)", "seq"),  # dynamo's, for a mask [batch, seq] viewed back
        ("(2*batch*seq + 4*batch)//(2*batch)", "seq + 2"),
        ("(batch*seq + 1)//batch", "(batch*seq + 1)//batch"),  # not exact: one opaque name
        ("seq//batch", "seq//batch"),
        ("x - x", 0),
        ("past + 1", "past + 1"),  # this module's own spelling is a fixed point
        ("a + -1*b + 3", "a + -1*b + 3"),
        ("batch", "batch"),
        ("seq-len", "seq-len"),  # a '-' inside a name is part of it
        ("Max(1, s0)", "Max(0, s0 + -1) + 1"),  # s0 may be 0: neither is provably larger
        ("1 - Max(0, -past - 1)", 1),  # a cache's causal slice: sizes are never negative
        ("Max(0, s)", "s"),
        ("Min(s, s + 2)", "s"),
        ("Max(2*s, (s)) + 1", "2*s + 1"),
        ("Max(s//2, 0)", "(s//2)"),  # a floor of a size is >= 0
        ("Max((s - 3)//2, 0)", "Max(0, ((s + 1)//2) + -2)"),  # this one may be negative
        ("Min(128, Min(128, seq))", "-1*Max(0, seq + -128) + seq"),  # Min(128, seq) <= 128
        # past may be more: one Max(0, d) atom, every spelling of Min(128, past + 1) alike
        ("128 - Max(0, 127 - past)", "-1*Max(0, past + -127) + past + 1"),
        ("Min(128, past + 1)", "-1*Max(0, past + -127) + past + 1"),
        ("Min(seq, 128)", "-1*Max(0, seq + -128) + seq"),
        ("128 - Max(0, 128 - seq)", "-1*Max(0, seq + -128) + seq"),
        ("4*batch*Min(64, seq)", "-4*Max(0, seq + -64)*batch + 4*batch*seq"),
        ("((samples//5))//2", "(samples//10)"),  # a strided conv after another: one floor
        ("((s//2) - 1)//3", "((s + 4)//6) + -1"),
        ("((a//2) + (b//3))//5", "(((a//2) + (b//3))//5)"),  # two floors: kept as written
        ("Max(1, 2, 3)", "Max(1, 2, 3)"),
        ("Max(0,", "Max(0,"),
        ("s0/2", "s0/2"),
        ("unk__3", "unk__3"),
    ],
)
def test_each_size_has_one_spelling(written, canonical):
    assert canonical_dim(written) == canonical
    assert canonical_dim(canonical) == canonical


def test_products_and_exact_quotients_of_dims():
    assert dim_product(["batch", "seq"]) == "batch*seq"
    assert dim_product(["seq", 4, "batch"]) == "4*batch*seq"
    assert dim_quotient(dim_product(["batch", "(samples//10) + -1"]), "batch") == "(samples//10) + -1"
    assert dim_quotient("4*batch", 4) == "batch"
    assert dim_quotient("2*batch", 4) is None  # not exact: unknown
    assert dim_quotient("batch + seq", "batch") is None
    assert dim_sum(["past", 1, "-1*past"]) == 1
    with pytest.raises(EvalFailure):
        dim_product(["batch", "unk__2"])  # nothing is known of a fresh dim


def test_unknown_atoms_anywhere_make_a_dim_unknown():
    assert is_known_dim("(samples//10)*batch + -1*batch") and is_known_dim("seq-len")
    assert not is_known_dim("(unk__3//2) + 1") and not is_known_dim("batch*unk__1")


def test_a_declared_name_fills_a_dim_inference_left_fresh():
    inferred = helper.make_tensor_type_proto(TensorProto.FLOAT, ["batch", "unk__8", 64])
    declared = helper.make_tensor_type_proto(TensorProto.FLOAT, ["batch", "((samples//10)) - 1", 64])
    assert shape_of(merged_type(inferred, declared)) == ["batch", "(samples//10) + -1", 64]
    stale = helper.make_tensor_type_proto(TensorProto.FLOAT, ["batch", "frames", 32])  # contradicts: dropped
    assert shape_of(merged_type(inferred, stale)) == ["batch", "unk__8", 64]


def audio_frames_model(declare: bool = True):
    """dynamo's front end of an audio encoder: a strided Conv over the samples (its length
    declared as the exporter prints it), transposed, then viewed (allowzero 1) to a target
    computed from the samples: [batch, samples // 10 - 1, 16], its own shape."""
    nodes = [
        helper.make_node("Unsqueeze", ["x", "one"], ["u"]),
        helper.make_node("Conv", ["u", "W"], ["c"], strides=[10], kernel_shape=[20]),
        helper.make_node("Transpose", ["c"], ["t"], perm=[0, 2, 1]),
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
        helper.make_node("Gather", ["s", "i1"], ["n"], axis=0),
        helper.make_node("Div", ["n", "ten"], ["f"]),
        helper.make_node("Sub", ["f", "ione"], ["g"]),
        helper.make_node("Unsqueeze", ["b", "zero"], ["b1"]),
        helper.make_node("Unsqueeze", ["g", "zero"], ["g1"]),
        helper.make_node("Concat", ["b1", "g1", "width"], ["target"], axis=0),
        helper.make_node("Reshape", ["t", "target"], ["v"], allowzero=1),
        helper.make_node("Relu", ["v"], ["y"]),
    ]
    inits = [
        init("W", np.random.default_rng(0).standard_normal((16, 1, 20)).astype(np.float32)),
        init("one", np.array([1], np.int64)),
        init("zero", np.array([0], np.int64)),
        init("i0", np.array(0, np.int64)),
        init("i1", np.array(1, np.int64)),
        init("ten", np.array(10, np.int64)),
        init("ione", np.array(1, np.int64)),
        init("width", np.array([16], np.int64)),
    ]
    value_info = [tensor("c", TensorProto.FLOAT, ["batch", 16, "((samples//10)) - 1"])] if declare else []
    return model(
        nodes,
        [tensor("x", TensorProto.FLOAT, ["batch", "samples"])],
        [tensor("y", TensorProto.FLOAT, [None, None, 16])],
        inits,
        value_info=value_info,
    )


def test_a_view_to_its_own_computed_sizes_goes():
    before = audio_frames_model()
    after = rewriter.optimize(before, level="basic").model
    assert "Reshape" not in ops(after) and "Div" not in ops(after)
    for shape in ([2, 57], [1, 40], [3, 200]):
        feeds = {"x": np.random.default_rng(1).standard_normal(shape).astype(np.float32)}
        np.testing.assert_allclose(run(before, feeds)[0], run(after, feeds)[0], atol=1e-6)


def test_without_the_declaration_the_conv_length_is_computed():
    from rewriter.graph.types import infer_model_types

    m = audio_frames_model(declare=False)
    # floor((samples - 20) / 10) + 1, spelled as the exporter declares it
    assert shape_of(infer_model_types(m)["c"]) == ["batch", 16, "(samples//10) + -1"]
    assert "Reshape" not in ops(rewriter.optimize(m, level="basic").model)


def test_a_view_to_its_sizes_in_another_order_stays():
    m = audio_frames_model()
    concat = next(n for n in m.graph.node if n.op_type == "Concat")
    concat.input[:2] = ["g1", "b1"]  # [frames, batch, 16]: the same sizes, another shape
    after = rewriter.optimize(m, level="basic").model
    assert "Reshape" in ops(after)
    feeds = {"x": np.random.default_rng(1).standard_normal([2, 57]).astype(np.float32)}
    np.testing.assert_allclose(run(m, feeds)[0], run(after, feeds)[0], atol=1e-6)


@pytest.mark.parametrize(
    ("op", "attrs", "length"),
    [
        ("Conv", {"kernel_shape": [3], "pads": [1, 1]}, "n"),
        ("Conv", {"kernel_shape": [4], "strides": [2], "pads": [1, 1]}, "(n//2)"),
        ("Conv", {"kernel_shape": [3], "strides": [2], "auto_pad": "SAME_UPPER"}, "((n + 1)//2)"),
        ("Conv", {"kernel_shape": [3], "dilations": [2], "auto_pad": "VALID"}, "n + -4"),
        ("MaxPool", {"kernel_shape": [2], "strides": [2]}, "(n//2)"),
        ("MaxPool", {"kernel_shape": [2], "strides": [2], "ceil_mode": 1}, None),  # not arithmetic
        ("ConvTranspose", {"kernel_shape": [4], "strides": [2], "pads": [1, 1]}, "2*n"),
    ],
)
def test_windowed_ops_count_their_positions(op, attrs, length):
    from rewriter.graph.types import infer_model_types

    inputs = ["x", "W"] if op.startswith("Conv") else ["x"]
    weights = [init("W", np.zeros((4, 4, attrs["kernel_shape"][0]), np.float32))] if op.startswith("Conv") else []
    m = model(
        [helper.make_node(op, inputs, ["y"], **attrs)],
        [tensor("x", TensorProto.FLOAT, ["batch", 4, "n"])],
        [tensor("y", TensorProto.FLOAT, None)],
        weights,
    )
    computed = shape_of(infer_model_types(m)["y"])[2]
    if length is None:
        assert not is_known_dim(computed)
        return
    assert computed == length
    n = 11
    y = run(m, {"x": np.zeros((1, 4, n), np.float32)})[0]
    assert y.shape[2] == eval(length.replace("n", str(n)))  # the name read as Python arithmetic


def test_a_flattened_batch_and_sequence_is_their_product():
    from rewriter.graph.types import infer_model_types

    nodes = [
        helper.make_node("Reshape", ["x", "flat"], ["f"]),
        helper.make_node("Reshape", ["f", "back"], ["y"]),
        helper.make_node("Reshape", ["x", "copy"], ["z"]),
    ]
    inits = [
        init("flat", np.array([-1, 64], np.int64)),
        init("back", np.array([-1, 3, 64], np.int64)),  # [batch*seq, 64] -> [?, 3, 64]: no name
        init("copy", np.array([0, 4, -1], np.int64)),  # a 0 copies batch, the -1 is what is left
    ]
    m = model(
        nodes,
        [tensor("x", TensorProto.FLOAT, ["batch", "seq", 64])],
        [tensor("y", TensorProto.FLOAT, None), tensor("z", TensorProto.FLOAT, None)],
        inits,
    )
    types = infer_model_types(m)
    assert shape_of(types["f"]) == ["batch*seq", 64]
    assert not is_known_dim(shape_of(types["y"])[0])  # batch*seq / 3 is no dim anyone named
    assert shape_of(types["z"]) == ["batch", 4, "16*seq"]


def test_a_hostile_dim_name_costs_little():
    deep = "(" * 100_000 + "a" + ")" * 100_000
    assert canonical_dim(deep) == deep  # too long to read: one opaque name
    wide = "*".join(f"(a{i} + b{i})" for i in range(12))  # 4096 terms multiplied out
    assert canonical_dim(wide) == wide
    with pytest.raises(EvalFailure):
        dim_product([f"a{i} + b{i}" for i in range(12)])


@pytest.mark.parametrize("a", [2, 3, 5])
@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("r", [-7, 0, 1, 3])
def test_a_floor_of_a_floor_is_one_floor(a, k, r):
    import re

    written = canonical_dim(f"((y//{a}) + {r})//{k}")
    assert written.count("//") == 1
    for y in range(-40, 41):  # // floors in Python as in the sizes' arithmetic
        assert eval(re.sub(r"\by\b", f"({y})", written)) == ((y // a) + r) // k, (written, y)


@pytest.mark.parametrize("dim", [0, 1, 5, 64])
@pytest.mark.parametrize("start", [0, 2, -1, -3, 70, 2**62])
@pytest.mark.parametrize("end", [0, 3, -1, -70, 64, 2**31 - 1, 2**63 - 1])
def test_a_slice_keeps_what_python_keeps(dim, start, end):
    from rewriter.graph.symbolic_shapes import slice_length

    assert slice_length(dim, start, end) == len(range(dim)[start:end])


def _value(dim: int | str, **sizes: int) -> int:
    """A dim's value at the given sizes (its spelling is Python's: ``//`` floors, Max)."""
    import re

    text = re.sub(r"[A-Za-z_]\w*", lambda m: "max" if m[0] == "Max" else str(sizes[m[0]]), str(dim))
    return eval(text)


@pytest.mark.parametrize(
    ("dim", "start", "end"),
    [
        (64, 0, "seq"),  # a position table cut to the sequence: Min(64, seq)
        ("seq", 0, 2**63 - 1),
        ("past + 1", "past", 2**63 - 1),  # a cache's new positions: 1
        ("seq", "past", "past + 4"),
        (8, "past", 8),
        ("past + seq", "past", "past + seq"),
        (128, "past", "past + 1"),  # a causal buffer's row for the new token
    ],
)
def test_a_slice_to_a_computed_end_keeps_what_python_keeps(dim, start, end):
    from rewriter.graph.symbolic_shapes import slice_length

    length = slice_length(dim, start, end)
    assert length is not None
    for seq in range(0, 140, 7):
        for past in (0, 1, 3, 127, 128, 200):
            sizes = {"seq": seq, "past": past}
            kept = len(range(_value(dim, **sizes))[_value(start, **sizes) : _value(end, **sizes)])
            assert _value(length, **sizes) == kept, (length, sizes)


def test_a_slice_whose_length_cannot_be_written_is_left_open():
    from rewriter.graph.symbolic_shapes import slice_length

    assert slice_length("seq", 0, -1) is None  # seq may be 0: Max(0, seq - 1) is not written
    assert slice_length("seq", "?1", 4) is None  # an unknown start
    assert slice_length("seq", 0, "seq + -2") is None  # an end that may be negative


def test_a_broadcast_bounds_a_clamped_dim_only_where_it_must():
    from rewriter.expr.dim_algebra import broadcast_result, vanishing_atom, without_atoms

    clamped = canonical_dim("Min(128, seq)")  # a causal buffer of 128 sliced to the sequence
    assert vanishing_atom("seq", clamped) == vanishing_atom(clamped, "seq") == "Max(0, seq + -128)"
    assert vanishing_atom("past + 1", canonical_dim("128 - Max(0, 127 - past)")) == "Max(0, past + -127)"
    # Min(1, seq) broadcasts against any seq (it is 1): nothing bounded, the result is seq
    assert vanishing_atom("seq", canonical_dim("Min(1, seq)")) is None
    assert broadcast_result(canonical_dim("1 - Max(0, 1 - seq)"), "seq") == "seq"
    assert vanishing_atom("seq", canonical_dim("Max(128, seq)")) is None  # 128 against 1 broadcasts
    assert vanishing_atom("other", clamped) is None and broadcast_result("other", clamped) is None
    assert broadcast_result(1, "seq") == "seq" and broadcast_result("seq", "seq") == "seq"
    assert without_atoms(canonical_dim("4*batch*Min(128, seq)"), {"Max(0, seq + -128)"}) == "4*batch*seq"
    # past + 1 <= 128 where the model runs: past <= 128 too, so a causal buffer's row
    # past:past + 1 is one row (Min(past + 1, 128) - Min(past, 128))
    row = "Max(0, past + -128) + 1"
    assert without_atoms(row, {"Max(0, past + -127)"}) == 1
    assert without_atoms("Max(0, past + -126) + 1", {"Max(0, past + -127)"}) == "Max(0, past + -126) + 1"


def positions_model(bounded: bool, dead: bool = False, declared: bool = True, normalized: bool = False):
    """dynamo's form of a table of 128 positions sliced to the sequence: its length is
    Min(128, seq), and the view after it is to [batch, Min(128, seq), 16].  ``bounded``:
    the slice is added to x (a broadcast of seq against Min(128, seq), which runs only
    where seq <= 128); else it is an output of its own and nothing bounds seq.  ``dead``:
    that sum is computed but nothing reads it (onnxruntime does not run it).
    ``normalized``: a LayerNormalization of the sum ("normed") is what the view reads."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
        helper.make_node("Gather", ["s", "i1"], ["n"], axis=0),
        helper.make_node("Min", ["cap", "n"], ["m"]),
        helper.make_node("Unsqueeze", ["m", "zero"], ["m1"]),
        helper.make_node("Slice", ["P", "zero", "m1", "zero"], ["p"]),
        helper.make_node("Add", ["x", "p"] if bounded else ["x", "x"], ["a"]),
        helper.make_node("LayerNormalization", ["a", "g", "beta"], ["normed"], axis=-1),
        helper.make_node("Unsqueeze", ["b", "zero"], ["b1"]),
        helper.make_node("Concat", ["b1", "m1", "width"], ["target"], axis=0),
        helper.make_node("Reshape", ["x" if dead else ("normed" if normalized else "a"), "target"], ["v"]),
        helper.make_node("Relu", ["v"], ["y"]),
    ]
    inits = [
        init("P", np.random.default_rng(0).standard_normal((128, 16)).astype(np.float32)),
        init("cap", np.array(128, np.int64)),
        init("zero", np.array([0], np.int64)),
        init("i0", np.array(0, np.int64)),
        init("i1", np.array(1, np.int64)),
        init("width", np.array([16], np.int64)),
        init("g", np.ones(16, np.float32)),
        init("beta", np.zeros(16, np.float32)),
    ]
    if not normalized:
        nodes = [n for n in nodes if n.op_type != "LayerNormalization"]
    outputs = [tensor("y", TensorProto.FLOAT, None)] + ([] if bounded else [tensor("p", TensorProto.FLOAT, None)])
    # as the exporter does; without it the engine computes the same
    value_info = [tensor("p", TensorProto.FLOAT, ["Min(128, seq)", 16])] if declared else []
    return model(nodes, [tensor("x", TensorProto.FLOAT, ["batch", "seq", 16])], outputs, inits, value_info=value_info)


@pytest.mark.parametrize("declared", [True, False])
def test_a_length_the_model_bounds_by_a_broadcast_is_the_sequence(declared):
    before = positions_model(bounded=True, declared=declared)
    after = rewriter.optimize(before, level="basic").model
    assert "Concat" not in ops(after)  # the view's target [batch, Min(128, seq), 16] is x's shape
    for shape in ([2, 5, 16], [1, 128, 16], [0, 3, 16], [2, 0, 16]):
        feeds = {"x": np.random.default_rng(1).standard_normal(shape).astype(np.float32)}
        np.testing.assert_allclose(run(before, feeds)[0], run(after, feeds)[0], atol=1e-6)


@pytest.mark.parametrize("declared", [True, False])
def test_what_reads_a_bounded_broadcast_is_typed_with_the_sequence(declared):
    # the broadcast's own type is corrected once the bound settles (seq <= 128); a
    # LayerNormalization reading it was typed before, from the dim inference had left
    # unnamed, and is inferred again (BROS: every SkipLayerNormalization after it needs seq)
    from rewriter.graph.model import ModelState

    view = ModelState(positions_model(bounded=True, declared=declared, normalized=True)).view
    assert view.shape("a") == ["batch", "seq", 16] and view.shape("normed") == ["batch", "seq", 16]


@pytest.mark.parametrize("declared", [True, False])
@pytest.mark.parametrize("kind", ["unbounded", "dead"])
def test_a_clamped_length_nothing_bounds_stays_computed(kind, declared):
    m = positions_model(bounded=kind == "dead", dead=kind == "dead", declared=declared)
    after = rewriter.optimize(m, level="basic").model
    assert "Concat" in ops(after)  # seq may be 200: the view is then to [batch, 128, 16]


def test_a_transposing_fused_matmul_is_typed():
    """onnx knows no FusedMatMul: its stand-in types it, transA/transB included (the scores
    q x k^T once MatMulTransposeBFusion has run), so the attention rules after it see them."""
    from rewriter.graph.types import infer_node_types

    opsets = {"": 17, "com.microsoft": 1}

    def typed(attrs, a, b):
        node = helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain="com.microsoft", **attrs)
        types = {"a": helper.make_tensor_type_proto(1, a), "b": helper.make_tensor_type_proto(1, b)}
        found = infer_node_types(node, types, opsets)
        return shape_of(found["y"]) if "y" in found else None

    assert typed({"alpha": 0.25, "transB": 1}, ["4*batch", "s", 16], ["4*batch", "t", 16]) == ["4*batch", "s", "t"]
    assert typed({"transA": 1}, [1, 5, 3], [2, 5, 7]) == [2, 3, 7]  # batch axes broadcast
    assert typed({"transA": 1, "transB": 1}, [5, 3], [7, 5]) == [3, 7]
    assert typed({"transBatchA": 1}, [2, 3, 4], [3, 4, 5]) is None  # not covered: unknown


def cache_io(elem: int):
    """(inputs, outputs) of a cache step: past [batch, past, 8] and x [batch, seq, 8] of
    ``elem``, the present key declared [batch, total_sequence_length, 8] (float) and y."""
    inputs = [
        tensor("past", elem, ["batch", "past_sequence_length", 8]),
        tensor("x", elem, ["batch", "sequence_length", 8]),
    ]
    outputs = [
        tensor("present", TensorProto.FLOAT, ["batch", "total_sequence_length", 8]),
        tensor("y", TensorProto.FLOAT, None),
    ]
    return inputs, outputs


def test_a_declared_total_length_names_the_sum_it_is():
    """A float16 model's present key: Concat(past, new) is typed past + seq by inference,
    and the output Cast from it is declared total_sequence_length: the two are one size."""
    from rewriter.graph.model import ModelState

    nodes = [
        helper.make_node("Concat", ["past", "x"], ["c"], axis=1),
        helper.make_node("Cast", ["c"], ["present"], to=TensorProto.FLOAT),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Cast", ["r"], ["y"], to=TensorProto.FLOAT),
    ]
    m = model(nodes, *cache_io(TensorProto.FLOAT16))
    view = ModelState(m).view
    assert view.shape("c") == view.shape("r") == ["batch", "total_sequence_length", 8]


def test_a_computed_total_length_is_the_declared_one():
    """A cache's mask length computed as past + seq (Shape arithmetic) is the present key's
    declared total_sequence_length: a view to [batch, past + seq, 8] of the present key
    is to its own shape, and its computed target folds."""
    nodes = [
        helper.make_node("Concat", ["past", "x"], ["present"], axis=1),
        helper.make_node("Shape", ["past"], ["sp"]),
        helper.make_node("Shape", ["x"], ["sx"]),
        helper.make_node("Gather", ["sx", "i0"], ["b"], axis=0),
        helper.make_node("Gather", ["sp", "i1"], ["p"], axis=0),
        helper.make_node("Gather", ["sx", "i1"], ["n"], axis=0),
        helper.make_node("Add", ["p", "n"], ["t"]),
        helper.make_node("Unsqueeze", ["b", "zero"], ["b1"]),
        helper.make_node("Unsqueeze", ["t", "zero"], ["t1"]),
        helper.make_node("Concat", ["b1", "t1", "width"], ["target"], axis=0),
        helper.make_node("Reshape", ["present", "target"], ["v"]),
        helper.make_node("Relu", ["v"], ["y"]),
    ]
    inits = [
        init("zero", np.array([0], np.int64)),
        init("i0", np.array(0, np.int64)),
        init("i1", np.array(1, np.int64)),
        init("width", np.array([8], np.int64)),
    ]
    m = model(nodes, *cache_io(TensorProto.FLOAT), inits)
    after = rewriter.optimize(m, level="basic").model
    assert "Add" not in ops(after) and "Shape" not in ops(after)
    rng = np.random.default_rng(0)
    for past, seq in ((3, 2), (0, 4), (5, 0)):
        feeds = {
            "past": rng.standard_normal((2, past, 8)).astype(np.float32),
            "x": rng.standard_normal((2, seq, 8)).astype(np.float32),
        }
        for a, b in zip(run(m, feeds), run(after, feeds)):
            np.testing.assert_allclose(a, b, atol=1e-6)
