"""A JSON document written as a command's second output (``explain --json``, ``optimize
--json``, ``rules --json``): through the same output rules as a model — decided before any
work, written atomically (a temporary file renamed into place) or in place to a device or
FIFO, never over an input of the run — and never over the run's other outputs either (the
optimized model and its data file), whether or not they exist yet."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from ..errors import ModelError
from .output_file import OutputFile, Writing, output_file

WHAT = "JSON output"


def check_json_output(
    path: str | os.PathLike, protected: Iterable[os.stat_result] = (), outputs: Iterable[str | os.PathLike] = ()
) -> OutputFile:
    """Where ``path`` is written, or a ``ModelError``: it is an input (``protected``: their
    ``os.stat``), or it names one of ``outputs`` (the files the run writes besides it,
    compared by resolved path, as they may not exist yet; existing ones should be in
    ``protected`` too, which also catches hard links)."""
    target = output_file(path, protected, what=WHAT)
    if not target.in_place:
        mine = _spelled(target.destination)
        for other in outputs:
            if _spelled(Path(os.path.realpath(other))) == mine:
                raise ModelError(f"{path}: is an output of this run ({other}); the {WHAT} must be another file")
    return target


def write_json(
    document: object,
    path: str | os.PathLike,
    protected: Iterable[os.stat_result] = (),
    outputs: Iterable[str | os.PathLike] = (),
) -> None:
    """Write ``document`` (JSON-ready data) to ``path``, checked again as
    ``check_json_output`` does (a ``ModelError`` when it may not be written)."""
    target = check_json_output(path, protected, outputs)
    data = (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    try:
        with Writing(target) as out:
            out.write(data)
            out.commit()
    except OSError as err:
        raise ModelError(f"{path}: cannot write: {err.strerror or err}") from None


def _spelled(path: Path) -> str:
    """A path as compared: case folded (on a case-insensitive file system two spellings are
    one file; on others refusing a name that differs only in case costs nothing)."""
    return str(path).casefold()
