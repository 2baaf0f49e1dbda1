"""Errors a user can cause, as values with a position and a reason.

They are raised deep inside the engine and rendered once, at the edge (the command line
prints ``file:line:col: message`` and exits 2).  Internal bugs stay ordinary exceptions.
"""
from __future__ import annotations

from dataclasses import dataclass


class RewriterError(Exception):
    """Base class of every error a user is meant to see as one clear line."""

    def render(self) -> str:
        return str(self)


@dataclass(frozen=True)
class Position:
    """Where in a rules file something is: 1-based line and column."""

    line: int
    column: int


class RuleError(RewriterError):
    """A rules file that does not parse or does not type-check."""

    def __init__(self, message: str, file: str = "<rules>", line: int = 0, column: int = 0,
                 snippet: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.snippet = snippet

    def render(self) -> str:
        head = f"{self.file}:{self.line}:{self.column}: {self.message}"
        return f"{head}\n{self.snippet}" if self.snippet else head

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.message}"


class ModelError(RewriterError):
    """A model that cannot be read, is malformed, or cannot be written."""


class FixpointError(RewriterError):
    """A pack kept rewriting past its bound: some rules undo each other or grow the graph."""

    def __init__(self, pack: str, bound: int, rule_counts: dict[str, int]) -> None:
        busiest = ", ".join(f"{name} ({count}x)" for name, count in
                            sorted(rule_counts.items(), key=lambda kv: -kv[1]))
        super().__init__(f"pack '{pack}' did not reach a fixpoint after {bound} rewrites; "
                         f"rules still firing: {busiest}")
        self.pack = pack
        self.rule_counts = dict(rule_counts)
