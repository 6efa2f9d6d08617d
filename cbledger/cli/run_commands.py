"""`cbledger run | rescore | pricing publish | suite bump`: how runs and their context enter
the ledger."""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import msgspec
import pygit2
import typer
from blake3 import blake3

from cbledger import invocation
from cbledger.cli.common import (
    JsonFlag,
    LedgerOption,
    RootOption,
    fail,
    ledger_path,
    workspace,
)
from cbledger.cli.exits import INTERRUPTED
from cbledger.cli.progress import Reporter, SuiteProgress
from cbledger.errors import UserError
from cbledger.grading import suite_version
from cbledger.inputs import printable
from cbledger.ledger.events import Ablations, Actor, GradeRecorded, RunRecorded, make_event
from cbledger.ledger.recorder import StoreUnavailable
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.types import SemVer, conforms
from cbledger.login import login_name
from cbledger.projections import packed as packed_mod
from cbledger.projections.metrics import build_label
from cbledger.projections.records import record_entries
from cbledger.reproduce.regenerate import behind, regenerate_after
from cbledger.runner import campaign as campaign_mod
from cbledger.runner import (
    cost_estimate,
    current_suite,
    ledger_view,
    leftovers,
    preflight_credentials,
    pricing,
    trial,
)
from cbledger.runner import draft as draft_run
from cbledger.runner import sandbox as sandbox_mod
from cbledger.runner.agents.copperhead import locate as locate_cli
from cbledger.runner.budget import MoneyLimits
from cbledger.runner.endpoint import sessions as session_lookup
from cbledger.runner.execute import cost_segment
from cbledger.runner.plan import Plan, PlannedRun, make_plan
from cbledger.runner.rescore import rescore as rescore_runs
from cbledger.runner.suite_run import (
    SuiteResult,
    check_executor,
    passes_allowed,
    preflight,
    refuse_model,
    require_cli,
    run_plan,
)
from cbledger.tasks import definitions, suite_archive, validate
from cbledger.tasks.catalog import Catalog
from cbledger.tasks.definitions import DirectorySource, GitSource, Source
from cbledger.workspace import RUNS, Workspace, bundle_name, record_name


def scripted_model(session: str) -> str:
    """The model id of runs served by a session script: copperhead's OpenAI-compatible route,
    named for the session (`compat:scripted-solve`), so two sessions never share a row."""
    stem = re.sub(r"[^A-Za-z0-9._+-]+", "-", Path(session).stem).strip("-.") or "session"
    return f"compat:scripted-{stem}"[:128]


def _maintainer() -> Actor:
    return Actor(kind="maintainer", name=login_name("maintainer"))


def run(
    task_ids: Annotated[list[str] | None, typer.Argument(help="Task ids (or use --suite).")] = None,
    suite: Annotated[str | None, typer.Option(help="A named suite: smoke, full, …")] = None,
    agent: Annotated[str, typer.Option(help="gold | noop | copperhead | replay")] = "copperhead",
    model: Annotated[str | None, typer.Option(help="Model id (required for copperhead and replay; no default).")] = None,
    repeats: Annotated[int | None, typer.Option(min=1, max=100, help="Repeats per task (default: the task's, else 3).")] = None,
    jobs: Annotated[int, typer.Option(min=1, help="Sandboxes run concurrently; appends serialize.")] = 1,
    prompt_variant: Annotated[str | None, typer.Option(help="Ablation: prompt variant, recorded on the run.")] = None,
    max_turns: Annotated[int | None, typer.Option(min=1, help="Ablation: turn budget, recorded on the run.")] = None,
    tool_subset: Annotated[str | None, typer.Option(help="Ablation: comma-separated tool subset, recorded.")] = None,
    max_repair_cycles: Annotated[int | None, typer.Option(min=0, help="Ablation: repair-cycle cap, recorded.")] = None,
    segment: Annotated[str | None, typer.Option(help="Cost segment for a model missing from the price table.")] = None,
    copperhead_cli: Annotated[str | None, typer.Option("--copperhead-cli", envvar="COPPERHEAD_CLI", help="Path to copperhead's cli.js.")] = None,
    sandbox_root: Annotated[Path | None, typer.Option(help="Where sandboxes are made (outside the repository).")] = None,
    keep_sandboxes: Annotated[bool, typer.Option(help="Keep sandbox directories after preserving them.")] = False,
    session: Annotated[str | None, typer.Option(
        help="Scripted model turns for the real harness: a session name (each task's tasks/<id>/sessions/NAME.json) "
             "or a session file or directory, served by a loopback endpoint; the model defaults to compat:scripted-<name>.",
    )] = None,
    executor: Annotated[str, typer.Option(help="Where runs execute: local (this machine, --jobs at a time) or dask (one task per run on the cluster --scheduler names).")] = "local",
    scheduler: Annotated[str | None, typer.Option(help="The Dask scheduler for --executor dask, e.g. tcp://HOST:8786.", show_default=False)] = None,
    unsandboxed: Annotated[bool, typer.Option(
        "--unsandboxed",
        help="Run agents without the bubblewrap sandbox, as the operator (where bubblewrap is unavailable); every run is recorded as unsandboxed.",
    )] = False,
    passes: Annotated[int | None, typer.Option(
        min=1, help="Feedback passes per attempt: after a failed pass the agent revises the sandbox, told hints from the "
                    "failed assertions; capped by each task's allowance in tasks/passes.json (docs/RUNNER.md, section 12).",
        show_default=False,
    )] = None,
    campaign: Annotated[str | None, typer.Option(
        help="The campaign this plan fills (default: an id read off the plan, so the same command resumes it); "
             "a new id starts a fresh campaign, whose repeats continue after those already recorded.",
        show_default=False,
    )] = None,
    resume: Annotated[str | None, typer.Option(
        help="Run the missing slots of a campaign, with the plan it was started with (results/campaigns/ID.json).",
        show_default=False,
    )] = None,
    retry_env: Annotated[int, typer.Option(
        "--retry-env", min=0, max=10,
        help="Retry a run that failed for a reason not the model's (recorded with a harness failure) up to N times, "
             "as further attempts of its slot; every attempt is recorded.",
    )] = 0,
    max_cost_usd: Annotated[str | None, typer.Option(
        "--max-cost-usd", metavar="USD", help="Stop a run whose spend, metered from its provider's reported usage, reaches this many USD.",
        show_default=False)] = None,
    budget_usd: Annotated[str | None, typer.Option(
        "--budget-usd", metavar="USD", help="Start no further run of the campaign once its runs, this invocation's and earlier ones', have spent this many USD (metered live).",
        show_default=False)] = None,
    key_check: Annotated[bool, typer.Option(
        help="Check the route's key with one request to its provider (its model list, no tokens) before the first run.")] = True,
    project: Annotated[bool, typer.Option(help="Regenerate the projections (records, LEADERBOARD.md, read model) afterwards.")] = True,
    draft: Annotated[bool, typer.Option(
        "--draft", help="Run tasks not yet in a bumped suite in a scratch workspace of their own (never the project's "
                        "ledger), keeping the sandboxes for `fixture gold` (docs/AUTHORING.md).",
    )] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan and its size; run nothing.")] = False,
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Run tasks with an agent, preserve every run and append run.recorded + grade.recorded.

    Exit codes: 0 every planned run recorded (whatever the verdicts); 1 a run failed to record;
    2 bad usage (an unknown task, suite or agent), nothing run."""
    where = workspace(ledger, root)
    check_executor(jobs, executor, scheduler, agent)
    new_draft = draft and not dry_run  # a workspace made now: "the same command again" would make another
    scratch = new_draft and where.results_dir is None  # the draft's directory is made here, not given
    ablations = Ablations(
        prompt_variant=prompt_variant,
        max_turns=max_turns,
        max_repair_cycles=max_repair_cycles,
        tool_subset=[t.strip() for t in tool_subset.split(",") if t.strip()] if tool_subset else None,
    )
    if resume is not None:
        if campaign is not None or task_ids or suite or model or session or repeats or passes or agent != "copperhead" or any(
            v is not None for v in (prompt_variant, max_turns, tool_subset, max_repair_cycles)
        ):
            fail("--resume takes the plan its campaign was started with: give no tasks, suite, agent, model, session, "
                 "repeats, passes or ablations with it", code=2)
        where = _draft_workspace(where, new_draft, as_json)
        kept_plan = campaign_mod.load(where, resume)
        plan = campaign_mod.plan_of(Catalog(where.root), kept_plan)
        session, passes, campaign = kept_plan.session, kept_plan.passes, kept_plan.id
    else:
        if session is not None and agent in ("gold", "noop"):
            fail(f"--session {session}: --agent {agent} is the scripted harness and asks no model; a session "
                 "script answers for the model under --agent copperhead", code=2)
        plan = make_plan(
            Catalog(where.root), agent=agent, model=model if session is None or model else scripted_model(session),
            suite=suite, task_ids=task_ids or [], repeats=repeats, ablations=ablations,
        )
        if session is not None:  # a misspelled session: refused before a dry run lists it or a campaign keeps it
            session_lookup.for_plan(Catalog(where.root), plan.tasks, session)
        where = _draft_workspace(where, new_draft, as_json)  # after the plan: an unknown task makes none
    try:
        # a dry run needs no ledger: with none, no slot is recorded yet
        view = ledger_view.LedgerView() if dry_run and not LedgerStore(where.ledger).exists() else ledger_view.read(where.ledger, links=not dry_run)
        draft = draft or draft_run.is_draft(view.suite)
        # a draft dry run makes no workspace: its campaign is named for the version the draft's would hold
        version = draft_run.DRAFT_VERSION if draft and dry_run and resume is None else view.suite_version
        campaign = campaign_mod.check_id(campaign) if campaign is not None else campaign_mod.default_id(
            plan, session=session, passes=passes, suite_version=version,
        )
        segment = campaign_mod.segment_of(where, view, campaign, cost_segment(segment))
        max_cost_usd, budget_usd, kept_limits = campaign_mod.limits_of(where, campaign, max_cost_usd, budget_usd)
        money = MoneyLimits(max_cost_usd=max_cost_usd, budget_usd=budget_usd, key_check=key_check)
        if kept_limits and not as_json:
            typer.echo(f"campaign {campaign}: under the money limits its plan keeps "
                       f"({' '.join(MoneyLimits(max_cost_usd, budget_usd).args())}); give a limit "
                       "to replace it, or `none` to lift it (--budget-usd none)", err=True)
    except UserError:
        _discard_draft(where, new_draft, scratch)  # a bad --campaign or money limit, after the workspace was made
        raise
    keep_sandboxes, project = keep_sandboxes or draft, project and not draft
    if dry_run:
        # what the real run would refuse of the plan, refused here too (the keys are the run's
        # machine's business: not looked for)
        refuse_model(plan, view, money, scripted=session is not None, segment=segment, here=False)
        _show_dry_run(where, plan, view, campaign, session=session, passes=passes, segment=segment, retry_env=retry_env,
                      where_to_run=f"jobs {jobs}" if executor == "local" else f"executor {executor} at {scheduler}",
                      as_json=as_json, executor=executor, jobs=jobs, draft=draft, money=money,
                      copperhead_cli=copperhead_cli)
        return
    # the campaign's own place (of this results directory: another project's run of the same plan
    # has its own), so the next invocation finds what a killed one left there
    here = blake3(str(where.results.resolve()).encode()).hexdigest()[:8]
    sandboxes = sandbox_root or Path(tempfile.gettempdir()) / f"cbledger-sandboxes-{campaign}-{here}"
    # refused before the campaign's plan is kept: a refusal writes nothing (run_plan checks again,
    # after leftovers were adopted)
    checked = money  # the limits the runs are given; `money` stays as asked, for the hints
    try:
        if executor == "local":
            sandbox_mod.require_root(sandboxes)
        else:
            preflight_credentials.refuse_limits_elsewhere(money)
        preflight(Catalog(where.root), plan, view, kicad=executor == "local", workspace=where)
        passes_allowed(Catalog(where.root), plan, passes)  # a bad tasks/passes.json: refused before a campaign is kept
        refuse_model(plan, view, money, scripted=session is not None, segment=segment, here=executor == "local")
        if plan.agent == "copperhead" and executor == "local" and not campaign_mod.is_kept(where, campaign):
            # what the runs would be refused for, asked before a new campaign's plan is kept (a
            # kept one asks when it has runs to start: a complete campaign needs neither)
            require_cli(copperhead_cli, where)
            if session is None:
                # the key, and the provider asked about it once, here, before the plan is kept
                preflight_credentials.require(plan.model_id, check_with_provider=money.key_check)
                checked = replace(money, key_check=False)
    except UserError:
        _discard_draft(where, new_draft, scratch)
        raise
    store = LedgerStore(where.ledger)
    # one driver of a campaign per results directory, and per ledger (drivers elsewhere on a
    # shared database): a second would pay for the same slots
    with leftovers.hold(where, campaign), store.recorder.driving(campaign) as lease:
        cleaned = leftovers.clean(where, store, campaign, sandboxes)
        for line in cleaned.lines():
            typer.echo(line, err=True)
        # one read under the holds: what killed runs spent, and the slots (a driver elsewhere may
        # have recorded some since the preflight read it: not this one's to pay for again)
        view = ledger_view.read(where.ledger)
        lost = campaign_mod.spent(where, view, campaign)[1]  # 0 with no journal
        recorded = _record_unrecorded(where, store, campaign, plan.model_id, view)
        if lost and not as_json:  # after an OOM kill or a reboot no interrupt said it
            typer.echo(f"campaign {campaign}: runs of it killed with their driver spent {pricing.usd(lost)} on model "
                       "calls the provider answered, which no run records (--budget-usd counts it"
                       + (f"; recorded as spend.unrecorded for {recorded} run(s), which LEADERBOARD.md lists)" if recorded else ")"),
                       err=True)
        slots = campaign_mod.open_campaign(where, plan, view, campaign, session=session, passes=passes, segment=segment,
                                           limits=(money.max_cost_usd, money.budget_usd))
        todo = slots.missing(retry_env)
        build_note = _other_build(slots, todo, plan.agent, copperhead_cli, where) if executor == "local" else None
        if not _announce(slots, todo, retry_env, as_json, money, build_note, view.suite_version):
            # runs recorded now, by adoption, or before an interrupt cut the outputs short: the
            # outputs follow them
            if project and (cleaned.adopted or behind(where)):
                _, unprojected = _project_or_say(where)
                if unprojected:
                    fail(unprojected, code=1)
            return
        progress = SuiteProgress(len(todo))
        try:
            result = run_plan(
                where, replace(plan, runs=tuple(todo)), jobs=jobs, sandbox_root=sandboxes,
                keep_sandboxes=keep_sandboxes, copperhead_cli=copperhead_cli, segment=segment, on_done=progress,
                session=session, executor=executor, scheduler=scheduler, on_activity=progress.activity,
                unsandboxed=unsandboxed, passes=passes, money=checked, retry_env=retry_env, lease=lease,
            )
        except KeyboardInterrupt:
            progress.close()
            on = ("--executor", executor, "--scheduler", scheduler) if executor != "local" and scheduler else ()
            fail(_interrupted(campaign, where, draft, again=not new_draft, on=(*on, *money.args()))
                 + _unrecorded_spend(where, campaign, store, plan.model_id), code=INTERRUPTED)
        finally:
            progress.close()
            if sandbox_root is None and not keep_sandboxes:
                shutil.rmtree(sandboxes, ignore_errors=True)
    if keep_sandboxes and not as_json:
        typer.echo(f"sandboxes kept under {sandboxes}")
    _report(where, result, campaign=campaign, hint=campaign_mod.retry_hint([o.run for o in result.outputs], retry_env, again=not new_draft, carry=money.args()),
            project=project and bool(result.outputs or cleaned.adopted), asked_to_project=project,
            kept=sandboxes if keep_sandboxes else None, draft_sandboxes=sandboxes if draft else None, as_json=as_json)


def _trial_said(where: Workspace, result: SuiteResult) -> None:
    """A draft's gold and noop runs are the bump's trial ahead of it (docs/AUTHORING.md): what the
    bump would refuse or warn of in them is said now, not first at `suite bump`."""
    catalog = Catalog(where.root)
    for output in result.outputs:
        run, grade = output.run, output.grade
        if run.run_mode not in trial.EXPECTED:
            continue
        try:
            task = catalog.task(run.task.id)
        except UserError:
            continue
        said = trial.judged(task, run.run_mode, grade.verdict, grade.first_failed_required, grade.assertions)
        if not said.ok or said.warned:
            typer.echo(f"  the bump's trial would say: {said}", err=True)


def _report(
    where: Workspace, result: SuiteResult, *, campaign: str, hint: str | None, project: bool, asked_to_project: bool,
    kept: Path | None, draft_sandboxes: Path | None, as_json: bool,
) -> None:
    """What a run prints once its runs are done, the outputs regenerated first (`project`). Exit 1
    when a run was not recorded, or the outputs could not be regenerated (the runs are recorded
    all the same: a full disk is not bad input)."""
    try:
        records, unprojected = _project_or_say(where) if project else ({}, None)
    except KeyboardInterrupt:
        fail(f"interrupted while the outputs were regenerated: the {len(result.outputs)} run(s) of this command are "
             f"recorded; the same command again (it finds nothing to run) or `{invocation.command('project', 'all')}` "
             "brings the outputs up to date", code=INTERRUPTED)
    if as_json:
        typer.echo(_json_answer(result, campaign, hint, records=records, kept=kept, projected=project and not unprojected,
                                where=where))
    else:
        for output in result.outputs:
            run, grade = output.run, output.grade
            where_to = ", ".join(_shown(where, n) for n in records.get(run.run_id, []) or [bundle_name(run.run_id)])
            sandbox = f"  sandbox {draft_sandboxes / run.run_id}" if draft_sandboxes is not None else ""
            typer.echo(f"  {run.run_id}  {_outcome_label(run, grade)}  {where_to}{sandbox}")
        if draft_sandboxes is not None:
            _trial_said(where, result)
        typer.echo(
            f"{len(result.outputs)} run(s) recorded: {result.passed} pass, {len(result.outputs) - result.passed} fail"
            + (f"; {len(result.failures)} run(s) failed to record" if result.failures else "")
        )
        if result.outputs and result.batch and any(o.run.run_mode == "agent" for o in result.outputs):
            # the gate compares model runs: a harness, scripted or replay batch is no side of it
            typer.echo(f"batch {result.batch} (select these runs with `--candidate-select batch={result.batch}`)")
        elif result.outputs and result.batch:
            typer.echo(f"batch {result.batch} (no model's runs: the regression gate compares none of them)")
        if result.outputs and not asked_to_project and draft_sandboxes is None:
            typer.echo(f"projections not regenerated (--no-project): run `{invocation.command('project', 'all')}`")
        for label, error in result.failures:
            typer.echo(f"  not recorded: {label}: {error}", err=True)
        for label, why in result.not_run:
            typer.echo(f"  {label}: {why}")
        _echo_hint(hint)
    for stopped in (result.taken_over, unprojected):
        if stopped:
            typer.echo(f"error: {stopped}", err=True)
    if result.failures or result.taken_over or unprojected:
        raise typer.Exit(1)


def _not_the_models(slots: campaign_mod.Campaign, retry_env: int) -> str:
    n = slots.not_the_models(retry_env)
    return f" ({n} ended for a reason not the model's and count in no model row)" if n else ""


def _other_build(slots: campaign_mod.Campaign, todo: list[PlannedRun], agent: str, copperhead_cli: str | None,
                 where: Workspace) -> str | None:
    """Said when a campaign's recorded runs were made by another copperhead build than the one
    here: the campaign id is drawn from the plan, not the build, so a harness developer checking a
    new build with the same command was told only `0 to run`, and a resume under another build
    split the campaign between builds without a word."""
    recorded = sorted({build_label(s.recorded.comparability.copperhead_version, s.recorded.comparability.copperhead_commit)
                       for s in slots.slots if s.recorded is not None})
    if agent != "copperhead" or not recorded:  # a fresh campaign: nothing to hash the install for
        return None
    try:  # a note, never a refusal: a complete campaign is not refused for a CLI it does not need
        cli = locate_cli(copperhead_cli, where.root)
        here = build_label(cli.version(), cli.commit()) if cli is not None else None
    except (UserError, OSError):
        return None
    if here is None or recorded == [here]:
        return None
    if todo:
        return (f"note: campaign {slots.id}'s recorded runs were made with copperhead {', '.join(recorded)}; this CLI is "
                f"{here}: its open slots run under it, in rows of their own (a campaign of their own, --campaign NAME, "
                "keeps one build per campaign)")
    return (f"note: campaign {slots.id}'s runs were made with copperhead {', '.join(recorded)}; this CLI is {here}: "
            "give its runs a campaign of their own (--campaign NAME) to run them")


def _announce(slots: campaign_mod.Campaign, todo: list[PlannedRun], retry_env: int, as_json: bool, money: MoneyLimits,
              build_note: str | None = None, suite_now: str | None = None) -> bool:
    """Says what of the campaign is recorded and what runs now; False when nothing does, which is
    then all the command says (nothing to run is nothing to refuse: preflight is for runs about to
    start, so a resumed campaign that is complete is not refused for a flag it no longer needs)."""
    if not as_json:
        typer.echo(f"campaign {slots.id}: {len(slots.slots) - len(todo)} of {len(slots.slots)} slot(s) recorded"
                   + _not_the_models(slots, retry_env) + f", {len(todo)} to run", err=True)
    if build_note and not as_json:
        typer.echo(build_note, err=True)
    if todo:
        spans = slots.suite_note(suite_now)
        if spans and not as_json:
            typer.echo(spans, err=True)
        return True
    hint = campaign_mod.retry_hint([s.recorded for s in slots.slots if s.recorded is not None], retry_env, carry=money.args())
    if as_json:
        typer.echo(_json_answer(SuiteResult(), slots.id, hint))
    else:
        _echo_hint(hint)
    return False


def _json_answer(
    result: SuiteResult, campaign: str, hint: str | None, *, records: dict[str, list[str]] | None = None,
    kept: Path | None = None, projected: bool = False, where: Workspace | None = None,
) -> str:
    """`run --json`'s one document, in one shape whether the invocation ran anything or found its
    campaign complete (an empty `result`); `kept` is where the sandboxes were kept, if they were.
    Names are the ledger's (`results/...`); `bundleFile` is the bundle where it is (a draft's or
    `--results DIR`'s own file), as the text names it."""
    return json.dumps({
        "runs": [
            {
                "runId": o.run.run_id, "task": o.run.task.id, "repeat": o.run.repeat, "verdict": o.grade.verdict,
                "failureCategory": o.grade.failure_category,
                "harnessFailure": o.run.harness_failure.kind if o.run.harness_failure is not None else None,
                # a money limit's stop, which the verdict alone shows as the model's failure
                "costCap": msgspec.to_builtins(o.run.cost_cap) if o.run.cost_cap else None,
                "records": (records or {}).get(o.run.run_id, []), "bundle": bundle_name(o.run.run_id),
                # the names above are the ledger's (`results/...`); this is the file, wherever the workspace is
                **({"bundleFile": _shown(where, bundle_name(o.run.run_id))} if where is not None else {}),
                "sandbox": str(kept / o.run.run_id) if kept is not None else None,
                **({"pass": o.run.passes.index, "passesAllowed": o.run.passes.allowed} if o.run.passes else {}),
            }
            for o in result.outputs
        ],
        "recorded": len(result.outputs), "passed": result.passed, "failed": len(result.outputs) - result.passed,
        "notRecorded": [{"run": label, "error": error} for label, error in result.failures],
        "notRun": [{"run": label, "reason": why} for label, why in result.not_run], "takenOver": result.taken_over,
        "batch": result.batch if result.outputs else None, "campaign": campaign, "projected": projected,
        "sandboxesKept": str(kept) if kept is not None else None, "retryHint": hint,
    }, sort_keys=True)


def _shown(where: Workspace, name: str) -> str:
    """A record or bundle an event names `results/...`, as a reader would open it: under `--results
    DIR` (a draft's workspace, a ledger elsewhere) that is DIR/..., not results/ under the root."""
    return where.shown(name) if name.startswith(f"{RUNS}/") else packed_mod.record_shown(where, name)


def _project_or_say(where: Workspace) -> tuple[dict[str, list[str]], str | None]:
    """Every output regenerated (`regenerate_after`); each run's result records, by run id."""
    state, unprojected = regenerate_after(where, "run(s)")
    records: dict[str, list[str]] = {}
    for entry in record_entries(state, build=False) if state is not None else ():
        records.setdefault(entry.run_id, []).append(record_name(entry.path))
    return records, unprojected


def _outcome_label(run: RunRecorded, grade: GradeRecorded) -> str:
    """A recorded run's line: its verdict and category, and whatever says it is not all the model's."""
    label = grade.verdict + (f" ({grade.failure_category})" if grade.failure_category else "")
    if run.harness_failure is not None:
        label += f"; not the model's: {run.harness_failure.kind}"
    if run.cost_cap:
        label += "; stopped by a money limit"
    return f"pass {run.passes.index}/{run.passes.allowed}: {label}" if run.passes else label


def _interrupted(campaign: str, where: Workspace, draft: bool, *, again: bool, on: tuple[str, ...] = ()) -> str:
    """Ctrl-C ended the command silently (exit 130), leaving a reader to wonder what was lost.
    A draft's runs are in its scratch workspace (`where`, then), which `run --draft` again would
    not reuse. `on`:
    where the runs executed (`--executor dask --scheduler …`), which a resume needs as much."""
    resume = invocation.command('run', '--resume', campaign, *on)
    waiting = where.pending_run_ids(campaign + campaign_mod.SEPARATOR)
    # a run interrupted in its append is kept, not recorded: said, so "recorded" stays true
    kept = (f" or kept beside its bundle for the next invocation to append ({len(waiting)}: {', '.join(waiting[:3])}"
            f"{', …' if len(waiting) > 3 else ''})") if waiting else ""
    if draft:
        how = f"the same command again (or `{resume}`)" if again else f"`{resume}`"
        return (f"interrupted: every run of campaign {campaign} that finished is recorded in the draft workspace "
                f"{where.results}{kept}; run {how} to run the slots still missing there")
    return (f"interrupted: every run of campaign {campaign} that finished is recorded{kept}; run the same command again "
            f"(or `{resume}`) to run the slots still missing, which also "
            f"regenerates the projections (`{invocation.command('project', 'all')}` does that alone)")


def _unrecorded_spend(where: Workspace, campaign: str, store: LedgerStore, model: str) -> str:
    """What the runs the interrupt killed (and any killed before) spent, paid and never recorded:
    metered only under a money limit, counted against the campaign's budget when resumed, and
    recorded as `spend.unrecorded` here when the ledger takes it (else by the next invocation)."""
    if not campaign_mod.spend_journal(where, campaign).is_file():
        return ""
    try:  # one read after Ctrl-C (on a database gone, it waits out the reconnect bound once)
        view = ledger_view.read(where.ledger)
    except (UserError, OSError):
        return ""
    lost = campaign_mod.spent(where, view, campaign)[1]
    if not lost:
        return ""
    recorded = ("; recorded as spend.unrecorded, which LEADERBOARD.md lists once the projections are regenerated"
                if _record_unrecorded(where, store, campaign, model, view) else "")
    return (f"; runs of campaign {campaign} killed with their driver, this one's and any before, have spent "
            f"{pricing.usd(lost)} on model calls the provider answered, which no run records (the campaign's "
            "--budget-usd counts it; a call still in flight when a run was killed is billed and not counted)" + recorded)


def _record_unrecorded(where: Workspace, store: LedgerStore, campaign: str, model: str,
                       view: ledger_view.LedgerView | None = None) -> int:
    """Appends `spend.unrecorded` for the campaign's killed runs not yet holding one; how many runs
    it newly records. A ledger that cannot be reached now (a database gone) records none: the
    journal keeps the figures for the next invocation. A refusal is said, naming the journal."""
    journal = campaign_mod.spend_journal(where, campaign)
    if not journal.is_file():
        return 0
    try:
        view = view or ledger_view.read(where.ledger)
        events = campaign_mod.unrecorded_events(where, view, campaign, model, Actor(kind="runner", name="cbledger-runner"))
        return sum(a.created for a in store.append(events)) if events else 0
    except (StoreUnavailable, OSError):
        return 0
    except UserError as exc:
        typer.echo(f"warning: {journal}: the killed runs' spend was not recorded in the ledger ({exc}); "
                   "--budget-usd still counts it", err=True)
        return 0


def _echo_hint(hint: str | None) -> None:
    if hint:
        typer.echo(hint)


def _show_dry_run(
    where: Workspace, plan: Plan, view: ledger_view.LedgerView, campaign: str, *, session: str | None, passes: int | None,
    segment: str | None, retry_env: int, where_to_run: str, as_json: bool, executor: str, jobs: int, money: MoneyLimits,
    draft: bool = False, copperhead_cli: str | None = None,
) -> None:
    """The plan, slot by slot: which are recorded in the campaign and which a run would make now.
    A suite on disk that differs from the recorded one is refused first, as the run would be (a
    draft's own suite is made with its workspace; with no suite recorded there is none to hold to)."""
    if view.suite is not None and not draft:
        current_suite.require(view, Catalog(where.root), plan.tasks, where)
    state = campaign_mod.open_campaign(where, plan, view, campaign, session=session, passes=passes, segment=segment,
                                       write=False)
    to_run = {(p.task.id, p.slot): p for p in state.missing(retry_env)}
    # a slot whose run finished but whose append the ledger refused: the run adopts it, not runs it
    pending = set(where.pending_run_ids(campaign_mod.prefix(campaign)))

    def kept(then: PlannedRun | None) -> bool:
        return then is not None and campaign_mod.run_id(campaign, then.task.id, then.slot, then.attempt) in pending

    # what the slots still to run would cost, not those already recorded or kept to be appended
    recorded_spend, unrecorded = campaign_mod.spent(where, view, campaign)
    estimate = (cost_estimate.for_plan(replace(plan, runs=tuple(p for p in to_run.values() if not kept(p))), view,
                                       cap=money.run_cap_micros, budget=money.budget_micros,
                                       spent=recorded_spend + unrecorded, unrecorded=unrecorded)
                if plan.agent == "copperhead" and session is None else None)
    # the passes each attempt may take, as the run would grant them (a bad allowance file fails here too)
    allowed = passes_allowed(Catalog(where.root), plan, passes)
    slots = [(slot, to_run.get((slot.planned.task.id, slot.planned.slot))) for slot in state.slots]

    if as_json:
        typer.echo(json.dumps({
            "agent": plan.agent, "model": plan.model_id, "tasks": len(plan.tasks), "executor": executor,
            "jobs": jobs, "campaign": campaign, "toRun": len(to_run),
            "runs": [{"task": slot.planned.task.id, "tier": slot.planned.task.manifest.tier, "repeat": slot.planned.repeat,
                      "slot": slot.planned.slot, "repeatsPlanned": slot.planned.repeats_planned,
                      "passesAllowed": allowed.get(slot.planned.task.id, 1),
                      "recorded": slot.recorded.run_id if slot.recorded is not None else None,
                      "attempt": then.attempt if then is not None else None, "kept": kept(then)}
                     for slot, then in slots],
            **({"costEstimate": estimate.as_json()} if estimate is not None else {}),
        }, sort_keys=True))
        return
    typer.echo(f"plan: agent {plan.agent}, model {plan.model_id}, {len(plan.tasks)} task(s), {len(plan.runs)} run(s), {where_to_run}")
    adopted = sum(kept(then) for _, then in slots)
    typer.echo(f"campaign {campaign}: {len(plan.runs) - len(to_run)} slot(s) recorded{_not_the_models(state, retry_env)}, "
               + (f"{adopted} kept (appended, not run again), " if adopted else "") + f"{len(to_run) - adopted} to run")
    build_note = _other_build(state, list(to_run.values()), plan.agent, copperhead_cli, where) if executor == "local" else None
    if build_note:
        typer.echo(build_note)
    for slot, then in slots:
        r = slot.planned
        up_to = allowed.get(r.task.id, 1)
        if then is None:
            status = f"recorded {slot.recorded.run_id if slot.recorded else ''}"
        elif kept(then):
            status = "kept: its events will be appended, not run again"
        else:
            status = "would run" + (f" (attempt {then.attempt})" if then.attempt > 1 else "")
        # the slot is this campaign's k-th of the task; its repeat counts the task's runs in the
        # ledger, so "repeat 7/3" would read as seven of three
        repeat = f" (repeat {r.repeat} of the task)" if r.repeat != r.slot else ""
        typer.echo(f"  {r.task.id}  tier {r.task.manifest.tier}  slot {r.slot}/{r.repeats_planned}{repeat}"
                   + (f"  up to {up_to} passes" if up_to > 1 else "") + f"  {status}")
    if estimate is not None:
        typer.echo(estimate.line())
        limits = estimate.limits_line()
        if limits:
            typer.echo(limits)


def _discard_draft(where: Workspace, new_draft: bool, made: bool) -> None:
    """A draft refused before any run keeps no workspace; its path was printed when it was made,
    so the line says what became of it (a directory given with --results is emptied, not removed)."""
    if new_draft:
        draft_run.discard(where, made)
        what = "removed" if made else "emptied"
        typer.echo(f"draft workspace {where.results} {what}: the draft was refused before any run", err=True)


def _draft_workspace(where: Workspace, draft: bool, as_json: bool) -> Workspace:
    """The scratch workspace a draft runs in (docs/AUTHORING.md); `where` itself when not a draft
    (or a dry run, which writes nothing)."""
    if not draft:
        return where
    try:
        made = draft_run.workspace(where, where.results_dir)
    except KeyboardInterrupt:
        fail("interrupted while the draft workspace was made: nothing kept, nothing run", code=INTERRUPTED)
    invocation.in_results(str(made.results))  # what is left to run is resumed there
    typer.echo(f"draft workspace {made.results} (not the project's ledger)", err=as_json)
    return made


def rescore(
    project: Annotated[bool, typer.Option(help="Regenerate the projections afterwards.")] = True,
    ledger: LedgerOption = None, root: RootOption = None, as_json: JsonFlag = False,
) -> None:
    """Re-grade every preserved run under the current suite version (no agent, no model)."""
    progress = Reporter("re-grading runs", quiet=as_json and not sys.stderr.isatty())
    started = False

    def step(done: int, total: int, run_id: str, outcome: str) -> None:
        nonlocal started
        if not started:
            progress.start(total)
            started = True
        progress.step(done, total, f"{run_id} {outcome}", error=outcome == "failed")

    where = workspace(ledger, root)
    try:
        result = rescore_runs(where, _maintainer(), on_step=step)
    finally:
        progress.close()
    # the grades are the new version's records and leaderboard rows: written as `run` writes its
    # runs', or `replay --verify` finds the outputs behind the ledger
    unprojected = regenerate_after(where, "grade(s)")[1] if project and result.graded else None
    if as_json:
        typer.echo(json.dumps({
            "graded": [{"runId": g.run_id, "verdict": g.verdict} for g in result.graded],
            "skipped": [{"runId": r, "reason": why} for r, why in result.skipped],
            "failed": [{"runId": r, "error": e} for r, e in result.failed],
        }, sort_keys=True))
    else:
        reasons = Counter("already graded" if why.startswith("already graded") else
                          "of a task no longer in the suite" if why.endswith("no longer in the suite") else why
                          for _, why in result.skipped)
        said = f" ({', '.join(f'{n} {why}' for why, n in sorted(reasons.items()))})" if reasons else ""
        typer.echo(f"re-graded {len(result.graded)}, skipped {len(result.skipped)}{said}, failed {len(result.failed)}")
        for run_id, error in result.failed:
            typer.echo(f"  {run_id}: {error}", err=True)
        if result.graded and not project:
            typer.echo(f"projections not regenerated (--no-project): run `{invocation.command('project', 'all')}`")
    if unprojected:
        typer.echo(f"error: {unprojected}", err=True)
    if result.failed or unprojected:
        raise typer.Exit(1)


pricing_app = typer.Typer(help="Price tables.", no_args_is_help=True)


@pricing_app.command("publish")
def pricing_publish(
    file: Annotated[Path, typer.Argument(help="A price table (JSON: tableVersion, effectiveDate, models, nullCostRoutes).")],
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Append a price table as pricing.published. It takes effect on its effectiveDate and may list
    only the models it changes (the rest are inherited); a table that would re-price a recorded
    run is refused."""
    table = pricing.load_table(file)
    view = ledger_view.read(ledger_path(ledger, root))
    pricing.refuse_publishing(table, view.price_tables, [r for r in view.runs.values() if r.run_id not in view.retracted], str(file))
    event = make_event(table, id=f"pricing:{table.table_version}", actor=_maintainer())
    (r,) = LedgerStore(ledger_path(ledger, root)).append([event])
    if as_json:
        typer.echo(json.dumps({"seq": r.seq, "tableVersion": table.table_version, "created": r.created, "hash": r.hash}, sort_keys=True))
        return
    note = "" if r.created else " (already published; no-op)"
    typer.echo(f"seq {r.seq}  pricing.published {table.table_version}{note}")


suite_app = typer.Typer(help="Suite versions.", no_args_is_help=True)


def _refuse_older_grader(view: ledger_view.LedgerView, where: object) -> None:
    """An older cbledger bumping a ledger a newer one bumped recorded the older grader over the
    newer's (a downgrade's bump, which the older build's own `suite status` suggests): every later
    grade then ran under rules older than the ones the ledger had moved to. Refused, naming both."""
    from cbledger.grading.grader import GRADER_VERSION
    from cbledger.projections.fold import semver_key

    recorded = view.suite.grader_version if view.suite is not None else None
    if recorded is not None and semver_key(recorded) > semver_key(GRADER_VERSION):
        fail(f"{where}: suite {view.suite_version} was recorded by grader {recorded}, newer than this build's "
             f"{GRADER_VERSION}: a bump here would grade by older rules than the ledger's; upgrade cbledger (nothing recorded)")


@suite_app.command("bump")
def suite_bump(
    reason: Annotated[str, typer.Option(help="Why the suite changed (recorded).")],
    level: Annotated[str | None, typer.Option(help="major | minor | patch  [default: minor]")] = None,
    version: Annotated[str | None, typer.Option(help="An explicit new version (MAJOR.MINOR.PATCH) instead of a computed one.")] = None,
    skip_trial: Annotated[bool, typer.Option(
        "--skip-trial",
        help="Record without running gold and noop on the changed tasks first; the recorded reason says so.",
    )] = False,
    copperhead_cli: Annotated[str | None, typer.Option("--copperhead-cli", envvar="COPPERHEAD_CLI", help="Path to copperhead's cli.js (for setup commands).")] = None,
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Append suite.bumped with the current manifest, fixture, vocabulary and pattern-set hashes;
    refuses when nothing changed. First runs gold and noop once on every added or changed task
    (through the runner, recording nothing) and refuses unless gold passes and noop fails each."""
    if not reason.strip():
        fail("--reason: say why the suite changed (it is recorded with the version)")
    if version is not None and not conforms(version, SemVer):
        fail(f"--version {version!r}: must be MAJOR.MINOR.PATCH, three whole numbers (for example 2.0.0)")
    if version is not None and level is not None:
        fail(f"--level {level} and --version {version}: give one (--version names the version, --level computes it)")
    if level is not None and level not in ("major", "minor", "patch"):
        fail(f"--level {level!r}: must be major, minor or patch")
    level = level or "minor"
    ws = workspace(ledger, root)
    path = ws.ledger
    view = ledger_view.read(path, links=True)
    _refuse_older_grader(view, path)
    # a task in error, or a named suite listing a task there is none of (once recorded), refused
    # before anything is tried and in validate's words, which name the field
    checked = validate.bump_check(ws.root)
    if checked.errors:
        fail(f"refusing to record the suite bump, {len(checked.errors)} error(s) (`{invocation.command('validate')}` lists "
             f"them): {validate.listed(checked.errors)}; nothing recorded")
    catalog = Catalog(ws.root)
    to_try = suite_version.changed_tasks(view.suite, catalog)
    file_changes: list[definitions.FileDifference] = []
    if view.archived is not None:
        # a gold, rubric, session or baseline report edited since: no manifest hash covers them,
        # and a gold that no longer passes was once recorded untried
        last, now = suite_archive.kept_definitions(ws, view.archived), suite_archive.on_disk(ws)
        file_changes = definitions.file_differences(last, now)
        to_try = sorted(set(to_try) | (definitions.changed_tasks(last, now) & set(catalog.task_ids())))
    for problem in (p for t in to_try for p in checked.warnings.get(t, [])):
        typer.echo(printable(str(problem), limit=4000), err=True)
    if skip_trial:
        if to_try:
            reason = f"{reason} (recorded with --skip-trial: gold and noop not run on {', '.join(to_try)})"
    else:
        results = trial.run_trials(catalog.root, to_try, copperhead_cli=copperhead_cli, on_done=lambda r: typer.echo(f"  trial {r}", err=True))
        trial.require_discriminating(results, "refusing to record the suite bump")
        if to_try and not as_json:
            typer.echo(f"trial: gold passes and noop fails on {len(to_try)} changed task(s)")
    body, kept = suite_version.bump_and_keep(view.suite, ws, reason, level, version, kept_versions=set(view.archives))
    events = [
        make_event(body, id=f"suite:{body.suite_version}", actor=_maintainer()),
        make_event(kept, id=suite_archive.event_id(kept), actor=_maintainer()),
    ]
    r, a = LedgerStore(path).append(events)
    # A real board without its baseline reports on disk: the version pins its tree (the
    # manifest's hash) and names none of its reports, which `definitions.differences` then
    # compares only where both sides name some. Not refused: the tree is pinned either way.
    missing = [f.id for f in map(catalog.fixture, catalog.fixture_ids())
               if f.manifest.origin == "upstream" and not any((f.dir / "baseline").glob("*"))]
    if missing:
        typer.echo(f"note: real board(s) not materialized ({', '.join(missing)}): suite {body.suite_version} pins their "
                   "trees by hash, not their baseline reports (`scripts/materialize-real` before a bump pins those too)", err=True)
    hashed = [] if view.suite is None else suite_version.changes(view.suite, suite_version.current(Catalog(ws.root)))
    differences = [str(d) for d in hashed]
    if as_json:
        typer.echo(json.dumps({
            "suiteVersion": body.suite_version, "previous": body.previous, "seq": r.seq, "changes": differences,
            "fileChanges": [f.message for f in file_changes],
            "tried": to_try if not skip_trial else [], "archivedSeq": a.seq, "definitionsHash": kept.definitions_hash,
        }, sort_keys=True))
        return
    # each change by its file where the kept definitions name one, else as the hashes say: the line
    # once said "named suites changed" alone of a bump that recorded a README too
    said = [str(d) for d in hashed if not any(f.kind == d.kind and f.key == (d.key or "") for f in file_changes)]
    said += [f.message for f in file_changes]
    changed = "" if view.suite is None else " (" + ", ".join(said) + ")"
    typer.echo(f"seq {r.seq}  suite {body.previous or '-'} → {body.suite_version}{changed}")
    typer.echo(f"seq {a.seq}  suite.archived {body.suite_version}: definitions {kept.definitions_hash[:12]} kept under {ws.shown_path(ws.suites)}/")


@suite_app.command("archive")
def suite_archive_command(
    version: Annotated[str, typer.Argument(help="A recorded suite version whose definitions are not yet kept.")],
    from_commit: Annotated[
        str | None, typer.Option("--from-commit", help="Read the definitions from this commit of the project's git history.")
    ] = None,
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Keep a recorded suite version's definitions under results/suites/ and append suite.archived.

    For a suite version bumped before definitions were kept: its files are recovered from the
    project's git history (`--from-commit`) or the working tree, and refused unless they hash to
    the task manifest and fixture hashes the version recorded."""
    ws = workspace(ledger, root)
    path = ws.ledger
    view = ledger_view.read(path)
    bump = view.bumps.get(version)
    if bump is None:
        fail(f"suite {version}: no suite.bumped records it (known: {', '.join(view.bumps) or 'none'})")
    if version in view.archives:
        fail(f"suite {version}: its definitions are already recorded ({view.archives[version].definitions_hash[:12]})")
    if from_commit is not None:
        try:
            repo = pygit2.Repository(str(ws.root))
        except pygit2.GitError as exc:
            fail(f"{ws.root}: not a git repository: {exc}")
        source: Source = GitSource(repo, from_commit)
        label = f"git commit {source.commit.id}"  # type: ignore[attr-defined]
    else:
        source, label = DirectorySource(ws.root), "the working tree"
    kept = suite_archive.keep(ws, version, source, bump, label)
    event = make_event(kept, id=suite_archive.event_id(kept), actor=_maintainer())
    (r,) = LedgerStore(path).append([event])
    if as_json:
        typer.echo(json.dumps({"seq": r.seq, "suiteVersion": version, "definitionsHash": kept.definitions_hash, "source": label}, sort_keys=True))
        return
    typer.echo(f"seq {r.seq}  suite.archived {version}: definitions {kept.definitions_hash[:12]} from {label}")


@suite_app.command("status")
def suite_status(ledger: LedgerOption = None, root: RootOption = None, as_json: JsonFlag = False) -> None:
    """Show the recorded suite version and whether the tasks on disk still match it."""
    ws = workspace(ledger, root)
    view = ledger_view.read(ws.ledger)
    if view.suite is None:
        fail("no suite version recorded")
    # the files the standard's hashes do not cover (baselines, gold) too, and each change by file
    diffs = suite_archive.named_differences(
        ws, suite_version.differences(view.suite, suite_version.current(Catalog(ws.root))), view.archived,
    )
    if as_json:
        typer.echo(json.dumps({"suiteVersion": view.suite.suite_version, "matches": not diffs, "differences": list(diffs)}, sort_keys=True))
    else:
        typer.echo(f"suite {view.suite.suite_version}: " + ("matches the tasks on disk" if not diffs else "differs: " + ", ".join(diffs)))
    if diffs:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command()(run)
    app.command()(rescore)
    app.add_typer(pricing_app, name="pricing")
    app.add_typer(suite_app, name="suite")
