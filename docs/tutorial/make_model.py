"""Build ``mobile_head.onnx``, the tutorial's model: the first layer of a MobileNetV3
classifier head, a Gemm whose activation is HardSwish written out the way Keras writes it
(``hard_swish(x) = x * relu6(x + 3) * (1/6)``) and tf2onnx converts it (Relu6 as a Clip
with bounds 0 and 6):

    features -> Gemm -> Add(+3) -> Clip(0, 6) -> Mul(*1/6) -> Mul(Gemm's output, .) -> y

Run it in the directory you want the model in: ``python make_model.py [OUT.onnx]``.  It
needs only onnx and numpy (no torch, no tensorflow)."""

from __future__ import annotations

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17  # HardSwish exists from opset 14 on
IR_VERSION = 8  # what every onnxruntime of the last years loads


def constant(name: str, value: float) -> onnx.TensorProto:
    """A one-element float32 initializer (exporters store scalars this way)."""
    return numpy_helper.from_array(np.array(value, dtype=np.float32), name)


def build() -> onnx.ModelProto:
    """The model, with fixed weights so that every run of the script writes the same file."""
    rng = np.random.default_rng(0)
    weight = rng.normal(0.0, 0.5, size=(32, 16)).astype(np.float32)
    bias = rng.normal(0.0, 0.5, size=(32,)).astype(np.float32)
    nodes = [
        helper.make_node("Gemm", ["features", "fc.weight", "fc.bias"], ["fc"], name="fc", transB=1),
        helper.make_node("Add", ["fc", "three"], ["shifted"], name="add3"),
        helper.make_node("Clip", ["shifted", "zero", "six"], ["relu6"], name="relu6"),
        helper.make_node("Mul", ["relu6", "one_sixth"], ["hsig"], name="scale"),
        helper.make_node("Mul", ["fc", "hsig"], ["y"], name="hswish"),
    ]
    initializers = [
        numpy_helper.from_array(weight, "fc.weight"),
        numpy_helper.from_array(bias, "fc.bias"),
        constant("three", 3.0),
        constant("zero", 0.0),
        constant("six", 6.0),
        constant("one_sixth", 1.0 / 6.0),
    ]
    graph = helper.make_graph(
        nodes,
        "mobile_head",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tutorial")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else "mobile_head.onnx"
    onnx.save(build(), path)
    print(f"wrote {path}")
