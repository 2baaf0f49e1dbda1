"""The layout level's node budget: ``--level all`` never leaves more nodes than ``--level
extended`` unless the run lets it grow (``layout_may_grow``); rules marked ``grows`` run
only then."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from helpers import assert_same_outputs, init, model, ops, tensor
from onnx import TensorProto, helper

import rewriter
from rewriter.cli import cli
from rewriter.onnx_facts.nchwc import nchwc_block_size

F = TensorProto.FLOAT
MODELS = Path(__file__).parent / "models"
needs_nchwc = pytest.mark.skipif(nchwc_block_size() is None, reason="onnxruntime does not use NCHWc here")


def convolutions(head: str) -> onnx.ModelProto:
    """Two 3x3 convolutions of 16 channels on a 3-channel image, then ``head``: "pool" (a
    GlobalAveragePool: its [N, 16, 1, 1] result is laid out alike blocked or not, so the
    blocked region needs no reorder at all), "map" (the feature map itself is the output:
    one reorder back) or "scale" (a squeeze-and-excitation Mul, which reads NCHW)."""
    rng = np.random.default_rng(3)
    inits = [
        init("w0", rng.standard_normal((16, 3, 3, 3)).astype(np.float32) * 0.2),
        init("b0", rng.standard_normal(16).astype(np.float32)),
        init("w1", rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.2),
        init("b1", rng.standard_normal(16).astype(np.float32)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c0"], ["r0"]),
        helper.make_node("Conv", ["r0", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
    ]
    shape = [1, 16, 8, 8]
    if head == "pool":
        nodes.append(helper.make_node("GlobalAveragePool", ["c1"], ["y"]))
        shape = [1, 16, 1, 1]
    elif head == "scale":
        nodes += [
            helper.make_node("GlobalAveragePool", ["c1"], ["g"]),
            helper.make_node("Sigmoid", ["g"], ["s"]),
            helper.make_node("Mul", ["c1", "s"], ["y"]),
        ]
    else:
        nodes.append(helper.make_node("Identity", ["c1"], ["y"]))
    return model(nodes, [tensor("x", F, [1, 3, 8, 8])], [tensor("y", F, shape)], inits)


def blocked(m: onnx.ModelProto) -> int:
    return sum(n.domain == "com.microsoft.nchwc" for n in m.graph.node)


@needs_nchwc
@pytest.mark.parametrize("head", ["map", "scale"])
def test_a_layout_that_costs_nodes_is_undone_unless_the_run_lets_it_grow(head):
    before = convolutions(head)
    extended = rewriter.optimize(before, level="extended").model
    result = rewriter.optimize(before, level="all")
    assert len(result.model.graph.node) == len(extended.graph.node)
    assert blocked(result.model) == 0
    assert result.report.nodes_after == len(extended.graph.node)
    assert any("layout level was undone" in w for w in result.report.warnings)
    assert all(row.applied == 0 for row in result.report.rules if row.level >= 3)
    assert_same_outputs(before, result.model, atol=1e-4)
    rewriter.check_model(result.model, full_check=True)

    grown = rewriter.optimize(before, level="all", layout_may_grow=True)
    assert blocked(grown.model) > 0 and len(grown.model.graph.node) > len(extended.graph.node)
    assert not any("undone" in w for w in grown.report.warnings)
    assert_same_outputs(before, grown.model, atol=1e-4)


@needs_nchwc
def test_a_layout_that_costs_no_node_is_kept():
    before = convolutions("pool")
    extended = rewriter.optimize(before, level="extended").model
    result = rewriter.optimize(before, level="all")
    assert blocked(result.model) > 0
    assert len(result.model.graph.node) <= len(extended.graph.node)
    assert not any("undone" in w for w in result.report.warnings)
    assert_same_outputs(before, result.model, atol=1e-4)


def skip_layer_norm() -> onnx.ModelProto:
    rng = np.random.default_rng(4)
    nodes = [
        helper.make_node("Add", ["x", "r"], ["s"]),
        helper.make_node("LayerNormalization", ["s", "g", "b"], ["y"], axis=-1, epsilon=1e-5),
    ]
    inits = [init("g", rng.standard_normal(8).astype(np.float32)), init("b", rng.standard_normal(8).astype(np.float32))]
    return model(nodes, [tensor("x", F, [2, 4, 8]), tensor("r", F, [2, 4, 8])], [tensor("y", F, [2, 4, 8])], inits)


def test_rules_that_grow_the_graph_run_only_when_it_may_grow():
    before = skip_layer_norm()
    kept = rewriter.optimize(before, level="all")
    assert ops(kept.model) == {"SkipLayerNormalization": 1}  # the extended level's fusion
    assert not any(row.rule.startswith("SkipLayerNormSplit") for row in kept.report.rules)
    split = rewriter.optimize(before, level="all", layout_may_grow=True)
    assert ops(split.model) == {"Add": 1, "LayerNormalization": 1}
    assert_same_outputs(before, split.model, atol=1e-4)


GROWING_PACK = """pack mine level 1
# Abs(x) -> Max(x, -x): a rewrite that adds a node, for the test
rule AbsAsMax root y grows {
    y = Abs(x)
  =>
    y = Max(x, Neg(x))
}
"""


def test_a_rule_marked_grows_is_parsed_and_runs_only_when_asked(tmp_path):
    path = tmp_path / "mine.rules"
    path.write_text(GROWING_PACK)
    pack = rewriter.load_pack(path)
    assert [r.grows for r in pack.rules] == [True]
    m = model([helper.make_node("Abs", ["x"], ["y"])], [tensor("x", F, [3])], [tensor("y", F, [3])])
    assert ops(rewriter.optimize(m, rules=[pack], bundled=False).model) == {"Abs": 1}
    grown = rewriter.optimize(m, rules=[pack], bundled=False, layout_may_grow=True)
    assert grown.report.applied("AbsAsMax") == 1 and ops(grown.model) == {"Max": 1, "Neg": 1}


@pytest.mark.parametrize(
    "name", ["convnet_bn.onnx", "resnet18_mini_bn.onnx", "bert_tiny.onnx", "falcon_ts_static.onnx"]
)
def test_level_all_is_never_larger_than_level_extended(name):
    original = onnx.load(str(MODELS / name))
    extended = rewriter.optimize(original, level="extended").model
    laid_out = rewriter.optimize(original, level="all").model
    assert len(laid_out.graph.node) <= len(extended.graph.node)
    assert_same_outputs(original, laid_out, atol=1e-4)


@needs_nchwc
def test_the_command_line_says_the_layout_was_undone_and_keeps_it_when_asked(tmp_path):
    source = tmp_path / "net.onnx"
    onnx.save(convolutions("map"), source)
    out = tmp_path / "out.onnx"
    run = CliRunner().invoke(cli, ["optimize", str(source), "-o", str(out), "--level", "all", "-q"])
    assert run.exit_code == 0, run.output
    assert blocked(onnx.load(str(out))) == 0
    run = CliRunner().invoke(cli, ["optimize", str(source), "-o", str(out), "--level", "all", "--layout-may-grow"])
    assert run.exit_code == 0, run.output
    assert "undone" not in run.output
    assert blocked(onnx.load(str(out))) > 0
    run = CliRunner().invoke(cli, ["optimize", str(source), "-o", str(out), "--level", "all"])
    assert "the layout level was undone" in run.output


def test_explaining_a_rule_that_grows_says_it_runs_only_when_asked():
    why = rewriter.explain(skip_layer_norm(), level="all", rule="SkipLayerNormSplit")
    assert any("--layout-may-grow" in note.message for note in why.notes)
    assert [a.rule for a in why.attempts] == []
    why = rewriter.explain(skip_layer_norm(), level="all", rule="SkipLayerNormSplit", layout_may_grow=True)
    assert [a.rule for a in why.attempts] == ["SkipLayerNormSplit"] and why.attempts[0].cause is None
