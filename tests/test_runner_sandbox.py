"""The agent sandbox, tried as a hostile agent would: a harness (the copperhead stand-in, behaviour
"hostile") that looks for the project through its parent's working directory and by its path,
copies the gold solution, writes into `results/`, retracts another run with `cbledger append`,
tears the ledger's tail, reads an operator's file, leaves a `setsid` child behind, forks without
end and writes a 200 MB file. Each attempt is recorded by the agent itself in
`.git/attempts.jsonl` of its sandbox; the tests read those and check the host.

The same agent run with `--unsandboxed` steals the gold solution and passes: what the sandbox
prevents is real.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec
import pygit2
import pytest

from cbledger.ledger.verify import verify_chain
from cbledger.runner import isolation
from cbledger.runner.endpoint.script import Session
from cbledger.runner.endpoint.server import Endpoint
from tests.runner_project import (
    REFUSAL_TASK,
    RENAME_TASK,
    build_project,
    lingering,
    processes_with,
    standin,
)

pytestmark = [pytest.mark.slow, pytest.mark.kicad, pytest.mark.shared]

PROMPT = "rename net DATA to PDM_DATA"


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("COPPERHEAD_CLI", "COPPERHEAD_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "COPPERHEAD_API_KEY_ENV"):
        monkeypatch.delenv(name, raising=False)


def attempts(project, run_id: str) -> dict[str, dict]:
    lines = (project.sandboxes / run_id / ".git" / "attempts.jsonl").read_text().splitlines()
    return {a["name"]: a for a in map(json.loads, lines)}


def hostile_run(project, cli, *extra):
    return project.run(RENAME_TASK, "--agent", "copperhead", "--model", "acme:m1", "--segment", "api-cheap",
                       "--copperhead-cli", cli, *extra)


def test_a_hostile_agent_is_contained(tmp_path, shared_real, kicad_cli, clean_env):
    project = build_project(tmp_path, shared_real)
    first = project.run(REFUSAL_TASK, "--agent", "noop")
    assert first.exit_code == 0, first.output
    (victim,) = project.runs()
    secret = tmp_path / "operator-notes.txt"
    secret.write_text("the operator's own file\n")
    marker = f"left-behind-{tmp_path.name}"
    cli, _ = standin(tmp_path, byPrompt={PROMPT: "hostile"}, hostile={
        "project": str(project.root), "task": RENAME_TASK, "ledger": str(project.ledger), "python": sys.executable,
        "retract": victim.run_id, "secretFile": str(secret), "marker": marker, "forks": 700, "bigFileMb": 200,
    })
    before = project.ledger_bytes()
    results_before = sorted(p.relative_to(project.root) for p in (project.root / "results").rglob("*"))
    try:
        result = hostile_run(project, cli)
        assert result.exit_code == 0, result.output

        run = project.runs()[-1]
        tried = attempts(project, run.run_id)
        assert run.isolation == "bubblewrap"
        # the project is nowhere to be seen: not through /proc, not by its path
        assert not tried["copy-gold"]["ok"], tried["copy-gold"]
        assert str(project.root) not in tried.get("proc-parent-cwd", {"detail": ""})["detail"]
        grade = project.grades()[-1]
        assert grade.run_id == run.run_id and grade.verdict == "fail"
        # nothing outside the sandbox was written, read or appended to
        for name in ("write-results", "torn-tail", "cbledger-append", "read-operator-file"):
            assert not tried[name]["ok"], tried[name]
        assert not (project.root / "results" / "planted.txt").exists()
        assert project.ledger_bytes().startswith(before)
        assert project.ledger_bytes()[len(before):].count(b"\n") == 2  # its own two events, whole
        assert verify_chain(project.ledger).ok
        assert project.events("run.retracted") == []
        made = sorted(p.relative_to(project.root) for p in (project.root / "results").rglob("*"))
        record_dir = Path("results") / f"{run.timings.started_at:%Y-%m-%d}" / "acme-m1"
        new = set(made) - set(results_before) - {Path(f"results/runs/{run.run_id}.bundle")}
        # the run's own cassette (its recorded exchanges), under the name its event gives it
        new -= {Path("results/cassettes"), Path(run.cassette.path)}
        # the site's pages, rewritten for the run (the index and lists, the run's own page)
        new = {p for p in new if Path("results/site") not in (p, *p.parents)}
        # the campaign's kept plan, and the lock its invocation held (the runner's, not the agent's)
        campaign = run.campaign.id
        new -= {Path("results/campaigns"), Path(f"results/campaigns/{campaign}.json"), Path(f"results/campaigns/.{campaign}.lock")}
        assert all(p == record_dir.parent or p == record_dir or record_dir in p.parents for p in new), new
        # the setsid child died with the sandbox
        assert tried["setsid-child"]["ok"]
        assert lingering(marker) == []
        # the process limit held the fork loop, the file-size limit the 200 MB file
        started = int(tried["forks"]["detail"].split()[1])
        assert 0 < started < isolation.Limits().processes
        big = project.sandboxes / run.run_id / "big.bin"
        assert big.stat().st_size <= isolation.Limits().file_bytes
        bundle = project.root / run.sandbox.store
        assert bundle.stat().st_size < isolation.Limits().file_bytes + 2 * 1024 * 1024
        # and the next run starts and lands: no torn tail, no lock left behind
        again = project.run(REFUSAL_TASK, "--agent", "noop", "--campaign", "after-the-hostile-run")
        assert again.exit_code == 0, again.output
        assert len(project.runs()) == 3
    finally:
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_a_blob_the_agent_commits_over_the_bound_is_cut_from_the_bundle_and_the_run_verifies(
    tmp_path, shared_real, kicad_cli, clean_env, monkeypatch,
):
    """The agent's own commits once reached the preserved run unbounded: a blob it committed and
    removed again was in the bundle at full size."""
    from blake3 import blake3

    from cbledger.grading.evidence.tree import view
    from cbledger.runner import preserve
    from cbledger.tasks.catalog import Catalog

    monkeypatch.setattr(preserve, "MAX_KEPT_FILE_BYTES", 1024 * 1024)
    monkeypatch.setattr(preserve, "MAX_KEPT_BYTES", 2 * 1024 * 1024)
    blob_bytes = 3 * 1024 * 1024
    project = build_project(tmp_path, shared_real)
    cli, _ = standin(tmp_path, byPrompt={PROMPT: "big-commit"}, bigCommitBytes=blob_bytes)
    result = hostile_run(project, cli)
    assert result.exit_code == 0, result.output
    (run,) = project.runs()
    bundle = project.root / run.sandbox.store
    assert bundle.stat().st_size < preserve.MAX_KEPT_BYTES  # the random blob is not in it
    committed = pygit2.Repository(str(project.sandboxes / run.run_id))
    agent_blob = committed.revparse_single("HEAD~1:docs/blob.bin").peel(pygit2.Blob)
    assert agent_blob.size == blob_bytes
    restored = preserve.restore(bundle, run.sandbox, Catalog(project.root).fixture(run.fixture.id))
    (cut,) = json.loads(view(restored.repo, run.sandbox.evidence_sha).read(preserve.CUT_RECORD) or b"null")["cut"]
    assert cut["path"] == "docs/blob.bin" and cut["bytes"] == blob_bytes
    assert cut["blake3"] == blake3(agent_blob.data).hexdigest()
    assert cut["agentCommit"] == str(committed.revparse_single("HEAD~1").id)
    kept = restored.repo[cut["commit"]].peel(pygit2.Commit)
    assert kept.message == "copperhead: add a blob\n" and str(kept.id) != cut["agentCommit"]
    assert f"{blob_bytes} bytes".encode() in view(restored.repo, cut["commit"]).read("docs/blob.bin")
    # the commits as preserved are the agent's, one for one, with HEAD the rebuilt one
    head = restored.repo[run.sandbox.head_sha].peel(pygit2.Commit)
    assert head.message == "copperhead: remove the blob\n" and str(head.parent_ids[0]) == cut["commit"]
    verify = project.cli("replay", "--verify")
    assert verify.exit_code == 0, verify.output


def test_a_run_whose_bundle_would_pass_the_bound_is_recorded_from_its_baseline(
    tmp_path, shared_real, kicad_cli, clean_env, monkeypatch,
):
    """What no per-blob bound reaches (logs, reports, trees, commits) is held by the bound on the
    bundle as written: over it, the run is kept from its baseline, failed, and still verifies."""
    from cbledger.runner import preserve

    monkeypatch.setattr(preserve, "MAX_BUNDLE_BYTES", 2 * 1024 * 1024)
    project = build_project(tmp_path, shared_real)
    cli, _ = standin(tmp_path, byPrompt={PROMPT: "big-commit"}, bigCommitBytes=3 * 1024 * 1024)
    result = hostile_run(project, cli)
    assert result.exit_code == 0, result.output
    (run,) = project.runs()
    assert (project.root / run.sandbox.store).stat().st_size < preserve.MAX_BUNDLE_BYTES
    assert run.sandbox.head_sha == run.sandbox.baseline_sha and "over the bound of" in (run.runner_note or "")
    grade = project.grades()[-1]
    assert grade.verdict == "fail" and grade.failure_category == "end-state-unreadable"
    verify = project.cli("replay", "--verify")
    assert verify.exit_code == 0, verify.output


def test_the_same_agent_unsandboxed_steals_the_gold_solution(tmp_path, shared_real, kicad_cli, clean_env):
    project = build_project(tmp_path, shared_real)
    cli, _ = standin(tmp_path, byPrompt={PROMPT: "hostile"}, hostile={"project": str(project.root), "task": RENAME_TASK})
    result = hostile_run(project, cli, "--unsandboxed")
    assert result.exit_code == 0, result.output
    (run,) = project.runs()
    assert attempts(project, run.run_id)["copy-gold"]["ok"]
    assert run.isolation == "unsandboxed"
    grade = project.grades()[-1]
    assert grade.verdict == "pass", [(a.id, a.detail) for a in grade.assertions if a.status == "fail"]  # what the sandbox prevents


def test_without_bubblewrap_the_runner_refuses_unless_told(tmp_path, shared_real, kicad_cli, clean_env, monkeypatch):
    project = build_project(tmp_path, shared_real)
    monkeypatch.setattr(isolation, "find_bwrap", lambda: None)
    before = project.ledger_bytes()
    refused = project.run(RENAME_TASK, "--agent", "gold")
    assert refused.exit_code != 0
    assert "the agent sandbox is unavailable" in refused.output and "--unsandboxed" in refused.output
    assert project.ledger_bytes() == before and not project.sandboxes.exists()
    told = project.run(RENAME_TASK, "--agent", "gold", "--unsandboxed")
    assert told.exit_code == 0, told.output
    (run,) = project.runs()
    assert run.isolation == "unsandboxed"
    board = (project.root / "LEADERBOARD.md").read_text()
    assert "## Runs recorded without the agent sandbox" in board and "`--unsandboxed`" in board


# ----------------------------------------------------------------------- the sandbox on its own


@pytest.fixture(scope="module")
def confined() -> isolation.Confinement:
    return isolation.confinement(False, ())


def sh(workdir: Path, script: str, confined, **job) -> isolation.Outcome:
    return isolation.run(isolation.Job(["/bin/sh", "-c", script], workdir, job.pop("env", {}), job.pop("cap", 30), **job), confined)


def test_the_environment_is_only_what_the_caller_passes(tmp_path, confined, monkeypatch):
    monkeypatch.setenv("CBLEDGER_OPERATOR_SECRET", "runner-only")
    out = sh(tmp_path, "env", confined, env={"ONE": "1"})
    names = {line.split("=", 1)[0] for line in out.stdout.decode().splitlines()}
    assert names == {"ONE", "HOME", "TMPDIR", "PATH", "PWD"}


def test_other_sandboxes_and_the_hosts_files_are_invisible(tmp_path, confined):
    mine, theirs = tmp_path / "sandboxes" / "mine", tmp_path / "sandboxes" / "theirs"
    mine.mkdir(parents=True), theirs.mkdir()
    (theirs / "gold.txt").write_text("not yours\n")
    out = sh(mine, f"ls {tmp_path / 'sandboxes'}; cat {theirs / 'gold.txt'}; ls /root /home /work 2>&1; echo x > /usr/x", confined)
    text = out.stdout.decode() + out.stderr.decode()
    assert out.stdout.decode().split("\n", 1)[0] == "mine"
    assert "not yours" not in text and "Read-only file system" in text


def test_no_network_reaches_the_host_except_the_runs_own_endpoint(tmp_path, confined, request):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()  # the kernel completes a handshake into the backlog: no accept() needed to be reached
    port = listener.getsockname()[1]
    probe = f"require('net').connect({port}, '127.0.0.1').on('connect', () => {{ console.log('reached'); process.exit(0); }}).on('error', (e) => {{ console.log(e.code); process.exit(0); }})"
    node = isolation.shutil.which("node")
    out = isolation.run(isolation.Job([node, "-e", probe], tmp_path, {}, 30, tools=(node,)), confined)
    assert out.stdout.decode().strip() == "ECONNREFUSED"  # the host's loopback is not the sandbox's
    listener.close()

    session = msgspec.convert({"format": "cbledger-session/1", "name": "t", "exchanges": [{"turn": {"text": "hi"}}]}, Session)
    fetch = ("fetch(process.argv[1], {method: 'POST', body: JSON.stringify({messages: []})})"
             ".then(async r => console.log(r.status, (await r.text()).length > 0)).catch(e => console.log('error', e.message))")
    with Endpoint() as endpoint:
        base = endpoint.serve("mine", session)
        endpoint.serve("theirs", session)
        # where the runner puts it (a socket's path is at most 107 bytes; tmp_path can be longer)
        sock_dir = Path(tempfile.mkdtemp(prefix="cbledger-endpoint-"))
        request.addfinalizer(lambda: shutil.rmtree(sock_dir, ignore_errors=True))
        sock_dir.chmod(0o755)
        sock = endpoint.serve_socket("mine", sock_dir / "endpoint.sock")
        work = tmp_path / "work"
        work.mkdir()
        for url, expected in ((f"{base}/chat/completions", "200 true"),
                              (f"{endpoint.base_url('theirs')}/chat/completions", "404 true")):
            job = isolation.Job([node, "-e", fetch, url], work, {}, 30, network="endpoint", endpoint=(sock, endpoint.port), tools=(node,))
            out = isolation.run(job, confined)
            assert out.stdout.decode().strip() == expected, (out.stdout, out.stderr)


def test_the_write_limit_kills_the_sandbox(tmp_path):
    small = isolation.confinement(False, (), isolation.Limits(written_bytes=4 * 1024 * 1024))
    out = sh(tmp_path, "i=0; while :; do head -c 1048576 /dev/zero > f$i; i=$((i+1)); done", small, cap=60)
    assert out.killed is not None and "4 MiB write limit" in out.killed
    assert out.exit_code is None


_ORPHAN_RUNNER = """
import os, sys, threading, time
from pathlib import Path
from cbledger.runner import isolation
sandboxed, marker, workdir = sys.argv[1] == "1", sys.argv[2], Path(sys.argv[3])
plain = isolation.bwrap_argv
# neither bubblewrap's parent-death signal nor the lifeline: what the `timeout` backstop is for
isolation.bwrap_argv = lambda *a: [x for x in plain(*a) if x != "--die-with-parent"]
isolation._LIFELINE = 'exec "$@"'
how = isolation.confinement(not sandboxed, ())
job = isolation.Job(["/bin/sleep", marker], workdir, {}, 1)
threading.Thread(target=isolation.run, args=(job, how), daemon=True).start()
time.sleep(0.5)
os._exit(0)  # the runner dies without a word: no kill reaches the run
"""


@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandboxed", "unsandboxed"])
def test_a_run_whose_runner_died_ends_itself_past_its_cap(tmp_path, sandboxed):
    """A harness its runner could not take along (a Dask worker SIGKILLed before bubblewrap set
    its parent-death signal) ran on for good, unmetered; it ends `ORPHAN_MARGIN_SEC` past its cap."""
    marker = "600.0" + str(os.getpid())  # a sleep of about ten minutes, named by nothing else here
    subprocess.run([sys.executable, "-c", _ORPHAN_RUNNER, "1" if sandboxed else "0", marker, str(tmp_path)],
                   check=True, timeout=60)
    try:
        assert processes_with(marker), "the run did not outlive its runner, so nothing is tested"
        limit = time.monotonic() + 1 + isolation.ORPHAN_MARGIN_SEC + isolation.KILL_GRACE_SEC + 10
        while processes_with(marker) and time.monotonic() < limit:
            time.sleep(0.2)
        assert not processes_with(marker), "the orphaned run outlived its cap and margin"
    finally:
        for pid in processes_with(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


_DIES_AT_LAUNCH = """
import os, sys, threading, time
from pathlib import Path
from cbledger.runner import isolation
marker, workdir, delay = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])
real, launched = isolation.subprocess.Popen, threading.Event()
def launching(*args, **kwargs):
    proc = real(*args, **kwargs)
    launched.set()
    return proc
isolation.subprocess.Popen = launching
job = isolation.Job(["/bin/sleep", marker], workdir, {}, 600)
threading.Thread(target=isolation.run, args=(job, isolation.confinement(False, ())), daemon=True).start()
launched.wait(60)
time.sleep(delay)
os._exit(0)  # the runner gone as its sandbox starts (run on a thread, as a Dask worker runs it)
"""


def _run_processes(marker: str) -> list[int]:
    """The run's own processes (timeout, the command), not bubblewrap's."""
    found = []
    for pid in processes_with(marker):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/comm").read_text().strip() != "bwrap":
                found.append(pid)
    return found


def test_a_sandbox_whose_runner_died_as_it_launched_it_does_not_run(tmp_path):
    """A Dask worker or driver killed a moment after starting a sandbox, before bubblewrap had set
    its parent-death signal, left the harness running to its cap (a leaked sandbox was found after
    a CI run). The sandbox's lifeline ends it whenever its runner goes. What this does not cover:
    bubblewrap's own child, when its parent is killed during the namespace's set-up, can stay
    blocked there for good (asleep, having started nothing); it is killed below with the rest."""
    markers = [f"599.{n}{os.getpid()}" for n in range(10)]  # sleeps of ten minutes, named by nothing else
    try:
        for n, marker in enumerate(markers):  # killed 0 to 9 ms after the launch
            subprocess.run([sys.executable, "-c", _DIES_AT_LAUNCH, marker, str(tmp_path), str(n / 1000)], check=True, timeout=60)
        deadline = time.monotonic() + 5  # the kernel's teardown of a killed namespace is not instant
        while any(_run_processes(m) for m in markers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [m for m in markers if _run_processes(m)] == []
    finally:
        for pid in (p for m in markers for p in processes_with(m)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_the_sandbox_is_given_back_to_the_runner(tmp_path, confined):
    repo = pygit2.init_repository(str(tmp_path / "repo"))
    out = sh(Path(repo.workdir), "echo agent > made.txt", confined)
    assert out.exit_code == 0
    assert (Path(repo.workdir) / "made.txt").stat().st_uid == os.getuid()
    pygit2.Repository(repo.workdir)  # git refuses a repository another user owns


def test_a_run_the_ledger_refuses_is_kept_for_append_not_dropped(tmp_path, shared_real, kicad_cli, clean_env, monkeypatch):
    from cbledger.ledger.recorder import TornTail
    from cbledger.ledger.store import LedgerStore

    project = build_project(tmp_path, shared_real)
    real_append = LedgerStore.append
    refusals = iter([True])

    def torn_once(self, events, *args, **kwargs):
        if len(events) == 2 and next(refusals, False):
            raise TornTail(f"{project.ledger}: torn tail at byte 123 (run `cbledger repair --truncate-torn-tail`)")
        return real_append(self, events, *args, **kwargs)

    monkeypatch.setattr(LedgerStore, "append", torn_once)
    result = project.run(RENAME_TASK, REFUSAL_TASK, "--agent", "gold")
    assert result.exit_code != 0
    assert "the run is kept" in result.stderr and "cbledger append" in result.stderr
    (pending,) = project.runs_dir.glob("*.events.jsonl")
    run_id = pending.name.removesuffix(".events.jsonl")
    assert (project.runs_dir / f"{run_id}.bundle").is_file()
    assert len(project.runs()) == 1  # the other run landed; this one waits, complete
    appended = project.cli("append", pending)
    assert appended.exit_code == 0, appended.output
    assert {r.run_id for r in project.runs()} >= {run_id}
    assert project.cli("project", "all").exit_code == 0
    verify = project.cli("replay", "--verify")
    assert verify.exit_code == 0, verify.output
