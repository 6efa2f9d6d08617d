"""The worker's half of a run on a Dask cluster: what a `dask worker` process does with one
planned run, and the plugin that decides at registration whether it may run any.

A worker receives a `RemoteRun` (the run as data: task and fixture named by content digest, the
suite version, the price table, the caps in the shipped task) and the two packages it names,
checks the packages on arrival (`runner.shipping`), and then runs exactly what a local run runs:
`execute()`, with its own kicad-cli and copperhead and a sandbox under its own directory, or, for
an attempt allowed more than one feedback pass, `execute_passes()`: every pass on one sandbox,
pass after pass, as a local run takes them. It returns one `RemoteResult` per pass, in order
(each pass's two events, its bundle's bytes, its cassette), and writes nothing anywhere else: the
driver alone appends, and it alone puts the bundles under `results/`.

The environment half of the comparability stamp is the worker's own (its kicad-cli, copperhead,
Python, platform), which is why the plugin refuses a worker whose tools are missing or differ
from the ones the driver asked for. A model's credentials, when a run needs one, are read from
the worker's own environment: none crosses the network.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distributed import Reschedule, WorkerPlugin, get_worker

import cbledger
from cbledger.errors import UserError
from cbledger.kicad.oracle import kicad_cli
from cbledger.ledger.events import Ablations, Actor, EventBase, PricingPublished
from cbledger.ledger.types import RunMode
from cbledger.runner import isolation
from cbledger.runner.agents.base import Agent
from cbledger.runner.agents.copperhead import CopperheadAgent, CopperheadCli, locate
from cbledger.runner.agents.scripted import GoldAgent, NoopAgent
from cbledger.runner.endpoint.script import Session
from cbledger.runner.endpoint.server import Endpoint
from cbledger.runner.environment import Environment, probe
from cbledger.runner.execute import RunOutput, RunSettings, execute
from cbledger.runner.passes import execute_passes
from cbledger.runner.plan import PlannedRun
from cbledger.runner.shipping import Package, arrived_fixture, arrived_task
from cbledger.tasks.catalog import Catalog, Fixture

log = logging.getLogger("cbledger.remote")

PLUGIN_NAME = "cbledger-requirements"
#: the topic workers report on: which run they started, and refusals
TOPIC = "cbledger"
#: where this process's checkout would have installed copperhead (scripts/install-copperhead)
CHECKOUT = Path(cbledger.__file__).resolve().parent.parent


@dataclass(frozen=True)
class RemoteRun:
    index: int  # the run's place in the plan: the driver appends in this order
    label: str  # "<task> r<repeat>", as progress names it
    task_id: str
    task_digest: str
    manifest_hash: str
    fixture_id: str
    fixture_digest: str
    model_id: str
    repeat: int
    repeats_planned: int
    agent: str  # gold | noop | copperhead
    run_mode: RunMode
    suite_version: str
    price_table: PricingPublished | None
    ablations: Ablations
    actor: Actor
    segment_override: str | None
    session: Session | None = None
    #: run without the agent sandbox (the driver's --unsandboxed); recorded on the run
    unsandboxed: bool = False
    #: the driver's `cbledger run` invocation (`run.recorded` `batch`)
    batch: str | None = None
    #: the passes this attempt may take (`suite_run.passes_allowed`); more than one runs
    #: `execute_passes` on one sandbox, and each pass comes back as a `RemoteResult` of its own
    passes: int = 1
    #: the campaign slot and attempt the run fills (`PlannedRun`), which name its run id
    campaign: str | None = None
    slot: int = 0
    attempt: int = 1


@dataclass(frozen=True)
class RemoteResult:
    """One pass of an attempt (an attempt of one pass: the run) as a worker returns it."""

    index: int
    worker: str
    events: list[EventBase]
    bundle: bytes
    #: the run's cassette, when its exchanges were recorded (`run.recorded.cassette` names it)
    cassette: bytes | None = None


def worker_name(worker: Any) -> str:
    name = worker.name
    return name if isinstance(name, str) and name and name != worker.address else str(worker.address)


def local_copperhead() -> CopperheadCli | None:
    """The copperhead this worker runs: `$COPPERHEAD_CLI`, else the install beside its checkout."""
    return locate(None, CHECKOUT)


def refusal() -> str | None:
    """Why this process may not run cbledger runs (no kicad-cli, no copperhead), or None.

    Versions are not required to match the driver's: each run's comparability stamp records the
    versions it ran with, and a plugin that closed every worker whose tools differ from one
    driver's would let any driver on a shared cluster close everyone else's workers."""
    problems = []
    if kicad_cli() is None:
        problems.append("kicad-cli not found (not on PATH, or $CBLEDGER_KICAD_CLI names nothing runnable)")
    try:
        copperhead = local_copperhead()
    except UserError as exc:
        problems.append(str(exc))
    else:
        if copperhead is None:
            problems.append("the copperhead CLI not found (set $COPPERHEAD_CLI, or run scripts/install-copperhead)")
    return "; ".join(problems) or None


class RequirementsPlugin(WorkerPlugin):
    """A Dask worker plugin: at registration (and on every worker already there when a driver
    registers it) it checks that the worker has kicad-cli and copperhead; a worker that has not
    is refused: it reports why on the cbledger topic, logs it, and closes itself (and its
    nanny), so no run lands on it."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self.refused: str | None = None
        self.worker: str | None = None

    def setup(self, worker: Any) -> None:
        self.worker = worker_name(worker)
        self.refused = refusal()
        if self.refused is None:
            worker.log_event(TOPIC, {"kind": "accepted", "name": self.worker})
            return
        message = f"worker {self.worker} refused: {self.refused}"
        log.error("cbledger: %s", message)
        worker.log_event(TOPIC, {"kind": "refused", "name": self.worker, "why": self.refused})
        # Closing from inside setup would deadlock the registration that called it.
        asyncio.get_running_loop().call_later(
            0.2, lambda: asyncio.ensure_future(worker.close(nanny=True, reason=f"cbledger: {message}"))
        )

    def teardown(self, worker: Any) -> None:
        """Closes the loopback endpoint only with the worker. Each driver registers this plugin
        when it connects, and Dask tears the previous one down to do so: closing the endpoint then
        cut the scripted runs in flight on this worker, another driver's campaign's included, and
        they were recorded `provider-transport`. The next plugin serves from the same endpoint."""
        status = getattr(getattr(worker, "status", None), "name", "closing")
        if status in WORKER_GOING:
            _ENDPOINT.close()


#: worker states in which a plugin's teardown is the worker's end, not a driver replacing the plugin
WORKER_GOING = frozenset({"stopping", "stopped", "closing", "closing_gracefully", "closed", "failed"})


def verdict(dask_worker: Any) -> str | None:
    """For `Client.run`: None if this worker accepted the requirements, else why not."""
    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    if plugin is None:
        return "the cbledger plugin is not registered here"
    refused: str | None = getattr(plugin, "refused", "not checked")
    return refused


class _SharedEndpoint:
    """One loopback endpoint per worker process, started by the first scripted run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._endpoint: Endpoint | None = None

    def get(self) -> Endpoint:
        with self._lock:
            if self._endpoint is None:
                self._endpoint = Endpoint().start()
            return self._endpoint

    def close(self) -> None:
        with self._lock:
            if self._endpoint is not None:
                self._endpoint.close()
                self._endpoint = None


_ENDPOINT = _SharedEndpoint()
_ENVIRONMENT: dict[str, Environment] = {}
_ENV_LOCK = threading.Lock()


def _environment(cli: CopperheadCli | None) -> Environment:
    key = str(cli.script) if cli else ""
    with _ENV_LOCK:
        if key not in _ENVIRONMENT:
            _ENVIRONMENT[key] = probe(cli)
        return _ENVIRONMENT[key]


@dataclass
class _ShippedCatalog(Catalog):
    """A catalog of the fixtures that were shipped, for `execute()` to find a task's fixture."""

    shipped: dict[str, Fixture] | None = None

    def fixture(self, fixture_id: str) -> Fixture:
        found = (self.shipped or {}).get(fixture_id)
        if found is None:
            raise UserError(f"fixture {fixture_id} was not shipped with this run")
        return found


def _agent(spec: RemoteRun, cli: CopperheadCli | None, confinement: isolation.Confinement) -> Agent:
    if spec.agent == "gold":
        return GoldAgent()
    if spec.agent == "noop":
        return NoopAgent()
    if spec.agent == "copperhead" and cli is not None:
        if spec.session is not None:
            return CopperheadAgent(cli, _ENDPOINT.get(), {spec.task_id: spec.session}, confinement)
        return CopperheadAgent(cli, confinement=confinement)
    raise UserError(f"agent {spec.agent} does not run on a worker")


def run_remote(spec: RemoteRun, task_package: Package, fixture_package: Package) -> list[RemoteResult]:
    """One planned attempt on this worker (the function the driver submits): its passes, in order."""
    worker = get_worker()
    if verdict(worker) is not None:
        raise Reschedule()  # refused here, and closing: somewhere else
    name = worker_name(worker)
    worker.log_event(TOPIC, {"kind": "started", "name": name, "key": str(worker.get_current_task()), "label": spec.label})
    base = Path(worker.local_directory) / "cbledger"
    task = arrived_task(task_package, spec.task_digest, spec.manifest_hash, base / "packages")
    fixture = arrived_fixture(fixture_package, spec.fixture_digest, base / "packages")
    cli = local_copperhead()
    root = base / "project"
    # confined here as on the driver: bubblewrap, or (the driver's --unsandboxed) nothing
    confinement = isolation.confinement(spec.unsandboxed, (root, base / "sandboxes"))
    settings = RunSettings(
        root=root,
        catalog=_ShippedCatalog(root, shipped={fixture.id: fixture}),
        agent=_agent(spec, cli, confinement),
        run_mode=spec.run_mode,
        suite_version=spec.suite_version,
        environment=_environment(cli),
        price_table=spec.price_table,
        ablations=spec.ablations,
        sandbox_root=base / "sandboxes",
        keep_sandboxes=False,
        copperhead=cli,
        actor=spec.actor,
        segment_override=spec.segment_override,
        confinement=confinement,
        batch=spec.batch,
    )
    settings.sandbox_root.mkdir(parents=True, exist_ok=True)
    planned = PlannedRun(task, spec.model_id, spec.repeat, spec.repeats_planned, spec.campaign, spec.slot, spec.attempt)
    key = worker.get_current_task()

    def abandoned() -> str | None:
        # the scheduler releases a run no client wants any longer (its driver died): the worker
        # marks it cancelled, and nothing would collect what it makes
        state = worker.state.tasks.get(key)
        if state is None or state.state in ("cancelled", "released", "forgotten"):
            return f"run {spec.label}: its driver cancelled it or went away; stopped on worker {name}"
        return None

    outputs: list[RunOutput] = []
    try:
        with isolation.abandon_when(abandoned):
            outputs = execute_passes(settings, planned, spec.passes) if spec.passes > 1 else [execute(settings, planned)]
            # a run abandoned while it graded (no process to kill) is not shipped to no one either
            isolation.give_up()
        return [_shipped(spec.index, name, output) for output in outputs]
    except isolation.Abandoned as gone:
        log.warning("%s", gone)
        raise UserError(str(gone)) from None
    finally:
        for output in outputs:
            output.discard_staged()


def _shipped(index: int, worker: str, output: RunOutput) -> RemoteResult:
    """A pass's events and the bytes of the files it staged here, which the caller removes."""
    cassette = output.cassette[0].read_bytes() if output.cassette is not None else None
    return RemoteResult(index, worker, output.events, output.staged.read_bytes(), cassette)
