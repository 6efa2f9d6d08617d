"""Feedback passes through the real harness: copperhead 0.9.0 against the loopback endpoint.

`sessions/led-resistor-swap-two-pass.json` refuses led-resistor-swap on a budget it never
checked (pass 1 fails, a false refusal); told the hints, it makes the change (pass 2 passes).
Each pass is a run of its own, graded, preserved and re-graded by `replay --verify`; only pass 1
is a record and a headline row.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pygit2
import pytest

from cbledger.projections import leaderboard, passes_part
from cbledger.projections.writers import load_state
from cbledger.runner import preserve
from cbledger.runner.endpoint import script
from cbledger.tasks.catalog import Catalog
from tests.test_real_harness import build, no_keys  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.slow, pytest.mark.kicad, pytest.mark.shared, pytest.mark.copperhead]

REPO = Path(__file__).resolve().parent.parent
SESSION = "sessions/led-resistor-swap-two-pass.json"
TASK = "led-resistor-swap"


def _transcript(project, run) -> list[dict]:
    restored = preserve.restore(project.root / run.sandbox.store, run.sandbox,
                                Catalog(project.root).fixture("synthetic-led-resistor"))
    entry = restored.repo[run.sandbox.capture_sha].peel(pygit2.Tree) / run.evidence["transcript"].path
    return [json.loads(line) for line in restored.repo[entry.id].data.decode().splitlines()]


def test_a_run_that_fails_pass_1_passes_pass_2_and_both_replay(tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys):  # noqa: F811
    project = build(tmp_path, shared_real, copperhead_cli)
    result = project.run(TASK, "--session", str(project.root / SESSION), "--passes", "2", "--repeats", "1")
    assert result.exit_code == 0, result.output
    runs = project.events("run.recorded")
    grades = {g.run_id: g for g in project.events("grade.recorded")}
    assert len(runs) == 2
    first, second = runs
    assert (first.passes.index, first.passes.allowed, first.passes.first, first.passes.hints) == (1, 2, None, [])
    assert (second.passes.index, second.passes.allowed) == (2, 2)
    assert second.passes.first == first.run_id == second.passes.previous
    # a run in a campaign: pass k's id is its slot's with `-p<k>`, no suffix (runner.passes.pass_run_id)
    assert first.campaign and second.campaign == first.campaign and second.run_id == first.run_id + "-p2"
    assert grades[first.run_id].verdict == "fail" and grades[first.run_id].failure_category == "false-refusal"
    assert grades[second.run_id].verdict == "pass", [(a.id, a.detail) for a in grades[second.run_id].assertions if a.status == "fail"]
    assert "pass 1/2: fail (false-refusal)" in result.output and "pass 2/2: pass" in result.output
    # one sandbox, one baseline, each pass its own bundle and transcript
    assert first.sandbox.baseline_sha == second.sandbox.baseline_sha
    assert first.sandbox.store != second.sandbox.store
    assert first.evidence["transcript"].path != second.evidence["transcript"].path
    # the refusal committed nothing, so nothing was carried over; its run record stays untracked
    assert second.passes.carried_over is False
    # pass 2 was told the request and the hints, and no hint says what is expected
    hints = second.passes.hints
    assert hints and any("`refused`" in h for h in hints)
    for expected in ("680", "0805", "R_0805_2012Metric", "led_current_ma", "+5V"):
        assert not any(expected in h for h in hints), (expected, hints)
    start = next(e for e in _transcript(project, second) if e["type"] == "run-start")
    request = start["data"]["request"]
    assert "The request: " + project.task(TASK)["request"]["prompt"] in request
    assert all(f"- {h}" in request for h in hints)
    # pass 1 alone is a record and a headline row; the passes section shows both
    records = sorted(p.name for p in (project.root / "results").glob(f"20*/compat-scripted-led-resistor-swap-two-pass/{TASK}/*.json"))
    assert records == ["run-1.json"]
    board = (project.root / "LEADERBOARD.md").read_text()
    section = board.split(f"## {passes_part.TITLE}")[1].split("\n## ")[0]
    assert "| `compat:scripted-led-resistor-swap-two-pass` | scripted | 1 | 2 | 0.0% (0/1) | 100.0% (1/1) | 2.00 |" in section
    # the later pass moves nothing above the section: the same file without it, up to the section
    state = load_state(project.ledger)
    assert second.run_id in state.later_passes and second.run_id not in state.runs
    # each pass's page shows every pass's verdict: a change to one is a change to both pages
    from cbledger.projections.site.render import with_attempts

    assert with_attempts(state, {second.run_id}) == with_attempts(state, {first.run_id}) == {first.run_id, second.run_id}
    without = msgspec.structs.replace(state, later_passes={}, grades={k: v for k, v in state.grades.items() if k != second.run_id})
    head = leaderboard.render(state).split(f"## {passes_part.TITLE}")[0]
    assert head == leaderboard.render(without).split(f"## {passes_part.TITLE}")[0]
    # a later pass is shown and restored like any run
    shown = project.cli("show", second.run_id, "--json")
    assert shown.exit_code == 0, shown.output
    doc = json.loads(shown.output)
    assert doc["verdict"] == "pass" and doc["passes"]["index"] == 2 and doc["passes"]["first"] == first.run_id
    restored = project.cli("restore", second.run_id, str(tmp_path / "pass-2"))
    assert restored.exit_code == 0, restored.output
    assert (tmp_path / "pass-2" / "led-indicator.kicad_sch").read_text().count('"680"') >= 1
    # a later pass is re-executed by re-executing its attempt up to it, each pass its own cassette
    rerun = project.cli("rerun", second.run_id, env={"COPPERHEAD_CLI": str(copperhead_cli)})
    assert rerun.exit_code == 0, rerun.output
    assert f"{second.run_id}  identical  (strict; outcome unchanged: pass/done -> pass/done)" in rerun.output
    # replay re-grades both passes' end states
    project.verify()
    checked = project.cli("replay", "--verify", "--run", second.run_id, "--json")
    assert checked.exit_code == 0, checked.output
    report = json.loads(checked.output)
    assert [(r["runId"], r["status"]) for r in report["runs"]["results"]] == [(second.run_id, "reproduced")]


def test_passes_are_capped_by_the_task_and_one_without_the_flag(tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys):  # noqa: F811
    def no_allowance(root):
        (root / "tasks" / "passes.json").unlink()

    project = build(tmp_path, shared_real, copperhead_cli, edit=no_allowance)
    session = str(project.root / SESSION)
    result = project.run(TASK, "--session", session, "--passes", "3", "--repeats", "1")
    assert result.exit_code == 0, result.output
    result = project.run(TASK, "--session", session, "--repeats", "1")
    assert result.exit_code == 0, result.output
    runs = project.events("run.recorded")
    # a task that allows one pass gets one, asked for three or not asked; no pass is stamped on it
    assert len(runs) == 2 and all(r.passes is msgspec.UNSET for r in runs)
    assert passes_part.TITLE not in (project.root / "LEADERBOARD.md").read_text()


def test_a_rolled_back_pass_is_carried_into_the_next_as_the_runners_commit(tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys):  # noqa: F811
    """Pass 1 edits the schematic and loses its provider (the script ends), so copperhead stashes
    the edit and rolls back; the runner commits the stash for pass 2, which finishes the rest."""
    project = build(tmp_path, shared_real, copperhead_cli)
    solve = json.loads((project.root / "tasks" / TASK / "sessions" / "solve.json").read_text())
    read, propose, schematic, board, docs, verify, finish = solve["exchanges"]
    again = json.loads(json.dumps(propose))
    again["turn"]["toolCalls"][0]["args"]["id"] = "led-resistor-swap-rest"
    session = {
        "format": "cbledger-session/1", "name": "rolled-back", "task": TASK,
        "exchanges": [read, propose, schematic],  # the fourth request is refused: provider-error
        "passes": [{"exchanges": [read, again, board, docs, verify, finish]}],
    }
    path = tmp_path / "rolled-back.json"
    path.write_text(json.dumps(session))
    result = project.run(TASK, "--session", str(path), "--passes", "2", "--repeats", "1")
    assert result.exit_code == 0, result.output
    first, second = project.events("run.recorded")
    grades = {g.run_id: g for g in project.events("grade.recorded")}
    assert first.stats.exit_path == "provider-error" and first.sandbox.stash_sha is not None
    assert grades[first.run_id].verdict == "fail"
    assert second.passes.carried_over is True and second.passes.index == 2
    # everything holds but the commit count: the runner's carry-over commit is one of two
    failed = [a.id for a in grades[second.run_id].assertions if a.status == "fail"]
    assert failed == ["one-commit"], [(a.id, a.detail) for a in grades[second.run_id].assertions if a.status == "fail"]
    restored = preserve.restore(project.root / second.sandbox.store, second.sandbox,
                                Catalog(project.root).fixture("synthetic-led-resistor"))
    head = restored.repo[second.sandbox.head_sha]
    carried = head.parents[0]
    assert head.message.startswith("copperhead: ") and carried.message.startswith("runner: the work of pass 1")
    assert str(carried.parents[0].id) == second.sandbox.baseline_sha
    changed = {d.delta.new_file.path for d in restored.repo.diff(carried.parents[0], carried)}
    assert "led-indicator.kicad_sch" in changed and not any(p.startswith(".copperhead/runs/") for p in changed)
    project.verify()


def test_copperhead_repl_does_not_read_a_second_message_from_stdin(tmp_path, copperhead_cli, kicad_cli, no_keys):  # noqa: F811
    """Why a later pass is a new `copperhead do`: with stdin not a terminal, `repl` runs the
    request on its command line and exits, never reading the next message written to it."""
    import shutil
    import subprocess

    from cbledger.runner.agents.copperhead import basic_environment, locate
    from cbledger.runner.endpoint.server import Endpoint

    repo = tmp_path / "repo"
    shutil.copytree(REPO / "fixtures" / "synthetic-led-resistor" / "tree", repo)
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "seed"]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    cli = locate(str(copperhead_cli), REPO)
    with Endpoint() as endpoint:
        url = endpoint.serve("repl", script.load(REPO / "sessions" / "idle.json"))
        done = subprocess.run(
            cli.command("--repo", str(repo), "--plain", "repl", "first message", "--model", "compat:scripted"),
            input="second message: change R1\n/quit\n", capture_output=True, text=True, timeout=300,
            env={**basic_environment(), "COPPERHEAD_BASE_URL": url},
        )
        served = endpoint.served("repl")
    assert done.returncode == 0, done.stdout + done.stderr
    runs = sorted((repo / ".copperhead" / "runs").iterdir())
    assert len(served) == 1 and len(runs) == 1  # one request, one run: the second message was never read
    start = json.loads((runs[0] / "transcript.jsonl").read_text().splitlines()[0])
    assert start["type"] == "run-start" and start["data"]["request"] == "first message"
