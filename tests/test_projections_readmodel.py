"""The SQLite read model: its tables, atomic rebuild, and a canonical dump that equals the
in-memory tables'."""

from __future__ import annotations

import sqlite3

from blake3 import blake3

from cbledger.ledger.events import PassRef
from cbledger.projections import readmodel
from cbledger.projections.fold import fold
from cbledger.projections.writers import load_state
from tests.factories import conditions_stream, rich_stream

TABLES = {
    "meta", "runs", "grades", "assertion_outcomes", "leaderboard_rows", "ablation_rows", "incomparable_records",
    "imports", "rubric_scores", "grade_conflicts", "retractions", "checkpoints", "later_passes", "tasks", "models",
    "unrecorded_spend",
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
    # a task and a model table, each row's counts those of its live runs
    assert conn.execute("select count(*) from tasks").fetchone()[0] == conn.execute(
        "select count(distinct task_id) from runs").fetchone()[0]
    for model, runs, agent_runs in conn.execute("select model_id, runs, agent_runs from models"):
        assert (runs, agent_runs) == conn.execute(
            "select count(*), sum(kind = 'agent') from runs where model_id = ?", (model,)).fetchone()
    saved = conn.execute("select usd_micros_total, uncosted_runs from models where model_id = 'claude-code'").fetchone()
    assert saved[0] is None and saved[1] > 0
    cheap = conn.execute("select usd_micros_total, site_page from models where model_id = 'cheap:model-b'").fetchone()
    assert cheap[0] == 9_000 * conn.execute(
        "select count(*) from runs where model_id = 'cheap:model-b' and kind = 'agent'").fetchone()[0]
    assert cheap[1].startswith("results/site/models/cheap_model-b-")
    conn.close()
    assert [p.name for p in db.parent.iterdir()] == ["cbledger.db"]  # no temporary file left


def test_canonical_dump_of_the_file_equals_the_dump_of_the_tables_and_is_stable(tmp_path):
    state = fold(rich_stream().events)
    tables = readmodel.build_tables(state)
    a = readmodel.write(tables, tmp_path / "a.db")
    b = readmodel.write(readmodel.build_tables(fold(rich_stream().events)), tmp_path / "b.db")
    dump = readmodel.canonical_dump(a)
    assert dump == readmodel.canonical_dump(b) == readmodel.canonical_dump_tables(tables)
    assert dump.startswith("table ablation_rows (")


def test_a_rebuild_of_the_same_content_leaves_the_file_and_a_changed_one_replaces_it(tmp_path):
    events = rich_stream().events
    target = readmodel.write(readmodel.build_tables(fold(events)), tmp_path / "cbledger.db")
    before = target.read_bytes()
    inode = target.stat().st_ino
    assert readmodel.content_digest(target) == blake3(readmodel.canonical_dump(target).encode()).digest()
    # the same content, streamed a row at a time: the file is not touched, nothing is left beside it
    assert readmodel.write_if_changed(readmodel.stream_tables(fold(events)), target) is False
    assert target.stat().st_ino == inode and target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["cbledger.db"]
    # one row different (an earlier head): replaced, and its content is the new one's
    shorter = fold(events[:-1])
    assert readmodel.write_if_changed(readmodel.stream_tables(shorter), target) is True
    assert target.stat().st_ino != inode
    assert readmodel.canonical_dump(target) == readmodel.canonical_dump_tables(readmodel.build_tables(shorter))
    # a file that is no read model is replaced, not compared
    target.write_bytes(b"not a database")
    assert readmodel.write_if_changed(readmodel.stream_tables(shorter), target) is True


def test_rebuild_replaces_the_file_atomically(tmp_path):
    target = tmp_path / "cbledger.db"
    target.write_bytes(b"an older read model")
    readmodel.write(readmodel.build_tables(fold(rich_stream().events)), target)
    assert sqlite3.connect(target).execute("select count(*) from meta").fetchone()[0] > 0


def _schema(db) -> dict[str, list[tuple[str, str, int]]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        names = [r[0] for r in conn.execute("select name from sqlite_master where type='table' order by name")]
        return {n: [(c[1], c[2], c[5]) for c in conn.execute(f'pragma table_info("{n}")')] for n in names}
    finally:
        conn.close()


def test_column_types_and_keys_match_the_committed_read_model(tmp_path, repo_root):
    """`canonical_dump` compares values only: this pins each column's SQL type and key position,
    so a spec that changes a declared type shows up against the committed database."""
    state = load_state(repo_root / "results" / "ledger" / "events.jsonl")
    fresh = readmodel.write(readmodel.build_tables(state), tmp_path / "cbledger.db")
    committed = _schema(repo_root / "results" / "cbledger.db")
    assert _schema(fresh) == committed
    runs = {name: sql_type for name, sql_type, _ in committed["runs"]}
    assert (runs["seq"], runs["usd"], runs["started_at"]) == ("INTEGER", "REAL", "TEXT")


def test_every_row_has_exactly_the_declared_columns_in_order():
    s = conditions_stream()
    first = s.graded_run("rename-net", "vendor:model-d", "fail", suite="1.1.0", passes=PassRef(index=1, allowed=2))
    later = s.run("rename-net", "vendor:model-d", suite_version="1.1.0",
                  passes=PassRef(index=2, allowed=2, first=first, previous=first, hints=["a hint"]))
    s.grade(later, "pass", suite="1.1.0")
    for table in readmodel.build_tables(fold(s.events)):
        assert table.rows, table.name
        for row in table.rows:
            assert list(row) == list(table.columns), table.name


def test_conditions_are_part_of_every_row_key_and_retractions_name_their_kept_records(tmp_path):
    state = fold(conditions_stream().events)
    db = readmodel.write(readmodel.build_tables(state), tmp_path / "cbledger.db")
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "select condition, runs, passes from leaderboard_rows where suite_version='1.1.0' and model='vendor:model-d' "
        "and tier='simple' order by condition"
    ).fetchall()
    assert rows == [("default", 6, 6), ("max-turns=2", 6, 1), ("tool-subset=edit_file,finish,read_file", 3, 3)]
    ablation = conn.execute(
        "select paired_tasks, unpaired_tasks, runs, passes, default_runs, default_passes, difference from ablation_rows "
        "where condition='max-turns=2' and tier='all'"
    ).fetchone()
    assert ablation == (2, '["route-power"]', 6, 1, 6, 6, -5 / 6)
    assert conn.execute("select count(distinct batch) from runs where model_id='vendor:model-d'").fetchone()[0] == 3
    assert conn.execute("select provider_models from runs where condition='default' and model_id='vendor:model-d' limit 1").fetchone() == ('["model-d-2026-08"]',)
    record_paths, mark = conn.execute("select record_paths, mark_path from retractions").fetchone()
    assert record_paths == '["results/2026-09-06/vendor-model-a/rename-net/run-7.json"]'
    assert mark == "results/2026-09-06/vendor-model-a/rename-net/run-7.retracted.json"
    conn.close()
