"""Reading the text files a user names (rules packs, kernel tables), within a size bound.

Why this exists: ``Path.read_text`` reads whatever it is given to its end: ``/dev/zero``
until memory runs out, a FIFO until someone writes to it.  And the rule parser takes
about 10 s and 400 MB per MB of rules (a 50 MB file ran for minutes at 6 GB), so a file
past a size that no hand-written pack comes near (the bundled ones total 46 KB) is refused
before it is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_TEXT_BYTES = 512 << 10


class TextFileError(Exception):
    """Why a text file cannot be read (the caller turns it into its own error)."""


def read_text(path: str | os.PathLike, limit: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes."""
    path = Path(path)
    try:
        status = os.stat(path)  # before opening: opening a FIFO waits for a writer
        if stat.S_ISDIR(status.st_mode):
            raise TextFileError("is a directory")
        if not stat.S_ISREG(status.st_mode):
            raise TextFileError("is not a regular file")
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as err:
        raise TextFileError(err.strerror or str(err)) from None
    if len(data) > limit:
        raise TextFileError(f"larger than {limit >> 10} KB; split it into several files")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise TextFileError(f"not UTF-8 text (byte {err.start})") from None


def text_size(path: str | os.PathLike) -> int:
    """The size of a file (0 when it cannot be read: reading it will say why)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
