"""The real harness against a provider that fails: copperhead 0.9.0, driven by `cbledger run`
through the loopback endpoint, whose session script injects one fault at the model's third call.

What copperhead makes of each fault (its OpenAI SDK retries 429, 5xx and broken connections
twice, copperhead retries 429 three more times with backoff) decides the run: a fault it
recovers from leaves the model's run as it was; one it does not is recorded with its kind and
turn as the environment's, and enters no model row. `replay --verify` then decides the
attribution again from the preserved evidence.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.runner_project import processes_with
from tests.test_real_harness import KEYS, build, no_keys  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.slow, pytest.mark.kicad, pytest.mark.shared, pytest.mark.copperhead]

TASK = "led-current-refusal"
CAP_SEC = 30
#: fault at the third model call -> (kind, status) recorded; None: copperhead recovered
FAULTS = {
    "http-500": ({"kind": "status", "status": 500}, ("provider-status", 500)),
    "http-500-once": ({"kind": "status", "status": 500, "times": 1}, None),
    "rate-limited-once": ({"kind": "status", "status": 429, "retryAfter": 1, "times": 1}, None),
    "rate-limited": ({"kind": "status", "status": 429, "retryAfter": 1}, ("provider-status", 429)),
    "out-of-credit": ({"kind": "status", "status": 402}, ("provider-status", 402)),  # the account's, not the model's
    "reset": ({"kind": "reset"}, ("provider-transport", None)),
    "malformed": ({"kind": "malformed-json"}, ("provider-transport", None)),
    "truncated": ({"kind": "truncated-stream"}, ("provider-transport", None)),
    "hang": ({"kind": "hang"}, ("provider-timeout", None)),
}


def _with_fault(project, tmp_path: Path, name: str, fault: dict | None, delay_ms: int = 0) -> Path:
    session = json.loads((project.root / "tasks" / TASK / "sessions" / "solve.json").read_text())
    session["name"] = name
    third = session["exchanges"][2]
    if fault is not None:
        third["fault"] = fault
    if delay_ms:
        third["delayMs"] = delay_ms
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(session))
    return path


def _paid_before_the_fault(project) -> tuple[int, int]:
    """The tokens of the two answers before the third call: what a killed run still spent."""
    session = json.loads((project.root / "tasks" / TASK / "sessions" / "solve.json").read_text())
    usage = [ex["turn"].get("usage", {}) for ex in session["exchanges"][:2]]
    return sum(u.get("in", 0) for u in usage), sum(u.get("out", 0) for u in usage)


def _assert_spend_kept(project, run) -> None:
    """No run-end, yet the cassette's answered requests are the run's tokens; the synthesized
    stats state the configured repair-cycle cap and the agent's time."""
    assert all(_paid_before_the_fault(project))  # the session's turns do carry usage
    assert (run.stats.tokens_in, run.stats.tokens_out) == _paid_before_the_fault(project)
    configured = json.loads(run.sandbox.seed_config)["maxRepairCycles"]  # what the sandbox gave copperhead
    assert configured > 0 and run.stats.max_repair_cycles == configured
    assert run.stats.duration_ms == run.timings.agent_ms
    assert "tokens from the cassette's 2 answered model call(s)" in run.runner_note


def _short_cap(root: Path) -> None:
    manifest = root / "tasks" / TASK / "task.json"
    data = json.loads(manifest.read_text())
    data["caps"]["wallClockSec"] = CAP_SEC
    manifest.write_text(json.dumps(data, indent=2) + "\n")


def test_each_provider_fault_is_attributed_from_what_the_run_preserved(
    tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys  # noqa: F811
):
    project = build(tmp_path, shared_real, copperhead_cli, edit=_short_cap)
    # one `cbledger run` process per fault, as runners on one ledger: most of each run is
    # copperhead's retry backoff or the hang's wall-clock cap, so waiting in turn would only add
    # those waits up
    cbledger = Path(sys.executable).parent / "cbledger"
    env = {k: v for k, v in os.environ.items() if k not in KEYS}

    def start(name: str, fault: dict) -> subprocess.Popen:
        log = (tmp_path / f"{name}.log").open("wb")
        return subprocess.Popen(
            [str(cbledger), "run", TASK, "--session", str(_with_fault(project, tmp_path, name, fault)), "--repeats", "1",
             "--agent", "copperhead", "--copperhead-cli", str(copperhead_cli), "--sandbox-root", str(project.sandboxes),
             "--root", str(project.root)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)

    # the hang first, alone until its third call is pending: whether a hang is the provider's
    # weighs how long that call went unanswered against the run's whole time, and the others'
    # start-up on a busy machine would slow the two calls before it
    procs = {"hang": start("hang", FAULTS["hang"][0])}
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and procs["hang"].poll() is None:
        transcripts = list(project.sandboxes.glob("*scripted-hang*/.copperhead/runs/*/transcript.jsonl"))
        if transcripts and transcripts[0].read_text().count('"type":"assistant"') >= 2:
            break
        time.sleep(0.2)
    assert procs["hang"].poll() is None, (tmp_path / "hang.log").read_text()  # still awaiting its third answer
    procs.update({name: start(name, fault) for name, (fault, _) in FAULTS.items() if name != "hang"})
    for name, proc in procs.items():
        proc.wait(timeout=900)
        assert proc.returncode == 0, (name, (tmp_path / f"{name}.log").read_text())
    result = project.cli("project", "all")  # the outputs of the last run to finish, whichever it was
    assert result.exit_code == 0, result.output
    runs = {r.model.id.removeprefix("compat:scripted-"): r for r in project.events("run.recorded")}
    grades = {g.run_id: g for g in project.events("grade.recorded")}
    for name, (_, expected) in FAULTS.items():
        run = runs[name]
        if expected is None:
            assert run.harness_failure is None, (name, run.harness_failure)
            assert grades[run.run_id].verdict == "pass", (name, run.runner_note)
            continue
        failure = run.harness_failure
        assert failure is not None, (name, run.runner_note, run.stats)
        kind, status = expected
        assert (failure.kind, failure.turn) == (kind, 3), (name, failure)
        if status is not None:
            assert failure.status == status
    # the hang ran into the wall-clock cap; every other failure was copperhead's provider-error
    assert runs["hang"].runner_exit == "cap-exceeded"
    _assert_spend_kept(project, runs["hang"])
    assert all(runs[n].stats.exit_path == "provider-error" for n, (_, e) in FAULTS.items() if e and n != "hang")
    board = (project.root / "LEADERBOARD.md").read_text()
    assert "provider-status (model call 3): provider error: 500" in board
    rates = board.split("### Environment failures by model and route")[1].split("\n### ")[0]
    assert "| `compat:scripted-http-500` | scripted-endpoint | 100.0% (1/1) | provider-status 1 |" in rates
    assert "| `compat:scripted-http-500-once` | scripted-endpoint | 0.0% (0/1) | — |" in rates
    project.verify()
    # a provider's 402 was the model's before it was the account's: a run recorded under that rule
    # (no harnessFailure) still verifies, and any other attribution of it is still named
    from cbledger.ledger.store import LedgerStore
    from tests.test_reproduce_tamper import _forge_run_body

    stored = next(s for s in LedgerStore(project.ledger).read(types={"run.recorded"})
                  if s.event.body.run_id == runs["out-of-credit"].run_id)
    _forge_run_body(project.root, stored, lambda body: body.pop("harnessFailure"))
    assert project.cli("replay", "--verify", "--no-projections").exit_code == 0
    stored = next(s for s in LedgerStore(project.ledger).read(types={"run.recorded"})
                  if s.event.body.run_id == runs["out-of-credit"].run_id)
    _forge_run_body(project.root, stored, lambda body: body.update(harnessFailure={
        "kind": "provider-timeout", "detail": "made up", "turn": 3}))
    forged = project.cli("replay", "--verify", "--no-projections", "--json")
    assert forged.exit_code == 3 and "attribution-mismatch" in forged.stdout, forged.output


def test_a_harness_killed_from_outside_is_the_environments(tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys):  # noqa: F811
    project = build(tmp_path, shared_real, copperhead_cli)
    # the third answer never comes in the test's time: the kill lands while it is awaited
    session = _with_fault(project, tmp_path, "sigkill", None, delay_ms=900_000)
    killed: list[int] = []

    def answered() -> int:
        transcripts = list(project.sandboxes.glob("*/.copperhead/runs/*/transcript.jsonl"))
        return transcripts[0].read_text().count('"type":"assistant"') if transcripts else 0

    def kill_when_waiting() -> None:
        # on evidence, not on a clock: a busy machine may take a minute to reach the third call
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not killed:
            if answered() >= 2:
                for pid in processes_with("compat:scripted-sigkill"):
                    try:
                        if Path(f"/proc/{pid}/exe").resolve().name.startswith("node"):
                            os.kill(pid, signal.SIGKILL)
                            killed.append(pid)
                            return
                    except OSError:
                        continue
            time.sleep(0.2)

    killer = threading.Thread(target=kill_when_waiting)
    killer.start()
    result = project.run(TASK, "--session", str(session), "--repeats", "1")
    killer.join()
    assert result.exit_code == 0, result.output
    assert killed, "the harness was never seen running"
    (run,) = project.events("run.recorded")
    assert run.runner_exit is None
    assert run.harness_failure is not None and run.harness_failure.kind == "harness-signal", (run.harness_failure, run.runner_note)
    assert run.harness_failure.turn == 3
    _assert_spend_kept(project, run)
    shown = project.cli("show", run.run_id)
    assert shown.exit_code == 0 and "not the model's: harness-signal at model call 3: the harness was ended by SIGKILL" in shown.output
    project.verify()
    # a forger who calls the run the model's, re-chains and regenerates, is named
    from cbledger.ledger.store import LedgerStore
    from tests.test_reproduce_tamper import _forge_run_body

    (stored,) = LedgerStore(project.ledger).read(types={"run.recorded"})
    _forge_run_body(project.root, stored, lambda body: body.pop("harnessFailure"))
    result = project.cli("replay", "--verify", "--json")
    assert result.exit_code == 3, result.output
    (found,) = json.loads(result.stdout)["failures"]
    assert (found["kind"], found["field"], found["runId"]) == ("attribution-mismatch", "harnessFailure", run.run_id)
    assert found["actual"]["kind"] == "harness-signal" and "expected" not in found  # recorded as null


def test_a_cli_that_exits_at_once_is_not_called_preflight(tmp_path, shared_real, kicad_cli, no_keys):  # noqa: F811
    """A broken install (a `cli.js` that exits before doing anything) says nothing and writes no
    transcript: copperhead's preflight never ran, so the run is `harness-exit`, not `preflight`."""
    from tests.runner_project import RENAME_TASK, build_project, standin

    project = build_project(tmp_path, shared_real)
    cli, _ = standin(tmp_path)
    cli.write_text("process.exit(1);\n")
    result = project.run(RENAME_TASK, "--agent", "copperhead", "--model", "acme:m1", "--segment", "api-cheap", "--copperhead-cli", cli)
    assert result.exit_code == 0, result.output
    (run,) = project.runs()
    assert run.harness_failure is not None
    assert (run.harness_failure.kind, run.harness_failure.detail) == (
        "harness-exit", "the harness exited 1 at once, saying nothing and writing no transcript")
