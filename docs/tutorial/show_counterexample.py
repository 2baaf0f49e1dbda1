"""Print a counterexample that ``rewriter verify`` saved: the nodes of ``before.onnx`` and
``after.onnx`` with every attribute (those a node leaves out at their schema default, marked
so: a default is where mistakes hide), and what onnxruntime computes for each on the saved
``inputs.npz``.

    python show_counterexample.py verify-out/PACK/RULE
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnx import helper


def text(value: object) -> str:
    """An attribute value as a person reads it: floats to 8 digits (float32's precision)."""
    if isinstance(value, float):
        return f"{value:.8g}"
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return repr(value)


def attributes(node: onnx.NodeProto, opset: int) -> str:
    """``alpha=0.2 (default), beta=0.5 (default)``: the node's attributes, then the ones its
    schema defines that it leaves out."""
    given = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    shown = [f"{name}={text(value)}" for name, value in given.items()]
    schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    for name, attribute in sorted(schema.attributes.items()):
        if name not in given and attribute.default_value.name:
            shown.append(f"{name}={text(helper.get_attribute_value(attribute.default_value))} (default)")
    return ", ".join(shown)


def show(path: Path, feeds: dict[str, np.ndarray]) -> None:
    model = onnx.load(str(path))
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    print(f"{path.name} (opset {opset}):")
    for node in model.graph.node:
        extra = attributes(node, opset)
        call = f"  {', '.join(node.output)} = {node.op_type}({', '.join(node.input)})"
        print(call + (f" {{{extra}}}" if extra else ""))
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL  # as verify runs it
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    for output, value in zip(session.get_outputs(), session.run(None, feeds)):
        print(f"  {output.name} = {np.array2string(np.asarray(value).ravel(), precision=6)}")


if __name__ == "__main__":
    folder = Path(sys.argv[1])
    inputs = dict(np.load(folder / "inputs.npz"))
    print("inputs: " + ", ".join(f"{k} = {np.array2string(v.ravel(), precision=6)}" for k, v in inputs.items()))
    for name in ("before.onnx", "after.onnx"):
        if (folder / name).is_file():  # no after.onnx when the engine refused the rewrite
            show(folder / name, inputs)
