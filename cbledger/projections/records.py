"""Per-run result records: the reference implementation's record layout, projected from the ledger.

One record per (run, suiteVersion), made from the FIRST grade for that pair. The layout is the
reference's `schema/result.schema.json` (`additionalProperties: false` throughout), with the
fields in the reference writer's order and the fields it reserves for provider runs (`model`,
`cost`, `stats`, `rubric`, `artifacts`) after them. Choices where the ledger and the schema do not
line up one to one:

* `comparability.copperheadVersion` and `nodeVersion` are required strings in the schema; a run
  that recorded null gets the string `"absent"` (the reference writes `"unknown"` for a version it
  could not read; `absent` says the run recorded none, which is what the ledger knows).
* `run.runMode` is `noop | gold | agent`. A ledger `replay` run re-materializes a preserved agent
  run's end state and grades it again without calling the model: it carries an agent's whole
  contract (model identity, stats, the original run's cost, transcript), which the schema attaches
  to `agent` only, so its record says `agent` (a replay of a `harness:gold` or `harness:noop` run
  says `gold` or `noop`). The ledger keeps `replay`, and the views count a replay nowhere but in
  its own section (it is not a new sample, and its cost was already spent).
* `cost.usd` is `cost.usdMicros` as an exact decimal, then the nearest binary float (6 places).
* `suiteVersion` and `comparability.suiteVersion` / `taskManifestHash` are the GRADE's: a re-grade
  is a claim under the new suite and the manifest it was graded against. Fixture, environment
  and everything about the execution stay the run's.
* `rubric` holds the first `rubric.scored` for the run recorded BEFORE the record's grade: a
  record holds what the ledger knew when the run was graded and is never rewritten, so a later
  opinion shows only in the leaderboard's model-judged column and the read model.
* `model` is omitted for `harness`-segment runs (the schema's segment enum has no `harness`), and
  `cost` for harness runs that recorded no cost, as the reference writes them.
* `stats` is omitted when the run recorded none (a transcript without `run-end`); the views still
  count the run. Its figures are not invented.
* Integral numbers (`weight`, `partialCredit`) are written as integers, as the reference does.
* The project adds to the reference layout only where a record read alone would mislead:
  `harnessFailure` (the run never reached the model) and `providerModels` (the provider named a
  model other than the one requested). Every other record is the reference's shape.
* A retracted run's records stay as published; `run-<n>.retracted.json` beside them marks them
  (`RetractionMark`), since a record is never edited once written.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Literal

import msgspec
from msgspec import Struct, UnsetType

from cbledger.ledger.types import ExitPath, FailureCategory, Mode, Outcome, Tier
from cbledger.projections import paths
from cbledger.projections.conditions import DEFAULT, condition_key
from cbledger.projections.fold import GradeEntry, LedgerState, PassEntry, ProjectionError, RunEntry
from cbledger.projections.provenance import named_otherwise

ABSENT = "absent"
HARNESS_MODES = frozenset({"gold", "noop"})

CostedSegment = Literal[
    "api-frontier", "api-cheap", "open-weight-hosted", "open-weight-self-hosted", "saved-login"
]


class _R(Struct, rename="camel", omit_defaults=True, frozen=True, kw_only=True):
    """Base: camelCase, optional fields omitted when unset (the reference omits them)."""


class RecordTask(_R, frozen=True):
    id: str
    tier: Tier
    mode: Mode
    expected_outcome: Outcome
    variant_of: str | None = None


class RecordFixture(_R, frozen=True):
    id: str
    sha256: str


class RecordSetupSkip(_R, frozen=True):
    command: str
    reason: str


class RecordAblations(_R, frozen=True):
    prompt_variant: str | None = None
    max_turns: int | None = None
    max_repair_cycles: int | None = None
    tool_subset: list[str] | None = None


class RecordRun(_R, frozen=True):
    model: str
    repeat: int
    #: `scripted` (the real harness against a session script) is this project's addition to the
    #: reference layout, which has no word for a run of the harness without a model
    run_mode: Literal["noop", "gold", "agent", "scripted"]
    llm_cache: Literal[False]
    baseline_sha: str
    duration_ms: int
    setup_skipped: list[RecordSetupSkip]
    ablations: RecordAblations | None = None


class RecordAssertion(_R, frozen=True):
    id: str
    type: str
    weight: int | float
    required: bool
    status: Literal["pass", "fail"]
    detail: str


class RecordComparability(_R, frozen=True):
    schema_version: str
    suite_version: str
    task_manifest_hash: str
    fixture_sha256: str
    copperhead_version: str
    copperhead_commit: str | None
    kicad_cli_version: str | None
    node_version: str
    platform: str


class RecordModel(_R, frozen=True):
    id: str
    provider: str
    selection_source: str
    segment: CostedSegment
    pinning: Literal["strong", "weak"]


class RecordCost(_R, frozen=True):
    usd: float | None
    price_table_version: str | None


class RecordStats(_R, frozen=True):
    exit_path: ExitPath
    turns_used: int
    max_turns: int
    repair_cycles_used: int
    max_repair_cycles: int
    tokens_in: int
    tokens_out: int
    files_touched: list[str] | None = None


class RecordRubric(_R, frozen=True):
    judge_model: str
    prompt_sha256: str
    score: float
    rationale: str | None


class RecordArtifacts(_R, frozen=True):
    transcript_path: str
    sandbox_preserved: bool
    sandbox_path: str | None


class RecordHarnessFailure(_R, frozen=True):
    kind: str
    detail: str
    #: the model call an environment failure struck, and the provider's HTTP status
    turn: int | None = None
    status: int | None = None


class ResultRecord(_R, frozen=True):
    """One run graded under one suite version (`results/<date>/<model>/<task>/run-<n>.json`)."""

    schema_version: str
    suite_version: str
    task: RecordTask
    fixture: RecordFixture
    run: RecordRun
    verdict: Literal["pass", "fail"]
    partial_credit: int | float
    failure_category: FailureCategory | None
    first_failed_required: str | None
    assertions: list[RecordAssertion]
    comparability: RecordComparability
    model: RecordModel | None = None
    cost: RecordCost | None = None
    stats: RecordStats | None = None
    rubric: RecordRubric | None = None
    artifacts: RecordArtifacts | None = None
    #: present only for a run the harness ended before the model took part (this project's
    #: addition to the reference layout): such a run enters no model metric
    harness_failure: RecordHarnessFailure | None = None
    #: present only when the provider's answers named a model other than the one requested
    #: (this project's addition): every id they named, in order. A reader of this record alone
    #: must not take `run.model` for what answered
    provider_models: list[str] | None = None


class RecordEntry(Struct, frozen=True, kw_only=True):
    """A record and where it lives; `path` is relative to `results/`.

    `record` is built only when asked for (`record_entries(..., build=True)`): the metrics need
    just the stamp and the verdict, which the properties read straight from the run and grade.
    """

    path: str
    run_id: str
    suite_version: str
    run: RunEntry
    graded: GradeEntry
    record: ResultRecord | None = None

    @property
    def built(self) -> ResultRecord:
        """The record itself, which only an entry made with `build=True` has."""
        if self.record is None:
            raise ProjectionError(f"{self.path}: the record was not built (record_entries(..., build=False))")
        return self.record

    @property
    def verdict(self) -> str:
        return self.graded.grade.verdict

    @property
    def failure_category(self) -> str | None:
        return self.graded.grade.failure_category

    @property
    def task_id(self) -> str:
        return self.run.run.task.id

    @property
    def fixture_id(self) -> str:
        return self.run.run.fixture.id

    @property
    def schema_version(self) -> str:
        return self.run.run.comparability.schema_version

    @property
    def manifest_hash(self) -> str:
        """The manifest the grade was made against (the record's `comparability.taskManifestHash`)."""
        return self.graded.grade.task_manifest_hash

    @property
    def fixture_sha256(self) -> str:
        return self.run.run.comparability.fixture_sha256

    @property
    def kicad_cli_version(self) -> str | None:
        return self.run.run.comparability.kicad_cli_version

    @property
    def condition(self) -> str:
        """The run's ablation condition (`default` when no runner flag was set)."""
        return condition_key(self.run.run.ablations)


# --------------------------------------------------------------------------- helpers


def harness_mode(entry: RunEntry | PassEntry) -> Literal["gold", "noop"] | None:
    """gold or noop for a harness run (or a replay of one), from its run mode or model id."""
    run = entry.run
    if run.run_mode == "gold" or run.run_mode == "noop":
        return run.run_mode
    if run.model.id == "harness:gold":
        return "gold"
    if run.model.id == "harness:noop":
        return "noop"
    return None


def is_replay(entry: RunEntry | PassEntry) -> bool:
    """A replay grades a preserved run's end state again; it is never a new sample of anything."""
    return entry.run.run_mode == "replay"


def is_scripted(entry: RunEntry) -> bool:
    """The real harness driven by a session script: it proves the harness and the grading, and
    never measures a model."""
    return entry.run.run_mode == "scripted"


def not_the_models(entry: RunEntry) -> bool:
    """A run the harness or its environment ended, not the model (before the model ever
    answered, or at any turn by a provider failure or an outside signal, or a commit git could
    not make for want of an identity): kept with its evidence, counted in no model metric."""
    return entry.run.harness_failure is not None


def in_model_metrics(entry: RunEntry) -> bool:
    """Whether a run is a sample of a model: not the suite's own check, not a replay, not
    scripted, and not ended by the harness or its environment (`not_the_models`)."""
    return not (is_harness(entry) or is_replay(entry) or is_scripted(entry) or not_the_models(entry))


def run_kind(entry: RunEntry) -> str:
    """What a run measured: a model (`agent`), a session script, the harness's own check, a
    preserved run graded again (`replay`), or nothing of a model (the harness or its environment
    ended it). The read model stores the same classes under labels of its own
    (`readmodel._run_kind`), a harness run's failure first."""
    if is_harness(entry):
        return "harness"
    if not_the_models(entry):
        return "not the model's"
    if is_scripted(entry):
        return "scripted"
    return "replay" if is_replay(entry) else "agent"


def row_kind(entry: RunEntry) -> str:
    """The run kind a row of a model is keyed by, an ablation's agent runs apart (`agent,
    max-turns=2`): the condition is part of every row key, so that no row's figures mix two
    sets of runs."""
    kind = run_kind(entry)
    condition = condition_key(entry.run.ablations)
    return kind if kind != "agent" or condition == DEFAULT else f"agent, {condition}"


def is_harness(entry: RunEntry) -> bool:
    """Harness runs are the suite's discrimination check; they never enter a model row."""
    run = entry.run
    if is_replay(entry) or is_scripted(entry):
        return False
    return (
        run.run_mode in HARNESS_MODES
        or run.model.id.startswith("harness:")
        or run.model.segment == "harness"
    )


def usd_from_micros(micros: int | None) -> float | None:
    """Exact decimal division, then the nearest float rounded to 6 places (micro-dollars)."""
    if micros is None:
        return None
    return float(round(Decimal(micros).scaleb(-6), 6))


def _number(x: float) -> int | float:
    return int(x) if x.is_integer() else x


def _record_run_mode(entry: RunEntry) -> Literal["noop", "gold", "agent", "scripted"]:
    mode = entry.run.run_mode
    if mode == "gold" or mode == "noop" or mode == "scripted":
        return mode
    if mode == "replay":
        # a replay of a harness run is that harness mode again; of an agent run, agent
        return harness_mode(entry) or "agent"
    return "agent"


def _rubric_for(state: LedgerState, run_id: str, before_seq: int) -> RecordRubric | None:
    for item in state.rubric.get(run_id, ()):
        if item.seq < before_seq:
            r = item.rubric
            return RecordRubric(
                judge_model=r.judge_model,
                prompt_sha256=r.prompt_sha256,
                score=r.score,
                rationale=r.rationale,
            )
    return None


def build_record(state: LedgerState, entry: RunEntry, graded: GradeEntry) -> ResultRecord:
    """The record of `entry`'s run graded by `graded` (pure: depends on the state only)."""
    run = entry.run
    grade = graded.grade
    comp = run.comparability
    ab = run.ablations
    ablations = None
    if any(v is not None for v in (ab.prompt_variant, ab.max_turns, ab.max_repair_cycles, ab.tool_subset)):
        ablations = RecordAblations(
            prompt_variant=ab.prompt_variant,
            max_turns=ab.max_turns,
            max_repair_cycles=ab.max_repair_cycles,
            tool_subset=ab.tool_subset,
        )
    harness = is_harness(entry) or harness_mode(entry) is not None
    model = None
    if run.model.segment != "harness":
        model = RecordModel(
            id=run.model.id,
            provider=run.model.provider,
            selection_source=run.model.selection_source,
            segment=run.model.segment,
            pinning=run.model.pinning,
        )
    stats = None
    if run.stats is not None:
        s = run.stats
        stats = RecordStats(
            exit_path=s.exit_path,
            turns_used=s.turns_used,
            max_turns=s.max_turns,
            repair_cycles_used=s.repair_cycles_used,
            max_repair_cycles=s.max_repair_cycles,
            tokens_in=s.tokens_in,
            tokens_out=s.tokens_out,
            files_touched=list(s.files_touched) or None,
        )
    cost: RecordCost | None = RecordCost(
        usd=usd_from_micros(run.cost.usd_micros), price_table_version=run.cost.price_table_version
    )
    if harness and run.cost.usd_micros is None and run.cost.price_table_version is None:
        cost = None  # the reference writes no cost block for the provider-free modes
    transcript = run.evidence.get("transcript")
    artifacts = None
    if transcript is not None:
        artifacts = RecordArtifacts(
            transcript_path=transcript.path,
            sandbox_preserved=True,
            sandbox_path=run.sandbox.store,
        )
    return ResultRecord(
        schema_version=comp.schema_version,
        suite_version=grade.suite_version,
        task=RecordTask(
            id=run.task.id,
            tier=run.task.tier,
            mode=run.task.mode,
            expected_outcome=run.task.expected_outcome,
            variant_of=run.task.variant_of,
        ),
        fixture=RecordFixture(id=run.fixture.id, sha256=run.fixture.sha256),
        run=RecordRun(
            model=run.model.id,
            repeat=run.repeat,
            run_mode=_record_run_mode(entry),
            llm_cache=False,
            baseline_sha=run.sandbox.baseline_sha,
            duration_ms=run.timings.duration_ms,
            setup_skipped=[RecordSetupSkip(command=s.command, reason=s.reason) for s in run.setup_skipped],
            ablations=ablations,
        ),
        verdict=grade.verdict,
        partial_credit=_number(grade.partial_credit),
        failure_category=grade.failure_category,
        first_failed_required=grade.first_failed_required,
        assertions=[
            RecordAssertion(
                id=a.id,
                type=a.type,
                weight=_number(a.weight),
                required=a.required,
                status=a.status,
                detail=a.detail,
            )
            for a in grade.assertions
        ],
        comparability=RecordComparability(
            schema_version=comp.schema_version,
            suite_version=grade.suite_version,
            task_manifest_hash=grade.task_manifest_hash,
            fixture_sha256=comp.fixture_sha256,
            copperhead_version=comp.copperhead_version if comp.copperhead_version is not None else ABSENT,
            copperhead_commit=comp.copperhead_commit,
            kicad_cli_version=comp.kicad_cli_version,
            node_version=comp.node_version if comp.node_version is not None else ABSENT,
            platform=comp.platform,
        ),
        model=model,
        cost=cost,
        stats=stats,
        rubric=_rubric_for(state, run.run_id, graded.seq),
        artifacts=artifacts,
        harness_failure=(
            RecordHarnessFailure(
                kind=run.harness_failure.kind, detail=run.harness_failure.detail,
                turn=_given(run.harness_failure.turn), status=_given(run.harness_failure.status),
            )
            if run.harness_failure is not None else None
        ),
        provider_models=list(run.provider_models) if named_otherwise(run) else None,
    )


# --------------------------------------------------------------------------- the view


def record_paths(state: LedgerState, run_id: str, entry: RunEntry | None = None) -> list[tuple[str, str, GradeEntry]]:
    """(path, suite version, grade) for each record of a run, retracted or not, in grade order.
    `entry`: the run, when the caller holds it (a spilled state would read it again)."""
    entry = entry if entry is not None else state.runs.get(run_id)
    per_run = state.grades.get(run_id)
    if entry is None or not per_run:
        return []
    directory = entry.record_dir
    out = []
    for i, (suite, graded) in enumerate(per_run.items()):
        name = paths.record_name(entry.ordinal, None if i == 0 else suite)
        out.append((f"{directory}/{name}", suite, graded))
    return out


def record_entries(
    state: LedgerState, suite_version: str | None = None, *, build: bool = True, retracted: bool = False
) -> list[RecordEntry]:
    """Every live record (optionally of one suite version), in ledger order of its run; with
    `retracted`, the records of retracted runs instead (published evidence, in no view)."""
    return list(iter_record_entries(state, suite_version, build=build, retracted=retracted))


def iter_record_entries(
    state: LedgerState, suite_version: str | None = None, *, build: bool = True, retracted: bool = False
) -> Iterator[RecordEntry]:
    """`record_entries` one at a time, so a writer holds one built record, not all of them."""
    for run_id, entry in state.runs.items():
        if (run_id in state.retracted) != retracted:
            continue
        for path, suite, graded in record_paths(state, run_id, entry):
            if suite_version is not None and suite != suite_version:
                continue
            yield RecordEntry(
                path=path,
                run_id=run_id,
                suite_version=suite,
                run=entry,
                graded=graded,
                record=build_record(state, entry, graded) if build else None,
            )


class RetractionMark(_R, frozen=True):
    """`run-<n>.retracted.json`: the run beside it was retracted. Its records are left exactly as
    they were published (a record is never edited), and this file says what a reader must know
    before using them: the run is in no table, metric or gate, since which event, and why."""

    format: Literal["cbledger-retraction/1"]
    run_id: str
    retracted: Literal[True]
    retracted_at_seq: int
    reason: str
    #: the records of the run, beside this file
    records: list[str]


def retraction_marks(state: LedgerState) -> list[tuple[str, RetractionMark]]:
    """(path, mark) for every retracted run that has records; a run retracted before it was
    ever graded has no record to mark (the leaderboard and the read model still list it)."""
    out: list[tuple[str, RetractionMark]] = []
    for run_id, r in state.retracted.items():
        entry = state.runs.get(run_id)
        paths_of = record_paths(state, run_id)
        if entry is None or not paths_of:
            continue
        mark = RetractionMark(
            format="cbledger-retraction/1", run_id=run_id, retracted=True, retracted_at_seq=r.seq, reason=r.reason,
            records=[path.rsplit("/", 1)[1] for path, _, _ in paths_of],
        )
        out.append((f"{entry.record_dir}/{paths.retraction_name(entry.ordinal)}", mark))
    return sorted(out, key=lambda pm: pm[0])


def published(state: LedgerState) -> list[tuple[str, bytes]]:
    """Every file the records writer owns under `results/`, with its bytes: the live records,
    the records of retracted runs (kept: published evidence is never deleted) and their marks."""
    return list(iter_published(state))


def iter_published(state: LedgerState) -> Iterator[tuple[str, bytes]]:
    """`published` one file at a time (a writer of a million records holds one of them)."""
    for e in iter_record_entries(state):
        yield e.path, render(e.built)
    for e in iter_record_entries(state, retracted=True):
        yield e.path, render(e.built)
    for path, mark in retraction_marks(state):
        yield path, render(mark)


_ENCODER = msgspec.json.Encoder()


def render(record: ResultRecord | RetractionMark) -> bytes:
    """Byte-stable JSON: field order as declared (the reference's), 2-space indent, newline."""
    return msgspec.json.format(_ENCODER.encode(record), indent=2) + b"\n"


def _given(value: int | UnsetType) -> int | None:
    return None if isinstance(value, UnsetType) else value
