"""The one canonical encoding of an event, and strict decoding.

An event is encoded exactly once, when it is appended: compact JSON, keys sorted, UTC timestamps.
Those bytes are what the chain hashes and what the file holds; nothing ever re-encodes a decoded
event to check it. The round trip here (encode, then decode with the strict types) is the
validation step: it is what turns a NaN that slipped into a Python-built struct into an error
rather than a silent `null`. Decoding goes through the current schema (`versions.CURRENT`), which
reads an older stored version of an evolved type through its upcasters.

An event read from submitted bytes was validated by that decode, so its canonical bytes are not
decoded again (`Canonical`): they encode the values the decode checked, and decode back to them
(msgspec refuses a number beyond a double's range, so no decoded float is NaN or infinite;
tests/test_ledger_properties.py holds generated events to it, tests/test_ledger_append_path.py
every committed one).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from cbledger.ledger.credential_guard import redact
from cbledger.ledger.events import EventBase, event_type
from cbledger.ledger.versions import CURRENT, EventSchema, InvalidEvent

__all__ = ["Canonical", "InvalidEvent", "decode", "encode", "encode_value", "read_canonical", "redact"]

_ENCODER = msgspec.json.Encoder(order="sorted")


class Canonical(NamedTuple):
    """A draft event with its canonical bytes, already known to decode to it under `schema`:
    what `LedgerStore.append` takes without decoding the bytes again."""

    event: EventBase
    data: bytes
    schema: EventSchema
    #: where the event was read from ("events.jsonl: line 5"), for messages about it; "" when
    #: it was not read from a file (its place in the batch names it then)
    where: str = ""


def encode(event: EventBase) -> bytes:
    """Canonical bytes of a valid event; raises InvalidEvent if it would not decode back."""
    data = _ENCODER.encode(event)
    CURRENT.decode_written(data, event_type(event), event.version)
    return data


def encode_value(value: Any) -> bytes:
    """Canonical JSON of any msgspec-encodable value (bodies, records, digests)."""
    return _ENCODER.encode(value)


def decode(data: bytes | memoryview) -> EventBase:
    """Decodes stored or submitted bytes into a typed event; unknown fields and types fail."""
    return CURRENT.decode(data)


def read_canonical(data: bytes | memoryview, schema: EventSchema = CURRENT) -> Canonical:
    """A submitted event, decoded (the validation) and encoded once."""
    event = schema.decode(data)
    return Canonical(event, _ENCODER.encode(event), schema)
