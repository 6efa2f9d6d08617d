"""One run, start to finish: sandbox → setup → agent → capture → verify → grade → preserve →
events. Each step's output is the next one's only input, so a run that fails half way leaves
nothing under `results/` (the bundle and the two events are written last, the events in one
durable batch).
"""

from __future__ import annotations

import datetime as _dt
import os
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec
from blake3 import blake3

from cbledger import credentials

from cbledger.errors import SecretFound, UserError
from cbledger.ledger.events import (
    SCHEMA_VERSION,
    Ablations,
    Actor,
    Comparability,
    Cost,
    EventBase,
    EvidenceDigest,
    FixtureIdentity,
    GradeRecorded,
    ModelIdentity,
    RunRecorded,
    RunStats,
    SandboxRef,
    SetupSkip,
    TaskIdentity,
    Timings,
    make_event,
)
from cbledger.ledger.types import ExitPath
from cbledger.runner import backstop, preserve, pricing
from cbledger.runner import sandbox as sandbox_mod
from cbledger.runner.agents.base import Agent, AgentInput
from cbledger.runner.agents.copperhead import CopperheadCli, basic_environment
from cbledger.runner.environment import Environment
from cbledger.runner.harness_failure import detect as detect_harness_failure
from cbledger.grading.evidence import bundle as evidence_mod
from cbledger.grading.grader import GRADER_VERSION, Grade, grade
from cbledger.runner.plan import PlannedRun
from cbledger.tasks.catalog import Catalog
from cbledger.kicad.oracle import verify_tree
from cbledger.workspace import Workspace, bundle_name

KNOWN_EXITS = set(ExitPath.__args__)  # type: ignore[attr-defined]
#: run modes whose agent is the copperhead process (their harness can fail before the model)
HARNESS_RUN_MODES = ("agent", "scripted")
#: run modes that spend no money: cost is null by rule
UNPRICED_RUN_MODES = ("gold", "noop", "scripted")


@dataclass(frozen=True)
class RunSettings:
    """Everything about a suite run that is the same for each of its runs."""

    root: Path
    catalog: Catalog
    agent: Agent
    run_mode: str
    suite_version: str
    environment: Environment
    price_table: object | None
    ablations: Ablations
    sandbox_root: Path
    keep_sandboxes: bool
    copperhead: CopperheadCli | None
    actor: Actor
    segment_override: str | None = None


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


def new_run_id(planned: PlannedRun, started: _dt.datetime) -> str:
    model = planned.model_id.replace(":", "-")
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{model}-{planned.task.id}-r{planned.repeat}-{secrets.token_hex(3)}"


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def run_setup(settings: RunSettings, planned: PlannedRun, workdir: Path) -> list[SetupSkip]:
    skipped: list[SetupSkip] = []
    for command in planned.task.manifest.setup.commands:
        if settings.copperhead is None:
            skipped.append(SetupSkip(command=command, reason="copperhead CLI not available (set --copperhead-cli or $COPPERHEAD_CLI)"))
            continue
        proc = subprocess.run(
            settings.copperhead.command("--repo", str(workdir), command, "--no-hooks"),
            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, env=basic_environment(),
        )
        if proc.returncode != 0:
            skipped.append(SetupSkip(command=command, reason=f"copperhead {command} exited {proc.returncode}"))
    return skipped


def stats_from(transcript, runner_exit: str | None = None, max_turns: int = 1) -> tuple[RunStats | None, str | None]:
    """The run-end figures. A transcript without `run-end` (a crash, a kill at the cap) gets
    stats synthesized by the runner — exit path `cap-exceeded` or `stalled`, the turns it can
    count, zero tokens — and a note saying so, so every agent record still states how it ended."""
    end = transcript.run_end
    if end is None:
        exit_path = runner_exit if runner_exit in KNOWN_EXITS else "stalled"
        turns = len(transcript.of_type("assistant"))
        note = f"no run-end in the transcript; stats synthesized by the runner (exit path {exit_path})"
        return (
            RunStats(
                exit_path=exit_path,  # type: ignore[arg-type]
                turns_used=turns,
                max_turns=max_turns,
                repair_cycles_used=0,
                max_repair_cycles=0,
                tokens_in=0,
                tokens_out=0,
                duration_ms=None,
                files_touched=[],
            ),
            note,
        )
    exit_path = end.get("exitPath")
    if exit_path not in KNOWN_EXITS:
        return None, f"run-end exit path {exit_path!r} is not one this runner knows"
    files: list[str] = []
    for ev in transcript.of_type("run-committed"):
        for f in ev.data.get("files") or []:
            if isinstance(f, str) and f not in files:
                files.append(f)

    def count(key: str) -> int:
        value = end.get(key)
        return value if isinstance(value, int) and value >= 0 else 0

    duration = end.get("durationMs")
    return (
        RunStats(
            exit_path=exit_path,
            turns_used=count("turnsUsed"),
            max_turns=count("maxTurns"),
            repair_cycles_used=count("repairCyclesUsed"),
            max_repair_cycles=count("maxRepairCycles"),
            tokens_in=count("tokensIn"),
            tokens_out=count("tokensOut"),
            duration_ms=duration if isinstance(duration, int) and duration >= 0 else None,
            files_touched=sorted(files),
        ),
        None,
    )


def model_identity(settings: RunSettings, model_id: str, provider: str | None) -> tuple[ModelIdentity, object | None]:
    if settings.run_mode in ("gold", "noop"):
        return ModelIdentity(id=model_id, provider="harness", segment="harness", pinning="strong", selection_source="flag"), None
    if settings.run_mode == "scripted":
        # The real harness against a session script: no model, no price, never a model row.
        return ModelIdentity(id=model_id, provider="scripted-endpoint", segment="harness", pinning="strong", selection_source="flag"), None
    r = pricing.route(model_id, settings.price_table)  # type: ignore[arg-type]
    segment = settings.segment_override or (r.segment if r else None)
    if segment is None:
        raise UserError(
            f"model {model_id} is not in the latest price table; publish prices (`cbledger pricing publish`) "
            "or name its segment with --segment"
        )
    pinning = r.pinning if r else ("weak" if segment == "saved-login" else "strong")
    provider = provider or (model_id.split(":", 1)[0] if ":" in model_id else "api")
    return ModelIdentity(id=model_id, provider=provider, segment=segment, pinning=pinning, selection_source="flag"), (r.price if r else None)


def grade_body(run_id: str, suite_version: str, manifest_hash: str, g: Grade) -> GradeRecorded:
    return GradeRecorded(
        run_id=run_id,
        suite_version=suite_version,
        grader_version=GRADER_VERSION,
        task_manifest_hash=manifest_hash,
        assertions=list(g.outcomes),
        verdict=g.verdict,  # type: ignore[arg-type]
        partial_credit=g.partial_credit,
        first_failed_required=g.first_failed_required,
        failure_category=g.failure_category,  # type: ignore[arg-type]
        dominant_tool_error=g.dominant_tool_error,
    )


def execute(settings: RunSettings, planned: PlannedRun) -> RunOutput:
    task = planned.task
    fixture = settings.catalog.fixture_for(task)
    started = _dt.datetime.now(_dt.timezone.utc)
    t0 = time.perf_counter()
    run_id = new_run_id(planned, started)
    workdir = settings.sandbox_root / run_id
    try:
        repo, seed, seed_config = sandbox_mod.create(workdir, task, fixture, settings.ablations)
        skipped = run_setup(settings, planned, workdir)
        baseline = sandbox_mod.commit_setup(repo, seed, "setup: " + " ".join(task.manifest.setup.commands) + "\n")
        agent_started = _dt.datetime.now(_dt.timezone.utc)
        t_agent = time.perf_counter()
        result = settings.agent.run(
            AgentInput(
                run_id, workdir, task, fixture, planned.model_id, settings.ablations, agent_started, baseline,
                options={"repeat": planned.repeat},
            )
        )
        agent_ms = _ms(time.perf_counter() - t_agent)
        repo = sandbox_mod.Sandbox(workdir, seed, baseline).repo
        head = str(repo.head.target)
        when = int(time.time())
        stash_sha = preserve.keep_stash(repo)
        capture_sha = preserve.capture(repo, when)
        t_verify = time.perf_counter()
        live = preserve.live_reports_dir(repo)
        verify_tree(workdir, fixture.manifest.artifacts.schematic, fixture.manifest.artifacts.board, live)
        verify_ms = _ms(time.perf_counter() - t_verify)
        evidence_sha = preserve.record_evidence(repo, capture_sha, when)
        evidence = evidence_mod.from_repo(
            repo,
            baseline_sha=baseline,
            head_sha=head,
            capture_sha=capture_sha,
            evidence_sha=evidence_sha,
            runner_exit=result.runner_exit,
        )
        g = grade(task, fixture, evidence)
        backstop.require_clean(repo, seed, run_id)

        digests: dict[str, EvidenceDigest] = {}
        transcript = evidence.transcript
        if transcript.path:
            data = evidence.end.read(transcript.path) or b""
            digests["transcript"] = EvidenceDigest(path=transcript.path, blake3=blake3(data).hexdigest(), bytes=len(data))
        for name, data in sorted(evidence.reports.items()):
            digests[name] = EvidenceDigest(path=f"{name}.json", blake3=blake3(data).hexdigest(), bytes=len(data))
        harness_logs = preserve.harness_logs(repo, evidence_sha)
        for path, data in harness_logs.items():
            digests["harness-" + Path(path).stem] = EvidenceDigest(path=path, blake3=blake3(data).hexdigest(), bytes=len(data))
        harness_failure = None
        if settings.run_mode in HARNESS_RUN_MODES:
            stderr = harness_logs.get(preserve.HARNESS_LOG_PREFIX + "stderr.log", b"").decode("utf-8", "replace")
            harness_failure = detect_harness_failure(transcript, stderr, result.exit_code, result.runner_exit == "cap-exceeded")
        stats, stats_note = stats_from(transcript, result.runner_exit, settings.ablations.max_turns or task.manifest.caps.turns)
        if result.model is not None:
            identity, price = result.model, None
        else:
            identity, price = model_identity(settings, planned.model_id, result.provider)
        tokens = (stats.tokens_in, stats.tokens_out) if stats else (0, 0)
        table_version = getattr(settings.price_table, "table_version", None)
        if result.cost is not None:
            cost = result.cost
        elif settings.run_mode in UNPRICED_RUN_MODES:
            cost = Cost(usd_micros=None, price_table_version=None)
        elif transcript.run_end is None:
            # The harness never reported its spend: unknown, which is not zero.
            cost = Cost(usd_micros=None, price_table_version=None)
            stats_note = (stats_note + "; " if stats_note else "") + "cost unknown (null): the run ended without run-end, so its tokens were never reported"
        else:
            micros = pricing.usd_micros(price, *tokens)  # type: ignore[arg-type]
            cost = Cost(usd_micros=micros, price_table_version=table_version if micros is not None else None)

        store_rel = bundle_name(run_id)
        staged = Workspace.at(settings.root).staged_bundle(run_id)
        size, digest = preserve.write_bundle(repo, seed, staged)
        ended = _dt.datetime.now(_dt.timezone.utc)
        env = settings.environment
        note = "; ".join(n for n in (result.note, stats_note) if n) or None
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
            run_mode=settings.run_mode,  # type: ignore[arg-type]
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
            ),
            stats=stats,
            runner_exit=result.runner_exit,  # type: ignore[arg-type]
            runner_note=note,
            replay_of=result.replay_of,
            cost=cost,
            sandbox=SandboxRef(
                seed_sha=seed,
                seed_config=seed_config.decode(),
                baseline_sha=baseline,
                head_sha=head,
                capture_sha=capture_sha,
                evidence_sha=evidence_sha,
                store=store_rel,
                store_blake3=digest,
                store_bytes=size,
                stash_sha=stash_sha,
            ),
            evidence=digests,
            setup_skipped=skipped,
            timings=Timings(
                started_at=started,
                ended_at=ended,
                duration_ms=_ms(time.perf_counter() - t0),
                agent_ms=agent_ms,
                verify_ms=verify_ms,
            ),
            harness_failure=harness_failure,
        )
        grade_rec = grade_body(run_id, settings.suite_version, task.manifest_hash, g)
        events = [
            make_event(run, id=f"run:{run_id}", actor=settings.actor, at=ended),
            make_event(grade_rec, id=f"grade:{run_id}:{settings.suite_version}", actor=settings.actor, at=ended),
        ]
        for event in events:
            found = credentials.scan_json(msgspec.to_builtins(event), "$")
            if found:
                staged.unlink(missing_ok=True)
                raise SecretFound(f"run {run_id}: credential pattern matched in its events ({'; '.join(map(str, found))}); nothing of this run was written")
        return RunOutput(run, grade_rec, events, staged, settings.root / store_rel, workdir if settings.keep_sandboxes else None)
    finally:
        if not settings.keep_sandboxes:
            shutil.rmtree(workdir, ignore_errors=True)


def publish(store, output: RunOutput) -> list:
    """Moves the bundle into place and appends the run's two events in one durable batch.
    If the append fails, the bundle it would have referred to is removed again. The rename is
    made durable before the append, so a power cut cannot keep an event whose bundle it lost."""
    output.final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(output.staged, output.final)
    fd = os.open(output.final.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        return store.append(output.events)
    except BaseException:
        output.final.unlink(missing_ok=True)
        raise
