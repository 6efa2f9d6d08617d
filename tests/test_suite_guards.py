"""The guards on the suite: `suite bump` records a task only after gold passed it and noop failed
it (real runs through the runner, nothing recorded), and `validate` names a task edited since the
last bump. Each test builds a small project from the bundled synthetic LED board and its tasks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.factories import run_cli

REPO = Path(__file__).resolve().parent.parent
FIXTURE = "synthetic-led-resistor"
EDIT = "led-resistor-swap"
REFUSAL = "led-current-refusal"


@pytest.fixture
def project(tmp_path, kicad_cli, copperhead_cli, monkeypatch) -> Path:
    # a bump's trial runs gold on led-resistor-swap, whose check_clean needs the copperhead CLI
    monkeypatch.setenv("COPPERHEAD_CLI", str(copperhead_cli))
    root = tmp_path / "project"
    shutil.copytree(REPO / "fixtures" / FIXTURE, root / "fixtures" / FIXTURE)
    for task in (EDIT, REFUSAL):
        shutil.copytree(REPO / "tasks" / task, root / "tasks" / task)
    (root / "suites").mkdir()
    (root / "suites" / "pair.json").write_text(json.dumps({"name": "pair", "tasks": [EDIT, REFUSAL]}))
    assert run_cli(["init", "--root", root]).exit_code == 0
    return root


def ledger_lines(root: Path) -> list[str]:
    return (root / "results" / "ledger" / "events.jsonl").read_text().splitlines()


def bump(root: Path, *extra: str):
    return run_cli(["suite", "bump", "--reason", "under test", "--root", root, *extra])


def test_a_bump_runs_gold_and_noop_on_every_new_task_first(project):
    r = bump(project)
    assert r.exit_code == 0, r.stderr
    assert "trial: gold passes and noop fails on 2 changed task(s)" in r.stdout
    assert "kept under results/suites/" in r.stdout  # as a reader in the project opens it
    for task in (EDIT, REFUSAL):
        assert f"trial {task}: gold pass, expected pass" in r.stderr
        assert f"trial {task}: noop fail" in r.stderr
    # the bump and its kept definitions, in one batch
    assert '"suite.bumped"' in ledger_lines(project)[-2] and '"suite.archived"' in ledger_lines(project)[-1]
    # nothing of a trial is recorded: no run, no grade, no bundle
    assert not any('"run.recorded"' in line or '"grade.recorded"' in line for line in ledger_lines(project))
    assert not (project / "results" / "runs").exists() or not list((project / "results" / "runs").iterdir())


def test_a_bump_warns_of_an_optional_assertion_the_gold_fails(project):
    """A typo in an optional assertion (a value's case) could never score, and the bump said nothing."""
    path = project / "tasks" / EDIT / "assertions.json"
    items = json.loads(path.read_text())
    items.append({"id": "value-typo", "type": "symbol_present", "required": False, "weight": 1,
                  "args": {"refdes": "R1", "value": "680K"}})
    path.write_text(json.dumps(items, indent=2) + "\n")
    r = bump(project)
    assert r.exit_code == 0, r.stderr
    assert (f"trial {EDIT}: gold pass, expected pass; warning: the gold fails optional assertion(s) value-typo: "
            "a typo?") in r.stderr
    assert f"trial {REFUSAL}: gold pass, expected pass\n" in r.stderr


def test_a_bump_warns_of_a_target_assertion_the_noop_passes(project):
    """A change's own assertion that the untouched board meets tests nothing; the noop's other
    failures hid it, and the bump recorded it without a word."""
    path = project / "tasks" / EDIT / "assertions.json"
    items = json.loads(path.read_text())
    items.append({"id": "target-9", "type": "symbol_present", "required": True, "weight": 1, "args": {"refdes": "R1"}})
    path.write_text(json.dumps(items, indent=2) + "\n")
    r = bump(project)
    assert r.exit_code == 0, r.stderr
    assert ("expected fail; warning: noop passes target-9, which the board meets before any edit: not a test of "
            "the change") in r.stderr
    (refusal,) = [line for line in r.stderr.splitlines() if f"trial {REFUSAL}: noop" in line]
    assert "noop fail" in refusal and "noop passes" not in refusal


def test_a_bump_warns_of_an_edit_task_whose_noop_fails_only_on_how_it_ended(project):
    """An edit task whose assertions never read the board: noop failed `one-commit` alone, so the
    trial counted it as discriminating, and any run making one commit would pass it."""
    r = bump(project)
    assert r.exit_code == 0 and "noop fails only on" not in r.stderr, r.stderr
    path = project / "tasks" / EDIT / "assertions.json"
    kept = {"led-untouched", "erc-clean", "one-commit", "finished-cleanly", "no-secret"}
    path.write_text(json.dumps([a for a in json.loads(path.read_text()) if a["id"] in kept], indent=2) + "\n")
    r = bump(project)
    assert r.exit_code == 0, r.stderr
    (line,) = [line for line in r.stderr.splitlines() if f"trial {EDIT}: noop" in line]
    assert "warning: noop fails only on one-commit" in line and "no assertion recognises the change itself" in line, line
    assert "led-untouched" not in line.split("warning:", 1)[1]


def test_a_bump_refuses_a_changed_task_whose_gold_fails(project):
    assert bump(project).exit_code == 0
    before = ledger_lines(project)
    gold_bom = project / "tasks" / EDIT / "gold" / "files" / "docs" / "BOM.md"
    gold_bom.unlink()  # the gold leaves the BOM at 1k: the solution no longer solves the task
    assertions = project / "tasks" / EDIT / "assertions.json"
    doc = json.loads(assertions.read_text())
    doc[0]["weight"] = 4
    assertions.write_text(json.dumps(doc, indent=2) + "\n")
    r = bump(project)
    assert r.exit_code == 2  # a refused precondition, as every UserError
    # what the grader said of it, not the id alone (the author ran `cbledger grade` to learn it)
    assert (f"{EDIT}: gold fail (first failed: bom-value: docs/BOM.md: row 'R1' column 'Value' is '1k', does not match "
            "/^680$/), expected pass") in r.stderr, r.stderr
    assert REFUSAL not in r.stderr.split("refusing", 1)[1]  # only the changed task was tried
    assert ledger_lines(project) == before


def test_a_gold_edited_alone_is_tried_and_a_failing_one_refused(project):
    """No manifest hash covers the gold: an edit to it alone once bumped the suite untried,
    recording a gold that no longer passes (the printed change list empty)."""
    assert bump(project).exit_code == 0
    before = ledger_lines(project)
    bom = project / "tasks" / EDIT / "gold" / "files" / "docs" / "BOM.md"
    bom.write_text(bom.read_text().replace("| R1 | 680 |", "| R1 | 681 |"))
    r = bump(project)
    assert r.exit_code == 2 and f"{EDIT}: gold fail" in r.stderr, r.output
    assert REFUSAL not in r.stderr.split("refusing", 1)[1]  # only the changed task was tried
    assert ledger_lines(project) == before
    # the run is refused too, and its dry run says so rather than listing slots that "would run"
    dry = run_cli(["run", EDIT, "--agent", "gold", "--repeats", "1", "--dry-run", "--root", project])
    assert dry.exit_code == 2 and "the suite on disk differs from suite 1.0.0" in dry.stderr and "would run" not in dry.stdout, dry.output
    bom.write_text(bom.read_text().replace("| R1 | 681 |", "| R1 | 680 |") + "\n")
    r = bump(project)  # an edit that keeps the gold passing: tried, then recorded, and named
    assert r.exit_code == 0 and f"trial {EDIT}: gold pass" in r.stderr, r.output
    assert f"(task {EDIT}: gold/files/docs/BOM.md changed)" in r.stdout, r.stdout


def test_a_bump_refuses_a_task_that_noop_passes(project):
    assert bump(project).exit_code == 0
    before = ledger_lines(project)
    assertions = project / "tasks" / REFUSAL / "assertions.json"
    lenient = [a for a in json.loads(assertions.read_text()) if a["type"] in ("no_secret", "file_unchanged")]
    assert lenient, "the refusal task keeps an assertion noop passes"
    assertions.write_text(json.dumps(lenient, indent=2) + "\n")
    r = bump(project)
    assert r.exit_code == 2
    assert f"{REFUSAL}: noop pass, expected fail" in r.stderr
    assert ledger_lines(project) == before


def test_skip_trial_is_recorded_in_the_reason(project):
    r = bump(project, "--skip-trial")
    assert r.exit_code == 0, r.stderr
    bumped = json.loads(ledger_lines(project)[-2])
    assert bumped["event"]["type"] == "suite.bumped"
    assert bumped["event"]["body"]["reason"] == f"under test (recorded with --skip-trial: gold and noop not run on {REFUSAL}, {EDIT})"
    assert bump(project, "--skip-trial").exit_code == 2  # nothing changed: still refused


def add_flag_task(root: Path) -> None:
    """The third outcome class, so that `validate` has nothing else to say about the suite."""
    shutil.copytree(REPO / "fixtures" / "synthetic-mcu-sensor-drift", root / "fixtures" / "synthetic-mcu-sensor-drift")
    shutil.copytree(REPO / "tasks" / "mcu-pullup-drift-flag", root / "tasks" / "mcu-pullup-drift-flag")
    (root / "suites" / "pair.json").write_text(json.dumps({"name": "pair", "tasks": [EDIT, REFUSAL, "mcu-pullup-drift-flag"]}))


def test_validate_names_a_task_edited_since_the_last_bump(project):
    add_flag_task(project)
    assert bump(project, "--skip-trial").exit_code == 0
    r = run_cli(["validate", "--root", project])
    assert r.exit_code == 0, r.stderr
    readme_only = project / "tasks" / EDIT / "README.md"
    kept = readme_only.read_text()
    readme_only.write_text(kept + "\nA note.\n")
    r = run_cli(["validate", "--root", project])  # no manifest hash covers it, but the run refuses it: so does validate
    assert r.exit_code == 1 and f"error: tasks/{EDIT}/README.md: task {EDIT}: README.md changed since the last bump" in r.stderr, r.stderr
    readme_only.write_text(kept)
    assertions = project / "tasks" / EDIT / "assertions.json"
    assertions.write_text(assertions.read_text().replace('"weight": 3', '"weight": 4', 1))
    r = run_cli(["validate", "--root", project])  # the file that changed, not task.json
    assert r.exit_code == 1 and f"error: tasks/{EDIT}/assertions.json: task {EDIT} changed since the last bump" in r.stderr, r.stderr
    assertions.write_text(assertions.read_text().replace('"weight": 4', '"weight": 3', 1))
    task_json = project / "tasks" / EDIT / "task.json"
    doc = json.loads(task_json.read_text())
    doc["repeats"] = 1
    task_json.write_text(json.dumps(doc, indent=2) + "\n")
    r = run_cli(["validate", "--root", project])
    assert r.exit_code == 1
    assert (
        f"error: tasks/{EDIT}/task.json: task {EDIT} changed since the last bump: differs from suite 1.0.0 "
        f"as recorded; run `cbledger suite bump --reason ... --root {project}`"
    ) in r.stderr
    # another task that does not load is its own error, and hides nothing else that changed
    kept_refusal = (project / "tasks" / REFUSAL / "task.json").read_text()
    (project / "tasks" / REFUSAL / "task.json").write_text("{ not json")
    r = run_cli(["validate", "--root", project])
    assert r.exit_code == 1
    assert f"tasks/{REFUSAL}/task.json" in r.stderr and f"task {REFUSAL} changed" not in r.stderr, r.stderr
    assert f"error: tasks/{EDIT}/task.json: task {EDIT} changed since the last bump" in r.stderr, r.stderr
    # said once, by validate's own check: the bump's reading of it ("fixture.path missing or
    # invalid") came second and named the wrong field
    assert r.stderr.count(f"error: tasks/{REFUSAL}/task.json: ") == 1 and "fixture.path" not in r.stderr, r.stderr
    # a file that loads, in error and changed: both said (the bump it needs is not hidden behind the error)
    (project / "tasks" / REFUSAL / "task.json").write_text(kept_refusal.replace('"tier": "', '"tier": "x', 1))
    r = run_cli(["validate", "--root", project])
    assert f"error: tasks/{REFUSAL}/task.json: task {REFUSAL}: task.json changed since the last bump" in r.stderr, r.stderr
    assert f"error: tasks/{REFUSAL}/task.json: tier: " in r.stderr, r.stderr
    # a link in a task, which a bump and a run refuse, is an error here too, beside the rest
    (project / "tasks" / REFUSAL / "task.json").write_text(kept_refusal)
    (project / "tasks" / REFUSAL / "notes.md").symlink_to("README.md")
    r = run_cli(["validate", "--root", project])
    assert r.exit_code == 1 and f"tasks/{REFUSAL}/notes.md" in r.stderr, r.output
    assert f"error: tasks/{EDIT}/task.json: task {EDIT} changed since the last bump" in r.stderr, r.stderr


def test_a_changed_check_has_every_task_tried_and_a_changed_gold_its_own():
    """A check edited without a grader version once had no task tried at the bump (and passed
    validate): every task is graded by it."""
    import msgspec

    from cbledger.tasks import definitions, suite_archive
    from cbledger.workspace import Workspace

    now = suite_archive.on_disk(Workspace.at(REPO))
    assert definitions.changed_tasks(now, now) == set()
    checks = dict(now.checks)
    some = sorted(checks)[0]
    checks[some] = msgspec.structs.replace(checks[some], sha256="0" * 64)
    assert definitions.changed_tasks(msgspec.structs.replace(now, checks=checks), now) == set(now.tasks)
    task = now.tasks[EDIT]
    gold = next(rel for rel in task.files if rel.startswith("gold/"))
    files = {**task.files, gold: msgspec.structs.replace(task.files[gold], sha256="0" * 64)}
    before = msgspec.structs.replace(now, tasks={**now.tasks, EDIT: msgspec.structs.replace(task, files=files)})
    assert definitions.changed_tasks(before, now) == {EDIT}


def test_a_bump_refuses_what_validate_calls_an_error(project):
    """A named suite listing a task that does not exist was recorded by the bump (exit 0) while
    `validate` called it an error; a task's misspelled field was refused with msgspec's bare words."""
    before = ledger_lines(project)
    suite = project / "suites" / "pair.json"
    suite.write_text(json.dumps({"name": "pair", "tasks": [EDIT, REFUSAL, "led-resistor-swpa"]}))
    r = bump(project)
    assert r.exit_code == 2, r.output
    assert "suites/pair.json: tasks[2]: no task 'led-resistor-swpa'" in r.stderr and "nothing recorded" in r.stderr, r.stderr
    assert "trial" not in r.stderr  # refused before gold or noop ran
    assert ledger_lines(project) == before
    suite.write_text(json.dumps({"name": "pair", "tasks": [EDIT, REFUSAL]}))
    manifest = project / "tasks" / EDIT / "task.json"
    doc = json.loads(manifest.read_text())
    doc["teir"] = doc.pop("tier")
    manifest.write_text(json.dumps(doc, indent=2) + "\n")
    r = bump(project)
    assert r.exit_code == 2 and f"tasks/{EDIT}/task.json: teir:" in r.stderr, r.stderr
    assert ledger_lines(project) == before


def test_a_bump_line_names_every_change_it_records(project):
    """A bump that recorded a named suite's change and a README's said "(named suites changed)"
    alone: the files no hash covers were named only when nothing hashed had changed."""
    assert bump(project, "--skip-trial").exit_code == 0  # what is tried is the other tests' subject
    (project / "suites" / "pair.json").write_text(json.dumps({"name": "pair", "tasks": [REFUSAL, EDIT]}))
    readme = project / "tasks" / EDIT / "README.md"
    readme.write_text(readme.read_text() + "\nThe trap: the BOM row.\n")
    r = bump(project, "--json", "--skip-trial")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["fileChanges"] == [f"task {EDIT}: README.md changed", "named suite pair changed"]
    readme.write_text(readme.read_text() + "\nAgain.\n")
    (project / "suites" / "pair.json").write_text(json.dumps({"name": "pair", "tasks": [EDIT, REFUSAL]}))
    r = bump(project, "--skip-trial")
    assert r.exit_code == 0, r.output
    (line,) = [x for x in r.stdout.splitlines() if "suite 1.1.0 → 1.2.0" in x]
    # each change by its file: the hashes' "named suites changed" is not said again
    assert line.endswith(f"(task {EDIT}: README.md changed, named suite pair changed)"), line
