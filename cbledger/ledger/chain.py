"""The hash chain and the on-disk line format.

A ledger line is `{"event":<event bytes>,"hash":"<hex>","prev":"<hex>"}` followed by `\n`.
`hash = BLAKE3(prev (32 raw bytes) || seq (8 bytes, big-endian) || event bytes)`, where the event
bytes are exactly the bytes between `"event":` and `,"hash"` as stored; the first event links to
32 zero bytes. Storing `prev` explicitly (rather than only implying it) lets verification tell a
tampered event (hash mismatch) from a dropped, reordered or inserted line (broken link), which is
the difference a reader needs to know what happened.

Lines are read with `msgspec.Raw`, which hands back the exact stored slice, so verification
hashes the stored bytes and never a re-encoding.
"""

from __future__ import annotations

import msgspec
from blake3 import blake3

GENESIS = "0" * 64


class Line(msgspec.Struct, forbid_unknown_fields=True):
    event: msgspec.Raw
    hash: str
    prev: str


_LINE_DECODER = msgspec.json.Decoder(Line)


def link_hash(prev: str, seq: int, event_bytes: bytes | memoryview) -> str:
    h = blake3(bytes.fromhex(prev))
    h.update(seq.to_bytes(8, "big"))
    h.update(event_bytes)
    return h.hexdigest()


def format_line(event_bytes: bytes, hash_hex: str, prev: str) -> bytes:
    return b'{"event":' + event_bytes + b',"hash":"' + hash_hex.encode() + b'","prev":"' + prev.encode() + b'"}\n'


def parse_line(line: bytes | memoryview) -> Line:
    """Raises msgspec.DecodeError / ValidationError for a line that is not a ledger line."""
    return _LINE_DECODER.decode(line)
