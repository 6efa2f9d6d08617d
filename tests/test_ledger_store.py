"""The ledger over its JSON Lines file, as callers use it: creation, round trip with exact bytes,
idempotency, conflicts, atomic batches, reads, and the single repair, with the file's own
details (its lines, a failed fsync, torn tails at any byte). What every backend must do is in
tests/test_ledger_contract.py."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from cbledger.errors import ConflictError, SecretFound, UserError
from cbledger.ledger import encoding
from cbledger.ledger.chain import GENESIS, format_line, link_hash, parse_line
from cbledger.ledger.encoding import InvalidEvent
from cbledger.ledger.events import event_type
from cbledger.ledger.jsonl import JsonLinesRecorder
from cbledger.ledger.store import Head, LedgerMissing, LedgerStore, TornTail
from cbledger.ledger.verify import verify_chain
from tests.factories import (
    APPENDABLE,
    BUILDERS,
    MAINTAINER,
    grade_recorded,
    ledger_created,
    new_ledger,
    one_of_each,
    pricing_published,
    run_recorded,
    run_retracted,
    runs_and_grades,
    suite_bumped,
)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "ledger" / "events.jsonl"


@pytest.fixture
def store(path: Path) -> LedgerStore:
    return new_ledger(path)


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


# --------------------------------------------------------------------------- creation


def test_init_records_ledger_created_as_seq_1(path: Path) -> None:
    appended = LedgerStore(path).init("copperbench", MAINTAINER, "the main ledger")
    assert (appended.seq, appended.type, appended.created) == (1, "ledger.created", True)
    [line] = lines(path)
    parsed = parse_line(line)
    assert parsed.prev == GENESIS
    assert parsed.hash == appended.hash == link_hash(GENESIS, 1, parsed.event)
    event = encoding.decode(parsed.event)
    assert event.body.name == "copperbench"  # type: ignore[attr-defined]
    assert verify_chain(path).ok


def test_init_refuses_an_existing_ledger(store: LedgerStore, path: Path) -> None:
    before = path.read_bytes()
    with pytest.raises(UserError, match="already exists"):
        LedgerStore(path).init("another", MAINTAINER)
    assert path.read_bytes() == before


def test_append_refuses_a_missing_ledger(path: Path) -> None:
    with pytest.raises(LedgerMissing):
        LedgerStore(path).append([run_recorded(1)])
    assert not path.exists()


def test_append_refuses_an_empty_file(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    with pytest.raises(UserError, match="empty ledger"):
        LedgerStore(path).append([run_recorded(1)])
    assert path.read_bytes() == b""


def test_a_second_ledger_created_is_refused(store: LedgerStore, path: Path) -> None:
    """Seq 1 is the only place for ledger.created; the store must not write what verify rejects."""
    before = path.read_bytes()
    with pytest.raises(UserError, match=re.escape("ledger.created")):
        store.append([ledger_created("another-name")])
    with pytest.raises(UserError):
        LedgerStore(path).init("x", MAINTAINER)
    assert path.read_bytes() == before
    assert verify_chain(path).ok


def test_racing_inits_leave_one_genesis(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two `init`s that both saw no ledger: the loser must not append a second ledger.created."""
    a, b = LedgerStore(path), LedgerStore(path)
    monkeypatch.setattr(b.recorder, "exists", lambda: False)  # b looked before a's init landed
    a.init("first", MAINTAINER)
    before = path.read_bytes()
    with pytest.raises(UserError, match=r"seq 1 must be ledger\.created"):
        b.init("second", MAINTAINER)
    assert path.read_bytes() == before


# --------------------------------------------------------------------------- round trip


def test_round_trip_every_type_with_exact_bytes(store: LedgerStore, path: Path) -> None:
    drafts = one_of_each(1)
    results = store.append(drafts)
    assert [r.seq for r in results] == list(range(2, 2 + len(drafts)))
    assert [r.type for r in results] == APPENDABLE
    assert all(r.created for r in results)

    stored = list(LedgerStore(path).read())
    assert [s.seq for s in stored] == list(range(1, 2 + len(drafts)))
    prev = stored[0].hash
    file_lines = lines(path)
    for draft, result, s, line in zip(drafts, results, stored[1:], file_lines[1:], strict=True):
        expected = msgspec.structs.replace(draft, seq=result.seq)
        assert s.event == expected
        assert s.raw == encoding.encode(expected)
        assert s.prev == prev
        assert s.hash == result.hash == link_hash(prev, s.seq, s.raw)
        assert line == format_line(s.raw, s.hash, prev)
        prev = s.hash
    assert verify_chain(path).ok


def test_timestamps_are_stored_in_utc(store: LedgerStore) -> None:
    import datetime as dt

    plus2 = dt.timezone(dt.timedelta(hours=2))
    draft = msgspec.structs.replace(run_retracted(1), at=dt.datetime(2026, 1, 1, 14, 0, tzinfo=plus2))
    [r] = store.append([draft])
    stored = store.find(r.seq)
    assert stored is not None
    assert b'"at":"2026-01-01T12:00:00Z"' in stored.raw


# --------------------------------------------------------------------------- idempotency


def test_reappending_the_same_event_is_a_no_op(store: LedgerStore, path: Path) -> None:
    [first] = store.append([run_recorded(1)])
    before = path.read_bytes()
    [again] = store.append([run_recorded(1)])
    assert (again.seq, again.hash, again.id, again.created) == (first.seq, first.hash, first.id, False)
    assert path.read_bytes() == before


def test_idempotency_survives_a_new_process(store: LedgerStore, path: Path) -> None:
    """A fresh store learns ids from the file: the digest of stored bytes must equal the digest of
    the draft, or every retry after a restart would be a false conflict."""
    drafts = one_of_each(2)
    first = store.append(drafts)
    before = path.read_bytes()
    again = LedgerStore(path).append(one_of_each(2))
    assert [(r.seq, r.hash) for r in again] == [(r.seq, r.hash) for r in first]
    assert not any(r.created for r in again)
    assert path.read_bytes() == before


def test_a_retry_with_a_new_timestamp_is_still_a_no_op(store: LedgerStore, path: Path) -> None:
    """Idempotency is on id, type and body: a runner that retries stamps a new `at`."""
    import datetime as dt

    [first] = store.append([grade_recorded(1)])
    before = path.read_bytes()
    retry = msgspec.structs.replace(grade_recorded(1), at=grade_recorded(1).at + dt.timedelta(hours=1))
    [again] = LedgerStore(path).append([retry])
    assert (again.seq, again.created) == (first.seq, False)
    assert path.read_bytes() == before


def test_duplicate_within_one_batch_is_written_once(store: LedgerStore, path: Path) -> None:
    results = store.append([run_recorded(1), grade_recorded(1), run_recorded(1)])
    assert [(r.seq, r.created) for r in results] == [(2, True), (3, True), (2, False)]
    assert results[2].hash == results[0].hash
    assert len(lines(path)) == 3
    assert verify_chain(path).ok


def test_mixed_batch_of_known_and_new_events(store: LedgerStore, path: Path) -> None:
    store.append([run_recorded(1)])
    results = store.append([run_recorded(1), run_recorded(2)])
    assert [(r.seq, r.created) for r in results] == [(2, False), (3, True)]


# --------------------------------------------------------------------------- conflicts


def test_same_id_different_body_conflicts(store: LedgerStore, path: Path) -> None:
    store.append([run_recorded(1)])
    before = path.read_bytes()
    changed = run_recorded(1, note="a different note")
    with pytest.raises(ConflictError, match=re.escape("run.recorded:run-000001")):
        store.append([changed])
    with pytest.raises(ConflictError):
        LedgerStore(path).append([changed])  # and from the file, not only the in-memory index
    assert path.read_bytes() == before


def test_same_id_different_type_conflicts(store: LedgerStore, path: Path) -> None:
    store.append([run_recorded(1)])
    before = path.read_bytes()
    with pytest.raises(ConflictError):
        store.append([run_retracted(1, id="run.recorded:run-000001")])
    assert path.read_bytes() == before


def test_conflict_within_one_batch_writes_nothing(store: LedgerStore, path: Path) -> None:
    before = path.read_bytes()
    with pytest.raises(ConflictError):
        store.append([run_recorded(1), grade_recorded(1), run_recorded(1, note="changed")])
    assert path.read_bytes() == before
    assert store.head().seq == 1


# --------------------------------------------------------------------------- all or nothing


def _nan_grade():
    g = grade_recorded(9)
    return msgspec.structs.replace(g, body=msgspec.structs.replace(g.body, partial_credit=float("nan")))


@pytest.mark.parametrize(
    "bad, error",
    [
        (lambda: _nan_grade(), InvalidEvent),
        (lambda: run_recorded(9, note="key sk-" + "A" * 30), SecretFound),
        (lambda: msgspec.structs.replace(run_retracted(9), seq=7), UserError),
        (lambda: run_recorded(1, note="conflicts with the first of the batch"), ConflictError),
        (lambda: ledger_created("late"), UserError),
    ],
    ids=["nan", "secret", "client-seq", "conflict", "late-genesis"],
)
def test_one_bad_event_means_nothing_is_written(store: LedgerStore, path: Path, bad, error) -> None:
    before = path.read_bytes()
    batch = [run_recorded(1), grade_recorded(1), bad(), run_recorded(2)]
    with pytest.raises(error):
        store.append(batch)
    assert path.read_bytes() == before
    assert LedgerStore(path).head() == store.head()
    assert store.head().seq == 1
    # and the store is still usable afterwards
    assert [r.seq for r in store.append([run_recorded(1)])] == [2]


def test_a_failed_fsync_removes_the_unacknowledged_bytes(
    store: LedgerStore, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cbledger.ledger import jsonl

    before = path.read_bytes()
    real_sync = jsonl._datasync  # fdatasync: an append's data and the size that reads it back
    calls = []

    def failing_sync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 1:
            raise OSError(5, "simulated I/O error")
        real_sync(fd)

    monkeypatch.setattr(jsonl, "_datasync", failing_sync)
    with pytest.raises(OSError):
        store.append(runs_and_grades(4))
    assert len(calls) == 1
    monkeypatch.setattr(jsonl, "_datasync", real_sync)
    assert path.read_bytes() == before
    assert [r.seq for r in store.append([run_recorded(1)])] == [2]
    assert verify_chain(path).ok


# --------------------------------------------------------------------------- reading


@pytest.fixture
def filled(store: LedgerStore) -> LedgerStore:
    store.append(runs_and_grades(10))  # seq 2..11, runs at even seq, grades at odd seq
    store.append([run_retracted(3)])  # seq 12
    return store


def test_head_tracks_the_last_event(filled: LedgerStore, path: Path) -> None:
    last = lines(path)[-1]
    assert filled.head() == Head(12, parse_line(last).hash)
    assert LedgerStore(path).head() == Head(12, parse_line(last).hash)


def test_head_sees_appends_made_by_another_store(filled: LedgerStore, path: Path) -> None:
    other = LedgerStore(path)
    [r] = other.append([run_recorded(99)])
    assert filled.head() == Head(r.seq, r.hash)
    [r2] = filled.append([run_recorded(100)])
    assert r2.seq == r.seq + 1
    assert verify_chain(path).ok


def test_read_filters(filled: LedgerStore) -> None:
    assert [s.seq for s in filled.read()] == list(range(1, 13))
    assert [s.seq for s in filled.read(since=5)] == list(range(6, 13))
    assert [s.seq for s in filled.read(until=4)] == [1, 2, 3, 4]
    assert [s.seq for s in filled.read(since=3, until=6)] == [4, 5, 6]
    assert [s.seq for s in filled.read(types={"run.recorded"})] == [2, 4, 6, 8, 10]
    assert [s.seq for s in filled.read(types={"grade.recorded", "run.retracted"}, since=8)] == [9, 11, 12]
    assert [s.type for s in filled.read(types={"run.retracted"})] == ["run.retracted"]
    assert list(filled.read(since=12)) == []
    assert list(filled.read(types={"suite.bumped"})) == []


def test_read_yields_each_line_as_stored(filled: LedgerStore, path: Path) -> None:
    """Position, id, type and links come from the line itself, and the bytes are its slice."""
    stored = list(filled.read())
    assert len(stored) == len(lines(path))
    for s, line in zip(stored, lines(path), strict=True):
        assert line == format_line(s.raw, s.hash, s.prev)
        event = encoding.decode(s.raw)
        assert (s.seq, s.id, s.type) == (event.seq, event.id, event_type(event))


def test_find_by_seq_and_by_id(filled: LedgerStore) -> None:
    by_int = filled.find(4)
    by_str = filled.find("4")
    by_id = filled.find("run.recorded:run-000002")
    assert by_int is not None and by_str is not None and by_id is not None
    assert by_int.raw == by_str.raw == by_id.raw
    assert by_id.seq == 4 and by_id.event.id == "run.recorded:run-000002"
    assert event_type(by_id.event) == "run.recorded"
    assert filled.find(999) is None
    assert filled.find("no-such-id") is None


# --------------------------------------------------------------------------- torn tail


def _tear(path: Path, keep: int) -> bytes:
    """Appends the first `keep` bytes of a would-be next line, as a crash mid-write leaves it."""
    good = path.read_bytes()
    store = LedgerStore(path)
    head = store.head()
    data = encoding.encode(msgspec.structs.replace(run_recorded(500), seq=head.seq + 1))
    line = format_line(data, link_hash(head.hash, head.seq + 1, data), head.hash)
    torn = line[:keep]
    with open(path, "ab") as f:
        f.write(torn)
    return good


def test_a_final_event_missing_only_its_newline_is_never_truncated(filled: LedgerStore, path: Path) -> None:
    good = _tear(path, -1)
    complete = path.read_bytes()
    with pytest.raises(UserError, match=r"complete event .* whose newline was lost"):
        LedgerStore(path).truncate_torn_tail()
    assert path.read_bytes() == complete
    done = LedgerStore(path).repair_tail()
    assert done.action == "terminated" and path.read_bytes() == complete + b"\n"
    assert path.read_bytes().startswith(good) and verify_chain(path).ok
    assert [s.seq for s in LedgerStore(path).read()][-1] == 13


@pytest.mark.parametrize("keep", [1, 40, -2])
def test_append_refuses_a_torn_tail_and_truncation_removes_exactly_it(
    filled: LedgerStore, path: Path, keep: int
) -> None:
    good = _tear(path, keep)
    torn = path.read_bytes()[len(good) :]
    assert torn and not torn.endswith(b"\n")

    with pytest.raises(TornTail):
        LedgerStore(path).append([run_recorded(600)])
    assert path.read_bytes() == good + torn  # refusing wrote nothing
    assert [s.seq for s in LedgerStore(path).read()][-1] == 12  # reads stop before the tail
    assert LedgerStore(path).torn_tail() == torn

    removed = LedgerStore(path).truncate_torn_tail()
    assert removed == torn
    assert path.read_bytes() == good
    assert LedgerStore(path).truncate_torn_tail() is None
    assert path.read_bytes() == good
    [r] = LedgerStore(path).append([run_recorded(600)])
    assert r.seq == 13
    assert verify_chain(path).ok


def test_truncation_of_a_ledger_that_is_only_a_torn_line(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"event":{"actor"')
    assert LedgerStore(path).truncate_torn_tail() == b'{"event":{"actor"'
    assert path.read_bytes() == b""


def test_truncation_leaves_a_clean_ledger_untouched(filled: LedgerStore, path: Path) -> None:
    before = path.read_bytes()
    assert filled.torn_tail() is None
    assert filled.truncate_torn_tail() is None
    assert path.read_bytes() == before


def test_a_long_torn_tail_is_found_across_read_chunks(filled: LedgerStore, path: Path) -> None:
    """The backwards scan for the last newline reads in 64 KiB chunks; a tail longer than one
    chunk must still be cut at the right byte."""
    good = path.read_bytes()
    tail = b'{"event":' + b"x" * 200_000
    with open(path, "ab") as f:
        f.write(tail)
    assert LedgerStore(path).truncate_torn_tail() == tail
    assert path.read_bytes() == good


def test_every_builder_is_accepted(store: LedgerStore, path: Path) -> None:
    """Guards the factories themselves: a builder that drifted from the schema would make the
    rejection tests elsewhere pass for the wrong reason."""
    for t, build in BUILDERS.items():
        if t == "ledger.created":
            continue
        for n in (1, 2, 3, 4):
            store.append([build(n)])
    assert verify_chain(path).ok


def test_holds_is_true_only_when_every_id_is_in_the_ledger(store: LedgerStore, path: Path) -> None:
    drafts = one_of_each(1)[:2]
    ids = [d.id for d in drafts]
    assert not store.holds(ids)
    store.append(drafts[:1])
    assert store.holds(ids[:1]) and not store.holds(ids)
    store.append(drafts)
    assert LedgerStore(path).holds(ids) and store.holds([])


def test_a_recorder_refused_by_a_torn_tail_goes_on_once_it_is_repaired(tmp_path: Path) -> None:
    """The index took in the lines before the torn one but not where they ended: the next
    catch-up read them again as lines that do not follow the head, and the recorder refused every
    append for the rest of the process, the repair included."""
    path = tmp_path / "events.jsonl"
    new_ledger(path).append([suite_bumped(1)])
    mine = LedgerStore(path)
    assert mine.head().seq == 2
    other = LedgerStore(path)
    other.append([pricing_published(1)])
    other.append([run_recorded(1), grade_recorded(1)])
    with open(path, "ab") as f:
        f.write(b'{"event":{"id":"x","se')  # a writer killed part-way through one line
    for _ in range(2):
        with pytest.raises(TornTail):
            mine.append([run_retracted(1)])
    assert JsonLinesRecorder(path).repair_tail().action == "removed"
    [appended] = mine.append([run_retracted(1)])
    assert appended.seq == 6 and verify_chain(path).ok


def test_a_reader_or_an_appender_held_by_a_stopped_append_says_so(
    store: LedgerStore, path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str],
) -> None:
    """An append suspended mid-batch (Ctrl-Z) held `log`, `watch`, `project` and every other
    append on the ledger, each waiting without a word."""
    import fcntl
    import os
    import threading

    from cbledger.ledger import durable

    monkeypatch.setattr(durable, "SAY_WAITING_AFTER", 0.2)
    store.append([run_recorded(1)])
    held = os.open(path, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)  # the stopped appender's lock
    done: list[object] = []
    reader = threading.Thread(target=lambda: done.append(LedgerStore(path).head().seq), daemon=True)
    writer = threading.Thread(target=lambda: done.append(LedgerStore(path).append([grade_recorded(1)])), daemon=True)
    try:
        reader.start()
        writer.start()
        reader.join(1.0)
        assert reader.is_alive() and not done  # still held: the lock is waited for, not skipped
    finally:
        fcntl.flock(held, fcntl.LOCK_UN)
        os.close(held)
    reader.join(10)
    writer.join(10)
    assert len(done) == 2
    err = capfd.readouterr().err
    assert f"{path}: an append is writing this ledger; waiting for it to finish" in err, err
    assert f"{path}: another append is writing this ledger; waiting for it to finish" in err, err
