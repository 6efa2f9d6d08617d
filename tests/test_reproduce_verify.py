"""`cbledger replay --verify` on a real ledger the runner wrote: gold and noop runs of two bundled
tasks on two synthetic fixtures, preserved as bundles, with every projection generated. An
untouched project verifies with exit 0, offline (no sandbox, agent, kicad-cli or socket), and the
selection options do what they say. What a tampered project reports is in
`test_reproduce_tamper.py`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import cbledger
from cbledger.reproduce import verify as verify_mod
from tests.factories import run_cli
from tests.offline import forbid, forbid_running
from tests.runner_project import REPO
from tests.shared_build import built_once

pytestmark = [pytest.mark.slow, pytest.mark.kicad]

EDIT_TASK = "led-resistor-swap"  # fixture synthetic-led-resistor
OTHER_TASK = "mcu-rename-i2c-nets"  # fixture synthetic-mcu-sensor
TASKS = (EDIT_TASK, OTHER_TASK)


def cli(root: Path, *args):
    return run_cli([*args, "--root", root])


def _build(root: Path, sandboxes: Path, copperhead_cli: Path) -> None:
    """A fresh clone's view of the bundled suite (tracked files only), a ledger, two tasks run
    with gold and noop once each, and every projection written."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z", "fixtures", "tasks", "suites"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    for rel in filter(None, tracked):
        src, dest = REPO / rel.decode(), root / rel.decode()
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)
    for args in (("init",), ("suite", "bump", "--reason", "the bundled suite under test", "--skip-trial")):
        result = cli(root, *args)
        assert result.exit_code == 0, result.output
    for agent in ("gold", "noop"):
        # the CLI runs the `copperhead check` led-resistor-swap's check_clean grades
        result = cli(root, "run", *TASKS, "--agent", agent, "--repeats", "1", "--jobs", "2", "--sandbox-root", sandboxes,
                     "--copperhead-cli", copperhead_cli)
        assert result.exit_code == 0, result.output
    result = cli(root, "project", "all")
    assert result.exit_code == 0, result.output


def small_project(tmp_path_factory, copperhead_cli: Path) -> Path:
    """Built once per test run, for every worker (both reproduce modules use it); callers get a private copy."""

    def build(base: Path) -> None:
        (base / "project").mkdir()
        _build(base / "project", base / "sandboxes", copperhead_cli)

    return built_once(tmp_path_factory, "reproduce-small", build) / "project"


def copy_project(tmp_path_factory, tmp_path: Path, copperhead_cli: Path) -> Path:
    """Bundles are stored relative to the root, so a copied project is as restorable as the original."""
    root = tmp_path / "project"
    shutil.copytree(small_project(tmp_path_factory, copperhead_cli), root)
    return root


def verify_json(root: Path, *args) -> tuple[int, dict]:
    result = cli(root, "replay", "--verify", "--json", *args)
    assert result.stdout.strip(), result.output
    return result.exit_code, json.loads(result.stdout)


def runs_by_task(report: dict) -> dict[tuple[str, str], dict]:
    return {(r["runMode"], r["task"]): r for r in report["runs"]["results"]}


@pytest.fixture
def project(tmp_path_factory, tmp_path, kicad_cli, copperhead_cli) -> Path:
    return copy_project(tmp_path_factory, tmp_path, copperhead_cli)


@pytest.fixture
def offline(monkeypatch):
    forbid_running(monkeypatch)


def test_an_untouched_project_verifies_offline(project, offline):
    result = cli(project, "replay", "--verify")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("chain ok: 11 events")  # created, bump, archived, 4 x (run + grade)
    assert "runs: 4 checked: 4 reproduced, 0 not fully reproduced (skipped), 0 failed" in result.stdout
    # what was re-graded, and with which code: a bump that changed check code claims no grade moved
    code = Path(cbledger.__file__).resolve().parent
    assert f"grades: 4 checked against a re-grade with the check code at {code} (grading, kicad): 4 identical; by suite version: " in result.stdout
    assert "projections: 4/4 records match; LEADERBOARD.md matches; results/cbledger.db matches" in result.stdout
    assert lines[-1] == "verified: every check passed"

    code, report = verify_json(project)
    assert code == 0 and report["ok"] is True and report["exitCode"] == 0
    assert report["chain"]["ok"] is True and report["chain"]["head"]["seq"] == 11
    assert report["runs"]["counts"] == {
        "selected": 4, "notSelected": 0, "reproduced": 4, "skipped": 0, "failed": 0, "retracted": 0,
    }
    for run in report["runs"]["results"]:
        assert run["status"] == "reproduced" and run["failures"] == []
        assert [g["status"] for g in run["grades"]] == ["reproduced"]
    assert {(m, t) for m, t in runs_by_task(report)} == {(m, t) for m in ("gold", "noop") for t in TASKS}
    assert report["projections"]["records"] == {"expected": 4, "matching": 4}
    assert report["projections"]["leaderboard"]["matches"] and report["projections"]["readModel"]["matches"]
    assert report["failures"] == [] and report["notes"] == [] and report["skipped"] == []


def test_progress_is_one_plain_line_per_run_off_a_terminal(project):
    result = cli(project, "replay", "--verify")
    progress = [line for line in result.stderr.splitlines() if line.startswith("[")]
    assert [p.split("]")[0] for p in progress] == ["[1/4", "[2/4", "[3/4", "[4/4"]
    assert all(p.endswith(" reproduced") for p in progress)


def test_chain_only_regrades_nothing(project, monkeypatch):
    monkeypatch.setattr(verify_mod, "check_run", forbid)
    monkeypatch.setattr(verify_mod, "check_outputs", forbid)
    (project / "LEADERBOARD.md").write_text("stale\n")  # not looked at
    result = cli(project, "replay", "--verify", "--chain-only")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("chain ok: 11 events") and len(result.stdout.splitlines()) == 2
    assert result.stdout.splitlines()[1].startswith("head: compare seq 11 ")


def test_with_rerun_the_last_line_is_the_verdict_of_the_re_executions_too(project, monkeypatch):
    """`verified: every check passed` was printed before the re-executions, so a run that
    diverged (exit 8) left no NOT VERIFIED line and the success line above it."""
    from cbledger.reproduce import rerun as rerun_mod

    def rerun_all(workspace, run_ids, on_done=None, jobs=1):
        return [("run-a", rerun_mod.RerunResult("run-a", "strict", "identical")),
                ("run-b", rerun_mod.RerunResult("run-b", "strict", "diverged", first_request="request 1 at $.messages[0]"))]

    monkeypatch.setattr(rerun_mod, "rerun_all", rerun_all)
    r = run_cli(["replay", "--verify", "--chain-only", "--rerun", "--root", project])
    assert r.exit_code == 8, r.output
    assert "verified: every check passed" not in r.stdout
    assert r.stdout.splitlines()[-1] == "re-executed 2 run(s): 1 identical"
    assert r.stderr.splitlines()[-1] == "NOT VERIFIED: 1 of 2 run(s) not identical, or not re-executed (listed above) (exit 8)"
    # one that could not be re-executed at all (no copperhead CLI) is not counted as re-executed
    monkeypatch.setattr(rerun_mod, "rerun_all", lambda *a, **k: [("run-c", "rerun needs the copperhead CLI")])
    r = run_cli(["replay", "--verify", "--chain-only", "--rerun", "--root", project])
    assert r.exit_code == 8 and r.stdout.splitlines()[-1] == "re-executed 0 of 1 run(s): 0 identical, 1 not re-executed", r.output
    monkeypatch.setattr(rerun_mod, "rerun_all", lambda *a, **k: rerun_all(*a, **k)[:1])
    r = run_cli(["replay", "--verify", "--chain-only", "--rerun", "--root", project])
    assert r.exit_code == 0 and r.stdout.splitlines()[-2:] == ["re-executed 1 run(s): 1 identical", "verified: every check passed"]


def test_since_and_run_select_which_runs_are_regraded(project):
    code, full = verify_json(project)
    seqs = sorted(r["seq"] for r in full["runs"]["results"])
    code, since = verify_json(project, "--since", str(seqs[1]))
    assert code == 0
    assert sorted(r["seq"] for r in since["runs"]["results"]) == seqs[2:]
    assert since["runs"]["counts"]["notSelected"] == 2
    assert since["chain"]["events"] == 11  # the chain is always checked whole

    one = full["runs"]["results"][0]["runId"]
    two = full["runs"]["results"][3]["runId"]
    code, picked = verify_json(project, "--run", one, "--run", two)
    assert code == 0 and [r["runId"] for r in picked["runs"]["results"]] == [one, two]

    unknown = cli(project, "replay", "--verify", "--run", "no-such-run")
    assert unknown.exit_code == 2 and "no-such-run" in unknown.stderr


def test_no_projections_leaves_the_outputs_alone(project):
    (project / "LEADERBOARD.md").unlink()
    code, report = verify_json(project, "--no-projections")
    assert code == 0 and report["projections"] is None
    code, report = verify_json(project)
    assert code == 4
    assert [f["kind"] for f in report["failures"]] == ["leaderboard-missing"]
    # regenerating it, as the message once said, would check nothing a reader was handed
    assert "put the published LEADERBOARD.md here to check it against the ledger" in report["failures"][0]["message"]


def test_parallel_regrading_reports_what_serial_does(project, tmp_path, monkeypatch):
    _, serial = verify_json(project)
    # Workers must grade with the code this process runs, not a `cbledger/` in the working directory.
    decoy = tmp_path / "elsewhere"
    (decoy / "cbledger").mkdir(parents=True)
    (decoy / "cbledger" / "__init__.py").write_text('"""An older cbledger, without the code under test."""\n')
    monkeypatch.chdir(decoy)
    code, parallel = verify_json(project, "--jobs", "2")
    assert code == 0, parallel["failures"]

    def strip(report):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in report["runs"]["results"]]

    assert strip(parallel) == strip(serial)
    # the projections are checked on a thread of the parent while the workers re-grade
    assert parallel["projections"] == serial["projections"] and parallel["projections"] is not None
    board = project / "LEADERBOARD.md"
    board.write_text(board.read_text() + "an edit\n")
    code, edited = verify_json(project, "--jobs", "2")
    assert code == 4
    assert [f["kind"] for f in edited["failures"]] == ["leaderboard-different"]
    assert strip(edited) == strip(serial)


def test_replay_needs_verify_and_a_ledger(project, tmp_path):
    assert cli(project, "replay").exit_code == 2
    missing = run_cli(["replay", "--verify", "--root", tmp_path / "empty"])
    assert missing.exit_code == 2 and "no ledger" in missing.stderr


def test_a_retracted_run_is_skipped_with_a_note(project):
    _, report = verify_json(project)
    victim = runs_by_task(report)[("noop", EDIT_TASK)]["runId"]
    retraction = {
        "id": f"retract:{victim}", "type": "run.retracted", "at": "2026-12-01T00:00:00Z",
        "actor": {"kind": "maintainer", "name": "test"}, "body": {"runId": victim, "reason": "a test retraction"},
    }
    appended = run_cli(["append", "-", "--root", project], input=json.dumps(retraction))
    assert appended.exit_code == 0, appended.output
    code, report = verify_json(project)
    assert code == 4  # the committed projections still show the run
    kinds = {f["kind"] for f in report["failures"]}
    assert kinds == {"record-missing", "leaderboard-different", "readmodel-different", "site-different"}
    # what is missing is the mark beside the run's record, which stays
    [missing] = [f for f in report["failures"] if f["kind"] == "record-missing"]
    assert missing["file"].endswith(".retracted.json")
    record = project / missing["file"].replace(".retracted.json", ".json")
    published = record.read_bytes()
    assert cli(project, "project", "all").exit_code == 0
    assert record.read_bytes() == published and (project / missing["file"]).is_file()
    code, report = verify_json(project)
    assert code == 0, report["failures"]
    retracted = runs_by_task(report)[("noop", EDIT_TASK)]
    assert retracted["status"] == "retracted" and retracted["skipped"] == []
    assert retracted["notes"][0]["kind"] == "retracted" and "a test retraction" in retracted["notes"][0]["message"]
    assert report["runs"]["counts"]["retracted"] == 1 and report["runs"]["counts"]["reproduced"] == 3
    assert report["runs"]["counts"]["skipped"] == 0  # a retraction is not a claim left unchecked


def test_a_task_edited_after_its_runs_is_caught_and_its_runs_still_regrade_under_their_own_suite(project, offline):
    path = project / "tasks" / EDIT_TASK / "assertions.json"
    assertions = json.loads(path.read_text())
    assertions[0]["weight"] = assertions[0]["weight"] + 1
    path.write_text(json.dumps(assertions, indent=2) + "\n")
    code, report = verify_json(project)
    # The edit is not bumped: the working tree no longer is the suite its leaderboard names.
    assert code == verify_mod.EXIT_DEFINITIONS, report["failures"]
    (finding,) = report["failures"]
    assert finding["check"] == "suite" and finding["kind"] == "definitions-differ"
    assert f"task {EDIT_TASK}: assertions.json changed" in finding["message"]
    # The runs themselves are re-graded under 1.0.0's kept definitions, not the edited file.
    for mode in ("gold", "noop"):
        for task in TASKS:
            run = runs_by_task(report)[(mode, task)]
            assert run["status"] == "reproduced" and [g["status"] for g in run["grades"]] == ["reproduced"]

    # Bumped and re-scored, both the old grade and the new one reproduce, each under its own suite.
    for args in (("suite", "bump", "--reason", "reweigh", "--skip-trial"), ("rescore",), ("project", "all")):
        result = cli(project, *args)
        assert result.exit_code == 0, result.output
    code, report = verify_json(project)
    assert code == 0, report["failures"]
    for mode in ("gold", "noop"):
        run = runs_by_task(report)[(mode, EDIT_TASK)]
        assert run["status"] == "reproduced"
        assert [(g["suiteVersion"], g["status"]) for g in run["grades"]] == [("1.0.0", "reproduced"), ("1.1.0", "reproduced")]
        other = runs_by_task(report)[(mode, OTHER_TASK)]
        assert [g["status"] for g in other["grades"]] == ["reproduced", "reproduced"]
    assert report["projections"]["records"] == {"expected": 8, "matching": 8}


def test_a_results_directory_elsewhere_is_named_where_it_is_and_no_project_is_said_once(project, tmp_path, monkeypatch):
    """Under `--results DIR` a finding names the file in DIR a reader opens, not the project's
    layout; run outside any project without `--root`, verify says once that it found no working
    tree, not that every task was removed."""
    chosen = tmp_path / "chosen"
    shutil.move(project / "results", chosen)
    shutil.move(project / "LEADERBOARD.md", chosen / "LEADERBOARD.md")
    with (chosen / "LEADERBOARD.md").open("a") as f:
        f.write("edited\n")
    ok = run_cli(["--results", chosen, "replay", "--verify", "--root", project])
    assert ok.exit_code == 4, ok.output
    assert f"[{chosen / 'LEADERBOARD.md'}:" in ok.output and "(past its end)" in ok.output
    assert f"{chosen / 'LEADERBOARD.md'} DIFFERS; {chosen / 'cbledger.db'} matches" in ok.stdout
    # one command brings every differing output back, whichever they are
    assert f"NOT VERIFIED: projections differ; `cbledger --results {chosen} project all --root {project}` " \
           "regenerates every output from the ledger (exit 4)" in ok.stderr, ok.stderr

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("CBLEDGER_ROOT", raising=False)
    given = run_cli(["--results", chosen, "replay", "--verify", "--json", "--no-projections", "--root", elsewhere])
    report = json.loads(given.stdout)
    assert given.exit_code == 7
    assert [f["kind"] for f in report["failures"]] == ["no-working-tree"], report["failures"]
    outside = run_cli(["--results", chosen, "replay", "--verify", "--no-projections"])
    assert outside.exit_code == 7 and outside.output.count("no-working-tree") == 1, outside.output
    # nothing was compared: the verdict says so rather than that the definitions do not match
    assert "NOT VERIFIED: no project here to compare the suite's definitions with" in outside.stderr, outside.stderr
    refused = run_cli(["run", EDIT_TASK, "--agent", "gold", "--dry-run"])
    assert refused.exit_code == 2
    assert f"(no cbledger project at or above {elsewhere}" in refused.stderr, refused.output
    # a real board's run, whose tree no kept definitions hold: the way out is the root, not
    # materializing (every such run advised `fixture materialize`, before the one line that said why)
    real = "20261201T205355Z-harness-gold-mic-standby-budget-record-r1-eae965"
    committed = run_cli(["--results", REPO / "results", "replay", "--verify", "--no-projections", "--run", real])
    assert committed.exit_code == 7, committed.output
    (line,) = [x for x in committed.output.splitlines() if x.startswith("MISMATCH fixture-missing")]
    assert f"{elsewhere} is not the project that materializes it: run from the project, or pass --root DIR" in line, line


def test_a_ledger_named_from_outside_its_project_is_verified_against_that_project(project, tmp_path, monkeypatch):
    """From outside the project, `--ledger PROJECT/results/ledger/events.jsonl` re-graded against
    the working directory: every run `fixture-missing` ("materialize it"), exit 7, and a
    suggestion to write a second leaderboard into results/."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("CBLEDGER_ROOT", raising=False)
    r = run_cli(["replay", "--verify", "--json", "--ledger", project / "results" / "ledger" / "events.jsonl"])
    assert r.exit_code == 0, r.stdout[-2000:] + r.stderr
    report = json.loads(r.stdout)
    assert report["failures"] == [] and report["runs"]["counts"]["reproduced"] == 4
    assert report["projections"]["records"] == {"expected": 4, "matching": 4}


def test_a_verdict_of_no_trusted_checkpoint_still_says_the_runs_that_failed(capsys):
    """The runs are checked beside a ledger no named key signed; exit 5 wins, and its line named
    the checkpoint alone though runs had failed too."""
    from cbledger.cli.reproduce_commands import _verdict
    from cbledger.ledger.verify import ChainReport
    from cbledger.reproduce import verify as verify_mod
    from cbledger.reproduce.checkpoints import CheckpointsCheck
    from cbledger.reproduce.findings import Finding

    report = verify_mod.VerifyReport(
        ledger="l", root="r", options=verify_mod.Options(), chain=ChainReport(path="l", events=3),
        checkpoints=CheckpointsCheck(failures=[Finding(check="checkpoint", kind="no-trusted-checkpoint", message="m")]),
        orphan_failures=[Finding(check="run", kind="grade-orphan", message="x")],
    )
    _verdict(report)
    err = capsys.readouterr().err
    assert "NOT VERIFIED: no checkpoint signed by a key given with --key" in err and "1 run finding(s) as well" in err, err
