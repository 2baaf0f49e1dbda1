"""The grammar and the rule packs travel with the package."""

from __future__ import annotations

import re
import sysconfig
from pathlib import Path

import rewriter
from rewriter import resources


def test_bundled_packs_and_grammar_are_found():
    assert "start:" in resources.grammar_text()
    names = [p.name for p in resources.bundled_pack_paths()]
    assert "basic.rules" in names
    assert {p.level for p in rewriter.bundled_packs()} >= {1}


def test_an_installed_package_carries_its_own_grammar_and_rules():
    package_dir = Path(rewriter.__file__).resolve().parent
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    if site not in package_dir.parents:
        return  # running from a source checkout: resources come from the repository root
    assert (package_dir / "grammar" / "rules.lark").is_file()
    assert (package_dir / "rules" / "basic.rules").is_file()
    assert resources.rules_dir() == package_dir / "rules"


def test_the_version_is_pyprojects():
    """``rewriter --version`` and the pack cache's keys read rewriter/version.py (no
    importlib.metadata at start-up): it must say what pyproject.toml says."""
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    if not pyproject.is_file():
        return  # an installed package's tests: nothing to compare with
    declared = re.search(r'^version = "([^"]+)"', pyproject.read_text(encoding="utf-8"), re.M)
    assert declared is not None and declared.group(1) == rewriter.__version__
