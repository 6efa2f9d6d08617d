"""Runs on a real Dask cluster (a `dask scheduler` and two `dask worker` processes on loopback):
the same ledger as a local run of the same plan, an attempt's feedback passes too, a lost
worker's run retried once and recorded once, a worker without kicad-cli or copperhead refused at
registration. And, without a cluster, what the driver checks of what comes back (a run, an
attempt's passes) and that it appends each run as it finishes.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import time
from pathlib import Path

import msgspec
import pygit2
import pytest
from blake3 import blake3

from cbledger.errors import UserError
from cbledger.ledger.events import Ablations, RunRecorded
from cbledger.ledger.store import LedgerStore
from cbledger.runner.dask_executor import Activity, DaskCluster, received_attempt, received_output
from cbledger.runner.plan import make_plan
from cbledger.runner.preserve import restore
from cbledger.runner.remote import RemoteResult, RemoteRun
from cbledger.runner.shipping import (
    ShippedFile,
    arrived_fixture,
    arrived_task,
    pack_fixture,
    pack_task,
    unpack,
)
from cbledger.runner.suite_run import SuiteResult, _AsFinished, run_plan
from cbledger.tasks.catalog import Catalog
from cbledger.workspace import Workspace, bundle_name
from tests.conftest import REPO
from tests.dask_cluster import Cluster
from tests.factories import MAINTAINER, run_cli

TASKS = ["led-resistor-swap", "mcu-pullup-drift-flag"]
STAMPED_ID = re.compile(r"^(\d{8}T\d{6}Z)-(?P<planned>.+)-(?P<random>[0-9a-f]{6})$")
#: a campaign's run id: made from the campaign, the task, the slot and the attempt (`runner.campaign.run_id`)
CAMPAIGN_ID = re.compile(r"^[A-Za-z0-9._-]+-s\d+-a\d+$")
#: a later pass's id: pass 1's and its index, with a random suffix outside a campaign (`runner.passes.pass_run_id`)
PASS_ID = re.compile(r"^(?P<first>.+)-p(?P<index>\d+)(-[0-9a-f]{4})?$")
PASSES_TASK = "led-resistor-swap"  # allowed two passes (tasks/passes.json)
TWO_PASS_SESSION = REPO / "sessions" / "led-resistor-swap-two-pass.json"  # fails pass 1, passes pass 2
TRANSCRIPT = re.compile(r"^\.copperhead/runs/\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z/transcript\.jsonl$")


def project(base: Path) -> Path:
    """A copy of the bundled suite (its synthetic boards: no third-party data needed)."""
    root = base / "project"
    for part in ("fixtures", "tasks", "suites"):
        shutil.copytree(REPO / part, root / part)
    return root


def new_ledger(root: Path, name: str) -> Path:
    ledger = root / f"{name}.jsonl"
    for args in (("init", "--name", "dask-test"), ("suite", "bump", "--reason", "under test", "--skip-trial")):
        result = run_cli([*args, "--root", root, "--ledger", ledger])
        assert result.exit_code == 0, result.output
    return ledger


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, kicad_cli, copperhead_cli):
    made = Cluster(tmp_path_factory.mktemp("dask")).start()
    try:
        made.add_worker("w1")
        made.add_worker("w2")
        yield made
    finally:
        made.stop()


# --------------------------------------------------------------------------- what may differ


def normalized(ledger: Path) -> list[str]:
    """The ledger's events with exactly these replaced, after checking each has the shape of
    what it replaces:

    * every wall-clock time: each event's `at`, a run's `timings` (start, end and durations);
    * the batch id (one per `cbledger run`: its start time and a random suffix);
    * the run id's time stamp and random suffix, wherever the id appears (event ids, the grade's
      run id, the bundle's path, a later pass's `first` and `previous`): what is left is the
      planned part, `<model>-<task>-r<repeat>`, and for a later pass its index;
    * digests of bytes that carry a wall-clock time: the transcript (whose events are
      time-stamped, and whose directory is named by the start time), kicad-cli's ERC and DRC
      reports (which state when they were made), the commits made after the agent started (head,
      capture and evidence: a git commit carries its time) and the bundle holding them, and the
      cassette of a scripted run (each response's `created`, each exchange's `elapsedMs`, the
      sandbox's path: `cassettes` compares the rest);
    * of a run through the real harness, copperhead's own logs (they name the sandbox's path, the
      time-stamped run directory and the commit) and the duration it measured.

    Everything else must be byte for byte the same: the seed and baseline commits, the grades,
    every assertion outcome, the comparability stamp, the order of the events. The chain hashes
    follow from the bytes, so they are compared through the bytes rather than masked."""
    events = [json.loads(s.raw) for s in LedgerStore(ledger).read()]
    names: dict[str, str] = {}
    for e in events:
        if e["type"] == "run.recorded":
            run_id = e["body"]["runId"]
            later = PASS_ID.match(run_id)
            if later and later["first"] in names:
                names[run_id] = f"{names[later['first']]}-p{later['index']}"
                continue
            m = STAMPED_ID.match(run_id)
            assert m or CAMPAIGN_ID.match(run_id), run_id
            names[run_id] = f"RUN[{m['planned']}]" if m else f"RUN[{run_id}]"  # a campaign's is the same anywhere
    out = []
    for e in events:
        e.pop("seq")  # the line's position, compared by the list order
        assert e["at"].endswith("Z")
        e["at"] = "TIME"
        if e["type"] == "run.recorded":
            body = e["body"]
            for key in ("startedAt", "endedAt", "durationMs", "agentMs", "verifyMs"):
                assert key in body["timings"]
                body["timings"][key] = "TIME"
            for key in ("headSha", "captureSha", "evidenceSha"):
                assert re.fullmatch(r"[0-9a-f]{40}", body["sandbox"][key])
                body["sandbox"][key] = "COMMIT-AFTER-START"
            body["sandbox"]["storeBlake3"] = body["sandbox"]["storeBytes"] = "BUNDLE"
            assert re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{6}", body["batch"]), body["batch"]
            body["batch"] = "BATCH"
            for name in ("transcript", "erc", "drc", "harness-stdout", "harness-stderr"):
                if name not in body["evidence"] and name.startswith("harness-"):
                    continue  # a scripted agent's run has no harness logs
                digest = body["evidence"][name]
                digest["blake3"] = digest["bytes"] = "TIME-STAMPED"
            if body["evidence"].get("harness-stdout"):
                body["stats"]["durationMs"] = "TIME"
            assert TRANSCRIPT.match(body["evidence"]["transcript"]["path"])
            body["evidence"]["transcript"]["path"] = "TRANSCRIPT"
            if "cassette" in body:
                assert body["cassette"]["path"] == f"results/cassettes/{body['cassette']['blake3']}.json"
                body["cassette"]["blake3"] = body["cassette"]["bytes"] = body["cassette"]["path"] = "TIME-STAMPED"
        text = json.dumps(e, sort_keys=True)
        for run_id, name in sorted(names.items(), key=lambda n: -len(n[0])):  # a later pass's id holds pass 1's
            text = text.replace(run_id, name)
        out.append(text)
    return in_run_order(out)


def in_run_order(events: list[str]) -> list[str]:
    """Runs are appended as they finish, so the order of runs is the order they happened to end
    in: the events before the first run stay in place, and each run's pair (its run.recorded, then
    its grade.recorded, which must be adjacent) is put in the order of the pairs' text."""
    first = next((i for i, e in enumerate(events) if json.loads(e)["type"] == "run.recorded"), len(events))
    pairs = []
    for i in range(first, len(events), 2):
        run, grade = json.loads(events[i]), json.loads(events[i + 1])
        assert (run["type"], grade["type"]) == ("run.recorded", "grade.recorded"), (run["type"], grade["type"])
        assert grade["body"]["runId"] == run["body"]["runId"]
        pairs.append((events[i], events[i + 1]))
    return events[:first] + [e for pair in sorted(pairs) for e in pair]


def head_trees(root: Path, ledger: Path, scratch: Path, harness: bool = False) -> list[object]:
    """The tree of each run's head commit (the agent's own commit), restored from its bundle on
    a seed rebuilt from the fixture: the masked commit ids must still hold the same files. With
    `harness`, each tree's files but the real harness's run records (`.copperhead/runs/<time>/`,
    which copperhead commits with its work: named by the time and holding its transcript)."""
    catalog = Catalog(root)
    workspace = Workspace.at(root, ledger)  # a ledger's bundles are in its own results directory
    trees = []
    for stored in sorted(LedgerStore(ledger).read(types={"run.recorded"}), key=lambda s: s.event.body.run_id):
        run = stored.event.body
        assert isinstance(run, RunRecorded)
        bundle = workspace.stored(run.sandbox.store)
        assert bundle is not None, run.sandbox.store
        restored = restore(bundle, run.sandbox, catalog.fixture(run.fixture.id),
                           into=scratch / run.run_id)
        tree = restored.repo[run.sandbox.head_sha].peel(pygit2.Tree)
        trees.append(_files(tree) if harness else str(tree.id))
    return trees


def _files(tree: pygit2.Tree, prefix: str = "") -> dict[str, str]:
    found: dict[str, str] = {}
    for entry in tree:
        path = prefix + (entry.name or "")
        if path == ".copperhead/runs":
            continue
        if isinstance(entry, pygit2.Tree):
            found.update(_files(entry, path + "/"))
        else:
            found[path] = str(entry.id)
    return found


# --------------------------------------------------------------------------- with a cluster


@pytest.mark.slow
def test_local_and_dask_runs_of_a_plan_give_the_same_ledger(
    cluster: Cluster, tmp_path: Path, copperhead_cli: Path
) -> None:
    root = project(tmp_path)
    ledgers = {}
    for executor in ("local", "dask"):
        ledger = ledgers[executor] = new_ledger(root, executor)
        for agent in ("gold", "noop"):
            # the same copperhead as the workers' (the one beside this checkout)
            local = ["--jobs", "2", "--copperhead-cli", copperhead_cli]
            extra = ["--executor", "dask", "--scheduler", cluster.address] if executor == "dask" else local
            result = run_cli(["run", *TASKS, "--agent", agent, "--repeats", "1", "--no-project",
                              "--root", root, "--ledger", ledger, *extra])
            assert result.exit_code == 0, result.output
            if executor == "dask":
                assert "worker w1: started" in result.stderr or "worker w2: started" in result.stderr, result.stderr
    local, dask = normalized(ledgers["local"]), normalized(ledgers["dask"])
    assert len(local) == 3 + 2 * 2 * len(TASKS)  # ledger.created, suite.bumped, suite.archived, then the runs
    for i, (a, b) in enumerate(zip(local, dask, strict=True)):
        assert a == b, f"event {i + 1} differs"
    assert head_trees(root, ledgers["local"], tmp_path / "l") == head_trees(root, ledgers["dask"], tmp_path / "d")
    for ledger in ledgers.values():
        verified = run_cli(["replay", "--verify", "--no-projections", "--root", root, "--ledger", ledger])
        assert verified.exit_code == 0, verified.output  # every run restored and re-graded offline


def cassettes(root: Path, ledger: Path) -> list[object]:
    """Each run's cassette, in run order, with what carries a time or a place replaced."""
    def masked(value: object) -> object:
        if isinstance(value, dict):
            return {k: "MASKED" if k in ("created", "elapsedMs", "workdir") else masked(v) for k, v in value.items()}
        return [masked(v) for v in value] if isinstance(value, list) else value

    workspace = Workspace.at(root, ledger)
    found = []
    for stored in sorted(LedgerStore(ledger).read(types={"run.recorded"}), key=lambda s: s.event.body.run_id):
        ref = stored.event.body.cassette
        assert not isinstance(ref, msgspec.UnsetType), stored.event.body.run_id
        path = workspace.stored(ref.path)
        assert path is not None, ref.path
        found.append(masked(json.loads(path.read_text())))
    return found


def attempts(ledger: Path) -> list[tuple]:
    """Each event's type and, of a run, its task, pass index and allowance, the hints it was
    given and whether work was carried into it; of a grade, its verdict and failure category."""
    seen = []
    for stored in LedgerStore(ledger).read(types={"run.recorded", "grade.recorded"}):
        body = stored.event.body
        if isinstance(body, RunRecorded):
            ref = body.passes
            assert not isinstance(ref, msgspec.UnsetType), body.run_id
            seen.append(("run.recorded", body.task.id, ref.index, ref.allowed, len(ref.hints), ref.carried_over))
        else:
            seen.append(("grade.recorded", body.verdict, body.failure_category))
    return seen


@pytest.mark.slow
@pytest.mark.parametrize(
    "agent, last_verdict",
    [
        (["--agent", "noop"], "fail"),  # changes nothing: fails both passes, told the hints on pass 2
        (["--agent", "copperhead", "--session", str(TWO_PASS_SESSION)], "pass"),  # fails pass 1, passes pass 2
    ],
    ids=["noop", "scripted-two-pass"],
)
def test_an_attempts_passes_on_dask_are_recorded_as_a_local_attempts_are(
    cluster: Cluster, tmp_path: Path, copperhead_cli: Path, agent: list[str], last_verdict: str,
) -> None:
    root = project(tmp_path)
    ledgers = {}
    for executor in ("local", "dask"):
        ledger = ledgers[executor] = new_ledger(root, executor)
        extra = (["--executor", "dask", "--scheduler", cluster.address] if executor == "dask"
                 else ["--copperhead-cli", copperhead_cli])
        result = run_cli(["run", PASSES_TASK, *agent, "--repeats", "1", "--passes", "2", "--no-project",
                          "--root", root, "--ledger", ledger, *extra])
        assert result.exit_code == 0, result.output
        assert "pass 1/2: fail" in result.output and "pass 2/2: " in result.output, result.output
    local = attempts(ledgers["local"])
    assert len(local) == 4 and local[0] == ("run.recorded", PASSES_TASK, 1, 2, 0, False)
    assert local[2][:4] == ("run.recorded", PASSES_TASK, 2, 2) and local[2][4] > 0  # pass 2, told its hints
    assert (local[1][:2], local[3][:2]) == (("grade.recorded", "fail"), ("grade.recorded", last_verdict))
    assert attempts(ledgers["dask"]) == local
    local_events, dask_events = normalized(ledgers["local"]), normalized(ledgers["dask"])
    for i, (a, b) in enumerate(zip(local_events, dask_events, strict=True)):
        assert a == b, f"event {i + 1} differs"
    harness = "--session" in agent
    assert (head_trees(root, ledgers["local"], tmp_path / "l", harness)
            == head_trees(root, ledgers["dask"], tmp_path / "d", harness))
    if harness:  # each pass's exchanges came back with it
        assert cassettes(root, ledgers["local"]) == cassettes(root, ledgers["dask"])
    verified = run_cli(["replay", "--verify", "--no-projections", "--root", root, "--ledger", ledgers["dask"]])
    assert verified.exit_code == 0, verified.output  # both passes restored and re-graded offline


@pytest.mark.slow
def test_a_run_whose_worker_is_lost_is_retried_once_and_recorded_once(cluster: Cluster, tmp_path: Path) -> None:
    root = project(tmp_path)
    ledger = new_ledger(root, "lost")
    workspace = Workspace.at(root, ledger)
    plan = make_plan(Catalog(root), agent="gold", model=None, suite=None, task_ids=TASKS[:1], repeats=1,
                     ablations=Ablations())
    seen: list[Activity] = []
    killed: list[str] = []

    def on_activity(activity: Activity) -> None:
        seen.append(activity)
        if activity.kind == "started" and not killed:
            killed.append(activity.worker)
            cluster.kill(activity.worker)  # mid-run: the run has only just started there

    try:
        result = run_plan(workspace, plan, sandbox_root=tmp_path / "sandboxes", executor="dask",
                          scheduler=cluster.address, on_activity=on_activity)
    finally:
        for name in killed:
            cluster.add_worker(name)  # for the tests after this one
    assert killed and not result.failures, result.failures
    [output] = result.outputs
    starts = [a.worker for a in seen if a.kind == "started"]
    assert len(starts) == 2 and starts[0] == killed[0] and starts[1] != killed[0]
    assert any(a.kind == "lost" and a.worker == killed[0] for a in seen)
    runs = list(LedgerStore(ledger).read(types={"run.recorded"}))
    assert [json.loads(r.raw)["body"]["runId"] for r in runs] == [output.run.run_id]
    assert len(list(LedgerStore(ledger).read(types={"grade.recorded"}))) == 1
    assert output.final.is_file() and not output.staged.exists()


def test_a_driver_that_loses_its_campaign_cancels_the_runs_not_yet_back(cluster: Cluster, tmp_path: Path) -> None:
    """On Dask the hold was taken before the runs were submitted and asked for none after: a
    driver whose hold a server restart handed to another driver went on running every slot, and
    each slot both ran was paid twice. It now asks as the runs go, and cancels the rest."""
    from cbledger.ledger.recorder import Lease

    root = project(tmp_path)
    ledger = new_ledger(root, "taken")
    workspace = Workspace.at(root, ledger)
    plan = make_plan(Catalog(root), agent="gold", model=None, suite=None, task_ids=TASKS[:1], repeats=6,
                     ablations=Ablations())

    class Taken(Lease):
        def lost(self) -> str | None:
            return "driver elsewhere (pid 1) holds campaign c since now"

    result = run_plan(workspace, plan, sandbox_root=tmp_path / "sandboxes", executor="dask",
                      scheduler=cluster.address, lease=Taken())
    assert result.failures == [] and result.taken_over == "driver elsewhere (pid 1) holds campaign c since now"
    assert len(result.outputs) + len(result.not_run) == 6 and len(result.not_run) >= 2, (result.outputs, result.not_run)
    assert all(why == "not run: another driver holds the campaign now" for _, why in result.not_run)
    assert len(list(LedgerStore(ledger).read(types={"run.recorded"}))) == len(result.outputs)


def test_no_more_runs_go_out_than_the_workers_have_threads_and_none_once_the_hold_is_gone() -> None:
    """Every slot was submitted up front: a driver stopped while its hold was taken had its whole
    queued plan run by the workers beside the new driver's, every slot paid twice."""
    from types import SimpleNamespace

    from cbledger.runner.dask_executor import _Window

    submitted: list[int] = []
    threads, held = [2], [True]
    window = _Window([SimpleNamespace(index=i) for i in range(6)], lambda spec: submitted.append(spec.index),
                     lambda: threads[0], lambda: held[0])
    window.fill()
    assert submitted == [0, 1]
    window.fill()
    assert submitted == [0, 1]  # full: nothing more until one comes back
    window.done(0)
    assert submitted == [0, 1, 2]
    threads[0] = 3  # a worker joined
    window.fill()
    assert submitted == [0, 1, 2, 3]
    held[0] = False  # the campaign was taken: what is out stays out, nothing more goes
    window.done(1)
    window.done(2)
    assert submitted == [0, 1, 2, 3] and list(window.waiting) != []
    threads[0], held[0] = 0, True  # no worker yet: one run waits on the scheduler for the first
    empty = _Window([SimpleNamespace(index=9)], lambda spec: submitted.append(spec.index), lambda: 0, lambda: True)
    empty.fill()
    assert submitted[-1] == 9


def test_a_driver_registering_the_plugin_keeps_the_endpoint_other_runs_are_using(monkeypatch) -> None:
    """Each driver registers the requirements plugin; Dask tears the previous one down to do so,
    and its teardown closed the worker's endpoint under every scripted run in flight."""
    from types import SimpleNamespace

    from cbledger.runner import remote

    closed: list[bool] = []
    monkeypatch.setattr(remote, "_ENDPOINT", SimpleNamespace(close=lambda: closed.append(True)))
    plugin = remote.RequirementsPlugin()
    plugin.teardown(SimpleNamespace(status=SimpleNamespace(name="running")))
    assert closed == []
    plugin.teardown(SimpleNamespace(status=SimpleNamespace(name="closing")))
    assert closed == [True]


def test_a_run_that_lost_its_worker_on_each_try_is_reported_with_the_workers_and_how_to_try_again() -> None:
    from types import SimpleNamespace

    from distributed import KilledWorker

    seen: list[Activity] = []
    executor = DaskCluster("tcp://127.0.0.1:1", on_activity=seen.append)  # not entered: nothing connects
    spec = SimpleNamespace(label="led-resistor-swap r1")
    message = executor._failed(spec, KilledWorker("cbledger-run-x-0", SimpleNamespace(address="tcp://w2"), 1), ["w1", "w2"])  # type: ignore[arg-type]
    assert message == ("the worker running it was lost on each of its 2 tries (on w1, w2); "
                       "not recorded (run the campaign again: it runs the missing slots)")
    assert [(a.kind, a.label, a.detail) for a in seen] == [("failed", "led-resistor-swap r1", message)]


@pytest.mark.slow
@pytest.mark.parametrize(
    "env, reason",
    [
        ({"CBLEDGER_KICAD_CLI": "/nonexistent/kicad-cli"}, "kicad-cli not found"),
        ({"COPPERHEAD_CLI": "/nonexistent/cli.js"}, "copperhead CLI /nonexistent/cli.js does not exist"),
    ],
    ids=["no-kicad-cli", "no-copperhead"],
)
def test_a_worker_without_its_tools_is_refused_at_registration(
    cluster: Cluster, env: dict[str, str], reason: str
) -> None:
    seen: list[Activity] = []
    name = "bad-" + ("kicad" if "KICAD" in next(iter(env)) else "copperhead")
    with DaskCluster(cluster.address, seen.append):
        proc = cluster.add_worker(name, env=env, wait=False)
        proc.wait(60)  # it closes itself once refused
        deadline = time.monotonic() + 30
        while not any(a.kind == "refused" for a in seen) and time.monotonic() < deadline:
            time.sleep(0.1)
    refused = [a for a in seen if a.kind == "refused"]
    assert [a.worker for a in refused] == [name]
    assert reason in refused[0].detail
    assert f"worker {name} refused: " in cluster.log(name) and reason in cluster.log(name)
    assert not any(a.kind == "accepted" and a.worker == name for a in seen)


@pytest.mark.slow
def test_a_driver_with_no_worker_says_so_and_names_an_earlier_refusal(tmp_path: Path, kicad_cli, copperhead_cli) -> None:
    """A worker refused and closed itself before the driver came; the driver then waited 120 s in
    silence and said only "no worker connected", nothing of the refusal."""
    lonely = Cluster(tmp_path / "dask").start()
    try:
        with DaskCluster(lonely.address, lambda _a: None):  # registers the requirements plugin
            lonely.add_worker("bad", env={"COPPERHEAD_CLI": "/nonexistent/cli.js"}, wait=False).wait(60)
        seen: list[Activity] = []
        with DaskCluster(lonely.address, seen.append):
            pass
    finally:
        lonely.stop()
    refused = [a for a in seen if a.kind == "refused"]
    assert [a.worker for a in refused] == ["bad"] and "does not exist" in refused[0].detail
    assert "before this driver connected" in refused[0].detail
    [waiting] = [a for a in seen if a.kind == "waiting"]
    assert f"no worker is connected to {lonely.address}" in waiting.detail and "120 s" in waiting.detail


# --------------------------------------------------------------------------- without one


def test_packages_are_checked_on_arrival(tmp_path: Path) -> None:
    catalog = Catalog(REPO)
    task = catalog.task(TASKS[0])
    fixture = catalog.fixture_for(task)
    task_pkg, fixture_pkg = pack_task(task), pack_fixture(fixture)
    cache = tmp_path / "cache"
    assert arrived_task(task_pkg, task_pkg.digest, task.manifest_hash, cache).manifest_hash == task.manifest_hash
    arrived = arrived_fixture(fixture_pkg, fixture_pkg.digest, cache)
    assert (arrived.tree / fixture.manifest.artifacts.schematic).read_bytes() == (
        fixture.tree / fixture.manifest.artifacts.schematic).read_bytes()

    first = fixture_pkg.files[0]
    tampered = msgspec.structs.replace(fixture_pkg, files=(ShippedFile(first.path, first.data + b" "), *fixture_pkg.files[1:]))
    with pytest.raises(UserError, match="arrived with content digest"):
        unpack(tampered, fixture_pkg.digest, tmp_path / "other")
    with pytest.raises(UserError, match="manifest hash"):
        arrived_task(task_pkg, task_pkg.digest, "0" * 64, cache)
    escaping = msgspec.structs.replace(task_pkg, files=(ShippedFile("../outside", b"x"),))
    escaping = msgspec.structs.replace(escaping, digest=_digest(escaping))
    with pytest.raises(UserError, match="leaves its directory"):
        unpack(escaping, escaping.digest, tmp_path / "third")
    assert not (tmp_path / "outside").exists()


def _digest(package) -> str:
    from cbledger.runner.shipping import content_digest

    return content_digest(package.files)


def test_a_bundle_that_does_not_match_its_event_is_refused(tmp_path: Path) -> None:
    from tests.factories import grade_recorded, run_recorded

    run, grade = run_recorded(1), grade_recorded(1)
    bundle = b"not the bundle"
    ref = run.body.sandbox
    good = msgspec.structs.replace(ref, store=bundle_name(run.body.run_id), store_blake3=blake3(bundle).hexdigest(),
                                   store_bytes=len(bundle))
    run = msgspec.structs.replace(run, body=msgspec.structs.replace(run.body, sandbox=good))
    output = received_output(tmp_path, RemoteResult(0, "w1", [run, grade], bundle))
    assert output.staged.read_bytes() == bundle and output.final == tmp_path / good.store
    with pytest.raises(UserError, match="arrived as 15 bytes"):
        received_output(tmp_path, RemoteResult(0, "w1", [run, grade], bundle + b"!"))
    with pytest.raises(UserError, match=r"without run\.recorded"):
        received_output(tmp_path, RemoteResult(0, "w1", [grade, run], bundle))


def test_a_cassette_travels_with_its_run_and_must_match_its_event(tmp_path: Path) -> None:
    from cbledger.ledger.events import CassetteRef
    from cbledger.workspace import cassette_name
    from tests.factories import grade_recorded, run_recorded

    run, grade = run_recorded(1), grade_recorded(1)
    bundle, tape = b"the bundle", b'{"format":"cbledger-cassette/1"}\n'
    ref = msgspec.structs.replace(run.body.sandbox, store=bundle_name(run.body.run_id), store_blake3=blake3(bundle).hexdigest(),
                                  store_bytes=len(bundle))
    digest = blake3(tape).hexdigest()
    named = CassetteRef(path=cassette_name(digest), blake3=digest, bytes=len(tape), exchanges=0)
    with_tape = msgspec.structs.replace(run, body=msgspec.structs.replace(run.body, sandbox=ref, cassette=named))
    output = received_output(tmp_path, RemoteResult(0, "w1", [with_tape, grade], bundle, tape))
    assert output.cassette is not None and output.cassette[0].read_bytes() == tape
    assert output.cassette[1] == tmp_path / "results" / "cassettes" / f"{digest}.json"
    with pytest.raises(UserError, match="is not the one its event names"):
        received_output(tmp_path, RemoteResult(0, "w1", [with_tape, grade], bundle, tape + b" "))
    with pytest.raises(UserError, match="is not the one its event names"):
        received_output(tmp_path, RemoteResult(0, "w1", [with_tape, grade], bundle))
    without = msgspec.structs.replace(run, body=msgspec.structs.replace(run.body, sandbox=ref))
    with pytest.raises(UserError, match="a cassette its event does not name"):
        received_output(tmp_path, RemoteResult(0, "w1", [without, grade], bundle, tape))


def test_runs_are_appended_as_they_finish(tmp_path: Path) -> None:
    store = LedgerStore(tmp_path / "events.jsonl")
    store.init("order", MAINTAINER)
    result = SuiteResult()
    heard: list[str | None] = []
    order = _AsFinished(store, result, 4, lambda _o, error, _d, _t: heard.append(error))
    order.finish(("c r1", "x"))
    assert heard == ["c r1: x"]  # no waiting for the runs planned before it
    order.finish(None)  # never started: nothing to say
    order.finish(("a r1", "x"))
    assert [label for label, _ in result.failures] == ["c r1", "a r1"]
    assert heard == ["c r1: x", "a r1: x"]


def _pass_result(n: int, ref, bundle: bytes, worker: str = "w1", index: int = 0) -> RemoteResult:
    from tests.factories import grade_recorded, run_recorded

    run, grade = run_recorded(n), grade_recorded(n)
    sandbox = msgspec.structs.replace(run.body.sandbox, store=bundle_name(run.body.run_id),
                                      store_blake3=blake3(bundle).hexdigest(), store_bytes=len(bundle))
    body = msgspec.structs.replace(run.body, sandbox=sandbox, passes=msgspec.UNSET if ref is None else ref)
    return RemoteResult(index, worker, [msgspec.structs.replace(run, body=body), grade], bundle)


def test_an_attempts_passes_are_received_in_order_each_naming_its_place(tmp_path: Path) -> None:
    from cbledger.ledger.events import PassRef
    from cbledger.runner.execute import RunOutput
    from tests.factories import run_id

    spec = RemoteRun(
        index=0, label="t r1", task_id="t", task_digest="d", manifest_hash="h", fixture_id="f", fixture_digest="d",
        model_id="m", repeat=1, repeats_planned=1, agent="noop", run_mode="noop", suite_version="1.0.0",
        price_table=None, ablations=Ablations(), actor=MAINTAINER, segment_override=None, passes=2,
    )
    first = _pass_result(1, PassRef(index=1, allowed=2), b"pass one")
    second = _pass_result(2, PassRef(index=2, allowed=2, first=run_id(1), previous=run_id(1), hints=["h"]), b"pass two")
    got = received_attempt(tmp_path, spec, [first, second])
    assert [o.run.run_id for o in got if isinstance(o, RunOutput)] == [run_id(1), run_id(2)]
    assert [o.staged.read_bytes() for o in got if isinstance(o, RunOutput)] == [b"pass one", b"pass two"]
    [alone] = received_attempt(tmp_path, spec, [first])  # passed at pass 1: no pass 2
    assert isinstance(alone, RunOutput)
    with pytest.raises(UserError, match="came back with 3 passes; 2 allowed"):
        received_attempt(tmp_path, spec, [first, second, second])
    with pytest.raises(UserError, match="came back with 0 passes"):
        received_attempt(tmp_path, spec, [])
    # a pass that does not name its place, or whose bundle is not its own, ends the attempt there
    misplaced = _pass_result(2, PassRef(index=2, allowed=2, first=run_id(7), previous=run_id(7)), b"pass two")
    for bad, why in [
        (misplaced, "came back as pass 2 of 2, after run-000001, but its event says pass 2 of 2 after run-000007"),
        (_pass_result(2, None, b"pass two"), "its event says no pass"),
        (dataclasses.replace(second, bundle=b"other"), "arrived as 5 bytes"),
        (dataclasses.replace(second, index=3), "a pass of run 3 came back as t r1's"),
    ]:
        staged = Workspace.at(tmp_path).staged_bundle(run_id(2))
        staged.unlink(missing_ok=True)
        kept, refused = received_attempt(tmp_path, spec, [first, bad])
        assert isinstance(kept, RunOutput) and kept.run.run_id == run_id(1)
        assert isinstance(refused, tuple) and refused[0] == "t r1 pass 2" and why in refused[1], refused
        assert not staged.exists()  # nothing of a refused pass is left staged
    # an attempt of one pass names none, as a local run of one pass does
    one = dataclasses.replace(spec, passes=1)
    assert isinstance(received_attempt(tmp_path, one, [_pass_result(1, None, b"a run")])[0], RunOutput)
    [(label, why)] = received_attempt(tmp_path, one, [first])
    assert label == "t r1" and "names a pass, in an attempt of one" in why


def test_passes_are_no_longer_refused_on_dask(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cbledger.runner import suite_run

    root = project(tmp_path)
    ledger = new_ledger(root, "refusal")
    handed: dict = {}
    monkeypatch.setattr(suite_run, "_run_on_dask", lambda *a, **kw: handed.update(kw) or SuiteResult())
    plan = make_plan(Catalog(root), agent="noop", model=None, suite=None, task_ids=[PASSES_TASK, TASKS[1]],
                     repeats=1, ablations=Ablations())
    run_plan(Workspace.at(root, ledger), plan, sandbox_root=tmp_path / "sandboxes", executor="dask",
             scheduler="tcp://127.0.0.1:1", passes=3)
    assert handed["allowed"] == {PASSES_TASK: 2, TASKS[1]: 1}  # each task's allowance, capped by --passes
