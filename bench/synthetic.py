"""Synthetic transformer-like ONNX graphs of a chosen size (onnx.helper only, small hidden
size), with the patterns real exports contain: decomposed LayerNorm over a residual, erf
Gelu, MatMul + bias, attention-style MatMul / Div / Softmax, Identity and Dropout."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HIDDEN = 16


def _block(i: int, x: str, rng: np.random.Generator, nodes: list, inits: list) -> str:
    def const(name: str, value) -> str:
        full = f"b{i}_{name}"
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), full))
        return full

    def node(op: str, inputs: list[str], **attrs) -> str:
        out = f"b{i}_{op.lower()}{len(nodes)}"
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    w = const("w", rng.standard_normal((HIDDEN, HIDDEN)) * 0.1)
    h = node("Add", [node("MatMul", [x, w]), const("bias", rng.standard_normal(HIDDEN) * 0.1)])
    scores = node("Div", [node("MatMul", [h, node("Transpose", [h], perm=[0, 2, 1])]), const("scale", 4.0)])
    attn = node("MatMul", [node("Softmax", [scores], axis=-1), h])
    attn = node("Dropout", [node("Identity", [attn])])
    s = node("Add", [attn, x])  # residual
    m = node("ReduceMean", [s], axes=[-1])
    d = node("Sub", [s, m])
    v = node("ReduceMean", [node("Pow", [d, const("two", 2.0)])], axes=[-1])
    n = node("Div", [d, node("Sqrt", [node("Add", [v, const("eps", 1e-5)])])])
    ln = node("Add", [node("Mul", [n, const("gamma", np.ones(HIDDEN))]), const("beta", np.zeros(HIDDEN))])
    e = node("Erf", [node("Div", [ln, const("sqrt2", 1.4142135)])])
    gelu = node("Mul", [node("Mul", [ln, node("Add", [e, const("one", 1.0)])]), const("half", 0.5)])
    return gelu


NODES_PER_BLOCK = 24


def synthetic_model(target_nodes: int, seed: int = 0) -> onnx.ModelProto:
    """A model of about ``target_nodes`` nodes (opset 17, IR 8), input [1, 8, HIDDEN]."""
    rng = np.random.default_rng(seed)
    nodes: list = []
    inits: list = []
    x = "input"
    for i in range(max(1, target_nodes // NODES_PER_BLOCK)):
        x = _block(i, x, rng, nodes, inits)
    return chain_model("synthetic", nodes, inits, x, HIDDEN)


def chain_model(name: str, nodes: list, inits: list, output: str, hidden: int) -> onnx.ModelProto:
    """Blocks chained from ``input`` [1, 8, hidden] to ``output`` as a model (opset 17, IR 8)."""
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 8, hidden])],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, [1, 8, hidden])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model
