"""The ``rewriter`` command line.  Errors are rendered here, once: one line, exit code 2.

rewriter optimize IN.onnx -o OUT.onnx --level basic [--rules FILE ...] [--explain RULE ...] [--json FILE]
rewriter explain MODEL [--rule NAME ...] [--node NODE ...] [--json FILE]
rewriter check FILE.rules ...
rewriter rules [--level LEVEL] [--rule NAME ...] [--rules FILE ...] [--json FILE]
"""

from __future__ import annotations

import os
import sys
import time
import traceback
import unicodedata
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from .disk_cache import CACHE_SWITCH_VARIABLE
from .errors import ModelError, RewriterError, RuleError
from .limits import MemoryCeiling, parse_size
from .signals import Interrupted, interruptible
from .version import __version__

if TYPE_CHECKING:
    from rich.console import Console, JustifyMethod

# Each command imports what it needs (rich, the engine) when it runs: ``--version`` and
# ``--help`` print a line without onnx, onnxruntime or NetworkX (half a second).

EXIT_USAGE = 2
MAX_MESSAGE = 2000  # characters of an error line (names in it come from the input)


class OutputLost(Exception):
    """Standard output or error could not be written (a pipe whose reader left, ``> /dev/full``):
    the run ends with one line and exit code 2, not as an internal error."""

    def __init__(self, stream: str, error: OSError) -> None:
        which = "standard output" if stream == "stdout" else "standard error"
        super().__init__(f"cannot print: {which} failed ({error.strerror or error})")
        self.stream = stream


class _Stream:
    """``sys.stdout`` or ``sys.stderr`` as it is when written to (tests swap them), whose
    failed writes raise ``OutputLost``: rich would turn a closed pipe into a silent exit 1 of
    its own and let a full device through as an ``OSError`` that looks like an engine bug."""

    def __init__(self, name: str) -> None:
        self.name = name

    def write(self, text: str) -> int:
        try:
            return getattr(sys, self.name).write(text)
        except OSError as error:
            raise OutputLost(self.name, error) from None

    def flush(self) -> None:
        try:
            getattr(sys, self.name).flush()
        except OSError as error:
            raise OutputLost(self.name, error) from None

    def __getattr__(self, attribute: str) -> object:  # isatty, fileno, encoding...
        return getattr(getattr(sys, self.name), attribute)


@cache
def _console(stderr: bool = False) -> Console:
    """Rich console (made when first printed to); when output is not a terminal, wide
    enough not to truncate names."""
    from rich.console import Console

    probe = Console(stderr=stderr)
    stream = _Stream("stderr" if stderr else "stdout")
    # markup off: what is printed holds the user's text (paths, layer-assignment rules), and
    # `[/x]` in a directory name was a MarkupError; styles are given as Text where wanted
    width = None if probe.is_terminal else 160
    return Console(file=stream, highlight=False, markup=False, width=width)  # type: ignore[arg-type]


def _silence(stream: str) -> None:
    """Point a failed standard stream at /dev/null, so that what it still buffers does not
    fail again when Python flushes it on the way out (a second message, exit code 120)."""
    try:
        fd = getattr(sys, stream).fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # (no file descriptor: a test's stream)
        pass


def out() -> Console:
    """Where reports go (stdout)."""
    return _console()


def err() -> Console:
    """Where warnings and verdicts go (stderr)."""
    return _console(stderr=True)


def one_line(text: str) -> str:
    """``text`` as one line: control characters (a newline in a node name) escaped, and
    cut at ``MAX_MESSAGE`` characters."""
    escaped = "".join(repr(c)[1:-1] if unicodedata.category(c)[0] == "C" else c for c in str(text))
    return escaped if len(escaped) <= MAX_MESSAGE else escaped[:MAX_MESSAGE] + "..."


def _say(line: str) -> None:
    """Write one line to stderr (plainly: no markup, no wrapping)."""
    try:
        sys.stderr.write(one_line(line) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed: the exit code still tells
        pass


def _fail(error: BaseException | str) -> NoReturn:
    """Any error a user can cause: one line on stderr, exit code 2."""
    _say(f"error: {error}")
    sys.exit(EXIT_USAGE)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rewriter")
def cli() -> None:
    """ONNX graph optimizations written as text rules."""


@cli.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    required=True,
    help="Where to write the optimized model (written atomically).",
)
@click.option(
    "--level",
    default="basic",
    show_default=True,
    help="basic, extended, layout, all, or 0-4: runs every pack up to it.",
)
@click.option(
    "--rules",
    "rule_files",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Extra .rules pack(s) to run with the bundled ones (repeatable).",
)
@click.option("--no-bundled", is_flag=True, help="Run only the --rules packs.")
@click.option(
    "--providers",
    default="CPU",
    show_default=True,
    help="Execution providers in priority order (CUDA,CPU or full names); CPU is "
    "appended when missing.  Used from level 2 (extended) on.",
)
@click.option(
    "--layer-assignment", default=None, help='ONNX Runtime layering setting, e.g. "gpu(encoder); cpu(=final_output)".'
)
@click.option(
    "--annotation-boundaries",
    type=click.Choice(["root", "respect"]),
    default="root",
    show_default=True,
    help="respect: never fuse nodes with different layer_ann (root: the root's wins).",
)
@click.option(
    "--provider-kernels",
    multiple=True,
    type=click.Path(path_type=Path),
    help="A .kernels file describing another provider's kernels (repeatable).",
)
@click.option(
    "--max-rewrites",
    type=click.IntRange(min=0),
    default=None,
    help="Bound on rewrites per level before reporting a pack that never settles (0: any rewrite is reported).",
)
@click.option(
    "--external-data",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Write initializers to one data file beside the output: auto = when the "
    "input had external data or the model exceeds 2 GB.",
)
@click.option(
    "--external-data-file",
    default=None,
    help="Name of that file, beside the output (default: OUTPUT_NAME.data); never "
    "an existing file this run did not write.",
)
@click.option(
    "--external-data-threshold",
    type=click.IntRange(min=0),
    default=1024,
    show_default=True,
    help="Only tensors of at least this many bytes go there.",
)
@click.option(
    "--max-memory",
    default="auto",
    show_default=True,
    help="Address-space ceiling of the run (e.g. 4G; none): past it the run stops "
    "with an error.  auto: 1 GiB plus a multiple of the inputs' size.",
)
@click.option(
    "--keep-float16",
    is_flag=True,
    help="Leave float16 the CPU has no kernels for as it is (default: computed in float32, as onnxruntime runs it).",
)
@click.option(
    "--layout-may-grow",
    is_flag=True,
    help="Let the layout level (all) leave more nodes than the extended level, for its speed "
    "offline: NCHWc reorders, fusions split back where onnxruntime's CPU kernel is slower "
    "(default: never larger; where it would be, the level is undone).",
)
@click.option(
    "--explain",
    "explain_rules",
    multiple=True,
    help="Explain this rule (repeatable): why it did or did not apply at each candidate root, "
    "on the graph as its level began (printed even with -q).",
)
@click.option(
    "--json",
    "json_file",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write the report as JSON: rules, built-ins, op changes, times, placement, and each "
    "created node with the nodes it replaced (written atomically; never an input or the -o output).",
)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors (and no progress bar).")
@click.option("--no-cache", is_flag=True, help="Parse every pack; neither read nor write the pack cache.")
def optimize(
    model: Path,
    output: Path,
    level: str,
    rule_files: tuple[Path, ...],
    no_bundled: bool,
    providers: str,
    layer_assignment: str | None,
    annotation_boundaries: str,
    provider_kernels: tuple[Path, ...],
    max_rewrites: int | None,
    external_data: str,
    external_data_file: str | None,
    external_data_threshold: int,
    max_memory: str,
    keep_float16: bool,
    layout_may_grow: bool,
    explain_rules: tuple[str, ...],
    json_file: Path | None,
    quiet: bool,
    no_cache: bool,
) -> None:
    """Optimize MODEL with the rule packs up to --level and write it to -o."""
    _cache_off(no_cache)
    from .graph.json_file import check_json_output, write_json
    from .graph.model_io import check_output, read_model, save_model, written_files
    from .graph.output_file import file_status
    from .pipeline import optimize as run_optimize
    from .terminal.progress import RunProgress
    from .terminal.tables import print_op_changes, print_partition, print_rules, print_totals
    from .text_files import text_size

    ceiling = _ceiling(max_memory)
    inputs = file_status([model, *rule_files, *provider_kernels])  # never written over
    bar = RunProgress(err(), enabled=not quiet)
    try:
        with bar:  # (closed before any error is said)
            # outputs that would be refused are refused before any work
            target = check_output(output, external_data, external_data_file, inputs)
            outputs = written_files(target, external_data, external_data_file)
            if json_file is not None:
                check_json_output(json_file, inputs, outputs)
            ceiling.allow(rules_bytes=sum(text_size(f) for f in (*rule_files, *provider_kernels)))
            bar.phase("reading the model")
            try:
                loaded = read_model(model, reserve=lambda nbytes: ceiling.allow(input_bytes=nbytes))
            except ModelError as error:
                raise error if str(error).startswith(str(model)) else ModelError(f"{model}: {error}") from None
            ceiling.allow(nodes=len(loaded.model.graph.node))
            protected = loaded.protected() + inputs
            check_output(output, external_data, external_data_file, protected)
            try:
                result = run_optimize(
                    loaded.model,
                    level=level,
                    rules=list(rule_files),
                    bundled=not no_bundled,
                    max_rewrites=max_rewrites,
                    providers=providers,
                    layer_assignment=layer_assignment,
                    annotation_boundaries=annotation_boundaries,
                    provider_kernels=list(provider_kernels),
                    keep_float16=keep_float16,
                    layout_may_grow=layout_may_grow,
                    explain=list(explain_rules),
                    progress=bar if bar.enabled else None,
                )
            except ModelError as error:
                raise ModelError(f"{model}: {error}") from None
            if json_file is not None:
                check_json_output(json_file, protected, outputs)
            bar.phase("writing the model")
            start = time.perf_counter()
            save_model(
                result,
                output,
                external_data=external_data,
                location=external_data_file,
                size_threshold=external_data_threshold,
                source_used_external=loaded.had_external,
                protect=protected,
            )
            result.report.seconds["write"] = time.perf_counter() - start
            if json_file is not None:
                written = [] if target.in_place else file_status(outputs)
                write_json(result.report.to_json(), json_file, protected + written, outputs)
    except RewriterError as error:
        _fail(error)
    except MemoryError:
        _fail(f"out of memory: the run needed more than {ceiling.describe()} (raise it with --max-memory)")
    if not quiet:
        print_rules(out(), result.report, f"{model} -> {output}")
        print_op_changes(out(), result.report)
        print_totals(out(), result.report)
        for warning in result.report.warnings:
            err().print(f"warning: {warning}", markup=False, soft_wrap=True)
        print_partition(out(), err(), result.report)
    if result.report.explanation is not None:
        _print_explanation(result.report.explanation, limit=0)


@cli.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--rule", "rule_names", multiple=True, help="Explain only this rule (repeatable).")
@click.option("--node", "node_names", multiple=True, help="Only at the node of this name (repeatable).")
@click.option(
    "--level",
    default="all",
    show_default=True,
    help="Rules of the packs up to this level; the run stops at the highest level of the rules explained.",
)
@click.option("--rules", "rule_files", multiple=True, type=click.Path(path_type=Path), help="Extra .rules pack(s).")
@click.option("--no-bundled", is_flag=True, help="Only the --rules packs.")
@click.option("--providers", default="CPU", show_default=True, help="Execution providers, as for optimize.")
@click.option("--layer-assignment", default=None, help="ONNX Runtime layering setting, as for optimize.")
@click.option(
    "--provider-kernels", multiple=True, type=click.Path(path_type=Path), help="A .kernels file (repeatable)."
)
@click.option(
    "--annotation-boundaries",
    type=click.Choice(["root", "respect"]),
    default="root",
    show_default=True,
    help="As for optimize.",
)
@click.option("--keep-float16", is_flag=True, help="As for optimize.")
@click.option(
    "--layout-may-grow", is_flag=True, help="As for optimize (rules marked grows are explained only with it)."
)
@click.option("--json", "json_file", type=click.Path(path_type=Path), default=None, help="Also write it all as JSON.")
@click.option("--limit", type=click.IntRange(min=0), default=20, show_default=True, help="Blocks printed (0: all).")
@click.option("--max-memory", default="auto", show_default=True, help="Address-space ceiling, as for optimize.")
def explain(
    model: Path,
    rule_names: tuple[str, ...],
    node_names: tuple[str, ...],
    level: str,
    rule_files: tuple[Path, ...],
    no_bundled: bool,
    providers: str,
    layer_assignment: str | None,
    provider_kernels: tuple[Path, ...],
    annotation_boundaries: str,
    keep_float16: bool,
    layout_may_grow: bool,
    json_file: Path | None,
    limit: int,
    max_memory: str,
) -> None:
    """Why rules do or do not apply to MODEL: for each rule and candidate root, the deepest
    partial match and the first thing that failed, closest first."""
    from .graph.json_file import check_json_output, write_json
    from .graph.model_io import read_model
    from .graph.output_file import file_status
    from .pipeline import explain as run_explain
    from .text_files import text_size

    ceiling = _ceiling(max_memory)
    inputs = file_status([model, *rule_files, *provider_kernels])
    try:
        if json_file is not None:  # refused before any work
            check_json_output(json_file, inputs)
        ceiling.allow(rules_bytes=sum(text_size(f) for f in (*rule_files, *provider_kernels)))
        try:
            loaded = read_model(model, reserve=lambda nbytes: ceiling.allow(input_bytes=nbytes))
        except ModelError as error:
            raise error if str(error).startswith(str(model)) else ModelError(f"{model}: {error}") from None
        ceiling.allow(nodes=len(loaded.model.graph.node))
        try:
            explanation = run_explain(
                loaded.model,
                level=level,
                rules=list(rule_files),
                rule=list(rule_names) or None,
                node=list(node_names) or None,
                providers=providers,
                layer_assignment=layer_assignment,
                bundled=not no_bundled,
                annotation_boundaries=annotation_boundaries,
                provider_kernels=list(provider_kernels),
                keep_float16=keep_float16,
                layout_may_grow=layout_may_grow,
            )
        except ModelError as error:
            raise ModelError(f"{model}: {error}") from None
        if json_file is not None:
            write_json(explanation.to_json(), json_file, loaded.protected() + inputs)
    except RewriterError as error:
        _fail(error)
    except MemoryError:
        _fail(f"out of memory: the run needed more than {ceiling.describe()} (raise it with --max-memory)")
    _print_explanation(explanation, limit)


def _print_explanation(explanation, limit: int) -> None:
    from .explanation.render import render

    for line in render(explanation, limit):
        out().print(line, soft_wrap=True)


def _cache_off(no_cache: bool) -> None:
    """``--no-cache``: as ``REWRITER_CACHE=0`` (README.md, "Cache") for this command; the
    variable is given back as it was when the command ends (run in-process, it must not
    turn the cache off for the rest of that process)."""
    if not no_cache:
        return
    before = os.environ.get(CACHE_SWITCH_VARIABLE)
    os.environ[CACHE_SWITCH_VARIABLE] = "0"

    def give_back() -> None:
        if before is None:
            os.environ.pop(CACHE_SWITCH_VARIABLE, None)
        else:
            os.environ[CACHE_SWITCH_VARIABLE] = before

    click.get_current_context().call_on_close(give_back)


def _ceiling(max_memory: str) -> MemoryCeiling:
    from .limits import TooLittle

    try:
        size = None if max_memory == "auto" else parse_size(max_memory)
        ceiling = MemoryCeiling(size, automatic=max_memory == "auto")
    except TooLittle as error:
        _fail(f"out of memory: --max-memory {error}")
    except ValueError as error:
        _fail(f"--max-memory: {error}")
    # the limit ends with the command, however it ends (an error's exit included)
    click.get_current_context().call_on_close(ceiling.release)
    return ceiling


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
def check(files: tuple[Path, ...]) -> None:
    """Parse and type-check .rules files; every error as file:line:col: message."""
    from .dsl import check_pack, parse_pack_file
    from .dsl.parse import snippet
    from .text_files import read_text

    failed = False
    for path in files:
        try:
            pack = parse_pack_file(path)
        except RuleError as error:
            _say_error(error)
            failed = True
            continue
        errors = check_pack(pack)
        if errors:
            text = read_text(path)  # (read once already: it is a bounded regular file)
            for problem in errors:
                problem.snippet = snippet(text, problem.line, problem.column)
                _say_error(problem)
            failed = True
        else:
            out().print(f"{path}: ok, pack '{pack.name}' level {pack.level}, {len(pack.rules)} rules", markup=False)
    if failed:
        sys.exit(EXIT_USAGE)


def _say_error(error: RuleError) -> None:
    """A rule error: one line, and at a terminal the source line with a caret under it."""
    if sys.stderr.isatty():
        for line in error.render().splitlines():
            _say(line)
    else:
        _say(str(error))


@cli.command()
@click.argument("packs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--rule", "rules", multiple=True, help="Verify only this rule (repeatable).")
@click.option(
    "--examples",
    type=click.IntRange(min=1),
    default=None,
    help="Rewritten instances to compare per rule (default 50; draws the rule does not rewrite do not count).",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the campaign: the same seed gives the same counterexamples.",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=None,
    help="Rules verified in parallel processes (default: every core).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    default=Path("verify-out"),
    show_default=True,
    help="Where counterexamples are written (OUT/PACK/RULE/).",
)
@click.option("--strict", is_flag=True, help="Also fail (exit 1) when a rule never applied.")
def verify(
    packs: tuple[Path, ...],
    rules: tuple[str, ...],
    examples: int | None,
    seed: int,
    jobs: int | None,
    out_dir: Path,
    strict: bool,
) -> None:
    """Fuzz every rule of PACKS (files or directories; default: the bundled packs): draw
    instances of each pattern, rewrite them with the engine, and compare both models in
    onnxruntime.  A failure is shrunk and saved; exit 1."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table
    from rich.text import Text

    from .verify import DEFAULT_EXAMPLES
    from .verify import verify as run_verify
    from .verify.campaign import collect_packs

    if out_dir.exists() and not out_dir.is_dir():
        _fail(f"{out_dir}: exists and is not a directory (--out names the directory counterexamples are written to)")
    try:
        chosen = collect_packs(list(packs) or None)
    except RewriterError as error:
        _fail(error)
    total = sum(1 for p, _ in chosen for r in p.rules if not rules or r.name in rules)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=err(),
        transient=True,
        disable=not err().is_terminal,
    )
    with progress:
        task = progress.add_task("verifying", total=total)

        def advance(verdict) -> None:
            progress.update(task, advance=1, description=f"{verdict.rule}: {verdict.verdict}")

        try:
            report = run_verify(
                packs=[p for p, _ in chosen],
                rule=list(rules) or None,
                examples=examples or DEFAULT_EXAMPLES,
                seed=seed,
                out=out_dir,
                on_rule=advance,
                jobs=jobs,
                isolated=True,  # -j 1 too: an onnxruntime crash is a counterexample, not our end
            )
        except RewriterError as error:
            _fail(error)
        except OSError as error:  # the counterexample directory cannot be written
            _fail(f"{out_dir}: cannot write counterexamples: {error.strerror or error}")
    table = Table(title="verification", title_justify="left")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("rule", "left"),
        ("draws", "right"),
        ("applied", "right"),
        ("near misses refused", "right"),
        ("max abs error", "right"),
        ("max rel error", "right"),
        ("seconds", "right"),
        ("verdict", "left"),
    )
    for column, justify in columns:
        table.add_column(column, justify=justify, no_wrap=column == "rule")
    for v in report.verdicts:
        style = {"ok": "green", "FAIL": "bold red", "unverified": "yellow"}[v.verdict]
        table.add_row(
            f"{v.pack}.{v.rule}",
            str(v.draws),
            str(v.applied),
            f"{v.near_misses_refused}/{v.near_misses}",
            f"{v.max_abs:.2g}",
            f"{v.max_rel:.2g}",
            f"{v.seconds:.1f}",
            Text(v.verdict, style=style),
        )
    out().print(table)
    out().print(
        f"{len(report.verdicts)} rules in {report.seconds:.1f} s: {len(report.failed)} failed, "
        f"{len(report.unverified)} unverified",
        markup=False,
    )
    for v in report.verdicts:
        if v.verdict == "FAIL":
            where = f"\n  counterexample: {v.artifacts}/ ({_artifact_files(v.artifacts)})" if v.artifacts else ""
            err().print(
                f"FAIL {v.pack}.{v.rule}: {v.message} (max abs error {v.max_abs:.3g}, max rel "
                f"error {v.max_rel:.3g}){where}",
                markup=False,
                soft_wrap=True,
            )
        elif v.verdict == "unverified":
            err().print(f"unverified {v.pack}.{v.rule}: {v.message}", markup=False, soft_wrap=True)
        elif v.message:  # verified, with a caveat (a budget that cut the drawing, runs left out)
            where = f" (kept: {v.artifacts}/)" if v.artifacts else ""
            err().print(f"note {v.pack}.{v.rule}: {v.message}{where}", markup=False, soft_wrap=True)
    if report.failed or (strict and report.unverified):
        sys.exit(1)


def _artifact_files(directory: Path) -> str:
    """The counterexample's files that exist: there is no ``after.onnx`` when the engine
    refused the rewrite (a type or shape it would change), and naming one sends the reader
    looking for it."""
    names = ("before.onnx", "after.onnx", "inputs.npz", "report.txt")
    return ", ".join(name for name in names if (Path(directory) / name).is_file())


@cli.command(name="rules")
@click.option("--level", default="all", show_default=True, help="Show packs up to this level.")
@click.option("--rule", "rule_names", multiple=True, help="Only the rule of this name (repeatable).")
@click.option("--rules", "rule_files", multiple=True, type=click.Path(path_type=Path), help="Also these .rules packs.")
@click.option("--no-bundled", is_flag=True, help="Only the --rules packs.")
@click.option("--json", "json_file", type=click.Path(path_type=Path), default=None, help="Also write the list as JSON.")
@click.option("--no-cache", is_flag=True, help="Parse every pack; neither read nor write the pack cache.")
def list_rules(
    level: str,
    rule_names: tuple[str, ...],
    rule_files: tuple[Path, ...],
    no_bundled: bool,
    json_file: Path | None,
    no_cache: bool,
) -> None:
    """List the rule packs and each rule with its level and the comment written above it."""
    _cache_off(no_cache)
    from .dsl import load_pack
    from .graph.json_file import check_json_output, write_json
    from .graph.output_file import file_status
    from .pipeline import LEVEL_LABELS, bundled_packs, parse_level
    from .resources import bundled_pack_paths
    from .terminal.rule_list import print_rule_list, rules_json

    inputs = file_status([*rule_files, *([] if no_bundled else bundled_pack_paths())])
    only = set(rule_names) or None
    try:
        if json_file is not None:
            check_json_output(json_file, inputs)
        limit = parse_level(level)
        packs = [] if no_bundled else bundled_packs()
        packs += [load_pack(path) for path in rule_files]
        packs = [p for p in packs if p.level <= limit]
        known = {r.name for p in packs for r in p.rules}
        for name in rule_names:
            if name not in known:
                raise RewriterError(f"no rule '{name}' in the packs up to level {limit}")
        if json_file is not None:
            write_json(rules_json(packs, only), json_file, inputs)
    except RewriterError as error:
        _fail(error)
    print_rule_list(out(), packs, LEVEL_LABELS, only)


def main() -> None:
    """Entry point: any error a user can cause exits 2 with one line; bugs exit 1.

    Usage errors (click's), termination signals (after cleanup: no temporary file is
    left), running out of memory and nesting too deep for Python's stack are errors a user
    can cause too."""
    try:
        _main()
    finally:
        _leave_objects_to_the_exit()


def _leave_objects_to_the_exit() -> None:
    """The process ends next, and its objects with it.  Python's shutdown would first run
    full cyclic collections over every one of them — 150-250 ms after optimizing a small
    model, more than the run itself; frozen (``gc.freeze``), they are skipped.  atexit
    handlers and module teardown still run, and every file was closed by its writer."""
    import gc

    gc.freeze()


def _main() -> None:
    with interruptible():
        try:
            code = cli.main(standalone_mode=False)
        except click.exceptions.Exit as done:  # --help, --version
            code = done.exit_code
        except click.ClickException as error:
            _fail(error.format_message())
        except click.Abort:
            _fail("aborted")
        except RewriterError as error:  # pragma: no cover - commands catch their own
            _fail(error)
        except Interrupted as signal_:
            _fail(f"{signal_}; nothing was written")
        except MemoryError:
            _fail("out of memory (see --max-memory)")
        except RecursionError:
            _fail("input nested too deeply to process")
        except OutputLost as lost:
            _silence(lost.stream)
            _fail(lost)  # (nothing is said when it is stderr that failed; the exit code tells)
        except BrokenPipeError:
            _silence("stdout")
            _fail("cannot print: the output stream was closed")
        except Exception as error:  # an engine bug: say so briefly; details on demand
            _say(f"internal error: {error.__class__.__name__}: {error}")
            _say("please report this with the model and rules that caused it; set REWRITER_DEBUG=1 for a traceback")
            if _debug():
                traceback.print_exc()
            sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


def _debug() -> bool:
    return bool(os.environ.get("REWRITER_DEBUG"))


if __name__ == "__main__":  # pragma: no cover
    main()
