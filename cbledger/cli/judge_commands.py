"""`cbledger judge`: the rubric tier, off unless asked. A judge model scores the selected runs
against their tasks' `rubric.md`; the scores are appended as `rubric.scored` and shown only in
the model-judged section (docs/JUDGING.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from cbledger import invocation
from cbledger.cli.common import JsonFlag, LedgerOption, RootOption, fail, require_project, workspace
from cbledger.cli.exits import INTERRUPTED
from cbledger.ledger.events import Actor, RubricScoredEvent
from cbledger.ledger.store import LedgerStore
from cbledger.login import login_name
from cbledger.projections.selection import SelectionError, parse
from cbledger.reproduce.regenerate import regenerate_after
from cbledger.runner.endpoint import script
from cbledger.runner.endpoint.server import Endpoint
from cbledger.runner.judge.judge import judge as judge_runs


def judge(
    select: Annotated[str, typer.Option(help="Which runs: selection terms (runs=ID,ID batch=ID model=ID … or all).")],
    model: Annotated[str | None, typer.Option(help="The judge model: compat:<id> (at $COPPERHEAD_BASE_URL) or an OpenAI model id.")] = None,
    session: Annotated[Path | None, typer.Option(
        help="A scripted judge: a session file served by a loopback endpoint in place of a provider (no model, no key); "
             "the model defaults to compat:judge-<session name>.",
    )] = None,
    again: Annotated[bool, typer.Option(
        "--again", help="Score runs that already hold a score too (a later score is kept, the first counts).",
    )] = False,
    project: Annotated[bool, typer.Option(help="Regenerate the projections afterwards.")] = True,
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Score selected runs with a judge model against their tasks' rubrics (model-judged; moves no headline number)."""
    where = workspace(ledger, root)
    require_project("judge reads each task's rubric from the project's tasks/")
    try:
        selection = parse(select)
    except SelectionError as exc:
        fail(f"--select: {exc}", 2)
    if selection.empty:
        fail("--select names no run", 2)
    actor = Actor(kind="reviewer", name=login_name("reviewer"))
    start = LedgerStore(where.ledger).head().seq
    try:
        if session is not None:
            scripted = script.load(session)
            judge_model = model or f"compat:judge-{scripted.name}"
            if not judge_model.startswith("compat:"):
                fail(f"--model {judge_model}: a scripted judge is served on the compat route (compat:<id>)", 2)
            with Endpoint() as endpoint:
                base = endpoint.serve("judge", scripted)
                result = judge_runs(where, selection.matches, judge_model, actor, base_url=base, env={},
                                    named=selection.runs, again=again)
        else:
            if model is None:
                fail("--model is required (or --session for a scripted judge)", 2)
            result = judge_runs(where, selection.matches, model, actor, named=selection.runs, again=again)
    except KeyboardInterrupt:
        # each score is appended as it comes, so what was judged stays; what the ledger took since
        # the start is what to name (an interrupt can land between an append and anything after it)
        recorded = [s.event.body.run_id for s in LedgerStore(where.ledger).read(since=start, types={"rubric.scored"})
                    if isinstance(s.event, RubricScoredEvent)]
        kept = (f"{len(recorded)} score(s) recorded before it ({', '.join(recorded)}), and the outputs not "
                f"regenerated: `{invocation.command('project', 'all')}` brings them up to date; the same "
                "command judges the rest (a run already scored is skipped)") if recorded else "no score recorded"
        fail(f"interrupted: {kept}", code=INTERRUPTED)
    unprojected: str | None = None
    if project and result.scored:
        # every output `run` and `project all` write, the site included: a committed site left
        # behind its ledger fails `replay --verify`
        _, unprojected = regenerate_after(where, "score(s)")
    if as_json:
        typer.echo(json.dumps({
            "scored": [{"runId": b.run_id, "score": b.score} for b in result.scored],
            "skipped": [{"runId": r, "reason": why} for r, why in result.skipped],
            "failed": [{"runId": r, "error": e} for r, e in result.failed],
        }, sort_keys=True))
    else:
        for b in result.scored:
            typer.echo(f"{b.run_id}: {b.score:.2f} (model-judged)")
        for run_id, why in result.skipped:
            typer.echo(f"{run_id}: skipped ({why})")
        typer.echo(f"judged {len(result.scored)}, skipped {len(result.skipped)}, failed {len(result.failed)}")
        for run_id, error in result.failed:
            typer.echo(f"  {run_id}: {error}", err=True)
    if unprojected:
        typer.echo(f"error: {unprojected}", err=True)
    if result.failed or unprojected:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command()(judge)
