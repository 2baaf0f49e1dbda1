"""Built-in passes a pack can run beside its rules (``builtin NAME`` in a .rules file).

They do what is not a pattern: whole-graph evaluation.  Each takes the ``ModelState`` and
the nodes changed since it last ran (None: look at the whole graph) and returns how many
nodes it removed.
"""

from __future__ import annotations

from collections.abc import Callable

from ..graph.model import ModelState
from .common_subexpressions import eliminate_common_subexpressions
from .constant_folding import fold_constants

BUILTINS: dict[str, Callable[[ModelState, list | None], int]] = {
    "constant_folding": fold_constants,
    "common_subexpression_elimination": eliminate_common_subexpressions,
}
