"""The grammar and the rule packs travel with the package."""

from __future__ import annotations

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
