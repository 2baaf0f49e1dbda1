"""``rewriter explain``: for the typical non-matches the first lines name the cause and the
node; the explanation is of the graph as the rule's level sees it; filters, JSON, the
Python API, ``optimize --explain`` (which changes nothing in the run) and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from helpers import init, model, tensor
from onnx import TensorProto, helper

import rewriter
from rewriter import ArgumentError, Explanation, RewriterError
from rewriter.cli import cli
from rewriter.graph.model import ModelState
from rewriter.match.matcher import Matcher
from rewriter.rewrite.fixpoint import compiled

F = TensorProto.FLOAT


# ----------------------------------------------------------------------------- models
def gelu(
    divisor_as_input: bool = False,
    extra_reader: bool = False,
    annotate: dict[str, str] | None = None,
    computed_divisor: bool = False,
) -> onnx.ModelProto:
    """0.5 * x * (1 + erf(x / sqrt(2))) as exporters write it (GeluErf's pattern), nodes
    named div, erf, add, mul, mul_half."""
    nodes = [
        helper.make_node("Div", ["x", "sqrt2"], ["d"], name="div"),
        helper.make_node("Erf", ["d"], ["e"], name="erf"),
        helper.make_node("Add", ["e", "one"], ["a"], name="add"),
        helper.make_node("Mul", ["x", "a"], ["m"], name="mul"),
        helper.make_node("Mul", ["m", "half"], ["y"], name="mul_half"),
    ]
    inputs = [tensor("x", F, [2, 8])]
    outputs = [tensor("y", F, [2, 8])]
    inits = [init("one", np.float32(1.0)), init("half", np.float32(0.5))]
    if divisor_as_input:
        inputs.append(tensor("sqrt2", F, []))
    elif computed_divisor:
        nodes.insert(0, helper.make_node("Sqrt", ["two"], ["sqrt2"], name="sqrt"))
        inits.append(init("two", np.float32(2.0)))
    else:
        inits.append(init("sqrt2", np.float32(1.4142135)))
    if extra_reader:
        nodes.append(helper.make_node("Relu", ["a"], ["r"], name="relu"))
        outputs.append(tensor("r", F, [2, 8]))
    for node in nodes:
        if annotate and node.name in annotate:
            node.metadata_props.add(key="layer_ann", value=annotate[node.name])
    return model(nodes, inputs, outputs, inits)


def skip_layer_norm(axis: int) -> onnx.ModelProto:
    """LayerNormalization(a + b), SkipLayerNormFusion's pattern."""
    nodes = [
        helper.make_node("Add", ["a", "b"], ["s"], name="residual"),
        helper.make_node("LayerNormalization", ["s", "gamma", "beta"], ["y"], name="ln", axis=axis, epsilon=1e-5),
    ]
    norm_shape = [16] if axis in (-1, 2) else [8, 16]
    inits = [init("gamma", np.ones(norm_shape, np.float32)), init("beta", np.zeros(norm_shape, np.float32))]
    return model(nodes, [tensor("a", F, [2, 8, 16]), tensor("b", F, [2, 8, 16])], [tensor("y", F, [2, 8, 16])], inits)


def softmax(axis: int) -> onnx.ModelProto:
    nodes = [
        helper.make_node("MatMul", ["q", "k"], ["s"], name="scores"),
        helper.make_node("Softmax", ["s"], ["p"], name="softmax", axis=axis),
    ]
    return model(nodes, [tensor("q", F, [2, 4, 8]), tensor("k", F, [2, 8, 4])], [tensor("p", F, [2, 4, 4])])


GELU_TO_ONNX = """pack mine level 2 providers CPU, CUDA
# 0.5 * x * (1 + erf(x / sqrt(2))) -> ONNX's own Gelu, which opset 20 brought
rule GeluToOnnx root e {
    d = Div(x, ~1.41421356)
    e = Erf(d)
    y = Mul(Mul(x, Add(e, 1.0)), 0.5)
  =>
    y = Gelu(x)
}
"""

MATMUL_SOFTMAX = """pack attention level 2 providers CPU, CUDA
domain com.example
rule MatMulSoftmax root p {
    s = MatMul(q, k)
    p = Softmax(s) {axis: -1}
  =>
    p = com.example.MatMulSoftmax(q, k)
}
"""


def explain_cli(tmp_path, m: onnx.ModelProto, *args: str) -> list[str]:
    """``rewriter explain`` run in-process; its stdout lines (exit code 0 asserted)."""
    path = tmp_path / "model.onnx"
    onnx.save(m, str(path))
    result = CliRunner().invoke(cli, ["explain", str(path), *args])
    assert result.exit_code == 0, (result.stderr, result.exception)
    return result.stdout.splitlines()


def rules_file(tmp_path, text: str, name: str = "mine.rules") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# ------------------------------------------------------------- the five typical cases
def test_a_constant_that_arrives_as_a_graph_input(tmp_path):
    lines = explain_cli(tmp_path, gelu(divisor_as_input=True), "--rule", "GeluErf")
    first = lines[1]
    assert first.startswith("✗ GeluErf at 'erf' (Erf): ")
    assert "input 1 of 'div' (Div) is 'sqrt2', a graph input, not the constant ~1.41421356" in first
    assert "must be an initializer" in lines[2]  # the hint
    assert any("✓ e = Erf(d)" in line and "'erf' (Erf)" in line for line in lines)
    assert any("✗ d = Div(x, ~1.41421356 as k)" in line and "'div' (Div)" in line for line in lines)


def test_an_intermediate_read_by_another_node_names_that_reader(tmp_path):
    lines = explain_cli(tmp_path, gelu(extra_reader=True), "--rule", "GeluErf")
    assert lines[1].startswith("✗ GeluErf at 'erf' (Erf): matched, refused: ")
    assert "'relu' (Relu) reads 'a', which the rewrite would delete" in lines[1]
    (attempt,) = rewriter.explain(gelu(extra_reader=True), level="extended", rule="GeluErf").attempts
    assert (attempt.outcome, attempt.cause.kind, attempt.cause.node) == ("refused", "read outside", "relu")


def test_a_replacement_the_models_opset_does_not_define(tmp_path):
    rules = rules_file(tmp_path, GELU_TO_ONNX)
    lines = explain_cli(tmp_path, gelu(), "--rules", rules, "--rule", "GeluToOnnx")
    assert lines[1].startswith("✗ GeluToOnnx at 'erf' (Erf): matched, refused: ")
    assert "invalid at the model's opset: Gelu does not exist at opset 17" in lines[1]
    (attempt,) = rewriter.explain(gelu(), level="extended", rules=[rules], rule="GeluToOnnx").attempts
    assert (attempt.cause.kind, attempt.cause.node) == ("opset", "erf")


def test_nodes_on_different_providers(tmp_path):
    lines = explain_cli(
        tmp_path,
        gelu(annotate={"div": "head"}),
        "--rule",
        "GeluErf",
        "--providers",
        "CUDA,CPU",
        "--layer-assignment",
        "cpu(=head)",
    )
    assert "providers CUDA, CPU" in lines[0]
    assert lines[1].startswith("✗ GeluErf at 'erf' (Erf): matched, refused: ")
    assert "different providers: 'div' on CPU; 'erf', 'add', 'mul', 'mul_half' on CUDA" in lines[1]
    attempt = rewriter.explain(
        gelu(annotate={"div": "head"}),
        level="extended",
        rule="GeluErf",
        providers="CUDA,CPU",
        layer_assignment="cpu(=head)",
    ).attempts[0]
    assert (attempt.cause.kind, attempt.cause.node) == ("placement", "div")


def test_a_rule_for_another_provider_says_so(tmp_path):
    conv_relu = model(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), helper.make_node("Relu", ["c"], ["y"])],
        [tensor("x", TensorProto.FLOAT, [1, 2, 5, 5])],
        [tensor("y", TensorProto.FLOAT, [1, 3, 5, 5])],
        [init("w", np.ones((3, 2, 1, 1), np.float32))],
    )
    lines = explain_cli(tmp_path, conv_relu, "--rule", "ConvReluCudaFusion")
    assert "ConvReluCudaFusion fuses only nodes on CUDA; these run on CPU" in lines[1]


def test_an_attribute_value_that_differs(tmp_path):
    rules = rules_file(tmp_path, MATMUL_SOFTMAX)
    lines = explain_cli(tmp_path, softmax(axis=1), "--rules", rules, "--rule", "MatMulSoftmax")
    assert lines[1].startswith("✗ MatMulSoftmax at 'softmax' (Softmax): ")
    assert "attribute axis=1 of 'softmax' (Softmax), the pattern wants -1" in lines[1]


def test_an_attribute_a_where_clause_rejects_shows_its_value(tmp_path):
    lines = explain_cli(tmp_path, skip_layer_norm(axis=1), "--rule", "SkipLayerNormFusion", "--providers", "CUDA")
    assert lines[1].startswith("✗ SkipLayerNormFusion at 'residual' (Add): ")
    assert "where `axis == -1 or axis == 2`" in lines[1] and "does not hold at 'ln' (LayerNormalization)" in lines[1]
    assert "    saw: axis = 1" in lines


def test_a_name_the_pattern_uses_twice_says_what_it_already_denotes(tmp_path):
    # the pattern wants (x * s) * 0.5 where the model computes x * (s * 0.5): the second Mul
    # reads the constant where the pattern's `x` (already 'x') should be
    nodes = [
        helper.make_node("Sigmoid", ["x"], ["s"], name="sigmoid"),
        helper.make_node("Mul", ["s", "half"], ["h"], name="halve"),
        helper.make_node("Mul", ["x", "h"], ["y"], name="gate"),
    ]
    m = model(nodes, [tensor("x", F, [2, 8])], [tensor("y", F, [2, 8])], [init("half", np.float32(0.5))])
    rules = rules_file(
        tmp_path,
        "pack mine level 1\nrule HalfSwish root s {\n    s = Sigmoid(x)\n    y = Mul(Mul(x, s), 0.5)\n"
        "  =>\n    y = Mul(x, Mul(s, 0.5))\n}\n",
    )
    lines = explain_cli(tmp_path, m, "--rules", rules, "--rule", "HalfSwish")
    assert lines[1] == (
        "✗ HalfSwish at 'sigmoid' (Sigmoid): input 1 of 'halve' (Mul) is 'half', "
        "but the pattern's `x` is already 'x' (`$1 = Mul(x, s)`)"
    )
    assert lines[2].startswith("    hint: a name used twice in a pattern denotes one value")
    assert "    saw: 'x' (a graph input, float[2, 8])" in lines
    (attempt,) = rewriter.explain(m, rules=[rules], rule="HalfSwish").attempts
    assert (attempt.cause.kind, attempt.cause.node) == ("input", "halve")


# ---------------------------------------------------------------- what an explanation is
def test_a_rule_that_applies_is_reported_as_applying(tmp_path):
    lines = explain_cli(tmp_path, gelu(), "--rule", "GeluErf")
    assert "1 attempt of 1 rule: 1 applies" in lines[0]
    assert lines[1] == "✓ GeluErf at 'erf' (Erf): applies (5 equations bound)"


def test_the_graph_is_explained_as_the_rules_level_sees_it():
    # the divisor is Sqrt(2): constant folding (basic level) makes it an initializer before
    # the extended level, where GeluErf then applies; on the raw model it would not
    explanation = rewriter.explain(gelu(computed_divisor=True), level="extended", rule="GeluErf")
    assert [a.outcome for a in explanation.attempts] == ["applies"]
    raw = compiled(next(r for p in rewriter.bundled_packs() for r in p.rules if r.name == "GeluErf"))
    state = ModelState(gelu(computed_divisor=True))
    matcher = Matcher(state.view, record_failures=True)
    (erf,) = state.view.nodes_by_op("", "Erf")
    assert not list(matcher.matches(raw, erf))


def test_rule_and_node_filters():
    m = gelu(divisor_as_input=True)
    everything = rewriter.explain(m, level="extended")
    assert len({a.rule for a in everything.attempts}) > 3
    by_node = rewriter.explain(m, level="extended", node="mul_half")
    assert by_node.attempts and {a.root for a in by_node.attempts} == {"mul_half"}
    both = rewriter.explain(m, level="extended", rule=["GeluErf"], node=["div", "gone"])
    (attempt,) = both.attempts
    assert (attempt.root, attempt.cause.kind) == ("div", "root op")
    assert "cannot be GeluErf's root: its pattern is rooted at Erf" in attempt.cause.message
    assert any("no node named 'gone'" in note.message for note in both.notes)


def test_a_rule_without_candidate_roots_is_a_note():
    explanation = rewriter.explain(gelu(), rule="ConvBatchNormFusion")
    assert explanation.attempts == [] and explanation.level == 1
    assert [n.message for n in explanation.notes] == ["no Conv node in the graph when level 1 runs"]


def test_closest_attempts_come_first():
    explanation = rewriter.explain(gelu(extra_reader=True), level="extended", node="erf")
    outcomes = [a.outcome for a in explanation.attempts]
    assert outcomes[0] == "refused"
    shares = [a.matched / a.equations for a in explanation.attempts if a.outcome == "no match"]
    assert shares == sorted(shares, reverse=True)


def test_where_details_show_the_values_seen():
    explanation = rewriter.explain(skip_layer_norm(axis=1), level="extended", rule="SkipLayerNormFusion")
    cause = explanation.attempts[0].cause
    assert cause.kind == "where" and cause.node == "ln"
    assert "`axis == -1` = false" in cause.details and "axis = 1" in cause.details
    bound = [(b.state, b.node) for b in explanation.attempts[0].bindings]
    assert bound == [("bound", "residual"), ("failed", "ln")]


def test_json_round_trip(tmp_path):
    path = tmp_path / "model.onnx"
    onnx.save(gelu(divisor_as_input=True), str(path))
    out = tmp_path / "why.json"
    result = CliRunner().invoke(cli, ["explain", str(path), "--level", "extended", "--json", str(out)])
    assert result.exit_code == 0, result.stderr
    data = json.loads(out.read_text())
    loaded = Explanation.from_json(data)
    assert loaded == rewriter.explain(gelu(divisor_as_input=True), level="extended")
    assert loaded.to_json() == data
    gelu_attempt = next(a for a in loaded.attempts if a.rule == "GeluErf")
    assert gelu_attempt.cause.node == "div" and gelu_attempt.cause.hint
    assert f"✗ GeluErf at 'erf' (Erf): {gelu_attempt.cause.message}" in result.stdout


def test_the_json_output_never_overwrites_an_input(tmp_path):
    path = tmp_path / "model.onnx"
    onnx.save(gelu(), str(path))
    before = path.read_bytes()
    result = CliRunner().invoke(cli, ["explain", str(path), "--json", str(path)])
    assert result.exit_code == 2 and "is an input of this run" in result.stderr
    assert path.read_bytes() == before


def test_optimize_explain_prints_the_explanation_and_changes_nothing(tmp_path):
    source = tmp_path / "in.onnx"
    onnx.save(gelu(extra_reader=True), str(source))
    plain, explained = tmp_path / "plain.onnx", tmp_path / "explained.onnx"
    runner = CliRunner()
    assert runner.invoke(cli, ["optimize", str(source), "-o", str(plain), "--level", "extended", "-q"]).exit_code == 0
    result = runner.invoke(
        cli,
        ["optimize", str(source), "-o", str(explained), "--level", "extended", "-q", "--explain", "GeluErf"],
    )
    assert result.exit_code == 0, result.stderr
    assert "✗ GeluErf at 'erf' (Erf): matched, refused: 'relu' (Relu) reads 'a'" in result.stdout
    assert plain.read_bytes() == explained.read_bytes()
    report = rewriter.optimize(gelu(extra_reader=True), level="extended", explain=["GeluErf"]).report
    assert report.explanation is not None and report.explanation.attempts[0].cause.kind == "read outside"


def test_subgraph_attempts_name_their_graph():
    branch = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["t"], name="inner_identity")], "then_body", [], [tensor("t", F, [2])]
    )
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["u"])], "else_body", [], [tensor("u", F, [2])])
    m = model(
        [helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=other)],
        [tensor("c", TensorProto.BOOL, []), tensor("x", F, [2])],
        [tensor("y", F, [2])],
    )
    attempts = rewriter.explain(m, rule="IdentityElimination").attempts
    assert [(a.graph, a.root) for a in attempts] == [("subgraph 'then_body'", "inner_identity")]


GROW = "pack grow level 1\nrule Grow { y = Add(x, w) => y = Add(Neg(Neg(x)), w) }\n"


def test_a_rule_that_never_settles_is_still_explained_with_where_the_run_stopped(tmp_path):
    # the level ran away after it was looked at: that was one error line and no explanation,
    # for exactly the rule one most wants explained
    rules = rules_file(tmp_path, GROW)
    lines = explain_cli(tmp_path, gelu(), "--rules", rules, "--rule", "Grow")
    assert lines[1].startswith("! the run stopped: pack 'basic, grow' did not reach a fixpoint")
    assert "Grow (200x)" in lines[1] and lines[1].endswith("levels after it are not explained")
    assert lines[2] == "✓ Grow at 'add' (Add): applies (1 equation bound)"
    later = rewriter.explain(gelu(), level="extended", rules=[rules], rule="GeluErf")
    assert later.attempts == [] and "the run stopped" in later.notes[0].message
    with pytest.raises(rewriter.FixpointError):  # (optimize itself still fails: it has no output to give)
        rewriter.optimize(gelu(), rules=[rules], explain=["Grow"], max_rewrites=50)


# ------------------------------------------------------------------------------ errors
def test_an_unknown_rule_is_one_line_and_exit_2(tmp_path):
    path = tmp_path / "model.onnx"
    onnx.save(gelu(), str(path))
    proc = subprocess.run(
        [sys.executable, "-m", "rewriter", "explain", str(path), "--rule", "NoSuchRule"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr == "error: unknown rule 'NoSuchRule' (rewriter rules lists the bundled ones)\n"
    assert proc.stdout == ""


def test_a_rule_above_the_level_says_which_level(tmp_path):
    path = tmp_path / "model.onnx"
    onnx.save(gelu(), str(path))
    result = CliRunner().invoke(cli, ["explain", str(path), "--rule", "GeluErf", "--level", "basic"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: rule 'GeluErf' is in pack 'extended' (level 2, extended), above level 1 (basic): raise --level"
    )
    result = CliRunner().invoke(cli, ["optimize", str(path), "-o", str(tmp_path / "o.onnx"), "--explain", "Nope"])
    assert result.exit_code == 2 and result.stderr.startswith("error: unknown rule 'Nope'")


def test_api_arguments_are_checked():
    with pytest.raises(ArgumentError):
        rewriter.explain(gelu(), rule=5)  # type: ignore[arg-type]
    with pytest.raises(RewriterError, match="unknown rule 'Nope'"):
        rewriter.explain(gelu(), rule=["Nope"])
    with pytest.raises(RewriterError, match="unknown rule"):
        rewriter.optimize(gelu(), explain=["Nope"])


# ------------------------------------------------------------- what the matcher records
def test_the_recorded_failure_says_what_was_bound_and_seen():
    rule = compiled(next(r for p in rewriter.bundled_packs() for r in p.rules if r.name == "GeluErf"))
    state = ModelState(gelu(divisor_as_input=True))
    view = state.view
    (erf,) = view.nodes_by_op("", "Erf")
    matcher = Matcher(view, record_failures=True)
    assert not list(matcher.matches(rule, erf))
    failure = matcher.last_failure
    assert failure is not None and failure.kind == "input" and failure.value == "sqrt2"
    assert view.node(failure.node).name == "div"
    assert {rule.rule.equations[i].out_names[0]: view.node(n).name for i, n in failure.nodes.items()} == {"e": "erf"}
    quiet = Matcher(view, record_failures=False)
    assert not list(quiet.matches(rule, erf)) and quiet.last_failure is None


# ------------------------------------------------------------------------- the docs
def test_the_transcripts_in_the_docs_are_what_explain_prints(tmp_path, monkeypatch):
    import re
    import shlex
    from pathlib import Path

    files = {
        "gelu_input.onnx": gelu(divisor_as_input=True),
        "gelu_reader.onnx": gelu(extra_reader=True),
        "gelu.onnx": gelu(),
        "gelu_head.onnx": gelu(annotate={"div": "head"}),
        "softmax_axis1.onnx": softmax(axis=1),
        "skip_ln_axis1.onnx": skip_layer_norm(axis=1),
    }
    for name, m in files.items():
        onnx.save(m, str(tmp_path / name))
    (tmp_path / "gelu20.rules").write_text(GELU_TO_ONNX)
    (tmp_path / "softmax.rules").write_text(MATMUL_SOFTMAX)
    monkeypatch.chdir(tmp_path)
    doc = (Path(__file__).resolve().parent.parent / "docs" / "explain.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```\n(\$ rewriter explain .*?)```", doc, flags=re.S)
    assert len(blocks) == 6
    for block in blocks:
        for transcript in re.split(r"\n\n(?=\$ )", block.strip()):
            command, *expected = transcript.splitlines()
            result = CliRunner().invoke(cli, shlex.split(command)[2:])
            assert result.exit_code == 0, result.stderr
            assert result.stdout.splitlines() == expected, command
