"""The packed record store: the same bytes at the same paths as the file layout, per-run retrieval
and export, `--check` over rows, and the incremental writer's one transaction."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from cbledger.projections import packed, records, writers
from cbledger.projections.fold import fold
from cbledger.reproduce.outputs import check_tables
from cbledger.workspace import Workspace
from tests.factories import Stream, rich_project, rich_stream, run_cli
from tests.site_helpers import REPO, committed_state


def cli(*args: object) -> tuple[int, str, str]:
    result = run_cli([str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def rows(results: Path) -> dict[str, bytes]:
    with writers.RecordStore(results) as store:
        return dict(store.items())


def date_dirs(results: Path) -> list[Path]:
    return sorted(p for p in results.glob("20*") if p.is_dir())


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    return rich_project(tmp_path, "packed-test")


def test_both_layouts_hold_the_same_bytes_for_every_record_of_a_rich_ledger(tmp_path):
    state = fold(rich_stream().events)
    files, rowed = tmp_path / "files", tmp_path / "packed"
    assert writers.sync_records(state, files).created
    report = writers.sync_records(state, rowed, packed=True)
    assert report.marks == 1 and not date_dirs(rowed)  # the retracted run's mark, and no record file
    expected = dict(records.published(state))
    assert len(expected) == len(report.created) == 86
    assert rows(files) == rows(rowed) == expected
    assert writers.record_files(files) == set(expected)
    # a second pass over the store finds everything in place and writes nothing
    again = writers.sync_records(state, rowed)
    assert again.clean and again.unchanged == len(expected)


def test_the_packed_store_of_the_committed_ledger_holds_the_committed_record_files_byte_for_byte(tmp_path):
    state = committed_state()
    report = writers.sync_records(state, tmp_path, packed=True)
    committed = REPO / "results"
    on_disk = writers.record_files(committed)
    assert len(on_disk) == len(report.created) > 400
    stored = rows(tmp_path)
    assert stored.keys() == on_disk
    for rel, body in stored.items():
        assert body == (committed / rel).read_bytes(), rel


def test_the_incremental_writer_puts_a_new_runs_record_into_the_store_in_one_transaction(tmp_path, monkeypatch):
    s = Stream()
    s.graded_run("t")
    where = Workspace.at(tmp_path)
    writers.sync_records(fold(s.events), where.results, packed=True)  # the workspace is packed from here on
    new = s.graded_run("t", repeat=2)
    state = fold(s.events)
    done = writers.regenerate_all(state, where, runs=[new], read_model=False)
    assert [p.rsplit("/", 1)[1] for p in done.records.created] == ["run-2.json"]
    assert rows(where.results) == dict(records.published(state)) and not date_dirs(where.results)

    # a batch that fails part-way leaves the store as it was: no row of it is kept
    s.retract(new, "lost")
    s.graded_run("t", repeat=3)
    state = fold(s.events)
    before = rows(where.results)
    real_write = packed.PackedRecords.write
    written: list[str] = []

    def torn(self, relpath, body):
        if written:
            raise OSError("the disk filled")
        written.append(relpath)
        real_write(self, relpath, body)

    monkeypatch.setattr(packed.PackedRecords, "write", torn)
    with pytest.raises(OSError):
        writers.sync_run_records(state, where.results, state.runs)
    assert len(written) == 1 and rows(where.results) == before
    monkeypatch.setattr(packed.PackedRecords, "write", real_write)
    assert len(writers.sync_run_records(state, where.results, state.runs).created) == 2  # the mark and run-3
    assert rows(where.results) == dict(records.published(state))


def test_project_commands_write_rows_once_packed_and_check_catches_an_edited_row(root):
    results = root / "results"
    code, out, _ = cli("project", "records", "--layout", "packed", "--root", root)
    assert code == 0 and "records: 85 new" in out and "1 retracted run(s) marked" in out
    assert cli("project", "all", "--root", root)[0] == 0
    assert (results / "records.sqlite").is_file() and not date_dirs(results)
    assert cli("project", "records", "--check", "--root", root)[0] == 0
    assert cli("project", "all", "--check", "--root", root)[0] == 0
    state = writers.load_state(Workspace.at(root).ledger)
    assert not check_tables(state, Workspace.at(root)).failures

    rel = "2026-09-06/vendor-model-a/rename-net/run-1.json"
    with sqlite3.connect(results / "records.sqlite") as conn:
        conn.execute("UPDATE records SET body = replace(body, 'pass', 'PASS') WHERE path = ?", (rel,))
    code, out, _ = cli("project", "records", "--check", "--root", root)
    assert code == 1 and f"updated  results/{rel} (would be updated)" in out
    [finding] = check_tables(state, Workspace.at(root)).failures
    assert (finding.kind, finding.file) == ("record-different", f"results/{rel}")
    assert cli("project", "records", "--root", root)[0] == 0
    assert rows(results)[rel] == dict(records.published(state))[rel]


def test_show_prints_one_record_from_either_layout_and_refuses_an_unknown_path(root):
    assert cli("project", "records", "--root", root)[0] == 0
    rel = "2026-09-06/vendor-model-a/rename-net/run-1.suite-1.1.0.json"
    published = (root / "results" / rel).read_bytes()
    assert cli("project", "records", "--show", f"results/{rel}", "--root", root)[1].encode() == published
    assert cli("project", "records", "--layout", "packed", "--root", root)[0] == 0
    (root / "results" / rel).unlink()  # the store is what is read now
    assert cli("project", "records", "--show", rel, "--root", root)[1].encode() == published
    code, out, err = cli("project", "records", "--show", "results/2026-09-06/vendor-model-a/rename-net/run-9.json", "--root", root)
    assert (code, out) == (2, "") and err.count("\n") == 1 and "run-9.json: no such record" in err
    code, _, err = cli("project", "records", "--show", "results/notes.txt", "--root", root)
    assert code == 2 and "not a record path" in err


def test_export_and_a_switch_back_to_files_round_trip_the_same_bytes(root, tmp_path):
    results = root / "results"
    assert cli("project", "records", "--root", root)[0] == 0
    as_files = rows(results)
    assert cli("project", "records", "--layout", "packed", "--root", root)[0] == 0
    for rel in as_files:
        (results / rel).unlink()
    out_dir = tmp_path / "published"
    out_dir.mkdir()
    code, out, _ = cli("project", "records", "--export", out_dir, "--root", root)
    assert code == 0 and "records: 85 new" in out and "1 retracted run(s) marked" in out
    assert writers.record_files(out_dir) == set(as_files)
    assert {rel: (out_dir / rel).read_bytes() for rel in as_files} == as_files
    code, out, _ = cli("project", "records", "--layout", "files", "--root", root)
    assert code == 0 and not (results / "records.sqlite").exists()
    assert rows(results) == as_files and cli("project", "records", "--check", "--root", root)[0] == 0


def test_export_into_a_missing_directory_is_refused_with_one_line_and_writes_nothing(root, tmp_path):
    assert cli("project", "records", "--layout", "packed", "--root", root)[0] == 0
    missing = tmp_path / "no" / "such"
    code, out, err = cli("project", "records", "--export", missing, "--root", root)
    assert (code, out) == (2, "") and err.count("\n") == 1 and f"--export {missing}: no such directory" in err
    assert not (tmp_path / "no").exists()
    code, _, err = cli("project", "records", "--check", "--layout", "files", "--root", root)
    assert code == 2 and "--check and --layout: give one of them" in err
    code, _, err = cli("project", "records", "--layout", "zip", "--root", root)
    assert code == 2 and "not a layout" in err


def test_a_store_that_is_not_one_is_refused_with_one_line(root):
    store = root / "results" / "records.sqlite"
    store.write_bytes(b"not a database, just bytes in its place " * 4)
    code, _, err = cli("project", "records", "--show", "results/2026-09-06/vendor-model-a/rename-net/run-1.json", "--root", root)
    assert code == 2 and err.count("\n") == 1 and "records.sqlite: not a packed record store" in err
    code, _, err = cli("project", "all", "--root", root)
    assert code == 2 and err.count("\n") == 1 and "records.sqlite: not a packed record store" in err
    # another SQLite database in its place is not taken over either: no table is added to it
    assert cli("project", "readmodel", "-o", store, "--root", root)[0] == 0
    tables = sqlite3.connect(store).execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    code, _, err = cli("project", "records", "--check", "--root", root)
    assert code == 2 and "no such table: records" in err
    assert sqlite3.connect(store).execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall() == tables


def test_a_store_another_writer_holds_past_the_busy_timeout_is_one_line_and_nothing_written(root, monkeypatch):
    results = root / "results"
    assert cli("project", "records", "--layout", "packed", "--root", root)[0] == 0
    before = rows(results)
    rel = "2026-09-06/vendor-model-a/rename-net/run-1.json"
    with sqlite3.connect(results / "records.sqlite") as conn:
        conn.execute("UPDATE records SET body = ? WHERE path = ?", (b"{}", rel))  # so a rebuild has a row to write
    holder = sqlite3.connect(results / "records.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's batch, still open
    monkeypatch.setattr(packed, "BUSY_TIMEOUT_S", 0.2)
    try:
        code, _, err = cli("project", "records", "--root", root)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 2 and err.count("\n") == 1, err
    assert "records.sqlite: another process has been writing the record store" in err and "nothing was written" in err
    assert rows(results)[rel] == b"{}" and set(rows(results)) == set(before)
    assert cli("project", "records", "--root", root)[0] == 0  # once it is free, the same command goes through
    assert rows(results) == before


@pytest.mark.parametrize("fails", ["connect", "create"])
def test_a_store_that_cannot_be_opened_or_written_is_one_line_not_a_traceback(root, monkeypatch, fails):
    """A read-only results directory (a mount, another user's copy): the packed switch printed
    sqlite3's traceback. Root writes through file modes, so the refusal sqlite3 gives is staged."""
    connect = sqlite3.connect

    def refusing(path, *args, **kwargs):
        if fails == "connect":
            raise sqlite3.OperationalError("unable to open database file")
        conn = connect(path, *args, **kwargs)
        conn.execute("PRAGMA query_only = ON")  # what a read-only file gives: reads, no writes
        return conn

    monkeypatch.setattr(packed.sqlite3, "connect", refusing)
    before = {p: p.read_bytes() for p in (root / "results").rglob("*.json")}
    code, out, err = cli("project", "records", "--layout", "packed", "--root", root)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in out + err, err
    said = "cannot be opened (unable to open database file)" if fails == "connect" else "cannot be written"
    assert "records.sqlite: " + said in err and "nothing written" in err, err
    assert {p: p.read_bytes() for p in (root / "results").rglob("*.json")} == before  # the files layout stands
