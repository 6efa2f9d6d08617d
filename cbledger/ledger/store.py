"""The ledger service: what every caller (the CLI, the runner, imports, re-scoring) appends
through and reads from, over any recorder (`cbledger.ledger.recorder`).

The service owns the rules; the recorder owns the bytes. So a second backend gets every rule
below by implementing the recorder contract, and the rules are tested once for all backends
(tests/test_ledger_contract.py):

* An append validates every event of the batch (schema round trip, credential scan, no client
  seq) before it takes any lock, and writes nothing unless all pass.
* An event id is an idempotency key: re-appending an id whose type, version and body are
  byte-identical is a no-op that reports the existing seq; the same id with anything else is a
  conflict. Within one batch the same rule holds between its own events.
* Seq 1 is `ledger.created` and nothing else may be; an empty ledger accepts nothing but it.
* Seqs and the chain are assigned here, on the head the recorder reports inside `exclusive()`,
  and the batch is appended with that head as the expected one: if another writer got in (a
  backend whose `exclusive()` takes no lock, like PostgreSQL's), the batch is rebuilt on the head
  the refusal names, at least `ATTEMPTS` times and for at least `CONTENTION_SECONDS`, so a busy
  ledger delays a writer but does not fail it.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

import msgspec
from msgspec import UNSET, UnsetType

from cbledger import invocation
from cbledger.errors import ConflictError, UserError
from cbledger.inputs import printable
from cbledger.ledger import encoding
from cbledger.ledger.chain import link_hash
from cbledger.ledger.credential_guard import refuse_credentials
from cbledger.ledger.encoding import Canonical
from cbledger.ledger.events import Actor, EventBase, LedgerCreated, event_type, make_event
from cbledger.ledger.jsonl import JsonLinesRecorder
from cbledger.ledger.limits import limit_problem
from cbledger.ledger.recorder import (
    Head,
    HeadMoved,
    LedgerMissing,
    Recorder,
    StoredEvent,
    TailRepair,
    TornTail,
)
from cbledger.ledger.versions import CURRENT, EventSchema
from cbledger.workspace import is_database_url

#: Rebuilds of one batch on a moved head before the conflict is the caller's: at least this
#: many, and for at least this long (eight writers racing without a lock lose a round each most
#: of the time; a deadline, not a count, bounds how long one of them may keep losing).
ATTEMPTS = 8
CONTENTION_SECONDS = 30.0

#: A rule over a whole batch and the log it joins; raises UserError to refuse the batch.
#: reads the log about a batch: (the store, its events, what names each in a message)
BatchCheck = Callable[["LedgerStore", Sequence[EventBase], Sequence[str]], None]


@dataclass(frozen=True)
class Appended:
    seq: int
    id: str
    type: str
    hash: str
    created: bool
    #: a repeat, in the same batch, of an event the batch itself appends (written once)
    repeat_in_batch: bool = False


class _Identity(msgspec.Struct):
    """What idempotency compares: the type, the version written, and the body's exact bytes."""

    type: str
    body: msgspec.Raw
    version: int | UnsetType = UNSET


_IDENTITY = msgspec.json.Decoder(_Identity)


class _Draft(NamedTuple):
    event: EventBase
    type: str
    version: int
    #: the draft's canonical bytes (seq 0), validated; what the stored event's bytes are made from
    data: bytes

    def identity(self) -> tuple[str, int, bytes]:
        """What idempotency compares (type, version written, the body's exact bytes); read only
        for an id met before, in the ledger or in the batch, which most drafts are not."""
        return self.type, self.version, bytes(_IDENTITY.decode(self.data).body)


#: Every event's canonical bytes end `,"seq":<n>,"type":"<tag>"` and then, at version 2 and
#: above, `,"version":<n>`: keys are sorted, and no key sorts after those three.
_SEQ_DRAFT = b',"seq":0,"type":"'
_TAIL = re.compile(rb'[a-z.]+"(?:,"version":[0-9]+)?}')


def with_seq(data: bytes, seq: int) -> bytes | None:
    """A draft's canonical bytes (seq 0) with `seq` spliced in: the bytes encoding the event
    with that seq would give, without encoding it again. None when the bytes do not end as an
    event's do (the caller encodes instead)."""
    at = data.rfind(_SEQ_DRAFT)
    if at < 0 or not _TAIL.fullmatch(data, at + len(_SEQ_DRAFT)):
        return None
    return b"%s,\"seq\":%d%s" % (data[:at], seq, data[at + 8 :])


def open_recorder(where: Path | str) -> Recorder:
    """The backend a location names: a `postgresql://` URL is a ledger in PostgreSQL
    (`cbledger.ledger.postgres`), anything else the JSON Lines file at that path."""
    if is_database_url(where):
        from cbledger.ledger.postgres import PostgresRecorder  # psycopg only when it is used

        return PostgresRecorder(str(where))
    return JsonLinesRecorder(where)


class LedgerStore:
    """The ledger at `where`: a path (the JSON Lines file), a database URL, or any recorder."""

    def __init__(self, where: Path | str | Recorder, *, schema: EventSchema = CURRENT) -> None:
        self.recorder = where if isinstance(where, Recorder) else open_recorder(where)
        self.schema = schema

    @property
    def location(self) -> str:
        return self.recorder.location

    # ------------------------------------------------------------------ creation

    def exists(self) -> bool:
        return self.recorder.exists()

    def init(self, name: str, actor: Actor, description: str = "") -> Appended:
        """Creates the ledger and appends `ledger.created` as seq 1. Refuses an existing ledger."""
        if self.recorder.exists():
            raise UserError(f"{self.location}: a ledger already exists here")
        self.recorder.create()
        event = make_event(
            LedgerCreated(name=name, description=description),
            id=f"ledger.created:{name}",
            actor=actor,
        )
        return self._append([event], genesis=True)[0]

    # ------------------------------------------------------------------ appending

    def append(
        self, events: Sequence[EventBase | Canonical], *, check: BatchCheck | None = None
    ) -> list[Appended]:
        """Appends a batch atomically with respect to validation: all or nothing is written.
        `check` (e.g. `ledger.semantics.check_batch`) reads the log about the batch after every
        event passed its own validation, the credential scan first, so that no message of the
        check can echo what the scan refuses. An event read from bytes (`encoding.Canonical`,
        as `intake.parse_drafts` gives it) comes with its canonical bytes, which are not decoded
        again."""
        return self._append(events, genesis=False, check=check)

    def _append(
        self, events: Sequence[EventBase | Canonical], *, genesis: bool, check: BatchCheck | None = None
    ) -> list[Appended]:
        with self.recorder.appending():
            return self._append_now(events, genesis=genesis, check=check)

    def _append_now(
        self, events: Sequence[EventBase | Canonical], *, genesis: bool, check: BatchCheck | None = None
    ) -> list[Appended]:
        labels = [e.where if isinstance(e, Canonical) and e.where else f"event {i}" for i, e in enumerate(events)]
        prepared = [self._prepare(label, e) for label, e in zip(labels, events, strict=True)]
        if check is not None:
            check(self, [d.event for d in prepared], labels)
        until = time.monotonic() + CONTENTION_SECONDS
        moved: Head | None = None
        for attempt in itertools.count(1):
            with self.recorder.exclusive():
                head = self.recorder.head() if moved is None else moved
                if head.seq == 0 and not genesis:
                    raise UserError(f"{self.location}: empty ledger; run `{invocation.command('init')}` first")
                records, results = self._chain(prepared, head, labels)
                try:
                    self.recorder.append(records, head)
                except HeadMoved as exc:
                    if attempt >= ATTEMPTS and time.monotonic() >= until:
                        raise
                    moved = exc.actual
                    continue
                return results
        raise AssertionError("unreachable")

    def _prepare(self, label: str, item: EventBase | Canonical) -> _Draft:
        """Validates one draft, before any lock is taken; under the lock only its seq changes,
        which cannot invalidate it. Its bytes are decoded once on the way: here, for an event
        built in Python, or already by whoever read it from bytes."""
        if isinstance(item, Canonical) and item.schema is self.schema:
            event, data, decoded = item.event, item.data, True
        else:
            event = item.event if isinstance(item, Canonical) else item
            data, decoded = encoding.encode_value(event), False  # not yet validated
        # The credential scan comes first and its message is redacted: the id, or a dict key in
        # a match's location, may be the credential itself.
        refuse_credentials(label, event, data)
        if event.seq != 0:
            raise UserError(f"{label} ({event.id}): seq is assigned by the ledger; omit it")
        problem = limit_problem(data)
        if problem is not None:
            raise UserError(f"{label} ({printable(event.id)}): {problem}")
        tag, version = event_type(event), event.version
        if not decoded:
            # Decoding is validation (NaN encoded as null, ranges, invariants), done once, here.
            self.schema.decode_written(data, tag, version)
        return _Draft(event, tag, 1 if version is UNSET else version, data)

    def _chain(
        self, prepared: Sequence[_Draft], head: Head, labels: Sequence[str] | None = None,
    ) -> tuple[list[StoredEvent], list[Appended]]:
        """The records to append on `head` and what to acknowledge for every draft. `labels` name
        each draft as its input does (`FILE: line N`), for a conflict's message."""
        records: list[StoredEvent] = []
        results: list[Appended] = []
        batch: dict[str, tuple[_Draft, Appended]] = {}
        known = self.recorder.lookup_many({d.event.id for d in prepared})
        seq, prev = head.seq, head.hash
        for draft in prepared:
            ev = draft.event
            earlier = batch.get(ev.id)
            if earlier is not None:
                if earlier[0].identity() != draft.identity():
                    # the earlier one is not stored yet: name it by its place in the input
                    a, b = prepared.index(earlier[0]), prepared.index(draft)
                    where = (f"{labels[a]} and {labels[b]}" if labels and labels[a] != f"event {a}"
                             else f"events {a} and {b}")
                    raise ConflictError(
                        f"{self.location}: event id {ev.id!r} appears twice in this batch with different "
                        f"types or bodies ({where}); nothing written"
                    )
                results.append(replace(earlier[1], created=False, repeat_in_batch=True))
                continue
            stored = known.get(ev.id)
            if stored is not None:
                if not self._same(stored, draft):
                    i = prepared.index(draft)
                    raise self._conflict(ev.id, stored.seq, labels[i] if labels and labels[i] != f"event {i}" else None)
                results.append(Appended(stored.seq, ev.id, draft.type, stored.hash, created=False))
                continue
            seq += 1
            if (draft.type == "ledger.created") != (seq == 1):
                # verify rejects any other placement, so the store must never write one
                raise UserError(
                    f"{self.location}: event {ev.id!r} would be seq {seq}; seq 1 must be "
                    "ledger.created and nothing else may be; nothing written"
                )
            data = with_seq(draft.data, seq) or encoding.encode_value(msgspec.structs.replace(ev, seq=seq))
            h = link_hash(prev, seq, data)
            records.append(StoredEvent(seq, ev.id, draft.type, data, h, prev))
            appended = Appended(seq, ev.id, draft.type, h, created=True)
            batch[ev.id] = (draft, appended)
            results.append(appended)
            prev = h
        return records, results

    def _same(self, stored: StoredEvent, draft: _Draft) -> bool:
        """Whether a stored event is the draft again. An event stored at an older version of its
        type is compared as read today, through the upcasters."""
        identity = _IDENTITY.decode(stored.raw)
        version = 1 if identity.version is UNSET else identity.version
        if identity.type != draft.type:
            return False
        body = draft.identity()[2]
        if version == draft.version:
            return bytes(identity.body) == body
        upcast = encoding.encode_value(self.schema.decode(stored.raw))
        return bytes(_IDENTITY.decode(upcast).body) == body

    def _conflict(self, event_id: str, seq: int, label: str | None = None) -> ConflictError:
        return ConflictError(
            f"{self.location}: event id {event_id!r} exists at seq {seq} "
            "with a different type or body" + (f" than {label} gives" if label else "")
        )

    # ------------------------------------------------------------------ reading

    def head(self) -> Head:
        return self.recorder.head()

    def read(
        self, since: int = 0, until: int | None = None, types: set[str] | None = None
    ) -> Iterator[StoredEvent]:
        """Events with since < seq <= until, in order. Stops before an incomplete last line."""
        stored = self.recorder.read(since, until, types)
        if self.schema is CURRENT:
            return stored
        return (replace(s, schema=self.schema) for s in stored)

    def holds(self, event_ids: Iterable[str]) -> bool:
        """Whether every one of these ids is in the ledger: how a writer interrupted during an
        append learns whether its batch landed (a batch lands whole or not at all) before it
        removes files the batch's events would name."""
        wanted = set(event_ids)
        return len(self.recorder.lookup_many(wanted)) == len(wanted)

    def find(self, key: int | str) -> StoredEvent | None:
        """By seq (an int or all-digit string) or by event id (never all digits, see EventId)."""
        if isinstance(key, str) and key.isascii() and key.isdigit():
            key = int(key)
        if isinstance(key, int):
            found = next(self.read(since=key - 1, until=key), None)
        else:
            found = self.recorder.lookup(key)
        if found is None or self.schema is CURRENT:
            return found
        return replace(found, schema=self.schema)

    # ------------------------------------------------------------------ repair

    def torn_tail(self) -> bytes | None:
        """The bytes a crash left after the last complete event, if any."""
        return self.recorder.torn_tail()

    def truncate_torn_tail(self) -> bytes | None:
        """Removes exactly the incomplete final record and returns what it removed."""
        return self.recorder.truncate_torn_tail()

    def repair_tail(self) -> TailRepair:
        """Removes an incomplete final record; a complete one that lost its terminator gets it back."""
        return self.recorder.repair_tail()


def remove_unless_landed(store: LedgerStore | None, event_ids: Sequence[str], paths: Iterable[Path]) -> None:
    """After an append that raised (an interrupt, a refusal), removes the files written for its
    batch unless the batch landed. An interrupt may arrive after the batch was made durable and
    before the append returned; the events then name these files, and removing them would leave
    the ledger naming files it lost. `store` is None when the append never began."""
    if event_ids and store is not None and store.holds(event_ids):
        return
    for path in paths:
        path.unlink(missing_ok=True)


__all__ = [
    "Appended",
    "Head",
    "LedgerMissing",
    "LedgerStore",
    "StoredEvent",
    "TailRepair",
    "TornTail",
    "open_recorder",
    "remove_unless_landed",
]
