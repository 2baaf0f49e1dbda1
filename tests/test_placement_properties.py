"""Placement invariants over random graphs with random annotations (hypothesis).

Every rewrite the engine applies is recorded (the root's placement, the matched nodes'
placements, the new nodes' placements) and the invariants are checked on each record."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
import pytest
from helpers import assert_same_outputs, init, model, tensor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import rewriter
from rewriter.graph.subgraphs import subgraphs_of
from rewriter.onnx_facts.placement import annotation_of, provider_of
from rewriter.rewrite import apply as apply_module

F = TensorProto.FLOAT

EARLY_FUSIONS = """
rule AbsOfNeg root n { n = Neg(x)  y = Abs(n) => y = Abs(x) }
rule MulOfMul root a { a = Mul(x, c1)  y = Mul(a, c2) where const(c1, c2) => y = Mul(x, c1 * c2) }
rule SigmoidTimesEarly root s { s = Sigmoid(x)  y = Mul(x, s) where rank(x) == 2
                                => y = Div(x, Add(Exp(Neg(x)), 1.0)) }
"""
LATE_FUSIONS = """
rule ReluOfRelu root a { a = Relu(x)  y = Relu(a) => y = Relu(x) }
rule AddOfAdd root a { a = Add(x, c1)  y = Add(a, c2) where const(c1, c2) => y = Add(x, c1 + c2) }
rule TanhOfAbs root a { a = Abs(x)  y = Tanh(a) => y = Abs(Tanh(x)) }
"""
BEFORE = rewriter.load_pack_text("pack early level 1\n" + EARLY_FUSIONS, "early.rules")
AFTER = rewriter.load_pack_text("pack late level 2 providers CPU, CUDA\n" + LATE_FUSIONS, "late.rules")
ANNOTATIONS = [None, "encoder.0", "encoder.1", "decoder", "head"]
SETTING = "gpu(encoder); cpu(decoder, =head)"


@dataclass
class Record:
    after_partition: bool
    root: tuple
    matched: list[tuple]
    new: list[tuple]


def placement(node: onnx.NodeProto) -> tuple:
    return annotation_of(node), provider_of(node)


@pytest.fixture
def records(monkeypatch):
    seen: list[Record] = []
    original = apply_module.Rewriter.apply

    def recording(self, match):
        view = self.view
        root = placement(view.node(match.root))
        matched = [placement(view.node(n)) for n in match.nodes.values()]
        result = original(self, match)
        seen.append(Record(root[1] is not None, root, matched, [placement(view.node(n)) for n in result.new_nodes]))
        return result

    monkeypatch.setattr(apply_module.Rewriter, "apply", recording)
    return seen


OPS = ["Neg", "Abs", "Relu", "MulC", "AddC", "Sigmoid", "SigMul", "Tanh"]


def random_model(steps: list[tuple[str, int]], annotations: list) -> onnx.ModelProto:
    nodes, inits, current = [], [], "x"
    for index, (op, ann_index) in enumerate(steps):
        out = f"v{index}"
        if op in ("MulC", "AddC"):
            c = f"c{index}"
            inits.append(init(c, np.float32(1.5 + index % 3)))
            node = helper.make_node(op[:3], [current, c], [out], name=f"n{index}")
        elif op == "SigMul":
            s = f"s{index}"
            sig = helper.make_node("Sigmoid", [current], [s], name=f"n{index}s")
            _annotate(sig, annotations[ann_index])
            nodes.append(sig)
            node = helper.make_node("Mul", [current, s], [out], name=f"n{index}")
        else:
            node = helper.make_node(op, [current], [out], name=f"n{index}")
        _annotate(node, annotations[ann_index])
        nodes.append(node)
        current = out
    return model(nodes, [tensor("x", F, [2, 3])], [tensor(current, F, [2, 3])], inits)


def _annotate(node: onnx.NodeProto, annotation: str | None) -> None:
    if annotation is not None:
        node.metadata_props.add(key="layer_ann", value=annotation)


graphs = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, len(ANNOTATIONS) - 1)), min_size=2, max_size=12)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def run(m, level, **options):
    return rewriter.optimize(
        m, level=level, rules=[BEFORE, AFTER], bundled=True, providers="CUDA,CPU", layer_assignment=SETTING, **options
    )


@SETTINGS
@given(graphs)
def test_new_nodes_inherit_root_annotation(records, steps):
    records.clear()
    m = random_model(steps, ANNOTATIONS)
    result = run(m, "basic")
    early = [r for r in records if not r.after_partition]
    for record in early:
        assert all(new[0] == record.root[0] for new in record.new), record
    assert_same_outputs(m, result.model, seeds=(0,))


@SETTINGS
@given(graphs)
def test_no_annotation_survives_partitioning(records, steps):
    m = random_model(steps, ANNOTATIONS)
    result = run(m, "extended")

    def walk(graph):
        for node in graph.node:
            assert annotation_of(node) is None
            assert (
                provider_of(node) in ("CUDAExecutionProvider", "CPUExecutionProvider")
                or graph is not result.model.graph
            )
            for sub in subgraphs_of(node):
                walk(sub)

    walk(result.model.graph)


@SETTINGS
@given(graphs)
def test_new_nodes_inherit_root_provider_and_no_rewrite_merges_two_providers(records, steps):
    records.clear()
    m = random_model(steps, ANNOTATIONS)
    result = run(m, "extended")
    late = [r for r in records if r.after_partition]
    for record in late:
        assert len({p for _, p in record.matched}) == 1, record
        assert all(new[1] == record.root[1] for new in record.new), record
    assert_same_outputs(m, result.model, seeds=(0,))


@SETTINGS
@given(graphs)
def test_respect_never_merges_two_annotations(records, steps):
    records.clear()
    m = random_model(steps, ANNOTATIONS)
    result = run(m, "basic", annotation_boundaries="respect")
    for record in records:
        assert len({a for a, _ in record.matched}) == 1, record
    assert_same_outputs(m, result.model, seeds=(0,))


@SETTINGS
@given(graphs)
def test_layer_assignment_places_annotated_nodes_as_the_setting_says(records, steps):
    m = random_model(steps, ANNOTATIONS)
    state_model = rewriter.optimize(
        m, level="extended", rules=[], bundled=False, providers="CUDA,CPU", layer_assignment=SETTING
    ).model
    expected = {
        "encoder.0": "CUDAExecutionProvider",
        "encoder.1": "CUDAExecutionProvider",
        "decoder": "CPUExecutionProvider",
        "head": "CPUExecutionProvider",
    }
    original = {n.name: annotation_of(n) for n in m.graph.node}
    for node in state_model.graph.node:
        annotation = original.get(node.name)
        if annotation in expected:
            assert provider_of(node) == expected[annotation], node.name


def test_the_generators_reach_the_rules(records):
    """Without rewrites at both phases the properties above would hold vacuously."""
    steps = [
        ("Neg", 1),
        ("Abs", 1),
        ("Relu", 3),
        ("Relu", 3),
        ("MulC", 2),
        ("MulC", 2),
        ("SigMul", 0),
        ("AddC", 1),
        ("AddC", 1),
        ("Abs", 4),
        ("Tanh", 4),
    ]
    records.clear()
    run(random_model(steps, ANNOTATIONS), "extended")
    assert any(not r.after_partition for r in records) and any(r.after_partition for r in records)
