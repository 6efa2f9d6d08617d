"""`cbledger rerun RUN...`: a run re-executed from its cassette through the real harness. The
work is in `cbledger.reproduce.rerun`; this parses, calls and prints."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from cbledger.cli.common import JsonFlag, LedgerOption, RootOption, workspace
from cbledger.reproduce import rerun as rerun_mod


def rerun(
    run_ids: Annotated[list[str], typer.Argument(metavar="RUN...", help="The runs to re-execute (their run ids).")],
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
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Re-execute recorded runs offline: the run's seed planted again, the same copperhead with the
    same arguments, caps and configuration, its recorded model exchanges served by the loopback
    endpoint; then the end state, diff, transcript and grade compared with the preserved run
    (modulo the normalisation docs/REPRODUCE.md lists). Nothing is written to the ledger.

    Exit codes (several runs: the worst): 0 identical; 1 diverged (the first differing request
    or file is named); 3 cassette exhausted (the harness asked for more than was recorded);
    2 bad input (no such run, no cassette, another harness build for a strict rerun).
    """
    results = rerun_mod.rerun_many(workspace(ledger, root), run_ids, copperhead_cli=copperhead_cli,
                                   strict=strict, unsandboxed=unsandboxed, from_session=from_session)
    if as_json:
        typer.echo(json.dumps([r.to_dict() for r in results], sort_keys=True))
    else:
        for r in results:
            print_result(r)
    raise typer.Exit(max((r.exit_code for r in results), default=0))


def print_result(r: rerun_mod.RerunResult) -> None:
    changed = "outcome changed" if r.outcome_changed else "outcome unchanged"
    typer.echo(f"{r.run_id}  {r.status}  ({r.mode}; {changed}: {r.original[0]}/{r.original[1]} -> {r.rerun[0]}/{r.rerun[1]})")
    if r.first_request:
        typer.echo(f"  first differing request: {r.first_request}")
    for flagged in r.flagged[1:]:
        typer.echo(f"  also differs: {flagged}")
    for d in r.differences:
        typer.echo(f"  {d}")


def register(app: typer.Typer) -> None:
    app.command()(rerun)
