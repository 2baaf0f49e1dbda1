"""Try one rule at one candidate root and say how it fared: it would rewrite, the pattern
matched but the engine refused (and why), or the pattern did not match (the matcher's
deepest failure).

This is what the level runner does at a root (``LevelRunner._try``), without rewriting:
matches are tried in order, each first against the level's placement, then against the
engine's guarantees (``Rewriter.refusal``), and the first that passes both is the one that
would be applied.  ``explain`` reports it per root; ``verify`` counts the reasons over its
draws (verify/diagnose.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..expr.values import EvalFailure
from ..graph.view import NodeId
from ..match.matcher import Failure, Match, Matcher
from ..match.plan import CompiledRule
from ..rewrite.apply import Refused, Rewriter
from ..rewrite.fixpoint import MAX_REFUSALS_PER_ROOT

# why a level's placement refuses a match (LevelRunner.placement_refusal); None: it allows it
PlacementCheck = Callable[[CompiledRule, Match], Refused | None]


@dataclass
class RootOutcome:
    """How a rule fared at a root: ``match`` is the match that would be applied, or the
    first refused one (with ``refusal``); without a match, ``failure`` is the matcher's
    deepest failure (None when the search never started, e.g. no root check to blame)."""

    match: Match | None = None
    refusal: Refused | EvalFailure | None = None
    failure: Failure | None = None

    @property
    def applies(self) -> bool:
        return self.match is not None and self.refusal is None


def try_root(
    matcher: Matcher,
    rewriter: Rewriter,
    rule: CompiledRule,
    root: NodeId,
    placement: PlacementCheck | None = None,
) -> RootOutcome:
    """How ``rule`` fares at ``root`` (the graph is not changed, nor the fresh names it
    would give out).  ``matcher`` must record failures."""
    first: RootOutcome | None = None
    with rewriter.view.names.trial():
        for tried, match in enumerate(matcher.matches(rule, root)):
            why: Refused | EvalFailure | None = placement(rule, match) if placement is not None else None
            if why is None:
                why = rewriter.refusal(match)
            if why is None:
                return RootOutcome(match)
            if first is None:
                first = RootOutcome(match, why)
            if tried + 1 >= MAX_REFUSALS_PER_ROOT:  # (the level runner gives up there too)
                break
    return first if first is not None else RootOutcome(failure=matcher.last_failure)
