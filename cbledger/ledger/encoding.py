"""The one canonical encoding of an event, and strict decoding.

An event is encoded exactly once, when it is appended: compact JSON, keys sorted, UTC timestamps.
Those bytes are what the chain hashes and what the file holds; nothing ever re-encodes a decoded
event to check it. The round trip here (encode, then decode with the strict types) is the
validation step: it is what turns a NaN that slipped into a Python-built struct into an error
rather than a silent `null`. Decoding goes through the current schema (`versions.CURRENT`), which
reads an older stored version of an evolved type through its upcasters.
"""

from __future__ import annotations

from typing import Any

import msgspec

from cbledger.ledger.credential_guard import redact
from cbledger.ledger.events import EventBase
from cbledger.ledger.versions import CURRENT, InvalidEvent

__all__ = ["InvalidEvent", "decode", "encode", "encode_value", "redact"]

_ENCODER = msgspec.json.Encoder(order="sorted")


def encode(event: EventBase) -> bytes:
    """Canonical bytes of a valid event; raises InvalidEvent if it would not decode back."""
    data = _ENCODER.encode(event)
    CURRENT.decode(data)
    return data


def encode_value(value: Any) -> bytes:
    """Canonical JSON of any msgspec-encodable value (bodies, records, digests)."""
    return _ENCODER.encode(value)


def decode(data: bytes | memoryview) -> EventBase:
    """Decodes stored or submitted bytes into a typed event; unknown fields and types fail."""
    return CURRENT.decode(data)

