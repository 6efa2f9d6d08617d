"""Crashes mid-append: whatever instant an appender dies at, the ledger either verifies or has a
torn tail that the one repair removes, nothing that was acknowledged is ever lost, and a batch is
in the ledger whole or not at all."""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import signal
import threading
import time
from pathlib import Path

import msgspec
import pytest

from cbledger.ledger.store import LedgerStore
from cbledger.ledger.verify import verify_chain
from tests.factories import draft_json, grade_recorded, new_ledger, run_cli, run_recorded

pytestmark = pytest.mark.slow

ITERATIONS = 25


class _IdAt(msgspec.Struct):
    id: str
    seq: int


class _LineIds(msgspec.Struct):
    event: _IdAt


_IDS = msgspec.json.Decoder(_LineIds)


def _appender(path: str, start: int, batch: int, slow: bool, ack_fd: int) -> None:
    """Appends forever in a forked child, reporting each acknowledged event on `ack_fd` only after
    append() returned, that is after the fsync.

    With `slow` set the disk takes short writes of one page at a time with a pause between (as a
    busy device may): a batch's write then spans long enough that a kill often lands inside it and
    leaves a genuinely torn line, which whole kernel writes make too rare to rely on."""
    real_write = os.write
    if slow:

        def short_write(fd: int, data) -> int:
            time.sleep(0.0005)
            return real_write(fd, data[:4096])

        os.write = short_write  # this child's own module state; the parent is untouched
    store = LedgerStore(path)
    n = start
    while True:
        events = []
        for _ in range(batch):
            events.append(run_recorded(n) if n % 2 else grade_recorded(n))
            n += 1
        acks = "".join(f"{r.seq} {r.id}\n" for r in store.append(events))
        real_write(ack_fd, acks.encode())


def _run_and_kill(path: Path, start: int, batch: int, slow: bool, delay: float) -> bytes:
    """Starts an appender, lets it get going, SIGKILLs it; returns everything it acknowledged."""
    ctx = mp.get_context("fork")
    read_fd, write_fd = os.pipe()
    proc = ctx.Process(target=_appender, args=(str(path), start, batch, slow, write_fd))
    proc.start()
    os.close(write_fd)
    received: list[bytes] = []
    first = threading.Event()

    def drain() -> None:  # keeps the pipe empty so the appender never blocks on it
        while chunk := os.read(read_fd, 1 << 16):
            received.append(chunk)
            first.set()
        first.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    assert first.wait(30), "the appender never acknowledged anything"
    time.sleep(delay)
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(30)
    reader.join(30)
    os.close(read_fd)
    assert proc.exitcode == -signal.SIGKILL, f"the appender exited by itself ({proc.exitcode})"
    return b"".join(received)


def _acked(stream: bytes) -> dict[str, int]:
    out = {}
    for line in stream.split(b"\n")[:-1]:  # the last piece is unterminated or empty
        seq, id_ = line.decode().split(" ", 1)
        out[id_] = int(seq)
    return out


def test_sigkill_at_random_moments_loses_nothing_acknowledged(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    new_ledger(path)
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    acked: dict[str, int] = {}
    torn = 0

    def one(i: int, batch: int, slow: bool) -> int:
        """One appender started and killed; the ledger checked and repaired. 1 if it was torn."""
        where = f"(seed {seed}, iteration {i}, batch {batch}, slow {slow})"
        delay = rng.uniform(0, 0.15 if slow else 0.03)
        before = path.read_bytes().count(b"\n")
        acked.update(_acked(_run_and_kill(path, (i + 1) * 1_000_000, batch, slow, delay)))
        tore = 0
        report = verify_chain(path)
        if not report.ok:
            assert report.problem is not None
            assert report.problem.kind == "torn-tail", f"{report.problem} {where}"
            tore = 1
            result = run_cli(["repair", "--truncate-torn-tail", "--ledger", path])
            assert result.exit_code == 0, result.output
            # a kill between the last byte of an event and its newline leaves a complete event:
            # the repair restores the newline instead of deleting it; a batch killed part-way is
            # removed from its start, complete lines and all
            said = ("removed an incomplete final line", "newline restored") if batch == 1 else ("removed an interrupted append",)
            assert any(s in result.stdout for s in said), f"{result.stdout} {where}"
            report = verify_chain(path)
        assert report.ok, f"{report.problem} {where}"
        # every batch is in the ledger whole or not at all (a kill part-way once left its
        # complete lines behind, as events nobody was told of)
        added = path.read_bytes().count(b"\n") - before
        assert added % batch == 0, f"{added} events of batches of {batch} {where}"

        stored = {v.event.id: v.event.seq for v in map(_IDS.decode, path.read_bytes().splitlines())}
        missing = [id_ for id_, seq in acked.items() if stored.get(id_) != seq]
        assert not missing, f"acknowledged but not stored at their seq: {missing[:5]} {where}"
        return tore

    for i in range(ITERATIONS):
        mode = i % 3  # 0: one event per fsync; 1: batches; 2: batches through a slow disk
        torn += one(i, 1 if mode == 0 else rng.choice([20, 100, 200]), mode == 2)
    # On a loaded machine the encoding between writes can take most of a slow iteration, so a
    # kill may keep missing the writes: more slow iterations, until one tears (or a cap).
    extra = ITERATIONS
    while torn == 0 and extra < ITERATIONS + 40:
        torn += one(extra, 200, True)
        extra += 1
    assert len(acked) > ITERATIONS
    # The slow-disk iterations exist to produce torn tails; if none ever did, the repair path
    # above went untested. Each one tears with probability around 0.7 (seed {seed}).
    assert torn > 0, f"no kill landed inside a write (seed {seed})"


@pytest.fixture
def ledger_of_five(tmp_path: Path) -> Path:
    path = tmp_path / "events.jsonl"
    store = new_ledger(path)
    store.append([run_recorded(n) for n in range(1, 5)])  # seq 2..5
    return path


@pytest.mark.parametrize("cut", [1, 100, -2], ids=["one-byte-kept", "mid-line", "closing-brace-lost"])
def test_a_torn_tail_is_reported_and_repaired(ledger_of_five: Path, cut: int) -> None:
    path = ledger_of_five
    data = path.read_bytes()
    last_start = data.rindex(b"\n", 0, len(data) - 1) + 1
    keep = last_start + cut if cut > 0 else len(data) + cut
    path.write_bytes(data[:keep])

    report = verify_chain(path)
    assert report.problem is not None
    assert (report.problem.kind, report.problem.seq) == ("torn-tail", 5)
    assert report.head.seq == 4

    verify = run_cli(["replay", "--verify", "--chain-only", "--ledger", path])
    assert verify.exit_code == 1
    assert "torn-tail" in verify.stderr and "seq 5" in verify.stderr

    appending = run_cli(["append", "--ledger", path, "-"], input=draft_json(run_recorded(9)))
    assert appending.exit_code != 0 and "torn-tail" in appending.stderr

    repaired = run_cli(["repair", "--truncate-torn-tail", "--ledger", path])
    assert repaired.exit_code == 0, repaired.output
    assert f"{keep - last_start} bytes" in repaired.stdout
    assert path.read_bytes() == data[:last_start]
    report = verify_chain(path)
    assert report.ok and report.head.seq == 4

    again = run_cli(["repair", "--truncate-torn-tail", "--ledger", path])
    assert again.exit_code == 0 and "nothing removed" in again.stdout
    assert path.read_bytes() == data[:last_start]
    assert LedgerStore(path).append([run_recorded(4)])[0].seq == 5  # re-appended after the loss


def test_a_complete_event_that_lost_only_its_newline_is_kept(ledger_of_five: Path) -> None:
    path = ledger_of_five
    data = path.read_bytes()
    path.write_bytes(data[:-1])  # `truncate -s -1` after seq 5 was acknowledged
    report = verify_chain(path)
    assert report.problem is not None and report.problem.kind == "torn-tail"  # unreadable until repaired
    repaired = run_cli(["repair", "--truncate-torn-tail", "--ledger", path])
    assert repaired.exit_code == 0, repaired.output
    assert "newline restored, nothing removed" in repaired.stdout
    assert path.read_bytes() == data
    assert verify_chain(path).ok and verify_chain(path).head.seq == 5


def test_a_cut_on_a_line_boundary_is_a_shorter_valid_ledger(ledger_of_five: Path) -> None:
    """Not a torn tail: a crash between two lines loses only never-acknowledged lines."""
    data = ledger_of_five.read_bytes()
    last_start = data.rindex(b"\n", 0, len(data) - 1) + 1
    ledger_of_five.write_bytes(data[:last_start])
    report = verify_chain(ledger_of_five)
    assert report.ok and report.head.seq == 4


def _interrupt_last_batch(path: Path, written: int) -> tuple[bytes, int]:
    """The ledger as an appender killed part-way through its last batch (seq 2..5) leaves it: the
    batch's mark, and its first `written` bytes. Returns the bytes before the batch and its size."""
    from cbledger.ledger.chain import parse_line
    from cbledger.ledger.jsonl import JsonLinesRecorder

    data = path.read_bytes()
    start = data.index(b"\n") + 1  # seq 1 (the genesis event) alone was there before
    first = parse_line(data[start: data.index(b"\n", start) + 1]).hash
    JsonLinesRecorder(path)._mark_batch(start, len(data), first)
    path.write_bytes(data[: start + written])
    return data[:start], len(data) - start


@pytest.mark.parametrize("lines", [1, 3])
def test_a_batch_killed_part_way_is_a_torn_tail_from_its_start(ledger_of_five: Path, lines: int) -> None:
    """Its complete lines were never acknowledged: no reader takes them, an append refuses to
    build on them, verify says what happened and repair removes them with the mark."""
    path = ledger_of_five
    data = path.read_bytes()
    cut = [i + 1 for i, b in enumerate(data) if b == ord("\n")][lines] + 7  # `lines` whole lines after seq 1, and a few bytes
    before, size = _interrupt_last_batch(path, cut - (data.index(b"\n") + 1))
    assert [e.seq for e in LedgerStore(path).read()] == [1] and LedgerStore(path).head().seq == 1
    report = verify_chain(path)
    assert report.problem is not None and (report.problem.kind, report.problem.seq) == ("torn-tail", 2)
    assert "an append was interrupted" in report.problem.message and f"of its {size} bytes" in report.problem.message
    appending = run_cli(["append", "--ledger", path, "-"], input=draft_json(run_recorded(9)))
    assert appending.exit_code != 0 and "an append was interrupted" in appending.stderr, appending.output
    repaired = run_cli(["repair", "--truncate-torn-tail", "--ledger", path])
    assert repaired.exit_code == 0 and f"removed an interrupted append of {len(data[:cut]) - len(before)} bytes ({lines} complete line(s)" in repaired.stdout, repaired.output
    assert path.read_bytes() == before and not (path.parent / ".events.jsonl.batch").exists()
    assert verify_chain(path).ok
    assert [r.seq for r in LedgerStore(path).append([run_recorded(n) for n in range(1, 5)])] == [2, 3, 4, 5]
    assert path.read_bytes() == data  # the same append again: the batch whole


def test_a_mark_whose_batch_completed_or_never_began_is_no_tear(ledger_of_five: Path) -> None:
    path = ledger_of_five
    data = path.read_bytes()
    _interrupt_last_batch(path, len(data) - len(data[: data.index(b"\n") + 1]))  # all of it written
    assert path.read_bytes() == data and verify_chain(path).ok and LedgerStore(path).head().seq == 5
    assert LedgerStore(path).append([run_recorded(9)])[0].seq == 6  # the next writer forgets the mark
    assert not (path.parent / ".events.jsonl.batch").exists()
    _interrupt_last_batch(path, 0)  # killed before its first byte
    assert verify_chain(path).ok and LedgerStore(path).head().seq == 1


def test_ctrl_c_during_a_batch_write_leaves_nothing_and_after_it_does_not_stop_the_listing(
    ledger_of_five: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C part-way through the write once left the lines written so far; after the write it
    printed a bare `error: interrupted`, though the whole batch was appended."""
    from cbledger.cli import ledger_commands
    from cbledger.ledger import jsonl

    path = ledger_of_five
    before = path.read_bytes()
    real_write = os.write
    interrupt = {"on": True}

    def half_then_ctrl_c(fd: int, data) -> int:
        if interrupt["on"] and len(data) > 100:
            real_write(fd, data[: len(data) // 2])
            raise KeyboardInterrupt
        return real_write(fd, data)

    monkeypatch.setattr(jsonl.os, "write", half_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        LedgerStore(path).append([run_recorded(n) for n in range(10, 14)])
    assert path.read_bytes() == before and not (path.parent / ".events.jsonl.batch").exists()
    assert verify_chain(path).ok
    interrupt["on"] = False

    # Ctrl-C once the batch is in: it ended the command with exit 130 and no word, or a traceback
    # from the interpreter's exit; the listing now runs to its end
    listing = ledger_commands._report_appended

    def ctrl_c(results, as_json) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        listing(results, as_json)

    monkeypatch.setattr(ledger_commands, "_report_appended", ctrl_c)
    drafts = b"\n".join(draft_json(run_recorded(n)) for n in range(10, 12))
    handler = signal.getsignal(signal.SIGINT)
    try:
        r = run_cli(["append", "--ledger", path, "-"], input=drafts)
    finally:
        left = signal.signal(signal.SIGINT, handler)
    assert r.exit_code == 0 and "seq 6 " in r.stdout and "seq 7 " in r.stdout, r.output
    assert left is handler  # put back: an ignored SIGINT is inherited by every process started later
    assert verify_chain(path).head.seq == 7


def test_a_damaged_line_is_named_as_damage_by_a_command_that_reads_from_the_start(ledger_of_five: Path, tmp_path: Path) -> None:
    """A projection once called a damaged line in a ledger read from seq 1 a ledger "changed
    underneath (rebuild from scratch)", the follower's words, and named no way to find it."""
    path = ledger_of_five
    lines = path.read_bytes().splitlines(keepends=True)
    lines[3] = b'{"event":garbage}\n'
    path.write_bytes(b"".join(lines))
    r = run_cli(["project", "leaderboard", "--ledger", path, "--root", tmp_path])
    assert r.exit_code != 0 and "(seq 4 expected) is not a ledger line" in r.stderr, r.output
    assert "the ledger is damaged at that point" in r.stderr and "replay --verify" in r.stderr
    assert "rebuild from scratch" not in r.stderr


def test_repair_with_nothing_to_remove_says_what_else_is_wrong(ledger_of_five: Path) -> None:
    """A whole line of garbage at the end is no torn tail: the repair once said only "nothing
    removed", and `append` "undecodable line", leaving no next step."""
    path = ledger_of_five
    with path.open("ab") as f:
        f.write(b"garbage{\n")
    before = path.read_bytes()
    r = run_cli(["repair", "--truncate-torn-tail", "--ledger", path])
    assert r.exit_code == 0 and "no torn tail; nothing removed" in r.stdout, r.output
    assert "note: the ledger has another problem, which no repair removes: undecodable at line 6" in r.stderr, r.stderr
    assert path.read_bytes() == before


def test_a_mark_that_outlived_its_batch_never_cuts_the_events_written_there_since(ledger_of_five: Path, tmp_path: Path) -> None:
    """A mark whose removal a crash lost (after a rollback, then single appends), or a ledger
    restored in place, has other lines at its start: those are events, not the batch's tail."""
    path = ledger_of_five
    genesis = path.read_bytes()[: path.read_bytes().index(b"\n") + 1]
    _interrupt_last_batch(path, 50)  # the mark of seq 2..5, as a crash left it
    other = tmp_path / "other" / "events.jsonl"
    other.parent.mkdir()
    other.write_bytes(genesis)
    for n in (20, 21):  # one event per append, no mark: what came after the rollback
        LedgerStore(other).append([run_recorded(n)])
    data = other.read_bytes()
    path.write_bytes(data)  # in place (the same inode): the mark beside it names a batch that is not there
    from cbledger.ledger.jsonl import JsonLinesRecorder

    state, extent = JsonLinesRecorder(path)._batch_state()
    assert extent is not None and extent[0] < len(data) < extent[1] and state == "left"
    assert verify_chain(path).ok and LedgerStore(path).head().seq == 3
    repaired = run_cli(["repair", "--truncate-torn-tail", "--ledger", path])
    assert repaired.exit_code == 0 and "nothing removed" in repaired.stdout and path.read_bytes() == data
