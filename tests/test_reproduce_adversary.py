"""`replay --verify` against an adversary who holds the ledger file: every case here once exited 0
on false numbers. Each starts from a private copy of a real ledger the runner wrote
(`test_reproduce_verify.py`), which verifies clean before it is touched, and ends with the
projections regenerated (`project all`), as a forger would leave them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec
import pytest

from cbledger.ledger.events import GradeRecorded, make_event
from cbledger.ledger.store import LedgerStore
from cbledger.projections.fold import fold
from cbledger.reproduce import verify as verify_mod
from cbledger.tasks.fixtures.hashing import task_manifest_hash
from cbledger.workspace import bundle_name
from tests import factories
from tests.factories import run_cli
from tests.test_reproduce_tamper import runs
from tests.test_reproduce_verify import (
    EDIT_TASK,
    OTHER_TASK,
    cli,
    copy_project,
    runs_by_task,
    verify_json,
)

pytestmark = [pytest.mark.slow, pytest.mark.kicad]


@pytest.fixture
def project(tmp_path_factory, tmp_path, kicad_cli, copperhead_cli) -> Path:
    root = copy_project(tmp_path_factory, tmp_path, copperhead_cli)
    code, report = verify_json(root)
    assert code == 0, report["failures"]
    return root


def ledger(root: Path) -> LedgerStore:
    return LedgerStore(root / "results" / "ledger" / "events.jsonl")


def grades(root: Path) -> dict[str, list[tuple[int, GradeRecorded]]]:
    out: dict[str, list[tuple[int, GradeRecorded]]] = {}
    for s in ledger(root).read(types={"grade.recorded"}):
        out.setdefault(s.event.body.run_id, []).append((s.seq, s.event.body))
    return out


def append(root: Path, *bodies, actor=None) -> list[int]:
    actor = actor or next(ledger(root).read(types={"run.recorded"})).event.actor
    events = [make_event(b, id=f"forged:{i}:{getattr(b, 'run_id', 'x')}:{getattr(b, 'suite_version', '')}", actor=actor)
              for i, b in enumerate(bodies)]
    return [r.seq for r in ledger(root).append(events)]


def project_all(root: Path) -> None:
    result = cli(root, "project", "all")
    assert result.exit_code == 0, result.output


def kinds(report: dict) -> set[str]:
    return {f["kind"] for f in report["failures"]}


# --------------------------------------------------------------------------- (a) run inflation


def test_copied_runs_with_byte_copies_of_their_bundle_fail(project):
    gold = runs(project)[("gold", EDIT_TASK)].event.body
    ((_, grade),) = grades(project)[gold.run_id]
    copies = []
    for n in (1, 2):
        new_id = f"{gold.run_id}-copy{n}"
        shutil.copyfile(project / gold.sandbox.store, project / bundle_name(new_id))
        run = msgspec.structs.replace(
            gold, run_id=new_id, sandbox=msgspec.structs.replace(gold.sandbox, store=bundle_name(new_id))
        )
        copies += [run, msgspec.structs.replace(grade, run_id=new_id)]
    append(project, *copies)
    project_all(project)
    code, report = verify_json(project)
    assert code == verify_mod.EXIT_RUNS
    reused = [f for f in report["failures"] if f["kind"] == "evidence-reused"]
    assert {f["runId"] for f in reused} == {f"{gold.run_id}-copy1", f"{gold.run_id}-copy2"}
    # a harness session's transcript is not owned (equal repeats write it alike): the bundle and commits are
    assert {f["field"] for f in reused} >= {"sandbox.storeBlake3", "sandbox.captureSha", "sandbox.evidenceSha"}
    assert all(gold.run_id in f["message"] for f in reused)  # the run that owns it is named
    assert runs_by_task(report)[("gold", EDIT_TASK)]["status"] in ("reproduced", "failed")
    original = next(r for r in report["runs"]["results"] if r["runId"] == gold.run_id)
    assert original["status"] == "reproduced"  # the first run keeps its evidence


# --------------------------------------------------------------------------- (b) a forged grade


def _forged_pass_for_noop(root: Path, suite: str, manifest_hash: str) -> GradeRecorded:
    gold = runs(root)[("gold", EDIT_TASK)].event.body
    noop = runs(root)[("noop", EDIT_TASK)].event.body
    (_, passing), = grades(root)[gold.run_id]
    assert passing.verdict == "pass"
    return msgspec.structs.replace(passing, run_id=noop.run_id, suite_version=suite, task_manifest_hash=manifest_hash)


def test_a_forged_grade_after_a_whitespace_edit_and_a_bump_fails(project, copperhead_cli):
    path = project / "tasks" / EDIT_TASK / "assertions.json"
    path.write_bytes(path.read_bytes().replace(b"[", b"[ ", 1))
    # the bump's trial runs gold on the edited task, whose check_clean needs the copperhead CLI
    result = cli(project, "suite", "bump", "--reason", "whitespace", "--copperhead-cli", copperhead_cli)
    assert result.exit_code == 0, result.output
    task_dir = project / "tasks" / EDIT_TASK
    new_hash = task_manifest_hash((task_dir / "task.json").read_bytes(), path.read_bytes())
    (seq,) = append(project, _forged_pass_for_noop(project, "1.1.0", new_hash))
    project_all(project)
    code, report = verify_json(project)
    assert code == verify_mod.EXIT_RUNS, report["failures"]
    forged = [f for f in report["failures"] if f.get("seq") == seq]
    assert forged and {f["kind"] for f in forged} == {"regrade-mismatch"}
    assert any(f["field"] == "verdict" and f["expected"] == "pass" and f["actual"] == "fail" for f in forged)


def test_a_forged_grade_after_an_unbumped_whitespace_edit_fails(project):
    path = project / "tasks" / EDIT_TASK / "assertions.json"
    path.write_bytes(path.read_bytes().replace(b"[", b"[ ", 1))
    task_dir = project / "tasks" / EDIT_TASK
    new_hash = task_manifest_hash((task_dir / "task.json").read_bytes(), path.read_bytes())
    (seq,) = append(project, _forged_pass_for_noop(project, "1.0.0", new_hash))
    project_all(project)
    code, report = verify_json(project)
    assert code == verify_mod.EXIT_DEFINITIONS
    assert "definitions-differ" in kinds(report)
    (manifest,) = [f for f in report["failures"] if f.get("seq") == seq]
    assert manifest["kind"] == "grade-manifest" and manifest["actual"] == new_hash
    # Even with the edit undone, the forged grade (a conflict the views never show) is re-graded.
    path.write_bytes(path.read_bytes().replace(b"[ ", b"[", 1))
    code, report = verify_json(project)
    assert code == verify_mod.EXIT_RUNS and kinds(report) == {"grade-manifest"}


# --------------------------------------------------------------------------- (c) truncation


def _drop_last_run(root: Path, keep: int) -> None:
    """Cuts the ledger to its first `keep` events and deletes the bundle of every run after it."""
    path = root / "results" / "ledger" / "events.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    for line in lines[keep:]:
        event = json.loads(line)["event"]
        if event["type"] == "run.recorded":
            (root / event["body"]["sandbox"]["store"]).unlink()
    path.write_bytes(b"".join(lines[:keep]))
    shutil.rmtree(root / "results" / "2026-01-01", ignore_errors=True)


def _records(root: Path) -> None:
    """What a forger removes before regenerating: the records and the site, whose writers add and
    rewrite files but never remove one."""
    for p in (root / "results").glob("20*/**/*.json"):
        p.unlink()
    shutil.rmtree(root / "results" / "site", ignore_errors=True)


def test_dropping_the_last_runs_is_caught_against_a_checkpoint_and_announced_without_one(project, tmp_path):
    key = tmp_path / "test.skey"
    made = run_cli(["key", "generate", "--out", key, "--name", "test", "--root", project])
    assert made.exit_code == 0, made.output
    vkey = next((project / "keys").glob("test-*.vkey"))
    signed = run_cli(["checkpoint", "--key", key, "--root", project])
    assert signed.exit_code == 0, signed.output
    (published,) = sorted((project / "results" / "checkpoints").glob("*.txt"))
    kept_elsewhere = tmp_path / published.name
    shutil.copyfile(published, kept_elsewhere)
    size = int(published.stem)

    # The forger drops the last run, its grade and the checkpoint's own record, with the bundle
    # and the published checkpoint file, and regenerates every projection.
    _drop_last_run(project, size - 2)
    published.unlink()
    _records(project)
    project_all(project)

    result = cli(project, "replay", "--verify")  # the project's keys/, the forger's to edit
    assert result.exit_code == 0, result.output  # a shorter chain is a valid chain ...
    head = f"head: compare seq {size - 2} "
    assert any(line.startswith(head) for line in result.stdout.splitlines())  # ... so the head is put to the reader
    assert "--checkpoint FILE" in result.stdout
    # a reader who names the publisher's key finds no checkpoint of theirs left: not a pass, and
    # said as what it is; the runs and outputs are still checked, and match
    code, report = verify_json(project, "--key", vkey)
    assert code == verify_mod.EXIT_CHECKPOINT
    assert [f["kind"] for f in report["failures"]] == ["no-trusted-checkpoint"]
    named = cli(project, "replay", "--verify", "--key", vkey)
    assert named.exit_code == verify_mod.EXIT_CHECKPOINT, named.output
    assert "not the one that was signed" not in named.output and "not-checked" not in named.output, named.output
    assert "NOT VERIFIED: no checkpoint signed by a key given with --key (publish one" in named.stderr, named.stderr
    assert "match" in named.stdout, named.stdout

    code, report = verify_json(project, "--checkpoint", kept_elsewhere, "--key", vkey)
    assert code == verify_mod.EXIT_CHECKPOINT
    assert [f["kind"] for f in report["failures"]] == ["not-an-extension"]
    assert "bundle-unrecorded" not in result.output  # this forger removed the bundle too

    # one who leaves the dropped run's bundle behind is named by it, checkpoint or none
    runs_dir = project / "results" / "runs"
    left = runs_dir / "20260101T000000Z-dropped-run-r1-000000.bundle"
    shutil.copyfile(next(runs_dir.glob("*.bundle")), left)
    again = cli(project, "replay", "--verify")
    assert again.exit_code == 0, again.output
    assert (f"bundle-unrecorded: [results/runs/{left.name}] 1 bundle(s) under results/runs/ name no run the ledger "
            "records and wait for no append") in again.output, again.output


# --------------------------------------------------------------------------- (d) every grade


def test_a_second_grade_for_the_same_run_and_suite_is_regraded(project):
    noop = runs(project)[("noop", OTHER_TASK)].event.body
    gold = runs(project)[("gold", OTHER_TASK)].event.body
    (_, passing), = grades(project)[gold.run_id]
    (seq,) = append(project, msgspec.structs.replace(passing, run_id=noop.run_id))  # same run, same suite
    project_all(project)
    code, report = verify_json(project)
    assert code == verify_mod.EXIT_RUNS
    run = next(r for r in report["runs"]["results"] if r["runId"] == noop.run_id)
    assert [(g["seq"], g["status"]) for g in run["grades"]][-1] == (seq, "mismatch")
    assert {f["seq"] for f in report["failures"]} == {seq}


def test_a_grade_for_a_run_never_recorded_fails(project):
    noop = runs(project)[("noop", OTHER_TASK)].event.body
    (_, first), = grades(project)[noop.run_id]
    (seq,) = append(project, msgspec.structs.replace(first, run_id="no-such-run"))
    project_all(project)
    code, report = verify_json(project)
    assert code == verify_mod.EXIT_RUNS
    (f,) = report["failures"]
    assert (f["kind"], f["seq"], f["runId"]) == ("grade-orphan", seq, "no-such-run")


# --------------------------------------------------------------------------- (e) definitions


@pytest.mark.parametrize(
    "rel, what",
    [
        ("fixtures/synthetic-led-resistor/baseline/erc.json", "fixture synthetic-led-resistor: baseline/erc.json changed"),
        ("fixtures/synthetic-led-resistor/fixture.json", "fixture synthetic-led-resistor: fixture.json changed"),
        (f"tasks/{EDIT_TASK}/gold/transcript.jsonl", f"task {EDIT_TASK}: gold/transcript.jsonl changed"),
    ],
)
def test_an_edit_to_a_baseline_fixture_manifest_or_gold_is_caught(project, rel, what):
    path = project / rel
    path.write_bytes(path.read_bytes() + b"\n")
    code, report = verify_json(project)
    assert code == verify_mod.EXIT_DEFINITIONS
    (f,) = report["failures"]
    assert f["kind"] == "definitions-differ" and what in f["message"]
    status = cli(project, "suite", "status")
    assert status.exit_code == 1 and what in status.stdout
    # A run refuses it too: the suite on disk is no longer suite 1.0.0.
    result = cli(project, "run", EDIT_TASK, "--agent", "gold", "--repeats", "1", "--sandbox-root", project.parent / "sb")
    assert result.exit_code != 0 and "differs from suite 1.0.0" in result.output
    assert rel.split("/", 2)[-1] in result.output or rel.rsplit("/", 1)[-1] in result.output


def test_an_edited_kept_baseline_is_named(project):
    defs = json.loads((project / "results" / "suites" / "1.0.0.json").read_bytes())
    entry = defs["fixtures"]["synthetic-led-resistor"]["files"]["baseline/erc.json"]
    obj = project / "results" / "suites" / "objects" / entry["sha256"][:2] / entry["sha256"]
    obj.write_bytes(obj.read_bytes() + b" ")
    code, report = verify_json(project)
    assert code == verify_mod.EXIT_DEFINITIONS
    digest = [f for f in report["failures"] if f["kind"] == "archive-digest"]
    assert digest and "fixtures/synthetic-led-resistor/baseline/erc.json" in digest[0]["message"]


def test_an_edited_kept_manifest_is_named(project):
    manifest = project / "results" / "suites" / "1.0.0.json"
    manifest.write_bytes(manifest.read_bytes().replace(b'"bytes":', b'"bytes": ', 1))
    code, report = verify_json(project)
    assert code == verify_mod.EXIT_DEFINITIONS
    (f, *_) = report["failures"]
    assert f["kind"] == "archive-digest" and "results/suites/1.0.0.json" in f["message"]


# --------------------------------------------------------------------------- skipped is not verified


def _bump_without_definitions(root: Path) -> None:
    """A suite version recorded the way it was before definitions were kept: suite.bumped alone."""
    from cbledger.runner import ledger_view

    view = ledger_view.read(root / "results" / "ledger" / "events.jsonl")
    assert view.suite is not None
    bumped = msgspec.structs.replace(view.suite, suite_version="1.1.0", previous="1.0.0", reason="recorded without definitions")
    append(root, bumped)


def test_grades_that_cannot_be_regraded_fail_unless_allowed_and_each_is_named(project):
    _bump_without_definitions(project)
    for args in (("rescore",), ("project", "all")):
        result = cli(project, *args)
        assert result.exit_code == 0, result.output
    code, report = verify_json(project)
    assert code == verify_mod.EXIT_SKIPPED
    assert report["failures"] == []
    skipped = report["skipped"]
    assert len(skipped) == 4 and {s["suiteVersion"] for s in skipped} == {"1.1.0"}
    assert all("has no kept definitions" in s["message"] for s in skipped)
    assert {s["runId"] for s in skipped} == {s.event.body.run_id for s in runs(project).values()}
    assert report["runs"]["counts"]["skipped"] == 4

    human = cli(project, "replay", "--verify")
    assert human.exit_code == verify_mod.EXIT_SKIPPED
    assert sum(1 for line in human.stderr.splitlines() if line.startswith("SKIPPED not-regradable:")) == 4
    assert "--allow-skipped accepts them" in human.stderr

    allowed = cli(project, "replay", "--verify", "--allow-skipped")
    assert allowed.exit_code == 0
    assert sum(1 for line in allowed.stderr.splitlines() if line.startswith("SKIPPED ")) == 4
    assert allowed.stdout.splitlines()[-1].startswith("verified with --allow-skipped: 4 ")

    # Kept afterwards from the working tree (which is suite 1.1.0 as recorded), they all reproduce.
    kept = cli(project, "suite", "archive", "1.1.0")
    assert kept.exit_code == 0, kept.output
    project_all(project)
    code, report = verify_json(project)
    assert code == 0 and report["skipped"] == [], report["failures"]


# --------------------------------------------------------------------------- (a') a shared transcript


def _sharing_transcript(run_mode: str) -> list:
    """Two runs with their own bundles and commits and one transcript between them."""
    first, second = factories.run_recorded(1), factories.run_recorded(2)
    events = []
    for seq, event in ((1, first), (2, second)):
        body = msgspec.structs.replace(
            event.body, run_mode=run_mode,
            evidence={**event.body.evidence, "transcript": first.body.evidence["transcript"]},
        )
        events.append(msgspec.structs.replace(event, body=body, seq=seq))
    return events


def test_a_models_transcript_named_by_a_second_run_is_reused_evidence():
    found = verify_mod.reused_evidence(fold(_sharing_transcript("agent")))
    second = factories.run_id(2)
    assert [(f.run_id, f.field) for f in found[second]] == [(second, "evidence.transcript")]
    assert factories.run_id(1) in found[second][0].message


@pytest.mark.parametrize("run_mode", ["gold", "noop", "scripted"])
def test_repeats_of_a_deterministic_session_may_write_the_same_transcript(run_mode):
    """A scripted or harness session started in the same second writes the same transcript byte
    for byte; its bundle and commits (the capture names its run) are what it owns."""
    assert verify_mod.reused_evidence(fold(_sharing_transcript(run_mode))) == {}


@pytest.mark.parametrize("name", ["../../escaped", "a/../../../escaped", "/dev/shm/escaped-absolute", "sub/", "../x/",
                                  "../" * 40 + "dev/shm/escaped-past-the-root"])
def test_a_kept_manifest_whose_file_names_leave_their_directory_lays_nothing_out(tmp_path, name):
    """A ledger verified on another machine may come from anyone, and its kept suite manifest is
    checked against the ledger's hashes, not against the names it holds: a name that leaves its
    directory once wrote outside the scratch directory the suite is laid out in."""
    from cbledger.ledger.events import SuiteArchived, SuiteBumped
    from cbledger.tasks import definitions as defs_mod
    from cbledger.tasks import suite_archive
    from cbledger.workspace import Workspace

    workspace = Workspace.at(tmp_path / "project")
    (tmp_path / "project").mkdir()
    files = {}
    for n in ("task.json", name):
        blob = f"content of {n}".encode()
        files[n] = defs_mod.FileEntry(sha256=defs_mod.sha256(blob), bytes=len(blob))
        obj = workspace.suite_object(files[n].sha256)
        obj.parent.mkdir(parents=True, exist_ok=True)
        obj.write_bytes(blob)
    defs = defs_mod.Definitions(format=defs_mod.FORMAT, tasks={"t1": defs_mod.TaskDefinition(
        manifest_hash="a" * 64, fixture="f", files=files)}, fixtures={}, suites={})
    data = defs_mod.encode(defs)
    kept = workspace.suite_definitions("1.0.0")
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_bytes(data)
    archived = SuiteArchived(suite_version="1.0.0", definitions_hash=defs_mod.sha256(data), task_definition_hashes={},
                             fixture_definition_hashes={}, source="a stranger's ledger")
    bump = SuiteBumped(suite_version="1.0.0", previous=None, reason="r", vocabulary_hash="0" * 64,
                       credential_patterns_hash="0" * 64, grader_version="1.0.0", task_manifest_hashes={"t1": "a" * 64},
                       fixture_hashes={})
    into = tmp_path / "scratch" / "deep" / "1.0.0"
    before = set(Path("/dev/shm").glob("escaped*"))
    opened = suite_archive.open_kept(workspace, archived, bump, into)
    assert [kind for kind, _, _ in opened.problems] == ["archive-inconsistent"], opened.problems
    assert repr(name) in opened.problems[0][1]
    assert opened.catalog is None
    written = [p for p in tmp_path.rglob("*") if p.is_file() and "results" not in p.relative_to(tmp_path).parts]
    assert written == [] and set(Path("/dev/shm").glob("escaped*")) == before
