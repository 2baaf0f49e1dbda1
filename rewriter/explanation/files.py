"""An explanation written as JSON, through the same output rules as a model: atomically
(a temporary file renamed into place), never over an input of the run."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

from ..errors import ModelError
from ..graph.output_file import Writing, output_file
from .model import Explanation


def check_json_output(path: str | os.PathLike, protected: Iterable[os.stat_result]) -> None:
    """Refuse, before any work, a JSON output that cannot be written or is an input."""
    output_file(path, protected, what="JSON output")


def write_json(explanation: Explanation, path: str | os.PathLike, protected: Iterable[os.stat_result] = ()) -> None:
    """Write ``explanation.to_json()`` to ``path`` (a ``ModelError`` when it may not be, or
    cannot be: the temporary file is removed and nothing replaced)."""
    target = output_file(path, protected, what="JSON output")
    data = (json.dumps(explanation.to_json(), indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    try:
        with Writing(target) as out:
            out.write(data)
            out.commit()
    except OSError as err:  # a full disk or device (/dev/full), a vanished directory: as for a model
        raise ModelError(f"{path}: cannot write: {err.strerror or err}") from None
