"""What ``optimize`` did, as data: the ``Report`` a result carries, what the command line's
tables show and what ``optimize --json`` writes (``Report.to_json``).

Counts cover the main graph (rules also run inside subgraph and function bodies: their
applications count in the rule rows, their nodes not in the node counts, histograms or
``created``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .explanation import Explanation
from .partition import PartitionReport

JSON_FORMAT = "rewriter-report-1"  # the "format" of Report.to_json(); changes when its meaning does


@dataclass
class RuleCount:
    """One rule's row: at which level it ran, how often it applied, how many of its matches
    an engine guarantee refused, and the seconds spent on it (root checks, matching,
    refused attempts, rewriting and what a rewrite queues again; not the worklist's shared
    bookkeeping)."""

    rule: str
    level: int
    applied: int
    refused: int
    seconds: float = 0.0


@dataclass(frozen=True)
class OpChange:
    """How many nodes of one op the model had before and after (``domain`` "" for ONNX)."""

    op: str
    domain: str
    before: int
    after: int

    @property
    def change(self) -> int:
        return self.after - self.before

    @property
    def name(self) -> str:
        """``Gelu (com.microsoft)``-style: the op, and its domain where it is not ONNX's."""
        return f"{self.op} ({self.domain})" if self.domain else self.op


@dataclass(frozen=True)
class Created:
    """A node of the output that this run made, as its provenance metadata says (see
    onnx_facts/provenance.py): the rule (or built-in step) that made it, the nodes that
    rewrite deleted (``replaced``, often nodes an earlier rewrite had made), and the input
    model's nodes those stand for (``original``: ``replaced`` followed back through the
    run's earlier rewrites)."""

    rule: str
    replaced: tuple[str, ...]
    original: tuple[str, ...]


@dataclass
class Report:
    """What ``optimize`` did.

    * ``nodes_before`` / ``nodes_after``: main-graph nodes; ``ops_before`` / ``ops_after``:
      their histograms (``domain.Op`` outside ONNX), ``op_changes()`` the difference;
    * ``rules``: one ``RuleCount`` per rule the run had (applied or not), in level order;
    * ``builtins``: built-in pass -> nodes it removed (constant folding: nodes folded into
      constants; common subexpressions: duplicate nodes merged), ``builtin_seconds`` the
      time each took;
    * ``created``: node name -> ``Created`` for every output node this run made;
    * ``seconds``: phase -> seconds (``total_seconds`` their sum);
    * ``partition``, ``providers_after``: placement, from level 2 on; ``explanation``: what
      ``optimize(explain=...)`` asked for; ``warnings``: about the packs asked for.
    """

    nodes_before: int = 0
    nodes_after: int = 0
    rules: list[RuleCount] = field(default_factory=list)
    builtins: dict[str, int] = field(default_factory=dict)  # builtin -> nodes removed
    ops_before: dict[str, int] = field(default_factory=dict)
    ops_after: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # phase -> seconds
    partition: PartitionReport | None = None  # when level >= 2
    providers_after: dict[str, int] = field(default_factory=dict)  # provider -> final nodes
    explanation: Explanation | None = None  # optimize(explain=[...]): those rules, as their levels began
    warnings: list[str] = field(default_factory=list)  # about the packs asked for (see pack_warnings)
    builtin_seconds: dict[str, float] = field(default_factory=dict)  # builtin -> seconds
    # what ``created`` is made of when first asked for (tracing every node back is work a
    # run that does not ask should not do): see ``trace_created``
    provenance: Provenance = field(default_factory=lambda: Provenance([], {}), repr=False, compare=False)

    @property
    def created(self) -> dict[str, Created]:
        """Output node name -> ``Created``, for every main-graph node this run made."""
        return self.provenance.traced()

    @property
    def total_seconds(self) -> float:
        return sum(self.seconds.values())

    def applied(self, rule: str) -> int:
        return sum(r.applied for r in self.rules if r.rule == rule)

    def op_changes(self) -> list[OpChange]:
        """The ops whose node count changed: those that went (most first), then those that
        came (most first), each group by name on ties."""
        changes = []
        for key in self.ops_before.keys() | self.ops_after.keys():
            before, after = self.ops_before.get(key, 0), self.ops_after.get(key, 0)
            if before != after:
                domain, _, op = key.rpartition(".")
                changes.append(OpChange(op, domain, before, after))
        return sorted(changes, key=lambda c: (c.change > 0, -abs(c.change), c.name))

    def to_json(self) -> dict:
        """Everything above as a JSON-ready dictionary (what ``optimize --json`` writes;
        docs/pipeline.md, "Report")."""
        part = self.partition
        return {
            "format": JSON_FORMAT,
            "nodes": {"before": self.nodes_before, "after": self.nodes_after},
            "rules": [{**asdict(row), "seconds": _rounded(row.seconds)} for row in self.rules],
            "builtins": [
                {"builtin": name, "removed_nodes": removed, "seconds": _rounded(self.builtin_seconds.get(name, 0.0))}
                for name, removed in self.builtins.items()
            ],
            "ops": [
                {"op": c.op, "domain": c.domain, "before": c.before, "after": c.after, "change": c.change}
                for c in self.op_changes()
            ],
            "ops_before": dict(self.ops_before),
            "ops_after": dict(self.ops_after),
            "seconds": {phase: _rounded(seconds) for phase, seconds in self.seconds.items()},
            "total_seconds": _rounded(self.total_seconds),
            "placement": None
            if part is None
            else {
                "providers": list(part.providers),
                "nodes_at_partition": dict(part.counts),
                "nodes_after": dict(self.providers_after),
                "float16_computed_in_float32": part.float32_nodes,
                "layer_assignment": [asdict(decision) for decision in part.decisions],
            },
            "created": {
                name: {"rule": c.rule, "replaced": list(c.replaced), "original": list(c.original)}
                for name, c in self.created.items()
            },
            "warnings": [*self.warnings, *(part.warnings if part is not None else ())],
            "explanation": None if self.explanation is None else self.explanation.to_json(),
        }


def _rounded(seconds: float) -> float:
    """Seconds to the microsecond (the clock's digits past it are noise)."""
    return round(seconds, 6)


@dataclass
class Provenance:
    """The run's record of what it made: ``made`` is (name, rule, replaced) for each output
    node it made, ``log`` node name -> (rule, replaced) for every node its rewrites made,
    later deleted ones too, in the order they were made."""

    made: list[tuple[str, str, tuple[str, ...]]]
    log: dict[str, tuple[str, tuple[str, ...]]]
    _traced: dict[str, Created] | None = field(default=None, repr=False, compare=False)

    def traced(self) -> dict[str, Created]:
        if self._traced is None:
            self._traced = trace_created(self.made, self.log)
        return self._traced


def trace_created(
    made: list[tuple[str, str, tuple[str, ...]]], log: dict[str, tuple[str, tuple[str, ...]]]
) -> dict[str, Created]:
    """``Created`` for each (name, rule, replaced) in ``made``, with ``replaced`` followed
    back through ``log`` to the nodes no rewrite made.  A node is deleted once, so it is in
    one ``replaced`` only: the names behind one output node form a tree, the trees of two
    are disjoint, and each log entry is expanded at most once."""
    created = {}
    for name, rule, replaced in made:
        originals, stack = [], list(replaced)
        while stack:
            item = stack.pop()
            entry = log.get(item)
            if entry is None:
                originals.append(item)
            else:
                stack.extend(entry[1])
        created[name] = Created(rule, replaced, tuple(sorted(set(originals))))
    return created
