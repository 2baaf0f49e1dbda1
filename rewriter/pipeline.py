"""The optimization pipeline: load packs, run each level in order, report what happened.

Levels follow ONNX Runtime's GraphOptimizationLevel: 0 required, 1 basic, 2 extended,
3 layout, 4 reserved.  Asking for a level runs every pack up to it, lowest level first,
each level to its own fixpoint:

    levels 0-1  ->  partition (when level >= 2)  ->  levels 2+

Levels 0-1 see layering annotations (new nodes inherit the root's); partitioning assigns
every node an execution provider and clears the annotations; levels 2+ only fuse nodes of
one provider that the rule names (new nodes inherit the root's provider).

``explain()`` runs the same pipeline with an ``Explainer`` watching each level start, and
says per rule and candidate root why it did or did not apply (docs/explain.md).
"""

from __future__ import annotations

import dataclasses
import gc
import os
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from onnx import ModelProto

from .dsl import Pack, load_pack, pack_level
from .errors import ArgumentError, FixpointError, RewriterError, expect
from .explanation import Explainer, Explanation, Note
from .expr import syntax
from .expr.budget import end_run, start_run
from .graph.model import FunctionState, ModelState, SavedModel, op_histogram
from .graph.model_io import load_model
from .graph.wire import ModelParts
from .onnx_facts.placement import provider_of
from .onnx_facts.provenance import FLOAT16_STEP, RULE_KEY
from .onnx_facts.providers import CPU
from .partition import PartitionReport, parse_layer_assignment, partition, provider_list
from .partition.float16 import compute_float16_in_float32
from .partition.kernels import KernelTables
from .passes import load_hook
from .report import Provenance, Report, RuleCount
from .resources import bundled_pack_paths
from .rewrite.fixpoint import LevelRunner, Placement
from .rewrite.options import RunOptions
from .rewrite.progress import Progress, ProgressHook

LEVEL_NAMES = {"required": 0, "basic": 1, "extended": 2, "layout": 3, "all": 4}
LEVEL_LABELS = {0: "required", 1: "basic", 2: "extended", 3: "layout", 4: "level 4"}


def parse_level(level: str | int) -> int:
    """``basic`` / ``extended`` / ``layout`` / ``all`` / a number 0-4 -> the level number."""
    expect(level, (str, int), "level")
    if isinstance(level, int):
        value = level
    else:
        text = str(level).strip().lower()
        if text in LEVEL_NAMES:
            return LEVEL_NAMES[text]
        if not text.isdigit():
            raise RewriterError(f"unknown level '{level}' (use basic, extended, layout, all or 0-4)")
        value = int(text)
    if not 0 <= value <= 4:
        raise RewriterError(f"level {value} is out of range (0-4)")
    return value


def bundled_packs() -> list[Pack]:
    """The rule packs shipped with rewriter."""
    return [load_pack(p) for p in bundled_pack_paths()]


class Result:
    """What ``optimize`` returns: the ``report``, and the optimized ``model``, assembled
    when first asked for (a copy of every weight).  ``save_model`` writes a result without
    assembling it: for a big model that is one copy of its weights fewer."""

    def __init__(self, state: ModelState | SavedModel, report: Report) -> None:
        self._state: ModelState | SavedModel | None = state
        self._model: ModelProto | None = None
        self.report = report

    @property
    def model(self) -> ModelProto:
        if self._model is None:
            assert self._state is not None  # (let go of only once the model is assembled)
            start = time.perf_counter()
            self._model = self._state.to_model()
            self._state = None  # (the view is no longer needed)
            self.report.seconds["write back"] = time.perf_counter() - start
        return self._model

    def model_parts(self):
        """The optimized model as ``save_model`` writes it (see graph/wire.py)."""
        if self._model is not None:
            return ModelParts.of(self._model)
        return self._state.model_parts()


def _as_model(model_or_path: ModelProto | str | os.PathLike) -> ModelProto:
    expect(model_or_path, (ModelProto, str, os.PathLike), "the model")
    if isinstance(model_or_path, ModelProto):
        return model_or_path
    return load_model(model_or_path)


def _check_arguments(
    rules, bundled, max_rewrites, providers, layer_assignment, annotation_boundaries, provider_kernels
) -> None:
    """Arguments of the wrong kind are the library's own error (an ``ArgumentError``, also
    a ``TypeError``), said before any work; a bare string where a list of files is expected
    would otherwise be read one character at a time."""
    if rules is not None:
        expect(rules, (list, tuple), "rules (a list of rules files or packs)")
        for item in rules:
            expect(item, (str, os.PathLike, Pack), "each of rules")
    expect(bundled, bool, "bundled")
    if max_rewrites is not None:
        expect(max_rewrites, int, "max_rewrites")
        if max_rewrites < 0:
            raise RewriterError(f"max_rewrites must be >= 0, not {max_rewrites}")
    if providers is not None:
        expect(providers, (str, list, tuple), "providers")
        if not isinstance(providers, str):
            for item in providers:
                expect(item, str, "each of providers")
    if layer_assignment is not None:
        expect(layer_assignment, str, "layer_assignment")
    expect(annotation_boundaries, str, "annotation_boundaries")
    expect(provider_kernels, (list, tuple), "provider_kernels (a list of .kernels files)")
    for item in provider_kernels:
        expect(item, (str, os.PathLike), "each of provider_kernels")


def pack_warnings(level: int, packs: Iterable[Pack]) -> list[str]:
    """What a user should hear about the packs they asked for: one above the run's level does
    not run at all (silently skipping it hid a typo'd --level); one of level 0-1 that creates
    contrib ops makes provider-specific nodes before partitioning, where placement is unknown."""
    messages = []
    for pack in packs:
        where = pack.file or pack.name
        if pack.level > level:
            messages.append(
                f"pack '{pack.name}' ({where}) is level {pack.level}, above the run's level {level}: "
                f"its rules do not run (ask for --level {pack.level} or higher)"
            )
        elif pack.level <= 1:
            created = sorted({op for r in pack.rules for e in r.replacement for op in _contrib_ops(e.value)})
            if created:
                messages.append(
                    f"pack '{pack.name}' ({where}) is level {pack.level} (before partitioning) but creates "
                    f"provider-specific ops: {', '.join(created)}; such fusions belong at level 2 or 3"
                )
    return messages


def _contrib_ops(expr: syntax.Expr) -> list[str]:
    """The ops outside ONNX's own domains a replacement expression calls (nested calls too)."""
    found: list[str] = []
    stack = [expr]
    while stack:
        item = stack.pop()
        if isinstance(item, syntax.Call):
            if item.is_op and "." in item.func and not item.func.startswith("ai.onnx."):
                found.append(item.func)
            stack.extend(item.args)
        else:
            stack.extend(syntax.operands(item))
    return found


def _select_packs(level: int, rules: Iterable[str | os.PathLike | Pack] | None, use_bundled: bool) -> list[Pack]:
    # (bundled packs above the level are not even built when the cache has them)
    packs = [load_pack(p) for p in bundled_pack_paths() if pack_level(p) <= level] if use_bundled else []
    for item in rules or ():
        packs.append(item if isinstance(item, Pack) else load_pack(Path(item)))
    return [p for p in packs if p.level <= level]


ANNOTATION_BOUNDARIES = ("root", "respect")


def optimize(
    model_or_path: ModelProto | str | os.PathLike,
    level: str | int = "basic",
    rules: Sequence[str | os.PathLike | Pack] | None = None,
    bundled: bool = True,
    max_rewrites: int | None = None,
    providers: Sequence[str] | str | None = None,
    layer_assignment: str | None = None,
    annotation_boundaries: str = "root",
    provider_kernels: Sequence[str | os.PathLike] = (),
    keep_float16: bool = False,
    explain: Sequence[str] = (),
    progress: ProgressHook | None = None,
    layout_may_grow: bool = False,
) -> Result:
    """Optimize a model with the rule packs up to ``level``.

    ``rules`` adds pack files (or parsed packs) to the bundled ones (``bundled=False`` uses
    only these).  ``providers`` is the priority-ordered execution provider list (CPU is
    appended when missing) and ``layer_assignment`` ONNX Runtime's layering setting; both
    matter from level 2 (extended) on, where the graph is partitioned.
    ``annotation_boundaries="respect"`` refuses level 0-1 matches that mix nodes of
    different layering annotations (default ``"root"``: the root's annotation wins).
    ``provider_kernels`` adds kernel tables for providers (``.kernels`` files).
    From level 2 on, float16 the CPU provider has no kernels for is computed in float32
    (as onnxruntime does when it runs it; see partition/float16.py) unless ``keep_float16``.
    ``explain`` names rules to explain as their levels begin (``report.explanation``; see
    ``explain()``); the run is the same with or without it.  ``progress`` is called with a
    ``rewrite.progress.Progress`` as each phase begins and every few hundred nodes a level's
    worklist looks at (what the command line's progress bar shows).
    The layout level (3, ``"all"``) never leaves the model with more nodes than the extended
    level did: where it would, it is undone (``report.warnings`` says so) and its rules
    marked ``grows`` do not run; ``layout_may_grow=True`` keeps whatever it makes, as fast
    as this CPU runs it offline (NCHWc reorders, fusions split back where onnxruntime's
    kernel is slower).
    The input model is not modified; the result holds a new ``ModelProto`` and a ``Report``.
    """
    _check_arguments(rules, bundled, max_rewrites, providers, layer_assignment, annotation_boundaries, provider_kernels)
    names = _names(explain, "explain")
    explainer = None
    if names:
        level_number = parse_level(level)
        packs = _select_packs(level_number, rules, bundled)
        _check_rule_names(names, packs, level_number, rules, bundled)
        explainer = Explainer(names)
        if not layout_may_grow:
            explainer.notes.extend(_growing_rule_notes(packs, names))
        rules, bundled = packs, False  # (loaded once)
    result = _optimize_collecting(
        model_or_path,
        level,
        rules,
        bundled,
        max_rewrites,
        providers,
        layer_assignment,
        annotation_boundaries,
        provider_kernels,
        keep_float16,
        explainer,
        progress,
        layout_may_grow,
    )
    if explainer is not None:
        used = result.report.partition.providers if result.report.partition is not None else []
        result.report.explanation = explainer.explanation(parse_level(level), used)
    return result


def _optimize_collecting(*arguments) -> Result:
    """``_optimize`` with Python's garbage collector paused."""
    collecting = gc.isenabled()
    gc.disable()  # many small short-lived objects, few cycles: with collections on, a 10k-node
    try:  # graph took 2.0-2.2 s instead of 1.6-1.8 s (bench/synthetic.py, extended)
        return _optimize(*arguments)
    finally:
        if collecting:
            gc.enable()


def explain(
    model_or_path: ModelProto | str | os.PathLike,
    level: str | int = "basic",
    rules: Sequence[str | os.PathLike | Pack] | None = None,
    rule: Sequence[str] | str | None = None,
    node: Sequence[str] | str | None = None,
    providers: Sequence[str] | str | None = None,
    layer_assignment: str | None = None,
    bundled: bool = True,
    annotation_boundaries: str = "root",
    provider_kernels: Sequence[str | os.PathLike] = (),
    keep_float16: bool = False,
    layout_may_grow: bool = False,
) -> Explanation:
    """Why the rules of the packs up to ``level`` (bundled, plus ``rules``) do or do not
    apply: for each rule (``rule``: only these names) and each candidate root (``node``:
    only nodes of these names), the deepest partial match and the first thing that failed
    — see ``rewriter.Explanation``.

    Each rule is explained on the graph as its level sees it: the pipeline runs as
    ``optimize`` would (same options) up to the highest level of the rules explained, and
    each level is looked at once its built-ins ran their first round, before its rules run.
    An unknown rule name is a ``RewriterError``."""
    _check_arguments(rules, bundled, None, providers, layer_assignment, annotation_boundaries, provider_kernels)
    rule_names, node_names = _names(rule, "rule"), _names(node, "node")
    level_number = parse_level(level)
    packs = _select_packs(level_number, rules, bundled)
    _check_rule_names(rule_names, packs, level_number, rules, bundled)
    levels = {r.name: p.level for p in packs for r in p.rules}
    top = max((levels[n] for n in rule_names), default=level_number)
    explainer = Explainer(rule_names or None, node_names or None)
    if not layout_may_grow:
        explainer.notes.extend(_growing_rule_notes(packs, rule_names))
    try:
        result = _optimize_collecting(
            model_or_path,
            top,
            packs,
            False,
            None,
            providers,
            layer_assignment,
            annotation_boundaries,
            provider_kernels,
            keep_float16,
            explainer,
            None,
            layout_may_grow,
        )
    except FixpointError as error:
        # a level that never settles is what one most wants explained: its rules were
        # looked at as it began, before it ran away; keep that, and say where the run ended
        explainer.notes.append(Note(f"the run stopped: {error}; levels after it are not explained"))
        return explainer.explanation(top, [])
    used = result.report.partition.providers if result.report.partition is not None else []
    return explainer.explanation(top, used)


def _names(value: Sequence[str] | str | None, what: str) -> list[str]:
    """One name or several, as a list (a bare string is one name, not its characters)."""
    if value is None:
        return []
    expect(value, (str, list, tuple), what)
    if isinstance(value, str):
        return [value]
    for item in value:
        expect(item, str, f"each of {what}")
    return list(dict.fromkeys(value))


def _check_rule_names(names: list[str], packs: list[Pack], level: int, rules, bundled: bool) -> None:
    """Every name is a rule of the packs up to ``level``: else one line saying where it is
    (a pack above the level) or that no pack has it."""
    known = {r.name for p in packs for r in p.rules}
    for name in names:
        if name in known:
            continue
        above = [
            p for p in _select_packs(4, rules, bundled) if p.level > level and any(r.name == name for r in p.rules)
        ]
        if above:
            raise RewriterError(
                f"rule '{name}' is in pack '{above[0].name}' (level {above[0].level}, {LEVEL_LABELS[above[0].level]}), "
                f"above level {level} ({LEVEL_LABELS[level]}): raise --level"
            )
        raise RewriterError(f"unknown rule '{name}' (rewriter rules lists the bundled ones)")


def _optimize(
    model_or_path,
    level,
    rules,
    bundled,
    max_rewrites,
    providers,
    layer_assignment,
    annotation_boundaries,
    provider_kernels,
    keep_float16=False,
    explainer: Explainer | None = None,
    progress: ProgressHook | None = None,
    layout_may_grow: bool = False,
) -> Result:
    if progress is not None:
        if not callable(progress):
            raise ArgumentError(f"progress must be a callable, not {type(progress).__name__}")
        progress(Progress("load rules"))
    if annotation_boundaries not in ANNOTATION_BOUNDARIES:
        raise RewriterError(
            f"annotation boundaries must be one of {', '.join(ANNOTATION_BOUNDARIES)}, not '{annotation_boundaries}'"
        )
    timings: dict[str, float] = {}
    start = time.perf_counter()
    level_number = parse_level(level)
    user_packs = [item if isinstance(item, Pack) else load_pack(Path(item)) for item in rules or ()]
    packs = _select_packs(level_number, user_packs, bundled)
    if not layout_may_grow:
        packs = [_without_growing_rules(p) for p in packs]
    warnings = pack_warnings(level_number, user_packs)
    kernels = KernelTables.from_files(provider_kernels)
    provider_order = provider_list(providers)
    parse_layer_assignment(layer_assignment)  # a bad setting fails before any work
    timings["load rules"] = time.perf_counter() - start

    source = _as_model(model_or_path)
    if progress is not None:
        progress(Progress("build view"))
    start = time.perf_counter()
    state = ModelState(source, on_load=load_hook(b for p in packs if p.level <= 1 for b in p.builtins))
    timings["build view"] = time.perf_counter() - start
    start_run(state.view.initializer_bytes)  # what the rules' expressions may make (expr/budget.py)
    try:
        result = _run_levels(
            state,
            source,
            packs,
            level_number,
            provider_order,
            layer_assignment,
            annotation_boundaries,
            RunOptions.from_environment(
                max_rewrites,
                kernels,
                float16_in_float32=not keep_float16,
                progress=progress,
                layout_may_grow=layout_may_grow,
            ),
            timings,
            explainer,
        )
        result.report.warnings.extend(warnings)
        return result
    finally:
        end_run()


def _run_levels(
    state: ModelState,
    source: ModelProto,
    packs: list[Pack],
    level_number: int,
    provider_order: list[str],
    layer_assignment: str | None,
    annotation_boundaries: str,
    options: RunOptions,
    timings: dict[str, float],
    explainer: Explainer | None = None,
) -> Result:
    """Each level in order (partitioning between 1 and 2), then the report."""
    report = Report(nodes_before=len(source.graph.node), ops_before=op_histogram(source))
    if state.removed_on_load:  # a built-in's first round, done while loading
        report.builtins[state.counted_as] = state.removed_on_load
    levels = sorted({p.level for p in packs})
    saved: _Budget | None = None  # the model as the layout level found it (see _Budget)
    log: dict[str, tuple[str, tuple[str, ...]]] = {}  # every node the main graph's rewrites made
    before = Placement(after_partition=False, respect_annotations=annotation_boundaries == "respect")
    for lvl in (lvl for lvl in levels if lvl <= 1):
        _run_level(state, packs, lvl, before, options, report, timings, explainer=explainer, log=log)
    _optimize_functions(state, packs, before, options, report, timings, explainer)
    if level_number >= 2:
        if options.progress is not None:
            options.progress(Progress("partition"))
        start = time.perf_counter()
        report.partition = partition(state, provider_order, layer_assignment, options.kernels)
        _partition_subgraphs(state, provider_order, layer_assignment, report.partition, options.kernels)
        if options.float16_in_float32 and CPU in provider_order:
            report.partition.float32_nodes = compute_float16_in_float32(state, options.kernels.table(CPU))
        timings["partition"] = time.perf_counter() - start
        for lvl in (lvl for lvl in levels if lvl >= 2):
            if lvl >= LAYOUT_LEVEL and saved is None and not options.layout_may_grow:
                saved = _Budget(state, report)
            _run_level(
                state,
                packs,
                lvl,
                Placement(after_partition=True),
                options,
                report,
                timings,
                explainer=explainer,
                log=log,
            )

    result: ModelState | SavedModel = state
    nodes = state.view.nodes_in_order()
    if saved is not None and len(nodes) > saved.nodes:
        saved.undo(report, len(nodes))
        result, nodes = saved.model, saved.model.nodes()
    report.nodes_after = len(nodes)
    report.ops_after = op_histogram(nodes)
    if report.partition is not None:
        report.providers_after = dict(Counter(provider_of(n) or "" for n in nodes))
    casts = report.partition is not None and report.partition.float32_nodes > 0
    report.provenance = Provenance(_made_here(nodes, log, source if casts else None), log)
    report.seconds = timings
    return Result(result, report)


LAYOUT_LEVEL = LEVEL_NAMES["layout"]


class _Budget:
    """The node budget of the layout level: ``--level all`` never gives more nodes than
    ``--level extended``.  Its NCHWc reorders and the fusions it splits back buy speed with
    nodes (onnxruntime's own ORT_ENABLE_ALL output is often larger than its extended one);
    unless the run lets it grow (``layout_may_grow``), the model as the layout level found
    it is kept here, and given back whole when the level left more nodes than that — a
    blocked region's gain and cost are only known once its reorders have cancelled, so the
    level is undone as a whole, not rewrite by rewrite.  Rules marked ``grows`` (each of
    their rewrites adds nodes) are not run at all then (see ``_without_growing_rules``)."""

    def __init__(self, state: ModelState, report: Report) -> None:
        self.nodes = len(state.view.nodes_in_order())
        self.model = SavedModel(state.model_parts())
        self.builtins = dict(report.builtins)
        self.rules = len(report.rules)  # the rows of the levels before

    def undo(self, report: Report, made: int) -> None:
        """Say in ``report`` that the layout level was undone (its rules applied nothing)."""
        for row in report.rules[self.rules :]:
            row.applied = 0
        report.builtins = self.builtins
        report.warnings.append(
            f"the layout level was undone: it left {made} nodes where the extended level left "
            f"{self.nodes} (--layout-may-grow keeps it, for its speed offline)"
        )


def _growing_rule_notes(packs: list[Pack], names: list[str]) -> list[Note]:
    """A note per rule asked about by name that the run leaves out as ``grows``."""
    wanted = set(names)
    return [
        Note(f"rule '{rule.name}' is marked grows (it adds nodes for speed): it runs only with --layout-may-grow")
        for pack in packs
        for rule in pack.rules
        if rule.grows and rule.name in wanted
    ]


def _without_growing_rules(pack: Pack) -> Pack:
    """``pack`` without its rules marked ``grows`` (a run whose layout level may not grow)."""
    if not any(rule.grows for rule in pack.rules):
        return pack
    return dataclasses.replace(pack, rules=tuple(rule for rule in pack.rules if not rule.grows))


def _made_here(
    nodes: list, log: dict[str, tuple[str, tuple[str, ...]]], source: ModelProto | None
) -> list[tuple[str, str, tuple[str, ...]]]:
    """(name, rule, replaced) of each node this run made: the rewrites' nodes still there
    (their names are fresh, never the input's), and given the ``source`` model the float16
    step's Casts (their provenance metadata says so; an input node keeps its name, and what
    an earlier run recorded on it is not this run's doing)."""
    made = []
    inputs = {node.name for node in source.graph.node} if source is not None else set()
    for node in nodes:
        entry = log.get(node.name)
        if entry is not None:
            made.append((node.name, *entry))
        elif source is not None and node.op_type == "Cast" and node.name not in inputs:
            values = {e.key: e.value for e in node.metadata_props}
            if values.get(RULE_KEY) == FLOAT16_STEP:
                made.append((node.name, FLOAT16_STEP, ()))
    return made


def _run_level(
    state,
    packs: list[Pack],
    lvl: int,
    placement: Placement,
    options: RunOptions,
    report: Report,
    timings: dict[str, float],
    counts: dict[str, RuleCount] | None = None,
    explainer: Explainer | None = None,
    graph: str = "",
    log: dict[str, tuple[str, tuple[str, ...]]] | None = None,
) -> None:
    """Run one level on a graph, then on each of its subgraphs (recursively); ``graph``
    names it for the explainer ("" for the main graph); ``log`` is told every node the
    level's rewrites made (see ``LevelStats.created``)."""
    level_packs = [p for p in packs if p.level == lvl]
    runner = LevelRunner(
        state,
        level_packs,
        name=", ".join(p.name for p in level_packs),
        placement=placement,
        options=options,
        on_start=explainer.level_hook(graph) if explainer is not None else None,
    )
    if options.progress is not None:
        options.progress(Progress(runner.phase))
    stats = runner.run()
    if log is not None:
        log.update(stats.created)
    timings["match"] = timings.get("match", 0.0) + stats.match_seconds
    timings["rewrite"] = timings.get("rewrite", 0.0) + stats.rewrite_seconds
    timings["builtins"] = timings.get("builtins", 0.0) + stats.builtin_seconds
    if counts is None:  # the main graph: one row per rule, subgraphs add to it
        counts = {}
        for rule in runner.rules:
            counts[rule.name] = RuleCount(rule.name, lvl, 0, 0)
            report.rules.append(counts[rule.name])
    for name, count in stats.applied.items():
        counts[name].applied += count
    for name, count in stats.refused.items():
        counts[name].refused += count
    for name, seconds in stats.rule_seconds.items():
        counts[name].seconds += seconds
    for name, count in stats.builtins.items():
        report.builtins[name] = report.builtins.get(name, 0) + count
    for name, seconds in stats.builtin_time.items():
        report.builtin_seconds[name] = report.builtin_seconds.get(name, 0.0) + seconds
    for sub in list(state.subgraph_states()):
        inner = f"subgraph '{sub.graph.name}'"
        _run_level(sub, packs, lvl, placement, options, report, timings, counts, explainer, inner)
        sub.write_back()


def _optimize_functions(
    state: ModelState,
    packs: list[Pack],
    placement: Placement,
    options: RunOptions,
    report: Report,
    timings: dict[str, float],
    explainer: Explainer | None = None,
) -> None:
    """Model-local function bodies get the levels that run before partitioning (ONNX
    Runtime inlines functions before it partitions; later levels see only the main graph)."""
    counts = {row.rule: row for row in report.rules}
    for function in state.functions:
        fstate = FunctionState(state, function)
        for lvl in sorted({p.level for p in packs if p.level <= 1}):
            graph = f"function '{function.name}'"
            _run_level(fstate, packs, lvl, placement, options, report, timings, counts, explainer, graph)
        fstate.write_back()


def _partition_subgraphs(
    state, providers: list[str], layer_assignment: str | None, part: PartitionReport, kernels: KernelTables
) -> None:
    """Subgraph nodes are placed by the same rules (ONNX Runtime partitions them too)."""
    for sub in list(state.subgraph_states()):
        inner = partition(sub, providers, layer_assignment, kernels)
        for provider, count in inner.counts.items():
            part.counts[provider] = part.counts.get(provider, 0) + count
        part.warnings.extend(inner.warnings)
        _partition_subgraphs(sub, providers, layer_assignment, part, kernels)
        sub.write_back()
