"""Many processes appending to one ledger at once: the lock must serialise them so that seq stays
contiguous, the chain never forks and no acknowledged event is lost or written twice."""

from __future__ import annotations

import fcntl
import multiprocessing as mp
import os
from collections import Counter
from pathlib import Path

import msgspec
import pytest

from cbledger.ledger import encoding
from cbledger.ledger.chain import format_line, link_hash, parse_line
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.verify import verify_chain
from tests.factories import grade_recorded, new_ledger, run_recorded

pytestmark = pytest.mark.slow

WRITERS = 8
PER_WRITER = 250


def _writer(args: tuple[str, int, int, int]) -> list[tuple[int, str, str, bool]]:
    """Appends `count` events in batches of `batch`, one fsync each; returns what was acked."""
    path, worker, count, batch = args
    store = LedgerStore(path)
    acked: list[tuple[int, str, str, bool]] = []
    pending = []
    for i in range(count):
        n = worker * 100_000 + i
        pending.append(run_recorded(n) if i % 2 == 0 else grade_recorded(n))
        if len(pending) == batch or i == count - 1:
            for r in store.append(pending):
                acked.append((r.seq, r.id, r.hash, r.created))
            pending = []
    return acked


def _reader(path: str, stop, out) -> None:
    """Polls the head and reads while writers append; reports every head seen or the error."""
    store = LedgerStore(path)
    seen: list[int] = []
    try:
        while not stop.is_set():
            seen.append(store.head().seq)
            last = None
            for s in LedgerStore(path).read():
                last = s.seq
            seen.append(last or 0)
        out.put(("ok", seen))
    except Exception as exc:  # reported to the test, which fails with it
        out.put(("error", f"{type(exc).__name__}: {exc}"))


def _check(path: Path, results: list[list[tuple[int, str, str, bool]]], expected: int) -> None:
    report = verify_chain(path)
    assert report.ok, report.problem
    assert report.events == expected + 1  # + ledger.created

    by_seq = {}
    for line in path.read_bytes().splitlines():
        parsed = parse_line(line)
        by_seq[len(by_seq) + 1] = parsed.hash
    stored_ids = Counter(s.event.id for s in LedgerStore(path).read())
    assert all(count == 1 for count in stored_ids.values())

    acked = [a for worker in results for a in worker]
    assert len(acked) == expected
    assert all(created for *_, created in acked)
    assert sorted(seq for seq, *_ in acked) == list(range(2, expected + 2))
    for seq, id_, hash_, _ in acked:
        assert stored_ids[id_] == 1, id_
        assert by_seq[seq] == hash_, f"acked seq {seq} does not hold the acked hash"
    for worker in results:
        seqs = [seq for seq, *_ in worker]
        assert seqs == sorted(seqs), "a writer's own appends went backwards"


@pytest.mark.parametrize("batch", [1], ids=["one-per-fsync"])
def test_parallel_appenders_keep_one_contiguous_chain(tmp_path: Path, batch: int) -> None:
    path = tmp_path / "events.jsonl"
    new_ledger(path)
    ctx = mp.get_context("fork")
    with ctx.Pool(WRITERS) as pool:
        results = pool.map(_writer, [(str(path), w, PER_WRITER, batch) for w in range(WRITERS)])
    _check(path, results, WRITERS * PER_WRITER)


def test_readers_never_see_a_half_written_batch(tmp_path: Path) -> None:
    """Readers take no exclusive lock; they must still stop at the last complete append rather
    than mistake an append in progress for a crash's torn tail. Large batches make each write
    span many pages, which is when a reader can observe a partial write."""
    path = tmp_path / "events.jsonl"
    new_ledger(path)
    ctx = mp.get_context("fork")
    stop, out = ctx.Event(), ctx.Queue()
    readers = [ctx.Process(target=_reader, args=(str(path), stop, out)) for _ in range(2)]
    for r in readers:
        r.start()
    with ctx.Pool(2) as pool:
        results = pool.map(_writer, [(str(path), w, 600, 100) for w in range(2)])
    stop.set()
    reports = [out.get(timeout=60) for _ in readers]
    for r in readers:
        r.join(timeout=60)
    for kind, detail in reports:
        assert kind == "ok", detail
        assert detail == sorted(detail), "a reader saw the ledger go backwards"
    _check(path, results, 1200)


def test_head_ignores_an_append_that_starts_after_its_shared_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race the multi-process test can only hit by luck, made deterministic: a writer takes
    the lock in the instant between a reader learning the committed size and reading up to it,
    and has written half its line when the reader looks."""
    path = tmp_path / "events.jsonl"
    reader = new_ledger(path)
    reader.append([run_recorded(1)])
    committed = reader.head()

    seq = committed.seq + 1
    data = encoding.encode(msgspec.structs.replace(run_recorded(2), seq=seq))
    line = format_line(data, link_hash(committed.hash, seq, data), committed.hash)
    writer_fd = os.open(path, os.O_RDWR | os.O_APPEND)
    real_flock = fcntl.flock
    injected = []

    def flock(fd: int, op: int) -> None:
        real_flock(fd, op)
        if op == fcntl.LOCK_UN and fd != writer_fd and not injected:
            injected.append(True)
            real_flock(writer_fd, fcntl.LOCK_EX)
            os.write(writer_fd, line[: len(line) // 2])

    other = LedgerStore(path)
    other.append([run_recorded(3)])  # the reader is now behind, so head() must catch up
    committed = other.head()
    monkeypatch.setattr(fcntl, "flock", flock)
    try:
        assert reader.head() == committed
    finally:
        monkeypatch.setattr(fcntl, "flock", real_flock)
        os.close(writer_fd)  # the "writer" dies; what it left is a genuine torn tail
    assert injected
    assert LedgerStore(path).truncate_torn_tail() == line[: len(line) // 2]
    assert verify_chain(path).ok
