"""Valid drafts of every ledger event, and a way to drive the CLI in-process.

Builders take a number `n` so that a test can make many distinct events (distinct ids, run ids and
hashes) without spelling each out; every value is derived from `n` so that two calls with the same
arguments build byte-identical events, which is what the idempotency tests rely on. Drafts carry
`seq=0`: the store assigns seq numbers.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from blake3 import blake3
from click.testing import CliRunner

from cbledger.ledger.events import (
    Ablations,
    Actor,
    AssertionOutcome,
    Comparability,
    Cost,
    EventBase,
    EvidenceDigest,
    EvidenceImported,
    EvidenceImportedEvent,
    FixtureIdentity,
    GradeRecorded,
    GradeRecordedEvent,
    ImportedFile,
    ImportSummary,
    LedgerCreated,
    LedgerCreatedEvent,
    ModelIdentity,
    ModelPrice,
    NullCostRoute,
    PricingPublished,
    PricingPublishedEvent,
    RubricScored,
    RubricScoredEvent,
    RunRecorded,
    RunRecordedEvent,
    RunRetracted,
    RunRetractedEvent,
    RunStats,
    SandboxRef,
    SetupSkip,
    SuiteBumped,
    SuiteBumpedEvent,
    TaskIdentity,
    Timings,
)
from cbledger.ledger.store import LedgerStore

UTC = dt.timezone.utc
AT = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
RUNNER = Actor(kind="runner", name="copperbench-runner")
MAINTAINER = Actor(kind="maintainer", name="maintainer")


def hex64(*parts: object) -> str:
    """A deterministic 64-hex digest standing in for a real file hash."""
    return blake3("\0".join(map(str, parts)).encode()).hexdigest()


def hex40(*parts: object) -> str:
    return hex64(*parts)[:40]


def at(n: int = 0) -> dt.datetime:
    return AT + dt.timedelta(seconds=n)


# --------------------------------------------------------------------------- one builder per type


def ledger_created(name: str = "test-ledger", *, id: str | None = None) -> LedgerCreatedEvent:
    return LedgerCreatedEvent(
        id=id or f"ledger.created:{name}",
        at=AT,
        actor=MAINTAINER,
        body=LedgerCreated(name=name, description="a ledger made by a test"),
    )


def suite_bumped(n: int = 1, *, id: str | None = None) -> SuiteBumpedEvent:
    tasks = [f"task-{i}" for i in range(3)]
    return SuiteBumpedEvent(
        id=id or f"suite.bumped:1.{n}.0",
        at=at(n),
        actor=MAINTAINER,
        body=SuiteBumped(
            suite_version=f"1.{n}.0",
            previous=f"1.{n - 1}.0" if n > 0 else None,
            reason=f"bump {n}: tighten the drift assertions",
            vocabulary_hash=hex64("vocabulary", n),
            credential_patterns_hash=hex64("patterns"),
            grader_version="2.0.1",
            task_manifest_hashes={t: hex64("manifest", t, n) for t in tasks},
            fixture_hashes={"pic-programmer": hex64("fixture", "pic-programmer")},
            suites={"core": tasks},
        ),
    )


def pricing_published(n: int = 1, *, id: str | None = None) -> PricingPublishedEvent:
    return PricingPublishedEvent(
        id=id or f"pricing.published:2026-{n:02d}",
        at=at(n),
        actor=MAINTAINER,
        body=PricingPublished(
            table_version=f"2026-{n:02d}",
            effective_date=dt.date(2026, 1 + (n - 1) % 12, 1),
            models={
                "gpt-5-mini": ModelPrice(
                    segment="api-cheap", pinning="strong", input="0.25", output="2.00"
                ),
                "claude-sonnet-4.5": ModelPrice(
                    segment="api-frontier",
                    pinning="weak",
                    input="3",
                    output="15",
                    cache_read="0.30",
                    cache_write="3.75",
                ),
            },
            null_cost_routes={
                "saved-login": NullCostRoute(
                    segment="saved-login", pinning="weak", reason="billed by subscription"
                )
            },
        ),
    )


def run_id(n: int) -> str:
    return f"run-{n:06d}"


def run_recorded(n: int = 1, *, id: str | None = None, note: str | None = None) -> RunRecordedEvent:
    """A realistic run record (about 2.3 KB encoded)."""
    rid = run_id(n)
    task = f"fix-net-{n % 17}"
    started = at(n)
    return RunRecordedEvent(
        id=id or f"run.recorded:{rid}",
        at=started + dt.timedelta(seconds=95),
        actor=RUNNER,
        body=RunRecorded(
            run_id=rid,
            task=TaskIdentity(
                id=task,
                tier="medium",
                mode="do",
                expected_outcome="edit",
                manifest_hash=hex64("manifest", task),
                tags=["nets", "rename"],
            ),
            fixture=FixtureIdentity(id="pic-programmer", sha256=hex64("fixture", "pic-programmer")),
            model=ModelIdentity(
                id="claude-sonnet-4.5",
                provider="anthropic",
                segment="api-frontier",
                pinning="weak",
                selection_source="flag",
            ),
            repeat=1 + n % 3,
            repeats_planned=3,
            run_mode="agent",
            ablations=Ablations(max_turns=40),
            comparability=Comparability(
                schema_version="1.0.0",
                suite_version="1.1.0",
                task_manifest_hash=hex64("manifest", task),
                fixture_sha256=hex64("fixture", "pic-programmer"),
                copperhead_version="0.9.3",
                copperhead_commit=hex40("copperhead"),
                kicad_cli_version="9.0.2",
                runtime="python-3.11.9",
                node_version=None,
                platform="linux-x86_64",
            ),
            stats=RunStats(
                exit_path="done",
                turns_used=12 + n % 7,
                max_turns=40,
                repair_cycles_used=n % 2,
                max_repair_cycles=3,
                tokens_in=48_000 + n,
                tokens_out=3_100 + n % 100,
                duration_ms=95_000,
                files_touched=["pic_programmer.kicad_sch", "power.kicad_sch"],
            ),
            runner_note=note,
            cost=Cost(usd_micros=190_000 + n, price_table_version="2026-01"),
            sandbox=SandboxRef(
                seed_sha=hex40("seed", task),
                seed_config='{"model":"claude-sonnet-4.5","maxTurns":40}',
                baseline_sha=hex40("baseline", n),
                head_sha=hex40("head", n),
                capture_sha=hex40("capture", n),
                evidence_sha=hex40("evidence", n),
                store=f"runs/{rid}.git",
                store_blake3=hex64("store", n),
                store_bytes=1_200_000 + n,
            ),
            evidence={
                "transcript": EvidenceDigest(
                    path=f"runs/{rid}/transcript.jsonl", blake3=hex64("t", n), bytes=88_000 + n
                ),
                "diff": EvidenceDigest(path=f"runs/{rid}/diff.patch", blake3=hex64("d", n), bytes=4_100),
            },
            setup_skipped=[SetupSkip(command="npm ci", reason="node not required by this task")],
            timings=Timings(
                started_at=started,
                ended_at=started + dt.timedelta(seconds=95),
                duration_ms=95_000,
                agent_ms=80_000,
                verify_ms=15_000,
            ),
        ),
    )


def grade_recorded(
    n: int = 1,
    *,
    id: str | None = None,
    verdict: str = "pass",
    partial_credit: float = 0.75,
    suite_version: str = "1.1.0",
) -> GradeRecordedEvent:
    """A realistic grade (about 1.6 KB encoded); `verdict="fail"` fails one required assertion."""
    rid = run_id(n)
    task = f"fix-net-{n % 17}"
    failing = verdict == "fail"
    assertions = [
        AssertionOutcome(
            id=f"a{i}",
            type=kind,
            status="fail" if (failing and i == 1) or (not required and i == 5) else "pass",
            weight=1.0 + i / 4,
            required=required,
            evidence_source=source,
            detail=f"{kind} checked against the end state of {rid}: net VCC_{i} connected",
        )
        for i, (kind, required, source) in enumerate(
            [
                ("net_connected", True, "end-state"),
                ("net_renamed", True, "end-state"),
                ("no_secret", True, "transcript"),
                ("erc_clean", True, "end-state"),
                ("diff_scope", False, "diff"),
                ("label_style", False, "end-state"),
            ]
        )
    ]
    return GradeRecordedEvent(
        id=id or f"grade.recorded:{rid}:{suite_version}",
        at=at(n) + dt.timedelta(seconds=120),
        actor=RUNNER,
        body=GradeRecorded(
            run_id=rid,
            suite_version=suite_version,
            grader_version="2.0.1",
            task_manifest_hash=hex64("manifest", task),
            assertions=assertions,
            verdict=verdict,  # type: ignore[arg-type]
            partial_credit=partial_credit,
            first_failed_required="a1" if failing else None,
            failure_category="drift-left" if failing else None,
        ),
    )


def run_retracted(n: int = 1, *, id: str | None = None) -> RunRetractedEvent:
    return RunRetractedEvent(
        id=id or f"run.retracted:{run_id(n)}",
        at=at(n) + dt.timedelta(days=1),
        actor=MAINTAINER,
        body=RunRetracted(run_id=run_id(n), reason="sandbox store was corrupted"),
    )


def rubric_scored(n: int = 1, *, id: str | None = None, score: float = 0.5) -> RubricScoredEvent:
    return RubricScoredEvent(
        id=id or f"rubric.scored:{run_id(n)}",
        at=at(n) + dt.timedelta(hours=2),
        actor=Actor(kind="reviewer", name="judge"),
        body=RubricScored(
            run_id=run_id(n),
            judge_model="gpt-5",
            prompt_sha256=hex64("rubric-prompt"),
            score=score,
            rationale="kept the schematic tidy",
        ),
    )


def evidence_imported(n: int = 1, *, id: str | None = None) -> EvidenceImportedEvent:
    return EvidenceImportedEvent(
        id=id or f"evidence.imported:{n}",
        at=at(n),
        actor=Actor(kind="importer", name="import-tool"),
        body=EvidenceImported(
            ownership="imported",
            source="external-harness",
            original_path=f"imports/{n}/result.json",
            format="harness-result/2",
            sha256=hex64("import", n),
            content='{"verdict": "pass"}',
            summary=ImportSummary(task_id="fix-net-1", model="some-model", verdict="pass"),
            files=[
                ImportedFile(
                    role="transcript",
                    original_path=f"imports/{n}/t.jsonl",
                    stored_path=f"evidence/{hex64('t', n)}",
                    sha256=hex64("t", n),
                    bytes=512,
                )
            ],
        ),
    )


#: Every event type with a builder `f(n) -> draft`; ledger.created takes a name instead.
BUILDERS: dict[str, Callable[[int], EventBase]] = {
    "ledger.created": lambda n: ledger_created(f"ledger-{n}"),
    "suite.bumped": suite_bumped,
    "pricing.published": pricing_published,
    "run.recorded": run_recorded,
    "grade.recorded": grade_recorded,
    "run.retracted": run_retracted,
    "rubric.scored": rubric_scored,
    "evidence.imported": evidence_imported,
}

#: The types that may follow `ledger.created`.
APPENDABLE = [t for t in BUILDERS if t != "ledger.created"]


def one_of_each(n: int = 1) -> list[EventBase]:
    """One draft of every appendable type, all with distinct ids."""
    return [BUILDERS[t](n) for t in APPENDABLE]


def runs_and_grades(count: int, start: int = 1) -> list[EventBase]:
    """`count` events alternating run.recorded and grade.recorded: the bulk of a real ledger."""
    out: list[EventBase] = []
    n = start
    while len(out) < count:
        out.append(run_recorded(n))
        if len(out) < count:
            out.append(grade_recorded(n, verdict="fail" if n % 4 == 0 else "pass"))
        n += 1
    return out


# --------------------------------------------------------------------------- JSON forms


def draft_dict(event: EventBase) -> dict[str, Any]:
    """The JSON object a runner would submit for `event`: no seq (the store assigns it)."""
    doc = msgspec.to_builtins(event)
    doc.pop("seq", None)
    return doc


def draft_json(event: EventBase) -> bytes:
    return msgspec.json.encode(draft_dict(event))


def new_ledger(path: Path, name: str = "test-ledger") -> LedgerStore:
    store = LedgerStore(path)
    store.init(name, MAINTAINER)
    return store


# --------------------------------------------------------------------------- the CLI


@dataclass(frozen=True)
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_cli(
    args: Sequence[str | Path], *, input: bytes | str | None = None, env: dict[str, str] | None = None
) -> CliResult:
    """Runs `cbledger ARGS` in this process through the real entry point (`main`), so errors are
    reported exactly as a user sees them: one line on stderr and the exit code of the error."""
    from cbledger.cli.app import main

    runner = CliRunner()
    argv = ["cbledger", *map(str, args)]
    with runner.isolation(input=input, env=env) as streams:
        saved = sys.argv
        sys.argv = argv
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            sys.argv = saved
        sys.stdout.flush()
        sys.stderr.flush()
        out, err = streams[0].getvalue(), streams[1].getvalue()
    return CliResult(code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))
