"""GFM tables in the project's markdown docs (BOM.md, PINOUT.md, …), parsed by markdown-it-py.

Cells are reduced to their plain text (code spans and emphasis unwrapped, escaped pipes resolved)
because a task author writing `R1` and a model writing `` `R1` `` mean the same reference.
"""

from __future__ import annotations

from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

_MD = MarkdownIt("commonmark").enable("table")


@dataclass(frozen=True)
class Table:
    line: int  # 1-based line of the header row
    header: list[str]
    rows: list[list[str]]

    def column(self, name: str) -> int | None:
        """Index of the column whose header equals `name`, case-insensitively."""
        wanted = name.strip().lower()
        for i, h in enumerate(self.header):
            if h.strip().lower() == wanted:
                return i
        return None

    def row_for(self, key: str) -> list[str] | None:
        """The first row whose first cell is `key` (exact, after trimming)."""
        for row in self.rows:
            if row and row[0].strip() == key.strip():
                return row
        return None

    def records(self) -> list[dict[str, str]]:
        """Rows as dicts keyed by lower-cased header."""
        keys = [h.strip().lower() for h in self.header]
        return [{k: (row[i] if i < len(row) else "") for i, k in enumerate(keys)} for row in self.rows]


def plain(inline: Token) -> str:
    if not inline.children:
        return inline.content.strip()
    parts = []
    for child in inline.children:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return "".join(parts).strip()


def tables(text: str) -> list[Table]:
    tokens = _MD.parse(text)
    out: list[Table] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.type != "table_open":
            i += 1
            continue
        line = (tok.map[0] + 1) if tok.map else 0
        header: list[str] = []
        rows: list[list[str]] = []
        current: list[str] | None = None
        in_head = False
        i += 1
        while i < len(tokens) and tokens[i].type != "table_close":
            t = tokens[i]
            if t.type == "thead_open":
                in_head = True
            elif t.type == "thead_close":
                in_head = False
            elif t.type == "tr_open":
                current = []
            elif t.type == "tr_close" and current is not None:
                if in_head:
                    header = current
                else:
                    rows.append(current)
                current = None
            elif t.type == "inline" and current is not None:
                current.append(plain(t))
            i += 1
        out.append(Table(line, header, rows))
        i += 1
    return out
