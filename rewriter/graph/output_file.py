"""Where a file the engine writes goes, decided once, before anything is written.

Every output (a model, its external data file) is written through ``OutputFile``:

* a regular file, or a name that does not exist yet, is written to a temporary file beside
  it and renamed over it only once complete (a symbolic link is followed: its target is
  replaced, the link stays);
* a character device or a FIFO (``/dev/null``, a pipe) is written in place, as a stream:
  renaming a file over it would replace the device (as root, ``-o /dev/null`` did);
* anything else that exists (a directory, a block device, a socket) is refused;
* a file the run must not touch (the input model and its data files) is refused, however
  it is named (symbolic links, ``..``, hard links: files are compared by device and inode).

The temporary file is registered for removal before it is created, so that an interruption
at any point (see ``signals.py``) leaves nothing behind.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..errors import ModelError


@dataclass(frozen=True)
class OutputFile:
    """One file to write: ``destination`` is the file that ends up holding the data."""

    given: Path  # as the user named it (for messages)
    destination: Path  # symbolic links resolved
    in_place: bool  # a device or FIFO: written as a stream, never replaced
    exists: bool
    status: os.stat_result | None  # of the existing file

    @property
    def directory(self) -> Path:
        return self.destination.parent


def output_file(path: str | os.PathLike, protected: Iterable[os.stat_result] = (), what: str = "output") -> OutputFile:
    """Decide how ``path`` is written (see the module docstring), or raise ``ModelError``."""
    given = Path(path)
    if not str(given) or given.name in ("", ".", ".."):
        raise ModelError(f"{given}: the {what} must name a file")
    try:
        status = os.stat(given)  # follows symbolic links
    except FileNotFoundError:
        status = None
    except OSError as err:
        raise ModelError(f"{given}: cannot use as the {what}: {err.strerror or err}") from None
    if status is None:
        if os.path.islink(given):
            raise ModelError(f"{given}: is a symbolic link to a file that does not exist")
        directory = Path(os.path.realpath(given.parent if str(given.parent) else "."))
        if not directory.is_dir():
            raise ModelError(f"{given}: directory {given.parent} does not exist")
        return OutputFile(given, directory / given.name, False, False, None)
    for other in protected:
        if os.path.samestat(status, other):
            raise ModelError(
                f"{given}: is an input of this run (the model, one of its data "
                f"files, a rules or kernels file); the {what} must be another file"
            )
    mode = status.st_mode
    if stat.S_ISREG(mode):
        return OutputFile(given, Path(os.path.realpath(given)), False, True, status)
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return OutputFile(given, given, True, True, status)
    kind = (
        "a directory"
        if stat.S_ISDIR(mode)
        else "a block device"
        if stat.S_ISBLK(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "not a regular file"
    )
    raise ModelError(f"{given}: is {kind}; the {what} must be a file")


class Writing:
    """The open stream of an ``OutputFile`` while it is written; ``commit`` puts it in place.

    Use as a context manager: leaving it without a commit (an error, an interruption)
    removes the temporary file."""

    def __init__(self, target: OutputFile) -> None:
        self.target = target
        self.temporary: str | None = None
        self.handle: BinaryIO | None = None

    def __enter__(self) -> Writing:
        target = self.target
        if target.in_place:
            self.handle = _open_stream(target.given)
            return self
        prefix = target.destination.name[:64]
        self.temporary = str(target.directory / f".{prefix}.{secrets.token_hex(6)}.tmp")
        # registered above before it exists: an interruption from here on removes it
        fd = os.open(self.temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        self.handle = os.fdopen(fd, "wb")
        return self

    def write(self, data: bytes) -> None:
        self._open_handle().write(data)

    def tell(self) -> int:
        return self._open_handle().tell()

    def _open_handle(self) -> BinaryIO:
        if self.handle is None:
            raise ValueError("I/O operation on a finished or unopened output")
        return self.handle

    def finish(self) -> None:
        """Flush and close the stream (a full disk shows here, before anything is renamed)."""
        handle, self.handle = self.handle, None
        if handle is not None:
            handle.close()

    def commit(self) -> None:
        """Rename the finished temporary file over the destination (a stream: nothing)."""
        self.finish()
        if self.temporary is not None:
            os.chmod(self.temporary, _file_mode(self.target))
            os.replace(self.temporary, self.target.destination)
            self.temporary = None

    def __exit__(self, *exc) -> None:
        handle, self.handle = self.handle, None
        try:
            if handle is not None:
                handle.close()
        except OSError:
            pass
        finally:
            if self.temporary is not None:
                try:
                    os.unlink(self.temporary)
                except FileNotFoundError:
                    pass
                self.temporary = None


def _open_stream(path: Path) -> BinaryIO:
    """A device or FIFO opened for writing; a FIFO nobody reads is an error, not a hang."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as err:
        if err.errno == errno.ENXIO:
            raise ModelError(f"{path}: is a FIFO that no process is reading") from None
        raise
    os.set_blocking(fd, True)  # (opened without blocking only to find a FIFO's reader)
    return os.fdopen(fd, "wb")


def _file_mode(target: OutputFile) -> int:
    """The replaced file's mode, or what a plain open() would give (mkstemp's 0600 would
    surprise)."""
    if target.status is not None:
        return target.status.st_mode & 0o7777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def file_status(paths: Iterable[str | os.PathLike]) -> list[os.stat_result]:
    """``os.stat`` of each path that exists (what ``output_file`` compares against)."""
    found = []
    for path in paths:
        try:
            found.append(os.stat(path))
        except OSError:
            continue
    return found
