"""Real exports through the basic level: valid, same numbers, at least ONNX Runtime's result."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import MODELS, assert_fixpoint, assert_same_outputs, run

import rewriter
from rewriter.onnx_facts.nchwc import nchwc_block_size

REAL_MODELS = ["bert_tiny.onnx", "convnet_bn.onnx", "bert_ts_dynamic.onnx", "resnet18_mini_bn.onnx"]


def ort_basic_node_count(path: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(Path(tmp) / "ort.onnx")
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return len(onnx.load(options.optimized_model_filepath).graph.node)


@pytest.fixture(scope="module", params=REAL_MODELS)
def optimized(request):
    path = MODELS / request.param
    original = onnx.load(str(path))
    return path, original, rewriter.optimize(original, level="basic")


def test_output_is_valid_and_numerically_equal(optimized):
    _, original, result = optimized
    assert_same_outputs(original, result.model, atol=1e-4)


def test_node_count_is_no_higher_than_onnxruntime_basic(optimized):
    path, _, result = optimized
    assert len(result.model.graph.node) <= ort_basic_node_count(path)


def test_every_identity_is_removed(optimized):
    _, original, result = optimized
    assert Counter(n.op_type for n in result.model.graph.node)["Identity"] == 0


def test_every_batchnorm_is_folded(optimized):
    _, original, result = optimized
    assert Counter(n.op_type for n in result.model.graph.node)["BatchNormalization"] == 0


def test_model_level_fields_are_kept(optimized):
    _, original, result = optimized
    model = result.model
    assert model.ir_version == original.ir_version
    assert [(o.domain, o.version) for o in model.opset_import] == [(o.domain, o.version) for o in original.opset_import]
    assert model.producer_name == original.producer_name
    assert [i.name for i in model.graph.input] == [i.name for i in original.graph.input]
    assert [o.SerializeToString() for o in model.graph.output] == [o.SerializeToString() for o in original.graph.output]


def test_convnet_batchnorms_fold_into_their_convs():
    result = rewriter.optimize(MODELS / "convnet_bn.onnx", level="basic")
    assert result.report.applied("ConvBatchNormFusion") == 3
    assert result.report.nodes_before == 15 and result.report.nodes_after == 10


def _annotation_for(name: str) -> str | None:
    for part in ("encoder/layer.0", "encoder/layer.1", "embeddings"):
        if part in name:
            return part.replace("/", ".")
    return None


def test_annotated_bert_is_placed_as_the_setting_says_through_every_fusion():
    from rewriter.onnx_facts.placement import annotation_of, provider_of

    original = onnx.load(str(MODELS / "bert_tiny.onnx"))
    for node in original.graph.node:
        annotation = _annotation_for(node.name)
        if annotation:
            node.metadata_props.add(key="layer_ann", value=annotation)
    setting = "gpu(encoder); cpu(=embeddings)"
    result = rewriter.optimize(original, level="extended", providers="CUDA,CPU", layer_assignment=setting)
    model = result.model
    fused = [n for n in model.graph.node if n.domain == "com.microsoft"]
    assert len(fused) >= 6  # SkipLayerNormalization, FusedMatMul, (Bias)Gelu in both layers
    expected = {
        "encoder.layer.0": "CUDAExecutionProvider",
        "encoder.layer.1": "CUDAExecutionProvider",
        "embeddings": "CPUExecutionProvider",
    }
    for node in model.graph.node:
        assert annotation_of(node) is None
        annotation = _annotation_for(node.name)  # new nodes are named after their root
        if annotation:
            assert provider_of(node) == expected[annotation], (node.name, node.op_type)
    decisions = {d.rule: d.placed for d in result.report.partition.decisions}
    assert decisions["gpu(encoder)"] > 0 and decisions["cpu(=embeddings)"] > 0
    assert_same_outputs(original, model, atol=1e-4)


def ort_node_count(path: Path, level) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.graph_optimization_level = level
        options.optimized_model_filepath = str(Path(tmp) / "ort.onnx")
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return len(onnx.load(options.optimized_model_filepath, load_external_data=False).graph.node)


@pytest.mark.parametrize("name", REAL_MODELS)
def test_extended_level_is_valid_equal_and_no_bigger_than_onnxruntime(name):
    path = MODELS / name
    original = onnx.load(str(path))
    result = rewriter.optimize(original, level="extended", providers="CPU")
    assert_same_outputs(original, result.model, atol=1e-4)
    assert len(result.model.graph.node) <= ort_node_count(path, ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED)
    assert_fixpoint(result.model, "extended")


def test_bert_on_the_cpu_splits_residual_layer_norms_at_the_layout_level():
    # extended fuses SkipLayerNormalization as the peers do; onnxruntime's CPU kernel is
    # slower than Add + LayerNormalization, so the CPU layout level splits it back
    extended = rewriter.optimize(MODELS / "bert_tiny.onnx", level="extended", providers="CPU")
    ops = Counter(n.op_type for n in extended.model.graph.node)
    assert ops["Attention"] == 2 and ops["SkipLayerNormalization"] == 5 and ops["LayerNormalization"] == 0
    assert ops["Softmax"] == 0 and ops["BiasGelu"] == 2
    laid_out = rewriter.optimize(MODELS / "bert_tiny.onnx", level="all", providers="CPU", layout_may_grow=True)
    ops = Counter(n.op_type for n in laid_out.model.graph.node)
    assert ops["Attention"] == 2 and ops["LayerNormalization"] == 5 and ops["SkipLayerNormalization"] == 0


def test_bert_attention_and_layer_norms_are_fused_at_extended():
    result = rewriter.optimize(MODELS / "bert_tiny.onnx", level="extended", providers="CUDA")
    ops = Counter(n.op_type for n in result.model.graph.node)
    assert ops["Attention"] == 2 and ops["SkipLayerNormalization"] == 4 and ops["EmbedLayerNormalization"] == 1
    assert ops["Softmax"] == 0 and ops["LayerNormalization"] == 0 and ops["MultiHeadAttention"] == 0
    # q, k, v projections packed into the Attention; the output and feed-forward biases
    # moved into SkipLayerNormalization and BiasGelu: three MatMuls per layer remain
    assert ops["MatMul"] == 6 and ops["Add"] <= 1
    weights = {i.name: i for i in result.model.graph.initializer}
    for node in (n for n in result.model.graph.node if n.op_type == "Attention"):
        assert list(weights[node.input[1]].dims) == [64, 192] and list(weights[node.input[2]].dims) == [192]


@pytest.mark.parametrize("name", ["convnet_bn.onnx", "resnet18_mini_bn.onnx"])
def test_all_levels_lay_convolutions_out_like_onnxruntime(name):
    """The layout level lays convolutions out in NCHWc blocks; kept at level all where that
    costs no nodes over the extended level (which depends on the CPU's block size: 8-channel
    stages align with AVX2's blocks of 8, not AVX-512's of 16), kept always with
    layout_may_grow, and never more nodes than ONNX Runtime's own ORT_ENABLE_ALL."""
    if nchwc_block_size() is None:
        pytest.skip("onnxruntime does not use NCHWc on this CPU")
    path = MODELS / name
    original = onnx.load(str(path))
    extended = rewriter.optimize(original, level="extended", providers="CPU").model
    result = rewriter.optimize(original, level="all", providers="CPU").model
    grown = rewriter.optimize(original, level="all", providers="CPU", layout_may_grow=True).model
    for model in (result, grown):
        assert_same_outputs(original, model, atol=1e-4)
        rewriter.check_model(model, full_check=True)
    nchwc = Counter(n.op_type for n in grown.graph.node if n.domain == "com.microsoft.nchwc")
    assert nchwc["Conv"] > 0 and nchwc["GlobalAveragePool"] == 1
    # the pooled [N, C, 1, 1] head needs no reorder out (ONNX Runtime reorders it)
    assert len(grown.graph.node) < ort_node_count(path, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    assert len(result.graph.node) <= len(extended.graph.node)
    if len(grown.graph.node) <= len(extended.graph.node):  # the blocked layout is free: kept
        assert [(n.domain, n.op_type) for n in result.graph.node] == [(n.domain, n.op_type) for n in grown.graph.node]
    else:  # it costs nodes: the extended output, unblocked
        assert not any(n.domain == "com.microsoft.nchwc" for n in result.graph.node)
    assert_fixpoint(result, "all")


def _llama_cache_feeds(seed: int, batch: int = 2, past: int = 3, new: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {
        "input_ids": rng.integers(0, 128, (batch, new)).astype(np.int64),
        "attention_mask": np.ones((batch, past + new), np.int64),
    }
    feeds["attention_mask"][0, 0] = 0  # one padded cache position
    for layer in range(2):
        for kind in ("key", "value"):
            feeds[f"past_key_values.{layer}.{kind}"] = rng.standard_normal((batch, 4, past, 16)).astype(np.float32)
    return feeds


@pytest.mark.parametrize("level", ["extended", "all"])
def test_llama_with_a_cache_gets_rotary_embeddings_and_attention(level):
    # dynamo export with past key/value inputs: cos and sin computed from the positions at
    # run time, k and v concatenated after the cache
    path = MODELS / "llama_kv_dynamo.onnx"
    before = onnx.load(path)
    result = rewriter.optimize(before, level=level)
    ops = Counter(n.op_type for n in result.model.graph.node)
    assert ops["RotaryEmbedding"] == 4 and ops["MultiHeadAttention"] == 2 and ops["Softmax"] == 0
    assert ops["Cos"] == 1 and ops["Sin"] == 1  # the rotary caches are shared by every layer
    rewriter.check_model(result.model, full_check=True)
    for seed in (0, 1):
        feeds = _llama_cache_feeds(seed)
        for want, got in zip(run(before, feeds), run(result.model, feeds)):
            np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-4)


def test_falcon_multi_query_attention_is_fused_with_its_shared_key_and_value():
    path = MODELS / "falcon_ts_static.onnx"
    before = onnx.load(path)
    result = rewriter.optimize(before, level="extended")
    ops = Counter(n.op_type for n in result.model.graph.node)
    assert ops["RotaryEmbedding"] == 4 and ops["MultiHeadAttention"] == 2 and ops["Expand"] == 4
    assert_same_outputs(before, result.model, atol=1e-5)


@pytest.mark.parametrize("batch, seq, low, high", [(2, 5, -7, 40), (0, 3, 0, 5), (3, 1, 500, 900), (1, 4, 0, 9)])
def test_position_ids_decoder_builds_its_rotary_caches_from_the_positions(batch, seq, low, high):
    # dynamo export with position ids as an input and dynamic axes: the angles are an outer
    # product (inverse frequencies times float positions, a MatMul of inner dim 1), whose
    # caches per batch item come from the position ids themselves; any ids (negative,
    # past the training length) and an empty batch give the original's numbers
    path = MODELS / "falcon_pos_dynamo_dynamic.onnx"
    before = onnx.load(path)
    after = rewriter.optimize(before, level="extended").model
    rewriter.check_model(after, full_check=True)
    ops = Counter(n.op_type for n in after.graph.node)
    assert ops["RotaryEmbedding"] == 4 and ops["MultiHeadAttention"] == 2
    assert ops["Cos"] == 1 and ops["Sin"] == 1
    producers = {out: n.op_type for n in after.graph.node for out in n.output}
    (cos,) = [n for n in after.graph.node if n.op_type == "Cos"]
    assert producers[cos.input[0]] == "Mul"  # the positions' rows times the frequencies
    assert len(after.graph.node) <= 81
    rng = np.random.default_rng(batch)
    feeds = {
        "input_ids": rng.integers(0, 50, (batch, seq)).astype(np.int64),
        "attention_mask": np.ones((batch, seq), np.int64),
        "position_ids": rng.integers(low, high, (batch, seq)).astype(np.int64),
    }
    for want, got in zip(run(before, feeds), run(after, feeds)):
        assert want.shape == got.shape
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-4)


def _checked_extended(name: str) -> tuple[onnx.ModelProto, onnx.ModelProto, Counter]:
    """A test model, its extended-level result (which must pass the full check) and that
    result's op counts."""
    before = onnx.load(MODELS / name)
    after = rewriter.optimize(before, level="extended").model
    rewriter.check_model(after, full_check=True)
    return before, after, Counter(n.op_type for n in after.graph.node)


@pytest.mark.parametrize("past, new", [(3, 1), (0, 4), (2, 3)])
@pytest.mark.parametrize("name", ["llama_kv_ts_dynamic.onnx", "llama_kv_ts_dynamic_tf446.onnx"])
def test_torchscript_llama_with_a_cache_and_dynamic_axes_gets_attention(name, past, new):
    # the mask's key length is Range(past + new): a sum of dims, which the present key
    # (Concat of past and new) declares as total_sequence_length; before transformers 4.48
    # (tf446) the step's positions are Range(past, past + new), past read from the cache's
    # shape: their count is new, which the rotary fusions need known
    before, after, ops = _checked_extended(name)
    assert ops["RotaryEmbedding"] == 4 and ops["MultiHeadAttention"] == 2 and ops["Softmax"] == 0
    feeds = _llama_cache_feeds(0, past=past, new=new)
    for want, got in zip(run(before, feeds), run(after, feeds)):
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-4)


def _left_padded_feeds(seed: int, seq: int, padding: int) -> dict[str, np.ndarray]:
    """A batch of two decoder inputs, the first left-padded by ``padding`` positions."""
    rng = np.random.default_rng(seed)
    mask = np.ones((2, seq), np.int64)
    mask[0, :padding] = 0
    return {"input_ids": rng.integers(0, 128, (2, seq)).astype(np.int64), "attention_mask": mask}


def test_transformers_4_46_gpt_neox_attention_over_heads_folded_into_the_batch():
    # GPT-NeoX before transformers 4.48: torch.baddbmm of q and k viewed as [B*N, S, H] into
    # a zeros tensor (ConstantOfShape with dynamic axes), viewed back as [B, N, S, S], the
    # causal mask filled in by Where, then the padding mask added
    before, after, ops = _checked_extended("gpt_neox_ts_dynamic_tf446.onnx")
    assert ops["RotaryEmbedding"] == 4 and ops["MultiHeadAttention"] == 2 and ops["Softmax"] == 0
    feeds = _left_padded_feeds(seed=7, seq=5, padding=2)
    for want, got in zip(run(before, feeds), run(after, feeds)):
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-4)


def test_torchscript_sdpa_attention_keeps_fully_masked_rows_zero():
    # TorchScript's SDPA: a -inf mask and Where(IsNaN(p), 0, p); left padding leaves the
    # padded queries with nothing to attend to, rows the guard makes 0
    before, after, ops = _checked_extended("llama_sdpa_ts_dynamic.onnx")
    assert ops["MultiHeadAttention"] == 2 and ops["IsNaN"] == 0 and ops["Softmax"] == 0
    feeds = _left_padded_feeds(seed=5, seq=6, padding=3)
    for want, got in zip(run(before, feeds), run(after, feeds)):
        assert not np.isnan(got).any()
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-4)


def test_padding_computed_layer_after_layer_folds_to_constants():
    """EnCodec: every layer's padding comes from the Shape of the previous layer's output;
    each folds once the one before it has (the level alternates folding, re-inference and
    rules until none gains).  ONNX Runtime's extended level leaves 90 nodes."""
    original = onnx.load(str(MODELS / "encodec_enc_ts_static.onnx"))
    after = rewriter.optimize(original, level="basic").model
    kinds = Counter(n.op_type for n in after.graph.node)
    assert not set(kinds) & {"Shape", "Ceil", "ConstantOfShape"}, kinds
    assert len(after.graph.node) <= 80
    assert_same_outputs(original, after, atol=1e-4)


def test_conv_lengths_over_symbolic_samples_let_views_to_their_own_shape_go():
    """DAC with dynamic axes: the Snake activation views x [batch, C, samples] to [B, C, -1]
    and back to Shape(x); x is a Conv's output, whose length the engine computes from the
    samples (onnx's inference leaves it unnamed)."""
    original = onnx.load(str(MODELS / "dac_enc_ts_dynamic.onnx"))
    after = rewriter.optimize(original, level="extended").model
    kinds = Counter(n.op_type for n in after.graph.node)
    assert kinds["Reshape"] <= 4, kinds  # (was 19: every Snake viewed twice)
    assert len(after.graph.node) < 203  # the transformers optimizer's count
    rewriter.check_model(after, full_check=True)
    for shape in ([1, 1, 1600], [2, 1, 960]):  # (samples must fill the strided convolutions)
        feeds = {"input_values": np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
        for a, b in zip(run(original, feeds), run(after, feeds)):
            np.testing.assert_allclose(a, b, atol=1e-4)


@pytest.mark.parametrize(
    "name, transposes",
    [("torch_mha_bf_mask_dynamo.onnx", 0), ("torch_mha_sf_ts_static.onnx", 2)],
)
def test_torch_multihead_attention_becomes_one_attention(name, transposes):
    # torch's nn.MultiheadAttention: one packed in_proj cut by a view/move/squeeze/pick,
    # heads split and merged sequence-first, out_proj a Gemm over flattened rows; the
    # batch-first block's swaps cancel (the sequence-first one keeps one at each end), the key
    # padding mask (-inf) expanded over the heads becomes the attention bias
    before, after, ops = _checked_extended(name)
    assert ops["Attention"] == 1 and ops["Softmax"] == 0 and ops["Gemm"] == 0 and ops["Gather"] == 0
    assert ops["Transpose"] == transposes and ops["Split"] == 0
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal([d.dim_value for d in before.graph.input[0].type.tensor_type.shape.dim]).astype(
            np.float32
        )
    }
    if len(before.graph.input) > 1:
        mask = np.zeros((2, 10), bool)
        mask[0, 7:] = True  # padding keys
        feeds["key_padding_mask"] = mask
    for want, got in zip(run(before, feeds), run(after, feeds)):
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-4)
    if len(before.graph.input) > 1:  # every key padding: NaN in the original, NaN in ours
        feeds["key_padding_mask"] = np.ones((2, 10), bool)
        for want, got in zip(run(before, feeds), run(after, feeds)):
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


_EMPTY_RUN = """
import sys
import numpy as np
import onnxruntime as ort
session = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
batch, seq = int(sys.argv[2]), int(sys.argv[3])
feeds = {"input_ids": np.zeros((batch, seq), np.int64), "attention_mask": np.ones((batch, seq), np.int64)}
try:
    session.run(None, feeds)
except Exception:
    sys.exit(3)  # an error, as the original's
"""


def test_soft_capped_attention_with_dynamic_axes_is_grouped_query_attention_that_never_crashes(tmp_path):
    # Gemma 2 exported by TorchScript with dynamic batch and sequence: soft-capped attention
    # has one CPU kernel, GroupQueryAttention, which kills the process on an empty batch;
    # the model's own [B, S, -1] head merge refuses an empty batch or sequence, so the
    # rewrite may refuse them too, as an error (total_sequence_length 0), never a crash
    import subprocess
    import sys

    before, after, ops = _checked_extended("gemma2_ts_dynamic.onnx")
    assert ops["GroupQueryAttention"] == 2 and ops["RotaryEmbedding"] == 4 and ops["Softmax"] == 0
    assert len(after.graph.node) <= 95
    for seed, seq, padding in ((0, 6, 2), (1, 3, 0)):
        feeds = _left_padded_feeds(seed, seq, padding)
        for want, got in zip(run(before, feeds), run(after, feeds)):
            np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-4)
    onnx.save(after, tmp_path / "after.onnx")
    for batch, seq in ((0, 4), (2, 0)):
        for path in (MODELS / "gemma2_ts_dynamic.onnx", tmp_path / "after.onnx"):
            done = subprocess.run([sys.executable, "-c", _EMPTY_RUN, str(path), str(batch), str(seq)], timeout=120)
            assert done.returncode == 3, (path.name, batch, seq, done.returncode)
