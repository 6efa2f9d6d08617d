"""`cbledger rerun RUN...`: a run re-executed from its cassette through the real harness. The
work is in `cbledger.reproduce.rerun`; this parses, calls and prints."""

from __future__ import annotations

import json
import time
from typing import Annotated

import msgspec
import typer

from cbledger.cli.common import JsonFlag, LedgerOption, RootOption, fail, workspace
from cbledger.reproduce import attach as attach_mod
from cbledger.reproduce import rerun as rerun_mod
from cbledger.runner import ledger_view
from cbledger.workspace import Workspace


def rerun(
    run_ids: Annotated[list[str] | None, typer.Argument(metavar="RUN...", help="The runs to re-execute (their run ids).")] = None,
    copperhead_cli: Annotated[str | None, typer.Option(
        "--copperhead-cli", metavar="CLI_JS",
        help="Another copperhead build to re-execute through (lenient: the k-th recorded answer for the k-th request, "
        "differing requests flagged). Default: the project's install, strict.",
    )] = None,
    strict: Annotated[bool | None, typer.Option(
        "--strict/--lenient", help="Refuse (strict) or flag (lenient) a request that differs from the recorded one.",
    )] = None,
    unsandboxed: Annotated[bool, typer.Option("--unsandboxed", help="Run the harness without the bubblewrap sandbox.")] = False,
    from_session: Annotated[bool, typer.Option(
        "--from-session",
        help="A scripted run recorded before cassettes: serve it the session script its suite version kept (requests not compared).",
    )] = False,
    attach: Annotated[bool, typer.Option(
        "--attach",
        help="With --from-session: when every rerun is identical, keep what the recording proxy saw as each run's cassette "
        "(cassette.attached); nothing is written if any is refused or diverges.",
    )] = False,
    all_runs: Annotated[bool, typer.Option(
        "--all", help="Every run this can act on instead of RUN...: with --attach, every scripted run without a cassette "
        "(not retracted); otherwise every run with a cassette, and with --from-session every scripted run.",
    )] = False,
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Re-execute recorded runs offline: the run's seed planted again, the same copperhead with the
    same arguments, caps and configuration, its recorded model exchanges served by the loopback
    endpoint; then the end state, diff, transcript and grade compared with the preserved run
    (modulo the normalisation docs/REPRODUCE.md lists). Nothing is written to the ledger.

    With --from-session --attach, a scripted run recorded before cassettes is re-executed
    strictly from its kept session through its own copperhead build, and when every run asked for
    reruns identically, each gets the cassette the recording proxy saw this time (appended as
    cassette.attached; later reruns compare its requests). It was recorded at the re-execution,
    not at the run. Refused, with nothing written: a retracted run, a run that has a cassette, a
    run that is not scripted, or any rerun that is not identical.

    Exit codes (several runs: the worst): 0 identical; 1 diverged (the first differing request
    or file is named); 3 cassette exhausted (the harness asked for more than was recorded);
    2 bad input (no such run, no cassette, another harness build for a strict rerun, a run
    --attach refuses).
    """
    ws = workspace(ledger, root)
    if all_runs == bool(run_ids):
        fail("give RUN... or --all (not both)")
    if attach:
        if not from_session or strict is False:
            fail("--attach re-executes a run from its kept session, strictly: pass --from-session, not --lenient")
        _attach(ws, run_ids, all_runs, copperhead_cli, unsandboxed, as_json)
        return
    view = ledger_view.read(ws.ledger)
    chosen = rerun_mod.runs_with_cassettes(view, from_session) if all_runs else list(run_ids or [])
    results = rerun_mod.rerun_many(ws, chosen, copperhead_cli=copperhead_cli,
                                   strict=strict, unsandboxed=unsandboxed, from_session=from_session)
    if as_json:
        typer.echo(json.dumps([r.to_dict() for r in results], sort_keys=True))
    else:
        for r in results:
            print_result(r)
    raise typer.Exit(max((r.exit_code for r in results), default=0))


def _attach(ws: Workspace, run_ids: list[str] | None, all_runs: bool, copperhead_cli: str | None, unsandboxed: bool,
            as_json: bool) -> None:
    chosen = attach_mod.candidates(ledger_view.read(ws.ledger)) if all_runs else list(run_ids or [])
    if not chosen:
        typer.echo("[]" if as_json else "nothing to attach: every scripted run that is not retracted has a cassette")
        return
    started = time.perf_counter()
    total = len(chosen)
    done = [0]

    def step(r: rerun_mod.RerunResult) -> None:
        done[0] += 1
        if not as_json:
            print_result(r, prefix=f"[{done[0]}/{total}] ")

    outcome = attach_mod.attach(ws, chosen, copperhead_cli=copperhead_cli, unsandboxed=unsandboxed, on_done=step)
    seconds = time.perf_counter() - started
    if as_json:
        kept = {a.run_id: a for a in outcome.attached}
        typer.echo(json.dumps([{**r.to_dict(), "attached": None if r.run_id not in kept else {
            "seq": kept[r.run_id].seq, **msgspec.to_builtins(kept[r.run_id].body.cassette)}} for r in outcome.results],
            sort_keys=True))
    elif outcome.attached:
        for a in outcome.attached:
            typer.echo(f"seq {a.seq}  cassette.attached {a.run_id}: {a.body.cassette.path} ({a.body.cassette.exchanges} exchanges)")
        typer.echo(f"attached {len(outcome.attached)} cassette(s) in {seconds:.0f} s")
    else:
        typer.echo(f"nothing attached: {sum(r.status != 'identical' for r in outcome.results)} of {total} rerun(s) "
                   "not identical", err=True)
    raise typer.Exit(outcome.exit_code)


def print_result(r: rerun_mod.RerunResult, prefix: str = "") -> None:
    changed = "outcome changed" if r.outcome_changed else "outcome unchanged"
    typer.echo(f"{prefix}{r.run_id}  {r.status}  ({r.mode}; {changed}: {r.original[0]}/{r.original[1]} -> {r.rerun[0]}/{r.rerun[1]})")
    if r.first_request:
        typer.echo(f"  first differing request: {r.first_request}")
    for flagged in r.flagged[1:]:
        typer.echo(f"  also differs: {flagged}")
    for d in r.differences:
        typer.echo(f"  {d}")


def register(app: typer.Typer) -> None:
    app.command()(rerun)
