"""The fold engine: incremental equals full rebuild, ledger-order rules, suite versions."""

from __future__ import annotations

import itertools
import random

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cbledger.ledger.events import PassRef, SpendUnrecorded, SpendUnrecordedEvent
from cbledger.ledger.store import LedgerStore
from cbledger.projections import gate, leaderboard, readmodel, records, spill
from cbledger.projections.fold import (
    LedgerState,
    ProjectionError,
    Projector,
    current_suite,
    fold,
    suite_versions,
)
from cbledger.projections.writers import LedgerFollower, load_state
from tests.factories import MAINTAINER, Stream, rich_stream


def canonical(state):
    """The state's bytes, keys sorted: two folds are the same when these are."""
    return msgspec.json.encode(state, order="sorted", enc_hook=spill.enc_hook)


TASKS = [("t-simple", "simple", "edit"), ("t-medium", "medium", "refusal"), ("t-hard", "hard", "edit"),
         ("t-variant", "simple", "edit")]
MODELS = ["vendor:a", "cheap:b", "claude-code", "harness:gold", "harness:noop"]

#: a later feedback pass of an earlier run, graded or not yet (the fold keeps it out of `runs`)
later = st.tuples(st.just("later"), st.integers(0, 50), st.sampled_from(["pass", "fail", None]),
                  st.sampled_from(["1.0.0", "1.1.0"]))

op = st.one_of(
    st.tuples(st.just("run"), st.integers(0, 3), st.integers(0, 4), st.integers(1, 3),
              st.sampled_from([None, 0, 10_000, 250_000]), st.sampled_from(["9.0.8", "8.0.1", None]),
              st.booleans()),
    st.tuples(st.just("grade"), st.integers(0, 50), st.sampled_from(["pass", "fail"]), st.sampled_from(["1.0.0", "1.1.0", "1.10.0"])),
    st.tuples(st.just("retract"), st.integers(0, 50)),
    st.tuples(st.just("rubric"), st.integers(0, 50), st.floats(0, 1)),
    st.tuples(st.just("judged"), st.integers(0, 50), st.integers(0, 5)),
    st.tuples(st.just("review"), st.integers(0, 50), st.sampled_from([None, 0, 7])),
    st.tuples(st.just("bump"), st.sampled_from(["1.0.0", "1.1.0", "2.0.0"])),
    st.tuples(st.just("import"),),
    later,
)


def build(ops) -> Stream:
    s = Stream()
    s.task("t-simple", tier="simple")
    s.task("t-medium", tier="medium", outcome="refusal")
    s.task("t-hard", tier="hard")
    s.task("t-variant", tier="simple", variant_of="t-simple")
    runs: list[str] = []
    #: pass 1's run id -> the run id of its last pass so far, and that pass's index
    attempts: dict[str, tuple[str, int]] = {}
    made: dict[str, tuple[str, str]] = {}  # run id -> task, model
    for o in ops:
        kind = o[0]
        if kind == "run":
            _, ti, mi, rep, usd, kicad, stale = o
            model = MODELS[mi]
            seg = {"cheap:b": "api-cheap", "claude-code": "saved-login"}.get(model)
            runs.append(s.run(TASKS[ti][0], model, repeat=rep, usd_micros=usd if model != "claude-code" else None,
                              segment=seg, kicad=kicad, manifest="0" * 64 if stale else None,
                              exit_path="refused" if rep == 3 else "done"))
            made[runs[-1]] = (TASKS[ti][0], model)
        elif kind == "later" and runs:  # a later feedback pass of a run, graded unless verdict is None
            _, ri, verdict, suite = o
            first = runs[ri % len(runs)]
            previous, index = attempts.get(first, (first, 1))
            task_id, model = made[first]
            rid = s.run(task_id, model, passes=PassRef(index=index + 1, allowed=index + 1, first=first,
                                                       previous=previous, hints=["a hint"] * index))
            attempts[first] = (rid, index + 1)
            if verdict is not None:
                s.grade(rid, verdict, suite=suite, category="wrong-target")
        elif kind == "grade" and runs:
            _, ri, verdict, suite = o
            graded = runs + [rid for rid, _ in attempts.values()]
            s.grade(graded[ri % len(graded)], verdict, suite=suite, category="wrong-target")
        elif kind == "retract" and runs:
            targets = runs + [rid for rid, _ in attempts.values()]
            rid = targets[o[1] % len(targets)]
            if not any(getattr(e.body, "run_id", None) == rid and e.__struct_config__.tag == "run.retracted" for e in s.events):
                s.retract(rid)
        elif kind == "rubric" and runs:
            s.rubric(runs[o[1] % len(runs)], o[2])
        elif kind == "judged" and runs:  # as `cbledger judge` records: criteria and the judge lane's usage
            s.rubric(runs[o[1] % len(runs)], judged=o[2])
        elif kind == "review" and runs:
            s.review(runs[o[1] % len(runs)], billed=o[2])
        elif kind == "bump":
            s.suite(o[1])
        elif kind == "import":
            s.imported()
    return s


def views(state: LedgerState) -> tuple:
    return (
        canonical(state),
        leaderboard.render(state),
        gate.render_snapshot(gate.build_snapshot(state)),
        readmodel.canonical_dump_tables(readmodel.build_tables(state)),
        [(e.path, records.render(e.record)) for e in records.record_entries(state)],
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, max_size=40), cuts=st.lists(st.integers(0, 200), max_size=8))
def test_incremental_folds_in_random_chunks_equal_a_full_rebuild(ops, cuts):
    events = build(ops).events
    full = fold(events)
    projector = Projector()
    bounds = sorted({c % (len(events) + 1) for c in cuts} | {0, len(events)})
    for lo, hi in itertools.pairwise(bounds):
        projector.apply(events[lo:hi])
        assert projector.last_seq == hi
    assert views(projector.state) == views(full)


def test_incremental_reads_of_a_real_ledger_equal_a_full_rebuild(tmp_path):
    rng = random.Random(20260906)
    drafts = rich_stream().drafts()
    path = tmp_path / "events.jsonl"
    store = LedgerStore(path)
    store.init("projection-test", MAINTAINER)
    follower = LedgerFollower(path)
    i = 1
    while i < len(drafts):
        n = rng.randint(1, 25)
        store.append(drafts[i:i + n])
        i += n
        follower.poll()
    assert follower.poll() == 0
    full = load_state(path)
    assert views(follower.state) == views(full)
    head = store.head()
    assert (full.head_seq, full.head_hash) == (head.seq, head.hash)
    # the same events folded without the file give the same views, bar the chain hash
    bare = fold(rich_stream().events)
    assert bare.head_seq == full.head_seq and bare.head_hash is None


def test_follower_refuses_a_file_rewritten_underneath(tmp_path):
    path, other_path = tmp_path / "events.jsonl", tmp_path / "other.jsonl"
    store = LedgerStore(path)
    store.init("one", MAINTAINER)
    store.append(rich_stream().drafts()[1:5])
    follower = LedgerFollower(path)
    follower.poll()
    other = LedgerStore(other_path)
    other.init("two", MAINTAINER)
    other.append(rich_stream().drafts()[1:8])
    data = other_path.read_bytes()
    path.write_bytes(data)  # same length prefix, different chain
    with pytest.raises(ProjectionError):
        follower.poll()
    # a file that no longer has a line boundary where the follower stopped
    follower = LedgerFollower(other_path)
    follower.poll()
    other_path.write_bytes(b"x" + data + data[:40] + b"\n")
    with pytest.raises(ProjectionError):
        follower.poll()


def test_apply_skips_what_it_has_seen_and_refuses_a_gap():
    events = rich_stream().events
    p = Projector()
    assert p.apply(events[:10]) == 10
    assert p.apply(events[:12]) == 2
    before = canonical(p.state)
    assert p.apply(events[:12]) == 0 and canonical(p.state) == before
    with pytest.raises(ProjectionError):
        p.apply(events[13:14])


def test_retracted_runs_drop_out_of_every_view_but_stay_in_the_state():
    s = Stream()
    keep = s.graded_run("t")
    gone = s.graded_run("t", verdict="fail", repeat=2)
    s.rubric(gone)
    s.retract(gone)
    state = fold(s.events)
    assert gone in state.runs and gone in state.grades
    assert [e.run_id for e in records.record_entries(state)] == [keep]
    tables = {t.name: t for t in readmodel.build_tables(state)}
    assert [r["run_id"] for r in tables["runs"].rows] == [keep]
    assert [r["run_id"] for r in tables["retractions"].rows] == [gone]
    assert not tables["rubric_scores"].rows
    snap = gate.build_snapshot(state)
    assert [(r.runs, r.passes) for r in snap.suites[0].rows] == [(1, 1)]


def test_identical_regrade_is_a_duplicate_and_a_different_one_a_conflict():
    s = Stream()
    rid = s.graded_run("t")
    first = s.events[-1]
    import msgspec

    s.events.append(msgspec.structs.replace(first, seq=len(s.events) + 1, id="grade-again"))
    s.grade(rid, "fail", category="stalled")
    state = fold(s.events)
    assert len(state.duplicate_grades) == 1 and len(state.conflicts) == 1
    c = state.conflicts[0]
    assert (c.kept_seq, c.conflicting_seq) == (first.seq, len(s.events))
    assert "verdict" in c.fields and "failure_category" in c.fields
    assert state.grades[rid]["1.0.0"].seq == first.seq


def test_current_suite_is_the_latest_bump_else_the_highest_graded_version():
    s = Stream()
    s.graded_run("t", suite="1.9.0")
    s.graded_run("t", suite="1.10.0")
    s.graded_run("t", suite="1.2.0")
    assert current_suite(fold(s.events)) == "1.10.0"
    assert suite_versions(fold(s.events)) == ["1.2.0", "1.9.0", "1.10.0"]
    s.suite("1.9.0")  # the latest bump wins even when it is not the highest version
    assert current_suite(fold(s.events)) == "1.9.0"
    assert current_suite(fold(Stream().events)) is None


def test_a_second_run_recorded_with_a_known_id_is_ignored_and_reported():
    s = Stream()
    rid = s.graded_run("t")
    s.run("t", run_id=rid, usd_micros=1)
    state = fold(s.events)
    assert state.runs[rid].run.cost.usd_micros == 100_000
    assert [a.kind for a in state.anomalies] == ["duplicate-run"]


def test_spend_no_run_records_is_each_killed_runs_largest_figure_and_never_a_recorded_runs():
    """`spend.unrecorded` is what a run killed with its driver spent (the spend journal's figure,
    which only grows); a run recorded after all, in the same batch, holds its own cost."""
    from cbledger.ledger.events import SpendUnrecorded, SpendUnrecordedEvent
    from cbledger.projections.fold import unrecorded_spend

    s = Stream()
    s.task("rename-net")
    recorded = s.graded_run("rename-net", batch="b1", run_id="c.rename-net-s1-a1")

    def spend(run_id: str, batch: str, micros: int) -> None:
        s._add(SpendUnrecordedEvent, SpendUnrecorded(campaign="c", run_id=run_id, batch=batch, model="vendor:model-a",
                                                     usd_micros=micros), id=f"spend.unrecorded:{run_id}:{batch}:{micros}")

    spend("c.rename-net-s2-a1", "b1", 200_000)
    spend("c.rename-net-s2-a1", "b1", 300_000)  # the journal grew after the interrupt recorded it
    spend("c.rename-net-s2-a1", "b1", 100_000)  # an older figure recorded late
    spend(recorded, "b1", 50_000)  # recorded after all: its cost is the run's
    spend(recorded, "b0", 70_000)  # the same slot killed in an earlier invocation: billed too
    state = fold(s.events)
    assert [(e.body.run_id, e.body.batch, e.body.usd_micros) for e in unrecorded_spend(state)] == [
        ("c.rename-net-s2-a1", "b1", 300_000), (recorded, "b0", 70_000)]


def test_verify_says_which_spend_no_evidence_re_derives_and_who_recorded_it():
    """A figure appended by hand passed `replay --verify` without a word."""
    from cbledger.reproduce.verify import _operators_figures

    s = rich_stream()
    s._add(SpendUnrecordedEvent, SpendUnrecorded(campaign="nope", run_id="made-up-run", batch=None, model="vendor:x",
                                                 usd_micros=7_000_000), id="spend.unrecorded:hand", actor=MAINTAINER)
    (note,) = _operators_figures(fold(s.events))
    assert note.kind == "spend-not-rederived" and note.message.startswith("2 spend.unrecorded figure(s), $7.0400 in all")
    assert f"maintainer:{MAINTAINER.name}" in note.message and "runner:" in note.message
