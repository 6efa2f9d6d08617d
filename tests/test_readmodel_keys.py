"""The read model's foreign keys, indexes and datasette metadata, on the committed ledger."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from cbledger.projections import readmodel
from cbledger.workspace import Workspace
from tests.site_helpers import REPO, committed_state

DB = Workspace.at(REPO).read_model


@pytest.fixture(scope="module")
def tables():
    return readmodel.build_tables(committed_state())


def test_committed_model_has_its_keys_and_they_hold():
    conn = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
    try:
        for table, links in readmodel.FOREIGN_KEYS.items():
            declared = {(row[3], row[2], row[4]) for row in conn.execute(f'PRAGMA foreign_key_list("{table}")')}
            assert declared == set(links), table
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        for table, indexes in readmodel.INDEXES.items():
            names = {row[1] for row in conn.execute(f'PRAGMA index_list("{table}")')}
            assert {readmodel.index_name(table, c) for c in indexes} <= names, table
        plan = " ".join(str(r) for r in conn.execute("EXPLAIN QUERY PLAN SELECT * FROM runs WHERE task_id = 'x'"))
        assert "idx_runs_task_id" in plan
    finally:
        conn.close()


def test_canned_queries_answer_from_the_committed_model():
    queries = json.loads(readmodel.metadata())["databases"]["cbledger"]["queries"]
    assert set(queries) == {"pass_rate_by_model_and_tier", "most_expensive_failures", "runs_by_category"}
    state = committed_state()
    conn = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        rates = [dict(r) for r in conn.execute(queries["pass_rate_by_model_and_tier"]["sql"])]
        gold = [r for r in rates if r["model_id"] == "harness:gold"]
        noop = [r for r in rates if r["model_id"] == "harness:noop"]
        assert gold and all(r["pass_rate"] == 1.0 for r in gold)
        assert noop and all(r["pass_rate"] == 0.0 for r in noop)
        live_grades = sum(len(g) for rid, g in state.grades.items() if rid not in state.retracted and rid in state.runs)
        assert sum(r["runs"] for r in rates) == live_grades
        by_category = [dict(r) for r in conn.execute(queries["runs_by_category"]["sql"])]
        assert sum(r["runs"] for r in by_category) == live_grades
        assert {r["category"] for r in by_category} >= {"(passed)"}
        costly = list(conn.execute(queries["most_expensive_failures"]["sql"]))
        assert all(r["usd"] is not None for r in costly)  # the committed runs are uncosted: none may be invented
    finally:
        conn.close()


def test_metadata_names_every_table_and_is_committed_as_generated(tables):
    doc = json.loads(readmodel.metadata())
    assert set(doc["databases"]["cbledger"]["tables"]) == {t.name for t in tables}
    assert readmodel.metadata_path(DB).read_text(encoding="utf-8") == readmodel.metadata()


def test_every_column_is_described_and_every_facet_is_a_column(tables):
    """datasette shows a column's description under its name; a column added without one fails
    here, as does a facet or description naming a column the table does not have."""
    doc = json.loads(readmodel.metadata())["databases"]["cbledger"]
    assert doc["description"]
    for t in tables:
        meta = doc["tables"][t.name]
        assert set(meta["columns"]) == set(t.columns), t.name
        assert all(text.strip() for text in meta["columns"].values()), t.name
        assert set(meta.get("facets", [])) <= set(t.columns), t.name
    assert doc["tables"]["runs"]["facets"]


def test_a_dropped_index_is_a_difference(tmp_path, tables):
    copy = tmp_path / "cbledger.db"
    shutil.copyfile(DB, copy)
    assert readmodel.canonical_dump(copy) == readmodel.canonical_dump_tables(tables)
    conn = sqlite3.connect(copy)
    conn.execute("DROP INDEX idx_grades_failure_category")
    conn.commit()
    conn.close()
    assert readmodel.canonical_dump(copy) != readmodel.canonical_dump_tables(tables)


def test_a_byte_changed_in_a_key_column_is_a_difference_and_a_rebuild_replaces_the_file(tmp_path, tables):
    """The dump read key columns back from the index, which still held the old value: a model id
    changed in the table passed `replay --verify`, and `project all` kept the file as unchanged."""
    copy = tmp_path / "cbledger.db"
    data = bytearray(DB.read_bytes())
    at = data.find(b"harness:goldharness")  # the models row: its key, then its kind
    assert at > 0
    data[at + 9] = ord("0")
    copy.write_bytes(bytes(data))
    assert "harness:g0ld" in readmodel.canonical_dump(copy)
    assert readmodel.canonical_dump(copy) != readmodel.canonical_dump_tables(tables)
    assert readmodel.damage(copy) is not None and readmodel.damage(DB) is None
    assert readmodel.write_if_changed(tables, copy) is True
    assert readmodel.damage(copy) is None and readmodel.canonical_dump(copy) == readmodel.canonical_dump_tables(tables)


def test_a_row_linking_to_no_run_is_refused_and_nothing_written(tmp_path, tables):
    broken = []
    for t in tables:
        if t.name == "grades":
            orphan = dict(t.rows[0], run_id="no-such-run")
            t = readmodel.Table(name=t.name, columns=t.columns, pk=t.pk, rows=[*t.rows, orphan])
        broken.append(t)
    target = tmp_path / "model.db"
    with pytest.raises(ValueError, match="links to no row"):
        readmodel.write(broken, target)
    assert list(tmp_path.iterdir()) == []
