"""Forms found on exports of families the packs were not written against (BLOOM, MobileBERT,
decoders that fold heads into the batch axis): BLOOM's factored tanh-GELU, chains of
constant Adds or Muls, and a Reshape's -1 named through heads moved into or out of the
batch axis."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import assert_same_outputs, init, model, ops, run, tensor
from onnx import helper
from onnxruntime.capi.onnxruntime_pybind11_state import Fail

import rewriter
from rewriter.graph.type_reading import shape_of
from rewriter.graph.types import infer_model_types


def bloom_gelu() -> object:
    """x * 0.5 * (1 + tanh(0.79788456 * x * (1 + 0.044715 * x * x))), as BLOOM writes it."""
    n = helper.make_node
    nodes = [
        n("Mul", ["x", "half"], ["xh"]),
        n("Mul", ["x", "k2"], ["xk2"]),
        n("Mul", ["x", "k1"], ["xk1"]),
        n("Mul", ["xk1", "x"], ["xx"]),
        n("Add", ["xx", "one"], ["inner"]),
        n("Mul", ["xk2", "inner"], ["arg"]),
        n("Tanh", ["arg"], ["t"]),
        n("Add", ["t", "one"], ["t1"]),
        n("Mul", ["xh", "t1"], ["y"]),
    ]
    constants = {"half": 0.5, "k2": 0.79788456, "k1": 0.044715, "one": 1.0}
    return model(
        nodes,
        [tensor("x", shape=["B", 4, 8])],
        [tensor("y", shape=["B", 4, 8])],
        [init(k, np.array(v, np.float32)) for k, v in constants.items()],
    )


def test_bloom_gelu_becomes_fast_gelu():
    before = bloom_gelu()
    after = rewriter.optimize(before, level="extended")
    assert ops(after.model) == {"FastGelu": 1}
    assert after.report.applied("GeluTanhFactoredCubic") == 1
    assert_same_outputs(before, after.model, atol=1e-5)


def chain(op: str, c1, c2):
    nodes = [helper.make_node(op, ["x", "c1"], ["t"]), helper.make_node(op, ["t", "c2"], ["y"])]
    return model(
        nodes,
        [tensor("x", shape=["B", 8])],
        [tensor("y", shape=["B", 8])],
        [init("c1", np.asarray(c1, np.float32)), init("c2", np.asarray(c2, np.float32))],
    )


@pytest.mark.parametrize("op", ["Add", "Mul"])
def test_two_constants_in_a_row_become_one(op):
    rng = np.random.default_rng(0)
    before = chain(op, rng.standard_normal(8), rng.standard_normal([1, 8]))
    after = rewriter.optimize(before, level="extended").model
    assert ops(after) == {op: 1}
    assert_same_outputs(before, after, atol=1e-5)


@pytest.mark.parametrize(
    "op, c1, c2",
    [
        ("Mul", np.full(8, 1e30), np.full(8, 1e30)),  # the product overflows where x * c1 * c2 may not
        ("Add", np.ones([8, 1]), np.ones([1, 8])),  # a [8, 8] constant from two of 8
    ],
)
def test_a_chain_whose_combined_constant_is_infinite_or_larger_stays(op, c1, c2):
    before = chain(op, c1, c2)
    if c1.shape == (8, 1):
        before.graph.output[0].CopyFrom(tensor("y", shape=None))
        before.graph.input[0].CopyFrom(tensor("x", shape=[8]))
    after = rewriter.optimize(before, level="extended").model
    assert ops(after) == {op: 2}


def test_a_minus_one_through_heads_in_the_batch_axis_keeps_its_name():
    """[batch, 4, 8, 16] -> [-1, 8, 16] is 4*batch; back with [-1, 4, 8, 16] it is batch."""
    n = helper.make_node
    nodes = [
        n("Reshape", ["x", "to3"], ["folded"]),
        n("Relu", ["folded"], ["r"]),
        n("Reshape", ["r", "to4"], ["y"]),
    ]
    m = model(
        nodes,
        [tensor("x", shape=["batch", 4, 8, 16])],
        [tensor("y", shape=None)],
        [init("to3", np.array([-1, 8, 16], np.int64)), init("to4", np.array([-1, 4, 8, 16], np.int64))],
    )
    m.graph.output[0].CopyFrom(tensor("y", shape=None))
    types = infer_model_types(m)
    assert shape_of(types["folded"]) == ["4*batch", 8, 16]
    assert shape_of(types["y"]) == ["batch", 4, 8, 16]


def flat_merge_attention(bias: bool) -> object:
    """GPT-2 as dynamo exports it with dynamic axes: Q.K^T scaled, an additive mask whose last
    dim the exporter declares as ``((batch*seq)//batch)``, the heads merged straight to
    [batch*seq, C] for Conv1D's Gemm, and the Gemm's result viewed back to [batch, seq, C]
    with a target computed from x's own Shape."""
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "wq"], ["q"]),
        n("MatMul", ["x", "wk"], ["k"]),
        n("MatMul", ["x", "wv"], ["v"]),
        n("Reshape", ["q", "heads"], ["qh"]),
        n("Reshape", ["k", "heads"], ["kh"]),
        n("Reshape", ["v", "heads"], ["vh"]),
        n("Transpose", ["qh"], ["qt"], perm=[0, 2, 1, 3]),
        n("Transpose", ["kh"], ["kt"], perm=[0, 2, 3, 1]),
        n("Transpose", ["vh"], ["vt"], perm=[0, 2, 1, 3]),
        n("MatMul", ["qt", "kt"], ["s"]),
        n("Mul", ["s", "scale"], ["ss"]),
        n("Add", ["ss", "mask"], ["sm"]),
        n("Softmax", ["sm"], ["p"], axis=-1),
        n("MatMul", ["p", "vt"], ["o"]),
        n("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
        n("Reshape", ["ot", "flat"], ["of"]),
        n("Gemm", ["of", "wo", "bo"] if bias else ["of", "wo"], ["g"]),
        n("Shape", ["x"], ["sx"]),
        n("Gather", ["sx", "zero"], ["b"], axis=0),
        n("Gather", ["sx", "one"], ["t"], axis=0),
        n("Concat", ["b", "t", "width"], ["back"], axis=0),
        n("Reshape", ["g", "back"], ["y"]),
    ]
    rng = np.random.default_rng(0)
    weights = {w: rng.standard_normal((8, 8)).astype(np.float32) for w in ("wq", "wk", "wv", "wo")}
    constants = {
        "heads": np.array([0, 0, 2, 4], np.int64),
        "scale": np.array(0.5, np.float32),
        "flat": np.array([-1, 8], np.int64),
        "bo": rng.standard_normal(8).astype(np.float32),
        "zero": np.array([0], np.int64),
        "one": np.array([1], np.int64),
        "width": np.array([8], np.int64),
    }
    return model(
        nodes,
        [tensor("x", shape=["batch", "seq", 8]), tensor("mask", shape=["batch", 1, "seq", "((batch*seq)//batch)"])],
        [tensor("y", shape=["batch", "seq", 8])],
        [init(k, v) for k, v in {**weights, **constants}.items()],
    )


@pytest.mark.parametrize("bias", [True, False])
def test_heads_merged_flat_for_a_gemm_still_fuse_attention(bias):
    """The flattened merge becomes [batch, seq, C] for a MatMul (the Gemm's Reshapes go),
    which leaves the head merge attention fuses, and the mask's dynamo-spelled length is
    seq."""
    before = flat_merge_attention(bias)
    after = rewriter.optimize(before, level="extended")
    counts = ops(after.model)
    assert "Softmax" not in counts and "Gemm" not in counts
    assert counts["MultiHeadAttention"] + counts["Attention"] == 1
    assert_same_outputs(before, after.model, atol=1e-4)


def complex_product(x: str, pairs: str, back: str, y: str) -> list:
    """x's last axis as pairs of complex numbers times cos + i sin, in real arithmetic
    (view_as_complex(x) * freqs_cis as exported), viewed back by `back`."""
    n = helper.make_node
    return [
        n("Reshape", [x, pairs], [f"{x}h"]),
        n("Gather", [f"{x}h", "zero"], [f"{x}a"], axis=4),
        n("Gather", [f"{x}h", "one"], [f"{x}b"], axis=-1),
        n("Mul", [f"{x}a", "cos"], [f"{x}ac"]),
        n("Mul", [f"{x}b", "sin"], [f"{x}bs"]),
        n("Sub", [f"{x}ac", f"{x}bs"], [f"{x}re"]),
        n("Mul", ["sin", f"{x}a"], [f"{x}as"]),
        n("Mul", [f"{x}b", "cos"], [f"{x}bc"]),
        n("Add", [f"{x}bc", f"{x}as"], [f"{x}im"]),
        n("Unsqueeze", [f"{x}re", "last"], [f"{x}ure"]),
        n("Unsqueeze", [f"{x}im", "last"], [f"{x}uim"]),
        n("Concat", [f"{x}ure", f"{x}uim"], [f"{x}c"], axis=-1),
        n("Reshape", [f"{x}c", back], [y]),
    ]


def complex_rotary() -> object:
    """DeepSeek-V2's rotary as TorchScript exports view_as_complex(x) * freqs_cis: pairs of
    x's last axis as complex numbers times constant cos + i sin; q has its heads, the key one
    head viewed from [B, S, R]."""
    nodes = complex_product("q", "pairs_q", "back_q", "yq") + complex_product("k", "pairs_k", "back_k", "yk")
    angles = np.arange(3)[:, None] * (0.7 ** np.arange(2))[None, :]
    constants = {
        "pairs_q": np.array([2, 2, 3, -1, 2], np.int64),
        "back_q": np.array([2, 2, 3, -1], np.int64),
        "pairs_k": np.array([2, 1, 3, 2, 2], np.int64),
        "back_k": np.array([2, 1, 3, 4], np.int64),
        "zero": np.array(0, np.int64),
        "one": np.array(1, np.int64),
        "last": np.array([-1], np.int64),
        "cos": np.cos(angles).astype(np.float32).reshape(1, 1, 3, 2),
        "sin": np.sin(angles).astype(np.float32).reshape(1, 1, 3, 2),
    }
    return model(
        nodes,
        [tensor("q", shape=[2, 2, 3, 4]), tensor("k", shape=[2, 3, 4])],
        [tensor("yq", shape=[2, 2, 3, 4]), tensor("yk", shape=[2, 1, 3, 4])],
        [init(k, v) for k, v in constants.items()],
    )


def test_a_rotary_written_as_a_complex_product_becomes_rotary_embedding():
    before = complex_rotary()
    after = rewriter.optimize(before, level="extended")
    assert ops(after.model) == {"RotaryEmbedding": 2, "Reshape": 1}  # the key's one-head view stays
    assert after.report.applied("RotaryEmbeddingComplexFusion") == 1
    assert after.report.applied("RotaryEmbeddingComplexViewFusion") == 1
    assert_same_outputs(before, after.model, atol=1e-5)


def test_a_complex_rotary_with_heads_last_becomes_rotary_embedding_of_the_merged_heads():
    """Llama 4's form: x [B, S, N*R] viewed as pairs [B, S, N, R/2, 2], cos [1, S, 1, R/2]."""
    nodes = complex_product("x", "pairs", "back", "y")
    angles = np.arange(3)[:, None] * (0.7 ** np.arange(2))[None, :]
    constants = {
        "pairs": np.array([2, 3, 2, -1, 2], np.int64),
        "back": np.array([2, 3, 2, 4], np.int64),
        "zero": np.array(0, np.int64),
        "one": np.array(1, np.int64),
        "last": np.array([-1], np.int64),
        "cos": np.cos(angles).astype(np.float32).reshape(1, 3, 1, 2),
        "sin": np.sin(angles).astype(np.float32).reshape(1, 3, 1, 2),
    }
    before = model(
        nodes,
        [tensor("x", shape=[2, 3, 8])],
        [tensor("y", shape=[2, 3, 2, 4])],
        [init(k, v) for k, v in constants.items()],
    )
    after = rewriter.optimize(before, level="extended")
    assert ops(after.model) == {"RotaryEmbedding": 1, "Reshape": 1}
    assert after.report.applied("RotaryEmbeddingComplexHeadsLastFusion") == 1
    assert_same_outputs(before, after.model, atol=1e-5)


def softcapped_attention(
    past: bool,
    batch: int | str,
    seq: int | str,
    softcap: bool = True,
    sink: np.ndarray | None = None,
    masked: float = float(np.finfo(np.float32).min),
) -> object:
    """Gemma 2's attention: q [B, S, 4 x 8] and k, v [B, S, 2 x 8] split into heads, k and v
    repeated for the query heads (repeat_kv), cap * tanh(q.k^T * scale / cap) plus a mask,
    Softmax, times v, merged back; with `past`, k and v are appended to a cache first (and
    are the model's present outputs); without `softcap`, Llama's and Qwen2's attention; with
    `sink` (a logit per head, [1, 4, 1]), Granite SWA's gate sigmoid(LogSumExp(scores) - sink)
    on each head's output, and the mask built by Where(keep, 0, masked) from a boolean input
    `keep` as exporters build it."""
    n = helper.make_node
    kh, vh = ("kc", "vc") if past else ("kh", "vh")
    nodes = [
        n("Reshape", ["q", "split_q"], ["q4"]),
        n("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        n("Reshape", ["k", "split_kv"], ["k4"]),
        n("Transpose", ["k4"], ["kh"], perm=[0, 2, 1, 3]),
        n("Reshape", ["v", "split_kv"], ["v4"]),
        n("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
        *(
            [n("Concat", ["past_k", "kh"], ["kc"], axis=2), n("Concat", ["past_v", "vh"], ["vc"], axis=2)]
            if past
            else []
        ),
        n("Unsqueeze", [kh, "axis2"], ["ku"]),
        n("Expand", ["ku", "repeat"], ["ke"]),
        n("Reshape", ["ke", "merge_groups"], ["kr"]),
        n("Unsqueeze", [vh, "axis2"], ["vu"]),
        n("Expand", ["vu", "repeat"], ["ve"]),
        n("Reshape", ["ve", "merge_groups"], ["vr"]),
        n("Transpose", ["kr"], ["kt"], perm=[0, 1, 3, 2]),
        n("MatMul", ["qh", "kt"], ["qk"]),
        n("Mul", ["qk", "scale"], ["scaled"]),
        *(
            [n("Div", ["scaled", "cap"], ["z"]), n("Tanh", ["z"], ["t"]), n("Mul", ["t", "cap"], ["capped"])]
            if softcap
            else []
        ),
        n("Add", ["capped" if softcap else "scaled", "mask"], ["masked"]),
        n("Softmax", ["masked"], ["p"], axis=-1),
        n("MatMul", ["p", "vr"], ["pv" if sink is None else "pv_ungated"]),
        *(
            [
                n("ReduceLogSumExp", ["masked"], ["lse"], axes=[-1], keepdims=0),
                n("Sub", ["lse", "sink"], ["lse_sink"]),
                n("Sigmoid", ["lse_sink"], ["gate"]),
                n("Unsqueeze", ["gate", "last"], ["gate4"]),
                n("Mul", ["pv_ungated", "gate4"], ["pv"]),
            ]
            if sink is not None
            else []
        ),
        n("Transpose", ["pv"], ["o"], perm=[0, 2, 1, 3]),
        n("Reshape", ["o", "merge"], ["y"]),
    ]
    inits = [
        init("split_q", np.array([0, 0, 4, 8], np.int64)),
        init("split_kv", np.array([0, 0, 2, 8], np.int64)),
        init("axis2", np.array([2], np.int64)),
        init("repeat", np.array([1, 1, 2, 1, 1], np.int64)),
        init("merge_groups", np.array([0, 4, -1, 8], np.int64)),
        init("scale", np.array(8**-0.5, np.float32)),
        *([init("cap", np.array(50.0, np.float32))] if softcap else []),
        init("merge", np.array([0, 0, 32], np.int64)),
        *([init("sink", sink.astype(np.float32)), init("last", np.array([-1], np.int64))] if sink is not None else []),
    ]
    if sink is not None:
        nodes.insert(0, n("Where", ["keep", "zero", "low"], ["mask"]))
        inits += [init("zero", np.array(0.0, np.float32)), init("low", np.array(masked, np.float32))]
    b = batch
    inputs = [
        tensor("q", shape=[b, seq, 32]),
        tensor("k", shape=[b, seq, 16]),
        tensor("v", shape=[b, seq, 16]),
        tensor("mask", shape=[b, 1, seq, "T" if past else seq])
        if sink is None
        else tensor("keep", onnx.TensorProto.BOOL, shape=[b, 1, seq, "T" if past else seq]),
    ]
    outputs = [tensor("y", shape=[b, seq, 32])]
    if past:
        inputs += [tensor("past_k", shape=[b, 2, "P", 8]), tensor("past_v", shape=[b, 2, "P", 8])]
        outputs += [tensor("kc", shape=[b, 2, "T", 8]), tensor("vc", shape=[b, 2, "T", 8])]
    return model(nodes, inputs, outputs, inits)


def attention_feeds(rng, batch: int, seq: int, cached: int | None) -> dict:
    """Inputs of softcapped_attention: random q, k, v (scaled so that the cap bites), a mask
    of 0 and -1e9, caches of `cached` positions (None: no cache)."""
    total = seq + (cached or 0)
    feeds = {
        "q": rng.standard_normal([batch, seq, 32]).astype(np.float32) * 4,
        "k": rng.standard_normal([batch, seq, 16]).astype(np.float32) * 4,
        "v": rng.standard_normal([batch, seq, 16]).astype(np.float32),
        "mask": np.where(rng.random([batch, 1, seq, total]) < 0.3, -1e9, 0.0).astype(np.float32),
    }
    if cached is not None:
        feeds["past_k"] = rng.standard_normal([batch, 2, cached, 8]).astype(np.float32)
        feeds["past_v"] = rng.standard_normal([batch, 2, cached, 8]).astype(np.float32)
    return feeds


def assert_same_on(before, after, feeds: dict) -> None:
    for a, b in zip(run(before, feeds), run(after, feeds)):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)


def test_soft_capped_attention_becomes_group_query_attention_of_the_unrepeated_heads():
    before = softcapped_attention(past=False, batch=2, seq=5)
    after = rewriter.optimize(before, level="extended")
    found = ops(after.model)
    assert found["GroupQueryAttention"] == 1 and not {"Tanh", "Softmax", "Unsqueeze", "Shape"} & set(found)
    assert after.report.applied("GroupQueryAttentionSoftcapRepeatedFusion") == 1
    gqa = next(node for node in after.model.graph.node if node.op_type == "GroupQueryAttention")
    attributes = {a.name: helper.get_attribute_value(a) for a in gqa.attribute}
    assert (attributes["num_heads"], attributes["kv_num_heads"], attributes["causal"]) == (4, 2, 0)
    assert attributes["softcap"] == pytest.approx(50.0)
    assert_same_on(before, after.model, attention_feeds(np.random.default_rng(3), 2, 5, None))


@pytest.mark.parametrize("softcap", [True, False])
@pytest.mark.parametrize("batch, seq", [("B", 5), (2, "S")])
def test_attention_whose_batch_or_queries_may_be_empty_is_not_group_query_attention(softcap, batch, seq):
    """onnxruntime 1.32's GroupQueryAttention crashes the process on an empty batch and
    refuses an empty sequence, where the attention itself gives an empty result."""
    before = softcapped_attention(past=False, batch=batch, seq=seq, softcap=softcap)
    after = rewriter.optimize(before, level="extended").model
    assert "GroupQueryAttention" not in ops(after)
    empty = attention_feeds(np.random.default_rng(0), 0 if batch == "B" else 2, 0 if seq == "S" else 5, None)
    try:  # the view [0, 4, -1, 8] of an empty batch is ambiguous: onnxruntime refuses it
        expected = run(before, empty)
    except Fail:
        with pytest.raises(Fail):
            run(after, empty)
    else:
        for a, b in zip(expected, run(after, empty)):
            assert a.shape == b.shape


def test_grouped_query_attention_without_a_cache_reads_each_key_head_once():
    """Multi-head attention over keys repeated for the query heads (repeat_kv) is
    GroupQueryAttention of the heads before the repeat."""
    before = softcapped_attention(past=False, batch=2, seq=3, softcap=False)
    after = rewriter.optimize(before, level="extended")
    found = ops(after.model)
    assert found["GroupQueryAttention"] == 1 and not {"MultiHeadAttention", "Softmax", "Unsqueeze"} & set(found)
    assert after.report.applied("GroupQueryAttentionRepeatedHeadsFusion") == 1
    gqa = next(node for node in after.model.graph.node if node.op_type == "GroupQueryAttention")
    attributes = {a.name: helper.get_attribute_value(a) for a in gqa.attribute}
    assert (attributes["num_heads"], attributes["kv_num_heads"], attributes["causal"]) == (4, 2, 0)
    assert_same_outputs(before, after.model)


def test_soft_capped_attention_over_a_cache_of_several_queries_and_items_is_left_alone():
    """With a cache the kernel refuses several queries for several batch items."""
    before = softcapped_attention(past=True, batch=2, seq=3)
    after = rewriter.optimize(before, level="extended").model
    assert "GroupQueryAttention" not in ops(after) and ops(after)["Tanh"] == 1


@pytest.mark.parametrize(
    "softcap, rule",
    [(True, "GroupQueryAttentionSoftcapCachedFusion"), (False, "GroupQueryAttentionCachedRepeatedHeadsFusion")],
)
def test_attention_of_one_query_over_a_cache_reads_the_cache_in_the_kernel(softcap, rule):
    before = softcapped_attention(past=True, batch=3, seq=1, softcap=softcap)
    after = rewriter.optimize(before, level="extended")
    found = ops(after.model)
    assert found["GroupQueryAttention"] == 1 and not {"Tanh", "Softmax", "Concat", "Unsqueeze"} & set(found)
    assert after.report.applied(rule) == 1
    rng = np.random.default_rng(4)
    for cached in [0, 4]:
        assert_same_on(before, after.model, attention_feeds(rng, 3, 1, cached))


@pytest.mark.parametrize("batch, seq", [(2, 5), ("B", "S")])
def test_attention_gated_by_a_sink_becomes_multi_head_attention_with_a_sink_column(batch, seq):
    """Granite SWA: Softmax(S + mask).V * sigmoid(LogSumExp(S + mask) - sink) is attention over
    one more key of logit `sink` and value 0; on a fully masked row too, where both give 0
    (the gate is 0, the sink takes all of the Softmax)."""
    sink = np.array([0.5, -1.0, 2.0, 0.0], np.float32).reshape(1, 4, 1)
    before = softcapped_attention(past=False, batch=batch, seq=seq, softcap=False, sink=sink)
    after = rewriter.optimize(before, level="extended")
    found = ops(after.model)
    assert found["MultiHeadAttention"] == 1 and not {"ReduceLogSumExp", "Sigmoid", "Softmax"} & set(found)
    assert after.report.applied("MultiHeadAttentionGateSinkTransBFusion") == 1  # (k^T read by transB)
    feeds = gated_feeds(np.random.default_rng(5))
    assert_same_on(before, after.model, feeds)
    feeds["keep"][0, 0, 1, :] = False  # one query sees no key
    assert_same_on(before, after.model, feeds)


def gated_feeds(rng) -> dict:
    feeds = attention_feeds(rng, 2, 5, None)
    feeds["keep"] = feeds.pop("mask") == 0
    return feeds


def test_attention_gated_by_a_sink_over_an_infinite_mask_is_left_alone():
    """Masked with -inf, a fully masked row is NaN in the original and 0 with the sink."""
    sink = np.zeros([1, 4, 1], np.float32)
    before = softcapped_attention(past=False, batch=2, seq=5, softcap=False, sink=sink, masked=-np.inf)
    after = rewriter.optimize(before, level="extended")
    assert "MultiHeadAttention" not in ops(after.model) and ops(after.model)["ReduceLogSumExp"] == 1
    feeds = gated_feeds(np.random.default_rng(6))
    feeds["keep"][1, 0, 0, :] = False
    assert np.isnan(run(before, feeds)[0]).any()
    assert_same_on(before, after.model, feeds)


def filled_attention(fill: float, batch="B", seq="S", kept: bool = False) -> onnx.ModelProto:
    """XLM's and FlauBERT's attention: q's heads divided by sqrt(d), Q.K^T, the padding mask
    Equal(attention_mask, 0) viewed as [B, 1, 1, S] and expanded to the scores' shape at run
    time, scores.masked_fill(mask, fill) (kept: torch.where(keep, scores, fill)), Softmax, V."""
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "wq"], ["q"]),
        n("MatMul", ["x", "wk"], ["k"]),
        n("MatMul", ["x", "wv"], ["v"]),
        n("Reshape", ["q", "split"], ["q4"]),
        n("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        n("Div", ["qh", "root"], ["qs"]),
        n("Reshape", ["k", "split"], ["k4"]),
        n("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
        n("Reshape", ["v", "split"], ["v4"]),
        n("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
        n("MatMul", ["qs", "kt"], ["scores"]),
        n("Equal", ["attention_mask", "zero_i"], ["padded"]),
        *([n("Not", ["padded"], ["keep"])] if kept else []),
        n("Reshape", ["keep" if kept else "padded", "row"], ["m"]),
        n("Shape", ["scores"], ["shape"]),
        n("Expand", ["m", "shape"], ["me"]),
        n("Where", ["me", "scores", "fill"] if kept else ["me", "fill", "scores"], ["filled"]),
        n("Softmax", ["filled"], ["p"], axis=-1),
        n("MatMul", ["p", "vh"], ["pv"]),
        n("Transpose", ["pv"], ["o"], perm=[0, 2, 1, 3]),
        n("Reshape", ["o", "merge"], ["y"]),
    ]
    rng = np.random.default_rng(0)
    inits = [init(w, rng.standard_normal([32, 32]).astype(np.float32) * 0.3) for w in ("wq", "wk", "wv")]
    inits += [
        init("split", np.array([0, -1, 4, 8], np.int64)),
        init("root", np.array(8**0.5, np.float32)),
        init("zero_i", np.array(0, np.int64)),
        init("row", np.array([0, 1, 1, -1], np.int64)),
        init("fill", np.array(fill, np.float32)),
        init("merge", np.array([0, -1, 32], np.int64)),
    ]
    inputs = [tensor("x", shape=[batch, seq, 32]), tensor("attention_mask", onnx.TensorProto.INT64, shape=[batch, seq])]
    return model(nodes, inputs, [tensor("y", shape=[batch, seq, 32])], inits)


def filled_feeds(batch: int = 2, seq: int = 5) -> dict:
    rng = np.random.default_rng(7)
    mask = (rng.random([batch, seq]) < 0.7).astype(np.int64)
    mask[:, 0] = 1
    mask[batch - 1] = 0  # one item whose every key is padding: its rows are uniform
    return {"x": rng.standard_normal([batch, seq, 32]).astype(np.float32), "attention_mask": mask}


@pytest.mark.parametrize("kept", [False, True])
@pytest.mark.parametrize("fill", [float(np.finfo(np.float32).min), -1e30])
def test_attention_masked_by_a_fill_becomes_multi_head_attention_with_an_additive_bias(fill, kept):
    before = filled_attention(fill, kept=kept)
    after = rewriter.optimize(before, level="extended")
    found = ops(after.model)
    assert found["MultiHeadAttention"] == 1 and not {"Softmax", "Div", "FusedMatMul"} & set(found)
    assert found["Where"] == 1 and found["Expand"] == 1  # the bias, expanded to q's and k's lengths
    assert after.report.applied("MatMulDividedInputAFusion") == 1
    rule = "MultiHeadAttentionKeptExpandedFusion" if kept else "MultiHeadAttentionFilledExpandedFusion"
    assert after.report.applied(rule) == 1
    # the lengths are read from the projections' input, which leaves q, k and v free to pack
    assert {node.input[0] for node in after.model.graph.node if node.op_type == "Shape"} == {"x"}
    assert_same_on(before, after.model, filled_feeds())
    assert_same_on(before, after.model, filled_feeds(batch=1, seq=1))


@pytest.mark.parametrize("fill", [-10000.0, -1e9, float("-inf")])
def test_attention_masked_by_a_fill_a_score_can_move_is_left_alone(fill):
    """A fully masked row is uniform in the original; with -10000 as a bias its scores would
    still show through (and with -inf the original is NaN)."""
    before = filled_attention(fill)
    after = rewriter.optimize(before, level="extended").model
    assert "MultiHeadAttention" not in ops(after) and ops(after)["Softmax"] == 1
    feeds = filled_feeds()
    for a, b in zip(run(before, feeds), run(after, feeds)):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)


def test_attention_masked_by_a_fill_with_static_shapes_reads_the_expanded_mask():
    """With static shapes the scores' shape is a constant: the Where reads the mask expanded
    to [B, N, S, T] and the bias is filled from it."""
    before = filled_attention(float(np.finfo(np.float32).min), batch=2, seq=5)
    after = rewriter.optimize(before, level="extended")
    assert after.report.applied("MultiHeadAttentionFilledFusion") == 1
    assert "Softmax" not in ops(after.model)
    assert_same_on(before, after.model, filled_feeds())


def broadcast_query_attention(batch: int) -> onnx.ModelProto:
    """LED's decoder attention as the dynamo exporter writes it for a batch of one: k and v
    folded into [B*N, T, H], q's heads left [B, N, S, H], their product broadcast to the
    scores [B, N, S, T], the mask added there, viewed as [B*N, S, T] for Softmax."""
    n = helper.make_node
    nodes = [
        n("Reshape", ["q", "split"], ["q4"]),
        n("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        n("Reshape", ["k", "split"], ["k4"]),
        n("Transpose", ["k4"], ["kh"], perm=[0, 2, 1, 3]),
        n("Reshape", ["kh", "fold"], ["k3"]),
        n("Transpose", ["k3"], ["kt"], perm=[0, 2, 1]),
        n("Reshape", ["v", "split"], ["v4"]),
        n("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
        n("Reshape", ["vh", "fold"], ["v3"]),
        n("MatMul", ["qh", "kt"], ["s"]),
        n("Add", ["s", "mask"], ["masked"]),
        n("Reshape", ["masked", "fold_scores"], ["s3"]),
        n("Softmax", ["s3"], ["p"], axis=-1),
        n("MatMul", ["p", "v3"], ["pv"]),
        n("Reshape", ["pv", "unfold"], ["o4"]),
        n("Transpose", ["o4"], ["o"], perm=[0, 2, 1, 3]),
        n("Reshape", ["o", "merge"], ["y"]),
    ]
    inits = [
        init("split", np.array([batch, -1, 4, 8], np.int64)),
        init("fold", np.array([batch * 4, -1, 8], np.int64)),
        init("fold_scores", np.array([batch * 4, 3, 6], np.int64)),
        init("unfold", np.array([batch, 4, 3, 8], np.int64)),
        init("merge", np.array([batch, 3, 32], np.int64)),
    ]
    inputs = [
        tensor("q", shape=[batch, 3, 32]),
        tensor("k", shape=[batch, 6, 32]),
        tensor("v", shape=[batch, 6, 32]),
        tensor("mask", shape=[batch, 1, 3, 6]),
    ]
    return model(nodes, inputs, [tensor("y", shape=[batch, 3, 32])], inits)


def test_attention_with_query_heads_broadcast_over_a_batch_of_one_becomes_multi_head_attention():
    before = broadcast_query_attention(1)
    after = rewriter.optimize(before, level="extended")
    assert after.report.applied("MultiHeadAttentionBroadcastQueryFusion") == 1
    assert ops(after.model) == {"MultiHeadAttention": 1}
    assert_same_outputs(before, after.model)
