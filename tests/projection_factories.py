"""Event streams for projection tests, built with the real msgspec event types.

`Stream` hands out events with contiguous seq numbers (seq 1 is `ledger.created`), so a test can
fold them directly or append their drafts (`drafts()`) to a real store and get the same seqs.
Every value is derived from the arguments, so two streams built the same way are identical.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

import msgspec

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
    ImportSummary,
    LedgerCreated,
    LedgerCreatedEvent,
    ModelIdentity,
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

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 9, 6, 9, 0, 0, tzinfo=UTC)
RUNNER = Actor(kind="runner", name="runner")
MAINTAINER = Actor(kind="maintainer", name="maintainer")


def h64(*parts: object) -> str:
    return hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()


def h40(*parts: object) -> str:
    return h64(*parts)[:40]


def _sandbox(**fields: Any) -> SandboxRef:
    """Only the fields SandboxRef declares, so the builder survives fields being added or dropped."""
    return SandboxRef(**{k: v for k, v in fields.items() if k in SandboxRef.__struct_fields__})


SEGMENT_OF = {
    "harness:gold": "harness",
    "harness:noop": "harness",
}


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
                copperhead_commit=None,
                kicad_cli_version=kicad,
                runtime="python-3.11",
                node_version=node_version,
                platform="linux-x64",
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
            sandbox=_sandbox(
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

    def rubric(self, run_id: str, score: float = 0.8) -> EventBase:
        return self._add(
            RubricScoredEvent,
            RubricScored(run_id=run_id, judge_model="judge:model", prompt_sha256=h64("rubric"), score=score, rationale="sound"),
            id=f"rubric.scored:{run_id}:{len(self.events)}",
            actor=Actor(kind="reviewer", name="judge"),
        )

    def imported(self, *, task_id: str = "do-rename-net", model: str = "outside:model", verdict: str = "pass") -> EventBase:
        n = len(self.events)
        return self._add(
            EvidenceImportedEvent,
            EvidenceImported(
                ownership="reviewer-supplied",
                source="manual-reviewer-import",
                original_path=f"imports/{n}.json",
                format="manual-import/1",
                sha256=h64("import", n),
                content="{}",
                summary=ImportSummary(task_id=task_id, model=model, verdict=verdict, suite_version="1.0.0", run_date="2026-09-01"),
            ),
            id=f"evidence.imported:{n}",
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
    # a new suite version: re-grades of two runs
    s.suite("1.1.0", reason="tightened drift assertions")
    s.grade("r00001", "pass", suite="1.1.0")
    s.grade("r00002", "fail", suite="1.1.0", category="wrong-target")
    return s
