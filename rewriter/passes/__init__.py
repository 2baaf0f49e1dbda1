"""Built-in passes a pack can run beside its rules (``builtin NAME`` in a .rules file).

They do what is not a pattern: whole-graph evaluation.  Each takes the graph's state (``GraphState``) and
the nodes changed since it last ran (None: look at the whole graph) and returns how many
nodes it removed.
"""

from __future__ import annotations

from collections.abc import Callable

from ..graph.model import GraphState
from .common_subexpressions import eliminate_common_subexpressions
from .constant_folding import fold_constants

BUILTINS: dict[str, Callable[[GraphState, list | None], int]] = {
    "constant_folding": fold_constants,
    "common_subexpression_elimination": eliminate_common_subexpressions,
}
