"""The ledger's credential policy: no event that matches a credential pattern is ever written, and
no message about one repeats what matched.

The patterns are the standard's (`cbledger.credentials`); this module decides how the ledger
applies them to an event cheaply and how its refusals are worded.
"""

from __future__ import annotations

import re

import msgspec

from cbledger import credentials
from cbledger.errors import SecretFound
from cbledger.ledger.events import EventBase

_KINDS = tuple((p.kind, p.compiled()) for p in credentials.PATTERNS)


def redact(message: str) -> str:
    """`message` with every credential match replaced by its kind.

    Schema errors quote what they reject (an unknown field's name, an enum value, an id), and a
    refusal message is published output too, so anything built from input passes through here.
    """
    for kind, rx in _KINDS:
        message = rx.sub(f"<{kind}>", message)
    return message


# Character classes, then what would let a pattern look outside the text it matches: `^`, `$`,
# lookaround, `\A`, `\Z`, `\B`, and a `\b` anywhere but at the start (where every pattern that
# has one is followed by a letter, so a quote or a string's start before it are both boundaries).
_CLASS = re.compile(r"\[(?:\\.|[^\]])*\]")
_LOOKS_OUTSIDE = re.compile(r"[\^$]|\(\?<?[=!]|\\[AZB]|(?<!^)\\b")
_SHORTCUT_SOUND = not any(_LOOKS_OUTSIDE.search(_CLASS.sub("", p.regex)) for p in credentials.PATTERNS)


#: The JSON escapes that can spell a character some anchor holds. Every other one (`\"`, `\\`,
#: `\b`, `\f`, `\n`, `\r`, `\t`) undoes to a quote, a backslash or a control character, which no
#: anchor holds; and with neither of these two in a text, undoing its escapes cannot make one
#: appear at any depth (a `\u` or `\/` one level down is a `\\u` or `\\/` here, which holds it).
_ESCAPE_SPELLING_AN_ANCHOR = re.compile(r"\\[u/]")


def may_hold_credential(data: bytes) -> bool:
    """False only when no string of the event (key or value) can match a credential pattern,
    as written or with its own JSON escapes undone (what the full scan looks at).

    The full scan walks every string separately, which costs more than validating the event.
    Undoing the canonical bytes' escapes once gives every string verbatim, between JSON's own
    punctuation; undoing them again, to every depth, gives each string with its own escapes undone (an escape
    never reaches from one string into the next). A pattern that cannot look outside what it
    matches and matches inside one string also matches that whole text, so one search per
    pattern over each rules the event out; a pattern none of whose anchors occurs is not even
    run. A hit anywhere sends the event to the full scan, which alone decides and says where.
    Most events hold escapes (a seed config is JSON in a string) and no anchor: when no escape
    can spell one, the anchors of the bytes as written are every anchor at every depth, so an
    event with none is ruled out with nothing undone, and only the patterns of those found are
    run on the deeper texts.
    """
    if not _SHORTCUT_SOUND:
        return True
    text = data.decode()
    if "\\" not in text:
        return credentials.matches_somewhere(text)
    # None: an escape may spell an anchor, so each depth is searched for its own
    kinds = None if _ESCAPE_SPELLING_AN_ANCHOR.search(text) else credentials.anchored_kinds(text)
    if kinds is not None and not kinds:
        return False
    strings = credentials.unescaped(text)
    if credentials.matches_somewhere(strings, kinds):
        return True
    return "\\" in strings and credentials.matches_somewhere(credentials.unescaped_fully(strings), kinds)


def _label(index: int | str) -> str:
    return index if isinstance(index, str) else f"event {index}"


def refuse_credentials(index: int | str, event: EventBase, data: bytes) -> None:
    """Raises SecretFound, naming kinds and JSON paths only, if event `index` of a batch (or the
    event read at `index`, a "file: line N") holds a credential; `data` is its canonical
    encoding. The message is redacted as a whole: the id, or a dict key in a match's location,
    may be the credential itself."""
    if not may_hold_credential(data):
        return
    found = credentials.scan_json(msgspec.to_builtins(event), "$")
    if found:
        where = ", ".join(str(m) for m in found)
        raise SecretFound(
            redact(f"{_label(index)} ({event.id}): credential pattern matched: {where}; nothing written")
        )
