"""``optimize``'s report as tables: the rules that did something (with the time each took),
the built-in passes (what their number counts), the ops whose count changed, node counts
and phase times, and the placement from level 2 on.  ``--json`` writes the same data
(``Report.to_json``); these are for reading."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..onnx_facts.providers import short_name
from ..report import Report

# What the nodes a built-in removed were ("63 nodes" alone left readers guessing)
BUILTIN_WORK = {
    "constant_folding": "folded into constants",
    "common_subexpression_elimination": "duplicates merged",
}


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def print_rules(out: Console, report: Report, title: str) -> None:
    """Rules that applied or had matches refused, then the built-ins that removed nodes;
    a closing row sums the time of the rules that did neither (tried, never applied)."""
    table = Table(title=title, title_justify="left")
    table.add_column("rule")
    table.add_column("level", justify="right")
    table.add_column("applied", justify="right")
    table.add_column("refused", justify="right")
    table.add_column("ms", justify="right")
    idle, idle_seconds = 0, 0.0
    for row in report.rules:
        if row.applied or row.refused:
            table.add_row(row.rule, str(row.level), str(row.applied), str(row.refused), _ms(row.seconds))
        else:
            idle += 1
            idle_seconds += row.seconds
    for name, removed in report.builtins.items():
        if removed:
            what = f" ({BUILTIN_WORK[name]})" if name in BUILTIN_WORK else ""
            seconds = report.builtin_seconds.get(name)
            table.add_row(
                f"[builtin] {name}{what}", "", f"removed {removed} nodes", "", "" if seconds is None else _ms(seconds)
            )
    if not table.row_count:
        out.print("no rule applied")
        return
    if idle:
        table.add_row(f"({idle} other rules: never applied)", "", "", "", _ms(idle_seconds), style="dim")
    out.print(table)


def print_op_changes(out: Console, report: Report) -> None:
    """The ops whose node count changed: went first, then came, most first."""
    changes = report.op_changes()
    if not changes:
        return
    table = Table(title="ops", title_justify="left")
    table.add_column("op")
    table.add_column("before", justify="right")
    table.add_column("after", justify="right")
    table.add_column("change", justify="right")
    for change in changes:
        table.add_row(change.name, str(change.before), str(change.after), f"{change.change:+d}")
    out.print(table)


def print_totals(out: Console, report: Report) -> None:
    phases = ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in report.seconds.items())
    out.print(
        f"nodes: {report.nodes_before} -> {report.nodes_after}   time: {report.total_seconds * 1000:.1f} ms ({phases})",
        soft_wrap=True,
        markup=False,
    )


def print_partition(out: Console, err: Console, report: Report) -> None:
    """Nodes per provider at partition time and at the end, the float16 step, what each
    layer-assignment rule placed; the partitioner's warnings on ``err``."""
    part = report.partition
    if part is None:
        return
    table = Table(title="placement", title_justify="left")
    table.add_column("provider")
    table.add_column("nodes at partition", justify="right")
    table.add_column("nodes after", justify="right")
    for provider in part.providers:
        table.add_row(
            short_name(provider), str(part.counts.get(provider, 0)), str(report.providers_after.get(provider, 0))
        )
    out.print(table)
    if part.float32_nodes:
        out.print(
            f"float16 computed in float32 on the CPU (it has no float16 kernels for them): {part.float32_nodes} nodes"
            " (--keep-float16 leaves them)"
        )
    if part.decisions:
        rules = Table(title="layer assignment", title_justify="left")
        rules.add_column("rule")
        rules.add_column("provider")
        rules.add_column("placed", justify="right")
        rules.add_column("fell back", justify="right")
        for decision in part.decisions:
            rules.add_row(
                decision.rule,
                short_name(decision.provider) if decision.provider else "-",
                str(decision.placed),
                str(decision.fell_back),
            )
        out.print(rules)
    for warning in part.warnings:
        err.print(f"warning: {warning}", markup=False, soft_wrap=True)
