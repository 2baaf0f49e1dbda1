"""The rule language: text -> checked, immutable ``Pack`` objects.

The parser (lark) and the checker are imported when a pack has to be parsed, not with this
package: a pack found in the disk cache (``pack_cache.py``) needs neither, and the matcher
and the rewriter import this package for the rule classes alone.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import RuleError, expect
from ..text_files import MAX_TEXT_BYTES, TextFileError, read_text
from . import pack_cache
from .ast import Pack, Rule

if TYPE_CHECKING:
    from .check import check_pack, check_rules
    from .parse import parse_pack, parse_pack_file

_LOADED: dict[tuple[str, int, int], Pack] = {}  # packs loaded by this process


def _raise_first(errors: list[RuleError], text: str | None) -> None:
    if errors:
        from .parse import snippet

        first = errors[0]
        if text is not None and not first.snippet:
            first.snippet = snippet(text, first.line, first.column)
        raise first


def _parse_and_check(text: str, file: str) -> Pack:
    from .check import check_pack
    from .parse import parse_pack

    pack = parse_pack(text, file)
    _raise_first(check_pack(pack), text)
    return pack


def load_pack_text(text: str, file: str = "<rules>") -> Pack:
    """Parse and check a pack given as text; raises the first ``RuleError``."""
    expect(text, str, "load_pack_text()'s text")
    expect(file, str, "load_pack_text()'s file name")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES:
        raise RuleError(f"rules text larger than {MAX_TEXT_BYTES >> 10} KB; split it into several packs", file, 0, 0)
    return _parse_and_check(text, file)


def _loaded_key(path: Path) -> tuple[str, int, int]:
    try:
        stat = path.stat()
    except OSError as err:
        raise RuleError(f"cannot read rules file: {err.strerror or err}", str(path)) from None
    return (str(path.resolve()), stat.st_mtime_ns, stat.st_size)


def _read(path: Path) -> str:
    try:
        return read_text(path)
    except TextFileError as err:
        raise RuleError(f"cannot read rules file: {err}", str(path), 0, 0) from None


def load_pack(path: str | Path) -> Pack:
    """Parse and check a pack file, once per process (remembered by path, size and mtime),
    and across processes through the disk cache (by content: ``pack_cache.py``)."""
    expect(path, (str, os.PathLike), "load_pack()'s path")
    path = Path(path)
    key = _loaded_key(path)
    if key not in _LOADED:
        text = _read(path)
        pack = pack_cache.load(text, str(path))
        if pack is None:
            pack = _parse_and_check(text, str(path))
            pack_cache.store(text, str(path), pack)
        _LOADED[key] = pack
    return _LOADED[key]


# the grammar's header (grammar/rules.lark: ``header``), after comments and blank space
_HEADER = re.compile(r"pack\s+[A-Za-z_][A-Za-z0-9_]*\s+level\s+([0-9]+)(?![A-Za-z0-9_])")
_COMMENT = re.compile(r"#[^\n]*")


def declared_level(text: str) -> int | None:
    """The level a pack's header declares, read from the text without parsing it (None when
    the text does not start with a header this pattern reads: the parser decides then)."""
    found = _HEADER.match(_COMMENT.sub("", text[:4096]).lstrip())
    return int(found.group(1)) if found else None


def pack_level(path: str | Path) -> int:
    """The level a pack file declares, read from its header without building its rules (a
    run skips the packs above its level: a cold run at the basic level parsed the extended
    pack for seconds only to learn it was level 2), else from the disk cache, else by
    loading it.  A pack the run skips is not checked past its header."""
    expect(path, (str, os.PathLike), "pack_level()'s path")
    path = Path(path)
    loaded = _LOADED.get(_loaded_key(path))
    if loaded is not None:
        return loaded.level
    text = _read(path)
    level = declared_level(text)
    if level is None:
        level = pack_cache.level(text, str(path))
    return level if level is not None else load_pack(path).level


def forget_loaded() -> None:
    """Forget the packs this process loaded, so that the next ``load_pack`` reads its file
    again (and asks the disk cache): for tests and long-lived processes."""
    _LOADED.clear()


def load_pack_checked(source: str | Path | Pack) -> tuple[Pack, dict[str, list[RuleError]]]:
    """A pack (a file, or one parsed already) with each rule's static problems, by rule
    name, instead of raising them: ``rewriter verify`` fails those rules and verifies the
    others.  Problems of the pack as a whole (a bad header, a rule defined twice) raise."""
    from .check import check_rules
    from .parse import parse_pack

    if isinstance(source, Pack):
        pack, text = source, None
    else:
        expect(source, (str, os.PathLike), "load_pack_checked()'s source")
        try:
            text = read_text(Path(source))
        except TextFileError as err:
            raise RuleError(f"cannot read rules file: {err}", str(source), 0, 0) from None
        pack = parse_pack(text, str(source))
    pack_errors, by_rule = check_rules(pack)
    _raise_first(pack_errors, text)
    return pack, by_rule


def __getattr__(name: str) -> Any:
    """The parser's and the checker's entry points, imported on first use."""
    if name in ("check_pack", "check_rules"):
        from . import check

        return getattr(check, name)
    if name in ("parse_pack", "parse_pack_file"):
        from . import parse

        return getattr(parse, name)
    raise AttributeError(f"module 'rewriter.dsl' has no attribute '{name}'")


__all__ = [
    "Pack",
    "Rule",
    "check_pack",
    "check_rules",
    "declared_level",
    "forget_loaded",
    "load_pack",
    "load_pack_checked",
    "load_pack_text",
    "pack_level",
    "parse_pack",
    "parse_pack_file",
]
