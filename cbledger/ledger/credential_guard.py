"""The ledger's credential policy: no event that matches a credential pattern is ever written, and
no message about one repeats what matched.

The patterns are the standard's (`cbledger.credentials`); this module decides how the ledger
applies them to an event cheaply and how its refusals are worded.
"""

from __future__ import annotations

import json
import re

import msgspec

from cbledger import credentials
from cbledger.errors import SecretFound
from cbledger.ledger.events import EventBase

_KINDS = tuple((p.kind, p.compiled()) for p in credentials.PATTERNS)
_COMPILED = tuple(rx for _, rx in _KINDS)
# Patterns that cannot look outside the text they match (no anchors, no lookaround).
_SHORTCUT_SOUND = not any(
    re.search(r"[\^$]|\\[AZ]|\(\?[=!<(]", p.regex) for p in credentials.PATTERNS
)
# One JSON escape sequence; the standard decoder turns each into the character it stands for.
_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|.)", re.DOTALL)


def redact(message: str) -> str:
    """`message` with every credential match replaced by its kind.

    Schema errors quote what they reject (an unknown field's name, an enum value, an id), and a
    refusal message is published output too, so anything built from input passes through here.
    """
    for kind, rx in _KINDS:
        message = rx.sub(f"<{kind}>", message)
    return message


def _unescaped(escape: re.Match[str]) -> str:
    return str(json.loads(f'"{escape[0]}"'))


def may_hold_credential(data: bytes) -> bool:
    """False only when no string of the event (key or value) can match a credential pattern.

    The full scan walks every string separately, which costs more than validating the event.
    Once its escapes are undone, the canonical JSON holds every string verbatim, so a pattern
    that matches inside one string also matches the whole text: one search per pattern over it
    rules the event out. A hit anywhere sends the event to the full scan, which alone decides
    and says where. Each escape is undone by the standard JSON decoder.
    """
    if not _SHORTCUT_SOUND:
        return True
    if not credentials.may_match(data):
        return False
    text = data.decode()
    if "\\" in text:
        text = _ESCAPE.sub(_unescaped, text)
    return any(rx.search(text) for rx in _COMPILED)


def refuse_credentials(index: int, event: EventBase, data: bytes) -> None:
    """Raises SecretFound, naming kinds and JSON paths only, if event `index` of a batch holds a
    credential; `data` is its canonical encoding. The message is redacted as a whole: the id, or
    a dict key in a match's location, may be the credential itself."""
    if not may_hold_credential(data):
        return
    found = credentials.scan_json(msgspec.to_builtins(event), "$")
    if found:
        where = ", ".join(str(m) for m in found)
        raise SecretFound(
            redact(f"event {index} ({event.id}): credential pattern matched: {where}; nothing written")
        )
