"""The SQLite read model: its tables, atomic rebuild, and a canonical dump that equals the
in-memory tables'."""

from __future__ import annotations

import sqlite3

from cbledger.projections import readmodel
from cbledger.projections.fold import fold
from tests.factories import rich_stream

TABLES = {
    "meta", "runs", "grades", "assertion_outcomes", "leaderboard_rows", "incomparable_records",
    "imports", "rubric_scores", "grade_conflicts", "retractions",
}


def test_tables_and_contents(tmp_path):
    state = fold(rich_stream().events)
    tables = readmodel.build_tables(state)
    db = readmodel.write(tables, tmp_path / "results" / "cbledger.db")
    conn = sqlite3.connect(db)
    names = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
    assert names == TABLES
    meta = dict(conn.execute("select key, value from meta"))
    assert meta["head_seq"] == str(state.head_seq) and meta["current_suite"] == "1.1.0"
    live = len(state.runs) - len(state.retracted)
    assert conn.execute("select count(*) from runs").fetchone()[0] == live
    assert conn.execute("select count(*) from runs where run_id in (select run_id from retractions)").fetchone()[0] == 0
    assert conn.execute("select count(*) from grades where suite_version='1.1.0'").fetchone()[0] == 2
    assert conn.execute("select count(*) from incomparable_records").fetchone()[0] == 3
    assert conn.execute("select count(*) from imports").fetchone()[0] == 1
    assert conn.execute("select count(*) from grade_conflicts").fetchone()[0] == 1
    row = conn.execute(
        "select runs, passes from leaderboard_rows where suite_version='1.0.0' and group_key='main' "
        "and tier='simple' and model='vendor:model-a'"
    ).fetchone()
    assert row == (9, 8)
    kinds = dict(conn.execute("select kind, count(*) from runs group by kind"))
    assert set(kinds) == {"agent", "harness", "replay"}
    conn.close()
    assert [p.name for p in db.parent.iterdir()] == ["cbledger.db"]  # no temporary file left


def test_canonical_dump_of_the_file_equals_the_dump_of_the_tables_and_is_stable(tmp_path):
    state = fold(rich_stream().events)
    tables = readmodel.build_tables(state)
    a = readmodel.write(tables, tmp_path / "a.db")
    b = readmodel.write(readmodel.build_tables(fold(rich_stream().events)), tmp_path / "b.db")
    dump = readmodel.canonical_dump(a)
    assert dump == readmodel.canonical_dump(b) == readmodel.canonical_dump_tables(tables)
    assert dump.startswith("table assertion_outcomes (")


def test_rebuild_replaces_the_file_atomically(tmp_path):
    target = tmp_path / "cbledger.db"
    target.write_bytes(b"an older read model")
    readmodel.write(readmodel.build_tables(fold(rich_stream().events)), target)
    assert sqlite3.connect(target).execute("select count(*) from meta").fetchone()[0] > 0
