"""SIGKILL of `cbledger run` in the middle of a suite: what is left must still be a ledger that
verifies (or one torn tail that `repair` removes), every event must point at a complete bundle,
and the only debris under results/ may be staged `.tmp` bundles. The ledger must also take the
next suite run as if nothing happened."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from blake3 import blake3

from cbledger.ledger.store import LedgerStore
from cbledger.ledger.verify import verify_chain
from tests.runner_project import (
    RENAME_TASK,
    build_project,
    lingering,
    processes_with,
    read_record,
    standin,
    standin_keys,
)

pytestmark = [pytest.mark.slow, pytest.mark.kicad, pytest.mark.shared]

CLI = [sys.executable, "-c", "from cbledger.cli.app import main; main()"]


def test_sigkill_mid_suite_leaves_a_verifiable_ledger_and_no_dangling_bundle(tmp_path, shared_real, kicad_cli):
    project = build_project(tmp_path, shared_real)
    start_size = project.ledger.stat().st_size
    proc = subprocess.Popen(
        [*CLI, "run", "--suite", "smoke", "--agent", "gold", "--repeats", "3", "--root", str(project.root),
         "--sandbox-root", str(project.sandboxes), "--keep-sandboxes", "--no-key-check"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env={**os.environ, **standin_keys()},
    )
    try:
        deadline = time.monotonic() + 120
        while b'"run.recorded"' not in project.ledger.read_bytes()[start_size:]:
            assert proc.poll() is None, "the suite ended before it could be interrupted"
            assert time.monotonic() < deadline, "no run landed in time"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL

    report = verify_chain(project.ledger)
    if not report.ok:  # a torn tail is the one thing a crash may leave; repair names and removes it
        assert LedgerStore(project.ledger).torn_tail() is not None, report.problem
        repaired = project.cli("repair", "--truncate-torn-tail")
        assert repaired.exit_code == 0, repaired.output
        report = verify_chain(project.ledger)
    assert report.ok, report.problem

    runs = project.runs()
    assert 1 <= len(runs) < 6, "the kill should have landed mid-suite"
    graded = {g.run_id for g in project.grades()}
    referenced = set()
    for run in runs:
        assert run.run_id in graded  # run and grade were appended as one batch
        bundle = project.root / run.sandbox.store
        data = bundle.read_bytes()
        assert len(data) == run.sandbox.store_bytes and blake3(data).hexdigest() == run.sandbox.store_blake3
        referenced.add(bundle.name)
    leftovers = [p.name for p in project.runs_dir.iterdir() if p.name not in referenced]
    assert all(name.startswith(".") and name.endswith(".bundle.tmp") for name in leftovers), leftovers

    again = project.run(RENAME_TASK, "--agent", "gold")
    assert again.exit_code == 0, again.output
    assert verify_chain(project.ledger).ok
    assert len(project.runs()) == len(runs) + 1


def test_ctrl_c_of_the_runner_takes_the_harness_down_with_it(tmp_path, shared_real, kicad_cli):
    """The harness runs in its own session, out of reach of the terminal's SIGINT: an interrupted
    runner must stop it itself, or it runs on (and spends) after the runner is gone."""
    project = build_project(tmp_path, shared_real)
    marker = f"sleeper-{tmp_path.name}"
    cli, record = standin(tmp_path, behaviour="sleep", marker=marker)
    before = project.ledger_bytes()
    proc = subprocess.Popen(
        [*CLI, "run", RENAME_TASK, "--agent", "copperhead", "--model", "acme:m1", "--segment", "api-cheap",
         "--copperhead-cli", str(cli), "--root", str(project.root), "--sandbox-root", str(project.sandboxes), "--keep-sandboxes",
         "--no-key-check"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env={**os.environ, **standin_keys()},
    )
    try:
        deadline = time.monotonic() + 60
        while not [c for c in read_record(record) if c["command"] == "do"]:
            assert proc.poll() is None and time.monotonic() < deadline, "the harness never started"
            time.sleep(0.02)
        assert processes_with(marker)  # the harness's setsid child is running
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        assert proc.returncode != 0
        assert lingering(marker) == []
        assert project.ledger_bytes() == before
        assert not project.runs_dir.exists() or list(project.runs_dir.iterdir()) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in processes_with(marker):  # started by this test; stopped here only if the runner failed to
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_with_jobs_kills_the_runs_in_flight_and_starts_no_further_run(tmp_path, shared_real, kicad_cli, sig, code):
    """With --jobs N the runs in flight are in worker threads, out of reach of the interrupt: they
    once ran on to their caps after the command said it was interrupted (20 minutes with a real
    cap), and then failed, unrecorded, because its exit removed their sandboxes. They are killed
    as the main thread's run is, nothing of them is written, and the queue behind them never starts.
    SIGTERM (a supervisor stopping the driver) once ended it mid-step with the shell's "Terminated"
    alone: it takes the same path, and exits 143."""
    sleepy = "sleepy-rename"
    project = build_project(tmp_path, shared_real, extra=[(sleepy, "rename net CLK to SLOW_CLK", 600)])
    before = project.ledger_bytes()
    marker = f"sleeper-{tmp_path.name}"
    cli, record = standin(tmp_path, behaviour="sleep", marker=marker)
    proc = subprocess.Popen(
        [*CLI, "run", sleepy, "--repeats", "4", "--jobs", "2", "--agent", "copperhead", "--model", "acme:m1",
         "--segment", "api-cheap", "--copperhead-cli", str(cli), "--root", str(project.root),
         "--sandbox-root", str(project.sandboxes), "--keep-sandboxes", "--no-key-check"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env={**os.environ, **standin_keys()},
    )
    calls: list[dict] = []
    try:
        deadline = time.monotonic() + 60
        while len(calls := [c for c in read_record(record) if c["command"] == "do"]) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, "the harnesses never started"
            time.sleep(0.02)
        proc.send_signal(sig)
        proc.wait(timeout=60)  # well inside the 600 s cap
        assert proc.returncode == code
        assert lingering(marker) == []
        calls = [c for c in read_record(record) if c["command"] == "do"]
        assert len(calls) == 2, "runs queued behind the interrupt were started"
        assert project.ledger_bytes() == before and verify_chain(project.ledger).ok
        assert not project.runs_dir.exists() or list(project.runs_dir.iterdir()) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in processes_with(marker):  # started by this test; stopped here only if the runner failed to
            os.kill(pid, signal.SIGKILL)
