"""`cbledger show RUN` and `cbledger restore RUN DIR` on the committed ledger's runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pygit2
import pytest

from cbledger.reproduce import inspect
from cbledger.workspace import Workspace
from tests.factories import run_cli
from tests.site_helpers import REPO, committed_state

STATE = committed_state()
SYNTHETIC = sorted(
    rid for rid, e in STATE.runs.items() if e.run.fixture.id.startswith(("synthetic-", "variant-"))
    and rid not in STATE.retracted
)
SOLVE = next(r for r in SYNTHETIC if "-compat-scripted-solve-led-resistor-swap-v1-" in r)
NOOP = next(r for r in SYNTHETIC if "-harness-noop-led-resistor-swap-v1-" in r)
#: graded under the current suite, so `cbledger grade` (which reads the task as it is on disk)
#: grades it as recorded: SOLVE's task has changed since (led-resistor-swap-v1 gained its
#: copperhead-check at 1.7.0, which a run captured before that cannot pass)
CURRENT = max((r for r in SYNTHETIC if ".led-resistor-swap-v1-" in r and r.startswith("harness-gold-")), key=lambda r: STATE.runs[r].seq)


def cli(*args):
    return run_cli([*args, "--root", REPO])


def test_show_prints_summary_assertions_category_and_cost():
    out = cli("show", NOOP)
    assert out.exit_code == 0, out.stderr
    grades = STATE.grades[NOOP]
    assert "verdict    fail (" in out.stdout
    latest = list(grades.values())[-1].grade
    assert f"({latest.failure_category})" in out.stdout
    for g in grades.values():
        for a in g.grade.assertions:
            assert f" {a.id} ({a.type}," in out.stdout
    assert "cost       " in out.stdout


def test_show_json_is_camel_case_and_matches_the_ledger():
    doc = json.loads(cli("show", SOLVE, "--json").stdout)
    run = STATE.runs[SOLVE].run
    assert doc["runId"] == SOLVE and doc["headSha"] == run.sandbox.head_sha
    assert doc["verdict"] == "pass" and doc["failureCategory"] is None
    assert [g["suiteVersion"] for g in doc["grades"]] == list(STATE.grades[SOLVE])
    assert "firstFailedRequired" in doc["grades"][0] and "evidenceSource" in doc["grades"][0]["assertions"][0]
    assert "transcript" not in doc and "diff" not in doc


def test_show_transcript_and_diff_come_from_the_bundle():
    doc = json.loads(cli("show", SOLVE, "--transcript", "--diff", "--json").stdout)
    kinds = [t["kind"] for t in doc["transcript"]]
    assert kinds[0] == "request" and "assistant" in kinds and "tool" in kinds
    assert "diff --git a/docs/BOM.md b/docs/BOM.md" in doc["diff"]
    assert ".copperhead/runs/" not in doc["diff"]
    text = cli("show", SOLVE, "--transcript").stdout
    assert "transcript:" in text and "-> finish" in text
    assert json.loads(cli("show", NOOP, "--diff", "--json").stdout)["diff"] == ""
    # in text, an empty diff says what was left out rather than print nothing under a grade that
    # counted changed paths (the harness's own run records)
    assert cli("show", NOOP, "--diff").stdout.endswith("diff: no change outside .copperhead/runs/ (the harness's own "
                                                       "records: `--transcript` shows them)\n")


def test_show_still_prints_an_event_by_seq_or_id():
    by_seq = json.loads(cli("show", str(STATE.runs[SOLVE].seq), "--json").stdout)
    by_id = json.loads(cli("show", f"run:{SOLVE}", "--json").stdout)
    assert by_seq == by_id and by_seq["event"]["body"]["runId"] == SOLVE


def test_show_of_an_unknown_run_is_a_clear_error():
    out = cli("show", "no-such-run", "--transcript")
    assert out.exit_code != 0 and "no run 'no-such-run'" in out.stderr
    for key in ("no-such-run", "99999"):  # a run id is what `show` is most often given: the line says it was tried
        out = cli("show", key)
        assert out.exit_code == 2 and out.stderr.startswith(f"error: no run, seq or event id '{key}' in "), out.stderr


def _git(d: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(d), *args], capture_output=True, text=True, check=True).stdout


def test_restore_lays_out_a_working_copy_with_the_baseline(tmp_path):
    into = tmp_path / "restored"
    out = cli("restore", CURRENT, into, "--json")
    assert out.exit_code == 0, out.stderr
    run = STATE.runs[CURRENT].run
    assert _git(into, "rev-parse", "HEAD").strip() == run.sandbox.head_sha
    assert _git(into, "rev-parse", "baseline").strip() == run.sandbox.baseline_sha
    assert _git(into, "branch", "--show-current").strip() == "run"
    changed = _git(into, "diff", "--name-only", "baseline").split()
    assert "docs/BOM.md" in changed and "led-indicator.kicad_sch" in changed
    assert (into / "led-indicator.kicad_sch").is_file()
    graded = cli("grade", run.task.id, into, "--baseline", "baseline", "--json")
    assert json.loads(graded.stdout)["verdict"] == list(STATE.grades[CURRENT].values())[-1].grade.verdict


def test_a_restored_run_grades_as_recorded_and_an_edited_one_is_not_graded_on_its_old_reports(tmp_path):
    into = tmp_path / "restored"
    assert cli("restore", CURRENT, into).exit_code == 0
    recorded = list(STATE.grades[CURRENT].values())[-1].grade
    same = cli("grade", recorded_task(CURRENT), into, "--json", "--no-kicad")
    assert same.exit_code == 0, same.stderr
    doc = json.loads(same.stdout)
    assert doc["reports"] and "ran kicad-cli" not in same.stderr
    assert (doc["verdict"], doc["partialCredit"]) == (recorded.verdict, float(recorded.partial_credit))
    (into / "docs" / "BOM.md").write_text("edited after the run\n")
    edited = cli("grade", recorded_task(CURRENT), into, "--json", "--no-kicad")
    assert json.loads(edited.stdout)["reports"] == []


def recorded_task(run_id: str) -> str:
    return STATE.runs[run_id].run.task.id


def test_restore_takes_the_event_id_show_takes(tmp_path):
    out = cli("restore", f"run:{SOLVE}", tmp_path / "r", "--json")
    assert out.exit_code == 0, out.stderr
    assert _git(tmp_path / "r", "rev-parse", "HEAD").strip() == STATE.runs[SOLVE].run.sandbox.head_sha


def test_show_prints_a_list_of_assertions_unchanged_across_suite_versions_once():
    grades = list(STATE.grades[NOOP].values())
    assert len(grades) > 1  # re-graded under later suite versions
    out = cli("show", NOOP).stdout
    first = grades[0].grade.assertions[0]
    listed = [line for line in out.splitlines() if f" {first.id} ({first.type}," in line]
    distinct = {repr(g.grade.assertions) for g in grades}
    assert len(listed) == len(distinct) < len(grades)
    assert "(assertions as under suite " in out


def test_show_transcript_prints_each_tool_calls_arguments_once():
    text = cli("show", SOLVE, "--transcript").stdout
    doc = json.loads(cli("show", SOLVE, "--transcript", "--json").stdout)
    args = next(" ".join(t["args"].split()) for t in doc["transcript"] if t["kind"] == "tool" and len(t["args"]) > 20)
    assert text.count(args) == 1


@pytest.mark.parametrize("command", [["show", "some-run"], ["restore", "some-run", "DIR"], ["log"], ["project", "leaderboard"]])
def test_every_command_says_the_same_thing_when_there_is_no_ledger(tmp_path, command):
    out = run_cli([*(str(tmp_path / "d") if a == "DIR" else a for a in command), "--root", tmp_path])
    assert out.exit_code == 2, out.output
    assert f"no ledger here (run `cbledger init --root {tmp_path}` first)" in out.stderr  # runnable as printed
    assert not (tmp_path / "d").exists()


def test_log_refuses_a_filter_nothing_recorded_has():
    unknown_type = cli("log", "--type", "run.recordd")
    assert unknown_type.exit_code == 2 and "not an event type" in unknown_type.stderr
    unknown_task = cli("log", "--task", "no-such-task")
    assert unknown_task.exit_code == 2 and "--task no-such-task" in unknown_task.stderr
    known = cli("log", "--task", STATE.runs[SOLVE].run.task.id, "--type", "run.recorded")
    assert known.exit_code == 0 and f"run:{SOLVE}" in known.stdout


def test_restore_refuses_a_directory_with_something_in_it(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    out = cli("restore", SOLVE, tmp_path)
    assert out.exit_code != 0 and "not an empty directory" in out.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def _one_of_each_kind() -> list[str]:
    """A committed run of each kind of bundle: board, run mode, suite version, harness version,
    with or without a kept stash. `replay --verify` (CI's last step) restores every one."""
    kinds: dict[tuple, str] = {}
    for rid in SYNTHETIC:
        run = STATE.runs[rid].run
        kind = (run.fixture.id, run.run_mode, run.comparability.suite_version,
                run.comparability.copperhead_version, bool(run.sandbox.stash_sha))
        kinds.setdefault(kind, rid)
    return sorted(kinds.values())


@pytest.mark.slow
def test_a_committed_run_of_each_kind_on_a_committed_board_restores(tmp_path):
    ws = Workspace.at(REPO)
    chosen = _one_of_each_kind()
    assert len(chosen) >= 40
    for rid in chosen:
        into = tmp_path / rid
        done = inspect.restore(ws, STATE, rid, into)
        repo = pygit2.Repository(str(into))
        assert str(repo.head.target) == STATE.runs[rid].run.sandbox.head_sha == done["headSha"]
        assert not repo.is_bare


def test_show_under_results_dir_names_the_bundle_and_records_where_they_are(tmp_path):
    """Under `--results DIR`, `show` printed `results/runs/…` and `results/<date>/…`: paths of
    the project, which hold nothing of the workspace shown."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(REPO / "results" / "ledger", copy / "ledger")
    out = run_cli(["--results", copy, "show", NOOP, "--root", REPO])
    assert out.exit_code == 0, out.output
    bundle = next(line for line in out.stdout.splitlines() if line.startswith("  bundle "))
    assert f"  bundle     {copy}/runs/" in bundle, bundle
    records = [line for line in out.stdout.splitlines() if line.startswith("  record ")]
    assert records and all(f"  record     {copy}/" in line for line in records), records
    own = cli("show", NOOP)
    assert "  bundle     results/runs/" in own.stdout  # the project's own layout: as before
