"""docs/tutorial.md runs: every ```console block's command is run in a copy of
docs/tutorial/, and what it prints is checked against the transcript, so the tutorial cannot
go stale.

Commands whose output is deterministic (``check``, ``explain``, ``optimize``, the model
script) must print exactly what the tutorial shows, times aside.  ``verify`` and what reads
its counterexample are checked line by line with the numbers masked: the verdicts, the
messages, the files and the report's structure must be the tutorial's, while the values a
shrunk counterexample holds may differ with the installation (hypothesis draws constants
from the installed modules)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rewriter.cli import cli

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = ROOT / "docs" / "tutorial.md"
FILES = ROOT / "docs" / "tutorial"

_TIME = re.compile(r"time: .*")
_SECONDS = re.compile(r"rules in [\d.]+ s")
_ARRAY = re.compile(r"\[[\d\s.,e+\-\[\]]*\]")  # a printed array (its nesting follows the shape)
_RULES = re.compile(r"([━─])\1+")
_SHRINK_BUDGET = re.compile(r" \(shrinking stopped at the [^)]*\)")
_NUMBER = re.compile(r"-?\d+(\.\d*)?(e[+-]?\d+)?")


def transcripts(text: str) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) of every ``$ `` line in the ```console blocks."""
    found = []
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.S):
        for part in re.split(r"\n\n(?=\$ )", block.strip("\n")):
            command, *expected = part.splitlines()
            assert command.startswith("$ "), command
            found.append((command[2:], expected))
    return found


def exact(line: str) -> str:
    """A line as compared exactly: trailing blanks and the run's times aside."""
    return _TIME.sub("time: ...", line.rstrip())


def masked(line: str) -> str:
    """A line with its numbers masked and its blanks collapsed (table cells are padded to
    the widest value).  An array and a number mask alike: whether a shrunk constant ends up
    a scalar or one element depends on the installation too (an editable install lends
    hypothesis the package's own constants, a wheel does not).  So does the note that
    shrinking ran out of its time budget: a loaded machine shrinks less in the same time."""
    line = _NUMBER.sub("#", _ARRAY.sub("#", exact(_SHRINK_BUDGET.sub("", line))))
    line = _RULES.sub(lambda run: run.group(0)[0], line)  # a table's rules are as wide as its cells
    return " ".join(line.split())


def run(command: str) -> tuple[int, list[str]]:
    """Run one tutorial command as a user's shell would, in the current directory: the exit
    code and what it printed (stdout and stderr as a terminal interleaves them)."""
    argv = shlex.split(command)
    if argv[0] == "rewriter":
        result = CliRunner().invoke(cli, argv[1:])
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result.exit_code, result.output.splitlines()
    if argv[0] == "python":
        proc = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, timeout=120)
        return proc.returncode, (proc.stdout + proc.stderr).splitlines()
    if argv[0] == "cat":
        return 0, Path(argv[1]).read_text(encoding="utf-8").splitlines()
    raise AssertionError(f"the tutorial runs a command this test does not know: {command}")


def deterministic(command: str) -> bool:
    """Whether the command's output is the same on every installation."""
    argv = shlex.split(command)
    # (optimize's table has each rule's milliseconds)
    return (
        argv[:2] not in (["rewriter", "verify"], ["rewriter", "optimize"])
        and argv[0] != "cat"
        and "show_counterexample.py" not in argv[1:2]
    )


def test_the_tutorial_runs_as_written(tmp_path, monkeypatch):
    for path in FILES.iterdir():
        if path.is_file():
            shutil.copy(path, tmp_path / path.name)
    monkeypatch.chdir(tmp_path)
    steps = transcripts(TUTORIAL.read_text(encoding="utf-8"))
    commands = [command for command, _ in steps]
    assert {c.split()[1] for c in commands if c.startswith("rewriter ")} >= {"check", "explain", "optimize", "verify"}
    for command, expected in steps:
        code, lines = run(command)
        wanted_code = 1 if any(line.startswith("FAIL ") for line in expected) else 0
        assert code == wanted_code, (command, lines)
        compare = exact if deterministic(command) else masked
        assert [compare(line) for line in lines] == [compare(line) for line in expected], command


def test_the_tutorial_shows_the_loop():
    """The steps the tutorial is about: no rule applied, explain naming the cause and the
    node, the fix applying, verify ok, and a wrong rule failing with its counterexample."""
    steps = dict(transcripts(TUTORIAL.read_text(encoding="utf-8")))
    first = steps["rewriter optimize mobile_head.onnx -o mobile_head.opt.onnx --rules hardswish_v1.rules"]
    assert first[0] == "no rule applied"
    why = steps["rewriter explain mobile_head.onnx --rules hardswish_v1.rules --rule HardSwishFusion"]
    assert why[1].startswith("✗ HardSwishFusion at 'relu6' (Clip): input 1 of 'scale' (Mul) is 'one_sixth'")
    fixed = steps["rewriter optimize mobile_head.onnx -o mobile_head.opt.onnx --rules hardswish.rules"]
    assert any(masked(line).startswith("│ HardSwishFusion │ # │ # │ # │") for line in fixed)
    assert any(masked(line) == "│ HardSwish │ # │ # │ +# │" for line in fixed)
    assert any(line.endswith("│ ok      │") for line in steps["rewriter verify hardswish.rules --examples 20 --seed 1"])
    wrong = steps["rewriter verify hardswish_opset13_wrong.rules --examples 20 --seed 1"]
    assert any(line.startswith("FAIL tutorial_opset13.HardSwishBeforeOpset14: output 'y' differs") for line in wrong)


def test_masking_keeps_words_and_structure():
    """The comparison of nondeterministic output must still see a changed verdict or message."""
    assert masked("│ a.R │    24 │ 0.9 │ ok      │") == masked("│ a.R │     3 │ 12.5 │ ok │")
    assert masked("│ a.R │ 24 │ ok │") != masked("│ a.R │ 24 │ FAIL │")
    assert masked("    before [[[[[0.275698]]]]]") == masked("    before [[0.1]]")
    assert masked("output 'y' differs") != masked("output 'z' differs")


@pytest.mark.slow
@pytest.mark.parametrize(
    "dropped, message",
    [
        (" and dtype(x) in [float, float16]", "NOT_IMPLEMENTED : Could not find an implementation for HardSigmoid"),
        ("rank(three) <= rank(x) and rank(sixth) <= rank(x) and ", "would change from rank"),
    ],
    ids=["dtype", "rank"],
)
def test_verify_finds_each_guard_of_the_fix_when_it_is_left_out(dropped, message, tmp_path, monkeypatch):
    """The tutorial says ``verify`` finds both of the fix's guards if left out."""
    text = (FILES / "hardswish.rules").read_text(encoding="utf-8")
    assert dropped in text
    (tmp_path / "careless.rules").write_text(text.replace(dropped, ""), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, lines = run("rewriter verify careless.rules --examples 50 --seed 1")
    assert code == 1 and any(line.startswith("FAIL tutorial.HardSwishFusion") and message in line for line in lines)
