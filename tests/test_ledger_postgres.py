"""The ledger in PostgreSQL, against a real server: what the backend-agnostic contract
(tests/test_ledger_contract.py) does not say. Eight writer processes on one ledger; the committed
ledger through the database and back byte for byte; the CLI selecting the store by URL; the
projections and `replay --verify` reading either store alike; the table refusing rewrites;
`watch` following appends by LISTEN/NOTIFY.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from cbledger.errors import UserError
from cbledger.ledger.postgres import PostgresRecorder, split_url
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.transfer import export_jsonl, import_jsonl
from cbledger.ledger.verify import verify_chain
from cbledger.projections import leaderboard, writers
from cbledger.reproduce.watch import Watcher, WatchOptions
from cbledger.workspace import LEDGER, Workspace
from tests.conftest import REPO
from tests.factories import MAINTAINER, grade_recorded, rich_stream, run_cli, run_recorded
from tests.postgres import ledger_url
from tests.test_projections_fold import views

COMMITTED = REPO / LEDGER
WRITERS = 8
PER_WRITER = 150


def _writer(args: tuple[str, int, int]) -> list[tuple[int, str, str, bool]]:
    url, worker, count = args
    store = LedgerStore(url)
    acked = []
    for i in range(count):
        n = worker * 100_000 + i
        event = run_recorded(n) if i % 2 == 0 else grade_recorded(n)
        for r in store.append([event]):
            acked.append((r.seq, r.id, r.hash, r.created))
    return acked


@pytest.mark.slow
def test_eight_writer_processes_keep_one_contiguous_chain(pg_ledger: str, tmp_path: Path) -> None:
    LedgerStore(pg_ledger).init("eight-writers", MAINTAINER)
    with mp.get_context("fork").Pool(WRITERS) as pool:
        results = pool.map(_writer, [(pg_ledger, w, PER_WRITER) for w in range(WRITERS)])
    expected = WRITERS * PER_WRITER

    report = verify_chain(pg_ledger)  # contiguous, linked, hashing to what is stored
    assert report.ok, report.problem
    assert report.events == expected + 1
    stored = list(LedgerStore(pg_ledger).read())
    by_seq = {s.seq: s.hash for s in stored}
    assert sorted(by_seq) == list(range(1, expected + 2))  # no gap and no seq twice: no fork
    ids = Counter(s.id for s in stored)
    assert all(n == 1 for n in ids.values())

    acked = [a for worker in results for a in worker]
    assert len(acked) == expected and all(created for *_, created in acked)
    assert sorted(seq for seq, *_ in acked) == list(range(2, expected + 2))  # each acked once
    for seq, id_, hash_, _ in acked:  # no acknowledged event lost
        assert by_seq[seq] == hash_ and ids[id_] == 1
    for worker in results:
        seqs = [seq for seq, *_ in worker]
        assert seqs == sorted(seqs), "a writer's own appends went backwards"

    exported = tmp_path / "export.jsonl"
    with open(exported, "wb") as f:
        export_jsonl(LedgerStore(pg_ledger), f)
    assert verify_chain(exported).ok  # the file verifier agrees


def test_the_committed_ledger_round_trips_byte_for_byte(pg_ledger: str, tmp_path: Path) -> None:
    done = import_jsonl(COMMITTED, LedgerStore(pg_ledger))
    original = COMMITTED.read_bytes()
    assert done.copied == done.source_events == original.count(b"\n")
    exported = tmp_path / "events.jsonl"
    with open(exported, "wb") as f:
        head = export_jsonl(LedgerStore(pg_ledger), f)
    assert exported.read_bytes() == original
    file_report, db_report = verify_chain(exported), verify_chain(pg_ledger)
    assert file_report.ok and db_report.ok
    assert file_report.head == db_report.head == head

    # importing again is a no-op; into a file it gives the same bytes again
    again = import_jsonl(exported, LedgerStore(pg_ledger))
    assert (again.copied, again.already_there) == (0, done.source_events)
    copy = tmp_path / "copy" / "events.jsonl"
    import_jsonl(exported, LedgerStore(copy))
    assert copy.read_bytes() == original


def test_an_interrupted_import_resumes_and_a_foreign_one_is_refused(pg_ledger: str, tmp_path: Path) -> None:
    lines = COMMITTED.read_bytes().splitlines(keepends=True)
    prefix = tmp_path / "prefix.jsonl"
    prefix.write_bytes(b"".join(lines[:40]))
    assert import_jsonl(prefix, LedgerStore(pg_ledger)).copied == 40
    resumed = import_jsonl(COMMITTED, LedgerStore(pg_ledger), batch=7)
    assert (resumed.already_there, resumed.copied) == (40, len(lines) - 40)

    other = tmp_path / "other.jsonl"
    LedgerStore(other).init("another", MAINTAINER)
    LedgerStore(other).append(rich_stream().drafts()[1:60])
    with pytest.raises(UserError, match="a different ledger"):
        import_jsonl(other, LedgerStore(prefix))  # both have seq 40, with other hashes
    with pytest.raises(UserError, match="not a prefix"):
        import_jsonl(prefix, LedgerStore(pg_ledger))  # the destination is ahead of the file
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b"".join(lines[:3] + lines[4:10]))
    with pytest.raises(UserError, match="does not verify"):
        import_jsonl(broken, LedgerStore(ledger_url(tmp_path, "broken")))


def test_projections_are_the_same_from_either_store(pg_ledger: str) -> None:
    import_jsonl(COMMITTED, LedgerStore(pg_ledger))
    from_file, from_db = writers.load_state(COMMITTED), writers.load_state(pg_ledger)
    assert (from_db.head_seq, from_db.head_hash) == (from_file.head_seq, from_file.head_hash)
    assert views(from_db) == views(from_file)
    # the committed LEADERBOARD.md is what the database ledger renders, through the CLI too
    assert leaderboard.render(from_db, None) == (REPO / "LEADERBOARD.md").read_text(encoding="utf-8")
    checked = run_cli(["project", "leaderboard", "--check", "--ledger", pg_ledger, "--root", REPO])
    assert checked.exit_code == 0, checked.output


def test_the_cli_selects_the_store_by_url(pg_ledger: str, tmp_path: Path) -> None:
    created = run_cli(["init", "--name", "cli-test"], env={"CBLEDGER_LEDGER": pg_ledger})
    assert created.exit_code == 0, created.output
    assert pg_ledger.split("://")[1].split("?")[0] in created.stdout  # the URL, not a path
    assert not (Path.cwd() / "postgresql:").exists()
    draft = rich_stream().drafts()[1]
    appended = run_cli(["append", "-", "--ledger", pg_ledger], input=_draft_line(draft))
    assert appended.exit_code == 0, appended.output
    log = run_cli(["log", "--ledger", pg_ledger])
    assert log.exit_code == 0 and draft.id in log.stdout
    out = tmp_path / "export.jsonl"
    exported = run_cli(["export", "--jsonl", "--out", out, "--ledger", pg_ledger])
    assert exported.exit_code == 0, exported.output
    verified = run_cli(["replay", "--verify", "--chain-only", "--ledger", pg_ledger])
    assert verified.exit_code == 0, verified.output
    assert run_cli(["replay", "--verify", "--chain-only", "--ledger", out]).exit_code == 0
    back = tmp_path / "back.jsonl"
    imported = run_cli(["import", "--jsonl", out, "--ledger", back])
    assert imported.exit_code == 0, imported.output
    assert back.read_bytes() == out.read_bytes()


def _draft_line(event) -> bytes:
    from tests.factories import draft_json

    return draft_json(event) + b"\n"


def test_the_url_names_no_password_and_a_bad_name_is_refused() -> None:
    dsn, name, shown = split_url("postgresql://alice:s3cret@db.invalid:5433/bench?ledger=suite_a&sslmode=require")
    assert name == "suite_a" and "s3cret" not in shown and "alice@db.invalid:5433" in shown
    assert "ledger=" not in dsn and "sslmode=require" in dsn
    with pytest.raises(UserError, match="ledger name"):
        split_url("postgresql://h/db?ledger=Robert');DROP")
    with pytest.raises(UserError, match=r"ledger= given 2 times \('main', 'copy2'\); name one ledger"):
        split_url("postgresql://h/db?ledger=main&ledger=copy2")  # once: copy2, silently
    assert split_url("postgresql://h/db?ledger=main&ledger=main")[1] == "main"
    with pytest.raises(UserError, match="cannot connect"):
        PostgresRecorder("postgresql://nobody@127.0.0.1:1/none", connect_timeout=2).head()
    # two addresses: psycopg heads the causes with a line of its own, which alone says nothing
    with pytest.raises(UserError) as refused:
        PostgresRecorder("postgresql://nobody@127.0.0.1:1,127.0.0.2:1/none", connect_timeout=2).head()
    message = str(refused.value)
    assert "\n" not in message and 'connection to server at "127.0.0.1", port 1 failed: Connection refused' in message


def test_the_table_refuses_rewrites_and_discontinuous_rows(pg_ledger: str) -> None:
    store = LedgerStore(pg_ledger)
    store.init("append-only", MAINTAINER)
    store.append([run_recorded(1), grade_recorded(1)])
    dsn, name, _ = split_url(pg_ledger)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in (
            f"UPDATE {name}.events SET type = 'x' WHERE seq = 2",
            f"DELETE FROM {name}.events WHERE seq = 3",
            f"TRUNCATE {name}.events",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
                conn.execute(statement)
        with pytest.raises(psycopg.errors.IntegrityConstraintViolation, match="does not continue"):
            conn.execute(
                f"INSERT INTO {name}.events VALUES (5, 'x', 'run.recorded', 'x', %s, %s)", ("a" * 64, "b" * 64)
            )
    assert verify_chain(pg_ledger).ok and store.head().seq == 3


@pytest.mark.slow
def test_watch_follows_a_database_ledger_by_notification(pg_ledger: str, tmp_path: Path) -> None:
    root = tmp_path / "project"
    store = LedgerStore(pg_ledger)
    store.init("watch-pg", MAINTAINER)
    drafts = rich_stream().drafts()[1:]
    lines: list[str] = []
    watcher = Watcher(Workspace.at(root, pg_ledger), WatchOptions(debounce_ms=50), lines.append)
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    thread.start()
    try:
        for batch in (drafts[:10], drafts[10:25]):
            LedgerStore(pg_ledger).append(batch)  # another handle, as another process would
            head = store.head().seq
            deadline = time.monotonic() + 30
            while watcher.regenerator.written_seq != head and time.monotonic() < deadline:
                time.sleep(0.05)
            assert watcher.regenerator.written_seq == head, lines
            state = writers.load_state(pg_ledger)
            assert (root / "LEADERBOARD.md").read_text(encoding="utf-8") == leaderboard.render(state, None)
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()
    assert any("watching postgresql://" in line for line in lines)
    assert lines[-1].startswith("watch: stopped")


# --------------------------------------------------------------------------- a campaign's driver


def _end_session_of(url: str, lease) -> None:  # type: ignore[no-untyped-def]
    """What a server restart or a dropped network does to the lease's session alone."""
    dsn, _, _ = split_url(url)
    pid = lease._conn.info.backend_pid
    with psycopg.connect(dsn, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)


def test_a_second_driver_of_a_campaign_on_one_ledger_is_refused_naming_the_first(pg_ledger: str, tmp_path: Path) -> None:
    """Two drivers on two machines share the ledger, not a results directory: the second of one
    campaign is refused at once (it would pay for the first's slots), another campaign is not,
    and nor is the same campaign on another ledger of the same server."""
    LedgerStore(pg_ledger).init("drivers", MAINTAINER)
    first, second = PostgresRecorder(pg_ledger), PostgresRecorder(pg_ledger)
    with first.driving("campaign-a") as lease:
        assert lease.lost() is None
        with pytest.raises(UserError) as refused, second.driving("campaign-a"):
            pass
        message = str(refused.value)
        assert "campaign campaign-a is being run by another driver on this ledger" in message
        pid = lease._conn.info.backend_pid  # type: ignore[attr-defined]
        assert f"server process {pid}" in message and f"SELECT pg_terminate_backend({pid})" in message
        assert "(cbledger-driver " in message and " campaign-a" in message  # its machine and process, by name
        with second.driving("campaign-b") as other:
            assert other.lost() is None
        elsewhere = PostgresRecorder(ledger_url(tmp_path, "another ledger"))
        with elsewhere.driving("campaign-a"):
            pass
        elsewhere.close()
    with second.driving("campaign-a"):  # let go at the end of the first's block
        pass
    first.close()
    second.close()


def test_a_driver_whose_session_was_lost_holds_its_campaign_again_or_stops(pg_ledger: str) -> None:
    """A restart ends the lock's session: the driver's next check takes the campaign again; if
    another driver took it in between, the check says so and no further run starts there."""
    LedgerStore(pg_ledger).init("drivers", MAINTAINER)
    first, second = PostgresRecorder(pg_ledger), PostgresRecorder(pg_ledger)
    with first.driving("campaign-a") as lease:
        _end_session_of(pg_ledger, lease)
        assert lease.lost() is None  # taken again
        with pytest.raises(UserError, match="being run by another driver"), second.driving("campaign-a"):
            pass
        _end_session_of(pg_ledger, lease)
        with second.driving("campaign-a"):
            taken = lease.lost()
            assert taken is not None and "this driver lost its hold on campaign campaign-a" in taken
            assert "another driver holds it now (cbledger-driver " in taken and "no further run of it starts here" in taken
        assert lease.lost() is None  # the other let go: held here again
    first.close()
    second.close()


def test_a_campaign_held_by_another_role_is_refused_in_one_line(pg_ledger: str, tmp_path: Path) -> None:
    """pg_stat_activity hides another role's session start: the refusal once failed formatting it,
    a traceback instead of the refusal."""
    import hashlib
    from urllib.parse import urlsplit, urlunsplit

    LedgerStore(pg_ledger).init("drivers", MAINTAINER)
    role = "r_" + hashlib.blake2b(str(tmp_path).encode(), digest_size=6).hexdigest()
    dsn, _, _ = split_url(pg_ledger)
    parts = urlsplit(pg_ledger)
    other_url = urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port}"))
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
    first, other = PostgresRecorder(pg_ledger), PostgresRecorder(other_url)
    try:
        with first.driving("c1") as lease:
            pid = lease._conn.info.backend_pid  # type: ignore[attr-defined]
            with pytest.raises(UserError) as refused, other.driving("c1"):
                pass
            message = str(refused.value)
            assert "campaign c1 is being run by another driver on this ledger" in message
            assert f"server process {pid}" in message and f"SELECT pg_terminate_backend({pid})" in message
    finally:
        first.close()
        other.close()
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP ROLE {role}")
