"""One run, start to finish: sandbox → setup → agent → capture → verify → grade → preserve →
events. Each step's output is the next one's only input, so a run that fails half way leaves
nothing under `results/` (the bundle and the two events are written last, the events in one
durable batch).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import json
import os
import secrets
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard, get_args

import msgspec
import pygit2
from blake3 import blake3
from msgspec import UNSET, UnsetType

from cbledger import credentials, invocation
from cbledger.errors import ConflictError, SecretFound, UserError
from cbledger.grading.evidence import bundle as evidence_mod
from cbledger.grading.evidence.transcript import Transcript
from cbledger.grading.grader import GRADER_VERSION, Grade, grade
from cbledger.ledger import durable, surfaces
from cbledger.ledger.events import (
    SCHEMA_VERSION,
    Ablations,
    Actor,
    CampaignSlot,
    CassetteRef,
    Comparability,
    Cost,
    EventBase,
    EvidenceDigest,
    FixtureIdentity,
    GradeRecorded,
    ModelIdentity,
    ModelPrice,
    PassRef,
    PricingPublished,
    RunRecorded,
    RunStats,
    SandboxRef,
    SetupSkip,
    TaskIdentity,
    Timings,
    make_event,
)
from cbledger.ledger.store import Appended, LedgerStore, remove_unless_landed
from cbledger.ledger.types import MAX_COUNT, MAX_TOKENS, ExitPath, RunMode, Segment
from cbledger.runner import (
    backstop,
    check_capture,
    confined_verify,
    isolation,
    preserve,
    pricing,
    spend,
)
from cbledger.runner import campaign as campaign_mod
from cbledger.runner import cassette as cassette_mod
from cbledger.runner import sandbox as sandbox_mod
from cbledger.runner.agents.base import Agent, AgentInput, AgentResult
from cbledger.runner.agents.copperhead import CopperheadCli, basic_environment
from cbledger.runner.environment import Environment
from cbledger.runner.harness_failure import UNPRESERVED
from cbledger.runner.harness_failure import detect as detect_harness_failure
from cbledger.runner.plan import PlannedRun
from cbledger.tasks.catalog import Catalog, Fixture, Task
from cbledger.workspace import PENDING_EVENTS, Workspace, bundle_name, is_database_url

KNOWN_EXITS: frozenset[str] = frozenset(get_args(ExitPath))


def is_exit_path(value: object) -> TypeGuard[ExitPath]:
    return isinstance(value, str) and value in KNOWN_EXITS


#: run modes whose agent is the copperhead process (their harness can fail before the model)
HARNESS_RUN_MODES = ("agent", "scripted")
#: the wall clock a setup command (`init`) may take
SETUP_CAP_SEC = 300
#: run modes that spend no money: cost is null by rule
UNPRICED_RUN_MODES = ("gold", "noop", "scripted")


@dataclass(frozen=True)
class RunSettings:
    """Everything about a suite run that is the same for each of its runs."""

    root: Path
    catalog: Catalog
    agent: Agent
    run_mode: RunMode
    suite_version: str
    environment: Environment
    price_table: PricingPublished | None
    ablations: Ablations
    sandbox_root: Path
    keep_sandboxes: bool
    copperhead: CopperheadCli | None
    actor: Actor
    #: how every process of a run is confined (bubblewrap, or `--unsandboxed`)
    confinement: isolation.Confinement
    segment_override: str | None = None
    #: the id every run of this `cbledger run` invocation carries (`new_batch_id`)
    batch: str | None = None
    #: the workspace's results directory when it is not `results/` under the root
    results: Path | None = None


@dataclass(frozen=True)
class RunOutput:
    """A finished run, not yet published: the bundle waits at `staged` until `publish` moves
    it to `final` and appends the events."""

    run: RunRecorded
    grade: GradeRecorded
    events: list[EventBase]
    staged: Path
    final: Path
    sandbox: Path | None
    #: where the events wait when the ledger refuses their append
    pending: Path
    #: (staged, final) of the run's cassette, when its exchanges were recorded
    cassette: tuple[Path, Path] | None = None

    def discard_staged(self) -> None:
        """Removes what waits to be published (the staged bundle and cassette): a run shipped
        elsewhere, or refused before its publish."""
        self.staged.unlink(missing_ok=True)
        if self.cassette is not None:
            self.cassette[0].unlink(missing_ok=True)


def new_run_id(planned: PlannedRun, started: _dt.datetime) -> str:
    if planned.campaign is not None:
        return campaign_mod.run_id(planned.campaign, planned.task.id, planned.slot, planned.attempt)
    model = planned.model_id.replace(":", "-")
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{model}-{planned.task.id}-r{planned.repeat}-{secrets.token_hex(3)}"


def new_batch_id(started: _dt.datetime) -> str:
    """One id per invocation of the runner: its start time and a random suffix."""
    return f"{started.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"


def provider_models(transcript: Transcript, result: AgentResult) -> list[str]:
    """The model ids the provider named: the transcript's, where the harness writes them, then
    those the loopback endpoint answered with; distinct, in order of first appearance."""
    out: list[str] = []
    for model in (*transcript.provider_models(), *result.provider_models):
        if model not in out:
            out.append(model)
    return out


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def run_setup(settings: RunSettings, planned: PlannedRun, workdir: Path) -> list[SetupSkip]:
    skipped: list[SetupSkip] = []
    for command in planned.task.manifest.setup.commands:
        if settings.copperhead is None:
            skipped.append(SetupSkip(command=command, reason="copperhead CLI not available (set --copperhead-cli or $COPPERHEAD_CLI)"))
            continue
        # model-free and network-free: confined like the agent, with no network at all
        job = settings.copperhead.job(
            ["--repo", str(workdir), command, "--no-hooks"], workdir, basic_environment(), SETUP_CAP_SEC, settings.confinement,
        )
        outcome = isolation.run(job, settings.confinement)
        if outcome.killed is not None:
            skipped.append(SetupSkip(command=command, reason=f"copperhead {command} killed at {outcome.killed}"))
        elif outcome.exit_code != 0:
            skipped.append(SetupSkip(command=command, reason=f"copperhead {command} exited {outcome.exit_code}"))
    return skipped


def stats_from(
    transcript: Transcript, runner_exit: str | None = None, max_turns: int = 1,
    cassette: cassette_mod.Cassette | None = None, agent_ms: int | None = None, *, cache: bool = True,
) -> tuple[RunStats | None, str | None]:
    """The run-end figures. A transcript without `run-end` (a crash, a kill at the cap) gets
    stats synthesized by the runner — exit path `cap-exceeded` or `stalled`, the turns it can
    count, the repair-cycle cap its `run-start` configured, the agent's known duration, and the
    tokens its cassette's answered requests used (`cbledger.runner.spend`; zero without one) —
    and a note saying so, so every agent record still states how it ended and what it spent."""
    end = transcript.run_end
    if end is None:
        exit_path: ExitPath = runner_exit if is_exit_path(runner_exit) else "stalled"
        turns = len(transcript.of_type("assistant"))
        note = f"no run-end in the transcript; stats synthesized by the runner (exit path {exit_path})"
        used = spend.from_cassette(cassette, cache=cache)
        if used is not None:
            note += f"; tokens from the cassette's {used.calls} answered model call(s)"
        return (
            RunStats(
                exit_path=exit_path,
                turns_used=turns,
                max_turns=max_turns,
                repair_cycles_used=0,
                max_repair_cycles=_configured_repair_cycles(transcript),
                tokens_in=min(used.tokens_in, MAX_TOKENS) if used else 0,
                tokens_out=min(used.tokens_out, MAX_TOKENS) if used else 0,
                duration_ms=agent_ms,
                files_touched=[],
            ),
            note,
        )
    recorded_exit = end.get("exitPath")
    if not is_exit_path(recorded_exit):
        return None, f"run-end exit path {recorded_exit!r} is not one this runner knows"
    files: list[str] = []
    for ev in transcript.of_type("run-committed"):
        for f in ev.data.get("files") or []:
            if isinstance(f, str) and f not in files:
                files.append(f)

    invalid: list[str] = []

    def figure(key: str, limit: int) -> int | None:
        """The figure if it is a whole number in range; any other value stated is named in the
        note (a figure no run can have is kept out of every view), an absent one is None."""
        value = end.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            invalid.append(f"{key} {credentials.printable(json.dumps(value))[:40]} is not a whole number")
            return None
        if not 0 <= value <= limit:
            invalid.append(f"{key} {str(value)[:40]} is out of range (0 to {limit})")
            return None
        return value

    def count(key: str, limit: int = MAX_COUNT) -> int:
        return figure(key, limit) or 0

    duration = figure("durationMs", MAX_COUNT)
    stats = (
        RunStats(
            exit_path=recorded_exit,
            turns_used=count("turnsUsed"),
            max_turns=count("maxTurns"),
            repair_cycles_used=count("repairCyclesUsed"),
            max_repair_cycles=count("maxRepairCycles"),
            tokens_in=count("tokensIn", MAX_TOKENS),
            tokens_out=count("tokensOut", MAX_TOKENS),
            duration_ms=duration,
            files_touched=sorted(files),
        )
    )
    if invalid:
        return stats, "invalid run-end figures, recorded as 0: " + "; ".join(invalid)
    return stats, None


def _configured_repair_cycles(transcript: Transcript) -> int:
    """The repair-cycle cap the harness's `run-start` says it ran under (0 when it says none)."""
    for ev in transcript.of_type("run-start"):
        config = ev.data.get("config")
        value = config.get("maxRepairCycles") if isinstance(config, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
            return value
    return 0


def tokens_unread(transcript: Transcript) -> bool:
    """Whether `run-end` states a token figure `stats_from` could not read (recorded as 0): the
    run's cost is then unknown, not the $0 those zeros price at."""
    end = transcript.run_end
    if end is None:
        return False
    return any(not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_TOKENS
               for v in (end.get("tokensIn"), end.get("tokensOut")))


def spend_known(transcript: Transcript, cassette: cassette_mod.Cassette | None) -> bool:
    """Whether the run's spend is known: copperhead's `run-end` reported it, or the cassette
    holds the usage of the requests the provider answered."""
    return transcript.run_end is not None or spend.from_cassette(cassette) is not None


def model_identity(settings: RunSettings, model_id: str, provider: str | None) -> tuple[ModelIdentity, ModelPrice | None]:
    if settings.run_mode in ("gold", "noop"):
        return ModelIdentity(id=model_id, provider="harness", segment="harness", pinning="strong", selection_source="flag"), None
    if settings.run_mode == "scripted":
        # The real harness against a session script: no model, no price, never a model row.
        return ModelIdentity(id=model_id, provider="scripted-endpoint", segment="harness", pinning="strong", selection_source="flag"), None
    r, segment = route_and_segment(model_id, settings.price_table, settings.segment_override)
    pinning = r.pinning if r else ("weak" if segment == "saved-login" else "strong")
    provider = provider or (model_id.split(":", 1)[0] if ":" in model_id else "api")
    return ModelIdentity(id=model_id, provider=provider, segment=segment, pinning=pinning, selection_source="flag"), (r.price if r else None)


def route_and_segment(
    model_id: str, table: PricingPublished | None, segment_override: str | None
) -> tuple[pricing.Route | None, Segment]:
    """A real model's price-table route (None: unpriced) and its cost segment; refused when
    neither the table nor --segment gives one."""
    r = pricing.route(model_id, table)
    given = cost_segment(segment_override)
    if r is not None and given is not None and given != r.segment:
        # the table's price would be kept and its segment dropped: a model filed, and ranked,
        # beside models it does not compete with
        raise UserError(
            f"--segment {given}: price table {table.table_version if table else ''} files model {model_id} under "
            f"{r.segment}; --segment is for a model the table does not list (drop it; a campaign's plan keeps the one it "
            "was started with: name a new campaign with --campaign)"
        )
    segment = given or (r.segment if r else None)
    if segment is None:
        raise UserError(
            f"model {model_id} is not in the latest price table; publish prices (`{invocation.command('pricing', 'publish', 'FILE')}`) "
            "or name its segment with --segment"
        )
    return r, segment


def cost_segment(value: str | None) -> Segment | None:
    """`--segment`, refused unless it names a cost segment `run.recorded` can carry."""
    if not value:
        return None
    try:
        segment: Segment = msgspec.convert(value, Segment)
    except msgspec.ValidationError:
        choices = ", ".join(get_args(Segment))
        raise UserError(f"--segment {value!r} is not a cost segment (one of: {choices})") from None
    if segment == "harness":
        # a model's runs filed there leave every model row and read as the harness's own
        raise UserError("--segment harness: that segment is the project's scripted agents' (gold, noop, session "
                        "scripts); a model run needs the segment of its route (a campaign's plan keeps the one it was "
                        "started with: name a new campaign with --campaign)")
    return segment


def grade_body(run_id: str, suite_version: str, manifest_hash: str, g: Grade) -> GradeRecorded:
    return GradeRecorded(
        run_id=run_id,
        suite_version=suite_version,
        grader_version=GRADER_VERSION,
        task_manifest_hash=manifest_hash,
        assertions=list(g.outcomes),
        verdict=g.verdict,
        partial_credit=g.partial_credit,
        first_failed_required=g.first_failed_required,
        failure_category=g.failure_category,
        dominant_tool_error=g.dominant_tool_error,
    )


def execute(settings: RunSettings, planned: PlannedRun) -> RunOutput:
    """Steps 1–9 and 11 of one run (docs/RUNNER.md §2), one function each. Step 10, `publish`,
    is left to the caller, which serializes appends across concurrent runs."""
    with prepared_sandbox(settings, planned) as ready:
        agent_run = run_agent(settings, planned, ready.fixture, ready.start, ready.baseline)
        return finish_or_record(settings, planned, ready, ready.start, agent_run)[0]


@dataclass(frozen=True)
class Prepared:
    """Steps 1–3 done: the sandbox the agent acts on (one run's, or every feedback pass's), and
    the runner's own copy of its baseline, which a run that cannot be preserved is recorded from."""

    fixture: Fixture
    start: RunStart
    seed: Seed
    baseline: Baseline
    kept: pygit2.Repository


@contextlib.contextmanager
def prepared_sandbox(settings: RunSettings, planned: PlannedRun) -> Iterator[Prepared]:
    """Steps 1–3 on entry and step 11 on every way out, so the sandbox and the kept baseline
    are removed whatever the runs made in it did (`execute`, `passes.execute_passes`)."""
    fixture = settings.catalog.fixture_for(planned.task)
    start = open_sandbox(settings, planned)
    kept_dir = start.workdir.parent / f".{start.run_id}.baseline.git"
    try:
        seed = plant_seed(settings, start, planned.task, fixture)
        baseline = set_up(settings, planned, start, seed)
        kept = sandbox_mod.keep_baseline(seed.repo, baseline.sha, kept_dir)
        yield Prepared(fixture, start, seed, baseline, kept)
    finally:
        remove_sandbox(settings, start)
        shutil.rmtree(kept_dir, ignore_errors=True)


def finish_or_record(
    settings: RunSettings, planned: PlannedRun, ready: Prepared, start: RunStart, agent_run: AgentRun,
    pass_ref: PassRef | None = None,
) -> tuple[RunOutput, Graded | None]:
    """Steps 5–9 on what the agent left (`start` names the run: a later pass has its own id),
    with the evidence it was graded from. Once the agent has run, the run is recorded whatever
    failed after it: a repository it broke, a file no reader survives, a tool that failed on its
    output records it from its baseline, failed, with the reason, and no evidence (None): there
    is nothing safe to go on from."""
    try:
        return finish_graded(settings, planned, ready.fixture, start, ready.seed, ready.baseline, agent_run, pass_ref)
    except Exception as exc:
        # a step's tool killed by the Ctrl-C that abandons the run (a host `git` shares the
        # terminal's process group) is no failure to record: the run is abandoned whole
        isolation.give_up()
        return record_unpreserved(
            settings, planned, ready.fixture, start, ready.seed, ready.baseline, agent_run, ready.kept, exc, pass_ref,
        ), None


def finish_graded(
    settings: RunSettings, planned: PlannedRun, fixture: Fixture, start: RunStart, seed: Seed, baseline: Baseline,
    agent_run: AgentRun, pass_ref: PassRef | None = None,
) -> tuple[RunOutput, Graded]:
    """Steps 5–9 on what the agent left, and the evidence the grade was made from (a feedback
    pass's hints read it)."""
    sandbox_mod.reclaim(start.workdir, evidence_mod.LIVE_REPORTS_DIR)
    end = capture_end_state(start, seed, baseline)
    verified = verify_end_state(start, fixture, end, check_with(settings, planned.task), settings.confinement)
    baseline, end, verified = scan_for_credentials(start, seed, baseline, end, verified)
    graded = grade_end_state(planned.task, fixture, baseline, agent_run, end, verified)
    output = preserve_run(settings, planned, fixture, start, seed, baseline, agent_run, end, verified, graded, pass_ref=pass_ref)
    return output, graded


def record_unpreserved(
    settings: RunSettings, planned: PlannedRun, fixture: Fixture, start: RunStart, seed: Seed, baseline: Baseline,
    agent_run: AgentRun, kept: pygit2.Repository, exc: Exception, pass_ref: PassRef | None = None,
) -> RunOutput:
    """A run whose end state could not be kept, recorded from the runner's own copy of its
    baseline: the capture is the baseline's tree, the evidence holds `runner.json` saying why
    (and the harness logs, when they are still plain files), so the grade fails on that finding."""
    reason = credentials.printable(str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}")
    when = int(time.time())
    sig = sandbox_mod.signature(*preserve.CAPTURE_SIGNATURE, when)
    base = pygit2.Oid(hex=baseline.sha)
    tree = kept[base].peel(pygit2.Tree).id
    capture = kept.create_commit(
        None, sig, sig, f"capture of run {start.run_id}: not preserved; the baseline stands in\n", tree, [base])
    index = pygit2.Index()
    report = json.dumps({"unreadable": reason}, indent=2, sort_keys=True).encode() + b"\n"
    index.add(pygit2.IndexEntry(f"{evidence_mod.RUNNER_REPORT}.json", kept.create_blob(report), pygit2.enums.FileMode.BLOB))
    cut: dict[str, object] = {}
    for name, data in preserve.bounded_logs(preserve.plain_agent_logs(start.workdir), cut).items():
        index.add(pygit2.IndexEntry(preserve.HARNESS_LOG_PREFIX + name, kept.create_blob(data), pygit2.enums.FileMode.BLOB))
    if cut:
        index.add(pygit2.IndexEntry(preserve.CUT_RECORD, kept.create_blob(preserve.cut_record(cut)), pygit2.enums.FileMode.BLOB))
    evidence = kept.create_commit(None, sig, sig, "evidence: the runner's findings\n", index.write_tree(kept), [capture])
    kept.references.create(evidence_mod.CAPTURE_REF, capture, force=True)
    kept.references.create(evidence_mod.EVIDENCE_REF, evidence, force=True)
    end = EndState(kept, baseline.sha, str(capture), when, None)
    verified = Verification(str(evidence), 0)
    baseline, end, verified = scan_for_credentials(start, seed, baseline, end, verified)
    graded = grade_end_state(planned.task, fixture, baseline, agent_run, end, verified)
    return preserve_run(
        settings, planned, fixture, start, seed, baseline, agent_run, end, verified, graded,
        note=f"{UNPRESERVED}{reason}", pass_ref=pass_ref,
    )


@dataclass(frozen=True)
class RunStart:
    """Step 1: the run's id, its own directory under the sandbox root, and when it began."""

    run_id: str
    workdir: Path
    started: _dt.datetime
    t0: float


@dataclass(frozen=True)
class Seed:
    """Step 2: the sandbox's repository at the reproducible seed commit."""

    repo: pygit2.Repository
    sha: str
    config: bytes


@dataclass(frozen=True)
class Baseline:
    """Step 3: the commit the agent starts from, and the setup commands that could not run."""

    sha: str
    skipped: list[SetupSkip]


@dataclass(frozen=True)
class AgentRun:
    """Step 4: how the agent stopped, as the runner saw it."""

    result: AgentResult
    agent_ms: int


@dataclass(frozen=True)
class EndState:
    """Step 5: the agent's HEAD (as preserved: rebuilt when a blob it committed was cut) and the
    capture commit of the whole working tree on top of it. `repo` is opened afresh after the agent, which may have rewritten the repository."""

    repo: pygit2.Repository
    head_sha: str
    capture_sha: str
    when: int
    #: the stash a failed copperhead run leaves with its work, kept with the bundle
    stash_sha: str | None


@dataclass(frozen=True)
class Verification:
    """Step 6: the commit holding kicad-cli's reports on the end state."""

    evidence_sha: str
    verify_ms: int


@dataclass(frozen=True)
class Graded:
    """Step 7: the evidence as the grader read it, and its grade."""

    evidence: evidence_mod.Evidence
    grade: Grade


def open_sandbox(settings: RunSettings, planned: PlannedRun) -> RunStart:
    """1. Sandbox: a directory of the run's own; the run id makes repeats never share one."""
    started = _dt.datetime.now(_dt.UTC)
    t0 = time.perf_counter()
    run_id = new_run_id(planned, started)
    return RunStart(run_id, settings.sandbox_root / run_id, started, t0)


def plant_seed(settings: RunSettings, start: RunStart, task: Task, fixture: Fixture) -> Seed:
    """2. Seed: a fresh repository in the sandbox, checked out at the deterministic seed commit."""
    repo, sha, config = sandbox_mod.create(start.workdir, task, fixture, settings.ablations)
    return Seed(repo, sha, config)


def set_up(settings: RunSettings, planned: PlannedRun, start: RunStart, seed: Seed) -> Baseline:
    """3. Setup: the task's setup commands, and what they wrote committed as the baseline."""
    skipped = run_setup(settings, planned, start.workdir)
    message = "setup: " + " ".join(planned.task.manifest.setup.commands) + "\n"
    return Baseline(sandbox_mod.commit_setup(seed.repo, seed.sha, message), skipped)


def run_agent(
    settings: RunSettings, planned: PlannedRun, fixture: Fixture, start: RunStart, baseline: Baseline,
    options: dict | None = None,
) -> AgentRun:
    """4. Agent: the agent acts on the sandbox. `options` carries a later feedback pass's index
    and task message (`cbledger.runner.passes`)."""
    agent_started = _dt.datetime.now(_dt.UTC)
    t_agent = time.perf_counter()
    result = settings.agent.run(
        AgentInput(
            start.run_id, start.workdir, planned.task, fixture, planned.model_id, settings.ablations,
            agent_started, baseline.sha, options={"repeat": planned.repeat, **(options or {})},
        )
    )
    return AgentRun(result, _ms(time.perf_counter() - t_agent))


def capture_end_state(start: RunStart, seed: Seed, baseline: Baseline) -> EndState:
    """5. Capture: every file of the working tree as a commit on top of the agent's HEAD, the
    agent's commits and stash first bounded in size (`preserve.capture`): from here on, grading
    and the bundle see the bounded commits, so replay reads what the runner graded."""
    repo = sandbox_mod.Sandbox(start.workdir, seed.sha, baseline.sha).repo
    when = int(time.time())
    preserve.keep_stash(repo)
    captured = preserve.capture(repo, when, baseline.sha, run_id=start.run_id)
    return EndState(repo, captured.head_sha, captured.capture_sha, when, captured.stash_sha)


@dataclass(frozen=True)
class CheckWith:
    """What runs `copperhead check` on an end state whose task needs it (`check_capture`)."""

    cli: CopperheadCli | None
    confinement: isolation.Confinement


def check_with(settings: RunSettings, task: Task) -> CheckWith | None:
    return CheckWith(settings.copperhead, settings.confinement) if check_capture.needed(task) else None


def verify_end_state(
    start: RunStart, fixture: Fixture, end: EndState, check: CheckWith | None, confinement: isolation.Confinement,
) -> Verification:
    """6. Verify: kicad-cli on the end state, confined like the agent (`runner/confined_verify.py`),
    and `copperhead check` when the task grades it, their reports committed on top of the capture.
    An artifact the agent replaced by a symbolic link is not verified (kicad-cli would read
    whatever it points at outside the sandbox): the capture holds the link, and the verification
    assertions fail for want of a report."""
    t_verify = time.perf_counter()
    for rel in (fixture.manifest.artifacts.schematic, fixture.manifest.artifacts.board):
        if rel:
            sandbox_mod.unlink_first_link(start.workdir, rel)
    live = preserve.live_reports_dir(end.repo)
    confined_verify.verify(start.workdir, fixture.manifest.artifacts.schematic, fixture.manifest.artifacts.board, live,
                           confinement)
    if check is not None:
        check_capture.capture(check.cli, start.workdir, live, check.confinement)
    verify_ms = _ms(time.perf_counter() - t_verify)
    return Verification(preserve.record_evidence(end.repo, end.capture_sha, end.when), verify_ms)


def grade_end_state(
    task: Task, fixture: Fixture, baseline: Baseline, agent_run: AgentRun, end: EndState,
    verified: Verification,
) -> Graded:
    """7. Grade: the evidence read back from the commits, graded by the one pure grader."""
    evidence = evidence_mod.from_repo(
        end.repo,
        baseline_sha=baseline.sha,
        head_sha=end.head_sha,
        capture_sha=end.capture_sha,
        evidence_sha=verified.evidence_sha,
        runner_exit=agent_run.result.runner_exit,
    )
    return Graded(evidence, grade(task, fixture, evidence))


def scan_for_credentials(
    start: RunStart, seed: Seed, baseline: Baseline, end: EndState, verified: Verification,
) -> tuple[Baseline, EndState, Verification]:
    """8. Backstop: every blob, path, commit message and signature the bundle would carry,
    before it is graded or written. A match is redacted and the run goes on to fail on it: the
    commits it names are the rebuilt ones."""
    redacted = backstop.require_clean(
        end.repo, seed.sha, start.run_id, baseline_sha=baseline.sha, head_sha=end.head_sha, stash_sha=end.stash_sha,
    )
    if redacted is None:
        return baseline, end, verified
    return (
        Baseline(redacted.baseline_sha, baseline.skipped),
        EndState(end.repo, redacted.head_sha, redacted.capture_sha, end.when, redacted.stash_sha),
        Verification(redacted.evidence_sha, verified.verify_ms),
    )


def preserve_run(
    settings: RunSettings, planned: PlannedRun, fixture: Fixture, start: RunStart, seed: Seed,
    baseline: Baseline, agent_run: AgentRun, end: EndState, verified: Verification, graded: Graded,
    note: str | None = None, pass_ref: PassRef | None = None,
) -> RunOutput:
    """9. Preserve: the bundle staged beside its final name, and the run's two events built and
    scanned for credentials; nothing is in place under `results/` until `publish`. What the
    harness or the session endpoint said (the runner's note, a harness failure's detail) is
    redacted first: it is the agent's output too."""
    task, result, run_id = planned.task, agent_run.result, start.run_id
    if result.scripted and settings.run_mode == "agent":
        settings = dataclasses.replace(settings, run_mode="scripted")  # a script answered, not a model
    digests = evidence_digests(graded.evidence)
    transcript = graded.evidence.transcript
    harness_logs = preserve.harness_logs(end.repo, verified.evidence_sha)
    for path, data in harness_logs.items():
        digests["harness-" + Path(path).stem] = EvidenceDigest(path=path, blake3=blake3(data).hexdigest(), bytes=len(data))
    harness_failure = None
    if settings.run_mode in HARNESS_RUN_MODES:
        stderr = harness_logs.get(preserve.HARNESS_LOG_PREFIX + "stderr.log", b"").decode("utf-8", "replace")
        harness_failure = detect_harness_failure(
            transcript, stderr, result.exit_code, result.runner_exit == "cap-exceeded", result.cassette, agent_run.agent_ms,
            unpreserved=note[len(UNPRESERVED):] if note is not None and note.startswith(UNPRESERVED) else None,
            stdout=harness_logs.get(preserve.HARNESS_LOG_PREFIX + "stdout.log", b"").decode("utf-8", "replace"),
        )
        if harness_failure is not None:
            harness_failure = msgspec.structs.replace(harness_failure, detail=credentials.redact(harness_failure.detail))
    stats, stats_note = stats_from(
        transcript, result.runner_exit, settings.ablations.max_turns or task.manifest.caps.turns, result.cassette, agent_run.agent_ms,
    )
    spend_reported = spend_known(transcript, result.cassette)
    identity, cost = identity_and_cost(settings, planned, result, stats, spend_reported)
    unread = stats is not None and stats.tokens_in + stats.tokens_out == 0  # none, or none in range
    if result.cost_cap is not None and (cost.usd_micros is None or (unread and result.cost_cap.spent_usd_micros > cost.usd_micros)):
        # stopped by a money limit without run-end, or with run-end figures it could not read
        # (recorded as 0): the proxy metered what it spent, and that is what the provider billed
        cost = Cost(usd_micros=result.cost_cap.spent_usd_micros, price_table_version=settings.price_table.table_version
                    if settings.price_table is not None else None)
    elif not spend_reported and result.cost is None and settings.run_mode not in UNPRICED_RUN_MODES:
        stats_note = (stats_note + "; " if stats_note else "") + "cost unknown (null): the run ended without run-end, so its tokens were never reported"
    elif result.cost is None and cost.usd_micros is not None and tokens_unread(transcript):
        # recorded as 0 tokens, which would price as $0: a figure no provider billed
        cost = Cost(usd_micros=None, price_table_version=None)
        stats_note = (stats_note + "; " if stats_note else "") + "cost unknown (null): run-end's token figures could not be read"
    elif result.cost is None and cost.usd_micros is not None and (silent := spend.unreported(result.cassette)):
        # run-end sums the usage the provider reported, and it reported none for these answers
        cost = Cost(usd_micros=None, price_table_version=None)
        stats_note = (stats_note + "; " if stats_note else "") + (
            f"cost unknown (null): {silent} answer(s) of the provider reported no token usage, which run-end cannot sum")

    store_rel = bundle_name(run_id)
    workspace = Workspace.at(settings.root, results=settings.results)
    staged = workspace.staged_bundle(run_id)
    size, digest = preserve.write_bundle(end.repo, seed.sha, staged)
    cassette_ref, cassette_files = stage_cassette(workspace, run_id, result)
    ended = _dt.datetime.now(_dt.UTC)
    env = settings.environment
    note = credentials.redact("; ".join(n for n in (note, result.note, stats_note) if n)) or None
    run = RunRecorded(
        run_id=run_id,
        task=TaskIdentity(
            id=task.id,
            tier=task.manifest.tier,
            mode=task.manifest.mode,
            expected_outcome=task.manifest.expected_outcome,
            manifest_hash=task.manifest_hash,
            variant_of=task.manifest.variant_of,
            tags=list(task.manifest.tags),
        ),
        fixture=FixtureIdentity(id=fixture.id, sha256=fixture.manifest.sha256),
        model=identity,
        repeat=planned.repeat,
        repeats_planned=planned.repeats_planned,
        run_mode=settings.run_mode,
        ablations=settings.ablations,
        comparability=Comparability(
            schema_version=SCHEMA_VERSION,
            suite_version=settings.suite_version,
            task_manifest_hash=task.manifest_hash,
            fixture_sha256=fixture.manifest.sha256,
            copperhead_version=env.copperhead_version,
            copperhead_commit=env.copperhead_commit,
            kicad_cli_version=env.kicad_cli_version,
            runtime=env.runtime,
            node_version=env.node_version,
            platform=env.platform,
            os=env.os,
        ),
        stats=stats,
        runner_exit=result.runner_exit,
        runner_note=note,
        replay_of=result.replay_of,
        cost=cost,
        sandbox=SandboxRef(
            seed_sha=seed.sha,
            seed_config=seed.config.decode(),
            baseline_sha=baseline.sha,
            head_sha=end.head_sha,
            capture_sha=end.capture_sha,
            evidence_sha=verified.evidence_sha,
            store=store_rel,
            store_blake3=digest,
            store_bytes=size,
            stash_sha=end.stash_sha,
        ),
        evidence=digests,
        setup_skipped=baseline.skipped,
        timings=Timings(
            started_at=start.started,
            ended_at=ended,
            duration_ms=_ms(time.perf_counter() - start.t0),
            agent_ms=agent_run.agent_ms,
            verify_ms=verified.verify_ms,
        ),
        harness_failure=harness_failure,
        batch=settings.batch,
        provider_models=provider_models(transcript, result),
        isolation=settings.confinement.isolation,
        cost_cap=UNSET if result.cost_cap is None else result.cost_cap,
        lane="system-under-test",
        cassette=cassette_ref,
        passes=UNSET if pass_ref is None else pass_ref,
        campaign=UNSET if planned.campaign is None else CampaignSlot(
            id=planned.campaign, slot=planned.slot, attempt=planned.attempt,
        ),
    )
    run = msgspec.structs.replace(run, surface=surfaces.run_surface(run))
    grade_rec = grade_body(run_id, settings.suite_version, task.manifest_hash, graded.grade)
    events = [
        make_event(run, id=f"run:{run_id}", actor=settings.actor, at=ended),
        make_event(grade_rec, id=f"grade:{run_id}:{settings.suite_version}", actor=settings.actor, at=ended),
    ]
    for event in events:
        found = credentials.scan_json(msgspec.to_builtins(event), "$")
        if found:
            staged.unlink(missing_ok=True)
            if cassette_files is not None:
                cassette_files[0].unlink(missing_ok=True)
            raise SecretFound(f"run {run_id}: credential pattern matched in its events ({'; '.join(map(str, found))}); nothing of this run was written")
    return RunOutput(
        run, grade_rec, events, staged, workspace.stored(store_rel) or settings.root / store_rel,
        start.workdir if settings.keep_sandboxes else None, workspace.pending_events(run_id), cassette_files,
    )


def stage_cassette(workspace: Workspace, run_id: str, result: AgentResult) -> tuple[CassetteRef | UnsetType, tuple[Path, Path] | None]:
    """The run's cassette written beside its staged bundle, and the reference `run.recorded`
    carries; nothing (UNSET) when the agent recorded none. Synced as the bundle is: `publish`
    only renames it, and the event names it."""
    if result.cassette is None:
        return UNSET, None
    data, ref = cassette_mod.stored_form(result.cassette, f"run {run_id}")
    staged = workspace.staged_cassette(run_id)
    durable.write_atomic(staged, data)
    return ref, (staged, workspace.stored(ref.path) or workspace.root / ref.path)


def evidence_digests(evidence: evidence_mod.Evidence) -> dict[str, EvidenceDigest]:
    """The BLAKE3 and size of the transcript and of each report, as `run.recorded` carries them."""
    digests: dict[str, EvidenceDigest] = {}
    transcript = evidence.transcript
    if transcript.path:
        data = evidence.end.read(transcript.path) or b""
        digests["transcript"] = EvidenceDigest(path=transcript.path, blake3=blake3(data).hexdigest(), bytes=len(data))
    for name, data in sorted(evidence.reports.items()):
        digests[name] = EvidenceDigest(path=f"{name}.json", blake3=blake3(data).hexdigest(), bytes=len(data))
    return digests


def identity_and_cost(
    settings: RunSettings, planned: PlannedRun, result: AgentResult, stats: RunStats | None, spend_reported: bool
) -> tuple[ModelIdentity, Cost]:
    """A replay keeps the original run's model and cost; the scripted agents and the scripted
    model cost nothing by rule; a run whose harness never reported its spend (no run-end) costs
    an unknown amount, which is null, not zero; any other run is priced from its tokens under the
    latest price table."""
    if result.model is not None:
        identity, price = result.model, None
    else:
        identity, price = model_identity(settings, planned.model_id, result.provider)
    if result.cost is not None:
        return identity, result.cost
    if settings.run_mode in UNPRICED_RUN_MODES or not spend_reported:
        return identity, Cost(usd_micros=None, price_table_version=None)
    tokens = (stats.tokens_in, stats.tokens_out) if stats else (0, 0)
    table_version = settings.price_table.table_version if settings.price_table is not None else None
    micros = pricing.usd_micros(price, *tokens)
    return identity, Cost(usd_micros=micros, price_table_version=table_version if micros is not None else None)


def remove_sandbox(settings: RunSettings, start: RunStart) -> None:
    """11. The sandbox is deleted, whatever happened, unless `--keep-sandboxes` keeps it."""
    if not settings.keep_sandboxes:
        shutil.rmtree(start.workdir, ignore_errors=True)


def _orphaned(store: LedgerStore, output: RunOutput) -> bool:
    """Is the bundle in place for this run id one whose run the ledger never recorded and whose
    events were not kept for a later append (`leftovers.py` adopts those)?"""
    run_id = output.run.run_id
    kept = output.final.with_name(f"{run_id}{PENDING_EVENTS}")
    return not kept.exists() and store.find(f"run:{run_id}") is None


#: how often an append that failed on the file system (not on its content) is tried
APPEND_TRIES = 3
APPEND_RETRY_SEC = 0.5


class SlotTaken(UserError):
    """A run whose campaign slot another driver recorded first: not recorded, and no failure of
    this invocation (the slot is recorded), though the run was made, and paid for, in vain."""


def publish(store: LedgerStore, output: RunOutput) -> list[Appended]:
    """Moves the bundle (and the cassette, if any) into place and appends the run's two events
    in one durable batch. Both files were synced when staged and their renames are made durable
    before the append, so a power cut cannot keep an event whose bundle or cassette it lost.

    A run is never dropped because of the ledger: an append that fails on the file system is
    tried again; one the ledger refuses (a torn tail, a disk that stays full) leaves the bundle
    in place and the events in `results/runs/<run-id>.events.jsonl`, and the error says how to
    record them (`cbledger append` that file once the ledger is repaired; appending is
    idempotent). An interrupt (Ctrl-C, SIGTERM) in the append keeps the run so too, unless its
    batch landed: the run finished, and its provider was paid for it. Only a slot another driver
    recorded first, or events that cannot be kept either, remove the bundle and the cassette."""
    output.final.parent.mkdir(parents=True, exist_ok=True)
    if output.final.exists() and _orphaned(store, output):
        # a killed invocation of this slot renamed its bundle into place and died before its
        # append: nothing of it was decided, and its campaign is held by this invocation (no
        # live driver is between that rename and its append), so this run takes the slot
        output.final.unlink()
    if output.final.exists():
        # a campaign's run id is its slot's: a bundle already there is another recording of it
        output.discard_staged()
        raise UserError(f"run {output.run.run_id}: {output.final.name} is already in place (this slot was recorded, "
                        f"or a killed run left it: a later `{invocation.command('run')}` of its campaign adopts or removes it); not recorded again")
    os.replace(output.staged, output.final)
    directories = [output.final.parent]
    new_cassette: Path | None = None  # ours to withdraw: a cassette is named by its content
    if output.cassette is not None:
        staged_cassette, final_cassette = output.cassette
        final_cassette.parent.mkdir(parents=True, exist_ok=True)
        new_cassette = None if final_cassette.exists() else final_cassette
        os.replace(staged_cassette, final_cassette)
        directories.append(final_cassette.parent)
    for directory in dict.fromkeys(directories):
        durable.fsync_directory(directory)
    for attempt in range(1, APPEND_TRIES + 1):
        try:
            return store.append(output.events)
        except OSError as exc:
            if attempt == APPEND_TRIES:
                why = f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else f"{exc.strerror or exc}"
                raise _kept_for_later(store, output, why, new_cassette) from None
        except ConflictError as exc:
            # another driver of the campaign recorded this slot first (a ledger two results
            # directories share): ours is not the recorded run, and a bundle of the same name kept
            # beside the other's would make the two directories' runs/ disagree once gathered
            for path in [output.final] + ([new_cassette] if new_cassette is not None else []):
                path.unlink(missing_ok=True)
            raise SlotTaken(f"run {output.run.run_id}: its slot was recorded by another driver of its campaign "
                            f"({credentials.printable(str(exc))}); this run's bundle and events are discarded") from None
        except UserError as exc:
            raise _kept_for_later(store, output, str(exc), new_cassette) from None
        except BaseException:
            # Ctrl-C or SIGTERM while appending: the run finished (and a provider was paid for
            # it), so it is kept as a refused append keeps it, unless its batch landed; a ledger
            # that cannot say (a database away) keeps it too, appending being idempotent. It was
            # once removed, and the interrupt's line said every finished run was recorded.
            _keep_interrupted(store, output, new_cassette)
            raise
        try:  # outside the handlers above, so an interrupt in the pause is one too
            time.sleep(APPEND_RETRY_SEC * attempt)
        except BaseException:
            _keep_interrupted(store, output, new_cassette)
            raise
    raise AssertionError("unreachable")


def _keep_interrupted(store: LedgerStore, output: RunOutput, new_cassette: Path | None) -> None:
    """With SIGINT and SIGTERM held off while it keeps the run (a second Ctrl-C, or a supervisor's
    SIGTERM after it, lost it there), on the main thread: another thread cannot hold a signal,
    and both reach the main thread alone."""
    main = threading.current_thread() is threading.main_thread()
    held = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        try:
            if store.holds([e.id for e in output.events]):
                return
            answered = True
        except Exception:  # the interrupt is what propagates; the ledger's silence keeps the run
            answered = False
        try:
            _pending_events(output)
        except Exception:  # kept whole or not at all; the interrupt still propagates
            output.pending.unlink(missing_ok=True)
            if answered:  # the batch did not land: nothing names these files
                for path in [output.final] + ([new_cassette] if new_cassette is not None else []):
                    path.unlink(missing_ok=True)
    finally:
        for sig, handler in held.items():
            if handler is not None:
                signal.signal(sig, handler)


def _pending_events(output: RunOutput) -> None:
    """The run's events beside its bundle, whole or not at all (a file cut short could never be
    appended, and its bundle would hold the slot against every rerun): `leftovers` adopts them."""
    lines = b"".join(msgspec.json.encode({k: v for k, v in msgspec.to_builtins(e).items() if k != "seq"}) + b"\n" for e in output.events)
    durable.write_atomic(output.pending, lines)
    durable.fsync_directory(output.pending.parent)


def _kept_for_later(store: LedgerStore, output: RunOutput, why: str, new_cassette: Path | None = None) -> UserError:
    database = is_database_url(store.location)
    try:
        _pending_events(output)
    except (UserError, OSError) as exc:
        output.pending.unlink(missing_ok=True)
        try:  # a commit whose answer was lost may have landed: then the ledger names the bundle
            remove_unless_landed(store, [e.id for e in output.events],
                                 [output.final] + ([new_cassette] if new_cassette is not None else []))
        except UserError:
            pass  # the ledger cannot say: the bundle stays, and the next run of the campaign decides
        fate = ("the run is discarded, its bundle removed, and its slot stays open for the next run of its campaign"
                if not output.final.exists() else
                f"its bundle stays at {output.final.name} (the ledger may hold the run after all: the next run of its "
                "campaign keeps it, or removes it and runs the slot)")
        return UserError(
            f"the ledger refused run {output.run.run_id}'s events ({credentials.printable(why)}), and they could not "
            f"be kept for later either ({credentials.printable(str(exc))}): {fate}"
        )
    # a file's refusal is most often a torn tail; a database's, a server that did not answer
    first = ("once the database answers again" if database else
             f"repair the ledger (`{invocation.command('repair', '--truncate-torn-tail')}` for a torn tail), then")
    return UserError(
        f"the ledger refused run {output.run.run_id}'s events ({credentials.printable(why)}); the run is kept: "
        f"its bundle at {output.final.name}, its events in {output.pending} — {first} "
        f"`{invocation.command('append', str(output.pending))}` and `{invocation.command('project', 'all')}`"
    )
