"""What ``optimize`` reports: per-rule time, what built-ins removed, the op histogram diff,
the created-node map (API, tables and ``--json``), and the progress of a long run."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections import Counter

import numpy as np
import onnx
import pytest
from helpers import MODELS, init, model, tensor
from onnx import TensorProto, helper
from rich.console import Console

import rewriter
from rewriter.report import OpChange, Report
from rewriter.rewrite.progress import PROGRESS_EVERY, Progress
from rewriter.terminal.progress import RunProgress

F = TensorProto.FLOAT


def rewriter_cli(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rewriter", *map(str, args)], capture_output=True, text=True, timeout=120
    )


def histogram(m: onnx.ModelProto) -> Counter:
    """Nodes per op, counted here without the engine's help (domain.Op outside ONNX)."""
    return Counter(f"{n.domain}.{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type for n in m.graph.node)


def gemm_relu_model() -> onnx.ModelProto:
    """MatMul + Add + Relu: extended fuses it in two rewrites (Gemm, then FusedGemm)."""
    rng = np.random.default_rng(0)
    return model(
        [
            helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
            helper.make_node("Add", ["m", "b"], ["a"], name="bias"),
            helper.make_node("Relu", ["a"], ["y"], name="act"),
            helper.make_node("Neg", ["y"], ["z"], name="untouched"),
        ],
        [tensor("x", F, [2, 4])],
        [tensor("z", F, [2, 4])],
        [
            init("w", rng.standard_normal((4, 4)).astype(np.float32)),
            init("b", rng.standard_normal(4).astype(np.float32)),
        ],
    )


# ------------------------------------------------------------------------------------ the API


def test_rule_rows_carry_their_time_and_builtins_what_they_removed():
    report = rewriter.optimize(str(MODELS / "convnet_bn.onnx"), level="basic").report
    rows = {row.rule: row for row in report.rules}
    assert rows["ConvBatchNormFusion"].applied > 0 and rows["ConvBatchNormFusion"].level == 1
    assert all(row.seconds >= 0 for row in report.rules)
    assert all(row.seconds > 0 for row in report.rules if row.applied)  # it ran, so it took time
    assert set(report.builtin_seconds) == {"constant_folding", "common_subexpression_elimination"}
    # the time of the rules is part of the time of matching and rewriting
    assert sum(row.seconds for row in report.rules) <= report.seconds["match"] + report.seconds["rewrite"] + 1e-9


def test_op_changes_are_the_difference_of_the_histograms():
    source = onnx.load(str(MODELS / "bert_tiny.onnx"))
    result = rewriter.optimize(source, level="extended")
    before, after = histogram(source), histogram(result.model)
    expected = {op: (before[op], after[op]) for op in before | after if before[op] != after[op]}
    changes = result.report.op_changes()
    assert {(f"{c.domain}." if c.domain else "") + c.op: (c.before, c.after) for c in changes} == expected
    assert any(c.domain == "com.microsoft" for c in changes)
    # the ops that went first (most first), then those that came
    signs = [c.change > 0 for c in changes]
    assert signs == sorted(signs)
    gone = [c.change for c in changes if c.change < 0]
    assert gone == sorted(gone)


def test_op_change_names_show_the_domain_outside_onnx():
    report = Report(ops_before={"Add": 3, "Mul": 1}, ops_after={"Add": 1, "Mul": 1, "com.microsoft.Gelu": 2})
    assert report.op_changes() == [OpChange("Add", "", 3, 1), OpChange("Gelu", "com.microsoft", 0, 2)]
    assert [c.name for c in report.op_changes()] == ["Add", "Gelu (com.microsoft)"]


def test_created_nodes_map_to_what_they_replaced_back_to_the_input():
    before = gemm_relu_model()
    result = rewriter.optimize(before, level="extended", providers="CPU")
    fused = next(n for n in result.model.graph.node if n.op_type == "FusedGemm")
    created = result.report.created
    assert set(created) == {fused.name}  # the Gemm it replaced is gone; the Neg was not made
    entry = created[fused.name]
    assert entry.rule == "GemmActivationFusion"
    assert entry.replaced == ("act", "mm/MatMulAddFusion")  # as its metadata says
    assert entry.original == ("act", "bias", "mm")  # the input's nodes behind them


def test_a_node_an_earlier_run_made_is_not_this_runs():
    once = rewriter.optimize(gemm_relu_model(), level="extended").model
    again = rewriter.optimize(once, level="extended")
    assert any(e.key == "rewriter_rule" for n in once.graph.node for e in n.metadata_props)
    assert again.report.created == {}


def test_progress_reports_phases_and_the_worklist():
    length = PROGRESS_EVERY + 100
    nodes = [helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"], name=f"r{i}") for i in range(length)]
    chain = model(nodes, [tensor("v0", F, [2])], [tensor(f"v{length}", F, [2])])
    seen: list[Progress] = []
    rewriter.optimize(chain, level="extended", progress=seen.append)
    phases = [p.phase for p in seen]
    assert phases[:2] == ["load rules", "build view"]
    assert "level 1 (basic)" in phases and "partition" in phases and "level 2 (extended)" in phases
    counted = [p for p in seen if p.done]
    assert counted and all(p.done % PROGRESS_EVERY == 0 for p in counted)
    assert any(p.phase == "level 1 (basic)" and p.done + p.left >= length for p in counted)


def test_progress_must_be_callable():
    with pytest.raises(rewriter.ArgumentError, match="progress must be a callable"):
        rewriter.optimize(gemm_relu_model(), progress=3)


# ------------------------------------------------------------------------- the progress bar


def test_the_bar_shows_the_phase_and_the_worklist_at_a_terminal():
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=True, width=120)
    with RunProgress(console, enabled=True, show_after=0) as bar:
        assert bar.enabled
        bar(Progress("level 2 (extended)", 512, 100, "GeluErf"))
    shown = stream.getvalue()
    assert "level 2 (extended)" in shown and "(last: GeluErf)" in shown and "512/612 nodes" in shown


@pytest.mark.parametrize("terminal, enabled", [(False, True), (True, False)])
def test_no_bar_off_a_terminal_or_when_quiet(terminal, enabled):
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=terminal, width=120)
    with RunProgress(console, enabled=enabled, show_after=0) as bar:
        assert not bar.enabled
        bar(Progress("level 2 (extended)", 512, 100, "GeluErf"))
    assert stream.getvalue() == ""


# ------------------------------------------------------------------------ the command line


def test_optimize_prints_the_op_diff_and_rule_times(tmp_path):
    source = MODELS / "bert_tiny.onnx"
    out = tmp_path / "out.onnx"
    proc = rewriter_cli("optimize", source, "-o", out, "--level", "extended")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # (no progress bar off a terminal)
    before, after = histogram(onnx.load(str(source))), histogram(onnx.load(str(out)))
    lines = proc.stdout.splitlines()
    for op in before | after:
        if before[op] == after[op]:
            continue
        domain, _, name = op.rpartition(".")
        shown = f"{name} ({domain})" if domain else name
        row = next(line for line in lines if line.strip("│ ").startswith(shown + " "))
        cells = [c.strip() for c in row.strip("│").split("│")]
        assert cells == [shown, str(before[op]), str(after[op]), f"{after[op] - before[op]:+d}"], row
    header = next(line for line in lines if "rule" in line and "applied" in line)
    assert "ms" in header
    assert "removed" in proc.stdout and "folded into constants" in proc.stdout


def test_optimize_json_holds_the_report(tmp_path):
    source = MODELS / "bert_tiny.onnx"
    out, report = tmp_path / "out.onnx", tmp_path / "report.json"
    proc = rewriter_cli("optimize", source, "-o", out, "--level", "extended", "--json", report, "-q")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""
    data = json.loads(report.read_text(encoding="utf-8"))
    original, optimized = onnx.load(str(source)), onnx.load(str(out))
    assert data["nodes"] == {"before": len(original.graph.node), "after": len(optimized.graph.node)}
    before, after = histogram(original), histogram(optimized)
    assert data["ops_before"] == dict(before) and data["ops_after"] == dict(after)
    assert {(o["domain"] + "." if o["domain"] else "") + o["op"]: (o["before"], o["after"]) for o in data["ops"]} == {
        op: (before[op], after[op]) for op in before | after if before[op] != after[op]
    }
    rules = {row["rule"]: row for row in data["rules"]}
    assert set(rules["AttentionFusion"]) == {"rule", "level", "applied", "refused", "seconds"}
    assert rules["AttentionFusion"]["level"] == 2 and rules["AttentionFusion"]["applied"] > 0
    assert {b["builtin"] for b in data["builtins"]} >= {"constant_folding"}
    assert all(b["removed_nodes"] >= 0 and b["seconds"] >= 0 for b in data["builtins"])
    assert {"load rules", "build view", "match", "rewrite", "partition", "write"} <= set(data["seconds"])
    assert data["placement"]["providers"] == ["CPUExecutionProvider"]
    assert sum(data["placement"]["nodes_after"].values()) == len(optimized.graph.node)
    # every node the run made, with its rule and what it replaced, as its metadata says
    made = {n.name: {e.key: e.value for e in n.metadata_props} for n in optimized.graph.node}
    made = {name: meta for name, meta in made.items() if "rewriter_rule" in meta}
    assert made and set(data["created"]) == set(made)
    input_names = {n.name for n in original.graph.node}
    for name, entry in data["created"].items():
        assert entry["rule"] == made[name]["rewriter_rule"]
        assert ",".join(entry["replaced"]) == made[name]["rewriter_replaced"]
        assert entry["original"] and set(entry["original"]) <= input_names
    assert data["warnings"] == []


def test_json_of_an_example_with_warnings(tmp_path):
    rules = tmp_path / "late.rules"
    rules.write_text("pack late level 3\nrule NegNeg { a = Neg(x)  y = Neg(a) => y = x }\n")
    report = tmp_path / "r.json"
    proc = rewriter_cli(
        "optimize", MODELS / "convnet_bn.onnx", "-o", tmp_path / "o.onnx", "--rules", rules, "--json", report
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(report.read_text())
    assert len(data["warnings"]) == 1 and "above the run's level" in data["warnings"][0]
    assert data["placement"] is None


def _assert_refused(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr


def test_json_never_overwrites_the_model_a_rules_file_or_the_output(tmp_path):
    source = tmp_path / "in.onnx"
    source.write_bytes((MODELS / "convnet_bn.onnx").read_bytes())
    rules = tmp_path / "mine.rules"
    rules.write_text("pack mine level 1\nrule NegNeg { a = Neg(x)  y = Neg(a) => y = x }\n")
    out = tmp_path / "out.onnx"
    kept = {p: p.read_bytes() for p in (source, rules)}
    for target, said in ((source, "is an input of this run"), (rules, "is an input of this run")):
        proc = rewriter_cli("optimize", source, "-o", out, "--rules", rules, "--json", target)
        _assert_refused(proc, str(target), said, "JSON output")
    for spelled in (out, tmp_path / "." / "out.onnx", tmp_path / "out.onnx.data"):
        proc = rewriter_cli("optimize", source, "-o", out, "--json", spelled)
        _assert_refused(proc, "is an output of this run")
    assert not out.exists()  # refused before any work
    link = tmp_path / "link.json"
    link.symlink_to(source)
    _assert_refused(rewriter_cli("optimize", source, "-o", out, "--json", link), "is an input of this run")
    hard = tmp_path / "hard.json"
    hard.hardlink_to(out.parent / "in.onnx")
    _assert_refused(rewriter_cli("optimize", source, "-o", out, "--json", hard), "is an input of this run")
    assert {p: p.read_bytes() for p in kept} == kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hard.json", "in.onnx", "link.json", "mine.rules"]


def test_json_never_overwrites_the_inputs_external_data(tmp_path):
    m = model(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        [tensor("x", shape=[2])],
        [tensor("y", shape=[2])],
        [onnx.numpy_helper.from_array(np.ones(2, np.float32), "w")],
    )
    onnx.save(m, str(tmp_path / "m.onnx"), save_as_external_data=True, location="m.data", size_threshold=0)
    data = (tmp_path / "m.data").read_bytes()
    proc = rewriter_cli("optimize", tmp_path / "m.onnx", "-o", tmp_path / "o.onnx", "--json", tmp_path / "m.data")
    _assert_refused(proc, "is an input of this run")
    assert (tmp_path / "m.data").read_bytes() == data and not (tmp_path / "o.onnx").exists()


def test_json_to_a_directory_or_nowhere_is_one_line(tmp_path):
    source = MODELS / "convnet_bn.onnx"
    proc = rewriter_cli("optimize", source, "-o", tmp_path / "o.onnx", "--json", tmp_path)
    _assert_refused(proc, "is a directory")
    proc = rewriter_cli("optimize", source, "-o", tmp_path / "o.onnx", "--json", tmp_path / "no" / "r.json")
    _assert_refused(proc, "does not exist")
    assert not (tmp_path / "o.onnx").exists()
