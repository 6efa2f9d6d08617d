"""`cbledger watch`: outputs follow the ledger as another process appends to it.

After every batch settles, the records, LEADERBOARD.md and the read model equal a full rebuild
from the same ledger; a torn or malformed append is reported and the watcher keeps running until
the ledger is repaired; SIGINT and SIGTERM end it with exit 0.
"""

from __future__ import annotations

import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cbledger.errors import UserError
from cbledger.ledger.store import LedgerStore
from cbledger.projections import leaderboard, readmodel, records, writers
from cbledger.projections.site import render as site_render
from cbledger.reproduce import site_evidence
from cbledger.reproduce.outputs import record_files
from cbledger.reproduce.regenerate import Regenerator
from cbledger.workspace import Workspace
from tests.factories import MAINTAINER, draft_json, rich_stream, run_cli

SETTLE = 30.0  # seconds a batch may take to show up; a pass takes well under one


def make_root(tmp_path: Path) -> tuple[Path, Path, list]:
    root = tmp_path / "project"
    ledger = root / "results" / "ledger" / "events.jsonl"
    LedgerStore(ledger).init("watch-test", MAINTAINER)
    return root, ledger, rich_stream().drafts()[1:]


def jsonl(events) -> bytes:
    """The batch a runner would submit: drafts without a seq (append refuses any client seq)."""
    return b"".join(draft_json(e) + b"\n" for e in events)


def assert_equals_full_rebuild(root: Path, ledger: Path, tmp_path: Path) -> None:
    """The watched outputs against a rebuild from scratch into another directory."""
    state = writers.load_state(ledger)
    fresh = tmp_path / f"rebuild-{state.head_seq}"
    writers.sync_records(state, fresh / "results")
    watched, rebuilt = record_files(root / "results"), record_files(fresh / "results")
    assert watched == rebuilt
    for rel in rebuilt:
        assert (root / "results" / rel).read_bytes() == (fresh / "results" / rel).read_bytes(), rel
    assert (root / "LEADERBOARD.md").read_text() == leaderboard.render(state, None)
    tables = readmodel.build_tables(state)
    assert readmodel.canonical_dump(root / "results" / "cbledger.db") == readmodel.canonical_dump_tables(tables)
    # the site: every page as a full rendering writes it (a run's page only when its events came)
    pages = site_render.render(state, site_evidence.gather(Workspace.at(root, ledger), state))
    entries = [*state.runs.values(), *state.later_passes.values()]
    names = {e.run.task.id for e in entries}, {e.run.model.id for e in entries}
    assert len(pages) == 4 + len(names[0]) + len(names[1]) + len(state.runs) + len(state.later_passes)
    for rel, data in pages:
        assert (root / "results" / "site" / rel).read_bytes() == data, rel


# --------------------------------------------------------------------------- in-process


def test_incremental_regeneration_equals_a_full_rebuild_after_every_batch(tmp_path):
    root, ledger, drafts = make_root(tmp_path)
    store = LedgerStore(ledger)
    regen = Regenerator(Workspace.at(root, ledger))
    rng = random.Random(7)
    i = 0
    first = regen.refresh()
    assert first is not None and first.rebuilt
    while i < len(drafts):
        n = rng.randint(1, 12)
        store.append(drafts[i:i + n])
        i += n
        update = regen.refresh()
        assert update is not None and not update.rebuilt and update.head_seq == store.head().seq
        assert regen.problem is None
        assert_equals_full_rebuild(root, ledger, tmp_path)
    assert regen.refresh() is None  # nothing new: nothing rewritten


def test_only_changed_records_are_rewritten(tmp_path):
    root, ledger, drafts = make_root(tmp_path)
    store = LedgerStore(ledger)
    store.append(drafts[:-3])
    regen = Regenerator(Workspace.at(root, ledger))
    regen.refresh()
    mtimes = {p: (root / "results" / p).stat().st_mtime_ns for p in record_files(root / "results")}
    store.append(drafts[-3:])  # the 1.1.0 bump and two re-grades
    update = regen.refresh()
    assert sorted(update.records_written) == sorted(set(record_files(root / "results")) - set(mtimes))
    assert len(update.records_written) == 2 and update.leaderboard and update.read_model
    for p, before in mtimes.items():
        assert (root / "results" / p).stat().st_mtime_ns == before, p


def test_a_line_that_does_not_link_is_reported_and_folding_resumes(tmp_path):
    root, ledger, drafts = make_root(tmp_path)
    store = LedgerStore(ledger)
    store.append(drafts[:10])
    regen = Regenerator(Workspace.at(root, ledger))
    regen.refresh()
    good = ledger.read_bytes()
    other = LedgerStore(tmp_path / "other.jsonl")
    other.init("another-ledger", MAINTAINER)
    other.append(drafts[:12])
    foreign = (tmp_path / "other.jsonl").read_bytes().splitlines(keepends=True)[11]  # seq 12 of another chain
    with open(ledger, "ab") as f:
        f.write(foreign)
    assert regen.refresh() is None
    assert "does not link" in regen.problem and regen.written_seq == 11
    assert_equals_full_rebuild_at(root, good, tmp_path)
    ledger.write_bytes(good)  # the repair
    assert regen.refresh() is None and regen.problem is None
    store = LedgerStore(ledger)
    store.append(drafts[10:20])
    update = regen.refresh()
    assert update is not None and not update.rebuilt and update.head_seq == 21
    assert_equals_full_rebuild(root, ledger, tmp_path)


def test_a_copied_last_line_is_reported_and_nothing_after_it_is_published(tmp_path):
    """A duplicated last line was read past as already folded: an append after it (which the
    store accepted) was folded and LEADERBOARD.md named a head `replay --verify` refuses."""
    root, ledger, drafts = make_root(tmp_path)
    LedgerStore(ledger).append(drafts[:10])
    regen = Regenerator(Workspace.at(root, ledger))
    regen.refresh()
    good = ledger.read_bytes()
    published = (root / "LEADERBOARD.md").read_bytes()
    with open(ledger, "ab") as f:
        f.write(good.splitlines(keepends=True)[-1])
    assert regen.refresh() is None
    assert "seq 11 again (a line copied or moved)" in (regen.problem or ""), regen.problem
    with pytest.raises(UserError, match="seq 11 again"):
        LedgerStore(ledger).append(drafts[10:12])
    assert regen.refresh() is None and (root / "LEADERBOARD.md").read_bytes() == published
    ledger.write_bytes(good)  # the repair
    LedgerStore(ledger).append(drafts[10:12])
    update = regen.refresh()
    assert update is not None and update.head_seq == 13 and regen.problem is None
    assert_equals_full_rebuild(root, ledger, tmp_path)


def test_a_rewritten_ledger_is_rebuilt_from_scratch(tmp_path):
    root, ledger, drafts = make_root(tmp_path)
    LedgerStore(ledger).append(drafts[:30])
    regen = Regenerator(Workspace.at(root, ledger))
    regen.refresh()
    replacement = tmp_path / "replacement.jsonl"
    LedgerStore(replacement).init("watch-test", MAINTAINER)
    LedgerStore(replacement).append(drafts[:5] + drafts[40:60])  # same start, different history
    ledger.write_bytes(replacement.read_bytes())
    update = regen.refresh()
    assert update is not None and update.rebuilt and update.head_seq == 26 and regen.problem is None
    state = writers.load_state(ledger)
    assert (root / "LEADERBOARD.md").read_text() == leaderboard.render(state, None)
    for entry in records.record_entries(state):
        assert (root / "results" / entry.path).read_bytes() == records.render(entry.record)


def test_once_regenerates_and_exits(tmp_path):
    root, ledger, drafts = make_root(tmp_path)
    LedgerStore(ledger).append(drafts)
    result = run_cli(["watch", "--once", "--root", root])
    assert result.exit_code == 0, result.output
    assert f"head seq {len(drafts) + 1}" in result.stdout
    assert_equals_full_rebuild(root, ledger, tmp_path)
    again = run_cli(["watch", "--once", "--root", root])
    assert "0 record(s) written; LEADERBOARD.md unchanged; read model unchanged" in again.stdout
    assert run_cli(["watch", "--once", "--root", tmp_path / "nowhere"]).exit_code == 2


def test_once_on_a_torn_ledger_says_so_and_exits_1(tmp_path):
    root, ledger, drafts = make_root(tmp_path)
    LedgerStore(ledger).append(drafts[:5])
    with open(ledger, "ab") as f:
        f.write(b'{"event":{"actor":')
    result = run_cli(["watch", "--once", "--debounce-ms", "1", "--root", root])
    assert result.exit_code == 1
    assert "cannot fold further" in result.stdout and "torn append" in result.stdout
    assert "outputs stay at seq 6" in result.stdout


def test_a_watch_started_on_a_damaged_ledger_does_not_roll_the_outputs_back(tmp_path):
    """A line edited mid-ledger: `project` refuses, and so must the watch's first fold rather
    than publish LEADERBOARD.md and the read model for the part before the damage over the
    outputs `project all` wrote from the whole ledger."""
    root, ledger, drafts = make_root(tmp_path)
    LedgerStore(ledger).append(drafts[:20])
    assert run_cli(["watch", "--once", "--no-site", "--root", root]).exit_code == 0
    good = ledger.read_bytes()
    lines = good.splitlines(keepends=True)
    at = lines[10].index(b'"hash":"') + 8
    lines[10] = lines[10][:at] + (b"1" if lines[10][at:at + 1] == b"0" else b"0") + lines[10][at + 1:]
    ledger.write_bytes(b"".join(lines))  # seq 11's hash edited
    outputs = [root / "LEADERBOARD.md", root / "results" / "cbledger.db"]
    before = [(p.read_bytes(), p.stat().st_mtime_ns) for p in outputs]
    result = run_cli(["watch", "--once", "--no-site", "--root", root])
    assert result.exit_code == 1, result.output
    assert "nothing written" in result.stdout and "seq 11" in result.stdout, result.stdout
    assert [(p.read_bytes(), p.stat().st_mtime_ns) for p in outputs] == before
    ledger.write_bytes(good)  # the repair: the next watch writes as usual
    result = run_cli(["watch", "--once", "--no-site", "--root", root])
    assert result.exit_code == 0 and "head seq 21" in result.stdout, result.output


def test_a_projector_waits_for_another_and_folds_what_it_appended(tmp_path):
    """Two `run`s of two campaigns in one results directory both exited 0, and `replay --verify`
    found the site and the read model at seq 83 under a ledger at 85: the one that folded first
    wrote last. Now one fold-and-write holds the directory at a time."""
    root, ledger, drafts = make_root(tmp_path)
    LedgerStore(ledger).append(drafts[:10])
    (root / "results").mkdir(exist_ok=True)
    with writers.one_projector(Workspace.at(root, ledger)):
        proc = subprocess.Popen([sys.executable, "-m", "cbledger.cli.app", "project", "all", "--root", str(root)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
        reader.start()
        deadline = time.monotonic() + 60
        while not any("another cbledger command is writing these outputs; waiting" in x for x in lines):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)  # said before it waits
            time.sleep(0.05)
        assert not (root / "LEADERBOARD.md").exists()
        LedgerStore(ledger).append(drafts[10:12])  # the other projector's append, before its write
    assert proc.wait(timeout=120) == 0
    reader.join(timeout=10)
    out = "".join(lines)
    assert proc.returncode == 0, out
    assert "Ledger head | seq 13," in (root / "LEADERBOARD.md").read_text()
    assert_equals_full_rebuild(root, ledger, tmp_path)


def test_a_deferred_site_is_not_written_over_a_newer_one(tmp_path):
    """The watch's site flush, on a quiet second, rendered the state it had folded before another
    command appended and wrote the whole site: the older pages went over the newer."""
    root, ledger, drafts = make_root(tmp_path)
    LedgerStore(ledger).append(drafts[:10])
    regen = Regenerator(Workspace.at(root, ledger), defer_site=True)
    assert regen.refresh() is not None  # folded to seq 11; the site is due
    LedgerStore(ledger).append(drafts[10:14])
    assert run_cli(["project", "all", "--root", root]).exit_code == 0  # another command: the site at seq 15
    done = regen.flush_site()
    assert done is not None and done[0] == 15
    assert_equals_full_rebuild(root, ledger, tmp_path)


def test_a_results_directory_that_cannot_be_locked_is_projected_unheld(tmp_path, monkeypatch):
    """NFS emulates flock with a POSIX lock, which needs a descriptor open for writing: on a
    directory it is EBADF, and every projection there would have failed."""
    import errno
    import fcntl

    lock = fcntl.flock

    def cannot(fd, op):  # a directory's descriptor, as NFS answers; the ledger's file locks as ever
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            raise OSError(errno.EBADF, "Bad file descriptor")
        return lock(fd, op)

    root, ledger, drafts = make_root(tmp_path)
    LedgerStore(ledger).append(drafts[:10])
    (root / "results").mkdir(exist_ok=True)
    monkeypatch.setattr(fcntl, "flock", cannot)
    assert run_cli(["project", "all", "--root", root]).exit_code == 0
    assert_equals_full_rebuild(root, ledger, tmp_path)


# --------------------------------------------------------------------------- another process


class WatchProcess:
    def __init__(self, root: Path, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cbledger.cli.app", "watch", "--root", str(root), "--debounce-ms", "50", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, text: str) -> str:
        deadline = time.monotonic() + SETTLE
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                assert self.proc.poll() is None, f"watch died: {self.seen}"
                continue
            self.seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"no {text!r} from watch within {SETTLE}s: {self.seen}")

    def stop(self, sig: int) -> int:
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=SETTLE)
        self.reader.join(timeout=SETTLE)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return code


def append_in_another_process(ledger: Path, batch: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cbledger.cli.app", "append", str(batch), "--ledger", str(ledger)],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_watch_follows_appends_from_another_process_and_survives_bad_appends(tmp_path):
    root, ledger, drafts = make_root(tmp_path)
    marker = tmp_path / "exec.log"
    watcher = WatchProcess(root, "--exec", f"echo $CBLEDGER_HEAD_SEQ >> {marker}")
    try:
        watcher.wait_for("head seq 1;")
        watcher.wait_for("watching")
        batches = [drafts[:20], drafts[20:45], drafts[45:70]]
        head = 1
        for k, batch in enumerate(batches):
            path = tmp_path / f"batch-{k}.jsonl"
            path.write_bytes(jsonl(batch))
            append_in_another_process(ledger, path)
            head += len(batch)
            watcher.wait_for(f"head seq {head};")
            watcher.wait_for(f"site at seq {head}:")  # written once the ledger is quiet
            assert_equals_full_rebuild(root, ledger, tmp_path)

        # A torn append: reported, the watcher lives on, outputs stay at the last good state.
        good = ledger.read_bytes()
        with open(ledger, "ab") as f:
            f.write(b'{"event":{"actor":{"kind":"runner"')
        watcher.wait_for("torn append")
        assert_equals_full_rebuild_at(root, good, tmp_path)
        repaired = run_cli(["repair", "--truncate-torn-tail", "--ledger", ledger])
        assert repaired.exit_code == 0, repaired.output
        watcher.wait_for("resuming")

        # A complete line that is not a ledger line: the same, repaired by restoring the file.
        with open(ledger, "ab") as f:
            f.write(b"this is not an event\n")
        watcher.wait_for("cannot fold further")
        ledger.write_bytes(good)
        watcher.wait_for("resuming")

        rest = tmp_path / "batch-rest.jsonl"
        rest.write_bytes(jsonl(drafts[70:]))
        append_in_another_process(ledger, rest)
        watcher.wait_for(f"head seq {len(drafts) + 1};")
        watcher.wait_for(f"site at seq {len(drafts) + 1}:")
        assert_equals_full_rebuild(root, ledger, tmp_path)
        assert watcher.proc.poll() is None
    finally:
        code = watcher.stop(signal.SIGINT)
    assert code == 0, watcher.seen
    assert any("stopped (SIGINT)" in line for line in watcher.seen)
    heads = [int(x) for x in marker.read_text().split()]
    assert heads[0] == 1 and heads[-1] == len(drafts) + 1 and heads == sorted(heads)


def assert_equals_full_rebuild_at(root: Path, ledger_bytes: bytes, tmp_path: Path) -> None:
    copy = tmp_path / "at" / "events.jsonl"
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_bytes(ledger_bytes)
    assert_equals_full_rebuild(root, copy, tmp_path)


@pytest.mark.slow
def test_sigterm_stops_watch_cleanly(tmp_path):
    root, ledger, drafts = make_root(tmp_path)
    LedgerStore(ledger).append(drafts[:10])
    watcher = WatchProcess(root)
    watcher.wait_for("watching")
    assert watcher.stop(signal.SIGTERM) == 0
    assert any("stopped (SIGTERM); outputs are at seq 11" in line for line in watcher.seen)
    assert json.loads((root / "results").joinpath(sorted(record_files(root / "results"))[0]).read_text())
    assert os.path.isfile(root / "results" / "cbledger.db")


# --------------------------------------------------------------------------- a ledger under attack or checkout


def _edit_in_place(ledger: Path, seq: int) -> None:
    """Changes one byte of event `seq`'s body without changing any length: every offset stays."""
    lines = ledger.read_bytes().splitlines(keepends=True)
    line = lines[seq - 1]
    i = line.index(b'"name":"') + len(b'"name":"')
    lines[seq - 1] = line[:i] + (b"X" if line[i:i + 1] != b"X" else b"Y") + line[i + 1:]
    ledger.write_bytes(b"".join(lines))


def test_a_same_size_edit_in_place_is_never_published(tmp_path):
    root, ledger, drafts = make_root(tmp_path)
    store = LedgerStore(ledger)
    store.append(drafts[:10])
    regen = Regenerator(Workspace.at(root, ledger))
    assert regen.refresh() is not None and regen.written_seq == 11
    good = ledger.read_bytes()
    board = (root / "LEADERBOARD.md").read_bytes()
    _edit_in_place(ledger, 5)
    assert len(ledger.read_bytes()) == len(good)
    assert regen.refresh() is None
    assert regen.problem is not None and "seq 5" in regen.problem and regen.written_seq == 11
    # Events appended on top of the edited ledger link to its head, and are still not published.
    LedgerStore(ledger).append(drafts[10:20])
    assert regen.refresh() is None and regen.written_seq == 11
    assert (root / "LEADERBOARD.md").read_bytes() == board
    # A fresh fold refuses the edited ledger too (`project all`, a new watch).
    fresh = Regenerator(Workspace.at(root, ledger))
    fresh.refresh()
    assert fresh.written_seq <= 4 and "seq 5" in (fresh.problem or "")


def test_an_edit_before_the_snapshot_a_watch_resumed_from_stops_it_publishing(tmp_path):
    """A watch resumed from a projection snapshot never reads the bytes before it; the site, which
    names every run event's link, does. An edit there was folded over and published, with the
    site's complaint repeated every second and `--once` ending in exit 2."""
    from cbledger.reproduce.watch import Watcher, WatchOptions

    root, ledger, drafts = make_root(tmp_path)
    LedgerStore(ledger).append(drafts[:10])
    assert run_cli(["project", "all", "--root", root]).exit_code == 0  # keeps a snapshot at the head
    _edit_in_place(ledger, 5)
    LedgerStore(ledger).append(drafts[10:12])
    said: list[str] = []
    watcher = Watcher(Workspace.at(root, ledger), WatchOptions(once=True), said.append)
    assert watcher.run() == 1, said
    damaged = [line for line in said if "the ledger is damaged before the part this watch folded" in line]
    assert len(damaged) == 1 and "seq 5" in damaged[0], said
    # a later wake publishes nothing while it stands, and says nothing again
    board = (root / "LEADERBOARD.md").read_bytes()
    LedgerStore(ledger).append(drafts[12:14])
    assert watcher.regenerate() is None and (root / "LEADERBOARD.md").read_bytes() == board
    assert sum("damaged" in line for line in said) == 1
    # `project site` from the snapshot refuses it, naming the seq
    r = run_cli(["project", "site", "--root", root])
    assert r.exit_code == 2 and "seq 5" in r.stderr, r.output

    # an event of any type, not only a run's: the ledger's own first one
    root2, ledger2, drafts2 = make_root(tmp_path / "two")
    LedgerStore(ledger2).append(drafts2[:10])
    assert run_cli(["project", "all", "--root", root2]).exit_code == 0
    _edit_in_place(ledger2, 1)
    LedgerStore(ledger2).append(drafts2[10:11])
    said2: list[str] = []
    assert Watcher(Workspace.at(root2, ledger2), WatchOptions(once=True), said2.append).run() == 1, said2
    assert any("damaged" in line and "seq 1" in line for line in said2), said2


def test_an_output_the_watch_cannot_write_ends_it_as_such_not_as_a_watch_restarted(tmp_path):
    """A full disk under LEADERBOARD.md was caught as the watched directory going away: the
    watch said "restarting it", then died of the same error written again."""
    import errno

    from cbledger.reproduce.watch import Watcher, WatchOptions

    root, ledger, drafts = make_root(tmp_path)
    LedgerStore(ledger).append(drafts[:4])
    said: list[str] = []
    watcher = Watcher(Workspace.at(root, ledger), WatchOptions(debounce_ms=50), said.append)
    first = watcher.regenerate

    def full(*_a):
        raise OSError(errno.ENOSPC, "No space left on device", str(root / "LEADERBOARD.md"))

    calls = iter([first])
    watcher.regenerate = lambda: next(calls, full)()  # type: ignore[method-assign]
    stop, raised = threading.Event(), []

    def run() -> None:
        try:
            watcher.run(stop)
        except OSError as exc:
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not any(line.startswith("watch: watching") for line in said):
        assert time.monotonic() < deadline, said
        time.sleep(0.05)
    LedgerStore(ledger).append(drafts[4:6])
    thread.join(timeout=30)
    stop.set()
    assert not thread.is_alive() and [e.errno for e in raised] == [errno.ENOSPC], said
    assert not any("restarting it" in line for line in said), said


def test_a_deleted_and_replaced_ledger_is_followed(tmp_path):
    root, ledger, drafts = make_root(tmp_path)
    LedgerStore(ledger).append(drafts[:10])
    regen = Regenerator(Workspace.at(root, ledger))
    regen.refresh()
    good = ledger.read_bytes()
    ledger.unlink()
    assert regen.refresh() is None and "missing" in (regen.problem or "")
    shutil.rmtree(ledger.parent)
    assert regen.refresh() is None and "missing" in (regen.problem or "")
    # `git checkout` of a branch whose ledger is longer: the file comes back with more events.
    ledger.parent.mkdir(parents=True)
    ledger.write_bytes(good)
    LedgerStore(ledger).append(drafts[10:15])
    update = regen.refresh()
    assert update is not None and update.head_seq == 16 and regen.problem is None
    assert_equals_full_rebuild(root, ledger, tmp_path)


@pytest.mark.slow
def test_watch_survives_deletion_and_replacement_of_the_ledger(tmp_path):
    root, ledger, drafts = make_root(tmp_path)
    LedgerStore(ledger).append(drafts[:10])
    good = ledger.read_bytes()
    watcher = WatchProcess(root)
    try:
        watcher.wait_for("watching")
        ledger.unlink()
        watcher.wait_for("the ledger is missing")
        shutil.rmtree(ledger.parent)
        time.sleep(0.5)
        ledger.parent.mkdir(parents=True)
        replacement = tmp_path / "replacement.jsonl"
        replacement.write_bytes(good)
        LedgerStore(replacement).append(drafts[10:20])
        os.replace(replacement, ledger)  # as a checkout writes it: a new file at the old name
        watcher.wait_for("head seq 21;")
        watcher.wait_for("site at seq 21:")
        assert_equals_full_rebuild(root, ledger, tmp_path)
        # A same-size edit in place, then an append on top of it: never published.
        _edit_in_place(ledger, 5)
        watcher.wait_for("cannot fold further")
        append_in_another_process_unchecked(ledger, drafts[20:25], tmp_path)
        time.sleep(1.0)
        assert watcher.proc.poll() is None
        assert "seq 21" in (root / "LEADERBOARD.md").read_text().split("Ledger head", 1)[1].splitlines()[0]
    finally:
        code = watcher.stop(signal.SIGINT)
    assert code == 0, watcher.seen
    assert not any("head seq 26" in line for line in watcher.seen)


def append_in_another_process_unchecked(ledger: Path, events, tmp_path: Path) -> None:
    batch = tmp_path / "on-top.jsonl"
    batch.write_bytes(jsonl(events))
    subprocess.run([sys.executable, "-m", "cbledger.cli.app", "append", str(batch), "--ledger", str(ledger)],
                   capture_output=True, text=True)


def test_once_exits_1_when_its_exec_command_fails(tmp_path):
    root, ledger, drafts = make_root(tmp_path)
    LedgerStore(ledger).append(drafts[:3])
    result = run_cli(["watch", "--once", "--no-site", "--exec", "exit 3", "--root", root])
    assert result.exit_code == 1 and "--exec exited 3: exit 3" in result.output, result.output
    assert run_cli(["watch", "--once", "--no-site", "--exec", "true", "--root", root]).exit_code == 0


def test_no_site_leaves_the_site_alone(tmp_path):
    root, ledger, drafts = make_root(tmp_path)
    LedgerStore(ledger).append(drafts[:10])
    result = run_cli(["watch", "--once", "--no-site", "--root", root])
    assert result.exit_code == 0, result.output
    assert "site not written (--no-site)" in result.stdout and "site page(s) written" not in result.stdout
    assert not (root / "results" / "site").exists()
    assert (root / "LEADERBOARD.md").read_text() == leaderboard.render(writers.load_state(ledger), None)


def test_a_store_away_mid_rebuild_leaves_the_fold_as_it_was(tmp_path, monkeypatch):
    """A rebuild's fold that the store's going away cut short left the digest of the part already
    folded half made of the new fold's lines: the next wake took the ledger for a rewritten one."""
    from cbledger.ledger.recorder import StoreUnavailable
    from cbledger.projections.writers import LedgerFollower

    root, ledger, drafts = make_root(tmp_path)
    LedgerStore(ledger).append(drafts[:10])
    regen = Regenerator(Workspace.at(root, ledger))
    assert regen.refresh() is not None and regen.written_seq == 11
    digest, length = regen._prefix.digest(), regen._prefix_len
    poll = LedgerFollower.poll
    calls = {"n": 0}

    def away(self):
        calls["n"] += 1  # gone before the new fold read a line: its digest is of nothing yet
        raise StoreUnavailable("cannot connect to PostgreSQL: the server is restarting")

    monkeypatch.setattr(LedgerFollower, "poll", away)
    with pytest.raises(StoreUnavailable):
        regen._rebuild()
    assert calls["n"] == 1 and (regen._prefix.digest(), regen._prefix_len) == (digest, length)
    monkeypatch.setattr(LedgerFollower, "poll", poll)
    LedgerStore(ledger).append(drafts[10:12])
    update = regen.refresh()
    assert update is not None and regen.written_seq == 13 and regen.problem is None, regen.problem
