"""A small, bounded directory of derived data that later processes may reuse.

What it promises, since a cache may only ever save time:

* **a whole entry or none.**  An entry is written to a temporary file in the same
  directory and renamed into place (``os.replace``), so a reader never sees a half-written
  one, however many processes write at once (the last rename wins; both are whole);
* **checked before use.**  An entry is a one-line JSON header — format, the full key, the
  payload's length and SHA-256 — and the payload.  A file that is truncated, damaged,
  written for another key, too large, not a regular file, or (where the OS has owners)
  owned by another user is ignored, as if absent;
* **bounded.**  After each write the least recently used entries (a hit refreshes an
  entry's modification time) are removed until the directory holds at most ``max_bytes``;
* **never an error.**  A directory that cannot be created, read or written, a full disk, a
  vanished entry: the cache misses and the caller does the work itself.

Where it lives: ``$REWRITER_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/rewriter`` (by
default ``~/.cache/rewriter``); ``REWRITER_CACHE=0`` turns it off.  The payload is opaque
bytes here; what is stored and how it is read back safely is the caller's business
(``dsl/pack_cache.py`` stores packs as JSON, never pickle).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from pathlib import Path

CACHE_DIR_VARIABLE = "REWRITER_CACHE_DIR"
CACHE_SWITCH_VARIABLE = "REWRITER_CACHE"  # "0", "off", "no" or "false": no cache

FORMAT = 1
ENTRY_SUFFIX = ".entry"
TEMP_PREFIX = ".tmp-"
MAX_HEADER_BYTES = 4096
STALE_TEMP_SECONDS = 3600  # a temporary file this old was left by a writer that died


def cache_root() -> Path | None:
    """The cache directory the environment asks for, or None when caching is off."""
    if os.environ.get(CACHE_SWITCH_VARIABLE, "").strip().lower() in ("0", "off", "no", "false"):
        return None
    chosen = os.environ.get(CACHE_DIR_VARIABLE)
    if chosen:
        return Path(chosen)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and Path(xdg).is_absolute():  # (the XDG spec: a relative path is to be ignored)
        return Path(xdg) / "rewriter"
    try:
        return Path.home() / ".cache" / "rewriter"
    except (RuntimeError, KeyError):  # no home directory to speak of: no cache
        return None


def _owned_by_us(info: os.stat_result) -> bool:
    geteuid = getattr(os, "geteuid", None)  # (none on Windows: no owners to compare)
    return geteuid is None or info.st_uid == geteuid()


class DiskCache:
    """Entries in ``directory`` (created on the first write, readable by its owner only)."""

    def __init__(self, directory: Path, max_bytes: int, max_entry_bytes: int) -> None:
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_entry_bytes

    def path(self, key: str) -> Path:
        """Where the entry of ``key`` lives (a hash of it: keys may be long)."""
        return self.directory / (hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:40] + ENTRY_SUFFIX)

    # ---- reading

    def get(self, key: str) -> bytes | None:
        """The payload stored under ``key``, or None (absent, or failing any check)."""
        path = self.path(key)
        raw = self._read(path)
        if raw is None:
            return None
        payload = _unwrap(raw, key)
        if payload is not None:
            try:  # recently used: the last to be evicted
                os.utime(path)
            except OSError:
                pass
        return payload

    def _read(self, path: Path) -> bytes | None:
        # O_NONBLOCK: a FIFO put in an entry's place must not hang the run; O_NOFOLLOW: nor
        # may a link lead elsewhere
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
        try:
            fd = os.open(path, flags)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            limit = self.max_entry_bytes + MAX_HEADER_BYTES
            if not stat.S_ISREG(info.st_mode) or info.st_size > limit or not _owned_by_us(info):
                return None
            chunks = []
            size = 0
            while size <= limit:  # (what fstat said, and one byte more: a file that grew is read to the limit)
                chunk = os.read(fd, min(max(info.st_size + 1 - size, 1 << 16), limit + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            return b"".join(chunks) if size <= limit else None
        except OSError:
            return None
        finally:
            os.close(fd)

    # ---- writing

    def put(self, key: str, payload: bytes) -> bool:
        """Store ``payload`` under ``key``; False when it could not be (nothing is raised)."""
        if len(payload) > self.max_entry_bytes:
            return False
        header = json.dumps(
            {"format": FORMAT, "key": key, "size": len(payload), "sha256": hashlib.sha256(payload).hexdigest()},
            ensure_ascii=True,
        ).encode("ascii")
        if len(header) >= MAX_HEADER_BYTES:
            return False
        temp: Path | None = None
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            temp = self.directory / f"{TEMP_PREFIX}{os.getpid()}-{time.monotonic_ns()}-{os.urandom(4).hex()}"
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(header + b"\n")
                out.write(payload)
            os.replace(temp, self.path(key))
            temp = None
        except OSError:
            return False
        finally:
            if temp is not None:  # (also when interrupted: no temporary file left behind)
                try:
                    temp.unlink()
                except OSError:
                    pass
        self._evict()
        return True

    def _evict(self) -> None:
        """Remove the least recently used entries past ``max_bytes``, and temporary files
        a writer that died left behind."""
        entries: list[tuple[int, str, int]] = []
        total = 0
        now = time.time()
        try:
            with os.scandir(self.directory) as found:
                for item in found:
                    try:
                        info = item.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if item.name.endswith(ENTRY_SUFFIX):
                        entries.append((info.st_mtime_ns, item.name, info.st_size))
                        total += info.st_size
                    elif item.name.startswith(TEMP_PREFIX) and now - info.st_mtime > STALE_TEMP_SECONDS:
                        _remove(self.directory / item.name)
        except OSError:
            return
        for _, name, size in sorted(entries):
            if total <= self.max_bytes:
                break
            _remove(self.directory / name)
            total -= size


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _unwrap(raw: bytes, key: str) -> bytes | None:
    """The payload of an entry's bytes when its header says it is whole and for ``key``."""
    end = raw.find(b"\n", 0, MAX_HEADER_BYTES)
    if end < 0:
        return None
    try:
        header = json.loads(raw[:end])
    except (ValueError, RecursionError):
        return None
    payload = raw[end + 1 :]
    if (
        not isinstance(header, dict)
        or header.get("format") != FORMAT
        or header.get("key") != key
        or header.get("size") != len(payload)
        or header.get("sha256") != hashlib.sha256(payload).hexdigest()
    ):
        return None
    return payload
