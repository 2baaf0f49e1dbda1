"""Built-in passes a pack can run beside its rules (``builtin NAME`` in a .rules file).

They do what is not a pattern: whole-graph evaluation.  Each takes the graph's state
(``GraphState``) and the nodes changed since it last ran (None: look at the whole graph) and
returns how many nodes it removed.  Two of them also have a step done while the graph is
loaded (``load_hook``): the model state calls it without knowing which passes asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial

from ..graph.loaded_constants import LoadHook
from ..graph.state import GraphState
from .common_subexpressions import eliminate_common_subexpressions
from .constant_folding import LARGE_INPUT, fold_constants
from .on_load import take_constants

BUILTINS: dict[str, Callable[[GraphState, list | None], int]] = {
    "constant_folding": fold_constants,
    "common_subexpression_elimination": eliminate_common_subexpressions,
}


def load_hook(builtins: Iterable[str]) -> LoadHook | None:
    """The on-load step of the built-ins a run's levels 0-1 name: constant folding takes
    Constant nodes (and Identity nodes of constants) out; with common-subexpression
    elimination too, equal small constants are read as one.  None: load the graph as is."""
    names = set(builtins)
    if "constant_folding" not in names:
        return None
    return partial(
        _take_constants, max_identity_bytes=LARGE_INPUT, share_equal="common_subexpression_elimination" in names
    )


def _take_constants(graph, pool, max_identity_bytes: int, share_equal: bool):
    return take_constants(graph, max_identity_bytes, pool, share_equal=share_equal)
