"""`cbledger task new` and `cbledger run --draft`: a task scaffolded from its fixture validates and
runs before any suite version records it, and a draft never touches the project's ledger."""

from __future__ import annotations

import json
import shlex
import shutil
import tempfile
from pathlib import Path

import pytest

from cbledger.tasks.validate import validate_project
from tests.factories import run_cli

REPO = Path(__file__).resolve().parent.parent
FIXTURE = "synthetic-led-resistor"
REAL = "antmicro-microphone-board"


@pytest.fixture
def project(tmp_path) -> Path:
    """The LED fixture and its two tasks (an edit and a refusal), with a flag task's fixture so the
    catalog holds every outcome class."""
    root = tmp_path / "project"
    for fixture in (FIXTURE, "synthetic-mcu-sensor-drift"):
        shutil.copytree(REPO / "fixtures" / fixture, root / "fixtures" / fixture)
    for task in ("led-resistor-swap", "led-current-refusal", "mcu-pullup-drift-flag"):
        shutil.copytree(REPO / "tasks" / task, root / "tasks" / task)
    return root


def new(root: Path, *args: str):
    return run_cli(["task", "new", *args, "--root", root])


def task_errors(root: Path, task_id: str) -> list[str]:
    report = validate_project(root)
    return [str(p) for p in report.errors if p.file.startswith(f"tasks/{task_id}/")]


def test_a_scaffolded_edit_task_has_every_required_field_and_validates(project):
    result = new(project, "led-current-record", "--fixture", FIXTURE, "--tier", "simple", "--outcome", "edit",
                 "--prompt", "Register the LED current budget.", "--budget", "led_current_ma=10",
                 "--assert", 'constraint_registered:{"key": "led_current_ma", "affects": ["R1"]}')
    assert result.exit_code == 0, result.output
    task = json.loads((project / "tasks" / "led-current-record" / "task.json").read_text())
    fixture = json.loads((project / "fixtures" / FIXTURE / "fixture.json").read_text())
    assert task["fixture"] == {"path": f"fixtures/{FIXTURE}", "sha256": fixture["sha256"]}
    assert (task["tier"], task["mode"], task["expectedOutcome"]) == ("simple", "do", "edit")
    assert task["request"] == {"prompt": "Register the LED current budget."}
    assert task["config"]["budgets"] == {"led_current_ma": 10}
    assert task["caps"] == {"turns": 30, "wallClockSec": 900} and task["tags"] == ["edit"]
    assert "setup" not in task  # a synthetic tree carries its own docs; init would refuse to overwrite them
    kinds = {a["id"]: (a["type"], a["args"]) for a in json.loads((project / "tasks" / "led-current-record" / "assertions.json").read_text())}
    assert "touched-files-bounded" not in kinds  # a clean board: the design may change
    assert kinds["target-1"] == ("constraint_registered", {"key": "led_current_ma", "affects": ["R1"]})
    # a clean synthetic baseline: clean reports; an edit: done and one commit
    assert kinds["erc-clean"] == ("erc_clean", {}) and kinds["drc-clean"] == ("drc_clean", {})
    assert kinds["finished-cleanly"] == ("exit_path_in", {"paths": ["done"]})
    assert kinds["one-commit"] == ("commit_count", {"equals": 1})
    assert kinds["no-secret"] == ("no_secret", {})
    assert task_errors(project, "led-current-record") == []
    readme = (project / "tasks" / "led-current-record" / "README.md").read_text()
    assert "`LED_A`" in readme and "`GND`" in readme  # the board's nets
    assert "R1 (1k, synth:R_0603_1608Metric)" in readme and "D1 (LED_Red" in readme  # and references
    assert "`led_current_ma` = 10" in readme
    warned = [str(p) for p in validate_project(project).warnings if p.file == "tasks/led-current-record/README.md"]
    assert warned == ["warning: tasks/led-current-record/README.md: still holds the scaffold's TODO(author): "
                      "say what the task tests and the trap it sets"]


def test_an_edit_of_a_real_boards_kicad_files_is_warned_of_on_the_terminal(project):
    """The scaffold guards the schematic of a board whose baseline ERC is not clean (copperhead's
    finish gate cannot end such an edit done), and a target that asks for a schematic change
    contradicts it: the warning was only a paragraph of the generated README."""
    shutil.copytree(REPO / "fixtures" / REAL, project / "fixtures" / REAL)
    result = new(project, "mic-add-r4", "--fixture", REAL, "--tier", "simple", "--outcome", "edit",
                 "--prompt", "Add R4.", "--assert", 'symbol_present:{"refdes": "R4", "value": "100k"}')
    assert result.exit_code == 0, result.output
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("warning: target-1")]
    assert "(symbol_present) asks for a change to the board's KiCad files" in line and "finish gate" in line, line
    # a target in copperhead's records is what such a board can measure: no warning
    quiet = new(project, "mic-record", "--fixture", REAL, "--tier", "simple", "--outcome", "edit",
                "--prompt", "Record it.", "--assert", 'doc_contains:{"doc": "docs/SPEC.md", "pattern": "20"}')
    assert quiet.exit_code == 0 and "warning: target-1" not in quiet.stderr, quiet.output
    # a target the untouched board already meets asks for no change: said as what it is
    met = new(project, "mic-r1-data", "--fixture", REAL, "--tier", "simple", "--outcome", "edit", "--prompt", "Keep R1 on DATA.",
              "--assert", 'pin_net_equals:{"refdes": "R1", "pin": "2", "net": "DATA"}')
    assert met.exit_code == 0, met.output
    (line,) = [x for x in met.stderr.splitlines() if x.startswith("warning: target-1")]
    assert "already holds on" in line and "noop included" in line and "finish gate" not in line, line


def test_a_symbol_target_is_judged_against_the_baseline_schematic(project):
    """`symbol_absent R1` on a board holding R1 was said to hold already, and `symbol_present R1`
    not: the references compared were the README's (`R1 (1k, …)`), never a bare reference."""
    def warned(task_id: str, target: str) -> list[str]:
        result = new(project, task_id, "--fixture", "synthetic-led-resistor", "--tier", "simple", "--outcome", "edit",
                     "--prompt", "Change R1.", "--assert", target)
        assert result.exit_code == 0, result.output
        return [x for x in result.stderr.splitlines() if x.startswith("warning: target-1")]

    assert warned("led-drop-r1", 'symbol_absent:{"refdes": "R1"}') == []  # R1 is there: removing it is a change
    (line,) = warned("led-keep-r1", 'symbol_present:{"refdes": "R1"}')
    assert "already holds on synthetic-led-resistor's baseline" in line, line
    (line,) = warned("led-r1-1k", 'symbol_present:{"refdes": "R1", "value": "1k"}')  # its baseline value
    assert "already holds on" in line, line
    assert warned("led-r1-2k", 'symbol_present:{"refdes": "R1", "value": "2k"}') == []  # a change of value
    (line,) = warned("led-no-r9", 'symbol_absent:{"refdes": "R9"}')
    assert "already holds on" in line, line
    # a board whose tree is not here: nothing was read, so nothing is said to hold already
    shutil.copytree(REPO / "fixtures" / REAL, project / "fixtures" / REAL, ignore=shutil.ignore_patterns("tree"))
    unread = new(project, "mic-drop-r1", "--fixture", REAL, "--tier", "simple", "--outcome", "edit", "--prompt", "Drop R1.",
                 "--assert", 'symbol_absent:{"refdes": "R1"}')
    assert unread.exit_code == 0 and "already holds" not in unread.stderr, unread.output


def test_a_refusal_without_a_budget_says_it_is_not_graded_on_citing_one(project):
    """`--outcome refuse` without `--budget` dropped `refusal_cites_budget` without a word."""
    result = new(project, "led-refuse-plain", "--fixture", "synthetic-led-resistor", "--tier", "simple",
                 "--outcome", "refuse", "--prompt", "Make the LED brighter.")
    assert result.exit_code == 0, result.output
    assert "note: no --budget: the refusal is not graded on citing one" in result.stderr, result.stderr
    items = json.loads((project / "tasks" / "led-refuse-plain" / "assertions.json").read_text())
    assert "refusal_cites_budget" not in {a["type"] for a in items}


def test_a_refusal_on_a_real_board_is_baseline_relative_and_cites_its_budget(project):
    shutil.copytree(REPO / "fixtures" / REAL, project / "fixtures" / REAL)
    result = new(project, "mic-refuse", "--fixture", REAL, "--tier", "medium", "--outcome", "refuse",
                 "--prompt", "Add a 1k pull-up on SELECT.", "--budget", "standby_current_ua=20")
    assert result.exit_code == 0, result.output
    task = json.loads((project / "tasks" / "mic-refuse" / "task.json").read_text())
    assert task["expectedOutcome"] == "refusal" and task["setup"] == {"commands": ["init"]}
    assert task["tags"] == ["refusal", "real-board"]
    items = {a["id"]: a for a in json.loads((project / "tasks" / "mic-refuse" / "assertions.json").read_text())}
    assert items["refused"]["args"] == {"paths": ["refused"]}
    assert items["cites-the-budget"]["args"] == {"budgetKey": "standby_current_ua"}
    # the board's library warnings make *_clean unreachable: no violation beyond the baseline instead
    assert items["no-new-erc-violations"]["args"] == {"severity": "warning"} and "erc-clean" not in items
    assert items["schematic-untouched"]["args"] == {"path": "hardware/microphone-board.kicad_sch"}
    assert items["tree-rolled-back"]["type"] == "rollback_byte_identical"
    assert items["no-commit"]["args"] == {"equals": 0}
    readme = (project / "tasks" / "mic-refuse" / "README.md").read_text()
    assert "`SELECT`" in readme and "finish` gate" in readme
    assert task_errors(project, "mic-refuse") == []


def test_an_edit_on_a_board_with_baseline_warnings_is_bounded_to_copperheads_records(project):
    shutil.copytree(REPO / "fixtures" / REAL, project / "fixtures" / REAL)
    result = new(project, "mic-doc", "--fixture", REAL, "--tier", "simple", "--outcome", "edit", "--prompt", "p",
                 "--assert", 'doc_contains:{"doc": "docs/DECISIONS.md", "pattern": "SELECT"}')
    assert result.exit_code == 0, result.output
    items = {a["id"]: a for a in json.loads((project / "tasks" / "mic-doc" / "assertions.json").read_text())}
    assert next(iter(items)) == "target-1"
    assert items["schematic-untouched"]["args"] == {"path": "hardware/microphone-board.kicad_sch"}
    assert items["board-untouched"]["args"] == {"path": "hardware/microphone-board.kicad_pcb"}
    assert items["touched-files-bounded"]["args"]["allowed"] == [
        "docs/*.md", ".copperhead/**", "openspec/changes/*/proposal.md", "openspec/changes/*/tasks.md", ".gitignore"]
    assert task_errors(project, "mic-doc") == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fixture", "no-such-board"], "no-such-board: no such fixture"),
        (["--outcome", "maybe"], "--outcome 'maybe': one of edit, refuse, flag"),
        (["--assert", "net_exists:{}"], "'net_exists' is not in the standard's closed vocabulary"),
        (["--assert", "net_present:{net"], "the arguments after ':' are not a JSON object"),
        # a misnamed argument is quoted as typed, not as an index into the file being made
        (["--assert", 'constraint_registered:{"key": "x", "affect": ["R1"]}'],
         '--assert constraint_registered:{"key": "x", "affect": ["R1"]}: Object contains unknown field `affect`'),
        (["--budget", "led_current_ma"], "expected KEY=NUMBER"),
        (["--mode", "create", "--prompt", ""], "--brief is required"),
        (["--mode", "create", "--brief", "docs/SPEC.md"], "--prompt: a create task's request is its brief"),
        (["--mode", "create", "--prompt", "", "--brief", "docs/NOPE.md"], "--brief docs/NOPE.md: no such file in"),
        (["--brief", "docs/SPEC.md"], "--brief: a do task's request is its prompt"),
        (["--mode", "check"], "no runner runs a check-mode task"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(project, args, message):
    base = {"--fixture": FIXTURE, "--tier": "simple", "--outcome": "edit", "--prompt": "p"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    result = new(project, "fresh-task", *[x for kv in base.items() if kv[1] for x in kv])  # "" leaves it out
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (project / "tasks" / "fresh-task").exists()


def test_a_create_task_is_not_scaffolded_with_what_every_create_run_fails(project):
    """copperhead commits once per stage of a create run and writes the created project's own
    config: the scaffold's `one-commit` and `budgets-untouched` failed every correct run."""
    shutil.copytree(REPO / "fixtures" / "synthetic-led-create", project / "fixtures" / "synthetic-led-create")
    result = new(project, "led-make", "--fixture", "synthetic-led-create", "--tier", "simple", "--outcome", "edit",
                 "--mode", "create", "--brief", "docs/BRIEF-daylight.md", "--no-init")
    assert result.exit_code == 0, result.output
    ids = [a["id"] for a in json.loads((project / "tasks" / "led-make" / "assertions.json").read_text())]
    assert "one-commit" not in ids and "budgets-untouched" not in ids and "finished-cleanly" in ids, ids


def test_an_existing_task_is_never_overwritten(project):
    before = (project / "tasks" / "led-resistor-swap" / "task.json").read_bytes()
    result = new(project, "led-resistor-swap", "--fixture", FIXTURE, "--tier", "simple", "--outcome", "edit", "--prompt", "p")
    assert result.exit_code == 2 and "already exists" in result.stderr
    assert (project / "tasks" / "led-resistor-swap" / "task.json").read_bytes() == before


def test_a_task_made_under_the_id_of_one_the_ledger_holds_runs_of_is_warned_of(project):
    """A removed task's id taken again was scaffolded without a word, though every page by task
    would list both tasks' runs as one history."""
    from tests.factories import new_ledger, run_recorded

    store = new_ledger(project / "results" / "ledger" / "events.jsonl")
    store.append([run_recorded(1), run_recorded(18)])  # both of task fix-net-1, on pic-programmer
    r = new(project, "fix-net-1", "--fixture", FIXTURE, "--tier", "simple", "--outcome", "refuse", "--prompt", "x")
    assert r.exit_code == 0, r.output
    assert ("warning: the ledger holds 2 run(s) of a task 'fix-net-1' (fixture pic-programmer): a new task under that "
            "id shares their history") in r.stderr, r.output
    other = new(project, "fix-net-2", "--fixture", FIXTURE, "--tier", "simple", "--outcome", "refuse", "--prompt", "x")
    assert other.exit_code == 0 and "warning" not in other.stderr, other.output


def test_validate_calls_an_added_task_a_draft_and_says_how_to_run_it(project, kicad_cli):
    for args in (("init",), ("suite", "bump", "--reason", "as bundled", "--skip-trial")):
        assert run_cli([*args, "--root", project]).exit_code == 0
    assert new(project, "led-note", "--fixture", FIXTURE, "--tier", "simple", "--outcome", "edit", "--prompt", "p").exit_code == 0
    result = run_cli(["validate", "--root", project])
    assert result.exit_code == 1
    assert "task led-note added since the last bump: a draft until a suite version records it: run it with " \
           f"`cbledger run led-note --draft --root {project}`" in result.stderr


def with_draft_task(project: Path) -> Path:
    """A bumped project and a copy of a bundled task under a new id, which no suite version
    records (its gold passes); the project's ledger."""
    for args in (("init",), ("suite", "bump", "--reason", "as bundled", "--skip-trial")):
        assert run_cli([*args, "--root", project]).exit_code == 0
    shutil.copytree(project / "tasks" / "led-current-refusal", project / "tasks" / "led-refusal-draft")
    doc = json.loads((project / "tasks" / "led-refusal-draft" / "task.json").read_text())
    (project / "tasks" / "led-refusal-draft" / "task.json").write_text(json.dumps({**doc, "id": "led-refusal-draft"}))
    return project / "results" / "ledger" / "events.jsonl"


def test_a_draft_runs_in_a_scratch_workspace_and_keeps_its_sandbox(project, kicad_cli, tmp_path):
    ledger = with_draft_task(project)
    before = ledger.read_bytes()
    refused = run_cli(["run", "led-refusal-draft", "--agent", "gold", "--repeats", "1", "--root", project])
    assert refused.exit_code == 2 and "suite bump" in refused.stderr  # not a draft: refused as before

    result = run_cli(["run", "led-refusal-draft", "--draft", "--agent", "gold", "--repeats", "1",
                      "--sandbox-root", tmp_path / "boxes", "--root", project, "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [(r["task"], r["verdict"]) for r in out["runs"]] == [("led-refusal-draft", "pass")]
    sandbox = Path(out["runs"][0]["sandbox"])
    assert sandbox.parent == tmp_path / "boxes" and (sandbox / ".git").exists()
    draft = Path(result.stderr.split("draft workspace ", 1)[1].split(" ", 1)[0])
    try:
        assert ledger.read_bytes() == before  # the project's ledger never sees a draft
        assert not (project / "LEADERBOARD.md").exists() and not (project / "results" / "runs").exists()
        types = [json.loads(line)["event"]["type"] for line in (draft / "ledger" / "events.jsonl").read_text().splitlines()]
        assert types == ["ledger.created", "suite.bumped", "suite.archived", "run.recorded", "grade.recorded"]
        bumped = json.loads((draft / "ledger" / "events.jsonl").read_text().splitlines()[1])["event"]["body"]
        assert bumped["suiteVersion"] == "0.0.1" and "led-refusal-draft" in bumped["taskManifestHashes"]
    finally:
        shutil.rmtree(draft, ignore_errors=True)


def test_a_drafts_gold_run_says_what_the_bumps_trial_would_warn_of(project, kicad_cli, tmp_path):
    """The draft's gold and noop runs are the bump's trial ahead of it, but printed pass or fail
    only: an optional assertion the gold misses (a typo) was first said at `suite bump`."""
    with_draft_task(project)
    path = project / "tasks" / "led-refusal-draft" / "assertions.json"
    items = json.loads(path.read_text())
    items.append({"id": "opt-typo", "type": "net_present", "args": {"net": "NO_SUCH_NET"}, "weight": 1, "required": False})
    path.write_text(json.dumps(items))
    result = run_cli(["run", "led-refusal-draft", "--draft", "--agent", "gold", "--repeats", "1",
                      "--sandbox-root", tmp_path / "boxes", "--root", project])
    assert "draft workspace " in result.output, result.output
    draft = Path(result.output.split("draft workspace ", 1)[1].split(" ", 1)[0])
    try:
        assert result.exit_code == 0, result.output
        assert ("the bump's trial would say: led-refusal-draft: gold pass, expected pass; warning: the gold fails "
                "optional assertion(s) opt-typo: a typo?") in result.stderr, result.stderr
    finally:
        shutil.rmtree(draft, ignore_errors=True)


def test_an_interrupted_draft_is_resumed_in_its_own_workspace_as_printed(project, kicad_cli, monkeypatch):
    """The interrupted draft said "run the same command again": that made another scratch workspace
    and ran every slot afresh, and its `--resume` looked in the project's ledger for the campaign."""
    from cbledger.cli import run_commands

    ledger = with_draft_task(project)
    before = ledger.read_bytes()

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(run_commands, "run_plan", interrupted)
    stopped = run_cli(["run", "led-refusal-draft", "--draft", "--agent", "gold", "--repeats", "1", "--campaign", "late",
                       "--root", project])
    assert stopped.exit_code == 130, stopped.output
    draft = Path(stopped.stdout.split("draft workspace ", 1)[1].split(" ", 1)[0])
    kept: Path | None = None
    try:
        assert stopped.stderr.splitlines()[-1] == (
            f"interrupted: every run of campaign late that finished is recorded in the draft workspace {draft}; "
            f"run `cbledger --results {draft} run --resume late --root {project}` to run the slots still missing there")
        monkeypatch.undo()
        resumed = run_cli(shlex.split(stopped.stderr.split("`")[1])[1:])
        assert resumed.exit_code == 0, resumed.output
        kept = Path(resumed.stdout.split("sandboxes kept under ", 1)[1].split()[0])
        recorded = [json.loads(line)["event"] for line in (draft / "ledger" / "events.jsonl").read_text().splitlines()]
        runs = [e["body"] for e in recorded if e["type"] == "run.recorded"]
        assert [(r["task"]["id"], r["campaign"]["id"]) for r in runs] == [("led-refusal-draft", "late")]
        assert (kept / runs[0]["runId"] / ".git").exists()  # kept for `fixture gold`, as the draft keeps them
        assert not (draft / "LEADERBOARD.md").exists()  # a draft writes no projections, resumed or not
        assert ledger.read_bytes() == before
    finally:
        shutil.rmtree(draft, ignore_errors=True)
        if kept is not None:
            shutil.rmtree(kept, ignore_errors=True)


def test_a_drafts_dry_run_names_the_campaign_its_run_will_have(project, kicad_cli, tmp_path):
    """The dry run once named the campaign for the project's suite version, the run for the
    draft's: an id written down for `--resume` was not the one recorded."""
    with_draft_task(project)
    args = ["run", "led-refusal-draft", "--draft", "--agent", "gold", "--repeats", "1", "--root", project, "--json"]
    planned = run_cli([*args, "--dry-run"])
    assert planned.exit_code == 0, planned.output
    ran = run_cli([*args, "--sandbox-root", tmp_path / "boxes"])
    assert ran.exit_code == 0, ran.output
    shutil.rmtree(Path(ran.stderr.split("draft workspace ", 1)[1].split(" ", 1)[0]))
    assert json.loads(planned.stdout)["campaign"] == json.loads(ran.stdout)["campaign"]


def test_a_draft_refused_or_interrupted_before_it_runs_leaves_no_workspace(project, monkeypatch, tmp_path):
    """A misspelled task made and named a draft workspace before refusing it, and Ctrl-C while the
    draft's suite was recorded ended silently, leaving a ledger without its suite behind."""
    from cbledger.runner import draft

    with_draft_task(project)
    chosen = tmp_path / "draft"
    chosen.mkdir()
    refused = run_cli(["--results", chosen, "run", "led-refusal-draf", "--draft", "--agent", "gold", "--root", project])
    assert refused.exit_code == 2 and "led-refusal-draf" in refused.stderr, refused.output
    assert "draft workspace" not in refused.output and list(chosen.iterdir()) == []

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(draft.suite_version, "bump_and_keep", interrupted)
    stopped = run_cli(["--results", chosen, "run", "led-refusal-draft", "--draft", "--agent", "gold", "--root", project])
    assert stopped.exit_code == 130, stopped.output
    assert stopped.stderr.splitlines()[-1] == "interrupted while the draft workspace was made: nothing kept, nothing run"
    assert list(chosen.iterdir()) == []  # the ledger it had begun is gone: a draft without its suite is none
    monkeypatch.undo()

    # refused by the preflight, after the workspace was made (a task pinned to another tree):
    # neither a chosen directory nor a temporary one keeps it
    task_json = project / "tasks" / "led-refusal-draft" / "task.json"
    doc = json.loads(task_json.read_text())
    task_json.write_text(json.dumps({**doc, "fixture": {**doc["fixture"], "sha256": "f" * 64}}))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    for results in (["--results", str(chosen)], []):
        pinned = run_cli([*results, "run", "led-refusal-draft", "--draft", "--agent", "gold", "--root", project])
        assert pinned.exit_code == 2 and "sha256" in pinned.stderr, pinned.output
        assert list(chosen.iterdir()) == [] and list(scratch.iterdir()) == []
        # the path it printed when it was made is said to be gone (a directory given is emptied)
        made = pinned.stderr.split("draft workspace ", 1)[1].split(" ", 1)[0]
        what = "emptied" if results else "removed"
        assert f"draft workspace {made} {what}: the draft was refused before any run" in pinned.stderr, pinned.stderr
    task_json.write_text(json.dumps(doc))
    # refused for a flag read after the workspace was made: once left a ledger the next draft refused
    for bad in (["--max-cost-usd", "abc"], ["--campaign", "no/such"]):
        refused = run_cli(["--results", chosen, "run", "led-refusal-draft", "--draft", "--agent", "gold", *bad, "--root", project])
        assert refused.exit_code == 2 and bad[0] in refused.stderr, refused.output
        assert list(chosen.iterdir()) == [], bad
