"""Campaigns: one plan, however many invocations it takes. The ledger refuses a slot recorded
twice; the same command again runs only the missing slots; repeats continue across campaigns;
a campaign interrupted every way a driver meets in the field (the driver, a worker and the
scheduler SIGKILLed, the PostgreSQL server restarted, the provider out) and then resumed ends with exactly the slots an uninterrupted one has, none
twice, every acknowledged run kept, `replay --verify` passing.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec
import psutil
import psycopg
import pytest

from cbledger.errors import ConflictError, UserError
from cbledger.ledger.events import RunRecorded, RunRecordedEvent
from cbledger.ledger.postgres import PostgresRecorder, split_url
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.verify import verify_chain
from cbledger.projections.metrics import suite_metrics
from cbledger.projections.writers import load_state
from cbledger.runner import campaign as campaign_mod
from cbledger.runner import isolation, leftovers
from cbledger.runner.endpoint import script
from cbledger.runner.endpoint.server import Endpoint
from cbledger.runner.ledger_view import read as read_view
from cbledger.workspace import Workspace
from tests.dask_cluster import Cluster
from tests.factories import run_cli
from tests.postgres import drop, ledger_url, own_server
from tests.test_runner_dask import new_ledger, project

pytestmark = [pytest.mark.kicad]

CLI = [sys.executable, "-c", "from cbledger.cli.app import main; main()"]
TASKS = ["led-resistor-swap", "mcu-add-decoupling-cap"]
#: the campaign's slow model: each task's own solving session, its first answer 2.5 s in coming
SLOW = "slow"
#: what a run on the cluster is waited for at most
WAIT = 120.0


def runs(ledger: Path | str) -> list[RunRecorded]:
    return [s.event.body for s in LedgerStore(ledger).read(types={"run.recorded"})]


def slots(ledger: Path | str) -> list[tuple[str, int, int]]:
    """(task, slot, repeat) of each run, as recorded: a slot twice would show twice."""
    out = []
    for run in runs(ledger):
        assert not isinstance(run.campaign, msgspec.UnsetType), run.run_id
        out.append((run.task.id, run.campaign.slot, run.repeat))
    return sorted(out)


def planned_slots(root: Path, ledger: Path | str, *args: str) -> list[tuple[str, int, int]]:
    """The slots of the campaign as a dry run lists them: what an uninterrupted run records."""
    shown = run_cli(["run", *args, "--dry-run", "--json", "--root", root, "--ledger", ledger])
    assert shown.exit_code == 0, shown.output
    return sorted((r["task"], r["slot"], r["repeat"]) for r in json.loads(shown.stdout)["runs"])


def wait_for(what: str, check, seconds: float = WAIT, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert proc is None or proc.poll() is None, f"the driver ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within {seconds:.0f} s"
        time.sleep(0.05)


def verified(root: Path, ledger: Path | str) -> None:
    assert verify_chain(ledger).ok
    checked = run_cli(["replay", "--verify", "--no-projections", "--root", root, "--ledger", ledger])
    assert checked.exit_code == 0, checked.output


# --------------------------------------------------------------------------- the ledger's refusal


def test_a_gold_run_without_the_copperhead_cli_is_warned_of_before_it_runs(tmp_path: Path, kicad_cli: str, monkeypatch) -> None:
    """A gold run of a task that `copperhead check`s its end state was recorded failing on it,
    with nothing said until the leaderboard read "gold failed: the task may not be solvable"."""
    monkeypatch.delenv("COPPERHEAD_CLI", raising=False)
    root = project(tmp_path)
    ledger = new_ledger(root, "no-cli")
    r = run_cli(["run", TASKS[0], "--agent", "gold", "--repeats", "1", "--root", root, "--ledger", ledger])
    assert r.exit_code == 0, r.output
    assert f"warning: no copperhead CLI here, and task(s) {TASKS[0]} need it" in r.stderr, r.stderr
    assert [run.task.id for run in runs(ledger)] == [TASKS[0]]


def test_a_run_preflight_refuses_keeps_no_campaign_plan(tmp_path: Path, kicad_cli: str) -> None:
    """A first run on a ledger with no suite version is refused, and the refusal writes nothing:
    not the campaign's plan either, which would name a suite version no run was made under."""
    root = project(tmp_path)
    ledger = root / "fresh.jsonl"
    assert run_cli(["init", "--name", "fresh", "--root", root, "--ledger", ledger]).exit_code == 0
    before = ledger.read_bytes()
    refused = run_cli(["run", TASKS[0], "--agent", "gold", "--repeats", "1", "--root", root, "--ledger", ledger])
    assert refused.exit_code == 2, refused.output
    assert refused.stderr.strip() == ("error: no suite version is recorded in the ledger; run "
                                      f"`cbledger suite bump --reason 'initial suite' --ledger {ledger} --root {root}`")
    assert ledger.read_bytes() == before
    assert sorted(p.name for p in root.iterdir()) == ["fixtures", "fresh.jsonl", "suites", "tasks"]


@pytest.mark.parametrize("args, refusal", [
    (["--agent", "gold", "--max-cost-usd", "1"], "runs of the gold agent cost nothing by rule"),
    (["--agent", "copperhead", "--model", "compat:unpriced"], "model compat:unpriced is not in the latest price table"),
    (["--agent", "copperhead", "--model", "compat:unpriced", "--segment", "open-weight-hosted", "--max-cost-usd", "1"],
     "no token price for compat:unpriced"),
], ids=["limit-on-gold", "unpriced", "limit-on-unpriced"])
def test_a_refusal_of_the_model_or_its_money_limits_keeps_no_campaign_plan(
    tmp_path: Path, kicad_cli: str, args: list[str], refusal: str
) -> None:
    """These were refused once the campaign's plan and lock were written (a limit on the scripted
    agents not at all: it ran, unenforced)."""
    root = project(tmp_path)
    ledger = new_ledger(root, "money")
    before = ledger.read_bytes()
    refused = run_cli(["run", TASKS[0], "--repeats", "1", *args, "--root", root, "--ledger", ledger])
    assert refused.exit_code == 2 and refusal in refused.stderr, refused.output
    assert ledger.read_bytes() == before
    assert not (root / "results" / "campaigns").exists() and not (root / "results" / "runs").exists()


def test_a_task_whose_id_differs_from_its_directory_is_refused_even_as_a_draft(tmp_path: Path, kicad_cli: str) -> None:
    """`validate` and the bump named it, but `run DIR --draft` ran, and recorded, the task its id names."""
    root = project(tmp_path)
    shutil.copytree(root / "tasks" / TASKS[0], root / "tasks" / "copied-task")
    for extra in (["--draft"], []):
        refused = run_cli(["run", "copied-task", "--agent", "gold", "--repeats", "1", *extra, "--root", root])
        assert refused.exit_code == 2, refused.output
        assert refused.stderr.splitlines()[-1] == (f"error: {root / 'tasks' / 'copied-task' / 'task.json'}: id: {TASKS[0]!r} "
                                                   "differs from its directory name 'copied-task'")
    assert not (root / "results" / "runs").exists()


def test_a_draft_stopped_by_another_half_written_task_says_why_and_how_to_go_on(tmp_path: Path, kicad_cli: str) -> None:
    """A misspelled field in one task stopped every other task's draft with the decoder's words
    alone, naming a file the author was not drafting."""
    root = project(tmp_path)
    shutil.copytree(root / "tasks" / TASKS[0], root / "tasks" / "half-written")
    manifest = root / "tasks" / "half-written" / "task.json"
    manifest.write_text(manifest.read_text().replace(f'"id": "{TASKS[0]}"', '"id": "half-written"')
                        .replace('"expectedOutcome"', '"expectedOutcom"'))
    scratch = tmp_path / "draft"
    refused = run_cli(["--results", scratch, "run", TASKS[0], "--agent", "gold", "--repeats", "1", "--draft", "--root", root])
    assert refused.exit_code == 2, refused.output
    last = refused.stderr.splitlines()[-1]
    assert last.startswith(f"error: {manifest}: Object contains unknown field `expectedOutcom`; a draft records every task"), last
    assert "move its task aside, to draft the others" in last and "validate" in last, last
    assert not scratch.exists() or not any(scratch.iterdir())


def test_a_ledger_edited_in_place_is_refused_before_anything_runs_or_is_appended(tmp_path: Path, kicad_cli: str) -> None:
    """`run` ran on a ledger with a byte changed at seq 2, appended its run on top of the broken
    chain, and only then failed, in the projections, without saying the run was recorded."""
    root = project(tmp_path)
    ledger = new_ledger(root, "edited")
    lines = ledger.read_bytes().splitlines(keepends=True)
    assert b"under test" in lines[1]
    ledger.write_bytes(lines[0] + lines[1].replace(b"under test", b"under tesT") + b"".join(lines[2:]))
    before = ledger.read_bytes()
    for args in (["run", TASKS[0], "--agent", "gold", "--repeats", "1"], ["suite", "bump", "--reason", "again", "--skip-trial"]):
        refused = run_cli([*args, "--root", root, "--ledger", ledger])
        assert refused.exit_code == 2, refused.output
        assert refused.stderr.splitlines()[-1] == (
            f"error: {ledger}: the event at seq 2 does not hash to its recorded link; the ledger was edited "
            f"(`cbledger replay --verify --ledger {ledger} --root {root}` locates it); nothing written")
        assert ledger.read_bytes() == before
    assert not (root / "results" / "runs").exists()


def test_a_ledger_that_cannot_take_an_append_is_refused_before_any_run(
    tmp_path: Path, kicad_cli: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A torn tail, or a directory no file can be made in (the batch mark goes beside the ledger),
    was found only when each run's events were refused, after the run was done (and paid for)."""
    root = project(tmp_path)
    ledger = new_ledger(root, "refusing")
    args = ["run", TASKS[0], "--agent", "gold", "--repeats", "1", "--root", root, "--ledger", ledger]
    with ledger.open("ab") as f:
        f.write(b'{"event":{"id"')
    before = ledger.read_bytes()
    torn = run_cli(args)
    assert torn.exit_code == 2 and "incomplete last line" in torn.stderr, torn.output
    assert ledger.read_bytes() == before and not (root / "results" / "runs").exists()
    assert run_cli(["repair", "--truncate-torn-tail", "--ledger", ledger]).exit_code == 0
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **k: not (Path(path) == ledger.parent and mode & os.W_OK)
                        and access(path, mode, **k))
    before = ledger.read_bytes()
    shut = run_cli(args)
    assert shut.exit_code == 2, shut.output
    assert shut.stderr.splitlines()[-1] == (f"error: {ledger}: cannot be appended to: {ledger.parent} cannot be written "
                                            "(not writable by this user, or immutable); nothing was run or written")
    assert ledger.read_bytes() == before and not (root / "results" / "runs").exists()


def test_a_misspelled_session_is_refused_before_a_dry_run_lists_it_or_a_campaign_keeps_it(tmp_path: Path) -> None:
    root = project(tmp_path)
    ledger = new_ledger(root, "session")
    before = ledger.read_bytes()
    for extra in (["--dry-run"], []):
        refused = run_cli(["run", TASKS[0], "--agent", "copperhead", "--session", "solv", *extra, "--root", root, "--ledger", ledger])
        assert refused.exit_code == 2, refused.output
        assert "no session script 'solv' for: led-resistor-swap" in refused.stderr and "would run" not in refused.output
        assert "(did you mean 'solve'?)" in refused.stderr
    # a name the project's own sessions/ holds, given as a task session's name: its path is what works
    (root / "sessions").mkdir(exist_ok=True)
    (root / "sessions" / "refuse-blind.json").write_text("{}")
    refused = run_cli(["run", TASKS[0], "--agent", "copperhead", "--session", "refuse-blind", "--dry-run", "--root", root, "--ledger", ledger])
    assert refused.exit_code == 2 and "--session sessions/refuse-blind.json" in refused.stderr, refused.output
    assert ledger.read_bytes() == before and not Workspace.at(root, ledger).campaigns.exists()


def test_an_interrupted_campaign_says_what_is_kept_and_how_to_go_on(
    tmp_path: Path, kicad_cli: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C mid-campaign ended the command with exit 130 and not a word."""
    from cbledger.cli import run_commands

    root = project(tmp_path)
    ledger = new_ledger(root, "interrupted")

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(run_commands, "run_plan", interrupted)
    r = run_cli(["run", TASKS[0], "--agent", "gold", "--repeats", "1", "--campaign", "late", "--root", root, "--ledger", ledger])
    assert r.exit_code == 130, r.output
    assert r.stderr.splitlines()[-1] == (
        "interrupted: every run of campaign late that finished is recorded; run the same command again "
        f"(or `cbledger run --resume late --ledger {ledger} --root {root}`) to run the slots still missing, which also "
        f"regenerates the projections (`cbledger project all --ledger {ledger} --root {root}` does that alone)"
    )


def test_a_campaign_keeps_its_segment_and_a_resume_may_not_change_it(
    tmp_path: Path, kicad_cli: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--resume` ran a campaign without the `--segment` it was started with: a model the price
    table does not list was refused, and another segment would have been recorded silently."""
    from cbledger.cli import run_commands
    from cbledger.runner.suite_run import SuiteResult

    root = project(tmp_path)
    ledger = new_ledger(root, "segment")
    where = ["--root", root, "--ledger", ledger]
    plans = Workspace.at(root, ledger).campaigns
    # a campaign with a run recorded keeps the segment it was started with
    ran = run_cli(["run", TASKS[0], "--agent", "gold", "--repeats", "1", "--campaign", "seg", "--no-project",
                   "--segment", "open-weight-hosted", *where])
    assert ran.exit_code == 0, ran.output
    assert json.loads((plans / "seg.json").read_bytes())["segment"] == "open-weight-hosted"
    before = {p.name: p.read_bytes() for p in plans.iterdir()} | {"ledger": ledger.read_bytes()}
    for again in (["run", "--resume", "seg"], ["run", TASKS[0], "--agent", "gold", "--repeats", "1", "--campaign", "seg"]):
        refused = run_cli([*again, "--segment", "api-cheap", *where])
        assert refused.exit_code == 2, refused.output
        assert refused.stderr.splitlines() == [
            f"error: --segment api-cheap: campaign seg has runs recorded with --segment open-weight-hosted "
            f"({plans / 'seg.json'}); give it no --segment (its plan's is used), or name a new campaign with --campaign"
        ]
        assert {p.name: p.read_bytes() for p in plans.iterdir()} | {"ledger": ledger.read_bytes()} == before
    assert run_cli(["run", "--resume", "seg", "--segment", "not-a-segment", *where]).exit_code == 2
    typo = run_cli(["run", "--resume", "sge", *where])
    assert typo.exit_code == 2 and "no campaign of that id here" in typo.stderr and "(did you mean 'seg'?)" in typo.stderr, typo.output
    bad = run_cli(["run", "--resume", "a.b", *where])  # named by the flag it was given with
    assert bad.exit_code == 2 and bad.stderr.startswith("error: --resume 'a.b': a campaign id is"), bad.output

    given: list[str | None] = []

    def recorded_nothing(*args: object, segment: str | None = None, **kwargs: object) -> SuiteResult:
        given.append(segment)
        return SuiteResult()

    monkeypatch.setattr(run_commands, "run_plan", recorded_nothing)
    # a resume runs with the kept segment; with nothing recorded yet, another one replaces it
    started = ["run", TASKS[1], "--agent", "gold", "--repeats", "1", "--campaign", "fresh"]
    assert run_cli([*started, "--segment", "open-weight-hosted", *where]).exit_code == 0
    assert run_cli(["run", "--resume", "fresh", *where]).exit_code == 0
    assert run_cli([*started, *where]).exit_code == 0
    assert run_cli(["run", "--resume", "fresh", "--segment", "api-cheap", *where]).exit_code == 0
    assert run_cli(["run", "--resume", "fresh", *where]).exit_code == 0
    assert given == ["open-weight-hosted"] * 3 + ["api-cheap"] * 2
    # a plan kept before plans kept the segment still loads, its resume given one again, and stays as it was
    plan = json.loads((plans / "fresh.json").read_bytes())
    del plan["segment"]
    (plans / "fresh.json").write_text(json.dumps(plan))
    assert isinstance(campaign_mod.load(Workspace.at(root, ledger), "fresh").segment, msgspec.UnsetType)
    assert run_cli(["run", "--resume", "fresh", "--segment", "open-weight-hosted", *where]).exit_code == 0
    assert given[-1] == "open-weight-hosted" and json.loads((plans / "fresh.json").read_bytes()) == plan


def test_run_json_answers_in_one_shape_whether_or_not_anything_ran(tmp_path: Path, kicad_cli: str) -> None:
    root = project(tmp_path)
    ledger = new_ledger(root, "shape")
    args = ["run", TASKS[0], "--agent", "gold", "--repeats", "1", "--no-project", "--json", "--root", root, "--ledger", ledger]
    ran = run_cli(args)
    assert ran.exit_code == 0, ran.output
    complete = run_cli(args)  # the campaign is complete: nothing runs
    assert complete.exit_code == 0, complete.output
    full, empty = json.loads(ran.stdout), json.loads(complete.stdout)
    assert (full["recorded"], empty["recorded"], empty["runs"]) == (1, 0, [])
    assert sorted(empty) == sorted(full) and empty["campaign"] == full["campaign"]


def test_the_ledger_refuses_a_slot_recorded_twice(tmp_path: Path, kicad_cli: str) -> None:
    root = project(tmp_path)
    ledger = new_ledger(root, "twice")
    args = ["run", TASKS[0], "--agent", "gold", "--repeats", "1", "--no-project", "--root", root, "--ledger", ledger]
    first = run_cli(args)
    assert first.exit_code == 0, first.output
    [run] = runs(ledger)
    assert run.run_id == campaign_mod.run_id(run.campaign.id, TASKS[0], 1, 1)
    # a second recording of the slot (another driver that did not see the first): same id, another body
    stored = next(iter(LedgerStore(ledger).read(types={"run.recorded"}))).event
    assert isinstance(stored, RunRecordedEvent)
    again = msgspec.structs.replace(stored, seq=0, body=msgspec.structs.replace(run, runner_note="recorded again"))
    with pytest.raises(ConflictError, match=f"run:{run.run_id}"):
        LedgerStore(ledger).append([again])
    # the same command again: that campaign, every slot recorded, nothing run
    second = run_cli(args)
    assert second.exit_code == 0, second.output
    assert "1 of 1 slot(s) recorded, 0 to run" in second.stderr
    assert len(runs(ledger)) == 1
    # a new campaign of the same model and condition continues the repeats instead of reusing r1
    fresh = run_cli([*args, "--campaign", "next"])
    assert fresh.exit_code == 0, fresh.output
    assert [(r.campaign.id, r.repeat) for r in runs(ledger)] == [(run.campaign.id, 1), ("next", 2)]
    dry = run_cli([*args, "--campaign", "next", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "campaign next: 1 slot(s) recorded, 0 to run" in dry.stdout and "recorded next." in dry.stdout


def test_a_campaign_resumes_after_its_driver_is_killed_and_cleans_what_it_left(tmp_path: Path, kicad_cli: str) -> None:
    root = project(tmp_path)
    ledger = new_ledger(root, "killed")
    sandboxes = tmp_path / "sandboxes"
    plan = [*TASKS, "--agent", "gold", "--repeats", "2", "--no-project"]
    expected = planned_slots(root, ledger, *plan)
    assert len(expected) == 4
    proc = subprocess.Popen(
        [*CLI, "run", *plan, "--root", str(root), "--ledger", str(ledger), "--sandbox-root", str(sandboxes)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )
    try:
        wait_for("run recorded", lambda: b'"run.recorded"' in ledger.read_bytes(), proc=proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    before = slots(ledger)
    assert 1 <= len(before) < 4, "the kill should have landed mid-campaign"
    acknowledged = {r.run_id for r in runs(ledger)}
    # what a killed run leaves: its staged bundle, its sandbox and kept baseline, and a bundle
    # renamed into place whose append never happened (planted, so the test does not depend on
    # where the kill landed; the bundle is younger than leftovers.ORPHAN_AGE_SEC, so it is kept
    # until the slot's new run takes its place: it once refused that run as "already in place")
    campaign = runs(ledger)[0].campaign.id
    missing = next(s for s in expected if s not in before)
    left_id = campaign_mod.run_id(campaign, missing[0], missing[1], 1)
    runs_dir = Workspace.at(root, ledger).runs
    for path in (runs_dir / f".{left_id}.bundle.tmp", runs_dir / f"{left_id}.bundle", sandboxes / left_id / "file",
                 sandboxes / f".{left_id}.baseline.git" / "HEAD"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("left by a killed run")
    # and in the temporary directory, named as the agent and the verification name theirs: the
    # endpoint's socket directory and a verification copy; another campaign's are not this one's
    scratch = [Path(tempfile.mkdtemp(prefix=isolation.scratch_prefix(kind, sandboxes / left_id))) for kind in isolation.SCRATCH_KINDS]
    others = Path(tempfile.mkdtemp(prefix=isolation.scratch_prefix("verify", sandboxes / f"another.{missing[0]}-s1-a1")))
    resumed = run_cli(["run", *plan, "--root", root, "--ledger", ledger, "--sandbox-root", sandboxes])
    assert resumed.exit_code == 0, resumed.output
    assert "leftover(s) of killed runs" in resumed.stderr and f".{left_id}.bundle.tmp" in resumed.stderr
    assert f"{len(before)} of 4 slot(s) recorded, {4 - len(before)} to run" in resumed.stderr
    assert slots(ledger) == expected  # no slot twice, none missing
    assert acknowledged <= {r.run_id for r in runs(ledger)}
    assert not (runs_dir / f".{left_id}.bundle.tmp").exists() and not (sandboxes / f".{left_id}.baseline.git").exists()
    assert not list(runs_dir.glob(".*.tmp"))
    assert (runs_dir / f"{left_id}.bundle").read_bytes() != b"left by a killed run"  # the new run's own
    assert not any(p.exists() for p in scratch)
    assert others.is_dir()
    others.rmdir()
    verified(root, ledger)


# --------------------------------------------------------------------------- on a cluster


def slow_sessions(root: Path) -> None:
    """Each task's solving session as `slow`: the model takes 2.5 s over its first answer, so a
    run is in flight long enough to be interrupted."""
    for task in TASKS:
        sessions = root / "tasks" / task / "sessions"
        data = json.loads((sessions / "solve.json").read_text())
        data["name"] = f"{task}-slow"
        data["exchanges"][0]["delayMs"] = 2500
        (sessions / f"{SLOW}.json").write_text(json.dumps(data, indent=2))


def in_flight(cluster: Cluster) -> list[Path]:
    """The sandboxes of the runs the cluster's workers are running now."""
    return [p for p in cluster.base.glob("w*/dask-scratch-space/worker-*/cbledger/sandboxes/*") if not p.name.startswith(".")]


def fresh_harness(cluster: Cluster, seconds: float = 1.0) -> str | None:
    """The worker running a harness it started under `seconds` ago, so still waiting on the slow
    first answer: interrupted now, the run has a process to kill and cannot end first. (A sandbox
    in flight may be a run already grading, which can end before the interruption lands.)"""
    now = time.time()
    for name, worker in cluster.workers.items():
        if worker.poll() is not None:
            continue
        try:
            for proc in psutil.Process(worker.pid).children(recursive=True):
                if any(part.endswith("cli.js") for part in proc.cmdline()) and now - proc.create_time() < seconds:
                    return name
        except psutil.Error:
            continue  # a process that ended while it was looked at
    return None


def start_cluster(base: Path) -> Cluster:
    made = Cluster(base).start()
    made.add_worker("w1")
    made.add_worker("w2")
    return made


@pytest.mark.slow
def test_a_campaign_interrupted_on_a_cluster_ends_with_the_slots_of_an_uninterrupted_one(
    tmp_path: Path, kicad_cli: str, copperhead_cli: Path,
) -> None:
    root = project(tmp_path)
    slow_sessions(root)
    ledger = new_ledger(root, "field")
    plan = [*TASKS, "--agent", "copperhead", "--session", SLOW, "--repeats", "2", "--no-project"]
    expected = planned_slots(root, ledger, *plan)
    clusters = [start_cluster(tmp_path / "dask-1")]
    env = {**os.environ, "COPPERHEAD_CLI": str(copperhead_cli)}

    def driver(cluster: Cluster) -> subprocess.Popen:
        return subprocess.Popen(
            [*CLI, "run", *plan, "--root", str(root), "--ledger", str(ledger), "--executor", "dask",
             "--scheduler", cluster.address],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env, text=True,
        )

    try:
        # 1. the driver SIGKILLed with runs in flight: the workers kill them within a few polls
        cluster = clusters[0]
        proc = driver(cluster)
        wait_for("run recorded", lambda: len(runs(ledger)) >= 1, proc=proc)
        wait_for("a harness waiting on its model", lambda: fresh_harness(cluster) is not None, proc=proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        killed_at = time.monotonic()
        wait_for("abandoned run killed", lambda: "its driver cancelled it or went away" in cluster.log("w1") + cluster.log("w2"), seconds=30)
        wait_for("abandoned sandbox removed", lambda: not in_flight(cluster), seconds=30)
        assert time.monotonic() - killed_at < 15  # not the minute a run left alone would take
        after_driver = len(runs(ledger))
        assert after_driver < len(expected)

        # 2. the scheduler SIGKILLed under a resumed driver: one clear line per run not recorded
        proc = driver(cluster)
        wait_for("a harness waiting on its model", lambda: fresh_harness(cluster) is not None, proc=proc)
        assert cluster.scheduler is not None
        cluster.scheduler.send_signal(signal.SIGKILL)
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, err
        assert "the Dask scheduler" in err and "was lost" in err, err
        assert "CancelledError" not in err and "Traceback" not in err, err
        cluster.stop()

        # (a PostgreSQL restart under a driver: test_a_campaign_on_postgresql_survives_a_restart_and_its_driver_killed)

        # 3. a new cluster; a worker SIGKILLed mid-run: its run goes to the other worker, once
        cluster = start_cluster(tmp_path / "dask-2")
        clusters.append(cluster)
        proc = driver(cluster)
        wait_for("a harness waiting on its model", lambda: fresh_harness(cluster) is not None, proc=proc)
        victim = fresh_harness(cluster, seconds=2.0)
        assert victim is not None
        cluster.kill(victim)
        _out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    finally:
        for made in clusters:
            made.stop()

    assert slots(ledger) == expected  # no slot twice, none missing
    assert len({r.run_id for r in runs(ledger)}) == len(expected)
    verified(root, ledger)
    view = read_view(ledger)
    assert all(view.grades[(r.run_id, r.comparability.suite_version)].verdict == "pass" for r in runs(ledger))


# --------------------------------------------------------------------------- a provider outage


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_provider_outage_is_retried_as_further_attempts_and_only_the_last_counts(
    tmp_path: Path, kicad_cli: str, copperhead_cli: Path,
) -> None:
    """The provider's endpoint is down for the first invocation: every run is recorded, not the
    model's. Resumed with `--retry-env 1` once it is back, each slot gets a second attempt; both
    are recorded, and the model's row counts each slot once."""
    root = project(tmp_path)
    ledger = new_ledger(root, "outage")
    port = free_port()
    task = TASKS[0]
    env = {"COPPERHEAD_BASE_URL": f"http://127.0.0.1:{port}/sessions/provider/v1"}
    plan = ["run", task, "--agent", "copperhead", "--model", "compat:outage", "--segment", "open-weight-hosted",
            "--repeats", "2", "--no-project", "--copperhead-cli", copperhead_cli, "--root", root, "--ledger", ledger]
    down = run_cli(plan, env=env)  # nothing listens on the port: the provider is out
    assert down.exit_code == 0, down.output
    first = runs(ledger)
    assert len(first) == 2 and all(r.harness_failure is not None for r in first), [r.harness_failure for r in first]
    # the output says how to try them again, not only that they failed: the same command with
    # --retry-env, or a resume of the campaign in this workspace
    campaign = first[0].campaign.id
    resume = f"cbledger run --resume {campaign} --retry-env 1 --ledger {ledger} --root {root}"
    hint = "2 slot(s) ended for a reason not the model's (provider-transport) and count in no model row: " \
           f"to try them again, run the same command with --retry-env 1 (or `{resume}`)"
    assert hint in down.stdout, down.output
    # resumed from its kept plan with nothing to run (no --retry-env): nothing to refuse either (the
    # --segment the model needs is not restated), and the same way out
    resumed = run_cli(["run", "--resume", first[0].campaign.id, "--root", root, "--ledger", ledger], env=env)
    assert resumed.exit_code == 0 and hint in resumed.stdout, resumed.output
    # "recorded" alone read as done: the count says these count in no model row
    not_the_models = "2 slot(s) recorded (2 ended for a reason not the model's and count in no model row), 0 to run"
    assert not_the_models in resumed.stderr, resumed.output
    # without --retry-env the slots are done: a failure not the model's is still a recorded attempt
    assert not_the_models in run_cli([*plan, "--dry-run"], env=env).stdout
    dry = run_cli([*plan, "--retry-env", "1", "--dry-run"], env=env)
    assert "0 slot(s) recorded, 2 to run" in dry.stdout and dry.stdout.count("would run (attempt 2)") == 2, dry.stdout
    with Endpoint(port=port) as endpoint:
        endpoint.serve("provider", script.load(root / "tasks" / task / "sessions" / "solve.json"))
        # the resume as printed: its kept plan gives the --segment the model needs (the harness
        # as the environment gives it, as the same command gave --copperhead-cli)
        back = run_cli(shlex.split(resume)[1:], env={**env, "COPPERHEAD_CLI": str(copperhead_cli)})
    assert back.exit_code == 0, back.output
    every = runs(ledger)
    assert sorted((r.campaign.slot, r.campaign.attempt, r.harness_failure is None) for r in every) == [
        (1, 1, False), (1, 2, True), (2, 1, False), (2, 2, True),
    ]
    # a third invocation with the same allowance: every slot's last attempt stands
    third = run_cli([*plan, "--retry-env", "1"], env=env)
    assert "2 of 2 slot(s) recorded, 0 to run" in third.stderr and "not the model's" not in third.stdout, third.output
    # the second attempts were answered by the project's own endpoint: recorded as scripted (never a
    # model's row); the first never reached a model. Each slot is counted once, by its last attempt
    assert [r.run_mode for r in every if r.campaign.attempt == 2] == ["scripted", "scripted"]
    [group] = [g for g in suite_metrics(load_state(ledger), read_view(ledger).suite_version).groups if g.main]
    assert [r for r in group.rows if r.model == "compat:outage"] == []
    assert [(r.runs, r.passes) for r in group.scripted if r.model == "compat:outage"] == [(2, 2)]
    assert len([n for n in group.not_the_models if n.model == "compat:outage"]) == 2
    verified(root, ledger)


# --------------------------------------------------------------------------- PostgreSQL restarted


def test_a_campaign_on_postgresql_survives_a_restart_and_its_driver_killed(tmp_path: Path, kicad_cli: str) -> None:
    """The server restarts under a running driver, which rides it out; the driver is then killed,
    and the same command finishes the campaign: every slot once, every acknowledged run kept."""
    root = project(tmp_path)
    with own_server() as server:
        url = ledger_url(tmp_path, server=server.url)
        try:
            for args in (("init", "--name", "pg-campaign"), ("suite", "bump", "--reason", "under test", "--skip-trial")):
                made = run_cli([*args, "--root", root, "--ledger", url])
                assert made.exit_code == 0, made.output
            plan = [*TASKS, "--agent", "gold", "--repeats", "3", "--no-project"]
            expected = planned_slots(root, url, *plan)

            def recorded() -> int:
                try:
                    return len(runs(url))
                except UserError:  # the server is restarting
                    return 0

            proc = subprocess.Popen(
                [*CLI, "run", *plan, "--root", str(root), "--ledger", url],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
            )
            try:
                wait_for("run recorded", lambda: recorded() >= 1, proc=proc)
                server.restart(down_for=1.0)  # every session ended between two appends
                before = recorded()
                wait_for("run recorded after the restart", lambda: recorded() > before, proc=proc)
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=30)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            acknowledged = {r.run_id for r in runs(url)}
            assert len(acknowledged) < len(expected), "the kill should have landed mid-campaign"
            resumed = run_cli(["run", *plan, "--root", root, "--ledger", url])
            assert resumed.exit_code == 0, resumed.output
            assert slots(url) == expected  # no slot twice, none missing
            assert acknowledged <= {r.run_id for r in runs(url)}
            verified(root, url)
        finally:
            drop(url)


def _steal(url: str, campaign: str, deadline: float):  # type: ignore[no-untyped-def]
    """Ends the driver's hold on `campaign` (its session, as a restart would) and takes the
    campaign before the driver's next check does: the lease held here, entered."""
    from contextlib import ExitStack

    dsn, _, _ = split_url(url)
    while True:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE %s",
                          (f"cbledger-driver %{campaign}",))
        stack = ExitStack()
        try:
            stack.enter_context(PostgresRecorder(url).driving(campaign))
            return stack
        except UserError:  # the driver took it again first: once more
            assert time.monotonic() < deadline, "the driver's hold could not be taken"


def test_a_second_driver_of_a_running_campaign_on_a_shared_ledger_pays_for_nothing(
    tmp_path: Path, kicad_cli: str, copperhead_cli: Path, pg_ledger: str,
) -> None:
    """Two machines, one PostgreSQL ledger, a results directory each. A driver whose hold on its
    campaign was lost (its session ended, as by a restart) and taken by another starts no further
    run; the same campaign started on the other machine while it is held is refused at once,
    writing nothing; and the same command then finishes the campaign there, every slot once."""
    url, here, there = pg_ledger, project(tmp_path / "a"), project(tmp_path / "b")
    slow_sessions(here)
    slow_sessions(there)
    for args in (("init", "--name", "two-drivers"), ("suite", "bump", "--reason", "under test", "--skip-trial")):
        made = run_cli([*args, "--root", here, "--ledger", url])
        assert made.exit_code == 0, made.output
    shutil.copytree(here / "results" / "suites", there / "results" / "suites")  # the bump's kept definitions
    plan = [TASKS[0], "--agent", "copperhead", "--session", SLOW, "--repeats", "3", "--no-project", "--campaign", "shared"]
    expected = planned_slots(here, url, *plan)
    harness = {"COPPERHEAD_CLI": str(copperhead_cli)}
    proc = subprocess.Popen(
        [*CLI, "run", *plan, "--root", str(here), "--ledger", url],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        env={**os.environ, **harness},
    )
    try:
        wait_for("run recorded", lambda: len(runs(url)) >= 1, proc=proc)
        with _steal(url, "shared", time.monotonic() + WAIT):  # while the second run waits on its model
            second = run_cli(["run", *plan, "--root", there, "--ledger", url], env=harness)
            assert second.exit_code == 2, second.output
            assert "campaign shared is being run by another driver on this ledger (cbledger-driver " in second.output
            assert "SELECT pg_terminate_backend(" in second.output
            assert not (there / "results" / "campaigns" / "shared.json").exists()
            assert not list((there / "results").glob("runs/*")), "the refused driver kept a run"
            _out, err = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err
    assert "this driver lost its hold on campaign shared (its session ended) and another driver holds it now (cbledger-driver " in err
    done = {r.run_id for r in runs(url)}
    assert 1 <= len(done) < len(expected), "the hold should have been lost mid-campaign"
    finished = run_cli(["run", *plan, "--root", there, "--ledger", url], env=harness)
    assert finished.exit_code == 0, finished.output
    assert slots(url) == expected  # no slot twice, none missing
    assert done <= {r.run_id for r in runs(url)}


@pytest.mark.parametrize("where", ["before any output", "after LEADERBOARD.md and the read model"])
def test_an_interrupt_while_the_outputs_are_written_is_caught_up_by_the_same_command(
    tmp_path: Path, kicad_cli: str, monkeypatch: pytest.MonkeyPatch, where: str,
) -> None:
    """Ctrl-C after the runs were recorded, while the outputs were regenerated, said only
    `error: interrupted`; the same command then found nothing to run and left the outputs behind
    the ledger, so `replay --verify` failed until `project all`."""
    from cbledger.cli import run_commands
    from cbledger.projections import writers

    root = project(tmp_path)
    for args in (("init",), ("suite", "bump", "--reason", "under test", "--skip-trial")):
        assert run_cli([*args, "--root", root]).exit_code == 0
    plan = ["run", TASKS[0], "--agent", "gold", "--repeats", "1", "--root", root]

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        if where == "before any output":
            patched.setattr(run_commands, "regenerate_after", interrupted)
        else:  # the site is written last
            patched.setattr(writers, "sync_site", interrupted)
        cut = run_cli(plan)
    assert cut.exit_code == 130, cut.output
    assert cut.stderr.splitlines()[-1].startswith(
        "interrupted while the outputs were regenerated: the 1 run(s) of this command are recorded; the same command again")
    assert run_cli(["replay", "--verify", "--root", root]).exit_code == 4  # the outputs differ from the ledger
    again = run_cli(plan)
    assert again.exit_code == 0 and "1 of 1 slot(s) recorded, 0 to run" in again.stderr, again.output
    checked = run_cli(["replay", "--verify", "--root", root])
    assert checked.exit_code == 0, checked.output


def test_after_a_retaken_hold_a_slot_another_driver_recorded_meanwhile_is_not_run(tmp_path: Path, kicad_cli: str) -> None:
    """A driver whose hold was lost and taken again read its open slots before: one another
    driver recorded in between would be run (and paid for) again, and refused only at the append."""
    from dataclasses import replace as replaced

    from cbledger.ledger.events import Ablations
    from cbledger.ledger.recorder import Lease
    from cbledger.runner.plan import make_plan
    from cbledger.runner.suite_run import run_plan
    from cbledger.tasks.catalog import Catalog

    root = project(tmp_path)
    ledger = new_ledger(root, "retaken")
    workspace = Workspace.at(root, ledger)
    plan = make_plan(Catalog(root), agent="gold", model=None, suite=None, task_ids=TASKS[:1], repeats=2,
                     ablations=Ablations())
    todo = campaign_mod.open_campaign(workspace, plan, read_view(ledger), "held", session=None, passes=None).missing()
    assert [p.slot for p in todo] == [1, 2]
    other = run_plan(workspace, replaced(plan, runs=(todo[0],)), sandbox_root=tmp_path / "elsewhere")
    assert len(other.outputs) == 1  # the other driver's, while this one's hold was lost

    class Retaken(Lease):
        retaken = True

    result = run_plan(workspace, replaced(plan, runs=tuple(todo)), sandbox_root=tmp_path / "sandboxes", lease=Retaken())
    assert not result.failures, result.failures
    assert [o.run.campaign.slot for o in result.outputs] == [2]
    assert [why for _, why in result.not_run] == ["not run: another driver recorded this slot meanwhile"]
    assert slots(ledger) == [(TASKS[0], 1, 1), (TASKS[0], 2, 2)]


def test_a_database_away_when_a_retaken_hold_asks_about_a_slot_lets_the_run_go_ahead() -> None:
    """After a server restart (the hold retaken), the next outage made that question raise and
    ended the whole campaign (exit 2, no summary, slots left unrun), where an outage otherwise
    costs a run's append a wait."""
    from types import SimpleNamespace

    from cbledger.ledger.recorder import StoreUnavailable
    from cbledger.runner.suite_run import _recorded_meanwhile

    def away(_id: str) -> None:
        raise StoreUnavailable("postgresql://h/db: cannot connect to PostgreSQL: connection refused")

    planned = SimpleNamespace(campaign="c1", task=SimpleNamespace(id="t"), slot=1, attempt=1)
    store = SimpleNamespace(recorder=SimpleNamespace(lookup=away))
    assert _recorded_meanwhile(store, planned) is False  # type: ignore[arg-type]
    asked: list[str] = []
    store.recorder.lookup = lambda i: asked.append(i) or object()  # type: ignore[attr-defined]
    assert _recorded_meanwhile(store, planned) is True and asked == ["run:c1.t-s1-a1"]  # type: ignore[arg-type]


# --------------------------------------------------------------------------- leftovers, without a run


def _slot_events(run_id: str, repeat: int = 1) -> list:
    """A run.recorded and its grade for a campaign's slot, as a run of it appends them."""
    from tests.factories import grade_recorded, run_recorded

    run, grade = run_recorded(repeat), grade_recorded(repeat)
    run = msgspec.structs.replace(run, id=f"run:{run_id}", body=msgspec.structs.replace(run.body, run_id=run_id))
    grade = msgspec.structs.replace(grade, id=f"grade:{run_id}", body=msgspec.structs.replace(grade.body, run_id=run_id))
    return [run, grade]


def _slot_of_c1(tmp_path: Path, name: str):  # type: ignore[no-untyped-def]
    """A fresh ledger named `name` and the events of campaign c1's first slot, its runs/ made."""
    from tests.factories import MAINTAINER

    workspace = Workspace.at(tmp_path)
    store = LedgerStore(workspace.ledger)
    store.init(name, MAINTAINER)
    run_id = campaign_mod.run_id("c1", "t", 1, 1)
    workspace.runs.mkdir(parents=True)
    return workspace, store, run_id, *_slot_events(run_id)


def test_a_kept_run_is_adopted_and_another_campaigns_leftovers_are_not_touched(tmp_path: Path) -> None:
    from tests.factories import draft_json

    workspace, store, kept_id, run, grade = _slot_of_c1(tmp_path, "leftovers")
    workspace.pending_events(kept_id).write_bytes(draft_json(run) + b"\n" + draft_json(grade) + b"\n")
    (workspace.runs / f"{kept_id}.bundle").write_bytes(b"bundle")
    # campaign c1-b's run ids start with c1-: never c1's (no campaign id holds the separator)
    others = [workspace.runs / f".{campaign_mod.run_id('c1-b', 't', 1, 1)}.bundle.tmp", tmp_path / "sb" / campaign_mod.run_id("c1-b", "t", 1, 1)]
    mine = [workspace.runs / f".{campaign_mod.run_id('c1', 't', 2, 1)}.bundle.tmp", tmp_path / "sb" / campaign_mod.run_id("c1", "t", 2, 1)]
    for path in [*others, *mine]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir() if path.parent.name == "sb" else path.write_text("left")
    with leftovers.hold(workspace, "c1"):
        with pytest.raises(UserError, match="is being run by another process"), leftovers.hold(workspace, "c1"):
            pass
        done = leftovers.clean(workspace, store, "c1", tmp_path / "sb")
    assert done.adopted == [kept_id] and done.refused == []
    assert [s.id for s in store.read()][1:] == [f"run:{kept_id}", f"grade:{kept_id}"]
    assert not workspace.pending_events(kept_id).exists()
    assert sorted(done.removed) == sorted(mine) and all(not p.exists() for p in mine)
    assert all(p.exists() for p in others)
    # kept events a user appended by hand, as the refusal said, are not adopted twice: the file goes
    workspace.pending_events(kept_id).write_bytes(draft_json(run) + b"\n" + draft_json(grade) + b"\n")
    with leftovers.hold(workspace, "c1"):
        again = leftovers.clean(workspace, store, "c1", tmp_path / "sb")
    assert again.adopted == [] and again.removed == [workspace.pending_events(kept_id)]
    assert not workspace.pending_events(kept_id).exists() and len(list(store.read())) == 3
    # kept events of a slot another driver recorded meanwhile, as another run: they can never land
    # (they once said "still not appended" on every later run, and the bundle of another run's name
    # stayed to fail the gathered results' verify); both go, and it is said
    from cbledger.ledger.events import RunRecordedEvent

    assert isinstance(run, RunRecordedEvent)
    other = msgspec.structs.replace(run, body=msgspec.structs.replace(run.body, runner_note="another driver's run"))
    workspace.pending_events(kept_id).write_bytes(draft_json(other) + b"\n")
    (workspace.runs / f"{kept_id}.bundle").write_bytes(b"another bundle")
    with leftovers.hold(workspace, "c1"):
        stale = leftovers.clean(workspace, store, "c1", tmp_path / "sb")
    assert stale.refused == [] and [r for r, _ in stale.superseded] == [kept_id]
    assert not workspace.pending_events(kept_id).exists() and not (workspace.runs / f"{kept_id}.bundle").exists()
    assert any("another driver of its campaign recorded its slot meanwhile" in line for line in stale.lines())


def test_a_disk_that_fills_leaves_no_half_kept_run_to_hold_its_slot(tmp_path: Path, monkeypatch) -> None:
    """The ledger refused a run's events on a full disk and the events kept beside its bundle
    were cut short by the same disk: every later run of the campaign ran the slot again, paid,
    and could not record it ("bundle is already in place")."""
    import errno

    from cbledger.ledger import durable
    from cbledger.runner import execute
    from tests.factories import draft_json

    workspace, store, run_id, run, grade = _slot_of_c1(tmp_path, "full-disk")
    staged, final = workspace.runs / f".{run_id}.bundle.tmp", workspace.runs / f"{run_id}.bundle"
    staged.write_bytes(b"the run's bundle")
    output = execute.RunOutput(run=run.body, grade=grade.body, events=[run, grade], staged=staged, final=final,
                               sandbox=None, pending=workspace.pending_events(run_id))

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store, "append", full)
    monkeypatch.setattr(execute, "APPEND_RETRY_SEC", 0)
    real_fsync = os.fsync

    def no_room(fd: int) -> None:  # the kept events' bytes cannot be made durable either
        real_fsync(fd)
        if Path(f"/proc/self/fd/{fd}").resolve().name.startswith(f".{run_id}.events"):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(durable.os, "fsync", no_room)
    with pytest.raises(UserError, match=r"could not be kept for later either .*the run is discarded"):
        execute.publish(store, output)
    assert not final.exists() and not workspace.pending_events(run_id).exists()  # the slot is open

    # what the plain write left before: half a line beside the bundle; the next run of the
    # campaign discards both, and its slot runs again
    final.write_bytes(b"the run's bundle")
    kept = draft_json(run) + b"\n" + draft_json(grade) + b"\n"
    workspace.pending_events(run_id).write_bytes(kept[:len(kept) // 2])
    with leftovers.hold(workspace, "c1"):
        done = leftovers.clean(workspace, LedgerStore(workspace.ledger), "c1", None)
    assert [r for r, _ in done.discarded] == [run_id] and done.refused == []
    assert not final.exists() and not workspace.pending_events(run_id).exists()
    assert any("discarded run" in line and "runs again" in line for line in done.lines())
    assert len(list(LedgerStore(workspace.ledger).read())) == 1
    # whole lines the ledger refuses for what they say are kept and said, never discarded
    final.write_bytes(b"the run's bundle")
    workspace.pending_events(run_id).write_bytes(kept.replace(b'"runId":', b'"runID":', 1))
    with leftovers.hold(workspace, "c1"):
        done = leftovers.clean(workspace, LedgerStore(workspace.ledger), "c1", None)
    assert done.discarded == [] and [p for p, _ in done.refused] == [workspace.pending_events(run_id)]
    assert final.exists() and workspace.pending_events(run_id).exists()
    # cut short, but its run was recorded after all: only the file goes, the bundle the ledger names stays
    LedgerStore(workspace.ledger).append([run, grade])
    workspace.pending_events(run_id).write_bytes(kept[:len(kept) // 2])
    with leftovers.hold(workspace, "c1"):
        done = leftovers.clean(workspace, LedgerStore(workspace.ledger), "c1", None)
    assert done.discarded == [] and done.removed == [workspace.pending_events(run_id)] and final.exists()


def test_a_slot_another_driver_recorded_first_discards_this_runs_bundle(tmp_path: Path) -> None:
    """Two drivers of one campaign sharing a ledger from two results directories: the second
    once kept its bundle (named as the recorded one's) with events no append could ever take,
    and gathering the directories' runs/ as docs/SCALING.md says broke verification."""
    from cbledger.runner.execute import RunOutput, publish

    workspace, store, run_id, *theirs = _slot_of_c1(tmp_path, "two-drivers")
    store.append(theirs)  # the other driver's, first
    mine = _slot_events(run_id, 2)
    staged, final = workspace.runs / f".{run_id}.bundle.tmp", workspace.runs / f"{run_id}.bundle"
    staged.write_bytes(b"this driver's bundle")
    output = RunOutput(run=mine[0].body, grade=mine[1].body, events=mine, staged=staged, final=final, sandbox=None,
                       pending=workspace.pending_events(run_id))
    with pytest.raises(UserError, match="its slot was recorded by another driver of its campaign"):
        publish(store, output)
    assert not final.exists() and not staged.exists() and not workspace.pending_events(run_id).exists()
    assert [s.id for s in store.read()][1:] == [f"run:{run_id}", f"grade:{run_id}"]


def test_executor_options_are_refused_before_a_campaigns_plan_is_kept(tmp_path: Path) -> None:
    """`--executor dask` without `--scheduler` once kept the campaign's plan before refusing, so
    the corrected command was refused as "started with another plan"; its dry run printed
    `executor dask at None`."""
    root = project(tmp_path)
    ledger = new_ledger(root, "refused")
    for extra in ([], ["--dry-run"]):
        r = run_cli(["run", TASKS[0], "--agent", "gold", "--repeats", "1", "--campaign", "c1", "--executor", "dask",
                     "--root", root, "--ledger", ledger, *extra])
        assert r.exit_code == 2 and "--executor dask needs --scheduler" in r.stderr, r.output
    assert not list(Workspace.at(root, ledger).campaigns.glob("c1*"))


def test_the_resume_an_interrupted_cluster_run_suggests_runs_on_the_cluster(tmp_path: Path):
    """It once left out `--executor dask --scheduler …`: followed as printed, every slot ran on
    the driver, which need not have kicad-cli."""
    from cbledger.cli.run_commands import _interrupted

    where = Workspace.at(tmp_path)
    said = _interrupted("c1", where, False, again=True, on=("--executor", "dask", "--scheduler", "tcp://h:8786"))
    assert "run --resume c1 --executor dask --scheduler tcp://h:8786`" in said, said
    assert "--executor" not in _interrupted("c1", where, False, again=True)
    assert "is recorded; run the same command" in said
    # a run interrupted in its append is kept, and the line says so rather than "recorded"
    where.runs.mkdir(parents=True)
    where.pending_events("c1.t-s1-a1").write_text("{}\n")
    where.pending_events("c10.t-s1-a1").write_text("{}\n")  # another campaign's
    said = _interrupted("c1", where, False, again=True)
    assert ("is recorded or kept beside its bundle for the next invocation to append (1: c1.t-s1-a1); "
            "run the same command again") in said, said


def test_a_run_that_only_adopts_kept_runs_brings_the_outputs_up_to_them(tmp_path: Path, kicad_cli: str, monkeypatch) -> None:
    """After an outage the same command adopted the kept run ("1 of 1 slot(s) recorded, 0 to
    run", exit 0) and left LEADERBOARD.md and the records behind it: `replay --verify` failed."""
    import errno

    from cbledger.runner import execute

    root = project(tmp_path)
    ledger = new_ledger(root, "adopt")
    plan = ["run", TASKS[0], "--agent", "gold", "--repeats", "1", "--campaign", "c1", "--root", root, "--ledger", ledger]
    append = LedgerStore.append

    def down(self, events, *args, **kwargs):
        if any(getattr(e, "id", "").startswith("run:") for e in events):
            raise OSError(errno.EIO, "Input/output error", str(ledger))
        return append(self, events, *args, **kwargs)

    monkeypatch.setattr(LedgerStore, "append", down)
    monkeypatch.setattr(execute, "APPEND_RETRY_SEC", 0)
    kept = run_cli(plan)
    assert kept.exit_code == 1 and "the run is kept" in kept.output, kept.output
    monkeypatch.setattr(LedgerStore, "append", append)
    again = run_cli(plan)
    assert again.exit_code == 0 and "adopted run" in again.stderr and "0 to run" in again.stderr, again.output
    check = run_cli(["project", "leaderboard", "--check", "--root", root, "--ledger", ledger])
    assert check.exit_code == 0, check.output
    results = Workspace.at(root, ledger).results
    assert len(runs(ledger)) == 1 and list(results.glob("20*/*/*/run-1.json")), "no record written"


def test_outputs_that_cannot_be_written_after_the_runs_are_recorded_say_so(tmp_path: Path, kicad_cli: str, monkeypatch) -> None:
    """A disk that filled while LEADERBOARD.md was written after 15 recorded runs: exit 2 ("bad
    input, nothing written") and no summary of the runs that were recorded."""
    from cbledger.projections import writers

    root = project(tmp_path)
    ledger = new_ledger(root, "full")

    def full(*_args, **_kwargs):
        raise UserError(f"{root / 'LEADERBOARD.md'}: No space left on device; not written, the previous content is kept")

    monkeypatch.setattr(writers, "regenerate_all", full)
    out = run_cli(["run", TASKS[0], "--agent", "gold", "--repeats", "1", "--root", root, "--ledger", ledger])
    assert out.exit_code == 1, out.output
    assert "1 run(s) recorded: " in out.stdout and len(runs(ledger)) == 1
    assert "the run(s) are recorded, but the outputs could not be regenerated" in out.stderr
    assert "No space left on device" in out.stderr and "project all" in out.stderr


def test_a_dry_run_shows_a_slot_whose_events_were_kept_as_kept(tmp_path: Path) -> None:
    """It once said the slot "would run"; the run then adopted its kept events and ran nothing."""
    root = project(tmp_path)
    ledger = new_ledger(root, "kept")
    runs_dir = Workspace.at(root, ledger).runs
    runs_dir.mkdir(parents=True, exist_ok=True)
    (runs_dir / f"{campaign_mod.run_id('c1', TASKS[0], 1, 1)}.events.jsonl").write_text("{}\n")
    r = run_cli(["run", TASKS[0], "--agent", "gold", "--repeats", "2", "--campaign", "c1", "--dry-run",
                 "--root", root, "--ledger", ledger])
    assert r.exit_code == 0, r.output
    assert "0 slot(s) recorded, 1 kept (appended, not run again), 1 to run" in r.stdout, r.stdout
    assert "slot 1/2  kept: its events will be appended, not run again" in r.stdout and "slot 2/2  would run" in r.stdout


@pytest.mark.parametrize("where", ["under-a-file", "not-writable"])
def test_a_sandbox_root_no_run_could_use_is_refused_before_the_plan_is_kept(tmp_path: Path, kicad_cli: str, where: str) -> None:
    root = project(tmp_path)
    ledger = new_ledger(root, "roots")
    (tmp_path / "a-file").write_text("")
    bad = tmp_path / "a-file" / "sandboxes" if where == "under-a-file" else Path("/proc/cbledger-sandboxes")
    before = ledger.read_bytes()
    plan = [*TASKS, "--agent", "gold", "--repeats", "1", "--campaign", "roots"]
    result = run_cli(["run", *plan, "--root", root, "--ledger", ledger, "--sandbox-root", bad])
    assert result.exit_code == 2, result.output
    assert f"--sandbox-root {bad}: no sandbox can be made there" in result.stderr
    # nothing written: no plan holding the tasks' repeat numbers, no lock, no event
    assert ledger.read_bytes() == before
    assert not [p for p in root.rglob("*") if "campaigns" in p.parts or p.name == ".roots.lock"]
    again = planned_slots(root, ledger, *plan)
    assert [repeat for _, _, repeat in again] == [1, 1]


def test_a_socket_directory_stays_bindable_under_a_long_tmpdir_and_is_found_as_a_leftover(tmp_path, monkeypatch):
    """The endpoint's socket into a sandbox is bound in a scratch directory: under a TMPDIR
    whose path leaves no room for a socket (a Unix socket's path is at most 107 bytes) it goes
    under /tmp instead, and a later invocation of the campaign still finds it if a killed driver
    left it, and finds no other campaign's."""
    long_tmp = tmp_path / ("t" * 60)
    long_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(long_tmp))
    sandbox = tmp_path / "sandboxes" / "campaign-abc.task-s1-a1"
    old_place = Path(tempfile.mkdtemp(prefix=isolation.scratch_prefix("endpoint", sandbox)))
    with socket.socket(socket.AF_UNIX) as server, pytest.raises(OSError, match="too long"):
        server.bind(str(old_place / isolation.ENDPOINT_SOCKET_NAME))  # where it was bound before
    made = isolation.socket_scratch("endpoint", sandbox, isolation.ENDPOINT_SOCKET_NAME)
    other = isolation.socket_scratch("endpoint", tmp_path / "sandboxes" / "campaign-xyz.task-s1-a1", isolation.ENDPOINT_SOCKET_NAME)
    try:
        assert made.parent == Path(isolation.SHORT_TMP)
        path = made / isolation.ENDPOINT_SOCKET_NAME
        assert len(os.fsencode(str(path))) <= isolation.SOCKET_PATH_MAX
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(str(path))
        assert isolation.scratch_left(sandbox.parent, "campaign-abc") == sorted([made.resolve(), old_place.resolve()])
    finally:
        shutil.rmtree(made, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)
    # a TMPDIR with room: the socket's directory is there, and /tmp is not searched
    short_tmp = Path(tempfile.mkdtemp(prefix="s", dir=isolation.SHORT_TMP))
    stray = Path(tempfile.mkdtemp(prefix=isolation.scratch_prefix("endpoint", sandbox), dir=isolation.SHORT_TMP))
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(short_tmp))
        made = isolation.socket_scratch("endpoint", sandbox, isolation.ENDPOINT_SOCKET_NAME)
        assert made.parent == short_tmp and isolation.scratch_left(sandbox.parent, "campaign-abc") == [made.resolve()]
    finally:
        shutil.rmtree(short_tmp, ignore_errors=True)
        shutil.rmtree(stray, ignore_errors=True)


def test_a_dry_runs_cost_estimate_leaves_out_a_slot_whose_events_were_kept(tmp_path: Path, monkeypatch) -> None:
    """The plan says a kept slot is appended, not run again, so it costs nothing more: the
    estimate below that line once counted it as a run to pay for."""
    from cbledger.cli import run_commands
    from cbledger.runner import cost_estimate

    root = project(tmp_path)
    ledger = new_ledger(root, "kept")
    runs_dir = Workspace.at(root, ledger).runs
    runs_dir.mkdir(parents=True, exist_ok=True)
    (runs_dir / f"{campaign_mod.run_id('c1', TASKS[0], 1, 1)}.events.jsonl").write_text("{}\n")
    estimated: list[list[tuple[str, int]]] = []

    def for_plan(plan, view, **limits):
        estimated.append([(r.task.id, r.slot) for r in plan.runs])
        return cost_estimate.Estimate(plan.model_id, None, None)

    monkeypatch.setattr(run_commands.cost_estimate, "for_plan", for_plan)
    r = run_cli(["run", TASKS[0], "--agent", "copperhead", "--model", "gpt-test", "--segment", "api-cheap", "--repeats", "2",
                 "--campaign", "c1", "--dry-run", "--root", root, "--ledger", ledger])
    assert r.exit_code == 0, r.output
    assert "1 kept (appended, not run again), 1 to run" in r.stdout, r.stdout
    assert estimated == [[(TASKS[0], 2)]]


def test_a_dry_runs_estimate_is_given_the_limits_and_what_killed_runs_spent(tmp_path: Path, monkeypatch) -> None:
    from cbledger.cli import run_commands
    from cbledger.runner import cost_estimate

    root = project(tmp_path)
    ledger = new_ledger(root, "limits")
    from tests.factories import pricing_published

    LedgerStore(ledger).append([pricing_published(1)])
    where = Workspace.at(root, ledger)
    where.campaigns.mkdir(parents=True, exist_ok=True)
    journal = campaign_mod.spend_journal(where, "c1")
    run = campaign_mod.run_id("c1", TASKS[0], 1, 1)
    journal.write_text(json.dumps({"batch": "b1", "run": run, "spentUsdMicros": 30_000}) + "\n"
                       + json.dumps({"batch": "b1", "run": run, "spentUsdMicros": 70_000}) + "\n")
    given: list[dict] = []

    def for_plan(plan, view, **limits):
        given.append(limits)
        return cost_estimate.Estimate(plan.model_id, None, ("1", "2"), estimated=1, median=1, **limits)

    monkeypatch.setattr(run_commands.cost_estimate, "for_plan", for_plan)
    r = run_cli(["run", TASKS[0], "--agent", "copperhead", "--model", "gpt-5-mini", "--repeats", "1",
                 "--campaign", "c1", "--dry-run", "--max-cost-usd", "0.5", "--budget-usd", "1", "--root", root, "--ledger", ledger])
    assert r.exit_code == 0, r.output
    assert given == [{"cap": 500_000, "budget": 1_000_000, "spent": 70_000, "unrecorded": 70_000}]
    assert "money limits: each run stops at the --max-cost-usd cap of $0.5000" in r.stdout, r.stdout


def test_a_campaigns_money_limits_are_kept_with_its_plan_and_a_bare_resume_runs_under_them(tmp_path: Path) -> None:
    """`--resume ID` without the limits ran a budgeted campaign unmetered, with no word: the
    journal gained nothing while the provider billed on."""
    root = project(tmp_path)
    ledger = new_ledger(root, "limits")
    where = Workspace.at(root, ledger)
    from cbledger.ledger.events import Ablations
    from cbledger.runner.plan import make_plan
    from cbledger.tasks.catalog import Catalog

    view = read_view(ledger)
    plan = make_plan(Catalog(root), agent="gold", model=None, suite=None, task_ids=[TASKS[0]], repeats=1,
                     ablations=Ablations())
    assert campaign_mod.limits_of(where, "c1", None, None) == (None, None, False)  # nothing kept yet
    campaign_mod.open_campaign(where, plan, view, "c1", session=None, passes=None, limits=("0.45", "1.2"))
    assert campaign_mod.limits_of(where, "c1", None, None) == ("0.45", "1.2", True)
    # each limit on its own: one given replaces its kept one and leaves the other kept; `none` lifts one
    assert campaign_mod.limits_of(where, "c1", None, "5") == ("0.45", "5", True)
    assert campaign_mod.limits_of(where, "c1", "NONE", None) == (None, "1.2", True)
    assert campaign_mod.limits_of(where, "c1", "none", "none") == (None, None, False)
    campaign_mod.open_campaign(where, plan, view, "c1", session=None, passes=None, limits=(None, "5"))
    assert campaign_mod.limits_of(where, "c1", None, None) == (None, "5", True)
    kept = json.loads((where.campaigns / "c1.json").read_text())
    assert (kept["maxCostUsd"], kept["budgetUsd"]) == (None, "5")
    # a plan kept before plans kept limits: none, until some are given
    del kept["maxCostUsd"], kept["budgetUsd"]
    (where.campaigns / "c1.json").write_text(json.dumps(kept))
    assert campaign_mod.limits_of(where, "c1", None, None) == (None, None, False)


def test_a_run_whose_slot_another_driver_recorded_is_said_and_is_no_failure(monkeypatch) -> None:
    """A driver that took a campaign over ran a slot the run in flight of the one it replaced then
    recorded: its own run was discarded, and the invocation exited 1 on a complete campaign."""
    from cbledger.runner import suite_run
    from cbledger.runner.execute import RunOutput, SlotTaken
    from tests.factories import grade_recorded, run_recorded

    def taken(store, output):
        raise SlotTaken(f"run {output.run.run_id}: its slot was recorded by another driver of its campaign (…)")

    monkeypatch.setattr(suite_run, "publish", taken)
    result = suite_run.SuiteResult()
    order = suite_run._AsFinished(None, result, 1, None)  # type: ignore[arg-type]
    run = run_recorded(1).body
    order.finish(RunOutput(run=run, grade=grade_recorded(1).body, events=[], staged=Path("s"), final=Path("f"),
                           sandbox=None, pending=Path("p")))
    assert result.failures == [] and result.outputs == []
    [(label, why)] = result.not_run
    assert label == f"{run.task.id} r{run.repeat}" and "recorded by another driver" in why


def test_a_replay_reads_its_own_workspace_and_its_own_condition(tmp_path: Path, kicad_cli: str) -> None:
    """The replay agent read preserved runs from the project's `results/` whatever `--results`
    named (`…/results/runs/X.bundle: preserved run X missing`), and put back a run of any
    condition: a default replay took a two-turn ablation's run."""
    root = project(tmp_path)
    ws = ["--results", tmp_path / "ws"]
    for args in (("init", "--name", "replay-test"), ("suite", "bump", "--reason", "under test", "--skip-trial"),
                 ("run", TASKS[0], "--agent", "gold", "--repeats", "1")):
        made = run_cli([*ws, *args, "--root", root])
        assert made.exit_code == 0, made.output
    assert not (root / "results").exists()
    replayed = run_cli([*ws, "run", TASKS[0], "--agent", "replay", "--model", "harness:gold", "--repeats", "1", "--root", root])
    assert replayed.exit_code == 0, replayed.output
    ledger = tmp_path / "ws" / "ledger" / "events.jsonl"
    source, replay = runs(ledger)
    assert replay.run_mode == "replay" and replay.replay_of == source.run_id
    other = run_cli([*ws, "run", TASKS[0], "--agent", "replay", "--model", "harness:gold", "--repeats", "1",
                     "--max-turns", "3", "--root", root])
    assert other.exit_code != 0 and "under condition 'max-turns=3'" in other.output, other.output
    assert len(runs(ledger)) == 2


def test_a_campaign_resumed_under_another_suite_version_says_its_repeats_are_split() -> None:
    """A campaign interrupted, then resumed after a suite bump, ran its open slots under the new
    suite without a word: each suite's rows held part of its repeats."""
    from types import SimpleNamespace

    from tests.factories import Stream

    s = Stream()
    s.task("t1")
    s.run("t1", suite_version="1.0.0", run_id="c.t1-s1-a1")
    made = next(e.body for e in s.events if isinstance(e, RunRecordedEvent))
    plan = SimpleNamespace(id="c")
    slots = campaign_mod.Campaign(plan, (campaign_mod.Slot(SimpleNamespace(), made), campaign_mod.Slot(SimpleNamespace(), None)))
    note = slots.suite_note("1.1.0")
    assert note is not None and note.startswith("note: campaign c's recorded runs were made under suite 1.0.0; "
                                                "the slots run now are graded under suite 1.1.0")
    assert "cbledger rescore" in note
    assert slots.suite_note("1.0.0") is None and slots.suite_note(None) is None


def test_a_bump_by_an_older_grader_than_the_ledgers_is_refused(tmp_path: Path) -> None:
    """Downgraded, the older build's own `suite status` suggested a bump, and the bump recorded its
    older grader over the newer one's: later grades ran by rules the ledger had moved past."""
    from cbledger.grading.grader import GRADER_VERSION
    from cbledger.projections.fold import semver_key
    from tests.factories import suite_bumped

    root = project(tmp_path)
    ledger = root / "older.jsonl"
    assert run_cli(["init", "--name", "older", "--root", root, "--ledger", ledger]).exit_code == 0
    newer = suite_bumped(1)
    assert newer.body.grader_version == "2.0.1" and semver_key(GRADER_VERSION) < (2, 0, 1)
    LedgerStore(ledger).append([newer])
    before = ledger.read_bytes()
    refused = run_cli(["suite", "bump", "--reason", "after a downgrade", "--skip-trial", "--root", root, "--ledger", ledger])
    assert refused.exit_code == 2, refused.output
    assert (f"error: {ledger}: suite 1.1.0 was recorded by grader 2.0.1, newer than this build's {GRADER_VERSION}: a bump here "
            "would grade by older rules than the ledger's; upgrade cbledger (nothing recorded)") in refused.stderr
    assert ledger.read_bytes() == before


def test_the_spend_of_killed_runs_is_recorded_under_an_id_that_fits_and_a_hand_edited_line_is_skipped(tmp_path: Path) -> None:
    """The id once joined the run id, the batch and the figure: a long campaign and task id passed
    the 200 characters an id may hold, and the whole batch was refused on every invocation."""
    from cbledger.ledger.events import Actor
    from cbledger.runner.ledger_view import LedgerView

    root = project(tmp_path)
    ledger = new_ledger(root, "spend")
    workspace = Workspace.at(root, ledger)
    campaign = "c" * 64
    long_run = f"{campaign}.{'t' * 100}-s1-a1"
    journal = campaign_mod.spend_journal(workspace, campaign)
    journal.parent.mkdir(parents=True, exist_ok=True)
    journal.write_text("".join(json.dumps(line) + "\n" for line in (
        {"batch": "20261206T000000Z-abcdef", "run": long_run, "spentUsdMicros": 250_000},
        {"batch": "20261206T000000Z-abcdef", "run": "not a run id!", "spentUsdMicros": 5},
        {"batch": 5, "run": long_run, "spentUsdMicros": 7},  # a number for a batch: sorted, it raised
        {"batch": None, "run": ["x"], "spentUsdMicros": 7},  # a list for a run: unhashable, it raised
        {"batch": None, "run": long_run, "spentUsdMicros": True},
    )))
    events = campaign_mod.unrecorded_events(workspace, LedgerView(), campaign, "vendor:model-a", Actor(kind="runner", name="t"))
    assert [(e.body.run_id, e.body.usd_micros) for e in events] == [(long_run, 250_000)] and len(events[0].id) <= 200
    (appended,) = LedgerStore(ledger).append(events)
    assert appended.created and LedgerStore(ledger).append(events)[0].created is False  # the same again: a no-op


def test_a_campaign_resumed_under_another_build_says_its_open_slots_run_under_it(tmp_path: Path, copperhead_cli: Path) -> None:
    """A resume under another copperhead build split the campaign between builds without a word."""
    from types import SimpleNamespace

    from cbledger.cli.run_commands import _other_build
    from tests.factories import Stream

    s = Stream()
    s.task("t1")
    s.run("t1", run_id="c.t1-s1-a1", copperhead_commit=None)  # made by a build whose files were not the release's
    made = next(e.body for e in s.events if isinstance(e, RunRecordedEvent))
    slots = campaign_mod.Campaign(SimpleNamespace(id="c"), (campaign_mod.Slot(SimpleNamespace(), made),
                                                          campaign_mod.Slot(SimpleNamespace(), None)))
    where = Workspace.at(project(tmp_path))
    note = _other_build(slots, [SimpleNamespace()], "copperhead", str(copperhead_cli), where)
    assert note is not None and note.startswith("note: campaign c's recorded runs were made with copperhead 0.9.0 commit "
                                                "unknown; this CLI is 0.9.0 a2471b3: its open slots run under it"), note
    assert _other_build(slots, [SimpleNamespace()], "copperhead", "/nonexistent/cli.js", where) is None  # a note, never a refusal
    assert _other_build(slots, [SimpleNamespace()], "gold", str(copperhead_cli), where) is None
