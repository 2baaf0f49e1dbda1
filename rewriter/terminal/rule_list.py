"""``rewriter rules``: each pack, then each of its rules as a block — name, level, the family
it is an instance of, the providers it is limited to, and the comment its author wrote
above it (``Rule.doc``).  Instances of one family share that comment: it is shown once,
and the later instances point back to the first."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.text import Text

from ..dsl.ast import Pack, Rule
from ..onnx_facts.providers import short_name

JSON_FORMAT = "rewriter-rules-1"
FAMILY_WIDTH = 60  # a family instance's arguments longer than this are left to --json
INDENT = "    "


def print_rule_list(out: Console, packs: Iterable[Pack], labels: dict[int, str], only: set[str] | None) -> None:
    """The packs and their rules (``only``: just the rules of these names, each with its
    whole comment)."""
    for pack in packs:
        rules = [r for r in pack.rules if only is None or r.name in only]
        if only is not None and not rules:
            continue
        out.print(  # (as Text: the console prints without markup, see cli._console)
            Text.assemble((pack.name, "bold"), f" (level {pack.level}, {labels.get(pack.level, '?')})  {pack.file}"),
            soft_wrap=True,
        )
        if pack.builtins and only is None:
            out.print(f"  builtin passes: {', '.join(pack.builtins)}", markup=False)
        first_with: dict[tuple[str, str], str] = {}  # (family template, doc) -> first instance shown
        for rule in rules:
            out.print()
            out.print(_heading(rule, pack), soft_wrap=True)
            template = rule.family.partition("(")[0]
            shared = (template, rule.doc) if rule.family and rule.doc else None
            if shared is not None and shared in first_with and only is None:
                body = Text(f"(as {first_with[shared]} above: an instance of {template})", style="dim")
            else:
                body = Text(rule.doc) if rule.doc else Text("(no comment above this rule)", style="dim")
                if shared is not None:
                    first_with.setdefault(shared, rule.name)
            # (indented line by line and never rewrapped: authors wrap their comments)
            out.print(Text("\n").join(Text(INDENT) + line for line in body.split("\n")), soft_wrap=True)
        out.print()


def _heading(rule: Rule, pack: Pack) -> Text:
    heading = Text("  ")
    heading.append(rule.name, style="bold cyan")
    heading.append(f"  level {pack.level}")
    if rule.family:
        shown = rule.family if len(rule.family) <= FAMILY_WIDTH else rule.family.partition("(")[0] + "(...)"
        heading.append(f"  = {shown}", style="dim")
    if rule.providers:
        heading.append(f"  providers {', '.join(short_name(p) for p in rule.providers)}")
    heading.append(f"  line {rule.pos.line}", style="dim")
    return heading


def rules_json(packs: Iterable[Pack], only: set[str] | None) -> dict:
    """What ``rules --json`` writes: every rule with its pack, level, place and comment."""
    return {
        "format": JSON_FORMAT,
        "rules": [
            {
                "rule": rule.name,
                "level": pack.level,
                "pack": pack.name,
                "file": pack.file,
                "line": rule.pos.line,
                "family": rule.family,
                "providers": list(rule.providers or pack.providers),
                "doc": rule.doc,
            }
            for pack in packs
            for rule in pack.rules
            if only is None or rule.name in only
        ],
    }
