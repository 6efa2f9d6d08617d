"""The PostgreSQL ledger under an operator's faults, against a server of this module's own
(tests/postgres.py `own_server`), so stopping it disturbs no other test: a restart between two
appends, a batch whose connection was lost after it committed, a server gone longer than the
reconnect bound (one line from every command, a finished run kept pending by `publish`), a
stalled writer, a lock held past `lock_timeout`, and `watch` listening again after a restart.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from cbledger.errors import UserError
from cbledger.ledger.postgres import PostgresRecorder, _lock_key, split_url
from cbledger.ledger.recorder import StoreUnavailable
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.verify import verify_chain
from cbledger.projections import leaderboard, writers
from cbledger.reproduce.watch import Watcher, WatchOptions
from cbledger.runner import execute
from cbledger.workspace import Workspace
from tests.factories import (
    MAINTAINER,
    draft_json,
    grade_recorded,
    rich_stream,
    run_cli,
    run_recorded,
)
from tests.postgres import Server, drop, ledger_url, own_server


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with own_server() as started:
        yield started


@pytest.fixture
def url(server: Server, tmp_path: Path) -> Iterator[str]:
    made = ledger_url(tmp_path, server=server.url)
    yield made
    drop(made)


def _ids(url: str) -> list[str]:
    return [s.id for s in LedgerStore(url).read()]


def test_a_store_survives_a_restart_between_two_appends(server: Server, url: str) -> None:
    store = LedgerStore(url)
    store.init("restart", MAINTAINER)
    store.append([run_recorded(1)])
    server.restart()  # the store's session is ended; the next append opens another
    assert [r.seq for r in store.append([grade_recorded(1)])] == [3]
    with server.down(0.5):  # and when the server is still down, it waits for it within the bound
        landed = store.append([run_recorded(2)])
    assert [(r.seq, r.created) for r in landed] == [(4, True)]
    report = verify_chain(url)
    assert report.ok and report.events == 4
    assert _ids(url)[1:] == [run_recorded(1).id, grade_recorded(1).id, run_recorded(2).id]


def test_a_batch_that_committed_before_its_connection_was_lost_is_not_written_twice(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = PostgresRecorder(url)
    store = LedgerStore(recorder)
    store.init("lost-reply", MAINTAINER)
    conn = recorder.conn
    real = conn.execute
    lost: list[bool] = []

    def execute_then_lose(query, params=None, **kwargs):  # type: ignore[no-untyped-def]
        cursor = real(query, params, **kwargs)
        if "append_batch" in str(query) and not lost:
            lost.append(True)
            conn.close()  # the reply never arrives, after the transaction committed
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return cursor

    monkeypatch.setattr(conn, "execute", execute_then_lose)
    results = store.append([run_recorded(1), grade_recorded(1)])
    assert lost and recorder.conn is not conn  # it reconnected
    assert [r.seq for r in results] == [2, 3]
    assert _ids(url)[1:] == [run_recorded(1).id, grade_recorded(1).id]  # once each
    again = store.append([run_recorded(1), grade_recorded(1)])  # and the id is the key besides
    assert [(r.seq, r.created) for r in again] == [(2, False), (3, False)]
    assert verify_chain(url).ok


def test_a_server_gone_past_the_bound_is_one_line_naming_it(server: Server, url: str, tmp_path: Path) -> None:
    store = LedgerStore(PostgresRecorder(url, reconnect_within=1))
    store.init("gone", MAINTAINER)
    store.append([run_recorded(1)])
    draft = tmp_path / "draft.jsonl"
    draft.write_bytes(draft_json(grade_recorded(1)) + b"\n")
    shown = split_url(url)[2]
    with server.stopped():  # down until every command below has met it so
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="lost the connection to PostgreSQL") as gone:
            store.append([grade_recorded(1)])
        assert time.monotonic() - started < 6  # the bound, not a hang
        assert shown in str(gone.value)
        for args in (
            ["append", draft],
            ["log"],
            ["show", "2"],
            ["replay", "--verify", "--chain-only"],
            ["export", "--jsonl", "--out", tmp_path / "out.jsonl"],
            ["project", "leaderboard", "--root", tmp_path / "project"],
        ):
            result = run_cli([*args, "--ledger", url])
            assert result.exit_code == 2, (args, result.output)
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and shown in lines[0] and "PostgreSQL" in lines[0], (args, result.stderr)
    assert store.append([grade_recorded(1)])[0].seq == 3  # back: the same store goes on


def test_a_server_down_past_the_bound_costs_one_append_not_every_one_after(server: Server, url: str) -> None:
    """A 45 s outage under a campaign: the first append waited its 30 s and was kept for later,
    and every later run's append then failed at once ("cannot connect"), 13 of 30 runs unrecorded."""
    store = LedgerStore(PostgresRecorder(url, reconnect_within=4))
    store.init("outage", MAINTAINER)
    store.append([run_recorded(1)])
    with server.down(6):
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="could not connect again within 4 s"):
            store.append([grade_recorded(1)])
        assert time.monotonic() - started >= 3.5
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):  # a reader (a watch, a listing) is told at once
            store.head()
        assert time.monotonic() - started < 2
        assert store.append([grade_recorded(1)])[0].seq == 3  # waited its own window, and the server came back
    assert verify_chain(url).ok


def test_a_url_with_no_host_is_one_line() -> None:
    """`postgresql://` alone is libpq's "all defaults" (the local socket), not a parse error."""
    assert split_url("postgresql://")[0] == "postgresql://"
    assert split_url("postgresql:///bench?ledger=a")[0] == "postgresql:///bench"
    result = run_cli(["append", "--ledger", "postgresql://nobody@127.0.0.1:1/none", "-"], input=b"{}\n")
    assert result.exit_code == 2 and "Traceback" not in result.output
    for ledger in ("postgresql://", "postgresql://nobody@127.0.0.1:1/none", "postgresql://h/db?bogus=1"):
        draft = draft_json(run_recorded(1)) + b"\n"
        result = run_cli(["append", "--ledger", ledger, "-"], input=draft)
        lines = result.stderr.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1 and ledger.split("?")[0] in lines[0], result.stderr


def _publishable(workspace: Workspace, n: int) -> execute.RunOutput:
    run, grade = run_recorded(n), grade_recorded(n)
    staged = workspace.staged_bundle(run.body.run_id)
    staged.parent.mkdir(parents=True, exist_ok=True)
    staged.write_bytes(b"bundle %d" % n)
    return execute.RunOutput(
        run=run.body, grade=grade.body, events=[run, grade], staged=staged,
        final=workspace.root / "results" / "runs" / f"{run.body.run_id}.bundle",
        sandbox=None, pending=workspace.pending_events(run.body.run_id),
    )  # fmt: skip


def test_publish_rides_out_a_restart_and_keeps_a_run_pending_past_the_bound(
    server: Server, url: str, tmp_path: Path
) -> None:
    workspace = Workspace.at(tmp_path / "project", url)
    store = LedgerStore(PostgresRecorder(url, reconnect_within=30))
    store.init("publish", MAINTAINER)
    execute.publish(store, _publishable(workspace, 1))
    with server.down(0.5):  # a restart within the bound: the run lands
        execute.publish(store, _publishable(workspace, 2))
    assert _ids(url)[1:] == [run_recorded(1).id, grade_recorded(1).id, run_recorded(2).id, grade_recorded(2).id]

    impatient = LedgerStore(PostgresRecorder(url, reconnect_within=1))
    impatient.head()  # connected, then the server goes away
    kept = _publishable(workspace, 3)
    with server.stopped(), pytest.raises(UserError, match="the run is kept") as refused:
        execute.publish(impatient, kept)
    assert "PostgreSQL" in str(refused.value)
    # what to do next is the database's, not a file's torn tail (it once advised `repair`)
    assert "once the database answers again" in str(refused.value) and "repair" not in str(refused.value)
    assert kept.final.is_file() and kept.pending.is_file()  # nothing of the paid run lost
    appended = run_cli(["append", kept.pending, "--ledger", url])
    assert appended.exit_code == 0, appended.output
    assert _ids(url)[-2:] == [run_recorded(3).id, grade_recorded(3).id]
    assert verify_chain(url).ok


def _append_forever(url: str, stop: mp.synchronize.Event) -> None:  # type: ignore[name-defined]
    store = LedgerStore(url)
    n = 0
    while not stop.is_set():
        n += 1
        store.append([run_recorded(500_000 + n)])


@pytest.mark.slow
def test_a_stalled_writer_does_not_hold_up_the_others(url: str) -> None:
    """A writer stopped (SIGSTOP) between or inside its appends holds no lock: the others go on."""
    LedgerStore(url).init("stalled", MAINTAINER)
    ctx = mp.get_context("fork")
    stop = ctx.Event()
    stalled = ctx.Process(target=_append_forever, args=(url, stop))
    stalled.start()
    try:
        deadline = time.monotonic() + 60
        while LedgerStore(url).head().seq < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(stalled.pid, signal.SIGSTOP)  # type: ignore[arg-type]
        store = LedgerStore(url)
        started = time.monotonic()
        acked = [store.append([grade_recorded(n)])[0].created for n in range(20)]
        took = time.monotonic() - started
        assert all(acked) and took < 5, f"20 appends took {took:.1f} s beside a stopped writer"
    finally:
        os.kill(stalled.pid, signal.SIGCONT)  # type: ignore[arg-type]
        stop.set()
        stalled.join(60)
    assert stalled.exitcode == 0
    assert verify_chain(url).ok


def test_a_lock_held_past_lock_timeout_is_a_clear_error(url: str) -> None:
    """Whatever holds the ledger's lock (a writer stopped mid-statement, an operator's session),
    an append waits `lock_timeout` at most, then says so; nothing is written."""
    LedgerStore(url).init("locked", MAINTAINER)
    dsn, name, _ = split_url(url)
    store = LedgerStore(PostgresRecorder(url, lock_timeout_ms=500))
    with psycopg.connect(dsn) as holder:  # not autocommit: the transaction holds the lock
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(name),))
        started = time.monotonic()
        with pytest.raises(UserError, match=r"waited 0\.5 s for the ledger's lock"):
            store.append([run_recorded(1)])
        assert time.monotonic() - started < 5
    assert store.append([run_recorded(1)])[0].seq == 2  # released: the append goes through


def test_every_session_has_its_timeouts_and_keepalives(url: str) -> None:
    recorder = PostgresRecorder(url)
    conn = recorder.conn
    assert conn.execute("SHOW lock_timeout").fetchone() == ("30s",)
    assert conn.execute("SHOW statement_timeout").fetchone() == ("2min",)
    given = conn.info.get_parameters()
    assert (given["keepalives"], given["keepalives_idle"], given["keepalives_count"]) == ("1", "30", "3")
    own = PostgresRecorder(url + "&keepalives_idle=5").conn.info.get_parameters()
    assert own["keepalives_idle"] == "5"  # a URL's own setting is kept
    recorder.close()


@pytest.mark.slow
def test_watch_listens_again_after_a_restart(server: Server, url: str, tmp_path: Path) -> None:
    root = tmp_path / "project"
    LedgerStore(url).init("watch-restart", MAINTAINER)
    drafts = rich_stream().drafts()[1:]
    lines: list[str] = []
    watcher = Watcher(Workspace.at(root, url), WatchOptions(debounce_ms=50), lines.append)
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    thread.start()

    def caught_up() -> None:
        head = LedgerStore(url).head().seq
        deadline = time.monotonic() + 60
        while watcher.regenerator.written_seq != head and time.monotonic() < deadline:
            time.sleep(0.05)
        assert watcher.regenerator.written_seq == head, lines
        assert (root / "LEADERBOARD.md").read_text(encoding="utf-8") == leaderboard.render(writers.load_state(url), None)

    try:
        LedgerStore(url).append(drafts[:10])
        caught_up()
        server.restart(down_for=0.5)
        assert thread.is_alive(), lines
        LedgerStore(url).append(drafts[10:25])  # heard only by a listener made again
        caught_up()
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()
    assert any("listening on" in line and "again" in line for line in lines), lines
    assert lines[-1].startswith("watch: stopped")


@pytest.mark.slow
def test_a_watch_waits_out_an_outage_past_the_bound_without_refolding_from_seq_1(
    server: Server, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Down past the reconnect bound, each wake read the server's absence as a ledger replaced,
    and said its snapshot was ignored, "folding from seq 1", every second (ten lines in 40 s) while
    folding nothing."""
    monkeypatch.setitem(PostgresRecorder.__init__.__kwdefaults__, "reconnect_within", 0.5)
    root = tmp_path / "project"
    LedgerStore(url).init("watch-outage", MAINTAINER)
    drafts = rich_stream().drafts()[1:]
    LedgerStore(url).append(drafts[:10])
    lines: list[str] = []
    watcher = Watcher(Workspace.at(root, url), WatchOptions(debounce_ms=50), lines.append)
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while watcher.regenerator.written_seq != 11 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert watcher.regenerator.follower is not None and watcher.regenerator.written_seq == 11, lines
        assert writers.keep_snapshot(watcher.regenerator.follower, watcher.snapshots, lines.append) is not None
        with server.stopped():
            time.sleep(4)  # the watch wakes about once a second meanwhile
        LedgerStore(url).append(drafts[10:14])
        deadline = time.monotonic() + 60
        while watcher.regenerator.written_seq != 15 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert watcher.regenerator.written_seq == 15, lines
    finally:
        stop.set()
        thread.join(30)
    assert not any("snapshot ignored" in line for line in lines), lines
    assert sum("cannot connect" in line for line in lines) <= 2, lines  # said once (a line for the listener, one for the fold)



def test_a_watch_whose_server_goes_down_before_it_listens_waits_instead_of_dying(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first LISTEN was made outside the outage handling: a server gone between the watch's
    first regeneration and its listening ended the watch's thread with a traceback."""
    root = tmp_path / "project"
    LedgerStore(url).init("watch-early-outage", MAINTAINER)
    drafts = rich_stream().drafts()[1:]
    LedgerStore(url).append(drafts[:10])
    real = PostgresRecorder.wait_for_append
    calls = [0]

    def first_fails(self: PostgresRecorder, timeout: float) -> bool:
        calls[0] += 1
        if calls[0] == 1:
            raise StoreUnavailable(f"{self.location}: cannot connect to PostgreSQL: the server is restarting")
        return real(self, timeout)

    monkeypatch.setattr(PostgresRecorder, "wait_for_append", first_fails)
    lines: list[str] = []
    watcher = Watcher(Workspace.at(root, url), WatchOptions(debounce_ms=50), lines.append)
    stop = threading.Event()
    died: list[BaseException] = []

    def run() -> None:
        try:
            watcher.run(stop)
        except BaseException as exc:  # what the thread died of is the finding
            died.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def said(what: str) -> bool:
        return any(what in line for line in list(lines))

    try:
        deadline = time.monotonic() + 60
        while not said("the server is restarting; listening again once it is back") and not died and time.monotonic() < deadline:
            time.sleep(0.05)
        assert died == [] and said("listening again once it is back"), (died, lines)
        LedgerStore(url).append(drafts[10:14])  # landed while the watch waits for its server
        while not (watcher.regenerator.written_seq == 15 and said(" again")) and not died and time.monotonic() < deadline + 60:
            time.sleep(0.05)
        assert died == [] and watcher.regenerator.written_seq == 15, (died, lines)
    finally:
        stop.set()
        thread.join(30)
    assert any("listening on" in line and line.endswith(" again") for line in lines), lines
