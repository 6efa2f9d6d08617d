"""Result records: the path rule, the reference schema, byte-for-byte interop with the reference
implementation's published records, and the writer's only-new-or-changed / retraction rules."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import jsonschema
import pytest

from cbledger.ledger.events import (
    Ablations,
    AssertionOutcome,
    Comparability,
    Cost,
    FixtureIdentity,
    GradeRecorded,
    GradeRecordedEvent,
    ModelIdentity,
    RunRecorded,
    RunRecordedEvent,
    SetupSkip,
    TaskIdentity,
    Timings,
)
from cbledger.projections import paths, records, writers
from cbledger.projections.fold import fold
from cbledger.projections.metrics import suite_metrics
from tests.factories import RUNNER, Stream, h40, h64, rich_stream, sandbox_ref

REF = "reference-records"


@pytest.fixture(scope="module")
def schema(shared_real: Path) -> dict:
    return json.loads((shared_real / REF / "schema" / "result.schema.json").read_text())


#: one validator per schema: `jsonschema.validate` checks the schema itself and builds a new
#: validator at every call, 38 ms against 1 ms for the record alone
_VALIDATORS: dict[int, tuple[dict, jsonschema.Draft202012Validator]] = {}


def validate(schema: dict, data: bytes) -> None:
    kept = _VALIDATORS.get(id(schema))
    if kept is None or kept[0] is not schema:
        jsonschema.Draft202012Validator.check_schema(schema)
        kept = _VALIDATORS[id(schema)] = (schema, jsonschema.Draft202012Validator(schema))
    error = jsonschema.exceptions.best_match(kept[1].iter_errors(json.loads(data)))
    if error is not None:
        raise error


# --------------------------------------------------------------------------- the path rule


def test_path_uses_the_utc_date_of_the_start_and_a_safe_model_dir():
    s = Stream()
    late = dt.datetime(2026, 3, 1, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-5)))
    rid = s.graded_run("rename-net", "compat:qwen2.5-coder:7b", started=late, segment="open-weight-self-hosted", usd_micros=None)
    [entry] = records.record_entries(fold(s.events))
    assert entry.run_id == rid
    assert entry.path == "2026-03-02/compat-qwen2.5-coder-7b/rename-net/run-1.json"
    assert paths.model_dir("harness:gold") == "harness-gold"
    assert paths.is_record_path(entry.path)
    assert paths.is_record_path("2026-03-02/m/t/run-3.suite-1.2.0.json")
    assert not paths.is_record_path("ledger/events.jsonl")
    assert not paths.is_record_path("2026-03-02/m/t/run-3.json\n")
    assert not paths.is_record_path("2026-03-02\n/m/t/run-3.json")


def test_two_same_day_suite_runs_never_collide_and_retraction_renames_nothing():
    s = Stream()
    day = dt.datetime(2026, 9, 6, 10, tzinfo=dt.UTC)
    first = [s.graded_run("t", repeat=r, started=day) for r in (1, 2, 3)]
    second = [s.graded_run("t", repeat=r, started=day + dt.timedelta(hours=3)) for r in (1, 2, 3)]
    s.retract(first[1])
    state = fold(s.events)
    got = {e.run_id: e.path.rsplit("/", 1)[1] for e in records.record_entries(state)}
    assert got == {
        first[0]: "run-1.json", first[2]: "run-3.json",
        second[0]: "run-4.json", second[1]: "run-5.json", second[2]: "run-6.json",
    }
    assert [p for rid in state.retracted for p, _, _ in records.record_paths(state, rid)] == ["2026-09-06/vendor-model-a/t/run-2.json"]


def test_regrade_under_another_suite_gets_its_own_file_and_keeps_the_run_stamp():
    s = Stream()
    s.task("t", fixture="mic-board")
    rid = s.graded_run("t", suite="1.0.0")
    s.grade(rid, "fail", suite="1.1.0", manifest=h64("manifest", "t", "new"), category="drift-left")
    entries = {e.suite_version: e for e in records.record_entries(fold(s.events))}
    assert entries["1.0.0"].path.endswith("/run-1.json")
    assert entries["1.1.0"].path.endswith("/run-1.suite-1.1.0.json")
    new = entries["1.1.0"].record
    assert new.suite_version == new.comparability.suite_version == "1.1.0"
    assert new.comparability.task_manifest_hash == h64("manifest", "t", "new")
    assert new.comparability.fixture_sha256 == entries["1.0.0"].record.comparability.fixture_sha256
    assert new.verdict == "fail" and entries["1.0.0"].record.verdict == "pass"


def test_first_grade_makes_the_record_and_a_conflict_does_not_replace_it():
    s = Stream()
    rid = s.graded_run("t")
    s.grade(rid, "fail", category="stalled")
    state = fold(s.events)
    [entry] = records.record_entries(state)
    assert entry.record.verdict == "pass"
    assert len(state.conflicts) == 1 and state.conflicts[0].fields[:1] == ["assertions"]


# --------------------------------------------------------------------------- field mapping


def test_usd_is_the_exact_decimal_of_micros():
    assert records.usd_from_micros(1) == 0.000001
    assert records.usd_from_micros(123_456_789) == 123.456789
    assert records.usd_from_micros(100_000) == 0.1
    assert records.usd_from_micros(0) == 0.0
    assert records.usd_from_micros(None) is None


def test_field_mapping_absent_versions_replay_ablations_and_rubric_order(schema):
    s = Stream()
    a = s.run("t", copperhead_version=None, node_version=None, kicad=None, run_mode="replay",
              ablations=Ablations(max_turns=10), setup_skipped=[SetupSkip(command="init", reason="unavailable")],
              usd_micros=2_500_001)
    s.rubric(a, 0.25)          # before the grade: part of the record
    s.grade(a, "pass")
    s.rubric(a, 0.75)          # after: leaderboard and read model only
    b = s.graded_run("t", exit_path=None, verdict="fail", category="stalled", usd_micros=None,
                     segment="saved-login", pinning="weak")
    s.rubric(b, 0.5)
    by_run = {e.run_id: e for e in records.record_entries(fold(s.events))}
    ra, rb = by_run[a].record, by_run[b].record
    assert ra.comparability.copperhead_version == records.ABSENT == ra.comparability.node_version
    assert ra.comparability.kicad_cli_version is None
    assert ra.run.run_mode == "agent"  # replay -> agent (see records module docstring)
    assert ra.run.ablations == records.RecordAblations(max_turns=10)
    assert ra.cost == records.RecordCost(usd=2.500001, price_table_version="2026-09")
    assert ra.rubric is not None and ra.rubric.score == 0.25
    assert ra.artifacts == records.RecordArtifacts(
        transcript_path=f".copperhead/runs/{a}/transcript.jsonl", sandbox_preserved=True,
        sandbox_path=f"results/runs/{a}.bundle",
    )
    assert rb.stats is None and rb.rubric is None
    assert rb.cost == records.RecordCost(usd=None, price_table_version=None)
    assert rb.model is not None and rb.model.segment == "saved-login"
    validate(schema, records.render(ra))


def test_every_record_of_a_rich_ledger_validates_against_the_reference_schema_and_ours(schema, repo_root):
    ours = json.loads((repo_root / "schema" / "result.schema.json").read_text())
    entries = records.record_entries(fold(rich_stream().events))
    assert len(entries) > 80
    for e in entries:
        validate(schema, records.render(e.record))
        validate(ours, records.render(e.record))
    modes = {e.record.run.run_mode for e in entries}
    assert modes == {"agent", "gold", "noop"}


def test_harness_records_carry_no_model_or_cost_block(schema):
    s = Stream()
    s.graded_run("t", "harness:gold")
    [e] = records.record_entries(fold(s.events))
    assert e.record.model is None and e.record.cost is None and e.record.run.run_mode == "gold"
    validate(schema, records.render(e.record))


def test_render_is_byte_stable_with_the_reference_layout():
    s = Stream()
    s.graded_run("t")
    [e] = records.record_entries(fold(s.events))
    data = records.render(e.record)
    assert data.endswith(b"}\n") and b"\n  \"schemaVersion\": \"1.0.0\",\n" in data
    keys = list(json.loads(data))
    assert keys[:11] == [
        "schemaVersion", "suiteVersion", "task", "fixture", "run", "verdict", "partialCredit",
        "failureCategory", "firstFailedRequired", "assertions", "comparability",
    ]
    assert records.render(e.record) == data


# --------------------------------------------------------------------------- interop


def _reference_records(shared_real: Path) -> list[tuple[str, dict, bytes]]:
    base = shared_real / REF / "results"
    out = []
    for p in sorted(base.glob("*/*/*/run-*.json")):
        data = p.read_bytes()
        doc = json.loads(data)
        if "comparability" not in doc:
            continue  # the older record layout
        rel = p.relative_to(base).as_posix()
        out.append((rel, doc, data))
    # ledger order = the order the reference numbered them in
    return sorted(out, key=lambda x: (x[0].rsplit("/", 1)[0], int(x[0].rsplit("-", 1)[1][:-5])))


def _events_from_reference(refs: list[tuple[str, dict, bytes]]) -> list:
    events: list = []
    base = Stream("reference").events
    events.extend(base)
    for i, (rel, doc, _) in enumerate(refs):
        date = dt.datetime.fromisoformat(rel.split("/")[0] + "T12:00:00+00:00") + dt.timedelta(seconds=i)
        c, run, task = doc["comparability"], doc["run"], doc["task"]
        rid = f"ref-{i:03d}"
        body = RunRecorded(
            run_id=rid,
            task=TaskIdentity(id=task["id"], tier=task["tier"], mode=task["mode"],
                              expected_outcome=task["expectedOutcome"], manifest_hash=c["taskManifestHash"]),
            fixture=FixtureIdentity(id=doc["fixture"]["id"], sha256=doc["fixture"]["sha256"]),
            model=ModelIdentity(id=run["model"], provider="harness", segment="harness", pinning="strong",
                                selection_source="flag"),
            repeat=run["repeat"], repeats_planned=3, run_mode=run["runMode"],
            comparability=Comparability(
                schema_version=c["schemaVersion"], suite_version=c["suiteVersion"],
                task_manifest_hash=c["taskManifestHash"], fixture_sha256=c["fixtureSha256"],
                copperhead_version=c["copperheadVersion"], copperhead_commit=c["copperheadCommit"],
                kicad_cli_version=c["kicadCliVersion"], runtime="node", node_version=c["nodeVersion"],
                platform=c["platform"],
            ),
            stats=None,
            cost=Cost(usd_micros=None, price_table_version=None),
            sandbox=sandbox_ref(seed_sha=h40("seed", rid), seed_config="{}", baseline_sha=run["baselineSha"],
                             head_sha=h40("h", rid), capture_sha=h40("c", rid), evidence_sha=h40("e", rid),
                             store=f"results/runs/{rid}.bundle", store_blake3=h64(rid), store_bytes=1),
            evidence={},
            setup_skipped=[SetupSkip(**s) for s in run["setupSkipped"]],
            timings=Timings(started_at=date, ended_at=date, duration_ms=run["durationMs"], agent_ms=0, verify_ms=0),
        )
        seq = len(events) + 1
        events.append(RunRecordedEvent(seq=seq, id=f"run:{rid}", at=date, actor=RUNNER, body=body))
        if doc["verdict"] not in ("pass", "fail"):
            continue  # `unscoreable` has no ledger form: the run is recorded, ungraded
        grade = GradeRecorded(
            run_id=rid, suite_version=doc["suiteVersion"], grader_version="1.0.0",
            task_manifest_hash=c["taskManifestHash"],
            assertions=[
                AssertionOutcome(id=a["id"], type=a["type"], status=a["status"], weight=float(a["weight"]),
                                 required=a["required"], evidence_source="end-state", detail=a["detail"])
                for a in doc["assertions"]
            ],
            verdict=doc["verdict"], partial_credit=float(doc["partialCredit"]),
            first_failed_required=doc["firstFailedRequired"], failure_category=doc["failureCategory"],
        )
        events.append(GradeRecordedEvent(seq=len(events) + 1, id=f"grade:{rid}", at=date, actor=RUNNER, body=grade))
    return events


def test_records_are_byte_identical_to_the_reference_implementations(shared_real, schema, tmp_path):
    refs = _reference_records(shared_real)
    scoreable = [(rel, data) for rel, doc, data in refs if doc["verdict"] in ("pass", "fail")]
    assert len(scoreable) >= 10
    state = fold(_events_from_reference(refs))
    report = writers.sync_records(state, tmp_path)
    assert sorted(report.created) == sorted(rel for rel, _ in scoreable)
    for rel, data in scoreable:
        ours = (tmp_path / rel).read_bytes()
        assert ours == data, rel
        validate(schema, ours)


# --------------------------------------------------------------------------- the writer


def test_writer_writes_only_new_or_changed_files_and_keeps_retracted_records_beside_their_mark(tmp_path):
    s = Stream()
    keep = s.graded_run("t")
    gone = s.graded_run("t", repeat=2)
    results = tmp_path / "results"
    stray = results / "2026-09-06" / "notes.txt"
    stray.parent.mkdir(parents=True)
    stray.write_text("not a record")
    first = writers.sync_records(fold(s.events), results)
    assert len(first.created) == 2 and not first.updated and first.marks == 0

    path_keep = results / first.created[0]
    mtime = path_keep.stat().st_mtime_ns
    again = writers.sync_records(fold(s.events), results)
    assert again.clean and again.unchanged == 2
    assert path_keep.stat().st_mtime_ns == mtime

    retracted_record = results / next(p for p in first.created if p.endswith("run-2.json"))
    published = retracted_record.read_bytes()
    s.retract(gone, "the sandbox bundle was lost")
    state = fold(s.events)
    assert not writers.sync_records(state, results, check=True).clean
    marked = writers.sync_records(state, results)
    assert marked.created == [retracted_record.relative_to(results).with_name("run-2.retracted.json").as_posix()]
    assert marked.marks == 1 and marked.unchanged == 2
    # nothing published is deleted or edited: the record is the bytes it was, the mark says why
    assert retracted_record.read_bytes() == published and path_keep.is_file() and stray.is_file()
    mark = json.loads(retracted_record.with_name("run-2.retracted.json").read_text())
    assert (mark["runId"], mark["retracted"], mark["reason"], mark["records"]) == (gone, True, "the sandbox bundle was lost", ["run-2.json"])
    assert keep in state.runs and gone in state.runs  # the log keeps both
    # and the retracted run is in no metric
    main = suite_metrics(state, "1.0.0").main_group()
    assert main is not None and [r.runs for r in main.rows if r.tier == "simple"] == [1]

    path_keep.write_text("{}\n")  # a hand edit is put back
    fixed = writers.sync_records(state, results)
    assert fixed.updated == [first.created[0]]
    retracted_record.unlink()  # a deleted retracted record is put back too: it is published evidence
    assert writers.sync_records(state, results).created == [retracted_record.relative_to(results).as_posix()]


def test_a_run_retracted_before_it_was_graded_has_no_record_to_mark():
    s = Stream()
    rid = s.run("t")
    s.retract(rid)
    assert records.retraction_marks(fold(s.events)) == [] and records.published(fold(s.events)) == []


def test_a_replay_of_a_harness_run_keeps_its_harness_mode_and_validates(schema):
    s = Stream()
    s.graded_run("t", "harness:gold", run_mode="replay")
    [e] = records.record_entries(fold(s.events))
    assert e.record.run.run_mode == "gold" and e.record.model is None and e.record.cost is None
    validate(schema, records.render(e.record))


def test_provider_named_models_appear_in_a_record_only_when_they_differ_from_the_request(schema, repo_root):
    ours = json.loads((repo_root / "schema" / "result.schema.json").read_text())
    s = Stream()
    same = s.graded_run("t", "compat:qwen2.5-coder:7b", segment="open-weight-hosted", provider_models=["qwen2.5-coder:7b"])
    other = s.graded_run("t", "vendor:model-a", provider_models=["model-a-2026-08-01"])
    silent = s.graded_run("t", "vendor:model-a", batch="b1", os_name="Debian GNU/Linux 12 (bookworm)")
    by_run = {e.run_id: e.built for e in records.record_entries(fold(s.events))}
    assert by_run[other].provider_models == ["model-a-2026-08-01"]
    assert b'"providerModels": [\n    "model-a-2026-08-01"\n  ]' in records.render(by_run[other])
    validate(ours, records.render(by_run[other]))
    # the compat route asks for what follows `compat:`; an echo of it is no news. A batch and an
    # OS are the ledger's and the leaderboard's, never an addition to the reference layout
    for rid in (same, silent):
        assert by_run[rid].provider_models is None
        validate(schema, records.render(by_run[rid]))
