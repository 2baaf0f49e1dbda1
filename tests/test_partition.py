"""Partitioning with ONNX Runtime's rules: priority, first come first served, CPU fallback,
layer-assignment prefix/exact priority, annotations cleared, placement recorded."""

from __future__ import annotations

import onnx
import pytest
from helpers import model, tensor
from onnx import TensorProto, helper

import rewriter
from rewriter import RewriterError
from rewriter.graph.model import ModelState
from rewriter.onnx_facts.placement import annotation_of, provider_of
from rewriter.partition import parse_layer_assignment, partition, provider_list
from rewriter.partition.kernels import kernel_table, parse_kernel_file

F = TensorProto.FLOAT
CPU, CUDA = "CPUExecutionProvider", "CUDAExecutionProvider"


def annotated(*pairs: tuple[str, str, str | None], dtype=F) -> onnx.ModelProto:
    """A chain x -> op1 -> op2 ... with each node's (name, op, layer_ann)."""
    nodes, current = [], "x"
    for index, (name, op, annotation) in enumerate(pairs):
        out = f"v{index}"
        node = helper.make_node(op, [current], [out], name=name)
        if annotation is not None:
            entry = node.metadata_props.add()
            entry.key, entry.value = "layer_ann", annotation
        nodes.append(node)
        current = out
    return model(nodes, [tensor("x", dtype, [2, 3])], [tensor(current, dtype, [2, 3])])


def placed(m: onnx.ModelProto, providers, setting=None):
    state = ModelState(m)
    report = partition(state, providers, setting)
    view = state.view
    return {view.node(n).name: provider_of(view.node(n)) for n in view.node_ids()}, report, state


def test_provider_list_normalizes_names_and_appends_cpu():
    assert provider_list("CUDA") == [CUDA, CPU]
    assert provider_list(["CUDAExecutionProvider", "cpu"]) == [CUDA, CPU]
    assert provider_list(["CPU", "CUDA"]) == [CPU, CUDA]
    with pytest.raises(RewriterError, match="unknown execution provider 'Foo'"):
        provider_list("Foo")


def test_higher_priority_provider_claims_what_it_can_run():
    names, report, _ = placed(annotated(("a", "Relu", None), ("b", "Neg", None)), "CUDA,CPU")
    assert names == {"a": CUDA, "b": CUDA}
    assert report.counts == {CUDA: 2}


def test_cpu_first_in_the_list_claims_everything_it_can():
    names, _, _ = placed(annotated(("a", "Relu", None)), "CPU,CUDA")
    assert names == {"a": CPU}


def test_nodes_a_provider_cannot_run_go_to_the_next():
    # CUDA's Relu takes floating types only; an int32 Relu goes on to CPU
    m = annotated(("a", "Relu", None), ("b", "Neg", None), dtype=TensorProto.INT32)
    names, _, _ = placed(m, "CUDA")
    assert names == {"a": CPU, "b": CUDA}


def test_a_provider_list_without_cpu_still_falls_back_to_cpu():
    m = annotated(("a", "Relu", None), ("b", "Det", None))  # CUDA has no Det kernel
    names, report, _ = placed(m, ["CUDA"])
    assert names == {"a": CUDA, "b": CPU}
    assert report.providers == [CUDA, CPU]


def test_layer_assignment_pre_assigns_annotated_nodes():
    m = annotated(("a", "Relu", "encoder.layer0"), ("b", "Neg", "final_output"), ("c", "Abs", None))
    names, report, _ = placed(m, "CUDA,CPU", "gpu(encoder); cpu(=final_output)")
    assert names == {"a": CUDA, "b": CPU, "c": CUDA}
    decisions = {d.rule: (d.provider, d.placed) for d in report.decisions}
    assert decisions == {"gpu(encoder)": (CUDA, 1), "cpu(=final_output)": (CPU, 1)}


def test_prefix_rules_take_priority_over_exact_rules():
    rules = parse_layer_assignment("cpu(=encoder); gpu(enc)")
    assert [r.text for r in rules] == ["gpu(enc)", "cpu(=encoder)"]
    m = annotated(("a", "Relu", "encoder"))
    names, _, _ = placed(m, "CUDA,CPU", "cpu(=encoder); gpu(enc)")
    assert names == {"a": CUDA}


def test_within_a_kind_rules_apply_left_to_right():
    m = annotated(("a", "Relu", "encoder"))
    assert placed(m, "CUDA,CPU", "cpu(enc); gpu(encoder)")[0] == {"a": CPU}
    assert placed(m, "CUDA,CPU", "gpu(encoder); cpu(enc)")[0] == {"a": CUDA}


def test_exact_rule_does_not_match_a_longer_annotation():
    m = annotated(("a", "Relu", "final_output_2"))
    names, _, _ = placed(m, "CUDA,CPU", "cpu(=final_output)")
    assert names == {"a": CUDA}


def test_unknown_device_designator_is_skipped_with_a_warning():
    m = annotated(("a", "Relu", "encoder"))
    names, report, _ = placed(m, "CUDA,CPU", "npu(encoder)")
    assert names == {"a": CUDA}
    assert any("npu" in w and "skipped" in w for w in report.warnings)


def test_pre_assignment_without_a_kernel_warns_and_falls_back():
    m = annotated(("a", "Det", "encoder"))
    names, report, _ = placed(m, "CUDA,CPU", "gpu(encoder)")
    assert names == {"a": CPU}
    assert report.decisions[0].fell_back == 1
    assert any("has no kernel" in w and "'a'" in w for w in report.warnings)


def test_annotations_are_cleared_and_placement_recorded_everywhere():
    then_branch = helper.make_graph([helper.make_node("Neg", ["v0"], ["t"])], "then", [], [tensor("t", F, [2, 3])])
    then_branch.node[0].metadata_props.add(key="layer_ann", value="inner")
    m = annotated(("a", "Relu", "encoder"))
    m.graph.node.append(
        helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_branch, else_branch=then_branch)
    )
    m.graph.input.append(tensor("cond", TensorProto.BOOL, []))
    m.graph.output[0].CopyFrom(tensor("y", F, [2, 3]))
    _, _, state = placed(m, "CUDA,CPU", "gpu(encoder)")
    out = state.to_model()
    for node in out.graph.node:
        assert annotation_of(node) is None and provider_of(node) in (CUDA, CPU)
    assert all(annotation_of(n) is None for n in out.graph.node[1].attribute[0].g.node)


def test_bad_layer_assignment_setting_is_a_clear_error():
    for setting in ("gpu(encoder", "gpu()", "gpu(=)", "(x)"):
        with pytest.raises(RewriterError, match="layer assignment"):
            parse_layer_assignment(setting)


def test_kernel_types_decide_support():
    cuda = kernel_table(CUDA)
    state = ModelState(annotated(("a", "Relu", None)))
    node = state.view.node(state.view.node_ids()[0])
    assert cuda.supports(state.view, node)
    state = ModelState(annotated(("a", "Relu", None), dtype=TensorProto.INT8))
    assert not cuda.supports(state.view, state.view.node(state.view.node_ids()[0]))
    assert kernel_table(CPU).supports(state.view, state.view.node(state.view.node_ids()[0]))


def test_kernel_files_parse_and_report_bad_lines():
    table = parse_kernel_file(
        "provider CUDA\nset F float float16\nai.onnx Relu 6+ T=F\ncom.microsoft Gelu 1+ T=F\n", "mine.kernels"
    )
    assert table.provider == CUDA and len(table) == 2
    with pytest.raises(RewriterError, match="mine.kernels:2: bad kernel line"):
        parse_kernel_file("provider CUDA\nai.onnx Relu six\n", "mine.kernels")
    with pytest.raises(RewriterError, match="no 'provider NAME' line"):
        parse_kernel_file("ai.onnx Relu 6+\n", "mine.kernels")


def test_a_registered_kernel_file_adds_a_provider(tmp_path):
    path = tmp_path / "dml.kernels"
    path.write_text("provider DmlExecutionProvider\nai.onnx Relu 6+ T=float\n")
    m = annotated(("a", "Relu", None), ("b", "Neg", None))
    result = rewriter.optimize(m, level="extended", providers="DML,CPU", provider_kernels=[path])
    assert result.report.partition.counts == {"DmlExecutionProvider": 1, CPU: 1}


def test_a_runs_kernel_files_do_not_outlive_the_run(tmp_path):
    """provider_kernels belong to one optimize() call, not to the process."""
    path = tmp_path / "openvino.kernels"
    path.write_text("provider OpenVINOExecutionProvider\nai.onnx Relu 6+ T=float\n")
    m = annotated(("a", "Relu", None))
    first = rewriter.optimize(m, level="extended", providers="OpenVINO", provider_kernels=[path])
    assert first.report.partition.counts == {"OpenVINOExecutionProvider": 1}
    with pytest.raises(RewriterError, match="no kernel table for OpenVINOExecutionProvider"):
        rewriter.optimize(m, level="extended", providers="OpenVINO")


def test_unknown_provider_without_kernels_is_a_clear_error():
    with pytest.raises(RewriterError, match="no kernel table for OpenVINOExecutionProvider"):
        rewriter.optimize(annotated(("a", "Relu", None)), level="extended", providers="OpenVINO")


def test_partition_only_happens_from_level_2():
    m = annotated(("a", "Relu", "encoder"))
    basic = rewriter.optimize(m, level="basic", providers="CUDA")
    assert basic.report.partition is None
    assert annotation_of(basic.model.graph.node[0]) == "encoder"
    extended = rewriter.optimize(m, level="extended", providers="CUDA")
    assert provider_of(extended.model.graph.node[0]) == CUDA
    assert annotation_of(extended.model.graph.node[0]) is None


def test_constant_nodes_never_block_partitioning():
    m = model(
        [
            helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", F, [1], [1.0]), name="k"),
            helper.make_node("Add", ["x", "c"], ["y"], name="add"),
        ],
        [tensor("x", F, [2])],
        [tensor("y", F, [2])],
    )
    names, report, _ = placed(m, "CUDA")
    assert names == {"k": CUDA, "add": CUDA} and report.warnings == []


def test_an_op_onnxruntime_inlines_goes_where_its_body_runs_without_a_warning():
    # HardSwish has no kernel anywhere: onnxruntime inlines its body (HardSigmoid, Mul)
    swish = annotated(("a", "HardSwish", None))
    names, report, _ = placed(swish, "CPU")
    assert names == {"a": CPU} and report.warnings == []
    names, report, _ = placed(swish, "CUDA")
    assert names == {"a": CUDA} and report.warnings == []
    unknown = model(
        [helper.make_node("Foo", ["x"], ["y"], name="f", domain="ex")],
        [tensor("x", F, [2])],
        [tensor("y", F, [2])],
        domains=["ex"],
    )
    names, report, _ = placed(unknown, "CPU")
    assert names == {"f": CPU} and any("no provider has a kernel" in w for w in report.warnings)
