"""The one canonical encoding of an event, and strict decoding.

An event is encoded exactly once, when it is appended: compact JSON, keys sorted, UTC timestamps.
Those bytes are what the chain hashes and what the file holds; nothing ever re-encodes a decoded
event to check it. The round trip here (encode, then decode with the strict types) is the
validation step: it is what turns a NaN that slipped into a Python-built struct into an error
rather than a silent `null`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from cbledger import credentials
from cbledger.errors import UserError
from cbledger.ledger.events import Event, EventBase

_ENCODER = msgspec.json.Encoder(order="sorted")
_DECODER = msgspec.json.Decoder(Event)
_CREDENTIALS = tuple((p.kind, p.compiled()) for p in credentials.PATTERNS)


def redact(message: str) -> str:
    """`message` with every credential match replaced by its kind.

    Schema errors quote what they reject (an unknown field's name, an enum value, an id), and a
    refusal message is published output too, so anything built from input passes through here.
    """
    for kind, rx in _CREDENTIALS:
        message = rx.sub(f"<{kind}>", message)
    return message


class InvalidEvent(UserError):
    """An event that does not decode against the schema. The message names the JSON path."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


def encode(event: EventBase) -> bytes:
    """Canonical bytes of a valid event; raises InvalidEvent if it would not decode back."""
    data = _ENCODER.encode(event)
    try:
        _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise InvalidEvent(str(exc)) from None
    return data


def encode_value(value: Any) -> bytes:
    """Canonical JSON of any msgspec-encodable value (bodies, records, digests)."""
    return _ENCODER.encode(value)


def decode(data: bytes | memoryview) -> EventBase:
    """Decodes stored or submitted bytes into a typed event; unknown fields and types fail."""
    try:
        return _DECODER.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise InvalidEvent(str(exc)) from None


def convert(obj: Any) -> EventBase:
    """Validates an already-parsed JSON object as an event (used for JSON Lines input)."""
    try:
        return msgspec.convert(obj, Event, strict=True)
    except msgspec.ValidationError as exc:
        raise InvalidEvent(str(exc)) from None
