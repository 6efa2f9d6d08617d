"""Reading events submitted by runners and people: one JSON object, a JSON array, or JSON Lines.

Every event of the input is decoded and validated before the store sees any of them, so a bad
line anywhere means nothing is written. Messages name the input, the line (or array index) and
the JSON path msgspec reports, e.g. `run.jsonl: line 3: Expected `str`, got `int` - at `$.id``.
A submitted event is bytes like a stored one, so it is read through the same schema: a draft
written at an older version of its type is upcast (`cbledger.ledger.versions`).
"""

from __future__ import annotations

import msgspec

from cbledger.errors import UserError
from cbledger.ledger.credential_guard import redact
from cbledger.ledger.events import Event, EventBase
from cbledger.ledger.versions import CURRENT, EventSchema, InvalidEvent

_MANY = msgspec.json.Decoder(list[Event])
_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
_ERRORS = (msgspec.ValidationError, msgspec.DecodeError)


def parse_events(data: bytes, source: str, schema: EventSchema = CURRENT) -> list[EventBase]:
    """Parses `data` (named `source` in messages) into validated draft events."""
    text = data.lstrip()
    if not text:
        raise UserError(f"{source}: no events in the input")
    if text[:1] == b"[":
        return _array(data, source, schema)
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
                return [schema.decode(data)]
            except InvalidEvent as exc:
                raise UserError(f"{source}: {exc}") from None
    events: list[EventBase] = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            events.append(schema.decode(line))
        except InvalidEvent as exc:
            raise UserError(f"{source}: line {lineno}: {exc}") from None
    return events


def _array(data: bytes, source: str, schema: EventSchema) -> list[EventBase]:
    """A JSON array of events. With no evolved type in the schema one typed decode reads it all
    (its messages carry the index in the path); otherwise each item goes through the schema."""
    try:
        if not schema.evolved and schema is CURRENT:
            return list(_MANY.decode(data))
        items = _ITEMS.decode(data)
    except _ERRORS as exc:
        raise UserError(redact(f"{source}: {exc}")) from None
    events: list[EventBase] = []
    for index, item in enumerate(items):
        try:
            events.append(schema.decode(item))
        except InvalidEvent as exc:
            # the item's own path, as the one typed decode of the whole array would name it
            message = str(exc).replace("at `$", f"at `$[{index}]")
            raise UserError(f"{source}: item {index}: {message}") from None
    return events
