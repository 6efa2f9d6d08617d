"""The SQLite read model: the views as tables, for ad-hoc questions and browsing.

`build_tables` is pure (state -> rows, sorted by primary key); `write` is the only I/O: it builds
a new database file beside the target and `os.replace`s it in, so a reader never sees a half-built
model. Browse it read-only with `datasette serve --immutable results/cbledger.db` (datasette is an
optional extra: `pip install '.[browse]'`).

Each table is declared once, as a list of (column, type, getter) specs over one kind of source
item (a run, a grade, a leaderboard row, ...): the column types, the column order and every row
come from that one list, so a column cannot be added to the rows and forgotten in the schema.

Every table's links to `runs` are declared foreign keys and the columns people filter on are
indexed (`FOREIGN_KEYS`, `INDEXES`); `metadata` is datasette's metadata for the database (titles,
descriptions, canned queries), written beside it as `cbledger.metadata.json`:
`datasette serve --immutable results/cbledger.db -m results/cbledger.metadata.json`.

`canonical_dump` renders a database's content (not its bytes: SQLite page layout is not a
contract) as text with tables, columns, foreign keys, indexes and rows in a fixed order; `canonical_dump_tables` renders
freshly built tables the same way, so `replay --verify` can compare a committed read model with
a regeneration.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeAlias, TypeVar

import sqlite_utils
from blake3 import blake3
from msgspec import Struct

from cbledger.ledger.durable import naming, remove_dead_temps, sqlite_naming, temp_name
from cbledger.ledger.events import SCHEMA_VERSION, AssertionOutcome, PassRef
from cbledger.projections import anchor, readmodel_docs
from cbledger.projections import format as fmt
from cbledger.projections.aggregates import Views
from cbledger.projections.conditions import DEFAULT, condition_key
from cbledger.projections.fold import (
    CheckpointEntry,
    GradeConflict,
    GradeEntry,
    ImportEntry,
    LedgerState,
    PassEntry,
    Retraction,
    RubricEntry,
    RunEntry,
    UnrecordedSpendEntry,
    any_run,
    unrecorded_spend,
)
from cbledger.projections.isolation import isolation
from cbledger.projections.metrics import (
    AblationRow,
    GroupMetrics,
    RowMetrics,
    SuiteMetrics,
)
from cbledger.projections.records import (
    RecordEntry,
    in_model_metrics,
    is_harness,
    is_replay,
    is_scripted,
    not_the_models,
    record_paths,
    retraction_marks,
    usd_from_micros,
)
from cbledger.projections.site import paths as site_paths
from cbledger.workspace import SITE as SITE_DIR
from cbledger.workspace import checkpoint_name, record_name


class Table(Struct, frozen=True, kw_only=True):
    name: str
    columns: dict[str, type]
    pk: tuple[str, ...]
    rows: list[dict[str, Any]]


@dataclass(frozen=True)
class LazyTable:
    """A table whose rows (as tuples in column order) are produced while it is written."""

    name: str
    columns: dict[str, type]
    pk: tuple[str, ...]
    tuples: Iterator[tuple[Any, ...]]


Source = TypeVar("Source")
#: One column: its name, its SQL type (as the Python type sqlite-utils maps) and how to read its
#: value from one source item.
Column: TypeAlias = tuple[str, type, Callable[[Source], Any]]


@dataclass(frozen=True, slots=True)
class TableSpec(Generic[Source]):
    name: str
    pk: tuple[str, ...]
    columns: tuple[Column[Source], ...]

    def stream(self, sources: Iterable[Source]) -> LazyTable:
        """The table with its rows made as they are written (`write`), never all held at once."""
        getters = [get for _, _, get in self.columns]
        return LazyTable(
            name=self.name, columns={name: tp for name, tp, _ in self.columns}, pk=self.pk,
            tuples=(tuple(get(item) for get in getters) for item in sources),
        )

    def build(self, sources: Iterable[Source]) -> Table:
        rows = [{name: get(item) for name, _, get in self.columns} for item in sources]
        return Table(
            name=self.name,
            columns={name: tp for name, tp, _ in self.columns},
            pk=self.pk,
            rows=sorted(rows, key=lambda r: tuple(r[k] for k in self.pk)),
        )


# --------------------------------------------------------------------------- source items


class _Meta(NamedTuple):
    key: str
    value: str


class _Graded(NamedTuple):
    """One (run, suite version) grade, with where its record lives and its comparability group."""

    run_id: str
    suite_version: str
    entry: GradeEntry
    record_path: str
    group_key: str
    checkpoint: CheckpointEntry | None  # the first checkpoint covering the record's run and grade


class _Outcome(NamedTuple):
    run_id: str
    suite_version: str
    position: int
    assertion: AssertionOutcome


class _BoardRow(NamedTuple):
    suite_version: str
    group: GroupMetrics
    row: RowMetrics


class _AblationRow(NamedTuple):
    suite_version: str
    group: GroupMetrics
    row: AblationRow


class _Retracted(NamedTuple):
    retraction: Retraction
    records: list[str]
    mark: str | None
    #: what the run cost (a retraction takes it out of every figure, not off the bill); None for a
    #: replay, which bills nothing
    usd_micros: int | None


class _Incomparable(NamedTuple):
    record: RecordEntry
    group_key: str
    reasons: list[str]


class _Rubric(NamedTuple):
    run_id: str
    entry: RubricEntry


class _LaterPass(NamedTuple):
    """A feedback pass after the first under one suite version it was graded under, or, until it
    is graded, under the suite version it ran under with no grade."""

    run_id: str
    suite_version: str
    entry: PassEntry
    ref: PassRef
    graded: GradeEntry | None


class _Named(NamedTuple):
    """A task or a model with the tallies of its live runs: every run, the agent runs, and the
    agent runs graded under the current suite version with their passes."""

    name: str
    entry: RunEntry  # its latest live run, for the fields a run records about it
    runs: int
    agent_runs: int
    suite_runs: int
    suite_passes: int
    others: int  # distinct models of a task's agent runs, or tasks of a model's
    usd_micros: int | None  # all USD of its agent runs; None when any of them is uncosted
    uncosted_runs: int


class _NamedTally:
    """One task's or model's figures, added a run at a time in ledger order (no run is held:
    a spilled state's runs are read once, from disk)."""

    def __init__(self) -> None:
        self.latest: RunEntry | None = None
        self.latest_agent: RunEntry | None = None
        self.runs = self.agent_runs = self.suite_runs = self.suite_passes = self.uncosted = self.micros = 0
        self.others: set[str] = set()


def _named(state: LedgerState, views: Views, key: Callable[[RunEntry], str],
           other: Callable[[RunEntry], str], *, from_model_runs: bool = False) -> list[_Named]:
    """`from_model_runs`: what a row says of its subject comes from its latest agent run (a model's
    provider and segment, which a session script under the same id states otherwise), else from
    its latest run of any kind (a task's tier and fixture, as the newest run records them)."""
    suite = views.current_suite()
    groups: dict[str, _NamedTally] = {}
    for rid, e in _Live(state).items():  # in seq order: the last seen is the latest
        t = groups.get(key(e))
        if t is None:
            t = groups[key(e)] = _NamedTally()
        t.runs += 1
        t.latest = e
        if not in_model_metrics(e):
            continue
        t.agent_runs += 1
        t.latest_agent = e
        t.others.add(other(e))
        if e.run.cost.usd_micros is None:
            t.uncosted += 1
        else:
            t.micros += e.run.cost.usd_micros
        # the current suite's figures are the default condition's, as a LEADERBOARD.md row's are
        graded = (state.grades.get(rid) or {}).get(suite) if suite is not None else None
        if graded is not None and condition_key(e.run.ablations) == DEFAULT:
            t.suite_runs += 1
            t.suite_passes += graded.grade.verdict == "pass"
    out = []
    for name, t in sorted(groups.items()):
        latest = (t.latest_agent if from_model_runs else None) or t.latest
        assert latest is not None  # a group has a run
        out.append(_Named(
            name=name, entry=latest, runs=t.runs, agent_runs=t.agent_runs, suite_runs=t.suite_runs,
            suite_passes=t.suite_passes, others=len(t.others), usd_micros=None if t.uncosted else t.micros,
            uncosted_runs=t.uncosted,
        ))
    return out


def _by_task(e: RunEntry) -> str:
    return e.run.task.id


def _by_model(e: RunEntry) -> str:
    return e.run.model.id


# --------------------------------------------------------------------------- the tables


def _run_kind(e: RunEntry) -> str:
    if not_the_models(e):
        return "not-the-model"
    if is_scripted(e):
        return "scripted"
    return "harness" if is_harness(e) else ("replay" if is_replay(e) else "agent")


def _usd(micros: Fraction | None) -> float | None:
    return usd_from_micros(round(micros)) if micros is not None else None


def _cost_per_pass_usd(r: RowMetrics) -> float | None:
    return _usd(r.cost_per_pass_micros)


def _float_or_none(x: Fraction | None) -> float | None:
    return float(x) if x is not None else None


META: TableSpec[_Meta] = TableSpec("meta", ("key",), (
    ("key", str, lambda m: m.key),
    ("value", str, lambda m: m.value),
))

RUNS: TableSpec[RunEntry] = TableSpec("runs", ("run_id",), (
    ("run_id", str, lambda e: e.run.run_id),
    ("seq", int, lambda e: e.seq),
    ("task_id", str, lambda e: e.run.task.id),
    ("tier", str, lambda e: e.run.task.tier),
    ("mode", str, lambda e: e.run.task.mode),
    ("expected_outcome", str, lambda e: e.run.task.expected_outcome),
    ("variant_of", str, lambda e: e.run.task.variant_of),
    ("fixture_id", str, lambda e: e.run.fixture.id),
    ("fixture_sha256", str, lambda e: e.run.fixture.sha256),
    ("model_id", str, lambda e: e.run.model.id),
    ("provider", str, lambda e: e.run.model.provider),
    ("segment", str, lambda e: e.run.model.segment),
    ("pinning", str, lambda e: e.run.model.pinning),
    ("repeat", int, lambda e: e.run.repeat),
    ("repeats_planned", int, lambda e: e.run.repeats_planned),
    ("run_mode", str, lambda e: e.run.run_mode),
    ("kind", str, _run_kind),
    ("exit_path", str, lambda e: e.run.stats.exit_path if e.run.stats else None),
    ("runner_exit", str, lambda e: e.run.runner_exit),
    ("isolation", str, lambda e: isolation(e.run)),
    ("turns_used", int, lambda e: e.run.stats.turns_used if e.run.stats else None),
    ("tokens_in", int, lambda e: e.run.stats.tokens_in if e.run.stats else None),
    ("tokens_out", int, lambda e: e.run.stats.tokens_out if e.run.stats else None),
    ("usd_micros", int, lambda e: e.run.cost.usd_micros),
    ("usd", float, lambda e: usd_from_micros(e.run.cost.usd_micros)),
    ("price_table_version", str, lambda e: e.run.cost.price_table_version),
    ("started_at", str, lambda e: fmt.utc_stamp(e.run.timings.started_at)),
    ("date", str, lambda e: e.date),
    ("ordinal", int, lambda e: e.ordinal),
    ("duration_ms", int, lambda e: e.run.timings.duration_ms),
    ("schema_version", str, lambda e: e.run.comparability.schema_version),
    ("run_suite_version", str, lambda e: e.run.comparability.suite_version),
    ("task_manifest_hash", str, lambda e: e.run.comparability.task_manifest_hash),
    ("copperhead_version", str, lambda e: e.run.comparability.copperhead_version),
    ("copperhead_commit", str, lambda e: e.run.comparability.copperhead_commit),
    ("kicad_cli_version", str, lambda e: e.run.comparability.kicad_cli_version),
    ("node_version", str, lambda e: e.run.comparability.node_version),
    ("runtime", str, lambda e: e.run.comparability.runtime),
    ("platform", str, lambda e: e.run.comparability.platform),
    ("os", str, lambda e: e.run.comparability.os),
    ("baseline_sha", str, lambda e: e.run.sandbox.baseline_sha),
    ("sandbox_store", str, lambda e: e.run.sandbox.store),
    ("condition", str, lambda e: condition_key(e.run.ablations)),
    ("batch", str, lambda e: e.run.batch),
    ("provider_models", str, lambda e: json.dumps(list(e.run.provider_models))),
))

def _counts(others: str) -> tuple[Column[_Named], ...]:
    """The tallies a task row and a model row share; `others` names the distinct count of the
    other side (a task's models, a model's tasks)."""
    return (
        ("runs", int, lambda n: n.runs),
        ("agent_runs", int, lambda n: n.agent_runs),
        (others, int, lambda n: n.others),
        ("current_suite_runs", int, lambda n: n.suite_runs),
        ("current_suite_passes", int, lambda n: n.suite_passes),
    )


TASKS: TableSpec[_Named] = TableSpec("tasks", ("task_id",), (
    ("task_id", str, lambda n: n.name),
    ("tier", str, lambda n: n.entry.run.task.tier),
    ("mode", str, lambda n: n.entry.run.task.mode),
    ("expected_outcome", str, lambda n: n.entry.run.task.expected_outcome),
    ("variant_of", str, lambda n: n.entry.run.task.variant_of),
    ("fixture_id", str, lambda n: n.entry.run.fixture.id),
    *_counts("models"),
    ("site_page", str, lambda n: f"{SITE_DIR}/{site_paths.task_page(n.name)}"),
))

MODELS: TableSpec[_Named] = TableSpec("models", ("model_id",), (
    ("model_id", str, lambda n: n.name),
    ("provider", str, lambda n: n.entry.run.model.provider),
    ("segment", str, lambda n: n.entry.run.model.segment),
    ("pinning", str, lambda n: n.entry.run.model.pinning),
    *_counts("tasks"),
    ("usd_micros_total", int, lambda n: n.usd_micros if n.agent_runs else None),
    ("uncosted_runs", int, lambda n: n.uncosted_runs),
    ("site_page", str, lambda n: f"{SITE_DIR}/{site_paths.model_page(n.name)}"),
))

GRADES: TableSpec[_Graded] = TableSpec("grades", ("run_id", "suite_version"), (
    ("run_id", str, lambda g: g.run_id),
    ("suite_version", str, lambda g: g.suite_version),
    ("seq", int, lambda g: g.entry.seq),
    ("grader_version", str, lambda g: g.entry.grade.grader_version),
    ("task_manifest_hash", str, lambda g: g.entry.grade.task_manifest_hash),
    ("verdict", str, lambda g: g.entry.grade.verdict),
    ("partial_credit", float, lambda g: g.entry.grade.partial_credit),
    ("first_failed_required", str, lambda g: g.entry.grade.first_failed_required),
    ("failure_category", str, lambda g: g.entry.grade.failure_category),
    ("dominant_tool_error", str, lambda g: g.entry.grade.dominant_tool_error),
    ("record_path", str, lambda g: g.record_path),
    ("comparability_group", str, lambda g: g.group_key),
    ("main_group", int, lambda g: int(g.group_key == "main")),
    ("checkpoint_size", int, lambda g: g.checkpoint.tree_size if g.checkpoint else None),
    ("checkpoint_path", str, lambda g: checkpoint_name(g.checkpoint.tree_size) if g.checkpoint else None),
))

ASSERTION_OUTCOMES: TableSpec[_Outcome] = TableSpec("assertion_outcomes", ("run_id", "suite_version", "position"), (
    ("run_id", str, lambda o: o.run_id),
    ("suite_version", str, lambda o: o.suite_version),
    ("position", int, lambda o: o.position),
    ("assertion_id", str, lambda o: o.assertion.id),
    ("type", str, lambda o: o.assertion.type),
    ("status", str, lambda o: o.assertion.status),
    ("weight", float, lambda o: o.assertion.weight),
    ("required", int, lambda o: int(o.assertion.required)),
    ("evidence_source", str, lambda o: o.assertion.evidence_source),
    ("detail", str, lambda o: o.assertion.detail),
))

LEADERBOARD_ROWS: TableSpec[_BoardRow] = TableSpec(
    "leaderboard_rows", ("suite_version", "group_key", "condition", "tier", "model", "segment"), (
    ("suite_version", str, lambda b: b.suite_version),
    ("group_key", str, lambda b: b.group.key),
    ("group_label", str, lambda b: b.group.label),
    ("main_group", int, lambda b: int(b.group.main)),
    ("condition", str, lambda b: b.row.condition),
    ("tier", str, lambda b: b.row.tier),
    ("model", str, lambda b: b.row.model),
    ("segment", str, lambda b: b.row.segment),
    ("pinning", str, lambda b: b.row.pinning),
    ("costed", int, lambda b: int(b.row.costed)),
    ("runs", int, lambda b: b.row.runs),
    ("passes", int, lambda b: b.row.passes),
    ("strict_pass_rate", float, lambda b: b.row.passes / b.row.runs),
    ("wilson_low", float, lambda b: b.row.wilson_low),
    ("wilson_high", float, lambda b: b.row.wilson_high),
    ("cost_per_passing_task_usd", float, lambda b: _cost_per_pass_usd(b.row)),
    ("usd_micros_total", int, lambda b: b.row.usd_micros_total),
    ("costed_runs", int, lambda b: b.row.costed_runs),
    ("uncosted_runs", int, lambda b: b.row.uncosted_runs),
    ("tokens_in", int, lambda b: b.row.tokens_in),
    ("tokens_out", int, lambda b: b.row.tokens_out),
    ("pass_at_1", float, lambda b: _float_or_none(b.row.pass_at_1)),
    ("pass_hat_k", float, lambda b: _float_or_none(b.row.pass_hat_k)),
    ("tasks", int, lambda b: b.row.tasks),
    ("tasks_passed", int, lambda b: b.row.tasks_passed),
    ("repeats_min", int, lambda b: b.row.repeats_min),
    ("repeats_max", int, lambda b: b.row.repeats_max),
    ("single_repeat", int, lambda b: int(b.row.single_repeat)),
    ("refusal_runs", int, lambda b: b.row.refusal_runs),
    ("correct_refusals", int, lambda b: b.row.correct_refusals),
    ("edit_runs", int, lambda b: b.row.edit_runs),
    ("false_refusals", int, lambda b: b.row.false_refusals),
    ("failure_categories", str, lambda b: json.dumps(b.row.failure_categories, sort_keys=True)),
    ("rubric_model_judged_mean", float, lambda b: b.row.rubric_mean),
    ("rubric_runs", int, lambda b: b.row.rubric_runs),
))

ABLATION_ROWS: TableSpec[_AblationRow] = TableSpec(
    "ablation_rows", ("suite_version", "group_key", "condition", "tier", "model", "segment"), (
    ("suite_version", str, lambda a: a.suite_version),
    ("group_key", str, lambda a: a.group.key),
    ("condition", str, lambda a: a.row.condition),
    ("tier", str, lambda a: a.row.tier),
    ("model", str, lambda a: a.row.model),
    ("segment", str, lambda a: a.row.segment),
    ("paired_tasks", int, lambda a: a.row.paired_tasks),
    ("unpaired_tasks", str, lambda a: json.dumps(a.row.unpaired_tasks)),
    ("runs", int, lambda a: a.row.runs),
    ("passes", int, lambda a: a.row.passes),
    ("tasks_passed", int, lambda a: a.row.tasks_passed),
    ("default_runs", int, lambda a: a.row.default_runs),
    ("default_passes", int, lambda a: a.row.default_passes),
    ("default_tasks_passed", int, lambda a: a.row.default_tasks_passed),
    ("difference", float, lambda a: _float_or_none(a.row.difference)),
    ("usd_micros_total", int, lambda a: a.row.usd_micros_total),
    ("default_usd_micros_total", int, lambda a: a.row.default_usd_micros_total),
    ("cost_per_passing_task_usd", float, lambda a: _usd(a.row.cost_per_pass_micros)),
    ("default_cost_per_passing_task_usd", float, lambda a: _usd(a.row.default_cost_per_pass_micros)),
    ("failure_categories", str, lambda a: json.dumps(a.row.failure_categories, sort_keys=True)),
))

INCOMPARABLE_RECORDS: TableSpec[_Incomparable] = TableSpec("incomparable_records", ("suite_version", "record_path"), (
    ("suite_version", str, lambda i: i.record.suite_version),
    ("record_path", str, lambda i: i.record.path),
    ("run_id", str, lambda i: i.record.run_id),
    ("group_key", str, lambda i: i.group_key),
    ("reasons", str, lambda i: "; ".join(i.reasons)),
))

IMPORTS: TableSpec[ImportEntry] = TableSpec("imports", ("seq",), (
    ("seq", int, lambda imp: imp.seq),
    ("at", str, lambda imp: fmt.utc_stamp(imp.at)),
    ("actor", str, lambda imp: imp.actor),
    ("ownership", str, lambda imp: imp.body.ownership),
    ("source", str, lambda imp: imp.body.source),
    ("original_path", str, lambda imp: imp.body.original_path),
    ("format", str, lambda imp: imp.body.format),
    ("sha256", str, lambda imp: imp.body.sha256),
    ("task_id", str, lambda imp: imp.body.summary.task_id),
    ("model", str, lambda imp: imp.body.summary.model),
    ("verdict", str, lambda imp: imp.body.summary.verdict),
    ("suite_version", str, lambda imp: imp.body.summary.suite_version),
    ("fixture_sha256", str, lambda imp: imp.body.summary.fixture_sha256),
    ("run_date", str, lambda imp: imp.body.summary.run_date),
    ("repeat", int, lambda imp: imp.body.summary.repeat),
    ("variant", str, lambda imp: imp.body.summary.variant),
    ("benchmark", str, lambda imp: imp.body.summary.benchmark),
    ("surface_id", str, lambda imp: imp.body.summary.surface_id),
    ("files", str, lambda imp: json.dumps([f.stored_path for f in imp.body.files])),
))

RUBRIC_SCORES: TableSpec[_Rubric] = TableSpec("rubric_scores", ("seq",), (
    ("seq", int, lambda r: r.entry.seq),
    ("run_id", str, lambda r: r.run_id),
    ("judge_model", str, lambda r: r.entry.rubric.judge_model),
    ("prompt_sha256", str, lambda r: r.entry.rubric.prompt_sha256),
    ("score", float, lambda r: r.entry.rubric.score),
    ("rationale", str, lambda r: r.entry.rubric.rationale),
))

GRADE_CONFLICTS: TableSpec[GradeConflict] = TableSpec("grade_conflicts", ("conflicting_seq",), (
    ("run_id", str, lambda c: c.run_id),
    ("suite_version", str, lambda c: c.suite_version),
    ("kept_seq", int, lambda c: c.kept_seq),
    ("conflicting_seq", int, lambda c: c.conflicting_seq),
    ("fields", str, lambda c: ", ".join(c.fields)),
))

LATER_PASSES: TableSpec[_LaterPass] = TableSpec("later_passes", ("run_id", "suite_version"), (
    ("run_id", str, lambda p: p.run_id),
    ("suite_version", str, lambda p: p.suite_version),
    ("first_run_id", str, lambda p: p.ref.first),
    ("pass_index", int, lambda p: p.ref.index),
    ("passes_allowed", int, lambda p: p.ref.allowed),
    ("previous_run_id", str, lambda p: p.ref.previous),
    ("seq", int, lambda p: p.entry.seq),
    ("task_id", str, lambda p: p.entry.run.task.id),
    ("model_id", str, lambda p: p.entry.run.model.id),
    ("hint_count", int, lambda p: len(p.ref.hints)),
    ("hints", str, lambda p: json.dumps(list(p.ref.hints))),
    ("carried_over", int, lambda p: int(p.ref.carried_over)),
    ("exit_path", str, lambda p: p.entry.run.stats.exit_path if p.entry.run.stats else None),
    ("turns_used", int, lambda p: p.entry.run.stats.turns_used if p.entry.run.stats else None),
    ("usd_micros", int, lambda p: p.entry.run.cost.usd_micros),
    ("grade_seq", int, lambda p: p.graded.seq if p.graded else None),
    ("verdict", str, lambda p: p.graded.grade.verdict if p.graded else None),
    ("partial_credit", float, lambda p: p.graded.grade.partial_credit if p.graded else None),
    ("first_failed_required", str, lambda p: p.graded.grade.first_failed_required if p.graded else None),
    ("failure_category", str, lambda p: p.graded.grade.failure_category if p.graded else None),
))

CHECKPOINTS: TableSpec[CheckpointEntry] = TableSpec("checkpoints", ("tree_size",), (
    ("tree_size", int, lambda c: c.tree_size),
    ("seq", int, lambda c: c.seq),
    ("origin", str, lambda c: c.origin),
    ("root_hash", str, lambda c: c.root_hash),
    ("path", str, lambda c: checkpoint_name(c.tree_size)),
))

RETRACTIONS: TableSpec[_Retracted] = TableSpec("retractions", ("run_id",), (
    ("run_id", str, lambda r: r.retraction.run_id),
    ("usd_micros", int, lambda r: r.usd_micros),
    ("seq", int, lambda r: r.retraction.seq),
    ("reason", str, lambda r: r.retraction.reason),
    ("record_paths", str, lambda r: json.dumps(r.records)),
    ("mark_path", str, lambda r: r.mark),
))

UNRECORDED_SPEND: TableSpec[UnrecordedSpendEntry] = TableSpec("unrecorded_spend", ("seq",), (
    ("seq", int, lambda u: u.seq),
    ("campaign", str, lambda u: u.body.campaign),
    ("run_id", str, lambda u: u.body.run_id),
    ("batch", str, lambda u: u.body.batch),
    ("model_id", str, lambda u: u.body.model),
    ("usd_micros", int, lambda u: u.body.usd_micros),
    ("recorded_by", str, lambda u: u.actor),
))


#: (column, table, column) links, by table. Only live runs are in `runs`, and every table below
#: holds live runs only; `retractions` and `grade_conflicts` name runs that may be absent.
FOREIGN_KEYS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "runs": (("task_id", "tasks", "task_id"), ("model_id", "models", "model_id")),
    "grades": (("run_id", "runs", "run_id"),),
    "assertion_outcomes": (("run_id", "runs", "run_id"),),
    "incomparable_records": (("run_id", "runs", "run_id"),),
    "rubric_scores": (("run_id", "runs", "run_id"),),
    "later_passes": (("first_run_id", "runs", "run_id"),),
}

#: The columns a question filters or groups by, by table (the primary keys are indexed already).
INDEXES: dict[str, tuple[tuple[str, ...], ...]] = {
    "runs": (("task_id",), ("model_id",), ("tier",), ("kind",), ("run_suite_version",), ("batch",)),
    "grades": (("suite_version", "verdict"), ("failure_category",)),
    "assertion_outcomes": (("assertion_id",), ("status",)),
    "leaderboard_rows": (("tier", "model"),),
    "rubric_scores": (("run_id",),),
    "incomparable_records": (("run_id",),),
    "later_passes": (("first_run_id",), ("suite_version", "verdict")),
}


def index_name(table: str, columns: tuple[str, ...]) -> str:
    return f"idx_{table}_{'_'.join(columns)}"


# --------------------------------------------------------------------------- gathering the sources


#: the tables whose rows each belong to a run, with the columns that name it: an update deletes
#: and writes again the rows any of them names a changed run in (a later pass's rows hang on its
#: pass 1 too); every other table is rebuilt whole
PER_RUN: dict[str, tuple[str, ...]] = {
    "runs": ("run_id",),
    "grades": ("run_id",),
    "assertion_outcomes": ("run_id",),
    "incomparable_records": ("run_id",),
    "rubric_scores": ("run_id",),
    "later_passes": ("run_id", "first_run_id"),
}


def build_tables(state: LedgerState, views: Views | None = None) -> list[Table]:
    """Every table of the read model; retracted runs appear only in `retractions`. `views` are
    the aggregates kept current as the state folded; without them they are computed here."""
    if views is None:
        views = Views(state)
    return _tables(state, views, None)


def _tables(state: LedgerState, views: Views, run_ids: set[str] | None) -> list[Table]:
    """The tables, with the per-run ones restricted to `run_ids` (None: every run)."""
    return [spec.build(sources) for spec, sources in _sources(state, views, run_ids)]


def stream_tables(state: LedgerState, views: Views | None = None) -> list[LazyTable]:
    """`build_tables` as tables whose rows are made while `write` writes them: what a full
    rebuild writes, holding one row at a time rather than every row of every table."""
    if views is None:
        views = Views(state)
    return [spec.stream(sources) for spec, sources in _sources(state, views, None)]


def _sources(state: LedgerState, views: Views, run_ids: set[str] | None) -> list[tuple[TableSpec[Any], Iterable[Any]]]:
    live: Mapping[str, RunEntry]
    if run_ids is None:
        live = _Live(state)
    else:
        live = {rid: state.runs[rid] for rid in sorted(run_ids) if rid in state.runs and rid not in state.retracted}
    metrics = [views.suite_metrics(v) for v in views.suite_versions()]
    return [
        (META, _meta(state, views)),
        # before `runs`, whose task and model ids are keys into them
        (TASKS, _named(state, views, _by_task, _by_model)),
        (MODELS, _named(state, views, _by_model, _by_task, from_model_runs=True)),
        (RUNS, live.values()),
        (GRADES, _graded(state, views, live)),
        (ASSERTION_OUTCOMES, _outcomes(_graded(state, views, live, keyed=False))),  # outcomes name no group
        (LEADERBOARD_ROWS, _board_rows(metrics)),
        (ABLATION_ROWS, _ablation_rows(metrics)),
        (INCOMPARABLE_RECORDS, _incomparable(state, views, live)),
        (IMPORTS, state.imports),
        (RUBRIC_SCORES, (_Rubric(rid, item) for rid in live for item in state.rubric.get(rid, ()))),
        (LATER_PASSES, _later_passes(state, run_ids)),
        (GRADE_CONFLICTS, state.conflicts),
        (RETRACTIONS, _retracted(state)),
        (CHECKPOINTS, state.checkpoints),
        (UNRECORDED_SPEND, unrecorded_spend(state)),
    ]


def _meta(state: LedgerState, views: Views) -> list[_Meta]:
    return [
        _Meta("head_seq", str(state.head_seq)),
        _Meta("head_hash", state.head_hash or ""),
        _Meta("snapshot_at", fmt.utc_stamp(state.last_at)),
        _Meta("current_suite", views.current_suite() or ""),
        _Meta("schema_version", SCHEMA_VERSION),
        _Meta("ledger_name", state.ledger_name or ""),
        _Meta("duplicate_grades", str(len(state.duplicate_grades))),
        _Meta("checkpoint_size", str(state.checkpoints[-1].tree_size) if state.checkpoints else ""),
        _Meta("checkpoint_root", state.checkpoints[-1].root_hash if state.checkpoints else ""),
    ]


class _Live(Mapping[str, RunEntry]):
    """Every live run, read from the state as it is iterated: a spilled state's runs are on disk,
    and a dict of them would hold them all again."""

    def __init__(self, state: LedgerState) -> None:
        self.state = state

    def __getitem__(self, rid: str) -> RunEntry:
        if rid in self.state.retracted:
            raise KeyError(rid)
        return self.state.runs[rid]

    def __iter__(self) -> Iterator[str]:
        return (rid for rid in self.state.runs if rid not in self.state.retracted)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def items(self) -> Iterator[tuple[str, RunEntry]]:  # type: ignore[override]
        retracted = self.state.retracted
        return ((rid, e) for rid, e in self.state.runs.items() if rid not in retracted)

    def values(self) -> Iterator[RunEntry]:  # type: ignore[override]
        return (e for _, e in self.items())


def _records(state: LedgerState, live: Mapping[str, RunEntry]) -> Iterator[RecordEntry]:
    for rid, entry in live.items():
        for path, suite, g in record_paths(state, rid, entry):
            yield RecordEntry(path=path, run_id=rid, suite_version=suite, run=entry, graded=g)


def _graded(state: LedgerState, views: Views, live: Mapping[str, RunEntry], keyed: bool = True) -> Iterator[_Graded]:
    """The grades of the `live` runs with their record paths and (when `keyed`) comparability groups."""
    for rec in _records(state, live):
        g = rec.graded
        key = views.suite(rec.suite_version).group_key(rec) if keyed else ""
        yield _Graded(rec.run_id, rec.suite_version, g, rec.path, key, anchor.covering(state, max(rec.run.seq, g.seq)))


def _incomparable(state: LedgerState, views: Views, live: Mapping[str, RunEntry]) -> Iterator[_Incomparable]:
    """The records of the `live` runs outside their suite's main group."""
    for rec in _records(state, live):
        sv = views.suite(rec.suite_version)
        group = sv.groups[sv.group_key(rec)]
        if not group.main:
            yield _Incomparable(rec, group.key, group.reasons)


def _outcomes(graded: Iterable[_Graded]) -> Iterator[_Outcome]:
    return (
        _Outcome(g.run_id, g.suite_version, pos, a)
        for g in graded
        for pos, a in enumerate(g.entry.grade.assertions)
    )


def _board_rows(metrics: list[SuiteMetrics]) -> list[_BoardRow]:
    return [_BoardRow(sm.suite_version, g, r) for sm in metrics for g in sm.groups for r in g.rows]


def _ablation_rows(metrics: list[SuiteMetrics]) -> list[_AblationRow]:
    return [_AblationRow(sm.suite_version, g, a) for sm in metrics for g in sm.groups for a in g.ablations]


def _later_passes(state: LedgerState, run_ids: set[str] | None) -> Iterator[_LaterPass]:
    """The live later passes of live attempts (neither the pass nor its pass 1 retracted, and
    pass 1 recorded), restricted to those whose own run or pass 1 is in `run_ids` (None: all);
    a pass has a row per suite version it was graded under, or one ungraded row."""
    for rid, entry in state.later_passes.items():
        ref = entry.run.passes
        if not isinstance(ref, PassRef) or ref.first is None:
            continue  # the fold keeps only runs with a pass reference here; pass 1 has no `first`
        if run_ids is not None and rid not in run_ids and ref.first not in run_ids:
            continue
        if rid in state.retracted or ref.first not in state.runs or ref.first in state.retracted:
            continue
        grades = state.grades.get(rid)
        if not grades:
            yield _LaterPass(rid, entry.run.comparability.suite_version, entry, ref, None)
            continue
        for suite, g in grades.items():
            yield _LaterPass(rid, suite, entry, ref, g)


def _cost_of(state: LedgerState, run_id: str) -> int | None:
    entry = any_run(state, run_id)
    return entry.run.cost.usd_micros if entry is not None and not is_replay(entry) else None


def _retracted(state: LedgerState) -> list[_Retracted]:
    marks = {mark.run_id: path for path, mark in retraction_marks(state)}
    return [
        _Retracted(r, [record_name(path) for path, _, _ in record_paths(state, rid)],
                   record_name(marks[rid]) if rid in marks else None, _cost_of(state, rid))
        for rid, r in state.retracted.items()
    ]


# --------------------------------------------------------------------------- I/O


def _tuples(t: Table | LazyTable) -> Iterator[tuple[Any, ...]]:
    if isinstance(t, LazyTable):
        return t.tuples
    cols = list(t.columns)
    return (tuple(r[c] for c in cols) for r in t.rows)


def _insert_sql(name: str, columns: Iterable[str]) -> str:
    cols = list(columns)
    names = ", ".join(f'"{c}"' for c in cols)
    return f'INSERT INTO "{name}" ({names}) VALUES ({",".join("?" * len(cols))})'


def write(tables: Sequence[Table | LazyTable], path: Path) -> Path:
    """Builds the database in a temporary file beside `path`, then atomically replaces it."""
    _write(tables, path, keep_same=False)
    return path


def write_if_changed(tables: Sequence[Table | LazyTable], path: Path) -> bool:
    """`write`, except that a database at `path` with the same content (`content_digest`) is left
    as it is (SQLite's bytes are not a function of the content, so a committed read model is
    rewritten only when what it says changed). Whether `path` was replaced.

    Why compare the finished file rather than rows in memory: the rows stream into the temporary
    file one at a time and both contents are read back in key order a row at a time, so deciding
    whether a full rebuild changed anything never holds a table whole (it held every table twice,
    as rows and as text: most of a watch's first regeneration's peak memory)."""
    return _write(tables, path, keep_same=True)


def _write(tables: Sequence[Table | LazyTable], path: Path, keep_same: bool) -> bool:
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_dead_temps(path.parent)  # a killed build's file
    tmp = Path(temp_name(path))
    if tmp.exists():
        tmp.unlink()
    try:
        with sqlite_naming(path):  # a full disk while it is built: one line, the old model kept
            conn = sqlite3.connect(tmp)
            # A file nobody reads until it is complete, synced and renamed into place: no journal and
            # no syncs while it is built, and every row in one transaction (insert_all alone commits
            # each chunk of rows).
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("PRAGMA synchronous=OFF")
            db = sqlite_utils.Database(conn)
            with db.atomic():  # the inserts' own transactions nest in it as savepoints
                for t in tables:
                    table = db.table(t.name)
                    table.create(t.columns, pk=t.pk[0] if len(t.pk) == 1 else t.pk, foreign_keys=FOREIGN_KEYS.get(t.name, ()))
                    conn.executemany(_insert_sql(t.name, t.columns), _tuples(t))
                    for columns in INDEXES.get(t.name, ()):
                        table.create_index(columns, index_name=index_name(t.name, columns))
            problems = conn.execute("PRAGMA foreign_key_check").fetchall()
            if problems:
                raise ValueError(f"read model: a row links to no row: {problems[:3]}")
            conn.close()
            if keep_same and path.is_file() and _same_content(tmp, path):
                return False
            with naming(path):
                with open(tmp, "rb+") as f:
                    os.fsync(f.fileno())
                os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return True


def _same_content(a: Path, b: Path) -> bool:
    """Same rows, and `b` undamaged (a damaged index can answer a query with what no row holds)."""
    try:
        return content_digest(a) == content_digest(b) and damage(b) is None
    except (sqlite3.Error, ValueError):  # not a read model: replace it
        return False


def update(path: Path, state: LedgerState, views: Views, run_ids: set[str]) -> Path:
    """Brings the database at `path`, written for an earlier state of this ledger, to `state`
    when only the runs `run_ids` changed: their rows in the per-run tables are deleted and
    written again (in `later_passes`, the rows of a changed pass and of every pass of a changed
    pass 1), and the small aggregate tables (meta, leaderboard and ablation rows, imports,
    conflicts, retractions, checkpoints) replaced, all in one transaction. SQLite's rollback
    journal makes the transaction atomic: a crash leaves the old content or the new, never a mix.
    The content is what `write(build_tables(state))` gives (tested); only the pages differ."""
    tables = _tables(state, views, run_ids)
    ids = sorted(run_ids)
    with sqlite_naming(path):
        return _update(path, tables, ids)


def _update(path: Path, tables: Sequence[Table | LazyTable], ids: list[str]) -> Path:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA foreign_keys=OFF")
        conn.execute("BEGIN IMMEDIATE")
        try:
            for t in tables:
                owners = PER_RUN.get(t.name)
                if owners:
                    for i in range(0, len(ids), 500):
                        chunk = ids[i:i + 500]
                        marks = ",".join("?" * len(chunk))
                        where = " OR ".join(f'"{c}" IN ({marks})' for c in owners)
                        conn.execute(f'DELETE FROM "{t.name}" WHERE {where}', chunk * len(owners))
                else:
                    conn.execute(f'DELETE FROM "{t.name}"')
                conn.executemany(_insert_sql(t.name, t.columns), _tuples(t))
            for table, links in FOREIGN_KEYS.items():
                for column, other, other_column in links:
                    bad = conn.execute(
                        f'SELECT {column} FROM "{table}" WHERE {column} IN ({",".join("?" * len(ids))}) '
                        f'AND {column} NOT IN (SELECT {other_column} FROM "{other}") LIMIT 3', ids,
                    ).fetchall() if ids else []
                    if bad:
                        raise ValueError(f"read model: a row of {table} links to no row of {other}: {bad}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # a COMMIT that failed on a full disk may have rolled back itself
                conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()
    return path


def _dump_lines(
    name: str, columns: list[str], pk: list[str], rows: int,
    fks: list[tuple[str, str, str]], indexes: list[tuple[str, list[str]]],
) -> list[str]:
    """A table's heading lines; its rows follow, one `_dump_row` each."""
    out = [f"table {name} ({', '.join(columns)}) pk ({', '.join(pk)}) rows {rows}"]
    out += [f"foreign key {col} -> {table}.{other}" for col, table, other in sorted(fks)]
    out += [f"index {iname} ({', '.join(cols)})" for iname, cols in sorted(indexes)]
    return out


def _dump_row(row: tuple[Any, ...]) -> str:
    return json.dumps(list(row), ensure_ascii=False, separators=(",", ":"))


def canonical_dump_tables(tables: list[Table]) -> str:
    out: list[str] = []
    for t in sorted(tables, key=lambda t: t.name):
        cols = list(t.columns)
        rows = [tuple(_norm(r[c]) for c in cols) for r in t.rows]
        fks = list(FOREIGN_KEYS.get(t.name, ()))
        indexes = [(index_name(t.name, c), list(c)) for c in INDEXES.get(t.name, ())]
        out += _dump_lines(t.name, cols, list(t.pk), len(rows), fks, indexes)
        out.extend(_dump_row(r) for r in sorted(rows, key=lambda r: tuple(r[cols.index(k)] for k in t.pk)))
    return "\n".join(out) + "\n"


def canonical_dump(path: Path) -> str:
    """The content of a read-model database in the `canonical_dump_tables` format."""
    return "".join(line + "\n" for line in dump_lines(path))


def content_digest(path: Path) -> bytes:
    """BLAKE3 of `canonical_dump(path)`, read a row at a time: equal digests, equal content."""
    h = blake3()
    for line in dump_lines(path):
        h.update(line.encode())
        h.update(b"\n")
    return h.digest()


def damage(path: Path) -> str | None:
    """What SQLite's own check finds wrong with the file (an index that no longer matches its
    table, a page that is no page), or None when it finds nothing. A dump reads the tables; this
    reads what the queries a reader runs would use."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        found = [row[0] for row in conn.execute("PRAGMA integrity_check(3)")]
    finally:
        conn.close()
    return None if found == ["ok"] else "; ".join(found)


def head_seq(path: Path) -> str | None:
    """The ledger head the model at `path` was written at (its `meta` row), or None when it has
    none; raises sqlite3.Error for a file that is no read model."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'head_seq'").fetchone()
    finally:
        conn.close()
    return row[0] if row else None


def dump_lines(path: Path) -> Iterator[str]:
    """`canonical_dump(path)`'s lines, read a row at a time."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        db = sqlite_utils.Database(conn)
        for name in sorted(db.table_names()):
            table = db.table(name)
            cols = [c.name for c in table.columns]
            pk = table.pks
            order = ", ".join(f'"{k}"' for k in pk)
            count = conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]
            fks = [(str(fk.column), fk.other_table, str(fk.other_column)) for fk in table.foreign_keys]
            indexes = [(ix.name, list(ix.columns)) for ix in table.indexes if not ix.name.startswith("sqlite_autoindex")]
            yield from _dump_lines(name, cols, pk, count, fks, indexes)
            # NOT INDEXED: the rows as the table holds them, not the copies of their key columns an
            # index keeps (a byte changed in a key column once read back as it was, from the index)
            for row in conn.execute(f'SELECT * FROM "{name}" NOT INDEXED ORDER BY {order}'):
                yield _dump_row(tuple(_norm(v) for v in row))
    finally:
        conn.close()


def _norm(v: Any) -> Any:
    """Booleans are stored as 0/1 and integral REALs come back as floats: compare like for like."""
    if isinstance(v, bool):
        return int(v)
    return v


# --------------------------------------------------------------------------- datasette metadata

_TABLES: dict[str, str] = {
    "meta": "The ledger this model was built from: its name, head seq and hash, the current suite version.",
    "tasks": "Every task with a live run: what it asks, and how often it was run and passed (agent runs, current suite).",
    "models": "Every model with a live run: its segment and pinning, runs, passes under the current suite, USD spent.",
    "runs": "Every live run (retracted ones are only in `retractions`): task, model, mode, stats, cost, environment.",
    "grades": "Each run's verdict under each suite version it was graded under, with its failure category.",
    "assertion_outcomes": "Every assertion of every grade, in the task's order, with its detail.",
    "leaderboard_rows": "The leaderboard: agent runs per suite, comparability group, condition, tier and model, with Wilson intervals.",
    "ablation_rows": "Each ablation condition against the default on the tasks both ran.",
    "incomparable_records": "Records outside the main comparability group, with the reasons.",
    "imports": "Evidence produced outside this project's runner, kept apart from every metric.",
    "rubric_scores": "Model-judged rubric scores (a diagnostic, never part of a verdict).",
    "grade_conflicts": "A second grade of a run under one suite version that disagreed with the first (the first is kept).",
    "retractions": "Retracted runs: why, and where their records stay.",
    "checkpoints": "Signed checkpoints of the ledger's Merkle tree.",
    "unrecorded_spend": "What runs killed with their driver spent (`spend.unrecorded`): billed, in no run's cost. "
                        "What was billed is this plus what the recorded runs that called a model cost: `runs` but "
                        "replays (a replay carries its original's cost), each later pass once (`later_passes` has a "
                        "row per suite version), and retracted runs (`retractions`).",
    "later_passes": "Feedback passes after the first (never in `runs`): each pass's attempt (its pass 1), index, "
                    "hints and verdict under each suite version it was graded under (null until graded).",
}

_QUERIES: dict[str, dict[str, str]] = {
    "pass_rate_by_model_and_tier": {
        "title": "Pass rate by model and tier",
        "description": "Strict pass rate of every model per tier, condition and suite version, over all its graded live "
                       "runs (harness and scripted runs included, an ablation's apart; `leaderboard_rows` holds the "
                       "agent leaderboard with intervals).",
        "sql": "select g.suite_version, r.model_id, r.kind, r.condition, r.tier, count(*) as runs,\n"
               "  sum(g.verdict = 'pass') as passes,\n"
               "  round(1.0 * sum(g.verdict = 'pass') / count(*), 3) as pass_rate\n"
               "from grades g join runs r on r.run_id = g.run_id\n"
               "group by g.suite_version, r.model_id, r.kind, r.condition, r.tier\n"
               "order by g.suite_version desc, r.tier, pass_rate desc, r.model_id",
    },
    "most_expensive_failures": {
        "title": "Most expensive failures",
        "description": "Failed grades of costed runs, dearest first: where money went without a pass.",
        "sql": "select r.usd, r.run_id, r.model_id, r.kind, r.condition, r.task_id, r.tier, g.suite_version,\n"
               "  g.failure_category, g.first_failed_required, r.tokens_in, r.tokens_out\n"
               "from grades g join runs r on r.run_id = g.run_id\n"
               "where g.verdict = 'fail' and r.usd is not null\n"
               "order by r.usd desc, r.run_id limit 100",
    },
    "runs_by_category": {
        "title": "Runs by failure category",
        "description": "Graded live runs per suite version, run kind, condition and failure category (passes "
                       "counted as '(passed)'); LEADERBOARD.md's categories are the agent rows' of the default condition.",
        "sql": "select g.suite_version, r.kind, r.condition, coalesce(g.failure_category, '(passed)') as category,\n"
               "  count(*) as runs, count(distinct r.model_id) as models, count(distinct r.task_id) as tasks\n"
               "from grades g join runs r on r.run_id = g.run_id\n"
               "group by g.suite_version, r.kind, r.condition, category\n"
               "order by g.suite_version desc, r.kind, r.condition, runs desc, category",
    },
}


def metadata_path(db: Path) -> Path:
    """Where the datasette metadata of the database at `db` is written: beside it."""
    return db.with_suffix(".metadata.json")


def metadata(database: str = "cbledger") -> str:
    """datasette's metadata for the read model: fixed text, so its bytes never vary."""
    doc = {
        "title": "copperbench ledger",
        "description": "The read model of a cbledger ledger: runs, grades, assertions and the leaderboard, rebuilt "
                       "from the hash-chained event log by `cbledger project readmodel`. Read-only: the ledger is the "
                       "source of truth.",
        "databases": {
            database: {
                "description": "One row per live run in `runs`, one per (run, suite version) grade in `grades` and its "
                               "assertions in `assertion_outcomes`; the leaderboard's numbers in `leaderboard_rows`. "
                               "Rebuilt from the ledger; columns holding JSON say so in their description.",
                "tables": {
                    name: {
                        "description": text,
                        "columns": readmodel_docs.COLUMNS.get(name, {}),
                        **({"facets": readmodel_docs.FACETS[name]} if name in readmodel_docs.FACETS else {}),
                    }
                    for name, text in _TABLES.items()
                },
                "queries": _QUERIES,
            }
        },
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"
