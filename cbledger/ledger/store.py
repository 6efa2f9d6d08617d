"""The append-only store: one JSON Lines file, one exclusive lock, one fsync per batch.

Contract (tested in tests/test_ledger_store.py, in the style of a recorder contract):

* An append validates every event of the batch (schema, credential scan, id conflicts) before it
  writes a byte; a batch is written with one `write` and made durable with one `fsync`, and only
  then acknowledged.
* Appends serialise on an exclusive `flock` of the ledger file. Under the lock the appender first
  reads whatever other processes appended since it last looked, so seq numbers stay contiguous
  and the chain never forks.
* An event id is an idempotency key: re-appending an id whose type and body are byte-identical is
  a no-op that returns the existing seq; the same id with a different body is a conflict.
* A crash can leave at most one incomplete final line (a torn tail). Appending refuses to build on
  it; only `truncate_torn_tail` removes it, and it removes nothing but bytes after the last
  newline. No other code path deletes or rewrites ledger bytes.
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import msgspec
from blake3 import blake3

from cbledger import credentials
from cbledger.errors import ConflictError, SecretFound, UserError
from cbledger.ledger import encoding
from cbledger.ledger.chain import GENESIS, format_line, link_hash, parse_line
from cbledger.ledger.events import (
    Actor,
    EventBase,
    LedgerCreated,
    event_type,
    make_event,
)


class LedgerMissing(UserError):
    pass


class TornTail(UserError):
    """The file ends with an incomplete line (a crash mid-write)."""


@dataclass(frozen=True)
class Head:
    seq: int
    hash: str


@dataclass(frozen=True)
class Appended:
    seq: int
    id: str
    type: str
    hash: str
    created: bool


@dataclass(frozen=True)
class StoredEvent:
    """An event as stored: its position, its links and its exact bytes."""

    seq: int
    hash: str
    prev: str
    raw: bytes
    offset: int

    @cached_property
    def event(self) -> EventBase:
        return encoding.decode(self.raw)

    @property
    def type(self) -> str:
        return event_type(self.event)


class _EnvelopeView(msgspec.Struct):
    id: str
    seq: int
    type: str
    body: msgspec.Raw


class _LineView(msgspec.Struct):
    event: _EnvelopeView
    hash: str


class _HeadView(msgspec.Struct):
    id: str
    seq: int
    type: str


class _BodyView(msgspec.Struct):
    body: msgspec.Raw


_VIEW_DECODER = msgspec.json.Decoder(_LineView)
_BODY_DECODER = msgspec.json.Decoder(_BodyView)
_HEAD_DECODER = msgspec.json.Decoder(_HeadView)


# Patterns that cannot look outside the text they match (no anchors, no lookaround).
_SHORTCUT_SOUND = not any(
    re.search(r"[\^$]|\\[AZ]|\(\?[=!<(]", p.regex) for p in credentials.PATTERNS
)
_CREDENTIALS = tuple(p.compiled() for p in credentials.PATTERNS)
_JSON_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|(.))")
_UNESCAPED = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _unescape(m: re.Match[str]) -> str:
    return chr(int(m[1], 16)) if m[1] else _UNESCAPED.get(m[2], m[0])


def _may_hold_credential(data: bytes) -> bool:
    """False only when no string of the event (key or value) can match a credential pattern.

    The full scan walks every string separately, which costs more than validating the event.
    Once its escapes are undone, the canonical JSON holds every string verbatim, so a pattern
    that matches inside one string also matches the whole text: one search per pattern over it
    rules the event out. A hit anywhere sends the event to the full scan, which alone decides
    and says where.
    """
    if not _SHORTCUT_SOUND:
        return True
    if not credentials.may_match(data):
        return False
    text = data.decode()
    if "\\" in text:
        text = _JSON_ESCAPE.sub(_unescape, text)
    return any(rx.search(text) for rx in _CREDENTIALS)


def _content_digest(type_: str, body_bytes: bytes | memoryview) -> bytes:
    h = blake3(type_.encode())
    h.update(b"\0")
    h.update(body_bytes)
    return h.digest()


@dataclass
class _Index:
    """What an appender must know of the file: where it ends, its head and every id."""

    offset: int = 0
    head: Head = field(default_factory=lambda: Head(0, GENESIS))
    ids: dict[str, tuple[int, bytes, str]] = field(default_factory=dict)


class LedgerStore:
    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._index = _Index()

    # ------------------------------------------------------------------ creation

    def exists(self) -> bool:
        return self.path.is_file() and self.path.stat().st_size > 0

    def init(self, name: str, actor: Actor, description: str = "") -> Appended:
        """Creates the file and appends `ledger.created` as seq 1. Refuses an existing ledger."""
        if self.exists():
            raise UserError(f"{self.path}: a ledger already exists here")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
        os.close(fd)
        _fsync_dir(self.path.parent)
        event = make_event(
            LedgerCreated(name=name, description=description),
            id=f"ledger.created:{name}",
            actor=actor,
        )
        return self.append([event], _allow_create=True)[0]

    # ------------------------------------------------------------------ appending

    def append(self, events: Sequence[EventBase], *, _allow_create: bool = False) -> list[Appended]:
        """Appends a batch atomically with respect to validation: all or nothing is written."""
        if not self.path.is_file():
            raise LedgerMissing(f"{self.path}: no ledger here (run `cbledger init` first)")
        prepared = [self._prepare(i, e) for i, e in enumerate(events)]
        with self._locked() as fd:
            self._catch_up(fd)
            if self._index.head.seq == 0 and not _allow_create:
                raise UserError(f"{self.path}: empty ledger; run `cbledger init` first")
            results: list[Appended] = []
            pending: list[bytes] = []
            batch_ids: dict[str, tuple[int, bytes, str]] = {}
            seq, prev = self._index.head.seq, self._index.head.hash
            for ev, body_bytes, digest in prepared:
                seen = self._index.ids.get(ev.id) or batch_ids.get(ev.id)
                if seen is not None:
                    if seen[1] != digest:
                        raise ConflictError(
                            f"{self.path}: event id {ev.id!r} exists at seq {seen[0]} "
                            "with a different type or body"
                        )
                    results.append(Appended(seen[0], ev.id, event_type(ev), seen[2], created=False))
                    continue
                seq += 1
                if (event_type(ev) == "ledger.created") != (seq == 1):
                    # verify rejects any other placement, so the store must never write one
                    raise UserError(
                        f"{self.path}: event {ev.id!r} would be seq {seq}; seq 1 must be "
                        "ledger.created and nothing else may be; nothing written"
                    )
                data = encoding.encode_value(msgspec.structs.replace(ev, seq=seq))
                h = link_hash(prev, seq, data)
                pending.append(format_line(data, h, prev))
                batch_ids[ev.id] = (seq, digest, h)
                results.append(Appended(seq, ev.id, event_type(ev), h, created=True))
                prev = h
            if pending:
                self._write_durably(fd, b"".join(pending))
                self._index.ids.update(batch_ids)
                self._index.head = Head(seq, prev)
            return results

    def _prepare(self, index: int, event: EventBase) -> tuple[EventBase, bytes, bytes]:
        data = encoding.encode_value(event)  # the draft's canonical bytes, not yet validated
        # The credential scan comes first and its message is redacted: the id, or a dict key in a
        # match's location, may be the credential itself.
        if _may_hold_credential(data):
            found = credentials.scan_json(msgspec.to_builtins(event), "$")
            if found:
                where = ", ".join(str(m) for m in found)
                raise SecretFound(
                    encoding.redact(
                        f"event {index} ({event.id}): credential pattern matched: {where}; "
                        "nothing written"
                    )
                )
        if event.seq != 0:
            raise UserError(f"event {index} ({event.id}): seq is assigned by the ledger; omit it")
        # Decoding is validation (NaN encoded as null, ranges, invariants), done once, here,
        # before the lock is taken; under the lock only the seq changes, which cannot invalidate.
        encoding.decode(data)
        body_bytes = _BODY_DECODER.decode(data).body  # the body's canonical bytes, as a slice
        return event, body_bytes, _content_digest(event_type(event), body_bytes)

    def _write_durably(self, fd: int, data: bytes) -> None:
        start = os.lseek(fd, 0, os.SEEK_END)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        except OSError:
            # Only our own, never-acknowledged bytes are removed: we hold the lock, and `start`
            # was the end of the file when we took it.
            os.ftruncate(fd, start)
            os.fsync(fd)
            raise
        self._index.offset = start + len(data)

    @contextmanager
    def _locked(self) -> Iterator[int]:
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield fd
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _catch_up(self, fd: int, size: int | None = None) -> None:
        """Indexes what was appended since we last looked, up to `size` (a committed size learnt
        under a lock); without `size` the caller holds the exclusive lock and reads to the end."""
        if size is None:
            size = os.fstat(fd).st_size
        idx = self._index
        if size < idx.offset:
            raise UserError(f"{self.path}: the ledger shrank underneath this process")
        if size == idx.offset:
            return
        with open(self.path, "rb") as f:
            f.seek(idx.offset)
            offset = idx.offset
            for line in f:
                if offset + len(line) > size:
                    break  # an append that began after `size` was learnt; not ours to see yet
                if not line.endswith(b"\n"):
                    raise TornTail(
                        f"{self.path}: incomplete last line at byte {offset} "
                        "(run `cbledger repair --truncate-torn-tail`)"
                    )
                try:
                    view = _VIEW_DECODER.decode(line)
                except msgspec.MsgspecError:
                    raise UserError(
                        f"{self.path}: undecodable line at byte {offset}; "
                        "run `cbledger replay --verify` to locate it"
                    ) from None
                ev = view.event
                idx.ids[ev.id] = (ev.seq, _content_digest(ev.type, ev.body), view.hash)
                idx.head = Head(ev.seq, view.hash)
                offset += len(line)
            idx.offset = offset

    # ------------------------------------------------------------------ reading

    def head(self) -> Head:
        with self._shared() as size:
            if size != self._index.offset:
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    self._catch_up(fd, size)
                finally:
                    os.close(fd)
        return self._index.head

    @contextmanager
    def _shared(self) -> Iterator[int]:
        """A shared lock for as long as it takes to learn a size that ends on a line boundary."""
        if not self.path.is_file():
            raise LedgerMissing(f"{self.path}: no ledger here (run `cbledger init` first)")
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            size = os.fstat(fd).st_size
            fcntl.flock(fd, fcntl.LOCK_UN)
            yield size
        finally:
            os.close(fd)

    def committed_size(self) -> int:
        with self._shared() as size:
            return size

    def read(
        self, since: int = 0, until: int | None = None, types: set[str] | None = None
    ) -> Iterator[StoredEvent]:
        """Events with since < seq <= until, in order. Stops before an incomplete last line."""
        limit = self.committed_size()
        with open(self.path, "rb") as f:
            offset = 0
            for line in f:
                if offset + len(line) > limit or not line.endswith(b"\n"):
                    return
                parsed = parse_line(line)
                raw = bytes(parsed.event)
                view = _HEAD_DECODER.decode(raw)
                here = offset
                offset += len(line)
                if view.seq <= since:
                    continue
                if until is not None and view.seq > until:
                    return
                if types is not None and view.type not in types:
                    continue
                yield StoredEvent(view.seq, parsed.hash, parsed.prev, raw, here)

    def find(self, key: int | str) -> StoredEvent | None:
        """By seq (an int or all-digit string) or by event id (never all digits, see EventId)."""
        if isinstance(key, str) and key.isascii() and key.isdigit():
            key = int(key)
        for stored in self.read():
            if isinstance(key, int):
                if stored.seq == key:
                    return stored
            elif stored.event.id == key:
                return stored
        return None

    # ------------------------------------------------------------------ repair

    def torn_tail(self) -> bytes | None:
        """The bytes after the last newline, if any."""
        with open(self.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            cut = _end_of_last_line(f, size)
            f.seek(cut)
            return f.read() or None

    def truncate_torn_tail(self) -> bytes | None:
        """Removes exactly the incomplete final line and returns what it removed."""
        with self._locked() as fd:
            size = os.fstat(fd).st_size
            with open(self.path, "rb") as f:
                cut = _end_of_last_line(f, size)
                f.seek(cut)
                removed = f.read()
            if cut == size:
                return None
            os.ftruncate(fd, cut)
            os.fsync(fd)
            self._index = _Index()
            return removed


def _end_of_last_line(f, size: int) -> int:
    """Offset just past the last newline (0 if there is none), reading backwards in chunks."""
    pos = size
    chunk = 1 << 16
    while pos > 0:
        start = max(0, pos - chunk)
        f.seek(start)
        block = f.read(pos - start)
        i = block.rfind(b"\n")
        if i >= 0:
            return start + i + 1
        pos = start
    return 0


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
