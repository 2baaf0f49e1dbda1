"""What ``explain`` reports, as plain data: one ``Attempt`` per rule and candidate root,
each with its outcome, how much of the pattern it bound (which equation to which node) and
the first thing that failed (a ``Cause``).

Everything here is names and text, nothing of the graph: an explanation outlives the run
that made it, is compared in tests and written as JSON (``to_json`` / ``from_json`` round
trip exactly).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

# how a rule fared at a root: it would rewrite there; the pattern matched but the engine
# (a guarantee, the placement, the kernels) refused; or the pattern did not match
Outcome = Literal["applies", "refused", "no match"]
OUTCOMES: tuple[Outcome, ...] = ("applies", "refused", "no match")

# what a cause can be.  The pattern's own checks: "root" (a neighbour the root must have),
# "root op" (a node asked for with --node is not of the rule's root op), "op" (a node of
# another op where the pattern goes on), "link" (a value with no producer or no reader where
# the pattern needs one), "input", "attribute", "where", "let", "budget" (too many candidate
# bindings).  The engine's refusals after a match (rewrite/apply.py REFUSAL_KINDS):
# "graph output", "read outside", "attribute" (a deleted node's attribute the rule does not
# account for), "opset", "types", "kernel", "alias", "placement", "guarantee" (another), and
# "expression" (the replacement could not be computed).
CAUSE_KINDS = (
    "root",
    "root op",
    "op",
    "link",
    "input",
    "attribute",
    "where",
    "let",
    "budget",
    "graph output",
    "read outside",
    "opset",
    "types",
    "kernel",
    "alias",
    "placement",
    "guarantee",
    "expression",
)


@dataclass(frozen=True)
class Binding:
    """One equation of the pattern and what it bound: ``state`` is "bound" (to ``node``),
    "failed" (``node`` is where the first failure was found) or "not reached"."""

    equation: str  # the equation as rule text, nested calls as their own ($1 = ...)
    line: int  # its line in the rules file
    state: Literal["bound", "failed", "not reached"]
    node: str | None = None  # the node's name
    op: str | None = None  # the node's op, with its domain when not ONNX's (com.microsoft.Gelu)


@dataclass(frozen=True)
class Cause:
    """The first thing that failed: ``message`` is one line naming the node (``node``) and
    what differed; ``details`` what it saw (the values a ``where`` read, the value that
    arrived instead of a constant...), ``hint`` what would usually help."""

    kind: str  # one of CAUSE_KINDS
    message: str
    node: str | None = None
    details: tuple[str, ...] = ()
    hint: str = ""


@dataclass(frozen=True)
class Attempt:
    """One rule tried at one candidate root, as the graph was when the rule's level ran."""

    rule: str
    pack: str
    level: int
    root: str  # the candidate root node's name
    root_op: str
    outcome: Outcome
    matched: int  # equations bound to nodes (all of them when it applies or was refused)
    equations: int  # equations in the pattern
    cause: Cause | None  # None when it applies
    bindings: tuple[Binding, ...] = ()
    graph: str = ""  # "" for the main graph, else "subgraph 'NAME'" or "function 'NAME'"

    @property
    def closeness(self) -> tuple[int, float, int]:
        """How close the rule came (bigger is closer): refused matches first, then the
        share of the pattern bound, then the number of equations bound."""
        complete = self.outcome != "no match"
        return (int(complete), self.matched / max(self.equations, 1), self.matched)


@dataclass(frozen=True)
class Note:
    """Something said once rather than per root: a rule with no candidate root in the graph,
    a node asked for that is not there when the level runs."""

    message: str
    rule: str | None = None
    level: int | None = None


@dataclass
class Explanation:
    """Why the rules did or did not apply: ``attempts`` most useful first (refused matches,
    then partial matches by how much they bound; the attempts that apply last), ``notes``
    for what had no attempt.  ``level`` is the level run up to, ``providers`` the execution
    providers partitioning used (empty when no level >= 2 ran)."""

    level: int
    providers: list[str] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)

    def for_rule(self, rule: str) -> list[Attempt]:
        return [a for a in self.attempts if a.rule == rule]

    def applying(self) -> list[Attempt]:
        return [a for a in self.attempts if a.outcome == "applies"]

    def not_applying(self) -> list[Attempt]:
        return [a for a in self.attempts if a.outcome != "applies"]

    def to_json(self) -> dict:
        """A JSON-ready dictionary (``json.dump`` it; lists, not tuples); ``from_json``
        reads it back."""
        return {key: _lists(value) for key, value in asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict) -> Explanation:
        attempts = []
        for item in data.get("attempts", ()):
            cause = item.get("cause")
            attempts.append(
                Attempt(
                    **{k: v for k, v in item.items() if k not in ("cause", "bindings")},
                    cause=None if cause is None else Cause(**{**cause, "details": tuple(cause.get("details", ()))}),
                    bindings=tuple(Binding(**b) for b in item.get("bindings", ())),
                )
            )
        return cls(
            level=data["level"],
            providers=list(data.get("providers", ())),
            attempts=attempts,
            notes=[Note(**n) for n in data.get("notes", ())],
        )


def _lists(value: object) -> object:
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_lists(v) for v in value]
    return value


def ordered(attempts: list[Attempt]) -> list[Attempt]:
    """Most useful first: the closest non-matches (refused, then by how much they bound),
    then the attempts that apply; ties in the order they were made (rule order, graph
    order)."""
    misses = [a for a in attempts if a.outcome != "applies"]
    misses.sort(key=lambda a: a.closeness, reverse=True)  # (stable: ties keep their order)
    return misses + [a for a in attempts if a.outcome == "applies"]
