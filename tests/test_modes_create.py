"""The create-mode tasks through the real copperhead 0.9.0 CLI (`copperhead create --brief …`)
against scripted model turns, one conversation per pipeline stage: each passes with its gold and
its solve session, fails with noop and with its scripted wrong answer in the expected category,
its stage transcripts are graded as one run, and every run re-grades (`replay --verify`) and
re-executes identically (`--rerun`)."""

from __future__ import annotations

import pytest

from tests.modes_project import Project

pytestmark = [pytest.mark.slow, pytest.mark.kicad, pytest.mark.copperhead]

EDIT, REFUSAL = "led-indicator-create", "led-daylight-create-refusal"
#: task → (agent, session) → (verdict, failure category)
EXPECTED = {
    EDIT: {
        ("gold", None): ("pass", None),
        ("noop", None): ("fail", "wrong-target"),
        ("copperhead", "solve"): ("pass", None),
        ("copperhead", "wrong"): ("fail", "constraint-violation"),
    },
    REFUSAL: {
        ("gold", None): ("pass", None),
        ("noop", None): ("fail", "wrong-target"),  # neither a refusal nor an edit
        ("copperhead", "solve"): ("pass", None),
        ("copperhead", "wrong"): ("fail", "constraint-violation"),
    },
}


def test_create_tasks_pass_with_a_solve_and_fail_with_noop_and_a_wrong_answer(tmp_path, kicad_cli, copperhead_cli, monkeypatch):
    monkeypatch.setenv("COPPERHEAD_CLI", str(copperhead_cli))
    project = Project(tmp_path, [EDIT, REFUSAL])
    for task, expected_by_agent in EXPECTED.items():
        for (agent, session), expected in expected_by_agent.items():
            args = ["--agent", agent, "--copperhead-cli", copperhead_cli] + (["--session", session] if session else [])
            run, grade, _ = project.run(task, *args)
            failed = [(a.id, a.detail) for a in grade.assertions if a.status == "fail"]
            assert (grade.verdict, grade.failure_category) == expected, (task, agent, session, failed)
            assert "check" in run.evidence  # the check both tasks grade was captured
            assert run.repeats_planned == 1  # the create default, recorded on the result
            if session is not None:
                assert run.run_mode == "scripted" and run.harness_failure is None
    solved = {r.task.id: r for r in project.events("run.recorded") if "scripted-solve" in r.run_id}
    # three stages ran, each its own transcript; the run is their sum and ends where the pipeline did
    edit = solved[EDIT].stats
    assert (edit.exit_path, edit.turns_used, edit.tokens_in, edit.max_turns) == ("done", 3, 7500, 36)
    assert solved[REFUSAL].stats.exit_path == "refused" and solved[REFUSAL].stats.turns_used == 2
    board = (project.root / "LEADERBOARD.md").read_text()
    assert f"| {EDIT} (create) |" in board
    result = project.cli("replay", "--verify", "--rerun")
    assert result.exit_code == 0, result.output
    assert "runs: 8 checked: 8 reproduced" in result.output
    assert "re-executed 4 run(s): 4 identical" in result.output
