"""`cbledger grade TASK SANDBOX`: how a stranger checks one run, offline."""

from __future__ import annotations

import json
import shutil

import pygit2

from cbledger.tasks.catalog import Catalog
from tests.factories import run_cli
from tests.test_grading_kit import (
    SCHEMATIC,
    assertion,
    demo_schematic,
    done,
    erc_report,
    make_box,
    violation,
    write_fixture,
    write_task,
)

ASSERTS = [
    assertion("renamed", "net_present", {"net": "SENSE"}, weight=3),
    assertion("old-gone", "net_absent", {"net": "SIG"}, weight=3),
    assertion("erc", "erc_no_new_violations", weight=2),
    assertion("bounded", "files_touched_subset", {"allowed": ["hardware/*.kicad_sch", "docs/*.md", ".copperhead/**"]}, weight=1, required=False),
    assertion("one-commit", "commit_count", {"equals": 1}),
    assertion("finished", "exit_path_in", {"paths": ["done"]}),
]


def _project(tmp_path):
    root = tmp_path / "project"
    fixture = write_fixture(root)
    task = write_task(root, "rename-sig", fixture, ASSERTS)
    return root, fixture, task


def _renamed(tmp_path):
    """A sandbox whose run did the task, with its ERC report where the runner leaves it."""
    root, fixture, task = _project(tmp_path)
    box = make_box(tmp_path, task, fixture)
    box.write(SCHEMATIC, demo_schematic(sig="SENSE"))
    box.commit()
    box.transcript(done())
    box.reports(erc=erc_report())
    return root, box


def test_grade_prints_every_outcome_and_the_verdict(tmp_path):
    root, box = _renamed(tmp_path)
    r = run_cli(["grade", "rename-sig", box.path, "--root", root])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].startswith("task rename-sig (manifest ") and lines[0].endswith("on fixture demo-board")
    assert "1 commit(s); reports: erc" in lines[1]
    assert lines[2] == "transcript .copperhead/runs/2026-07-22T18-47-18-987Z/transcript.jsonl: 7 event(s)"
    assert "PASS* renamed     net_present            net SENSE is present (/SENSE, 2 pin(s))" in r.stdout
    assert "PASS  bounded" in r.stdout  # optional: no star
    assert "verdict: pass" in lines and "partial credit: 1.0000" in lines and "exit path: done" in lines
    assert "failure category" not in r.stdout
    assert "copperhead check" not in r.stderr  # asserted by no check_clean: nothing to warn of


def test_grade_names_the_first_failed_required_and_the_category(tmp_path):
    root, fixture, task = _project(tmp_path)
    box = make_box(tmp_path, task, fixture)
    box.write("hardware/notes.txt", "wip\n")  # did nothing useful, committed nothing
    box.transcript(done())
    box.reports(erc=erc_report(violation("pin_not_connected")))
    r = run_cli(["grade", "rename-sig", box.path, "--root", root])
    assert r.exit_code == 0, r.output
    assert "FAIL* renamed" in r.stdout and "FAIL  bounded" in r.stdout
    assert "new ERC violations at error and above: erc:pin_not_connected 0→1" in r.stdout
    assert "verdict: fail" in r.stdout
    assert "partial credit: 0.0909" in r.stdout  # only exit_path_in (weight 1 of 11) passed
    assert "first failed required: renamed (net_present)" in r.stdout
    assert "failure category: wrong-target" in r.stdout


def test_grade_json_is_the_machine_form(tmp_path):
    root, fixture, task = _project(tmp_path)
    box = make_box(tmp_path, task, fixture)
    box.write(SCHEMATIC, demo_schematic(sig="SENSE"))
    box.commit()
    box.transcript(done(), raw_tail="{torn\n")
    r = run_cli(["grade", str(task.dir), box.path, "--root", root, "--json", "--no-kicad"])  # a task directory works too
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["task"] == "rename-sig" and doc["taskManifestHash"] == task.manifest_hash
    assert doc["fixtureSha256"] == fixture.manifest.sha256
    assert doc["baselineSha"] == box.baseline and doc["commits"] == 1
    assert doc["transcript"]["malformedLines"] == [8]
    assert doc["verdict"] == "fail" and doc["firstFailedRequired"] == "erc"
    assert doc["failureCategory"] == "constraint-violation"
    erc = next(o for o in doc["outcomes"] if o["id"] == "erc")
    assert erc == {
        "id": "erc",
        "type": "erc_no_new_violations",
        "status": "fail",
        "required": True,
        "weight": 2,
        "evidenceSource": "end-state",
        "detail": "could not be evaluated: no ERC report was captured when this run ended",
    }
    assert doc["partialCredit"] == 0.8182  # 9 of 11


def test_grade_makes_the_kicad_cli_reports_a_sandbox_lacks(tmp_path, kicad_cli):
    """A sandbox graded outside a run has no verification reports: kicad-cli makes them, as the
    runner would, and says so; `--no-kicad` leaves those assertions unevaluable, with a warning."""
    root, fixture, task = _project(tmp_path)
    box = make_box(tmp_path, task, fixture)
    box.write(SCHEMATIC, demo_schematic(sig="SENSE"))
    box.commit()
    box.transcript(done())
    r = run_cli(["grade", "rename-sig", box.path, "--root", root, "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert "erc" in doc["reports"] and "note: ran kicad-cli on" in r.stderr
    erc = next(o for o in doc["outcomes"] if o["id"] == "erc")
    assert "could not be evaluated" not in erc["detail"]
    off = run_cli(["grade", "rename-sig", box.path, "--root", root, "--json", "--no-kicad"])
    assert json.loads(off.stdout)["reports"] == [] and "cannot be evaluated" in off.stderr


def test_grade_with_an_explicit_baseline_when_none_is_recorded(tmp_path):
    root, fixture, task = _project(tmp_path)
    box = make_box(tmp_path, task, fixture)
    box.repo.references.delete("refs/cbledger/baseline")
    r = run_cli(["grade", "rename-sig", box.path, "--root", root])
    assert r.exit_code == 2
    assert "no baseline recorded (refs/cbledger/baseline); pass --baseline SHA" in r.stderr
    r = run_cli(["grade", "rename-sig", box.path, "--root", root, "--baseline", box.baseline, "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["baselineSha"] == box.baseline
    r = run_cli(["grade", "rename-sig", box.path, "--root", root, "--baseline", "v1.0"])
    assert r.exit_code == 2 and "baseline 'v1.0' is not a commit here" in r.stderr


def test_grade_uses_the_runner_exit_for_a_killed_run(tmp_path):
    root, fixture, task = _project(tmp_path)
    box = make_box(tmp_path, task, fixture)
    r = run_cli(["grade", "rename-sig", box.path, "--root", root, "--runner-exit", "cap-exceeded", "--json"])
    doc = json.loads(r.stdout)
    assert (doc["exitPath"], doc["failureCategory"]) == ("cap-exceeded", "turn-budget")


def test_a_runner_exit_beside_a_run_end_is_said_to_be_ignored(tmp_path):
    """The run-end is what the grade reads; the flag used to be dropped without a word."""
    root, fixture, task = _project(tmp_path)
    box = make_box(tmp_path, task, fixture)
    box.transcript(done())
    box.commit("a run that ended on its own")
    r = run_cli(["grade", "rename-sig", box.path, "--root", root, "--runner-exit", "cap-exceeded", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["exitPath"] == "done"
    assert "warning: --runner-exit cap-exceeded is ignored: the run wrote a run-end (exit path done)" in r.stderr


def test_grade_refuses_a_task_pinned_to_another_fixture_hash(tmp_path):
    root, fixture, task = _project(tmp_path)
    box = make_box(tmp_path, task, fixture)
    doc = json.loads((task.dir / "task.json").read_text())
    doc["fixture"]["sha256"] = "f" * 64
    (task.dir / "task.json").write_text(json.dumps(doc))
    r = run_cli(["grade", "rename-sig", box.path, "--root", root])
    assert r.exit_code == 2
    assert "tasks/rename-sig/task.json: fixture.sha256:" in r.stderr and "differs from" in r.stderr


def test_grade_refuses_a_task_validate_refuses_naming_the_file_and_field(tmp_path):
    """Duplicate assertion ids were graded (two rows of one id, "first failed required" ambiguous),
    and a fixture that is not there was named by its directory alone."""
    root, fixture, task = _project(tmp_path)
    box = make_box(tmp_path, task, fixture)
    doc = json.loads((task.dir / "assertions.json").read_text())
    (task.dir / "assertions.json").write_text(json.dumps(doc + [doc[0]]))
    r = run_cli(["grade", "rename-sig", box.path, "--root", root])
    assert r.exit_code == 2 and r.stdout == "" and "task rename-sig cannot be graded" in r.stderr, r.output
    assert "tasks/rename-sig/assertions.json" in r.stderr and "renamed" in r.stderr
    (task.dir / "assertions.json").write_text(json.dumps(doc))
    manifest = json.loads((task.dir / "task.json").read_text())
    manifest["fixture"]["path"] = "fixtures/nope"
    (task.dir / "task.json").write_text(json.dumps(manifest))
    r = run_cli(["grade", "rename-sig", box.path, "--root", root])
    assert r.exit_code == 2 and "tasks/rename-sig/task.json: fixture" in r.stderr, r.output


def test_grade_refuses_when_a_fixture_baseline_report_it_needs_is_missing(tmp_path):
    """Graded without it, the assertions that read it failed and the category named the model's
    constraint-violation: what a clone that never materialized its real boards was told."""
    root, fixture, task = _project(tmp_path)
    box = make_box(tmp_path, task, fixture)
    shutil.rmtree(fixture.dir / "baseline")
    r = run_cli(["grade", "rename-sig", box.path, "--root", root])
    assert r.exit_code == 2 and r.stdout == "", r.output
    assert "fixture demo-board has no baseline ERC report here" in r.stderr and "nothing graded" in r.stderr
    assert "fixture materialize demo-board" in r.stderr


def test_grade_refuses_a_sandbox_seeded_from_another_fixture_or_tree(tmp_path):
    root, fixture, task = _project(tmp_path)
    other = write_fixture(root, "other-board")
    other_task = write_task(root, "other-task", other, ASSERTS)
    box = make_box(tmp_path, other_task, other)
    r = run_cli(["grade", "rename-sig", box.path, "--root", root])
    assert r.exit_code == 2 and r.stdout == "", r.output
    assert f"{box.path}: seeded from fixture other-board" in r.stderr and "fixture demo-board; nothing graded" in r.stderr
    # its own task grades it
    assert run_cli(["grade", "other-task", box.path, "--root", root]).exit_code == 0
    # the same fixture frozen again since the run: another tree
    mine = make_box(tmp_path, task, fixture, name="mine")
    seed = mine.repo.revparse_single(mine.baseline).peel(pygit2.Commit)
    while seed.parents:
        seed = seed.parents[0]
    assert seed.message == f"seed: fixture demo-board {fixture.manifest.sha256}\n"
    manifest = fixture.dir / "fixture.json"
    doc = json.loads(manifest.read_text())
    doc["sha256"] = "e" * 64
    manifest.write_text(json.dumps(doc))
    doc = json.loads((task.dir / "task.json").read_text())
    doc["fixture"]["sha256"] = "e" * 64
    (task.dir / "task.json").write_text(json.dumps(doc))
    r = run_cli(["grade", "rename-sig", mine.path, "--root", root, "--no-kicad"])
    assert r.exit_code == 2 and "the fixture was frozen again since this run" in r.stderr, r.output


def test_grade_names_a_baseline_report_that_is_not_json_and_warns_only_of_the_assertions_it_blinds(tmp_path):
    """A damaged baseline once ended `grade` in a traceback; one missing report once named the
    assertions of the other too."""
    root, fixture, task = _project(tmp_path)
    box = make_box(tmp_path, task, fixture)
    erc = next((fixture.dir / "baseline").glob("erc*"))
    erc.write_text('{"sheets": [')
    r = run_cli(["grade", "rename-sig", box.path, "--root", root])
    assert r.exit_code == 2 and f"{erc}: the fixture's baseline ERC report is not JSON" in r.stderr, r.output
    assert "Traceback" not in r.stderr
    root2, fixture2, task2 = _project(tmp_path / "two")
    doc = json.loads((task2.dir / "assertions.json").read_text())
    doc.append({"id": "drc", "type": "drc_no_new_violations", "args": {}, "weight": 1, "required": True})
    (task2.dir / "assertions.json").write_text(json.dumps(doc))
    next((fixture2.dir / "baseline").glob("erc*")).unlink()
    r = run_cli(["grade", "rename-sig", make_box(tmp_path / "two", task2, fixture2).path, "--root", root2])
    assert "so erc_no_new_violations cannot be evaluated" in r.stderr, r.stderr


def test_grade_of_something_that_is_not_a_sandbox(tmp_path):
    root, _fixture, _task = _project(tmp_path)
    (tmp_path / "empty").mkdir()
    r = run_cli(["grade", "rename-sig", tmp_path / "empty", "--root", root])
    assert r.exit_code == 2 and "not a git repository" in r.stderr
    r = run_cli(["grade", "no-such-task", tmp_path / "empty", "--root", root])
    assert r.exit_code == 2 and "no such task" in r.stderr
    r = run_cli(["grade", "rename-sig", tmp_path / "nowhere", "--root", root])  # once "not a git repository"
    assert r.exit_code == 2 and f"{tmp_path / 'nowhere'}: no such directory" in r.stderr


def test_grade_warns_that_check_clean_cannot_pass_without_a_captured_check(tmp_path):
    """A correct tree graded by hand once failed check_clean as a model's failure, silently."""
    root = tmp_path / "project"
    fixture = write_fixture(root)
    write_task(root, "rename-sig", fixture, [*ASSERTS, assertion("checked", "check_clean")])
    box = make_box(tmp_path, Catalog(root).task("rename-sig"), fixture)
    r = run_cli(["grade", "rename-sig", box.path, "--root", root])
    assert r.exit_code == 0 and "warning: no `copperhead check` result in this sandbox" in r.stderr, r.output


def test_grade_refuses_a_runner_exit_it_does_not_know(tmp_path):
    """A typo once graded as a run that ended on its own, in another failure category."""
    root, fixture, task = _project(tmp_path)
    box = make_box(tmp_path, task, fixture)
    r = run_cli(["grade", "rename-sig", box.path, "--root", root, "--runner-exit", "capexceeded"])
    assert r.exit_code == 2 and "--runner-exit 'capexceeded': one of cap-exceeded, agent-error" in r.stderr


def test_a_file_the_capture_holds_as_a_stand_in_is_not_taken_for_an_edit(tmp_path, monkeypatch):
    """A file over the preservation bounds is captured as a stand-in, so the captured tree is not
    the sandbox's even when nothing was touched: its BLAKE3 in the cut record says it is the same
    file (the first version of the check dropped the run's reports, `check.json` among them)."""
    from cbledger.runner import preserve

    monkeypatch.setattr(preserve, "MAX_KEPT_FILE_BYTES", 1000)  # stands for the real 32 MB bound
    root, box = _renamed(tmp_path)
    box.write("out/big.bin", "x" * 5000)  # left by the agent, over the bound: cut in the capture
    captured = preserve.capture(box.repo, 1_800_000_100, box.baseline)
    preserve.record_evidence(box.repo, captured.capture_sha, 1_800_000_100)
    as_left = run_cli(["grade", "rename-sig", box.path, "--root", root, "--json", "--no-kicad"])
    assert json.loads(as_left.stdout)["reports"] == ["erc"] and "warning" not in as_left.stderr, as_left.stderr
    box.write("out/big.bin", "y" * 5000)  # the same path, other bytes: an edit
    edited = run_cli(["grade", "rename-sig", box.path, "--root", root, "--json", "--no-kicad"])
    assert json.loads(edited.stdout)["reports"] == [] and "this tree has changed since" in edited.stderr


def test_a_run_sandbox_edited_after_its_run_is_not_graded_on_the_reports_the_run_left(tmp_path):
    """`grade` read `.git/cbledger-evidence/` whatever the tree: a kept sandbox edited after its
    run (a gold tried by hand) passed ERC on the reports of the end state the run captured."""
    from cbledger.runner import preserve

    root, box = _renamed(tmp_path)
    # as the runner leaves a sandbox: the end state captured, the reports committed on it
    preserve.record_evidence(box.repo, preserve.capture(box.repo, 1_800_000_100, box.baseline).capture_sha, 1_800_000_100)
    as_left = run_cli(["grade", "rename-sig", box.path, "--root", root, "--json", "--no-kicad"])
    assert json.loads(as_left.stdout)["reports"] == ["erc"] and "warning" not in as_left.stderr, as_left.stderr
    box.write("docs/NOTES.md", "edited after the run\n")
    edited = run_cli(["grade", "rename-sig", box.path, "--root", root, "--json", "--no-kicad"])
    assert edited.exit_code == 0, edited.output
    assert "describe the end state it captured, and this tree has changed since: they are not read" in edited.stderr
    assert json.loads(edited.stdout)["reports"] == [] and "cannot be evaluated" in edited.stderr


def test_a_sandbox_captured_but_never_given_its_evidence_is_compared_with_its_capture(tmp_path):
    """A run that failed between writing its reports and recording its evidence leaves a capture
    alone: an edit since is still another tree."""
    from cbledger.runner import preserve

    root, box = _renamed(tmp_path)
    preserve.capture(box.repo, 1_800_000_100, box.baseline)
    assert run_cli(["grade", "rename-sig", box.path, "--root", root, "--json", "--no-kicad"]).stderr == ""
    box.write("docs/NOTES.md", "edited after the run\n")
    edited = run_cli(["grade", "rename-sig", box.path, "--root", root, "--json", "--no-kicad"])
    assert json.loads(edited.stdout)["reports"] == [] and "this tree has changed since" in edited.stderr
