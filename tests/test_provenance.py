"""Each node a rewrite creates says which rule made it and which nodes it replaced."""

from __future__ import annotations

import numpy as np
from helpers import assert_same_outputs, init, model, tensor
from onnx import TensorProto, helper

import rewriter
from rewriter.onnx_facts.provenance import REPLACED_KEY, RULE_KEY

F = TensorProto.FLOAT


def metadata(node) -> dict[str, str]:
    return {e.key: e.value for e in node.metadata_props}


def test_a_fused_node_names_its_rule_and_the_nodes_it_replaced():
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
        helper.make_node("Add", ["m", "b"], ["a"], name="bias"),
        helper.make_node("Relu", ["a"], ["y"], name="act"),
        helper.make_node("Neg", ["y"], ["z"], name="untouched"),
    ]
    rng = np.random.default_rng(0)
    before = model(
        nodes,
        [tensor("x", F, [2, 4])],
        [tensor("z", F, [2, 4])],
        [
            init("w", rng.standard_normal((4, 4)).astype(np.float32)),
            init("b", rng.standard_normal(4).astype(np.float32)),
        ],
    )
    after = rewriter.optimize(before, level="extended", providers="CPU").model
    fused = next(n for n in after.graph.node if n.op_type == "FusedGemm")
    assert metadata(fused)[RULE_KEY] == "GemmActivationFusion"
    # it replaced the Relu and the Gemm that MatMulAddFusion had made of the MatMul and the Add
    assert metadata(fused)[REPLACED_KEY] == "act,mm/MatMulAddFusion"
    untouched = next(n for n in after.graph.node if n.name == "untouched")
    assert RULE_KEY not in metadata(untouched)
    assert_same_outputs(before, after)  # onnxruntime ignores the entries
