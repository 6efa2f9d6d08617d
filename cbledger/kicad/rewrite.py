"""Changing string atoms of a KiCad s-expression file and nothing else.

A KiCad file is rewritten here by parsing it with `sexpdata` (through a parser that remembers
where each quoted string began and ended) and replacing the text of chosen strings in place: every
other byte, the layout, the numbers and the keywords stay exactly as they were. So a rewritten
file diffs against its original line by line, and its structure is by construction the parsed
one with those strings changed, which `check_rewrite` confirms by parsing the result again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import sexpdata

from cbledger.errors import UserError
from cbledger.kicad.sexpr import Node, parse_text


class Located(str):
    """A quoted string of the source text, with the span its quoted form occupies."""

    start: int
    end: int


class _LocatingParser(sexpdata.Parser):
    def parse_str(self, i):
        end, value = super().parse_str(i)
        located = Located(value)
        located.start, located.end = i, end
        return end, located


def parse_located(text: str, source: str) -> Node:
    """The file's tree, every quoted string a `Located`. A malformed file is reported by the project
    reader, with its line, exactly as everywhere else."""
    try:
        parsed = _LocatingParser(text, nil=None, true=None).parse()
    except Exception:  # sexpdata raises several unrelated types; the reader names the problem
        parse_text(text, source)
        raise
    if len(parsed) != 1 or not isinstance(parsed[0], list):
        parse_text(text, source)
        raise UserError(f"{source}: not one s-expression")
    return parsed[0]


def quote(value: str) -> str:
    """A string as KiCad writes it: in double quotes, backslash and quote escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def walk(node: Any, parents: tuple[Node, ...] = ()) -> Iterator[tuple[Located, int, Node, tuple[Node, ...]]]:
    """Every quoted string with its index in, and the form holding it, and that form's ancestors."""
    if not isinstance(node, list):
        return
    for index, item in enumerate(node):
        if isinstance(item, Located):
            yield item, index, node, parents
        elif isinstance(item, list):
            yield from walk(item, (*parents, node))


def rewrite(text: str, source: str, choose: Callable[[Located, int, Node, tuple[Node, ...]], str | None]) -> str:
    """`text` with each string for which `choose(string, index, form, ancestors)` returns a new
    value replaced by that value; None keeps a string as it is."""
    tree = parse_located(text, source)
    edits: list[tuple[int, int, str]] = []
    for atom, index, form, parents in walk(tree):
        new = choose(atom, index, form, parents)
        if new is not None and new != atom:
            edits.append((atom.start, atom.end, quote(new)))
    if not edits:
        return text
    out: list[str] = []
    cursor = 0
    for start, end, replacement in sorted(edits):
        out.append(text[cursor:start])
        out.append(replacement)
        cursor = end
    out.append(text[cursor:])
    return "".join(out)


def check_rewrite(original: str, rewritten: str, source: str) -> None:
    """The two texts have the same forms, keywords and numbers: only strings may differ."""

    def shape(node: Any) -> Any:
        if isinstance(node, list):
            return [shape(n) for n in node]
        return "" if isinstance(node, str) and not isinstance(node, sexpdata.Symbol) else node

    if shape(parse_text(original, source)) != shape(parse_text(rewritten, source)):
        raise UserError(f"{source}: the rewrite changed more than strings")
