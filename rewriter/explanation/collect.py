"""Collect explanations while a run goes: at the start of each level (once its built-ins
ran their first round, before its rules are first tried) every chosen rule is tried at
every candidate root as the level itself would try it, and how it fared is kept.

The pipeline calls ``Explainer.level_hook`` for each level runner it makes (main graph,
subgraphs, function bodies), so an explanation sees the graph exactly as the rule's level
sees it: after the lower levels, partitioning and the float16 rewrite.  Nothing is changed
— not the graph, not the names a later rewrite gets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..dsl.unparse import show_equation
from ..expr.budget import start_attempt
from ..graph.view import GraphView, NodeId
from ..match.matcher import Matcher
from ..match.plan import CompiledRule
from ..rewrite.fixpoint import LevelRunner
from .causes import bindings, failure_cause, refusal_cause
from .describe import node_label, node_name, op_name
from .diagnose import RootOutcome, try_root
from .model import Attempt, Binding, Cause, Explanation, Note, Outcome, ordered


class Explainer:
    """Explains the rules named in ``rules`` (all when None) at the nodes named in
    ``nodes`` (every candidate root when None).  A node named for a rule whose root op it
    does not have is reported as such when the rule is named too."""

    def __init__(self, rules: Iterable[str] | None = None, nodes: Iterable[str] | None = None) -> None:
        self.rules = None if rules is None else frozenset(rules)
        self.nodes = None if nodes is None else frozenset(nodes)
        self.attempts: list[Attempt] = []
        self.notes: list[Note] = []
        self._missing: set[str] = set()  # nodes asked for and already noted missing

    def level_hook(self, graph: str = "") -> Callable[[LevelRunner], None]:
        """What a level runner calls before its rules first run (``graph``: how attempts
        name the graph, "" for the main one)."""
        return lambda runner: self.explain_level(runner, graph)

    def explanation(self, level: int, providers: Iterable[str] = ()) -> Explanation:
        return Explanation(level, list(providers), ordered(self.attempts), list(self.notes))

    # ------------------------------------------------------------------------------
    def explain_level(self, runner: LevelRunner, graph: str = "") -> None:
        """Try the chosen rules of ``runner``'s level at their candidate roots."""
        chosen = [r for r in runner.rules if self.rules is None or r.name in self.rules]
        if not chosen:
            return
        view = runner.state.view
        pack_of = {r.name: (p.name, p.level) for p in runner.packs for r in p.rules}
        level = min(level for _, level in pack_of.values())
        named: list[NodeId] = []
        if self.nodes is not None:
            named = [n for n in sorted(view.node_ids(), key=view.order_of) if view.node(n).name in self.nodes]
            if not graph:
                found = {view.node(n).name for n in named}
                for missing in sorted(self.nodes - found - self._missing):
                    self._missing.add(missing)
                    self.notes.append(
                        Note(
                            f"no node named '{missing}' in the graph when level {level} runs "
                            "(a lower level may have rewritten it: explain at a lower --level)",
                            level=level,
                        )
                    )
        matcher = Matcher(view, record_failures=True)
        rewriter = runner.new_rewriter()
        for rule in chosen:
            pack, rule_level = pack_of[rule.name]
            candidates = sorted({n for key in rule.root_ops for n in view.nodes_by_op(*key)}, key=view.order_of)
            if self.nodes is not None:
                chosen_roots = set(named)
                candidates = [n for n in candidates if n in chosen_roots]
                if self.rules is not None:  # a node asked for by name that cannot be this rule's root
                    for node_id in named:
                        if node_id not in candidates:
                            self.attempts.append(_not_a_root(view, rule, pack, rule_level, node_id, graph))
            elif not candidates:
                ops = " or ".join(op for _, op in rule.root_ops)
                where = f" of {graph}" if graph else ""
                self.notes.append(
                    Note(f"no {ops} node in the graph{where} when level {rule_level} runs", rule.name, rule_level)
                )
            for root in candidates:
                start_attempt()  # what its expressions may make (expr/budget.py)
                outcome = try_root(matcher, rewriter, rule, root, runner.placement_refusal)
                self.attempts.append(_attempt(view, rule, pack, rule_level, root, outcome, graph))


def _attempt(
    view: GraphView, rule: CompiledRule, pack: str, level: int, root: NodeId, outcome: RootOutcome, graph: str
) -> Attempt:
    equations = len(rule.rule.equations)

    def made(result: Outcome, matched: int, cause: Cause | None, rows: tuple[Binding, ...]) -> Attempt:
        name, op = node_name(view, root), op_name(view, root)
        return Attempt(rule.name, pack, level, name, op, result, matched, equations, cause, rows, graph)

    if outcome.match is not None:
        rows = bindings(view, rule, outcome.match.nodes)
        if outcome.refusal is None:
            return made("applies", equations, None, rows)
        return made("refused", equations, refusal_cause(view, outcome.match, outcome.refusal), rows)
    failure = outcome.failure
    if failure is None:  # (the search ended without a recorded reason)
        cause = Cause("op", f"the pattern does not match at {node_label(view, root)}", node_name(view, root))
        return made("no match", 0, cause, bindings(view, rule, {}))
    cause, failed = failure_cause(view, rule, failure, root)
    rows = bindings(view, rule, failure.nodes, failed, root if failure.kind == "root" else failure.node)
    return made("no match", sum(1 for row in rows if row.state == "bound"), cause, rows)


def _not_a_root(view: GraphView, rule: CompiledRule, pack: str, level: int, node_id: NodeId, graph: str) -> Attempt:
    ops = " or ".join(op for _, op in rule.root_ops)
    root_eq = rule.rule.equations[rule.steps[0].equation]
    cause = Cause(
        "root op",
        f"{node_label(view, node_id)} cannot be {rule.name}'s root: its pattern is rooted at {ops} "
        f"(`{show_equation(root_eq)}`, line {root_eq.pos.line})",
        node_name(view, node_id),
    )
    name, op = node_name(view, node_id), op_name(view, node_id)
    rows = bindings(view, rule, {})
    return Attempt(rule.name, pack, level, name, op, "no match", 0, len(rule.rule.equations), cause, rows, graph)
