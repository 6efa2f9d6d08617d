"""Outputs kept current as events fold equal a full rebuild, byte for byte.

`aggregates.Views` extends its tallies with each new record and starts again from the state on
anything else; the read model is updated by row; record files are synced once per batch. Each is
held here to a rebuild from scratch over random event sequences folded in random chunks.
"""

from __future__ import annotations

import itertools
import os
import random
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cbledger.ledger.events import PassRef, ReviewRecordedEvent, RubricScoredEvent, RunRecordedEvent
from cbledger.projections import leaderboard, readmodel, writers
from cbledger.projections import records as rec
from cbledger.projections.aggregates import Views
from cbledger.projections.fold import Projector, fold, suite_versions
from cbledger.projections.metrics import suite_metrics
from tests.test_projections_fold import build, later, op

#: a new run and its grade at once: the steady stream the incremental path is for
pair = st.tuples(st.just("pair"), st.integers(0, 3), st.integers(0, 4), st.integers(1, 3),
                 st.sampled_from([None, 10_000]), st.sampled_from(["9.0.8", "8.0.1"]), st.booleans(),
                 st.sampled_from(["pass", "fail"]))


def expand(ops) -> list:
    """`pair` as a run followed by a grade of that newest run (index -1)."""
    out = []
    for o in ops:
        if o[0] == "pair":
            out += [("run", *o[1:7]), ("grade", -1, o[7], "1.0.0")]
        else:
            out.append(o)
    return out


def full_outputs(state) -> tuple[str, str, list[tuple[str, bytes]]]:
    return (
        leaderboard.render(state),
        readmodel.canonical_dump_tables(readmodel.build_tables(state)),
        rec.published(state),
    )


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.one_of(op, pair, pair, later), max_size=40), cuts=st.lists(st.integers(0, 200), max_size=10))
def test_views_kept_as_events_fold_equal_a_rebuild_after_every_chunk(tmp_path_factory, ops, cuts):
    events = build(expand(ops)).events
    projector = Projector()
    views = Views.attach(projector)
    db = tmp_path_factory.mktemp("rm") / "cbledger.db"
    bounds = sorted({c % (len(events) + 1) for c in cuts} | {0, len(events)})
    for lo, hi in itertools.pairwise(bounds):
        projector.apply(events[lo:hi])
        full = fold(events[:hi])
        board, dump, files = full_outputs(full)
        assert leaderboard.render(projector.state, None, views) == board
        for suite in suite_versions(full):  # the step-form partition and metrics against the original
            assert views.suite_metrics(suite) == suite_metrics(full, suite)
        changed = views.take_changes()
        if changed is None or not db.exists():
            readmodel.write(readmodel.stream_tables(projector.state, views), db)  # rows made as written
        else:
            readmodel.update(db, projector.state, views, changed)
        assert readmodel.canonical_dump(db) == dump
        assert rec.published(projector.state) == files


def test_a_steady_stream_is_folded_in_without_computing_the_views_again():
    rng = random.Random(14)
    ops = [("pair", rng.randrange(4), rng.randrange(3), rng.randint(1, 3), 10_000, "9.0.8", False,
            rng.choice(["pass", "fail"])) for _ in range(150)]
    events = build(expand(ops)).events
    projector = Projector()
    projector.apply(events[:40])
    views = Views.attach(projector)
    assert views.take_changes() is None  # nothing was written from these views yet: every row is new
    i = 40
    while i < len(events):
        n = rng.randint(1, 3)
        projector.apply(events[i:i + n])
        i += n
        assert leaderboard.render(projector.state, None, views) == leaderboard.render(fold(events[:i]))
        assert views.take_changes() is not None
    assert views.rebuilds == 1  # every chunk extended the tallies
    # a retraction is not an extension: the views are computed again, and still agree
    retracted = build(expand(ops) + [("retract", 3)]).events
    projector.apply(retracted[len(events):])
    assert leaderboard.render(projector.state, None, views) == leaderboard.render(fold(retracted))
    assert views.rebuilds == 2 and views.take_changes() is None


def test_rubric_scores_and_reviews_of_placed_runs_extend_the_tallies(tmp_path):
    """A judge scoring every run as it lands (criteria and the judge lane's usage), reviews with
    and without a billed call, re-judgings: no computation from every record, and the leaderboard
    and the read model updated by row are those of a rebuild."""
    rng = random.Random(7)
    ops: list = []
    for i in range(60):
        ops.append(("pair", rng.randrange(4), rng.randrange(3), rng.randint(1, 3), 10_000, "9.0.8", False,
                    rng.choice(["pass", "fail"])))
        ops.append(("judged", -1 if i % 3 else rng.randrange(50), rng.randrange(6)))
        if i % 4 == 0:
            ops.append(("review", rng.randrange(50), rng.choice([None, 0, 7])))
        if i % 5 == 0:
            ops.append(("rubric", rng.randrange(50), rng.random()))
    events = build(expand(ops)).events
    assert sum(isinstance(e, RubricScoredEvent) for e in events) > 60 and any(isinstance(e, ReviewRecordedEvent) for e in events)
    projector = Projector()
    projector.apply(events[:10])
    views = Views.attach(projector)
    db = tmp_path / "cbledger.db"
    readmodel.write(readmodel.stream_tables(projector.state, views), db)
    views.take_changes()
    i = 10
    while i < len(events):
        n = rng.randint(1, 4)
        projector.apply(events[i:i + n])
        i += n
        board, dump, _ = full_outputs(fold(events[:i]))
        assert leaderboard.render(projector.state, None, views) == board
        changed = views.take_changes()
        assert changed is not None
        readmodel.update(db, projector.state, views, changed)
        assert readmodel.canonical_dump(db) == dump
    assert views.rebuilds == 1
    assert "judge:model-" in board  # the model-judged rows are there to compare


def _fold_checked(events, start: int, rng, tmp_path) -> Views:
    """Folds `events` in random chunks after the first `start` with the views attached, each
    step's LEADERBOARD.md and read model (updated by row) against a rebuild."""
    projector = Projector()
    projector.apply(events[:start])
    views = Views.attach(projector)
    db = tmp_path / "cbledger.db"
    readmodel.write(readmodel.stream_tables(projector.state, views), db)
    views.take_changes()
    i = start
    while i < len(events):
        n = rng.randint(1, 3)
        projector.apply(events[i:i + n])
        i += n
        board, dump, _ = full_outputs(fold(events[:i]))
        assert leaderboard.render(projector.state, None, views) == board
        changed = views.take_changes()
        if changed is None:
            readmodel.write(readmodel.stream_tables(projector.state, views), db)
        else:
            readmodel.update(db, projector.state, views, changed)
        assert readmodel.canonical_dump(db) == dump
    return views


def test_later_passes_of_graded_attempts_are_billed_to_them_without_computing_again(tmp_path):
    """Feedback passes landing after their pass 1 was graded: their spend joins the attempt's
    lane one by one; only a pass behind a retracted one (billed nothing) computes the views again."""
    rng = random.Random(11)
    ops: list = []
    for _ in range(40):
        ops.append(("pair", rng.randrange(4), rng.randrange(3), rng.randint(1, 3), rng.choice([10_000, None]), "9.0.8",
                    False, rng.choice(["pass", "fail"])))
        for _ in range(rng.randrange(3)):
            ops.append(("later", rng.randrange(40), rng.choice(["pass", "fail", None]), "1.0.0"))
    events = build(expand(ops)).events
    views = _fold_checked(events, 8, rng, tmp_path)
    assert views.rebuilds == 1 and len(views.state.later_passes) > 20
    # pass 2 of an attempt retracted, then its pass 3: behind the retraction, billed nothing
    stream = build(expand(ops[:6]))
    run = next(e.body for e in stream.events if isinstance(e, RunRecordedEvent))
    first, task, model = run.run_id, run.task.id, run.model.id
    second = stream.run(task, model, passes=PassRef(index=2, allowed=3, first=first, previous=first, hints=["h"]))
    stream.retract(second)
    stream.run(task, model, passes=PassRef(index=3, allowed=3, first=first, previous=second, hints=["h", "h"]))
    views = _fold_checked(stream.events, len(stream.events) - 3, rng, tmp_path)
    assert views.rebuilds == 2  # the retraction: computed again
    # pass 1's grade and its pass 2 in one catch-up: the record placed reads the pass already
    stream = build(expand(ops[:6]))
    later = stream.run("t-hard", "vendor:model-a", usd_micros=70_000)
    stream.grade(later, "pass")
    stream.run("t-hard", "vendor:model-a", usd_micros=900_000,
               passes=PassRef(index=2, allowed=2, first=later, previous=later, hints=["h"]))
    projector = Projector()
    projector.apply(stream.events[:-2])
    views = Views.attach(projector)
    views.record_counts()
    projector.apply(stream.events[-2:])
    assert leaderboard.render(projector.state, None, views) == leaderboard.render(fold(stream.events))
    assert views.rebuilds == 1


def _reseq(events: list) -> list:
    return [msgspec.structs.replace(e, seq=i) for i, e in enumerate(events, start=1)]


@pytest.mark.parametrize("case", ["retracted-before-it-came", "lower-index-retracted-later", "same-index-retracted",
                                  "graded-before-it-came"])
def test_a_later_pass_the_full_computation_would_not_bill_starts_the_views_again(case):
    """Orderings the fold accepts (a retraction or grade naming a pass not yet recorded; two
    passes of one index), each read between chunks: the lanes and anomalies of a rebuild."""
    stream = build(expand([("pair", 0, 0, 1, 10_000, "9.0.8", False, "fail")]))
    first = next(e.body for e in stream.events if isinstance(e, RunRecordedEvent))
    head = len(stream.events)

    def later(index: int, usd: int, rid: str) -> str:
        return stream.run(first.task.id, first.model.id, usd_micros=usd, run_id=rid,
                          passes=PassRef(index=index, allowed=3, first=first.run_id, previous=first.run_id, hints=["h"]))

    if case == "retracted-before-it-came":
        later(2, 900_000, "p2")
        stream.retract("p2")
        tail = [[-1], [-2]]  # the retraction, then the pass
    elif case == "lower-index-retracted-later":
        later(2, 900_000, "p2")
        stream.retract("p2")
        later(3, 300_000, "p3")
        tail = [[-2], [-1], [-3]]
    elif case == "same-index-retracted":
        later(2, 100_000, "p2a")
        stream.retract("p2a")
        later(2, 700_000, "p2b")
        tail = [[-3, -2], [-1]]
    else:
        later(2, 900_000, "p2")
        stream.grade("p2", "pass")
        tail = [[-1], [-2]]
    ordered = stream.events[:head] + [stream.events[i] for chunk in tail for i in chunk]
    events = _reseq(ordered)
    projector = Projector()
    projector.apply(events[:head])
    views = Views.attach(projector)
    views.record_counts()
    at = head
    for chunk in tail:
        projector.apply(events[at:at + len(chunk)])
        at += len(chunk)
        assert leaderboard.render(projector.state, None, views) == leaderboard.render(fold(events[:at]))


def test_a_bump_of_a_new_version_changes_no_tally_and_one_of_a_graded_version_starts_again():
    ops = [("pair", t % 4, t % 3, 1, 10_000, "9.0.8", False, "pass") for t in range(6)]
    stream = build(expand(ops))
    head = len(stream.events)
    stream.suite("2.0.0")  # the usual bump: before any grade under it
    stream.suite("1.0.0", reason="the tasks' hashes recorded again")  # a version records are graded under
    projector = Projector()
    projector.apply(stream.events[:head])
    views = Views.attach(projector)
    views.record_counts()
    for upto in (head + 1, head + 2):
        projector.apply(stream.events[upto - 1:upto])
        assert leaderboard.render(projector.state, None, views) == leaderboard.render(fold(stream.events[:upto]))
        assert views.rebuilds == upto - head  # 1 after the new version's bump, 2 after the graded one's


def test_a_record_that_moves_the_reference_stamp_computes_the_views_again():
    # two runs of one task graded against a manifest the suite has no bump for, then three
    # against another: the majority hash, and with it every group, moves on the fourth
    ops = [("pair", 0, 0, 1, 10_000, "9.0.8", True, "pass")] * 2 + [("pair", 0, 1, 1, 10_000, "9.0.8", False, "pass")] * 3
    events = build(expand(ops)).events
    projector = Projector()
    views = Views.attach(projector)
    for i in range(len(events)):
        projector.apply(events[i:i + 1])
        assert leaderboard.render(projector.state, None, views) == leaderboard.render(fold(events[:i + 1]))
    assert views.rebuilds >= 2


def test_a_crash_in_the_middle_of_a_records_batch_leaves_each_file_old_or_new(tmp_path, monkeypatch):
    results = tmp_path / "results"
    state = fold(build(expand([("pair", t % 4, t % 3, 1, 10_000, "9.0.8", False, "pass") for t in range(12)])).events)
    old = {}
    for i, (relpath, data) in enumerate(rec.published(state)):  # what an earlier rendering published
        target = results / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        old[relpath] = data.replace(b'"pass"', b'"fail"') if i % 2 else data
        target.write_bytes(old[relpath])
    renames = []
    real_replace = os.replace

    def crash_after_three(src, dst):
        if len(renames) == 3:
            raise OSError("power lost")
        renames.append(dst)
        real_replace(src, dst)

    monkeypatch.setattr(writers.os, "replace", crash_after_three)
    with pytest.raises(OSError, match="power lost"):
        writers.sync_records(state, results)
    new = dict(rec.published(state))
    assert len(renames) == 3
    for relpath in new:
        on_disk = (results / relpath).read_bytes()
        assert on_disk in (old[relpath], new[relpath]), relpath
    changed = [p for p in new if (results / p).read_bytes() != old[p]]
    assert sorted(changed) == sorted(str(Path(d).relative_to(results)) for d in renames)
    # a failed batch takes its staged files back (a killed one leaves them, under names no reader
    # takes for a record, until the next write: tests/test_write_faults.py)
    assert list(results.rglob(".*.tmp")) == []


def test_a_grade_of_an_older_run_lands_mid_order_and_computes_the_views_again():
    run = ("run", 0, 0, 1, 10_000, "9.0.8", False)
    events = build([run, run, ("grade", 1, "pass", "1.0.0"), ("grade", 0, "fail", "1.0.0")]).events
    projector = Projector()
    views = Views.attach(projector)
    projector.apply(events[:-1])
    assert views.suite_metrics("1.0.0") == suite_metrics(projector.state, "1.0.0")
    projector.apply(events[-1:])
    assert views.suite_metrics("1.0.0") == suite_metrics(fold(events), "1.0.0")  # records in run order
    assert views.rebuilds == 2


def test_the_committed_ledger_folded_in_chunks_renders_as_a_rebuild(tmp_path):
    """The committed ledger holds every kind the synthetic ops do not (later feedback passes,
    attached cassettes, retractions, suite bumps, checkpoints, imports): folded in random chunks
    with the views attached, each output equals the one rebuilt from the events so far."""
    from cbledger.ledger.store import LedgerStore

    repo = Path(__file__).resolve().parent.parent
    items = list(LedgerStore(repo / "results" / "ledger" / "events.jsonl").read())
    kinds = {i.type for i in items}
    assert {"run.recorded", "grade.recorded", "run.retracted", "cassette.attached", "checkpoint.published"} <= kinds
    later = set(fold(items).later_passes)
    # the views are read right after each event about a later pass (before anything restarts them),
    # and after random chunks elsewhere
    must = {k + 1 for k, item in enumerate(items) if getattr(item.event.body, "run_id", None) in later}
    assert must
    rng = random.Random(1402)
    projector = Projector()
    views = Views.attach(projector)
    db = tmp_path / "cbledger.db"
    i = 0
    while i < len(items):
        n = rng.choice([1, 1, 2, 5, 40])
        n = min([n, *(m - i for m in must if m > i)])
        projector.apply(items[i:i + n])
        i += n
        if i not in must and rng.random() > 0.3 and i < len(items):
            continue  # not every chunk is read: the views catch up over several
        full = fold(items[:i])
        board, dump, files = full_outputs(full)
        assert leaderboard.render(projector.state, None, views) == board, f"after {i} events"
        changed = views.take_changes()
        if changed is None or not db.exists():
            readmodel.write(readmodel.stream_tables(projector.state, views), db)
        else:
            readmodel.update(db, projector.state, views, changed)
        assert readmodel.canonical_dump(db) == dump, f"after {i} events"
        assert rec.published(projector.state) == files
    assert any(r.passes for r in projector.state.later_passes.values() for r in [r.run])


def test_a_full_rebuild_puts_its_records_in_place_in_batches_each_file_old_or_new(tmp_path, monkeypatch):
    """A rebuild of millions of records held a name per staged file, and the staged files on
    disk, until its end: it commits every `STAGED_BATCH` files, each as whole as before."""
    results = tmp_path / "results"
    state = fold(build(expand([("pair", t % 4, t % 3, 1, 10_000, "9.0.8", False, "pass") for t in range(12)])).events)
    monkeypatch.setattr(writers, "STAGED_BATCH", 5)
    batches: list[int] = []
    real_commit = writers._commit_staged

    def counted(staged):
        batches.append(len(staged))
        real_commit(staged)

    monkeypatch.setattr(writers, "_commit_staged", counted)
    report = writers.sync_records(state, results)
    published = dict(rec.published(state))
    assert len(report.created) == len(published) > 10 and max(batches) == 5 and sum(batches) == len(published)
    assert {p: (results / p).read_bytes() for p in published} == published
    assert list(results.rglob(".*.tmp")) == []
