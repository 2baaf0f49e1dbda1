"""Unusual but valid models come through intact; corrupted ones are refused cleanly."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from helpers import MODELS, assert_same_outputs, init, model, tensor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

import rewriter
from rewriter import RewriterError


def annotated_model() -> onnx.ModelProto:
    """Metadata and names everywhere, symbolic dims, an unknown custom op kept as is."""
    nodes = [
        helper.make_node("Identity", ["x"], ["xi"], name="copy", doc_string="a copy"),
        helper.make_node("Add", ["xi", "b"], ["s"], name="add"),
        helper.make_node("Mul", ["s", "one"], ["y"], name="scale"),
        helper.make_node("Relu", ["s"], ["r"], name="relu"),
        helper.make_node("Opaque", ["r"], ["z"], name="custom", domain="my.custom", flavour="x"),
    ]
    for node in nodes:
        node.metadata_props.add(key="origin", value=node.name)
    m = model(
        nodes,
        [tensor("x", shape=["batch", 4])],
        [tensor("z", shape=["batch", 4]), tensor("y", shape=["batch", 4])],
        [init("b", np.ones(4, np.float32)), init("one", np.float32(1.0))],
        domains=["my.custom"],
        value_info=[tensor("r", shape=["batch", 4])],
    )
    m.producer_name, m.producer_version, m.domain, m.model_version = "exporter", "9.9", "org.test", 7
    m.doc_string = "model docs"
    m.graph.doc_string = "graph docs"
    m.metadata_props.add(key="license", value="MIT")
    m.graph.metadata_props.add(key="stage", value="encoder")
    return m


def test_model_graph_and_node_fields_symbolic_dims_and_custom_ops_are_kept():
    before = annotated_model()
    after = rewriter.optimize(before, level="basic").model
    assert [n.op_type for n in after.graph.node] == ["Add", "Relu", "Opaque"]  # Identity, Mul by 1 gone
    for field in ("ir_version", "producer_name", "producer_version", "domain", "model_version", "doc_string"):
        assert getattr(after, field) == getattr(before, field), field
    assert [(p.key, p.value) for p in after.metadata_props] == [("license", "MIT")]
    assert after.graph.doc_string == "graph docs" and after.graph.name == before.graph.name
    assert [(p.key, p.value) for p in after.graph.metadata_props] == [("stage", "encoder")]
    assert [i.name for i in after.graph.input] == ["x"] and [o.name for o in after.graph.output] == ["z", "y"]
    assert after.graph.input[0] == before.graph.input[0] and list(after.graph.output) == list(before.graph.output)
    assert list(after.graph.value_info) == list(before.graph.value_info)
    custom = after.graph.node[2]
    assert custom.domain == "my.custom" and custom.name == "custom" and custom.attribute[0].s == b"x"
    assert {n.name: [(p.key, p.value) for p in n.metadata_props] for n in after.graph.node} == {
        "add": [("origin", "add")],
        "relu": [("origin", "relu")],
        "custom": [("origin", "custom")],
    }
    assert {(o.domain, o.version) for o in after.opset_import} == {(o.domain, o.version) for o in before.opset_import}
    rewriter.check_model(after, full_check=True)


# ------------------------------------------------------------------ mutation fuzzing


def _base_models() -> list[onnx.ModelProto]:
    x = [
        helper.make_node("Identity", ["x"], ["a"]),
        helper.make_node("Add", ["a", "c"], ["b"]),
        helper.make_node("Relu", ["b"], ["r"]),
        helper.make_node("Mul", ["r", "one"], ["y"]),
    ]
    small = model(
        x,
        [tensor("x", shape=[2, 3])],
        [tensor("y", shape=[2, 3])],
        [init("c", np.arange(6, dtype=np.float32).reshape(2, 3)), init("one", np.float32(1))],
    )
    return [small, onnx.load(str(MODELS / "convnet_bn.onnx"))]


BASES = _base_models()


def _mutate(m: onnx.ModelProto, kind: str, pick: int) -> None:
    graph = m.graph
    node = graph.node[pick % len(graph.node)]
    if kind == "drop_edge" and node.input:
        node.input[pick % len(node.input)] = f"ghost{pick}"
    elif kind == "empty_input" and node.input:
        node.input[pick % len(node.input)] = ""
    elif kind == "duplicate_output":
        other = graph.node[(pick + 1) % len(graph.node)]
        node.output[0] = other.output[0]
    elif kind == "duplicate_node_name":
        node.name = graph.node[(pick + 1) % len(graph.node)].name
    elif kind == "truncate_tensor" and graph.initializer:
        t = graph.initializer[pick % len(graph.initializer)]
        if t.raw_data:
            t.raw_data = t.raw_data[: len(t.raw_data) // 2]
        else:
            t.dims.append(3)
    elif kind == "wrong_dims" and graph.initializer:
        t = graph.initializer[pick % len(graph.initializer)]
        t.dims.append(2)
    elif kind == "reverse_nodes":
        nodes = list(graph.node)
        del graph.node[:]
        graph.node.extend(reversed(nodes))
    elif kind == "unknown_output":
        graph.output[0].name = f"nowhere{pick}"
    elif kind == "wrong_op":
        node.op_type = "NoSuchOp"


def _runs(m: onnx.ModelProto) -> bool:
    try:
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return True
    except Exception:
        return False


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.sampled_from(range(len(BASES))),
    st.sampled_from(
        [
            "drop_edge",
            "empty_input",
            "duplicate_output",
            "duplicate_node_name",
            "truncate_tensor",
            "wrong_dims",
            "reverse_nodes",
            "unknown_output",
            "wrong_op",
        ]
    ),
    st.integers(0, 50),
)
def test_a_mutated_model_is_refused_cleanly_or_comes_out_valid_and_equal(base, kind, pick):
    mutated = onnx.ModelProto()
    mutated.CopyFrom(BASES[base])
    _mutate(mutated, kind, pick)
    try:
        result = rewriter.optimize(mutated, level="extended", providers="CPU")
    except RewriterError:
        return  # refused with a message: fine
    after = result.model
    rewriter.check_model(after, full_check=True)  # whatever is accepted comes out valid
    assert _runs(after)
    if _runs(mutated):
        assert_same_outputs(mutated, after, atol=1e-4, seeds=(0,))
