"""Locate the grammar and the bundled rule packs, installed or in a source checkout.

A wheel carries ``grammar/`` and ``rules/`` inside the package (see pyproject.toml); a source
checkout keeps them at the repository's top level.  Everything else asks this module.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def _resource_dir(name: str) -> Path:
    for candidate in (_PACKAGE_DIR / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"rewriter is missing its '{name}' directory (broken install?)")


@lru_cache(maxsize=1)
def grammar_text() -> str:
    """The Lark grammar of .rules files."""
    return (_resource_dir("grammar") / "rules.lark").read_text(encoding="utf-8")


def rules_dir() -> Path:
    """The directory of the rule packs shipped with rewriter."""
    return _resource_dir("rules")


def bundled_pack_paths() -> list[Path]:
    """Every shipped pack file, sorted by name for a stable order."""
    return sorted(rules_dir().glob("*.rules"))
