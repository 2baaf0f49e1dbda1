"""Run a level's rules (and built-in passes) to a bounded fixpoint.

A worklist of nodes: each node is tried only against the rules whose root op is its op
(bigger patterns first, then file order).  After a rewrite only the roots whose pattern
could reach a changed node are revisited: every rule's plan says, for each pattern node,
which graph moves lead back to the root, and those moves (merged into one trie for the
level) are walked from the changed nodes.  Built-in passes run between rounds
until nothing changes.  Past the bound the pack is reported as oscillating, naming the rules
that kept firing.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from ..dsl.ast import Pack
from ..errors import FixpointError, GrowthError
from ..expr.budget import end_attempts, start_attempt
from ..expr.values import EvalFailure
from ..graph.state import GraphState
from ..graph.view import GraphView, NodeId
from ..match.matcher import Match, Matcher, RootDispatch
from ..match.plan import CompiledRule, OpKey, RevisitMove, compile_rule
from ..onnx_facts.placement import EXECUTION_PROVIDER_KEY, LAYER_ANNOTATION_KEY
from ..onnx_facts.providers import short_name
from ..passes import BUILTINS
from .apply import Refused, Rewriter
from .options import RunOptions
from .progress import PROGRESS_EVERY, Progress

MAX_ROUNDS = 64
MAX_REFRESHES = 16  # re-inferences after rewrites, per level (each costs an inference of a region)
MAX_REFUSALS_PER_ROOT = 16
# How far a level may grow its graph: nodes plus node inputs, and bytes of constants, each
# at most GROWTH times what the level started with plus a fixed slack.  A pack that keeps
# growing the graph (a rule whose replacement matches again, a fold that doubles a
# constant each round) stops with an error here, not with memory exhausted.
GROWTH = 4
GROWTH_SLACK_UNITS = 10_000
GROWTH_SLACK_BYTES = 256 << 20


@dataclass
class LevelStats:
    """What running one level did."""

    applied: Counter = field(default_factory=Counter)  # rule -> rewrites
    refused: Counter = field(default_factory=Counter)  # rule -> matches refused by a guarantee
    builtins: Counter = field(default_factory=Counter)  # builtin -> nodes removed
    # rule -> seconds of its own attempts: root checks, matching, refusals, rewrites and the
    # revisits a rewrite queues (the worklist's shared bookkeeping is in match_seconds only)
    rule_seconds: dict[str, float] = field(default_factory=dict)
    builtin_time: dict[str, float] = field(default_factory=dict)  # builtin -> seconds
    # node name -> (rule, names of the nodes it replaced), for every node a rewrite made,
    # later deleted ones too: how a fused node's replaced names lead back to the input's
    created: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    match_seconds: float = 0.0
    rewrite_seconds: float = 0.0
    builtin_seconds: float = 0.0


_COMPILED: dict[int, tuple[object, CompiledRule]] = {}
_MAX_COMPILED = 4096  # rules kept compiled (verify makes a pack per drawn instance)


def compiled(rule) -> CompiledRule:
    """Compile a rule once per process.  Rules are immutable and compared by identity: the
    entry holds the rule itself, so its id cannot be reused while the entry lives (hashing
    a rule's whole tree on every lookup would cost more than the lookup saves).  Bounded:
    the oldest half goes when full."""
    entry = _COMPILED.get(id(rule))
    if entry is None or entry[0] is not rule:
        if len(_COMPILED) >= _MAX_COMPILED:
            for key in list(_COMPILED)[: _MAX_COMPILED // 2]:
                del _COMPILED[key]
        entry = _COMPILED[id(rule)] = (rule, compile_rule(rule))
    return entry[1]


@dataclass(frozen=True)
class Placement:
    """How a level treats placement.

    Before partitioning (``after_partition`` False) nodes carry layering annotations; with
    ``respect_annotations`` a match may not mix nodes of different annotations (by default
    the root's annotation wins, as in ONNX Runtime).  After partitioning every matched node
    must run on one provider, which the rule (or its pack) must list, and every node the
    replacement creates must have a kernel on that provider."""

    after_partition: bool = False
    respect_annotations: bool = False


class LevelRunner:
    """Applies every rule of a level's packs until none matches."""

    def __init__(
        self,
        state: GraphState,
        packs: Iterable[Pack],
        name: str,
        placement: Placement = Placement(),
        options: RunOptions = RunOptions(),
        on_start: Callable[[LevelRunner], None] | None = None,
    ) -> None:
        """``on_start`` is called once the level's built-ins have run their first round,
        just before its rules are first tried: the graph as the rules first see it (what
        ``explain`` looks at)."""
        self.state = state
        self.packs = list(packs)
        self.name = name
        self.placement = placement
        self.allowed: dict[str, frozenset[str]] = {
            r.name: frozenset(r.providers or p.providers) for p in self.packs for r in p.rules
        }
        self.rules = [compiled(r) for p in self.packs for r in p.rules]
        by_op: dict[tuple[str, str], list[CompiledRule]] = {}
        for _position, rule in sorted(enumerate(self.rules), key=lambda pr: (-pr[1].rule.benefit, pr[0])):
            for key in rule.root_ops:
                by_op.setdefault(key, []).append(rule)
        self.by_op: dict[tuple[str, str], RootDispatch] = {key: RootDispatch(rules) for key, rules in by_op.items()}
        self.revisit = _RevisitTrie(self.rules)
        self.builtins = list(dict.fromkeys(b for p in self.packs for b in p.builtins))
        self.max_rewrites = options.max_rewrites
        self.check_fixpoint = options.check_fixpoint
        self.kernels = options.kernels
        self.on_start = on_start
        self.stats = LevelStats()
        levels = sorted({p.level for p in self.packs})
        self.phase = f"level {'/'.join(map(str, levels))} ({name})" if levels else name  # (rewrite/progress.py)
        self.progress = options.progress

    def run(self) -> LevelStats:
        view = self.state.view
        self.max_units = GROWTH * view.size_units() + GROWTH_SLACK_UNITS
        self.max_bytes = GROWTH * view.initializer_bytes + GROWTH_SLACK_BYTES
        self.recent: deque[str] = deque(maxlen=200)
        with np.errstate(all="ignore"):  # once for every expression the matcher evaluates
            try:
                return self._run()
            finally:
                end_attempts()

    def _check_growth(self, view: GraphView) -> None:
        units, constants = view.size_units(), view.initializer_bytes
        if units > self.max_units:
            raise GrowthError(
                self.name,
                f"{units} nodes and node inputs, {GROWTH}x what it had plus {GROWTH_SLACK_UNITS}",
                Counter(self.recent),
            )
        if constants > self.max_bytes:
            raise GrowthError(
                self.name,
                f"{constants >> 20} MB of constants, {GROWTH}x what it had plus {GROWTH_SLACK_BYTES >> 20} MB",
                Counter(self.recent),
            )

    def _run(self) -> LevelStats:
        view = self.state.view
        bound = self.max_rewrites if self.max_rewrites is not None else 10 * len(view) + 1000
        total = 0
        recent = self.recent
        builtin_time = self.stats.builtin_time
        seen_changes: dict[str, int] = {}  # builtin -> position in view.changes it has seen
        applied = 0
        refreshes_left = MAX_REFRESHES
        for round_index in range(MAX_ROUNDS):
            start = time.perf_counter()
            folded = 0
            for name in self.builtins:
                changed = view.changed_since(seen_changes[name]) if name in seen_changes else None
                seen_changes[name] = len(view.changes)
                begin = time.perf_counter()
                removed = BUILTINS[name](self.state, changed) if changed is None or changed else 0
                builtin_time[name] = builtin_time.get(name, 0.0) + time.perf_counter() - begin
                self.stats.builtins[name] += removed
                folded += removed
            self._check_growth(view)
            # folding may have made shapes static: a Pad whose amounts were computed from a
            # Shape has a static output now, and the next layer's Shape folds next round
            improved = self.state.refresh_types() if folded else 0
            if round_index > 0 and not folded:
                # With dynamic axes, rewrites can make shapes readable that were not (a
                # fused node's stand-in types, a computed Reshape target that now reads as
                # dims, a Shape's dim a rule folded): re-infer and sweep again while that
                # gains anything (a static audio net computes each layer's padding from
                # the previous layer's shape: a round per layer)
                if applied and refreshes_left and hasattr(self.state, "refresh_types"):
                    refreshes_left -= 1
                    improved = self.state.refresh_types(if_incomplete_known=True)
                if not improved:
                    self.stats.builtin_seconds += time.perf_counter() - start
                    break
            if improved:  # a node may be foldable now whose output size was unknown
                seen_changes.pop("constant_folding", None)
            self.stats.builtin_seconds += time.perf_counter() - start
            if round_index == 0 and self.on_start is not None:
                self.on_start(self)
            applied = self._rules_to_fixpoint(view, bound - total, recent)
            total += applied
            if applied == 0 and round_index > 0 and not improved:
                break
        if self.check_fixpoint:
            view.check_consistency()
            self._check_fixpoint(view)
        return self.stats

    def _check_fixpoint(self, view: GraphView) -> None:
        matcher = Matcher(view, record_failures=False)
        rewriter = self.new_rewriter()
        for node_id in sorted(view.node_ids(), key=view.order_of):
            dispatch = self.by_op.get(view.node_key(node_id))
            for rule in dispatch.rules if dispatch else ():
                start_attempt()
                for match in matcher.matches(rule, node_id):
                    if self._placement_allows(rule, match) and rewriter.would_apply(match):
                        raise AssertionError(
                            f"fixpoint missed {rule.name} at node '{view.node(node_id).name or node_id}'"
                        )
        for name in self.builtins:
            if BUILTINS[name](self.state, None):
                raise AssertionError(f"fixpoint missed work for builtin {name}")

    # ------------------------------------------------------------------- worklist
    def _rules_to_fixpoint(self, view: GraphView, allowed: int, recent: deque) -> int:
        """Run the worklist; its time counts as matching, except what ``apply`` takes."""
        if not self.by_op:
            return 0
        start, rewriting = time.perf_counter(), self.stats.rewrite_seconds
        try:
            return self._worklist(view, allowed, recent)
        finally:
            self.stats.match_seconds += time.perf_counter() - start - (self.stats.rewrite_seconds - rewriting)

    def _worklist(self, view: GraphView, allowed: int, recent: deque) -> int:
        ordered = sorted(view.node_ids(), key=view.order_of)
        queue: deque[NodeId] = deque(ordered)
        queued = set(ordered)
        matcher = Matcher(view, record_failures=False)
        rewriter = self.new_rewriter()
        applied = 0
        # (one clock read before and after each rule tried at a node: about 0.15 µs with the sum, against
        # the microseconds a root check takes; see docs/pipeline.md, "Report")
        clock, seconds, created = time.perf_counter, self.stats.rule_seconds, self.stats.created
        progress = self.progress
        visited = 0
        while queue:
            node_id = queue.popleft()
            queued.discard(node_id)
            visited += 1
            if progress is not None and not visited % PROGRESS_EVERY:
                progress(Progress(self.phase, visited, len(queue), recent[-1] if recent else ""))
            if not view.has_node(node_id):
                continue
            dispatch = self.by_op.get(view.node_key(node_id))
            if dispatch is None:
                continue
            hood = matcher.neighborhood(node_id)  # shared by the rules' root checks
            for rule, checks in dispatch.candidates(hood):
                begin = clock()
                start_attempt()  # what its expressions may make (expr/budget.py)
                if not matcher.root_checks_hold(rule, hood, checks):
                    seconds[rule.name] = seconds.get(rule.name, 0.0) + clock() - begin
                    continue
                result = self._try(rule, node_id, matcher, rewriter, hood)
                if result is None:
                    seconds[rule.name] = seconds.get(rule.name, 0.0) + clock() - begin
                    continue
                applied += 1
                recent.append(rule.name)
                for new_id in result.new_nodes:
                    created[view.node(new_id).name] = (rule.name, result.replaced)
                if applied > allowed:
                    raise FixpointError(self.name, applied - 1, Counter(recent))
                self._check_growth(view)
                for neighbor in self.revisit.roots(view, result.touched):
                    if neighbor not in queued:
                        queued.add(neighbor)
                        queue.append(neighbor)
                seconds[rule.name] = seconds.get(rule.name, 0.0) + clock() - begin
                break
        return applied

    def _try(self, rule: CompiledRule, node_id: NodeId, matcher: Matcher, rewriter: Rewriter, hood):
        refusals = 0
        for match in matcher.matches(rule, node_id, hood):
            if not self._placement_allows(rule, match):
                continue
            begin = time.perf_counter()
            try:
                result = rewriter.apply(match)
            except (Refused, EvalFailure):
                self.stats.refused[rule.name] += 1
                refusals += 1
                self.stats.rewrite_seconds += time.perf_counter() - begin
                if refusals >= MAX_REFUSALS_PER_ROOT:
                    return None
                continue
            self.stats.rewrite_seconds += time.perf_counter() - begin
            self.stats.applied[rule.name] += 1
            return result
        return None

    def new_rewriter(self) -> Rewriter:
        """A rewriter that applies matches as this level does (after partitioning, every
        node it builds must have a kernel on the root's provider)."""
        return Rewriter(self.state, self._kernel_check if self.placement.after_partition else None)

    def _placement_allows(self, rule: CompiledRule, match: Match) -> bool:
        return self.placement_refusal(rule, match) is None

    def placement_refusal(self, rule: CompiledRule, match: Match) -> Refused | None:
        """Why this level's placement refuses ``match`` (None when it allows it): after
        partitioning, matched nodes of different providers or a provider the rule does
        not list; before it, with ``respect_annotations``, different layer annotations."""
        metadata = self.state.view.metadata
        if self.placement.after_partition:
            providers = {metadata(n).get(EXECUTION_PROVIDER_KEY) for n in match.nodes.values()}
            if len(providers) != 1:  # never fuse nodes of different providers
                return _mixed_placement(self.state.view, match, EXECUTION_PROVIDER_KEY)
            allowed = self.allowed.get(rule.name)
            provider = next(iter(providers))
            if allowed and provider not in allowed:
                listed = ", ".join(sorted(short_name(p) for p in allowed))
                return Refused(
                    f"{rule.name} fuses only nodes on {listed}; these run on {short_name(provider or '?')}",
                    kind="placement",
                    node=match.root,
                )
            return None
        if self.placement.respect_annotations:
            if len({metadata(n).get(LAYER_ANNOTATION_KEY) for n in match.nodes.values()}) != 1:
                return _mixed_placement(self.state.view, match, LAYER_ANNOTATION_KEY)
        return None

    def _kernel_check(self, node, root: NodeId, inputs: list[str], outputs: list[str]) -> str | None:

        provider = self.state.view.metadata(root).get(EXECUTION_PROVIDER_KEY)
        if provider is None or self.kernels.table(provider).supports(self.state.view, node, names=(inputs, outputs)):
            return None
        return f"{provider} has no kernel for {node.op_type} as built"


def _mixed_placement(view: GraphView, match: Match, key: str) -> Refused:
    """A match whose nodes are placed apart (``key``: the provider or the layer annotation),
    naming the first node placed apart from the root."""
    groups: dict[str | None, list[str]] = {}
    apart: NodeId | None = None
    root_place = view.metadata(match.root).get(key)
    for node_id in sorted(match.nodes.values(), key=view.order_of):
        place = view.metadata(node_id).get(key)
        groups.setdefault(place, []).append(f"'{view.node(node_id).name or node_id}'")
        if apart is None and place != root_place:
            apart = node_id
    shown = []
    for place, names in groups.items():
        listed = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        if key == EXECUTION_PROVIDER_KEY:
            shown.append(f"{listed} on {short_name(place or '?')}")
        else:
            shown.append(f"{listed} {'not annotated' if place is None else f'annotated {place!r}'}")
    what = "providers" if key == EXECUTION_PROVIDER_KEY else "layer annotations"
    return Refused(f"the matched nodes have different {what}: {'; '.join(shown)}", kind="placement", node=apart)


class _RevisitTrie:
    """The walks from a pattern node back to its root (see ``plan._revisit_paths``), for
    all rules of a level, merged into one trie.

    The first level (the trie built from the rules) is keyed by the op keys of the changed
    node, the next ones by (move, op keys of the node reached); ``is_root`` marks where some
    walk ends.  Each trie node also indexes its children by move and by single op key
    (``by_op`` at the first level), so a walk looks up the neighbours' ops instead of
    scanning every rule's pattern nodes."""

    def __init__(self, rules: Iterable[CompiledRule] = ()) -> None:
        self.children: dict[RevisitMove, _RevisitTrie] = {}
        self.is_root = False
        self.by_op: dict[OpKey, list[_RevisitTrie]] = {}
        self.moves: dict[str, dict[OpKey, list[_RevisitTrie]]] = {}
        starts: dict[frozenset[OpKey], _RevisitTrie] = {}  # the first level
        for rule in rules:
            for walk in rule.revisit_paths:
                node = starts.setdefault(walk.start, _RevisitTrie())
                for move in walk.moves:
                    node = node.children.setdefault(move, _RevisitTrie())
                node.is_root = True
        for ops, child in starts.items():
            for op in ops:
                self.by_op.setdefault(op, []).append(child)
            child._index()

    def _index(self) -> None:
        for key, child in self.children.items():
            table = self.moves.setdefault(key.move, {})
            for op in key.ops:
                table.setdefault(op, []).append(child)
            child._index()

    def roots(self, view: GraphView, changed: set[NodeId]) -> list[NodeId]:
        """Nodes that may now root a match because ``changed`` nodes changed, in graph order."""
        steps = {"up": view.upstream, "down": view.downstream, "sibling": view.siblings}
        found: set[NodeId] = set()
        stack: list[tuple[NodeId, _RevisitTrie]] = []
        for node_id in changed:
            if view.has_node(node_id):
                stack.extend((node_id, child) for child in self.by_op.get(view.node_key(node_id), ()))
        seen = set(stack)
        node_key = view.node_key
        while stack:
            node_id, trie = stack.pop()
            if trie.is_root:
                found.add(node_id)
            for move, table in trie.moves.items():
                for other in steps[move](node_id):
                    for child in table.get(node_key(other), ()):
                        state = (other, child)
                        if state not in seen:
                            seen.add(state)
                            stack.append(state)
        return sorted(found, key=view.order_of)
