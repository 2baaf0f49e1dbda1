"""Hostile input: malicious models, malicious rule files, odd output paths, signals, misuse.

Every case runs the command line in a subprocess under an address-space limit of 2 GB and
holds it to the promises in README.md: exit code 2 with exactly one line on stderr and no
traceback (or, where the input was valid, a correct result), and the directory it works
in holds the same files with the same contents afterwards (nothing replaced, nothing left
behind).
"""

from __future__ import annotations

import hashlib
import os
import resource
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import MODELS, model, tensor
from onnx import TensorProto, helper, numpy_helper

import rewriter

LIMIT = 2 << 30  # bytes of address space every case runs under
FAST = ("--no-bundled",)  # where only reading and writing are tested: no packs to parse


def slow(*values) -> object:
    """A parametrized case that runs with ``pytest -m slow`` only (each case is a process:
    the default run keeps a few of each kind)."""
    return pytest.param(*values, marks=pytest.mark.slow)


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def run_cli(*args, cwd: Path, timeout: int = 120, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rewriter", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_limit,
        **kwargs,
    )


def snapshot(directory: Path) -> dict[str, object]:
    """Every entry under ``directory``: its kind and, for a file, its content's hash."""
    found: dict[str, object] = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = Path(root) / name
            mode = path.lstat().st_mode
            if stat.S_ISREG(mode):
                found[str(path.relative_to(directory))] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                found[str(path.relative_to(directory))] = stat.S_IFMT(mode)
    return found


def assert_refused(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    """Exit 2, one line on stderr, no traceback, each fragment in that line."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in proc.stderr + proc.stdout
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def refused_untouched(tmp_path: Path, *args, fragments=(), **kwargs) -> str:
    """Run, expect a refusal, and check that no file under tmp_path changed."""
    before = snapshot(tmp_path)
    proc = run_cli(*args, cwd=tmp_path, **kwargs)
    assert_refused(proc, *fragments)
    assert snapshot(tmp_path) == before
    return proc.stderr


def small_model() -> onnx.ModelProto:
    w = numpy_helper.from_array(np.arange(2048, dtype=np.float32), "w")
    return model(
        [helper.make_node("Add", ["x", "w"], ["y"])], [tensor("x", shape=[2048])], [tensor("y", shape=[2048])], [w]
    )


@pytest.fixture
def work(tmp_path: Path) -> Path:
    onnx.save(small_model(), str(tmp_path / "in.onnx"))
    return tmp_path


# ------------------------------------------------------------------------ output paths


def test_output_to_a_character_device_is_written_in_place_never_replaced(work):
    proc = run_cli("optimize", "in.onnx", "-o", "/dev/null", "-q", *FAST, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert not [p for p in os.listdir("/dev") if p.startswith(".null.")]


def test_output_to_a_full_device_fails_cleanly_and_the_device_stays(work):
    refused_untouched(work, "optimize", "in.onnx", "-o", "/dev/full", "-q", *FAST, fragments=("No space left",))
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_json_explanation_to_a_full_device_fails_cleanly(work):
    # (it was an internal error: the write's OSError got past the command)
    args = ("explain", "in.onnx", "--level", "basic", "--json", "/dev/full")
    refused_untouched(work, *args, fragments=("/dev/full: cannot write: No space left",))
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


@pytest.mark.parametrize(
    "args",
    [("explain", "in.onnx", "--level", "basic"), ("optimize", "in.onnx", "-o", "out.onnx", *FAST)],
    ids=["explain", "optimize"],
)
def test_a_standard_output_that_cannot_be_written_is_one_line_exit_2(work, args):
    # a full device was an internal error (exit 1); a pipe whose reader left ended in rich's
    # silent exit 1.  Both are one line now, and nothing else is written or left.
    before = snapshot(work)
    command = [sys.executable, "-m", "rewriter", *args]
    with open("/dev/full", "w") as full:
        proc = subprocess.run(command, cwd=work, stdout=full, stderr=subprocess.PIPE, text=True, preexec_fn=_limit)
    proc.stdout = ""  # (it went to the device)
    assert_refused(proc, "cannot print: standard output failed (No space left on device)")
    child = subprocess.Popen(
        command, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_limit
    )
    assert child.stdout is not None
    child.stdout.close()  # the reader leaves before anything is printed
    _, stderr = child.communicate(timeout=120)
    assert_refused(subprocess.CompletedProcess(args, child.returncode, "", stderr), "standard output failed")
    if args[0] == "optimize":  # (the model is written before the report that failed)
        (work / "out.onnx").unlink()
    assert snapshot(work) == before


def test_paths_and_settings_that_look_like_rich_markup_are_printed_as_they_are(work):
    # `[/red]` in a directory name or a layer-assignment rule was a MarkupError (an internal
    # error, exit 1) once the report printed it
    folder = work / "[/red]"  # (a directory "red]" in a directory "[")
    folder.mkdir(parents=True)
    (folder / "in.onnx").write_bytes((MODELS / "convnet_bn.onnx").read_bytes())  # (a table is printed)
    args = ("optimize", "[/red]/in.onnx", "-o", "[/red]/out.onnx", "--level", "extended")
    proc = run_cli(*args, "--providers", "CUDA", "--layer-assignment", "gpu([/x])", cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert "[/red]/in.onnx -> [/red]/out.onnx" in proc.stdout and "gpu([/x])" in proc.stdout
    assert (folder / "out.onnx").is_file()


def test_output_to_a_fifo_nobody_reads_is_refused_not_a_hang(work):
    os.mkfifo(work / "pipe")
    refused_untouched(work, "optimize", "in.onnx", "-o", "pipe", *FAST, fragments=("FIFO",), timeout=60)
    assert stat.S_ISFIFO(os.stat(work / "pipe").st_mode)


def test_output_to_a_fifo_with_a_reader_streams_the_model(work):
    os.mkfifo(work / "pipe")
    received: list[bytes] = []
    proc = subprocess.Popen(
        [sys.executable, "-m", "rewriter", "optimize", "in.onnx", "-o", "pipe", "-q", *FAST],
        cwd=work,
        stderr=subprocess.PIPE,
        text=True,
    )
    reader = threading.Thread(target=lambda: received.append((work / "pipe").read_bytes()))
    reader.start()
    proc.wait(timeout=120)
    reader.join(timeout=60)
    assert proc.returncode == 0, proc.stderr.read()
    rewriter.check_model(onnx.load_from_string(received[0]), full_check=True)
    assert stat.S_ISFIFO(os.stat(work / "pipe").st_mode)


@pytest.mark.parametrize(
    "make_output",
    [
        lambda d: os.symlink("in.onnx", d / "link.onnx") or "link.onnx",  # symlink to the input
        lambda d: os.link(d / "in.onnx", d / "hard.onnx") or "hard.onnx",  # hard link to it
        slow(lambda d: "./in.onnx"),  # the input, spelled otherwise
        lambda d: (d / "sub").mkdir() or "sub/../in.onnx",  # through ..
        slow(lambda d: str((d / "in.onnx").resolve())),  # absolute
    ],
    ids=["symlink", "hardlink", "dot", "dotdot", "absolute"],
)
def test_output_that_is_the_input_is_refused(work, make_output):
    output = make_output(work)
    refused_untouched(work, "optimize", "in.onnx", "-o", output, *FAST, fragments=("is an input of this run",))


def test_output_that_is_a_rules_file_of_the_run_is_refused(work):
    (work / "mine.rules").write_text("pack m level 1\n")
    refused_untouched(
        work,
        "optimize",
        "in.onnx",
        "-o",
        "mine.rules",
        "--rules",
        "mine.rules",
        *FAST,
        fragments=("is an input of this run",),
    )


@pytest.mark.parametrize(
    "make_output, message",
    [
        (lambda d: (d / "out").mkdir() or "out", "is a directory"),
        (lambda d: os.symlink("nowhere.onnx", d / "dangling.onnx") or "dangling.onnx", "does not exist"),
        slow(lambda d: "missing/out.onnx", "does not exist"),
    ],
    ids=["directory", "dangling-symlink", "missing-directory"],
)
def test_output_that_cannot_be_a_model_file_is_refused(work, make_output, message):
    refused_untouched(work, "optimize", "in.onnx", "-o", make_output(work), *FAST, fragments=(message,))


def test_output_through_a_symlink_replaces_its_target_and_keeps_the_link(work):
    (work / "target.onnx").write_bytes(b"old")
    os.symlink("target.onnx", work / "link.onnx")
    proc = run_cli("optimize", "in.onnx", "-o", "link.onnx", "-q", *FAST, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert os.path.islink(work / "link.onnx")
    rewriter.check_model(str(work / "target.onnx"), full_check=True)
    assert sorted(os.listdir(work)) == ["in.onnx", "link.onnx", "target.onnx"]


# ------------------------------------------------------------------------ external data names


@pytest.mark.parametrize(
    "name", ["in.onnx", "out.onnx", "other.bin", "in.data", slow("link.bin"), slow("sub/x.bin"), slow(".."), slow(".")]
)
def test_external_data_file_that_is_not_this_runs_own_is_refused(tmp_path, name):
    onnx.save(small_model(), str(tmp_path / "in.onnx"), save_as_external_data=True, location="in.data")
    (tmp_path / "other.bin").write_bytes(b"someone else's")
    os.symlink("in.onnx", tmp_path / "link.bin")
    refused_untouched(
        tmp_path,
        "optimize",
        "in.onnx",
        "-o",
        "out.onnx",
        "--external-data",
        "always",
        "--external-data-file",
        name,
        *FAST,
    )


def test_external_data_file_of_the_output_being_replaced_is_written_again(work):
    for _ in range(2):  # the second run replaces the first one's model and data file
        proc = run_cli("optimize", "in.onnx", "-o", "out.onnx", "--external-data", "always", "-q", *FAST, cwd=work)
        assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(work)) == ["in.onnx", "out.onnx", "out.onnx.data"]
    rewriter.check_model(str(work / "out.onnx"), full_check=True)


# ------------------------------------------------------------------------ signals


SIGNAL_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    from rewriter.graph import output_file
    calls = []
    original = {target}

    def hook(*args, **kwargs):
        calls.append(1)
        if len(calls) == {at}:
            os.kill(os.getpid(), signal.{signal})
        return original(*args, **kwargs)

    {patch} = hook
    sys.argv = ["rewriter", "optimize", "in.onnx", "-o", "out.onnx", "--external-data", "always",
                "--external-data-threshold", "0", "-q", "--no-bundled"]
    from rewriter.cli import main
    main()
""")


@pytest.mark.parametrize("sig", ["SIGTERM", slow("SIGHUP"), slow("SIGINT")])
def test_a_signal_while_writing_leaves_no_temporary_file(work, sig):
    script = SIGNAL_SCRIPT.format(
        target="output_file.Writing.write", patch="output_file.Writing.write", at=3, signal=sig
    )
    before = snapshot(work)
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=work, capture_output=True, text=True, timeout=120, preexec_fn=_limit
    )
    assert_refused(proc, f"interrupted by {sig}")
    assert snapshot(work) == before


def test_a_signal_between_renaming_the_data_and_the_model_waits_for_both(work):
    script = SIGNAL_SCRIPT.format(target="os.replace", patch="output_file.os.replace", at=1, signal="SIGTERM")
    proc = subprocess.run(
        [sys.executable, "-c", "import os\n" + script],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit,
    )
    assert_refused(proc, "interrupted by SIGTERM")
    assert sorted(os.listdir(work)) == ["in.onnx", "out.onnx", "out.onnx.data"]  # both, consistent
    rewriter.check_model(str(work / "out.onnx"), full_check=True)


# ------------------------------------------------------------------------ rule files


def _rules(directory: Path, let: str, name: str = "h.rules") -> str:
    (directory / name).write_text(f"pack h level 1\nrule R {{ y = Add(x, w)\n  let k = {let}\n  => y = Sub(x, w) }}\n")
    return name


@pytest.mark.parametrize(
    "let",
    [
        "((((10**60)**60)**60)**60)",
        '"ab" * 10**9',
        slow("[0] * 10**8"),
        "reshape(arange(30000), [-1, 1]) * arange(30000)",
        "concat([zeros([10000000]), zeros([10000000]), zeros([10000000]), zeros([10000000])])",
        slow("arange(10**12)"),
        slow("full([2**20, 2**20], 1.0)"),
        slow("max(reshape(arange(20000), [-1, 1]), arange(20000))"),
        slow("list(zeros([100000000], int8))"),
        slow("pad_to(zeros([4]), 0, 10**10)"),
        "transpose(reshape(arange(50000), [1, -1])) @ reshape(arange(50000), [1, -1])",  # a 20 GB product
        slow("sum(ones([1500, 1500], int64) @ ones([1500, 1500], int64))"),  # 3.4 billion multiply-adds
    ],
)
def test_an_expression_past_its_budget_is_a_rule_error_at_its_position(work, let):
    rules = _rules(work, let)
    refused_untouched(
        work,
        "optimize",
        "in.onnx",
        "-o",
        "out.onnx",
        "--rules",
        rules,
        "--no-bundled",
        fragments=("h.rules:3:", "budget"),
    )


def test_an_expression_past_its_budget_is_a_rule_error_in_verify_too(work):
    rules = _rules(work, "((((10**60)**60)**60)**60)")
    refused_untouched(
        work, "verify", rules, "--examples", "3", "--out", work / "verify-out", fragments=("h.rules:3:", "budget")
    )


@pytest.mark.parametrize(
    "let, message",
    [
        ("[" * 5000 + "1" + "]" * 5000, "nested more than"),
        ("-" * 10000 + "1", "nested more than"),
        slow("1" + "+1" * 20000, "nested more than"),
        slow("2" + "**2" * 3000, "nested more than"),
        ("1" + "0" * 5000, "integer literal"),
    ],
)
def test_nesting_and_literals_past_their_bounds_are_rule_errors(work, let, message):
    rules = _rules(work, let)
    refused_untouched(
        work,
        "optimize",
        "in.onnx",
        "-o",
        "out.onnx",
        "--rules",
        rules,
        "--no-bundled",
        fragments=("h.rules:3:", message),
    )


@pytest.mark.parametrize(
    "make_rules",
    [
        lambda d: (d / "big.rules").write_text("pack h level 1\n" + "# padding\n" * 60000) and "big.rules",
        slow(lambda d: "/dev/zero"),
        lambda d: os.mkfifo(d / "fifo.rules") or "fifo.rules",
        slow(lambda d: (d / "bin.rules").write_bytes(b"\xff\xfe" * 10) and "bin.rules"),
    ],
    ids=["too-large", "device", "fifo", "not-utf8"],
)
def test_a_rules_file_that_cannot_be_a_pack_is_refused_unread(work, make_rules):
    refused_untouched(
        work,
        "optimize",
        "in.onnx",
        "-o",
        "out.onnx",
        "--rules",
        make_rules(work),
        fragments=("cannot read rules file",),
        timeout=60,
    )


def test_a_pack_that_grows_the_graph_stops_at_its_bound(work):
    (work / "grow.rules").write_text("pack g level 1\nrule Grow { y = Add(x, w) => y = Add(Neg(Neg(x)), w) }\n")
    refused_untouched(
        work,
        "optimize",
        "in.onnx",
        "-o",
        "out.onnx",
        "--rules",
        "grow.rules",
        "--no-bundled",
        "--max-rewrites",
        "100000",
        fragments=("grew the graph past its bound",),
    )


def test_max_rewrites_zero_reports_any_rewrite(work):
    (work / "one.rules").write_text("pack o level 1\nrule Once { y = Add(x, w) => y = Sub(x, Neg(w)) }\n")
    refused_untouched(
        work,
        "optimize",
        "in.onnx",
        "-o",
        "out.onnx",
        "--rules",
        "one.rules",
        "--no-bundled",
        "--max-rewrites",
        "0",
        fragments=("after 0 rewrites",),
    )


# ------------------------------------------------------------------------ models


def _save(directory: Path, m: onnx.ModelProto, name: str = "m.onnx") -> str:
    onnx.save(m, str(directory / name))
    return name


def _int64(name: str, values) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def _amplifying_models() -> dict[str, onnx.ModelProto]:
    x = [tensor("x", shape=[1])]
    y = [tensor("y", shape=None)]
    one = numpy_helper.from_array(np.ones((1, 1), np.float32), "one")
    doubling = [helper.make_node("Concat", [f"c{i}", f"c{i}"], [f"c{i + 1}"], axis=0) for i in range(24)]
    return {
        "constant-of-shape": model(
            [helper.make_node("ConstantOfShape", ["s"], ["c"]), helper.make_node("Add", ["x", "c"], ["y"])],
            x,
            y,
            [_int64("s", [2**40])],
        ),
        "expand": model(
            [helper.make_node("Expand", ["one", "t"], ["e"]), helper.make_node("Add", ["x", "e"], ["y"])],
            x,
            y,
            [one, _int64("t", [20000, 20000])],
        ),
        "range": model(
            [
                helper.make_node("Range", ["a", "b", "c"], ["r"]),
                helper.make_node("Cast", ["r"], ["f"], to=1),
                helper.make_node("Add", ["x", "f"], ["y"]),
            ],
            x,
            y,
            [_int64("a", 0), _int64("b", 2**40), _int64("c", 1)],
        ),
        "tile": model(
            [helper.make_node("Tile", ["one", "t"], ["e"]), helper.make_node("Add", ["x", "e"], ["y"])],
            x,
            y,
            [one, _int64("t", [40000, 40000])],
        ),
        "pad": model(
            [helper.make_node("Pad", ["one", "p"], ["e"]), helper.make_node("Add", ["x", "e"], ["y"])],
            x,
            y,
            [one, _int64("p", [0, 0, 40000, 40000])],
        ),
        "concat-doubling": model(
            doubling + [helper.make_node("Add", ["x", "c24"], ["y"])],
            x,
            y,
            [numpy_helper.from_array(np.ones(4, np.float32), "c0")],
        ),
        "declared-huge-input": model(
            [
                helper.make_node("Shape", ["z"], ["s"]),
                helper.make_node("Range", ["zero", "n", "step"], ["r"]),
                helper.make_node("Gather", ["s", "zero"], ["n"]),
                helper.make_node("Add", ["r", "r"], ["y"]),
            ],
            [tensor("z", shape=[2**31])],
            [tensor("y", TensorProto.INT64, None)],
            [_int64("zero", 0), _int64("step", 1)],
        ),
    }


@pytest.mark.parametrize(
    "name", [n if n in ("constant-of-shape", "expand", "concat-doubling") else slow(n) for n in _amplifying_models()]
)
def test_a_tiny_model_that_describes_huge_tensors_is_optimized_in_bounded_memory(tmp_path, name):
    m = _amplifying_models()[name]
    source = _save(tmp_path, m)
    assert (tmp_path / source).stat().st_size < 1024
    (tmp_path / "fold.rules").write_text("pack fold level 1\nbuiltin constant_folding\n")
    proc = run_cli(
        "optimize", source, "-o", "out.onnx", "-q", "--no-bundled", "--rules", "fold.rules", cwd=tmp_path, timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out.onnx"
    assert out.stat().st_size < 100 << 20  # nothing huge was folded into it
    assert [o.name for o in onnx.load(str(out)).graph.output] == [o.name for o in m.graph.output]


def _malformed_models() -> dict[str, tuple[onnx.ModelProto, str]]:
    bad_type = small_model()
    bad_type.graph.initializer[0].data_type = 99
    bad_elem = small_model()
    bad_elem.graph.input[0].type.tensor_type.elem_type = 77
    bad_constant = model(
        [
            helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", 1, [4], [1.0] * 4)),
            helper.make_node("Add", ["x", "c"], ["y"]),
        ],
        [tensor("x", shape=[4])],
        [tensor("y", shape=[4])],
    )
    bad_constant.graph.node[0].attribute[0].t.data_type = 1234
    newline = small_model()
    newline.graph.node.append(helper.make_node("Relu", ["y"], ["z"], name="a\nb"))
    newline.graph.node.append(helper.make_node("Relu", ["z"], ["q"], name="a\nb"))
    return {
        "unknown-data-type": (bad_type, "data type 99"),
        "unknown-element-type": (bad_elem, "element type 77"),
        "unknown-constant-type": (bad_constant, "data type 1234"),
        "newline-in-a-name": (newline, "two nodes are named 'a\\nb'"),
    }


@pytest.mark.parametrize("name", [n if n != "unknown-element-type" else slow(n) for n in _malformed_models()])
def test_a_malformed_model_is_refused_in_one_line(tmp_path, name):
    m, message = _malformed_models()[name]
    source = _save(tmp_path, m)
    refused_untouched(tmp_path, "optimize", source, "-o", "out.onnx", fragments=(message,))


def _external(tmp_path: Path, entries: list[dict[str, str]], data: bytes = b"\0" * 64) -> str:
    tensors = []
    for k, entry in enumerate(entries):
        t = numpy_helper.from_array(np.zeros(4, np.float32), f"w{k}")
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        for key, value in entry.items():
            t.external_data.add(key=key, value=value)
        tensors.append(t)
    nodes = [helper.make_node("Add", ["x", f"w{k}"], [f"y{k}"]) for k in range(len(entries))]
    m = model(nodes, [tensor("x", shape=[4])], [tensor(f"y{k}", shape=[4]) for k in range(len(entries))], tensors)
    (tmp_path / "w.bin").write_bytes(data)
    return _save(tmp_path, m)


@pytest.mark.parametrize(
    "entries, message",
    [
        (
            [
                {"location": "w.bin", "offset": "0", "length": "16"},
                {"location": "w.bin", "offset": "8", "length": "16"},
            ],
            "read the same bytes",
        ),
        ([{"location": "w.bin", "offset": "60", "length": "16"}], "which has 64"),
        slow([{"location": "w.bin", "offset": "-4", "length": "16"}], "which has 64"),
        ([{"location": "w.bin", "offset": "0", "length": "32"}], "needs 16"),
        slow([{"location": "w.bin", "offset": "x"}], "not a number"),
        slow([{"location": "/dev/zero", "length": "16"}], "outside the model's directory"),
    ]
    + [([{"location": "w.bin", "offset": "0", "length": "16"}] * 1000, "read the same bytes")],
    ids=["overlap", "past-the-end", "negative", "wrong-length", "not-a-number", "device", "thousand-aliases"],
)
def test_external_data_regions_are_checked_before_anything_is_read(tmp_path, entries, message):
    source = _external(tmp_path, entries)
    refused_untouched(tmp_path, "optimize", source, "-o", "out.onnx", fragments=(message,))


@pytest.mark.parametrize(
    "make_model, message",
    [
        (lambda d: os.mkfifo(d / "m.onnx") or "m.onnx", "not a regular file"),
        slow(lambda d: "/dev/zero", "not a regular file"),
        (
            lambda d: (d / "m.onnx").write_bytes(_deeply_nested_model_bytes(300)) and "m.onnx",
            "not a readable ONNX model",
        ),
    ],
    ids=["fifo", "device", "nested-300-deep"],
)
def test_a_model_file_that_cannot_be_read_is_refused(tmp_path, make_model, message):
    refused_untouched(tmp_path, "optimize", make_model(tmp_path), "-o", "out.onnx", fragments=(message,), timeout=60)


def _deeply_nested_model_bytes(depth: int) -> bytes:
    """Wire bytes of If nodes nested ``depth`` deep (onnx.helper cannot build one)."""
    from rewriter.graph.wire import varint

    def field(number: int, data: bytes) -> bytes:
        return varint(number << 3 | 2) + varint(len(data)) + data

    graph = field(1, field(1, b"x") + field(2, b"y") + field(4, b"Relu"))
    for d in range(depth):
        attribute = field(1, b"then_branch") + varint(20 << 3) + varint(5) + field(6, graph)
        graph = field(1, field(2, b"o%d" % d) + field(4, b"If") + field(5, attribute))
    return varint(1 << 3) + varint(8) + field(7, graph) + field(8, varint(2 << 3) + varint(17))


def test_a_model_reading_a_sparse_initializer_is_optimized(tmp_path):
    values = numpy_helper.from_array(np.array([1.0], np.float32), "sp")
    sparse = helper.make_sparse_tensor(values, numpy_helper.from_array(np.array([1], np.int64), "sp_idx"), [2])
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["i"]), helper.make_node("Add", ["i", "sp"], ["y"])],
        "g",
        [tensor("x", shape=[2])],
        [tensor("y", shape=[2])],
    )
    graph.sparse_initializer.append(sparse)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    source = _save(tmp_path, m)
    proc = run_cli("optimize", source, "-o", "out.onnx", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = onnx.load(str(tmp_path / "out.onnx"))
    assert [n.op_type for n in out.graph.node] == ["Add"] and len(out.graph.sparse_initializer) == 1
    x = np.array([3.0, 4.0], np.float32)
    got = ort.InferenceSession(str(tmp_path / "out.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_array_equal(got[0], [3.0, 5.0])


# ------------------------------------------------------------------------ command-line misuse


@pytest.mark.parametrize(
    "args, message",
    [
        (["verify", "--examples", "-3"], "--examples"),
        (["verify", "--out", "in.onnx", "--rule", "IdentityElimination"], "is not a directory"),
        (["optimize", "in.onnx", "-o", "out.onnx", "--max-rewrites", "-1"], "--max-rewrites"),
        slow(["optimize", "in.onnx", "-o", "out.onnx", "--max-memory", "lots"], "--max-memory"),
        slow(["optimize", "in.onnx", "-o", "out.onnx", "--no-such-option"], "no-such-option"),
        slow(["optimize", "in.onnx"], "-o"),
        slow(["optimize", "in.onnx", "-o", "out.onnx", "--level", "9"], "out of range"),
        (["optimize", "in.onnx", "-o", "out.onnx", "--max-memory", "100M"], "out of memory"),
    ],
)
def test_command_line_misuse_is_one_line_exit_2(work, args, message):
    refused_untouched(work, *args, fragments=(message,))
