"""The aggregates LEADERBOARD.md and the read model are rendered from, kept current as events fold.

Why: rendering the leaderboard from the state walks every record several times (the partition,
each group's rows, the card, the billed lanes, the audit), which at 100k runs costs seconds,
while one new run changes a handful of tallies. `Views` holds those tallies (each in a step form,
`add` a record and read the result: `metrics.GroupAcc`, `card.CardAcc`, `judged.LanesAcc`,
`comparability.RefTally`) and a `Projector` tells it of every event it folds.

The rule that keeps it exact: a tally is only ever extended by records added at the END of the
record order (ledger order of the run) under an unchanged reference stamp, which is exactly what
a full computation over the longer list does. Anything else starts the views again from the
state, with the same `add`s over every record — so the incremental and the full path are one
code path, and `Views(state)` is the full rebuild:

* a new run and its first grades (the steady stream): extended;
* a later feedback pass and its grades: nothing to extend (no headline reads them), but its
  read-model rows are marked changed (`take_changes`);
* a duplicate or conflicting grade, an import, a checkpoint, pricing, a suite archive, a
  duplicate run: nothing to extend (what they show is read from the state's short lists);
* a rubric score or a review of a run already placed: its records' tallies take what adding the
  record after it would have counted (`SuiteViews.judge`: the first score, and a judge call's
  usage; every such figure is a count, an integer sum, a set or an `fsum`med list, so the order
  does not matter);
* a later feedback pass of an attempt whose pass 1 is placed: its spend is billed to that
  record's lane (`LanesAcc.bill_pass`), unless a pass before it was retracted;
* a suite bump of a version no record is graded under yet (the usual one, before its
  re-grades): nothing to extend (the reference it sets is read when that version's first
  record is placed);
* a grade for a run older than the suite's last record (it lands mid-order), a run whose grades,
  rubric scores, reviews or retraction were folded before it, a retraction, a bump of a version
  with records, or a record that moves the reference stamp (a majority hash, the schemaVersion,
  the kicad-cli major): start again.

Events are queued as they fold and applied when a view is read, so a burst costs one catch-up.
Views attached to a projector are computed when first read, so a projector resuming from a
snapshot that holds them adopts them instead (`adopt`; docs/PROJECTIONS.md, Snapshots).
"""

from __future__ import annotations

import gc
import pickle
from collections.abc import Iterable, Iterator
from typing import Any

from msgspec import UNSET

from cbledger.ledger import surfaces
from cbledger.ledger.events import (
    CheckpointPublishedEvent,
    EvidenceImportedEvent,
    GradeRecordedEvent,
    LaneUsage,
    LedgerCreatedEvent,
    PassRef,
    PricingPublishedEvent,
    ReviewRecordedEvent,
    RubricScored,
    RubricScoredEvent,
    RunRecordedEvent,
    SuiteArchivedEvent,
    SuiteBumpedEvent,
)
from cbledger.projections import spill
from cbledger.projections.card import CardAcc
from cbledger.projections.comparability import (
    MAIN,
    Reference,
    RefTally,
    kicad_diff,
    kicad_major,
    reference_from,
    reference_major,
    stamp_diffs,
)
from cbledger.projections.fold import LedgerState, PassEntry, Projector, RunEntry, semver_key
from cbledger.projections.isolation import why_unsandboxed
from cbledger.projections.judged import LanesAcc
from cbledger.projections.metrics import GroupAcc, SuiteMetrics
from cbledger.projections.provenance import real_model_run
from cbledger.projections.records import RecordEntry, is_replay, iter_record_entries, record_paths

#: events that change nothing a view tallies (their listings are read from the state)
_NEUTRAL = (EvidenceImportedEvent, LedgerCreatedEvent, PricingPublishedEvent, SuiteArchivedEvent)


#: more events than this since the last read are folded in by computing the views again
_CATCH_UP_LIMIT = 1000


class _Restart(Exception):
    """The events cannot be applied by extending the tallies: build them again from the state."""


def _named_before(st: LedgerState, run_id: str, seq: int) -> bool:
    """Was a grade, rubric score, review or retraction of this run folded before the run itself?
    (Events queued after it are applied in their turn.)"""
    return (
        any(g.seq < seq for g in st.grades.get(run_id, {}).values())
        or any(r.seq < seq for r in st.rubric.get(run_id, ()))
        or any(r.seq < seq for r in st.reviews.get(run_id, ()))
        or (run_id in st.retracted and st.retracted[run_id].seq < seq)
    )


def _keeps(old: Reference, new: Reference) -> bool:
    """Does every record placed under `old` stand where it was under `new`? A task seen for the
    first time adds its own reference and leaves the others' alone."""
    return (
        old.schema_version == new.schema_version
        and old.bump_seq == new.bump_seq
        and old.fixtures == new.fixtures
        and all(new.tasks[t] == ref for t, ref in old.tasks.items())
        and all(new.task_fixtures[t] == h for t, h in old.task_fixtures.items())
    )


def _first_score(state: LedgerState, run_id: str) -> float | None:
    items = state.rubric.get(run_id)
    return items[0].rubric.score if items else None


class _Records:
    """A suite's live records, read from a spilled state each time they are iterated."""

    def __init__(self, state: LedgerState, suite: str) -> None:
        self.state, self.suite = state, suite

    def __iter__(self) -> Iterator[RecordEntry]:
        return iter_record_entries(self.state, self.suite, build=False)


class SuiteViews:
    """One suite version's records in record order and every tally over them."""

    def __init__(self, state: LedgerState, suite: str, records: Iterable[RecordEntry]) -> None:
        """`records` is read three times (the reference is known only after the first read, the
        kicad-cli major after the second): a list, or for a spilled state a stream (`_Records`)."""
        self.suite = suite
        #: records placed (each is counted, none is held: a spilled state's records are on disk)
        self.records = 0
        self.tally = RefTally()
        self.majors_ok: dict[str, int] = {}  # kicad majors of the records matching every other stamp field
        self.majors_all: dict[str, int] = {}
        self.groups: dict[str, GroupAcc] = {}
        self.card = CardAcc()
        self.lanes = LanesAcc()
        self.last_run_seq = 0
        for r in records:
            self.tally.add(r)
        self.ref = reference_from(state, suite, self.tally)
        for r in records:
            self._count_major(r)
        self.major = self._major()
        for r in records:
            self._place(state, r)
        self._metrics: SuiteMetrics | None = None

    def _count_major(self, r: RecordEntry) -> None:
        m = kicad_major(r.kicad_cli_version)
        self.majors_all[m] = self.majors_all.get(m, 0) + 1
        if not stamp_diffs(self.ref, r):
            self.majors_ok[m] = self.majors_ok.get(m, 0) + 1

    def _major(self) -> str | None:
        return reference_major(self.majors_ok or self.majors_all)

    def _diffs(self, r: RecordEntry) -> list[tuple[str, str]]:
        return stamp_diffs(self.ref, r) + kicad_diff(self.major, r)

    def group_key(self, r: RecordEntry) -> str:
        """The comparability group of a record placed here: the reference and the major it was
        placed under still stand (`extend` starts again when they would move)."""
        diffs = self._diffs(r)
        return "; ".join(k for k, _ in diffs) if diffs else MAIN

    def _place(self, state: LedgerState, r: RecordEntry) -> None:
        diffs = self._diffs(r)
        key = "; ".join(k for k, _ in diffs) if diffs else MAIN
        group = self.groups.get(key)
        if group is None:
            reasons = [reason for _, reason in diffs]
            label = "; ".join(reasons) if diffs else "main comparability group"
            group = self.groups[key] = GroupAcc(key, not diffs, label, reasons)
        group.add(r, _first_score(state, r.run_id))
        self.card.add(state, r)
        self.lanes.add(state, r)
        self.records += 1
        self.last_run_seq = r.run.seq
        self._metrics = None

    def extend(self, state: LedgerState, r: RecordEntry) -> None:
        """Adds a record at the end of the order; raises `_Restart` if the reference moves."""
        if r.run.seq <= self.last_run_seq:
            raise _Restart
        self.tally.add(r)
        ref = reference_from(state, self.suite, self.tally)
        if self.records and not _keeps(self.ref, ref):
            raise _Restart
        self.ref = ref
        self._count_major(r)
        major = self._major()
        if self.records and major != self.major:
            raise _Restart
        self.major = major
        self._place(state, r)

    def judge(self, r: RecordEntry, first: RubricScored | None, usage: LaneUsage | None) -> None:
        """A rubric score or review of a record placed here already (`Views._judgement`)."""
        if first is not None:
            self.groups[self.group_key(r)].add_rubric(r, first.score)
            self.card.add_judge(first.judge_model)
        self.lanes.judge(r, first, usage)
        self._metrics = None

    def metrics(self) -> SuiteMetrics:
        if self._metrics is None:
            ref = self.ref
            groups = [self.groups[MAIN]] if MAIN in self.groups else []
            groups += [self.groups[k] for k in sorted(self.groups) if k != MAIN]
            self._metrics = SuiteMetrics(
                suite_version=self.suite,
                reference=Reference(
                    suite_version=ref.suite_version, schema_version=ref.schema_version, kicad_major=self.major,
                    bump_seq=ref.bump_seq, tasks=ref.tasks, fixtures=ref.fixtures, task_fixtures=ref.task_fixtures,
                ),
                records=self.records,
                groups=[g.result() for g in groups],
            )
        return self._metrics


class Views:
    """Every aggregate of a state; `Views(state)` computes them in full, `attach` keeps them
    current with a projector's folds (see the module docstring for when they start again)."""

    def __init__(self, state: LedgerState, *, deferred: bool = False) -> None:
        """`deferred`: computed when first read (`attach`), not now: a projector resuming from a
        snapshot that holds the aggregates hands them over first (`adopt`)."""
        self.state = state
        self._pending: list[Any] = []
        #: how many times the views were computed in full (1 for a fresh one)
        self.rebuilds = 0
        #: run ids whose rows can have changed since `take_changes` was last called; None: any
        self.changed: set[str] | None = None
        self._built = False
        if not deferred:
            self._build()

    @classmethod
    def attach(cls, projector: Projector, aggregates: bytes | None = None) -> Views:
        """Views kept current with what `projector` folds from now on: `aggregates` (a snapshot's,
        at the projector's seq) adopted, else computed from the state when first read."""
        views = cls(projector.state, deferred=True)
        if aggregates is not None:
            views.adopt(aggregates)
        projector.observers.append(views.observe)
        return views

    @property
    def built(self) -> bool:
        """Computed (or adopted) already: reading them costs nothing more."""
        return self._built

    def observe(self, event: Any) -> None:
        if self._built:  # before the first build, the build reads the state the event is in
            self._pending.append(event)

    # ------------------------------------------------------------------ a snapshot's

    def dumps(self) -> bytes:
        """The tallies, for a snapshot at the state's seq (`adopt` reads them back)."""
        self._catch_up()
        held = {k: v for k, v in self.__dict__.items() if k not in ("state", "_pending")}
        return pickle.dumps(held, protocol=pickle.HIGHEST_PROTOCOL)

    def adopt(self, data: bytes) -> None:
        """Takes the tallies `dumps` wrote for this state's seq (from a snapshot whose seal
        verified, made by this code: `snapshot.aggregates_version`) instead of computing them."""
        self.__dict__.update(pickle.loads(data))
        self._pending = []
        self.changed = None  # nothing was written from these tallies in this process
        self.rebuilds = 0  # nor were they computed in it

    @property
    def unsandboxed(self) -> dict[tuple[str, str, str], int]:
        self._catch_up()
        return self._unsandboxed

    @property
    def harness_versions(self) -> set[str | None]:
        self._catch_up()
        return self._harness_versions

    @property
    def attempt_firsts(self) -> list[str]:
        self._catch_up()
        return self._attempt_firsts

    @property
    def model_runs(self) -> int:
        """Runs a model answered (`provenance.real_model_run`), retracted ones included."""
        self._catch_up()
        return self._model_runs

    @property
    def anomaly_rows(self) -> list[list[str]]:
        """[seq, kind, detail] rows of the runs' and grades' anomalies that are not in `state.anomalies`."""
        self._catch_up()
        return self._anomaly_rows

    # ------------------------------------------------------------------ building

    def _build(self) -> None:
        """Every tally from the state. The cyclic collector is paused as `LedgerFollower.poll`
        pauses it, and for the same reason: the tallies are long-lived objects and make no cycles."""
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            self._build_all()
        finally:
            if was_enabled:
                gc.enable()

    def _build_all(self) -> None:
        st = self.state
        self._built = False  # until every pass is through: one that raised (a damaged table) leaves none half made
        self.rebuilds += 1
        self.changed = None
        self._pending = []
        spilled = spill.file_of(st.runs) is not None
        #: suite -> its records in record order (None for a spilled state: read again, `_Records`)
        per_suite: dict[str, list[RecordEntry] | None] = {}
        self.counts: dict[str, int] = {}
        self._unsandboxed: dict[tuple[str, str, str], int] = {}
        #: every copperhead version a run (retracted or not) was made under, and how many runs a model answered
        self._harness_versions: set[str | None] = set()
        self._model_runs = 0
        #: runs allowed more than one pass, in seq order (`passes_part.attempts` reads only these)
        self._attempt_firsts: list[str] = []
        #: [seq, kind, detail] rows of the runs' and grades' anomalies that are not in `state.anomalies`
        self._anomaly_rows: list[list[str]] = []
        for run_id, entry in st.runs.items():
            live = run_id not in st.retracted
            self._count_run(entry, live)
            if not live:
                continue
            for path, suite, graded in record_paths(st, run_id, entry):
                held = per_suite.setdefault(suite, None if spilled else [])
                if held is not None:
                    held.append(RecordEntry(path=path, run_id=run_id, suite_version=suite, run=entry, graded=graded))
                self.counts[suite] = self.counts.get(suite, 0) + 1
        for run_id, per_run in st.grades.items():
            if run_id not in st.runs and run_id not in st.later_passes:
                for suite, g in per_run.items():
                    self._anomaly_rows.append([str(g.seq), "grade-without-run", f"grade of unknown run {run_id} under {suite}"])
        for run_id, items in st.rubric.items():
            if run_id not in st.runs:
                self._anomaly_rows.append([str(items[0].seq), "rubric-without-run", f"rubric score of unknown run {run_id}"])
        self.suites = {suite: SuiteViews(st, suite, _Records(st, suite) if recs is None else recs)
                       for suite, recs in per_suite.items()}
        self._built = True

    def _count_run(self, entry: RunEntry, live: bool) -> None:
        self._harness_versions.add(entry.run.comparability.copperhead_version)
        if entry.run.passes and entry.run.passes.allowed >= 2:
            self._attempt_firsts.append(entry.run.run_id)
        self._model_runs += real_model_run(entry.run)
        why = why_unsandboxed(entry.run)
        if why is not None and live:
            key = (entry.run.model.id, entry.run.run_mode, why)
            self._unsandboxed[key] = self._unsandboxed.get(key, 0) + 1
        _, claimed = surfaces.named_surface(entry.run.surface, surfaces.run_surface(entry.run))
        if claimed is not None:
            self._anomaly_rows.append([str(entry.seq), "surface-mismatch",
                                      f"run {entry.run.run_id} names surface {claimed}; its route is {surfaces.run_surface(entry.run)}"])

    # ------------------------------------------------------------------ catching up

    def _catch_up(self) -> None:
        if not self._built:
            self._build()
            return
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        # many events are one computation in full, not a check per record; but not for a state on
        # disk, where the computation reads every record again three times (minutes at 10^7)
        if len(pending) > _CATCH_UP_LIMIT and spill.file_of(self.state.runs) is None:
            self._build()  # the same result, without a reference check per record
            return
        try:
            for event in pending:
                self._apply(event, pending[0].seq)
        except _Restart:
            self._build()

    def _apply(self, event: Any, batch: int) -> None:
        """`batch`: the seq of the first event this catch-up applies; a record placed in it read
        the state with every one of them folded already."""
        st = self.state
        if isinstance(event, CheckpointPublishedEvent):
            self.changed = None  # a checkpoint anchors the grade rows of every run it covers
            return
        if isinstance(event, _NEUTRAL):
            return
        if isinstance(event, RunRecordedEvent):
            run_id = event.body.run_id
            entry = st.runs.get(run_id)  # read once: on a spilled state each read is a lookup and a decode
            if entry is None:
                # a later feedback pass: no headline row reads it (`passes_part` reads the state);
                # the read model lists it, by row, and the billed lanes sum its spend into its
                # attempt's (`_bill_pass`)
                later = st.later_passes.get(run_id)
                if later is not None and later.seq == event.seq:
                    if any(g.seq < event.seq for g in st.grades.get(run_id, {}).values()):
                        raise _Restart  # its grade was tallied as one of an unknown run
                    self._bill_pass(later, batch)
                    self._touch(run_id)
                return
            if entry.seq != event.seq:
                return  # a duplicate run: listed from the state's anomalies
            if _named_before(st, run_id, event.seq):
                raise _Restart
            self._count_run(entry, True)
            self._touch(run_id)
            return
        if isinstance(event, GradeRecordedEvent):
            grade = event.body
            kept = st.grades[grade.run_id][grade.suite_version]
            if kept.seq != event.seq:
                return  # a duplicate or a conflict: the first grade stands
            entry = st.runs.get(grade.run_id)
            if entry is None and grade.run_id in st.later_passes:
                self._touch(grade.run_id)  # graded, as every pass is: its read-model rows change
                return
            if entry is None:
                self._anomaly_rows.append([str(kept.seq), "grade-without-run",
                                          f"grade of unknown run {grade.run_id} under {grade.suite_version}"])
                return
            if grade.run_id in st.retracted:
                raise _Restart
            path = next(p for p, suite, _ in record_paths(st, grade.run_id) if suite == grade.suite_version)
            rec = RecordEntry(path=path, run_id=grade.run_id, suite_version=grade.suite_version, run=entry, graded=kept)
            sv = self.suites.get(grade.suite_version)
            if sv is None:
                sv = self.suites[grade.suite_version] = SuiteViews(st, grade.suite_version, [])
            sv.extend(st, rec)
            self.counts[grade.suite_version] = self.counts.get(grade.suite_version, 0) + 1
            self._touch(grade.run_id)
            return
        if isinstance(event, (RubricScoredEvent, ReviewRecordedEvent)):
            self._judgement(event, batch)
            return
        if isinstance(event, SuiteBumpedEvent):
            placed = self.suites.get(event.body.suite_version)
            if placed is None or not placed.records:
                return  # a version no record is graded under yet (the usual bump): no tally reads it
        raise _Restart  # a retraction, a bump of a version with records, anything new

    def _bill_pass(self, later: PassEntry, batch: int) -> None:
        """A later pass's spend added to its attempt's records placed before this catch-up, as
        `LanesAcc.add` bills every live pass of the attempt (an integer sum, a flag and a dict
        of counts: the order does not matter). Behind a retracted pass of its attempt (or
        retracted itself before it came) it is not billed at all, which only the full computation
        tells apart (it starts again)."""
        st = self.state
        ref = later.run.passes
        if not isinstance(ref, PassRef) or ref.first is None or ref.first in st.retracted:
            return
        first = ref.first
        entry = st.runs.get(first)
        if entry is None or is_replay(entry):
            return  # not placed yet (it reads its passes when it is), or billed nothing
        # the full computation bills the attempt's passes in (index, run id) order up to the first
        # retracted one: this pass is billed alone only when none sorts at or before it
        here = (ref.index, later.run.run_id)
        ended = (st.later_passes.get(rid) for rid in st.retracted)
        if any(p is not None and isinstance(p.run.passes, PassRef) and p.run.passes.first == first
               and (p.run.passes.index, p.run.run_id) <= here for p in ended):
            raise _Restart
        for path, suite, graded in record_paths(st, first, entry):
            if graded.seq >= batch:
                continue  # placed in this catch-up: it read the state with this pass folded
            sv = self.suites.get(suite)
            if sv is None:
                raise _Restart
            sv.lanes.bill_pass(RecordEntry(path=path, run_id=first, suite_version=suite, run=entry, graded=graded),
                               later.run)
            sv._metrics = None

    def _judgement(self, event: RubricScoredEvent | ReviewRecordedEvent, batch: int) -> None:
        """A rubric score or a review: what each of its run's records placed before this catch-up
        counts of it (one placed in it, its grade at `batch` or later, read the state with this
        event folded, and counted it then; one folded before its run starts the views again when
        the run comes, `_named_before`)."""
        st = self.state
        run_id = event.body.run_id
        self._touch(run_id)
        first: RubricScored | None = None
        if isinstance(event, RubricScoredEvent):
            items = st.rubric.get(run_id) or []
            first = event.body if items and items[0].seq == event.seq else None
            usage = None if event.body.usage is UNSET else event.body.usage
            if run_id not in st.runs:
                if first is not None:
                    self._anomaly_rows.append([str(event.seq), "rubric-without-run", f"rubric score of unknown run {run_id}"])
                return
        else:
            usage = event.body.usage
        entry = st.runs.get(run_id)
        if entry is None or run_id in st.retracted or (first is None and usage is None):
            return
        for path, suite, graded in record_paths(st, run_id, entry):
            if graded.seq >= batch:
                continue
            rec = RecordEntry(path=path, run_id=run_id, suite_version=suite, run=entry, graded=graded)
            sv = self.suites.get(suite)
            if sv is None:  # not placed after all: computed again, never guessed
                raise _Restart
            sv.judge(rec, first, usage)

    def _touch(self, run_id: str) -> None:
        if self.changed is not None:
            self.changed.add(run_id)

    # ------------------------------------------------------------------ reading

    def suite(self, version: str) -> SuiteViews:
        self._catch_up()
        sv = self.suites.get(version)
        if sv is None:  # a version with no live record (a bump alone, or asked for by name)
            sv = SuiteViews(self.state, version, [])
        return sv

    def suite_metrics(self, version: str) -> SuiteMetrics:
        return self.suite(version).metrics()

    def record_counts(self) -> dict[str, int]:
        self._catch_up()
        return self.counts

    def suite_versions(self) -> list[str]:
        """`fold.suite_versions` from the tallies: every version bumped or with a live grade."""
        self._catch_up()
        seen = {entry.body.suite_version for entry in self.state.suites}
        seen.update(v for v, n in self.counts.items() if n)
        return sorted(seen, key=semver_key)

    def current_suite(self) -> str | None:
        if self.state.suites:
            return self.state.suites[-1].body.suite_version
        versions = self.suite_versions()
        return versions[-1] if versions else None

    def take_changes(self) -> set[str] | None:
        """The runs whose rows may differ since the last call (None: the views were rebuilt, so
        any row may), and start counting afresh."""
        self._catch_up()
        changed, self.changed = self.changed, set()
        return changed
