"""GitHub-flavoured markdown tables, as the docs that copperhead keeps write them.

Only what a table row says is read: a header row, a delimiter row of dashes (with optional
colons), then body rows until a line that is not a row. Leading and trailing pipes are optional,
`\\|` is a literal pipe inside a cell, and pipes inside `code spans` do not split cells (GFM
says they do; people writing pin lists in backticks do not expect it, and no net or reference
contains a pipe). Tables inside fenced code blocks are ignored.
"""

from __future__ import annotations

import re

import msgspec

_DELIMITER_CELL = re.compile(r"^\s*:?-{1,}:?\s*$")


class Table(msgspec.Struct, frozen=True):
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    lines: tuple[int, ...]  # 1-based line of each body row
    header_line: int

    def column(self, *names: str) -> int | None:
        """Index of the first header matching any name, case and spacing ignored."""
        wanted = {_norm(n) for n in names}
        for i, header in enumerate(self.headers):
            if _norm(header) in wanted:
                return i
        return None


def _norm(text: str) -> str:
    return re.sub(r"[\s_\-]+", " ", text.replace("*", "").replace("`", "")).strip().lower()


def split_row(line: str) -> list[str]:
    text = line.strip()
    if text.startswith("|"):
        text = text[1:]
    if text.endswith("|") and not text.endswith("\\|"):
        text = text[:-1]
    cells: list[str] = []
    current: list[str] = []
    in_code = False
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] == "|":
            current.append("|")
            i += 2
            continue
        if ch == "`":
            in_code = not in_code
        if ch == "|" and not in_code:
            cells.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
        i += 1
    cells.append("".join(current).strip())
    return cells


def _is_row(line: str) -> bool:
    return "|" in line and line.strip() != ""


def tables(markdown: str) -> list[Table]:
    lines = markdown.splitlines()
    found: list[Table] = []
    fence: str | None = None
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped.startswith("```") or stripped.startswith("~~~"):
            marker = stripped[:3]
            fence = None if fence == marker else (fence or marker)
            i += 1
            continue
        if fence is None and i + 1 < len(lines) and _is_row(lines[i]):
            headers = split_row(lines[i])
            delimiter = split_row(lines[i + 1])
            if len(delimiter) == len(headers) and all(_DELIMITER_CELL.match(c) for c in delimiter):
                rows: list[tuple[str, ...]] = []
                numbers: list[int] = []
                j = i + 2
                while j < len(lines) and _is_row(lines[j]) and not lines[j].strip().startswith(("```", "~~~")):
                    cells = split_row(lines[j])
                    cells = (cells + [""] * len(headers))[: len(headers)]
                    rows.append(tuple(cells))
                    numbers.append(j + 1)
                    j += 1
                found.append(Table(tuple(headers), tuple(rows), tuple(numbers), i + 1))
                i = j
                continue
        i += 1
    return found


def cell_text(cell: str) -> str:
    """A cell's plain text: code spans, emphasis markers and links reduced to their text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", cell)
    text = text.replace("`", "")
    text = re.sub(r"\*\*(.*?)\*\*", r"\1", text)
    return text.strip()
