"""The credential pattern set of the copperbench standard (section 6.1).

One list, shared by the graded `no_secret` assertion, the ledger's append guard and the scan that
runs before anything is written under `results/`, so the three can never drift apart. Changing a
pattern changes `PATTERN_SET_HASH`, which `suite bump` records: the set is part of the grading
contract, not a lint setting.

Matches are reported by kind and location only. The matched text is never returned, logged or
echoed: a failure message is published output too.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
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
)

_COMPILED = tuple((p.kind, p.compiled()) for p in PATTERNS)
_ANCHORS = tuple(a.encode() for p in PATTERNS if not p.flags & re.IGNORECASE for a in p.anchors)
_ANCHORS_CI = tuple(a.lower().encode() for p in PATTERNS if p.flags & re.IGNORECASE for a in p.anchors)
# Anchors holding an underscore are only searched for when the text has one at all: most events
# have none, and each search is a pass over the whole text.
_PLAIN = tuple(a for a in _ANCHORS if b"_" not in a)
_UNDERSCORED = tuple(a for a in _ANCHORS if b"_" in a)


def may_match(data: bytes) -> bool:
    """False when no pattern can match anywhere in `data` (no anchor occurs). Anchors contain
    no character JSON escapes, so this holds for canonical JSON of any value too."""
    if any(a in data for a in _PLAIN):
        return True
    if _UNDERSCORED and b"_" in data and any(a in data for a in _UNDERSCORED):
        return True
    if _ANCHORS_CI:
        lowered = data.lower()
        return any(a in lowered for a in _ANCHORS_CI)
    return False


def _pattern_set_hash() -> str:
    h = hashlib.sha256()
    for p in PATTERNS:
        h.update(f"{p.kind}\0{p.regex}\0{p.flags}\n".encode())
    return h.hexdigest()


PATTERN_SET_HASH = _pattern_set_hash()


@dataclass(frozen=True)
class Match:
    """Where a credential pattern matched: never what matched."""

    kind: str
    location: str

    def __str__(self) -> str:
        return f"{self.kind} at {self.location}"


def scan_text(text: str, location: str) -> list[Match]:
    """Every pattern kind that matches `text`, with a line number appended to `location`."""
    found: list[Match] = []
    for kind, rx in _COMPILED:
        for m in rx.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(Match(kind, f"{location}:{line}"))
    return found


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
    """Scans every string (keys included) of a decoded JSON value; locations are JSON paths."""
    found: list[Match] = []
    for path, text in _walk(value, root):
        for kind, rx in _COMPILED:
            if rx.search(text):
                found.append(Match(kind, path))
    return found
