"""A rule's documentation: the comment block written immediately above its ``rule``
keyword (packs document each rule that way; see rules/*.rules), kept on ``Rule.doc`` for
``rewriter rules``.

The grammar ignores comments, so they are read from the text beside the parse: the ``#``
lines directly above the keyword's line, up to the first line that is not a comment.  A
section ruler among them (``# ------ Gelu``) heads the block: only what follows it is the
rule's.  Nothing is documentation when other text precedes the keyword on its line.
"""

from __future__ import annotations

import textwrap

_RULERS = ("---", "===", "***")


class Comments:
    """The comment blocks of one text, read once per parse."""

    def __init__(self, text: str) -> None:
        # (Lark counts lines by "\n" only: str.splitlines would also split at \f, \v, \u2028)
        self.lines = [line.removesuffix("\r") for line in text.split("\n")]

    def above(self, line: int, column: int) -> str:
        """The block above the keyword at ``line``:``column`` (1-based), without its ``#``
        marks and common indentation."""
        if not 1 <= line <= len(self.lines) or self.lines[line - 1][: max(column - 1, 0)].strip():
            return ""
        block: list[str] = []
        index = line - 2
        while index >= 0 and self.lines[index].lstrip().startswith("#"):
            block.append(self.lines[index].lstrip()[1:])
            index -= 1
        block.reverse()
        for position in range(len(block) - 1, -1, -1):
            if block[position].strip().startswith(_RULERS):
                block = block[position + 1 :]
                break
        return textwrap.dedent("\n".join(line.rstrip() for line in block)).strip("\n")
