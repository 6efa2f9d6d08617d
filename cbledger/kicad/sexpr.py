"""Reading KiCad s-expression files with `sexpdata`.

KiCad writes every string quoted and every keyword bare, so after parsing a keyword is a
`sexpdata.Symbol` and a value is a plain `str`, `int` or `float`. `Symbol` compares unequal to a
plain `str`, which is why every keyword test here goes through `head()` (a plain `str`) rather than
`==` on the raw atom.

A parse failure must name the file and, where it can be found, the line: `sexpdata` reports an
unbalanced bracket without a position, so the line is recovered by scanning the text once, only on
failure, so the common path pays nothing for it.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import sexpdata

from cbledger import inputs
from cbledger.errors import UserError

Node = list[Any]
T = TypeVar("T")

# Coordinates become integers in KiCad's schematic internal unit (100 nm), as KiCad itself stores
# them, so that "same point" is an exact comparison and never a float tolerance.
IU_PER_MM = 10_000


def to_iu(value: Any) -> int:
    v = float(value) * IU_PER_MM
    return int(v + 0.5) if v >= 0 else -int(-v + 0.5)


def head(node: Any) -> str | None:
    if isinstance(node, list) and node and isinstance(node[0], sexpdata.Symbol):
        return str(node[0])
    return None


_str_eq = str.__eq__  # compares a Symbol with a plain str, which Symbol.__eq__ refuses


def children(node: Node, name: str) -> Iterator[Node]:
    for item in node[1:]:
        if item.__class__ is list and item and item[0].__class__ is _Symbol and _str_eq(item[0], name):
            yield item


def child(node: Node, name: str) -> Node | None:
    for item in node[1:]:
        if item.__class__ is list and item and item[0].__class__ is _Symbol and _str_eq(item[0], name):
            return item
    return None


def text_arg(node: Node | None, index: int = 1, default: str = "") -> str:
    """A string argument; KiCad 6/7 wrote some (uuids) bare, so symbols are accepted too."""
    if node is None or len(node) <= index:
        return default
    value = node[index]
    if isinstance(value, list):
        return default
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def child_text(node: Node, name: str, default: str = "") -> str:
    return text_arg(child(node, name), 1, default)


def child_int(node: Node, name: str, default: int) -> int:
    found = child(node, name)
    if found is None or len(found) < 2:
        return default
    try:
        return int(found[1])
    except (TypeError, ValueError):
        return default


def has_flag(node: Node, name: str) -> bool:
    """A bare keyword among the children, as KiCad 6/7 wrote `hide` inside a pin."""
    return any(item.__class__ is _Symbol and _str_eq(item, name) for item in node[1:])


def yes_no(node: Node, name: str, default: bool) -> bool:
    """`(name yes|no)`, or a bare `(name)` meaning yes; absent means the KiCad default."""
    found = child(node, name)
    if found is None:
        return default
    if len(found) < 2:
        return True
    return str(found[1]) not in {"no", "false"}


def xy(node: Node | None) -> tuple[int, int]:
    if node is None or len(node) < 3:
        return (0, 0)
    return (to_iu(node[1]), to_iu(node[2]))


def at(node: Node) -> tuple[tuple[int, int], int]:
    """Position and rotation (degrees) of an `(at x y [angle])` child."""
    found = child(node, "at")
    if found is None:
        return (0, 0), 0
    angle = found[3] if len(found) > 3 and isinstance(found[3], (int, float)) else 0
    return xy(found), round(float(angle)) % 360


def _locate_imbalance(text: str) -> int | None:
    """1-based line near the first bracket that breaks the nesting, or None.

    Once the top-level form has closed, the first text after it is the break: a second form, a
    word, or what follows a `)` too many that closed the form early (and a `)` at the very start
    is one too many at once). A missing `)` only shows at the end of the file, so KiCad's own
    layout is used as a witness instead: KiCad indents each form by its depth (a tab, or two spaces
    before KiCad 8), and the first form whose indentation disagrees with the bracket count sits just
    after the break. That witness is trusted only once the file has shown it follows the layout.
    """
    depth = 0
    in_string = False
    escaped = False
    string_line = 0
    agreeing = 0
    first_disagreement: int | None = None
    closed = False  # the top-level form has ended: anything but space after it is out of place
    for lineno, line in enumerate(text.split("\n"), 1):
        if not in_string and first_disagreement is None:
            stripped = line.lstrip(" \t")
            if stripped.startswith("(") and lineno > 1:
                indent = line[: len(line) - len(stripped)]
                level = indent.count("\t") + indent.count(" ") // 2
                if level == depth:
                    agreeing += 1
                elif agreeing >= 5:
                    first_disagreement = lineno
        for ch in line:
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
                continue
            if depth == 0 and closed and not ch.isspace():
                # a second top-level form, or text after the last one; a form closed early by a
                # bracket too many shows here too, and the layout witness then places the break
                return first_disagreement or lineno
            if ch == '"':
                in_string = True
                string_line = lineno
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth < 0:
                    return first_disagreement or lineno
                closed = depth == 0
    if in_string:
        return string_line
    return first_disagreement


_Symbol = sexpdata.Symbol
_NUMERIC_START = frozenset("0123456789+-.")


class _Parser(sexpdata.Parser):
    """sexpdata's parser with a cheaper atom conversion.

    Stock `Parser.atom` tries `int()` and then `float()` on every bare token and pays for two
    exceptions on each keyword (`wire`, `at`, `yes`...), which is most of the parse time on a large
    schematic. Only a token that can start a number is tried as one here, and a token with a
    decimal point goes straight to `float()`; every other token becomes the same `Symbol` stock
    sexpdata would make. (A bare `inf`/`nan`, never written by KiCad, stays a symbol.)
    """

    def atom(self, token: str):
        return _atom(token)


def _atom(token: str) -> Any:
    if token[:1] in _NUMERIC_START:
        if "." not in token:
            try:
                return int(token)
            except ValueError:
                pass
        try:
            return float(token)
        except ValueError:
            pass
    return _Symbol(token)


#: what `_fast_loads` returns for text nested deeper than `MAX_DEPTH` (it stops reading there)
_TOO_DEEP: Any = object()

#: One token of the text KiCad writes: a bracket, a quoted string, or a bare atom of none of the
#: characters sexpdata gives a meaning of their own (`[ ] { } ' ; \`), after sexpdata's whitespace.
_TOKEN = re.compile(r'[ \t\n\r\x0b\x0c]*(?:(\()|(\))|"([^"\\]*(?:\\.[^"\\]*)*)"|([^ \t\n\r\x0b\x0c()"\[\]{}\';\\]+))', re.S)
_ESCAPE = re.compile(r"\\(.)", re.S)
_UNQUOTE = sexpdata.String._lisp_quoted_to_raw


def _unescape(match: re.Match[str]) -> str:
    whole = match.group(0)
    return _UNQUOTE.get(whole, whole)


def _fast_loads(text: str, atoms: dict[str, Any] | None = None) -> Any:
    """The parse sexpdata gives, for text that uses only what KiCad writes; None for anything else
    (sexpdata then parses it, with its own errors). One regular expression finds every token and
    a stack builds the lists, where sexpdata steps through the text character by character in
    Python: about three times less work on a board file. Tested equal to sexpdata on every
    fixture and real board (tests/test_kicad_sexpr.py)."""
    stack: list[list[Any]] = [[]]
    top = stack[0]
    pos = 0
    if atoms is None:
        atoms = {}  # a board repeats its keywords and many values: each converted once
    for m in _TOKEN.finditer(text):
        if m.start() != pos:
            return None
        pos = m.end()
        opened, closed, quoted, bare = m.groups()
        if opened:
            new: list[Any] = []
            top.append(new)
            stack.append(new)
            top = new
            if len(stack) > MAX_DEPTH + 1:
                return _TOO_DEEP
        elif closed:
            if len(stack) == 1:
                return None
            stack.pop()
            top = stack[-1]
        elif quoted is not None:
            top.append(_ESCAPE.sub(_unescape, quoted) if "\\" in quoted else quoted)
        else:
            value = atoms.get(bare)
            if value is None:
                value = atoms[bare] = _atom(bare)
            top.append(value)
    if len(stack) != 1 or text[pos:].strip(" \t\n\r\x0b\x0c") or len(stack[0]) != 1:
        return None
    return stack[0][0]


#: Where a top-level child of a KiCad file starts: a line opening a form at one indent (a tab since
#: KiCad 8, two spaces before). A guess only: `_piecewise_loads` checks every piece it cuts.
_TOP_CHILD = re.compile(r"\n(?:\t|  )(?=\()")
#: text shorter than this is parsed whole; cutting it would save less than the cuts cost
PIECEWISE_FROM = 64 * 1024


def _weight(piece: str) -> int:
    return len(piece) + 12 * piece.count("(")


class _PieceCache:
    """Parsed top-level children by their exact text, least recently used dropped first, bounded
    by the text they were parsed from. Why: a run's end state is its fixture's board with a few
    children edited, so a grade after the fixture's (and `replay --verify` over a ledger of such
    runs) finds nearly every child of the sheet already parsed. The text itself is the key, so a
    hit is the same bytes and cannot be stale. What it holds is shared by every parse that hits
    it, as the parse cache's results are: read, never changed. What a parsed piece holds is about
    2.6 bytes per character of its text plus 32 per `(` (a list per form): a piece is weighed as
    its characters plus 12 per `(`, which makes what is held about 2.6 bytes per unit of weight
    whatever the text: about 22 MB at the default bound, for KiCad's own text and for text written
    to be nearly all brackets, which an agent could leave (130 MB when only characters counted)."""

    def __init__(self, max_chars: int = 8 * 1024 * 1024) -> None:
        self._max = max_chars
        self._chars = 0
        self._items: OrderedDict[str, Node] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, piece: str) -> Node | None:
        with self._lock:
            forms = self._items.get(piece)
            if forms is not None:
                self._items.move_to_end(piece)
            return forms

    def put(self, piece: str, forms: Node) -> None:
        with self._lock:
            weight = _weight(piece)
            if piece in self._items or weight > self._max:
                return
            self._items[piece] = forms
            self._chars += weight
            while self._chars > self._max:
                dropped, _ = self._items.popitem(last=False)
                self._chars -= _weight(dropped)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._chars = 0


PIECES = _PieceCache()


def _piecewise_loads(text: str) -> Any:
    """What `_fast_loads(text)` gives, with each top-level child parsed once across files (see
    `_PieceCache`). The text is cut where a line opens a form at one indent; every piece must then
    parse on its own into whole forms, which holds only when each cut lies between two children of
    the top form (a cut inside a string leaves that string unterminated; one at another depth
    leaves a bracket open), so the pieces' forms in order are the top form's. Anything else, or
    text too short to gain, is parsed whole."""
    if len(text) < PIECEWISE_FROM:
        return _fast_loads(text)
    cuts = [m.start() for m in _TOP_CHILD.finditer(text)]
    body_end = len(text.rstrip(" \t\n\r\x0b\x0c")) - 1  # the ')' that closes the top form
    if len(cuts) < 2 or text[body_end] != ")":
        return _fast_loads(text)
    atoms: dict[str, Any] = {}
    top = _fast_loads(text[: cuts[0]] + ")", atoms)  # the top form's keyword and what shares its line
    if not isinstance(top, list):
        return _fast_loads(text)
    cuts.append(body_end)
    for start, end in itertools.pairwise(cuts):
        piece = text[start:end]
        forms = PIECES.get(piece)
        if forms is None:
            forms = _fast_loads("(" + piece + ")", atoms)
            if not isinstance(forms, list):
                return _fast_loads(text)
            PIECES.put(piece, forms)
        top.extend(forms)
    return top


def _loads(text: str) -> Any:
    fast = _fast_loads(text)
    return fast if fast is not None and fast is not _TOO_DEEP else _stock_loads(text)


def _stock_loads(text: str) -> Any:
    parsed = _Parser(text, nil=None, true=None).parse()
    if len(parsed) != 1:
        raise sexpdata.ExpectNothing(text[-20:])
    return parsed[0]


#: Deepest nesting a KiCad file may have. KiCad's own files nest about ten deep; an agent's file
#: nested a hundred thousand deep must be refused, not handed to a parser and walkers that recurse.
MAX_DEPTH = 256
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_NOT_PAREN = re.compile(r"[^()]+")


def nesting_depth(text: str) -> int:
    """The deepest bracket nesting of `text`, strings ignored; linear and without recursion."""
    parens = _NOT_PAREN.sub("", _QUOTED.sub("", text)).encode("ascii")
    depth = deepest = 0
    for c in parens:
        depth += 1 if c == 40 else -1
        if depth > deepest:
            deepest = depth
    return deepest


def parse_text(text: str, source: str, expect: str | None = None) -> Node:
    """Parses one s-expression; `expect` is the keyword the top-level form must carry."""
    if not text.strip():
        raise UserError(f"{source}: empty file, expected an s-expression")
    # the fast path reads without recursion and counts the depth as it goes; only text it leaves
    # to sexpdata, which recurses, is measured first
    fast = _piecewise_loads(text)
    depth = nesting_depth(text) if fast is None or fast is _TOO_DEEP else 0
    if depth > MAX_DEPTH:
        raise UserError(f"{source}: not a valid s-expression: nested {depth} deep, over the limit of {MAX_DEPTH}")
    try:
        tree = fast if fast is not None else _stock_loads(text)
    except RecursionError:
        raise UserError(f"{source}: not a valid s-expression: nested too deep to parse") from None
    except Exception as exc:  # sexpdata raises several unrelated exception types
        if text.startswith("\ufeff"):
            raise UserError(f"{source}:1: not a valid s-expression: it starts with a byte-order mark (U+FEFF), "
                            "which KiCad never writes; save the file as UTF-8 without one") from None
        if text.lstrip().startswith("EESchema"):
            raise UserError(f"{source}:1: a KiCad 5 schematic (EESchema), not an s-expression: open it in KiCad 6 "
                            "or later and save it, which writes the s-expression format") from None
        if isinstance(exc, sexpdata.ExpectClosingBracket):
            what = "a closing ')' is missing"
        elif isinstance(exc, sexpdata.ExpectNothing):
            what = "there is a ')' too many, or text after the last form"
        else:
            what = "an unterminated string or an invalid token"
        line = _locate_imbalance(text)
        where = f"{source}:{line}" if line else source
        raise UserError(f"{where}: not a valid s-expression: {what}") from None
    if expect is not None and head(tree) != expect:
        found = head(tree) or type(tree).__name__
        raise UserError(f"{source}:1: expected a ({expect} ...) file, found {found!r}")
    return tree


#: Far above any real schematic (the largest real sheet is under 300 kB).
MAX_FILE_BYTES = 64 * inputs.MiB


def read_text(path: Path) -> bytes:
    """A schematic or netlist's bytes; a FIFO, device or directory is refused before reading."""
    return inputs.read_regular(path, MAX_FILE_BYTES, follow=True)


def decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UserError(f"{source}:{line}: not UTF-8 text") from None


class DigestCache:
    """Parsed results keyed by the content digest of what they were built from.

    Grading re-reads the same baseline and end-state files many times (one assertion after
    another, `replay --verify` across runs); a digest key makes a repeated read cost one hash and
    can never serve a stale result after an edit, unlike a key on path and mtime. The cache is
    bounded both in entries and in the bytes its entries were built from (a parsed sheet takes
    some multiple of its source), so a long replay over many boards keeps a steady footprint.
    """

    def __init__(self, capacity: int = 64, max_bytes: int = 32 * 1024 * 1024) -> None:
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._bytes = 0
        self._entries: OrderedDict[tuple[str, str], tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_build(self, kind: str, data: bytes, build: Callable[[], T]) -> T:
        return self.get_or_build_parts(kind, (data,), build)

    def get_or_build_parts(self, kind: str, parts: Iterable[bytes], build: Callable[[], T]) -> T:
        """As `get_or_build`, for a result built from several inputs: each part is hashed with
        its length, so no two different sequences of parts share a key."""
        digest = hashlib.sha256()
        size = 0
        for part in parts:
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
            size += len(part)
        key = (kind, digest.hexdigest())
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key][0]
        value = build()
        if size > self._max_bytes:
            return value
        with self._lock:
            if key not in self._entries:
                self._entries[key] = (value, size)
                self._bytes += size
            self._entries.move_to_end(key)
            while len(self._entries) > self._capacity or self._bytes > self._max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped
        return value

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


PARSE_CACHE = DigestCache()
