"""The credential pattern set of the copperbench standard (section 6.1), and this project's
additions to it (AWS keys, PEM private keys, credentials in URLs).

One list, shared by the graded `no_secret` assertion, the ledger's append guard and the scan that
runs before anything is written under `results/`, so the three can never drift apart. Changing a
pattern changes `PATTERN_SET_HASH`, which `suite bump` records: the set is part of the grading
contract, not a lint setting. docs/RUNNER.md, section 6, lists it.

Text is scanned as written and again with its JSON escapes undone, since a transcript or an
import may carry `\u0073k-…` where a reader sees `sk-…`.

Matches are reported by kind and location only. The matched text is never returned, logged or
echoed, and a location is itself passed through `printable` (a file may be named after a key):
a failure message is published output too.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Set
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Pattern:
    """A credential kind. `anchors` are literal strings one of which every match contains
    (compared case-insensitively when the pattern is): a text holding none of them cannot match,
    which lets the ledger rule most events out without running the regex."""

    kind: str
    regex: str
    flags: int = 0
    anchors: tuple[str, ...] = ()
    #: for redaction only: where a match's secret ends when it runs past the match (a PEM
    #: block's header is the match; the key runs on to its END line)
    extent: str | None = None

    def compiled(self) -> re.Pattern[str]:
        return re.compile(self.regex, self.flags)


PATTERNS: tuple[Pattern, ...] = (
    Pattern("openai-or-anthropic-key", r"sk-[A-Za-z0-9_-]{20,}", anchors=("sk-",)),
    Pattern("google-api-key", r"AIza[0-9A-Za-z_-]{35}", anchors=("AIza",)),
    Pattern("http-bearer-token", r"Bearer\s+[A-Za-z0-9._+/=-]{16,}", re.IGNORECASE, anchors=("bearer",)),
    Pattern("npm-token", r"npm_[A-Za-z0-9-]{36,}", anchors=("npm_",)),
    Pattern("github-token", r"gh[pousr]_[A-Za-z0-9]{36,}", anchors=("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    Pattern("github-fine-grained-pat", r"github_pat_[A-Za-z0-9_]{22,}", anchors=("github_pat_",)),
    Pattern("groq-key", r"gsk_[A-Za-z0-9]{20,}", anchors=("gsk_",)),
    Pattern("aws-access-key-id", r"(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}", anchors=("AKIA", "ASIA", "ABIA", "ACCA")),
    Pattern(
        "aws-secret-access-key", r"aws_secret_access_key[\"']?\s*[:=]\s*[\"']?[A-Za-z0-9/+=]{40}", re.IGNORECASE,
        anchors=("aws_secret_access_key",),
    ),
    Pattern(
        "pem-private-key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----", anchors=("-----BEGIN ",),
        extent=r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
    ),
    Pattern(
        "url-credentials", r"\b[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s:/?#@\"'<>]+:[^\s/?#@\"'<>]+@[A-Za-z0-9\[]",
        anchors=("://",),
    ),
)

_COMPILED = tuple((p.kind, p.compiled()) for p in PATTERNS)


# Where the anchors occur in a text, found in six passes over it rather than one per pattern:
# each search starts at a character, rare in what is scanned, that its anchors hold (`re` runs
# through a text to a leading literal fast, but tries an alternation of leading characters at
# every position) and looks around it for the rest of the anchor; one empty group per pattern,
# named for its kind, says which anchor it found (the anchors one search looks for never share
# its character's place, so none hides another). A search runs only on a text holding its
# character, when one is given. A case-insensitive anchor is matched as its pattern matches it
# (`re` takes `ſ` for `s` and the Kelvin sign for `k` there too). tests/test_credentials.py
# holds the table to every pattern's anchors.
_ANCHOR_SEARCHES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("", re.compile(r"-(?<=sk-)(?P<openai_or_anthropic_key>)")),
    ("", re.compile(r"b(?i:(?=earer))(?P<http_bearer_token>)")),
    ("B", re.compile(r"B(?:(?i:(?=earer))(?P<http_bearer_token>)|(?<=-----B)(?=EGIN )(?P<pem_private_key>))")),
    ("A", re.compile(r"A(?:(?=Iza)(?P<google_api_key>)|(?=KIA|SIA|BIA|CCA)(?P<aws_access_key_id>))")),
    ("_", re.compile(
        r"_(?:(?<=npm_)(?P<npm_token>)|(?<=gh[pousr]_)(?P<github_token>)|(?<=github_)(?=pat_)(?P<github_fine_grained_pat>)"
        r"|(?<=gsk_)(?P<groq_key>)|(?<=(?i:aws)_)(?i:(?=secret_access_key))(?P<aws_secret_access_key>))"
    )),
    ("/", re.compile(r"/(?<=:/)(?=/)(?P<url_credentials>)")),
)


def anchored_kinds(text: str) -> set[str]:
    """The kinds of the patterns one of whose anchors occurs in `text`: no other can match it."""
    found: set[str] = set()
    for char, rx in _ANCHOR_SEARCHES:
        if not char or char in text:
            found.update(m.lastgroup.replace("_", "-") for m in rx.finditer(text) if m.lastgroup)
    return found


def _pattern_set_hash() -> str:
    h = hashlib.sha256()
    for p in PATTERNS:
        h.update(f"{p.kind}\0{p.regex}\0{p.flags}\n".encode())
    return h.hexdigest()


_EXTENTS = {p.kind: re.compile(p.extent) for p in PATTERNS if p.extent}
#: how far past a match its extent is looked for
_EXTENT_REACH = 64 * 1024
# One JSON escape sequence: `\uXXXX` (a surrogate pair as two) or a one-character escape.
_ESCAPE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}|\\[\"\\/bfnrt]")


_ONE_CHARACTER = {'\\"': '"', "\\\\": "\\", "\\/": "/", "\\b": "\b", "\\f": "\f", "\\n": "\n", "\\r": "\r", "\\t": "\t"}


def _undo_escape(m: re.Match[str]) -> str:
    """What the JSON decoder makes of one escape `_ESCAPE` matched, without calling it."""
    escape = m[0]
    if len(escape) == 2:
        return _ONE_CHARACTER[escape]
    if len(escape) == 6:
        return chr(int(escape[2:], 16))
    high, low = int(escape[2:6], 16), int(escape[8:], 16)
    return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))


def unescaped(text: str) -> str:
    """`text` with every JSON escape undone once (`\\u0073k-` → `sk-`), as one JSON decode
    undoes them; other text as it is."""
    return _ESCAPE.sub(_undo_escape, text) if "\\" in text else text


#: JSON escapes undone at most this deep: each depth at least halves an escape's backslashes.
MAX_ESCAPE_DEPTH = 32


def unescaped_fully(text: str) -> str:
    """`text` with JSON escapes undone at every depth: a value JSON-encoded twice
    (`\\\\u0073k-`) is a key to whoever decodes it twice, so the scan undoes escapes until
    none is left."""
    for _ in range(MAX_ESCAPE_DEPTH):
        undone = unescaped(text)
        if undone == text:
            break
        text = undone
    return text


PATTERN_SET_HASH = _pattern_set_hash()

#: The URL pattern this module knows the shape of: a match is a scheme of 1 to 32 characters,
#: `://`, user and password holding no `@`, the first `@` after them and one character more.
_URL_SHAPE = r"\b[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s:/?#@\"'<>]+:[^\s/?#@\"'<>]+@[A-Za-z0-9\[]"


def _url_matches(rx: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """`rx.finditer(text)` for the URL pattern, searching only around each `://`.

    The pattern starts with a scheme that `re` tries at every word boundary, which made it the
    slowest pattern by far on a schematic holding one URL. A match with its `://` at `i` starts
    at most 32 characters before it and ends two characters after the first `@` past it, so
    each `://` is searched within that window (a search from `pos` still sees the character
    before it for `\b`); the matches and their order are finditer's.
    """
    pos = scan = 0
    while (i := text.find("://", scan)) >= 0:
        at = text.find("@", i + 3)
        if at < 0:
            return
        m = rx.search(text, max(pos, i - 32), at + 2)
        if m is None:
            scan = i + 1
            continue
        yield m
        pos = scan = m.end()


_SCANNED = tuple((p.kind, p.compiled(), bool(p.anchors), p.regex == _URL_SHAPE) for p in PATTERNS)


def _matches(text: str, kinds: Set[str] | None = None) -> Iterator[tuple[str, Iterator[re.Match[str]]]]:
    """Per pattern kind, in the set's order, its matches in `text`; a pattern none of whose
    anchors occur in the text is not run (it cannot match). `kinds`, when given, holds every
    kind whose anchor occurs in the text (the caller knows them already)."""
    present = anchored_kinds(text) if kinds is None else kinds
    for kind, rx, anchored, url in _SCANNED:
        if not anchored or kind in present:
            yield kind, (_url_matches(rx, text) if url else rx.finditer(text))


@dataclass(frozen=True)
class Match:
    """Where a credential pattern matched: never what matched."""

    kind: str
    location: str

    def __str__(self) -> str:
        return f"{self.kind} at {self.location}"


def matches_somewhere(text: str, kinds: Set[str] | None = None) -> bool:
    """Whether any pattern matches anywhere in `text` (as written: no escape is undone); `kinds`
    as for `_matches`."""
    return any(next(matches, None) is not None for _, matches in _matches(text, kinds))


def scan_text(text: str, location: str) -> list[Match]:
    """Every pattern kind that matches `text`, with a line number appended to `location`; each
    line is scanned as written and, when it holds JSON escapes, with them undone."""
    found: list[Match] = []
    where = printable(location)
    # Each pattern is a pass over the whole text; its anchors rule most texts out first.
    for kind, matches in _matches(text):
        for m in matches:
            line = text.count("\n", 0, m.start()) + 1
            found.append(Match(kind, f"{where}:{line}"))
    if "\\" in text:
        seen = {(m.kind, m.location) for m in found}
        escaped = [(n, line) for n, line in enumerate(text.split("\n"), start=1) if "\\" in line]
        # The escaped lines undone all at once hold every one of them undone (no escape reaches
        # past a line's end), so a pattern none of whose anchors occurs in them cannot match any
        # of them: one anchor pass over them all, instead of one per line, rules most files out.
        if next(_matches(unescaped_fully("\n".join(line for _, line in escaped))), None) is None:
            return found
        for lineno, line_text in escaped:
            plain = unescaped_fully(line_text)
            for kind, matches in _matches(plain):
                if next(matches, None) is not None and (kind, f"{where}:{lineno}") not in seen:
                    seen.add((kind, f"{where}:{lineno}"))
                    found.append(Match(kind, f"{where}:{lineno} (JSON-escaped)"))
    return found


def scan_name(name: str, location: str) -> list[Match]:
    """A name that is published as it is (a file path, a commit author): no line numbers."""
    found: list[Match] = []
    plain = unescaped_fully(name)
    for kind, rx in _COMPILED:
        if rx.search(name) or rx.search(plain):
            found.append(Match(kind, printable(location)))
    return found


def _redact_plain(text: str) -> str:
    for kind, rx in _COMPILED:
        extent = _EXTENTS.get(kind)
        if extent is None:
            text = rx.sub(f"<{kind}>", text)
            continue
        out, pos = [], 0
        for m in rx.finditer(text):
            if m.start() < pos:
                continue
            end = extent.search(text, m.end(), m.end() + _EXTENT_REACH)
            out += [text[pos:m.start()], f"<{kind}>"]
            pos = end.end() if end else m.end()
        text = "".join(out) + text[pos:]
    return text


def _harmless(m: re.Match[str]) -> str:
    """An escape undone only where that changes no JSON string's meaning: a `\\uXXXX` of a
    printable character other than a quote or a backslash, or `\\/`."""
    if m[0] == "\\/":
        return "/"
    if not m[0].startswith("\\u") or len(m[0]) != 6:
        return m[0]
    ch = chr(int(m[0][2:], 16))
    return ch if ch.isprintable() and ch not in "\"\\" else m[0]


def has_match(text: str) -> bool:
    """Whether any pattern matches `text` as written or with its JSON escapes undone."""
    return any(rx.search(text) for _, rx in _COMPILED) or (
        "\\" in text and any(rx.search(unescaped_fully(text)) for _, rx in _COMPILED)
    )


def redact(text: str) -> str:
    """`text` with every credential replaced by `<kind>` (a PEM block from its header to its
    END line). A JSON-escaped credential is redacted after undoing only the escapes that change
    no JSON string's meaning, so a redacted transcript is still the same JSON; one that needs
    more undone (a key split by an escaped newline) has every escape undone."""
    if "\\" in text:
        text = _ESCAPE.sub(_harmless, text)
    text = _redact_plain(text)
    if "\\" in text and has_match(text):
        text = _redact_plain(unescaped_fully(text))
    return text


def redact_bytes(data: bytes) -> bytes:
    """`data` redacted as UTF-8 text; bytes that are not UTF-8 stay as they were where they hold
    no credential (a binary file with a key in it is redacted, and re-encoded, as text)."""
    text = data.decode("utf-8", errors="surrogateescape")
    return redact(text).encode("utf-8", errors="surrogateescape")


#: the longest text a message quotes from input
PRINTABLE_LIMIT = 200


def printable(text: str, limit: int = PRINTABLE_LIMIT) -> str:
    """Input made safe to quote in a message: credentials redacted, control characters and other
    unprintables escaped (an ANSI escape in a file name stays inert), long text cut."""
    text = redact(text)
    out = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
    return out if len(out) <= limit else out[: limit - 1] + "…"


def scan_bytes(data: bytes, location: str) -> list[Match]:
    """Scans bytes as UTF-8 with replacement, so binary files are scanned rather than skipped."""
    return scan_text(data.decode("utf-8", errors="replace"), location)


def _walk(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            key = str(k)
            yield f"{path}.{key}", key
            yield from _walk(v, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]")


def scan_json(value: Any, root: str = "$") -> list[Match]:
    """Scans every string (keys included) of a decoded JSON value; locations are JSON paths
    (redacted: a key may be the credential itself)."""
    found: list[Match] = []
    for path, text in _walk(value, root):
        plain = unescaped_fully(text)
        for kind, rx in _COMPILED:
            if rx.search(text) or rx.search(plain):
                found.append(Match(kind, printable(path)))
    return found
