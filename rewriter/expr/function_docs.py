"""The reference of the functions rules may call, written from the function registry.

Why generated: a hand-kept table in docs/rules.md listed functions the code no longer had
and missed ones it had.  Here every entry comes from what ``functions.py`` registers —
name, argument names, result kind, one-line meaning — so the reference says what the
checker accepts.  ``tests/test_function_docs.py`` fails when docs/functions.md differs from
this module's output, and when a function lacks a meaning.

    python -m rewriter.expr.function_docs > docs/functions.md

Only the language's own functions are listed: predicates added with ``register_predicate``
belong to the program that registers them.
"""

from __future__ import annotations

import sys

from .dtypes import DTYPES
from .functions import CONSTANTS, FUNCTIONS, Function

COMMAND = "python -m rewriter.expr.function_docs > docs/functions.md"

_RESULTS = {
    "bool": "true/false",
    "int": "integer",
    "float": "float",
    "string": "string",
    "list": "list",
    "tensor": "tensor",
    "value": "depends",
}


def render() -> str:
    """docs/functions.md, as Markdown."""
    builtin = sorted((f for f in FUNCTIONS.values() if f.builtin), key=lambda f: f.name)
    lines = [
        "# Functions in rules",
        "",
        f"<!-- Generated from rewriter/expr/functions.py by `{COMMAND}`; do not edit. -->",
        "",
        "Every function a `where`, a `let` or a replacement may call, with its arguments and",
        "what it gives back; nothing else is callable (rules never run Python).  An argument",
        "`name=default` may be left out, `...` takes more of the argument before it.  See",
        "[rules.md](rules.md) for the language around them.",
        "",
        "## Graph predicates",
        "",
        "They read facts of the graph about a tensor variable (its rank, its consumers, whether",
        "it is constant) without needing its contents.",
        "",
        *_table([f for f in builtin if f.graph]),
        "",
        "## Value functions",
        "",
        "They compute with numpy on numbers, lists and constants (a tensor variable stands for",
        "its contents: a value that is not constant refuses the match); computed initializers",
        "are made with them.",
        "",
        *_table([f for f in builtin if not f.graph]),
        "",
        "## Names",
        "",
        "Constants: " + ", ".join(f"`{name}` ({value!r})" for name, value in sorted(CONSTANTS.items())) + ", and",
        "`inf`.",
        "",
        "Element types (what `dtype(x)` is compared with and `cast` takes): "
        + ", ".join(f"`{name}`" for name in DTYPES)
        + ".",
        "",
        "More graph predicates can be registered from Python with `rewriter.register_predicate`",
        "(see [rules.md](rules.md#predicates-from-python)); they are not listed here.",
        "",
    ]
    return "\n".join(lines)


def _table(functions: list[Function]) -> list[str]:
    rows = ["| function | gives | meaning |", "|---|---|---|"]
    for fn in functions:
        rows.append(f"| `{fn.signature}` | {_RESULTS[fn.returns]} | {_cell(fn.meaning)} |")
    return rows


def _cell(text: str) -> str:
    """Text safe in a Markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*")


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
