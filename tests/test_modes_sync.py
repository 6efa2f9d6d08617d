"""The sync-mode tasks through the real copperhead 0.9.0 CLI (`copperhead sync --model …`) against
scripted model turns: each passes with its gold and its solve session, fails with noop and with
its scripted wrong answer in the expected category, and every run re-grades (`replay --verify`)
and re-executes identically (`--rerun`). A check-mode task is refused by name."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.modes_project import Project

pytestmark = [pytest.mark.slow, pytest.mark.kicad, pytest.mark.copperhead]

SYNC_TASKS = ["led-bom-drift-sync", "mcu-budget-dual-write-sync"]
#: (agent, session) → (verdict, failure category)
EXPECTED = {
    ("gold", None): ("pass", None),
    ("noop", None): ("fail", "wrong-target"),
    ("copperhead", "solve"): ("pass", None),
    ("copperhead", "wrong"): ("fail", "wrong-target"),
}


def test_sync_tasks_pass_with_a_solve_and_fail_with_noop_and_a_wrong_answer(tmp_path, kicad_cli, copperhead_cli, monkeypatch):
    monkeypatch.setenv("COPPERHEAD_CLI", str(copperhead_cli))
    project = Project(tmp_path, [*SYNC_TASKS, "led-resistor-swap"])
    for task in SYNC_TASKS:
        for (agent, session), expected in EXPECTED.items():
            args = ["--agent", agent, "--copperhead-cli", copperhead_cli] + (["--session", session] if session else [])
            run, grade, outcomes = project.run(task, *args)
            failed = [(a.id, a.detail) for a in grade.assertions if a.status == "fail"]
            assert (grade.verdict, grade.failure_category) == expected, (task, agent, session, failed)
            assert "check" in run.evidence  # the check sync tasks grade was captured
            if session is not None:
                # the harness ran sync's resolve phase, not a do run
                assert run.run_mode == "scripted" and outcomes["sync-resolve-ran"][0] == "pass"
                assert run.stats.exit_path == "done" and run.harness_failure is None
    gold = [g for g in project.events("grade.recorded") if "harness-gold" in g.run_id]
    assert {a.detail for g in gold for a in g.assertions if a.id == "copperhead-check"} == {"`copperhead check` exited 0"}
    # a do task beside them: LEADERBOARD.md and the site show the mode and the per-mode diagnostic
    project.run("led-resistor-swap", "--agent", "copperhead", "--session", "solve", "--copperhead-cli", copperhead_cli)
    board = (project.root / "LEADERBOARD.md").read_text()
    modes = board.split("### Task modes (diagnostic; pooled over tiers by run)")[1].split("\n### ")[0]
    assert "| `compat:scripted-solve` | scripted | do | 1 | 1 | - |" in modes
    assert "| `compat:scripted-solve` | scripted | sync | 2 | 2 | - |" in modes
    assert "| `compat:scripted-wrong` | scripted | sync | 2 | 0 | wrong-target 2 |" in modes
    assert "| simple | led-bom-drift-sync (sync) | edit |" in board and "| medium | led-resistor-swap | edit |" in board
    site = (project.root / "results" / "site" / "index.html").read_text()
    assert '<td><a href="tasks/led-bom-drift-sync.html">led-bom-drift-sync</a> (sync)</td>' in site and "<td>compat:scripted-wrong</td><td>scripted</td><td>sync</td>" in site
    # two re-executions at once: the results are listed in the ledger's order whichever ends first
    result = project.cli("replay", "--verify", "--rerun", "--jobs", "2")
    assert result.exit_code == 0, result.output
    assert "runs: 9 checked: 9 reproduced" in result.output
    assert "re-executed 5 run(s): 5 identical" in result.output
    listed = [line.split()[0] for line in result.stdout.splitlines() if "  identical  (strict" in line]
    recorded = [r.run_id for r in project.events("run.recorded")]
    assert listed == [r for r in recorded if r in listed] and len(listed) == 5


def _as_mode(root, mode: str, request: dict) -> None:
    source = root / "tasks" / "led-bom-drift-sync"
    target = root / "tasks" / f"led-bom-drift-{mode}"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("sessions"))
    task = json.loads((target / "task.json").read_text())
    task.update(id=target.name, mode=mode, request=request)
    (target / "task.json").write_text(json.dumps(task, indent=2) + "\n")


def test_check_tasks_are_refused_by_name(tmp_path, kicad_cli, copperhead_cli):
    def edit(root):
        _as_mode(root, "check", {})

    project = Project(tmp_path, SYNC_TASKS[:1], edit=edit)
    result = project.cli("run", "led-bom-drift-check", "--agent", "copperhead",
                         "--session", project.root / "sessions" / "idle.json",
                         "--copperhead-cli", copperhead_cli, "--sandbox-root", project.sandboxes)
    assert result.exit_code == 2
    assert "error: --agent copperhead drives only `do`, `sync` and `create` tasks; not: led-bom-drift-check (" in result.stderr
    assert "check makes no model call" in result.stderr
    assert project.events("run.recorded") == []


def test_a_sync_task_has_memorization_variants_that_its_sessions_still_solve(tmp_path, kicad_cli, copperhead_cli, monkeypatch):
    monkeypatch.setenv("COPPERHEAD_CLI", str(copperhead_cli))
    project = Project(tmp_path, SYNC_TASKS[:1])
    made = project.cli("task", "variant", SYNC_TASKS[0])
    assert made.exit_code == 0, made.output
    assert "trial led-bom-drift-sync-v1: gold pass" in made.output and "noop fail" in made.output
    variant = json.loads((project.root / "tasks" / "led-bom-drift-sync-v1" / "task.json").read_text())
    assert variant["mode"] == "sync" and variant["variantOf"] == SYNC_TASKS[0]
    project.bump("the variant")
    _, grade, outcomes = project.run("led-bom-drift-sync-v1", "--agent", "copperhead", "--session", "solve",
                                     "--copperhead-cli", copperhead_cli)
    assert grade.verdict == "pass", [(a.id, a.detail) for a in grade.assertions if a.status == "fail"]
    assert outcomes["copperhead-check"] == ("pass", "`copperhead check` exited 0")
