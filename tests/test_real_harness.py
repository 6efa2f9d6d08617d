"""The real harness end to end: copperhead 0.9.0, driven by `cbledger run --agent copperhead`
against the loopback endpoint serving session scripts, for every bundled task.

Each test works on a copy of the repository's own suite (synthetic fixtures, the real boards
materialized from ../shared/real, tasks, suites, sessions) in a temporary project, so the runs
are exactly what a user gets, and every run is then re-graded offline by `replay --verify`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pygit2
import pytest

from tests.factories import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.kicad, pytest.mark.shared, pytest.mark.copperhead]

REPO = Path(__file__).resolve().parent.parent
REAL_BOARDS = ("antmicro-microphone-board", "openlighting-dmxsun-baseboard")
BUILD_COMMIT = "a2471b374ac1904e1a8dfc9f1b4fa6a2ef87acd8"
#: the bundled sync and create tasks, whose solve sessions their own modules run
ELSEWHERE = ("led-bom-drift-sync", "mcu-budget-dual-write-sync", "led-indicator-create", "led-daylight-create-refusal")
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "COPPERHEAD_API_KEY_ENV", "COPPERHEAD_BASE_URL", "COPPERHEAD_CLI")


@pytest.fixture
def no_keys(monkeypatch):
    for name in KEYS:
        monkeypatch.delenv(name, raising=False)


class Project:
    def __init__(self, root: Path, cli: Path, sandboxes: Path):
        self.root, self.cli_path, self.sandboxes = root, cli, sandboxes

    @property
    def ledger(self) -> Path:
        return self.root / "results" / "ledger" / "events.jsonl"

    def cli(self, *args, env: dict[str, str] | None = None):
        return run_cli([*args, "--root", self.root], env=env)

    def run(self, *args, env: dict[str, str] | None = None):
        return self.cli("run", *args, "--agent", "copperhead", "--copperhead-cli", self.cli_path,
                        "--sandbox-root", self.sandboxes, env=env)

    def events(self, type_: str) -> list:
        from cbledger.ledger.store import LedgerStore

        return [s.event.body for s in LedgerStore(self.ledger).read(types={type_})]

    def graded(self) -> dict[str, tuple]:
        """task id → (run, grade) of the runs recorded so far, latest per task."""
        grades = {g.run_id: g for g in self.events("grade.recorded")}
        return {r.task.id: (r, grades[r.run_id]) for r in self.events("run.recorded")}

    def verify(self) -> None:
        result = self.cli("replay", "--verify")
        assert result.exit_code == 0, result.output
        assert "verified: every check passed" in result.output

    def task(self, task_id: str) -> dict:
        return json.loads((self.root / "tasks" / task_id / "task.json").read_text())

    def suite_tasks(self, *names: str) -> list[str]:
        return [t for n in names for t in json.loads((self.root / "suites" / f"{n}.json").read_text())["tasks"]]


def build(tmp_path: Path, shared_real: Path, cli: Path, edit=None) -> Project:
    """A copy of the repository's suite, real boards materialized, ledger initialised and bumped.
    `edit(root)` may change the copy before the suite version is recorded."""
    root = tmp_path / "project"
    root.mkdir()
    for name in ("tasks", "suites", "sessions"):
        shutil.copytree(REPO / name, root / name)
    for fixture in (REPO / "fixtures").iterdir():
        if fixture.name in REAL_BOARDS:
            (root / "fixtures" / fixture.name).mkdir(parents=True)
            for f in ("fixture.json", "README.md"):
                shutil.copyfile(fixture / f, root / "fixtures" / fixture.name / f)
        else:
            shutil.copytree(fixture, root / "fixtures" / fixture.name)
    project = Project(root, cli, tmp_path / "sandboxes")
    for board in REAL_BOARDS:
        result = project.cli("fixture", "materialize", board, "--from", shared_real / "fixtures" / board)
        assert result.exit_code == 0, result.output
    if edit is not None:
        edit(root)
    for args in (("init",), ("suite", "bump", "--reason", "the suite as bundled", "--skip-trial")):
        result = project.cli(*args)
        assert result.exit_code == 0, result.output
    return project


def _failed(grade) -> list:
    return [(a.id, a.detail) for a in grade.assertions if a.status == "fail"]


def test_every_bundled_task_passes_with_its_solve_session(tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys):
    project = build(tmp_path, shared_real, copperhead_cli)
    bundled = project.suite_tasks("full", "real")
    assert len(bundled) == 22 and len(set(bundled)) == 22  # fifteen synthetic (four generated variants, two sync, two create), seven real
    # the sync and create tasks' solve sessions run in tests/test_modes_sync.py and
    # tests/test_modes_create.py (beside their noop and wrong answers, every run re-executed):
    # a third run of the same sessions here would be CI time spent proving nothing more
    assert {t for t in bundled if project.task(t).get("mode") in ("sync", "create")} == set(ELSEWHERE)
    tasks = [t for t in bundled if t not in ELSEWHERE]
    printed = ""
    for suite in ("full", "real"):
        chosen = [t for t in project.suite_tasks(suite) if t in tasks]
        result = project.run(*chosen, "--session", "solve", "--repeats", "1", "--jobs", "2")
        assert result.exit_code == 0, result.output
        printed += result.output
    graded = project.graded()
    assert sorted(graded) == sorted(tasks)
    for task_id, (run, grade) in graded.items():
        assert grade.verdict == "pass", (task_id, _failed(grade), run.runner_note)
        # what `cbledger run` printed: the run id, its verdict and its record
        assert f"{run.run_id}  pass  results/{run.timings.started_at:%Y-%m-%d}/compat-scripted-solve/{task_id}/run-1.json" in printed
        assert run.run_mode == "scripted" and run.model.id == "compat:scripted-solve"
        assert run.model.segment == "harness" and run.model.provider == "scripted-endpoint"
        assert run.cost.usd_micros is None and run.harness_failure is None and run.llm_cache is False
        assert run.comparability.copperhead_version == "0.9.0"
        assert run.comparability.copperhead_commit == BUILD_COMMIT
        # provenance: the OS by name, the invocation's batch, and what the endpoint said answered
        # (it echoes the requested id, so the record needs no addition for it)
        assert run.comparability.os and run.batch and f"batch {run.batch} " in printed
        assert run.provider_models == ["scripted-solve"]
        assert run.stats.tokens_in > 0  # the session's scripted usage, as copperhead summed it
        assert {"transcript", "harness-stdout", "harness-stderr"} <= set(run.evidence)
        assert json.loads(run.sandbox.seed_config)["llmCache"] is False
        if project.task(task_id).get("setup"):
            # init ran through the real CLI and its output is the baseline, not the run's diff
            assert run.setup_skipped == [] and run.sandbox.baseline_sha != run.sandbox.seed_sha
        expected = project.task(task_id)["expectedOutcome"]
        assert run.stats.exit_path == ("done" if expected == "edit" else "refused")
    # an edit commits exactly what copperhead necessarily writes beside the design
    run = graded["mcu-rename-i2c-nets"][0]
    assert "mcu-sensor.kicad_sch" in run.stats.files_touched and "docs/PINOUT.md" in run.stats.files_touched
    # ... under the project's fixed identity, never the operator's
    from cbledger.runner import preserve
    from cbledger.tasks.catalog import Catalog

    restored = preserve.restore(project.root / run.sandbox.store, run.sandbox, Catalog(project.root).fixture("synthetic-mcu-sensor"))
    head = restored.repo[run.sandbox.head_sha]
    assert head.message.startswith("copperhead: ") and head.parents[0].id == pygit2.Oid(hex=run.sandbox.baseline_sha)
    assert (head.author.name, head.author.email) == ("copperhead", "copperhead@copperbench.invalid")
    assert (head.committer.name, head.committer.email) == ("copperhead", "copperhead@copperbench.invalid")
    committed = set(_paths(head.tree, restored.repo)) - set(_paths(restored.repo[run.sandbox.baseline_sha].tree, restored.repo))
    assert {".gitignore", "openspec/changes/mcu-rename-i2c-nets/proposal.md", "openspec/changes/mcu-rename-i2c-nets/tasks.md"} <= committed
    leaderboard = (project.root / "LEADERBOARD.md").read_text()
    assert "### Real harness, scripted model" in leaderboard and "`compat:scripted-solve`" in leaderboard.split("### Real harness")[1]
    assert len({run.batch for run, _ in graded.values()}) == 2  # one batch per `cbledger run`
    environment = leaderboard.split("### Reference environment")[1].split("\n### ")[0]
    assert f"| `9.0.8` | `0.9.0` | `{BUILD_COMMIT}` |" in environment and graded["mcu-rename-i2c-nets"][0].comparability.os in environment
    assert "## What these numbers do not claim" in leaderboard and "Provider-named model ids" not in leaderboard
    project.verify()


def test_a_provider_that_names_another_model_is_recorded_and_shown(
    tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys
):
    project = build(tmp_path, shared_real, copperhead_cli)
    session = json.loads((project.root / "tasks" / "led-current-refusal" / "sessions" / "solve.json").read_text())
    session["model"] = "refuser-2026-07-01"  # what the endpoint's answers name
    path = tmp_path / "dated.json"
    path.write_text(json.dumps(session))
    result = project.run("led-current-refusal", "--session", str(path), "--repeats", "1")
    assert result.exit_code == 0, result.output
    run, grade = project.graded()["led-current-refusal"]
    assert run.model.id == "compat:scripted-dated" and run.provider_models == ["refuser-2026-07-01"]
    assert grade.verdict == "pass"
    record = next((project.root / "results").glob("20*/compat-scripted-dated/led-current-refusal/run-1.json"))
    assert json.loads(record.read_text())["providerModels"] == ["refuser-2026-07-01"]
    board = (project.root / "LEADERBOARD.md").read_text()
    # what a session script names is not a provider's naming: kept on the run, never in that table
    assert "Provider-named model ids that differ" not in board and "refuser-2026-07-01" not in board
    project.verify()


EXPECTED_CATEGORY = {
    # a model that claims it is done without doing anything: neither a refusal nor an edit (the
    # changelog entry and .gitignore line copperhead's commit step writes are not the model's
    # edit since grader 1.4.0; under 1.3.0 they made this a constraint-violation)
    "idle": {"edit": "wrong-target", "refusal": "wrong-target", "flag": "wrong-target"},
    # a model that refuses everything without giving a reason
    "refuse-blind": {"edit": "false-refusal", "refusal": "wrong-target", "flag": "wrong-target"},
}


def test_sessions_that_do_nothing_or_the_wrong_thing_fail_with_the_right_category(
    tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys
):
    project = build(tmp_path, shared_real, copperhead_cli)
    # the category follows from the task's mode, expected outcome and board, not from the task
    # itself: one task of each such kind (the gold/noop trial of every bundled task runs at each
    # suite bump). A create task's pipeline answers per stage: its wrong and noop runs are
    # tests/test_modes_create.py's.
    kinds: dict[tuple[str, str, bool], str] = {}
    for t in project.suite_tasks("full", "real"):
        task = project.task(t)
        if task["mode"] != "create":
            real = Path(task["fixture"]["path"]).name in REAL_BOARDS
            kinds.setdefault((task["mode"], task["expectedOutcome"], real), t)
    tasks = sorted(kinds.values())
    assert len(tasks) == 7  # do edit/refusal/flag on synthetic and real boards, sync edit
    for session in EXPECTED_CATEGORY:
        result = project.run(*tasks, "--session", str(project.root / "sessions" / f"{session}.json"),
                             "--repeats", "1", "--jobs", "2")
        assert result.exit_code == 0, result.output
    grades = {g.run_id: g for g in project.events("grade.recorded")}
    seen = set()
    for run in project.events("run.recorded"):
        session = run.model.id.removeprefix("compat:scripted-")
        expected = EXPECTED_CATEGORY[session][run.task.expected_outcome]
        grade = grades[run.run_id]
        assert (grade.verdict, grade.failure_category) == ("fail", expected), (run.task.id, session, _failed(grade))
        assert run.harness_failure is None  # the scripted model answered: this is the model's failure
        seen.add((run.task.id, session))
    assert len(seen) == 2 * len(tasks)
    project.verify()


def _copperhead_processes(marker: str) -> list[int]:
    """Live processes whose command line names `marker` (a sandbox path of this test)."""
    out = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                stat = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()
                if stat[0] != "Z":
                    out.append(int(cmdline.parent.name))
        except OSError:
            continue
    return out


def _paths(tree, repo, prefix: str = ""):
    for entry in tree:
        if entry.type_str == "tree":
            yield from _paths(repo[entry.id], repo, f"{prefix}{entry.name}/")
        else:
            yield f"{prefix}{entry.name}"


def _small_wall_clock(root: Path) -> None:
    task = root / "tasks" / "led-current-refusal" / "task.json"
    data = json.loads(task.read_text())
    data["caps"]["wallClockSec"] = 4
    task.write_text(json.dumps(data, indent=2) + "\n")


def _propose_then_loop(path: Path) -> Path:
    """The bundled loop, after a first turn that writes a change proposal: the run has work
    (the proposal files) for copperhead to stash when it fails."""
    loop = json.loads((REPO / "sessions" / "loop.json").read_text())
    first = {"turn": {"text": "Proposing first.", "toolCalls": [{"name": "propose_change", "args": {
        "id": "brighter", "why": "w", "what_changes": "- R1", "tasks": "- [ ] edit"}}], "usage": {"in": 900, "out": 40}}}
    loop["exchanges"].insert(0, first)
    loop["name"] = "propose-then-loop"
    path.write_text(json.dumps(loop))
    return path


def test_a_turn_limit_loop_and_a_wall_clock_loop_end_the_way_their_caps_say(
    tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys
):
    project = build(tmp_path, shared_real, copperhead_cli, edit=_small_wall_clock)
    loop = str(project.root / "sessions" / "loop.json")
    proposing = str(_propose_then_loop(tmp_path / "propose-then-loop.json"))
    result = project.run("led-resistor-swap", "--session", proposing, "--repeats", "1", "--max-turns", "3")
    assert result.exit_code == 0, result.output
    result = project.run("led-current-refusal", "--session", loop, "--repeats", "1")
    assert result.exit_code == 0, result.output
    graded = project.graded()

    run, grade = graded["led-resistor-swap"]
    # the harness's own turn limit: it ends the run itself, with run-end
    assert run.stats.exit_path == "turn-budget-exhausted" and run.stats.turns_used == 3 and run.runner_exit is None
    assert run.ablations.max_turns == 3
    assert (grade.verdict, grade.failure_category) == ("fail", "turn-budget")
    # copperhead stashed the failed run's work before rolling back; the stash is preserved
    assert run.sandbox.stash_sha is not None
    from cbledger.runner import preserve
    from cbledger.tasks.catalog import Catalog

    restored = preserve.restore(project.root / run.sandbox.store, run.sandbox, Catalog(project.root).fixture("synthetic-led-resistor"))
    stash_tree = restored.repo[run.sandbox.stash_sha].peel(pygit2.Tree)
    assert "openspec/changes/brighter/proposal.md" in set(_paths(stash_tree, restored.repo))

    run, grade = graded["led-current-refusal"]
    # the runner's wall clock: the whole process group is killed, the run still kept and graded
    assert run.runner_exit == "cap-exceeded" and "4s wall-clock cap" in run.runner_note
    assert run.stats.exit_path == "cap-exceeded" and run.stats.turns_used >= 1
    assert run.timings.agent_ms >= 4000  # never killed before its cap
    assert (grade.verdict, grade.failure_category) == ("fail", "turn-budget")
    assert run.harness_failure is None  # the loop answered turns: the model ran out of time
    assert run.cost.usd_micros is None  # unknown spend is null, never zero
    assert _copperhead_processes(str(project.sandboxes)) == []
    project.verify()


def test_sigint_mid_run_writes_nothing_and_stops_the_harness(tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys):
    project = build(tmp_path, shared_real, copperhead_cli)
    before = project.ledger.read_bytes()
    cbledger = Path(sys.executable).parent / "cbledger"
    proc = subprocess.Popen(
        [str(cbledger), "run", "led-current-refusal", "--agent", "copperhead", "--copperhead-cli", str(copperhead_cli),
         "--session", str(project.root / "sessions" / "loop.json"), "--repeats", "1",
         "--sandbox-root", str(project.sandboxes), "--root", str(project.root)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        env={k: v for k, v in os.environ.items() if k not in KEYS},
    )
    try:
        deadline = time.monotonic() + 600  # a busy CI machine has taken over a minute to get here
        while time.monotonic() < deadline:  # until the scripted model has answered at least twice
            transcripts = list(project.sandboxes.glob("*/.copperhead/runs/*/transcript.jsonl"))
            if transcripts and transcripts[0].read_text().count('"type":"assistant"') >= 2:
                break
            time.sleep(0.2)
        else:
            pytest.fail("the harness never got going")
        assert _copperhead_processes(str(project.sandboxes))
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0
    assert project.ledger.read_bytes() == before  # nothing of the interrupted run was written
    runs = project.root / "results" / "runs"
    assert not runs.exists() or list(runs.iterdir()) == []
    assert _copperhead_processes(str(project.sandboxes)) == []


def test_runs_the_harness_ended_before_the_model_are_not_the_models(
    tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys
):
    project = build(tmp_path, shared_real, copperhead_cli)
    # an OpenAI-route model with no key: refused before any run (it used to be recorded as a
    # run that never reached the model; test_money_routes covers the preflight)
    result = project.run("led-current-refusal", "--model", "acme-m1", "--segment", "api-cheap", "--repeats", "1")
    assert result.exit_code == 2 and "needs $OPENAI_API_KEY, which is not set" in result.output
    assert project.events("run.recorded") == []
    # a compat endpoint nobody listens on: the wire breaks at the first model call (provider-transport)
    result = project.run("led-resistor-swap", "--model", "compat:nobody", "--segment", "open-weight-hosted", "--repeats", "1",
                         env={"COPPERHEAD_BASE_URL": "http://127.0.0.1:9/v1"})
    assert result.exit_code == 0, result.output
    graded = project.graded()
    nobody, _ = graded["led-resistor-swap"]
    assert (nobody.harness_failure.kind, nobody.harness_failure.turn) == ("provider-transport", 1)  # the connection refused
    for run, grade in graded.values():
        assert grade.verdict == "fail" and run.cost.usd_micros is None
    board = (project.root / "LEADERBOARD.md").read_text()
    section = board.split("### Runs ended by the harness or its environment")[1].split("###")[0]
    assert "`compat:nobody`" in section
    # no model row: the model appears only in its environment-failure rate, then in the list
    before, rates = board.split("### Environment failures by model and route")
    assert "| `compat:nobody`" not in before
    rates = rates.split("### Runs ended by the harness or its environment")[0]
    assert "| `compat:nobody` | openai-compat | 100.0% (1/1) | provider-transport 1 |" in rates
    project.verify()


def test_a_build_patched_in_place_is_not_the_release_and_has_rows_of_its_own(
    tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys,
):
    """A harness developer checking a patched build against the solve session: its runs were
    stamped as the release's commit, LEADERBOARD.md pooled them with the release's, and the same
    command again said only `0 to run`."""
    project = build(tmp_path, shared_real, copperhead_cli)
    task = "led-resistor-swap"
    released = project.run(task, "--session", "solve", "--repeats", "1", "--campaign", "check")
    assert released.exit_code == 0, released.output
    install = Path(copperhead_cli).resolve().parents[3]
    shutil.copytree(install, tmp_path / "patched", symlinks=True)
    patched = tmp_path / "patched" / Path(copperhead_cli).resolve().relative_to(install)
    patched.write_text(patched.read_text() + "\n// patched in place\n")

    def run(campaign: str):
        return project.cli("run", task, "--agent", "copperhead", "--copperhead-cli", patched, "--session", "solve",
                           "--repeats", "1", "--campaign", campaign, "--sandbox-root", project.sandboxes)

    again = run("check")
    assert again.exit_code == 0, again.output
    assert "1 of 1 slot(s) recorded, 0 to run" in again.output
    assert (f"note: campaign check's runs were made with copperhead 0.9.0 {BUILD_COMMIT[:7]}; this CLI is 0.9.0 "
            "commit unknown: give its runs a campaign of their own (--campaign NAME)") in again.output
    other = run("patched")
    assert other.exit_code == 0, other.output
    assert [r.comparability.copperhead_commit for r in project.events("run.recorded")] == [BUILD_COMMIT, None]
    scripted = (project.root / "LEADERBOARD.md").read_text().split("### Real harness, scripted model")[1].split("\n### ")[0]
    rows = [line for line in scripted.splitlines() if f" | {task} | " in line]
    assert len(rows) == 2 and any(f"`0.9.0 {BUILD_COMMIT[:7]}`" in r and "| 1/1 |" in r for r in rows), rows
    assert any("`0.9.0 commit unknown`" in r and "| 1/1 |" in r for r in rows), rows
