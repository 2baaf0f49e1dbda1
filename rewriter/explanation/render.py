"""An explanation as readable text (rich ``Text`` lines), most useful first.

The first line sums up; then one block per attempt, closest first: its first line names
the rule, the root, the cause and the node it concerns; below it the hint, what the check
saw, and every equation with the node it bound (``✓``), the node it failed at (``✗``) or
``not reached``.  Attempts of one rule that fail alike (same outcome, cause kind and
equation: one per transformer layer, say) are one block naming the other roots.  Attempts
that apply take one line each, after the others.  The JSON form (``Explanation.to_json``)
holds every attempt in full.
"""

from __future__ import annotations

import unicodedata

from rich.text import Text

from .model import Attempt, Explanation, Note

DEFAULT_LIMIT = 20  # blocks shown unless asked otherwise
MAX_GROUPED = 12  # rule names listed in one "no candidate root" line
MAX_ALIKE = 5  # other roots named under a block


def render(explanation: Explanation, limit: int | None = DEFAULT_LIMIT) -> list[Text]:
    """The lines to print; ``limit``: attempts shown (None or 0: all)."""
    lines = [_summary(explanation)]
    rule_notes = [n for n in explanation.notes if n.rule is not None]
    for note in explanation.notes:
        if note.rule is None:
            lines.append(Text(f"! {_clean(note.message)}", style="yellow"))
    if not explanation.attempts and rule_notes:
        lines += _rule_notes(rule_notes, grouped=len(rule_notes) > 5)
        return lines
    groups = _alike(explanation.attempts)
    shown = groups if not limit else groups[:limit]
    for group in shown:
        lines += _attempt(group[0])
        if len(group) > 1:
            others = ", ".join(f"'{_clean(a.root)}'" for a in group[1 : 1 + MAX_ALIKE])
            more = f" and {len(group) - 1 - MAX_ALIKE} more" if len(group) - 1 > MAX_ALIKE else ""
            lines.append(Text(f"    same at {_count(len(group) - 1, 'more root')}: {others}{more}", style="dim"))
    hidden = sum(len(g) for g in groups) - sum(len(g) for g in shown)
    if hidden:
        lines.append(
            Text(f"... {_count(hidden, 'more attempt')} (--limit 0 shows all; --json FILE writes all)", style="dim")
        )
    lines += _rule_notes(rule_notes, grouped=len(rule_notes) > 5)
    return lines


def _alike(attempts: list[Attempt]) -> list[list[Attempt]]:
    """Attempts grouped by rule, outcome, cause kind and the equation they failed at, each
    group where its first attempt is."""
    groups: dict[tuple, list[Attempt]] = {}
    for attempt in attempts:
        failed = next((b.equation for b in attempt.bindings if b.state == "failed"), None)
        kind = attempt.cause.kind if attempt.cause is not None else None
        key = (attempt.rule, attempt.graph, attempt.outcome, kind, attempt.matched, failed)
        groups.setdefault(key, []).append(attempt)
    return list(groups.values())


def plain(explanation: Explanation, limit: int | None = DEFAULT_LIMIT) -> str:
    """``render`` as plain text, one line per line."""
    return "\n".join(line.plain for line in render(explanation, limit))


def _summary(explanation: Explanation) -> Text:
    counts = {o: sum(1 for a in explanation.attempts if a.outcome == o) for o in ("applies", "refused", "no match")}
    rules = len({a.rule for a in explanation.attempts})
    text = (
        f"{_count(len(explanation.attempts), 'attempt')} of {_count(rules, 'rule')}: {counts['applies']} "
        f"{'applies' if counts['applies'] == 1 else 'apply'}, "
        f"{counts['refused']} refused by the engine, {counts['no match']} no match "
        f"(each on the graph as its level began; run up to level {explanation.level}"
    )
    if explanation.providers:
        text += ", providers " + ", ".join(p.removesuffix("ExecutionProvider") for p in explanation.providers)
    return Text(text + ")", style="bold")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _attempt(attempt: Attempt) -> list[Text]:
    where = f" in {attempt.graph}" if attempt.graph else ""
    head = f"{attempt.rule} at '{_clean(attempt.root)}' ({attempt.root_op}){where}"
    if attempt.outcome == "applies":
        bound = _count(attempt.equations, "equation")
        return [Text.assemble(("✓ ", "green"), (head, "green"), f": applies ({bound} bound)")]
    cause = attempt.cause
    mark, style = ("✗ ", "yellow") if attempt.outcome == "refused" else ("✗ ", "red")
    first = Text.assemble((mark, style), (head, "bold"), ": ")
    if attempt.outcome == "refused":
        first.append("matched, refused: ", style=style)
    first.append(_clean(cause.message) if cause is not None else "no reason recorded")
    lines = [first]
    if cause is not None and cause.hint:
        lines.append(Text(f"    hint: {cause.hint}", style="cyan"))
    for detail in cause.details if cause is not None else ():
        lines.append(Text(f"    saw: {_clean(detail)}"))
    lines.append(
        Text(
            f"    matched {attempt.matched} of {attempt.equations} equations "
            f"(pack {attempt.pack}, level {attempt.level}):",
            style="dim",
        )
    )
    width = min(max((len(b.equation) for b in attempt.bindings), default=0), 60)
    for binding in attempt.bindings:
        equation = binding.equation if len(binding.equation) <= 60 else binding.equation[:57] + "..."
        node = f"'{_clean(binding.node)}' ({binding.op})" if binding.node is not None else ""
        if binding.state == "bound":
            lines.append(Text.assemble("      ", ("✓ ", "green"), f"{equation:<{width}}  {node}"))
        elif binding.state == "failed":
            lines.append(Text.assemble("      ", ("✗ ", "red"), f"{equation:<{width}}  ", (node or "-", "red")))
        else:
            lines.append(Text(f"      · {equation:<{width}}  not reached", style="dim"))
    return lines


def _rule_notes(notes: list[Note], grouped: bool) -> list[Text]:
    if not notes:
        return []
    if not grouped:
        return [Text(f"- {note.rule}: {_clean(note.message)}", style="dim") for note in notes]
    names = [n.rule or "" for n in notes]
    listed = ", ".join(names[:MAX_GROUPED]) + (
        f" and {len(names) - MAX_GROUPED} more" if len(names) > MAX_GROUPED else ""
    )
    return [Text(f"- no candidate root (no node of the rule's root op) for {len(names)} rules: {listed}", style="dim")]


def _clean(text: str) -> str:
    """A name from the model as one line (control characters escaped)."""
    return "".join(repr(c)[1:-1] if unicodedata.category(c)[0] == "C" else c for c in text)
