"""The storage contract: what a backend does for the ledger, and nothing more.

A recorder keeps chained records in order. It knows nothing of event types, validation,
credentials or idempotency: those belong to the service above it (`cbledger.ledger.store`), so a
second backend gets them by implementing this class. The split follows the recorder / application
split of event-sourcing libraries: the recorder writes and reads records, the layer above decides
what a record may be, numbers it and chains it.

What every backend guarantees (`tests/test_ledger_contract.py` holds each backend to it):

1. `append(records, expected)` is a compare-and-set on the head: it writes every record of the
   batch or none, and only if the last committed record is still `expected`; otherwise it raises
   `HeadMoved` naming both heads. It returns only once the batch is durable.
2. A batch continues the chain it claims to continue: seqs `expected.seq + 1, + 2, …`, each
   `prev` the hash before it. A backend refuses any other batch, so a wrong caller cannot make a
   gap or a fork.
3. `read` yields committed records in seq order with exactly the bytes appended, and never part of
   an append still in progress; `head` is the last committed record; `lookup` (and
   `lookup_many`, for a whole batch) finds one by its event id.
4. A crash mid-append loses the batch or leaves a torn tail. A torn tail is reported by
   `torn_tail`, makes `append` raise `TornTail`, is never read, and is removed only by
   `truncate_torn_tail` (or `repair_tail`, which never removes a complete record: one that only
   lost its terminator gets it back). A backend whose writes cannot tear (a database transaction) returns None
   from both.
5. `exclusive()` is the section in which the service reads the head and looks up ids. A backend
   may keep every other writer out while it is held (the file does), or take no lock there when
   its append is one statement under its own lock (PostgreSQL: then a stalled writer holds
   nothing). It serves liveness under contention; correctness rests on the expected head alone.

A record's `hash` and `prev` are computed above the recorder (`cbledger.ledger.chain`), so every
backend stores the same chain over the same bytes and any one of them can be exported to and
verified as the JSON Lines file.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from cbledger import invocation
from cbledger.errors import ConflictError, UserError
from cbledger.ledger.chain import GENESIS, link_hash
from cbledger.ledger.events import EventBase
from cbledger.ledger.versions import (
    CURRENT,
    NEWER_BUILD_HINT,
    EventSchema,
    InvalidEvent,
    from_a_newer_build,
)


class LedgerMissing(UserError):
    """No ledger has been created at this location."""


class StoreUnavailable(UserError):
    """The store cannot be reached now (a database server down or restarting past the
    recorder's reconnect bound); nothing was written, and trying again later may succeed."""


class TornTail(UserError):
    """The store ends with an incomplete record (a crash mid-write)."""


class HeadMoved(ConflictError):
    """Another writer appended after the head this batch was built on; nothing was written."""

    def __init__(self, location: str, expected: Head, actual: Head) -> None:
        super().__init__(
            f"{location}: the head moved: the batch was built on seq {expected.seq} "
            f"({expected.hash[:16]}…), the ledger is at seq {actual.seq} ({actual.hash[:16]}…); "
            "nothing written"
        )
        self.expected = expected
        self.actual = actual


@dataclass(frozen=True)
class Head:
    seq: int
    hash: str


EMPTY = Head(0, GENESIS)


@dataclass
class StoredEvent:
    """One record: its position, its links, its type and id, and its exact event bytes.

    `event` decodes the bytes with the schema the record was read through (upcasting an older
    version), once, on first use; the bytes themselves are never re-encoded. A record is a value
    that nothing assigns to; it is not declared frozen because a frozen dataclass costs seven
    times as much to build, once per event on every read and every append.
    """

    seq: int
    id: str
    type: str
    raw: bytes
    hash: str
    prev: str
    schema: EventSchema | None = field(default=None, compare=False, repr=False)

    def hashes_to_link(self) -> bool:
        """Whether the bytes still hash to the recorded link: an edit in place shows here, where
        the store's check of its last link cannot see it."""
        return link_hash(self.prev, self.seq, self.raw) == self.hash

    @cached_property
    def event(self) -> EventBase:
        try:
            return (self.schema or CURRENT).decode(self.raw)
        except InvalidEvent as exc:
            if from_a_newer_build(exc) and self.hashes_to_link():  # an edited line breaks its hash
                raise UnreadableRecord(f"seq {self.seq}: this build cannot read the stored event: {exc}") from None
            raise CorruptRecord(f"seq {self.seq}: the stored event does not decode: {exc}") from None


class CorruptRecord(InvalidEvent):
    """A stored record that is not a ledger record any more (an edit, a disk fault). Names the
    seq (and where the store can say it, the line) so every command can say where to look."""

    def __init__(self, message: str) -> None:
        super().__init__(f"{message}; the ledger is damaged at that point (`{invocation.command('replay', '--verify')}` locates it)")


class UnreadableRecord(CorruptRecord):
    """A stored record that fails as a newer build's event would (`versions.from_a_newer_build`):
    said as that first, since the remedy differs (upgrade, not restore)."""

    def __init__(self, message: str) -> None:
        InvalidEvent.__init__(self, f"{message}; {NEWER_BUILD_HINT}")


class Lease:
    """A campaign's hold on a ledger (`Recorder.driving`), asked before each run is started."""

    #: the hold was lost and taken again: another driver may have recorded slots in between
    retaken: bool = False

    def lost(self) -> str | None:
        """Why the next run must not start (another driver holds the campaign now), or None."""
        return None


class Recorder(ABC):
    """A backend. Implementations: `cbledger.ledger.jsonl.JsonLinesRecorder` (the file) and
    `cbledger.ledger.postgres.PostgresRecorder` (a PostgreSQL table)."""

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the records live, as messages name it (a path, a URL without credentials)."""

    @abstractmethod
    def exists(self) -> bool:
        """Whether the store holds anything at all (an event, or a torn tail)."""

    @abstractmethod
    def create(self) -> None:
        """Makes an empty store if there is none; leaves an existing one untouched."""

    @abstractmethod
    def head(self) -> Head:
        """The last committed record (`EMPTY` for an empty store). Raises LedgerMissing."""

    @abstractmethod
    def append(self, records: Sequence[StoredEvent], expected: Head) -> None:
        """Writes the batch durably if the head is still `expected` (guarantees 1 and 2)."""

    @abstractmethod
    def read(
        self, since: int = 0, until: int | None = None, types: set[str] | None = None
    ) -> Iterator[StoredEvent]:
        """Committed records with since < seq <= until, in order, optionally of these types."""

    @abstractmethod
    def lookup(self, event_id: str) -> StoredEvent | None:
        """The committed record with this event id, if any."""

    def lookup_many(self, event_ids: Iterable[str]) -> dict[str, StoredEvent]:
        """The committed records among these ids, by id: what the service asks once per batch,
        so that a database answers in one query. The default asks `lookup` for each."""
        found = {}
        for event_id in event_ids:
            stored = self.lookup(event_id)
            if stored is not None:
                found[event_id] = stored
        return found

    @abstractmethod
    def exclusive(self) -> AbstractContextManager[None]:
        """Holds off every other writer for the duration (guarantee 5). Not re-entrant."""

    def appending(self) -> AbstractContextManager[None]:
        """Held around one whole append (its reads included). A store whose server can go away
        waits for it to come back within this, and only this: what is lost otherwise is a run's
        record, while a reader (a watch, a listing) is better told at once. By default nothing."""
        return nullcontext()

    def driving(self, campaign: str) -> AbstractContextManager[Lease]:
        """Held by the driver of `campaign` while it runs the campaign's open slots. Two drivers
        of one campaign on one ledger would each pay for every slot they see open, and the
        ledger keeps one run per slot; the second is refused at once instead. A file ledger is
        one machine's, where the results directory's lock (`runner/leftovers.hold`) already
        refuses it: by default nothing more is held."""
        return nullcontext(Lease())

    def check_appendable(self) -> None:
        """Raises what an append now would (a torn tail, an interrupted batch, no write access)
        without appending: asked before work that ends in an append, so a campaign's runs are
        not paid for and then refused. By default: the writers' lock taken, the head read."""
        with self.exclusive():
            self.head()

    @abstractmethod
    def torn_tail(self) -> bytes | None:
        """The incomplete bytes a crash left at the end, if any."""

    @abstractmethod
    def truncate_torn_tail(self) -> bytes | None:
        """Removes exactly the torn tail and returns it; None (and no change) if there is none."""

    def repair_tail(self) -> TailRepair:
        """What `cbledger repair` does: remove a torn tail, and only that. A backend whose final
        record can lose its terminator without losing its content restores the terminator
        instead (the JSON Lines file does); by default this is `truncate_torn_tail`."""
        removed = self.truncate_torn_tail()
        return TailRepair("none") if removed is None else TailRepair("removed", removed)


@dataclass(frozen=True)
class TailRepair:
    """What a repair did: nothing, removed an incomplete final record (`data`), or restored
    the missing terminator of a complete one (`data` is that record)."""

    action: Literal["none", "removed", "terminated"]
    data: bytes = b""


def check_continues(location: str, records: Sequence[StoredEvent], expected: Head) -> None:
    """Guarantee 2, for every backend to call before it writes."""
    seq, prev = expected.seq, expected.hash
    for r in records:
        if r.seq != seq + 1 or r.prev != prev:
            raise ValueError(
                f"{location}: record {r.id!r} (seq {r.seq}) does not continue the chain at seq "
                f"{seq}; a batch must be contiguous and linked"
            )
        seq, prev = r.seq, r.hash
