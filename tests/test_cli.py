"""The command line as a user runs it: output, exit codes, one-line errors, atomic writes."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from helpers import MODELS, model, tensor
from onnx import helper

import rewriter


def rewriter_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rewriter", *map(str, args)], capture_output=True, text=True, timeout=120
    )


def assert_clean_failure(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    for fragment in fragments:
        assert fragment in proc.stderr


def test_optimize_writes_a_valid_model_and_reports(tmp_path):
    out = tmp_path / "out.onnx"
    proc = rewriter_cli("optimize", MODELS / "convnet_bn.onnx", "-o", out, "--level", "basic")
    assert proc.returncode == 0, proc.stderr
    assert "ConvBatchNormFusion" in proc.stdout and "nodes: 15 -> 10" in proc.stdout
    rewriter.check_model(onnx.load(str(out)), full_check=True)
    assert [p.name for p in tmp_path.iterdir()] == ["out.onnx"]  # no temporary file left


def test_optimize_with_an_extra_rules_file(tmp_path):
    rules = tmp_path / "mine.rules"
    rules.write_text("pack mine level 1\nrule NegNeg { a = Neg(x)  y = Neg(a) => y = Identity(x) }\n")
    source = tmp_path / "in.onnx"
    m = model(
        [
            helper.make_node("Neg", ["x"], ["a"]),
            helper.make_node("Neg", ["a"], ["b"]),
            helper.make_node("Relu", ["b"], ["y"]),
        ],
        [tensor("x", shape=[2])],
        [tensor("y", shape=[2])],
    )
    onnx.save(m, str(source))
    proc = rewriter_cli("optimize", source, "-o", tmp_path / "out.onnx", "--rules", rules)
    assert proc.returncode == 0, proc.stderr
    assert "NegNeg" in proc.stdout
    assert [n.op_type for n in onnx.load(str(tmp_path / "out.onnx")).graph.node] == ["Relu"]


def test_bad_rules_file_gives_position_and_exit_2(tmp_path):
    rules = tmp_path / "bad.rules"
    rules.write_text("pack p level 1\nrule R {\n  y = Relu(x\n  => y = x\n}\n")
    out = tmp_path / "out.onnx"
    proc = rewriter_cli("optimize", MODELS / "convnet_bn.onnx", "-o", out, "--rules", rules)
    assert_clean_failure(proc, f"{rules}:4:3: unexpected '=>'")
    assert not out.exists()


def test_check_lists_every_error(tmp_path):
    rules = tmp_path / "bad.rules"
    rules.write_text("pack p level 1\nrule A { y = Reluu(x) => y = x }\nrule B { y = Relu(x) => y = q }\n")
    proc = rewriter_cli("check", rules)
    assert_clean_failure(proc, f"{rules}:2:14: unknown op 'Reluu'", f"{rules}:3:29: undefined name 'q'")


def test_check_accepts_the_bundled_packs():
    from rewriter.resources import bundled_pack_paths

    proc = rewriter_cli("check", *bundled_pack_paths())
    assert proc.returncode == 0, proc.stderr
    assert "ok" in proc.stdout


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no such file"),
        (b"", "empty file"),
        (b"\x08\x96\x01 definitely not protobuf \xff\xff", "not a readable ONNX model"),
        (b"ir_version: 8\n", "not a readable ONNX model"),
    ],
)
def test_unreadable_model_gives_one_line_and_exit_2(tmp_path, content, message):
    source = tmp_path / "in.onnx"
    if content is not None:
        source.write_bytes(content)
    out = tmp_path / "out.onnx"
    proc = rewriter_cli("optimize", source, "-o", out)
    assert_clean_failure(proc, message, str(source))
    assert not out.exists()


def test_a_directory_is_not_a_model(tmp_path):
    proc = rewriter_cli("optimize", tmp_path, "-o", tmp_path / "out.onnx")
    assert_clean_failure(proc, "is a directory")


def test_missing_output_directory_is_an_error(tmp_path):
    proc = rewriter_cli("optimize", MODELS / "convnet_bn.onnx", "-o", tmp_path / "nope" / "out.onnx")
    assert_clean_failure(proc, "does not exist")


def test_pack_that_never_settles_is_an_error_and_leaves_the_old_output(tmp_path):
    rules = tmp_path / "loop.rules"
    rules.write_text(
        "pack loop level 1\nrule Flip { y = Relu(x) => y = Abs(Relu(x)) }\n"
        "rule Flop { y = Abs(r) => y = Neg(Neg(r)) }\n"
    )
    out = tmp_path / "out.onnx"
    out.write_bytes(b"previous content")
    proc = rewriter_cli(
        "optimize", MODELS / "convnet_bn.onnx", "-o", out, "--rules", rules, "--no-bundled", "--max-rewrites", "50"
    )
    assert_clean_failure(proc, "did not reach a fixpoint", "Flip")
    assert out.read_bytes() == b"previous content"


def test_unknown_level_is_an_error(tmp_path):
    proc = rewriter_cli("optimize", MODELS / "convnet_bn.onnx", "-o", tmp_path / "o.onnx", "--level", "turbo")
    assert_clean_failure(proc, "unknown level 'turbo'")


def test_rules_lists_the_bundled_packs():
    proc = rewriter_cli("rules")
    assert proc.returncode == 0 and "ConvBatchNormFusion" in proc.stdout


@pytest.mark.parametrize(
    "nodes, message",
    [
        (
            [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["ghost"], ["y"])],
            "reads 'ghost', which no node, input or initializer produces",
        ),
        (
            [
                helper.make_node("Add", ["x", "b"], ["a"], name="first"),
                helper.make_node("Neg", ["a"], ["b"], name="second"),
                helper.make_node("Relu", ["a"], ["y"]),
            ],
            "cycle through nodes",
        ),
        ([helper.make_node("Relu", ["x"], ["a"])], "graph output 'y' is never produced"),
        ([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])], "two producers"),
    ],
)
def test_malformed_graph_is_refused_cleanly(tmp_path, nodes, message):
    source = tmp_path / "bad.onnx"
    onnx.save(model(nodes, [tensor("x", shape=[2])], [tensor("y", shape=[2])]), str(source))
    out = tmp_path / "out.onnx"
    proc = rewriter_cli("optimize", source, "-o", out)
    assert_clean_failure(proc, message)
    assert not out.exists()


def test_output_file_gets_ordinary_permissions(tmp_path):
    import os

    out = tmp_path / "out.onnx"
    proc = rewriter_cli("optimize", MODELS / "convnet_bn.onnx", "-o", out)
    assert proc.returncode == 0
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask


def test_verify_reports_a_failure_with_exit_1_and_files(tmp_path):
    rules = tmp_path / "wrong.rules"
    rules.write_text("pack wrong level 1\nrule NegIsRelu { y = Neg(x) => y = Relu(x) }\n")
    proc = rewriter_cli("verify", rules, "--examples", "20", "--out", tmp_path / "out")
    assert proc.returncode == 1, proc.stderr
    assert "FAIL wrong.NegIsRelu" in proc.stderr and "Traceback" not in proc.stderr
    assert (tmp_path / "out" / "wrong" / "NegIsRelu" / "report.txt").is_file()


def test_verify_names_only_the_counterexample_files_it_wrote(tmp_path, monkeypatch):
    # a rewrite the engine refused (a shape it would change) leaves no after.onnx: the FAIL
    # line must not send the reader looking for one
    import importlib

    from click.testing import CliRunner

    from rewriter.cli import cli
    from rewriter.verify.campaign import RuleVerdict, VerifyReport

    folder = tmp_path / "out" / "mine" / "R"
    folder.mkdir(parents=True)
    for name in ("before.onnx", "inputs.npz", "report.txt"):
        (folder / name).write_bytes(b"")
    verdict = RuleVerdict("mine", "R", draws=1, applied=1, verdict="FAIL", message="it broke", artifacts=folder)
    verify_api = importlib.import_module("rewriter.verify")  # (`rewriter.verify` is also the function)
    monkeypatch.setattr(verify_api, "verify", lambda **_: VerifyReport([verdict], 1.0))
    rules = tmp_path / "mine.rules"
    rules.write_text("pack mine level 1\nrule R { y = Neg(x) => y = Relu(x) }\n")
    result = CliRunner().invoke(cli, ["verify", str(rules), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    assert f"counterexample: {folder}/ (before.onnx, inputs.npz, report.txt)" in result.stderr
    (folder / "after.onnx").write_bytes(b"")
    result = CliRunner().invoke(cli, ["verify", str(rules), "--out", str(tmp_path / "out")])
    assert f"counterexample: {folder}/ (before.onnx, after.onnx, inputs.npz, report.txt)" in result.stderr


def test_verify_passes_a_correct_rule_and_strict_flags_unverified(tmp_path):
    rules = tmp_path / "fine.rules"
    rules.write_text(
        "pack fine level 1\nrule NegNeg root a { a = Neg(x)  y = Neg(a) => y = Identity(x) }\n"
        "rule Never { y = Relu(x) where rank(x) == 99 => y = x }\n"
    )
    proc = rewriter_cli("verify", rules, "--examples", "6", "--rule", "NegNeg", "--out", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "fine.NegNeg" in proc.stdout and "ok" in proc.stdout
    strict = rewriter_cli("verify", rules, "--examples", "4", "--strict", "--out", tmp_path)
    assert strict.returncode == 1 and "unverified fine.Never" in strict.stderr


def _model_with_external_data(tmp_path, location: str):
    from onnx import TensorProto, numpy_helper

    weight = numpy_helper.from_array(np.zeros(2, np.float32), "w")
    weight.data_location = TensorProto.EXTERNAL
    weight.ClearField("raw_data")
    weight.external_data.add(key="location", value=location)
    m = model(
        [helper.make_node("Add", ["x", "w"], ["y"])], [tensor("x", shape=[2])], [tensor("y", shape=[2])], [weight]
    )
    folder = tmp_path / "models"
    folder.mkdir()
    onnx.save(m, str(folder / "m.onnx"))
    return folder / "m.onnx"


@pytest.mark.parametrize("location", ["../secret.bin", "/etc/passwd"])
def test_external_data_outside_the_model_directory_is_refused_unread(tmp_path, location):
    (tmp_path / "secret.bin").write_bytes(b"\0" * 8)
    source = _model_with_external_data(tmp_path, location)
    proc = rewriter_cli("optimize", source, "-o", tmp_path / "out.onnx")
    assert_clean_failure(proc, "tensor 'w'", "refused as unsafe")
    assert not (tmp_path / "out.onnx").exists()


def test_missing_external_data_file_is_a_clear_error(tmp_path):
    source = _model_with_external_data(tmp_path, "weights.bin")
    proc = rewriter_cli("optimize", source, "-o", tmp_path / "out.onnx")
    assert_clean_failure(proc, "does not exist beside the model")


def test_external_data_beside_the_model_is_read(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    m = model(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        [tensor("x", shape=[2])],
        [tensor("y", shape=[2])],
        [onnx.numpy_helper.from_array(np.ones(2, np.float32), "w")],
    )
    onnx.save(
        m,
        str(folder / "m.onnx"),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="m.data",
        size_threshold=0,
    )
    proc = rewriter_cli("optimize", folder / "m.onnx", "-o", tmp_path / "out.onnx")
    assert proc.returncode == 0, proc.stderr
    out = onnx.load(str(tmp_path / "out.onnx"))
    assert onnx.numpy_helper.to_array(out.graph.initializer[0]).tolist() == [1.0, 1.0]


def _weights_model(size: int = 4096):
    rng = np.random.default_rng(0)
    w = onnx.numpy_helper.from_array(rng.standard_normal(size).astype(np.float32), "w")
    small = onnx.numpy_helper.from_array(np.float32([2.0]), "two")
    return model(
        [
            helper.make_node("Identity", ["x"], ["i"]),
            helper.make_node("Add", ["i", "w"], ["a"]),
            helper.make_node("Mul", ["a", "two"], ["y"]),
        ],
        [tensor("x", shape=[size])],
        [tensor("y", shape=[size])],
        [w, small],
    )


def _assert_runs_like(original: onnx.ModelProto, path) -> None:
    import onnxruntime as ort

    rewriter.check_model(str(path), full_check=True)
    x = np.arange(original.graph.input[0].type.tensor_type.shape.dim[0].dim_value, dtype=np.float32)
    expected = ort.InferenceSession(original.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    actual = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-6)


def test_external_data_always_writes_one_file_beside_the_output(tmp_path):
    source = _weights_model()
    onnx.save(source, str(tmp_path / "in.onnx"))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    proc = rewriter_cli(
        "optimize",
        tmp_path / "in.onnx",
        "-o",
        out_dir / "m.onnx",
        "--external-data",
        "always",
        "--external-data-file",
        "weights.bin",
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out_dir.iterdir()) == ["m.onnx", "weights.bin"]
    header = onnx.load(str(out_dir / "m.onnx"), load_external_data=False)
    where = {t.name: t.data_location for t in header.graph.initializer}
    assert where == {"w": onnx.TensorProto.EXTERNAL, "two": onnx.TensorProto.DEFAULT}  # threshold 1024 bytes
    assert (out_dir / "weights.bin").stat().st_size >= 4096 * 4
    _assert_runs_like(source, out_dir / "m.onnx")


def test_external_data_input_gives_external_output_by_default_and_never_inlines(tmp_path):
    source = _weights_model()
    onnx.save(_weights_model(), str(tmp_path / "in.onnx"), save_as_external_data=True, location="in.data")
    proc = rewriter_cli("optimize", tmp_path / "in.onnx", "-o", tmp_path / "out.onnx")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out.onnx.data").is_file()
    _assert_runs_like(source, tmp_path / "out.onnx")
    inline = rewriter_cli("optimize", tmp_path / "in.onnx", "-o", tmp_path / "inline.onnx", "--external-data", "never")
    assert inline.returncode == 0, inline.stderr
    assert not (tmp_path / "inline.onnx.data").exists()
    _assert_runs_like(source, tmp_path / "inline.onnx")


def test_external_data_file_name_must_stay_beside_the_output(tmp_path):
    onnx.save(_weights_model(), str(tmp_path / "in.onnx"))
    proc = rewriter_cli(
        "optimize",
        tmp_path / "in.onnx",
        "-o",
        tmp_path / "out.onnx",
        "--external-data",
        "always",
        "--external-data-file",
        "../elsewhere.bin",
    )
    assert_clean_failure(proc, "must be a plain file name")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx"]


def test_saving_with_external_data_leaves_the_model_in_memory_untouched(tmp_path):
    import rewriter

    result = rewriter.optimize(_weights_model())
    before = result.model.SerializeToString()
    rewriter.save_model(result.model, tmp_path / "m.onnx", external_data="always")
    assert result.model.SerializeToString() == before


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("ir_version", 99, "IR version 99 is not one this engine knows"),
        ("opset", 99, "opset 99 of ai.onnx is not one this engine knows"),
    ],
)
def test_unknown_ir_version_or_opset_is_refused(tmp_path, field, value, message):
    m = _weights_model(16)
    if field == "ir_version":
        m.ir_version = value
    else:
        m.opset_import[0].version = value
    onnx.save(m, str(tmp_path / "in.onnx"))
    proc = rewriter_cli("optimize", tmp_path / "in.onnx", "-o", tmp_path / "out.onnx")
    assert_clean_failure(proc, str(tmp_path / "in.onnx"), message)
    assert not (tmp_path / "out.onnx").exists()


@pytest.mark.slow
def test_model_over_2gb_goes_through_with_external_data(tmp_path):
    """Protobuf cannot hold 2 GB: the input comes with external data and the output is
    written with it automatically (four 640 MB tensors: about 8 GB of memory, 6 GB disk)."""
    import onnxruntime as ort

    count = 160_000_000
    weights = [
        onnx.numpy_helper.from_array(((np.arange(count) + k) % 1000).astype(np.float32), f"w{k}") for k in range(4)
    ]
    nodes = [helper.make_node("Identity", ["w0"], ["wi"])]
    nodes += [helper.make_node("Gather", ["wi" if k == 0 else f"w{k}", "idx"], [f"g{k}"]) for k in range(4)]
    nodes.append(helper.make_node("Sum", [f"g{k}" for k in range(4)], ["y"]))
    m = model(nodes, [tensor("idx", onnx.TensorProto.INT64, [3])], [tensor("y", shape=[3])], weights)
    del weights
    onnx.save(m, str(tmp_path / "big.onnx"), save_as_external_data=True, location="big.data")
    del m
    proc = subprocess.run(
        [sys.executable, "-m", "rewriter", "optimize", str(tmp_path / "big.onnx"), "-o", str(tmp_path / "out.onnx")],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out.onnx.data").stat().st_size >= 4 * count * 4
    header = onnx.load(str(tmp_path / "out.onnx"), load_external_data=False)
    assert "Identity" not in [n.op_type for n in header.graph.node]
    session = ort.InferenceSession(str(tmp_path / "out.onnx"), providers=["CPUExecutionProvider"])
    idx = np.array([0, 1234567, count - 1], np.int64)
    expected = sum((idx + k) % 1000 for k in range(4)).astype(np.float32)
    np.testing.assert_array_equal(session.run(None, {"idx": idx})[0], expected)


@pytest.mark.parametrize("command", ["optimize", "explain"])
@pytest.mark.parametrize("model_name", ["convnet_bn.onnx", "missing.onnx"])
def test_a_command_run_in_process_leaves_the_process_memory_limit_as_it_was(tmp_path, command, model_name):
    """The memory ceiling is the command's: run in-process (a test, a tool embedding the
    command line) it was left on the whole process, and later work there hit MemoryError."""
    resource = pytest.importorskip("resource")
    from click.testing import CliRunner

    from rewriter.cli import cli

    before = resource.getrlimit(resource.RLIMIT_AS)
    argv = [command, str(MODELS / model_name), "--level", "basic"]
    if command == "optimize":
        argv += ["-o", str(tmp_path / "out.onnx"), "--quiet"]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == (0 if model_name != "missing.onnx" else 2), result.output
    assert resource.getrlimit(resource.RLIMIT_AS) == before


@pytest.mark.parametrize("command", ["optimize", "rules"])
def test_no_cache_run_in_process_leaves_the_cache_switch_as_it_was(tmp_path, monkeypatch, command):
    """``--no-cache`` is the command's: the process's REWRITER_CACHE is given back after it."""
    from click.testing import CliRunner

    from rewriter.cli import cli

    monkeypatch.delenv("REWRITER_CACHE", raising=False)
    argv = [command, "--no-cache"]
    if command == "optimize":
        argv[1:1] = [str(MODELS / "convnet_bn.onnx"), "-o", str(tmp_path / "out.onnx"), "--quiet"]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 0, result.output
    assert "REWRITER_CACHE" not in os.environ
    monkeypatch.setenv("REWRITER_CACHE", "1")
    assert CliRunner().invoke(cli, argv).exit_code == 0
    assert os.environ["REWRITER_CACHE"] == "1"


def test_a_command_run_in_process_is_not_limited_below_what_the_process_maps_already(tmp_path):
    """The automatic ceiling is the run's allowance above what the process maps when the
    command starts: run in-process after other work (a test worker maps gigabytes), a
    ceiling of the fixed base alone was below the mapping and the run failed."""
    import mmap

    pytest.importorskip("resource")
    from click.testing import CliRunner

    from rewriter.cli import cli

    reserved = mmap.mmap(-1, 3 << 30)  # address space only: its pages are never touched
    try:
        argv = ["optimize", str(MODELS / "convnet_bn.onnx"), "-o", str(tmp_path / "o.onnx"), "--quiet"]
        result = CliRunner().invoke(cli, argv)
    finally:
        reserved.close()
    assert result.exit_code == 0, result.output
