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
        marks and common indentation.  When the rule's own helpers (``constraint`` and
        ``fragment`` definitions) stand between it and its comment, the nearest comment above
        them that describes a rewrite is the rule's (authors write it, then the helpers, then
        the rule; a helper's own comment says what the helper checks)."""
        if not 1 <= line <= len(self.lines) or self.lines[line - 1][: max(column - 1, 0)].strip():
            return ""
        index = line - 2
        if index >= 0 and not self.lines[index].lstrip().startswith("#"):
            index = self._above_helpers(index)
        return self._block_ending_at(index)

    def _above_helpers(self, index: int) -> int:
        """From the line above a rule, past the helper definitions right above it (and their
        own comments): where the nearest comment among them that describes a rewrite (it
        has "->", as every rule's comment says what becomes what) ends, or -1."""
        while index >= 0:
            text = self.lines[index]
            if not text.strip() or text[:1] in (" ", "\t"):  # blank, or a definition's continuation
                index -= 1
            elif text.startswith(("constraint ", "fragment ")):
                index -= 1
                if index >= 0 and self.lines[index].lstrip().startswith("#"):
                    end = index
                    while index >= 0 and self.lines[index].lstrip().startswith("#"):
                        index -= 1
                    if "->" in self._block_ending_at(end):
                        return end
            elif text.startswith("}"):  # the end of a fragment: past it to its header
                start = index - 1
                while start >= 0 and not self.lines[start].startswith(("fragment ", "rule ", "pack ")):
                    start -= 1
                if start < 0 or not self.lines[start].startswith("fragment "):
                    break
                index = start
            else:
                break
        return -1

    def _block_ending_at(self, index: int) -> str:
        """The ``#`` lines ending at line ``index`` (0-based), after a section ruler among them."""
        block: list[str] = []
        while index >= 0 and self.lines[index].lstrip().startswith("#"):
            block.append(self.lines[index].lstrip()[1:])
            index -= 1
        block.reverse()
        for position in range(len(block) - 1, -1, -1):
            if block[position].strip().startswith(_RULERS):
                block = block[position + 1 :]
                break
        return textwrap.dedent("\n".join(line.rstrip() for line in block)).strip("\n")
