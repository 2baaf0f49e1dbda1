"""README.md tells a newcomer two commands; keep them true."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```\n(python3 -m venv [^\n]+)\n```", text)


def test_readme_gives_a_setup_and_a_test_command():
    commands = readme_commands()
    assert len(commands) == 2
    setup, test = commands
    assert "rewriter optimize examples/convnet_bn.onnx" in setup and "pytest" in test
    assert (ROOT / "examples" / "convnet_bn.onnx").is_file()


def test_ci_runs_the_readme_test_command():
    ci = ROOT / ".ci" / "run"
    if not ci.exists():
        pytest.skip("not a source checkout")
    assert readme_commands()[1] in ci.read_text(encoding="utf-8")
