"""Ledger events for tests, built with the real msgspec event types, and the CLI driven in-process.

Two ways to build them, for two kinds of test:

* one draft of each type by number (`run_recorded(n)`, `grade_recorded(n)`, …): many distinct,
  realistic events without spelling each out, for the ledger's own tests. Drafts carry `seq=0`:
  the store assigns seq numbers.
* `Stream`: a coherent ledger (tasks, suite versions, runs and their grades, retractions, …)
  with contiguous seq numbers from `ledger.created` at seq 1, for the projection tests; fold its
  `events`, or append its `drafts()` to a real store and get the same seqs.

Every value is derived from the arguments, so two calls (or two streams) built the same way are
byte-identical, which is what the idempotency tests and the golden files rely on.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from click.testing import CliRunner

from cbledger.ledger import encoding
from cbledger.ledger.chain import GENESIS, format_line, link_hash
from cbledger.ledger.checkpoint import Checkpoint
from cbledger.ledger.events import (
    Ablations,
    Actor,
    AssertionOutcome,
    CassetteAttached,
    CassetteAttachedEvent,
    CassetteRef,
    CheckpointPublished,
    CheckpointPublishedEvent,
    Comparability,
    Cost,
    CostCapStop,
    CriterionScore,
    EventBase,
    EvidenceDigest,
    EvidenceImported,
    EvidenceImportedEvent,
    FixtureIdentity,
    GradeRecorded,
    GradeRecordedEvent,
    HarnessFailure,
    ImportedFile,
    ImportSummary,
    LaneUsage,
    LedgerCreated,
    LedgerCreatedEvent,
    ModelIdentity,
    ModelPrice,
    NullCostRoute,
    PassRef,
    PricingPublished,
    PricingPublishedEvent,
    ReviewRecorded,
    ReviewRecordedEvent,
    RubricScored,
    RubricScoredEvent,
    RunRecorded,
    RunRecordedEvent,
    RunRetracted,
    RunRetractedEvent,
    RunStats,
    SandboxRef,
    SessionSource,
    SetupSkip,
    SuiteBumped,
    SuiteBumpedEvent,
    TaskIdentity,
    Timings,
)
from cbledger.ledger.keys import SigningKey
from cbledger.ledger.merkle import CompactRange, leaf_hash
from cbledger.ledger.signed_checkpoint import sign as sign_checkpoint
from cbledger.ledger.store import LedgerStore

UTC = dt.UTC
AT = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)  # the numbered drafts start here
T0 = dt.datetime(2026, 9, 6, 9, 0, 0, tzinfo=UTC)  # a Stream starts here
RUNNER = Actor(kind="runner", name="copperbench-runner")
MAINTAINER = Actor(kind="maintainer", name="maintainer")


def h64(*parts: object) -> str:
    """A deterministic 64-hex digest standing in for a real file hash."""
    return hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()


def h40(*parts: object) -> str:
    """A deterministic 40-hex digest standing in for a git commit."""
    return h64(*parts)[:40]


def sandbox_ref(**fields: Any) -> SandboxRef:
    """Only the fields SandboxRef declares, so the builder survives fields being added or dropped."""
    return SandboxRef(**{k: v for k, v in fields.items() if k in SandboxRef.__struct_fields__})


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
            vocabulary_hash=h64("vocabulary", n),
            credential_patterns_hash=h64("patterns"),
            grader_version="2.0.1",
            task_manifest_hashes={t: h64("manifest", t, n) for t in tasks},
            fixture_hashes={"pic-programmer": h64("fixture", "pic-programmer")},
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
                "claude-sonnet-4.5": ModelPrice(segment="api-frontier", pinning="weak", input="3", output="15"),
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
                manifest_hash=h64("manifest", task),
                tags=["nets", "rename"],
            ),
            fixture=FixtureIdentity(id="pic-programmer", sha256=h64("fixture", "pic-programmer")),
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
                task_manifest_hash=h64("manifest", task),
                fixture_sha256=h64("fixture", "pic-programmer"),
                copperhead_version="0.9.3",
                copperhead_commit=h40("copperhead"),
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
                seed_sha=h40("seed", task),
                seed_config='{"model":"claude-sonnet-4.5","maxTurns":40}',
                baseline_sha=h40("baseline", n),
                head_sha=h40("head", n),
                capture_sha=h40("capture", n),
                evidence_sha=h40("evidence", n),
                store=f"runs/{rid}.git",
                store_blake3=h64("store", n),
                store_bytes=1_200_000 + n,
            ),
            evidence={
                "transcript": EvidenceDigest(
                    path=f"runs/{rid}/transcript.jsonl", blake3=h64("t", n), bytes=88_000 + n
                ),
                "diff": EvidenceDigest(path=f"runs/{rid}/diff.patch", blake3=h64("d", n), bytes=4_100),
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
            task_manifest_hash=h64("manifest", task),
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
            prompt_sha256=h64("rubric-prompt"),
            score=score,
            rationale="kept the schematic tidy",
        ),
    )


def _judge_usage(n: int) -> LaneUsage:
    return LaneUsage(lane="harness-judge", tokens_in=100 + n, tokens_out=10 + n,
                     cost=Cost(usd_micros=None if n == 0 else 1_000 * n, price_table_version=None if n == 0 else "2026-03"),
                     provider_models=[f"judge-model-{n % 2}"])


def review_recorded(n: int = 1, *, id: str | None = None) -> ReviewRecordedEvent:
    return ReviewRecordedEvent(
        id=id or f"review.recorded:{run_id(n)}",
        at=at(n) + dt.timedelta(hours=3),
        actor=Actor(kind="reviewer", name="reviewer"),
        body=ReviewRecorded(run_id=run_id(n), narrative="stopped at the ERC gate: a pin left unconnected", author="R. Viewer"),
    )


def cassette_attached(n: int = 1, *, id: str | None = None, tape: str = "a") -> CassetteAttachedEvent:
    """A cassette attached to run `n` after a re-execution; `tape` varies the cassette's digest."""
    digest = h64("cassette", n, tape)
    return CassetteAttachedEvent(
        id=id or f"cassette.attached:{run_id(n)}",
        at=at(n) + dt.timedelta(days=2),
        actor=RUNNER,
        body=CassetteAttached(
            run_id=run_id(n),
            cassette=CassetteRef(path=f"results/cassettes/{digest}.json", blake3=digest, bytes=4096, exchanges=7),
            session=SessionSource(path="tasks/fix-net-1/sessions/solve.json", suite_version="1.1.0", sha256=h64("session", n)),
            copperhead_version="0.9.0",
            copperhead_commit="a2471b374ac1904e1a8dfc9f1b4fa6a2ef87acd8",
        ),
    )


def evidence_imported(n: int = 1, *, id: str | None = None) -> EvidenceImportedEvent:
    content = f'{{"verdict": "pass", "n": {n}}}'
    sha = hashlib.sha256(content.encode()).hexdigest()  # an import is addressed by its content's digest
    return EvidenceImportedEvent(
        id=id or f"evidence.imported:{sha}",
        at=at(n),
        actor=Actor(kind="importer", name="import-tool"),
        body=EvidenceImported(
            ownership="imported",
            source="external-harness",
            original_path=f"imports/{n}/result.json",
            format="harness-result/2",
            sha256=sha,
            content=content,
            summary=ImportSummary(task_id="fix-net-1", model="some-model", verdict="pass"),
            files=[
                ImportedFile(
                    role="transcript",
                    original_path=f"imports/{n}/t.jsonl",
                    stored_path=f"evidence/{h64('t', n)}",
                    sha256=h64("t", n),
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


# --------------------------------------------------------------------------- coherent ledgers


SEGMENT_OF = {
    "harness:gold": "harness",
    "harness:noop": "harness",
}


#: A fixed signing key for tests: its signatures are deterministic, so golden files stay stable.
TEST_SIGNING_KEY = SigningKey.from_seed("test.example/ledger", hashlib.sha256(b"cbledger test signing key").digest())


def stream_root(events: Sequence[EventBase]) -> bytes:
    """The RFC 6962 root of a ledger file holding exactly these sequenced events."""
    prev, tree = GENESIS, CompactRange()
    for ev in events:
        data = encoding.encode(ev)
        h = link_hash(prev, ev.seq, data)
        tree.append(leaf_hash(format_line(data, h, prev)[:-1]))
        prev = h
    return tree.root()


class Stream:
    def __init__(self, name: str = "projection-test") -> None:
        self.events: list[EventBase] = []
        self.tasks: dict[str, dict[str, Any]] = {}
        self._n = 0
        self._add(LedgerCreatedEvent, LedgerCreated(name=name), id=f"ledger.created:{name}", actor=MAINTAINER)

    # ------------------------------------------------------------------ plumbing

    def _add(self, cls, body, *, id: str, actor: Actor = RUNNER, at: dt.datetime | None = None) -> EventBase:
        seq = len(self.events) + 1
        ev = cls(seq=seq, id=id, at=at or T0 + dt.timedelta(minutes=seq), actor=actor, body=body)
        self.events.append(ev)
        return ev

    def drafts(self) -> list[EventBase]:
        return [msgspec.structs.replace(e, seq=0) for e in self.events]

    def task(
        self,
        task_id: str,
        *,
        tier: str = "simple",
        outcome: str = "edit",
        variant_of: str | None = None,
        fixture: str = "mic-board",
        manifest: str | None = None,
    ) -> str:
        self.tasks[task_id] = {
            "tier": tier,
            "outcome": outcome,
            "variant_of": variant_of,
            "fixture": fixture,
            "manifest": manifest or h64("manifest", task_id),
        }
        return task_id

    def _task(self, task_id: str) -> dict[str, Any]:
        if task_id not in self.tasks:
            self.task(task_id)
        return self.tasks[task_id]

    # ------------------------------------------------------------------ events

    def suite(self, version: str, *, reason: str = "a new suite version", tasks: list[str] | None = None) -> EventBase:
        names = sorted(tasks if tasks is not None else self.tasks)
        fixtures = sorted({self.tasks[t]["fixture"] for t in names})
        return self._add(
            SuiteBumpedEvent,
            SuiteBumped(
                suite_version=version,
                previous=None,
                reason=reason,
                vocabulary_hash=h64("vocab"),
                credential_patterns_hash=h64("patterns"),
                grader_version="1.0.0",
                task_manifest_hashes={t: self.tasks[t]["manifest"] for t in names},
                fixture_hashes={f: h64("fixture", f) for f in fixtures},
            ),
            id=f"suite.bumped:{version}:{len(self.events)}",
            actor=MAINTAINER,
        )

    def run(
        self,
        task_id: str,
        model: str = "vendor:model-a",
        *,
        repeat: int = 1,
        usd_micros: int | None = 100_000,
        segment: str | None = None,
        pinning: str = "strong",
        exit_path: str | None = "done",
        run_mode: str | None = None,
        started: dt.datetime | None = None,
        kicad: str | None = "9.0.8",
        schema_version: str = "1.0.0",
        suite_version: str = "1.0.0",
        manifest: str | None = None,
        fixture_sha: str | None = None,
        copperhead_version: str | None = "0.9.0",
        node_version: str | None = "v22.17.0",
        transcript: bool = True,
        ablations: Ablations | None = None,
        setup_skipped: list[SetupSkip] | None = None,
        tokens: tuple[int, int] = (1000, 100),
        run_id: str | None = None,
        harness_failure: HarnessFailure | None = None,
        batch: str | None = None,
        os_name: str | None = None,
        copperhead_commit: str | None = None,
        provider_models: list[str] | None = None,
        passes: PassRef | None = None,
        cost_cap: CostCapStop | None = None,
    ) -> str:
        t = self._task(task_id)
        self._n += 1
        rid = run_id or f"r{self._n:05d}"
        harness = model.startswith("harness:")
        seg = segment or SEGMENT_OF.get(model, "harness" if harness else "api-frontier")
        mode = run_mode or (model.split(":", 1)[1] if harness else "agent")
        fsha = fixture_sha or h64("fixture", t["fixture"])
        start = started or T0 + dt.timedelta(minutes=self._n)
        evidence = {}
        if transcript:
            evidence["transcript"] = EvidenceDigest(
                path=f".copperhead/runs/{rid}/transcript.jsonl", blake3=h64("t", rid), bytes=100
            )
        body = RunRecorded(
            run_id=rid,
            task=TaskIdentity(
                id=task_id,
                tier=t["tier"],
                mode="do",
                expected_outcome=t["outcome"],
                manifest_hash=manifest or t["manifest"],
                variant_of=t["variant_of"],
            ),
            fixture=FixtureIdentity(id=t["fixture"], sha256=fsha),
            model=ModelIdentity(
                id=model, provider="harness" if harness else "vendor", segment=seg, pinning=pinning,
                selection_source="flag",
            ),
            repeat=repeat,
            repeats_planned=3,
            run_mode=mode,
            ablations=ablations or Ablations(),
            comparability=Comparability(
                schema_version=schema_version,
                suite_version=suite_version,
                task_manifest_hash=manifest or t["manifest"],
                fixture_sha256=fsha,
                copperhead_version=copperhead_version,
                copperhead_commit=copperhead_commit,
                kicad_cli_version=kicad,
                runtime="python-3.11",
                node_version=node_version,
                platform="linux-x64",
                os=os_name,
            ),
            stats=None
            if exit_path is None
            else RunStats(
                exit_path=exit_path,
                turns_used=5,
                max_turns=40,
                repair_cycles_used=0,
                max_repair_cycles=3,
                tokens_in=tokens[0],
                tokens_out=tokens[1],
            ),
            cost=Cost(
                usd_micros=None if harness else usd_micros,
                price_table_version=None if harness or usd_micros is None else "2026-09",
            ),
            sandbox=sandbox_ref(
                seed_sha=h40("seed", task_id),
                seed_config='{"maxTurns": 40}',
                baseline_sha=h40("baseline", task_id),
                head_sha=h40("head", rid),
                capture_sha=h40("capture", rid),
                evidence_sha=h40("evidence", rid),
                store=f"results/runs/{rid}.bundle",
                store_blake3=h64("store", rid),
                store_bytes=1000,
            ),
            evidence=evidence,
            setup_skipped=setup_skipped or [],
            timings=Timings(
                started_at=start,
                ended_at=start + dt.timedelta(seconds=30),
                duration_ms=30_000,
                agent_ms=25_000,
                verify_ms=5_000,
            ),
            harness_failure=harness_failure,
            batch=batch,
            provider_models=provider_models or [],
            passes=passes if passes is not None else msgspec.UNSET,
            cost_cap=cost_cap if cost_cap is not None else msgspec.UNSET,
        )
        self._add(RunRecordedEvent, body, id=f"run.recorded:{rid}")
        return rid

    def grade(
        self,
        run_id: str,
        verdict: str = "pass",
        *,
        suite: str = "1.0.0",
        category: str | None = None,
        manifest: str | None = None,
        partial: float | None = None,
        detail: str = "observed",
        event_id: str | None = None,
    ) -> EventBase:
        run = next(e.body for e in self.events if isinstance(e, RunRecordedEvent) and e.body.run_id == run_id)
        failing = verdict == "fail"
        assertions = [
            AssertionOutcome(
                id="main-check", type="exit_path_in", status="fail" if failing else "pass",
                weight=2.0, required=True, evidence_source="transcript", detail=detail,
            ),
            AssertionOutcome(
                id="no-secret", type="no_secret", status="pass", weight=1.0, required=True,
                evidence_source="diff", detail="no credential pattern matched",
            ),
        ]
        return self._add(
            GradeRecordedEvent,
            GradeRecorded(
                run_id=run_id,
                suite_version=suite,
                grader_version="1.0.0",
                task_manifest_hash=manifest or run.task.manifest_hash,
                assertions=assertions,
                verdict=verdict,
                partial_credit=partial if partial is not None else (1.0 if not failing else 1 / 3),
                first_failed_required="main-check" if failing else None,
                failure_category=(category or "wrong-target") if failing else None,
            ),
            id=event_id or f"grade.recorded:{run_id}:{suite}:{len(self.events)}",
        )

    def graded_run(self, task_id: str, model: str = "vendor:model-a", verdict: str = "pass", *, suite: str = "1.0.0", category: str | None = None, **run_kw: Any) -> str:
        rid = self.run(task_id, model, suite_version=suite, **run_kw)
        self.grade(rid, verdict, suite=suite, category=category)
        return rid

    def retract(self, run_id: str, reason: str = "sandbox lost") -> EventBase:
        return self._add(
            RunRetractedEvent, RunRetracted(run_id=run_id, reason=reason),
            id=f"run.retracted:{run_id}", actor=MAINTAINER,
        )

    def unrecorded(self, run_id: str, usd_micros: int, model: str = "vendor:model-a", batch: str | None = "b-killed") -> EventBase:
        """What a run killed with its driver spent (`spend.unrecorded`)."""
        from cbledger.ledger.events import SpendUnrecorded, SpendUnrecordedEvent

        return self._add(
            SpendUnrecordedEvent,
            SpendUnrecorded(campaign=run_id.split(".")[0], run_id=run_id, batch=batch, model=model, usd_micros=usd_micros),
            id=f"spend.unrecorded:{run_id}:{usd_micros}",
        )

    def rubric(self, run_id: str, score: float = 0.8, *, judged: int | None = None) -> EventBase:
        """`judged`: what `cbledger judge` records besides the score: criteria (`judged` points of
        5, the score theirs) and the judge lane's usage (uncosted when `judged` is 0)."""
        extra: dict[str, Any] = {}
        if judged is not None:
            score = judged / 5
            extra = {"criteria": [CriterionScore(id="c1", points=judged, max_points=5)],
                     "usage": _judge_usage(judged)}
        return self._add(
            RubricScoredEvent,
            RubricScored(run_id=run_id, judge_model="judge:model" if judged is None else f"judge:model-{judged}", prompt_sha256=h64("rubric"), score=score,
                         rationale="sound", **extra),
            id=f"rubric.scored:{run_id}:{len(self.events)}",
            actor=Actor(kind="reviewer", name="judge"),
        )

    def review(self, run_id: str, *, billed: int | None = None) -> EventBase:
        """A narrative by a person, or by a model whose call the judge lane paid (`billed` tokens)."""
        return self._add(
            ReviewRecordedEvent,
            ReviewRecorded(run_id=run_id, narrative="stopped at the ERC gate", author="R. Viewer",
                           usage=None if billed is None else _judge_usage(billed)),
            id=f"review.recorded:{run_id}:{len(self.events)}",
            actor=Actor(kind="reviewer", name="reviewer"),
        )

    def checkpoint(self) -> EventBase:
        """`checkpoint.published` for every event so far, signed with `TEST_SIGNING_KEY`, over the
        root a ledger file holding exactly these events (chained from genesis) would have."""
        size = len(self.events)
        cp = Checkpoint(TEST_SIGNING_KEY.name, size, stream_root(self.events))
        note = sign_checkpoint(cp, [TEST_SIGNING_KEY])
        return self._add(
            CheckpointPublishedEvent,
            CheckpointPublished(origin=cp.origin, tree_size=size, root_hash=cp.root_hex, note=note),
            id=f"checkpoint:{size}", actor=MAINTAINER,
        )

    def imported(self, *, task_id: str = "do-rename-net", model: str = "outside:model", verdict: str = "pass") -> EventBase:
        n = len(self.events)
        content = f'{{"n": {n}}}'
        sha = hashlib.sha256(content.encode()).hexdigest()
        return self._add(
            EvidenceImportedEvent,
            EvidenceImported(
                ownership="reviewer-supplied",
                source="manual-reviewer-import",
                original_path=f"imports/{n}.json",
                format="manual-import/1",
                sha256=sha,
                content=content,
                summary=ImportSummary(task_id=task_id, model=model, verdict=verdict, suite_version="1.0.0", run_date="2026-09-01"),
            ),
            id=f"evidence.imported:{sha}",
            actor=Actor(kind="importer", name="importer"),
        )


def rich_stream() -> Stream:
    """A ledger touching every view: tiers, segments, repeats, refusals, variants, harness,
    replays, re-grades, conflicts, retractions, rubric scores, imports and an incomparable group."""
    s = Stream()
    s.task("rename-net", tier="simple")
    s.task("move-label", tier="simple")
    s.task("budget-refusal", tier="medium", outcome="refusal")
    s.task("flag-drift", tier="medium", outcome="flag")
    s.task("route-power", tier="hard")
    s.task("rename-net-v1", tier="simple", variant_of="rename-net")
    s.task("orphan-variant", tier="hard", variant_of="never-run-original")
    s.suite("1.0.0", reason="first suite")
    edit_tasks = ["rename-net", "move-label", "route-power", "rename-net-v1", "orphan-variant"]
    for repeat in (1, 2, 3):
        for t in edit_tasks + ["budget-refusal", "flag-drift"]:
            # model-a: strong, costed, mostly passing
            ok_a = not (t == "route-power" and repeat != 2) and not (t == "rename-net-v1" and repeat == 3)
            s.graded_run(t, "vendor:model-a", "pass" if ok_a else "fail", repeat=repeat,
                         usd_micros=120_000 + 1_000 * repeat, category="repair-exhausted")
            # model-b: cheap, refuses too often
            refuses = t in ("move-label",) or t == "budget-refusal"
            exit_b = "refused" if refuses else "done"
            ok_b = (t == "budget-refusal") or (t == "rename-net" and repeat < 3)
            s.graded_run(t, "cheap:model-b", "pass" if ok_b else "fail", repeat=repeat, segment="api-cheap",
                         usd_micros=9_000, exit_path=exit_b,
                         category="false-refusal" if refuses and t != "budget-refusal" else "wrong-target")
            # a saved-login route: uncosted, weakly pinned
            s.graded_run(t, "claude-code", "pass" if t != "route-power" else "fail", repeat=repeat,
                         segment="saved-login", pinning="weak", usd_micros=None, category="turn-budget",
                         exit_path="done" if t != "route-power" else "turn-budget-exhausted")
    # a single-repeat model
    for t in ("rename-net", "move-label"):
        s.graded_run(t, "vendor:model-c", "pass", usd_micros=50_000)
    # harness discrimination check
    for t in ["rename-net", "move-label", "budget-refusal", "flag-drift", "route-power", "rename-net-v1"]:
        s.graded_run(t, "harness:gold", "pass")
        s.graded_run(t, "harness:noop", "pass" if t == "flag-drift" else "fail", category="wrong-target")
    # a signed checkpoint: the records above are covered by it, the ones below are not yet
    s.checkpoint()
    # a replay of a model-a run
    s.graded_run("rename-net", "vendor:model-a", "pass", run_mode="replay", usd_micros=121_000)
    # an incomparable group: older kicad-cli major
    s.graded_run("rename-net", "vendor:model-a", "fail", kicad="8.0.4", category="stalled")
    s.graded_run("rename-net", "vendor:model-a", "pass", kicad="8.0.4")
    # an incomparable group: a stale manifest of move-label
    s.graded_run("move-label", "vendor:model-a", "pass", manifest=h64("manifest", "move-label", "old"))
    # rubric scores (one before a grade, the rest after)
    first = s.run("flag-drift", "vendor:model-a", repeat=3, usd_micros=130_000)
    s.rubric(first, 0.9)
    s.grade(first, "pass")
    for rid in ("r00001", "r00002"):
        s.rubric(rid, 0.5)
    # a retraction, a conflict, a duplicate, an import
    bad = s.graded_run("rename-net", "vendor:model-a", "fail", repeat=3, category="stalled")
    s.retract(bad, "sandbox bundle lost")
    s.grade("r00004", "fail", category="wrong-target")  # conflicts with its first grade
    s.imported()
    s.unrecorded("killed.rename-net-s1-a1", 40_000)  # a run killed with its driver, billed
    # a new suite version: re-grades of two runs
    s.suite("1.1.0", reason="tightened drift assertions")
    s.grade("r00001", "pass", suite="1.1.0")
    s.grade("r00002", "fail", suite="1.1.0", category="wrong-target")
    return s


def conditions_stream() -> Stream:
    """`rich_stream` and, under the current suite, what a maintainer's experiments add: a model's
    default runs beside runs of the same tasks under two ablation conditions (one of them also
    on a task it never ran by default), recorded with a batch and the OS, one of them on a route
    whose provider named another model than the one requested."""
    s = rich_stream()
    for t in ("rename-net", "move-label"):
        for r in (1, 2, 3):
            s.graded_run(t, "vendor:model-d", "pass", suite="1.1.0", repeat=r, usd_micros=40_000,
                         batch="20260906T120000Z-base", os_name="Debian GNU/Linux 12 (bookworm)",
                         copperhead_commit="a2471b374ac1904e1a8dfc9f1b4fa6a2ef87acd8", provider_models=["model-d-2026-08"])
    for t in ("rename-net", "move-label", "route-power"):
        for r in (1, 2, 3):
            ok = t == "rename-net" and r == 1
            s.graded_run(t, "vendor:model-d", "pass" if ok else "fail", suite="1.1.0", repeat=r,
                         usd_micros=10_000, category="turn-budget", exit_path="done" if ok else "turn-budget-exhausted",
                         ablations=Ablations(max_turns=2), batch="20260906T130000Z-turns",
                         os_name="Debian GNU/Linux 12 (bookworm)")
    for r in (1, 2, 3):
        s.graded_run("rename-net", "vendor:model-d", "pass", suite="1.1.0", repeat=r, usd_micros=30_000,
                     ablations=Ablations(tool_subset=["read_file", "edit_file", "finish"]), batch="20260906T140000Z-tools")
    return s


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


def rich_project(root: Path, name: str = "projection-test") -> Path:
    """A project at `root` whose ledger (results/ledger/events.jsonl) holds `rich_stream()`."""
    new_ledger(root / "results" / "ledger" / "events.jsonl", name).append(rich_stream().drafts()[1:])
    return root


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


def parse_events(data: bytes, source: str, schema=None) -> list:  # type: ignore[no-untyped-def]
    """The events of an input, as `cbledger append` reads them (without their canonical bytes)."""
    from cbledger.ledger.intake import parse_drafts

    return [d.event for d in (parse_drafts(data, source, schema) if schema else parse_drafts(data, source))]


def all_suite_metrics(state) -> list:  # type: ignore[no-untyped-def]
    """Every suite version's metrics, the first rubric scores counted, as the site reads them."""
    from cbledger.projections.fold import suite_versions
    from cbledger.projections.metrics import first_rubric_scores, suite_metrics

    return [suite_metrics(state, v, first_rubric_scores(state)) for v in suite_versions(state)]
