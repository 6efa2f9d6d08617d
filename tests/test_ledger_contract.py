"""The storage contract, for every backend: what `cbledger.ledger.recorder` promises, and what
the service above it (`LedgerStore`) then promises on any recorder.

A backend joins by adding one entry to BACKENDS: a function from a temporary directory to a
`Backend`, whose `open` gives a new handle on one ledger (callable in a forked child, as a second
process would), whose `tear` leaves the bytes a crash mid-append would (None for a backend
whose writes cannot tear), whose `drop` removes what the test left (None when the temporary
directory is all there is) and whose `locks` says whether `exclusive()` keeps other writers out
(a backend whose append is one statement takes no lock across round trips). Nothing below names
a backend.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cbledger.errors import ConflictError, SecretFound, UserError
from cbledger.ledger import encoding
from cbledger.ledger import store as store_module
from cbledger.ledger.chain import GENESIS, link_hash
from cbledger.ledger.encoding import InvalidEvent
from cbledger.ledger.events import EventBase, event_type
from cbledger.ledger.jsonl import JsonLinesRecorder
from cbledger.ledger.postgres import PostgresRecorder
from cbledger.ledger.recorder import (
    EMPTY,
    Head,
    HeadMoved,
    LedgerMissing,
    Recorder,
    StoredEvent,
    TornTail,
)
from cbledger.ledger.store import ATTEMPTS, LedgerStore
from tests import postgres
from tests.factories import (
    MAINTAINER,
    grade_recorded,
    ledger_created,
    one_of_each,
    run_recorded,
    run_retracted,
)


@dataclass(frozen=True)
class Backend:
    open: Callable[[], Recorder]  # picklable: writer processes receive it
    tear: Callable[[bytes], None] | None
    drop: Callable[[], None] | None = None
    locks: bool = True


def _append_bytes(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def _jsonl(tmp: Path) -> Backend:
    path = tmp / "ledger" / "events.jsonl"
    return Backend(partial(JsonLinesRecorder, path), partial(_append_bytes, path))


def _postgresql(tmp: Path) -> Backend:
    url = postgres.ledger_url(tmp)
    postgres.drop(url)  # a schema left by an interrupted earlier run of the same test
    return Backend(partial(PostgresRecorder, url), None, partial(postgres.drop, url), locks=False)


BACKENDS: dict[str, Callable[[Path], Backend]] = {"jsonl": _jsonl, "postgresql": _postgresql}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    made: Backend = BACKENDS[request.param](tmp_path)
    yield made
    if made.drop is not None:
        made.drop()


@pytest.fixture
def ledger(backend: Backend) -> LedgerStore:
    store = LedgerStore(backend.open())
    store.init("contract", MAINTAINER)
    return store


def chained(drafts: list[EventBase], head: Head) -> list[StoredEvent]:
    """Records continuing `head`, built the way the service builds them."""
    out, seq, prev = [], head.seq, head.hash
    for draft in drafts:
        seq += 1
        raw = encoding.encode(msgspec.structs.replace(draft, seq=seq))
        h = link_hash(prev, seq, raw)
        out.append(StoredEvent(seq, draft.id, event_type(draft), raw, h, prev))
        prev = h
    return out


def snapshot(recorder: Recorder) -> list[tuple[int, str, str, bytes, str, str]]:
    return [(s.seq, s.id, s.type, s.raw, s.hash, s.prev) for s in recorder.read()]


def assert_chain(records: list[StoredEvent]) -> None:
    """Contiguous from seq 1, each linked to the one before and hashing to its own hash."""
    prev = GENESIS
    for expected_seq, r in enumerate(records, start=1):
        assert (r.seq, r.prev) == (expected_seq, prev), f"seq {r.seq} breaks the chain"
        assert r.hash == link_hash(prev, r.seq, r.raw)
        prev = r.hash


# --------------------------------------------------------------------------- the recorder alone


def test_a_store_that_was_never_created(backend: Backend) -> None:
    recorder = backend.open()
    assert not recorder.exists()
    with pytest.raises(LedgerMissing):
        recorder.head()
    recorder.create()
    assert recorder.head() == EMPTY and list(recorder.read()) == []
    assert not recorder.exists()  # created, but it holds nothing yet
    recorder.create()  # creating again changes nothing
    assert recorder.head() == EMPTY


def test_append_and_read_round_trip(backend: Backend) -> None:
    recorder = backend.open()
    recorder.create()
    records = chained([ledger_created("contract"), *one_of_each(1)], EMPTY)
    recorder.append(records[:3], EMPTY)
    recorder.append(records[3:], Head(3, records[2].hash))
    assert recorder.exists()

    for handle in (recorder, backend.open()):  # the writer's view and a fresh one agree
        assert list(handle.read()) == records
        assert handle.head() == Head(records[-1].seq, records[-1].hash)
        assert [r.seq for r in handle.read(since=2, until=5)] == [3, 4, 5]
        assert [r.seq for r in handle.read(types={"run.recorded", "grade.recorded"})] == [
            r.seq for r in records if r.type in {"run.recorded", "grade.recorded"}
        ]
        assert list(handle.read(since=records[-1].seq)) == []
        for r in records:
            assert handle.lookup(r.id) == r
        assert handle.lookup("no-such-event") is None
        wanted = {records[1].id, records[4].id, "no-such-event"}
        assert handle.lookup_many(wanted) == {r.id: r for r in (records[1], records[4])}


def test_an_expected_head_that_moved_is_a_conflict(backend: Backend) -> None:
    first, second = backend.open(), backend.open()
    first.create()
    genesis = chained([ledger_created("contract")], EMPTY)
    first.append(genesis, EMPTY)
    base = Head(1, genesis[0].hash)
    assert second.head() == base  # second has seen seq 1 and builds on it

    winner = chained([run_recorded(1)], base)
    first.append(winner, base)
    loser = chained([run_recorded(2)], base)
    before = snapshot(first)
    with pytest.raises(HeadMoved) as moved:
        second.append(loser, base)
    assert (moved.value.expected, moved.value.actual) == (base, Head(2, winner[0].hash))
    assert "head moved" in str(moved.value) and "nothing written" in str(moved.value)
    assert snapshot(first) == before

    rebuilt = chained([run_recorded(2)], moved.value.actual)
    second.append(rebuilt, moved.value.actual)
    assert_chain(list(first.read()))


@pytest.mark.parametrize("fault", ["gap", "wrong-prev", "unlinked-batch"])
def test_a_batch_that_does_not_continue_the_chain_is_refused(backend: Backend, fault: str) -> None:
    recorder = backend.open()
    recorder.create()
    genesis = chained([ledger_created("contract")], EMPTY)
    recorder.append(genesis, EMPTY)
    head = recorder.head()
    records = chained([run_recorded(1), run_recorded(2)], head)
    if fault == "gap":
        records = chained([run_recorded(1)], Head(2, head.hash))
    elif fault == "wrong-prev":
        records = chained([run_recorded(1)], Head(1, "1" * 64))
    else:
        records[1] = chained([run_recorded(2)], Head(2, "2" * 64))[0]
    before = snapshot(recorder)
    with pytest.raises(ValueError, match="does not continue the chain"):
        recorder.append(records, head)
    assert snapshot(recorder) == before


def _cas_writer(args: tuple[Backend, int, int]) -> list[int]:
    """Appends `count` events straight to the recorder with no exclusive section, rebuilding on
    every HeadMoved: the expected head alone must keep the chain whole."""
    backend, worker, count = args
    recorder = backend.open()
    seqs = []
    for i in range(count):
        draft = run_recorded(worker * 10_000 + i)
        head = recorder.head()
        while True:
            try:
                recorder.append(chained([draft], head), head)
                break
            except HeadMoved as moved:
                head = moved.actual
        seqs.append(head.seq + 1)
    return seqs


def _service_writer(args: tuple[Backend, int, int]) -> list[int]:
    backend, worker, count = args
    store = LedgerStore(backend.open())
    seqs = []
    for i in range(0, count, 5):
        batch = [run_recorded(worker * 10_000 + i + k) for k in range(5)]
        seqs += [r.seq for r in store.append(batch) if r.created]
    return seqs


@pytest.mark.slow
@pytest.mark.parametrize("writer", [_cas_writer, _service_writer], ids=["recorder", "service"])
def test_concurrent_writers_keep_seqs_contiguous(
    backend: Backend, writer: Callable[[tuple[Backend, int, int]], list[int]]
) -> None:
    writers, per_writer = 4, 60
    recorder = backend.open()
    recorder.create()
    recorder.append(chained([ledger_created("contract")], EMPTY), EMPTY)
    with mp.get_context("fork").Pool(writers) as pool:
        acked = pool.map(writer, [(backend, w, per_writer) for w in range(writers)])
    stored = list(backend.open().read())
    assert len(stored) == 1 + writers * per_writer
    assert_chain(stored)
    assert len({r.id for r in stored}) == len(stored)
    every = sorted(seq for seqs in acked for seq in seqs)
    assert every == list(range(2, 2 + writers * per_writer))  # each seq acknowledged once
    for seqs in acked:
        assert seqs == sorted(seqs), "a writer's own appends went backwards"


def _hold_then_release(backend: Backend, started: Any, release: Any, seen: Any) -> None:
    recorder = backend.open()
    with recorder.exclusive():
        started.set()
        release.wait(60)
        seen.put(recorder.head().seq)  # what landed while this writer held the section


@pytest.mark.slow
def test_exclusive_holds_off_other_writers_where_it_locks(ledger: LedgerStore, backend: Backend) -> None:
    """A locking backend keeps the other writer out until the section ends; one that takes no
    lock lets it land at once (nothing a stalled holder could keep others waiting on)."""
    ctx = mp.get_context("fork")
    started, release, seen, appended = ctx.Event(), ctx.Event(), ctx.Queue(), ctx.Queue()
    holder = ctx.Process(target=_hold_then_release, args=(backend, started, release, seen))
    holder.start()
    try:
        assert started.wait(60)
        writer = ctx.Process(
            target=lambda: appended.put(LedgerStore(backend.open()).append([run_recorded(1)])[0].seq)
        )
        writer.start()
        if not backend.locks:
            assert appended.get(timeout=60) == 2, "an append waited on a section that takes no lock"
            release.set()
            assert seen.get(timeout=60) == 2
            writer.join(60)
            return
        writer.join(0.5)  # time enough for an unguarded append to land
        assert writer.is_alive(), "the other writer finished while exclusive() was held"
        release.set()
        assert seen.get(timeout=60) == 1, "an append landed while exclusive() was held"
        assert appended.get(timeout=60) == 2  # and it landed once the section ended
        writer.join(60)
    finally:
        release.set()
        holder.join(60)


class _Overtaken(Recorder):
    """A backend whose exclusive() keeps nobody out, and which another writer overtakes just
    before each of its first `times` appends."""

    def __init__(self, inner: Recorder, other: LedgerStore, times: int) -> None:
        self.inner, self.other, self.times = inner, other, times

    @property
    def location(self) -> str:
        return self.inner.location

    def exists(self) -> bool:
        return self.inner.exists()

    def create(self) -> None:
        self.inner.create()

    def head(self) -> Head:
        return self.inner.head()

    def append(self, records: Sequence[StoredEvent], expected: Head) -> None:
        if self.times:
            self.times -= 1
            self.other.append([run_recorded(900 + self.times)])
        self.inner.append(records, expected)

    def read(
        self, since: int = 0, until: int | None = None, types: set[str] | None = None
    ) -> Iterator[StoredEvent]:
        return self.inner.read(since, until, types)

    def lookup(self, event_id: str) -> StoredEvent | None:
        return self.inner.lookup(event_id)

    def exclusive(self) -> AbstractContextManager[None]:
        return nullcontext()

    def torn_tail(self) -> bytes | None:
        return self.inner.torn_tail()

    def truncate_torn_tail(self) -> bytes | None:
        return self.inner.truncate_torn_tail()


def test_the_service_rebuilds_a_batch_on_a_moved_head(ledger: LedgerStore, backend: Backend) -> None:
    overtaken = LedgerStore(_Overtaken(backend.open(), LedgerStore(backend.open()), times=2))
    results = overtaken.append([run_recorded(1), grade_recorded(1)])
    assert [(r.seq, r.created) for r in results] == [(4, True), (5, True)]  # after two intruders
    stored = list(backend.open().read())
    assert_chain(stored)
    assert [s.id for s in stored[1:3]] == [run_recorded(901).id, run_recorded(900).id]


def test_the_service_gives_up_on_a_head_that_keeps_moving(
    ledger: LedgerStore, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "CONTENTION_SECONDS", 0.0)  # the count alone bounds it
    overtaken = LedgerStore(_Overtaken(backend.open(), LedgerStore(backend.open()), times=ATTEMPTS))
    with pytest.raises(HeadMoved):
        overtaken.append([run_recorded(1)])
    stored = list(backend.open().read())
    assert len(stored) == 1 + ATTEMPTS and run_recorded(1).id not in {s.id for s in stored}
    assert_chain(stored)


def test_the_service_keeps_rebuilding_within_the_contention_window(ledger: LedgerStore, backend: Backend) -> None:
    """Past ATTEMPTS a writer still overtaken within CONTENTION_SECONDS rebuilds again: a busy
    ledger delays a writer, it does not fail it."""
    overtaken = LedgerStore(_Overtaken(backend.open(), LedgerStore(backend.open()), times=ATTEMPTS + 3))
    assert [r.seq for r in overtaken.append([run_recorded(1)])] == [ATTEMPTS + 5]
    assert_chain(list(backend.open().read()))


# --------------------------------------------------------------------------- the service on it


def test_reappending_is_idempotent(ledger: LedgerStore, backend: Backend) -> None:
    drafts = one_of_each(3)
    first = ledger.append(drafts)
    before = snapshot(ledger.recorder)
    again = LedgerStore(backend.open()).append(one_of_each(3))  # another process, the same events
    assert [(r.seq, r.hash, r.created) for r in again] == [(r.seq, r.hash, False) for r in first]
    within = ledger.append([run_recorded(7), run_recorded(7)])
    assert [(r.seq, r.created) for r in within] == [(first[-1].seq + 1, True), (first[-1].seq + 1, False)]
    assert snapshot(backend.open())[: len(before)] == before
    assert len(snapshot(backend.open())) == len(before) + 1


@pytest.mark.parametrize("change", ["body", "type", "within-batch"])
def test_the_same_id_with_a_different_event_conflicts(
    ledger: LedgerStore, backend: Backend, change: str
) -> None:
    ledger.append([run_recorded(1)])
    before = snapshot(backend.open())
    if change == "body":
        batch = [run_recorded(1, note="another note")]
    elif change == "type":
        batch = [run_retracted(1, id="run.recorded:run-000001")]
    else:
        batch = [run_recorded(2), grade_recorded(2), run_recorded(2, note="changed")]
    # Within a batch the earlier event was never written: it is named by its place, not a seq.
    expected = r"appears twice in this batch .*\(events 0 and 2\)" if change == "within-batch" else "exists at seq"
    with pytest.raises(ConflictError, match=expected):
        LedgerStore(backend.open()).append(batch)
    assert snapshot(backend.open()) == before


def _nan_grade() -> EventBase:
    g = grade_recorded(9)
    return msgspec.structs.replace(g, body=msgspec.structs.replace(g.body, partial_credit=float("nan")))


@pytest.mark.parametrize(
    "bad, error",
    [
        (_nan_grade, InvalidEvent),
        (lambda: run_recorded(9, note="key sk-" + "A" * 30), SecretFound),
        (lambda: msgspec.structs.replace(run_retracted(9), seq=7), UserError),
        (lambda: ledger_created("late"), UserError),
    ],
    ids=["nan", "credential", "client-seq", "late-genesis"],
)
def test_nothing_is_written_when_validation_fails(
    ledger: LedgerStore, backend: Backend, bad: Callable[[], EventBase], error: type[Exception]
) -> None:
    before = snapshot(backend.open())
    with pytest.raises(error):
        ledger.append([run_recorded(1), grade_recorded(1), bad(), run_recorded(2)])
    assert snapshot(backend.open()) == before
    assert [r.seq for r in ledger.append([run_recorded(1)])] == [2]  # and it is still usable


def test_an_empty_ledger_takes_only_its_genesis(backend: Backend) -> None:
    recorder = backend.open()
    with pytest.raises(LedgerMissing):
        LedgerStore(recorder).append([run_recorded(1)])
    recorder.create()
    with pytest.raises(UserError, match="empty ledger"):
        LedgerStore(recorder).append([run_recorded(1)])
    assert list(recorder.read()) == []
    created = LedgerStore(recorder).init("contract", MAINTAINER)
    assert (created.seq, created.type) == (1, "ledger.created")
    with pytest.raises(UserError, match="already exists"):
        LedgerStore(backend.open()).init("again", MAINTAINER)


def test_a_torn_tail_is_reported_and_repaired_only_explicitly(
    ledger: LedgerStore, backend: Backend
) -> None:
    ledger.append([run_recorded(1), grade_recorded(1)])
    good = snapshot(backend.open())
    if backend.tear is None:  # a backend that cannot tear never reports one
        assert ledger.torn_tail() is None and ledger.truncate_torn_tail() is None
        return
    head = ledger.head()
    [next_record] = chained([run_recorded(2)], head)
    torn = next_record.raw[: len(next_record.raw) // 2]
    backend.tear(torn)

    fresh = LedgerStore(backend.open())
    assert fresh.torn_tail() is not None and fresh.torn_tail() == ledger.torn_tail()
    assert snapshot(fresh.recorder) == good  # reads never include it
    for store in (ledger, fresh):
        with pytest.raises(TornTail):
            store.append([run_recorded(2)])
    assert fresh.torn_tail() is not None  # refusing repaired nothing
    removed = fresh.truncate_torn_tail()
    assert removed is not None and removed.endswith(torn)
    assert fresh.torn_tail() is None and fresh.truncate_torn_tail() is None
    assert snapshot(backend.open()) == good
    [r] = ledger.append([run_recorded(2)])
    assert (r.seq, r.created) == (head.seq + 1, True)
    assert_chain(list(backend.open().read()))


def test_the_service_builds_the_chain_the_recorder_stores(ledger: LedgerStore, backend: Backend) -> None:
    results = ledger.append(one_of_each(2))
    stored = list(backend.open().read())
    assert_chain(stored)
    assert [(r.seq, r.hash) for r in results] == [(s.seq, s.hash) for s in stored[1:]]
