"""Running a plan: preflight, then every planned run, `--jobs` at a time, appending as they land.

Preflight refuses early and clearly, before any sandbox exists: an unknown suite or task, a task
whose fixture hash does not match (or whose suite version was not bumped), kicad-cli missing,
the copperhead CLI missing for agent runs, an unsafe model id, a model with no price-table entry,
a `compat:` model without `$COPPERHEAD_BASE_URL`, a task whose mode the copperhead adapter does
not drive yet.
A run that fails on its own (a secret found, an agent crash) is reported and the suite continues.

Progress goes out through the `on_done` callback, once per planned run; how it is shown (a bar on
a terminal, a line per run in a log) is the command line's business, not the runner's.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from cbledger import credentials
from cbledger.errors import UserError
from cbledger.grading import suite_version
from cbledger.kicad.oracle import require_kicad_cli
from cbledger.ledger.events import Actor
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.types import RunMode
from cbledger.runner import isolation, ledger_view
from cbledger.runner.agents.base import Agent
from cbledger.runner.agents.copperhead import (
    CopperheadAgent,
    CopperheadCli,
    agent_environment,
    locate,
)
from cbledger.runner.agents.scripted import GoldAgent, NoopAgent
from cbledger.runner.endpoint import sessions as session_lookup
from cbledger.runner.endpoint.server import Endpoint
from cbledger.runner.environment import probe
from cbledger.runner.execute import RunOutput, RunSettings, execute, model_identity, publish
from cbledger.runner.plan import Plan, check_jobs
from cbledger.tasks.catalog import Catalog
from cbledger.tasks.validate import ensure_runnable
from cbledger.workspace import Workspace

# (the run, or None when it failed to record; the failure; runs done; runs planned)
OnDone = Callable[[RunOutput | None, str | None, int, int], None]


@dataclass
class SuiteResult:
    outputs: list[RunOutput] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (planned run, error)

    @property
    def passed(self) -> int:
        return sum(1 for o in self.outputs if o.grade.verdict == "pass")


def build_agent(
    plan: Plan,
    copperhead_cli: str | None,
    workspace: Workspace,
    sessions: dict | None = None,
    endpoint=None,
    confinement: isolation.Confinement | None = None,
) -> tuple[Agent, RunMode, CopperheadCli | None]:
    if plan.agent == "gold":
        return GoldAgent(), "gold", None
    if plan.agent == "noop":
        return NoopAgent(), "noop", None
    if plan.agent == "copperhead":
        cli = locate(copperhead_cli, workspace.root)
        if cli is None:
            raise UserError(
                "--agent copperhead needs the copperhead CLI: run scripts/install-copperhead, "
                "or pass --copperhead-cli PATH/cli.js or set $COPPERHEAD_CLI"
            )
        if sessions is not None:
            return CopperheadAgent(cli, endpoint, sessions, confinement), "scripted", cli
        return CopperheadAgent(cli, confinement=confinement), "agent", cli
    if plan.agent == "replay":
        from cbledger.runner.agents.replay import ReplayAgent

        return ReplayAgent(workspace.root, workspace.ledger), "replay", None
    raise UserError(f"unknown agent {plan.agent}")


def _setup_cli(copperhead_cli: str | None, workspace: Workspace):
    """The CLI that runs setup commands (`init`) for the scripted agents too, when one is there:
    a gold or noop run then starts from the baseline a real run starts from."""
    try:
        return locate(copperhead_cli, workspace.root)
    except UserError:
        return None


#: model routes whose harness provider runs another program under the operator's saved login
SAVED_LOGIN_ROUTES = ("codex", "cursor", "claude-code")


def refuse_saved_login(model_id: str) -> None:
    """A saved-login route (codex, cursor, claude-code) runs its provider's own CLI with the
    operator's login from their home directory, neither of which a sandbox can see: it would
    only fail there, as a harness failure. Refused up front, naming the way out."""
    if model_id.split(":", 1)[0] in SAVED_LOGIN_ROUTES:
        raise UserError(
            f"--model {model_id} uses a saved login (its provider's own CLI and the operator's home directory), "
            "which the agent sandbox does not expose; run it with --unsandboxed (recorded so on each run)"
        )


def preflight(catalog: Catalog, plan: Plan, view: ledger_view.LedgerView) -> str:
    """Refuses a plan that cannot produce comparable records, before any sandbox exists: each
    task must validate with its fixture tree present and hashing to the pinned value, kicad-cli
    must be there, and the tasks must be the ones the current suite version recorded."""
    require_kicad_cli()
    for task_id in plan.tasks:
        ensure_runnable(catalog.root, catalog.task(task_id))
    return suite_version.require_current(view.suite, catalog, plan.tasks)


def run_plan(
    workspace: Workspace,
    plan: Plan,
    *,
    jobs: int = 1,
    sandbox_root: Path,
    keep_sandboxes: bool = False,
    copperhead_cli: str | None = None,
    segment: str | None = None,
    actor_name: str = "cbledger-runner",
    on_done: OnDone | None = None,
    session: str | None = None,
    unsandboxed: bool = False,
) -> SuiteResult:
    """Runs the plan. With `session` (a session name, or a session file or directory) the
    copperhead agent is served scripted model turns by a loopback endpoint started here. Every
    process a run starts is confined by bubblewrap (`cbledger.runner.isolation`); without it the
    plan is refused unless `unsandboxed` says to run them as the operator, which the runs record."""
    check_jobs(jobs)
    catalog = Catalog(workspace.root)
    store = LedgerStore(workspace.ledger)
    if not store.exists():
        raise UserError(f"{workspace.ledger}: no ledger here (run `cbledger init` first)")
    view = ledger_view.read(workspace.ledger)
    version = preflight(catalog, plan, view)
    confinement = isolation.confinement(unsandboxed, (workspace.root, workspace.ledger.parent, sandbox_root))
    if confinement.bwrap is not None and plan.agent == "copperhead" and session is None:
        refuse_saved_login(plan.model_id)
    sessions = None
    if session is not None:
        if plan.agent != "copperhead":
            raise UserError("--session serves scripted model turns to the real harness: use it with --agent copperhead")
        if not (plan.model_id == "compat" or plan.model_id.startswith("compat:")):
            raise UserError(f"--session needs a compat:<id> model (the loopback endpoint is an OpenAI-compatible route), not {plan.model_id}")
        sessions = session_lookup.for_plan(catalog, plan.tasks, session)
    with contextlib.ExitStack() as stack:
        endpoint = stack.enter_context(Endpoint()) if sessions is not None else None
        return _run(
            workspace, plan, catalog=catalog, store=store, view=view, version=version, jobs=jobs,
            sandbox_root=sandbox_root, keep_sandboxes=keep_sandboxes, copperhead_cli=copperhead_cli,
            segment=segment, actor_name=actor_name, on_done=on_done, sessions=sessions, endpoint=endpoint,
            confinement=confinement,
        )


def _run(
    workspace: Workspace, plan: Plan, *, catalog: Catalog, store: LedgerStore, view: ledger_view.LedgerView,
    version: str, jobs: int, sandbox_root: Path, keep_sandboxes: bool, copperhead_cli: str | None,
    segment: str | None, actor_name: str, on_done: OnDone | None, sessions: dict | None, endpoint: Endpoint | None,
    confinement: isolation.Confinement,
) -> SuiteResult:
    """The runs of a plan that passed preflight (the endpoint, when there is one, already up)."""
    agent, run_mode, cli = build_agent(plan, copperhead_cli, workspace, sessions, endpoint, confinement)
    # the CLI that runs setup commands; for the scripted agents too, so the stamp names the
    # copperhead whose scaffold the baseline holds
    setup_cli = cli or _setup_cli(copperhead_cli, workspace)
    settings = RunSettings(
        root=workspace.root,
        catalog=catalog,
        agent=agent,
        run_mode=run_mode,
        suite_version=version,
        environment=probe(setup_cli),
        price_table=view.pricing,
        ablations=plan.ablations,
        sandbox_root=sandbox_root,
        keep_sandboxes=keep_sandboxes,
        copperhead=setup_cli,
        actor=Actor(kind="runner", name=actor_name),
        confinement=confinement,
        segment_override=segment,
    )
    if run_mode in ("agent", "scripted"):
        if run_mode == "agent":
            model_identity(settings, plan.model_id, None)  # refuses an unpriced model before any run
            agent_environment(plan.model_id)  # refuses a compat: model without its endpoint or key, likewise
        undriven = sorted({r.task.id for r in plan.runs if r.task.manifest.mode != "do"})
        if undriven:
            raise UserError(f"--agent copperhead drives only `do` tasks so far; not: {', '.join(undriven)}")
    sandbox_root.mkdir(parents=True, exist_ok=True)
    result = SuiteResult()
    lock = threading.Lock()
    total = len(plan.runs)

    def one(planned):
        try:
            output = execute(settings, planned)
            with lock:
                publish(store, output)
                result.outputs.append(output)
                if on_done:
                    on_done(output, None, len(result.outputs) + len(result.failures), total)
        except Exception as exc:  # one run's failure never ends the suite: reported, and the next runs
            label = f"{planned.task.id} r{planned.repeat}"
            why = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
            why = credentials.printable(why, limit=1000)
            with lock:
                result.failures.append((label, why))
                if on_done:
                    on_done(None, f"{label}: {why}", len(result.outputs) + len(result.failures), total)

    if jobs <= 1:
        for planned in plan.runs:
            one(planned)
    else:
        pool = ThreadPoolExecutor(max_workers=jobs)
        try:
            for fut in as_completed([pool.submit(one, p) for p in plan.runs]):
                fut.result()
        except BaseException:
            # Ctrl-C (or a crash in one run): start no further run. Runs in flight finish and
            # are recorded; waiting for the whole queue instead would make Ctrl-C a no-op.
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
    return result
