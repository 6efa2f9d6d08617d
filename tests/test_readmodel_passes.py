"""The read model's `later_passes`: every feedback pass after the first, which `runs` never
holds, with its attempt, hints and verdicts, rebuilt whole and updated by row alike."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cbledger.ledger.events import PassRef
from cbledger.ledger.store import LedgerStore
from cbledger.projections import readmodel
from cbledger.projections.aggregates import Views
from cbledger.projections.fold import Projector, fold
from tests.factories import Stream

REPO = Path(__file__).resolve().parent.parent


def _later(s: Stream, first: str, previous: str, index: int, *, run_id: str | None = None) -> str:
    return s.run("t-simple", passes=PassRef(index=index, allowed=3, first=first, previous=previous,
                                            hints=[f"hint {k}" for k in range(index)]), run_id=run_id)


def _attempts() -> tuple[Stream, dict[str, str]]:
    """Pass 1 failed, pass 2 failed, pass 3 passed; a second attempt whose pass 2 is not graded
    yet; a third whose pass 2 was retracted; a fourth whose pass 1 was."""
    s = Stream()
    s.task("t-simple", tier="simple")
    ids: dict[str, str] = {}
    ids["a1"] = s.run("t-simple", passes=PassRef(index=1, allowed=3))
    s.grade(ids["a1"], "fail", category="wrong-target")
    ids["a2"] = _later(s, ids["a1"], ids["a1"], 2)
    s.grade(ids["a2"], "fail", category="turn-budget", partial=0.5)
    ids["a3"] = _later(s, ids["a1"], ids["a2"], 3)
    s.grade(ids["a3"], "pass")
    s.grade(ids["a3"], "pass", suite="1.1.0")  # regraded under a later suite version
    ids["b1"] = s.graded_run("t-simple", "vendor:model-b")
    ids["b2"] = _later(s, ids["b1"], ids["b1"], 2)
    ids["c1"] = s.graded_run("t-simple")
    ids["c2"] = _later(s, ids["c1"], ids["c1"], 2)
    s.grade(ids["c2"], "pass")
    s.retract(ids["c2"])
    ids["d1"] = s.graded_run("t-simple")
    ids["d2"] = _later(s, ids["d1"], ids["d1"], 2)
    s.retract(ids["d1"])
    return s, ids


def test_every_live_later_pass_has_a_row_per_suite_it_was_graded_under(tmp_path):
    s, ids = _attempts()
    state = fold(s.events)
    db = readmodel.write(readmodel.build_tables(state), tmp_path / "cbledger.db")
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "select run_id, suite_version, first_run_id, pass_index, passes_allowed, previous_run_id, hint_count, "
        "verdict, partial_credit, failure_category from later_passes order by first_run_id, pass_index, suite_version"
    ).fetchall()
    assert rows == [
        (ids["a2"], "1.0.0", ids["a1"], 2, 3, ids["a1"], 2, "fail", 0.5, "turn-budget"),
        (ids["a3"], "1.0.0", ids["a1"], 3, 3, ids["a2"], 3, "pass", 1.0, None),
        (ids["a3"], "1.1.0", ids["a1"], 3, 3, ids["a2"], 3, "pass", 1.0, None),
        (ids["b2"], "1.0.0", ids["b1"], 2, 3, ids["b1"], 2, None, None, None),  # not graded yet
    ]
    # a later pass is never a run of its own, and its attempt's pass 1 is one
    assert conn.execute("select count(*) from runs where run_id in (select run_id from later_passes)").fetchone() == (0,)
    assert conn.execute("select count(*) from later_passes p join runs r on r.run_id = p.first_run_id").fetchone() == (4,)
    seq, hints, grade_seq = conn.execute(
        "select seq, hints, grade_seq from later_passes where run_id = ? and suite_version = '1.0.0'", (ids["a2"],)
    ).fetchone()
    assert seq == state.later_passes[ids["a2"]].seq and grade_seq == state.grades[ids["a2"]]["1.0.0"].seq
    assert hints == '["hint 0", "hint 1"]'
    conn.close()


def test_a_pass_folded_before_its_pass_1_gets_its_row_when_pass_1_comes_by_row(tmp_path):
    """An update rewrites the rows of a changed run's later passes too, not only the passes named."""
    s = Stream()
    s.task("t-simple", tier="simple")
    later = _later(s, "r-first", "r-first", 2)
    s.grade(later, "pass")
    first = s.run("t-simple", passes=PassRef(index=1, allowed=3), run_id="r-first")
    s.grade(first, "fail")
    projector = Projector()
    views = Views.attach(projector)
    db = tmp_path / "cbledger.db"
    cut = next(i for i, e in enumerate(s.events) if getattr(e.body, "run_id", None) == first)
    projector.apply(s.events[:cut])
    views.take_changes()
    readmodel.write(readmodel.stream_tables(projector.state, views), db)
    assert sqlite3.connect(db).execute("select count(*) from later_passes").fetchone() == (0,)  # no attempt yet
    projector.apply(s.events[cut:])
    changed = views.take_changes()
    assert changed == {first}
    readmodel.update(db, projector.state, views, changed)
    assert readmodel.canonical_dump(db) == readmodel.canonical_dump_tables(readmodel.build_tables(fold(s.events)))
    assert sqlite3.connect(db).execute("select run_id, verdict from later_passes").fetchall() == [(later, "pass")]


def test_the_committed_two_pass_run_is_listed_with_its_hints():
    state = fold(LedgerStore(REPO / "results" / "ledger" / "events.jsonl").read())
    (table,) = [t for t in readmodel.build_tables(state) if t.name == "later_passes"]
    assert len(table.rows) >= 1
    row = next(r for r in table.rows if r["task_id"] == "led-resistor-swap")
    first = state.runs[row["first_run_id"]]
    assert first.run.task.id == "led-resistor-swap" and row["pass_index"] == 2 and row["previous_run_id"] == first.run.run_id
    assert row["verdict"] == "pass" and row["hint_count"] == len(state.later_passes[row["run_id"]].run.passes.hints) > 0
    assert state.grades[first.run.run_id][row["suite_version"]].grade.verdict == "fail"


def test_the_attempts_folded_one_event_at_a_time_and_updated_by_row_equal_a_rebuild(tmp_path):
    s, _ = _attempts()
    projector = Projector()
    views = Views.attach(projector)
    db = tmp_path / "cbledger.db"
    updates = 0
    for i in range(len(s.events)):
        projector.apply(s.events[i:i + 1])
        changed = views.take_changes()
        if changed is None or not db.exists():
            readmodel.write(readmodel.stream_tables(projector.state, views), db)
        else:
            readmodel.update(db, projector.state, views, changed)
            updates += 1
        assert readmodel.canonical_dump(db) == readmodel.canonical_dump_tables(readmodel.build_tables(fold(s.events[:i + 1]))), i
    assert updates > len(s.events) // 2  # most events were taken in by row, the passes' among them
