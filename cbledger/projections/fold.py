"""The fold engine: ledger events -> `LedgerState`, the one structure every view is derived from.

Why a single state rather than one fold per view: every view needs the same joins (run + its
grades + its retraction + its rubric), and doing them once keeps the views consistent with each
other by construction. The state holds facts keyed by id, in ledger order; interpretation
(which records exist, which share a table, what the rates are) happens in pure functions over
it, so the incremental path and the full rebuild cannot drift apart: `Projector.apply` is the
only code that changes a state, and a full rebuild is `apply` over every event.

Rules folded here (and nowhere else):

* A run is recorded once. A second `run.recorded` for a known run id is ignored and reported.
* Grades are keyed by (run, suiteVersion); the FIRST grade for a pair is kept forever, because a
  record is written once. A later grade for the pair with an identical body is a duplicate; with a
  different body it is a *grade conflict*, reported by the views and never silently replacing.
* `run.retracted` marks a run; every metric drops it (and its grades), the log keeps it, and its
  published records are kept and marked (`records.retraction_marks`).
* A feedback pass after the first is kept in `later_passes`, never in `runs`: every headline view
  reads `runs`, so the headline is pass 1 whatever passes followed (`passes_part.py` reads both).
* `cassette.attached` gives a run recorded before cassettes the one a re-execution recorded; the
  first for a run counts, and one for an unknown run, a run with its own cassette or a run
  already given one is ignored and reported. No metric reads it: it is for `replay --verify`.
* `checkpoint.published` is kept in order; `anchor.py` says which checkpoint a view is built from.
* A run's record ordinal is fixed when the run is folded (see `paths`).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any

import msgspec
from msgspec import Struct, field

from cbledger.ledger.events import (
    CassetteAttached,
    CassetteAttachedEvent,
    CheckpointPublishedEvent,
    EvidenceImported,
    EvidenceImportedEvent,
    GradeRecorded,
    GradeRecordedEvent,
    LedgerCreatedEvent,
    PricingPublished,
    PricingPublishedEvent,
    ReviewRecorded,
    ReviewRecordedEvent,
    RubricScored,
    RubricScoredEvent,
    RunRecorded,
    RunRecordedEvent,
    RunRetractedEvent,
    SpendUnrecorded,
    SpendUnrecordedEvent,
    SuiteArchived,
    SuiteArchivedEvent,
    SuiteBumped,
    SuiteBumpedEvent,
)
from cbledger.projections import paths, spill


class ProjectionError(ValueError):
    """The events handed to a fold cannot be folded (a gap, a draft without a seq)."""


class RunEntry(Struct, frozen=True, kw_only=True):
    seq: int
    run: RunRecorded
    date: str
    record_dir: str  # "<date>/<model-dir>/<task>", relative to results/
    ordinal: int


class PassEntry(Struct, frozen=True, kw_only=True):
    """A feedback pass after the first: a run of its own, graded and replayed like any, but not
    a record of its own nor a row of any headline table (pass 1 is the attempt's record)."""

    seq: int
    run: RunRecorded


class GradeEntry(Struct, frozen=True, kw_only=True):
    seq: int
    grade: GradeRecorded


class GradeConflict(Struct, frozen=True, kw_only=True):
    run_id: str
    suite_version: str
    kept_seq: int
    conflicting_seq: int
    fields: list[str]


class DuplicateGrade(Struct, frozen=True, kw_only=True):
    run_id: str
    suite_version: str
    kept_seq: int
    seq: int


class Retraction(Struct, frozen=True, kw_only=True):
    run_id: str
    seq: int
    reason: str


class RubricEntry(Struct, frozen=True, kw_only=True):
    seq: int
    rubric: RubricScored


class ReviewEntry(Struct, frozen=True, kw_only=True):
    seq: int
    review: ReviewRecorded


class AttachmentEntry(Struct, frozen=True, kw_only=True):
    seq: int
    body: CassetteAttached


class ImportEntry(Struct, frozen=True, kw_only=True):
    seq: int
    at: _dt.datetime
    actor: str
    body: EvidenceImported


class SuiteEntry(Struct, frozen=True, kw_only=True):
    seq: int
    at: _dt.datetime
    body: SuiteBumped


class ArchiveEntry(Struct, frozen=True, kw_only=True):
    seq: int
    body: SuiteArchived


class PricingEntry(Struct, frozen=True, kw_only=True):
    seq: int
    body: PricingPublished


class CheckpointEntry(Struct, frozen=True, kw_only=True):
    """A published checkpoint: it covers seq 1..tree_size and was recorded at `seq` (> tree_size)."""

    seq: int
    origin: str
    tree_size: int
    root_hash: str


class UnrecordedSpendEntry(Struct, frozen=True, kw_only=True):
    seq: int
    body: SpendUnrecorded
    #: who recorded it (`runner:cbledger-runner`, or a person's `cbledger append`)
    actor: str = ""


class Anomaly(Struct, frozen=True, kw_only=True):
    seq: int
    kind: str
    message: str


class LedgerState(Struct, kw_only=True):
    """Everything the views need, in ledger order. Mutated only by `Projector.apply`."""

    head_seq: int = 0
    head_hash: str | None = None
    last_at: _dt.datetime | None = None
    ledger_name: str | None = None
    suites: list[SuiteEntry] = field(default_factory=list)
    #: suite version -> the first `suite.archived` for it (a later, different one is an anomaly)
    archives: dict[str, ArchiveEntry] = field(default_factory=dict)
    pricing: list[PricingEntry] = field(default_factory=list)
    runs: MutableMapping[str, RunEntry] = field(default_factory=dict)
    #: run id -> a feedback pass after the first (`run.recorded.passes.index` > 1); never in `runs`
    later_passes: MutableMapping[str, PassEntry] = field(default_factory=dict)
    #: run id -> suite version -> the first grade for that pair (inner order = grading order)
    grades: MutableMapping[str, dict[str, GradeEntry]] = field(default_factory=dict)
    duplicate_grades: list[DuplicateGrade] = field(default_factory=list)
    conflicts: list[GradeConflict] = field(default_factory=list)
    retracted: dict[str, Retraction] = field(default_factory=dict)
    rubric: MutableMapping[str, list[RubricEntry]] = field(default_factory=dict)
    #: run id -> its reviews, in ledger order (report-only: no metric reads them)
    reviews: MutableMapping[str, list[ReviewEntry]] = field(default_factory=dict)
    imports: list[ImportEntry] = field(default_factory=list)
    #: run id -> the cassette attached to it (`cassette.attached`, the first that counts)
    attachments: MutableMapping[str, AttachmentEntry] = field(default_factory=dict)
    #: every `checkpoint.published`, in ledger order
    checkpoints: list[CheckpointEntry] = field(default_factory=list)
    #: (batch, run id) -> what a run killed with its driver spent (`spend.unrecorded`, the largest
    #: for the pair); `unrecorded_spend` leaves out a run a `run.recorded` of its batch holds
    unrecorded: dict[str, UnrecordedSpendEntry] = field(default_factory=dict)
    #: "<date>/<model-dir>/<task>" -> the highest ordinal handed out
    ordinals: dict[str, int] = field(default_factory=dict)
    anomalies: list[Anomaly] = field(default_factory=list)


#: the state's maps keyed by run id, with their value types: what grows with the ledger, and
#: goes to disk past a size (`Projector.grow`, `spill.py`) and into a snapshot in chunks
PER_RUN: tuple[tuple[str, Any], ...] = (
    ("runs", RunEntry), ("later_passes", PassEntry), ("grades", dict[str, GradeEntry]),
    ("rubric", list[RubricEntry]), ("reviews", list[ReviewEntry]), ("attachments", AttachmentEntry),
)


def _differing_fields(a: Struct, b: Struct) -> list[str]:
    out = []
    for name in a.__struct_fields__:
        if getattr(a, name) != getattr(b, name):
            out.append(name)
    return out


def _unpack(item: Any) -> tuple[Any, str | None]:
    """Accepts a `StoredEvent` (event + chain hash) or a bare, sequenced event."""
    event = getattr(item, "event", None)
    if event is not None and hasattr(item, "hash"):
        return event, item.hash
    return item, None


def _attachment_problem(st: LedgerState, body: CassetteAttached) -> str | None:
    entry = st.runs.get(body.run_id)
    if entry is None:
        return f"names run {body.run_id}, which no earlier run.recorded records"
    if entry.run.cassette is not msgspec.UNSET:
        return f"run {body.run_id} recorded its own cassette at seq {entry.seq}"
    if body.run_id in st.attachments:
        return f"run {body.run_id} was given a cassette at seq {st.attachments[body.run_id].seq}"
    return None


class Projector:
    """Folds events into a state and remembers the last seq folded.

    `apply` skips events it has already folded (so re-reading a whole ledger is harmless) and
    refuses a gap, because a state folded over a ledger with a hole would silently differ from a
    full rebuild.
    """

    def __init__(self, state: LedgerState | None = None) -> None:
        self.state = state if state is not None else LedgerState()
        #: called with each event once it is folded (`aggregates.Views.observe`)
        self.observers: list[Callable[[Any], None]] = []
        #: one copy of each value many runs and grades repeat (see `_compact_run`)
        self._shared: dict[Any, Any] = {}
        #: the scratch file the maps of `PER_RUN` moved to (`spill.py`), once they did
        self._spill: spill.SpillFile | None = None
        self._spill_at = spill.spill_at()
        if state is not None:
            self.grow()

    def grow(self) -> None:
        """Moves the maps of `PER_RUN` to disk once any holds `spill_at` entries
        (`spill.py`); called as they grow, and after a state is filled from a snapshot."""
        st = self.state
        if self._spill is None:
            self._spill = spill.file_of(st.runs)  # a state already spilled, handed to another projector
        if self._spill is not None or max(len(getattr(st, name)) for name, _ in PER_RUN) < self._spill_at:
            return
        self._spill = spill.SpillFile()
        for name, type_ in PER_RUN:
            setattr(st, name, spill.SpilledMap(self._spill, name, type_, getattr(st, name).items()))
        self._shared.clear()

    def _grow(self, grown: MutableMapping[str, Any]) -> None:
        if self._spill is None and len(grown) >= self._spill_at:
            self.grow()

    @property
    def last_seq(self) -> int:
        return self.state.head_seq

    def shared_run(self, entry: RunEntry) -> RunEntry:
        """A run decoded from a snapshot, given the sharing a fold gives (`_compact_run`): decoded,
        every run holds its own copy of every value, about twice the memory of the folded state."""
        return msgspec.structs.replace(entry, run=self._compact_run(entry.run), date=self._one(entry.date),
                                       record_dir=self._one(entry.record_dir))

    def shared_pass(self, entry: PassEntry) -> PassEntry:
        return msgspec.structs.replace(entry, run=self._compact_run(entry.run))

    def shared_grades(self, per_run: dict[str, GradeEntry]) -> dict[str, GradeEntry]:
        return {version: msgspec.structs.replace(graded, grade=self._compact_grade(graded.grade))
                for version, graded in per_run.items()}

    def apply(self, items: Iterable[Any]) -> int:
        """Folds `items` (StoredEvents or sequenced events) in order; returns how many were new."""
        n = 0
        st = self.state
        for item in items:
            event, hash_ = _unpack(item)
            seq = event.seq
            if seq <= st.head_seq:
                continue
            if seq != st.head_seq + 1:
                raise ProjectionError(
                    f"event seq {seq} does not follow the last folded seq {st.head_seq}"
                )
            self._fold_one(event)
            st.head_seq = seq
            st.head_hash = hash_
            st.last_at = event.at
            n += 1
            for observe in self.observers:
                observe(event)
        return n

    def _archive(self, seq: int, body: SuiteArchived) -> None:
        st = self.state
        archive = st.archives.get(body.suite_version)
        if archive is None:
            st.archives[body.suite_version] = ArchiveEntry(seq=seq, body=body)
        elif archive.body.definitions_hash != body.definitions_hash:
            st.anomalies.append(Anomaly(
                seq=seq, kind="archive-conflict",
                message=f"suite {body.suite_version}'s definitions were recorded at seq {archive.seq} with another "
                "hash; this one is ignored",
            ))

    def _attach(self, seq: int, body: CassetteAttached) -> None:
        st = self.state
        problem = _attachment_problem(st, body)
        if problem is None:
            st.attachments[body.run_id] = AttachmentEntry(seq=seq, body=body)
            self._grow(st.attachments)
        else:
            st.anomalies.append(Anomaly(seq=seq, kind="cassette-not-attached", message=f"cassette.attached {problem}; ignored"))

    def _one(self, value: Any) -> Any:
        if self._spill is not None:  # a spilled state's entries are on disk: nothing to share, nothing to keep
            return value
        try:
            return self._shared.setdefault(value, value)
        except TypeError:  # holds a list (a task's tags, a tool subset): keyed by its encoding
            return self._shared.setdefault((type(value), msgspec.json.encode(value)), value)

    def _compact_run(self, run: RunRecorded) -> RunRecorded:
        """The run with the values other runs repeat (its task, fixture, model, stamp, condition,
        cost and seed) replaced by the one copy already held: equal values, so every view is the
        same, in about half the memory (a decoded event holds its own copy of every string, and
        a 1M-event state is mostly those). A spilled state keeps none: its runs are on disk."""
        if self._spill is not None:
            return run
        one = self._one
        sb = run.sandbox
        return msgspec.structs.replace(
            run, task=one(run.task), fixture=one(run.fixture), model=one(run.model),
            comparability=one(run.comparability), ablations=one(run.ablations), cost=one(run.cost),
            sandbox=msgspec.structs.replace(sb, seed_sha=one(sb.seed_sha), seed_config=one(sb.seed_config),
                                            baseline_sha=one(sb.baseline_sha)),
        )

    def _compact_grade(self, grade: GradeRecorded) -> GradeRecorded:
        """`_compact_run` for a grade: its assertion outcomes are mostly the same as other runs' of
        the task, and its versions and manifest hash those of every grade of the suite."""
        if self._spill is not None:
            return grade
        one = self._one
        return msgspec.structs.replace(
            grade, suite_version=one(grade.suite_version), grader_version=one(grade.grader_version),
            task_manifest_hash=one(grade.task_manifest_hash), assertions=[one(a) for a in grade.assertions],
        )

    def _fold_one(self, event: Any) -> None:
        st = self.state
        seq = event.seq
        if isinstance(event, RunRecordedEvent):
            run = self._compact_run(event.body)
            earlier = st.runs.get(run.run_id) or st.later_passes.get(run.run_id)
            if earlier is not None:
                st.anomalies.append(
                    Anomaly(
                        seq=seq,
                        kind="duplicate-run",
                        message=f"run {run.run_id} was already recorded at seq "
                        f"{earlier.seq}; this one is ignored",
                    )
                )
                return
            if run.passes and run.passes.index > 1:
                st.later_passes[run.run_id] = PassEntry(seq=seq, run=run)
                self._grow(st.later_passes)
                return
            date = paths.run_date(run.timings.started_at)
            key = paths.run_dir(date, run.model.id, run.task.id)
            ordinal = st.ordinals.get(key, 0) + 1
            st.ordinals[key] = ordinal
            st.runs[run.run_id] = RunEntry(seq=seq, run=run, date=self._one(date), record_dir=self._one(key), ordinal=ordinal)
            self._grow(st.runs)
        elif isinstance(event, GradeRecordedEvent):
            grade = self._compact_grade(event.body)
            per_run = st.grades.get(grade.run_id) or {}
            kept = per_run.get(grade.suite_version)
            if kept is None:
                per_run[grade.suite_version] = GradeEntry(seq=seq, grade=grade)
                st.grades[grade.run_id] = per_run  # a spilled map holds a copy: written back
                self._grow(st.grades)
            elif kept.grade == grade:
                st.duplicate_grades.append(
                    DuplicateGrade(
                        run_id=grade.run_id,
                        suite_version=grade.suite_version,
                        kept_seq=kept.seq,
                        seq=seq,
                    )
                )
            else:
                st.conflicts.append(
                    GradeConflict(
                        run_id=grade.run_id,
                        suite_version=grade.suite_version,
                        kept_seq=kept.seq,
                        conflicting_seq=seq,
                        fields=_differing_fields(kept.grade, grade),
                    )
                )
        elif isinstance(event, RunRetractedEvent):
            body = event.body
            if body.run_id not in st.retracted:
                st.retracted[body.run_id] = Retraction(run_id=body.run_id, seq=seq, reason=body.reason)
        elif isinstance(event, CassetteAttachedEvent):
            self._attach(seq, event.body)
        elif isinstance(event, RubricScoredEvent):
            rid = event.body.run_id
            st.rubric[rid] = [*st.rubric.get(rid, ()), RubricEntry(seq=seq, rubric=event.body)]  # written back whole
            self._grow(st.rubric)
        elif isinstance(event, ReviewRecordedEvent):
            rid = event.body.run_id
            st.reviews[rid] = [*st.reviews.get(rid, ()), ReviewEntry(seq=seq, review=event.body)]
            self._grow(st.reviews)
        elif isinstance(event, EvidenceImportedEvent):
            st.imports.append(
                ImportEntry(seq=seq, at=event.at, actor=event.actor.name, body=event.body)
            )
        elif isinstance(event, SuiteBumpedEvent):
            st.suites.append(SuiteEntry(seq=seq, at=event.at, body=event.body))
        elif isinstance(event, SuiteArchivedEvent):
            self._archive(seq, event.body)
        elif isinstance(event, PricingPublishedEvent):
            st.pricing.append(PricingEntry(seq=seq, body=event.body))
        elif isinstance(event, CheckpointPublishedEvent):
            b = event.body
            st.checkpoints.append(
                CheckpointEntry(seq=seq, origin=b.origin, tree_size=b.tree_size, root_hash=b.root_hash)
            )
        elif isinstance(event, SpendUnrecordedEvent):
            key = unrecorded_key(event.body.batch, event.body.run_id)
            journaled = st.unrecorded.get(key)
            if journaled is None or event.body.usd_micros > journaled.body.usd_micros:  # the journal's figure only grows
                st.unrecorded[key] = UnrecordedSpendEntry(seq=seq, body=event.body,
                                                          actor=f"{event.actor.kind}:{event.actor.name}")
        elif isinstance(event, LedgerCreatedEvent) and st.ledger_name is None:
            st.ledger_name = event.body.name


def any_run(state: LedgerState, run_id: str) -> RunEntry | PassEntry | None:
    """A run by id, whether the first pass of its attempt (`runs`) or a later one."""
    return state.runs.get(run_id) or state.later_passes.get(run_id)


def unrecorded_key(batch: str | None, run_id: str) -> str:
    return f"{batch or ''} {run_id}"


def unrecorded_spend(state: LedgerState) -> list[UnrecordedSpendEntry]:
    """What runs killed with their driver spent, in ledger order, leaving out a run recorded after
    all (its `run.recorded` of the same batch holds its cost): each billed call counted once."""
    out = []
    for entry in state.unrecorded.values():
        run = any_run(state, entry.body.run_id)
        if run is None or run.run.batch != entry.body.batch:
            out.append(entry)
    return sorted(out, key=lambda e: e.seq)  # a larger figure replaces an entry where it first stood


def fold(items: Iterable[Any]) -> LedgerState:
    """A full rebuild: a fresh state with every event applied."""
    projector = Projector()
    projector.apply(items)
    return projector.state


# --------------------------------------------------------------------------- suite versions


def semver_key(version: str) -> tuple[int, int, int]:
    major, minor, patch = version.split(".")
    return int(major), int(minor), int(patch)


def suite_versions(state: LedgerState) -> list[str]:
    """Every suite version that has a bump or a live grade, oldest first."""
    seen = {entry.body.suite_version for entry in state.suites}
    for run_id, per_run in state.grades.items():
        if run_id in state.retracted or run_id not in state.runs:
            continue
        seen.update(per_run)
    return sorted(seen, key=semver_key)


def current_suite(state: LedgerState) -> str | None:
    """The latest `suite.bumped` (in ledger order); with none, the highest graded version."""
    if state.suites:
        return state.suites[-1].body.suite_version
    versions = suite_versions(state)
    return versions[-1] if versions else None


def suite_bump(state: LedgerState, version: str) -> SuiteEntry | None:
    """The latest bump that declared `version` (a re-declaration supersedes the earlier one)."""
    found = None
    for entry in state.suites:
        if entry.body.suite_version == version:
            found = entry
    return found
