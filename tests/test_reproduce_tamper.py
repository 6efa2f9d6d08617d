"""Tampering and drift, each caught by `replay --verify` and named precisely: which run, which
seq, which assertion, which file and line. Every case starts from a private copy of a real ledger
the runner wrote (see `test_reproduce_verify.py`), which verifies clean before it is touched.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import msgspec
import pygit2
import pytest

from cbledger.errors import UserError
from cbledger.grading import registry
from cbledger.grading.evidence.bundle import EVIDENCE_REF
from cbledger.ledger.store import LedgerStore
from cbledger.runner import preserve
from cbledger.tasks.catalog import Catalog
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
    assert code == 0, report["failures"]  # the control: untouched, it verifies
    return root


def runs(root: Path) -> dict[tuple[str, str], object]:
    events = LedgerStore(root / "results" / "ledger" / "events.jsonl").read(types={"run.recorded"})
    return {(s.event.body.run_mode, s.event.body.task.id): s for s in events}


def failures(report: dict, kind: str | None = None) -> list[dict]:
    return [f for f in report["failures"] if kind is None or f["kind"] == kind]


# --------------------------------------------------------------------------- preserved runs


def rewrite_transcript(root: Path, run, scratch: Path) -> None:
    """Replaces the run's bundle with one whose captured transcript has an extra line: new
    capture and evidence commits on the same HEAD, bundled against the same seed."""
    fixture = Catalog(root).fixture(run.fixture.id)
    bundle = root / run.sandbox.store
    repo = preserve.restore(bundle, run.sandbox, fixture, into=scratch).repo
    capture = repo[run.sandbox.capture_sha]
    path = run.evidence["transcript"].path
    index = pygit2.Index()
    index.read_tree(capture.tree)
    entry = index[path]
    blob = repo[entry.id].data + b'{"ts":"2026-01-01T00:00:00Z","type":"note","data":{"text":"added later"}}\n'
    index.add(pygit2.IndexEntry(path, repo.create_blob(blob), entry.mode))
    tree = index.write_tree(repo)
    sig = capture.author
    new_capture = repo.create_commit(None, sig, sig, capture.message, tree, [p.id for p in capture.parents])
    evidence = repo[run.sandbox.evidence_sha]
    new_evidence = repo.create_commit(None, sig, sig, evidence.message, evidence.tree.id, [new_capture])
    repo.references.create(EVIDENCE_REF, new_evidence, force=True)
    refs = [r for r in repo.references if r.startswith("refs/cbledger/") and r != "refs/cbledger/seed"]
    bundle.unlink()
    subprocess.run(["git", "bundle", "create", "-q", str(bundle), *refs, f"^{run.sandbox.seed_sha}"],
                   cwd=repo.path, check=True, capture_output=True)


def test_a_run_that_does_not_restore_leaves_no_scratch_directory(project, tmp_path, monkeypatch):
    """Restores go to memory when the machine has it (cbledger/scratch.py): one left behind by
    every run that fails to restore would fill it over a day of tampered or stale runs."""
    scratch = tmp_path / "scratch-parent"
    scratch.mkdir()
    monkeypatch.setenv("CBLEDGER_SCRATCH", str(scratch))
    run = runs(project)[("gold", EDIT_TASK)].event.body
    fixture = Catalog(project).fixture(run.fixture.id)
    wrong = "0" * 40
    for ref, said in ((msgspec.structs.replace(run.sandbox, seed_sha=wrong), "rebuilt seed"),
                      (msgspec.structs.replace(run.sandbox, head_sha=wrong), "the recorded head commit")):
        with pytest.raises(UserError, match=said):
            preserve.restore(project / run.sandbox.store, ref, fixture)
    assert list(scratch.iterdir()) == []
    restored = preserve.restore(project / run.sandbox.store, run.sandbox, fixture)  # the control
    assert restored.path.parent == scratch and restored.repo[run.sandbox.head_sha]


def test_an_edited_preserved_transcript_is_named_by_run_and_digest(project, tmp_path):
    victim = runs(project)[("gold", EDIT_TASK)].event.body
    rewrite_transcript(project, victim, tmp_path / "scratch")
    code, report = verify_json(project)
    assert code == 3
    mine = [f for f in report["failures"] if f.get("runId") == victim.run_id]
    assert mine == report["failures"]  # nothing else is blamed
    (digest,) = failures(report, "evidence-digest")
    assert digest["field"] == "evidence.transcript" and digest["file"] == victim.evidence["transcript"].path
    assert digest["expected"] == victim.evidence["transcript"].blake3 and digest["actual"] != digest["expected"]
    (bundle,) = failures(report, "bundle-digest")
    assert bundle["file"] == victim.sandbox.store
    assert {f["field"] for f in failures(report, "commit-missing")} == {"sandbox.captureSha", "sandbox.evidenceSha"}
    assert runs_by_task(report)[("gold", EDIT_TASK)]["grades"][0]["status"] == "not-regraded"

    result = cli(project, "replay", "--verify")
    assert result.exit_code == 3
    assert f"evidence-digest: [seq {runs(project)[('gold', EDIT_TASK)].seq}, run {victim.run_id}" in result.stderr
    assert "NOT VERIFIED: a run does not reproduce (exit 3)" in result.stderr


def test_a_missing_bundle_is_named(project):
    victim = runs(project)[("noop", OTHER_TASK)].event.body
    (project / victim.sandbox.store).unlink()
    code, report = verify_json(project)
    assert code == 3
    (f,) = report["failures"]
    assert (f["kind"], f["runId"], f["file"]) == ("bundle-missing", victim.run_id, victim.sandbox.store)
    site = report["projections"]["site"]
    assert site["notCompared"] == 1 and site["matching"] == site["expected"]  # its page, said not to be compared
    said = cli(project, "replay", "--verify").stdout
    assert "site pages match (1 run page(s) not compared: their runs' evidence could not be read)" in said, said


def test_a_damaged_run_no_check_of_its_own_reads_fails_the_site_check(project):
    """A run `--since-checkpoint` (or `--run`) does not re-grade is restored for its page alone:
    its bundle deleted, the page was counted "not compared" and the verify passed, exit 0, a
    forged page beside it unread. `project site --check` said "up to date" alike. And a file
    under the site that is not a page (a script, an `.htm`) was never listed."""
    from cbledger.projections.site.paths import run_page

    victim = runs(project)[("noop", OTHER_TASK)].event.body
    other = runs(project)[("gold", EDIT_TASK)].event.body
    (project / victim.sandbox.store).unlink()
    page = f"results/site/{run_page(victim.run_id)}"
    code, report = verify_json(project, "--run", other.run_id)
    assert code == 4, report["failures"]
    (f,) = report["failures"]
    assert (f["kind"], f["runId"], f["file"]) == ("site-evidence", victim.run_id, page)
    assert victim.sandbox.store in f["message"]
    check = cli(project, "project", "site", "--check")
    assert check.exit_code == 1 and f"{page}: this run's page cannot be compared" in check.stderr, check.output
    # a run the verify re-grades reports its own damage: its page is not blamed twice
    code, report = verify_json(project)
    assert code == 3 and not failures(report, "site-evidence"), report["failures"]
    for extra in ("app.js", "runs/x.htm"):
        (project / "results" / "site" / extra).write_text("forged\n")
    (project / "results" / "site" / "elsewhere").symlink_to(project / "results")
    # a page linked to a file of this machine is named, never read (its first line was quoted)
    secret = project / "secret.txt"
    secret.write_text("API_TOKEN=sk-live-0123456789abcdefghij\n")
    runs_page = project / "results" / "site" / "runs.html"
    runs_page.unlink()
    runs_page.symlink_to(secret)
    code, report = verify_json(project, "--run", other.run_id, "--json")
    extra = {f["file"] for f in failures(report, "site-extra")}
    assert extra == {f"results/site/{n}" for n in ("app.js", "runs/x.htm", "elsewhere")}, report["failures"]
    (linked,) = [f for f in failures(report, "site-different") if f["file"] == "results/site/runs.html"]
    assert "a link or special file where this page should be; not read" in linked["message"]
    # so are LEADERBOARD.md, a record and the read model, linked likewise
    board = project / "LEADERBOARD.md"
    record = next((project / "results").glob("20*/*/*/run-*.json"))
    for path in (board, record, project / "results" / "cbledger.db"):
        path.unlink()
        path.symlink_to(secret)
    code, report = verify_json(project, "--run", other.run_id, "--json")
    kinds = {f["kind"] for f in report["failures"]}
    assert {"leaderboard-different", "record-different", "readmodel-different"} <= kinds, report["failures"]
    assert "API_TOKEN" not in json.dumps(report)
    assert "API_TOKEN" not in cli(project, "replay", "--verify", "--run", other.run_id).output


def test_a_page_a_killed_writer_staged_is_cleared_by_a_project_site_with_nothing_to_write(project):
    """The site check lists every file, and a dead `.tmp` left where nothing was rewritten
    stayed there: every later check failed on it, and `project site` could not mend it."""
    dead = project / "results" / "site" / ".index.html.999999999.tmp"
    dead.write_text("half a page\n")
    (extra,) = [f for f in verify_json(project)[1]["failures"] if f["kind"] == "site-extra"]
    assert "a writer staged and never renamed (remove it; `cbledger project site" in extra["message"], extra  # the way out
    again = cli(project, "project", "site")
    assert again.exit_code == 0 and "0 page(s) written" in again.stdout, again.output
    assert not dead.exists()


def test_project_site_keeps_a_page_whose_run_cannot_be_read_here_and_the_check_says_so(project, monkeypatch):
    """A clone whose real boards are not materialized reads none of their runs: `project site`
    replaced each committed page with one saying "evidence not shown", and `site --check` said
    "up to date" while comparing none of them, a deleted one included."""
    from cbledger.projections.site.paths import run_page
    from cbledger.reproduce import evidence_cache
    from cbledger.tasks.catalog import Fixture

    monkeypatch.delenv(evidence_cache.CACHE_ENV, raising=False)  # a fresh clone has read no run before
    assert cli(project, "project", "site").exit_code == 0
    victim = runs(project)[("noop", OTHER_TASK)].event.body
    page = project / "results" / "site" / run_page(victim.run_id)
    whole = page.read_bytes()
    on_it = sum(s.event.body.fixture.id == victim.fixture.id for s in runs(project).values())
    # as a clone holds a real board before it is materialized: no tree, here or kept with the suite
    real_tree = Fixture.tree.fget
    monkeypatch.setattr(Fixture, "tree", property(
        lambda f: f.dir / "not-materialized" if f.id == victim.fixture.id else real_tree(f)))
    again = cli(project, "project", "site")
    assert again.exit_code == 0 and page.read_bytes() == whole, again.output
    assert f"note: {on_it} run page(s) left as they were: their preserved runs cannot be read here" in again.stderr, again.output
    assert "has no tree/" in again.stderr
    check = cli(project, "project", "site", "--check")
    assert check.exit_code == 0, check.output
    assert f"up to date; {on_it} run page(s) not compared: their preserved runs cannot be read here" in check.stdout
    page.unlink()
    check = cli(project, "project", "site", "--check")
    assert check.exit_code == 1 and "it is not there, and its run's evidence cannot be read here" in check.stderr, check.output
    assert cli(project, "project", "site").exit_code == 0 and page.is_file()  # written, as far as it can be
    # a kept page never outlives the ledger's word on its run: retracted since, it is written anew
    page.write_bytes(whole)
    import datetime as dt

    from cbledger.ledger.events import RunRetracted, RunRetractedEvent
    from tests.factories import MAINTAINER

    LedgerStore(project / "results" / "ledger" / "events.jsonl").append([RunRetractedEvent(
        id=f"run.retracted:{victim.run_id}", at=dt.datetime.now(dt.UTC), actor=MAINTAINER,
        body=RunRetracted(run_id=victim.run_id, reason="withdrawn while the boards were away"))])
    assert cli(project, "project", "site").exit_code == 0
    assert b"withdrawn while the boards were away" in page.read_bytes()


def test_an_edited_fixture_file_is_caught_and_the_runs_regrade_under_the_kept_tree(project):
    sch = project / "fixtures" / "synthetic-led-resistor" / "tree" / "led-indicator.kicad_sch"
    sch.write_bytes(sch.read_bytes().replace(b"(kicad_sch", b"(kicad_sch ", 1))
    code, report = verify_json(project)
    assert code == 7
    (f,) = report["failures"]
    assert (f["check"], f["kind"], f["suiteVersion"]) == ("suite", "definitions-differ", "1.0.0")
    assert "fixture synthetic-led-resistor: tree/led-indicator.kicad_sch changed" in f["message"]
    # The runs were made on the tree as kept for suite 1.0.0, and still rebuild their seed from it.
    for mode in ("gold", "noop"):
        for task in (EDIT_TASK, OTHER_TASK):
            assert runs_by_task(report)[(mode, task)]["status"] == "reproduced"


def test_an_edited_kept_fixture_file_is_named_and_only_the_runs_on_it_are_not_regraded(project):
    manifest = project / "results" / "suites" / "1.0.0.json"
    import json as _json

    defs = _json.loads(manifest.read_bytes())
    entry = defs["fixtures"]["synthetic-led-resistor"]["files"]["tree/led-indicator.kicad_sch"]
    obj = project / "results" / "suites" / "objects" / entry["sha256"][:2] / entry["sha256"]
    obj.write_bytes(obj.read_bytes().replace(b"(kicad_sch", b"(kicad_sch ", 1))
    code, report = verify_json(project)
    assert code == 7
    kinds = {(f["check"], f["kind"]) for f in report["failures"]}
    assert ("suite", "archive-digest") in kinds
    digest = next(f for f in report["failures"] if f["kind"] == "archive-digest")
    assert "fixtures/synthetic-led-resistor/tree/led-indicator.kicad_sch" in digest["message"]
    # the file to look at, not only the definition it stands for
    assert obj.relative_to(project).as_posix() in digest["message"] and "damaged since it was kept" in digest["message"]
    # Nothing is re-graded under definitions that do not verify, but only the tasks on the damaged
    # board lose their re-grade: the other task's runs were all skipped too, once.
    statuses = {task: r["status"] for (_, task), r in runs_by_task(report).items()}
    assert statuses == {EDIT_TASK: "skipped", OTHER_TASK: "reproduced"}, statuses
    assert report["skipped"] and all(f"task {EDIT_TASK} or its board do not verify" in s["message"] for s in report["skipped"])


# --------------------------------------------------------------------------- the grader


def test_a_changed_grader_is_a_regrade_mismatch_naming_run_and_assertion(project, monkeypatch):
    checks = registry.all_checks()
    original = checks["no_secret"]

    def flipped(args, ctx):
        passed, detail = original(args, ctx)
        return (not passed), detail

    monkeypatch.setitem(checks, "no_secret", flipped)
    code, report = verify_json(project)  # in-process, serial: the patched grader is the one used
    assert code == 3
    by_run = {}
    for f in failures(report, "regrade-mismatch"):
        by_run.setdefault(f["runId"], []).append(f)
    assert set(by_run) == {s.event.body.run_id for s in runs(project).values()}
    graded = LedgerStore(project / "results" / "ledger" / "events.jsonl").read(types={"grade.recorded"})
    verdicts = {s.event.body.run_id: s.event.body.verdict for s in graded}
    assert "pass" in verdicts.values()
    for run_id, found in by_run.items():
        status = [f for f in found if f.get("assertion") == "no-secret" and f["field"] == "status"]
        assert len(status) == 1 and (status[0]["expected"], status[0]["actual"]) == ("pass", "fail")
        assert status[0]["suiteVersion"] == "1.0.0"
        fields = {f["field"] for f in found}
        assert "partialCredit" in fields
        if verdicts[run_id] == "pass":  # a passing run now fails: the verdict and its category move too
            assert {"verdict", "firstFailedRequired", "failureCategory"} <= fields

    result = cli(project, "replay", "--verify")
    assert "regrade-mismatch:" in result.stderr and "assertion no-secret" in result.stderr
    assert "status: recorded 'pass', re-graded 'fail'" in result.stderr


# --------------------------------------------------------------------------- the ledger


def test_an_edited_grade_event_breaks_the_chain_at_its_seq(project):
    ledger = project / "results" / "ledger" / "events.jsonl"
    lines = ledger.read_bytes().splitlines(keepends=True)
    grade_seq = next(s.seq for s in LedgerStore(ledger).read(types={"grade.recorded"}))
    line = lines[grade_seq - 1]
    assert b'"detail":"' in line
    lines[grade_seq - 1] = line.replace(b'"detail":"', b'"detail":"(edited) ', 1)
    ledger.write_bytes(b"".join(lines))
    code, report = verify_json(project)
    assert code == 1
    assert report["chain"]["problem"]["kind"] == "hash-mismatch" and report["chain"]["problem"]["seq"] == grade_seq
    (f,) = report["failures"]
    assert (f["check"], f["kind"], f["seq"]) == ("chain", "hash-mismatch", grade_seq)
    assert report["runs"] is None and report["projections"] is None
    result = cli(project, "replay", "--verify")
    assert result.exit_code == 1 and f"hash-mismatch at line {grade_seq} (seq {grade_seq}," in result.stderr


# --------------------------------------------------------------------------- projections


def record_paths(root: Path) -> list[Path]:
    return sorted((root / "results").glob("20*/*/*/run-*.json"))


def test_an_edited_record_is_named_with_its_first_differing_line(project):
    target = record_paths(project)[0]
    lines = target.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if '"partialCredit"' in line)
    lines[at] = lines[at].replace('"partialCredit": ', '"partialCredit": 0.5, "was": ')
    target.write_text("".join(lines))
    code, report = verify_json(project)
    assert code == 4
    (f,) = report["failures"]
    rel = target.relative_to(project).as_posix()
    assert (f["kind"], f["file"], f["line"]) == ("record-different", rel, at + 1)
    assert f["actual"] == lines[at].rstrip("\n") and "runId" in f and "seq" in f
    result = cli(project, "replay", "--verify")
    assert result.exit_code == 4 and "record-different: " in result.stderr and f"{rel}:{at + 1}" in result.stderr


def test_a_deleted_record_and_an_extra_one_are_named(project):
    gone, model = record_paths(project)[0], record_paths(project)[1]
    gone.unlink()
    extra = model.with_name("run-7.json")
    extra.write_bytes(model.read_bytes())
    code, report = verify_json(project)
    assert code == 4
    kinds = {f["kind"]: f for f in report["failures"]}
    assert set(kinds) == {"record-missing", "record-extra"}
    assert kinds["record-missing"]["file"] == gone.relative_to(project).as_posix()
    assert kinds["record-missing"]["runId"]
    assert kinds["record-extra"]["file"] == extra.relative_to(project).as_posix()
    # `project` never removes a record: the finding says what to do about it
    assert "if the ledger is right, delete that record" in kinds["record-extra"]["message"]


def test_an_edited_leaderboard_is_a_diff(project):
    path = project / "LEADERBOARD.md"
    lines = path.read_text().splitlines(keepends=True)
    # the harness row of a task gold passes (led-resistor-swap's gold needs the copperhead CLI for
    # its check_clean, which this project's runs were not given)
    at = next(i for i, line in enumerate(lines) if f"| {OTHER_TASK} | edit | 1/1 |" in line)
    lines[at] = lines[at].replace("| 1/1 |", "| 2/2 |", 1)  # a gold pass that never happened
    path.write_text("".join(lines))
    code, report = verify_json(project)
    assert code == 4
    (f,) = report["failures"]
    assert (f["kind"], f["file"], f["line"]) == ("leaderboard-different", "LEADERBOARD.md", at + 1)
    diff = report["projections"]["leaderboard"]["diff"]
    assert diff.startswith("--- LEADERBOARD.md (committed)") and f"-{lines[at]}" in diff
    result = cli(project, "replay", "--verify")
    assert result.exit_code == 4 and "+++ LEADERBOARD.md (regenerated)" in result.stderr


def test_an_edited_read_model_is_a_content_mismatch(project):
    db = project / "results" / "cbledger.db"
    conn = sqlite3.connect(db)
    conn.execute("UPDATE grades SET partial_credit = 0.123 WHERE rowid = (SELECT min(rowid) FROM grades)")
    conn.commit()
    conn.close()
    code, report = verify_json(project)
    assert code == 4
    (f,) = report["failures"]
    assert (f["kind"], f["file"], f["field"]) == ("readmodel-different", "results/cbledger.db", "grades")
    assert "0.123" in f["actual"] and "0.123" not in f["expected"]
    assert "(1 dump line(s)), first in table grades" in f["message"]
    # a row deleted: every later line of the dump moves up one, and the table's row count line differs
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT count(*) FROM assertion_outcomes").fetchone()[0]
    conn.execute("DELETE FROM assertion_outcomes WHERE rowid = (SELECT max(rowid) FROM assertion_outcomes)")
    conn.commit()
    conn.close()
    code, report = verify_json(project)
    first = report["failures"][0]
    assert code == 4 and (first["field"], first["line"]) == ("assertion_outcomes", 2)
    assert f"rows {rows - 1}" in first["actual"] and f"rows {rows}" in first["expected"]
    db.write_bytes(b"not a database")
    code, report = verify_json(project)
    assert code == 4 and "cannot be read as a read model" in report["failures"][0]["message"]

    db.unlink()
    code, report = verify_json(project)
    assert code == 4 and [f["kind"] for f in report["failures"]] == ["readmodel-missing"]


def test_run_failures_outrank_projection_failures(project):
    (project / "LEADERBOARD.md").write_text("edited\n")
    victim = runs(project)[("noop", OTHER_TASK)].event.body
    (project / victim.sandbox.store).unlink()
    code, report = verify_json(project)
    assert code == 3
    assert {f["kind"] for f in report["failures"]} == {"bundle-missing", "leaderboard-different"}


def _forge_run_body(project: Path, victim, edit) -> None:
    """Rewrites a run's body with `edit`, re-chains the ledger and regenerates every output, as a
    forger who knows the format would: only what the preserved run holds can give it away."""
    import msgspec

    from tests.test_ledger_tamper import events_of, rechain, split

    ledger = project / "results" / "ledger" / "events.jsonl"
    events = events_of(split(ledger))
    plain = msgspec.json.decode(events[victim.seq - 1])
    edit(plain["body"])
    events[victim.seq - 1] = msgspec.json.Encoder(order="sorted").encode(plain)
    ledger.write_bytes(rechain(events))
    assert cli(project, "project", "all").exit_code == 0


def test_a_run_end_figure_edited_and_re_chained_is_named_against_the_preserved_transcript(project):
    """A forger who raises a run's token count, re-chains the ledger and regenerates every
    output changes a published sum while every grade still reproduces: the figure is derived
    again from the preserved transcript, which the forger cannot change without its digest."""
    victim = runs(project)[("gold", EDIT_TASK)]
    recorded = victim.event.body.stats.tokens_in
    _forge_run_body(project, victim, lambda body: body["stats"].update(tokensIn=recorded + 5000))
    code, report = verify_json(project)
    assert code == 3, report["failures"]
    (found,) = report["failures"]
    assert (found["kind"], found["field"], found["runId"], found["seq"]) == (
        "stats-mismatch", "stats.tokensIn", victim.event.body.run_id, victim.seq)
    assert (found["expected"], found["actual"]) == (recorded + 5000, recorded)
    assert found["file"] == victim.event.body.evidence["transcript"].path


def test_a_cost_finding_fails_the_run_it_names(project, monkeypatch):
    """`replay --verify` applies the cost check (`reproduce.figures.cost_findings`, tested on its
    own in test_reproduce_cost.py) to the runs it checks: its findings fail those runs."""
    from cbledger.reproduce import verify as verify_mod
    from cbledger.reproduce.findings import Finding

    victim = runs(project)[("gold", EDIT_TASK)]
    finding = Finding(check="run", kind="cost-mismatch", message="planted", seq=victim.seq,
                      run_id=victim.event.body.run_id, field="cost.usdMicros", expected=1, actual=2)
    monkeypatch.setattr(verify_mod, "cost_findings", lambda state: {victim.event.body.run_id: [finding]})
    code, report = verify_json(project)
    assert code == 3
    assert [(f["kind"], f["runId"]) for f in report["failures"]] == [("cost-mismatch", victim.event.body.run_id)]


def test_run_end_figures_nulled_and_re_chained_are_named(project):
    """Setting a run's stats to null drops its tokens from every published sum: the preserved
    transcript still gives them, so the null is a finding too."""
    victim = runs(project)[("gold", EDIT_TASK)]
    _forge_run_body(project, victim, lambda body: body.update(stats=None))
    code, report = verify_json(project)
    assert code == 3, report["failures"]
    (found,) = report["failures"]
    assert (found["kind"], found["field"], found["runId"]) == ("stats-mismatch", "stats", victim.event.body.run_id)
    assert "null" in found["message"]
