"""GitHub-flavoured markdown tables, read with markdown-it-py: the one table reader for the docs a
board keeps (BOM.md, PINOUT.md, …), used by doc drift and by the doc assertions.

markdown-it-py decides what is a table (fenced and indented code is not, a table ends at a blank
line or another block) and where each row is. One deviation from GFM is kept on purpose: a pipe
inside a `code span` does not split the cell (GFM says it does; people writing pin lists in
backticks do not expect it, and no net or reference contains a pipe). Cells are kept as written,
escaped pipes resolved, so a message can quote them; `cell_text` reduces one to the plain text a
reader sees, because a task author writing `R1` and a model writing `` `R1` `` mean the same.
"""

from __future__ import annotations

import re

import msgspec
from markdown_it import MarkdownIt
from markdown_it.rules_block.table import escapedSplit
from markdown_it.token import Token

_MD = MarkdownIt("commonmark").enable("table")


class Table(msgspec.Struct, frozen=True):
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]  # as many cells as headers: missing ones empty, extra ones dropped
    lines: tuple[int, ...]  # 1-based line of each body row
    header_line: int

    def column(self, *names: str) -> int | None:
        """Index of the first header matching any name: case, spacing, `_`/`-` and markup ignored."""
        wanted = {_norm(n) for n in names}
        for i, header in enumerate(self.headers):
            if _norm(cell_text(header)) in wanted:
                return i
        return None


def _norm(text: str) -> str:
    return re.sub(r"[\s_\-]+", " ", text.replace("*", "").replace("`", "")).strip().lower()


def _protect_code_spans(line: str) -> str:
    """Escapes the pipes inside code spans, so that markdown-it does not split a cell on them."""
    out: list[str] = []
    in_code = False
    for i, ch in enumerate(line):
        if ch == "`":
            in_code = not in_code
        elif ch == "|" and in_code and (i == 0 or line[i - 1] != "\\"):
            out.append("\\")
        out.append(ch)
    return "".join(out)


def split_row(line: str) -> list[str]:
    """One row's cells as written, split the way `tables` splits them."""
    cells = escapedSplit(_protect_code_spans(line.strip()))
    if cells and cells[0] == "":
        cells.pop(0)
    if cells and cells[-1] == "":
        cells.pop()
    return [c.strip() for c in cells]


def tables(markdown: str) -> list[Table]:
    source = "\n".join(_protect_code_spans(line) for line in markdown.splitlines())
    found: list[Table] = []
    headers: list[str] = []
    rows: list[tuple[str, ...]] = []
    lines: list[int] = []
    header_line = 0
    row: list[str] | None = None  # the row being read, and the source line it starts on
    line = 0
    for token in _MD.parse(source):
        if token.type == "tr_open":
            row = []
            line = token.map[0] + 1 if token.map else 0
        elif token.type == "inline" and row is not None:
            row.append(token.content)
        elif token.type == "tr_close" and row is not None:
            if not headers:
                headers, header_line = row, line
            else:
                rows.append(tuple(row))
                lines.append(line)
            row = None
        elif token.type == "table_close":
            found.append(Table(tuple(headers), tuple(rows), tuple(lines), header_line))
            headers, rows, lines = [], [], []
    return found


def cell_text(cell: str) -> str:
    """A cell's plain text: code spans, emphasis and links reduced to their text, escapes resolved."""
    return "".join(_plain(token) for token in _MD.parseInline(cell.strip())).strip()


def _plain(inline: Token) -> str:
    parts: list[str] = []
    for child in inline.children or ():
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return "".join(parts)
