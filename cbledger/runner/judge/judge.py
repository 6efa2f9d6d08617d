"""Judging preserved runs: the prompt, the judge's answer read into criterion scores, the event.

The judge sees the task's prompt, its rubric and what the run changed (the diff from the
baseline to the captured end state, restored from the run's bundle) and the run's own figures;
it is not told the deterministic verdict, so its opinion is its own. It answers with one JSON
object, `{"criteria": {"<id>": <points>, ...}, "rationale": "..."}`; an answer that leaves out a
criterion, names an unknown one or gives points outside 0..max is refused for that run and
nothing is recorded for it. The overall score is the points over the maximum.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from cbledger import invocation
from cbledger.errors import UserError, did_you_mean
from cbledger.ledger.events import (
    Actor,
    Cost,
    CriterionScore,
    LaneUsage,
    PricingPublished,
    RubricScored,
    RubricScoredEvent,
    RunRecorded,
    SuiteArchived,
    make_event,
)
from cbledger.ledger.store import LedgerStore
from cbledger.runner import ledger_view, preserve, pricing
from cbledger.runner.judge import client
from cbledger.tasks import definitions, rubric
from cbledger.tasks.catalog import Catalog
from cbledger.tasks.suite_archive import kept_definitions
from cbledger.workspace import Workspace

MAX_DIFF_CHARS = 100_000
SYSTEM = (
    "You are judging one run of an agent that edited a KiCad project. Score each rubric criterion "
    "with whole points from 0 to its maximum, from the evidence shown only. Answer with one JSON "
    'object and nothing else: {"criteria": {"<criterion id>": <points>, ...}, "rationale": "<one paragraph>"}.'
)


@dataclass
class JudgeResult:
    scored: list[RubricScored] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


def messages(prompt: str, rub: rubric.Rubric, run: RunRecorded, diff: str) -> list[dict[str, str]]:
    stats = run.stats
    facts = (
        f"exit path: {stats.exit_path}, turns used: {stats.turns_used}, files touched: {', '.join(stats.files_touched) or 'none'}"
        if stats is not None else "the run has no transcript figures"
    )
    user = "\n\n".join((
        f"## Task {run.task.id}\n\n{prompt}",
        f"## Rubric\n\n{rub.text.strip()}",
        f"## The run\n\n{facts}",
        f"## What the run changed (diff from the baseline to its end state)\n\n```diff\n{diff}\n```",
    ))
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def prompt_sha256(msgs: list[dict[str, str]]) -> str:
    return hashlib.sha256(json.dumps(msgs, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


_FENCED = re.compile(r"^```(?:json)?\s*\n(?P<body>.*)\n```\s*$", re.S)


def read_answer(text: str, rub: rubric.Rubric) -> tuple[list[CriterionScore], str | None]:
    """The judge's points per criterion, in the rubric's order, and its rationale."""
    stripped = text.strip()
    m = _FENCED.match(stripped)
    try:
        data = json.loads(m.group("body") if m else stripped)
    except ValueError:
        raise UserError(f"the judge's answer is not one JSON object: {stripped[:200]!r}") from None
    given = data.get("criteria") if isinstance(data, dict) else None
    if not isinstance(given, dict):
        raise UserError("the judge's answer has no `criteria` object")
    unknown = sorted(set(given) - {c.id for c in rub.criteria})
    if unknown:
        raise UserError(f"the judge scored criteria the rubric does not have: {', '.join(unknown)}")
    out = []
    for c in rub.criteria:
        points = given.get(c.id)
        if c.id not in given:
            raise UserError(f"the judge left criterion {c.id!r} out of its answer")
        if isinstance(points, bool) or not isinstance(points, int):
            raise UserError(f"the judge gave criterion {c.id!r} no whole number of points")
        if not 0 <= points <= c.max_points:
            raise UserError(f"the judge gave criterion {c.id!r} {points} points; it has 0 to {c.max_points}")
        out.append(CriterionScore(id=c.id, points=points, max_points=c.max_points))
    rationale = data.get("rationale")
    return out, rationale if isinstance(rationale, str) and rationale else None


def run_diff(workspace: Workspace, catalog: Catalog, run: RunRecorded) -> str:
    """The patch from the run's baseline to its captured end state, cut at `MAX_DIFF_CHARS`."""
    bundle = workspace.stored(run.sandbox.store)
    if bundle is None:
        raise UserError(f"run {run.run_id}: recorded store path {run.sandbox.store!r} is outside the project")
    restored = preserve.restore(bundle, run.sandbox, catalog.fixture(run.fixture.id))
    try:
        repo = restored.repo
        patch = repo.diff(run.sandbox.baseline_sha, run.sandbox.capture_sha).patch or ""
    except (pygit2.GitError, KeyError, ValueError) as exc:
        raise UserError(f"run {run.run_id}: cannot diff its preserved commits ({exc})") from None
    finally:
        shutil.rmtree(restored.path, ignore_errors=True)
    if len(patch) > MAX_DIFF_CHARS:
        patch = patch[:MAX_DIFF_CHARS] + f"\n[... cut at {MAX_DIFF_CHARS} characters]"
    return patch or "(no change)"


def score_body(
    run: RunRecorded, judge_model: str, sha: str, answer: client.Answer, rub: rubric.Rubric,
    table: PricingPublished | None, suite_version: str | None,
) -> RubricScored:
    criteria, rationale = read_answer(answer.text, rub)
    route = pricing.route(judge_model, table)
    usage = LaneUsage(
        lane="harness-judge", tokens_in=answer.tokens_in, tokens_out=answer.tokens_out,
        cost=Cost(
            usd_micros=pricing.usd_micros(route.price if route else None, answer.tokens_in, answer.tokens_out),
            price_table_version=table.table_version if table is not None else None,
        ),
        provider_models=[answer.model] if answer.model else [],
    )
    return RubricScored(
        run_id=run.run_id, suite_version=suite_version, judge_model=judge_model, prompt_sha256=sha,
        score=sum(c.points for c in criteria) / sum(c.max_points for c in criteria),
        rationale=rationale, criteria=criteria, usage=usage,
    )


def judge(
    workspace: Workspace, selected: Callable[[RunRecorded], bool], judge_model: str, actor: Actor,
    *, base_url: str | None = None, env: dict[str, str] | None = None,
    on_done: Callable[[str, float], None] | None = None, named: Sequence[str] = (), again: bool = False,
) -> JudgeResult:
    """Scores every selected, live run whose task has a rubric, one event per run as it is judged.
    A run already scored is skipped unless `again`: the first score is the one that counts, so
    the same command after an interrupt pays only for the runs it had not reached.

    A selection that holds no run, or names a run id the ledger does not hold, is refused before
    anything is asked: a mistyped id that judged nothing would otherwise read as success."""
    catalog = Catalog(workspace.root)
    view = ledger_view.read(workspace.ledger)
    ledger = workspace.ledger if isinstance(workspace.ledger, str) else workspace.shown_path(workspace.ledger)
    unknown = [run_id for run_id in named if run_id not in view.runs]
    if unknown:
        raise UserError(f"runs={','.join(unknown)}: no such run in {ledger}{did_you_mean(unknown[0], view.runs)}; nothing judged")
    chosen = [(run_id, run) for run_id, run in view.runs.items() if selected(run)]
    if not chosen:
        raise UserError(f"no run in {ledger} is selected; nothing judged")
    known = set(catalog.task_ids())
    for task_id in sorted({run.task.id for _, run in chosen} & known):
        # a rubric that cannot be read is bad input: refused before any run is judged, so a
        # batch is never half-scored for it (a run's own failures come later, one by one)
        task = catalog.task(task_id)
        rubric.load(task.dir, task.manifest.rubric)
    r = client.route(judge_model, dict(os.environ) if env is None else env, base_url)
    store = LedgerStore(workspace.ledger)
    existing = _rubric_counts(store)
    result = JudgeResult()
    for run_id, run in chosen:
        if run_id in view.retracted:
            result.skipped.append((run_id, "retracted"))
            continue
        if run.task.id not in catalog.task_ids():
            result.skipped.append((run_id, f"task {run.task.id} is not in the catalog"))
            continue
        if existing.get(run_id) and not again:
            result.skipped.append((run_id, "already scored (the first score counts; --again scores it again)"))
            continue
        task = catalog.task(run.task.id)
        try:
            rub = rubric.load(task.dir, task.manifest.rubric)
            if rub is None:
                removed_rubric(workspace, view.archived, task.dir, task.manifest.rubric)
                result.skipped.append((run_id, f"task {run.task.id} has no rubric"))
                continue
            kept_rubric(workspace, view.archived, task.dir.name, task.manifest.rubric, rub)
            msgs = messages(task.manifest.request.prompt or "", rub, run, run_diff(workspace, catalog, run))
            answer = client.chat(r, msgs)
            body = score_body(run, judge_model, prompt_sha256(msgs), answer, rub, view.pricing, view.suite_version)
        except UserError as exc:
            result.failed.append((run_id, str(exc)))
            continue
        n = existing.get(run_id, 0) + 1
        existing[run_id] = n
        store.append([make_event(body, id=f"rubric:{run_id}:{n}", actor=actor)])
        result.scored.append(body)
        if on_done:
            on_done(run_id, body.score)
    return result


def kept_rubric(
    workspace: Workspace, archived: SuiteArchived | None, task_id: str, named: str | None, rub: rubric.Rubric
) -> None:
    """Refuses a rubric that is not, byte for byte, the one the current suite version kept: a
    rubric edited or added after the bump is no suite's, and its scores would be read as the
    suite's (`replay --verify` holds every score to its version's kept rubric too)."""
    version = archived.suite_version if archived is not None else None
    if archived is None:
        raise UserError(f"{rub.path}: the current suite version keeps no definitions to hold the rubric to; "
                        f"`{invocation.command('suite', 'bump', '--reason', '...')}` keeps them")
    entry = kept_definitions(workspace, archived).tasks.get(task_id)
    kept = entry.files.get(named or rubric.DEFAULT_FILE) if entry is not None else None
    if kept is None or kept.sha256 != definitions.sha256(rub.text.encode("utf-8")):
        raise UserError(f"{rub.path}: not the rubric suite {version} kept ({'changed' if kept else 'not in its definitions'}); "
                        f"a rubric is part of the suite: `{invocation.command('suite', 'bump', '--reason', '...')}` records it")


def removed_rubric(workspace: Workspace, archived: SuiteArchived | None, task_dir: Path, named: str | None) -> None:
    """Refuses a task with no rubric on disk whose suite version kept one: the rubric was deleted
    after the bump, and skipping its runs would read as a task the suite never judged."""
    if archived is None:
        return
    entry = kept_definitions(workspace, archived).tasks.get(task_dir.name)
    name = named or rubric.DEFAULT_FILE
    if entry is not None and name in entry.files:
        raise UserError(f"{task_dir / name}: removed, but suite {archived.suite_version} kept it; restore it "
                        f"(the kept copy is under {workspace.shown_path(workspace.suites)}/), or bump the suite without it")


def _rubric_counts(store: LedgerStore) -> dict[str, int]:
    out: dict[str, int] = {}
    for stored in store.read(types={"rubric.scored"}):
        if isinstance(stored.event, RubricScoredEvent):
            out[stored.event.body.run_id] = out.get(stored.event.body.run_id, 0) + 1
    return out
