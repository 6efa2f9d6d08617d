"""Every event the ledger can hold: where a fact is defined.

An event is an envelope (`seq`, `id`, `type`, `at`, `actor`) around one typed `body`. The union
is tagged by `type`, a stable dotted string chosen here and never derived from a class name, so
renaming a class cannot change a stored byte. Decoding rejects unknown fields and unknown types:
a ledger that accepted "close enough" events could not promise that a replay means the same thing
tomorrow.

Folding lives in `cbledger.projections`; rendering in the projection writers. This module only
says what a fact is.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Annotated, ClassVar, Final, Literal, get_args

from msgspec import UNSET, Meta, Struct, UnsetType, field, structs
from msgspec.structs import force_setattr

from cbledger.ledger.checkpoint import event_problem
from cbledger.ledger.types import (
    MAX_PASSES,
    ActorKind,
    Count,
    DecimalStr,
    EventId,
    EvidenceSource,
    ExitPath,
    FailureCategory,
    Fraction,
    Hex40,
    Hex64,
    Isolation,
    Mode,
    ModelId,
    NonEmpty,
    Outcome,
    Pinning,
    RunId,
    RunMode,
    Segment,
    SelectionSource,
    SemVer,
    Slug,
    Tier,
    TokenCount,
    UtcDateTime,
    Weight,
    to_utc,
)

#: Version of the per-run result record layout. Each event type versions its own shape
#: (`EventBase.VERSION`, see `cbledger.ledger.versions`).
SCHEMA_VERSION = "1.0.0"
#: Format marker written by `ledger.created`.
LEDGER_FORMAT: Final = "cbledger/1"


class Body(Struct, forbid_unknown_fields=True, rename="camel", frozen=True, kw_only=True):
    """Base of every body and nested record: camelCase on the wire, strict on decode."""


# --------------------------------------------------------------------------- ledger.created


class LedgerCreated(Body, frozen=True, kw_only=True):
    format: Literal["cbledger/1"] = LEDGER_FORMAT
    name: NonEmpty
    description: str = ""


# --------------------------------------------------------------------------- suite.bumped


class SuiteBumped(Body, frozen=True, kw_only=True):
    """A new suite version: the hashes that define what the suite *is* at this version.

    Grades are always made under a suite version, and the leaderboard for suite S uses grades
    made under S, so these hashes are what lets a reader see exactly what changed between two
    versions.
    """

    suite_version: SemVer
    previous: SemVer | None
    reason: NonEmpty
    vocabulary_hash: Hex64
    credential_patterns_hash: Hex64
    grader_version: SemVer
    task_manifest_hashes: dict[Slug, Hex64]
    fixture_hashes: dict[Slug, Hex64]
    suites: dict[Slug, list[Slug]] = field(default_factory=dict)


class SuiteArchived(Body, frozen=True, kw_only=True):
    """A suite version's definitions were kept: every project-owned file its grades depend on.

    The standard's task manifest hash covers task.json and assertions.json only; the fixture's
    baseline reports, fixture.json and the task's gold/ are in no recorded hash. This records one
    more: the SHA-256 of the definitions manifest kept at `results/suites/<version>.json`, and of
    each task's and fixture's entry in it, so that a grade is re-graded under the definitions of
    its own suite version and an edit to any of those files is caught. `source` says where the
    files were read from (the working tree at the bump, or a commit of the project's history).
    """

    suite_version: SemVer
    definitions_hash: Hex64
    task_definition_hashes: dict[Slug, Hex64]
    fixture_definition_hashes: dict[Slug, Hex64]
    source: NonEmpty


# --------------------------------------------------------------------------- pricing.published


class ModelPrice(Body, frozen=True, kw_only=True):
    segment: Segment
    pinning: Pinning
    input: DecimalStr | None
    output: DecimalStr | None
    cache_read: DecimalStr | None = None
    cache_write: DecimalStr | None = None


class NullCostRoute(Body, frozen=True, kw_only=True):
    segment: Segment
    pinning: Pinning
    reason: NonEmpty


class PricingPublished(Body, frozen=True, kw_only=True):
    """A price table. Runs record the table version they were costed with, so publishing a new
    table never rewrites a historical cost."""

    table_version: NonEmpty
    effective_date: _dt.date
    currency: Literal["USD"] = "USD"
    unit: Literal["per-1M-tokens"] = "per-1M-tokens"
    models: dict[ModelId, ModelPrice] = field(default_factory=dict)
    null_cost_routes: dict[NonEmpty, NullCostRoute] = field(default_factory=dict)


#: USD per million tokens, a thousand times any price of record: past it, a figure is a typo, and
#: its costs would pass the largest count an event holds (priced as unknown)
MAX_PRICE = Decimal(1_000_000)


#: segments whose cost is null by the standard's rule: a price there would be shown and never meant
NULL_COST_SEGMENTS = ("open-weight-self-hosted", "saved-login")


def price_table_problems(table: PricingPublished) -> list[tuple[str, str]]:
    """(path as the file spells it, why) of each entry a table must not hold. Checked where a
    table enters the ledger, `pricing publish` and `append` alike (the schema takes any decimal
    and any segment); a table recorded before a rule was added folds as it was."""
    problems: list[tuple[str, str]] = []
    for model, price in table.models.items():
        at = f"models[{json.dumps(model)}]"
        fields = (("input", price.input), ("output", price.output),
                  ("cacheRead", price.cache_read), ("cacheWrite", price.cache_write))
        problems += [(f"{at}.{spelled}", f"{value} USD per million tokens is past any real price ({MAX_PRICE} at most)")
                     for spelled, value in fields if value is not None and Decimal(value) > MAX_PRICE]
        problems += [(f"{at}.{spelled}", "cached input is priced at `input`: copperhead counts cache reads and writes "
                      "as input tokens and a run records no split, so a cache price would be published and never "
                      "applied; leave it out") for spelled, value in fields[2:] if value is not None]
        if price.segment in NULL_COST_SEGMENTS and (price.input is not None or price.output is not None):
            problems.append((f"{at}.segment", f"{price.segment} costs null by rule (its tokens are kept, its USD is "
                             "not a token price): list the route under nullCostRoutes, or give input and output null"))
        if price.segment == "harness":
            problems.append((f"{at}.segment", "harness is the project's own scripted agents' segment (gold, noop, "
                             "session scripts), never a model's"))
    # a costed segment's route with no price put its runs in the costed headline as "n/a uncosted"
    problems += [(f"nullCostRoutes[{json.dumps(key)}].segment", f"{route.segment} is priced by the table, not null by "
                  f"rule (null-cost routes are {' or '.join(NULL_COST_SEGMENTS)}): list its models under models with "
                  "their prices, or name the segment that is null by rule") for key, route in table.null_cost_routes.items() if route.segment not in NULL_COST_SEGMENTS]
    return problems


# --------------------------------------------------------------------------- run.recorded


class TaskIdentity(Body, frozen=True, kw_only=True):
    id: Slug
    tier: Tier
    mode: Mode
    expected_outcome: Outcome
    manifest_hash: Hex64
    variant_of: Slug | None = None
    tags: list[str] = field(default_factory=list)


class FixtureIdentity(Body, frozen=True, kw_only=True):
    id: Slug
    sha256: Hex64


class ModelIdentity(Body, frozen=True, kw_only=True):
    id: ModelId
    provider: NonEmpty
    segment: Segment
    pinning: Pinning
    selection_source: SelectionSource


class Ablations(Body, frozen=True, kw_only=True):
    """Runner flags recorded on the run instead of forked task copies."""

    prompt_variant: str | None = None
    max_turns: Annotated[int, Meta(ge=1)] | None = None
    max_repair_cycles: Count | None = None
    tool_subset: list[str] | None = None


#: the condition of a run made with no runner flag: the headline's (`projections/conditions.py`)
DEFAULT_CONDITION = "default"


def condition_key(ablations: Ablations) -> str:
    """`default`, or the flags that were set: `max-turns=2; tool-subset=finish,read_file`.

    Kept beside the flags rather than with the views because the runner's cost estimate keys past
    runs by it too, and runner code reads no projection. Canonical: flags in a fixed order, a tool
    subset as a sorted set, so two keys are equal exactly when the runs had the same flags."""
    parts: list[str] = []
    if ablations.prompt_variant is not None:
        parts.append(f"prompt-variant={ablations.prompt_variant}")
    if ablations.max_turns is not None:
        parts.append(f"max-turns={ablations.max_turns}")
    if ablations.max_repair_cycles is not None:
        parts.append(f"max-repair-cycles={ablations.max_repair_cycles}")
    if ablations.tool_subset is not None:
        parts.append(f"tool-subset={','.join(sorted(set(ablations.tool_subset)))}")
    return "; ".join(parts) if parts else DEFAULT_CONDITION


class Comparability(Body, frozen=True, kw_only=True):
    """The stamp that decides which records may share a table (STANDARD-FACTS, Comparability)."""

    schema_version: SemVer
    suite_version: SemVer
    task_manifest_hash: Hex64
    fixture_sha256: Hex64
    copperhead_version: str | None
    copperhead_commit: str | None
    kicad_cli_version: str | None
    runtime: NonEmpty
    node_version: str | None
    platform: NonEmpty
    #: the operating system by name and release (`Debian GNU/Linux 12 (bookworm)`), beside the
    #: platform tag: the standard's reference environment names the OS; null for a run that did
    #: not record one (every run before `run.recorded` version 2)
    os: str | None = None


class RunStats(Body, frozen=True, kw_only=True):
    """The transcript's `run-end` figures, copied verbatim so a reader needs no sandbox."""

    exit_path: ExitPath
    turns_used: Count
    max_turns: Count
    repair_cycles_used: Count
    max_repair_cycles: Count
    tokens_in: TokenCount
    tokens_out: TokenCount
    duration_ms: Count | None = None
    files_touched: list[str] = field(default_factory=list)


class Cost(Body, frozen=True, kw_only=True):
    """USD as integer micro-dollars (never a binary float), with the price table used."""

    usd_micros: Count | None
    price_table_version: str | None


class CostCapStop(Body, frozen=True, kw_only=True):
    """A run a money limit stopped: the runner's recording proxy refused its next model call once
    the spend it metered reached the run's cap or its campaign's budget (null: not set)."""

    cap_usd_micros: Count | None
    spent_usd_micros: Count
    campaign_budget_usd_micros: Count | None = None


class SandboxRef(Body, frozen=True, kw_only=True):
    """Where the preserved run lives and the commits that pin it.

    `seed_sha` (the fixture tree plus the task's `.copperhead/config.json`, committed with a
    fixed signature and time) must be reproducible from the fixture alone; `baseline_sha` is the
    seed plus whatever setup commands wrote (equal to the seed when none ran); `capture_sha` is
    the snapshot of the end state (tracked, untracked and ignored files) on top of the agent's
    `head_sha`; `evidence_sha` holds the verification reports. `seed_config` is the exact
    `.copperhead/config.json` the seed holds, so the seed can be rebuilt even after the task's
    config changes.
    """

    seed_sha: Hex40
    seed_config: NonEmpty
    baseline_sha: Hex40
    head_sha: Hex40
    capture_sha: Hex40
    evidence_sha: Hex40
    store: NonEmpty
    store_blake3: Hex64
    store_bytes: Count
    #: the stash a failed copperhead run left (its work, before the rollback), kept in the bundle
    stash_sha: Hex40 | None = None


class EvidenceDigest(Body, frozen=True, kw_only=True):
    path: NonEmpty
    blake3: Hex64
    bytes: Count


class CassetteRef(Body, frozen=True, kw_only=True):
    """The run's model exchanges as the recording proxy saw them, stored content-addressed at
    `path` (`results/cassettes/<blake3>.json`): what `cbledger rerun` serves back."""

    path: NonEmpty
    blake3: Hex64
    bytes: Count
    #: how many requests it holds
    exchanges: Count


class PassRef(Body, frozen=True, kw_only=True):
    """Which feedback pass of an attempt a run is (docs/RUNNER.md, section 12). Pass 1 is the
    run any attempt makes first, the headline's; pass k > 1 revised the sandbox pass k - 1 left,
    told only the hints in `hints`."""

    index: Annotated[int, Meta(ge=1, le=MAX_PASSES)]
    #: the passes this attempt could take: the task's allowance, capped by `cbledger run --passes`
    allowed: Annotated[int, Meta(ge=1, le=MAX_PASSES)]
    #: pass 1's run id (null on pass 1 itself)
    first: RunId | None = None
    #: the run id of the pass this one revised (null on pass 1)
    previous: RunId | None = None
    #: the hints this pass was given as its task message, in order (empty on pass 1)
    hints: list[NonEmpty] = field(default_factory=list)
    #: whether the previous pass's rolled-back work was restored and committed by the runner
    carried_over: bool = False


class SetupSkip(Body, frozen=True, kw_only=True):
    command: NonEmpty
    reason: NonEmpty


class Timings(Body, frozen=True, kw_only=True):
    started_at: UtcDateTime
    ended_at: UtcDateTime
    duration_ms: Count
    agent_ms: Count
    verify_ms: Count

    def __post_init__(self) -> None:
        force_setattr(self, "started_at", to_utc(self.started_at))
        force_setattr(self, "ended_at", to_utc(self.ended_at))


class HarnessFailure(Body, frozen=True, kw_only=True):
    """Why a run did not measure the model: the harness stopped before any assistant turn, its
    commit failed for want of a git identity, or its environment failed it at any turn (the
    provider's error status, a broken connection or answer, a provider that never answered, a
    signal the runner did not send). Such a run enters no model metric.

    `turn` and `status` came with the environment kinds; absent on the kinds before them, so
    those events read and re-encode exactly as stored."""

    kind: Literal[
        "preflight", "provider-config", "missing-key", "no-model-turn", "git-identity",
        "harness-exit", "harness-signal", "harness-crash", "provider-status", "provider-transport", "provider-timeout",
    ]
    detail: NonEmpty
    #: the model call the failure struck (1-based, within the run's pass): one more than the
    #: assistant turns the transcript holds
    turn: Annotated[int, Meta(ge=1)] | UnsetType = UNSET
    #: the provider's HTTP status, for `provider-status`
    status: Annotated[int, Meta(ge=100, le=599)] | UnsetType = UNSET


#: The id of one `cbledger run` invocation: every run it made carries it, so a maintainer can
#: name exactly the runs of one batch (the regression gate's candidate, say).
BatchId = Annotated[
    str,
    Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]*(?!\n)$", max_length=100, description="the id of a batch of runs"),
]

#: The id of a campaign: one run plan (task set, repeats, model, condition, run mode, suite
#: version), however many invocations it takes to fill (docs/RUNNER.md, "Campaigns").
CampaignId = Annotated[
    str,
    Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*(?!\n)$", max_length=64, description="the id of a campaign"),
]


class CampaignSlot(Body, frozen=True, kw_only=True):
    """Which slot of which campaign a run fills, and which attempt at it. The run id is made from
    these three (`runner.campaign.run_id`), so a slot recorded twice is the same event id with
    another body: the ledger refuses it as a conflict, whichever driver tried."""

    id: CampaignId
    #: the task's k-th repeat within the campaign (its `repeat` is k past the campaign's offset)
    slot: Annotated[int, Meta(ge=1)]
    #: 1, then one more per `--retry-env` retry of a run that failed for a reason not the model's
    attempt: Annotated[int, Meta(ge=1)] = 1


class RunRecorded(Body, frozen=True, kw_only=True):
    """One execution of one task by one model in its own sandbox. Recorded once; grades are
    separate events so a run can be re-scored under a later suite version.

    Version 2 added `batch`, `providerModels` and `comparability.os` (a version-1 body reads as
    null, empty and null: those runs recorded none of them).
    """

    run_id: RunId
    task: TaskIdentity
    fixture: FixtureIdentity
    model: ModelIdentity
    repeat: Annotated[int, Meta(ge=1)]
    repeats_planned: Annotated[int, Meta(ge=1)]
    run_mode: RunMode
    llm_cache: Literal[False] = False
    ablations: Ablations = field(default_factory=Ablations)
    comparability: Comparability
    stats: RunStats | None
    runner_exit: Literal["cap-exceeded", "agent-error"] | None = None
    runner_note: str | None = None
    replay_of: RunId | None = None
    cost: Cost
    sandbox: SandboxRef
    evidence: dict[NonEmpty, EvidenceDigest]
    setup_skipped: list[SetupSkip] = field(default_factory=list)
    timings: Timings
    harness_failure: HarnessFailure | None = None
    #: the `cbledger run` invocation that made this run (null: recorded before batches had ids)
    batch: BatchId | None = None
    #: the model ids the provider named in its answers, distinct, in order of first appearance:
    #: read from the transcript where the harness writes them, else from the loopback endpoint's
    #: own answers; empty when neither says (copperhead 0.9.0 does not write them)
    provider_models: list[NonEmpty] = field(default_factory=list)
    #: how the run's processes were confined. Absent on the runs recorded before the runner
    #: stated it, every one of which ran unsandboxed (the sandbox did not exist yet); absent by
    #: default, so those events read and re-encode exactly as stored.
    isolation: Isolation | UnsetType = UNSET
    #: the billed lane of the run's model calls; absent on runs recorded before lanes were
    #: named, every one of which is the system under test
    lane: Literal["system-under-test"] | UnsetType = UNSET
    #: the surface it came through (`ledger/surfaces.json`); absent on runs recorded before
    #: surfaces were named, whose surface is read off their run mode and model route
    surface: NonEmpty | UnsetType = UNSET
    #: the run's recorded model exchanges (a cassette). Absent on the runs recorded before the
    #: runner kept them and on runs whose route cannot be recorded (a saved login; the runner's
    #: note says so); absent by default, so those events read and re-encode exactly as stored.
    cassette: CassetteRef | UnsetType = UNSET
    #: the feedback pass this run is. Absent on a run made without passes (every run recorded
    #: before passes existed), so those events read and re-encode exactly as stored.
    passes: PassRef | UnsetType = UNSET
    #: the money limit that stopped the run, with what it had spent. Absent on a run no limit
    #: stopped (every run recorded before limits existed), so those events re-encode as stored.
    cost_cap: CostCapStop | UnsetType = UNSET
    #: the campaign slot this run fills. Absent on runs recorded before campaigns existed (and on
    #: a rerun), so those events read and re-encode exactly as stored.
    campaign: CampaignSlot | UnsetType = UNSET


# --------------------------------------------------------------------------- grade.recorded


class AssertionOutcome(Body, frozen=True, kw_only=True):
    id: NonEmpty
    type: NonEmpty
    status: Literal["pass", "fail"]
    weight: Weight
    required: bool
    evidence_source: EvidenceSource
    detail: NonEmpty


class GradeRecorded(Body, frozen=True, kw_only=True):
    """A verdict on a run under one suite version. There is no third state: an assertion that
    cannot be evaluated fails, with a detail saying why."""

    run_id: RunId
    suite_version: SemVer
    grader_version: SemVer
    task_manifest_hash: Hex64
    assertions: Annotated[list[AssertionOutcome], Meta(min_length=1)]
    verdict: Literal["pass", "fail"]
    partial_credit: Fraction
    first_failed_required: str | None
    failure_category: FailureCategory | None
    dominant_tool_error: str | None = None

    def __post_init__(self) -> None:
        required_failed = [a.id for a in self.assertions if a.required and a.status == "fail"]
        if self.verdict == "pass" and required_failed:
            raise ValueError(f"verdict pass with failed required assertion {required_failed[0]!r}")
        if self.verdict == "fail" and not required_failed:
            raise ValueError("verdict fail but every required assertion passed")
        if (self.verdict == "fail") != (self.failure_category is not None):
            raise ValueError("failureCategory must be present exactly when verdict is fail")
        expected_first = required_failed[0] if required_failed else None
        if self.first_failed_required != expected_first:
            raise ValueError(
                f"firstFailedRequired is {self.first_failed_required!r}, "
                f"assertions say {expected_first!r}"
            )


# --------------------------------------------------------------------------- run.retracted


class RunRetracted(Body, frozen=True, kw_only=True):
    """Drops a run (and its grades) from every view; the run stays in the log."""

    run_id: RunId
    reason: NonEmpty


# --------------------------------------------------------------------------- cassette.attached


class SessionSource(Body, frozen=True, kw_only=True):
    """The session script a scripted run was served, as the rerun found it: `path` within the
    definitions (`tasks/<id>/sessions/<name>.json`, or the project's `sessions/<name>.json`), the
    suite version whose kept definitions held it (absent: the project's working tree), and its
    SHA-256, the address the kept definitions list it under."""

    path: NonEmpty
    suite_version: SemVer | UnsetType = UNSET
    sha256: Hex64


class CassetteAttached(Body, frozen=True, kw_only=True):
    """A cassette for a run recorded before cassettes existed (`run.recorded` is immutable, so it
    cannot gain the field). It was recorded at a re-execution, not at the run: the recording proxy
    stood in front of the session script the run was served (`session`), the same copperhead
    build (`copperheadVersion`, `copperheadCommit`) ran the run again, and the re-execution
    reproduced the run's end state, diff, transcript and grade. So it pins the requests that
    build sends given those answers; it does not prove the original run sent them."""

    run_id: RunId
    cassette: CassetteRef
    origin: Literal["session-rerun"] = "session-rerun"
    session: SessionSource
    copperhead_version: NonEmpty
    copperhead_commit: NonEmpty | None = None


# --------------------------------------------------------------------------- rubric.scored


#: Who a model call was billed to: the model being measured, or the benchmark's own judging.
Lane = Literal["system-under-test", "harness-judge"]


class LaneUsage(Body, frozen=True, kw_only=True):
    """What one billed lane spent on one event, kept apart so neither lane hides in the other."""

    lane: Lane
    tokens_in: TokenCount
    tokens_out: TokenCount
    cost: Cost
    #: the model ids the provider named in its answers, distinct, in order of first appearance
    provider_models: list[NonEmpty] = field(default_factory=list)


class CriterionScore(Body, frozen=True, kw_only=True):
    """One rubric criterion as the judge scored it: points out of the criterion's maximum."""

    id: NonEmpty
    points: Count
    max_points: Annotated[int, Meta(ge=1, le=1000)]

    def __post_init__(self) -> None:
        if self.points > self.max_points:
            raise ValueError(f"criterion {self.id!r}: {self.points} points of at most {self.max_points}")


class RubricScored(Body, frozen=True, kw_only=True):
    """A model-judged opinion, fenced: it has its own section and moves no headline number.

    `criteria` and `usage` (the judge lane's tokens, cost and echoed model) are absent on a score
    appended by hand before `cbledger judge` existed; absent by default, so such an event reads
    and re-encodes exactly as stored.
    """

    run_id: RunId
    suite_version: SemVer | None = None
    judge_model: ModelId
    prompt_sha256: Hex64
    score: Annotated[float, Meta(ge=-1e6, le=1e6)]
    rationale: str | None = None
    criteria: list[CriterionScore] | UnsetType = UNSET
    usage: LaneUsage | UnsetType = UNSET

    def __post_init__(self) -> None:
        # The score is the points over the maximum (docs/JUDGING.md): a hand-appended 0.99 beside
        # criteria worth 4/5 was shown on the leaderboard as the judge's and passed verification.
        if self.criteria:
            points, most = sum(c.points for c in self.criteria), sum(c.max_points for c in self.criteria)
            if not math.isclose(self.score, points / most, rel_tol=1e-9, abs_tol=1e-12):
                raise ValueError(f"score {self.score!r} is not its criteria's {points} points of {most} ({points / most!r})")


# --------------------------------------------------------------------------- review.recorded


class ReviewRecorded(Body, frozen=True, kw_only=True):
    """A root-cause narrative of a run, by a person or a model: report-only, read by no metric."""

    run_id: RunId
    narrative: NonEmpty
    #: who wrote it: a reviewer's name, or the model id of a judge
    author: NonEmpty
    usage: LaneUsage | None = None


# --------------------------------------------------------------------------- evidence.imported


class ImportedFile(Body, frozen=True, kw_only=True):
    """A file kept beside an import (a prompt, a transcript), addressed by its digest."""

    role: NonEmpty
    original_path: NonEmpty
    stored_path: NonEmpty
    sha256: Hex64
    bytes: Count


class ImportSummary(Body, frozen=True, kw_only=True):
    """What the leaderboard shows of an import, extracted once at import time."""

    task_id: str | None = None
    model: str | None = None
    verdict: str | None = None
    suite_version: str | None = None
    fixture_sha256: str | None = None
    run_date: str | None = None
    repeat: Count | None = None
    variant: str | None = None
    benchmark: str | None = None
    surface_id: str | None = None


class EvidenceImported(Body, frozen=True, kw_only=True):
    """Evidence produced outside this project's runner. Never relabelled as a project-owned run,
    never re-gradable, shown in its own section."""

    ownership: Literal["imported", "reviewer-supplied"]
    source: NonEmpty
    original_path: NonEmpty
    format: NonEmpty
    sha256: Hex64
    content: NonEmpty
    summary: ImportSummary
    files: list[ImportedFile] = field(default_factory=list)
    #: the surface it came through (`ledger/surfaces.json`); absent on imports recorded before
    #: surfaces were named. Ownership is the surface's, whatever `ownership` claims.
    surface: NonEmpty | UnsetType = UNSET


# --------------------------------------------------------------------------- spend.unrecorded


class SpendUnrecorded(Body, frozen=True, kw_only=True):
    """What a run killed with its driver spent, which no `run.recorded` holds: the provider billed
    the calls it answered, and the campaign's spend journal (`results/campaigns/<ID>.spend.jsonl`)
    kept each as it was answered. Recorded by the next invocation of the campaign (or the
    interrupt itself) so that what LEADERBOARD.md says was spent reconciles with the bill. An
    operator's figure, not re-derivable offline: the journal is not preserved evidence."""

    campaign: NonEmpty
    run_id: RunId
    #: the invocation the killed run belonged to, as the journal names it (a slot run again later
    #: is another run of another batch, and both were billed)
    batch: BatchId | None = None
    model: ModelId
    usd_micros: Count


# --------------------------------------------------------------------------- checkpoint.published


class CheckpointPublished(Body, kw_only=True, frozen=True):
    """A signed checkpoint of the first `treeSize` events (seq 1..treeSize), as published in
    `results/checkpoints/<treeSize>.txt`. It lands after them, so no checkpoint covers its own
    record: the next one does. The fields must be what the note states (see docs/CHECKPOINTS.md)."""

    origin: NonEmpty
    tree_size: Annotated[int, Meta(ge=1)]
    root_hash: Hex64
    note: NonEmpty

    def __post_init__(self) -> None:
        problem = event_problem(self.note, self.origin, self.tree_size, self.root_hash)
        if problem is not None:
            raise ValueError(problem)


# --------------------------------------------------------------------------- the envelope


class Actor(Body, frozen=True, kw_only=True):
    kind: ActorKind
    name: NonEmpty


class EventBase(
    Struct, tag_field="type", forbid_unknown_fields=True, frozen=True, kw_only=True
):
    """The envelope. `seq` is assigned by the store at append time; a draft carries 0.

    `VERSION` is the version of this type's shape; `version` says which version an event was
    written at, omitted at version 1 (so the events written before types had versions are
    unchanged). An event built in Python is at its class's version. Reading an older stored
    version is `cbledger.ledger.versions`' job, which runs the upcasters before this decode.
    """

    VERSION: ClassVar[int] = 1

    seq: Annotated[int, Meta(ge=0)] = 0
    id: EventId
    at: UtcDateTime
    actor: Actor
    version: (
        Annotated[int, Meta(ge=2, description="this type's schema version; omitted at 1")] | UnsetType
    ) = UNSET

    def __post_init__(self) -> None:
        force_setattr(self, "at", to_utc(self.at))
        current = type(self).VERSION
        if self.version is UNSET:
            if current > 1:
                force_setattr(self, "version", current)
        elif self.version != current:
            raise ValueError(
                f"written at version {self.version}; this build reads {struct_tag(type(self))} "
                f"at version {current} - at `$.version`"
            )


class LedgerCreatedEvent(EventBase, tag="ledger.created", frozen=True, kw_only=True):
    body: LedgerCreated


class SuiteBumpedEvent(EventBase, tag="suite.bumped", frozen=True, kw_only=True):
    body: SuiteBumped


class SuiteArchivedEvent(EventBase, tag="suite.archived", frozen=True, kw_only=True):
    body: SuiteArchived


class PricingPublishedEvent(EventBase, tag="pricing.published", frozen=True, kw_only=True):
    body: PricingPublished


class RunRecordedEvent(EventBase, tag="run.recorded", frozen=True, kw_only=True):
    VERSION: ClassVar[int] = 2  # version 2: batch, providerModels, comparability.os
    body: RunRecorded


class GradeRecordedEvent(EventBase, tag="grade.recorded", frozen=True, kw_only=True):
    body: GradeRecorded


class RunRetractedEvent(EventBase, tag="run.retracted", frozen=True, kw_only=True):
    body: RunRetracted


class RubricScoredEvent(EventBase, tag="rubric.scored", frozen=True, kw_only=True):
    body: RubricScored


class ReviewRecordedEvent(EventBase, tag="review.recorded", frozen=True, kw_only=True):
    body: ReviewRecorded


class CassetteAttachedEvent(EventBase, tag="cassette.attached", frozen=True, kw_only=True):
    body: CassetteAttached


class EvidenceImportedEvent(EventBase, tag="evidence.imported", frozen=True, kw_only=True):
    body: EvidenceImported


class CheckpointPublishedEvent(EventBase, tag="checkpoint.published", kw_only=True, frozen=True):
    body: CheckpointPublished


class SpendUnrecordedEvent(EventBase, tag="spend.unrecorded", frozen=True, kw_only=True):
    body: SpendUnrecorded


Event = (
    LedgerCreatedEvent
    | SuiteBumpedEvent
    | SuiteArchivedEvent
    | PricingPublishedEvent
    | RunRecordedEvent
    | GradeRecordedEvent
    | RunRetractedEvent
    | CassetteAttachedEvent
    | RubricScoredEvent
    | EvidenceImportedEvent
    | ReviewRecordedEvent
    | CheckpointPublishedEvent
    | SpendUnrecordedEvent
)


def struct_tag(cls: type[EventBase]) -> str:
    """The stable dotted type of an event class."""
    tag = cls.__struct_config__.tag
    if not isinstance(tag, str):
        raise TypeError(f"{cls.__name__} has no event type tag")
    return tag


EVENT_CLASSES: tuple[type[EventBase], ...] = get_args(Event)
EVENT_TYPES: dict[str, type[EventBase]] = {struct_tag(cls): cls for cls in EVENT_CLASSES}


def event_type(event: EventBase) -> str:
    return struct_tag(type(event))


# Read off the envelope classes' `body` fields, so that a new event type is declared in one place.
_EVENT_FOR_BODY: dict[type[Body], Callable[..., EventBase]] = {
    next(f.type for f in structs.fields(cls) if f.name == "body"): cls for cls in EVENT_CLASSES
}


def make_event(
    body: Body, *, id: str, actor: Actor, at: _dt.datetime | None = None
) -> EventBase:
    """Wraps a body in its envelope, choosing the event class from the body's type."""
    cls = _EVENT_FOR_BODY[type(body)]
    return cls(id=id, actor=actor, at=at or _dt.datetime.now(_dt.UTC), body=body)
