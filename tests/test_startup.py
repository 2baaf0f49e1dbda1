"""Start-up: ``rewriter --version`` and ``--help`` load no engine library, and ``check``
does not load the fuzzer.  Checked by the modules a fresh process ends up with, not by timing it (bench/startup.py
measures the times)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

_IMPORTED = """
import sys
from pathlib import Path
sys.argv = ["rewriter", *sys.argv[1:]]
from rewriter.cli import main
try:
    main()
except SystemExit:
    pass
print(" ".join(sorted({m.split(".")[0] for m in sys.modules})), file=sys.stderr)
"""


def imported_by(*args: str, env: dict | None = None) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORTED, *args], capture_output=True, text=True, timeout=300, env=env
    )
    return set(proc.stderr.strip().splitlines()[-1].split())


@pytest.mark.parametrize("args", [("--version",), ("--help",), ("optimize", "--help")])
def test_version_and_help_import_no_engine_library(args):
    heavy = {"onnx", "onnxruntime", "networkx", "numpy", "lark", "hypothesis", "rich"}
    assert not imported_by(*args) & heavy


def test_check_does_not_load_the_fuzzer():
    assert "hypothesis" not in imported_by("check", str(ROOT / "rules" / "basic.rules"))
