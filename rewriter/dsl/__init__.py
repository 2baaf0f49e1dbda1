"""The rule language: text -> checked, immutable ``Pack`` objects."""
from __future__ import annotations

from pathlib import Path

from ..errors import RuleError
from .ast import Pack, Rule
from .check import check_pack, check_rules
from .parse import parse_pack, parse_pack_file

_CACHE: dict[tuple[str, int, int], Pack] = {}


def _raise_first(errors: list[RuleError], text: str | None) -> None:
    if errors:
        first = errors[0]
        if text is not None and not first.snippet:
            from .parse import _snippet
            first.snippet = _snippet(text, first.line, first.column)
        raise first


def load_pack_text(text: str, file: str = "<rules>") -> Pack:
    """Parse and check a pack given as text; raises the first ``RuleError``."""
    pack = parse_pack(text, file)
    _raise_first(check_pack(pack), text)
    return pack


def load_pack(path: str | Path) -> Pack:
    """Parse and check a pack file, once per process (cached by path, size and mtime)."""
    path = Path(path)
    try:
        stat = path.stat()
    except OSError as err:
        raise RuleError(f"cannot read rules file: {err.strerror or err}", str(path)) from None
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _CACHE:
        pack = parse_pack_file(path)
        _raise_first(check_pack(pack), path.read_text(encoding="utf-8"))
        _CACHE[key] = pack
    return _CACHE[key]


def load_pack_checked(source: str | Path | Pack) -> tuple[Pack, dict[str, list[RuleError]]]:
    """A pack (a file, or one parsed already) with each rule's static problems, by rule
    name, instead of raising them: ``rewriter verify`` fails those rules and verifies the
    others.  Problems of the pack as a whole (a bad header, a rule defined twice) raise."""
    if isinstance(source, Pack):
        pack, text = source, None
    else:
        path = Path(source)
        pack = parse_pack_file(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = None
    pack_errors, by_rule = check_rules(pack)
    _raise_first(pack_errors, text)
    return pack, by_rule


__all__ = ["Pack", "Rule", "check_pack", "check_rules", "load_pack", "load_pack_checked",
           "load_pack_text", "parse_pack", "parse_pack_file"]
