"""The NCHWc block size of the installed onnxruntime on this machine.

ONNX Runtime's CPU layout transformer rewrites convolutions into ``com.microsoft.nchwc``
ops whose weights are stored in blocks of channels; the block size is chosen by MLAS at
run time from the CPU's vector width (8 with AVX2, 16 with AVX-512, none where NCHWc is not
supported).  No Python API reports it, so it is measured once per process: a one-Conv model
with 3 input and 4 output channels is optimized at ORT_ENABLE_ALL and the padded output
channel count of the NCHWc weights it writes is the block size.
"""

from __future__ import annotations

import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper


@lru_cache(maxsize=1)
def nchwc_block_size() -> int | None:
    """The block size, or None when onnxruntime does not use NCHWc here."""
    import onnx
    import onnxruntime as ort

    weight = numpy_helper.from_array(np.ones((4, 3, 1, 1), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"])],
        "probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4, 4])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.optimized_model_filepath = str(Path(tmp) / "probe.onnx")
        options.log_severity_level = 4  # the "hardware specific" warning is the point here
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        optimized = onnx.load(options.optimized_model_filepath)
    weights = {i.name: i for i in optimized.graph.initializer}
    for node in optimized.graph.node:
        if node.domain == "com.microsoft.nchwc" and node.op_type == "Conv" and node.input[1] in weights:
            return int(weights[node.input[1]].dims[0])
    return None
