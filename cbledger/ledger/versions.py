"""Per-type schema versions, and the upcasters that read an old stored event as the current type.

Every event class declares the version of its shape, `VERSION` (1 unless the type has evolved).
A stored event names its type's version in the envelope field `version`, which is omitted at
version 1: every event written before versions existed is version 1, byte for byte as it was.

A stored event is never rewritten (the chain hashes its bytes), so a type that changes shape keeps
a way to read its old events: an upcaster per step, a pure function from a version-k body (plain
JSON values) to a version-k+1 body, registered in `UPCASTERS` under `(type, k)`. Reading an event
stored at version k of a type now at version n decodes it to plain values, passes the body through
the upcasters k → k+1 → … → n, and only then decodes it strictly as the current type, so the rules
of the current type (unknown fields, ranges, invariants) apply to the upcast result. An event at
its type's current version, which is every event of a type that never evolved, takes the one
typed decode and nothing else.

To evolve a type: change its body, raise its `VERSION` to n, and register the upcaster for
`(type, n - 1)`. `EventSchema` refuses a registry with a missing or superfluous step.

Python-built events are at the current version of their class (`EventBase.__post_init__` stamps
it); a draft submitted as JSON is bytes like any other, so a draft that omits `version` is a
version 1 draft and is upcast like a stored one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Union

import msgspec
from msgspec import UNSET, UnsetType

from cbledger.errors import UserError
from cbledger.ledger.credential_guard import redact
from cbledger.ledger.events import EVENT_CLASSES, EventBase, struct_tag

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

def _run_recorded_1_to_2(body: dict[str, Any]) -> dict[str, Any]:
    """A version-1 run recorded no batch, no provider-echoed model ids and no OS."""
    comparability = body.get("comparability")
    if not isinstance(comparability, dict) or "os" in comparability or "batch" in body or "providerModels" in body:
        raise ValueError("a version 1 body has a comparability stamp and no batch, providerModels or os")
    return {**body, "batch": None, "providerModels": [], "comparability": {**comparability, "os": None}}


#: (type, k) -> the upcaster from version k to k + 1 of that type's body.
UPCASTERS: dict[tuple[str, int], Upcaster] = {
    ("run.recorded", 1): _run_recorded_1_to_2,
}


class InvalidEvent(UserError):
    """An event that does not decode against the schema. The message names the JSON path."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


class NewerThanThisBuild(InvalidEvent):
    """A stored event at a version of its type this build does not read yet."""


def from_a_newer_build(exc: BaseException) -> bool:
    """Whether an event that did not decode fails the way a newer cbledger's event would: a type
    this build does not know, a version of it newer than it reads, or a field it does not know
    (a field added as optional needs no new version). An edit can fail so too, which only a
    newer build can tell apart: the reader is told both, never only "damaged" (an operator told
    to restore from a copy would drop the newer build's events)."""
    if isinstance(exc, NewerThanThisBuild):
        return True
    text = str(exc)
    return "unknown field" in text or ("Invalid value" in text and "`$.type`" in text)


NEWER_BUILD_HINT = (
    "a newer cbledger may have written it (a type, version or field this build does not know): "
    "upgrade cbledger and run this again; only if no newer cbledger wrote to this ledger is it damaged there"
)


class _Stamp(msgspec.Struct):
    """The envelope fields that decide how an event is read (the body is skipped, not built)."""

    type: str
    body: msgspec.Raw
    version: int | UnsetType = UNSET


_STAMP = msgspec.json.Decoder(_Stamp)
_DECODE_ERRORS = (msgspec.ValidationError, msgspec.DecodeError)


class EventSchema:
    """The event types one build reads, each at its current version, with the upcasters that
    bring older stored versions up to it."""

    def __init__(
        self,
        classes: Iterable[type[EventBase]],
        upcasters: Mapping[tuple[str, int], Upcaster] | None = None,
    ) -> None:
        self.classes: dict[str, type[EventBase]] = {struct_tag(cls): cls for cls in classes}
        self.upcasters = dict(upcasters or {})
        for tag, k in self.upcasters:
            cls = self.classes.get(tag)
            if cls is None or not 1 <= k < cls.VERSION:
                raise ValueError(f"upcaster for {tag!r} version {k}: no such step in this schema")
        for tag, cls in self.classes.items():
            missing = [k for k in range(1, cls.VERSION) if (tag, k) not in self.upcasters]
            if missing:
                raise ValueError(f"{tag!r} is at version {cls.VERSION}; no upcaster from version {missing[0]}")
        self.evolved = frozenset(tag for tag, cls in self.classes.items() if cls.VERSION > 1)
        union: Any = Union[tuple(self.classes.values())]  # noqa: UP007 (a runtime union of classes)
        self._typed: msgspec.json.Decoder[EventBase] = msgspec.json.Decoder(union)

    def version(self, tag: str) -> int:
        return self.classes[tag].VERSION

    def decode(self, data: bytes | memoryview) -> EventBase:
        """A typed event at its type's current version from stored (or submitted) bytes.

        The envelope is read first (its body skipped, not built): an event at its type's current
        version then takes the one typed decode, and only an older one (or one stating a version
        this build does not read) goes through `_upcast`.
        """
        try:
            stamp: _Stamp | None = _STAMP.decode(data)
        except _DECODE_ERRORS:
            stamp = None  # not an event at all: the typed decode says why
        if stamp is not None and (stamp.type in self.evolved or stamp.version is not UNSET):
            upcast = self._upcast(data, stamp)
            if upcast is not None:
                return upcast
        try:
            return self._typed.decode(data)
        except _DECODE_ERRORS as exc:
            raise InvalidEvent(self._said(exc)) from None

    def _said(self, exc: Exception) -> str:
        """msgspec's message, with what a reader needs next: that bytes are not JSON at all
        (msgspec says only where it stopped, e.g. "Input data was truncated"), or which types
        there are when the type is not one."""
        message = str(exc)
        if not isinstance(exc, msgspec.ValidationError):
            return f"not valid JSON: {message}"
        if message.startswith("Invalid value") and message.endswith("- at `$.type`"):
            return f"{message} (the event types: {', '.join(sorted(self.classes))})"
        return message

    def decode_written(self, data: bytes, tag: str, version: int | UnsetType) -> EventBase:
        """`decode` of bytes whose envelope the caller wrote itself (type `tag` at `version`), as
        the store's validating decode of a Python-built event is: at its type's current version
        those bytes take the typed decode alone, without first reading the envelope back."""
        cls = self.classes.get(tag)
        current = cls is not None and (
            version == cls.VERSION >= 2 if isinstance(version, int) else tag not in self.evolved
        )
        if not current:
            return self.decode(data)
        try:
            return self._typed.decode(data)
        except _DECODE_ERRORS as exc:
            raise InvalidEvent(str(exc)) from None

    def _upcast(self, data: bytes | memoryview, stamp: _Stamp) -> EventBase | None:
        """The event read from an older version of an evolved type; None when the bytes are at
        the type's current version (the typed decode reads them)."""
        cls = self.classes.get(stamp.type)
        if cls is None:
            return None
        if stamp.version is UNSET:
            stored = 1
        elif stamp.version < 2:
            raise InvalidEvent("Expected `int` >= 2 - at `$.version` (version 1 is written by omission)")
        else:
            stored = stamp.version
        if stored > cls.VERSION:
            raise NewerThanThisBuild(
                f"{stamp.type} version {stored} is newer than this build reads "
                f"(version {cls.VERSION}) - at `$.version`"
            )
        if stored == cls.VERSION:
            return None
        try:
            doc: dict[str, Any] = msgspec.json.decode(data)
        except _DECODE_ERRORS as exc:  # the envelope read skipped the body's bytes unchecked
            raise InvalidEvent(str(exc)) from None
        body = doc.get("body")
        if not isinstance(body, dict):
            raise InvalidEvent(f"Expected `object`, got `{type(body).__name__}` - at `$.body`")
        for k in range(stored, cls.VERSION):
            try:
                body = self.upcasters[(stamp.type, k)](body)
            except Exception as exc:
                raise InvalidEvent(
                    f"not a version {k} {stamp.type} body: its upcaster failed "
                    f"({type(exc).__name__}: {exc}) - at `$.body`"
                ) from None
        doc["body"], doc["version"] = body, cls.VERSION
        try:
            return self._typed.decode(msgspec.json.encode(doc))
        except _DECODE_ERRORS as exc:
            raise InvalidEvent(f"{exc} (after upcasting {stamp.type} from version {stored})") from None


CURRENT = EventSchema(EVENT_CLASSES, UPCASTERS)
