"""Start-up: ``rewriter --version`` and ``--help`` load no engine library, and a run whose
packs come from the cache (README.md, "Cache") loads neither the parser nor the fuzzer.
Checked by the modules a fresh process ends up with, not by timing it (bench/startup.py
measures the times)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import MODELS

import rewriter
from rewriter.disk_cache import CACHE_DIR_VARIABLE, CACHE_SWITCH_VARIABLE
from rewriter.dsl import forget_loaded

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


def warm_cache() -> dict:
    """The environment of a process whose bundled packs are all in the test run's cache
    (conftest.py): stored by this process if no test here stored them yet.  (A cold parse of
    the bundled packs takes seconds: these tests pay for it once, not in each process.)"""
    forget_loaded()
    rewriter.bundled_packs()
    env = dict(os.environ)
    env.pop(CACHE_SWITCH_VARIABLE, None)
    return env


def test_a_warm_run_imports_neither_the_parser_nor_the_fuzzer(tmp_path):
    cold = {**os.environ, CACHE_DIR_VARIABLE: str(tmp_path / "cache")}
    cold.pop(CACHE_SWITCH_VARIABLE, None)
    run = ("optimize", str(MODELS / "convnet_bn.onnx"), "-o", str(tmp_path / "o.onnx"), "-q", "--level")
    assert "lark" in imported_by(*run, "basic", env=cold)  # cold: parsed
    assert not imported_by(*run, "basic", env=cold) & {"lark", "hypothesis"}
    assert not imported_by(*run, "all", env=warm_cache()) & {"lark", "hypothesis"}


def test_check_and_rules_do_not_load_the_fuzzer(tmp_path):
    env = {**os.environ, CACHE_DIR_VARIABLE: str(tmp_path / "cache")}
    env.pop(CACHE_SWITCH_VARIABLE, None)
    assert "hypothesis" not in imported_by("check", str(ROOT / "rules" / "basic.rules"), env=env)
    assert not imported_by("rules", env=warm_cache()) & {"hypothesis", "lark"}
