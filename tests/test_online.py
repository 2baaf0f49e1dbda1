"""rewriter.InferenceSession: optimize, then run in onnxruntime, in one call."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from helpers import init, model, run, tensor
from onnx import TensorProto, helper

import rewriter
from rewriter.online import CPU_SLOWER_FUSIONS

F = TensorProto.FLOAT


def residual_layer_norm():
    nodes = [
        helper.make_node("Add", ["a", "b"], ["s"]),
        helper.make_node("LayerNormalization", ["s", "g", "beta"], ["y"], axis=-1),
    ]
    rng = np.random.default_rng(0)
    inits = [
        init("g", rng.standard_normal(8).astype(np.float32)),
        init("beta", rng.standard_normal(8).astype(np.float32)),
    ]
    return model(nodes, [tensor("a", F, [2, 3, 8]), tensor("b", F, [2, 3, 8])], [tensor("y", F, [2, 3, 8])], inits)


def test_the_session_runs_the_optimized_model_and_gives_the_same_outputs():
    before = residual_layer_norm()
    feeds = {k: np.random.default_rng(1).standard_normal((2, 3, 8)).astype(np.float32) for k in "ab"}
    session = rewriter.InferenceSession(before, level="extended")
    assert isinstance(session, ort.InferenceSession) and session.get_providers() == ["CPUExecutionProvider"]
    (want,) = run(before, feeds)
    (got,) = session.run(None, feeds)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_onnxruntime_does_not_fuse_back_what_the_cpu_runs_slower(tmp_path):
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "seen.onnx")
    rewriter.InferenceSession(residual_layer_norm(), session_options=options)  # level "all"
    import onnx

    seen = {n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node}
    assert "SkipLayerNormalization" not in seen and {"Add", "LayerNormalization"} <= seen
    assert "SkipLayerNormFusion" in CPU_SLOWER_FUSIONS


def test_a_provider_onnxruntime_lacks_here_is_one_error():
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has CUDA")
    with pytest.raises(rewriter.RewriterError, match="has no CUDAExecutionProvider"):
        rewriter.InferenceSession(residual_layer_norm(), providers="CUDA")


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"providers": 5}, "providers must be str or list or tuple, not int"),
        ({"providers": [5]}, "each of providers"),
        ({"providers": [("CPUExecutionProvider", {})]}, "must be str, not tuple"),  # onnxruntime's form
        ({"session_options": "fast"}, "session_options must be SessionOptions"),
        ({"bogus": 1}, "unexpected keyword argument 'bogus'"),
    ],
)
def test_arguments_of_the_wrong_kind_are_the_librarys_error(arguments, message):
    # (they were TypeError and AttributeError from inside provider_list, onnxruntime or optimize)
    with pytest.raises(rewriter.ArgumentError, match=message.replace("(", r"\(")):
        rewriter.InferenceSession(residual_layer_norm(), **arguments)


def test_a_model_in_memory_whose_data_is_in_an_external_file_is_refused_first(tmp_path):
    # onnxruntime could not reach the data of a model given as bytes: it failed with its own
    # exception after the optimization; a path works
    import onnx

    path = tmp_path / "m.onnx"
    onnx.save(residual_layer_norm(), str(path), save_as_external_data=True, location="m.data", size_threshold=0)
    unloaded = onnx.load(str(path), load_external_data=False)
    with pytest.raises(rewriter.ModelError, match="keeps its data in an external file"):
        rewriter.InferenceSession(unloaded, level="extended")
    feeds = {k: np.ones((2, 3, 8), np.float32) for k in "ab"}
    (want,) = run(residual_layer_norm(), feeds)
    (got,) = rewriter.InferenceSession(str(path), level="extended").run(None, feeds)
    np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("where", ["missing", "a directory"])
def test_a_model_path_that_is_not_a_model_file_is_one_error(tmp_path, where):
    path = tmp_path / "m.onnx"
    if where == "a directory":
        path.mkdir()
    with pytest.raises(rewriter.ModelError):
        rewriter.InferenceSession(str(path))
