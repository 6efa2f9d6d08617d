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
import datetime as _dt
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from cbledger import credentials, invocation
from cbledger.errors import UserError
from cbledger.kicad.oracle import require_kicad_cli
from cbledger.ledger.events import Actor
from cbledger.ledger.recorder import Lease, StoreUnavailable
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.types import RunMode
from cbledger.runner import campaign as campaign_mod
from cbledger.runner import check_capture, current_suite, isolation, ledger_view
from cbledger.runner.agents.base import Agent
from cbledger.runner.agents.copperhead import (
    CopperheadAgent,
    CopperheadCli,
    agent_environment,
    locate,
    refuse_undriven,
)
from cbledger.runner.agents.scripted import GoldAgent, NoopAgent
from cbledger.runner.budget import MoneyLimits, price_for_limits
from cbledger.runner.endpoint import sessions as session_lookup
from cbledger.runner.endpoint.server import Endpoint
from cbledger.runner.environment import probe
from cbledger.runner.execute import (
    RunOutput,
    RunSettings,
    SlotTaken,
    execute,
    new_batch_id,
    publish,
    route_and_segment,
)
from cbledger.runner.passes import execute_passes
from cbledger.runner.plan import Plan, PlannedRun, check_jobs
from cbledger.runner.preflight_credentials import money_preflight
from cbledger.tasks import passes as passes_mod
from cbledger.tasks.catalog import Catalog
from cbledger.tasks.validate import ensure_runnable
from cbledger.workspace import Workspace

if TYPE_CHECKING:
    from cbledger.runner.dask_executor import OnActivity

# (the run, or None when it failed to record; the failure; runs done; runs planned)
OnDone = Callable[[RunOutput | None, str | None, int, int], None]
#: where execute() runs: threads of this process, or the workers of a Dask cluster
EXECUTORS = ("local", "dask")


@dataclass
class SuiteResult:
    outputs: list[RunOutput] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (planned run, error)
    #: the id every run of this invocation carries (`run.recorded` `batch`)
    batch: str | None = None
    #: planned runs kept from starting, with why (`--budget-usd` spent, or `taken_over`)
    not_run: list[tuple[str, str]] = field(default_factory=list)
    #: why the runs left were not started: the campaign's hold was taken by another driver
    taken_over: str | None = None

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
        cli = require_cli(copperhead_cli, workspace)
        if sessions is not None:
            return CopperheadAgent(cli, endpoint, sessions, confinement), "scripted", cli
        return CopperheadAgent(cli, confinement=confinement), "agent", cli
    if plan.agent == "replay":
        from cbledger.runner.agents.replay import ReplayAgent

        return ReplayAgent(workspace), "replay", None
    raise UserError(f"unknown agent {plan.agent}")


def require_cli(copperhead_cli: str | None, workspace: Workspace) -> CopperheadCli:
    """The copperhead CLI a copperhead plan runs, or the refusal naming how to get one (asked
    before a campaign's plan is kept, and again when its agent is built)."""
    cli = locate(copperhead_cli, workspace.root)
    if cli is None:
        raise UserError(
            "--agent copperhead needs the copperhead CLI: run scripts/install-copperhead, "
            "or pass --copperhead-cli PATH/cli.js or set $COPPERHEAD_CLI"
        )
    return cli


def _warn_without_cli(plan: Plan) -> None:
    """Says, before any run, which tasks a scripted agent's runs will fail for want of the
    copperhead CLI (its `check` reads their end state, or their setup runs it): the runs are
    recorded, and a gold run failing on it read as the task not being solvable."""
    needs = sorted({planned.task.id for planned in plan.runs
                    if check_capture.needed(planned.task) or planned.task.manifest.setup.commands})
    if needs:
        print(f"warning: no copperhead CLI here, and task(s) {', '.join(needs)} need it (`copperhead check` reads "
              f"the end state, or the setup runs it): their {plan.agent} runs are recorded failing on it; run "
              "scripts/install-copperhead, or pass --copperhead-cli PATH/cli.js, before runs you mean to keep",
              file=sys.stderr)


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


def check_executor(jobs: int, executor: str, scheduler: str | None, agent: str) -> None:
    """The options that say where runs execute, refused before anything is written (a campaign's
    plan included: one kept for a refused invocation would hold its id to that plan)."""
    check_jobs(jobs)
    if executor not in EXECUTORS:
        raise UserError(f"--executor must be one of {', '.join(EXECUTORS)}, not {executor!r}")
    if executor == "dask" and not scheduler:
        raise UserError("--executor dask needs --scheduler tcp://HOST:PORT (the Dask scheduler's address)")
    if executor == "dask" and agent == "replay":
        raise UserError("--agent replay restores bundles from this project's results/: run it with --executor local")


def preflight(
    catalog: Catalog, plan: Plan, view: ledger_view.LedgerView, *, kicad: bool = True, workspace: Workspace | None = None,
) -> str:
    """Refuses a plan that cannot produce comparable records, before any sandbox exists: each
    task must validate with its fixture tree present and hashing to the pinned value, kicad-cli
    must be there (here, unless the runs go to workers that check their own), and the tasks must
    be the ones the current suite version recorded."""
    if kicad:
        require_kicad_cli()
    for task_id in plan.tasks:
        ensure_runnable(catalog.root, catalog.task(task_id))
    return current_suite.require(view, catalog, plan.tasks, workspace)


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
    executor: str = "local",
    scheduler: str | None = None,
    on_activity: OnActivity | None = None,
    unsandboxed: bool = False,
    passes: int | None = None,
    retry_env: int = 0,
    money: MoneyLimits | None = None,
    lease: Lease | None = None,
) -> SuiteResult:
    """Runs the plan. With `session` (a session name, or a session file or directory) the
    copperhead agent is served scripted model turns by a loopback endpoint started here (on each
    worker, for `executor="dask"`). `executor` is where `execute()` runs: `local` (threads of this
    process, `jobs` at a time) or `dask` (one task per run on the cluster behind `scheduler`;
    `on_activity` hears what each worker does). Either way this process alone appends, each run
    as it finishes, so the runs recorded are the same whichever executor ran the plan. Every process a run starts
    is confined by bubblewrap (`cbledger.runner.isolation`), on a worker too; without it the plan
    is refused unless `unsandboxed` says to run them as the operator, which the runs record."""
    check_executor(jobs, executor, scheduler, plan.agent)
    catalog = Catalog(workspace.root)
    store = LedgerStore(workspace.ledger)
    if not store.exists():
        raise UserError(f"{store.location}: no ledger here (run `{invocation.command('init')}` first)")
    view = ledger_view.read(workspace.ledger)
    version = preflight(catalog, plan, view, kicad=executor == "local", workspace=workspace)
    # a Dask worker confines its runs itself (`runner/remote.py`), as this process does its own
    hidden = tuple(p for p in (workspace.root, workspace.ledger_file and workspace.ledger_file.parent, sandbox_root) if p)
    confinement = isolation.confinement(unsandboxed, hidden) if executor == "local" else isolation.Confinement(None)
    if not unsandboxed and plan.agent == "copperhead" and session is None:
        refuse_saved_login(plan.model_id)
    sessions = None
    if session is not None:
        if plan.agent != "copperhead":
            raise UserError("--session serves scripted model turns to the real harness: use it with --agent copperhead")
        if not (plan.model_id == "compat" or plan.model_id.startswith("compat:")):
            raise UserError(f"--session needs a compat:<id> model (the loopback endpoint is an OpenAI-compatible route), not {plan.model_id}")
        sessions = session_lookup.for_plan(catalog, plan.tasks, session)
    allowed = passes_allowed(catalog, plan, passes)
    if executor == "dask":
        assert scheduler is not None
        return _run_on_dask(
            workspace, plan, catalog=catalog, store=store, view=view, version=version, scheduler=scheduler,
            copperhead_cli=copperhead_cli, segment=segment, actor_name=actor_name, on_done=on_done,
            sessions=sessions, on_activity=on_activity, unsandboxed=unsandboxed, allowed=allowed, money=money,
            retry_env=retry_env, lease=lease,
        )
    with contextlib.ExitStack() as stack:
        endpoint = stack.enter_context(Endpoint()) if sessions is not None else None
        return _run(
            workspace, plan, catalog=catalog, store=store, view=view, version=version, jobs=jobs,
            sandbox_root=sandbox_root, keep_sandboxes=keep_sandboxes, copperhead_cli=copperhead_cli,
            segment=segment, actor_name=actor_name, on_done=on_done, sessions=sessions, endpoint=endpoint,
            confinement=confinement, allowed=allowed, money=money, retry_env=retry_env, lease=lease,
        )


#: a planned run's end: its output, its passes' (each an output or a refused pass's label and
#: why), its label and why it failed, or None when it never started
Outcome = RunOutput | list[RunOutput] | list[RunOutput | tuple[str, str]] | tuple[str, str] | None


class _AsFinished:
    """Appends each run as it finishes, so a run done is a run kept whatever happens to the runs
    still going (a slow run no longer holds finished ones back, to be lost with the driver).
    The chain's order is then the order runs finished in; every projection is a function of the
    set of runs, not of their order (tests/test_runner_dask.py compares a local and a Dask plan).
    Not thread-safe: callers serialize `finish`."""

    def __init__(self, store: LedgerStore, result: SuiteResult, total: int, on_done: OnDone | None) -> None:
        self.store, self.result, self.total, self.on_done = store, result, total, on_done

    def finish(self, outcome: Outcome) -> None:
        """`outcome`: the run (an attempt's passes, in order, the last of them perhaps a pass
        that came back refused), or (its label, why it failed), or None for a run never started."""
        if isinstance(outcome, list):
            self.total += len(outcome) - 1  # an attempt's later passes are runs of their own
            for output in outcome:
                self.finish(output)
            return
        if outcome is None:
            return
        result = self.result
        if isinstance(outcome, RunOutput):
            try:
                publish(self.store, outcome)
            except SlotTaken as exc:
                # the campaign's slot is recorded, by another driver: said, and not this invocation's failure
                result.not_run.append((f"{outcome.run.task.id} r{outcome.run.repeat}", f"not recorded: {exc}"))
                return
            except UserError as exc:
                outcome = (f"{outcome.run.task.id} r{outcome.run.repeat}", str(exc))
            else:
                result.outputs.append(outcome)
                if self.on_done:
                    self.on_done(outcome, None, len(result.outputs) + len(result.failures), self.total)
                return
        label, error = outcome
        result.failures.append((label, error))
        if self.on_done:
            self.on_done(None, f"{label}: {error}", len(result.outputs) + len(result.failures), self.total)


def retry_of(planned: PlannedRun, outcome: Outcome, retry_env: int) -> PlannedRun | None:
    """The next attempt at a campaign slot whose run failed for a reason not the model's
    (`campaign.retryable`), while `--retry-env` allows one; else None. Both attempts are recorded."""
    if planned.campaign is None or not isinstance(outcome, (RunOutput, list)):
        return None
    runs = [o for o in (outcome if isinstance(outcome, list) else [outcome]) if isinstance(o, RunOutput)]
    # decided by pass 1, the attempt's record, as the next invocation decides (`Campaign.missing`):
    # a later pass the environment failed leaves a pass 1 that reached the model, which counts
    if not runs or not campaign_mod.retryable(runs[0].run, retry_env):
        return None
    return replace(planned, attempt=planned.attempt + 1)


def _recorded_meanwhile(store: LedgerStore, planned: PlannedRun) -> bool:
    """Whether another driver recorded the slot while this one's hold on its campaign was lost.
    A database away cannot say: the run goes ahead, as every run does through an outage (its
    append waits, or keeps it), and a slot recorded meanwhile is refused at its publish
    (`SlotTaken`). Asking once ended the whole campaign on the first outage after a restart."""
    assert planned.campaign is not None
    try:
        return store.recorder.lookup(
            f"run:{campaign_mod.run_id(planned.campaign, planned.task.id, planned.slot, planned.attempt)}") is not None
    except StoreUnavailable:
        return False


def _label(planned: PlannedRun) -> str:
    """A run not recorded, named as the campaign's plan names it (`slot 2/3 (repeat 5)`): a reader
    holding the plan's lines finds the slot; the repeat alone (`r5`) is in no line they were shown."""
    if planned.campaign is None:
        return f"{planned.task.id} r{planned.repeat}"
    repeat = f" (repeat {planned.repeat})" if planned.repeat != planned.slot else ""
    return f"{planned.task.id} slot {planned.slot}/{planned.repeats_planned}{repeat}"


#: agents whose runs are recorded under the agent's own name as their run mode
_OWN_MODE: dict[str, RunMode] = {"gold": "gold", "noop": "noop", "replay": "replay"}


def passes_allowed(catalog: Catalog, plan: Plan, asked: int | None) -> dict[str, int]:
    """Each planned task's passes: one unless `--passes` asks, never more than
    `tasks/passes.json` allows (`cbledger.tasks.passes`)."""
    if asked is None:
        return {}
    allowances = passes_mod.allowances(catalog.tasks_dir, set(catalog.task_ids()), passes_mod.modes(catalog))
    return {r.task.id: passes_mod.granted(allowances.get(r.task.id, 1), asked) for r in plan.runs}


def run_mode_of(plan: Plan, sessions: dict | None) -> RunMode:
    if plan.agent in _OWN_MODE:
        return _OWN_MODE[plan.agent]
    return "scripted" if sessions is not None else "agent"


def _run_on_dask(
    workspace: Workspace, plan: Plan, *, catalog: Catalog, store: LedgerStore, view: ledger_view.LedgerView,
    version: str, scheduler: str, copperhead_cli: str | None, segment: str | None, actor_name: str,
    on_done: OnDone | None, sessions: dict | None, on_activity: OnActivity | None, unsandboxed: bool,
    allowed: dict[str, int] | None = None, money: MoneyLimits | None = None, retry_env: int = 0,
    lease: Lease | None = None,
) -> SuiteResult:
    """The runs of a plan on a Dask cluster; this process appends them as they finish. An attempt
    allowed more than one pass (`allowed`) is one Dask task: its worker takes every pass on one
    sandbox, and its passes are appended in order, as a local attempt's are. `lease`: the driver's
    hold on its campaign, asked as the runs go; lost to another driver, the runs not yet come back
    are cancelled and listed as not run (a run already going on a worker still ends there)."""
    from cbledger.runner.dask_executor import TAKEN_OVER, DaskCluster, received_attempt
    from cbledger.runner.remote import RemoteRun
    from cbledger.runner.shipping import Package, pack_fixture, pack_task

    run_mode = run_mode_of(plan, sessions)
    actor = Actor(kind="runner", name=actor_name)
    batch = new_batch_id(_dt.datetime.now(_dt.UTC))
    refuse_model(plan, view, money, scripted=sessions is not None, segment=segment, here=False)
    money_preflight(plan, view, money, scripted=sessions is not None, dask=True)
    packages: dict[tuple[str, str], Package] = {}
    specs = []
    planned_of = dict(enumerate(plan.runs))
    for index, planned in planned_of.items():
        task, fixture = planned.task, catalog.fixture_for(planned.task)
        task_pkg = packages.get(("task", task.id)) or pack_task(task)
        fixture_pkg = packages.get(("fixture", fixture.id)) or pack_fixture(fixture)
        packages[("task", task.id)], packages[("fixture", fixture.id)] = task_pkg, fixture_pkg
        specs.append(RemoteRun(
            index=index, label=_label(planned), task_id=task.id, task_digest=task_pkg.digest,
            manifest_hash=task.manifest_hash, fixture_id=fixture.id, fixture_digest=fixture_pkg.digest,
            model_id=planned.model_id, repeat=planned.repeat, repeats_planned=planned.repeats_planned,
            agent=plan.agent, run_mode=run_mode, suite_version=version, price_table=view.pricing,
            ablations=plan.ablations, actor=actor, segment_override=segment,
            session=sessions.get(task.id) if sessions is not None else None,
            unsandboxed=unsandboxed, batch=batch, passes=(allowed or {}).get(task.id, 1),
            campaign=planned.campaign, slot=planned.slot, attempt=planned.attempt,
        ))
    result = SuiteResult(batch=batch)
    order = _AsFinished(store, result, len(specs), on_done)

    def held() -> bool:
        taken = lease.lost() if lease is not None else None
        result.taken_over = result.taken_over or taken
        return taken is None

    with DaskCluster(scheduler, on_activity) as cluster:
        by_digest = {p.digest: p for p in packages.values()}
        while specs:  # a round of runs, then one of the retries they asked for (--retry-env)
            retries = []
            for index, remote, error in cluster.run(specs, by_digest, held if lease is not None else None):
                spec = next(s for s in specs if s.index == index)
                if remote is None and error == TAKEN_OVER:
                    result.not_run.append((spec.label, TAKEN_OVER))  # as a local plan's are: no failure
                    continue
                if remote is None:
                    order.finish((spec.label, error or "failed"))
                    continue
                try:
                    outcome: Outcome = received_attempt(workspace, spec, remote)
                except UserError as exc:
                    outcome = (spec.label, str(exc))
                again = retry_of(planned_of[index], outcome, retry_env)
                if again is not None:
                    planned_of[index] = again
                    retries.append(replace(spec, attempt=again.attempt))
                    order.total += 1
                order.finish(outcome)
            specs = retries
    return result


def refuse_model(
    plan: Plan, view: ledger_view.LedgerView, money: MoneyLimits | None, *, scripted: bool, segment: str | None,
    here: bool = True,
) -> None:
    """What the plan's model and money limits are refused for, asked of nothing but the plan and
    the ledger: `run` asks before it keeps a campaign's plan (a refusal writes nothing), and the
    runs ask again. An unpriced model without --segment, a compat: model without its endpoint or
    key, a task mode the harness is not driven in, and a money limit on runs that cost nothing by
    rule (the scripted agents, a session script), where it would be silently not enforced. The
    endpoint and key are looked for `here` only: a Dask worker runs with its own environment."""
    limited = money is not None and (money.max_cost_usd is not None or money.budget_usd is not None)
    if limited and (plan.agent != "copperhead" or scripted):
        what = "a session script" if scripted else f"the {plan.agent} agent"
        raise UserError(f"--max-cost-usd and --budget-usd limit what a model's calls cost; runs of {what} cost nothing "
                        "by rule, so no limit would be enforced: drop them")
    if plan.agent != "copperhead":
        return
    unapplied = [flag for flag, value in (("--prompt-variant", plan.ablations.prompt_variant),
                                          ("--tool-subset", plan.ablations.tool_subset)) if value]
    if unapplied:
        # the harness reads neither from its config or its environment: each such run was the
        # default run recorded, and ranked, as an ablation of it
        raise UserError(f"{' and '.join(unapplied)}: copperhead reads no prompt variant or tool subset (neither its "
                        "config nor its environment names one), so the run would be the default one recorded as an "
                        "ablation; --max-turns and --max-repair-cycles reach it (a campaign's plan keeps its ablations: "
                        "one started with them is run again as a new campaign, --campaign, without them)")
    if not scripted:
        route_and_segment(plan.model_id, view.pricing, segment)
        if money is not None:
            price_for_limits(plan.model_id, view.pricing, money)  # a limit on a model with no token price
        if here:
            agent_environment(plan.model_id)
    refuse_undriven([r.task for r in plan.runs])


def _run(
    workspace: Workspace, plan: Plan, *, catalog: Catalog, store: LedgerStore, view: ledger_view.LedgerView,
    version: str, jobs: int, sandbox_root: Path, keep_sandboxes: bool, copperhead_cli: str | None,
    segment: str | None, actor_name: str, on_done: OnDone | None, sessions: dict | None, endpoint: Endpoint | None,
    confinement: isolation.Confinement, allowed: dict[str, int] | None = None, money: MoneyLimits | None = None,
    retry_env: int = 0, lease: Lease | None = None,
) -> SuiteResult:
    """The runs of a plan that passed preflight (the endpoint, when there is one, already up).
    `allowed`: task id -> the passes each of its attempts takes (one when not named). `lease`:
    the campaign's hold on the ledger, asked before each run starts (`Recorder.driving`)."""
    agent, run_mode, cli = build_agent(plan, copperhead_cli, workspace, sessions, endpoint, confinement)
    # the CLI that runs setup commands; for the scripted agents too, so the stamp names the
    # copperhead whose scaffold the baseline holds
    setup_cli = cli or _setup_cli(copperhead_cli, workspace)
    if setup_cli is None:
        _warn_without_cli(plan)
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
        batch=new_batch_id(_dt.datetime.now(_dt.UTC)),
        results=workspace.results_dir,
    )
    refuse_model(plan, view, money, scripted=sessions is not None, segment=segment)
    # last: the key check may ask the provider
    guard = money_preflight(plan, view, money, scripted=sessions is not None, dask=False)
    if guard is not None and isinstance(agent, CopperheadAgent):
        agent.money = guard
        # the budget is the campaign's: what its runs recorded by earlier invocations spent is
        # spent (a resumed campaign once started afresh, and spent its budget again)
        # and what runs of it killed with their driver spent, which no ledger holds
        campaigns = {r.campaign for r in plan.runs if r.campaign is not None}
        for campaign in sorted(campaigns):
            guard.purse.add(sum(campaign_mod.spent(workspace, view, campaign)))
        if len(campaigns) == 1:
            workspace.campaigns.mkdir(parents=True, exist_ok=True)
            guard.purse.journal, guard.purse.batch = campaign_mod.spend_journal(workspace, *campaigns), settings.batch
    sandbox_root.mkdir(parents=True, exist_ok=True)
    result = SuiteResult(batch=settings.batch)
    lock = threading.Lock()
    order = _AsFinished(store, result, len(plan.runs), on_done)

    stop = threading.Event()  # set on Ctrl-C: the runs in flight on other threads are killed

    def one(planned: PlannedRun | None) -> None:
        try:
            with isolation.abandon_when(lambda: "interrupted" if stop.is_set() else None):
                attempts(planned)
        except isolation.Abandoned:
            pass  # killed as a run on the main thread is by Ctrl-C: nothing of it is written

    def attempts(planned: PlannedRun | None) -> None:
        while planned is not None:
            isolation.give_up()  # after Ctrl-C, no retry starts either
            outcome: RunOutput | list[RunOutput] | tuple[str, str]
            n = (allowed or {}).get(planned.task.id, 1)
            if guard is not None and guard.purse.exhausted():
                with lock:  # the campaign's budget is spent: this run is not started
                    result.not_run.append((_label(planned), guard.purse.not_started_note()))
                return
            taken = lease.lost() if lease is not None else None
            if taken is not None:
                with lock:  # another driver holds the campaign now: it runs the slots left
                    result.not_run.append((_label(planned), "not run: another driver holds the campaign now"))
                    result.taken_over = result.taken_over or taken
                return
            if lease is not None and lease.retaken and planned.campaign is not None and _recorded_meanwhile(store, planned):
                with lock:  # recorded by another driver while this one's hold was lost
                    result.not_run.append((_label(planned), "not run: another driver recorded this slot meanwhile"))
                return
            try:
                outcome = execute_passes(settings, planned, n) if n > 1 else execute(settings, planned)
            except Exception as exc:  # one run's failure never ends the suite: reported, and the next runs
                if stop.is_set():
                    return  # killed by Ctrl-C part-way (its sandbox going under it): nothing of it is written or said
                why = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
                outcome = (_label(planned), credentials.printable(why, limit=1000))
            planned = retry_of(planned, outcome, retry_env)
            with lock:
                order.total += planned is not None
                order.finish(outcome)

    if jobs <= 1:
        for planned in plan.runs:
            attempts(planned)
    else:
        pool = ThreadPoolExecutor(max_workers=jobs)
        futures = [pool.submit(one, p) for p in plan.runs]
        try:
            for fut in as_completed(futures):
                fut.result()
        except BaseException:
            # Ctrl-C (or a crash in one run): no further run starts, and the runs in flight are
            # killed as the main thread's would be, not recorded (their slots stay open for the
            # resume), and waited for: left running, they outlived the command by up to their
            # wall-clock caps and failed once its exit removed what they ran in.
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown()
    return result
