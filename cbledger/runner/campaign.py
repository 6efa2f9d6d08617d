"""Campaigns: a run plan that keeps its identity across invocations, so a killed or interrupted
plan is finished by running it again, and never run twice.

A campaign is one plan: its tasks and repeats, model, condition (the ablations), run mode and
session, feedback passes and suite version. Unless `--campaign` names one, its id is read off
those (`default_id`): the same command gives the same campaign. Each slot (task, k-th repeat
of the campaign) has one run id per attempt, made from the campaign id, the task, k and the
attempt (`run_id`), so the same slot recorded a second time is the same event id with another
body: the ledger refuses it as a conflict, whichever driver tried.

Repeat indexes continue across campaigns: a campaign's k-th repeat of a task is recorded as
repeat offset + k, where the offset is the highest repeat any run (or any other campaign's plan)
of the same task, model and condition already holds, fixed when the campaign's plan is
first kept (`results/campaigns/<id>.json`).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

import msgspec
from blake3 import blake3
from msgspec.structs import replace as replace_struct

from cbledger import invocation
from cbledger.errors import UserError, did_you_mean
from cbledger.ledger import durable
from cbledger.ledger.events import (
    Ablations,
    Actor,
    PassRef,
    RunRecorded,
    SpendUnrecorded,
    SpendUnrecordedEvent,
)
from cbledger.runner.budget import journal_spend
from cbledger.runner.ledger_view import LedgerView
from cbledger.runner.plan import Plan, PlannedRun
from cbledger.tasks.catalog import Catalog
from cbledger.workspace import Workspace

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


class CampaignPlan(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What `--resume` needs to run a campaign's missing slots: its plan, as first kept."""

    id: str
    agent: str
    model: str
    run_mode: str
    ablations: Ablations
    session: str | None = None
    passes: int | None = None
    suite_version: str | None = None
    #: `--segment`, the cost segment its runs record for a model the price table does not list
    #: (None: none was given); unset in a plan kept before campaigns kept it, whose resume is
    #: given it again
    segment: str | msgspec.UnsetType | None = msgspec.UNSET
    #: `--max-cost-usd` and `--budget-usd` as last given (None: not given); a later invocation that
    #: gives neither runs under these, so a bare `--resume` never runs a budgeted campaign unmetered.
    #: Unset in a plan kept before plans kept them
    max_cost_usd: str | msgspec.UnsetType | None = msgspec.UNSET
    budget_usd: str | msgspec.UnsetType | None = msgspec.UNSET
    #: task id -> repeats the campaign plans of it, in plan order
    repeats: dict[str, int]
    #: task id -> the repeat index the campaign's slot 1 follows
    offsets: dict[str, int]

    @property
    def condition(self) -> tuple[str, str]:
        return (self.model, _condition(self.ablations))


@dataclass(frozen=True)
class Slot:
    planned: PlannedRun
    #: the slot's latest recorded attempt, or None when none is
    recorded: RunRecorded | None

    @property
    def done(self) -> bool:
        return self.recorded is not None


@dataclass(frozen=True)
class Campaign:
    plan: CampaignPlan
    slots: tuple[Slot, ...]

    @property
    def id(self) -> str:
        return self.plan.id

    def suite_note(self, current: str | None) -> str | None:
        """Said when a campaign resumed after a suite bump runs its open slots under another suite
        version than its recorded runs: each suite's rows then hold part of the campaign's
        repeats, which a resume once did without a word."""
        versions = sorted({s.recorded.comparability.suite_version for s in self.slots if s.recorded is not None},
                          key=lambda v: tuple(int(p) for p in v.split(".")))
        if current is None or not versions or versions == [current]:
            return None
        return (f"note: campaign {self.id}'s recorded runs were made under suite {', '.join(versions)}; the slots run "
                f"now are graded under suite {current}, whose rows hold the recorded ones only once `{invocation.command('rescore')}` "
                f"grades them under {current} too (or name a new campaign with --campaign for a whole one)")

    def missing(self, retry_env: int = 0) -> list[PlannedRun]:
        """The slots to run now: those with no run, and with `retry_env`, those whose latest
        attempt failed for a reason not the model's and may be tried again (as the next attempt)."""
        out = []
        for slot in self.slots:
            if slot.recorded is None:
                out.append(slot.planned)
            elif retryable(slot.recorded, retry_env):
                assert not isinstance(slot.recorded.campaign, msgspec.UnsetType)
                out.append(replace(slot.planned, attempt=slot.recorded.campaign.attempt + 1))
        return out

    def not_the_models(self, retry_env: int = 0) -> int:
        """Recorded slots that stay as they are (no retry allowed now) whose latest attempt ended
        for a reason not the model's: recorded, yet counted in no model row, which "recorded"
        alone would hide from whoever reads the count."""
        return sum(1 for slot in self.slots if slot.recorded is not None and stays_not_the_models(slot.recorded, retry_env))


def retryable(run: RunRecorded, retry_env: int) -> bool:
    """Whether a recorded attempt may be followed by another: it failed for a reason not the
    model's, and `--retry-env N` allows N attempts past the first."""
    if run.harness_failure is None or isinstance(run.campaign, msgspec.UnsetType):
        return False
    return run.campaign.attempt <= retry_env


def stays_not_the_models(run: RunRecorded, retry_env: int) -> bool:
    """A slot's latest attempt that ended for a reason not the model's and that this allowance
    does not try again: recorded, and counted in no model row."""
    return run.harness_failure is not None and not isinstance(run.campaign, msgspec.UnsetType) and not retryable(run, retry_env)


def retry_hint(latest: list[RunRecorded], retry_env: int, *, again: bool = True, carry: tuple[str, ...] = ()) -> str | None:
    """How to try again the slots whose latest attempt the provider or the harness ended: a reader
    who sees such runs recorded as failures should not have to find `--retry-env` in the docs.
    `latest` is each slot's latest attempt; None when none is left to retry. `again=False` when
    the same command would not find these runs (`run --draft` makes a new workspace each time)."""
    left = {(r.task.id, r.campaign.slot): r for r in latest
            if stays_not_the_models(r, retry_env) and not isinstance(r.campaign, msgspec.UnsetType)}  # (the type's narrowing)
    if not left:
        return None
    kinds = sorted({r.harness_failure.kind for r in left.values() if r.harness_failure is not None})
    attempts = max(r.campaign.attempt for r in left.values() if not isinstance(r.campaign, msgspec.UnsetType))
    campaigns = sorted({r.campaign.id for r in left.values() if not isinstance(r.campaign, msgspec.UnsetType)})
    # the slots of one campaign (as every invocation's are): its kept plan is all a resume needs
    # `carry`: the money limits given, which a printed resume carries too (its plan keeps them as well)
    resume = invocation.command('run', '--resume', campaigns[0], '--retry-env', str(attempts), *carry) if len(campaigns) == 1 else None
    if resume is not None and not again:
        how = f"run `{resume}`"
    else:
        how = f"run the same command with --retry-env {attempts}" + (f" (or `{resume}`)" if resume else "")
    return (f"{len(left)} slot(s) ended for a reason not the model's ({', '.join(kinds)}) and count in no model row: "
            f"to try them again, {how}")


#: between the campaign id and the rest of a run id: a character no campaign id holds, so the
#: runs of campaign `a` are never taken for those of campaign `a-b` (`leftovers` relies on it)
SEPARATOR = "."


def prefix(campaign: str) -> str:
    """What every run id of the campaign starts with, and no other campaign's does."""
    return f"{campaign}{SEPARATOR}"


def run_id(campaign: str, task_id: str, slot: int, attempt: int) -> str:
    """One attempt at one slot: the same three give the same id, so the ledger sees a second
    recording of a slot as a conflict on `run:<id>`."""
    return f"{campaign}{SEPARATOR}{task_id}-s{slot}-a{attempt}"


def condition_of(run: RunRecorded) -> tuple[str, str]:
    """The model and condition a run was made under: what a campaign's runs share, and what
    repeat numbers are counted within. Not the run mode, which the runner may record otherwise
    than the plan said (a run answered by the project's own scripted endpoint is `scripted`)."""
    return (run.model.id, _condition(run.ablations))


def _condition(ablations: Ablations) -> str:
    """The ablations as one comparable value (a tool subset as a set), as the views key rows."""
    data = msgspec.to_builtins(ablations)
    if ablations.tool_subset is not None:
        data["toolSubset"] = sorted(set(ablations.tool_subset))
    return json.dumps(data, sort_keys=True)


def run_mode_of(agent: str, session: str | None) -> str:
    if agent in ("gold", "noop", "replay"):
        return agent
    return "scripted" if session is not None else "agent"


def default_id(plan: Plan, *, session: str | None, passes: int | None, suite_version: str | None) -> str:
    """The same plan, asked again, is the same campaign: read off everything that makes its runs
    one experiment (not `--jobs` or the executor, which change nothing recorded)."""
    repeats: dict[str, int] = {}
    for r in plan.runs:
        repeats[r.task.id] = r.repeats_planned
    key = json.dumps({
        "agent": plan.agent, "model": plan.model_id, "condition": _condition(plan.ablations),
        "runMode": run_mode_of(plan.agent, session), "session": session, "passes": passes,
        "suiteVersion": suite_version, "repeats": repeats,
    }, sort_keys=True)
    model = re.sub(r"[^A-Za-z0-9_-]+", "-", plan.model_id).strip("-")[:40] or "campaign"
    return f"{model}-{blake3(key.encode()).hexdigest()[:12]}"


def check_id(campaign: str, flag: str = "--campaign") -> str:
    if not _ID.match(campaign):
        raise UserError(f"{flag} {campaign!r}: a campaign id is 1-64 letters, digits, _ and - (starting with a letter or digit)")
    return campaign


def _file(workspace: Workspace, campaign: str) -> Path:
    return workspace.campaigns / f"{campaign}.json"


def is_kept(workspace: Workspace, campaign: str) -> bool:
    """Has the campaign's plan been kept here (by an earlier invocation)?"""
    return _file(workspace, campaign).is_file()


def spend_journal(workspace: Workspace, campaign: str) -> Path:
    """Where the campaign's runs' spend is written call by call (`budget.Purse`)."""
    return workspace.campaigns / f"{campaign}.spend.jsonl"


def spent(workspace: Workspace, view: LedgerView, campaign: str) -> tuple[int, int]:
    """What the campaign has spent, in micro-USD: (its recorded runs' costs, what its runs killed
    with their driver spent, which the spend journal holds and no run records). Both count
    against its budget. A recorded run of unknown cost (an answer reported no usage) counts what
    the journal metered of it: counted as nothing, a resumed campaign's budget forgot money the
    meter had seen go."""
    mine = [r for r in view.runs.values() if _of(r, campaign)]
    journal = journal_spend(spend_journal(workspace, campaign))
    recorded = sum(r.cost.usd_micros if r.cost.usd_micros is not None else journal.get((r.batch, r.run_id), 0) for r in mine)
    keys = {(r.batch, r.run_id) for r in mine}
    return recorded, sum(spent for key, spent in journal.items() if key not in keys)


def unrecorded_events(workspace: Workspace, view: LedgerView, campaign: str, model: str, actor: Actor) -> list[SpendUnrecordedEvent]:
    """`spend.unrecorded` for each run of the campaign the spend journal holds and the ledger does
    not: what a bill-payer reads in LEADERBOARD.md then adds up to what the provider billed (the
    journal was read only for the budget, so the figures left out the killed runs' spend). The id
    digests the figure with the run: a journal that grew after an interrupt recorded it (an answer
    that landed as the driver went down) gives another event, and the fold keeps each run's largest."""
    journal = journal_spend(spend_journal(workspace, campaign))
    mine = {(r.batch, r.run_id) for r in view.runs.values() if _of(r, campaign)}
    now = _dt.datetime.now(_dt.UTC)
    events = []
    for (batch, run), micros in sorted(journal.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
        if (batch, run) in mine or micros <= 0:
            continue
        # the id by digest: a run id and a batch id side by side can pass the 200 an id may hold
        digest = blake3(json.dumps([campaign, batch, run, micros]).encode()).hexdigest()[:32]
        body = SpendUnrecorded(campaign=campaign, run_id=run, batch=batch, model=model, usd_micros=micros)
        try:  # a journal line no run wrote (edited by hand) is not the ledger's to record
            msgspec.json.decode(msgspec.json.encode(body), type=SpendUnrecorded)
        except msgspec.ValidationError:
            continue
        events.append(SpendUnrecordedEvent(id=f"spend.unrecorded:{digest}", at=now, actor=actor, body=body))
    return events


def segment_of(workspace: Workspace, view: LedgerView, campaign: str, given: str | None) -> str | None:
    """The `--segment` the campaign's runs are made with: the one its plan keeps, which a later
    invocation (the same command, or `--resume`) need not give again, and may change only while
    no run of the campaign is recorded (a first invocation refused for want of one, say): one
    campaign's runs record one cost segment. Refused before anything is written."""
    path = _file(workspace, check_id(campaign))
    if not path.exists():
        return given
    return _segment(load(workspace, campaign), path, given, recorded=any(_of(run, campaign) for run in view.runs.values()))


def _segment(kept: CampaignPlan, path: Path, given: str | None, *, recorded: bool) -> str | None:
    if isinstance(kept.segment, msgspec.UnsetType):
        return given  # kept before plans kept it: as given again
    if given is None or given == kept.segment:
        return kept.segment
    if recorded:
        started = f"--segment {kept.segment}" if kept.segment is not None else "no --segment"
        raise UserError(f"--segment {given}: campaign {kept.id} has runs recorded with {started} ({path}); "
                        "give it no --segment (its plan's is used), or name a new campaign with --campaign")
    return given  # nothing recorded yet: the plan keeps the one given now


def limits_of(workspace: Workspace, campaign: str, max_cost_usd: str | None, budget_usd: str | None) -> tuple[str | None, str | None, bool]:
    """The money limits the campaign's runs are made under, each on its own: the one given now
    (`none` lifts it), else the one its plan keeps; and whether a kept one is among them. A limit
    is the operator's word on what a campaign may spend, not on one invocation of it: a resume
    that dropped one spent without a meter and without a word."""
    kept = load(workspace, campaign) if _file(workspace, check_id(campaign)).is_file() else None

    def one(given: str | None, kept_value: str | msgspec.UnsetType | None) -> tuple[str | None, bool]:
        if given is not None:
            return (None if given.strip().lower() == "none" else given), False
        if kept is None or isinstance(kept_value, msgspec.UnsetType) or kept_value is None:
            return None, False
        return kept_value, True

    cap, cap_kept = one(max_cost_usd, kept.max_cost_usd if kept else None)
    budget, budget_kept = one(budget_usd, kept.budget_usd if kept else None)
    return cap, budget, cap_kept or budget_kept


def _of(run: RunRecorded, campaign: str) -> bool:
    return not isinstance(run.campaign, msgspec.UnsetType) and run.campaign.id == campaign


def _keep(path: Path, plan: CampaignPlan) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    durable.write_atomic(path, msgspec.json.format(msgspec.json.encode(plan)) + b"\n")
    durable.fsync_directory(path.parent)


def load(workspace: Workspace, campaign: str) -> CampaignPlan:
    """A kept campaign plan (`--resume`): a clear error naming the file when it is missing or bad."""
    path = _file(workspace, check_id(campaign, "--resume"))
    try:
        kept = msgspec.json.decode(path.read_bytes(), type=CampaignPlan)
    except FileNotFoundError:
        near = did_you_mean(campaign, (p.stem for p in path.parent.glob("*.json")))
        raise UserError(f"--resume {campaign}: no campaign of that id here ({path} is missing){near}; "
                        f"run the plan's `{invocation.command('run')}` command again instead") from None
    except msgspec.DecodeError as exc:
        raise UserError(f"{path}: not a campaign plan ({exc})") from None
    if kept.id != campaign:
        raise UserError(f"{path}: field id is {kept.id!r}, not {campaign!r}")
    return kept


def plan_of(catalog: Catalog, kept: CampaignPlan) -> Plan:
    """The plan a kept campaign was started with."""
    runs: list[PlannedRun] = []
    for task_id, n in kept.repeats.items():
        task = catalog.task(task_id)
        runs.extend(PlannedRun(task, kept.model, r, n) for r in range(1, n + 1))
    return Plan(kept.agent, kept.model, kept.ablations, tuple(runs))


def _repeat_ceiling(view: LedgerView, workspace: Workspace, condition: tuple[str, str], campaign: str) -> dict[str, int]:
    """The highest repeat of each task held under `condition` by a recorded run or by another
    campaign's kept plan: a new campaign's repeats start above it."""
    top: dict[str, int] = {}
    for run in view.runs.values():
        if condition_of(run) == condition:
            top[run.task.id] = max(top.get(run.task.id, 0), run.repeat)
    if workspace.campaigns.is_dir():
        for path in sorted(workspace.campaigns.glob("*.json")):
            try:
                other = msgspec.json.decode(path.read_bytes(), type=CampaignPlan)
            except msgspec.DecodeError:
                continue
            if other.id == campaign or other.condition != condition:
                continue
            for task_id, n in other.repeats.items():
                top[task_id] = max(top.get(task_id, 0), other.offsets.get(task_id, 0) + n)
    return top


def open_campaign(
    workspace: Workspace, plan: Plan, view: LedgerView, campaign: str, *, session: str | None, passes: int | None,
    segment: str | None = None, write: bool = True, limits: tuple[str | None, str | None] | None = None,
) -> Campaign:
    """The campaign's slots and which are recorded. Its plan is kept on first use (unless
    `write` is False: a dry run), with `segment` as `segment_of` resolved it; a kept plan that
    differs from this one is refused, since its slots would mean other runs."""
    check_id(campaign)
    repeats: dict[str, int] = {}
    for r in plan.runs:
        repeats[r.task.id] = r.repeats_planned
    mode = run_mode_of(plan.agent, session)
    path = _file(workspace, campaign)
    ours = [run for run in view.runs.values() if _of(run, campaign)]
    condition = (plan.model_id, _condition(plan.ablations))
    for run in ours:
        if condition_of(run) != condition:
            raise UserError(
                f"campaign {campaign} holds runs of model {run.model.id} under other ablations or another model "
                f"than this plan; name a new campaign with --campaign"
            )
    kept: CampaignPlan | None = None
    if path.exists():
        kept = load(workspace, campaign)
        mine = (plan.agent, plan.model_id, mode, _condition(plan.ablations), session, passes, repeats)
        theirs = (kept.agent, kept.model, kept.run_mode, _condition(kept.ablations), kept.session, kept.passes, kept.repeats)
        if mine != theirs:
            raise UserError(f"{path}: campaign {campaign} was started with another plan; "
                            f"`{invocation.command('run', '--resume', campaign)}` runs its missing slots, or name a new campaign with --campaign")
        # a plan kept before plans kept the segment stays as it is; another is given the segment
        # now when nothing is recorded yet, and refuses it otherwise
        if not isinstance(kept.segment, msgspec.UnsetType) and _segment(kept, path, segment, recorded=bool(ours)) != kept.segment:
            kept = replace_struct(kept, segment=segment)
            if write:
                _keep(path, kept)
        if limits is not None and (kept.max_cost_usd, kept.budget_usd) != limits:
            kept = replace_struct(kept, max_cost_usd=limits[0], budget_usd=limits[1])  # as given last
            if write:
                _keep(path, kept)
    if kept is None:
        offsets = _offsets(view, workspace, campaign, condition, ours, repeats)
        kept = CampaignPlan(
            id=campaign, agent=plan.agent, model=plan.model_id, run_mode=mode, ablations=plan.ablations,
            session=session, passes=passes, suite_version=view.suite_version, segment=segment, repeats=repeats,
            offsets=offsets, max_cost_usd=limits[0] if limits else None, budget_usd=limits[1] if limits else None,
        )
        if write:
            _keep(path, kept)
    latest: dict[tuple[str, int], RunRecorded] = {}
    for run in ours:
        assert not isinstance(run.campaign, msgspec.UnsetType)
        if isinstance(run.passes, PassRef) and run.passes.index != 1:
            continue  # a later pass belongs to its attempt's first
        key = (run.task.id, run.campaign.slot)
        held = latest.get(key)
        if held is None or (not isinstance(held.campaign, msgspec.UnsetType) and held.campaign.attempt < run.campaign.attempt):
            latest[key] = run
    slots = []
    for r in plan.runs:
        planned = replace(r, repeat=kept.offsets.get(r.task.id, 0) + r.repeat, campaign=campaign, slot=r.repeat)
        slots.append(Slot(planned, latest.get((r.task.id, r.repeat))))
    return Campaign(kept, tuple(slots))


def _offsets(
    view: LedgerView, workspace: Workspace, campaign: str, condition: tuple[str, str],
    ours: list[RunRecorded], repeats: dict[str, int],
) -> dict[str, int]:
    """Each task's repeat offset: read off the campaign's own runs when it has some (its plan
    file was lost), else above every repeat held under the condition."""
    offsets: dict[str, int] = {}
    for run in ours:
        assert not isinstance(run.campaign, msgspec.UnsetType)
        offsets.setdefault(run.task.id, run.repeat - run.campaign.slot)
    ceiling = _repeat_ceiling(view, workspace, condition, campaign)
    return {task_id: offsets.get(task_id, ceiling.get(task_id, 0)) for task_id in repeats}
