"""Reading events submitted by runners and people: one JSON object, a JSON array, or JSON Lines.

Every event of the input is decoded and validated before the store sees any of them, so a bad
line anywhere means nothing is written. Messages name the input, the line (or array index) and
the JSON path msgspec reports, e.g. `run.jsonl: line 3: Expected `str`, got `int` - at `$.id``.
"""

from __future__ import annotations

import msgspec

from cbledger.errors import UserError
from cbledger.ledger.encoding import redact
from cbledger.ledger.events import Event, EventBase

_ONE = msgspec.json.Decoder(Event)
_MANY = msgspec.json.Decoder(list[Event])


def parse_events(data: bytes, source: str) -> list[EventBase]:
    """Parses `data` (named `source` in messages) into validated draft events."""
    text = data.lstrip()
    if not text:
        raise UserError(f"{source}: no events in the input")
    if text[:1] == b"[":
        try:
            return list(_MANY.decode(data))
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise UserError(redact(f"{source}: {exc}")) from None
    events: list[EventBase] = []
    lines = data.splitlines()
    if text[:1] == b"{" and len([ln for ln in lines if ln.strip()]) > 1:
        # JSON Lines, unless the whole input is one pretty-printed object. Whether it is one JSON
        # document is decided before validating: ValidationError is a DecodeError too, so an
        # invalid pretty-printed event must not be mistaken for JSON Lines.
        try:
            msgspec.json.decode(data)
        except msgspec.DecodeError:
            pass
        else:
            try:
                return [_ONE.decode(data)]
            except msgspec.ValidationError as exc:
                raise UserError(redact(f"{source}: {exc}")) from None
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            events.append(_ONE.decode(line))
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise UserError(redact(f"{source}: line {lineno}: {exc}")) from None
    return events
