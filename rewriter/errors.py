"""Errors a user can cause, as values with a position and a reason.

They are raised deep inside the engine and rendered once, at the edge (the command line
prints ``file:line:col: message`` and exits 2).  Internal bugs stay ordinary exceptions.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field


class RewriterError(Exception):
    """Base class of every error a user is meant to see as one clear line."""

    def render(self) -> str:
        return str(self)


@dataclass(frozen=True)
class Position:
    """Where in a rules file something is: 1-based line and column, and the file (so that
    an error found while a rule runs can name it too)."""

    line: int
    column: int
    # (not compared or hashed: rule objects hash as they did, the same in every process)
    file: str = field(default="", compare=False)


class RuleError(RewriterError):
    """A rules file that does not parse or does not type-check."""

    def __init__(self, message: str, file: str = "<rules>", line: int = 0, column: int = 0, snippet: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.snippet = snippet

    def __reduce__(self):
        # (pickled whole: a rule error raised in a worker process keeps its position)
        return (type(self), (self.message, self.file, self.line, self.column, self.snippet))

    def render(self) -> str:
        head = f"{self.file}:{self.line}:{self.column}: {self.message}"
        return f"{head}\n{self.snippet}" if self.snippet else head

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.message}"


def rule_error(message: str, pos: Position) -> RuleError:
    """A ``RuleError`` at ``pos`` (in its file)."""
    return RuleError(message, pos.file or "<rules>", pos.line, pos.column)


class ModelError(RewriterError):
    """A model that cannot be read, is malformed, or cannot be written."""


class FixpointError(RewriterError):
    """A pack kept rewriting past its bound: some rules undo each other or grow the graph."""

    def __init__(self, pack: str, bound: int, rule_counts: dict[str, int]) -> None:
        busiest = ", ".join(f"{name} ({count}x)" for name, count in sorted(rule_counts.items(), key=lambda kv: -kv[1]))
        super().__init__(
            f"pack '{pack}' did not reach a fixpoint after {bound} rewrites; rules still firing: {busiest}"
        )
        self.pack = pack
        self.bound = bound
        self.rule_counts = dict(rule_counts)

    def __reduce__(self):
        return (type(self), (self.pack, self.bound, self.rule_counts))


class GrowthError(FixpointError):
    """A pack kept growing the graph (nodes, their inputs, constant bytes) past its bound:
    stopped before memory runs out, naming the rules that kept firing."""

    def __init__(self, pack: str, what: str, rule_counts: dict[str, int]) -> None:
        busiest = (
            ", ".join(f"{name} ({count}x)" for name, count in sorted(rule_counts.items(), key=lambda kv: -kv[1]))
            or "none (built-ins)"
        )
        RewriterError.__init__(
            self, f"pack '{pack}' grew the graph past its bound ({what}); rules still firing: {busiest}"
        )
        self.pack = pack
        self.what = what
        self.rule_counts = dict(rule_counts)

    def __reduce__(self):
        return (type(self), (self.pack, self.what, self.rule_counts))


class ArgumentError(RewriterError, TypeError):
    """A Python API function was called with an argument of the wrong kind (also a
    ``TypeError``, which is what Python itself would raise)."""


def expect(value: object, kinds: type | tuple[type, ...], what: str) -> None:
    """Raise ``ArgumentError`` unless ``value`` is one of ``kinds`` (bool is not an int)."""
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if isinstance(value, bool) and bool not in kinds:
        ok = False
    else:
        ok = isinstance(value, kinds)
    if not ok:
        names = " or ".join("a path" if k is os.PathLike else k.__name__ for k in kinds)
        raise ArgumentError(f"{what} must be {names}, not {type(value).__name__}")
