"""The fold's runs, later passes and grades moved to disk past a size (`projections/spill.py`):
every view of a spilled state equals the same view of the state held in memory, and a spilled
state holds none of its runs."""

from __future__ import annotations

import gc
import io
import itertools
import os
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cbledger.ledger.store import LedgerStore
from cbledger.projections import leaderboard, passes_part, readmodel, records, snapshot, spill
from cbledger.projections.aggregates import Views
from cbledger.projections.fold import PER_RUN, GradeEntry, Projector, fold
from tests.factories import Stream, rich_stream
from tests.test_projections_fold import build, op, views
from tests.test_projections_incremental import expand, full_outputs, later, pair


def spilled_projector(at: int) -> Projector:
    with patch.object(spill, "SPILL_AT", at), patch.dict(os.environ, {spill.ENV: ""}):
        return Projector()


@pytest.fixture(autouse=True)
def small_batches():
    """Entries written to the file two at a time, so every test reads some back from disk."""
    with patch.object(spill, "_FLUSH", 2):
        yield


def in_memory(events):
    with patch.object(spill, "SPILL_AT", 10**9), patch.dict(os.environ, {spill.ENV: ""}):
        return fold(events)


keys = st.sampled_from([f"r{i}" for i in range(12)])
mapping_ops = st.lists(st.one_of(st.tuples(st.just("set"), keys, st.integers(0, 99)), st.tuples(st.just("del"), keys),
                                 st.tuples(st.just("read"), keys)), max_size=60)


@settings(max_examples=80, deadline=None)
@given(ops=mapping_ops)
def test_a_spilled_map_behaves_as_a_dict_order_included(ops):
    """Insertion order is what every view reads records in: an overwrite keeps its place, a key
    written again after a delete goes to the end, as a dict's does; batches half written included."""
    with patch.object(spill, "_FLUSH", 3):  # batches of three here, half written at any point
        disk = spill.SpilledMap(spill.SpillFile(), "t", dict[str, int])
        mem: dict[str, dict[str, int]] = {}
        for kind, key, *value in ops:
            if kind == "set":
                disk[key] = mem[key] = {"v": value[0]}
            elif kind == "del" and key in mem:
                del disk[key], mem[key]
            assert (key in disk) == (key in mem) and disk.get(key) == mem.get(key)
            assert len(disk) == len(mem)
        assert list(disk) == list(mem) and list(disk.items()) == list(mem.items())
        assert list(disk.values()) == list(mem.values()) and disk == mem


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, max_size=40), cuts=st.lists(st.integers(0, 200), max_size=8), at=st.integers(1, 6))
def test_a_state_spilled_at_any_size_and_folded_in_chunks_has_the_views_of_one_in_memory(ops, cuts, at):
    events = build(ops).events
    projector = spilled_projector(at)
    bounds = sorted({c % (len(events) + 1) for c in cuts} | {0, len(events)})
    with patch.object(spill, "_FLUSH", 2):
        for lo, hi in itertools.pairwise(bounds):
            projector.apply(events[lo:hi])
        assert views(projector.state) == views(in_memory(events))
    spilled = any(spill.file_of(m) for m in (projector.state.runs, projector.state.grades, projector.state.later_passes))
    assert spilled == (max(len(projector.state.runs), len(projector.state.grades), len(projector.state.later_passes)) >= at)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.one_of(op, pair, pair, later), max_size=30), cuts=st.lists(st.integers(0, 200), max_size=6))
def test_the_aggregates_kept_on_a_spilled_state_equal_a_rebuild_in_memory(tmp_path_factory, ops, cuts):
    """The incremental path (`Views.attach`, the read model updated by row) over a spilled state."""
    events = build(expand(ops)).events
    projector = spilled_projector(2)
    kept = Views.attach(projector)
    db = tmp_path_factory.mktemp("rm") / "cbledger.db"
    for lo, hi in itertools.pairwise(sorted({c % (len(events) + 1) for c in cuts} | {0, len(events)})):
        projector.apply(events[lo:hi])
        board, dump, files = full_outputs(in_memory(events[:hi]))
        assert leaderboard.render(projector.state, None, kept) == board
        for suite in kept.suite_versions():  # the attempts found from the tallied runs are every run's
            assert passes_part.attempts(projector.state, suite, kept.attempt_firsts) == passes_part.attempts(
                projector.state, suite)
        changed = kept.take_changes()
        if changed is None or not db.exists():
            readmodel.write(readmodel.stream_tables(projector.state, kept), db)
        else:
            readmodel.update(db, projector.state, kept, changed)
        assert readmodel.canonical_dump(db) == dump
        assert records.published(projector.state) == files


def test_a_snapshot_of_a_spilled_state_reads_back_spilled_with_the_same_views():
    events = rich_stream().events
    projector = spilled_projector(3)
    projector.apply(events)
    assert spill.file_of(projector.state.runs) is not None
    projector.state.head_hash = "0" * 64  # folded from drafts: a ledger's fold has its head's hash
    data = b"".join(snapshot.encode(projector.state))
    f = io.BytesIO(data)
    head = snapshot.header(f, "test")
    with patch.object(spill, "SPILL_AT", 3), patch.dict(os.environ, {spill.ENV: ""}):
        back = snapshot.read(f, head, "test").state
    assert all(spill.file_of(getattr(back, name)) is not None for name, _ in PER_RUN)
    assert back.rubric and back.rubric == in_memory(events).rubric  # rubric scores go in chunks of their own
    memory = in_memory(events)
    memory.head_hash = "0" * 64
    assert views(back) == views(memory)
    again = Projector(back)  # a projector handed a spilled state keeps its file, and spills nothing twice
    assert spill.file_of(again.state.runs) is spill.file_of(back.runs)


def test_a_spilled_state_holds_no_run_in_memory_and_its_file_goes_with_it():
    events = rich_stream().events
    projector = spilled_projector(2)
    projector.apply(events)
    state = projector.state
    file = spill.file_of(state.runs)
    assert file is not None and os.path.isdir(file.directory)
    directory = file.directory
    # every run and grade is on disk: what memory holds of them is the batch not yet written
    state.runs.flush()  # type: ignore[attr-defined]
    state.grades.flush()  # type: ignore[attr-defined]
    assert not state.runs._pending and not state.grades._pending  # type: ignore[attr-defined]
    assert all(isinstance(e, GradeEntry) for per in state.grades.values() for e in per.values())
    del projector, state, file
    gc.collect()
    assert not os.path.exists(directory)


def test_a_scratch_directory_a_killed_process_left_is_removed_by_the_next_spill(tmp_path, monkeypatch):
    """On disk (gigabytes at 10^7 events: never under /dev/shm), named as `scratch.mkdtemp` names
    what it makes, so `scratch.sweep` removes what a SIGKILL left."""
    import subprocess
    import sys
    import tempfile

    from cbledger import scratch

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("CBLEDGER_SCRATCH", "/dev/shm")  # restores may go to memory; the fold's file may not
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    namespace = scratch._namespace()
    dead = tmp_path / f"cbledger-fold-{gone.stdout.strip()}-{namespace}.abc"
    (dead / "state.sqlite").parent.mkdir()
    (dead / "state.sqlite").write_bytes(b"x" * 100)
    living = tmp_path / f"cbledger-fold-{os.getppid()}-{namespace}.def"  # a process still running: left alone
    living.mkdir()
    elsewhere = tmp_path / f"cbledger-fold-{gone.stdout.strip()}-{namespace + 1}.ghi"  # another container's
    elsewhere.mkdir()
    fresh = spill.SpillFile()
    assert not dead.exists() and living.is_dir() and elsewhere.is_dir()
    assert os.path.dirname(fresh.directory) == str(tmp_path)
    assert os.path.basename(fresh.directory).startswith(f"cbledger-fold-{os.getpid()}-{namespace}.")


def test_a_task_or_model_row_of_the_read_model_describes_its_latest_run():
    """The read model's task and model rows are tallied a run at a time: what a row says of its
    subject is still its latest run's (a task re-tiered, a model re-pinned), in memory and spilled."""
    s = Stream()
    s.task("t", tier="simple")
    s.suite("1.0.0")
    s.graded_run("t", "vendor:model-a", "pass", pinning="weak")
    s.graded_run("t", "vendor:model-a", "fail", repeat=2, pinning="weak")
    s.task("t", tier="hard", fixture="other-board")
    s.graded_run("t", "vendor:model-a", "pass", repeat=3, pinning="strong")
    for state in (in_memory(s.events), spilled(s.events)):
        tables = {t.name: t for t in readmodel.build_tables(state)}
        task, model = tables["tasks"].rows[0], tables["models"].rows[0]
        assert (task["tier"], task["fixture_id"], task["runs"]) == ("hard", "other-board", 3)
        assert (model["pinning"], model["runs"]) == ("strong", 3)


def spilled(events):
    projector = spilled_projector(1)
    projector.apply(events)
    assert spill.file_of(projector.state.runs) is not None
    return projector.state


# --------------------------------------------------------------------------- snapshots of a spilled state


def _spilled_project(tmp_path, monkeypatch, drafts):
    from tests.test_snapshot import _project

    monkeypatch.setenv(spill.ENV, "3")
    return _project(tmp_path, drafts)


def test_a_spilled_states_snapshot_keeps_its_tables_beside_it_and_its_aggregates_in_it(tmp_path, monkeypatch):
    """The snapshot of a state on disk is the small state and the aggregates, with the maps keyed
    by run id copied beside it as sealed rows: a projection resumed from it reads neither every
    run nor every record, and writes what a fold from seq 1 writes."""
    from cbledger.projections import writers
    from tests.factories import run_cli
    from tests.test_snapshot import assert_equals_full_rebuild

    stream = rich_stream()
    head = len(stream.drafts())
    for repeat in (4, 5, 6):  # what a run appends after the snapshot: runs and their grades
        stream.graded_run("rename-net", "vendor:model-a", "pass", repeat=repeat)
    drafts = stream.drafts()
    root, ledger = _spilled_project(tmp_path, monkeypatch, drafts[:head])
    assert run_cli(["project", "all", "--root", root]).exit_code == 0
    snaps = root / "results" / "ledger" / "snapshots"
    assert sorted(p.name for p in snaps.iterdir()) == [f"{head}.msgpack", f"{head}.tables.sqlite"]
    LedgerStore(ledger).append(drafts[head:])
    follower = writers.follow(ledger, snaps)
    assert follower.base_seq == head and spill.file_of(follower.state.runs) is not None
    assert follower.views.built and follower.views.rebuilds == 0  # adopted, not computed
    assert leaderboard.render(follower.state, None, follower.views) == leaderboard.render(writers.load_state(ledger))
    assert follower.views.rebuilds == 0  # the six events after the snapshot extended the tallies
    result = run_cli(["project", "leaderboard", "--check", "--root", root])
    assert result.exit_code == 1 and "snapshot ignored" not in result.stderr  # six events newer than the file
    assert run_cli(["project", "all", "--root", root]).exit_code == 0
    assert sorted(p.name for p in snaps.iterdir()) == sorted(
        [f"{head}.msgpack", f"{head}.tables.sqlite", f"{len(drafts)}.msgpack", f"{len(drafts)}.delta-{head}.sqlite"])
    assert_equals_full_rebuild(root, ledger, tmp_path)


def _sqlite(path, sql, *args):
    import sqlite3

    conn = sqlite3.connect(path)
    with conn:
        conn.execute(sql, args)
    conn.close()


def test_a_row_of_a_snapshots_tables_changed_moved_or_dropped_is_refused(tmp_path, monkeypatch):
    from cbledger.projections import writers
    from tests.factories import run_cli

    drafts = rich_stream().drafts()
    root, ledger = _spilled_project(tmp_path, monkeypatch, drafts)
    assert run_cli(["project", "all", "--root", root]).exit_code == 0
    snaps = root / "results" / "ledger" / "snapshots"
    tables = snaps / f"{len(drafts)}.tables.sqlite"
    pristine = tables.read_bytes()

    def folded():
        return writers.follow(ledger, snaps, notes.append)

    # the last row dropped: the table ends short of what the snapshot sealed, refused on load
    notes: list[str] = []
    _sqlite(tables, "DELETE FROM runs WHERE n = (SELECT max(n) FROM runs)")
    assert folded().base_seq == 0 and "runs ends at row" in notes[0]
    # a run's bytes changed: refused when it is read, naming the row
    tables.write_bytes(pristine)
    _sqlite(tables, "UPDATE runs SET v = (SELECT v FROM runs WHERE n = 2) WHERE n = 1")
    notes = []
    follower = folded()
    assert follower.base_seq == len(drafts) and not notes
    with pytest.raises(spill.TableDamaged, match="row 1 of runs"):
        list(follower.state.runs.values())
    # two rows swapped (each row sealed as it stands, but not at the other's position)
    tables.write_bytes(pristine)
    _sqlite(tables, "UPDATE runs SET n = -n WHERE n IN (1, 2)")
    _sqlite(tables, "UPDATE runs SET n = CASE n WHEN -1 THEN 2 ELSE 1 END WHERE n < 0")
    with pytest.raises(spill.TableDamaged, match="of runs"):
        list(folded().state.runs)
    # a row dropped mid-table: every full read finds the gap
    tables.write_bytes(pristine)
    _sqlite(tables, "DELETE FROM grades WHERE n = 2")
    with pytest.raises(spill.TableDamaged, match="grades"):
        list(folded().state.grades.items())
    # sealed with another user's key: nothing in it is read
    tables.write_bytes(pristine)
    monkeypatch.setenv(snapshot.KEY_ENV, str(tmp_path / "theirs.key"))
    snapshot._key.cache_clear()
    try:
        notes = []
        assert folded().base_seq == 0 and "its seal does not verify" in notes[0]
    finally:
        monkeypatch.undo()
        snapshot._key.cache_clear()


def test_aggregates_another_build_made_are_computed_again(tmp_path, monkeypatch):
    from cbledger.projections import writers
    from tests.factories import run_cli

    drafts = rich_stream().drafts()
    root, ledger = _spilled_project(tmp_path, monkeypatch, drafts)
    assert run_cli(["project", "all", "--root", root]).exit_code == 0
    snaps = root / "results" / "ledger" / "snapshots"
    monkeypatch.setattr(snapshot, "aggregates_version", lambda: "another build")
    follower = writers.follow(ledger, snaps)
    assert follower.base_seq == len(drafts) and not follower.views.built
    assert leaderboard.render(follower.state, None, follower.views) == leaderboard.render(writers.load_state(ledger))
    assert follower.views.rebuilds == 1


@pytest.mark.parametrize("copy", ["whole", "delta"])
def test_an_older_snapshots_tables_put_in_place_of_the_newers_are_refused(tmp_path, monkeypatch, copy):
    """Both sealed with this user's key, and the same row counts: a run graded again under a new
    suite keeps its row, so the older file would hand back the grades before the new one. Each
    file's rows are sealed with a nonce of its own: whole tables, or two deltas from one base."""
    from cbledger.projections import writers
    from tests.factories import run_cli

    stream = rich_stream()
    first = len(stream.drafts())
    stream.suite("2.0.0", reason="again")
    stream.grade("r00001", "fail", suite="2.0.0")
    second = len(stream.drafts())
    stream.suite("3.0.0", reason="again")
    stream.grade("r00001", "pass", suite="3.0.0")
    drafts = stream.drafts()
    if copy == "whole":
        monkeypatch.setattr(spill, "DELTA_KEYS", 0)  # no change counted: every snapshot copies every row
    root, ledger = _spilled_project(tmp_path, monkeypatch, drafts[:first])
    for done, upto in ((first, first), (first, second), (second, len(drafts))):
        if upto > done:
            LedgerStore(ledger).append(drafts[done:upto])
        assert run_cli(["project", "all", "--root", root]).exit_code == 0
    snaps = root / "results" / "ledger" / "snapshots"
    if copy == "whole":
        older, newer = snaps / f"{second}.tables.sqlite", snaps / f"{len(drafts)}.tables.sqlite"
    else:
        older, newer = snaps / f"{second}.delta-{first}.sqlite", snaps / f"{len(drafts)}.delta-{first}.sqlite"
    newer.write_bytes(older.read_bytes())
    notes: list[str] = []
    follower = writers.follow(ledger, snaps, notes.append)
    # the counts agree; the last row of each base table, and every row of a delta, are checked on load
    assert follower.base_seq == 0 and "does not verify" in notes[0]
    result = run_cli(["project", "all", "--check", "--root", root])
    assert result.exit_code == 0 and "snapshot ignored, folding from seq 1" in result.stderr


def test_a_snapshots_tables_sqlite_cannot_read_are_refused_in_a_line(tmp_path, monkeypatch):
    from cbledger.projections import writers
    from tests.factories import run_cli

    drafts = rich_stream().drafts()
    root, ledger = _spilled_project(tmp_path, monkeypatch, drafts)
    assert run_cli(["project", "all", "--root", root]).exit_code == 0
    snaps = root / "results" / "ledger" / "snapshots"
    tables = snaps / f"{len(drafts)}.tables.sqlite"
    pristine = tables.read_bytes()
    tables.write_bytes(b"not a database" * 100)
    notes: list[str] = []
    assert writers.follow(ledger, snaps, notes.append).base_seq == 0 and "cannot be" in notes[0]
    result = run_cli(["project", "leaderboard", "--check", "--root", root])
    assert result.exit_code == 0 and "snapshot ignored, folding from seq 1" in result.stderr
    tables.write_bytes(pristine)
    _sqlite(tables, "UPDATE runs SET v = CAST(v AS TEXT) WHERE n = 2")
    with pytest.raises(spill.TableDamaged):
        list(writers.follow(ledger, snaps).state.runs.values())


def test_aggregates_left_half_computed_by_a_damaged_table_are_computed_again_not_read(tmp_path, monkeypatch):
    from cbledger.projections import writers
    from tests.factories import run_cli

    drafts = rich_stream().drafts()
    root, ledger = _spilled_project(tmp_path, monkeypatch, drafts)
    assert run_cli(["project", "all", "--root", root]).exit_code == 0
    snaps = root / "results" / "ledger" / "snapshots"
    monkeypatch.setattr(snapshot, "aggregates_version", lambda: "another build")  # computed, not adopted
    follower = writers.follow(ledger, snaps)
    _sqlite(snaps / f"{len(drafts)}.tables.sqlite", "DELETE FROM grades WHERE n = 3")
    for _ in range(2):  # the second read does not take the tallies the first left half made
        with pytest.raises(spill.TableDamaged):
            leaderboard.render(follower.state, None, follower.views)
    assert not follower.views.built


def test_a_snapshot_whose_tables_cannot_be_written_is_a_line_not_a_failure(tmp_path, monkeypatch):
    import sqlite3

    from tests.factories import run_cli

    drafts = rich_stream().drafts()
    root, _ = _spilled_project(tmp_path, monkeypatch, drafts)

    def full(*args, **kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(spill, "copy_tables", full)
    result = run_cli(["project", "all", "--root", root])
    assert result.exit_code == 0, result.output
    assert "no snapshot written (database or disk is full)" in result.stderr
    snaps = root / "results" / "ledger" / "snapshots"
    assert not snaps.exists() or not list(snaps.iterdir())


def _memory_fold(ledger):
    from cbledger.projections import writers

    with patch.object(spill, "SPILL_AT", 10**9), patch.dict(os.environ, {spill.ENV: ""}):
        return writers.load_state(ledger)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.one_of(op, pair, pair, later), min_size=3, max_size=30),
       cuts=st.lists(st.integers(0, 200), min_size=1, max_size=6), limit=st.integers(0, 40),
       floor=st.sampled_from([0, 1000]))
def test_snapshots_written_as_deltas_over_a_base_read_back_as_the_fold_in_memory(tmp_path_factory, ops, cuts, limit,
                                                                                  floor):
    """Each round appends, resumes from the newest snapshot (whole tables, or a base and the delta
    since) and writes the next one: whole or a delta, as the changes counted allow (`limit`,
    `floor`)."""
    from cbledger.projections import writers
    from tests.test_snapshot import _ledger

    drafts = build(expand(ops)).drafts()
    work = tmp_path_factory.mktemp("delta")
    ledger, snaps = work / "events.jsonl", work / "snapshots"
    bounds = sorted({1 + c % len(drafts) for c in cuts} | {len(drafts)})
    _ledger(ledger, drafts[: bounds[0]])
    done = bounds[0]
    with patch.object(spill, "DELTA_KEYS", limit), patch.object(spill, "DELTA_FLOOR", floor), \
            patch.dict(os.environ, {spill.ENV: "2"}):
        for upto in bounds:
            if upto > done:
                LedgerStore(ledger).append(drafts[done:upto])
                done = upto
            follower = writers.follow(ledger, snaps)
            memory = _memory_fold(ledger)
            # counted first, before anything is written over the snapshot's tables
            assert [len(getattr(follower.state, n)) for n, _ in PER_RUN] == [len(getattr(memory, n)) for n, _ in PER_RUN]
            assert views(follower.state) == views(memory)
            writers.save_snapshot(follower, snaps)
        follower = writers.follow(ledger, snaps)
        assert views(follower.state) == views(_memory_fold(ledger))


def test_a_snapshot_writes_what_changed_since_its_base_until_a_quarter_of_it_changed(tmp_path, monkeypatch):
    """Whole tables, then deltas from them (each holding every change since the base, so one
    delta and the base are all a resume reads), a base kept while a kept snapshot's delta names
    it, and every row again once the changes pass a quarter of the base, or the base is gone."""
    from cbledger.projections import writers
    from tests.test_snapshot import _ledger

    monkeypatch.setenv(spill.ENV, "3")
    monkeypatch.setattr(spill, "DELTA_FLOOR", 4)
    stream = rich_stream()
    ledger, snaps = tmp_path / "events.jsonl", tmp_path / "snapshots"
    _ledger(ledger, stream.drafts())
    written = len(stream.drafts())
    names: list[list[str]] = []

    def round_(runs: int) -> int:
        nonlocal written
        for r in range(runs):
            stream.graded_run("rename-net", "vendor:model-a", "pass", repeat=10 + len(names) * 10 + r)
        LedgerStore(ledger).append(stream.drafts()[written:])
        written = len(stream.drafts())
        follower = writers.follow(ledger, snaps)
        assert views(follower.state) == views(_memory_fold(ledger))
        writers.save_snapshot(follower, snaps)
        names.append(sorted(p.name for p in snaps.iterdir()))
        return follower.state.head_seq

    first = round_(0)
    assert names[-1] == [f"{first}.msgpack", f"{first}.tables.sqlite"]
    second = round_(1)
    assert f"{second}.delta-{first}.sqlite" in names[-1]
    third = round_(1)
    # the snapshot at `first` is gone (two are kept); its tables stay, the base the newest delta names
    assert names[-1] == sorted([f"{second}.msgpack", f"{second}.delta-{first}.sqlite", f"{third}.msgpack",
                                f"{third}.delta-{first}.sqlite", f"{first}.tables.sqlite"])
    import sqlite3

    with sqlite3.connect(snaps / f"{third}.delta-{first}.sqlite") as conn:  # every change since the base
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 2
    base_runs = len(_memory_fold(ledger).runs)
    fourth = round_(base_runs // 4 + 1)  # past a quarter of the base: every row again
    assert f"{fourth}.tables.sqlite" in names[-1] and not any(".delta-" in n and n.startswith(f"{fourth}.")
                                                              for n in names[-1])
    fifth = round_(1)
    assert f"{fifth}.delta-{fourth}.sqlite" in names[-1]
    assert f"{first}.tables.sqlite" not in names[-1]  # no kept snapshot names it any more
    (snaps / f"{fourth}.tables.sqlite").unlink()  # another process pruned it: the next copy is whole
    notes: list[str] = []
    follower = writers.follow(ledger, snaps, notes.append)
    assert follower.base_seq == 0 and "missing" in notes[0]
    sixth = round_(1)
    assert f"{sixth}.tables.sqlite" in names[-1]


def test_a_row_dropped_from_a_delta_is_refused_on_load(tmp_path, monkeypatch):
    """A delta's row dropped would let the base's older value stand (a grade before its re-grade):
    its rows are counted when it is opened."""
    from cbledger.projections import writers
    from tests.factories import run_cli

    stream = rich_stream()
    first = len(stream.drafts())
    stream.suite("2.0.0", reason="again")
    stream.grade("r00001", "fail", suite="2.0.0")
    stream.graded_run("rename-net", "vendor:model-a", "pass", repeat=7)
    drafts = stream.drafts()
    root, ledger = _spilled_project(tmp_path, monkeypatch, drafts[:first])
    assert run_cli(["project", "all", "--root", root]).exit_code == 0
    LedgerStore(ledger).append(drafts[first:])
    assert run_cli(["project", "all", "--root", root]).exit_code == 0
    snaps = root / "results" / "ledger" / "snapshots"
    delta = snaps / f"{len(drafts)}.delta-{first}.sqlite"
    _sqlite(delta, "DELETE FROM grades WHERE k = 'r00001'")
    notes: list[str] = []
    assert writers.follow(ledger, snaps, notes.append).base_seq == 0 and "grades" in notes[0]


def test_tables_another_process_put_in_place_at_the_same_seq_are_never_a_delta_s_base(tmp_path, monkeypatch):
    """Two folds reach the same head and both save: the second's tables replace the first's.
    The first's next snapshot copies every row again rather than name tables it did not write,
    and a snapshot naming them is ignored on load, in a line."""
    from cbledger.projections import writers
    from tests.test_snapshot import _ledger

    monkeypatch.setenv(spill.ENV, "3")
    stream = rich_stream()
    ledger, snaps = tmp_path / "events.jsonl", tmp_path / "snapshots"
    _ledger(ledger, stream.drafts())
    head = len(stream.drafts())
    first, second = writers.follow(ledger), writers.follow(ledger)
    writers.save_snapshot(first, snaps)
    mine = (snaps / f"{head}.tables.sqlite").read_bytes()
    writers.save_snapshot(second, snaps)
    assert (snaps / f"{head}.tables.sqlite").read_bytes() != mine
    theirs = (snaps / f"{head}.tables.sqlite").read_bytes()
    (snaps / f"{head}.tables.sqlite").write_bytes(mine)  # the same rows, another nonce: refused on load
    notes: list[str] = []
    assert writers.follow(ledger, snaps, notes.append).base_seq == 0 and "does not verify" in notes[0]
    (snaps / f"{head}.tables.sqlite").write_bytes(theirs)
    stream.graded_run("rename-net", "vendor:model-a", "pass", repeat=9)
    LedgerStore(ledger).append(stream.drafts()[head:])
    first.poll()
    kept = writers.save_snapshot(first, snaps)
    assert kept is not None and (snaps / f"{len(stream.drafts())}.tables.sqlite").is_file()
    assert not list(snaps.glob("*.delta-*"))
    assert views(writers.follow(ledger, snaps).state) == views(_memory_fold(ledger))
    # a delta written before the base was replaced under it: the snapshot is ignored, not a failure
    third = writers.follow(ledger, snaps)
    stream.graded_run("rename-net", "vendor:model-a", "pass", repeat=10)
    LedgerStore(ledger).append(stream.drafts()[len(stream.drafts()) - 2:])
    third.poll()
    writers.save_snapshot(third, snaps)
    assert len(list(snaps.glob("*.delta-*"))) == 1  # a delta over the base named below
    base = snaps / f"{len(stream.drafts()) - 2}.tables.sqlite"
    base.write_bytes(mine)  # another process's tables under the base's name
    notes: list[str] = []
    assert writers.follow(ledger, snaps, notes.append).base_seq == 0 and "ends at row" in notes[0]


def test_a_base_a_newer_delta_names_is_kept_while_its_snapshot_is_being_written(tmp_path):
    from cbledger.projections import writers

    for name in ("5.tables.sqlite", "3.tables.sqlite", "10.msgpack", "10.tables.sqlite", "20.delta-5.sqlite",
                 "4.delta-3.sqlite"):
        (tmp_path / name).write_bytes(b"x")
    writers._drop_tables(tmp_path)  # 20's snapshot not written yet: its delta names 5
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "10.msgpack", "10.tables.sqlite", "20.delta-5.sqlite", "5.tables.sqlite"]


def test_a_snapshot_that_finds_its_tables_damaged_while_written_is_a_line(tmp_path, monkeypatch):
    from cbledger.projections import writers

    def damaged(*args, **kwargs):
        raise spill.TableDamaged("t.sqlite: row 3 of runs (r3) does not verify")

    monkeypatch.setattr(writers, "save_snapshot", damaged)
    notes: list[str] = []
    assert writers.keep_snapshot(None, tmp_path, notes.append) is None  # type: ignore[arg-type]
    assert notes == ["no snapshot written: t.sqlite: row 3 of runs (r3) does not verify"]
