"""Checked packs kept on disk between runs, so that a run does not parse its packs again.

Why: parsing, expanding and checking the three bundled packs took 0.3-0.5 s of every
``rewriter`` run — 99% of the time on a small model (issue 21); reading them back from
JSON takes about 30 ms, and no lark.

What an entry depends on, all of it in its key (anything else changed: another entry):

* the pack's text (SHA-256) and its file name (positions and errors name the file);
* the code that turns text into a checked pack: rewriter's version and a hash of the
  sources of the rule language and the floors under it (``dsl``, ``expr``,
  ``onnx_facts``, the floor-0 modules it reads with) and of the grammar, so that an edited
  checkout never reads an entry an older parser wrote;
* what the checker reads outside that code: the installed onnx and onnxruntime (their op
  schemas), lark, Python's version, and the functions registered with
  ``register_predicate`` (names, arities and result kinds: a pack calling one checks only
  with it).

Only packs that passed the checker are stored; a pack with errors is parsed every time
(its errors are the point).  Nothing here depends on a model: compiled match plans hold
closures and are made per process (about 35 ms for the bundled packs' 121 rules).

Entries are JSON written by ``serial`` (never pickle) inside ``disk_cache``'s checked,
atomically written, size-bounded files; a damaged or crafted entry is ignored and the
pack parsed.  ``counts`` says what happened, for tests and measurements.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

from ..disk_cache import DiskCache, cache_root
from ..resources import grammar_text
from ..version import __version__
from . import ast as A
from . import serial

MAX_BYTES = 64 << 20  # the whole pack cache (the bundled packs take about 250 KB)
MAX_ENTRY_BYTES = 16 << 20  # a pack bigger than this as JSON is parsed every time

# "hit": read from disk; "miss": no usable entry; "rejected": an entry there failed its
# checks (also a miss); "stored": written after a parse
counts: Counter[str] = Counter()

_PACKAGE = Path(__file__).resolve().parent.parent
# the rule language and what it is made with: the floors under it
_SOURCES = ("dsl", "expr", "onnx_facts")
_TOP_LEVEL = ("errors.py", "text_files.py", "resources.py", "version.py")


def _store() -> DiskCache | None:
    root = cache_root()
    return None if root is None else DiskCache(root / "packs", MAX_BYTES, MAX_ENTRY_BYTES)


@lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    """A hash of the sources that make a checked pack out of text, and the grammar."""
    digest = hashlib.sha256(grammar_text().encode("utf-8"))
    files = [_PACKAGE / name for name in _TOP_LEVEL]
    files += sorted(p for room in _SOURCES for p in (_PACKAGE / room).rglob("*.py"))
    for path in files:
        digest.update(str(path.relative_to(_PACKAGE)).encode("utf-8") + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:  # (an install without sources: the version alone tells)
            digest.update(b"?")
        digest.update(b"\0")
    return digest.hexdigest()


def _installed_version(distribution: str, module: str) -> str:
    """A library's version, read from its installed metadata (no import: onnxruntime's costs
    75 ms); a build installed under another name (onnxruntime-gpu) is imported and asked."""
    import importlib.metadata

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        return f"{module} {__import__(module).__version__}"
    except Exception:  # not installed, or no version: the checker then knows its ops without it
        return "absent"


@lru_cache(maxsize=1)
def _library_versions() -> tuple[tuple[str, str], ...]:
    return tuple((name, _installed_version(name, name)) for name in ("onnx", "onnxruntime", "lark")) + (
        ("python", sys.version.split()[0]),
    )


def _functions() -> list[tuple[str, int, int | None, str]]:
    from ..expr.functions import FUNCTIONS

    return sorted((f.name, f.min_args, f.max_args, f.returns) for f in FUNCTIONS.values())


def cache_key(text: str, file: str) -> str:
    """Everything a checked pack of ``text`` read from ``file`` depends on, as one string."""
    return json.dumps(
        {
            # the serial form's version: 3 = `~` attribute patterns (an approximate Literal where
            # an AttrPattern's value was always an expression) and rules' doc comments (Rule.doc)
            "format": "pack-3",
            "rewriter": __version__,
            "code": _code_fingerprint(),
            "libraries": _library_versions(),
            "functions": _functions(),
            "file": file,
            "text": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
        },
        ensure_ascii=True,
        sort_keys=True,
    )


def load(text: str, file: str) -> A.Pack | None:
    """The checked pack of ``text`` (read from ``file``) from the cache, or None."""
    cache = _store()
    if cache is None:
        return None
    payload = cache.get(cache_key(text, file))
    if payload is None:
        counts["miss"] += 1
        return None
    try:
        pack = serial.decode(json.loads(payload), file)
    except (ValueError, RecursionError):  # (serial.NotAPack is a ValueError)
        counts["rejected"] += 1
        counts["miss"] += 1
        return None
    counts["hit"] += 1
    return pack


def level(text: str, file: str) -> int | None:
    """The level of the cached pack of ``text`` (read from ``file``) without building its
    rules, or None: the pipeline skips packs above the level it runs (building the bundled
    extended and layout packs was most of a basic run's reading)."""
    cache = _store()
    if cache is None:
        return None
    payload = cache.get(cache_key(text, file))
    if payload is None:
        return None
    try:
        return serial.pack_level(json.loads(payload))
    except (ValueError, RecursionError):
        return None


def store(text: str, file: str, pack: A.Pack) -> None:
    """Keep a pack that passed the checker for later runs (quietly nothing when it cannot be
    cached: the cache is off or unwritable, or the pack would not read back equal)."""
    cache = _store()
    if cache is None:
        return
    try:
        data = serial.encode(pack)
        payload = json.dumps(data, separators=(",", ":"), ensure_ascii=True).encode("ascii")
        back = serial.decode(json.loads(payload), file)
    except (ValueError, RecursionError):
        return
    if back != pack or serial.encode(back) != data:  # (positions' files are not compared by ==)
        return
    if cache.put(cache_key(text, file), payload):
        counts["stored"] += 1
